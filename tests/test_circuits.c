/* test_circuits.c -- circuits on hand-built models whose answers are known,
 * and against dense computations (the 256x256 and V x V products that the
 * library never forms are formed here, in double). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/circuits.h"
#include "attnlab/linalg.h"
#include "attnlab/model.h"
#include "attnlab/tokenizer.h"
#include "test.h"

/* ------------------------------------------------------------ helpers */

/* A model with the default widths (C 256, H 8, D 32), zero weights. */
static void make_model(al_model *m, int L, int V, int tied) {
    al_config c = al_config_default();
    c.n_layers = L, c.d_vocab = V, c.tied_embeddings = tied;
    al_err e;
    CHECK_OK(al_model_alloc(m, &c, &e), &e);
}

static void fill_normal(float *w, size_t n, double sd, al_rng *r) {
    for (size_t i = 0; i < n; i++) w[i] = (float)(sd * al_rng_normal(r));
}

/* Random weights in every head (sd 1/√C), embeddings sd 0.5, W_U sd 1/√C. */
static void randomise(al_model *m, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    double C = m->cfg.d_model;
    fill_normal(m->p[AL_P_WE], m->param_size[AL_P_WE], 0.5, &r);
    fill_normal(m->p[AL_P_WPOS], m->param_size[AL_P_WPOS], 0.5, &r);
    for (int i = AL_P_WQ; i <= AL_P_WO; i++)
        fill_normal(m->p[i], m->param_size[i], 1 / sqrt(C), &r);
    if (m->p[AL_P_WU]) fill_normal(m->p[AL_P_WU], m->param_size[AL_P_WU], 1 / sqrt(C), &r);
}

/* Dense double copies. W_QK (C,C) = W_Q W_Kᵀ, W_OV (C,C) = W_V W_O. */
static double *dense_qk(const al_model *m, int l, int h) {
    int C = m->cfg.d_model, D = m->cfg.d_head;
    const float *q = al_head_wq(m, l, h), *k = al_head_wk(m, l, h);
    double *out = calloc((size_t)C * C, sizeof *out);
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += (double)q[i * D + d] * k[j * D + d];
            out[i * C + j] = s;
        }
    return out;
}

static double *dense_ov(const al_model *m, int l, int h) {
    int C = m->cfg.d_model, D = m->cfg.d_head;
    const float *v = al_head_wv(m, l, h), *o = al_head_wo(m, l, h);
    double *out = calloc((size_t)C * C, sizeof *out);
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += (double)v[i * D + d] * o[d * C + j];
            out[i * C + j] = s;
        }
    return out;
}

/* W_U as a dense (C,V) double matrix (W_Eᵀ when tied). */
static double *dense_wu(const al_model *m) {
    int C = m->cfg.d_model, V = m->cfg.d_vocab;
    double *u = calloc((size_t)C * V, sizeof *u);
    const float *wu = al_model_wu(m), *we = m->p[AL_P_WE];
    for (int c = 0; c < C; c++)
        for (int v = 0; v < V; v++) u[c * V + v] = wu ? wu[c * V + v] : we[v * C + c];
    return u;
}

static double *dense_we(const al_model *m) {
    size_t n = m->param_size[AL_P_WE];
    double *w = malloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++) w[i] = m->p[AL_P_WE][i];
    return w;
}

static double fro_ratio(const double *a, const double *b, int tb, int C) {
    double *p = malloc((size_t)C * C * sizeof *p);
    al_dgemm(0, tb, C, C, C, a, b, p);
    double r = al_fro(p, C, C) / (al_fro(a, C, C) * al_fro(b, C, C));
    free(p);
    return r;
}

static const al_circ_head *head_of(const al_circ_result *r, int l, int h) {
    return &r->heads[l * r->H + h];
}

static void analyse(const al_model *m, int top_k, al_circ_result *r) {
    al_circ_opts o = al_circ_opts_default();
    o.top_k = top_k;
    o.mc_samples = 100;
    al_err e;
    CHECK_OK(al_circ_analyse(m, &o, r, &e), &e);
}

/* --------------------------------------------------------------- tests */

/* Embeddings whose first 32 coordinates are distinct unit vectors u_A
 * (other coordinates random). Head 0: W_V = [e_0..e_31], W_O = its
 * transpose, so W_OV projects onto those 32 coordinates and full OV[A,C] =
 * u_A·u_C with W_U = W_Eᵀ: PSD (all λ ≥ 0, copying_eigen = 1) and
 * maximal on the diagonal (copying_top1 = 1). Head 1 is its negation. */
static void build_copying(al_model *m, int tied) {
    enum { V = 400 };
    make_model(m, 1, V, tied);
    randomise(m, 11);
    int C = m->cfg.d_model, D = m->cfg.d_head;
    al_rng r;
    al_rng_seed(&r, 12);
    float *we = m->p[AL_P_WE];
    for (int a = 0; a < V; a++) {
        double n = 0;
        for (int d = 0; d < D; d++) n += (double)we[a * C + d] * we[a * C + d];
        for (int d = 0; d < D; d++) we[a * C + d] = (float)(we[a * C + d] / sqrt(n));
    }
    if (!tied) /* untied but equal: W_U = W_Eᵀ stored explicitly */
        for (int c = 0; c < C; c++)
            for (int a = 0; a < V; a++) m->p[AL_P_WU][c * V + a] = we[a * C + c];
    for (int h = 0; h < 2; h++) {
        float *wv = al_head_wv(m, 0, h), *wo = al_head_wo(m, 0, h);
        memset(wv, 0, sizeof(float) * C * D);
        memset(wo, 0, sizeof(float) * C * D);
        for (int d = 0; d < D; d++) {
            wv[d * D + d] = 1.0f;
            wo[d * C + d] = h == 0 ? 0.5f : -0.5f;
        }
    }
}

