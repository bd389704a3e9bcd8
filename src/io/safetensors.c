/* safetensors.c -- safetensors reader and writer.
 *
 * The reader trusts nothing in the file: the header length is checked
 * against the file size before anything is allocated from it, every
 * offset is checked against the data area with integer arithmetic, and
 * tensors may neither overlap nor repeat a name. The writer produces the
 * same layout as the reference implementation (header padded with spaces
 * to a multiple of 8 bytes, contiguous data in the given order), so files
 * load in PyTorch's safetensors and TransformerLens. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attnlab/buf.h"

#include "attnlab/config.h"

/* The reference implementation refuses headers above 100 MB; a header
 * that large would describe millions of tensors, never a model of ours. */
#define MAX_HEADER (100u * 1000u * 1000u)
/* Sizes and offsets are compared as doubles when they come out of cJSON;
 * above 2^53 a double no longer holds every integer. */
#define MAX_EXACT 9007199254740992.0

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define AL_BIG_ENDIAN 1
#else
#define AL_BIG_ENDIAN 0
#endif

struct al_st_file {
    char *path;
    const char *kind; /* what messages call the file: "checkpoint", "SAE" (static) */
    unsigned char *buf; /* whole file */
    size_t size;
    cJSON *root; /* tensor names and metadata point into it */
    al_st_tensor *t;
    int n;
    const char **meta_k, **meta_v;
    int n_meta;
};

static size_t dtype_size(al_dtype d) { return d == AL_DT_F16 || d == AL_DT_BF16 ? 2 : 4; }
static const char *dtype_name(al_dtype d) {
    return d == AL_DT_I32 ? "I32" : d == AL_DT_F16 ? "F16" : d == AL_DT_BF16 ? "BF16" : "F32";
}

static uint64_t le64(const unsigned char *p) {
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | p[i];
    return x;
}

/* ------------------------------------------------------------ writer */

static void sb_u64(al_buf *b, uint64_t x) { al_buf_printf(b, "%" PRIu64, x); }
/* A JSON string literal; bytes >= 0x80 pass through (names are UTF-8). */
static void sb_json_str(al_buf *b, const char *s) {
    al_buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char t[2] = {'\\', (char)c};
            al_buf_put(b, t, 2);
        } else if (c < 0x20) {
            char t[8];
            snprintf(t, sizeof t, "\\u%04x", c);
            al_buf_puts(b, t);
        } else {
            al_buf_put(b, (const char *)&c, 1);
        }
    }
    al_buf_put(b, "\"", 1);
}

/* Elements of a tensor, or -1 on a bad shape or overflow. */
static int tensor_bytes(const al_st_tensor *t, uint64_t *bytes) {
    if (t->ndim < 0 || t->ndim > AL_ST_MAX_DIMS) return -1;
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0 || (uint64_t)t->shape[i] > (uint64_t)MAX_EXACT) return -1;
        if (al_mul_overflow(n, (size_t)t->shape[i], &n) != 0) return -1;
    }
    if (al_mul_overflow(n, dtype_size(t->dtype), &n) != 0 || (double)n > MAX_EXACT) return -1;
    *bytes = n;
    return 0;
}

static int check_tensors(const char *path, const al_st_tensor *ts, int n, uint64_t *bytes,
                         al_err *e) {
    for (int i = 0; i < n; i++) {
        const al_st_tensor *t = &ts[i];
        if (!t->name || !t->name[0] || strcmp(t->name, "__metadata__") == 0)
            return al_errf(e, "cannot write %s: tensor %d has no usable name", path, i);
        if (t->dtype != AL_DT_F32 && t->dtype != AL_DT_I32)
            return al_errf(e, "cannot write %s: tensor %s has unknown dtype", path, t->name);
        if (tensor_bytes(t, &bytes[i]) != 0)
            return al_errf(e, "cannot write %s: tensor %s has a bad shape", path, t->name);
        if (bytes[i] && !t->data)
            return al_errf(e, "cannot write %s: tensor %s has no data", path, t->name);
        for (int j = 0; j < i; j++)
            if (strcmp(ts[j].name, t->name) == 0)
                return al_errf(e, "cannot write %s: duplicate tensor name %s", path, t->name);
    }
    return 0;
}

