/* test_scores.c -- probe scores on a hand-built induction circuit, copy
 * positions and the in-context-learning score by hand, and `attnlab
 * scores` end to end on a small trained model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "attnlab/data.h"
#include "attnlab/patch.h"
#include "attnlab/scores.h"
#include "planted.h"
#include "test.h"

TEST(scores_planted_induction_head) {
    al_model m;
    planted_model(&m);
    al_probe p;
    al_probe_scores s;
    al_err e;
    const int R = 10, N = 64;
    CHECK_OK(al_probe_make(&p, R, N, 3, PV, 0, NULL, &e), &e);
    CHECK_OK(al_probe_run(&m, &p, 16, &s, &e), &e);
    for (int i = 0; i < 2 * PH; i++) {
        if (i == PH)
            CHECKF(s.induction[i] > 0.9, "induction of 1.0 = %g", s.induction[i]);
        else
            CHECKF(s.induction[i] < 0.1, "induction of %d.%d = %g", i / PH, i % PH, s.induction[i]);
        if (i == 0)
            CHECKF(s.prev_token[i] > 0.9, "prev_token of 0.0 = %g", s.prev_token[i]);
        else
            CHECKF(s.prev_token[i] < 0.1, "prev_token of %d.%d = %g", i / PH, i % PH,
                   s.prev_token[i]);
    }
    /* the repeated half is predicted: mean p(next) over positions R+1..2R-1 */
    int T = 2 * R + 1;
    double psum = 0;
    int n = 0;
    for (int b0 = 0; b0 < N; b0 += 16) {
        CHECK_OK(al_model_forward(&m, p.tokens + b0 * T, NULL, 16, T, &e), &e);
        for (int b = 0; b < 16; b++)
            for (int t = R + 1; t <= 2 * R - 1; t++, n++)
                psum += m.probs[((size_t)b * T + t) * PV + p.tokens[(b0 + b) * T + t + 1]];
    }
    CHECKF(psum / n > 0.9, "mean p(next) on the second repeat %g", psum / n);
    CHECKF(s.loss_first > 3 && s.loss_second < 0.3 && s.icl_gain > 3, "probe losses %g / %g",
           s.loss_first, s.loss_second);
    al_probe_scores_free(&s);
    al_probe_free(&p);
    al_model_free(&m);
}

TEST(scores_copy_positions_by_hand) {
    /* row 0: 5 6 5 7 | targets 6 5 7 6 -> 5 was seen at t=1, 6 at t=3 */
    int in[8] = {5, 6, 5, 7, 1, 2, 3, 4};
    int tg[8] = {6, 5, 7, 6, 2, -1, 1, 9};
    unsigned char out[8];
    al_err e;
    CHECK_OK(al_copy_positions(in, tg, 2, 4, 10, out, &e), &e);
    const unsigned char want[8] = {0, 1, 0, 1, 0, 0, 1, 0};
    for (int i = 0; i < 8; i++) CHECKF(out[i] == want[i], "position %d: %d", i, out[i]);
    in[3] = 10; /* outside the vocabulary */
    CHECK(al_copy_positions(in, tg, 2, 4, 10, out, &e) == -1 && strstr(e.msg, "vocabulary"));
}

TEST(scores_icl_score_by_hand) {
    al_icl_range r = al_icl_ranges(256);
    CHECK(r.e0 == 20 && r.e1 == 30 && r.l0 == 246 && r.l1 == 256);
    r = al_icl_ranges(32); /* w = 1 */
    CHECK(r.e0 == 3 && r.e1 == 4 && r.l0 == 31 && r.l1 == 32);
    /* loss(t) = 5 - t/100 on 2 rows of 256; one late target ignored */
    enum { T = 256 };
    static float loss[2 * T];
    static int tg[2 * T];
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < T; t++) {
            loss[b * T + t] = 5.0f - t / 100.0f;
            tg[b * T + t] = 1;
        }
    tg[T + 255] = -1;
    loss[T + 255] = 0; /* as the engine leaves it */
    double early, late, score, se;
    al_err e;
    CHECK_OK(al_icl_score(loss, tg, 2, T, &early, &late, &score, &se, &e), &e);
    /* early: mean t over 20..29 = 24.5; late: (2*(246+...+255) - 255) / 19 */
    double late_t = (2.0 * (246 + 255) * 10 / 2 - 255) / 19;
    CHECK_NEAR(early, 5 - 24.5 / 100, 1e-5);
    CHECK_NEAR(late, 5 - late_t / 100, 1e-5);
    CHECK_NEAR(score, late - early, 1e-12);
    CHECK(al_icl_score(loss, tg, 2, 4, &early, &late, &score, NULL, &e) == -1);
    /* the standard error over rows: per-row differences 0.2 (row 0:
     * loss 3 early, 3.2 late) and 0.6 (row 1: 1 early, 1.6 late) → mean
     * 0.4, sd 0.2828, se 0.2 */
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < T; t++) {
            loss[b * T + t] = t < 128 ? (b ? 1.0f : 3.0f) : (b ? 1.6f : 3.2f);
            tg[b * T + t] = 1;
        }
    CHECK_OK(al_icl_score(loss, tg, 2, T, &early, &late, &score, &se, &e), &e);
    CHECK_NEAR(score, 0.4, 1e-6);
    CHECK_NEAR(se, 0.2, 1e-6);
    CHECK_OK(al_icl_score(loss, tg, 1, T, &early, &late, &score, &se, &e), &e);
    CHECK(isnan(se)); /* one window: no spread to measure */
}

