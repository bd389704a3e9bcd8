/* test_analysis.c -- the analyses as functions (analyses.h) and their
 * store writers (store_analysis.h), called directly, without the binary:
 * on the hand-built induction circuit of planted.h, whose answers are
 * known (0.0 is the previous-token head, 1.0 the induction head; 0.1 and
 * 1.1 write nothing). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/analyses.h"
#include "attnlab/behave.h"
#include "attnlab/circuits.h"
#include "attnlab/store_analysis.h"
#include "attnlab/thresholds.h"
#include "planted.h"
#include "test.h"

enum { LH = 2 * PH, AR = 10, AT = 2 * AR + 1 };

/* A token stream of the planted vocabulary: BOS + 10 random tokens twice,
 * over and over, so windows hold copy positions the circuit predicts. */
static void planted_tokens(al_tokens *d, size_t n) {
    d->tok = malloc(n * sizeof *d->tok);
    d->n = n;
    d->max_id = 0;
    al_rng r;
    al_rng_seed(&r, 9);
    size_t k = 0;
    while (k < n) {
        int span[AR];
        for (int i = 0; i < AR; i++) span[i] = 1 + (int)al_rng_below(&r, PV - 1);
        d->tok[k++] = 0;
        for (int rep = 0; rep < 2; rep++)
            for (int i = 0; i < AR && k < n; i++) d->tok[k++] = (uint16_t)span[i];
    }
    for (size_t i = 0; i < n; i++)
        if (d->tok[i] > d->max_id) d->max_id = d->tok[i];
}

static al_scores_opts small_scores(void) {
    al_scores_opts o = al_scores_opts_defaults();
    o.probe_r = AR, o.probe_n = 32, o.batches = 2, o.batch = 4;
    return o;
}

static al_ablate_opts small_ablate(void) {
    al_ablate_opts o = al_ablate_opts_defaults();
    o.probe_r = AR, o.probe_n = 32, o.batches = 2, o.batch = 4;
    return o;
}

/* The defaults of each opts struct are the command's flag defaults: the
 * documented numbers, and what the command's own table holds before any
 * parsing (al_analysis_flags binds that table to a fresh struct). */
TEST(analysis_opts_defaults_match_cli) {
    al_scores_opts s = al_scores_opts_defaults();
    /* probe_r 0: min(50, (n_ctx - 1)/2), 50 at n_ctx >= 101 */
    CHECK(s.probe_r == 0 && al_probe_r_default(s.probe_r, 256) == 50 &&
          al_probe_r_default(s.probe_r, 32) == 15 && s.probe_n == 64 && s.probe_seed == 1 &&
          s.batches == 4 && s.batch == 8 && s.progress == 0);
    al_ablate_opts a = al_ablate_opts_defaults();
    CHECK(!a.heads && !a.each && !a.pairs && strcmp(a.method, "zero") == 0 && a.batches == 4 &&
          a.batch == 8 && a.probe_r == 0 && a.probe_n == 64 && a.probe_seed == 1);
    al_prune_opts p = al_prune_opts_defaults();
    CHECK(!p.method && p.budget == 0.1 && p.seed == 1 && p.batches == 8 && p.batch == 8);
    for (const al_analysis *const *cs = al_analyses; *cs; cs++) {
        const al_analysis *c = *cs;
        CHECK(al_analysis_of(c->name) == c);
        void *args = calloc(1, c->size);
        al_flag fl[40];
        al_err e;
        c->init(args);
        CHECK_OK(al_analysis_flags(c, args, fl, 40, &e), &e);
        int i = 0;
        for (const al_flag *f = c->cmd->flags; f->name; f++, i++) {
            const void *x = f->dst, *y = fl[i].dst;
            int same = 0;
            switch (f->type) {
            case AL_STR: {
                const char *u = *(const char *const *)x, *v = *(const char *const *)y;
                same = u == v || (u && v && strcmp(u, v) == 0);
                break;
            }
            case AL_INT:
            case AL_BOOL: same = *(const int *)x == *(const int *)y; break;
            case AL_FLOAT: same = *(const double *)x == *(const double *)y; break;
            case AL_U64: same = *(const uint64_t *)x == *(const uint64_t *)y; break;
            }
            CHECKF(same && !fl[i].seen, "%s --%s: default differs", c->name, f->name);
        }
        CHECK(fl[i].name == NULL);
        free(args);
    }
}

