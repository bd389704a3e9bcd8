/* layers.h -- the ops of the attention-only transformer, one
 * *_forward and *_backward pair each (llm.c style). Pure functions over
 * caller-owned buffers; model.c wires them together. Shapes use
 * B batch, T time, C d_model, H heads, D d_head, V vocab. */
#ifndef ATTNLAB_LAYERS_H
#define ATTNLAB_LAYERS_H

#include <stddef.h>
#include <stdint.h>

/* out (B,T,C) = W_E[inp] + W_pos[t] (wpe NULL: W_E[inp] alone, the
 * shortformer embedding) */
void encoder_forward(float *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                     int C);
/* dwte (V,C), dwpe (n_ctx,C) += scattered dout (B,T,C) (dwpe NULL: not
 * accumulated). Serial, so the summation order (and the result) does not
 * depend on threads. */
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                      int C);

/* Shortformer positions (model.h, AL_POS_SHORTFORMER): W_pos feeds the
 * query and key inputs of every head, never the residual or the values.
 * wqkv (C,3·HD) is a layer's fused W_Q|W_K|W_V (HD = H·D).
 *   posqk_project: pos (T,2·HD) = wpe[:T] (T,C) @ wqkv[:, :2·HD], i.e.
 *                  pos[t] = (W_pos[t] W_Q[h] | W_pos[t] W_K[h]) for all h.
 *   posqk_forward: qkv (B,T,3,H,D): q and k at (b,t) += pos[t]; v untouched.
 *   posqk_backward: dpos (T,2·HD) = Σ_b dq|dk at t (scratch, b ascending);
 *                  dwqkv[:, :2·HD] += wpe[:T]ᵀ dpos (the q/k inputs were
 *                  x + W_pos, so dW_Q,K get the W_pos rows' share);
 *                  dwpe[:T] += dpos wqkv[:, :2·HD]ᵀ.
 * Serial sums and one sgemm each, so the result does not depend on threads. */
void posqk_project(float *pos, const float *wpe, const float *wqkv, int T, int C, int HD);
void posqk_forward(float *qkv, const float *pos, int B, int T, int HD);
void posqk_backward(float *dwpe, float *dwqkv, float *dpos, const float *dqkv, const float *wpe,
                    const float *wqkv, int B, int T, int C, int HD);

/* LayerNorm as TransformerLens defines it, per row x (C):
 *   x_c = x − mean(x),  scale = sqrt(mean(x_c²) + eps),  out = x_c / scale · w + b
 * (w and b NULL: LNPre, out = x_c / scale). The sums are in double, the
 * rest in float, per row in a fixed order. These and the bias passes
 * below run on the calling thread (layers.c says why).
 *   layernorm_stats:   mean, scale (N) of rows x (N, C)
 *   layernorm_apply:   out (N, C) from x, mean and scale (a hook may have
 *                      changed scale in between); out may be x (in place)
 *   layernorm_forward: both, the same bits as the two calls */
void layernorm_stats(float *mean, float *scale, const float *x, size_t N, int C, double eps);
void layernorm_apply(float *out, const float *x, const float *mean, const float *scale,
                     const float *w, const float *b, size_t N, int C);
void layernorm_forward(float *out, float *mean, float *scale, const float *x, const float *w,
                       const float *b, size_t N, int C, double eps);
/* Backward of layernorm_forward from dout (N, C), with x, mean and scale
 * as the forward had them: dx (N, C) = the input's gradient (accumulate:
 * dx += it, else dx = it); dw, db (C) = Σ_rows dout · x̂ and Σ_rows dout
 * (overwritten; both NULL: not wanted, as for LNPre), summed in row order
 * while each row is in cache. x̂ = (x − mean) / scale, and with g = dout ·
 * w (LNPre: dout),
 *   dx = (g − mean(g) − x̂ · mean(g · x̂)) / scale. */
void layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                        const float *mean, const float *scale, const float *w, size_t N, int C,
                        int accumulate);
/* The scratch crossentropy_softmax_backward's dbias needs for N rows of
 * V: a partial sum (V) per block of 32 rows. */
#define CE_PART_FLOATS(N, V) (((size_t)(N) + 31) / 32) * (size_t)(V)

/* Biases of a product's output: out[n·ld + j] += b[j] for rows n < N,
 * columns j < M (bias_forward); db[j] = Σ_n dout[n·ld + j], rows summed
 * in order (bias_backward). */
