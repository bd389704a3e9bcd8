/* Attention entropy and distance (attnstats.h) on the hand-built model of
 * planted.h, whose attention patterns are known in closed form. */
#include "attnlab/attnstats.h"
#include "planted.h"
#include "test.h"

/* n tokens of random ids 1..PV-1 (no repeats needed: only the patterns of
 * the positional heads are checked) */
static void planted_text(al_tokens *d, size_t n) {
    d->tok = malloc(n * sizeof *d->tok);
    d->n = n, d->max_id = 0;
    al_rng r;
    al_rng_seed(&r, 7);
    for (size_t i = 0; i < n; i++) {
        d->tok[i] = (uint16_t)(1 + al_rng_below(&r, PV - 1));
        if (d->tok[i] > d->max_id) d->max_id = d->tok[i];
    }
}

TEST(attnstats_planted_closed_form) {
    al_model m;
    planted_model(&m);
    /* head 1.1 writes nothing; with no query weights its scores are all 0,
     * so it attends uniformly: entropy ln(t+1), distance t/2 */
    memset(al_head_wq(&m, 1, 1), 0, sizeof(float) * P_C * PD);
    al_tokens d;
    planted_text(&d, 4000);
    al_attnstats_opts o = al_attnstats_opts_defaults();
    o.batches = 2, o.batch = 3;
    const int T = PP;
    al_attnstats_result r;
    al_err e;
    CHECK_OK(al_attnstats_run(&m, &d, T, &o, &r, &e), &e);
    CHECK(r.L == 2 && r.H == PH && r.T == T && r.windows == 6);
    double mean_t = T / 2.0, uni_h = 0; /* mean of t and of ln(t+1) over t = 1..T-1 */
    for (int t = 1; t < T; t++) uni_h += log(t + 1.0);
    uni_h /= T - 1;
    /* 0.0: previous token, one-hot to ~1e-12 */
    CHECK_NEAR(r.entropy[0], 0, 1e-6);
    CHECK_NEAR(r.distance[0], 1, 1e-6);
    /* 0.1, 0.2, 1.2: parked on position 0 */
    int bos_heads[] = {1, 2, PH + 2};
    for (int i = 0; i < 3; i++) {
        CHECK_NEAR(r.entropy[bos_heads[i]], 0, 1e-6);
        CHECK_NEAR(r.entropy_norm[bos_heads[i]], 0, 1e-6);
        CHECK_NEAR(r.distance[bos_heads[i]], mean_t, 1e-5);
    }
    /* 1.1: uniform */
    CHECK_NEAR(r.entropy[PH + 1], uni_h, 1e-5);
    CHECK_NEAR(r.entropy_norm[PH + 1], 1, 1e-5);
    CHECK_NEAR(r.distance[PH + 1], (T / 2.0) / 2.0, 1e-5);
    /* the intervals over the 6 windows: a head attending by position
     * only reads the same in every window (se 0); 1.0 reads tokens */
    const int LH = 2 * PH, still[] = {0, 1, 2, PH + 1, PH + 2};
    CHECK(r.ci != NULL);
    for (int i = 0; r.ci && i < 5; i++)
        for (int k = 0; k < 3; k++)
            CHECKF(r.ci[k * LH + still[i]].se < 1e-9, "head %d, score %d: se %g", still[i], k,
                   r.ci[k * LH + still[i]].se);
    CHECK(r.ci && r.ci[PH].se > 1e-6 && r.ci[PH].lo <= r.entropy[PH] &&
          r.entropy[PH] <= r.ci[PH].hi);
    /* the same run again: bitwise the same numbers */
    al_attnstats_result r2;
    CHECK_OK(al_attnstats_run(&m, &d, T, &o, &r2, &e), &e);
    CHECK(memcmp(r.entropy, r2.entropy, sizeof(double) * 3 * r.L * r.H) == 0);
    al_attnstats_result_free(&r2);
    al_attnstats_result_free(&r);
    CHECK(r.entropy == NULL);
    al_attnstats_result_free(&r); /* harmless on a zeroed struct */
    al_tokens_free(&d);
    al_model_free(&m);
}

TEST(attnstats_refusals) {
    al_model m;
    planted_model(&m);
    al_tokens d;
    planted_text(&d, 20);
    al_attnstats_opts o = al_attnstats_opts_defaults();
    al_attnstats_result r;
    al_err e;
    CHECK(al_attnstats_run(&m, &d, PP + 1, &o, &r, &e) == -1); /* past n_ctx */
    CHECK(strstr(e.msg, "2..32") != NULL);
    CHECK(al_attnstats_run(&m, &d, PP, &o, &r, &e) == -1); /* file shorter than a window */
    CHECK(r.entropy == NULL);
    o.batches = 0;
    CHECK(al_attnstats_run(&m, &d, 8, &o, &r, &e) == -1);
    CHECK(strstr(e.msg, "--batches") != NULL);
    al_tokens_free(&d);
    al_model_free(&m);
}
