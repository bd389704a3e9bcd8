/* attribute.h -- attribution on a task's clean sequences: direct logit
 * attribution, the exact path expansion with virtual heads (Elhage et
 * al. 2021; any depth), and the logit lens. Library only.
 *
 * Everything is read from one normal forward pass per batch of the task's
 * clean sequences (pairs.h), with the attention patterns frozen as that
 * pass computed them. Without LayerNorm and MLPs the final residual is a
 * sum, and the logits are linear in it:
 *
 *   x_L = embed + pos + Σ_{l,h} out_{l,h},   out_{l,h} = g[l,h]·z[l,h] W_O[l,h]
 *
 * At an item (pair, pos, answer, wrong) the metric logit is
 * x_L(pos) · u with u = W_U[:,answer] − W_U[:,wrong] (u = W_U[:,answer]
 * when wrong < 0, i.e. the correct token's logit, or W_U[:,answer] less
 * the mean column with center_unembed); the item's loss is
 * −log p(answer) from the full logits row, whatever the task's metric.
 *
 * Components (direct logit attribution; any number of layers), index c:
 *   0 embed (W_E[tok]), 1 pos (W_pos[pos]), 2 + l·H + h head l.h;
 * contribution = out_c(pos) · u. They sum to the metric logit.
 *
 * Path terms (any depth), index k, l = layer, h = head, L·H heads:
 *   0                       direct: embed + pos straight to W_U
 *   1 + l·H + h             head l.h reading embed + pos through its value
 *                           input (for l = 0 that is all head 0.h does)
 *   1 + L·H + H²·l1(l1−1)/2 + s·H + h1   (s = l0·H + h0, l0 < l1)
 *                           virtual head l0.h0 → l1.h1: l1.h1's output from
 *                           the part of its value input that l0.h0 wrote
 *                           reading embed + pos, g1·A1 (d0 W_V1) W_O1 with
 *                           d0 = g0·A0 (x0 W_V0) W_O0 (= out_{0,h0} for l0 = 0)
 *   last (3 layers or more) the remainder "chains>=3": every chain of three
 *                           or more heads l0.h0 → l1.h1 → l2.h2 → ...
 * For 1 and 2 layers this is the list it always was (1 + H + h1 for head
 * 1.h1, 1 + 2H + h0·H + h1 for 0.h0 → 1.h1). Head l.h's value input is
 * x_l = embed + pos + Σ_{l'<l,h'} out_{l',h'}, and each out splits into
 * its direct part (reading embed + pos) and the chains of two or more
 * heads that end at it; so each head's output splits exactly into its
 * embed+pos part, one part per earlier head's direct part, and the
 * longer chains; the terms' logits add up to the model's logits (whole
 * rows, not only the metric's direction). The remainder is computed
 * forward from the head outputs (attribute.c), not as the model's
 * logits less the other terms. Per term: its mean
 * contribution to the metric logit, and its importance: the change in
 * mean item loss when that term alone is subtracted from the logits;
 * per kind (direct; head: the terms 1 + l·H + h; virtual: every path
 * through two or more heads, the remainder included), the same with all
 * of the kind's terms subtracted together (importances do not add up:
 * the loss is not linear in the logits).
 *
 * Shortformer positions (model.h, AL_POS_SHORTFORMER) never enter the
 * residual stream: x_L = embed + Σ out_{l,h}, so the pos component is
 * exactly 0, "embed + pos" above is embed alone (the direct term, the
 * heads' value inputs, the logit lens' x_0), and positions
 * act only through the attention patterns, which are frozen here. The
 * sums are the same identities.
 *
 * Logit lens: the residual stream entering each layer and the final one
 * (x_0 = embed + pos, ..., x_L) through W_U: mean item loss and top-1
 * accuracy (argmax == answer, ties to the lower id); x_L's are the
 * model's own.
 *
 * LayerNorm and biases (model.h; any norm_type and bias set): the logits
 * are ln_final(x_L) W_U + b_U, ln_final(x) = (x − mean x) / scale · w + b
 * (LNPre: no w, b). With ln_final's scale frozen at its value in the
 * clean run at that item (TransformerLens's apply_ln_to_stack: centre
 * each component, divide by the clean run's ln_final.hook_scale), the
 * logits are linear in x_L again and split exactly, for the clean run:
 *   component y:  ((y − mean y) / scale · w) W_U      (no LayerNorm: y W_U)
 *   const:        b W_U + b_U                          (ln_final.b, b_U)
 * The components are embed, pos, the heads (as above, g·z W_O: b_V is in
 * z), then one per layer, 2 + L·H + l: that layer's b_O ("b_O_l", 0
 * without b_O), and last, 2 + L·H + L, the constant ("const"):
 * al_attr_n_comp. On a model whose ln_final is folded (process.h:
 * LNPre, its w and b already in W_U and b_U) the same formula reads the
 * folded weights. The path expansion freezes each layer's ln1 scale too:
 * head l.h's value reading part y of its input is ((y − mean y) /
 * scale1 · ln1.w) W_V, its constant ln1.b W_V + b_V; so "embed + pos"
 * above becomes the stream less the heads' outputs: the direct term is
 * (x0 + Σ_l b_O[l]) read out plus the constant's logits, and head l.h's
 * own term reads x0 + the b_O of the layers below l, plus its value
 * constant (a layer-0 head's term is still its whole output; a sender's
 * direct part is its own term's output). The terms still add up to the
 * model's logits rows for the clean run (the frozen scales are its own):
 * exactly, to float rounding, and a linearisation of the model anywhere
 * else (al_attr_notes words it for a run's notes). The logit lens reads
 * each stream through the whole unembedding, ln_final with the stream's
 * own scale and b_U.
 *
 * The run uses m's gates; m's hooks are ignored
 * (cleared for the run) and, like the gates, as before on return. Failure
 * contract as the analyses of analyses.h: 0 with *r filled (free with
 * al_attr_result_free), or −1 with e set to one line and *r zeroed. */
