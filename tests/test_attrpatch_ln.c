/* test_attrpatch_ln.c -- attribution patching (attrpatch.h) on LayerNorm
 * and bias models: every head and edge estimate against central
 * differences of the metric along the sender's difference, added where
 * the estimate says it is read (an edge's receiver is the head's own copy
 * of the residual before ln1: split inputs, which ln1 normalises alone;
 * the direct receiver is the final residual, before ln_final); and what
 * the comparison with actual patching covers on such a model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"
#include "attnlab/hooks.h"
#include "attnlab/model.h"
#include "attnlab/patch.h"
#include "randmodel.h"
#include "test.h"

enum { RR = 5, NV = 13 }; /* NV: ln_model's vocabulary */

/* eps · delta (B·T, C) added to a hook point's rows: the residual (ld C)
 * or one head's copy of it (split inputs, ld H·C, at head h). */
typedef struct nudge {
    const float *delta;
    float eps;
    int head, C;
} nudge;

static int nudge_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const nudge *n = ctx;
    size_t rows = (size_t)a->m->B * a->m->T;
    for (size_t i = 0; i < rows; i++) {
        float *d = a->data + i * a->ld + (size_t)(n->head > 0 ? n->head : 0) * n->C;
        for (int k = 0; k < n->C; k++) d[k] += n->eps * n->delta[i * n->C + k];
    }
    a->intervened = 1;
    return 0;
}

/* The task's mean metric on the base run with the model's hooks. */
static double base_metric(al_model *m, const al_pairs *t, int den) {
    al_err e;
    CHECK_OK(al_model_forward(m, den ? t->corr : t->clean, NULL, t->N, t->T, &e), &e);
    const int C = m->cfg.d_model, V = m->cfg.d_vocab;
    float row[64];
    double s = 0.0;
    for (int i = 0; i < t->n_items; i++) {
        const al_pair_item *it = &t->items[i];
        al_model_unembed(m,
                         m->x + (((size_t)m->cfg.n_layers * t->N + it->pair) * t->T + it->pos) * C,
                         1, row);
        if (t->logit_diff) {
            s += (double)row[it->answer] - row[it->wrong];
            continue;
        }
        double mx = row[0], z = 0.0;
        for (int v = 1; v < V; v++) mx = fmax(mx, row[v]);
        for (int v = 0; v < V; v++) z += exp(row[v] - mx);
        s += row[it->answer] - mx - log(z);
    }
    return s / t->n_items;
}

/* dM/dε of the base run's metric with ε·delta added at (point, layer),
 * head h's copy for split inputs (h −1: the residual), by central
 * differences. */
static double fd_along(al_model *m, const al_pairs *t, int den, al_hook_point point, int layer,
                       int h, const float *delta) {
    const float eps = 1e-2f;
    nudge n = {delta, eps, h, m->cfg.d_model};
    al_err e;
    CHECK_OK(al_hook_add(m, point, layer, nudge_hook, &n, &e), &e);
    double up = base_metric(m, t, den);
    n.eps = -eps;
    double dn = base_metric(m, t, den);
    al_hook_remove(m, &n);
    return (up - dn) / (2.0 * eps);
}

/* Attribution patching's estimates on a 2-layer LayerNorm model with
 * every bias, each un-normalised (× (M_clean − M_corr), noising's sign)
 * against dM/dε of the base run with ε × the sender's difference added
 * to the receiver: a layer-1 head's own q, k or v input before ln1
 * (split inputs: ln1 normalises that copy alone), or the final residual
 * (direct), or for a head estimate its result. Both directions, both
 * metrics; standard and shortformer positions. */
