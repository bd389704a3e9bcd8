/* model_internal.h -- helpers model.c shares with delta.c (private to
 * src/engine; not part of the library API).
 * layer: engine
 *
 * The incremental patched forward (delta.c) must compute what
 * al_model_forward computes, and where its inputs are the same, the same
 * bits: so the pieces of arithmetic both need live here once. */
#ifndef ATTNLAB_MODEL_INTERNAL_H
#define ATTNLAB_MODEL_INTERNAL_H

#include <stddef.h>

#include "attnlab/model.h"

/* m's activation buffers for a forward of (B, T) (kept when big
 * enough): 0, or −1 with e. */
int model_ensure_acts(al_model *m, int B, int T, al_err *e);

/* logits (n, V) = u W_U (or u W_Eᵀ) (+ b_U, when bias is set) of n rows
 * u (n, C) that ln_final has already normalised (the forward's last
 * product; without bias, its cross-entropy adds b_U). */
void model_unembed_rows(const al_model *m, const float *u, int n, float *logits, int bias);

/* The batch shape and token ids of a forward (targets may be NULL; −1
 * ignores a position): 0, or −1 with e naming the first bad one. */
int model_check_inputs(const al_model *m, const int *in, const int *tg, int B, int T, al_err *e);
/* The forward from the embeddings on, for m->B x m->T inputs (forward.c;
 * unembed 0: no ln_final and logits). */
int model_forward_body(al_model *m, const int *inputs, int unembed, al_err *e);

/* The forward up to the logits for backward (forward.c): checks, inputs
 * and targets kept, layers, unembedding into m->probs; and the mean loss
 * of m->losses over the positions with a target. */
int model_forward_begin(al_model *m, const int *inputs, const int *targets, int B, int T,
                        al_err *e);
void model_mean_loss(al_model *m);

/* wqkv (C, 3·H·D) = layer l's W_Q|W_K|W_V fused: column s·HD + h·D + d
 * holds W_{Q,K,V}[l,h][:, d], so one sgemm gives q|k|v of every head. */
void model_fuse_qkv(float *wqkv, const al_model *m, int l);

/* memcpy of n floats, split over the threads when large (a residual
 * stream is 4 MB at the default sizes; one thread copies it at a fraction
 * of the memory bandwidth while the other waits). */
void model_copy(float *restrict o, const float *restrict a, size_t n);

/* One head's gated output at one position: zg[d] = g · src[d], where src
 * is the head's z, its z replacement or a patched z. */
static inline void model_gate_row(float *zg, const float *src, float g, int D) {
    for (int d = 0; d < D; d++) zg[d] = g * src[d];
}

/* z (D) of a patched attention row: Σ_{u<=t} row[u] · v_u, with v_u at
 * v + u·vs (the order of the sum is fixed: u ascending). */
void model_att_row_z(float *z, const float *row, int t, const float *v, size_t vs, int D);

/* A forward of m's weights, gates and hooks (except those whose ctx is
 * skip) on inputs (B, T) into own's activations, without the
 * unembedding: a second run beside m's own, for a hook that needs one
 * (a circuit's fill run, circuit_hooks.c). own is zeroed before its first use
 * and freed with model_shared_free (it borrows m's weights and gates).
 * 0, or −1 with e. */
int model_forward_shared(al_model *own, const al_model *m, const void *skip, const int *inputs,
                         int B, int T, al_err *e);
void model_shared_free(al_model *own);

#endif
