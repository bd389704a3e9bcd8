/* pic_behaviour.c -- the pictures of what heads do to the loss (family
 * "behaviour"): ablation (each head and pair interactions), pruning
 * (loss against heads remaining) and training (loss and per-head scores
 * over steps), all read from the database. */
#define _POSIX_C_SOURCE 200809L
#include "pictures_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/thresholds.h"

/* ---------------------------------------------------------- ablation */

typedef struct abl_rows {
    pic *p;
    float *single; /* (L, H) */
    float *pair; /* (LH, LH) interaction, NaN = absent */
    int n_single, n_pair;
    char method[32]; /* of the rows read */
} abl_rows;

static void abl_row(abl_rows *a, const al_store_ablation_row *x) {
    const char *end;
    if (!x->kind || !x->heads) return;
    if (x->method && !a->method[0]) snprintf(a->method, sizeof a->method, "%s", x->method);
    int i = pic_parse_head(a->p, x->heads, &end);
    if (i < 0) return;
    if (strcmp(x->kind, "single") == 0 && !*end) {
        a->single[i] = (float)x->value;
        a->n_single++;
    } else if (strcmp(x->kind, "pair") == 0 && *end == ',') {
        int j = pic_parse_head(a->p, end + 1, &end);
        if (j < 0 || *end) return;
        int LH = a->p->L * a->p->H, lo = i < j ? i : j, hi = i < j ? j : i;
        a->pair[lo * LH + hi] = (float)x->interaction;
        a->n_pair++;
    }
}

static const char *abl_metric(pic *p, al_err *e) {
    const char *m = p->o->metric ? p->o->metric : "delta_loss";
    if (strcmp(m, "delta_loss") && strcmp(m, "delta_loss_copy") && strcmp(m, "delta_loss_probe")) {
        al_errf(e, "--metric %s: for ablation use delta_loss, delta_loss_copy or delta_loss_probe",
                m);
        return NULL;
    }
    return m;
}

/* The interaction panel: rows = heads that appear first in a pair,
 * columns = heads that appear second (8 x 8 for the cross-layer pairs of
 * a 2-layer model). */
static int abl_pair_panel(pic *p, abl_rows *a, al_cscale *cs, al_err *e) {
    int LH = p->L * p->H, rows[256], cols[256], nr = 0, nc = 0;
    if (LH > 256) return al_errf(e, "too many heads (%d) for a pair picture", LH);
    for (int i = 0; i < LH; i++) {
        int r = 0, c = 0;
        for (int j = 0; j < LH; j++)
            r |= !isnan(a->pair[i * LH + j]), c |= !isnan(a->pair[j * LH + i]);
        if (r) rows[nr++] = i;
        if (c) cols[nc++] = i;
    }
    float *v = pic_floats(p, (size_t)nr * nc, e);
    const char **rl = pic_calloc(p, (size_t)nr, sizeof(char *), e),
               **cl = pic_calloc(p, (size_t)nc, sizeof(char *), e);
    if (!v || !rl || !cl) return -1;
    for (int r = 0; r < nr; r++) {
        if (!(rl[r] = pic_printf(p, e, "%d.%d", rows[r] / p->H, rows[r] % p->H))) return -1;
        for (int c = 0; c < nc; c++) v[r * nc + c] = a->pair[rows[r] * LH + cols[c]];
    }
    for (int c = 0; c < nc; c++)
        if (!(cl[c] = pic_printf(p, e, "%d.%d", cols[c] / p->H, cols[c] % p->H))) return -1;
    al_cscale_fit(cs, v, (size_t)nr * nc);
    al_panel *q = pic_add_panel(p, AL_PANEL_HEATMAP);
    q->hm = (al_hm){.v = v,
                    .rows = nr,
                    .cols = nc,
                    .row_labels = rl,
                    .col_labels = cl,
                    .title = "pair interaction: Δ(pair) - Δ(h1) - Δ(h2)",
                    .row_title = "head h1",
                    .col_title = "head h2",
                    .cs = cs,
                    .bar = 1,
                    .annotate = 1,
                    .cell = nr <= 16 && nc <= 16 ? 34 : 0};
    return 0;
}

