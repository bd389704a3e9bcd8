/* config.c -- JSON onto flag tables, config.json and state.json.
 *
 * All JSON here goes through al_json_parse, which bounds nesting before
 * cJSON recurses, and every value is checked for type and range before
 * anything is assigned, so a bad file changes nothing. Integers arrive
 * from cJSON as doubles, exact only up to 2^53: larger u64 values (seeds,
 * RNG words) are written as strings. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/config.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

/* ------------------------------------------------------------ parsing */

/* Deepest bracket nesting in text, stopping early past `limit`. Strings
 * are skipped so brackets inside them do not count. */
static int json_depth(const char *s, size_t n, int limit) {
    int d = 0, max = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
        } else if (c == '[' || c == '{') {
            if (++d > max) max = d;
            if (max > limit) break;
        } else if (c == ']' || c == '}') {
            d--;
        }
    }
    return max;
}

static int src_errf(al_err *e, const char *src, const char *what) {
    return src ? al_errf(e, "%s: %s", src, what) : al_errf(e, "%s", what);
}

int al_json_parse(const char *text, size_t len, const char *source_name,
                  struct cJSON **out, al_err *e) {
    *out = NULL;
    if (memchr(text, 0, len)) return src_errf(e, source_name, "JSON contains a NUL byte");
    if (json_depth(text, len, AL_JSON_MAX_DEPTH) > AL_JSON_MAX_DEPTH) {
        char m[80];
        snprintf(m, sizeof m, "JSON nested deeper than %d levels", AL_JSON_MAX_DEPTH);
        return src_errf(e, source_name, m);
    }
    char *buf = al_malloc(len + 1, 1, e);
    if (!buf) return -1;
    memcpy(buf, text, len);
    buf[len] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(buf, &end, 1);
    if (!root) {
        size_t pos = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : len;
        int line = 1, col = 1;
        for (size_t i = 0; i < pos; i++) {
            if (buf[i] == '\n') line++, col = 1;
            else col++;
        }
        free(buf);
        char m[96];
        snprintf(m, sizeof m, "invalid JSON at line %d, column %d", line, col);
        return src_errf(e, source_name, m);
    }
    free(buf);
    *out = root;
    return 0;
}

/* A key safe to print in a one-line message. */
static const char *key_disp(const char *k, char buf[64]) {
    size_t i = 0;
    for (; k[i] && i < 60; i++) buf[i] = isprint((unsigned char)k[i]) ? k[i] : '?';
    if (k[i]) buf[i - 3] = buf[i - 2] = buf[i - 1] = '.';
    buf[i] = 0;
    return buf;
}

/* An integer-valued JSON number within [lo, hi]. */
static int json_int_in(const cJSON *j, double lo, double hi, double *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= lo && d <= hi) || d != floor(d)) return -1;
    *out = d;
    return 0;
}

/* u64 from an exact JSON integer or a decimal string. */
static int json_u64(const cJSON *j, uint64_t *out) {
    double d;
    if (json_int_in(j, 0, MAX_EXACT, &d) == 0) {
        *out = (uint64_t)d;
        return 0;
    }
    if (!cJSON_IsString(j) || !j->valuestring[0] || strlen(j->valuestring) > 20) return -1;
    uint64_t x = 0;
    for (const char *p = j->valuestring; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        unsigned v = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - v) / 10) return -1;
        x = x * 10 + v;
    }
    *out = x;
    return 0;
}

/* cJSON 1.7.15 prints a double with 15 significant digits whenever that
 * reads back within a relative DBL_EPSILON, which is not exact (0.1+0.2
 * comes out as 0.3). Numbers we write are therefore raw items holding
 * the shortest text that reads back bit for bit. */
static cJSON *num_item(double d) {
    if (!isfinite(d)) return cJSON_CreateNull();
    char b[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, d);
        if (strtod(b, NULL) == d) break;
    }
    return cJSON_CreateRaw(b);
}

/* Turn every number in a parsed tree into an exact raw item, so that
 * re-printing it (the "train" object of state.json) loses nothing.
 * Depth is bounded by al_json_parse. */
