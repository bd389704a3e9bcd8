/* test_attrpatch.c -- attribution patching (attrpatch.h): the metric's
 * gradients against finite differences of patched forwards; estimates
 * that are exact where the metric is linear in the patched activation
 * (logit differences: every direct edge, every last-layer head); the
 * grids' shapes, agreement and bit-for-bit repeats; refusals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"
#include "attnlab/layers.h"
#include "attnlab/model.h"
#include "randmodel.h"
#include "test.h"

/* Positional embedding type of sharp_model's models (the shortformer
 * test sets it). */
static int g_pos_type = AL_POS_STANDARD;

/* rand_model with sharper attention: QK scaled so the softmax is far from
 * uniform and its derivative matters. */
static void sharp_model(al_model *m, int L) {
    rand_model(m, L, 0, 20);
    m->cfg.pos_type = g_pos_type;
    scale_qk(m, 3.0f);
}

/* Centred difference of the metric when one float of a source buffer
 * (a copy of the unpatched run's activations, patched in by the mask)
 * moves by ±eps. */
static double fd(al_model *m, const al_pairs *t, al_patch_spec *sp, float *src, size_t i,
                 float eps) {
    float v = src[i];
    src[i] = v + eps;
    al_err e;
    if (al_patch_hooks_add(m, sp, &e)) t_fail(__FILE__, __LINE__, "%s", e.msg);
    double up = task_metric(m, t, 1);
    src[i] = v - eps;
    double dn = task_metric(m, t, 1);
    al_hook_remove(m, sp);
    src[i] = v;
    return (up - dn) / (2.0 * eps);
}

