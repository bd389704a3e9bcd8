/* test_model.c -- the engine against finite differences and closed forms. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "attnlab/gemm.h"
#include "attnlab/hooks.h"
#include "attnlab/layers.h"
#include "attnlab/model.h"
#include "attnlab/optim.h"
#include "attnlab/prof.h"
#include "test.h"

static al_config tiny_cfg(int L, int tied) {
    al_config c = al_config_default();
    c.n_layers = L;
    c.d_model = 16;
    c.n_heads = 2;
    c.d_head = 8;
    c.n_ctx = 8;
    c.d_vocab = 11;
    c.tied_embeddings = tied;
    c.seed = 7;
    return c;
}

static void random_batch(int *in, int *tg, int n, int V, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        in[i] = (int)al_rng_below(&r, (uint32_t)V);
        tg[i] = (int)al_rng_below(&r, (uint32_t)V);
    }
}

static double loss_at(al_model *m, const int *in, const int *tg, int B, int T) {
    al_err e;
    if (al_model_forward(m, in, tg, B, T, &e) != 0) return NAN;
    double s = 0;
    for (int i = 0; i < B * T; i++) s += m->losses[i];
    return s / m->n_valid;
}

/* Central differences on a float model are noisy at ~1e-4 absolute, so
 * compare (a) the directional derivative along a random direction of the
 * whole tensor, which is large, to 1e-2 relative, and (b) a few single
 * entries to an absolute tolerance. */
static void check_tensor_grad(al_model *m, float *w, const float *g, size_t n, const char *name,
                              const int *in, const int *tg, int B, int T) {
    const double eps = 1e-2;
    float *u = malloc(n * sizeof *u);
    al_rng r;
    al_rng_seed(&r, 99 + n);
    double dir = 0;
    for (size_t i = 0; i < n; i++) {
        u[i] = (float)al_rng_normal(&r);
        dir += (double)u[i] * g[i];
    }
    for (size_t i = 0; i < n; i++) w[i] += (float)(eps * u[i]);
    double lp = loss_at(m, in, tg, B, T);
    for (size_t i = 0; i < n; i++) w[i] -= (float)(2 * eps * u[i]);
    double lm = loss_at(m, in, tg, B, T);
    for (size_t i = 0; i < n; i++) w[i] += (float)(eps * u[i]);
    double fd = (lp - lm) / (2 * eps);
    CHECKF(fabs(fd - dir) <= 1e-2 * fabs(fd) + 2e-4,
           "%s: directional derivative fd %.6g vs analytic %.6g", name, fd, dir);
    for (int k = 0; k < 4; k++) {
        size_t i = al_rng_below(&r, (uint32_t)n);
        float keep = w[i];
        w[i] = keep + (float)eps;
        lp = loss_at(m, in, tg, B, T);
        w[i] = keep - (float)eps;
        lm = loss_at(m, in, tg, B, T);
        w[i] = keep;
        fd = (lp - lm) / (2 * eps);
        CHECKF(fabs(fd - g[i]) <= 2e-2 * fabs(fd) + 3e-4, "%s[%zu]: fd %.6g vs analytic %.6g", name,
               i, fd, g[i]);
    }
    free(u);
}

