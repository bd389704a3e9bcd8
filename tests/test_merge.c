/* test_merge.c -- `attnlab db merge` (merge.h) end to end: real inputs
 * made by the CLI on tiny models (colliding run ids 1, 2, 3..., one
 * model analysed in both), compared with OUT row by row through a
 * canonical form that names runs by uid and models by sha256; the same
 * input twice, A then B against A and B at once, a merged file merged
 * again; unfinished runs skipped; sources recorded; every refusal one
 * line with OUT byte-identical; SIGKILL at a dozen moments and SIGINT
 * during a merge of 3 x 10^5 rows. */
#define _DEFAULT_SOURCE /* wait4 (proc.h), link */
#define _POSIX_C_SOURCE 200809L
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/merge.h"
#include "attnlab/store.h"
#include "attnlab/util.h"
#include "proc.h"
#include "test.h"

#define PROBE "--probe-r 6 --n 4 --batch 2 --threads 2"

/* ------------------------------------------------------------ canonical rows */

/* Every row of every table with a run_id column, of done runs only, as
 * text: the table, the run's uid, the model's sha256, then every other
 * column but run_id, model_id and a rowid other than run_id (the ids a
 * merge may change). Sorted, so two files hold the same results exactly
 * when their lists are equal. */
typedef struct canon {
    char **row;
    size_t n, cap;
} canon;

static void canon_add(canon *c, const char *s) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        c->row = realloc(c->row, c->cap * sizeof *c->row);
    }
    c->row[c->n++] = strdup(s);
}

static int by_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void canon_free(canon *c) {
    for (size_t i = 0; i < c->n; i++) free(c->row[i]);
    free(c->row);
    memset(c, 0, sizeof *c);
}

/* Append value v of column i of q to buf. */
static void put_value(char *buf, size_t cap, sqlite3_stmt *q, int i) {
    size_t n = strlen(buf);
    switch (sqlite3_column_type(q, i)) {
    case SQLITE_NULL: snprintf(buf + n, cap - n, "|NULL"); break;
    case SQLITE_INTEGER:
        snprintf(buf + n, cap - n, "|%lld", (long long)sqlite3_column_int64(q, i));
        break;
    case SQLITE_FLOAT: snprintf(buf + n, cap - n, "|%.17g", sqlite3_column_double(q, i)); break;
    default: {
        /* text and blobs in hex: bytes, NULs included */
        const unsigned char *b = sqlite3_column_blob(q, i);
        int len = sqlite3_column_bytes(q, i);
        n += (size_t)snprintf(buf + n, cap - n, "|x");
        for (int k = 0; k < len && n + 3 < cap; k++)
            n += (size_t)snprintf(buf + n, cap - n, "%02x", b[k]);
    }
    }
}

