/* data.h -- token files (llm.c format) and batches.
 *
 * File: 256 int32 little-endian header words (magic 20240520, version 1,
 * token count, rest 0), then count uint16 tokens. Batches are windows of
 * T+1 consecutive tokens at seeded random offsets (training) or at fixed
 * evenly spaced offsets (validation, so every evaluation sees the same
 * tokens). */
#ifndef ATTNLAB_DATA_H
#define ATTNLAB_DATA_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/util.h"

#define AL_TOKENS_MAGIC 20240520
#define AL_TOKENS_VERSION 1

typedef struct al_tokens {
    uint16_t *tok;
    size_t n;
    int max_id; /* largest id present */
} al_tokens;

/* Loads and validates (magic, version, count matches file size). */
int al_tokens_load(const char *path, al_tokens *out, al_err *e);
/* Written atomically. Ids must be < 65536. */
int al_tokens_save(const char *path, const int *ids, size_t n, al_err *e);
void al_tokens_free(al_tokens *t);
/* Flags (d_vocab bytes, malloc'd: the caller frees) marking the ids that
 * occur in t; *n_present (may be NULL) gets how many. NULL with e set when
 * out of memory or when t holds an id >= d_vocab (a token file of another
 * vocabulary). */
unsigned char *al_tokens_present(const al_tokens *t, int d_vocab, int *n_present, al_err *e);
/* Hold out the last share frac of train's tokens as val (a copy; train
 * keeps the rest), for runs given one token file. name is the file, for
 * the message. 0, or −1 with e (val untouched) when either part would
 * have fewer than 2 tokens or out of memory. */
int al_tokens_hold_out(al_tokens *train, double frac, const char *name, al_tokens *val, al_err *e);

/* Fill inputs/targets (B,T) from a random window per row. Needs n > T. */
int al_batch_random(const al_tokens *d, int B, int T, al_rng *rng, int *inputs, int *targets,
                    al_err *e);
/* Fill validation batch k of n_batches: windows evenly spread over the
 * file, deterministic. */
int al_batch_fixed(const al_tokens *d, int B, int T, int k, int n_batches, int *inputs,
                   int *targets, al_err *e);

#endif
