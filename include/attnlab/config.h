/* config.h -- JSON configuration: config files onto flag tables, the
 * model directory's config.json, and state.json for resuming.
 * With safetensors.c, the only user of cJSON for model files. */
#ifndef ATTNLAB_CONFIG_H
#define ATTNLAB_CONFIG_H

#include "attnlab/args.h"
#include "attnlab/model.h"
#include "attnlab/util.h"

/* Apply a JSON object (file contents) to a flag table: each key is a
 * flag name with '-' written as '_' (or as '-'); strings for AL_STR,
 * integers for AL_INT/AL_U64, numbers for AL_FLOAT, true/false for
 * AL_BOOL. Unknown keys and wrong types are errors naming the key.
 * Flags already marked seen (given on the command line) are not
 * overwritten, so the command line wins. String values are kept alive
 * in an internal arena until al_config_arena_free(). */
int al_flags_apply_json(al_flag *flags, const char *json_text,
                        const char *source_name, al_err *e);
void al_config_arena_free(void);

/* Serialize a flag table's current values as a JSON object (caller
 * frees). Used to store the training configuration in state.json. */
char *al_flags_to_json(const al_flag *flags);

/* config.json of a model directory: TransformerLens keys (n_layers,
 * d_model, n_heads, d_head, n_ctx, d_vocab, attn_only=true,
 * normalization_type=null, positional_embedding_type="standard", ...)
 * plus ours (tied_embeddings, seed, attnlab_version). */
char *al_config_to_json(const al_config *c);
int al_config_from_json(const char *json_text, al_config *c,
                        const char *source_name, al_err *e);

/* state.json: everything needed to continue training exactly. */
typedef struct al_train_state {
    long step;            /* optimizer steps completed */
    al_rng rng;           /* data-order RNG after `step` batches */
    double tokens_seen;
    double last_train_loss, last_val_loss;
    char *train_json;     /* training flags as JSON (owned) */
} al_train_state;
char *al_state_to_json(const al_train_state *s);
int al_state_from_json(const char *json_text, al_train_state *s,
                       const char *source_name, al_err *e);
void al_state_free(al_train_state *s);

#endif
