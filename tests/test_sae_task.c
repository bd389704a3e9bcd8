/* test_sae_task.c -- attribution patching at an SAE's latents
 * (sae_task.h): the features' estimates and the error's sum to the
 * site's; the site's equals the sum of attribution patching's head
 * estimates over the layer (attrpatch.c, another code path); on the last
 * layer with logit differences each feature's estimate is the actual
 * patch (the feature's code moved to the source run's, computed by
 * sae_acts.c, patched into z by a hook, the metric read from the
 * forward's final residual); on layer 0 it is the derivative of that
 * patch (central differences); a run repeats bit for bit; refusals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"
#include "attnlab/hooks.h"
#include "attnlab/sae.h"
#include "attnlab/sae_acts.h"
#include "attnlab/sae_io.h"
#include "attnlab/sae_task.h"
#include "randmodel.h"
#include "test.h"

enum { TK_F = 40 };

/* A random SAE of either architecture on layer `layer`'s z of m (d_in
 * H·D = 24), scale 1.3 so that the scale's place in the formula shows. */
static void rand_sae(al_sae *s, al_sae_meta *meta, int arch, int layer) {
    al_sae_cfg c = al_sae_cfg_default(24, TK_F);
    c.arch = arch, c.k = 6, c.k_aux = 0;
    al_err e;
    CHECK_OK(al_sae_init(s, &c, 5 + (uint64_t)arch, &e), &e);
    /* encoder biases so that codes differ between the runs but not all fire */
    for (int i = 0; i < TK_F; i++) s->b_enc[i] = (float)(0.05 * ((i % 5) - 2));
    memset(meta, 0, sizeof *meta);
    meta->site = AL_SAE_SITE_Z;
    meta->hook_layer = layer;
    meta->normalized = 1;
    meta->scale = 1.3;
}

/* A Z hook that adds amt · delta[row] · dir to every row of the layer's z. */
typedef struct addz {
    const float *delta; /* (B·T) */
    const float *dir; /* (d) the decoder row over the scale */
    int d;
    float amt;
} addz;

static int addz_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    addz *c = ctx;
    size_t rows = (size_t)a->m->B * a->m->T;
    for (size_t r = 0; r < rows; r++)
        for (int k = 0; k < c->d; k++) a->data[r * a->ld + k] += c->amt * c->delta[r] * c->dir[k];
    return 0;
}

/* The metric of the base run with feature i's code moved by amt × (source
 * − base) at every position. */
static double patched(al_model *m, al_sae *s, const al_sae_meta *meta, const al_pairs *t, int den,
                      int i, float amt) {
    al_err e;
    size_t rows = (size_t)t->N * t->T;
    float *fc = malloc(sizeof(float) * rows), *fr = malloc(sizeof(float) * rows),
          *delta = malloc(sizeof(float) * rows), *dir = malloc(sizeof(float) * 24);
    CHECK_OK(al_sae_feature_acts(m, s, meta, i, t->clean, t->N, t->T, fc, &e), &e);
    CHECK_OK(al_sae_feature_acts(m, s, meta, i, t->corr, t->N, t->T, fr, &e), &e);
    for (size_t r = 0; r < rows; r++) delta[r] = den ? fc[r] - fr[r] : fr[r] - fc[r];
    for (int k = 0; k < 24; k++) dir[k] = (float)(s->W_dec[(size_t)i * 24 + k] / meta->scale);
    addz c = {delta, dir, 24, amt};
    CHECK_OK(al_hook_add(m, AL_HOOK_Z, meta->hook_layer, addz_hook, &c, &e), &e);
    double v = task_metric(m, t, den ? 1 : 0);
    al_hook_remove(m, &c);
    free(fc), free(fr), free(delta), free(dir);
    return v;
}

/* Features + error = site; site = Σ of attrpatch's heads of the layer. */
static void check_sums(al_model *m, al_sae *s, const al_sae_meta *meta, const al_pairs *t,
                       const char *dir, const al_sae_task_result *r) {
    double sum = r->effect[AL_SAE_TASK_ERROR(r)], site = r->effect[AL_SAE_TASK_SITE(r)];
    for (int i = 0; i < r->d_sae; i++) sum += r->effect[i];
    CHECKF(fabs(sum - site) <= 1e-4 * (fabs(site) + 1e-3), "features + error %.9g, site %.9g", sum,
           site);
    al_patch_opts po = al_patch_opts_defaults();
    po.direction = dir;
    al_attrpatch_result ap;
    al_err e;
    CHECK_OK(al_attrpatch_run(m, t, &po, 0, &ap, &e), &e);
    double heads = 0;
    for (int h = 0; h < ap.H; h++) heads += ap.head[meta->hook_layer * ap.H + h];
    CHECKF(fabs(heads - site) <= 1e-4 * (fabs(site) + 1e-3), "heads %.9g, site %.9g", heads, site);
    CHECK(fabs(ap.m_clean - r->m_clean) < 1e-6 && fabs(ap.m_corr - r->m_corr) < 1e-6);
    al_attrpatch_result_free(&ap);
    (void)s;
}

