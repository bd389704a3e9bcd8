/* test_concurrency.c -- several attnlab processes writing one database at
 * once, as parallel experiment stages or a user's second terminal do:
 * four analyses of different kinds, and two `train --db` runs. Each
 * process must exit 0 (a lock held by another is waited for, never an
 * error), every run must end 'done' with all its rows, and the file must
 * pass PRAGMA integrity_check. The rows expected of a run are those the
 * same command writes alone, into a database of its own, beforehand. */
#define _DEFAULT_SOURCE /* wait4 (proc.h) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/util.h"
#include "proc.h"
#include "test.h"

/* "table:rows table:rows ..." over every table with a run_id column (so
 * a table added later is covered too), counting the rows of the runs of
 * one kind; NULL if a query failed. */
static char *rows_by_table(const char *db, const char *kind) {
    char *tables = t_sql(db, "SELECT group_concat(m.name, ' ') FROM sqlite_master m "
                             "WHERE m.type = 'table' AND m.name != 'runs' AND EXISTS "
                             "(SELECT 1 FROM pragma_table_info(m.name) c WHERE c.name = 'run_id')");
    if (!tables) return NULL;
    size_t cap = 512 * (strlen(tables) + 1), len = 0;
    char *sql = malloc(cap), *save = NULL, *out = NULL;
    if (sql) {
        len = (size_t)snprintf(sql, cap, "SELECT ''");
        for (char *t = strtok_r(tables, " ", &save); t; t = strtok_r(NULL, " ", &save))
            len += (size_t)snprintf(sql + len, cap - len,
                                    " || ' %s:' || (SELECT count(*) FROM %s WHERE run_id IN "
                                    "(SELECT run_id FROM runs WHERE kind = '%s'))",
                                    t, t, kind);
        out = t_sql(db, sql);
    }
    free(sql);
    free(tables);
    return out;
}

/* Start every command of cmds (attnlab arguments with %1$s = the
 * database) at once, wait for all; each must exit 0 with nothing about a
 * busy or locked database on stderr. */
static void run_at_once(const char *db, const char *const *cmds, int n) {
    pid_t pid[8];
    char line[8192];
    for (int i = 0; i < n; i++) {
        snprintf(line, sizeof line, cmds[i], db);
        char err[32];
        snprintf(err, sizeof err, "err%d", i);
        pid[i] = t_spawn(NULL, t_path(err), "%s", line);
    }
    for (int i = 0; i < n; i++) {
        int rc = t_wait(pid[i], NULL);
        char err[32];
        snprintf(err, sizeof err, "err%d", i);
        char *msg = t_slurp(t_path(err));
        CHECKF(rc == 0, "'%s' exited %d: %s", cmds[i], rc, msg ? msg : "");
        CHECKF(!msg || (!strstr(msg, "locked") && !strstr(msg, "busy")), "'%s': %s", cmds[i], msg);
        free(msg);
    }
}

/* Each kind's rows in db equal those of the same command run alone. */
static void same_rows_as_alone(const char *db, const char *const *cmds, const char *const *kinds,
                               int n) {
    for (int i = 0; i < n; i++) {
        char alone[32];
        snprintf(alone, sizeof alone, "alone%d.db", i);
        t_pbuf a = t_pcopy(alone);
        run_at_once(a.s, &cmds[i], 1);
        char *want = rows_by_table(a.s, kinds[i]), *got = rows_by_table(db, kinds[i]);
        CHECKF(want && got && strcmp(want, got) == 0, "%s: rows [%s], alone [%s]", kinds[i],
               got ? got : "(error)", want ? want : "(error)");
        /* two runs without a single row would compare equal too */
        int some = 0;
        for (const char *p = want; p && (p = strchr(p, ':')) != NULL; p++) some |= p[1] != '0';
        CHECKF(some, "%s alone wrote no rows: [%s]", kinds[i], want ? want : "");
        free(want);
        free(got);
    }
}

TEST(concurrency_four_analyses_one_db) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 10);
    char m[1200], val[1200];
    snprintf(m, sizeof m, "--model %s/m2 --threads 1", dir.s);
    snprintf(val, sizeof val, "--data %s/s.val.bin", dir.s);
    char c[4][4096];
    /* long enough to overlap: a tenth as much under the sanitizers,
     * which are slower by about that */
    const int k = T_SAN ? 10 : 1;
    snprintf(c[0], sizeof c[0], "circuits %s --db %%1$s --mc-samples %d --top-k 2000", m,
             20000 / k);
    snprintf(c[1], sizeof c[1], "scores %s --db %%1$s %s --probe-r 12 --probe-n %d", m, val,
             20000 / k);
    snprintf(c[2], sizeof c[2],
             "ablate %s --db %%1$s %s --pairs --method mean --probe-r 12 "
             "--batches %d",
             m, val, 60 / k);
    snprintf(c[3], sizeof c[3],
             "patch %s --db %%1$s --component head_pos --probe-r 12 --n %d "
             "--batch 8 --naive",
             m, 256 / k);
    const char *const cmds[4] = {c[0], c[1], c[2], c[3]};
    const char *const kinds[4] = {"circuits", "scores", "ablate", "patch"};
    double t0 = al_now();
    run_at_once(db.s, cmds, 4); /* into a database none of them finds made */
    fprintf(stderr, "    four analyses at once: %.1f s\n", al_now() - t0);
    CHECK_SQL(db.s, "PRAGMA integrity_check", "ok");
    CHECK_SQL(db.s,
              "SELECT group_concat(kind || ':' || status, ' ') FROM (SELECT kind, status "
              "FROM runs ORDER BY kind)",
              "ablate:done circuits:done patch:done scores:done");
    CHECK_SQL(db.s, "SELECT count(*) FROM models", "1");
    same_rows_as_alone(db.s, cmds, kinds, 4);
}

