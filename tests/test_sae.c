/* test_sae.c -- the sparse autoencoder engine (sae.h): a hand-worked
 * case, forward/loss/gradients against tests/sae_ref.py (PyTorch
 * autograd, float64), central finite differences, the config checks and
 * the training update's invariants. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/sae.h"
#include "attnlab/sae_io.h"
#include "attnlab/safetensors.h"
#include "refio.h"
#include "test.h"

/* d_in 4, d_sae 8: decoder rows ±e_r, W_enc = W_decᵀ except latent 2's
 * column 0.4·e_2; k 2, k_aux 1, latents 2 and 3 dead. x = (3, −1, 0.5, 0):
 * pre = (3, −1, 0.2, 0, −3, 1, −0.5, 0) → active {0: 3, 5: 1}, x̂ = (3,
 * −1, 0, 0), mse 0.25; aux latent 2 (pre 0.2 beats latent 3's 0), e =
 * (0, 0, 0.5, 0), ê = 0.2·e_2, aux 0.09; every gradient below by hand. */
TEST(sae_exact_tiny) {
    al_sae_cfg c = al_sae_cfg_default(4, 8);
    c.k = 2;
    c.k_aux = 1;
    c.aux_coeff = 1.0 / 32;
    c.dead_tokens = 10;
    al_sae s;
    al_err e;
    CHECK_OK(al_sae_alloc(&s, &c, &e), &e);
    for (int i = 0; i < 8; i++) {
        int r = i % 4;
        float sg = i < 4 ? 1.0f : -1.0f;
        s.W_dec[i * 4 + r] = sg;
        s.W_enc[r * 8 + i] = i == 2 ? 0.4f : sg;
    }
    s.since[2] = s.since[3] = 10;
    const float x[4] = {3, -1, 0.5f, 0};
    CHECK_OK(al_sae_forward(&s, x, 1, &e), &e);
    CHECK(s.idx[0] == 0 && s.idx[1] == 5);
    CHECK_NEAR(s.val[0], 3, 0);
    CHECK_NEAR(s.val[1], 1, 0);
    const float xh[4] = {3, -1, 0, 0};
    for (int r = 0; r < 4; r++) CHECK_NEAR(s.xhat[r], xh[r], 1e-7);
    CHECK(s.n_dead == 2 && s.aidx[0] == 2);
    CHECK_NEAR(s.aval[0], 0.2, 1e-7);
    CHECK_NEAR(s.mse, 0.25, 1e-7);
    CHECK_NEAR(s.aux, 0.09, 1e-7);
    CHECK_NEAR(s.loss, 0.25 + 0.09 / 32, 1e-7);
    CHECK_NEAR(s.l0, 2, 0);
    CHECK_OK(al_sae_backward(&s, &e), &e);
    /* dx̂ = 2(x̂ − x) = (0, 0, −1, 0); daux = 2/32 (ê − e) = −0.01875 e_2 */
    float want_gdec[32] = {0}, want_genc[32] = {0}, want_gbenc[8] = {0};
    want_gdec[0 * 4 + 2] = -3; /* f_0 · dx̂ */
    want_gdec[5 * 4 + 2] = -1; /* f_5 · dx̂ */
    want_gdec[2 * 4 + 2] = -0.00375f; /* a_2 · daux */
    /* latents 0 and 5: dpre = dx̂ · W_dec,i = 0; latent 2: daux · e_2 */
    const double dp2 = -0.01875;
    for (int r = 0; r < 4; r++) want_genc[r * 8 + 2] = (float)(dp2 * x[r]);
    want_gbenc[2] = (float)dp2;
    for (int j = 0; j < 32; j++) {
        CHECK_NEAR(s.gW_dec[j], want_gdec[j], 1e-7);
        CHECK_NEAR(s.gW_enc[j], want_genc[j], 1e-7);
    }
    for (int i = 0; i < 8; i++) CHECK_NEAR(s.gb_enc[i], want_gbenc[i], 1e-7);
    /* b_dec: dx̂ − W_enc · gb_enc = (0, 0, −1 + 0.4·0.01875, 0) */
    const float want_gbdec[4] = {0, 0, -0.9925f, 0};
    for (int r = 0; r < 4; r++) CHECK_NEAR(s.gb_dec[r], want_gbdec[r], 1e-7);
    /* the counters: the active latents fired, the others aged by B = 1
     * (a dead one stays at dead_tokens) */
    al_sae_update_dead(&s);
    CHECK(s.since[0] == 0 && s.since[5] == 0 && s.since[1] == 1 &&
          s.since[2] == 10); /* saturated */
    CHECK(al_sae_count_dead(&s) == 2);
    al_sae_free(&s);
}

