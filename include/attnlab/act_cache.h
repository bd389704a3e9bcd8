/* act_cache.h -- a forward pass's activations out as arrays: one
 * safetensors file holding, under TransformerLens's hook names and in its
 * shapes, whichever of them the caller asks for, so a cache can be
 * opened from NumPy or PyTorch (safetensors.numpy / .torch) beside a
 * TransformerLens run of the same weights.
 *
 * Tensors (B sequences of T tokens; all float32 but tokens):
 *   tokens                         (B, T) int32
 *   hook_embed                     (B, T, C)     W_E[token]
 *   hook_pos_embed                 (B, T, C)     W_pos[t] (also for shortformer
 *                                                positions, as TransformerLens)
 *   blocks.l.hook_resid_pre        (B, T, C)     the residual entering layer l
 *   blocks.l.attn.hook_q|k|v       (B, T, H, D)  (shortformer: q and k of x + W_pos)
 *   blocks.l.attn.hook_pattern     (B, H, T, T)  attention probabilities
 *   blocks.l.attn.hook_z           (B, T, H, D)  before the head gates
 *   blocks.l.attn.hook_result      (B, T, H, C)  each head's output g·z W_O (no b_O)
 *   blocks.l.hook_resid_post       (B, T, C)     = resid_pre of l + 1; the last
 *                                                layer's is the final residual
 *                                                (logits = ln_final(it) W_U + b_U)
 * Kinds (the `hooks` list, comma-separated; NULL or "all": every one):
 * embed, pos_embed, resid_pre, q, k, v, pattern, z, result, resid_post
 * (tokens always). Metadata: "format" = "attnlab-cache", the model's
 * sha256 when given, n_layers, n_heads, d_head, d_model, B, T. */
#ifndef ATTNLAB_ACT_CACHE_H
#define ATTNLAB_ACT_CACHE_H

#include <stddef.h>
#include "attnlab/model.h"
#include "attnlab/util.h"

/* Bytes the cache of hooks (as above) would take for B × T tokens of m
 * (tensor data, the header aside); 0 with e on an unknown kind. */
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