TEST(concurrency_two_trainings_one_db) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 1, 1); /* the corpus and tokenizer */
    char c[2][6000];
    for (int i = 0; i < 2; i++)
        snprintf(c[i], sizeof c[i],
                 "train --data %s/s.train.bin --val %s/s.val.bin --tokenizer %s/tok.json "
                 "--out %s/t%d --db %%1$s --seed %d --steps 1000 --eval-every 5 --n-layers 2 "
                 "--d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 --warmup 2 "
                 "--threads 1",
                 dir.s, dir.s, dir.s, dir.s, i, i + 1);
    const char *const cmds[2] = {c[0], c[1]};
    double t0 = al_now();
    run_at_once(db.s, cmds, 2);
    fprintf(stderr, "    two trainings at once: %.1f s\n", al_now() - t0);
    CHECK_SQL(db.s, "PRAGMA integrity_check", "ok");
    CHECK_SQL(db.s, "SELECT group_concat(status) FROM runs", "done,done");
    CHECK_SQL(db.s, "SELECT count(*) FROM models", "2");
    /* steps 0, 5, ..., 1000 and 4 scores of 8 heads at each, for each run */
    CHECK_SQL(db.s,
              "SELECT group_concat(n) FROM (SELECT count(*) AS n FROM train_log "
              "GROUP BY run_id)",
              "201,201");
    CHECK_SQL(db.s,
              "SELECT group_concat(n) FROM (SELECT count(*) AS n FROM train_head_scores "
              "GROUP BY run_id)",
              "6432,6432");
    CHECK_SQL(db.s, "SELECT count(*) FROM runs r JOIN models m USING (model_id)", "2");
}

/* Eight processes opening one new database together: the first to switch
 * it to WAL holds an exclusive lock for a moment, and SQLite answers the
 * others SQLITE_BUSY without calling the busy handler. Before the store
 * retried that, about 3 opens in 800 failed with "database is locked".
 * `db merge OUT` with no inputs only opens (creates, migrates) OUT. */
TEST(concurrency_eight_open_one_new_db) {
    char c[64];
    snprintf(c, sizeof c, "db merge %%1$s");
    const char *const cmds[8] = {c, c, c, c, c, c, c, c};
    /* the race shows about twice in 80 rounds; under the sanitizers, where
     * each process starts slowly, 4 rounds check the same code for leaks */
    int rounds = T_SAN ? 4 : 80, at_rest = 0;
    for (int round = 0; round < rounds; round++) {
        char name[32];
        snprintf(name, sizeof name, "n%d.db", round);
        t_pbuf db = t_pcopy(name);
        run_at_once(db.s, cmds, 8);
        /* the last to close leaves it in rollback-journal mode; two
         * closing at once can each find the other still open and both
         * leave WAL, and if their closes overlap, its -wal (4 rounds in 80
         * here). A reader takes either: SQLite's WAL reader while a -wal
         * exists (store.c, store_sqlite_open_ro) */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "%s db show %s > /dev/null 2>&1", t_bin(), db.s);
        CHECKF(system(cmd) == 0, "round %d: db show failed", round);
        char *mode = t_sql(db.s, "PRAGMA journal_mode");
        CHECKF(mode && (!strcmp(mode, "delete") || !strcmp(mode, "wal")), "journal mode %s",
               mode ? mode : "?");
        char wal[1100];
        snprintf(wal, sizeof wal, "%s-wal", db.s);
        at_rest += mode && !strcmp(mode, "delete") && !al_file_exists(wal);
        free(mode);
        CHECK_SQL(db.s, "PRAGMA integrity_check", "ok");
    }
    fprintf(stderr, "    %d of %d rounds left the file at rest (rollback journal, no -wal)\n",
            at_rest, rounds);
    /* (too few rounds under the sanitizers for a share) */
    CHECKF(T_SAN || at_rest >= rounds * 3 / 4, "%d of %d rounds at rest", at_rest, rounds);
}
