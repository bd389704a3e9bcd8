/* test_plot.c -- colour maps, the bitmap font, heatmap and line-plot
 * rendering at known pixels, label thinning, and `attnlab heatmap` of
 * every kind on a tiny trained model. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/data.h"
#include "attnlab/font.h"
#include "attnlab/model.h"
#include "attnlab/plot.h"
#include "attnlab/png.h"
#include "attnlab/store.h"
#include "test.h"

/* Colours by hand from matplotlib's viridis table and ColorBrewer RdBu:
 * viridis[0] = (0.267004, 0.004874, 0.329415) -> (68, 1, 84);
 * viridis[255] = (0.993248, 0.906157, 0.143936) -> (253, 231, 37);
 * viridis[128] = (0.127568, 0.566949, 0.550556) -> (33, 145, 140). */
#define VIR_LO 0x440154u
#define VIR_HI 0xFDE725u
#define VIR_MID 0x21918Cu
#define DIV_NEG 0x053061u
#define DIV_POS 0x67001Fu

static int near_colour(uint32_t a, uint32_t b, int tol) {
    for (int s = 0; s < 24; s += 8)
        if (abs((int)((a >> s) & 255) - (int)((b >> s) & 255)) > tol) return 0;
    return 1;
}

TEST(plot_colour_maps) {
    CHECK(al_cmap_viridis(0) == VIR_LO);
    CHECK(al_cmap_viridis(1) == VIR_HI);
    CHECK(al_cmap_viridis(-3) == VIR_LO && al_cmap_viridis(7) == VIR_HI); /* clamped */
    /* t = 0.5 lies between entries 127 and 128: within 1 of entry 128 */
    CHECKF(near_colour(al_cmap_viridis(128 / 255.0), VIR_MID, 0), "%06x",
           al_cmap_viridis(128 / 255.0));
    CHECK(near_colour(al_cmap_viridis(0.5), VIR_MID, 1));
    CHECK(al_cmap_diverging(0) == 0xFFFFFF);
    CHECK(al_cmap_diverging(-1) == DIV_NEG);
    CHECK(al_cmap_diverging(1) == DIV_POS);
    /* blue below zero, red above */
    uint32_t n = al_cmap_diverging(-0.5), p = al_cmap_diverging(0.5);
    CHECK((n & 255) > (n >> 16) && (p >> 16) > (p & 255));
    /* a scale maps its ends to the ends of the map, NaN to grey */
    al_cscale cs = {.diverging = 0, .lo = 2, .hi = 4};
    CHECK(al_cscale_colour(&cs, 2) == VIR_LO && al_cscale_colour(&cs, 4) == VIR_HI);
    CHECK(al_cscale_colour(&cs, NAN) == AL_PLOT_MASKED);
    /* fitting a diverging scale makes it symmetric about 0 */
    float v[3] = {-1, 0.5f, NAN};
    al_cscale d = {.diverging = 1, .lo = NAN, .hi = NAN};
    al_cscale_fit(&d, v, 3);
    CHECK(d.lo == -1 && d.hi == 1);
    CHECK(al_cscale_colour(&d, 0) == 0xFFFFFF);
}

TEST(plot_font_cells_and_display) {
    CHECK(al_font_cells("abc") == 3);
    CHECK(al_font_cells("\xe2\x90\xa3the") == 4); /* ␣ is one cell */
    CHECK(al_font_cells("\x01") == 4); /* "\x01" */
    CHECK(al_font_cells("\xff") == 4); /* invalid UTF-8 -> \xff */
    CHECK(al_font_cells("\xc3\xa9") == 1); /* é: a box, one cell */
    CHECK(al_font_width("abc", 2) == 3 * AL_FONT_ADV * 2);
    char b[64];
    al_font_fit("abcdefgh", 5, b, sizeof b);
    CHECK(strcmp(b, "abcd\xe2\x80\xa6") == 0);
    al_font_fit("abc", 5, b, sizeof b);
    CHECK(strcmp(b, "abc") == 0);
    al_font_fit("\xe2\x90\xa3\xe2\x90\xa3\xe2\x90\xa3", 2, b, sizeof b); /* never cut inside ␣ */
    CHECK(strcmp(b, "\xe2\x90\xa3\xe2\x80\xa6") == 0);
    /* what is drawn: escapes spelled out, UTF-8 kept, one character a cell */
    CHECK(al_font_display("a\x01\xff\xc3\xa9", b, sizeof b) == 11);
    CHECK(strcmp(b, "a\\x01\\xffé") == 0);
    CHECK(al_font_display("abc", b, 3) == 3 && strcmp(b, "ab") == 0); /* cut, terminated */
}

