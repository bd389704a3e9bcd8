/* train.h -- the trainer: batches, AdamW, validation, progress lines,
 * journalled checkpoints, exact resume, a stop on a non-finite loss, and
 * a clean stop (after saving) when asked to.
 *
 * The trainer knows nothing of command-line flags, databases, signals or
 * analyses. Its caller gives it plain options, optionally a stop flag (a
 * signal handler may set it) and an observer (called at every evaluation
 * and checkpoint; `attnlab train --db` records the curve through one).
 *
 *   al_train_opts o = al_train_opts_defaults();
 *   o.data = "tokens.bin"; o.out = "runs/a"; o.opts_json = "{...}";
 *   al_trainer *t;
 *   if (al_trainer_init(&t, &o, NULL, &e) != 0) fail(e);
 *   int stopped;
 *   int rc = al_trainer_run(t, &stopped, &e);
 *   al_trainer_free(t);
 *
 * Reproducibility: the data order comes from one al_rng that is used for
 * nothing else and is saved in state.json with AdamW's moments, so a run
 * resumed at step N continues bit-for-bit as if it had never stopped
 * (with the same thread count: sgemm's summation order depends on it).
 * Evaluation uses fixed windows and draws no random numbers, so when and
 * how often it happens never changes the weights. */
#ifndef ATTNLAB_TRAIN_H
#define ATTNLAB_TRAIN_H

#include <signal.h>
#include <stdint.h>

#include "attnlab/config.h"
#include "attnlab/model.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

/* Options. Strings are borrowed: they must stay valid until
 * al_trainer_free. Defaults are those of al_train_opts_defaults(). */
typedef struct al_train_opts {
    const char *data; /* train token file (required) */
    const char *val; /* validation token file; NULL: the tail of data */
    const char *tokenizer; /* tokenizer.json; NULL: byte-level (new runs only) */
    const char *out; /* model directory ("runs/default") */
    const char *resume; /* continue the checkpoint in this directory (NULL) */
    int force; /* overwrite a checkpoint already in out (0) */
    /* model shape of a new run (a resumed one keeps its own); defaults
     * from al_config_default() */
    int n_layers, d_model, n_heads, d_head, n_ctx, tied;
    const char *pos; /* positional embeddings, "standard" or "shortformer"
                            * (model.h, AL_POS_*); NULL: standard */
    const char *norm; /* LayerNorm: "none", "ln" or "lnpre" (model.h,
                            * AL_NORM_*); NULL: none */
    const char *biases; /* the biases: "none", "all" or letters of q, k, v,
                            * o, u (al_bias_spec_parse); NULL: none */
    double ln_eps; /* LayerNorm's eps (1e-5) */
    uint64_t seed; /* initialisation and data order */
    int steps; /* optimizer steps in total (1000) */
    int batch; /* sequences per step (16) */
    int seq_len; /* tokens per sequence; 0 = n_ctx (0) */
    double lr; /* peak learning rate (3e-3) */
    double min_lr_frac; /* the cosine decays to lr times this (0.1) */
    double beta1, beta2, eps; /* AdamW (0.9, 0.95, 1e-8) */
    double weight_decay; /* decoupled, not on embeddings (0.1) */
    double grad_clip; /* global gradient norm; 0 = off (1.0) */
    int warmup; /* linear warm-up steps (100) */
    int eval_every; /* evaluate every N steps; 0 = only at the end (100) */
    int eval_batches; /* validation batches per evaluation (8) */
    int ckpt_every; /* checkpoint every N steps; 0 = only at the end (500) */
    int threads; /* 0 = OMP_NUM_THREADS or all cores (0) */
    const char *precision; /* matmul inputs: "f32" or "bf16" (gemm.h); NULL: f32 */
    int stop_at; /* save and stop after this step, as a stop
                            * request would; 0 = never (0) */
    double val_fraction; /* tail share of data held out when val is NULL (0.05) */
    /* Saved verbatim as the "train" object of every state.json (a JSON
     * object; NULL saves "{}"). The CLI writes its flags here so that a
     * resume can read them back. */
    const char *opts_json;
    /* Polled between steps and between validation batches; non-zero
     * means save and stop (al_trainer_run then reports *stopped). A
     * signal handler may set it. NULL: never. */
    volatile sig_atomic_t *stop;
} al_train_opts;

/* train's norm option ("none", "ln", "lnpre": lower case, as the other
 * options' values) to AL_NORM_*: 0, or −1 for another word. */
int al_train_norm_parse(const char *s, int *norm);

/* The defaults noted above (those of `attnlab train`); data NULL. */
al_train_opts al_train_opts_defaults(void);

typedef struct al_trainer al_trainer;

/* One evaluation, as passed to on_eval. */
typedef struct al_train_eval {
    long step; /* optimizer steps done (0: before training) */
    double tokens; /* training tokens seen */
    double train_loss; /* loss of the last training batch; NaN at step 0 */
    double val_loss; /* mean over eval_batches fixed validation batches */
    double val_loss_se; /* its standard error over the batches' sequences (sd / sqrt n; NaN
                         * for fewer than two) */
    double lr; /* learning rate of the last step (of step 0 at step 0) */
    double seconds; /* since al_trainer_run started */
} al_train_eval;

