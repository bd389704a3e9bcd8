/* sae_train.h -- training a sparse autoencoder (sae.h) on activations
 * streamed from a model over a token file, and its evaluation.
 *
 * Why: the SAE trainer mirrors the model trainer (train.h): plain options
 * in, a directory out, checkpoints that resume bit for bit (with the same
 * thread count), crash-safe writes, a stop flag that saves, a progress
 * line on stderr. It knows nothing of flags, databases or signals.
 *
 * Activations: windows of T = n_ctx tokens at offsets drawn by the
 * data-order RNG from the token file (its tail val_fraction held out for
 * evaluation unless a val file is given), run through the model with a
 * hook at the site -- Z of layer L (each head's z, flattened head-major:
 * head h, dimension e at h·d_head + e, as TransformerLens's hook_z) or
 * RESID_PRE of layer L -- that copies the activation and stops the
 * forward there (the hook fails the forward on purpose, so the layers
 * after L and the unembedding are never computed). A buffer of
 * buffer_batches SAE batches is filled this way, multiplied by the scale
 * factor, and shuffled with the same RNG, so one batch mixes many windows.
 *
 * Normalisation ("expected_average_only_in"): one factor s with
 * E‖s·x‖² = d_in, estimated before training on norm_batches batches drawn
 * with an RNG of their own (seed-derived), saved with the weights; b_dec
 * starts at the mean of that sample (scaled) when b_dec_mean is set.
 *
 * Checkpoints are taken only at buffer boundaries (the buffer is then
 * empty, so the RNG, the step and the weights say everything): every
 * ckpt_every steps (rounded up to the next boundary), at a stop request
 * or stop_at (also at the next boundary: at most buffer_batches steps
 * later), and at the end. OUT/sae_weights.safetensors and OUT/cfg.json
 * (sae_io.h) are written first, then OUT/sae_resume.safetensors, which
 * holds the parameters, Adam's moments and the dead-latent counters, with
 * the step, RNG, scale and the options that shape the run in its
 * metadata: one file, written to a temporary name and renamed, so a crash
 * leaves the old checkpoint or the new one, and a resume file always has
 * the SAELens pair beside it (of its step, or of the next when a crash
 * came between the two writes). Every checkpoint before the last step is
 * preceded by the partial mark OUT/sae_partial.json (sae_io.h), which the
 * last step's checkpoint removes: a folder whose training stopped on the
 * way (a stop, stop_at, a kill, a crash, a non-finite loss) is marked
 * partly trained, and al_sae_load says so. */
#ifndef ATTNLAB_SAE_TRAIN_H
#define ATTNLAB_SAE_TRAIN_H

#include <signal.h>
#include <stdint.h>

#include "attnlab/stats.h"
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/sae.h"
#include "attnlab/sae_io.h"
#include "attnlab/util.h"

#define AL_SAE_RESUME_FILE "sae_resume.safetensors"

/* An activation source instead of a model (tests, synthetic data): fill
 * x (n, d_in) drawing randomness only from rng. 0, or −1 with e. */
typedef int (*al_sae_source_fn)(void *ctx, float *x, int n, al_rng *rng, al_err *e);

/* Options. Strings are borrowed until al_sae_trainer_free. */
typedef struct al_sae_train_opts {
    const char *model; /* model directory (required unless source) */
    const char *data; /* token file (required unless source) */
    const char *val; /* held-out token file; NULL: the tail val_fraction of data */
    const char *out; /* SAE directory (required) */
    int site; /* AL_SAE_SITE_Z (default) or AL_SAE_SITE_RESID_PRE */
    int layer; /* the site's layer (0) */
    int expansion; /* d_sae = expansion × d_in (8) */
    int d_sae; /* > 0: this d_sae instead (0) */
    int arch; /* AL_SAE_TOPK (default) or AL_SAE_L1 */
    int k; /* TopK k (32, capped at d_sae) */
    int k_aux; /* −1: d_in/2 (−1) */
    double aux_coeff; /* 1/32 */
    double l1_coeff; /* 5 */
    long dead_tokens; /* 10^6 */
    uint64_t seed; /* initialisation and data order (1) */
    long steps; /* optimizer steps (2000) */
    int batch; /* activations per step (4096) */
    int buffer_batches; /* batches per shuffle buffer (4) */
    double lr; /* Adam's peak learning rate (1e-3) */
    int warmup; /* linear warm-up steps (50) */
    double decay_frac; /* share of the steps with a linear decay to 0 at the end (0.2) */
    double beta1, beta2, eps; /* 0.9, 0.999, 1e-8 */
    int normalize; /* 1: scale inputs to E‖x‖² = d_in (1) */
    int norm_batches; /* batches of the scale estimate (4) */
    int b_dec_mean; /* 1: b_dec starts at the sample mean (1) */
    double val_fraction; /* tail of the token file held out (0.05) */
    int eval_windows; /* held-out windows of the evaluation (64) */
    int ckpt_every; /* steps between checkpoints; 0: only at the end (500) */
    int threads; /* 0: OMP_NUM_THREADS or all cores */
    long stop_at; /* save and stop at the first boundary >= this step; 0 never */
    int force; /* replace an SAE already in out (0) */
    int resume; /* continue the checkpoint in out (0) */
    volatile sig_atomic_t *stop; /* polled every step; non-zero: save and stop */
    /* instead of model and data (then eval has no CE terms): */
    al_sae_source_fn source;
    void *source_ctx;
    int source_d_in;
} al_sae_train_opts;

