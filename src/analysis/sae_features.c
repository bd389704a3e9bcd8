/* sae_features.c -- the features of an SAE on a layer's z
 * (sae_features.h): one pass over text windows (density, activations, top
 * contexts, direct feature attribution by head), one over the induction
 * probe (activation on the first and second occurrence), and the logit
 * effects from the weights alone. */
#include "attnlab/sae_features.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/hooks.h"
#include "attnlab/scores.h"
#include "attnlab/stats.h"

al_sae_feat_opts al_sae_feat_opts_defaults(void) {
    al_sae_feat_opts o = AL_SAE_FEAT_OPTS_INIT;
    return o;
}

int al_sae_is_induction(double index, double p) {
    return index >= AL_SAE_INDUCTION_INDEX && p < AL_SAE_INDUCTION_P;
}

int al_sae_feat_opts_check(const al_sae_feat_opts *o, al_err *e) {
    if (o->windows < 1 || o->windows > 100000)
        return al_errf(e, "--windows must be 1..100000 (got %d)", o->windows);
    if (o->top_n < 1 || o->top_n > 100)
        return al_errf(e, "--top-n must be 1..100 (got %d)", o->top_n);
    if (o->logit_n < 1 || o->logit_n > 100)
        return al_errf(e, "--logit-n must be 1..100 (got %d)", o->logit_n);
    if (o->probe_r < 0 || o->probe_r > 100000)
        return al_errf(e, "--probe-r must be 0..100000 (got %d)", o->probe_r);
    if (o->probe_n < 1 || o->probe_n > 100000)
        return al_errf(e, "--probe-n must be 1..100000 (got %d)", o->probe_n);
    return 0;
}

