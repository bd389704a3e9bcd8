/* sae_task.c -- attribution patching at an SAE's latents (sae_task.h).
 *
 * Per batch of pairs: the source run's forward (its z at the site, kept),
 * the base run's forward and one backward of the metric from it
 * (al_attrpatch_pairs_run), then the SAE's encoder on both runs' z, a
 * chunk of rows at a time so that memory stays that of one chunk's codes
 * whatever d_sae. A feature's term at a row needs W_dec,i · g only where
 * its code differs between the runs: with TopK at most 2k features a
 * row, so the cost is about one forward and one backward plus
 * O(rows · 2k · d_in), not a product with the whole decoder. */
#include "attnlab/sae_task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"
#include "attnlab/membudget.h"

#define CHUNK_ROWS 256 /* rows encoded at once: codes of CHUNK_ROWS × d_sae */

int al_sae_task_opts_check(const al_sae_task_opts *o, al_err *e) {
    al_patch_direction d;
    if (!o->direction || al_patch_direction_parse(o->direction, &d))
        return al_errf(e, "unknown direction '%s' (known: denoise, noise)",
                       o->direction ? o->direction : "(null)");
    if (o->batch < 1 || o->batch > 100000)
        return al_errf(e, "--batch must be 1..100000 (got %d)", o->batch);
    return al_ci_check(o->ci_level, o->bootstrap, e);
}

int al_sae_task_exact(const al_config *c, int layer, const al_pairs *t, char *buf, size_t cap) {
    const char *why = !t->logit_diff                 ? "its metric is a log-prob"
                      : layer != c->n_layers - 1     ? "later layers read the SAE's layer"
                      : c->norm_type != AL_NORM_NONE ? "ln_final rescales the residual"
                                                     : NULL;
    if (!why) return 1;
    snprintf(buf, cap,
             "task %s: the features' estimates are first order (attribution patching), exact "
             "only where the metric is linear in layer %d's z; here %s, so they can exceed 1 and "
             "need not equal actual patches",
             t->task, layer, why);
    return 0;
}

void al_sae_task_result_free(al_sae_task_result *r) {
    free(r->effect);
    free(r->ci);
    memset(r, 0, sizeof *r);
}

double al_sae_task_bytes(const al_config *c, const al_sae_cfg *sc, int N, int B, int T,
                         int bootstrap) {
    double rows = (double)B * T, HD = (double)c->n_heads * c->d_head, F = sc->d_sae;
    double fl = (double)c->n_layers * rows * HD /* dzg */ + 3 * rows * HD /* z', z, g */
                + 2 * CHUNK_ROWS * (F + sc->d_in) /* both runs' codes and x̂ of a chunk */
                + rows * (double)c->d_model /* the metric's gradient */;
    double db = (double)N * (F + 4) /* the pairs' sums */ + 4 * (F + 2) /* results */ +
                (double)bootstrap + N;
    return 4 * fl + 8 * db + al_sae_bytes(sc, CHUNK_ROWS);
}

/* The codes of the n rows of z (n, d) as the SAE reads them (times its
 * scale) into f (n, d_sae, dense) and xh (n, d: the reconstruction in z
 * units). */
static int encode_rows(al_sae *s, double scale, const float *z, int n, float *x, float *f,
                       float *xh, al_err *e) {
    const int d = s->cfg.d_in, F = s->cfg.d_sae;
    for (size_t i = 0; i < (size_t)n * d; i++) x[i] = (float)(z[i] * scale);
    if (al_sae_encode(s, x, n, e)) return -1;
    if (s->cfg.arch == AL_SAE_TOPK) {
        memset(f, 0, sizeof(float) * (size_t)n * F);
        for (int r = 0; r < n; r++)
            for (int q = 0; q < s->cfg.k; q++) {
                int lat = s->idx[(size_t)r * s->cfg.k + q];
                float v = s->val[(size_t)r * s->cfg.k + q];
                if (lat >= 0 && v > 0) f[(size_t)r * F + lat] = v;
            }
    } else {
        for (size_t i = 0; i < (size_t)n * F; i++) f[i] = s->f[i] > 0 ? s->f[i] : 0;
    }
    for (size_t i = 0; i < (size_t)n * d; i++) xh[i] = (float)(s->xhat[i] / scale);
    return 0;
}