/* ------------------------------------------------------------ the CLI */

/* Byte-level text with repeated phrases and repeated random spans. */
static void write_tokens(const char *path, size_t n, uint64_t seed) {
    const char *phr[] = {"the cat sat on the mat. ", "a dog ran home. ", "Bamurik saw Bamurik. "};
    int *ids = malloc(sizeof(int) * n);
    al_rng r;
    al_rng_seed(&r, seed);
    size_t k = 0;
    while (k < n) {
        if (al_rng_below(&r, 4) == 0) { /* a random span, twice */
            int span[8];
            for (int i = 0; i < 8; i++) span[i] = 'a' + (int)al_rng_below(&r, 26);
            for (int rep = 0; rep < 2; rep++)
                for (int i = 0; i < 8 && k < n; i++) ids[k++] = span[i];
            continue;
        }
        const char *p = phr[al_rng_below(&r, 3)];
        for (; *p && k < n; p++) ids[k++] = (unsigned char)*p;
    }
    al_err e;
    CHECK_OK(al_tokens_save(path, ids, n, &e), &e);
    free(ids);
}

#define SMALL                                                                                      \
    "--d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 --eval-every 0 "                     \
    "--eval-batches 2 --threads 2 --warmup 2"

/* A small model trained 30 steps on write_tokens text: dir = its folder
 * (t_path("model")), val = validation tokens (t_path("val.bin")), db =
 * t_path("r.db") (not created). */
static void small_model(char *dir, char *db, char *val, size_t cap) {
    snprintf(dir, cap, "%s", t_path("model"));
    snprintf(db, cap, "%s", t_path("r.db"));
    snprintf(val, cap, "%s", t_path("val.bin"));
    write_tokens(t_path("train.bin"), 20000, 1);
    write_tokens(val, 3000, 2);
    CHECK(t_sh("%s train --data %s --out %s --steps 30 " SMALL " 2>/dev/null", t_bin(),
               t_path("train.bin"), dir) == 0);
}

