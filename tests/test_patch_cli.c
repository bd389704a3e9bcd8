/* test_patch_cli.c -- `attnlab patch` and `attnlab paths` end to end on a
 * tiny trained model, read back with the sqlite3 CLI: the rows of every
 * grid (with their NULL conventions), the printed summary against the
 * rows, a version-2 database upgraded, bad input refused with one line
 * and no run, an interrupted or killed sweep leaving no rows and no done
 * run, the heatmaps, the experiment keys and the report section. */
#define _DEFAULT_SOURCE /* wait4 (proc.h) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/experiment.h"
#include "attnlab/image.h"
#include "attnlab/png.h"
#include "attnlab/store.h"
#include "attnlab/util.h"
#include "planted.h"
#include "proc.h"
#include <cjson/cJSON.h>

#include "test.h"

#define TASK "--probe-r 6 --n 4 --batch 2 --threads 2"

/* ------------------------------------------------------------ rows */

TEST(patch_cli_rows_and_summary) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.txt");
    t_tiny_model(dir.s, 2, 20);
    const char *b = t_bin();
    /* L = 2, H = 4, T = 2R + 1 = 13 */
    const char *comps[] = {"head_pos", "head", "resid", "k", "pattern"};
    for (int i = 0; i < 5; i++)
        CHECK(t_sh("%s patch --model %s/m2 --db %s --component %s " TASK " > %s 2>/dev/null", b,
                   dir.s, db.s, comps[i], out.s) == 0);
    CHECK_SQL(db.s, "SELECT run_id, kind, status FROM runs",
              "1|patch|done\n2|patch|done\n3|patch|done\n4|patch|done\n5|patch|done");
    /* one row per configuration; head NULL only for resid, pos NULL only for head */
    CHECK_SQL(db.s,
              "SELECT run_id, component, count(*), count(head), count(pos), count(value), "
              "min(layer), max(layer) FROM patching GROUP BY run_id",
              "1|head_pos|104|104|104|104|0|1\n2|head|8|8|0|8|0|1\n3|resid|26|0|26|26|0|1\n"
              "4|k|104|104|104|104|0|1\n5|pattern|104|104|104|104|0|1");
    CHECK_SQL(db.s,
              "SELECT count(DISTINCT layer || '.' || head || '@' || pos) FROM patching "
              "WHERE run_id = 1",
              "104");
    CHECK_SQL(db.s,
              "SELECT run_id, task, direction, component, n_pairs, seq_len, m_clean IS NOT "
              "NULL, m_corr IS NOT NULL FROM patching_runs ORDER BY run_id",
              "1|induction|denoise|head_pos|4|13|1|1\n2|induction|denoise|head|4|13|1|1\n"
              "3|induction|denoise|resid|4|13|1|1\n4|induction|denoise|k|4|13|1|1\n"
              "5|induction|denoise|pattern|4|13|1|1");
    /* value = (metric - M_corr) / (M_clean - M_corr) on every row */
    CHECK_SQL(db.s,
              "SELECT count(*) FROM patching p JOIN patching_runs x USING (run_id) WHERE "
              "abs(p.value - (p.metric - x.m_corr) / (x.m_clean - x.m_corr)) < 1e-9",
              "346");
    /* the summary of the last patch (pattern) against its rows: M_clean, and
     * the first line of the top list is the largest |value| */
    char *txt = t_slurp(out.s);
    CHECK(txt && strstr(txt, "M_clean = ") && strstr(txt, "top 10 of 104 configurations"));
    char *want = t_sql(db.s, "SELECT printf('M_clean = %.4f   M_corr = %.4f', m_clean, m_corr) "
                             "FROM patching_runs WHERE run_id = 5");
    CHECKF(txt && want && strstr(txt, want), "summary lacks [%s]", want ? want : "");
    free(want);
    want = t_sql(db.s, "SELECT printf('%d.%d pattern @ %d ', layer, head, pos) || '|' || "
                       "printf('%+.4f %10.4f', value, metric) FROM patching WHERE run_id = 5 "
                       "ORDER BY abs(value) DESC, patch_id LIMIT 1");
    char *bar = want ? strchr(want, '|') : NULL;
    if (bar) *bar = 0;
    const char *line = txt && want ? strstr(txt, want) : NULL;
    CHECKF(line && bar && strstr(line, bar + 1) && strchr(line, '\n') > strstr(line, bar + 1),
           "top line [%s ... %s] not in\n%s", want ? want : "", bar ? bar + 1 : "", txt ? txt : "");
    /* positions are shown with pair 0's clean token: the model has a tokenizer */
    CHECK(txt && strstr(txt, " @ ") && strstr(txt, "'"));
    free(want);
    free(txt);
    /* noising and --naive (one full forward per configuration) agree */
    CHECK(t_sh("%s patch --model %s/m2 --db %s --component head --naive " TASK " >/dev/null 2>&1",
               b, dir.s, db.s) == 0);
    CHECK_SQL(db.s,
              "SELECT count(*) FROM patching a JOIN patching n ON n.layer = a.layer AND "
              "n.head = a.head WHERE a.run_id = 2 AND n.run_id = 6 AND abs(a.metric - "
              "n.metric) < 1e-4",
              "8");
    CHECK(t_sh("%s patch --model %s/m2 --db %s --component head --direction noise " TASK
               " >/dev/null 2>&1",
               b, dir.s, db.s) == 0);
    CHECK_SQL(db.s,
              "SELECT count(*) FROM patching p JOIN patching_runs x USING (run_id) WHERE "
              "x.direction = 'noise' AND abs(p.value - (x.m_clean - p.metric) / (x.m_clean - "
              "x.m_corr)) < 1e-9",
              "8");
}