static void check_grads(int logit_diff) {
    al_model m;
    sharp_model(&m, 2);
    al_pairs t;
    al_err e;
    task(&t, &m, 5, 3, &e);
    if (logit_diff) as_logit_diff(&t, 20);
    int L = 2, H = 3, D = 8, C = 24, N = t.N, T = t.T;
    size_t BT = (size_t)N * T, HD = (size_t)H * D;
    float *dx = malloc(sizeof(float) * (L + 1) * BT * C),
          *dzg = malloc(sizeof(float) * L * BT * HD);
    float *dqkv = malloc(sizeof(float) * L * BT * 3 * HD);
    double M;
    CHECK_OK(al_attrpatch_grad(&m, &t, 1, 0, N, &M, dx, dzg, dqkv, &e), &e);
    CHECK_NEAR(M, task_metric(&m, &t, 1), 1e-5);
    /* the unpatched run's activations as patch sources */
    task_metric(&m, &t, 1);
    float *sx = malloc(sizeof(float) * (L + 1) * BT * C), *sz = malloc(sizeof(float) * L * BT * HD);
    float *sq = malloc(sizeof(float) * L * BT * 3 * HD);
    memcpy(sx, m.x, sizeof(float) * (L + 1) * BT * C);
    memcpy(sz, m.z, sizeof(float) * L * BT * HD);
    memcpy(sq, m.qkv, sizeof(float) * L * BT * 3 * HD);
    unsigned char xm[3 * 16], zm[2 * 3 * 16], qm[2 * 3 * 3 * 16];
    al_patch_spec sp = {.src_x = sx, .src_z = sz, .src_qkv = sq};
    al_rng r;
    al_rng_seed(&r, 5);
    const float eps = 1e-2f;
    double gmax = 0.0;
    int checked = 0;
    for (int k = 0; k < 60; k++) {
        int l = (int)al_rng_below(&r, (uint32_t)L), b = (int)al_rng_below(&r, (uint32_t)N);
        int tt = (int)al_rng_below(&r, (uint32_t)T), h = (int)al_rng_below(&r, (uint32_t)H);
        int kind = k % 3;
        double g, f;
        memset(xm, 0, sizeof xm), memset(zm, 0, sizeof zm), memset(qm, 0, sizeof qm);
        sp.x_mask = NULL, sp.z_mask = NULL, sp.qkv_mask = NULL;
        if (kind == 0) { /* the residual stream entering layer l (or the final one) */
            int ll = l + (int)al_rng_below(&r, 2);
            int c = (int)al_rng_below(&r, (uint32_t)C);
            size_t i = ((size_t)ll * BT + (size_t)b * T + tt) * C + c;
            xm[ll * T + tt] = 1, sp.x_mask = xm;
            g = dx[i], f = fd(&m, &t, &sp, sx, i, eps);
        } else if (kind == 1) { /* a head's z: ∂M/∂z = g · ∂M/∂zg */
            int d = (int)al_rng_below(&r, (uint32_t)D);
            size_t i = ((size_t)l * BT + (size_t)b * T + tt) * HD + (size_t)h * D + d;
            zm[(l * H + h) * T + tt] = 1, sp.z_mask = zm;
            g = m.gates[l * H + h] * dzg[i], f = fd(&m, &t, &sp, sz, i, eps);
        } else { /* q, k or v */
            int s = (int)al_rng_below(&r, 3), d = (int)al_rng_below(&r, (uint32_t)D);
            size_t i =
                ((size_t)l * BT + (size_t)b * T + tt) * 3 * HD + (size_t)s * HD + (size_t)h * D + d;
            qm[((l * 3 + s) * H + h) * T + tt] = 1, sp.qkv_mask = qm;
            g = dqkv[i], f = fd(&m, &t, &sp, sq, i, eps);
        }
        if (fabs(g) > gmax) gmax = fabs(g);
        if (fabs(f - g) > 2e-4 + 2e-2 * fabs(g)) {
            CHECKF(0, "kind %d l %d b %d t %d h %d: gradient %.6g, finite difference %.6g", kind, l,
                   b, tt, h, g, f);
        }
        checked++;
    }
    CHECK(checked == 60 && gmax > 1e-3); /* the gradients checked are not all ~0 */
    free(dx), free(dzg), free(dqkv), free(sx), free(sz), free(sq);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(attrpatch_grad_finite_differences_logprob) { check_grads(0); }
TEST(attrpatch_grad_finite_differences_logit_diff) { check_grads(1); }
/* Shortformer positions: q and k hold W_pos terms the residual does not;
 * the activation gradients are still those of the patched forward. */
TEST(attrpatch_grad_finite_differences_shortformer) {
    g_pos_type = AL_POS_SHORTFORMER;
    check_grads(0);
    check_grads(1);
}

/* With logit differences the metric is linear in the final residual, so
 * every direct edge's estimate equals path patching's effect, and every
 * head of the last layer (nothing after it bends its output) equals
 * activation patching's; in a 1-layer model that is every head. So is
 * every edge into a last-layer head's values (its attention does not
 * move), from every sender of every earlier layer: in a deeper model
 * that checks the receivers' layout beyond layer 1. */
static void check_exact(int L, const char *direction) {
    al_model m;
    sharp_model(&m, L);
    al_pairs t;
    al_err e;
    task(&t, &m, 5, 6, &e);
    as_logit_diff(&t, 20);
    al_patch_opts o = al_patch_opts_defaults();
    o.direction = direction;
    o.batch = 4; /* two batches, the last short */
    al_attrpatch_result r;
    CHECK_OK(al_attrpatch_run(&m, &t, &o, 1, &r, &e), &e);
    const int W = L > 1 ? (L - 1) * 3 : 3, ns = 2 + W;
    CHECK(r.compared && r.L == L && r.H == 3 && r.T == t.T && r.n_senders == ns);
    CHECK(r.n_recv == (L - 1) * 3 && r.n_edge == 4 * ns * W);
    double scale = 0.0;
    for (int i = 0; i < r.n_edge; i++)
        if (isfinite(r.act_edge[i]) && fabs(r.act_edge[i]) > scale) scale = fabs(r.act_edge[i]);
    CHECK(scale > 1e-3);
    for (int s = 0; s < ns; s++) {
        size_t i = ((size_t)3 * ns + s) * W; /* the direct path of sender s */
        CHECKF(fabs(r.edge[i] - r.act_edge[i]) <= 1e-4 * scale + 1e-6,
               "%s, sender %d direct: estimate %.7g, actual %.7g", direction, s, r.edge[i],
               r.act_edge[i]);
        for (int rr = (L - 2) * 3; L > 1 && rr < W; rr++) { /* v of the last layer's heads */
            size_t k = ((size_t)2 * ns + s) * W + rr;
            CHECKF(isfinite(r.edge[k]) && fabs(r.edge[k] - r.act_edge[k]) <= 1e-4 * scale + 1e-6,
                   "%s, sender %d -> v of receiver %d: estimate %.7g, actual %.7g", direction, s,
                   rr, r.edge[k], r.act_edge[k]);
        }
    }
    for (int h = 0; h < 3; h++) {
        int lh = (L - 1) * 3 + h;
        CHECKF(fabs(r.head[lh] - r.act_head[lh]) <= 1e-4 * (fabs(r.act_head[lh]) + 1e-2),
               "%s, head %d.%d: estimate %.7g, actual %.7g", direction, L - 1, h, r.head[lh],
               r.act_head[lh]);
        for (int tt = 0; tt < t.T; tt++) {
            size_t i = (size_t)lh * t.T + tt;
            CHECK(fabs(r.head_pos[i] - r.act_head_pos[i]) <= 1e-4 * (fabs(r.act_head[lh]) + 1e-2));
        }
    }
    /* pos paths are 0 on both sides (the runs share positions) and left out */
    CHECK(r.edge[(size_t)3 * ns * W + W] == 0.0);
    CHECK(r.agree[AL_AP_HEAD].n == L * 3 && r.agree[AL_AP_HEAD_POS].n == L * 3 * t.T);
    /* every path but pos's: per receiver layer l1, 3 channels x 3 heads x (embed + the
     * 3·l1 heads before it); direct from embed and every sender head */
    int want = 1 + W;
    for (int l1 = 1; l1 < L; l1++) want += 9 * (1 + 3 * l1);
    CHECK(r.agree[AL_AP_EDGE].n == want);
    if (L == 2) CHECK(want == 4 * 10);
    if (L == 1) CHECK_NEAR(r.agree[AL_AP_HEAD].pearson, 1.0, 1e-6);
    CHECK(r.agree[AL_AP_EDGE].top5 >= 0 && r.agree[AL_AP_EDGE].top5 <= 5);
    /* the unpatched metrics are patching's */
    al_patch_result p;
    o.component = "head";
    CHECK_OK(al_patch_run(&m, &t, &o, &p, &e), &e);
    CHECK_NEAR(r.m_clean, p.m_clean, 1e-9);
    CHECK_NEAR(r.m_corr, p.m_corr, 1e-9);
    /* and so, pair by pair, are the last layer's heads' estimates: their
     * intervals (same pairs, same resamples) are patching's */
    CHECK(r.ci_n == t.N && r.head_ci && r.edge_ci);
    for (int h = 0; h < 3; h++) {
        int lh = (L - 1) * 3 + h;
        const al_interval *a = &r.head_ci[lh], *b = &p.effect_ci[lh];
        double tol = 1e-4 * (fabs(b->hi - b->lo) + 1e-3);
        CHECKF(fabs(a->se - b->se) <= tol && fabs(a->lo - b->lo) <= tol &&
                   fabs(a->hi - b->hi) <= tol,
               "%s, head %d.%d: %.6g [%.6g, %.6g], patching %.6g [%.6g, %.6g]", direction, L - 1, h,
               a->se, a->lo, a->hi, b->se, b->lo, b->hi);
    }
    CHECK(isnan(r.edge_ci[(size_t)3 * ns * W + 1].se)); /* no direct path into a receiver slot */
    al_patch_result_free(&p);
    al_attrpatch_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(attrpatch_exact_where_linear) {
    check_exact(2, "denoise");
    check_exact(2, "noise");
    check_exact(1, "denoise");
}

TEST(attrpatch_exact_where_linear_deep) {
    check_exact(3, "denoise");
    check_exact(3, "noise");
    check_exact(4, "noise");
}

/* The same run twice gives the same bits; layer-0 heads, where the
 * softmax bends the metric, are estimated but not exactly; a log-prob
 * task gives finite numbers everywhere an edge exists. */
TEST(attrpatch_repeats_and_grids) {
    al_model m;
    sharp_model(&m, 2);
    al_pairs t;
    al_err e;
    task(&t, &m, 5, 5, &e);
    al_patch_opts o = al_patch_opts_defaults();
    o.batch = 2;
    al_attrpatch_result a, b;
    CHECK_OK(al_attrpatch_run(&m, &t, &o, 0, &a, &e), &e);
    CHECK_OK(al_attrpatch_run(&m, &t, &o, 0, &b, &e), &e);
    CHECK(!a.compared && isnan(a.act_head[0]) && a.seconds_patch == 0.0);
    size_t n = (size_t)6 + 6 * t.T + (size_t)a.n_edge;
    CHECK(memcmp(a.head, b.head, sizeof(double) * n) == 0);
    int finite = 0, nan = 0;
    for (int i = 0; i < a.n_edge; i++) isfinite(a.edge[i]) ? finite++ : nan++;
    CHECK(finite == 3 * 5 * 3 + 5 && nan == 10); /* q, k, v of 3 heads; direct has h = 0 only */
    /* head (l, h) is the sum of its positions */
    for (int lh = 0; lh < 6; lh++) {
        double s = 0.0;
        for (int tt = 0; tt < t.T; tt++) s += a.head_pos[(size_t)lh * t.T + tt];
        CHECK_NEAR(a.head[lh], s, 1e-12);
    }
    al_attrpatch_result_free(&a);
    al_attrpatch_result_free(&b);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(attrpatch_refusals) {
    al_err e;
    al_pairs t;
    al_attrpatch_result r;
    al_patch_opts o = al_patch_opts_defaults();
    al_model m3;
    rand_model(&m3, 3, 0, 20);
    task(&t, &m3, 5, 2, &e);
    al_model_free(&m3);
    rand_model(&m3, AL_PATHS_MAX_LAYERS + 1, 0, 20); /* deeper than its edges' layout goes */
    CHECK(al_attrpatch_run(&m3, &t, &o, 1, &r, &e) == -1 && strstr(e.msg, "up to 16 layers"));
    CHECK(r.head == NULL);
    al_model_free(&m3);
    al_model m;
    rand_model(&m, 2, 0, 20);
    CHECK(al_attrpatch_run(&m, &t, &o, 2, &r, &e) == -1 && strstr(e.msg, "compare"));
    o.direction = "sideways";
    CHECK(al_attrpatch_run(&m, &t, &o, 0, &r, &e) == -1 && strstr(e.msg, "sideways"));
    o.direction = "denoise";
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    CHECK(al_attrpatch_run(&m, &t, &o, 0, &r, &e) == -1 && strstr(e.msg, "interrupted"));
    CHECK(r.head == NULL && r.L == 0);
    o.stop = NULL;
    t.items[0].answer = 20; /* outside the vocabulary */
    CHECK(al_attrpatch_run(&m, &t, &o, 0, &r, &e) == -1 && strstr(e.msg, "vocabulary"));
    CHECK(al_attrpatch_grad(&m, &t, 0, 0, 1, NULL, NULL, NULL, NULL, &e) == -1);
    t.items[0].answer = 1;
    CHECK(al_attrpatch_grad(&m, &t, 2, 0, 1, NULL, NULL, NULL, NULL, &e) == -1);
    CHECK(al_attrpatch_grad(&m, &t, 0, 1, 5, NULL, NULL, NULL, NULL, &e) == -1 &&
          strstr(e.msg, "outside"));
    al_pairs_free(&t);
    al_model_free(&m);
}

/* Where the model is nearly linear (small QK: attention close to uniform,
 * its softmax close to its tangent) the first-order estimate of every
 * edge, q/k/v ones included, is close to path patching's effect. */
TEST(attrpatch_edges_near_linear) {
    al_model m;
    rand_model(&m, 2, 0, 20);
    scale_qk(&m, 0.3f);
    al_pairs t;
    al_err e;
    task(&t, &m, 5, 4, &e);
    as_logit_diff(&t, 20);
    al_patch_opts o = al_patch_opts_defaults();
    al_attrpatch_result r;
    CHECK_OK(al_attrpatch_run(&m, &t, &o, 1, &r, &e), &e);
    double scale[4] = {0};
    for (int ch = 0; ch < 4; ch++)
        for (int i = ch * 15; i < ch * 15 + 15; i++)
            if (isfinite(r.act_edge[i]) && fabs(r.act_edge[i]) > scale[ch])
                scale[ch] = fabs(r.act_edge[i]);
    for (int ch = 0; ch < 3; ch++)
        CHECKF(scale[ch] > 1e-4, "channel %d: largest effect %g", ch, scale[ch]);
    for (int i = 0; i < r.n_edge; i++) {
        if (!isfinite(r.act_edge[i])) continue;
        int ch = i / 15;
        CHECKF(fabs(r.edge[i] - r.act_edge[i]) <= 0.05 * scale[ch],
               "edge %d (channel %d): estimate %.6g, actual %.6g, channel scale %.3g", i, ch,
               r.edge[i], r.act_edge[i], scale[ch]);
    }
    CHECK(r.agree[AL_AP_EDGE].pearson > 0.99);
    al_attrpatch_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}
