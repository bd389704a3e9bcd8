/* test_linalg.c -- SVD, eigenvalues, QR, ranks and principal angles
 * against closed forms worked by hand. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/linalg.h"
#include "test.h"

TEST(linalg_svd_closed_forms) {
    al_err e;
    /* [[1,1],[0,1]]: σ² = (3 ± √5)/2, so σ = φ and 1/φ (golden ratio). */
    double a[4] = {1, 1, 0, 1}, s[2];
    CHECK_OK(al_svd_values(a, 2, 2, s, &e), &e);
    double phi = (1 + sqrt(5)) / 2;
    CHECK_NEAR(s[0], phi, 1e-12);
    CHECK_NEAR(s[1], 1 / phi, 1e-12);
    CHECK(a[0] == 1 && a[1] == 1 && a[2] == 0 && a[3] == 1); /* input kept */
    /* A 3x2 matrix with a sign and a zero row: σ = (4, 3). */
    double b[6] = {3, 0, 0, -4, 0, 0}, u[6], vt[4];
    CHECK_OK(al_svd(b, 3, 2, u, s, vt, &e), &e);
    CHECK_NEAR(s[0], 4, 1e-12);
    CHECK_NEAR(s[1], 3, 1e-12);
    /* U diag(s) Vt reproduces b */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            double r = 0;
            for (int k = 0; k < 2; k++) r += u[i * 2 + k] * s[k] * vt[k * 2 + j];
            CHECK_NEAR(r, b[i * 2 + j], 1e-12);
        }
    /* a 1x3 row: σ = its length */
    double c[3] = {2, 3, 6};
    CHECK_OK(al_svd_values(c, 1, 3, s, &e), &e);
    CHECK_NEAR(s[0], 7, 1e-12);
    CHECK(al_svd_values(c, 0, 3, s, &e) == -1);
}

TEST(linalg_eigenvalues_closed_forms) {
    al_err e;
    double re[3], im[3];
    /* rotation by 90°: ±i */
    double rot[4] = {0, -1, 1, 0};
    CHECK_OK(al_eigvals(rot, 2, re, im, &e), &e);
    CHECK_NEAR(re[0], 0, 1e-12);
    CHECK_NEAR(re[1], 0, 1e-12);
    CHECK_NEAR(im[0], 1, 1e-12); /* ties by |λ| and re: larger im first */
    CHECK_NEAR(im[1], -1, 1e-12);
    /* companion matrix of (x-1)(x-2)(x-3) = x³ - 6x² + 11x - 6 */
    double comp[9] = {6, -11, 6, 1, 0, 0, 0, 1, 0};
    CHECK_OK(al_eigvals(comp, 3, re, im, &e), &e);
    for (int i = 0; i < 3; i++) {
        CHECK_NEAR(re[i], 3 - i, 1e-9);
        CHECK_NEAR(im[i], 0, 1e-9);
    }
    /* symmetric [[2,1],[1,2]]: 3 and 1; negative ones sort by modulus */
    double sym[4] = {-2, 1, 1, -2};
    CHECK_OK(al_eigvals(sym, 2, re, im, &e), &e);
    CHECK_NEAR(re[0], -3, 1e-12);
    CHECK_NEAR(re[1], -1, 1e-12);
}

TEST(linalg_qr_reconstructs) {
    al_err e;
    enum { M = 10, N = 4 };
    double a[M * N], q[M * N], r[N * N];
    al_rng rng;
    al_rng_seed(&rng, 7);
    for (int i = 0; i < M * N; i++) a[i] = al_rng_normal(&rng);
    /* make column 3 = column 0 + column 1: rank 3, QR must still work */
    for (int i = 0; i < M; i++) a[i * N + 3] = a[i * N] + a[i * N + 1];
    CHECK_OK(al_qr(a, M, N, q, r, &e), &e);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double g = 0;
            for (int k = 0; k < M; k++) g += q[k * N + i] * q[k * N + j];
            CHECK_NEAR(g, i == j, 1e-12);
            if (j < i) CHECK(r[i * N + j] == 0);
        }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double v = 0;
            for (int k = 0; k < N; k++) v += q[i * N + k] * r[k * N + j];
            CHECK_NEAR(v, a[i * N + j], 1e-12);
        }
    CHECK(al_qr(a, 3, 4, q, r, &e) == -1); /* wide: refused */
}

