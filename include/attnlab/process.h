/* process.h -- TransformerLens's weight processing: the rewrites that
 * HookedTransformer.from_pretrained applies by default (fold_ln,
 * center_writing_weights, center_unembed, fold_value_biases), each of
 * which leaves the model's log-probabilities as they were while making
 * its weights easier to read (no LayerNorm weights in the way, no
 * component along the all-ones direction that LayerNorm removes anyway,
 * the value biases moved to where they act).
 *
 * With d = d_model, V = d_vocab, H heads of D, per layer l:
 *
 *  fold_ln (LN only; the model becomes LNPre)
 *     ln1:      b_Q[l,h] += ln1.b · W_Q[l,h]  (D);  W_Q[l,h] ← diag(ln1.w) W_Q[l,h]
 *               (W_K, W_V alike), then each column of W_Q/W_K/W_V[l,h] (C, D)
 *               loses its mean over C;
 *     ln_final: b_U += ln_final.b · W_U  (V);  W_U ← diag(ln_final.w) W_U,
 *               then each column of W_U (C, V) loses its mean over C.
 *     Exact because LNPre's output x_c/scale has mean 0 over C.
 *  center_writing_weights (LN or LNPre)
 *     every row of W_E (V, C), W_pos (n_ctx, C) and W_O[l,h] (D, C), and
 *     b_O[l] (C), loses its mean over C: what is written to the residual
 *     stream has no all-ones component, which the next LayerNorm removes.
 *  center_unembed
 *     every row of W_U (C, V) loses its mean over V, and b_U its mean:
 *     each position's logits move by one constant, the softmax does not.
 *  fold_value_biases
 *     b_O[l] += Σ_h b_V[l,h] · W_O[l,h]  (C);  b_V[l] ← 0: attention
 *     weights sum to 1, so the bias of v reaches the output as this constant.
 *
 * TransformerLens's exception, kept here: a model with shortformer
 * positions gets none of the first three (W_pos enters q and k after ln1,
 * so neither folding ln1 into W_Q nor centring W_pos would be exact), and
 * still its value biases folded. Tensors a step needs that the model lacks
 * are added (biases b_Q, b_K, b_V, b_U for fold_ln, b_O for
 * fold_value_biases), as TransformerLens models have all five.
 *
 * The steps applied are recorded in al_config.processing (AL_PROC_* bits,
 * config.json's "processing"). */
#ifndef ATTNLAB_PROCESS_H
#define ATTNLAB_PROCESS_H

#include "attnlab/model.h"
#include "attnlab/util.h"

enum {
    AL_PROC_FOLD_LN = 1,
    AL_PROC_CENTER_WRITING = 2,
    AL_PROC_CENTER_UNEMBED = 4,
    AL_PROC_FOLD_VALUE_BIASES = 8,
    AL_PROC_ALL = 15
};

/* Which steps to try (1 each in al_process_defaults, TransformerLens's
 * from_pretrained defaults). */
typedef struct al_process_opts {
    int fold_ln, center_writing_weights, center_unembed, fold_value_biases;
} al_process_opts;

al_process_opts al_process_defaults(void);
/* TransformerLens's name of one AL_PROC_* bit ("fold_ln",
 * "center_writing_weights", "center_unembed", "fold_value_biases"), NULL
 * for anything else; and the bit of such a name (0: none). */
const char *al_proc_name(unsigned bit);
unsigned al_proc_parse(const char *name);
/* The AL_PROC_* steps al_model_process would apply to a model of config
 * c under o (the rules above: a step asked for that cannot apply is left
 * out; a model without b_V has no value biases to fold, unless fold_ln
 * makes them). */
unsigned al_process_plan(const al_config *c, const al_process_opts *o);
/* Apply the plan to m's weights: m is replaced by a model of the new
 * config (LNPre after fold_ln, biases added as above; its gates and
 * hooks kept, its activations and gradients dropped), whose
 * cfg.processing gains the steps applied. No step applies: 0, m as it
 * was. −1 with e (m unchanged): a tied model (W_U is W_Eᵀ, so
 * the steps that change one would change the other) that any step would
 * change, or out of memory. */
int al_model_process(al_model *m, const al_process_opts *o, al_err *e);

#endif
