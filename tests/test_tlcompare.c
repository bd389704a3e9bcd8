/* test_tlcompare.c -- al_compare_run (compare, import --compare) on
 * reference files that cannot be compared: each refused with the file and
 * the reason, before any forward; the split inputs (q/k/v_input) a
 * reference may hold are listed as skipped, not compared. */
#include <stdlib.h>
#include <string.h>

#include "attnlab/model.h"
#include "attnlab/safetensors.h"
#include "attnlab/tlcompare.h"
#include "test.h"

enum { V = 16, C = 8, N = 8 };

static void tiny(al_model *m) {
    al_config c = al_config_default();
    c.n_layers = 1, c.d_model = C, c.n_heads = 2, c.d_head = 4, c.n_ctx = N, c.d_vocab = V;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
}

/* A reference file of tokens (dtype dt, 1 x T) and, when extra is given,
 * one more F32 tensor of shape (1, T, k1, k2) (k2 0: 3 dimensions), with
 * metadata processing when proc is given. */
static const char *ref(const char *name, al_dtype dt, int T, const char *extra, int k1, int k2,
                       const char *proc) {
    static int32_t tok[64];
    static float x[64 * 64];
    for (int i = 0; i < T; i++) tok[i] = i % V;
    al_st_tensor t[2] = {{.name = "tokens", .dtype = dt, .ndim = 2, .shape = {1, T}, .data = tok}};
    int n = 1;
    if (extra)
        t[n++] = (al_st_tensor){.name = extra,
                                .dtype = AL_DT_F32,
                                .ndim = k2 ? 4 : 3,
                                .shape = {1, T, k1, k2},
                                .data = x};
    const char *mk[1] = {"processing"}, *mv[1] = {proc};
    const char *p = t_path(name);
    al_err e;
    CHECK_OK(al_st_write(p, t, n, proc ? mk : NULL, proc ? mv : NULL, proc ? 1 : 0, &e), &e);
    return p;
}

static void refused(al_model *m, const char *path, const char *want) {
    al_compare_result r;
    al_err e = {{0}};
    CHECKF(al_compare_run(m, path, 1e-4, &r, &e) == -1, "%s accepted", path);
    CHECKF(strstr(e.msg, want) && strstr(e.msg, path) && !strchr(e.msg, '\n'), "[%s] want [%s]",
           e.msg, want);
    al_compare_free(&r);
}

TEST(tlcompare_bad_references_refused) {
    al_model m;
    tiny(&m);
    refused(&m, ref("f.st", AL_DT_F32, 4, NULL, 0, 0, NULL), "no tokens (B, T) of dtype I32");
    refused(&m, ref("long.st", AL_DT_I32, 20, NULL, 0, 0, NULL),
            "tokens of shape (1, 20): need 1..n_ctx (8) positions");
    refused(&m, ref("shape.st", AL_DT_I32, 4, "blocks.0.hook_resid_pre", 3, 0, NULL),
            "tensor blocks.0.hook_resid_pre is not F32 of this model's shape for its hook point");
    refused(&m, ref("proc.st", AL_DT_I32, 4, NULL, 0, 0, "fold_ln,bogus"),
            "metadata processing names 'bogus', no step of TransformerLens's");
    refused(&m, ref("proc2.st", AL_DT_I32, 4, NULL, 0, 0, "fold_ln"),
            "was made from weights processed with 'fold_ln' but this model's are processed with "
            "'none'");
    /* a split input: listed as skipped, not compared (and with nothing
     * else to compare, no row and no pass) */
    const char *p = ref("split.st", AL_DT_I32, 4, "blocks.0.hook_q_input", 2, C, NULL);
    al_compare_result r;
    al_err e;
    CHECK_OK(al_compare_run(&m, p, 1e-4, &r, &e), &e);
    CHECKF(!strcmp(r.skipped, "blocks.0.hook_q_input") && r.n == 0 && !r.pass,
           "skipped [%s], %d rows", r.skipped, r.n);
    al_compare_free(&r);
    al_model_free(&m);
}
