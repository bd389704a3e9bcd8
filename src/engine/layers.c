/* layers.c -- forward and backward of each op (see layers.h).
 *
 * Matmuls go through al_sgemm (gemm.h) over all B*T rows at once. Attention
 * is parallel over (batch, head) with OpenMP, each (b,h) a few small
 * single-threaded sgemms: it is only ~8% of a step's FLOPs, but as plain
 * scalar loops (dot products over d_head 32 do not vectorise without
 * -ffast-math) it took half the step. Every result is computed by one
 * thread in a fixed order, so it does not depend on the thread count. */
#include "attnlab/layers.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"

void encoder_forward(float *out, const int *inp, const float *wte,
                     const float *wpe, int B, int T, int C) {
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

void encoder_backward(float *dwte, float *dwpe, const float *dout,
                      const int *inp, int B, int T, int C) {
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
    al_sgemm(false, false, T, 2 * HD, C, 1.0f, wpe, C, wqkv,
                3 * HD, 0.0f, pos, 2 * HD);
}

void posqk_forward(float *qkv, const float *pos, int B, int T, int HD) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *r = qkv + ((size_t)b * T + t) * 3 * HD; // q|k of (b,t): 2HD floats
            const float *p = pos + (size_t)t * 2 * HD;
            for (int i = 0; i < 2 * HD; i++) r[i] += p[i];
        }
}

void posqk_backward(float *dwpe, float *dwqkv, float *dpos, const float *dqkv,
                    const float *wpe, const float *wqkv, int B, int T, int C, int HD) {
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
    al_sgemm(true, false, C, 2 * HD, T, 1.0f, wpe, C, dpos,
                2 * HD, 1.0f, dwqkv, 3 * HD);
    // dwpe[:T] (T,C) += dpos (T,2HD) @ wqkv[:, :2HD]ᵀ (2HD,C)
    al_sgemm(false, true, T, C, 2 * HD, 1.0f, dpos, 2 * HD, wqkv,
                3 * HD, 1.0f, dwpe, C);
}

void matmul_forward(float *out, const float *inp, const float *w, int M,
                    int K, int N, float beta) {
    al_sgemm(false, false, M, N, K, 1.0f, inp,
                K, w, N, beta, out, N);
}

void matmul_forward_wt(float *out, const float *inp, const float *w, int M,
                       int K, int N, float beta) {
    al_sgemm(false, true, M, N, K, 1.0f, inp, K,
                w, K, beta, out, N);
}

void matmul_weight_grad(float *dw, const float *inp, const float *dout, int M,
                        int K, int N, float beta) {
    al_sgemm(true, false, K, N, M, 1.0f, inp, K,
                dout, N, beta, dw, N);
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
                    4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f;
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
    for (int i = 0; i < n; i += 256)
        sum += exp_shift_chunk(x + i, n - i < 256 ? n - i : 256, m);
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
 * on the calling thread alone inside an OpenMP region) on strided views of qkv: q, k, v
 * of head h are (T,D) with row stride 3·H·D. Query rows go in blocks of
 * ATT_BLOCK (layers.h), each against keys 0..end of the block only, so
 * under the causal mask the multiplies skip most of the zero upper
 * triangle. */

static int att_keys(int t0, int nt, int T, int causal) {
    return causal ? t0 + nt : T;
}

/* One (b,h): a (T,T) probabilities, z0 (T,D) with row stride zs. */
static void attention_head_forward(float *z0, float *a, const float *q0,
                                   const float *k0, const float *v0, int T,
                                   int rs, int zs, int D, float scale,
                                   int causal) {
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
        int nt = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK;
        int nk = att_keys(t0, nt, T, causal);
        float *S = a + (size_t)t0 * T; // (nt, nk) of ld T
        al_sgemm(false, true, nt, nk, D, scale,
                    q0 + (size_t)t0 * rs, rs, k0, rs, 0.0f, S, T);
        for (int i = 0; i < nt; i++)
            attention_softmax_row(S + (size_t)i * T, causal ? t0 + i + 1 : T, T);
        al_sgemm(false, false, nt, D, nk, 1.0f,
                    S, T, v0, rs, 0.0f, z0 + (size_t)t0 * zs, zs);
    }
}

void attention_forward(float *z, float *att, const float *qkv, int B, int T,
                       int H, int D, int causal) {
    const int HD = H * D, rs = 3 * HD;
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q0 = qkv + (size_t)b * T * rs + (size_t)h * D;
            attention_head_forward(z + (size_t)b * T * HD + (size_t)h * D,
                                   att + ((size_t)b * H + h) * T * T, q0, q0 + HD,
                                   q0 + 2 * HD, T, rs, HD, D, scale, causal);
        }
}

