/* test_intervals.c -- how sure the averaged numbers are (stats.h's
 * al_boot_means, the scores' intervals): hand values, repeatability, and
 * the calibration the intervals promise, on a model whose population
 * values are computed once from a very large probe. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attnlab/analyses.h"
#include "attnlab/stats.h"
#include "randmodel.h"
#include "attnlab/thresholds.h"
#include "test.h"

/* 95% coverage over 1,000 draws: 93-97%. Under AddressSanitizer the
 * calibrations do not run: that build checks memory (the intervals' code
 * runs in the other tests here), the plain build the coverage. */
static int coverage_ok(int cover) { return cover >= 930 && cover <= 970; }

/* Hand values: the standard error is the sample sd over sqrt(n); the
 * bootstrap interval lies within the data's range, holds the mean of a
 * symmetric sample, narrows with a lower level, repeats bit for bit for
 * a seed; B = 0 gives no interval; bad arguments are refused. */
TEST(intervals_boot_means_hand_values) {
    al_err e;
    /* two columns: 1..8, and 10·(1..8) */
    double x[16];
    for (int i = 0; i < 8; i++) x[2 * i] = i + 1, x[2 * i + 1] = 10.0 * (i + 1);
    al_interval a[2], b[2], c[2];
    CHECK_OK(al_boot_means(x, 8, 2, 500, 0.95, 7, a, &e), &e);
    double sd = sqrt(42.0 / 7); /* Σ (i − 4.5)² over 1..8 = 42 */
    CHECK_NEAR(a[0].se, sd / sqrt(8.0), 1e-12);
    CHECK_NEAR(a[1].se, 10 * sd / sqrt(8.0), 1e-11);
    CHECK(a[0].lo >= 1 && a[0].hi <= 8 && a[0].lo < 4.5 && a[0].hi > 4.5);
    /* the same resamples for every column: column 1 is 10 x column 0 */
    CHECK_NEAR(a[1].lo, 10 * a[0].lo, 1e-9);
    CHECK_NEAR(a[1].hi, 10 * a[0].hi, 1e-9);
    CHECK_OK(al_boot_means(x, 8, 2, 500, 0.95, 7, b, &e), &e);
    CHECK(!memcmp(a, b, sizeof a));
    CHECK_OK(al_boot_means(x, 8, 2, 500, 0.5, 7, c, &e), &e);
    CHECK(c[0].lo >= a[0].lo && c[0].hi <= a[0].hi && c[0].hi - c[0].lo < a[0].hi - a[0].lo);
    CHECK_OK(al_boot_means(x, 8, 2, 0, 0.95, 7, c, &e), &e);
    CHECK(isnan(c[0].lo) && isnan(c[0].hi) && c[0].se == a[0].se);
    CHECK_OK(al_boot_means(x, 1, 2, 100, 0.95, 7, c, &e), &e);
    CHECK(isnan(c[0].se) && isnan(c[0].lo));
    CHECK(al_boot_means(x, 8, 2, 100, 1.0, 7, c, &e) == -1 && strstr(e.msg, "level"));
    CHECK(al_boot_means(x, 0, 2, 100, 0.9, 7, c, &e) == -1);
    CHECK(al_boot_means(x, 8, 2, -1, 0.9, 7, c, &e) == -1);
    /* a NaN item: the standard error and the interval are NaN, not a number */
    x[4] = NAN;
    CHECK_OK(al_boot_means(x, 8, 2, 100, 0.95, 7, c, &e), &e);
    CHECK(isnan(c[0].se) && isnan(c[0].lo) && !isnan(c[1].lo));
    CHECK_NEAR(al_normal_quantile(0.95), 1.959963984540054, 1e-9);
    CHECK_NEAR(al_normal_quantile(0.99), 2.5758293035489, 1e-9);
    CHECK_NEAR(al_normal_quantile(1 - 0.05 / 16), 2.9551668474978, 1e-9);
    CHECK_NEAR(al_t_quantile(0.95, 63), 1.998340, 1e-5);
    CHECK_NEAR(al_t_quantile(0.95, 5), 2.570582, 4e-3);
    CHECK_NEAR(al_t_quantile(0.95, 1), 12.706205, 1e-5);
    CHECK_NEAR(al_t_quantile(0.95, 2), 4.302653, 1e-5);
    CHECK(isnan(al_normal_quantile(1.0)) && isnan(al_normal_quantile(0)));
    /* grouped items: 1, 2 in sequence 0 and 3, 10 in sequence 2 (none in
     * 1): sums 3 and 13 over 2 each, R = 4, a − R·d = −5 and +5, so se =
     * sqrt(50) / sqrt(2) / 2 = 2.5 */
    double gx[4] = {1, 2, 3, 10};
    int grp[4] = {0, 0, 2, 2};
    CHECK_OK(al_boot_group_means(gx, grp, 4, 1, 3, 200, 0.95, 7, c, &e), &e);
    CHECK_NEAR(c[0].se, 2.5, 1e-12);
    CHECK(c[0].lo >= 1.5 && c[0].hi <= 6.5);
    /* one item per group: the plain standard error of the mean */
    int own[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int i = 0; i < 8; i++) x[2 * i] = i + 1, x[2 * i + 1] = 10.0 * (i + 1);
    CHECK_OK(al_boot_group_means(x, own, 8, 2, 8, 0, 0.95, 7, c, &e), &e);
    CHECK_NEAR(c[0].se, a[0].se, 1e-12);
    CHECK_NEAR(c[1].se, a[1].se, 1e-11);
    grp[3] = 3;
    CHECK(al_boot_group_means(gx, grp, 4, 1, 3, 200, 0.95, 7, c, &e) == -1 &&
          strstr(e.msg, "group 3"));
}

