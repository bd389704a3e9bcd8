/* fuzz_sae.c -- al_sae_load_mem (sae_io.h) on arbitrary bytes: the
 * input is a 4-byte little-endian length L, then L bytes of cfg.json, then
 * the sae_weights.safetensors bytes (each copied into a buffer of exactly
 * its size). Whatever is refused gets one line and leaves nothing
 * allocated; whatever is accepted has the shapes cfg.json said, finite
 * weights, and runs one forward on a zero input. */
#include "fuzz.h"

#include <math.h>

#include "attnlab/sae.h"
#include "attnlab/sae_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n < 4) return 0;
    size_t L = (size_t)d[0] | (size_t)d[1] << 8 | (size_t)d[2] << 16 | (size_t)d[3] << 24;
    if (L > n - 4) L = n - 4;
    char *cfg = malloc(L ? L : 1);
    size_t sn = n - 4 - L;
    unsigned char *st = malloc(sn ? sn : 1);
    FZ_ASSERT(cfg && st);
    memcpy(cfg, d + 4, L);
    memcpy(st, d + 4 + L, sn);
    al_sae s;
    al_sae_meta m;
    al_err e;
    if (al_sae_load_mem(cfg, L, st, sn, "fuzz", &s, &m, &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(s.params == NULL);
    } else {
        FZ_ASSERT(s.cfg.d_in >= 1 && s.cfg.d_sae >= 1 && al_sae_cfg_check(&s.cfg, &e) == 0);
        FZ_ASSERT(al_sae_count_nonfinite(&s) == 0);
        FZ_ASSERT(m.scale > 0 && isfinite(m.scale));
        char hook[64];
        FZ_ASSERT(al_sae_hook_name(m.site, m.hook_layer, hook, sizeof hook) == 0);
        if ((size_t)s.cfg.d_in * (size_t)s.cfg.d_sae <= (1u << 16)) {
            float *x = calloc((size_t)s.cfg.d_in, sizeof(float));
            FZ_ASSERT(x);
            if (al_sae_forward(&s, x, 1, &e) != 0) fz_check_msg(&e);
            free(x);
        }
        al_sae_free(&s);
    }
    free(cfg);
    free(st);
    return 0;
}
