/* circuits.c -- QK/OV circuits, ranks, copying scores, skip-trigrams,
 * head overlap and composition, all from factored forms (docs/design.md §4).
 *
 * Nothing d_model x d_model per head and nothing V x V is ever held: the
 * small circuits reduce to d_head x d_head cores (see circuits.h), and the
 * full V x V circuits are produced a block of rows at a time by sgemm with
 * inner dimension d_head, scanned for what we keep (argmaxes, top-K
 * entries) and discarded. Heads are independent, so they run in parallel
 * with OpenMP; BLAS calls inside the parallel region run single-threaded. */
#include "attnlab/circuits.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/linalg.h"
#include "attnlab/process.h"

const char *const al_comp_names[AL_COMP_N] = {"Q", "K", "V"};

al_circ_opts al_circ_opts_default(void) {
    al_circ_opts o = {.top_k = 50, .mc_samples = 100, .seed = 1, .block = 128, .progress = 0};
    return o;
}

/* ------------------------------------------------------------ factors */

/* Thin QR factors of one head's four matrices (W_O transposed so all are
 * (C,D)) and the two cores. One allocation. */
enum { F_Q, F_K, F_V, F_O, F_N };
typedef struct factors {
    int C, D;
    double *q[F_N]; /* (C,D) orthonormal columns */
    double *r[F_N]; /* (D,D) upper triangular */
    double *cqk; /* (D,D) R_q R_kᵀ: W_QK = Q_q cqk Q_kᵀ */
    double *cov; /* (D,D) R_v R_oᵀ: W_OV = Q_v cov Q_oᵀ */
    double *buf;
} factors;

static void factors_free(factors *f) {
    free(f->buf);
    f->buf = NULL;
}

/* w[F_N] are (C,D) doubles: W_Q, W_K, W_V, W_Oᵀ. Only the OV half is
 * factored when ov_only (the earlier head of a composition pair needs no
 * more); then q/r of W_Q, W_K and cqk are left unset. */
static int factors_make_part(double *const w[F_N], int C, int D, int ov_only, factors *f,
                             al_err *e) {
    size_t cd = (size_t)C * D, dd = (size_t)D * D;
    f->C = C, f->D = D;
    f->buf = al_malloc(F_N * (cd + dd) + 2 * dd, sizeof(double), e);
    if (!f->buf) return -1;
    double *p = f->buf;
    for (int i = 0; i < F_N; i++) {
        f->q[i] = p, p += cd;
        f->r[i] = p, p += dd;
        if ((!ov_only || i >= F_V) && al_qr(w[i], C, D, f->q[i], f->r[i], e)) {
            factors_free(f);
            return -1;
        }
    }
    f->cqk = p, p += dd;
    f->cov = p;
    if (!ov_only) al_dgemm(0, 1, D, D, D, f->r[F_Q], f->r[F_K], f->cqk);
    al_dgemm(0, 1, D, D, D, f->r[F_V], f->r[F_O], f->cov);
    return 0;
}

static int factors_make(double *const w[F_N], int C, int D, factors *f, al_err *e) {
    return factors_make_part(w, C, D, 0, f, e);
}

/* Head (l,h) of m as four (C,D) doubles in one buffer *buf. */
static int head_weights(const al_model *m, int l, int h, double *w[F_N], double **buf, al_err *e) {
    int C = m->cfg.d_model, D = m->cfg.d_head;
    size_t cd = (size_t)C * D;
    *buf = al_malloc(F_N * cd, sizeof(double), e);
    if (!*buf) return -1;
    const float *src[3] = {al_head_wq(m, l, h), al_head_wk(m, l, h), al_head_wv(m, l, h)};
    for (int i = 0; i < F_N; i++) w[i] = *buf + i * cd;
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; j < cd; j++) w[i][j] = src[i][j];
    const float *wo = al_head_wo(m, l, h); /* (D,C) */
    for (int d = 0; d < D; d++)
        for (int c = 0; c < C; c++) w[F_O][(size_t)c * D + d] = wo[(size_t)d * C + c];
    return 0;
}

static int head_factors(const al_model *m, int l, int h, factors *f, al_err *e) {
    double *w[F_N], *buf;
    if (head_weights(m, l, h, w, &buf, e)) return -1;
    int rc = factors_make(w, m->cfg.d_model, m->cfg.d_head, f, e);
    free(buf);
    return rc;
}

/* 1 if c's weights can be read as circuits: no LayerNorm, or its
 * LayerNorm folded in (process.h; LNPre then only divides by the scale,
 * which no weight shows). */
static int weights_folded(const al_config *c) {
    return c->norm_type == AL_NORM_NONE || (c->processed & AL_PROC_FOLD_LN);
}

/* Every circuit here is read from the weights alone: LayerNorm must be
 * folded into them (al_circ_analyse folds a copy), and its per-position
 * scale and the biases are left out (circuits.h). */
static int check_head_for(const al_model *m, int l, int h, int positional, al_err *e) {
    /* shortformer positions join q and k after ln1: their W_pos W_Q is
     * exact without folding */
    int exact = positional && m->cfg.pos_type == AL_POS_SHORTFORMER;
    if (!exact && !weights_folded(&m->cfg))
        return al_errf(e,
                       "circuits from the weights need a model's LayerNorm folded into them "
                       "(this one has normalization_type %s, not folded: `attnlab circuits` "
                       "folds a copy, `attnlab import` folds by default)",
                       al_norm_type_name(m->cfg.norm_type));
    if (l < 0 || l >= m->cfg.n_layers || h < 0 || h >= m->cfg.n_heads)
        return al_errf(e, "no head %d.%d in a model of %d layers x %d heads", l, h, m->cfg.n_layers,
                       m->cfg.n_heads);
    return 0;
}

