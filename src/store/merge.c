/* merge.c -- al_store_merge (merge.h): finished runs of other results
 * databases copied into one, under new ids.
 *
 * Two phases. First every input is opened read-only (its own
 * connection: ATTACH is refused inside a transaction and is capped at 10
 * files, a sweep has more) and validated against the schema this
 * attnlab writes, taken from a fresh in-memory store, so a bad input is
 * refused before OUT is even opened. Then OUT is opened (created or
 * migrated by al_store_open) and checked the same way, and one BEGIN
 * IMMEDIATE ... COMMIT copies every input: nothing is visible until the
 * commit, and a kill before it leaves only an uncommitted WAL tail that
 * SQLite discards.
 *
 * Which tables to copy comes from the schema, never from a list here:
 * every table with a run_id column, its run_id and model_id rewritten to
 * OUT's ids and an INTEGER PRIMARY KEY other than run_id (ablation_id,
 * patch_id, ...) left out for OUT to assign. Values are copied as
 * sqlite3_values, so types and bytes (token strings with NULs) survive. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/merge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "attnlab/store.h"
#include "store_internal.h"

/* ------------------------------------------------------------ schema */

typedef struct mcol {
    char *name, *type;
} mcol;

typedef struct mtab {
    char *name;
    mcol *col;
    int n_col;
    int run_col, model_col; /* index of run_id / model_id, or -1 */
    int auto_col; /* the INTEGER PRIMARY KEY (the rowid), or -1 */
} mtab;

typedef struct mschema {
    mtab *tab;
    int n_tab;
} mschema;

static void schema_free(mschema *s) {
    for (int t = 0; t < s->n_tab; t++) {
        for (int c = 0; c < s->tab[t].n_col; c++) {
            free(s->tab[t].col[c].name);
            free(s->tab[t].col[c].type);
        }
        free(s->tab[t].col);
        free(s->tab[t].name);
    }
    free(s->tab);
    memset(s, 0, sizeof *s);
}

static char *dup_text(const unsigned char *t, al_err *e) {
    const char *s = t ? (const char *)t : "";
    char *d = malloc(strlen(s) + 1);
    if (!d)
        al_errf(e, "out of memory");
    else
        strcpy(d, s);
    return d;
}

static int sq_err(sqlite3 *db, al_err *e, const char *what, const char *doing) {
    return al_errf(e, "%s: %s: %s", what, doing, sqlite3_errmsg(db));
}

static int prep(sqlite3 *db, const char *what, const char *sql, sqlite3_stmt **q, al_err *e) {
    *q = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, q, NULL) != SQLITE_OK)
        return sq_err(db, e, what, "cannot read the schema");
    return 0;
}

/* Every table (not sqlite_*) with its columns, declared types and the
 * column an INTEGER PRIMARY KEY makes the rowid. */
static int schema_load(sqlite3 *db, const char *what, mschema *s, al_err *e) {
    sqlite3_stmt *qt = NULL, *qc = NULL;
    int rc = -1, r;
    memset(s, 0, sizeof *s);
    if (prep(db, what,
             "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' "
             "ESCAPE '!' ORDER BY name",
             &qt, e) ||
        prep(db, what, "SELECT name, type, pk FROM pragma_table_info(?1) ORDER BY cid", &qc, e))
        goto out;
    int cap = 0;
    while ((r = sqlite3_step(qt)) == SQLITE_ROW) {
        mtab *nt = al_grow(s->tab, &cap, s->n_tab, sizeof *nt, 32, e);
        if (!nt) goto out;
        s->tab = nt;
        mtab *t = &s->tab[s->n_tab++];
        memset(t, 0, sizeof *t);
        t->run_col = t->model_col = t->auto_col = -1;
        if (!(t->name = dup_text(sqlite3_column_text(qt, 0), e))) goto out;
        sqlite3_reset(qc);
        sqlite3_bind_text(qc, 1, t->name, -1, SQLITE_STATIC);
        int ccap = 0, n_pk = 0, pk_col = -1;
        while ((r = sqlite3_step(qc)) == SQLITE_ROW) {
            mcol *nc = al_grow(t->col, &ccap, t->n_col, sizeof *nc, 16, e);
            if (!nc) goto out;
            t->col = nc;
            mcol *c = &t->col[t->n_col];
            c->type = NULL;
            if (!(c->name = dup_text(sqlite3_column_text(qc, 0), e))) goto out;
            t->n_col++;
            if (!(c->type = dup_text(sqlite3_column_text(qc, 1), e))) goto out;
            if (sqlite3_column_int(qc, 2) > 0) n_pk++, pk_col = t->n_col - 1;
            if (!strcmp(c->name, "run_id")) t->run_col = t->n_col - 1;
            if (!strcmp(c->name, "model_id")) t->model_col = t->n_col - 1;
        }
        if (r != SQLITE_DONE) {
            sq_err(db, e, what, "cannot read the schema");
            goto out;
        }
        /* a one-column INTEGER PRIMARY KEY is the rowid */
        if (n_pk == 1 && !strcasecmp(t->col[pk_col].type, "INTEGER")) t->auto_col = pk_col;
    }
    if (r != SQLITE_DONE) {
        sq_err(db, e, what, "cannot read the schema");
        goto out;
    }
    rc = 0;
out:
    sqlite3_finalize(qt);
    sqlite3_finalize(qc);
    if (rc) schema_free(s);
    return rc;
}