TEST(circ_copying_head_scores) {
    for (int tied = 0; tied <= 1; tied++) {
        al_model m;
        build_copying(&m, tied);
        al_circ_result r;
        analyse(&m, 5, &r);
        const al_circ_head *cp = head_of(&r, 0, 0), *neg = head_of(&r, 0, 1);
        CHECK_NEAR(cp->copying_eigen, 1.0, 1e-9);
        CHECK_NEAR(cp->copying_top1, 1.0, 0);
        CHECK_NEAR(neg->copying_eigen, -1.0, 1e-9);
        CHECK_NEAR(neg->copying_top1, 0.0, 0);
        /* random heads score in between */
        for (int h = 2; h < 8; h++) {
            CHECK(fabs(head_of(&r, 0, h)->copying_eigen) < 0.9);
            CHECK(head_of(&r, 0, h)->copying_top1 < 0.5);
        }
        /* eigenvalues of the projection head: all ≥ 0, real */
        for (int i = 0; i < r.D; i++) {
            CHECK(cp->eig_re[i] > -1e-9);
            CHECK_NEAR(cp->eig_im[i], 0, 1e-9);
        }
        al_circ_result_free(&r);
        al_model_free(&m);
    }
}

/* W_Q = A B with A (C,r), B (r,D): W_QK has rank r exactly. */
/* A head whose OV never reaches the unembedding (W_O = 0) has a zero
 * full OV circuit: copying_eigen is 0/0, NaN (stored as NULL), not 0,
 * which would count it as a head that does not copy. */
TEST(circ_copying_eigen_zero_ov_is_nan) {
    al_model m;
    build_copying(&m, 0);
    memset(al_head_wo(&m, 0, 2), 0, sizeof(float) * m.cfg.d_head * m.cfg.d_model);
    al_circ_result r;
    analyse(&m, 5, &r);
    CHECK(isnan(head_of(&r, 0, 2)->copying_eigen));
    CHECK_NEAR(head_of(&r, 0, 0)->copying_eigen, 1.0, 1e-9);
    for (int h = 3; h < 8; h++) CHECK(!isnan(head_of(&r, 0, h)->copying_eigen));
    al_circ_result_free(&r);
    al_model_free(&m);
}

TEST(circ_chosen_rank_and_dense_singular_values) {
    al_model m;
    make_model(&m, 1, 64, 0);
    randomise(&m, 21);
    int C = m.cfg.d_model, D = m.cfg.d_head;
    int ranks[3] = {1, 5, 17};
    al_rng g;
    al_rng_seed(&g, 22);
    for (int i = 0; i < 3; i++) {
        int rk = ranks[i];
        double *a = malloc(sizeof(double) * C * rk), *b = malloc(sizeof(double) * rk * D);
        for (int j = 0; j < C * rk; j++) a[j] = al_rng_normal(&g);
        for (int j = 0; j < rk * D; j++) b[j] = al_rng_normal(&g) / sqrt(C);
        float *w = i == 2 ? al_head_wo(&m, 0, i) : al_head_wq(&m, 0, i);
        for (int c = 0; c < C; c++) /* head 2: low-rank W_O (D,C) instead */
            for (int d = 0; d < D; d++) {
                double s = 0;
                for (int t = 0; t < rk; t++) s += a[c * rk + t] * b[t * D + d];
                if (i == 2)
                    w[d * C + c] = (float)s;
                else
                    w[c * D + d] = (float)s;
            }
        free(a), free(b);
    }
    al_circ_result r;
    analyse(&m, 3, &r);
    CHECK(head_of(&r, 0, 0)->qk_rank == 1);
    CHECK(head_of(&r, 0, 1)->qk_rank == 5);
    CHECK(head_of(&r, 0, 2)->ov_rank == 17);
    CHECK(head_of(&r, 0, 2)->qk_rank == 32);
    for (int h = 3; h < 8; h++)
        CHECK(head_of(&r, 0, h)->qk_rank == 32 && head_of(&r, 0, h)->ov_rank == 32);
    /* dense 256x256 SVD agrees with the factored core to 1e-4 relative */
    double *s = malloc(sizeof(double) * C);
    for (int h = 0; h < 4; h++)
        for (int kind = 0; kind < 2; kind++) {
            double *dm = kind ? dense_ov(&m, 0, h) : dense_qk(&m, 0, h);
            al_err e;
            CHECK_OK(al_svd_values(dm, C, C, s, &e), &e);
            const double *f = kind ? head_of(&r, 0, h)->ov_sv : head_of(&r, 0, h)->qk_sv;
            for (int i = 0; i < D; i++)
                CHECKF(fabs(f[i] - s[i]) <= 1e-4 * (s[i] > 1e-6 * s[0] ? s[i] : s[0]),
                       "head %d %s σ%d factored %.9g dense %.9g", h, kind ? "ov" : "qk", i, f[i],
                       s[i]);
            CHECK(s[D] < 1e-9 * s[0]); /* rank ≤ 32 */
            CHECK(al_rank(s, C, C, C) ==
                  (kind ? head_of(&r, 0, h)->ov_rank : head_of(&r, 0, h)->qk_rank));
            double fro = al_fro(dm, C, C);
            CHECK_NEAR((kind ? head_of(&r, 0, h)->ov_fro : head_of(&r, 0, h)->qk_fro) / fro, 1,
                       1e-9);
            free(dm);
        }
    free(s);
    al_circ_result_free(&r);
    al_model_free(&m);
}

