/* plot.h -- figures as PNG, SVG or PDF: heatmaps, line plots, scatter
 * plots, bar charts, layered graphs, small multiples.
 *
 * A figure is a title, a few note lines, an optional legend, and a grid of
 * panels; each panel is a heatmap (al_hm), a line plot (al_lines; a
 * scatter plot is one whose series are points only), a bar chart
 * (al_bars), a layered graph (al_netplot) or rows of text tokens with
 * coloured backgrounds (al_tokrows).
 * Heatmaps put row labels on the left and column labels below, rotated
 * to read upwards, and thin them (every k-th, with a tick) when cells are
 * smaller than a text line, so labels never overlap. Cells are at least
 * 8 px. Colour scales are viridis for sequential data (NaN = masked,
 * grey) and blue-white-red centred on 0 for signed data; every heatmap
 * has a colour bar labelled with its range, its own or one shared by the
 * figure. Layout is computed from the content: callers give data and
 * words, never pixel positions.
 *
 * One drawing code renders through cairo onto an image surface (PNG), an
 * SVG surface or a PDF surface: the same layout, colours and antialiased
 * text in every format. Text is real text in the vector formats: PDF
 * embeds the font with a Unicode map (selectable, searchable), SVG has a
 * <text> element per label. Drawing is deterministic: the same figure
 * gives the same PNG pixels, byte for byte, with one cairo and font. */
#ifndef ATTNLAB_PLOT_H
#define ATTNLAB_PLOT_H

#include <stdint.h>
#include "attnlab/image.h"
#include "attnlab/png.h"
#include "attnlab/util.h"

#define AL_PLOT_BG 0xFFFFFFu
#define AL_PLOT_INK 0x1A1A1Au
#define AL_PLOT_MASKED 0xBEBEBEu /* masked / missing cells */

/* t in [0,1] (clamped) -> viridis, interpolated from 33 of matplotlib's
 * 256 viridis entries (within 2/255 of the full table). */
uint32_t al_cmap_viridis(double t);
/* t in [-1,1] (clamped) -> blue (-1), white (0, exactly 0xFFFFFF), red (+1);
 * ColorBrewer RdBu control points. */
uint32_t al_cmap_diverging(double t);
/* A categorical colour for series i (10 distinct, then repeating). */
uint32_t al_plot_colour(int i);

#define AL_MAX_MARKS 4
typedef struct al_cscale {
    int diverging; /* 0: viridis over [lo,hi]; 1: RdBu over [-m,m], m = max|lo|,|hi| */
    double lo, hi; /* NaN: from the data (al_cscale_fit) */
    const char *label; /* caption along the colour bar */
    int n_marks; /* values marked on the bar, e.g. a random baseline */
    double mark[AL_MAX_MARKS];
    const char *mark_label[AL_MAX_MARKS];
} al_cscale;

/* Fill NaN lo/hi from the finite values of v (n); a diverging scale
 * becomes symmetric. Degenerate ranges are widened so colours are defined. */
void al_cscale_fit(al_cscale *cs, const float *v, size_t n);
/* Colour of value v (NaN -> AL_PLOT_MASKED). */
uint32_t al_cscale_colour(const al_cscale *cs, double v);

typedef struct al_hm {
    const float *v; /* (rows, cols) row-major; NaN = masked */
    int rows, cols;
    const char *const *row_labels; /* (rows) or NULL: row numbers */
    const char *const *col_labels; /* (cols) or NULL: column numbers */
    const char *title; /* above the matrix (may be NULL) */
    const char *row_title, *col_title;
    int cell; /* px per cell (>= 8); 0 = from the size */
    int annotate; /* print values in cells when they fit */
    const al_cscale *cs; /* required */
    int bar; /* draw its own colour bar */
    int max_label_cells; /* cut labels longer than this (0 = 16) */
} al_hm;

/* Marker shapes of al_series.marker. */
enum { AL_MARK_NONE, AL_MARK_SQUARE, AL_MARK_CIRCLE, AL_MARK_TRIANGLE, AL_MARK_DIAMOND };

