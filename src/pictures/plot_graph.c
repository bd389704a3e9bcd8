/* plot_graph.c -- layered graphs: rows of boxes (a circuit's heads, layer
 * by layer), edges from a box to a port of another, faint edges under
 * strong ones. See plot.h (al_netplot). */
#include "plot_internal.h"

#include <string.h>

#define GRAPH_COL_GAP 14
#define GRAPH_ROW_GAP 96
#define GRAPH_PORT_TICK 4 /* a port's coloured tick below its box */

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

void graph_measure(const al_netplot *g, graph_lay *L) {
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
    if (port == -2)
        *x = bx + bw / 2, *y = by;
    else if (port == -1)
        *x = bx + bw / 2, *y = by + bh + GRAPH_PORT_TICK - 1;
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

void graph_draw(cv *im, const al_netplot *g, const graph_lay *L, int x, int y, al_plot_geom *geo) {
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
