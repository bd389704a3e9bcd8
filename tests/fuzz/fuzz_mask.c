/* fuzz_mask.c -- head masks (src/analysis/ablate.c): al_mask_load on arbitrary
 * mask JSON for a 2-layer, 8-head model, and al_heads_parse on the input
 * as a head list ("0.3,1.4"), whose accepted lists format back to the
 * same selection. */
#include "fuzz.h"

#include "attnlab/ablate.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    al_config c = al_config_default();
    c.n_layers = 2;
    c.d_vocab = 300;
    unsigned char off[16];
    al_err e;
    if (al_mask_load(fz_file("mask", d, n), &c, off, &e) != 0)
        fz_check_msg(&e);
    else
        for (int i = 0; i < 16; i++) FZ_ASSERT(off[i] <= 1);
    /* the same bytes as a head list, for 3 layers of 5 heads */
    char *s = malloc(n + 1);
    FZ_ASSERT(s);
    memcpy(s, d, n);
    s[n] = 0;
    unsigned char sel[15], sel2[15];
    if (al_heads_parse(s, 3, 5, sel, &e) == 0) {
        char buf[128];
        size_t len = al_heads_format(sel, 3, 5, 1, buf, sizeof buf);
        FZ_ASSERT(len < sizeof buf);
        FZ_ASSERT(al_heads_parse(buf, 3, 5, sel2, &e) == 0);
        FZ_ASSERT(memcmp(sel, sel2, sizeof sel) == 0);
    } else {
        fz_check_msg(&e);
    }
    free(s);
    return 0;
}
