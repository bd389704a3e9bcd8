/* sweep.c -- the "sweep" block of an experiment file: its key paths
 * checked against the file, its tasks enumerated, task K substituted
 * into a copy of the file and handed to the ordinary loader (sweep.h).
 *
 * Everything a task is follows from the parsed file and K alone, so any
 * process (a --jobs child, a Slurm array task) gets the same task from
 * the same file and index, with nothing shared between them. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/sweep.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/json.h"

/* One step of a key path: an object's key, or a list index. */
typedef struct step {
    char *name; /* NULL: index */
    int index;
} step;

typedef struct skey {
    char *path; /* as written */
    step *st;
    int n_st;
    const cJSON *vals; /* the list, inside al_sweep.sweep */
    int n_vals;
} skey;

struct al_sweep {
    char src[1024];
    cJSON *root; /* the file without "sweep" */
    cJSON *sweep; /* the detached block */
    skey keys[AL_SWEEP_MAX_KEYS];
    int n_keys;
    long n_tasks;
};

/* A key path as it may appear in a one-line message: printable, at most
 * 100 characters. */
static const char *disp(const char *k, char buf[112]) {
    size_t i = 0;
    for (; k[i] && i < 100; i++) buf[i] = isprint((unsigned char)k[i]) ? k[i] : '?';
    if (k[i]) buf[i++] = '~';
    buf[i] = 0;
    return buf;
}

static int kbad(const al_sweep *s, const char *key, al_err *e, const char *what) {
    char b[112];
    return al_errf(e, "%s: sweep[\"%s\"]: %s", s->src, disp(key, b), what);
}

/* path -> steps: name ('.' name | '[' digits ']')*, names non-empty and
 * free of '.', '[' and ']'; indexes below 1e6. */
static int parse_path(const char *p, skey *k) {
    int cap = 0;
    const char *c = p;
    for (;;) {
        step *n = al_grow(k->st, &cap, k->n_st, sizeof *n, 4, NULL);
        if (!n) return -1;
        k->st = n;
        step *s = &k->st[k->n_st];
        if (*c == '[' && k->n_st == 0) return -1; /* the file is an object: a name first */
        if (*c == '[') {
            char *end;
            if (!isdigit((unsigned char)c[1])) return -1;
            long v = strtol(c + 1, &end, 10);
            if (*end != ']' || v >= 1000000 || end - c > 8) return -1;
            s->name = NULL;
            s->index = (int)v;
            k->n_st++;
            c = end + 1;
        } else {
            if (k->n_st > 0) {
                if (*c != '.') return -1;
                c++;
            }
            size_t n = strcspn(c, ".[]");
            if (n == 0) return -1;
            if (!(s->name = strndup(c, n))) return -1;
            k->n_st++;
            c += n;
        }
        if (!*c) return 0;
        if (*c == ']') return -1;
    }
}

/* The path's steps up to (not including) step n, written back as text. */
static void prefix(const skey *k, int n, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o < cap; i++) {
        char b[112];
        if (k->st[i].name)
            o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? "." : "", disp(k->st[i].name, b));
        else
            o += (size_t)snprintf(buf + o, cap - o, "[%d]", k->st[i].index);
    }
}

/* Walk steps [0, n) from root; NULL (and e, if given) when a step has
 * nowhere to go. */
static cJSON *walk(const al_sweep *s, const skey *k, cJSON *root, int n, al_err *e) {
    cJSON *cur = root;
    char pre[400], msg[600];
    for (int i = 0; i < n; i++) {
        const step *st = &k->st[i];
        prefix(k, i + 1, pre, sizeof pre);
        cJSON *next;
        if (st->name) {
            if (!cJSON_IsObject(cur)) {
                prefix(k, i, pre, sizeof pre);
                snprintf(msg, sizeof msg, "%s is not an object", pre);
                return e ? (kbad(s, k->path, e, msg), NULL) : NULL;
            }
            next = cJSON_GetObjectItemCaseSensitive(cur, st->name);
            if (!next) {
                snprintf(msg, sizeof msg,
                         "%s is not in the file (a path may end at a key the file "
                         "lacks, not go through one)",
                         pre);
                return e ? (kbad(s, k->path, e, msg), NULL) : NULL;
            }
        } else {
            if (!cJSON_IsArray(cur)) {
                prefix(k, i, pre, sizeof pre);
                snprintf(msg, sizeof msg, "%s is not a list", pre);
                return e ? (kbad(s, k->path, e, msg), NULL) : NULL;
            }
            int len = cJSON_GetArraySize(cur);
            if (st->index >= len) {
                snprintf(msg, sizeof msg, "%s: index out of range (%d entr%s)", pre, len,
                         len == 1 ? "y" : "ies");
                return e ? (kbad(s, k->path, e, msg), NULL) : NULL;
            }
            next = cJSON_GetArrayItem(cur, st->index);
        }
        cur = next;
    }
    return cur;
}