static int check_head(const al_model *m, int l, int h, al_err *e) {
    return check_head_for(m, l, h, 0, e);
}

/* ----------------------------------------------- small circuits (D x D) */

int al_circ_qk_svals(const al_model *m, int l, int h, double *s, al_err *e) {
    factors f;
    if (check_head(m, l, h, e) || head_factors(m, l, h, &f, e)) return -1;
    int rc = al_svd_values(f.cqk, f.D, f.D, s, e);
    factors_free(&f);
    return rc;
}

int al_circ_ov_svals(const al_model *m, int l, int h, double *s, al_err *e) {
    factors f;
    if (check_head(m, l, h, e) || head_factors(m, l, h, &f, e)) return -1;
    int rc = al_svd_values(f.cov, f.D, f.D, s, e);
    factors_free(&f);
    return rc;
}

/* G = W_U W_E (C,C) in double; W_U = W_Eᵀ when tied. */
static int unembed_embed(const al_model *m, double **g, al_err *e) {
    int C = m->cfg.d_model, V = m->cfg.d_vocab;
    double *we = al_malloc((size_t)V * C, sizeof *we, e);
    double *wu = al_malloc((size_t)C * V, sizeof *wu, e);
    *g = al_malloc((size_t)C * C, sizeof **g, e);
    if (!we || !wu || !*g) {
        free(we), free(wu), free(*g);
        *g = NULL;
        return -1;
    }
    const float *fe = m->p[AL_P_WE], *fu = al_model_wu(m);
    for (size_t i = 0; i < (size_t)V * C; i++) we[i] = fe[i];
    if (fu)
        for (size_t i = 0; i < (size_t)C * V; i++) wu[i] = fu[i];
    if (fu)
        al_dgemm(0, 0, C, C, V, wu, we, *g);
    else
        al_dgemm(1, 0, C, C, V, we, we, *g); /* W_Eᵀ W_E */
    free(we), free(wu);
    return 0;
}

/* Re(Σλ)/Σ|λ|. A head whose full OV circuit has no nonzero eigenvalue
 * (zero: its OV never reaches the unembedding; or nilpotent) has 0/0:
 * NaN, which the store writes as NULL,
 * so such heads stay out of agreement counts and correlations instead of
 * counting as "not copying". */
static double copying_score(const double *re, const double *im, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) num += re[i], den += hypot(re[i], im[i]);
    return den > 0 ? num / den : NAN;
}

/* Eigenvalues of W_O G W_V (D,D), the nonzero spectrum of full OV. */
static int ov_eigen_g(const al_model *m, int l, int h, const double *g, double *re, double *im,
                      double *copying, al_err *e) {
    int C = m->cfg.d_model, D = m->cfg.d_head;
    double *w[F_N], *buf;
    if (head_weights(m, l, h, w, &buf, e)) return -1;
    double *gv = al_malloc((size_t)C * D, sizeof *gv, e);
    double *mm = al_malloc((size_t)D * D, sizeof *mm, e);
    int rc = -1;
    if (gv && mm) {
        al_dgemm(0, 0, C, D, C, g, w[F_V], gv); /* G W_V (C,D) */
        al_dgemm(1, 0, D, D, C, w[F_O], gv, mm); /* W_O (G W_V) */
        rc = al_eigvals(mm, D, re, im, e);
        if (rc == 0 && copying) *copying = copying_score(re, im, D);
    }
    free(buf), free(gv), free(mm);
    return rc;
}

int al_circ_ov_eigen(const al_model *m, int l, int h, double *re, double *im, double *copying,
                     al_err *e) {
    double *g;
    if (check_head(m, l, h, e) || unembed_embed(m, &g, e)) return -1;
    int rc = ov_eigen_g(m, l, h, g, re, im, copying, e);
    free(g);
    return rc;
}

/* ------------------------------------------------------- composition */

/* ‖A X B‖_F for D x D cores, X = Q1ᵀ Q2 (C,D)ᵀ(C,D); tb: use Bᵀ. */
static double core_norm(const double *a, const double *q1, const double *q2, const double *b,
                        int tb, int C, int D, double *t1, double *t2) {
    al_dgemm(1, 0, D, D, C, q1, q2, t1); /* X */
    al_dgemm(0, 0, D, D, D, a, t1, t2); /* A X */
    al_dgemm(0, tb, D, D, D, t2, b, t1); /* A X B */
    return al_fro(t1, D, D);
}

static void comp_scores(const factors *f1, const factors *f2, double *score, double *scratch) {
    int C = f1->C, D = f1->D;
    double *t1 = scratch, *t2 = scratch + (size_t)D * D;
    double n_ov1 = al_fro(f1->cov, D, D), n_qk2 = al_fro(f2->cqk, D, D),
           n_ov2 = al_fro(f2->cov, D, D);
    double q = core_norm(f1->cov, f1->q[F_O], f2->q[F_Q], f2->cqk, 0, C, D, t1, t2);
    double k = core_norm(f1->cov, f1->q[F_O], f2->q[F_K], f2->cqk, 1, C, D, t1, t2);
    double v = core_norm(f1->cov, f1->q[F_O], f2->q[F_V], f2->cov, 0, C, D, t1, t2);
    double dq = n_ov1 * n_qk2, dv = n_ov1 * n_ov2;
    score[AL_COMP_Q] = dq > 0 ? q / dq : 0;
    score[AL_COMP_K] = dq > 0 ? k / dq : 0;
    score[AL_COMP_V] = dv > 0 ? v / dv : 0;
}

