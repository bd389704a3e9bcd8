/* sae_features.h -- what each feature of a sparse autoencoder on a layer's
 * z (sae.h, sae_io.h) does, in numbers a database can hold: how often and
 * how strongly it fires on text, where it fires most, which tokens its
 * decoder direction pushes up and down, which heads its pre-activation
 * comes from, and whether it is an induction feature.
 *
 * Why: a head often does several jobs and several heads share one; the
 * features of an SAE on the concatenated z of a layer (Kissane et al.
 * 2024) split a layer below the level of heads. These numbers are what
 * the features table, the "features of head l.h" and "induction features"
 * queries and a feature dashboard read.
 *
 * Definitions (x: the site's z at one position, flattened head-major,
 * times the SAE's scale s; f_i its code; W_*, b_* the SAE's):
 *   density_i      share of the text positions with f_i > 0; a feature is
 *                  live when it fires at least once (only live ones are
 *                  reported)
 *   mean_act_i     mean of f_i over the positions where it fires; max_act_i
 *                  its largest value
 *   contexts       the top_n positions by f_i (ties: the earlier window,
 *                  then position), each with its window, the window's
 *                  offset in the token file, the position and its token
 *   logit effects  the decoder row in z units, W_dec,i / s, through each
 *                  head's W_O[l,h] slice and W_U (no LayerNorm in these
 *                  models): the change of every logit per unit of f_i;
 *                  the logit_n largest and smallest, with values
 *   DFA by head    c_h = Σ_{e in head h's slice} (x_e − b_dec,e)·W_enc[e,i]:
 *                  the pre-activation minus b_enc is Σ_h c_h. contrib_h is
 *                  the mean of c_h over the positions where f_i > 0;
 *                  share_h = contrib_h / Σ_h' contrib_h' (the ratio of the
 *                  means, so a position where the terms nearly cancel does
 *                  not dominate; NaN when the sum is 0)
 *   induction      on the induction probe (al_probe_make: BOS, R random
 *                  ids, the same R again; N sequences): first_mean and
 *                  second_mean, the mean f_i over positions 1..R and
 *                  R+1..2R; induction_index = second / (first + second),
 *                  the share of its probe activation on the second
 *                  occurrence (NaN when it never fires on the probe);
 *                  first_fired and second_fired, its firing counts on each;
 *                  induction_p = P(X >= second_fired) for X ~ Binomial(
 *                  first_fired + second_fired, 1/2), the chance a feature
 *                  blind to repetition fires that lopsidedly; auroc, the
 *                  AUROC of f_i for second against first occurrence
 *                  positions (0.5: blind; 1: every second-occurrence
 *                  position above every first); per head, the same AUROC
 *                  of ‖z‖ (head_auroc), the head-level baseline; and
 *                  group_auroc, the AUROC of the induction features' (below)
 *                  summed code, chosen on the same probe (in-sample);
 *                  next_token and next_share: at its second-occurrence
 *                  firings, the token due next (the one induction copies)
 *                  that is most common, and its share: a feature specific
 *                  to one token has a share near 1.
 *   induction      a feature is an induction feature when its index is at
 *   feature        least AL_SAE_INDUCTION_INDEX and induction_p is below
 *                  AL_SAE_INDUCTION_P. The index alone is a ratio: a
 *                  feature that fires twice on the probe, both on second
 *                  occurrences, reaches 1. The count test keeps a feature
 *                  specific to one token (it fires only where that token
 *                  is due, a few dozen times in a large probe) while it
 *                  rejects such flukes.
 *
 * Only z-site SAEs: a residual-stream SAE has no head slices. */
#ifndef ATTNLAB_SAE_FEATURES_H
#define ATTNLAB_SAE_FEATURES_H

#include <signal.h>
#include <stdint.h>

#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/sae.h"
#include "attnlab/sae_io.h"
#include "attnlab/util.h"

typedef struct al_sae_feat_opts {
    int windows; /* text windows of T tokens spread over the file (64), 1..100000 */
    int top_n; /* contexts per feature (10), 1..100 */
    int logit_n; /* tokens each way (10), 1..100 */
    int probe_r; /* induction probe: ids per half (0: min(50, (n_ctx−1)/2)) */
    int probe_n; /* sequences (1024), 1..100000: a token-specific feature
                           * needs its token due on second occurrences often
                           * enough to count (about probe_n·R/d_vocab times) */
    uint64_t probe_seed; /* (1) */
    int bos; /* the probe's BOS id (−1: 0) */
    int progress; /* progress line on stderr (0) */
    volatile sig_atomic_t *stop; /* non-NULL and set: stop, −1 "interrupted" */
} al_sae_feat_opts;
#define AL_SAE_FEAT_OPTS_INIT                                                                      \
    { 64, 10, 10, 0, 1024, 1, -1, 0, NULL }
