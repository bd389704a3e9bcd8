/* layers.c -- forward and backward of each op (see layers.h).
 *
 * Matmuls go through al_sgemm (gemm.h) over all B*T rows at once. Attention
 * is parallel over (batch, head) with OpenMP, each (b,h) a few small
 * single-threaded sgemms: it is only ~8% of a step's FLOPs, but as plain
 * scalar loops (dot products over d_head 32 do not vectorise without
 * -ffast-math) it took half the step. Every result is computed by one
 * thread in a fixed order, so it does not depend on the thread count. */
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#include "attnlab/layers.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                     int C) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *e = wte + (size_t)inp[b * T + t] * C;
            if (!wpe) {
                memcpy(o, e, sizeof(float) * (size_t)C);
                continue;
            }
            const float *p = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
        }
}

void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                      int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *e = dwte + (size_t)inp[b * T + t] * C;
            if (!dwpe) {
                for (int c = 0; c < C; c++) e[c] += d[c];
                continue;
            }
            float *p = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                e[c] += d[c];
                p[c] += d[c];
            }
        }
}

void posqk_project(float *pos, const float *wpe, const float *wqkv, int T, int C, int HD) {
    // pos (T,2HD) = wpe (T,C) @ wqkv[:, :2HD] (C,2HD; row stride 3HD)
    al_sgemm(false, false, T, 2 * HD, C, 1.0f, wpe, C, wqkv, 3 * HD, 0.0f, pos, 2 * HD);
}

void posqk_forward(float *qkv, const float *pos, int B, int T, int HD) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *r = qkv + ((size_t)b * T + t) * 3 * HD; // q|k of (b,t): 2HD floats
            const float *p = pos + (size_t)t * 2 * HD;
            for (int i = 0; i < 2 * HD; i++) r[i] += p[i];
        }
}

void posqk_backward(float *dwpe, float *dwqkv, float *dpos, const float *dqkv, const float *wpe,
                    const float *wqkv, int B, int T, int C, int HD) {
    // dpos (T,2HD) = Σ_b dqkv[b, t, 0:2HD]
    for (int t = 0; t < T; t++) {
        float *d = dpos + (size_t)t * 2 * HD;
        memset(d, 0, sizeof(float) * 2 * (size_t)HD);
        for (int b = 0; b < B; b++) {
            const float *g = dqkv + ((size_t)b * T + t) * 3 * HD;
            for (int i = 0; i < 2 * HD; i++) d[i] += g[i];
        }
    }
    // dwqkv[:, :2HD] (C,2HD; stride 3HD) += wpe[:T]ᵀ (C,T) @ dpos (T,2HD)
    al_sgemm(true, false, C, 2 * HD, T, 1.0f, wpe, C, dpos, 2 * HD, 1.0f, dwqkv, 3 * HD);
    // dwpe[:T] (T,C) += dpos (T,2HD) @ wqkv[:, :2HD]ᵀ (2HD,C)
    al_sgemm(false, true, T, C, 2 * HD, 1.0f, dpos, 2 * HD, wqkv, 3 * HD, 1.0f, dwpe, C);
}

/* ------------------------------------------------------- LayerNorm */

static void ln_row_stats(const float *x, int C, double eps, float *mean, float *scale) {
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; c++) s += x[c];
    float mu = (float)(s / C);
    double v = 0.0;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; c++) {
        double d = (double)(x[c] - mu);
        v += d * d;
    }
    *mean = mu;
    *scale = (float)sqrt(v / C + eps);
}

/* out may be x: each element is read before it is written */
static void ln_row_apply(float *out, const float *x, float mu, float scale, const float *w,
                         const float *b, int C) {
    float inv = 1.0f / scale;
    if (w) {
#pragma omp simd
        for (int c = 0; c < C; c++) out[c] = (x[c] - mu) * inv * w[c] + b[c];
    } else {
#pragma omp simd
        for (int c = 0; c < C; c++) out[c] = (x[c] - mu) * inv;
    }
}