static void attrpatch_fd(int pos) {
    al_model m;
    ln_model(&m, 2, AL_NORM_LN, AL_BIAS_ALL, pos, 61);
    al_err e;
    al_pairs t;
    task(&t, &m, RR, 4, &e);
    const int L = 2, H = 3, C = 24, D = 8, T = t.T, N = t.N;
    const size_t BT = (size_t)N * T, HD = (size_t)H * D;
    float *zs = malloc(sizeof(float) * L * BT * HD), *zb = malloc(sizeof(float) * L * BT * HD);
    float *delta = malloc(sizeof(float) * (2 + L * H) * BT * C);
    int checked = 0;
    double gmax = 0, worst = 0;
    for (int run = 0; run < 4; run++) {
        int den = run % 2, diff = run / 2;
        if (diff) as_logit_diff(&t, NV);
        al_patch_opts o = al_patch_opts_defaults();
        o.direction = den ? "denoise" : "noise";
        o.batch = 3;
        al_attrpatch_result r;
        CHECK_OK(al_attrpatch_run(&m, &t, &o, 0, &r, &e), &e);
        const double un = (r.m_clean - r.m_corr) * (den ? 1 : -1);
        /* the senders' differences, source run − base run */
        const int *bin = den ? t.corr : t.clean, *sin = den ? t.clean : t.corr;
        CHECK_OK(al_model_forward(&m, sin, NULL, N, T, &e), &e);
        memcpy(zs, m.zg, sizeof(float) * L * BT * HD);
        CHECK_OK(al_model_forward(&m, bin, NULL, N, T, &e), &e);
        memcpy(zb, m.zg, sizeof(float) * L * BT * HD);
        memset(delta, 0, sizeof(float) * (2 + L * H) * BT * C);
        for (size_t i = 0; i < BT; i++)
            for (int k = 0; k < C; k++)
                delta[i * C + k] =
                    m.p[AL_P_WE][(size_t)sin[i] * C + k] - m.p[AL_P_WE][(size_t)bin[i] * C + k];
        for (int j = 0; j < L * H; j++) {
            const float *wo = al_head_wo(&m, j / H, j % H);
            for (size_t i = 0; i < BT; i++)
                for (int k = 0; k < C; k++) {
                    double s = 0;
                    for (int d = 0; d < D; d++) {
                        size_t z = ((size_t)(j / H) * BT + i) * HD + (size_t)(j % H) * D + d;
                        s += ((double)zs[z] - zb[z]) * wo[(size_t)d * C + k];
                    }
                    delta[((size_t)(2 + j) * BT + i) * C + k] = (float)s;
                }
        }
        const int ns = r.n_senders, W = al_paths_width(L, H);
        for (int ch = 0; ch < 4; ch++)
            for (int snd = 0; snd < ns; snd++)
                for (int rr = 0; rr < (ch == 3 ? 1 : H); rr++) {
                    if (snd == 1 || !al_paths_exists(L, H, ch, snd, rr)) continue; /* pos: 0 */
                    const float *dl = delta + (size_t)(snd == 0 ? 0 : snd) * BT * C;
                    double est = r.edge[((size_t)ch * ns + snd) * W + rr] * un;
                    double f = ch == 3 ? fd_along(&m, &t, den, AL_HOOK_RESID_POST, L - 1, -1, dl)
                                       : fd_along(&m, &t, den,
                                                  (al_hook_point)(AL_HOOK_Q_INPUT + ch), 1, rr, dl);
                    gmax = fmax(gmax, fabs(est));
                    worst = fmax(worst, fabs(f - est));
                    CHECKF(fabs(f - est) <= 2e-4 + 2e-2 * fabs(est),
                           "run %d edge ch %d sender %d receiver %d: estimate %.6g, fd %.6g", run,
                           ch, snd, rr, est, f);
                    checked++;
                }
        for (int lh = 0; lh < L * H; lh++) { /* a head's estimate: its result nudged */
            const float *dl = delta + (size_t)(2 + lh) * BT * C;
            double est = r.head[lh] * un;
            double f = fd_along(&m, &t, den, AL_HOOK_RESULT, lh / H, lh % H, dl);
            worst = fmax(worst, fabs(f - est));
            CHECKF(fabs(f - est) <= 2e-4 + 2e-2 * fabs(est),
                   "run %d head %d: estimate %.6g, fd %.6g", run, lh, est, f);
            checked++;
        }
        al_attrpatch_result_free(&r);
    }
    /* per run 40 edges (4 senders into 9 layer-1 inputs, 4 direct) and 6 heads */
    CHECKF(checked == 4 * (40 + 6) && gmax > 1e-2, "%d checked, largest %g", checked, gmax);
    if (getenv("ATTR_LN_VERBOSE"))
        fprintf(stderr, "%d estimates, worst |fd - estimate| %.3g, largest estimate %.3g\n",
                checked, worst, gmax);
    free(zs), free(zb), free(delta);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(attrpatch_ln_finite_differences) { attrpatch_fd(AL_POS_STANDARD); }
TEST(attrpatch_ln_finite_differences_shortformer) { attrpatch_fd(AL_POS_SHORTFORMER); }

/* Compared with actual patching on a LayerNorm model: heads, head ×
 * position and edges (path patching takes LayerNorm models too), every
 * edge that exists with a finite actual effect. */
TEST(attrpatch_ln_compare) {
    al_model m;
    ln_model(&m, 2, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 71);
    al_err e;
    al_pairs t;
    task(&t, &m, RR, 4, &e);
    al_patch_opts o = al_patch_opts_defaults();
    al_attrpatch_result r;
    CHECK_OK(al_attrpatch_run(&m, &t, &o, 1, &r, &e), &e);
    CHECK(r.compared && r.agree[AL_AP_HEAD].n == 6 && r.agree[AL_AP_HEAD_POS].n == 6 * t.T);
    int finite = 0;
    for (int i = 0; i < r.n_edge; i++) finite += isfinite(r.act_edge[i]);
    CHECKF(r.agree[AL_AP_EDGE].n > 0 && finite >= r.agree[AL_AP_EDGE].n &&
               isfinite(r.agree[AL_AP_EDGE].pearson),
           "edges compared %d, finite actuals %d", r.agree[AL_AP_EDGE].n, finite);
    fprintf(stderr, "    edges: Pearson %.3f over %d (heads %.3f over %d)\n",
            r.agree[AL_AP_EDGE].pearson, r.agree[AL_AP_EDGE].n, r.agree[AL_AP_HEAD].pearson,
            r.agree[AL_AP_HEAD].n);
    CHECK(isfinite(r.act_head[0]) && isfinite(r.agree[AL_AP_HEAD].pearson));
    al_attrpatch_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}