/* Nonzero eigenvalues of full OV = those of the dense C x C product
 * W_V W_O W_U W_E; copying_eigen from all C of them. */
TEST(circ_eigenvalues_match_dense) {
    for (int tied = 0; tied <= 1; tied++) {
        al_model m;
        make_model(&m, 1, 300, tied);
        randomise(&m, 31 + tied);
        int C = m.cfg.d_model, D = m.cfg.d_head, V = m.cfg.d_vocab;
        double *wu = dense_wu(&m), *we = dense_we(&m);
        double *g = malloc(sizeof(double) * C * C), *p = malloc(sizeof(double) * C * C);
        al_dgemm(0, 0, C, C, V, wu, we, g); /* W_U W_E */
        double *re = malloc(sizeof(double) * C), *im = malloc(sizeof(double) * C);
        for (int h = 0; h < 3; h++) {
            double *ov = dense_ov(&m, 0, h);
            al_dgemm(0, 0, C, C, C, ov, g, p);
            al_err e;
            CHECK_OK(al_eigvals(p, C, re, im, &e), &e);
            double fre[32], fim[32], copy;
            CHECK_OK(al_circ_ov_eigen(&m, 0, h, fre, fim, &copy, &e), &e);
            double big = hypot(re[0], im[0]);
            for (int i = 0; i < D; i++) { /* nearest dense eigenvalue */
                double best = INFINITY;
                for (int j = 0; j < D + 4; j++)
                    best = fmin(best, hypot(fre[i] - re[j], fim[i] - im[j]));
                CHECKF(best <= 1e-4 * big, "head %d λ%d (%g,%g) off by %g", h, i, fre[i], fim[i],
                       best);
            }
            CHECK(hypot(re[D], im[D]) < 1e-9 * big); /* the rest are zero */
            double num = 0, den = 0;
            for (int i = 0; i < C; i++) num += re[i], den += hypot(re[i], im[i]);
            CHECK_NEAR(copy, num / den, 1e-6);
            free(ov);
        }
        free(wu), free(we), free(g), free(p), free(re), free(im);
        al_model_free(&m);
    }
}

/* Full OV and full QK (V x V), dense here, against the block-wise code. */
TEST(circ_full_circuits_match_dense) {
    al_model m;
    enum { V = 300 };
    make_model(&m, 1, V, 0);
    randomise(&m, 41);
    int C = m.cfg.d_model;
    double *wu = dense_wu(&m), *we = dense_we(&m);
    double *t = malloc(sizeof(double) * V * C), *ov = malloc(sizeof(double) * V * V),
           *qk = malloc(sizeof(double) * V * V);
    int ids[V];
    for (int i = 0; i < V; i++) ids[i] = i;
    float *fov = malloc(sizeof(float) * V * V), *fqk = malloc(sizeof(float) * V * V);
    al_circ_result r;
    analyse(&m, 20, &r);
    for (int h = 0; h < 2; h++) {
        double *wov = dense_ov(&m, 0, h), *wqk = dense_qk(&m, 0, h);
        al_dgemm(0, 0, V, C, C, we, wov, t);
        al_dgemm(0, 0, V, V, C, t, wu, ov); /* W_E W_OV W_U */
        al_dgemm(0, 0, V, C, C, we, wqk, t);
        al_dgemm(0, 1, V, V, C, t, we, qk); /* W_E W_QK W_Eᵀ */
        al_err e;
        CHECK_OK(al_circ_full_ov(&m, 0, h, ids, V, ids, V, fov, &e), &e);
        CHECK_OK(al_circ_full_qk(&m, 0, h, ids, V, ids, V, fqk, &e), &e);
        double mo = 0, mq = 0, dmo = 0, dmq = 0;
        for (int i = 0; i < V * V; i++) {
            mo = fmax(mo, fabs(ov[i])), mq = fmax(mq, fabs(qk[i]));
            dmo = fmax(dmo, fabs(ov[i] - fov[i])), dmq = fmax(dmq, fabs(qk[i] - fqk[i]));
        }
        CHECK(dmo <= 1e-4 * mo);
        CHECK(dmq <= 1e-4 * mq);
        /* copying_top1 and qk_top1_self from dense argmaxes */
        int self_ov = 0, self_qk = 0;
        for (int a = 0; a < V; a++) {
            int ao = 0, aq = 0;
            for (int c = 1; c < V; c++) {
                if (ov[a * V + c] > ov[a * V + ao]) ao = c;
                if (qk[a * V + c] > qk[a * V + aq]) aq = c;
            }
            self_ov += ao == a, self_qk += aq == a;
        }
        const al_circ_head *hd = head_of(&r, 0, h);
        CHECK_NEAR(hd->copying_top1, (double)self_ov / V, 1e-12);
        CHECK_NEAR(hd->qk_top1_self, (double)self_qk / V, 1e-12);
        /* the top trigram is the best (A,B,C) over positive centred entries */
        double rq[V], ro[V]; /* row means: QK over sources, OV over outputs */
        for (int i = 0; i < V; i++) {
            rq[i] = ro[i] = 0;
            for (int j = 0; j < V; j++) rq[i] += qk[i * V + j] / V, ro[i] += ov[i * V + j] / V;
        }
        double best = 0;
        int ba = -1, bb = -1, bc = -1;
        for (int a = 0; a < V; a++) {
            double mqa = 0, moa = 0;
            int bq = -1, bo = -1;
            for (int b = 0; b < V; b++)
                if (qk[b * V + a] - rq[b] > mqa) mqa = qk[b * V + a] - rq[b], bq = b;
            for (int c = 0; c < V; c++)
                if (ov[a * V + c] - ro[a] > moa) moa = ov[a * V + c] - ro[a], bo = c;
            if (bq >= 0 && bo >= 0 && mqa * moa > best) best = mqa * moa, ba = a, bb = bq, bc = bo;
        }
        CHECK(hd->n_tri == 20);
        CHECK(hd->tri[0].a == ba && hd->tri[0].b == bb && hd->tri[0].c == bc);
        CHECK_NEAR(hd->tri[0].score / best, 1, 1e-4);
        for (int i = 1; i < hd->n_tri; i++) CHECK(hd->tri[i].score <= hd->tri[i - 1].score);
        free(wov), free(wqk);
    }
    al_circ_result_free(&r);
    free(wu), free(we), free(t), free(ov), free(qk), free(fov), free(fqk);
    al_model_free(&m);
}

