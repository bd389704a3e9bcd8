/* cmd_db_show.c -- `attnlab db show FILE [RUN]`: what a results database
 * holds, without SQL: its models, its runs (id, kind, status, model,
 * start, seconds, warnings) and every table and view with its row count;
 * with RUN, that run's options, error and warnings and the rows it wrote
 * per table. Opens the file read-only (store_show.h); --json prints the
 * same as one document. A missing file, one that is not an attnlab
 * database, or a run it lacks is one line and exit 1. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/store.h"
#include "attnlab/json.h"
#include "attnlab/store_show.h"

static int g_json;

static al_flag show_flags[] = {{"json", AL_BOOL, &g_json, NULL,
                                "one JSON document (attnlab.db_show/1) on stdout", 0, 0},
                               AL_FLAGS_END};

static int run_db_show(int argc, char **argv);

al_command al_cmd_db_show = {
    "db show",
    "what a results database holds: models, runs, tables and their rows (or one run)",
    "FILE [RUN] [--json]",
    "Lists the database's models (id, sha256, layers x heads, tokens trained on and in\n"
    "the training data), its runs (id, kind, status, model, start, seconds, warnings)\n"
    "and every table and view with its row count. With RUN, also that run's options\n"
    "(its config_json), its error if it failed, its warnings, and how many rows it\n"
    "wrote to each table. The file is opened read-only: nothing is created or\n"
    "migrated. Query the tables with sqlite3 FILE (see docs/sql.md);\n"
    "circuit_main holds each discover run's own circuit (its kept edges).",
    show_flags,
    run_db_show,
};

static const char *run_kind_of(const al_show *sh, long id) {
    for (int i = 0; i < sh->n_runs; i++)
        if (sh->runs[i].id == id) return sh->runs[i].kind;
    return "?";
}

static void print_text(const char *path, const al_show *sh) {
    printf("%s: attnlab results database, schema version %d\n", path, sh->version);
    printf("\nmodels (%d):\n", sh->n_models);
    if (sh->n_models)
        printf("  %4s  %-12s  %-7s  %14s  %14s  %s\n", "id", "sha256", "L x H", "tokens trained",
               "data tokens", "path");
    for (int i = 0; i < sh->n_models; i++) {
        const al_show_model *m = &sh->models[i];
        char lh[16], tt[32], dt[32];
        snprintf(lh, sizeof lh, "%d x %d", m->n_layers, m->n_heads);
        if (isnan(m->trained_tokens))
            snprintf(tt, sizeof tt, "-");
        else
            snprintf(tt, sizeof tt, "%.0f", m->trained_tokens);
        if (isnan(m->data_tokens))
            snprintf(dt, sizeof dt, "-");
        else
            snprintf(dt, sizeof dt, "%.0f", m->data_tokens);
        printf("  %4ld  %-12s  %-7s  %14s  %14s  %s\n", m->id, m->sha, lh, tt, dt, m->path);
    }
    printf("\nruns (%d):\n", sh->n_runs);
    if (sh->n_runs)
        printf("  %4s  %-10s  %-8s  %5s  %-19s  %9s  %s\n", "id", "kind", "status", "model",
               "started (UTC)", "seconds", "warnings");
    for (int i = 0; i < sh->n_runs; i++) {
        const al_show_run *r = &sh->runs[i];
        char sec[32], mod[16];
        if (isnan(r->seconds))
            snprintf(sec, sizeof sec, "-");
        else
            snprintf(sec, sizeof sec, "%.1f", r->seconds);
        if (r->model)
            snprintf(mod, sizeof mod, "%ld", r->model);
        else
            snprintf(mod, sizeof mod, "-");
        printf("  %4ld  %-10s  %-8s  %5s  %-19.19s  %9s  %ld\n", r->id, r->kind, r->status, mod,
               r->started, sec, r->n_warnings);
    }
    printf("\ntables and views (rows%s):\n", sh->run ? "; rows of this run" : "");
    for (int i = 0; i < sh->n_tables; i++) {
        const al_show_table *t = &sh->tables[i];
        if (sh->run && t->run_rows >= 0)
            printf("  %-24s %s %10ld  %10ld\n", t->name, t->is_view ? "view " : "table", t->rows,
                   t->run_rows);
        else
            printf("  %-24s %s %10ld\n", t->name, t->is_view ? "view " : "table", t->rows);
    }
    if (!sh->run) return;
    printf("\nrun %ld (%s):\n  options: %s\n", sh->run, run_kind_of(sh, sh->run),
           sh->config_json ? sh->config_json : "-");
    if (sh->error) printf("  error: %s\n", sh->error);
    for (int i = 0; i < sh->n_warnings; i++) printf("  warning: %s\n", sh->warnings[i]);
}

static cJSON *num_or_null(double v) {
    return isnan(v) ? cJSON_CreateNull() : cJSON_CreateNumber(v);
}

static int print_json(const char *path, const al_show *sh) {
    cJSON *d = cJSON_CreateObject(), *a;
    int ok = d && cJSON_AddStringToObject(d, "schema", "attnlab.db_show/1") &&
             cJSON_AddStringToObject(d, "db", path) &&
             cJSON_AddNumberToObject(d, "schema_version", sh->version) &&
             (a = cJSON_AddArrayToObject(d, "models"));
    for (int i = 0; ok && i < sh->n_models; i++) {
        const al_show_model *m = &sh->models[i];
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(a, o) && cJSON_AddNumberToObject(o, "id", m->id) &&
             cJSON_AddStringToObject(o, "sha256", m->sha) &&
             cJSON_AddStringToObject(o, "path", m->path) &&
             cJSON_AddNumberToObject(o, "n_layers", m->n_layers) &&
             cJSON_AddNumberToObject(o, "n_heads", m->n_heads) &&
             cJSON_AddItemToObject(o, "trained_tokens", num_or_null(m->trained_tokens)) &&
             cJSON_AddItemToObject(o, "data_tokens", num_or_null(m->data_tokens));
    }
    ok = ok && (a = cJSON_AddArrayToObject(d, "runs"));
    for (int i = 0; ok && i < sh->n_runs; i++) {
        const al_show_run *r = &sh->runs[i];
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(a, o) && cJSON_AddNumberToObject(o, "id", r->id) &&
             cJSON_AddStringToObject(o, "kind", r->kind) &&
             cJSON_AddStringToObject(o, "status", r->status) &&
             cJSON_AddItemToObject(o, "model",
                                   r->model ? cJSON_CreateNumber(r->model) : cJSON_CreateNull()) &&
             cJSON_AddStringToObject(o, "started_at", r->started) &&
             cJSON_AddItemToObject(o, "seconds", num_or_null(r->seconds)) &&
             cJSON_AddNumberToObject(o, "warnings", r->n_warnings);
    }
    ok = ok && (a = cJSON_AddArrayToObject(d, "tables"));
    for (int i = 0; ok && i < sh->n_tables; i++) {
        const al_show_table *t = &sh->tables[i];
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(a, o) && cJSON_AddStringToObject(o, "name", t->name) &&
             cJSON_AddStringToObject(o, "type", t->is_view ? "view" : "table") &&
             cJSON_AddNumberToObject(o, "rows", t->rows) &&
             (!sh->run || cJSON_AddItemToObject(o, "run_rows",
                                                t->run_rows >= 0 ? cJSON_CreateNumber(t->run_rows)
                                                                 : cJSON_CreateNull()));
    }
    if (ok && sh->run) {
        cJSON *r = cJSON_AddObjectToObject(d, "run"), *w;
        cJSON *cfg = sh->config_json ? cJSON_Parse(sh->config_json) : NULL;
        ok =
            r && cJSON_AddNumberToObject(r, "id", sh->run) &&
            cJSON_AddItemToObject(r, "options", cfg ? cfg : cJSON_CreateNull()) &&
            cJSON_AddItemToObject(r, "error",
                                  sh->error ? cJSON_CreateString(sh->error) : cJSON_CreateNull()) &&
            (w = cJSON_AddArrayToObject(r, "warnings"));
        for (int i = 0; ok && i < sh->n_warnings; i++)
            ok = cJSON_AddItemToArray(w, cJSON_CreateString(sh->warnings[i]));
    }
    char *txt = ok ? al_json_print(1, d) : NULL;
    cJSON_Delete(d);
    if (!txt) return -1;
    printf("%s\n", txt);
    free(txt);
    return 0;
}

static int run_db_show(int argc, char **argv) {
    const char *pos[2];
    int npos = 0;
    al_err e;
    g_json = 0;
    if (al_flags_parse(show_flags, argc, argv, pos, 2, &npos, &e) != 0)
        return al_cli_usage(&al_cmd_db_show, &e);
    if (npos < 1) {
        al_errf(&e, "give the database file (and a run id to show one run)");
        return al_cli_usage(&al_cmd_db_show, &e);
    }
    long run = 0;
    if (npos == 2) {
        char *end;
        run = strtol(pos[1], &end, 10);
        if (*end || run < 1) {
            al_errf(&e, "RUN must be a run id (a whole number >= 1), not '%s'", pos[1]);
            return al_cli_usage(&al_cmd_db_show, &e);
        }
    }
    al_store *s;
    al_show sh;
    if (al_store_open_readonly(pos[0], &s, &e) != 0) {
        fprintf(stderr, "attnlab: %s\n", e.msg);
        return 1;
    }
    int rc = al_store_show(s, run, &sh, &e);
    al_store_close(s);
    if (rc != 0) {
        fprintf(stderr, "attnlab: %s\n", e.msg);
        return 1;
    }
    if (g_json)
        rc = print_json(pos[0], &sh);
    else
        print_text(pos[0], &sh);
    al_show_free(&sh);
    if (rc != 0) {
        fprintf(stderr, "attnlab: out of memory\n");
        return 1;
    }
    return 0;
}
