/* test_circuit_run.c -- the engine running a circuit (model.h,
 * al_circuit_spec) against independent computations: every edge kept is
 * the plain forward bit for bit; none kept with a corrupted fill is the
 * corrupted run; random circuits give the KL and metric of circuit
 * discovery's own incremental evaluation (discover.c, written apart);
 * a resampled fill is a corrupted fill on the rotated batch; a mean fill
 * whose means are this run's own values changes nothing; refusals. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/discover.h"
#include "attnlab/graph.h"
#include "attnlab/hooks.h"
#include "attnlab/model.h"
#include "randmodel.h"
#include "test.h"

static unsigned char *kept_all(int L, int H, int v) {
    int n = al_graph_n_edges(L, H);
    unsigned char *k = malloc((size_t)n);
    memset(k, v, (size_t)n);
    return k;
}

/* probs of a forward of m on in (B, T), copied. */
static float *probs_of(al_model *m, const int *in, int B, int T) {
    al_err e;
    CHECK_OK(al_model_forward(m, in, NULL, B, T, &e), &e);
    size_t n = (size_t)B * T * m->cfg.d_vocab;
    float *p = malloc(sizeof(float) * n);
    memcpy(p, m->probs, sizeof(float) * n);
    return p;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static int g_pos_type = AL_POS_STANDARD; /* circuit_run_shortformer sets it */

/* rand_model, with gates that stay below 1.2 from 3 layers on (its
 * gates grow with the head's index: 3.7 at 4 layers saturates the
 * softmax, so the runs would not differ). */
static void rand_any(al_model *m, int L) {
    rand_model(m, L, 0, 20);
    for (int k = 0; L >= 3 && k < L * m->cfg.n_heads; k++)
        m->gates[k] = 0.5f + 0.2f * (float)(k % 4);
}

/* The circuit attached to a test's model (hooks; graph.h): sp, or none. */
static al_circuit_exec g_cx;
static void use(al_model *m, const al_circuit_spec *sp) {
    al_circuit_detach(&g_cx);
    al_err e;
    if (sp && al_circuit_attach(&g_cx, m, sp, &e)) t_fail(__FILE__, __LINE__, "%s", e.msg);
}

static void ends(int L) {
    al_model m;
    al_pairs t;
    al_err e;
    rand_any(&m, L);
    m.cfg.pos_type = g_pos_type;
    task(&t, &m, 5, 6, &e);
    const int B = t.N, T = t.T, H = m.cfg.n_heads;
    const size_t n = (size_t)B * T * m.cfg.d_vocab;
    float *clean = probs_of(&m, t.clean, B, T), *corr = probs_of(&m, t.corr, B, T);
    unsigned char *k = kept_all(L, H, 1);
    al_circuit_spec sp = {.kept = k, .fill = AL_FILL_CORRUPTED, .corr = t.corr};
    use(&m, &sp);
    float *all = probs_of(&m, t.clean, B, T);
    CHECKF(memcmp(all, clean, sizeof(float) * n) == 0,
           "L %d: every edge kept is not the plain "
           "forward bit for bit (max diff %g)",
           L, max_diff(all, clean, n));
    memset(k, 0, (size_t)al_graph_n_edges(L, H));
    float *none = probs_of(&m, t.clean, B, T);
    CHECKF(max_diff(none, corr, n) < 1e-5, "L %d: no edge kept vs the corrupted run: %g", L,
           max_diff(none, corr, n));
    CHECKF(max_diff(clean, corr, n) > 1e-2, "L %d: the runs should differ", L);
    /* a circuit run cannot be differentiated */
    CHECK(al_model_backward(&m, &e) == -1);
    use(&m, NULL);
    free(clean), free(corr), free(all), free(none), free(k);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(circuit_run_all_and_none) {
    ends(1);
    ends(2);
    ends(3);
    ends(4);
}

/* KL(clean || circuit) and the task's metric at the items, from probs. */
static void item_metrics(const al_pairs *t, const float *pc, const float *pk, int V, double *kl,
                         double *mv) {
    double ks = 0.0, ms = 0.0;
    for (int i = 0; i < t->n_items; i++) {
        const al_pair_item *it = &t->items[i];
        size_t r = ((size_t)it->pair * t->T + it->pos) * V;
        for (int v = 0; v < V; v++)
            if (pc[r + v] > 0) ks += pc[r + v] * (log(pc[r + v]) - log(pk[r + v]));
        ms += t->logit_diff ? log(pk[r + it->answer]) - log(pk[r + it->wrong])
                            : log(pk[r + it->answer]);
    }
    *kl = ks / t->n_items, *mv = ms / t->n_items;
}

static void versus_discover(int L) {
    al_model m;
    al_pairs t;
    al_err e;
    rand_any(&m, L);
    m.cfg.pos_type = g_pos_type;
    task(&t, &m, 5, 6, &e);
    if (L == 2) as_logit_diff(&t, 20);
    const int B = t.N, T = t.T, H = m.cfg.n_heads, V = m.cfg.d_vocab;
    const int n = al_graph_n_edges(L, H);
    float *clean = probs_of(&m, t.clean, B, T);
    unsigned char *k = kept_all(L, H, 1);
    al_circuit_spec sp = {.kept = k, .fill = AL_FILL_CORRUPTED, .corr = t.corr};
    al_rng rng;
    al_rng_seed(&rng, 7 + (uint64_t)L);
    double worst_kl = 0.0, worst_m = 0.0;
    /* deeper models: one trial per layer l with edges removed only into
     * layer l's channels and the logits (ACDC's usual state: the
     * incremental forward alone), and one per l with the logits edges of
     * later heads removed too (the layers between recomputed in full) */
    const int n_trials = 12 + (L >= 3 ? 2 * L : 0);
    for (int trial = 0; trial < n_trials; trial++) {
        /* keep each edge with probability 1/2 (trial 0: only composition
         * and output edges removed, the paths discovery cares most about) */
        for (int i = 0; i < n; i++)
            k[i] = trial == 0 ? i < 6 * L * H : (al_rng_u64(&rng) >> 11) % 2 == 0;
        if (trial >= 12) {
            const int l = (trial - 12) % L, with_out = trial - 12 >= L;
            for (int i = 0; i < n; i++) {
                al_edge ed;
                al_graph_edge(L, H, i, &ed);
                if (ed.recv_layer >= 0 && ed.recv_layer != l) k[i] = 1;
                if (ed.recv_layer < 0 && !with_out) k[i] = 1;
            }
        }
        double kl_d, m_d, kl_e, m_e;
        CHECK_OK(al_circuit_eval(&m, &t, k, 2, &kl_d, &m_d, &e), &e);
        use(&m, &sp);
        float *pk = probs_of(&m, t.clean, B, T);
        use(&m, NULL);
        item_metrics(&t, clean, pk, V, &kl_e, &m_e);
        worst_kl = fmax(worst_kl, fabs(kl_e - kl_d));
        worst_m = fmax(worst_m, fabs(m_e - m_d));
        free(pk);
    }
    CHECKF(worst_kl < 1e-4 && worst_m < 1e-4,
           "L %d: engine circuit vs discovery's evaluation: |ΔKL| %g, |ΔM| %g", L, worst_kl,
           worst_m);
    free(clean), free(k);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(circuit_run_matches_discovery_eval) {
    versus_discover(1);
    versus_discover(2);
}

/* 3 and 4 layers: the hooks' full forward and discovery's incremental
 * evaluation (which recomputes layers apart from the hooks)
 * agree; the ends are the plain and the corrupted run. */
TEST(circuit_run_deep_matches_discovery_eval) {
    versus_discover(3);
    versus_discover(4);
}

/* Shortformer positions (W_pos added to q and k after x·W, the circuit's
 * corrections after that): the ends and discovery's evaluation agree. */
TEST(circuit_run_shortformer) {
    g_pos_type = AL_POS_SHORTFORMER;
    ends(1);
    ends(2);
    ends(3);
    versus_discover(1);
    versus_discover(2);
    versus_discover(3);
}

/* Resampling is the corrupted fill on the batch rotated by one sequence
 * (bit for bit: the same arithmetic); a mean fill with this run's own
 * per-position values (one sequence: its own mean) changes nothing. */
TEST(circuit_run_resample_and_mean) {
    al_model m;
    al_pairs t;
    al_err e;
    rand_model(&m, 2, 1, 20);
    task(&t, &m, 5, 4, &e);
    const int B = t.N, T = t.T, H = m.cfg.n_heads, D = m.cfg.d_head, C = m.cfg.d_model;
    const int n = al_graph_n_edges(2, H);
    const size_t nv = (size_t)B * T * m.cfg.d_vocab;
    unsigned char *k = kept_all(2, H, 0);
    for (int i = 0; i < n; i += 3) k[i] = 1;
    int *rot = malloc(sizeof(int) * (size_t)B * T);
    for (int b = 0; b < B; b++) memcpy(rot + b * T, t.clean + ((b + 1) % B) * T, sizeof(int) * T);
    al_circuit_spec rs = {.kept = k, .fill = AL_FILL_RESAMPLE};
    al_circuit_spec cs = {.kept = k, .fill = AL_FILL_CORRUPTED, .corr = rot};
    use(&m, &rs);
    float *a = probs_of(&m, t.clean, B, T);
    use(&m, &cs);
    float *b = probs_of(&m, t.clean, B, T);
    CHECKF(memcmp(a, b, sizeof(float) * nv) == 0, "resample vs rotated corrupted: %g",
           max_diff(a, b, nv));
    /* one sequence, its own embeddings and zg as the means */
    use(&m, NULL);
    float *plain = probs_of(&m, t.clean, 1, T);
    float *mx = malloc(sizeof(float) * (size_t)T * C), *mz = malloc(sizeof(float) * 2 * T * H * D);
    for (int r = 0; r < T; r++)
        memcpy(mx + r * C, m.p[AL_P_WE] + t.clean[r] * C, sizeof(float) * C);
    memcpy(mz, m.zg, sizeof(float) * T * H * D); /* layer 0, B = 1 */
    memcpy(mz + T * H * D, m.zg + T * H * D, sizeof(float) * T * H * D); /* layer 1 */
    al_circuit_spec ms = {.kept = k,
                          .fill = AL_FILL_MEAN,
                          .mean_x0 = mx,
                          .mean_zg = mz,
                          .mean_T = T};
    use(&m, &ms);
    float *own = probs_of(&m, t.clean, 1, T);
    size_t n1 = (size_t)T * m.cfg.d_vocab;
    CHECKF(max_diff(own, plain, n1) < 1e-5, "mean fill of its own values: %g",
           max_diff(own, plain, n1));
    /* refusals: too short a mean, a resample of one sequence, corrupted ids */
    ms.mean_T = T - 1;
    CHECK(al_model_forward(&m, t.clean, NULL, 1, T, &e) == -1 && strstr(e.msg, "positions"));
    use(&m, &rs);
    CHECK(al_model_forward(&m, t.clean, NULL, 1, T, &e) == -1 && strstr(e.msg, "at least 2"));
    int bad = t.corr[3];
    cs.kept = k, cs.corr = t.corr, t.corr[3] = 20;
    use(&m, &cs);
    CHECK(al_model_forward(&m, t.clean, NULL, B, T, &e) == -1 && strstr(e.msg, "vocabulary"));
    t.corr[3] = bad;
    use(&m, NULL);
    free(a), free(b), free(plain), free(own), free(mx), free(mz), free(rot), free(k);
    al_pairs_free(&t);
    al_model_free(&m);
}

TEST(circuit_run_refuses_deeper_than_graph) {
    al_config c = al_config_default();
    c.n_layers = AL_GRAPH_MAX_LAYERS + 1, c.d_model = 16, c.n_heads = 2, c.d_head = 8, c.n_ctx = 8,
    c.d_vocab = 10;
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    unsigned char k[1] = {1};
    al_circuit_spec sp = {.kept = k, .fill = AL_FILL_RESAMPLE};
    al_circuit_exec cx;
    CHECK(al_circuit_attach(&cx, &m, &sp, &e) == -1 && strstr(e.msg, "1 to 16 layers"));
    CHECK(m.hooks.n == 0);
    al_model_free(&m);
}

/* The memory of corrected channels (al_circuit_memo, 4 layers): along an
 * ACDC-like path (edges into the logits, then layers 3, 2 and 1, then
 * the logits again, removed one at a time, every fourth put back), each circuit's final
 * residual with the batch's memo is the one computed afresh (memo NULL),
 * bit for bit: a reused channel is the same numbers, never a stale one. */
/* More heads than a layer's 64 (the model allows 256): a channel of
 * layer 2 of a 3-layer model with 70 of layer 0's 80 heads removed takes
 * all 70 differences (the gathered senders of one product are not capped),
 * as the hooks' full forward does. */
TEST(circuit_run_deep_many_heads) {
    al_config c = al_config_default();
    c.n_layers = 3, c.d_model = 24, c.n_heads = 80, c.d_head = 2, c.n_ctx = 16, c.d_vocab = 20;
    c.seed = 29;
    al_model m;
    al_pairs t;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    for (size_t i = 0; i < m.param_size[AL_P_WU]; i++) m.p[AL_P_WU][i] *= (float)c.d_model;
    /* heads' outputs of order 1 in the residual despite d_head 2 */
    for (size_t i = 0; i < m.param_size[AL_P_WO]; i++) m.p[AL_P_WO][i] *= 4.0f;
    task(&t, &m, 5, 4, &e);
    const int L = 3, H = c.n_heads, B = t.N, T = t.T, V = c.d_vocab;
    unsigned char *k = kept_all(L, H, 1);
    for (int h0 = 0; h0 < 70; h0++)
        for (int ch = 0; ch < 3; ch++) k[al_graph_k_comp(L, H, h0, 2, 0, ch)] = 0;
    double kl_d, m_d, kl_e, m_e;
    CHECK_OK(al_circuit_eval(&m, &t, k, 2, &kl_d, &m_d, &e), &e);
    al_circuit_spec sp = {.kept = k, .fill = AL_FILL_CORRUPTED, .corr = t.corr};
    float *clean = probs_of(&m, t.clean, B, T);
    use(&m, &sp);
    float *pk = probs_of(&m, t.clean, B, T);
    use(&m, NULL);
    item_metrics(&t, clean, pk, V, &kl_e, &m_e);
    /* KL only: some answer probabilities underflow to 0 in the float
     * reference at these logits, so its log-prob metric is -inf */
    (void)m_e, (void)m_d;
    CHECKF(fabs(kl_e - kl_d) < 1e-4 && kl_e > 1e-3,
           "80 heads, 70 senders removed: hooks KL %g, discovery KL %g", kl_e, kl_d);
    free(clean), free(pk), free(k);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* A hook that writes nothing: with it registered, al_circuit_delta_run
 * takes the hooks' full forward, the incremental evaluation's oracle. */
static int noop_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)a, (void)ctx, (void)e;
    return 0;
}

static double max_rel(const float *a, const float *b, size_t n) {
    double d = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i])), s = fmax(s, fabs(b[i]));
    return d / (s > 0 ? s : 1);
}

