/* import_config.c -- the configuration of an import (import.h): the
 * presets, the two config.json formats (TransformerLens's
 * HookedTransformerConfig fields and the hub format of NeelNanda's
 * models), and the command-line settings over them.
 *
 * Every key a config.json may hold is in one table below, with what it
 * does: sets the model, must hold the value that leaves an attention-only
 * model as attnlab computes it, matters only for MLP layers (which an
 * attention-only model has none of), or does not change the model
 * (recorded in import.json, or ignored). A key in none of these could
 * change the model in a way this reader does not know, so it is refused
 * unless the user names it as harmless (--ignore-key). */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/import.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/json.h"

/* ------------------------------------------------------- presets */

#define P(L, C, H, D, T, V, N, POS)                                                                \
    {                                                                                              \
        .n_layers = L, .d_model = C, .n_heads = H, .d_head = D, .n_ctx = T, .d_vocab = V,          \
        .norm_type = N, .pos_type = POS, .ln_eps = 1e-5                                            \
    }
static const al_import_preset PRESETS[] =
    {{"attn-only-1l", "NeelNanda/Attn_Only_1L512W_C4_Code",
      P(1, 512, 8, 64, 1024, 48262, AL_NORM_LN, AL_POS_STANDARD),
      "TransformerLens's attn-only-1l (C4 + code)"},
     {"attn-only-2l", "NeelNanda/Attn_Only_2L512W_C4_Code",
      P(2, 512, 8, 64, 1024, 48262, AL_NORM_LN, AL_POS_STANDARD),
      "TransformerLens's attn-only-2l (C4 + code)"},
     {"attn-only-3l", "NeelNanda/Attn_Only_3L512W_C4_Code",
      P(3, 512, 8, 64, 1024, 48262, AL_NORM_LN, AL_POS_STANDARD),
      "TransformerLens's attn-only-3l (C4 + code)"},
     {"attn-only-4l", "NeelNanda/Attn_Only_4L512W_C4_Code",
      P(4, 512, 8, 64, 1024, 48262, AL_NORM_LN, AL_POS_STANDARD),
      "TransformerLens's attn-only-4l (C4 + code)"},
     {"attn-only-demo", "NeelNanda/Attn-Only-2L512W-Shortformer-6B-big-lr",
      P(2, 512, 8, 64, 1024, 50277, AL_NORM_NONE, AL_POS_SHORTFORMER),
      "TransformerLens's attn-only-demo (the Pile, no LayerNorm, shortformer positions)"},
     {"redwood_attn_2l", "ArthurConmy/redwood_attn_2l",
      P(2, 256, 8, 32, 2048, 50259, AL_NORM_LN, AL_POS_SHORTFORMER),
      "Redwood's 2-layer model, ACDC's induction model (shortformer positions)"},
     {"attn_only_2L_half", "callummcdougall/attn_only_2L_half",
      P(2, 768, 12, 64, 2048, 50278, AL_NORM_NONE, AL_POS_SHORTFORMER),
      "ARENA's induction-heads model (no LayerNorm, shortformer positions)"},
     {NULL, NULL, {0}, NULL}};
#undef P

static const char *const ALIASES[][2] = {{"attn-only-2l-demo", "attn-only-demo"}};

const al_import_preset *al_import_presets(void) { return PRESETS; }

const al_import_preset *al_import_preset_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof ALIASES / sizeof ALIASES[0]; i++)
        if (!strcmp(name, ALIASES[i][0])) name = ALIASES[i][1];
    for (const al_import_preset *p = PRESETS; p->name; p++)
        if (!strcmp(p->name, name)) return p;
    return NULL;
}

/* ------------------------------------------------------- the keys */

typedef enum {
    K_SET, /* sets the model: read by name below */
    K_FALSE, /* must be false or null */
    K_CHECK, /* must hold one value: checked by name below */
    K_MLP, /* only for MLP layers: ignored in an attention-only model */
    K_RECORD, /* does not change the model; says what it is (import.json) */
    K_IGNORE /* does not change the model (hooks, devices, training) */
} key_kind;

typedef struct key_row {
    const char *name;
    key_kind kind;
} key_row;

