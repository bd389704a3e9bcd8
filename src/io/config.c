/* config.c -- config.json and state.json of a model directory.
 *
 * All JSON here goes through al_json_parse, which bounds nesting before
 * cJSON recurses, and every value is checked for type and range before
 * anything is assigned, so a bad file changes nothing. Integers arrive
 * from cJSON as doubles, exact only up to 2^53: larger u64 values (seeds,
 * RNG words) are written as strings. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/config.h"

#include "attnlab/json.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

/* -------------------------------------------------------- config.json */

char *al_config_to_json(const al_config *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "d_model", c->d_model);
    cJSON_AddNumberToObject(o, "n_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "d_head", c->d_head);
    cJSON_AddNumberToObject(o, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(o, "d_vocab", c->d_vocab);
    cJSON_AddTrueToObject(o, "attn_only");
    const char *nt = al_norm_type_name(c->norm_type);
    if (nt)
        cJSON_AddStringToObject(o, "normalization_type", nt);
    else
        cJSON_AddNullToObject(o, "normalization_type");
    /* written for every model, so TransformerLens reads the eps we use */
    cJSON_AddItemToObject(o, "eps", al_json_num_item(c->ln_eps > 0 ? c->ln_eps : 1e-5));
    cJSON *bs = cJSON_AddArrayToObject(o, "biases");
    for (unsigned b = 1; bs && b <= AL_BIAS_U; b <<= 1)
        if (c->biases & b) cJSON_AddItemToArray(bs, cJSON_CreateString(al_bias_name(b)));
    cJSON *pr = c->processed ? cJSON_AddArrayToObject(o, "processing") : NULL;
    for (unsigned b = 1; pr && b <= AL_PROC_FOLD_VALUE_BIASES; b <<= 1)
        if (c->processed & b) cJSON_AddItemToArray(pr, cJSON_CreateString(al_process_name(b)));
    const char *pt = al_pos_type_name(c->pos_type);
    cJSON_AddStringToObject(o, "positional_embedding_type", pt ? pt : "standard");
    cJSON_AddNullToObject(o, "d_mlp");
    cJSON_AddNullToObject(o, "act_fn");
    cJSON_AddStringToObject(o, "original_architecture", "attnlab");
    cJSON_AddBoolToObject(o, "tied_embeddings", c->tied_embeddings != 0);
    cJSON_AddItemToObject(o, "seed", al_json_u64_item(c->seed));
    cJSON_AddStringToObject(o, "attnlab_version", AL_VERSION);
    char *s = al_json_print(1, o);
    cJSON_Delete(o);
    return s;
}

static int get_dim(const cJSON *o, const char *key, int *out, const char *src, al_err *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    double d;
    if (!j) return al_errf(e, "%s: key '%s' missing", src, key);
    if (al_json_int_in(j, 1, INT_MAX, &d) != 0)
        return al_errf(e, "%s: key '%s' must be an integer >= 1", src, key);
    *out = (int)d;
    return 0;
}

/* TransformerLens keys that would change the model from what attnlab
 * computes: each is refused unless absent or at the value that leaves an
 * attention-only model as ours (TransformerLens has many other keys, which
 * do not change its numbers: hook switches, names, devices; those are
 * ignored). */
static int check_tl_other(const cJSON *o, const al_config *t, const char *src, al_err *e) {
    static const char *const must_false[] = {"use_local_attn",
                                             "scale_attn_by_inverse_layer_idx",
                                             "final_rms",
                                             "post_embedding_ln",
                                             "use_qk_norm",
                                             "use_normalization_before_and_after"};
    for (size_t i = 0; i < sizeof must_false / sizeof must_false[0]; i++) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, must_false[i]);
        if (j && !cJSON_IsFalse(j) && !cJSON_IsNull(j))
            return al_errf(e, "%s: key '%s' must be false (attnlab models do not have it)", src,
                           must_false[i]);
    }
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "use_attn_scale");
    if (j && !cJSON_IsTrue(j))
        return al_errf(e,
                       "%s: key 'use_attn_scale' must be true (scores are divided by "
                       "sqrt(d_head))",
                       src);
    j = cJSON_GetObjectItemCaseSensitive(o, "attn_scale");
    double want = sqrt((double)t->d_head);
    if (j && !cJSON_IsNull(j) &&
        !(cJSON_IsNumber(j) &&
          (j->valuedouble == -1.0 || fabs(j->valuedouble - want) <= 1e-6 * want)))
        return al_errf(e, "%s: key 'attn_scale' must be sqrt(d_head) = %g", src, want);
    j = cJSON_GetObjectItemCaseSensitive(o, "attention_dir");
    if (j && !(cJSON_IsString(j) && !strcmp(j->valuestring, "causal")))
        return al_errf(e, "%s: key 'attention_dir' must be \"causal\"", src);
    j = cJSON_GetObjectItemCaseSensitive(o, "n_key_value_heads");
    if (j && !cJSON_IsNull(j) && !(cJSON_IsNumber(j) && j->valuedouble == t->n_heads))
        return al_errf(e, "%s: key 'n_key_value_heads' must be null or n_heads (%d)", src,
                       t->n_heads);
    j = cJSON_GetObjectItemCaseSensitive(o, "d_vocab_out");
    if (j && !cJSON_IsNull(j) &&
        !(cJSON_IsNumber(j) && (j->valuedouble == -1.0 || j->valuedouble == t->d_vocab)))
        return al_errf(e, "%s: key 'd_vocab_out' must be d_vocab (%d)", src, t->d_vocab);
    static const char *const caps[] = {"attn_scores_soft_cap", "output_logits_soft_cap"};
    for (size_t i = 0; i < 2; i++) {
        j = cJSON_GetObjectItemCaseSensitive(o, caps[i]);
        if (j && !cJSON_IsNull(j) && !(cJSON_IsNumber(j) && j->valuedouble <= 0))
            return al_errf(e, "%s: key '%s' must be -1 (no soft cap)", src, caps[i]);
    }
    return 0;
}

