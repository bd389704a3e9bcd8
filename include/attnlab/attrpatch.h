/* attrpatch.h -- attribution patching (Nanda 2023) and edge attribution
 * patching (Syed et al. 2023): the first-order estimate of every
 * activation and path patch of patch.h from one forward and one backward
 * pass per batch, and, measured beside it, how well the estimate agrees
 * with actual patching on the same task (docs/design.md §5).
 *
 * The patched run ("base") is the corrupted run when denoising and the
 * clean run when noising, as in patch.h; the source is the other run.
 * For an activation a of the base run and its source value a',
 *
 *   M(patched) − M(base) ≈ (a' − a) · ∂M/∂a   (gradient at the base run)
 *
 * and the estimate is normalised exactly as patch.h's effect (denoising:
 * Δ / (M_clean − M_corr); noising: −Δ / (M_clean − M_corr)), so it is
 * read on the same scale as al_patch_result's effect. Noising is the
 * formula of Syed et al., (corrupted − clean) · ∂M/∂a at the clean run.
 *
 *   head      head (l, h)'s gated z (W_O's input) at every position:
 *             Σ_t (zg'[t] − zg[t]) · ∂M/∂zg[t]; rows L, cols H
 *   head_pos  the same at one position t;        rows L·H, cols T
 *   edges     path patching's sender → receiver (patch.h, same layout and
 *             NaN where no channel exists): Σ_t Δsender[t] · ∂M/∂(the
 *             receiver's input)[t], where the receiver's input is
 *             head l1.h's residual as its W_Q, W_K or W_V reads it
 *             (∂M/∂q_h · W_Q[l1,h]ᵀ, ...; the gradient flows through
 *             every layer after l1, as path patching recomputes them) or
 *             the final residual (direct); every other head's input is
 *             held, as in path patching, so this is the gradient through
 *             that one receiver only, for a model of any depth up to
 *             AL_PATHS_MAX_LAYERS.
 * LayerNorm and biases: the receiver's input is then the head's own copy
 * of the residual before ln1 (docs/hooks.md's hook_q_input, k_input,
 * v_input, which ln1 normalises alone), so its gradient is ∂M/∂q_h ·
 * W_Q[l1,h]ᵀ taken on through ln1's backward at that layer's rows, mean
 * and scale; the direct receiver's goes through ln_final's. Each estimate
 * is still the exact first-order term (the derivative of M along the
 * sender's difference added to that one input). Biases are the same in
 * both runs and carry no difference.
 * M is the task's metric (pairs.h): its gradient at an item is
 * onehot(answer) − softmax for log-prob items and onehot(answer) −
 * onehot(wrong) for logit differences, so with logit differences the
 * estimate is exact (to float rounding) wherever M is linear in the
 * patched activation: every direct edge, and each head of the last
 * layer, on a model without LayerNorm (ln_final's scale bends those too
 * where there is one). Elsewhere
 * the attention softmax bends it; how much is what the agreement
 * measures.
 *
 * Agreement (o->compare): al_patch_run (components head and head_pos) and
 * al_paths_run in the same direction on the same task; for heads,
 * head × position and edges: Pearson and Spearman over the configurations
 * where both are finite (edges leave out the pos sender, whose paths are
 * 0 in both: the two runs share positions), and how many of the five
 * largest in |effect| are the same five (on LayerNorm and bias models
 * too: path patching takes them).
 *
 * Ownership and failure contract as the analyses of analyses.h: 0 with
 * *r filled (al_attrpatch_result_free), or −1 with e set and *r zeroed;
 * m's gates and hooks are as before on return. */
#ifndef ATTNLAB_ATTRPATCH_H
#define ATTNLAB_ATTRPATCH_H

#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/patch.h"
#include "attnlab/util.h"

enum { AL_AP_HEAD, AL_AP_HEAD_POS, AL_AP_EDGE, AL_AP_NGRID };

typedef struct al_agreement {
    int n; /* configurations compared (both finite) */
    double pearson; /* NaN when undefined (n < 2, a constant side) */
    double spearman;
    int top5; /* of the five largest |effect| on each side, how many
                      * are in both (n < 5: of the n) */
} al_agreement;

typedef struct al_attrpatch_result {
    int L, H, N, T;
    al_patch_direction direction;
    double m_clean, m_corr;
    /* estimates, normalised as patch.h's effect; one allocation */
    double *head; /* (L, H) */
    double *head_pos; /* (L·H, T) */
    double *edge; /* (4·n_senders·W) as al_paths_result's effect (W =
                       * al_paths_width(L, H)) */
    int n_senders, n_recv, n_edge;
    double seconds; /* the attribution itself */
    /* when compared (o->compare): actual patching, same layouts */
    int compared;
    double *act_head, *act_head_pos, *act_edge;
    al_agreement agree[AL_AP_NGRID];
    double seconds_patch; /* the three actual sweeps together */
    /* how sure each head's and edge's estimate is over the pairs
     * (al_boot_ratio: each pair's first-order sum and its clean −
     * corrupted metric, resampled together); one allocation, head_ci (L·H)
     * then edge_ci (as edge; NaN where no path exists). head_pos has none. */
    al_interval *head_ci, *edge_ci;
    double ci_level;
    int ci_boot, ci_n;
    uint64_t ci_seed;
} al_attrpatch_result;

/* Attribution patching of every head, head × position and path edge on
 * task t in o->direction (o->batch, o->progress and o->stop as patch.h;
 * o->component is ignored). compare = 1 also runs the actual patching
 * sweeps and fills the agreement. −1 (nothing assigned): bad options, a
 * model of more than AL_PATHS_MAX_LAYERS layers, a task that does not
 * fit m, no items, out of memory, interrupted. */
int al_attrpatch_run(al_model *m, const al_pairs *t, const al_patch_opts *o, int compare,
                     al_attrpatch_result *r, al_err *e);
void al_attrpatch_result_free(al_attrpatch_result *r);
/* "head", "head_pos" or "edge". */
const char *al_attrpatch_grid_name(int grid);

/* ∂M/∂(everything) of task t's base runs, for tests and the finite
 * difference check: the gradient of the task's metric (mean over items,
 * pairs.h) on the clean (which = 0) or corrupted (1) sequences of pairs
 * [n0, n0 + nb), as al_model_backward_acts fills dx, dzg, dqkv for that
 * batch (any may be NULL); *metric gets M over the batch's items (as
 * their mean). 0, or −1 with e. */
int al_attrpatch_grad(al_model *m, const al_pairs *t, int which, int n0, int nb, double *metric,
                      float *dx, float *dzg, float *dqkv, al_err *e);

/* One batch through the base or source run, for analyses that estimate
 * patches of activations of their own (sae_task.h): pairs [n0, n0 + nb)
 * of t on the clean (which = 0) or corrupted (1) sequences; per_pair (nb)
 * gets each pair's Σ of the metric over its items, and dzg, when
 * non-NULL, ∂(Σ over the batch's items of M)/∂zg (L, nb, T, H, D), as
 * al_model_backward_acts fills it. m's activations (m->z, m->zg, m->x)
 * are then that run's. 0, or −1 with e. */
int al_attrpatch_pairs_run(al_model *m, const al_pairs *t, int which, int n0, int nb,
                           double *per_pair, float *dzg, al_err *e);

#endif