TEST(scores_cli_end_to_end) {
    char dir[1024], db[1024], val[1024];
    small_model(dir, db, val, sizeof dir);
    CHECK(t_sh("%s scores --model %s --db %s --data %s --probe-r 10 --probe-n 8 --batches 2 "
               "--batch 4 > %s 2>&1",
               t_bin(), dir, db, val, t_path("out.txt")) == 0);
    char *out = t_slurp(t_path("out.txt"));
    CHECKF(out && strstr(out, "induction heads (induction > 0.4):") &&
               strstr(out, "previous-token heads (prev_token > 0.4):") &&
               strstr(out, "icl_score") && !strstr(out, "ind_all") && !strstr(out, "by layer"),
           "summary (a random probe's as before):\n%s", out ? out : "");
    free(out);
    CHECK_SQL(db, "SELECT kind, status FROM runs", "scores|done");
    CHECK_SQL(db, "SELECT metric, count(*) FROM head_scores GROUP BY metric ORDER BY metric",
              "copying_ablation|8\ncopying_ablation_excess|8\nduplicate_token|8\ninduction|8\n"
              "induction_all|8\nprev_token|8");
    /* per layer the heads' sums */
    CHECK_SQL(db,
              "SELECT count(*) FROM layer_scores l WHERE l.metric = 'induction_all_sum' AND "
              "abs(l.value - (SELECT sum(value) FROM head_scores h WHERE h.run_id = l.run_id "
              "AND h.layer = l.layer AND h.metric = 'induction_all')) < 1e-9",
              "2");
    CHECK_SQL(db, "SELECT count(*) FROM layer_scores WHERE metric = 'induction_sum'", "2");
    CHECK_SQL(db,
              "SELECT count(*) FROM head_summary WHERE induction BETWEEN 0 AND 1 AND "
              "prev_token BETWEEN 0 AND 1 AND copying_ablation IS NOT NULL",
              "8");
    /* model-level: icl_gain = first - second; icl_score = late - early */
    CHECK_SQL(db,
              "SELECT count(*) FROM model_scores WHERE metric IN ('icl_gain', 'icl_score', "
              "'probe_loss_first', 'probe_loss_second', 'icl_loss_early', 'icl_loss_late')",
              "6");
    CHECK_SQL(db,
              "SELECT abs((SELECT value FROM model_scores WHERE metric = 'icl_gain') - "
              "(SELECT value FROM model_scores WHERE metric = 'probe_loss_first') + "
              "(SELECT value FROM model_scores WHERE metric = 'probe_loss_second')) < 1e-9",
              "1");
    CHECK_SQL(db,
              "SELECT abs((SELECT value FROM model_scores WHERE metric = 'icl_score') - "
              "(SELECT value FROM model_scores WHERE metric = 'icl_loss_late') + "
              "(SELECT value FROM model_scores WHERE metric = 'icl_loss_early')) < 1e-9",
              "1");
    /* without --data: probe scores only */
    CHECK(t_sh("%s scores --model %s --db %s --probe-r 10 --probe-n 8 > %s 2>&1", t_bin(), dir, db,
               t_path("out.txt")) == 0);
    out = t_slurp(t_path("out.txt"));
    CHECK(out && strstr(out, "no --data"));
    free(out);
    CHECK_SQL(db, "SELECT count(*) FROM head_scores WHERE run_id = 2", "32");
    CHECK_SQL(db, "SELECT count(*) FROM model_scores WHERE run_id = 2 AND metric = 'icl_score'",
              "0");
    /* a mask: the masked head gets no copying_ablation */
    CHECK(t_sh("printf '{\"n_layers\": 2, \"n_heads\": 4, \"off\": [\"1.2\"]}' > %s",
               t_path("mask.json")) == 0);
    CHECK(t_sh("%s scores --model %s --db %s --data %s --probe-r 10 --probe-n 8 --batches 2 "
               "--batch 4 --mask %s > /dev/null 2>&1",
               t_bin(), dir, db, val, t_path("mask.json")) == 0);
    CHECK_SQL(db,
              "SELECT count(*) FROM head_scores WHERE run_id = 3 AND metric = 'copying_ablation'",
              "7");
    CHECK_SQL(db, "SELECT value FROM model_scores WHERE run_id = 3 AND metric = 'heads_off'",
              "1.0");
    /* bad input: exit 1 (probe too long for n_ctx 32; bad mask), 2 for usage, each before a
     * run row exists */
    CHECK(t_sh("%s scores --model %s --db %s --probe-r 20 2> %s", t_bin(), dir, db,
               t_path("err.txt")) == 1);
    out = t_slurp(t_path("err.txt"));
    CHECKF(out && strstr(out, "n_ctx"), "%s", out ? out : "");
    free(out);
    CHECK_SQL(db, "SELECT count(*) FROM runs", "3");
    CHECK(t_sh("printf '{\"n_layers\": 2, \"n_heads\": 8, \"off\": []}' > %s",
               t_path("bad.json")) == 0);
    CHECK(t_sh("%s scores --model %s --db %s --mask %s 2>/dev/null", t_bin(), dir, db,
               t_path("bad.json")) == 1);
    CHECK_SQL(db, "SELECT count(*) FROM runs", "3");
    CHECK(t_sh("%s scores --model %s --db %s --probe-r 1 2>/dev/null", t_bin(), dir, db) == 2);
    CHECK_SQL(db, "PRAGMA integrity_check", "ok");
    /* run 1's copying scores against `ablate` on the same windows:
     * copying_ablation is its Δ at copy positions, and the excess that minus
     * the Δ at the other positions, (Δall − f Δcopy) / (1 − f) with f the
     * copy fraction */
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --each --method mean --batches 2 --batch 4 "
               "--probe-r 10 --probe-n 8 > /dev/null 2>&1",
               t_bin(), dir, db, val) == 0);
    CHECK_SQL(db,
              "SELECT count(*) FROM ablations a JOIN head_scores c ON c.run_id = 1 AND "
              "c.metric = 'copying_ablation' AND a.heads = c.layer || '.' || c.head JOIN "
              "head_scores x ON x.run_id = 1 AND x.metric = 'copying_ablation_excess' AND "
              "x.layer = c.layer AND x.head = c.head JOIN model_scores f ON f.run_id = 1 AND "
              "f.metric = 'copy_fraction' WHERE a.run_id = (SELECT max(run_id) FROM runs) AND "
              "a.kind = 'single' AND abs(a.delta_loss_copy - c.value) < 1e-6 AND abs(x.value - "
              "(a.delta_loss_copy - (a.delta_loss - f.value * a.delta_loss_copy) / "
              "(1 - f.value))) < 1e-6",
              "8");
    CHECK_SQL(db,
              "SELECT count(*) FROM head_scores WHERE run_id = 1 AND metric = "
              "'copying_ablation_excess' AND value != 0",
              "8");
}