/* The LayerNorm and bias passes below run on the calling thread: each is
 * a few MB of memory-bound work (ln1 of the default batch is 4 MB), a
 * fraction of a millisecond on one core, while starting the team for it
 * costs more than that whenever the cores are shared with other work (a
 * parallel region waits for every thread to be scheduled). Rows in order,
 * so every sum is in a fixed order. */

void layernorm_stats(float *mean, float *scale, const float *x, size_t N, int C, double eps) {
    for (size_t n = 0; n < N; n++) ln_row_stats(x + n * C, C, eps, mean + n, scale + n);
}

void layernorm_apply(float *out, const float *x, const float *mean, const float *scale,
                     const float *w, const float *b, size_t N, int C) {
    for (size_t n = 0; n < N; n++) ln_row_apply(out + n * C, x + n * C, mean[n], scale[n], w, b, C);
}

void layernorm_forward(float *out, float *mean, float *scale, const float *x, const float *w,
                       const float *b, size_t N, int C, double eps) {
    for (size_t n = 0; n < N; n++) {
        ln_row_stats(x + n * C, C, eps, mean + n, scale + n);
        ln_row_apply(out + n * C, x + n * C, mean[n], scale[n], w, b, C);
    }
}

/* Rows per block of the sums made while the rows are computed in
 * parallel (b_U's gradient in the cross-entropy): a fixed partition of
 * the rows, each block's sum made by one thread in order, then the
 * blocks' sums added in order (sum_blocks), so the result does not
 * depend on the thread count. */
#define SUM_BLOCK 32

/* One row of layernorm_backward: dx row (accumulated or not); with dw,
 * db, the row's dout·x̂ and dout added to them. */
static void ln_row_backward(float *o, float *dw, float *db, const float *d, const float *xr,
                            float mu, float scale, const float *w, int C, int accumulate) {
    float inv = 1.0f / scale;
    double sg = 0.0, sgx = 0.0;
#pragma omp simd reduction(+ : sg, sgx)
    for (int c = 0; c < C; c++) {
        float xh = (xr[c] - mu) * inv, g = w ? d[c] * w[c] : d[c];
        sg += g;
        sgx += (double)g * xh;
    }
    float mg = (float)(sg / C), mgx = (float)(sgx / C);
#pragma omp simd
    for (int c = 0; c < C; c++) {
        float xh = (xr[c] - mu) * inv, g = w ? d[c] * w[c] : d[c];
        float v = (g - mg - xh * mgx) * inv;
        o[c] = accumulate ? o[c] + v : v;
    }
    if (!dw) return;
#pragma omp simd
    for (int c = 0; c < C; c++) {
        dw[c] += d[c] * ((xr[c] - mu) * inv);
        db[c] += d[c];
    }
}

void layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                        const float *mean, const float *scale, const float *w, size_t N, int C,
                        int accumulate) {
    if (dw) {
        memset(dw, 0, sizeof(float) * (size_t)C);
        memset(db, 0, sizeof(float) * (size_t)C);
    }
    for (size_t n = 0; n < N; n++)
        ln_row_backward(dx + n * C, dw, db, dout + n * C, x + n * C, mean[n], scale[n], w, C,
                        accumulate);
}

void bias_forward(float *out, const float *b, size_t N, int M, size_t ld) {
    for (size_t n = 0; n < N; n++) {
        float *o = out + n * ld;
#pragma omp simd
        for (int j = 0; j < M; j++) o[j] += b[j];
    }
}

void qkv_bias_forward(float *qkv, const float *bq, const float *bk, const float *bv,
                      const float *pos, int B, int T, int HD) {
    const float *b3[3] = {bq, bk, bv};
    for (size_t i = 0; i < (size_t)B * T; i++) {
        float *r = qkv + i * 3 * HD;
        for (int s = 0; s < 3; s++) {
            if (!b3[s]) continue;
            float *o = r + (size_t)s * HD;
#pragma omp simd
            for (int j = 0; j < HD; j++) o[j] += b3[s][j];
        }
        if (!pos) continue;
        const float *p = pos + (i % T) * 2 * HD;
#pragma omp simd
        for (int j = 0; j < 2 * HD; j++) r[j] += p[j];
    }
}