static int exact_numbers(cJSON *j) {
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            cJSON *r = num_item(j->valuedouble);
            if (!r) return -1;
            j->type = r->type;
            j->valuestring = r->valuestring;
            r->valuestring = NULL;
            cJSON_Delete(r);
        } else if ((cJSON_IsArray(j) || cJSON_IsObject(j)) && exact_numbers(j->child) != 0) {
            return -1;
        }
    }
    return 0;
}

static cJSON *u64_item(uint64_t x) {
    if (x <= (uint64_t)MAX_EXACT) return num_item((double)x);
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, x);
    return cJSON_CreateString(b);
}

/* ------------------------------------------------------ flags <- JSON */

typedef struct arena_node {
    struct arena_node *next;
    char s[];
} arena_node;
static arena_node *g_arena;

static const char *arena_strdup(const char *s) {
    size_t n = strlen(s);
    arena_node *a = malloc(sizeof *a + n + 1);
    if (!a) return NULL;
    memcpy(a->s, s, n + 1);
    a->next = g_arena;
    g_arena = a;
    return a->s;
}

void al_config_arena_free(void) {
    while (g_arena) {
        arena_node *n = g_arena->next;
        free(g_arena);
        g_arena = n;
    }
}

/* Flag names compare with '-' and '_' equal. */
static int name_eq(const char *flag, const char *key) {
    for (; *flag && *key; flag++, key++) {
        char a = *flag == '_' ? '-' : *flag, b = *key == '_' ? '-' : *key;
        if (a != b) return 0;
    }
    return *flag == 0 && *key == 0;
}

static const char *type_need(al_flag_type t) {
    switch (t) {
    case AL_STR: return "a string";
    case AL_INT: return "an integer";
    case AL_U64: return "a non-negative integer";
    case AL_FLOAT: return "a finite number";
    case AL_BOOL: return "true or false";
    }
    return "?";
}

static int value_ok(const al_flag *f, const cJSON *v) {
    double d;
    uint64_t u;
    switch (f->type) {
    case AL_STR: return cJSON_IsString(v) || cJSON_IsNull(v);
    case AL_INT: return json_int_in(v, INT_MIN, INT_MAX, &d) == 0;
    case AL_U64: return json_u64(v, &u) == 0;
    case AL_FLOAT: return cJSON_IsNumber(v) && isfinite(v->valuedouble);
    case AL_BOOL: return cJSON_IsBool(v);
    }
    return 0;
}

static int assign(al_flag *f, const cJSON *v) {
    switch (f->type) {
    case AL_STR:
        if (cJSON_IsNull(v)) {
            *(const char **)f->dst = NULL;
        } else {
            const char *s = arena_strdup(v->valuestring);
            if (!s) return -1;
            *(const char **)f->dst = s;
        }
        break;
    case AL_INT: *(int *)f->dst = (int)v->valuedouble; break;
    case AL_U64: json_u64(v, (uint64_t *)f->dst); break;
    case AL_FLOAT: *(double *)f->dst = v->valuedouble; break;
    case AL_BOOL: *(int *)f->dst = cJSON_IsTrue(v); break;
    }
    return 0;
}

/* Validate every key first, then assign: a bad file changes nothing. */
int al_flags_apply_json(al_flag *flags, const char *json_text,
                        const char *source_name, al_err *e) {
    const char *src = source_name ? source_name : "config";
    cJSON *root;
    if (al_json_parse(json_text, strlen(json_text), src, &root, e) != 0) return -1;
    int nf = 0, rc = -1;
    while (flags[nf].name) nf++;
    al_flag **target = NULL;
    int *used = al_calloc((size_t)nf + 1, sizeof *used, e);
    if (!used) goto done;
    if (!cJSON_IsObject(root)) {
        al_errf(e, "%s: top level must be a JSON object", src);
        goto done;
    }
    int nk = cJSON_GetArraySize(root);
    target = al_calloc((size_t)nk + 1, sizeof *target, e);
    if (!target) goto done;
    int k = 0;
    for (cJSON *j = root->child; j; j = j->next, k++) {
        char kb[64];
        int i = 0;
        while (i < nf && !name_eq(flags[i].name, j->string)) i++;
        if (i == nf) {
            al_errf(e, "%s: unknown key '%s'", src, key_disp(j->string, kb));
            goto done;
        }
        if (used[i]++) {
            al_errf(e, "%s: key '%s' given twice", src, key_disp(j->string, kb));
            goto done;
        }
        if (!value_ok(&flags[i], j)) {
            al_errf(e, "%s: key '%s' must be %s", src, key_disp(j->string, kb),
                    type_need(flags[i].type));
            goto done;
        }
        target[k] = &flags[i];
    }
    k = 0;
    for (cJSON *j = root->child; j; j = j->next, k++) {
        if (target[k]->seen) continue; /* the command line wins */
        if (assign(target[k], j) != 0) {
            al_errf(e, "%s: out of memory", src);
            goto done;
        }
        target[k]->seen = 1; /* and a later JSON source does not override */
    }
    rc = 0;
done:
    free(target);
    free(used);
    cJSON_Delete(root);
    return rc;
}