/* A one-panel figure of a heatmap; returns its geometry. */
static void draw_one(const al_hm *hm, al_image *im, al_plot_geom *g) {
    al_panel p = {.kind = AL_PANEL_HEATMAP, .hm = *hm};
    al_figure f = {.title = "test", .panels = &p, .n_panels = 1};
    al_err e;
    CHECK_OK(al_plot_figure(&f, im, g, &e), &e);
}

static uint32_t cell_centre(const al_image *im, const al_plot_geom *g, int r, int c) {
    return al_image_get(im, g->mx + c * g->cell_w + g->cell_w / 2,
                        g->my + r * g->cell_h + g->cell_h / 2);
}

/* Non-background pixels in a rectangle. */
static int ink(const al_image *im, int x, int y, int w, int h) {
    int n = 0;
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++) n += al_image_get(im, i, j) != AL_PLOT_BG;
    return n;
}

/* Pixels of colour c in a rectangle. */
static int count_colour_in(const al_image *im, uint32_t c, int x, int y, int w, int h) {
    int n = 0;
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++) n += al_image_get(im, i, j) == c;
    return n;
}

TEST(plot_heatmap_known_cells) {
    /* min 0 at (0,0), max 1 at (1,2), 0.5 at (2,1), masked at (2,3) */
    float v[12] = {0, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 1, 0.25f, 0.25f, 0.5f, 0.25f, NAN};
    const char *rows[3] = {"\xe2\x90\xa3the", "cat", "sat"}, *cols[4] = {"a", "b", "c", "d"};
    al_cscale cs = {.lo = 0, .hi = 1, .label = "probability"};
    al_hm hm = {.v = v,
                .rows = 3,
                .cols = 4,
                .row_labels = rows,
                .col_labels = cols,
                .row_title = "rows",
                .col_title = "cols",
                .cs = &cs,
                .bar = 1,
                .cell = 20};
    al_image im, back;
    al_plot_geom g;
    al_err e;
    draw_one(&hm, &im, &g);
    CHECK(g.cell_w == 20 && g.cell_h == 20 && g.mw == 80 && g.mh == 60);
    /* through a PNG file and back */
    CHECK_OK(al_png_write(t_path("h.png"), &im, NULL, 0, &e), &e);
    CHECK_OK(al_png_read(t_path("h.png"), &back, NULL, &e), &e);
    CHECK(back.w == im.w && back.h == im.h);
    CHECK(cell_centre(&back, &g, 0, 0) == VIR_LO);
    CHECK(cell_centre(&back, &g, 1, 2) == VIR_HI);
    CHECK(near_colour(cell_centre(&back, &g, 2, 1), VIR_MID, 1));
    CHECK(cell_centre(&back, &g, 2, 3) == AL_PLOT_MASKED);
    /* every pixel of a cell has its colour (no gaps between cells) */
    int bad = 0;
    for (int y = 0; y < 20; y++)
        for (int x = 0; x < 20; x++)
            bad += al_image_get(&back, g.mx + 40 + x, g.my + 20 + y) != VIR_HI;
    CHECK(bad == 0);
    /* labels: ink left of each row, below each column, none inside the gaps */
    for (int r = 0; r < 3; r++) CHECK(ink(&back, g.mx - 60, g.my + r * 20 + 4, 54, 12) > 5);
    for (int c = 0; c < 4; c++) CHECK(ink(&back, g.mx + c * 20 + 5, g.my + g.mh + 6, 10, 12) > 3);
    /* the colour bar: max at the top, min at the bottom, its range written beside it */
    CHECK(g.bar_h >= 60 && g.bar_w > 0);
    CHECK(al_image_get(&back, g.bar_x + g.bar_w / 2, g.bar_y) == VIR_HI);
    CHECK(al_image_get(&back, g.bar_x + g.bar_w / 2, g.bar_y + g.bar_h - 1) == VIR_LO);
    CHECK(ink(&back, g.bar_x + g.bar_w + 4, g.bar_y - 4, 30, 10) > 3);
    CHECK(ink(&back, g.bar_x + g.bar_w + 4, g.bar_y + g.bar_h - 6, 30, 10) > 3);
    al_image_free(&im);
    al_image_free(&back);
}