void copy_bias_forward(float *out, const float *x, const float *b, size_t N, int M) {
    for (size_t n = 0; n < N; n++) {
        float *o = out + n * M;
        const float *a = x + n * M;
#pragma omp simd
        for (int j = 0; j < M; j++) o[j] = a[j] + b[j];
    }
}

void bias_backward(float *db, const float *dout, size_t N, int M, size_t ld) {
    memset(db, 0, sizeof(float) * (size_t)M);
    for (size_t n = 0; n < N; n++) {
        const float *d = dout + n * ld;
#pragma omp simd
        for (int j = 0; j < M; j++) db[j] += d[j];
    }
}

/* ------------------------------------------------------- products */

void matmul_forward(float *out, const float *inp, const float *w, int M, int K, int N, float beta) {
    al_sgemm(false, false, M, N, K, 1.0f, inp, K, w, N, beta, out, N);
}

void matmul_forward_wt(float *out, const float *inp, const float *w, int M, int K, int N,
                       float beta) {
    al_sgemm(false, true, M, N, K, 1.0f, inp, K, w, K, beta, out, N);
}

void matmul_weight_grad(float *dw, const float *inp, const float *dout, int M, int K, int N,
                        float beta) {
    al_sgemm(true, false, K, N, M, 1.0f, inp, K, dout, N, beta, dw, N);
}

/* exp(x[i] - m) in place for i < n, returning the sum. libm's expf is
 * scalar unless -ffast-math, and the softmaxes of attention and of the
 * cross-entropy take ~25M exponentials a training step, so this is a
 * vectorisable Cephes-style expf: x = k·ln2 + r with |r| <= ln2/2, a
 * degree-6 polynomial for e^r (error ~2 ulp), 2^k from exponent bits.
 * Valid for arguments <= 0 (a softmax's after subtracting the max);
 * below -87.3 the result is exactly 0, so far tails become zeros rather
 * than denormals, which would slow every later multiply by them. */
static float exp_shift_chunk(float *x, int n, float m) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) {
        float v = x[i] - m;
        /* A NaN (from a diverged model) must come out as NaN, and must
         * not reach the float->int conversion below, which would be
         * undefined behaviour; so it goes through the polynomial as 0. */
        int nan = v != v;
        int under = v < -87.3f;
        v = under ? -87.3f : (nan || v > 0.0f) ? 0.0f : v;
        float kf = (v * 1.44269504f + 12582912.0f) - 12582912.0f; /* round(v/ln2) */
        float r = (v - kf * 0.693359375f) - kf * -2.12194440e-4f;
        float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                    4.1665795894e-2f) *
                       r +
                   1.6666665459e-1f) *
                      r +
                  5.0000001201e-1f;
        p = p * (r * r) + r + 1.0f;
        int32_t bits = ((int32_t)kf + 127) * (1 << 23);
        float scale;
        memcpy(&scale, &bits, sizeof scale);
        float ev = under ? 0.0f : nan ? x[i] - m : p * scale;
        x[i] = ev;
        sum += ev;
    }
    return sum;
}

/* The float lane sums of chunks of 256 are added in double (GCC does not
 * vectorise a double reduction here). The order is fixed at compile
 * time, so the result does not depend on the thread count. */
static double exp_shift_sum(float *x, int n, float m) {
    double sum = 0.0;
    for (int i = 0; i < n; i += 256) sum += exp_shift_chunk(x + i, n - i < 256 ? n - i : 256, m);
    return sum;
}

static float max_of(const float *x, int n) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

double logsumexp_row(float *x, int n) {
    float m = max_of(x, n);
    return (double)m + log(exp_shift_sum(x, n, m));
}