/* One-hot embeddings (token i = e_i, W_U = W_Eᵀ), head 0 planted:
 * W_Q col i = s_i e_{B_i}, W_K col i = e_{A_i}  → full QK[B_i, A_i] = s_i
 * W_V col i = t_i e_{A_i}, W_O row i = e_{C_i}  → full OV[A_i, C_i] = t_i
 * Row centring subtracts (row sum)/V; the expected triples and scores
 * follow by hand (see below). All other heads are zero. */
TEST(circ_skip_trigrams_planted) {
    enum { V = 64 };
    al_model m;
    make_model(&m, 1, V, 0);
    int C = m.cfg.d_model, D = m.cfg.d_head;
    for (int i = 0; i < V; i++) {
        m.p[AL_P_WE][i * C + i] = 1;
        m.p[AL_P_WU][i * V + i] = 1;
    }
    struct {
        int b, a;
        float s;
    } qk[] = {{10, 5, 3}, {11, 5, 2}, {12, 7, 1.5f}, {13, 8, 1}};
    struct {
        int a, c;
        float t;
    } ov[] = {{5, 20, 2}, {5, 21, 1}, {7, 22, 4}, {9, 23, 5}};
    float *wq = al_head_wq(&m, 0, 0), *wk = al_head_wk(&m, 0, 0);
    float *wv = al_head_wv(&m, 0, 0), *wo = al_head_wo(&m, 0, 0);
    for (int i = 0; i < 4; i++) {
        wq[qk[i].b * D + i] = qk[i].s;
        wk[qk[i].a * D + i] = 1;
        wv[ov[i].a * D + i] = ov[i].t;
        wo[i * C + ov[i].c] = 1;
    }
    /* centred: QKc[B,A] = s - s/V (row B has one entry); OVc[A,C] = t - (row sum)/V.
     * A=8 has no OV, A=9 no QK: neither forms a triple. */
    double q10 = 3 - 3.0 / V, q11 = 2 - 2.0 / V, q12 = 1.5 - 1.5 / V;
    double o20 = 2 - 3.0 / V, o21 = 1 - 3.0 / V, o22 = 4 - 4.0 / V;
    struct {
        int a, b, c;
        double s;
    } want[] = {
        {7, 12, 22, q12 * o22}, /* 5.814 */
        {5, 10, 20, q10 * o20}, /* 5.768 */
        {5, 11, 20, q11 * o20}, /* 3.845 */
        {5, 10, 21, q10 * o21}, /* 2.815 */
        {5, 11, 21, q11 * o21}, /* 1.877 */
    };
    for (int k = 3; k <= 50; k += 47) {
        al_circ_result r;
        analyse(&m, k, &r);
        const al_circ_head *h = head_of(&r, 0, 0);
        int n = k < 5 ? k : 5;
        CHECK(h->n_tri == n);
        for (int i = 0; i < n && i < h->n_tri; i++) {
            CHECKF(h->tri[i].a == want[i].a && h->tri[i].b == want[i].b && h->tri[i].c == want[i].c,
                   "k=%d rank %d: got %d…%d→%d want %d…%d→%d", k, i, h->tri[i].a, h->tri[i].b,
                   h->tri[i].c, want[i].a, want[i].b, want[i].c);
            CHECK_NEAR(h->tri[i].score, want[i].s, 1e-5);
            CHECK_NEAR(h->tri[i].qk * h->tri[i].ov, want[i].s, 1e-5);
        }
        for (int hh = 1; hh < 8; hh++) CHECK(head_of(&r, 0, hh)->n_tri == 0);
        /* by hand: W_QK = e10(3e5)ᵀ + e11(2e5)ᵀ + 1.5 e12 e7ᵀ + e13 e8ᵀ has
         * columns only at sources 5, 7, 8: rank 3; W_OV rows at 5, 7, 9: rank 3 */
        CHECK(h->qk_rank == 3 && h->ov_rank == 3);
        al_circ_result_free(&r);
    }
    al_model_free(&m);
}