void bias_forward(float *out, const float *b, size_t N, int M, size_t ld);
void bias_backward(float *db, const float *dout, size_t N, int M, size_t ld);
/* q|k|v (B,T,3,H,D) of one layer (HD = H·D): + b_Q, b_K, b_V (each (HD)
 * or NULL), then, with pos (T, 2·HD) non-NULL, q|k += pos[t]; one pass. */
void qkv_bias_forward(float *qkv, const float *bq, const float *bk, const float *bv,
                      const float *pos, int B, int T, int HD);
/* out (N, M) = x + b, row by row (the residual copy of a layer with b_O). */
void copy_bias_forward(float *out, const float *x, const float *b, size_t N, int M);

/* out (M,N) = inp (M,K) @ w (K,N), beta 0 or 1 (accumulate). */
void matmul_forward(float *out, const float *inp, const float *w, int M, int K, int N, float beta);
/* out (M,N) = inp (M,K) @ wᵀ where w is (N,K). */
void matmul_forward_wt(float *out, const float *inp, const float *w, int M, int K, int N,
                       float beta);

/* dw (K,N) = inpᵀ @ dout for inp (M,K), dout (M,N): the weight gradient
 * of matmul_forward; also used for tied unembedding. */
void matmul_weight_grad(float *dw, const float *inp, const float *dout, int M, int K, int N,
                        float beta);

/* Causal attention per (b,h). qkv (B,T,3,H,D) holds q|k|v; att
 * (B,H,T,T) receives the probabilities (0 above the diagonal); z
 * (B,T,H,D) the attention-weighted values. If causal is 0 every
 * position attends to every position (used by tests only). Returns 0,
 * or -1 when a thread's scratch ((4·T·D + 64·T) floats, kept for the
 * next call) could not be allocated; z and att are then incomplete. */
int attention_forward(float *z, float *att, const float *qkv, int B, int T, int H, int D,
                      int causal);
/* attention_forward in two halves, for a hook between them that reads
 * or writes the scores (TransformerLens's hook_attn_scores):
 *   attention_scores_forward: scores (B,H,T,T) = q·k / sqrt(D), −inf
 *     above the diagonal (causal);
 *   attention_pattern_forward: att holds scores on entry and the
 *     probabilities on return; each row t is the softmax of its entries
 *     up to its last one that is not −inf (a hook may give a row more or
 *     fewer keys; a row of −inf only becomes zeros), and z (B,T,H,D) =
 *     probabilities · v.
 * With the scores as the first half left them, att and z are
 * attention_forward's to the bit (the same blocks and products).
 * 0, or −1 as attention_forward. */
int attention_scores_forward(float *scores, const float *qkv, int B, int T, int H, int D);
int attention_pattern_forward(float *z, float *att, const float *qkv, int B, int T, int H, int D);
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
/* dqkv (B,T,3,H,D) = gradient from dz (B,T,H,D); overwrites dqkv.
 * Returns 0, or -1 (dqkv incomplete) when a thread's scratch ((7·T·D +
 * 128·T) floats) could not be allocated. */
int attention_backward(float *dqkv, const float *dz, const float *qkv, const float *att, int B,
                       int T, int H, int D, int causal);

/* Row softmax of logits (N,V) (+ bias (V) when non-NULL) in place into
 * probabilities; losses[i] = -log p[i, targets[i]] (0 where target < 0).
 * Returns the number of rows with a target. Out-of-range targets must be
 * checked by callers. */
int crossentropy_softmax_forward(float *probs_inout, float *losses, const int *targets, int N,
                                 int V, const float *bias);
/* In place: probs (N,V) -> dlogits of mean loss over n_valid rows; with
 * bf16 non-NULL, also dlogits rounded to bfloat16 there (N·V values),
 * while each row is in cache (al_gemm_bf16_reserve); with dbias non-NULL,
 * dbias (V) = Σ_rows dlogits (b_U's gradient), summed per block of rows
 * while they are in cache into part (ceil(N/32)·V floats of scratch),
 * the blocks in a fixed order. */
void crossentropy_softmax_backward(float *probs_inout, const int *targets, int N, int V,
                                   int n_valid, uint16_t *bf16, float *dbias, float *part);
/* Both in one pass over the rows (training: each row is read from memory
 * once, not twice): logits (N,V) in place into dlogits, losses as the
 * forward's; the same bits as the two calls. Returns n_valid. With bias
 * (V) non-NULL, both add it to every row of logits first (b_U, added
 * where the rows are read anyway). */
int crossentropy_softmax_forward_backward(float *probs_inout, float *losses, const int *targets,
                                          int N, int V, uint16_t *bf16, const float *bias,
                                          float *dbias, float *part);

#endif