/* --probe-tokens: a probe drawn only from the ids a mask allows, the mask
 * read off a token file, and train/scores taking it from the training
 * data. A byte-level model trained on letters never sees most of its 256
 * ids; the probe must then stay on the ids the text holds. */
TEST(scores_probe_tokens) {
    al_err e;
    al_probe p, q;
    unsigned char allow[PV] = {0};
    allow[3] = allow[5] = allow[7] = 1;
    CHECK_OK(al_probe_make(&p, 20, 8, 9, PV, 0, &(al_probe_src){.allowed = allow}, &e), &e);
    int seen[PV] = {0};
    for (int n = 0; n < 8; n++)
        for (int t = 1; t <= 40; t++) seen[p.tokens[n * 41 + t]]++;
    CHECKF(seen[3] + seen[5] + seen[7] == 8 * 40 && seen[3] && seen[5] && seen[7],
           "ids drawn: 3:%d 5:%d 7:%d of %d", seen[3], seen[5], seen[7], 8 * 40);
    al_probe_free(&p);
    /* a mask of every id draws exactly what no mask draws */
    memset(allow, 1, sizeof allow);
    CHECK_OK(al_probe_make(&p, 20, 8, 9, PV, 0, &(al_probe_src){.allowed = allow}, &e), &e);
    CHECK_OK(al_probe_make(&q, 20, 8, 9, PV, 0, NULL, &e), &e);
    CHECK(memcmp(p.tokens, q.tokens, sizeof(int) * 8 * 41) == 0);
    al_probe_free(&p);
    al_probe_free(&q);
    /* the BOS alone, or one id, is nothing to draw from */
    memset(allow, 0, sizeof allow);
    allow[0] = allow[4] = 1;
    CHECK(al_probe_make(&p, 20, 8, 9, PV, 0, &(al_probe_src){.allowed = allow}, &e) == -1 &&
          strstr(e.msg, "1 allowed"));

    /* the ids present in a token file */
    int ids[5] = {1, 2, 2, 9, 1};
    CHECK_OK(al_tokens_save(t_path("few.bin"), ids, 5, &e), &e);
    al_tokens tk;
    CHECK_OK(al_tokens_load(t_path("few.bin"), &tk, &e), &e);
    int n = 0;
    unsigned char *f = al_tokens_present(&tk, 10, &n, &e);
    CHECK(f && n == 3 && f[1] && f[2] && f[9] && !f[0] && !f[3]);
    free(f);
    CHECK(!al_tokens_present(&tk, 9, &n, &e) && strstr(e.msg, "vocabulary of 9"));
    al_tokens_free(&tk);

    /* end to end: train records its probe on the ids of --data, scores
     * reads them from the model's state.json */
    char dir[1024], db[1024], train[1024];
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    snprintf(db, sizeof db, "%s", t_path("p.db"));
    snprintf(train, sizeof train, "%s", t_path("train.bin"));
    write_tokens(train, 20000, 1);
    CHECK_OK(al_tokens_load(train, &tk, &e), &e);
    int n_text = 0;
    free(al_tokens_present(&tk, 256, &n_text, &e));
    al_tokens_free(&tk);
    CHECKF(n_text > 20 && n_text < 40, "%d distinct bytes", n_text);
    CHECK(t_sh("%s train --data %s --out %s --steps 20 --db %s --probe-tokens seen " SMALL
               " 2>/dev/null",
               t_bin(), train, dir, db) == 0);
    CHECK_SQL(db, "SELECT json_extract(config_json, '$.probe_tokens') FROM runs", "seen");
    CHECK(t_sh("%s scores --model %s --db %s --probe-tokens seen --probe-r 15 --probe-n 16 "
               "--probe-seed 20240520 > %s 2>&1",
               t_bin(), dir, db, t_path("out.txt")) == 0);
    char *out = t_slurp(t_path("out.txt")), want[128];
    snprintf(want, sizeof want,
             "probe made of the %d token ids that occur in the model's "
             "training data",
             n_text);
    CHECKF(out && strstr(out, want), "wanted \"%s\" in:\n%s", want, out ? out : "");
    free(out);
    /* the same probe (R 15 fits n_ctx 32; N and seed are train's): the
     * final training evaluation and scores agree head for head, and differ
     * from the probe over all 256 ids */
    CHECK_SQL(db,
              "SELECT count(*) FROM train_head_scores t JOIN head_scores s ON s.run_id = 2 "
              "AND s.layer = t.layer AND s.head = t.head AND s.metric = t.metric WHERE "
              "t.run_id = 1 AND t.step = 20 AND abs(t.value - s.value) < 1e-6",
              "32");
    CHECK(t_sh("%s scores --model %s --db %s --probe-r 15 --probe-n 16 --probe-seed 20240520 "
               "> /dev/null 2>&1",
               t_bin(), dir, db) == 0);
    CHECK_SQL(db,
              "SELECT count(*) > 0 FROM head_scores a JOIN head_scores b ON b.run_id = 3 AND "
              "b.layer = a.layer AND b.head = a.head AND b.metric = a.metric WHERE "
              "a.run_id = 2 AND abs(a.value - b.value) > 1e-6",
              "1");
    /* a token file names the ids directly; without state.json "seen" is
     * refused before any run is filed */
    CHECK(t_sh("%s scores --model %s --db %s --probe-tokens %s --probe-r 10 --probe-n 8 > %s 2>&1",
               t_bin(), dir, db, t_path("few.bin"), t_path("out.txt")) == 0);
    out = t_slurp(t_path("out.txt"));
    CHECK(out && strstr(out, "probe made of the 3 token ids that occur in"));
    free(out);
    CHECK(t_sh("rm -f %s/state.json", dir) == 0);
    /* (R 10: the default R 50 does not fit n_ctx 32 and would be refused first) */
    CHECK(t_sh("%s scores --model %s --db %s --probe-tokens seen --probe-r 10 2> %s", t_bin(), dir,
               db, t_path("err.txt")) == 1);
    out = t_slurp(t_path("err.txt"));
    CHECKF(out && strstr(out, "no state.json") && !strchr(strchr(out, '\n') + 1, '\n'), "%s",
           out ? out : "");
    free(out);
    CHECK(t_sh("%s scores --model %s --db %s --probe-tokens %s --probe-r 10 2>/dev/null", t_bin(),
               dir, db, t_path("nope.bin")) == 1);
    CHECK_SQL(db, "SELECT count(*) FROM runs", "4");
}

