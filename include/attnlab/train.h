/* train.h -- the training loop: batches, AdamW, validation, progress,
 * journalled checkpoints, exact resume, stop on a non-finite loss, and
 * a clean stop on SIGINT/SIGTERM (after saving). */
#ifndef ATTNLAB_TRAIN_H
#define ATTNLAB_TRAIN_H

#include "attnlab/args.h"
#include "attnlab/model.h"
#include "attnlab/util.h"

typedef struct al_train_opts {
    const char *config;    /* JSON file of the same keys (applied under flags) */
    const char *data;      /* train token file */
    const char *val;       /* validation token file (optional) */
    const char *tokenizer; /* tokenizer.json (optional: byte-level) */
    const char *out;       /* model directory */
    const char *resume;    /* model directory to continue */
    const char *db;        /* SQLite file for training dynamics (optional) */
    int force;             /* overwrite an existing checkpoint in out */
    int n_layers, d_model, n_heads, d_head, n_ctx, tied;
    uint64_t seed;
    int steps, batch, seq_len;
    double lr, min_lr_frac, beta1, beta2, eps, weight_decay, grad_clip;
    int warmup, eval_every, eval_batches, ckpt_every, threads;
    int stop_at;           /* save and stop after this step (0 = never) */
    double val_fraction;   /* used when no --val: tail share of --data */
} al_train_opts;

/* Defaults used by `attnlab train`. */
al_train_opts al_train_defaults(void);
/* The flag table over *o (static storage; one table per process). */
al_flag *al_train_flags(al_train_opts *o);

/* Train as the options say. Returns 0 on success, -1 with e set. Sets
 * *interrupted if stopped by a signal (after saving). */
int al_train_run(al_train_opts *o, al_flag *flags, int *interrupted, al_err *e);

#endif
