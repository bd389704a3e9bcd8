/* plot_heatmap.c -- coloured cells: heatmaps (a matrix of values with
 * labelled rows and columns, an optional colour bar and numbers in the
 * cells) and token rows (rows of tokens, each cell coloured by a value).
 * See plot.h for the panels, plot_internal.h for measure and draw. */
#include "plot_internal.h"

#include <string.h>

/* ------------------------------------------------------------- heatmaps */

static void hm_label(const al_hm *p, int axis, int i, char *buf, size_t cap) {
    const char *const *L = axis ? p->col_labels : p->row_labels;
    if (L)
        al_font_fit(L[i] ? L[i] : "", p->max_label_cells > 0 ? p->max_label_cells : 16, buf, cap);
    else
        snprintf(buf, cap, "%d", i);
}

/* Every step-th label is drawn: enough that text lines (GH+1 px) never
 * touch; round steps for numbered axes. */
static int label_step(int cell, int numbered) {
    static const int nice[] = {1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000, 2000, 5000};
    int need = (GH + 1 + cell - 1) / cell;
    if (!numbered) return imax(need, 1);
    for (size_t i = 0; i < sizeof nice / sizeof nice[0]; i++)
        if (nice[i] >= need) return nice[i];
    return need;
}

void hm_measure(const al_hm *p, int own_bar, hm_lay *L) {
    memset(L, 0, sizeof *L);
    int n = imax(p->rows, p->cols);
    int cell = p->cell > 0 ? p->cell : imin(28, imax(8, 520 / imax(n, 1)));
    L->cw = L->ch = imax(cell, 8);
    L->rstep = label_step(L->ch, p->row_labels == NULL);
    L->cstep = label_step(L->cw, p->col_labels == NULL);
    char b[256];
    for (int r = 0; r < p->rows; r += L->rstep) {
        hm_label(p, 0, r, b, sizeof b);
        L->rl_w = imax(L->rl_w, tw(b));
    }
    for (int c = 0; c < p->cols; c += L->cstep) {
        hm_label(p, 1, c, b, sizeof b);
        L->cl_h = imax(L->cl_h, tw(b));
    }
    int rt_w = p->row_title ? GH + 6 : 0, mw = p->cols * L->cw, mh = p->rows * L->ch;
    L->mx = rt_w + L->rl_w + 3 + TICK + 1;
    L->my = (p->title ? LINE + 4 : 0) + 5;
    int below = 1 + TICK + 2 + L->cl_h + (p->col_title ? 6 + LINE : 0) + 2;
    L->h = L->my + mh + below;
    L->w = L->mx + mw + 2;
    if (own_bar) {
        L->bar_h = imax(mh, 120);
        L->w += bar_block_w(p->cs, L->bar_h);
        L->h = imax(L->h, L->my + L->bar_h + 6);
    }
    /* titles centred on the matrix may stick out on either side */
    int centre = L->mx + mw / 2, half = imax(tw(p->title), tw(p->col_title)) / 2 + 1;
    L->lead = imax(0, half - centre);
    L->w = imax(L->w + L->lead, centre + L->lead + half);
    L->mx += L->lead;
    if (p->row_title) L->h = imax(L->h, L->my + tw(p->row_title));
}

static void hm_annotate(cv *im, const al_hm *p, const hm_lay *L, int x0, int y0) {
    if (L->ch < LINE) return;
    for (int r = 0; r < p->rows; r++)
        for (int c = 0; c < p->cols; c++) {
            double v = p->v[(size_t)r * p->cols + c];
            if (isnan(v)) continue;
            char s[32];
            const char *fmts[] = {"%.2f", "%.1f", "%.0f"};
            int ok = 0;
            for (int k = 0; k < 3 && !ok; k++) {
                snprintf(s, sizeof s, fmts[k], fabs(v) < 5e-3 && k == 0 ? 0.0 : v);
                ok = tw(s) <= L->cw - 2;
            }
            if (!ok) continue;
            uint32_t bg = al_cscale_colour(p->cs, v);
            cv_text(im, x0 + c * L->cw + (L->cw - tw(s)) / 2 + 1,
                    y0 + r * L->ch + (L->ch - AL_FONT_CAP) / 2, s, 1, ink_on(bg));
        }
}