/* Random weights and data for a case (seeded); b_enc shifted down so
 * that some top-k pre-activations are negative (the ReLU after TopK),
 * decoder rows of random norms (the L1 penalty's norm term). */
static void fill_case(al_sae *s, float *x, int B, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    const int d = s->cfg.d_in, n = s->cfg.d_sae;
    for (size_t i = 0; i < (size_t)d * n; i++) s->W_enc[i] = (float)(0.5 * al_rng_normal(&r));
    for (size_t i = 0; i < (size_t)d * n; i++) s->W_dec[i] = (float)(0.4 * al_rng_normal(&r));
    for (int i = 0; i < n; i++) s->b_enc[i] = (float)(0.3 * al_rng_normal(&r) - 1.0);
    for (int i = 0; i < d; i++) s->b_dec[i] = (float)(0.2 * al_rng_normal(&r));
    for (size_t i = 0; i < (size_t)B * d; i++) x[i] = (float)al_rng_normal(&r);
    /* the last rows near b_dec: their pre-activations are about b_enc,
     * so their top k are mostly negative (f 0 after the ReLU) */
    for (int b = B - 3; b < B; b++)
        for (int i = 0; i < d; i++)
            x[(size_t)b * d + i] = s->b_dec[i] + 0.05f * x[(size_t)b * d + i];
}

static void put_arr(FILE *f, const char *name, const float *a, size_t n) {
    fprintf(f, ",\n\"%s\": ", name);
    ref_put_floats(f, a, n);
}

/* The case file for sae_ref.py; g_b_dec[0] shifted by `perturb` (0:
 * none) to show that the comparison can fail. */
static void write_case(const char *path, const al_sae *s, const float *x, double perturb) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    const al_sae_cfg *c = &s->cfg;
    const int B = s->B, d = c->d_in, n = c->d_sae;
    fprintf(f,
            "{\"cfg\": {\"arch\": \"%s\", \"k\": %d, \"k_aux\": %d, \"aux_coeff\": %.17g, "
            "\"l1_coeff\": %.17g, \"d_in\": %d, \"d_sae\": %d},\n\"B\": %d",
            al_sae_arch_name(c->arch), c->k, c->k_aux, c->aux_coeff, c->l1_coeff, d, n, B);
    put_arr(f, "x", x, (size_t)B * d);
    put_arr(f, "W_enc", s->W_enc, (size_t)d * n);
    put_arr(f, "b_enc", s->b_enc, (size_t)n);
    put_arr(f, "W_dec", s->W_dec, (size_t)n * d);
    put_arr(f, "b_dec", s->b_dec, (size_t)d);
    fputs(",\n\"dead\": [", f);
    for (int i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", s->since[i] >= c->dead_tokens);
    fprintf(f, "],\n\"mse\": %.17g, \"aux\": %.17g, \"l1\": %.17g, \"loss\": %.17g", s->mse, s->aux,
            s->l1, s->loss);
    put_arr(f, "x_hat", s->xhat, (size_t)B * d);
    if (c->arch == AL_SAE_TOPK) {
        fputs(",\n\"idx\": ", f);
        ref_put_ints(f, s->idx, B * c->k);
    }
    put_arr(f, "g_W_enc", s->gW_enc, (size_t)d * n);
    put_arr(f, "g_b_enc", s->gb_enc, (size_t)n);
    put_arr(f, "g_W_dec", s->gW_dec, (size_t)n * d);
    float gb0 = s->gb_dec[0];
    s->gb_dec[0] = (float)(gb0 + perturb);
    put_arr(f, "g_b_dec", s->gb_dec, (size_t)d);
    s->gb_dec[0] = gb0;
    fputs("}\n", f);
    CHECK(fclose(f) == 0);
}

