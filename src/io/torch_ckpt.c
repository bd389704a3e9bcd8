/* torch_ckpt.c -- PyTorch checkpoint reader: the zip, the storages and
 * the tensors (the pickle is torch_pickle.c's).
 *
 * libzip reads the archive, from the file or from memory. Before it is
 * given the bytes, a check of our own reads the end of central directory
 * records (the last, and every earlier zip64 candidate libzip may try):
 * counts, sizes and offsets must fit in the file, one disk only, so what
 * libzip allocates for the directory is bounded by the file's size
 * whatever the installed libzip checks. Then every entry's sizes are
 * checked against the file size and caps before anything is read,
 * storages are read once per key and their size compared with their
 * element count, and each tensor's extent is checked inside its storage
 * with overflow-checked arithmetic. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/torch_ckpt.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>

#include "torch_pickle.h"

#define MAX_PICKLE (256u << 20) /* data.pkl: a few MB for the largest state dicts */
#define MAX_ENTRY (1ull << 36) /* one storage (64 GiB) */
#define MAX_ENTRIES 1000000 /* zip entries */
#define DEFLATE_RATIO 1032 /* deflate's largest expansion */
#define EOCD_LEN 22
#define EOCD64_LEN 56
#define LOC64_LEN 20
#define CDIR_ENTRY_LEN 46
#define TAIL (EOCD_LEN + 65535 + LOC64_LEN) /* where libzip looks for the EOCD */

struct al_pt_file {
    char *path;
    al_pt_tensor *t;
    int n;
    unsigned char **bufs; /* storage buffers */
    int n_bufs;
};

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"BOOL", 1}};

const char *al_pt_dtype_name(al_pt_dtype d) { return (unsigned)d < 5 ? dtypes[d].name : "?"; }
size_t al_pt_dtype_size(al_pt_dtype d) { return (unsigned)d < 5 ? dtypes[d].size : 0; }

/* ------------------------------------------------------------ the kind */

/* The legacy format starts with a pickled magic number,
 * LONG1 0x1950a86a20f9469cfc6c, after PROTO 2. */
static const unsigned char legacy_magic[14] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                               0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

al_pt_kind al_pt_kind_mem(const void *data, size_t n) {
    const unsigned char *p = data;
    if (n >= sizeof legacy_magic && !memcmp(p, legacy_magic, sizeof legacy_magic))
        return AL_PT_LEGACY;
    if (n < 30 || memcmp(p, "PK\3\4", 4) != 0) return AL_PT_OTHER;
    /* the first local header's name: <stem>/data.pkl */
    size_t nl = (size_t)p[26] | (size_t)p[27] << 8;
    if (n < 30 + nl || nl < 10) return AL_PT_OTHER;
    const unsigned char *name = p + 30;
    if (memcmp(name + nl - 9, "/data.pkl", 9) != 0 || memchr(name, '/', nl - 9)) return AL_PT_OTHER;
    return AL_PT_ZIP;
}

int al_pt_kind_file(const char *path, al_pt_kind *kind, al_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return al_errf(e, "cannot read %s: %s", path, strerror(errno));
    unsigned char head[30 + 1024];
    size_t n = fread(head, 1, sizeof head, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) return al_errf(e, "cannot read %s: read error", path);
    *kind = al_pt_kind_mem(head, n);
    return 0;
}

/* ------------------------------------------------------------ raw bytes */

/* The file or the memory the archive is in, for our own checks. */
typedef struct src {
    const unsigned char *mem;
    FILE *f;
    uint64_t size;
} src;

static int src_read(const src *s, uint64_t off, void *buf, size_t n) {
    if (off > s->size || n > s->size - off) return -1;
    if (s->mem) {
        memcpy(buf, s->mem + off, n);
        return 0;
    }
    if (fseeko(s->f, (off_t)off, SEEK_SET) != 0) return -1;
    return fread(buf, 1, n, s->f) == n ? 0 : -1;
}

static uint64_t le(const unsigned char *p, int k) {
    uint64_t x = 0;
    for (int i = k - 1; i >= 0; i--) x = x << 8 | p[i];
    return x;
}

/* One end of central directory record at eocd (tail[at..]): the entry
 * count and directory it describes (through its zip64 record when it has
 * one) must be possible in a file of this size, on one disk. */