/* ------------------------------------------------------- the text probe */

/* A text probe's halves are windows of the text, repeated; a window
 * across a document boundary (the BOS id) is redrawn; ids past the
 * vocabulary and a text shorter than a half are refused; the recurrence
 * share counts what it says. */
TEST(scores_text_probe_windows) {
    al_err e;
    enum { NT = 400, R = 12, N = 20 };
    uint16_t text[NT];
    al_rng r;
    al_rng_seed(&r, 5);
    for (int i = 0; i < NT; i++) text[i] = (uint16_t)(1 + al_rng_below(&r, PV - 1));
    for (int i = 0; i < NT; i += 40) text[i] = 0; /* documents of 39 tokens */
    al_probe_src src = {.text = text, .n_text = NT};
    al_probe p;
    CHECK_OK(al_probe_make(&p, R, N, 7, PV, 0, &src, &e), &e);
    CHECK(p.text == 1 && p.R == R && p.N == N);
    int bad = 0, crossing = 0;
    for (int n = 0; n < N; n++) {
        const int *row = p.tokens + n * (2 * R + 1);
        bad += row[0] != 0;
        for (int i = 1; i <= R; i++) bad += row[i] != row[i + R];
        /* the half is a window: find it in the text */
        int found = 0;
        for (int s = 0; s + R <= NT && !found; s++) {
            int same = 1;
            for (int i = 0; i < R && same; i++) same = text[s + i] == row[1 + i];
            found = same;
        }
        bad += !found;
        for (int i = 1; i <= R; i++) crossing += row[i] == 0;
    }
    CHECKF(bad == 0, "%d rows are not BOS + a text window twice", bad);
    CHECKF(crossing == 0, "%d windows hold a document boundary", crossing);
    CHECK(p.recur >= 0 && p.recur < 0.2); /* random ids over 127: few recurrences */
    al_probe_free(&p);
    /* the same seed: the same windows; another seed: others */
    al_probe q, q2;
    CHECK_OK(al_probe_make(&q, R, N, 7, PV, 0, &src, &e), &e);
    CHECK_OK(al_probe_make(&q2, R, N, 8, PV, 0, &src, &e), &e);
    CHECK_OK(al_probe_make(&p, R, N, 7, PV, 0, &src, &e), &e);
    CHECK(!memcmp(p.tokens, q.tokens, sizeof(int) * N * (2 * R + 1)));
    CHECK(memcmp(p.tokens, q2.tokens, sizeof(int) * N * (2 * R + 1)) != 0);
    al_probe_free(&p), al_probe_free(&q), al_probe_free(&q2);
    /* recurrences: a text of one repeated pattern "1 2 3 1 2 3 ..." */
    uint16_t cyc[60];
    for (int i = 0; i < 60; i++) cyc[i] = (uint16_t)(1 + i % 3);
    src = (al_probe_src){.text = cyc, .n_text = 60};
    CHECK_OK(al_probe_make(&p, 6, 4, 1, PV, 0, &src, &e), &e);
    CHECK_NEAR(p.recur, 1.0, 1e-12); /* every token of a half of 6 occurs twice in it */
    al_probe_free(&p);
    /* refusals */
    src.n_text = 6;
    CHECK(al_probe_make(&p, 6, 4, 1, PV, 0, &src, &e) == -1 && strstr(e.msg, "at least 7"));
    cyc[3] = PV;
    src.n_text = 60;
    CHECK(al_probe_make(&p, 6, 4, 1, PV, 0, &src, &e) == -1 && strstr(e.msg, "another tokenizer"));
}