TEST(analysis_scores_planted) {
    al_model m;
    al_tokens d;
    al_err e;
    planted_model(&m);
    planted_tokens(&d, 3000);
    al_scores_opts o = small_scores();
    al_scores_result r;
    CHECK_OK(al_scores_run(&m, &d, AT, 0, NULL, &o, &r, &e), &e);
    CHECK(r.L == 2 && r.H == PH && r.n_off == 0 && r.have_text && r.T == AT);
    for (int i = 0; i < LH; i++) {
        /* the named heads, with the thresholds the command names them by */
        CHECKF((r.probe.induction[i] > AL_TH_INDUCTION) == (i == PH), "induction %d.%d = %g",
               i / PH, i % PH, r.probe.induction[i]);
        CHECKF((r.probe.prev_token[i] > AL_TH_PREV_TOKEN) == (i == 0), "prev_token %d.%d = %g",
               i / PH, i % PH, r.probe.prev_token[i]);
    }
    CHECK(r.probe.icl_gain > 3);
    /* heads writing nothing: mean-ablating them changes nothing */
    CHECK_NEAR(r.copying[1], 0, 1e-9);
    CHECK_NEAR(r.copying[PH + 1], 0, 1e-9);
    /* the induction head carries the copying */
    CHECKF(r.copying[PH] > 1, "copying_ablation of 1.0 = %g", r.copying[PH]);
    CHECK(isfinite(r.icl_score) && r.copy_fraction > 0 && r.copy_fraction < 1);
    /* the same numbers as the pieces called by hand (seed, batch 16) */
    al_probe p;
    al_probe_scores ps;
    CHECK_OK(al_probe_make(&p, AR, 32, 1, PV, 0, NULL, &e), &e);
    CHECK_OK(al_probe_run(&m, &p, 16, &ps, &e), &e);
    CHECK(memcmp(ps.induction, r.probe.induction, sizeof(double) * 3 * LH) == 0);
    CHECK(ps.icl_gain == r.probe.icl_gain);
    al_probe_scores_free(&ps);
    al_probe_free(&p);
    /* without tokens: probe only, the text numbers NaN */
    al_scores_result r2;
    CHECK_OK(al_scores_run(&m, NULL, 0, 0, NULL, &o, &r2, &e), &e);
    CHECK(!r2.have_text && !r2.copying && isnan(r2.icl_score) && isnan(r2.val_loss));
    CHECK(r2.probe.induction[PH] == r.probe.induction[PH]);
    al_scores_result_free(&r2);
    /* a mask: its heads are counted and get no copying score */
    unsigned char off[LH] = {0};
    off[2] = 1;
    al_mask_apply(&m, off);
    CHECK_OK(al_scores_run(&m, &d, AT, 0, off, &o, &r2, &e), &e);
    CHECK(r2.n_off == 1 && r2.off[2] && isnan(r2.copying[2]) && isfinite(r2.copying[PH]));
    al_scores_result_free(&r2);
    al_scores_result_free(&r);
    al_tokens_free(&d);
    al_model_free(&m);
}

