/* stats.c -- rank and linear correlations, AUROC, top-k overlap (stats.h).
 * Sums run in index order in double, so results do not depend on the
 * thread count. */
#include "attnlab/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct ranked {
    double v;
    int i;
} ranked;

static int by_value(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i); /* stable: qsort is not */
}

/* Average ranks (1-based) of v into r; −1 when out of memory. */
static int ranks(const double *v, int n, double *r) {
    ranked *t = malloc(sizeof *t * (size_t)n);
    if (!t) return -1;
    for (int i = 0; i < n; i++) t[i] = (ranked){v[i], i};
    qsort(t, (size_t)n, sizeof *t, by_value);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && t[j + 1].v == t[i].v) j++;
        for (int k = i; k <= j; k++) r[t[k].i] = (i + j) / 2.0 + 1;
        i = j + 1;
    }
    free(t);
    return 0;
}

double al_pearson(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= n, my /= n;
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (sxx <= 0 || syy <= 0) return NAN;
    return sxy / sqrt(sxx * syy);
}

double al_spearman(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    double *rx = malloc(sizeof(double) * (size_t)n * 2);
    if (!rx) return NAN;
    if (ranks(x, n, rx) || ranks(y, n, rx + n)) {
        free(rx);
        return NAN;
    }
    double r = al_pearson(rx, rx + n, n);
    free(rx);
    return r;
}

/* Indices of the k largest |v| (ties to the lower index) marked in in[]. */
static int mark_top(const double *v, int n, int k, unsigned char *in) {
    ranked *t = malloc(sizeof *t * (size_t)n);
    if (!t) return -1;
    for (int i = 0; i < n; i++) t[i] = (ranked){-fabs(v[i]), i};
    qsort(t, (size_t)n, sizeof *t, by_value);
    for (int i = 0; i < k; i++) in[t[i].i] = 1;
    free(t);
    return 0;
}

int al_topk_overlap(const double *x, const double *y, int n, int k) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    unsigned char *in = calloc((size_t)n, 2);
    if (!in) return -1;
    int both = 0;
    if (mark_top(x, n, k, in) || mark_top(y, n, k, in + n)) {
        free(in);
        return -1;
    }
    for (int i = 0; i < n; i++) both += in[i] && in[n + i];
    free(in);
    return both;
}

int al_stats_finite_pairs(const double *x, const double *y, int n, double *xo, double *yo) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) continue;
        double a = x[i], b = y[i];
        xo[m] = a, yo[m] = b, m++;
    }
    return m;
}