TEST(plot_diverging_and_masked_triangle) {
    /* 6x6 lower triangle, signed; above the diagonal masked */
    float v[36];
    for (int t = 0; t < 6; t++)
        for (int s = 0; s < 6; s++) v[t * 6 + s] = s > t ? NAN : (float)(s - t % 3);
    v[0] = 0;
    v[5 * 6 + 0] = -4; /* the extremes */
    v[5 * 6 + 5] = 4;
    al_cscale cs = {.diverging = 1, .lo = NAN, .hi = NAN};
    al_cscale_fit(&cs, v, 36);
    al_hm hm = {.v = v, .rows = 6, .cols = 6, .cs = &cs, .bar = 1};
    al_image im;
    al_plot_geom g;
    draw_one(&hm, &im, &g);
    CHECK(g.cell_w >= 8);
    CHECK(cell_centre(&im, &g, 0, 0) == 0xFFFFFF); /* zero is white */
    CHECK(cell_centre(&im, &g, 5, 0) == DIV_NEG);
    CHECK(cell_centre(&im, &g, 5, 5) == DIV_POS);
    int grey = 0, n_masked = 0, wrong = 0;
    for (int t = 0; t < 6; t++)
        for (int s = 0; s < 6; s++) {
            uint32_t c = cell_centre(&im, &g, t, s);
            if (s > t)
                n_masked++, grey += c == AL_PLOT_MASKED;
            else
                wrong += c == AL_PLOT_MASKED;
        }
    CHECK(n_masked == 15 && grey == 15 && wrong == 0);
    /* zero sits in the middle of the bar (the middle pixel row is within
     * half a row of 0), the ends are the ends of the map */
    CHECK(near_colour(al_image_get(&im, g.bar_x + 3, g.bar_y + g.bar_h / 2), 0xFFFFFF, 4));
    CHECK(al_image_get(&im, g.bar_x + 3, g.bar_y) == DIV_POS);
    CHECK(al_image_get(&im, g.bar_x + 3, g.bar_y + g.bar_h - 1) == DIV_NEG);
    al_image_free(&im);
}

/* Runs of consecutive pixel rows with ink in a column band. */
static int max_ink_run(const al_image *im, int x, int w, int y0, int y1, int *runs) {
    int best = 0, cur = 0;
    *runs = 0;
    for (int y = y0; y < y1; y++) {
        if (ink(im, x, y, w, 1)) {
            if (!cur) (*runs)++;
            cur++;
            best = cur > best ? cur : best;
        } else {
            cur = 0;
        }
    }
    return best;
}

TEST(plot_labels_thinned_never_overlap) {
    enum { N = 90 };
    float v[N * N];
    const char *lab[N];
    char buf[N][16];
    for (int i = 0; i < N * N; i++) v[i] = (float)(i % 7) / 7;
    for (int i = 0; i < N; i++) {
        snprintf(buf[i], sizeof buf[i], "tok%d", i);
        lab[i] = buf[i];
    }
    al_cscale cs = {.lo = 0, .hi = 1};
    al_hm hm = {.v = v,
                .rows = N,
                .cols = N,
                .row_labels = lab,
                .col_labels = lab,
                .cs = &cs,
                .bar = 1,
                .cell = 8};
    al_image im;
    al_plot_geom g;
    draw_one(&hm, &im, &g);
    CHECK(g.cell_h == 8);
    /* row labels: each label is at most one glyph tall, and separated
     * from the next by blank rows; thinned to every 2nd row (16 px pitch) */
    int runs, tallest = max_ink_run(&im, g.mx - 40, 30, g.my - 4, g.my + g.mh + 4, &runs);
    CHECKF(tallest <= AL_FONT_GLYPH_H, "row labels merge: ink run of %d px", tallest);
    CHECKF(runs == N / 2, "%d row labels drawn, want %d", runs, N / 2);
    al_image_free(&im);
    /* with room (12 px cells) every row is labelled */
    hm.cell = 12;
    hm.rows = hm.cols = 30;
    draw_one(&hm, &im, &g);
    tallest = max_ink_run(&im, g.mx - 40, 30, g.my - 4, g.my + g.mh + 4, &runs);
    CHECK(tallest <= AL_FONT_GLYPH_H && runs == 30);
    al_image_free(&im);
}

/* Lines are antialiased: colour c (within 48 per channel) at (x,y) or a
 * pixel next to it. */
static int near_px(const al_image *im, int x, int y, uint32_t c) {
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            uint32_t p = al_image_get(im, x + dx, y + dy);
            int ok = 1;
            for (int sh = 0; sh < 24; sh += 8)
                ok &= abs((int)(p >> sh & 255) - (int)(c >> sh & 255)) <= 48;
            if (ok) return 1;
        }
    return 0;
}