/* "processing": an array of distinct names of the weight processing done
 * (process.h; absent: none). */
static int get_processing(const cJSON *o, unsigned *bits, const char *src, al_err *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "processing");
    *bits = 0;
    if (!j) return 0;
    if (!cJSON_IsArray(j)) return al_errf(e, "%s: key 'processing' must be an array of names", src);
    for (const cJSON *p = j->child; p; p = p->next) {
        unsigned bit = cJSON_IsString(p) ? al_process_parse(p->valuestring) : 0;
        if (!bit)
            return al_errf(e,
                           "%s: key 'processing' holds something other than fold_ln, "
                           "center_writing_weights, center_unembed, fold_value_biases",
                           src);
        if (*bits & bit)
            return al_errf(e, "%s: key 'processing' lists %s twice", src, al_process_name(bit));
        *bits |= bit;
    }
    return 0;
}

/* "biases": an array of distinct names from b_Q, b_K, b_V, b_O, b_U
 * (absent: none, as files written before biases existed). */
static int get_biases(const cJSON *o, unsigned *bits, const char *src, al_err *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "biases");
    *bits = 0;
    if (!j) return 0;
    if (!cJSON_IsArray(j))
        return al_errf(e, "%s: key 'biases' must be an array of names (b_Q, b_K, b_V, b_O, b_U)",
                       src);
    for (const cJSON *b = j->child; b; b = b->next) {
        unsigned bit = cJSON_IsString(b) ? al_bias_parse(b->valuestring) : 0;
        if (!bit)
            return al_errf(e,
                           "%s: key 'biases' holds something other than b_Q, b_K, b_V, b_O, "
                           "b_U",
                           src);
        if (*bits & bit)
            return al_errf(e, "%s: key 'biases' lists %s twice", src, al_bias_name(bit));
        *bits |= bit;
    }
    return 0;
}

/* The TransformerLens keys of the architecture: attn_only must be true,
 * d_mlp null; normalization_type null, "LN" or "LNPre" (into norm_type),
 * eps a positive number (1e-5 when absent), positional_embedding_type
 * "standard" (also when absent) or "shortformer" (W_pos added to every
 * head's query and key inputs only); then the keys of check_tl_other. */
static int check_tl_keys(const cJSON *o, al_config *t, const char *src, al_err *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "attn_only");
    if (j && !cJSON_IsTrue(j))
        return al_errf(e, "%s: key 'attn_only' must be true (attnlab models have no MLP)", src);
    j = cJSON_GetObjectItemCaseSensitive(o, "normalization_type");
    t->norm_type = AL_NORM_NONE;
    if (j && !cJSON_IsNull(j) &&
        !(cJSON_IsString(j) && al_norm_type_parse(j->valuestring, &t->norm_type) == 0))
        return al_errf(e,
                       "%s: key 'normalization_type' must be null, \"LN\" or \"LNPre\" "
                       "(RMS norms are not supported)",
                       src);
    j = cJSON_GetObjectItemCaseSensitive(o, "eps");
    t->ln_eps = 1e-5;
    if (j && !(cJSON_IsNumber(j) && j->valuedouble > 0 && j->valuedouble <= 1))
        return al_errf(e, "%s: key 'eps' must be a number in (0, 1]", src);
    if (j) t->ln_eps = j->valuedouble;
    j = cJSON_GetObjectItemCaseSensitive(o, "positional_embedding_type");
    t->pos_type = AL_POS_STANDARD;
    if (j && !(cJSON_IsString(j) && al_pos_type_parse(j->valuestring, &t->pos_type) == 0))
        return al_errf(e,
                       "%s: key 'positional_embedding_type' must be \"standard\" or "
                       "\"shortformer\"",
                       src);
    j = cJSON_GetObjectItemCaseSensitive(o, "d_mlp");
    if (j && !cJSON_IsNull(j)) return al_errf(e, "%s: key 'd_mlp' must be null (no MLP)", src);
    return check_tl_other(o, t, src, e);
}