static const key_row KEYS[] = {
    /* the model */
    {"n_layers", K_SET},
    {"d_model", K_SET},
    {"n_heads", K_SET},
    {"d_head", K_SET},
    {"n_ctx", K_SET},
    {"d_vocab", K_SET},
    {"normalization_type", K_SET},
    {"normalization", K_SET},
    {"positional_embedding_type", K_SET},
    {"shortformer_pos", K_SET},
    {"eps", K_SET},
    {"ln_eps", K_SET},
    {"attn_only", K_SET},
    /* TransformerLens fields whose other values would change the model */
    {"use_local_attn", K_FALSE},
    {"scale_attn_by_inverse_layer_idx", K_FALSE},
    {"final_rms", K_FALSE},
    {"post_embedding_ln", K_FALSE},
    {"use_qk_norm", K_FALSE},
    {"use_normalization_before_and_after", K_FALSE},
    {"load_in_4bit", K_FALSE},
    {"tie_word_embeddings", K_FALSE},
    {"tied_embeddings", K_FALSE},
    {"relative_attention_max_distance", K_FALSE},
    {"relative_attention_num_buckets", K_FALSE},
    {"decoder_start_token_id", K_FALSE},
    {"use_attn_scale", K_CHECK},
    {"attn_scale", K_CHECK},
    {"attention_dir", K_CHECK},
    {"n_key_value_heads", K_CHECK},
    {"d_vocab_out", K_CHECK},
    {"attn_scores_soft_cap", K_CHECK},
    {"output_logits_soft_cap", K_CHECK},
    {"architecture", K_CHECK},
    {"original_architecture", K_CHECK},
    /* MLP layers only */
    {"d_mlp", K_MLP},
    {"act_fn", K_MLP},
    {"gated_mlp", K_MLP},
    {"parallel_attn_mlp", K_MLP},
    {"num_experts", K_MLP},
    {"experts_per_token", K_MLP},
    {"use_hook_mlp_in", K_MLP},
    {"neuron_scale", K_MLP},
    {"neuron_temp", K_MLP},
    {"norm_topk_prob", K_MLP},
    /* what the model is */
    {"model_name", K_RECORD},
    {"tokenizer_name", K_RECORD},
    {"n_params", K_RECORD},
    {"seed", K_RECORD},
    {"dataset_name", K_RECORD},
    {"version", K_RECORD},
    {"max_tokens", K_RECORD},
    {"checkpoint_value", K_RECORD},
    {"checkpoint_label_type", K_RECORD},
    {"attnlab_version", K_RECORD},
    /* TransformerLens: hook switches, devices, loading, initialisation;
     * positional settings of rotary models and windows of local attention
     * (both refused above) */
    {"use_attn_result", K_IGNORE},
    {"use_split_qkv_input", K_IGNORE},
    {"use_attn_in", K_IGNORE},
    {"use_hook_tokens", K_IGNORE},
    {"ungroup_grouped_query_attention", K_IGNORE},
    {"from_checkpoint", K_IGNORE},
    {"checkpoint_index", K_IGNORE},
    {"device", K_IGNORE},
    {"n_devices", K_IGNORE},
    {"dtype", K_IGNORE},
    {"init_mode", K_IGNORE},
    {"initializer_range", K_IGNORE},
    {"init_weights", K_IGNORE},
    {"default_prepend_bos", K_IGNORE},
    {"tokenizer_prepends_bos", K_IGNORE},
    {"trust_remote_code", K_IGNORE},
    {"window_size", K_IGNORE},
    {"attn_types", K_IGNORE},
    {"rotary_dim", K_IGNORE},
    {"rotary_base", K_IGNORE},
    {"rotary_adjacent_pairs", K_IGNORE},
    {"use_NTK_by_parts_rope", K_IGNORE},
    {"NTK_by_parts_low_freq_factor", K_IGNORE},
    {"NTK_by_parts_high_freq_factor", K_IGNORE},
    {"NTK_by_parts_factor", K_IGNORE},
    {"NTK_original_ctx_len", K_IGNORE},
    /* attnlab's own config.json (the checkpoint says which biases) */
    {"biases", K_IGNORE},
    {"processing", K_IGNORE},
    /* NeelNanda's training settings */
    {"lr_hidden", K_IGNORE},
    {"lr_vector", K_IGNORE},
    {"batch_size_per_device", K_IGNORE},
    {"batches_per_step", K_IGNORE},
    {"save_checkpoints", K_IGNORE},
    {"debug", K_IGNORE},
    {"debug_batch", K_IGNORE},
    {"use_bfloat16_matmul", K_IGNORE},
    {"betas", K_IGNORE},
    {"weight_decay", K_IGNORE},
    {"grad_norm_clip", K_IGNORE},
    {"lr_schedule", K_IGNORE},
    {"warmup_tokens", K_IGNORE},
    {"train_loss_ewma_beta", K_IGNORE},
    {"truncate_tokens", K_IGNORE},
    {"log_interval", K_IGNORE},
    {"initializer_scale_global", K_IGNORE},
    {"initializer_scale_hidden", K_IGNORE},
    {"initializer_scale_embed", K_IGNORE},
    {"initializer_scale_unembed", K_IGNORE},
    {"use_acc", K_IGNORE},
    {"weight_init_scheme", K_IGNORE},
    {"fixed_init", K_IGNORE},
    {"store_init", K_IGNORE},
    {"control", K_IGNORE},
    {"tokens_per_step", K_IGNORE},
    {"batch_size", K_IGNORE},
    {"max_steps", K_IGNORE},
    {"warmup_steps", K_IGNORE},
};