static const mtab *find_tab(const mschema *s, const char *name) {
    for (int t = 0; t < s->n_tab; t++)
        if (!strcmp(s->tab[t].name, name)) return &s->tab[t];
    return NULL;
}

static int find_col(const mtab *t, const char *name) {
    for (int c = 0; c < t->n_col; c++)
        if (!strcmp(t->col[c].name, name)) return c;
    return -1;
}

/* got must have every table and column of ref, each column declared
 * with the same type (extra tables and columns are ignored). */
static int schema_check(const mschema *ref, const mschema *got, const char *what, al_err *e) {
    for (int t = 0; t < ref->n_tab; t++) {
        const mtab *rt = &ref->tab[t], *gt = find_tab(got, rt->name);
        if (!gt) return al_errf(e, "%s: table %s is missing", what, rt->name);
        for (int c = 0; c < rt->n_col; c++) {
            int g = find_col(gt, rt->col[c].name);
            if (g < 0)
                return al_errf(e, "%s: table %s has no column %s", what, rt->name, rt->col[c].name);
            if (strcasecmp(gt->col[g].type, rt->col[c].type))
                return al_errf(e, "%s: column %s.%s is declared '%.40s', attnlab declares it %s",
                               what, rt->name, rt->col[c].name, gt->col[g].type, rt->col[c].type);
        }
    }
    return 0;
}

/* The schema this attnlab writes: a fresh in-memory store's. */
static int schema_reference(mschema *ref, al_err *e) {
    al_store *s;
    if (al_store_open(":memory:", &s, e)) return -1;
    int rc = schema_load(al_store_sqlite(s), "the reference schema", ref, e);
    al_store_close(s);
    return rc;
}

/* ------------------------------------------------------------ inputs */

/* Stops long statements (quick_check of a big file, a copy) too. */
static int on_progress(void *stop) { return stop && *(volatile sig_atomic_t *)stop; }

static int stopped(const al_merge_opts *o) { return o && o->stop && *o->stop; }

/* Waiting for a lock (another writer of OUT, a WAL recovery of an input):
 * up to 60 s as al_store_open's busy timeout, but a stop ends the wait. */
static int on_busy(void *stop, int n) {
    if ((stop && *(volatile sig_atomic_t *)stop) || n >= 6000) return 0;
    sqlite3_sleep(10);
    return 1;
}

static void watch(sqlite3 *db, const al_merge_opts *o) {
    void *stop = o ? (void *)o->stop : NULL;
    sqlite3_busy_handler(db, on_busy, stop);
    sqlite3_progress_handler(db, 10000, on_progress, stop);
}

static int in_open(const char *path, const al_merge_opts *o, sqlite3 **db, char *what, size_t cap,
                   al_err *e) {
    struct stat sb;
    *db = NULL;
    snprintf(what, cap, "input %s", path);
    if (stat(path, &sb) != 0) return al_errf(e, "%s: %s", what, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return al_errf(e, "%s: not a regular file", what);
    if (strlen(path) >= AL_PATH_MAX) return al_errf(e, "%s: path too long", what);
    al_err oe;
    if (store_sqlite_open_ro(path, db, &oe)) return al_errf(e, "%s: %s", what, oe.msg);
    watch(*db, o);
    return 0;
}

/* One integer from a one-row query (*v untouched if it returned none). */
static int query_int(sqlite3 *db, const char *what, const char *sql, int64_t *v, int *found,
                     al_err *e) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
        if (sqlite3_errcode(db) == SQLITE_NOTADB)
            return al_errf(e, "%s: not an SQLite database (%s)", what, sqlite3_errmsg(db));
        return sq_err(db, e, what, "cannot read it");
    }
    int r = sqlite3_step(q);
    if (found) *found = r == SQLITE_ROW;
    if (r == SQLITE_ROW) *v = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    if (r == SQLITE_ROW || r == SQLITE_DONE) return 0;
    if (r == SQLITE_NOTADB)
        return al_errf(e, "%s: not an SQLite database (%s)", what, sqlite3_errmsg(db));
    return sq_err(db, e, what, "cannot read it");
}

