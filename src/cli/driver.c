/* driver.c -- the run driver of the analysis commands (registry.h): one
 * lifecycle for all of them. Options are checked before anything is
 * opened; each run checks its inputs against the loaded model before it
 * begins a run row; the driver catches SIGINT/SIGTERM around the commands
 * that poll the stop flag, decides whether a progress line is drawn,
 * writes the --json document, and is the one place where gap/effect
 * warnings are raised, stored and, under --strict, refused (al_drive_warnings, called by each
 * run between its analysis and its store). */
#include "attnlab/registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "attnlab/stop.h"

/* The driver's own flags, shared by every analysis (the output side of
 * the where group). They are not the command's options, so they are not
 * part of the run's stored config. */
static int g_json, g_progress, g_strict;
static al_flag drive_flags[] = {
    {"json", AL_BOOL, &g_json, NULL,
     "print one JSON document on stdout (schema attnlab.<command>/1, docs/json.md) instead of "
     "the text", 0, 0},
    {"progress", AL_BOOL, &g_progress, NULL,
     "a progress line on stderr even when it is not a terminal", 0, 0},
    {"strict", AL_BOOL, &g_strict, NULL,
     "refuse (exit 1, nothing stored) when a gap/effect warning is raised", 0, 0},
    AL_FLAGS_END};

/* The gap/effect warnings of a finished result: print each as
 * "attnlab: warning: ...", store them with the run, and under --strict
 * refuse. The results carry no warnings yet (every descriptor's accessor
 * is NULL), so this raises none and returns 0; it is called where the
 * warnings belong, after the analysis and before the run is stored, so
 * adding them changes only this function. */
static int driver_warnings(const al_analysis *a, const void *result, const al_drive *d,
                           al_err *e) {
    (void)a, (void)result, (void)d, (void)e;
    return 0;
}

int al_drive_warnings(al_drive *d, const void *result, al_err *e) {
    return driver_warnings(d->an, result, d, e) ? -1 : 0;
}

int al_drive_run(const al_analysis *a, void *args, const al_flag *flags, al_drive *d,
                 int64_t *run_id, al_err *e) {
    if (a->check && a->check(args, flags, e)) return 2;
    char schema[64];
    snprintf(schema, sizeof schema, "attnlab.%s/1", a->name);
    if (d->json) {
        cJSON_Delete(d->doc);
        d->doc = cJSON_CreateObject();
        if (!d->doc || !cJSON_AddStringToObject(d->doc, "schema", schema))
            return al_errf(e, "out of memory"), 1;
    }
    int64_t run = 0;
    d->an = a;
    if (a->stops) al_stop_catch();
    int rc = a->run(args, flags, d, &run, e);
    if (a->stops) al_stop_release();
    if (rc == 0 && d->json && !cJSON_GetObjectItemCaseSensitive(d->doc, "run") &&
        !cJSON_AddNumberToObject(d->doc, "run", (double)run))
        rc = (al_errf(e, "out of memory"), 1);
    if (rc == 0 && run_id) *run_id = run;
    return rc;
}

/* The command's flags and the driver's in one table for the parser. */
#define MAX_FLAGS 64

int al_drive_main(const al_analysis *a, int argc, char **argv) {
    al_err e;
    al_flag all[MAX_FLAGS];
    int n = 0, nc;
    for (const al_flag *f = a->cmd->flags; f->name && n < MAX_FLAGS - 4; f++) all[n++] = *f;
    nc = n;
    for (const al_flag *f = drive_flags; f->name; f++) all[n++] = *f;
    all[n] = (al_flag)AL_FLAGS_END;
    if (al_flags_parse(all, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(a->cmd, &e);
    for (int i = 0; i < nc; i++) a->cmd->flags[i].seen = all[i].seen;
    al_drive d = {a, g_json, g_progress || isatty(STDERR_FILENO), g_strict, NULL};
    int rc = al_drive_run(a, a->tmpl, a->cmd->flags, &d, NULL, &e);
    if (rc == 0 && d.json) {
        char *s = cJSON_Print(d.doc);
        if (!s) rc = (al_errf(&e, "out of memory"), 1);
        else {
            printf("%s\n", s);
            free(s);
        }
    }
    cJSON_Delete(d.doc);
    if (rc == 130) { /* interrupted: the message, and the signal's exit code */
        al_cli_error(&e);
        return 130;
    }
    return rc == 2 ? al_cli_usage(a->cmd, &e) : rc ? al_cli_error(&e) : 0;
}

void al_drive_help(FILE *f, const al_analysis *a) {
    al_command_help(f, a->cmd);
    for (const al_flag *fl = drive_flags; fl->name; fl++) {
        char left[64];
        snprintf(left, sizeof left, "--%s", fl->name);
        fprintf(f, "  %-26s %s\n", left, fl->help);
    }
}
