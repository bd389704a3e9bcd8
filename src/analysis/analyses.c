/* analyses.c -- scores, ablate and prune as functions (see analyses.h).
 *
 * The code moved here from the commands unchanged in what it computes:
 * same calls, same order, same seeds and batch sizes. Anything that
 * changes one of them changes the numbers a study prints, so keep it so. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/analyses.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The probe's sequences per forward pass in scores (fixed: the batching
 * decides the summation order, hence the last bits of the scores). */
#define SCORES_PROBE_BATCH 16

/* ---------------------------------------------------------- scores */

al_scores_opts al_scores_opts_defaults(void) {
    al_scores_opts o = AL_SCORES_OPTS_INIT;
    return o;
}

int al_scores_opts_check(const al_scores_opts *o, al_err *e) {
    if ((o->probe_r != 0 && o->probe_r < 2) || o->probe_n < 1 || o->probe_n > 1000000 ||
        o->batches < 1 || o->batch < 1 || o->batches > 100000 || o->batch > 100000)
        return al_errf(e, "need --probe-r >= 2, 1 <= --probe-n <= 1000000, --batches and "
                          "--batch in 1..100000");
    return al_ci_check(o->ci_level, o->bootstrap, e);
}

int al_scores_call(double v, double se, double z, double thr) {
    if (!(v > thr)) return -1;
    return isfinite(se) && v - z * se > thr ? 1 : 0;
}

/* What the validation windows of an ablation set cost: the model's
 * activations for a batch, the mean-ablation replacement z of a batch,
 * the set's ids, selection and clean losses, the mean z (and its sums). */
static double text_bytes(const al_config *c, int T, int batch, int batches) {
    double LHD = (double)c->n_layers * c->n_heads * c->d_head, rows = (double)batch * batches;
    return al_model_acts_bytes(c, batch, T) + LHD * batch * T * sizeof(float) +
           rows * T * (2 * sizeof(int) + 1 + sizeof(float)) +
           LHD * T * (sizeof(float) + sizeof(double));
}

/* The probe's N sequences of 2R+1 tokens in forwards of pb. */
static double probe_bytes(const al_config *c, int R, int N, int pb) {
    double T = 2.0 * R + 1;
    return al_model_acts_bytes(c, pb, (int)T) + (double)N * T * (3 * sizeof(int) + 1 + 4) +
           text_bytes(c, (int)T, pb, 1) - al_model_acts_bytes(c, pb, (int)T);
}

double al_scores_bytes(const al_config *c, int T, const al_scores_opts *o) {
    /* the sequences' values and the bootstrap's means (al_boot_means) */
    double cols = AL_PROBE_ITEM_COLS((double)c->n_layers * c->n_heads);
    return probe_bytes(c, al_probe_r_default(o->probe_r, c->n_ctx), o->probe_n,
                       SCORES_PROBE_BATCH) +
           8 * cols * ((double)o->probe_n + o->bootstrap + 1) + 8.0 * o->bootstrap +
           4.0 * o->probe_n +
           (T > 0 ? text_bytes(c, T, o->batch, o->batches) +
                        /* copying_ablation's sequences' sums and their intervals */
                        8.0 * c->n_layers * c->n_heads *
                            ((double)o->batch * o->batches * (AL_SEL_GROUPS + 1) + o->bootstrap + 4)
                  : 0);
}

int al_probe_fits(int probe_r, int n_ctx, al_err *e) {
    probe_r = al_probe_r_default(probe_r, n_ctx);
    if (2.0 * probe_r + 1 > n_ctx)
        return al_errf(e, "probe length 2R+1 = %d exceeds n_ctx %d (lower --probe-r)",
                       2 * probe_r + 1, n_ctx);
    return 0;
}

void al_scores_result_free(al_scores_result *r) {
    al_probe_scores_free(&r->probe);
    free(r->ci);
    free(r->off);
    free(r->copying);
    free(r->copying_ci);
    memset(r, 0, sizeof *r);
}