TEST(patch_cli_paths_rows_and_summary) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.txt");
    t_tiny_model(dir.s, 2, 20);
    t_tiny_model(dir.s, 1, 20);
    const char *b = t_bin();
    CHECK(t_sh("%s paths --model %s/m2 --db %s " TASK " > %s 2>/dev/null", b, dir.s, db.s, out.s) ==
          0);
    /* senders embed, pos, 0.0-0.3 (6) x (3 channels x 4 heads + direct) */
    CHECK_SQL(db.s,
              "SELECT channel, count(*), count(receiver_layer), count(receiver_head), "
              "min(receiver_layer), count(DISTINCT sender) FROM path_patching GROUP BY "
              "channel ORDER BY channel",
              "direct|6|0|0||6\nk|24|24|24|1|6\nq|24|24|24|1|6\nv|24|24|24|1|6");
    CHECK_SQL(db.s, "SELECT direction, component IS NULL, n_pairs, seq_len FROM patching_runs",
              "noise|1|4|13");
    /* pos is the same in both runs: its paths change nothing */
    CHECK_SQL(db.s, "SELECT count(*) FROM path_patching WHERE sender = 'pos' AND value = 0", "13");
    /* the printed K matrix against the rows, row by row */
    char *txt = t_slurp(out.s);
    const char *senders[] = {"embed", "pos", "0.0", "0.1", "0.2", "0.3"};
    for (int s = 0; s < 6; s++) {
        char q[600];
        snprintf(
            q, sizeof q,
            "SELECT printf('%%-7s', '%s') || group_concat(printf(' %%+7.3f', value + 0.0), '') "
            "|| (SELECT printf(' | %%+7.3f', value + 0.0) FROM path_patching WHERE channel = "
            "'direct' AND sender = '%s') FROM (SELECT value FROM path_patching WHERE "
            "channel = 'k' AND sender = '%s' ORDER BY receiver_head)",
            senders[s], senders[s], senders[s]);
        char *row = t_sql(db.s, q);
        CHECKF(txt && row && strstr(txt, row), "matrix row [%s] not in\n%s", row ? row : "",
               txt ? txt : "");
        free(row);
    }
    CHECK(txt && strstr(txt, "top 10 of 78 paths"));
    free(txt);
    /* a 1-layer model has only the direct paths */
    CHECK(t_sh("%s paths --model %s/m1 --db %s --direction denoise " TASK " > %s 2>/dev/null", b,
               dir.s, db.s, out.s) == 0);
    CHECK_SQL(db.s,
              "SELECT channel, count(*), count(receiver_head) FROM path_patching WHERE "
              "run_id = 2 GROUP BY channel",
              "direct|6|0");
    txt = t_slurp(out.s);
    CHECK(txt && strstr(txt, "only direct paths") && strstr(txt, "top 6 of 6 paths"));
    free(txt);
}

/* A 3-layer model end to end: senders embed, pos and the heads of layers
 * 0 and 1; receivers the heads of layers 1 and 2, each from the senders
 * of earlier layers only; the text, --json, the rows, the picture and the
 * report section agree on them. A model deeper than 16 layers is refused
 * with one line before any run exists. */
static int png_ok(const char *path, int *w, int *h);

