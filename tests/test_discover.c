/* test_discover.c -- circuit discovery (discover.h): the graph's edge
 * indexing; running a circuit against independent interventions (the
 * clean and corrupted runs, path patching where the two are the same
 * intervention, activation patching of a whole channel or head); ACDC's
 * known answer on the planted induction circuit of planted.h; the EAP
 * ranking there; refusals; bit-for-bit repeats; the speed of ACDC on a
 * model of the demo's size (printed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/discover.h"
#include "attnlab/model.h"
#include "attnlab/patch.h"
#include "planted.h"
#include "randmodel.h"
#include "test.h"

/* ------------------------------------------------------------- graph */

TEST(discover_graph_indexing) {
    CHECK(al_graph_n_edges(2, 8) == 306);
    CHECK(al_graph_n_edges(1, 4) == 6 * 4 + 2 + 4);
    CHECK(al_graph_n_edges(2, 3) == 36 + 27 + 8);
    CHECK(al_graph_n_edges(3, 4) == 0 && al_graph_n_edges(0, 4) == 0);
    for (int L = 1; L <= 2; L++)
        for (int H = 1; H <= 8; H++) {
            int n = al_graph_n_edges(L, H), bad = 0, kinds[3] = {0};
            for (int k = 0; k < n; k++) {
                al_edge ed;
                if (al_graph_edge(L, H, k, &ed) || al_graph_edge_index(L, H, &ed) != k) bad++;
                else kinds[ed.kind]++;
            }
            CHECKF(!bad, "L %d H %d: %d edges do not round-trip", L, H, bad);
            CHECK(kinds[AL_EDGE_INPUT] == 6 * L * H);
            CHECK(kinds[AL_EDGE_COMPOSITION] == (L == 2 ? 3 * H * H : 0));
            CHECK(kinds[AL_EDGE_OUTPUT] == 2 + L * H);
            al_edge ed;
            CHECK(al_graph_edge(L, H, n, &ed) == -1 && al_graph_edge(L, H, -1, &ed) == -1);
        }
    /* the header's formulas, spot-checked */
    al_edge ed;
    CHECK(al_graph_edge(2, 8, ((1 * 8 + 3) * 3 + 1) * 2 + 0, &ed) == 0);
    CHECK(ed.kind == AL_EDGE_INPUT && ed.sender == 0 && ed.recv_layer == 1 && ed.recv_head == 3 &&
          ed.channel == 1);
    CHECK(al_graph_edge(2, 8, 96 + (4 * 8 + 6) * 3 + 0, &ed) == 0);
    CHECK(ed.kind == AL_EDGE_COMPOSITION && ed.sender == 2 + 4 && ed.recv_layer == 1 &&
          ed.recv_head == 6 && ed.channel == 0);
    CHECK(al_graph_edge(2, 8, 96 + 192 + 2 + 8 + 2, &ed) == 0);
    CHECK(ed.kind == AL_EDGE_OUTPUT && ed.sender == 2 + 8 + 2 && ed.recv_layer == -1 &&
          ed.channel == 3);
    char b[64];
    CHECK(!strcmp(al_graph_edge_name(2, 8, ((1 * 8 + 3) * 3 + 1) * 2, b, sizeof b), "embed->1.3.k"));
    CHECK(!strcmp(al_graph_edge_name(2, 8, 96 + (4 * 8 + 6) * 3, b, sizeof b), "0.4->1.6.q"));
    CHECK(!strcmp(al_graph_edge_name(2, 8, 96 + 192 + 2 + 8 + 2, b, sizeof b), "1.2->logits"));
    CHECK(!strcmp(al_graph_edge_name(2, 8, 96 + 192 + 1, b, sizeof b), "pos->logits"));
    CHECK(!strcmp(al_graph_edge_name(1, 2, 1, b, sizeof b), "pos->0.0.q"));
    /* edges the graph does not have */
    al_edge no[] = {
        {AL_EDGE_COMPOSITION, 2, 1, 0, 0}, /* no composition in 1 layer (tested with L = 1) */
        {AL_EDGE_INPUT, 2, 0, 0, 0},       /* a head is no input sender */
        {AL_EDGE_INPUT, 0, 2, 0, 0},       /* no layer 2 */
        {AL_EDGE_OUTPUT, 0, 1, 0, 3},      /* the logits are layer −1 */
        {AL_EDGE_INPUT, 0, 0, 0, 3},       /* channel 3 is the logits' */
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CHECKF(al_graph_edge_index(1, 2, &no[i]) == -1, "case %zu", i);
    CHECK(!strcmp(al_graph_edge_name(2, 8, 306, b, sizeof b), "?"));
}

/* ---------------------------------------------------- running circuits */

enum { RR = 6, RN = 7 }; /* the random model's task: R, pairs (batches 3+3+1) */

static unsigned char *all_kept(int L, int H, int v) {
    int n = al_graph_n_edges(L, H);
    unsigned char *k = malloc((size_t)n);
    memset(k, v, (size_t)n);
    return k;
}

/* Every edge kept is the clean run; none, the corrupted run (the final
 * residual is copied from it: the same bits). KL from the clean run is 0
 * and > 0. */
static void check_ends(int L) {
    al_model m;
    rand_model(&m, L, 0, 20);
    al_pairs t;
    al_err e;
    task(&t, &m, RR, RN, &e);
    al_patch_opts po = al_patch_opts_defaults();
    po.batch = 3, po.direction = "noise";
    double mc, mr, kl, mv;
    CHECK_OK(al_patch_eval(&m, &t, &po, NULL, NULL, NULL, NULL, NULL, &mc, &mr, &e), &e);
    unsigned char *k = all_kept(L, 3, 1);
    CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
    CHECKF(kl == 0.0 && fabs(mv - mc) < 1e-9, "L %d all kept: kl %g, M %.9g vs clean %.9g", L, kl,
           mv, mc);
    memset(k, 0, (size_t)al_graph_n_edges(L, 3));
    CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
    CHECKF(kl > 1e-3 && fabs(mv - mr) < 1e-9, "L %d none kept: kl %g, M %.9g vs corrupted %.9g",
           L, kl, mv, mr);
    /* the batch size does not matter beyond float rounding */
    double kl1, mv1;
    CHECK_OK(al_circuit_eval(&m, &t, k, 1, &kl1, &mv1, &e), &e);
    CHECK_NEAR(kl1, kl, 1e-5);
    CHECK_NEAR(mv1, mv, 1e-5);
    free(k);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(discover_eval_clean_and_corrupted) {
    check_ends(1);
    check_ends(2);
}

/* Removing one path-patching edge is path patching with noising where
 * nothing downstream of the receiver could react: every receiver of a
 * 2-layer model's path patching is a layer-1 channel (read by the logits
 * only) or the logits. pos removes nothing in either. */
static void check_paths(int L) {
    al_model m;
    rand_model(&m, L, 0, 20);
    al_pairs t;
    al_err e;
    task(&t, &m, RR, RN, &e);
    al_patch_opts po = al_patch_opts_defaults();
    po.batch = 3, po.direction = "noise";
    al_paths_result pr;
    CHECK_OK(al_paths_run(&m, &t, &po, &pr, &e), &e);
    const int H = 3, n = al_graph_n_edges(L, H), ns = pr.n_senders;
    unsigned char *k = all_kept(L, H, 1);
    int tested = 0;
    for (int c = 0; c < 4; c++)
        for (int s = 0; s < ns; s++)
            for (int h = 0; h < H; h++) {
                double want = pr.metric[((size_t)c * ns + s) * H + h];
                if (isnan(want)) continue;
                al_edge ed = {c == 3 ? AL_EDGE_OUTPUT : s < 2 ? AL_EDGE_INPUT : AL_EDGE_COMPOSITION,
                              s, c == 3 ? -1 : 1, c == 3 ? -1 : h, c};
                int idx = al_graph_edge_index(L, H, &ed);
                CHECKF(idx >= 0 && idx < n, "c %d s %d h %d: no edge", c, s, h);
                if (idx < 0) continue;
                double kl, mv;
                k[idx] = 0;
                CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
                k[idx] = 1;
                char nm[64];
                CHECKF(fabs(mv - want) < 1e-5, "L %d %s: circuit %.9g, path patching %.9g", L,
                       al_graph_edge_name(L, H, idx, nm, sizeof nm), mv, want);
                if (s == 1) CHECK(kl == 0.0);
                tested++;
            }
    CHECK(tested == (L == 2 ? 3 * ns * H + ns : ns));
    free(k);
    al_paths_result_free(&pr);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(discover_eval_matches_path_patching) {
    check_paths(1);
    check_paths(2);
}

/* Edges the path grid lacks, against activation patching (noising) of
 * whole channels and heads, where downstream heads react in both: all of
 * a layer-0 channel's senders removed = its q/k/v from the corrupted
 * residual (layer 1 reads the changed head); all of a layer-1 channel's
 * likewise; a last-layer head's logits edge = its z from the corrupted
 * run. The gates differ from 1 (rand_model), so they are in the sums. */
TEST(discover_eval_matches_activation_patching) {
    al_model m;
    rand_model(&m, 2, 0, 20);
    al_pairs t;
    al_err e;
    task(&t, &m, RR, RN, &e);
    al_patch_opts po = al_patch_opts_defaults();
    po.batch = 3, po.direction = "noise";
    const int L = 2, H = 3, T = t.T;
    unsigned char *k = all_kept(L, H, 1);
    unsigned char qm[2 * 3 * 3 * 32], zm[2 * 3 * 32];
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < H; h++)
            for (int c = 0; c < 3; c++) {
                memset(qm, 0, sizeof qm);
                memset(qm + (((size_t)l * 3 + c) * H + h) * T, 1, T);
                double want, kl, mv;
                CHECK_OK(al_patch_eval(&m, &t, &po, NULL, NULL, qm, NULL, &want, NULL, NULL, &e), &e);
                al_edge ed = {AL_EDGE_INPUT, 0, l, h, c};
                k[al_graph_edge_index(L, H, &ed)] = 0;
                for (int h0 = 0; l == 1 && h0 < H; h0++) {
                    al_edge cm = {AL_EDGE_COMPOSITION, 2 + h0, 1, h, c};
                    k[al_graph_edge_index(L, H, &cm)] = 0;
                }
                CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
                CHECKF(fabs(mv - want) < 1e-5, "%d.%d.%c: circuit %.9g, patching %.9g", l, h,
                       "qkv"[c], mv, want);
                memset(k, 1, (size_t)al_graph_n_edges(L, H));
            }
    for (int h = 0; h < H; h++) {
        memset(zm, 0, sizeof zm);
        memset(zm + ((size_t)1 * H + h) * T, 1, T);
        double want, kl, mv;
        CHECK_OK(al_patch_eval(&m, &t, &po, NULL, zm, NULL, NULL, &want, NULL, NULL, &e), &e);
        al_edge ed = {AL_EDGE_OUTPUT, 2 + H + h, -1, -1, 3};
        k[al_graph_edge_index(L, H, &ed)] = 0;
        CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
        k[al_graph_edge_index(L, H, &ed)] = 1;
        CHECKF(fabs(mv - want) < 1e-5, "1.%d->logits: circuit %.9g, patching %.9g", h, mv, want);
    }
    /* removing a layer-0 head's every outgoing edge is its output from
     * the corrupted run everywhere (z patching of that head) */
    for (int h = 0; h < H; h++) {
        memset(zm, 0, sizeof zm);
        memset(zm + (size_t)h * T, 1, T);
        double want, kl, mv;
        CHECK_OK(al_patch_eval(&m, &t, &po, NULL, zm, NULL, NULL, &want, NULL, NULL, &e), &e);
        al_edge ed = {AL_EDGE_OUTPUT, 2 + h, -1, -1, 3};
        k[al_graph_edge_index(L, H, &ed)] = 0;
        for (int h1 = 0; h1 < H; h1++)
            for (int c = 0; c < 3; c++) {
                al_edge cm = {AL_EDGE_COMPOSITION, 2 + h, 1, h1, c};
                k[al_graph_edge_index(L, H, &cm)] = 0;
            }
        CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
        memset(k, 1, (size_t)al_graph_n_edges(L, H));
        CHECKF(fabs(mv - want) < 1e-5, "0.%d out: circuit %.9g, patching %.9g", h, mv, want);
    }
    free(k);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* ------------------------------------------------ the planted circuit */

enum { PR_ = 10 }; /* the induction task: R = 10, T = 21 <= n_ctx 32 */

static void planted_task(al_pairs *t, const al_model *m) {
    al_patch_opts o = al_patch_opts_defaults();
    o.probe_r = PR_, o.probe_n = 16;
    al_err e;
    CHECK_OK(al_patch_task_make(t, m, NULL, 0, &o, &e), &e);
}

static int edge_of(al_edge_kind kind, int s, int l, int h, int c) {
    al_edge ed = {kind, s, l, h, c};
    return al_graph_edge_index(2, PH, &ed);
}

/* The planted circuit as the induction task (clean BOS A A, corrupted
 * BOS A' A, items in the second half) sees it, from planted.h:
 *   embed -> 0.0.v   0.0 copies TOK into PREV; PREV at the first half
 *                    must hold A, not A', for 1.0's keys to match;
 *   0.0 -> 1.0.k     1.0's keys read PREV (K-composition);
 *   embed -> 1.0.v   1.0 copies the attended token (TOK) into OUT;
 *   1.0 -> logits    OUT is read by W_U.
 * Nothing else: 0.0's q and k read POS only (the same in both runs);
 * 1.0's q reads TOK at the query, i.e. at the items, where the two runs
 * have the same tokens (A), so embed -> 1.0.q carries nothing; embed ->
 * 1.0.k and 0.0 -> 1.0.q/v are zero through W_K / W_Q, W_V (they read
 * PREV, resp. TOK, only); the direct embed -> logits path of W_U's random
 * TOK rows reads the item positions' tokens, again shared; 0.0 writes
 * PREV, which W_U does not read; 0.1 writes nothing; 0.2, 1.1, 1.2 attend
 * to BOS and read BIAS, the same in both runs. So the circuit is exactly
 * these four edges, with KL ~ 0 and faithfulness ~ 1. */
TEST(discover_acdc_planted_known_answer) {
    al_model m;
    planted_model(&m);
    al_pairs t;
    planted_task(&t, &m);
    al_discover_opts o = al_discover_opts_defaults();
    o.tau = 0.01;
    al_discover_result r;
    al_err e;
    CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
    int want[4] = {edge_of(AL_EDGE_INPUT, 0, 0, 0, 2), edge_of(AL_EDGE_COMPOSITION, 2, 1, 0, 1),
                   edge_of(AL_EDGE_INPUT, 0, 1, 0, 2), edge_of(AL_EDGE_OUTPUT, 2 + PH, -1, -1, 3)};
    CHECK(r.n_edges == al_graph_n_edges(2, PH) && r.L == 2 && r.H == PH);
    for (int k = 0; k < r.n_edges; k++) {
        int w = k == want[0] || k == want[1] || k == want[2] || k == want[3];
        char nm[64];
        CHECKF(r.kept[k] == w, "%s: kept %d, want %d (score %g)",
               al_graph_edge_name(2, PH, k, nm, sizeof nm), r.kept[k], w, r.score[k]);
        if (w) CHECKF(r.score[k] > 0.5, "%s: score %g", nm, r.score[k]);
    }
    CHECK(r.n_kept == 4);
    CHECKF(r.kl_circuit < 1e-6 && fabs(r.faithfulness - 1.0) < 1e-4, "kl %g faithfulness %g",
           r.kl_circuit, r.faithfulness);
    CHECK(r.m_clean > r.m_corr + 1.0);
    /* the never-tried edges are those of the dead heads 1.1, 1.2, 0.1, 0.2 */
    int nan = 0;
    for (int k = 0; k < r.n_edges; k++) nan += isnan(r.score[k]);
    CHECKF(nan == 2 * 3 * (2 + PH) + 2 * 3 * 2, "untried %d", nan); /* 1.1, 1.2; 0.1, 0.2 */
    long evals = r.evals;
    al_discover_result_free(&r);
    CHECK(r.kept == NULL && r.score == NULL);
    /* the task's own metric gives the same circuit */
    o.metric = "logit_diff";
    CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
    for (int k = 0; k < r.n_edges; k++)
        CHECK(r.kept[k] == (k == want[0] || k == want[1] || k == want[2] || k == want[3]));
    al_discover_result_free(&r);
    /* tau too large: everything goes, the circuit is the corrupted run */
    o.metric = "kl", o.tau = 1e9;
    CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
    CHECKF(r.n_kept == 0 && fabs(r.faithfulness) < 1e-9 && r.kl_circuit > 1.0,
           "kept %d faithfulness %g kl %g", r.n_kept, r.faithfulness, r.kl_circuit);
    al_discover_result_free(&r);
    /* tau = 0: an edge stays out only if removing it changes nothing */
    o.tau = 0;
    CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
    /* here every other edge changes nothing at all (see above), so even
     * tau = 0 keeps just the four (a random model's tau = 0 keeps more:
     * discover_acdc_tau_and_repeats) */
    CHECKF(r.n_kept == 4 && r.evals == evals, "tau 0: kept %d, %ld evaluations", r.n_kept, r.evals);
    for (int i = 0; i < 4; i++) CHECK(r.kept[want[i]]);
    al_discover_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}
