/* test_sae_pics.c -- the pictures of an `attnlab sae features` run
 * (`heatmap --what sae-feature | sae-heads`), drawn from a real run of the
 * planted SAE (saefix.h), whose answers are known: feature 0 raises token
 * 3 by P_GAMMA and takes all of its pre-activation from head 1.0, feature
 * 2 all of its from head 1.2, feature 3 never fires. What the pictures
 * show is checked against those, against the rows (sqlite3) and against
 * the token file read here. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/data.h"
#include "attnlab/plot.h"
#include "attnlab/sae_acts.h"
#include "attnlab/png.h"
#include "picfix.h"
#include "saefix.h"
#include "test.h"

#define DIV_POS 0x67001Fu /* the red end of the diverging scale */
#define UP_RED 0xB2182Bu /* the logit bars: raises */

/* Pixels of exactly colour c. */
static long count_colour(const al_image *im, uint32_t c) {
    long n = 0;
    for (int y = 0; y < im->h; y++)
        for (int x = 0; x < im->w; x++) n += al_image_get(im, x, y) == c;
    return n;
}

/* How far left of (x, y) the first pixel of the plot frame is (-1: none):
 * where a bar stands in its bar chart, whatever the panel's place. */
static int left_frame(const al_image *im, int x, int y) {
    for (int i = x; i >= 0; i--)
        if (al_image_get(im, i, y) == FRAME) return x - i;
    return -1;
}

/* The text of an SVG's elements, each followed by one space: the note
 * lines a figure wraps read as one again. malloc'd. */
static char *svg_words(const char *svg) {
    char *out = malloc(strlen(svg) + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = svg; (p = strstr(p, "<text")) != NULL;) {
        const char *a = strchr(p, '>'), *b = a ? strstr(a, "</text>") : NULL;
        if (!b) break;
        memcpy(o, a + 1, (size_t)(b - a - 1));
        o += b - a - 1;
        *o++ = ' ';
        p = b;
    }
    *o = 0;
    return out;
}

TEST(saepics_feature_dashboard) {
    saefix_run();
    t_pbuf md = t_pcopy("planted");
    al_image f0, f2;
    CHECK(draw(md.s, "--what sae-feature --feature 0", "f0.png", &f0) == 0);
    CHECK(draw(md.s, "--what sae-feature --feature 2", "f2.png", &f2) == 0);
    /* the strongest context's token is the top of the activation scale
     * (its activation is the feature's max): a filled cell of that colour */
    int x, y;
    uint32_t top = al_cmap_viridis(1.0);
    CHECKF(find_block(&f0, top, 10, &x, &y), "no cell of the top activation colour %06x", top);
    /* raises token 3 by 15, nothing else: one tall red bar, the others on
     * the zero line */
    int rx, ry;
    CHECK(find_block(&f0, UP_RED, 10, &rx, &ry));
    CHECKF(count_colour(&f0, UP_RED) > 23 * 100, "red bar of %ld px", count_colour(&f0, UP_RED));
    /* head attribution: the top head's bar is the highlighted colour; feature 0's
     * is head 1.0, feature 2's head 1.2, two bars (24 px each) to the right */
    int h0x, h0y, h2x, h2y;
    uint32_t hi = al_plot_colour(1);
    CHECK(find_block(&f0, hi, 10, &h0x, &h0y) && find_block(&f2, hi, 10, &h2x, &h2y));
    int d0 = left_frame(&f0, h0x, h0y + 5), d2 = left_frame(&f2, h2x, h2y + 5);
    CHECKF(d0 > 0 && d2 - d0 == 2 * 24,
           "top-head bar %d px (feature 0), %d px (feature 2) "
           "right of its plot's frame",
           d0, d2);
    CHECK(f0.w != f2.w || f0.h != f2.h || memcmp(f0.px, f2.px, (size_t)f0.w * f0.h * 3) != 0);
    al_image_free(&f2);
    /* the title and the provenance */
    al_png_meta meta;
    al_err e;
    al_image im;
    CHECK_OK(al_png_read(t_path("f0.png"), &im, &meta, &e), &e);
    const char *title = al_png_meta_get(&meta, "Title");
    CHECK(title && strcmp(title, "SAE feature 0 of layer 1 (run 1)") == 0);
    const char *db = al_png_meta_get(&meta, "db");
    CHECK(db && strstr(db, "sae_features run 1"));
    al_png_meta_free(&meta);
    al_image_free(&im);
    /* drawn from the run alone (no --model): the same picture */
    t_pbuf out = t_pcopy("byrun.png");
    CHECK(t_sh("%s heatmap --what sae-feature --feature 0 --db %s --run 1 --out %s > /dev/null",
               t_bin(), t_path("r.db"), out.s) == 0);
    CHECK_OK(al_png_read(out.s, &im, NULL, &e), &e);
    CHECK(im.w == f0.w && im.h == f0.h && memcmp(im.px, f0.px, (size_t)im.w * im.h * 3) == 0);
    al_image_free(&im);
    /* the height follows the rows: two contexts fewer, two 17-px token rows less (the
     * contexts panel is the figure's last row and taller than its colour bar's 100 px;
     * the width follows the widest token of each column, so it may shrink too) */
    CHECK_SQL(t_path("r.db"), "SELECT count(*) FROM sae_feature_contexts WHERE feature = 0", "10");
    CHECK(t_sh("sqlite3 %s 'DELETE FROM sae_feature_contexts WHERE feature = 0 AND rank > 8'",
               t_path("r.db")) == 0);
    CHECK(draw(md.s, "--what sae-feature --feature 0", "f0-8.png", &im) == 0);
    CHECKF(im.w <= f0.w && im.h == f0.h - 2 * 17, "%d x %d, was %d x %d", im.w, im.h, f0.w, f0.h);
    al_image_free(&im);
    al_image_free(&f0);
}

