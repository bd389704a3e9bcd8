/* randmodel.h -- small random models and tasks for the attribution
 * tests (static functions: each test file gets its own copy). */
#ifndef ATTNLAB_TEST_RANDMODEL_H
#define ATTNLAB_TEST_RANDMODEL_H

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

#endif