/* The largest |effect| features, n of them. */
static void top_features(const al_sae_task_result *r, int *out, int n) {
    for (int q = 0; q < n; q++) {
        int best = -1;
        for (int i = 0; i < r->d_sae; i++) {
            int taken = 0;
            for (int p = 0; p < q; p++) taken |= out[p] == i;
            if (!taken && (best < 0 || fabs(r->effect[i]) > fabs(r->effect[best]))) best = i;
        }
        out[q] = best;
    }
}

TEST(sae_task_last_layer_is_the_actual_patch) {
    for (int arch = 0; arch < 2; arch++)
        for (int den = 0; den < 2; den++) {
            al_model m;
            rand_model(&m, 2, 0, 20);
            scale_qk(&m, 3.0f);
            al_pairs t;
            al_err e;
            task(&t, &m, 5, 6, &e);
            as_logit_diff(&t, 20);
            al_sae s;
            al_sae_meta meta;
            rand_sae(&s, &meta, arch ? AL_SAE_L1 : AL_SAE_TOPK, 1);
            al_sae_task_opts o = AL_SAE_TASK_OPTS_INIT;
            o.direction = den ? "denoise" : "noise";
            o.batch = 4; /* two batches, the second short */
            al_sae_task_result r;
            CHECK_OK(al_sae_task_run(&m, &s, &meta, &t, &o, &r, &e), &e);
            CHECK(r.d_sae == TK_F && r.layer == 1 && r.N == 6 && r.n_moved > 0);
            check_sums(&m, &s, &meta, &t, o.direction, &r);
            double mc = task_metric(&m, &t, 0), mr = task_metric(&m, &t, 1);
            CHECK(fabs(mc - r.m_clean) < 1e-5 && fabs(mr - r.m_corr) < 1e-5);
            int top[3];
            top_features(&r, top, 3);
            for (int q = 0; q < 3; q++) {
                int i = top[q];
                double mp = patched(&m, &s, &meta, &t, den, i, 1.0f);
                double act = den ? (mp - mr) / (mc - mr) : (mc - mp) / (mc - mr);
                CHECKF(fabs(act - r.effect[i]) <= 2e-4 * (fabs(r.effect[i]) + 1e-3),
                       "arch %d den %d feature %d: estimate %.9g, actual %.9g", arch, den, i,
                       r.effect[i], act);
                CHECK(isfinite(r.ci[i].se) && r.ci[i].se >= 0);
                CHECK(r.ci[i].lo <= r.effect[i] + 1e-12 && r.effect[i] <= r.ci[i].hi + 1e-12);
            }
            /* a feature that never differs between the runs reads exactly 0 */
            for (int i = 0; i < TK_F; i++)
                if (r.effect[i] == 0) CHECK(r.ci[i].se == 0 || isnan(r.ci[i].se));
            /* bit for bit on a second run */
            al_sae_task_result r2;
            CHECK_OK(al_sae_task_run(&m, &s, &meta, &t, &o, &r2, &e), &e);
            CHECK(!memcmp(r.effect, r2.effect, sizeof(double) * (TK_F + 2)));
            CHECK(!memcmp(r.act_clean, r2.act_clean, sizeof(double) * TK_F));
            al_sae_task_result_free(&r2);
            al_sae_task_result_free(&r);
            al_sae_free(&s);
            al_pairs_free(&t);
            al_model_free(&m);
        }
}

/* Layer 0 of two, log-prob items: the attention of layer 1 and the
 * softmax bend M, so the estimate is the derivative of the patch, not
 * the patch: central differences of the patched metric in its amount. */
