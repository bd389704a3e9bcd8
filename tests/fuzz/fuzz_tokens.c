/* fuzz_tokens.c -- al_tokens_load on arbitrary token files (llm.c format:
 * 256 int32 header words, then uint16 tokens). Whatever the header claims,
 * nothing is allocated before the count is checked against the file size;
 * an accepted file yields exactly count tokens, and batches from it stay
 * inside it. */
#include "fuzz.h"

#include "attnlab/data.h"

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    al_tokens t;
    al_err e;
    if (al_tokens_load(fz_file("tokens", d, n), &t, &e) != 0) {
        fz_check_msg(&e);
        return 0;
    }
    FZ_ASSERT(n >= 1024 && le32(d) == AL_TOKENS_MAGIC && le32(d + 4) == AL_TOKENS_VERSION);
    FZ_ASSERT(t.n == le32(d + 8) && t.n == (n - 1024) / 2 && (n & 1) == 0);
    int max_id = 0;
    for (size_t i = 0; i < t.n; i++) {
        int v = d[1024 + 2 * i] | d[1024 + 2 * i + 1] << 8;
        FZ_ASSERT(t.tok[i] == v);
        if (v > max_id) max_id = v;
    }
    FZ_ASSERT(t.max_id == max_id);
    int T = 8, B = 3, in[24], tg[24];
    if (t.n > (size_t)T) {
        al_rng r;
        al_rng_seed(&r, n);
        FZ_ASSERT(al_batch_random(&t, B, T, &r, in, tg, &e) == 0);
        FZ_ASSERT(al_batch_fixed(&t, B, T, 1, 2, in, tg, &e) == 0);
        for (int i = 0; i < B * T; i++) FZ_ASSERT(in[i] <= max_id && tg[i] <= max_id);
    }
    al_tokens_free(&t);
    return 0;
}
