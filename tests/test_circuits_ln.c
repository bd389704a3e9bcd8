/* test_circuits_ln.c -- circuits (circuits.h) of LayerNorm and bias
 * models: read from the weights with LayerNorm folded in. The folded
 * copy's full QK, OV and positional circuits, norms and composition
 * scores against the same products formed here, in double, from weights
 * folded by hand (TransformerLens's fold_ln and center_writing_weights);
 * the unfolded model's analysis is its folded copy's; biases are left
 * out; a shortformer model with LayerNorm read in token and positional
 * parts; the pieces on an unfolded model are refused; the notes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/circuits.h"
#include "attnlab/gap.h"
#include "attnlab/hooks.h"
#include "attnlab/linalg.h"
#include "attnlab/model.h"
#include "attnlab/process.h"
#include "test.h"

enum { CC = 24, CH = 3, CD = 8, CV = 13, CT = 16 };

/* A random 2-layer model with norm, biases and positions as given, its
 * LayerNorm weights and biases far from their initial values. */
static void rand_ln(al_model *m, int norm, unsigned biases, int pos, uint64_t seed) {
    al_config c = al_config_default();
    c.n_layers = 2, c.d_model = CC, c.n_heads = CH, c.d_head = CD, c.n_ctx = CT, c.d_vocab = CV;
    c.norm_type = norm, c.biases = biases, c.pos_type = pos, c.seed = seed;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
    al_rng r;
    al_rng_seed(&r, seed);
    for (int p = AL_P_LN1W; p < AL_NPARAM; p++)
        for (size_t i = 0; i < m->param_size[p]; i++) {
            double v = 0.4 * al_rng_normal(&r);
            m->p[p][i] = (float)(p == AL_P_LN1W || p == AL_P_LNFW ? 1 + v : v);
        }
    for (size_t i = 0; i < m->param_size[AL_P_WU]; i++) m->p[AL_P_WU][i] *= (float)CC;
}

/* The hand-folded weights of m, in double. */
typedef struct folded {
    double we[CV * CC], wpos[CT * CC], wu[CC * CV];
    double wq[2][CH][CC * CD], wk[2][CH][CC * CD], wv[2][CH][CC * CD], wo[2][CH][CD * CC];
} folded;

/* x (rows, n) row-major: each row less its mean (center_writing_weights). */
static void centre_rows(double *x, int rows, int n) {
    for (int r = 0; r < rows; r++) {
        double mu = 0;
        for (int i = 0; i < n; i++) mu += x[r * n + i];
        for (int i = 0; i < n; i++) x[r * n + i] -= mu / n;
    }
}

/* A reader (C, n) of a LayerNorm with gain w (NULL: 1): diag(w) W, each
 * column then centred over C (fold_ln). */
static void fold_reader(double *out, const float *W, const float *w, int n) {
    for (int j = 0; j < n; j++) {
        double mu = 0;
        for (int c = 0; c < CC; c++) mu += (out[c * n + j] = W[c * n + j] * (w ? w[c] : 1.0));
        for (int c = 0; c < CC; c++) out[c * n + j] -= mu / CC;
    }
}

static void fold_by_hand(const al_model *m, folded *f) {
    for (int i = 0; i < CV * CC; i++) f->we[i] = m->p[AL_P_WE][i];
    for (int i = 0; i < CT * CC; i++) f->wpos[i] = m->p[AL_P_WPOS][i];
    centre_rows(f->we, CV, CC);
    centre_rows(f->wpos, CT, CC);
    fold_reader(f->wu, m->p[AL_P_WU], m->p[AL_P_LNFW], CV);
    for (int l = 0; l < 2; l++) {
        const float *w = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + l * CC : NULL;
        for (int h = 0; h < CH; h++) {
            fold_reader(f->wq[l][h], al_head_wq(m, l, h), w, CD);
            fold_reader(f->wk[l][h], al_head_wk(m, l, h), w, CD);
            fold_reader(f->wv[l][h], al_head_wv(m, l, h), w, CD);
            for (int i = 0; i < CD * CC; i++) f->wo[l][h][i] = al_head_wo(m, l, h)[i];
            centre_rows(f->wo[l][h], CD, CC);
        }
    }
}