/* On the planted circuit the text probe finds the induction head as the
 * random probe does: a text of random ids gives the same scores' shape
 * (1.0 near 1, the rest near 0 on induction). */
TEST(scores_text_probe_planted) {
    al_model m;
    planted_model(&m);
    al_err e;
    enum { NT = 3000 };
    uint16_t *text = malloc(sizeof(uint16_t) * NT);
    al_rng r;
    al_rng_seed(&r, 11);
    for (int i = 0; i < NT; i++) text[i] = (uint16_t)(1 + al_rng_below(&r, PV - 1));
    al_probe_src src = {.text = text, .n_text = NT};
    al_probe p;
    CHECK_OK(al_probe_make(&p, 12, 16, 3, PV, 0, &src, &e), &e);
    al_probe_scores s;
    CHECK_OK(al_probe_run(&m, &p, 8, &s, &e), &e);
    /* recurrences inside a half split 1.0's attention; few at 12 of 127 ids */
    CHECKF(s.induction[PH + 0] > 0.9 - p.recur, "1.0 induction %.3f (recur %.3f)",
           s.induction[PH + 0], p.recur);
    for (int i = 0; i < 2 * PH; i++)
        if (i != PH) CHECKF(s.induction[i] < 0.1, "head %d induction %.3f", i, s.induction[i]);
    CHECK(s.prev_token[0] > 0.99);
    al_probe_scores_free(&s);
    al_probe_free(&p);
    free(text);
    al_model_free(&m);
}

/* The CLI: --probe-tokens text:FILE and text (the model's validation
 * file from state.json); the induction pair task from text: the clean
 * halves are the probe's windows and the corrupted first half another
 * window; bad values refused before any run. */