/* One case against the reference: the C's numbers agree to 1e-5
 * relative; with one gradient entry shifted the reference must fail. */
static void ref_case(int arch, int n_dead) {
    ref_need_torch("tests/sae_ref.py");
    al_set_threads(1);
    const int B = 24, d = 12, n = 48;
    al_sae_cfg c = al_sae_cfg_default(d, n);
    c.arch = arch;
    c.k = 5;
    c.k_aux = 6;
    c.l1_coeff = 0.7;
    c.dead_tokens = 100;
    al_sae s;
    al_err e;
    CHECK_OK(al_sae_alloc(&s, &c, &e), &e);
    float x[24 * 12];
    fill_case(&s, x, B, 11 + (uint64_t)arch);
    for (int i = 0; i < n_dead; i++) s.since[(7 * i + 3) % n] = 100;
    CHECK_OK(al_sae_forward(&s, x, B, &e), &e);
    CHECK_OK(al_sae_backward(&s, &e), &e);
    if (arch == AL_SAE_TOPK) {
        CHECK(s.n_dead == n_dead);
        if (n_dead) CHECK(s.aux > 0);
        int neg = 0;
        for (int j = 0; j < B * c.k; j++) neg += s.val[j] == 0;
        CHECKF(neg > 0, "no top-k pre-activation was negative: the ReLU is untested");
    }
    const char *path = t_path("case.json");
    write_case(path, &s, x, 0);
    char args[1200];
    snprintf(args, sizeof args, "%s --tol 1e-5", path);
    int rc = ref_run("tests/sae_ref.py", args);
    char *out = t_slurp(t_path("ref.out"));
    CHECKF(rc == 0, "sae_ref.py exit %d:\n%s", rc, out ? out : "");
    CHECKF(out && strstr(out, "g_W_enc") && strstr(out, "max "), "no comparison:\n%s",
           out ? out : "");
    printf("  %s reference: %s", al_sae_arch_name(arch), out ? strstr(out, "max ") : "?");
    free(out);
    write_case(path, &s, x, 1e-3 * (1 + fabs(s.gb_dec[0])));
    rc = ref_run("tests/sae_ref.py", args);
    CHECKF(rc == 1, "a shifted gradient passed the reference (exit %d)", rc);
    al_sae_free(&s);
}

TEST(sae_ref_topk) { ref_case(AL_SAE_TOPK, 10); }
TEST(sae_ref_topk_nodead) { ref_case(AL_SAE_TOPK, 0); }
TEST(sae_ref_l1) { ref_case(AL_SAE_L1, 0); }

/* Central differences of the loss (float64 sums over float32
 * activations) against the backward, for a sample of parameters of each
 * tensor. TopK is piecewise smooth: not differentiable where the k-th
 * and (k+1)-th pre-activations of a row are equal (the set of active
 * latents switches there) nor where an active pre crosses 0 (ReLU); a
 * coordinate whose ±h perturbation changes the active set or the sign
 * pattern is skipped (counted; most must be checked). The aux loss is
 * off here: it holds e = x − x̂ constant (a stop-gradient, as Gao et al.
 * and SAELens), which a finite difference of the loss cannot do; its
 * gradient is checked against the reference's autograd (which detaches
 * e the same way) and by hand in sae_exact_tiny. */