/* out (n, k) = a (n, m) b (m, k), or b's transpose (k, m) when tb. */
static void mul(double *out, const double *a, const double *b, int n, int m, int k, int tb) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            double s = 0;
            for (int x = 0; x < m; x++) s += a[i * m + x] * (tb ? b[j * m + x] : b[x * k + j]);
            out[i * k + j] = s;
        }
}

/* max |got − want| over the largest |want|. */
static double rel_max(const float *got, const double *want, int n) {
    double d = 0, s = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs(got[i] - want[i])), s = fmax(s, fabs(want[i]));
    return d / (s > 0 ? s : 1);
}

/* On a model with LN and every bias: the copy folded by al_model_process
 * (fold_ln, center_writing_weights) has the circuits of the weights
 * folded by hand; al_circ_analyse of the unfolded model is the folded
 * copy's; the pieces refuse the unfolded model. */
TEST(circuits_ln_folded_matches_hand) {
    al_model m, f;
    rand_ln(&m, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 3);
    al_err e;
    CHECK_OK(al_model_alloc(&f, &m.cfg, &e), &e);
    memcpy(f.params, m.params, sizeof(float) * m.n_params);
    const al_process_opts po = {.fold_ln = 1, .center_writing_weights = 1};
    CHECK_OK(al_model_process(&f, &po, &e), &e);
    folded *hf = malloc(sizeof *hf);
    fold_by_hand(&m, hf);
    int ids[CV];
    for (int i = 0; i < CV; i++) ids[i] = i;
    float got[CT * CT];
    /* CT > CV: the positional circuit is the largest */
    static double a[CT * CD], b[CT * CD], c[CD * CV], full[CT * CT], qk[CC * CC], ov[CC * CC];
    double worst = 0;
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < CH; h++) {
            /* full QK = W_E W_Q W_Kᵀ W_Eᵀ */
            mul(a, hf->we, hf->wq[l][h], CV, CC, CD, 0);
            mul(b, hf->we, hf->wk[l][h], CV, CC, CD, 0);
            mul(full, a, b, CV, CD, CV, 1);
            CHECK_OK(al_circ_full_qk(&f, l, h, ids, CV, ids, CV, got, &e), &e);
            worst = fmax(worst, rel_max(got, full, CV * CV));
            /* full OV = W_E W_V W_O W_U */
            mul(a, hf->we, hf->wv[l][h], CV, CC, CD, 0);
            mul(c, hf->wo[l][h], hf->wu, CD, CC, CV, 0);
            mul(full, a, c, CV, CD, CV, 0);
            CHECK_OK(al_circ_full_ov(&f, l, h, ids, CV, ids, CV, got, &e), &e);
            worst = fmax(worst, rel_max(got, full, CV * CV));
            /* positional QK = W_pos W_Q W_Kᵀ W_posᵀ */
            mul(a, hf->wpos, hf->wq[l][h], CT, CC, CD, 0);
            mul(b, hf->wpos, hf->wk[l][h], CT, CC, CD, 0);
            mul(full, a, b, CT, CD, CT, 1);
            CHECK_OK(al_circ_positional_qk(&f, l, h, got, &e), &e);
            worst = fmax(worst, rel_max(got, full, CT * CT));
        }
    CHECKF(worst <= 1e-5, "folded circuits vs by hand: %g", worst);
    /* norms and composition of the whole analysis, on the unfolded model */
    al_circ_opts o = al_circ_opts_default();
    o.top_k = 5, o.mc_samples = 20;
    al_circ_result r, rf;
    CHECK_OK(al_circ_analyse(&m, &o, &r, &e), &e);
    CHECK_OK(al_circ_analyse(&f, &o, &rf, &e), &e);
    double wn = 0;
    for (int i = 0; i < 2 * CH; i++) {
        int l = i / CH, h = i % CH;
        mul(qk, hf->wq[l][h], hf->wk[l][h], CC, CD, CC, 1);
        mul(ov, hf->wv[l][h], hf->wo[l][h], CC, CD, CC, 0);
        wn = fmax(wn, fabs(r.heads[i].qk_fro / al_fro(qk, CC, CC) - 1));
        wn = fmax(wn, fabs(r.heads[i].ov_fro / al_fro(ov, CC, CC) - 1));
        /* the unfolded model's analysis is the folded copy's, bit for bit */
        CHECK(!memcmp(r.heads[i].qk_sv, rf.heads[i].qk_sv, sizeof(double) * CD) &&
              !memcmp(r.heads[i].ov_sv, rf.heads[i].ov_sv, sizeof(double) * CD) &&
              (r.heads[i].copying_eigen == rf.heads[i].copying_eigen ||
               (isnan(r.heads[i].copying_eigen) && isnan(rf.heads[i].copying_eigen))) &&
              r.heads[i].n_tri == rf.heads[i].n_tri &&
              !memcmp(r.heads[i].tri, rf.heads[i].tri, sizeof(al_trigram) * r.heads[i].n_tri));
    }
    CHECKF(wn <= 1e-6, "Frobenius norms vs by hand: %g", wn);
    CHECK(r.n_comp == CH * CH && rf.n_comp == r.n_comp);
    for (int i = 0; i < r.n_comp; i++) {
        const al_circ_comp *p = &r.comp[i];
        double *ov1 = malloc(sizeof(double) * CC * CC), *qk2 = malloc(sizeof(double) * CC * CC),
               *ov2 = malloc(sizeof(double) * CC * CC), *pr = malloc(sizeof(double) * CC * CC);
        mul(ov1, hf->wv[p->l1][p->h1], hf->wo[p->l1][p->h1], CC, CD, CC, 0);
        mul(qk2, hf->wq[p->l2][p->h2], hf->wk[p->l2][p->h2], CC, CD, CC, 1);
        mul(ov2, hf->wv[p->l2][p->h2], hf->wo[p->l2][p->h2], CC, CD, CC, 0);
        const double *second[3] = {qk2, qk2, ov2};
        for (int k = 0; k < 3; k++) {
            mul(pr, ov1, second[k], CC, CC, CC, k == 1);
            double want = al_fro(pr, CC, CC) / (al_fro(ov1, CC, CC) * al_fro(second[k], CC, CC));
            CHECKF(fabs(p->score[k] / want - 1) <= 1e-6, "%s %d.%d->%d.%d: %g, by hand %g",
                   al_comp_names[k], p->l1, p->h1, p->l2, p->h2, p->score[k], want);
            CHECK(p->score[k] == rf.comp[i].score[k]);
        }
        free(ov1), free(qk2), free(ov2), free(pr);
    }
    /* the pieces read folded weights only */
    CHECK(al_circ_full_qk(&m, 0, 0, ids, 2, ids, 2, got, &e) == -1 &&
          strstr(e.msg, "need a model's LayerNorm folded into them (this one has "
                        "normalization_type LN, not folded"));
    CHECK(al_circ_qk_svals(&m, 1, 1, r.heads[0].qk_sv, &e) == -1);
    al_circ_result_free(&r);
    al_circ_result_free(&rf);
    free(hf);
    al_model_free(&m);
    al_model_free(&f);
}

