/* intervene.c -- intervention files (intervene.h): the JSON and .npy
 * readers, and one engine hook per op.
 *
 * The reader checks everything a forward could trip on (names, heads,
 * positions within n_ctx, vector lengths) so that a file that loads can
 * only fail at run time on a position past the actual sequence. Every
 * string echoed in a message goes through al_json_key_disp, so a hostile
 * file cannot make a message longer than a line. The hook walks the
 * activation through its strided view (al_hook_view), so one function
 * serves every point, including those the forward runs later. */
#include "attnlab/intervene.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/json.h"

static const char *const OPS[] = {"zero", "scale", "add", "set"};

/* x as a finite float: 0, or -1 (NaN, infinite, or beyond float's range,
 * where the conversion itself would be undefined). */
static int to_float(double x, float *f) {
    if (!(fabs(x) <= FLT_MAX)) return -1;
    *f = (float)x;
    return 0;
}

/* ------------------------------------------------------------------ .npy */

/* The value after 'key': in a .npy header dict, or NULL. */
static const char *npy_field(const char *h, const char *key) {
    const char *p = strstr(h, key);
    if (!p) return NULL;
    p += strlen(key);
    while (*p == ' ') p++;
    if (*p++ != ':') return NULL;
    while (*p == ' ') p++;
    return p;
}

/* The header dict h (hl bytes): the item size (4, 8) and the count of a
 * 1-D float array of at most max values. */
static int header(const char *h, size_t hl, size_t *item, size_t *count, size_t max, al_err *e) {
    if (strlen(h) != hl) return al_errf(e, ".npy header holds a NUL byte");
    const char *d = npy_field(h, "'descr'"), *f = npy_field(h, "'fortran_order'"),
               *s = npy_field(h, "'shape'");
    if (!d || !f || !s) return al_errf(e, ".npy header lacks descr, fortran_order or shape");
    if (!strncmp(d, "'<f4'", 5))
        *item = 4;
    else if (!strncmp(d, "'<f8'", 5))
        *item = 8;
    else
        return al_errf(e, ".npy dtype is not little-endian float32 or float64 ('<f4', '<f8')");
    if (strncmp(f, "False", 5) && strncmp(f, "True", 4))
        return al_errf(e, ".npy fortran_order is neither True nor False");
    /* shape: (N,) -- one axis */
    if (*s++ != '(') return al_errf(e, ".npy shape is not a tuple");
    while (*s == ' ') s++;
    size_t c = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9' && digits < 12) c = c * 10 + (size_t)(*s++ - '0'), digits++;
    while (*s == ' ') s++;
    if (!digits || *s++ != ',') return al_errf(e, ".npy shape is not one axis (N,)");
    while (*s == ' ') s++;
    if (*s != ')') return al_errf(e, ".npy shape is not one axis (N,)");
    if (c == 0 || c > max) return al_errf(e, ".npy holds %zu values (1 to %zu are read)", c, max);
    *count = c;
    return 0;
}

int al_npy_parse(const unsigned char *b, size_t n, size_t max, float **out, size_t *len,
                 al_err *e) {
    *out = NULL, *len = 0;
    size_t item = 0, count = 0;
    if (n < 10 || memcmp(b, "\x93NUMPY", 6)) return al_errf(e, "not a .npy file (no \\x93NUMPY)");
    int major = b[6];
    if (major < 1 || major > 3)
        return al_errf(e, ".npy format version %d (1 to 3 are read)", major);
    size_t hl, off;
    if (major == 1)
        hl = b[8] | (size_t)b[9] << 8, off = 10;
    else {
        if (n < 12) return al_errf(e, ".npy header truncated");
        hl = b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24, off = 12;
    }
    if (hl > 65536 || hl > n - off)
        return al_errf(e, ".npy header of %zu bytes: truncated or too long", hl);
    char *h = al_malloc(hl + 1, 1, e);
    if (!h) return -1;
    memcpy(h, b + off, hl);
    h[hl] = 0;
    int rc = header(h, hl, &item, &count, max, e);
    free(h);
    if (rc) return -1;
    off += hl;
    if (n - off != count * item)
        return al_errf(e, ".npy data is %zu bytes; its shape needs %zu", n - off, count * item);
    float *v = al_malloc(count, sizeof(float), e);
    if (!v) return -1;
    for (size_t i = 0; i < count; i++) {
        const unsigned char *p = b + off + i * item;
        if (item == 4) {
            uint32_t u = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            memcpy(&v[i], &u, 4);
        } else {
            uint64_t u = 0;
            for (int k = 7; k >= 0; k--) u = u << 8 | p[k];
            double x;
            memcpy(&x, &u, 8);
            v[i] = to_float(x, &v[i]) ? NAN : v[i];
        }
        if (!isfinite(v[i])) {
            free(v);
            return al_errf(e, ".npy value %zu is not finite (as a float)", i);
        }
    }
    *out = v, *len = count;
    return 0;
}

