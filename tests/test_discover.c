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

#include "attnlab/attrpatch.h"
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
    CHECK(al_graph_n_edges(4, 8) == 192 + 1152 + 34);
    CHECK(al_graph_n_edges(AL_GRAPH_MAX_LAYERS + 1, 4) == 0 && al_graph_n_edges(0, 4) == 0);
    for (int L = 1; L <= 5; L++)
        for (int H = 1; H <= 8; H++) {
            int n = al_graph_n_edges(L, H), bad = 0, kinds[3] = {0};
            for (int k = 0; k < n; k++) {
                al_edge ed;
                if (al_graph_edge(L, H, k, &ed) || al_graph_edge_index(L, H, &ed) != k)
                    bad++;
                else
                    kinds[ed.kind]++;
            }
            CHECKF(!bad, "L %d H %d: %d edges do not round-trip", L, H, bad);
            CHECK(kinds[AL_EDGE_INPUT] == 6 * L * H);
            CHECK(kinds[AL_EDGE_COMPOSITION] == 3 * H * H * L * (L - 1) / 2);
            /* every (earlier head, later head, channel) exactly once */
            int comp_bad = 0;
            for (int l1 = 1; l1 < L; l1++)
                for (int s = 0; s < l1 * H; s++)
                    for (int h1 = 0; h1 < H; h1++)
                        for (int c = 0; c < 3; c++) {
                            al_edge ce = {AL_EDGE_COMPOSITION, 2 + s, l1, h1, c}, back;
                            int k = al_graph_edge_index(L, H, &ce);
                            comp_bad += k < 0 || al_graph_edge(L, H, k, &back) ||
                                        back.kind != AL_EDGE_COMPOSITION || back.sender != 2 + s ||
                                        back.recv_layer != l1 || back.recv_head != h1 ||
                                        back.channel != c;
                        }
            CHECKF(!comp_bad, "L %d H %d: %d composition edges do not round-trip", L, H, comp_bad);
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
    CHECK(
        !strcmp(al_graph_edge_name(2, 8, ((1 * 8 + 3) * 3 + 1) * 2, b, sizeof b), "embed->1.3.k"));
    CHECK(!strcmp(al_graph_edge_name(2, 8, 96 + (4 * 8 + 6) * 3, b, sizeof b), "0.4->1.6.q"));
    CHECK(!strcmp(al_graph_edge_name(2, 8, 96 + 192 + 2 + 8 + 2, b, sizeof b), "1.2->logits"));
    CHECK(!strcmp(al_graph_edge_name(2, 8, 96 + 192 + 1, b, sizeof b), "pos->logits"));
    CHECK(!strcmp(al_graph_edge_name(1, 2, 1, b, sizeof b), "pos->0.0.q"));
    /* 4 layers: 1.5 -> 3.2.v sits in layer 3's block, after layers 1 (3·64) and 2 (3·128) */
    CHECK(
        !strcmp(al_graph_edge_name(4, 8, 192 + 192 + 384 + ((8 + 5) * 8 + 2) * 3 + 2, b, sizeof b),
                "1.5->3.2.v"));
    CHECK(
        !strcmp(al_graph_edge_name(4, 8, 192 + 1152 + 2 + 3 * 8 + 7, b, sizeof b), "3.7->logits"));
    al_edge late = {AL_EDGE_COMPOSITION, 2 + 2 * 8, 2, 0, 0}; /* 2.0 -> 2.0: same layer */
    CHECK(al_graph_edge_index(4, 8, &late) == -1);
    /* edges the graph does not have */
    al_edge no[] = {
        {AL_EDGE_COMPOSITION, 2, 1, 0, 0}, /* no composition in 1 layer (tested with L = 1) */
        {AL_EDGE_INPUT, 2, 0, 0, 0}, /* a head is no input sender */
        {AL_EDGE_INPUT, 0, 2, 0, 0}, /* no layer 2 */
        {AL_EDGE_OUTPUT, 0, 1, 0, 3}, /* the logits are layer −1 */
        {AL_EDGE_INPUT, 0, 0, 0, 3}, /* channel 3 is the logits' */
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

/* rand_model of L layers (vocab 20) with the induction task of RR, RN
 * and patching options for noising in batches of 3, as every random-model
 * test here uses them. */
static int g_pos_type = AL_POS_STANDARD; /* the shortformer tests set it */
static void rand_setup(al_model *m, al_pairs *t, int L, al_patch_opts *po) {
    al_err e;
    rand_model(m, L, 0, 20);
    m->cfg.pos_type = g_pos_type;
    task(t, m, RR, RN, &e);
    *po = al_patch_opts_defaults();
    po->batch = 3, po->direction = "noise";
}

/* The graph's index of path patching's path (patch.h: channel c, 3 =
 * direct; sender s; receiver head h of layer 1). */
static int path_edge(int L, int H, int c, int s, int h) {
    al_edge ed = {c == 3  ? AL_EDGE_OUTPUT
                  : s < 2 ? AL_EDGE_INPUT
                          : AL_EDGE_COMPOSITION,
                  s, c == 3 ? -1 : 1, c == 3 ? -1 : h, c};
    return al_graph_edge_index(L, H, &ed);
}

/* Every edge kept is the clean run; none, the corrupted run (the final
 * residual is copied from it: the same bits). KL from the clean run is 0
 * and > 0. */
static void check_ends(int L) {
    al_model m;
    al_pairs t;
    al_patch_opts po;
    al_err e;
    rand_setup(&m, &t, L, &po);
    double mc, mr, kl, mv;
    CHECK_OK(al_patch_eval(&m, &t, &po, NULL, NULL, NULL, NULL, NULL, &mc, &mr, &e), &e);
    unsigned char *k = all_kept(L, 3, 1);
    CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
    CHECKF(kl == 0.0 && fabs(mv - mc) < 1e-9, "L %d all kept: kl %g, M %.9g vs clean %.9g", L, kl,
           mv, mc);
    memset(k, 0, (size_t)al_graph_n_edges(L, 3));
    CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
    CHECKF(kl > 1e-3 && fabs(mv - mr) < 1e-9, "L %d none kept: kl %g, M %.9g vs corrupted %.9g", L,
           kl, mv, mr);
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
    al_pairs t;
    al_patch_opts po;
    al_err e;
    rand_setup(&m, &t, L, &po);
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
                int idx = path_edge(L, H, c, s, h);
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

/* The same two checks on shortformer models (W_pos in q and k only, not
 * in the residual stream): circuits, path patching and the ends agree. */
TEST(discover_eval_shortformer) {
    g_pos_type = AL_POS_SHORTFORMER;
    check_ends(1);
    check_ends(2);
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
    al_pairs t;
    al_patch_opts po;
    al_err e;
    rand_setup(&m, &t, 2, &po);
    const int L = 2, H = 3, T = t.T;
    unsigned char *k = all_kept(L, H, 1);
    unsigned char qm[2 * 3 * 3 * 32], zm[2 * 3 * 32];
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < H; h++)
            for (int c = 0; c < 3; c++) {
                memset(qm, 0, sizeof qm);
                memset(qm + (((size_t)l * 3 + c) * H + h) * T, 1, T);
                double want, kl, mv;
                CHECK_OK(al_patch_eval(&m, &t, &po, NULL, NULL, qm, NULL, &want, NULL, NULL, &e),
                         &e);
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
        CHECKF(fabs(mv - want) < 1e-5, "0.%d out: circuit %.9g, patching %.9g", h, mv, want);
        /* and its inputs no longer matter: the removed edges carry the
         * corrupted value whatever the circuit's head computes */
        for (int c = 0; c < 3; c++) {
            al_edge in = {AL_EDGE_INPUT, 0, 0, h, c};
            k[al_graph_edge_index(L, H, &in)] = 0;
        }
        CHECK_OK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e), &e);
        CHECKF(fabs(mv - want) < 1e-5, "0.%d out and in: circuit %.9g, patching %.9g", h, mv, want);
        memset(k, 1, (size_t)al_graph_n_edges(L, H));
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
    /* every pair holds the whole circuit, so every bootstrap resample of
     * the pairs finds the same four edges: Jaccard 1, inclusion 1 or 0 */
    al_discover_stability st;
    CHECK_OK(al_discover_stability_run(&m, &t, &o, r.kept, 4, 7, &st, &e), &e);
    CHECK(st.n == 4 && st.n_edges == r.n_edges && st.jaccard_mean == 1 && st.jaccard_min == 1 &&
          st.jaccard_sd == 0);
    for (int k = 0; k < r.n_edges; k++) CHECK(st.freq[k] == r.kept[k]);
    al_discover_stability_free(&st);
    CHECK(al_discover_stability_run(&m, &t, &o, r.kept, 0, 7, &st, &e) == -1 && st.freq == NULL);
    /* the pairs picked: the same order is the same task; a repeat is a copy */
    al_pairs p2;
    int same[16], rep[2] = {3, 3};
    for (int i = 0; i < 16; i++) same[i] = i;
    CHECK(t.N == 16);
    CHECK_OK(al_pairs_pick(&t, same, 16, &p2, &e), &e);
    CHECK(al_pairs_hash(&p2) == al_pairs_hash(&t));
    al_pairs_free(&p2);
    CHECK_OK(al_pairs_pick(&t, rep, 2, &p2, &e), &e);
    CHECK(p2.N == 2 && p2.n_items % 2 == 0 && p2.items[0].pair == 0 &&
          p2.items[p2.n_items - 1].pair == 1 &&
          !memcmp(p2.clean, p2.clean + p2.T, sizeof(int) * p2.T) &&
          !memcmp(p2.clean, t.clean + 3 * t.T, sizeof(int) * t.T));
    al_pairs_free(&p2);
    rep[1] = 16;
    CHECK(al_pairs_pick(&t, rep, 2, &p2, &e) == -1 && strstr(e.msg, "index 16"));
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

/* EAP on the planted circuit: exactly the four planted edges have a
 * nonzero estimate (every other edge carries the same value in both runs
 * or is zero through the weights, as for ACDC above), so they are the
 * top four and the circuit, at faithfulness 1. The ranking among them is
 * bent by saturation: the log-prob metric is flat where p(answer) ~ 1,
 * so embed -> 1.0.v, whose removal costs the most (ACDC: KL ~ 14),
 * gets the smallest estimate of the four -- a first-order estimate ranks,
 * it does not measure. */
TEST(discover_eap_planted) {
    al_model m;
    planted_model(&m);
    al_pairs t;
    planted_task(&t, &m);
    al_discover_opts o = al_discover_opts_defaults();
    o.method = "eap";
    al_discover_result r;
    al_err e;
    CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
    int want[4] = {edge_of(AL_EDGE_INPUT, 0, 0, 0, 2), edge_of(AL_EDGE_COMPOSITION, 2, 1, 0, 1),
                   edge_of(AL_EDGE_INPUT, 0, 1, 0, 2), edge_of(AL_EDGE_OUTPUT, 2 + PH, -1, -1, 3)};
    for (int k = 0; k < r.n_edges; k++) {
        int w = k == want[0] || k == want[1] || k == want[2] || k == want[3];
        char nm[64];
        al_graph_edge_name(2, PH, k, nm, sizeof nm);
        CHECKF(w ? r.score[k] > 1e-3 : r.score[k] < 1e-9, "%s: score %g", nm, r.score[k]);
        CHECKF(r.kept[k] == w, "%s: kept %d", nm, r.kept[k]);
    }
    CHECK(r.score[want[2]] < r.score[want[3]] && r.score[want[3]] < r.score[want[0]]);
    CHECKF(r.n_kept == 4 && fabs(r.faithfulness - 1.0) < 1e-4 && r.evals == 5,
           "kept %d faithfulness %g evaluations %ld", r.n_kept, r.faithfulness, r.evals);
    al_discover_result_free(&r);
    /* recover 0: the empty circuit already reaches it */
    o.recover = 0;
    CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
    CHECK(r.n_kept == 0 && r.evals == 1 && fabs(r.faithfulness) < 1e-12);
    al_discover_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* ------------------------------------------------ a random model */

/* Attribution patching (noising) and EAP on task t of m into ap and r
 * (the caller frees both), every edge the two share compared: EAP's
 * |estimate| against attribution patching's, which is normalised by
 * M_clean − M_corr, within tol relative (of 1e-3 + the value). Returns
 * the worst relative difference; n: edges compared. */
static double eap_vs_attrpatch(al_model *m, const al_pairs *t, al_attrpatch_result *ap,
                               al_discover_result *r, double tol) {
    al_err e;
    al_patch_opts po = al_patch_opts_defaults();
    po.batch = 3, po.direction = "noise";
    CHECK_OK(al_attrpatch_run(m, t, &po, 0, ap, &e), &e);
    al_discover_opts o = al_discover_opts_defaults();
    o.method = "eap", o.batch = 3;
    CHECK_OK(al_discover_run(m, t, &o, r, &e), &e);
    const int H = m->cfg.n_heads, ns = ap->n_senders;
    const double scale = fabs(ap->m_clean - ap->m_corr);
    double worst = 0;
    for (int c = 0; c < 4; c++)
        for (int s = 0; s < ns; s++)
            for (int h = 0; h < H; h++) {
                double a = ap->edge[((size_t)c * ns + s) * H + h];
                if (isnan(a)) continue;
                int k = path_edge(2, H, c, s, h);
                double err = fabs(r->score[k] - fabs(a) * scale) / (1e-3 + fabs(a) * scale);
                worst = fmax(worst, err);
                char nm[64];
                CHECKF(err < tol, "%s: %g vs attrpatch %g",
                       al_graph_edge_name(2, H, k, nm, sizeof nm), r->score[k], fabs(a) * scale);
            }
    return worst;
}

/* EAP's estimates of the edges attrpatch.h also has are its estimates
 * (noising; attrpatch normalises them by M_clean − M_corr), and a
 * last-layer head's logits edge is its head-patching estimate. */
TEST(discover_eap_matches_attrpatch) {
    al_model m;
    al_pairs t;
    al_patch_opts po;
    rand_setup(&m, &t, 2, &po);
    al_attrpatch_result ap;
    al_discover_result r;
    eap_vs_attrpatch(&m, &t, &ap, &r, 1e-5);
    const int H = 3;
    double scale = fabs(ap.m_clean - ap.m_corr);
    CHECK_NEAR(r.m_clean, ap.m_clean, 1e-6);
    CHECK_NEAR(r.m_corr, ap.m_corr, 1e-6);
    for (int h = 0; h < H; h++) {
        al_edge ed = {AL_EDGE_OUTPUT, 2 + H + h, -1, -1, 3};
        int k = al_graph_edge_index(2, H, &ed);
        CHECK_NEAR(r.score[k], fabs(ap.head[1 * H + h]) * scale, 1e-5);
    }
    CHECK(r.faithfulness >= 0.9);
    al_discover_result_free(&r);
    al_attrpatch_result_free(&ap);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* The edges into layer 0, which attribution patching has not: without
 * LayerNorm q, k and v are linear in the residual, so EAP's C-wide
 * estimate (Δembed · ∂M/∂q · W_Qᵀ, edge_grad.h) must equal the same
 * first-order term written in q-space, Σ (q_corr − q_clean) · ∂M/∂q, with
 * q of both runs from full forwards and ∂M/∂q from one backward of the
 * whole task's mean. */
TEST(discover_eap_layer0_inputs_in_q_space) {
    al_model m;
    al_pairs t;
    al_patch_opts po;
    al_err e;
    rand_setup(&m, &t, 2, &po);
    al_discover_opts o = al_discover_opts_defaults();
    o.method = "eap", o.batch = 3;
    al_discover_result r;
    CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
    const int H = m.cfg.n_heads, D = m.cfg.d_head, C = m.cfg.d_model, L = 2;
    const size_t BT = (size_t)t.N * t.T, HD = (size_t)H * D, Q = BT * 3 * HD;
    float *qc = malloc(sizeof(float) * 2 * Q), *qr = qc + Q;
    float *dx = malloc(sizeof(float) * ((L + 1) * BT * C + L * BT * HD + L * Q));
    float *dzg = dx + (L + 1) * BT * C, *dqkv = dzg + L * BT * HD;
    CHECK_OK(al_model_forward(&m, t.corr, NULL, t.N, t.T, &e), &e);
    memcpy(qr, m.qkv, sizeof(float) * Q);
    CHECK_OK(al_model_forward(&m, t.clean, NULL, t.N, t.T, &e), &e);
    memcpy(qc, m.qkv, sizeof(float) * Q);
    CHECK_OK(al_attrpatch_grad(&m, &t, 0, 0, t.N, NULL, dx, dzg, dqkv, &e), &e);
    for (int h = 0; h < H; h++)
        for (int ch = 0; ch < 3; ch++) {
            double s = 0;
            for (size_t i = 0; i < BT; i++)
                for (int d = 0; d < D; d++) {
                    size_t j = i * 3 * HD + (size_t)ch * HD + (size_t)h * D + d;
                    s += ((double)qr[j] - qc[j]) * dqkv[j];
                }
            al_edge ed = {AL_EDGE_INPUT, 0, 0, h, ch};
            double est = r.score[al_graph_edge_index(L, H, &ed)];
            CHECKF(fabs(est - fabs(s)) <= 1e-5 * (1e-3 + fabs(s)),
                   "head 0.%d channel %d: EAP %g, "
                   "q-space %g",
                   h, ch, est, fabs(s));
        }
    free(qc);
    free(dx);
    al_discover_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* On LayerNorm models (LN and LNPre with every bias, standard and
 * shortformer positions) EAP's estimates of the edges attribution
 * patching also has are its estimates: both are edge_grad.h's, and
 * attribution patching's are checked against central differences
 * (test_attrpatch_ln.c), so this holds EAP's batching and edge indexing
 * to them. The edges into layer 0, which attribution patching has not,
 * are only checked to be finite and not all zero here (test_ln_circuit.c's
 * planted model checks that EAP finds its circuit). */
TEST(discover_eap_layernorm_matches_attrpatch) {
    const int cases[4][2] = {{AL_NORM_LN, AL_POS_STANDARD},
                             {AL_NORM_LNPRE, AL_POS_STANDARD},
                             {AL_NORM_LN, AL_POS_SHORTFORMER},
                             {AL_NORM_LNPRE, AL_POS_SHORTFORMER}};
    for (int ci = 0; ci < 4; ci++) {
        al_model m;
        al_pairs t;
        al_err e;
        ln_model(&m, 2, cases[ci][0], AL_BIAS_ALL, cases[ci][1], 31 + (uint64_t)ci);
        task(&t, &m, RR, RN, &e);
        al_attrpatch_result ap;
        al_discover_result r;
        double worst = eap_vs_attrpatch(&m, &t, &ap, &r, 1e-4);
        const int H = m.cfg.n_heads;
        /* every edge has a finite estimate, and the layer-0 inputs are not all 0 */
        double l0 = 0;
        for (int k = 0; k < r.n_edges; k++) CHECK(isfinite(r.score[k]));
        for (int h = 0; h < H; h++)
            for (int ch = 0; ch < 3; ch++) {
                al_edge ed = {AL_EDGE_INPUT, 0, 0, h, ch};
                l0 += r.score[al_graph_edge_index(2, H, &ed)];
            }
        CHECK(l0 > 0);
        printf("    case %d: the edges attribution patching has, worst relative %.2e\n", ci, worst);
        al_discover_result_free(&r);
        al_attrpatch_result_free(&ap);
        al_pairs_free(&t);
        al_model_free(&m);
    }
}

/* ACDC on a random model: tau = 0 keeps more than a moderate tau; the
 * scores are the measured growths; a second run (and one at batch 1's
 * caches being separate) repeats bit for bit; m's patch spec and gates
 * are as before. */
TEST(discover_acdc_tau_and_repeats) {
    al_model m;
    al_pairs t;
    al_patch_opts po;
    al_err e;
    rand_setup(&m, &t, 2, &po);
    const float *mine[64] = {NULL}; /* the caller's (no-op) hook: must stay */
    CHECK_OK(al_zrep_hooks_add(&m, mine, &e), &e);
    float g0 = m.gates[0];
    al_discover_opts o = al_discover_opts_defaults();
    o.batch = 3, o.tau = 0.02;
    al_discover_result r1, r2, r0;
    CHECK_OK(al_discover_run(&m, &t, &o, &r1, &e), &e);
    CHECK_OK(al_discover_run(&m, &t, &o, &r2, &e), &e);
    CHECK(m.hooks.n == 1 && m.hooks.h[0].ctx == (void *)mine && m.gates[0] == g0);
    CHECK(r1.n_kept == r2.n_kept && r1.evals == r2.evals);
    CHECK(!memcmp(r1.kept, r2.kept, (size_t)r1.n_edges));
    CHECK(!memcmp(r1.score, r2.score, sizeof(double) * r1.n_edges));
    CHECK(!memcmp(&r1.kl_circuit, &r2.kl_circuit, sizeof(double)) &&
          !memcmp(&r1.m_circuit, &r2.m_circuit, sizeof(double)));
    /* the reported circuit is al_circuit_eval's */
    double kl, mv;
    CHECK_OK(al_circuit_eval(&m, &t, r1.kept, 3, &kl, &mv, &e), &e);
    CHECK(kl == r1.kl_circuit && mv == r1.m_circuit);
    CHECKF(r1.kl_circuit <= 0.02 * r1.n_edges && r1.n_kept > 0 && r1.n_kept < r1.n_edges,
           "kept %d of %d, kl %g", r1.n_kept, r1.n_edges, r1.kl_circuit);
    /* every edge tried was kept iff its growth exceeded tau */
    for (int k = 0; k < r1.n_edges; k++)
        if (!isnan(r1.score[k])) CHECK(r1.kept[k] == (r1.score[k] > o.tau));
    o.tau = 0;
    CHECK_OK(al_discover_run(&m, &t, &o, &r0, &e), &e);
    CHECKF(r0.n_kept > r1.n_kept && r0.kl_circuit <= r1.kl_circuit + 1e-12,
           "tau 0 kept %d (kl %g), tau 0.02 kept %d (kl %g)", r0.n_kept, r0.kl_circuit, r1.n_kept,
           r1.kl_circuit);
    /* EAP repeats too */
    al_discover_result_free(&r0);
    al_discover_result_free(&r2);
    o.method = "eap";
    CHECK_OK(al_discover_run(&m, &t, &o, &r0, &e), &e);
    CHECK_OK(al_discover_run(&m, &t, &o, &r2, &e), &e);
    CHECK(!memcmp(r0.score, r2.score, sizeof(double) * r0.n_edges) &&
          !memcmp(r0.kept, r2.kept, (size_t)r0.n_edges) && r0.faithfulness >= 0.9);
    al_discover_result_free(&r0);
    al_discover_result_free(&r1);
    al_discover_result_free(&r2);
    al_hook_clear(&m);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* The reference implementation's choices (--acdc-order latest-first,
 * --acdc-remove lt). The first edge ACDC tries is measured against the
 * whole model, so its score is exactly KL(all but that edge) − KL(all):
 * embed -> logits in index order, the last head -> logits in reverse
 * order. Under "lt" an edge whose removal changes nothing (a pos edge,
 * growth exactly 0) stays at tau 0; under "le" it goes. The planted
 * circuit is found under every combination. */
TEST(discover_acdc_reference_options) {
    al_model m;
    al_pairs t;
    al_patch_opts po;
    al_err e;
    rand_setup(&m, &t, 2, &po);
    const int L = 2, H = m.cfg.n_heads;
    int n = al_graph_n_edges(L, H);
    unsigned char *all = malloc((size_t)n);
    memset(all, 1, (size_t)n);
    double kl_all, kl, mv;
    CHECK_OK(al_circuit_eval(&m, &t, all, 3, &kl_all, &mv, &e), &e);
    al_edge first_idx = {AL_EDGE_OUTPUT, 0, -1, -1, 3},
            first_rev = {AL_EDGE_OUTPUT, 1 + L * H, -1, -1, 3};
    int ki = al_graph_edge_index(L, H, &first_idx), kr = al_graph_edge_index(L, H, &first_rev);
    al_discover_opts o = al_discover_opts_defaults();
    o.batch = 3, o.tau = 0.02;
    al_discover_result r;
    for (int rev = 0; rev < 2; rev++) {
        o.order = rev ? "latest-first" : "embed-first";
        int k = rev ? kr : ki;
        all[k] = 0;
        CHECK_OK(al_circuit_eval(&m, &t, all, 3, &kl, &mv, &e), &e);
        all[k] = 1;
        CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
        CHECKF(fabs(r.score[k] - (kl - kl_all)) < 1e-12, "%s: first edge's score %.12g, want %.12g",
               o.order, r.score[k], kl - kl_all);
        al_discover_result_free(&r);
    }
    /* the removal rule at tau 0 */
    o.tau = 0, o.order = "embed-first";
    for (int lt = 0; lt < 2; lt++) {
        o.remove_if = lt ? "lt" : "le";
        CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
        int zero = 0;
        for (int k = 0; k < r.n_edges; k++) {
            if (isnan(r.score[k])) continue;
            zero += r.score[k] == 0.0;
            CHECKF(r.kept[k] == (lt ? r.score[k] >= 0 : r.score[k] > 0),
                   "%s: edge %d score %g kept %d", o.remove_if, k, r.score[k], r.kept[k]);
        }
        CHECK(zero > 0); /* the pos edges */
        al_discover_result_free(&r);
    }
    o.remove_if = "bogus";
    CHECK(al_discover_run(&m, &t, &o, &r, &e) != 0 && strstr(e.msg, "le, lt"));
    o.remove_if = "le", o.order = "first";
    CHECK(al_discover_run(&m, &t, &o, &r, &e) != 0 && strstr(e.msg, "latest-first"));
    free(all);
    al_pairs_free(&t);
    al_model_free(&m);
    /* the planted circuit, whatever the order and rule */
    planted_model(&m);
    planted_task(&t, &m);
    o = al_discover_opts_defaults();
    o.tau = 0.01;
    for (int c = 0; c < 4; c++) {
        o.order = c & 1 ? "latest-first" : "embed-first";
        o.remove_if = c & 2 ? "lt" : "le";
        CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
        int want[4] = {edge_of(AL_EDGE_INPUT, 0, 0, 0, 2), edge_of(AL_EDGE_COMPOSITION, 2, 1, 0, 1),
                       edge_of(AL_EDGE_INPUT, 0, 1, 0, 2),
                       edge_of(AL_EDGE_OUTPUT, 2 + PH, -1, -1, 3)};
        CHECKF(r.n_kept == 4, "%s/%s: kept %d", o.order, o.remove_if, r.n_kept);
        for (int i = 0; i < 4; i++) CHECK(r.kept[want[i]]);
        al_discover_result_free(&r);
    }
    al_pairs_free(&t);
    al_model_free(&m);
}

/* A 1-layer model: inputs into its heads and the logits' edges only;
 * both methods run, and the circuit they return evaluates to what they
 * report. */
TEST(discover_one_layer) {
    al_model m;
    al_pairs t;
    al_patch_opts po;
    al_err e;
    rand_setup(&m, &t, 1, &po);
    const char *methods[] = {"acdc", "eap"};
    for (int i = 0; i < 2; i++) {
        al_discover_opts o = al_discover_opts_defaults();
        o.method = methods[i], o.batch = 3;
        al_discover_result r;
        CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
        CHECK(r.L == 1 && r.n_edges == 6 * 3 + 2 + 3);
        double kl, mv;
        CHECK_OK(al_circuit_eval(&m, &t, r.kept, 3, &kl, &mv, &e), &e);
        CHECKF(kl == r.kl_circuit && mv == r.m_circuit, "%s", methods[i]);
        CHECKF(r.n_kept > 0 && r.faithfulness > 0.5, "%s: kept %d faithfulness %g", methods[i],
               r.n_kept, r.faithfulness);
        al_discover_result_free(&r);
    }
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(discover_refusals) {
    al_model m;
    al_pairs t;
    al_patch_opts po;
    al_err e;
    rand_setup(&m, &t, 2, &po);
    struct {
        const char *method, *metric;
        double tau, recover;
        int batch;
        const char *msg;
    } bad[] = {
        {"greedy", "kl", 0.01, 0.9, 8, "method"}, {NULL, "kl", 0.01, 0.9, 8, "method"},
        {"acdc", "loss", 0.01, 0.9, 8, "metric"}, {"acdc", NULL, 0.01, 0.9, 8, "metric"},
        {"acdc", "kl", -0.01, 0.9, 8, "tau"},     {"acdc", "kl", NAN, 0.9, 8, "tau"},
        {"acdc", "kl", INFINITY, 0.9, 8, "tau"},  {"eap", "kl", 0.01, -0.1, 8, "recover"},
        {"eap", "kl", 0.01, 1.5, 8, "recover"},   {"eap", "kl", 0.01, NAN, 8, "recover"},
        {"acdc", "kl", 0.01, 0.9, 0, "batch"},    {"acdc", "kl", 0.01, 0.9, 100001, "batch"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        al_discover_opts o = al_discover_opts_defaults();
        o.method = bad[i].method, o.metric = bad[i].metric, o.tau = bad[i].tau;
        o.recover = bad[i].recover, o.batch = bad[i].batch;
        al_discover_result r;
        memset(&r, 0xab, sizeof r);
        e.msg[0] = 0;
        CHECKF(al_discover_opts_check(&o, &e) == -1 && strstr(e.msg, bad[i].msg), "case %zu: %s", i,
               e.msg);
        CHECKF(al_discover_run(&m, &t, &o, &r, &e) == -1 && strstr(e.msg, bad[i].msg),
               "case %zu: %s", i, e.msg);
        CHECKF(t_all_zero(&r, sizeof r), "case %zu: result not zeroed", i);
        CHECK(!strchr(e.msg, '\n'));
    }
    al_discover_opts o = al_discover_opts_defaults();
    CHECK_OK(al_discover_opts_check(&o, &e), &e);
    CHECK(!strcmp(o.method, "acdc") && !strcmp(o.metric, "kl") && o.tau == 0.01 &&
          o.recover == 0.9 && o.batch == 8 && !o.progress && !o.stop);
    /* interrupted: both methods, before any work is kept */
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    const char *methods[] = {"acdc", "eap"};
    for (int i = 0; i < 2; i++) {
        o.method = methods[i];
        al_discover_result r;
        memset(&r, 0xab, sizeof r);
        CHECK(al_discover_run(&m, &t, &o, &r, &e) == -1 && strstr(e.msg, "interrupted"));
        CHECK(t_all_zero(&r, sizeof r));
    }
    /* a circuit's edge set is required; the batch is checked */
    double kl = 7, mv = 7;
    CHECK(al_circuit_eval(&m, &t, NULL, 3, &kl, &mv, &e) == -1 && kl == 7 && mv == 7);
    unsigned char *k = all_kept(2, 3, 1);
    CHECK(al_circuit_eval(&m, &t, k, 0, &kl, &mv, &e) == -1 && strstr(e.msg, "batch"));
    /* a task that does not fit the model */
    t.items[0].answer = 20;
    CHECK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e) == -1 && kl == 7);
    al_discover_result r;
    memset(&r, 0xab, sizeof r);
    o.stop = NULL;
    CHECK(al_discover_run(&m, &t, &o, &r, &e) == -1 && t_all_zero(&r, sizeof r));
    t.items[0].answer = 1;
    al_pairs_free(&t);
    al_model_free(&m);
    /* deeper than the graph */
    rand_model(&m, AL_GRAPH_MAX_LAYERS + 1, 0, 20);
    task(&t, &m, RR, RN, &e);
    memset(&r, 0xab, sizeof r);
    CHECK(al_discover_run(&m, &t, &o, &r, &e) == -1 && strstr(e.msg, "1 to 16 layers") &&
          t_all_zero(&r, sizeof r));
    CHECK(al_circuit_eval(&m, &t, k, 3, &kl, &mv, &e) == -1 && strstr(e.msg, "1 to 16 layers"));
    free(k);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* ------------------------------------------------------------- speed */

/* ACDC's time on a model of the demo's size (2 layers, d_model 256, 8
 * heads of 32, n_ctx 128, vocab 2048; random, W_U scaled for logits of
 * order 1) with the induction task of R = 50 and 8 pairs: printed, not
 * asserted (make bench times discovery at this shape). The
 * random model's heads all matter a little, so ACDC visits every
 * receiver: every edge but the 49 pos edges is evaluated. */
TEST(discover_speed) {
    if (T_SAN) t_skip("a time at the demo's shape: the plain build's (ASan times nothing)");
    al_model m;
    al_config c = al_config_default();
    c.n_layers = 2, c.d_model = 256, c.n_heads = 8, c.d_head = 32, c.n_ctx = 128;
    c.d_vocab = 2048, c.seed = 5;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    for (size_t i = 0; i < m.param_size[AL_P_WU]; i++) m.p[AL_P_WU][i] *= (float)c.d_model;
    al_pairs t;
    al_patch_opts po = al_patch_opts_defaults();
    po.probe_r = 50, po.probe_n = 8;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &po, &e), &e);
    const char *methods[] = {"acdc", "eap"};
    for (int i = 0; i < 2; i++) {
        al_discover_opts o = al_discover_opts_defaults();
        o.method = methods[i];
        al_discover_result r;
        CHECK_OK(al_discover_run(&m, &t, &o, &r, &e), &e);
        printf("    %s: %.2f s, %ld evaluations, %d of %d edges kept, kl %.4g, "
               "faithfulness %.3f\n",
               o.method, r.seconds, r.evals, r.n_kept, r.n_edges, r.kl_circuit, r.faithfulness);
        al_discover_result_free(&r);
    }
    al_pairs_free(&t);
    al_model_free(&m);
}
