/* config.h -- a model directory's config.json, and state.json for
 * resuming (JSON parsing itself is in json.h). */
#ifndef ATTNLAB_CONFIG_H
#define ATTNLAB_CONFIG_H

#include "attnlab/json.h"
#include "attnlab/model.h"
#include "attnlab/util.h"

/* config.json of a model directory: TransformerLens keys (n_layers,
 * d_model, n_heads, d_head, n_ctx, d_vocab, attn_only=true,
 * normalization_type null, "LN" or "LNPre" (al_config.norm_type), eps
 * (ln_eps; written for every model, read as 1e-5 when absent),
 * positional_embedding_type "standard" or "shortformer" (pos_type), ...)
 * plus ours (tied_embeddings, seed, attnlab_version, "biases": the
 * names of the bias tensors the model has, from b_Q, b_K, b_V, b_O, b_U,
 * [] or absent: none; and, for a processed model (process.h),
 * "processing": the steps done, absent: none). Reading refuses, with a message naming the key,
 * every value of these keys that the engine does not compute, and the
 * TransformerLens keys whose non-default values would change an
 * attention-only model (use_attn_scale, attn_scale, attention_dir,
 * use_local_attn, n_key_value_heads, final_rms, d_vocab_out, soft caps,
 * ...); other keys are ignored. */
char *al_config_to_json(const al_config *c);
int al_config_from_json(const char *json_text, al_config *c, const char *source_name, al_err *e);

/* state.json: everything needed to continue training exactly:
 * {"attnlab_version", "step", "tokens_seen", "last_train_loss",
 *  "last_val_loss" (null when not finite), "rng": four 16-hex-digit
 *  strings (JSON numbers cannot hold a u64), "train": the training flags
 *  object (train_json) or null}. Numbers are written so that they read
 *  back bit for bit. */
typedef struct al_train_state {
    long step; /* optimizer steps completed */
    al_rng rng; /* data-order RNG after `step` batches */
    double tokens_seen;
    double last_train_loss, last_val_loss;
    char *train_json; /* training flags as JSON (owned) */
    /* The training run (in the database curve_db, an absolute path) that
     * logged this checkpoint's curve; 0/NULL when it was trained without
     * --db. A resumed run copies that run's curve (src/cli/train_record.c). */
    int64_t curve_run;
    char *curve_db; /* owned */
    /* Tokens in the training file (after any validation split): the data
     * a model saw tokens_seen / data_tokens times over. 0 when unknown
     * (checkpoints written before it was recorded). */
    double data_tokens;
} al_train_state;
char *al_state_to_json(const al_train_state *s);
int al_state_from_json(const char *json_text, al_train_state *s, const char *source_name,
                       al_err *e);
void al_state_free(al_train_state *s);

#endif