int pic_draw_ablation(pic *p, al_err *e) {
    const char *metric = abl_metric(p, e);
    if (!metric) return -1;
    int LH = p->L * p->H;
    abl_rows a = {.p = p,
                  .single = pic_floats(p, (size_t)LH, e),
                  .pair = pic_floats(p, (size_t)LH * LH, e)};
    if (!a.single || !a.pair) return -1;
    for (int i = 0; i < LH; i++) a.single[i] = NAN;
    for (int i = 0; i < LH * LH; i++) a.pair[i] = NAN;
    const char *meth = p->o->method;
    long run_s = p->o->run_id, run_p = p->o->run_id;
    if (run_s <= 0 &&
        (al_store_latest_ablation_run(p->st, p->model_id, "single", meth, &run_s, e) ||
         al_store_latest_ablation_run(p->st, p->model_id, "pair", meth, &run_p, e)))
        return -1;
    if (!run_s && !run_p)
        return al_errf(e,
                       "database %s has no finished ablation run for model %s%s%s (run attnlab "
                       "ablate --each --db)",
                       p->o->db, p->dir, meth ? " with method " : "", meth ? meth : "");
    long runs[2] = {run_s, run_p};
    for (int k = 0; k < 2; k++) {
        if (!runs[k] || (k == 1 && run_p == run_s)) continue;
        al_store_ablation_row *rows;
        int n;
        if (al_store_read_ablations(p->st, runs[k], metric, meth, &rows, &n, e) ||
            !pic_keep(p, rows, e))
            return -1;
        for (int i = 0; i < n; i++) abl_row(&a, &rows[i]);
        pic_run_note(p, "ablate", runs[k]);
    }
    const char *bar_label = strcmp(metric, "delta_loss") == 0 ? "Δloss (nats)"
                            : strcmp(metric, "delta_loss_copy") == 0
                                ? "Δloss at copy positions"
                                : "Δloss on the probe's 2nd repeat";
    al_cscale *cs = pic_scale(p, 0, 1, NAN, NAN, bar_label);
    al_cscale_fit(cs, a.single, (size_t)LH);
    const char **rl = pic_calloc(p, (size_t)p->L, sizeof(char *), e);
    if (!rl) return -1;
    for (int l = 0; l < p->L; l++)
        if (!(rl[l] = pic_printf(p, e, "layer %d", l))) return -1;
    if (a.n_single) {
        al_panel *pn = pic_add_panel(p, AL_PANEL_HEATMAP);
        pn->hm = (al_hm){.v = a.single,
                         .rows = p->L,
                         .cols = p->H,
                         .row_labels = rl,
                         .title = "each head ablated alone",
                         .col_title = "head",
                         .cs = cs,
                         .bar = 1,
                         .annotate = 1,
                         .cell = 34};
    }
    if (a.n_pair && abl_pair_panel(p, &a, pic_scale(p, 1, 1, NAN, NAN, "interaction (nats)"), e))
        return -1;
    snprintf(p->title, sizeof p->title, "%s-ablation: what each head is worth", a.method);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p, "Δ = loss with the head(s) ablated - loss with all heads; %s = %s", metric,
             strcmp(metric, "delta_loss") == 0 ? "validation text"
             : strcmp(metric, "delta_loss_copy") == 0
                 ? "positions whose next token already appeared"
                 : "second repeat of the random-token probe");
    if (a.n_pair)
        pic_note(p,
                 "interaction < 0: the pair costs less than the two apart (heads in series); > 0: "
                 "each covers for the other");
    pic_note(p, "%s", p->run_txt);
    return 0;
}

/* ---------------------------------------------------------- pruning */

int pic_draw_pruning(pic *p, al_err *e) {
    static const char *const methods[3] = {"ablation", "gradient", "random"};
    static const uint32_t colours[3] = {0x1F77B4, 0xFF7F0E, 0x7F7F7F};
    al_series *sr = pic_calloc(p, 3, sizeof *sr, e);
    if (!sr) return -1;
    int ns = 0;
    for (int k = 0; k < 3; k++) {
        long run = p->o->run_id;
        if (run <= 0 && al_store_latest_pruning_run(p->st, p->model_id, methods[k], &run, e))
            return -1;
        if (!run) continue;
        al_store_prune_row *rows;
        int n;
        if (al_store_read_pruning(p->st, run, methods[k], &rows, &n, e) || !pic_keep(p, rows, e))
            return -1;
        if (!n) continue;
        double *x = pic_calloc(p, (size_t)n, sizeof(double), e);
        double *y = pic_calloc(p, (size_t)n, sizeof(double), e);
        if (!x || !y) return -1;
        for (int i = 0; i < n; i++) x[i] = rows[i].heads_left, y[i] = rows[i].loss;
        sr[ns++] = (al_series){x, y, n, methods[k], colours[k], 2, 1, k == 2 ? 5 : 0, 0, NULL};
        pic_run_note(p, methods[k], run);
    }
    if (!ns)
        return al_errf(
            e, "database %s has no finished pruning run for model %s (run attnlab prune --db)",
            p->o->db, p->dir);
    al_panel *q = pic_add_panel(p, AL_PANEL_LINES);
    q->ln.s = sr;
    q->ln.n = ns;
    q->ln.w = 480;
    q->ln.h = 280;
    q->ln.x_reverse = 1;
    q->ln.x_integer = 1;
    q->ln.legend = 1;
    q->ln.x_title = "heads remaining (pruning proceeds to the right)";
    q->ln.y_title = "validation loss (nats)";
    snprintf(p->title, sizeof p->title, "pruning: loss as heads are removed");
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p, "each step removes the head the method ranks least important: ablation = Δloss, "
                "gradient = E|dL/dg| (Michel et al. 2019), random = baseline");
    pic_note(p, "%s", p->run_txt);
    return 0;
}

