/* test_patch.c -- activation patching: the engine hook (al_patch_spec)
 * against exact identities and against z replacement, and the analysis
 * (patch.h) on the hand-built circuit of planted.h, whose answers are
 * known (1.0 is the induction head, 0.1 and 1.1 write nothing). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/model.h"
#include "attnlab/patch.h"
#include "attnlab/scores.h"
#include "planted.h"
#include "test.h"

enum { TB = 3, TT = 8 };

static void tiny_model(al_model *m, int tied) {
    al_config c = al_config_default();
    c.n_layers = 2, c.d_model = 16, c.n_heads = 2, c.d_head = 8, c.n_ctx = TT;
    c.d_vocab = 11, c.tied_embeddings = tied, c.seed = 7;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
}

static void tokens(int *in, int n, int V, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) in[i] = (int)al_rng_below(&r, (uint32_t)V);
}

/* The source run's cache and probs, for (TB, TT) inputs of seed s. */
typedef struct cache {
    float *x, *z, *probs;
} cache;

static void run_cache(al_model *m, uint64_t s, int *in, int *tg, cache *c) {
    const al_config *k = &m->cfg;
    size_t BT = TB * TT;
    tokens(in, TB * TT, k->d_vocab, s);
    tokens(tg, TB * TT, k->d_vocab, s + 100);
    al_err e;
    CHECK_OK(al_model_forward(m, in, tg, TB, TT, &e), &e);
    c->x = malloc(sizeof(float) * (k->n_layers + 1) * BT * k->d_model);
    c->z = malloc(sizeof(float) * k->n_layers * BT * k->n_heads * k->d_head);
    c->probs = malloc(sizeof(float) * BT * k->d_vocab);
    al_model_copy_acts(m, c->x, c->z);
    memcpy(c->probs, m->probs, sizeof(float) * BT * k->d_vocab);
}

static void cache_free(cache *c) {
    free(c->x);
    free(c->z);
    free(c->probs);
}

static int same_probs(const al_model *m, const float *p) {
    return !memcmp(m->probs, p, sizeof(float) * TB * TT * m->cfg.d_vocab);
}

/* All-zero masks change nothing, bit for bit, tied and untied. */
TEST(patch_zero_mask_bit_identical) {
    for (int tied = 0; tied < 2; tied++) {
        al_model m;
        tiny_model(&m, tied);
        int ia[TB * TT], ta[TB * TT], ib[TB * TT], tb[TB * TT];
        cache a, b;
        run_cache(&m, 1, ia, ta, &a);
        run_cache(&m, 2, ib, tb, &b);
        unsigned char xm[3 * TT] = {0}, zm[2 * 2 * TT] = {0};
        al_patch_spec sp = {.src_x = a.x, .src_z = a.z, .x_mask = xm, .z_mask = zm};
        al_err e;
        CHECK_OK(al_patch_hooks_add(&m, &sp, &e), &e);
        CHECK_OK(al_model_forward(&m, ib, tb, TB, TT, &e), &e);
        CHECK(same_probs(&m, b.probs));
        al_hook_remove(&m, &sp);
        cache_free(&a);
        cache_free(&b);
        al_model_free(&m);
    }
}

/* No LayerNorm, no MLP: the residual stream entering layer l determines
 * everything after it, so patching it at every position (l = 0, 1, and
 * the final one) reproduces the source run's probabilities exactly; one
 * position short does not. A patched forward refuses backward. */
