/* test_vector.c -- figures as SVG and PDF: the same drawing as
 * the PNG, with real text. SVG must parse as XML and hold its labels as
 * <text>; PDF must render with pdftoppm to a non-blank page of the
 * figure's size, and pdftotext must find its title; a heatmap cell has
 * the colour map's colour in PNG, SVG and PDF alike. The PDF checks skip
 * where poppler-utils is missing, the XML ones where python3 is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/experiment.h"
#include "attnlab/plot.h"
#include "attnlab/png.h"
#include "attnlab/util.h"
#include "picfix.h"
#include "test.h"

static int have(const char *prog) { return t_sh("command -v %s >/dev/null 2>&1", prog) == 0; }

static void need_python(void) {
    if (!have("python3")) t_skip("python3 not installed (the SVG is parsed with xml.etree)");
}

static void need_poppler(void) {
    if (!have("pdftoppm") || !have("pdftotext"))
        t_skip("pdftoppm/pdftotext not installed (poppler-utils: sh scripts/deps.sh test)");
}

/* The <title>, <desc> and <text> contents of an SVG, one a line, parsed
 * with python3's xml.etree (so the file is well-formed XML); NULL if it
 * does not parse. */
static char *svg_texts(const char *svg) {
    const char *out = t_path("svg-texts.txt");
    int rc = t_sh("python3 -c 'import sys, xml.etree.ElementTree as E\n"
                  "ns = \"{http://www.w3.org/2000/svg}\"\n"
                  "t = E.parse(sys.argv[1]).getroot()\n"
                  "assert t.tag == ns + \"svg\"\n"
                  "for k in (\"title\", \"desc\", \"text\"):\n"
                  "    for x in t.iter(ns + k): print(x.text or \"\")' %s > %s 2> %s",
                  svg, out, t_path("py.err"));
    return rc == 0 ? t_slurp(out) : NULL;
}

/* pdftoppm at 72 dpi (1 pt = 1 px, so the page is the figure's size)
 * into an image; 0 on success. */
static int pdf_render(const char *pdf, al_image *im) {
    t_pbuf base = t_pcopy("page");
    if (t_sh("pdftoppm -png -r 72 -singlefile %s %s 2> %s", pdf, base.s, t_path("ppm.err")) != 0)
        return -1;
    char png[1100];
    snprintf(png, sizeof png, "%s.png", base.s);
    al_err e;
    if (al_png_read(png, im, NULL, &e)) {
        CHECKF(0, "%s", e.msg);
        return -1;
    }
    return 0;
}

static int non_white(const al_image *im) {
    int n = 0;
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < im->w; x++) n += al_image_get(im, x, y) != 0xFFFFFF;
    return n;
}

/* pdftotext of the file (malloc'd) or NULL. */
static char *pdf_text(const char *pdf) {
    const char *out = t_path("pdf.txt");
    return t_sh("pdftotext %s %s", pdf, out) == 0 ? t_slurp(out) : NULL;
}

/* `attnlab heatmap --model m ARGS --out NAME`: 0 and the size printed. */
static int heatmap(const char *m, const char *args, const char *name, int *w, int *h) {
    int rc = t_sh("%s heatmap --model %s %s --out %s > %s 2> %s", t_bin(), m, args, t_path(name),
                  t_path("hm.out"), t_path("hm.err"));
    if (rc == 0) t_reported_size(t_path("hm.out"), w, h);
    return rc;
}