TEST(linalg_rank_rule_is_numpys) {
    /* numpy: tol = σ_max · max(m,n) · eps(float32) */
    double s[4] = {1, 1e-3, 1e-5, 1e-7};
    CHECK_NEAR(al_rank_tol(s, 4, 256, 256), 256 * 1.1920928955078125e-07, 1e-18);
    CHECK(al_rank(s, 4, 256, 256) == 2); /* 1e-5 < 3.05e-5 */
    CHECK(al_rank(s, 4, 4, 4) == 3); /* tol 4.8e-7: 1e-5 counts, 1e-7 not */
    double z[2] = {0, 0};
    CHECK(al_rank(z, 2, 2, 2) == 0);
    /* a 6x5 matrix of rank 3: basis has 3 orthonormal columns spanning it */
    al_err e;
    double a[30], q[30];
    al_rng rng;
    al_rng_seed(&rng, 3);
    double x[18], y[15];
    for (int i = 0; i < 18; i++) x[i] = al_rng_normal(&rng);
    for (int i = 0; i < 15; i++) y[i] = al_rng_normal(&rng);
    al_dgemm(0, 0, 6, 5, 3, x, y, a);
    int r = -1;
    CHECK_OK(al_col_basis(a, 6, 5, q, &r, &e), &e);
    CHECK(r == 3);
    /* every column of a is in span(q): a - q qᵀ a = 0 */
    for (int j = 0; j < 5; j++) {
        double res = 0;
        for (int i = 0; i < 6; i++) {
            double p = 0;
            for (int k = 0; k < r; k++) {
                double d = 0;
                for (int t = 0; t < 6; t++) d += q[t * r + k] * a[t * 5 + j];
                p += q[i * r + k] * d;
            }
            res += (a[i * 5 + j] - p) * (a[i * 5 + j] - p);
        }
        CHECK(sqrt(res) < 1e-10);
    }
}

TEST(linalg_effective_and_stable_rank) {
    double flat[4] = {1, 1, 1, 1}, one[3] = {2, 0, 0}, two[2] = {4, 3};
    CHECK_NEAR(al_effective_rank(flat, 4), 4, 1e-12);
    CHECK_NEAR(al_stable_rank(flat, 4), 4, 1e-12);
    CHECK_NEAR(al_effective_rank(one, 3), 1, 1e-12);
    CHECK_NEAR(al_stable_rank(one, 3), 1, 1e-12);
    /* p = (4/7, 3/7): exp(-(4/7 ln 4/7 + 3/7 ln 3/7)) = 1.9796263... */
    CHECK_NEAR(al_effective_rank(two, 2), 1.9796263300525, 1e-12);
    CHECK_NEAR(al_stable_rank(two, 2), 25.0 / 16.0, 1e-12);
    CHECK_NEAR(al_fro_from_sv(two, 2), 5, 1e-12);
    double zero[2] = {0, 0};
    CHECK(al_effective_rank(zero, 2) == 0 && al_stable_rank(zero, 2) == 0);
}

TEST(linalg_principal_angles) {
    al_err e;
    double th = 0.7;
    /* ℝ³: span{e1, e2} and span{e1, cos θ e2 + sin θ e3}: cosines (1, cos θ) */
    double q1[6] = {1, 0, 0, 1, 0, 0};
    double q2[6] = {1, 0, 0, cos(th), 0, sin(th)};
    double c[2];
    CHECK_OK(al_principal_cosines(q1, 2, q2, 2, 3, c, &e), &e);
    CHECK_NEAR(c[0], 1, 1e-12);
    CHECK_NEAR(c[1], cos(th), 1e-12);
    /* a line in the plane: one angle, cosine 1; orthogonal line: 0 */
    double l1[3] = {0, 1, 0}, l2[3] = {0, 0, 1};
    CHECK_OK(al_principal_cosines(q1, 2, l1, 1, 3, c, &e), &e);
    CHECK_NEAR(c[0], 1, 1e-12);
    CHECK_OK(al_principal_cosines(q1, 2, l2, 1, 3, c, &e), &e);
    CHECK_NEAR(c[0], 0, 1e-12);
}
