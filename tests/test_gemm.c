/* test_gemm.c -- al_sgemm (gemm.h) on both backends against a naive
 * double-precision product, the properties the engine relies on (an
 * element's bits independent of M, of leading dimensions and of being
 * called inside a parallel region), the two backends agreeing on a
 * model's loss and gradients, and training repeatable bit for bit. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/gemm.h"
#include "attnlab/model.h"
#include "attnlab/util.h"
#include "randmodel.h"
#include "test.h"

static const al_matmul_backend BACKENDS[2] = {AL_MATMUL_ONEDNN, AL_MATMUL_OPENBLAS};

static float urand(al_rng *r) { return (float)(al_rng_uniform(r) * 2.0 - 1.0); }

/* A stored operand of rows x cols with row stride ld, random values in
 * the matrix and `fill` in the padding. */
static float *mat(al_rng *r, int rows, int cols, int ld, float fill) {
    float *a = malloc(sizeof(float) * (size_t)rows * ld);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < ld; j++) a[(size_t)i * ld + j] = j < cols ? urand(r) : fill;
    return a;
}

/* One product checked against a double-precision loop. The tolerance is
 * the worst case of float accumulation, K · 2⁻²³ · Σ_k |a_ik b_kj| (plus
 * the rounding of alpha·sum + beta·c), far above what either library
 * reaches but far below any indexing mistake (an error of order one
 * term). The padding of C must be untouched and, with beta = 0, NaN in C
 * must not reach the result. Returns the number of bad elements. */
static int check_one(bool ta, bool tb, int M, int N, int K, float alpha, float beta, int pad,
                     float cfill, al_rng *r) {
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    float *A = mat(r, ta ? K : M, ta ? M : K, lda, 7.0f);
    float *B = mat(r, tb ? N : K, tb ? K : N, ldb, 7.0f);
    float *C = mat(r, M, N, ldc, -3.0f);
    if (cfill != 0.0f)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = cfill;
    float *C0 = malloc(sizeof(float) * (size_t)M * ldc);
    memcpy(C0, C, sizeof(float) * (size_t)M * ldc);
    al_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            float got = C[(size_t)i * ldc + j];
            if (j >= N) {
                bad += got != -3.0f;
                continue;
            }
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b, mag += fabs(a * b);
            }
            double c0 = C0[(size_t)i * ldc + j];
            double bc = beta != 0.0f ? beta * c0 : 0.0; /* c0 may be NaN */
            double want = alpha * s + bc;
            double tol = (K + 2) * 0x1p-23 * (fabs(alpha) * mag + fabs(bc) + fabs(want));
            if (!(fabs(got - want) <= tol)) {
                if (bad < 3)
                    t_fail(
                        __FILE__, __LINE__,
                        "%s ta %d tb %d %dx%dx%d alpha %g beta %g pad %d: C[%d,%d] %.9g want %.9g",
                        al_gemm_backend_name(), ta, tb, M, N, K, alpha, beta, pad, i, j, got, want);
                bad++;
            }
        }
    free(A), free(B), free(C), free(C0);
    return bad;
}

/* Every transpose combination, odd shapes, leading dimensions wider than
 * the matrix, alpha 1, -1 and 0.37, beta 0, 1 and 0.5, on both backends. */