/* Biases are left out: a bias model's circuits are those of the same
 * weights without biases, bit for bit; an LNPre model (no w, b) is read
 * with its readers centred, as its LayerNorm centres what they read. */
TEST(circuits_ln_biases_left_out) {
    al_model m, p;
    rand_ln(&m, AL_NORM_NONE, AL_BIAS_ALL, AL_POS_STANDARD, 5);
    rand_ln(&p, AL_NORM_NONE, 0, AL_POS_STANDARD, 5);
    CHECK(m.param_size[AL_P_BQ] > 0 && p.param_size[AL_P_BQ] == 0);
    memcpy(p.params, m.params, sizeof(float) * p.n_params); /* the plain tensors come first */
    al_circ_opts o = al_circ_opts_default();
    o.top_k = 5, o.mc_samples = 20;
    al_circ_result r, rp;
    al_err e;
    CHECK_OK(al_circ_analyse(&m, &o, &r, &e), &e);
    CHECK_OK(al_circ_analyse(&p, &o, &rp, &e), &e);
    for (int i = 0; i < 2 * CH; i++)
        CHECK(!memcmp(r.heads[i].qk_sv, rp.heads[i].qk_sv, sizeof(double) * CD) &&
              r.heads[i].copying_top1 == rp.heads[i].copying_top1 &&
              !memcmp(r.heads[i].tri, rp.heads[i].tri, sizeof(al_trigram) * r.heads[i].n_tri));
    for (int i = 0; i < r.n_comp; i++)
        CHECK(!memcmp(r.comp[i].score, rp.comp[i].score, sizeof r.comp[i].score));
    al_circ_result_free(&r);
    al_circ_result_free(&rp);
    al_model_free(&m);
    al_model_free(&p);
    /* LNPre: fold_ln only centres the readers, so the QK circuit of
     * token ids is that of the centred embeddings */
    rand_ln(&m, AL_NORM_LNPRE, 0, AL_POS_STANDARD, 9);
    int ids[CV];
    for (int i = 0; i < CV; i++) ids[i] = i;
    static double we[CV * CC], wq[CC * CD], wk[CC * CD], a[CV * CD], b[CV * CD], full[CV * CV];
    float got[CV * CV];
    for (int i = 0; i < CV * CC; i++) we[i] = m.p[AL_P_WE][i];
    centre_rows(we, CV, CC);
    for (int i = 0; i < CC * CD; i++)
        wq[i] = al_head_wq(&m, 1, 2)[i], wk[i] = al_head_wk(&m, 1, 2)[i];
    mul(a, we, wq, CV, CC, CD, 0);
    mul(b, we, wk, CV, CC, CD, 0);
    mul(full, a, b, CV, CD, CV, 1);
    al_model f;
    CHECK_OK(al_model_alloc(&f, &m.cfg, &e), &e);
    memcpy(f.params, m.params, sizeof(float) * m.n_params);
    const al_process_opts po = {.fold_ln = 1, .center_writing_weights = 1};
    CHECK_OK(al_model_process(&f, &po, &e), &e);
    CHECK_OK(al_circ_full_qk(&f, 1, 2, ids, CV, ids, CV, got, &e), &e);
    CHECKF(rel_max(got, full, CV * CV) <= 1e-5, "LNPre full QK: %g", rel_max(got, full, CV * CV));
    al_model_free(&f);
    al_model_free(&m);
}