int al_circ_composition(const al_model *m, int l1, int h1, int l2, int h2, double *score,
                        al_err *e) {
    if (check_head(m, l1, h1, e) || check_head(m, l2, h2, e)) return -1;
    int D = m->cfg.d_head;
    factors f1 = {0}, f2 = {0};
    double *scr = al_malloc(2 * (size_t)D * D, sizeof *scr, e);
    int rc = -1;
    if (scr && !head_factors(m, l1, h1, &f1, e) && !head_factors(m, l2, h2, &f2, e)) {
        comp_scores(&f1, &f2, score, scr);
        rc = 0;
    }
    factors_free(&f1), factors_free(&f2), free(scr);
    return rc;
}

/* Monte Carlo: the scores of two independent heads with i.i.d. Gaussian
 * weights. The ratio is scale-free, so only the shapes matter. */
int al_circ_comp_baseline(int C, int D, int samples, uint64_t seed, double *mean, double *sd,
                          al_err *e) {
    if (samples < 2) return al_errf(e, "composition baseline needs >= 2 samples");
    size_t cd = (size_t)C * D;
    double *sc = al_malloc((size_t)samples * AL_COMP_N, sizeof *sc, e);
    if (!sc) return -1;
    int failed = 0;
    /* Each sample has its own seed, and the sums are taken in order
     * afterwards, so the result does not depend on the thread count. */
#pragma omp parallel
    {
        al_err le;
        double *buf = al_malloc(2 * F_N * cd + 2 * (size_t)D * D, sizeof *buf, &le);
        if (!buf) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int s = 0; s < samples; s++) {
            int f;
#pragma omp atomic read
            f = failed;
            if (!buf || f) continue;
            al_rng rng;
            al_rng_seed(&rng, seed * 0x9E3779B97F4A7C15ull + (uint64_t)s);
            double *w1[F_N], *w2[F_N];
            for (int i = 0; i < F_N; i++) w1[i] = buf + i * cd, w2[i] = buf + (F_N + i) * cd;
            /* head 1 needs only W_V, W_O (its OV circuit), head 2 all four */
            for (size_t j = F_V * cd; j < 2 * F_N * cd; j++) buf[j] = al_rng_normal(&rng);
            factors f1 = {0}, f2 = {0};
            if (factors_make_part(w1, C, D, 1, &f1, &le) || factors_make(w2, C, D, &f2, &le)) {
#pragma omp atomic write
                failed = 1;
            } else {
                comp_scores(&f1, &f2, sc + (size_t)s * AL_COMP_N, buf + 2 * F_N * cd);
            }
            factors_free(&f1), factors_free(&f2);
        }
        free(buf);
    }
    if (failed) {
        free(sc);
        return al_errf(e, "composition baseline: out of memory or LAPACK failure");
    }
    for (int k = 0; k < AL_COMP_N; k++) {
        double sum = 0, ss = 0;
        for (int s = 0; s < samples; s++) sum += sc[s * AL_COMP_N + k];
        mean[k] = sum / samples;
        for (int s = 0; s < samples; s++) {
            double d = sc[s * AL_COMP_N + k] - mean[k];
            ss += d * d;
        }
        sd[k] = sqrt(ss / (samples - 1));
    }
    free(sc);
    return 0;
}

/* ------------------------------------------------- full circuits (V x V) */

/* out (n, D) = rows[idx] of W (R,C) times M (C,D); idx NULL = all R rows. */
static void rows_times(const float *w, const int *idx, int n, int C, const float *mat, int D,
                       float *out) {
    if (!idx) {
        al_sgemm(false, false, n, D, C, 1.0f, w, C, mat, D, 0.0f, out, D);
        return;
    }
    for (int i = 0; i < n; i++)
        cblas_sgemv(CblasRowMajor, CblasTrans, C, D, 1.0f, mat, D, w + (size_t)idx[i] * C, 1, 0.0f,
                    out + (size_t)i * D, 1);
}

/* OU (D, n) = W_O (D,C) W_U[:, outs] ; W_U = W_Eᵀ when tied. */
static void wo_wu(const al_model *m, const float *wo, const int *outs, int n, float *ou) {
    int C = m->cfg.d_model, D = m->cfg.d_head, V = m->cfg.d_vocab;
    const float *wu = al_model_wu(m), *we = m->p[AL_P_WE];
    if (!outs) {
        if (wu)
            al_sgemm(false, false, D, V, C, 1.0f, wo, C, wu, V, 0.0f, ou, V);
        else
            al_sgemm(false, true, D, V, C, 1.0f, wo, C, we, C, 0.0f, ou, V);
        return;
    }
    for (int d = 0; d < D; d++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int c = 0; c < C; c++)
                s += (double)wo[(size_t)d * C + c] *
                     (wu ? wu[(size_t)c * V + outs[j]] : we[(size_t)outs[j] * C + c]);
            ou[(size_t)d * n + j] = (float)s;
        }
}

static int check_ids(const al_model *m, const int *ids, int n, al_err *e) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.d_vocab)
            return al_errf(e, "token id %d out of range (d_vocab %d)", ids[i], m->cfg.d_vocab);
    return 0;
}

int al_circ_full_qk(const al_model *m, int l, int h, const int *dst, int n_dst, const int *src,
                    int n_src, float *out, al_err *e) {
    if (check_head(m, l, h, e) || check_ids(m, dst, n_dst, e) || check_ids(m, src, n_src, e))
        return -1;
    int C = m->cfg.d_model, D = m->cfg.d_head;
    float *eq = al_malloc((size_t)n_dst * D, sizeof *eq, e);
    float *ek = al_malloc((size_t)n_src * D, sizeof *ek, e);
    if (!eq || !ek) {
        free(eq), free(ek);
        return -1;
    }
    rows_times(m->p[AL_P_WE], dst, n_dst, C, al_head_wq(m, l, h), D, eq);
    rows_times(m->p[AL_P_WE], src, n_src, C, al_head_wk(m, l, h), D, ek);
    al_sgemm(false, true, n_dst, n_src, D, 1.0f, eq, D, ek, D, 0.0f, out, n_src);
    free(eq), free(ek);
    return 0;
}