TEST(patch_cli_paths_three_layers) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.txt"),
           js = t_pcopy("out.json"), err = t_pcopy("err"), png = t_pcopy("p.png"),
           rep = t_pcopy("rep");
    t_tiny_model(dir.s, 3, 20);
    const char *b = t_bin();
    CHECK(t_sh("%s paths --model %s/m3 --db %s " TASK " > %s 2>/dev/null", b, dir.s, db.s, out.s) ==
          0);
    /* per channel: 4 layer-1 heads x 6 senders + 4 layer-2 heads x 10; direct: 10 senders */
    CHECK_SQL(db.s,
              "SELECT channel, count(*), count(DISTINCT sender), min(receiver_layer), "
              "max(receiver_layer) FROM path_patching GROUP BY channel ORDER BY channel",
              "direct|10|10||\nk|64|10|1|2\nq|64|10|1|2\nv|64|10|1|2");
    /* a layer-1 sender reaches layer 2 only */
    CHECK_SQL(db.s,
              "SELECT count(*), min(receiver_layer) FROM path_patching WHERE sender GLOB "
              "'1.*' AND channel != 'direct'",
              "48|2");
    CHECK_SQL(db.s, "SELECT count(*) FROM path_patching WHERE value IS NULL", "0");
    char *txt = t_slurp(out.s);
    CHECK(txt && strstr(txt, "top 10 of 202 paths") && strstr(txt, "layers 0-1") &&
          strstr(txt, "k:2.3"));
    /* the K matrix row of sender 1.2: "." under the layer-1 heads, then its layer-2 values */
    char *row = t_sql(db.s, "SELECT printf('%-7s', '1.2') || '       .       .       .       .' "
                            "|| group_concat(printf(' %+7.3f', value + 0.0), '') || (SELECT "
                            "printf(' | %+7.3f', value + 0.0) FROM path_patching WHERE channel = "
                            "'direct' AND sender = '1.2') FROM (SELECT value FROM path_patching "
                            "WHERE channel = 'k' AND sender = '1.2' ORDER BY receiver_head)");
    CHECKF(txt && row && strstr(txt, row), "matrix row [%s] not in\n%s", row ? row : "",
           txt ? txt : "");
    free(row);
    free(txt);
    CHECK(t_sh("%s paths --model %s/m3 --db %s --json " TASK " > %s 2>/dev/null", b, dir.s, db.s,
               js.s) == 0);
    txt = t_slurp(js.s);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    const cJSON *ps = cJSON_GetObjectItem(j, "paths");
    CHECK(cJSON_GetArraySize(ps) == 202);
    int deep = 0, wrong = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, ps) {
        const cJSON *snd = cJSON_GetObjectItem(p, "sender"),
                    *rcv = cJSON_GetObjectItem(p, "receiver");
        if (!cJSON_IsString(rcv)) continue;
        deep += rcv->valuestring[0] == '2';
        /* never from a sender of the receiver's layer or a later one */
        wrong += snd->valuestring[0] == '1' && rcv->valuestring[0] == '1';
    }
    CHECK(deep == 3 * 4 * 10 && wrong == 0);
    cJSON_Delete(j);
    free(txt);
    /* the picture, and the report's section with it */
    CHECK(t_sh("%s heatmap --what paths --db %s --run 1 --out %s >/dev/null 2>%s", b, db.s, png.s,
               err.s) == 0);
    int w = 0, h = 0;
    CHECK(png_ok(png.s, &w, &h) && w > 600 && h > 200);
    CHECK(t_sh("%s report --model %s/m3 --db %s --out %s >/dev/null 2>&1", b, dir.s, db.s, rep.s) ==
          0);
    char idx[1100], pic[1100];
    snprintf(idx, sizeof idx, "%s/index.html", rep.s);
    snprintf(pic, sizeof pic, "%s/m3-paths-induction-noise.png", rep.s);
    txt = t_slurp(idx);
    CHECK(txt && strstr(txt, "<h3>Path patching</h3>") &&
          strstr(txt, "a head of an earlier layer") &&
          strstr(txt, "m3-paths-induction-noise.png") && png_ok(pic, &w, &h));
    free(txt);
    /* too deep: one line, exit 1, no run */
    t_tiny_model(dir.s, 17, 1);
    CHECK(t_sh("%s paths --model %s/m17 --db %s/deep.db " TASK " >/dev/null 2>%s", b, dir.s, dir.s,
               err.s) == 1);
    CHECK(t_one_line(err.s, "path patching covers models of up to 16 layers"));
    char ddb[1100];
    snprintf(ddb, sizeof ddb, "%s/deep.db", dir.s);
    CHECK(!al_file_exists(ddb)); /* the database the refused run would have made is not left */
}

/* The planted circuit of planted.h (previous-token head 0.0 feeding the
 * induction head 1.0 through K-composition), saved as a model directory
 * (no tokenizer), through the commands: the known answers come out on
 * top of the printed summaries and the rows. */
TEST(patch_cli_planted_circuit) {
    t_pbuf dir = t_pcopy("planted"), db = t_pcopy("r.db"), out = t_pcopy("out.txt");
    al_model m;
    al_err e;
    planted_model(&m);
    CHECK_OK(al_ckpt_save(dir.s, &m, NULL, NULL, NULL, NULL, &e), &e);
    al_model_free(&m);
    const char *b = t_bin();
    /* denoising each head's whole output: only 1.0 restores induction;
     * 0.0 alone makes it worse than corrupted (1.0 then finds the first
     * half again but copies its corrupted tokens); the others do nothing */
    CHECK(t_sh("%s patch --model %s --db %s --component head --probe-r 10 --n 8 > %s 2>/dev/null",
               b, dir.s, db.s, out.s) == 0);
    char *txt = t_slurp(out.s);
    CHECKF(txt && strstr(txt, "configuration") && strstr(strstr(txt, "configuration"), "\n  1.0 "),
           "%s", txt ? txt : "");
    free(txt);
    CHECK_SQL(db.s,
              "SELECT layer || '.' || head, value > 0.99 FROM patching WHERE run_id = 1 "
              "ORDER BY value DESC LIMIT 1",
              "1.0|1");
    CHECK_SQL(db.s,
              "SELECT layer || '.' || head, value < -0.5 FROM patching WHERE run_id = 1 "
              "ORDER BY value LIMIT 1",
              "0.0|1");
    CHECK_SQL(db.s, "SELECT count(*) FROM patching WHERE run_id = 1 AND abs(value) > 1e-6", "2");
    /* noising path by path: the previous-token head's path into the
     * induction head's keys breaks it (1.0 finds no match), embed into its
     * values more than breaks it (it copies the corrupted tokens); nothing
     * reaches the queries (the second halves agree) */
    CHECK(t_sh("%s paths --model %s --db %s --probe-r 10 --n 8 > %s 2>/dev/null", b, dir.s, db.s,
               out.s) == 0);
    CHECK_SQL(db.s,
              "SELECT sender, receiver_layer || '.' || receiver_head, value > 0.8 FROM "
              "path_patching WHERE channel = 'k' AND direction = 'noise' AND run_id = 2 "
              "ORDER BY value DESC LIMIT 1",
              "0.0|1.0|1");
    CHECK_SQL(db.s,
              "SELECT count(*) FROM path_patching WHERE run_id = 2 AND channel = 'k' AND "
              "abs(value) > 1e-6",
              "1");
    CHECK_SQL(db.s,
              "SELECT sender, receiver_head, value > 1 FROM path_patching WHERE run_id = 2 "
              "AND channel = 'v' ORDER BY value DESC LIMIT 1",
              "embed|0|1");
    CHECK_SQL(db.s,
              "SELECT max(abs(value)) < 1e-6 FROM path_patching WHERE run_id = 2 AND "
              "channel = 'q'",
              "1");
    txt = t_slurp(out.s);
    const char *top = txt ? strstr(txt, "paths by |effect|") : NULL;
    CHECKF(top && strstr(top, "\n  embed -> 1.0 v ") && strstr(top, "\n  0.0 -> 1.0 k ") &&
               strstr(top, "\n  0.0 -> 1.0 k ") < strstr(top, "\n  embed -> 1.0 q "),
           "%s", txt ? txt : "");
    free(txt);
}

