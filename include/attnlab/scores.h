/* scores.h -- behavioural head scores from forward passes (docs/design.md §5).
 *
 * The probe: BOS + R random tokens, the same R tokens again; N such
 * sequences from a fixed seed. Positions 1..R are the first repeat,
 * R+1..2R the second. Per head (from the attention pattern):
 *   induction       = mean over the second repeat of A[t, t−R+1]
 *   duplicate_token = mean over the second repeat of A[t, t−R]
 *   prev_token      = mean over t >= 2 of A[t, t−1]
 *   induction_all   = mean over the second repeat of the attention mass
 *                     on S(t) = {s : 1 <= s <= t, token[s−1] = token[t]},
 *                     the successors of every earlier occurrence of the
 *                     current token (= induction where no token recurs
 *                     inside a half: S(t) is then {t−R+1})
 * Per layer: the sums of induction and of induction_all over its heads
 * (an induction mass spread over several heads shows there, though no
 * one head passes the threshold).
 * Per model: icl_gain = mean loss on the first repeat − on the second
 * (targets at positions 2..R vs R+2..2R: the ones an induction head can
 * predict).
 *
 * On natural text (validation windows of T tokens; position t predicts
 * token t+1 from the t+1 tokens of its window):
 *   icl_score     = mean loss over the late positions − mean loss over the
 *                   early positions (Olsson et al. 2022: "loss of the 500th
 *                   token minus loss of the 50th" in 512-token contexts;
 *                   negative = the model does better later in the context,
 *                   unlike icl_gain, which is positive then). With w =
 *                   max(1, T/25): early = [T/10 − w/2, T/10 − w/2 + w),
 *                   late = [T − w, T). For n_ctx 256: early 20..29, late
 *                   246..255 (≈ 0.1 and ≈ 0.98 of the context, as Olsson's
 *                   50/512 and 500/512). Windows start anywhere in the
 *                   token file, so a window may span documents (as there).
 *   copy position = a position whose target already occurs among the
 *                   window's tokens up to and including t: the next token
 *                   could be copied from the context.
 *   copying_ablation (per head) = mean drop in log p(next token) at copy
 *                   positions when the head is mean-ablated; computed with
 *                   the ablation engine (ablate.h, al_abl_run), so there is
 *                   one implementation of mean ablation. */
#ifndef ATTNLAB_SCORES_H
#define ATTNLAB_SCORES_H

#include <stdint.h>
#include "attnlab/model.h"
#include "attnlab/util.h"

typedef struct al_probe {
    int R, N;
    int *tokens; /* (N, 2R+1) */
    int text; /* 1: the repeated halves are windows of real text */
    double recur; /* share of second-half positions whose token also sits
                     * at another position of the first half (text: often;
                     * random ids: rarely) */
    double uniform_all; /* induction_all of a head attending uniformly
                     * (mean over the second half of |S(t)| / (t+1)): the
                     * chance level, which recurrences raise */
    double prev_all; /* induction_all of a perfect previous-token head (share
                     * of second-half t with t−1 in S(t), i.e. token[t−2] =
                     * token[t]): what position alone earns on it */
    double ceiling; /* induction of a head attending evenly over S(t) (mean
                     * of 1/|S(t)|): what a perfect all-occurrences
                     * induction head reads on induction here */
} al_probe;

/* What a probe's repeated half is made of (the shared --probe-tokens
 * option; every field borrowed, a zeroed struct or NULL = random ids
 * over the whole vocabulary):
 *   allowed  (d_vocab flags) random ids, only over the ids flagged. For
 *            models trained on real text with a byte-level vocabulary: a
 *            third of its ids (bytes that never occur in the text) keep
 *            their random initial embeddings, and a probe made of them
 *            measures that noise, not the heads.
 *   text     (n_text ids) held-out text: each half is a window of R
 *            consecutive tokens of it (Olsson et al. 2022 measure
 *            induction on repeated real tokens too). */
typedef struct al_probe_src {
    const unsigned char *allowed;
    const uint16_t *text;
    size_t n_text;
} al_probe_src;