int al_circ_full_ov(const al_model *m, int l, int h, const int *src, int n_src, const int *outs,
                    int n_out, float *out, al_err *e) {
    if (check_head(m, l, h, e) || check_ids(m, src, n_src, e) || check_ids(m, outs, n_out, e))
        return -1;
    int C = m->cfg.d_model, D = m->cfg.d_head;
    float *ev = al_malloc((size_t)n_src * D, sizeof *ev, e);
    float *ou = al_malloc((size_t)D * n_out, sizeof *ou, e);
    if (!ev || !ou) {
        free(ev), free(ou);
        return -1;
    }
    rows_times(m->p[AL_P_WE], src, n_src, C, al_head_wv(m, l, h), D, ev);
    wo_wu(m, al_head_wo(m, l, h), outs, n_out, ou);
    al_sgemm(false, false, n_src, n_out, D, 1.0f, ev, D, ou, n_out, 0.0f, out, n_out);
    free(ev), free(ou);
    return 0;
}

int al_circ_positional_qk(const al_model *m, int l, int h, float *out, al_err *e) {
    if (check_head_for(m, l, h, 1, e)) return -1;
    int C = m->cfg.d_model, D = m->cfg.d_head, T = m->cfg.n_ctx;
    float *pq = al_malloc((size_t)T * D, sizeof *pq, e);
    float *pk = al_malloc((size_t)T * D, sizeof *pk, e);
    if (!pq || !pk) {
        free(pq), free(pk);
        return -1;
    }
    rows_times(m->p[AL_P_WPOS], NULL, T, C, al_head_wq(m, l, h), D, pq);
    rows_times(m->p[AL_P_WPOS], NULL, T, C, al_head_wk(m, l, h), D, pk);
    al_sgemm(false, true, T, T, D, 1.0f, pq, D, pk, D, 0.0f, out, T);
    free(pq), free(pk);
    return 0;
}

/* Mean over t >= 1 of the causal softmax(PQK[t, :t+1] / √D) at t-1: how
 * much the head attends to the previous position from positions alone.
 * One row at a time, so no n_ctx x n_ctx buffer is needed. */
static int pos_prev_token(const al_model *m, int l, int h, double *out, al_err *e) {
    int C = m->cfg.d_model, D = m->cfg.d_head, T = m->cfg.n_ctx;
    float *pq = al_malloc((size_t)T * D, sizeof *pq, e);
    float *pk = al_malloc((size_t)T * D, sizeof *pk, e);
    float *row = al_malloc((size_t)T, sizeof *row, e);
    if (!pq || !pk || !row) {
        free(pq), free(pk), free(row);
        return -1;
    }
    rows_times(m->p[AL_P_WPOS], NULL, T, C, al_head_wq(m, l, h), D, pq);
    rows_times(m->p[AL_P_WPOS], NULL, T, C, al_head_wk(m, l, h), D, pk);
    double tot = 0, scale = 1.0 / sqrt((double)D);
    for (int t = 1; t < T; t++) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, t + 1, D, 1.0f, pk, D, pq + (size_t)t * D, 1, 0.0f,
                    row, 1); /* row[s] = k_s·q_t */
        double mx = -INFINITY, z = 0;
        for (int s = 0; s <= t; s++) mx = fmax(mx, row[s] * scale);
        for (int s = 0; s <= t; s++) z += exp(row[s] * scale - mx);
        tot += exp(row[t - 1] * scale - mx) / z;
    }
    *out = T > 1 ? tot / (T - 1) : 0;
    free(pq), free(pk), free(row);
    return 0;
}

/* ---- top-K selection ---- */

typedef struct {
    float v;
    int i;
} vi;

/* a worse than b: smaller value, or equal value and larger index. */
static int vi_worse(vi a, vi b) { return a.v < b.v || (a.v == b.v && a.i > b.i); }

static void vi_sift(vi *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && vi_worse(h[l], h[w])) w = l;
        if (r < n && vi_worse(h[r], h[w])) w = r;
        if (w == i) return;
        vi t = h[i];
        h[i] = h[w], h[w] = t, i = w;
    }
}

static int vi_desc(const void *pa, const void *pb) {
    vi a = *(const vi *)pa, b = *(const vi *)pb;
    return vi_worse(a, b) ? 1 : vi_worse(b, a) ? -1 : 0;
}

/* The k largest entries of row[0..n) above thr (>= 0), best first;
 * returns the count. Scanning in index order with a strict comparison
 * against the current k-th value keeps the smaller index on ties. */
static int top_above(const float *row, int n, int k, float thr, vi *h) {
    int cnt = 0;
    for (int i = 0; i < n; i++) {
        float v = row[i];
        if (!(v > thr)) continue;
        vi x = {v, i};
        if (cnt < k) {
            h[cnt++] = x;
            if (cnt == k) {
                for (int j = k / 2 - 1; j >= 0; j--) vi_sift(h, k, j);
                thr = h[0].v;
            }
        } else {
            h[0] = x;
            vi_sift(h, k, 0);
            thr = h[0].v;
        }
    }
    qsort(h, (size_t)cnt, sizeof *h, vi_desc);
    return cnt;
}

/* Max of row[0..n), n >= 1. Sixteen independent lanes so that the
 * compiler can use vector max without reassociation flags. */
static float row_max(const float *row, int n) {
    float acc[16];
    int i = 0;
    for (int j = 0; j < 16; j++) acc[j] = row[0];
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] = row[i + j] > acc[j] ? row[i + j] : acc[j];
    float m = row[0];
    for (int j = 0; j < 16; j++) m = acc[j] > m ? acc[j] : m;
    for (; i < n; i++) m = row[i] > m ? row[i] : m;
    return m;
}

/* Trigram heap: worst at the root. Ties broken by (a,b,c) so results do
 * not depend on block size or thread count. */
