/* plot.c -- figures: layout, heatmaps, colour bars, line and scatter
 * plots, bar charts, layered graphs, token rows (see plot.h).
 *
 * Every panel is first measured (where its matrix or plot area goes, how
 * wide its labels are), then the figure places panels on a grid whose
 * column widths and row heights are the largest of their panels, and
 * only then is anything drawn. Sizes derive from text widths in cells
 * of a monospace font (font.h), so nothing is clipped and nothing
 * overlaps. Drawing goes through the canvas below onto a cairo surface:
 * PNG, SVG and PDF from this one code. */
#define _POSIX_C_SOURCE 200809L /* strndup */
#define _DEFAULT_SOURCE         /* M_PI */
#include "attnlab/plot.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include "attnlab/buf.h"
#include "attnlab/font.h"
#include "attnlab/png.h"

#define LINE AL_FONT_LINE
#define GH AL_FONT_GLYPH_H
#define TICK 3
#define BAR_W 14
#define FRAME 0x808080u
#define GRIDC 0xE6E6E6u
#define INK AL_PLOT_INK
#define MARGIN 14
#define GAP_X 28
#define GAP_Y 20

/* ------------------------------------------------------------ colours */

typedef struct cpoint {
    double t, r, g, b;
} cpoint;

/* matplotlib's viridis (CC0) at entries 0, 8, ..., 255 of 256. */
static const cpoint viridis[] = {
    {0 / 255., 0.267004, 0.004874, 0.329415},   {8 / 255., 0.277018, 0.050344, 0.375715},
    {16 / 255., 0.282327, 0.094955, 0.417331},  {24 / 255., 0.282884, 0.135920, 0.453427},
    {32 / 255., 0.278826, 0.175490, 0.483397},  {40 / 255., 0.270595, 0.214069, 0.507052},
    {48 / 255., 0.258965, 0.251537, 0.524736},  {56 / 255., 0.244972, 0.287675, 0.537260},
    {64 / 255., 0.229739, 0.322361, 0.545706},  {72 / 255., 0.214298, 0.355619, 0.551184},
    {80 / 255., 0.199430, 0.387607, 0.554642},  {88 / 255., 0.185556, 0.418570, 0.556753},
    {96 / 255., 0.172719, 0.448791, 0.557885},  {104 / 255., 0.160665, 0.478540, 0.558115},
    {112 / 255., 0.149039, 0.508051, 0.557250}, {120 / 255., 0.137770, 0.537492, 0.554906},
    {128 / 255., 0.127568, 0.566949, 0.550556}, {135 / 255., 0.121148, 0.592739, 0.544641},
    {143 / 255., 0.120081, 0.622161, 0.534946}, {151 / 255., 0.130067, 0.651384, 0.521608},
    {159 / 255., 0.153894, 0.680203, 0.504172}, {167 / 255., 0.191090, 0.708366, 0.482284},
    {175 / 255., 0.239374, 0.735588, 0.455688}, {183 / 255., 0.296479, 0.761561, 0.424223},
    {191 / 255., 0.360741, 0.785964, 0.387814}, {199 / 255., 0.430983, 0.808473, 0.346476},
    {207 / 255., 0.506271, 0.828786, 0.300362}, {215 / 255., 0.585678, 0.846661, 0.249897},
    {223 / 255., 0.668054, 0.861999, 0.196293}, {231 / 255., 0.751884, 0.874951, 0.143228},
    {239 / 255., 0.835270, 0.886029, 0.102646}, {247 / 255., 0.916242, 0.896091, 0.100717},
    {255 / 255., 0.993248, 0.906157, 0.143936}};

/* ColorBrewer RdBu (reversed: blue negative), centre made pure white so
 * that zero is exactly the background colour. */
static const cpoint rdbu[] = {
    {0.0, 5 / 255., 48 / 255., 97 / 255.},     {0.1, 33 / 255., 102 / 255., 172 / 255.},
    {0.2, 67 / 255., 147 / 255., 195 / 255.},  {0.3, 146 / 255., 197 / 255., 222 / 255.},
    {0.4, 209 / 255., 229 / 255., 240 / 255.}, {0.5, 1.0, 1.0, 1.0},
    {0.6, 253 / 255., 219 / 255., 199 / 255.}, {0.7, 244 / 255., 165 / 255., 130 / 255.},
    {0.8, 214 / 255., 96 / 255., 77 / 255.},   {0.9, 178 / 255., 24 / 255., 43 / 255.},
    {1.0, 103 / 255., 0 / 255., 31 / 255.}};

static uint32_t interp(const cpoint *p, int n, double t) {
    if (!(t > 0)) t = 0; /* also NaN */
    if (t > 1) t = 1;
    int i = 0;
    while (i < n - 2 && t > p[i + 1].t) i++;
    double a = (t - p[i].t) / (p[i + 1].t - p[i].t);
    return al_rgb((int)lround(255 * (p[i].r + a * (p[i + 1].r - p[i].r))),
                  (int)lround(255 * (p[i].g + a * (p[i + 1].g - p[i].g))),
                  (int)lround(255 * (p[i].b + a * (p[i + 1].b - p[i].b))));
}

uint32_t al_cmap_viridis(double t) {
    return interp(viridis, (int)(sizeof viridis / sizeof viridis[0]), t);
}

uint32_t al_cmap_diverging(double t) {
    return interp(rdbu, (int)(sizeof rdbu / sizeof rdbu[0]), (t + 1) / 2);
}