static void gradcheck(int L, int tied, int use_replace) {
    al_config c = tiny_cfg(L, tied);
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    int B = 2, T = 7, BT = B * T;
    int in[14], tg[14];
    random_batch(in, tg, BT, c.d_vocab, 3);
    tg[3] = -1; /* ignored position */
    for (int i = 0; i < L * c.n_heads; i++) m.gates[i] = 0.5f + 0.25f * (float)i;
    float *rep = NULL;
    if (use_replace) {
        rep = malloc(sizeof(float) * BT * c.d_head);
        for (int i = 0; i < BT * c.d_head; i++) rep[i] = 0.1f * (float)((i % 7) - 3);
        static const float *zr[16];
        memset(zr, 0, sizeof zr);
        zr[1] = rep;
        CHECK_OK(al_zrep_hooks_add(&m, zr, &e), &e);
    }
    CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
    CHECK_OK(al_model_backward(&m, &e), &e);
    float *grads = malloc(sizeof(float) * m.n_params);
    memcpy(grads, m.grads, sizeof(float) * m.n_params);
    float gate_g[16];
    memcpy(gate_g, m.gate_grads, sizeof(float) * L * c.n_heads);
    static const char *names[AL_NPARAM] = {"W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_U"};
    size_t off = 0;
    for (int p = 0; p < AL_NPARAM; p++) {
        if (m.param_size[p])
            check_tensor_grad(&m, m.p[p], grads + off, m.param_size[p], names[p], in, tg, B, T);
        off += m.param_size[p];
    }
    check_tensor_grad(&m, m.gates, gate_g, (size_t)L * c.n_heads, "gates", in, tg, B, T);
    if (use_replace) {
        /* a replaced head's own weights get no gradient through it */
        float *gq = grads + m.param_size[AL_P_WE] + m.param_size[AL_P_WPOS] +
                    (size_t)1 * c.d_model * c.d_head;
        double s = 0;
        for (int i = 0; i < c.d_model * c.d_head; i++) s += fabs(gq[i]);
        if (L == 1) CHECKF(s == 0.0, "replaced head 0.1 W_Q grad should be 0, sum |g| = %g", s);
    }
    free(grads);
    free(rep);
    al_model_free(&m);
}

TEST(model_gradcheck_1layer) { gradcheck(1, 0, 0); }
TEST(model_gradcheck_2layer) { gradcheck(2, 0, 0); }
TEST(model_gradcheck_tied) { gradcheck(2, 1, 0); }
TEST(model_gradcheck_replaced_head) {
    gradcheck(1, 0, 1);
    gradcheck(2, 0, 1);
}

TEST(model_attention_rows_causal) {
    al_config c = tiny_cfg(2, 0);
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    int in[16], tg[16];
    random_batch(in, tg, 16, c.d_vocab, 5);
    CHECK_OK(al_model_forward(&m, in, NULL, 2, 8, &e), &e);
    int T = 8;
    for (int l = 0; l < 2; l++)
        for (int bh = 0; bh < 2 * c.n_heads; bh++)
            for (int t = 0; t < T; t++) {
                const float *row = m.att + ((size_t)l * 2 * c.n_heads + bh) * T * T + t * T;
                double s = 0;
                for (int u = 0; u < T; u++) {
                    if (u > t) CHECKF(row[u] == 0.0f, "att above diagonal %g", row[u]);
                    CHECK(row[u] >= 0.0f);
                    s += row[u];
                }
                CHECK_NEAR(s, 1.0, 1e-5);
            }
    CHECK(m.mean_loss == -1.0f);
    /* probabilities: rows sum to 1 */
    for (int i = 0; i < 16; i++) {
        double s = 0;
        for (int v = 0; v < c.d_vocab; v++) s += m.probs[i * c.d_vocab + v];
        CHECK_NEAR(s, 1.0, 1e-5);
    }
    al_model_free(&m);
}

/* Without the causal mask (and with no positional signal, which this
 * kernel never sees) permuting the sequence permutes the outputs. */
TEST(model_attention_permutation_equivariant) {
    int B = 1, T = 6, H = 2, D = 4, HD = H * D;
    float qkv[6 * 3 * 8], qkvp[6 * 3 * 8], z[6 * 8], zp[6 * 8], att[2 * 36], attp[2 * 36];
    al_rng r;
    al_rng_seed(&r, 1);
    for (int i = 0; i < T * 3 * HD; i++) qkv[i] = (float)al_rng_normal(&r);
    int perm[6] = {3, 0, 5, 1, 4, 2};
    for (int t = 0; t < T; t++)
        memcpy(qkvp + t * 3 * HD, qkv + perm[t] * 3 * HD, sizeof(float) * 3 * HD);
    CHECK(attention_forward(z, att, qkv, B, T, H, D, 0) == 0);
    CHECK(attention_forward(zp, attp, qkvp, B, T, H, D, 0) == 0);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HD; i++) CHECK_NEAR(zp[t * HD + i], z[perm[t] * HD + i], 1e-5);
    /* and with the mask it is not (sanity: the test can fail) */
    CHECK(attention_forward(z, att, qkv, B, T, H, D, 1) == 0);
    CHECK(attention_forward(zp, attp, qkvp, B, T, H, D, 1) == 0);
    double diff = 0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HD; i++) diff += fabs(zp[t * HD + i] - z[perm[t] * HD + i]);
    CHECK(diff > 1e-3);
}

