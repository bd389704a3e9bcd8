/* test_sweep_summary.c -- findings across the seeds of a sweep: the views
 * sweep_models, sweep_findings and sweep_summary (schema v7) on databases
 * crafted row by row with the sqlite3 CLI, so every number is known; the
 * sweep-induction picture; the report's "Across seeds" section; and a
 * small end to end run on two tiny models trained with different seeds. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/image.h"
#include "attnlab/plot.h"
#include "attnlab/png.h"
#include "attnlab/stats.h"
#include "attnlab/store.h"
#include "test.h"

/* A merged database of two settings. Models 1-3 are 2-layer seeds 1-3 of
 * train.lr=0.01, model 4 seed 1 of train.lr=0.03, model 5 a 1-layer model
 * of train.lr=0.01, model 6 has only a failed run. Failed runs, older done
 * runs and other metrics carry numbers that would change the answer if
 * they were counted. */
static const char CRAFTED[] =
    "INSERT INTO merge_sources(source_id, path, merged_at, experiment, task, n_tasks, setting, "
    "seed, params_json) VALUES\n"
    " (1, 'a/t0.db', 'now', 'x', 0, 4, 'train.lr=0.01', 1, '{}'),\n"
    " (2, 'a/t1.db', 'now', 'x', 1, 4, 'train.lr=0.01', 2, '{}'),\n"
    " (3, 'a/t2.db', 'now', 'x', 2, 4, 'train.lr=0.01', 3, '{}'),\n"
    " (4, 'a/t3.db', 'now', 'x', 3, 4, 'train.lr=0.03', 1, '{}');\n"
    "INSERT INTO models(model_id, sha256, n_layers, seed, added_at) VALUES\n"
    " (1, 'a', 2, 11, 'now'), (2, 'b', 2, 12, 'now'), (3, 'c', 2, 13, 'now'),\n"
    " (4, 'd', 2, 14, 'now'), (5, 'e', 1, 15, 'now'), (6, 'f', 2, 16, 'now');\n"
    "INSERT INTO runs(run_id, kind, model_id, started_at, status, attnlab_version, source_id) "
    "VALUES\n"
    " (1, 'train', 1, 'now', 'failed', 'v', 1), (2, 'train', 1, 'now', 'done', 'v', 1),\n"
    " (3, 'scores', 1, 'now', 'done', 'v', 1), (4, 'scores', 1, 'now', 'done', 'v', 1),\n"
    " (5, 'scores', 1, 'now', 'failed', 'v', 1), (6, 'circuits', 1, 'now', 'done', 'v', 1),\n"
    " (7, 'ablate', 1, 'now', 'done', 'v', 1), (8, 'ablate', 1, 'now', 'done', 'v', 1),\n"
    " (9, 'ablate', 1, 'now', 'failed', 'v', 1),\n"
    " (10, 'train', 2, 'now', 'done', 'v', 2), (11, 'scores', 2, 'now', 'done', 'v', 2),\n"
    " (12, 'circuits', 2, 'now', 'done', 'v', 2), (13, 'ablate', 2, 'now', 'done', 'v', 2),\n"
    " (14, 'train', 3, 'now', 'done', 'v', 3), (15, 'scores', 3, 'now', 'done', 'v', 3),\n"
    " (16, 'train', 4, 'now', 'done', 'v', 4), (17, 'scores', 4, 'now', 'done', 'v', 4),\n"
    " (18, 'train', 5, 'now', 'done', 'v', 1), (19, 'scores', 5, 'now', 'done', 'v', 1),\n"
    " (20, 'train', 6, 'now', 'failed', 'v', 2);\n"
    /* model 1: crosses at 200 (the failed run at 50); prev_token ignored */
    "INSERT INTO train_head_scores(run_id, step, layer, head, metric, value) VALUES\n"
    " (1, 50, 1, 0, 'induction', 0.9),\n"
    " (2, 100, 0, 0, 'induction', 0.1), (2, 100, 1, 1, 'induction', 0.2),\n"
    " (2, 100, 0, 1, 'prev_token', 0.9),\n"
    " (2, 200, 0, 0, 'induction', 0.3), (2, 200, 1, 1, 'induction', 0.45),\n"
    " (2, 300, 1, 1, 'induction', 0.5),\n"
    /* model 2: crosses at 400; model 3 never; model 4 at 150; model 5 never */
    " (10, 200, 0, 0, 'induction', 0.2), (10, 400, 1, 0, 'induction', 0.41),\n"
    " (10, 400, 1, 1, 'induction', 0.3), (10, 600, 1, 0, 'induction', 0.6),\n"
    " (14, 100, 1, 0, 'induction', 0.2), (14, 200, 1, 0, 'induction', 0.3),\n"
    " (16, 100, 1, 2, 'induction', 0.1), (16, 150, 1, 2, 'induction', 0.5),\n"
    " (18, 100, 0, 0, 'induction', 0.05),\n"
    " (20, 100, 1, 0, 'induction', 0.9);\n"
    "INSERT INTO head_scores(run_id, model_id, layer, head, metric, value) VALUES\n"
    " (3, 1, 1, 1, 'induction', 0.9), (5, 1, 1, 1, 'induction', 0.95),\n"
    " (4, 1, 1, 1, 'induction', 0.7), (4, 1, 1, 0, 'induction', 0.2),\n"
    /* model 1 copying: 0.0 and 1.0 agree, 0.1 does not, 1.1 has no ablation */
    " (4, 1, 0, 0, 'copying_eigen', 0.8), (4, 1, 0, 0, 'copying_ablation', 0.02),\n"
    " (4, 1, 0, 1, 'copying_eigen', 0.6), (4, 1, 0, 1, 'copying_ablation', 0.0),\n"
    " (4, 1, 1, 0, 'copying_eigen', -0.2), (4, 1, 1, 0, 'copying_ablation', -0.01),\n"
    " (4, 1, 1, 1, 'copying_eigen', 0.1),\n"
    " (11, 2, 1, 0, 'induction', 0.55),\n"
    " (11, 2, 0, 0, 'copying_eigen', 0.9), (11, 2, 0, 0, 'copying_ablation', 0.05),\n"
    " (15, 3, 1, 0, 'induction', 0.35), (17, 4, 1, 2, 'induction', 0.8),\n"
    " (19, 5, 0, 0, 'induction', 0.1);\n"
    /* model 1: the top K pair 0.1 -> 1.2 is the largest |interaction|
     * (the Q pair scores higher and does not count); model 2: it is not */
    "INSERT INTO composition(run_id, model_id, kind, layer1, head1, layer2, head2, score) VALUES\n"
    " (6, 1, 'K', 0, 1, 1, 2, 0.6), (6, 1, 'K', 0, 3, 1, 1, 0.4), (6, 1, 'Q', 0, 0, 1, 0, 0.9),\n"
    " (12, 2, 'K', 0, 2, 1, 3, 0.7), (12, 2, 'K', 0, 1, 1, 3, 0.5);\n"
    "INSERT INTO ablations(run_id, model_id, method, kind, heads, n_heads, interaction) VALUES\n"
    " (7, 1, 'mean', 'none', '', 0, NULL), (7, 1, 'mean', 'single', '0.1', 1, NULL),\n"
    " (7, 1, 'mean', 'pair', '0.1,1.2', 2, -0.5), (7, 1, 'mean', 'pair', '0.3,1.1', 2, 0.2),\n"
    " (8, 1, 'mean', 'single', '0.1', 1, NULL),\n"
    " (9, 1, 'mean', 'pair', '0.3,1.1', 2, 5.0),\n"
    " (13, 2, 'zero', 'pair', '0.1,1.3', 2, -0.3), (13, 2, 'zero', 'pair', '0.2,1.3', 2, 0.1);\n";

