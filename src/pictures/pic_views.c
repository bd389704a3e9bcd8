/* pic_views.c -- family views: the generic picture of a view (view.h),
 * so an analysis whose results are views is drawn without a picture kind
 * of its own. `--what view --metric M` draws whichever shape M has in its
 * run: per head, layers x heads; per head pair, sender x receiver heads;
 * per edge, senders x receivers; per position, a line over positions. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attnlab/store_views.h"
#include "pictures_internal.h"

/* The per-head view as it has always been drawn (its pixels are kept). */
static int draw_head(pic *p, long run, const char *metric, al_err *e) {
    int LH = p->L * p->H;
    float *v = pic_floats(p, (size_t)LH, e);
    double *x = pic_calloc(p, (size_t)LH, sizeof *x, e);
    char title[256];
    if (!v || !x ||
        al_store_read_head_view(p->st, run, metric, p->L, p->H, x, title, sizeof title, e))
        return -1;
    if (!title[0]) return al_errf(e, "run %ld has no per-head view '%s'", run, metric);
    int signed_v = 0; /* a diverging map only for values of both signs */
    for (int i = 0; i < LH; i++) v[i] = (float)x[i], signed_v |= x[i] < 0;
    al_cscale *cs = pic_scale(p, 0, signed_v, NAN, NAN, metric);
    al_cscale_fit(cs, v, (size_t)LH);
    const char **rl = pic_calloc(p, (size_t)p->L, sizeof(char *), e);
    if (!rl) return -1;
    for (int l = 0; l < p->L; l++)
        if (!(rl[l] = pic_printf(p, e, "layer %d", l))) return -1;
    al_panel *pn = pic_add_panel(p, AL_PANEL_HEATMAP);
    pn->hm = (al_hm){.v = v,
                     .rows = p->L,
                     .cols = p->H,
                     .row_labels = rl,
                     .title = metric,
                     .col_title = "head",
                     .cs = cs,
                     .bar = 1,
                     .annotate = 1,
                     .cell = 34};
    snprintf(p->title, sizeof p->title, "%s", title);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p, "run %ld, metric %s", run, metric);
    return 0;
}

/* A (rows x cols) heatmap of a view's cells, NaN blank, diverging when
 * some value is negative. Everything it points at must outlive the
 * drawing: p's memory or the options (metric is p->o->metric), never the
 * view read back, which is freed before the figure is drawn. */
static int grid_panel(pic *p, const char *metric, float *v, int rows, int cols, const char **rl,
                      const char **cl, const char *row_title, const char *col_title) {
    int signed_v = 0;
    for (size_t i = 0; i < (size_t)rows * cols; i++) signed_v |= v[i] < 0;
    al_cscale *cs = pic_scale(p, 0, signed_v, NAN, NAN, metric);
    al_cscale_fit(cs, v, (size_t)rows * cols);
    al_panel *pn = pic_add_panel(p, AL_PANEL_HEATMAP);
    pn->hm = (al_hm){.v = v,
                     .rows = rows,
                     .cols = cols,
                     .row_labels = rl,
                     .col_labels = cl,
                     .title = metric,
                     .row_title = row_title,
                     .col_title = col_title,
                     .cs = cs,
                     .bar = 1,
                     .annotate = 1};
    return 0;
}

/* Per head pair: (L*H) x (L*H), sender heads down, receivers across. */
static int draw_pair(pic *p, const al_view *w, const char *metric, al_err *e) {
    int LH = p->L * p->H;
    float *v = pic_floats(p, (size_t)LH * LH, e);
    const char **lab = pic_head_labels(p, 0, p->L, e);
    if (!v || !lab) return -1;
    int n = 0;
    for (size_t i = 0; i < (size_t)LH * LH; i++) v[i] = (float)w->v[i], n += !isnan(w->v[i]);
    pic_note(p, "%d of %d head pairs have a value (grey: none)", n, LH * LH);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    return grid_panel(p, metric, v, LH, LH, lab, lab, "sender head", "receiver head");
}

/* The index of s in names (n of them), added at the end if new. */
static int label_index(pic *p, const char **names, int *n, const char *s, al_err *e) {
    for (int i = 0; i < *n; i++)
        if (strcmp(names[i], s) == 0) return i;
    if (!(names[*n] = pic_printf(p, e, "%s", s))) return -1;
    return (*n)++;
}

/* Per edge: senders down, receivers across, each in the order of its
 * first appearance; a pair with no edge is blank (a repeated pair: the
 * last edge's value). */