static int check_version(sqlite3 *db, const char *what, const char *path, al_err *e) {
    int64_t v = 0, n = 0;
    if (query_int(db, what, "PRAGMA user_version", &v, NULL, e) ||
        query_int(db, what, "SELECT count(*) FROM sqlite_schema", &n, NULL, e))
        return -1;
    if (v == AL_STORE_SCHEMA_VERSION) return 0;
    if (v == 0)
        return al_errf(e, "%s: not an attnlab database (%s, schema version 0)", what,
                       n ? "other tables" : "no tables");
    if (v > AL_STORE_SCHEMA_VERSION)
        return al_errf(e, "%s: made by a newer attnlab (schema version %lld, this one writes %d)",
                       what, (long long)v, AL_STORE_SCHEMA_VERSION);
    if (v < 0)
        return al_errf(e, "%s: not an attnlab database (schema version %lld)", what, (long long)v);
    return al_errf(
        e,
        "%s: made by an older attnlab (schema version %lld, this one writes %d): run any "
        "attnlab command on it to migrate it first (attnlab db merge %s migrates it alone)",
        what, (long long)v, AL_STORE_SCHEMA_VERSION, path);
}

/* The first row of a query, as text, into buf ("" when there is none). */
static int query_text(sqlite3 *db, const char *what, const char *sql, char *buf, size_t cap,
                      al_err *e) {
    sqlite3_stmt *q;
    buf[0] = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
        return sq_err(db, e, what, "cannot read it");
    int r = sqlite3_step(q);
    if (r == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(q, 0);
        snprintf(buf, cap, "%s", t ? (const char *)t : "NULL");
    }
    sqlite3_finalize(q);
    if (r == SQLITE_ROW || r == SQLITE_DONE) return 0;
    return sq_err(db, e, what, "cannot read it");
}