TEST(vector_heatmap_svg_pdf_cli) {
    need_python();
    need_poppler();
    t_pbuf m = t_pcopy("m");
    make_model(m.s, 2, 4);
    const char *args = "--what qk-pos --layer 0 --head 1 --n-pos 12";
    int pw = 0, ph = 0, sw = 0, sh = 0, dw = 0, dh = 0;
    CHECK(heatmap(m.s, args, "qk.png", &pw, &ph) == 0);
    CHECK(heatmap(m.s, args, "qk.svg", &sw, &sh) == 0);
    CHECK(heatmap(m.s, args, "qk.pdf", &dw, &dh) == 0);
    CHECKF(sw == pw && sh == ph && dw == pw && dh == ph, "png %dx%d svg %dx%d pdf %dx%d", pw, ph,
           sw, sh, dw, dh);
    /* SVG: XML, the title and both axis titles as text, the provenance */
    char *txt = svg_texts(t_path("qk.svg"));
    CHECKF(txt, "qk.svg is not XML: %s", t_slurp(t_path("py.err")));
    CHECK(txt && strstr(txt, "positional QK, head 0.1"));
    CHECK(txt && strstr(txt, "source (key) position") &&
          strstr(txt, "destination (query) position"));
    CHECK(txt && strstr(txt, "what: qk-pos") && strstr(txt, "Software: attnlab"));
    free(txt);
    char *svg = t_slurp(t_path("qk.svg"));
    CHECK(svg && strstr(svg, "<text ") && !strstr(svg, "<symbol")); /* text, not glyph outlines */
    free(svg);
    /* PDF: a page of the figure's size with ink on it, and searchable text */
    al_image im;
    if (pdf_render(t_path("qk.pdf"), &im) == 0) {
        CHECKF(abs(im.w - pw) <= 1 && abs(im.h - ph) <= 1, "page %dx%d, figure %dx%d", im.w, im.h,
               pw, ph);
        int ink = non_white(&im);
        CHECKF(ink > im.w * im.h / 20, "%d of %d pixels inked", ink, im.w * im.h);
        al_image_free(&im);
    } else {
        CHECKF(0, "pdftoppm failed: %s", t_slurp(t_path("ppm.err")));
    }
    char *pt = pdf_text(t_path("qk.pdf"));
    CHECK(pt && strstr(pt, "positional QK, head 0.1") && strstr(pt, "source (key) position"));
    free(pt);
    CHECK(t_sh("pdfinfo %s | grep -q 'what: qk-pos'", t_path("qk.pdf")) == 0 || !have("pdfinfo"));
    /* a line chart: the spectrum, one panel per head */
    CHECK(heatmap(m.s, "--what spectrum", "spectrum.svg", &sw, &sh) == 0);
    txt = svg_texts(t_path("spectrum.svg"));
    CHECK(txt && strstr(txt, "singular values of each head") && strstr(txt, "W_QK = W_Q W_K^T"));
    free(txt);
    CHECK(heatmap(m.s, "--what spectrum --format pdf", "spectrum.out", &sw, &sh) == 0);
    pt = pdf_text(t_path("spectrum.out")); /* --format wins over a name with no known extension */
    CHECK(pt && strstr(pt, "singular values of each head"));
    free(pt);
}

/* A 2 x 2 heatmap of known values, 40 px cells. */
static const float CELLS[4] = {0, 1, 0.5f, NAN};

static al_figure cell_figure(al_panel *p, al_cscale *cs) {
    *cs = (al_cscale){.lo = 0, .hi = 1, .label = "value"};
    *p = (al_panel){.kind = AL_PANEL_HEATMAP,
                    .hm = {.v = CELLS,
                           .rows = 2,
                           .cols = 2,
                           .cell = 40,
                           .cs = cs,
                           .bar = 1,
                           .title = "cells",
                           .row_title = "row",
                           .col_title = "column"}};
    return (al_figure){.title = "known cells", .panels = p, .n_panels = 1};
}

/* cairo's SVG writes a fill as rgb(R%,G%,B%) with 6 decimals. */
static void svg_rgb(uint32_t c, char *buf, size_t cap) {
    snprintf(buf, cap, "fill:rgb(%f%%,%f%%,%f%%)", (c >> 16 & 255) * 100 / 255.0,
             (c >> 8 & 255) * 100 / 255.0, (c & 255) * 100 / 255.0);
}

static int close_to(uint32_t a, uint32_t b, int tol) {
    for (int s = 0; s < 24; s += 8)
        if (abs((int)(a >> s & 255) - (int)(b >> s & 255)) > tol) return 0;
    return 1;
}

