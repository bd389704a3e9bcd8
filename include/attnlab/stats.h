/* stats.h -- agreement between two score vectors: Pearson, Spearman and
 * the overlap of their top-k sets. Used wherever attnlab says how well
 * two methods agree (the report's score agreement, attribution patching
 * against actual patching), so that every place means the same thing.
 *
 * All take n values each and skip nothing: callers drop NaNs first
 * (al_stats_finite_pairs). Results are NaN when undefined (n < 2, a
 * constant vector, out of memory). */
#ifndef ATTNLAB_STATS_H
#define ATTNLAB_STATS_H

#include <stdint.h>
#include "attnlab/util.h"

/* Pearson's correlation of x and y. */
double al_pearson(const double *x, const double *y, int n);
/* The area under the ROC curve of a score separating positives from
 * negatives: P(score of a positive > score of a negative) + P(tie) / 2,
 * the Mann-Whitney U over np·nn. pos_zeros and neg_zeros add that many
 * implicit scores of exactly 0 to each side, so a sparse code (most
 * entries 0) needs only its nonzero entries. NaN when a side is empty or
 * out of memory. 1 means every positive scores above every negative. */
double al_auroc(const double *pos, long np, long pos_zeros, const double *neg, long nn,
                long neg_zeros);
/* Spearman's rank correlation, ties given their average rank. */
double al_spearman(const double *x, const double *y, int n);
/* Of the k entries largest in |x| and the k largest in |y| (ties to the
 * lower index), how many are in both; k is capped at n. −1 when out of
 * memory. */
int al_topk_overlap(const double *x, const double *y, int n, int k);
/* idx[0..k) = the indices of the k largest of row[0..n), descending,
 * ties to the lower index (−1 where n < k): `run`'s candidate order. */
void al_top_k(const float *row, int n, int k, int *idx);
/* Copy the pairs (x[i], y[i]) with both finite to the front of xo, yo
 * (n each, may alias x, y); returns how many. */
int al_stats_finite_pairs(const double *x, const double *y, int n, double *xo, double *yo);

/* ---- intervals from per-item values ---- */

/* How sure a mean over items is. se: the standard error, sd / sqrt(n)
 * (sample sd); lo, hi: the bootstrap percentile interval; NaN when
 * undefined (n < 2, a NaN among the items). */
typedef struct al_interval {
    double se, lo, hi;
} al_interval;

/* The defaults of every command that reports intervals. */
#define AL_CI_LEVEL 0.95
#define AL_CI_BOOTSTRAP 500
#define AL_CI_SEED 1

/* For each of the m columns of x (n rows, one per item, row-major n x
 * m), the standard error of the column's mean and its bootstrap
 * percentile interval at level (in (0, 1)): B resamples of the n rows
 * with replacement, drawn from seed, the same resamples for every
 * column (so columns' intervals are those of one resampling, as a
 * statistic that combines columns needs), each column's mean; the
 * interval is the expanded percentile interval of those means
 * (Hesterberg 2015: the quantiles at a level widened for small n, since
 * the plain percentile interval undercovers there; stats.c says how;
 * the order statistics nearest them, outward). B = 0:
 * no interval (lo = hi = NaN), only se. The result repeats bit for bit
 * for the same inputs. 0, or −1 with e (out of memory, n < 1, m < 1, B
 * < 0 or level outside (0, 1)). */
int al_boot_means(const double *x, int n, int m, int B, double level, uint64_t seed,
                  al_interval *out, al_err *e);
/* For each of the m columns of a (n rows, one per item, row-major n x m)
 * the ratio R = Σ_i a[i][j] / Σ_i d[i] (a normalised effect: the
 * patched minus the corrupted metric over the clean minus the
 * corrupted, summed over the items), how sure it is: se by the delta
 * method (the sd of a − R·d over the items, over sqrt(n) and the mean
 * d), and the expanded percentile interval of R recomputed on B
 * resamples of the items (numerator and denominator resampled together,
 * as a ratio must be). NaN where Σd is 0. 0, or −1 with e. */
int al_boot_ratio(const double *a, const double *d, int n, int m, int B, double level,
                  uint64_t seed, al_interval *out, al_err *e);
/* For each of the m columns of x (n items, row-major n x m) the mean
 * over the items, how sure it is when the items come in groups that are
 * not independent (several positions of one sequence): grp[i] in
 * 0..n_groups−1 names item i's group, and the groups are the units
 * resampled, as al_boot_ratio of each group's column sums over its item
 * count (groups without items are left out). 0, or −1 with e. */
int al_boot_group_means(const double *x, const int *grp, int n, int m, int n_groups, int B,
                        double level, uint64_t seed, al_interval *out, al_err *e);
/* 0 if level is strictly between 0 and 1 and boot in 0..100000 (the
 * flags --ci and --bootstrap), else −1 with e naming the flag. */
int al_ci_check(double level, int boot, al_err *e);
/* The two-sided t quantile t with P(|T_df| <= t) = level (df 1 and 2
 * exactly, above by the Cornish-Fisher expansion: within 0.003 at df 5,
 * 1e-5 at df 60); NaN for a level outside (0, 1) or df < 1. */
double al_t_quantile(double level, int df);
/* The two-sided standard normal quantile z with P(|Z| <= z) = level,
 * level in (0, 1): 1.95996 at 0.95 (bisection on erfc, to 1e-12); NaN
 * outside (0, 1). */
double al_normal_quantile(double level);
/* Seeds (independent runs) per setting that a difference d between two
 * settings' means needs, each setting's runs spread with sd, to show in a
 * two-sided test at level (0.95) with the given power (0.8): the normal
 * approximation 2 ((z_level + z_power) sd / d)^2, rounded up, at least
 * 2. NaN when d is 0 or not finite, sd negative, level outside (0, 1) or
 * power outside (0.5, 1). */
double al_seeds_needed(double d, double sd, double level, double power);

#endif
