/* attrpatch.c -- attribution patching (attrpatch.h).
 *
 * Per batch of pairs: one forward of the source run (its gated z, to
 * difference against), one forward of the base run and one backward of
 * the metric from it (al_model_backward_acts). Every estimate is then a
 * dot product of an activation difference with a gradient:
 *
 *   head (l,h), position t:  Σ_d Δzg[l,t,h,d] · ∂M/∂zg[l,t,h,d]
 *   edge s → (l1,h) channel c: Σ_t Δs[t] · (∂M/∂c_h[t] · W_c[l1,h]ᵀ)
 *   edge s → logits:          Σ_t Δs[t] · ∂M/∂x_L[t]
 *
 * with Δs the sender's output difference in the residual stream (W_E
 * rows for embed, 0 for pos -- both runs share positions, and with
 * shortformer positions pos is not in the residual stream at all, only in
 * q and k --, Δzg·W_O[l0,h] for head l0.h), computed once
 * per sender and batch, and each receiver's input gradient once per
 * receiver and batch: about one forward and one backward in all.
 * Reductions run in double in a fixed order, each result summed by one
 * thread, so a run repeats bit for bit (at one thread count, as the
 * engine's matrix products do). */
#include "attnlab/attrpatch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/edge_grad.h"
#include "attnlab/layers.h"
#include "attnlab/stats.h"

static const char *const grid_names[AL_AP_NGRID] = {"head", "head_pos", "edge"};

const char *al_attrpatch_grid_name(int grid) {
    return grid >= 0 && grid < AL_AP_NGRID ? grid_names[grid] : "?";
}

void al_attrpatch_result_free(al_attrpatch_result *r) {
    free(r->head);
    free(r->head_ci);
    memset(r, 0, sizeof *r);
}

/* Σ over the batch's items of the metric read from the final residual xL
 * (nb, T, C) of the last forward; with dxL non-NULL also its gradient
 * (nb, T, C), zeroed first. The metric is read as patch.c reads it, so
 * M here is M there to float rounding; log-prob items are unembedded all
 * at once (one matrix product, not one pass over W_U per item). */
static int items_metric(al_model *m, const al_pairs *t, int n0, int nb, const float *xL, float *dxL,
                        double *sum, double *per_pair, al_err *e) {
    const al_config *c = &m->cfg;
    int C = c->d_model, V = c->d_vocab, T = t->T, i0;
    int ni = al_pairs_batch_items(t, n0, nb, &i0);
    if (dxL) memset(dxL, 0, sizeof(float) * (size_t)nb * T * C);
    /* rows (ni, C), logits (ni, V), dlogits (ni, V), their dx (ni, C), scratch (V) */
    float *rows = al_malloc((size_t)ni * (2 * C + 2 * (size_t)V) + V, sizeof(float), e);
    if (!rows) return -1;
    float *lg = rows + (size_t)ni * C, *dl = lg + (size_t)ni * V, *dx = dl + (size_t)ni * V;
    float *tmp = dx + (size_t)ni * C;
    for (int i = 0; i < ni; i++) {
        const al_pair_item *it = &t->items[i0 + i];
        memcpy(rows + (size_t)i * C, xL + ((size_t)(it->pair - n0) * T + it->pos) * C,
               sizeof(float) * C);
    }
    if (!t->logit_diff) al_model_unembed(m, rows, ni, lg);
    memset(dl, 0, sizeof(float) * (size_t)ni * V);
    double s = 0.0;
    if (per_pair) memset(per_pair, 0, sizeof *per_pair * (size_t)nb);
    for (int i = 0; i < ni; i++) {
        const al_pair_item *it = &t->items[i0 + i];
        float *d = dl + (size_t)i * V;
        double v;
        if (t->logit_diff) {
            const float *x = rows + (size_t)i * C;
            v = (double)al_model_logit(m, x, it->answer) - (double)al_model_logit(m, x, it->wrong);
            s += v;
            if (per_pair) per_pair[it->pair - n0] += v;
            d[it->answer] = 1.0f, d[it->wrong] = -1.0f;
            continue;
        }
        const float *l = lg + (size_t)i * V;
        memcpy(tmp, l, sizeof(float) * V);
        double lse = logsumexp_row(tmp, V);
        v = (double)l[it->answer] - lse;
        s += v;
        if (per_pair) per_pair[it->pair - n0] += v;
        for (int v = 0; v < V; v++) d[v] = (float)-exp((double)l[v] - lse);
        d[it->answer] += 1.0f;
    }
    if (dxL) {
        if (al_model_unembed_backward_x(m, rows, dl, ni, dx, e)) {
            free(rows);
            return -1;
        }
        for (int i = 0; i < ni; i++) { /* items may share a row: add */
            const al_pair_item *it = &t->items[i0 + i];
            float *o = dxL + ((size_t)(it->pair - n0) * T + it->pos) * C;
            for (int k = 0; k < C; k++) o[k] += dx[(size_t)i * C + k];
        }
    }
    free(rows);
    *sum = s;
    return 0;
}