TEST(model_init_loss_is_ln_vocab) {
    al_config c = al_config_default();
    c.d_vocab = 512;
    c.n_ctx = 64;
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    int B = 4, T = 64;
    int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    random_batch(in, tg, B * T, c.d_vocab, 11);
    CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
    CHECK_NEAR(m.mean_loss, log(512.0), 0.05);
    free(in);
    free(tg);
    al_model_free(&m);
}

TEST(model_gates_zero_is_direct_path) {
    /* all gates 0: logits = (W_E[tok] + W_pos[t]) W_U exactly */
    al_config c = tiny_cfg(2, 0);
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    for (int i = 0; i < 2 * c.n_heads; i++) m.gates[i] = 0.0f;
    int in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tg[8] = {2, 3, 4, 5, 6, 7, 8, 9};
    CHECK_OK(al_model_forward(&m, in, tg, 1, 8, &e), &e);
    double total = 0;
    for (int t = 0; t < 8; t++) {
        double logits[11], mx = -1e30, s = 0;
        for (int v = 0; v < 11; v++) {
            double acc = 0;
            for (int k = 0; k < 16; k++)
                acc += ((double)m.p[AL_P_WE][in[t] * 16 + k] + m.p[AL_P_WPOS][t * 16 + k]) *
                       m.p[AL_P_WU][k * 11 + v];
            logits[v] = acc;
            if (acc > mx) mx = acc;
        }
        for (int v = 0; v < 11; v++) s += exp(logits[v] - mx);
        total += log(s) + mx - logits[tg[t]];
    }
    CHECK_NEAR(m.mean_loss, total / 8, 1e-5);
    al_model_free(&m);
}

TEST(model_refuses_bad_input) {
    al_config c = tiny_cfg(1, 0);
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    int in[9] = {0}, tg[9] = {0};
    CHECK(al_model_forward(&m, in, tg, 1, 9, &e) != 0); /* T > n_ctx */
    CHECK(strstr(e.msg, "n_ctx") != NULL);
    in[2] = 11;
    CHECK(al_model_forward(&m, in, tg, 1, 4, &e) != 0);
    CHECK(strstr(e.msg, "outside the vocabulary") != NULL);
    al_model_free(&m);
    c.d_vocab = 0;
    CHECK(al_model_init(&m, &c, &e) != 0);
    CHECK(strstr(e.msg, "d_vocab") != NULL);
}

/* A call whose probabilities pass 8 MB writes them by non-temporal
 * stores (layers.c); each (b,h) is independent, so the same sequences
 * one at a time (ordinary stores) must give the same bits, here at a
 * length whose rows do not start on 64-byte boundaries and end in a
 * partial vector. */
