/* circuits.h -- what each head does, read from its weights alone
 * (docs/design.md §4).
 *
 * Per head (row-vector convention): W_QK = W_Q W_Kᵀ and W_OV = W_V W_O,
 * both d_model x d_model of rank <= d_head. They are never formed: with
 * thin QR factors W_Q = Q_q R_q, W_K = Q_k R_k, W_V = Q_v R_v and
 * W_Oᵀ = Q_o R_o,
 *
 *   W_QK = Q_q (R_q R_kᵀ) Q_kᵀ        W_OV = Q_v (R_v R_oᵀ) Q_oᵀ
 *
 * so singular values and Frobenius norms are those of the d_head x d_head
 * cores, and a product of two heads' circuits reduces to cores around a
 * d_head x d_head overlap Q_aᵀ Q_b. Full circuits through the embeddings
 * (V x V) are computed block-wise from the (V, d_head) factors W_E W_Q,
 * W_E W_K, W_E W_V and (d_head, V) W_O W_U.
 *
 * Orientation: full QK has rows = destination (query) token B and
 * columns = source (key) token A; full OV has rows = source token A and
 * columns = output token C. W_U is W_Eᵀ for tied embeddings.
 *
 * LayerNorm and biases (model.h): the circuits read the weights with
 * LayerNorm folded in (process.h: TransformerLens's fold_ln, so W_Q, W_K,
 * W_V and W_U hold ln.w and read centred inputs, and
 * center_writing_weights, so W_E, W_pos and W_O write only what a reader
 * sees); LayerNorm's per-position scale, which no weight shows, is left
 * out, so each circuit is the model's up to it. al_circ_analyse folds a
 * copy of a model whose LayerNorm is not folded (config.processed lacks
 * AL_PROC_FOLD_LN). A shortformer model's positions join q and k after
 * ln1, so fold_ln cannot make it one folded model (TransformerLens skips
 * it): its copy is folded as if positions were absent, which its token
 * parts are (nothing else enters ln1), and its positional parts are read
 * from the unfolded W_pos, W_Q, W_K, which are exact. The pieces below
 * take a model without LayerNorm or with it folded (al_circ_positional_qk
 * also any shortformer model), and refuse others.
 * Biases are left out everywhere: the QK circuit is the token parts'
 * bilinear form x W_Q W_Kᵀ yᵀ (what b_Q and b_K add to a score is
 * dropped), OV is W_V W_O (b_V, b_O dropped), full circuits read W_U
 * without b_U. al_circ_notes says both for a run's notes. */
#ifndef ATTNLAB_CIRCUITS_H
#define ATTNLAB_CIRCUITS_H

#include <stdint.h>
#include "attnlab/model.h"
#include "attnlab/util.h"

/* A skip-trigram "A … B → C": destination B attends to source A
 * (centred full QK[B,A] = qk) and A's value raises output C (centred full
 * OV[A,C] = ov); score = qk * ov. */
typedef struct al_trigram {
    int a, b, c;
    float qk, ov, score;
} al_trigram;

typedef struct al_circ_head {
    int layer, head;
    double *qk_sv, *ov_sv; /* (D) singular values, descending */
    int qk_rank, ov_rank; /* numpy rule, shape d_model x d_model */
    double qk_eff_rank, ov_eff_rank; /* exp(entropy of σ/Σσ) */
    double qk_stable_rank, ov_stable_rank; /* ‖·‖_F² / σ_1² */
    double qk_fro, ov_fro; /* ‖W_QK‖_F, ‖W_OV‖_F */
    double *eig_re, *eig_im; /* (D) of W_O W_U W_E W_V, by |λ| desc */
    double copying_eigen; /* Re(Σλ)/Σ|λ|; NaN if all λ = 0 */
    double copying_top1; /* share of A with argmax_C OV[A,C] = A */
    double qk_top1_self; /* share of B with argmax_A QK[B,A] = B */
    double pos_prev_token; /* positional-only attention to t-1 */
    al_trigram *tri; /* top skip-trigrams, best first */
    int n_tri;
} al_circ_head;