static int check_eocd(const src *s, const unsigned char *tail, size_t at, uint64_t eocd,
                      al_err *e) {
    const unsigned char *r = tail + at;
    uint64_t n_disk = le(r + 8, 2), n = le(r + 10, 2), size = le(r + 12, 4), off = le(r + 16, 4);
    uint64_t end = eocd; /* where the directory must end */
    if (le(r + 4, 2) != 0 || le(r + 6, 2) != 0 || n_disk != n)
        return al_errf(e, "a multi-disk zip");
    if (at >= LOC64_LEN && !memcmp(tail + at - LOC64_LEN, "PK\6\7", 4)) {
        const unsigned char *l = tail + at - LOC64_LEN;
        uint64_t at64 = le(l + 8, 8);
        unsigned char z[EOCD64_LEN];
        if (le(l + 4, 4) != 0 || le(l + 16, 4) != 1) return al_errf(e, "a multi-disk zip64");
        if (at64 > eocd - LOC64_LEN || eocd - LOC64_LEN - at64 < EOCD64_LEN ||
            src_read(s, at64, z, sizeof z) != 0 || memcmp(z, "PK\6\6", 4) != 0)
            return al_errf(e, "a zip64 end record outside the file");
        if (le(z + 16, 4) != 0 || le(z + 20, 4) != 0 || le(z + 24, 8) != le(z + 32, 8))
            return al_errf(e, "a multi-disk zip64");
        n = le(z + 32, 8);
        size = le(z + 40, 8);
        off = le(z + 48, 8);
        end = at64;
    }
    if (off > end || size > end - off)
        return al_errf(e,
                       "the zip's central directory (%" PRIu64 " bytes at %" PRIu64
                       ") lies outside the file",
                       size, off);
    if (n > size / CDIR_ENTRY_LEN || n > MAX_ENTRIES)
        return al_errf(e, "the zip claims %" PRIu64 " entries in a %" PRIu64 "-byte directory", n,
                       size);
    return 0;
}

/* Every end record libzip could pick from the tail is checked; the last
 * one must end the file exactly (its comment running to the end). */
static int check_zip_end(const src *s, al_err *e) {
    if (s->size < EOCD_LEN) return al_errf(e, "truncated zip (%" PRIu64 " bytes)", s->size);
    size_t n = s->size < TAIL ? (size_t)s->size : TAIL;
    uint64_t start = s->size - n;
    unsigned char *tail = al_malloc(n, 1, e);
    if (!tail) return -1;
    int rc = 0, found = 0;
    if (src_read(s, start, tail, n) != 0) rc = al_errf(e, "read error");
    for (size_t i = n - EOCD_LEN + 1; rc == 0 && i-- > 0;) {
        if (memcmp(tail + i, "PK\5\6", 4) != 0) continue;
        if (!found && i + EOCD_LEN + le(tail + i + 20, 2) != n) continue;
        /* an earlier one may be stored data: only a zip64 one can hurt */
        if (found && (i < LOC64_LEN || memcmp(tail + i - LOC64_LEN, "PK\6\7", 4) != 0)) continue;
        found = 1;
        rc = check_eocd(s, tail, i, start + i, e);
    }
    free(tail);
    if (rc == 0 && !found)
        rc = al_errf(e, "truncated zip (no end of central directory record at its end)");
    return rc;
}

/* ------------------------------------------------------------ entries */

typedef struct zctx {
    zip_t *z;
    uint64_t file_size;
    char prefix[256];
} zctx;

static int zerr(zctx *c, al_err *e, const char *what) {
    return al_errf(e, "%s (libzip: %s)", what, zip_strerror(c->z));
}

/* Index of prefix/name, or -1 (e not set) when absent. */
static int64_t locate(zctx *c, const char *name, size_t name_len) {
    char full[600];
    if (name_len > 300) return -1;
    snprintf(full, sizeof full, "%s/%.*s", c->prefix, (int)name_len, name);
    return zip_name_locate(c->z, full, ZIP_FL_ENC_RAW);
}

