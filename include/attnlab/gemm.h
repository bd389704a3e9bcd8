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
#include <stddef.h>
#include <stdint.h>

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

/* Precision of the products' inputs. AL_PREC_BF16: A and B are rounded
 * to bfloat16 (nearest even) and multiplied by oneDNN's bf16 matmul,
 * which accumulates in f32 and writes C in f32; alpha and beta apply in
 * f32. Products called inside an OpenMP parallel region (attention's
 * small per-(b,h) ones) stay f32: rounding their operands costs more
 * than bf16 saves (gemm.c). C, and everything else (weights, gradients, optimiser state),
 * stays f32. Mixed-precision training uses it (train --precision bf16). */
typedef enum { AL_PREC_F32 = 0, AL_PREC_BF16 = 1 } al_precision;

/* "f32" / "bf16" -> *p; -1 for anything else. */
int al_precision_parse(const char *s, al_precision *p);
const char *al_precision_name(al_precision p);
/* Set the precision of every later al_sgemm in the process. bf16 needs
 * the oneDNN backend and a CPU on which oneDNN has a native bf16 kernel
 * (AVX512-BF16 or AMX): otherwise -1 with e filled and the precision
 * unchanged (never a silent slow path). Not to be called while another
 * thread multiplies. */
int al_gemm_set_precision(al_precision p, al_err *e);
al_precision al_gemm_precision(void);

/* n floats to bfloat16 (round to nearest even; NaN stays NaN, a
 * denormal becomes a zero of its sign), as the bf16 products round
 * their inputs. */
void al_round_bf16(uint16_t *out, const float *in, size_t n);

/* A bf16 copy of the dense matrix src (rows x cols floats) that the
 * caller fills itself, so that a matrix it is writing anyway is rounded
 * in the same pass instead of once per product: returns a buffer of
 * rows·cols bf16 values to fill with al_round_bf16 of src's final
 * values; until al_gemm_bf16_release, this thread's bf16 products whose
 * A or B is src, dense and of that shape, read the buffer instead of
 * rounding src (the same bits). NULL (nothing kept; products round as
 * usual) in f32 precision or when out of memory. The buffer belongs to
 * gemm.c and is reused by the next call. */
uint16_t *al_gemm_bf16_reserve(const float *src, size_t rows, size_t cols);
void al_gemm_bf16_release(void);

/* C (M,N) = alpha · op(A) · op(B) + beta · C, row-major, exactly
 * cblas_sgemm(CblasRowMajor, ...)'s meaning: op(A) is (M,K), A is (M,K)
 * with row stride lda when !transA and (K,M) when transA; likewise B is
 * (K,N) or (N,K) with ldb; C has row stride ldc. beta = 0 never reads
 * C (NaN there does not propagate). Safe to call from several threads at
 * once, inside or outside OpenMP parallel regions. Never fails: a shape
 * oneDNN has no fast kernel for goes to OpenBLAS (in bf16, to the f32
 * path). */
void al_sgemm(bool transA, bool transB, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);

/* Implementation name oneDNN picked for this product ("brg:avx512_core",
 * "gemm:jit", ...), or "openblas" when it goes to OpenBLAS. For tests and
 * the bench; creates the primitive if needed. The string is static. */
const char *al_sgemm_impl(bool transA, bool transB, int M, int N, int K, float alpha, float beta);

#endif