static cJSON *flag_item(const al_flag *f) {
    switch (f->type) {
    case AL_STR: {
        const char *s = *(const char *const *)f->dst;
        return s ? cJSON_CreateString(s) : cJSON_CreateNull();
    }
    case AL_INT: return num_item(*(const int *)f->dst);
    case AL_U64: return u64_item(*(const uint64_t *)f->dst);
    case AL_FLOAT: return num_item(*(const double *)f->dst);
    case AL_BOOL: return cJSON_CreateBool(*(const int *)f->dst);
    }
    return NULL;
}

/* Keys use '_' (the JSON-friendly spelling); apply_json accepts both. */
char *al_flags_to_json(const al_flag *flags) {
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    for (const al_flag *f = flags; ok && f->name; f++) {
        char key[128];
        snprintf(key, sizeof key, "%s", f->name);
        for (char *p = key; *p; p++)
            if (*p == '-') *p = '_';
        cJSON *v = flag_item(f);
        ok = v && cJSON_AddItemToObject(o, key, v);
        if (!ok) cJSON_Delete(v);
    }
    char *s = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

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
    cJSON_AddNullToObject(o, "normalization_type");
    cJSON_AddStringToObject(o, "positional_embedding_type", "standard");
    cJSON_AddNullToObject(o, "d_mlp");
    cJSON_AddNullToObject(o, "act_fn");
    cJSON_AddStringToObject(o, "original_architecture", "attnlab");
    cJSON_AddBoolToObject(o, "tied_embeddings", c->tied_embeddings != 0);
    cJSON_AddItemToObject(o, "seed", u64_item(c->seed));
    cJSON_AddStringToObject(o, "attnlab_version", AL_VERSION);
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

static int get_dim(const cJSON *o, const char *key, int *out, const char *src, al_err *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    double d;
    if (!j) return al_errf(e, "%s: key '%s' missing", src, key);
    if (json_int_in(j, 1, INT_MAX, &d) != 0)
        return al_errf(e, "%s: key '%s' must be an integer >= 1", src, key);
    *out = (int)d;
    return 0;
}

/* TransformerLens keys we do not use must still say "attention-only,
 * no LayerNorm, learned positions" if present, or the weights would be
 * read as a different model. Other keys are ignored (TL has many). */
static int check_tl_keys(const cJSON *o, const char *src, al_err *e) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "attn_only");
    if (j && !cJSON_IsTrue(j))
        return al_errf(e, "%s: key 'attn_only' must be true (attnlab models have no MLP)", src);
    j = cJSON_GetObjectItemCaseSensitive(o, "normalization_type");
    if (j && !cJSON_IsNull(j))
        return al_errf(e, "%s: key 'normalization_type' must be null (no LayerNorm)", src);
    j = cJSON_GetObjectItemCaseSensitive(o, "positional_embedding_type");
    if (j && !(cJSON_IsString(j) && strcmp(j->valuestring, "standard") == 0))
        return al_errf(e, "%s: key 'positional_embedding_type' must be \"standard\"", src);
    j = cJSON_GetObjectItemCaseSensitive(o, "d_mlp");
    if (j && !cJSON_IsNull(j))
        return al_errf(e, "%s: key 'd_mlp' must be null (no MLP)", src);
    return 0;
}