static const key_row *key_of(const char *name) {
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++)
        if (!strcmp(KEYS[i].name, name)) return &KEYS[i];
    return NULL;
}

/* 1 if name is one of the comma-separated list's items. */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, name, n)) return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

/* The hub format's own keys (TransformerLens's convert_neel_model_config
 * reads them). */
static int is_hub(const cJSON *o) {
    static const char *const hub[] = {"normalization", "shortformer_pos", "ln_eps", "lr_hidden"};
    for (size_t i = 0; i < 4; i++)
        if (cJSON_GetObjectItemCaseSensitive(o, hub[i])) return 1;
    return 0;
}

static const cJSON *get(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* A size key: an integer >= 1, or −1 (TransformerLens: "not set", read
 * off the checkpoint) into 0. */
static int get_size(const cJSON *o, const char *k, int *out, const char *src, al_err *e) {
    const cJSON *j = get(o, k);
    double d;
    if (!j) return 0;
    if (cJSON_IsNumber(j) && j->valuedouble == -1) {
        *out = 0;
        return 0;
    }
    if (al_json_int_in(j, 1, INT_MAX, &d))
        return al_errf(e, "%s: key '%s' must be an integer >= 1", src, k);
    *out = (int)d;
    return 0;
}

/* normalization_type / normalization: null, "LN", "LNPre" (RMS refused). */
static int get_norm(const cJSON *j, const char *k, int *norm, const char *src, al_err *e) {
    if (cJSON_IsNull(j)) {
        *norm = AL_NORM_NONE;
        return 0;
    }
    if (cJSON_IsString(j) && !strcmp(j->valuestring, "None")) { /* Python's None as text */
        *norm = AL_NORM_NONE;
        return 0;
    }
    if (cJSON_IsString(j) && al_norm_type_parse(j->valuestring, norm) == 0) return 0;
    return al_errf(e,
                   "%s: key '%s' must be null, \"LN\" or \"LNPre\" (attnlab has no RMS "
                   "norm)",
                   src, k);
}

/* The K_SET keys into c (norm and positions only where given). */
static int read_set(const cJSON *o, al_config *c, int *norm_known, int *pos_known, const char *src,
                    al_err *e) {
    if (get_size(o, "n_layers", &c->n_layers, src, e) ||
        get_size(o, "d_model", &c->d_model, src, e) ||
        get_size(o, "n_heads", &c->n_heads, src, e) || get_size(o, "d_head", &c->d_head, src, e) ||
        get_size(o, "n_ctx", &c->n_ctx, src, e) || get_size(o, "d_vocab", &c->d_vocab, src, e))
        return -1;
    /* n_heads −1: d_model / d_head (TransformerLens) */
    const cJSON *nh = get(o, "n_heads");
    if (nh && c->n_heads == 0 && c->d_model && c->d_head) {
        if (c->d_model % c->d_head)
            return al_errf(e, "%s: n_heads is -1 but d_model %d is no multiple of d_head %d", src,
                           c->d_model, c->d_head);
        c->n_heads = c->d_model / c->d_head;
    }
    const cJSON *a = get(o, "attn_only");
    if (!a || !cJSON_IsTrue(a)) {
        const cJSON *mlp = get(o, "d_mlp");
        char dm[32] = "";
        if (mlp && cJSON_IsNumber(mlp)) snprintf(dm, sizeof dm, ", d_mlp %g", mlp->valuedouble);
        return al_errf(e,
                       "%s: a model with MLP layers (attn_only %s%s): attnlab takes "
                       "attention-only models",
                       src, !a ? "absent, false by default" : "false", dm);
    }
    int n1 = -1, n2 = -1;
    const cJSON *j = get(o, "normalization_type");
    if (j && get_norm(j, "normalization_type", &n1, src, e)) return -1;
    j = get(o, "normalization");
    if (j && get_norm(j, "normalization", &n2, src, e)) return -1;
    if (n1 >= 0 && n2 >= 0 && n1 != n2)
        return al_errf(e, "%s: keys 'normalization' and 'normalization_type' disagree", src);
    /* absent: TransformerLens's default, LayerNorm */
    c->norm_type = n2 >= 0 ? n2 : n1 >= 0 ? n1 : AL_NORM_LN;
    *norm_known = 1;
    int p1 = -1, p2 = -1;
    j = get(o, "positional_embedding_type");
    if (j && !(cJSON_IsString(j) && al_pos_type_parse(j->valuestring, &p1) == 0))
        return al_errf(e,
                       "%s: key 'positional_embedding_type' must be \"standard\" or "
                       "\"shortformer\" (attnlab has no other positions)",
                       src);
    j = get(o, "shortformer_pos");
    if (j && !cJSON_IsBool(j) && !cJSON_IsNull(j))
        return al_errf(e, "%s: key 'shortformer_pos' must be true or false", src);
    if (j) p2 = cJSON_IsTrue(j) ? AL_POS_SHORTFORMER : AL_POS_STANDARD;
    if (p1 >= 0 && p2 >= 0 && p1 != p2)
        return al_errf(e, "%s: keys 'shortformer_pos' and 'positional_embedding_type' disagree",
                       src);
    c->pos_type = p1 >= 0 ? p1 : p2 >= 0 ? p2 : AL_POS_STANDARD;
    *pos_known = 1;
    double eps[2] = {-1, -1};
    const char *ek[2] = {"eps", "ln_eps"};
    for (int i = 0; i < 2; i++) {
        j = get(o, ek[i]);
        if (!j) continue;
        if (!cJSON_IsNumber(j) || !(j->valuedouble > 0 && j->valuedouble <= 1))
            return al_errf(e, "%s: key '%s' must be a number in (0, 1]", src, ek[i]);
        eps[i] = j->valuedouble;
    }
    if (eps[0] > 0 && eps[1] > 0 && eps[0] != eps[1])
        return al_errf(e, "%s: keys 'eps' and 'ln_eps' disagree", src);
    c->ln_eps = eps[1] > 0 ? eps[1] : eps[0] > 0 ? eps[0] : 1e-5;
    return 0;
}

/* The K_CHECK keys; the ones that need the sizes go into info. */
static int read_check(const cJSON *o, al_import_info *info, const char *src, al_err *e) {
    const cJSON *j = get(o, "use_attn_scale");
    if (j && !cJSON_IsTrue(j))
        return al_errf(e,
                       "%s: key 'use_attn_scale' must be true (scores are divided by "
                       "sqrt(d_head))",
                       src);
    j = get(o, "attn_scale");
    if (j && !cJSON_IsNull(j) && !cJSON_IsNumber(j))
        return al_errf(e, "%s: key 'attn_scale' must be a number", src);
    info->attn_scale = j && cJSON_IsNumber(j) ? j->valuedouble : -1;
    j = get(o, "attention_dir");
    if (j && !(cJSON_IsString(j) && !strcmp(j->valuestring, "causal")))
        return al_errf(e, "%s: key 'attention_dir' must be \"causal\"", src);
    const char *sz[2] = {"n_key_value_heads", "d_vocab_out"};
    int *dst[2] = {&info->n_kv_heads, &info->d_vocab_out};
    for (int i = 0; i < 2; i++) {
        j = get(o, sz[i]);
        double d = -1;
        if (j && !cJSON_IsNull(j) && al_json_int_in(j, -1, INT_MAX, &d))
            return al_errf(e, "%s: key '%s' must be null or an integer", src, sz[i]);
        *dst[i] = (int)d;
    }
    const char *caps[2] = {"attn_scores_soft_cap", "output_logits_soft_cap"};
    for (int i = 0; i < 2; i++) {
        j = get(o, caps[i]);
        if (j && !cJSON_IsNull(j) && !(cJSON_IsNumber(j) && j->valuedouble <= 0))
            return al_errf(e, "%s: key '%s' must be -1 (no soft cap)", src, caps[i]);
    }
    /* the hub's weight layouts: "neel" is TransformerLens's; the others
     * (neel-solu-old, mingpt) are converted by TransformerLens's own code */
    const char *ak[2] = {"architecture", "original_architecture"};
    for (int i = 0; i < 2; i++) {
        j = get(o, ak[i]);
        if (!j || cJSON_IsNull(j)) continue;
        if (!cJSON_IsString(j)) return al_errf(e, "%s: key '%s' must be a string", src, ak[i]);
        const char *v = j->valuestring;
        if ((i == 0 && strcmp(v, "neel")) || !strcmp(v, "neel-solu-old") || !strcmp(v, "mingpt"))
            return al_errf(e,
                           "%s: key '%s' is \"%.40s\": attnlab reads TransformerLens's own "
                           "weight layout (\"neel\") only",
                           src, ak[i], v);
    }
    return 0;
}

/* Every key of o known or named by the user; K_FALSE keys false or null;
 * K_RECORD keys into info->recorded, K_IGNORE (and K_MLP, and the
 * user's) into info->ignored. */
static int check_keys(const cJSON *o, const char *ignore, al_import_info *info, const char *src,
                      al_err *e) {
    cJSON *rec = cJSON_CreateObject();
    if (!rec) return al_errf(e, "out of memory");
    size_t ni = 0;
    int rc = 0;
    for (const cJSON *j = o->child; j && !rc; j = j->next) {
        char kd[64];
        static const key_row user = {NULL, K_IGNORE}; /* named by --ignore-key */
        const key_row *k = key_of(j->string);
        if (!k && listed(ignore, j->string)) k = &user;
        if (!k) {
            rc = al_errf(e,
                         "%s: unknown key '%s' (it may change the model; if it does not, "
                         "pass --ignore-key %s)",
                         src, al_json_key_disp(j->string, kd), al_json_key_disp(j->string, kd));
            break;
        }
        if (k->kind == K_FALSE && !cJSON_IsFalse(j) && !cJSON_IsNull(j))
            rc = al_errf(e, "%s: key '%s' must be false or null (attnlab models do not have it)",
                         src, j->string);
        else if (k->kind == K_RECORD)
            cJSON_AddItemToObject(rec, j->string, cJSON_Duplicate(j, 1));
        else if (k->kind == K_IGNORE || k->kind == K_MLP) {
            int w = snprintf(info->ignored + ni, sizeof info->ignored - ni, "%s%s", ni ? "," : "",
                             j->string);
            if (w > 0 && ni + (size_t)w < sizeof info->ignored) ni += (size_t)w;
        }
    }
    char *txt = rc ? NULL : al_json_print(0, rec);
    if (txt && strlen(txt) < sizeof info->recorded)
        snprintf(info->recorded, sizeof info->recorded, "%s", txt);
    free(txt);
    cJSON_Delete(rec);
    return rc;
}

static int read_config_json(const al_import_opts *o, const char *text, size_t n, const char *src,
                            al_config *c, int *norm_known, int *pos_known, al_import_info *info,
                            al_err *e) {
    cJSON *j;
    if (al_json_parse(text, n, src, &j, e)) return -1;
    int rc = -1;
    if (!cJSON_IsObject(j)) {
        al_errf(e, "%s: top level must be a JSON object", src);
        goto done;
    }
    if (al_json_unique_keys(j, src, e)) goto done;
    snprintf(info->config_format, sizeof info->config_format, "%s",
             is_hub(j) ? "hub" : "transformerlens");
    if (check_keys(j, o->ignore_keys, info, src, e) ||
        read_set(j, c, norm_known, pos_known, src, e) || read_check(j, info, src, e))
        goto done;
    rc = 0;
done:
    cJSON_Delete(j);
    return rc;
}

static int settle(const al_import_opts *o, const char *text, size_t n, const char *src,
                  al_config *c, int *norm_known, al_import_info *info, al_err *e) {
    memset(c, 0, sizeof *c);
    c->ln_eps = 1e-5;
    info->attn_scale = -1, info->n_kv_heads = -1, info->d_vocab_out = -1;
    snprintf(info->recorded, sizeof info->recorded, "{}");
    info->ignored[0] = 0;
    int pos_known = 0;
    *norm_known = 0;
    if (o->preset && (o->config || text)) return al_errf(e, "give --preset or --config, not both");
    if (o->preset) {
        const al_import_preset *p = al_import_preset_find(o->preset);
        if (!p) {
            const char *names[16];
            int n = 0;
            for (const al_import_preset *q = PRESETS; q->name && n < 16; q++) names[n++] = q->name;
            const char *near = al_nearest_word(o->preset, strlen(o->preset), names, n);
            return al_errf(e,
                           "unknown preset '%.60s'%s%s%s (attnlab import --list-presets "
                           "lists them)",
                           o->preset, near ? " (did you mean '" : "", near ? near : "",
                           near ? "'?)" : "");
        }
        *c = p->cfg;
        *norm_known = pos_known = 1;
        snprintf(info->config_format, sizeof info->config_format, "preset %s", p->name);
    } else if (text) {
        if (read_config_json(o, text, n, src, c, norm_known, &pos_known, info, e)) return -1;
    } else
        snprintf(info->config_format, sizeof info->config_format, "options");
    int *sizes[6] = {&c->n_layers, &c->d_model, &c->n_heads, &c->d_head, &c->n_ctx, &c->d_vocab};
    const int given[6] = {o->n_layers, o->d_model, o->n_heads, o->d_head, o->n_ctx, o->d_vocab};
    for (int i = 0; i < 6; i++)
        if (given[i] > 0) *sizes[i] = given[i];
    if (o->norm) {
        int n;
        if (!strcmp(o->norm, "none"))
            n = AL_NORM_NONE;
        else if (al_norm_type_parse(o->norm, &n))
            return al_errf(e, "--norm must be none, LN or LNPre (got '%.40s')", o->norm);
        c->norm_type = n, *norm_known = 1;
    }
    if (o->positions) {
        if (al_pos_type_parse(o->positions, &c->pos_type))
            return al_errf(e, "--positions must be standard or shortformer (got '%.40s')",
                           o->positions);
        pos_known = 1;
    }
    if (o->eps > 0) c->ln_eps = o->eps;
    if (!pos_known)
        return al_errf(e, "the positions are not known: give --positions standard|shortformer "
                          "(or --config, or --preset)");
    return 0;
}

int al_import_config(const al_import_opts *o, al_config *c, int *norm_known, al_import_info *info,
                     al_err *e) {
    unsigned char *text = NULL;
    size_t n = 0;
    if (o->config && !o->preset && al_read_file(o->config, &text, &n, 1u << 20, e)) return -1;
    int rc = settle(o, (const char *)text, n, o->config, c, norm_known, info, e);
    free(text);
    return rc;
}

int al_import_config_mem(const al_import_opts *o, const char *text, size_t n, const char *src,
                         al_config *c, int *norm_known, al_import_info *info, al_err *e) {
    return settle(o, text, n, src, c, norm_known, info, e);
}