/* The header states the probe's verdict from the stored counts: the
 * planted token detectors are induction features (their token due next
 * at most of their second-occurrence firings), the constant one is not. */
TEST(saepics_feature_induction_note) {
    saefix_run();
    t_pbuf md = t_pcopy("planted"), svg = t_pcopy("n.svg");
    for (int f = 0; f < 3; f += 2) {
        CHECK(t_sh("%s heatmap --model %s --db %s --what sae-feature --feature %d --out %s "
                   "> /dev/null",
                   t_bin(), md.s, t_path("r.db"), f, svg.s) == 0);
        char *raw = t_slurp(svg.s), *s = raw ? svg_words(raw) : NULL;
        free(raw);
        char *row = t_sql(t_path("r.db"), f ? "SELECT first_fired || ' on second' FROM "
                                              "sae_features WHERE feature = 2"
                                            : "SELECT second_fired || ' on second' FROM "
                                              "sae_features WHERE feature = 0");
        CHECK(row != NULL);
        CHECKF(s && strstr(s, f ? "not an induction feature" : "an induction feature: fires"),
               "feature %d: no verdict", f);
        CHECKF(s && row && strstr(s, row), "feature %d: no '%s' in the SVG", f, row ? row : "");
        if (!f) CHECK(s && strstr(s, "due next where it fires on a second occurrence: #3"));
        free(s);
        free(row);
    }
}

/* The context rows hold the tokens around each stored position, read
 * here from the token file: in the SVG every label is a <text>. */
TEST(saepics_feature_contexts_from_file) {
    saefix_run();
    t_pbuf md = t_pcopy("planted"), svg = t_pcopy("f0.svg");
    CHECK(t_sh("%s heatmap --model %s --db %s --what sae-feature --feature 1 --out %s > /dev/null",
               t_bin(), md.s, t_path("r.db"), svg.s) == 0);
    char *raw = t_slurp(svg.s), *s = raw ? svg_words(raw) : NULL;
    free(raw);
    CHECK(s != NULL);
    al_tokens d;
    al_err e;
    CHECK_OK(al_tokens_load(t_path("p.bin"), &d, &e), &e);
    /* the strongest context: its token, the one before it and its label */
    char *row = t_sql(t_path("r.db"), "SELECT offset, pos, token, printf('%.3f', activation), "
                                      "window FROM sae_feature_contexts WHERE feature = 1 AND "
                                      "pos >= 1 ORDER BY rank LIMIT 1");
    long off = -1;
    int pos = -1, tok = -1, win = -1;
    char act[32] = "";
    CHECK(row && sscanf(row, "%ld|%d|%d|%31[^|]|%d", &off, &pos, &tok, act, &win) == 5);
    CHECK(off >= 0 && pos >= 1 && (size_t)(off + pos) < d.n && d.tok[off + pos] == tok);
    char want[96];
    snprintf(want, sizeof want, " #%d #%d ", d.tok[off + pos - 1], tok);
    CHECKF(s && strstr(s, want), "no %s in the SVG", want);
    snprintf(want, sizeof want, " %s  w%d:%d ", act, win, pos);
    CHECKF(s && strstr(s, want), "no %s in the SVG", want);
    CHECK(s && strstr(s, "every token coloured by the activation recomputed with the SAE"));
    free(s);
    free(row);
    al_tokens_free(&d);
    /* without the token file: the stored tokens only, and a note why */
    CHECK(t_sh("mv %s %s", t_path("p.bin"), t_path("gone.bin")) == 0);
    CHECK(t_sh("%s heatmap --model %s --db %s --what sae-feature --feature 1 --out %s > /dev/null",
               t_bin(), md.s, t_path("r.db"), svg.s) == 0);
    raw = t_slurp(svg.s), s = raw ? svg_words(raw) : NULL;
    free(raw);
    CHECK(s && strstr(s, "cannot be read") && strstr(s, "give --data FILE.bin"));
    free(s);
    /* --data names it again */
    CHECK(t_sh("%s heatmap --model %s --db %s --what sae-feature --feature 1 --data %s --out %s "
               "> /dev/null",
               t_bin(), md.s, t_path("r.db"), t_path("gone.bin"), svg.s) == 0);
    raw = t_slurp(svg.s), s = raw ? svg_words(raw) : NULL;
    free(raw);
    CHECK(s && strstr(s, "every token coloured by the activation recomputed with the SAE"));
    free(s);
    /* another file of the same length is caught by the stored tokens */
    size_t n;
    int *ids = saefix_ids(&n);
    for (size_t i = 0; i < n; i++) ids[i] = (ids[i] + 1) % PV;
    CHECK_OK(al_tokens_save(t_path("other.bin"), ids, n, &e), &e);
    free(ids);
    CHECK(t_sh("%s heatmap --model %s --db %s --what sae-feature --feature 1 --data %s --out %s "
               "> /dev/null",
               t_bin(), md.s, t_path("r.db"), t_path("other.bin"), svg.s) == 0);
    raw = t_slurp(svg.s), s = raw ? svg_words(raw) : NULL;
    free(raw);
    CHECK(s && strstr(s, "does not hold the stored tokens"));
    free(s);
}

