/* attribute.h -- attribution on a task's clean sequences: direct logit
 * attribution, the exact path expansion of a 1- or 2-layer model with
 * virtual heads (Elhage et al. 2021), and the logit lens. Library only.
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
 * Path terms (1 or 2 layers), index k:
 *   0                       direct: embed + pos straight to W_U
 *   1 + h                   head 0.h (reading embed + pos)
 *   1 + H + h               head 1.h reading embed + pos through its value
 *                           input (2 layers)
 *   1 + 2H + h0·H + h1      virtual head 0.h0 → 1.h1: g·A1 (out_{0,h0} W_V1) W_O1
 *                           (2 layers)
 * Layer 1's value input is x1 = embed + pos + Σ_h0 out_{0,h0}, so each
 * layer-1 head's output splits exactly into its embed+pos part and one
 * part per layer-0 head; the terms' logits add up to the model's logits
 * (whole rows, not only the metric's direction). Per term: its mean
 * contribution to the metric logit, and its importance: the change in
 * mean item loss when that term alone is subtracted from the logits;
 * per kind (direct, head, virtual), the same with all of the kind's terms
 * subtracted together (importances do not add up: the loss is not linear
 * in the logits).
 *
 * Shortformer positions (model.h, AL_POS_SHORTFORMER) never enter the
 * residual stream: x_L = embed + Σ out_{l,h}, so the pos component is
 * exactly 0, "embed + pos" above is embed alone (the direct term, the
 * layer-0 and layer-1 value inputs, the logit lens' x_0), and positions
 * act only through the attention patterns, which are frozen here. The
 * sums are the same identities.
 *
 * Logit lens: the residual stream entering each layer and the final one
 * (x_0 = embed + pos, ..., x_L) through W_U: mean item loss and top-1
 * accuracy (argmax == answer, ties to the lower id); x_L's are the
 * model's own.
 *
 * The run uses m's gates; m's z replacements and patch spec are ignored
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
#include "attnlab/util.h"

typedef struct al_attr_opts {
    int batch;    /* pairs per forward pass (8), 1..100000 */
    int paths;    /* 1 (default): the path expansion too (needs 1 or 2 layers); 0: not */
    int progress; /* 1: a progress line on stderr per batch */
    volatile sig_atomic_t *stop; /* non-NULL and set: stop between batches, −1 "interrupted" */
    /* 1: on items without a wrong token (log-prob tasks) u is W_U[:,answer]
     * less the mean column of W_U, so each contribution leaves out the
     * shift common to every logit, which log p ignores (TransformerLens
     * centres W_U so by default); the metric is then the answer's logit
     * less the mean logit, and the terms still sum to it. 0 (default):
     * the raw column. Logit-difference items are the same either way. */
    int center_unembed;
} al_attr_opts;

#define AL_ATTR_OPTS_INIT {8, 1, 0, NULL, 0}
al_attr_opts al_attr_opts_defaults(void);
/* 0 if the numbers are in range, else −1 with e naming the limits. */
int al_attr_opts_check(const al_attr_opts *o, al_err *e);

typedef enum { AL_ATTR_DIRECT, AL_ATTR_HEAD, AL_ATTR_VIRTUAL } al_attr_term_kind;

typedef struct al_attr_result {
    int L, H, N, T;          /* T = the task's padded length */
    int n_items, logit_diff; /* the task's */
    double metric;           /* mean metric logit over items (the model's) */
    int centred;             /* o->center_unembed: log-prob items measured against the
                              * mean logit */
    double loss;             /* mean item loss −log p(answer) (= lens_loss[L]) */
    /* direct logit attribution */
    int n_comp;              /* 2 + L·H */
    double *dla;             /* (n_comp) mean contribution over items */
    double *dla_pos;         /* (n_comp, T) mean over the items at pos; NaN where none */
    int *pos_items;          /* (T) items at each position */
    double *item_metric;     /* (n_items) the model's metric logit at each item */
    double *item_dla;        /* (n_items, n_comp) */
    /* path expansion (n_terms = 0 and NULL arrays when o->paths is 0) */
    int n_terms;             /* 1 + L·H + (L == 2 ? H·H : 0) */
    double *term_value;      /* (n_terms) mean contribution to the metric logit */
    double *term_dloss;      /* (n_terms) Δ mean item loss with the term removed */
    double *item_term;       /* (n_items, n_terms) contribution at each item */
    double kind_value[3];    /* per al_attr_term_kind: the sum of its terms' values */
    double kind_dloss[3];    /* Δ mean item loss with all terms of the kind removed at
                              * once (0 when n_terms is 0) */
    /* logit lens */
    double *lens_loss;       /* (L+1) mean item loss of x_l W_U */
    double *lens_acc;        /* (L+1) top-1 accuracy */
    double seconds;          /* wall time */
    al_warnings warn;        /* pair tasks (not "data"): the gap check of the task's two
                              * unpatched runs (al_patch_gap); else empty */
} al_attr_result;

/* All three analyses on task t's clean sequences. −1 (nothing assigned):
 * bad options, paths on a model of more than 2 layers, a task that does
 * not fit m (ids, lengths, an item outside its pair), no items, out of
 * memory, interrupted (o->stop). */
int al_attribute_run(al_model *m, const al_pairs *t, const al_attr_opts *o, al_attr_result *r,
                     al_err *e);
void al_attr_result_free(al_attr_result *r);

/* The path terms' logits of one sequence tokens (T ids, T <= n_ctx) at
 * position pos: out gets n_terms rows of d_vocab floats, term order as
 * above, computed exactly as al_attribute_run computes them; their sum
 * is the model's logits row at pos. Runs one forward (m's activations
 * are overwritten). 0, or −1 with e (more than 2 layers, bad ids, pos
 * outside 0..T−1, out of memory). */
int al_attr_path_logits(al_model *m, const int *tokens, int T, int pos, float *out, al_err *e);

/* Number of path terms of an L-layer, H-head model (0 when L > 2). */
int al_attr_n_terms(int L, int H);
/* Kind of term k, and its name into buf: "direct", "0.h", "1.h" (the
 * head's embed+pos path) or "0.h0>1.h1"; returns buf. */
al_attr_term_kind al_attr_term_kind_of(int L, int H, int k);
const char *al_attr_term_name(int L, int H, int k, char *buf, size_t cap);
/* Name of component c: "embed", "pos" or "l.h"; returns buf. */
const char *al_attr_comp_name(int H, int c, char *buf, size_t cap);

#endif
