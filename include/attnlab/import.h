/* import.h -- models trained elsewhere into attnlab model directories:
 * TransformerLens state dicts (torch.save files, .pth/.pt, or
 * .safetensors) of attention-only models, with their configuration.
 *
 * The configuration comes from one of
 *   - a config.json in TransformerLens's HookedTransformerConfig fields
 *     (normalization_type, positional_embedding_type, eps, attn_only, ...;
 *     absent fields take TransformerLens's defaults: normalization "LN",
 *     positions "standard", attn_only false),
 *   - a config.json in the hub format of NeelNanda's models (and
 *     ArthurConmy/redwood_attn_2l): normalization, shortformer_pos,
 *     ln_eps, attn_only, d_mlp, act_fn and training keys, read as
 *     TransformerLens's convert_neel_model_config reads it,
 *   - a built-in preset (al_import_preset),
 * and command-line settings on top; sizes nobody gave are read off the
 * checkpoint's shapes. Every key of a config.json is known to the reader
 * (import_config.c lists them: the ones that set the model, the ones that
 * must hold one value, the ones that do not change the model, which are
 * recorded or ignored), or named by the user as not changing the model
 * (ignore_keys); any other key is refused by name. A model with MLP layers
 * is refused in one line.
 *
 * The checkpoint's tensors have TransformerLens's names (embed.W_E,
 * pos_embed.W_pos, blocks.L.ln1.w/b, blocks.L.attn.W_Q/W_K/W_V/W_O/b_Q/
 * b_K/b_V/b_O, ln_final.w/b, unembed.W_U/b_U), maybe under a prefix (a
 * state dict nested in a dict, e.g. "model_state_dict."), which is found.
 * The buffers blocks.L.attn.mask and blocks.L.attn.IGNORE are skipped;
 * any other key not of the model, or missing from it, is named. Biases
 * are those the checkpoint has (each kind in every layer or in none).
 * Float32, float16 and bfloat16 tensors are read (widened exactly).
 *
 * The weights are then processed as TransformerLens's from_pretrained
 * does (process.h; every step may be turned off), and the model written
 * as a model directory (checkpoint.h) with import.json beside it: the
 * source files with their sha256, the configuration's source and the
 * keys recorded from it, the processing, the attnlab version. */
#ifndef ATTNLAB_IMPORT_H
#define ATTNLAB_IMPORT_H

#include "attnlab/model.h"
#include "attnlab/process.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

typedef struct al_import_opts {
    const char *checkpoint; /* required */
    const char *config; /* config.json (either format) or NULL */
    const char *tokenizer; /* tokenizer.json or NULL (no tokenizer) */
    const char *preset; /* a preset name or NULL; not with config */
    /* Settings over the config's or preset's (0 / NULL: not given). */
    int n_layers, d_model, n_heads, d_head, n_ctx, d_vocab;
    const char *norm; /* "none", "LN", "LNPre" */
    const char *positions; /* "standard", "shortformer" */
    double eps;
    const char *ignore_keys; /* comma-separated config keys that do not change the model */
    const char *prefix; /* the state dict's key prefix ("" top level); NULL: found */
    al_process_opts process;
} al_import_opts;

/* What the import read and decided, for messages and import.json. */
typedef struct al_import_info {
    char config_format[64]; /* "transformerlens", "hub", "preset NAME", "options" */
    char prefix[256]; /* the state dict's key prefix in the checkpoint */
    char dtype[8]; /* of embed.W_E: "F32", "F16", "BF16" */
    int n_read, n_skipped; /* tensors read; buffers skipped */
    char recorded[4096]; /* the config's keys that do not change the
                                 model but say what it is (model_name,
                                 tokenizer_name, n_params, seed, ...), as a
                                 JSON object; "{}" when none */
    char ignored[4096]; /* the config's other keys that do not change
                                 the model, comma-separated */
    unsigned processed; /* AL_PROC_* bits applied */
    /* checks that wait for the checkpoint's sizes: attn_scale (−1: none
     * given), n_key_value_heads and d_vocab_out (−1: none given) */
    double attn_scale;
    int n_kv_heads, d_vocab_out;
} al_import_info;

/* A built-in preset: the configuration of a published model. */
typedef struct al_import_preset {
    const char *name;
    const char *repo; /* where it is published ("owner/name") */
    al_config cfg;
    const char *note; /* one line: what it is */
} al_import_preset;
/* The presets, NULL-terminated by name (attn-only-1l..4l, attn-only-demo,
 * redwood_attn_2l, attn_only_2L_half); and one by name (also its aliases,
 * e.g. attn-only-2l-demo), or NULL. */
const al_import_preset *al_import_presets(void);
const al_import_preset *al_import_preset_find(const char *name);

/* The configuration of o without the checkpoint (import_config.c): from
 * the preset or config.json, then o's settings. Sizes and norm_type may
 * be left unset (sizes 0, *norm_known 0) for the checkpoint to settle.
 * Refusals name the file and the key. */
int al_import_config(const al_import_opts *o, al_config *c, int *norm_known, al_import_info *info,
                     al_err *e);
/* The same with the config.json given as n bytes of text (src names it
 * in messages; o->config is not read). For fuzzing. */
int al_import_config_mem(const al_import_opts *o, const char *text, size_t n, const char *src,
                         al_config *c, int *norm_known, al_import_info *info, al_err *e);

/* Read the checkpoint into m (uninitialised) with the configuration of
 * o, and process its weights as o->process says. On failure m is zeroed
 * and e holds one line. */
int al_import_model(const al_import_opts *o, al_model *m, al_import_info *info, al_err *e);

/* Write m (and tok, may be NULL) as the model directory out, with
 * import.json: all in a fresh temporary folder beside out, renamed to
 * out when complete, so out appears whole or not at all. out must not
 * exist, or be an empty folder. Checked before anything is written by
 * al_import_out_check (also for callers that want to refuse before
 * reading the checkpoint). */
int al_import_out_check(const char *out, al_err *e);
int al_import_write(const char *out, const al_import_opts *o, const al_model *m,
                    const al_tokenizer *tok, const al_import_info *info, al_err *e);

#endif