/* Does path a contain path b (b is a or below it)? */
static int contains(const skey *a, const skey *b) {
    if (b->n_st < a->n_st) return 0;
    for (int i = 0; i < a->n_st; i++) {
        const step *x = &a->st[i], *y = &b->st[i];
        if (!x->name != !y->name) return 0;
        if (x->name ? strcmp(x->name, y->name) != 0 : x->index != y->index) return 0;
    }
    return 1;
}

void al_sweep_free(al_sweep *s) {
    if (!s) return;
    for (int i = 0; i < s->n_keys; i++) {
        for (int j = 0; j < s->keys[i].n_st; j++) free(s->keys[i].st[j].name);
        free(s->keys[i].st);
        free(s->keys[i].path);
    }
    cJSON_Delete(s->root);
    cJSON_Delete(s->sweep);
    free(s);
}

static int check_block(al_sweep *s, al_err *e) {
    const cJSON *b = s->sweep;
    if (!cJSON_IsObject(b) || !b->child)
        return al_errf(e, "%s: sweep: must be a non-empty object {\"key.path\": [values], ...}",
                       s->src);
    for (const cJSON *a = b->child; a; a = a->next)
        for (const cJSON *c = a->next; c; c = c->next)
            if (strcmp(a->string, c->string) == 0) return kbad(s, a->string, e, "given twice");
    long n = 1;
    for (const cJSON *v = b->child; v; v = v->next) {
        if (s->n_keys == AL_SWEEP_MAX_KEYS)
            return al_errf(e, "%s: sweep: at most %d key paths", s->src, AL_SWEEP_MAX_KEYS);
        skey *k = &s->keys[s->n_keys++];
        if (!(k->path = strdup(v->string))) return al_errf(e, "out of memory");
        if (parse_path(k->path, k))
            return kbad(s, k->path, e,
                        "not a key path (name, name.name, name[index], e.g. "
                        "\"train.lr\" or \"models[1].n_layers\")");
        if (strcmp(k->st[0].name, "sweep") == 0)
            return kbad(s, k->path, e, "a task cannot hold a sweep (no sweep inside a sweep)");
        if (k->n_st == 1 && strcmp(k->st[0].name, "out") == 0) /* task K is always OUT/task-K */
            return kbad(s, k->path, e,
                        "the sweep's output folder cannot vary by task (its tasks "
                        "go to OUT/task-K)");
        if (!cJSON_IsArray(v)) return kbad(s, k->path, e, "must be a list of values");
        k->vals = v;
        k->n_vals = cJSON_GetArraySize(v);
        if (k->n_vals == 0) return kbad(s, k->path, e, "empty list: give at least one value");
        if (n > AL_SWEEP_MAX_TASKS / k->n_vals) {
            char m[120];
            snprintf(m, sizeof m, "the sweep would have more than %d tasks", AL_SWEEP_MAX_TASKS);
            return kbad(s, k->path, e, m);
        }
        n *= k->n_vals;
        /* where the value goes must exist, but for its last key */
        cJSON *parent = walk(s, k, s->root, k->n_st - 1, e);
        if (!parent) return -1;
        if (k->st[k->n_st - 1].name && !cJSON_IsObject(parent)) {
            char pre[400], m[500];
            prefix(k, k->n_st - 1, pre, sizeof pre);
            snprintf(m, sizeof m, "%s is not an object", pre);
            return kbad(s, k->path, e, m);
        }
        if (!k->st[k->n_st - 1].name && !walk(s, k, s->root, k->n_st, e)) return -1;
        for (int i = 0; i < s->n_keys - 1; i++) {
            const skey *o = &s->keys[i];
            if (contains(o, k) || contains(k, o)) {
                char m[200], b[112];
                snprintf(m, sizeof m, "overlaps sweep[\"%s\"] (one path holds the other)",
                         disp(o->path, b));
                return kbad(s, k->path, e, m);
            }
        }
    }
    s->n_tasks = n;
    return 0;
}

