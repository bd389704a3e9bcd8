/* test_ln_circuit.c -- circuits (edge removal) on models with LayerNorm:
 * the circuit run's hooks (al_circuit_attach) and discovery's evaluator
 * (al_circuit_delta_run) against an independent PyTorch reference of
 * path-level edge removal (tests/ln_circuit_ref.py), their identities
 * (every edge kept: the clean run bit for bit; none: the corrupted
 * run), and a planted induction circuit in a LayerNorm model found by
 * path patching and kept by ACDC. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/discover.h"
#include "attnlab/graph.h"
#include "attnlab/model.h"
#include "attnlab/patch.h"
#include "attnlab/safetensors.h"
#include "planted.h"
#include "test.h"

#define PY "/usr/bin/python3"

typedef struct lc_case {
    int L, C, H, D, norm, pos, tied;
    unsigned biases;
} lc_case;

static const lc_case CASES[] = {
    {2, 64, 4, 16, AL_NORM_LN, AL_POS_STANDARD, 0, AL_BIAS_ALL},
    {3, 64, 4, 16, AL_NORM_LNPRE, AL_POS_SHORTFORMER, 0, AL_BIAS_Q | AL_BIAS_K | AL_BIAS_O},
    {2, 48, 3, 16, AL_NORM_LN, AL_POS_SHORTFORMER, 1, AL_BIAS_V | AL_BIAS_U},
    /* biases without LayerNorm take the linear path: biases cancel */
    {2, 64, 4, 16, AL_NORM_NONE, AL_POS_STANDARD, 0, AL_BIAS_ALL},
};
enum { LB = 2, LT = 9, LV = 41, NMASK = 4 };

/* A random model of case k, its LayerNorm weights and biases far from
 * their initial values, head gates not 1. */
static void lc_model(al_model *m, const lc_case *k, uint64_t seed) {
    al_config c = al_config_default();
    c.n_layers = k->L, c.d_model = k->C, c.n_heads = k->H, c.d_head = k->D;
    c.n_ctx = 16, c.d_vocab = LV, c.norm_type = k->norm, c.pos_type = k->pos;
    c.tied_embeddings = k->tied, c.biases = k->biases, c.seed = seed, c.ln_eps = 1e-5;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
    t_ln_perturb(m, seed * 13 + 5);
    /* attention far from uniform, so edges matter */
    for (int p = AL_P_WQ; p <= AL_P_WK; p++)
        for (size_t i = 0; i < m->param_size[p]; i++) m->p[p][i] *= 4.0f;
}

/* Final-residual logits (B·T, V) of m's last forward. */
static float *last_logits(const al_model *m, int B, int T) {
    const al_config *c = &m->cfg;
    size_t BT = (size_t)B * T;
    float *lg = malloc(sizeof(float) * BT * c->d_vocab);
    al_model_unembed(m, m->x + (size_t)c->n_layers * BT * c->d_model, (int)BT, lg);
    return lg;
}

static void tokens(uint64_t seed, int *clean, int *corr) {
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < LB * LT; i++) {
        clean[i] = (int)al_rng_below(&r, LV);
        /* about half the positions differ */
        corr[i] = al_rng_uniform(&r) < 0.5 ? clean[i] : (int)al_rng_below(&r, LV);
    }
}

/* Mask j of NMASK: 0 every edge kept, 1 none, 2 and 3 random (half, most). */
static void mask(unsigned char *kept, int n, int j, al_rng *r) {
    for (int k = 0; k < n; k++)
        kept[k] = j == 0 ? 1 : j == 1 ? 0 : al_rng_uniform(r) < (j == 2 ? 0.5 : 0.85);
}

/* The circuit kept[] on (clean, corr) by the hooks' full forward:
 * logits (B·T, V), malloc'd. */