/* Head 1.3 reads head 0.5's output through W_K: W_K[1,3] = W_O[0,5]ᵀ.
 * Its K-composition is the top pair, far above the random baseline; all
 * other K pairs are within the baseline's spread. */
TEST(circ_k_composition_planted) {
    al_model m;
    make_model(&m, 2, 64, 0);
    randomise(&m, 51);
    int C = m.cfg.d_model, D = m.cfg.d_head;
    float *wk = al_head_wk(&m, 1, 3);
    const float *wo = al_head_wo(&m, 0, 5);
    for (int c = 0; c < C; c++)
        for (int d = 0; d < D; d++) wk[c * D + d] = wo[d * C + c];
    al_circ_result r;
    analyse(&m, 3, &r);
    CHECK(r.n_comp == 64);
    int best = -1;
    for (int i = 0; i < r.n_comp; i++)
        if (best < 0 || r.comp[i].score[AL_COMP_K] > r.comp[best].score[AL_COMP_K]) best = i;
    CHECK(r.comp[best].l1 == 0 && r.comp[best].h1 == 5 && r.comp[best].l2 == 1 &&
          r.comp[best].h2 == 3);
    double bm = r.base_mean[AL_COMP_K], bs = r.base_sd[AL_COMP_K];
    CHECK(bs > 0 && bm > 0);
    CHECKF(r.comp[best].score[AL_COMP_K] > bm + 20 * bs, "planted %g baseline %g ± %g",
           r.comp[best].score[AL_COMP_K], bm, bs);
    for (int i = 0; i < r.n_comp; i++) {
        if (i == best) continue;
        for (int k = 0; k < AL_COMP_N; k++)
            CHECKF(fabs(r.comp[i].score[k] - r.base_mean[k]) < 5 * r.base_sd[k],
                   "%s %d.%d->%d.%d: %g vs baseline %g ± %g", al_comp_names[k], r.comp[i].l1,
                   r.comp[i].h1, r.comp[i].l2, r.comp[i].h2, r.comp[i].score[k], r.base_mean[k],
                   r.base_sd[k]);
    }
    /* dense Frobenius ratios for the planted pair and one other */
    int pairs[2][4] = {{0, 5, 1, 3}, {0, 2, 1, 6}};
    for (int p = 0; p < 2; p++) {
        double *ov1 = dense_ov(&m, pairs[p][0], pairs[p][1]);
        double *qk2 = dense_qk(&m, pairs[p][2], pairs[p][3]);
        double *ov2 = dense_ov(&m, pairs[p][2], pairs[p][3]);
        double want[3] = {fro_ratio(ov1, qk2, 0, C), fro_ratio(ov1, qk2, 1, C),
                          fro_ratio(ov1, ov2, 0, C)};
        double got[3];
        al_err e;
        CHECK_OK(al_circ_composition(&m, pairs[p][0], pairs[p][1], pairs[p][2], pairs[p][3], got,
                                     &e),
                 &e);
        for (int k = 0; k < 3; k++) CHECK_NEAR(got[k] / want[k], 1, 1e-9);
        free(ov1), free(qk2), free(ov2);
    }
    al_circ_result_free(&r);
    al_model_free(&m);
}

/* The Monte Carlo baseline against an independent dense estimate: mean
 * ratios of independent Gaussian heads formed as 256x256 products. */
TEST(circ_composition_baseline_dense) {
    enum { C = 256, D = 32, N = 24 };
    double mean[3], sd[3];
    al_err e;
    CHECK_OK(al_circ_comp_baseline(C, D, 200, 5, mean, sd, &e), &e);
    al_rng g;
    al_rng_seed(&g, 99);
    double *w = malloc(sizeof(double) * C * D * 6), *m1 = malloc(sizeof(double) * C * C),
           *m2 = malloc(sizeof(double) * C * C), *m3 = malloc(sizeof(double) * C * C);
    double acc[3] = {0};
    for (int s = 0; s < N; s++) {
        for (int i = 0; i < C * D * 6; i++) w[i] = al_rng_normal(&g);
        double *v1 = w, *o1 = w + C * D, *q2 = w + 2 * C * D, *k2 = w + 3 * C * D,
               *v2 = w + 4 * C * D, *o2 = w + 5 * C * D; /* o as (D,C) */
        al_dgemm(0, 0, C, C, D, v1, o1, m1); /* OV1 */
        al_dgemm(0, 1, C, C, D, q2, k2, m2); /* QK2 */
        al_dgemm(0, 0, C, C, D, v2, o2, m3); /* OV2 */
        acc[0] += fro_ratio(m1, m2, 0, C) / N;
        acc[1] += fro_ratio(m1, m2, 1, C) / N;
        acc[2] += fro_ratio(m1, m3, 0, C) / N;
    }
    for (int k = 0; k < 3; k++)
        CHECKF(fabs(acc[k] - mean[k]) < 4 * sd[k] / sqrt(N) + 4 * sd[k] / sqrt(200),
               "%s: dense %g vs baseline %g ± %g", al_comp_names[k], acc[k], mean[k], sd[k]);
    /* same seed, same numbers */
    double mean2[3], sd2[3];
    CHECK_OK(al_circ_comp_baseline(C, D, 200, 5, mean2, sd2, &e), &e);
    CHECK(memcmp(mean, mean2, sizeof mean) == 0);
    free(w), free(m1), free(m2), free(m3);
}

