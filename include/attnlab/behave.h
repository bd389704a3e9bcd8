/* behave.h -- set-up shared by the analysis commands (circuits, scores,
 * ablate, prune, patch, paths): load a model directory (weights keyed by their sha256,
 * the tokenizer if present, an optional head mask), open the database,
 * file the model and start a run. The commands then only do their
 * analysis.
 *
 * The commands themselves are descriptors of the registry (registry.h),
 * run by its driver. */
#ifndef ATTNLAB_BEHAVE_H
#define ATTNLAB_BEHAVE_H

#include <stdint.h>
#include "attnlab/args.h"
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/registry.h"
#include "attnlab/scores.h"
#include "attnlab/store.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

typedef struct al_behave {
    al_model m;
    const char *dir; /* the model directory (borrowed) */
    int loaded;
    al_tokenizer *tok; /* NULL if the directory has none */
    char sha[65]; /* of model.safetensors */
    unsigned char *off; /* (L*H) heads off by the mask; all 0 without */
    int n_off;
    al_store *st;
    int64_t model_id, run_id; /* run_id 0 until a run is begun */
    int train_T; /* sequence length it was trained on (state.json) */
    struct al_circuit_run *circ; /* --circuit: m.circuit points into it; NULL without */
    const char *circ_path; /* --circuit's file (borrowed); NULL without */
    const char *iv_json; /* --intervene: the file as parsed (borrowed), recorded in the
                              run's config by al_behave_begin; NULL without */
} al_behave;

/* Open a model for a run in two steps, so that a command checks its
 * input against the loaded model before any run exists (patch, paths:
 * the task): al_behave_load opens the database and loads model and mask (on
 * failure everything is released); al_behave_begin files the model and
 * begins the run (on failure b stays open: al_behave_close it). */
int al_behave_load(al_behave *b, const char *model_dir, const char *mask_path, const char *db,
                   al_err *e);
int al_behave_begin(al_behave *b, const char *kind, const al_flag *flags, al_err *e);
/* The BOS id for probes: <|endoftext|> of the tokenizer, else -1. */
int al_behave_bos(const al_behave *b);
/* Load a validation token file and pick the window length: the length
 * the model was trained on (n_ctx unless --seq-len said less), or fewer if
 * the file is short (needs at least 6 tokens). */
int al_behave_tokens(const al_behave *b, const char *path, al_tokens *d, int *T, al_err *e);
/* --circuit FILE --fill corrupted|mean of a batch analysis (scores,
 * ablate; circuit_run.h): load the circuit for b's model and run every
 * later forward of b.m with it. A mean fill takes its means over the
 * command's validation windows (val, T, batches × batch; val NULL: a mean
 * fill is refused). Call between al_behave_load and al_behave_begin, so
 * a bad file leaves no run behind. 0, or −1 with e (b unchanged). */
int al_behave_circuit(al_behave *b, const char *path, const char *fill, const al_tokens *val, int T,
                      int batches, int batch, al_err *e);
/* Warn on stderr if a probe of len tokens reaches positions the model
 * never trained on (its numbers there say little about the model). */
void al_behave_warn_probe(const al_behave *b, int len);
/* What a probe is made of (--probe-tokens of train and of every command
 * that draws a probe or builds the induction task; scores.h's
 * al_probe_src), loaded:
 *   NULL, "all"     random ids over the whole vocabulary (src() NULL);
 *   "seen"          random ids among those in the training token file:
 *                   train_data when given, else the one model_dir's
 *                   state.json names;
 *   FILE.bin        random ids among those in a token file;
 *   "text"          windows of held-out text: val_data when given, else
 *                   the validation file model_dir's state.json names;
 *   "text:FILE.bin" windows of that token file's text.
 * n_ids: the ids the probe can hold (d_vocab for "all"); what: a phrase
 * for the printout ("the 312 token ids that occur in X", "windows of the
 * text of X (86858 tokens)"). */
typedef struct al_probe_load {
    al_probe_src src; /* points into this struct */
    int random_all; /* "all": al_probe_load_src gives NULL */
    unsigned char *allowed; /* owned, or NULL */
    al_tokens text; /* owned (zeroed unless a text probe) */
    int n_ids;
    char what[AL_PATH_MAX + 96];
    /* "all" on a model whose training data is known: ids of the vocabulary
     * that data never holds (their embeddings never trained, so a head
     * cannot attend by them and the probe's scores shrink by about their
     * share), and the warning when that share passes AL_PROBE_UNSEEN_WARN */
    int n_unseen;
    char warn[AL_WARN_LEN];
} al_probe_load;
/* Above this share of never-seen ids, "all" warns (a byte-level BPE of
 * 512 pieces over ASCII text leaves ~40% of its ids unseen, halving the
 * induction score; a 2048-piece one ~10%). */
#define AL_PROBE_UNSEEN_WARN 0.2
/* 0, or -1 with e set (a model without state.json naming the file, an
 * unreadable or non-token file, ids past d_vocab, an unknown "text:" form);
 * *pl is zeroed on failure. Free with al_probe_load_free. For "all", the
 * training data (train_data, else the one model_dir's state.json names)
 * is read when it can be, to fill n_unseen and warn; when it cannot, both
 * stay empty and nothing fails. */
int al_probe_load_open(al_probe_load *pl, const char *which, const char *model_dir,
                       const char *train_data, const char *val_data, int d_vocab, al_err *e);
/* The warning of an analysis that ranks or averages over every token id
 * (circuits' skip-trigrams and copying scores, an SAE feature's logit
 * effects), when more than AL_PROBE_UNSEEN_WARN of the vocabulary never
 * occurs in the training data model_dir's state.json names: those ids
 * keep their random initial embeddings, so what is ranked by them is
 * noise. `what` names what is ranked. Best effort: 0 (and warn empty)
 * when the data is unknown or the share is small; else 1 with warn set. */
int al_unseen_ids_warning(const char *model_dir, int d_vocab, const char *what, char *warn,
                          size_t cap);
/* 0 if --probe-tokens which fits a run of the pair task `task` (NULL: a
 * run without one, e.g. attribute --data): anything for induction, all
 * or a text for the names tasks (their stories), only all otherwise;
 * else -1 with e. Checked with the arguments, before anything loads. */
int al_probe_tokens_check(const char *which, const char *task, al_err *e);
/* The source to hand to the analyses: NULL for "all" (so the probe is the
 * random one of earlier versions, id for id), else &pl->src. */
const al_probe_src *al_probe_load_src(const al_probe_load *pl);
void al_probe_load_free(al_probe_load *pl);
/* The run's document (registry.h): "model" (the directory), "sha256",
 * "db", "model_id" of b into doc, and with --circuit "circuit_run":
 * {"file", "what"} (the circuit's description). 0, or −1 when out of
 * memory. */
struct cJSON;
int al_behave_json(struct cJSON *doc, const al_behave *b, const char *db);
/* Mark the run failed (if begun) with e's message; e is kept. */
void al_behave_fail(al_behave *b, const al_err *e);
void al_behave_close(al_behave *b);

/* ---- printing shared by the analysis commands ---- */

/* s left-aligned in a column of w characters (UTF-8 characters, not
 * bytes: token strings hold "␣"). */
void al_print_col(const char *s, int w);
/* Indices 0..n-1 sorted by |v| descending, NaN last, ties by index
 * (stable); malloc'd (the caller frees), NULL when out of memory. */
int *al_by_magnitude(const double *v, int n);

#endif