/* Header JSON padded with spaces to a multiple of 8, so that the data
 * area (and every 4-byte tensor in it) is aligned in the file. */
static int build_header(al_buf *b, const al_st_tensor *ts, int n, const uint64_t *bytes,
                        const char *const *mk, const char *const *mv, int n_meta) {
    al_buf_puts(b, "{");
    if (n_meta > 0) {
        al_buf_puts(b, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) al_buf_puts(b, ",");
            sb_json_str(b, mk[i]);
            al_buf_puts(b, ":");
            sb_json_str(b, mv[i]);
        }
        al_buf_puts(b, "}");
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (i || n_meta > 0) al_buf_puts(b, ",");
        sb_json_str(b, ts[i].name);
        al_buf_puts(b, ":{\"dtype\":\"");
        al_buf_puts(b, dtype_name(ts[i].dtype));
        al_buf_puts(b, "\",\"shape\":[");
        for (int d = 0; d < ts[i].ndim; d++) {
            if (d) al_buf_puts(b, ",");
            sb_u64(b, (uint64_t)ts[i].shape[d]);
        }
        al_buf_puts(b, "],\"data_offsets\":[");
        sb_u64(b, off);
        al_buf_puts(b, ",");
        off += bytes[i];
        sb_u64(b, off);
        al_buf_puts(b, "]}");
    }
    al_buf_puts(b, "}");
    while (al_buf_ok(b) && b->n % 8) al_buf_puts(b, " ");
    return al_buf_ok(b) ? 0 : -1;
}

/* Data is little-endian on disk; on a big-endian host swap 4-byte words
 * through a bounce buffer. */
static int write_data(FILE *f, const void *data, uint64_t bytes) {
    if (bytes == 0) return 0; /* data may be NULL */
#if AL_BIG_ENDIAN
    const unsigned char *p = data;
    unsigned char tmp[4096];
    while (bytes) {
        size_t k = bytes < sizeof tmp ? (size_t)bytes : sizeof tmp;
        for (size_t i = 0; i < k; i += 4)
            for (int j = 0; j < 4; j++) tmp[i + j] = p[i + 3 - j];
        if (fwrite(tmp, 1, k, f) != k) return -1;
        p += k;
        bytes -= k;
    }
    return 0;
#else
    return fwrite(data, 1, (size_t)bytes, f) == bytes ? 0 : -1;
#endif
}

int al_st_write(const char *path, const al_st_tensor *tensors, int n, const char *const *meta_keys,
                const char *const *meta_vals, int n_meta, al_err *e) {
    if (n < 0 || n_meta < 0) return al_errf(e, "cannot write %s: bad tensor count", path);
    for (int i = 0; i < n_meta; i++)
        if (!meta_keys[i] || !meta_vals[i])
            return al_errf(e, "cannot write %s: metadata entry %d is NULL", path, i);
    uint64_t *bytes = al_malloc((size_t)n + 1, sizeof *bytes, e);
    if (!bytes) return -1;
    al_buf hb = AL_BUF_INIT; /* the JSON header */
    int rc = -1;
    if (check_tensors(path, tensors, n, bytes, e) != 0) goto done;
    if (build_header(&hb, tensors, n, bytes, meta_keys, meta_vals, n_meta) != 0) {
        al_errf(e, "cannot write %s: out of memory building the header", path);
        goto done;
    }
    al_atomic_file af;
    if (al_atomic_open(&af, path, e) != 0) goto done;
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)hb.n >> (8 * i));
    int ok = fwrite(len, 1, 8, af.f) == 8 && fwrite(hb.p, 1, hb.n, af.f) == hb.n;
    for (int i = 0; ok && i < n; i++) ok = write_data(af.f, tensors[i].data, bytes[i]) == 0;
    if (!ok) al_errf(e, "cannot write %s: %s", path, strerror(errno));
    rc = al_atomic_commit(&af, ok, ok ? e : NULL);
done:
    al_buf_free(&hb);
    free(bytes);
    return rc;
}

/* ------------------------------------------------------------ reader */

