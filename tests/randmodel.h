/* randmodel.h -- small random models and tasks for the attribution
 * tests (static functions: each test file gets its own copy). */
#ifndef ATTNLAB_TEST_RANDMODEL_H
#define ATTNLAB_TEST_RANDMODEL_H

#include <math.h>
#include <stdlib.h>

#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/patch.h"
#include "test.h"

/* A random L-layer model (d_model 24, 3 heads of 8, n_ctx 16) whose
 * logits are of order 1 and whose gates differ from 1. */
static inline void rand_model(al_model *m, int L, int tied, int d_vocab) {
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = 24, c.n_heads = 3, c.d_head = 8, c.n_ctx = 16;
    c.d_vocab = d_vocab, c.tied_embeddings = tied, c.seed = 11 + (uint64_t)L + 2 * tied;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
    /* logits of order 1, not ≈ 0 as at init */
    if (!tied)
        for (size_t i = 0; i < m->param_size[AL_P_WU]; i++) m->p[AL_P_WU][i] *= (float)c.d_model;
    for (int k = 0; k < L * c.n_heads; k++) m->gates[k] = 0.4f + 0.3f * (float)k;
}

/* The induction task on m: R random tokens repeated, BOS 0. */
static inline void task(al_pairs *t, const al_model *m, int R, int n, al_err *e) {
    al_patch_opts o = al_patch_opts_defaults();
    o.probe_r = R, o.probe_n = n;
    CHECK_OK(al_patch_task_make(t, m, NULL, 0, &o, e), e);
}

/* The task's mean metric on run `which` (0 clean, 1 corrupted) of all
 * pairs with whatever hooks m has, read from a full forward's final
 * residual, independently of the analyses' own metric code. */
static inline double task_metric(al_model *m, const al_pairs *t, int which) {
    al_err e;
    CHECK_OK(al_model_forward(m, which ? t->corr : t->clean, NULL, t->N, t->T, &e), &e);
    int C = m->cfg.d_model, V = m->cfg.d_vocab;
    float *row = malloc(sizeof(float) * V);
    double s = 0.0;
    for (int i = 0; i < t->n_items; i++) {
        const al_pair_item *it = &t->items[i];
        const float *x = m->x + (((size_t)m->cfg.n_layers * t->N + it->pair) * t->T + it->pos) * C;
        al_model_unembed(m, x, 1, row);
        if (t->logit_diff) {
            s += (double)row[it->answer] - row[it->wrong];
        } else {
            double mx = row[0], z = 0.0;
            for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
            for (int v = 0; v < V; v++) z += exp(row[v] - mx);
            s += row[it->answer] - mx - log(z);
        }
    }
    free(row);
    return s / t->n_items;
}

/* W_Q and W_K times f: QK scores times f², attention sharper (f > 1) or
 * closer to uniform (f < 1). */
static inline void scale_qk(al_model *m, float f) {
    for (int w = AL_P_WQ; w <= AL_P_WK; w++)
        for (size_t i = 0; i < m->param_size[w]; i++) m->p[w][i] *= f;
}

/* Task t as logit differences: wrong = answer + 3 (mod d_vocab) at every item. */
static inline void as_logit_diff(al_pairs *t, int d_vocab) {
    t->logit_diff = 1;
    for (int i = 0; i < t->n_items; i++) t->items[i].wrong = (t->items[i].answer + 3) % d_vocab;
}

/* A random L-layer model with norm and biases (d_model 24, 3 heads of 8,
 * n_ctx 16, vocabulary 13): LayerNorm weights and every bias far from
 * their initial values, gates != 1, logits of order 1. */
static inline void ln_model(al_model *m, int L, int norm, unsigned biases, int pos, uint64_t seed) {
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = 24, c.n_heads = 3, c.d_head = 8, c.n_ctx = 16, c.d_vocab = 13;
    c.norm_type = norm, c.biases = biases, c.pos_type = pos, c.seed = seed;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
    al_rng r;
    al_rng_seed(&r, seed + 100);
    for (int p = AL_P_LN1W; p < AL_NPARAM; p++)
        for (size_t i = 0; i < m->param_size[p]; i++) {
            double v = 0.3 * al_rng_normal(&r);
            m->p[p][i] = (float)(p == AL_P_LN1W || p == AL_P_LNFW ? 1 + v : v);
        }
    /* ln_final's output has unit-variance coordinates: W_U of 1/√C gives
     * logits of order 1 (a plain model's residual is smaller; rand_model
     * scales differently) */
    for (size_t i = 0; i < m->param_size[AL_P_WU]; i++)
        m->p[AL_P_WU][i] *= norm == AL_NORM_NONE ? 24.0f : 5.0f;
    scale_qk(m, 2.0f);
    for (int k = 0; k < L * c.n_heads; k++) m->gates[k] = 0.4f + 0.3f * (float)k;
}

#endif