TEST(plot_lines_known_points) {
    double x[2] = {0, 10}, y[2] = {0, 1}, y2[2] = {1, 1};
    al_series s[2] = {{x, y, 2, "rising", 0xD62728, 1, 0, 0, 0, NULL},
                      {x, y2, 2, "flat", 0x2CA02C, 1, 0, 0, 0, NULL}};
    al_panel p = {.kind = AL_PANEL_LINES,
                  .ln = {.s = s,
                         .n = 2,
                         .title = "t",
                         .x_title = "x",
                         .y_title = "y",
                         .w = 200,
                         .h = 100,
                         .x_lo = 0,
                         .x_hi = 10,
                         .y_lo = 0,
                         .y_hi = 1,
                         .hline = 0.5,
                         .hline_label = "half",
                         .legend = 1}};
    al_figure f = {.title = "lines", .panels = &p, .n_panels = 1};
    al_image im;
    al_plot_geom g;
    al_err e;
    CHECK_OK(al_plot_figure(&f, &im, &g, &e), &e);
    CHECK(g.mw == 200 && g.mh == 100);
    /* (0,0) at the bottom-left corner, (10,1) at the top-right; the first
     * series is drawn on top where they meet */
    CHECK(near_px(&im, g.mx, g.my + g.mh - 1, 0xD62728));
    CHECK(near_px(&im, g.mx + g.mw - 1, g.my, 0xD62728));
    CHECK(al_image_get(&im, g.mx + 1, g.my) == 0x2CA02C);
    /* (5, 0.5) on the rising line: middle of the area */
    CHECK(near_px(&im, g.mx + 100, g.my + 50, 0xD62728));
    /* the legend sits right of the plot area */
    CHECK(ink(&im, g.mx + g.mw + 10, g.my, 80, 30) > 20);
    al_image_free(&im);
    /* reversed x: (0,0) now at the bottom-right */
    p.ln.x_reverse = 1;
    CHECK_OK(al_plot_figure(&f, &im, &g, &e), &e);
    CHECK(near_px(&im, g.mx + g.mw - 1, g.my + g.mh - 1, 0xD62728));
    CHECK(near_px(&im, g.mx, g.my, 0xD62728));
    al_image_free(&im);
}

/* Extent of colour c in the image: columns x0..x1, rows y0..y1 (-1 if absent). */
static void extent(const al_image *im, uint32_t c, int *x0, int *x1, int *y0, int *y1) {
    *x0 = *y0 = 1 << 30;
    *x1 = *y1 = -1;
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < im->w; x++)
            if (al_image_get(im, x, y) == c) {
                *x0 = x < *x0 ? x : *x0, *x1 = x > *x1 ? x : *x1;
                *y0 = y < *y0 ? y : *y0, *y1 = y > *y1 ? y : *y1;
            }
    if (*x1 < 0) *x0 = *y0 = -1;
}