static void fd_case(int arch) {
    al_set_threads(1);
    const int B = 16, d = 10, n = 40;
    al_sae_cfg c = al_sae_cfg_default(d, n);
    c.arch = arch;
    c.k = 4;
    c.k_aux = 0;
    c.l1_coeff = 0.5;
    c.dead_tokens = 1;
    al_sae s;
    al_err e;
    CHECK_OK(al_sae_alloc(&s, &c, &e), &e);
    float x[16 * 10];
    fill_case(&s, x, B, 21 + (uint64_t)arch);
    for (int i = 0; i < n; i += 3) s.since[i] = 1;
    CHECK_OK(al_sae_forward(&s, x, B, &e), &e);
    CHECK_OK(al_sae_backward(&s, &e), &e);
    float *g = malloc(s.n_params * sizeof(float));
    memcpy(g, s.grads, s.n_params * sizeof(float));
    /* the active sets and the sign pattern of pre */
    const size_t nk = (size_t)B * c.k, nb = (size_t)B * n;
    int *sel0 = malloc(nk * sizeof(int));
    unsigned char *sg0 = malloc(nb), *sg1 = malloc(nb);
    if (arch == AL_SAE_TOPK) memcpy(sel0, s.idx, nk * sizeof(int));
    for (size_t j = 0; j < nb; j++) sg0[j] = s.pre[j] > 0;
    int n_neg = 0;
    if (arch == AL_SAE_TOPK)
        for (size_t j = 0; j < nk; j++) n_neg += s.val[j] == 0;
    CHECK(arch != AL_SAE_TOPK || n_neg > 0);
    al_rng r;
    al_rng_seed(&r, 5);
    const float h = 1e-3f;
    int checked = 0, skipped = 0;
    double worst = 0, gmax = 0;
    for (size_t i = 0; i < s.n_params; i++) gmax = fmax(gmax, fabs(g[i]));
    for (int t = 0; t < 300; t++) {
        size_t i = (size_t)al_rng_below(&r, (uint32_t)s.n_params);
        float w0 = s.params[i];
        double lp, lm;
        int same = 1;
        for (int sgn = 0; sgn < 2; sgn++) {
            s.params[i] = w0 + (sgn ? -h : h);
            CHECK_OK(al_sae_forward(&s, x, B, &e), &e);
            if (sgn)
                lm = s.loss;
            else
                lp = s.loss;
            if (arch == AL_SAE_TOPK) same &= memcmp(sel0, s.idx, nk * sizeof(int)) == 0;
            for (size_t j = 0; j < nb; j++) sg1[j] = s.pre[j] > 0;
            same &= memcmp(sg0, sg1, nb) == 0;
        }
        s.params[i] = w0;
        double fd = (lp - lm) / (2.0 * h);
        if (!same) {
            skipped++;
            continue;
        }
        double err = fabs(fd - g[i]) / (gmax > 0 ? gmax : 1);
        if (err > worst) worst = err;
        checked++;
    }
    CHECKF(worst < 2e-3, "finite differences differ by %.3g of the largest gradient", worst);
    CHECKF(checked >= 200, "only %d of 300 coordinates away from a tie (%d skipped)", checked,
           skipped);
    printf("  %s finite differences: %d checked, %d skipped, max err %.2g of max |g|\n",
           al_sae_arch_name(arch), checked, skipped, worst);
    free(g);
    free(sel0);
    free(sg0);
    free(sg1);
    al_sae_free(&s);
}

TEST(sae_fd_topk) { fd_case(AL_SAE_TOPK); }
TEST(sae_fd_l1) { fd_case(AL_SAE_L1); }

TEST(sae_cfg_bad) {
    al_err e;
    al_sae s;
    al_sae_cfg c = al_sae_cfg_default(8, 16);
    c.k = 17;
    CHECK(al_sae_alloc(&s, &c, &e) == -1 && strstr(e.msg, "k must be in 1..d_sae (16)"));
    CHECK(s.params == NULL);
    c = al_sae_cfg_default(8, 16);
    c.arch = AL_SAE_L1;
    c.l1_coeff = NAN;
    CHECK(al_sae_cfg_check(&c, &e) == -1 && strstr(e.msg, "l1_coeff must be finite"));
    c.l1_coeff = INFINITY;
    CHECK(al_sae_cfg_check(&c, &e) == -1 && strstr(e.msg, "l1_coeff"));
    c = al_sae_cfg_default(8, 16);
    c.aux_coeff = -1;
    CHECK(al_sae_cfg_check(&c, &e) == -1 && strstr(e.msg, "aux_coeff"));
    c = al_sae_cfg_default(8, 16);
    c.d_in = 0;
    CHECK(al_sae_cfg_check(&c, &e) == -1 && strstr(e.msg, "d_in"));
    c = al_sae_cfg_default(1 << 20, 1 << 20);
    CHECK(al_sae_cfg_check(&c, &e) == -1 && strstr(e.msg, "2^31"));
    c = al_sae_cfg_default(8, 16);
    CHECK(c.k == 16 && c.k_aux == 4); /* k capped at d_sae; k_aux d_in/2 */
    CHECK_OK(al_sae_init(&s, &c, 1, &e), &e);
    float x[8] = {0, 1, 2, NAN, 0, 0, 0, 0};
    CHECK(al_sae_forward(&s, x, 1, &e) == -1 && strstr(e.msg, "non-finite"));
    CHECK(al_sae_forward(&s, x, 0, &e) == -1);
    CHECK(al_sae_backward(&s, &e) == -1 && strstr(e.msg, "forward"));
    al_sae_free(&s);
}

