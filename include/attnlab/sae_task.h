/* sae_task.h -- which features of a z-site SAE carry a pair task
 * (pairs.h): attribution patching at the SAE's latents (Marks et al.
 * 2024, "Sparse Feature Circuits"; Syed et al. 2023).
 *
 * Why: sae_features.h says what each feature does on text and on the
 * random-token probe; a circuit question (which features copy a renamed
 * variable?) asks what each feature does for one behaviour, measured
 * the way path patching and ACDC measure heads: clean against corrupted
 * runs of the same pairs.
 *
 * Definitions (site: the SAE's layer's z, all heads, flattened
 * head-major; s the SAE's scale; f(z) its code of z·s; x̂ its
 * reconstruction; W_dec,i feature i's decoder row, so that z = (f·W_dec
 * + b_dec)/s + ε with ε the SAE's error). The base run is the corrupted
 * run when denoising and the clean run when noising (patch.h), the
 * source the other; f, f' and ε, ε' are the base's and the source's at
 * every position t of every pair; g[t] = ∂M/∂z[t] at the base run (M the
 * task's metric, summed over its items; through the head gates).
 *   feature i   Σ_t (f'_i[t] − f_i[t]) · (W_dec,i · g[t]) / s: the
 *               first-order change of M when feature i alone takes the
 *               source's values at every position, the rest of z held
 *   error       Σ_t (ε'[t] − ε[t]) · g[t]: the part of z the SAE misses
 *   site        Σ_t (z'[t] − z[t]) · g[t]: the whole layer's z (the sum
 *               of attrpatch.h's head estimates over the layer's heads)
 * so that the features' estimates and the error's sum to the site's
 * exactly (b_dec is the same in both runs). Each is normalised as
 * patch.h's effect (denoising Δ/(M_clean − M_corr), noising
 * −Δ/(M_clean − M_corr)): a feature that carries the whole behaviour
 * reads 1 in either direction. Where M is linear in z (a logit
 * difference read from the last layer of a model without LayerNorm) the
 * estimate is the actual patch; elsewhere the attention softmax and
 * LayerNorm bend it. Each has a standard error and a bootstrap interval
 * over the pairs (al_boot_ratio: a pair's sum and its clean − corrupted
 * metric resampled together).
 *   act_clean_i, act_corr_i: the mean f_i at the items' positions (where
 *               the answer is predicted) in the clean and corrupted runs.
 *
 * Reproducibility: sums in double in a fixed order (per pair, then over
 * pairs); the model's products are the engine's (bitwise at one thread
 * count). */
#ifndef ATTNLAB_SAE_TASK_H
#define ATTNLAB_SAE_TASK_H

#include <signal.h>
#include <stdint.h>

#include "attnlab/gap.h"
#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/patch.h"
#include "attnlab/sae.h"
#include "attnlab/sae_io.h"
#include "attnlab/stats.h"
#include "attnlab/util.h"

typedef struct al_sae_task_opts {
    const char *direction; /* "denoise" (default) or "noise" */
    int batch; /* pairs per forward (8), 1..100000 */
    double ci_level; /* (AL_CI_LEVEL) in (0, 1) */
    int bootstrap; /* resamples of the pairs (AL_CI_BOOTSTRAP), 0..100000 */
    uint64_t ci_seed; /* (AL_CI_SEED) */
    int progress; /* a progress line on stderr (0) */
    volatile sig_atomic_t *stop; /* non-NULL and set: stop, −1 "interrupted" */
} al_sae_task_opts;
#define AL_SAE_TASK_OPTS_INIT                                                                      \
    { "denoise", 8, AL_CI_LEVEL, AL_CI_BOOTSTRAP, AL_CI_SEED, 0, NULL }
/* 0, or −1 with e naming the option out of range. */
int al_sae_task_opts_check(const al_sae_task_opts *o, al_err *e);

typedef struct al_sae_task_result {
    int d_sae, layer, N, n_items;
    al_patch_direction direction;
    double m_clean, m_corr; /* the metric, mean over the items */
    /* (d_sae + 2) each, one allocation: the features', then the error's
     * (index d_sae), then the site's (d_sae + 1) */
    double *effect;
    al_interval *ci;
    double *act_clean, *act_corr; /* (d_sae) */
    int n_moved; /* features whose estimate is not 0 (they differ between
                  * the runs somewhere the metric reads) */
    double ci_level;
    int ci_boot;
    uint64_t ci_seed;
    double seconds;
    al_warnings warn; /* the gap check of the clean and corrupted runs (gap.h):
                       * every estimate divides by that gap */
} al_sae_task_result;
#define AL_SAE_TASK_ERROR(r) ((r)->d_sae)
#define AL_SAE_TASK_SITE(r) ((r)->d_sae + 1)

/* Bytes al_sae_task_run takes beyond the model's own buffers, for N
 * pairs in batches of B of T tokens (membudget.h): for refusing before
 * a run begins. */
double al_sae_task_bytes(const al_config *c, const al_sae_cfg *sc, int N, int B, int T,
                         int bootstrap);
/* The features of s (meta: site, layer and scale; a z-site SAE that fits
 * m) on task t. Uses the model as it is (gates included; no hooks may be
 * registered). 0 with r filled (al_sae_task_result_free), or −1 with e
 * and r zeroed: bad options, a residual-stream SAE, an SAE that does not
 * fit m, a task that does not fit m, a model with hooks, clean and
 * corrupted metrics equal (nothing to normalise by), out of memory,
 * stopped. */
int al_sae_task_run(al_model *m, al_sae *s, const al_sae_meta *meta, const al_pairs *t,
                    const al_sae_task_opts *o, al_sae_task_result *r, al_err *e);
/* Frees and zeroes r; harmless on a zeroed struct. */
void al_sae_task_result_free(al_sae_task_result *r);
/* Whether the estimates of an SAE on layer `layer` of a model of config c
 * are the actual patches (1: the metric of t is a logit difference, the
 * layer is the last and the model has no LayerNorm, so M is linear in the
 * layer's z) or first order only (0, with why in buf: a note a command
 * stores with the run). */
int al_sae_task_exact(const al_config *c, int layer, const al_pairs *t, char *buf, size_t cap);

#endif
