/* ablate.h -- head ablation, pruning and head masks (docs/design.md §5).
 *
 * Everything goes through the engine's head gates and hooks
 * (model.h): weights are never copied or edited. Ablating a set of heads
 * with method
 *   zero      sets their gates to 0;
 *   mean      replaces each one's z (pre-W_O head output) by its mean over
 *             the evaluation set's sequences at the same position;
 *   resample  replaces it by the clean z of another sequence of the same
 *             batch (row b takes row b+1 mod B), same positions.
 * Gates already 0 (a mask) stay 0: ablation is measured on top of them.
 *
 * An evaluation set is a list of sequences with, per position, selector
 * bits saying which metrics the position counts in: AL_SEL_LOSS (every
 * position with a target), AL_SEL_COPY (copy positions of natural text,
 * scores.h), AL_SEL_PROBE (the probe's predictable second-repeat
 * positions R+1..2R−1). al_abl_prepare runs the clean model (the gates
 * in force) once and keeps per-position losses and the mean z; then
 * al_abl_run costs one forward pass per ablated set and batch (+ one
 * clean pass per batch for resample), so a sweep over single heads costs
 * about one forward per head.
 *
 * Pruning removes heads one at a time (gate 0), each step the one of
 * least importance estimated on one set (`est`) under the current mask;
 * the loss after each removal is measured on another set (`eval`).
 * Importance: `ablation` = Δloss on est when the head is zero-ablated;
 * `gradient` = Michel et al. 2019, I_h = E_x |∂L(x)/∂g_h| over the
 * sequences x of est, ℓ2-normalised over the remaining heads of each
 * layer (per sequence, not per batch: at a training optimum the batch
 * gradient ∂L/∂g_h = ⟨W_O, ∂L/∂W_O⟩ is ≈ 0, the per-sequence ones are
 * not); `random` = a seeded uniform draw. Budget F >= 0: a removal that
 * makes the eval loss exceed (1 + F) · base loss (all heads on) is
 * recorded as the last step but not applied to the final mask; F < 0
 * prunes every head.
 *
 * A head mask file (JSON) lists the heads that are off:
 *   {"attnlab_mask": 1, "n_layers": 2, "n_heads": 8, "off": ["0.3", "1.4"],
 *    "method": "ablation", "budget": 0.1, "seed": 1, "base_loss": 2.1,
 *    "loss": 2.2, "heads_left": 14}
 * n_layers, n_heads and off are required and must match the model; the
 * rest is informational (null allowed); other keys are refused. */
#ifndef ATTNLAB_ABLATE_H
#define ATTNLAB_ABLATE_H

#include <signal.h>
#include <stdint.h>
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/scores.h"
#include "attnlab/util.h"

enum { AL_SEL_LOSS = 1, AL_SEL_COPY = 2, AL_SEL_PROBE = 4 };
#define AL_SEL_GROUPS 3 /* bit g of sel <-> group g: loss, copy, probe */

typedef struct al_abl_set {
    int rows, T, B; /* rows sequences of T tokens, in batches of B */
    int *inputs, *targets; /* (rows, T); targets -1 = none */
    unsigned char *sel; /* (rows, T) AL_SEL_* bits */
    /* filled by al_abl_prepare, for the gates in force then */
    int L, H, D;
    float *clean; /* (rows, T) clean per-position losses */
    float *zmean; /* (L, H, T, D) mean z over rows per position */
    double clean_mean[AL_SEL_GROUPS]; /* mean clean loss per group; NaN if empty */
    long count[AL_SEL_GROUPS];
    /* non-NULL and set (Ctrl-C, stop.h): the passes over this set stop
     * between batches, −1 "interrupted" */
    volatile sig_atomic_t *stop;
} al_abl_set;

/* A set from arrays (copied). sel NULL: AL_SEL_LOSS where target >= 0. */
int al_abl_set_from(al_abl_set *s, const int *inputs, const int *targets, const unsigned char *sel,
                    int rows, int T, int B, al_err *e);
/* Validation batches first..first+count-1 of al_batch_fixed(d, B, T, k,
 * n_batches): LOSS everywhere, COPY at copy positions. Ids must be below
 * d_vocab. */
int al_abl_set_text(al_abl_set *s, const al_tokens *d, int T, int B, int first, int count,
                    int n_batches, int d_vocab, al_err *e);
/* The probe's sequences in batches of B: LOSS everywhere, PROBE on the
 * second repeat (positions R+1..2R−1, as icl_gain's second half). */
int al_abl_set_probe(al_abl_set *s, const al_probe *p, int B, al_err *e);
void al_abl_set_free(al_abl_set *s);

/* Clean pass with the model's current gates (replacements must be off). */
int al_abl_prepare(al_model *m, al_abl_set *s, al_err *e);

typedef enum { AL_ABL_ZERO, AL_ABL_MEAN, AL_ABL_RESAMPLE } al_abl_method;
const char *al_abl_method_name(al_abl_method m);
int al_abl_method_parse(const char *s, al_abl_method *out, al_err *e);

