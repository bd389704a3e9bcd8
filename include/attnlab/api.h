/* api.h -- a small C interface for other languages (the Python package
 * in python/attnlab loads it with ctypes from build/libattnlab.so):
 * plain C types only, an opaque handle, errors as a message in the
 * caller's buffer. It adds no arithmetic of its own: the model, the
 * tokenizer, the forward pass, the activation cache and every analysis
 * are the ones the CLI runs.
 * layer: cli
 *
 * Every function returning int gives 0 on success and -1 on failure with
 * a one-line message in err (cap bytes, always NUL-terminated). */
#ifndef ATTNLAB_API_H
#define ATTNLAB_API_H

#include <stddef.h>
#include <stdint.h>

/* The shared library exports these functions and nothing else: its
 * objects are compiled with -fvisibility=hidden (Makefile) and AL_API
 * marks the API, so the engine's internals (matmul_forward, pic_*, ...)
 * are not symbols a caller can bind to. */
#define AL_API __attribute__((visibility("default")))

typedef struct al_api_model al_api_model;

/* One call at a time per model: a call on a model that is inside
 * another (from a hook, or from another thread) fails at once with
 * "busy" in err, never races. Calls on different models are
 * independent. */

/* The version string of this library ("0.1.0"). */
AL_API const char *al_api_version(void);
/* Load a model directory (weights, and the tokenizer if it has one).
 * NULL on failure with err. Free with al_api_free. */
AL_API al_api_model *al_api_load(const char *dir, char *err, size_t cap);
AL_API void al_api_free(al_api_model *h);
/* cfg[0..7] = n_layers, d_model, n_heads, d_head, n_ctx, d_vocab,
 * positional type (0 standard, 1 shortformer), tied (0/1); eot id into
 * cfg[8] (-1 without a tokenizer). */
AL_API void al_api_config(const al_api_model *h, int *cfg);
/* Encode n bytes (any bytes; allow_special: the literal <|endoftext|>
 * becomes that token) into out (room for cap ids; n ids always
 * suffice): the count, or -1 with err (no tokenizer). */
AL_API long al_api_encode(al_api_model *h, const unsigned char *bytes, size_t n, int allow_special,
                          int *out, size_t cap, char *err, size_t ecap);
/* Decode ids into out (room for cap bytes): the byte count (which may
 * exceed cap: call again with more room), or -1 with err. */
AL_API long al_api_decode(al_api_model *h, const int *ids, size_t n, unsigned char *out, size_t cap,
                          char *err, size_t ecap);
/* Forward ids (B, T): logits (B, T, d_vocab) into logits (may be NULL),
 * softmax probabilities into probs (may be NULL). */
AL_API int al_api_forward(al_api_model *h, const int *ids, int B, int T, float *logits,
                          float *probs, char *err, size_t ecap);
/* Forward ids (B, T) and write the activations named by hooks (a
 * comma-separated list of act_cache.h's kinds, NULL = all) to path, a
 * safetensors file under TransformerLens hook names; refused above
 * max_mb megabytes, which must be a finite number > 0 (as the CLI's
 * --cache-max-mb). */
AL_API int al_api_cache(al_api_model *h, const int *ids, int B, int T, const char *hooks,
                        double max_mb, const char *path, char *err, size_t ecap);
/* ------------------------------------------------------------ hooks */

/* Hook point `point` (hooks.h's al_hook_point, 0 .. ; docs/hooks.md):
 * its TransformerLens name at layer into name (cap bytes), info[0] = 1
 * if the forward runs it (al_hook_runs), info[1] = 1 if it is at model
 * level, info[2] = 1 if it exists only when hooked (docs/hooks.md:
 * hook_result, hook_q/k/v_input, which TransformerLens computes only
 * with use_attn_result / use_split_qkv_input, and which change how the
 * layer computes when hooked), and its shape for a batch B × T: the
 * number of dims, or −1 past the last point (so a caller can list them
 * all). */
AL_API int al_api_hook_point(const al_api_model *h, int point, int layer, int B, int T, char *name,
                             size_t cap, int *info, int64_t *shape);
/* The point and layer of a TransformerLens hook name (al_hook_parse with
 * the model's layer count): 0, or −1 with err naming the name. */
AL_API int al_api_hook_parse(const al_api_model *h, const char *name, int *point, int *layer,
                             char *err, size_t ecap);

/* A hook from another language: called at one registered point of the
 * forward with the activation in TransformerLens's shape (docs/hooks.md):
 * data is the engine's own buffer, writable, seen through shape and
 * strides (ndim of each; strides in floats: a view into the fused q|k|v
 * buffer or the pattern, not a copy), valid only during the call. slot
 * is the registration's index. Return 0, or non-zero to stop the
 * forward (the call then fails with "a hook failed at NAME"). */
typedef int (*al_api_hook_fn)(void *user, int slot, float *data, int ndim, const int64_t *shape,
                              const int64_t *strides);