int al_config_from_json(const char *json_text, al_config *c, const char *source_name, al_err *e) {
    const char *src = source_name ? source_name : "config.json";
    cJSON *o;
    if (al_json_parse(json_text, strlen(json_text), src, &o, e) != 0) return -1;
    al_config t;
    memset(&t, 0, sizeof t);
    int rc = -1;
    if (!cJSON_IsObject(o)) {
        al_errf(e, "%s: top level must be a JSON object", src);
        goto done;
    }
    if (al_json_unique_keys(o, src, e)) goto done;
    if (get_dim(o, "n_layers", &t.n_layers, src, e) || get_dim(o, "d_model", &t.d_model, src, e) ||
        get_dim(o, "n_heads", &t.n_heads, src, e) || get_dim(o, "d_head", &t.d_head, src, e) ||
        get_dim(o, "n_ctx", &t.n_ctx, src, e) || get_dim(o, "d_vocab", &t.d_vocab, src, e) ||
        check_tl_keys(o, &t, src, e) || get_biases(o, &t.biases, src, e) ||
        get_processing(o, &t.processed, src, e))
        goto done;
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "tied_embeddings");
    if (j && !cJSON_IsBool(j)) {
        al_errf(e, "%s: key 'tied_embeddings' must be true or false", src);
        goto done;
    }
    t.tied_embeddings = cJSON_IsTrue(j);
    j = cJSON_GetObjectItemCaseSensitive(o, "seed");
    if (j && al_json_u64(j, &t.seed) != 0) {
        al_errf(e, "%s: key 'seed' must be a non-negative integer", src);
        goto done;
    }
    if (al_config_validate(&t, e) != 0) {
        al_err_prefix(e, "%s", src);
        goto done;
    }
    *c = t;
    rc = 0;
done:
    cJSON_Delete(o);
    return rc;
}

/* --------------------------------------------------------- state.json */

char *al_state_to_json(const al_train_state *s) {
    cJSON *train = NULL;
    if (s->train_json &&
        (al_json_parse(s->train_json, strlen(s->train_json), NULL, &train, NULL) != 0 ||
         !cJSON_IsObject(train) || al_json_exact_numbers(train) != 0)) {
        cJSON_Delete(train);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject(), *rng = cJSON_CreateArray();
    if (!o || !rng) {
        cJSON_Delete(o);
        cJSON_Delete(rng);
        cJSON_Delete(train);
        return NULL;
    }
    cJSON_AddStringToObject(o, "attnlab_version", AL_VERSION);
    cJSON_AddItemToObject(o, "step", al_json_num_item((double)s->step));
    cJSON_AddItemToObject(o, "tokens_seen", al_json_num_item(s->tokens_seen));
    if (s->data_tokens > 0)
        cJSON_AddItemToObject(o, "data_tokens", al_json_num_item(s->data_tokens));
    cJSON_AddItemToObject(o, "last_train_loss", al_json_num_item(s->last_train_loss));
    cJSON_AddItemToObject(o, "last_val_loss", al_json_num_item(s->last_val_loss));
    for (int i = 0; i < 4; i++) {
        char h[17];
        snprintf(h, sizeof h, "%016" PRIx64, s->rng.s[i]);
        cJSON_AddItemToArray(rng, cJSON_CreateString(h));
    }
    cJSON_AddItemToObject(o, "rng", rng);
    cJSON_AddItemToObject(o, "train", train ? train : cJSON_CreateNull());
    if (s->curve_run > 0 && s->curve_db) {
        cJSON *c = cJSON_AddObjectToObject(o, "curve");
        if (c) {
            cJSON_AddStringToObject(c, "db", s->curve_db);
            cJSON_AddItemToObject(c, "run_id", al_json_num_item((double)s->curve_run));
        }
    }
    char *out = al_json_print(1, o);
    cJSON_Delete(o);
    return out;
}

static int hex16(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsString(j) || strlen(j->valuestring) != 16) return -1;
    uint64_t x = 0;
    for (const char *p = j->valuestring; *p; p++) {
        int v = isdigit((unsigned char)*p) ? *p - '0'
                : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10
                                           : -1;
        if (v < 0) return -1;
        x = x << 4 | (uint64_t)v;
    }
    *out = x;
    return 0;
}