TEST(model_attention_streamed_rows_same_bits) {
    int B = 4, T = 203, H = 14, D = 8, HD = H * D, rs = 3 * HD;
    size_t nq = (size_t)B * T * rs, nz = (size_t)B * T * HD, na = (size_t)B * H * T * T;
    CHECK(sizeof(float) * na > ((size_t)8 << 20));
    CHECK(sizeof(float) * na / B < ((size_t)8 << 20));
    float *qkv = malloc(sizeof(float) * nq), *z = malloc(sizeof(float) * nz);
    float *z1 = malloc(sizeof(float) * nz);
    float *att = malloc(sizeof(float) * (na + 1)), *att1 = malloc(sizeof(float) * na);
    al_rng r;
    al_rng_seed(&r, 7);
    for (size_t i = 0; i < nq; i++) qkv[i] = (float)(2.0 * al_rng_normal(&r));
    /* att + 1: rows misaligned by 4 bytes, so every row has a head and a tail */
    for (size_t i = 0; i <= na; i++) att[i] = NAN;
    CHECK(attention_forward(z, att + 1, qkv, B, T, H, D, 1) == 0);
    for (int b = 0; b < B; b++)
        CHECK(attention_forward(z1 + (size_t)b * T * HD, att1 + (size_t)b * H * T * T,
                                qkv + (size_t)b * T * rs, 1, T, H, D, 1) == 0);
    CHECK(memcmp(z, z1, sizeof(float) * nz) == 0);
    CHECK(memcmp(att + 1, att1, sizeof(float) * na) == 0);
    CHECK(att1[1] == 0.0f && att1[(size_t)T * T - 1] > 0.0f);
    free(qkv), free(z), free(z1), free(att), free(att1);
}

/* The attention kernel works on blocks of query rows; check it against a
 * plain triple loop at a length that spans several blocks, forward and
 * backward (dL/dqkv for L = Σ z ⊙ w with a fixed random w). */
TEST(model_attention_long_matches_naive) {
    int B = 2, T = 150, H = 2, D = 8, HD = H * D, rs = 3 * HD;
    size_t nq = (size_t)B * T * rs, nz = (size_t)B * T * HD;
    float *qkv = malloc(sizeof(float) * nq), *dqkv = malloc(sizeof(float) * nq);
    float *z = malloc(sizeof(float) * nz), *w = malloc(sizeof(float) * nz);
    float *att = malloc(sizeof(float) * (size_t)B * H * T * T);
    double *nd = calloc(nq, sizeof(double));
    al_rng r;
    al_rng_seed(&r, 42);
    for (size_t i = 0; i < nq; i++) qkv[i] = (float)(2.0 * al_rng_normal(&r));
    for (size_t i = 0; i < nz; i++) w[i] = (float)al_rng_normal(&r);
    CHECK(attention_forward(z, att, qkv, B, T, H, D, 1) == 0);
    CHECK(attention_backward(dqkv, w, qkv, att, B, T, H, D, 1) == 0);
    double scale = 1.0 / sqrt((double)D), max_err = 0, max_gerr = 0;
    double *a = malloc(sizeof(double) * T), *da = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * rs + h * D;
                double mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    const float *k = qkv + ((size_t)b * T + s) * rs + HD + h * D;
                    double d = 0;
                    for (int i = 0; i < D; i++) d += (double)q[i] * k[i];
                    a[s] = d * scale;
                    if (a[s] > mx) mx = a[s];
                }
                for (int s = 0; s <= t; s++) sum += (a[s] = exp(a[s] - mx));
                for (int s = 0; s <= t; s++) a[s] /= sum;
                const float *wt = w + ((size_t)b * T + t) * HD + h * D;
                double dot = 0;
                for (int s = 0; s <= t; s++) {
                    const float *v = qkv + ((size_t)b * T + s) * rs + 2 * HD + h * D;
                    double e = fabs(a[s] - att[(((size_t)b * H + h) * T + t) * T + s]);
                    if (e > max_err) max_err = e;
                    da[s] = 0;
                    for (int i = 0; i < D; i++) {
                        da[s] += (double)wt[i] * v[i];
                        nd[((size_t)b * T + s) * rs + 2 * HD + h * D + i] += a[s] * wt[i];
                    }
                    dot += a[s] * da[s];
                }
                for (int s = 0; s <= t; s++) {
                    double ds = a[s] * (da[s] - dot) * scale;
                    const float *k = qkv + ((size_t)b * T + s) * rs + HD + h * D;
                    for (int i = 0; i < D; i++) {
                        nd[((size_t)b * T + t) * rs + h * D + i] += ds * k[i];
                        nd[((size_t)b * T + s) * rs + HD + h * D + i] += ds * q[i];
                    }
                }
            }
    for (size_t i = 0; i < nq; i++) {
        double e = fabs(nd[i] - dqkv[i]) / (1.0 + fabs(nd[i]));
        if (e > max_gerr) max_gerr = e;
    }
    CHECKF(max_err < 1e-5, "attention probabilities differ by %g", max_err);
    CHECKF(max_gerr < 1e-4, "dqkv differs by %g (relative)", max_gerr);
    free(qkv);
    free(dqkv);
    free(z);
    free(w);
    free(att);
    free(nd);
    free(a);
    free(da);
}