/* Calibration: a random 2-layer model with sharpened attention; the
 * population value of each probe number is its mean over 400,000 probe
 * sequences. Then 1,000 independent draws of the default 64 sequences
 * (other seeds; whole sequences, as the scores resample them), each with
 * its 95% expanded percentile interval at the default 500 resamples:
 * the intervals must hold the population value 93-97% of the time, for
 * a head's induction score, another's previous-token score, and
 * icl_gain (a difference of two losses over the same sequence). */
TEST(intervals_scores_calibration) {
    if (T_SAN) t_skip("a calibration: the plain build's");
    al_model m;
    al_err e;
    rand_model(&m, 2, 0, 20);
    scale_qk(&m, 3.0f);
    al_scores_opts o = al_scores_opts_defaults();
    o.probe_r = 7, o.probe_n = 400000, o.bootstrap = 0, o.probe_seed = 99;
    al_scores_result pop;
    CHECK_OK(al_scores_run(&m, NULL, 0, 0, NULL, &o, &pop, &e), &e);
    const int LH = pop.L * pop.H;
    /* the head with the largest induction and the one with the largest
     * previous-token score, so the checks are on scores that vary */
    int hi = 0, hp = 0;
    for (int i = 1; i < LH; i++) {
        if (pop.probe.induction[i] > pop.probe.induction[hi]) hi = i;
        if (pop.probe.prev_token[i] > pop.probe.prev_token[hp]) hp = i;
    }
    const double want[3] = {pop.probe.induction[hi], pop.probe.prev_token[hp], pop.probe.icl_gain};
    const int col[3] = {hi, 2 * LH + hp, 4 * LH};
    int cover[3] = {0}, draws = 1000;
    o.probe_n = AL_SCORES_OPTS_DEFAULT_N, o.bootstrap = AL_CI_BOOTSTRAP;
    for (int d = 0; d < draws; d++) {
        al_scores_result r;
        o.probe_seed = 21000 + (uint64_t)d, o.ci_seed = 25000 + (uint64_t)d;
        CHECK_OK(al_scores_run(&m, NULL, 0, 0, NULL, &o, &r, &e), &e);
        for (int k = 0; k < 3; k++)
            cover[k] += r.ci[col[k]].lo <= want[k] && want[k] <= r.ci[col[k]].hi;
        al_scores_result_free(&r);
    }
    static const char *const what[3] = {"induction", "prev_token", "icl_gain"};
    for (int k = 0; k < 3; k++) {
        printf(
            "    %s (population %.4f): 95%% intervals held it in %d of %d draws of %d sequences\n",
            what[k], want[k], cover[k], draws, AL_SCORES_OPTS_DEFAULT_N);
        CHECKF(coverage_ok(cover[k]), "%s: coverage %d of %d", what[k], cover[k], draws);
    }
    al_scores_result_free(&pop);
    al_model_free(&m);
}

/* The call on a score: yes only when the simultaneous interval clears
 * the threshold, undecided when the value does but the interval does
 * not (or there is no standard error), no at or below it. */
