/* process.h -- weight processing as TransformerLens's from_pretrained
 * does it: rewrite a model's weights into an equivalent model whose
 * weights are easier to read (LayerNorm folded into the weights that read
 * it, the writing weights and the unembedding centred, the value biases
 * moved into b_O). The processed model computes the same log-probs (to
 * float rounding); logits move by a constant per position when the
 * unembedding is centred. What was done is recorded in the config
 * (al_config.processed, config.json's "processing").
 *
 * The steps, each an option, in TransformerLens's order (2.x,
 * HookedTransformer.load_and_process_state_dict):
 *   fold_ln       with LayerNorm: b_Q += ln1.b W_Q (k, v alike), W_Q *=
 *                 ln1.w row-wise, then each column of W_Q, W_K, W_V
 *                 centred over d_model (LNPre's output has mean 0); the
 *                 same for ln_final into W_U and b_U. LN becomes LNPre
 *                 (an LNPre model's weights are only centred).
 *   center_writing_weights  with LayerNorm: W_E, W_pos and W_O centred
 *                 over d_model, b_O minus its mean (every reader of the
 *                 residual stream centres it first).
 *   center_unembed  W_U centred over the vocabulary, b_U minus its mean
 *                 (the softmax ignores a constant per row).
 *   fold_value_biases  b_O += Σ_h b_V[h] W_O[h], b_V = 0 (a pattern's rows
 *                 sum to 1, so b_V's contribution is constant). As in
 *                 TransformerLens, it is then no part of the head's output:
 *                 a head gate (ablation) no longer removes it.
 * TransformerLens's exception: shortformer models get neither LN folding
 * nor centring (W_pos enters q and k after ln1, so neither is exact); the
 * value biases are still folded. Without LayerNorm there is nothing to
 * fold and centring the writing weights would change the model, so both
 * are skipped; center_unembed and fold_value_biases apply to any model.
 * Tensors a step needs that the model lacks are added (b_Q, b_K, b_V, b_U
 * from folding ln biases, b_O for the value biases), and a tied
 * unembedding is untied before a step changes W_U or W_E. */
#ifndef ATTNLAB_PROCESS_H
#define ATTNLAB_PROCESS_H

#include "attnlab/model.h"
#include "attnlab/util.h"

typedef struct al_process_opts {
    int fold_ln;
    int center_writing_weights;
    int center_unembed;
    int fold_value_biases;
} al_process_opts;
/* TransformerLens's from_pretrained defaults: all four. */
#define AL_PROCESS_OPTS_INIT                                                                       \
    { 1, 1, 1, 1 }

/* Rewrite m's weights with the steps o asks for (as they apply to m,
 * above), in double precision, and record the steps done in
 * m->cfg.processed (added to what it held). m's gates stay; m must have
 * no hooks (they may hold views of its parameters) and any activations
 * or gradients are dropped. 0, or −1 with e (hooks registered, out of
 * memory: m is then unchanged). */
int al_model_process(al_model *m, const al_process_opts *o, al_err *e);

#endif
