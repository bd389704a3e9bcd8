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