/* icl_score and copying_ablation on the validation windows. */
static int text_scores(al_model *m, const al_tokens *d, const al_scores_opts *o,
                       al_scores_result *r, al_err *e) {
    al_abl_set s = {0};
    int LH = r->L * r->H, rc = -1, n = 0;
    unsigned char *sets = NULL;
    al_abl_out *out = NULL;
    double *rows = NULL, *a = NULL;
    r->copying = al_malloc((size_t)LH * 2, sizeof(double), e);
    r->excess = r->copying ? r->copying + LH : NULL;
    r->copying_ci = al_malloc((size_t)LH, sizeof *r->copying_ci, e);
    if (!r->copying || !r->copying_ci ||
        al_abl_set_text(&s, d, r->T, o->batch, 0, o->batches, o->batches, m->cfg.d_vocab, e) ||
        al_abl_prepare(m, &s, e) ||
        al_icl_score(s.clean, s.targets, s.rows, s.T, &r->icl_early, &r->icl_late, &r->icl_score,
                     &r->icl_se, e))
        goto out;
    if (isfinite(r->icl_se) && fabs(r->icl_score) < AL_ICL_N_SE * r->icl_se)
        al_warnings_add(&r->warn,
                        "icl_score %+.3f is within %g standard errors (%.3f) of 0 over "
                        "%d windows: its sign says nothing at this sample size (more windows: "
                        "--batches)",
                        r->icl_score, AL_ICL_N_SE, r->icl_se, s.rows);
    r->rg = al_icl_ranges(s.T);
    r->val_loss = s.clean_mean[0];
    r->val_loss_copy = s.clean_mean[1];
    r->copy_fraction = (double)s.count[1] / s.count[0];
    for (int i = 0; i < LH; i++) n += !r->off[i];
    sets = al_calloc((size_t)(n ? n : 1) * LH, 1, e);
    out = al_malloc((size_t)(n ? n : 1), sizeof *out, e);
    if (!sets || !out) goto out;
    for (int i = 0, k = 0; i < LH; i++)
        if (!r->off[i]) sets[(size_t)k++ * LH + i] = 1;
    if (n && (!(rows = al_malloc((size_t)n * s.rows * AL_SEL_GROUPS, sizeof *rows, e)) ||
              !(a = al_malloc((size_t)s.rows * (n + 1), sizeof *a, e)) ||
              al_abl_run(m, &s, AL_ABL_MEAN, sets, n, out, rows, o->progress, e)))
        goto out;
    /* copying_ablation's intervals: each window's sum of the Δ at its copy
     * positions over their count, the windows resampled whole */
    al_interval *ci = r->copying_ci + LH - n;
    if (n) {
        double *d = a + (size_t)s.rows * n;
        for (int i = 0; i < s.rows; i++)
            for (int k = 0; k < n; k++)
                a[(size_t)i * n + k] = rows[((size_t)k * s.rows + i) * AL_SEL_GROUPS + 1];
        al_abl_row_counts(&s, 1, d);
        if (al_boot_ratio(a, d, s.rows, n, o->bootstrap, o->ci_level, o->ci_seed, ci, e)) goto out;
    }
    r->copying_n = s.rows;
    /* Mean Δ at the other positions, from the mean over all and over copy
     * positions: Δrest = (c0 Δall − c1 Δcopy) / (c0 − c1). */
    long c0 = s.count[0], c1 = s.count[1];
    for (int i = 0, k = 0; i < LH; i++) {
        if (r->off[i]) {
            r->copying[i] = r->excess[i] = NAN;
            r->copying_ci[i] = (al_interval){NAN, NAN, NAN};
            continue;
        }
        /* the intervals were computed into the array's tail: move each
         * head's to its own slot (k <= i, so nothing unread is overwritten) */
        r->copying_ci[i] = ci[k];
        const al_abl_out *x = &out[k++];
        double rest = c0 > c1 ? (c0 * x->delta[0] - c1 * x->delta[1]) / (double)(c0 - c1) : NAN;
        r->copying[i] = x->delta[1];
        r->excess[i] = c1 > 0 ? x->delta[1] - rest : NAN;
    }
    r->have_text = 1;
    rc = 0;
out:
    free(sets);
    free(out);
    free(rows);
    free(a);
    al_abl_set_free(&s);
    return rc;
}