int al_sweep_load(const char *path, al_sweep **out, al_err *e) {
    *out = NULL;
    cJSON *root;
    if (al_json_read_file(path, 16u << 20, &root, e)) return -1;
    if (!cJSON_IsObject(root) || !cJSON_GetObjectItemCaseSensitive(root, "sweep")) {
        cJSON_Delete(root); /* not a sweep: the ordinary loader says what else is wrong */
        return 0;
    }
    al_sweep *s = calloc(1, sizeof *s);
    if (!s) {
        cJSON_Delete(root);
        return al_errf(e, "out of memory");
    }
    snprintf(s->src, sizeof s->src, "%s", path);
    s->root = root;
    int twice = 0;
    for (const cJSON *c = root->child; c; c = c->next) twice += strcmp(c->string, "sweep") == 0;
    if (twice > 1) {
        al_sweep_free(s);
        return al_errf(e, "%s: sweep: given twice", path);
    }
    s->sweep = cJSON_DetachItemFromObjectCaseSensitive(root, "sweep");
    if (check_block(s, e)) {
        al_sweep_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

long al_sweep_n_tasks(const al_sweep *s) { return s->n_tasks; }
int al_sweep_n_keys(const al_sweep *s) { return s->n_keys; }
const char *al_sweep_key(const al_sweep *s, int i) { return s->keys[i].path; }

/* Key i's value index in task k: the last key varies fastest. */
static int value_index(const al_sweep *s, long k, int i) {
    for (int j = s->n_keys - 1; j > i; j--) k /= s->keys[j].n_vals;
    return (int)(k % s->keys[i].n_vals);
}

/* A copy of the file with key i set to value idx[i], for every i. */
static cJSON *substitute(const al_sweep *s, const int *idx) {
    cJSON *r = cJSON_Duplicate(s->root, 1);
    if (!r) return NULL;
    for (int i = 0; i < s->n_keys; i++) {
        const skey *k = &s->keys[i];
        cJSON *parent = walk(s, k, r, k->n_st - 1, NULL);
        cJSON *v = cJSON_Duplicate(cJSON_GetArrayItem(k->vals, idx[i]), 1);
        const step *last = &k->st[k->n_st - 1];
        int ok = v && parent;
        if (ok && last->name)
            ok = cJSON_GetObjectItemCaseSensitive(parent, last->name)
                     ? cJSON_ReplaceItemInObjectCaseSensitive(parent, last->name, v)
                     : cJSON_AddItemToObject(parent, last->name, v);
        else if (ok)
            ok = cJSON_ReplaceItemInArray(parent, last->index, v);
        if (!ok) {
            cJSON_Delete(v);
            cJSON_Delete(r);
            return NULL;
        }
    }
    return r;
}

static int load_idx(const al_sweep *s, const int *idx, long k, const char *base,
                    al_experiment **out, al_err *e) {
    *out = NULL;
    cJSON *r = substitute(s, idx);
    if (!r) return al_errf(e, "out of memory");
    char src[1100];
    snprintf(src, sizeof src, "%s (task %ld)", s->src, k);
    int rc = al_exp_load_root(r, src, out, e);
    cJSON_Delete(r);
    if (rc) return -1;
    al_experiment *x = *out;
    snprintf(x->source, sizeof x->source, "%s", s->src);
    char b[AL_PATH_MAX];
    snprintf(b, sizeof b, "%s", base ? base : x->out);
    int n = snprintf(x->out, sizeof x->out, "%s/task-%ld", b, k);
    if (n < 0 || (size_t)n >= sizeof x->out) {
        al_exp_free(x);
        *out = NULL;
        return al_errf(e, "%s: the output folder %s/task-%ld is too long", s->src, b, k);
    }
    return 0;
}

int al_sweep_task_load(const al_sweep *s, long k, const char *base, al_experiment **out,
                       al_err *e) {
    *out = NULL;
    if (k < 0 || k >= s->n_tasks)
        return al_errf(e, "%s: task %ld is out of range (the sweep has %ld tasks: 0..%ld)", s->src,
                       k, s->n_tasks, s->n_tasks - 1);
    int idx[AL_SWEEP_MAX_KEYS];
    for (int i = 0; i < s->n_keys; i++) idx[i] = value_index(s, k, i);
    return load_idx(s, idx, k, base, out, e);
}

int al_sweep_check(const al_sweep *s, al_err *e) {
    int idx[AL_SWEEP_MAX_KEYS] = {0};
    for (int i = 0; i < s->n_keys; i++)
        for (int v = i ? 1 : 0; v < s->keys[i].n_vals; v++) {
            memset(idx, 0, sizeof idx);
            idx[i] = v;
            /* the task number of this combination, for the message */
            long k = 0;
            for (int j = 0; j < s->n_keys; j++) k = k * s->keys[j].n_vals + idx[j];
            al_experiment *x;
            if (load_idx(s, idx, k, NULL, &x, e)) return -1;
            al_exp_free(x);
        }
    return 0;
}

/* ------------------------------------------------------------ values */

/* A value as the setting shows it: a plain word bare, anything else as
 * compact JSON with exact numbers. malloc'd, NULL when out of memory. */
static char *value_text(const cJSON *v) {
    if (cJSON_IsString(v)) {
        const char *t = v->valuestring;
        size_t n = strlen(t);
        if (n && n < 200 &&
            strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:,+") == n)
            return strdup(t);
    }
    cJSON *c = cJSON_Duplicate(v, 1);
    if (!c) return NULL;
    /* al_json_exact_numbers walks siblings from its argument: wrap */
    cJSON *box = cJSON_CreateArray();
    char *out = NULL;
    if (box) {
        cJSON_AddItemToArray(box, c);
        if (al_json_exact_numbers(box->child) == 0) out = al_json_print(0, c);
        cJSON_Delete(box);
    } else {
        cJSON_Delete(c);
    }
    return out;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s) {
    size_t l = strlen(s);
    if (b->oom) return;
    if (b->n + l + 1 > b->cap) {
        size_t c = (b->n + l + 1) * 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q, b->cap = c;
    }
    memcpy(b->p + b->n, s, l + 1);
    b->n += l;
}

void al_sweep_values_free(al_sweep_values *v) {
    free(v->setting);
    free(v->all);
    free(v->params_json);
    memset(v, 0, sizeof *v);
}

int al_sweep_values_of(const al_sweep *s, long k, al_sweep_values *v, al_err *e) {
    memset(v, 0, sizeof *v);
    if (k < 0 || k >= s->n_tasks)
        return al_errf(e, "%s: task %ld is out of range (the sweep has %ld tasks: 0..%ld)", s->src,
                       k, s->n_tasks, s->n_tasks - 1);
    sbuf set = {0}, all = {0};
    put(&set, "");
    put(&all, "");
    cJSON *params = cJSON_CreateObject();
    int oom = !params;
    for (int i = 0; !oom && i < s->n_keys; i++) {
        const skey *key = &s->keys[i];
        const cJSON *val = cJSON_GetArrayItem(key->vals, value_index(s, k, i));
        char *t = value_text(val);
        cJSON *c = cJSON_Duplicate(val, 1);
        if (!t || !c || !cJSON_AddItemToObject(params, key->path, c)) {
            cJSON_Delete(c);
            free(t);
            oom = 1;
            break;
        }
        int is_seed = strcmp(key->path, "seed") == 0;
        if (is_seed) {
            uint64_t u;
            if (al_json_u64(val, &u) == 0 && u <= (uint64_t)INT64_MAX) {
                v->has_seed = 1;
                v->seed = (int64_t)u;
            }
        } else {
            if (set.n) put(&set, " ");
            put(&set, key->path);
            put(&set, "=");
            put(&set, t);
        }
        if (all.n) put(&all, " ");
        put(&all, key->path);
        put(&all, "=");
        put(&all, t);
        free(t);
    }
    if (!oom && al_json_exact_numbers(params->child) == 0)
        v->params_json = al_json_print(0, params);
    cJSON_Delete(params);
    v->setting = set.p;
    v->all = all.p;
    if (oom || set.oom || all.oom || !v->params_json || !v->setting || !v->all) {
        al_sweep_values_free(v);
        return al_errf(e, "out of memory");
    }
    return 0;
}