TEST(vector_same_colours_every_format) {
    al_panel p;
    al_cscale cs;
    al_figure f = cell_figure(&p, &cs);
    al_image im;
    al_plot_geom g;
    al_err e;
    CHECK_OK(al_plot_figure(&f, &im, &g, &e), &e);
    al_image_free(&im);
    al_png_text meta[2] = {{"what", "cells"}, {"Software", "attnlab test"}};
    int w = 0, h = 0;
    CHECK_OK(al_plot_write(&f, AL_FIG_PNG, t_path("c.png"), meta, 2, &w, &h, &e), &e);
    CHECK_OK(al_plot_write(&f, AL_FIG_SVG, t_path("c.svg"), meta, 2, NULL, NULL, &e), &e);
    CHECK_OK(al_plot_write(&f, AL_FIG_PDF, t_path("c.pdf"), meta, 2, NULL, NULL, &e), &e);
    uint32_t hi = al_cscale_colour(&cs, 1), mid = al_cscale_colour(&cs, 0.5);
    CHECK(hi == al_cmap_viridis(1) && hi == 0xFDE725);
    /* PNG: cell (0,1) = 1, (1,0) = 0.5, (1,1) masked; the provenance chunks */
    al_png_meta pm;
    CHECK_OK(al_png_read(t_path("c.png"), &im, &pm, &e), &e);
    CHECK(im.w == w && im.h == h);
    int cx1 = g.mx + g.cell_w + g.cell_w / 2, cx0 = g.mx + g.cell_w / 2;
    int cy0 = g.my + g.cell_h / 2, cy1 = g.my + g.cell_h + g.cell_h / 2;
    CHECK(al_image_get(&im, cx1, cy0) == hi);
    CHECK(al_image_get(&im, cx0, cy1) == mid);
    CHECK(al_image_get(&im, cx1, cy1) == AL_PLOT_MASKED);
    CHECK(al_png_meta_get(&pm, "what") && strcmp(al_png_meta_get(&pm, "what"), "cells") == 0);
    al_png_meta_free(&pm);
    al_image_free(&im);
    /* SVG: the same fills */
    char *svg = t_slurp(t_path("c.svg")), want[96];
    svg_rgb(hi, want, sizeof want);
    CHECKF(svg && strstr(svg, want), "no %s in the SVG", want);
    svg_rgb(mid, want, sizeof want);
    CHECKF(svg && strstr(svg, want), "no %s in the SVG", want);
    free(svg);
    /* the same figure twice: byte-identical PNG and SVG */
    CHECK_OK(al_plot_write(&f, AL_FIG_PNG, t_path("c2.png"), meta, 2, NULL, NULL, &e), &e);
    CHECK_OK(al_plot_write(&f, AL_FIG_SVG, t_path("c2.svg"), meta, 2, NULL, NULL, &e), &e);
    CHECK(t_sh("cmp -s %s %s", t_path("c.png"), t_path("c2.png")) == 0);
    CHECK(t_sh("cmp -s %s %s", t_path("c.svg"), t_path("c2.svg")) == 0);
    /* PDF rendered by poppler: the same colours at the same pixels */
    need_poppler();
    CHECK(pdf_render(t_path("c.pdf"), &im) == 0);
    if (im.px) {
        CHECKF(close_to(al_image_get(&im, cx1, cy0), hi, 1), "%06x", al_image_get(&im, cx1, cy0));
        CHECKF(close_to(al_image_get(&im, cx0, cy1), mid, 1), "%06x", al_image_get(&im, cx0, cy1));
        CHECK(close_to(al_image_get(&im, cx1, cy1), AL_PLOT_MASKED, 1));
        al_image_free(&im);
    }
}

