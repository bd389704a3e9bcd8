/* plot_bars.c -- bar charts: bars from zero, grouped with a name under
 * each group and a dashed line between groups. See plot.h (al_bars). */
#include "plot_internal.h"

#include <stdlib.h>
#include <string.h>

#define BAR_PAD 4 /* plot area edge to the first / last group */
#define BAR_GGAP 14 /* between groups, a dashed separator in the middle */

static int bar_group(const al_bars *p, int i) { return p->group ? p->group[i] : 0; }

static const char *bar_gname(const al_bars *p, int g) {
    return p->group_names && g >= 0 && g < imax(p->n_groups, 1) ? p->group_names[g] : NULL;
}

static void bar_label(const al_bars *p, int i, char *buf, size_t cap) {
    buf[0] = 0;
    if (p->labels && p->labels[i]) al_font_fit(p->labels[i], 16, buf, cap);
}

/* Width of the group whose first bar is i (its bars are i..*end-1):
 * its bars, or its name if that is wider (the bars are then centred). */
static int bar_span(const al_bars *p, int bw, int i, int *end) {
    int j = i;
    while (j < p->n && bar_group(p, j) == bar_group(p, i)) j++;
    *end = j;
    return imax((j - i) * bw, tw(bar_gname(p, bar_group(p, i))) + 8);
}

void bars_measure(const al_bars *p, bar_lay *L) {
    memset(L, 0, sizeof *L);
    L->bw = p->bar_w > 0 ? p->bar_w : imax(5, imin(24, 420 / imax(p->n, 1)));
    L->ph = p->h > 0 ? p->h : 220;
    double lo = 0, hi = 0;
    char b[256];
    if (p->has_ref && isfinite(p->ref)) lo = fmin(lo, p->ref), hi = fmax(hi, p->ref);
    for (int i = 0; i < p->n; i++) {
        if (isfinite(p->v[i])) lo = fmin(lo, p->v[i]), hi = fmax(hi, p->v[i]);
        /* the whiskers stay inside the frame too */
        if (p->lo && isfinite(p->lo[i])) lo = fmin(lo, p->lo[i]), hi = fmax(hi, p->lo[i]);
        if (p->hi && isfinite(p->hi[i])) lo = fmin(lo, p->hi[i]), hi = fmax(hi, p->hi[i]);
        bar_label(p, i, b, sizeof b);
        L->lab_h = imax(L->lab_h, tw(b));
    }
    if (!(hi > lo)) hi = lo + 1;
    double pad = (hi - lo) * 0.06; /* bars never touch the frame; zero stays exact */
    L->lo = lo < 0 ? lo - pad : 0;
    L->hi = hi > 0 ? hi + pad : 0;
    L->step = nice_step(L->hi - L->lo, fmax(2, L->ph / 36.0));
    double t[MAX_TICKS];
    int nt = lin_ticks(L->lo, L->hi, L->step, t);
    for (int i = 0; i < nt; i++) {
        fmt_tick(t[i], L->step, b, sizeof b);
        L->yl_w = imax(L->yl_w, tw(b));
    }
    L->pw = 2 * BAR_PAD;
    for (int i = 0, end; i < p->n; i = end) {
        L->pw += bar_span(p, L->bw, i, &end) + (i ? BAR_GGAP : 0);
        L->names |= bar_gname(p, bar_group(p, i)) != NULL;
    }
    L->px = (p->y_title ? GH + 6 : 0) + L->yl_w + 3 + TICK;
    L->py = (p->title ? LINE + 4 : 0) + 6;
    L->w = imax(L->px + L->pw + 8, L->px + L->pw / 2 + tw(p->title) / 2 + 2);
    L->h = L->py + L->ph + 1 + TICK + 2 + L->lab_h + (L->names ? 6 + LINE : 0) + 2;
    if (p->y_title) L->h = imax(L->h, L->py + tw(p->y_title));
}