TEST(patch_full_resid_reproduces_source) {
    al_model m;
    tiny_model(&m, 0);
    int ia[TB * TT], ta[TB * TT], ib[TB * TT], tb[TB * TT];
    cache a, b;
    run_cache(&m, 1, ia, ta, &a);
    run_cache(&m, 2, ib, tb, &b);
    CHECK(!same_probs(&m, a.probs));
    al_err e;
    for (int l = 0; l <= 2; l++) {
        unsigned char xm[3 * TT] = {0};
        memset(xm + l * TT, 1, TT);
        al_patch_spec sp = {.src_x = a.x, .x_mask = xm};
        CHECK_OK(al_patch_hooks_add(&m, &sp, &e), &e);
        CHECK_OK(al_model_forward(&m, ib, tb, TB, TT, &e), &e);
        CHECKF(same_probs(&m, a.probs), "layer %d", l);
        xm[l * TT + 3] = 0;
        CHECK_OK(al_model_forward(&m, ib, tb, TB, TT, &e), &e);
        CHECKF(!same_probs(&m, a.probs), "layer %d, position 3 not patched", l);
        CHECK(al_model_backward(&m, &e) == -1 && strstr(e.msg, "patched"));
        al_hook_remove(&m, &sp);
    }
    CHECK_OK(al_model_forward(&m, ib, tb, TB, TT, &e), &e);
    CHECK(same_probs(&m, b.probs));
    CHECK_OK(al_model_backward(&m, &e), &e);
    /* a mask without its source is refused */
    unsigned char xm[3 * TT] = {0};
    al_patch_spec bad = {.x_mask = xm};
    CHECK(al_patch_hooks_add(&m, &bad, &e) == -1 && strstr(e.msg, "source"));
    CHECK(m.hooks.n == 0);
    cache_free(&a);
    cache_free(&b);
    al_model_free(&m);
}

/* Patching head (l,h)'s z at some positions is the same as replacing its
 * z by the target run's own z with the source's at those positions. */
TEST(patch_z_equals_replacement) {
    al_model m;
    tiny_model(&m, 0);
    const int H = 2, D = 8;
    int ia[TB * TT], ta[TB * TT], ib[TB * TT], tb[TB * TT];
    cache a, b;
    run_cache(&m, 1, ia, ta, &a);
    run_cache(&m, 2, ib, tb, &b);
    al_err e;
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < H; h++) {
            unsigned char zm[2 * 2 * TT] = {0};
            zm[(l * H + h) * TT + 2] = zm[(l * H + h) * TT + 5] = 1;
            al_patch_spec sp = {.src_z = a.z, .z_mask = zm};
            CHECK_OK(al_patch_hooks_add(&m, &sp, &e), &e);
            CHECK_OK(al_model_forward(&m, ib, tb, TB, TT, &e), &e);
            float *p1 = malloc(sizeof(float) * TB * TT * 11);
            memcpy(p1, m.probs, sizeof(float) * TB * TT * 11);
            CHECK(!same_probs(&m, b.probs));
            al_hook_remove(&m, &sp);
            float rep[TB * TT * 8];
            for (int i = 0; i < TB * TT; i++) {
                int t = i % TT;
                const float *src = (t == 2 || t == 5) ? a.z : b.z;
                memcpy(rep + i * D, src + (((size_t)l * TB * TT + i) * H + h) * D,
                       sizeof(float) * D);
            }
            const float *zr[4] = {NULL};
            zr[l * H + h] = rep;
            CHECK_OK(al_zrep_hooks_add(&m, zr, &e), &e);
            CHECK_OK(al_model_forward(&m, ib, tb, TB, TT, &e), &e);
            CHECKF(same_probs(&m, p1), "head %d.%d", l, h);
            al_hook_remove(&m, zr);
            free(p1);
        }
    cache_free(&a);
    cache_free(&b);
    al_model_free(&m);
}

/* ------------------------------------------------------- the analysis */

enum { PR = 10, PT = 2 * PR + 1 };

static al_patch_opts small_opts(const char *comp, const char *dir) {
    al_patch_opts o = al_patch_opts_defaults();
    o.component = comp, o.direction = dir, o.probe_r = PR, o.probe_n = 20, o.batch = 8;
    return o;
}

/* The induction task of o on m (BOS 0), then the analysis. */
static int run_(al_model *m, const al_patch_opts *o, al_patch_result *r, al_err *e) {
    al_pairs t;
    memset(r, 0, sizeof *r);
    if (al_patch_task_make(&t, m, NULL, 0, o, e)) return -1;
    int rc = al_patch_run(m, &t, o, r, e);
    al_pairs_free(&t);
    return rc;
}

static int eval_(al_model *m, const al_patch_opts *o, const unsigned char *xm,
                 const unsigned char *zm, double *mp, double *mc, double *mr, al_err *e) {
    al_pairs t;
    if (al_patch_task_make(&t, m, NULL, 0, o, e)) return -1;
    int rc = al_patch_eval(m, &t, o, xm, zm, NULL, NULL, mp, mc, mr, e);
    al_pairs_free(&t);
    return rc;
}

