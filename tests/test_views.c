/* test_views.c -- the generic result shapes (view.h) end to end: every
 * shape stored through al_store_put_views in a real run and read back
 * bitwise (store_views.h), drawn by `heatmap --what view`, shown by the
 * report, printed as text and JSON (views_out.h), copied by `db merge`;
 * and a version-9 database gains table view_cells on open. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attnlab/checkpoint.h"
#include "attnlab/store.h"
#include "attnlab/store_views.h"
#include "attnlab/views_out.h"
#include "attnlab/stats.h"
#include "attnlab/thresholds.h"
#include "test.h"

/* t_tiny_model's shape: 2 layers x 4 heads */
#define VL 2
#define VH 4
#define VLH (VL * VH)
#define NPOS 31

/* The values of every shape, with NaNs where a shape allows "no value". */
typedef struct fixture {
    double head[VLH], model[1], pair[VLH * VLH], edge[5], pos[NPOS];
    al_interval ci[VLH * VLH]; /* se 0.01·(i + 1): the head and pair views' */
    al_view v[5];
} fixture;

static const char *const edge_from[5] = {"embed", "0.3", "1.2", "embed", "0.1"};
static const char *const edge_to[5] = {"0.3", "1.2.k", "logits", "logits", "1.2.k"};

static void fixture_make(fixture *f) {
    for (int i = 0; i < VLH; i++) f->head[i] = i * 0.5 - 1.25;
    f->head[3] = NAN;
    f->model[0] = 1.0 / 3.0;
    /* a sender feeds only the receivers of later layers */
    for (int i = 0; i < VLH; i++)
        for (int j = 0; j < VLH; j++)
            f->pair[i * VLH + j] = i / VH < j / VH ? (i * VLH + j) / 7.0 - 3.0 : NAN;
    const double ev[5] = {0.1, -2.5, 1.0 / 3.0, NAN, 1e-300};
    memcpy(f->edge, ev, sizeof ev);
    for (int i = 0; i < VLH * VLH; i++) f->ci[i] = (al_interval){0.01 * (i + 1), -1, 1};
    for (int i = 0; i < NPOS; i++) f->pos[i] = sin(i) / (i + 1.0);
    f->pos[5] = NAN;
    const al_view v[5] = {
        {.metric = "t_head",
         .title = "a head score",
         .shape = AL_VIEW_HEAD,
         .L = VL,
         .H = VH,
         .v = f->head,
         .ci = f->ci,
         .ci_level = 0.95,
         .ci_n = 7,
         .ci_boot = 500},
        {.metric = "t_model", .title = "a model score", .shape = AL_VIEW_MODEL, .v = f->model},
        {.metric = "t_pair",
         .title = "a pair score",
         .shape = AL_VIEW_PAIR,
         .L = VL,
         .H = VH,
         .v = f->pair,
         .ci = f->ci,
         .ci_level = 0.95,
         .ci_n = 7,
         .ci_boot = 500},
        {.metric = "t_edge",
         .title = "an edge score",
         .shape = AL_VIEW_EDGE,
         .v = f->edge,
         .n = 5,
         .from = edge_from,
         .to = edge_to},
        {.metric = "t_pos",
         .title = "a position score",
         .shape = AL_VIEW_POS,
         .v = f->pos,
         .n = NPOS},
    };
    memcpy(f->v, v, sizeof v);
}

