/* store_runs.c -- models and runs: the models row of a checkpoint, a
 * run's life (begin, transaction, finish or fail; store.h tells why a run
 * never looks done when it is not), its warnings, and discarding a run
 * that did not finish. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "attnlab/store.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "store_conn.h"

/* ------------------------------------------------------------ models */

/* Training facts from dir/state.json, if present and readable. */
static void facts_from_state(const char *dir, al_model_facts *f) {
    al_train_state st;
    if (al_ckpt_read_state(dir, &st, NULL) != 0) return;
    f->trained_tokens = st.tokens_seen;
    f->train_steps = st.step;
    f->final_train_loss = st.last_train_loss;
    f->final_val_loss = st.last_val_loss;
    f->data_tokens = st.data_tokens > 0 ? st.data_tokens : NAN;
    al_state_free(&st);
}

int al_store_model(al_store *s, const char *dir, const char *sha256, const al_model *m,
                   const al_model_facts *facts, int64_t *model_id, al_err *e) {
    char wpath[AL_PATH_MAX + 64], hex[65];
    if (sha256) {
        if (strlen(sha256) != 64 || strspn(sha256, "0123456789abcdef") != 64)
            return al_errf(e, "model %s: bad sha256 '%s'", dir, sha256);
        memcpy(hex, sha256, sizeof hex);
    } else if (al_path_join(wpath, sizeof wpath, dir, "model.safetensors", e) ||
               al_sha256_file(wpath, hex, e)) {
        return -1;
    }
    al_model_facts f = {NAN, -1, NAN, NAN, NAN};
    if (facts)
        f = *facts;
    else
        facts_from_state(dir, &f);
    char *abs = realpath(dir, NULL);
    sqlite3_stmt *q;
    if (store_prepare(s,
                      "INSERT INTO models(sha256, path, n_layers, d_model, n_heads, d_head,"
                      " n_ctx, d_vocab, tied_embeddings, seed, n_params, trained_tokens,"
                      " train_steps, final_train_loss, final_val_loss, data_tokens, added_at)"
                      " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                      " strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
                      " ON CONFLICT(sha256) DO UPDATE SET path = excluded.path,"
                      " trained_tokens = coalesce(excluded.trained_tokens, trained_tokens),"
                      " train_steps = coalesce(excluded.train_steps, train_steps),"
                      " final_train_loss = coalesce(excluded.final_train_loss, final_train_loss),"
                      " final_val_loss = coalesce(excluded.final_val_loss, final_val_loss),"
                      " data_tokens = coalesce(excluded.data_tokens, data_tokens)",
                      &q, e)) {
        free(abs);
        return -1;
    }
    const al_config *c = &m->cfg;
    store_bind_str(q, 1, hex);
    store_bind_str(q, 2, abs ? abs : dir);
    int ints[7] = {c->n_layers, c->d_model, c->n_heads,        c->d_head,
                   c->n_ctx,    c->d_vocab, c->tied_embeddings};
    for (int i = 0; i < 7; i++) sqlite3_bind_int(q, 3 + i, ints[i]);
    sqlite3_bind_int64(q, 10, (sqlite3_int64)c->seed); /* > 2^63 wraps */
    sqlite3_bind_int64(q, 11, (sqlite3_int64)m->n_params);
    store_bind_real(q, 12, f.trained_tokens);
    if (f.train_steps >= 0) sqlite3_bind_int64(q, 13, f.train_steps);
    store_bind_real(q, 14, f.final_train_loss);
    store_bind_real(q, 15, f.final_val_loss);
    store_bind_real(q, 16, f.data_tokens);
    free(abs);
    int rc = store_step_done(s, q, e);
    sqlite3_finalize(q);
    if (rc) return -1;
    if (store_prepare(s, "SELECT model_id FROM models WHERE sha256 = ?", &q, e)) return -1;
    store_bind_str(q, 1, hex);
    rc = sqlite3_step(q) == SQLITE_ROW ? 0 : store_db_err(s, e, "cannot find model row");
    if (rc == 0) *model_id = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return rc;
}

/* -------------------------------------------------------------- runs */