void attention_softmax_row(float *row, int n, int T) {
    float inv = (float)(1.0 / exp_shift_sum(row, n, max_of(row, n)));
#pragma omp simd
    for (int s = 0; s < n; s++) row[s] *= inv;
    for (int s = n; s < T; s++) row[s] = 0.0f;
}

/* Attention is done per (b,h) with single-threaded sgemms (al_sgemm runs
 * on the calling thread alone inside an OpenMP region). Query rows go in
 * blocks of ATT_BLOCK (layers.h), each against keys 0..end of the block
 * only, so under the causal mask the multiplies skip most of the zero
 * upper triangle.
 *
 * A head's q, k, v (and dz, dq, dk, dv in the backward pass) are strided
 * slices of the (B,T,3,H,D) buffers, and its probabilities are rows of
 * length T; oneDNN's brgemm takes only dense operands, so al_sgemm would
 * copy each strided operand per product (k and v up to four times a head,
 * a block of probabilities twice). Instead each is copied once per (b,h)
 * into a dense block of this thread's scratch, and every product works on
 * dense operands. The bits are the same either way: an element of a
 * product does not depend on the leading dimensions (gemm.h). Heads are
 * dealt out dynamically: on shared cores one thread often runs slower
 * than the other, and a head is computed by one thread whichever it is,
 * so the bits do not depend on the schedule either. */

static int att_keys(int t0, int nt, int T, int causal) { return causal ? t0 + nt : T; }

/* This thread's scratch of at least n floats (64-byte aligned), kept
 * for the next call; NULL when out of memory. */
static float *att_scratch(size_t n) {
    static _Thread_local float *p;
    static _Thread_local size_t cap;
    if (n > cap) {
        void *q = NULL;
        if (posix_memalign(&q, 64, n * sizeof(float))) return NULL;
        free(p);
        p = q, cap = n;
    }
    return p;
}

/* att_scratch inside a parallel region: NULL sets the team's *fail. */
static float *att_team_scratch(size_t n, int *fail) {
    float *w = att_scratch(n);
    if (!w) {
#pragma omp atomic write
        *fail = 1;
    }
    return w;
}

/* rows x D from src (row stride ld) to dense dst, and back. */
static void rows_in(float *dst, const float *src, int rows, int D, size_t ld) {
    for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * D, src + r * ld, sizeof(float) * D);
}
static void rows_out(float *dst, size_t ld, const float *src, int rows, int D) {
    for (int r = 0; r < rows; r++) memcpy(dst + r * ld, src + (size_t)r * D, sizeof(float) * D);
}

/* out[0..n) = row[0..n), out[n..T) = 0: one row of probabilities into
 * the (B,H,T,T) output. With stream set, past the first 64-byte
 * boundary it goes by non-temporal stores: the default training step
 * writes 32 MB of probabilities a layer, read again only by the backward
 * pass long after, so reading each line into the cache before writing
 * it (as ordinary stores do) only doubled the traffic. The values are
 * the same either way. */
static void att_row_out(float *out, const float *row, int n, int T, int stream) {
    int s = 0;
#ifdef __AVX512F__
    if (stream) {
        for (; s < T && ((uintptr_t)(out + s) & 63); s++) out[s] = s < n ? row[s] : 0.0f;
        for (; s + 16 <= T; s += 16) {
            __m512 v;
            if (s + 16 <= n)
                v = _mm512_loadu_ps(row + s);
            else if (s < n)
                v = _mm512_maskz_loadu_ps((__mmask16)((1u << (n - s)) - 1u), row + s);
            else
                v = _mm512_setzero_ps();
            _mm512_stream_ps(out + s, v);
        }
    }
#else
    (void)stream;
#endif
    if (s < n) memcpy(out + s, row + s, sizeof(float) * (size_t)(n - s));
    if (s < T) memset(out + (s > n ? s : n), 0, sizeof(float) * (size_t)(T - (s > n ? s : n)));
}

