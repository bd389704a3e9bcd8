/* registry.h -- the analysis registry: one descriptor per analysis command
 * (circuits, scores, ablate, prune, patch, paths, attribute, discover,
 * names, attnstats, sae, sae_features), and the option groups they share.
 *
 * main.c, `attnlab help`, the experiment loader and its runner walk
 * al_analyses[]; nothing generic compares command names. The run driver
 * (driver.c, below) owns the lifecycle every descriptor goes through, and
 * calls the descriptor's phases in this order:
 *
 *   check     the options alone                      (usage error: exit 2)
 *   --        driver: threads; open the database, load model and mask
 *   check_model  the options against the model's shape
 *   prepare   every other input, checked against the loaded model
 *   --        driver: begin the run row (runs.kind = name, config = flags)
 *   compute   the analysis, polling al_stop, with a progress line
 *   --        driver: raise the result's warnings (--strict refuses),
 *             open the run's one transaction, store the warnings
 *   store     the run's rows (and any file it writes)
 *   --        driver: mark the run done (commit); "run", "model", "sha256",
 *             "db" and "model_id" of the run's JSON document
 *   doc       the analysis's fields of that document: every number and
 *             name its text shows
 *   --        driver: under --json the document (with "warnings") is the
 *             output; else the text is drawn from the document alone:
 *   text      render the document as text on stdout
 *   release   free the state (always, also after a failure)
 *
 * A failure before the run row leaves the database as it was; after it,
 * the run is marked failed with the message (or deleted under --strict).
 *
 * Adding an analysis: its cmd_<name>.c defines an al_analysis; add it to
 * the table in registry.c. The store never spells the name: a reader that
 * looks for the analysis's newest run names a result family (.results). */
#ifndef ATTNLAB_REGISTRY_H
#define ATTNLAB_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/args.h"
#include "attnlab/gap.h"
#include "attnlab/store.h"
#include "attnlab/util.h"

struct cJSON;
struct al_behave; /* behave.h */
struct al_config; /* model.h */

/* ---- shared option groups ---- */

/* The where group: the first member of every analysis's argument struct.
 * data, mask and intervene are NULL when not given (and ignored by the
 * commands that take none). */
typedef struct al_an_where {
    const char *model, *db, *data, *mask;
    int threads;
    const char *precision; /* the products' inputs: NULL or "f32", or "bf16" (gemm.h) */
    const char *intervene; /* an intervention file (intervene.h): the driver attaches it */
} al_an_where;
#define AL_AN_WHERE_INIT                                                                           \
    { NULL, NULL, NULL, NULL, 0, NULL, NULL }

/* Which groups a descriptor's flag table holds (al_analysis.groups). */
enum {
    AL_GROUP_WHERE = 1, /* --model --db --threads (--mask where the command takes one) */
    AL_GROUP_TASK = 2, /* --task --pairs --probe-r --n --seed --batch --probe-tokens */
    AL_GROUP_CIRCUIT = 4 /* --circuit --fill */
};

/* The flags of each group, declared once; G is the command's static
 * argument struct (members w, and for the task group o (al_patch_opts)
 * and probe_tokens, for the circuit group circuit and fill). */
#define AL_FLAG_MODEL(G)                                                                           \
    { "model", AL_STR, &G.w.model, "DIR", "model directory (from attnlab train)", 1, 0 }
#define AL_FLAG_DB(G)                                                                              \
    {                                                                                              \
        "db", AL_STR, &G.w.db, "FILE",                                                             \
            "SQLite database to add the results to (created if missing)", 1, 0                     \
    }
#define AL_FLAG_MASK(G)                                                                            \
    { "mask", AL_STR, &G.w.mask, "FILE", "head mask (JSON): these heads are off throughout", 0, 0 }
#define AL_FLAG_INTERVENE(G)                                                                       \
    {                                                                                              \
        "intervene", AL_STR, &G.w.intervene, "FILE",                                               \
            "intervention file (JSON: zero, scale, add or set activations at hook points; "        \
            "docs/formats.md): applied in every forward of the model",                             \
            0, 0                                                                                   \
    }
#define AL_FLAG_THREADS(G)                                                                             \
    {"threads", AL_INT, &G.w.threads, "N", "threads (0 = default)", 0, 0}, {                           \
        "precision", AL_STR, &G.w.precision, "P",                                                      \
            "matrix-product inputs: f32 (default: exact identities such as path terms summing to the " \
            "logits hold) or bf16 (rounded to bfloat16, f32 accumulation; faster, identities only to " \
            "bf16 rounding)",                                                                          \
            0, 0                                                                                       \
    }