int al_attrpatch_grad(al_model *m, const al_pairs *t, int which, int n0, int nb, double *metric,
                      float *dx, float *dzg, float *dqkv, al_err *e) {
    const al_config *c = &m->cfg;
    if (al_pairs_check(t, c->n_ctx, c->d_vocab, e)) return -1;
    if (which != 0 && which != 1) return al_errf(e, "run must be 0 (clean) or 1 (corrupted)");
    if (n0 < 0 || nb < 1 || n0 + nb > t->N)
        return al_errf(e, "pairs [%d, %d) outside the task's %d", n0, n0 + nb, t->N);
    int i0;
    int ni = al_pairs_batch_items(t, n0, nb, &i0);
    if (ni < 1) return al_errf(e, "pairs [%d, %d) hold no items", n0, n0 + nb);
    size_t nx = (size_t)nb * t->T * c->d_model;
    float *dxL = al_malloc(nx, sizeof(float), e);
    double sum = 0.0;
    int rc =
        !dxL ||
        al_model_forward(m, (which ? t->corr : t->clean) + (size_t)n0 * t->T, NULL, nb, t->T, e) ||
        items_metric(m, t, n0, nb, m->x + (size_t)c->n_layers * nx, dxL, &sum, NULL, e);
    if (!rc) {
        /* the gradient of the mean: scale once, before the backward */
        for (size_t i = 0; i < nx; i++) dxL[i] = (float)(dxL[i] / ni);
        rc = al_model_backward_acts(m, dxL, dx, dzg, dqkv, e);
    }
    free(dxL);
    if (rc) return -1;
    if (metric) *metric = sum / ni;
    return 0;
}