typedef struct al_series {
    const double *x, *y; /* (n); a NaN y breaks the line */
    int n;
    const char *label; /* legend text (NULL: not in the legend) */
    uint32_t colour;
    int width; /* px (0 = 2) */
    int marker; /* AL_MARK_*: drawn at every point (1 = a square) */
    int dash; /* dash length in px (0 = solid) */
    int points; /* points only, no line (a scatter); markers 7 px, square if none */
    const char *const
        *point_labels; /* (n) or NULL: text right of each point (a NULL entry: none) */
} al_series;

typedef struct al_lines {
    const al_series *s; /* s[0] is drawn last (on top) and listed first */
    int n;
    const char *title, *x_title, *y_title;
    int w, h; /* plot area in px (0 = 360 x 220) */
    int log_y; /* logarithmic y (values <= 0 are skipped) */
    int x_reverse; /* x decreases to the right */
    double x_lo, x_hi, y_lo, y_hi; /* NaN = from the data */
    double hline; /* a dashed reference line (NaN = none) */
    const char *hline_label;
    int legend; /* legend to the right of the plot area */
    int x_integer; /* ticks on integers only */
} al_lines;

/* Signed vertical bars from a zero line, in groups left to right. Each
 * group is its own colour, separated from the next by a gap and a
 * dashed line, and named below its bars; bars with a label have it
 * written under the axis, reading upwards (a label closer than a text
 * line to the previous one is left out, so labels never overlap). */
typedef struct al_bars {
    const double *v; /* (n); NaN: no bar */
    int n;
    const int *group; /* (n) non-decreasing in 0..n_groups-1, or NULL: all 0 */
    const char *const *group_names; /* (n_groups) or NULL */
    int n_groups; /* 0 = 1 */
    const char *const *labels; /* (n) or NULL; a NULL entry: no label */
    const uint32_t *colours; /* (n) or NULL: al_plot_colour(group) */
    const char *title, *y_title;
    int bar_w; /* px per bar, its gap included (0 = from n) */
    int h; /* plot area height (0 = 220) */
    /* (n) or NULL: each bar's interval, drawn as a whisker with caps
     * over it (NaN: none) */
    const double *lo, *hi;
    int has_ref; /* a dashed reference line across at ref (a threshold) */
    double ref;
} al_bars;

/* A network plot (the drawing of a layered graph, not the head graph of
 * graph.h): boxes in rows, row 0 at the bottom, each row centred;
 * a box may have up to AL_NET_PORTS labelled input ports along its
 * lower edge. An edge runs straight from the top centre of its sender's
 * box to one port of its receiver (or to the receiver's lower edge's
 * centre). Faint edges are drawn first, 1 px and pale, then the others
 * thinnest first; boxes last, over the lines that cross them. The layout
 * is fixed by the counts (al_netplot_place), which is what a drawing of a
 * few rows of known nodes needs: no crossing minimisation. */
#define AL_NET_PORTS 4
typedef struct al_netnode {
    const char *label;
    int row; /* 0 = bottom */
    int n_ports; /* 0..AL_NET_PORTS */
    const char *port_label[AL_NET_PORTS]; /* one character reads best */
    uint32_t port_colour[AL_NET_PORTS];
    uint32_t fill; /* box colour */
    int dim; /* outline and label grey (not in the subgraph) */
} al_netnode;

typedef struct al_netedge {
    int from, to; /* node indices; to's row above from's */
    int port; /* receiver port, -1: the lower edge's centre */
    uint32_t colour;
    int width; /* px (0 = 1) */
    int faint; /* 1 px, colour mixed mostly with white, under the rest */
} al_netedge;

typedef struct al_netplot {
    const al_netnode *nodes;
    int n_nodes;
    const al_netedge *edges;
    int n_edges;
    const char *const *row_names; /* (n_rows) or NULL: written left of each row */
    int n_rows;
    int box_w, box_h; /* 0 = 60 x 30 */
} al_netplot;