/* All heads off: the second half's tokens are the same in both runs, so
 * M_clean = M_corr, and every effect is undefined: stored as NULL. */
TEST(patch_cli_nan_effects_are_null) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), mask = t_pcopy("mask.json");
    t_tiny_model(dir.s, 2, 5);
    FILE *f = fopen(mask.s, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("{\"attnlab_mask\": 1, \"n_layers\": 2, \"n_heads\": 4, \"off\": [\"0.0\", \"0.1\", "
          "\"0.2\", \"0.3\", \"1.0\", \"1.1\", \"1.2\", \"1.3\"]}",
          f);
    fclose(f);
    CHECK(t_sh("%s patch --model %s/m2 --db %s --mask %s --component head_pos " TASK " > %s 2>&1",
               t_bin(), dir.s, db.s, mask.s, t_path("o.txt")) == 0);
    CHECK_SQL(db.s, "SELECT count(*), count(value), count(metric) FROM patching", "104|0|104");
    CHECK_SQL(db.s, "SELECT m_clean = m_corr FROM patching_runs", "1");
    char *txt = t_slurp(t_path("o.txt"));
    CHECK(txt && strstr(txt, "undefined"));
    free(txt);
}

/* ------------------------------------------------------------ schema */

/* A version-2 file (no patching tables) is upgraded by the first patch
 * run; its earlier rows stay. */
TEST(patch_cli_migrates_version_2) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 5);
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db.s, &s, &e), &e);
    al_store_close(s);
    CHECK(
        t_sh(
            "sqlite3 '%s' \"" T_DROP_SAE_SQL
            "ALTER TABLE models DROP COLUMN data_tokens; DROP VIEW "
            "sweep_summary; DROP VIEW sweep_findings; DROP VIEW sweep_models; DROP TABLE "
            "merge_sources; DROP TABLE sweep_task; DROP INDEX "
            "runs_by_uid; ALTER TABLE runs DROP COLUMN uid; ALTER TABLE runs DROP COLUMN "
            "source_id; DROP TABLE patching; DROP TABLE path_patching; DROP TABLE "
            "patching_runs; DROP TABLE attribution_runs; DROP TABLE logit_attribution; DROP "
            "TABLE path_terms; DROP TABLE logit_lens; DROP TABLE attribution_patching; DROP "
            "TABLE attribution_agreement; DROP TABLE attribution_tokens; DROP TABLE circuit_runs; "
            "DROP TABLE circuit_edges; INSERT INTO models(sha256, added_at) VALUES('x', 'now'); INSERT "
            "INTO runs(kind, started_at, status, attnlab_version) VALUES('ablate', 'now', "
            "'done', 'v'); INSERT INTO ablations(run_id, model_id, method, kind, heads, "
            "n_heads, loss) VALUES(1, 1, 'zero', 'none', '', 0, 2.5); PRAGMA user_version = 2\"",
            db.s) == 0);
    CHECK_SQL(db.s, "SELECT count(*) FROM sqlite_master WHERE name LIKE '%patching%'", "0");
    CHECK(t_sh("%s patch --model %s/m2 --db %s --component head " TASK " >/dev/null 2>&1", t_bin(),
               dir.s, db.s) == 0);
    char want[8];
    snprintf(want, sizeof want, "%d", AL_STORE_SCHEMA_VERSION);
    CHECK_SQL(db.s, "PRAGMA user_version", want);
    CHECK_SQL(db.s,
              "SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master WHERE "
              "name LIKE '%patching%' ORDER BY name)",
              "attribution_patching attribution_patching_by_run patching patching_by_run "
              "patching_runs patching_runs_by_model path_patching path_patching_by_run");
    CHECK_SQL(db.s, "SELECT loss FROM ablations", "2.5");
    CHECK_SQL(db.s, "SELECT run_id, kind, status FROM runs", "1|ablate|done\n2|patch|done");
    CHECK_SQL(db.s, "SELECT count(*) FROM patching WHERE run_id = 2", "8");
    CHECK_SQL(db.s, "PRAGMA integrity_check", "ok");
}

/* ------------------------------------------------------------ bad input */

