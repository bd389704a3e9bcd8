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

#endif