static void canon_load(const char *path, canon *c) {
    memset(c, 0, sizeof *c);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *qt, *qc, *q;
    CHECK(sqlite3_prepare_v2(db,
                             "SELECT name FROM sqlite_schema WHERE type = 'table' AND name IN "
                             "(SELECT m.name FROM sqlite_schema m, pragma_table_info(m.name) p "
                             "WHERE p.name = 'run_id')",
                             -1, &qt, NULL) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(db, "SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid",
                             -1, &qc, NULL) == SQLITE_OK);
    while (sqlite3_step(qt) == SQLITE_ROW) {
        char tab[64], cols[4096] = "", sql[8192];
        snprintf(tab, sizeof tab, "%s", (const char *)sqlite3_column_text(qt, 0));
        sqlite3_reset(qc);
        sqlite3_bind_text(qc, 1, tab, -1, SQLITE_TRANSIENT);
        int has_model = 0, n_pk = 0;
        char pk[64] = "", pk_type[64] = "";
        while (sqlite3_step(qc) == SQLITE_ROW) {
            const char *nm = (const char *)sqlite3_column_text(qc, 0);
            if (sqlite3_column_int(qc, 2)) {
                n_pk++;
                snprintf(pk, sizeof pk, "%s", nm);
                snprintf(pk_type, sizeof pk_type, "%s", (const char *)sqlite3_column_text(qc, 1));
            }
            if (!strcmp(nm, "model_id")) has_model = 1;
        }
        /* the ids a merge may change: run_id, model_id, the rowid, source_id */
        sqlite3_reset(qc);
        while (sqlite3_step(qc) == SQLITE_ROW) {
            const char *nm = (const char *)sqlite3_column_text(qc, 0);
            if (!strcmp(nm, "run_id") || !strcmp(nm, "model_id") || !strcmp(nm, "source_id") ||
                (n_pk == 1 && !strcmp(nm, pk) && !strcasecmp(pk_type, "INTEGER")))
                continue;
            size_t n = strlen(cols);
            snprintf(cols + n, sizeof cols - n, ", t.\"%s\"", nm);
        }
        snprintf(sql, sizeof sql,
                 "SELECT r.uid, %s%s FROM \"%s\" t JOIN runs r ON r.run_id = t.run_id%s "
                 "WHERE r.status = 'done'",
                 has_model ? "m.sha256" : "NULL", cols, tab,
                 has_model ? " LEFT JOIN models m ON m.model_id = t.model_id" : "");
        CHECKF(sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK, "%s: %s", sql,
               sqlite3_errmsg(db));
        char *buf = malloc(1 << 16);
        while (sqlite3_step(q) == SQLITE_ROW) {
            snprintf(buf, 1 << 16, "%s", tab);
            for (int i = 0; i < sqlite3_column_count(q); i++) put_value(buf, 1 << 16, q, i);
            canon_add(c, buf);
        }
        free(buf);
        sqlite3_finalize(q);
    }
    sqlite3_finalize(qt);
    sqlite3_finalize(qc);
    sqlite3_close(db);
    qsort(c->row, c->n, sizeof *c->row, by_str);
}

/* canon(out) must be exactly the union of canon(inputs). */
static void check_union(const char *out, const char *const *in, int n_in) {
    canon o, all = {0};
    canon_load(out, &o);
    for (int i = 0; i < n_in; i++) {
        canon one;
        canon_load(in[i], &one);
        for (size_t k = 0; k < one.n; k++) canon_add(&all, one.row[k]);
        canon_free(&one);
    }
    qsort(all.row, all.n, sizeof *all.row, by_str);
    CHECKF(o.n == all.n, "%s holds %zu rows, its inputs %zu", out, o.n, all.n);
    size_t diff = 0;
    for (size_t k = 0; k < o.n && k < all.n; k++)
        if (strcmp(o.row[k], all.row[k])) {
            if (!diff)
                t_fail(__FILE__, __LINE__, "first difference:\n  out %.200s\n  in  %.200s",
                       o.row[k], all.row[k]);
            diff++;
        }
    CHECKF(diff == 0, "%zu rows differ", diff);
    CHECK(o.n > 100); /* the inputs were not empty */
    canon_free(&o);
    canon_free(&all);
}

static int same_canon(const char *a, const char *b) {
    canon x, y;
    canon_load(a, &x);
    canon_load(b, &y);
    int same = x.n == y.n;
    for (size_t k = 0; same && k < x.n; k++) same = !strcmp(x.row[k], y.row[k]);
    canon_free(&x);
    canon_free(&y);
    return same;
}

/* ------------------------------------------------------------ inputs */

/* Two databases made by the CLI in t_tmpdir(): a.db (ablate, circuits,
 * patch on m2) and b.db (circuits on m2, ablate and attribute on m1,
 * plus a failed run and a crafted 'running' one). Both number their runs
 * from 1 and both analyse m2. */
static void make_a(void) {
    t_pbuf d = t_pcopy("."), a = t_pcopy("a.db");
    const char *x = t_bin();
    t_tiny_model(d.s, 2, 5);
    CHECK(
        t_sh("%s ablate --model %s/m2 --db %s --data %s/s.val.bin --each --probe-r 10 --probe-n 8 "
             "--batches 2 --batch 4 --threads 2 >/dev/null 2>&1",
             x, d.s, a.s, d.s) == 0);
    CHECK(t_sh("%s circuits --model %s/m2 --db %s --top-k 5 --threads 2 >/dev/null 2>&1", x, d.s,
               a.s) == 0);
    CHECK(t_sh("%s patch --model %s/m2 --db %s " PROBE " >/dev/null 2>&1", x, d.s, a.s) == 0);
    CHECK_SQL(a.s, "SELECT group_concat(run_id) FROM (SELECT run_id FROM runs ORDER BY run_id)",
              "1,2,3");
}