TEST(patch_cli_bad_input) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err"),
           mask = t_pcopy("mask.json");
    t_tiny_model(dir.s, 2, 5);
    const char *b = t_bin();
    /* a copy of the model without its tokenizer */
    CHECK(t_sh("mkdir -p %s/notok && cp %s/m2/model.safetensors %s/m2/config.json %s/notok/", dir.s,
               dir.s, dir.s, dir.s) == 0);
    FILE *f = fopen(mask.s, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"attnlab_mask\": 1, \"n_layers\": 2, \"n_heads\": 4, \"off\": [\"1.7\"]}", f);
        fclose(f);
    }
    struct {
        const char *cmd, *args, *want;
        int rc;
    } cases[] = {
        {"patch", "--component bogus", "unknown patching component 'bogus'", 2},
        {"patch", "--direction sideways", "unknown patching direction 'sideways'", 2},
        {"paths", "--task nope", "unknown patching task 'nope'", 2},
        {"patch", "--task file", "needs a JSONL pair file (--pairs FILE)", 2},
        {"patch", "--probe-r 20", "exceeds n_ctx 32", 1},
        {"paths", "--probe-r 16", "exceeds n_ctx 32", 1},
        {"patch", "--n 0", "1 <= n <= 1000000", 2},
        {"patch", "--show -1", "--show must be >= 0", 2},
        {"patch", "--pairs p.jsonl", "a pair file (--pairs) is for task 'file'", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = t_sh("%s %s --model %s/m2 --db %s %s >/dev/null 2>%s", b, cases[i].cmd, dir.s,
                      db.s, cases[i].args, err.s);
        CHECKF(rc == cases[i].rc, "%s %s: exit %d, want %d", cases[i].cmd, cases[i].args, rc,
               cases[i].rc);
        CHECK(t_one_line(err.s, cases[i].want));
    }
    /* caches that cannot fit this machine's memory are refused before a
     * run begins (about 600 kB per pair of a batch for this model) */
    if (al_mem_total() > 0 && al_mem_total() < 40e9) {
        CHECK(t_sh("%s patch --model %s/m2 --db %s --probe-r 15 --n 100000 --batch 100000 "
                   ">/dev/null 2>%s",
                   b, dir.s, db.s, err.s) == 1);
        CHECK(t_one_line(err.s, "patching would allocate"));
        CHECK(t_one_line(err.s, "; lower --batch"));
    }
    /* names and file need the model's tokenizer */
    CHECK(t_sh("%s patch --model %s/notok --db %s --task names >/dev/null 2>%s", b, dir.s, db.s,
               err.s) == 1);
    CHECK(t_one_line(err.s, "task 'names' needs the model's tokenizer"));
    CHECK(t_sh("%s paths --model %s/notok --db %s --task file --pairs %s >/dev/null 2>%s", b, dir.s,
               db.s, mask.s, err.s) == 1);
    CHECK(t_one_line(err.s, "task 'file' needs the model's tokenizer"));
    /* a mask naming a head the model lacks */
    CHECK(t_sh("%s patch --model %s/m2 --db %s --mask %s >/dev/null 2>%s", b, dir.s, db.s, mask.s,
               err.s) == 1);
    CHECK(t_one_line(err.s, "head 1.7 is not in the model"));
    /* a model without a tokenizer still runs the induction task, positions
     * printed without tokens */
    CHECK(t_sh("%s patch --model %s/notok --db %s --component head_pos " TASK " > %s 2>/dev/null",
               b, dir.s, db.s, t_path("o.txt")) == 0);
    char *txt = t_slurp(t_path("o.txt"));
    CHECK(txt && strstr(txt, " @ ") && !strstr(txt, "'"));
    free(txt);
    /* none of the refused commands began a run */
    CHECK_SQL(db.s, "SELECT count(*), group_concat(status) FROM runs", "1|done");
}

/* ------------------------------------------------------------ signals */

/* A long sweep: --naive, 328 configurations x 16 batches. */
#define LONG_SWEEP "--component head_pos --probe-r 15 --n 64 --batch 4 --naive --threads 1"

static void interrupt_with(int sig) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err"), m = t_pcopy("m2");
    t_tiny_model(dir.s, 2, 5);
    pid_t p = t_spawn(NULL, err.s, "patch --model %s --db %s " LONG_SWEEP, m.s, db.s);
    CHECK(t_wait_running(db.s));
    t_sleep(0.3); /* into the sweep */
    kill(p, sig);
    int rc = t_wait(p, NULL);
    CHECKF(rc == 130, "exit %d", rc);
    /* after the progress line: the one-line error */
    CHECK(t_sh("tail -n 1 %s | grep -qx 'attnlab: interrupted'", err.s) == 0);
    CHECK_SQL(db.s, "SELECT status, error FROM runs", "failed|interrupted");
    CHECK_SQL(db.s,
              "SELECT (SELECT count(*) FROM patching) + (SELECT count(*) FROM "
              "patching_runs)",
              "0");
}

TEST(patch_cli_sigint_stops_sweep) { interrupt_with(SIGINT); }
TEST(patch_cli_sigterm_stops_sweep) { interrupt_with(SIGTERM); }

/* Ctrl-C while the names task is built (before any run): a million
 * pairs would take hours to find on this n_ctx, but the builder reads the
 * stop flag between stories, so the command ends at once, exit 130 with
 * the one-line error, and the database holds no run and no rows. */
