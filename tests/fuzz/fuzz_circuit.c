/* fuzz_circuit.c -- circuit files (src/analysis/circuit_file.c):
 * al_circuit_parse on arbitrary bytes for a 2-layer, 8-head graph and a
 * 1-layer, 3-head one. Properties: a refusal is one line and assigns
 * nothing (kept keeps its poison byte); an accepted file sets kept to 0
 * or 1 only, and formats back to text that parses to the same set. */
#include "fuzz.h"

#include "attnlab/circuit_file.h"
#include "attnlab/discover.h"

static void one(const uint8_t *d, size_t n, int L, int H) {
    enum { MAXE = 306 };
    unsigned char kept[MAXE], back[MAXE];
    int ne = al_graph_n_edges(L, H);
    FZ_ASSERT(ne > 0 && ne <= MAXE);
    memset(kept, 0xAB, sizeof kept);
    al_err e;
    if (al_circuit_parse((const char *)d, n, L, H, kept, &e) != 0) {
        fz_check_msg(&e);
        for (int k = 0; k < MAXE; k++) FZ_ASSERT(kept[k] == 0xAB);
        return;
    }
    for (int k = 0; k < ne; k++) FZ_ASSERT(kept[k] <= 1);
    for (int k = ne; k < MAXE; k++) FZ_ASSERT(kept[k] == 0xAB);
    al_circuit_info info = {"x", "t", "acdc", "kl", 0.0, 0.0, 0.0, 0.0, 0};
    char *text = NULL;
    FZ_ASSERT(al_circuit_format(&info, L, H, kept, NULL, &text, &e) == 0);
    FZ_ASSERT(al_circuit_parse(text, strlen(text), L, H, back, &e) == 0);
    FZ_ASSERT(memcmp(kept, back, (size_t)ne) == 0);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    one(d, n, 2, 8);
    one(d, n, 1, 3);
    return 0;
}