/* Non-temporal stores are weakly ordered: fence them before the
 * probabilities are read, by this thread or another after the region. */
static void att_stream_fence(int stream) {
#ifdef __AVX512F__
    if (stream) _mm_sfence();
#else
    (void)stream;
#endif
}

/* Probabilities past this many bytes in all are written by streaming
 * stores (smaller ones are likely read again while still in the cache). */
#define ATT_STREAM_BYTES ((size_t)8 << 20)

/* One (b,h) on dense q, k, v (T,D): a (T,T) probabilities, z (T,D)
 * dense; S is (ATT_BLOCK, T) scratch. */
static void attention_head_forward(float *z, float *a, const float *q, const float *k,
                                   const float *v, float *S, int T, int D, float scale, int causal,
                                   int stream) {
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
        int nt = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK;
        int nk = att_keys(t0, nt, T, causal);
        al_sgemm(false, true, nt, nk, D, scale, q + (size_t)t0 * D, D, k, D, 0.0f, S, nk);
        for (int i = 0; i < nt; i++) {
            float *row = S + (size_t)i * nk, *out = a + (size_t)(t0 + i) * T;
            attention_softmax_row(row, causal ? t0 + i + 1 : T, nk);
            att_row_out(out, row, nk, T, stream);
        }
        al_sgemm(false, false, nt, D, nk, 1.0f, S, nk, v, D, 0.0f, z + (size_t)t0 * D, D);
    }
    att_stream_fence(stream);
}

int attention_forward(float *z, float *att, const float *qkv, int B, int T, int H, int D,
                      int causal) {
    const int HD = H * D, rs = 3 * HD;
    const float scale = 1.0f / sqrtf((float)D);
    const int rows = T < ATT_BLOCK ? T : ATT_BLOCK;
    const int stream = sizeof(float) * (size_t)B * H * T * T > ATT_STREAM_BYTES;
    int fail = 0;
#pragma omp parallel
    {
        /* q, k, v, z (T,D) dense, then the scores of a block */
        float *w = att_team_scratch((size_t)4 * T * D + (size_t)rows * T, &fail);
#pragma omp for collapse(2) schedule(dynamic)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                if (!w) continue;
                size_t TD = (size_t)T * D;
                float *q = w, *k = q + TD, *v = k + TD, *zd = v + TD, *S = zd + TD;
                const float *q0 = qkv + (size_t)b * T * rs + (size_t)h * D;
                rows_in(q, q0, T, D, rs);
                rows_in(k, q0 + HD, T, D, rs);
                rows_in(v, q0 + 2 * HD, T, D, rs);
                attention_head_forward(zd, att + ((size_t)b * H + h) * T * T, q, k, v, S, T, D,
                                       scale, causal, stream);
                rows_out(z + (size_t)b * T * HD + (size_t)h * D, HD, zd, T, D);
            }
    }
    return fail ? -1 : 0;
}

/* attention_forward's two halves (layers.h). Scores of one (b,h) on
 * dense q, k (T,D) into sc (T,T): the blocks and products of
 * attention_head_forward, −inf above the diagonal; S is (ATT_BLOCK, T)
 * scratch. */
static void attention_head_scores(float *sc, const float *q, const float *k, float *S, int T, int D,
                                  float scale) {
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
        int nt = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK, nk = t0 + nt;
        al_sgemm(false, true, nt, nk, D, scale, q + (size_t)t0 * D, D, k, D, 0.0f, S, nk);
        for (int i = 0; i < nt; i++) {
            int t = t0 + i;
            float *row = sc + (size_t)t * T;
            memcpy(row, S + (size_t)i * nk, sizeof(float) * (size_t)(t + 1));
            for (int u = t + 1; u < T; u++) row[u] = -INFINITY;
        }
    }
}