/* Initialisation: unit decoder rows, W_enc = W_decᵀ, zero biases, the
 * same weights for the same seed; one Adam step keeps the rows at unit
 * norm and moves no row along itself before renormalising; the step's
 * result does not depend on the thread count (TopK's sparse backward sums
 * per latent in row order). */
TEST(sae_init_and_step) {
    al_err e;
    al_sae a, b;
    al_sae_cfg c = al_sae_cfg_default(16, 64);
    c.k = 6;
    CHECK_OK(al_sae_init(&a, &c, 7, &e), &e);
    CHECK_OK(al_sae_init(&b, &c, 7, &e), &e);
    CHECK(memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0);
    for (int i = 0; i < 64; i++) {
        double q = 0;
        for (int r = 0; r < 16; r++) {
            q += (double)a.W_dec[i * 16 + r] * a.W_dec[i * 16 + r];
            CHECK(a.W_enc[r * 64 + i] == a.W_dec[i * 16 + r]);
        }
        CHECK_NEAR(q, 1, 1e-6);
        CHECK(a.b_enc[i] == 0);
    }
    float x[32 * 16];
    al_rng r;
    al_rng_seed(&r, 3);
    for (int i = 0; i < 32 * 16; i++) x[i] = (float)al_rng_normal(&r);
    al_sae_init_b_dec_mean(&a, x, 32);
    double m0 = 0;
    for (int j = 0; j < 32; j++) m0 += x[j * 16];
    CHECK_NEAR(a.b_dec[0], m0 / 32, 1e-6);
    al_sae_init_b_dec_mean(&b, x, 32);
    al_sae_adam oa, ob;
    CHECK_OK(al_sae_adam_init(&oa, a.n_params, &e), &e);
    CHECK_OK(al_sae_adam_init(&ob, b.n_params, &e), &e);
    for (int step = 1; step <= 3; step++) {
        al_set_threads(1);
        CHECK_OK(al_sae_forward(&a, x, 32, &e), &e);
        CHECK_OK(al_sae_backward(&a, &e), &e);
        al_sae_adam_step(&a, &oa, 1e-2, 0.9, 0.999, 1e-8, step);
        al_set_threads(2);
        CHECK_OK(al_sae_forward(&b, x, 32, &e), &e);
        CHECK_OK(al_sae_backward(&b, &e), &e);
        float wold[64 * 16];
        memcpy(wold, b.W_dec, sizeof wold);
        al_sae_adam_step(&b, &ob, 1e-2, 0.9, 0.999, 1e-8, step);
        /* rows at unit norm; each row's gradient (projected in place)
         * orthogonal to the row it was taken at */
        for (int i = 0; i < 64; i++) {
            double q = 0, gw = 0, gg = 0;
            for (int k = 0; k < 16; k++) {
                q += (double)b.W_dec[i * 16 + k] * b.W_dec[i * 16 + k];
                gw += (double)b.gW_dec[i * 16 + k] * wold[i * 16 + k];
                gg += (double)b.gW_dec[i * 16 + k] * b.gW_dec[i * 16 + k];
            }
            CHECK_NEAR(q, 1, 1e-5);
            CHECKF(fabs(gw) <= 1e-5 * sqrt(gg) + 1e-12, "row %d: g.w %g, |g| %g", i, gw, sqrt(gg));
        }
    }
    /* bit for bit with 1 and 2 threads: the encoder's sgemm is the only
     * thread-dependent sum, and at 32 x 16 x 64 OpenBLAS splits nothing */
    CHECK(memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0);
    /* the loss fell */
    double l0 = a.loss;
    for (int step = 4; step <= 40; step++) {
        CHECK_OK(al_sae_forward(&a, x, 32, &e), &e);
        CHECK_OK(al_sae_backward(&a, &e), &e);
        al_sae_adam_step(&a, &oa, 1e-2, 0.9, 0.999, 1e-8, step);
    }
    CHECK_OK(al_sae_forward(&a, x, 32, &e), &e);
    CHECKF(a.loss < 0.7 * l0, "loss %g after 40 steps, %g after 3", a.loss, l0);
    CHECK_NEAR(al_sae_lr_at(1.0, 10, 20, 100, 0), 0.1, 1e-12);
    CHECK_NEAR(al_sae_lr_at(1.0, 10, 20, 100, 50), 1.0, 1e-12);
    CHECK_NEAR(al_sae_lr_at(1.0, 10, 20, 100, 90), 0.5, 1e-12);
    al_sae_adam_free(&oa);
    al_sae_adam_free(&ob);
    al_sae_free(&a);
    al_sae_free(&b);
}

