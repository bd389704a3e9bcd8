/* gap.h -- the gap check (docs/design.md §5): one rule, in one place, for
 * whether a pair-task run's clean and corrupted inputs differ enough for
 * its normalised effects to mean anything, and whether those effects (or
 * a circuit's faithfulness) lie in the range they should.
 *
 * The metric M of a pair task is a mean over pairs (pairs.h: over items;
 * see al_gap_check_items), so the gap M_clean − M_corr is judged by its
 * spread over the pairs: with d_i the gap of pair i, its mean and standard
 * error SE = sd(d) / √n. The check warns when
 *   - the gap has the wrong sign: for log-prob and logit difference (any
 *     metric but "kl") higher is better, so the clean run must score
 *     higher; for "kl" (the loss KL(p_clean || p), 0 on the clean run) the
 *     gap is the corrupted run's KL, which must be positive;
 *   - or it lies within AL_GAP_N_SE (3) standard errors of zero. With one
 *     pair there is no spread: only the sign (and a gap of exactly 0)
 *     counts.
 * The message says which: more than 3 SE below zero, the effects' signs
 * are inverted; within 3 SE (a negative gap too), they are mostly noise.
 * Normalised effects and faithfulness divide by this gap, so a small gap
 * scales noise up and a wrong-signed one inverts them. Separately, a
 * normalised effect or faithfulness outside [AL_EFFECT_LO, AL_EFFECT_HI]
 * = [−0.1, 1.1] (al_effect_check) is worth a warning of its own.
 *
 * Warnings are plain sentences without the "attnlab: warning: " prefix
 * (the command adds it), at most AL_WARN_MAX per result, each cut to
 * AL_WARN_LEN − 1 bytes. A zeroed al_warnings is empty. */
#ifndef ATTNLAB_GAP_H
#define ATTNLAB_GAP_H

#include "attnlab/pairs.h"
#include "attnlab/util.h"

#define AL_WARN_MAX 8
#define AL_WARN_LEN 320
#define AL_GAP_N_SE 3.0
#define AL_EFFECT_LO (-0.1)
#define AL_EFFECT_HI 1.1

typedef struct al_warnings {
    int n; /* 0..AL_WARN_MAX */
    char msg[AL_WARN_MAX][AL_WARN_LEN]; /* NUL-terminated */
} al_warnings;

/* Append one message (printf format); dropped when w already holds
 * AL_WARN_MAX, cut (never overflowing) when longer than AL_WARN_LEN − 1. */
void al_warnings_add(al_warnings *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The gap check of metric (a name for the message: "log-prob", "logit
 * difference" or "kl", the last switching the sign convention above) on
 * per-pair values m_clean[i], m_corr[i] (n_pairs each; for "kl" m_clean
 * may be NULL: 0 for every pair). Adds at most one warning to w, giving
 * M_clean, M_corr (the pairs' means), the gap, its SE and what it means
 * for the effects; also when the gap is not finite. n_pairs < 1: nothing. */
void al_gap_check(al_warnings *w, const char *metric, const double *m_clean, const double *m_corr,
                  int n_pairs);

/* The same from per-item values of task t (v_clean, v_corr: n_items each,
 * in t's item order; v_clean NULL for "kl"). M is the items' mean, a
 * ratio of sums, so pair p stands for M + (S_p − M·n_p) / n̄ (S_p the sum
 * of its n_p items' values, n̄ = n_items / N): the pairs' mean is M as
 * every analysis computes it (to rounding), their spread is M's standard
 * error, and with equal counts (induction, names, files) each is the
 * pair's own mean. −1 with e when out of memory (w unchanged). */
int al_gap_check_items(al_warnings *w, const al_pairs *t, const char *metric, const double *v_clean,
                       const double *v_corr, al_err *e);

/* The name of task t's own metric for the messages: "logit difference"
 * or "log-prob". */
const char *al_gap_metric_name(const al_pairs *t);

/* One warning (at most) when any finite v[i] (n values) lies outside
 * [AL_EFFECT_LO, AL_EFFECT_HI]: what names them ("normalised effect
 * (head, denoise)", "faithfulness"), the message counts them and gives
 * the one farthest outside. NaN values are skipped. */
void al_effect_check(al_warnings *w, const char *what, const double *v, int n);

#endif