/* Everything about an input that can be refused, before OUT is touched. */
static int in_validate(sqlite3 *db, const char *what, const char *path, const mschema *ref,
                       al_err *e) {
    char buf[512];
    if (check_version(db, what, path, e)) return -1;
    if (query_text(db, what, "PRAGMA quick_check(1)", buf, sizeof buf, e)) return -1;
    if (strcmp(buf, "ok")) return al_errf(e, "%s: damaged: %.200s", what, buf);
    mschema got;
    if (schema_load(db, what, &got, e)) return -1;
    int rc = schema_check(ref, &got, what, e);
    schema_free(&got);
    if (rc) return -1;
    int64_t id = 0;
    int found = 0;
    if (query_int(db, what,
                  "SELECT run_id FROM runs WHERE uid IS NULL OR typeof(uid) != 'text' OR "
                  "length(uid) != 32 OR uid GLOB '*[^0-9a-f]*' LIMIT 1",
                  &id, &found, e))
        return -1;
    if (found) return al_errf(e, "%s: run %lld has no uid (32 hex digits)", what, (long long)id);
    if (query_int(db, what,
                  "SELECT run_id FROM runs WHERE source_id IS NOT NULL AND source_id NOT IN "
                  "(SELECT source_id FROM merge_sources) LIMIT 1",
                  &id, &found, e))
        return -1;
    if (found)
        return al_errf(e, "%s: run %lld names a merge source the file lacks", what, (long long)id);
    /* rows of a run or model the file lacks would be lost or dangle */
    for (int t = 0; t < ref->n_tab; t++) {
        char sql[256];
        snprintf(sql, sizeof sql, "PRAGMA foreign_key_check(\"%s\")", ref->tab[t].name);
        sqlite3_stmt *q;
        if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
            return sq_err(db, e, what, "cannot check its references");
        int r = sqlite3_step(q);
        if (r == SQLITE_ROW)
            al_errf(e, "%s: a row of %s (rowid %lld) refers to a %s row the file lacks", what,
                    ref->tab[t].name, (long long)sqlite3_column_int64(q, 1),
                    sqlite3_column_text(q, 2) ? (const char *)sqlite3_column_text(q, 2) : "?");
        else if (r != SQLITE_DONE)
            sq_err(db, e, what, "cannot check its references");
        sqlite3_finalize(q);
        if (r != SQLITE_DONE) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ copying */

/* The column of a run table OUT assigns: its rowid (ablation_id, ...),
 * unless that is run_id itself (patching_runs: one row per run), which
 * is rewritten instead. -1: none. */
static int row_skip(const mtab *t) { return t->auto_col == t->run_col ? -1 : t->auto_col; }

/* old id -> new id; few entries (models, merge sources of one input). */
typedef struct idmap {
    int64_t *from, *to;
    int n, cap;
} idmap;

static int idmap_get(const idmap *m, int64_t from, int64_t *to) {
    for (int i = 0; i < m->n; i++)
        if (m->from[i] == from) return *to = m->to[i], 1;
    return 0;
}

static int idmap_put(idmap *m, int64_t from, int64_t to, al_err *e) {
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 16;
        int64_t *f = realloc(m->from, sizeof *f * (size_t)cap);
        if (f) m->from = f;
        int64_t *t = f ? realloc(m->to, sizeof *t * (size_t)cap) : NULL;
        if (!t) return al_errf(e, "out of memory");
        m->to = t;
        m->cap = cap;
    }
    m->from[m->n] = from;
    m->to[m->n++] = to;
    return 0;
}

static void idmap_free(idmap *m) {
    free(m->from);
    free(m->to);
    memset(m, 0, sizeof *m);
}

/* "a", "b", ... of t's columns but skip (or "?", "?", ... for params). */
static int col_list(const mtab *t, int skip, int params, char *buf, size_t cap, al_err *e) {
    size_t n = 0;
    buf[0] = 0;
    for (int c = 0; c < t->n_col; c++) {
        if (c == skip) continue;
        int w = params ? snprintf(buf + n, cap - n, "%s?", n ? ", " : "")
                       : snprintf(buf + n, cap - n, "%s\"%s\"", n ? ", " : "", t->col[c].name);
        if (w < 0 || (size_t)w >= cap - n) return al_errf(e, "table %s: too many columns", t->name);
        n += (size_t)w;
    }
    return 0;
}

/* SELECT cols-but-skip FROM t WHERE key = ?1 [ORDER BY order]. */
static int prep_select(sqlite3 *db, const char *what, const mtab *t, int skip, const char *key,
                       const char *order, sqlite3_stmt **q, al_err *e) {
    char cols[4096], sql[4400];
    if (col_list(t, skip, 0, cols, sizeof cols, e)) return -1;
    snprintf(sql, sizeof sql, "SELECT %s FROM \"%s\" WHERE \"%s\" = ?1%s%s%s", cols, t->name, key,
             order ? " ORDER BY \"" : "", order ? order : "", order ? "\"" : "");
    if (sqlite3_prepare_v2(db, sql, -1, q, NULL) != SQLITE_OK)
        return sq_err(db, e, what, "cannot read it");
    return 0;
}

/* INSERT INTO t(cols-but-skip) VALUES(?, ...). */
static int prep_insert(sqlite3 *db, const char *what, const mtab *t, int skip, sqlite3_stmt **q,
                       al_err *e) {
    char cols[4096], par[4096], sql[8300];
    if (col_list(t, skip, 0, cols, sizeof cols, e) || col_list(t, skip, 1, par, sizeof par, e))
        return -1;
    snprintf(sql, sizeof sql, "INSERT INTO \"%s\"(%s) VALUES(%s)", t->name, cols, par);
    if (sqlite3_prepare_v2(db, sql, -1, q, NULL) != SQLITE_OK)
        return sq_err(db, e, what, "cannot prepare a write");
    return 0;
}

/* The merge: OUT's connection and statements, the tables to copy. */
typedef struct mctx {
    const mschema *ref;
    const al_merge_opts *o;
    sqlite3 *out;
    char out_what[AL_PATH_MAX + 16];
    char now[40]; /* merged_at, one value for the whole merge */
    const mtab *runs, *models, *sources, *sweep;
    const mtab **rt; /* the run tables but runs */
    int n_rt;
    sqlite3_stmt *o_uid, *o_sha, *o_model, *o_run, *o_src_find, *o_src;
    sqlite3_stmt **o_rows; /* per run table */
    al_progress pg;
    long rows_total;
} mctx;

/* One input being copied. */
typedef struct minput {
    sqlite3 *db;
    char what[AL_PATH_MAX + 16];
    const char *path;
    int index, n_in;
    sqlite3_stmt *i_runs, *i_run, *i_model, *i_src, *i_sweep;
    sqlite3_stmt **i_rows;
    idmap models, sources;
    int64_t own_source; /* this input's merge_sources row in OUT, 0 before the first run */
    al_merge_stats st;
} minput;

static int out_step(mctx *c, sqlite3_stmt *q, al_err *e) {
    int r = sqlite3_step(q);
    sqlite3_reset(q);
    if (r == SQLITE_DONE) return 0;
    return sq_err(c->out, e, c->out_what, "write failed");
}

/* Step q (one row of the input, keyed by ?1 = old) onto that row: 0, or
 * -1 with e naming the missing row (`noun` old) or the read failure. */
static int read_row(minput *in, sqlite3_stmt *q, int64_t old, const char *noun, const char *fail,
                    al_err *e) {
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, old);
    int r = sqlite3_step(q);
    if (r == SQLITE_ROW) return 0;
    sqlite3_reset(q);
    if (r == SQLITE_DONE)
        return al_errf(e, "%s: %s %lld is referenced but missing", in->what, noun, (long long)old);
    return sq_err(in->db, e, in->what, fail);
}

/* OUT's model_id for the input's model old: by sha256, inserted if new. */
static int map_model(mctx *c, minput *in, int64_t old, int64_t *id, al_err *e) {
    if (idmap_get(&in->models, old, id)) return 0;
    sqlite3_stmt *q = in->i_model;
    if (read_row(in, q, old, "model", "cannot read models", e)) return -1;
    /* the select skips model_id, so sha256 sits one column earlier after it */
    int sc = find_col(c->models, "sha256");
    int qc = sc - (c->models->auto_col >= 0 && c->models->auto_col < sc);
    sqlite3_reset(c->o_sha);
    sqlite3_bind_value(c->o_sha, 1, sqlite3_column_value(q, qc));
    int r = sqlite3_step(c->o_sha);
    if (r == SQLITE_ROW) {
        *id = sqlite3_column_int64(c->o_sha, 0);
        sqlite3_reset(c->o_sha);
    } else {
        sqlite3_reset(c->o_sha);
        if (r != SQLITE_DONE) return sq_err(c->out, e, c->out_what, "cannot read models");
        int nc = sqlite3_column_count(q);
        sqlite3_reset(c->o_model);
        for (int k = 0; k < nc; k++)
            sqlite3_bind_value(c->o_model, k + 1, sqlite3_column_value(q, k));
        if (out_step(c, c->o_model, e)) return sqlite3_reset(q), -1;
        *id = sqlite3_last_insert_rowid(c->out);
        in->st.models_added++;
    }
    sqlite3_reset(q);
    return idmap_put(&in->models, old, *id, e);
}

