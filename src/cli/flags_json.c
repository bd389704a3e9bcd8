/* flags_json.c -- JSON onto flag tables and flag tables as JSON: the
 * --config file of `attnlab train`, the options saved in state.json, and
 * experiment files (see args.h). Every value is checked for type and range
 * before anything is assigned, so a bad file changes nothing. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/args.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/json.h"

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

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

const al_flag *al_flag_for_key(const al_flag *flags, const char *key) {
    for (const al_flag *f = flags; f && f->name; f++)
        if (name_eq(f->name, key)) return f;
    return NULL;
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

int al_flag_json_ok(const al_flag *f, const struct cJSON *v) {
    double d;
    uint64_t u;
    switch (f->type) {
    case AL_STR: return cJSON_IsString(v) || cJSON_IsNull(v);
    case AL_INT: return al_json_int_in(v, INT_MIN, INT_MAX, &d) == 0;
    case AL_U64: return al_json_u64(v, &u) == 0;
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
    case AL_U64: al_json_u64(v, (uint64_t *)f->dst); break;
    case AL_FLOAT: *(double *)f->dst = v->valuedouble; break;
    case AL_BOOL: *(int *)f->dst = cJSON_IsTrue(v); break;
    }
    return 0;
}

/* Validate every key first, then assign: a bad file changes nothing. */
int al_flags_apply_json(al_flag *flags, const char *json_text, const char *source_name, al_err *e) {
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
        const al_flag *f = al_flag_for_key(flags, j->string);
        int i = f ? (int)(f - flags) : nf;
        if (i == nf) {
            al_errf(e, "%s: unknown key '%s'", src, al_json_key_disp(j->string, kb));
            goto done;
        }
        if (used[i]++) {
            al_errf(e, "%s: key '%s' given twice", src, al_json_key_disp(j->string, kb));
            goto done;
        }
        if (!al_flag_json_ok(f, j)) {
            al_errf(e, "%s: key '%s' must be %s", src, al_json_key_disp(j->string, kb),
                    type_need(f->type));
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
    case AL_INT: return al_json_num_item(*(const int *)f->dst);
    case AL_U64: return al_json_u64_item(*(const uint64_t *)f->dst);
    case AL_FLOAT: return al_json_num_item(*(const double *)f->dst);
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
    char *s = ok ? al_json_print(1, o) : NULL;
    cJSON_Delete(o);
    return s;
}