TEST(sae_task_layer0_is_the_derivative) {
    al_model m;
    rand_model(&m, 2, 0, 20);
    scale_qk(&m, 3.0f);
    al_pairs t;
    al_err e;
    task(&t, &m, 5, 4, &e);
    al_sae s;
    al_sae_meta meta;
    rand_sae(&s, &meta, AL_SAE_TOPK, 0);
    al_sae_task_opts o = AL_SAE_TASK_OPTS_INIT;
    al_sae_task_result r;
    CHECK_OK(al_sae_task_run(&m, &s, &meta, &t, &o, &r, &e), &e);
    check_sums(&m, &s, &meta, &t, "denoise", &r);
    double mc = task_metric(&m, &t, 0), mr = task_metric(&m, &t, 1);
    int top[2];
    top_features(&r, top, 2);
    for (int q = 0; q < 2; q++) {
        const float h = 0.05f;
        double up = patched(&m, &s, &meta, &t, 1, top[q], h),
               dn = patched(&m, &s, &meta, &t, 1, top[q], -h);
        double deriv = (up - dn) / (2.0 * h) / (mc - mr);
        CHECKF(fabs(deriv - r.effect[top[q]]) <= 2e-3 * fabs(r.effect[top[q]]) + 1e-5,
               "feature %d: estimate %.9g, derivative %.9g", top[q], r.effect[top[q]], deriv);
    }
    al_sae_task_result_free(&r);
    al_sae_free(&s);
    al_pairs_free(&t);
    al_model_free(&m);
}

static int noop_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)a, (void)ctx, (void)e;
    return 0;
}

TEST(sae_task_refusals) {
    al_model m;
    rand_model(&m, 2, 0, 20);
    al_pairs t;
    al_err e;
    task(&t, &m, 5, 3, &e);
    al_sae s;
    al_sae_meta meta;
    rand_sae(&s, &meta, AL_SAE_TOPK, 1);
    al_sae_task_opts o = AL_SAE_TASK_OPTS_INIT;
    al_sae_task_result r;
    o.direction = "sideways";
    CHECK(al_sae_task_run(&m, &s, &meta, &t, &o, &r, &e) == -1 && strstr(e.msg, "direction"));
    CHECK(r.effect == NULL);
    o = (al_sae_task_opts)AL_SAE_TASK_OPTS_INIT;
    o.batch = 0;
    CHECK(al_sae_task_run(&m, &s, &meta, &t, &o, &r, &e) == -1 && strstr(e.msg, "--batch"));
    o = (al_sae_task_opts)AL_SAE_TASK_OPTS_INIT;
    meta.site = AL_SAE_SITE_RESID_PRE;
    CHECK(al_sae_task_run(&m, &s, &meta, &t, &o, &r, &e) == -1 && strstr(e.msg, "residual"));
    meta.site = AL_SAE_SITE_Z;
    meta.hook_layer = 2;
    CHECK(al_sae_task_run(&m, &s, &meta, &t, &o, &r, &e) == -1);
    meta.hook_layer = 1;
    int x;
    CHECK_OK(al_hook_add(&m, AL_HOOK_Z, 0, noop_hook, &x, &e), &e);
    CHECK(al_sae_task_run(&m, &s, &meta, &t, &o, &r, &e) == -1 && strstr(e.msg, "hook"));
    al_hook_remove(&m, &x);
    /* a gap within noise: one pair of five differs in one early token;
     * the estimates divide by it, so the run says so (gap.h) */
    {
        al_pairs t5;
        task(&t5, &m, 5, 5, &e);
        memcpy(t5.corr, t5.clean, sizeof(int) * (size_t)t5.N * t5.T);
        t5.corr[1] = (t5.clean[1] + 1) % 20;
        CHECK_OK(al_sae_task_run(&m, &s, &meta, &t5, &o, &r, &e), &e);
        CHECKF(r.warn.n == 1 && strstr(r.warn.msg[0], "barely differ"), "%d: %s", r.warn.n,
               r.warn.n ? r.warn.msg[0] : "");
        al_sae_task_result_free(&r);
        al_pairs_free(&t5);
    }
    /* exact or first order */
    char note[AL_WARN_LEN];
    CHECK(al_sae_task_exact(&m.cfg, 1, &t, note, sizeof note) == 0 && strstr(note, "log-prob"));
    t.logit_diff = 1;
    CHECK(al_sae_task_exact(&m.cfg, 1, &t, note, sizeof note) == 1);
    CHECK(al_sae_task_exact(&m.cfg, 0, &t, note, sizeof note) == 0 && strstr(note, "later layers"));
    t.logit_diff = 0;
    /* nothing to divide by: corrupted = clean */
    memcpy(t.corr, t.clean, sizeof(int) * (size_t)t.N * t.T);
    CHECK(al_sae_task_run(&m, &s, &meta, &t, &o, &r, &e) == -1 && strstr(e.msg, "the same"));
    CHECK(r.effect == NULL && r.ci == NULL);
    al_sae_free(&s);
    al_pairs_free(&t);
    al_model_free(&m);
}