/* Bind the merge_sources columns (but source_id) of the row found or to
 * be inserted: from the input's row q (copy) or, with q NULL, this
 * input's own: its path, the merge time and its sweep_task row. */
static int bind_source(mctx *c, minput *in, sqlite3_stmt *dst, sqlite3_stmt *q, al_err *e) {
    const mtab *t = c->sources;
    int k = 0;
    sqlite3_reset(dst);
    sqlite3_clear_bindings(dst);
    int have_sweep = 0;
    if (!q) {
        sqlite3_reset(in->i_sweep);
        int r = sqlite3_step(in->i_sweep);
        if (r != SQLITE_ROW && r != SQLITE_DONE)
            return sq_err(in->db, e, in->what, "cannot read sweep_task");
        have_sweep = r == SQLITE_ROW;
    }
    for (int col = 0; col < t->n_col; col++) {
        if (col == t->auto_col) continue;
        k++;
        const char *nm = t->col[col].name;
        if (q) {
            sqlite3_bind_value(dst, k, sqlite3_column_value(q, k - 1));
        } else if (!strcmp(nm, "path")) {
            sqlite3_bind_text(dst, k, in->path, -1, SQLITE_STATIC);
        } else if (!strcmp(nm, "merged_at")) {
            sqlite3_bind_text(dst, k, c->now, -1, SQLITE_STATIC);
        } else if (have_sweep) { /* a sweep_task column of the same name */
            int sc = find_col(c->sweep, nm);
            if (sc >= 0) sqlite3_bind_value(dst, k, sqlite3_column_value(in->i_sweep, sc));
        }
    }
    return 0;
}

/* OUT's source_id for a run: old 0 = made in this input (its own row,
 * inserted at the first run); else the input's merge_sources row old,
 * reused if OUT has an identical one (the same file merged twice). */
static int map_source(mctx *c, minput *in, int64_t old, int has_old, int64_t *id, al_err *e) {
    if (!has_old) {
        if (!in->own_source) {
            int rc = bind_source(c, in, c->o_src, NULL, e) || out_step(c, c->o_src, e);
            sqlite3_reset(in->i_sweep);
            if (rc) return -1;
            in->own_source = sqlite3_last_insert_rowid(c->out);
            in->st.sources_added++;
        }
        *id = in->own_source;
        return 0;
    }
    if (idmap_get(&in->sources, old, id)) return 0;
    sqlite3_stmt *q = in->i_src;
    if (read_row(in, q, old, "merge source", "cannot read merge_sources", e)) return -1;
    if (bind_source(c, in, c->o_src_find, q, e)) return sqlite3_reset(q), -1;
    int r = sqlite3_step(c->o_src_find);
    if (r == SQLITE_ROW) *id = sqlite3_column_int64(c->o_src_find, 0);
    sqlite3_reset(c->o_src_find);
    if (r == SQLITE_DONE) {
        if (bind_source(c, in, c->o_src, q, e) || out_step(c, c->o_src, e))
            return sqlite3_reset(q), -1;
        *id = sqlite3_last_insert_rowid(c->out);
        in->st.sources_added++;
    } else if (r != SQLITE_ROW) {
        sqlite3_reset(q);
        return sq_err(c->out, e, c->out_what, "cannot read merge_sources");
    }
    sqlite3_reset(q);
    return idmap_put(&in->sources, old, *id, e);
}

static void show_progress(mctx *c, minput *in, int force) {
    if (c->o && c->o->progress)
        al_progress_update(&c->pg, force, "merge: %s (%d/%d): %ld runs added, %ld rows", in->path,
                           in->index + 1, in->n_in, in->st.runs_added, c->rows_total);
}

/* Copy every row of table t belonging to the input's run old as run nw. */
static int copy_rows(mctx *c, minput *in, int ti, int64_t old, int64_t nw, al_err *e) {
    const mtab *t = c->rt[ti];
    sqlite3_stmt *q = in->i_rows[ti], *w = c->o_rows[ti];
    int nc = sqlite3_column_count(q), r, skip = row_skip(t);
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, old);
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        sqlite3_reset(w);
        for (int col = 0, k = 0; col < t->n_col && k < nc; col++) {
            if (col == skip) continue;
            k++;
            if (col == t->run_col) {
                sqlite3_bind_int64(w, k, nw);
            } else if (col == t->model_col && sqlite3_column_type(q, k - 1) != SQLITE_NULL) {
                int64_t mid;
                if (map_model(c, in, sqlite3_column_int64(q, k - 1), &mid, e))
                    return sqlite3_reset(q), -1;
                sqlite3_bind_int64(w, k, mid);
            } else {
                sqlite3_bind_value(w, k, sqlite3_column_value(q, k - 1));
            }
        }
        if (out_step(c, w, e)) return sqlite3_reset(q), -1;
        in->st.rows_added++;
        if ((++c->rows_total & 4095) == 0) show_progress(c, in, 0);
    }
    sqlite3_reset(q);
    if (r != SQLITE_DONE) return sq_err(in->db, e, in->what, "cannot read its rows");
    return 0;
}