/* The probe's intervals from its sequences' values, which are then
 * freed (the result keeps the intervals). */
static int probe_intervals(const al_scores_opts *o, al_scores_result *r, al_err *e) {
    al_probe_scores *ps = &r->probe;
    int LH = r->L * r->H, cols = AL_PROBE_ITEM_COLS(LH);
    if (!(r->ci = al_malloc((size_t)cols, sizeof *r->ci, e)) ||
        al_boot_means(ps->items, ps->n_items, cols, o->bootstrap, o->ci_level, o->ci_seed, r->ci,
                      e))
        return -1;
    r->ci_level = o->ci_level, r->ci_boot = o->bootstrap, r->ci_seed = o->ci_seed;
    r->ci_n = ps->n_items;
    /* Bonferroni over the L·H heads a call is made for at once */
    r->ci_z = al_normal_quantile(1 - (1 - o->ci_level) / LH);
    free(ps->items);
    ps->items = NULL;
    return 0;
}

int al_scores_run(al_model *m, const al_tokens *val, int T, int bos, const unsigned char *off,
                  const al_scores_opts *o, al_scores_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    if (al_scores_opts_check(o, e)) return -1; /* *r stays zeroed, as promised */
    r->L = m->cfg.n_layers, r->H = m->cfg.n_heads;
    r->T = T;
    r->val_loss = r->val_loss_copy = r->copy_fraction = NAN;
    r->icl_early = r->icl_late = r->icl_score = r->icl_se = NAN;
    size_t LH = (size_t)r->L * r->H;
    al_probe p = {0};
    if (!(r->off = al_calloc(LH, 1, e))) goto fail;
    if (off) memcpy(r->off, off, LH);
    for (size_t i = 0; i < LH; i++) r->n_off += r->off[i] != 0;
    if (al_probe_make(&p, al_probe_r_default(o->probe_r, m->cfg.n_ctx), o->probe_n, o->probe_seed,
                      m->cfg.d_vocab, bos, o->probe_src, e))
        goto fail;
    r->probe_text = p.text, r->probe_recur = p.recur;
    r->probe_uniform_all = p.uniform_all, r->probe_prev_all = p.prev_all;
    r->probe_ceiling = p.ceiling;
    if (al_probe_run_items(m, &p, SCORES_PROBE_BATCH, &r->probe, e) || probe_intervals(o, r, e) ||
        (val && text_scores(m, val, o, r, e)))
        goto fail;
    al_probe_free(&p);
    return 0;
fail:
    al_probe_free(&p);
    al_scores_result_free(r);
    return -1;
}

/* ---------------------------------------------------------- ablate */

al_ablate_opts al_ablate_opts_defaults(void) {
    al_ablate_opts o = AL_ABLATE_OPTS_INIT;
    return o;
}

int al_ablate_opts_check(const al_ablate_opts *o, al_err *e) {
    al_abl_method method;
    if ((o->heads != NULL) + (o->each != 0) + (o->pairs != 0) > 1)
        return al_errf(e, "give at most one of --heads, --each and --pairs");
    if (!o->method) return al_errf(e, "no ablation method (zero, mean or resample)");
    if (al_abl_method_parse(o->method, &method, e)) return -1;
    if ((o->probe_r != 0 && o->probe_r < 2) || o->probe_n < 1 || o->probe_n > 1000000 ||
        o->batches < 1 || o->batch < 1 || o->batches > 100000 || o->batch > 100000)
        return al_errf(e, "need --probe-r >= 2, 1 <= --probe-n <= 1000000, --batches and --batch "
                          "in 1..100000, --show >= 0");
    if (method == AL_ABL_RESAMPLE && o->batch < 2)
        return al_errf(e, "resample ablation needs --batch >= 2");
    return al_ci_check(o->ci_level, o->bootstrap, e);
}

