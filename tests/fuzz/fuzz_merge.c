/* fuzz_merge.c -- `attnlab db merge` inputs (src/store/merge.c): the
 * bytes are an input database file, merged into a small valid OUT (runs
 * 1 and 2, ablations 1 and 2, one model: ids the seeds collide with).
 *
 * Properties: a refusal is one line, leaves OUT byte-identical and the
 * counts zeroed; an accepted input merged again adds nothing (the uids
 * are there) and leaves OUT passing integrity_check. Bounded: a timer
 * of 3 s of CPU time (SIGVTALRM: libFuzzer's -timeout has SIGALRM) sets
 * the merge's stop flag (it then returns "interrupted", OUT unchanged),
 * and SQLite's heap is capped. OUT is restored from its
 * bytes after every merge that changed it. Seeds: tests/fuzz/merge/,
 * made by tests/fuzz/make_merge_seeds.py. */
#include "fuzz.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "attnlab/merge.h"

static char out_path[600];
static unsigned char *pristine;
static size_t pristine_n;
static volatile sig_atomic_t fz_stop;

static void on_alarm(int sig) {
    (void)sig;
    fz_stop = 1;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    FZ_ASSERT(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    FZ_ASSERT(b && fread(b, 1, (size_t)sz, f) == (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void side_files_gone(const char *db) {
    char p[700];
    snprintf(p, sizeof p, "%s-wal", db);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db);
    unlink(p);
}

static void out_cleanup(void) {
    side_files_gone(out_path);
    unlink(out_path);
}

static void restore_out(void) {
    side_files_gone(out_path);
    FILE *f = fopen(out_path, "wb");
    FZ_ASSERT(f && fwrite(pristine, 1, pristine_n, f) == pristine_n);
    fclose(f);
}

static int out_is_pristine(void) {
    size_t n;
    unsigned char *b = slurp(out_path, &n);
    int same = n == pristine_n && memcmp(b, pristine, n) == 0;
    free(b);
    return same;
}

/* OUT: the current schema (made by the merge with no input), two runs
 * and two ablations of one model. */
static void make_out(void) {
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(out_path, sizeof out_path, "%s/attnlab-fuzz-merge-out-%ld.db", dir, (long)getpid());
    out_cleanup();
    atexit(out_cleanup);
    al_err e;
    FZ_ASSERT(al_store_merge(out_path, NULL, 0, NULL, NULL, &e) == 0);
    sqlite3 *db;
    FZ_ASSERT(sqlite3_open(out_path, &db) == SQLITE_OK);
    FZ_ASSERT(sqlite3_exec(
                  db,
                  "INSERT INTO models(model_id, sha256, path, added_at) VALUES(1, '"
                  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', '/m', 't');"
                  "INSERT INTO runs(run_id, kind, model_id, started_at, status, attnlab_version,"
                  " uid) VALUES(1, 'ablate', 1, 't', 'done', 'x', "
                  "'0123456789abcdef0123456789abcdef'), (2, 'ablate', 1, 't', 'done', 'x', "
                  "'00000000000000000000000000000002');"
                  "INSERT INTO ablations(ablation_id, run_id, model_id, method, kind, heads,"
                  " n_heads, loss) VALUES(1, 1, 1, 'zero', 'single', '0.1', 1, 3.5),"
                  " (2, 2, 1, 'zero', 'single', '0.2', 1, 3.25);",
                  NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    side_files_gone(out_path);
    pristine = slurp(out_path, &pristine_n);
}

static int run_merge(const char *in, al_merge_stats *st, al_err *e) {
    struct itimerval t = {{0, 0}, {3, 0}}, off = {{0, 0}, {0, 0}};
    al_merge_opts o = AL_MERGE_OPTS_INIT;
    fz_stop = 0;
    o.stop = &fz_stop;
    setitimer(ITIMER_VIRTUAL, &t, NULL);
    int rc = al_store_merge(out_path, &in, 1, &o, st, e);
    setitimer(ITIMER_VIRTUAL, &off, NULL);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (!pristine) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGVTALRM, &sa, NULL);
        sqlite3_hard_heap_limit64(256 << 20);
        make_out();
    }
    const char *in = fz_file("merge-in", d, n);
    side_files_gone(in); /* a read-only open leaves them; never a stale one */
    al_merge_stats st;
    al_err e;
    if (run_merge(in, &st, &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(st.inputs == 0 && st.runs_added == 0 && st.rows_added == 0);
        FZ_ASSERT(out_is_pristine());
        side_files_gone(in);
        return 0;
    }
    FZ_ASSERT(st.inputs == 1);
    /* again: every run it added is there now */
    al_merge_stats again;
    if (run_merge(in, &again, &e) == 0) {
        FZ_ASSERT(again.runs_added == 0 && again.rows_added == 0 && again.models_added == 0);
        FZ_ASSERT(again.runs_present == st.runs_added + st.runs_present);
    } else {
        fz_check_msg(&e); /* only the timer may stop it */
        FZ_ASSERT(strcmp(e.msg, "interrupted") == 0);
    }
    sqlite3 *db;
    FZ_ASSERT(sqlite3_open_v2(out_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *q;
    FZ_ASSERT(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK);
    FZ_ASSERT(sqlite3_step(q) == SQLITE_ROW);
    FZ_ASSERT(strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    if (st.runs_added || st.sources_added || !out_is_pristine()) restore_out();
    side_files_gone(in);
    return 0;
}