al_sae_train_opts al_sae_train_opts_defaults(void);

/* Evaluation on held-out activations (normalised space; the ratios do
 * not depend on the scale). */
typedef struct al_sae_eval {
    long n; /* activations */
    double l0; /* mean active latents per activation */
    double mse; /* mean ‖x − x̂‖² */
    double fve; /* 1 − Σ‖x − x̂‖² / Σ‖x − mean x‖² */
    double dead_frac; /* latents that fired on none of them */
    double dense_frac; /* latents that fired on more than 10% of them */
    /* with a model (NaN otherwise): the mean next-token loss with the
     * site as it is, with it replaced by the reconstruction (divided by
     * the scale again), and zero-ablated; recovered = (zero − sae) /
     * (zero − clean) */
    double ce_clean, ce_sae, ce_zero, ce_recovered;
    /* how sure they are, over the held-out windows (al_sae_evaluate only;
     * NaN otherwise), at AL_CI_LEVEL with AL_CI_BOOTSTRAP resamples from
     * AL_CI_SEED, windows resampled whole: each is a ratio of sums over
     * the windows (ce_*: Σ losses / Σ positions; ce_recovered: Σ (zero −
     * sae) / Σ (zero − clean); mse, l0: / Σ activations; fve: 1 − Σ SSE /
     * Σ SST, SST about the mean of all of them), so al_boot_ratio. The
     * dead and dense fractions count latents, not items: none. ci_n: the
     * windows. */
    al_interval ci_l0, ci_mse, ci_fve, ci_ce_clean, ci_ce_sae, ci_ce_zero, ci_ce_recovered;
    int ci_n;
} al_sae_eval;

typedef struct al_sae_trainer al_sae_trainer;

/* Check the options, load the model and data (or take the source),
 * check the site, then either build a new SAE (refusing an out that holds
 * one unless force), estimate the scale, and save the step-0 checkpoint,
 * or (resume) load out's checkpoint, refusing one made with other
 * options; options whose allocations exceed the memory budget
 * (al_sae_train_bytes) are refused first. Sets the thread count. Nothing is written (not even out's
 * directory) when anything is refused. 0 with *out, or −1 with e and
 * *out NULL. */
int al_sae_trainer_init(al_sae_trainer **out, const al_sae_train_opts *o, al_err *e);
/* Bytes a trainer of options o allocates at most, from the options, the
 * site's width d_in and the model's config mc (NULL with a source): the
 * SAE (al_sae_bytes), Adam, the shuffle buffer, the scale's sample, the
 * model's copy and its activations. al_sae_trainer_init refuses, before
 * it allocates or writes anything, when they exceed the memory budget
 * (membudget.h); a caller names its own options the same way. */
double al_sae_train_bytes(const al_sae_train_opts *o, int d_in, const al_config *mc);
/* Train to opts.steps (or a stop): progress line, checkpoints. 0
 * (*stopped 1 if stopped), or −1 with e (a non-finite loss names the step
 * and leaves the last checkpoint as it was). */
int al_sae_trainer_run(al_sae_trainer *t, int *stopped, al_err *e);
/* Evaluate the current SAE on the held-out windows (or, with a source,
 * on eval_windows × 256 activations drawn with a fixed RNG). Draws
 * nothing from the training RNG. 0, or −1 with e. */
int al_sae_trainer_eval(al_sae_trainer *t, al_sae_eval *ev, al_err *e);
/* After a run with this trainer failed with e: a new SAE whose folder
 * holds no trained step has what this trainer wrote removed (its folder
 * too when the trainer made it), so a failure leaves nothing half-made;
 * otherwise e gains where the saved SAE is. Returns -1. */
int al_sae_trainer_failed(al_sae_trainer *t, al_err *e);
void al_sae_trainer_free(al_sae_trainer *t);

const al_sae *al_sae_trainer_sae(const al_sae_trainer *t);
const al_sae_meta *al_sae_trainer_meta(const al_sae_trainer *t);
long al_sae_trainer_step(const al_sae_trainer *t);
/* Activations per second of the last al_sae_trainer_run (model forward
 * included). */
double al_sae_trainer_rate(const al_sae_trainer *t);

/* The evaluation for any SAE and model: n_windows fixed windows of T
 * tokens evenly spread over val (al_batch_fixed), in forwards of at most
 * bm windows. s is used for encoding (its activations are scratch). 0, or
 * −1 with e. */
int al_sae_evaluate(al_model *m, al_sae *s, const al_sae_meta *meta, const al_tokens *val,
                    int n_windows, int T, int bm, al_sae_eval *ev, al_err *e);
/* The metrics without a model (ce_* NaN) on n normalised activations x. */
int al_sae_evaluate_acts(al_sae *s, const float *x, long n, al_sae_eval *ev, al_err *e);

#endif