int al_config_from_json(const char *json_text, al_config *c,
                        const char *source_name, al_err *e) {
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
    if (get_dim(o, "n_layers", &t.n_layers, src, e) || get_dim(o, "d_model", &t.d_model, src, e) ||
        get_dim(o, "n_heads", &t.n_heads, src, e) || get_dim(o, "d_head", &t.d_head, src, e) ||
        get_dim(o, "n_ctx", &t.n_ctx, src, e) || get_dim(o, "d_vocab", &t.d_vocab, src, e) ||
        check_tl_keys(o, src, e))
        goto done;
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "tied_embeddings");
    if (j && !cJSON_IsBool(j)) {
        al_errf(e, "%s: key 'tied_embeddings' must be true or false", src);
        goto done;
    }
    t.tied_embeddings = cJSON_IsTrue(j);
    j = cJSON_GetObjectItemCaseSensitive(o, "seed");
    if (j && json_u64(j, &t.seed) != 0) {
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
    if (s->train_json && (al_json_parse(s->train_json, strlen(s->train_json), NULL,
                                        &train, NULL) != 0 ||
                          !cJSON_IsObject(train) || exact_numbers(train) != 0)) {
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
    cJSON_AddItemToObject(o, "step", num_item((double)s->step));
    cJSON_AddItemToObject(o, "tokens_seen", num_item(s->tokens_seen));
    cJSON_AddItemToObject(o, "last_train_loss", num_item(s->last_train_loss));
    cJSON_AddItemToObject(o, "last_val_loss", num_item(s->last_val_loss));
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
            cJSON_AddItemToObject(c, "run_id", num_item((double)s->curve_run));
        }
    }
    char *out = cJSON_Print(o);
    cJSON_Delete(o);
    return out;
}

static int hex16(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsString(j) || strlen(j->valuestring) != 16) return -1;
    uint64_t x = 0;
    for (const char *p = j->valuestring; *p; p++) {
        int v = isdigit((unsigned char)*p) ? *p - '0'
                : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10 : -1;
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
    if (!j || json_int_in(j, 0, MAX_EXACT, &d) != 0 || d > (double)LONG_MAX)
        return al_errf(e, "%s: key 'step' must be a non-negative integer", src);
    t->step = (long)d;
    j = cJSON_GetObjectItemCaseSensitive(o, "tokens_seen");
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0) || !isfinite(j->valuedouble))
        return al_errf(e, "%s: key 'tokens_seen' must be a non-negative number", src);
    t->tokens_seen = j->valuedouble;
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
        if (exact_numbers(j->child) != 0) return al_errf(e, "%s: out of memory", src);
        t->train_json = cJSON_PrintUnformatted(j);
        if (!t->train_json) return al_errf(e, "%s: out of memory", src);
    }
    j = cJSON_GetObjectItemCaseSensitive(o, "curve");
    if (j && !cJSON_IsNull(j)) {
        const cJSON *db = cJSON_GetObjectItemCaseSensitive(j, "db");
        const cJSON *run = cJSON_GetObjectItemCaseSensitive(j, "run_id");
        if (!cJSON_IsObject(j) || !cJSON_IsString(db) || !run || json_int_in(run, 1, MAX_EXACT, &d) != 0)
            return al_errf(e, "%s: key 'curve' must be {\"db\": path, \"run_id\": integer >= 1}", src);
        t->curve_run = (int64_t)d;
        t->curve_db = strdup(db->valuestring);
        if (!t->curve_db) return al_errf(e, "%s: out of memory", src);
    }
    return 0;
}

int al_state_from_json(const char *json_text, al_train_state *s,
                       const char *source_name, al_err *e) {
    const char *src = source_name ? source_name : "state.json";
    memset(s, 0, sizeof *s);
    cJSON *o;
    if (al_json_parse(json_text, strlen(json_text), src, &o, e) != 0) return -1;
    al_train_state t;
    memset(&t, 0, sizeof t);
    int rc = cJSON_IsObject(o) ? state_fields(o, &t, src, e)
                               : al_errf(e, "%s: top level must be a JSON object", src);
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