static void make_inputs(void) {
    t_pbuf d = t_pcopy("."), a = t_pcopy("a.db"), b = t_pcopy("b.db");
    const char *x = t_bin();
    make_a();
    t_tiny_model(d.s, 1, 5);
    CHECK(t_sh("%s circuits --model %s/m2 --db %s --top-k 5 --threads 2 >/dev/null 2>&1", x, d.s,
               b.s) == 0);
    CHECK(
        t_sh("%s ablate --model %s/m1 --db %s --data %s/s.val.bin --pairs --probe-r 10 --probe-n 8 "
             "--batches 2 --batch 4 --threads 2 >/dev/null 2>&1",
             x, d.s, b.s, d.s) == 0);
    CHECK(t_sh("%s attribute --model %s/m1 --db %s " PROBE " >/dev/null 2>&1", x, d.s, b.s) == 0);
    /* a failed run (a refused option after the run began is not
     * reachable cheaply, so mark one by hand) and one still running */
    CHECK(t_sh("%s circuits --model %s/m1 --db %s --top-k 5 --threads 2 >/dev/null 2>&1", x, d.s,
               b.s) == 0);
    CHECK(
        t_sh(
            "sqlite3 %s \"UPDATE runs SET status = 'failed', error = 'x' WHERE run_id = 4; "
            "INSERT INTO runs(kind, model_id, started_at, status, attnlab_version, pid, host, uid) "
            "VALUES('scores', 1, 't', 'running', 'x', 1, 'elsewhere', lower(hex(randomblob(16))))\"",
            b.s) == 0);
    CHECK_SQL(b.s,
              "SELECT group_concat(run_id || status) FROM (SELECT * FROM runs ORDER BY run_id)",
              "1done,2done,3done,4failed,5running");
    /* colliding surrogate ids: both have ablation_id 1.. */
    CHECK_SQL(a.s, "SELECT min(ablation_id) FROM ablations", "1");
    CHECK_SQL(b.s, "SELECT min(ablation_id) FROM ablations", "1");
}

/* sha256 of a file's bytes (the refusals must leave OUT byte-identical). */
static void file_hash(const char *path, char hex[65]) {
    al_err e;
    if (al_sha256_file(path, hex, &e)) snprintf(hex, 65, "missing");
}

/* The content of a database (its SQL dump), for a refusal that began
 * writing and rolled back: the header's change counter moves with the
 * journal mode (store.c), the content must not. */
static void dump_hash(const char *path, char hex[65]) {
    char *d = t_sql(path, ".dump");
    uint8_t h[32];
    al_sha256(d ? d : "missing", d ? strlen(d) : 7, h);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", h[i]);
    free(d);
}

static int merge_cli(const char *out, const char *ins, const char *stdout_to) {
    return t_sh("%s db merge %s %s > %s 2> %s", t_bin(), out, ins,
                stdout_to ? stdout_to : "/dev/null", t_path("merge.err"));
}

/* ------------------------------------------------------------ tests */