TEST(scores_text_probe_cli) {
    char dir[1024], db[1024], train[1024], val[1024];
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    snprintf(db, sizeof db, "%s", t_path("t.db"));
    snprintf(train, sizeof train, "%s", t_path("train.bin"));
    snprintf(val, sizeof val, "%s", t_path("val.bin"));
    write_tokens(train, 20000, 1);
    write_tokens(val, 3000, 2);
    CHECK(t_sh("%s train --data %s --val %s --out %s --steps 20 --db %s --probe-tokens text " SMALL
               " 2>/dev/null",
               t_bin(), train, val, dir, db) == 0);
    CHECK_SQL(db, "SELECT count(*) > 0 FROM train_head_scores WHERE metric = 'induction'", "1");
    CHECK(t_sh("%s scores --model %s --db %s --probe-tokens text --probe-r 10 --probe-n 8 --json "
               "> %s 2>/dev/null",
               t_bin(), dir, db, t_path("a.json")) == 0);
    CHECK(t_sh("%s scores --model %s --db %s --probe-tokens text:%s --probe-r 10 --probe-n 8 "
               "--json > %s 2>/dev/null",
               t_bin(), dir, db, val, t_path("b.json")) == 0);
    char *a = t_slurp(t_path("a.json")), *b = t_slurp(t_path("b.json"));
    CHECKF(a && strstr(a, "\"recurrence\"") && strstr(a, "\"uniform_all\"") &&
               strstr(a, "\"induction_heads_by\":\t\"induction_all\"") &&
               strstr(a, "\"induction_all_sum\""),
           "%s", a ? a : "");
    CHECK_SQL(db, "SELECT count(*) > 0 FROM train_head_scores WHERE metric = 'induction_all'", "1");
    /* the training curve of a text-probe run draws induction_all, and says
     * which probe (an SVG's text is its labels) */
    CHECK(t_sh("%s heatmap --model %s --db %s --what training --out %s > /dev/null 2>&1", t_bin(),
               dir, db, t_path("tr.svg")) == 0);
    char *svg = t_slurp(t_path("tr.svg"));
    CHECK(svg && strstr(svg, "induction_all score per head") &&
          strstr(svg, "measured on windows of held-out text (the text probe)"));
    free(svg);
    /* a run recorded before train --db kept induction_all: induction */
    t_sh("cp %s %s && sqlite3 %s \"DELETE FROM train_head_scores WHERE metric = 'induction_all'\"",
         db, t_path("old.db"), t_path("old.db"));
    CHECK(t_sh("%s heatmap --model %s --db %s --what training --out %s > /dev/null 2>&1", t_bin(),
               dir, t_path("old.db"), t_path("tr2.svg")) == 0);
    svg = t_slurp(t_path("tr2.svg"));
    CHECK(svg && strstr(svg, "induction score per head") &&
          strstr(svg, "measured on windows of held-out text (the text probe)"));
    free(svg);
    /* the same file by both names: the same numbers */
    const char *ha = a ? strstr(a, "\"heads\"") : NULL, *hb = b ? strstr(b, "\"heads\"") : NULL;
    const char *ea = ha ? strstr(ha, "\"probe\"") : NULL, *eb = hb ? strstr(hb, "\"probe\"") : NULL;
    CHECK(ea && eb && ea - ha == eb - hb && !memcmp(ha, hb, (size_t)(ea - ha)));
    free(a), free(b);
    CHECK(t_sh("%s scores --model %s --db %s --probe-tokens text:%s --probe-r 10 --probe-n 8 "
               "> %s 2>&1",
               t_bin(), dir, db, val, t_path("out.txt")) == 0);
    char *out = t_slurp(t_path("out.txt"));
    CHECKF(out && strstr(out, "probe made of windows of the text of") &&
               strstr(out, "text probe: at ") && strstr(out, "ind_all") &&
               strstr(out, "induction mass by layer") &&
               strstr(out, "induction heads (induction_all > 0.4):"),
           "%s", out ? out : "");
    free(out);
    /* the report names induction heads by the score the newest scores run
     * names them by: induction_all after a text probe, induction after a
     * random one */
    CHECK(t_sh("%s report --db %s --model %s --out %s > /dev/null 2>&1", t_bin(), db, dir,
               t_path("rep")) == 0);
    char *html = t_slurp(t_path("rep/index.html"));
    CHECK(html && strstr(html, "induction heads on held-out text (induction_all &gt; 0.4"));
    free(html);
    CHECK(t_sh("cp %s %s && %s scores --model %s --db %s --probe-r 10 --probe-n 8 > /dev/null "
               "2>&1 && %s report --db %s --model %s --out %s > /dev/null 2>&1",
               db, t_path("r2.db"), t_bin(), dir, t_path("r2.db"), t_bin(), t_path("r2.db"), dir,
               t_path("rep2")) == 0);
    html = t_slurp(t_path("rep2/index.html"));
    CHECK(html && strstr(html, "induction heads (induction &gt; 0.4)") &&
          !strstr(html, "induction heads on held-out text"));
    free(html);
    /* patch's induction task from text: one run, its task stored */
    CHECK(t_sh("%s patch --model %s --db %s --probe-tokens text --probe-r 6 --n 4 > %s 2>&1",
               t_bin(), dir, db, t_path("out.txt")) == 0);
    out = t_slurp(t_path("out.txt"));
    CHECKF(out && strstr(out, "induction pairs made of windows of the text of"), "%s",
           out ? out : "");
    free(out);
    int runs_before = 5; /* train, three scores, patch */
    CHECK_SQL(db, "SELECT count(*) FROM runs", "5");
    /* refusals: an empty text: form, text without a validation file named */
    CHECK(t_sh("%s scores --model %s --db %s --probe-tokens text: --probe-r 10 2> %s", t_bin(), dir,
               db, t_path("err.txt")) == 1);
    out = t_slurp(t_path("err.txt"));
    CHECKF(out && strstr(out, "text:FILE.bin"), "%s", out ? out : "");
    free(out);
    CHECK(t_sh("%s train --data %s --out %s --steps 2 --db %s --probe-tokens text --force " SMALL
               " 2> %s",
               t_bin(), train, t_path("m2"), db, t_path("err.txt")) == 1);
    out = t_slurp(t_path("err.txt"));
    CHECKF(out && strstr(out, "--val FILE.bin"), "%s", out ? out : "");
    free(out);
    char q[64];
    snprintf(q, sizeof q, "%d", runs_before);
    CHECK_SQL(db, "SELECT count(*) FROM runs", q);
}