/* Probabilities of one (b,h) in place of its scores a (T,T), and z
 * (T,D) dense from dense v: a row's keys end at its last score that is
 * not −inf, a block's products span its rows' keys (the causal ones when
 * the scores are as attention_head_scores left them, so the products and
 * the bits are attention_head_forward's). */
static void attention_head_pattern(float *z, float *a, const float *v, float *S, int T, int D) {
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
        int nt = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK, nk = t0 + nt, n[ATT_BLOCK];
        for (int i = 0; i < nt; i++) {
            const float *row = a + (size_t)(t0 + i) * T;
            int k = T;
            while (k > 0 && row[k - 1] == -INFINITY) k--;
            n[i] = k;
            if (k > nk) nk = k;
        }
        for (int i = 0; i < nt; i++) {
            float *row = S + (size_t)i * nk;
            memcpy(row, a + (size_t)(t0 + i) * T, sizeof(float) * nk);
            if (n[i] > 0)
                attention_softmax_row(row, n[i], nk);
            else
                memset(row, 0, sizeof(float) * nk); /* every key masked: no attention */
            att_row_out(a + (size_t)(t0 + i) * T, row, nk, T, 0);
        }
        al_sgemm(false, false, nt, D, nk, 1.0f, S, nk, v, D, 0.0f, z + (size_t)t0 * D, D);
    }
}

int attention_scores_forward(float *scores, const float *qkv, int B, int T, int H, int D) {
    const int HD = H * D, rs = 3 * HD;
    const float scale = 1.0f / sqrtf((float)D);
    const int rows = T < ATT_BLOCK ? T : ATT_BLOCK;
    int fail = 0;
#pragma omp parallel
    {
        float *w = att_team_scratch((size_t)2 * T * D + (size_t)rows * T, &fail);
#pragma omp for collapse(2) schedule(dynamic)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                if (!w) continue;
                size_t TD = (size_t)T * D;
                float *q = w, *k = q + TD, *S = k + TD;
                const float *q0 = qkv + (size_t)b * T * rs + (size_t)h * D;
                rows_in(q, q0, T, D, rs);
                rows_in(k, q0 + HD, T, D, rs);
                attention_head_scores(scores + ((size_t)b * H + h) * T * T, q, k, S, T, D, scale);
            }
    }
    return fail ? -1 : 0;
}

int attention_pattern_forward(float *z, float *att, const float *qkv, int B, int T, int H, int D) {
    const int HD = H * D, rs = 3 * HD;
    const int rows = T < ATT_BLOCK ? T : ATT_BLOCK;
    int fail = 0;
#pragma omp parallel
    {
        float *w = att_team_scratch((size_t)2 * T * D + (size_t)rows * T, &fail);
#pragma omp for collapse(2) schedule(dynamic)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                if (!w) continue;
                size_t TD = (size_t)T * D;
                float *v = w, *zd = v + TD, *S = zd + TD;
                rows_in(v, qkv + (size_t)b * T * rs + 2 * HD + (size_t)h * D, T, D, rs);
                attention_head_pattern(zd, att + ((size_t)b * H + h) * T * T, v, S, T, D);
                rows_out(z + (size_t)b * T * HD + (size_t)h * D, HD, zd, T, D);
            }
    }
    return fail ? -1 : 0;
}

/* One (b,h), per block of query rows, on dense (T,D) operands, with A
 * and G (ATT_BLOCK, T) scratch:
 *   dA = dZ Vᵀ;  dV += Aᵀ dZ;  dS = A ⊙ (dA − Σ_s A dA) · scale;
 *   dQ = dS K;   dK += dSᵀ Q.
 * dk and dv must start zeroed. */
