/* test_store.c -- the results database, read back with the sqlite3 CLI
 * (an independent reader) rather than through the code under test. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/store.h"
#include "test.h"

#define AL_STR_(x) #x
#define AL_STR(x) AL_STR_(x) /* the schema version as a string */

static int sql_is(const char *db, const char *q, const char *want) {
    char *got = t_sql(db, q);
    int ok = got && strcmp(got, want) == 0;
    if (!ok)
        fprintf(stderr, "    %s\n      got  [%s]\n      want [%s]\n", q, got ? got : "(error)",
                want);
    free(got);
    return ok;
}

static void small_model(al_model *m, uint64_t seed) {
    al_config c = al_config_default();
    c.d_vocab = 32, c.n_ctx = 16, c.seed = seed;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
}

/* A model directory holding only model.safetensors (enough for sha256). */
static const char *model_dir(const char *name, const al_model *m) {
    static char dir[1024];
    al_err e;
    snprintf(dir, sizeof dir, "%s", t_path(name));
    char p[1100];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK_OK(al_mkdir_p(dir, &e), &e);
    CHECK_OK(al_ckpt_write_weights(p, m, &e), &e);
    return dir;
}

TEST(store_schema_created) {
    char db[1024]; /* t_path buffers rotate */
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    /* WAL while a writer has it open, rollback journal at rest (store.c) */
    CHECK(sql_is(db, "PRAGMA journal_mode", "wal"));
    al_store_close(s);
    CHECK(sql_is(db, "PRAGMA user_version", AL_STR(AL_STORE_SCHEMA_VERSION)));
    CHECK(sql_is(db, "PRAGMA journal_mode", "delete"));
    CHECK(sql_is(
        db,
        "SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_master "
        "WHERE type IN ('table', 'view') ORDER BY name)",
        "ablations attribution_agreement attribution_patching attribution_runs "
        "attribution_tokens circuit_edges circuit_main circuit_runs composition eigenvalues head_overlap head_scores head_summary "
        "latest_run layer_scores logit_attribution logit_lens merge_sources model_scores models "
        "patching patching_runs path_patching path_terms pruning_steps run_warnings runs "
        "sae_feature_contexts sae_feature_heads sae_feature_logits sae_feature_runs sae_features "
        "sae_head_features sae_induction_features sae_probe_heads sae_runs sae_task_features "
        "sae_task_runs score_intervals "
        "singular_values skip_trigrams "
        "sweep_findings sweep_models sweep_summary sweep_task t_quantiles train_head_scores train_log "
        "view_cells views"));
    /* the DESIGN §6 minimum columns */
    CHECK(sql_is(db,
                 "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN "
                 "('run_id','kind','config_json','model_id','started_at','finished_at',"
                 "'status','attnlab_version')",
                 "8"));
    CHECK(sql_is(db,
                 "SELECT count(*) FROM pragma_table_info('head_scores') WHERE name IN "
                 "('run_id','model_id','layer','head','metric','value')",
                 "6"));
    /* reopening an up-to-date file changes nothing */
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    CHECK(sql_is(db, "PRAGMA user_version", AL_STR(AL_STORE_SCHEMA_VERSION)));
}

/* A version-1 file (head_summary without copying_ablation_excess) is
 * migrated on open: its rows kept, the view rebuilt with the column. */