/* Circuits as ACDC makes them on m (receivers from the logits back, one
 * edge removed per step, some put back): the incremental evaluation with
 * the batch's memo gives the same bits as without it, and agrees with
 * the hooks' full forward; the memo is used. */
static void memo_case(al_model *m, const char *what) {
    al_pairs t;
    al_err e;
    const int L = m->cfg.n_layers;
    task(&t, m, 5, 4, &e);
    const int B = t.N, T = t.T, H = m->cfg.n_heads, C = m->cfg.d_model;
    const int n = al_graph_n_edges(L, H);
    al_acts cl, co;
    CHECK_OK(al_acts_alloc(&cl, &m->cfg, B, T, &e), &e);
    CHECK_OK(al_acts_alloc(&co, &m->cfg, B, T, &e), &e);
    CHECK_OK(al_model_forward(m, t.clean, NULL, B, T, &e) || al_acts_save(m, &cl, &e), &e);
    CHECK_OK(al_model_forward(m, t.corr, NULL, B, T, &e) || al_acts_save(m, &co, &e), &e);
    al_circuit_delta d;
    al_circuit_memo mm;
    CHECK_OK(al_circuit_delta_init(&d, m, B, T, &e), &e);
    CHECK_OK(al_circuit_memo_init(&mm, &d, B, &e), &e);
    float *embp = malloc(sizeof(float) * (al_circuit_delta_embp_floats(&d, B) + 1));
    al_circuit_delta_embp(&d, m, t.clean, t.corr, B, embp);
    size_t X = (size_t)B * T * C;
    float *a = malloc(sizeof(float) * X), *b = malloc(sizeof(float) * X);
    float *o = malloc(sizeof(float) * X);
    unsigned char *ca = malloc((size_t)B * T), *cb = malloc((size_t)B * T);
    unsigned char *co_ = malloc((size_t)B * T);
    unsigned char *k = kept_all(L, H, 1);
    al_rng rng;
    al_rng_seed(&rng, 99);
    int steps = 0, reused = 0, differ = 0;
    double worst = 0.0;
    /* receivers' layer as ACDC visits them (-1: the logits), then the
     * logits again (removed logits edges with channel edges removed) */
    int order[AL_GRAPH_MAX_LAYERS + 2], no = 0;
    order[no++] = -1;
    for (int l = L - 1; l >= 0; l--) order[no++] = l;
    order[no++] = -1;
    for (int p = 0; p < no; p++)
        for (int i = 0, ph = 0; i < n && ph < 30; i++) {
            al_edge ed;
            al_graph_edge(L, H, i, &ed);
            if (ed.recv_layer != order[p] || (al_rng_u64(&rng) >> 11) % 3) continue;
            k[i] = 0;
            CHECK_OK(al_circuit_delta_run(&d, m, k, &cl, &co, t.clean, t.corr, embp, &mm, a, ca,
                                          &e),
                     &e);
            CHECK_OK(al_circuit_delta_run(&d, m, k, &cl, &co, t.clean, t.corr, embp, NULL, b, cb,
                                          &e),
                     &e);
            differ += memcmp(a, b, sizeof(float) * X) != 0 || memcmp(ca, cb, (size_t)B * T) != 0;
            CHECK_OK(al_hook_add(m, AL_HOOK_RESID_POST, 0, noop_hook, &g_cx, &e), &e);
            CHECK_OK(al_circuit_delta_run(&d, m, k, &cl, &co, t.clean, t.corr, embp, NULL, o, co_,
                                          &e),
                     &e);
            al_hook_remove(m, &g_cx);
            worst = fmax(worst, max_rel(a, o, X));
            reused = (int)mm.hits;
            if (steps % 4 == 3) k[i] = 1;
            steps++, ph++;
        }
    CHECKF(differ == 0 && steps >= 5 * L && reused > 3 * (L - 1),
           "%s: %d of %d circuits differ with the memo (memo used %d times)", what, differ, steps,
           reused);
    CHECKF(worst < 2e-5, "%s: incremental vs the hooks' full forward: %g of the largest value",
           what, worst);
    printf("    %s: %d circuits, memo used %d times, vs hooks %.2g\n", what, steps, reused, worst);
    free(k), free(a), free(b), free(o), free(ca), free(cb), free(co_), free(embp);
    al_circuit_memo_free(&mm);
    al_circuit_delta_free(&d);
    al_acts_free(&cl);
    al_acts_free(&co);
    al_pairs_free(&t);
}