/* ------------------------------------------------------- the SAELens layout */

static void small_sae(al_sae *s, int arch) {
    al_err e;
    al_sae_cfg c = al_sae_cfg_default(6, 20);
    c.arch = arch;
    c.k = 3;
    c.k_aux = 2;
    c.l1_coeff = 0.25;
    CHECK_OK(al_sae_init(s, &c, 9, &e), &e);
    for (int i = 0; i < 20; i++) s->b_enc[i] = 0.01f * (float)i - 0.1f;
    for (int i = 0; i < 6; i++) s->b_dec[i] = 0.5f - 0.1f * (float)i;
}

/* Save then load: the same bits, config and metadata; the files are
 * SAELens's (names, shapes, F32; cfg.json's keys) read by the plain
 * safetensors and JSON readers; no temporary file is left behind. */
TEST(sae_io_roundtrip) {
    for (int arch = AL_SAE_TOPK; arch <= AL_SAE_L1; arch++) {
        al_sae s, t;
        al_sae_meta m = {.site = arch == AL_SAE_TOPK ? AL_SAE_SITE_Z : AL_SAE_SITE_RESID_PRE,
                         .hook_layer = 1,
                         .normalized = 1,
                         .scale = 0.1 + 1.0 / 3,
                         .seed = 18446744073709551557ull},
                    m2;
        memset(m.model_sha256, 'a', 64);
        m.model_sha256[64] = 0;
        small_sae(&s, arch);
        al_err e;
        const char *dir = t_path(arch ? "l1" : "topk");
        CHECK_OK(al_sae_save(dir, &s, &m, &e), &e);
        CHECK_OK(al_sae_load(dir, &t, &m2, &e), &e);
        CHECK(t.n_params == s.n_params &&
              memcmp(t.params, s.params, s.n_params * sizeof(float)) == 0);
        CHECK(t.cfg.d_in == 6 && t.cfg.d_sae == 20 && t.cfg.arch == arch &&
              t.cfg.dead_tokens == s.cfg.dead_tokens);
        if (arch == AL_SAE_TOPK)
            CHECK(t.cfg.k == 3 && t.cfg.k_aux == 2 && t.cfg.aux_coeff == s.cfg.aux_coeff);
        else
            CHECK(t.cfg.l1_coeff == 0.25);
        CHECK(m2.site == m.site && m2.hook_layer == 1 && m2.normalized == 1 &&
              m2.scale == m.scale && m2.seed == m.seed &&
              strcmp(m2.model_sha256, m.model_sha256) == 0);
        char p[1200];
        snprintf(p, sizeof p, "%s/cfg.json", dir);
        char *cfg = t_slurp(p);
        CHECK(cfg && strstr(cfg, arch ? "\"hook_name\":\t\"blocks.1.hook_resid_pre\""
                                      : "\"hook_name\":\t\"blocks.1.attn.hook_z\""));
        CHECK(cfg && strstr(cfg, arch ? "\"architecture\":\t\"standard\""
                                      : "\"architecture\":\t\"topk\""));
        CHECK(cfg && strstr(cfg, "\"normalize_activations\":\t\"expected_average_only_in\""));
        CHECK(cfg && (arch || strstr(cfg, "\"k\":\t3")));
        free(cfg);
        snprintf(p, sizeof p, "%s/sae_weights.safetensors", dir);
        al_st_file *f;
        CHECK_OK(al_st_open(p, &f, &e), &e);
        const al_st_tensor *w = al_st_get(f, "W_enc"), *wd = al_st_get(f, "W_dec");
        CHECK(al_st_count(f) == 4 && w && wd && w->shape[0] == 6 && w->shape[1] == 20 &&
              wd->shape[0] == 20 && wd->shape[1] == 6 && w->dtype == AL_DT_F32);
        al_st_close(f);
        CHECK(t_sh("ls -a %s | grep -c tmp > /dev/null", dir) != 0); /* no temp file */
        al_sae_free(&s);
        al_sae_free(&t);
    }
}