/* Whole file into memory, with our own messages (path named once). */
static int read_all(const char *path, const char *kind, unsigned char **buf, size_t *size,
                    al_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return al_errf(e, "cannot read %s %s: %s", kind, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return al_errf(e, "cannot read %s %s: not a regular file", kind, path);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *b = malloc(n + 1);
    if (!b) {
        fclose(f);
        return al_errf(e, "cannot read %s %s: out of memory for %zu bytes", kind, path, n);
    }
    size_t got = fread(b, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(b);
        return al_errf(e, "cannot read %s %s: short read", kind, path);
    }
    *buf = b;
    *size = n;
    return 0;
}

/* A name from the file, safe for a one-line message: printable bytes
 * only (others shown as '?'), at most 80 of them. */
typedef struct dname {
    char s[88];
} dname;
static dname disp(const char *name) {
    dname d;
    size_t i = 0;
    for (; name[i] && i < 80; i++) {
        unsigned char c = (unsigned char)name[i];
        d.s[i] = c >= 0x20 && c != 0x7f ? (char)c : '?';
    }
    if (name[i]) memcpy(d.s + i, "...", 3), i += 3;
    d.s[i] = 0;
    return d;
}

/* A JSON number that is an integer in [0, MAX_EXACT]. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= MAX_EXACT) || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int parse_dtype(const cJSON *j, al_dtype *d) {
    if (!cJSON_IsString(j)) return -1;
    if (strcmp(j->valuestring, "F32") == 0)
        *d = AL_DT_F32;
    else if (strcmp(j->valuestring, "I32") == 0)
        *d = AL_DT_I32;
    else if (strcmp(j->valuestring, "F16") == 0)
        *d = AL_DT_F16;
    else if (strcmp(j->valuestring, "BF16") == 0)
        *d = AL_DT_BF16;
    else
        return -1;
    return 0;
}

/* Validate one tensor entry; fills t and its [begin,end) span. */
static int parse_tensor(const cJSON *j, al_st_tensor *t, uint64_t span[2], uint64_t data_size,
                        al_err *e) {
    dname dn = disp(j->string);
    const char *nm = dn.s;
    if (!cJSON_IsObject(j)) return al_errf(e, "tensor %s is not a JSON object", nm);
    t->name = j->string;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (parse_dtype(dt, &t->dtype) != 0) {
        if (cJSON_IsString(dt))
            return al_errf(
                e, "tensor %s has unsupported dtype %.40s (attnlab reads F32, F16, BF16 and I32)",
                nm, disp(dt->valuestring).s);
        return al_errf(e, "tensor %s has no dtype string", nm);
    }
    if (!cJSON_IsArray(sh)) return al_errf(e, "tensor %s has no shape array", nm);
    int nd = cJSON_GetArraySize(sh);
    if (nd > AL_ST_MAX_DIMS)
        return al_errf(e, "tensor %s has %d dimensions, at most %d supported", nm, nd,
                       AL_ST_MAX_DIMS);
    t->ndim = nd;
    int d = 0;
    for (const cJSON *x = sh->child; x; x = x->next, d++) {
        uint64_t v;
        if (json_uint(x, &v) != 0) {
            /* a whole number past 2^53 is an integer, just not one JSON's
             * doubles hold exactly: say that, not "not an integer" */
            if (cJSON_IsNumber(x) && x->valuedouble > MAX_EXACT)
                return al_errf(e,
                               "tensor %s has a shape entry of %.3g, past the largest "
                               "size read (2^53)",
                               nm, x->valuedouble);
            return al_errf(e, "tensor %s has a shape entry that is not a non-negative integer", nm);
        }
        t->shape[d] = (int64_t)v;
    }
    uint64_t bytes;
    if (tensor_bytes(t, &bytes) != 0) return al_errf(e, "tensor %s: shape product overflows", nm);
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 || json_uint(of->child, &span[0]) != 0 ||
        json_uint(of->child->next, &span[1]) != 0)
        return al_errf(e, "tensor %s: data_offsets must be [begin, end] integers", nm);
    if (span[0] > span[1])
        return al_errf(e, "tensor %s: data_offsets begin %" PRIu64 " > end %" PRIu64, nm, span[0],
                       span[1]);
    if (span[1] > data_size)
        return al_errf(e,
                       "tensor %s: data_offsets end %" PRIu64 " beyond the data area (%" PRIu64
                       " bytes)",
                       nm, span[1], data_size);
    if (span[1] - span[0] != bytes)
        return al_errf(e,
                       "tensor %s: data span is %" PRIu64 " bytes but dtype and shape "
                       "need %" PRIu64,
                       nm, span[1] - span[0], bytes);
    return 0;
}

