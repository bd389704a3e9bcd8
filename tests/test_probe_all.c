/* test_probe_all.c -- the all-occurrences induction score and the
 * per-layer induction mass (scores.h) on the hand-built circuit of
 * planted.h, whose induction head 1.0 attends to every s with
 * x[s-1] = x[t]: the perfect all-occurrences induction head. The answers
 * are counted by hand from the probe's tokens; the old scores are checked
 * bit for bit against their formulas read off the attention pattern. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/scores.h"
#include "attnlab/thresholds.h"
#include "planted.h"
#include "test.h"

/* A probe of N copies of BOS + half + half, set by hand. */
static void hand_probe(al_probe *p, const int *half, int R, int N) {
    memset(p, 0, sizeof *p);
    int T = 2 * R + 1;
    p->tokens = malloc(sizeof(int) * (size_t)N * T);
    for (int n = 0; n < N; n++) {
        int *row = p->tokens + n * T;
        row[0] = 0;
        for (int i = 0; i < R; i++) row[1 + i] = row[1 + R + i] = half[i];
    }
    p->R = R, p->N = N, p->text = 1;
    al_probe_measure(p);
}

/* A half whose token 3 recurs three times: at t (second half) the planted
 * head spreads its attention evenly over S(t), so induction_all is 1
 * while induction, the share on t-R+1 alone, is the mean of 1/|S(t)|. */
TEST(probe_all_recurring_token) {
    const int half[6] = {3, 7, 3, 9, 3, 4}, R = 6;
    al_probe p;
    hand_probe(&p, half, R, 4);
    /* tokens 1..12: 3 7 3 9 3 4 | 3 7 3 9 3 4. |S(t)| for t = 7..12 (s <= t
     * with x[s-1] = x[t]): 3 (s 2,4,6), 1, 4 (2,4,6,8), 1, 5, 1 */
    CHECK_NEAR(p.recur, 3.0 / 6, 1e-12); /* t 7, 9, 11: token 3 */
    CHECK_NEAR(p.prev_all, 3.0 / 6, 1e-12); /* x[t-2] = x[t] there too */
    double uni = (3.0 / 8 + 1.0 / 9 + 4.0 / 10 + 1.0 / 11 + 5.0 / 12 + 1.0 / 13) / 6;
    CHECK_NEAR(p.uniform_all, uni, 1e-12);
    double old = (1.0 / 3 + 1 + 1.0 / 4 + 1 + 1.0 / 5 + 1) / 6; /* 0.6306 */
    CHECK_NEAR(p.ceiling, old, 1e-12);
    al_model m;
    planted_model(&m);
    al_probe_scores s;
    al_err e;
    CHECK_OK(al_probe_run(&m, &p, 2, &s, &e), &e);
    CHECKF(fabs(s.induction_all[PH] - 1.0) < 1e-6, "1.0 induction_all %.9f", s.induction_all[PH]);
    CHECKF(fabs(s.induction[PH] - old) < 1e-6, "1.0 induction %.9f, want %.9f", s.induction[PH],
           old);
    /* heads that attend to BOS score 0 on both; the previous-token head
     * 0.0 scores the positional level prev_all on induction_all */
    for (int i = 0; i < 2 * PH; i++) {
        if (i == PH) continue;
        CHECKF(s.induction[i] < 1e-6, "head %d induction %g", i, s.induction[i]);
        double want = i == 0 ? p.prev_all : 0;
        CHECKF(fabs(s.induction_all[i] - want) < 1e-6, "head %d induction_all %g, want %g", i,
               s.induction_all[i], want);
    }
    /* the layer sums are the heads' sums */
    for (int l = 0; l < 2; l++) {
        double a = 0, b = 0;
        for (int h = 0; h < PH; h++) a += s.induction[l * PH + h], b += s.induction_all[l * PH + h];
        CHECK(s.layer_induction[l] == a && s.layer_induction_all[l] == b);
    }
    al_probe_scores_free(&s);
    al_probe_free(&p);
    al_model_free(&m);
}

/* The three old scores, bit for bit as their formulas read them off the
 * attention pattern (the loops of earlier versions), on a random probe
 * with recurrences; and where no token recurs inside a half,
 * induction_all is induction bit for bit. */
