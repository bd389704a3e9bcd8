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

typedef struct al_api_model al_api_model;

/* The version string of this library ("0.1.0"). */
const char *al_api_version(void);
/* Load a model directory (weights, and the tokenizer if it has one).
 * NULL on failure with err. Free with al_api_free. */
al_api_model *al_api_load(const char *dir, char *err, size_t cap);
void al_api_free(al_api_model *h);
/* cfg[0..7] = n_layers, d_model, n_heads, d_head, n_ctx, d_vocab,
 * positional type (0 standard, 1 shortformer), tied (0/1); eot id into
 * cfg[8] (-1 without a tokenizer). */
void al_api_config(const al_api_model *h, int *cfg);
/* Encode n bytes (any bytes; allow_special: the literal <|endoftext|>
 * becomes that token) into out (room for cap ids; n ids always
 * suffice): the count, or -1 with err (no tokenizer). */
long al_api_encode(al_api_model *h, const unsigned char *bytes, size_t n, int allow_special,
                   int *out, size_t cap, char *err, size_t ecap);
/* Decode ids into out (room for cap bytes): the byte count (which may
 * exceed cap: call again with more room), or -1 with err. */
long al_api_decode(al_api_model *h, const int *ids, size_t n, unsigned char *out, size_t cap,
                   char *err, size_t ecap);
/* Forward ids (B, T): logits (B, T, d_vocab) into logits (may be NULL),
 * softmax probabilities into probs (may be NULL). */
int al_api_forward(al_api_model *h, const int *ids, int B, int T, float *logits, float *probs,
                   char *err, size_t ecap);
/* Forward ids (B, T) and write the activations named by hooks (a
 * comma-separated list of act_cache.h's kinds, NULL = all) to path, a
 * safetensors file under TransformerLens hook names; refused above
 * max_mb megabytes. */
int al_api_cache(al_api_model *h, const int *ids, int B, int T, const char *hooks,
                 double max_mb, const char *path, char *err, size_t ecap);
/* Run the registered analysis `name` (scores, ablate, patch, ...) as the
 * CLI would with argv (argc strings, the command's options, e.g.
 * "--model", "DIR", "--db", "r.db") and --json: its JSON document is
 * written to json_path. Returns the CLI's exit code (0 success, 1
 * failure, 2 bad options, 130 interrupted; -1 when name is no analysis
 * or the output cannot be redirected), err holding what the CLI printed
 * on stderr (its first line). */
int al_api_run(const char *name, int argc, const char *const *argv, const char *json_path,
               char *err, size_t ecap);

#endif