/* Every column, rounded so the text is exact; NULL prints empty. */
#define SUMMARY_Q                                                                                  \
    "SELECT setting, n_layers, n_seeds, n_models, n_scored, round(share_with_induction_head, 6), " \
    "n_curves, n_never_crossed, round(first_step_mean, 6), round(first_step_sd, 6), "              \
    "first_step_min, first_step_max, round(best_induction_mean, 6), best_induction_min, "          \
    "best_induction_max, n_kcomp, round(kcomp_matches_interaction, 6), n_copying, "                \
    "round(copying_agreement, 6) FROM sweep_summary"

/* A fresh database (schema through al_store_open) with sql run in it. */
static void make_db(const char *db, const char *sql) {
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    const char *f = t_write("craft.sql", sql);
    CHECK(t_sh("sqlite3 -bail '%s' < '%s'", db, f) == 0);
}

TEST(sweep_summary_every_column) {
    t_pbuf db = t_pcopy("m.db");
    make_db(db.s, CRAFTED);
    /* per model: its group, seed (the sweep's, not models.seed), curve,
     * first crossing, K-composition match and copying agreement */
    CHECK_SQL(db.s,
              "SELECT model_id, setting, seed, n_layers, best_induction, has_curve, first_step, "
              "kcomp_match, round(copying_agreement, 6) FROM sweep_findings ORDER BY model_id",
              "1|train.lr=0.01|1|2|0.7|1|200|1|0.666667\n"
              "2|train.lr=0.01|2|2|0.55|1|400|0|1.0\n"
              "3|train.lr=0.01|3|2|0.35|1|||\n"
              "4|train.lr=0.03|1|2|0.8|1|150||\n"
              "5|train.lr=0.01|1|1|0.1|1|||");
    /* lr=0.01, 2 layers: 2 of 3 above 0.4; crossings 200 and 400, one
     * never: mean 300, sample sd sqrt(2 * 100^2 / 1) = 141.421356 */
    CHECK_SQL(
        db.s, SUMMARY_Q,
        "train.lr=0.01|1|1|1|1|0.0|1|1|||||0.1|0.1|0.1|0||0|\n"
        "train.lr=0.01|2|3|3|3|0.666667|3|1|300.0|141.421356|200|400|0.533333|0.35|0.7|2|0.5|2|"
        "0.833333\n"
        "train.lr=0.03|2|1|1|1|1.0|1|0|150.0||150|150|0.8|0.8|0.8|0||0|");
    /* the columns design.md names, in order */
    CHECK_SQL(db.s, "SELECT group_concat(name, ' ') FROM pragma_table_info('sweep_summary')",
              "setting n_layers n_seeds n_models n_scored share_with_induction_head n_curves "
              "n_never_crossed first_step_mean first_step_sd first_step_min first_step_max "
              "best_induction_mean best_induction_min best_induction_max n_kcomp "
              "kcomp_matches_interaction n_copying copying_agreement best_induction_sd n_crossed "
              "best_induction_se best_induction_lo best_induction_hi first_step_se first_step_lo "
              "first_step_hi");
    /* how sure the means are: lr=0.01, 2 layers, best_induction 0.7, 0.55,
     * 0.35: sd sqrt((1/6^2 + 1/60^2 + 11/60^2) / 2) = 0.175594, se sd/sqrt 3
     * = 0.101379, t(2, 95%) = 4.302653 (t_quantiles): 0.533333 -+ 0.436198;
     * crossings 200 and 400: se 100, t(1) 12.706205; one value: no spread */
    CHECK_SQL(db.s,
              "SELECT n_layers, round(best_induction_sd, 6), round(best_induction_se, 6), "
              "round(best_induction_lo, 6), round(best_induction_hi, 6), n_crossed, "
              "round(first_step_se, 6), round(first_step_lo, 4), round(first_step_hi, 4) FROM "
              "sweep_summary",
              "1|||||0|||\n"
              "2|0.175594|0.101379|0.097133|0.969534|2|100.0|-970.6205|1570.6205\n"
              "2|||||1|||");
    CHECK_SQL(db.s, "SELECT count(*), min(df), max(df), round(min(t), 6) FROM t_quantiles",
              "100|1|100|1.983972");
    /* a run of model 3 that is not from the merge keeps it in its setting;
     * once model 1's ablation pair run fails, it no longer counts */
    CHECK(t_sh("sqlite3 '%s' \"INSERT INTO runs(run_id, kind, model_id, started_at, status, "
               "attnlab_version) VALUES(21, 'circuits', 3, 'now', 'done', 'v'); UPDATE runs SET "
               "status = 'failed' WHERE run_id = 7\"",
               db.s) == 0);
    CHECK_SQL(db.s,
              "SELECT setting, seed, kcomp_match IS NULL FROM sweep_findings WHERE model_id IN "
              "(1, 3) ORDER BY model_id",
              "train.lr=0.01|1|1\ntrain.lr=0.01|3|1");
}