/* The same double, or both NaN (NaN is stored as NULL). */
static int same(double a, double b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* A finished run of kind "viewtest" of model dir holding f's views. */
static void store_fixture(const char *db, const char *dir, const fixture *f, int64_t *run) {
    al_store *st;
    al_err e;
    al_model m;
    int64_t mid;
    CHECK_OK(al_store_open(db, &st, &e), &e);
    CHECK_OK(al_ckpt_load(dir, &m, NULL, &e), &e);
    CHECK_OK(al_store_model(st, dir, NULL, &m, NULL, &mid, &e), &e);
    CHECK_OK(al_store_run_begin(st, "viewtest", "{}", mid, run, &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    CHECK_OK(al_store_put_views(st, *run, mid, f->v, 5, &e), &e);
    CHECK_OK(al_store_run_finish(st, *run, &e), &e);
    al_model_free(&m);
    al_store_close(st);
}

TEST(views_store_read_back_every_shape) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), m2 = t_pcopy("m2");
    t_tiny_model(dir.s, 2, 1);
    fixture f;
    fixture_make(&f);
    int64_t run;
    store_fixture(db.s, m2.s, &f, &run);
    CHECK_SQL(db.s, "SELECT group_concat(shape, ',') FROM (SELECT shape FROM views ORDER BY shape)",
              "edge,head,model,pair,pos");
    /* pair: only the cells with a value (4 senders x 4 receivers), edges
     * and positions every one */
    CHECK_SQL(db.s,
              "SELECT metric, count(*), count(value) FROM view_cells GROUP BY metric "
              "ORDER BY metric",
              "t_edge|5|4\nt_pair|16|16\nt_pos|31|30");
    CHECK_SQL(db.s,
              "SELECT row_label, col_label FROM view_cells WHERE metric = 't_pair' "
              "ORDER BY row, col LIMIT 1",
              "0.0|1.0");
    /* the views' intervals: a head's under its layer and head, a pair
     * cell's under its receiver with the sender's index as pos */
    char want[64];
    snprintf(want, sizeof want, "%d|1|7", VLH);
    CHECK_SQL(
        db.s,
        "SELECT count(*), sum(abs(se - 0.01 * (layer * " AL_TH_STR(
            VH) " + head + 1)) < "
                "1e-12) = count(*), max(n_items) FROM score_intervals WHERE metric = 't_head'",
        want);
    CHECK_SQL(db.s,
              "SELECT count(*), sum(abs(se - 0.01 * (pos * " AL_TH_STR(VLH) " + layer * " AL_TH_STR(
                  VH) " + head + 1)) < 1e-12) FROM score_intervals WHERE metric = 't_pair'",
              "16|16");
    CHECK_SQL(db.s,
              "SELECT row_label || '>' || col_label FROM view_cells WHERE metric = 't_edge' "
              "AND row = 1",
              "0.3>1.2.k");
    al_store *st;
    al_err e;
    CHECK_OK(al_store_open(db.s, &st, &e), &e);
    for (int k = 0; k < 5; k++) {
        const al_view *w = &f.v[k];
        al_view_read r;
        int found = 0;
        CHECK_OK(al_store_read_view(st, (long)run, w->metric, VL, VH, &r, &found, &e), &e);
        CHECKF(found && r.v.shape == w->shape, "%s: found %d shape %d", w->metric, found,
               r.v.shape);
        if (!found) continue;
        CHECK(strcmp(r.v.metric, w->metric) == 0 && strcmp(r.v.title, w->title) == 0);
        int cnt = w->shape == AL_VIEW_HEAD    ? VLH
                  : w->shape == AL_VIEW_PAIR  ? VLH * VLH
                  : w->shape == AL_VIEW_MODEL ? 1
                                              : w->n;
        if (w->shape == AL_VIEW_EDGE || w->shape == AL_VIEW_POS) CHECK(r.v.n == w->n);
        for (int i = 0; i < cnt; i++)
            CHECKF(same(r.v.v[i], w->v[i]), "%s[%d]: %.17g, stored %.17g", w->metric, i, r.v.v[i],
                   w->v[i]);
        for (int i = 0; w->shape == AL_VIEW_EDGE && i < w->n; i++)
            CHECK(strcmp(r.v.from[i], w->from[i]) == 0 && strcmp(r.v.to[i], w->to[i]) == 0);
        al_view_read_free(&r);
        CHECK(r.val == NULL && r.v.n == 0);
    }
    /* a metric the run does not have */
    al_view_read r;
    int found = 1;
    CHECK_OK(al_store_read_view(st, (long)run, "nope", VL, VH, &r, &found, &e), &e);
    CHECK(!found && r.val == NULL);
    al_view_read_free(&r);
    /* bad views are refused with their name */
    int64_t bad;
    CHECK_OK(al_store_run_begin(st, "viewtest", "{}", 1, &bad, &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    const char *const holes[2] = {"embed", NULL};
    al_view nolab = {.metric = "t_bad",
                     .title = "x",
                     .shape = AL_VIEW_EDGE,
                     .v = f.edge,
                     .n = 2,
                     .from = edge_from,
                     .to = holes};
    CHECK(al_store_put_views(st, bad, 1, &nolab, 1, &e) == -1 && strstr(e.msg, "t_bad"));
    al_view noheads = {.metric = "t_bad2", .title = "x", .shape = AL_VIEW_PAIR, .v = f.pair};
    CHECK(al_store_put_views(st, bad, 1, &noheads, 1, &e) == -1 && strstr(e.msg, "t_bad2"));
    al_view unknown = {.metric = "t_bad3", .title = "x", .shape = (al_view_shape)42, .v = f.pair};
    CHECK(al_store_put_views(st, bad, 1, &unknown, 1, &e) == -1 && strstr(e.msg, "unknown shape"));
    CHECK_OK(al_store_run_fail(st, bad, "test", &e), &e);
    al_store_close(st);
    CHECK_SQL(db.s, "SELECT count(*) FROM views WHERE metric LIKE 't_bad%'", "0");
}

/* A PNG's size from its IHDR (0 when it is not a PNG). */
static int png_size(const char *path, int *w, int *h) {
    unsigned char b[24] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    if (n < 24 || memcmp(b, "\x89PNG\r\n\x1a\n", 8) != 0) return 0;
    *w = b[16] << 24 | b[17] << 16 | b[18] << 8 | b[19];
    *h = b[20] << 24 | b[21] << 16 | b[22] << 8 | b[23];
    return 1;
}

TEST(views_pictures_report_merge) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), m2 = t_pcopy("m2"), rep = t_pcopy("rep"),
           out = t_pcopy("out.txt"), merged = t_pcopy("merged.db");
    t_tiny_model(dir.s, 2, 1);
    fixture f;
    fixture_make(&f);
    int64_t run;
    store_fixture(db.s, m2.s, &f, &run);
    /* every shape but the one number is drawn; the size printed is the file's */
    const char *const metrics[4] = {"t_head", "t_pair", "t_edge", "t_pos"};
    int pw[4] = {0}, ph[4] = {0};
    for (int k = 0; k < 4; k++) {
        char png[1100];
        snprintf(png, sizeof png, "%s/%s.png", dir.s, metrics[k]);
        int rc = t_sh("%s heatmap --what view --metric %s --model %s --db %s --out %s > %s 2>&1",
                      t_bin(), metrics[k], m2.s, db.s, png, out.s);
        CHECKF(rc == 0, "%s: exit %d", metrics[k], rc);
        int w = 0, h = 0;
        CHECKF(png_size(png, &pw[k], &ph[k]), "%s: no PNG", metrics[k]);
        CHECK(t_reported_size(out.s, &w, &h) == 0 && w == pw[k] && h == ph[k]);
        CHECKF(pw[k] >= 200 && ph[k] >= 150 && pw[k] <= 4000 && ph[k] <= 4000, "%s: %d x %d",
               metrics[k], pw[k], ph[k]);
    }
    /* the 8 x 8 pair grid is taller than the 2 x 4 head grid */
    CHECK(ph[1] > ph[0]);
    /* an SVG names the heads and labels its edges */
    char svg[1100];
    snprintf(svg, sizeof svg, "%s/e.svg", dir.s);
    CHECK(t_sh("%s heatmap --what view --metric t_edge --model %s --db %s --out %s > /dev/null "
               "2>&1",
               t_bin(), m2.s, db.s, svg) == 0);
    char *s = t_slurp(svg);
    CHECK(s && strstr(s, "1.2.k") && strstr(s, "logits") && strstr(s, "an edge score"));
    free(s);
    /* one number has nothing to draw: one clear refusal, no file */
    CHECK(t_sh("%s heatmap --what view --metric t_model --model %s --db %s --out %s/x.png "
               "> /dev/null 2> %s",
               t_bin(), m2.s, db.s, dir.s, out.s) == 1);
    CHECK(t_one_line(out.s, "nothing to draw"));
    /* the report: each shape under its heading, with its title and picture */
    CHECK(t_sh("%s report --db %s --model %s --out %s > /dev/null 2>&1", t_bin(), db.s, m2.s,
               rep.s) == 0);
    char html[1100];
    snprintf(html, sizeof html, "%s/index.html", rep.s);
    char *h = t_slurp(html);
    CHECK(h != NULL);
    const char *const want[] = {"<h3>Per-head results</h3>",
                                "<h3>Per-head-pair results</h3>",
                                "<h3>Per-edge results</h3>",
                                "<h3>Per-position results</h3>",
                                "a head score",
                                "a pair score",
                                "an edge score",
                                "a position score",
                                "-view-t_pair.png",
                                "-view-t_edge.png",
                                "-view-t_pos.png",
                                "<td>1.2.k</td>",
                                "31 positions"};
    for (size_t i = 0; h && i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(h, want[i]), "report lacks [%s]", want[i]);
    /* pair, edge, pos, in that order */
    CHECK(h && strstr(h, "Per-head-pair") < strstr(h, "Per-edge") &&
          strstr(h, "Per-edge") < strstr(h, "Per-position"));
    free(h);
    /* db merge copies the cells with their run */
    CHECK(t_sh("%s db merge %s %s > /dev/null 2>&1", t_bin(), merged.s, db.s) == 0);
    CHECK_SQL(merged.s, "SELECT count(*), count(value) FROM view_cells", "52|50");
    CHECK_SQL(merged.s,
              "SELECT count(*) FROM view_cells c JOIN runs r USING (run_id) "
              "WHERE r.kind = 'viewtest' AND c.model_id = r.model_id",
              "52");
}

TEST(views_text_and_json) {
    fixture f;
    fixture_make(&f);
    char *txt = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&txt, &len);
    CHECK(m != NULL);
    if (!m) return;
    /* the text is drawn from the document alone */
    cJSON *d5 = cJSON_CreateObject();
    CHECK(d5 && al_views_json(d5, f.v, 5, NULL) == 0);
    al_views_text(m, d5);
    cJSON_Delete(d5);
    fclose(m);
    const char *const want[] = {
        "head               t_head\n0.0        -1.2500±0.0100\n", /* ± its se */
        "0.3                   nan\n",
        "t_model (a model score): 0.333333\n",
        "t_pair (a pair score): 16 head pairs with a value\n",
        "0.0    -> 1.0                 -2.4286\n",
        "t_edge (an edge score): 5 edges\n",
        "0.3    -> 1.2.k               -2.5000\n",
        "embed  -> logits                  nan\n",
        "t_pos (a position score): 31 positions\n",
        "1                    0.4207\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(txt && strstr(txt, want[i]), "text lacks [%s] in:\n%s", want[i], txt ? txt : "");
    free(txt);
    /* the head-only table is as it always was */
    txt = NULL;
    m = open_memstream(&txt, &len);
    cJSON *d1 = cJSON_CreateObject();
    unsigned char off[VLH] = {0};
    off[1] = 1; /* a masked head says so after its row */
    CHECK(d1 && al_views_json(d1, f.v, 1, off) == 0);
    al_views_text(m, d1);
    cJSON_Delete(d1);
    fclose(m);
    CHECK(txt && strncmp(txt, "head  ", 6) == 0 && strstr(txt, "  t_head: a head score\n") &&
          !strstr(txt, "t_pair") && strstr(txt, "0.1 ") && strstr(strstr(txt, "0.1 "), "  off\n"));
    free(txt);

    cJSON *doc = cJSON_CreateObject();
    CHECK(al_views_json(doc, f.v, 5, NULL) == 0);
    char *js = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    cJSON *j = js ? cJSON_Parse(js) : NULL; /* what a reader of stdout parses */
    CHECK(j != NULL);
    cJSON *heads = cJSON_GetObjectItemCaseSensitive(j, "heads");
    CHECK(cJSON_GetArraySize(heads) == VLH);
    CHECK(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "t_model")));
    cJSON *pair = cJSON_GetObjectItemCaseSensitive(j, "t_pair");
    cJSON *cells = cJSON_GetObjectItemCaseSensitive(pair, "cells");
    CHECK(cJSON_GetArraySize(cells) == 16);
    cJSON *c0 = cJSON_GetArrayItem(cells, 0);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pair, "shape")), "pair") ==
          0);
    CHECK(
        strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c0, "sender")), "0.0") == 0 &&
        strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c0, "receiver")), "1.0") == 0);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c0, "value")) == f.pair[VH]);
    cJSON *edge = cJSON_GetObjectItemCaseSensitive(j, "t_edge");
    cJSON *edges = cJSON_GetObjectItemCaseSensitive(edge, "edges");
    CHECK(cJSON_GetArraySize(edges) == 5);
    CHECK(strcmp(cJSON_GetStringValue(
                     cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(edges, 1), "receiver")),
                 "1.2.k") == 0);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(edges, 3), "value")));
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(edge, "title")),
                 "an edge score") == 0);
    cJSON *vals =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "t_pos"), "values");
    CHECK(cJSON_GetArraySize(vals) == NPOS && cJSON_IsNull(cJSON_GetArrayItem(vals, 5)));
    CHECK(cJSON_GetNumberValue(cJSON_GetArrayItem(vals, 7)) == f.pos[7]);
    cJSON_Delete(j);
    free(js);
}