static int get_loss(const cJSON *o, const char *key, double *out, const char *src, al_err *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) {
        *out = NAN;
        return 0;
    }
    if (!cJSON_IsNumber(j)) return al_errf(e, "%s: key '%s' must be a number or null", src, key);
    *out = j->valuedouble;
    return 0;
}

static int state_fields(const cJSON *o, al_train_state *t, const char *src, al_err *e) {
    double d;
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "step");
    if (!j || al_json_int_in(j, 0, MAX_EXACT, &d) != 0 || d > (double)LONG_MAX)
        return al_errf(e, "%s: key 'step' must be a non-negative integer", src);
    t->step = (long)d;
    j = cJSON_GetObjectItemCaseSensitive(o, "tokens_seen");
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0) || !isfinite(j->valuedouble))
        return al_errf(e, "%s: key 'tokens_seen' must be a non-negative number", src);
    t->tokens_seen = j->valuedouble;
    j = cJSON_GetObjectItemCaseSensitive(o, "data_tokens"); /* optional: newer checkpoints */
    if (j && (!cJSON_IsNumber(j) || !(j->valuedouble >= 0) || !isfinite(j->valuedouble)))
        return al_errf(e, "%s: key 'data_tokens' must be a non-negative number", src);
    t->data_tokens = j ? j->valuedouble : 0;
    if (get_loss(o, "last_train_loss", &t->last_train_loss, src, e) ||
        get_loss(o, "last_val_loss", &t->last_val_loss, src, e))
        return -1;
    j = cJSON_GetObjectItemCaseSensitive(o, "rng");
    if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 4)
        return al_errf(e, "%s: key 'rng' must be an array of 4 hex strings", src);
    int i = 0;
    for (const cJSON *w = j->child; w; w = w->next, i++)
        if (hex16(w, &t->rng.s[i]) != 0)
            return al_errf(e, "%s: key 'rng' entry %d must be 16 hex digits", src, i);
    if (!(t->rng.s[0] | t->rng.s[1] | t->rng.s[2] | t->rng.s[3]))
        return al_errf(e, "%s: key 'rng' is all zero (not a valid generator state)", src);
    j = cJSON_GetObjectItemCaseSensitive(o, "train");
    if (j && !cJSON_IsNull(j)) {
        if (!cJSON_IsObject(j)) return al_errf(e, "%s: key 'train' must be an object", src);
        if (al_json_exact_numbers(j->child) != 0) return al_errf(e, "%s: out of memory", src);
        t->train_json = al_json_print(0, j);
        if (!t->train_json) return al_errf(e, "%s: out of memory", src);
    }
    j = cJSON_GetObjectItemCaseSensitive(o, "curve");
    if (j && !cJSON_IsNull(j)) {
        const cJSON *db = cJSON_GetObjectItemCaseSensitive(j, "db");
        const cJSON *run = cJSON_GetObjectItemCaseSensitive(j, "run_id");
        if (!cJSON_IsObject(j) || !cJSON_IsString(db) || !run ||
            al_json_int_in(run, 1, MAX_EXACT, &d) != 0)
            return al_errf(e, "%s: key 'curve' must be {\"db\": path, \"run_id\": integer >= 1}",
                           src);
        t->curve_run = (int64_t)d;
        t->curve_db = strdup(db->valuestring);
        if (!t->curve_db) return al_errf(e, "%s: out of memory", src);
    }
    return 0;
}

int al_state_from_json(const char *json_text, al_train_state *s, const char *source_name,
                       al_err *e) {
    const char *src = source_name ? source_name : "state.json";
    memset(s, 0, sizeof *s);
    cJSON *o;
    if (al_json_parse(json_text, strlen(json_text), src, &o, e) != 0) return -1;
    al_train_state t;
    memset(&t, 0, sizeof t);
    int rc = !cJSON_IsObject(o) ? al_errf(e, "%s: top level must be a JSON object", src)
             : al_json_unique_keys(o, src, e) ? -1
                                              : state_fields(o, &t, src, e);
    cJSON_Delete(o);
    if (rc != 0) {
        al_state_free(&t);
        return -1;
    }
    *s = t;
    return 0;
}

void al_state_free(al_train_state *s) {
    if (!s) return;
    free(s->train_json);
    free(s->curve_db);
    s->train_json = s->curve_db = NULL;
    s->curve_run = 0;
}
