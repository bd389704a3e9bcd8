/* test_warnings_cli.c -- the gap check end to end (gap.h, driver.c): on
 * an untrained model the pair task's clean and corrupted runs barely
 * differ, so patch warns on stderr, stores the warning with its run,
 * puts it in --json and the report shows it; --strict refuses and
 * stores nothing. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attnlab/data.h"
#include "test.h"

TEST(warnings_untrained_model_end_to_end) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err.txt"),
           js = t_pcopy("out.json"), rep = t_pcopy("rep");
    t_tiny_model(dir.s, 2, 1); /* one step: as good as untrained */
    const char *task = "--probe-r 6 --n 8 --batch 4 --threads 2";
    CHECK(t_sh("%s patch --model %s/m2 --db %s %s > /dev/null 2> %s", t_bin(), dir.s, db.s, task,
               err.s) == 0);
    char *txt = t_slurp(err.s);
    CHECKF(txt && strstr(txt, "attnlab: warning: "), "no warning on stderr: %s", txt ? txt : "");
    char *n = t_sql(db.s, "SELECT count(*) FROM run_warnings w JOIN runs r USING (run_id) "
                          "WHERE r.kind = 'patch' AND r.status = 'done'");
    CHECKF(n && atoi(n) >= 1, "stored warnings: %s", n ? n : "(none)");
    /* the stored text is the printed one */
    char *msg = t_sql(db.s, "SELECT message FROM run_warnings ORDER BY warning_id LIMIT 1");
    CHECK(msg && txt && strstr(txt, msg));
    /* --json carries them */
    CHECK(t_sh("%s patch --model %s/m2 --db %s %s --json > %s 2>/dev/null", t_bin(), dir.s, db.s,
               task, js.s) == 0);
    char *jt = t_slurp(js.s);
    cJSON *j = jt ? cJSON_Parse(jt) : NULL;
    cJSON *w = j ? cJSON_GetObjectItemCaseSensitive(j, "warnings") : NULL;
    CHECK(cJSON_IsArray(w) && cJSON_GetArraySize(w) >= 1);
    cJSON_Delete(j);
    /* the report shows them */
    CHECK(t_sh("%s report --db %s --model %s/m2 --out %s > /dev/null 2>&1", t_bin(), db.s, dir.s,
               rep.s) == 0);
    char *html = t_slurp(t_path("rep/index.html"));
    CHECK(html && strstr(html, "<h3>Warnings</h3>"));
    /* the patching picture shows them beside the effects */
    CHECK(t_sh("%s heatmap --what patching --model %s/m2 --db %s --out %s > /dev/null 2>&1",
               t_bin(), dir.s, db.s, t_path("p.svg")) == 0);
    char *svg = t_slurp(t_path("p.svg"));
    CHECK(svg && strstr(svg, "warning: "));
    free(svg);
    /* --strict: exit 1, the refusal names it, nothing stored */
    char *runs0 =
        t_sql(db.s, "SELECT count(*) || '/' || (SELECT count(*) FROM run_warnings) FROM runs");
    CHECK(t_sh("cp %s %s.before", db.s, db.s) == 0);
    int rc = t_sh("%s patch --model %s/m2 --db %s %s --strict > /dev/null 2> %s", t_bin(), dir.s,
                  db.s, task, err.s);
    CHECKF(rc == 1, "--strict exit %d", rc);
    /* the database byte for byte as it was, and no side files */
    CHECK(t_sh("cmp -s %s %s.before && ! test -e %s-wal && ! test -e %s-shm", db.s, db.s, db.s,
               db.s) == 0);
    free(txt);
    txt = t_slurp(err.s);
    CHECK(txt && strstr(txt, "refused under --strict"));
    /* one line: the refusal, not the warnings and then the refusal */
    CHECK(t_one_line(err.s, "refused under --strict (nothing stored): "));
    char *runs1 =
        t_sql(db.s, "SELECT count(*) || '/' || (SELECT count(*) FROM run_warnings) FROM runs");
    CHECKF(runs0 && runs1 && strcmp(runs0, runs1) == 0, "runs/warnings %s -> %s", runs0, runs1);
    free(runs0), free(runs1), free(txt), free(n), free(msg), free(jt), free(html);
}

/* attnstats through the CLI: the generic views are stored under their
 * metric names, one row per head each, and the printed table names them. */
TEST(warnings_attnstats_cli_views) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.txt");
    t_tiny_model(dir.s, 2, 5);
    CHECK(t_sh("%s attnstats --model %s/m2 --db %s --data %s/s.val.bin --batches 1 --batch 2 > %s",
               t_bin(), dir.s, db.s, dir.s, out.s) == 0);
    char *txt = t_slurp(out.s);
    CHECK(txt && strstr(txt, "attn_entropy") && strstr(txt, "attn_distance"));
    char *n = t_sql(db.s, "SELECT count(*) FROM head_scores h JOIN runs r USING (run_id) WHERE "
                          "r.kind = 'attnstats' AND h.metric IN ('attn_entropy', "
                          "'attn_entropy_norm', 'attn_distance') AND h.value IS NOT NULL");
    CHECKF(n && atoi(n) == 3 * 2 * 4, "rows: %s", n ? n : "(none)");
    /* entropy_norm lies in [0, 1] */
    char *bad = t_sql(db.s, "SELECT count(*) FROM head_scores WHERE metric = 'attn_entropy_norm' "
                            "AND (value < 0 OR value > 1.000001)");
    CHECK(bad && strcmp(bad, "0") == 0);
    free(txt), free(n), free(bad);
}