/* A database that was not merged: setting '' (or its own sweep_task's),
 * seeds from models.seed. */
static const char PLAIN[] =
    "INSERT INTO models(model_id, sha256, n_layers, seed, added_at) VALUES\n"
    " (1, 'a', 1, 5, 'now'), (2, 'b', 1, 7, 'now');\n"
    "INSERT INTO runs(run_id, kind, model_id, started_at, status, attnlab_version) VALUES\n"
    " (1, 'train', 1, 'now', 'done', 'v'), (2, 'scores', 1, 'now', 'done', 'v'),\n"
    " (3, 'train', 2, 'now', 'done', 'v'), (4, 'scores', 2, 'now', 'done', 'v');\n"
    "INSERT INTO train_head_scores(run_id, step, layer, head, metric, value) VALUES\n"
    " (1, 100, 0, 0, 'induction', 0.5), (1, 200, 0, 0, 'induction', 0.6),\n"
    " (3, 100, 0, 1, 'induction', 0.2), (3, 300, 0, 1, 'induction', 0.45);\n"
    "INSERT INTO head_scores(run_id, model_id, layer, head, metric, value) VALUES\n"
    " (2, 1, 0, 0, 'induction', 0.5), (4, 2, 0, 1, 'induction', 0.3);\n";

TEST(sweep_summary_unmerged) {
    t_pbuf db = t_pcopy("p.db");
    make_db(db.s, PLAIN);
    CHECK_SQL(db.s, SUMMARY_Q, "|1|2|2|2|0.5|2|0|200.0|141.421356|100|300|0.4|0.3|0.5|0||0|");
    CHECK_SQL(db.s, "SELECT group_concat(seed) FROM sweep_models", "5,7");
    /* the database of one sweep task names its setting */
    CHECK(t_sh("sqlite3 '%s' \"INSERT INTO sweep_task VALUES(1, 'x', 0, 2, 'train.lr=0.1', 9, "
               "'{}')\"",
               db.s) == 0);
    CHECK_SQL(db.s, "SELECT setting, n_seeds FROM sweep_summary", "train.lr=0.1|2");
    /* an empty database: no rows, not an error */
    t_pbuf empty = t_pcopy("e.db");
    make_db(empty.s, "");
    CHECK_SQL(empty.s, "SELECT count(*) FROM sweep_summary", "0");
}