TEST(circuit_delta_memo_matches_fresh) {
    al_model m;
    rand_any(&m, 4);
    memo_case(&m, "4 layers");
    al_model_free(&m);
    rand_any(&m, 2);
    memo_case(&m, "2 layers");
    al_model_free(&m);
}

/* The same under LayerNorm, where a channel is formed C-wide before ln1
 * (circuit.c, ln_channel): 1 to 4 layers, LN and LNPre, biases and
 * shortformer positions. */
TEST(circuit_delta_layernorm_matches_hooks) {
    static const struct {
        int L, norm, pos;
        unsigned biases;
    } cs[] = {
        {1, AL_NORM_LN, AL_POS_STANDARD, AL_BIAS_ALL},
        {2, AL_NORM_LN, AL_POS_SHORTFORMER, AL_BIAS_ALL},
        {3, AL_NORM_LNPRE, AL_POS_STANDARD, AL_BIAS_Q | AL_BIAS_O},
        {4, AL_NORM_LN, AL_POS_SHORTFORMER, AL_BIAS_K | AL_BIAS_V | AL_BIAS_U},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        al_model m;
        ln_model(&m, cs[i].L, cs[i].norm, cs[i].biases, cs[i].pos, 40 + i);
        char what[64];
        snprintf(what, sizeof what, "%d layers, %s, %s", cs[i].L,
                 cs[i].norm == AL_NORM_LN ? "LN" : "LNPre",
                 cs[i].pos == AL_POS_SHORTFORMER ? "shortformer" : "standard");
        memo_case(&m, what);
        al_model_free(&m);
    }
}

