/* plot.c -- figures (see plot.h): the layout of a figure's panels, its
 * title, notes, legend and shared colour bar, and its rendering as PNG,
 * SVG or PDF.
 *
 * Every panel is first measured (where its matrix or plot area goes, how
 * wide its labels are), then the figure places panels on a grid whose
 * column widths and row heights are the largest of their panels, and
 * only then is anything drawn. Sizes derive from text widths in cells
 * of a monospace font (font.h), so nothing is clipped and nothing
 * overlaps. Drawing goes through the canvas (plot_canvas.c) onto a cairo
 * surface: PNG, SVG and PDF from this one code.
 *
 * The backend's other files, sharing plot_internal.h: plot_colour.c
 * (colour maps and scales), plot_canvas.c (the canvas, colour bars), one
 * per kind of panel (plot_heatmap.c with token rows, plot_lines.c,
 * plot_bars.c, plot_graph.c) and plot_output.c (a drawn surface as PNG
 * pixels, an SVG or a PDF). */
#define _POSIX_C_SOURCE 200809L /* strndup */
#include "attnlab/plot.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include "plot_internal.h"

#define MARGIN 14
#define GAP_X 28
#define GAP_Y 20

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
    int head =
        MARGIN + (f->title ? 2 * LINE + 4 : 0) + n_lines * LINE + (f->n_legend ? LINE + 6 : 0) + 10;
    int H = head + imax(grid_h, bar_h ? pl[first_i].hm.my + bar_h + 8 : 0) + MARGIN;
    int W = content_w + 2 * MARGIN;
    if (W > AL_IMAGE_MAX_SIDE || H > AL_IMAGE_MAX_SIDE) {
        al_errf(e, "picture size %d x %d is out of range (1..%d per side)", W, H,
                AL_IMAGE_MAX_SIDE);
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
        al_errf(e, "cannot draw a %d x %d picture: %s", W, H,
                cairo_status_to_string(cairo_status(cr)));
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
    if (fmt == AL_FIG_PNG)
        cairo_surface_flush(sf);
    else
        cairo_surface_finish(sf);
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
