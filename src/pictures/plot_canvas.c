/* plot_canvas.c -- the canvas every panel draws through, and colour bars.
 *
 * Everything is drawn through these few calls onto a cairo surface: an
 * RGB image (PNG), an SVG or a PDF surface, so all formats come from one
 * drawing code. Coordinates are integer pixels as in the layout: fills
 * are pixel-aligned (exact colours in PNG), lines run through pixel
 * centres. Text is drawn by cairo except on SVG, where it is recorded and
 * written as <text> elements (see svg_finish): cairo 1.16's SVG surface
 * would emit glyph outlines, which are neither selectable nor searchable. */
#define _DEFAULT_SOURCE /* M_PI */
#include "plot_internal.h"

#include <stdlib.h>
#include <string.h>

#define BAR_W 14

/* --------------------------------------------------------------- canvas */

void cv_colour(cv *c, uint32_t rgb) {
    cairo_set_source_rgb(c->cr, (rgb >> 16 & 255) / 255.0, (rgb >> 8 & 255) / 255.0,
                         (rgb & 255) / 255.0);
}

void cv_begin(cv *c, cairo_t *cr, int fmt) {
    memset(c, 0, sizeof *c);
    c->cr = cr;
    c->svg = fmt == AL_FIG_SVG;
    c->vec = fmt != AL_FIG_PNG;
    cairo_select_font_face(cr, FONT_FAMILY, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_font_options_t *fo = cairo_font_options_create();
    /* unhinted outlines and metrics: the same shapes at every size and on
     * every surface, and byte-identical PNGs run after run */
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
    cairo_set_font_size(cr, FONT_PX);
    cairo_text_extents_t ex;
    cairo_text_extents(cr, "0", &ex);
    c->fx = ex.x_advance > 0 ? FONT_PX * AL_FONT_ADV / ex.x_advance : FONT_PX;
}

void cv_end(cv *c) {
    for (int i = 0; i < c->nt; i++) free(c->t[i].s);
    free(c->t);
    c->t = NULL;
    c->nt = c->cap_t = 0;
}

void cv_fill(cv *c, int x, int y, int w, int h, uint32_t rgb) {
    if (w <= 0 || h <= 0) return;
    cairo_rectangle(c->cr, x, y, w, h);
    cv_colour(c, rgb);
    cairo_fill(c->cr);
}

/* One-pixel outline of [x, x+w) x [y, y+h), inside it. */
void cv_rect(cv *c, int x, int y, int w, int h, uint32_t rgb) {
    if (w <= 0 || h <= 0) return;
    cairo_rectangle(c->cr, x + 0.5, y + 0.5, w - 1, h - 1);
    cairo_set_line_width(c->cr, 1);
    cairo_set_dash(c->cr, NULL, 0, 0);
    cv_colour(c, rgb);
    cairo_stroke(c->cr);
}

/* A line through the centres of pixels (x0,y0) and (x1,y1), width px
 * wide with square ends (an even width is centred on the pixels' lower
 * right corner so a straight line covers whole pixels); dash > 0: dash px on, dash off. */
void cv_line(cv *c, int x0, int y0, int x1, int y1, int width, int dash, uint32_t rgb) {
    double o = width % 2 ? 0.5 : 1;
    cairo_move_to(c->cr, x0 + o, y0 + o);
    cairo_line_to(c->cr, x1 + o, y1 + o);
    cairo_set_line_width(c->cr, width > 0 ? width : 1);
    cairo_set_line_cap(c->cr, CAIRO_LINE_CAP_SQUARE);
    double d = dash;
    cairo_set_dash(c->cr, dash > 0 ? &d : NULL, dash > 0 ? 1 : 0, 0);
    cv_colour(c, rgb);
    cairo_stroke(c->cr);
    cairo_set_dash(c->cr, NULL, 0, 0);
}

static int cv_text_any(cv *c, int x, int y, const char *s, int scale, int up, uint32_t rgb) {
    if (scale < 1) scale = 1;
    int cells = al_font_cells(s), w = cells * AL_FONT_ADV * scale;
    if (!cells) return 0;
    size_t n = al_font_display(s, NULL, 0);
    char *d = malloc(n + 1);
    if (!d) {
        c->oom = 1;
        return w;
    }
    al_font_display(s, d, n + 1);
    /* the baseline: AL_FONT_CAP rows below the top of the line; rotated,
     * AL_FONT_CAP columns right of x, reading upwards from y + w */
    double bx = up ? x + AL_FONT_CAP * scale : x, by = up ? y + w : y + AL_FONT_CAP * scale;
    if (c->svg) {
        if (c->nt == c->cap_t) {
            int cap = c->cap_t ? 2 * c->cap_t : 64;
            cv_text_rec *t = realloc(c->t, (size_t)cap * sizeof *t);
            if (!t) {
                free(d);
                c->oom = 1;
                return w;
            }
            c->t = t, c->cap_t = cap;
        }
        c->t[c->nt++] = (cv_text_rec){bx, by, up, scale, cells, rgb, d};
        return w;
    }
    cairo_t *cr = c->cr;
    cairo_save(cr);
    cairo_translate(cr, bx, by);
    if (up) cairo_rotate(cr, -M_PI / 2);
    cairo_matrix_t m;
    cairo_matrix_init_scale(&m, c->fx * scale, FONT_PX * scale);
    cairo_set_font_matrix(cr, &m);
    cv_colour(c, rgb);
    cairo_move_to(cr, 0, 0);
    cairo_show_text(cr, d);
    cairo_restore(cr);
    free(d);
    return w;
}

/* s with the top-left of its first cell at (x,y); returns its width. */
int cv_text(cv *c, int x, int y, const char *s, int scale, uint32_t rgb) {
    return cv_text_any(c, x, y, s, scale, 0, rgb);
}

/* s reading bottom to top in [x, x + AL_FONT_GLYPH_H*scale) x [y, y + width),
 * tops of the glyphs facing left. */
int cv_text_up(cv *c, int x, int y, const char *s, int scale, uint32_t rgb) {
    return cv_text_any(c, x, y, s, scale, 1, rgb);
}

/* ---------------------------------------------------------- colour bar */

typedef struct bar_tick {
    int y; /* offset from the bar top */
    char s[48];
    int mark;
} bar_tick;
#define MAX_BAR_TICKS 24

static void bar_range(const al_cscale *cs, double *lo, double *hi) {
    if (cs->diverging) {
        double m = fmax(fabs(cs->lo), fabs(cs->hi));
        *lo = -m;
        *hi = m;
    } else {
        *lo = cs->lo;
        *hi = cs->hi;
    }
}

static int bar_y(double v, double lo, double hi, int h) {
    double t = hi > lo ? (hi - v) / (hi - lo) : 0.5;
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    return (int)lround(t * (h - 1));
}

static int near_any(const bar_tick *t, int n, int y, int d) {
    for (int i = 0; i < n; i++)
        if (abs(t[i].y - y) < d) return 1;
    return 0;
}

/* Labels on a bar of height h: the marks, both ends (the range, exact),
 * zero for a diverging scale, then round values that keep clear of
 * those. */
static int bar_ticks(const al_cscale *cs, int h, bar_tick *t) {
    double lo, hi;
    int n = 0;
    bar_range(cs, &lo, &hi);
    for (int i = 0; i < cs->n_marks && i < AL_MAX_MARKS; i++) {
        char v[32];
        fmt_val(cs->mark[i], v, sizeof v);
        t[n].y = bar_y(cs->mark[i], lo, hi, h);
        t[n].mark = 1;
        snprintf(t[n].s, sizeof t[n].s, "\xe2\x86\x90 %s %s",
                 cs->mark_label[i] ? cs->mark_label[i] : "", v);
        n++;
    }
    double ends[3] = {hi, lo, 0};
    for (int i = 0; i < (cs->diverging ? 3 : 2); i++) {
        int y = bar_y(ends[i], lo, hi, h);
        if (near_any(t, n, y, LINE)) continue;
        t[n].y = y;
        t[n].mark = 0;
        fmt_val(ends[i], t[n].s, sizeof t[n].s);
        n++;
    }
    double step = nice_step(hi - lo, fmax(2, h / 45.0));
    for (double v = ceil(lo / step) * step; v <= hi && n < MAX_BAR_TICKS; v += step) {
        int y = bar_y(v, lo, hi, h);
        if (near_any(t, n, y, LINE + 3)) continue;
        t[n].y = y;
        t[n].mark = 0;
        fmt_tick(v, step, t[n].s, sizeof t[n].s);
        n++;
    }
    return n;
}

/* Width of the bar block: gap, bar, ticks, labels, caption. */
int bar_block_w(const al_cscale *cs, int h) {
    bar_tick t[MAX_BAR_TICKS];
    int n = bar_ticks(cs, h, t), lw = 0;
    for (int i = 0; i < n; i++) lw = imax(lw, tw(t[i].s));
    return 12 + BAR_W + TICK + 3 + lw + (cs->label ? 8 + GH : 0) + 4;
}

/* The bar's top-left is (x + 12, y). */
void draw_bar(cv *im, const al_cscale *cs, int x, int y, int h, al_plot_geom *g) {
    double lo, hi;
    bar_range(cs, &lo, &hi);
    int bx = x + 12;
    if (im->vec) {
        /* one gradient instead of a rectangle per pixel row: smooth at any
         * zoom, and smaller. The maps are piecewise linear (RdBu on a 0.1
         * grid, viridis on ~1/32): 40 even stops keep RdBu's corners and
         * stay within a few 1/255 of viridis */
        cairo_pattern_t *pat = cairo_pattern_create_linear(0, y + 0.5, 0, y + h - 0.5);
        for (int k = 0; k <= 40; k++) {
            uint32_t c = al_cscale_colour(cs, hi - (hi - lo) * k / 40.0);
            cairo_pattern_add_color_stop_rgb(pat, k / 40.0, (c >> 16 & 255) / 255.0,
                                             (c >> 8 & 255) / 255.0, (c & 255) / 255.0);
        }
        cairo_rectangle(im->cr, bx, y, BAR_W, h);
        cairo_set_source(im->cr, pat);
        cairo_fill(im->cr);
        cairo_pattern_destroy(pat);
    } else {
        for (int i = 0; i < h; i++) { /* exact map colours per row in the PNG */
            double v = hi - (hi - lo) * i / (h > 1 ? h - 1 : 1);
            cv_fill(im, bx, y + i, BAR_W, 1, al_cscale_colour(cs, v));
        }
    }
    cv_rect(im, bx - 1, y - 1, BAR_W + 2, h + 2, FRAME);
    bar_tick t[MAX_BAR_TICKS];
    int n = bar_ticks(cs, h, t), lw = 0;
    for (int i = 0; i < n; i++) {
        int ty = y + t[i].y;
        if (t[i].mark) {
            cv_fill(im, bx - 3, ty - 1, BAR_W + 6, 2, 0x000000);
        } else {
            cv_fill(im, bx + BAR_W, ty, TICK, 1, INK);
        }
        cv_text(im, bx + BAR_W + TICK + 3, ty - 3, t[i].s, 1, INK);
        lw = imax(lw, tw(t[i].s));
    }
    if (cs->label) {
        int lx = bx + BAR_W + TICK + 3 + lw + 8, len = tw(cs->label);
        cv_text_up(im, lx, y + imax(0, (h - len) / 2), cs->label, 1, INK);
    }
    if (g) {
        g->bar_x = bx;
        g->bar_y = y;
        g->bar_w = BAR_W;
        g->bar_h = h;
    }
}