TEST(probe_all_old_scores_bitwise) {
    al_model m;
    planted_model(&m);
    al_err e;
    const int R = 12, N = 24, B = 8, T = 2 * R + 1, LH = 2 * PH;
    al_probe p;
    CHECK_OK(al_probe_make(&p, R, N, 5, 20, 0, NULL, &e), &e); /* 19 ids: many recur */
    CHECK(p.recur > 0.2);
    al_probe_scores s;
    CHECK_OK(al_probe_run(&m, &p, B, &s, &e), &e);
    double ind[LH], dup[LH], prev[LH];
    memset(ind, 0, sizeof ind), memset(dup, 0, sizeof dup), memset(prev, 0, sizeof prev);
    for (int n0 = 0; n0 < N; n0 += B) {
        CHECK_OK(al_model_forward(&m, p.tokens + n0 * T, NULL, B, T, &e), &e);
        for (int l = 0; l < 2; l++)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < PH; h++) {
                    const float *A = m.att + (((size_t)l * B + b) * PH + h) * T * T;
                    double a = 0, d = 0, q = 0;
                    for (int t = R + 1; t <= 2 * R; t++) {
                        a += A[t * T + (t - R + 1)];
                        d += A[t * T + (t - R)];
                    }
                    for (int t = 2; t < T; t++) q += A[t * T + (t - 1)];
                    ind[l * PH + h] += a, dup[l * PH + h] += d, prev[l * PH + h] += q;
                }
    }
    for (int i = 0; i < LH; i++) {
        CHECKF(s.induction[i] == ind[i] / ((double)N * R), "head %d induction", i);
        CHECKF(s.duplicate_token[i] == dup[i] / ((double)N * R), "head %d duplicate_token", i);
        CHECKF(s.prev_token[i] == prev[i] / ((double)N * (T - 2)), "head %d prev_token", i);
    }
    /* recurrences give the planted head more on induction_all */
    CHECKF(s.induction_all[PH] > s.induction[PH] + 0.05, "%g vs %g", s.induction_all[PH],
           s.induction[PH]);
    al_probe_scores_free(&s);
    al_probe_free(&p);
    /* distinct ids in every half: S(t) = {t-R+1}, the same sums */
    int half[12];
    for (int i = 0; i < R; i++) half[i] = 1 + (i * 13) % 127;
    hand_probe(&p, half, R, 16);
    CHECK(p.recur == 0 && p.prev_all == 0 && p.ceiling == 1);
    CHECK_OK(al_probe_run(&m, &p, B, &s, &e), &e);
    CHECK(memcmp(s.induction, s.induction_all, sizeof(double) * LH) == 0);
    CHECK(memcmp(s.layer_induction, s.layer_induction_all, sizeof(double) * 2) == 0);
    CHECKF(s.induction_all[PH] > 0.99, "%g", s.induction_all[PH]);
    al_probe_scores_free(&s);
    al_probe_free(&p);
    al_model_free(&m);
}

/* Induction spread over a layer's three heads, each taking the tokens of
 * one residue mod 3 (the others attend to BOS): no head passes the
 * threshold, the layer's sum is the whole induction mass. */
TEST(probe_all_layer_sum_spread) {
    al_model m;
    planted_model(&m);
    const int C = P_C, D = PD, V = PV;
    const float alpha = 30.0f * sqrtf((float)D);
    for (int h = 0; h < PH; h++) {
        float *wq = al_head_wq(&m, 1, h), *wk = al_head_wk(&m, 1, h);
        float *wv = al_head_wv(&m, 1, h), *wo = al_head_wo(&m, 1, h);
        memset(wq, 0, sizeof(float) * C * D), memset(wk, 0, sizeof(float) * C * D);
        memset(wv, 0, sizeof(float) * C * D), memset(wo, 0, sizeof(float) * D * C);
        /* dim 0 (token 0 is BOS, never a query here): BOS at half strength */
        wq[P_BIAS * D + 0] = alpha / 2;
        wk[(P_POS + 0) * D + 0] = 1;
        for (int v = 1; v < V; v++) {
            if (v % 3 == h) wq[(P_TOK + v) * D + v] = alpha;
            wk[(P_PREV + v) * D + v] = 1;
            wv[(P_TOK + v) * D + v] = 1;
            wo[v * C + P_OUT + v] = P_GAMMA;
        }
    }
    al_probe p;
    al_probe_scores s;
    al_err e;
    const int half[12] = {3, 6, 9, 12, 1, 4, 7, 10, 2, 5, 8, 11}; /* four of each residue */
    hand_probe(&p, half, 12, 8);
    CHECK_OK(al_probe_run(&m, &p, 8, &s, &e), &e);
    for (int h = 0; h < PH; h++)
        CHECKF(fabs(s.induction_all[PH + h] - 1.0 / 3) < 1e-4 &&
                   s.induction_all[PH + h] < AL_TH_INDUCTION,
               "1.%d induction_all %g", h, s.induction_all[PH + h]);
    CHECKF(fabs(s.layer_induction_all[1] - 1.0) < 1e-4, "layer 1 %g", s.layer_induction_all[1]);
    CHECKF(fabs(s.layer_induction[1] - 1.0) < 1e-4, "layer 1 %g", s.layer_induction[1]);
    CHECKF(s.layer_induction_all[0] < 1e-4, "layer 0 %g", s.layer_induction_all[0]);
    al_probe_scores_free(&s);
    al_probe_free(&p);
    al_model_free(&m);
}
