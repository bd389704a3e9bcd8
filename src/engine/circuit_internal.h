/* circuit_internal.h -- what circuit_hooks.c (the circuit as hooks)
 * shares with circuit.c (its incremental evaluation): private to
 * src/engine, not part of the library API.
 * layer: engine */
#ifndef ATTNLAB_CIRCUIT_INTERNAL_H
#define ATTNLAB_CIRCUIT_INTERNAL_H

#include "attnlab/model.h"

/* W_Q, W_K or W_V (ch 0, 1, 2) of head l.h: (C, D). */
const float *circuit_head_w(const al_model *m, int l, int h, int ch);

/* blk (D, D) = W_O[l0,h0] · W_c[l1,h1]: what a composition edge l0.h0 →
 * l1.h1.c multiplies its sender's Δzg by (the hooks and the incremental
 * evaluation both use this product). */
void circuit_comp_block(const al_model *m, int l0, int h0, int l1, int h1, int ch, float *blk);

#endif
