/* test_gap.c -- the gap check (gap.h): the rule's edge cases on made-up
 * numbers; the analyses that fill their results' warnings (patch, paths,
 * attribute, discover) on a random model, whose clean and corrupted runs
 * barely differ (a warning), and on the planted induction circuit of
 * planted.h (none); the induction task drawn from a mask of ids; and the
 * store's run_warnings (writer, reader, discard, db merge). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attribute.h"
#include "attnlab/checkpoint.h"
#include "attnlab/discover.h"
#include "attnlab/gap.h"
#include "attnlab/merge.h"
#include "attnlab/patch.h"
#include "attnlab/scores.h"
#include "attnlab/store.h"
#include "planted.h"
#include "randmodel.h"
#include "test.h"

static int has(const al_warnings *w, int i, const char *want) {
    if (i >= w->n || !strstr(w->msg[i], want)) {
        fprintf(stderr, "    warning %d of %d: [%s], want [%s]\n", i, w->n,
                i < w->n ? w->msg[i] : "(none)", want);
        return 0;
    }
    return 1;
}

static void show(const char *what, const al_warnings *w) {
    for (int i = 0; i < w->n; i++) fprintf(stderr, "    %s: %s\n", what, w->msg[i]);
}

/* ------------------------------------------------------------ the rule */

TEST(gap_rule_edge_cases) {
    /* a clear gap: 1.0 against 0.0 with a spread of 0.1 */
    double c[4] = {1.0, 1.1, 0.9, 1.05}, r[4] = {0.0, 0.1, -0.1, 0.05};
    al_warnings w = {0};
    al_gap_check(&w, "log-prob", c, r, 4);
    CHECK(w.n == 0);
    /* the wrong sign: clean scores worse (the issue's −10.4396 / −10.4158) */
    double c2[4] = {-10.44, -10.43, -10.45, -10.44}, r2[4] = {-10.41, -10.42, -10.42, -10.41};
    al_gap_check(&w, "log-prob", c2, r2, 4);
    CHECK(w.n == 1 && has(&w, 0, "scores worse") && has(&w, 0, "M_clean = -10.4400") &&
          has(&w, 0, "M_corr = -10.4150") && has(&w, 0, "inverted") && has(&w, 0, "log-prob"));
    /* a positive gap within 3 SE: d = 0.1, −0.08, 0.12, −0.1 (mean 0.01, SE ≈ 0.058) */
    w.n = 0;
    double c3[4] = {0.1, -0.08, 0.12, -0.1}, z[4] = {0};
    al_gap_check(&w, "logit difference", c3, z, 4);
    CHECK(w.n == 1 && has(&w, 0, "barely differ") && has(&w, 0, "gap 0.01") &&
          has(&w, 0, "SE 0.058") && has(&w, 0, "noise"));
    /* a negative gap within 3 SE: noise, not an inversion */
    w.n = 0;
    double c3n[4] = {-0.1, 0.08, -0.12, 0.1};
    al_gap_check(&w, "logit difference", c3n, z, 4);
    CHECK(w.n == 1 && has(&w, 0, "barely differ") && has(&w, 0, "the clean one lower"));
    /* just outside 3 SE is fine: d = 1 ± 0.1 → SE 0.05 (n 4), 3 SE = 0.15 < 0.2 */
    w.n = 0;
    double c4[4] = {0.3, 0.1, 0.3, 0.1};
    al_gap_check(&w, "log-prob", c4, z, 4);
    CHECK(w.n == 0);
    double c5[4] = {0.3, -0.1, 0.3, -0.1}; /* mean 0.1, SE 0.115: within */
    al_gap_check(&w, "log-prob", c5, z, 4);
    CHECK(w.n == 1);
    /* one pair: no spread; only the sign counts */
    w.n = 0;
    double one = 0.001, zero = 0.0, neg = -0.5;
    al_gap_check(&w, "log-prob", &one, &zero, 1);
    CHECK(w.n == 0);
    al_gap_check(&w, "log-prob", &neg, &zero, 1);
    CHECK(w.n == 1 && has(&w, 0, "scores worse") && has(&w, 0, "1 pair)"));
    al_gap_check(&w, "log-prob", &zero, &zero, 1);
    CHECK(w.n == 2 && has(&w, 1, "barely differ"));
    /* every pair the same gap: SE 0, fine */
    w.n = 0;
    double same[3] = {0.2, 0.2, 0.2};
    al_gap_check(&w, "log-prob", same, z, 3);
    CHECK(w.n == 0);
    /* KL: the corrupted run's KL from clean is the gap (clean NULL = 0) */
    double kl[3] = {0.5, 0.6, 0.4}, kl0[3] = {1e-9, -1e-9, 2e-9};
    al_gap_check(&w, "kl", NULL, kl, 3);
    CHECK(w.n == 0);
    al_gap_check(&w, "kl", NULL, kl0, 3);
    CHECK(w.n == 1 && has(&w, 0, "kl: the corrupted run barely changes") &&
          has(&w, 0, "KL(clean || corrupted) = "));
    /* not finite, and no pairs */
    w.n = 0;
    double inf[2] = {-INFINITY, 0.0};
    al_gap_check(&w, "log-prob", inf, z, 2);
    CHECK(w.n == 1 && has(&w, 0, "not finite"));
    al_gap_check(&w, "log-prob", NULL, NULL, 0);
    CHECK(w.n == 1);
}