static int tri_worse(const al_trigram *x, const al_trigram *y) {
    if (x->score != y->score) return x->score < y->score;
    if (x->a != y->a) return x->a > y->a;
    if (x->b != y->b) return x->b > y->b;
    return x->c > y->c;
}

static void tri_sift_down(al_trigram *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && tri_worse(&h[l], &h[w])) w = l;
        if (r < n && tri_worse(&h[r], &h[w])) w = r;
        if (w == i) return;
        al_trigram t = h[i];
        h[i] = h[w], h[w] = t, i = w;
    }
}

static void tri_push(al_trigram *h, int *n, int k, al_trigram x) {
    if (*n < k) {
        int i = (*n)++;
        h[i] = x;
        while (i > 0) { /* sift up */
            int p = (i - 1) / 2;
            if (!tri_worse(&h[i], &h[p])) break;
            al_trigram t = h[i];
            h[i] = h[p], h[p] = t, i = p;
        }
    } else if (tri_worse(&h[0], &x)) {
        h[0] = x;
        tri_sift_down(h, k, 0);
    }
}

static int tri_desc(const void *pa, const void *pb) {
    const al_trigram *a = pa, *b = pb;
    return tri_worse(a, b) ? 1 : tri_worse(b, a) ? -1 : 0;
}

/* Combine source a's best destinations (tb) and outputs (tc), both
 * positive and sorted, into the heap. Products only shrink along either
 * list, so each loop stops at the first product below the heap's worst. */
static void tri_add_source(al_trigram *heap, int *n, int k, int a, const vi *tb, int nb,
                           const vi *tc, int nc) {
    for (int i = 0; i < nb && nc > 0; i++) {
        if (*n == k && tb[i].v * tc[0].v < heap[0].score) break;
        for (int j = 0; j < nc; j++) {
            float s = tb[i].v * tc[j].v;
            if (*n == k && s < heap[0].score) break;
            al_trigram x = {a, tb[i].i, tc[j].i, tb[i].v, tc[j].v, s};
            tri_push(heap, n, k, x);
        }
    }
}

/* Per-head scratch for the block-wise full circuits. */
typedef struct full_ws {
    float *eq, *ek, *ev, *ou; /* (V,D) (V,D) (V,D) (D,V) */
    float *bqk, *bov; /* (blk, V) */
    float *best_v; /* (V) best centred QK per destination */
    int *best_a;
    vi *tb, *tc; /* (K) */
    float *buf;
} full_ws;

static int full_ws_alloc(full_ws *w, int V, int D, int blk, int k, al_err *e) {
    size_t vd = (size_t)V * D, bv = (size_t)blk * V;
    memset(w, 0, sizeof *w);
    w->buf = al_malloc(4 * vd + 2 * bv + (size_t)V, sizeof(float), e);
    w->best_a = al_malloc((size_t)V, sizeof(int), e);
    w->tb = al_malloc((size_t)k, sizeof(vi), e);
    w->tc = al_malloc((size_t)k, sizeof(vi), e);
    if (!w->buf || !w->best_a || !w->tb || !w->tc) return -1;
    float *p = w->buf;
    w->eq = p, p += vd;
    w->ek = p, p += vd;
    w->ev = p, p += vd;
    w->ou = p, p += vd;
    w->bqk = p, p += bv;
    w->bov = p, p += bv;
    w->best_v = p;
    return 0;
}

static void full_ws_free(full_ws *w) { free(w->buf), free(w->best_a), free(w->tb), free(w->tc); }

/* Running column-wise max and argmax (first index wins ties). */
static void col_max_update(const float *restrict row, float *restrict best, int *restrict arg,
                           int n, int a) {
    for (int b = 0; b < n; b++) {
        int gt = row[b] > best[b];
        best[b] = gt ? row[b] : best[b];
        arg[b] = gt ? a : arg[b];
    }
}

/* Subtract the column means of a (R,N) matrix from its rows. */
static void centre_rows_of(float *a, int R, int N) {
    for (int j = 0; j < N; j++) {
        double s = 0;
        for (int r = 0; r < R; r++) s += a[(size_t)r * N + j];
        float mu = (float)(s / R);
        for (int r = 0; r < R; r++) a[(size_t)r * N + j] -= mu;
    }
}

/* Subtract each row's mean from the row, (R,N). */
static void centre_each_row(float *a, int R, int N) {
    for (int r = 0; r < R; r++) {
        float *row = a + (size_t)r * N;
        double s = 0;
        for (int j = 0; j < N; j++) s += row[j];
        float mu = (float)(s / N);
        for (int j = 0; j < N; j++) row[j] -= mu;
    }
}

/* copying_top1, qk_top1_self and the top-K trigrams of one head.
 * Centring: QKc[B,A] = EQ[B]·(EK[A] - mean EK) is QK minus its row
 * (destination) mean; OVc[A,C] = EV[A]·(OU[:,C] - row means of OU) is OV
 * minus its row (source) mean. Centring shifts a row by a constant, so the
 * argmaxes are those of the raw circuits. */