/* Layer 0's attention scores, (H, T, T), from a forward's hook. */
typedef struct scores_cap {
    float s[CH * CT * CT];
} scores_cap;

static int cap_scores(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    if (a->layer == 0) memcpy(((scores_cap *)ctx)->s, a->data, sizeof(float) * CH * CT * CT);
    return 0;
}

/* A shortformer model with LayerNorm: its positions join q and k after
 * ln1, so no one folded model has its circuits. The token parts are
 * those of the same weights with standard positions (nothing else enters
 * ln1; that model's are checked by hand above), bit for bit; the
 * positional ones are the raw W_pos W_Q W_Kᵀ W_posᵀ, which a forward with
 * W_E and ln1.b zero shows as its layer-0 attention scores (times √D);
 * pos_prev_token is their causal softmax at t−1. The notes say so. */
TEST(circuits_ln_shortformer_parts) {
    al_model m, s;
    rand_ln(&m, AL_NORM_LN, 0, AL_POS_STANDARD, 7);
    rand_ln(&s, AL_NORM_LN, 0, AL_POS_SHORTFORMER, 7);
    CHECK(m.n_params == s.n_params);
    memcpy(s.params, m.params, sizeof(float) * m.n_params);
    al_circ_opts o = al_circ_opts_default();
    o.top_k = 5, o.mc_samples = 20;
    al_circ_result r, rs;
    al_err e;
    CHECK_OK(al_circ_analyse(&m, &o, &r, &e), &e);
    CHECK_OK(al_circ_analyse(&s, &o, &rs, &e), &e);
    static float pos[CT * CT];
    double worst = 0;
    for (int i = 0; i < 2 * CH; i++) {
        const al_circ_head *a = &r.heads[i], *b = &rs.heads[i];
        CHECK(!memcmp(a->qk_sv, b->qk_sv, sizeof(double) * CD) &&
              !memcmp(a->ov_sv, b->ov_sv, sizeof(double) * CD) && a->n_tri == b->n_tri &&
              !memcmp(a->tri, b->tri, sizeof(al_trigram) * a->n_tri) &&
              a->copying_top1 == b->copying_top1);
        /* pos_prev_token from the raw positional circuit, by hand */
        CHECK_OK(al_circ_positional_qk(&s, i / CH, i % CH, pos, &e), &e);
        double tot = 0;
        for (int t = 1; t < CT; t++) {
            double z = 0, mx = -INFINITY;
            for (int u = 0; u <= t; u++) mx = fmax(mx, pos[t * CT + u] / sqrt(CD));
            for (int u = 0; u <= t; u++) z += exp(pos[t * CT + u] / sqrt(CD) - mx);
            tot += exp(pos[t * CT + t - 1] / sqrt(CD) - mx) / z;
        }
        worst = fmax(worst, fabs(b->pos_prev_token - tot / (CT - 1)));
    }
    CHECKF(worst <= 1e-7, "shortformer pos_prev_token vs by hand: %g", worst);
    for (int i = 0; i < r.n_comp; i++)
        CHECK(!memcmp(r.comp[i].score, rs.comp[i].score, sizeof r.comp[i].score));
    /* the raw positional circuit is what the forward computes */
    memset(s.p[AL_P_WE], 0, sizeof(float) * s.param_size[AL_P_WE]);
    memset(s.p[AL_P_LN1B], 0, sizeof(float) * CC); /* layer 0's */
    scores_cap *cap = calloc(1, sizeof *cap);
    CHECK_OK(al_hook_add(&s, AL_HOOK_ATTN_SCORES, 0, cap_scores, cap, &e), &e);
    int in[CT];
    for (int t = 0; t < CT; t++) in[t] = (t * 5 + 2) % CV;
    CHECK_OK(al_model_forward(&s, in, NULL, 1, CT, &e), &e);
    double d = 0, big = 0;
    for (int h = 0; h < CH; h++) {
        CHECK_OK(al_circ_positional_qk(&s, 0, h, pos, &e), &e);
        for (int t = 0; t < CT; t++)
            for (int u = 0; u <= t; u++) {
                double want = pos[t * CT + u] / sqrt(CD);
                d = fmax(d, fabs(cap->s[(h * CT + t) * CT + u] - want)),
                big = fmax(big, fabs(want));
            }
    }
    CHECKF(big > 0.1 && d <= 1e-5 * big, "positional circuit vs forward's scores: %g of %g", d,
           big);
    /* unfolded, but still only heads the model has */
    CHECK(al_circ_positional_qk(&s, 2, 0, pos, &e) == -1 && strstr(e.msg, "no head 2.0"));
    CHECK(al_circ_positional_qk(&s, 0, CH, pos, &e) == -1);
    const char *notes[2];
    CHECK(al_circ_notes(&s.cfg, notes) == 2 && strstr(notes[0], "as if positions were absent") &&
          strlen(notes[0]) < AL_WARN_LEN);
    free(cap);
    al_circ_result_free(&r);
    al_circ_result_free(&rs);
    al_model_free(&m);
    al_model_free(&s);
}

/* The notes say what is folded and left out. */
TEST(circuits_ln_notes) {
    al_model m;
    rand_ln(&m, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 7);
    const char *notes[2];
    CHECK(al_circ_notes(&m.cfg, notes) == 2 && strstr(notes[0], "folded in") &&
          strstr(notes[1], "biases out"));
    for (int i = 0; i < 2; i++) CHECK(strlen(notes[i]) < AL_WARN_LEN);
    al_config c = m.cfg;
    c.norm_type = AL_NORM_NONE;
    CHECK(al_circ_notes(&c, notes) == 1);
    c.biases = 0;
    CHECK(al_circ_notes(&c, notes) == 0);
    al_model_free(&m);
}
