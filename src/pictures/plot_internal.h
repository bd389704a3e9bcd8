/* plot_internal.h -- what the files of the figure backend share (private
 * to src/pictures/; the public side is include/attnlab/plot.h).
 * layer: pictures
 *
 * plot.c lays a figure out and renders it. Each kind of panel has a
 * layout struct, a measure function (the panel's size and where its parts
 * go, from the strings alone) and a draw function (onto the canvas at the
 * panel's top-left): plot_heatmap.c (heatmaps, token rows), plot_lines.c
 * (line and scatter plots), plot_bars.c (bar charts), plot_graph.c
 * (layered graphs). They all draw through the canvas of plot_canvas.c,
 * which also draws colour bars; plot_output.c turns a finished surface
 * into an image or a document; plot_colour.c holds the colour maps. */
#ifndef ATTNLAB_PLOT_INTERNAL_H
#define ATTNLAB_PLOT_INTERNAL_H

#include <cairo.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "attnlab/buf.h"
#include "attnlab/font.h"
#include "attnlab/image.h"
#include "attnlab/plot.h"
#include "attnlab/png.h"

#define LINE AL_FONT_LINE
#define GH AL_FONT_GLYPH_H
#define TICK 3
#define FRAME 0x808080u
#define GRIDC 0xE6E6E6u
#define INK AL_PLOT_INK

/* ---------------------------------------------------- canvas (plot_canvas.c) */

/* Text is recorded, not drawn, on SVG (cv.svg): svg_finish writes it. */
typedef struct cv_text_rec {
    double x, y; /* baseline start (unrotated frame origin) */
    int up, scale, cells;
    uint32_t colour;
    char *s; /* display text */
} cv_text_rec;

typedef struct cv {
    cairo_t *cr;
    double fx; /* font x size per unit scale: one cell = AL_FONT_ADV px */
    int svg; /* text recorded for <text> elements */
    int vec; /* SVG or PDF: scalable output */
    cv_text_rec *t;
    int nt, cap_t, oom;
} cv;

#define FONT_FAMILY "DejaVu Sans Mono"
#define FONT_PX 10.0 /* font size at scale 1: cap height ~7 px, advance ~6 px */

void cv_begin(cv *c, cairo_t *cr, int fmt);
void cv_end(cv *c); /* frees the recorded text */
void cv_colour(cv *c, uint32_t rgb);
void cv_fill(cv *c, int x, int y, int w, int h, uint32_t rgb);
/* One-pixel outline of [x, x+w) x [y, y+h), inside it. */
void cv_rect(cv *c, int x, int y, int w, int h, uint32_t rgb);
/* A line through the centres of pixels (x0,y0) and (x1,y1), width px
 * wide; dash > 0: dash px on, dash off. */
void cv_line(cv *c, int x0, int y0, int x1, int y1, int width, int dash, uint32_t rgb);
/* s with the top-left of its first cell at (x,y); returns its width. */
int cv_text(cv *c, int x, int y, const char *s, int scale, uint32_t rgb);
/* s reading bottom to top in [x, x + AL_FONT_GLYPH_H*scale) x [y, y + width),
 * tops of the glyphs facing left. */
int cv_text_up(cv *c, int x, int y, const char *s, int scale, uint32_t rgb);

/* Width of a colour bar's block (gap, bar, ticks, labels, caption) for a
 * bar h px high. */
int bar_block_w(const al_cscale *cs, int h);
/* A colour bar h px high whose top-left is (x + 12, y); g (may be NULL)
 * gets its place. */
void draw_bar(cv *im, const al_cscale *cs, int x, int y, int h, al_plot_geom *g);

/* ------------------------------------------------------------ numbers, text */

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

static inline double nice_step(double range, double max_ticks) {
    if (!(range > 0) || !(max_ticks >= 1)) return 1;
    double raw = range / max_ticks, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/* A tick value with as many decimals as the step needs. */
static inline void fmt_tick(double v, double step, char *buf, size_t cap) {
    if (fabs(v) < step * 1e-6) v = 0;
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 5 || fabs(v) >= 1e6)
        snprintf(buf, cap, "%.2g", v);
    else
        snprintf(buf, cap, "%.*f", dec, v);
}