TEST(intervals_calls) {
    CHECK(al_scores_call(0.45, 0.01, 2.96, 0.4) == 1);
    CHECK(al_scores_call(0.42, 0.01, 2.96, 0.4) == 0);
    CHECK(al_scores_call(0.42, NAN, 2.96, 0.4) == 0);
    CHECK(al_scores_call(0.40, 0.0, 2.96, 0.4) == -1);
    CHECK(al_scores_call(0.10, 0.5, 2.96, 0.4) == -1);
}

/* scores on the command line: each head's standard error and interval
 * in --json, score_intervals' rows (4 per head of the 2 x 4 and icl_gain), the ± in
 * the text; the same seed repeats them, another moves them; --bootstrap
 * 0 keeps the standard errors only; --ci outside (0, 1) is refused
 * before any run. */
TEST(intervals_scores_cli) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 20);
    const char *base = "%s scores --model %s/m2 --db %s --probe-r 6 --probe-n 16 --threads 1";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, base, t_bin(), dir.s, db.s);
    CHECK(t_sh("%s --json > %s 2>/dev/null", cmd, t_path("a.json")) == 0);
    CHECK(t_sh("%s --json > %s 2>/dev/null", cmd, t_path("b.json")) == 0);
    CHECK(t_sh("%s --json --ci-seed 9 > %s 2>/dev/null", cmd, t_path("c.json")) == 0);
    CHECK(t_sh("%s --json --bootstrap 0 > %s 2>/dev/null", cmd, t_path("d.json")) == 0);
    CHECK(t_sh("%s > %s 2>/dev/null", cmd, t_path("t.txt")) == 0);
    char *a = t_slurp(t_path("a.json")), *b = t_slurp(t_path("b.json"));
    char *c = t_slurp(t_path("c.json")), *d = t_slurp(t_path("d.json")),
         *t = t_slurp(t_path("t.txt"));
    cJSON *ja = a ? cJSON_Parse(a) : NULL, *jb = b ? cJSON_Parse(b) : NULL;
    cJSON *jc = c ? cJSON_Parse(c) : NULL, *jd = d ? cJSON_Parse(d) : NULL;
    CHECK(ja && jb && jc && jd);
    const cJSON *iv = cJSON_GetObjectItemCaseSensitive(ja, "intervals");
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(iv, "level")) == 0.95 &&
          cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(iv, "bootstrap")) == 500 &&
          cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(iv, "items")) == 16);
    const cJSON *ha = cJSON_GetObjectItemCaseSensitive(ja, "heads"), *h;
    int n = 0, moved = 0;
    cJSON_ArrayForEach(h, ha) {
        const cJSON *ci = cJSON_GetObjectItemCaseSensitive(h, "prev_token_ci");
        double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(h, "prev_token"));
        double se = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(h, "prev_token_se"));
        double lo = cJSON_GetNumberValue(cJSON_GetArrayItem(ci, 0));
        double hi = cJSON_GetNumberValue(cJSON_GetArrayItem(ci, 1));
        CHECKF(se > 0 && lo <= v && v <= hi && hi - lo > se && hi - lo < 8 * se,
               "head %d: %g in [%g, %g], se %g", n, v, lo, hi, se);
        const cJSON *hc = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(jc, "heads"), n);
        moved +=
            cJSON_GetNumberValue(
                cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(hc, "prev_token_ci"), 0)) != lo;
        const cJSON *hd = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(jd, "heads"), n);
        CHECK(cJSON_IsNull(
                  cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(hd, "prev_token_ci"), 0)) &&
              cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(hd, "prev_token_se")) == se);
        n++;
    }
    CHECK(n == 8 && moved > 0);
    /* the same seed: the same document, but for the run id */
    cJSON_DeleteItemFromObject(ja, "run"), cJSON_DeleteItemFromObject(jb, "run");
    CHECK(cJSON_Compare(ja, jb, 1));
    CHECK(t && strstr(t, "±") && strstr(t, "icl_gain") && strstr(t, " ± "));
    CHECK_SQL(db.s, "SELECT count(*), count(ci_lo) FROM score_intervals WHERE run_id = 1", "33|33");
    CHECK_SQL(db.s,
              "SELECT count(*), count(ci_lo), count(se) FROM score_intervals WHERE run_id = 4",
              "33|0|33");
    CHECK_SQL(db.s,
              "SELECT count(*) FROM score_intervals i JOIN head_scores s USING (run_id, layer, "
              "head, metric) WHERE i.run_id = 1 AND i.value = s.value",
              "32");
    /* a refused level leaves no run */
    CHECK(t_sh("%s --ci 1 > /dev/null 2> %s", cmd, t_path("err")) == 2);
    char *err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "--ci must be a level strictly between 0 and 1"));
    CHECK_SQL(db.s, "SELECT count(*) FROM runs", "5");
    free(err);
    cJSON_Delete(ja), cJSON_Delete(jb), cJSON_Delete(jc), cJSON_Delete(jd);
    free(a), free(b), free(c), free(d), free(t);
    /* with --data, copying_ablation's interval over the windows, and the
     * call "copying head" made on it at the simultaneous z */
    CHECK(t_sh("%s --data %s/s.val.bin --batches 2 --batch 4 --json > %s 2>/dev/null", cmd, dir.s,
               t_path("e.json")) == 0);
    char *je = t_slurp(t_path("e.json"));
    cJSON *de = je ? cJSON_Parse(je) : NULL;
    double z = cJSON_GetNumberValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(de, "intervals"),
                                         "simultaneous_z"));
    int named = 0, want_named = 0;
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(de, "heads")) {
        double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(h, "copying_ablation"));
        double se =
            cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(h, "copying_ablation_se"));
        CHECKF(se > 0 && isfinite(v), "copying_ablation %g ± %g", v, se);
        want_named += v > AL_TH_COPY_ABLATION;
    }
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(de, "copying_heads")) {
        double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(h, "value"));
        double se = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(h, "se"));
        const char *call = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "call"));
        CHECKF(call && !strcmp(call, v - z * se > AL_TH_COPY_ABLATION ? "yes" : "undecided"),
               "%g ± %g called %s", v, se, call ? call : "?");
        named++;
    }
    CHECK(named == want_named);
    /* the report names them with the same calls */
    CHECK(t_sh("%s report --db %s --model %s/m2 --out %s/rep --pictures none > /dev/null 2>&1",
               t_bin(), db.s, dir.s, dir.s) == 0);
    char page[1200];
    snprintf(page, sizeof page, "%s/rep/index.html", dir.s);
    char *html = t_slurp(page);
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(de, "copying_heads")) {
        char want[160];
        const char *call = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "call"));
        snprintf(want, sizeof want, "%s (%.3f &plusmn; %.3f%s)",
                 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(h, "head")),
                 cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(h, "value")),
                 cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(h, "se")),
                 call && !strcmp(call, "undecided") ? ", undecided" : "");
        CHECKF(html && strstr(html, want), "page lacks [%s]", want);
    }
    free(html);
    CHECK_SQL(db.s,
              "SELECT count(*), min(n_items), max(n_items) FROM score_intervals WHERE run_id = 6 "
              "AND metric = 'copying_ablation'",
              "8|8|8");
    cJSON_Delete(de);
    free(je);
}

