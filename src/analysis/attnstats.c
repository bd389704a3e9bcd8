/* attnstats.c -- attention entropy and mean attention distance per head
 * (attnstats.h). */
#include "attnlab/attnstats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

al_attnstats_opts al_attnstats_opts_defaults(void) {
    al_attnstats_opts o = AL_ATTNSTATS_OPTS_INIT;
    return o;
}

int al_attnstats_opts_check(const al_attnstats_opts *o, al_err *e) {
    if (o->batches < 1 || o->batches > 100000)
        return al_errf(e, "--batches must be 1..100000 (got %d)", o->batches);
    if (o->batch < 1 || o->batch > 100000)
        return al_errf(e, "--batch must be 1..100000 (got %d)", o->batch);
    return al_ci_check(o->ci_level, o->bootstrap, e);
}

void al_attnstats_result_free(al_attnstats_result *r) {
    free(r->entropy);
    free(r->ci);
    memset(r, 0, sizeof *r);
}

double al_attnstats_bytes(const al_config *c, int T, const al_attnstats_opts *o) {
    double LH = (double)c->n_layers * c->n_heads, nw = (double)o->batches * o->batch;
    /* the forward, the windows' ids, each window's three means per head
     * (the intervals' items) and the bootstrap's resampled means */
    return al_model_acts_bytes(c, o->batch, T) + 2.0 * o->batch * T * sizeof(int) +
           3 * LH * (nw + o->bootstrap + 8) * sizeof(double);
}

int al_attnstats_run(al_model *m, const al_tokens *val, int T, const al_attnstats_opts *o,
                     al_attnstats_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    if (al_attnstats_opts_check(o, e)) return -1;
    const int L = m->cfg.n_layers, H = m->cfg.n_heads, B = o->batch, LH = L * H;
    if (T < 2 || T > m->cfg.n_ctx)
        return al_errf(e, "attention statistics need windows of 2..%d tokens (got %d)",
                       m->cfg.n_ctx, T);
    double t0 = al_now();
    int *in = al_malloc((size_t)B * T * 2, sizeof *in, e);
    double *acc = al_calloc((size_t)LH * 3, sizeof *acc, e);
    /* each window's three means per head, for the intervals */
    const size_t nw = (size_t)o->batches * B;
    double *win = al_calloc(nw * LH * 3, sizeof *win, e);
    if (!in || !acc || !win) goto fail;
    int *tg = in + (size_t)B * T;
    al_progress pr;
    al_progress_init(&pr, 2.0);
    for (int k = 0; k < o->batches; k++) {
        if (o->stop && *o->stop) {
            al_errf(e, "interrupted");
            goto fail;
        }
        if (o->progress)
            al_progress_count(&pr, k == 0, k, o->batches, "attention statistics: batch %d/%d", k,
                              o->batches);
        if (al_batch_fixed(val, B, T, k, o->batches, in, tg, e) ||
            al_model_forward(m, in, NULL, B, T, e))
            goto fail;
        /* m->att is (L, B, H, T, T), row t of a head's (T, T) block its
         * causal attention: a_ts for s <= t. */
        for (int l = 0; l < L; l++)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++) {
                    const float *A = m->att + (((size_t)l * B + b) * H + h) * T * T;
                    double *ent = acc + (size_t)(l * H + h) * 3;
                    /* row (k·B + b) of win: per score k, head i at k·LH + i */
                    double *wr = win + ((size_t)k * B + b) * LH * 3 + (size_t)(l * H + h);
                    double w0 = 0, w1 = 0, w2 = 0;
                    for (int t = 1; t < T; t++) {
                        const float *row = A + (size_t)t * T;
                        double hrow = 0, dist = 0;
                        for (int s = 0; s <= t; s++) {
                            double a = row[s];
                            if (a > 0) hrow -= a * log(a);
                            dist += a * (t - s);
                        }
                        ent[0] += hrow;
                        ent[1] += hrow / log((double)t + 1);
                        ent[2] += dist;
                        w0 += hrow, w1 += hrow / log((double)t + 1), w2 += dist;
                    }
                    wr[0] = w0 / (T - 1), wr[LH] = w1 / (T - 1), wr[2 * LH] = w2 / (T - 1);
                }
    }
    if (o->progress) al_progress_done(&pr);
    r->entropy = al_malloc((size_t)LH * 3, sizeof *r->entropy, e);
    if (!r->entropy) goto fail;
    r->entropy_norm = r->entropy + LH;
    r->distance = r->entropy + 2 * LH;
    double n = (double)o->batches * B * (T - 1);
    for (int i = 0; i < LH; i++) {
        r->entropy[i] = acc[i * 3] / n;
        r->entropy_norm[i] = acc[i * 3 + 1] / n;
        r->distance[i] = acc[i * 3 + 2] / n;
    }
    r->L = L, r->H = H, r->T = T, r->windows = o->batches * B;
    if (!(r->ci = al_malloc((size_t)LH * 3, sizeof *r->ci, e)) ||
        al_boot_means(win, (int)nw, 3 * LH, o->bootstrap, o->ci_level, o->ci_seed, r->ci, e))
        goto fail;
    r->ci_level = o->ci_level, r->ci_boot = o->bootstrap;
    free(in);
    free(acc);
    free(win);
    r->seconds = al_now() - t0;
    return 0;
fail:
    free(in);
    free(acc);
    free(win);
    al_attnstats_result_free(r);
    return -1;
}

int al_attnstats_views(const al_attnstats_result *r, al_view *out, int cap) {
    const al_view v[] = {
        {.metric = "attn_entropy",
         .title = "attention entropy (nats)",
         .shape = AL_VIEW_HEAD,
         .L = r->L,
         .H = r->H,
         .v = r->entropy,
         .ci = r->ci,
         .ci_level = r->ci_level,
         .ci_n = r->windows,
         .ci_boot = r->ci_boot},
        {.metric = "attn_entropy_norm",
         .title = "attention entropy / ln(t+1) (0 one-hot, 1 uniform)",
         .shape = AL_VIEW_HEAD,
         .L = r->L,
         .H = r->H,
         .v = r->entropy_norm,
         .ci = r->ci ? r->ci + r->L * r->H : NULL,
         .ci_level = r->ci_level,
         .ci_n = r->windows,
         .ci_boot = r->ci_boot},
        {.metric = "attn_distance",
         .title = "mean attention distance (tokens back)",
         .shape = AL_VIEW_HEAD,
         .L = r->L,
         .H = r->H,
         .v = r->distance,
         .ci = r->ci ? r->ci + 2 * r->L * r->H : NULL,
         .ci_level = r->ci_level,
         .ci_n = r->windows,
         .ci_boot = r->ci_boot},
    };
    int n = (int)(sizeof v / sizeof v[0]);
    for (int i = 0; i < n && i < cap; i++) out[i] = v[i];
    return n;
}
