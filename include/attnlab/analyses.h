/* analyses.h -- the behaviour analyses (scores, ablate, prune) as
 * functions: options in, a result out (docs/design.md §5).
 *
 * Each al_X_run takes a loaded model (its gates already set by any head
 * mask), the data it needs and an options struct, and returns every number
 * the analysis produces in a result struct that owns its memory. They
 * touch no database, no command-line flags and print nothing but the
 * ablation engine's progress line (opts.progress). Storing is the store
 * layer's job (store_analysis.h), printing the command's (src/cli).
 *
 * Contracts common to all three: al_X_opts_defaults() returns the
 * command's defaults (AL_X_OPTS_INIT, for static initialisers); the opts
 * are only read, and their strings must outlive the call. al_X_run
 * returns 0 with *r filled, owned by the caller until al_X_result_free;
 * or -1 with e set and *r zeroed, nothing allocated. al_X_result_free
 * frees what *r owns and zeroes it; it is harmless on a zeroed result.
 *
 * The numbers are those of the pieces in scores.h and ablate.h, called in
 * the same order with the same seeds and batching as the commands always
 * did, so moving the logic here changed no result bit. */
#ifndef ATTNLAB_ANALYSES_H
#define ATTNLAB_ANALYSES_H

#include <stdint.h>
#include "attnlab/ablate.h"
#include "attnlab/data.h"
#include "attnlab/gap.h"
#include "attnlab/model.h"
#include "attnlab/scores.h"
#include "attnlab/stats.h"
#include "attnlab/util.h"

/* ---------------------------------------------------------- scores */

/* Defaults are those of `attnlab scores`. */
typedef struct al_scores_opts {
    int probe_r; /* random tokens per repeat of the probe, >= 2; 0 (the
                          * default): min(50, (n_ctx − 1)/2) (al_probe_r_default) */
    int probe_n; /* probe sequences (64), 1..1000000 */
    uint64_t probe_seed; /* probe seed (1) */
    int batches; /* validation batches (4), 1..100000 */
    int batch; /* sequences per validation batch (8), 1..100000 */
    int progress; /* progress line on stderr (0) */
    const al_probe_src *probe_src; /* what the probe is made of (scores.h;
                          * NULL = random ids over the whole vocabulary; borrowed) */
    double ci_level; /* the intervals' level (AL_CI_LEVEL), in (0, 1) */
    int bootstrap; /* bootstrap resamples of the probe sequences (AL_CI_BOOTSTRAP);
                          * 0: standard errors only, 0..100000 */
    uint64_t ci_seed; /* the resamples' seed (AL_CI_SEED) */
} al_scores_opts;

#define AL_SCORES_OPTS_DEFAULT_N 64 /* probe sequences */
#define AL_SCORES_OPTS_INIT                                                                        \
    { 0, AL_SCORES_OPTS_DEFAULT_N, 1, 4, 8, 0, NULL, AL_CI_LEVEL, AL_CI_BOOTSTRAP, AL_CI_SEED }
/* icl_score closer to 0 than this many standard errors gets a warning */
#define AL_ICL_N_SE 2.0
al_scores_opts al_scores_opts_defaults(void);
/* 0 if the options are in range, else -1 with e naming the limits. */
int al_scores_opts_check(const al_scores_opts *o, al_err *e);

typedef struct al_scores_result {
    int L, H;
    al_probe_scores probe; /* per-head induction, duplicate_token, prev_token, induction_all;
                             * per-layer sums; probe losses */
    unsigned char *off; /* (L*H) the heads off by the mask */
    int n_off;
    /* On validation windows (have_text = 1 only when tokens were given;
     * otherwise the doubles are NaN and the arrays NULL). */
    int have_text, T; /* T: window length */
    double val_loss, val_loss_copy, copy_fraction;
    double icl_early, icl_late, icl_score;
    double icl_se; /* icl_score's standard error over the windows (al_icl_score) */
    al_icl_range rg; /* the early and late position ranges */
    int probe_text; /* 1: the probe's halves were text windows (al_probe) */
    double probe_recur; /* the probe's recurrences (al_probe.recur) */
    double probe_uniform_all, probe_prev_all; /* induction_all's chance and positional
                             * levels on the probe (al_probe) */
    double probe_ceiling; /* induction of an even all-occurrences head (al_probe) */
    al_warnings warn; /* icl_score within AL_ICL_N_SE standard errors of 0 */
    double *copying; /* (L*H) copying_ablation, NaN for heads off */
    double *excess; /* (L*H) copying_ablation_excess, NaN for heads off
                             * or without other positions; inside copying's block */
    al_interval *copying_ci; /* (L*H) copying_ablation's interval over the windows
                             * (al_boot_ratio, Δ sums at copy positions over their
                             * count); NaN for heads off; NULL without text */
    int copying_n; /* the windows they resample */
    /* How sure the probe's numbers are, from its sequences (al_boot_means):
     * ci[k·L·H + i] for score k (induction, duplicate_token, prev_token,
     * induction_all) of head i, then ci[4·L·H] for icl_gain; the level,
     * resamples and seed used; ci_z: the normal quantile of the level
     * Bonferroni-corrected for L·H heads, which the calls "is it an
     * induction (previous-token) head" use (al_scores_call). */
    al_interval *ci;
    double ci_level, ci_z;
    int ci_boot, ci_n;
    uint64_t ci_seed;
} al_scores_result;

