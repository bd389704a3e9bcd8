/* registry.h -- the analysis registry: one descriptor per analysis command
 * (circuits, scores, ablate, prune, patch, paths, attribute, discover,
 * names), and the option groups they share.
 *
 * main.c, `attnlab help`, the experiment loader and its runner walk
 * al_analyses[]; nothing generic compares command names. The run driver
 * (driver.c, below) owns the lifecycle every descriptor goes through:
 * parse, check the options (d->check), then the command's run, which
 * checks every input against the loaded model before it begins a run row,
 * runs with the stop flag and a progress reporter, stores its rows in one
 * transaction and prints text or fills the JSON document.
 *
 * Adding an analysis: its cmd_<name>.c defines an al_analysis; add it to
 * the table in registry.c. */
#ifndef ATTNLAB_REGISTRY_H
#define ATTNLAB_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/args.h"
#include "attnlab/gap.h"
#include "attnlab/util.h"

struct cJSON;
struct al_behave;   /* behave.h */

/* ---- shared option groups ---- */

/* The where group: the first member of every analysis's argument struct.
 * data and mask are NULL when not given (and ignored by the commands that
 * take none). */
typedef struct al_an_where {
    const char *model, *db, *data, *mask;
    int threads;
} al_an_where;
#define AL_AN_WHERE_INIT {NULL, NULL, NULL, NULL, 0}

/* Which groups a descriptor's flag table holds (al_analysis.groups). */
enum {
    AL_GROUP_WHERE = 1,   /* --model --db --threads (--mask where the command takes one) */
    AL_GROUP_TASK = 2,    /* --task --pairs --probe-r --n --seed --batch --probe-tokens */
    AL_GROUP_CIRCUIT = 4  /* --circuit --fill */
};

/* The flags of each group, declared once; G is the command's static
 * argument struct (members w, and for the task group o (al_patch_opts)
 * and probe_tokens, for the circuit group circuit and fill). */
#define AL_FLAG_MODEL(G) \
    {"model", AL_STR, &G.w.model, "DIR", "model directory (from attnlab train)", 1, 0}
#define AL_FLAG_DB(G)                                                                              \
    {"db", AL_STR, &G.w.db, "FILE", "SQLite database to add the results to (created if missing)", \
     1, 0}
#define AL_FLAG_MASK(G) \
    {"mask", AL_STR, &G.w.mask, "FILE", "head mask (JSON): these heads are off throughout", 0, 0}
#define AL_FLAG_THREADS(G) {"threads", AL_INT, &G.w.threads, "N", "threads (0 = default)", 0, 0}
#define AL_FLAG_PROBE_TOKENS(G)                                                                    \
    {"probe-tokens", AL_STR, &G.probe_tokens, "WHICH",                                             \
     "the ids the probe draws from: all (the vocabulary), seen (those in the model's training "    \
     "data) or FILE.bin (those in a token file)", 0, 0}
#define AL_FLAGS_TASK_FILE(G)                                                                      \
    {"task", AL_STR, &G.o.task, "T", "induction, names or file (with --pairs)", 0, 0},            \
    {"pairs", AL_STR, &G.o.pairs, "FILE.jsonl",                                                    \
     "task file: one {\"clean\", \"corrupted\", \"answer\", \"wrong\"} object per line", 0, 0}
#define AL_FLAGS_TASK_DRAW(G)                                                                      \
    {"probe-r", AL_INT, &G.o.probe_r, "R", "induction: random tokens per half (length 2R+1)", 0,   \
     0},                                                                                           \
    {"n", AL_INT, &G.o.probe_n, "N", "induction, names: pairs", 0, 0},                             \
    {"seed", AL_U64, &G.o.probe_seed, "S", "induction, names: seed of the pairs", 0, 0},           \
    {"batch", AL_INT, &G.o.batch, "B", "pairs (sequences) per forward pass", 0, 0},                \
    {"probe-tokens", AL_STR, &G.probe_tokens, "WHICH",                                             \
     "induction: the ids clean and corrupted tokens are drawn from: all (the vocabulary), seen "   \
     "(those in the model's training data) or FILE.bin (those in a token file)", 0, 0}
#define AL_FLAGS_CIRCUIT(G, FILL_HELP)                                                             \
    {"circuit", AL_STR, &G.circuit, "FILE",                                                        \
     "run the model with only this circuit's edges (a file from attnlab discover)", 0, 0},        \
    {"fill", AL_STR, &G.fill, "F", FILL_HELP, 0, 0}

/* The one set of group defaults. */
#define AL_PROBE_TOKENS_DEFAULT "all"
#define AL_FILL_DEFAULT "corrupted"

/* ---- the driver's state, handed to every run ---- */