TEST(gemm_matches_naive_all_transposes) {
    static const int shapes[][3] = {{1, 1, 1},
                                    {7, 13, 5},
                                    {33, 17, 65},
                                    {64, 64, 32},
                                    {130, 70, 257}};
    static const float alphas[] = {1.0f, -1.0f, 0.37f}, betas[] = {0.0f, 1.0f, 0.5f};
    al_rng r;
    al_rng_seed(&r, 5);
    for (int be = 0; be < 2; be++) {
        al_gemm_set_backend(BACKENDS[be]);
        int bad = 0, n = 0;
        for (int t = 0; t < 4; t++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
                for (int pad = 0; pad <= 3; pad += 3)
                    for (int ai = 0; ai < 3; ai++)
                        for (int bi = 0; bi < 3; bi++, n++)
                            bad += check_one(t & 1, t >> 1, shapes[s][0], shapes[s][1],
                                             shapes[s][2], alphas[ai], betas[bi], pad, 0.0f, &r);
        CHECKF(bad == 0, "%s: %d bad elements over %d products", al_gemm_backend_name(), bad, n);
    }
}

/* beta = 0 must not read C: NaN there stays out of the result. */
TEST(gemm_beta0_ignores_nan_in_c) {
    al_rng r;
    al_rng_seed(&r, 6);
    for (int be = 0; be < 2; be++) {
        al_gemm_set_backend(BACKENDS[be]);
        for (int pad = 0; pad <= 5; pad += 5)
            for (int t = 0; t < 4; t++)
                CHECK(check_one(t & 1, t >> 1, 40, 24, 32, 1.0f, 0.0f, pad, NAN, &r) == 0);
    }
}

/* beta = 1 accumulates: C + A·B, and again, gives C + 2·A·B. */
TEST(gemm_beta1_accumulates) {
    al_rng r;
    al_rng_seed(&r, 7);
    for (int be = 0; be < 2; be++) {
        al_gemm_set_backend(BACKENDS[be]);
        const int M = 50, N = 40, K = 30;
        float *A = mat(&r, M, K, K, 0), *B = mat(&r, K, N, N, 0);
        float *C = calloc((size_t)M * N, sizeof *C), *P = calloc((size_t)M * N, sizeof *P);
        al_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, P, N);
        al_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 1.0f, C, N);
        al_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 1.0f, C, N);
        /* 0 + p is exactly p, and p + p exactly 2p */
        int bad = 0;
        for (int i = 0; i < M * N; i++) bad += C[i] != 2.0f * P[i];
        CHECKF(bad == 0, "%s: %d elements not 2·A·B", al_gemm_backend_name(), bad);
        free(A), free(B), free(C), free(P);
    }
}

/* The property the incremental forward needs: an element's bits do not
 * depend on how many rows are multiplied with it, on the leading
 * dimensions, or on the call running inside a parallel region (on one
 * thread) rather than outside (on all of them). */
TEST(gemm_element_independent_of_rows_ld_and_threads) {
    al_gemm_set_backend(AL_MATMUL_ONEDNN);
    static const int shapes[][4] = {/* M N K tb */ {64, 64, 32, 1},
                                    {64, 32, 128, 0},
                                    {400, 72, 24, 0},
                                    {300, 256, 256, 0},
                                    {200, 1000, 96, 1}};
    al_rng r;
    al_rng_seed(&r, 8);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        bool tb = shapes[s][3];
        int bc = tb ? K : N, pad = 11;
        float *A = mat(&r, M, K, K + pad, 0), *B = mat(&r, tb ? N : K, bc, bc, 0);
        float *C = malloc(sizeof(float) * (size_t)M * N);
        al_sgemm(false, tb, M, N, K, 0.5f, A, K + pad, B, bc, 0.0f, C, N);
        int bad = 0;
        static const int rows[] = {1, 3, 13, 64};
#pragma omp parallel for num_threads(2) reduction(+ : bad) schedule(static)
        for (int i = 0; i < 4; i++) {
            int m = rows[i] < M ? rows[i] : M, r0 = M - m;
            float *D = malloc(sizeof(float) * (size_t)m * (N + 5));
            al_sgemm(false, tb, m, N, K, 0.5f, A + (size_t)r0 * (K + pad), K + pad, B, bc, 0.0f, D,
                     N + 5);
            for (int k = 0; k < m; k++)
                bad += memcmp(D + (size_t)k * (N + 5), C + (size_t)(r0 + k) * N,
                              sizeof(float) * (size_t)N) != 0;
            free(D);
        }
        /* the same rows outside any parallel region */
        float *E = malloc(sizeof(float) * (size_t)3 * N);
        al_sgemm(false, tb, 3, N, K, 0.5f, A + (size_t)5 * (K + pad), K + pad, B, bc, 0.0f, E, N);
        bad += memcmp(E, C + (size_t)5 * N, sizeof(float) * 3 * (size_t)N) != 0;
        CHECKF(bad == 0, "%dx%dx%d tb %d: %d rows differ", M, N, K, tb, bad);
        free(A), free(B), free(C), free(E);
    }
}

