/* sweep.h -- a sweep of experiments declared in one experiment file
 * (docs/design.md §8, "Sweeps").
 *
 *   "sweep": {"seed": [1, 2, 3], "train.lr": [0.003, 0.01]}
 *
 * Each key is a key path into the file ("train.lr", "data.synthetic.seed",
 * "models[1].n_layers", "analyses.ablate[0]"; "seed" is the top-level
 * training seed of every model), each value a non-empty list of JSON
 * values. The tasks are the product of the lists, in the file's key
 * order with the last key varying fastest; task K (0-based) is the file
 * without its "sweep" and with each key path set to its value in task K,
 * loaded by the ordinary loader (experiment.h), which checks it as any
 * experiment file (an unknown last key is an error naming the path).
 *
 * What loading a sweep checks at once, each one line naming the key: a
 * key path that is not name(.name|[index])*, one that goes through an
 * object the file lacks or indexes past a list's end, a value that is
 * not a non-empty list, two paths of which one contains the other, a
 * path into "sweep" itself, more than AL_SWEEP_MAX_KEYS keys or more than
 * AL_SWEEP_MAX_TASKS tasks. */
#ifndef ATTNLAB_SWEEP_H
#define ATTNLAB_SWEEP_H

#include <stdint.h>

#include "attnlab/experiment.h"
#include "attnlab/util.h"

#define AL_SWEEP_MAX_TASKS 100000
#define AL_SWEEP_MAX_KEYS 32

typedef struct al_sweep al_sweep;

/* Read path (at most 16 MiB of JSON). 0 with *out = NULL if the file has
 * no "sweep" key; 0 with *out set (free with al_sweep_free) if it has a
 * valid sweep block; -1 with e set and *out = NULL otherwise (a file that
 * is not JSON, a bad sweep block). The rest of the file is not checked
 * here: al_sweep_task_load and al_sweep_check do that. */
int al_sweep_load(const char *path, al_sweep **out, al_err *e);
void al_sweep_free(al_sweep *s);

long al_sweep_n_tasks(const al_sweep *s);
int al_sweep_n_keys(const al_sweep *s);
const char *al_sweep_key(const al_sweep *s, int i); /* as written in the file */

/* Task k's values (0 <= k < n_tasks), in key order, malloc'd strings
 * owned by the struct (al_sweep_values_free; NULL pointers after an
 * error). setting: "key=value" of every swept key but "seed", joined by
 * spaces ("" if none); all: the same with "seed" too (what --list-tasks
 * prints); params_json: {"key": value, ...}, every swept key. A string
 * value is written bare when it is one plain word, else as JSON; numbers
 * in their shortest exact form. has_seed: "seed" is swept and its value
 * fits an int64 (then seed holds it). */
typedef struct al_sweep_values {
    char *setting, *all, *params_json;
    int has_seed;
    int64_t seed;
} al_sweep_values;
int al_sweep_values_of(const al_sweep *s, long k, al_sweep_values *v, al_err *e);
void al_sweep_values_free(al_sweep_values *v);

/* Task k as an experiment: the file with task k's values substituted,
 * loaded and checked by the ordinary loader (errors name the source as
 * "FILE (task K)"), its output folder set to BASE/task-K, where BASE is
 * base if not NULL (--out), else the file's "out". On error *out is NULL.
 * k out of range is an error too. */
int al_sweep_task_load(const al_sweep *s, long k, const char *base, al_experiment **out, al_err *e);

/* Check every value of every key: load the task that has this value and
 * the first value of every other key (the sum of the list lengths loads,
 * not their product). 0, or -1 with the first refusal in e. */
int al_sweep_check(const al_sweep *s, al_err *e);

/* Run every task as a child process, `/proc/self/exe experiment FILE
 * --task K --out BASE [--threads T] [--force]`, o->jobs at a time (sweep_jobs.c),
 * each child's output to BASE/task-K/log.txt, a progress line on stdout
 * per task started or ended. Children run in their own process groups;
 * SIGINT or SIGTERM to this process is forwarded to every running child
 * (they stop cleanly), no new task starts, and *interrupted is set once
 * all have ended. When every task succeeded, the task databases are
 * merged by `/proc/self/exe db merge BASE/sweep.db.tmp-PID IN...` (in
 * chunks of at most 512 inputs) and the result renamed to BASE/sweep.db.
 * 0, or -1 with e naming the failed tasks (or the failed merge). */
typedef struct al_sweep_jobs_opts {
    const char *file; /* the experiment file, as given */
    const char *base; /* the output folder (--out, else the file's "out") */
    int jobs; /* >= 1 */
    int threads; /* -1: the file's; else passed on as --threads */
    int force;
} al_sweep_jobs_opts;
int al_sweep_run_jobs(const al_sweep *s, const al_sweep_jobs_opts *o, int *interrupted, al_err *e);

#endif