/* ---------------------------------------------------------- training */

typedef struct ths_rows {
    pic *p;
    long *steps;
    int n_steps;
    double *v; /* (LH, n_steps) */
} ths_rows;

static void ths_row(ths_rows *s, const al_store_head_step_row *r) {
    int l = (int)r->layer, h = (int)r->head;
    if (l < 0 || l >= s->p->L || h < 0 || h >= s->p->H) return;
    /* steps are sorted; find this one */
    int lo = 0, hi = s->n_steps - 1;
    long st = (long)r->step;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->steps[mid] < st)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (s->n_steps && s->steps[lo] == st)
        s->v[(size_t)(l * s->p->H + h) * s->n_steps + lo] = r->value;
}

typedef struct tlog {
    double *step, *train, *val;
    int n;
} tlog;

static int train_loss_panel(pic *p, long run, tlog *t, al_err *e) {
    al_store_train_row *rows;
    int n;
    if (al_store_read_train_log(p->st, run, &rows, &n, e) || !pic_keep(p, rows, e)) return -1;
    t->n = n;
    if (n) {
        t->step = pic_calloc(p, (size_t)n, sizeof(double), e);
        t->train = pic_calloc(p, (size_t)n, sizeof(double), e);
        t->val = pic_calloc(p, (size_t)n, sizeof(double), e);
        if (!t->step || !t->train || !t->val) return -1;
        for (int i = 0; i < n; i++)
            t->step[i] = rows[i].step, t->train[i] = rows[i].train_loss,
            t->val[i] = rows[i].val_loss;
    }
    if (!t->n)
        return al_errf(e, "database %s: training run %ld has no train_log rows", p->o->db, run);
    al_series *sr = pic_calloc(p, 2, sizeof *sr, e);
    if (!sr) return -1;
    sr[0] = (al_series){t->step, t->train, t->n, "train loss", 0x1F77B4, 2, 0, 0, 0, NULL};
    sr[1] = (al_series){t->step, t->val, t->n, "validation loss", 0xFF7F0E, 2, 1, 0, 0, NULL};
    al_panel *q = pic_add_panel(p, AL_PANEL_LINES);
    q->ln = (al_lines){.s = sr,
                       .n = 2,
                       .title = "loss",
                       .x_title = "step",
                       .y_title = "loss (nats)",
                       .w = 420,
                       .h = 260,
                       .legend = 1,
                       .x_lo = NAN,
                       .x_hi = NAN,
                       .y_lo = NAN,
                       .y_hi = NAN,
                       .hline = NAN,
                       .x_integer = 1};
    return 0;
}

/* Per-head metric over steps: the strongest heads (by their largest value)
 * in colour with a legend, the others thin grey. */