TEST(gap_warnings_bounded) {
    al_warnings w = {0};
    for (int i = 0; i < 12; i++) al_warnings_add(&w, "w%d", i);
    CHECK(w.n == AL_WARN_MAX && !strcmp(w.msg[0], "w0") && !strcmp(w.msg[7], "w7"));
    al_warnings v = {0};
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    al_warnings_add(&v, "%s", big);
    CHECK(v.n == 1 && strlen(v.msg[0]) == AL_WARN_LEN - 1);
}

TEST(gap_effect_range) {
    al_warnings w = {0};
    double ok[4] = {-0.1, 0.0, 1.1, NAN};
    al_effect_check(&w, "normalised effect (head, denoise)", ok, 4);
    CHECK(w.n == 0);
    double bad[5] = {0.5, 1.3, -0.5, NAN, 1.2};
    al_effect_check(&w, "normalised effect (head, denoise)", bad, 5);
    CHECK(w.n == 1 && has(&w, 0, "normalised effect (head, denoise): 3 of 4 values") &&
          has(&w, 0, "farthest -0.5000"));
    double f = 1.3334;
    al_effect_check(&w, "faithfulness", &f, 1);
    CHECK(w.n == 2 && has(&w, 1, "faithfulness 1.3334 lies outside [-0.1, 1.1]"));
}

/* Per-item values into per-pair ones: the pairs' mean is the items' mean
 * even when pairs hold different numbers of items. */
TEST(gap_items_to_pairs) {
    al_pairs t;
    memset(&t, 0, sizeof t);
    al_pair_item it[5] = {{0, 1, 1, -1},
                          {0, 2, 1, -1},
                          {0, 3, 1, -1},
                          {1, 1, 1, -1},
                          {2, 1, 1, -1}};
    t.N = 3, t.n_items = 5, t.items = it;
    /* items of pair 0: clean 1, corr 0 (gap 1); pairs 1, 2: gap 1 too */
    double vc[5] = {1, 1, 1, 1, 1}, vr[5] = {0, 0, 0, 0, 0};
    al_warnings w = {0};
    al_err e;
    CHECK_OK(al_gap_check_items(&w, &t, "log-prob", vc, vr, &e), &e);
    /* the same gap at every item: no spread, whatever the counts */
    CHECK(w.n == 0);
    /* pair 0 wrong-signed by much, the others slightly right: mean gap < 0 */
    double vc2[5] = {0, 0, 0, 1, 1}, vr2[5] = {1, 1, 1, 0.9, 0.9};
    CHECK_OK(al_gap_check_items(&w, &t, "log-prob", vc2, vr2, &e), &e);
    CHECK(w.n == 1 && has(&w, 0, "M_clean = 0.4000") && has(&w, 0, "M_corr = 0.9600") &&
          has(&w, 0, "3 pairs"));
}

/* ----------------------------------------------------------- analyses */

static al_patch_opts small(const char *comp) {
    al_patch_opts o = al_patch_opts_defaults();
    o.component = comp, o.probe_r = 6, o.probe_n = 12, o.batch = 5;
    return o;
}

/* A random model (rand_model, untied: no systematic copying) scores the
 * clean and corrupted second halves alike: patch and paths warn, with
 * the numbers of their own M_clean and M_corr. */