/* ------------------------------------------------------------ the file */

void al_intervention_free(al_intervention *iv) {
    for (int i = 0; iv->ops && i < iv->n; i++) free(iv->ops[i].vec);
    free(iv->ops);
    free(iv->json);
    memset(iv, 0, sizeof *iv);
}

/* The length a vector of op must have: the point's last axis, or for
 * the pattern the row up to pos (-1: pos missing or negative). */
static long vec_len(const al_iv_op *op, const al_config *c) {
    int64_t sh[4];
    int nd = al_hook_shape(op->point, 1, 1, c->d_model, c->n_heads, c->d_head, c->d_vocab, sh);
    const char *lay = al_hook_layout(op->point);
    if (lay[nd - 1] == 'S') return op->has_pos && op->pos >= 0 ? op->pos + 1 : -1;
    return (long)sh[nd - 1];
}

/* The vector of op from "values" or "vector" (a .npy under dir). */
static int op_vector(al_iv_op *op, const cJSON *vals, const cJSON *file, const char *dir,
                     const char *w, al_err *e) {
    if (!vals == !file)
        return al_errf(e, "%s: %s needs one of \"values\" and \"vector\"", w, OPS[op->op]);
    size_t len = 0;
    if (vals) {
        int n = cJSON_IsArray(vals) ? cJSON_GetArraySize(vals) : -1;
        if (n < 1 || n > AL_IV_MAX_VEC)
            return al_errf(e, "%s: \"values\" must be an array of 1 to %d numbers", w,
                           AL_IV_MAX_VEC);
        if (!(op->vec = al_malloc((size_t)n, sizeof(float), e))) return -1;
        const cJSON *x;
        cJSON_ArrayForEach(x, vals) {
            if (!cJSON_IsNumber(x) || to_float(x->valuedouble, &op->vec[len]))
                return al_errf(e, "%s: \"values\" entry %zu is not a finite number", w, len);
            len++;
        }
    } else {
        char p[AL_PATH_MAX], disp[64];
        unsigned char *b = NULL;
        size_t n = 0;
        if (!cJSON_IsString(file) || !file->valuestring[0])
            return al_errf(e, "%s: \"vector\" must be a .npy file name", w);
        if (strlen(file->valuestring) >= sizeof p)
            return al_errf(e, "%s: vector file name too long", w);
        if (file->valuestring[0] == '/' || !dir)
            snprintf(p, sizeof p, "%s", file->valuestring);
        else if (al_path_join(p, sizeof p, dir, file->valuestring, e))
            return al_err_prefix(e, "%s", w);
        if (al_read_file(p, &b, &n, (size_t)AL_IV_MAX_VEC * 8 + 65536 + 16, e))
            return al_err_prefix(e, "%s", w);
        int rc = al_npy_parse(b, n, AL_IV_MAX_VEC, &op->vec, &len, e);
        free(b);
        if (rc) return al_err_prefix(e, "%s: %s", w, al_json_key_disp(file->valuestring, disp));
    }
    op->n_vec = (int)len;
    return 0;
}