/* A head's call on score v with standard error se against threshold thr
 * at the simultaneous z: 1 (yes: v − z·se > thr), 0 (undecided: v > thr
 * but the interval reaches thr; also when se is NaN) or −1 (no: v <= thr). */
int al_scores_call(double v, double se, double z, double thr);

/* The probe scores of m, and with val (not NULL) icl_score and per-head
 * copying_ablation on validation windows of T tokens. bos: the probe's
 * BOS id (-1: none). off (L*H, NULL = none): heads the mask turned off,
 * whose copying scores are NaN. On success *r is filled and owned by the
 * caller (al_scores_result_free); on failure returns -1 with e set and
 * *r empty (nothing to free, freeing is harmless). */
/* Bytes al_scores_run allocates at most for a model of c, windows of T
 * tokens (0: no validation tokens) and options o: for refusing before a
 * run begins (membudget.h). */
double al_scores_bytes(const al_config *c, int T, const al_scores_opts *o);
/* 0 when the probe of R tokens per repeat (2R+1 in all; R 0: its default
 * for n_ctx, al_probe_r_default) fits n_ctx; else −1 with e ("... (lower
 * --probe-r)"). */
int al_probe_fits(int probe_r, int n_ctx, al_err *e);
int al_scores_run(al_model *m, const al_tokens *val, int T, int bos, const unsigned char *off,
                  const al_scores_opts *o, al_scores_result *r, al_err *e);
void al_scores_result_free(al_scores_result *r);

/* ---------------------------------------------------------- ablate */

/* Defaults are those of `attnlab ablate`: each head alone, zero. */
typedef struct al_ablate_opts {
    const char *heads; /* ablate this set together ("0.3,1.4"), or NULL */
    int each; /* every head alone (the default mode) */
    int pairs; /* every head alone and every pair */
    const char *method; /* "zero" (default), "mean" or "resample" */
    int batches, batch; /* validation batches (4) of (8) sequences, 1..100000 */
    int probe_r; /* >= 2; 0 (the default): min(50, (n_ctx − 1)/2) */
    int probe_n; /* (64) 1..1000000 */
    uint64_t probe_seed; /* (1) */
    int progress; /* progress line on stderr (0) */
    const al_probe_src *probe_src; /* as in al_scores_opts (NULL) */
    volatile sig_atomic_t *stop; /* non-NULL and set: stop between batches, −1 "interrupted" */
    double ci_level; /* the intervals' level (AL_CI_LEVEL) */
    int bootstrap; /* resamples of the sequences (AL_CI_BOOTSTRAP); 0: se only */
    uint64_t ci_seed; /* (AL_CI_SEED) */
} al_ablate_opts;

#define AL_ABLATE_OPTS_INIT                                                                        \
    { NULL, 0, 0, "zero", 4, 8, 0, 64, 1, 0, NULL, NULL, AL_CI_LEVEL, AL_CI_BOOTSTRAP, AL_CI_SEED }
al_ablate_opts al_ablate_opts_defaults(void);
/* 0 if the options are consistent and in range (at most one mode, a known
 * method, resample with batch >= 2), else -1 with e set. */
int al_ablate_opts_check(const al_ablate_opts *o, al_err *e);