/* planted.h's induction circuit at a small size (V 16 tokens, 16
 * positions, 3 heads of 16; the same subspaces: TOK, POS, PREV, OUT,
 * BIAS), softened so that it works on each pair only in part: QK scores
 * at `soft` of the planted gap of 30, OV at 1, and every weight
 * jittered by N(0, jit). Head 0.0 is the previous-token head, 1.0 the
 * induction head; the other heads are noise. */
enum { MV = 16, MP = 16, MH = 3, MD = 16, MC = 3 * MV + MP + 1 };
static void mini_planted(al_model *m, float soft, double jit) {
    al_config c = al_config_default();
    c.n_layers = 2, c.d_model = MC, c.n_heads = MH, c.d_head = MD, c.n_ctx = MP;
    c.d_vocab = MV, c.seed = 1;
    al_err e;
    CHECK_OK(al_model_alloc(m, &c, &e), &e);
    const int TOK = 0, POS = MV, PREV = MV + MP, OUT = 2 * MV + MP, BIAS = 3 * MV + MP;
    const float alpha = soft * 30.0f * sqrtf((float)MD);
    for (int v = 0; v < MV; v++) m->p[AL_P_WE][v * MC + TOK + v] = 1;
    for (int t = 0; t < MP; t++) {
        m->p[AL_P_WPOS][t * MC + POS + t] = 1;
        m->p[AL_P_WPOS][t * MC + BIAS] = 1;
    }
    for (int v = 0; v < MV; v++) m->p[AL_P_WU][(OUT + v) * MV + v] = 1;
    for (int t = 0; t + 1 < MD && t < MP; t++) {
        al_head_wq(m, 0, 0)[(POS + t) * MD + t] = alpha;
        al_head_wk(m, 0, 0)[(POS + t) * MD + t + 1] = 1;
    }
    for (int v = 0; v < MV; v++) {
        al_head_wv(m, 0, 0)[(TOK + v) * MD + v] = 1;
        al_head_wo(m, 0, 0)[v * MC + PREV + v] = 1;
        al_head_wq(m, 1, 0)[(TOK + v) * MD + v] = alpha;
        al_head_wk(m, 1, 0)[(PREV + v) * MD + v] = 1;
        al_head_wv(m, 1, 0)[(TOK + v) * MD + v] = 1;
        al_head_wo(m, 1, 0)[v * MC + OUT + v] = 4;
    }
    al_rng g;
    al_rng_seed(&g, 5);
    for (int w = AL_P_WQ; w <= AL_P_WO; w++)
        for (size_t i = 0; i < m->param_size[w]; i++)
            m->p[w][i] += (float)(jit * al_rng_normal(&g));
}