/* The entry's uncompressed size, after the checks that allow reading it. */
static int entry_size(zctx *c, int64_t idx, uint64_t cap, uint64_t *size, al_err *e) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(c->z, (zip_uint64_t)idx, ZIP_FL_ENC_RAW, &st) != 0)
        return zerr(c, e, "cannot stat a zip entry");
    const char *nm = st.valid & ZIP_STAT_NAME ? st.name : "?";
    al_pk_dname dn = al_pk_disp((const unsigned char *)nm, strlen(nm));
    if (!(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) ||
        !(st.valid & ZIP_STAT_COMP_METHOD))
        return al_errf(e, "zip entry %s has no sizes", dn.s);
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
        return al_errf(e, "zip entry %s is encrypted", dn.s);
    if (st.comp_size > c->file_size)
        return al_errf(e, "zip entry %s claims %" PRIu64 " bytes, more than the file's %" PRIu64,
                       dn.s, (uint64_t)st.comp_size, c->file_size);
    if (st.comp_method == ZIP_CM_STORE) {
        if (st.size != st.comp_size)
            return al_errf(e, "stored zip entry %s has two sizes (%" PRIu64 " and %" PRIu64 ")",
                           dn.s, (uint64_t)st.size, (uint64_t)st.comp_size);
    } else if (st.comp_method == ZIP_CM_DEFLATE) {
        if (st.size / DEFLATE_RATIO > st.comp_size)
            return al_errf(e, "deflated zip entry %s claims %" PRIu64 " bytes from %" PRIu64, dn.s,
                           (uint64_t)st.size, (uint64_t)st.comp_size);
    } else {
        return al_errf(e,
                       "zip entry %s uses compression method %d (only stored and deflated "
                       "entries are read)",
                       dn.s, (int)st.comp_method);
    }
    if (st.size > cap)
        return al_errf(e, "zip entry %s has %" PRIu64 " bytes, more than the %" PRIu64 " allowed",
                       dn.s, (uint64_t)st.size, cap);
    *size = st.size;
    return 0;
}

/* Read a whole entry of exactly size bytes into buf. */
static int read_entry(zctx *c, int64_t idx, void *buf, uint64_t size, al_err *e) {
    zip_file_t *zf = zip_fopen_index(c->z, (zip_uint64_t)idx, 0);
    if (!zf) return zerr(c, e, "cannot open a zip entry");
    uint64_t got = 0;
    int rc = 0;
    while (got < size) {
        zip_int64_t k = zip_fread(zf, (unsigned char *)buf + got, size - got);
        if (k <= 0) break;
        got += (uint64_t)k;
    }
    unsigned char extra;
    if (got != size || zip_fread(zf, &extra, 1) != 0) {
        const char *nm = zip_get_name(c->z, (zip_uint64_t)idx, ZIP_FL_ENC_RAW);
        rc = al_errf(e, "zip entry %s is damaged (libzip: %s)",
                     al_pk_disp((const unsigned char *)(nm ? nm : "?"), strlen(nm ? nm : "?")).s,
                     zip_file_strerror(zf));
    }
    zip_fclose(zf);
    return rc;
}

/* A small text entry (version, byteorder) as a string, or "" if absent. */
static int small_entry(zctx *c, const char *name, char *out, size_t cap, al_err *e) {
    out[0] = 0;
    int64_t idx = locate(c, name, strlen(name));
    if (idx < 0) return 0;
    uint64_t size;
    if (entry_size(c, idx, cap - 1, &size, e) != 0 || read_entry(c, idx, out, size, e) != 0)
        return -1;
    out[size] = 0;
    if (size && out[size - 1] == '\n') out[size - 1] = 0;
    return 0;
}

static int check_records(zctx *c, al_err *e) {
    char ver[24], order[24];
    if (small_entry(c, "version", ver, sizeof ver, e) != 0) return -1;
    if (!ver[0] && small_entry(c, ".data/version", ver, sizeof ver, e) != 0) return -1;
    if (!ver[0]) return al_errf(e, "no %s/version record (not a torch.save file)", c->prefix);
    char *end;
    long v = strtol(ver, &end, 10);
    if (*end || end == ver || v < 1 || v > 10)
        return al_errf(e, "unsupported serialization version '%s'",
                       al_pk_disp((const unsigned char *)ver, strlen(ver)).s);
    if (small_entry(c, "byteorder", order, sizeof order, e) != 0) return -1;
    if (!strcmp(order, "big"))
        return al_errf(e, "the tensors are stored big-endian (byteorder 'big'); attnlab reads "
                          "little-endian checkpoints");
    if (order[0] && strcmp(order, "little"))
        return al_errf(e, "unknown byteorder '%s'",
                       al_pk_disp((const unsigned char *)order, strlen(order)).s);
    return 0;
}

/* ------------------------------------------------------------ opening */

typedef struct skey {
    int i; /* storage ref */
    const al_pk_storage *s;
} skey;

static int cmp_key(const void *a, const void *b) {
    const al_pk_storage *x = ((const skey *)a)->s, *y = ((const skey *)b)->s;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
    int ia = ((const skey *)a)->i, ib = ((const skey *)b)->i;
    return (ia > ib) - (ia < ib);
}