/* A version-6 file (no sweep views) gains them on open, rows kept. */
TEST(sweep_summary_migrates_version_6) {
    t_pbuf db = t_pcopy("v6.db");
    make_db(db.s, PLAIN);
    CHECK(t_sh("sqlite3 '%s' \"" T_DROP_SAE_SQL
               "DROP VIEW sweep_summary; DROP VIEW sweep_findings; DROP VIEW "
               "sweep_models; ALTER TABLE models DROP COLUMN data_tokens; ALTER TABLE "
               "attribution_runs DROP COLUMN centred; PRAGMA user_version = 6\"",
               db.s) == 0);
    CHECK_SQL(db.s, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'sweep_%'", "1");
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db.s, &s, &e), &e);
    al_store_close(s);
    char want[8];
    snprintf(want, sizeof want, "%d", AL_STORE_SCHEMA_VERSION);
    CHECK_SQL(db.s, "PRAGMA user_version", want);
    CHECK_SQL(db.s, "SELECT n_models, first_step_min FROM sweep_summary", "2|100");
}

/* ------------------------------------------------------------ picture */

static int count_colour(const al_image *im, uint32_t c) {
    int n = 0;
    for (int i = 0; i < im->w * im->h; i++) {
        const unsigned char *p = im->px + 3 * (size_t)i;
        n += ((uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]) == c;
    }
    return n;
}