/* Layer 1's z of head h, dimension k at row r of the last forward (the
 * forward's own cache, m->z: (L, B, T, H, D)), B·T rows in all. */
static float zc(const al_model *m, size_t rows, size_t r, int h, int k) {
    return m->z[(rows + r) * SAE_D + (size_t)h * PD + k];
}

/* The recomputed activations are the planted features' definitions read
 * off a plain forward's z cache (no SAE code), for the L1 and the TopK
 * encoder (k = 2: the constant feature and at most one detector are ever
 * positive together, so TopK keeps exactly the positive ones). */
TEST(saepics_feature_acts) {
    al_model m;
    al_err e;
    planted_model(&m);
    size_t n;
    int *ids = saefix_ids(&n);
    enum { B = 5, T = SAE_T };
    CHECK(n >= (size_t)B * T);
    static float a[B * T];
    for (int arch = 0; arch < 2; arch++) {
        al_sae s;
        al_sae_meta meta;
        saefix_sae(&s, &meta, NULL);
        if (arch) s.cfg.arch = AL_SAE_TOPK, s.cfg.k = 2;
        CHECK_OK(al_model_forward(&m, ids, NULL, B, T, &e), &e);
        static float want[3][B * T];
        for (size_t r = 0; r < (size_t)B * T; r++) {
            float f0 = zc(&m, B * T, r, 0, 3) - SAE_THR, f1 = zc(&m, B * T, r, 0, 9) - SAE_THR;
            want[0][r] = f0 > 0 ? f0 : 0;
            want[1][r] = f1 > 0 ? f1 : 0;
            want[2][r] = zc(&m, B * T, r, 2, 0);
        }
        int fired = 0;
        for (int f = 0; f < 3; f++) {
            CHECK_OK(al_sae_feature_acts(&m, &s, &meta, f, ids, B, T, a, &e), &e);
            for (size_t r = 0; r < (size_t)B * T; r++) {
                CHECKF(fabsf(a[r] - want[f][r]) < 1e-5f,
                       "arch %d feature %d row %zu: %g, by hand %g", arch, f, r, a[r], want[f][r]);
                fired += f < 2 && a[r] > 0;
            }
        }
        CHECK(fired > 0);
        /* several at once, a repeat among them, in chunks of 4096 / T windows */
        static const int fs[4] = {2, 0, 2, 1};
        static float many[B * T * 4];
        CHECK_OK(al_sae_features_acts(&m, &s, &meta, fs, 4, ids, B, T, many, &e), &e);
        for (size_t r = 0; r < (size_t)B * T; r++)
            for (int j = 0; j < 4; j++)
                CHECKF(fabsf(many[r * 4 + j] - want[fs[j]][r]) < 1e-5f, "arch %d row %zu col %d",
                       arch, r, j);
        CHECK_OK(al_sae_feature_acts(&m, &s, &meta, 3, ids, B, T, a, &e), &e);
        for (size_t r = 0; r < (size_t)B * T; r++) CHECK(a[r] == 0);
        CHECK(al_sae_feature_acts(&m, &s, &meta, 4, ids, B, T, a, &e) == -1 &&
              strstr(e.msg, "out of range"));
        CHECK(al_sae_feature_acts(&m, &s, &meta, 0, ids, 1, PP + 1, a, &e) == -1);
        meta.site = AL_SAE_SITE_RESID_PRE;
        CHECK(al_sae_feature_acts(&m, &s, &meta, 0, ids, B, T, a, &e) == -1 &&
              strstr(e.msg, "residual stream"));
        al_sae_free(&s);
    }
    free(ids);
    al_model_free(&m);
}

/* Feature 2 fires everywhere (1.0, the top of its scale): with the
 * activations recomputed every token of its context rows is that colour;
 * with the SAE gone or changed only the stored position is, and a note
 * says why. */