double al_ablate_bytes(const al_config *c, int T, const al_ablate_opts *o) {
    double LH = (double)c->n_layers * c->n_heads;
    double n = LH + (o->pairs ? LH * (LH - 1) / 2 : 0);
    double rows = (double)o->batch * o->batches + o->probe_n;
    /* the sequences' sums (3 groups), then one group's columns (the
     * configurations and the pairs' interactions) with the bootstrap's
     * ratios */
    return probe_bytes(c, al_probe_r_default(o->probe_r, c->n_ctx), o->probe_n, 32) +
           text_bytes(c, T, o->batch, o->batches) + 8.0 * n * rows * AL_SEL_GROUPS +
           8.0 * 2 * n * (rows + o->bootstrap + 4);
}

void al_ablate_result_free(al_ablate_result *r) {
    free(r->c);
    free(r->sets);
    memset(r, 0, sizeof *r);
}

/* The configurations of the chosen mode, over heads not off: the --heads
 * set, or every head alone, then (pairs) every pair (for 2+ layers only
 * pairs across layers). */
static int make_plan(int L, int H, const unsigned char *off, const al_ablate_opts *o,
                     al_ablate_result *r, al_err *e) {
    int LH = L * H;
    size_t cap = (size_t)LH + (o->pairs ? (size_t)LH * (LH - 1) / 2 : 0) + 1;
    r->sets = al_calloc(cap * LH, 1, e);
    r->c = al_calloc(cap, sizeof *r->c, e);
    if (!r->sets || !r->c) return -1;
    if (o->heads) {
        if (al_heads_parse(o->heads, L, H, r->sets, e)) return -1;
        for (int i = 0; i < LH; i++)
            if (r->sets[i] && off[i])
                return al_errf(e, "head %d.%d is already off in the mask", i / H, i % H);
        r->c[0].a = r->c[0].b = -1;
        r->n = 1;
    } else {
        for (int i = 0; i < LH; i++)
            if (!off[i]) {
                r->sets[(size_t)r->n * LH + i] = 1;
                r->c[r->n].a = i, r->c[r->n++].b = -1;
            }
        if (o->pairs)
            for (int i = 0; i < LH; i++)
                for (int j = i + 1; j < LH; j++) {
                    if (off[i] || off[j] || (L > 1 && i / H == j / H)) continue;
                    r->sets[(size_t)r->n * LH + i] = r->sets[(size_t)r->n * LH + j] = 1;
                    r->c[r->n].a = i, r->c[r->n++].b = j;
                }
    }
    if (!r->n) return al_errf(e, "no head left to ablate (the mask turns them all off)");
    return 0;
}

/* Each configuration's intervals (al_ablate_config.ci) from the
 * sequences' sums trows (text) and prows (probe), al_abl_run's rows:
 * per group one al_boot_ratio over the columns configurations, then the
 * pairs' interactions Δ(pair) − Δ(h1) − Δ(h2), whose per-sequence sums
 * are the same combination of the sums (one denominator). */