TEST(merge_remaps_ids_and_models) {
    make_inputs();
    t_pbuf a = t_pcopy("a.db"), b = t_pcopy("b.db"), out = t_pcopy("out.db"),
           so = t_pcopy("so.txt");
    char ins[2200], ha[65], hb[65], h[65];
    snprintf(ins, sizeof ins, "%s %s", a.s, b.s);
    file_hash(a.s, ha);
    file_hash(b.s, hb);
    CHECK(merge_cli(out.s, ins, so.s) == 0);
    const char *in[] = {a.s, b.s};
    check_union(out.s, in, 2);
    /* the inputs are read, never written (not even a checkpoint) */
    file_hash(a.s, h);
    CHECK(!strcmp(h, ha));
    file_hash(b.s, h);
    CHECK(!strcmp(h, hb));
    /* 3 + 3 done runs with new ids, m2 once (both analysed it) */
    CHECK_SQL(out.s, "SELECT count(*), count(DISTINCT run_id), count(DISTINCT uid) FROM runs",
              "6|6|6");
    CHECK_SQL(out.s, "SELECT count(*), count(DISTINCT sha256) FROM models", "2|2");
    CHECK(t_sql_long(out.s, "SELECT count(*) FROM ablations") ==
          t_sql_long(a.s, "SELECT count(*) FROM ablations") +
              t_sql_long(b.s, "SELECT count(*) FROM ablations WHERE run_id IN "
                              "(SELECT run_id FROM runs WHERE status = 'done')"));
    /* every row points at its own run's model, every reference resolves */
    CHECK_SQL(
        out.s,
        "SELECT count(*) FROM ablations x JOIN runs r USING(run_id) WHERE x.model_id != r.model_id",
        "0");
    CHECK_SQL(
        out.s,
        "SELECT count(*) FROM circuit_runs x JOIN runs r USING(run_id) WHERE x.model_id != r.model_id",
        "0");
    CHECK_SQL(out.s, "SELECT count(*) FROM pragma_foreign_key_check", "0");
    CHECK_SQL(out.s, "PRAGMA integrity_check", "ok");
    /* the per-input lines and the total */
    char *s = t_slurp(so.s);
    CHECK(s && strstr(s, "a.db: 3 runs added") && strstr(s, "b.db: 3 runs added") &&
          strstr(s, "1 new model)") && strstr(s, "2 not done") && strstr(s, "6 runs added"));
    free(s);
    /* inputs untouched: still their own ids and no merge bookkeeping */
    CHECK_SQL(a.s, "SELECT count(*) FROM merge_sources", "0");
}

TEST(merge_idempotent_and_order_free) {
    make_inputs();
    t_pbuf a = t_pcopy("a.db"), b = t_pcopy("b.db"), x = t_pcopy("x.db"), y = t_pcopy("y.db"),
           z = t_pcopy("z.db"), so = t_pcopy("so.txt");
    char ins[2200];
    snprintf(ins, sizeof ins, "%s %s", a.s, b.s);
    CHECK(merge_cli(x.s, ins, NULL) == 0);
    char *before = t_sql(
        x.s,
        "SELECT count(*) || ',' || (SELECT count(*) FROM head_scores) || ',' || "
        "(SELECT count(*) FROM merge_sources) || ',' || (SELECT count(*) FROM models) FROM runs");
    CHECK(merge_cli(x.s, ins, so.s) == 0); /* again: nothing */
    char *again = t_sql(
        x.s,
        "SELECT count(*) || ',' || (SELECT count(*) FROM head_scores) || ',' || "
        "(SELECT count(*) FROM merge_sources) || ',' || (SELECT count(*) FROM models) FROM runs");
    CHECK(before && again && strcmp(before, again) == 0);
    free(before);
    free(again);
    char *s = t_slurp(so.s);
    CHECK(s && strstr(s, "0 runs added (0 rows, 0 new models), 6 already present, 2 not done"));
    free(s);
    /* A then B holds what A and B at once hold */
    CHECK(merge_cli(y.s, a.s, NULL) == 0);
    CHECK(merge_cli(y.s, b.s, NULL) == 0);
    CHECK(same_canon(x.s, y.s));
    /* a merged file merged again: same results, each run keeps its origin */
    CHECK(merge_cli(z.s, x.s, NULL) == 0);
    CHECK(same_canon(x.s, z.s));
    char q[2400];
    snprintf(q, sizeof q,
             "SELECT group_concat(p, ',') FROM (SELECT DISTINCT ms.path = '%s' OR "
             "ms.path = '%s' AS p FROM runs r JOIN merge_sources ms USING(source_id))",
             a.s, b.s);
    CHECK_SQL(z.s, q, "1");
    CHECK(merge_cli(z.s, y.s, NULL) == 0); /* y's runs are z's already */
    CHECK_SQL(z.s, "SELECT count(*) FROM runs", "6");
    CHECK_SQL(z.s, "SELECT count(*) FROM merge_sources", "2");
}

