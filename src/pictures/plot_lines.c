/* plot_lines.c -- line and scatter plots: series on linear or log axes,
 * ticks at round values, markers, a dashed reference line, a legend.
 * See plot.h (al_lines). */
#define _DEFAULT_SOURCE /* M_PI */
#include "plot_internal.h"

#include <string.h>

static double ymap(const al_lines *p, double y) { return p->log_y ? (y > 0 ? log10(y) : NAN) : y; }

static void ln_ranges(const al_lines *p, ln_lay *L) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < p->n; i++)
        for (int k = 0; k < p->s[i].n; k++) {
            double x = p->s[i].x[k], y = ymap(p, p->s[i].y[k]);
            if (!isfinite(x) || !isfinite(y)) continue;
            xlo = fmin(xlo, x), xhi = fmax(xhi, x), ylo = fmin(ylo, y), yhi = fmax(yhi, y);
        }
    double hl = ymap(p, p->hline);
    if (isfinite(hl)) ylo = fmin(ylo, hl), yhi = fmax(yhi, hl);
    if (xlo > xhi) xlo = 0, xhi = 1;
    if (ylo > yhi) ylo = 0, yhi = 1;
    if (xhi == xlo) xlo -= 0.5, xhi += 0.5;
    if (yhi == ylo) ylo -= 0.5, yhi += 0.5;
    double pad = (yhi - ylo) * 0.06;
    ylo -= pad, yhi += pad;
    if (!isnan(p->x_lo)) xlo = p->x_lo;
    if (!isnan(p->x_hi)) xhi = p->x_hi;
    if (!isnan(p->y_lo)) ylo = ymap(p, p->y_lo);
    if (!isnan(p->y_hi)) yhi = ymap(p, p->y_hi);
    if (!(xhi > xlo)) xhi = xlo + 1;
    if (!(yhi > ylo)) yhi = ylo + 1;
    L->xlo = xlo, L->xhi = xhi, L->ylo = ylo, L->yhi = yhi;
    L->xstep = nice_step(xhi - xlo, fmax(4, L->pw / 60.0));
    if (p->x_integer && L->xstep < 1) L->xstep = 1;
    L->ystep = nice_step(yhi - ylo, fmax(2, L->ph / 36.0));
}

static void ln_ylabel(const al_lines *p, const ln_lay *L, double v, char *b, size_t cap) {
    if (p->log_y)
        fmt_val(pow(10, v), b, cap);
    else
        fmt_tick(v, L->ystep, b, cap);
}

int lin_ticks(double lo, double hi, double step, double *t) {
    int n = 0;
    for (double v = ceil(lo / step) * step; v <= hi + 1e-9 * step && n < MAX_TICKS; v += step)
        t[n++] = v;
    return n;
}

/* y ticks in plotted units (log10 when log_y). Linear: multiples of the
 * step. Log: powers of ten, or 1-2-5 or 1..9 times them when the range is
 * too short for two powers, keeping ticks >= 14 px apart. */
static int ln_yticks(const al_lines *p, const ln_lay *L, double *t) {
    int n = 0;
    if (!p->log_y) return lin_ticks(L->ylo, L->yhi, L->ystep, t);
    static const int sets[3][10] = {{1, 0}, {1, 2, 5, 0}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 0}};
    double px_per = L->ph / (L->yhi - L->ylo);
    for (int k = 0; k < 3; k++) {
        int m = 0;
        double tmp[MAX_TICKS], last = -INFINITY;
        for (int d = (int)floor(L->ylo) - 1; d <= (int)ceil(L->yhi) && m < MAX_TICKS; d++)
            for (int j = 0; sets[k][j] && m < MAX_TICKS; j++) {
                double v = d + log10(sets[k][j]);
                if (v < L->ylo || v > L->yhi || (v - last) * px_per < 14) continue;
                tmp[m++] = last = v;
            }
        if (m >= n) {
            n = m;
            memcpy(t, tmp, sizeof(double) * (size_t)m);
        }
        if (n >= 3) break;
    }
    return n;
}

static int ln_xticks(const ln_lay *L, double *t) { return lin_ticks(L->xlo, L->xhi, L->xstep, t); }