/* One op object into op (its vector allocated): 0, or −1 with e. */
static int parse_op(const cJSON *o, int i, const char *dir, const al_config *c, al_iv_op *op,
                    al_err *e) {
    char w[32], disp[64];
    snprintf(w, sizeof w, "op %d", i);
    *op = (al_iv_op){.index = i, .head = -1};
    if (!cJSON_IsObject(o)) return al_errf(e, "%s: must be an object", w);
    static const char *const keys[] = {"hook", "op", "head", "pos", "factor", "values", "vector"};
    for (const cJSON *k = o->child; k; k = k->next) {
        int known = 0;
        for (size_t j = 0; j < sizeof keys / sizeof keys[0]; j++)
            known |= !strcmp(k->string, keys[j]);
        if (!known)
            return al_errf(e,
                           "%s: unknown key \"%s\" (hook, op, head, pos, factor, values, vector)",
                           w, al_json_key_disp(k->string, disp));
        for (const cJSON *k2 = k->next; k2; k2 = k2->next)
            if (!strcmp(k->string, k2->string))
                return al_errf(e, "%s: \"%s\" given twice", w, al_json_key_disp(k->string, disp));
    }
    const cJSON *hook = cJSON_GetObjectItemCaseSensitive(o, "hook"),
                *opn = cJSON_GetObjectItemCaseSensitive(o, "op"),
                *head = cJSON_GetObjectItemCaseSensitive(o, "head"),
                *pos = cJSON_GetObjectItemCaseSensitive(o, "pos"),
                *fac = cJSON_GetObjectItemCaseSensitive(o, "factor");
    if (!cJSON_IsString(hook)) return al_errf(e, "%s: \"hook\" must be a hook name", w);
    if (al_hook_parse(hook->valuestring, c->n_layers, &op->point, &op->layer, e))
        return al_err_prefix(e, "%s", w);
    if (!al_hook_runs(op->point))
        return al_errf(e, "%s: hook point %s is not run by this engine's forward", w,
                       al_json_key_disp(hook->valuestring, disp));
    if (!cJSON_IsString(opn)) return al_errf(e, "%s: \"op\" must be zero, scale, add or set", w);
    op->op = -1;
    for (int k = 0; k < 4; k++)
        if (!strcmp(opn->valuestring, OPS[k])) op->op = k;
    if (op->op < 0)
        return al_errf(e, "%s: unknown op \"%s\" (zero, scale, add or set)", w,
                       al_json_key_disp(opn->valuestring, disp));
    double d;
    if (head) {
        if (!strchr(al_hook_layout(op->point), 'H'))
            return al_errf(e,
                           "%s: %s has no head axis (\"head\" is for q, k, v, z, result, "
                           "pattern)",
                           w, al_json_key_disp(hook->valuestring, disp));
        if (al_json_int_in(head, 0, c->n_heads - 1, &d))
            return al_errf(e, "%s: \"head\" must be an integer in 0..%d", w, c->n_heads - 1);
        op->head = (int)d;
    }
    if (pos) {
        if (al_json_int_in(pos, -c->n_ctx, c->n_ctx - 1, &d))
            return al_errf(e, "%s: \"pos\" must be an integer in %d..%d (negative: from the end)",
                           w, -c->n_ctx, c->n_ctx - 1);
        op->has_pos = 1, op->pos = (int)d;
    }
    if ((op->op == AL_IV_SCALE) != (fac != NULL))
        return al_errf(e, "%s: \"factor\" goes with scale, and scale needs it", w);
    if (fac) {
        if (!cJSON_IsNumber(fac) || to_float(fac->valuedouble, &op->factor))
            return al_errf(e, "%s: \"factor\" must be a finite number", w);
    }
    const cJSON *vals = cJSON_GetObjectItemCaseSensitive(o, "values"),
                *file = cJSON_GetObjectItemCaseSensitive(o, "vector");
    if (op->op != AL_IV_ADD && op->op != AL_IV_SET) {
        if (vals || file) return al_errf(e, "%s: \"values\" and \"vector\" go with add and set", w);
        return 0;
    }
    long want = vec_len(op, c);
    if (want < 0)
        return al_errf(e,
                       "%s: %s of a pattern row needs \"pos\" >= 0 (the row's length is "
                       "pos + 1)",
                       w, OPS[op->op]);
    if (op_vector(op, vals, file, dir, w, e)) return -1;
    if (op->n_vec != want)
        return al_errf(e, "%s: the vector has %d values; %s needs %ld", w, op->n_vec,
                       al_json_key_disp(hook->valuestring, disp), want);
    return 0;
}