/* On an AVX-512 CPU the engine's shapes, plain and transposed, get
 * oneDNN's brgemm kernel (elsewhere they go to OpenBLAS, gemm.c). */
TEST(gemm_onednn_has_a_kernel_for_engine_shapes) {
    al_gemm_set_backend(AL_MATMUL_ONEDNN);
    if (!__builtin_cpu_supports("avx512f")) t_skip("no AVX-512: every product is OpenBLAS's");
    static const int shapes[][3] = {{4096, 768, 256},
                                    {4096, 4096, 256},
                                    {256, 4096, 4096},
                                    {64, 64, 32}};
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 4; t++) {
            const char *impl = al_sgemm_impl(t & 1, t >> 1, shapes[s][0], shapes[s][1],
                                             shapes[s][2], 1.0f, t == 3 ? 1.0f : 0.0f);
            CHECKF(!strncmp(impl, "brg", 3), "%dx%dx%d ta %d tb %d: impl %s", shapes[s][0],
                   shapes[s][1], shapes[s][2], t & 1, t >> 1, impl);
        }
    CHECK(!strcmp(al_gemm_backend_name(), "onednn"));
    al_gemm_set_backend(AL_MATMUL_OPENBLAS);
    CHECK(!strcmp(al_sgemm_impl(false, false, 4096, 768, 256, 1.0f, 0.0f), "openblas"));
}

/* Loss and every gradient of a random 2-layer model, forward and
 * backward, on oneDNN against OpenBLAS: within 1e-5 relative (to the
 * largest magnitude of each parameter's gradient). */
TEST(gemm_backends_agree_on_model_loss_and_grads) {
    al_err e;
    al_model m;
    rand_model(&m, 2, 0, 40);
    CHECK_OK(al_model_alloc_grads(&m, &e), &e);
    const int B = 3, T = 16;
    int in[3 * 16], tg[3 * 16];
    al_rng r;
    al_rng_seed(&r, 12);
    for (int i = 0; i < B * T; i++)
        in[i] = (int)al_rng_below(&r, 40), tg[i] = (int)al_rng_below(&r, 40);
    float loss[2];
    float *g[2];
    for (int be = 0; be < 2; be++) {
        al_gemm_set_backend(BACKENDS[be]);
        CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
        loss[be] = m.mean_loss;
        CHECK_OK(al_model_backward(&m, &e), &e);
        g[be] = malloc(sizeof(float) * m.n_params);
        memcpy(g[be], m.grads, sizeof(float) * m.n_params);
    }
    CHECKF(fabsf(loss[0] - loss[1]) <= 1e-5f * fabsf(loss[1]), "loss %.9g vs %.9g", loss[0],
           loss[1]);
    size_t off = 0;
    for (int p = 0; p < AL_NPARAM; p++) {
        size_t n = m.param_size[p];
        double big = 0, worst = 0;
        for (size_t i = 0; i < n; i++) {
            big = fmax(big, fabs(g[1][off + i]));
            worst = fmax(worst, fabs((double)g[0][off + i] - g[1][off + i]));
        }
        CHECKF(worst <= 1e-5 * big, "param %d: max diff %g, max |grad| %g", p, worst, big);
        off += n;
    }
    free(g[0]), free(g[1]);
    al_model_free(&m);
}

/* Training twice with the same seed and thread count gives the same
 * checkpoint bytes, at 1 thread and at 2, on the default backend. */