/* ACDC with the incremental evaluation and with every evaluation the
 * hooks' full forward (a hook that writes nothing is registered) keeps
 * the same edges, with the circuit's metric within 1e-5 of the clean −
 * corrupted gap and its KL within 1e-6, with and without LayerNorm. */
TEST(circuit_delta_acdc_matches_hooks) {
    for (int v = 0; v < 3; v++) {
        al_model m;
        if (v == 0)
            rand_any(&m, 2);
        else
            ln_model(&m, v + 1, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 60 + v);
        al_pairs t;
        al_err e;
        task(&t, &m, 5, 6, &e);
        al_discover_opts o = al_discover_opts_defaults();
        o.tau = v ? 0.002 : 0.02;
        al_discover_result r[2];
        CHECK_OK(al_discover_run(&m, &t, &o, &r[0], &e), &e);
        CHECK_OK(al_hook_add(&m, AL_HOOK_RESID_POST, 0, noop_hook, &g_cx, &e), &e);
        CHECK_OK(al_discover_run(&m, &t, &o, &r[1], &e), &e);
        al_hook_remove(&m, &g_cx);
        int same = r[0].n_edges == r[1].n_edges;
        for (int k = 0; same && k < r[0].n_edges; k++) same = r[0].kept[k] == r[1].kept[k];
        double dm = fabs(r[0].m_circuit - r[1].m_circuit) / fabs(r[0].m_clean - r[0].m_corr);
        CHECKF(same && dm < 1e-5 && fabs(r[0].kl_circuit - r[1].kl_circuit) < 1e-6,
               "case %d: %d vs %d edges kept, faithfulness %.9f vs %.9f, KL %.9g vs %.9g", v,
               r[0].n_kept, r[1].n_kept, r[0].faithfulness, r[1].faithfulness, r[0].kl_circuit,
               r[1].kl_circuit);
        CHECKF(r[0].n_kept > 0 && r[0].n_kept < r[0].n_edges, "case %d: %d of %d kept", v,
               r[0].n_kept, r[0].n_edges);
        printf("    case %d: %d of %d edges kept by both, faithfulness %.6f\n", v, r[0].n_kept,
               r[0].n_edges, r[0].faithfulness);
        al_discover_result_free(&r[0]);
        al_discover_result_free(&r[1]);
        al_pairs_free(&t);
        al_model_free(&m);
    }
}