/* The induction pair task from text: clean = BOS + W + W for a window W
 * of the text, corrupted = BOS + W' + W for another window W'. */
TEST(scores_text_probe_pair_task) {
    al_model m;
    planted_model(&m);
    enum { NT = 2000 };
    uint16_t *text = malloc(sizeof(uint16_t) * NT);
    al_rng r;
    al_rng_seed(&r, 12);
    for (int i = 0; i < NT; i++) text[i] = (uint16_t)(1 + al_rng_below(&r, PV - 1));
    al_probe_src src = {.text = text, .n_text = NT};
    al_patch_opts o = al_patch_opts_defaults();
    o.probe_r = 8, o.probe_n = 6, o.probe_src = &src;
    al_pairs t;
    al_err e;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    al_probe p;
    CHECK_OK(al_probe_make(&p, 8, 6, o.probe_seed, PV, 0, &src, &e), &e);
    CHECK(!memcmp(t.clean, p.tokens, sizeof(int) * 6 * 17));
    int differ = 0, same_second = 0;
    for (int n = 0; n < 6; n++) {
        differ += memcmp(t.corr + n * 17 + 1, t.clean + n * 17 + 1, sizeof(int) * 8) != 0;
        same_second += !memcmp(t.corr + n * 17 + 9, t.clean + n * 17 + 9, sizeof(int) * 8);
    }
    CHECK(differ == 6 && same_second == 6);
    al_probe_free(&p);
    al_pairs_free(&t);
    free(text);
    al_model_free(&m);
}

/* icl_score carries its standard error: printed, in --json, stored as
 * icl_score_se; a score within 2 standard errors of 0 gets a warning
 * (printed, stored in run_warnings), one beyond does not. */
TEST(scores_icl_score_se_warning) {
    char dir[1024], db[1024], val[1024];
    small_model(dir, db, val, sizeof dir);
    for (int k = 0; k < 2; k++) {
        CHECK(t_sh("%s scores --model %s --db %s --data %s --probe-r 10 --probe-n 8 --batches %d "
                   "--batch 4 --json > %s 2> %s",
                   t_bin(), dir, db, val, k ? 40 : 1, t_path("s.json"), t_path("err.txt")) == 0);
        char *js = t_slurp(t_path("s.json")), *err = t_slurp(t_path("err.txt"));
        cJSON *doc = js ? cJSON_Parse(js) : NULL;
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(doc, "text");
        double sc = cJSON_GetObjectItemCaseSensitive(tx, "icl_score")->valuedouble;
        double se = cJSON_GetObjectItemCaseSensitive(tx, "icl_score_se")->valuedouble;
        CHECK(se > 0);
        int warned = err && strstr(err, "standard errors") != NULL;
        CHECKF(warned == (fabs(sc) < 2 * se), "score %+.4f se %.4f, warned %d:\n%s", sc, se, warned,
               err ? err : "");
        char q[256], want[64];
        snprintf(q, sizeof q,
                 "SELECT count(*) FROM run_warnings WHERE run_id = %d AND message "
                 "LIKE '%%standard errors%%'",
                 k + 1);
        snprintf(want, sizeof want, "%d", warned);
        CHECK_SQL(db, q, want);
        snprintf(q, sizeof q,
                 "SELECT abs(value - %.17g) < 1e-12 FROM model_scores WHERE run_id = "
                 "%d AND metric = 'icl_score_se'",
                 se, k + 1);
        CHECK_SQL(db, q, "1");
        cJSON_Delete(doc);
        free(js), free(err);
    }
}
