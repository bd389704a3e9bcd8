/* test_attr_pics.c -- the attribution pictures (`attnlab heatmap --what
 * dla | terms | attrpatch`) and the report's Attribution section, drawn
 * from hand-made rows with planted extremes, so that what a picture shows
 * can be checked against what the rows say. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"
#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/plot.h"
#include "attnlab/png.h"
#include "attnlab/report.h"
#include "attnlab/store.h"
#include "picfix.h"
#include "test.h"

#define DIV_NEG 0x053061u /* the ends of the diverging scale */
#define DIV_POS 0x67001Fu

/* --------------------------------------------------------------- fixture */

/* What the fixture plants. */
typedef struct attr_fix {
    int tokens; /* attribution_tokens rows */
    int paths; /* path_terms rows */
    int attrpatch; /* attribution_patching rows: 0 none, 1 estimates only, 2 compared */
    double virt_dloss; /* attribution_runs.virtual_dloss (2 layers) */
} attr_fix;

#define T_LEN 12 /* positions of the fixture's task */
/* Planted: DLA +3 at (1.5, pos 9) and -3 at (0.2, pos 3), all else |v| < 0.5,
 * no items at pos 0; virtual term 0.3>1.5 the largest Δloss (1.2), or head
 * 0.1 (0.9) in a 1-layer model; kinds: direct 0.4, head 0.8, virtual
 * virt_dloss. */
#define DLA_RED_ROW 15 /* 2 + 1*8 + 5 */
#define DLA_BLUE_ROW 4 /* 2 + 0*8 + 2 */

/* v as SQL text (a static buffer: one use per statement). */
static const char *num(double v) {
    static char b[32];
    snprintf(b, sizeof b, "%.17g", v);
    return b;
}

/* One finished attribute run of the model in dir, its rows written with
 * sqlite3 as `attnlab attribute --db` would write them (kept in this one
 * function so a real run can replace it). Returns the run id. */