/* Build N sequences of length 2R+1: BOS (special_id, or 0 when < 0), a
 * half of R tokens, the same half again. Random halves: ids uniform over
 * [0, d_vocab) except special_id (and over src->allowed's ids); without
 * a mask the sequences are those of earlier versions, id for id. Text
 * halves (src->text): a window at a uniformly drawn start; a window
 * holding special_id (a document boundary) is redrawn, up to 64 times,
 * then kept. Tokens that recur inside a half are kept as they are:
 * induction reads attention to the one position R−1 back, so where the
 * current token also occurred elsewhere in the first half an induction
 * head may split its attention, and that score is lower than for a half
 * without recurrences (p->recur says how often that happens);
 * induction_all counts every such place (p->uniform_all and p->prev_all
 * are its chance and positional levels on this probe). Fails
 * (-1, e) when no id is left to draw, the text is shorter than R + 1
 * tokens or holds ids >= d_vocab. Needs 2R+1 <= n_ctx. */
int al_probe_make(al_probe *p, int R, int N, uint64_t seed, int d_vocab, int special_id,
                  const al_probe_src *src, al_err *e);
/* The probe's R per half for a model of context n_ctx: probe_r when it
 * is not 0, else the default min(50, (n_ctx − 1) / 2), so a model of
 * short context runs without --probe-r. The one rule of every command
 * whose --probe-r defaults to 0 (patch, paths, attribute, discover, sae
 * features). */
int al_probe_r_default(int probe_r, int n_ctx);
void al_probe_free(al_probe *p);
/* Fill p->recur, p->uniform_all, p->prev_all and p->ceiling from
 * p->tokens, p->R and p->N (al_probe_make does; for a probe whose tokens
 * were set by hand). */
void al_probe_measure(al_probe *p);

typedef struct al_probe_scores {
    int n_layers, n_heads;
    double *induction, *duplicate_token, *prev_token; /* (L,H) each, one allocation */
    double *induction_all; /* (L,H), in the same allocation */
    double *layer_induction, *layer_induction_all; /* (L): the heads' sums, same allocation */
    double loss_first, loss_second, icl_gain;
    /* al_probe_run_items: each sequence's values, (N, AL_PROBE_ITEM_COLS(L·H)):
     * induction, duplicate_token, prev_token, induction_all (each L·H, by
     * head), then icl_gain; each normalised as its mean is, so a column's
     * mean is the score up to rounding (the score itself is summed as
     * before, bit for bit). NULL from al_probe_run. */
    double *items;
    int n_items;
} al_probe_scores;
#define AL_PROBE_ITEM_COLS(LH) (4 * (LH) + 1)

/* Run the probe through m (current gates/replacements apply) in batches
 * of `batch` sequences; fill *out (allocated here; al_probe_scores_free). */
int al_probe_run(al_model *m, const al_probe *p, int batch, al_probe_scores *out, al_err *e);
/* al_probe_run, also keeping each sequence's values in out->items (what
 * the intervals are computed from: docs/design.md §5, intervals). */
int al_probe_run_items(al_model *m, const al_probe *p, int batch, al_probe_scores *out, al_err *e);
void al_probe_scores_free(al_probe_scores *s);

/* The early and late position ranges [e0,e1) and [l0,l1) of icl_score for
 * windows of T tokens (see above); needs T >= 5 (else all 0). */
typedef struct al_icl_range {
    int e0, e1, l0, l1;
} al_icl_range;
al_icl_range al_icl_ranges(int T);

/* icl_score from per-position losses (rows,T), counting positions whose
 * target is >= 0. Fails if T < 5 or a range has no counted position.
 * *se (may be NULL): the score's standard error over windows, the sample
 * sd of each row's late − early means (rows holding both) over √rows;
 * NaN with fewer than 2 such rows. The score is a difference of two
 * means of w noisy per-token losses per window, so a few dozen windows
 * leave it uncertain by a tenth of a nat or more: on a 2-layer KJV
 * model, 32 windows gave +0.11 ± 0.23 and 320 gave −0.01 ± 0.06. */
int al_icl_score(const float *losses, const int *targets, int rows, int T, double *early,
                 double *late, double *score, double *se, al_err *e);

/* out (rows,T) = 1 at copy positions (targets[r,t] >= 0 occurs among
 * inputs[r,0..t]), else 0. Ids must be in [0, d_vocab). Returns -1 on a
 * bad id or allocation failure. */
int al_copy_positions(const int *inputs, const int *targets, int rows, int T, int d_vocab,
                      unsigned char *out, al_err *e);

#endif
