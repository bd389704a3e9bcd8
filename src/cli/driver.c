/* driver.c -- the run driver of the analysis commands (registry.h): one
 * lifecycle for all of them. Options are checked before anything is
 * opened; the driver loads the model and database, lets the command check
 * its other inputs against the model (prepare) before it begins the run
 * row, catches SIGINT/SIGTERM around the commands that poll the stop
 * flag, decides whether a progress line is drawn, raises, stores and
 * (under --strict) refuses on the gap/effect warnings, stores the run in
 * one transaction, and writes the --json document. */
#include "attnlab/registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "attnlab/behave.h"
#include "attnlab/gemm.h"
#include "attnlab/json.h"
#include "attnlab/intervene.h"
#include "attnlab/stop.h"
#include "attnlab/store.h"

/* The driver's own flags, shared by every analysis (the output side of
 * the where group). They are not the command's options, so they are not
 * part of the run's stored config. */
static int g_json, g_progress, g_strict;
static al_flag drive_flags[] =
    {{"json", AL_BOOL, &g_json, NULL,
      "print one JSON document on stdout (schema attnlab.<command>/1, docs/json.md) instead of "
      "the text",
      0, 0},
     {"progress", AL_BOOL, &g_progress, NULL,
      "a progress line on stderr even when it is not a terminal", 0, 0},
     {"strict", AL_BOOL, &g_strict, NULL,
      "refuse (exit 1, nothing stored) when a gap/effect warning is raised", 0, 0},
     AL_FLAGS_END};

/* The one place gap/effect warnings of the computed state (a's warnings
 * accessor) are raised: each printed on stderr as "attnlab: warning:
 * ...", kept in d->warn for the run's rows and the --json document. Under
 * --strict a warning refuses the run (no run row exists yet; a begun one
 * would be deleted with every row of it, b->run_id becoming 0, so a later
 * al_behave_fail touches nothing) and −1 comes back with e saying why. 0
 * otherwise. */
static int drive_warnings(al_drive *d, al_behave *b, const void *state, al_err *e) {
    const al_warnings *w = d->an && d->an->warnings ? d->an->warnings(state) : NULL;
    if (!w || w->n == 0) return 0;
    for (int i = 0; i < w->n; i++) {
        /* under --strict the refusal below is the one line said */
        if (!d->strict && !d->quiet) fprintf(stderr, "attnlab: warning: %s\n", w->msg[i]);
        al_warnings_add(&d->warn, "%s", w->msg[i]);
    }
    if (!d->strict) return 0;
    al_err e2;
    if (b->st && b->run_id && al_store_run_discard(b->st, b->run_id, &e2) == 0) b->run_id = 0;
    /* the prepare phase's warnings (not printed yet under --strict) count too */
    int more = d->warn.n - 1;
    if (more == 0) return al_errf(e, "refused under --strict (nothing stored): %s", w->msg[0]);
    return al_errf(e,
                   "refused under --strict (nothing stored): %s (and %d more warning%s; run "
                   "without --strict to see them)",
                   w->msg[0], more, more == 1 ? "" : "s");
}

void al_drive_warn(al_drive *d, const char *msg) {
    if (msg && *msg) al_warnings_add(&d->warn, "%s", msg);
}

/* d->warn as rows of the run (run_warnings), inside its transaction. */
static int store_warnings(const al_drive *d, al_behave *b, al_err *e) {
    return d->warn.n ? al_store_put_warnings(b->st, b->run_id, b->model_id, &d->warn, e) : 0;
}

/* "warnings": [...] of the --json document (also when empty, so a reader
 * need not test for the key). */
static int json_warnings(const al_drive *d) {
    cJSON *arr = cJSON_AddArrayToObject(d->doc, "warnings");
    if (!arr) return -1;
    for (int i = 0; i < d->warn.n; i++)
        if (!cJSON_AddItemToArray(arr, cJSON_CreateString(d->warn.msg[i]))) return -1;
    return 0;
}

int al_drive_file(al_drive *d, const char *path, const void *data, size_t n, al_err *e) {
    al_atomic_file *f = al_grow(d->files, &d->cap_files, d->n_files, sizeof *f, 2, e);
    if (!f) return -1;
    d->files = f;
    f += d->n_files;
    if (al_atomic_open(f, path, e)) return -1;
    int ok = fwrite(data, 1, n, f->f) == n;
    if (!ok) al_errf(e, "cannot write %s: %s", path, strerror(errno));
    if (al_atomic_sync(f, ok, ok ? e : NULL)) return -1;
    d->n_files++;
    return 0;
}

int al_drive_mkdir(al_drive *d, const char *path, al_err *e) {
    if (al_is_dir(path)) return 0;
    if (al_mkdir_p(path, e)) return -1;
    snprintf(d->made_dir, sizeof d->made_dir, "%s", path);
    return 0;
}

