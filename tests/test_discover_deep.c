/* test_discover_deep.c -- circuit discovery (discover.h) on models of
 * more than 2 layers: the planted skip-layer induction circuit
 * (planted.h, planted_model_deep: previous-token head 0.0, induction
 * head 2.0 reading 0.0 by K-composition across the idle layer 1; also
 * 4 layers with the induction head in layer 3, and 3 with it in layer 1
 * and layer 2 idle) is what ACDC keeps in both sender orders and what
 * EAP ranks first; on a
 * random 3-layer model the sender orders visit what discover.h says. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/circuit_file.h"
#include "attnlab/discover.h"
#include "attnlab/graph.h"
#include "planted.h"
#include "randmodel.h"
#include "test.h"

enum { DL = 3, DR = 10 }; /* 3 layers (the random model's); R = 10, T = 21 */
/* the planted model's depth and its induction head's layer (tests set them) */
static int g_L = 3, g_li = 2;

static void deep_task(al_pairs *t, const al_model *m) {
    al_patch_opts o = al_patch_opts_defaults();
    o.probe_r = DR, o.probe_n = 16;
    al_err e;
    CHECK_OK(al_patch_task_make(t, m, NULL, 0, &o, &e), &e);
}

static int edge_of(al_edge_kind kind, int s, int l, int h, int c) {
    al_edge ed = {kind, s, l, h, c};
    return al_graph_edge_index(g_L, PH, &ed);
}

/* The circuit, as in the 2-layer planted test (test_discover.c) with the
 * induction head two layers up: embed -> 0.0.v (0.0 copies the token
 * into PREV), 0.0 -> 2.0.k (K-composition skipping layer 1), embed ->
 * 2.0.v (2.0 copies the attended token), 2.0 -> logits. Layer 1's heads
 * are idle (1.0 all zero, 1.1 writes nothing, 1.2 a constant), so no
 * edge through them carries a difference. */
static void want_edges(int *w) {
    w[0] = edge_of(AL_EDGE_INPUT, 0, 0, 0, 2);
    w[1] = edge_of(AL_EDGE_COMPOSITION, 2, g_li, 0, 1);
    w[2] = edge_of(AL_EDGE_INPUT, 0, g_li, 0, 2);
    w[3] = edge_of(AL_EDGE_OUTPUT, 2 + g_li * PH, -1, -1, 3);
}