TEST(plot_bars_signed_groups) {
    /* one colour per bar, so each bar can be found; heights in value units */
    double v[5] = {1.0, -0.5, 0.25, 2.0, NAN};
    int grp[5] = {0, 1, 1, 2, 2};
    uint32_t col[5] = {0xAA0000, 0x00AA00, 0x0000AA, 0xAAAA00, 0x00AAAA};
    const char *names[3] = {"first", "second", "third"}, *labels[5] = {"a", NULL, "c", "d", "e"};
    al_panel p = {.kind = AL_PANEL_BARS,
                  .bars = {.v = v,
                           .n = 5,
                           .group = grp,
                           .group_names = names,
                           .n_groups = 3,
                           .labels = labels,
                           .colours = col,
                           .title = "bars",
                           .y_title = "value",
                           .bar_w = 10,
                           .h = 150}};
    al_figure f = {.title = "bars", .panels = &p, .n_panels = 1};
    al_image im;
    al_plot_geom g;
    al_err e;
    CHECK_OK(al_plot_figure(&f, &im, &g, &e), &e);
    CHECK(g.mh == 150 && g.zero_y > g.my && g.zero_y < g.my + g.mh);
    int x0[5], x1[5], y0[5], y1[5];
    for (int i = 0; i < 5; i++) extent(&im, col[i], &x0[i], &x1[i], &y0[i], &y1[i]);
    /* each bar is 9 px wide (1 px gap), left to right, inside the plot area */
    for (int i = 0; i < 4; i++)
        CHECKF(x1[i] - x0[i] == 8, "bar %d is %d px wide", i, x1[i] - x0[i] + 1);
    CHECK(x0[0] > g.mx && x1[3] < g.mx + g.mw && x0[0] < x0[1] && x0[1] < x0[2] && x0[2] < x0[3]);
    CHECK(x0[4] == -1); /* NaN: no bar */
    /* bars in one group touch but for the gap; groups lie further apart */
    CHECK(x0[2] - x0[1] == 10 && x0[1] - x1[0] > 10 && x0[3] - x1[2] > 10);
    /* positive bars rise from the zero line, negative ones hang below; the
     * zero line is drawn over their ends */
    CHECK(y1[0] == g.zero_y - 1 && y1[3] == g.zero_y - 1 && y0[1] == g.zero_y + 1);
    int h0 = g.zero_y - y0[0], h3 = g.zero_y - y0[3], h1 = y1[1] - g.zero_y;
    CHECKF(abs(h3 - 2 * h0) <= 1 && abs(h0 - 2 * h1) <= 1, "heights %d %d %d", h0, h1, h3);
    /* the tallest bar stays inside the frame */
    CHECK(y0[3] > g.my);
    /* labels under labelled bars only; group names below them */
    int below = g.my + g.mh + 6; /* labels: one glyph, 6 px tall when turned */
    CHECK(ink(&im, x0[0], below, 9, 8) > 3 && ink(&im, x0[2], below, 9, 8) > 3);
    CHECK(ink(&im, x0[1], below, 9, 8) == 0);
    CHECK(ink(&im, x0[1] - 10, below + 10, 40, 12) > 10);
    /* a dashed separator between the groups: one column half inked */
    int best = 0;
    for (int x = x1[0] + 1; x < x0[1]; x++) {
        int n = 0;
        for (int y = g.my + 1; y < g.zero_y - 1; y++) n += al_image_get(&im, x, y) != AL_PLOT_BG;
        best = n > best ? n : best;
    }
    CHECKF(best > (g.zero_y - g.my) / 3, "separator: %d px", best);
    CHECK_OK(al_png_write(t_path("bars.png"), &im, NULL, 0, &e), &e);
    al_image_free(&im);
    /* all bars of one sign: zero is the bottom of the plot area */
    v[1] = 0.5;
    CHECK_OK(al_plot_figure(&f, &im, &g, &e), &e);
    CHECK(g.zero_y == g.my + g.mh - 1);
    al_image_free(&im);
    /* whiskers: bar 3's interval [1, 3] reaches above every bar (the
     * range grows to hold it); drawn in ink at the bar's middle column,
     * from the height of 1 to that of 3, capped at both ends */
    double lo[5] = {NAN, NAN, NAN, 1.0, NAN}, hi[5] = {NAN, NAN, NAN, 3.0, NAN};
    p.bars.lo = lo, p.bars.hi = hi;
    CHECK_OK(al_plot_figure(&f, &im, &g, &e), &e);
    extent(&im, col[3], &x0[3], &x1[3], &y0[3], &y1[3]);
    int cx = (x0[3] + x1[3]) / 2, top = -1, bot = -1, hz = g.zero_y;
    uint32_t inkc = al_image_get(&im, g.mx + 1, hz); /* the zero line's */
    for (int y = g.my; y < hz; y++)
        if (al_image_get(&im, cx, y) == inkc) {
            if (top < 0) top = y;
            bot = y;
        }
    /* value 2 is the bar's top; 3 is half again as far above zero */
    int h2 = hz - y0[3];
    CHECKF(top > g.my && abs((hz - top) - 3 * h2 / 2) <= 2, "whisker top %d, bar top %d, zero %d",
           top, y0[3], hz);
    CHECKF(ink(&im, cx - 2, top, 5, 1) >= 4, "no cap at the whisker's top (row %d)", top);
    CHECKF(abs((hz - bot) - h2 / 2) <= 2, "whisker bottom %d, bar top %d, zero %d", bot, y0[3], hz);
    CHECK_OK(al_png_write(t_path("whiskers.png"), &im, NULL, 0, &e), &e);
    al_image_free(&im);
}