/* al_model_unembed_own (discovery's items) gives al_model_unembed's bits,
 * with and without LayerNorm, for more rows than one chunk. */
TEST(circuit_unembed_own_same_bits) {
    for (int v = 0; v < 3; v++) {
        al_model m;
        if (v == 0)
            rand_any(&m, 2);
        else
            ln_model(&m, 2, v == 1 ? AL_NORM_LN : AL_NORM_LNPRE, AL_BIAS_ALL, AL_POS_STANDARD, 9);
        const int n = 150, C = m.cfg.d_model, V = m.cfg.d_vocab;
        float *x = malloc(sizeof(float) * (size_t)n * C),
              *y = malloc(sizeof(float) * (size_t)n * C);
        float *a = malloc(sizeof(float) * (size_t)n * V),
              *b = malloc(sizeof(float) * (size_t)n * V);
        al_rng r;
        al_rng_seed(&r, 3 + v);
        for (int i = 0; i < n * C; i++) x[i] = y[i] = (float)(al_rng_normal(&r) * (1 + i % 7));
        al_model_unembed(&m, x, n, a);
        al_model_unembed_own(&m, y, n, b);
        CHECKF(memcmp(a, b, sizeof(float) * (size_t)n * V) == 0, "case %d: logits differ (%g)", v,
               max_diff(a, b, (size_t)n * V));
        free(x), free(y), free(a), free(b);
        al_model_free(&m);
    }
}
