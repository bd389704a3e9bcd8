/* sec_views.c -- the generic section of views (view.h): every view the
 * model's runs stored, newest finished run per metric, by shape: per-head
 * views as a layer x head table each, per-head-pair and per-edge views as
 * their picture and a table of their largest values, per-position views
 * as their picture and one line. An analysis whose results are views
 * needs no section of its own. Per-model views (one number) are not
 * shown here. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "<h4>TITLE <small>(KIND: METRIC)</small></h4>" */
static void view_heading(al_buf *h, const char *title, const char *kind, const char *metric) {
    al_buf_puts(h, "<h4>");
    rep_esc(h, title);
    al_buf_puts(h, " <small>(");
    rep_esc(h, kind);
    al_buf_puts(h, ": ");
    rep_esc(h, metric);
    al_buf_puts(h, ")</small></h4>\n");
}

/* Per-head views: one layer x head table each (the page as before the
 * other shapes existed). */
static int head_views(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_rows q;
    if (al_sr_head_views(R->st, M->mid, &q, e)) return -1;
    int H = M->cfg.n_heads;
    if (q.nr) al_buf_puts(h, "<h3>Per-head results</h3>\n");
    for (int i = 0; i < q.nr;) {
        const char *metric = al_rows_t(&q, i, 1);
        view_heading(h, al_rows_t(&q, i, 2), al_rows_t(&q, i, 0), metric);
        al_buf_puts(h, "<table>\n<tr><th>layer</th>");
        for (int k = 0; k < H; k++) al_buf_printf(h, "<th>head %d</th>", k);
        al_buf_puts(h, "</tr>\n");
        int layer = -1;
        for (; i < q.nr && strcmp(al_rows_t(&q, i, 1), metric) == 0; i++) {
            int l = (int)al_rows_x(&q, i, 3);
            if (l != layer) {
                if (layer >= 0) al_buf_puts(h, "</tr>\n");
                al_buf_printf(h, "<tr><td>%d</td>", l);
                layer = l;
            }
            double v = al_rows_x(&q, i, 5);
            if (isnan(v))
                al_buf_puts(h, "<td></td>");
            else
                al_buf_printf(h, "<td>%.3f</td>", v);
        }
        al_buf_puts(h, "</tr>\n</table>\n");
    }
    al_rows_free(&q);
    return 0;
}

/* The view's picture (`heatmap --what view --metric M --run N`). */
static void view_picture(rep *R, const rmodel *M, const char *run, const char *metric,
                         const char *title) {
    if (!rep_want_pic(R, "view")) return;
    al_pic_opts po = al_pic_defaults();
    po.what = "view";
    po.metric = metric;
    po.run_id = atol(run);
    char file[256], cap[512], slug[64];
    rep_slug(metric, slug, sizeof slug);
    snprintf(file, sizeof file, "%s-view-%s.png", M->slug, slug);
    snprintf(cap, sizeof cap, "%s (run %s, metric %s).", title, run, metric);
    rep_picture(R, M, &po, file, cap);
}

/* Pair and edge views: the picture and the largest values. */
static int cell_table(rep *R, const char *run, const char *metric, int pair, al_err *e) {
    al_buf *h = &R->h;
    al_rows q;
    if (al_sr_view_top_cells(R->st, run, metric, &q, e)) return -1;
    if (!q.nr) {
        al_buf_puts(h, "<p class=none>No values.</p>\n");
    } else {
        double all = al_rows_x(&q, 0, 3);
        if (q.nr < all)
            al_buf_printf(h, "<p>The %d largest of %.0f values by magnitude:</p>\n", q.nr, all);
        else
            al_buf_printf(h, "<p>All %d values by magnitude:</p>\n", q.nr);
        al_buf_printf(h, "<table>\n<tr><th>%s</th><th>%s</th><th>value</th></tr>\n",
                      pair ? "sender head" : "sender", pair ? "receiver head" : "receiver");
        for (int i = 0; i < q.nr; i++) {
            al_buf_puts(h, "<tr><td>");
            rep_esc(h, al_rows_t(&q, i, 0));
            al_buf_puts(h, "</td><td>");
            rep_esc(h, al_rows_t(&q, i, 1));
            al_buf_printf(h, "</td><td>%.4g</td></tr>\n", al_rows_x(&q, i, 2));
        }
        al_buf_puts(h, "</table>\n");
    }
    al_rows_free(&q);
    return 0;
}

/* Per-position views: one line of where the values are lowest and highest. */
static int pos_line(rep *R, const char *run, const char *metric, al_err *e) {
    al_buf *h = &R->h;
    al_rows q;
    if (al_sr_view_cells(R->st, run, metric, &q, e)) return -1;
    int lo = -1, hi = -1;
    for (int i = 0; i < q.nr; i++) {
        double v = al_rows_x(&q, i, 1);
        if (isnan(v)) continue;
        if (lo < 0 || v < al_rows_x(&q, lo, 1)) lo = i;
        if (hi < 0 || v > al_rows_x(&q, hi, 1)) hi = i;
    }
    if (lo < 0)
        al_buf_puts(h, "<p class=none>No values.</p>\n");
    else
        al_buf_printf(h,
                      "<p>%d positions: lowest %.4g at position %.0f, highest %.4g at position "
                      "%.0f.</p>\n",
                      q.nr, al_rows_x(&q, lo, 1), al_rows_x(&q, lo, 0), al_rows_x(&q, hi, 1),
                      al_rows_x(&q, hi, 0));
    al_rows_free(&q);
    return 0;
}

/* Pair, edge and pos views, one heading per shape present. */
static int shaped_views(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_rows q;
    if (al_sr_shaped_views(R->st, M->mid, &q, e)) return -1;
    int rc = 0;
    for (int i = 0; i < q.nr && !rc; i++) {
        const char *run = al_rows_t(&q, i, 0), *kind = al_rows_t(&q, i, 1),
                   *metric = al_rows_t(&q, i, 2), *shape = al_rows_t(&q, i, 3),
                   *title = al_rows_t(&q, i, 4);
        if (!i || strcmp(shape, al_rows_t(&q, i - 1, 3)) != 0)
            al_buf_printf(h, "<h3>%s</h3>\n",
                          strcmp(shape, "pair") == 0   ? "Per-head-pair results"
                          : strcmp(shape, "edge") == 0 ? "Per-edge results"
                                                       : "Per-position results");
        view_heading(h, title, kind, metric);
        view_picture(R, M, run, metric, title);
        rc = strcmp(shape, "pos") == 0 ? pos_line(R, run, metric, e)
                                       : cell_table(R, run, metric, strcmp(shape, "pair") == 0, e);
    }
    al_rows_free(&q);
    return rc;
}

int sec_views(rep *R, const rmodel *M, al_err *e) {
    return head_views(R, M, e) || shaped_views(R, M, e) ? -1 : 0;
}