static int draw_edge(pic *p, const al_view *w, const char *metric, al_err *e) {
    if (w->n < 1) return al_errf(e, "view %s has no edges to draw", metric);
    const char **snd = pic_calloc(p, (size_t)w->n, sizeof(char *), e);
    const char **rcv = pic_calloc(p, (size_t)w->n, sizeof(char *), e);
    int *si = pic_calloc(p, (size_t)w->n, sizeof(int), e),
        *ri = pic_calloc(p, (size_t)w->n, sizeof(int), e);
    if (!snd || !rcv || !si || !ri) return -1;
    int ns = 0, nr = 0;
    for (int i = 0; i < w->n; i++)
        if ((si[i] = label_index(p, snd, &ns, w->from[i], e)) < 0 ||
            (ri[i] = label_index(p, rcv, &nr, w->to[i], e)) < 0)
            return -1;
    float *v = pic_floats(p, (size_t)ns * nr, e);
    if (!v) return -1;
    for (size_t i = 0; i < (size_t)ns * nr; i++) v[i] = NAN;
    for (int i = 0; i < w->n; i++) v[(size_t)si[i] * nr + ri[i]] = (float)w->v[i];
    pic_note(p, "%d edge%s between %d sender%s and %d receiver%s (grey: no edge)", w->n,
             w->n == 1 ? "" : "s", ns, ns == 1 ? "" : "s", nr, nr == 1 ? "" : "s");
    return grid_panel(p, metric, v, ns, nr, snd, rcv, "sender", "receiver");
}

/* Per position: one line over positions 0..n-1 (a NaN breaks it). */
static int draw_pos(pic *p, const al_view *w, const char *metric, al_err *e) {
    if (w->n < 1) return al_errf(e, "view %s has no positions to draw", metric);
    double *x = pic_calloc(p, (size_t)w->n, sizeof *x, e),
           *y = pic_calloc(p, (size_t)w->n, sizeof *y, e);
    al_series *sr = pic_calloc(p, 1, sizeof *sr, e);
    if (!x || !y || !sr) return -1;
    for (int i = 0; i < w->n; i++) x[i] = i, y[i] = w->v[i];
    sr[0] = (al_series){x, y, w->n, NULL, al_plot_colour(0), 2, w->n <= 64 ? AL_MARK_SQUARE : 0,
                        0, 0, NULL};
    al_panel *q = pic_add_panel(p, AL_PANEL_LINES);
    q->ln = (al_lines){.s = sr,
                       .n = 1,
                       .title = metric,
                       .x_title = "position",
                       .y_title = metric,
                       .w = 420,
                       .h = 260,
                       .x_lo = NAN,
                       .x_hi = NAN,
                       .y_lo = NAN,
                       .y_hi = NAN,
                       .hline = NAN,
                       .x_integer = 1};
    pic_note(p, "%d position%s", w->n, w->n == 1 ? "" : "s");
    return 0;
}

int pic_draw_view(pic *p, al_err *e) {
    const char *metric = p->o->metric;
    if (!metric)
        return al_errf(e, "the view picture needs --metric NAME (a view an analysis stored, e.g. "
                          "attn_entropy)");
    long run = p->o->run_id;
    if (run <= 0 && al_store_latest_view_any_run(p->st, p->model_id, metric, &run, e)) return -1;
    if (!run)
        return al_errf(e, "database %s has no finished run with a view '%s' for model %s", p->o->db,
                       metric, p->dir);
    al_view_read r;
    int found;
    if (al_store_read_view(p->st, run, metric, p->L, p->H, &r, &found, e)) return -1;
    if (!found) return al_errf(e, "run %ld has no view '%s'", run, metric);
    const al_view *w = &r.v;
    int rc;
    switch (w->shape) {
    case AL_VIEW_HEAD: rc = draw_head(p, run, metric, e); break;
    case AL_VIEW_PAIR: rc = draw_pair(p, w, metric, e); break;
    case AL_VIEW_EDGE: rc = draw_edge(p, w, metric, e); break;
    case AL_VIEW_POS: rc = draw_pos(p, w, metric, e); break;
    default:
        rc = al_errf(e,
                     "view '%s' of run %ld is one number per run (%.6g): there is nothing to draw",
                     metric, run, w->v ? w->v[0] : NAN);
    }
    if (!rc && w->shape != AL_VIEW_HEAD) {
        snprintf(p->title, sizeof p->title, "%s", w->title);
        pic_note(p, "run %ld, metric %s", run, metric);
    }
    al_view_read_free(&r);
    return rc;
}
