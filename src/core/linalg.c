/* linalg.c -- LAPACKE wrappers: SVD, eigenvalues, QR, bases, ranks and
 * principal angles, all in double precision on row-major matrices.
 * LAPACK routines overwrite their inputs, so each wrapper works on a copy
 * and leaves the caller's matrix alone. */
#include "attnlab/linalg.h"

#include <cblas.h>
#include <float.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double *dup(const double *a, size_t n, al_err *e) {
    double *c = al_malloc(n, sizeof *c, e);
    if (c) memcpy(c, a, n * sizeof *c);
    return c;
}

static int bad_shape(int m, int n, const char *what, al_err *e) {
    if (m <= 0 || n <= 0) return al_errf(e, "%s: bad matrix shape (%d,%d)", what, m, n);
    return 0;
}

int al_svd(const double *a, int m, int n, double *u, double *s, double *vt, al_err *e) {
    if (bad_shape(m, n, "svd", e)) return -1;
    int k = m < n ? m : n;
    double *c = dup(a, (size_t)m * n, e);
    if (!c) return -1;
    lapack_int info;
    if (!u && !vt) {
        /* LAPACKE checks the leading dimensions even when unused */
        info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'N', m, n, c, n, s, NULL, m, NULL, n);
    } else {
        /* 'S' gives both thin factors; the unwanted one goes to scratch. */
        double *uu = u ? u : al_malloc((size_t)m * k, sizeof *uu, e);
        double *vv = vt ? vt : al_malloc((size_t)k * n, sizeof *vv, e);
        if (!uu || !vv) {
            if (!u) free(uu);
            if (!vt) free(vv);
            free(c);
            return -1;
        }
        info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', m, n, c, n, s, uu, k, vv, n);
        if (!u) free(uu);
        if (!vt) free(vv);
    }
    free(c);
    if (info != 0)
        return al_errf(e, "svd of a %dx%d matrix failed (LAPACK info %d)", m, n, (int)info);
    return 0;
}

int al_svd_values(const double *a, int m, int n, double *s, al_err *e) {
    return al_svd(a, m, n, NULL, s, NULL, e);
}

/* Sort eigenvalues by modulus, largest first, so tables are comparable
 * between runs and with numpy after the same sort. */
typedef struct {
    double re, im;
} cplx;

static int cmp_cplx(const void *pa, const void *pb) {
    const cplx *a = pa, *b = pb;
    double ma = hypot(a->re, a->im), mb = hypot(b->re, b->im);
    if (ma != mb) return ma > mb ? -1 : 1;
    if (a->re != b->re) return a->re > b->re ? -1 : 1;
    if (a->im != b->im) return a->im > b->im ? -1 : 1;
    return 0;
}

int al_eigvals(const double *a, int n, double *re, double *im, al_err *e) {
    if (bad_shape(n, n, "eigenvalues", e)) return -1;
    double *c = dup(a, (size_t)n * n, e);
    cplx *v = al_malloc((size_t)n, sizeof *v, e);
    if (!c || !v) {
        free(c);
        free(v);
        return -1;
    }
    lapack_int info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', n, c, n, re, im, NULL, 1, NULL, 1);
    free(c);
    if (info != 0) {
        free(v);
        return al_errf(e, "eigenvalues of a %dx%d matrix failed (LAPACK info %d)", n, n, (int)info);
    }
    for (int i = 0; i < n; i++) v[i] = (cplx){re[i], im[i]};
    qsort(v, (size_t)n, sizeof *v, cmp_cplx);
    for (int i = 0; i < n; i++) re[i] = v[i].re, im[i] = v[i].im;
    free(v);
    return 0;
}

int al_qr(const double *a, int m, int n, double *q, double *r, al_err *e) {
    if (bad_shape(m, n, "qr", e)) return -1;
    if (m < n) return al_errf(e, "qr: need rows >= columns, got (%d,%d)", m, n);
    double *tau = al_malloc((size_t)n, sizeof *tau, e);
    if (!tau) return -1;
    memcpy(q, a, (size_t)m * n * sizeof *q);
    lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, m, n, q, n, tau);
    if (info == 0) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) r[(size_t)i * n + j] = j >= i ? q[(size_t)i * n + j] : 0.0;
        info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, m, n, n, q, n, tau);
    }
    free(tau);
    if (info != 0)
        return al_errf(e, "qr of a %dx%d matrix failed (LAPACK info %d)", m, n, (int)info);
    return 0;
}

int al_col_basis(const double *a, int m, int n, double *q, int *rank, al_err *e) {
    int k = m < n ? m : n;
    double *s = al_malloc((size_t)k, sizeof *s, e);
    double *u = al_malloc((size_t)m * k, sizeof *u, e);
    if (!s || !u || al_svd(a, m, n, u, s, NULL, e)) {
        free(s);
        free(u);
        return -1;
    }
    int r = al_rank(s, k, m, n);
    for (int i = 0; i < m; i++) memcpy(q + (size_t)i * r, u + (size_t)i * k, (size_t)r * sizeof *q);
    *rank = r;
    free(s);
    free(u);
    return 0;
}

double al_rank_tol(const double *s, int k, int m, int n) {
    if (k <= 0) return 0;
    return s[0] * (m > n ? m : n) * (double)FLT_EPSILON;
}

int al_rank(const double *s, int k, int m, int n) {
    double tol = al_rank_tol(s, k, m, n);
    int r = 0;
    for (int i = 0; i < k; i++) r += s[i] > tol;
    return r;
}

double al_effective_rank(const double *s, int k) {
    double sum = 0, h = 0;
    for (int i = 0; i < k; i++) sum += s[i];
    if (!(sum > 0)) return 0;
    for (int i = 0; i < k; i++) {
        double p = s[i] / sum;
        if (p > 0) h -= p * log(p);
    }
    return exp(h);
}

double al_stable_rank(const double *s, int k) {
    if (k <= 0 || !(s[0] > 0)) return 0;
    double f = 0;
    for (int i = 0; i < k; i++) f += s[i] * s[i];
    return f / (s[0] * s[0]);
}

double al_fro_from_sv(const double *s, int k) {
    double f = 0;
    for (int i = 0; i < k; i++) f += s[i] * s[i];
    return sqrt(f);
}

int al_principal_cosines(const double *q1, int k1, const double *q2, int k2, int m, double *cosines,
                         al_err *e) {
    if (k1 <= 0 || k2 <= 0) return al_errf(e, "principal angles: empty subspace");
    double *g = al_malloc((size_t)k1 * k2, sizeof *g, e);
    if (!g) return -1;
    al_dgemm(1, 0, k1, k2, m, q1, q2, g); /* (k1,k2) = q1ᵀ q2 */
    int rc = al_svd_values(g, k1, k2, cosines, e);
    free(g);
    if (rc) return -1;
    int k = k1 < k2 ? k1 : k2;
    for (int i = 0; i < k; i++) cosines[i] = cosines[i] > 1 ? 1 : cosines[i];
    return 0;
}

void al_dgemm(int ta, int tb, int m, int n, int k, const double *a, const double *b, double *c) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1.0, a, ta ? m : k, b, tb ? k : n, 0.0, c, n);
}

double al_fro(const double *a, int m, int n) {
    double f = 0;
    for (size_t i = 0; i < (size_t)m * n; i++) f += a[i] * a[i];
    return sqrt(f);
}