int al_intervention_parse(const char *text, size_t n, const char *dir, const al_config *c,
                          al_intervention *iv, al_err *e) {
    memset(iv, 0, sizeof *iv);
    cJSON *root = NULL;
    if (al_json_parse(text, n, NULL, &root, e)) return -1;
    int rc = -1, nops = 0;
    char disp[64];
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "attnlab_intervention"),
                *ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
    if (!cJSON_IsObject(root)) {
        al_errf(e, "an intervention file must be a JSON object");
        goto out;
    }
    for (const cJSON *k = root->child; k; k = k->next) {
        if (strcmp(k->string, "attnlab_intervention") && strcmp(k->string, "ops") &&
            strcmp(k->string, "description")) {
            al_errf(e, "unknown key \"%s\" (attnlab_intervention, ops, description)",
                    al_json_key_disp(k->string, disp));
            goto out;
        }
        for (const cJSON *k2 = k->next; k2; k2 = k2->next)
            if (!strcmp(k->string, k2->string)) {
                al_errf(e, "\"%s\" given twice", al_json_key_disp(k->string, disp));
                goto out;
            }
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "description") &&
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "description"))) {
        al_errf(e, "\"description\" must be a string");
        goto out;
    }
    double v;
    if (!ver || al_json_int_in(ver, 1, 1, &v)) {
        al_errf(e, "\"attnlab_intervention\": 1 is missing (not an intervention file, or another "
                   "version)");
        goto out;
    }
    nops = cJSON_IsArray(ops) ? cJSON_GetArraySize(ops) : -1;
    if (nops < 1 || nops > AL_IV_MAX_OPS) {
        al_errf(e, "\"ops\" must be an array of 1 to %d ops", AL_IV_MAX_OPS);
        goto out;
    }
    if (!(iv->ops = al_calloc((size_t)nops, sizeof *iv->ops, e))) goto out;
    const cJSON *o;
    int i = 0;
    cJSON_ArrayForEach(o, ops) {
        iv->n = i + 1; /* so that free sees the op's vector */
        if (parse_op(o, i, dir, c, &iv->ops[i], e)) goto out;
        i++;
    }
    if (!(iv->json = al_json_print(0, root))) {
        al_errf(e, "out of memory");
        goto out;
    }
    rc = 0;
out:
    cJSON_Delete(root);
    if (rc) al_intervention_free(iv);
    return rc;
}

int al_intervention_load(const char *path, const al_config *c, al_intervention *iv, al_err *e) {
    memset(iv, 0, sizeof *iv);
    unsigned char *b = NULL;
    size_t n = 0;
    char dir[AL_PATH_MAX];
    if (al_read_file(path, &b, &n, 64u << 20, e)) return -1;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[slash == dir] = 0;
    int rc = al_intervention_parse((const char *)b, n, slash ? dir : NULL, c, iv, e);
    free(b);
    return rc ? al_err_prefix(e, "intervention file %s", path) : 0;
}

/* ------------------------------------------------------------ the hooks */

/* op on the activation at its point: every element of the selected
 * heads and position, through the view's strides. */
static int iv_hook(al_hook_act *a, void *ctx, al_err *e) {
    const al_iv_op *op = ctx;
    int64_t sh[4], st[4];
    int nd = al_hook_view(a, sh, st), T = a->m->T;
    const char *lay = al_hook_layout(a->point);
    int ih = -1, it = -1, last = nd - 1;
    for (int k = 0; k < nd; k++) {
        if (lay[k] == 'H') ih = k;
        if (lay[k] == 'T') it = k;
    }
    int pos = op->has_pos && op->pos < 0 ? op->pos + T : op->pos;
    if (op->has_pos && (pos < 0 || pos >= T)) {
        char nm[96];
        al_hook_name(a->point, a->layer, nm, sizeof nm);
        return al_errf(e,
                       "intervention op %d (%s): position %d is outside the sequence of %d "
                       "tokens",
                       op->index, nm, op->pos, T);
    }
    int row = lay[last] == 'S'; /* the pattern: the vector is a row up to pos */
    int64_t idx[4] = {0, 0, 0, 0};
    for (;;) {
        if ((ih < 0 || op->head < 0 || idx[ih] == op->head) &&
            (it < 0 || !op->has_pos || idx[it] == pos)) {
            float *x = a->data;
            for (int k = 0; k < nd; k++) x += idx[k] * st[k];
            int64_t j = idx[last];
            if (op->op == AL_IV_ZERO)
                *x = 0.0f;
            else if (op->op == AL_IV_SCALE)
                *x *= op->factor;
            else if (!row || j < op->n_vec)
                *x = (op->op == AL_IV_ADD ? *x : 0.0f) + op->vec[j];
            else if (op->op == AL_IV_SET)
                *x = 0.0f;
            if (a->rows && row) a->rows[(size_t)idx[1] * T + (size_t)idx[2]] = 1; /* (B,H,T,S) */
        }
        int k = nd - 1;
        while (k >= 0 && ++idx[k] == sh[k]) idx[k--] = 0;
        if (k < 0) break;
    }
    a->intervened = 1;
    return 0;
}

int al_intervention_attach(al_model *m, al_intervention *iv, al_err *e) {
    for (int i = 0; i < iv->n; i++)
        if (al_hook_add(m, iv->ops[i].point, iv->ops[i].layer, iv_hook, &iv->ops[i], e)) {
            al_intervention_detach(m, iv);
            return al_err_prefix(e, "intervention op %d", i);
        }
    return 0;
}

void al_intervention_detach(al_model *m, al_intervention *iv) {
    for (int i = 0; i < iv->n; i++) al_hook_remove(m, &iv->ops[i]);
}