#ifndef ATTNLAB_ATTRIBUTE_H
#define ATTNLAB_ATTRIBUTE_H

#include <signal.h>
#include <stddef.h>
#include "attnlab/gap.h"
#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/stats.h"
#include "attnlab/util.h"

typedef struct al_attr_opts {
    int batch; /* pairs per forward pass (8), 1..100000 */
    int paths; /* 1 (default): the path expansion too; 0: not */
    int progress; /* 1: a progress line on stderr per batch */
    volatile sig_atomic_t *stop; /* non-NULL and set: stop between batches, −1 "interrupted" */
    /* 1: on items without a wrong token (log-prob tasks) u is W_U[:,answer]
     * less the mean column of W_U, so each contribution leaves out the
     * shift common to every logit, which log p ignores (TransformerLens
     * centres W_U so by default); the metric is then the answer's logit
     * less the mean logit, and the terms still sum to it. 0 (default):
     * the raw column. Logit-difference items are the same either way. */
    int center_unembed;
    double ci_level; /* the intervals' level (AL_CI_LEVEL) */
    int bootstrap; /* resamples of the sequences (AL_CI_BOOTSTRAP); 0: se only */
    uint64_t ci_seed; /* (AL_CI_SEED) */
} al_attr_opts;

#define AL_ATTR_OPTS_INIT                                                                          \
    { 8, 1, 0, NULL, 0, AL_CI_LEVEL, AL_CI_BOOTSTRAP, AL_CI_SEED }
al_attr_opts al_attr_opts_defaults(void);
/* 0 if the numbers are in range, else −1 with e naming the limits. */
int al_attr_opts_check(const al_attr_opts *o, al_err *e);

typedef enum { AL_ATTR_DIRECT, AL_ATTR_HEAD, AL_ATTR_VIRTUAL } al_attr_term_kind;

typedef struct al_attr_result {
    int L, H, N, T; /* T = the task's padded length */
    int n_items, logit_diff; /* the task's */
    double metric; /* mean metric logit over items (the model's) */
    int centred; /* o->center_unembed: log-prob items measured against the
                              * mean logit */
    double loss; /* mean item loss −log p(answer) (= lens_loss[L]) */
    /* direct logit attribution */
    int n_comp; /* al_attr_n_comp: 2 + L·H (plain model), 3 + L·H + L */
    double *dla; /* (n_comp) mean contribution over items */
    double *dla_pos; /* (n_comp, T) mean over the items at pos; NaN where none */
    int *pos_items; /* (T) items at each position */
    double *item_metric; /* (n_items) the model's metric logit at each item */
    double *item_dla; /* (n_items, n_comp) */
    /* path expansion (n_terms = 0 and NULL arrays when o->paths is 0) */
    int n_terms; /* al_attr_n_terms(L, H) */
    double *term_value; /* (n_terms) mean contribution to the metric logit */
    double *term_dloss; /* (n_terms) Δ mean item loss with the term removed */
    double *item_term; /* (n_items, n_terms) contribution at each item */
    double kind_value[3]; /* per al_attr_term_kind: the sum of its terms' values */
    double kind_dloss[3]; /* Δ mean item loss with all terms of the kind removed at
                              * once (0 when n_terms is 0) */
    /* logit lens */
    double *lens_loss; /* (L+1) mean item loss of x_l W_U */
    double *lens_acc; /* (L+1) top-1 accuracy */
    double seconds; /* wall time */
    al_warnings warn; /* pair tasks (not "data"): the gap check of the task's two
                              * unpatched runs (al_patch_gap); else empty */
    /* how sure the means over items are: the items of one sequence (pair)
     * are resampled together (al_boot_group_means); ci[0] the metric,
     * ci[1 + k] dla[k], ci[1 + n_comp + k] term_value[k]; over ci_n
     * sequences at ci_level, ci_boot resamples from ci_seed */
    al_interval *ci;
    double ci_level;
    int ci_boot, ci_n;
    uint64_t ci_seed;
} al_attr_result;