TEST(merge_skips_unfinished_and_records_sources) {
    make_inputs();
    t_pbuf a = t_pcopy("a.db"), b = t_pcopy("b.db"), out = t_pcopy("out.db");
    CHECK(
        t_sh("sqlite3 %s \"INSERT INTO sweep_task VALUES(1, 'lrsweep', 3, 8, 'train.lr=0.01', 42, "
             "'{\\\"train.lr\\\": 0.01, \\\"seed\\\": 42}')\"",
             b.s) == 0);
    char ins[2200];
    snprintf(ins, sizeof ins, "%s %s", a.s, b.s);
    CHECK(merge_cli(out.s, ins, NULL) == 0);
    CHECK_SQL(out.s, "SELECT count(*) FROM runs WHERE status != 'done' OR source_id IS NULL", "0");
    char q[2400], want[2400];
    snprintf(q, sizeof q,
             "SELECT path, experiment, task, n_tasks, setting, seed, params_json FROM "
             "merge_sources WHERE path = '%s'",
             b.s);
    snprintf(want, sizeof want,
             "%s|lrsweep|3|8|train.lr=0.01|42|{\"train.lr\": 0.01, \"seed\": 42}", b.s);
    CHECK_SQL(out.s, q, want);
    snprintf(q, sizeof q,
             "SELECT experiment IS NULL, seed IS NULL FROM merge_sources WHERE path = '%s'", a.s);
    CHECK_SQL(out.s, q, "1|1");
    /* one merge, one time; each run names its own file */
    CHECK_SQL(out.s, "SELECT count(DISTINCT merged_at), count(*) FROM merge_sources", "1|2");
    snprintf(q, sizeof q,
             "SELECT group_concat(kind, ',') FROM (SELECT r.kind FROM runs r JOIN "
             "merge_sources ms USING(source_id) WHERE ms.path = '%s' ORDER BY r.run_id)",
             b.s);
    CHECK_SQL(out.s, q, "circuits,ablate,attribute");
    /* the failed and the running run's rows are not there */
    CHECK_SQL(out.s, "SELECT count(*) FROM runs WHERE kind = 'scores'", "0");
}

/* A copy of a.db with fresh uids, changed by sql (run by the sqlite3 CLI). */
static const char *bad_copy(const char *name, const char *sql) {
    t_pbuf p = t_pcopy(name);
    CHECK(t_sh("cp %s %s && sqlite3 %s \"UPDATE runs SET uid = lower(hex(randomblob(16))); %s\"",
               t_path("a.db"), p.s, p.s, sql) == 0);
    return t_path(name);
}