/* A forward of ids (B, T) with n hooks: hook i at point points[i]
 * (hooks.h's al_hook_point) and layer layers[i] (0 for model-level
 * points), all calling fn(user, i, ...); at one point in the order i.
 * Every point al_hook_runs says the forward runs may be hooked; no cap
 * on n. A hook that changes its activation (compared bit for bit with
 * what it was given) is an intervention: the forward goes on from what
 * it wrote (a changed pattern row's z is recomputed from it), and
 * al_api_grads then refuses that forward. loss = 1: targets are the next
 * tokens (the last position has none), and *mean_loss (may be NULL)
 * their mean cross-entropy, losses (B, T) (may be NULL) each one (0 at
 * the last position). logits (B, T, d_vocab) may be NULL. The model's
 * hooks are removed again before it returns. */
AL_API int al_api_run_hooks(al_api_model *h, const int *ids, int B, int T, int loss, int n,
                            const int *points, const int *layers, al_api_hook_fn fn, void *user,
                            float *logits, float *losses, double *mean_loss, char *err,
                            size_t ecap);

/* The metrics of al_api_grads. */
enum {
    AL_API_METRIC_LOSS = 0, /* the mean loss of a loss = 1 forward */
    AL_API_METRIC_LOGPROB = 1, /* Σ_b log p(target[b] | ids[b, 0..pos]) */
    AL_API_METRIC_DLOGITS = 2 /* Σ dlogits · logits for a given dlogits (B, T, V) */
};
/* Gradients of a metric of the last forward (al_api_run_hooks) at hook
 * points: out[i] (TransformerLens's shape of points[i], contiguous)
 * gets ∂metric/∂(the activation at points[i], layers[i]); *value (may
 * be NULL) the metric. Points: RESID_PRE, RESID_POST, Q, K, V, PATTERN,
 * Z, RESULT (al_model_backward_acts's, with z = the gate's input:
 * ∂/∂z = g · ∂/∂zg; the pattern's ∂/∂A[t, s] = ∂/∂z_t · v_s for s <= t
 * and 0 above the diagonal, which the forward never reads (where
 * TransformerLens, whose z sums over every s, has ∂/∂z_t · v_s too); a
 * head's result gets the gradient of the residual it is added to).
 * Refused: no forward yet, a forward whose hooks wrote an activation
 * (the engine does not differentiate through an intervention), LOSS
 * after a forward without loss, pos or a target out of range, any other
 * point. */
AL_API int al_api_grads(al_api_model *h, int metric, int pos, const int *target,
                        const float *dlogits, int n, const int *points, const int *layers,
                        float *const *out, double *value, char *err, size_t ecap);

/* Run the registered analysis `name` (scores, ablate, patch, ...) in
 * this process through the driver the CLI uses, on its typed options:
 * options is a JSON object of the command's flags (NULL or "{}": the
 * defaults), each key a flag name with '-' written as '_' or '-', the
 * value a string, number or true/false as the flag takes (a flag the
 * CLI takes without a value is true), plus the driver's "strict" and
 * "progress" (true/false). *doc gets the run's JSON document, the one
 * `attnlab NAME --json` prints (free it with al_api_string_free); its
 * "warnings" are not also printed on stderr. Returns 0, or the CLI's
 * exit code with err: 1 the run failed, 2 bad options or a name that is
 * no analysis (err suggests the nearest, as the CLI does for a mistyped
 * command), 130 interrupted; -1 when name or doc is NULL or another
 * analysis is running in the process (one at a time: the threads, the
 * products' precision and the stop flag are the process's). Each call
 * starts from the command's defaults. */
AL_API int al_api_analysis(const char *name, const char *options, char **doc, char *err,
                           size_t ecap);
AL_API void al_api_string_free(char *s);

/* ------------------------------------------------------------ checks */

/* The checks of the calls above, for a caller whose values are wider than
 * the calls' types (the Python package checks its int64 ids, positions
 * and limits here before it narrows them), with the messages the calls
 * and the CLI give: 0, or -1 with err. */

/* Token ids (B, T): each in 0 .. d_vocab-1 (al_check_token), and with
 * forward = 1 also the forward's shape checks (not empty, T <= n_ctx). */
AL_API int al_api_check_ids(const al_api_model *h, const int64_t *ids, int64_t B, int64_t T,
                            int forward, char *err, size_t ecap);
/* The log-prob metric of al_api_grads for a batch B x T: pos in 0 .. T-1
 * and target (B ids) in 0 .. d_vocab-1. */
AL_API int al_api_check_logprob(const al_api_model *h, int64_t pos, const int64_t *target,
                                int64_t B, int64_t T, char *err, size_t ecap);
/* al_api_cache's hooks (its kinds; NULL = all) and max_mb (a finite
 * number > 0: al_cache_limit_check, the CLI's --cache-max-mb). */
AL_API int al_api_check_cache(const char *hooks, double max_mb, char *err, size_t ecap);
/* The index of the candidate (of n; NULL entries skipped) that word is
 * near enough to be a misspelling of (al_nearest_word: the CLI's "did you
 * mean"), or -1. */
AL_API int al_api_nearest(const char *word, int n, const char *const *cands);

#endif