/* Heads on disjoint coordinate blocks split the residual stream: union
 * ranks 256 and zero overlap. Planted exceptions: head 1's W_O rows span
 * head 0's (overlap 1, union rank 224); head 3's W_V is head 2's block
 * rotated by θ towards block 3 (all principal cosines cos θ). */
TEST(circ_head_overlap_planted) {
    al_model m;
    make_model(&m, 1, 16, 0);
    int C = m.cfg.d_model, D = m.cfg.d_head;
    double th = 1.0;
    for (int h = 0; h < 8; h++) {
        float *q = al_head_wq(&m, 0, h), *k = al_head_wk(&m, 0, h), *v = al_head_wv(&m, 0, h),
              *o = al_head_wo(&m, 0, h);
        int ob = h == 1 ? 0 : h; /* head 1 writes where head 0 does */
        for (int d = 0; d < D; d++) {
            q[(32 * h + d) * D + d] = 1;
            k[(32 * h + d) * D + d] = 2;
            if (h == 3) {
                v[(32 * 2 + d) * D + d] = (float)cos(th);
                v[(32 * 3 + d) * D + d] = (float)sin(th);
            } else {
                v[(32 * h + d) * D + d] = 1;
            }
            o[d * C + 32 * ob + d] = 1;
            if (h == 1) o[d * C + 32 * ob + (d + 1) % D] = 0.5f; /* same span, mixed */
        }
    }
    al_circ_result r;
    analyse(&m, 1, &r);
    const al_circ_layer *ly = &r.layers[0];
    CHECK(ly->rank_qk == 256);
    CHECK(ly->rank_v == 256);
    CHECK(ly->rank_o == 224);
    for (int i = 0; i < 8; i++) {
        CHECK(ly->dim_qk[i] == 32 && ly->dim_v[i] == 32 && ly->dim_o[i] == 32);
        for (int j = 0; j < 8; j++) {
            double wq = i == j, wv = i == j, wo = i == j;
            double cf = (float)cos(th), sf = (float)sin(th); /* as stored */
            if ((i == 2 && j == 3) || (i == 3 && j == 2)) wv = cf * cf / (cf * cf + sf * sf);
            if ((i == 0 && j == 1) || (i == 1 && j == 0)) wo = 1;
            CHECK_NEAR(ly->ov_qk[i * 8 + j], wq, 1e-9);
            CHECK_NEAR(ly->ov_v[i * 8 + j], wv, 1e-9);
            CHECK_NEAR(ly->ov_o[i * 8 + j], wo, 1e-9);
        }
    }
    al_circ_result_free(&r);
    al_model_free(&m);
}

/* Positions as unit-circle pairs at 16 incommensurate frequencies; W_Q
 * rotates each pair back by one step, so q_t·k_s ∝ Σ_j cos(ω_j (t-1-s)):
 * largest at s = t-1. pos_prev_token must be near 1, and the positional
 * QK equals the dense W_pos W_QK W_posᵀ. */
TEST(circ_positional_prev_token) {
    al_model m;
    make_model(&m, 1, 16, 0);
    int C = m.cfg.d_model, D = m.cfg.d_head, T = m.cfg.n_ctx;
    double w[16];
    for (int j = 0; j < 16; j++) w[j] = 0.5 + 2.5 * j / 16.0 + 0.1 * sin(j * 7.0);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < 16; j++) {
            m.p[AL_P_WPOS][t * C + 2 * j] = (float)cos(w[j] * t);
            m.p[AL_P_WPOS][t * C + 2 * j + 1] = (float)sin(w[j] * t);
        }
    float *q = al_head_wq(&m, 0, 0), *k = al_head_wk(&m, 0, 0);
    double scale = 5.0;
    for (int j = 0; j < 16; j++) {
        /* q = R(-ω) p_t as a row vector: (c,s) -> (c cos ω + s sin ω, -c sin ω + s cos ω) */
        double c = cos(w[j]), s = sin(w[j]);
        q[(2 * j) * D + 2 * j] = (float)(scale * c);
        q[(2 * j) * D + 2 * j + 1] = (float)(-scale * s);
        q[(2 * j + 1) * D + 2 * j] = (float)(scale * s);
        q[(2 * j + 1) * D + 2 * j + 1] = (float)(scale * c);
        k[(2 * j) * D + 2 * j] = 1;
        k[(2 * j + 1) * D + 2 * j + 1] = 1;
    }
    al_circ_result r;
    analyse(&m, 1, &r);
    CHECKF(head_of(&r, 0, 0)->pos_prev_token > 0.9, "pos_prev_token %g",
           head_of(&r, 0, 0)->pos_prev_token);
    /* a zero head attends uniformly: A[t,t-1] = 1/(t+1) */
    double uni = 0;
    for (int t = 1; t < T; t++) uni += 1.0 / (t + 1) / (T - 1);
    CHECK_NEAR(head_of(&r, 0, 1)->pos_prev_token, uni, 1e-9);
    float *pq = malloc(sizeof(float) * T * T);
    al_err e;
    CHECK_OK(al_circ_positional_qk(&m, 0, 0, pq, &e), &e);
    double *wqk = dense_qk(&m, 0, 0), maxd = 0;
    for (int t = 0; t < T; t += 17)
        for (int s = 0; s < T; s += 13) {
            double v = 0;
            for (int a = 0; a < C; a++)
                for (int b = 0; b < C; b++)
                    v += m.p[AL_P_WPOS][t * C + a] * wqk[a * C + b] * m.p[AL_P_WPOS][s * C + b];
            maxd = fmax(maxd, fabs(v - pq[t * T + s]));
        }
    CHECK(maxd < 1e-4);
    free(pq), free(wqk);
    al_circ_result_free(&r);
    al_model_free(&m);
}