/* The runs row of the input's run old into OUT (new run_id, model and
 * source mapped), then its rows of every run table. */
static int copy_run(mctx *c, minput *in, int64_t old, al_err *e) {
    const mtab *t = c->runs;
    sqlite3_stmt *q = in->i_run;
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, old);
    int r = sqlite3_step(q);
    if (r != SQLITE_ROW) {
        sqlite3_reset(q);
        return sq_err(in->db, e, in->what, "cannot read runs");
    }
    sqlite3_stmt *w = c->o_run;
    sqlite3_reset(w);
    for (int col = 0, k = 0; col < t->n_col; col++) {
        if (col == t->auto_col) continue;
        k++;
        int null = sqlite3_column_type(q, k - 1) == SQLITE_NULL;
        int64_t id;
        if (col == t->model_col && !null) {
            if (map_model(c, in, sqlite3_column_int64(q, k - 1), &id, e))
                return sqlite3_reset(q), -1;
            sqlite3_bind_int64(w, k, id);
        } else if (!strcmp(t->col[col].name, "source_id")) {
            if (map_source(c, in, null ? 0 : sqlite3_column_int64(q, k - 1), !null, &id, e))
                return sqlite3_reset(q), -1;
            sqlite3_bind_int64(w, k, id);
        } else {
            sqlite3_bind_value(w, k, sqlite3_column_value(q, k - 1));
        }
    }
    int rc = out_step(c, w, e);
    sqlite3_reset(q);
    if (rc) return -1;
    int64_t nw = sqlite3_last_insert_rowid(c->out);
    for (int ti = 0; ti < c->n_rt; ti++)
        if (copy_rows(c, in, ti, old, nw, e)) return -1;
    in->st.runs_added++;
    return 0;
}

static void input_close(mctx *c, minput *in) {
    sqlite3_finalize(in->i_runs);
    sqlite3_finalize(in->i_run);
    sqlite3_finalize(in->i_model);
    sqlite3_finalize(in->i_src);
    sqlite3_finalize(in->i_sweep);
    if (in->i_rows)
        for (int i = 0; i < c->n_rt; i++) sqlite3_finalize(in->i_rows[i]);
    free(in->i_rows);
    idmap_free(&in->models);
    idmap_free(&in->sources);
    sqlite3_close(in->db);
    in->db = NULL;
}

/* The input's sweep_task row, its columns in the reference's order (the
 * order bind_source's find_col indexes). */
static int prep_sweep(mctx *c, minput *in, al_err *e) {
    char cols[4096], sql[4200];
    if (col_list(c->sweep, -1, 0, cols, sizeof cols, e)) return -1;
    snprintf(sql, sizeof sql, "SELECT %s FROM sweep_task LIMIT 1", cols);
    return prep(in->db, in->what, sql, &in->i_sweep, e);
}