void ln_measure(const al_lines *p, ln_lay *L) {
    memset(L, 0, sizeof *L);
    L->pw = p->w > 0 ? p->w : 360;
    L->ph = p->h > 0 ? p->h : 220;
    ln_ranges(p, L);
    char b[64];
    double t[MAX_TICKS];
    int nt = ln_yticks(p, L, t);
    for (int i = 0; i < nt; i++) {
        ln_ylabel(p, L, t[i], b, sizeof b);
        L->yl_w = imax(L->yl_w, tw(b));
    }
    int n_leg = 0;
    if (p->legend) {
        int lw = 0;
        for (int i = 0; i < p->n; i++)
            lw = imax(lw, tw(p->s[i].label)), n_leg += p->s[i].label != NULL;
        L->legend_w = lw ? 12 + 6 + 20 + 4 + lw + 6 : 0;
    }
    L->px = (p->y_title ? GH + 6 : 0) + L->yl_w + 3 + TICK;
    L->py = (p->title ? LINE + 4 : 0) + 6;
    L->w = L->px + L->pw + L->legend_w + 8;
    L->h = L->py + L->ph + TICK + 3 + LINE + (p->x_title ? LINE + 4 : 0) + 2;
    L->w = imax(L->w, L->px + L->pw / 2 + imax(tw(p->title), tw(p->x_title)) / 2 + 2);
    if (p->y_title) L->h = imax(L->h, L->py + tw(p->y_title));
    L->h = imax(L->h, L->py + 2 + n_leg * (LINE + 2) + 4);
}

static int ln_x(const al_lines *p, const ln_lay *L, int ox, double x) {
    double t = (x - L->xlo) / (L->xhi - L->xlo);
    if (p->x_reverse) t = 1 - t;
    t = fmin(1, fmax(0, t));
    return ox + (int)lround(t * (L->pw - 1));
}

static int ln_y(const ln_lay *L, int oy, double y) {
    double t = (y - L->ylo) / (L->yhi - L->ylo);
    t = fmin(1, fmax(0, t));
    return oy + L->ph - 1 - (int)lround(t * (L->ph - 1));
}

static void ln_axes(cv *im, const al_lines *p, const ln_lay *L, int ox, int oy) {
    char b[64];
    double t[MAX_TICKS];
    int nt = ln_yticks(p, L, t);
    for (int i = 0; i < nt; i++) {
        double v = t[i];
        int y = ln_y(L, oy, v);
        cv_fill(im, ox, y, L->pw, 1, GRIDC);
        cv_fill(im, ox - 1 - TICK, y, TICK, 1, INK);
        ln_ylabel(p, L, v, b, sizeof b);
        cv_text(im, ox - 1 - TICK - 2 - tw(b), y - 3, b, 1, INK);
    }
    int prev_l = 0, prev_r = 0, have_prev = 0;
    nt = ln_xticks(L, t);
    for (int i = 0; i < nt; i++) {
        double v = t[i];
        int x = ln_x(p, L, ox, v);
        fmt_tick(v, L->xstep, b, sizeof b);
        cv_fill(im, x, oy, 1, L->ph, GRIDC);
        cv_fill(im, x, oy + L->ph, 1, TICK, INK);
        int lx = x - tw(b) / 2; /* skip a label that would touch the previous one */
        if (have_prev && lx < prev_r + 6 && lx + tw(b) > prev_l - 6) continue;
        cv_text(im, lx, oy + L->ph + TICK + 2, b, 1, INK);
        prev_l = lx, prev_r = lx + tw(b), have_prev = 1;
    }
    cv_rect(im, ox - 1, oy - 1, L->pw + 2, L->ph + 2, FRAME);
}

/* A marker of radius r centred on (x, y): shapes differ in outline, so
 * series stay apart in print and for colour-blind readers. */