static void full_circuits(const al_model *m, int l, int h, int blk, int k, full_ws *w,
                          al_circ_head *out) {
    int C = m->cfg.d_model, D = m->cfg.d_head, V = m->cfg.d_vocab;
    const float *we = m->p[AL_P_WE];
    rows_times(we, NULL, V, C, al_head_wq(m, l, h), D, w->eq);
    rows_times(we, NULL, V, C, al_head_wk(m, l, h), D, w->ek);
    rows_times(we, NULL, V, C, al_head_wv(m, l, h), D, w->ev);
    wo_wu(m, al_head_wo(m, l, h), NULL, V, w->ou);
    centre_rows_of(w->ek, V, D);
    centre_each_row(w->ou, D, V);
    for (int b = 0; b < V; b++) w->best_v[b] = -INFINITY, w->best_a[b] = -1;
    int n_self_ov = 0, n = 0;
    for (int a0 = 0; a0 < V; a0 += blk) {
        int nb = V - a0 < blk ? V - a0 : blk;
        /* bqk[i][B] = QKc[B, a0+i]; bov[i][C] = OVc[a0+i, C] */
        al_sgemm(false, true, nb, V, D, 1.0f, w->ek + (size_t)a0 * D, D, w->eq, D, 0.0f, w->bqk, V);
        al_sgemm(false, false, nb, V, D, 1.0f, w->ev + (size_t)a0 * D, D, w->ou, V, 0.0f, w->bov,
                 V);
        for (int i = 0; i < nb; i++) {
            int a = a0 + i;
            const float *qrow = w->bqk + (size_t)i * V, *orow = w->bov + (size_t)i * V;
            /* Branch-free loops so the compiler vectorises them: these
             * passes over V x V entries are the bulk of the work. */
            float mq = row_max(qrow, V), mo = row_max(orow, V);
            if (orow[a] == mo) { /* argmax is a unless an earlier entry ties */
                int first = 1;
                for (int c = 0; c < a && first; c++) first = orow[c] != mo;
                n_self_ov += first;
            }
            col_max_update(qrow, w->best_v, w->best_a, V, a);
            /* With the heap full at worst score τ, a triple of source a can
             * only enter if qk > τ/max(ov) and ov > τ/max(qk): most sources
             * are skipped or give a handful of candidates. The thresholds
             * are lowered a little so float rounding cannot lose a tie. */
            float tq = 0, to = 0;
            if (!(mq > 0 && mo > 0)) continue;
            if (n == k) {
                float tau = out->tri[0].score;
                if (mq * mo < tau * (1 - 1e-5f)) continue;
                tq = tau / mo * (1 - 1e-5f), to = tau / mq * (1 - 1e-5f);
            }
            int nbq = top_above(qrow, V, k, tq > 0 ? tq : 0, w->tb);
            int ncq = top_above(orow, V, k, to > 0 ? to : 0, w->tc);
            tri_add_source(out->tri, &n, k, a, w->tb, nbq, w->tc, ncq);
        }
    }
    int n_self_qk = 0;
    for (int b = 0; b < V; b++) n_self_qk += w->best_a[b] == b;
    out->copying_top1 = (double)n_self_ov / V;
    out->qk_top1_self = (double)n_self_qk / V;
    qsort(out->tri, (size_t)n, sizeof *out->tri, tri_desc);
    out->n_tri = n;
}

/* ---------------------------------------------------------- analysis */

static void spectrum_stats(const double *s, int D, int C, int *rank, double *eff, double *stab,
                           double *fro) {
    *rank = al_rank(s, D, C, C);
    *eff = al_effective_rank(s, D);
    *stab = al_stable_rank(s, D);
    *fro = al_fro_from_sv(s, D);
}

static int analyse_head(const al_model *m, const al_model *pm, int l, int h, const al_circ_opts *o,
                        const double *g, const factors *f, full_ws *w, al_circ_head *out,
                        al_err *e) {
    int C = m->cfg.d_model, D = m->cfg.d_head;
    out->layer = l, out->head = h;
    if (al_svd_values(f->cqk, D, D, out->qk_sv, e) || al_svd_values(f->cov, D, D, out->ov_sv, e))
        return -1;
    spectrum_stats(out->qk_sv, D, C, &out->qk_rank, &out->qk_eff_rank, &out->qk_stable_rank,
                   &out->qk_fro);
    spectrum_stats(out->ov_sv, D, C, &out->ov_rank, &out->ov_eff_rank, &out->ov_stable_rank,
                   &out->ov_fro);
    if (ov_eigen_g(m, l, h, g, out->eig_re, out->eig_im, &out->copying_eigen, e)) return -1;
    if (pos_prev_token(pm, l, h, &out->pos_prev_token, e)) return -1;
    full_circuits(m, l, h, o->block, o->top_k, w, out);
    return 0;
}

/* Stack the (C,D) matrix of each head side by side: (C, H*D*per). */
static void stack_cols(double *dst, int C, int width, int col0, const double *src, int D) {
    for (int c = 0; c < C; c++)
        memcpy(dst + (size_t)c * width + col0, src + (size_t)c * D, (size_t)D * sizeof *dst);
}