/* The run's files into place (committed), or removed (failed). */
static int drive_files_end(al_drive *d, int committed, al_err *e) {
    int rc = 0;
    for (int i = 0; i < d->n_files; i++)
        if (!committed)
            unlink(d->files[i].tmp_path);
        else if (rc == 0 && al_atomic_rename(&d->files[i], e))
            rc = al_err_prefix(e, "run stored, but its file is missing");
        else if (rc != 0)
            unlink(d->files[i].tmp_path);
    if (!committed && d->made_dir[0]) rmdir(d->made_dir);
    free(d->files);
    d->files = NULL;
    d->n_files = d->cap_files = 0;
    d->made_dir[0] = 0;
    return rc;
}

/* Remove the database file db (and SQLite's side files) that this run
 * created, after it was refused. */
static void remove_db(const char *db) {
    static const char *const side[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4; i++) {
        char p[AL_PATH_MAX + 16];
        if (snprintf(p, sizeof p, "%s%s", db, side[i]) < (int)sizeof p) unlink(p);
    }
}

/* The run's document: the driver's keys, the analysis's doc, and under
 * --json the warnings. 0, or -1 with e. */
static int drive_doc(const al_analysis *a, void *args, void *st, al_drive *d, al_behave *b,
                     al_err *e) {
    const al_an_where *w = args;
    if (al_behave_json(d->doc, b, w->db) ||
        !cJSON_AddNumberToObject(d->doc, "run", (double)b->run_id))
        return al_errf(e, "out of memory");
    if (a->doc(args, st, d, e)) return -1;
    if (d->json && json_warnings(d)) return al_errf(e, "out of memory");
    if (!d->print_json) return 0;
    free(d->json_text);
    d->json_text = al_json_print(1, d->doc);
    return d->json_text ? 0 : al_errf(e, "out of memory printing the --json document");
}

/* The phases of a (registry.h), from the loaded model to the printed
 * result. Returns al_drive_run's codes. */
static int drive_phases(const al_analysis *a, void *args, const al_flag *flags, al_drive *d,
                        int64_t *run_id, al_err *e) {
    const al_an_where *w = args;
    al_behave b;
    void *st = a->state_size ? al_calloc(1, a->state_size, e) : NULL;
    if (a->state_size && !st) return 1;
    al_set_threads(w->threads);
    /* a database this run creates is removed again when the run is
     * refused before its run row: a refusal leaves no file behind */
    int db_new = w->db && !al_file_exists(w->db);
    if (al_behave_load(&b, w->model, w->mask, w->db, e)) {
        free(st);
        if (db_new) remove_db(w->db);
        return 1;
    }
    d->b = &b;
    int rc = 1, prepared = 0;
    al_intervention iv = {0};
    if (a->check_model && a->check_model(args, &b.m.cfg, e)) goto out;
    /* the intervention's hooks come first, so an analysis's own hooks at
     * the same point (patches, replacements) act on what it left */
    if (w->intervene) {
        if (al_intervention_load(w->intervene, &b.m.cfg, &iv, e) ||
            al_intervention_attach(&b.m, &iv, e))
            goto out;
        b.iv_json = iv.json;
        if (!d->json && !d->quiet)
            fprintf(stderr, "attnlab: note: intervention %s: %d op%s applied in every forward\n",
                    w->intervene, iv.n, iv.n == 1 ? "" : "s");
    }
    if (a->prepare && a->prepare(args, st, d, e)) {
        rc = a->stops && al_stop ? 130 : 1; /* a signal while preparing: no run */
        goto out;
    }
    prepared = 1;
    /* al_drive_warn's, now that the run goes ahead; under --strict only
     * once it is not refused, so a refusal is one line */
    int n_prep = d->warn.n;
    for (int i = 0; !d->strict && !d->quiet && i < n_prep; i++)
        fprintf(stderr, "attnlab: warning: %s\n", d->warn.msg[i]);
    /* Under --strict the run row waits for the warnings, so that a refusal
     * leaves the database as it was, byte for byte (a begun and discarded
     * run would still move its header's change counter); the price is that
     * a strict run that fails in its compute phase leaves no failed row. */
    if (!d->strict && al_behave_begin(&b, a->name, flags, e)) goto out;
    if (a->compute(args, st, d, e) || drive_warnings(d, &b, st, e) ||
        (d->strict && al_behave_begin(&b, a->name, flags, e))) {
        al_behave_fail(&b, e);
        rc = a->stops && al_stop ? 130 : 1;
        goto out;
    }
    for (int i = 0; d->strict && !d->quiet && i < n_prep; i++)
        fprintf(stderr, "attnlab: warning: %s\n", d->warn.msg[i]);
    /* the document inside the run's transaction, before its commit: a run
     * whose document cannot be made (out of memory) is failed, never
     * stored while the command says it failed */
    if (al_store_tx_begin(b.st, e) || store_warnings(d, &b, e) ||
        (a->store && a->store(args, st, d, e)) || drive_doc(a, args, st, d, &b, e) ||
        al_store_run_finish(b.st, b.run_id, e)) {
        al_behave_fail(&b, e);
        rc = a->stops && al_stop ? 130 : 1;
        goto out;
    }
    *run_id = b.run_id;
    if (drive_files_end(d, 1, e)) goto out;
    /* the text, drawn from the document alone */
    if (!d->json) a->text(d->doc);
    rc = 0;
out:
    drive_files_end(d, 0, NULL);
    if (rc != 0 && prepared && a->failed) a->failed(args, st, e);
    if (a->release && st) a->release(st);
    free(st);
    d->b = NULL;
    int begun = b.run_id != 0;
    al_intervention_detach(&b.m, &iv);
    al_behave_close(&b);
    al_intervention_free(&iv);
    if (rc != 0 && !begun && db_new) remove_db(w->db);
    return rc;
}