TEST(patch_opts_defaults) {
    al_patch_opts o = al_patch_opts_defaults();
    CHECK(!strcmp(o.task, "induction") && !strcmp(o.component, "head") &&
          !strcmp(o.direction, "denoise") && o.probe_r == 0 && o.probe_n == 64 &&
          o.probe_seed == 1 && o.batch == 8);
    al_err e;
    CHECK_OK(al_patch_opts_check(&o, &e), &e);
}

/* Layer 0's whole residual stream is the input: patched everywhere it
 * gives the source run's metric exactly; patched on the first half only
 * (where the two runs differ) likewise, so the effect is 1; patched on
 * the second half only (where they agree) it changes nothing. */
TEST(patch_planted_resid_identities) {
    al_model m;
    planted_model(&m);
    al_err e;
    double mp, mc, mr;
    unsigned char xm[3 * PT] = {0};
    memset(xm, 1, PT);
    al_patch_opts den = small_opts("resid", "denoise"), noi = small_opts("resid", "noise");
    CHECK_OK(eval_(&m, &den, xm, NULL, &mp, &mc, &mr, &e), &e);
    CHECKF(mc > mr + 1.0, "clean %g corrupted %g", mc, mr);
    CHECK(mp == mc);
    CHECK_OK(eval_(&m, &noi, xm, NULL, &mp, NULL, NULL, &e), &e);
    CHECK(mp == mr);
    memset(xm, 0, PT);
    memset(xm + 1, 1, PR);
    CHECK_OK(eval_(&m, &den, xm, NULL, &mp, NULL, NULL, &e), &e);
    CHECK_NEAR((mp - mr) / (mc - mr), 1.0, 1e-9);
    memset(xm, 0, PT);
    memset(xm + PR + 1, 1, PR);
    CHECK_OK(eval_(&m, &den, xm, NULL, &mp, NULL, NULL, &e), &e);
    CHECK_NEAR((mp - mr) / (mc - mr), 0.0, 1e-9);
    /* the sweep: BOS and the second half at layer 0 do nothing */
    al_patch_result r;
    CHECK_OK(run_(&m, &den, &r, &e), &e);
    CHECK(r.rows == 2 && r.cols == PT && r.n == 2 * PT && r.T == PT);
    CHECK(r.m_clean == mc && r.m_corr == mr);
    CHECK_NEAR(r.effect[0], 0.0, 1e-9);
    for (int t = PR + 1; t < PT; t++) CHECK_NEAR(r.effect[t], 0.0, 1e-9);
    /* A single first-half position at layer 0 gives the previous-token
     * head a clean key next to a corrupted value: the induction head then
     * copies the wrong token confidently, so the metric gets worse. At
     * layer 1 position j (j = 2..R) carries the clean key and value the
     * induction head needs at position R+j−1: about 1/(R−1) each. */
    double first = 0;
    for (int t = 1; t <= PR; t++) {
        CHECKF(r.effect[t] < 0, "layer 0 position %d: %g", t, r.effect[t]);
        if (t >= 2) CHECKF(r.effect[PT + t] > 0.05, "layer 1 position %d: %g", t, r.effect[PT + t]);
        first += r.effect[PT + t];
    }
    CHECK_NEAR(first, 1.0, 0.1);
    al_patch_result_free(&r);
    CHECK(r.metric == NULL && r.n == 0);
    al_model_free(&m);
}

/* Patching the induction head's output restores (denoising) or breaks
 * (noising) most of the metric; heads that write nothing have no effect.
 * The model's gates and patch spec are left as they were. */