void hm_draw(cv *im, const al_hm *p, const hm_lay *L, int x, int y, int own_bar, al_plot_geom *g) {
    int mx = x + L->mx, my = y + L->my, mw = p->cols * L->cw, mh = p->rows * L->ch;
    for (int r = 0; r < p->rows; r++)
        for (int c = 0; c < p->cols; c++)
            cv_fill(im, mx + c * L->cw, my + r * L->ch, L->cw, L->ch,
                    al_cscale_colour(p->cs, p->v[(size_t)r * p->cols + c]));
    cv_rect(im, mx - 1, my - 1, mw + 2, mh + 2, FRAME);
    if (p->annotate) hm_annotate(im, p, L, mx, my);
    char b[256];
    for (int r = 0; r < p->rows; r += L->rstep) {
        int cy = my + r * L->ch + L->ch / 2;
        hm_label(p, 0, r, b, sizeof b);
        cv_fill(im, mx - 1 - TICK, cy, TICK, 1, INK);
        cv_text(im, mx - 1 - TICK - 2 - tw(b), cy - 3, b, 1, INK);
    }
    for (int c = 0; c < p->cols; c += L->cstep) {
        int cx = mx + c * L->cw + L->cw / 2;
        hm_label(p, 1, c, b, sizeof b);
        cv_fill(im, cx, my + mh + 1, 1, TICK, INK);
        cv_text_up(im, cx - 3, my + mh + 1 + TICK + 2, b, 1, INK);
    }
    if (p->title) cv_text(im, mx + mw / 2 - tw(p->title) / 2, y, p->title, 1, INK);
    if (p->col_title)
        cv_text(im, mx + mw / 2 - tw(p->col_title) / 2, my + mh + 1 + TICK + 2 + L->cl_h + 6,
                p->col_title, 1, INK);
    if (p->row_title) {
        int len = tw(p->row_title);
        cv_text_up(im, x + L->lead, imax(y, my + mh / 2 - len / 2), p->row_title, 1, INK);
    }
    if (g) {
        g->mx = mx;
        g->my = my;
        g->mw = mw;
        g->mh = mh;
        g->cell_w = L->cw;
        g->cell_h = L->ch;
    }
    if (own_bar) draw_bar(im, p->cs, mx + mw + 1, my, L->bar_h, g);
}

/* ----------------------------------------------------------- token rows */

#define TR_PAD 3 /* text inset in a token's cell */
#define TR_PITCH (LINE + 6) /* one row of tokens */

static void tr_tok(const al_tokrows *p, int r, int c, char *buf, size_t cap) {
    const char *s = p->tok[(size_t)r * p->cols + c];
    buf[0] = 0;
    if (s) al_font_fit(s, p->max_cells > 0 ? p->max_cells : 12, buf, cap);
}

void tr_measure(const al_tokrows *p, int own_bar, tr_lay *L) {
    memset(L, 0, sizeof *L);
    char b[256];
    int cols = imin(p->cols, TR_MAX_COLS);
    for (int c = 0; c < cols; c++) {
        int w = 2 * TR_PAD + AL_FONT_ADV; /* an empty column still shows */
        for (int r = 0; r < p->rows; r++) {
            tr_tok(p, r, c, b, sizeof b);
            w = imax(w, tw(b) + 2 * TR_PAD);
        }
        L->cx[c + 1] = L->cx[c] + w + 1;
    }
    for (int r = 0; p->row_labels && r < p->rows; r++)
        L->rl_w = imax(L->rl_w, tw(p->row_labels[r]));
    L->mx = L->rl_w ? L->rl_w + 8 : 0;
    L->my = (p->title ? LINE + 4 : 0) + 3;
    L->mw = L->cx[cols];
    L->mh = p->rows * TR_PITCH;
    L->w = imax(L->mx + L->mw + 2, tw(p->title) + 2);
    L->h = L->my + L->mh + 4;
    if (own_bar) {
        L->bar_h = imax(L->mh, 100);
        L->w = imax(L->w, L->mx + L->mw + 2 + bar_block_w(p->cs, L->bar_h));
        L->h = imax(L->h, L->my + L->bar_h + 6);
    }
}

void tr_draw(cv *im, const al_tokrows *p, const tr_lay *L, int x, int y, int own_bar,
             al_plot_geom *g) {
    int mx = x + L->mx, my = y + L->my, cols = imin(p->cols, TR_MAX_COLS);
    char b[256];
    for (int r = 0; r < p->rows; r++) {
        int ry = my + r * TR_PITCH;
        if (r % 2) cv_fill(im, mx, ry, L->mw, TR_PITCH, 0xF4F4F4); /* banded rows */
        if (p->row_labels && p->row_labels[r])
            cv_text(im, x + L->rl_w - tw(p->row_labels[r]), ry + 3, p->row_labels[r], 1, INK);
        for (int c = 0; c < cols; c++) {
            tr_tok(p, r, c, b, sizeof b);
            if (!b[0]) continue;
            double v = p->v ? p->v[(size_t)r * p->cols + c] : NAN;
            int cx = mx + L->cx[c], w = L->cx[c + 1] - L->cx[c] - 1;
            uint32_t ink = 0x505050;
            if (!isnan(v)) {
                uint32_t bg = al_cscale_colour(p->cs, v);
                cv_fill(im, cx, ry + 1, w, TR_PITCH - 2, bg);
                ink = ink_on(bg);
            }
            cv_text(im, cx + (w - tw(b)) / 2, ry + 3, b, 1, ink);
            if (p->mark && c == p->mark_col) cv_rect(im, cx, ry + 1, w, TR_PITCH - 2, INK);
        }
    }
    if (p->title) cv_text(im, x, y, p->title, 1, INK);
    if (g) {
        g->mx = mx;
        g->my = my;
        g->mw = L->mw;
        g->mh = L->mh;
        g->cell_h = TR_PITCH;
    }
    if (own_bar) draw_bar(im, p->cs, mx + L->mw + 1, my, L->bar_h, g);
}