TEST(analysis_ablate_planted_pairs) {
    al_model m;
    al_tokens d;
    al_err e;
    planted_model(&m);
    planted_tokens(&d, 3000);
    /* head 0.2 gated off by hand (not passed as a mask): ablating it must
     * change nothing, as gates already 0 stay 0 */
    unsigned char off[LH] = {0};
    off[2] = 1;
    al_mask_apply(&m, off);
    al_ablate_opts o = small_ablate();
    o.pairs = 1;
    al_ablate_result r;
    CHECK_OK(al_ablate_run(&m, &d, AT, 0, NULL, &o, &r, &e), &e);
    /* 6 singles, then the 3 x 3 cross-layer pairs */
    CHECK(r.n == LH + PH * PH && r.method == AL_ABL_ZERO);
    for (int k = 0; k < r.n; k++) {
        const al_ablate_config *c = &r.c[k];
        if (c->b < 0) {
            CHECK(k < LH && c->a == k && strcmp(c->kind, "single") == 0 && c->n_heads == 1);
            CHECK(isnan(c->inter_loss));
            continue;
        }
        CHECK(strcmp(c->kind, "pair") == 0 && c->n_heads == 2 && c->a < PH && c->b >= PH);
        const al_ablate_config *s1 = &r.c[c->a], *s2 = &r.c[c->b];
        CHECK(c->inter_loss == c->delta_loss - s1->delta_loss - s2->delta_loss);
        CHECK(c->inter_copy == c->delta_copy - s1->delta_copy - s2->delta_copy);
        CHECK(c->inter_probe == c->delta_probe - s1->delta_probe - s2->delta_probe);
    }
    CHECK(r.c[2].delta_loss == 0 && r.c[2].delta_probe == 0);
    CHECK(r.c[1].delta_loss == 0); /* 0.1 writes nothing */
    /* the circuit: 1.0 alone breaks the probe; 0.0 and 1.0 are in series,
     * so the pair costs less than the two alone (negative interaction) */
    CHECKF(r.c[PH].delta_probe > 1, "Δprobe of 1.0 = %g", r.c[PH].delta_probe);
    int k00_10 = LH; /* pairs in order: (0.0, 1.0) first */
    CHECK(r.c[k00_10].a == 0 && r.c[k00_10].b == PH && r.c[k00_10].inter_probe < 0);
    CHECK(r.clean_delta_probe == 0 && isfinite(r.clean_loss));
    /* intervals: a head that changes nothing is exactly 0 ± 0 */
    const al_interval *z = &r.c[2].ci[AL_ABL_CI_LOSS];
    CHECKF(z->se == 0 && z->lo == 0 && z->hi == 0, "0.2: %g [%g, %g]", z->se, z->lo, z->hi);
    CHECK(r.ci_n_text == o.batches * o.batch && r.ci_n_probe == o.probe_n);
    CHECK(isnan(r.c[0].ci[AL_ABL_CI_INTER_LOSS].se)); /* singles have no interaction */
    /* and the pair's interaction's se is the delta method's on each
     * sequence's sums, recomputed here from al_abl_run's rows */
    {
        al_abl_set s;
        int n = o.batches * o.batch, G = AL_SEL_GROUPS;
        unsigned char *sets = r.sets; /* configurations 0.0 (0), 1.0 (PH), the pair */
        unsigned char three[3 * LH];
        memcpy(three, sets, LH), memcpy(three + LH, sets + (size_t)PH * LH, LH);
        memcpy(three + 2 * LH, sets + (size_t)k00_10 * LH, LH);
        double rows[3 * 64 * AL_SEL_GROUPS], cnt[64];
        al_abl_out ao[3];
        CHECK(n <= 64);
        CHECK_OK(al_abl_set_text(&s, &d, AT, o.batch, 0, o.batches, o.batches, m.cfg.d_vocab, &e),
                 &e);
        CHECK_OK(al_abl_prepare(&m, &s, &e), &e);
        CHECK_OK(al_abl_run(&m, &s, AL_ABL_ZERO, three, 3, ao, rows, 0, &e), &e);
        al_abl_row_counts(&s, 0, cnt);
        double sa = 0, sd = 0, ss = 0, sr = 0;
        for (int i = 0; i < n; i++) sd += cnt[i], sr += rows[(size_t)(2 * n + i) * G];
        CHECK_NEAR(sr / sd, r.c[k00_10].delta_loss, 1e-9);
        for (int i = 0; i < n; i++)
            sa += rows[(size_t)(2 * n + i) * G] - rows[(size_t)i * G] - rows[(size_t)(n + i) * G];
        for (int i = 0; i < n; i++) {
            double ai =
                rows[(size_t)(2 * n + i) * G] - rows[(size_t)i * G] - rows[(size_t)(n + i) * G];
            ss += (ai - sa / sd * cnt[i]) * (ai - sa / sd * cnt[i]);
        }
        double se = sqrt(ss / (n - 1)) / sqrt((double)n) / (sd / n);
        const al_interval *iv = &r.c[k00_10].ci[AL_ABL_CI_INTER_LOSS];
        CHECKF(fabs(iv->se - se) <= 1e-9 * se && se > 0, "se %.12g, by hand %.12g", iv->se, se);
        CHECKF(iv->lo < r.c[k00_10].inter_loss && r.c[k00_10].inter_loss < iv->hi,
               "interaction %g outside [%g, %g]", r.c[k00_10].inter_loss, iv->lo, iv->hi);
        al_abl_set_free(&s);
    }
    al_ablate_result_free(&r);
    /* a set */
    o = small_ablate();
    o.heads = "0.0,1.0";
    o.method = "mean";
    CHECK_OK(al_ablate_run(&m, &d, AT, 0, NULL, &o, &r, &e), &e);
    CHECK(r.n == 1 && r.c[0].a == -1 && strcmp(r.c[0].kind, "set") == 0 && r.c[0].n_heads == 2 &&
          r.method == AL_ABL_MEAN);
    al_ablate_result_free(&r);
    al_tokens_free(&d);
    al_model_free(&m);
}