/* Calibration of the normalised patching effect, a ratio: on mini_planted
 * (soft 0.1, jitter 0.05), the population effect of patching each head
 * (denoising the induction task) from 40,000 pairs; then 1,000 draws of
 * the default 64 pairs, each effect's 95% interval (pairs resampled
 * whole, numerator and denominator together): the intervals must hold
 * the population effect 93-97% of the time, for the two heads of the
 * largest |effect| (the induction and the previous-token head). */
TEST(intervals_patch_effect_calibration) {
    if (T_SAN) t_skip("a calibration: the plain build's");
    al_model m;
    al_err e;
    mini_planted(&m, 0.1f, 0.05);
    al_patch_opts o = al_patch_opts_defaults();
    o.probe_r = 6, o.probe_n = 40000, o.batch = 500, o.bootstrap = 0, o.probe_seed = 77;
    al_pairs t;
    al_patch_result pop;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    CHECK_OK(al_patch_run(&m, &t, &o, &pop, &e), &e);
    al_pairs_free(&t);
    /* the largest |effect| and the median one */
    int idx[64], n = pop.n;
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && fabs(pop.effect[idx[j]]) > fabs(pop.effect[idx[j - 1]]); j--) {
            int x = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = x;
        }
    const int pick[2] = {idx[0], idx[1]};
    int cover[2] = {0}, draws = 1000;
    o.probe_n = AL_PATCH_OPTS_DEFAULT_N, o.batch = AL_PATCH_OPTS_DEFAULT_N;
    o.bootstrap = AL_CI_BOOTSTRAP;
    for (int d = 0; d < draws; d++) {
        al_patch_result r;
        o.probe_seed = 31000 + (uint64_t)d, o.ci_seed = 35000 + (uint64_t)d;
        CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
        CHECK_OK(al_patch_run(&m, &t, &o, &r, &e), &e);
        for (int k = 0; k < 2; k++) {
            cover[k] += r.effect_ci[pick[k]].lo <= pop.effect[pick[k]] &&
                        pop.effect[pick[k]] <= r.effect_ci[pick[k]].hi;
        }
        al_patch_result_free(&r);
        al_pairs_free(&t);
    }
    for (int k = 0; k < 2; k++) {
        printf(
            "    head %d.%d's normalised effect (population %+.4f): 95%% intervals held it in %d "
            "of %d draws of %d pairs\n",
            pick[k] / pop.cols, pick[k] % pop.cols, pop.effect[pick[k]], cover[k], draws,
            AL_PATCH_OPTS_DEFAULT_N);
        CHECKF(coverage_ok(cover[k]), "coverage %d of %d", cover[k], draws);
    }
    al_patch_result_free(&pop);
    al_model_free(&m);
}

/* patch and paths on the command line: every configuration's effect_se
 * and effect_ci in --json (the interval around the effect), the same
 * numbers in score_intervals keyed as the patching and path_patching
 * rows, and ± in the text. */