static long attr_fixture(const char *db, const char *dir, const attr_fix *f) {
    al_err e;
    al_store *st;
    al_model m;
    int64_t mid = 0, run = 0;
    CHECK_OK(al_ckpt_load(dir, &m, NULL, &e), &e);
    CHECK_OK(al_store_open(db, &st, &e), &e);
    CHECK_OK(al_store_model(st, dir, NULL, &m, NULL, &mid, &e), &e);
    CHECK_OK(al_store_run_begin(st, "attribute", "{}", mid, &run, &e), &e);
    CHECK_OK(al_store_run_finish(st, run, &e), &e);
    al_store_close(st);
    int L = m.cfg.n_layers, H = m.cfg.n_heads;
    al_model_free(&m);
    al_buf b = {0};
    long r = (long)run, id = (long)mid;
    sqlf(&b,
         "BEGIN;\nINSERT INTO attribution_runs VALUES(%ld, %ld, 'induction', 4, %d, 20, "
         "'logprob', 1.5, 2.25, 0.9, 0.5, %s, 0.4, 0.8, %s, %s, 1, 0.5, 0.125, 2, 3, 'abc', 0);\n",
         r, id, T_LEN, L >= 2 ? "0.1" : "NULL", L >= 2 ? "0" : "NULL",
         f->attrpatch ? "'denoise'" : "NULL");
    if (L >= 2)
        sqlf(&b, "UPDATE attribution_runs SET virtual_dloss = %.17g WHERE run_id = %ld;\n",
             f->virt_dloss, r);
    for (int c = 0; c < 2 + L * H; c++) {
        char name[32];
        if (c < 2)
            snprintf(name, sizeof name, "%s", c ? "pos" : "embed");
        else
            snprintf(name, sizeof name, "%d.%d", (c - 2) / H, (c - 2) % H);
        for (int t = 1; t < T_LEN; t++) {
            double v = 0.4 * sin(7.0 * c + t);
            if (c == DLA_RED_ROW && t == 9) v = 3;
            if (c == DLA_BLUE_ROW && t == 3) v = -3;
            sqlf(&b,
                 "INSERT INTO logit_attribution VALUES(%ld, %ld, 'induction', '%s', %d, %.17g, "
                 "2);\n",
                 r, id, name, t, v);
        }
        sqlf(&b,
             "INSERT INTO logit_attribution VALUES(%ld, %ld, 'induction', '%s', NULL, %.17g, "
             "20);\n",
             r, id, name, c == DLA_RED_ROW ? 0.75 : 0.01 * c);
    }
    static const char *const words[T_LEN] = {"<|endoftext|>", " the",   " cat", "\n",
                                             " sat",          "'<&>\"", " the", " cat",
                                             " sat",          " on",    " a",   " mat"};
    for (int t = 0; f->tokens && t < T_LEN; t++) {
        char *q = sqlite3_mprintf("INSERT INTO attribution_tokens VALUES(%ld, %d, %d, %Q);\n", r, t,
                                  t + 1, words[t]);
        al_buf_puts(&b, q);
        sqlite3_free(q);
    }
    if (f->paths) {
        sqlf(&b,
             "INSERT INTO path_terms VALUES(%ld, %ld, 'induction', 'direct', 'direct', NULL, "
             "NULL, NULL, 0.9, 0.3);\n",
             r, id);
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                sqlf(&b,
                     "INSERT INTO path_terms VALUES(%ld, %ld, 'induction', '%d.%d', 'head', %d, "
                     "%d, NULL, 0.1, %.17g);\n",
                     r, id, l, h, l, h, L == 1 && h == 1 ? 0.9 : 0.05 * (h % 3) - 0.03);
        for (int a = 0; L == 2 && a < H; a++)
            for (int h = 0; h < H; h++)
                sqlf(&b,
                     "INSERT INTO path_terms VALUES(%ld, %ld, 'induction', '0.%d>1.%d', "
                     "'virtual', 1, %d, %d, 0.01, %.17g);\n",
                     r, id, a, h, h, a, a == 3 && h == 5 ? 1.2 : 0.02 * ((a * H + h) % 5) - 0.04);
        /* 3 layers and more: every virtual head l0.h0>l1.h1 (src_head = l0·H + h0), the
         * planted 2.1>3.4 at -1.0, and the remainder chains>=3 (no head) at 2.0 */
        for (int l1 = 1; L >= 3 && l1 < L; l1++)
            for (int src = 0; src < l1 * H; src++)
                for (int h = 0; h < H; h++)
                    sqlf(&b,
                         "INSERT INTO path_terms VALUES(%ld, %ld, 'induction', '%d.%d>%d.%d', "
                         "'virtual', %d, %d, %d, 0.01, %.17g);\n",
                         r, id, src / H, src % H, l1, h, l1, h, src,
                         src == 2 * H + 1 && l1 == 3 && h == 4 ? -1.0 : 0.001 * (src % 7));
        if (L >= 3)
            sqlf(&b,
                 "INSERT INTO path_terms VALUES(%ld, %ld, 'induction', 'chains>=3', 'virtual', "
                 "NULL, NULL, NULL, 0.5, 2.0);\n",
                 r, id);
    }
    for (int l = 0; l <= L; l++)
        sqlf(&b, "INSERT INTO logit_lens VALUES(%ld, %ld, 'induction', %d, %.17g, %.17g);\n", r, id,
             l, 4.0 - l, 0.1 + 0.3 * l);
    /* heads: estimate = actual (on the y = x line); head x position: actual
     * = -estimate (off it); edges: some with no channel (NULL) */
    for (int l = 0; f->attrpatch && l < L; l++)
        for (int h = 0; h < H; h++) {
            double v = 0.1 * (l * H + h) - 0.4, w = 0.5 + 0.1 * h;
            sqlf(&b,
                 "INSERT INTO attribution_patching(run_id, model_id, task, direction, grid, "
                 "layer, head, estimate, actual) VALUES(%ld, %ld, 'induction', 'denoise', 'head', "
                 "%d, %d, %.17g, %s);\n",
                 r, id, l, h, v, f->attrpatch == 2 ? num(v) : "NULL");
            for (int t = 0; t < T_LEN; t += 4)
                sqlf(&b,
                     "INSERT INTO attribution_patching(run_id, model_id, task, direction, grid, "
                     "layer, head, pos, estimate, actual) VALUES(%ld, %ld, 'induction', 'denoise', "
                     "'head_pos', %d, %d, %d, %.17g, %s);\n",
                     r, id, l, h, t, w, f->attrpatch == 2 ? num(-w) : "NULL");
        }
    for (int s = 0; f->attrpatch && L == 2 && s < 2 + H; s++)
        sqlf(&b,
             "INSERT INTO attribution_patching(run_id, model_id, task, direction, grid, sender, "
             "receiver_layer, receiver_head, channel, estimate, actual) VALUES(%ld, %ld, "
             "'induction', 'denoise', 'edge', 'embed', 1, %d, 'k', %s, %s);\n",
             r, id, s % H, s == 1 ? "NULL" : "0.05", f->attrpatch == 2 && s != 1 ? "0.06" : "NULL");
    if (f->attrpatch == 2) {
        sqlf(&b, "INSERT INTO attribution_agreement VALUES(%ld, %ld, 'head', %d, 1, 1, 5);\n", r,
             id, L * H);
        sqlf(&b, "INSERT INTO attribution_agreement VALUES(%ld, %ld, 'head_pos', %d, -1, -1, 5);\n",
             r, id, L * H * 3);
        if (L == 2)
            sqlf(&b,
                 "INSERT INTO attribution_agreement VALUES(%ld, %ld, 'edge', %d, NULL, NULL, "
                 "5);\n",
                 r, id, 1 + H);
    }
    al_buf_puts(&b, "COMMIT;\n");
    exec_sql(db, &b);
    return r;
}