/* ------------------------------------------------ NumPy cross-check */

static const char *find_numpy_python(void) {
    static const char *cands[] = {"python3", "/usr/bin/python3"};
    for (int i = 0; i < 2; i++)
        if (t_sh("%s -c 'import numpy' >/dev/null 2>&1", cands[i]) == 0) return cands[i];
    return NULL;
}

/* Ranks, singular values and copying_eigen from tests/circuits_ref.py
 * (dense NumPy on the saved model.safetensors) agree with ours. */
TEST(circ_numpy_reference) {
    const char *py = find_numpy_python();
    if (!py) t_skip("no python3 with numpy");
    if (!al_file_exists("tests/circuits_ref.py"))
        t_skip("tests/circuits_ref.py not found (run from the repository root)");
    al_model m;
    make_model(&m, 2, 512, 0);
    randomise(&m, 61);
    int C = m.cfg.d_model, D = m.cfg.d_head;
    /* head 0.1: W_Q of rank 7 (columns 7.. are copies of the first 7) */
    float *wq = al_head_wq(&m, 0, 1);
    for (int c = 0; c < C; c++)
        for (int d = 7; d < D; d++) wq[c * D + d] = wq[c * D + d % 7] * (float)(1 + d);
    /* head 1.2: W_V with 20 zero columns → OV rank 12 */
    float *wv = al_head_wv(&m, 1, 2);
    for (int c = 0; c < C; c++)
        for (int d = 12; d < D; d++) wv[c * D + d] = 0;
    al_err e;
    CHECK_OK(al_mkdir_p(t_path("m"), &e), &e);
    CHECK_OK(al_ckpt_write_weights(t_path("m/model.safetensors"), &m, &e), &e);
    CHECK(t_sh("%s tests/circuits_ref.py '%s' > '%s'", py, t_path("m"), t_path("ref.txt")) == 0);
    char *ref = t_slurp(t_path("ref.txt"));
    CHECK(ref != NULL);
    al_circ_result r;
    analyse(&m, 2, &r);
    int n_head = 0, n_sv = 0;
    for (char *line = ref ? strtok(ref, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char kind[16];
        int l, h, off;
        if (sscanf(line, "%15s %d %d%n", kind, &l, &h, &off) != 3) continue;
        const al_circ_head *hd = head_of(&r, l, h);
        if (strcmp(kind, "head") == 0) {
            int rq, ro;
            double cp;
            CHECK(sscanf(line + off, "%d %d %lf", &rq, &ro, &cp) == 3);
            CHECKF(rq == hd->qk_rank && ro == hd->ov_rank, "%d.%d ranks numpy %d/%d ours %d/%d", l,
                   h, rq, ro, hd->qk_rank, hd->ov_rank);
            CHECK_NEAR(cp, hd->copying_eigen, 1e-5);
            n_head++;
        } else {
            const double *s = strcmp(kind, "qk_sv") == 0 ? hd->qk_sv : hd->ov_sv;
            char *p = line + off;
            for (int i = 0; i < D; i++) {
                double v = strtod(p, &p);
                CHECKF(fabs(v - s[i]) <= 1e-4 * (v > 1e-6 * s[0] ? v : s[0]),
                       "%s %d.%d σ%d numpy %.9g ours %.9g", kind, l, h, i, v, s[i]);
            }
            n_sv++;
        }
    }
    CHECK(n_head == 16 && n_sv == 32);
    CHECK(head_of(&r, 0, 1)->qk_rank == 7 && head_of(&r, 1, 2)->ov_rank == 12);
    free(ref);
    al_circ_result_free(&r);
    al_model_free(&m);
}

/* ----------------------------------------------------------- the CLI */

/* Byte-level tokenizer (257 tokens), one-hot embeddings. Head 0 plants the
 * trigram  "  …  '  →  \xC3  (quote characters and a non-UTF-8 byte, to
 * exercise the strings); head 1 copies the first 32 tokens. */
TEST(circ_cli_database) {
    al_model m;
    make_model(&m, 1, 257, 0);
    int C = m.cfg.d_model, D = m.cfg.d_head, V = 257;
    for (int i = 0; i < 256; i++) {
        m.p[AL_P_WE][i * C + i] = 1;
        m.p[AL_P_WU][i * V + i] = 1;
    }
    al_head_wq(&m, 0, 0)[39 * D] = 2;
    al_head_wk(&m, 0, 0)[34 * D] = 1;
    al_head_wv(&m, 0, 0)[34 * D] = 3;
    al_head_wo(&m, 0, 0)[195] = 1;
    for (int d = 0; d < D; d++) {
        al_head_wv(&m, 0, 1)[d * D + d] = 1;
        al_head_wo(&m, 0, 1)[d * C + d] = 1;
    }
    al_tokenizer *tok;
    al_err e;
    CHECK_OK(al_tok_byte_level(&tok, &e), &e);
    char dir[1024], db[1024]; /* t_path's buffers rotate: keep copies */
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    CHECK_OK(al_ckpt_save(dir, &m, tok, NULL, NULL, NULL, &e), &e);
    for (int k = 0; k < 2; k++)
        CHECK(t_sh("%s circuits --model '%s' --db '%s' --top-k 5 > '%s' 2> '%s'", t_bin(), dir, db,
                   t_path("out.txt"), t_path("err.txt")) == 0);
    char *out = t_slurp(t_path("out.txt"));
    CHECKF(out && strstr(out, "\" … ' → \\xc3"), "summary shows the trigram:\n%s", out ? out : "");
    /* heads 2..7 write nothing and head 0's full OV is nilpotent (one
     * off-diagonal entry): Σ|λ| = 0, so copying_eigen is 0/0 for all
     * seven: n/a in the table, NULL in the database */
    CHECKF(out && strstr(out, "n/a: 7 heads whose full OV circuit has no nonzero eigenvalue") &&
               strstr(out, "0.2      0    0.0    0    0.0       n/a"),
           "%s", out ? out : "");
    free(out);
    CHECK_SQL(db, "SELECT count(*), sum(status = 'done') FROM runs", "2|2");
    CHECK_SQL(db, "SELECT count(*) FROM models", "1");
    CHECK_SQL(db, "SELECT count(*) FROM head_summary", "8");
    CHECK_SQL(
        db,
        "SELECT round(copying_eigen, 6), round(copying_top1, 6) FROM head_summary WHERE head = 1",
        "1.0|0.124514"); /* 32/257 */
    CHECK_SQL(db, "SELECT qk_rank, ov_rank FROM head_summary WHERE head = 0", "1.0|1.0");
    CHECK_SQL(db, "SELECT count(*) FROM head_summary WHERE copying_eigen IS NULL AND head != 1",
              "7");
    char want[256], sa[32], sb[32], sc[32];
    al_tok_display(tok, 34, sa, sizeof sa);
    al_tok_display(tok, 39, sb, sizeof sb);
    al_tok_display(tok, 195, sc, sizeof sc);
    snprintf(want, sizeof want, "34|39|195|%s|%s|%s", sa, sb, sc);
    CHECK(strcmp(sa, "\"") == 0 && strcmp(sb, "'") == 0 && strcmp(sc, "\\xc3") == 0);
    CHECK_SQL(
        db,
        "SELECT a, b, c, a_str, b_str, c_str FROM skip_trigrams WHERE run_id = 2 AND head = 0 AND rank = 1",
        want);
    /* (2 - 2/257) * (3 - 3/257) */
    snprintf(want, sizeof want, "%.4f", (2 - 2.0 / V) * (3 - 3.0 / V));
    CHECK_SQL(
        db,
        "SELECT printf('%.4f', score) FROM skip_trigrams WHERE run_id = 2 AND head = 0 AND rank = 1",
        want);
    CHECK_SQL(db, "SELECT count(*) FROM singular_values WHERE run_id = 2", "512");
    CHECK_SQL(db, "SELECT count(*) FROM eigenvalues WHERE run_id = 2", "256");
    CHECK_SQL(db, "SELECT count(*) FROM head_overlap WHERE run_id = 2", "192");
    CHECK_SQL(db, "SELECT count(*) FROM composition", "0");
    CHECK_SQL(db, "PRAGMA integrity_check", "ok");
    /* bad input: message naming the problem, exit 1, no run recorded */
    CHECK(t_sh("%s circuits --model '%s' --db '%s' 2> '%s'", t_bin(), t_path("nope"), db,
               t_path("err.txt")) == 1);
    CHECK_SQL(db, "SELECT count(*) FROM runs", "2");
    CHECK(t_sh("%s circuits --model '%s' --db '%s' --top-k 0 2>/dev/null", t_bin(), dir, db) == 2);
    al_tok_free(tok);
    al_model_free(&m);
}

/* Every ```sql block of docs/sql.md runs as written (on a database made
 * by `attnlab circuits` on a 2-layer model). */
TEST(circ_readme_queries_run) {
    char *readme = t_slurp("docs/sql.md");
    if (!readme || !strstr(readme, "```sql\n")) {
        free(readme);
        t_skip("docs/sql.md has no ```sql blocks (run from the repository root)");
    }
    al_config c = al_config_default();
    c.d_vocab = 257;
    al_model m;
    al_tokenizer *tok;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    CHECK_OK(al_tok_byte_level(&tok, &e), &e);
    char dir[1024], db[1024];
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    CHECK_OK(al_ckpt_save(dir, &m, tok, NULL, NULL, NULL, &e), &e);
    CHECK(t_sh("%s circuits --model '%s' --db '%s' --mc-samples 20 >/dev/null 2>&1", t_bin(), dir,
               db) == 0);
    int n = 0;
    for (char *p = strstr(readme, "```sql\n"); p; p = strstr(p, "```sql\n")) {
        p += 7;
        char *end = strstr(p, "\n```");
        if (!end) break;
        *end = 0;
        char qf[1024];
        snprintf(qf, sizeof qf, "%s", t_path("q.sql"));
        FILE *f = fopen(qf, "w");
        CHECK(f != NULL);
        if (!f) break;
        fputs(p, f);
        fclose(f);
        int rc = t_sh("sqlite3 -bail '%s' < '%s' > /dev/null 2> '%s'", db, qf, t_path("q.err"));
        char *err = t_slurp(t_path("q.err"));
        CHECKF(rc == 0 && err && !err[0], "docs/sql.md query %d fails: %s\n%s", n + 1,
               err ? err : "", p);
        free(err);
        n++;
        p = end + 4;
    }
    CHECK(n >= 8);
    free(readme);
    al_tok_free(tok);
    al_model_free(&m);
}