TEST(merge_refusals_leave_out_unchanged) {
    make_inputs();
    t_pbuf a = t_pcopy("a.db"), out = t_pcopy("out.db"), err = t_pcopy("merge.err");
    CHECK(merge_cli(out.s, a.s, NULL) == 0);
    CHECK(!al_file_exists(t_path("out.db-wal"))); /* checkpointed at close */
    CHECK(!al_file_exists(t_path("out.db-shm")));
    CHECK_SQL(out.s, "PRAGMA journal_mode", "delete"); /* left for readers */
    char h0[65], h1[65], d0[65], d1[65];
    file_hash(out.s, h0);
    dump_hash(out.s, d0);
    struct {
        const char *name, *sql, *want;
    } cases[] = {
        {"missing-table.db", "DROP TABLE attribution_tokens",
         "table attribution_tokens is missing"},
        {"missing-col.db", "ALTER TABLE logit_lens DROP COLUMN accuracy",
         "table logit_lens has no column accuracy"},
        {"wrong-type.db",
         "ALTER TABLE logit_lens RENAME TO old; CREATE TABLE logit_lens(run_id INTEGER, model_id INTEGER, "
         "task TEXT, layer TEXT, loss REAL, accuracy REAL); DROP TABLE old",
         "column logit_lens.layer is declared 'TEXT', attnlab declares it INTEGER"},
        {"future.db", "PRAGMA user_version = 99", "made by a newer attnlab (schema version 99"},
        {"older.db", "PRAGMA user_version = 5", "made by an older attnlab (schema version 5"},
        {"no-uid.db", "UPDATE runs SET uid = NULL WHERE run_id = 2", "run 2 has no uid"},
        {"dangling.db", "UPDATE runs SET model_id = 77 WHERE run_id = 1",
         "refers to a models row the file lacks"},
        {"dangling-rows.db", "UPDATE ablations SET run_id = 99 WHERE ablation_id = 1",
         "a row of ablations"},
        {"bad-source.db", "UPDATE runs SET source_id = 5", "names a merge source the file lacks"},
        /* valid to the checks, refused by OUT mid-copy: rolled back */
        {"check.db",
         "ALTER TABLE patching RENAME TO old; CREATE TABLE patching(patch_id INTEGER PRIMARY KEY, "
         "run_id INTEGER NOT NULL REFERENCES runs(run_id), model_id INTEGER NOT NULL REFERENCES "
         "models(model_id), task TEXT NOT NULL, direction TEXT NOT NULL, component TEXT NOT NULL, "
         "layer INTEGER NOT NULL, head INTEGER, pos INTEGER, value REAL, metric REAL); INSERT INTO "
         "patching SELECT * FROM old; DROP TABLE old; UPDATE patching SET direction = 'sideways'",
         "write failed: CHECK constraint failed"},
    };
    char ins[2400];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *bad = bad_copy(cases[i].name, cases[i].sql);
        /* a good input first: it must not be merged either */
        t_pbuf good = t_pcopy("good.db");
        CHECK(t_sh("cp %s %s && sqlite3 %s \"UPDATE runs SET uid = lower(hex(randomblob(16)))\"",
                   a.s, good.s, good.s) == 0);
        snprintf(ins, sizeof ins, "%s %s", good.s, bad);
        CHECKF(merge_cli(out.s, ins, NULL) == 1, "%s", cases[i].name);
        CHECKF(t_one_line(err.s, cases[i].want), "%s", cases[i].name);
        /* refused by its checks: OUT never opened, byte for byte; refused
         * mid-copy: rolled back, the same content */
        int late = !strcmp(cases[i].name, "check.db");
        file_hash(out.s, h1);
        dump_hash(out.s, d1);
        CHECKF(late ? !strcmp(d0, d1) : !strcmp(h0, h1), "%s changed OUT", cases[i].name);
        if (late) file_hash(out.s, h0);
        CHECKF(!al_file_exists(t_path("out.db-wal")), "%s left a -wal", cases[i].name);
    }
    /* not an SQLite file, empty, missing, a directory, OUT itself (also by another name) */
    FILE *f = fopen(t_path("random.db"), "wb");
    for (int i = 0; f && i < 8192; i++) fputc((i * 2654435761u) >> 13 & 255, f);
    if (f) fclose(f);
    t_write("empty.db", "");
    CHECK(link(out.s, t_path("hardlink.db")) == 0);
    struct {
        const char *in, *want;
    } files[] = {
        {"random.db", "not an SQLite database"},
        {"empty.db", "not an attnlab database (no tables, schema version 0)"},
        {"nope.db", "No such file or directory"},
        {".", "not a regular file"},
        {"out.db", "is the output database"},
        {"hardlink.db", "is the output database"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        CHECKF(merge_cli(out.s, t_path(files[i].in), NULL) == 1, "%s", files[i].in);
        CHECKF(t_one_line(err.s, files[i].want), "%s", files[i].in);
        file_hash(out.s, h1);
        CHECKF(!strcmp(h0, h1), "%s changed OUT", files[i].in);
    }
    /* a refused input never creates OUT */
    CHECK(merge_cli(t_path("new.db"), t_path("random.db"), NULL) == 1);
    CHECK(!al_file_exists(t_path("new.db")));
    /* usage */
    CHECK(t_sh("%s db merge 2>/dev/null", t_bin()) == 2);
    CHECK(t_sh("%s db 2>/dev/null", t_bin()) == 2);
    CHECK(t_sh("%s db merge %s %s --bogus 2>/dev/null", t_bin(), out.s, a.s) == 2);
    CHECK(t_sh("%s help db merge >/dev/null", t_bin()) == 0);
}

TEST(merge_older_output_migrated_alone) {
    /* `db merge FILE` with no input makes or migrates FILE, which is what
     * the refusal of an older input tells the user to do */
    t_pbuf db = t_pcopy("fresh.db");
    CHECK(t_sh("%s db merge %s >/dev/null", t_bin(), db.s) == 0);
    char v[16];
    snprintf(v, sizeof v, "%d", AL_STORE_SCHEMA_VERSION);
    CHECK_SQL(db.s, "PRAGMA user_version", v);
    CHECK_SQL(db.s, "SELECT count(*) FROM runs", "0");
}

