/* planted.h -- a hand-built induction circuit for the scores, ablate,
 * patch and discovery tests (static functions: each test file gets its
 * own copy). planted_model is the 2-layer circuit below;
 * planted_model_deep(m, L, li) builds it in an L-layer model with the
 * induction head at li.0 (li >= 1), so every layer strictly between 0 and
 * li is idle on the circuit: K-composition 0.0 -> li.0 skips them.
 *
 * Residual stream (one-hot subspaces, C = 3V + P + 1):
 *   TOK  [0, V)        the current token          (W_E)
 *   POS  [V, V+P)      the position               (W_pos)
 *   PREV [V+P, 2V+P)   the previous token         (written by head 0.0)
 *   OUT  [2V+P, 3V+P)  the predicted token        (read by W_U as identity)
 *   BIAS 3V+P          constant 1                 (W_pos)
 * Heads (QK gaps of 30 make attention one-hot to ~1e-12):
 *   0.0 previous-token head: positional QK (t attends t-1), OV copies TOK
 *       into PREV.
 *   1.0 induction head: Q reads TOK, K reads PREV (K-composition with 0.0),
 *       so t attends s with x[s-1] = x[t]; OV copies TOK into OUT x GAMMA.
 *   0.1, 1.1 attend to position 0 and write nothing (W_O = 0): no effect.
 *   0.2, 1.2 attend to position 0 and read only BIAS: a constant output,
 *       +1 on the OUT logit of token 5 (0.2) and of token 7 (1.2).
 *   Deeper (planted_model_deep): l.1 and l.2 of every layer as above (l.2
 *       raises token 5 + 2l), l.0 all zero except 0.0 and li.0.
 * W_U also has small random rows on TOK and POS: a nontrivial direct path. */
#ifndef ATTNLAB_TEST_PLANTED_H
#define ATTNLAB_TEST_PLANTED_H

#include <math.h>
#include <string.h>

#include "attnlab/model.h"
#include "attnlab/util.h"
#include "test.h"

enum { PV = 128, PP = 32, PH = 3, PD = 128 };
#define P_TOK 0
#define P_POS PV
#define P_PREV (PV + PP)
#define P_OUT (2 * PV + PP)
#define P_BIAS (3 * PV + PP)
#define P_C (3 * PV + PP + 1)
#define P_GAMMA 15.0f

static inline void planted_model_deep(al_model *m, int L, int li) {
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = P_C, c.n_heads = PH, c.d_head = PD, c.n_ctx = PP;
    c.d_vocab = PV, c.seed = 1;
    al_err e;
    CHECK_OK(al_model_alloc(m, &c, &e), &e);
    const int C = P_C, D = PD, V = PV;
    const float alpha = 30.0f * sqrtf((float)D); /* score gap 30 after 1/√D */
    for (int v = 0; v < V; v++) m->p[AL_P_WE][v * C + P_TOK + v] = 1;
    for (int t = 0; t < PP; t++) {
        m->p[AL_P_WPOS][t * C + P_POS + t] = 1;
        m->p[AL_P_WPOS][t * C + P_BIAS] = 1;
    }
    al_rng r;
    al_rng_seed(&r, 42);
    float *wu = m->p[AL_P_WU];
    for (int k = 0; k < P_PREV; k++) /* TOK and POS rows: the direct path */
        for (int v = 0; v < V; v++) wu[k * V + v] = (float)(0.3 * al_rng_normal(&r));
    for (int v = 0; v < V; v++) wu[(P_OUT + v) * V + v] = 1;
    /* 0.0 previous-token head */
    for (int t = 0; t < PP; t++) {
        al_head_wq(m, 0, 0)[(P_POS + t) * D + t] = alpha;
        al_head_wk(m, 0, 0)[(P_POS + t) * D + t + 1] = 1;
    }
    for (int v = 0; v < V; v++) {
        al_head_wv(m, 0, 0)[(P_TOK + v) * D + v] = 1;
        al_head_wo(m, 0, 0)[v * C + P_PREV + v] = 1;
    }
    /* li.0 induction head */
    for (int v = 0; v < V; v++) {
        al_head_wq(m, li, 0)[(P_TOK + v) * D + v] = alpha;
        al_head_wk(m, li, 0)[(P_PREV + v) * D + v] = 1;
        al_head_wv(m, li, 0)[(P_TOK + v) * D + v] = 1;
        al_head_wo(m, li, 0)[v * C + P_OUT + v] = P_GAMMA;
    }
    /* the heads attending to position 0 */
    for (int l = 0; l < L; l++)
        for (int h = 1; h <= 2; h++) {
            al_head_wq(m, l, h)[P_BIAS * D] = alpha;
            al_head_wk(m, l, h)[P_POS * D] = 1;
            if (h == 1) continue;
            al_head_wv(m, l, h)[P_BIAS * D] = 1;
            al_head_wo(m, l, h)[P_OUT + 5 + 2 * l] = 1;
        }
}

static inline void planted_model(al_model *m) { planted_model_deep(m, 2, 1); }

/* rows sequences of BOS (0) + n random tokens (1..V-1) repeated twice,
 * T = 2n+1; targets = next token, -1 at the end. */
static inline void repeated_batch(int rows, int n, uint64_t seed, int *in, int *tg) {
    al_rng r;
    al_rng_seed(&r, seed);
    int T = 2 * n + 1;
    for (int b = 0; b < rows; b++) {
        int *x = in + b * T;
        x[0] = 0;
        for (int i = 1; i <= n; i++) x[i] = x[i + n] = 1 + (int)al_rng_below(&r, PV - 1);
        for (int t = 0; t < T; t++) tg[b * T + t] = t + 1 < T ? x[t + 1] : -1;
    }
}

#endif