/* Union ranks and pairwise overlaps of one layer's read/write spaces. */
static int analyse_layer(const al_model *m, int l, al_circ_layer *out, al_err *e) {
    int C = m->cfg.d_model, D = m->cfg.d_head, H = m->cfg.n_heads;
    int wqk = 2 * D * H, wv = D * H;
    size_t cd2 = (size_t)C * 2 * D;
    double *sq = al_malloc((size_t)C * wqk, sizeof(double), e);
    double *sv = al_malloc((size_t)C * wv, sizeof(double), e);
    double *so = al_malloc((size_t)C * wv, sizeof(double), e);
    double *basis = al_malloc(3 * (size_t)H * cd2, sizeof(double), e);
    double *sing = al_malloc((size_t)C + wqk, sizeof(double), e);
    int rc = -1;
    if (!sq || !sv || !so || !basis || !sing) goto done;
    double *bq = basis, *bv = basis + H * cd2, *bo = basis + 2 * H * cd2;
    for (int h = 0; h < H; h++) {
        double *w[F_N], *buf;
        if (head_weights(m, l, h, w, &buf, e)) goto done;
        stack_cols(sq, C, wqk, 2 * D * h, w[F_Q], D);
        stack_cols(sq, C, wqk, 2 * D * h + D, w[F_K], D);
        stack_cols(sv, C, wv, D * h, w[F_V], D);
        stack_cols(so, C, wv, D * h, w[F_O], D);
        double *qk = al_malloc(cd2, sizeof *qk, e);
        int bad = !qk;
        if (qk) {
            stack_cols(qk, C, 2 * D, 0, w[F_Q], D);
            stack_cols(qk, C, 2 * D, D, w[F_K], D);
            bad = al_col_basis(qk, C, 2 * D, bq + h * cd2, &out->dim_qk[h], e) ||
                  al_col_basis(w[F_V], C, D, bv + h * cd2, &out->dim_v[h], e) ||
                  al_col_basis(w[F_O], C, D, bo + h * cd2, &out->dim_o[h], e);
        }
        free(qk), free(buf);
        if (bad) goto done;
    }
    int kq = C < wqk ? C : wqk, kv = C < wv ? C : wv;
    if (al_svd_values(sq, C, wqk, sing, e)) goto done;
    out->rank_qk = al_rank(sing, kq, C, wqk);
    if (al_svd_values(sv, C, wv, sing, e)) goto done;
    out->rank_v = al_rank(sing, kv, C, wv);
    if (al_svd_values(so, C, wv, sing, e)) goto done;
    out->rank_o = al_rank(sing, kv, C, wv);
    double *bases[3] = {bq, bv, bo}, *ovl[3] = {out->ov_qk, out->ov_v, out->ov_o};
    int *dims[3] = {out->dim_qk, out->dim_v, out->dim_o};
    for (int s = 0; s < 3; s++)
        for (int h1 = 0; h1 < H; h1++)
            for (int h2 = 0; h2 < H; h2++) {
                int k1 = dims[s][h1], k2 = dims[s][h2], kmin = k1 < k2 ? k1 : k2;
                double v = 0;
                if (kmin > 0) {
                    if (al_principal_cosines(bases[s] + h1 * cd2, k1, bases[s] + h2 * cd2, k2, C,
                                             sing, e))
                        goto done;
                    for (int i = 0; i < kmin; i++) v += sing[i] * sing[i];
                    v /= kmin;
                }
                ovl[s][h1 * H + h2] = v;
            }
    rc = 0;
done:
    free(sq), free(sv), free(so), free(basis), free(sing);
    return rc;
}

static int result_alloc(const al_model *m, const al_circ_opts *o, al_circ_result *r, al_err *e) {
    int L = m->cfg.n_layers, H = m->cfg.n_heads, D = m->cfg.d_head;
    int nh = L * H;
    memset(r, 0, sizeof *r);
    r->L = L, r->H = H, r->D = D, r->C = m->cfg.d_model, r->V = m->cfg.d_vocab;
    r->heads = al_calloc((size_t)nh, sizeof *r->heads, e);
    r->layers = al_calloc((size_t)L, sizeof *r->layers, e);
    if (!r->heads || !r->layers) return -1;
    for (int i = 0; i < nh; i++) {
        al_circ_head *hd = &r->heads[i];
        hd->qk_sv = al_calloc(4 * (size_t)D, sizeof(double), e);
        hd->tri = al_calloc((size_t)o->top_k, sizeof *hd->tri, e);
        if (!hd->qk_sv || !hd->tri) return -1;
        hd->ov_sv = hd->qk_sv + D;
        hd->eig_re = hd->qk_sv + 2 * D;
        hd->eig_im = hd->qk_sv + 3 * D;
    }
    for (int l = 0; l < L; l++) {
        al_circ_layer *ly = &r->layers[l];
        ly->dim_qk = al_calloc(3 * (size_t)H, sizeof(int), e);
        ly->ov_qk = al_calloc(3 * (size_t)H * H, sizeof(double), e);
        if (!ly->dim_qk || !ly->ov_qk) return -1;
        ly->dim_v = ly->dim_qk + H, ly->dim_o = ly->dim_qk + 2 * H;
        ly->ov_v = ly->ov_qk + H * H, ly->ov_o = ly->ov_qk + 2 * H * H;
    }
    int pairs = 0;
    for (int l1 = 0; l1 < L; l1++) pairs += H * H * (L - 1 - l1);
    if (pairs > 0) {
        r->comp = al_calloc((size_t)pairs, sizeof *r->comp, e);
        if (!r->comp) return -1;
    }
    return 0;
}

void al_circ_result_free(al_circ_result *r) {
    if (r->heads)
        for (int i = 0; i < r->L * r->H; i++) free(r->heads[i].qk_sv), free(r->heads[i].tri);
    if (r->layers)
        for (int l = 0; l < r->L; l++) free(r->layers[l].dim_qk), free(r->layers[l].ov_qk);
    free(r->heads), free(r->layers), free(r->comp);
    memset(r, 0, sizeof *r);
}

static int check_opts(const al_model *m, const al_circ_opts *o, al_err *e) {
    if (o->top_k < 1 || o->top_k > 100000)
        return al_errf(e, "circuits: top-k must be in 1..100000, got %d", o->top_k);
    if (o->block < 1) return al_errf(e, "circuits: block must be >= 1");
    if (o->mc_samples < 2)
        return al_errf(e, "circuits: mc-samples must be >= 2, got %d", o->mc_samples);
    if (m->cfg.d_head > m->cfg.d_model)
        return al_errf(e, "circuits: d_head %d > d_model %d is not supported", m->cfg.d_head,
                       m->cfg.d_model);
    return 0;
}