TEST(store_migrates_version_1) {
    char db[1024];
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    /* turn it back into a version-1 file with one score in it (without
     * version 3's tables) */
    CHECK(
        t_sh(
            "sqlite3 '%s' \"" T_DROP_SAE_SQL
            "ALTER TABLE models DROP COLUMN data_tokens; ALTER TABLE attribution_runs DROP COLUMN centred; DROP TABLE view_cells; DROP TABLE views; DROP TABLE run_warnings; DROP VIEW sweep_summary; DROP VIEW sweep_findings; DROP VIEW "
            "sweep_models; DROP TABLE merge_sources; DROP TABLE sweep_task; DROP INDEX "
            "runs_by_uid; ALTER TABLE runs DROP COLUMN uid; ALTER TABLE runs DROP COLUMN "
            "source_id; DROP TABLE patching; DROP TABLE path_patching; DROP TABLE "
            "patching_runs; DROP TABLE attribution_runs; DROP TABLE logit_attribution; DROP TABLE "
            "path_terms; DROP TABLE logit_lens; DROP TABLE attribution_patching; DROP TABLE "
            "attribution_agreement; DROP TABLE attribution_tokens; DROP TABLE circuit_runs; DROP "
            "TABLE circuit_edges; DROP VIEW head_summary; CREATE VIEW head_summary AS SELECT 1 AS "
            "model_id, 0 AS layer, 0 AS head, 'x' AS copying_ablation; INSERT INTO models(sha256, "
            "added_at) VALUES('x', 'now'); INSERT INTO runs(kind, started_at, status, "
            "attnlab_version) VALUES('scores', 'now', 'done', 'v'); INSERT INTO head_scores "
            "VALUES(1, 1, 0, 3, 'copying_ablation_excess', 0.25); PRAGMA user_version = 1\"",
            db) == 0);
    CHECK(sql_is(db, "PRAGMA user_version", "1"));
    CHECK(sql_is(db,
                 "SELECT count(*) FROM pragma_table_info('head_summary') WHERE name = "
                 "'copying_ablation_excess'",
                 "0"));
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    CHECK(sql_is(db, "PRAGMA user_version", AL_STR(AL_STORE_SCHEMA_VERSION)));
    CHECK(sql_is(db, "SELECT name, copying_ablation_excess FROM head_summary", "0.3|0.25"));
}

/* A version-13 file with an SAE feature row: version 14 adds the count
 * and AUROC columns (NULL for the old row), sae_probe_heads, and the
 * induction view by counts, which the old row (no counts) is not in. */
TEST(store_migrates_version_13_sae) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    char db[1024];
    snprintf(db, sizeof db, "%s", t_path("v13.db"));
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    CHECK(t_sh("sqlite3 '%s' \"DROP VIEW sae_induction_features; DROP TABLE sae_probe_heads; "
               "ALTER TABLE sae_features DROP COLUMN first_fired; ALTER TABLE sae_features DROP "
               "COLUMN second_fired; ALTER TABLE sae_features DROP COLUMN induction_p; ALTER "
               "TABLE sae_features DROP COLUMN auroc; ALTER TABLE sae_features DROP COLUMN "
               "induction; ALTER TABLE sae_features DROP COLUMN next_token; ALTER TABLE "
               "sae_features DROP COLUMN next_token_str; ALTER TABLE sae_features DROP COLUMN "
               "next_share; ALTER TABLE sae_feature_runs DROP COLUMN n_induction; ALTER TABLE "
               "sae_feature_runs DROP COLUMN group_auroc; CREATE VIEW sae_induction_features AS "
               "SELECT * FROM sae_features WHERE induction_index >= 0.8; INSERT INTO "
               "models(sha256, added_at) VALUES('x', 'now'); INSERT INTO runs(kind, started_at, "
               "status, attnlab_version) VALUES('sae_features', 'now', 'done', 'v'); INSERT INTO "
               "sae_features VALUES(1, 1, 7, 3, 0.1, 1.0, 2.0, 0.0, 0.5, 1.0, 1, 2, 0.6); "
               "ALTER TABLE train_log DROP COLUMN val_loss_se; ALTER TABLE train_log DROP COLUMN "
               "icl_gain_se; PRAGMA user_version = 13\"",
               db) == 0);
    CHECK(sql_is(db, "SELECT count(*) FROM sae_induction_features", "1"));
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    CHECK(sql_is(db, "PRAGMA user_version", AL_STR(AL_STORE_SCHEMA_VERSION)));
    CHECK(sql_is(db,
                 "SELECT feature, fired, first_fired IS NULL, induction IS NULL FROM "
                 "sae_features",
                 "7|3|1|1"));
    CHECK(sql_is(db, "SELECT count(*) FROM sae_induction_features", "0"));
    CHECK(sql_is(db, "SELECT count(*) FROM sae_probe_heads", "0"));
}