typedef struct al_abl_out {
    double loss[AL_SEL_GROUPS]; /* mean ablated loss per group (NaN if empty) */
    double delta[AL_SEL_GROUPS]; /* mean of ablated − clean loss per group */
} al_abl_out;

/* sets (n_sets, L*H): nonzero = ablate that head (index l*H + h). s must
 * be prepared with the same gates. Gates and replacements are restored.
 * rows (NULL: not kept): (n_sets, s->rows, AL_SEL_GROUPS) each
 * sequence's sum of ablated − clean loss over its positions of each
 * group, the per-item values the intervals resample (out's delta is
 * their sum over the sequences over the group's count).
 * progress != 0: a progress line on stderr. */
int al_abl_run(al_model *m, const al_abl_set *s, al_abl_method method, const unsigned char *sets,
               int n_sets, al_abl_out *out, double *rows, int progress, al_err *e);
/* n[r] (s->rows) = the positions of sequence r in group g (0..2): the
 * denominators of al_abl_run's per-sequence sums. */
void al_abl_row_counts(const al_abl_set *s, int g, double *n);

/* docs/design.md §5 metrics of each set: loss and delta_loss (LOSS group) and
 * delta_copy from text, delta_probe from probe; either may be NULL
 * (its metrics NaN). Both must be prepared. */
typedef struct al_abl_metrics {
    double loss, delta_loss, delta_copy, delta_probe;
} al_abl_metrics;
/* text_rows, probe_rows (either may be NULL): al_abl_run's per-sequence
 * sums on each set. */
int al_abl_evaluate(al_model *m, const al_abl_set *text, const al_abl_set *probe,
                    al_abl_method method, const unsigned char *sets, int n_sets,
                    al_abl_metrics *out, double *text_rows, double *probe_rows, int progress,
                    al_err *e);

/* ---- head lists and masks ---- */

/* "0.3,1.4" (layer.head, comma separated) -> sel[l*H+h] = 1 (sel is
 * zeroed first). Refuses bad syntax, out-of-range and repeated heads. */
int al_heads_parse(const char *s, int L, int H, unsigned char *sel, al_err *e);
/* "0.3,1.4" of the heads i with (sel[i] != 0) == want; "" if none.
 * Returns the length it needed (truncated to cap like snprintf). */
size_t al_heads_format(const unsigned char *sel, int L, int H, int want, char *buf, size_t cap);

typedef struct al_mask_info {
    const char *method; /* NULL: omitted */
    double budget, base_loss, loss; /* NaN: null */
    uint64_t seed;
    int has_seed;
} al_mask_info;
/* Read and validate a mask file for a model of config c; off (L*H) = 1
 * for heads listed as off. */
int al_mask_load(const char *path, const al_config *c, unsigned char *off, al_err *e);
/* A mask file's text, ending in a newline (info may be NULL): malloc'd,
 * or NULL with e. */
char *al_mask_text(const al_config *c, const unsigned char *off, const al_mask_info *info,
                   al_err *e);
/* Write one atomically (info may be NULL). */
int al_mask_save(const char *path, const al_config *c, const unsigned char *off,
                 const al_mask_info *info, al_err *e);
/* Gates: 0 where off, 1 elsewhere; replacements cleared. */
void al_mask_apply(al_model *m, const unsigned char *off);

/* ---- pruning ---- */

typedef enum { AL_PRUNE_ABLATION, AL_PRUNE_GRADIENT, AL_PRUNE_RANDOM } al_prune_method;
const char *al_prune_method_name(al_prune_method m);
int al_prune_method_parse(const char *s, al_prune_method *out, al_err *e);

typedef struct al_prune_step {
    int step; /* 0 = nothing removed yet */
    int layer, head; /* head removed at this step (-1 at step 0) */
    int heads_left;
    int over_budget; /* this removal broke the budget (not in the mask) */
    double importance; /* of the removed head (NaN at step 0) */
    double loss, delta_loss; /* eval loss after the step, minus base loss */
} al_prune_step;

typedef struct al_prune_result {
    int n_steps; /* rows of steps */
    al_prune_step *steps; /* (L*H + 1) */
    unsigned char *removal_off; /* (n_steps, L*H): heads off after each step */
    unsigned char *off; /* (L*H) final mask: heads removed within budget */
    double *importance0; /* (L*H) every head's importance at step 1 (all on) */
    double base_loss;
    int stopped_by_budget;
} al_prune_result;

/* Prune from all heads on (gates reset first and again at the end). est
 * and eval need not be prepared. */
int al_prune(al_model *m, al_abl_set *est, al_abl_set *eval, al_prune_method method, double budget,
             uint64_t seed, int progress, al_prune_result *out, al_err *e);
void al_prune_result_free(al_prune_result *r);

/* imp (L*H) = mean over the rows x of s of |∂L(x)/∂g_h|, L(x) the mean
 * loss of sequence x, with the gates in force: one forward + backward
 * per sequence gives every head's value. */
int al_gate_importance(al_model *m, const al_abl_set *s, double *imp, al_err *e);
/* Divide each layer's importances by their ℓ2 norm over the heads not
 * off (off may be NULL); a zero norm leaves them 0. */
void al_importance_normalise(double *imp, const unsigned char *off, int L, int H);

#endif