static void planted_acdc(void) {
    const int DL = g_L;
    al_model m;
    planted_model_deep(&m, DL, g_li);
    al_pairs t;
    deep_task(&t, &m);
    int want[4];
    want_edges(want);
    CHECK(want[1] >= 0);
    al_discover_opts o = al_discover_opts_defaults();
    o.tau = 0.01;
    al_err e;
    for (int c = 0; c < 4; c++) {
        o.order = c & 1 ? "latest-first" : "embed-first";
        o.remove_if = c & 2 ? "lt" : "le";
        al_discover_result r;
        CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
        CHECK(r.L == DL && r.H == PH && r.n_edges == al_graph_n_edges(DL, PH));
        for (int k = 0; k < r.n_edges; k++) {
            int w = k == want[0] || k == want[1] || k == want[2] || k == want[3];
            char nm[64];
            CHECKF(r.kept[k] == w, "%s/%s %s: kept %d, want %d (score %g)", o.order, o.remove_if,
                   al_graph_edge_name(DL, PH, k, nm, sizeof nm), r.kept[k], w, r.score[k]);
            if (w) CHECKF(r.score[k] > 0.5, "%s: score %g", nm, r.score[k]);
        }
        CHECKF(r.n_kept == 4 && r.kl_circuit < 1e-6 && fabs(r.faithfulness - 1.0) < 1e-4,
               "%s/%s: kept %d kl %g faithfulness %g", o.order, o.remove_if, r.n_kept, r.kl_circuit,
               r.faithfulness);
        CHECK(r.m_clean > r.m_corr + 1.0);
        /* the circuit as evaluated on its own agrees with what ACDC reports */
        double kl, mv;
        CHECK_OK(al_circuit_eval(&m, &t, r.kept, 8, &kl, &mv, &e), &e);
        CHECK(fabs(kl - r.kl_circuit) < 1e-12 && fabs(mv - r.m_circuit) < 1e-12);
        /* removing the skip-layer edge breaks it: the corrupted-like run */
        unsigned char *k2 = malloc((size_t)r.n_edges);
        memcpy(k2, r.kept, (size_t)r.n_edges);
        k2[want[1]] = 0;
        CHECK_OK(al_circuit_eval(&m, &t, k2, 8, &kl, &mv, &e), &e);
        CHECKF(kl > 0.5 && mv < r.m_clean - 1.0, "L %d: without 0.0 -> %d.0.k: kl %g metric %g", DL,
               g_li, kl, mv);
        free(k2);
        al_discover_result_free(&r);
    }
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(discover_deep_planted_acdc) {
    g_L = 3, g_li = 2;
    planted_acdc();
    if (T_SAN) return; /* the same code at other depths: the plain build's */
    /* two idle layers between, and an idle layer after the induction head */
    g_L = 4, g_li = 3;
    planted_acdc();
    g_L = 3, g_li = 1;
    planted_acdc();
    g_L = 3, g_li = 2;
}

/* EAP: the four planted edges carry the only nonzero estimates (as in
 * 2 layers), so 0.0 -> 2.0.k ranks among the top four, and the circuit
 * EAP keeps is the four at faithfulness 1. */
TEST(discover_deep_planted_eap) {
    g_L = 3, g_li = 2;
    al_model m;
    planted_model_deep(&m, DL, g_li);
    al_pairs t;
    deep_task(&t, &m);
    int want[4];
    want_edges(want);
    al_discover_opts o = al_discover_opts_defaults();
    o.method = "eap";
    al_discover_result r;
    al_err e;
    CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
    int above = 0; /* edges scored above the skip-layer edge */
    for (int k = 0; k < r.n_edges; k++) {
        int w = k == want[0] || k == want[1] || k == want[2] || k == want[3];
        char nm[64];
        al_graph_edge_name(DL, PH, k, nm, sizeof nm);
        CHECKF(w ? r.score[k] > 1e-3 : r.score[k] < 1e-9, "%s: score %g", nm, r.score[k]);
        CHECKF(r.kept[k] == w, "%s: kept %d", nm, r.kept[k]);
        above += r.score[k] > r.score[want[1]];
    }
    CHECKF(above <= 3, "0.0 -> 2.0.k ranks %d", above + 1);
    CHECKF(r.n_kept == 4 && fabs(r.faithfulness - 1.0) < 1e-4, "kept %d faithfulness %g", r.n_kept,
           r.faithfulness);
    al_discover_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* A random 3-layer model: the first edge each order tries is the one
 * discover.h names (embed -> logits; the last layer's last head ->
 * logits), its score the growth of the KL when it alone is removed; the
 * circuit returned evaluates to what is reported, and its KL is at most
 * tau per removed edge (each removal grew it by at most tau). */
TEST(discover_deep_sender_order) {
    al_model m;
    rand_model(&m, DL, 0, 20);
    for (int k = 0; k < DL * m.cfg.n_heads; k++) m.gates[k] = 0.5f + 0.2f * (float)(k % 4);
    al_pairs t;
    al_err e;
    task(&t, &m, 6, 7, &e);
    const int L = DL, H = m.cfg.n_heads, n = al_graph_n_edges(L, H);
    unsigned char *all = malloc((size_t)n);
    memset(all, 1, (size_t)n);
    double kl_all, kl, mv;
    CHECK_OK(al_circuit_eval(&m, &t, all, 3, &kl_all, &mv, &e), &e);
    int ki = al_graph_k_out(L, H, 0), kr = al_graph_k_out(L, H, 1 + L * H);
    al_discover_opts o = al_discover_opts_defaults();
    o.batch = 3, o.tau = 0.02;
    for (int rev = 0; rev < 2; rev++) {
        o.order = rev ? "latest-first" : "embed-first";
        int k = rev ? kr : ki;
        all[k] = 0;
        CHECK_OK(al_circuit_eval(&m, &t, all, 3, &kl, &mv, &e), &e);
        all[k] = 1;
        al_discover_result r;
        CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
        CHECKF(fabs(r.score[k] - (kl - kl_all)) < 1e-12, "%s: first edge's score %.12g, want %.12g",
               o.order, r.score[k], kl - kl_all);
        /* every edge into a live receiver was tried; the final circuit
         * evaluates to what is reported */
        int tried = 0;
        for (int j = 0; j < n; j++) tried += !isnan(r.score[j]);
        CHECK(tried > n / 2);
        CHECK_OK(al_circuit_eval(&m, &t, r.kept, 3, &kl, &mv, &e), &e);
        CHECK(fabs(kl - r.kl_circuit) < 1e-12);
        CHECK(r.kl_circuit <= 1e-9 + (double)r.n_edges * o.tau);
        al_discover_result_free(&r);
    }
    free(all);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* ------------------------------------------------------------ the CLI */

/* A tiny trained 3-layer model end to end: discover (ACDC with a sweep,
 * both sender orders, and EAP) stores every edge of the 3-layer graph and
 * writes a circuit file that names edges of all three layers and loads
 * back as its rows' kept set; `scores --circuit FILE` runs the circuit
 * (its probe loss differs from the full model's); the circuit picture
 * and the report draw it. */
TEST(discover_deep_cli) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.json");
    const char *b = t_bin();
    t_tiny_model(dir.s, 3, 30);
    const int L = 3, H = 4, n = al_graph_n_edges(L, H); /* 72 + 144 + 14 = 230 */
    CHECK(n == 230);
    CHECK(t_sh("%s discover --model %s/m3 --db %s --probe-r 6 --n 8 --batch 4 --threads 2 --sweep "
               "0.05 --json > %s 2>/dev/null",
               b, dir.s, db.s, out.s) == 0);
    char *js = t_slurp(out.s);
    CHECKF(js && strstr(js, "\"edges\":\t230,"), "%s", js ? js : "");
    free(js);
    CHECK(t_sh("%s discover --model %s/m3 --db %s --probe-r 6 --n 8 --batch 4 --threads 2 "
               "--acdc-order latest-first --acdc-remove lt --out %s >/dev/null 2>&1",
               b, dir.s, db.s, dir.s) == 0);
    CHECK(t_sh("%s discover --model %s/m3 --db %s --probe-r 6 --n 8 --batch 4 --threads 2 --method "
               "eap >/dev/null 2>&1",
               b, dir.s, db.s) == 0);
    CHECK_SQL(db.s, "SELECT count(*), min(n_edges), max(n_edges) FROM circuit_runs", "4|230|230");
    CHECK_SQL(db.s, "SELECT count(*) FROM circuit_edges", "920");
    /* names of the deep edges: a skip-layer composition edge and a layer-2 receiver */
    int k02 = al_graph_k_comp(L, H, 0 * H + 1, 2, 3, 1), kout = al_graph_k_out(L, H, 2 + 2 * H);
    char q[200];
    snprintf(q, sizeof q,
             "SELECT DISTINCT sender, receiver_layer, receiver_head, channel FROM "
             "circuit_edges WHERE edge IN (%d, %d) ORDER BY edge",
             k02, kout);
    CHECK_SQL(db.s, q, "0.1|2|3|k\n2.0|||direct");
    /* the files match their rows */
    unsigned char kept[230];
    al_err e = {{0}};
    const char *files[2] = {"m3/circuit-induction-acdc.json", "m3/circuit-induction-eap.json"};
    const char *where[2] = {"run_id = 1 AND tau = 0.01", "run_id = 3"};
    for (int i = 0; i < 2; i++) {
        char f[1200];
        snprintf(f, sizeof f, "%s/%s", dir.s, files[i]);
        CHECK_OK(al_circuit_load(f, L, H, kept, &e), &e);
        snprintf(q, sizeof q,
                 "SELECT group_concat(kept, '') FROM (SELECT kept FROM circuit_edges "
                 "WHERE %s ORDER BY edge)",
                 where[i]);
        char *want = t_sql(db.s, q), got[232];
        for (int k = 0; k < n; k++) got[k] = (char)('0' + kept[k]);
        got[n] = 0;
        CHECKF(want && !strcmp(want, got), "%s: file %s\n rows %s", files[i], got,
               want ? want : "");
        free(want);
    }
    /* a circuit run: the probe's loss is the circuit's, not the model's */
    CHECK(t_sh("%s scores --model %s/m3 --db %s --probe-r 8 --threads 2 >/dev/null 2>&1", b, dir.s,
               db.s) == 0);
    CHECK(t_sh("%s scores --model %s/m3 --db %s --probe-r 8 --threads 2 --circuit "
               "%s/m3/circuit-induction-eap.json >/dev/null 2>&1",
               b, dir.s, db.s, dir.s) == 0);
    CHECK_SQL(db.s,
              "SELECT count(*), count(DISTINCT value) FROM model_scores WHERE metric = "
              "'probe_loss_second'",
              "2|2");
    /* the picture (one row per layer) and the report */
    CHECK(t_sh("%s heatmap --model %s/m3 --db %s --what circuit --run 1 --out %s/c.png > %s 2>&1",
               b, dir.s, db.s, dir.s, t_path("hm.out")) == 0);
    CHECK(al_file_exists(t_path("c.png")));
    CHECK(t_sh("%s heatmap --model %s/m3 --db %s --what circuit-curve --run 1 --out %s/cc.png "
               ">/dev/null 2>&1",
               b, dir.s, db.s, dir.s) == 0);
    CHECK(t_sh("%s report --db %s --model %s/m3 --out %s/rep >/dev/null 2>&1", b, db.s, dir.s,
               dir.s) == 0);
    char *html = t_slurp(t_path("rep/index.html"));
    CHECKF(html && strstr(html, "Heads in the circuit") && strstr(html, "circuit-induction"),
           "the report has no circuit section");
    free(html);
}