TEST(patch_cli_sigint_while_names_task_built) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err"), m = t_pcopy("m2");
    t_tiny_model(dir.s, 2, 5);
    pid_t p = t_spawn(NULL, err.s,
                      "patch --model %s --db %s --task names --n 1000000 "
                      "--threads 1",
                      m.s, db.s);
    /* the database is opened when the model is loaded, just before the
     * signal handlers and the task */
    for (int i = 0; i < 600 && !al_file_exists(db.s); i++) t_sleep(0.1);
    t_sleep(1.0);
    CHECK(waitpid(p, NULL, WNOHANG) == 0); /* still building */
    kill(p, SIGINT);
    double t0 = al_now();
    int st = 0, done = 0;
    while (!(done = waitpid(p, &st, WNOHANG) == p) && al_now() - t0 < 10) t_sleep(0.05);
    CHECKF(done, "still running 10 s after SIGINT");
    if (!done) {
        kill(p, SIGKILL);
        waitpid(p, &st, 0);
    }
    /* 130 from exit(), not from dying of the signal (no handler yet) */
    CHECKF(done && WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %#x", st);
    CHECK(t_sh("tail -n 1 %s | grep -qx 'attnlab: interrupted'", err.s) == 0);
    /* no run, no rows: the database this run made is removed again */
    CHECK(!al_file_exists(db.s));
}

/* SIGKILL: no handler runs; the run stays 'running' with no rows until
 * the next attnlab opens the file, which marks it failed. */
TEST(patch_cli_sigkill_leaves_no_rows) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), m = t_pcopy("m2");
    t_tiny_model(dir.s, 2, 5);
    pid_t p = t_spawn(NULL, NULL, "patch --model %s --db %s " LONG_SWEEP, m.s, db.s);
    CHECK(t_wait_running(db.s));
    t_sleep(0.3);
    kill(p, SIGKILL);
    CHECK(t_wait(p, NULL) == 128 + SIGKILL);
    CHECK_SQL(db.s, "PRAGMA integrity_check", "ok");
    CHECK_SQL(db.s, "SELECT status FROM runs", "running");
    CHECK_SQL(db.s,
              "SELECT (SELECT count(*) FROM patching) + (SELECT count(*) FROM "
              "patching_runs)",
              "0");
    CHECK(t_sh("%s paths --model %s --db %s " TASK " >/dev/null 2>&1", t_bin(), m.s, db.s) == 0);
    CHECK_SQL(db.s, "SELECT run_id, kind, status FROM runs", "1|patch|failed\n2|paths|done");
    CHECK_SQL(db.s, "SELECT count(*) FROM patching", "0");
}

/* ------------------------------------------------------------ pictures */

static int png_ok(const char *path, int *w, int *h) {
    al_image im;
    al_err e;
    if (al_png_read(path, &im, NULL, &e)) {
        fprintf(stderr, "    %s: %s\n", path, e.msg);
        return 0;
    }
    *w = im.w, *h = im.h;
    al_image_free(&im);
    return 1;
}

TEST(patch_cli_heatmaps) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err"), png = t_pcopy("x.png");
    t_tiny_model(dir.s, 2, 20);
    const char *b = t_bin();
    const char *comps[] = {"head_pos", "head", "resid", "v"};
    for (int i = 0; i < 4; i++)
        CHECK(t_sh("%s patch --model %s/m2 --db %s --component %s " TASK " >/dev/null 2>&1", b,
                   dir.s, db.s, comps[i]) == 0);
    CHECK(t_sh("%s paths --model %s/m2 --db %s " TASK " >/dev/null 2>&1", b, dir.s, db.s) == 0);
    /* runs 1-4 patch, 5 paths; without --model the run's own model is drawn */
    for (int run = 1; run <= 5; run++) {
        char out[1100];
        snprintf(out, sizeof out, "%s/run%d.png", dir.s, run);
        CHECK(t_sh("%s heatmap --what %s --db %s --run %d --out %s >/dev/null 2>%s", b,
                   run == 5 ? "paths" : "patching", db.s, run, out, err.s) == 0);
        int w = 0, h = 0;
        CHECK(png_ok(out, &w, &h) && w > 300 && h > 150);
    }
    /* head_pos is 8 heads x 13 positions, wider than head's 2 x 4 */
    int w1, h1, w2, h2;
    char p1[1100], p2[1100];
    snprintf(p1, sizeof p1, "%s/run1.png", dir.s);
    snprintf(p2, sizeof p2, "%s/run2.png", dir.s);
    CHECK(png_ok(p1, &w1, &h1) && png_ok(p2, &w2, &h2) && h1 > h2);
    /* tokens label the positions (pair 0's clean sequence), and the PNG
     * says what it is */
    CHECK(t_sh("grep -a -q 'patching' %s && grep -a -q 'patch run 1' %s", p1, p1) == 0);
    /* with --model: the model's newest run of the kind */
    CHECK(t_sh("%s heatmap --what patching --model %s/m2 --db %s --out %s >/dev/null 2>&1", b,
               dir.s, db.s, png.s) == 0);
    CHECK(t_sh("grep -a -q 'patch run 4' %s", png.s) == 0);
    /* a run of the wrong kind, a run that does not exist, a failed run:
     * one line, exit 1, no picture */
    remove(png.s);
    CHECK(t_sh("%s heatmap --what paths --db %s --run 2 --out %s >/dev/null 2>%s", b, db.s, png.s,
               err.s) == 1);
    CHECK(t_one_line(err.s, "run 2 is a 'patch' run"));
    CHECK(t_sh("%s heatmap --what patching --db %s --run 5 --out %s >/dev/null 2>%s", b, db.s,
               png.s, err.s) == 1);
    CHECK(t_one_line(err.s, "run 5 is a 'paths' run"));
    CHECK(t_sh("%s heatmap --what patching --db %s --run 99 --out %s >/dev/null 2>%s", b, db.s,
               png.s, err.s) == 1);
    CHECK(t_one_line(err.s, "no run 99"));
    CHECK(t_sh("sqlite3 %s \"UPDATE runs SET status = 'failed' WHERE run_id = 3\"", db.s) == 0);
    CHECK(t_sh("%s heatmap --what patching --db %s --run 3 --out %s >/dev/null 2>%s", b, db.s,
               png.s, err.s) == 1);
    CHECK(t_one_line(err.s, "did not finish"));
    CHECK(t_sh("%s heatmap --what patching --db %s --out %s >/dev/null 2>%s", b, db.s, png.s,
               err.s) == 2);
    CHECK(!al_file_exists(png.s));
    CHECK(t_sh("ls %s | grep -q tmp", dir.s) != 0); /* no temporaries left */
}