TEST(merge_library_stop_and_counts) {
    make_inputs();
    const char *in[] = {t_path("a.db"), t_path("b.db")};
    t_pbuf a = t_pcopy("a.db"), b = t_pcopy("b.db"), out = t_pcopy("lib.db");
    in[0] = a.s, in[1] = b.s;
    al_merge_stats st, each[2];
    al_merge_opts o = AL_MERGE_OPTS_INIT;
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    o.each = each;
    al_err e = {{0}};
    CHECK(al_store_merge(out.s, in, 2, &o, &st, &e) == -1);
    CHECK(strcmp(e.msg, "interrupted") == 0);
    CHECK(t_all_zero(&st, sizeof st) && t_all_zero(each, sizeof each));
    CHECK(!al_file_exists(out.s));
    stop = 0;
    CHECK_OK(al_store_merge(out.s, in, 2, &o, &st, &e), &e);
    CHECK(st.inputs == 2 && st.runs_added == 6 && st.runs_not_done == 2 && st.runs_present == 0);
    CHECK(st.models_added == 2 && st.sources_added == 2);
    CHECK(each[0].runs_added == 3 && each[1].runs_added == 3 && each[1].models_added == 1);
    CHECK(st.rows_added == each[0].rows_added + each[1].rows_added);
    CHECK(st.rows_added ==
          t_sql_long(out.s, "SELECT (SELECT count(*) FROM head_scores) + "
                            "(SELECT count(*) FROM ablations) + (SELECT count(*) FROM "
                            "patching) + (SELECT count(*) FROM logit_attribution) + "
                            "(SELECT count(*) FROM singular_values) + (SELECT count(*) FROM "
                            "eigenvalues) + (SELECT count(*) FROM skip_trigrams) + (SELECT "
                            "count(*) FROM composition) + (SELECT count(*) FROM head_overlap) "
                            "+ (SELECT count(*) FROM layer_scores) + (SELECT count(*) FROM "
                            "patching_runs) + (SELECT count(*) FROM attribution_runs) + "
                            "(SELECT count(*) FROM path_terms) + (SELECT count(*) FROM "
                            "logit_lens) + (SELECT count(*) FROM attribution_patching) + "
                            "(SELECT count(*) FROM attribution_agreement) + (SELECT count(*) "
                            "FROM attribution_tokens) + (SELECT count(*) FROM model_scores) + "
                            "(SELECT count(*) FROM run_warnings) + (SELECT count(*) FROM views) + "
                            "(SELECT count(*) FROM path_patching) + (SELECT count(*) FROM "
                            "score_intervals)"));
    CHECK(al_store_merge(out.s, in, 2, NULL, NULL, &e) == 0); /* NULL opts and stats are fine */
}

/* ------------------------------------------------------------ kills */

#define BIG_ROWS 300000

/* Per-table row counts and a sum over the big table: OUT's state. */
static char *fingerprint(const char *db) {
    return t_sql(
        db, "SELECT (SELECT count(*) FROM runs) || ',' || (SELECT count(*) FROM models) || ',' || "
            "(SELECT count(*) FROM merge_sources) || ',' || (SELECT count(*) FROM head_scores) || "
            "',' || (SELECT count(*) FROM ablations) || ',' || (SELECT count(*) FROM train_log) || "
            "',' || (SELECT total(train_loss) FROM train_log) || ',' || "
            "(SELECT group_concat(uid) FROM (SELECT uid FROM runs ORDER BY uid))");
}

/* big.db: a.db with fresh uids and BIG_ROWS train_log rows on run 1;
 * base.db: OUT before (a.db merged); each kill starts from a copy. */
static void make_big(void) {
    make_a();
    CHECK(
        t_sh("cp %s %s && sqlite3 %s \"UPDATE runs SET uid = lower(hex(randomblob(16))); WITH "
             "RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d) INSERT INTO "
             "train_log SELECT 1, x, x * 1.0, 1.0 / x, 2.0, 0.1, 0.001, x * 0.01, 0.01, 0.02 "
             "FROM c\"",
             t_path("a.db"), t_path("big.db"), t_path("big.db"), BIG_ROWS) == 0);
    CHECK(merge_cli(t_path("base.db"), t_path("a.db"), NULL) == 0);
}

static void reset_out(void) {
    CHECK(t_sh("rm -f %s-wal %s-shm && cp %s %s", t_path("out.db"), t_path("out.db"),
               t_path("base.db"), t_path("out.db")) == 0);
}