/* Factors and per-head analyses, heads in parallel. */
static int analyse_heads(const al_model *m, const al_model *pm, const al_circ_opts *o, factors *fs,
                         al_circ_result *r, al_err *e) {
    int nh = r->L * r->H, failed = 0, done = 0;
    double *g = NULL;
    if (unembed_embed(m, &g, e)) return -1;
    al_progress pr;
    al_progress_init(&pr, 10);
#pragma omp parallel
    {
        full_ws w;
        al_err le = {{0}};
        int ok = full_ws_alloc(&w, r->V, r->D, o->block, o->top_k, &le) == 0;
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < nh; i++) {
            int l = i / r->H, h = i % r->H, f;
#pragma omp atomic read
            f = failed;
            if (!ok || f) continue;
            if (head_factors(m, l, h, &fs[i], &le) ||
                analyse_head(m, pm, l, h, o, g, &fs[i], &w, &r->heads[i], &le)) {
                ok = 0;
                continue;
            }
#pragma omp critical(al_circ_progress)
            {
                done++;
                if (o->progress)
                    al_progress_count(&pr, done == nh, done, nh, "circuits: %d/%d heads", done, nh);
            }
        }
        if (!ok) {
#pragma omp critical(al_circ_err)
            {
                int f;
#pragma omp atomic read
                f = failed;
                if (!f && e) *e = le;
#pragma omp atomic write
                failed = 1;
            }
        }
        full_ws_free(&w);
    }
    if (o->progress) al_progress_done(&pr);
    free(g);
    return failed ? -1 : 0;
}

/* al_circ_analyse on a model m whose weights are folded; the positional
 * parts are read from pm (m, or for a shortformer model the unfolded
 * original: its positions join q and k after ln1, so its raw W_Q and W_K
 * read them exactly). */
static int analyse_folded(const al_model *m, const al_model *pm, const al_circ_opts *o,
                          al_circ_result *r, al_err *e) {
    double t0 = al_now();
    if (result_alloc(m, o, r, e)) {
        al_circ_result_free(r);
        return -1;
    }
    int nh = r->L * r->H;
    factors *fs = al_calloc((size_t)nh, sizeof *fs, e);
    double *scr = al_malloc(2 * (size_t)r->D * r->D, sizeof *scr, e);
    int rc = -1;
    if (!fs || !scr || analyse_heads(m, pm, o, fs, r, e)) goto done;
    for (int l = 0; l < r->L; l++)
        if (analyse_layer(m, l, &r->layers[l], e)) goto done;
    for (int i1 = 0; i1 < nh; i1++)
        for (int i2 = 0; i2 < nh; i2++) {
            if (i1 / r->H >= i2 / r->H) continue;
            al_circ_comp *c = &r->comp[r->n_comp++];
            c->l1 = i1 / r->H, c->h1 = i1 % r->H, c->l2 = i2 / r->H, c->h2 = i2 % r->H;
            comp_scores(&fs[i1], &fs[i2], c->score, scr);
        }
    if (r->n_comp > 0 &&
        al_circ_comp_baseline(r->C, r->D, o->mc_samples, o->seed, r->base_mean, r->base_sd, e))
        goto done;
    rc = 0;
done:
    if (fs)
        for (int i = 0; i < nh; i++) factors_free(&fs[i]);
    free(fs), free(scr);
    if (rc) al_circ_result_free(r);
    r->seconds = al_now() - t0;
    return rc;
}

/* *f = a copy of m processed with TransformerLens's fold_ln and
 * center_writing_weights (the readers' LayerNorm folded in; the writers
 * centred, as every reader sees them). A shortformer model, which
 * TransformerLens does not fold, is folded as if its positions were not
 * there: the copy's token parts are the model's (its residual stream
 * holds no positions, so ln1 sees only them), its W_pos is not (read
 * positions from m). */
static int folded_copy(const al_model *m, al_model *f, al_err *e) {
    al_config c = m->cfg;
    c.pos_type = AL_POS_STANDARD; /* same tensors; lets process.c fold */
    if (al_model_alloc(f, &c, e)) return -1;
    memcpy(f->params, m->params, sizeof(float) * m->n_params);
    memcpy(f->gates, m->gates, sizeof(float) * (size_t)m->cfg.n_layers * m->cfg.n_heads);
    const al_process_opts po = {.fold_ln = 1, .center_writing_weights = 1};
    if (al_model_process(f, &po, e)) {
        al_model_free(f);
        return -1;
    }
    f->cfg.pos_type = m->cfg.pos_type;
    return 0;
}

int al_circ_analyse(const al_model *m, const al_circ_opts *o, al_circ_result *r, al_err *e) {
    double t0 = al_now();
    memset(r, 0, sizeof *r);
    if (check_opts(m, o, e)) return -1;
    if (weights_folded(&m->cfg)) return analyse_folded(m, m, o, r, e);
    al_model f;
    if (folded_copy(m, &f, e)) return -1;
    int rc = analyse_folded(&f, m, o, r, e);
    al_model_free(&f);
    r->seconds = al_now() - t0;
    return rc;
}

int al_circ_notes(const al_config *c, const char *notes[2]) {
    int n = 0;
    if (c->norm_type != AL_NORM_NONE && c->pos_type == AL_POS_SHORTFORMER && !weights_folded(c))
        notes[n++] = "circuits of a shortformer LayerNorm model read the token parts with ln1 and "
                     "ln_final folded in as if positions were absent (on a copy) and the "
                     "positional parts from the raw W_pos, W_Q, W_K (positions join q and k "
                     "after ln1); LayerNorm's per-position scale is left out";
    else if (c->norm_type != AL_NORM_NONE)
        notes[n++] = "circuits of a LayerNorm model read its weights with LayerNorm folded in "
                     "(TransformerLens's fold_ln and center_writing_weights, on a copy when the "
                     "model's are not) and leave out its per-position scale: each circuit is "
                     "the model's up to ln1's and ln_final's scale";
    if (!al_config_is_plain(c))
        notes[n++] = "circuits leave the biases out: QK is the token parts' x W_Q W_K^T y^T "
                     "alone (the terms b_Q and b_K add are dropped), OV is W_V W_O without b_V "
                     "and b_O, and the full circuits read W_U without b_U";
    return n;
}