int al_attrpatch_pairs_run(al_model *m, const al_pairs *t, int which, int n0, int nb,
                           double *per_pair, float *dzg, al_err *e) {
    const al_config *c = &m->cfg;
    if (al_pairs_check(t, c->n_ctx, c->d_vocab, e)) return -1;
    if (which != 0 && which != 1) return al_errf(e, "run must be 0 (clean) or 1 (corrupted)");
    if (n0 < 0 || nb < 1 || n0 + nb > t->N)
        return al_errf(e, "pairs [%d, %d) outside the task's %d", n0, n0 + nb, t->N);
    size_t nx = (size_t)nb * t->T * c->d_model;
    float *dxL = dzg ? al_malloc(nx, sizeof(float), e) : NULL;
    double sum;
    int rc =
        (dzg && !dxL) ||
        al_model_forward(m, (which ? t->corr : t->clean) + (size_t)n0 * t->T, NULL, nb, t->T, e) ||
        items_metric(m, t, n0, nb, m->x + (size_t)c->n_layers * nx, dxL, &sum, per_pair, e) ||
        (dzg && al_model_backward_acts(m, dxL, NULL, dzg, NULL, e));
    free(dxL);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------- the run */

typedef struct ap_state {
    al_model *m;
    const al_pairs *t;
    int L, H, D, C, T, B, nb, n0;
    int ns, nr, W, n_recv_all; /* senders; q/k/v receiver heads ((L−1)·H); the layout's
                                * width; receivers incl. direct */
    int den;
    float *dxL, *dx, *dzg,
        *dqkv; /* base-run gradients: (B,T,C) (L+1,B,T,C) (L,B,T,HD) (L,B,T,3HD) */
    float *zg_src; /* (L, B, T, H, D) */
    float *delta; /* (ns, B·T, C) sender differences */
    float *grad; /* (n_recv_all, B·T, C) receiver input gradients */
    float *lnd; /* (B·T, C) with LayerNorm: ∂M/∂(ln1's output) of one
                                   * receiver (scratch; NULL without) */
    double *head_pos, *edge; /* sums, laid out as the result's */
    double sum_base, sum_src;
    /* per pair, for the intervals: (N) the metric's sum over the pair's
     * items on the source and base runs; (N, L·H) and (N, 4·ns·W) its
     * head and edge sums */
    double *pair_src, *pair_base, *pair_head, *pair_edge;
} ap_state;

static void ap_free(ap_state *s) {
    free(s->dxL);
    memset(s, 0, sizeof *s);
}

static int ap_init(ap_state *s, al_model *m, const al_pairs *t, int B, al_err *e) {
    memset(s, 0, sizeof *s);
    const al_config *c = &m->cfg;
    s->m = m, s->t = t, s->B = B;
    s->L = c->n_layers, s->H = c->n_heads, s->D = c->d_head, s->C = c->d_model, s->T = t->T;
    s->W = al_paths_width(s->L, s->H);
    s->ns = 2 + s->W, s->nr = (s->L - 1) * s->H, s->n_recv_all = 3 * s->nr + 1;
    size_t BT = (size_t)B * s->T, C = s->C, HD = (size_t)s->H * s->D, L = s->L;
    size_t n = BT * C + (L + 1) * BT * C + L * BT * HD + L * BT * 3 * HD + L * BT * HD +
               (size_t)s->ns * BT * C + (size_t)s->n_recv_all * BT * C +
               (c->norm_type != AL_NORM_NONE ? BT * C : 0);
    s->dxL = al_malloc(n, sizeof(float), e);
    if (!s->dxL) return al_err_prefix(e, "attribution patching: cannot hold a batch of %d", B);
    s->dx = s->dxL + BT * C;
    s->dzg = s->dx + (L + 1) * BT * C;
    s->dqkv = s->dzg + L * BT * HD;
    s->zg_src = s->dqkv + L * BT * 3 * HD;
    s->delta = s->zg_src + L * BT * HD;
    s->grad = s->delta + (size_t)s->ns * BT * C;
    if (c->norm_type != AL_NORM_NONE) s->lnd = s->grad + (size_t)s->n_recv_all * BT * C;
    return 0;
}

/* The source run: its gated z (the patched-in values) and its metric. */
static int source_run(ap_state *s, al_err *e) {
    const al_pairs *t = s->t;
    al_model *m = s->m;
    size_t BT = (size_t)s->nb * s->T, HD = (size_t)s->H * s->D;
    const int *in = (s->den ? t->clean : t->corr) + (size_t)s->n0 * s->T;
    if (al_model_forward(m, in, NULL, s->nb, s->T, e)) return -1;
    /* m->zg is (L, nb, T, H, D): copy it whole, strided by the batch's own nb */
    memcpy(s->zg_src, m->zg, sizeof(float) * (size_t)s->L * BT * HD);
    double v;
    if (items_metric(m, t, s->n0, s->nb, m->x + (size_t)s->L * BT * s->C, NULL, &v,
                     s->pair_src + s->n0, e))
        return -1;
    s->sum_src += v;
    return 0;
}

/* The base run, its metric and its gradients (of the Σ over items: the
 * mean's factor is applied at the end, with the normalisation). */
static int base_run(ap_state *s, al_err *e) {
    const al_pairs *t = s->t;
    al_model *m = s->m;
    size_t BT = (size_t)s->nb * s->T;
    const int *in = (s->den ? t->corr : t->clean) + (size_t)s->n0 * s->T;
    double v;
    if (al_model_forward(m, in, NULL, s->nb, s->T, e) ||
        items_metric(m, t, s->n0, s->nb, m->x + (size_t)s->L * BT * s->C, s->dxL, &v,
                     s->pair_base + s->n0, e) ||
        al_model_backward_acts(m, s->dxL, s->dx, s->dzg, s->dqkv, e))
        return -1;
    s->sum_base += v;
    return 0;
}

/* head × position sums: Σ_b Σ_d (zg_src − zg_base) · ∂M/∂zg. */
static void head_sums(ap_state *s) {
    const al_model *m = s->m;
    int L = s->L, H = s->H, D = s->D, T = s->T, nb = s->nb;
    size_t BT = (size_t)nb * T, HD = (size_t)H * D;
#pragma omp parallel for collapse(2) schedule(static)
    for (int lh = 0; lh < L * H; lh++)
        for (int t = 0; t < T; t++) {
            int l = lh / H, h = lh % H;
            double acc = 0.0;
            for (int b = 0; b < nb; b++) {
                size_t off = (size_t)l * BT * HD + ((size_t)b * T + t) * HD + (size_t)h * D;
                const float *zs = s->zg_src + off, *zb = m->zg + off, *g = s->dzg + off;
                for (int d = 0; d < D; d++) acc += ((double)zs[d] - zb[d]) * g[d];
            }
            s->head_pos[(size_t)lh * T + t] += acc;
        }
        /* each pair's own head sums, summed apart so that the estimates'
     * order of summation stays as it was */
#pragma omp parallel for schedule(static)
    for (int lh = 0; lh < L * H; lh++)
        for (int b = 0; b < nb; b++) {
            int l = lh / H, h = lh % H;
            double acc = 0.0;
            for (int t = 0; t < T; t++) {
                size_t off = (size_t)l * BT * HD + ((size_t)b * T + t) * HD + (size_t)h * D;
                const float *zs = s->zg_src + off, *zb = m->zg + off, *g = s->dzg + off;
                for (int d = 0; d < D; d++) acc += ((double)zs[d] - zb[d]) * g[d];
            }
            s->pair_head[(size_t)(s->n0 + b) * L * H + lh] = acc;
        }
}

/* s->delta: each sender's output on the source run minus the base run,
 * (nb·T, C) per sender, as path patching's sender_delta defines it:
 * embed, pos, then the heads of path patching's senders. */
static void sender_deltas(ap_state *s) {
    const al_pairs *t = s->t;
    size_t rows = (size_t)s->nb * s->T, off = (size_t)s->n0 * s->T;
    const int *bin = (s->den ? t->corr : t->clean) + off,
              *sin = (s->den ? t->clean : t->corr) + off;
    /* m->zg is the base run's; s->grad is scratch before the gradients are laid out */
    al_edge_senders(s->m, sin, bin, rows, s->zg_src, s->m->zg, 1, s->W, s->grad, s->delta);
}

/* s->grad: each receiver's input gradient (nb·T, C): receiver r = c·nr +
 * (l1−1)·H + h (c = q, k, v of head l1.h), edge_grad.h's, through every
 * later layer (the gradient of patching that one receiver); the last is
 * the direct one, ∂M/∂x_L. */
static void receiver_grads(ap_state *s) {
    int H = s->H, nr = s->nr;
    size_t rows = (size_t)s->nb * s->T, n = rows * s->C;
    for (int r = 0; r < 3 * nr; r++)
        al_edge_receiver_grad(s->m, s->dqkv, r % nr / H + 1, r % nr % H, r / nr, rows, s->lnd,
                              s->grad + (size_t)r * n);
    memcpy(s->grad + (size_t)3 * nr * n, s->dx + (size_t)s->L * n, sizeof(float) * n);
}

/* edge sums: Σ over the batch's rows of Δsender · receiver gradient. */
static void edge_sums(ap_state *s) {
    int ns = s->ns, nr = s->nr, L = s->L, H = s->H, W = s->W, na = s->n_recv_all;
    size_t n = (size_t)s->nb * s->T * s->C;
#pragma omp parallel for collapse(2) schedule(static)
    for (int snd = 0; snd < ns; snd++)
        for (int r = 0; r < na; r++) {
            int ch = r < 3 * nr ? r / nr : 3, rr = r < 3 * nr ? r % nr : 0;
            if (!al_paths_exists(L, H, ch, snd, rr)) continue;
            s->edge[((size_t)ch * ns + snd) * W + rr] +=
                al_edge_dot(s->delta + (size_t)snd * n, s->grad + (size_t)r * n, n);
        }
    /* and each pair's own (its T·C rows of the batch) */
    size_t np = (size_t)s->T * s->C, ne = (size_t)4 * ns * W;
#pragma omp parallel for collapse(2) schedule(static)
    for (int snd = 0; snd < ns; snd++)
        for (int r = 0; r < na; r++) {
            int ch = r < 3 * nr ? r / nr : 3, rr = r < 3 * nr ? r % nr : 0;
            if (!al_paths_exists(L, H, ch, snd, rr)) continue;
            for (int b = 0; b < s->nb; b++)
                s->pair_edge[(size_t)(s->n0 + b) * ne + ((size_t)ch * ns + snd) * W + rr] =
                    al_edge_dot(s->delta + (size_t)snd * n + b * np,
                                s->grad + (size_t)r * n + b * np, np);
        }
}

static int stopped(const al_patch_opts *o, al_err *e) {
    if (o->stop && *o->stop) return al_errf(e, "interrupted");
    return 0;
}

/* Pearson, Spearman, top-5 of estimate vs actual over the entries both
 * have finite; skip (n) entries are left out (the pos sender). */
static int agree(const double *est, const double *act, int n, const unsigned char *skip,
                 al_agreement *a, al_err *e) {
    double *x = al_malloc((size_t)2 * n, sizeof(double), e);
    if (!x) return -1;
    double *y = x + n;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!(skip && skip[i]) && isfinite(est[i]) && isfinite(act[i]))
            x[k] = est[i], y[k++] = act[i];
    a->n = k;
    a->pearson = al_pearson(x, y, k);
    a->spearman = al_spearman(x, y, k);
    a->top5 = al_topk_overlap(x, y, k, 5);
    free(x);
    if (a->top5 < 0) return al_errf(e, "out of memory");
    return 0;
}