uint32_t al_plot_colour(int i) {
    /* Tableau 10: distinct, and readable on white. */
    static const uint32_t c[] = {0x1F77B4, 0xFF7F0E, 0x2CA02C, 0xD62728, 0x9467BD,
                                 0x8C564B, 0xE377C2, 0x7F7F7F, 0xBCBD22, 0x17BECF};
    return c[(i < 0 ? -i : i) % 10];
}

void al_cscale_fit(al_cscale *cs, const float *v, size_t n) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
        }
    if (lo > hi) lo = hi = 0; /* no finite value */
    if (isnan(cs->lo)) cs->lo = lo;
    if (isnan(cs->hi)) cs->hi = hi;
    if (cs->diverging) {
        double m = fmax(fabs(cs->lo), fabs(cs->hi));
        if (!(m > 0)) m = 1;
        cs->lo = -m;
        cs->hi = m;
    } else if (!(cs->hi > cs->lo)) {
        double d = fabs(cs->lo) > 0 ? fabs(cs->lo) * 0.5 : 0.5;
        cs->lo -= d;
        cs->hi += d;
    }
}

uint32_t al_cscale_colour(const al_cscale *cs, double v) {
    if (isnan(v)) return AL_PLOT_MASKED;
    if (cs->diverging) {
        double m = fmax(fabs(cs->lo), fabs(cs->hi));
        return al_cmap_diverging(m > 0 ? v / m : 0);
    }
    double d = cs->hi - cs->lo;
    return al_cmap_viridis(d > 0 ? (v - cs->lo) / d : 0.5);
}


/* --------------------------------------------------------------- canvas */

/* Everything is drawn through these few calls onto a cairo surface: an
 * RGB image (PNG), an SVG or a PDF surface, so all formats come from one
 * drawing code. Coordinates are integer pixels as in the layout: fills
 * are pixel-aligned (exact colours in PNG), lines run through pixel
 * centres. Text is drawn by cairo except on SVG, where it is recorded and
 * written as <text> elements (see svg_finish): cairo 1.16's SVG surface
 * would emit glyph outlines, which are neither selectable nor searchable. */
typedef struct cv_text_rec {
    double x, y;    /* baseline start (unrotated frame origin) */
    int up, scale, cells;
    uint32_t colour;
    char *s;        /* display text */
} cv_text_rec;

typedef struct cv {
    cairo_t *cr;
    double fx;      /* font x size per unit scale: one cell = AL_FONT_ADV px */
    int svg;        /* text recorded for <text> elements */
    int vec;        /* SVG or PDF: scalable output */
    cv_text_rec *t;
    int nt, cap_t, oom;
} cv;

#define FONT_FAMILY "DejaVu Sans Mono"
#define FONT_PX 10.0 /* font size at scale 1: cap height ~7 px, advance ~6 px */

static void cv_colour(cv *c, uint32_t rgb) {
    cairo_set_source_rgb(c->cr, (rgb >> 16 & 255) / 255.0, (rgb >> 8 & 255) / 255.0,
                         (rgb & 255) / 255.0);
}