TEST(intervals_patch_cli) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 20);
    CHECK(t_sh("%s patch --model %s/m2 --db %s --probe-r 6 --n 16 --batch 8 --threads 1 --json > "
               "%s 2>/dev/null",
               t_bin(), dir.s, db.s, t_path("p.json")) == 0);
    CHECK(t_sh("%s patch --model %s/m2 --db %s --probe-r 6 --n 16 --batch 8 --threads 1 > %s "
               "2>/dev/null",
               t_bin(), dir.s, db.s, t_path("p.txt")) == 0);
    char *j = t_slurp(t_path("p.json")), *t = t_slurp(t_path("p.txt"));
    cJSON *d = j ? cJSON_Parse(j) : NULL;
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(d, "configurations"), *c;
    int n = 0, inside = 0;
    cJSON_ArrayForEach(c, cs) {
        double v = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "effect"));
        const cJSON *ci = cJSON_GetObjectItemCaseSensitive(c, "effect_ci");
        double lo = cJSON_GetNumberValue(cJSON_GetArrayItem(ci, 0));
        double hi = cJSON_GetNumberValue(cJSON_GetArrayItem(ci, 1));
        double se = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "effect_se"));
        CHECKF(lo <= hi && se >= 0, "%g [%g, %g] se %g", v, lo, hi, se);
        inside += lo <= v && v <= hi;
        n++;
    }
    CHECK(n == 8 && inside >= 7);
    CHECK(cJSON_GetNumberValue(
              cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "intervals"),
                                               "items")) == 16);
    CHECK_SQL(db.s,
              "SELECT count(*) FROM score_intervals i JOIN patching p ON p.run_id = i.run_id AND "
              "coalesce(p.layer, -1) = i.layer AND coalesce(p.head, -1) = i.head AND "
              "coalesce(p.pos, -1) = i.pos AND p.value = i.value "
              "WHERE i.run_id = 1 AND i.metric = 'effect_head'",
              "8");
    CHECK(t && strstr(t, "± standard error over the 16 pairs"));
    cJSON_Delete(d);
    free(j), free(t);
    /* paths: every path's interval, stored under its receiver, sender and channel */
    CHECK(t_sh("%s paths --model %s/m2 --db %s --probe-r 6 --n 16 --batch 8 --threads 1 --json > "
               "%s 2>/dev/null",
               t_bin(), dir.s, db.s, t_path("q.json")) == 0);
    j = t_slurp(t_path("q.json"));
    d = j ? cJSON_Parse(j) : NULL;
    int np = 0, with = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(d, "paths")) {
        const cJSON *ci = cJSON_GetObjectItemCaseSensitive(c, "effect_ci");
        double lo = cJSON_GetNumberValue(cJSON_GetArrayItem(ci, 0));
        double hi = cJSON_GetNumberValue(cJSON_GetArrayItem(ci, 1));
        with += lo <= hi;
        np++;
    }
    CHECK(np > 0 && with == np);
    char want[32];
    snprintf(want, sizeof want, "%d", np);
    CHECK_SQL(db.s, "SELECT count(*) FROM score_intervals WHERE run_id = 3", want);
    CHECK_SQL(db.s,
              "SELECT count(*) FROM path_patching p WHERE run_id = 3 AND NOT EXISTS (SELECT 1 "
              "FROM score_intervals i WHERE i.run_id = 3 AND i.metric = 'path_effect_' || "
              "p.channel AND i.layer = coalesce(p.receiver_layer, -1) AND i.head = "
              "coalesce(p.receiver_head, -1) AND i.value = p.value)",
              "0");
    cJSON_Delete(d);
    free(j);
}

/* The faithfulness of a discovered circuit is a ratio over the pairs:
 * the empty circuit is the corrupted run pair by pair (faithfulness 0,
 * no spread), the whole graph the clean run (1, no spread); in between
 * the interval has width, holds the point, and is stored beside the
 * circuit (score_intervals, pos -1 for the main circuit, the sweep's
 * index for the others), printed with ± and in --json. */