TEST(patch_planted_heads) {
    al_model m;
    planted_model(&m);
    al_err e;
    const float *mine[2 * PH] = {NULL}; /* the caller's (no-op) hook: must stay */
    CHECK_OK(al_zrep_hooks_add(&m, mine, &e), &e);
    m.gates[1 * PH + 2] = 0.5f;
    const char *dirs[] = {"denoise", "noise"};
    for (int d = 0; d < 2; d++) {
        al_patch_opts o = small_opts("head", dirs[d]);
        al_patch_result r;
        CHECK_OK(run_(&m, &o, &r, &e), &e);
        CHECK(r.rows == 2 && r.cols == PH && r.n == 2 * PH);
        CHECKF(r.effect[1 * PH + 0] > 0.5, "%s: induction head effect %g", dirs[d],
               r.effect[1 * PH + 0]);
        CHECKF(fabs(r.effect[0 * PH + 1]) < 0.05 && fabs(r.effect[1 * PH + 1]) < 0.05, "%s: %g %g",
               dirs[d], r.effect[1], r.effect[PH + 1]);
        /* the grid's entry is al_patch_eval of the same mask */
        unsigned char zm[2 * PH * PT] = {0};
        memset(zm + (1 * PH + 0) * PT, 1, PT);
        double mp;
        CHECK_OK(eval_(&m, &o, NULL, zm, &mp, NULL, NULL, &e), &e);
        CHECK(mp == r.metric[1 * PH + 0]);
        al_patch_result_free(&r);
    }
    al_patch_opts o = small_opts("head_pos", "denoise");
    al_patch_result r;
    CHECK_OK(run_(&m, &o, &r, &e), &e);
    CHECK(r.rows == 2 * PH && r.cols == PT && r.n == 2 * PH * PT);
    double ind = 0, none = 0;
    for (int t = 0; t < PT; t++) {
        ind += r.effect[(1 * PH + 0) * PT + t];
        none += fabs(r.effect[(1 * PH + 1) * PT + t]);
    }
    /* each second-half position is restored separately: (R−1) positions
     * each restore about 1/(R−1) of the metric */
    CHECKF(ind > 0.5, "sum of per-position effects of 1.0: %g", ind);
    CHECK(none < 0.05);
    al_patch_result_free(&r);
    CHECK(m.hooks.n == 1 && m.hooks.h[0].ctx == (void *)mine && m.gates[1 * PH + 2] == 0.5f &&
          m.gates[0] == 1.0f);
    al_hook_clear(&m);
    al_model_free(&m);
}

/* The task and the metric, recomputed independently: the clean run is
 * scores' probe (M_clean = −loss_second of al_probe_run); the corrupted
 * run differs from it at every first-half position and nowhere else, and
 * M_corr is the mean log p over positions R+1..2R−1 of a plain forward. */
TEST(patch_task_and_metric_definitions) {
    al_model m;
    planted_model(&m);
    al_err e;
    al_patch_opts o = small_opts("head", "denoise");
    o.probe_n = 13, o.batch = 4; /* a last, partial batch */
    al_patch_result r;
    al_pairs tk;
    CHECK_OK(al_patch_task_make(&tk, &m, NULL, 0, &o, &e), &e);
    CHECK_OK(al_patch_run(&m, &tk, &o, &r, &e), &e);
    CHECK(tk.n_items == 13 * (PR - 1) && !tk.logit_diff && tk.T == PT);
    al_probe p;
    al_probe_scores ps;
    CHECK_OK(al_probe_make(&p, PR, 13, o.probe_seed, PV, 0, NULL, &e), &e);
    CHECK_OK(al_probe_run(&m, &p, 16, &ps, &e), &e);
    CHECK(!memcmp(tk.clean, p.tokens, sizeof(int) * 13 * PT));
    CHECK_NEAR(r.m_clean, -ps.loss_second, 1e-6); /* double log-softmax vs float losses */
    int diff_ok = 1;
    for (int n = 0; n < 13; n++)
        for (int t = 0; t < PT; t++) {
            int c = tk.clean[n * PT + t], x = tk.corr[n * PT + t];
            if ((t >= 1 && t <= PR) != (c != x) || (x == 0 && t > 0)) diff_ok = 0;
        }
    CHECK(diff_ok);
    int tg[13 * PT];
    for (int i = 0; i < 13 * PT; i++) tg[i] = i % PT + 1 < PT ? tk.clean[i + 1] : -1;
    CHECK_OK(al_model_forward(&m, tk.corr, tg, 13, PT, &e), &e);
    double s = 0;
    for (int n = 0; n < 13; n++)
        for (int t = PR + 1; t <= 2 * PR - 1; t++) s -= m.losses[n * PT + t];
    CHECK_NEAR(r.m_corr, s / (13 * (PR - 1)), 1e-6);
    CHECK(r.m_clean > r.m_corr + 1.0);
    al_probe_scores_free(&ps);
    al_probe_free(&p);
    al_patch_result_free(&r);
    al_pairs_free(&tk);
    CHECK(r.metric == NULL && tk.clean == NULL);
    al_model_free(&m);
}