/* The actual sweeps of the same grids and their agreement with r's
 * estimates. */
static int compare_actual(al_model *m, const al_pairs *t, const al_patch_opts *o,
                          al_attrpatch_result *r, al_err *e) {
    double t0 = al_now();
    al_patch_opts po = *o;
    al_patch_result ph = {0}, pp = {0};
    al_paths_result pa = {0};
    po.component = "head";
    if (al_patch_run(m, t, &po, &ph, e)) return -1;
    po.component = "head_pos";
    if (al_patch_run(m, t, &po, &pp, e) || al_paths_run(m, t, &po, &pa, e)) {
        al_patch_result_free(&ph), al_patch_result_free(&pp);
        return -1;
    }
    size_t nh = (size_t)r->L * r->H, np = nh * r->T;
    memcpy(r->act_head, ph.effect, sizeof(double) * nh);
    memcpy(r->act_head_pos, pp.effect, sizeof(double) * np);
    memcpy(r->act_edge, pa.effect, sizeof(double) * (size_t)r->n_edge);
    al_patch_result_free(&ph), al_patch_result_free(&pp), al_paths_result_free(&pa);
    r->seconds_patch = al_now() - t0;
    unsigned char *skip = al_calloc((size_t)r->n_edge, 1, e);
    if (!skip) return -1;
    int W = al_paths_width(r->L, r->H);
    for (int ch = 0; ch < 4; ch++)
        for (int rr = 0; rr < W; rr++) skip[((size_t)ch * r->n_senders + 1) * W + rr] = 1;
    int rc = agree(r->head, r->act_head, (int)nh, NULL, &r->agree[AL_AP_HEAD], e) ||
             agree(r->head_pos, r->act_head_pos, (int)np, NULL, &r->agree[AL_AP_HEAD_POS], e) ||
             agree(r->edge, r->act_edge, r->n_edge, skip, &r->agree[AL_AP_EDGE], e);
    free(skip);
    if (rc) return -1;
    r->compared = 1;
    return 0;
}