/* Read every storage once per key; base[i] is storage ref i's bytes. */
static int load_storages(al_pt_file *f, zctx *c, const al_pk_result *r, const unsigned char **base,
                         al_err *e) {
    skey *k = al_malloc((size_t)r->n_st + 1, sizeof *k, e);
    f->bufs = al_calloc((size_t)r->n_st + 1, sizeof *f->bufs, e);
    if (!k || !f->bufs) {
        free(k);
        return -1;
    }
    for (int i = 0; i < r->n_st; i++) k[i] = (skey){i, &r->st[i]};
    qsort(k, (size_t)r->n_st, sizeof *k, cmp_key);
    int rc = 0;
    for (int i = 0; i < r->n_st && rc == 0;) {
        const al_pk_storage *s = k[i].s;
        al_pk_dname dn = al_pk_disp(s->key, s->key_len);
        int j = i + 1;
        for (; j < r->n_st && k[j].s->key_len == s->key_len &&
               !memcmp(k[j].s->key, s->key, s->key_len);
             j++)
            if (k[j].s->dtype != s->dtype || k[j].s->numel != s->numel)
                rc = al_errf(e, "storage %s is named with two types or sizes", dn.s);
        if (rc) break;
        char nm[300];
        snprintf(nm, sizeof nm, "data/%.*s", (int)s->key_len, (const char *)s->key);
        int64_t idx = s->key_len < 256 ? locate(c, nm, strlen(nm)) : -1;
        size_t bytes;
        uint64_t size;
        if (idx < 0) {
            rc = al_errf(e, "storage %s has no entry %s/data/%s in the zip", dn.s, c->prefix, dn.s);
        } else if (al_mul_overflow((size_t)s->numel, al_pt_dtype_size(s->dtype), &bytes) != 0 ||
                   bytes > MAX_ENTRY) {
            rc = al_errf(e, "storage %s claims %" PRId64 " elements", dn.s, s->numel);
        } else if (entry_size(c, idx, MAX_ENTRY, &size, e) != 0) {
            rc = -1;
        } else if (size != bytes) {
            rc = al_errf(e,
                         "storage %s has %" PRIu64 " bytes, but %" PRId64 " %s elements "
                         "need %zu",
                         dn.s, size, s->numel, al_pt_dtype_name(s->dtype), bytes);
        } else {
            unsigned char *b = al_malloc(bytes ? bytes : 1, 1, e); /* exact, for ASan */
            if (!b || read_entry(c, idx, b, bytes, e) != 0) {
                free(b);
                rc = -1;
            } else {
                f->bufs[f->n_bufs++] = b;
                for (int q = i; q < j; q++) base[k[q].i] = b;
            }
        }
        i = j;
    }
    free(k);
    return rc;
}

/* A tensor's elements inside its storage. */
static int check_extent(const al_pt_tensor *t, al_err *e) {
    al_pk_dname dn = al_pk_disp((const unsigned char *)t->name, strlen(t->name));
    uint64_t numel = 1, last = (uint64_t)t->offset;
    int empty = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] == 0) empty = 1;
    for (int d = 0; d < t->ndim && !empty; d++) {
        uint64_t s = (uint64_t)t->shape[d], st = (uint64_t)t->stride[d];
        if (s > AL_PT_MAX_NUMEL || (numel *= s) > AL_PT_MAX_NUMEL)
            return al_errf(e, "tensor %s has more than %llu elements", dn.s,
                           (unsigned long long)AL_PT_MAX_NUMEL);
        /* (s-1)·st with s <= 2^32 and st < 2^63 fits in 96 bits: check */
        if (st && s - 1 > (UINT64_MAX - last) / st)
            return al_errf(e, "tensor %s: its strides overflow", dn.s);
        last += (s - 1) * st;
    }
    if (empty) return 0;
    if (last >= (uint64_t)t->storage_numel)
        return al_errf(e,
                       "tensor %s reaches element %" PRIu64 " of a storage of %" PRId64
                       " (offset %" PRId64 ")",
                       dn.s, last, t->storage_numel, t->offset);
    return 0;
}