/* One training step (forward, backward, AdamW) of a model big enough for
 * every parallel loop to split (residual copies over 2^16 floats, two
 * attention blocks), with gates other than 1 and one head's gate 0 (all
 * 1 with ones), skip_gate_grads as given; the weights, gradients and
 * gate gradients after it, or NULL on failure. */
static float *step_at(int threads, int skip, int ones, size_t *n, float *gate_grads) {
    al_config c = al_config_default();
    c.n_layers = 2, c.d_model = 128, c.n_heads = 4, c.d_head = 16, c.n_ctx = 128;
    c.d_vocab = 97, c.seed = 11;
    al_model m;
    al_adamw o = {0};
    al_err e;
    if (al_model_init(&m, &c, &e) || al_adamw_init(&o, m.n_params, &e)) return NULL;
    for (int i = 0; i < 2 * c.n_heads; i++) m.gates[i] = ones ? 1.0f : 0.25f * (float)(i % 5);
    for (int i = 0; i < 2 * c.n_heads; i++) m.gate_grads[i] = -7.0f; /* to see them written */
    m.skip_gate_grads = skip;
    int B = 4, T = 128, *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    random_batch(in, tg, B * T, c.d_vocab, 5);
    al_optim_cfg oc = {.lr = 1e-2,
                       .min_lr_frac = 1.0,
                       .beta1 = 0.9,
                       .beta2 = 0.95,
                       .eps = 1e-8,
                       .weight_decay = 0.1,
                       .grad_clip = 1.0};
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    float *out = NULL;
    if (!al_model_forward(&m, in, tg, B, T, &e) && !al_model_backward(&m, &e)) {
        memcpy(gate_grads, m.gate_grads, sizeof(float) * 2 * c.n_heads);
        al_adamw_step(&o, &m, &oc, 1, oc.lr);
        *n = 2 * m.n_params;
        if ((out = malloc(sizeof(float) * *n))) {
            memcpy(out, m.params, sizeof(float) * m.n_params);
            memcpy(out + m.n_params, m.grads, sizeof(float) * m.n_params);
        }
    }
    omp_set_num_threads(saved);
    free(in), free(tg);
    al_adamw_free(&o);
    al_model_free(&m);
    return out;
}

/* The engine's parallel loops (gates, residual copies, attention, AdamW
 * in vector lanes) give every element the same bits whatever the thread
 * count: what makes a run's checkpoint depend on the seed alone. */
TEST(model_step_same_bits_at_1_and_2_threads) {
    size_t n1 = 0, n2 = 0;
    float g1[8], g2[8];
    float *a = step_at(1, 0, 0, &n1, g1), *b = step_at(2, 0, 0, &n2, g2);
    CHECK(a && b && n1 == n2);
    if (a && b && n1 == n2) {
        CHECK(memcmp(a, b, sizeof(float) * n1) == 0);
        CHECK(memcmp(g1, g2, sizeof g1) == 0);
        int nonzero = 0; /* the gates were exercised: gradients flowed to them */
        for (int i = 0; i < 8; i++) nonzero += g1[i] != 0.0f;
        CHECKF(nonzero >= 6, "only %d gate gradients non-zero", nonzero);
    }
    free(a), free(b);
}

/* The per-operation profile (prof.h): a training step puts time on each
 * operation it runs, nothing while profiling is off. */