TEST(sweep_summary_picture) {
    t_pbuf db = t_pcopy("m.db"), png = t_pcopy("s.png");
    make_db(db.s, CRAFTED);
    CHECK(t_sh("%s heatmap --what sweep-induction --db %s --out %s > %s 2>&1", t_bin(), db.s, png.s,
               t_path("out.txt")) == 0);
    int w = 0, h = 0;
    CHECK(t_reported_size(t_path("out.txt"), &w, &h) == 0);
    al_image im;
    al_png_meta meta;
    al_err e;
    CHECK_OK(al_png_read(png.s, &im, &meta, &e), &e);
    CHECK(im.w == w && im.h == h && w > 600 && h > 300);
    const char *what = al_png_meta_get(&meta, "what"), *dbt = al_png_meta_get(&meta, "db");
    CHECK(what && strcmp(what, "sweep-induction") == 0);
    CHECKF(dbt && strstr(dbt, db.s) && strstr(dbt, "5 models in 3 groups"), "db chunk [%s]",
           dbt ? dbt : "");
    CHECK(al_png_meta_get(&meta, "Software") != NULL);
    /* three panels, one colour each: the 3-model group's mean line in
     * full colour, the single models' own lines too */
    for (int g = 0; g < 3; g++) CHECKF(count_colour(&im, al_plot_colour(g)) > 20, "group %d", g);
    CHECK(count_colour(&im, al_plot_colour(3)) == 0);
    int ink = im.w * im.h - count_colour(&im, AL_PLOT_BG);
    CHECKF(ink > im.w * im.h / 50, "%d of %d pixels drawn", ink, im.w * im.h);
    al_png_meta_free(&meta);
    al_image_free(&im);
    /* a database without training curves: one line, no file */
    t_pbuf plain = t_pcopy("n.db"), none = t_pcopy("none.png");
    make_db(plain.s,
            "INSERT INTO models(model_id, sha256, n_layers, added_at) VALUES(1, 'a', 2, 'now');"
            "INSERT INTO runs(kind, model_id, started_at, status, attnlab_version) "
            "VALUES('scores', 1, 'now', 'done', 'v');");
    CHECK(t_sh("%s heatmap --what sweep-induction --db %s --out %s 2> %s", t_bin(), plain.s, none.s,
               t_path("err.txt")) != 0);
    CHECK(t_one_line(t_path("err.txt"), "no training curves"));
    CHECK(!al_file_exists(none.s));
    /* and a database that does not exist */
    CHECK(t_sh("%s heatmap --what sweep-induction --db %s/nope.db --out %s 2> %s", t_bin(),
               t_tmpdir(), none.s, t_path("err.txt")) != 0);
    CHECK(t_one_line(t_path("err.txt"), "does not exist"));
}

/* ------------------------------------------------------------- report */

/* Report the database at db for the tiny model in dir into out; the page. */
static char *report_page(const char *db, const char *dir, const char *out) {
    CHECK(t_sh("%s report --db %s --model %s/m2 --out %s --pictures sweep-induction > %s 2>&1",
               t_bin(), db, dir, out, t_path("report.txt")) == 0);
    char page[1200];
    snprintf(page, sizeof page, "%s/index.html", out);
    return t_slurp(page);
}

TEST(sweep_summary_report_section) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("m.db"), out = t_pcopy("rep");
    t_tiny_model(dir.s, 2, 3);
    make_db(db.s, CRAFTED);
    char *h = report_page(db.s, dir.s, out.s);
    CHECK(h && strstr(h, "<h2>Across seeds</h2>"));
    /* the sentences, every number from the crafted rows */
    const char *want[] = {
        "<b>train.lr=0.01, 2 layers:</b> in <b>2 of 3</b> seeds an induction head formed (best "
        "final induction score &gt; 0.4; mean 0.53, 95% t interval 0.10 to 0.97 over the 3 seeds; "
        "min 0.35, max 0.70). The best head's induction score first crossed 0.4 at step <b>300 "
        "&plusmn; 141</b> (mean &plusmn; sd over 2 runs; 95% t interval of the mean -971 to 1571; "
        "min 200, max 400); 1 of 3 training curves never did. The top K-composition pair was the "
        "pair of largest |interaction| in pair ablation in <b>1 of 2</b> models. copying_eigen and "
        "copying_ablation classified 83% of heads alike (mean over 2 models).</p>",
        "<b>train.lr=0.03, 2 layers:</b> in <b>1 of 1</b> seeds an induction head formed (best "
        "final induction score &gt; 0.4: 0.80; one run, so no interval). The best head's induction "
        "score first crossed 0.4 at step <b>150</b> (one run). </p>",
        "<b>train.lr=0.01, 1 layer:</b> in <b>0 of 1</b> seeds an induction head formed (best "
        "final induction score &gt; 0.4: 0.10; one run, so no interval). In its one training curve "
        "the best head's induction score never crossed 0.4. </p>",
        /* the table's row of the 3-seed group */
        "<tr><td class=t>train.lr=0.01</td><td>2</td><td>3</td><td>3</td><td>3</td><td>0.67</td>"
        "<td>3</td><td>1</td><td>300</td><td>141</td><td>200</td><td>400</td><td>0.533</td>"
        "<td>0.350</td><td>0.700</td><td>2</td><td>0.50</td><td>2</td><td>0.83</td><td>0.176</td>"
        "<td>0.097</td><td>0.970</td><td>-971</td><td>1571</td></tr>",
        "<img src=\"across-seeds-induction.png\""};
    for (size_t i = 0; h && i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(h, want[i]) != NULL, "page lacks [%s]", want[i]);
    free(h);
    char f[1200];
    snprintf(f, sizeof f, "%s/across-seeds-induction.png", out.s);
    al_image im;
    al_err e;
    CHECK_OK(al_png_read(f, &im, NULL, &e), &e);
    al_image_free(&im);
    /* the notebook runs the view's query */
    snprintf(f, sizeof f, "%s/report.ipynb", out.s);
    char *nb = t_slurp(f);
    CHECK(nb && strstr(nb, "SELECT * FROM sweep_summary"));
    free(nb);
}