static void attention_head_backward(float *dq, float *dk, float *dv, const float *dz,
                                    const float *q, const float *k, const float *v, const float *a,
                                    float *A, float *G, int T, int D, float scale, int causal) {
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
        int nt = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK;
        int nk = att_keys(t0, nt, T, causal);
        const float *dZ = dz + (size_t)t0 * D;
        for (int i = 0; i < nt; i++)
            memcpy(A + (size_t)i * nk, a + (size_t)(t0 + i) * T, sizeof(float) * nk);
        al_sgemm(false, true, nt, nk, D, 1.0f, dZ, D, v, D, 0.0f, G, nk);
        al_sgemm(true, false, nk, D, nt, 1.0f, A, nk, dZ, D, 1.0f, dv, D);
        for (int i = 0; i < nt; i++) {
            const float *ar = A + (size_t)i * nk;
            float *gr = G + (size_t)i * nk;
            int n = causal ? t0 + i + 1 : T;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int s = 0; s < n; s++) dot += ar[s] * gr[s];
#pragma omp simd
            for (int s = 0; s < n; s++) gr[s] = ar[s] * (gr[s] - dot) * scale;
            for (int s = n; s < nk; s++) gr[s] = 0.0f;
        }
        al_sgemm(false, false, nt, D, nk, 1.0f, G, nk, k, D, 0.0f, dq + (size_t)t0 * D, D);
        al_sgemm(true, false, nk, D, nt, 1.0f, G, nk, q + (size_t)t0 * D, D, 1.0f, dk, D);
    }
}

int attention_backward(float *dqkv, const float *dz, const float *qkv, const float *att, int B,
                       int T, int H, int D, int causal) {
    const int HD = H * D, rs = 3 * HD;
    const float scale = 1.0f / sqrtf((float)D);
    const int rows = T < ATT_BLOCK ? T : ATT_BLOCK;
    int fail = 0;
#pragma omp parallel
    {
        /* q, k, v, dz, dq, dk, dv (T,D) dense, then A and G of a block */
        float *w = att_team_scratch((size_t)7 * T * D + (size_t)2 * rows * T, &fail);
#pragma omp for collapse(2) schedule(dynamic)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                if (!w) continue;
                size_t TD = (size_t)T * D;
                float *q = w, *k = q + TD, *v = k + TD, *dzd = v + TD, *dq = dzd + TD;
                float *dk = dq + TD, *dv = dk + TD, *A = dv + TD, *G = A + (size_t)rows * T;
                size_t off = (size_t)b * T * rs + (size_t)h * D;
                rows_in(q, qkv + off, T, D, rs);
                rows_in(k, qkv + off + HD, T, D, rs);
                rows_in(v, qkv + off + 2 * HD, T, D, rs);
                rows_in(dzd, dz + (size_t)b * T * HD + (size_t)h * D, T, D, HD);
                memset(dk, 0, sizeof(float) * 2 * TD);
                attention_head_backward(dq, dk, dv, dzd, q, k, v, att + ((size_t)b * H + h) * T * T,
                                        A, G, T, D, scale, causal);
                rows_out(dqkv + off, rs, dq, T, D);
                rows_out(dqkv + off + HD, rs, dk, T, D);
                rows_out(dqkv + off + 2 * HD, rs, dv, T, D);
            }
    }
    return fail ? -1 : 0;
}

/* One row of logits to probabilities in place; the loss against target
 * t, or 0 when t < 0 (no target). */
static float ce_row(float *row, int V, int t) {
    float maxv = max_of(row, V);
    float tlogit = t >= 0 ? row[t] : 0.0f;
    double sum = exp_shift_sum(row, V, maxv);
    float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int j = 0; j < V; j++) row[j] *= inv;
    /* from the logits, not log(p): exact even when p underflows */
    return t >= 0 ? (float)(log(sum) + maxv - tlogit) : 0.0f;
}

/* One row of probabilities to its share of the mean loss's gradient. */
static void ce_grad_row(float *row, int V, int t, float scale) {
    if (t < 0) {
        memset(row, 0, sizeof(float) * (size_t)V);
        return;
    }
#pragma omp simd
    for (int j = 0; j < V; j++) row[j] *= scale;
    row[t] -= scale;
}

