/* config.h -- JSON configuration: config files onto flag tables, the
 * model directory's config.json, and state.json for resuming.
 * With safetensors.c, the only user of cJSON for model files. */
#ifndef ATTNLAB_CONFIG_H
#define ATTNLAB_CONFIG_H

#include "attnlab/args.h"
#include "attnlab/model.h"
#include "attnlab/util.h"

/* Parse len bytes of JSON (need not be NUL-terminated) with cJSON,
 * refusing NUL bytes and nesting deeper than AL_JSON_MAX_DEPTH before
 * cJSON sees the text (its recursion is the stack's only bound). On
 * failure the message is "SOURCE: invalid JSON at line L, column C"
 * (just "invalid JSON ..." if source_name is NULL). Free with
 * cJSON_Delete. */
#define AL_JSON_MAX_DEPTH 100
struct cJSON;
int al_json_parse(const char *text, size_t len, const char *source_name,
                  struct cJSON **out, al_err *e);

/* Apply a JSON object (file contents) to a flag table: each key is a
 * flag name with '-' written as '_' (or as '-'); strings for AL_STR,
 * integers for AL_INT/AL_U64, numbers for AL_FLOAT, true/false for
 * AL_BOOL (null for AL_STR sets NULL; AL_U64 also takes a decimal
 * string, for values above 2^53). Unknown keys, repeated keys and wrong
 * types are errors naming the key; on error nothing is assigned.
 * Flags already marked seen (given on the command line or by an earlier
 * JSON file) are not overwritten, and flags set here are marked seen, so
 * the first source applied wins. String values are kept alive in an
 * internal arena until al_config_arena_free(). */
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

/* state.json: everything needed to continue training exactly:
 * {"attnlab_version", "step", "tokens_seen", "last_train_loss",
 *  "last_val_loss" (null when not finite), "rng": four 16-hex-digit
 *  strings (JSON numbers cannot hold a u64), "train": the training flags
 *  object (train_json) or null}. Numbers are written so that they read
 *  back bit for bit. */
typedef struct al_train_state {
    long step;            /* optimizer steps completed */
    al_rng rng;           /* data-order RNG after `step` batches */
    double tokens_seen;
    double last_train_loss, last_val_loss;
    char *train_json;     /* training flags as JSON (owned) */
    /* The training run (in the database curve_db, an absolute path) that
     * logged this checkpoint's curve; 0/NULL when it was trained without
     * --db. A resumed run copies that run's curve (train.c). */
    int64_t curve_run;
    char *curve_db;       /* owned */
} al_train_state;
char *al_state_to_json(const al_train_state *s);
int al_state_from_json(const char *json_text, al_train_state *s,
                       const char *source_name, al_err *e);
void al_state_free(al_train_state *s);

#endif