typedef struct st_state {
    al_model *m;
    al_sae *s;
    const al_pairs *t;
    double scale;
    int layer, F, d, T, nb, n0;
    float *dzg, *zs, *zb, *g; /* dzg (L, nb, T, HD); the site's z' and z, g (nb·T, HD) */
    float *x, *fs, *fb, *xs, *xb; /* a chunk: the encoder's input, codes and x̂ of each run */
    double *pair_feat; /* (N, F + 2): each pair's features', error's and site's sums */
    double *pair_clean, *pair_corr; /* (N) each pair's metric sums */
    double *act_clean, *act_corr; /* (F) Σ over items of f at the item's position */
} st_state;

/* One chunk of rows [r0, r0 + n) of the batch: encode both runs, add each
 * row's terms to its pair's sums. */
static int chunk(st_state *st, int den, int r0, int n, al_err *e) {
    const int F = st->F, d = st->d, T = st->T;
    const float *zs = st->zs + (size_t)r0 * d, *zb = st->zb + (size_t)r0 * d;
    if (encode_rows(st->s, st->scale, zs, n, st->x, st->fs, st->xs, e) ||
        encode_rows(st->s, st->scale, zb, n, st->x, st->fb, st->xb, e))
        return -1;
    const float *W = st->s->W_dec;
    for (int r = 0; r < n; r++) {
        const int row = r0 + r, pair = st->n0 + row / T;
        const float *g = st->g + (size_t)row * d;
        double *acc = st->pair_feat + (size_t)pair * (F + 2);
        const float *fs = st->fs + (size_t)r * F, *fb = st->fb + (size_t)r * F;
        int any = 0;
        for (int k = 0; k < d && !any; k++) any = g[k] != 0;
        if (any) {
            for (int i = 0; i < F; i++) {
                if (fs[i] == fb[i]) continue;
                const float *w = W + (size_t)i * d;
                double p = 0;
                for (int k = 0; k < d; k++) p += (double)w[k] * g[k];
                acc[i] += ((double)fs[i] - fb[i]) * p / st->scale;
            }
            double er = 0, si = 0;
            for (int k = 0; k < d; k++) {
                double dz = (double)zs[(size_t)r * d + k] - zb[(size_t)r * d + k];
                double dxh = (double)st->xs[(size_t)r * d + k] - st->xb[(size_t)r * d + k];
                er += (dz - dxh) * g[k];
                si += dz * g[k];
            }
            acc[F] += er, acc[F + 1] += si;
        }
        /* codes at the items' positions, in each run */
        const float *fc = den ? fs : fb, *fr = den ? fb : fs;
        int i0, ni = al_pairs_batch_items(st->t, pair, 1, &i0);
        for (int q = 0; q < ni; q++)
            if (st->t->items[i0 + q].pos == row % T)
                for (int i = 0; i < F; i++) st->act_clean[i] += fc[i], st->act_corr[i] += fr[i];
    }
    return 0;
}