static float *run_hooks(al_model *m, const unsigned char *kept, const int *clean, const int *corr) {
    al_circuit_spec sp = {.kept = kept, .fill = AL_FILL_CORRUPTED, .corr = corr};
    al_circuit_exec x;
    al_err e;
    CHECK_OK(al_circuit_attach(&x, m, &sp, &e), &e);
    CHECK_OK(al_model_forward(m, clean, NULL, LB, LT, &e), &e);
    al_circuit_detach(&x);
    return last_logits(m, LB, LT);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    return w;
}

/* Every case, every mask: the hooks' logits into a dump for the
 * reference; discovery's evaluator agrees with the hooks; every edge kept
 * is the clean run bit for bit, none the corrupted run. */
TEST(ln_circuit_reference) {
    char args[4096] = "";
    size_t used = 0;
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
        const lc_case *k = &CASES[ci];
        al_model m;
        lc_model(&m, k, 300 + ci);
        const al_config *c = &m.cfg;
        const int n = al_graph_n_edges(c->n_layers, c->n_heads);
        const size_t BT = (size_t)LB * LT, V = LV, C = c->d_model;
        char dn[16], pn[32];
        snprintf(dn, sizeof dn, "m%zu", ci);
        snprintf(pn, sizeof pn, "d%zu.safetensors", ci);
        t_pbuf dir = t_pcopy(dn), path = t_pcopy(pn);
        al_err e;
        CHECK_OK(al_ckpt_save(dir.s, &m, NULL, NULL, NULL, NULL, &e), &e);
        int clean[LB * LT], corr[LB * LT];
        tokens(77 + ci, clean, corr);
        /* the plain runs */
        al_acts cl, co;
        CHECK_OK(al_acts_alloc(&cl, c, LB, LT, &e), &e);
        CHECK_OK(al_acts_alloc(&co, c, LB, LT, &e), &e);
        CHECK_OK(al_model_forward(&m, corr, NULL, LB, LT, &e), &e);
        CHECK_OK(al_acts_save(&m, &co, &e), &e);
        float *lg_co = last_logits(&m, LB, LT);
        CHECK_OK(al_model_forward(&m, clean, NULL, LB, LT, &e), &e);
        CHECK_OK(al_acts_save(&m, &cl, &e), &e);
        float *lg_cl = last_logits(&m, LB, LT);
        al_circuit_delta d;
        CHECK_OK(al_circuit_delta_init(&d, &m, LB, LT, &e), &e);
        float *embp = calloc(al_circuit_delta_embp_floats(&d, LB) + 1, sizeof(float));
        al_circuit_delta_embp(&d, &m, clean, corr, LB, embp);
        float *xL = malloc(sizeof(float) * BT * C), *lg_d = malloc(sizeof(float) * BT * V);
        unsigned char changed[LB * LT], *kept = malloc((size_t)n);
        /* the dump: tensors point into buffers kept until written */
        al_st_tensor t[3 + 2 * NMASK];
        char names[2 * NMASK][16];
        int32_t *kk[NMASK];
        float *lg[NMASK];
        int nt = 0;
        int64_t sh[2] = {LB, LT}, sg[2] = {c->n_layers, c->n_heads}, sk[1] = {n},
                sl[3] = {LB, LT, LV};
        t[nt++] = (al_st_tensor){"clean", AL_DT_I32, 2, {sh[0], sh[1]}, clean};
        t[nt++] = (al_st_tensor){"corr", AL_DT_I32, 2, {sh[0], sh[1]}, corr};
        t[nt++] = (al_st_tensor){"gates", AL_DT_F32, 2, {sg[0], sg[1]}, m.gates};
        al_rng r;
        al_rng_seed(&r, 5 + ci);
        for (int j = 0; j < NMASK; j++) {
            mask(kept, n, j, &r);
            lg[j] = run_hooks(&m, kept, clean, corr);
            kk[j] = malloc(sizeof(int32_t) * n);
            for (int i = 0; i < n; i++) kk[j][i] = kept[i];
            snprintf(names[2 * j], 16, "kept.%d", j);
            snprintf(names[2 * j + 1], 16, "logits.%d", j);
            t[nt++] = (al_st_tensor){names[2 * j], AL_DT_I32, 1, {sk[0]}, kk[j]};
            t[nt++] = (al_st_tensor){names[2 * j + 1], AL_DT_F32, 3, {sl[0], sl[1], sl[2]}, lg[j]};
            /* discovery's evaluator: the same circuit */
            CHECK_OK(al_circuit_delta_run(&d, &m, kept, &cl, &co, clean, corr, embp, NULL, xL,
                                          changed, &e),
                     &e);
            al_model_unembed(&m, xL, (int)BT, lg_d);
            double dd = max_abs_diff(lg_d, lg[j], BT * V);
            CHECKF(dd < 1e-4, "case %zu mask %d: evaluator vs hooks %g", ci, j, dd);
            int nch = 0;
            for (size_t i = 0; i < BT; i++) nch += changed[i];
            if (j == 0) { /* every edge kept: the clean run itself */
                CHECKF(memcmp(lg[j], lg_cl, sizeof(float) * BT * V) == 0,
                       "case %zu: full circuit differs from the clean run", ci);
                CHECKF(nch == 0, "case %zu: full circuit changed %d rows", ci, nch);
            }
            if (j == 1) { /* none: the corrupted run, to rounding */
                double dc = max_abs_diff(lg[j], lg_co, BT * V);
                CHECKF(dc < 1e-4, "case %zu: empty circuit vs corrupted run %g", ci, dc);
            }
            if (j >= 2) CHECKF(nch > 0, "case %zu mask %d: nothing changed", ci, j);
        }
        CHECK_OK(al_st_write(path.s, t, nt, NULL, NULL, 0, &e), &e);
        used += (size_t)snprintf(args + used, sizeof args - used, " %s %s", dir.s, path.s);
        for (int j = 0; j < NMASK; j++) free(kk[j]), free(lg[j]);
        free(kept), free(xL), free(lg_d), free(embp), free(lg_cl), free(lg_co);
        al_circuit_delta_free(&d);
        al_acts_free(&cl), al_acts_free(&co);
        al_model_free(&m);
    }
    double t0 = al_now();
    int rc = t_sh(PY " tests/ln_circuit_ref.py %s > %s 2>&1", args, t_path("ref.out"));
    fprintf(stderr, "    ln_circuit_ref.py: %.1f s\n", al_now() - t0);
    if (rc == 77) t_skip("PyTorch not installed");
    char *out = t_slurp(t_path("ref.out"));
    CHECKF(rc == 0, "ln_circuit_ref.py exit %d:\n%s", rc, out ? out : "");
    char want[32];
    snprintf(want, sizeof want, "circuits: %d", (int)(NMASK * (sizeof CASES / sizeof CASES[0])));
    CHECKF(out && strstr(out, want), "%s", out ? out : "");
    const char *w = out ? strstr(out, "worst:") : NULL;
    if (w) fprintf(stderr, "    %.*s\n", (int)strcspn(w, "\n"), w);
    free(out);
}