static int single_of(const al_ablate_result *r, int i);
static int ablate_intervals(al_ablate_result *r, const al_abl_set *text, const al_abl_set *probe,
                            const double *trows, const double *prows, const al_ablate_opts *o,
                            al_err *e) {
    const int G = AL_SEL_GROUPS, n = r->n;
    int np = 0, rc = 0;
    for (int k = 0; k < n; k++) np += r->c[k].b >= 0;
    for (int k = 0; k < n; k++)
        for (int q = 0; q < 6; q++) r->c[k].ci[q] = (al_interval){NAN, NAN, NAN};
    for (int g = 0; g < G && !rc; g++) {
        const al_abl_set *s = g < 2 ? text : probe;
        const double *R = g < 2 ? trows : prows;
        int rows = s->rows, cols = n + np;
        double *a = al_malloc((size_t)rows * cols, sizeof *a, e);
        double *d = al_malloc((size_t)rows, sizeof *d, e);
        al_interval *iv = al_malloc((size_t)cols, sizeof *iv, e);
        if (!a || !d || !iv) rc = -1;
        for (int i = 0; !rc && i < rows; i++) {
            double *ai = a + (size_t)i * cols;
            for (int k = 0; k < n; k++) ai[k] = R[((size_t)k * rows + i) * G + g];
            for (int k = 0, j = n; k < n; k++)
                if (r->c[k].b >= 0)
                    ai[j++] = ai[k] - ai[single_of(r, r->c[k].a)] - ai[single_of(r, r->c[k].b)];
        }
        if (!rc) {
            al_abl_row_counts(s, g, d);
            rc = al_boot_ratio(a, d, rows, cols, o->bootstrap, o->ci_level, o->ci_seed, iv, e);
        }
        for (int k = 0, j = n; !rc && k < n; k++) {
            r->c[k].ci[g] = iv[k];
            if (r->c[k].b >= 0) r->c[k].ci[AL_ABL_CI_INTER_LOSS + g] = iv[j++];
        }
        free(a), free(d), free(iv);
    }
    r->ci_level = o->ci_level, r->ci_boot = o->bootstrap, r->ci_seed = o->ci_seed;
    r->ci_n_text = text->rows, r->ci_n_probe = probe->rows;
    return rc;
}

/* Index of the single-head configuration of head i (-1 if none). */
static int single_of(const al_ablate_result *r, int i) {
    for (int k = 0; k < r->n; k++)
        if (r->c[k].b < 0 && r->c[k].a == i) return k;
    return -1;
}

int al_ablate_run(al_model *m, const al_tokens *val, int T, int bos, const unsigned char *off,
                  const al_ablate_opts *o, al_ablate_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    if (al_ablate_opts_check(o, e)) return -1;
    int L = m->cfg.n_layers, H = m->cfg.n_heads, LH = L * H, rc = -1;
    const int R = al_probe_r_default(o->probe_r, m->cfg.n_ctx);
    al_probe pr = {0};
    al_abl_set text = {0}, probe = {0};
    al_abl_metrics *x = NULL;
    double *trows = NULL, *prows = NULL;
    unsigned char *none = NULL;
    r->L = L, r->H = H, r->T = T;
    al_abl_method_parse(o->method, &r->method, e);
    if (!off && !(off = none = al_calloc((size_t)LH, 1, e))) goto out;
    if (make_plan(L, H, off, o, r, e) || !(x = al_malloc((size_t)r->n, sizeof *x, e)) ||
        al_abl_set_text(&text, val, T, o->batch, 0, o->batches, o->batches, m->cfg.d_vocab, e) ||
        al_probe_make(&pr, R, o->probe_n, o->probe_seed, m->cfg.d_vocab, bos, o->probe_src, e))
        goto out;
    if (2 * R + 1 > m->cfg.n_ctx) {
        al_errf(e, "probe length 2R+1 = %d exceeds n_ctx %d (lower --probe-r)", 2 * R + 1,
                m->cfg.n_ctx);
        goto out;
    }
    int pb = 32; /* probe batch; for resample no batch may be a single row */
    while (r->method == AL_ABL_RESAMPLE && o->probe_n % pb == 1 && pb < o->probe_n) pb++;
    if (al_abl_set_probe(&probe, &pr, pb, e)) goto out;
    text.stop = probe.stop = o->stop;
    double t1 = al_now();
    if (al_abl_prepare(m, &text, e) || al_abl_prepare(m, &probe, e)) goto out;
    r->seconds_clean = al_now() - t1;
    if (!(trows = al_malloc((size_t)r->n * text.rows * AL_SEL_GROUPS, sizeof *trows, e)) ||
        !(prows = al_malloc((size_t)r->n * probe.rows * AL_SEL_GROUPS, sizeof *prows, e)) ||
        al_abl_evaluate(m, &text, &probe, r->method, r->sets, r->n, x, trows, prows, o->progress,
                        e))
        goto out;
    r->seconds_ablate = al_now() - t1 - r->seconds_clean;
    r->clean_loss = text.clean_mean[0];
    r->clean_delta_probe = probe.count[2] ? 0 : NAN;
    for (int k = 0; k < r->n; k++) {
        al_ablate_config *c = &r->c[k];
        for (int i = 0; i < LH; i++) c->n_heads += r->sets[(size_t)k * LH + i] != 0;
        c->kind = c->a < 0 ? (c->n_heads == 1 ? "single" : "set") : c->b < 0 ? "single" : "pair";
        c->loss = x[k].loss, c->delta_loss = x[k].delta_loss;
        c->delta_copy = x[k].delta_copy, c->delta_probe = x[k].delta_probe;
        c->inter_loss = c->inter_copy = c->inter_probe = NAN;
    }
    /* Pairs come after every single, so all singles are filled in now. */
    for (int k = 0; k < r->n; k++) {
        al_ablate_config *c = &r->c[k];
        if (c->b < 0) continue;
        int s1 = single_of(r, c->a), s2 = single_of(r, c->b);
        c->inter_loss = x[k].delta_loss - x[s1].delta_loss - x[s2].delta_loss;
        c->inter_copy = x[k].delta_copy - x[s1].delta_copy - x[s2].delta_copy;
        c->inter_probe = x[k].delta_probe - x[s1].delta_probe - x[s2].delta_probe;
    }
    if (ablate_intervals(r, &text, &probe, trows, prows, o, e)) goto out;
    rc = 0;
out:
    free(none);
    free(x);
    free(trows);
    free(prows);
    al_abl_set_free(&text);
    al_abl_set_free(&probe);
    al_probe_free(&pr);
    if (rc) al_ablate_result_free(r);
    return rc;
}