/* Read and write spaces of one layer's heads taken together. */
typedef struct al_circ_layer {
    int rank_qk, rank_v, rank_o; /* ranks of [W_Q W_K]_h, [W_V]_h, [W_Oᵀ]_h stacked */
    int *dim_qk, *dim_v, *dim_o; /* (H) each head's own subspace dimension */
    /* (H,H): mean squared cosine of the principal angles between two
     * heads' subspaces; 1 on the diagonal. */
    double *ov_qk, *ov_v, *ov_o;
} al_circ_layer;

enum { AL_COMP_Q, AL_COMP_K, AL_COMP_V, AL_COMP_N };
extern const char *const al_comp_names[AL_COMP_N]; /* "Q", "K", "V" */

typedef struct al_circ_comp {
    int l1, h1, l2, h2; /* earlier head -> later head, l1 < l2 */
    double score[AL_COMP_N];
} al_circ_comp;

typedef struct al_circ_opts {
    int top_k; /* skip-trigrams kept per head (default 50) */
    int mc_samples; /* random pairs for the composition baseline (100) */
    uint64_t seed; /* seed of the baseline (1) */
    int block; /* rows per block of full circuits (128) */
    int progress; /* show a progress line */
} al_circ_opts;

al_circ_opts al_circ_opts_default(void);

typedef struct al_circ_result {
    int L, H, D, C, V;
    al_circ_head *heads; /* (L*H), index l*H + h */
    al_circ_layer *layers; /* (L) */
    al_circ_comp *comp; /* every (l1,h1) -> (l2,h2) with l1 < l2 */
    int n_comp;
    double base_mean[AL_COMP_N], base_sd[AL_COMP_N];
    double seconds; /* wall time of the analysis */
} al_circ_result;

/* Everything above for every head of m (a LayerNorm model: on its
 * weights with LayerNorm folded in, a folded copy when they are not). */
int al_circ_analyse(const al_model *m, const al_circ_opts *o, al_circ_result *r, al_err *e);
/* The sentences a run on a model of config c records as notes (at most
 * 2, into notes; each under AL_WARN_LEN): LayerNorm folded and its scale
 * left out; biases left out. Returns how many (0: the plain model). */
int al_circ_notes(const al_config *c, const char *notes[2]);
void al_circ_result_free(al_circ_result *r);

/* ---- pieces, for tests, pictures and other commands ---- */

/* Singular values (D, descending) and Frobenius norm of W_QK / W_OV. */
int al_circ_qk_svals(const al_model *m, int l, int h, double *s, al_err *e);
int al_circ_ov_svals(const al_model *m, int l, int h, double *s, al_err *e);
/* Eigenvalues (D) of W_O W_U W_E W_V and the copying score from them. */
int al_circ_ov_eigen(const al_model *m, int l, int h, double *re, double *im, double *copying,
                     al_err *e);
/* Full circuits on chosen tokens (uncentred):
 * out (n_dst, n_src) = full QK[dst_i, src_j];
 * out (n_src, n_out) = full OV[src_i, out_j]. */
int al_circ_full_qk(const al_model *m, int l, int h, const int *dst, int n_dst, const int *src,
                    int n_src, float *out, al_err *e);
int al_circ_full_ov(const al_model *m, int l, int h, const int *src, int n_src, const int *outs,
                    int n_out, float *out, al_err *e);
/* Positional QK = W_pos W_QK W_posᵀ, out (n_ctx, n_ctx), row = destination. */
int al_circ_positional_qk(const al_model *m, int l, int h, float *out, al_err *e);
/* Composition scores of (l1,h1) -> (l2,h2), score[AL_COMP_N]. */
int al_circ_composition(const al_model *m, int l1, int h1, int l2, int h2, double *score,
                        al_err *e);
/* Mean and standard deviation of the composition scores of independent
 * Gaussian heads of shape (C, D), over `samples` pairs from `seed`. */
int al_circ_comp_baseline(int C, int D, int samples, uint64_t seed, double *mean, double *sd,
                          al_err *e);

#endif