/* A version-9 file (before view_cells) gains the table on open; its views
 * rows are kept. */
TEST(views_migrates_version_9) {
    t_pbuf db = t_pcopy("r.db");
    al_store *st;
    al_err e;
    CHECK_OK(al_store_open(db.s, &st, &e), &e);
    al_store_close(st);
    CHECK(
        t_sh(
            "sqlite3 '%s' \"" T_DROP_SAE_SQL
            "ALTER TABLE models DROP COLUMN data_tokens; ALTER TABLE attribution_runs DROP COLUMN centred; DROP TABLE view_cells; INSERT INTO models(sha256, added_at) "
            "VALUES('x', 'now'); INSERT INTO runs(kind, started_at, status, attnlab_version) "
            "VALUES('attnstats', 'now', 'done', 'v'); INSERT INTO views VALUES(1, 1, "
            "'attn_entropy', 'head', 'attention entropy (nats)'); PRAGMA user_version = 9\"",
            db.s) == 0);
    CHECK_SQL(db.s, "SELECT count(*) FROM sqlite_schema WHERE name = 'view_cells'", "0");
    CHECK_OK(al_store_open(db.s, &st, &e), &e);
    al_store_close(st);
    char v[16];
    snprintf(v, sizeof v, "%d", AL_STORE_SCHEMA_VERSION);
    CHECK_SQL(db.s, "PRAGMA user_version", v);
    CHECK_SQL(db.s, "SELECT group_concat(name, ' ') FROM pragma_table_info('view_cells')",
              "run_id model_id metric row col row_label col_label value");
    CHECK_SQL(db.s, "SELECT metric, shape FROM views", "attn_entropy|head");
}