/* A version-14 file (head_summary without induction_all) with an
 * induction_all row already in head_scores: version 15 rebuilds the view
 * with the column, and the views that read head_summary still work. */
TEST(store_migrates_version_14_induction_all) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    char db[1024];
    snprintf(db, sizeof db, "%s", t_path("v14.db"));
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    CHECK(t_sh("sqlite3 '%s' \"ALTER TABLE train_log DROP COLUMN val_loss_se; ALTER TABLE "
               "train_log DROP COLUMN icl_gain_se; DROP VIEW head_summary; CREATE VIEW "
               "head_summary AS SELECT "
               "model_id, layer, head, layer || '.' || head AS name, MAX(CASE WHEN metric = "
               "'induction' THEN value END) AS induction FROM head_scores GROUP BY model_id, "
               "layer, head; INSERT INTO models(sha256, added_at) VALUES('x', 'now'); INSERT INTO "
               "runs(kind, started_at, status, attnlab_version) VALUES('scores', 'now', 'done', "
               "'v'); INSERT INTO head_scores VALUES(1, 1, 1, 2, 'induction', 0.25); INSERT INTO "
               "head_scores VALUES(1, 1, 1, 2, 'induction_all', 0.75); PRAGMA user_version = 14\"",
               db) == 0);
    CHECK(sql_is(db,
                 "SELECT count(*) FROM pragma_table_info('head_summary') WHERE name = "
                 "'induction_all'",
                 "0"));
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    CHECK(sql_is(db, "PRAGMA user_version", AL_STR(AL_STORE_SCHEMA_VERSION)));
    CHECK(sql_is(db, "SELECT name, induction, induction_all FROM head_summary", "1.2|0.25|0.75"));
    CHECK(sql_is(db, "SELECT count(*) >= 0 FROM sweep_models", "1"));
}

TEST(store_refuses_bad_files) {
    char txt[1024];
    snprintf(txt, sizeof txt, "%s", t_path("notes.txt"));
    CHECK(t_sh("printf 'this is not a database, just some text....%%0100d' 0 > '%s'", txt) == 0);
    al_store *s = NULL;
    al_err e = {{0}};
    CHECK(al_store_open(txt, &s, &e) == -1 && s == NULL);
    CHECKF(strstr(e.msg, txt) != NULL, "message names the file: %s", e.msg);
    /* a database from a newer attnlab */
    char db[1024];
    snprintf(db, sizeof db, "%s", t_path("new.db"));
    CHECK(t_sh("sqlite3 '%s' 'PRAGMA user_version = 99'", db) == 0);
    CHECK(al_store_open(db, &s, &e) == -1);
    CHECKF(strstr(e.msg, "newer") != NULL, "%s", e.msg);
    CHECK(al_store_open(t_path("no/such/dir/x.db"), &s, &e) == -1);
}

/* Same weights analysed twice: one models row, two runs; other weights: a
 * second models row. */
TEST(store_model_keyed_by_sha256) {
    char db[1024]; /* t_path buffers rotate */
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    al_model m, m2;
    small_model(&m, 1);
    small_model(&m2, 2);
    const char *d1 = model_dir("m1", &m);
    char d1c[1024];
    snprintf(d1c, sizeof d1c, "%s", d1);
    const char *d2 = model_dir("m2", &m2);
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    int64_t id1 = 0, id1b = 0, id2 = 0, r1, r2;
    CHECK_OK(al_store_model(s, d1c, NULL, &m, NULL, &id1, &e), &e);
    CHECK_OK(al_store_run_begin(s, "circuits", "{}", id1, &r1, &e), &e);
    CHECK_OK(al_store_run_finish(s, r1, &e), &e);
    CHECK_OK(al_store_model(s, d1c, NULL, &m, NULL, &id1b, &e), &e);
    CHECK_OK(al_store_run_begin(s, "circuits", "{}", id1b, &r2, &e), &e);
    CHECK_OK(al_store_run_finish(s, r2, &e), &e);
    CHECK_OK(al_store_model(s, d2, NULL, &m2, NULL, &id2, &e), &e);
    al_store_close(s);
    CHECK(id1 == id1b && id2 != id1 && r1 != r2);
    CHECK(sql_is(db, "SELECT count(*) FROM models", "2"));
    CHECK(sql_is(db, "SELECT count(*) FROM runs WHERE status = 'done' AND model_id = 1", "2"));
    /* the key is the file's sha256, as sha256sum computes it */
    CHECK(t_sh("sha256sum '%s/model.safetensors' | cut -c1-64 > '%s'", d1c, t_path("sha.txt")) ==
          0);
    char *want = t_slurp(t_path("sha.txt"));
    char q[256];
    snprintf(q, sizeof q, "SELECT sha256 || '\n' FROM models WHERE model_id = %lld",
             (long long)id1);
    char *got = t_sql(db, q);
    CHECK(want && got && strncmp(want, got, 64) == 0);
    free(want), free(got);
    CHECK(sql_is(db,
                 "SELECT n_layers, d_model, n_heads, d_head, d_vocab FROM models "
                 "WHERE model_id = 1",
                 "2|256|8|32|32"));
    al_model_free(&m), al_model_free(&m2);
}