/* ------------------------------------------------------------- helpers */

/* Rows spanned by colour c in the image (0 if absent). */
static int colour_height(const al_image *im, uint32_t c) {
    int y0 = -1, y1 = -1;
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < im->w; x++)
            if (al_image_get(im, x, y) == c) {
                if (y0 < 0) y0 = y;
                y1 = y;
                break;
            }
    return y0 < 0 ? 0 : y1 - y0 + 1;
}

/* --------------------------------------------------------------- tests */

/* Model m2 (2 layers x 8 heads) with every row planted and compared. */
static t_pbuf full_run(void) {
    t_pbuf m = t_pcopy("m2");
    make_model(m.s, 2, 8);
    attr_fix f = {.tokens = 1, .paths = 1, .attrpatch = 2, .virt_dloss = 1.5};
    attr_fixture(t_path("r.db"), m.s, &f);
    return m;
}

TEST(attrpics_dla) {
    t_pbuf m = full_run();
    al_image im;
    CHECK(draw(m.s, "--what dla", "dla.png", &im) == 0);
    /* the planted +3 is the one fully red cell, the planted -3 the fully
     * blue one (the bar's ends are a pixel row, not a cell); 14 px cells */
    int rx, ry, bx, by, gx, gy;
    CHECK(find_block(&im, DIV_POS, 10, &rx, &ry) && find_block(&im, DIV_NEG, 10, &bx, &by));
    CHECKF(rx - bx == (9 - 3) * 14 && ry - by == (DLA_RED_ROW - DLA_BLUE_ROW) * 14,
           "red at (%d,%d), blue at (%d,%d)", rx, ry, bx, by);
    /* position 0 has no items: its cells are grey, in the column of the
     * first masked block */
    CHECK(find_block(&im, AL_PLOT_MASKED, 10, &gx, &gy) && gx == bx - 3 * 14);
    int h_tok = im.h;
    al_image_free(&im);
    /* labelled with the run's tokens: the rotated labels need more room
     * than position numbers */
    CHECK(t_sh("sqlite3 %s 'DELETE FROM attribution_tokens'", t_path("r.db")) == 0);
    CHECK(draw(m.s, "--what dla", "dla-pos.png", &im) == 0);
    CHECKF(im.h < h_tok - 20, "height %d with tokens, %d without", h_tok, im.h);
    al_image_free(&im);
    /* the title names the task and what the values add up to */
    al_png_meta meta;
    al_err e;
    CHECK_OK(al_png_read(t_path("dla.png"), &im, &meta, &e), &e);
    const char *title = al_png_meta_get(&meta, "Title");
    CHECK(title && strstr(title, "the correct token's logit") && strstr(title, "induction"));
    al_png_meta_free(&meta);
    al_image_free(&im);
    CHECK(t_sh("sqlite3 %s \"UPDATE attribution_runs SET metric_kind = 'logit_diff'\"",
               t_path("r.db")) == 0);
    CHECK(draw(m.s, "--what dla", "dla-diff.png", &im) == 0);
    al_image_free(&im);
    CHECK_OK(al_png_read(t_path("dla-diff.png"), &im, &meta, &e), &e);
    title = al_png_meta_get(&meta, "Title");
    CHECK(title && strstr(title, "the logit difference"));
    al_png_meta_free(&meta);
    al_image_free(&im);
}