TEST(vector_circuit_graph_text) {
    need_python();
    /* embed, pos -> 0.1 -> 1.2 -> logits, q/k/v ports */
    al_netnode n[5] = {
        {.label = "embed", .row = 0, .fill = 0xEEEEEE},
        {.label = "pos", .row = 0, .fill = 0xEEEEEE},
        {.label = "0.1",
         .row = 1,
         .n_ports = 3,
         .port_label = {"q", "k", "v"},
         .port_colour = {0x1F77B4, 0xD62728, 0x2CA02C},
         .fill = 0xFFFFFF},
        {.label = "1.2",
         .row = 2,
         .n_ports = 3,
         .port_label = {"q", "k", "v"},
         .port_colour = {0x1F77B4, 0xD62728, 0x2CA02C},
         .fill = 0xFFFFFF},
        {.label = "logits", .row = 3, .fill = 0xEEEEEE},
    };
    /* a token string with a control byte and U+FFFF, which XML forbids */
    n[1].label = "p\x01s\xef\xbf\xbf";
    al_netedge ed[4] = {{0, 2, 0, 0x1F77B4, 2, 0},
                        {1, 2, 1, 0xD62728, 1, 1},
                        {2, 3, 1, 0xD62728, 4, 0},
                        {3, 4, -1, 0x9467BD, 3, 0}};
    const char *rows[4] = {"embeddings", "layer 0", "layer 1", "logits"};
    al_panel p = {.kind = AL_PANEL_NET,
                  .net = {.nodes = n,
                          .n_nodes = 5,
                          .edges = ed,
                          .n_edges = 4,
                          .row_names = rows,
                          .n_rows = 4}};
    al_legend_item leg[1] = {{"k edge", 0xD62728, 0}};
    al_figure f = {.title = "induction circuit",
                   .notes = {"K-composition: 0.1 -> 1.2"},
                   .n_notes = 1,
                   .panels = &p,
                   .n_panels = 1,
                   .legend = leg,
                   .n_legend = 1};
    al_err e;
    al_png_text meta[1] = {{"prompt", "tab\there, bell\x07"}};
    CHECK_OK(al_plot_write(&f, AL_FIG_SVG, t_path("g.svg"), meta, 1, NULL, NULL, &e), &e);
    CHECK_OK(al_plot_write(&f, AL_FIG_PDF, t_path("g.pdf"), NULL, 0, NULL, NULL, &e), &e);
    char *txt = svg_texts(t_path("g.svg"));
    CHECKF(txt, "g.svg is not XML: %s", t_slurp(t_path("py.err")));
    const char *want[] = {"induction circuit",
                          "K-composition: 0.1 -> 1.2",
                          "embed",
                          "logits",
                          "layer 0",
                          "1.2",
                          "k edge",
                          "p\\x01s\xef\xbf\xbd",
                          "bell\\x07"};
    for (size_t i = 0; txt && i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(txt, want[i]), "no text '%s' in the SVG", want[i]);
    free(txt);
    /* markup in a label is escaped, never markup */
    char *svg = t_slurp(t_path("g.svg"));
    CHECK(svg && strstr(svg, "0.1 -&gt; 1.2"));
    free(svg);
    need_poppler();
    char *pt = pdf_text(t_path("g.pdf"));
    CHECK(pt && strstr(pt, "induction circuit") && strstr(pt, "logits") && strstr(pt, "embed"));
    free(pt);
    al_image im;
    CHECK(pdf_render(t_path("g.pdf"), &im) == 0);
    if (im.px) {
        CHECK(non_white(&im) > 1000);
        al_image_free(&im);
    }
}

TEST(vector_format_refusals) {
    t_pbuf m = t_pcopy("m");
    make_model(m.s, 1, 2);
    int w, h;
    CHECK(heatmap(m.s, "--what qk-pos --head 0 --format gif", "x.gif", &w, &h) == 2);
    CHECK(t_one_line(t_path("hm.err"), "--format must be png, svg or pdf, not 'gif'"));
    CHECK(!al_file_exists(t_path("x.gif")));
    CHECK(heatmap(m.s, "--what qk-pos --head 0 --format svg", "x.png", &w, &h) == 2);
    CHECK(t_one_line(t_path("hm.err"), "--format svg but --out"));
    CHECK(!al_file_exists(t_path("x.png")));
    /* the extension decides, in any case */
    CHECK(heatmap(m.s, "--what qk-pos --head 0", "X.SVG", &w, &h) == 0);
    char *svg = t_slurp(t_path("X.SVG"));
    CHECK(svg && strstr(svg, "<svg"));
    free(svg);
    CHECK(t_sh("%s report --db %s --model %s --out %s --figures pdf 2> %s", t_bin(), t_path("r.db"),
               m.s, t_path("rep"), t_path("rep.err")) == 2);
    CHECK(t_one_line(t_path("rep.err"), "--figures must be png or svg, not 'pdf'"));
}