TEST(gemm_training_repeatable_at_1_and_2_threads) {
    t_phrase_corpus(t_path("c.bin"), 20000);
    for (int th = 1; th <= 2; th++) {
        for (int run = 0; run < 2; run++)
            CHECK(t_sh("%s train --data %s --out %s/r%d%d --steps 10 --d-model 32 --n-heads 4 "
                       "--d-head 8 --n-ctx 32 --batch 4 --eval-every 5 --eval-batches 2 "
                       "--warmup 2 --threads %d 2>/dev/null",
                       t_bin(), t_path("c.bin"), t_tmpdir(), th, run, th) == 0);
        CHECKF(t_sh("cmp -s %s/r%d0/model.safetensors %s/r%d1/model.safetensors", t_tmpdir(), th,
                    t_tmpdir(), th) == 0,
               "threads %d: model differs", th);
        CHECKF(t_sh("cmp -s %s/r%d0/optim.safetensors %s/r%d1/optim.safetensors", t_tmpdir(), th,
                    t_tmpdir(), th) == 0,
               "threads %d: optimiser state differs", th);
    }
}

/* A mistyped backend is one line and a non-zero exit before any work. */
TEST(gemm_unknown_backend_is_one_line) {
    CHECK(t_sh("ATTNLAB_MATMUL=mkl %s train --data /nonexistent --out %s 2>%s", t_bin(),
               t_path("m"), t_path("err")) == 2);
    CHECK(t_one_line(t_path("err"), "ATTNLAB_MATMUL=mkl: unknown matmul backend"));
    CHECK(t_sh("test -e %s", t_path("m")) != 0);
}

/* ------------------------------------------------------------- bf16 */

static int have_bf16(void) {
    al_err e;
    al_gemm_set_backend(AL_MATMUL_ONEDNN);
    int ok = al_gemm_set_precision(AL_PREC_BF16, &e) == 0;
    al_gemm_set_precision(AL_PREC_F32, &e);
    return ok;
}

static float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* In bf16, the product is that of the inputs rounded to bfloat16 (nearest
 * even), accumulated in f32: against a double loop over the rounded
 * inputs (whose pairwise products are exact in f32), the same worst-case
 * float-accumulation tolerance as above; against the unrounded inputs it
 * must differ (or bf16 was not used). Every transpose, wide leading
 * dimensions, beta 0 with NaN in C and beta 1. */
TEST(gemm_bf16_is_the_product_of_rounded_inputs) {
    if (!have_bf16()) t_skip("no native bf16 matmul on this CPU");
    al_err e;
    CHECK_OK(al_gemm_set_precision(AL_PREC_BF16, &e), &e);
    al_rng r;
    al_rng_seed(&r, 9);
    const int M = 37, N = 29, K = 70, pad = 3;
    int bad = 0, differs = 0;
    for (int t = 0; t < 4; t++)
        for (int bi = 0; bi < 2; bi++) {
            bool ta = t & 1, tb = t >> 1;
            float beta = (float)bi;
            int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
            float *A = mat(&r, ta ? K : M, ta ? M : K, lda, 0),
                  *B = mat(&r, tb ? N : K, tb ? K : N, ldb, 0);
            float *C = mat(&r, M, N, ldc, 0), *C0 = malloc(sizeof(float) * (size_t)M * ldc);
            if (beta == 0.0f)
                for (int i = 0; i < M * ldc; i++) C[i] = NAN;
            memcpy(C0, C, sizeof(float) * (size_t)M * ldc);
            al_sgemm(ta, tb, M, N, K, -1.0f, A, lda, B, ldb, beta, C, ldc);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0, mag = 0, s32 = 0;
                    for (int k = 0; k < K; k++) {
                        float a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                        float b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                        double p = (double)bf16_round(a) * bf16_round(b);
                        s += p, mag += fabs(p), s32 += (double)a * b;
                    }
                    double bc = beta != 0.0f ? C0[(size_t)i * ldc + j] : 0.0;
                    double want = -s + bc, got = C[(size_t)i * ldc + j];
                    double tol = (K + 2) * 0x1p-23 * (mag + fabs(bc) + fabs(want));
                    bad += !(fabs(got - want) <= tol);
                    differs += fabs(got - (-s32 + bc)) > tol;
                }
            free(A), free(B), free(C), free(C0);
        }
    CHECKF(bad == 0, "%d elements off the rounded-input product", bad);
    CHECKF(differs > 100, "only %d elements differ from the f32 product: bf16 not used?", differs);
    CHECK_OK(al_gemm_set_precision(AL_PREC_F32, &e), &e);
}