TEST(model_profile_counts_each_operation) {
    size_t n;
    float g[8];
    al_prof_enable(0);
    free(step_at(2, 0, 0, &n, g));
    for (int op = 0; op < AL_OP_N; op++) CHECK(al_prof_seconds(op) == 0.0);
    al_prof_enable(1);
    free(step_at(2, 0, 0, &n, g));
    for (int op = 0; op < AL_OP_N; op++)
        CHECKF(al_prof_seconds(op) > 0.0, "no time on %s", al_prof_name(op));
    CHECK(strcmp(al_prof_name(AL_OP_ATT_BWD), "att_bwd") == 0);
    al_prof_enable(0);
}

/* skip_gate_grads (the trainer's setting) changes nothing but the gate
 * gradients, which it leaves as they were: the same weights and gradients
 * to the bit with every gate 1 (the scaling is skipped) and with other
 * gates (it is not). */
TEST(model_skip_gate_grads_same_step) {
    for (int ones = 0; ones < 2; ones++) {
        size_t n1 = 0, n2 = 0;
        float g1[8], g2[8];
        float *a = step_at(2, 0, ones, &n1, g1), *b = step_at(2, 1, ones, &n2, g2);
        CHECK(a && b && n1 == n2);
        if (a && b && n1 == n2)
            CHECKF(memcmp(a, b, sizeof(float) * n1) == 0, "gates %s", ones ? "1" : "mixed");
        int kept = 1, written = 0;
        for (int i = 0; i < 8; i++) kept &= g2[i] == -7.0f, written += g1[i] != -7.0f;
        CHECK(kept);
        CHECK(written == 8);
        free(a), free(b);
    }
}

static int noop_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)a, (void)ctx, (void)e;
    return 0;
}

/* al_model_forward_backward (the trainer's step) gives forward then
 * backward's losses, mean loss and gradients to the bit, in f32 and in
 * bf16 (where the CPU has it), with some positions without a target; it
 * refuses a call without targets, or with a hook set. */
TEST(model_forward_backward_same_bits) {
    al_config c = al_config_default();
    c.n_layers = 2, c.d_model = 64, c.n_heads = 4, c.d_head = 16, c.n_ctx = 96;
    c.d_vocab = 53, c.seed = 3;
    al_err e;
    int B = 3, T = 96, *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);
    random_batch(in, tg, B * T, c.d_vocab, 17);
    for (int i = 0; i < B * T; i += 7) tg[i] = -1;
    for (int prec = 0; prec < 2; prec++) {
        if (prec && al_gemm_set_precision(AL_PREC_BF16, &e) != 0) break; /* no bf16 here */
        al_model a, b;
        CHECK_OK(al_model_init(&a, &c, &e), &e);
        CHECK_OK(al_model_init(&b, &c, &e), &e);
        CHECK_OK(al_model_forward(&a, in, tg, B, T, &e), &e);
        CHECK_OK(al_model_backward(&a, &e), &e);
        CHECK_OK(al_model_forward_backward(&b, in, tg, B, T, &e), &e);
        CHECKF(memcmp(a.grads, b.grads, sizeof(float) * a.n_params) == 0, "%s gradients differ",
               prec ? "bf16" : "f32");
        CHECK(memcmp(a.losses, b.losses, sizeof(float) * B * T) == 0);
        CHECK(a.mean_loss == b.mean_loss && a.n_valid == b.n_valid);
        CHECK(a.n_valid == B * T - (B * T + 6) / 7);
        CHECK(al_model_forward_backward(&b, in, NULL, B, T, &e) == -1);
        CHECK_OK(al_hook_add(&b, AL_HOOK_RESID_PRE, 0, noop_hook, NULL, &e), &e);
        CHECK(al_model_forward_backward(&b, in, tg, B, T, &e) == -1);
        al_model_free(&a);
        al_model_free(&b);
    }
    al_gemm_set_precision(AL_PREC_F32, &e);
    free(in), free(tg);
}
