/* fuzz_safetensors.c -- al_st_open_mem on arbitrary bytes, then every
 * accessor on what it accepted. The input is copied into a buffer of
 * exactly its size, so any read past a tensor's span is an ASan error. */
#include "fuzz.h"

#include "attnlab/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    al_st_file *f;
    al_err e;
    if (al_st_open_mem(d, n, "fuzz.safetensors", &f, &e) != 0) {
        fz_check_msg(&e);
        return 0;
    }
    int cnt = al_st_count(f);
    FZ_ASSERT(cnt >= 0);
    for (int i = 0; i < cnt; i++) {
        const al_st_tensor *t = al_st_at(f, i);
        FZ_ASSERT(t && t->name && t->ndim >= 0 && t->ndim <= AL_ST_MAX_DIMS);
        FZ_ASSERT(al_st_get(f, t->name) == t);
        size_t ne = 1;
        for (int k = 0; k < t->ndim; k++) {
            FZ_ASSERT(t->shape[k] >= 0);
            ne *= (size_t)t->shape[k];
        }
        /* the accepted span lies in the input: touch its first and last byte
         * (F16 and BF16 elements are 2 bytes, F32 and I32 4) */
        if (ne > 0) {
            const size_t esz = t->dtype == AL_DT_F16 || t->dtype == AL_DT_BF16 ? 2 : 4;
            const unsigned char *p = t->data;
            volatile unsigned char x = p[0] ^ p[ne * esz - 1];
            (void)x;
        }
        if (t->dtype == AL_DT_F32 && ne <= (1u << 16)) {
            float *buf = malloc((ne ? ne : 1) * sizeof(float));
            FZ_ASSERT(buf);
            if (al_st_read_f32(f, t->name, t->ndim, t->shape, buf, &e) != 0) fz_check_msg(&e);
            /* a wrong shape must be refused, never read */
            int64_t wrong[AL_ST_MAX_DIMS] = {0};
            memcpy(wrong, t->shape, sizeof(int64_t) * (size_t)t->ndim);
            if (t->ndim > 0) {
                wrong[0] += 1;
                FZ_ASSERT(al_st_read_f32(f, t->name, t->ndim, wrong, buf, &e) != 0);
            }
            free(buf);
        }
    }
    (void)al_st_meta(f, "format");
    (void)al_st_get(f, "embed.W_E");
    al_st_close(f);
    return 0;
}