/* al_gemm_bf16_reserve: a copy the caller rounded (al_round_bf16) gives
 * the bits of the product that rounds for itself, as A and as B; the copy
 * is what is read (zeros written there give a zero product) and only
 * for that matrix and shape; after the release the product rounds again;
 * in f32 nothing is reserved. */
TEST(gemm_bf16_reserved_copy_same_bits) {
    al_err e;
    if (!have_bf16()) t_skip("no native bf16 matmul on this CPU");
    CHECK(al_gemm_bf16_reserve(NULL, 4, 4) == NULL); /* f32 precision */
    CHECK_OK(al_gemm_set_precision(AL_PREC_BF16, &e), &e);
    al_rng r;
    al_rng_seed(&r, 21);
    const int M = 300, N = 70, K = 260;
    float *A = mat(&r, M, K, K, 0), *B = mat(&r, K, N, N, 0), *Bt = mat(&r, M, N, N, 0);
    float *C0 = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * M * N);
    float *D0 = malloc(sizeof(float) * K * N), *D1 = malloc(sizeof(float) * K * N);
    al_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C0, N); /* A as A */
    al_sgemm(true, false, K, N, M, 1.0f, A, K, Bt, N, 0.0f, D0, N); /* Aᵀ: A read as (M,K) */
    uint16_t *c = al_gemm_bf16_reserve(A, M, K);
    CHECK(c != NULL);
    if (c) {
        al_round_bf16(c, A, (size_t)M * K);
        al_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
        CHECK(memcmp(C0, C1, sizeof(float) * M * N) == 0);
        al_sgemm(true, false, K, N, M, 1.0f, A, K, Bt, N, 0.0f, D1, N);
        CHECK(memcmp(D0, D1, sizeof(float) * K * N) == 0);
        memset(c, 0, sizeof(uint16_t) * M * K);
        al_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
        int zero = 1;
        for (int i = 0; i < M * N; i++) zero &= C1[i] == 0.0f;
        CHECKF(zero, "the reserved copy was not the one read");
        /* another shape of the same pointer rounds for itself */
        al_sgemm(false, false, M - 1, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
        CHECK(memcmp(C0, C1, sizeof(float) * (M - 1) * N) == 0);
    }
    al_gemm_bf16_release();
    al_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N);
    CHECK(memcmp(C0, C1, sizeof(float) * M * N) == 0);
    free(A), free(B), free(Bt), free(C0), free(C1), free(D0), free(D1);
    CHECK_OK(al_gemm_set_precision(AL_PREC_F32, &e), &e);
}

/* A bf16 forward of a random 2-layer model against the f32 one: the mean
 * loss within 0.2% relative and every probability within 0.01 absolute
 * (bf16 keeps 8 bits of mantissa: every product input moves by up to
 * 2^-9 relative, so logits spanning ~8 nats move by ~1e-2 at most;
 * measured here: loss 3e-4 relative, probabilities 3e-3); and not
 * bit-identical (bf16 was used). */
TEST(gemm_bf16_forward_close_to_f32) {
    if (!have_bf16()) t_skip("no native bf16 matmul on this CPU");
    al_err e;
    al_model m;
    rand_model(&m, 2, 0, 40);
    /* logits spanning ~8 nats, a trained model's range (rand_model's span
     * ~66: bf16's 2^-9 relative input error would then move logits by
     * tenths) */
    for (size_t i = 0; i < m.param_size[AL_P_WU]; i++) m.p[AL_P_WU][i] /= 8.0f;
    const int B = 3, T = 16, V = 40;
    int in[3 * 16], tg[3 * 16];
    al_rng r;
    al_rng_seed(&r, 13);
    for (int i = 0; i < B * T; i++)
        in[i] = (int)al_rng_below(&r, 40), tg[i] = (int)al_rng_below(&r, 40);
    float loss[2], *p[2];
    for (int k = 0; k < 2; k++) {
        CHECK_OK(al_gemm_set_precision(k ? AL_PREC_BF16 : AL_PREC_F32, &e), &e);
        CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
        loss[k] = m.mean_loss;
        p[k] = malloc(sizeof(float) * B * T * V);
        memcpy(p[k], m.probs, sizeof(float) * B * T * V);
    }
    CHECK_OK(al_gemm_set_precision(AL_PREC_F32, &e), &e);
    double worst = 0, span = 0;
    for (int i = 0; i < B * T * V; i++) worst = fmax(worst, fabs((double)p[0][i] - p[1][i]));
    for (int i = 0; i < B * T; i++) {
        float lo = 1, hi = 0;
        for (int v = 0; v < V; v++)
            lo = fminf(lo, p[0][i * V + v]), hi = fmaxf(hi, p[0][i * V + v]);
        span = fmax(span, log(hi / lo));
    }
    CHECKF(span > 6, "logits span only %g nats", span);
    CHECKF(fabsf(loss[0] - loss[1]) <= 2e-3f * loss[0], "loss f32 %.6g bf16 %.6g", loss[0],
           loss[1]);
    CHECKF(worst <= 0.01 && worst > 0, "max probability difference %g", worst);
    free(p[0]), free(p[1]);
    al_model_free(&m);
}