/* Read a file into memory for the mutations below. */
static unsigned char *slurp_n(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

static char *replace1(const char *s, const char *from, const char *to) {
    const char *p = strstr(s, from);
    CHECKF(p != NULL, "'%s' not in cfg.json", from);
    if (!p) return strdup(s);
    size_t a = (size_t)(p - s), lf = strlen(from), lt = strlen(to);
    char *r = malloc(strlen(s) - lf + lt + 1);
    memcpy(r, s, a);
    memcpy(r + a, to, lt);
    strcpy(r + a + lt, p + lf);
    return r;
}

/* A refused load: one line holding want, nothing allocated. */
static void refused(const char *cfg, const void *st, size_t st_n, const char *want) {
    al_sae s;
    al_sae_meta m;
    al_err e;
    memset(&e, 0, sizeof e);
    int rc = al_sae_load_mem(cfg, strlen(cfg), st, st_n, "dir", &s, &m, &e);
    CHECKF(rc == -1, "accepted (want '%s')", want);
    CHECKF(strstr(e.msg, want) != NULL && !strchr(e.msg, '\n'), "message [%s], want [%s]", e.msg,
           want);
    CHECK(s.params == NULL);
    if (rc == 0) al_sae_free(&s);
}

/* Damaged and hostile directories: each refused with one line. */
TEST(sae_io_bad) {
    al_sae s;
    small_sae(&s, AL_SAE_TOPK);
    al_sae_meta m = {.site = AL_SAE_SITE_Z, .hook_layer = 0, .scale = 1};
    al_err e;
    const char *dir = t_path("ok");
    CHECK_OK(al_sae_save(dir, &s, &m, &e), &e);
    char p[1200];
    snprintf(p, sizeof p, "%s/cfg.json", dir);
    char *cfg = t_slurp(p);
    snprintf(p, sizeof p, "%s/sae_weights.safetensors", dir);
    size_t wn;
    unsigned char *w = slurp_n(p, &wn);
    if (!cfg || !w) return;
    al_sae t;
    al_sae_meta m2;
    CHECK_OK(al_sae_load_mem(cfg, strlen(cfg), w, wn, "dir", &t, &m2, &e), &e);
    al_sae_free(&t);
    struct {
        const char *from, *to, *want;
    } muts[] = {
        {"\"d_in\":\t6", "\"d_in\":\t7", "W_enc must be F32 of shape [7, 20]"},
        {"\"d_sae\":\t20", "\"d_sae\":\t21", "W_enc must be F32 of shape [6, 21]"},
        /* a hostile size: refused by the shapes before any allocation */
        {"\"d_sae\":\t20", "\"d_sae\":\t1000000", "must be F32 of shape"},
        {"\"d_sae\":\t20", "\"d_sae\":\t1e300", "d_sae' must be an integer"},
        {"\"k\":\t3", "\"k\":\t21", "'k' must be an integer in 1..20"},
        {"\"k\":\t3", "\"k\":\t0", "'k' must be an integer in 1..20"},
        {"\"architecture\":\t\"topk\"", "\"architecture\":\t\"jumprelu\"", "architecture must be"},
        {"\"hook_name\":\t\"blocks.0.attn.hook_z\"", "\"hook_name\":\t\"blocks.0.hook_mlp_out\"",
         "hook_name must be"},
        {"\"hook_layer\":\t0", "\"hook_layer\":\t1", "differs from the layer of hook_name"},
        {"\"dtype\":\t\"float32\"", "\"dtype\":\t\"float16\"", "dtype must be float32"},
        {"\"aux_coeff\":\t0.03125", "\"aux_coeff\":\t-1", "aux_coeff must be finite and >= 0"},
        {"\"norm_scaling_factor\":\t1", "\"norm_scaling_factor\":\t0",
         "norm_scaling_factor must be positive"},
        {"\"apply_b_dec_to_input\":\ttrue", "\"apply_b_dec_to_input\":\tfalse",
         "apply_b_dec_to_input must be true"},
        {"\"d_in\":\t6,", "", "key 'd_in' missing"},
        {"\"hook_name\":\t\"blocks.0.attn.hook_z\",", "", "key 'hook_name' missing"},
        {"\"normalize_activations\":\t\"none\"", "\"normalize_activations\": \"layer\"",
         "normalize_activations must be \"none\" or \"expected_average_only_in\""},
        {"\"norm_scaling_factor\":\t1", "\"norm_scaling_factor\":\t\"one\"",
         "key 'norm_scaling_factor' must be a finite number"},
        {"\"model_sha256\":\t\"\"", "\"model_sha256\": \"ABC\"",
         "model_sha256 must be 64 lowercase hex digits"},
        {"\"seed\":\t0", "\"seed\": -4", "seed must be an unsigned integer"},
        /* a key given twice: cJSON would read the first silently */
        {"\"k\":\t3", "\"k\":\t3, \"k\": 5", "dir/cfg.json: key 'k' given twice"},
    };
    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        char *c2 = replace1(cfg, muts[i].from, muts[i].to);
        refused(c2, w, wn, muts[i].want);
        free(c2);
    }
    refused("{\"d_in\": ", w, wn, "invalid JSON");
    refused("[1]", w, wn, "not a JSON object");
    /* the weights: truncated, a NaN, an extra tensor */
    refused(cfg, w, wn - 1, "sae_weights.safetensors");
    refused(cfg, w, 7, "sae_weights.safetensors");
    unsigned char *w2 = malloc(wn);
    memcpy(w2, w, wn);
    const float nan = NAN;
    memcpy(w2 + wn - 4, &nan, 4);
    refused(cfg, w2, wn, "b_dec");
    free(w2);
    {
        al_st_tensor tt[5] =
            {{.name = "W_enc", .dtype = AL_DT_F32, .ndim = 2, .shape = {6, 20}, .data = s.W_enc},
             {.name = "b_enc", .dtype = AL_DT_F32, .ndim = 1, .shape = {20}, .data = s.b_enc},
             {.name = "W_dec", .dtype = AL_DT_F32, .ndim = 2, .shape = {20, 6}, .data = s.W_dec},
             {.name = "b_dec", .dtype = AL_DT_F32, .ndim = 1, .shape = {6}, .data = s.b_dec},
             {.name = "threshold", .dtype = AL_DT_F32, .ndim = 1, .shape = {20}, .data = s.b_enc}};
        const char *x = t_path("extra.st");
        CHECK_OK(al_st_write(x, tt, 5, NULL, NULL, 0, &e), &e);
        size_t xn;
        unsigned char *xb = slurp_n(x, &xn);
        refused(cfg, xb, xn, "tensor 'threshold' is not part of an SAE");
        /* b_dec missing */
        CHECK_OK(al_st_write(x, tt, 3, NULL, NULL, 0, &e), &e);
        free(xb);
        xb = slurp_n(x, &xn);
        refused(cfg, xb, xn, "tensor b_dec missing");
        free(xb);
    }
    /* a directory without the files, and nothing saved from NaN weights */
    CHECK(al_sae_load(t_path("none"), &t, &m2, &e) == -1 && strstr(e.msg, "no SAE directory"));
    s.W_dec[3] = NAN;
    CHECK(al_sae_save(t_path("nan"), &s, &m, &e) == -1 && strstr(e.msg, "non-finite"));
    CHECK(!al_file_exists(t_path("nan")));
    free(cfg);
    free(w);
    al_sae_free(&s);
}