TEST(intervals_faithfulness) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 20);
    const char *taus[3][2] = {{"1e9", "le"}, {"0", "lt"}, {"0.0001", "le"}};
    double want[2] = {0, 1};
    for (int k = 0; k < 3; k++) {
        t_pbuf js = t_pcopy("d.json");
        CHECK(t_sh("%s discover --model %s/m2 --db %s --probe-r 6 --n 16 --threads 1 --tau %s "
                   "--acdc-remove %s %s --json > %s 2>/dev/null",
                   t_bin(), dir.s, db.s, taus[k][0], taus[k][1],
                   k == 2 ? "--sweep 0.00001,0.001" : "", js.s) == 0);
        char *j = t_slurp(js.s);
        cJSON *d = j ? cJSON_Parse(j) : NULL;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "circuit");
        double f = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "faithfulness"));
        double se = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "faithfulness_se"));
        const cJSON *ci = cJSON_GetObjectItemCaseSensitive(c, "faithfulness_ci");
        double lo = cJSON_GetNumberValue(cJSON_GetArrayItem(ci, 0));
        double hi = cJSON_GetNumberValue(cJSON_GetArrayItem(ci, 1));
        int kept = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "kept"));
        if (k < 2) {
            CHECKF(k ? kept > 100 : kept == 0, "%d of 106 edges kept", kept);
            CHECKF(fabs(f - want[k]) < 1e-4 && se < 1e-4 && fabs(lo - want[k]) < 1e-4 &&
                       fabs(hi - want[k]) < 1e-4,
                   "tau %s: %g ± %g [%g, %g]", taus[k][0], f, se, lo, hi);
        } else {
            CHECKF(se > 1e-4 && lo < f && f < hi, "%g ± %g [%g, %g]", f, se, lo, hi);
            CHECK_SQL(db.s,
                      "SELECT count(*) FROM score_intervals i JOIN circuit_runs x USING (run_id) "
                      "WHERE run_id = 3 AND i.metric = 'faithfulness' AND i.n_items = 16 AND "
                      "i.pos = -1 AND x.tau = 0.0001 AND i.value = x.faithfulness",
                      "1");
            CHECK_SQL(db.s,
                      "SELECT group_concat(pos) FROM (SELECT pos FROM score_intervals WHERE "
                      "run_id = 3 ORDER BY pos)",
                      "-1,1,2");
            char *se_db =
                t_sql(db.s, "SELECT se FROM score_intervals WHERE run_id = 3 AND pos = -1");
            CHECKF(se_db && fabs(atof(se_db) - se) < 1e-9 * (1 + se), "%s vs %g",
                   se_db ? se_db : "", se);
            free(se_db);
        }
        cJSON_Delete(d);
        free(j);
    }
    CHECK(t_sh("%s discover --model %s/m2 --db %s --probe-r 6 --n 16 --threads 1 > %s 2>/dev/null",
               t_bin(), dir.s, db.s, t_path("d.txt")) == 0);
    char *t = t_slurp(t_path("d.txt"));
    CHECKF(t && strstr(t, "faithfulness ") && strstr(t, " ± ") &&
               strstr(t, "bootstrap of the ratio over the pairs"),
           "%s", t ? t : "");
    free(t);
    /* --resample: the main circuit's search on resamples of the pairs;
     * every edge listed has its inclusion row, the Jaccard its own */
    t_pbuf js = t_pcopy("s.json");
    CHECK(t_sh("%s discover --model %s/m2 --db %s --probe-r 6 --n 16 --threads 1 --tau 0.0001 "
               "--resample 3 --json > %s 2>/dev/null",
               t_bin(), dir.s, db.s, js.s) == 0);
    char *j = t_slurp(js.s);
    cJSON *d = j ? cJSON_Parse(j) : NULL;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(d, "stability"), *x;
    double jm = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(st, "jaccard_mean"));
    int n_ed = 0, n_main = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(st, "edges")) {
        double f = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "frequency"));
        CHECK(f >= 0 && f <= 1 && fabs(f * 3 - round(f * 3)) < 1e-12);
        n_main += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "kept"));
        n_ed++;
    }
    int kept = (int)cJSON_GetNumberValue(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "circuit"), "kept"));
    CHECKF(jm > 0 && jm <= 1 && n_main == kept && n_ed >= kept, "Jaccard %g, %d edges, %d kept", jm,
           n_ed, kept);
    char wn[64];
    snprintf(wn, sizeof wn, "%d|3", n_ed);
    CHECK_SQL(db.s,
              "SELECT count(*), max(n_items) FROM score_intervals WHERE run_id = 5 AND metric "
              "LIKE 'inclusion:%'",
              wn);
    CHECK_SQL(db.s, "SELECT count(*) FROM score_intervals WHERE run_id = 5 AND metric = 'jaccard'",
              "1");
    cJSON_Delete(d);
    free(j);
    /* the text says the same, and lists the edges that are not stable */
    t_pbuf db2 = t_pcopy("r2.db");
    CHECK(t_sh("%s discover --model %s/m2 --db %s --probe-r 6 --n 16 --threads 1 --tau 0.0001 "
               "--resample 3 > %s 2>/dev/null",
               t_bin(), dir.s, db2.s, t_path("s.txt")) == 0);
    char *tx = t_slurp(t_path("s.txt")), wj[96];
    snprintf(wj, sizeof wj, "Jaccard with the main circuit %.3f ± ", jm);
    CHECKF(tx && strstr(tx, "stability over 3 resamples of the pairs (") && strstr(tx, wj),
           "want [%s] in:\n%s", wj, tx ? tx : "");
    free(tx);
    CHECK(t_sh("%s discover --model %s/m2 --db %s --probe-r 6 --n 16 --resample -1 > /dev/null "
               "2>&1",
               t_bin(), dir.s, db.s) == 2);
    CHECK_SQL(db.s, "SELECT count(*) FROM runs", "5");
}