#define AL_FLAG_PROBE_TOKENS(G)                                                                        \
    {                                                                                                  \
        "probe-tokens", AL_STR, &G.probe_tokens, "WHICH",                                              \
            "what the probe's repeated half is: random ids over all (the vocabulary), seen (those in " \
            "the model's training data) or FILE.bin (those in a token file); or windows of held-out "  \
            "text: text (the model's validation file) or text:FILE.bin",                               \
            0, 0                                                                                       \
    }
#define AL_FLAGS_TASK_FILE(G)                                                                                                                                \
    {"task",                                                                                                                                                 \
     AL_STR,                                                                                                                                                 \
     &G.o.task,                                                                                                                                              \
     "T",                                                                                                                                                    \
     "induction, names, names-key (the corrupted name's first piece differs too) or file (with --pairs); names from held-out text with --probe-tokens text", \
     0,                                                                                                                                                      \
     0},                                                                                                                                                     \
    {                                                                                                                                                        \
        "pairs", AL_STR, &G.o.pairs, "FILE.jsonl",                                                                                                           \
            "task file: one {\"clean\", \"corrupted\", \"answer\", \"wrong\"} object per line", 0,                                                           \
            0                                                                                                                                                \
    }
#define AL_FLAGS_TASK_DRAW(G)                                                                           \
    {"probe-r",                                                                                         \
     AL_INT,                                                                                            \
     &G.o.probe_r,                                                                                      \
     "R",                                                                                               \
     "induction: random tokens per half (length 2R+1; 0: min(50, (n_ctx-1)/2))",                        \
     0,                                                                                                 \
     0},                                                                                                \
        {"n", AL_INT, &G.o.probe_n, "N", "induction, names: pairs", 0, 0},                              \
        {"seed", AL_U64, &G.o.probe_seed, "S", "induction, names: seed of the pairs", 0, 0},            \
        {"batch", AL_INT, &G.o.batch, "B", "pairs (sequences) per forward pass", 0, 0}, {               \
        "probe-tokens", AL_STR, &G.probe_tokens, "WHICH",                                               \
            "induction: what the halves are: random ids over all (the vocabulary), seen (those in the " \
            "model's training data) or FILE.bin (those in a token file); or windows of held-out text: " \
            "text (the model's validation file) or text:FILE.bin",                                      \
            0, 0                                                                                        \
    }
#define AL_FLAGS_CIRCUIT(G, FILL_HELP)                                                             \
    {"circuit",                                                                                    \
     AL_STR,                                                                                       \
     &G.circuit,                                                                                   \
     "FILE",                                                                                       \
     "run the model with only this circuit's edges (a file from attnlab discover)",                \
     0,                                                                                            \
     0},                                                                                           \
    {                                                                                              \
        "fill", AL_STR, &G.fill, "F", FILL_HELP, 0, 0                                              \
    }

/* The intervals' options (stats.h), for an argument struct whose o holds
 * ci_level, bootstrap and ci_seed. */
#define AL_FLAGS_CI(G)                                                                             \
    {"ci",                                                                                         \
     AL_FLOAT,                                                                                     \
     &G.o.ci_level,                                                                                \
     "LEVEL",                                                                                      \
     "the intervals' level (0.95): beside each averaged number its standard error and a "          \
     "bootstrap percentile interval over the items it averages",                                   \
     0,                                                                                            \
     0},                                                                                           \
        {"bootstrap",                                                                              \
         AL_INT,                                                                                   \
         &G.o.bootstrap,                                                                           \
         "N",                                                                                      \
         "bootstrap resamples of the items (500; 0: standard errors only)",                        \
         0,                                                                                        \
         0},                                                                                       \
    {                                                                                              \
        "ci-seed", AL_U64, &G.o.ci_seed, "S", "the resamples' seed (1)", 0, 0                      \
    }

/* The one set of group defaults. */
#define AL_PROBE_TOKENS_DEFAULT "all"
#define AL_FILL_DEFAULT "corrupted"

/* ---- the driver's state, handed to every run ---- */