TEST(saepics_feature_recomputed) {
    saefix_run();
    t_pbuf md = t_pcopy("planted");
    al_image im;
    uint32_t top = al_cmap_viridis(1.0);
    CHECK(draw(md.s, "--what sae-feature --feature 2", "all.png", &im) == 0);
    long all = count_colour(&im, top);
    al_image_free(&im);
    CHECK(t_sh("mv %s %s", t_path("sae"), t_path("sae-moved")) == 0);
    CHECK(draw(md.s, "--what sae-feature --feature 2", "one.png", &im) == 0);
    long one = count_colour(&im, top);
    al_image_free(&im);
    CHECKF(one > 0 && all > 8 * one, "top-colour pixels: %ld recomputed, %ld stored only", all,
           one);
    t_pbuf svg = t_pcopy("one.svg");
    CHECK(t_sh("%s heatmap --model %s --db %s --what sae-feature --feature 2 --out %s > /dev/null",
               t_bin(), md.s, t_path("r.db"), svg.s) == 0);
    char *raw = t_slurp(svg.s), *s = raw ? svg_words(raw) : NULL;
    free(raw);
    CHECK(s && strstr(s, "only the activating token's activation is stored") &&
          strstr(s, "the SAE cannot be read"));
    free(s);
    /* an SAE retrained since the run: its activations disagree with the stored ones */
    al_sae sae;
    al_sae_meta meta;
    al_err e;
    CHECK_OK(al_sae_load(t_path("sae-moved"), &sae, &meta, &e), &e);
    sae.b_enc[2] = 0.5f; /* feature 2: 1.5 instead of 1 */
    CHECK_OK(al_sae_save(t_path("sae"), &sae, &meta, &e), &e);
    al_sae_free(&sae);
    CHECK(t_sh("%s heatmap --model %s --db %s --what sae-feature --feature 2 --out %s > /dev/null",
               t_bin(), md.s, t_path("r.db"), svg.s) == 0);
    raw = t_slurp(svg.s), s = raw ? svg_words(raw) : NULL;
    free(raw);
    CHECK(s && strstr(s, "gives 1.5 at window") && strstr(s, "where the run stored 1"));
    free(s);
}

TEST(saepics_refusals) {
    saefix_run();
    t_pbuf md = t_pcopy("planted");
    refused(md.s, "--what sae-feature --feature 3", "feature 3 of run 1 never fired");
    refused(md.s, "--what sae-feature --feature 4", "--feature 4 is out of range");
    refused(md.s, "--what sae-feature", "needs --feature N");
    refused(md.s, "--what sae-feature --feature 0 --run 7", "has no run 7");
    /* another kind of run */
    CHECK(t_sh("sqlite3 %s \"INSERT INTO runs(kind, model_id, started_at, status, "
               "attnlab_version) VALUES('scores', 1, 'now', 'done', 'x')\"",
               t_path("r.db")) == 0);
    refused(md.s, "--what sae-heads --run 2", "is a 'scores' run");
    /* a model with no sae features run */
    t_pbuf m2 = t_pcopy("m2");
    make_model(m2.s, 2, 3);
    refused(m2.s, "--what sae-heads", "no results for model");
}

/* Head x feature: rows by density (feature 2 fires everywhere, then 0 and
 * 1), each share 1 on one head and 0 elsewhere: red on (f2, 1.2), (f0,
 * 1.0), (f1, 1.0), white around them; 28-px cells. */
TEST(saepics_heads_grid) {
    saefix_run();
    t_pbuf md = t_pcopy("planted");
    CHECK_SQL(t_path("r.db"),
              "SELECT group_concat(feature) FROM (SELECT feature FROM "
              "sae_features ORDER BY density DESC, feature)",
              "2,0,1");
    al_image im;
    CHECK(draw(md.s, "--what sae-heads", "heads.png", &im) == 0);
    int x, y;
    CHECK(find_block(&im, DIV_POS, 12, &x, &y));
    /* the first red block in row order is (row 0, head 2): the grid's origin */
    int gx = x - 2 * 28, gy = y;
    CHECK(al_image_get(&im, gx + 4, gy + 28 + 4) == DIV_POS); /* f0, head 0 */
    CHECK(al_image_get(&im, gx + 4, gy + 2 * 28 + 4) == DIV_POS); /* f1, head 0 */
    CHECK(al_image_get(&im, gx + 28 + 4, gy + 4) == 0xFFFFFFu); /* f2, head 1 */
    CHECK(al_image_get(&im, gx + 4, gy + 4) == 0xFFFFFFu); /* f2, head 0 */
    CHECK(al_image_get(&im, gx + 2 * 28 + 4, gy + 28 + 4) == 0xFFFFFFu);
    al_image_free(&im);
    /* --top-n 1: only feature 2's row */
    CHECK(draw(md.s, "--what sae-heads --top-n 1", "heads1.png", &im) == 0);
    CHECK(find_block(&im, DIV_POS, 12, &x, &y));
    CHECK(al_image_get(&im, x - 2 * 28 + 4, y + 28 + 4) != DIV_POS);
    al_image_free(&im);
}