int al_store_run_begin(al_store *s, const char *kind, const char *config_json, int64_t model_id,
                       int64_t *run_id, al_err *e) {
    if (s->in_tx) return al_errf(e, "database %s: run_begin inside a transaction", s->path);
    char host[256], start[64];
    store_host_name(host, sizeof host);
    store_proc_start((long)getpid(), start, sizeof start);
    sqlite3_stmt *q;
    if (store_prepare(s,
                      "INSERT INTO runs(kind, config_json, model_id, started_at, status,"
                      " attnlab_version, pid, pid_start, host, uid) VALUES(?, ?, ?,"
                      " strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'running', ?, ?, ?, ?,"
                      " lower(hex(randomblob(16))))",
                      &q, e))
        return -1;
    store_bind_str(q, 1, kind);
    store_bind_str(q, 2, config_json);
    if (model_id > 0) sqlite3_bind_int64(q, 3, model_id);
    store_bind_str(q, 4, AL_VERSION);
    sqlite3_bind_int64(q, 5, (sqlite3_int64)getpid());
    store_bind_str(q, 6, start);
    store_bind_str(q, 7, host);
    int rc = store_step_done(s, q, e);
    sqlite3_finalize(q);
    if (rc == 0) *run_id = sqlite3_last_insert_rowid(s->db);
    return rc;
}

int al_store_put_sweep_task(al_store *s, const al_sweep_task_row *r, al_err *e) {
    if (s->in_tx) return al_errf(e, "database %s: put_sweep_task inside a transaction", s->path);
    sqlite3_stmt *q;
    if (store_prepare(s,
                      "INSERT OR REPLACE INTO sweep_task(one, experiment, task, n_tasks, setting,"
                      " seed, params_json) VALUES(1, ?, ?, ?, ?, ?, ?)",
                      &q, e))
        return -1;
    store_bind_str(q, 1, r->experiment);
    sqlite3_bind_int(q, 2, r->task);
    sqlite3_bind_int(q, 3, r->n_tasks);
    store_bind_str(q, 4, r->setting ? r->setting : "");
    if (r->has_seed) sqlite3_bind_int64(q, 5, (sqlite3_int64)r->seed);
    store_bind_str(q, 6, r->params_json ? r->params_json : "{}");
    int rc = store_step_done(s, q, e);
    sqlite3_finalize(q);
    return rc;
}

int al_store_run_set_model(al_store *s, int64_t run_id, int64_t model_id, al_err *e) {
    sqlite3_stmt *q;
    if (store_prepare(s, "UPDATE runs SET model_id = ? WHERE run_id = ?", &q, e)) return -1;
    sqlite3_bind_int64(q, 1, model_id);
    sqlite3_bind_int64(q, 2, run_id);
    int rc = store_step_done(s, q, e);
    sqlite3_finalize(q);
    return rc;
}

int al_store_tx_begin(al_store *s, al_err *e) {
    if (s->in_tx) return 0;
    if (store_exec(s, "BEGIN IMMEDIATE", e)) return -1;
    s->in_tx = 1;
    return 0;
}

int al_store_tx_commit(al_store *s, al_err *e) {
    if (!s->in_tx) return 0;
    if (store_exec(s, "COMMIT", e)) return -1;
    s->in_tx = 0;
    return 0;
}

static int set_status(al_store *s, int64_t run_id, const char *status, const char *msg, al_err *e) {
    sqlite3_stmt *q;
    if (store_prepare(s,
                      "UPDATE runs SET status = ?, error = ?,"
                      " finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
                      " WHERE run_id = ?",
                      &q, e))
        return -1;
    store_bind_str(q, 1, status);
    store_bind_str(q, 2, msg);
    sqlite3_bind_int64(q, 3, run_id);
    int rc = store_step_done(s, q, e);
    if (rc == 0 && sqlite3_changes(s->db) != 1)
        rc = al_errf(e, "database %s: no run %lld", s->path, (long long)run_id);
    sqlite3_finalize(q);
    return rc;
}