TEST(attrpics_terms) {
    t_pbuf m2 = t_pcopy("m2"), m1 = t_pcopy("m1");
    make_model(m2.s, 2, 8);
    make_model(m1.s, 1, 4);
    attr_fix f = {.tokens = 1, .paths = 1, .attrpatch = 0, .virt_dloss = 1.5};
    attr_fixture(t_path("r.db"), m2.s, &f);
    attr_fixture(t_path("r.db"), m1.s, &f);
    al_image im;
    /* groups in palette order: direct, layer-0, layer-1, virtual; the
     * planted virtual 0.3>1.5 is the tallest bar */
    CHECK(draw(m2.s, "--what terms", "terms2.png", &im) == 0);
    int hv = colour_height(&im, al_plot_colour(3));
    for (int g = 0; g < 3; g++)
        CHECKF(colour_height(&im, al_plot_colour(g)) < hv / 2, "group %d: %d px, virtual %d px", g,
               colour_height(&im, al_plot_colour(g)), hv);
    al_image_free(&im);
    /* one layer: no layer-1 or virtual group; head 0.1 the tallest bar */
    CHECK(draw(m1.s, "--what terms", "terms1.png", &im) == 0);
    CHECK(colour_height(&im, al_plot_colour(2)) == 0 && colour_height(&im, al_plot_colour(3)) == 0);
    CHECK(colour_height(&im, al_plot_colour(1)) > 2 * colour_height(&im, al_plot_colour(0)));
    al_image_free(&im);
}

/* 4 layers x 8 heads: 418 terms, of which the 40 largest |Δloss| are
 * drawn, grouped direct, heads, virtual heads, chains of 3+ heads: the
 * planted remainder (2.0) the tallest bar, the planted virtual head
 * 2.1>3.4 (-1.0) drawn below 0. */
TEST(attrpics_terms_deep) {
    t_pbuf m4 = t_pcopy("m4");
    make_model(m4.s, 4, 8);
    attr_fix f = {.tokens = 1, .paths = 1, .attrpatch = 0, .virt_dloss = 1.5};
    attr_fixture(t_path("r.db"), m4.s, &f);
    CHECK(t_sql_long(t_path("r.db"), "SELECT count(*) FROM path_terms") == 418);
    al_image im;
    CHECK(draw(m4.s, "--what terms", "terms4.png", &im) == 0);
    int hc = colour_height(&im, al_plot_colour(3)), hv = colour_height(&im, al_plot_colour(2));
    CHECKF(hc > 0 && hv > 0 && hc > hv, "chains %d px, virtual %d px", hc, hv);
    for (int g = 0; g < 2; g++)
        CHECKF(colour_height(&im, al_plot_colour(g)) < hc / 2, "group %d: %d px, chains %d px", g,
               colour_height(&im, al_plot_colour(g)), hc);
    /* 40 bars, not 418: the picture is as wide as a 2-layer one's, not ten times */
    CHECKF(im.w < 1600, "%d px wide", im.w);
    al_image_free(&im);
}

TEST(attrpics_attrpatch) {
    t_pbuf m = full_run();
    al_image im;
    CHECK(draw(m.s, "--what attrpatch", "ap.png", &im) == 0);
    /* the plot area: the frame's bounding box (a square: x and y share a range) */
    int x0, y0, x1, y1;
    frame_box(&im, &x0, &y0, &x1, &y1);
    CHECKF(x1 - x0 == y1 - y0 && x1 - x0 > 300, "frame %d..%d x %d..%d", x0, x1, y0, y1);
    /* heads (estimate = actual) lie on the diagonal; head x position
     * points (actual = -estimate) off it */
    int on = 0, off = 0, far = 0;
    for (int y = y0 + 1; y < y1; y++)
        for (int x = x0 + 1; x < x1; x++) {
            int d = abs((x - x0) - (y1 - y));
            uint32_t c = al_image_get(&im, x, y);
            if (c == al_plot_colour(0)) on++, off += d > 5;
            if (c == al_plot_colour(1)) far += d > 20;
        }
    CHECKF(on > 16 * 20 && off == 0, "%d head px, %d off the diagonal", on, off);
    CHECK(far > 20);
    al_image_free(&im);
}