TEST(merge_sigkill_leaves_before_or_after) {
    make_big();
    t_pbuf out = t_pcopy("out.db"), big = t_pcopy("big.db");
    char *before = fingerprint(t_path("base.db"));
    /* the whole merge once: its result and how long it takes here */
    reset_out();
    double t0 = al_now();
    CHECK(merge_cli(out.s, big.s, NULL) == 0);
    double T = al_now() - t0;
    char *after = fingerprint(out.s);
    CHECK(before && after && strcmp(before, after) != 0);
    CHECK(t_sql_long(out.s, "SELECT count(*) FROM train_log") >= BIG_ROWS);
    /* a third as many under the sanitizers: a killed process leaks nothing */
    int n_before = 0, n_after = 0, kills = T_SAN ? 4 : 12;
    srand(20261201);
    for (int k = 0; k < kills; k++) {
        reset_out();
        /* spread over the merge, jittered: validation, copy, commit */
        double d = T * (0.03 + 0.95 * k / (kills - 1)) * (0.9 + 0.2 * rand() / (double)RAND_MAX);
        pid_t p = t_spawn(NULL, NULL, "db merge %s %s", out.s, big.s);
        t_sleep(d);
        kill(p, SIGKILL);
        int rc = t_wait(p, NULL);
        CHECKF(rc == 128 + SIGKILL || rc == 0, "kill %d: exit %d", k, rc);
        CHECK_SQL(out.s, "PRAGMA integrity_check", "ok");
        char *now = fingerprint(out.s);
        int is_before = now && !strcmp(now, before), is_after = now && !strcmp(now, after);
        CHECKF(is_before || is_after,
               "kill %d after %.2f s: OUT is neither as before nor merged: %.120s", k, d,
               now ? now : "(error)");
        n_before += is_before;
        n_after += is_after;
        free(now);
    }
    printf("merge of %d rows: %.2f s; %d kills: %d left OUT as before, %d after the whole merge\n",
           BIG_ROWS, T, kills, n_before, n_after);
    CHECK(n_before >= 1); /* some kills really landed mid-merge */
    free(before);
    free(after);
}

TEST(merge_sigint_rolls_back) {
    make_big();
    t_pbuf out = t_pcopy("out.db"), big = t_pcopy("big.db"), err = t_pcopy("int.err");
    char *before = fingerprint(t_path("base.db"));
    reset_out();
    double t0 = al_now();
    CHECK(merge_cli(out.s, big.s, NULL) == 0);
    double T = al_now() - t0;
    reset_out();
    pid_t p = t_spawn(NULL, err.s, "db merge %s %s", out.s, big.s);
    t_sleep(T * 0.4);
    kill(p, SIGINT);
    CHECK(t_wait(p, NULL) == 130);
    CHECK(t_one_line(err.s, "interrupted"));
    char *now = fingerprint(out.s);
    CHECK(before && now && !strcmp(before, now));
    CHECK_SQL(out.s, "PRAGMA integrity_check", "ok");
    free(before);
    free(now);
}

TEST(merge_sigint_while_waiting_for_lock) {
    /* another writer holds OUT: the merge waits (as long as 60 s), and
     * Ctrl-C ends the wait at once, with nothing written */
    make_a();
    t_pbuf a = t_pcopy("a.db"), out = t_pcopy("out.db"), err = t_pcopy("int.err");
    CHECK(t_sh("%s db merge %s >/dev/null", t_bin(), out.s) == 0);
    sqlite3 *db;
    CHECK(sqlite3_open(out.s, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
    pid_t p = t_spawn(NULL, err.s, "db merge %s %s", out.s, a.s);
    t_sleep(1.0);
    double t0 = al_now();
    kill(p, SIGINT);
    CHECK(t_wait(p, NULL) == 130);
    CHECK(al_now() - t0 < 2.0);
    CHECK(t_one_line(err.s, "interrupted"));
    CHECK(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK_SQL(out.s, "SELECT count(*) FROM runs", "0");
    /* with the lock gone, the same merge goes through */
    CHECK(t_sh("%s db merge %s %s >/dev/null", t_bin(), out.s, a.s) == 0);
    CHECK_SQL(out.s, "SELECT count(*) FROM runs", "3");
}