/* Each head's and edge's interval over the pairs: the estimate is
 * sign · Σ_p a_p / Σ_p (c_p − r_p), a_p the pair's sum and c_p, r_p its
 * clean and corrupted metric sums (what the normalisation divides by),
 * so the ratio interval of al_boot_ratio, pairs resampled whole. */
static int ap_intervals(const ap_state *s, const al_patch_opts *o, size_t N, size_t nh, size_t ne,
                        al_interval *ci, al_err *e) {
    double *a = al_malloc(N * (nh + ne), sizeof *a, e), *d = al_malloc(N, sizeof *d, e);
    int rc = -1;
    if (a && d) {
        double sign = s->den ? 1.0 : -1.0;
        for (size_t p = 0; p < N; p++) {
            d[p] = s->den ? s->pair_src[p] - s->pair_base[p] : s->pair_base[p] - s->pair_src[p];
            for (size_t k = 0; k < nh; k++) a[p * (nh + ne) + k] = sign * s->pair_head[p * nh + k];
            for (size_t k = 0; k < ne; k++)
                a[p * (nh + ne) + nh + k] = sign * s->pair_edge[p * ne + k];
        }
        rc = al_boot_ratio(a, d, (int)N, (int)(nh + ne), o->bootstrap, o->ci_level, o->ci_seed, ci,
                           e);
        for (size_t k = 0; rc == 0 && k < ne; k++) {
            int ch = (int)(k / ((size_t)s->ns * s->W)), snd = (int)(k / s->W % s->ns),
                rr = (int)(k % s->W);
            if (!al_paths_exists(s->L, s->H, ch, snd, rr))
                ci[nh + k] = (al_interval){NAN, NAN, NAN};
        }
    }
    free(a);
    free(d);
    return rc;
}