TEST(patch_bad_options) {
    al_model m;
    planted_model(&m);
    struct {
        const char *comp, *dir, *task;
        int r, n, batch;
        const char *msg;
    } bad[] = {
        {"mlp", "denoise", "induction", PR, 8, 8, "component"},
        {NULL, "denoise", "induction", PR, 8, 8, "component"},
        {"head", "sideways", "induction", PR, 8, 8, "direction"},
        {"head", "denoise", "ioi", PR, 8, 8, "task"},
        {"head", "denoise", "induction", 16, 8, 8, "n_ctx"}, /* 2·16+1 > 32 */
        {"head", "denoise", "induction", 1, 8, 8, "probe_r"},
        {"head", "denoise", "induction", PR, 0, 8, "1 <= n"},
        {"head", "denoise", "induction", PR, 8, 0, "batch"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        al_patch_opts o = small_opts(bad[i].comp, bad[i].dir);
        o.task = bad[i].task, o.probe_r = bad[i].r, o.probe_n = bad[i].n;
        o.batch = bad[i].batch;
        al_patch_result r;
        memset(&r, 0xab, sizeof r);
        al_err e = {0};
        CHECKF(run_(&m, &o, &r, &e) == -1, "case %zu", i);
        CHECKF(strstr(e.msg, bad[i].msg) != NULL, "case %zu: '%s'", i, e.msg);
        CHECKF(t_all_zero(&r, sizeof r), "case %zu: result not zeroed", i);
        al_patch_result_free(&r);
        double mp = 7;
        CHECK(eval_(&m, &o, NULL, NULL, &mp, NULL, NULL, &e) == -1 && mp == 7);
    }
    al_model_free(&m);
}

/* ---------------------------------------------- components on planted */

/* planted.h's circuit with an attention sink, as trained induction heads
 * have: 1.0 also scores position 0 at half the match gap (dimension 0,
 * which only a query token 0 — BOS, never drawn by the probe — would
 * use), so a query with no match attends to BOS and copies token 0
 * instead of averaging the first half's values. */
static void sink_model_deep(al_model *m, int L, int li) {
    planted_model_deep(m, L, li);
    const int D = PD;
    const float alpha = 30.0f * sqrtf((float)D);
    al_head_wk(m, li, 0)[(P_PREV + 0) * D + 0] = 0;
    al_head_wk(m, li, 0)[(P_POS + 0) * D + 0] = 1;
    al_head_wq(m, li, 0)[P_BIAS * D + 0] = alpha / 2;
}

static void sink_model(al_model *m) { sink_model_deep(m, 2, 1); }

/* One sweep of component comp; then sums of head lh's effects over the
 * first half (1..R) and the second (R+1..2R) with sums_of. */
static void sweep_of(al_model *m, const char *comp, const char *dir, al_patch_result *r) {
    al_patch_opts o = small_opts(comp, dir);
    al_err e;
    CHECK_OK(run_(m, &o, r, &e), &e);
}

static void sums_of(const al_patch_result *r, int lh, double *first, double *second) {
    *first = *second = 0;
    for (int t = 0; t < PT; t++) {
        double v = r->effect[lh * PT + t];
        if (t >= 1 && t <= PR)
            *first += v;
        else if (t > PR)
            *second += v;
    }
}

/* Per-position components of the sink circuit. Queries of every head
 * read TOK or POS, which the two runs share wherever a query matters, so
 * patching q does nothing in either direction. Noising breaks one query
 * per first-half key (k of 1.0) or per second-half destination row
 * (pattern of 1.0), or copies a wrong token at one (v of 1.0): summed
 * over positions, about the whole effect. Heads writing nothing, or reading only BIAS, never matter. */
TEST(patch_planted_qkv_pattern) {
    al_model m;
    sink_model(&m);
    double f, s;
    for (int d = 0; d < 2; d++) {
        const char *dir = d ? "noise" : "denoise";
        al_patch_opts o = small_opts("q", dir);
        al_patch_result r;
        al_err e;
        CHECK_OK(run_(&m, &o, &r, &e), &e);
        CHECK(r.rows == 2 * PH && r.cols == PT);
        for (int i = 0; i < r.n; i++)
            CHECKF(fabs(r.effect[i]) < 1e-9, "q %s %d: %g", dir, i, r.effect[i]);
        al_patch_result_free(&r);
    }
    const char *comps[] = {"k", "pattern", "v"};
    for (int c = 0; c < 3; c++) {
        al_patch_result r;
        sweep_of(&m, comps[c], "noise", &r);
        sums_of(&r, 1 * PH + 0, &f, &s);
        if (c == 0) CHECKF(f > 0.8 && f < 1.1 && fabs(s) < 0.02, "k of 1.0: %g %g", f, s);
        if (c == 1) CHECKF(fabs(f) < 1e-9 && s > 0.8 && s < 1.1, "pattern of 1.0: %g %g", f, s);
        if (c == 2) CHECKF(f > 0.8 && f < 1.1 && fabs(s) < 1e-9, "v of 1.0: %g %g", f, s);
        for (int lh = 0; lh < 2 * PH; lh++) {
            if (lh % PH == 0) continue;
            sums_of(&r, lh, &f, &s);
            CHECKF(fabs(f) < 1e-9 && fabs(s) < 1e-9, "%s of %d.%d: %g %g", comps[c], lh / PH,
                   lh % PH, f, s);
        }
        al_patch_result_free(&r);
    }
    al_model_free(&m);
}

/* Path (channel c, sender s, receiver r) of patch.h's layout. */
static double path_at(const al_paths_result *r, int c, int s, int h) {
    return r->effect[((size_t)c * r->n_senders + s) * r->width + h];
}

/* The known answer: the previous-token head 0.0 feeds the
 * induction head 1.0 through its keys, so noising the path 0.0 -> 1.0 k
 * breaks the whole effect while the q and v paths carry none; the
 * values come straight from the embedding (embed -> 1.0 v). Nothing else
 * carries anything: pos is the same in both runs, 0.1 and 0.2 write
 * nothing that differs, 1.1 and 1.2 read nothing that does. */
TEST(patch_planted_paths_known_answers) {
    al_model m;
    sink_model(&m);
    al_patch_opts o = small_opts("head", "noise");
    al_pairs t;
    al_paths_result r, rn;
    al_err e;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    CHECK_OK(al_paths_run(&m, &t, &o, &r, &e), &e);
    CHECK(r.n_senders == 2 + PH && r.n_recv == PH && r.n == 4 * (2 + PH) * PH);
    CHECKF(path_at(&r, 1, 2, 0) >= 0.9, "0.0 -> 1.0 k: %g", path_at(&r, 1, 2, 0));
    CHECKF(fabs(path_at(&r, 0, 2, 0)) <= 0.05, "0.0 -> 1.0 q: %g", path_at(&r, 0, 2, 0));
    CHECKF(fabs(path_at(&r, 2, 2, 0)) <= 0.05, "0.0 -> 1.0 v: %g", path_at(&r, 2, 2, 0));
    CHECKF(path_at(&r, 2, 0, 0) >= 0.9, "embed -> 1.0 v: %g", path_at(&r, 2, 0, 0));
    for (int c = 0; c < 4; c++)
        for (int s = 0; s < r.n_senders; s++)
            for (int h = 0; h < PH; h++) {
                double v = path_at(&r, c, s, h);
                int key = h == 0 && ((c == 1 && s == 2) || (c == 2 && s == 0));
                if (c == 3 && h > 0)
                    CHECK(isnan(v));
                else if (!key && c < 3)
                    CHECKF(fabs(v) < 1e-6, "%d %d %d: %g", c, s, h, v);
                else if (c == 3)
                    CHECKF(fabs(v) < 0.02, "direct %d: %g", s, v);
            }
    /* the naive reference gives the same numbers */
    o.naive = 1;
    CHECK_OK(al_paths_run(&m, &t, &o, &rn, &e), &e);
    for (int i = 0; i < r.n; i++)
        CHECKF((isnan(r.metric[i]) && isnan(rn.metric[i])) ||
                   fabs(r.metric[i] - rn.metric[i]) < 1e-6,
               "%d: %g vs %g", i, r.metric[i], rn.metric[i]);
    al_paths_result_free(&rn);
    al_paths_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* The planted circuit with a skip: previous-token head 0.0, induction
 * head li.0 of an L-layer model, every layer between them idle. Noising,
 * path patching must find 0.0 -> li.0 through the keys (the whole
 * effect) and not through q or v; embed -> li.0 v carries the copied
 * values (either path alone breaks the copy). Denoising needs both at
 * once (restored keys find the clean position but read the corrupted
 * token there), so each alone restores little. In both directions
 * nothing else carries anything (the heads of the idle layers write
 * nothing or a constant, and read nothing that differs), and paths from
 * a sender of the receiver's layer or a later one are NaN. The
 * incremental sweep equals the naive one. */
static void deep_paths_case(int L, int li) {
    al_model m;
    sink_model_deep(&m, L, li);
    const int H = PH, W = (L - 1) * H, ns = 2 + W;
    for (int d = 0; d < 2; d++) {
        const char *dir = d ? "noise" : "denoise";
        al_patch_opts o = small_opts("head", dir);
        o.probe_n = 8; /* the planted paths carry every pair; the naive sweep is the cost */
        al_pairs t;
        al_paths_result r, rn;
        al_err e;
        CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
        CHECK_OK(al_paths_run(&m, &t, &o, &r, &e), &e);
        CHECK(r.L == L && r.width == W && r.n_senders == ns && r.n_recv == W && r.n == 4 * ns * W);
        int rk = (li - 1) * H; /* receiver li.0 */
        CHECKF(d ? path_at(&r, 1, 2, rk) >= 0.9 : fabs(path_at(&r, 1, 2, rk)) < 0.1,
               "L %d %s: 0.0 -> %d.0 k: %g", L, dir, li, path_at(&r, 1, 2, rk));
        CHECKF(fabs(path_at(&r, 0, 2, rk)) <= 0.05, "L %d %s: 0.0 -> %d.0 q: %g", L, dir, li,
               path_at(&r, 0, 2, rk));
        CHECKF(fabs(path_at(&r, 2, 2, rk)) <= 0.05, "L %d %s: 0.0 -> %d.0 v: %g", L, dir, li,
               path_at(&r, 2, 2, rk));
        CHECKF(d ? path_at(&r, 2, 0, rk) >= 0.9 : fabs(path_at(&r, 2, 0, rk)) < 0.1,
               "L %d %s: embed -> %d.0 v: %g", L, dir, li, path_at(&r, 2, 0, rk));
        int n_nan = 0;
        for (int c = 0; c < 4; c++)
            for (int s = 0; s < ns; s++)
                for (int h = 0; h < W; h++) {
                    double v = path_at(&r, c, s, h);
                    int l1 = h / H + 1, exists = c == 3 ? h == 0 : s < 2 || (s - 2) / H < l1;
                    int key = h == rk && ((c == 1 && s == 2) || (c == 2 && s == 0));
                    if (!exists)
                        n_nan += isnan(v);
                    else if (!key && c < 3)
                        CHECKF(fabs(v) < 1e-6, "L %d %s: %d %d %d: %g", L, dir, c, s, h, v);
                    else if (c == 3)
                        CHECKF(fabs(v) < 0.02, "direct %d: %g", s, v);
                }
        /* NaN: direct at r > 0, and q/k/v from a sender head not before the receiver */
        int want = ns * (W - 1);
        for (int h = 0; h < W; h++) want += 3 * (W - (h / H + 1) * H > 0 ? W - (h / H + 1) * H : 0);
        CHECKF(n_nan == want, "L %d: %d NaN paths, want %d", L, n_nan, want);
        CHECK(al_paths_count(L, H) == r.n - want);
        /* against the naive sweep (a forward per path): at 3 layers, where
         * it costs a fifth of 4 layers' and runs the same code */
        if (L <= 3) {
            o.naive = 1;
            CHECK_OK(al_paths_run(&m, &t, &o, &rn, &e), &e);
            for (int i = 0; i < r.n; i++)
                CHECKF((isnan(r.metric[i]) && isnan(rn.metric[i])) ||
                           fabs(r.metric[i] - rn.metric[i]) < 1e-6,
                       "L %d naive %d: %g vs %g", L, i, r.metric[i], rn.metric[i]);
            al_paths_result_free(&rn);
        }
        al_paths_result_free(&r);
        al_pairs_free(&t);
    }
    al_model_free(&m);
}

TEST(patch_planted_paths_skip_layer) {
    deep_paths_case(3, 2);
    if (!T_SAN) deep_paths_case(4, 3);
}

/* The layout's existence rule and names, and that 1 and 2 layers keep
 * the layout of earlier versions (n_senders 2 + H, width H). */
TEST(patch_paths_layout) {
    CHECK(al_paths_width(1, 3) == 3 && al_paths_width(2, 3) == 3 && al_paths_width(4, 3) == 9);
    CHECK(al_paths_count(1, 3) == 5 && al_paths_count(2, 3) == 5 * 10);
    /* 3 layers, 2 heads: senders embed, pos, 0.0, 0.1, 1.0, 1.1; receivers 1.0 1.1 2.0 2.1 */
    CHECK(al_paths_exists(3, 2, 1, 2, 0) && !al_paths_exists(3, 2, 1, 4, 0) &&
          !al_paths_exists(3, 2, 1, 4, 1) && al_paths_exists(3, 2, 1, 4, 2) &&
          al_paths_exists(3, 2, 0, 0, 3) && al_paths_exists(3, 2, 3, 5, 0) &&
          !al_paths_exists(3, 2, 3, 5, 1) && !al_paths_exists(3, 2, 1, 6, 2) &&
          !al_paths_exists(1, 2, 0, 0, 0) && al_paths_exists(1, 2, 3, 3, 0));
    /* per receiver layer l1: 3·(2 + l1·H) paths per head, plus 2 + (L−1)·H direct */
    CHECK(al_paths_count(3, 2) == 3 * 2 * (2 + 2) + 3 * 2 * (2 + 4) + 6);
    char b[16];
    CHECK(!strcmp(al_paths_sender_name(2, 5, b, sizeof b), "1.1"));
    CHECK(!strcmp(al_paths_sender_name(2, 1, b, sizeof b), "pos"));
    CHECK(!strcmp(al_paths_receiver_name(2, 3, b, sizeof b), "2.1"));
    CHECK(!strcmp(al_paths_receiver_name(3, 2, b, sizeof b), "1.2"));
}

/* A 1-layer model has only the direct path (q, k, v are NaN), and pos
 * carries nothing (both runs have the same positions). More than
 * AL_PATHS_MAX_LAYERS layers is refused, leaving the result zeroed. */
TEST(patch_paths_one_layer_and_refusals) {
    al_model m;
    al_config c = al_config_default();
    c.n_layers = 1, c.d_model = 16, c.n_heads = 2, c.d_head = 8, c.n_ctx = 16, c.d_vocab = 20;
    c.seed = 3;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    al_patch_opts o = small_opts("head", "noise");
    o.probe_r = 5, o.probe_n = 6, o.batch = 4;
    al_pairs t;
    al_paths_result r;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    CHECK_OK(al_paths_run(&m, &t, &o, &r, &e), &e);
    CHECK(r.n_recv == 0 && r.n_senders == 4);
    for (int ch = 0; ch < 3; ch++)
        for (int s = 0; s < 4; s++)
            for (int h = 0; h < 2; h++) CHECK(isnan(path_at(&r, ch, s, h)));
    for (int s = 0; s < 4; s++) CHECK(!isnan(path_at(&r, 3, s, 0)) && isnan(path_at(&r, 3, s, 1)));
    CHECK(fabs(path_at(&r, 3, 1, 0)) < 1e-9); /* pos: the same in both runs */
    al_paths_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
    /* too deep: refused */
    c.n_layers = AL_PATHS_MAX_LAYERS + 1;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    memset(&r, 0xab, sizeof r);
    CHECK(al_paths_run(&m, &t, &o, &r, &e) == -1 && strstr(e.msg, "up to 16 layers"));
    CHECK(r.metric == NULL && r.n == 0);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* R 0 is the model's: min(50, (n_ctx - 1) / 2). */
TEST(patch_probe_r_default_fits_context) {
    al_patch_opts o = al_patch_opts_defaults();
    CHECK(al_patch_probe_r(&o, 256) == 50 && al_patch_probe_r(&o, 101) == 50 &&
          al_patch_probe_r(&o, 64) == 31 && al_patch_probe_r(&o, 32) == 15);
    o.probe_r = 7;
    CHECK(al_patch_probe_r(&o, 32) == 7);
}