/* One (b,h), per block of query rows, with G (nt, nk) scratch of ld T:
 *   dA = dZ Vᵀ;  dV += Aᵀ dZ;  dS = A ⊙ (dA − Σ_s A dA) · scale;
 *   dQ = dS K;   dK += dSᵀ Q.
 * dq0, dk0, dv0 have row stride rs; dk0 and dv0 must start zeroed. */
static void attention_head_backward(float *dq0, float *dk0, float *dv0,
                                    const float *dz0, const float *q0,
                                    const float *k0, const float *v0,
                                    const float *a, float *G, int T, int rs,
                                    int zs, int D, float scale, int causal) {
    for (int t0 = 0; t0 < T; t0 += ATT_BLOCK) {
        int nt = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK;
        int nk = att_keys(t0, nt, T, causal);
        const float *A = a + (size_t)t0 * T, *dZ = dz0 + (size_t)t0 * zs;
        al_sgemm(false, true, nt, nk, D, 1.0f,
                    dZ, zs, v0, rs, 0.0f, G, T);
        al_sgemm(true, false, nk, D, nt, 1.0f,
                    A, T, dZ, zs, 1.0f, dv0, rs);
        for (int i = 0; i < nt; i++) {
            const float *ar = A + (size_t)i * T;
            float *gr = G + (size_t)i * T;
            int n = causal ? t0 + i + 1 : T;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int s = 0; s < n; s++) dot += ar[s] * gr[s];
#pragma omp simd
            for (int s = 0; s < n; s++) gr[s] = ar[s] * (gr[s] - dot) * scale;
            for (int s = n; s < nk; s++) gr[s] = 0.0f;
        }
        al_sgemm(false, false, nt, D, nk, 1.0f,
                    G, T, k0, rs, 0.0f, dq0 + (size_t)t0 * rs, rs);
        al_sgemm(true, false, nk, D, nt, 1.0f,
                    G, T, q0 + (size_t)t0 * rs, rs, 1.0f, dk0, rs);
    }
}

void attention_backward(float *dqkv, const float *dz, const float *qkv,
                        const float *att, int B, int T, int H, int D,
                        int causal) {
    const int HD = H * D, rs = 3 * HD;
    const float scale = 1.0f / sqrtf((float)D);
    const int rows = T < ATT_BLOCK ? T : ATT_BLOCK;
#pragma omp parallel
    {
        float *G = malloc(sizeof(float) * (size_t)rows * T);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                size_t off = (size_t)b * T * rs + (size_t)h * D;
                const float *q0 = qkv + off;
                float *dq0 = dqkv + off;
                for (int t = 0; t < T; t++) {
                    memset(dq0 + (size_t)t * rs + HD, 0, sizeof(float) * D);
                    memset(dq0 + (size_t)t * rs + 2 * HD, 0, sizeof(float) * D);
                }
                attention_head_backward(dq0, dq0 + HD, dq0 + 2 * HD,
                                        dz + (size_t)b * T * HD + (size_t)h * D,
                                        q0, q0 + HD, q0 + 2 * HD,
                                        att + ((size_t)b * H + h) * T * T, G, T,
                                        rs, HD, D, scale, causal);
            }
        free(G);
    }
}

int crossentropy_softmax_forward(float *probs, float *losses,
                                 const int *targets, int N, int V) {
    int n_valid = 0;
#pragma omp parallel for schedule(static) reduction(+ : n_valid)
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * V;
        float maxv = max_of(row, V);
        float tlogit = targets && targets[i] >= 0 ? row[targets[i]] : 0.0f;
        double sum = exp_shift_sum(row, V, maxv);
        float inv = (float)(1.0 / sum);
#pragma omp simd
        for (int j = 0; j < V; j++) row[j] *= inv;
        if (targets && targets[i] >= 0) {
            /* from the logits, not log(p): exact even when p underflows */
            losses[i] = (float)(log(sum) + maxv - tlogit);
            n_valid++;
        } else {
            losses[i] = 0.0f;
        }
    }
    return n_valid;
}

void crossentropy_softmax_backward(float *probs, const int *targets, int N,
                                   int V, int n_valid, uint16_t *bf16) {
    float scale = n_valid > 0 ? 1.0f / (float)n_valid : 0.0f;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *row = probs + (size_t)i * V;
        if (targets[i] < 0) {
            memset(row, 0, sizeof(float) * (size_t)V);
        } else {
#pragma omp simd
            for (int j = 0; j < V; j++) row[j] *= scale;
            row[targets[i]] -= scale;
        }
        if (bf16) al_round_bf16(bf16 + (size_t)i * V, row, (size_t)V);
    }
}