/* Callbacks of al_trainer_run (any may be NULL). A callback returning
 * non-zero must fill e; training then stops with that error (what was
 * last checkpointed stays on disk). All run on the training thread.
 *
 * With on_eval set the curve starts at step 0: al_trainer_run evaluates
 * before the first step (and, on resume, again at the resumed step if
 * that checkpoint's evaluation was cut short or it is step 0). Without
 * it there is no such evaluation. */
typedef struct al_train_observer {
    void *ctx;
    /* Once, first thing in al_trainer_run. The place to set the curve
     * fields of al_trainer_state(t) (saved with every later checkpoint).
     * On resume they are, when on_start runs, as the checkpoint had
     * them; without on_start the trainer clears them at init, since a
     * sitting that nobody records has no curve to name. */
    int (*on_start)(void *ctx, al_trainer *t, al_err *e);
    /* After every completed evaluation. The observer may run the model
     * forward (al_trainer_model: activations are scratch) but must not
     * change its weights. */
    int (*on_eval)(void *ctx, al_trainer *t, const al_train_eval *ev, al_err *e);
    /* After every checkpoint al_trainer_run writes (al_trainer_state(t)
     * ->step is its step); not for the step-0 one of al_trainer_init. */
    int (*on_checkpoint)(void *ctx, al_trainer *t, al_err *e);
    /* Once, last thing in al_trainer_run, however it ended (also when
     * on_start failed): status 0 finished, 1 stopped on request (or at
     * stop_at), -1 failed with the error in *err. */
    void (*on_end)(void *ctx, al_trainer *t, int status, const al_err *err);
} al_train_observer;

/* Check the options, load the data and the tokenizer, then either build
 * a new model (refusing a directory that holds a checkpoint unless
 * force) and save its step-0 checkpoint -- so there always is one -- or
 * load the checkpoint in resume with its optimizer and data-order state.
 * Sets the thread count. obs (copied; NULL = none) is used by
 * al_trainer_run. Returns 0 with *out set (free with al_trainer_free),
 * or -1 with e set and *out NULL. Options invalid in themselves fail
 * before any file is read, and nothing is written (not even out's
 * directory) before the data and the model are ready. */
int al_trainer_init(al_trainer **out, const al_train_opts *o, const al_train_observer *obs,
                    al_err *e);

/* The whole run: evaluations, progress line and logs, checkpoints every
 * ckpt_every steps and at the end, until opts.steps. On a stop request
 * (or stop_at) saves, logs "stopped at step N" and sets *stopped = 1.
 * Returns 0 (finished or stopped), or -1 with e set: a failure, an
 * observer's error, or a non-finite loss/gradient (the message names the
 * step and the last good checkpoint, which is left as it was). Call it
 * once per trainer. */
int al_trainer_run(al_trainer *t, int *stopped, al_err *e);

/* One optimizer step on the next batch of the data-order RNG:
 * in, targets [batch, seq_len] -> forward, backward, clip, AdamW.
 * Returns 0 with *loss (the batch's mean loss before the update) and
 * *grad_norm (before clipping), or -1 with e set; a non-finite loss or
 * gradient is an error that leaves weights, optimizer and step as they
 * were. */
int al_trainer_step(al_trainer *t, double *loss, double *grad_norm, al_err *e);

/* Mean loss over eval_batches fixed validation windows [batch, seq_len],
 * and (se not NULL) its standard error over those windows' sequences:
 * each sequence's mean loss is one item (the sequences are the sample,
 * their positions are not independent). Returns 0 with *val_loss, 1 if
 * a stop request came meanwhile (no loss: evaluation touches neither
 * weights nor RNG, so cutting it short changes nothing), -1 with e set. */
int al_trainer_evaluate(al_trainer *t, double *val_loss, double *se, al_err *e);

/* Write a checkpoint of the current step to opts.out (journalled: a crash
 * leaves the old or the new one, whole). 0, or -1 with e set. */
int al_trainer_save(al_trainer *t, al_err *e);

/* Free everything; NULL is fine. Saves nothing. */
/* After al_trainer_run failed with e (not a stop): a new model folder
 * that holds only the step-0 checkpoint is removed when the trainer made
 * it, so a failure leaves nothing half-made; otherwise e gains where the
 * last checkpoint is, unless it already names the folder. Returns -1. */
int al_trainer_failed(al_trainer *t, al_err *e);
void al_trainer_free(al_trainer *t);

/* Accessors; pointers are the trainer's and live until al_trainer_free. */
al_model *al_trainer_model(al_trainer *t);
/* Mutable only for the curve fields (curve_run, curve_db: owned,
 * malloc'd); everything else is the trainer's. */
al_train_state *al_trainer_state(al_trainer *t);
const al_tokenizer *al_trainer_tokenizer(const al_trainer *t);
const char *al_trainer_dir(const al_trainer *t); /* opts.out */
int al_trainer_seq_len(const al_trainer *t); /* tokens per trained sequence */

#endif