/* The report's SAE section: the training evaluation as the rows hold it,
 * a warning where a number is easy to misread, each features run's
 * densest features (their DFA head and raised token known from the
 * planted SAE) and its pictures. */
TEST(saepics_report_section) {
    saefix_run();
    t_pbuf md = t_pcopy("planted"), db = t_pcopy("r.db");
    CHECK(t_sh("%s sae train --model %s --layer 1 --data %s --db %s --out %s --expansion 1 --k 4 "
               "--steps 4 --batch 64 --eval-windows 2 --threads 2 > /dev/null 2>&1",
               t_bin(), md.s, t_path("p.bin"), db.s, t_path("sae-t")) == 0);
    CHECK_SQL(db.s, "SELECT count(*) FROM sae_runs", "1");
    const char *dirs[1] = {md.s};
    int n_pics = 0;
    char *html = report_html(dirs, 1, "sae-feature,sae-heads", &n_pics);
    CHECK(html && strstr(html, "<h3>Sparse autoencoders</h3>"));
    /* the evaluation row: the numbers as the database holds them */
    char *want = t_sql(db.s, "SELECT printf('<td>%.2f</td><td>%.3f</td><td>%.4g</td><td>%.4f</td>"
                             "<td>%.4f</td><td>%.4f</td><td>%.3f</td>', l0, fve, mse, ce_clean, "
                             "ce_sae, ce_zero, ce_recovered) FROM sae_runs");
    CHECKF(html && want && strstr(html, want), "no %s", want ? want : "?");
    free(want);
    /* the densest features first: 2 (everywhere, head 1.2, raises token 7 by 1), then 0
     * and 1 (head 1.0, raising 3 and 9 by 15) */
    const char *t2 = html ? strstr(html, "<tr><td>2</td><td>1.0000</td>") : NULL;
    const char *t0 = html ? strstr(html, "<tr><td>0</td>") : NULL;
    const char *t1 = html ? strstr(html, "<tr><td>1</td>") : NULL;
    CHECK(t2 && t0 && t1 && t2 < t0 && t0 < t1);
    CHECK(t2 && strstr(t2, "<td class=t>1.2</td><td>1.000</td>"));
    CHECK(t0 && strstr(t0, "<td class=t>1.0</td><td>1.000</td>"));
    CHECK(t0 && strstr(t0, "#3 (+15)"));
    CHECK(t2 && strstr(t2, "#7 (+1)"));
    /* three dashboards (three live features) and the head x feature picture */
    CHECK(n_pics == 4);
    CHECK(html && strstr(html, "src=\"planted-sae-feature-r1-f2.png\""));
    CHECK(html && strstr(html, "src=\"planted-sae-heads-r1.png\""));
    CHECK(al_file_exists(t_path("out/planted-sae-feature-r1-f0.png")));
    free(html);
    /* a healthy SAE has no warning; a tiny CE gap and many dead latents are flagged */
    CHECK(t_sh("sqlite3 %s 'UPDATE sae_runs SET ce_zero = ce_clean + 1, ce_recovered = 0.9, "
               "dead_frac = 0.1, dense_frac = 0'",
               db.s) == 0);
    html = report_html(dirs, 1, "sae-heads", NULL);
    CHECK(html && strstr(html, "<h3>Sparse autoencoders</h3>") && !strstr(html, "class=warn>Run"));
    free(html);
    CHECK(t_sh("sqlite3 %s 'UPDATE sae_runs SET ce_zero = ce_clean + 0.01, dead_frac = 0.5'",
               db.s) == 0);
    html = report_html(dirs, 1, "sae-heads", NULL);
    CHECK(html && strstr(html, "class=warn>Run 2: CE recovered"));
    CHECK(html && strstr(html, "gap of only 0.0100 nats"));
    CHECK(html && strstr(html, "class=warn>Run 2: 50% of the latents never fired"));
    free(html);
}

/* ------------------------------------------------- the features browser */

/* The interactive report of the planted model into t_path("out"); the
 * page (malloc'd). */
static char *interactive_page(void) {
    t_pbuf md = t_pcopy("planted");
    CHECK(t_sh("%s report --db %s --model %s --out %s --pictures sae-heads --interactive "
               "> /dev/null 2>&1",
               t_bin(), t_path("r.db"), md.s, t_path("out")) == 0);
    return t_slurp(t_path("out/index.html"));
}

/* The JSON of the model's explorers (cJSON, caller deletes). */
static cJSON *page_data(const char *html) {
    const char *key = "<script type=\"application/json\" id=\"al-data-planted\">";
    const char *a = html ? strstr(html, key) : NULL, *b = a ? strstr(a, "</script>") : NULL;
    if (!b) return NULL;
    a += strlen(key);
    char *txt = strndup(a, (size_t)(b - a));
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    return j;
}