/* head_summary: one row per (model, layer, head), the latest finished
 * run's value per metric; failed runs are ignored. */
TEST(store_head_summary_view) {
    char db[1024]; /* t_path buffers rotate */
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    al_model m;
    small_model(&m, 3);
    const char *d = model_dir("m", &m);
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    int64_t mid, run;
    CHECK_OK(al_store_model(s, d, NULL, &m, NULL, &mid, &e), &e);
    for (int k = 0; k < 3; k++) { /* runs: done (1), done (2), failed (3) */
        CHECK_OK(al_store_run_begin(s, "circuits", NULL, mid, &run, &e), &e);
        CHECK_OK(al_store_tx_begin(s, &e), &e);
        for (int l = 0; l < 2; l++)
            for (int h = 0; h < 8; h++) {
                CHECK_OK(al_store_put_head_score(s, run, mid, l, h, "copying_eigen",
                                                 k + l * 0.1 + h * 0.01, &e),
                         &e);
                if (k == 0) /* only the first run has ranks */
                    CHECK_OK(al_store_put_head_score(s, run, mid, l, h, "qk_rank", 32 - h, &e), &e);
            }
        if (k < 2)
            CHECK_OK(al_store_run_finish(s, run, &e), &e);
        else
            CHECK_OK(al_store_run_fail(s, run, "test failure", &e), &e);
    }
    al_store_close(s);
    CHECK(sql_is(db, "SELECT count(*) FROM head_summary", "16"));
    CHECK(sql_is(db,
                 "SELECT count(DISTINCT model_id || '/' || layer || '/' || head) FROM head_summary",
                 "16"));
    CHECK(
        sql_is(db,
               "SELECT name, copying_eigen, qk_rank FROM head_summary WHERE layer = 1 AND head = 3",
               "1.3|1.13|29.0"));
    CHECK(sql_is(db, "SELECT count(*) FROM head_scores WHERE run_id = 3", "0"));
    CHECK(sql_is(db, "SELECT status, error FROM runs WHERE run_id = 3", "failed|test failure"));
    al_model_free(&m);
}

/* Token strings with quotes, non-ASCII UTF-8 and invalid bytes come back
 * byte for byte (compared as hex, so no shell or terminal is involved). */