static int train_head_panel(pic *p, long run, const tlog *t, const char *metric, al_err *e) {
    int LH = p->L * p->H;
    ths_rows s = {.p = p, .n_steps = t->n};
    s.steps = pic_calloc(p, (size_t)t->n, sizeof(long), e);
    s.v = pic_calloc(p, (size_t)LH * t->n, sizeof(double), e);
    if (!s.steps || !s.v) return -1;
    for (int i = 0; i < t->n; i++) s.steps[i] = (long)t->step[i];
    for (size_t i = 0; i < (size_t)LH * t->n; i++) s.v[i] = NAN;
    al_store_head_step_row *rows;
    int n_rows;
    if (al_store_read_train_head_scores(p->st, run, metric, &rows, &n_rows, e) ||
        !pic_keep(p, rows, e))
        return -1;
    for (int i = 0; i < n_rows; i++) ths_row(&s, &rows[i]);
    double *best = pic_calloc(p, (size_t)LH, sizeof(double), e);
    int *order = pic_calloc(p, (size_t)LH, sizeof(int), e);
    al_series *sr = pic_calloc(p, (size_t)LH, sizeof *sr, e);
    if (!best || !order || !sr) return -1;
    int any = 0;
    for (int i = 0; i < LH; i++) {
        best[i] = -INFINITY;
        for (int k = 0; k < t->n; k++)
            if (!isnan(s.v[(size_t)i * t->n + k]))
                best[i] = fmax(best[i], s.v[(size_t)i * t->n + k]), any = 1;
        order[i] = i;
    }
    if (!any)
        return al_errf(e, "database %s: training run %ld has no '%s' head scores", p->o->db, run,
                       metric);
    for (int i = 1; i < LH; i++) /* insertion sort, best first */
        for (int j = i; j > 0 && best[order[j]] > best[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1], order[j - 1] = tmp;
        }
    int n_col = LH < 6 ? LH : 6, n = 0;
    for (int r = 0; r < LH; r++) { /* best first: drawn on top, listed first */
        int i = order[r], col = r < n_col;
        sr[n++] = (al_series){t->step,
                              s.v + (size_t)i * t->n,
                              t->n,
                              col ? pic_printf(p, e, "head %d.%d", i / p->H, i % p->H)
                                  : (r == n_col ? "other heads" : NULL),
                              col ? al_plot_colour(r) : 0xC0C0C0,
                              col ? 2 : 1,
                              0,
                              0,
                              0,
                              NULL};
        if (col && !sr[n - 1].label) return -1;
    }
    al_panel *q = pic_add_panel(p, AL_PANEL_LINES);
    int ind = strcmp(metric, "induction") == 0 || strcmp(metric, "induction_all") == 0;
    q->ln = (al_lines){.s = sr,
                       .n = n,
                       .title = pic_printf(p, e, "%s score per head", metric),
                       .x_title = "step",
                       .y_title = pic_printf(p, e, "%s score", metric),
                       .w = 420,
                       .h = 260,
                       .legend = 1,
                       .x_lo = NAN,
                       .x_hi = NAN,
                       .y_lo = NAN,
                       .y_hi = NAN,
                       .hline = ind ? AL_TH_INDUCTION : NAN,
                       /* clang-format off */
                       .hline_label = ind ? "induction head: > " AL_TH_STR(AL_TH_INDUCTION) : NULL,
                       .x_integer = 1};
    /* clang-format on */
    return q->ln.title && q->ln.y_title ? 0 : -1;
}

int pic_draw_training(pic *p, al_err *e) {
    const char *metric = p->o->metric;
    if (metric && strcmp(metric, "induction") && strcmp(metric, "induction_all") &&
        strcmp(metric, "prev_token") && strcmp(metric, "duplicate_token"))
        return al_errf(e,
                       "--metric %s: for training use induction, induction_all, prev_token or "
                       "duplicate_token",
                       metric);
    long run = p->o->run_id;
    if (run <= 0) {
        if (al_store_latest_train_run(p->st, p->model_id, &run, e)) return -1;
        if (!run)
            return al_errf(e,
                           "database %s has no training run for model %s (train with --db, or give "
                           "--run ID)",
                           p->o->db, p->dir);
    }
    /* on a text probe induction_all names the heads (docs/findings.md) */
    int text = 0;
    if (al_store_train_text_probe(p->st, run, &text, e)) return -1;
    if (!metric && text) { /* a run from before train --db recorded induction_all draws induction */
        al_store_head_step_row *rows = NULL;
        int n_rows = 0;
        if (al_store_read_train_head_scores(p->st, run, "induction_all", &rows, &n_rows, e))
            return -1;
        free(rows);
        metric = n_rows > 0 ? "induction_all" : "induction";
    }
    if (!metric) metric = "induction";
    tlog t = {0};
    if (train_loss_panel(p, run, &t, e) || train_head_panel(p, run, &t, metric, e)) return -1;
    pic_run_note(p, "train", run);
    snprintf(p->title, sizeof p->title, "training: loss and %s score over steps", metric);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p,
             "%s score of every head, measured on %s at each evaluation (the %d highest in "
             "colour); %s",
             metric, text ? "windows of held-out text (the text probe)" : "the random-token probe",
             p->L * p->H < 6 ? p->L * p->H : 6, p->run_txt);
    return 0;
}