/* The report prints the intervals it has: each patching and path
 * patching row of its tables with its se and 95% interval from
 * score_intervals, and the circuit's faithfulness with its interval. */
TEST(intervals_in_the_report) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("rep");
    t_tiny_model(dir.s, 2, 20);
    CHECK(t_sh("%s patch --model %s/m2 --db %s --probe-r 6 --n 16 --threads 1 > /dev/null 2>&1 && "
               "%s paths --model %s/m2 --db %s --probe-r 6 --n 16 --threads 1 > /dev/null 2>&1 && "
               "%s discover --model %s/m2 --db %s --probe-r 6 --n 16 --threads 1 --tau 0.0001 > "
               "/dev/null 2>&1 && %s report --db %s --model %s/m2 --out %s --pictures none > "
               "/dev/null 2>&1",
               t_bin(), dir.s, db.s, t_bin(), dir.s, db.s, t_bin(), dir.s, db.s, t_bin(), db.s,
               dir.s, out.s) == 0);
    char page[1200];
    snprintf(page, sizeof page, "%s/index.html", out.s);
    char *h = t_slurp(page);
    /* the largest patching effect's row, every number from the database */
    char *row =
        t_sql(db.s, "SELECT printf('<td>%+.4f</td><td>%.4f</td><td>%.4f</td><td>%+.4f</td>"
                    "<td>%+.4f</td></tr>', p.value, p.metric, i.se, i.ci_lo, i.ci_hi) FROM "
                    "patching p JOIN score_intervals i ON i.run_id = p.run_id AND i.layer = "
                    "p.layer AND i.head = p.head AND i.metric = 'effect_head' WHERE p.run_id = 1 "
                    "ORDER BY abs(p.value) DESC LIMIT 1");
    CHECKF(h && row && strstr(h, row), "page lacks [%s]", row ? row : "");
    /* the largest path's row */
    char *prow =
        t_sql(db.s, "SELECT printf('<td>%.4f</td><td>%+.4f</td><td>%+.4f</td></tr>', i.se, "
                    "i.ci_lo, i.ci_hi) FROM path_patching p JOIN score_intervals i ON "
                    "i.run_id = p.run_id AND i.metric = 'path_effect_' || p.channel AND "
                    "i.value = p.value WHERE p.run_id = 2 ORDER BY abs(p.value) DESC LIMIT 1");
    CHECKF(h && prow && strstr(h, prow), "page lacks [%s]", prow ? prow : "");
    char *faith =
        t_sql(db.s, "SELECT printf('with faithfulness %.3f (95%% interval %.3f to %.3f over "
                    "the pairs; ', value, ci_lo, ci_hi) FROM score_intervals WHERE run_id = 3 "
                    "AND metric = 'faithfulness' AND pos = -1");
    CHECKF(h && faith && strstr(h, faith), "page lacks [%s]", faith ? faith : "");
    CHECK(h && strstr(h, "<th>± se</th><th>95% lo</th><th>95% hi</th>"));
    free(h), free(row), free(prow), free(faith);
    /* drawn: the report's interval pictures, one per patching run, and
     * --what intervals of a run, refusing a run that is not of its kinds */
    t_pbuf out2 = t_pcopy("rep2");
    CHECK(t_sh("%s report --db %s --model %s/m2 --out %s --pictures intervals > /dev/null 2>&1",
               t_bin(), db.s, dir.s, out2.s) == 0);
    CHECK(t_sh("test -s %s/m2-intervals-patching-induction-head-denoise.png && test -s "
               "%s/m2-intervals-paths-induction-noise.png",
               out2.s, out2.s) == 0);
    CHECK(t_sh("%s heatmap --what intervals --model %s/m2 --db %s --run 2 --out %s > /dev/null "
               "2>&1",
               t_bin(), dir.s, db.s, t_path("iv.png")) == 0);
    CHECK(t_sh("%s heatmap --what intervals --model %s/m2 --db %s --run 3 --out %s > /dev/null "
               "2> %s",
               t_bin(), dir.s, db.s, t_path("iv3.png"), t_path("iv3.err")) != 0);
    char *err = t_slurp(t_path("iv3.err"));
    CHECKF(err && strstr(err, "run 3 is a 'discover' run; --what intervals draws") &&
               !strchr(strchr(err, '\n') + 1, '\n') && t_sh("test -e %s", t_path("iv3.png")) != 0,
           "%s", err ? err : "");
    free(err);
}