/* Merge one (already validated) input inside OUT's transaction. */
static int merge_input(mctx *c, minput *in, al_err *e) {
    int64_t v = 0;
    if (in_open(in->path, c->o, &in->db, in->what, sizeof in->what, e)) return -1;
    /* one read transaction: the input as of one moment */
    if (sqlite3_exec(in->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
        return sq_err(in->db, e, in->what, "cannot read it");
    if (query_int(in->db, in->what, "PRAGMA user_version", &v, NULL, e)) return -1;
    if (v != AL_STORE_SCHEMA_VERSION)
        return al_errf(e, "%s: changed while merging (schema version %lld)", in->what,
                       (long long)v);
    if (!(in->i_rows = calloc((size_t)c->n_rt + 1, sizeof *in->i_rows)))
        return al_errf(e, "out of memory");
    if (prep(in->db, in->what, "SELECT run_id, status, uid, source_id FROM runs ORDER BY run_id",
             &in->i_runs, e) ||
        prep_select(in->db, in->what, c->runs, c->runs->auto_col, "run_id", NULL, &in->i_run, e) ||
        prep_select(in->db, in->what, c->models, c->models->auto_col, "model_id", NULL,
                    &in->i_model, e) ||
        prep_select(in->db, in->what, c->sources, c->sources->auto_col, "source_id", NULL,
                    &in->i_src, e) ||
        prep_sweep(c, in, e))
        return -1;
    for (int i = 0; i < c->n_rt; i++) {
        const mtab *t = c->rt[i];
        int skip = row_skip(t);
        /* in the input's order, so OUT's new ids keep it */
        if (prep_select(in->db, in->what, t, skip, "run_id", skip >= 0 ? t->col[skip].name : NULL,
                        &in->i_rows[i], e))
            return -1;
    }
    int r;
    while ((r = sqlite3_step(in->i_runs)) == SQLITE_ROW) {
        if (stopped(c->o)) return al_errf(e, "interrupted");
        int64_t old = sqlite3_column_int64(in->i_runs, 0);
        const unsigned char *status = sqlite3_column_text(in->i_runs, 1);
        if (!status || strcmp((const char *)status, "done")) {
            in->st.runs_not_done++;
            continue;
        }
        sqlite3_reset(c->o_uid);
        sqlite3_bind_value(c->o_uid, 1, sqlite3_column_value(in->i_runs, 2));
        int u = sqlite3_step(c->o_uid);
        sqlite3_reset(c->o_uid);
        if (u == SQLITE_ROW) {
            in->st.runs_present++;
            continue;
        }
        if (u != SQLITE_DONE) return sq_err(c->out, e, c->out_what, "cannot read runs");
        if (copy_run(c, in, old, e)) return -1;
        show_progress(c, in, 0);
    }
    if (r != SQLITE_DONE) return sq_err(in->db, e, in->what, "cannot read runs");
    in->st.inputs = 1;
    show_progress(c, in, 1);
    return 0;
}

static void finalize_out(mctx *c) {
    sqlite3_finalize(c->o_uid);
    sqlite3_finalize(c->o_sha);
    sqlite3_finalize(c->o_model);
    sqlite3_finalize(c->o_run);
    sqlite3_finalize(c->o_src_find);
    sqlite3_finalize(c->o_src);
    if (c->o_rows)
        for (int i = 0; i < c->n_rt; i++) sqlite3_finalize(c->o_rows[i]);
    free(c->o_rows);
    free(c->rt);
}

/* OUT's statements; the tables to copy (from the reference schema). */
static int prepare_out(mctx *c, al_err *e) {
    const mschema *ref = c->ref;
    c->runs = find_tab(ref, "runs");
    c->models = find_tab(ref, "models");
    c->sources = find_tab(ref, "merge_sources");
    c->sweep = find_tab(ref, "sweep_task");
    if (!c->runs || !c->models || !c->sources || !c->sweep || c->runs->auto_col < 0 ||
        c->models->auto_col < 0 || c->sources->auto_col < 0 || find_col(c->models, "sha256") < 0)
        return al_errf(e, "internal error: the schema lacks runs, models or merge_sources");
    c->rt = calloc((size_t)ref->n_tab + 1, sizeof *c->rt);
    c->o_rows = calloc((size_t)ref->n_tab + 1, sizeof *c->o_rows);
    if (!c->rt || !c->o_rows) return al_errf(e, "out of memory");
    for (int t = 0; t < ref->n_tab; t++)
        if (ref->tab[t].run_col >= 0 && &ref->tab[t] != c->runs) c->rt[c->n_rt++] = &ref->tab[t];
    /* runs.uid column and merge_sources' lookup by every column */
    char where[4096];
    size_t n = 0;
    for (int col = 0; col < c->sources->n_col; col++) {
        if (col == c->sources->auto_col) continue;
        int w = snprintf(where + n, sizeof where - n, "%s\"%s\" IS ?", n ? " AND " : "",
                         c->sources->col[col].name);
        if (w < 0 || (size_t)w >= sizeof where - n)
            return al_errf(e, "merge_sources: too many columns");
        n += (size_t)w;
    }
    char sql[4200];
    snprintf(sql, sizeof sql, "SELECT source_id FROM merge_sources WHERE %s", where);
    if (prep(c->out, c->out_what, "SELECT 1 FROM runs WHERE uid = ?1", &c->o_uid, e) ||
        prep(c->out, c->out_what, "SELECT model_id FROM models WHERE sha256 = ?1", &c->o_sha, e) ||
        prep(c->out, c->out_what, sql, &c->o_src_find, e) ||
        prep_insert(c->out, c->out_what, c->models, c->models->auto_col, &c->o_model, e) ||
        prep_insert(c->out, c->out_what, c->runs, c->runs->auto_col, &c->o_run, e) ||
        prep_insert(c->out, c->out_what, c->sources, c->sources->auto_col, &c->o_src, e))
        return -1;
    for (int i = 0; i < c->n_rt; i++)
        if (prep_insert(c->out, c->out_what, c->rt[i], row_skip(c->rt[i]), &c->o_rows[i], e))
            return -1;
    return 0;
}

/* ------------------------------------------------------------ merge */

static int same_file(const struct stat *a, const char *path) {
    struct stat b;
    return stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* Replace line breaks: the message is one line whatever a file held. */
static void one_line(al_err *e) {
    if (!e) return;
    for (char *p = e->msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

static void add_stats(al_merge_stats *to, const al_merge_stats *s) {
    to->inputs += s->inputs;
    to->runs_added += s->runs_added;
    to->runs_present += s->runs_present;
    to->runs_not_done += s->runs_not_done;
    to->models_added += s->models_added;
    to->sources_added += s->sources_added;
    to->rows_added += s->rows_added;
}

static int merge(const char *out_path, const char *const *in_paths, int n_in,
                 const al_merge_opts *o, al_merge_stats *st, al_err *e) {
    if (n_in < 0 || (n_in > 0 && !in_paths)) return al_errf(e, "db merge: bad input list");
    mschema ref = {0};
    al_store *s = NULL;
    mctx c;
    memset(&c, 0, sizeof c);
    c.ref = &ref;
    c.o = o;
    int rc = -1, in_tx = 0;
    if (schema_reference(&ref, e)) return -1;
    /* phase 1: every input, read-only, before OUT is opened */
    struct stat out_sb;
    int out_exists = stat(out_path, &out_sb) == 0;
    for (int i = 0; i < n_in; i++) {
        if (stopped(o)) {
            al_errf(e, "interrupted");
            goto out;
        }
        char what[AL_PATH_MAX + 16];
        sqlite3 *db;
        if (out_exists && same_file(&out_sb, in_paths[i])) {
            al_errf(e, "input %s: is the output database %s itself", in_paths[i], out_path);
            goto out;
        }
        if (in_open(in_paths[i], o, &db, what, sizeof what, e)) goto out;
        int bad = in_validate(db, what, in_paths[i], &ref, e);
        sqlite3_close(db);
        if (bad) {
            if (stopped(o)) al_errf(e, "interrupted");
            goto out;
        }
    }
    /* phase 2: OUT, then one transaction for everything */
    if (al_store_open(out_path, &s, e)) goto out;
    c.out = al_store_sqlite(s);
    store_set_stop(s, o ? o->stop : NULL);
    snprintf(c.out_what, sizeof c.out_what, "database %s", out_path);
    watch(c.out, o);
    if (stat(out_path, &out_sb) == 0)
        for (int i = 0; i < n_in; i++)
            if (same_file(&out_sb, in_paths[i])) {
                al_errf(e, "input %s: is the output database %s itself", in_paths[i], out_path);
                goto out;
            }
    mschema got;
    if (schema_load(c.out, c.out_what, &got, e)) goto out;
    int bad = schema_check(&ref, &got, c.out_what, e);
    schema_free(&got);
    if (bad || prepare_out(&c, e)) goto out;
    if (query_text(c.out, c.out_what, "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')", c.now,
                   sizeof c.now, e))
        goto out;
    if (store_before_write(s, "BEGIN IMMEDIATE", e)) goto out;
    if (sqlite3_exec(c.out, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        sq_err(c.out, e, c.out_what, "cannot begin the merge");
        goto out;
    }
    in_tx = 1;
    al_progress_init(&c.pg, 5.0);
    for (int i = 0; i < n_in; i++) {
        minput in;
        memset(&in, 0, sizeof in);
        in.path = in_paths[i];
        in.index = i;
        in.n_in = n_in;
        int bad_in = merge_input(&c, &in, e);
        input_close(&c, &in);
        if (bad_in) {
            /* OUT refused a row (a constraint the input lacked): say whose */
            if (!stopped(o) && e && !strncmp(e->msg, "database ", 9))
                al_err_prefix(e, "merging %s", in_paths[i]);
            goto out;
        }
        if (o && o->each) o->each[i] = in.st;
        add_stats(st, &in.st);
    }
    if (stopped(o)) {
        al_errf(e, "interrupted");
        goto out;
    }
    finalize_out(&c); /* no statement may be active at COMMIT */
    c.o_rows = NULL, c.rt = NULL;
    c.o_uid = c.o_sha = c.o_model = c.o_run = c.o_src_find = c.o_src = NULL;
    if (sqlite3_exec(c.out, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        sq_err(c.out, e, c.out_what, "cannot commit the merge");
        goto out;
    }
    in_tx = 0;
    rc = 0;
out:
    if (rc && stopped(o)) al_errf(e, "interrupted");
    if (c.o && c.o->progress && c.pg.active) al_progress_done(&c.pg);
    finalize_out(&c);
    if (in_tx) sqlite3_exec(c.out, "ROLLBACK", NULL, NULL, NULL);
    al_store_close(s);
    schema_free(&ref);
    return rc;
}

int al_store_merge(const char *out_path, const char *const *in_paths, int n_in,
                   const al_merge_opts *o, al_merge_stats *st, al_err *e) {
    al_merge_stats mine;
    if (!st) st = &mine;
    memset(st, 0, sizeof *st);
    if (o && o->each && n_in > 0) memset(o->each, 0, sizeof *o->each * (size_t)n_in);
    int rc = merge(out_path, in_paths, n_in, o, st, e);
    if (rc) {
        memset(st, 0, sizeof *st);
        if (o && o->each && n_in > 0) memset(o->each, 0, sizeof *o->each * (size_t)n_in);
        one_line(e);
    }
    return rc;
}