static int parse_meta(al_st_file *f, const cJSON *j, al_err *e) {
    if (!cJSON_IsObject(j)) return al_errf(e, "__metadata__ is not a JSON object");
    int n = cJSON_GetArraySize(j);
    f->meta_k = al_calloc((size_t)n + 1, sizeof *f->meta_k, e);
    f->meta_v = al_calloc((size_t)n + 1, sizeof *f->meta_v, e);
    if (!f->meta_k || !f->meta_v) return -1;
    for (const cJSON *x = j->child; x; x = x->next) {
        if (!cJSON_IsString(x))
            return al_errf(e, "__metadata__ value of %s is not a string", disp(x->string).s);
        f->meta_k[f->n_meta] = x->string;
        f->meta_v[f->n_meta++] = x->valuestring;
    }
    return 0;
}

typedef struct span_ref {
    uint64_t b, end;
    const char *name;
} span_ref;

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const span_ref *)a)->name, ((const span_ref *)b)->name);
}
static int cmp_begin(const void *a, const void *b) {
    const span_ref *x = a, *y = b;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Sorting makes both checks O(n log n): a hostile header may hold
 * millions of entries. */
static int check_unique_disjoint(span_ref *s, int n, al_err *e) {
    qsort(s, (size_t)n, sizeof *s, cmp_name);
    for (int i = 1; i < n; i++)
        if (strcmp(s[i - 1].name, s[i].name) == 0)
            return al_errf(e, "duplicate tensor name %s", disp(s[i].name).s);
    qsort(s, (size_t)n, sizeof *s, cmp_begin);
    for (int i = 1; i < n; i++)
        if (s[i].b < s[i - 1].end)
            return al_errf(e, "tensors %s and %s overlap", disp(s[i - 1].name).s,
                           disp(s[i].name).s);
    return 0;
}

/* Everything after reading the bytes; messages without the path, which
 * the caller adds. */
static int parse_file(al_st_file *f, al_err *e) {
    if (f->size < 8) return al_errf(e, "truncated file (%zu bytes, need at least 8)", f->size);
    uint64_t hlen = le64(f->buf);
    if (hlen > f->size - 8 || hlen > MAX_HEADER)
        return al_errf(e, "bad header length %" PRIu64 " (file has %zu bytes)", hlen, f->size);
    const char *hdr = (const char *)f->buf + 8;
    if (al_json_parse(hdr, (size_t)hlen, "header", &f->root, e) != 0) return -1;
    if (!cJSON_IsObject(f->root)) return al_errf(e, "header is not a JSON object");
    uint64_t data_size = f->size - 8 - hlen;
    const unsigned char *data = f->buf + 8 + hlen;
    int n = cJSON_GetArraySize(f->root);
    f->t = al_calloc((size_t)n + 1, sizeof *f->t, e);
    span_ref *spans = al_calloc((size_t)n + 1, sizeof *spans, e);
    if (!f->t || !spans) {
        free(spans);
        return -1;
    }
    int rc = 0;
    for (const cJSON *j = f->root->child; j && rc == 0; j = j->next) {
        if (strcmp(j->string, "__metadata__") == 0) {
            if (f->meta_k)
                rc = al_errf(e, "duplicate __metadata__");
            else
                rc = parse_meta(f, j, e);
            continue;
        }
        uint64_t sp[2] = {0, 0};
        al_st_tensor *t = &f->t[f->n];
        rc = parse_tensor(j, t, sp, data_size, e);
        if (rc == 0) {
            t->data = data + sp[0];
            spans[f->n] = (span_ref){sp[0], sp[1], t->name};
            f->n++;
        }
    }
    if (rc == 0) rc = check_unique_disjoint(spans, f->n, e);
    free(spans);
    return rc;
}

/* Takes ownership of buf (size bytes). */
static int open_buf(const char *path, const char *kind, unsigned char *buf, size_t size,
                    al_st_file **out, al_err *e) {
    al_st_file *f = al_calloc(1, sizeof *f, e);
    if (!f) {
        free(buf);
        return -1;
    }
    f->buf = buf;
    f->size = size;
    f->kind = kind;
    f->path = strdup(path);
    if (!f->path) {
        al_st_close(f);
        return al_errf(e, "out of memory");
    }
    if (parse_file(f, e) != 0) {
        al_err_prefix(e, "cannot read %s %s", kind, path);
        al_st_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int al_st_open_as(const char *path, const char *kind, al_st_file **out, al_err *e) {
    *out = NULL;
    unsigned char *buf = NULL;
    size_t size = 0;
    if (read_all(path, kind, &buf, &size, e) != 0) return -1;
    return open_buf(path, kind, buf, size, out, e);
}

int al_st_open(const char *path, al_st_file **out, al_err *e) {
    return al_st_open_as(path, "checkpoint", out, e);
}

int al_st_open_mem_as(const void *data, size_t n, const char *name, const char *kind,
                      al_st_file **out, al_err *e) {
    *out = NULL;
    unsigned char *buf = al_malloc(n + 1, 1, e);
    if (!buf) return -1;
    if (n) memcpy(buf, data, n);
    return open_buf(name, kind, buf, n, out, e);
}

int al_st_open_mem(const void *data, size_t n, const char *name, al_st_file **out, al_err *e) {
    return al_st_open_mem_as(data, n, name, "checkpoint", out, e);
}

void al_st_close(al_st_file *f) {
    if (!f) return;
    cJSON_Delete(f->root);
    free(f->buf);
    free(f->t);
    free(f->meta_k);
    free(f->meta_v);
    free(f->path);
    free(f);
}

int al_st_count(const al_st_file *f) { return f->n; }

const al_st_tensor *al_st_at(const al_st_file *f, int i) {
    return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const al_st_tensor *al_st_get(const al_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *al_st_meta(const al_st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_k[i], key) == 0) return f->meta_v[i];
    return NULL;
}

/* One little-endian F16 or BF16 element as float32 (exact: every such
 * value is a float32). */
static float half_to_f32(const unsigned char *p, al_dtype d) {
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return d == AL_DT_BF16 ? al_bf16_to_f32(h) : al_f16_to_f32(h);
}

int al_st_read_f32(const al_st_file *f, const char *name, int ndim, const int64_t *shape,
                   float *dst, al_err *e) {
    const al_st_tensor *t = al_st_get(f, name);
    dname dn = disp(name); /* names may come from the file: one line */
    name = dn.s;
    if (!t) return al_errf(e, "cannot read %s %s: tensor %s missing", f->kind, f->path, name);
    if (t->dtype == AL_DT_I32)
        return al_errf(e,
                       "cannot read %s %s: tensor %s has dtype %s, expected F32, F16 "
                       "or BF16",
                       f->kind, f->path, name, dtype_name(t->dtype));
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char got[128], want[128];
        al_fmt_shape(got, sizeof got, t->ndim, t->shape);
        al_fmt_shape(want, sizeof want, ndim, shape);
        return al_errf(e, "cannot read %s %s: tensor %s has shape %s, expected %s", f->kind,
                       f->path, name, got, want);
    }
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i]; /* validated at open */
    if (t->dtype != AL_DT_F32) {
        const unsigned char *b = t->data;
        for (size_t i = 0; i < n; i++) dst[i] = half_to_f32(b + 2 * i, t->dtype);
    } else {
        memcpy(dst, t->data, n * sizeof(float));
#if AL_BIG_ENDIAN
        for (size_t i = 0; i < n; i++) {
            unsigned char *p = (unsigned char *)&dst[i], c;
            c = p[0];
            p[0] = p[3];
            p[3] = c;
            c = p[1];
            p[1] = p[2];
            p[2] = c;
        }
#endif
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(dst[i]))
            return al_errf(e, "cannot read %s %s: tensor %s contains NaN/Inf at index %zu", f->kind,
                           f->path, name, i);
    return 0;
}