void al_sae_feat_result_free(al_sae_feat_result *r) {
    free(r->fired);
    free(r->first_fired);
    free(r->next_token);
    free(r->induction);
    free(r->head_auroc);
    free(r->density);
    free(r->contrib);
    free(r->ctx);
    free(r->up_tok);
    free(r->up_val);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------- the site's capture */

typedef struct zcap {
    int d;
    float *dst; /* (B·T, d) */
    int stopped;
} zcap;

/* Copy z and stop the forward: nothing after the site is needed. */
static int zcap_hook(al_hook_act *a, void *vctx, al_err *e) {
    zcap *c = vctx;
    const size_t rows = (size_t)a->m->B * (size_t)a->m->T, d = (size_t)c->d;
    for (size_t r = 0; r < rows; r++)
        memcpy(c->dst + r * d, a->data + r * a->ld, d * sizeof(float));
    c->stopped = 1;
    return al_errf(e, "forward stopped at the SAE site");
}

static int capture(al_model *m, int layer, int d, const int *in, int B, int T, float *dst,
                   al_err *e) {
    zcap c = {d, dst, 0};
    if (al_hook_add(m, AL_HOOK_Z, layer, zcap_hook, &c, e) != 0) return -1;
    al_err fe;
    int rc = al_model_forward(m, in, NULL, B, T, &fe);
    al_hook_remove(m, &c);
    if (rc == 0 || c.stopped) return 0;
    *e = fe;
    return -1;
}

/* The firing latents of row b of the last encode: n pairs (lat, val),
 * val > 0, in latent order for L1 and by descending pre for TopK. */
static int row_codes(const al_sae *s, int b, int *lat, float *val) {
    int n = 0;
    if (s->cfg.arch == AL_SAE_TOPK) {
        const int k = s->cfg.k;
        for (int j = 0; j < k; j++) {
            float v = s->val[(size_t)b * k + j];
            if (v > 0) lat[n] = s->idx[(size_t)b * k + j], val[n++] = v;
        }
    } else {
        const float *f = s->f + (size_t)b * s->cfg.d_sae;
        for (int i = 0; i < s->cfg.d_sae; i++)
            if (f[i] > 0) lat[n] = i, val[n++] = f[i];
    }
    return n;
}

/* Insert a context into feature i's slots (sorted by act descending;
 * a tie keeps the earlier one, which came first). */
static void ctx_insert(al_sae_feat_ctx *slots, int n, const al_sae_feat_ctx *c) {
    int at = n;
    for (int j = 0; j < n; j++)
        if (slots[j].window < 0 || c->act > slots[j].act) {
            at = j;
            break;
        }
    if (at == n) return;
    memmove(slots + at + 1, slots + at, (size_t)(n - 1 - at) * sizeof *slots);
    slots[at] = *c;
}

/* The m largest (up) or smallest values of x (n) into tok/val, ties to
 * the lower id. */
static void extremes(const double *x, int n, int m, int up, int *tok, float *val) {
    int have = 0;
    for (int v = 0; v < n; v++) {
        double y = up ? x[v] : -x[v];
        int at = have;
        while (at > 0) {
            double z = up ? (double)x[tok[at - 1]] : -(double)x[tok[at - 1]];
            if (y > z)
                at--;
            else
                break;
        }
        if (at >= m) continue;
        int last = have < m ? have : m - 1;
        for (int j = last; j > at; j--) tok[j] = tok[j - 1];
        tok[at] = v;
        if (have < m) have++;
    }
    for (int j = 0; j < m; j++) val[j] = j < have ? (float)x[tok[j]] : 0.0f;
    for (int j = have; j < m; j++) tok[j] = -1;
}

static int alloc_result(al_sae_feat_result *r, al_err *e) {
    const size_t F = (size_t)r->d_sae;
    r->fired = al_calloc(F, sizeof *r->fired, e);
    r->first_fired = al_calloc(F * 2, sizeof *r->first_fired, e);
    r->density = al_calloc(F * 9, sizeof(double), e);
    r->next_token = al_malloc(F, sizeof(int), e);
    r->induction = al_calloc(F, 1, e);
    r->head_auroc = al_calloc((size_t)r->H, sizeof(double), e);
    r->contrib = al_calloc(F * r->H * 2, sizeof(double), e);
    r->ctx = al_malloc(F * r->top_n, sizeof *r->ctx, e);
    r->up_tok = al_calloc(F * r->logit_n * 2, sizeof(int), e);
    r->up_val = al_calloc(F * r->logit_n * 2, sizeof(float), e);
    if (!r->fired || !r->first_fired || !r->next_token || !r->induction || !r->head_auroc ||
        !r->density || !r->contrib || !r->ctx || !r->up_tok || !r->up_val)
        return -1;
    r->mean_act = r->density + F;
    r->max_act = r->density + 2 * F;
    r->first_mean = r->density + 3 * F;
    r->second_mean = r->density + 4 * F;
    r->induction_index = r->density + 5 * F;
    r->induction_p = r->density + 6 * F;
    r->auroc = r->density + 7 * F;
    r->next_share = r->density + 8 * F;
    r->second_fired = r->first_fired + F;
    r->share = r->contrib + F * r->H;
    r->down_tok = r->up_tok + F * r->logit_n;
    r->down_val = r->up_val + F * r->logit_n;
    for (size_t i = 0; i < F * r->top_n; i++)
        r->ctx[i] = (al_sae_feat_ctx){.window = -1, .offset = -1, .pos = -1, .token = -1};
    return 0;
}

/* The text pass: windows of T tokens, bm per forward. */
static int text_pass(al_model *m, al_sae *s, const al_sae_meta *meta, const al_tokens *data,
                     const al_sae_feat_opts *o, al_sae_feat_result *r, al_err *e) {
    const int T = r->T, d = s->cfg.d_in, F = s->cfg.d_sae, H = r->H, D = d / H;
    int bm = 4096 / T > 0 ? 4096 / T : 1;
    if (bm > o->windows) bm = o->windows;
    const size_t rows = (size_t)bm * T;
    int *in = al_malloc(rows * 2, sizeof(int), e);
    float *z = al_malloc(rows * d, sizeof(float), e);
    float *xc = al_malloc((size_t)d, sizeof(float), e);
    float *wt = al_malloc((size_t)F * d, sizeof(float), e); /* W_encᵀ (d_sae, d_in) */
    int *lat = al_malloc((size_t)F, sizeof(int), e);
    float *val = al_malloc((size_t)F, sizeof(float), e);
    double *csum = al_calloc((size_t)F * H, sizeof(double), e);
    int rc = -1;
    if (!in || !z || !xc || !wt || !lat || !val || !csum) goto out;
    for (int j = 0; j < d; j++)
        for (int i = 0; i < F; i++) wt[(size_t)i * d + j] = s->W_enc[(size_t)j * F + i];
    const size_t span = data->n - (size_t)T;
    const float sc = (float)meta->scale;
    al_progress pr;
    al_progress_init(&pr, 2.0);
    for (int w0 = 0; w0 < o->windows; w0 += bm) {
        if (o->stop && *o->stop) {
            al_errf(e, "interrupted");
            goto out;
        }
        if (o->progress)
            al_progress_count(&pr, w0 == 0, w0, o->windows, "sae features: window %d/%d", w0,
                              o->windows);
        int nw = o->windows - w0 < bm ? o->windows - w0 : bm;
        for (int b = 0; b < nw; b++)
            if (al_batch_fixed(data, 1, T, w0 + b, o->windows, in + (size_t)b * T,
                               in + rows + (size_t)b * T, e) != 0)
                goto out;
        if (capture(m, meta->hook_layer, d, in, nw, T, z, e) != 0) goto out;
        const size_t nr = (size_t)nw * T;
        for (size_t i = 0; i < nr * d; i++) z[i] *= sc;
        const size_t chunk = 4096;
        for (size_t r0 = 0; r0 < nr; r0 += chunk) {
            int nb = (int)(nr - r0 < chunk ? nr - r0 : chunk);
            if (al_sae_encode(s, z + r0 * d, nb, e) != 0) goto out;
            for (int b = 0; b < nb; b++) {
                const size_t row = r0 + (size_t)b;
                const int w = w0 + (int)(row / T), t = (int)(row % T);
                const float *x = z + row * d;
                for (int j = 0; j < d; j++) xc[j] = x[j] - s->b_dec[j];
                int n = row_codes(s, b, lat, val);
                for (int q = 0; q < n; q++) {
                    const int i = lat[q];
                    const float v = val[q];
                    r->fired[i]++;
                    r->mean_act[i] += v;
                    if (v > r->max_act[i]) r->max_act[i] = v;
                    size_t start = (size_t)((double)w * (double)span / (double)o->windows);
                    if (start >= span) start = span - 1;
                    al_sae_feat_ctx c = {.window = w,
                                         .offset = (long)start,
                                         .pos = t,
                                         .token = in[row],
                                         .act = v};
                    ctx_insert(r->ctx + (size_t)i * r->top_n, r->top_n, &c);
                    const float *wi = wt + (size_t)i * d;
                    for (int h = 0; h < H; h++) {
                        double ch = 0;
                        for (int k = 0; k < D; k++) ch += (double)xc[h * D + k] * wi[h * D + k];
                        csum[(size_t)i * H + h] += ch;
                    }
                }
            }
        }
    }
    if (o->progress) al_progress_done(&pr);
    for (int i = 0; i < F; i++) {
        r->density[i] = (double)r->fired[i] / (double)r->positions;
        if (r->fired[i]) r->n_live++;
        r->mean_act[i] = r->fired[i] ? r->mean_act[i] / (double)r->fired[i] : 0;
        double tot = 0;
        for (int h = 0; h < H; h++) {
            double c = r->fired[i] ? csum[(size_t)i * H + h] / (double)r->fired[i] : 0;
            r->contrib[(size_t)i * H + h] = c;
            tot += c;
        }
        for (int h = 0; h < H; h++)
            r->share[(size_t)i * H + h] = tot != 0 ? r->contrib[(size_t)i * H + h] / tot : NAN;
    }
    rc = 0;
out:
    free(in);
    free(z);
    free(xc);
    free(wt);
    free(lat);
    free(val);
    free(csum);
    return rc;
}

/* P(X >= k) for X ~ Binomial(n, 1/2), in logs so n in the tens of
 * thousands neither overflows nor underflows to a useless 0 too early. */
static double binom_half_tail(long k, long n) {
    if (k <= 0) return 1.0;
    if (k > n) return 0.0;
    double acc = 0, lfn = lgamma((double)n + 1), l2 = (double)n * log(2.0);
    for (long j = k; j <= n; j++) {
        double t = exp(lfn - lgamma((double)j + 1) - lgamma((double)(n - j) + 1) - l2);
        acc += t;
        if (t < acc * 1e-17) break; /* the terms only shrink past the mode */
    }
    return acc < 1 ? acc : 1;
}

/* The probe pass: per feature its mean activation and firing count on
 * the first and second occurrence and the AUROC of its code between them;
 * per head the AUROC of its z norm. Codes are kept sparsely, (feature,
 * half, value) per firing, then bucketed by feature. */
static int probe_pass(al_model *m, al_sae *s, const al_sae_meta *meta, const al_sae_feat_opts *o,
                      al_sae_feat_result *r, al_err *e) {
    const int R = r->probe_r, N = r->probe_n, Tp = 2 * R + 1, d = s->cfg.d_in, F = s->cfg.d_sae,
              H = r->H, D = d / H;
    const long half = (long)N * R;
    al_probe p;
    if (al_probe_make(&p, R, N, o->probe_seed, m->cfg.d_vocab, o->bos, NULL, e) != 0) return -1;
    int bm = 4096 / Tp > 0 ? 4096 / Tp : 1;
    if (bm > N) bm = N;
    float *z = al_malloc((size_t)bm * Tp * d, sizeof(float), e);
    int *lat = al_malloc((size_t)F, sizeof(int), e);
    float *val = al_malloc((size_t)F, sizeof(float), e);
    double *hn = al_malloc((size_t)H * 2 * half, sizeof(double), e); /* (H, 2, N·R) */
    size_t cap = (size_t)half * 2 * 8, n_ent = 0;
    int *ef = al_malloc(cap, sizeof(int), e);
    float *ev = al_malloc(cap, sizeof(float), e);
    unsigned char *eh = al_malloc(cap, 1, e);
    long *es = al_malloc(cap, sizeof(long), e); /* probe position: sec·N·R + slot */
    size_t *at = al_calloc((size_t)F + 1, sizeof(size_t), e);
    double *sa = NULL, *sb = NULL;
    int rc = -1;
    if (!z || !lat || !val || !hn || !ef || !ev || !eh || !es || !at) goto out;
    const float sc = (float)meta->scale;
    for (int n0 = 0; n0 < N; n0 += bm) {
        if (o->stop && *o->stop) {
            al_errf(e, "interrupted");
            goto out;
        }
        int nb = N - n0 < bm ? N - n0 : bm;
        if (capture(m, meta->hook_layer, d, p.tokens + (size_t)n0 * Tp, nb, Tp, z, e) != 0)
            goto out;
        const size_t nr = (size_t)nb * Tp;
        for (size_t row = 0; row < nr; row++) {
            int t = (int)(row % Tp);
            if (t == 0) continue;
            const int sec = t > R;
            const long slot = (long)(n0 + (int)(row / Tp)) * R + (sec ? t - R - 1 : t - 1);
            for (int h = 0; h < H; h++) {
                double q = 0;
                for (int k = 0; k < D; k++) {
                    double v = z[row * d + (size_t)h * D + k];
                    q += v * v;
                }
                hn[((size_t)h * 2 + (size_t)sec) * half + slot] = sqrt(q);
            }
        }
        for (size_t i = 0; i < nr * d; i++) z[i] *= sc;
        if (al_sae_encode(s, z, (int)nr, e) != 0) goto out;
        for (size_t row = 0; row < nr; row++) {
            int t = (int)(row % Tp);
            if (t == 0) continue; /* BOS */
            const int sec = t > R;
            const long slot = (long)(n0 + (int)(row / Tp)) * R + (sec ? t - R - 1 : t - 1);
            double *acc = sec ? r->second_mean : r->first_mean;
            long *cnt = sec ? r->second_fired : r->first_fired;
            int n = row_codes(s, (int)row, lat, val);
            for (int q = 0; q < n; q++) {
                acc[lat[q]] += val[q];
                cnt[lat[q]]++;
                if (n_ent == cap) {
                    size_t nc = cap * 2;
                    int *f2 = realloc(ef, nc * sizeof *ef);
                    if (f2) ef = f2;
                    float *v2 = realloc(ev, nc * sizeof *ev);
                    if (v2) ev = v2;
                    unsigned char *h2 = realloc(eh, nc);
                    if (h2) eh = h2;
                    long *s2 = realloc(es, nc * sizeof *es);
                    if (s2) es = s2;
                    if (!f2 || !v2 || !h2 || !s2) {
                        al_errf(e, "out of memory");
                        goto out;
                    }
                    cap = nc;
                }
                ef[n_ent] = lat[q], ev[n_ent] = val[q], eh[n_ent] = (unsigned char)sec;
                es[n_ent++] = sec * half + slot;
            }
        }
    }
    /* Bucket the firings by feature (counting sort, stable). */
    for (size_t j = 0; j < n_ent; j++) at[ef[j] + 1]++;
    for (int i = 0; i < F; i++) at[i + 1] += at[i];
    size_t maxn = 0;
    for (int i = 0; i < F; i++)
        if (at[i + 1] - at[i] > maxn) maxn = at[i + 1] - at[i];
    sa = al_malloc(maxn + (size_t)half * 2 + 1, sizeof(double), e);
    if (!sa) goto out;
    sb = sa + maxn;
    {
        const int V = m->cfg.d_vocab;
        size_t *fill = al_malloc((size_t)F, sizeof(size_t), e);
        double *sv = al_malloc(n_ent + 1, sizeof(double), e);
        unsigned char *sh = al_malloc(n_ent + 1, 1, e);
        int *snx = al_malloc(n_ent + 1, sizeof(int), e);
        long *tc = al_calloc((size_t)V, sizeof(long), e);
        if (!fill || !sv || !sh || !snx || !tc) {
            free(fill), free(sv), free(sh), free(snx), free(tc);
            goto out;
        }
        memcpy(fill, at, sizeof(size_t) * (size_t)F);
        for (size_t j = 0; j < n_ent; j++) {
            size_t k = fill[ef[j]]++;
            sv[k] = ev[j], sh[k] = eh[j], snx[k] = -1;
            if (eh[j]) { /* the token induction predicts there: the next one */
                long slot = es[j] - half, n = slot / R;
                int t = R + 1 + (int)(slot % R);
                if (t + 1 < Tp) snx[k] = p.tokens[(size_t)n * Tp + (size_t)t + 1];
            }
        }
        for (int i = 0; i < F; i++) {
            long n1 = r->first_fired[i], n2 = r->second_fired[i], a = 0, b = 0, best = 0;
            int bt = -1;
            for (size_t k = at[i]; k < at[i + 1]; k++) {
                if (sh[k])
                    sb[b++] = sv[k];
                else
                    sa[a++] = sv[k];
                if (snx[k] >= 0 && ++tc[snx[k]] > best) best = tc[snx[k]], bt = snx[k];
            }
            for (size_t k = at[i]; k < at[i + 1]; k++)
                if (snx[k] >= 0) tc[snx[k]] = 0;
            r->auroc[i] = n1 + n2 ? al_auroc(sb, b, half - n2, sa, a, half - n1) : NAN;
            r->induction_p[i] = binom_half_tail(n2, n1 + n2);
            r->next_token[i] = bt;
            r->next_share[i] = n2 ? (double)best / (double)n2 : NAN;
        }
        free(fill), free(sv), free(sh), free(snx), free(tc);
    }
    for (int h = 0; h < H; h++) {
        const double *h1 = hn + (size_t)h * 2 * half, *h2 = h1 + half;
        r->head_auroc[h] = al_auroc(h2, half, 0, h1, half, 0);
    }
    for (int i = 0; i < F; i++) {
        r->first_mean[i] /= (double)half;
        r->second_mean[i] /= (double)half;
        double t = r->first_mean[i] + r->second_mean[i];
        r->induction_index[i] = t > 0 ? r->second_mean[i] / t : NAN;
        r->induction[i] = al_sae_is_induction(r->induction_index[i], r->induction_p[i]);
        r->n_induction += r->induction[i];
    }
    /* The induction features together: their summed code at each probe
     * position, in firing order (fixed), against the head baseline. The
     * features were chosen on this same probe, so it is an in-sample
     * figure. hn is free to reuse as the (2, N·R) sum. */
    r->group_auroc = NAN;
    if (r->n_induction) {
        double *g = hn;
        memset(g, 0, sizeof(double) * 2 * (size_t)half);
        for (size_t j = 0; j < n_ent; j++)
            if (r->induction[ef[j]]) g[es[j]] += ev[j];
        r->group_auroc = al_auroc(g + half, half, 0, g, half, 0);
    }
    rc = 0;
out:
    al_probe_free(&p);
    free(z);
    free(lat);
    free(val);
    free(hn);
    free(ef);
    free(ev);
    free(eh);
    free(es);
    free(at);
    free(sa);
    return rc;
}

/* Logit effects of every live feature from the weights: its decoder row
 * through the layer's W_O, then ln_final as it reads a direction with its
 * scale frozen at 1 (centred, times w: al_sae_feat_ln_note), then W_U.
 * Biases add the same to every feature and are left out. */
static int logit_pass(al_model *m, const al_sae *s, const al_sae_meta *meta, al_sae_feat_result *r,
                      al_err *e) {
    const int C = m->cfg.d_model, V = m->cfg.d_vocab, H = r->H, d = s->cfg.d_in, D = d / H;
    double *res = al_malloc((size_t)C, sizeof(double), e);
    double *lg = al_malloc((size_t)V, sizeof(double), e);
    if (!res || !lg) {
        free(res);
        free(lg);
        return -1;
    }
    const float *wu = al_model_wu(m), *we = m->p[AL_P_WE];
    for (int i = 0; i < s->cfg.d_sae; i++) {
        if (!r->fired[i]) continue;
        const float *wd = s->W_dec + (size_t)i * d;
        for (int c = 0; c < C; c++) res[c] = 0;
        for (int h = 0; h < H; h++) {
            const float *wo = al_head_wo(m, r->layer, h); /* (D, C) */
            for (int k = 0; k < D; k++) {
                double a = (double)wd[h * D + k] / meta->scale;
                if (a == 0) continue;
                for (int c = 0; c < C; c++) res[c] += a * wo[(size_t)k * C + c];
            }
        }
        if (m->cfg.norm_type != AL_NORM_NONE) { /* through ln_final, its scale frozen at 1 */
            const float *w = m->p[AL_P_LNFW]; /* NULL for LNPre */
            double mu = 0.0;
            for (int c = 0; c < C; c++) mu += res[c];
            mu /= C;
            for (int c = 0; c < C; c++) res[c] = (res[c] - mu) * (w ? w[c] : 1.0);
        }
        for (int v = 0; v < V; v++) {
            double y = 0;
            if (wu)
                for (int c = 0; c < C; c++) y += res[c] * wu[(size_t)c * V + v];
            else
                for (int c = 0; c < C; c++) y += res[c] * we[(size_t)v * C + c];
            lg[v] = y;
        }
        const size_t o = (size_t)i * r->logit_n;
        extremes(lg, V, r->logit_n, 1, r->up_tok + o, r->up_val + o);
        extremes(lg, V, r->logit_n, 0, r->down_tok + o, r->down_val + o);
    }
    free(res);
    free(lg);
    return 0;
}

const char *al_sae_feat_ln_note(const al_config *c) {
    if (c->norm_type == AL_NORM_NONE) return NULL;
    return "sae features of a LayerNorm model: each feature's logit effects are of its direction "
           "through ln_final with the scale frozen at 1 (centred, times ln_final.w; "
           "TransformerLens's apply_ln_to_stack): their order is that of any frozen scale, their "
           "size is per unit of it";
}

int al_sae_feat_probe_r(const al_sae_feat_opts *o, int n_ctx, int *R, al_err *e) {
    *R = al_probe_r_default(o->probe_r, n_ctx);
    if (*R < 1 || 2.0 * *R + 1 > n_ctx)
        return al_errf(e, "--probe-r %d: the probe's 2R+1 tokens must fit n_ctx %d", *R, n_ctx);
    return 0;
}

/* Bytes of one firing kept on the probe: feature, value, occurrence and
 * position while collected (17), value, occurrence and next token once
 * bucketed (13). */
#define FIRING_BYTES 30.0
/* An L1 SAE's firings per position cannot be known before it runs; the
 * budget assumes this many (TopK's are at most k). */
#define L1_FIRINGS_ASSUMED 64

double al_sae_feat_bytes(const al_config *c, const al_sae_cfg *sc, int T, int R,
                         const al_sae_feat_opts *o) {
    const double F = sc->d_sae, d = sc->d_in, H = c->n_heads, Tp = 2.0 * R + 1;
    const double half = (double)o->probe_n * R;
    int bm = 4096 / T > 0 ? 4096 / T : 1, bp = 4096 / (int)Tp > 0 ? 4096 / (int)Tp : 1;
    if (bm > o->windows) bm = o->windows;
    if (bp > o->probe_n) bp = o->probe_n;
    double per =
        sc->arch == AL_SAE_TOPK ? sc->k : (F < L1_FIRINGS_ASSUMED ? F : L1_FIRINGS_ASSUMED);
    /* the result's per-feature arrays, contexts and logit effects */
    double result = F * (8 + 16 + 72 + 4 + 1 + 32.0 * H) + F * o->top_n * sizeof(al_sae_feat_ctx) +
                    F * o->logit_n * 16.0;
    /* the text pass: a chunk's ids and z, W_encᵀ, the DFA sums */
    double text = (double)bm * T * (8 + 4 * d) + F * d * 4 + F * H * 8 +
                  al_model_acts_bytes(c, bm, T) + al_sae_bytes(sc, bm * T);
    /* the probe: its tokens, a chunk's z, each head's norms, the firings
     * (doubling as they grow) and the AUROCs' sort buffers */
    double probe = (double)o->probe_n * Tp * 12 + (double)bp * Tp * d * 4 + H * 2 * half * 8 +
                   2 * half * per * FIRING_BYTES * 1.5 + 8 * (4 * half + 1) + 8.0 * c->d_vocab +
                   al_model_acts_bytes(c, bp, (int)Tp) + al_sae_bytes(sc, bp * (int)Tp);
    return result + text + probe;
}

int al_sae_features_run(al_model *m, al_sae *s, const al_sae_meta *meta, const al_tokens *data,
                        int T, const al_sae_feat_opts *o, al_sae_feat_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    if (al_sae_feat_opts_check(o, e) != 0) return -1;
    if (meta->site != AL_SAE_SITE_Z)
        return al_errf(e,
                       "sae features: only SAEs on a layer's z are supported (this one reads "
                       "the residual stream of layer %d)",
                       meta->hook_layer);
    if (al_sae_fits_model(s, meta, &m->cfg, NULL, e) != 0) return -1;
    if (T < 2 || T > m->cfg.n_ctx)
        return al_errf(e, "sae features need windows of 2..%d tokens (got %d)", m->cfg.n_ctx, T);
    if ((size_t)T + 1 > data->n)
        return al_errf(e, "windows of %d tokens need at least %d tokens; the data has %zu", T,
                       T + 1, data->n);
    if (data->max_id >= m->cfg.d_vocab)
        return al_errf(e, "token id %d in the data is >= d_vocab %d", data->max_id, m->cfg.d_vocab);
    int R;
    if (al_sae_feat_probe_r(o, m->cfg.n_ctx, &R, e)) return -1;
    double t0 = al_now();
    r->d_sae = s->cfg.d_sae;
    r->layer = meta->hook_layer;
    r->H = m->cfg.n_heads;
    r->T = T;
    r->windows = o->windows;
    r->top_n = o->top_n;
    r->logit_n = o->logit_n;
    r->probe_r = R;
    r->probe_n = o->probe_n;
    r->positions = (long)o->windows * T;
    if (alloc_result(r, e) != 0 || text_pass(m, s, meta, data, o, r, e) != 0 ||
        probe_pass(m, s, meta, o, r, e) != 0 || logit_pass(m, s, meta, r, e) != 0) {
        al_sae_feat_result_free(r);
        return -1;
    }
    r->seconds = al_now() - t0;
    return 0;
}
