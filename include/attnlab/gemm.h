/* gemm.h -- the engine's single-precision matrix product, on oneDNN or
 * OpenBLAS.
 *
 * Why a wrapper: oneDNN's matmul primitive multiplies the engine's shapes
 * at about 1.7x the rate of the OpenBLAS sgemm Debian ships, and in bf16
 * at more than 3x, but it is a primitive to create and execute rather
 * than a call. al_sgemm keeps the cblas_sgemm call the code was written
 * with and hides the primitives behind it. OpenBLAS stays available, for
 * comparison and for the old arithmetic: ATTNLAB_MATMUL=openblas in the
 * environment (read once, at the first product or at al_gemm_init)
 * selects it; ATTNLAB_MATMUL unset, empty or "onednn" selects oneDNN.
 * LAPACK, sgemv and dgemm stay on OpenBLAS in every case, and so does
 * every product on a CPU without AVX-512, where oneDNN has no brgemm
 * kernel (gemm.c says why).
 *
 * Arithmetic: on oneDNN an element of C is the same bits whatever M,
 * the leading dimensions, the thread count, and whether the call is made
 * inside an OpenMP parallel region (where it runs on the calling thread
 * alone): it depends on the row of op(A), the column of op(B), K, the
 * transposes, alpha and beta. The two backends differ in the last bits. */
#ifndef ATTNLAB_GEMM_H
#define ATTNLAB_GEMM_H

#include <stdbool.h>

#include "attnlab/util.h"

typedef enum { AL_MATMUL_ONEDNN = 0, AL_MATMUL_OPENBLAS = 1 } al_matmul_backend;

/* Reads ATTNLAB_MATMUL once and sets up the backend. Returns 0, or -1
 * with e filled for an unknown value (the CLI calls this at start-up so
 * a typo is one line and a non-zero exit). Called lazily by al_sgemm
 * when nobody called it; then an unknown value is reported on stderr
 * once and oneDNN is used. */
int al_gemm_init(al_err *e);

/* The backend in use (after al_gemm_init or the first product). */
al_matmul_backend al_gemm_backend(void);
/* "onednn" or "openblas". */
const char *al_gemm_backend_name(void);
/* Select the backend for the rest of the process (tests and the bench
 * compare the two in one process). Not to be called while another
 * thread multiplies. */
void al_gemm_set_backend(al_matmul_backend b);

/* C (M,N) = alpha · op(A) · op(B) + beta · C, row-major, exactly
 * cblas_sgemm(CblasRowMajor, ...)'s meaning: op(A) is (M,K), A is (M,K)
 * with row stride lda when !transA and (K,M) when transA; likewise B is
 * (K,N) or (N,K) with ldb; C has row stride ldc. beta = 0 never reads
 * C (NaN there does not propagate). Safe to call from several threads at
 * once, inside or outside OpenMP parallel regions. Never fails: a shape
 * oneDNN has no fast kernel for goes to OpenBLAS. */
void al_sgemm(bool transA, bool transB, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* Implementation name oneDNN picked for this product ("brg:avx512_core",
 * "gemm:jit", ...), or "openblas" when it goes to OpenBLAS. For tests and
 * the bench; creates the primitive if needed. The string is static. */
const char *al_sgemm_impl(bool transA, bool transB, int M, int N, int K, float alpha,
                          float beta);

#endif
