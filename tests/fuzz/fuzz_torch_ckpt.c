/* fuzz_torch_ckpt.c -- al_pt_open_mem (torch_ckpt.h) on arbitrary bytes,
 * then every accessor on what it accepted.
 *
 * An input that starts with "PK" is the whole file. Any other input is a
 * data.pkl, which the target wraps in a zip of torch.save's layout with
 * four fixed storages (f/data/0: 64 bytes, 1: 24, 2: 8, 3: 3): a mutated
 * pickle inside a real file would only fail its zip CRC, so this is how
 * the pickle VM, the storage checks and the strided reads get fuzzed.
 *
 * The file is in a buffer of exactly its size and each storage is read
 * into one of exactly its size, so any read outside them is an ASan
 * error. Whatever is refused gets one line; whatever is accepted has
 * names that al_pt_get finds, the first and last element of every tensor
 * inside its storage, and float tensors that read (or are refused for
 * NaN/Inf) and refuse a wrong shape. */
#include "fuzz.h"

#include <zip.h>

#include "attnlab/torch_ckpt.h"

static void add(zip_t *z, const char *name, const void *d, size_t n) {
    zip_source_t *s = zip_source_buffer(z, d, n, 0);
    FZ_ASSERT(s);
    zip_int64_t i = zip_file_add(z, name, s, ZIP_FL_ENC_UTF_8);
    FZ_ASSERT(i >= 0 && zip_set_file_compression(z, (zip_uint64_t)i, ZIP_CM_STORE, 0) == 0);
}

/* pkl as f/data.pkl of a stored zip, with the fixed storages. */
static unsigned char *wrap(const uint8_t *pkl, size_t n, size_t *out_n) {
    static unsigned char s0[64], s1[24], s2[8], s3[3] = {1, 0, 1};
    for (int i = 0; i < 16; i++) { /* floats 0.5·i, little-endian */
        float x = 0.5f * (float)i;
        memcpy(s0 + 4 * i, &x, 4);
    }
    for (int i = 0; i < 12; i++) s1[2 * i + 1] = (unsigned char)(0x3c + i % 3); /* halves */
    s2[0] = 7;
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *buf = zip_source_buffer_create(NULL, 0, 0, &ze);
    FZ_ASSERT(buf);
    zip_source_keep(buf);
    zip_t *z = zip_open_from_source(buf, ZIP_TRUNCATE, &ze);
    FZ_ASSERT(z);
    add(z, "f/data.pkl", pkl, n);
    add(z, "f/data/0", s0, sizeof s0);
    add(z, "f/data/1", s1, sizeof s1);
    add(z, "f/data/2", s2, sizeof s2);
    add(z, "f/data/3", s3, sizeof s3);
    add(z, "f/version", "3\n", 2);
    FZ_ASSERT(zip_close(z) == 0);
    FZ_ASSERT(zip_source_open(buf) == 0 && zip_source_seek(buf, 0, SEEK_END) == 0);
    zip_int64_t size = zip_source_tell(buf);
    FZ_ASSERT(size > 0 && zip_source_seek(buf, 0, SEEK_SET) == 0);
    unsigned char *out = malloc((size_t)size);
    FZ_ASSERT(out && zip_source_read(buf, out, (zip_uint64_t)size) == size);
    zip_source_close(buf);
    zip_source_free(buf);
    zip_error_fini(&ze);
    *out_n = (size_t)size;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    unsigned char *copy;
    if (n >= 2 && d[0] == 'P' && d[1] == 'K') {
        copy = malloc(n ? n : 1);
        FZ_ASSERT(copy);
        memcpy(copy, d, n);
    } else {
        copy = wrap(d, n, &n);
    }
    al_pt_kind k = al_pt_kind_mem(copy, n);
    FZ_ASSERT(k == AL_PT_OTHER || k == AL_PT_ZIP || k == AL_PT_LEGACY);
    al_pt_file *f = NULL;
    al_err e;
    if (al_pt_open_mem(copy, n, "fuzz.pt", &f, &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(f == NULL);
        free(copy);
        return 0;
    }
    free(copy); /* nothing may point into the input */
    int cnt = al_pt_count(f);
    FZ_ASSERT(cnt >= 0 && al_pt_at(f, cnt) == NULL);
    for (int i = 0; i < cnt; i++) {
        const al_pt_tensor *t = al_pt_at(f, i);
        FZ_ASSERT(t && t->name && t->ndim >= 0 && t->ndim <= AL_PT_MAX_DIMS);
        FZ_ASSERT(al_pt_get(f, t->name) == t);
        FZ_ASSERT(t->numel >= 0 && (uint64_t)t->numel <= AL_PT_MAX_NUMEL);
        size_t es = al_pt_dtype_size(t->dtype);
        FZ_ASSERT(es > 0);
        if (t->numel > 0) {
            uint64_t last = (uint64_t)t->offset;
            for (int k2 = 0; k2 < t->ndim; k2++)
                last += (uint64_t)(t->shape[k2] - 1) * (uint64_t)t->stride[k2];
            FZ_ASSERT(last < (uint64_t)t->storage_numel);
            const unsigned char *s = t->storage;
            volatile unsigned char x = s[(size_t)t->offset * es] ^ s[(last + 1) * es - 1];
            (void)x;
        }
        int is_float = t->dtype == AL_PT_F32 || t->dtype == AL_PT_F16 || t->dtype == AL_PT_BF16;
        if (t->numel <= (1 << 16)) {
            float *buf = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
            FZ_ASSERT(buf);
            int rc = al_pt_read_f32(f, t->name, t->ndim, t->shape, buf, &e);
            if (rc != 0) fz_check_msg(&e);
            FZ_ASSERT(is_float || rc != 0);
            int64_t wrong[AL_PT_MAX_DIMS + 1] = {0};
            memcpy(wrong, t->shape, sizeof(int64_t) * (size_t)t->ndim);
            wrong[t->ndim] = 1; /* one dimension more */
            FZ_ASSERT(al_pt_read_f32(f, t->name, t->ndim + 1, wrong, buf, &e) != 0);
            fz_check_msg(&e);
            free(buf);
        }
    }
    (void)al_pt_get(f, "embed.W_E");
    al_pt_close(f);
    return 0;
}