TEST(gap_random_model_warns) {
    al_model m;
    rand_model(&m, 2, 0, 40);
    al_patch_opts o = small("head");
    al_pairs t;
    al_err e;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    al_patch_result r;
    CHECK_OK(al_patch_run(&m, &t, &o, &r, &e), &e);
    show("patch", &r.warn);
    CHECK(r.warn.n >= 1 && has(&r.warn, 0, "log-prob: the clean"));
    char want[64];
    snprintf(want, sizeof want, "M_clean = %.4f", r.m_clean);
    CHECK(has(&r.warn, 0, want));
    al_patch_result_free(&r);
    CHECK(r.warn.n == 0);
    al_paths_result p;
    CHECK_OK(al_paths_run(&m, &t, &o, &p, &e), &e);
    show("paths", &p.warn);
    CHECK(p.warn.n >= 1 && has(&p.warn, 0, "log-prob: the clean"));
    al_paths_result_free(&p);
    /* attribution on the pair task: the same check; on clean-only text none */
    al_attr_opts ao = al_attr_opts_defaults();
    ao.batch = 5;
    al_attr_result ar;
    CHECK_OK(al_attribute_run(&m, &t, &ao, &ar, &e), &e);
    show("attribute", &ar.warn);
    CHECK(ar.warn.n == 1 && has(&ar.warn, 0, "log-prob: the clean"));
    al_attr_result_free(&ar);
    /* discovery: the task's metric and the KL both barely move */
    al_discover_opts d = al_discover_opts_defaults();
    d.batch = 5;
    al_discover_result dr;
    CHECK_OK(al_discover_run(&m, &t, &d, &dr, &e), &e);
    show("discover", &dr.warn);
    CHECK(dr.warn.n >= 1 && has(&dr.warn, 0, "log-prob: the clean"));
    al_discover_result_free(&dr);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* A failed run's result is zeroed, warnings included. */
TEST(gap_failure_zeroes_warnings) {
    al_model m;
    rand_model(&m, 2, 0, 40);
    al_patch_opts o = small("head");
    al_pairs t;
    al_err e;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    al_patch_result r;
    memset(&r, 0x5a, sizeof r);
    CHECK(al_patch_run(&m, &t, &o, &r, &e) == -1 && t_all_zero(&r, sizeof r));
    al_pairs_free(&t);
    al_model_free(&m);
}

/* The planted circuit restores or breaks the metric by several nats: no
 * gap warning anywhere. Noising, every head's effect lies in [−0.1, 1.1];
 * denoising, head 0.0 alone overshoots, truly: its clean PREV makes 1.0
 * attend where the clean A sat, and copy the corrupted A' found there,
 * scoring below M_corr (effect about −1.6), which the range check names. */
TEST(gap_planted_model_clean) {
    al_model m;
    planted_model(&m);
    al_patch_opts o = small("head");
    o.probe_r = 10, o.probe_n = 16;
    al_pairs t;
    al_err e;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    const char *dirs[2] = {"denoise", "noise"};
    for (int d = 0; d < 2; d++) {
        o.direction = dirs[d];
        al_patch_result r;
        CHECK_OK(al_patch_run(&m, &t, &o, &r, &e), &e);
        show("patch", &r.warn);
        CHECK(r.m_clean > r.m_corr + 1.0);
        if (d == 0)
            CHECK(r.warn.n == 1 && r.effect[0] < -1.0 &&
                  has(&r.warn, 0, "normalised effect (head, denoise): 1 of 6 values"));
        else
            CHECKF(r.warn.n == 0, "%s: %d warnings", dirs[d], r.warn.n);
        al_patch_result_free(&r);
    }
    al_attr_opts ao = al_attr_opts_defaults();
    al_attr_result ar;
    CHECK_OK(al_attribute_run(&m, &t, &ao, &ar, &e), &e);
    show("attribute", &ar.warn);
    CHECK(ar.warn.n == 0);
    al_attr_result_free(&ar);
    al_discover_opts dop = al_discover_opts_defaults();
    al_discover_result dr;
    CHECK_OK(al_discover_run(&m, &t, &dop, &dr, &e), &e);
    show("discover", &dr.warn);
    CHECK(dr.warn.n == 0 && fabs(dr.faithfulness - 1.0) < 1e-3);
    al_discover_result_free(&dr);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* ------------------------------------------------------- the id mask */

#define CORRUPT_SEED_XOR 0x636f727275707431ULL /* patch.c's: the old stream */

/* allowed: every clean and corrupted token but BOS is a flagged id, and
 * the clean half is al_probe_make's with the same mask; NULL: the pairs
 * of earlier versions, id for id (the probe, and the corruption stream
 * as it was drawn before masks existed). */
TEST(gap_masked_induction_task) {
    al_model m;
    rand_model(&m, 2, 0, 40);
    al_patch_opts o = small("head");
    o.probe_n = 30;
    unsigned char mask[40] = {0};
    int ids[5] = {3, 7, 8, 21, 39};
    for (int i = 0; i < 5; i++) mask[ids[i]] = 1;
    mask[0] = 1; /* BOS flagged too: still never drawn */
    al_probe_src src = {.allowed = mask};
    o.probe_src = &src;
    al_pairs t;
    al_err e;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    int T = t.T, bad = 0, seen[40] = {0};
    for (int n = 0; n < t.N; n++)
        for (int i = 1; i < T; i++) {
            int c = t.clean[n * T + i], x = t.corr[n * T + i];
            bad += !mask[c] || !mask[x] || c == 0 || x == 0;
            seen[x]++;
            if (i <= 6) bad += c == x; /* the corrupted half differs everywhere */
        }
    CHECKF(bad == 0, "%d tokens outside the mask", bad);
    for (int i = 0; i < 5; i++) CHECKF(seen[ids[i]] > 0, "id %d never drawn", ids[i]);
    al_probe p;
    CHECK_OK(al_probe_make(&p, 6, 30, o.probe_seed, 40, 0, &src, &e), &e);
    CHECK(!memcmp(t.clean, p.tokens, sizeof(int) * 30 * T));
    al_probe_free(&p);
    al_pairs_free(&t);
    /* too few ids: refused as the probe refuses */
    unsigned char one[40] = {0};
    one[5] = 1;
    src.allowed = one;
    CHECK(al_patch_task_make(&t, &m, NULL, 0, &o, &e) == -1 && strstr(e.msg, "2 token ids"));
    /* NULL: the old pairs */
    o.probe_src = NULL;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    CHECK_OK(al_probe_make(&p, 6, 30, o.probe_seed, 40, 0, NULL, &e), &e);
    CHECK(!memcmp(t.clean, p.tokens, sizeof(int) * 30 * T));
    al_rng r;
    al_rng_seed(&r, o.probe_seed ^ CORRUPT_SEED_XOR);
    int same = 1;
    for (int n = 0; n < 30; n++) {
        const int *a = p.tokens + n * T;
        for (int i = 0; i < T; i++) {
            int want = a[i];
            if (i >= 1 && i <= 6) {
                do want = (int)al_rng_below(&r, 40);
                while (want == 0 || want == a[i]);
            }
            same &= t.corr[n * T + i] == want;
        }
    }
    CHECK(same);
    al_probe_free(&p);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* --------------------------------------------------------------- store */

static t_pbuf model_dir(const char *name, const al_model *m) {
    t_pbuf dir;
    al_err e;
    snprintf(dir.s, sizeof dir.s, "%s", t_path(name));
    char p[1100];
    snprintf(p, sizeof p, "%s/model.safetensors", dir.s);
    CHECK_OK(al_mkdir_p(dir.s, &e), &e);
    CHECK_OK(al_ckpt_write_weights(p, m, &e), &e);
    return dir;
}

/* One database with run 1 (done, two warnings), run 2 (done, none) and
 * run 3 (begun, rows and a warning, then discarded). */
static void make_db(const char *db, const char *tag, const al_model *m, const char *dir) {
    al_store *s;
    al_err e;
    int64_t mid, run;
    CHECK_OK(al_store_open(db, &s, &e), &e);
    CHECK_OK(al_store_model(s, dir, NULL, m, NULL, &mid, &e), &e);
    al_warnings w = {0};
    al_warnings_add(&w, "%s: first 'quoted' warning", tag);
    al_warnings_add(&w, "%s: second", tag);
    CHECK_OK(al_store_run_begin(s, "patch", "{}", mid, &run, &e), &e);
    CHECK_OK(al_store_tx_begin(s, &e), &e);
    CHECK_OK(al_store_put_warnings(s, run, mid, &w, &e), &e);
    CHECK_OK(al_store_run_finish(s, run, &e), &e);
    CHECK_OK(al_store_run_begin(s, "patch", "{}", mid, &run, &e), &e);
    CHECK_OK(al_store_tx_begin(s, &e), &e);
    CHECK_OK(al_store_put_warnings(s, run, mid, NULL, &e), &e);
    CHECK_OK(al_store_run_finish(s, run, &e), &e);
    al_store_close(s);
}

TEST(gap_store_warnings) {
    al_model m;
    rand_model(&m, 1, 0, 40);
    t_pbuf dir = model_dir("m", &m), db = t_pcopy("a.db");
    make_db(db.s, "a", &m, dir.s);
    CHECK_SQL(db.s,
              "SELECT group_concat(run_id || ':' || seq || ':' || message, '|') FROM "
              "(SELECT * FROM run_warnings ORDER BY warning_id)",
              "1:0:a: first 'quoted' warning|1:1:a: second");
    al_store *s;
    al_err e;
    CHECK_OK(al_store_open(db.s, &s, &e), &e);
    char **msg;
    int n;
    CHECK_OK(al_store_run_warnings(s, 1, &msg, &n, &e), &e);
    CHECK(n == 2 && !strcmp(msg[0], "a: first 'quoted' warning") && !strcmp(msg[1], "a: second"));
    al_store_strings_free(msg, n);
    CHECK_OK(al_store_run_warnings(s, 2, &msg, &n, &e), &e);
    CHECK(n == 0 && msg == NULL);
    /* discard: a begun run with rows (committed early and still open) goes
     * entirely; runs done are refused */
    int64_t run;
    CHECK_OK(al_store_run_begin(s, "patch", "{}", 1, &run, &e), &e);
    CHECK(run == 3);
    al_warnings w = {0};
    al_warnings_add(&w, "x");
    CHECK_OK(al_store_tx_begin(s, &e), &e);
    CHECK_OK(al_store_put_warnings(s, run, 1, &w, &e), &e);
    CHECK_OK(al_store_put_model_score(s, run, 1, "m", 1.0, &e), &e);
    CHECK_OK(al_store_tx_commit(s, &e), &e);
    CHECK_OK(al_store_tx_begin(s, &e), &e);
    CHECK_OK(al_store_put_head_score(s, run, 1, 0, 0, "x", 2.0, &e), &e);
    CHECK_OK(al_store_run_discard(s, run, &e), &e);
    CHECK(al_store_run_discard(s, 1, &e) == -1 && strstr(e.msg, "finished"));
    CHECK(al_store_run_discard(s, 99, &e) == -1 && strstr(e.msg, "no run 99"));
    al_store_close(s);
    CHECK_SQL(db.s,
              "SELECT (SELECT count(*) FROM runs) || ',' || (SELECT count(*) FROM "
              "run_warnings) || ',' || (SELECT count(*) FROM model_scores) || ',' || "
              "(SELECT count(*) FROM head_scores)",
              "2,2,0,0");
    CHECK_SQL(db.s, "SELECT count(*) FROM pragma_foreign_key_check", "0");
    /* a failed run can be discarded too (its rows were rolled back) */
    CHECK_OK(al_store_open(db.s, &s, &e), &e);
    CHECK_OK(al_store_run_begin(s, "patch", "{}", 1, &run, &e), &e);
    CHECK_OK(al_store_run_fail(s, run, "x", &e), &e);
    CHECK_OK(al_store_run_discard(s, run, &e), &e);
    al_store_close(s);
    CHECK_SQL(db.s, "SELECT count(*) FROM runs", "2");
    al_model_free(&m);
}

/* db merge carries run_warnings under the new run ids. */
TEST(gap_store_merge) {
    al_model m;
    rand_model(&m, 1, 0, 40);
    t_pbuf dir = model_dir("m", &m), a = t_pcopy("a.db"), b = t_pcopy("b.db"),
           out = t_pcopy("out.db");
    make_db(a.s, "a", &m, dir.s);
    make_db(b.s, "b", &m, dir.s);
    const char *in[2] = {a.s, b.s};
    al_merge_opts mo = AL_MERGE_OPTS_INIT;
    al_err e;
    CHECK_OK(al_store_merge(out.s, in, 2, &mo, NULL, &e), &e);
    CHECK_SQL(out.s, "SELECT count(*) FROM runs", "4");
    /* each warning with its own run (by uid), in order */
    CHECK_SQL(
        out.s,
        "SELECT group_concat(r.run_id || ':' || w.seq || ':' || w.message, '|') FROM "
        "(SELECT * FROM run_warnings ORDER BY run_id, seq) w JOIN runs r USING(run_id)",
        "1:0:a: first 'quoted' warning|1:1:a: second|3:0:b: first 'quoted' warning|3:1:b: second");
    char q[512];
    snprintf(q, sizeof q,
             "SELECT group_concat(uid) FROM runs WHERE run_id IN (SELECT run_id FROM "
             "run_warnings) ORDER BY run_id");
    char *ua = t_sql(a.s, "SELECT uid FROM runs WHERE run_id = 1"),
         *ub = t_sql(b.s, "SELECT uid FROM runs WHERE run_id = 1"), *uo = t_sql(out.s, q);
    char want[200];
    snprintf(want, sizeof want, "%s,%s", ua ? ua : "?", ub ? ub : "?");
    CHECK(uo && !strcmp(uo, want));
    free(ua), free(ub), free(uo);
    CHECK_SQL(out.s,
              "SELECT count(*) FROM run_warnings w JOIN runs r USING(run_id) WHERE "
              "w.model_id != r.model_id",
              "0");
    al_model_free(&m);
}