/* ------------------------------------------------------------ report */

/* The tasks that need the tokenizer, end to end: names and a pair file
 * give one row per configuration, and a heatmap drawn after the pair
 * file was edited (same lengths, other tokens) numbers its positions and
 * says why instead of labelling them with the new file's tokens. */
TEST(patch_cli_names_and_file_tasks) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err"), png = t_pcopy("x.png");
    t_tiny_model(dir.s, 2, 20);
    const char *b = t_bin();
    CHECK(t_sh("%s patch --model %s/m2 --db %s --task names --n 3 --component head --threads 2 "
               ">/dev/null 2>%s",
               b, dir.s, db.s, err.s) == 0);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM patching WHERE run_id = 1 AND task = 'names'") ==
          2 * 4);
    const char *pairs = t_write("p.jsonl", "{\"clean\": \"qzxj\", \"corrupted\": \"qzyj\", "
                                           "\"answer\": \" the\", \"wrong\": \" a\"}\n");
    t_pbuf pp = t_pcopy("p.jsonl");
    (void)pairs;
    int rc = t_sh("%s patch --model %s/m2 --db %s --task file --pairs %s --component head_pos "
                  "--threads 2 >/dev/null 2>%s",
                  b, dir.s, db.s, pp.s, err.s);
    char *msg = t_slurp(err.s);
    CHECKF(rc == 0, "exit %d: %s", rc, msg ? msg : "");
    free(msg);
    long T = t_sql_long(db.s, "SELECT seq_len FROM patching_runs WHERE run_id = 2");
    CHECK(T == 4 &&
          t_sql_long(db.s, "SELECT count(*) FROM patching WHERE run_id = 2") == 2 * 4 * T);
    CHECK(t_sql_long(db.s, "SELECT length(task_hash) FROM patching_runs WHERE run_id = 2") == 16);
    CHECK(t_sh("%s heatmap --what patching --db %s --run 2 --out %s >/dev/null 2>%s", b, db.s,
               png.s, err.s) == 0);
    msg = t_slurp(err.s);
    CHECKF(msg && !strstr(msg, "numbered"), "%s", msg ? msg : "");
    free(msg);
    /* the same lengths, other words: the fingerprint no longer matches */
    t_write("p.jsonl", "{\"clean\": \"qzwj\", \"corrupted\": \"qzvj\", "
                       "\"answer\": \" the\", \"wrong\": \" a\"}\n");
    CHECK(t_sh("%s heatmap --what patching --db %s --run 2 --out %s >/dev/null 2>%s", b, db.s,
               png.s, err.s) == 0);
    msg = t_slurp(err.s);
    CHECKF(msg && strstr(msg, "numbered") && strstr(msg, "no longer the run's"), "%s",
           msg ? msg : "");
    free(msg);
}

TEST(patch_cli_report_section) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), rep = t_pcopy("rep");
    t_tiny_model(dir.s, 2, 20);
    const char *b = t_bin();
    CHECK(t_sh("%s scores --model %s/m2 --db %s --probe-r 6 --probe-n 4 >/dev/null 2>&1", b, dir.s,
               db.s) == 0);
    CHECK(t_sh("%s report --model %s/m2 --db %s --out %s >/dev/null 2>&1", b, dir.s, db.s, rep.s) ==
          0);
    char idx[1100];
    snprintf(idx, sizeof idx, "%s/index.html", rep.s);
    char *html = t_slurp(idx);
    CHECK(html && !strstr(html, "patching</h3>")); /* no runs, no section */
    free(html);
    CHECK(t_sh("%s patch --model %s/m2 --db %s --component head_pos " TASK " >/dev/null 2>&1 && "
               "%s paths --model %s/m2 --db %s " TASK " >/dev/null 2>&1",
               b, dir.s, db.s, b, dir.s, db.s) == 0);
    CHECK(t_sh("%s report --model %s/m2 --db %s --out %s >/dev/null 2>&1", b, dir.s, db.s, rep.s) ==
          0);
    html = t_slurp(idx);
    CHECK(html && strstr(html, "<h3>Activation patching</h3>") &&
          strstr(html, "<h3>Path patching</h3>"));
    CHECK(html && strstr(html, "<b>head_pos</b>, denoising, task induction (run 2, 4 pairs)"));
    CHECK(html && strstr(html, "<b>paths</b>, noising, task induction (run 3, 4 pairs)"));
    /* the table's first row is the run's largest |effect| */
    char *top = t_sql(db.s, "SELECT printf('<td class=t>%d.%d @ %d</td><td>%+.4f</td>', layer, "
                            "head, pos, value) FROM patching WHERE run_id = 2 ORDER BY abs(value) "
                            "DESC, patch_id LIMIT 1");
    CHECKF(html && top && strstr(html, top), "missing %s", top ? top : "");
    free(top);
    const char *pics[] = {"m2-patching-induction-head_pos-denoise.png",
                          "m2-paths-induction-noise.png"};
    for (int i = 0; i < 2; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", rep.s, pics[i]);
        int w, h;
        CHECKF(html && strstr(html, pics[i]) && png_ok(p, &w, &h), "%s", pics[i]);
    }
    free(html);
}