int al_store_run_finish(al_store *s, int64_t run_id, al_err *e) {
    if (set_status(s, run_id, "done", NULL, e)) return -1;
    return al_store_tx_commit(s, e);
}

int al_store_run_fail(al_store *s, int64_t run_id, const char *msg, al_err *e) {
    if (s->in_tx) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        s->in_tx = 0;
    }
    return set_status(s, run_id, "failed", msg ? msg : "failed", e);
}

/* ---------------------------------------------------------- warnings */

void al_store_strings_free(char **v, int n) {
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

int al_store_run_warnings(al_store *s, int64_t run, char ***msgs, int *n, al_err *e) {
    *msgs = NULL, *n = 0;
    sqlite3_stmt *q;
    if (store_prepare(s,
                      "SELECT message FROM run_warnings WHERE run_id = ? ORDER BY seq, warning_id",
                      &q, e))
        return -1;
    sqlite3_bind_int64(q, 1, run);
    char **v = NULL;
    int cnt = 0, cap = 0, rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(q, 0);
        char **nv = al_grow(v, &cap, cnt, sizeof *v, 8, e);
        char *d = nv ? al_malloc(strlen(t ? t : "") + 1, 1, e) : NULL;
        if (nv) v = nv;
        if (!d) {
            rc = SQLITE_NOMEM;
            break;
        }
        strcpy(d, t ? t : "");
        v[cnt++] = d;
    }
    if (rc != SQLITE_DONE && rc != SQLITE_NOMEM) store_db_err(s, e, "cannot read run_warnings");
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        al_store_strings_free(v, cnt);
        return -1;
    }
    *msgs = v, *n = cnt;
    return 0;
}

/* ----------------------------------------------------------- discard */

int al_store_run_discard(al_store *s, int64_t run, al_err *e) {
    if (s->in_tx) { /* the run's own uncommitted rows */
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        s->in_tx = 0;
    }
    sqlite3_stmt *q = NULL, *d = NULL;
    if (store_exec(s, "BEGIN IMMEDIATE", e)) return -1;
    int rc = -1, r;
    if (store_prepare(s, "SELECT status FROM runs WHERE run_id = ?", &q, e)) goto out;
    sqlite3_bind_int64(q, 1, run);
    if ((r = sqlite3_step(q)) != SQLITE_ROW) {
        if (r == SQLITE_DONE)
            al_errf(e, "database %s: no run %lld", s->path, (long long)run);
        else
            store_db_err(s, e, "cannot read the run");
        goto out;
    }
    if (!strcmp((const char *)sqlite3_column_text(q, 0), "done")) {
        al_errf(e, "database %s: run %lld is finished; only a run not yet done can be discarded",
                s->path, (long long)run);
        goto out;
    }
    sqlite3_finalize(q);
    /* every table with a run_id column, from the schema (as merge.c finds
     * them), so a table added later is covered; runs itself last */
    if (store_prepare(
            s,
            "SELECT m.name FROM sqlite_schema m JOIN pragma_table_info(m.name) c "
            "WHERE m.type = 'table' AND c.name = 'run_id' AND m.name <> 'runs' ORDER BY m.name",
            &q, e))
        goto out;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(q, 0);
        char *sql = sqlite3_mprintf("DELETE FROM \"%w\" WHERE run_id = ?", name);
        if (!sql) {
            al_errf(e, "out of memory");
            goto out;
        }
        int p = store_prepare(s, sql, &d, e);
        sqlite3_free(sql);
        if (p) goto out;
        sqlite3_bind_int64(d, 1, run);
        if (store_step_done(s, d, e)) goto out;
        sqlite3_finalize(d);
        d = NULL;
    }
    if (r != SQLITE_DONE) {
        store_db_err(s, e, "cannot read the schema");
        goto out;
    }
    if (store_prepare(s, "DELETE FROM runs WHERE run_id = ?", &d, e)) goto out;
    sqlite3_bind_int64(d, 1, run);
    rc = store_step_done(s, d, e);
out:
    sqlite3_finalize(q);
    sqlite3_finalize(d);
    if (rc == 0) return store_exec(s, "COMMIT", e);
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL); /* keep the first error */
    return -1;
}