static int bars_y(const bar_lay *L, int oy, double v) {
    double t = (v - L->lo) / (L->hi - L->lo);
    return oy + L->ph - 1 - (int)lround(fmin(1, fmax(0, t)) * (L->ph - 1));
}

void bars_draw(cv *im, const al_bars *p, const bar_lay *L, int x, int y, al_plot_geom *g) {
    int ox = x + L->px, oy = y + L->py, y0 = bars_y(L, oy, 0), below = oy + L->ph + 1;
    char b[256];
    double t[MAX_TICKS];
    int nt = lin_ticks(L->lo, L->hi, L->step, t);
    for (int i = 0; i < nt; i++) {
        int ty = bars_y(L, oy, t[i]);
        cv_fill(im, ox, ty, L->pw, 1, GRIDC);
        cv_fill(im, ox - 1 - TICK, ty, TICK, 1, INK);
        fmt_tick(t[i], L->step, b, sizeof b);
        cv_text(im, ox - 1 - TICK - 2 - tw(b), ty - 3, b, 1, INK);
    }
    int gx = ox + BAR_PAD, last_lx = -1000;
    for (int i = 0, end; i < p->n; i = end) {
        int span = bar_span(p, L->bw, i, &end), bx = gx + (span - (end - i) * L->bw) / 2;
        for (int k = i; k < end; k++, bx += L->bw) {
            uint32_t c = p->colours ? p->colours[k] : al_plot_colour(bar_group(p, k));
            if (isfinite(p->v[k])) {
                int yv = bars_y(L, oy, p->v[k]);
                cv_fill(im, bx, imin(yv, y0), L->bw - 1, abs(yv - y0) + 1, c);
            }
            if (p->lo && p->hi && isfinite(p->lo[k]) && isfinite(p->hi[k])) {
                /* the whisker: a line from lo to hi, caps half a bar wide */
                int ya = bars_y(L, oy, p->lo[k]), yb = bars_y(L, oy, p->hi[k]);
                int wx = bx + (L->bw - 1) / 2, cw = imax(3, (L->bw - 1) / 2);
                cv_fill(im, wx, imin(ya, yb), 1, abs(yb - ya) + 1, INK);
                cv_fill(im, wx - cw / 2, ya, cw, 1, INK);
                cv_fill(im, wx - cw / 2, yb, cw, 1, INK);
            }
            bar_label(p, k, b, sizeof b);
            int cx = bx + (L->bw - 1) / 2;
            if (!b[0] || cx - last_lx < GH + 1) continue;
            cv_fill(im, cx, below, 1, TICK, INK);
            cv_text_up(im, cx - 3, below + TICK + 2, b, 1, INK);
            last_lx = cx;
        }
        const char *name = bar_gname(p, bar_group(p, i));
        if (name)
            cv_text(im, gx + span / 2 - tw(name) / 2, below + TICK + 2 + L->lab_h + 6, name, 1,
                    INK);
        if (end < p->n)
            cv_line(im, gx + span + BAR_GGAP / 2, oy, gx + span + BAR_GGAP / 2, oy + L->ph - 1, 1,
                    3, FRAME);
        gx += span + BAR_GGAP;
    }
    cv_fill(im, ox, y0, L->pw, 1, INK); /* the zero line, over the bars' ends */
    if (p->has_ref && isfinite(p->ref)) {
        int yr = bars_y(L, oy, p->ref);
        cv_line(im, ox, yr, ox + L->pw - 1, yr, 1, 3, INK);
    }
    cv_rect(im, ox - 1, oy - 1, L->pw + 2, L->ph + 2, FRAME);
    if (p->title) cv_text(im, ox + L->pw / 2 - tw(p->title) / 2, y, p->title, 1, INK);
    if (p->y_title)
        cv_text_up(im, x, imax(y, oy + L->ph / 2 - tw(p->y_title) / 2), p->y_title, 1, INK);
    if (g) {
        g->mx = ox;
        g->my = oy;
        g->mw = L->pw;
        g->mh = L->ph;
        g->zero_y = y0;
    }
}