/* ----------------------------------------------------------- prune */

al_prune_opts al_prune_opts_defaults(void) {
    al_prune_opts o = AL_PRUNE_OPTS_INIT;
    return o;
}

int al_prune_opts_check(const al_prune_opts *o, al_err *e) {
    al_prune_method method;
    if (!o->method) return al_errf(e, "no pruning method (ablation, gradient or random)");
    if (al_prune_method_parse(o->method, &method, e)) return -1;
    if (o->batches < 2 || o->batches > 100000 || o->batch < 1 || o->batch > 100000)
        return al_errf(e, "need 2 <= --batches <= 100000 and 1 <= --batch <= 100000");
    return 0;
}

void al_prune_run_result_free(al_prune_run_result *r) {
    al_prune_result_free(&r->p);
    memset(r, 0, sizeof *r);
}

double al_prune_bytes(const al_config *c, int T, const al_prune_opts *o) {
    /* the estimating and the evaluating windows (two sets, each with its
     * mean z), and the backward's buffers of the gradient method */
    double LHD = (double)c->n_layers * c->n_heads * c->d_head;
    return text_bytes(c, T, o->batch, o->batches) + LHD * T * (sizeof(float) + sizeof(double)) +
           al_model_acts_bytes(c, o->batch, T);
}

int al_prune_run(al_model *m, const al_tokens *val, int T, const al_prune_opts *o,
                 al_prune_run_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    if (al_prune_opts_check(o, e)) return -1;
    al_abl_set est = {0}, eval = {0};
    int V = m->cfg.d_vocab, rc = -1;
    r->L = m->cfg.n_layers, r->H = m->cfg.n_heads, r->T = T;
    al_prune_method_parse(o->method, &r->method, e);
    r->est_batches = o->batches / 2;
    r->eval_batches = o->batches - r->est_batches;
    if (al_abl_set_text(&est, val, T, o->batch, 0, r->est_batches, o->batches, V, e) ||
        al_abl_set_text(&eval, val, T, o->batch, r->est_batches, r->eval_batches, o->batches, V,
                        e) ||
        ((est.stop = eval.stop = o->stop), 0) ||
        al_prune(m, &est, &eval, r->method, o->budget, o->seed, o->progress, &r->p, e))
        goto out;
    r->last = r->p.n_steps - 1 - r->p.stopped_by_budget;
    rc = 0;
out:
    al_abl_set_free(&est);
    al_abl_set_free(&eval);
    if (rc) al_prune_run_result_free(r);
    return rc;
}