/* attnstats as an experiment key (the registry's name), with the report:
 * its per-head views reach the report's generic section and the generic
 * picture without code of their own. */
TEST(warnings_attnstats_experiment_report_picture) {
    t_pbuf js = t_pcopy("x.json"), out = t_pcopy("out"), log = t_pcopy("log"),
           png = t_pcopy("v.png");
    t_write("x.json", T_EXP_TINY_2L("as") " \"analyses\": {\"attnstats\": {\"batches\": 1, "
                                          "\"batch\": 2}},\n \"pictures\": false}\n");
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), js.s, out.s, log.s) == 0);
    char db[1200], html[1200], model[1200];
    snprintf(db, sizeof db, "%s/results.db", out.s);
    snprintf(html, sizeof html, "%s/index.html", out.s);
    snprintf(model, sizeof model, "%s/models/two", out.s);
    CHECK_SQL(db,
              "SELECT r.kind, r.status, count(*) FROM runs r JOIN views v USING (run_id) "
              "GROUP BY r.run_id",
              "attnstats|done|3");
    char *h = t_slurp(html);
    CHECK(h && strstr(h, "Per-head results") && strstr(h, "attn_distance"));
    free(h);
    CHECK(t_sh("%s heatmap --what view --metric attn_entropy --model %s --db %s --out %s "
               "> /dev/null 2>&1",
               t_bin(), model, db, png.s) == 0);
    char *pic = t_slurp(png.s);
    CHECK(pic && memcmp(pic, "\x89PNG", 4) == 0);
    free(pic);
    /* a metric no run stored: one clear refusal, no file */
    CHECK(t_sh("%s heatmap --what view --metric nope --model %s --db %s --out %s.2.png "
               "> /dev/null 2>&1",
               t_bin(), model, db, png.s) == 1);
}

/* The "all" probe over a vocabulary the training data uses only part of:
 * scores warns with the unseen count (checked against the training token
 * file read here), stores it with the run, and --probe-tokens seen (ids
 * the data holds) raises nothing. */
TEST(warnings_probe_unseen_ids) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err.txt");
    t_tiny_model(dir.s, 1, 1);
    al_tokens d = {0};
    al_err e;
    char train[1100];
    snprintf(train, sizeof train, "%s/s.train.bin", dir.s);
    CHECK_OK(al_tokens_load(train, &d, &e), &e);
    CHECK(t_sh("%s scores --model %s/m1 --db %s --probe-r 6 --threads 2 > /dev/null 2> %s", t_bin(),
               dir.s, db.s, err.s) == 0);
    char *txt = t_slurp(err.s);
    const char *w = txt ? strstr(txt, "attnlab: warning: ") : NULL;
    int unseen = -1, vocab = -1;
    CHECKF(w && sscanf(w, "attnlab: warning: %d of the probe's %d ids", &unseen, &vocab) == 2,
           "stderr: %s", txt ? txt : "");
    if (vocab > 0) {
        int n = 0;
        unsigned char *ids = al_tokens_present(&d, vocab, &n, &e);
        CHECK(ids != NULL);
        CHECKF(unseen == vocab - n, "warned %d unseen, the file leaves %d of %d", unseen, vocab - n,
               vocab);
        CHECK(unseen > 0.2 * vocab);
        free(ids);
    }
    char *n = t_sql(db.s, "SELECT count(*) FROM run_warnings w JOIN runs r USING (run_id) "
                          "WHERE r.kind = 'scores' AND w.message LIKE '%never occur%'");
    CHECKF(n && atoi(n) == 1, "stored: %s", n ? n : "(none)");
    free(txt), free(n);
    CHECK(t_sh("%s scores --model %s/m1 --db %s --probe-r 6 --threads 2 --probe-tokens seen "
               "> /dev/null 2> %s",
               t_bin(), dir.s, db.s, err.s) == 0);
    txt = t_slurp(err.s);
    CHECKF(txt && !strstr(txt, "never occur"), "seen probe warned: %s", txt ? txt : "");
    free(txt);
    al_tokens_free(&d);
}

/* A model whose state.json cannot be read (here it is cut short) still
 * loads, since its weights are whole, but the length it was trained on
 * is then a guess: the analysis says which, on one warning line. */
TEST(warnings_unreadable_state_json) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err.txt");
    t_tiny_model(dir.s, 1, 1);
    CHECK(t_sh("printf '{\"step\": 1, \"train\": {' > %s/m1/state.json", dir.s) == 0);
    CHECK(t_sh("%s scores --model %s/m1 --db %s --probe-r 5 --threads 1 > /dev/null 2> %s", t_bin(),
               dir.s, db.s, err.s) == 0);
    char *txt = t_slurp(err.s);
    const char *w = txt ? strstr(txt, "attnlab: warning: ") : NULL;
    CHECKF(w && strstr(w, "state.json") && strstr(w, "trained on its n_ctx (32-token sequences)") &&
               strchr(w, '\n') == w + strcspn(w, "\n"),
           "stderr: %s", txt ? txt : "");
    free(txt);
}
