/* edge_grad.h -- the gradient edge estimate that edge attribution
 * patching (EAP, discover.c) and attribution patching (attrpatch.c)
 * share. An edge s → r carries sender s's output into receiver r's
 * input; to first order, replacing it by its value in the other run
 * changes the metric M by
 *
 *   Σ over rows  Δs · g_r
 *
 * Δs the sender's output difference in the residual stream, C-wide (the
 * embeddings' W_E[other] − W_E[base], positions' zero as both runs share
 * them, head l0.h's Δzg · W_O[l0,h]), and g_r ∂M/∂(the receiver's
 * input) at the base run: ∂M/∂c · W_c[l,h]ᵀ for channel c (q, k, v) of
 * head l.h, taken on through ln1's backward when the model has
 * LayerNorm (the receiver's input is its own copy of the residual before
 * ln1, hook_q_input, ..., which ln1 normalises alone), or ∂M/∂x_L for
 * the logits. Computing every Δs once and every g_r once per batch makes
 * all the estimates cost one forward and one backward in all.
 * Sums run in double in a fixed order, so an estimate repeats bit for
 * bit. */
#ifndef ATTNLAB_EDGE_GRAD_H
#define ATTNLAB_EDGE_GRAD_H

#include <stddef.h>
#include "attnlab/model.h"

/* The senders' differences of one batch of rows (rows = B·T) into out,
 * (n, rows, C), n = 1 + with_pos + n_heads, in this order: embed (W_E
 * rows of src minus those of base), then with_pos: positions (zeros),
 * then heads j = l0·H + h for j < n_heads: (zg_src − zg_base)[l0, :, h]
 * · W_O[l0,h]. zg_src and zg_base are (L, rows, H, D), m->zg's layout
 * with the batch's rows. dz is scratch of rows·D floats. */
void al_edge_senders(const al_model *m, const int *src, const int *base, size_t rows,
                     const float *zg_src, const float *zg_base, int with_pos, int n_heads,
                     float *dz, float *out);

/* The input gradient of channel c (0 q, 1 k, 2 v) of head l.h into g
 * (rows, C): ∂M/∂c_h · W_c[l,h]ᵀ from dqkv (L, rows, 3·H·D, as
 * al_model_backward_acts gives it), then with LayerNorm through ln1's
 * backward at layer l's rows with the mean and scale of the model's
 * last forward (which must be the base run's); lnd is scratch of rows·C
 * floats (unused without LayerNorm, may then be NULL). */
void al_edge_receiver_grad(const al_model *m, const float *dqkv, int l, int h, int c, size_t rows,
                           float *lnd, float *g);

/* Σ_i a[i] · b[i] over n floats, in double, in index order. */
double al_edge_dot(const float *a, const float *b, size_t n);

#endif