TEST(plot_scatter_points) {
    /* circles and triangles as points only, and a dashed y = x line */
    double xa[2] = {1, 3}, ya[2] = {1, 3}, xb[1] = {3}, yb[1] = {1}, xd[2] = {0, 4};
    al_series s[3] = {
        {xa, ya, 2, "circles", 0xD62728, 0, AL_MARK_CIRCLE, 0, 1, NULL},
        {xb, yb, 1, "triangles", 0x1F77B4, 0, AL_MARK_TRIANGLE, 0, 1, NULL},
        {xd, xd, 2, "y = x", 0x606060, 1, 0, 4, 0, NULL},
    };
    al_panel p = {.kind = AL_PANEL_LINES,
                  .ln = {.s = s,
                         .n = 3,
                         .x_title = "x",
                         .y_title = "y",
                         .w = 201,
                         .h = 201,
                         .x_lo = 0,
                         .x_hi = 4,
                         .y_lo = 0,
                         .y_hi = 4,
                         .hline = NAN,
                         .legend = 1}};
    al_figure f = {.title = "scatter", .panels = &p, .n_panels = 1};
    al_image im;
    al_plot_geom g;
    al_err e;
    CHECK_OK(al_plot_figure(&f, &im, &g, &e), &e);
    /* (x, y) -> (mx + 50x, my + 200 - 50y) */
    CHECK(al_image_get(&im, g.mx + 50, g.my + 150) == 0xD62728);
    CHECK(al_image_get(&im, g.mx + 150, g.my + 50) == 0xD62728);
    CHECK(al_image_get(&im, g.mx + 150, g.my + 150) == 0x1F77B4);
    /* a circle's corner is not inked, a square's would be */
    CHECK(al_image_get(&im, g.mx + 47, g.my + 147) != 0xD62728);
    /* a triangle: wide at the bottom, a point at the top */
    CHECK(al_image_get(&im, g.mx + 147, g.my + 153) == 0x1F77B4);
    CHECK(al_image_get(&im, g.mx + 147, g.my + 147) != 0x1F77B4);
    /* points are not joined: halfway between the two circles is the y = x line's grey or blank */
    CHECK(al_image_get(&im, g.mx + 100, g.my + 100) != 0xD62728);
    int red = 0;
    for (int k = 60; k < 140; k++) red += al_image_get(&im, g.mx + k, g.my + 200 - k) == 0xD62728;
    CHECK(red == 0);
    /* the legend shows each marker */
    CHECK(count_colour_in(&im, 0xD62728, g.mx + g.mw, g.my, 60, 40) > 10);
    CHECK(count_colour_in(&im, 0x1F77B4, g.mx + g.mw, g.my, 60, 40) > 5);
    al_image_free(&im);
}

/* ---------------------------------------------------------------- CLI */

/* Run heatmap, check the PNG decodes to the size it reported and carries
 * the provenance chunks; returns the decoded image (caller frees). */
static int heatmap(const char *args, const char *name, al_image *im) {
    char out[1024];
    snprintf(out, sizeof out, "%s", t_path(name));
    int rc = t_sh("%s heatmap --model %s --out %s %s > %s 2> %s", t_bin(), t_path("m"), out, args,
                  t_path("hm.out"), t_path("hm.err"));
    if (rc != 0) {
        char *err = t_slurp(t_path("hm.err"));
        t_fail(__FILE__, __LINE__, "heatmap %s failed (%d): %s", args, rc, err ? err : "");
        free(err);
        return -1;
    }
    int w = 0, h = 0;
    t_reported_size(t_path("hm.out"), &w, &h);
    al_err e;
    al_png_meta meta;
    CHECK_OK(al_png_read(out, im, &meta, &e), &e);
    CHECKF(im->w == w && im->h == h, "%s: decoded %dx%d, reported %dx%d", name, im->w, im->h, w, h);
    CHECK(al_png_meta_get(&meta, "model") &&
          strcmp(al_png_meta_get(&meta, "model"), t_path("m")) == 0);
    CHECK(al_png_meta_get(&meta, "what") && al_png_meta_get(&meta, "head"));
    CHECK(al_png_meta_get(&meta, "Software") &&
          strstr(al_png_meta_get(&meta, "Software"), AL_VERSION));
    al_png_meta_free(&meta);
    return 0;
}

static int count_colour(const al_image *im, uint32_t c) {
    int n = 0;
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < im->w; x++) n += al_image_get(im, x, y) == c;
    return n;
}

/* Ablation, pruning and training rows for model m, written with the
 * store API as the ablate, prune and train commands do. Singles: Δ(0.0) = +1,
 * Δ(1.3) = -1, others 0; pair interactions 0 except (0.0, 1.0) = 0.5. So
 * the picture has two cells at the red end (one per panel: each has its
 * own scale) and one at the blue end. */