/* The first cell sqlite3 prints for q, as a number (NaN: none). */
static double db_num(const char *q) {
    char *s = t_sql(t_path("r.db"), q);
    double v = s ? strtod(s, NULL) : NAN;
    free(s);
    return v;
}

/* The features the page embeds are the run's, every number as stored. */
TEST(saepics_viewer_json) {
    saefix_run();
    char *html = interactive_page();
    cJSON *j = page_data(html);
    CHECK(j != NULL);
    const cJSON *runs = cJSON_GetObjectItem(j, "sae"), *r = cJSON_GetArrayItem(runs, 0);
    CHECK(cJSON_GetArraySize(runs) == 1);
    CHECK(cJSON_GetObjectItem(r, "run") && cJSON_GetObjectItem(r, "run")->valuedouble == 1);
    CHECK(cJSON_GetObjectItem(r, "layer") && cJSON_GetObjectItem(r, "layer")->valuedouble == 1);
    const cJSON *fs = cJSON_GetObjectItem(r, "features"), *f;
    CHECK(cJSON_GetArraySize(fs) == 3);
    int order[3], k = 0;
    cJSON_ArrayForEach(f, fs) {
        int i = (int)cJSON_GetObjectItem(f, "feature")->valuedouble;
        if (k < 3) order[k++] = i;
        char q[256];
        /* exact: SQLite reads a 17-digit decimal back to the same double */
        snprintf(q, sizeof q, "SELECT density = %.17g FROM sae_features WHERE feature = %d",
                 cJSON_GetObjectItem(f, "density")->valuedouble, i);
        CHECK(db_num(q) == 1);
        snprintf(q, sizeof q, "SELECT count(*) FROM sae_feature_contexts WHERE feature = %d", i);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(f, "contexts")) == (int)db_num(q));
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(f, "contexts"), 0);
        CHECK(c0 != NULL);
        snprintf(q, sizeof q,
                 "SELECT activation = %.17g FROM sae_feature_contexts WHERE "
                 "feature = %d AND rank = 1",
                 c0 ? cJSON_GetArrayItem(c0, 1)->valuedouble : NAN, i);
        CHECK(db_num(q) == 1);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(f, "heads")) == PH);
    }
    CHECK(k == 3 && order[0] == 2 && order[1] == 0 && order[2] == 1); /* densest first */
    /* feature 0: raises token 3 by 15, all of it from head 1.0 */
    const cJSON *f0 = cJSON_GetArrayItem(fs, 1),
                *u0 = cJSON_GetArrayItem(cJSON_GetObjectItem(f0, "up"), 0);
    CHECK(u0 && !strcmp(cJSON_GetArrayItem(u0, 0)->valuestring, "#3") &&
          fabs(cJSON_GetArrayItem(u0, 1)->valuedouble - P_GAMMA) < 1e-5);
    const cJSON *h0 = cJSON_GetArrayItem(cJSON_GetObjectItem(f0, "heads"), 0);
    CHECK(h0 && !strcmp(cJSON_GetArrayItem(h0, 0)->valuestring, "1.0") &&
          fabs(cJSON_GetArrayItem(h0, 1)->valuedouble - 1) < 1e-12);
    CHECK(!strcmp(cJSON_GetObjectItem(f0, "top_head")->valuestring, "1.0"));
    /* the context windows: the file's tokens around each context, the activations
     * recomputed (feature 2: 1 everywhere; at the context itself: the stored one) */
    const cJSON *note = cJSON_GetObjectItem(r, "context_note");
    CHECK(cJSON_IsString(note) && note->valuestring[0] == 0);
    al_tokens d;
    al_err e;
    CHECK_OK(al_tokens_load(t_path("p.bin"), &d, &e), &e);
    int checked = 0;
    cJSON_ArrayForEach(f, fs) {
        int i = (int)cJSON_GetObjectItem(f, "feature")->valuedouble;
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(f, "contexts")) {
            int win = (int)cJSON_GetArrayItem(c, 2)->valuedouble,
                pos = (int)cJSON_GetArrayItem(c, 3)->valuedouble;
            char q[256];
            snprintf(q, sizeof q,
                     "SELECT offset FROM sae_feature_contexts WHERE feature = %d AND "
                     "window = %d AND pos = %d",
                     i, win, pos);
            long off = (long)db_num(q);
            const cJSON *ts = cJSON_GetArrayItem(c, 4), *as = cJSON_GetArrayItem(c, 5);
            int at = (int)cJSON_GetArrayItem(c, 6)->valuedouble, lo = pos - at;
            CHECK(at == (pos < 8 ? pos : 8) && cJSON_GetArraySize(ts) == cJSON_GetArraySize(as));
            for (int k = 0; k < cJSON_GetArraySize(ts); k++) {
                char want[32];
                snprintf(want, sizeof want, "#%d", d.tok[off + lo + k]);
                CHECK(!strcmp(cJSON_GetArrayItem(ts, k)->valuestring, want));
                double a = cJSON_GetArrayItem(as, k)->valuedouble;
                if (i == 2) CHECK(fabs(a - 1) < 1e-5);
                if (k == at) CHECK(fabs(a - cJSON_GetArrayItem(c, 1)->valuedouble) < 1e-5);
                checked++;
            }
        }
    }
    CHECKF(checked > 100, "%d context tokens checked", checked);
    al_tokens_free(&d);
    cJSON_Delete(j);
    free(html);
    /* the SAE gone: the tokens stay, the activations around the contexts go, a note says why */
    CHECK(t_sh("mv %s %s", t_path("sae"), t_path("sae-moved")) == 0);
    html = interactive_page();
    j = page_data(html);
    r = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "sae"), 0);
    note = cJSON_GetObjectItem(r, "context_note");
    CHECK(cJSON_IsString(note) && strstr(note->valuestring, "cannot be read"));
    const cJSON *c0 =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r,
                                                                                      "features"),
                                                                  0),
                                               "contexts"),
                           0);
    CHECK(cJSON_GetArraySize(cJSON_GetArrayItem(c0, 4)) > 1 &&
          cJSON_IsNull(cJSON_GetArrayItem(c0, 5)));
    cJSON_Delete(j);
    free(html);
    /* without --interactive the page has no data and no script */
    t_pbuf md = t_pcopy("planted");
    CHECK(t_sh("%s report --db %s --model %s --out %s --pictures sae-heads > /dev/null 2>&1",
               t_bin(), t_path("r.db"), md.s, t_path("static")) == 0);
    html = t_slurp(t_path("static/index.html"));
    CHECK(html && !strstr(html, "<script") && strstr(html, "<h3>Sparse autoencoders</h3>"));
    free(html);
}

