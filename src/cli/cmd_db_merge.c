/* cmd_db_merge.c -- `attnlab db merge OUT.db IN.db...`: the finished runs
 * of several results databases (a sweep's tasks, two machines' work)
 * into one (merge.h). One summary line per input and a total on stdout;
 * a refusal or failure is one line and leaves OUT as it was (exit 1);
 * Ctrl-C or SIGTERM rolls the merge back and exits 130. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/args.h"
#include "attnlab/merge.h"
#include "attnlab/stop.h"

#define MAX_INPUTS 4096

static int g_progress;

static al_flag merge_flags[] = {{"progress", AL_BOOL, &g_progress, NULL,
                                 "progress lines on stderr (the default when stderr is a terminal)",
                                 0, 0},
                                AL_FLAGS_END};

static int run_db_merge(int argc, char **argv);

al_command al_cmd_db_merge = {
    "db merge",
    "merge the finished runs of results databases into one (OUT created if missing)",
    "OUT.db [IN.db...] [--progress]",
    "Copies every run with status done of each input, with all its rows, into\n"
    "OUT under new run ids; models are matched by sha256, so OUT has one models row\n"
    "per checkpoint. A run is known by its uid: merging an input again adds nothing.\n"
    "Running and failed runs are skipped. Each merged run points at a merge_sources\n"
    "row (the input's path, the time, the input's sweep_task row); a run that was\n"
    "merged before keeps its first origin. Inputs are opened read-only and are\n"
    "checked before OUT is touched: an SQLite file that passes quick_check, of this\n"
    "attnlab's schema version, with every table and column OUT has, and not OUT\n"
    "itself. The whole merge is one transaction: a refusal, an error, Ctrl-C or a\n"
    "kill leaves OUT as it was. With no input, OUT is only created, or migrated to\n"
    "this attnlab's schema (do that to an input an older attnlab wrote).",
    merge_flags,
    run_db_merge,
};

static void print_stats(const char *name, const al_merge_stats *s) {
    printf("%s %ld run%s added (%ld rows, %ld new model%s), %ld already present, %ld not done\n",
           name, s->runs_added, s->runs_added == 1 ? "" : "s", s->rows_added, s->models_added,
           s->models_added == 1 ? "" : "s", s->runs_present, s->runs_not_done);
}

static int run_db_merge(int argc, char **argv) {
    static const char *pos[MAX_INPUTS + 1];
    static al_merge_stats each[MAX_INPUTS];
    int npos = 0;
    al_err e;
    g_progress = 0;
    if (al_flags_parse(merge_flags, argc, argv, pos, MAX_INPUTS + 1, &npos, &e) != 0)
        return al_cli_usage(&al_cmd_db_merge, &e);
    if (npos < 1) {
        al_errf(&e, "give the output database and the inputs");
        return al_cli_usage(&al_cmd_db_merge, &e);
    }
    al_merge_opts o = AL_MERGE_OPTS_INIT;
    o.progress = g_progress || isatty(STDERR_FILENO);
    o.each = each;
    al_merge_stats st;
    double t0 = al_now();
    al_stop_catch();
    o.stop = &al_stop;
    int rc = al_store_merge(pos[0], pos + 1, npos - 1, &o, &st, &e);
    int sig = al_stop;
    al_stop_release();
    if (rc) {
        al_cli_error(&e);
        return sig ? 130 : 1;
    }
    char name[AL_PATH_MAX + 64];
    for (int i = 0; i < npos - 1; i++) {
        snprintf(name, sizeof name, "%s:", pos[i + 1]);
        print_stats(name, &each[i]);
    }
    snprintf(name, sizeof name, "merged %d database%s into %s in %.2f s:", st.inputs,
             st.inputs == 1 ? "" : "s", pos[0], al_now() - t0);
    print_stats(name, &st);
    return 0;
}