TEST(store_token_strings_round_trip) {
    char db[1024]; /* t_path buffers rotate */
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    al_model m;
    small_model(&m, 4);
    const char *d = model_dir("m", &m);
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    int64_t mid, run;
    CHECK_OK(al_store_model(s, d, NULL, &m, NULL, &mid, &e), &e);
    CHECK_OK(al_store_run_begin(s, "circuits", "{\"q\": \"it's\"}", mid, &run, &e), &e);
    CHECK_OK(al_store_tx_begin(s, &e), &e);
    const char a[] = "it's \"quoted\"; DROP TABLE runs; --";
    const char b[] = "\xe2\x90\xa3\xc3\xbc\xe5\xad\x97"; /* ␣ü字 */
    const char c[] = "\xff\xfe\x01x"; /* not UTF-8 */
    al_trigram_row t = {1, 1, 2, 3, a, b, c, strlen(a), strlen(b), strlen(c), 0.5, 2, 1};
    CHECK_OK(al_store_put_skip_trigram(s, run, mid, 0, 0, &t, &e), &e);
    CHECK_OK(al_store_run_finish(s, run, &e), &e);
    al_store_close(s);
    char want[256] = {0};
    const char *strs[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        for (const unsigned char *p = (const unsigned char *)strs[i]; *p; p++)
            sprintf(want + strlen(want), "%02X", *p);
        strcat(want, i < 2 ? "|" : "");
    }
    CHECK(sql_is(db, "SELECT hex(a_str), hex(b_str), hex(c_str) FROM skip_trigrams", want));
    CHECK(sql_is(db, "SELECT config_json FROM runs", "{\"q\": \"it's\"}"));
    CHECK(sql_is(db, "SELECT count(*) FROM runs", "1"));
    al_model_free(&m);
}

/* A writer killed with SIGKILL in the middle of its transaction: the file
 * passes integrity_check, none of its rows exist, and its run is marked
 * failed (not done) when the database is next opened. */
TEST(store_kill9_during_write) {
    char db[1024]; /* t_path buffers rotate */
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    al_model m;
    small_model(&m, 5);
    const char *d = model_dir("m", &m);
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        al_store *s;
        al_err e;
        int64_t mid, run;
        if (al_store_open(db, &s, &e) || al_store_model(s, d, NULL, &m, NULL, &mid, &e) ||
            al_store_run_begin(s, "circuits", NULL, mid, &run, &e) || al_store_tx_begin(s, &e))
            _exit(3);
        for (long i = 0;; i++) {
            if (al_store_put_head_score(s, run, mid, (int)(i / 1000), (int)(i % 1000), "x",
                                        (double)i, &e))
                _exit(4);
            if (i == 20000 && write(fd[1], "w", 1) != 1) _exit(5);
        }
    }
    close(fd[1]);
    char ch;
    CHECK(read(fd[0], &ch, 1) == 1); /* the child is mid-transaction */
    nanosleep(&(struct timespec){0, 20000000}, NULL);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    close(fd[0]);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* before any attnlab opens it: the run is still 'running', no rows */
    CHECK(sql_is(db, "PRAGMA integrity_check", "ok"));
    CHECK(sql_is(db, "SELECT status FROM runs", "running"));
    CHECK(sql_is(db, "SELECT count(*) FROM head_scores", "0"));
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    CHECK(sql_is(db, "PRAGMA integrity_check", "ok"));
    CHECK(sql_is(db, "SELECT status FROM runs", "failed"));
    CHECK(sql_is(db, "SELECT count(*) FROM runs WHERE status = 'done'", "0"));
    CHECK(sql_is(db, "SELECT count(*) FROM head_summary", "0"));
    al_model_free(&m);
}

/* A run of a live process is left alone by another connection's open. */
TEST(store_live_run_not_recovered) {
    char db[1024]; /* t_path buffers rotate */
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    al_store *s, *s2;
    al_err e;
    int64_t run;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    CHECK_OK(al_store_run_begin(s, "train", NULL, 0, &run, &e), &e);
    CHECK_OK(al_store_open(db, &s2, &e), &e);
    al_store_close(s2);
    CHECK(sql_is(db, "SELECT status, model_id IS NULL FROM runs", "running|1"));
    /* progressive commits are visible while the run is running */
    CHECK_OK(al_store_tx_begin(s, &e), &e);
    al_train_log_row tl = {100, 1e5, 3.5, 3.6, 0.2, 1e-3, 12, 0.01, 0.02};
    CHECK_OK(al_store_put_train_log(s, run, &tl, &e), &e);
    CHECK_OK(al_store_tx_commit(s, &e), &e);
    CHECK(sql_is(db, "SELECT step, val_loss, val_loss_se, icl_gain_se FROM train_log",
                 "100|3.6|0.01|0.02"));
    CHECK_OK(al_store_run_finish(s, run, &e), &e);
    al_store_close(s);
    CHECK(sql_is(db, "SELECT status, finished_at IS NOT NULL FROM runs", "done|1"));
}