TEST(analysis_prune_negative_budget_removes_all) {
    al_model m;
    al_tokens d;
    al_err e;
    planted_model(&m);
    planted_tokens(&d, 3000);
    const char *methods[] = {"ablation", "gradient", "random"};
    for (int k = 0; k < 3; k++) {
        al_prune_opts o = al_prune_opts_defaults();
        o.method = methods[k], o.budget = -1, o.batches = 2, o.batch = 4;
        al_prune_run_result r;
        CHECK_OK(al_prune_run(&m, &d, AT, &o, &r, &e), &e);
        CHECK(r.method == (al_prune_method)k && r.est_batches == 1 && r.eval_batches == 1);
        CHECK(r.p.n_steps == LH + 1 && r.last == LH && !r.p.stopped_by_budget);
        CHECK(r.p.steps[r.last].heads_left == 0);
        for (int i = 0; i < LH; i++) CHECK(r.p.off[i] == 1);
        al_prune_run_result_free(&r);
    }
    al_tokens_free(&d);
    al_model_free(&m);
}

/* Bad options fail before anything is computed, failures after
 * allocation free everything (make test SAN=1 checks for leaks), and the
 * result is left empty either way. */
TEST(analysis_invalid_opts) {
    al_model m;
    al_tokens d;
    al_err e;
    planted_model(&m);
    planted_tokens(&d, 3000);
    al_scores_opts so = small_scores();
    al_scores_result sr;
    so.batches = 0;
    CHECK(al_scores_run(&m, &d, AT, 0, NULL, &so, &sr, &e) == -1 && strstr(e.msg, "--batches"));
    CHECK(!sr.off && !sr.copying && !sr.probe.induction && sr.L == 0 && sr.H == 0); /* zeroed */
    CHECK(al_scores_opts_check(&so, &e) == -1);
    so = small_scores();
    so.probe_r = 20; /* 41 tokens > n_ctx 32: fails in the probe run */
    CHECK(al_scores_run(&m, &d, AT, 0, NULL, &so, &sr, &e) == -1 && strstr(e.msg, "n_ctx"));
    CHECK(!sr.off && !sr.copying && !sr.probe.induction && sr.L == 0 && sr.H == 0); /* zeroed */
    al_scores_result_free(&sr); /* harmless on an empty result */

    al_ablate_opts ao = small_ablate();
    al_ablate_result ar;
    ao.method = "magic";
    CHECK(al_ablate_run(&m, &d, AT, 0, NULL, &ao, &ar, &e) == -1 && strstr(e.msg, "magic"));
    CHECK(!ar.c && !ar.sets && ar.n == 0);
    ao = small_ablate();
    ao.pairs = 1, ao.heads = "0.0";
    CHECK(al_ablate_run(&m, &d, AT, 0, NULL, &ao, &ar, &e) == -1 && strstr(e.msg, "at most one"));
    ao = small_ablate();
    ao.method = "resample", ao.batch = 1;
    CHECK(al_ablate_run(&m, &d, AT, 0, NULL, &ao, &ar, &e) == -1);
    ao = small_ablate();
    ao.heads = "0.9";
    CHECK(al_ablate_run(&m, &d, AT, 0, NULL, &ao, &ar, &e) == -1 && !ar.c && !ar.sets);
    unsigned char all[LH];
    memset(all, 1, sizeof all);
    ao = small_ablate();
    CHECK(al_ablate_run(&m, &d, AT, 0, all, &ao, &ar, &e) == -1 && strstr(e.msg, "no head left"));
    CHECK(!ar.c && !ar.sets);
    ao = small_ablate();
    ao.probe_r = 20;
    CHECK(al_ablate_run(&m, &d, AT, 0, NULL, &ao, &ar, &e) == -1 && strstr(e.msg, "n_ctx"));
    CHECK(!ar.c && !ar.sets);

    al_prune_opts po = al_prune_opts_defaults();
    al_prune_run_result pr;
    CHECK(al_prune_run(&m, &d, AT, &po, &pr, &e) == -1); /* no method */
    po.method = "magic";
    CHECK(al_prune_run(&m, &d, AT, &po, &pr, &e) == -1 && strstr(e.msg, "magic"));
    po.method = "random", po.batches = 1;
    CHECK(al_prune_run(&m, &d, AT, &po, &pr, &e) == -1 && strstr(e.msg, "--batches"));
    CHECK(!pr.p.steps && !pr.p.off);
    al_tokens_free(&d);
    al_model_free(&m);
}