struct al_analysis;
typedef struct al_drive {
    const struct al_analysis *an; /* set by al_drive_run */
    int json;            /* --json: print nothing on stdout; fill doc */
    int progress;        /* a progress line on stderr (stderr a tty, or --progress) */
    int strict;          /* --strict: refuse (exit 1, nothing stored) on a gap/effect warning */
    struct cJSON *doc;   /* --json: the document ("schema" set); the run adds what its
                          * text shows, the driver adds "run" and "warnings" */
    al_warnings warn;    /* the warnings raised by this run (al_drive_warnings), stored
                          * by al_drive_store_warnings */
} al_drive;

/* ---- the descriptor ---- */

/* What --data an experiment stage passes (the runner's --data rule). */
typedef enum {
    AL_EXP_DATA_NONE,    /* no tokens (circuits; the pair tasks make their own) */
    AL_EXP_DATA_VAL,     /* always the experiment's validation tokens */
    AL_EXP_DATA_ASKED    /* when the analysis says "data": true (attribute) */
} al_exp_data;

typedef struct al_analysis {
    const char *name;    /* the command, the runs.kind, the experiment key */
    al_command *cmd;     /* summary, help, flags (bound to *tmpl) */
    unsigned groups;     /* AL_GROUP_* its flag table holds */
    void *tmpl;          /* the command's own static arguments */
    size_t size;         /* of the argument struct (al_an_where first) */
    void (*init)(void *args); /* the defaults */
    /* The options alone (ranges, names, combinations), before anything is
     * opened: 0, or −1 with e (a usage error, exit 2). NULL: none. */
    int (*check)(const void *args, const al_flag *flags, al_err *e);
    /* Open, check every input against the loaded model, begin the run,
     * analyse, store in one transaction, then print the text (or fill
     * d->doc under --json). 0 (*run_id = the run), 1 on failure (e set; a
     * begun run is marked failed), 130 when SIGINT/SIGTERM stopped it (e
     * "interrupted"). Prints nothing on failure. */
    int (*run)(void *args, const al_flag *flags, al_drive *d, int64_t *run_id, al_err *e);
    /* The gap/effect warnings of a result (gap.h), or NULL: none. */
    const struct al_warnings *(*warnings)(const void *result);
    int stops;           /* 1: polls al_stop; the driver catches SIGINT/SIGTERM */
    /* the experiment file (experiment.h) */
    int exp_list;        /* "X": [{...}, ...] is one stage per object */
    al_exp_data exp_data;
    const char *const *exp_deny; /* keys the experiment sets beyond model, db, data, mask,
                                  * threads (NULL-terminated; NULL: none) */
    const char *const *exp_methods; /* non-NULL: "methods": [...] (default all of these) is
                                     * one stage per method, each with "method" set */
    /* The stage label ("patch (induction, head, denoise)") from the
     * analysis's object v (NULL when it was `true`). NULL: the name. */
    void (*exp_label)(const struct cJSON *v, char *buf, size_t cap);
} al_analysis;

/* Every analysis, in `attnlab help` order; NULL-terminated. */
extern const al_analysis *const al_analyses[];
/* The analysis named name (a command / experiment key / runs.kind), or NULL. */
const al_analysis *al_analysis_of(const char *name);

/* out[0..cap) = a's flag table bound to args (a struct of a->size bytes):
 * every dst moved from a->tmpl to args, nothing seen. -1 if cap is too
 * small or a flag points outside the struct. */
int al_analysis_flags(const al_analysis *a, void *args, al_flag *out, int cap, al_err *e);

/* ---- the run driver (driver.c) ---- */

/* The lifecycle on a bound argument struct: a->check, then a->run with
 * d (its doc gets "schema": "attnlab.<name>/1" and "run" here), then the
 * warnings. Returns run's code, or 2 when the options are refused (e
 * set, nothing opened). */
int al_drive_run(const al_analysis *a, void *args, const al_flag *flags, al_drive *d,
                 int64_t *run_id, al_err *e);
/* The one place gap/effect warnings of a result (a's warnings accessor)
 * are raised: each printed on stderr as "attnlab: warning: ...", kept in
 * d->warn for the run's rows and the --json document. A run calls it
 * after its analysis and before it stores anything (b: its set-up, the
 * run begun). Under --strict a warning refuses the run: the begun run and
 * every row of it are deleted (b->run_id becomes 0, so a later
 * al_behave_fail touches nothing) and −1 comes back with e saying why.
 * 0 otherwise. */
int al_drive_warnings(al_drive *d, struct al_behave *b, const void *result, al_err *e);
/* d->warn as rows of the run (run_warnings), inside the run's
 * transaction; nothing when none were raised. 0, or −1 with e. */
int al_drive_store_warnings(const al_drive *d, struct al_behave *b, al_err *e);
/* `attnlab <name> ...`: parse argv (the command's flags and the driver's
 * --json, --progress, --strict) into a->tmpl, run, print the JSON
 * document under --json; prints the error or usage; returns the exit
 * code (0, 1, 2, 130). */
int al_drive_main(const al_analysis *a, int argc, char **argv);
/* `attnlab help <name>`: the command's help and the driver's flags. */
void al_drive_help(FILE *f, const al_analysis *a);

#endif