/* db[j] = Σ_k part[k·M + j] over nb blocks, k ascending: the blocks are
 * a fixed partition of the rows, so the sum does not depend on the
 * thread count. Serial: it is a few hundred thousand additions, less
 * than what starting the threads can cost on a busy machine. */
static void sum_blocks(float *db, const float *part, int nb, int M) {
    memcpy(db, part, sizeof(float) * (size_t)M);
    for (int k = 1; k < nb; k++) {
        const float *p = part + (size_t)k * M;
#pragma omp simd
        for (int j = 0; j < M; j++) db[j] += p[j];
    }
}

static void add_row(float *row, const float *b, int V) {
#pragma omp simd
    for (int j = 0; j < V; j++) row[j] += b[j];
}

int crossentropy_softmax_forward(float *probs, float *losses, const int *targets, int N, int V,
                                 const float *bias) {
    int n_valid = 0;
#pragma omp parallel for schedule(static) reduction(+ : n_valid)
    for (int i = 0; i < N; i++) {
        int t = targets ? targets[i] : -1;
        if (bias) add_row(probs + (size_t)i * V, bias, V);
        losses[i] = ce_row(probs + (size_t)i * V, V, t);
        n_valid += t >= 0;
    }
    return n_valid;
}

/* Rows [k·SUM_BLOCK, ...) of block k: (with bias: + bias, softmax and
 * loss,) gradient rows, their bf16 copy, and their sum into part[k]. */
static void ce_block(float *probs, float *losses, const int *targets, int N, int V, float scale,
                     uint16_t *bf16, const float *bias, float *part, int k) {
    float *p = part + (size_t)k * V;
    memset(p, 0, sizeof(float) * (size_t)V);
    int i1 = (k + 1) * SUM_BLOCK < N ? (k + 1) * SUM_BLOCK : N;
    for (int i = k * SUM_BLOCK; i < i1; i++) {
        float *row = probs + (size_t)i * V;
        if (losses) {
            if (bias) add_row(row, bias, V);
            losses[i] = ce_row(row, V, targets[i]);
        }
        ce_grad_row(row, V, targets[i], scale);
        if (bf16) al_round_bf16(bf16 + (size_t)i * V, row, (size_t)V);
        add_row(p, row, V);
    }
}

void crossentropy_softmax_backward(float *probs, const int *targets, int N, int V, int n_valid,
                                   uint16_t *bf16, float *dbias, float *part) {
    float scale = n_valid > 0 ? 1.0f / (float)n_valid : 0.0f;
    if (dbias) {
        const int nb = (N + SUM_BLOCK - 1) / SUM_BLOCK;
#pragma omp parallel for schedule(static)
        for (int k = 0; k < nb; k++)
            ce_block(probs, NULL, targets, N, V, scale, bf16, NULL, part, k);
        sum_blocks(dbias, part, nb, V);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * V;
        ce_grad_row(row, V, targets[i], scale);
        if (bf16) al_round_bf16(bf16 + (size_t)i * V, row, (size_t)V);
    }
}

int crossentropy_softmax_forward_backward(float *probs, float *losses, const int *targets, int N,
                                          int V, uint16_t *bf16, const float *bias, float *dbias,
                                          float *part) {
    int n_valid = 0;
    for (int i = 0; i < N; i++) n_valid += targets[i] >= 0;
    float scale = n_valid > 0 ? 1.0f / (float)n_valid : 0.0f;
    if (dbias) {
        const int nb = (N + SUM_BLOCK - 1) / SUM_BLOCK;
#pragma omp parallel for schedule(static)
        for (int k = 0; k < nb; k++)
            ce_block(probs, losses, targets, N, V, scale, bf16, bias, part, k);
        sum_blocks(dbias, part, nb, V);
        return n_valid;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * V;
        if (bias) add_row(row, bias, V);
        losses[i] = ce_row(row, V, targets[i]);
        ce_grad_row(row, V, targets[i], scale);
        if (bf16) al_round_bf16(bf16 + (size_t)i * V, row, (size_t)V);
    }
    return n_valid;
}