/* A row of sqlite3 output split at '|' into at most n fields (in place). */
static int split(char *row, char **f, int n) {
    int k = 0;
    for (char *p = row; p && k < n; k++) {
        f[k] = p;
        p = strchr(p, '|');
        if (p) *p++ = 0;
    }
    return k;
}

/* The browser: sorting and clicking show the rows sqlite3 reads. */
TEST(saepics_viewer_browser) {
    if (access("/usr/bin/chromium", X_OK) != 0) t_skip("/usr/bin/chromium is not installed");
    if (t_sh("node --version >/dev/null 2>&1") != 0) t_skip("node is not installed");
    if (access("tests/browser/node_modules/puppeteer-core/package.json", R_OK) != 0)
        t_skip("puppeteer-core is not installed (make deps-test: npm ci in tests/browser)");
    saefix_run();
    char *html = interactive_page();
    free(html);
    cJSON *spec = cJSON_CreateObject(), *sae = cJSON_AddArrayToObject(spec, "sae");
    t_pbuf page = t_pcopy("out/index.html");
    cJSON_AddStringToObject(spec, "page", page.s);
    static const char *const sorts[3][2] =
        {{"density", "density DESC, feature"},
         {"induction", "induction_index IS NULL, induction_index DESC, density DESC, feature"},
         {"head", "top_head IS NULL, top_layer, top_head, top_share DESC, feature"}};
    for (int s = 0; s < 3; s++) {
        char q[256];
        snprintf(q, sizeof q,
                 "SELECT group_concat(feature) FROM (SELECT feature FROM sae_features "
                 "ORDER BY %s)",
                 sorts[s][1]);
        char *order = t_sql(t_path("r.db"), q);
        cJSON *w = cJSON_CreateObject(), *o = cJSON_AddArrayToObject(w, "order");
        cJSON_AddStringToObject(w, "model", "planted");
        cJSON_AddNumberToObject(w, "run", 1);
        cJSON_AddStringToObject(w, "sort", sorts[s][0]);
        for (char *t = order ? strtok(order, ",") : NULL; t; t = strtok(NULL, ","))
            cJSON_AddItemToArray(o, cJSON_CreateString(t));
        free(order);
        cJSON_AddItemToArray(sae, w);
    }
    /* feature 1's dashboard: its first two contexts, the token it raises most, its heads */
    cJSON *w = cJSON_CreateObject();
    cJSON_AddStringToObject(w, "model", "planted");
    cJSON_AddNumberToObject(w, "run", 1);
    cJSON_AddNumberToObject(w, "click", 1);
    cJSON *ctx = cJSON_AddArrayToObject(w, "ctx"), *up = cJSON_AddArrayToObject(w, "up"),
          *heads = cJSON_AddArrayToObject(w, "heads");
    char *rows = t_sql(t_path("r.db"), "SELECT rank - 1, token_str, printf('%.17g', activation) "
                                       "FROM sae_feature_contexts WHERE feature = 1 AND rank <= 2 "
                                       "ORDER BY rank");
    for (char *line = rows ? strtok(rows, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char *f[3];
        if (split(line, f, 3) != 3) continue;
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, cJSON_CreateNumber(atoi(f[0])));
        cJSON_AddItemToArray(a, cJSON_CreateString(f[1]));
        cJSON_AddItemToArray(a, cJSON_CreateString(f[2]));
        cJSON_AddItemToArray(ctx, a);
    }
    free(rows);
    CHECK(cJSON_GetArraySize(ctx) == 2);
    char *u = t_sql(t_path("r.db"), "SELECT token_str, printf('%.17g', value) FROM "
                                    "sae_feature_logits WHERE feature = 1 AND direction = 'up' "
                                    "AND rank = 1");
    char *uf[2];
    if (u && split(u, uf, 2) == 2) {
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, cJSON_CreateNumber(0));
        cJSON_AddItemToArray(a, cJSON_CreateString(uf[0]));
        cJSON_AddItemToArray(a, cJSON_CreateString(uf[1]));
        cJSON_AddItemToArray(up, a);
        CHECK(!strcmp(uf[0], "#9"));
    }
    free(u);
    for (int h = 0; h < PH; h++) {
        char q[200];
        snprintf(q, sizeof q,
                 "SELECT printf('%%.17g', share) FROM sae_feature_heads WHERE "
                 "feature = 1 AND head = %d",
                 h);
        char *v = t_sql(t_path("r.db"), q), name[16];
        snprintf(name, sizeof name, "1.%d", h);
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, cJSON_CreateString(name));
        cJSON_AddItemToArray(a, cJSON_CreateString(v ? v : "?"));
        cJSON_AddItemToArray(heads, a);
        free(v);
    }
    cJSON_AddItemToArray(sae, w);
    cJSON_AddNumberToObject(spec, "scripts", 1);
    char *txt = cJSON_Print(spec);
    t_write("spec.json", txt);
    free(txt);
    cJSON_Delete(spec);
    int rc = t_sh("node tests/browser/check.js %s > %s 2> %s", t_path("spec.json"),
                  t_path("verdict.json"), t_path("node.err"));
    char *v = t_slurp(t_path("verdict.json")), *err = t_slurp(t_path("node.err"));
    cJSON *j = v ? cJSON_Parse(v) : NULL;
    CHECKF(rc == 0 && cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")),
           "browser check failed (exit %d): "
           "%s %s",
           rc, v ? v : "(no verdict)", err ? err : "");
    cJSON_Delete(j);
    free(v);
    free(err);
}