/* bf16 training: the same run twice gives the same bytes (1 and 2
 * threads), the run stopped at step 6 and resumed ends byte-identical to
 * the uninterrupted one, the precision is in state.json and survives the
 * resume, the model differs from the f32 run's, and the database's
 * training run has it in its config. */
TEST(gemm_bf16_training_repeatable_and_resume_exact) {
    if (!have_bf16()) t_skip("no native bf16 matmul on this CPU");
    t_phrase_corpus(t_path("c.bin"), 20000);
    const char *d = t_tmpdir(), *c = t_path("c.bin");
#define SM                                                                                         \
    "--steps 12 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 --eval-every 5 "          \
    "--eval-batches 2 --warmup 2 --ckpt-every 100"
    for (int th = 1; th <= 2; th++) {
        for (int run = 0; run < 2; run++)
            CHECK(t_sh("%s train --data %s --out %s/b%d%d --precision bf16 --threads %d " SM
                       " 2>/dev/null",
                       t_bin(), c, d, th, run, th) == 0);
        CHECKF(t_sh("cmp -s %s/b%d0/model.safetensors %s/b%d1/model.safetensors", d, th, d, th) ==
                       0 &&
                   t_sh("cmp -s %s/b%d0/optim.safetensors %s/b%d1/optim.safetensors", d, th, d,
                        th) == 0,
               "bf16 at %d threads: not repeatable", th);
    }
    CHECK(t_sh("%s train --data %s --out %s/half --precision bf16 --threads 2 --stop-at 6 " SM
               " 2>/dev/null",
               t_bin(), c, d) == 130);
    CHECK(t_sh("%s train --resume %s/half 2>/dev/null", t_bin(), d) == 0);
    CHECK(t_sh("cmp -s %s/b20/model.safetensors %s/half/model.safetensors", d, d) == 0);
    CHECK(t_sh("cmp -s %s/b20/optim.safetensors %s/half/optim.safetensors", d, d) == 0);
    char *st = t_slurp(t_path("half/state.json"));
    CHECKF(st && strstr(st, "\"precision\":\t\"bf16\""), "%s", st ? st : "(none)");
    free(st);
    CHECK(t_sh("%s train --data %s --out %s/f --threads 2 " SM " 2>/dev/null", t_bin(), c, d) == 0);
    CHECK(t_sh("cmp -s %s/b20/model.safetensors %s/f/model.safetensors", d, d) != 0);
#undef SM
    /* the database's training run records it with the other options */
    CHECK(t_sh("%s train --data %s --out %s/db --precision bf16 --steps 2 --d-model 32 --n-heads 4 "
               "--d-head 8 --n-ctx 32 --batch 4 --eval-batches 1 --db %s 2>/dev/null",
               t_bin(), c, d, t_path("r.db")) == 0);
    char *p = t_sql(t_path("r.db"), "SELECT json_extract(config_json, '$.precision') FROM runs "
                                    "WHERE kind = 'train'");
    CHECKF(p && !strcmp(p, "bf16"), "runs.config_json precision: %s", p ? p : "(none)");
    free(p);
}