/* One configuration: a row of table ablations. */
typedef struct al_ablate_config {
    int a, b; /* single: head a, b = -1; pair: heads a < b;
                          * the --heads set: a = b = -1 */
    const char *kind; /* "single", "pair" or "set" (static) */
    int n_heads;
    double loss, delta_loss, delta_copy, delta_probe;
    /* pairs: Δ(pair) − Δ(h1) − Δ(h2) of each metric; NaN otherwise */
    double inter_loss, inter_copy, inter_probe;
    /* how sure each is (AL_ABL_CI_*), over the sequences: each Δ is a
     * sum over positions over their count, so the ratio's interval
     * (al_boot_ratio), the sequences resampled whole; NaN where the
     * metric is */
    al_interval ci[6];
} al_ablate_config;

/* al_ablate_config.ci's order */
enum {
    AL_ABL_CI_LOSS,
    AL_ABL_CI_COPY,
    AL_ABL_CI_PROBE,
    AL_ABL_CI_INTER_LOSS,
    AL_ABL_CI_INTER_COPY,
    AL_ABL_CI_INTER_PROBE
};

typedef struct al_ablate_result {
    int L, H, T;
    al_abl_method method;
    int n; /* configurations */
    al_ablate_config *c; /* (n) */
    unsigned char *sets; /* (n, L*H): 1 = ablated in configuration k */
    double clean_loss; /* validation loss with no head ablated */
    double clean_delta_probe; /* 0, or NaN when the probe has no scored position */
    double seconds_clean; /* one clean pass over text and probe */
    double seconds_ablate; /* every configuration */
    double ci_level; /* the intervals' level, resamples and seed */
    int ci_boot;
    uint64_t ci_seed;
    int ci_n_text, ci_n_probe; /* the sequences they resample: windows, probe */
} al_ablate_result;

/* Ablate the configurations of o on validation windows of T tokens of val
 * and on the probe (BOS id bos, -1 none), with the heads in off (L*H,
 * NULL = none) off throughout and never ablated. Fails if no head is left,
 * the probe exceeds n_ctx, or the options are bad. Gates are restored.
 * Same ownership and failure contract as al_scores_run. */
/* Bytes al_ablate_run allocates at most (as al_scores_bytes). */
double al_ablate_bytes(const al_config *c, int T, const al_ablate_opts *o);
int al_ablate_run(al_model *m, const al_tokens *val, int T, int bos, const unsigned char *off,
                  const al_ablate_opts *o, al_ablate_result *r, al_err *e);
void al_ablate_result_free(al_ablate_result *r);

/* ----------------------------------------------------------- prune */

/* Defaults are those of `attnlab prune` (which requires a method). */
typedef struct al_prune_opts {
    const char *method; /* "ablation", "gradient" or "random" (NULL: error) */
    double budget; /* (0.1) stop above (1+budget) x base loss; < 0: all */
    uint64_t seed; /* (1) seed of the random method */
    int batches; /* (8) 2..100000: first half estimates, second evaluates */
    int batch; /* (8) 1..100000 */
    int progress; /* progress line on stderr (0) */
    volatile sig_atomic_t *stop; /* non-NULL and set: stop between batches, −1 "interrupted" */
} al_prune_opts;

#define AL_PRUNE_OPTS_INIT                                                                         \
    { NULL, 0.1, 1, 8, 8, 0, NULL }
al_prune_opts al_prune_opts_defaults(void);
int al_prune_opts_check(const al_prune_opts *o, al_err *e);
/* Bytes al_prune_run allocates for windows of T tokens (membudget.h): a
 * command refuses before its run begins when they cannot fit. */
double al_prune_bytes(const al_config *c, int T, const al_prune_opts *o);

/* The result of al_prune_run; `al_prune_result` is the step list of the
 * lower-level al_prune (ablate.h), held here as `p`. */
typedef struct al_prune_run_result {
    int L, H, T;
    al_prune_method method;
    int est_batches, eval_batches; /* batches of each half */
    al_prune_result p; /* steps, masks after each step, final mask, importance */
    int last; /* index in p.steps of the last step within budget */
} al_prune_run_result;

/* Prune m (gates reset first and at the end) on validation windows of T
 * tokens of val. Same ownership and failure contract as al_scores_run. */
int al_prune_run(al_model *m, const al_tokens *val, int T, const al_prune_opts *o,
                 al_prune_run_result *r, al_err *e);
void al_prune_run_result_free(al_prune_run_result *r);

#endif