struct al_analysis;
typedef struct al_drive {
    const struct al_analysis *an; /* set by al_drive_run */
    struct al_behave *b; /* the model, database and (after prepare) run */
    double t_start; /* al_now() when the driver began */
    int json; /* --json: print nothing on stdout (doc is the output) */
    int progress; /* a progress line on stderr (stderr a tty, or --progress) */
    int strict; /* --strict: refuse (exit 1, nothing stored) on a gap/effect warning */
    int quiet; /* no warning or note lines on stderr: they are in doc (the
                          * library, whose caller shows them its own way) */
    struct cJSON *doc; /* --json: the document ("schema" set); the run adds what its
                          * text shows, the driver adds "run" and "warnings" */
    int print_json; /* the CLI's --json: doc rendered into json_text before the commit */
    char *json_text; /* ... so that a document that cannot be printed fails the run
                          * (the caller prints and frees it) */
    al_warnings warn; /* the warnings raised by this run (the descriptor's accessor),
                          * stored with the run */
    al_atomic_file *files; /* the run's files (al_drive_file): synced under their
                          * temporary names until its rows are committed */
    int n_files, cap_files;
    char made_dir[AL_PATH_MAX]; /* the folder al_drive_mkdir made, or "" */
} al_drive;

/* ---- the descriptor ---- */

/* The experiment's files an analysis may take paths from (exp_paths). */
typedef struct al_exp_paths {
    const char *model_dir; /* this stage's model */
    const char *train_bin; /* the experiment's training and validation tokens */
    const char *val_bin;
} al_exp_paths;

/* What --data an experiment stage passes (the runner's --data rule). */
typedef enum {
    AL_EXP_DATA_NONE, /* no tokens (circuits; the pair tasks make their own) */
    AL_EXP_DATA_VAL, /* always the experiment's validation tokens */
    AL_EXP_DATA_ASKED /* when the analysis says "data": true (attribute) */
} al_exp_data;

typedef struct al_analysis {
    const char *name; /* the runs.kind, the experiment key, the --json schema; the
                          * command typed is cmd->name (the same word, or a group's
                          * subcommand: "sae train" for "sae") */
    al_command *cmd; /* summary, help, flags (bound to *tmpl) */
    unsigned groups; /* AL_GROUP_* its flag table holds */
    void *tmpl; /* the command's own static arguments */
    size_t size; /* of the argument struct (al_an_where first) */
    void (*init)(void *args); /* the defaults */
    /* The options alone (ranges, names, combinations), before anything is
     * opened: 0, or −1 with e (a usage error, exit 2). NULL: none. */
    int (*check)(const void *args, const al_flag *flags, al_err *e);
    /* The options against the model's shape c (n_layers, d_model,
     * n_heads, d_head, n_ctx; d_vocab may be 0: unknown), the refusals of
     * prepare that need nothing but the shape (a layer the model lacks, a
     * probe longer than its context): 0, or −1 with e. The driver calls
     * it before prepare; an experiment calls it, on each model's declared
     * shape, before its first stage runs and under --dry-run. NULL: none. */
    int (*check_model)(const void *args, const struct al_config *c, al_err *e);
    /* The phases (see the top of this file). Each gets the bound
     * argument struct, the command's state (state_size bytes, zeroed by
     * the driver; what it points to is freed by release) and the driver
     * (d->b: the loaded model and store). prepare, store and release may
     * be NULL; compute, doc and text may not. Each returns 0, or −1 with e
     * set. */
    size_t state_size;
    int (*prepare)(void *args, void *state, al_drive *d, al_err *e);
    int (*compute)(void *args, void *state, al_drive *d, al_err *e);
    int (*store)(void *args, void *state, al_drive *d, al_err *e);
    /* Fill d->doc (schema attnlab.<name>/1, docs/json.md) with everything
     * the text shows; the driver's keys are in it already. */
    int (*doc)(void *args, void *state, al_drive *d, al_err *e);
    /* The text on stdout, from the document alone (the CLI without
     * --json, an experiment's stage): no state, no arguments, so what is
     * printed is what --json and the library return. */
    void (*text)(const struct cJSON *doc);
    void (*release)(void *state);
    /* When the run fails after prepare succeeded (in any later phase, the
     * driver's included), with e its message: undo what the run wrote
     * outside the database that is worth nothing (an SAE folder without a
     * trained step), or add to e where the work it keeps is. NULL: none. */
    void (*failed)(void *args, void *state, al_err *e);
    /* The gap/effect warnings of the computed state (gap.h), or NULL: none. */
    const struct al_warnings *(*warnings)(const void *state);
    int stops; /* 1: polls al_stop; the driver catches SIGINT/SIGTERM */
    /* the experiment file (experiment.h) */
    int exp_list; /* "X": [{...}, ...] is one stage per object */
    al_exp_data exp_data;
    const char *const *exp_deny; /* keys the experiment sets beyond model, db, data, mask,
                                  * threads (NULL-terminated; NULL: none) */
    const char *const *exp_methods; /* non-NULL: "methods": [...] (default all of these) is
                                     * one stage per method, each with "method" set */
    /* The stage label ("patch (induction, head, denoise)") from the
     * analysis's object v (NULL when it was `true`). NULL: the name. */
    void (*exp_label)(const struct cJSON *v, char *buf, size_t cap);
    /* Paths beyond --data that the stage takes from the experiment (an
     * output directory under the model's, the training tokens), set on
     * the argument struct after its JSON options: 0, or −1 with e. The
     * strings it sets live in the argument struct. NULL: none. */
    int (*exp_paths)(void *args, const al_exp_paths *p, struct al_err *e);
    /* After exp_paths: the folder the stage writes (sae: its --out), and
     * the folder it reads, which an earlier stage must write or which must
     * exist (sae_features: --sae); the experiment checks the second
     * against the first before its first stage runs. NULL: none. */
    const char *(*exp_output)(const void *args);
    const char *(*exp_input)(const void *args);
    /* the store: the family of tables its runs fill that readers find by
     * the run's kind (store.h, "run kinds"; AL_RESULTS_NONE: none), told
     * to the store with its name by al_registry_setup */
    al_store_results results;
} al_analysis;