int al_attrpatch_run(al_model *m, const al_pairs *t, const al_patch_opts *o, int compare,
                     al_attrpatch_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    double t0 = al_now();
    const al_config *c = &m->cfg;
    if (al_patch_opts_check(o, e) || al_pairs_check(t, c->n_ctx, c->d_vocab, e)) return -1;
    if (c->n_layers > AL_PATHS_MAX_LAYERS)
        return al_errf(e,
                       "attribution patching covers models of up to %d layers (this one has "
                       "%d): its edges are path patching's",
                       AL_PATHS_MAX_LAYERS, c->n_layers);
    if (compare != 0 && compare != 1) return al_errf(e, "compare must be 0 or 1 (got %d)", compare);
    al_patch_direction dir;
    al_patch_direction_parse(o->direction, &dir);
    ap_state s;
    int B = o->batch < t->N ? o->batch : t->N;
    if (ap_init(&s, m, t, B, e)) return -1;
    s.den = dir == AL_PATCH_DENOISE;
    int L = s.L, H = s.H, T = s.T, ns = s.ns, W = s.W;
    size_t nh = (size_t)L * H, np = nh * T, ne = (size_t)4 * ns * W;
    /* estimates then (compare) actuals, one allocation; then the pairs'
     * sums and the intervals */
    size_t N = (size_t)t->N;
    double *buf = al_calloc(2 * (nh + np + ne), sizeof(double), e);
    double *pairs = al_calloc(N * (2 + nh + ne), sizeof(double), e);
    al_interval *ci = al_malloc(nh + ne, sizeof *ci, e);
    if (!pairs || !ci) free(buf), buf = NULL;
    al_progress pg;
    al_progress_init(&pg, 10.0);
    int nbatch = (t->N + B - 1) / B, rc = buf ? 0 : -1;
    if (buf) {
        r->head = buf, r->head_pos = buf + nh, r->edge = r->head_pos + np;
        s.head_pos = r->head_pos, s.edge = r->edge;
        s.pair_src = pairs, s.pair_base = pairs + N, s.pair_head = pairs + 2 * N;
        s.pair_edge = s.pair_head + N * nh;
    }
    for (int k = 0; rc == 0 && k < nbatch; k++) {
        s.n0 = k * B;
        s.nb = t->N - s.n0 < B ? t->N - s.n0 : B;
        rc = stopped(o, e) || source_run(&s, e) || base_run(&s, e);
        if (rc) break;
        head_sums(&s);
        sender_deltas(&s);
        receiver_grads(&s);
        edge_sums(&s);
        if (o->progress)
            al_progress_count(&pg, 0, k + 1, nbatch, "attribution patching: batch %d/%d", k + 1,
                              nbatch);
    }
    if (o->progress) al_progress_done(&pg);
    if (rc == 0) {
        double cnt = t->n_items;
        double mc = (s.den ? s.sum_src : s.sum_base) / cnt,
               mr = (s.den ? s.sum_base : s.sum_src) / cnt;
        /* Σ-over-items gradients → the mean's; then patch.h's normalisation */
        double f = mc == mr ? NAN : (s.den ? 1.0 : -1.0) / (cnt * (mc - mr));
        for (size_t i = 0; i < np; i++) r->head_pos[i] *= f;
        for (size_t lh = 0; lh < nh; lh++) {
            double a = 0.0;
            for (int tt = 0; tt < T; tt++) a += r->head_pos[lh * T + tt];
            r->head[lh] = a;
        }
        for (int ch = 0; ch < 4; ch++)
            for (int snd = 0; snd < ns; snd++)
                for (int rr = 0; rr < W; rr++) {
                    size_t i = ((size_t)ch * ns + snd) * W + rr;
                    r->edge[i] = al_paths_exists(L, H, ch, snd, rr) ? r->edge[i] * f : NAN;
                }
        r->L = L, r->H = H, r->N = t->N, r->T = T;
        r->direction = dir;
        r->m_clean = mc, r->m_corr = mr;
        r->n_senders = ns, r->n_recv = s.nr, r->n_edge = (int)ne;
        r->seconds = al_now() - t0;
        r->act_head = r->edge + ne;
        r->act_head_pos = r->act_head + nh;
        r->act_edge = r->act_head_pos + np;
        for (size_t i = 0; i < nh + np + ne; i++) r->act_head[i] = NAN;
        rc = ap_intervals(&s, o, N, nh, ne, ci, e);
        r->head_ci = ci, r->edge_ci = ci + nh, ci = NULL;
        r->ci_level = o->ci_level, r->ci_boot = o->bootstrap, r->ci_seed = o->ci_seed;
        r->ci_n = t->N;
    }
    free(pairs);
    free(ci);
    ap_free(&s);
    if (rc == 0 && compare) rc = compare_actual(m, t, o, r, e);
    if (rc) {
        free(buf);
        free(r->head_ci);
        memset(r, 0, sizeof *r);
        return -1;
    }
    return 0;
}
