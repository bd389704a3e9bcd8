/* fuzz_intervene.c -- intervention files (src/io/intervene.c):
 * al_intervention_parse on arbitrary bytes for a 2-layer model (vector
 * files named in them are looked up in a folder that has none), and
 * al_npy_parse on the same bytes. A refusal is one line and assigns
 * nothing; an accepted file's ops are in range (point run by the
 * forward, layer, head, position within n_ctx, a vector of the point's
 * length for add and set), and an accepted .npy's values are finite. */
#include "fuzz.h"

#include <math.h>

#include "attnlab/intervene.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    al_config c = al_config_default();
    c.n_layers = 2, c.d_model = 16, c.n_heads = 4, c.d_head = 4, c.n_ctx = 8, c.d_vocab = 50;
    al_intervention iv;
    al_err e;
    if (al_intervention_parse((const char *)d, n, "/nonexistent-attnlab-fuzz", &c, &iv, &e)) {
        fz_check_msg(&e);
        FZ_ASSERT(iv.n == 0 && iv.ops == NULL && iv.json == NULL);
    } else {
        FZ_ASSERT(iv.n >= 1 && iv.n <= AL_IV_MAX_OPS && iv.json);
        for (int i = 0; i < iv.n; i++) {
            const al_iv_op *op = &iv.ops[i];
            FZ_ASSERT(al_hook_runs(op->point) && op->layer >= 0 && op->layer < c.n_layers);
            FZ_ASSERT(op->head >= -1 && op->head < c.n_heads);
            FZ_ASSERT(!op->has_pos || (op->pos >= -c.n_ctx && op->pos < c.n_ctx));
            FZ_ASSERT(op->op >= AL_IV_ZERO && op->op <= AL_IV_SET);
            FZ_ASSERT((op->vec != NULL) == (op->op == AL_IV_ADD || op->op == AL_IV_SET));
            for (int k = 0; k < op->n_vec; k++) FZ_ASSERT(isfinite(op->vec[k]));
        }
        al_intervention_free(&iv);
    }
    float *v;
    size_t len;
    if (al_npy_parse(d, n, 1 << 16, &v, &len, &e)) {
        fz_check_msg(&e);
        FZ_ASSERT(v == NULL && len == 0);
    } else {
        FZ_ASSERT(len >= 1 && len <= (1 << 16));
        for (size_t k = 0; k < len; k++) FZ_ASSERT(isfinite(v[k]));
        free(v);
    }
    return 0;
}