int al_sae_task_run(al_model *m, al_sae *s, const al_sae_meta *meta, const al_pairs *t,
                    const al_sae_task_opts *o, al_sae_task_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    double t0 = al_now();
    const al_config *c = &m->cfg;
    if (al_sae_task_opts_check(o, e)) return -1;
    if (meta->site != AL_SAE_SITE_Z)
        return al_errf(e,
                       "only SAEs on a layer's z are attributed by feature (this one reads the "
                       "residual stream of layer %d)",
                       meta->hook_layer);
    if (al_sae_fits_model(s, meta, c, NULL, e) || al_pairs_check(t, c->n_ctx, c->d_vocab, e))
        return -1;
    if (m->hooks.n)
        return al_errf(e,
                       "the model has %d hook%s registered: the SAE's attribution reads the "
                       "model as it is, without interventions",
                       m->hooks.n, m->hooks.n == 1 ? "" : "s");
    if (!(meta->scale > 0) || !isfinite(meta->scale))
        return al_errf(e, "the SAE's scale %g is not a positive number", meta->scale);
    al_patch_direction dir;
    al_patch_direction_parse(o->direction, &dir);
    const int den = dir == AL_PATCH_DENOISE, N = t->N, T = t->T, F = s->cfg.d_sae, d = s->cfg.d_in,
              L = c->n_layers, B = o->batch < N ? o->batch : N;
    const size_t rows = (size_t)B * T;
    st_state st = {.m = m,
                   .s = s,
                   .t = t,
                   .scale = meta->scale,
                   .layer = meta->hook_layer,
                   .F = F,
                   .d = d,
                   .T = T};
    float *fbuf = al_malloc((size_t)L * rows * d + 3 * rows * d +
                                (size_t)CHUNK_ROWS * (3 * (size_t)F + 3 * (size_t)d),
                            sizeof(float), e);
    double *dbuf = al_calloc((size_t)N * (F + 4) + 2 * (size_t)F, sizeof(double), e);
    /* effect (F + 2), then act_clean and act_corr (F each) */
    double *res = al_calloc(3 * (size_t)F + 2, sizeof(double), e);
    al_interval *ci = al_malloc((size_t)F + 2, sizeof *ci, e);
    int rc = fbuf && dbuf && res && ci ? 0 : -1;
    if (rc == 0) {
        st.dzg = fbuf, st.zs = st.dzg + (size_t)L * rows * d, st.zb = st.zs + rows * d;
        st.g = st.zb + rows * d, st.x = st.g + rows * d;
        st.fs = st.x + (size_t)CHUNK_ROWS * d, st.fb = st.fs + (size_t)CHUNK_ROWS * F;
        st.xs = st.fb + (size_t)CHUNK_ROWS * F, st.xb = st.xs + (size_t)CHUNK_ROWS * d;
        st.pair_feat = dbuf, st.pair_clean = dbuf + (size_t)N * (F + 2);
        st.pair_corr = st.pair_clean + N, st.act_clean = st.pair_corr + N;
        st.act_corr = st.act_clean + F;
    }
    al_progress pg;
    al_progress_init(&pg, 2.0);
    for (int n0 = 0; rc == 0 && n0 < N; n0 += B) {
        const int nb = N - n0 < B ? N - n0 : B;
        const size_t nr = (size_t)nb * T, site = (size_t)st.layer * nr * d;
        st.nb = nb, st.n0 = n0;
        if (o->stop && *o->stop) {
            rc = al_errf(e, "interrupted");
            break;
        }
        /* the source run: its z at the site; then the base run and its gradient */
        double *src_m = den ? st.pair_clean : st.pair_corr,
               *base_m = den ? st.pair_corr : st.pair_clean;
        if ((rc = al_attrpatch_pairs_run(m, t, den ? 0 : 1, n0, nb, src_m + n0, NULL, e))) break;
        memcpy(st.zs, m->z + site, sizeof(float) * nr * d);
        if ((rc = al_attrpatch_pairs_run(m, t, den ? 1 : 0, n0, nb, base_m + n0, st.dzg, e))) break;
        memcpy(st.zb, m->z + site, sizeof(float) * nr * d);
        /* ∂M/∂z = gate · ∂M/∂zg, head by head */
        const int H = c->n_heads, D = c->d_head;
        for (size_t q = 0; q < nr; q++)
            for (int h = 0; h < H; h++) {
                const float gt = m->gates[st.layer * H + h];
                const float *src = st.dzg + site + q * d + (size_t)h * D;
                float *dst = st.g + q * d + (size_t)h * D;
                for (int k = 0; k < D; k++) dst[k] = gt * src[k];
            }
        for (size_t r0 = 0; rc == 0 && r0 < nr; r0 += CHUNK_ROWS)
            rc = chunk(&st, den, (int)r0, (int)(nr - r0 < CHUNK_ROWS ? nr - r0 : CHUNK_ROWS), e);
        if (o->progress)
            al_progress_count(&pg, 0, n0 + nb, N, "sae features: task attribution, %d/%d pairs",
                              n0 + nb, N);
    }
    if (o->progress) al_progress_done(&pg);
    double sc = 0, sr = 0;
    for (int p = 0; rc == 0 && p < N; p++) sc += st.pair_clean[p], sr += st.pair_corr[p];
    if (rc == 0 && sc == sr)
        rc = al_errf(e, "the clean and corrupted runs score the same (%g): no effect to divide by",
                     sc / t->n_items);
    /* the gap every estimate divides by, checked as patching checks it:
     * each pair stands for M + (S_p − M·n_p)/n̄ (gap.h) */
    double *gc = NULL, *gr = NULL;
    if (rc == 0 && (!(gc = al_malloc((size_t)2 * N, sizeof *gc, e)))) rc = -1;
    if (rc == 0) {
        gr = gc + N;
        const double nbar = (double)t->n_items / N, Mc = sc / t->n_items, Mr = sr / t->n_items;
        for (int p = 0; p < N; p++) {
            int i0, np = al_pairs_batch_items(t, p, 1, &i0);
            gc[p] = Mc + (st.pair_clean[p] - Mc * np) / nbar;
            gr[p] = Mr + (st.pair_corr[p] - Mr * np) / nbar;
        }
        al_gap_check(&r->warn, al_gap_metric_name(t), gc, gr, N);
    }
    free(gc);
    /* normalised as patch.h's effect; intervals by resampling pairs */
    double *dp = NULL;
    if (rc == 0 && !(dp = al_malloc((size_t)N, sizeof *dp, e))) rc = -1;
    if (rc == 0) {
        const double sign = den ? 1.0 : -1.0;
        for (int p = 0; p < N; p++) {
            dp[p] = st.pair_clean[p] - st.pair_corr[p];
            for (int k = 0; k < F + 2; k++) st.pair_feat[(size_t)p * (F + 2) + k] *= sign;
        }
        rc =
            al_boot_ratio(st.pair_feat, dp, N, F + 2, o->bootstrap, o->ci_level, o->ci_seed, ci, e);
    }
    if (rc == 0) {
        r->effect = res;
        r->act_clean = res + F + 2, r->act_corr = r->act_clean + F;
        r->ci = ci;
        for (int k = 0; k < F + 2; k++) {
            double a = 0;
            for (int p = 0; p < N; p++) a += st.pair_feat[(size_t)p * (F + 2) + k];
            r->effect[k] = a / (sc - sr);
            if (k < F && a != 0) r->n_moved++;
        }
        for (int i = 0; i < F; i++)
            r->act_clean[i] = st.act_clean[i] / t->n_items,
            r->act_corr[i] = st.act_corr[i] / t->n_items;
        r->d_sae = F, r->layer = st.layer, r->N = N, r->n_items = t->n_items;
        r->direction = dir;
        r->m_clean = sc / t->n_items, r->m_corr = sr / t->n_items;
        r->ci_level = o->ci_level, r->ci_boot = o->bootstrap, r->ci_seed = o->ci_seed;
        r->seconds = al_now() - t0;
        res = NULL, ci = NULL;
    }
    free(dp);
    free(fbuf);
    free(dbuf);
    free(res);
    free(ci);
    if (rc) memset(r, 0, sizeof *r);
    return rc;
}