void al_top_k(const float *row, int n, int k, int *idx) {
    for (int i = 0; i < k; i++) idx[i] = -1;
    for (int v = 0; v < n; v++) { /* insertion into the sorted prefix */
        int pos = k;
        while (pos > 0 && (idx[pos - 1] < 0 || row[v] > row[idx[pos - 1]])) pos--;
        if (pos >= k) continue;
        memmove(idx + pos + 1, idx + pos, sizeof(int) * (size_t)(k - pos - 1));
        idx[pos] = v;
    }
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Entries of sorted v[0..n) below x (strict) or at most x. */
static long count_below(const double *v, long n, double x, int or_equal) {
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (v[mid] < x || (or_equal && v[mid] == x))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

double al_auroc(const double *pos, long np, long pos_zeros, const double *neg, long nn,
                long neg_zeros) {
    long NP = np + pos_zeros, NN = nn + neg_zeros;
    if (NP <= 0 || NN <= 0) return NAN;
    double *sn = malloc(sizeof(double) * (size_t)(nn > 0 ? nn : 1));
    if (!sn) return NAN;
    if (nn > 0) { /* neg may be NULL when every negative is an implicit zero */
        memcpy(sn, neg, sizeof(double) * (size_t)nn);
        qsort(sn, (size_t)nn, sizeof *sn, by_double);
    }
    /* U: over positives, the negatives below plus half those tied, the
     * implicit zeros of each side counted as the value 0. Half-integer
     * sums in double stay exact below 2^52. */
    double u = 0;
    for (long i = 0; i <= np; i++) {
        double p = i < np ? pos[i] : 0.0;
        long times = i < np ? 1 : pos_zeros;
        if (!times) continue;
        long lt = count_below(sn, nn, p, 0), le = count_below(sn, nn, p, 1);
        double w = (double)lt + 0.5 * (double)(le - lt);
        if (p > 0)
            w += (double)neg_zeros;
        else if (p == 0)
            w += 0.5 * (double)neg_zeros;
        u += w * (double)times;
    }
    free(sn);
    return u / ((double)NP * (double)NN);
}

/* ------------------------------------------- intervals from per-item values */

/* The two-sided t quantile: P(|T_df| <= t) = level. df 1 and 2 exactly;
 * above, the Cornish-Fisher expansion about the normal quantile to the
 * 1/df^3 term (within 0.003 at df 5, 1e-5 at df 60). */
double al_t_quantile(double level, int df) {
    if (!(level > 0 && level < 1) || df < 1) return NAN;
    double p = (1 + level) / 2; /* the upper quantile's probability */
    if (df == 1) return tan(3.14159265358979323846 * (p - 0.5));
    if (df == 2) return (2 * p - 1) * sqrt(2 / (4 * p * (1 - p)));
    double z = al_normal_quantile(level), z2 = z * z, v = df;
    return z + z * (z2 + 1) / (4 * v) + z * (5 * z2 * z2 + 16 * z2 + 3) / (96 * v * v) +
           z * (3 * z2 * z2 * z2 + 19 * z2 * z2 + 17 * z2 - 15) / (384 * v * v * v);
}

/* The expanded percentile interval (Hesterberg 2015) of each of the m
 * columns of the B resampled statistics st (B, m), into out[j].lo, .hi:
 * the plain percentile interval is too narrow at small n (the bootstrap
 * distribution's spread is the plug-in sd/sqrt(n), not the sample sd's,
 * and it has no t correction), so its quantiles are taken at the wider
 * level erf(sqrt(n/(n−1)) · t_{n−1} / sqrt 2), where t_{n−1} is the
 * two-sided t quantile of the level; the order statistics nearest them,
 * floor and ceil of (B − 1)·q, err wide. A column with a NaN among its
 * resamples keeps NaN. col: scratch of B doubles. */
static void boot_interval(const double *st, int B, int m, int n, double level, double *col,
                          al_interval *out) {
    double t = al_t_quantile(level, n - 1);
    double lv = erf(sqrt((double)n / (n - 1)) * t / sqrt(2.0));
    double qlo = (1 - lv) / 2 * (B - 1), qhi = (1 + lv) / 2 * (B - 1);
    int ilo = (int)floor(qlo), ihi = (int)ceil(qhi);
    if (ilo < 0) ilo = 0;
    if (ihi > B - 1) ihi = B - 1;
    for (int j = 0; j < m; j++) {
        int bad = 0;
        for (int b = 0; b < B; b++) {
            col[b] = st[(size_t)b * m + j];
            bad |= isnan(col[b]);
        }
        if (bad) continue;
        qsort(col, (size_t)B, sizeof *col, by_double);
        out[j].lo = col[ilo];
        out[j].hi = col[ihi];
    }
}

/* A mean is the ratio Σx / Σ1: the same arithmetic, bit for bit (a sum
 * of ones is exact), so the means share the ratio's one implementation. */
int al_boot_group_means(const double *x, const int *grp, int n, int m, int n_groups, int B,
                        double level, uint64_t seed, al_interval *out, al_err *e) {
    if (n < 1 || m < 1 || n_groups < 1)
        return al_errf(e, "intervals: need items, columns and groups >= 1 (got %d, %d, %d)", n, m,
                       n_groups);
    int *row = al_malloc((size_t)n_groups, sizeof *row, e), k = 0;
    if (!row) return -1;
    for (int g = 0; g < n_groups; g++) row[g] = -1;
    for (int i = 0; i < n; i++) {
        if (grp[i] < 0 || grp[i] >= n_groups) {
            free(row);
            return al_errf(e, "intervals: item %d's group %d is outside 0..%d", i, grp[i],
                           n_groups - 1);
        }
        if (row[grp[i]] < 0) row[grp[i]] = k++;
    }
    /* each group's sums in the order the groups first appear */
    double *a = al_calloc((size_t)k * m + (size_t)k, sizeof *a, e),
           *d = a ? a + (size_t)k * m : NULL;
    int rc = -1;
    if (a) {
        for (int i = 0; i < n; i++) {
            int r = row[grp[i]];
            d[r]++;
            for (int j = 0; j < m; j++) a[(size_t)r * m + j] += x[(size_t)i * m + j];
        }
        rc = al_boot_ratio(a, d, k, m, B, level, seed, out, e);
    }
    free(a);
    free(row);
    return rc;
}

int al_ci_check(double level, int boot, al_err *e) {
    if (!(level > 0 && level < 1))
        return al_errf(e, "--ci must be a level strictly between 0 and 1 (got %g)", level);
    if (boot < 0 || boot > 100000)
        return al_errf(e, "--bootstrap must be in 0..100000 (got %d)", boot);
    return 0;
}

int al_boot_means(const double *x, int n, int m, int B, double level, uint64_t seed,
                  al_interval *out, al_err *e) {
    double *ones = n > 0 ? al_malloc((size_t)n, sizeof(double), e) : NULL;
    if (n > 0 && !ones) return -1;
    for (int i = 0; i < n; i++) ones[i] = 1.0;
    int rc = al_boot_ratio(x, ones, n, m, B, level, seed, out, e);
    free(ones);
    return rc;
}

int al_boot_ratio(const double *a, const double *d, int n, int m, int B, double level,
                  uint64_t seed, al_interval *out, al_err *e) {
    if (n < 1 || m < 1 || B < 0 || !(level > 0 && level < 1))
        return al_errf(e,
                       "intervals: need items >= 1, columns >= 1, bootstrap >= 0 and a level "
                       "in (0, 1) (got %d, %d, %d, %g)",
                       n, m, B, level);
    double sd = 0;
    for (int i = 0; i < n; i++) sd += d[i];
    /* the delta method's standard error of R = Σa / Σd: the sd of the
     * items' a − R·d over sqrt(n), divided by the mean d */
    for (int j = 0; j < m; j++) {
        double sa = 0, ss = 0;
        for (int i = 0; i < n; i++) sa += a[(size_t)i * m + j];
        double R = sa / sd;
        for (int i = 0; i < n; i++) {
            double z = a[(size_t)i * m + j] - R * d[i];
            ss += z * z;
        }
        out[j].se = n > 1 && sd != 0 ? sqrt(ss / (n - 1)) / sqrt((double)n) / fabs(sd / n) : NAN;
        out[j].lo = out[j].hi = NAN;
    }
    if (B == 0 || n < 2) return 0;
    double *st = al_malloc((size_t)B * m + (size_t)B + (size_t)m, sizeof(double), e);
    int *pick = al_malloc((size_t)n, sizeof(int), e);
    if (!st || !pick) {
        free(st), free(pick);
        return -1;
    }
    double *col = st + (size_t)B * m, *acc = col + B;
    al_rng r;
    al_rng_seed(&r, seed);
    for (int b = 0; b < B; b++) {
        double db = 0;
        for (int i = 0; i < n; i++) pick[i] = (int)al_rng_below(&r, (uint32_t)n);
        for (int j = 0; j < m; j++) acc[j] = 0;
        for (int i = 0; i < n; i++) {
            const double *row = a + (size_t)pick[i] * m;
            db += d[pick[i]];
            for (int j = 0; j < m; j++) acc[j] += row[j];
        }
        for (int j = 0; j < m; j++) st[(size_t)b * m + j] = db != 0 ? acc[j] / db : NAN;
    }
    boot_interval(st, B, m, n, level, col, out);
    free(st);
    free(pick);
    return 0;
}

double al_normal_quantile(double level) {
    if (!(level > 0 && level < 1)) return NAN;
    /* P(|Z| > z) = erfc(z / sqrt 2) falls from 1 at 0: bisect for 1 − level */
    double lo = 0, hi = 40, want = 1 - level;
    for (int i = 0; i < 200 && hi - lo > 1e-13; i++) {
        double mid = (lo + hi) / 2;
        if (erfc(mid / sqrt(2.0)) > want)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

double al_seeds_needed(double d, double sd, double level, double power) {
    if (!(d != 0 && isfinite(d) && sd >= 0 && isfinite(sd) && power > 0 && power < 1)) return NAN;
    double za = al_normal_quantile(level), zb = al_normal_quantile(2 * power - 1);
    if (isnan(za) || isnan(zb)) return NAN;
    double n = 2 * (za + zb) * (za + zb) * sd * sd / (d * d);
    n = ceil(n - 1e-9); /* a whole number of seeds, not 16.0000001 -> 17 */
    return n < 2 ? 2 : n;
}