al_sae_feat_opts al_sae_feat_opts_defaults(void);
/* 0, or −1 with e naming the option out of range. */
int al_sae_feat_opts_check(const al_sae_feat_opts *o, al_err *e);

typedef struct al_sae_feat_ctx {
    int window; /* −1: an unused slot */
    long offset; /* the window's first token in the file */
    int pos; /* position in the window */
    int token; /* the token there */
    float act;
} al_sae_feat_ctx;

typedef struct al_sae_feat_result {
    int d_sae, layer, H, T, windows;
    int top_n, logit_n;
    int probe_r, probe_n;
    long positions; /* text positions seen (windows × T) */
    int n_live;
    /* per feature (d_sae each; one allocation for the doubles) */
    long *fired; /* text positions with f > 0 */
    double *density, *mean_act, *max_act;
    double *first_mean, *second_mean, *induction_index;
    long *first_fired, *second_fired; /* probe firings on each occurrence */
    double *induction_p, *auroc;
    int *next_token; /* the token most often next at its second-occurrence firings
                           * (what induction predicts there), −1: none */
    double *next_share; /* that token's share of them: near 1 for a token-specific
                           * induction feature (NaN: none) */
    unsigned char *induction; /* al_sae_is_induction */
    int n_induction;
    double group_auroc; /* AUROC of the induction features' summed code (in-sample) */
    double *head_auroc; /* (H) AUROC of ‖z‖ of each head of the layer */
    double *contrib; /* (d_sae, H) */
    double *share; /* (d_sae, H) */
    al_sae_feat_ctx *ctx; /* (d_sae, top_n) by act descending */
    int *up_tok, *down_tok; /* (d_sae, logit_n): largest, smallest logit effects */
    float *up_val, *down_val; /* (d_sae, logit_n) (dead features: zeros) */
    double seconds;
} al_sae_feat_result;

/* The features of s (meta: its site, layer and scale; checked against m
 * with al_sae_fits_model) on text windows of T tokens of data (2 <= T <=
 * n_ctx) and on the induction probe. Uses the model as it is (a mask's
 * gates included). Deterministic: fixed windows, the probe from its seed,
 * sums in a fixed order. 0 with r filled (free with
 * al_sae_feat_result_free), or −1 with e and r zeroed (bad options, a
 * residual-stream SAE, an SAE that does not fit m, ids outside the
 * vocabulary, a short file, out of memory, stopped). */
/* What the logit effects freeze on a model with LayerNorm (a note a
 * command stores with the run), or NULL for a model without. */
const char *al_sae_feat_ln_note(const al_config *c);
/* The induction probe's R for o on a model of context n_ctx
 * (al_probe_r_default): 0 and *R, or −1 with e when its 2R+1 tokens do
 * not fit n_ctx. al_sae_features_run checks it; a command checks it
 * before its run begins. */
int al_sae_feat_probe_r(const al_sae_feat_opts *o, int n_ctx, int *R, al_err *e);
/* Bytes al_sae_features_run allocates (membudget.h) for an SAE of sc on a
 * model of c, windows of T tokens and a probe of R ids per half: its
 * result, the text pass and the probe's firings (a TopK SAE's at most k
 * per position; an L1 SAE's are assumed to be 64, as they cannot be known
 * before it runs). A command refuses before its run begins when they
 * cannot fit. */
double al_sae_feat_bytes(const al_config *c, const al_sae_cfg *sc, int T, int R,
                         const al_sae_feat_opts *o);
int al_sae_features_run(al_model *m, al_sae *s, const al_sae_meta *meta, const al_tokens *data,
                        int T, const al_sae_feat_opts *o, al_sae_feat_result *r, al_err *e);
#define AL_SAE_INDUCTION_INDEX 0.8
#define AL_SAE_INDUCTION_P 1e-4
/* 1 when a feature with this induction index and binomial tail counts as
 * an induction feature (above), else 0; NaN counts as no. */
int al_sae_is_induction(double index, double p);

/* Frees and zeroes r; harmless on a zeroed struct. */
void al_sae_feat_result_free(al_sae_feat_result *r);

#endif
