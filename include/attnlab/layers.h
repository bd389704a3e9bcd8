/* layers.h -- the ops of the attention-only transformer, one
 * *_forward and *_backward pair each (llm.c style). Pure functions over
 * caller-owned buffers; model.c wires them together. Shapes use
 * B batch, T time, C d_model, H heads, D d_head, V vocab. */
#ifndef ATTNLAB_LAYERS_H
#define ATTNLAB_LAYERS_H

#include <stddef.h>

/* out (B,T,C) = W_E[inp] + W_pos[t] */
void encoder_forward(float *out, const int *inp, const float *wte,
                     const float *wpe, int B, int T, int C);
/* dwte (V,C), dwpe (n_ctx,C) += scattered dout (B,T,C). Serial, so the
 * summation order (and the result) does not depend on threads. */
void encoder_backward(float *dwte, float *dwpe, const float *dout,
                      const int *inp, int B, int T, int C);

/* out (M,N) = inp (M,K) @ w (K,N), beta 0 or 1 (accumulate). */
void matmul_forward(float *out, const float *inp, const float *w, int M,
                    int K, int N, float beta);
/* out (M,N) = inp (M,K) @ wᵀ where w is (N,K). */
void matmul_forward_wt(float *out, const float *inp, const float *w, int M,
                       int K, int N, float beta);

/* dw (K,N) = inpᵀ @ dout for inp (M,K), dout (M,N): the weight gradient
 * of matmul_forward; also used for tied unembedding. */
void matmul_weight_grad(float *dw, const float *inp, const float *dout, int M,
                        int K, int N, float beta);

/* Causal attention per (b,h). qkv (B,T,3,H,D) holds q|k|v; att
 * (B,H,T,T) receives the probabilities (0 above the diagonal); z
 * (B,T,H,D) the attention-weighted values. If causal is 0 every
 * position attends to every position (used by tests only). */
void attention_forward(float *z, float *att, const float *qkv, int B, int T,
                       int H, int D, int causal);
/* Query rows per block of attention_forward: block i holds rows
 * [i·ATT_BLOCK, (i+1)·ATT_BLOCK) and uses keys 0..end of the block, so
 * each z row is a sum over that many keys (zeros past the diagonal).
 * Code that recomputes some rows and must reproduce attention_forward
 * bit for bit (al_model_forward_delta) uses the same blocks. */
#define ATT_BLOCK 64
/* row[0..n) <- softmax(row[0..n)), row[n..T) <- 0 (masked keys): the
 * softmax of one attention row as attention_forward computes it. */
/* log Σ_i exp(x[i]) over i < n, the max subtracted first and the sum
 * in double (float terms, so tails below e^-87 of the max count as 0);
 * x is overwritten with exp(x[i] − max). */
double logsumexp_row(float *x, int n);
void attention_softmax_row(float *row, int n, int T);
/* dqkv (B,T,3,H,D) = gradient from dz (B,T,H,D); overwrites dqkv. */
void attention_backward(float *dqkv, const float *dz, const float *qkv,
                        const float *att, int B, int T, int H, int D,
                        int causal);

/* Row softmax of logits (N,V) in place into probabilities; losses[i] =
 * -log p[i, targets[i]] (0 where target < 0). Returns the number of
 * rows with a target. Out-of-range targets must be checked by callers. */
int crossentropy_softmax_forward(float *probs_inout, float *losses,
                                 const int *targets, int N, int V);
/* In place: probs (N,V) -> dlogits of mean loss over n_valid rows. */
void crossentropy_softmax_backward(float *probs_inout, const int *targets,
                                   int N, int V, int n_valid);

#endif