static long count(const char *db, const char *sql) {
    char *s = t_sql(db, sql);
    long v = s ? strtol(s, NULL, 10) : -1;
    free(s);
    return v;
}

/* Each writer puts the rows its command always wrote, in one run. */
TEST(analysis_store_rows) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    al_model m;
    al_tokens d;
    al_err e;
    planted_model(&m);
    planted_tokens(&d, 3000);
    char db[600];
    snprintf(db, sizeof db, "%s", t_path("a.db"));
    al_store *st;
    int64_t mid, run[5];
    al_model_facts facts = {NAN, -1, NAN, NAN, NAN};
    CHECK_OK(al_store_open(db, &st, &e), &e);
    CHECK_OK(al_store_model(st, t_tmpdir(),
                            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", &m,
                            &facts, &mid, &e),
             &e);

    al_scores_opts so = small_scores();
    al_scores_result sr;
    CHECK_OK(al_scores_run(&m, &d, AT, 0, NULL, &so, &sr, &e), &e);
    CHECK_OK(al_store_run_begin(st, "scores", "{}", mid, &run[0], &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    CHECK_OK(al_store_put_scores(st, run[0], mid, &sr, &e), &e);
    CHECK_OK(al_store_run_finish(st, run[0], &e), &e);
    al_scores_result_free(&sr);

    al_ablate_opts ao = small_ablate();
    ao.pairs = 1;
    al_ablate_result ar;
    CHECK_OK(al_ablate_run(&m, &d, AT, 0, NULL, &ao, &ar, &e), &e);
    CHECK_OK(al_store_run_begin(st, "ablate", "{}", mid, &run[1], &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    CHECK_OK(al_store_put_ablate(st, run[1], mid, &ar, &e), &e);
    CHECK_OK(al_store_run_finish(st, run[1], &e), &e);
    double inter = ar.c[LH].inter_loss;

    al_prune_opts po = al_prune_opts_defaults();
    po.method = "gradient", po.budget = -1, po.batches = 2, po.batch = 4;
    al_prune_run_result pr;
    CHECK_OK(al_prune_run(&m, &d, AT, &po, &pr, &e), &e);
    CHECK_OK(al_store_run_begin(st, "prune", "{}", mid, &run[2], &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    CHECK_OK(al_store_put_prune(st, run[2], mid, &pr, &e), &e);
    CHECK_OK(al_store_run_finish(st, run[2], &e), &e);
    al_prune_run_result_free(&pr);

    al_circ_opts co = al_circ_opts_default();
    co.top_k = 5, co.mc_samples = 10;
    al_circ_result cr;
    CHECK_OK(al_circ_analyse(&m, &co, &cr, &e), &e);
    CHECK_OK(al_store_run_begin(st, "circuits", "{}", mid, &run[3], &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    CHECK_OK(al_store_put_circuits(st, run[3], mid, &cr, NULL, &e), &e);
    CHECK_OK(al_store_run_finish(st, run[3], &e), &e);
    int n_tri = 0;
    for (int i = 0; i < LH; i++) n_tri += cr.heads[i].n_tri;
    int n_comp = cr.n_comp;
    al_circ_result_free(&cr);
    al_store_close(st);

    char q[300];
#define Q(...) (snprintf(q, sizeof q, __VA_ARGS__), count(db, q))
    /* scores: 4 probe + 2 copying scores per head; 2 layer sums per layer; 3 probe + 7
     * text (icl_score_se among them) + heads_off */
    CHECK(Q("SELECT count(*) FROM head_scores WHERE run_id = %lld", (long long)run[0]) == 6 * LH);
    CHECK(Q("SELECT count(*) FROM layer_scores WHERE run_id = %lld", (long long)run[0]) == 2 * 2);
    CHECK(Q("SELECT count(*) FROM model_scores WHERE run_id = %lld", (long long)run[0]) == 11);
    CHECK(Q("SELECT count(*) FROM head_scores WHERE run_id = %lld AND metric = 'induction' "
            "AND layer = 1 AND head = 0 AND value > 0.9",
            (long long)run[0]) == 1);
    /* ablate: the clean row, 6 singles, 9 pairs; the interaction column */
    CHECK(Q("SELECT count(*) FROM ablations WHERE run_id = %lld", (long long)run[1]) == 1 + LH + 9);
    CHECK(Q("SELECT count(*) FROM ablations WHERE run_id = %lld AND kind = 'none'",
            (long long)run[1]) == 1);
    CHECK(
        Q("SELECT count(*) FROM ablations WHERE run_id = %lld AND kind = 'pair' AND heads = '0.0,1.0' "
          "AND abs(interaction - (%.17g)) < 1e-12",
          (long long)run[1], inter) == 1);
    /* prune: step 0 + one per head; gradient importance per head */
    CHECK(Q("SELECT count(*) FROM pruning_steps WHERE run_id = %lld", (long long)run[2]) == LH + 1);
    CHECK(
        Q("SELECT count(*) FROM head_scores WHERE run_id = %lld AND metric = 'gradient_importance'",
          (long long)run[2]) == LH);
    /* circuits: 12 scores per head, D singular values of QK and OV and
     * eigenvalues, the trigrams, 3 overlaps of H x H and 6 scores per
     * layer, 3 composition kinds per pair */
    CHECK(Q("SELECT count(*) FROM head_scores WHERE run_id = %lld", (long long)run[3]) == 12 * LH);
    CHECK(Q("SELECT count(*) FROM singular_values WHERE run_id = %lld", (long long)run[3]) ==
          2 * PD * LH);
    CHECK(Q("SELECT count(*) FROM eigenvalues WHERE run_id = %lld", (long long)run[3]) == PD * LH);
    CHECK(Q("SELECT count(*) FROM skip_trigrams WHERE run_id = %lld", (long long)run[3]) == n_tri);
    CHECK(Q("SELECT count(*) FROM head_overlap WHERE run_id = %lld", (long long)run[3]) ==
          3 * PH * PH * 2);
    CHECK(Q("SELECT count(*) FROM layer_scores WHERE run_id = %lld", (long long)run[3]) == 6 * 2);
    CHECK(Q("SELECT count(*) FROM composition WHERE run_id = %lld", (long long)run[3]) ==
          3 * n_comp);
    CHECK(Q("SELECT count(*) FROM runs WHERE status = 'done'") == 4);
#undef Q
    al_ablate_result_free(&ar);
    al_tokens_free(&d);
    al_model_free(&m);
}