/* Two settings with two or more seeds each: the report says how many
 * seeds their difference needs. lr=0.01: 0.7, 0.55, 0.35 (variance
 * 0.0308333); lr=0.03 with a second seed: 0.8, 0.6 (0.02); pooled
 * variance (2 x 0.0308333 + 0.02) / 3 = 0.0272222, d = 0.166667, so
 * 2 (1.959964 + 0.841621)^2 x 0.0272222 / 0.0277778 = 15.38: 16 seeds. */
TEST(sweep_summary_seeds_needed) {
    CHECK(al_seeds_needed(0.1, 0.1, 0.95, 0.8) == 16); /* 2 (z + z')^2 = 15.698 */
    CHECK(al_seeds_needed(1, 0.01, 0.95, 0.8) == 2); /* never below two */
    CHECK(isnan(al_seeds_needed(0, 0.1, 0.95, 0.8)) && isnan(al_seeds_needed(0.1, 0.1, 0.95, 0.4)));
    t_pbuf dir = t_pcopy("."), db = t_pcopy("m.db"), out = t_pcopy("rep");
    t_tiny_model(dir.s, 2, 3);
    char sql[sizeof CRAFTED + 800];
    snprintf(sql, sizeof sql,
             "%sINSERT INTO merge_sources(source_id, path, merged_at, experiment, task, n_tasks, "
             "setting, seed, params_json) VALUES (5, 'a/t4.db', 'now', 'x', 4, 5, "
             "'train.lr=0.03', 2, '{}');\n"
             "INSERT INTO models(model_id, sha256, n_layers, seed, added_at) VALUES (7, 'g', 2, "
             "17, 'now');\n"
             "INSERT INTO runs(run_id, kind, model_id, started_at, status, attnlab_version, "
             "source_id) VALUES (21, 'train', 7, 'now', 'done', 'v', 5), (22, 'scores', 7, 'now', "
             "'done', 'v', 5);\n"
             "INSERT INTO head_scores(run_id, model_id, layer, head, metric, value) VALUES (22, 7, "
             "1, 0, 'induction', 0.6);\n",
             CRAFTED);
    make_db(db.s, sql);
    char *h = report_page(db.s, dir.s, out.s);
    CHECKF(h && strstr(h, "<p>train.lr=0.03 against train.lr=0.01 (2 layers): best induction "
                          "differs by +0.167 (pooled sd 0.165). To show a difference this size at "
                          "the 5% level with 80% power needs about <b>16 seeds per setting</b> "
                          "(normal approximation); this sweep has 3 and 2.</p>"),
           "%s", h ? strstr(h, "against") ? strstr(h, "against") : "(no sentence)" : "");
    free(h);
}

/* Not merged: the section needs two seeds of one setting and layer count;
 * a second model of the same seed (tied vs untied, say) is no sweep. */