static int build(al_pt_file *f, zctx *c, al_err *e) {
    int64_t idx = locate(c, "data.pkl", 8);
    if (idx < 0) return al_errf(e, "no %s/data.pkl in the zip (not a torch.save file)", c->prefix);
    uint64_t size;
    if (entry_size(c, idx, MAX_PICKLE, &size, e) != 0) return -1;
    unsigned char *pk = al_malloc((size_t)size + 1, 1, e);
    if (!pk) return -1;
    al_pk_result r;
    const unsigned char **base = NULL;
    int rc = read_entry(c, idx, pk, size, e);
    if (rc == 0) rc = check_records(c, e);
    if (rc == 0)
        rc = al_pk_load(pk, (size_t)size, &r, e);
    else
        memset(&r, 0, sizeof r);
    if (rc == 0) rc = (base = al_calloc((size_t)r.n_st + 1, sizeof *base, e)) ? 0 : -1;
    if (rc == 0) rc = load_storages(f, c, &r, base, e);
    if (rc == 0) rc = (f->t = al_calloc((size_t)r.n_t + 1, sizeof *f->t, e)) ? 0 : -1;
    for (int i = 0; rc == 0 && i < r.n_t; i++) {
        al_pk_tensor *p = &r.t[i];
        al_pt_tensor *t = &f->t[i];
        const al_pk_storage *s = &r.st[p->storage];
        t->name = p->name;
        p->name = NULL; /* f owns it now */
        f->n++;
        t->dtype = s->dtype;
        t->ndim = p->ndim;
        memcpy(t->shape, p->shape, sizeof t->shape);
        memcpy(t->stride, p->stride, sizeof t->stride);
        t->offset = p->offset;
        t->storage = base[p->storage];
        t->storage_numel = s->numel;
        rc = check_extent(t, e);
        /* <= AL_PT_MAX_NUMEL once checked, unless a size is 0 */
        t->numel = 1;
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] == 0) t->numel = 0;
        for (int d = 0; rc == 0 && t->numel && d < t->ndim; d++) t->numel *= t->shape[d];
    }
    al_pk_free(&r);
    free(base);
    free(pk);
    return rc;
}