static inline void fmt_val(double v, char *buf, size_t cap) {
    if (fabs(v) < 1e-12) v = 0;
    snprintf(buf, cap, "%.3g", v);
}

static inline int tw(const char *s) { return s ? al_font_width(s, 1) : 0; }

/* Luminance decides black or white text on a coloured cell. */
static inline uint32_t ink_on(uint32_t bg) {
    double l = 0.299 * (bg >> 16 & 255) + 0.587 * (bg >> 8 & 255) + 0.114 * (bg & 255);
    return l > 140 ? 0x000000 : 0xFFFFFF;
}

/* ----------------------------------------------------------------- panels */

/* heatmaps (plot_heatmap.c) */
typedef struct hm_lay {
    int w, h; /* panel box */
    int mx, my; /* matrix top-left in the box */
    int cw, ch; /* cell size */
    int rstep, cstep;
    int rl_w, cl_h; /* label extents */
    int lead; /* left shift so a wide title fits */
    int bar_h;
} hm_lay;
void hm_measure(const al_hm *p, int own_bar, hm_lay *L);
void hm_draw(cv *im, const al_hm *p, const hm_lay *L, int x, int y, int own_bar, al_plot_geom *g);

/* token rows (plot_heatmap.c) */
#define TR_MAX_COLS 128
typedef struct tr_lay {
    int w, h, mx, my, mw, mh, rl_w, bar_h;
    int cx[TR_MAX_COLS + 1]; /* column x offsets from mx; cx[cols] the width */
} tr_lay;
void tr_measure(const al_tokrows *p, int own_bar, tr_lay *L);
void tr_draw(cv *im, const al_tokrows *p, const tr_lay *L, int x, int y, int own_bar,
             al_plot_geom *g);

/* line plots (plot_lines.c) */
typedef struct ln_lay {
    int w, h, px, py, pw, ph;
    double xlo, xhi, ylo, yhi; /* y in log10 units when log_y */
    double xstep, ystep;
    int yl_w, legend_w;
} ln_lay;
void ln_measure(const al_lines *p, ln_lay *L);
void ln_draw(cv *im, const al_lines *p, const ln_lay *L, int x, int y, al_plot_geom *g);

#define MAX_TICKS 64
/* Multiples of step in [lo, hi] (at most MAX_TICKS) into t; their count. */
int lin_ticks(double lo, double hi, double step, double *t);

/* bar charts (plot_bars.c) */
typedef struct bar_lay {
    int w, h, px, py, pw, ph, bw, yl_w, lab_h, names;
    double lo, hi, step;
} bar_lay;
void bars_measure(const al_bars *p, bar_lay *L);
void bars_draw(cv *im, const al_bars *p, const bar_lay *L, int x, int y, al_plot_geom *g);

/* layered graphs (plot_graph.c) */
typedef struct graph_lay {
    int label_w; /* row names' column */
    int per_row_max; /* widest row, in boxes */
    int w, h; /* the panel */
} graph_lay;
void graph_measure(const al_netplot *g, graph_lay *L);
void graph_draw(cv *im, const al_netplot *g, const graph_lay *L, int x, int y, al_plot_geom *geo);

/* ------------------------------------------------------ output (plot_output.c) */

/* cairo's write callback: appends to the al_buf at closure. */
cairo_status_t buf_write(void *closure, const unsigned char *data, unsigned int n);
/* An RGB24 surface into an 8-bit RGB image. */
int image_of(cairo_surface_t *sf, al_image *img, al_err *e);
/* PDF document information from the provenance (and the figure's title). */
void pdf_meta(cairo_surface_t *sf, const al_figure *f, const al_png_text *m, int n);
/* cairo's SVG in *vec with c's recorded text, the title and the provenance
 * added: 0, or -1 with e. */
int svg_finish(al_buf *vec, const cv *c, const al_figure *f, const al_png_text *m, int n,
               al_err *e);

#endif