/* All three analyses on task t's clean sequences. −1 (nothing assigned):
 * bad options, paths on a model with more than AL_ATTR_MAX_TERMS terms, a task that does
 * not fit m (ids, lengths, an item outside its pair), no items, out of
 * memory, interrupted (o->stop). */
int al_attribute_run(al_model *m, const al_pairs *t, const al_attr_opts *o, al_attr_result *r,
                     al_err *e);
void al_attr_result_free(al_attr_result *r);

/* The path terms' logits of one sequence tokens (T ids, T <= n_ctx) at
 * position pos: out gets n_terms rows of d_vocab floats, term order as
 * above, computed exactly as al_attribute_run computes them; their sum
 * is the model's logits row at pos. Runs one forward (m's activations
 * are overwritten). 0, or −1 with e (more than AL_ATTR_MAX_TERMS terms,
 * bad ids, pos outside 0..T−1, out of memory). */
int al_attr_path_logits(al_model *m, const int *tokens, int T, int pos, float *out, al_err *e);

/* Bytes a run over N sequences of T tokens holding n_items items
 * allocates beyond the model's weights (membudget.h): the task itself
 * (when it is made from a token file), each item's metric, components and
 * path terms with the intervals' copy of them, a batch's forward and the
 * path expansion's logits. A command refuses before its run begins (and
 * before it makes a --data task) when they cannot fit. */
double al_attr_bytes(const al_config *c, int N, int T, double n_items, const al_attr_opts *o);

/* The most path terms a run takes (4 layers × 8 heads have 418; 16 × 16
 * have 30978): beyond it the per-item table alone would not fit. */
#define AL_ATTR_MAX_TERMS 1000000
/* Number of path terms of an L-layer, H-head model: 1 + L·H + H²·L(L−1)/2,
 * plus 1 (the remainder) from 3 layers; 0 when L or H < 1 or above
 * AL_ATTR_MAX_TERMS. */
int al_attr_n_terms(int L, int H);
/* Index of the virtual head from sender s = l0·H + h0 (s < l1·H) into
 * head l1.h1 (no range check). */
int al_attr_virtual_index(int L, int H, int s, int l1, int h1);
/* Kind of term k (0 <= k < al_attr_n_terms(L, H)), and its heads: layer,
 * head = the head whose output it is (virtual: the receiver l1.h1), src =
 * the virtual head's sender s = l0·H + h0; −1 where there is none (the
 * direct term; the remainder, a virtual term with all three −1). */
al_attr_term_kind al_attr_term_heads(int L, int H, int k, int *layer, int *head, int *src);
/* Kind of term k, and its name into buf: "direct", "l.h" (the head's
 * embed+pos path), "l0.h0>l1.h1" or "chains>=3"; returns buf. */
al_attr_term_kind al_attr_term_kind_of(int L, int H, int k);
const char *al_attr_term_name(int L, int H, int k, char *buf, size_t cap);
/* Components of a model of config c: 2 + L·H for the plain model; with
 * LayerNorm or biases 3 + L·H + L (each layer's b_O, the constant). */
int al_attr_n_comp(const al_config *c);
/* Name of component c of an L-layer, H-head model: "embed", "pos",
 * "l.h", "b_O_l" (no dot, so a LIKE '%.%' on names still picks the
 * heads) or "const"; returns buf. */
const char *al_attr_comp_name(int L, int H, int c, char *buf, size_t cap);
/* The sentences a run on a model of config c records as notes (at most
 * 2, into notes; each under AL_WARN_LEN): the frozen LayerNorm scales
 * (with LayerNorm) and where the biases go (LayerNorm or biases).
 * Returns how many (0 for the plain model). */
int al_attr_notes(const al_config *c, const char *notes[2]);

#endif