/* Takes the source (libzip frees it). */
static int open_src(const char *path, zip_source_t *zs, const src *raw, al_pt_file **out,
                    al_err *e) {
    unsigned char head[30 + 1024];
    size_t hn = raw->size < sizeof head ? (size_t)raw->size : sizeof head;
    al_pt_kind kind = AL_PT_OTHER;
    if (src_read(raw, 0, head, hn) == 0) kind = al_pt_kind_mem(head, hn);
    if (kind == AL_PT_LEGACY) {
        zip_source_free(zs);
        return al_errf(e,
                       "cannot read checkpoint %s: it is in PyTorch's legacy non-zip format; "
                       "re-save it with torch.save in PyTorch >= 1.6",
                       path);
    }
    if (hn < 4 || memcmp(head, "PK\3\4", 4) != 0) {
        zip_source_free(zs);
        return al_errf(e,
                       "cannot read checkpoint %s: not a PyTorch checkpoint (neither a zip "
                       "written by torch.save nor PyTorch's legacy format)",
                       path);
    }
    if (check_zip_end(raw, e) != 0) {
        zip_source_free(zs);
        return al_err_prefix(e, "cannot read checkpoint %s", path);
    }
    zip_error_t ze;
    zip_error_init(&ze);
    zctx c = {.file_size = raw->size};
    c.z = zip_open_from_source(zs, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!c.z) {
        al_errf(e, "cannot read checkpoint %s: not a readable zip (libzip: %s)", path,
                zip_error_strerror(&ze));
        zip_error_fini(&ze);
        zip_source_free(zs);
        return -1;
    }
    zip_error_fini(&ze);
    al_pt_file *f = al_calloc(1, sizeof *f, e);
    int rc = f ? 0 : -1;
    if (rc == 0 && !(f->path = strdup(path))) rc = al_errf(e, "out of memory");
    zip_int64_t n = zip_get_num_entries(c.z, 0);
    const char *first = n > 0 ? zip_get_name(c.z, 0, ZIP_FL_ENC_RAW) : NULL;
    const char *slash = first ? strchr(first, '/') : NULL;
    if (rc == 0 && (n <= 0 || n > MAX_ENTRIES))
        rc = al_errf(e, "the zip has %" PRId64 " entries", (int64_t)n);
    else if (rc == 0 && (!slash || slash == first || slash - first >= (long)sizeof c.prefix))
        rc = al_errf(e, "the zip's first entry is not in a top folder (not a torch.save file)");
    if (rc == 0) {
        memcpy(c.prefix, first, (size_t)(slash - first));
        c.prefix[slash - first] = 0;
        rc = build(f, &c, e);
    }
    zip_discard(c.z);
    if (rc != 0) {
        if (f) al_err_prefix(e, "cannot read checkpoint %s", path);
        al_pt_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int al_pt_open(const char *path, al_pt_file **out, al_err *e) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return al_errf(e, "cannot read checkpoint %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return al_errf(e, "cannot read checkpoint %s: not a regular file", path);
    }
    src raw = {.f = fp, .size = (uint64_t)st.st_size};
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *zs = zip_source_filep_create(fp, 0, -1, &ze);
    zip_error_fini(&ze);
    if (!zs) {
        fclose(fp);
        return al_errf(e, "cannot read checkpoint %s: out of memory", path);
    }
    /* fp now belongs to zs; our checks read it before libzip does */
    return open_src(path, zs, &raw, out, e);
}

int al_pt_open_mem(const void *data, size_t n, const char *name, al_pt_file **out, al_err *e) {
    *out = NULL;
    static const unsigned char none;
    src raw = {.mem = n ? data : &none, .size = n};
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *zs = zip_source_buffer_create(n ? data : &none, n, 0, &ze);
    zip_error_fini(&ze);
    if (!zs) return al_errf(e, "cannot read checkpoint %s: out of memory", name);
    return open_src(name, zs, &raw, out, e);
}

void al_pt_close(al_pt_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free((char *)f->t[i].name);
    for (int i = 0; i < f->n_bufs; i++) free(f->bufs[i]);
    free(f->bufs);
    free(f->t);
    free(f->path);
    free(f);
}

int al_pt_count(const al_pt_file *f) { return f->n; }

const al_pt_tensor *al_pt_at(const al_pt_file *f, int i) {
    return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const al_pt_tensor *al_pt_get(const al_pt_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

/* ------------------------------------------------------------ reading */

static float load_f32(const unsigned char *b, al_pt_dtype d, uint64_t i) {
    if (d != AL_PT_F32) {
        uint16_t h = (uint16_t)le(b + 2 * i, 2);
        return d == AL_PT_F16 ? al_f16_to_f32(h) : al_bf16_to_f32(h);
    }
    uint32_t bits = (uint32_t)le(b + 4 * i, 4);
    float x;
    memcpy(&x, &bits, 4);
    return x;
}

int al_pt_read_f32(const al_pt_file *f, const char *name, int ndim, const int64_t *shape,
                   float *dst, al_err *e) {
    const al_pt_tensor *t = al_pt_get(f, name);
    al_pk_dname dn = al_pk_disp((const unsigned char *)name, strlen(name));
    if (!t) return al_errf(e, "cannot read checkpoint %s: tensor %s missing", f->path, dn.s);
    if (t->dtype != AL_PT_F32 && t->dtype != AL_PT_F16 && t->dtype != AL_PT_BF16)
        return al_errf(e,
                       "cannot read checkpoint %s: tensor %s has dtype %s, expected F32, F16 "
                       "or BF16",
                       f->path, dn.s, al_pt_dtype_name(t->dtype));
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char got[200], want[200];
        al_fmt_shape(got, sizeof got, t->ndim, t->shape);
        al_fmt_shape(want, sizeof want, ndim, shape);
        return al_errf(e, "cannot read checkpoint %s: tensor %s has shape %s, expected %s", f->path,
                       dn.s, got, want);
    }
    if (t->numel == 0) return 0;
    /* walk the index in row-major order; idx[] counts, pos follows strides */
    int64_t idx[AL_PT_MAX_DIMS] = {0};
    uint64_t pos = (uint64_t)t->offset;
    const unsigned char *b = t->storage;
    int nd = t->ndim;
    int64_t inner = nd ? t->shape[nd - 1] : 1, ist = nd ? t->stride[nd - 1] : 0;
    for (uint64_t out = 0; out < (uint64_t)t->numel;) {
        for (int64_t j = 0; j < inner; j++) {
            float x = load_f32(b, t->dtype, pos + (uint64_t)(j * ist));
            if (!isfinite(x))
                return al_errf(e,
                               "cannot read checkpoint %s: tensor %s contains NaN/Inf at "
                               "index %" PRIu64,
                               f->path, dn.s, out + (uint64_t)j);
            dst[out + (uint64_t)j] = x;
        }
        out += (uint64_t)inner;
        for (int d = nd - 2; d >= 0; d--) { /* carry */
            pos += (uint64_t)t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            pos -= (uint64_t)t->stride[d] * (uint64_t)t->shape[d];
            idx[d] = 0;
        }
    }
    return 0;
}