/* Without a native bf16 kernel (oneDNN told to stop at AVX-512 without
 * BF16), or on the OpenBLAS backend, --precision bf16 is one line and a
 * non-zero exit, before any checkpoint. */
TEST(gemm_bf16_unavailable_is_one_line) {
    t_phrase_corpus(t_path("c.bin"), 2000);
    CHECK(t_sh("DNNL_MAX_CPU_ISA=avx2 %s train --data %s --out %s --precision bf16 --steps 2 "
               "--d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 2>%s",
               t_bin(), t_path("c.bin"), t_path("m"), t_path("err")) == 1);
    CHECK(t_one_line(t_path("err"), "no native bf16 matrix multiply"));
    CHECK(t_sh("ATTNLAB_MATMUL=openblas %s train --data %s --out %s --precision bf16 --steps 2 "
               "--d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 2>%s",
               t_bin(), t_path("c.bin"), t_path("m"), t_path("err")) == 1);
    CHECK(t_one_line(t_path("err"), "needs the onednn matmul backend"));
    CHECK(t_sh("test -e %s/model.safetensors", t_path("m")) != 0);
}

/* --precision on an analysis (the shared option group): bf16 scores are
 * near the f32 ones but not the same bits, the run stores the option and
 * a warning that identities hold only to bf16 rounding; f32 is the
 * default and gives no warning; a bad value or an unavailable bf16 is one
 * line and no run. */
TEST(gemm_analysis_precision_option) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    /* the standard shape (a tiny model's products are too small for the
     * bf16 path: they stay f32), random weights */
    al_config c = al_config_default();
    c.n_layers = 2, c.d_vocab = 512;
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    char md[1100];
    snprintf(md, sizeof md, "%s/m2", dir.s);
    CHECK_OK(al_ckpt_save(md, &m, NULL, NULL, NULL, NULL, &e), &e);
    al_model_free(&m);
    CHECK(t_sh("%s scores --model %s/m2 --db %s --json > %s 2>/dev/null", t_bin(), dir.s, db.s,
               t_path("f32.json")) == 0);
    CHECK(t_sh("%s scores --model %s/m2 --db %s --precision bf17 2>%s", t_bin(), dir.s, db.s,
               t_path("err")) == 2);
    CHECK(t_one_line(t_path("err"), "--precision must be f32 or bf16"));
    CHECK(t_sh("ATTNLAB_MATMUL=openblas %s scores --model %s/m2 --db %s --precision bf16 2>%s",
               t_bin(), dir.s, db.s, t_path("err")) == 2);
    CHECK(t_one_line(t_path("err"), "needs the onednn matmul backend"));
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM runs") == 1);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM run_warnings") == 0);
    if (!have_bf16()) t_skip("no native bf16 matmul on this CPU");
    CHECK(t_sh("%s scores --model %s/m2 --db %s --precision bf16 > /dev/null 2>%s", t_bin(), dir.s,
               db.s, t_path("err")) == 0);
    CHECK(t_one_line(t_path("err"), "rounded to bfloat16"));
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM runs WHERE json_extract(config_json, "
                           "'$.precision') = 'bf16'") == 1);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM run_warnings WHERE run_id = 2 AND message "
                           "LIKE '%bfloat16%'") == 1);
    /* the same heads, each score within bf16's reach of the f32 one, not all the same bits */
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM head_scores a JOIN head_scores b USING "
                           "(layer, head, metric) WHERE a.run_id = 1 AND b.run_id = 2") ==
          t_sql_long(db.s, "SELECT count(*) FROM head_scores WHERE run_id = 1"));
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM head_scores a JOIN head_scores b USING "
                           "(layer, head, metric) WHERE a.run_id = 1 AND b.run_id = 2 AND "
                           "abs(a.value - b.value) > 0.02 + 0.02 * abs(a.value)") == 0);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM head_scores a JOIN head_scores b USING "
                           "(layer, head, metric) WHERE a.run_id = 1 AND b.run_id = 2 AND "
                           "a.value != b.value") > 0);
}
