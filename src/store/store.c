/* store.c -- the SQLite results database: opening (and migrating) a
 * file, closing it, read-only queries; with merge.c and store_views.c
 * (which reach the connection through store_internal.h) the only user of
 * sqlite3.h. See include/attnlab/store.h for the life of a run. Every
 * value goes through a bound parameter (token strings contain quotes and
 * arbitrary bytes), and every statement is prepared once per connection.
 *
 * The store's other files: store_schema.c (the migrations),
 * store_runs.c (models and runs), store_rows.c (the result rows); they
 * share the connection through store_conn.h. */
#define _XOPEN_SOURCE 700 /* kill, gethostname, nanosleep */
#include "attnlab/store.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "store_conn.h"
#include "store_internal.h"

/* -------------------------------------------------------- connection */

const char *al_store_path(const al_store *s) { return s->path; }

sqlite3 *al_store_sqlite(al_store *s) { return s->db; }

/* How long a writer waits for another process's transaction. */
#define AL_STORE_BUSY_MS 60000

int store_db_err(al_store *s, al_err *e, const char *what) {
    return al_errf(e, "database %s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

/* Switching a new file to WAL needs a moment's exclusive lock, and SQLite
 * answers SQLITE_BUSY at once there instead of calling the busy handler,
 * so processes that open one new database together would fail. Retry for
 * as long as the busy timeout would have waited. */
static int set_wal(al_store *s, al_err *e) {
    for (long waited_ms = 0;;) {
        int rc = sqlite3_exec(s->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return 0;
        if (s->stop && *s->stop) return al_errf(e, "interrupted");
        if ((rc & 0xff) != SQLITE_BUSY || waited_ms >= AL_STORE_BUSY_MS)
            return store_db_err(s, e, "cannot switch to WAL journal");
        long ms = 1 + waited_ms / 8; /* back off: 1 ms at first, then longer */
        if (ms > 100) ms = 100;
        struct timespec ts = {0, ms * 1000000L};
        nanosleep(&ts, NULL);
        waited_ms += ms;
    }
}

void store_set_stop(al_store *s, volatile sig_atomic_t *stop) { s->stop = stop; }

/* The journal mode follows the writes. A file at rest is in rollback-
 * journal mode (al_store_close), so a reader needs no -shm beside it; a
 * connection switches it to WAL (readers never block a writer) just
 * before its first write, so a command that opens the file and refuses
 * before writing leaves it byte for byte as it was. A write is any
 * statement SQLite does not call read-only (BEGIN IMMEDIATE included);
 * the switch needs no transaction open, and the store's writes start in
 * autocommit (a BEGIN IMMEDIATE, a run row, a model row). */
int store_before_write(al_store *s, const char *sql, al_err *e) {
    if (s->wal || s->readonly || !sqlite3_get_autocommit(s->db)) return 0;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK)
        return 0; /* the caller's own prepare reports it */
    int ro = !q || sqlite3_stmt_readonly(q);
    sqlite3_finalize(q);
    if (ro) return 0;
    if (set_wal(s, e)) return -1;
    s->wal = 1;
    return 0;
}

/* The store's statements are fault points (util.h): failed as SQLite
 * fails them when it runs out of memory, so that every caller's way out
 * is tried. */
static int nomem(al_store *s, const char *what, al_err *e) {
    return al_errf(e, "database %s: %s: %s", s->path, what, sqlite3_errstr(SQLITE_NOMEM));
}

int store_exec(al_store *s, const char *sql, al_err *e) {
    char *msg = NULL;
    if (al_fault_at(__builtin_return_address(0))) return nomem(s, "cannot run statement", e);
    if (!s->wal && store_before_write(s, sql, e)) return -1;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        al_errf(e, "database %s: %s", s->path, msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int store_prepare(al_store *s, const char *sql, sqlite3_stmt **st, al_err *e) {
    *st = NULL;
    if (al_fault_at(__builtin_return_address(0))) return nomem(s, "cannot prepare statement", e);
    if (!s->wal && store_before_write(s, sql, e)) return -1;
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return store_db_err(s, e, "cannot prepare statement");
    return 0;
}

/* Step a statement to completion (no rows expected). */
int store_step_done(al_store *s, sqlite3_stmt *st, al_err *e) {
    if (al_fault_at(__builtin_return_address(0))) {
        sqlite3_reset(st);
        return nomem(s, "write failed", e);
    }
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) store_db_err(s, e, "write failed");
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Non-finite numbers become NULL: SQLite has no NaN. */
void store_bind_real(sqlite3_stmt *st, int i, double v) {
    if (isfinite(v))
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

void store_bind_text(sqlite3_stmt *st, int i, const char *t, size_t n) {
    if (!t || n > INT_MAX)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_text(st, i, t, (int)n, SQLITE_TRANSIENT);
}

void store_bind_str(sqlite3_stmt *st, int i, const char *t) {
    store_bind_text(st, i, t, t ? strlen(t) : 0);
}

/* -------------------------------------------------------- dead runs */

/* Start time of process pid (field 22 of /proc/pid/stat) as text, so a
 * recycled pid is not mistaken for the run's process. "" if unknown. */
void store_proc_start(long pid, char *buf, size_t cap) {
    char path[64], line[1024];
    buf[0] = 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    char *p = strrchr(line, ')');
    if (!p) return;
    /* after ") " come fields 3.. ; starttime is field 22 */
    int field = 2;
    for (char *t = p + 1; *t; t++) {
        if (*t == ' ') {
            field++;
            if (field == 22) {
                size_t k = strcspn(t + 1, " ");
                if (k >= cap) k = cap - 1;
                memcpy(buf, t + 1, k);
                buf[k] = 0;
                return;
            }
        }
    }
}

static int pid_alive(long pid, const char *start) {
    if (pid <= 0) return 0;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
    char now[64];
    store_proc_start(pid, now, sizeof now);
    /* Unknown start times (no /proc): trust kill(). */
    if (!start || !start[0] || !now[0]) return 1;
    return strcmp(now, start) == 0;
}

void store_host_name(char *buf, size_t cap) {
    if (gethostname(buf, cap) != 0) snprintf(buf, cap, "unknown");
    buf[cap - 1] = 0;
}

/* Runs left 'running' by a process of this host that no longer exists
 * are marked failed; their uncommitted rows are already gone. */
static int recover_dead_runs(al_store *s, al_err *e) {
    char host[256];
    store_host_name(host, sizeof host);
    sqlite3_stmt *q, *u;
    if (store_prepare(s,
                      "SELECT run_id, pid, pid_start FROM runs "
                      "WHERE status = 'running' AND host = ?",
                      &q, e))
        return -1;
    store_bind_str(q, 1, host);
    /* Collect first: updating rows under an open cursor is undefined. */
    int64_t *dead = NULL;
    int n = 0, cap = 0;
    int r, rc = 0;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        long pid = (long)sqlite3_column_int64(q, 1);
        if (pid_alive(pid, (const char *)sqlite3_column_text(q, 2))) continue;
        int64_t *nd = al_grow(dead, &cap, n, sizeof *nd, 16, e);
        if (!nd) {
            rc = -1;
            break;
        }
        dead = nd;
        dead[n++] = sqlite3_column_int64(q, 0);
    }
    if (rc == 0 && r != SQLITE_DONE) rc = store_db_err(s, e, "cannot list running runs");
    sqlite3_finalize(q);
    if (rc == 0 && n > 0 &&
        store_prepare(s,
                      "UPDATE runs SET status = 'failed', "
                      "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
                      "error = 'process ' || pid || ' ended without finishing' "
                      "WHERE run_id = ? AND status = 'running'",
                      &u, e) == 0) {
        for (int i = 0; i < n && rc == 0; i++) {
            sqlite3_bind_int64(u, 1, dead[i]);
            rc = store_step_done(s, u, e);
        }
        sqlite3_finalize(u);
    } else if (rc == 0 && n > 0) {
        rc = -1;
    }
    free(dead);
    return rc;
}

/* ------------------------------------------------------ open, migrate */

static int user_version(al_store *s, int *v, al_err *e) {
    sqlite3_stmt *q;
    if (store_prepare(s, "PRAGMA user_version", &q, e)) return -1;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    if (rc != SQLITE_ROW) return store_db_err(s, e, "cannot read schema version");
    return 0;
}

static int migrate(al_store *s, al_err *e) {
    int v;
    if (user_version(s, &v, e)) return -1;
    if (v == AL_STORE_SCHEMA_VERSION) return 0;
    if (store_exec(s, "BEGIN IMMEDIATE", e)) return -1;
    /* Read again under the write lock: another process may have won. */
    if (user_version(s, &v, e)) goto fail;
    if (v > AL_STORE_SCHEMA_VERSION) {
        al_errf(e, "database %s: schema version %d is newer than this attnlab's %d", s->path, v,
                AL_STORE_SCHEMA_VERSION);
        goto fail;
    }
    for (; v < AL_STORE_SCHEMA_VERSION; v++) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
        if (store_exec(s, al_store_migrations[v], e) || store_exec(s, pragma, e)) goto fail;
    }
    return store_exec(s, "COMMIT", e);
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

int al_store_open(const char *path, al_store **out, al_err *e) {
    *out = NULL;
    /* SQLite opens "" as a private temporary database: it would take a
     * run's rows and drop them at close, so a command would report
     * success and store nothing. (":memory:" is the same, but db merge
     * uses one for the schema; the commands refuse it as --db.) */
    if (!path || !*path)
        return al_errf(e, "no database file given (--db ''): name a file, e.g. --db results.db");
    al_store *s = al_calloc(1, sizeof *s, e);
    if (!s) return -1;
    snprintf(s->path, sizeof s->path, "%s", path);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        al_errf(e, "cannot open database %s: %s", path,
                s->db ? sqlite3_errmsg(s->db) : "out of memory");
        al_store_close(s);
        return -1;
    }
    sqlite3_busy_timeout(s->db, AL_STORE_BUSY_MS);
    /* connection settings, not writes: run past store_exec, which would
     * take these PRAGMAs for writes and switch the file to WAL */
    int set = sqlite3_exec(s->db, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON", NULL,
                           NULL, NULL) != SQLITE_OK;
    if (set) store_db_err(s, e, "cannot set the connection's pragmas");
    if (set || migrate(s, e) || recover_dead_runs(s, e)) {
        if (e) { /* "database P: why" -> "cannot open database P: why" */
            char why[sizeof e->msg], pfx[AL_PATH_MAX + 64];
            snprintf(pfx, sizeof pfx, "database %s: ", path);
            size_t n = strlen(pfx);
            snprintf(why, sizeof why, "%s", strncmp(e->msg, pfx, n) ? e->msg : e->msg + n);
            al_errf(e, "cannot open database %s: %s", path, why);
        }
        al_store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

/* A database opened to read is opened so that reading writes nothing:
 * no journal switch, no -wal or -shm beside it, and it works on a file
 * and folder the user cannot write.
 *
 * Writers leave the file in rollback-journal mode when they close (see
 * al_store_close), and a rollback-mode file opened with mode=ro needs
 * no other file. A file still in WAL mode is one a writer has open now,
 * one whose writer died, or one an older attnlab wrote. If its -wal
 * exists, a writer may be mid-transaction, so SQLite's own WAL reader
 * is the only safe one (it makes a -shm when it may, and fails in a
 * folder it cannot write, saying so). If there is no -wal, no
 * connection has it open (WAL connections keep one while open) and the
 * main file holds every committed page: it is opened immutable, which
 * takes no lock and makes no file. That open would be unsafe if a
 * writer started during the read and checkpointed into the main file;
 * a checkpoint needs 1000 pages or the writer's close, longer than the
 * reads here, and writers of this attnlab leave no WAL-mode file
 * behind them. */
int store_sqlite_open_ro(const char *path, sqlite3 **db, al_err *e) {
    *db = NULL;
    char uri[3 * AL_PATH_MAX + 64], wal[AL_PATH_MAX + 8];
    if (strlen(path) >= AL_PATH_MAX) return al_errf(e, "database path too long: %s", path);
    unsigned char hdr[20] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return al_errf(e, "cannot open database %s: %s", path, strerror(errno));
    size_t got = fread(hdr, 1, sizeof hdr, f);
    fclose(f);
    snprintf(wal, sizeof wal, "%s-wal", path);
    /* bytes 18 and 19: file format versions, 2 in WAL mode */
    int immutable = got == sizeof hdr && hdr[18] == 2 && hdr[19] == 2 && !al_file_exists(wal);
    /* a URI, so that mode=ro and immutable go with the name: percent-
     * encode what a URI path may not hold */
    size_t n = (size_t)snprintf(uri, sizeof uri, "file:%s", path[0] == '/' ? "//" : "");
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if (isalnum(*c) || strchr("/._-~", *c))
            uri[n++] = (char)*c;
        else
            n += (size_t)snprintf(uri + n, sizeof uri - n, "%%%02X", *c);
    }
    snprintf(uri + n, sizeof uri - n, "?mode=ro%s", immutable ? "&immutable=1" : "");
    if (sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK) {
        al_errf(e, "cannot open database %s: %s", path,
                *db ? sqlite3_errmsg(*db) : "out of memory");
        sqlite3_close(*db);
        *db = NULL;
        return -1;
    }
    sqlite3_busy_timeout(*db, AL_STORE_BUSY_MS);
    return 0;
}

/* An older schema read as today's: the file copied into an in-memory
 * database and migrated there, so the readers' queries meet the columns
 * they name and the file is not written. */
static int migrate_in_memory(al_store *s, al_err *e) {
    sqlite3 *mem = NULL;
    if (sqlite3_open_v2(":memory:", &mem, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close(mem);
        return al_errf(e, "database %s: out of memory", s->path);
    }
    sqlite3_backup *b = sqlite3_backup_init(mem, "main", s->db, "main");
    int rc = b ? sqlite3_backup_step(b, -1) : sqlite3_errcode(mem);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
        al_errf(e, "database %s: cannot read it to migrate its schema: %s", s->path,
                sqlite3_errstr(rc));
        sqlite3_close(mem);
        return -1;
    }
    sqlite3_close(s->db);
    s->db = mem;
    return store_exec(s, "PRAGMA foreign_keys = ON", e) || migrate(s, e) ? -1 : 0;
}

static int open_ro(const char *path, int current, al_store **out, al_err *e) {
    *out = NULL;
    if (!al_file_exists(path)) return al_errf(e, "no database %s", path);
    al_store *s = al_calloc(1, sizeof *s, e);
    if (!s) return -1;
    snprintf(s->path, sizeof s->path, "%s", path);
    s->readonly = 1;
    int v = 0, n = 0;
    sqlite3_stmt *q = NULL;
    if (store_sqlite_open_ro(path, &s->db, e)) goto fail;
    if (user_version(s, &v, e)) goto fail;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                           "name IN ('runs', 'models')",
                           -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW) {
        store_db_err(s, e, "not an SQLite database attnlab can read");
        goto fail;
    }
    n = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    q = NULL;
    if (n != 2 || v < 1) {
        al_errf(e, "%s is not an attnlab results database (no runs and models tables)", path);
        goto fail;
    }
    if (v > AL_STORE_SCHEMA_VERSION) {
        al_errf(e, "database %s: schema version %d is newer than this attnlab's %d", path, v,
                AL_STORE_SCHEMA_VERSION);
        goto fail;
    }
    if (current && v < AL_STORE_SCHEMA_VERSION && migrate_in_memory(s, e)) goto fail;
    *out = s;
    return 0;
fail:
    sqlite3_finalize(q);
    al_store_close(s);
    return -1;
}

int al_store_open_readonly(const char *path, al_store **out, al_err *e) {
    return open_ro(path, 0, out, e);
}

int al_store_open_read(const char *path, al_store **out, al_err *e) {
    return open_ro(path, 1, out, e);
}

void al_store_close(al_store *s) {
    if (!s) return;
    if (s->in_tx) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    for (int i = 0; i < S_N; i++) sqlite3_finalize(s->st[i]);
    /* A connection that wrote leaves the file in rollback-journal mode,
     * so that a reader needs no -shm (store_sqlite_open_ro). Leaving WAL
     * needs the file to itself: while another connection has it open
     * this fails at once (no busy wait), and the last writer to close
     * switches it. */
    if (s->wal > 0 && strcmp(s->path, ":memory:")) {
        sqlite3_busy_timeout(s->db, 0);
        sqlite3_exec(s->db, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL);
    }
    sqlite3_close(s->db);
    free(s);
}

/* ----------------------------------------------------------- queries */

/* Generic read-only query for pictures and reports: parameters bound as
 * text (column affinity converts them), each row handed to fn as text and
 * as numbers. */
int al_store_query(al_store *s, const char *sql, const char *const *params, int n_params,
                   al_store_row_fn fn, void *ctx, al_err *e) {
    sqlite3_stmt *q;
    if (store_prepare(s, sql, &q, e)) return -1;
    if (!sqlite3_stmt_readonly(q)) {
        sqlite3_finalize(q);
        return al_errf(e, "database %s: query is not read-only", s->path);
    }
    int np = sqlite3_bind_parameter_count(q); /* extra params are ignored */
    for (int i = 0; i < n_params && i < np; i++) store_bind_str(q, i + 1, params[i]);
    int nc = sqlite3_column_count(q), rc, frc = 0;
    if (nc > AL_STORE_MAX_COLS) {
        sqlite3_finalize(q);
        return al_errf(e, "database %s: query has more than %d columns", s->path,
                       AL_STORE_MAX_COLS);
    }
    const char *text[AL_STORE_MAX_COLS];
    double num[AL_STORE_MAX_COLS];
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        for (int i = 0; i < nc; i++) {
            int null = sqlite3_column_type(q, i) == SQLITE_NULL;
            num[i] = null ? NAN : sqlite3_column_double(q, i);
            text[i] = null ? NULL : (const char *)sqlite3_column_text(q, i);
        }
        if ((frc = fn(ctx, nc, text, num, e)) != 0) break;
    }
    sqlite3_finalize(q);
    if (frc) return -1;
    if (rc != SQLITE_DONE) return store_db_err(s, e, "query failed");
    return 0;
}
