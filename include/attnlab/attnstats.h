/* attnstats.h -- where each head looks, summarised over real text windows
 * (docs/design.md §5): the entropy of its attention rows and the mean
 * distance back to the positions it attends to.
 *
 * Both come from the attention pattern alone, over the same validation
 * windows `ablate` uses (--batches × --batch windows of T tokens, spread
 * evenly over the file), so they are cheap (one forward per batch) and
 * tell the broad classes apart at a glance: a previous-token head has
 * entropy near 0 and distance near 1, a head parked on BOS entropy near 0
 * and a distance that grows with position, a head that averages the
 * context entropy near ln(t+1) and distance near t/2.
 *
 * Query position 0 is left out of every mean: it can attend only to
 * itself (entropy 0, distance 0 for every head), so it would only dilute
 * the differences between heads. */
#ifndef ATTNLAB_ATTNSTATS_H
#define ATTNLAB_ATTNSTATS_H

#include <signal.h>
#include "attnlab/stats.h"
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/util.h"
#include "attnlab/view.h"

typedef struct al_attnstats_opts {
    int batches, batch; /* validation batches (4) of (8) windows, 1..100000 */
    int progress; /* progress line on stderr (0) */
    volatile sig_atomic_t *stop; /* non-NULL and set: stop, -1 "interrupted" */
    double ci_level; /* the intervals' level (AL_CI_LEVEL) */
    int bootstrap; /* resamples of the windows (AL_CI_BOOTSTRAP); 0: se only */
    uint64_t ci_seed; /* (AL_CI_SEED) */
} al_attnstats_opts;

#define AL_ATTNSTATS_OPTS_INIT                                                                     \
    { 4, 8, 0, NULL, AL_CI_LEVEL, AL_CI_BOOTSTRAP, AL_CI_SEED }
al_attnstats_opts al_attnstats_opts_defaults(void);
/* 0, or -1 with e naming the flag out of range. */
int al_attnstats_opts_check(const al_attnstats_opts *o, al_err *e);

typedef struct al_attnstats_result {
    int L, H, T;
    int windows; /* batches × batch */
    double *entropy; /* (L*H) mean over query positions 1..T-1 of
                           * -Σ_s a_ts ln a_ts, in nats; one allocation
                           * holds all three arrays */
    double *entropy_norm; /* (L*H) the same with each row's entropy divided by
                           * ln(t+1), its uniform maximum: 0 = one-hot, 1 = uniform */
    double *distance; /* (L*H) mean of Σ_s a_ts (t - s), in tokens */
    double seconds; /* wall time */
    /* (3·L·H) each number's interval over the windows (every window has
     * T − 1 query positions, so each is the mean of the windows' means:
     * al_boot_means), entropy, entropy_norm, distance; at ci_level with
     * ci_boot resamples */
    al_interval *ci;
    double ci_level;
    int ci_boot;
} al_attnstats_result;

/* The statistics of every head of m over val's windows of T tokens
 * (2 <= T <= n_ctx). Uses the model as it is (gates and any mask
 * included; hooks or patches left to the caller). Deterministic: the
 * sums run in a fixed order in double. 0 with r filled (free with
 * al_attnstats_result_free), or -1 with e set and r zeroed (bad options,
 * ids outside the vocabulary, a file shorter than a window, out of
 * memory, stopped). */
/* Bytes al_attnstats_run allocates for windows of T tokens (membudget.h):
 * a command refuses before its run begins when they cannot fit. */
double al_attnstats_bytes(const al_config *c, int T, const al_attnstats_opts *o);
int al_attnstats_run(al_model *m, const al_tokens *val, int T, const al_attnstats_opts *o,
                     al_attnstats_result *r, al_err *e);
/* r as generic per-head views (view.h), borrowing its arrays: metrics
 * attn_entropy, attn_entropy_norm and attn_distance. Writes at most cap
 * views into out; returns how many r has (3). */
int al_attnstats_views(const al_attnstats_result *r, al_view *out, int cap);
/* Frees and zeroes r; harmless on a zeroed struct. */
void al_attnstats_result_free(al_attnstats_result *r);

#endif
