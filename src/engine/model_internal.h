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

/* wqkv (C, 3·H·D) = layer l's W_Q|W_K|W_V fused: column s·HD + h·D + d
 * holds W_{Q,K,V}[l,h][:, d], so one sgemm gives q|k|v of every head. */
void model_fuse_qkv(float *wqkv, const al_model *m, int l);

/* One head's gated output at one position: zg[d] = g · src[d], where src
 * is the head's z, its z replacement or a patched z. */
static inline void model_gate_row(float *zg, const float *src, float g, int D) {
    for (int d = 0; d < D; d++) zg[d] = g * src[d];
}

/* z (D) of a patched attention row: Σ_{u<=t} row[u] · v_u, with v_u at
 * v + u·vs (the order of the sum is fixed: u ascending). */
void model_att_row_z(float *z, const float *row, int t, const float *v, size_t vs, int D);

/* Circuit runs (circuit.c). circuit_begin, before the forward of the
 * circuit's own inputs: checks m->circuit and runs the fill (corrupted or
 * resampled sequences) through the model, keeping its embeddings and
 * gated z's. circuit_qkv: layer l's q/k/v (B,T,3,H,D) minus what the
 * removed edges into them carried. circuit_out: the final residual
 * (B,T,C) minus what the removed logits edges carried. */
int circuit_begin(al_model *m, const int *inputs, int B, int T, al_err *e);
void circuit_qkv(al_model *m, int l, float *qkv);
void circuit_out(al_model *m, float *xL);
/* The embedding and layers of a forward of m->B × m->T tokens (model.c),
 * the unembedding into m->probs only if unembed; for circuit_begin. */
void model_forward_body(al_model *m, const int *inputs, int unembed);

#endif