/* ------------------------------------------------------------ experiment */

static const char exp_json[] = T_EXP_TINY_2L(
    "patching") " \"analyses\": {\n"
                "   \"patch\": [{\"component\": \"head\", \"probe_r\": 6, \"n\": 4},\n"
                "             {\"component\": \"head_pos\", \"probe_r\": 6, \"n\": 4, \"batch\": 2}],\n"
                "   \"paths\": {\"direction\": \"noise\", \"probe_r\": 6, \"n\": 4}},\n"
                " \"pictures\": {\"kinds\": [\"patching\", \"paths\"]}}\n";

TEST(patch_cli_experiment_stages) {
    t_pbuf js = t_pcopy("x.json"), out = t_pcopy("out"), log = t_pcopy("log");
    t_write("x.json", exp_json);
    char db[1200];
    snprintf(db, sizeof db, "%s/results.db", out.s);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), js.s, out.s, log.s) == 0);
    char *txt = t_slurp(log.s);
    /* data, tokenizer, encode, train, 2 x patch, paths, report */
    CHECKF(txt && strstr(txt, "== [5/8] patch (induction, head, denoise): model two") &&
               strstr(txt, "== [6/8] patch (induction, head_pos, denoise)") &&
               strstr(txt, "== [7/8] paths (induction, noise)") &&
               strstr(txt, "$ attnlab patch --model") && strstr(txt, "--component head_pos"),
           "%s", txt ? txt : "");
    free(txt);
    CHECK_SQL(db,
              "SELECT kind, status, count(*) FROM runs WHERE kind IN ('patch', 'paths') "
              "GROUP BY kind",
              "patch|done|2\npaths|done|1");
    CHECK_SQL(db,
              "SELECT p.component, count(*) FROM patching p JOIN patching_runs x USING (run_id) "
              "GROUP BY p.component ORDER BY p.component",
              "head|8\nhead_pos|104");
    CHECK_SQL(db, "SELECT count(*) FROM path_patching", "78");
    char idx[1200];
    snprintf(idx, sizeof idx, "%s/index.html", out.s);
    char *html = t_slurp(idx);
    CHECK(html && strstr(html, "two-patching-induction-head-denoise.png") &&
          strstr(html, "two-patching-induction-head_pos-denoise.png") &&
          strstr(html, "two-paths-induction-noise.png"));
    free(html);
    /* again: every stage but the report reused, no new runs */
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), js.s, out.s, log.s) == 0);
    txt = t_slurp(log.s);
    int reused = 0;
    for (const char *q = txt; q && (q = strstr(q, "reused: outputs complete")) != NULL; q++)
        reused++;
    CHECKF(reused == 7, "%d stages reused", reused);
    free(txt);
    CHECK_SQL(db, "SELECT count(*) FROM runs WHERE kind IN ('patch', 'paths')", "3");
}

/* The loader names the key path of a bad patch/paths option. */
TEST(patch_cli_experiment_keys_checked) {
    char bad[sizeof exp_json + 64];
    const char *cut = strstr(exp_json, "\"component\": \"head\",");
    snprintf(bad, sizeof bad, "%.*s\"compnent\": \"head\",%s", (int)(cut - exp_json), exp_json,
             cut + strlen("\"component\": \"head\","));
    const char *p = t_write("bad.json", bad);
    al_experiment *x = NULL;
    al_err e = {{0}};
    CHECK(al_exp_load(p, &x, &e) == -1 && x == NULL);
    CHECKF(strstr(e.msg, "analyses.patch[0].compnent: unknown key (see 'attnlab help patch')"),
           "%s", e.msg);
    cut = strstr(exp_json, "\"direction\": \"noise\",");
    snprintf(bad, sizeof bad, "%.*s\"pairs\": \"no/such.jsonl\", %s", (int)(cut - exp_json),
             exp_json, cut);
    p = t_write("bad.json", bad);
    CHECK(al_exp_load(p, &x, &e) == -1);
    CHECKF(strstr(e.msg, "analyses.paths.pairs: no such file: no/such.jsonl"), "%s", e.msg);
    cut = strstr(exp_json, "\"direction\": \"noise\",");
    snprintf(bad, sizeof bad, "%.*s\"model\": \"x\", %s", (int)(cut - exp_json), exp_json, cut);
    p = t_write("bad.json", bad);
    CHECK(al_exp_load(p, &x, &e) == -1);
    CHECKF(strstr(e.msg, "analyses.paths.model: is set by the experiment itself"), "%s", e.msg);
    p = t_write("good.json", exp_json);
    CHECK_OK(al_exp_load(p, &x, &e), &e);
    if (x) {
        CHECK(x->n_analyses == 3 && strcmp(x->an[2].kind, "paths") == 0);
        CHECKF(strcmp(x->an[1].label, "patch (induction, head_pos, denoise)") == 0, "%s",
               x->an[1].label);
        al_exp_free(x);
    }
}