TEST(sweep_summary_report_absent) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("p.db"), out = t_pcopy("rep");
    t_tiny_model(dir.s, 2, 3);
    make_db(db.s, PLAIN);
    char *h = report_page(db.s, dir.s, out.s);
    CHECK(h && strstr(h, "<h2>Across seeds</h2>") &&
          strstr(h, "<b>all models, 1 layer:</b> in <b>1 of 2</b> seeds") &&
          strstr(h, "<tr><td class=na>&ndash;</td><td>1</td><td>2</td>"));
    free(h);
    CHECK(t_sh("sqlite3 '%s' 'UPDATE models SET seed = 5'", db.s) == 0);
    h = report_page(db.s, dir.s, out.s);
    CHECK(h && !strstr(h, "Across seeds") && !strstr(h, "across-seeds-induction.png"));
    free(h);
    /* the stale picture went with the section */
    char f[1200];
    snprintf(f, sizeof f, "%s/across-seeds-induction.png", out.s);
    CHECK(!al_file_exists(f));
    CHECK(t_sh("sqlite3 '%s' 'DELETE FROM head_scores WHERE model_id = 2; DELETE FROM "
               "train_head_scores WHERE run_id = 3; DELETE FROM runs WHERE model_id = 2; DELETE "
               "FROM models WHERE model_id = 2'",
               db.s) == 0);
    h = report_page(db.s, dir.s, out.s);
    CHECK(h && strstr(h, "<h1>") && !strstr(h, "Across seeds"));
    free(h);
}

/* ---------------------------------------------------------- end to end */

/* Two tiny 2-layer models, seeds 1 and 2, trained into one database with
 * evaluations every 5 steps and scored: one group of two seeds, each with
 * a curve of 5 points, the view's numbers equal to the tables' own. */
TEST(sweep_summary_end_to_end) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), png = t_pcopy("e.png");
    t_tiny_model(dir.s, 2, 1); /* the corpus and tokenizer */
    for (int seed = 1; seed <= 2; seed++)
        CHECK(t_sh("%s train --data %s/s.train.bin --val %s/s.val.bin --tokenizer %s/tok.json "
                   "--out %s/s%d --steps 20 --n-layers 2 --d-model 32 --n-heads 4 --d-head 8 "
                   "--n-ctx 32 --batch 4 --eval-every 5 --eval-batches 1 --warmup 2 --lr 0.01 "
                   "--threads 2 --seed %d --db %s >/dev/null 2>&1 && %s scores --model %s/s%d "
                   "--db %s --probe-r 10 --probe-n 8 --threads 2 >/dev/null 2>&1",
                   t_bin(), dir.s, dir.s, dir.s, dir.s, seed, seed, db.s, t_bin(), dir.s, seed,
                   db.s) == 0);
    CHECK_SQL(db.s,
              "SELECT group_concat(seed) || '|' || group_concat(has_curve) FROM "
              "(SELECT * FROM sweep_findings ORDER BY seed)",
              "1,2|1,1");
    CHECK_SQL(db.s,
              "SELECT setting, n_layers, n_seeds, n_models, n_scored, n_curves FROM "
              "sweep_summary",
              "|2|2|2|2|2");
    /* the view's final scores and crossings against the tables */
    CHECK_SQL(db.s,
              "SELECT s.best_induction_max = (SELECT max(value) FROM head_scores WHERE "
              "metric = 'induction'), s.n_never_crossed = (SELECT count(*) FROM runs r WHERE "
              "r.kind = 'train' AND NOT EXISTS (SELECT 1 FROM train_head_scores t WHERE "
              "t.run_id = r.run_id AND t.metric = 'induction' AND t.value > 0.4)), "
              "s.first_step_min IS (SELECT min(step) FROM train_head_scores WHERE metric = "
              "'induction' AND value > 0.4) FROM sweep_summary s",
              "1|1|1");
    CHECK_SQL(db.s, "SELECT count(DISTINCT step) FROM train_head_scores", "5");
    CHECK(t_sh("%s heatmap --what sweep-induction --db %s --out %s > %s 2>&1", t_bin(), db.s, png.s,
               t_path("out.txt")) == 0);
    al_image im;
    al_err e;
    CHECK_OK(al_png_read(png.s, &im, NULL, &e), &e);
    /* one panel: the mean of the two seeds in the first colour */
    CHECK(count_colour(&im, al_plot_colour(0)) > 50 && count_colour(&im, al_plot_colour(1)) == 0);
    al_image_free(&im);
}