/* Where graph g puts node i's box ([x, x+w) x [y, y+h)) and the anchor of
 * its port (port >= 0), lower edge centre (-1) or upper edge centre (-2),
 * relative to the panel's plot area (al_plot_geom mx, my). -1 if i or
 * port is out of range. */
int al_netplot_place(const al_netplot *g, int i, int port, int *x, int *y, int *w, int *h);
/* A faint edge's colour: c mixed with 80% white. */
uint32_t al_netplot_faint(uint32_t c);

/* Rows of tokens, one text cell each, in columns as wide as their widest
 * token (so a column lines up: the activating token of every context in
 * the middle one); a token with a value has its cell filled with the
 * scale's colour (text black or white by luminance), one without it is
 * plain text on the background; an empty slot (NULL) is left blank. What
 * feature dashboards show: contexts with the activating token marked. */
typedef struct al_tokrows {
    const char *const *tok; /* (rows, cols) row-major display strings; NULL: no token */
    const float *v; /* (rows, cols) values; NaN: not coloured */
    int rows, cols;
    const char *const *row_labels; /* (rows) or NULL: written left of each row */
    const char *title;
    const al_cscale *cs; /* required */
    int bar; /* draw its own colour bar */
    int max_cells; /* cut tokens longer than this (0 = 12) */
    int mark, mark_col; /* mark 1: column mark_col's tokens outlined in ink */
} al_tokrows;

enum { AL_PANEL_HEATMAP, AL_PANEL_LINES, AL_PANEL_BARS, AL_PANEL_NET, AL_PANEL_TOKENS };
typedef struct al_panel {
    int kind;
    al_hm hm;
    al_lines ln;
    al_bars bars;
    al_netplot net;
    al_tokrows tr;
} al_panel;

typedef struct al_legend_item {
    const char *label;
    uint32_t colour;
    int dash;
} al_legend_item;

#define AL_FIG_MAX_NOTES 6
typedef struct al_figure {
    const char *title; /* drawn at twice the label size */
    const char *notes[AL_FIG_MAX_NOTES]; /* lines under the title */
    int n_notes;
    const al_panel *panels;
    int n_panels, ncols; /* ncols 0 = all in one row */
    const al_cscale *shared_bar; /* one colour bar for all heatmaps */
    const al_legend_item *legend; /* one legend row under the notes */
    int n_legend;
} al_figure;

/* Where things landed, for tests (all in image pixels). */
typedef struct al_plot_geom {
    int x, y, w, h; /* the panel's box */
    int mx, my, mw, mh; /* matrix or plot area */
    int zero_y; /* bar charts: the zero line's pixel row */
    int cell_w, cell_h; /* heatmap cell size; token rows: cell_h the row pitch */
    int bar_x, bar_y, bar_w, bar_h; /* its colour bar (own or shared); 0 = none */
} al_plot_geom;

/* Draw f into a new RGB image (caller frees). geom (n_panels entries)
 * may be NULL. */
int al_plot_figure(const al_figure *f, al_image *out, al_plot_geom *geom, al_err *e);

/* File formats of al_plot_write. */
enum { AL_FIG_PNG, AL_FIG_SVG, AL_FIG_PDF };
/* "png", "svg", "pdf" -> AL_FIG_*; -1 for anything else (or NULL). */
int al_fig_format_parse(const char *s);
const char *al_fig_format_name(int fmt);
/* The format path's extension names (any case), or -1. */
int al_fig_format_of_path(const char *path);

/* Draw f and write it to path in format fmt, atomically (a temporary
 * name renamed; nothing is left on error). meta (n_meta, may be 0) is
 * the provenance: PNG text chunks; in SVG a <title> (key "Title", else
 * the figure's title) and a <desc> "key: value; ..."; in PDF the
 * document's Title, Creator (key "Software") and Subject. The size in px
 * (1 px = 1 pt in PDF) goes to *w, *h (either may be NULL). */
int al_plot_write(const al_figure *f, int fmt, const char *path, const al_png_text *meta,
                  int n_meta, int *w, int *h, al_err *e);

#endif