TEST(attrpics_refusals) {
    t_pbuf m = t_pcopy("m2"), m1 = t_pcopy("m1");
    make_model(m.s, 2, 8);
    make_model(m1.s, 1, 4);
    /* no attribute run of this model in the database (it has others) */
    al_err e;
    al_store *st;
    al_model mm;
    int64_t mid, run0;
    CHECK_OK(al_ckpt_load(m.s, &mm, NULL, &e), &e);
    CHECK_OK(al_store_open(t_path("r.db"), &st, &e), &e);
    CHECK_OK(al_store_model(st, m.s, NULL, &mm, NULL, &mid, &e), &e);
    CHECK_OK(al_store_run_begin(st, "circuits", "{}", mid, &run0, &e), &e);
    CHECK_OK(al_store_run_finish(st, run0, &e), &e);
    al_store_close(st);
    al_model_free(&mm);
    attr_fix f = {.tokens = 0, .paths = 0, .attrpatch = 1, .virt_dloss = 0};
    attr_fixture(t_path("r.db"), m1.s, &f); /* the other model's */
    refused(m.s, "--what dla", "no finished attribute run");
    refused(m.s, "--what terms", "no finished attribute run");
    refused(m.s, "--what attrpatch", "no finished attribute run");
    /* estimates that were never compared; no path expansion */
    refused(m1.s, "--what attrpatch", "did not compare");
    refused(m1.s, "--what terms", "no path expansion");
    /* no attribution patching at all */
    f.attrpatch = 0;
    long run = attr_fixture(t_path("r.db"), m.s, &f);
    /* the newest run with attribution patching is looked for; named, refused */
    refused(m.s, "--what attrpatch", "no finished attribute run with attribution patching");
    char a[64];
    snprintf(a, sizeof a, "--what attrpatch --run %ld", run);
    refused(m.s, a, "has no attribution patching");
    /* a run of another kind */
    CHECK(t_sh("sqlite3 %s \"UPDATE runs SET kind = 'patch' WHERE run_id = %ld\"", t_path("r.db"),
               run) == 0);
    snprintf(a, sizeof a, "--what dla --run %ld", run);
    refused(m.s, a, "is a 'patch' run");
}