/* planted.h's induction circuit with LayerNorm before both layers and the
 * unembedding (w 1, b 0: one-hot subspaces survive it, scaled) and a
 * small random b_U. */
static void planted_ln(al_model *ln) {
    al_model p;
    planted_model(&p);
    al_config c = p.cfg;
    c.norm_type = AL_NORM_LN, c.biases = AL_BIAS_U, c.ln_eps = 1e-5;
    al_err e;
    CHECK_OK(al_model_alloc(ln, &c, &e), &e);
    for (int k = 0; k < AL_P_LN1W; k++)
        if (p.param_size[k]) memcpy(ln->p[k], p.p[k], sizeof(float) * p.param_size[k]);
    for (size_t i = 0; i < ln->param_size[AL_P_LN1W]; i++) ln->p[AL_P_LN1W][i] = 1;
    for (size_t i = 0; i < ln->param_size[AL_P_LNFW]; i++) ln->p[AL_P_LNFW][i] = 1;
    al_rng r;
    al_rng_seed(&r, 9);
    for (size_t i = 0; i < ln->param_size[AL_P_BU]; i++)
        ln->p[AL_P_BU][i] = (float)(0.05 * al_rng_normal(&r));
    al_model_free(&p);
}

static int edge_of(al_edge_kind kind, int s, int l, int h, int c) {
    al_edge ed = {kind, s, l, h, c};
    return al_graph_edge_index(2, PH, &ed);
}

