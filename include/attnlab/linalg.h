/* linalg.h -- dense linear algebra on small matrices via LAPACKE.
 *
 * Everything here is double precision and row-major: the circuit
 * analyses reduce 256x256 products to d_head-sized cores, and doing those
 * cores in double keeps their singular values and eigenvalues accurate to
 * far better than the float weights they came from.
 *
 * Rank follows numpy's matrix_rank rule for float32 data: the number of
 * singular values above s[0] * max(m, n) * FLT_EPSILON, where (m, n) is
 * the shape of the (possibly never formed) matrix the values belong to. */
#ifndef ATTNLAB_LINALG_H
#define ATTNLAB_LINALG_H

#include "attnlab/util.h"

/* Singular values of a (m,n), descending, into s[min(m,n)]. a is kept. */
int al_svd_values(const double *a, int m, int n, double *s, al_err *e);
/* Thin SVD a = U diag(s) Vt: u (m,k), s (k), vt (k,n), k = min(m,n).
 * u or vt may be NULL if not wanted (then values only for that side). */
int al_svd(const double *a, int m, int n, double *u, double *s, double *vt, al_err *e);
/* Eigenvalues of a general (n,n) matrix: re[n], im[n], sorted by
 * |lambda| descending (ties: real part descending). */
int al_eigvals(const double *a, int n, double *re, double *im, al_err *e);
/* Thin QR of a (m,n), m >= n: q (m,n) with orthonormal columns and r (n,n)
 * upper triangular, a = q r. Works for rank-deficient a too. */
int al_qr(const double *a, int m, int n, double *q, double *r, al_err *e);
/* Orthonormal basis of a's column space: writes *rank columns into q,
 * which must hold m*min(m,n) doubles; q is (m, *rank) contiguous. */
int al_col_basis(const double *a, int m, int n, double *q, int *rank, al_err *e);

/* numpy's threshold and rank for values s[k] of an (m,n) matrix. */
double al_rank_tol(const double *s, int k, int m, int n);
int al_rank(const double *s, int k, int m, int n);
/* exp(entropy of s/sum(s)); 0 if all s are 0. */
double al_effective_rank(const double *s, int k);
/* ||.||_F^2 / s[0]^2; 0 if s[0] is 0. */
double al_stable_rank(const double *s, int k);
/* sqrt(sum s^2) = Frobenius norm. */
double al_fro_from_sv(const double *s, int k);

/* Cosines of the principal angles between the column spaces of q1 (m,k1)
 * and q2 (m,k2), both with orthonormal columns: min(k1,k2) values,
 * descending, clamped to [0,1]. */
int al_principal_cosines(const double *q1, int k1, const double *q2, int k2, int m, double *cosines,
                         al_err *e);

/* c (m,n) = a (m,k) * b (k,n), optionally with a and/or b transposed as
 * stored (ta: a is stored (k,m); tb: b is stored (n,k)). */
void al_dgemm(int ta, int tb, int m, int n, int k, const double *a, const double *b, double *c);
/* Frobenius norm of an (m,n) matrix. */
double al_fro(const double *a, int m, int n);

#endif