static void draw_marker(cv *im, int x, int y, int shape, int r, uint32_t c) {
    cairo_t *cr = im->cr;
    double cx = x + 0.5, cy = y + 0.5;
    switch (shape) {
    case AL_MARK_CIRCLE: cairo_arc(cr, cx, cy, r + 0.5, 0, 2 * M_PI); break;
    case AL_MARK_TRIANGLE: /* apex up */
        cairo_move_to(cr, cx, cy - r - 1);
        cairo_line_to(cr, cx + r + 1.5, cy + r + 0.5);
        cairo_line_to(cr, cx - r - 1.5, cy + r + 0.5);
        cairo_close_path(cr);
        break;
    case AL_MARK_DIAMOND:
        cairo_move_to(cr, cx, cy - r - 1);
        cairo_line_to(cr, cx + r + 1, cy);
        cairo_line_to(cr, cx, cy + r + 1);
        cairo_line_to(cr, cx - r - 1, cy);
        cairo_close_path(cr);
        break;
    default: cairo_rectangle(cr, x - r, y - r, 2 * r + 1, 2 * r + 1); break;
    }
    cv_colour(im, c);
    cairo_fill(cr);
}

static int marker_of(const al_series *s) {
    return s->marker ? s->marker : s->points || s->n == 1 ? AL_MARK_SQUARE : AL_MARK_NONE;
}

/* The first series is drawn last, on top: callers list the important
 * ones first, which is also the legend's order. */
static void ln_series(cv *im, const al_lines *p, const ln_lay *L, int ox, int oy) {
    for (int i = p->n - 1; i >= 0; i--) {
        const al_series *s = &p->s[i];
        int w = s->width > 0 ? s->width : 2, have = 0, px = 0, py = 0, mk = marker_of(s);
        for (int k = 0; k < s->n; k++) {
            double yv = ymap(p, s->y[k]);
            if (!isfinite(yv) || !isfinite(s->x[k])) {
                have = 0;
                continue;
            }
            int x = ln_x(p, L, ox, s->x[k]), y = ln_y(L, oy, yv);
            if (have && !s->points) cv_line(im, px, py, x, y, w, s->dash, s->colour);
            if (mk) draw_marker(im, x, y, mk, s->points ? 3 : 2, s->colour);
            if (s->point_labels && s->point_labels[k])
                cv_text(im, x + 6, y - LINE, s->point_labels[k], 1, INK);
            px = x, py = y, have = 1;
        }
    }
}

void ln_draw(cv *im, const al_lines *p, const ln_lay *L, int x, int y, al_plot_geom *g) {
    int ox = x + L->px, oy = y + L->py;
    ln_axes(im, p, L, ox, oy);
    double hl = ymap(p, p->hline);
    if (isfinite(hl)) {
        int hy = ln_y(L, oy, hl);
        cv_line(im, ox, hy, ox + L->pw - 1, hy, 1, 4, 0x606060);
        if (p->hline_label) /* above the line, or below it when at the top */
            cv_text(im, ox + L->pw - 4 - tw(p->hline_label),
                    hy - LINE < oy + 2 ? hy + 4 : hy - LINE, p->hline_label, 1, 0x404040);
    }
    ln_series(im, p, L, ox, oy);
    if (p->title) cv_text(im, ox + L->pw / 2 - tw(p->title) / 2, y, p->title, 1, INK);
    if (p->x_title)
        cv_text(im, ox + L->pw / 2 - tw(p->x_title) / 2, oy + L->ph + TICK + 3 + LINE + 4,
                p->x_title, 1, INK);
    if (p->y_title)
        cv_text_up(im, x, imax(y, oy + L->ph / 2 - tw(p->y_title) / 2), p->y_title, 1, INK);
    if (L->legend_w) {
        int lx = ox + L->pw + 12, ly = oy + 2;
        for (int i = 0; i < p->n; i++) {
            if (!p->s[i].label) continue;
            const al_series *s = &p->s[i];
            if (!s->points) cv_line(im, lx, ly + 3, lx + 19, ly + 3, 2, s->dash, s->colour);
            if (s->marker || s->points)
                draw_marker(im, lx + 10, ly + 3, marker_of(s), s->points ? 3 : 2, s->colour);
            cv_text(im, lx + 24, ly, s->label, 1, INK);
            ly += LINE + 2;
        }
    }
    if (g) {
        g->mx = ox;
        g->my = oy;
        g->mw = L->pw;
        g->mh = L->ph;
    }
}
