/* intervene.h -- intervention files: operations on activations at named
 * hook points (docs/hooks.md), applied by engine hooks (hooks.h) in
 * every forward of the model they are attached to. `attnlab run
 * --intervene FILE` takes one; an analysis takes one the same way
 * (al_intervention_attach before its forwards, al_intervention_detach
 * after), and stores al_intervention.json with its run.
 *
 * The file (docs/formats.md):
 *   {"attnlab_intervention": 1,
 *    "ops": [{"hook": "blocks.1.attn.hook_pattern", "head": 3, "op": "zero"},
 *            {"hook": "blocks.0.hook_resid_post", "pos": 4, "op": "add",
 *             "vector": "steer.npy"},
 *            {"hook": "blocks.1.attn.hook_z", "head": 2, "op": "scale", "factor": 0.5},
 *            {"hook": "blocks.1.attn.hook_pattern", "head": 0, "pos": 3, "op": "set",
 *             "values": [1, 0, 0, 0]}]}
 * hook: a full hook name the forward runs; head: one head, for points
 * with a head axis (q, k, v, z, result, pattern; absent: every head);
 * pos: one (query) position (absent: every one; negative: from the end);
 * op: zero, scale (by factor), add or set (a vector along the point's
 * last axis: d_model, d_head, ...; for the pattern, the row over key
 * positions 0..pos, so pos >= 0 is required and entries after pos are
 * 0 for set, unchanged for add), given inline as "values" or as a 1-D
 * float32/float64 .npy file, "vector", relative to the file's folder.
 * "description" (a string) is free text. Ops apply in file order to
 * every sequence of the batch; each is an intervention (hooks.h
 * `intervened`: no backward through it), and a pattern row it touches
 * has its z recomputed. */
#ifndef ATTNLAB_INTERVENE_H
#define ATTNLAB_INTERVENE_H

#include <stddef.h>

#include "attnlab/hooks.h"
#include "attnlab/model.h"
#include "attnlab/util.h"

enum { AL_IV_ZERO, AL_IV_SCALE, AL_IV_ADD, AL_IV_SET };

typedef struct al_iv_op {
    int index; /* in the file, for messages */
    al_hook_point point;
    int layer;
    int head; /* -1: every head (or no head axis) */
    int has_pos, pos; /* pos may be negative: from the end */
    int op; /* AL_IV_* */
    float factor; /* scale */
    float *vec; /* add, set: n_vec floats */
    int n_vec;
} al_iv_op;

typedef struct al_intervention {
    int n;
    al_iv_op *ops;
    char *json; /* the file as parsed, one line: for the run's record */
} al_intervention;

/* The limits of a file: ops and floats in one vector. */
#define AL_IV_MAX_OPS 100000
#define AL_IV_MAX_VEC (1 << 24)

/* Parse an intervention file's text (n bytes, need not be
 * NUL-terminated) for a model of config c; vector files are read from
 * dir (NULL: the current folder). Everything is checked here: names,
 * points the forward runs, heads, positions within n_ctx, vector
 * lengths, the .npy files. 0 with *iv filled (al_intervention_free), or
 * −1 with e naming the op and the field, *iv zeroed. */
int al_intervention_parse(const char *text, size_t n, const char *dir, const al_config *c,
                          al_intervention *iv, al_err *e);
/* The same from a file (at most 64 MiB; vectors beside it); messages
 * name the file. */
int al_intervention_load(const char *path, const al_config *c, al_intervention *iv, al_err *e);
/* Register one hook per op on m (ctx: the op; iv must outlive them): 0,
 * or −1 with e and none registered. A position outside the forward's
 * sequence fails that forward with a message naming the op. */
int al_intervention_attach(al_model *m, al_intervention *iv, al_err *e);
void al_intervention_detach(al_model *m, al_intervention *iv);
void al_intervention_free(al_intervention *iv);

/* A 1-D little-endian float32 or float64 .npy file's values (format
 * versions 1 to 3, at most max floats) as floats: 0 with *out (free it)
 * and *len, or −1 with e saying what is wrong (magic, version, header,
 * dtype, shape, size). */
int al_npy_parse(const unsigned char *b, size_t n, size_t max, float **out, size_t *len, al_err *e);

#endif