static void cv_begin(cv *c, cairo_t *cr, int fmt) {
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

static void cv_end(cv *c) {
    for (int i = 0; i < c->nt; i++) free(c->t[i].s);
    free(c->t);
    c->t = NULL;
    c->nt = c->cap_t = 0;
}

static void cv_fill(cv *c, int x, int y, int w, int h, uint32_t rgb) {
    if (w <= 0 || h <= 0) return;
    cairo_rectangle(c->cr, x, y, w, h);
    cv_colour(c, rgb);
    cairo_fill(c->cr);
}

/* One-pixel outline of [x, x+w) x [y, y+h), inside it. */
static void cv_rect(cv *c, int x, int y, int w, int h, uint32_t rgb) {
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
static void cv_line(cv *c, int x0, int y0, int x1, int y1, int width, int dash, uint32_t rgb) {
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
static int cv_text(cv *c, int x, int y, const char *s, int scale, uint32_t rgb) {
    return cv_text_any(c, x, y, s, scale, 0, rgb);
}

/* s reading bottom to top in [x, x + AL_FONT_GLYPH_H*scale) x [y, y + width),
 * tops of the glyphs facing left. */
static int cv_text_up(cv *c, int x, int y, const char *s, int scale, uint32_t rgb) {
    return cv_text_any(c, x, y, s, scale, 1, rgb);
}

/* --------------------------------------------------------- numbers, text */

static int imax(int a, int b) { return a > b ? a : b; }
static int imin(int a, int b) { return a < b ? a : b; }

static double nice_step(double range, double max_ticks) {
    if (!(range > 0) || !(max_ticks >= 1)) return 1;
    double raw = range / max_ticks, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* A tick value with as many decimals as the step needs. */
static void fmt_tick(double v, double step, char *buf, size_t cap) {
    if (fabs(v) < step * 1e-6) v = 0;
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 5 || fabs(v) >= 1e6) snprintf(buf, cap, "%.2g", v);
    else snprintf(buf, cap, "%.*f", dec, v);
}

static void fmt_val(double v, char *buf, size_t cap) {
    if (fabs(v) < 1e-12) v = 0;
    snprintf(buf, cap, "%.3g", v);
}

static int tw(const char *s) { return s ? al_font_width(s, 1) : 0; }

/* Luminance decides black or white text on a coloured cell. */
static uint32_t ink_on(uint32_t bg) {
    double l = 0.299 * (bg >> 16 & 255) + 0.587 * (bg >> 8 & 255) + 0.114 * (bg & 255);
    return l > 140 ? 0x000000 : 0xFFFFFF;
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
static int bar_block_w(const al_cscale *cs, int h) {
    bar_tick t[MAX_BAR_TICKS];
    int n = bar_ticks(cs, h, t), lw = 0;
    for (int i = 0; i < n; i++) lw = imax(lw, tw(t[i].s));
    return 12 + BAR_W + TICK + 3 + lw + (cs->label ? 8 + GH : 0) + 4;
}

/* The bar's top-left is (x + 12, y). */
static void draw_bar(cv *im, const al_cscale *cs, int x, int y, int h, al_plot_geom *g) {
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

/* ------------------------------------------------------------- heatmaps */

typedef struct hm_lay {
    int w, h;       /* panel box */
    int mx, my;     /* matrix top-left in the box */
    int cw, ch;     /* cell size */
    int rstep, cstep;
    int rl_w, cl_h; /* label extents */
    int lead;       /* left shift so a wide title fits */
    int bar_h;
} hm_lay;

static void hm_label(const al_hm *p, int axis, int i, char *buf, size_t cap) {
    const char *const *L = axis ? p->col_labels : p->row_labels;
    if (L) al_font_fit(L[i] ? L[i] : "", p->max_label_cells > 0 ? p->max_label_cells : 16, buf,
                       cap);
    else snprintf(buf, cap, "%d", i);
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

static void hm_measure(const al_hm *p, int own_bar, hm_lay *L) {
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

static void hm_draw(cv *im, const al_hm *p, const hm_lay *L, int x, int y, int own_bar,
                    al_plot_geom *g) {
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
        cv_text(im, mx + mw / 2 - tw(p->col_title) / 2,
                     my + mh + 1 + TICK + 2 + L->cl_h + 6, p->col_title, 1, INK);
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

/* ----------------------------------------------------------- line plots */

typedef struct ln_lay {
    int w, h, px, py, pw, ph;
    double xlo, xhi, ylo, yhi; /* y in log10 units when log_y */
    double xstep, ystep;
    int yl_w, legend_w;
} ln_lay;

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
    if (p->log_y) fmt_val(pow(10, v), b, cap);
    else fmt_tick(v, L->ystep, b, cap);
}

#define MAX_TICKS 64

/* Multiples of step in [lo, hi] (at most MAX_TICKS). */
static int lin_ticks(double lo, double hi, double step, double *t) {
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

static void ln_measure(const al_lines *p, ln_lay *L) {
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
        for (int i = 0; i < p->n; i++) lw = imax(lw, tw(p->s[i].label)), n_leg += p->s[i].label != NULL;
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

static void ln_draw(cv *im, const al_lines *p, const ln_lay *L, int x, int y,
                    al_plot_geom *g) {
    int ox = x + L->px, oy = y + L->py;
    ln_axes(im, p, L, ox, oy);
    double hl = ymap(p, p->hline);
    if (isfinite(hl)) {
        int hy = ln_y(L, oy, hl);
        cv_line(im, ox, hy, ox + L->pw - 1, hy, 1, 4, 0x606060);
        if (p->hline_label) /* above the line, or below it when at the top */
            cv_text(im, ox + L->pw - 4 - tw(p->hline_label), hy - LINE < oy + 2 ? hy + 4 : hy - LINE,
                         p->hline_label, 1, 0x404040);
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

/* ----------------------------------------------------------- bar charts */

#define BAR_PAD 4  /* plot area edge to the first / last group */
#define BAR_GGAP 14 /* between groups, a dashed separator in the middle */

typedef struct bar_lay {
    int w, h, px, py, pw, ph, bw, yl_w, lab_h, names;
    double lo, hi, step;
} bar_lay;

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

static void bars_measure(const al_bars *p, bar_lay *L) {
    memset(L, 0, sizeof *L);
    L->bw = p->bar_w > 0 ? p->bar_w : imax(5, imin(24, 420 / imax(p->n, 1)));
    L->ph = p->h > 0 ? p->h : 220;
    double lo = 0, hi = 0;
    char b[256];
    for (int i = 0; i < p->n; i++) {
        if (isfinite(p->v[i])) lo = fmin(lo, p->v[i]), hi = fmax(hi, p->v[i]);
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

static void bars_draw(cv *im, const al_bars *p, const bar_lay *L, int x, int y,
                      al_plot_geom *g) {
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
            cv_line(im, gx + span + BAR_GGAP / 2, oy, gx + span + BAR_GGAP / 2,
                          oy + L->ph - 1, 1, 3, FRAME);
        gx += span + BAR_GGAP;
    }
    cv_fill(im, ox, y0, L->pw, 1, INK); /* the zero line, over the bars' ends */
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


/* ---------------------------------------------------------------- graphs */

#define GRAPH_COL_GAP 14
#define GRAPH_ROW_GAP 96
#define GRAPH_PORT_TICK 4 /* a port's coloured tick below its box */

typedef struct graph_lay {
    int label_w;          /* row names' column */
    int per_row_max;      /* widest row, in boxes */
    int w, h;             /* the panel */
} graph_lay;

static int graph_bw(const al_netplot *g) { return g->box_w > 0 ? g->box_w : 60; }
static int graph_bh(const al_netplot *g) { return g->box_h > 0 ? g->box_h : 30; }

/* Boxes of row r before node i (its column) and in all (the row's count). */
static void graph_slot(const al_netplot *g, int i, int *col, int *count) {
    *col = *count = 0;
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k].row == g->nodes[i].row) {
            if (k < i) (*col)++;
            (*count)++;
        }
}

static void graph_measure(const al_netplot *g, graph_lay *L) {
    memset(L, 0, sizeof *L);
    for (int r = 0; g->row_names && r < g->n_rows; r++)
        L->label_w = imax(L->label_w, tw(g->row_names[r]) + 10);
    for (int i = 0; i < g->n_nodes; i++) {
        int col, count;
        graph_slot(g, i, &col, &count);
        L->per_row_max = imax(L->per_row_max, count);
    }
    int n_rows = imax(g->n_rows, 1);
    L->w = L->label_w + L->per_row_max * (graph_bw(g) + GRAPH_COL_GAP);
    L->h = n_rows * graph_bh(g) + (n_rows - 1) * GRAPH_ROW_GAP + GRAPH_PORT_TICK + 2;
}

int al_netplot_place(const al_netplot *g, int i, int port, int *x, int *y, int *w, int *h) {
    if (i < 0 || i >= g->n_nodes || port < -2 || port >= g->nodes[i].n_ports) return -1;
    graph_lay L;
    graph_measure(g, &L);
    int col, count, bw = graph_bw(g), bh = graph_bh(g), n_rows = imax(g->n_rows, 1);
    graph_slot(g, i, &col, &count);
    int pitch = bw + GRAPH_COL_GAP;
    /* rows centred on the widest one */
    int bx = L.label_w + GRAPH_COL_GAP / 2 + (L.per_row_max - count) * pitch / 2 + col * pitch;
    int by = (n_rows - 1 - g->nodes[i].row) * (bh + GRAPH_ROW_GAP);
    if (w) *w = bw;
    if (h) *h = bh;
    if (!x || !y) return 0;
    if (port == -2) *x = bx + bw / 2, *y = by;
    else if (port == -1) *x = bx + bw / 2, *y = by + bh + GRAPH_PORT_TICK - 1;
    else {
        *x = bx + bw * (port + 1) / (g->nodes[i].n_ports + 1);
        *y = by + bh + GRAPH_PORT_TICK - 1;
    }
    return 0;
}

/* The box's top-left (al_netplot_place gives anchors). */
static void graph_box(const al_netplot *g, int i, int ox, int oy, int *x, int *y) {
    int ax, ay;
    al_netplot_place(g, i, -2, &ax, &ay, NULL, NULL);
    *x = ox + ax - graph_bw(g) / 2;
    *y = oy + ay;
}

uint32_t al_netplot_faint(uint32_t c) {
    int r = (int)(c >> 16 & 255), gg = (int)(c >> 8 & 255), b = (int)(c & 255);
    return al_rgb(r + (255 - r) * 4 / 5, gg + (255 - gg) * 4 / 5, b + (255 - b) * 4 / 5);
}

static void graph_edge(cv *im, const al_netplot *g, const al_netedge *ed, int ox, int oy) {
    int x0, y0, x1, y1;
    if (al_netplot_place(g, ed->from, -2, &x0, &y0, NULL, NULL) ||
        al_netplot_place(g, ed->to, ed->port, &x1, &y1, NULL, NULL))
        return;
    if (ed->faint)
        cv_line(im, ox + x0, oy + y0, ox + x1, oy + y1, 1, 0, al_netplot_faint(ed->colour));
    else
        cv_line(im, ox + x0, oy + y0, ox + x1, oy + y1, imax(ed->width, 1), 0, ed->colour);
}

static void graph_draw(cv *im, const al_netplot *g, const graph_lay *L, int x, int y,
                       al_plot_geom *geo) {
    int ox = x, oy = y, bw = graph_bw(g), bh = graph_bh(g), n_rows = imax(g->n_rows, 1);
    for (int r = 0; g->row_names && r < g->n_rows; r++)
        if (g->row_names[r])
            cv_text(im, ox, oy + (n_rows - 1 - r) * (bh + GRAPH_ROW_GAP) + bh / 2 - 4,
                         g->row_names[r], 1, INK);
    for (int i = 0; i < g->n_edges; i++)
        if (g->edges[i].faint) graph_edge(im, g, &g->edges[i], ox, oy);
    /* thinnest first, so a strong edge is never hidden under a weak one */
    int max_w = 1;
    for (int i = 0; i < g->n_edges; i++) max_w = imax(max_w, g->edges[i].width);
    for (int w = 1; w <= max_w; w++)
        for (int i = 0; i < g->n_edges; i++)
            if (!g->edges[i].faint && imax(g->edges[i].width, 1) == w)
                graph_edge(im, g, &g->edges[i], ox, oy);
    for (int i = 0; i < g->n_nodes; i++) {
        const al_netnode *n = &g->nodes[i];
        int bx, by;
        graph_box(g, i, ox, oy, &bx, &by);
        uint32_t line = n->dim ? 0xB0B0B0u : INK;
        cv_fill(im, bx, by, bw, bh, n->fill);
        cv_rect(im, bx, by, bw, bh, line);
        char lab[64];
        al_font_fit(n->label ? n->label : "", bw / AL_FONT_ADV - 1, lab, sizeof lab);
        cv_text(im, bx + bw / 2 - tw(lab) / 2, by + (n->n_ports ? 3 : bh / 2 - 4), lab, 1, line);
        for (int k = 0; k < n->n_ports && k < AL_NET_PORTS; k++) {
            int px = bx + bw * (k + 1) / (n->n_ports + 1);
            cv_fill(im, px - 2, by + bh, 5, GRAPH_PORT_TICK, n->port_colour[k]);
            if (n->port_label[k])
                cv_text(im, px - tw(n->port_label[k]) / 2, by + bh - LINE, n->port_label[k], 1,
                             n->dim ? line : n->port_colour[k]);
        }
    }
    if (geo) geo->mx = ox, geo->my = oy, geo->mw = L->w, geo->mh = L->h;
}


/* ---------------------------------------------------------------- output */

static cairo_status_t buf_write(void *closure, const unsigned char *data, unsigned int n) {
    al_buf *b = closure;
    al_buf_put(b, data, n);
    return al_buf_ok(b) ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_NO_MEMORY;
}

/* An RGB24 surface into an 8-bit RGB image. */
static int image_of(cairo_surface_t *sf, al_image *img, al_err *e) {
    int W = cairo_image_surface_get_width(sf), H = cairo_image_surface_get_height(sf);
    int stride = cairo_image_surface_get_stride(sf);
    const unsigned char *d = cairo_image_surface_get_data(sf);
    if (al_image_init(img, W, H, AL_PLOT_BG, e)) return -1;
    for (int y = 0; y < H; y++) {
        const uint32_t *row = (const uint32_t *)(const void *)(d + (size_t)y * stride);
        uint8_t *o = img->px + (size_t)y * W * 3;
        for (int x = 0; x < W; x++) {
            o[3 * x] = (uint8_t)(row[x] >> 16), o[3 * x + 1] = (uint8_t)(row[x] >> 8);
            o[3 * x + 2] = (uint8_t)row[x];
        }
    }
    return 0;
}

static const char *meta_get(const al_png_text *m, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (m[i].key && !strcmp(m[i].key, key)) return m[i].value;
    return NULL;
}

/* Provenance as one line: "key: value; key: value" (Title left out). */
static void meta_line(al_buf *b, const al_png_text *m, int n) {
    for (int i = 0; i < n; i++) {
        if (!m[i].key || !m[i].value || !strcmp(m[i].key, "Title")) continue;
        al_buf_printf(b, "%s%s: %s", b->n ? "; " : "", m[i].key, m[i].value);
    }
}

/* PDF document information: Title, Creator (the software) and Subject
 * (the provenance line), what the PNG's text chunks say. */
static void pdf_meta(cairo_surface_t *sf, const al_figure *f, const al_png_text *m, int n) {
    const char *title = meta_get(m, n, "Title");
    if (!title) title = f->title;
    if (title) cairo_pdf_surface_set_metadata(sf, CAIRO_PDF_METADATA_TITLE, title);
    const char *sw = meta_get(m, n, "Software");
    cairo_pdf_surface_set_metadata(sf, CAIRO_PDF_METADATA_CREATOR, sw ? sw : "attnlab");
    al_buf b = AL_BUF_INIT;
    meta_line(&b, m, n);
    if (b.p && al_buf_ok(&b)) cairo_pdf_surface_set_metadata(sf, CAIRO_PDF_METADATA_SUBJECT, b.p);
    al_buf_free(&b);
}

/* s as XML character data. XML 1.0 forbids control characters (but tab,
 * newline, return) and U+FFFE/U+FFFF even as references: those become
 * "\xNN" text and U+FFFD, one character for one, so the file always
 * parses (labels reach here through al_font_display, which has already
 * spelled out control bytes; the provenance in <desc> has not). */
static void xml_text(al_buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char u = (unsigned char)*s;
        if (u == 0xEF && (unsigned char)s[1] == 0xBF && ((unsigned char)s[2] & 0xFE) == 0xBE) {
            al_buf_puts(b, "\xef\xbf\xbd");
            s += 2;
            continue;
        }
        switch (u) {
        case '&': al_buf_puts(b, "&amp;"); break;
        case '<': al_buf_puts(b, "&lt;"); break;
        case '>': al_buf_puts(b, "&gt;"); break;
        case '"': al_buf_puts(b, "&quot;"); break;
        default:
            if (u < 0x20 && u != '\t' && u != '\n' && u != '\r') al_buf_printf(b, "\\x%02x", u);
            else al_buf_put(b, s, 1);
        }
    }
}

/* cairo's SVG with the recorded text added as <text> elements (on top,
 * in drawing order) and the title and provenance as <title> and <desc>
 * right after the opening <svg> tag. Each <text> has textLength = its
 * cells' width, so whatever monospace font the viewer has, a label
 * covers exactly the width the layout gave it. */
static int svg_finish(al_buf *vec, const cv *c, const al_figure *f, const al_png_text *m, int n,
                      al_err *e) {
    const char *doc = vec->p, *open = doc ? strstr(doc, "<svg") : NULL;
    const char *open_end = open ? strchr(open, '>') : NULL, *close = NULL;
    for (const char *p = open_end; p && (p = strstr(p, "</svg>")); p++) close = p;
    if (!open_end || !close) return al_errf(e, "cairo wrote no <svg> element");
    al_buf o = AL_BUF_INIT;
    al_buf_put(&o, doc, (size_t)(open_end + 1 - doc));
    const char *title = meta_get(m, n, "Title");
    if (!title) title = f->title;
    if (title) {
        al_buf_puts(&o, "\n<title>");
        xml_text(&o, title);
        al_buf_puts(&o, "</title>");
    }
    al_buf line = AL_BUF_INIT;
    meta_line(&line, m, n);
    if (line.p) {
        al_buf_puts(&o, "\n<desc>");
        xml_text(&o, line.p);
        al_buf_puts(&o, "</desc>");
    }
    int line_ok = al_buf_ok(&line);
    al_buf_free(&line);
    /* cairo names the drawing's group by a process-wide surface counter:
     * renamed, so the same figure is the same file whichever call draws it
     * (nothing refers to it: no "#surface" link in a drawing without images) */
    const char *body = open_end + 1, *grp = strstr(body, "<g id=\"surface");
    if (grp && grp < close && !strstr(body, "#surface")) {
        const char *q = grp + strlen("<g id=\"surface");
        while (*q >= '0' && *q <= '9') q++;
        al_buf_put(&o, body, (size_t)(grp - body));
        al_buf_puts(&o, "<g id=\"figure");
        body = q;
    }
    al_buf_put(&o, body, (size_t)(close - body));
    al_buf_puts(&o, "<g id=\"text\" font-family=\"" FONT_FAMILY ", monospace\" xml:space=\"preserve\">\n");
    for (int i = 0; i < c->nt; i++) {
        const cv_text_rec *t = &c->t[i];
        al_buf_printf(&o, "<text font-size=\"%g\" textLength=\"%d\" "
                          "lengthAdjust=\"spacingAndGlyphs\" fill=\"#%06X\" ",
                      FONT_PX * t->scale, t->cells * AL_FONT_ADV * t->scale, (unsigned)t->colour);
        if (t->up) al_buf_printf(&o, "transform=\"translate(%g %g) rotate(-90)\">", t->x, t->y);
        else al_buf_printf(&o, "x=\"%g\" y=\"%g\">", t->x, t->y);
        xml_text(&o, t->s);
        al_buf_puts(&o, "</text>\n");
    }
    al_buf_puts(&o, "</g>\n");
    al_buf_puts(&o, close);
    if (!al_buf_ok(&o) || !line_ok) {
        al_buf_free(&o);
        return al_errf(e, "out of memory");
    }
    al_buf_free(vec);
    *vec = o;
    return 0;
}

/* ----------------------------------------------------------- token rows */

#define TR_MAX_COLS 128
#define TR_PAD 3          /* text inset in a token's cell */
#define TR_PITCH (LINE + 6) /* one row of tokens */

typedef struct tr_lay {
    int w, h, mx, my, mw, mh, rl_w, bar_h;
    int cx[TR_MAX_COLS + 1]; /* column x offsets from mx; cx[cols] the width */
} tr_lay;

static void tr_tok(const al_tokrows *p, int r, int c, char *buf, size_t cap) {
    const char *s = p->tok[(size_t)r * p->cols + c];
    buf[0] = 0;
    if (s) al_font_fit(s, p->max_cells > 0 ? p->max_cells : 12, buf, cap);
}

static void tr_measure(const al_tokrows *p, int own_bar, tr_lay *L) {
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

static void tr_draw(cv *im, const al_tokrows *p, const tr_lay *L, int x, int y, int own_bar,
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

/* --------------------------------------------------------------- figure */

typedef struct panel_lay {
    hm_lay hm;
    ln_lay ln;
    bar_lay bars;
    graph_lay graph;
    tr_lay tr;
    int w, h;
} panel_lay;

static int legend_row_w(const al_figure *f) {
    int w = 0;
    for (int i = 0; i < f->n_legend; i++) w += 24 + tw(f->legend[i].label) + 16;
    return w;
}

static void draw_legend_row(cv *im, const al_figure *f, int x, int y) {
    for (int i = 0; i < f->n_legend; i++) {
        cv_line(im, x, y + 3, x + 19, y + 3, 3, f->legend[i].dash, f->legend[i].colour);
        x += 24;
        x += cv_text(im, x, y, f->legend[i].label, 1, INK) + 16;
    }
}

/* Split s at spaces into lines of at most max_px; returns the count
 * (lines are malloc'd into out, at most cap). A word longer than a line
 * gets a line of its own. */
static int wrap(const char *s, int max_px, char **out, int cap) {
    int n = 0, max_cells = imax(max_px / AL_FONT_ADV, 20);
    while (*s && n < cap) {
        size_t best = 0, i = 0;
        for (;;) { /* extend to the next space while the line fits */
            size_t j = i;
            while (s[j] && s[j] != ' ') j++;
            char *tmp = strndup(s, j);
            int fits = tmp && al_font_cells(tmp) <= max_cells;
            free(tmp);
            if (!fits && best) break;
            best = j;
            if (!s[j] || !fits) break;
            i = j + 1;
        }
        out[n++] = strndup(s, best);
        s += best;
        while (*s == ' ') s++;
    }
    return n;
}

#define MAX_NOTE_LINES (4 * AL_FIG_MAX_NOTES)

/* The figure drawn onto a surface of format fmt: PNG into *img, SVG or PDF
 * into *vec (meta: provenance for the document's metadata); its size in
 * px to *size_w, *size_h (may be NULL). */
static int render(const al_figure *f, int fmt, al_image *img, al_buf *vec, const al_png_text *meta,
                  int n_meta, al_plot_geom *geom, int *size_w, int *size_h, al_err *e) {
    if (img) img->w = img->h = 0, img->px = NULL;
    cairo_surface_t *sf = NULL;
    cairo_t *cr = NULL;
    cv canvas = {0}, *out = &canvas;
    int n = f->n_panels, ncols = f->ncols > 0 ? imin(f->ncols, imax(n, 1)) : imax(n, 1);
    int nrows = n > 0 ? (n + ncols - 1) / ncols : 0;
    panel_lay *pl = al_calloc((size_t)imax(n, 1), sizeof *pl, e);
    int *cw = al_calloc((size_t)ncols + 1, sizeof(int), e);
    int *rh = al_calloc((size_t)nrows + 1, sizeof(int), e);
    int rc = -1, n_lines = 0;
    char *lines[MAX_NOTE_LINES] = {0};
    if (!pl || !cw || !rh) goto out;
    const al_hm *first_hm = NULL;
    int first_i = -1;
    for (int i = 0; i < n; i++) {
        const al_panel *p = &f->panels[i];
        if (p->kind == AL_PANEL_HEATMAP) {
            if (!p->hm.cs || !p->hm.v || p->hm.rows <= 0 || p->hm.cols <= 0) {
                al_errf(e, "heatmap panel %d has no data or no colour scale", i);
                goto out;
            }
            hm_measure(&p->hm, p->hm.bar && !f->shared_bar, &pl[i].hm);
            pl[i].w = pl[i].hm.w, pl[i].h = pl[i].hm.h;
            if (!first_hm) first_hm = &p->hm, first_i = i;
        } else if (p->kind == AL_PANEL_BARS) {
            if (!p->bars.v || p->bars.n <= 0) {
                al_errf(e, "bar panel %d has no data", i);
                goto out;
            }
            bars_measure(&p->bars, &pl[i].bars);
            pl[i].w = pl[i].bars.w, pl[i].h = pl[i].bars.h;
        } else if (p->kind == AL_PANEL_NET) {
            if (!p->net.nodes || p->net.n_nodes <= 0 || (p->net.n_edges && !p->net.edges)) {
                al_errf(e, "graph panel %d has no nodes", i);
                goto out;
            }
            graph_measure(&p->net, &pl[i].graph);
            pl[i].w = pl[i].graph.w, pl[i].h = pl[i].graph.h;
        } else if (p->kind == AL_PANEL_TOKENS) {
            if (!p->tr.tok || !p->tr.cs || p->tr.rows <= 0 || p->tr.cols <= 0 ||
                p->tr.cols > TR_MAX_COLS) {
                al_errf(e, "token panel %d has no tokens, no colour scale or over %d columns", i,
                        TR_MAX_COLS);
                goto out;
            }
            tr_measure(&p->tr, p->tr.bar, &pl[i].tr);
            pl[i].w = pl[i].tr.w, pl[i].h = pl[i].tr.h;
        } else {
            ln_measure(&p->ln, &pl[i].ln);
            pl[i].w = pl[i].ln.w, pl[i].h = pl[i].ln.h;
        }
        cw[i % ncols] = imax(cw[i % ncols], pl[i].w);
        rh[i / ncols] = imax(rh[i / ncols], pl[i].h);
    }
    int grid_w = 0, grid_h = 0;
    for (int c = 0; c < ncols; c++) grid_w += cw[c] + (c ? GAP_X : 0);
    for (int r = 0; r < nrows; r++) grid_h += rh[r] + (r ? GAP_Y : 0);
    int bar_h = 0, bar_w = 0;
    if (f->shared_bar && first_hm) {
        bar_h = imax(120, imin(first_hm->rows * pl[first_i].hm.ch, 400));
        bar_w = bar_block_w(f->shared_bar, bar_h);
    }
    int content_w = grid_w + bar_w;
    content_w = imax(content_w, f->title ? al_font_width(f->title, 2) : 0);
    content_w = imax(imax(content_w, legend_row_w(f)), 560);
    for (int i = 0; i < f->n_notes && n_lines < MAX_NOTE_LINES; i++)
        n_lines += wrap(f->notes[i], content_w, lines + n_lines, MAX_NOTE_LINES - n_lines);
    for (int i = 0; i < n_lines; i++) {
        if (!lines[i]) {
            al_errf(e, "out of memory");
            goto out;
        }
        content_w = imax(content_w, tw(lines[i]));
    }
    int head = MARGIN + (f->title ? 2 * LINE + 4 : 0) + n_lines * LINE +
               (f->n_legend ? LINE + 6 : 0) + 10;
    int H = head + imax(grid_h, bar_h ? pl[first_i].hm.my + bar_h + 8 : 0) + MARGIN;
    int W = content_w + 2 * MARGIN;
    if (W > AL_IMAGE_MAX_SIDE || H > AL_IMAGE_MAX_SIDE) {
        al_errf(e, "picture size %d x %d is out of range (1..%d per side)", W, H, AL_IMAGE_MAX_SIDE);
        goto out;
    }
    if (size_w) *size_w = W;
    if (size_h) *size_h = H;
    if (fmt == AL_FIG_SVG) {
        sf = cairo_svg_surface_create_for_stream(buf_write, vec, W, H);
        cairo_svg_surface_set_document_unit(sf, CAIRO_SVG_UNIT_PX);
    } else if (fmt == AL_FIG_PDF) {
        sf = cairo_pdf_surface_create_for_stream(buf_write, vec, W, H);
        pdf_meta(sf, f, meta, n_meta);
    } else {
        sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    }
    cr = cairo_create(sf);
    if (cairo_status(cr) != CAIRO_STATUS_SUCCESS) {
        al_errf(e, "cannot draw a %d x %d picture: %s", W, H, cairo_status_to_string(cairo_status(cr)));
        goto out;
    }
    cv_begin(out, cr, fmt);
    cv_fill(out, 0, 0, W, H, AL_PLOT_BG);
    int y = MARGIN;
    if (f->title) {
        cv_text(out, MARGIN, y, f->title, 2, INK);
        y += 2 * LINE + 4;
    }
    for (int i = 0; i < n_lines; i++, y += LINE) cv_text(out, MARGIN, y, lines[i], 1, 0x404040);
    if (f->n_legend) {
        draw_legend_row(out, f, MARGIN, y + 2);
        y += LINE + 6;
    }
    for (int i = 0; i < n; i++) {
        int c = i % ncols, r = i / ncols, x = MARGIN, py = head;
        for (int k = 0; k < c; k++) x += cw[k] + GAP_X;
        for (int k = 0; k < r; k++) py += rh[k] + GAP_Y;
        al_plot_geom g = {x, py, pl[i].w, pl[i].h, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        const al_panel *p = &f->panels[i];
        if (p->kind == AL_PANEL_HEATMAP)
            hm_draw(out, &p->hm, &pl[i].hm, x, py, p->hm.bar && !f->shared_bar, &g);
        else if (p->kind == AL_PANEL_BARS)
            bars_draw(out, &p->bars, &pl[i].bars, x, py, &g);
        else if (p->kind == AL_PANEL_NET)
            graph_draw(out, &p->net, &pl[i].graph, x, py, &g);
        else if (p->kind == AL_PANEL_TOKENS)
            tr_draw(out, &p->tr, &pl[i].tr, x, py, p->tr.bar, &g);
        else
            ln_draw(out, &p->ln, &pl[i].ln, x, py, &g);
        if (geom) geom[i] = g;
    }
    if (bar_h) {
        al_plot_geom g;
        draw_bar(out, f->shared_bar, MARGIN + grid_w, head + pl[first_i].hm.my, bar_h, &g);
        for (int i = 0; geom && i < n; i++)
            if (f->panels[i].kind == AL_PANEL_HEATMAP) {
                geom[i].bar_x = g.bar_x, geom[i].bar_y = g.bar_y;
                geom[i].bar_w = g.bar_w, geom[i].bar_h = g.bar_h;
            }
    }
    cairo_destroy(cr);
    cr = NULL;
    /* finishing writes a vector document out; it would free an image's pixels */
    if (fmt == AL_FIG_PNG) cairo_surface_flush(sf);
    else cairo_surface_finish(sf);
    cairo_status_t st = cairo_surface_status(sf);
    if (st != CAIRO_STATUS_SUCCESS || out->oom || (vec && !al_buf_ok(vec))) {
        al_errf(e, "cannot draw the picture: %s",
                st != CAIRO_STATUS_SUCCESS ? cairo_status_to_string(st) : "out of memory");
        goto out;
    }
    if (fmt == AL_FIG_PNG && image_of(sf, img, e)) goto out;
    if (fmt == AL_FIG_SVG && svg_finish(vec, out, f, meta, n_meta, e)) goto out;
    rc = 0;
out:
    if (cr) cairo_destroy(cr);
    if (sf) cairo_surface_destroy(sf);
    cv_end(out);
    for (int i = 0; i < n_lines; i++) free(lines[i]);
    free(pl);
    free(cw);
    free(rh);
    return rc;
}

int al_plot_figure(const al_figure *f, al_image *out, al_plot_geom *geom, al_err *e) {
    return render(f, AL_FIG_PNG, out, NULL, NULL, 0, geom, NULL, NULL, e);
}

int al_fig_format_parse(const char *s) {
    if (!s) return -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, al_fig_format_name(i))) return i;
    return -1;
}

const char *al_fig_format_name(int fmt) {
    return fmt == AL_FIG_SVG ? "svg" : fmt == AL_FIG_PDF ? "pdf" : "png";
}

int al_fig_format_of_path(const char *path) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot || strchr(dot, '/')) return -1;
    char ext[8];
    size_t n = strlen(dot + 1);
    if (n == 0 || n >= sizeof ext) return -1;
    for (size_t i = 0; i <= n; i++) ext[i] = (char)tolower((unsigned char)dot[1 + i]);
    return al_fig_format_parse(ext);
}

int al_plot_write(const al_figure *f, int fmt, const char *path, const al_png_text *meta,
                  int n_meta, int *w, int *h, al_err *e) {
    if (fmt < AL_FIG_PNG || fmt > AL_FIG_PDF) return al_errf(e, "unknown figure format %d", fmt);
    if (fmt == AL_FIG_PNG) {
        al_image im;
        if (render(f, fmt, &im, NULL, meta, n_meta, NULL, w, h, e)) return -1;
        int rc = al_png_write(path, &im, meta, n_meta, e);
        al_image_free(&im);
        return rc;
    }
    al_buf b = AL_BUF_INIT;
    int rc = render(f, fmt, NULL, &b, meta, n_meta, NULL, w, h, e);
    if (!rc) rc = al_write_file_atomic(path, b.p, b.n, e);
    al_buf_free(&b);
    return rc;
}