int al_drive_run(const al_analysis *a, void *args, const al_flag *flags, al_drive *d,
                 int64_t *run_id, al_err *e) {
    const al_an_where *w = args;
    if (w->db && (!*w->db || !strcmp(w->db, ":memory:"))) /* SQLite would keep nothing */
        return al_errf(e, "no database file given (--db '%s'): name a file, e.g. --db results.db",
                       w->db),
               2;
    if (a->check && a->check(args, flags, e)) return 2;
    al_precision prec = AL_PREC_F32;
    if (w->precision && al_precision_parse(w->precision, &prec))
        return al_errf(e, "--precision must be f32 or bf16 (got '%s')", w->precision), 2;
    if (prec != AL_PREC_F32 && al_gemm_set_precision(prec, e)) return 2;
    char schema[64];
    snprintf(schema, sizeof schema, "attnlab.%s/1", a->name);
    { /* the run's document (the text is drawn from it) */
        cJSON_Delete(d->doc);
        d->doc = cJSON_CreateObject();
        if (!d->doc || !cJSON_AddStringToObject(d->doc, "schema", schema))
            return al_errf(e, "out of memory"), 1;
    }
    int64_t run = 0;
    d->an = a;
    memset(&d->warn, 0, sizeof d->warn);
    if (a->stops) al_stop_catch();
    d->t_start = al_now();
    if (prec != AL_PREC_F32)
        al_drive_warn(d, "the products' inputs are rounded to bfloat16 (--precision bf16): "
                         "exact identities (path terms summing to the logits, patching a "
                         "run with itself) hold only to that rounding");
    int rc = drive_phases(a, args, flags, d, &run, e);
    if (prec != AL_PREC_F32) al_gemm_set_precision(AL_PREC_F32, NULL);
    if (a->stops) al_stop_release();
    if (rc == 0 && run_id) *run_id = run;
    return rc;
}

/* The command's flags and the driver's in one table for the parser. */
#define MAX_FLAGS 64

/* One parse and run. The flags are put back as they were before it (their
 * defaults) on the way out: a process that runs analyses again and again
 * (the tests) must not inherit the options of the call before, whose
 * strings belonged to that call's argv. */
int al_drive_main(const al_analysis *a, int argc, char **argv) {
    al_err e;
    al_flag all[MAX_FLAGS];
    al_flag_val saved[MAX_FLAGS];
    int n = 0, nc, rc;
    for (const al_flag *f = a->cmd->flags; f->name && n < MAX_FLAGS - 4; f++) all[n++] = *f;
    nc = n;
    for (const al_flag *f = drive_flags; f->name; f++) all[n++] = *f;
    all[n] = (al_flag)AL_FLAGS_END;
    al_flags_save(all, saved);
    if (al_flags_parse(all, argc, argv, NULL, 0, NULL, &e) != 0)
        rc = al_cli_usage(a->cmd, &e);
    else {
        for (int i = 0; i < nc; i++) a->cmd->flags[i].seen = all[i].seen;
        al_drive d = {.an = a,
                      .json = g_json,
                      .print_json = g_json,
                      .progress = g_progress || isatty(STDERR_FILENO),
                      .strict = g_strict};
        rc = al_drive_run(a, a->tmpl, a->cmd->flags, &d, NULL, &e);
        if (rc == 0 && d.json_text) printf("%s\n", d.json_text);
        free(d.json_text);
        cJSON_Delete(d.doc);
        if (rc == 130) /* interrupted: the message, and the signal's exit code */
            al_cli_error(&e);
        else
            rc = rc == 2 ? al_cli_usage(a->cmd, &e) : rc ? al_cli_error(&e) : 0;
    }
    al_flags_restore(all, saved);
    for (int i = 0; i < nc; i++) a->cmd->flags[i].seen = all[i].seen;
    return rc;
}

void al_drive_help(FILE *f, const al_analysis *a) {
    al_command_help(f, a->cmd);
    for (const al_flag *fl = drive_flags; fl->name; fl++) {
        char left[64];
        snprintf(left, sizeof left, "--%s", fl->name);
        fprintf(f, "  %-26s %s\n", left, fl->help);
    }
}
