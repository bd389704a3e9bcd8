/* act_cache.h -- a forward pass's activations out as arrays: one
 * safetensors file holding, under TransformerLens's hook names and in its
 * shapes, whichever of them the caller asks for, so a cache can be
 * opened from NumPy or PyTorch (safetensors.numpy / .torch) beside a
 * TransformerLens run of the same weights.
 *
 * Tensors (B sequences of T tokens; all float32 but tokens), in the order
 * the forward runs them: tokens (B, T) int32, then each chosen hook point
 * of docs/hooks.md under its name and shape, holding exactly what a hook
 * there sees (per layer for block points), e.g.
 *   hook_embed                     (B, T, C)     W_E[token]
 *   blocks.l.hook_resid_pre        (B, T, C)     the residual entering layer l
 *   blocks.l.ln1.hook_scale        (B, T, 1)     LayerNorm models only
 *   blocks.l.attn.hook_q|k|v       (B, T, H, D)  biases and shortformer positions in
 *   blocks.l.attn.hook_attn_scores (B, H, T, T)  scaled and masked, before the softmax
 *   blocks.l.attn.hook_pattern     (B, H, T, T)  attention probabilities
 *   blocks.l.attn.hook_result      (B, T, H, C)  each head's output g·z W_O (no b_O)
 *   ln_final.hook_normalized, logits (B, T, V)
 * Kinds (the `hooks` list, comma-separated): each point's name without
 * "blocks.l.", "attn." and "hook_", dots as underscores (embed, pos_embed,
 * resid_pre, ln1_scale, ln1_normalized, q, k, v, attn_scores, pattern, z,
 * result, attn_out, resid_post, ln_final_scale, ln_final_normalized,
 * logits); NULL or "all": every one the model has (the LayerNorm points
 * only with LayerNorm). The split q/k/v inputs are not cached (a hook on
 * them changes how ln1 runs). Metadata: "format" = "attnlab-cache", the
 * model's sha256 when given, n_layers, n_heads, d_head, d_model, B, T. */
#ifndef ATTNLAB_ACT_CACHE_H
#define ATTNLAB_ACT_CACHE_H

#include <stddef.h>
#include "attnlab/model.h"
#include "attnlab/util.h"

/* Bytes the cache of hooks (as above) would take for B × T tokens of a
 * model of config c (tensor data, the header aside); 0 with e on an
 * unknown kind or one c's model does not have. */
size_t al_cache_bytes(const al_config *c, int B, int T, const char *hooks, al_err *e);

/* The check of a cache's size limit in megabytes (`run --cache-max-mb`,
 * the Python package's max_mb): a finite number > 0. 0, or -1 with e. */
int al_cache_limit_check(double max_mb, al_err *e);

/* Run m on tokens (B, T) and write the chosen activations to path
 * (written to a temporary name and renamed: no partial file). Refused
 * before the forward pass when al_cache_bytes exceeds max_bytes (the
 * message gives the estimate and the limit). sha256 (may be NULL) goes
 * into the metadata. 0, or -1 with e (an unknown kind, too large, a
 * failed forward, a write error). */
int al_cache_write(al_model *m, const int *tokens, int B, int T, const char *hooks,
                   size_t max_bytes, const char *sha256, const char *path, al_err *e);

#endif