/* The token-row panel (plot.h's al_tokrows): a token with a value is
 * filled with its scale colour and, in the marked column, outlined in
 * ink; one without is plain text on the background (odd rows banded);
 * columns are as wide as their widest token plus padding. */
TEST(saepics_token_rows) {
    static const char *const tok[6] = {"a", "bb", NULL, "a", "ccc", "dd"};
    const float v[6] = {NAN, 1.0f, NAN, NAN, NAN, 0.0f};
    al_cscale cs = {.diverging = 0, .lo = 0, .hi = 1, .label = "activation"};
    al_panel pn = {.kind = AL_PANEL_TOKENS};
    pn.tr =
        (al_tokrows){.tok = tok, .v = v, .rows = 2, .cols = 3, .cs = &cs, .mark = 1, .mark_col = 1};
    al_figure f = {.title = "t", .panels = &pn, .n_panels = 1};
    al_image im;
    al_plot_geom g;
    al_err e;
    CHECK_OK(al_plot_figure(&f, &im, &g, &e), &e);
    const int pitch = g.cell_h, c1 = g.mx + 13; /* column 0: "a" in 12 px, then 1 px */
    CHECK(pitch == 17);
    CHECKF(g.mw == 13 + 25 + 19, "mw %d", g.mw); /* "ccc": 3 cells + 6 px; "dd": 2 cells + 6 */
    CHECK(al_image_get(&im, c1 + 1, g.my + 8) == al_cmap_viridis(1.0)); /* row 0, "bb" */
    CHECK(al_image_get(&im, c1, g.my + 8) == AL_PLOT_INK); /* its outline */
    CHECK(al_image_get(&im, g.mx + 1, g.my + 8) == 0xFFFFFFu); /* row 0, "a" */
    CHECK(al_image_get(&im, g.mx + 1, g.my + pitch + 8) == 0xF4F4F4u); /* row 1: banded */
    CHECK(al_image_get(&im, c1, g.my + pitch + 8) == AL_PLOT_INK); /* "ccc": the marked column */
    CHECK(al_image_get(&im, c1 + 25 + 1, g.my + pitch + 8) == al_cmap_viridis(0.0)); /* "dd": 0 */
    al_image_free(&im);
    /* no tokens, or no scale: refused */
    pn.tr.cs = NULL;
    CHECK(al_plot_figure(&f, &im, NULL, &e) == -1 && strstr(e.msg, "token panel 0"));
}