/* Every analysis, in `attnlab help` order; NULL-terminated. */
extern const al_analysis *const al_analyses[];
/* The analysis named name (a command / experiment key / runs.kind), or NULL. */
const al_analysis *al_analysis_of(const char *name);

/* Tell the store the run kind of each family of results (al_store_set_kind):
 * each analysis's name for its .results, AL_TRAIN_RUN_KIND for training
 * (train_record.h). The first call does it, later ones return its result;
 * safe from several threads. main.c and al_api_analysis call it before running
 * anything. 0, or -1 with e (two analyses claim one family: a bug). */
int al_registry_setup(al_err *e);

/* out[0..cap) = a's flag table bound to args (a struct of a->size bytes):
 * every dst moved from a->tmpl to args, nothing seen. -1 if cap is too
 * small or a flag points outside the struct. */
int al_analysis_flags(const al_analysis *a, void *args, al_flag *out, int cap, al_err *e);

/* ---- the run driver (driver.c) ---- */

/* The lifecycle on a bound argument struct (the phases above; d's doc
 * gets "schema": "attnlab.<name>/1"). Returns 0 (*run_id = the run, if
 * run_id), 1 on failure, 130 when SIGINT/SIGTERM stopped it (e
 * "interrupted"), or 2 when the options are refused (e set, nothing
 * opened). */
/* A warning the prepare phase raises itself (not from the computed state:
 * e.g. the probe's unseen ids, known when it loads): kept in d->warn, so
 * it is stored with the run and in the --json document like the state's,
 * and printed on stderr as "attnlab: warning: msg" once prepare has
 * succeeded (a refused run prints only its one-line error). Not a
 * --strict refusal (that is for the gap/effect warnings). msg NULL or "":
 * nothing. */
void al_drive_warn(al_drive *d, const char *msg);
/* For a store phase: a file that belongs to the run (a mask, a circuit).
 * Written and synced now under a temporary name, renamed to path once the
 * run's rows are committed, removed if the run fails: a failed run leaves
 * no file and a stored run never lacks its file. 0, or -1 with e. */
int al_drive_file(al_drive *d, const char *path, const void *data, size_t n, al_err *e);
/* mkdir -p for the run's files; the folder it makes is removed again
 * (when empty) if the run fails. 0, or -1 with e. */
int al_drive_mkdir(al_drive *d, const char *path, al_err *e);

int al_drive_run(const al_analysis *a, void *args, const al_flag *flags, al_drive *d,
                 int64_t *run_id, al_err *e);
/* `attnlab <name> ...`: parse argv (the command's flags and the driver's
 * --json, --progress, --strict) into a->tmpl, run, print the JSON
 * document under --json; prints the error or usage; returns the exit
 * code (0, 1, 2, 130). */
int al_drive_main(const al_analysis *a, int argc, char **argv);
/* `attnlab help <name>`: the command's help and the driver's flags. */
void al_drive_help(FILE *f, const al_analysis *a);

#endif