TEST(vector_report_svg_figures) {
    t_pbuf m = t_pcopy("m");
    make_model(m.s, 2, 4);
    t_pbuf db = t_pcopy("r.db"), out = t_pcopy("rep");
    CHECK(t_sh("%s circuits --model %s --db %s > /dev/null 2>&1", t_bin(), m.s, db.s) == 0);
    CHECK(t_sh("%s report --db %s --model %s --out %s --pictures spectrum --figures svg > "
               "/dev/null 2> %s",
               t_bin(), db.s, m.s, out.s, t_path("rep.err")) == 0);
    char *html = t_slurp(t_path("rep/index.html"));
    CHECK(html && strstr(html, "<img src=\"m-spectrum.svg\"") &&
          !strstr(html, "src=\"m-spectrum.png\""));
    free(html);
    CHECK(al_file_exists(t_path("rep/m-spectrum.svg")) &&
          al_file_exists(t_path("rep/m-spectrum.png")));
    /* the notebook still shows the PNG */
    char *nb = t_slurp(t_path("rep/report.ipynb"));
    CHECK(nb && strstr(nb, "m-spectrum.png"));
    free(nb);
    /* drawn again with PNG figures: the SVG the page no longer shows goes */
    CHECK(t_sh("%s report --db %s --model %s --out %s --pictures spectrum > /dev/null 2>&1",
               t_bin(), db.s, m.s, out.s) == 0);
    CHECK(!al_file_exists(t_path("rep/m-spectrum.svg")) &&
          al_file_exists(t_path("rep/m-spectrum.png")));
    html = t_slurp(t_path("rep/index.html"));
    CHECK(html && strstr(html, "<img src=\"m-spectrum.png\""));
    free(html);
}

TEST(vector_experiment_pictures_format) {
    /* "pictures": {"format": "svg"} is the report's --figures svg; pdf and
     * other values are refused with the key path */
    const char *text = T_EXP_TINY_2L("fmt") " \"pictures\": {\"kinds\": [\"spectrum\"], "
                                            "\"format\": \"svg\"}}";
    al_experiment *x = NULL;
    al_err e = {{0}};
    CHECK_OK(al_exp_load(t_write("ok.json", text), &x, &e), &e);
    CHECK(x && x->figures == AL_FIG_SVG);
    al_exp_free(x);
    t_exp_refused(text, "\"svg\"", "\"pdf\"", "pictures.format: must be \"png\" or \"svg\"");
    t_exp_refused(text, "\"svg\"", "3", "pictures.format: must be a string");
}

TEST(vector_png_byte_identical_across_runs) {
    /* same model, same command: the same bytes (cairo's antialiasing and
     * the unhinted font are deterministic) */
    t_pbuf m = t_pcopy("m");
    make_model(m.s, 2, 4);
    int w, h;
    CHECK(heatmap(m.s, "--what spectrum", "a.png", &w, &h) == 0);
    CHECK(heatmap(m.s, "--what spectrum", "b.png", &w, &h) == 0);
    CHECK(t_sh("cmp -s %s %s", t_path("a.png"), t_path("b.png")) == 0);
    CHECK(heatmap(m.s, "--what spectrum", "a.svg", &w, &h) == 0);
    CHECK(heatmap(m.s, "--what spectrum", "b.svg", &w, &h) == 0);
    CHECK(t_sh("cmp -s %s %s", t_path("a.svg"), t_path("b.svg")) == 0);
}