static void fill_db(const char *db) {
    al_err e;
    al_store *st;
    al_model m;
    int64_t mid, run;
    CHECK_OK(al_ckpt_load(t_path("m"), &m, NULL, &e), &e);
    CHECK_OK(al_store_open(db, &st, &e), &e);
    CHECK_OK(al_store_model(st, t_path("m"), NULL, &m, NULL, &mid, &e), &e);
    CHECK_OK(al_store_run_begin(st, "ablate", "{}", mid, &run, &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    char heads[32];
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 4; h++) {
            snprintf(heads, sizeof heads, "%d.%d", l, h);
            double d = (l == 0 && h == 0) ? 1 : (l == 1 && h == 3) ? -1 : 0;
            al_ablation_row r = {"mean", "single", heads, 1, 3 + d, d, d, d, NAN};
            CHECK_OK(al_store_put_ablation(st, run, mid, &r, NULL, &e), &e);
            for (int h2 = 0; l == 0 && h2 < 4; h2++) {
                snprintf(heads, sizeof heads, "0.%d,1.%d", h, h2);
                al_ablation_row q = {"mean", "pair", heads, 2, 3, 0, 0, 0, h + h2 == 0 ? 0.5 : 0};
                CHECK_OK(al_store_put_ablation(st, run, mid, &q, NULL, &e), &e);
            }
        }
    CHECK_OK(al_store_run_finish(st, run, &e), &e);
    const char *methods[3] = {"ablation", "gradient", "random"};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(al_store_run_begin(st, "prune", "{}", mid, &run, &e), &e);
        CHECK_OK(al_store_tx_begin(st, &e), &e);
        for (int s = 0; s <= 8; s++) {
            al_pruning_row r = {methods[k], s,   s ? s % 2 : -1,        s ? s / 2 : -1,
                                8 - s,      0.1, 3 + 0.1 * s * (k + 1), 0.1 * s,
                                ""};
            CHECK_OK(al_store_put_pruning_step(st, run, mid, &r, &e), &e);
        }
        CHECK_OK(al_store_run_finish(st, run, &e), &e);
    }
    CHECK_OK(al_store_run_begin(st, "train", "{}", mid, &run, &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    for (long s = 0; s <= 100; s += 10) {
        al_train_log_row r = {s,        s * 100.0, 4 - s / 50.0, 4.1 - s / 50.0, 0, 1e-3,
                              s / 10.0, NAN,       NAN};
        CHECK_OK(al_store_put_train_log(st, run, &r, &e), &e);
        for (int i = 0; i < 8; i++)
            CHECK_OK(al_store_put_train_head_score(st, run, s, i / 4, i % 4, "induction",
                                                   i == 5 ? s / 120.0 : 0.02 * i, &e),
                     &e);
    }
    CHECK_OK(al_store_run_finish(st, run, &e), &e);
    al_store_close(st);
    al_model_free(&m);
}

TEST(plot_cli_heatmap_every_kind) {
    t_phrase_corpus(t_path("c.bin"), 20000);
    CHECK(t_sh("%s train --data %s --out %s --steps 6 --n-layers 2 --d-model 32 --n-heads 4 "
               "--d-head 8 --n-ctx 32 --batch 4 --eval-every 0 --eval-batches 1 --threads 2 "
               "--warmup 2 2>/dev/null >/dev/null",
               t_bin(), t_path("c.bin"), t_path("m")) == 0);
    al_image im;
    /* one head: a square matrix of T = 1 + 9 prompt bytes, cells >= 8 px */
    if (heatmap("--what attention --layer 1 --head 2 --prompt 'the cat.\x01'", "a.png", &im) == 0) {
        CHECK(count_colour(&im, AL_PLOT_MASKED) >= 45 * 8 * 8); /* 10*9/2 masked cells */
        al_image_free(&im);
    }
    const char *kinds[][2] = {
        {"--what attention --layer 0 --prompt 'Bamurik saw Bamurik'", "grid.png"},
        {"--what attention --repeat 8", "rep.png"},
        {"--what qk-pos --layer 0 --head 1 --n-pos 16", "pos.png"},
        {"--what qk --layer 1 --head 0 --tokens '\xe2\x90\xa3,t,a,#10'", "qk.png"},
        {"--what ov --layer 0 --head 3 --top-n 12", "ov.png"},
        {"--what composition", "comp.png"},
        {"--what spectrum", "spec.png"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (heatmap(kinds[i][0], kinds[i][1], &im) == 0) al_image_free(&im);
    /* pictures from the database */
    fill_db(t_path("r.db"));
    char a[1200];
    snprintf(a, sizeof a, "--what ablation --db %s", t_path("r.db"));
    if (heatmap(a, "abl.png", &im) == 0) {
        /* the extremes are the ends of the scales: darkest red and blue
         * (34 px cells less the printed value; the colour bars add a few px) */
        int red = count_colour(&im, DIV_POS), blue = count_colour(&im, DIV_NEG);
        CHECKF(red > 2 * 900 && red < 3 * 1156, "%d dark red px", red);
        CHECKF(blue > 900 && blue < 2 * 1156, "%d dark blue px", blue);
        al_image_free(&im);
    }
    snprintf(a, sizeof a, "--what pruning --db %s", t_path("r.db"));
    if (heatmap(a, "prune.png", &im) == 0) { /* one line per method */
        CHECK(count_colour(&im, 0x1F77B4) > 100 && count_colour(&im, 0xFF7F0E) > 100 &&
              count_colour(&im, 0x7F7F7F) > 50);
        al_image_free(&im);
    }
    snprintf(a, sizeof a, "--what training --db %s", t_path("r.db"));
    if (heatmap(a, "train.png", &im) == 0) {
        /* 8 heads: the best 6 in palette colours 0..5, the rest grey */
        CHECK(count_colour(&im, al_plot_colour(2)) > 100 &&
              count_colour(&im, al_plot_colour(5)) > 100);
        CHECK(count_colour(&im, al_plot_colour(6)) == 0);
        al_image_free(&im);
    }
    /* bad input: one line on stderr, exit 1 (2 for usage), no file */
    CHECK(t_sh("%s heatmap --model %s --what qk --out %s 2>/dev/null", t_bin(), t_path("m"),
               t_path("x.png")) == 1); /* no --head */
    CHECK(t_sh("%s heatmap --model %s --what bogus --out %s 2>/dev/null", t_bin(), t_path("m"),
               t_path("x.png")) == 1);
    CHECK(t_sh("%s heatmap --model %s --what ablation --out %s 2>/dev/null", t_bin(), t_path("m"),
               t_path("x.png")) == 1); /* needs --db */
    CHECK(t_sh("%s heatmap --model %s --what attention --layer 5 --prompt x --out %s 2>/dev/null",
               t_bin(), t_path("m"), t_path("x.png")) == 1);
    CHECK(t_sh("%s heatmap --model %s --what qk --head 0 --tokens 'Bamurik' --out %s 2>%s", t_bin(),
               t_path("m"), t_path("x.png"), t_path("x.err")) == 1);
    char *err = t_slurp(t_path("x.err"));
    CHECK(err && strstr(err, "Bamurik") && strstr(err, "not one"));
    free(err);
    CHECK(t_sh("%s heatmap --model %s --out %s 2>/dev/null", t_bin(), t_path("m"),
               t_path("x.png")) == 2);
    CHECK(!al_file_exists(t_path("x.png")));
}

/* al_store_query, which the pictures read through: text parameters bound
 * (NULL as SQL NULL), rows as text and numbers, NULL as NaN, a callback
 * error stops the query, writes are refused. */
typedef struct qrows {
    int n;
    double sum;
    int nan_seen;
    char first[64];
} qrows;

static int collect(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    qrows *q = ctx;
    (void)e;
    if (nc != 2) return al_errf(e, "want 2 columns, got %d", nc);
    if (!q->n) snprintf(q->first, sizeof q->first, "%s", t[0] ? t[0] : "(null)");
    q->n++;
    if (isnan(x[1]))
        q->nan_seen++;
    else
        q->sum += x[1];
    return 0;
}

static int stop_at_two(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    (void)nc, (void)t, (void)x;
    return ++*(int *)ctx == 2 ? al_errf(e, "stop") : 0;
}

TEST(plot_store_query) {
    al_store *st;
    al_err e;
    int64_t run;
    CHECK_OK(al_store_open(t_path("q.db"), &st, &e), &e);
    CHECK_OK(al_store_run_begin(st, "train", "{}", 0, &run, &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    for (long s = 1; s <= 4; s++) {
        al_train_log_row r = {s, 0, 1.0 * s, s == 3 ? NAN : 0.5 * s, 0, 0, 0, NAN, NAN};
        CHECK_OK(al_store_put_train_log(st, run, &r, &e), &e);
    }
    CHECK_OK(al_store_run_finish(st, run, &e), &e);
    char rs[16];
    snprintf(rs, sizeof rs, "%lld", (long long)run);
    const char *params[2] = {rs, "2"};
    qrows q = {0};
    CHECK_OK(al_store_query(st,
                            "SELECT step, val_loss FROM train_log WHERE run_id = ?1 AND step >= ?2 "
                            "ORDER BY step",
                            params, 2, collect, &q, &e),
             &e);
    /* steps 2, 3, 4: val 1.0, NULL, 2.0 */
    CHECK(q.n == 3 && q.nan_seen == 1 && strcmp(q.first, "2") == 0);
    CHECK_NEAR(q.sum, 3.0, 1e-12);
    const char *null_param[2] = {rs, NULL}; /* step >= NULL matches nothing */
    q = (qrows){0};
    CHECK_OK(al_store_query(st,
                            "SELECT step, val_loss FROM train_log WHERE run_id = ?1 AND step >= ?2",
                            null_param, 2, collect, &q, &e),
             &e);
    CHECK(q.n == 0);
    int k = 0;
    CHECK(al_store_query(st, "SELECT step, val_loss FROM train_log", NULL, 0, stop_at_two, &k,
                         &e) == -1);
    CHECK(k == 2 && strcmp(e.msg, "stop") == 0);
    CHECK(al_store_query(st, "DELETE FROM train_log", NULL, 0, collect, &q, &e) == -1);
    CHECK(strstr(e.msg, "read-only") != NULL);
    al_store_close(st);
}