/* Kinds' Δloss 0.4 (direct), 0.8 (head), virtual v: share v / (1.2 + v). */
TEST(attrpics_report_section) {
    t_pbuf yes = t_pcopy("yes"), low = t_pcopy("low"), one = t_pcopy("one"), none = t_pcopy("none");
    make_model(yes.s, 2, 8);
    make_model(low.s, 2, 4);
    make_model(one.s, 1, 4);
    make_model(none.s, 2, 2); /* other weights than low's */
    attr_fix f = {.tokens = 1, .paths = 1, .attrpatch = 2, .virt_dloss = 1.5};
    attr_fixture(t_path("r.db"), yes.s, &f);
    f.virt_dloss = 0.05, f.attrpatch = 1; /* 4.0%: negligible; estimates never compared */
    attr_fixture(t_path("r.db"), low.s, &f);
    f.attrpatch = 0;
    attr_fixture(t_path("r.db"), one.s, &f);
    /* "none" has a run of another kind only */
    CHECK(t_sh("sqlite3 %s \"INSERT INTO models(sha256, path, added_at) VALUES('x', '%s', 'now'); "
               "INSERT INTO runs(kind, model_id, started_at, status, attnlab_version) VALUES("
               "'circuits', (SELECT max(model_id) FROM models), 'now', 'done', 'x')\"",
               t_path("r.db"), none.s) == 0);
    const char *dirs[4] = {yes.s, low.s, one.s, none.s};
    int n_pics = 0;
    char *html = report_html(dirs, 4, "dla,terms,attrpatch", &n_pics);
    CHECK(html != NULL);
    const char *y = model_part(html, "yes"), *l = model_part(html, "low"),
               *o = model_part(html, "one"), *n = model_part(html, "none");
    CHECK(y && l && o && n && y < l && l < o && o < n);
    if (!y || !l || !o || !n) {
        free(html);
        return;
    }
    /* sections in order, one per model with a run, none for the last */
    const char *ya = strstr(y, "<h3>Attribution</h3>"), *la = strstr(l, "<h3>Attribution</h3>"),
               *oa = strstr(o, "<h3>Attribution</h3>");
    CHECK(ya && ya < l && la && la < o && oa && oa < n && !strstr(n, "<h3>Attribution</h3>"));
    /* yes: 1.5 / 2.7 = 55.6%, the largest virtual term named (escaped) */
    CHECK(strstr(y,
                 "<td class=t>virtual</td><td>+0.1000</td><td>+1.5000</td><td class=t>55.6%</td>"));
    CHECK(
        strstr(y, "<td class=t>direct</td><td>+0.9000</td><td>+0.4000</td><td class=t>14.8%</td>"));
    CHECK(strstr(y, "Yes: removing all 64 virtual terms together raises the loss by 1.5000 nats, "
                    "55.6%"));
    CHECK(strstr(y, "<code>0.3&gt;1.5</code> (&Delta;loss +1.2000 nats)"));
    /* the logit lens and the agreement, with the NULL correlation as a dash */
    CHECK(strstr(y, "<td class=t>embed + pos</td><td>4.0000</td><td>0.100</td>"));
    CHECK(strstr(y, "<td class=t>entering layer 1</td><td>3.0000</td><td>0.400</td>"));
    CHECK(strstr(y, "<td class=t>final (the model&#39;s own)</td><td>2.0000</td><td>0.700</td>") ||
          strstr(y, "<td class=t>final (the model's own)</td><td>2.0000</td><td>0.700</td>"));
    CHECK(
        strstr(y, "<td class=t>head_pos</td><td>48</td><td>-1.000</td><td>-1.000</td><td>5</td>"));
    CHECK(strstr(y, "<td class=t>edge</td><td>9</td><td class=na>&ndash;</td>"));
    /* its three pictures, drawn */
    const char *files[3] = {"-dla-", "-terms-", "-attrpatch-"};
    for (int k = 0; k < 3; k++) {
        const char *img = strstr(y, "<img src=\"");
        while (img && img < l && !strstr(img, files[k])) img = strstr(img + 1, "<img src=\"");
        char name[256], path[512] = "";
        if (img && img < l && sscanf(img, "<img src=\"%255[^\"]", name) == 1)
            snprintf(path, sizeof path, "out/%s", name);
        CHECKF(path[0] && al_file_exists(t_path(path)), "no %s picture", files[k]);
    }
    /* low: 0.05 / 1.25 = 4.0%, negligible; not compared: no scatter */
    CHECK(strstr(l, "Negligible: removing all 16 virtual terms together changes the loss by "
                    "+0.0500 nats, 4.0%"));
    CHECK(strstr(l, "Not compared with actual patching."));
    const char *lp = strstr(l, "-attrpatch-");
    CHECK(!lp || lp > o);
    /* one layer: no virtual row, no virtual heads */
    CHECK(strstr(o, "There are none: the model has one layer"));
    const char *ov = strstr(o, "<td class=t>virtual</td>");
    CHECK(!ov || ov > n);
    CHECK(n_pics == 3 + 2 + 2);
    free(html);
}

/* Virtual terms that hurt: removing them lowers the loss. Shares are of
 * Σ|Δloss| = 0.4 + 0.8 + 0.5, so the three add up to 100%. */
TEST(attrpics_report_virtual_against) {
    t_pbuf against = t_pcopy("against");
    make_model(against.s, 2, 8);
    attr_fix f = {.tokens = 1, .paths = 1, .attrpatch = 0, .virt_dloss = -0.5};
    attr_fixture(t_path("r.db"), against.s, &f);
    const char *dirs[1] = {against.s};
    int n_pics = 0;
    char *html = report_html(dirs, 1, "dla,terms,attrpatch", &n_pics);
    CHECK(html != NULL);
    CHECK(html && strstr(html, "They work against the task: removing all 64 virtual terms "
                               "together <i>lowers</i> the loss by 0.5000 nats (29.4%"));
    CHECK(html && strstr(html, "<td class=t>virtual</td><td>+0.1000</td><td>-0.5000</td>"
                               "<td class=t>29.4%</td>"));
    CHECK(html && strstr(html, "<td class=t>direct</td><td>+0.9000</td><td>+0.4000</td>"
                               "<td class=t>23.5%</td>"));
    CHECK(html && !strstr(html, "The largest alone")); /* named only when they help */
    free(html);
}