/* Path patching finds the previous-token head's path into the induction
 * head's keys (>= 0.9 of the effect) and ACDC keeps the four planted
 * edges (test_discover.c's discover_acdc_planted_known_answer says why
 * those four), on the LayerNorm model. */
TEST(ln_circuit_planted) {
    al_model m;
    planted_ln(&m);
    al_err e;
    al_patch_opts o = al_patch_opts_defaults();
    /* the longest repeats n_ctx 32 allows: with its keys noised, 1.0
     * finds no match and spreads over the sequence, and the fewer of
     * those positions hold the answer, the nearer the path's effect is
     * to the whole effect (0.87 without LayerNorm at R = 10) */
    o.probe_r = 15, o.probe_n = 16;
    al_pairs t;
    CHECK_OK(al_patch_task_make(&t, &m, NULL, 0, &o, &e), &e);
    /* path patching, noising (the paths command's default) */
    o.direction = "noise";
    al_paths_result pr;
    CHECK_OK(al_paths_run(&m, &t, &o, &pr, &e), &e);
    const int ns = pr.n_senders, W = pr.width;
    double k00 = pr.effect[((size_t)1 * ns + 2) * W + 0]; /* channel k, sender 0.0, receiver 1.0 */
    CHECKF(k00 >= 0.9, "path 0.0 -> 1.0.k: %g of the effect", k00);
    double other = 0;
    for (int snd = 0; snd < ns; snd++)
        if (snd != 2) other = fmax(other, fabs(pr.effect[((size_t)1 * ns + snd) * W + 0]));
    CHECKF(other < 0.1, "another sender into 1.0.k: %g", other);
    fprintf(stderr, "    path 0.0 -> 1.0.k: %.4f of the effect (others into k <= %.2g)\n", k00,
            other);
    al_paths_result_free(&pr);
    /* ACDC */
    al_discover_opts d = al_discover_opts_defaults();
    d.tau = 0.01;
    al_discover_result r;
    CHECK_OK(al_discover_run(&m, &t, &d, &r, &e), &e);
    int want[4] = {edge_of(AL_EDGE_INPUT, 0, 0, 0, 2), edge_of(AL_EDGE_COMPOSITION, 2, 1, 0, 1),
                   edge_of(AL_EDGE_INPUT, 0, 1, 0, 2), edge_of(AL_EDGE_OUTPUT, 2 + PH, -1, -1, 3)};
    for (int i = 0; i < 4; i++) {
        char nm[64];
        CHECKF(r.kept[want[i]], "%s not kept", al_graph_edge_name(2, PH, want[i], nm, sizeof nm));
    }
    CHECKF(r.n_kept == 4 && r.faithfulness > 0.99, "faithfulness %g with %d edges", r.faithfulness,
           r.n_kept);
    fprintf(stderr, "    ACDC: %d of %d edges kept, faithfulness %.4f, %ld evaluations\n", r.n_kept,
            r.n_edges, r.faithfulness, r.evals);
    al_discover_result_free(&r);
    /* EAP (each receiver's gradient through its own ln1) ranks the planted
     * key path among the edges it needs to recover the effect */
    d.method = "eap";
    CHECK_OK(al_discover_run(&m, &t, &d, &r, &e), &e);
    CHECKF(r.kept[want[1]] && r.faithfulness >= d.recover, "EAP: faithfulness %g, %d edges",
           r.faithfulness, r.n_kept);
    fprintf(stderr, "    EAP: %d of %d edges kept, faithfulness %.4f\n", r.n_kept, r.n_edges,
            r.faithfulness);
    al_discover_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}
