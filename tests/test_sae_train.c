/* test_sae_train.c -- the SAE trainer (sae_train.h): recovery of planted
 * sparse directions, exact resume, reproducibility, the evaluation
 * against recomputations by other engine paths, and bad input refused
 * with one line and nothing written. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attnlab/checkpoint.h"
#include "attnlab/hooks.h"
#include "attnlab/safetensors.h"
#include "attnlab/sae.h"
#include "attnlab/sae_io.h"
#include "attnlab/sae_train.h"
#include "test.h"

/* ------------------------------------------------- planted directions */

#define PL_D 32
#define PL_N 24
#define PL_K 3

typedef struct planted {
    float dir[PL_N][PL_D]; /* unit directions */
} planted;

static void planted_init(planted *p, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < PL_N; i++) {
        double q = 0;
        for (int j = 0; j < PL_D; j++) {
            p->dir[i][j] = (float)al_rng_normal(&r);
            q += (double)p->dir[i][j] * p->dir[i][j];
        }
        for (int j = 0; j < PL_D; j++) p->dir[i][j] /= (float)sqrt(q);
    }
}

/* Each activation: exactly PL_K distinct directions with coefficients in
 * [0.5, 2) (so a TopK SAE with k = PL_K can represent it exactly). */
static int planted_source(void *ctx, float *x, int n, al_rng *rng, al_err *e) {
    (void)e;
    const planted *p = ctx;
    for (int b = 0; b < n; b++) {
        float *row = x + (size_t)b * PL_D;
        memset(row, 0, PL_D * sizeof(float));
        int used[PL_K];
        for (int j = 0; j < PL_K; j++) {
            int i, dup;
            do {
                i = (int)al_rng_below(rng, PL_N);
                dup = 0;
                for (int q = 0; q < j; q++) dup |= used[q] == i;
            } while (dup);
            used[j] = i;
            float c = (float)(0.5 + 1.5 * al_rng_uniform(rng));
            for (int r = 0; r < PL_D; r++) row[r] += c * p->dir[i][r];
        }
    }
    return 0;
}

static al_sae_train_opts planted_opts(planted *p, const char *out) {
    al_sae_train_opts o = al_sae_train_opts_defaults();
    o.source = planted_source;
    o.source_ctx = p;
    o.source_d_in = PL_D;
    o.out = out;
    o.d_sae = 64;
    o.k = PL_K;
    o.k_aux = 8;
    o.dead_tokens = 4096;
    o.batch = 256;
    o.buffer_batches = 4;
    o.steps = 3000;
    o.lr = 3e-3;
    o.warmup = 20;
    o.threads = 1;
    o.ckpt_every = 0;
    o.b_dec_mean = 0; /* the planted data has no offset to learn */
    o.eval_windows = 16;
    return o;
}

/* k-sparse combinations of 24 known unit directions in 32 dimensions:
 * the trained SAE explains > 99% of the variance on fresh draws, and
 * every true direction has a decoder row with cosine > 0.95. */
TEST(sae_train_planted) {
    planted p;
    planted_init(&p, 77);
    al_sae_train_opts o = planted_opts(&p, t_path("planted"));
    al_sae_trainer *t;
    al_err e;
    CHECK_OK(al_sae_trainer_init(&t, &o, &e), &e);
    if (!t) return;
    int stopped;
    CHECK_OK(al_sae_trainer_run(t, &stopped, &e), &e);
    al_sae_eval ev;
    CHECK_OK(al_sae_trainer_eval(t, &ev, &e), &e);
    const al_sae *s = al_sae_trainer_sae(t);
    double worst = 1;
    for (int i = 0; i < PL_N; i++) {
        double best = -1;
        for (int j = 0; j < s->cfg.d_sae; j++) {
            double c = 0;
            for (int r = 0; r < PL_D; r++)
                c += (double)p.dir[i][r] * s->W_dec[(size_t)j * PL_D + r];
            if (c > best) best = c;
        }
        if (best < worst) worst = best;
    }
    printf("  planted: FVU %.4g, L0 %.2f, worst best-cosine %.4f, dead %.2f, %.0f act/s\n",
           1 - ev.fve, ev.l0, worst, ev.dead_frac, al_sae_trainer_rate(t));
    CHECKF(1 - ev.fve < 0.01, "FVU %g", 1 - ev.fve);
    CHECKF(worst > 0.95, "a planted direction's best decoder cosine is %g", worst);
    CHECK(ev.l0 <= PL_K + 1e-9);
    CHECK(isnan(ev.ce_recovered));
    al_sae_trainer_free(t);
}

/* ----------------------------------------------------- model-based runs */

static const char *model_dir(void) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s", t_path("tm"));
    t_sh("mkdir -p %s", dir);
    t_tiny_model(dir, 2, 30);
    return dir;
}

static al_sae_train_opts model_opts(const char *dir, const char *out) {
    static char model[1100], data[1100];
    snprintf(model, sizeof model, "%s/m2", dir);
    snprintf(data, sizeof data, "%s/s.train.bin", dir);
    al_sae_train_opts o = al_sae_train_opts_defaults();
    o.model = model;
    o.data = data;
    o.out = out;
    o.layer = 1;
    o.expansion = 4;
    o.k = 8;
    o.batch = 512;
    o.buffer_batches = 2;
    o.steps = 24;
    o.ckpt_every = 8;
    o.threads = 2;
    o.eval_windows = 16;
    o.dead_tokens = 2048;
    return o;
}

static void run_all(const al_sae_train_opts *o, al_sae *copy, float **adam, int *stopped) {
    al_sae_trainer *t;
    al_err e;
    CHECK_OK(al_sae_trainer_init(&t, o, &e), &e);
    if (!t) return;
    CHECK_OK(al_sae_trainer_run(t, stopped, &e), &e);
    const al_sae *s = al_sae_trainer_sae(t);
    if (copy) {
        CHECK_OK(al_sae_alloc(copy, &s->cfg, &e), &e);
        memcpy(copy->params, s->params, s->n_params * sizeof(float));
        memcpy(copy->since, s->since, (size_t)s->cfg.d_sae * sizeof(long));
    }
    (void)adam;
    al_sae_trainer_free(t);
}

/* Stopped at step 8 and resumed to 24 gives the bits of an uninterrupted
 * run of 24 (weights and dead counters; the checkpoint files too); the
 * same seed twice gives the same bits, another seed other weights. */
TEST(sae_train_resume_and_reproduce) {
    const char *dir = model_dir();
    char outa[1100], outb[1100], outc[1100];
    snprintf(outa, sizeof outa, "%s", t_path("a"));
    snprintf(outb, sizeof outb, "%s", t_path("b"));
    snprintf(outc, sizeof outc, "%s", t_path("c"));
    al_sae full, again, res, other;
    int stopped = 0;
    al_sae_train_opts o = model_opts(dir, outa);
    run_all(&o, &full, NULL, &stopped);
    CHECK(stopped == 0);
    o.out = outc;
    run_all(&o, &again, NULL, &stopped);
    CHECK(memcmp(full.params, again.params, full.n_params * sizeof(float)) == 0);
    o.out = outb;
    o.stop_at = 8;
    run_all(&o, NULL, NULL, &stopped);
    CHECK(stopped == 1);
    o.stop_at = 0;
    o.resume = 1;
    run_all(&o, &res, NULL, &stopped);
    CHECK(stopped == 0);
    CHECK(memcmp(full.params, res.params, full.n_params * sizeof(float)) == 0);
    CHECK(memcmp(full.since, res.since, (size_t)full.cfg.d_sae * sizeof(long)) == 0);
    CHECK(t_sh("cmp -s %s/sae_resume.safetensors %s/sae_resume.safetensors", outa, outb) == 0);
    CHECK(t_sh("cmp -s %s/sae_weights.safetensors %s/sae_weights.safetensors", outa, outb) == 0);
    CHECK(t_sh("cmp -s %s/cfg.json %s/cfg.json", outa, outb) == 0);
    /* a resume with other options is refused */
    al_sae_trainer *t;
    al_err e;
    o.k = 7;
    CHECK(al_sae_trainer_init(&t, &o, &e) == -1 && strstr(e.msg, "other options"));
    o = model_opts(dir, t_path("d"));
    o.seed = 2;
    run_all(&o, &other, NULL, &stopped);
    CHECK(memcmp(full.params, other.params, full.n_params * sizeof(float)) != 0);
    /* the saved SAE loads, with the model's hash, hook and scale */
    al_sae l;
    al_sae_meta m;
    CHECK_OK(al_sae_load(outa, &l, &m, &e), &e);
    CHECK(memcmp(l.params, full.params, full.n_params * sizeof(float)) == 0);
    char sha[65], mp[1200];
    snprintf(mp, sizeof mp, "%s/m2/model.safetensors", dir);
    CHECK_OK(al_sha256_file(mp, sha, &e), &e);
    CHECK(strcmp(m.model_sha256, sha) == 0 && m.site == AL_SAE_SITE_Z && m.hook_layer == 1 &&
          m.normalized == 1 && m.scale > 0 && l.cfg.d_in == 32 && l.cfg.d_sae == 128);
    /* another model's SAE: the width, the layer, the hash */
    al_model mm;
    char md[1100];
    snprintf(md, sizeof md, "%s/m2", dir);
    CHECK_OK(al_ckpt_load(md, &mm, NULL, &e), &e);
    CHECK_OK(al_sae_fits_model(&l, &m, &mm.cfg, sha, &e), &e);
    CHECK(al_sae_fits_model(&l, &m, &mm.cfg, "00", &e) == -1 && strstr(e.msg, "another model"));
    al_config c2 = mm.cfg;
    c2.n_heads = 2;
    CHECK(al_sae_fits_model(&l, &m, &c2, sha, &e) == -1 &&
          strstr(e.msg, "d_in 32 is not the width 16"));
    c2 = mm.cfg;
    c2.n_layers = 1;
    CHECK(al_sae_fits_model(&l, &m, &c2, sha, &e) == -1 &&
          strstr(e.msg, "reads blocks.1.attn.hook_z, but the model has 1 layer"));
    al_model_free(&mm);
    char *cfg = t_slurp(t_path("a/cfg.json"));
    CHECK(cfg && strstr(cfg, "\"hook_name\":\t\"blocks.1.attn.hook_z\""));
    free(cfg);
    al_sae_free(&l);
    al_sae_free(&full);
    al_sae_free(&again);
    al_sae_free(&res);
    al_sae_free(&other);
}

/* The evaluation against other paths: the clean loss is a plain forward's,
 * the zero-ablated one the z replacement hooks' (ablate's mean-ablation
 * machinery) with zeros, the reconstruction's the same hooks with x̂ / s
 * per head; variance explained and L0 recomputed from m->z (the forward's
 * own cache, not the site hook) and al_sae_encode. */
TEST(sae_train_eval_recomputed) {
    const char *dir = model_dir();
    al_sae_train_opts o = model_opts(dir, t_path("ev"));
    o.eval_windows = 8; /* one forward of the 8 windows (bm = min(64, 4096 / n_ctx, 8)) */
    al_sae_trainer *t;
    al_err e;
    CHECK_OK(al_sae_trainer_init(&t, &o, &e), &e);
    if (!t) return;
    int stopped;
    CHECK_OK(al_sae_trainer_run(t, &stopped, &e), &e);
    al_sae_eval ev;
    CHECK_OK(al_sae_trainer_eval(t, &ev, &e), &e);
    al_sae_trainer_free(t);
    printf("  eval: L0 %.2f, FVE %.4f, mse %.4f, dead %.3f, dense %.3f, CE clean %.4f sae %.4f "
           "zero %.4f, recovered %.4f\n",
           ev.l0, ev.fve, ev.mse, ev.dead_frac, ev.dense_frac, ev.ce_clean, ev.ce_sae, ev.ce_zero,
           ev.ce_recovered);
    /* recompute from the saved files */
    al_model m;
    al_sae s;
    al_sae_meta meta;
    char md[1100];
    snprintf(md, sizeof md, "%s/m2", dir);
    CHECK_OK(al_ckpt_load(md, &m, NULL, &e), &e);
    CHECK_OK(al_sae_load(t_path("ev"), &s, &meta, &e), &e);
    al_tokens tok, val;
    char data[1100];
    snprintf(data, sizeof data, "%s/s.train.bin", dir);
    CHECK_OK(al_tokens_load(data, &tok, &e), &e);
    size_t nv = (size_t)((double)tok.n * 0.05);
    val.tok = tok.tok + tok.n - nv;
    val.n = nv;
    val.max_id = tok.max_id;
    const int W = 8, T = 32, H = 4, D = 8, d = 32;
    int in[8 * 32], tg[8 * 32];
    /* the evaluation's windows: 8 evenly spread over the held-out tail */
    CHECK_OK(al_batch_fixed(&val, W, T, 0, 1, in, tg, &e), &e);
    CHECK_OK(al_model_forward(&m, in, tg, W, T, &e), &e);
    double clean = m.mean_loss;
    /* each window's loss sum and count, for ce_clean's standard error */
    double lw[8] = {0}, cw[8] = {0};
    for (int b = 0; b < W; b++)
        for (int t = 0; t < T; t++)
            if (tg[b * T + t] >= 0) lw[b] += m.losses[b * T + t], cw[b] += 1;
    float *z = malloc(sizeof(float) * W * T * d);
    memcpy(z, m.z + (size_t)1 * W * T * H * D, sizeof(float) * W * T * d); /* layer 1 */
    const float sc = (float)meta.scale;
    for (int i = 0; i < W * T * d; i++) z[i] *= sc;
    CHECK_OK(al_sae_encode(&s, z, W * T, &e), &e);
    double sse = 0, sum[32] = {0}, sq[32] = {0}, l0 = 0;
    for (int b = 0; b < W * T; b++)
        for (int r = 0; r < d; r++) {
            double v = z[b * d + r], q = v - s.xhat[b * d + r];
            sse += q * q;
            sum[r] += v;
            sq[r] += v * v;
        }
    for (int j = 0; j < W * T * s.cfg.k; j++) l0 += s.val[j] > 0;
    double var = 0;
    for (int r = 0; r < d; r++) var += sq[r] - sum[r] * sum[r] / (W * T);
    CHECK_NEAR(ev.fve, 1 - sse / var, 1e-9);
    CHECK_NEAR(ev.l0, l0 / (W * T), 1e-12);
    CHECK_NEAR(ev.mse, sse / (W * T), 1e-9);
    /* the intervals' standard errors by the delta method for a ratio of
     * window sums, by hand: fve's (1 − SSE/SST, SST about the mean of all
     * windows) and ce_clean's */
    {
        double ew[8] = {0}, tw[8] = {0}, mu[32], R = sse / var, Rc = 0, sc2 = 0, ss = 0, sl = 0;
        for (int r = 0; r < d; r++) mu[r] = sum[r] / (W * T);
        for (int b = 0; b < W * T; b++)
            for (int r = 0; r < d; r++) {
                double v = z[b * d + r], q = v - s.xhat[b * d + r];
                ew[b / T] += q * q, tw[b / T] += (v - mu[r]) * (v - mu[r]);
            }
        for (int k = 0; k < W; k++) Rc += lw[k], sc2 += cw[k];
        Rc /= sc2;
        for (int k = 0; k < W; k++) {
            ss += (ew[k] - R * tw[k]) * (ew[k] - R * tw[k]);
            sl += (lw[k] - Rc * cw[k]) * (lw[k] - Rc * cw[k]);
        }
        double se_f = sqrt(ss / (W - 1)) / sqrt((double)W) / (var / W);
        double se_c = sqrt(sl / (W - 1)) / sqrt((double)W) / (sc2 / W);
        CHECK(ev.ci_n == W);
        CHECKF(fabs(ev.ci_fve.se - se_f) <= 1e-6 * se_f, "fve se %.9g, by hand %.9g", ev.ci_fve.se,
               se_f);
        CHECKF(fabs(ev.ci_ce_clean.se - se_c) <= 1e-6 * se_c, "ce_clean se %.9g, by hand %.9g",
               ev.ci_ce_clean.se, se_c);
        CHECK(ev.ci_fve.lo < ev.fve && ev.fve < ev.ci_fve.hi && ev.ci_ce_recovered.se > 0);
    }
    /* the same from the saved files by PyTorch (tests/sae_ref.py --eval),
     * on the raw z (the reference applies cfg.json's scale itself) */
    {
        FILE *f = fopen(t_path("acts.json"), "w");
        CHECK(f != NULL);
        if (f) {
            fputs("{\"x\": [", f);
            const float *zr = m.z + (size_t)1 * W * T * H * D;
            for (int i = 0; i < W * T * d; i++) fprintf(f, i ? ",%.9g" : "%.9g", (double)zr[i]);
            fprintf(f, "], \"l0\": %.17g, \"mse\": %.17g, \"fve\": %.17g}\n", ev.l0, ev.mse,
                    ev.fve);
            fclose(f);
            char args[2400];
            snprintf(args, sizeof args, "--eval %s %s", t_path("ev"), t_path("acts.json"));
            int rc =
                t_sh("/usr/bin/python3 tests/sae_ref.py %s > %s 2>&1", args, t_path("ref.out"));
            char *out = t_slurp(t_path("ref.out"));
            if (rc == 77 || rc == 127) {
                printf("  (no PyTorch: the reference recomputation was skipped)\n");
            } else {
                CHECKF(rc == 0 && out && strstr(out, "fve ref"), "sae_ref.py --eval exit %d: %s",
                       rc, out ? out : "");
                const char *mx = out ? strstr(out, "max ") : NULL;
                printf("  PyTorch recomputation from the saved SAE: %s", mx ? mx : "?\n");
            }
            free(out);
        }
    }
    /* z replacement per head of layer 1: zeros, then the reconstruction */
    float *rep = calloc((size_t)W * T * d, sizeof(float));
    const float *reps[8] = {0};
    float *perhead = calloc((size_t)H * W * T * D, sizeof(float));
    for (int h = 0; h < H; h++) reps[H + h] = perhead + (size_t)h * W * T * D;
    CHECK_OK(al_zrep_hooks_add(&m, reps, &e), &e);
    CHECK_OK(al_model_forward(&m, in, tg, W, T, &e), &e);
    double zero = m.mean_loss;
    for (int b = 0; b < W * T; b++)
        for (int h = 0; h < H; h++)
            for (int q = 0; q < D; q++)
                perhead[((size_t)h * W * T + b) * D + q] = s.xhat[b * d + h * D + q] / sc;
    CHECK_OK(al_model_forward(&m, in, tg, W, T, &e), &e);
    double rec = m.mean_loss;
    al_hook_remove(&m, reps);
    CHECK_NEAR(ev.ce_clean, clean, 1e-6);
    CHECK_NEAR(ev.ce_zero, zero, 1e-6);
    CHECK_NEAR(ev.ce_sae, rec, 1e-5);
    CHECK_NEAR(ev.ce_recovered, (zero - rec) / (zero - clean), 1e-4);
    CHECK(ev.ce_zero > ev.ce_clean);
    free(rep);
    free(perhead);
    free(z);
    al_tokens_free(&tok);
    al_sae_free(&s);
    al_model_free(&m);
}

/* Bad input: one line naming the problem, no trainer, nothing written. */
TEST(sae_train_bad_input) {
    const char *dir = model_dir();
    struct {
        int what;
        const char *want;
    } cases[] = {{0, "layer 2: the model in"},
                 {1, "k 300 is larger than the dictionary (d_sae 128)"},
                 {2, "l1_coeff must be finite"},
                 {3, "aux_coeff must be finite"},
                 {4, "not a model directory"},
                 {5, "lr must be positive"},
                 {6, "/nonexistent/v.bin"},
                 {7, "site must be z or resid_pre"},
                 {8, "expansion must be in 1..1024 (got 0)"},
                 {9, "steps must be positive (got 0)"},
                 {10, "batch must be in 1..1048576 (got 0)"},
                 {11, "buffer_batches must be in 1..1024 (got 2000)"},
                 {12, "warmup must be >= 0 (got -1)"},
                 {13, "decay_frac must be in [0,1] (got 2)"},
                 {14, "beta1 and beta2 must be in [0,1)"},
                 {15, "eps must be positive"},
                 {16, "norm_batches must be >= 1"},
                 {17, "val_fraction must be in (0,1) (got 1)"},
                 {18, "eval_windows must be >= 1"},
                 {19, "ckpt_every and stop_at must be >= 0"},
                 {20, "resume and force exclude each other"},
                 {21, "layer must be >= 0 (got -1)"},
                 {22, "data is required"},
                 {23, "model (a model directory) is required"},
                 {24, "out (the SAE directory) is required"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[1100];
        snprintf(out, sizeof out, "%s/bad%zu", t_tmpdir(), i);
        al_sae_train_opts o = model_opts(dir, out);
        switch (cases[i].what) {
        case 0: o.layer = 2; break;
        case 1: o.k = 300; break;
        case 2:
            o.arch = AL_SAE_L1;
            o.l1_coeff = NAN;
            break;
        case 3: o.aux_coeff = INFINITY; break;
        case 4: o.model = dir; break;
        case 5: o.lr = NAN; break;
        case 6: o.val = "/nonexistent/v.bin"; break;
        case 7: o.site = 7; break;
        case 8: o.expansion = 0; break;
        case 9: o.steps = 0; break;
        case 10: o.batch = 0; break;
        case 11: o.buffer_batches = 2000; break;
        case 12: o.warmup = -1; break;
        case 13: o.decay_frac = 2; break;
        case 14: o.beta2 = 1; break;
        case 15: o.eps = 0; break;
        case 16: o.norm_batches = 0; break;
        case 17: o.val_fraction = 1; break;
        case 18: o.eval_windows = 0; break;
        case 19: o.ckpt_every = -1; break;
        case 20: o.resume = o.force = 1; break;
        case 21: o.layer = -1; break;
        case 22: o.data = ""; break;
        case 23: o.model = NULL; break;
        case 24: o.out = NULL; break;
        }
        al_sae_trainer *t = (al_sae_trainer *)1;
        al_err e = {{0}};
        CHECK(al_sae_trainer_init(&t, &o, &e) == -1 && t == NULL);
        CHECKF(strstr(e.msg, cases[i].want) && !strchr(e.msg, '\n'), "case %zu: [%s] want [%s]", i,
               e.msg, cases[i].want);
        CHECKF(!al_file_exists(out), "case %zu wrote %s", i, out);
    }
    /* an existing SAE is not overwritten without force */
    al_sae_train_opts o = model_opts(dir, t_path("exists"));
    o.steps = 2;
    int stopped;
    run_all(&o, NULL, NULL, &stopped);
    al_sae_trainer *t;
    al_err e;
    CHECK(al_sae_trainer_init(&t, &o, &e) == -1 && strstr(e.msg, "already holds an SAE"));
}

/* ------------------------------------------------------ crash safety */

/* In a child process (the test process has not started OpenMP, so the
 * child may): train o to the end, resuming when out holds a checkpoint;
 * exit 0 when done. */
static pid_t spawn_run(al_sae_train_opts o) {
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p != 0) return p;
    char rp[1200];
    snprintf(rp, sizeof rp, "%s/%s", o.out, AL_SAE_RESUME_FILE);
    o.resume = al_file_exists(rp);
    o.force = !o.resume;
    al_quiet = 1;
    al_sae_trainer *t;
    al_err e;
    int stopped = 0;
    if (al_sae_trainer_init(&t, &o, &e) != 0) {
        fprintf(stderr, "child: %s\n", e.msg);
        _exit(2);
    }
    int rc = al_sae_trainer_run(t, &stopped, &e);
    al_sae_trainer_free(t);
    _exit(rc == 0 && !stopped ? 0 : 3);
}

static int wait_rc(pid_t p) {
    int st = 0;
    if (waitpid(p, &st, 0) != p) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The step in DIR's resume file (−1: none; −2: unreadable). */
static long resume_step(const char *dir) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s", dir, AL_SAE_RESUME_FILE);
    if (!al_file_exists(p)) return -1;
    al_st_file *f;
    al_err e;
    if (al_st_open(p, &f, &e) != 0) return -2;
    const char *s = al_st_meta(f, "step");
    long step = s ? strtol(s, NULL, 10) : -2;
    al_st_close(f);
    return step;
}

/* SIGKILL at random moments of a run that checkpoints at every buffer
 * boundary, then resume, until it finishes: after every kill the
 * directory holds a whole checkpoint (the resume file and the SAELens
 * pair load) no older than the one before, and the final files are
 * byte-identical to those of a run never interrupted. */
TEST(sae_train_crash) {
    planted p;
    planted_init(&p, 5);
    char ref[1100], out[1100];
    snprintf(ref, sizeof ref, "%s", t_path("ref"));
    snprintf(out, sizeof out, "%s", t_path("crash"));
    al_sae_train_opts o = planted_opts(&p, ref);
    o.steps = 800;
    o.ckpt_every = 1; /* every boundary: 4 steps */
    CHECK(wait_rc(spawn_run(o)) == 0);
    o.out = out;
    al_rng r;
    al_rng_seed(&r, 11);
    int kills = 0, done = 0;
    long last = -1;
    for (int it = 0; it < 80 && !done; it++) {
        pid_t c = spawn_run(o);
        /* random delays, growing so that a slow (sanitizer) build finishes too */
        long ms = 5 + (long)al_rng_below(&r, 60) + 10L * it;
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        kill(c, SIGKILL);
        int rc = wait_rc(c);
        if (rc == 0) {
            done = 1;
            break;
        }
        CHECKF(rc == 128 + SIGKILL, "child exit %d", rc);
        kills++;
        long st = resume_step(out);
        CHECKF(st != -2, "after kill %d the resume file is unreadable", kills);
        CHECKF(st >= last, "checkpoint went back from step %ld to %ld", last, st);
        if (st >= 0) {
            al_sae s;
            al_sae_meta m;
            al_err e;
            CHECKF(al_sae_load(out, &s, &m, &e) == 0, "after kill %d: %s", kills, e.msg);
            al_sae_free(&s);
            last = st;
        }
    }
    printf("  crash: %d kills, finished %d\n", kills, done);
    CHECK(done);
    CHECKF(kills >= 3, "only %d kills landed before the run finished", kills);
    CHECK(t_sh("cmp -s %s/sae_resume.safetensors %s/sae_resume.safetensors", ref, out) == 0);
    CHECK(t_sh("cmp -s %s/sae_weights.safetensors %s/sae_weights.safetensors", ref, out) == 0);
    CHECK(t_sh("cmp -s %s/cfg.json %s/cfg.json", ref, out) == 0);
    CHECK(t_sh("ls %s | grep -q tmp", out) != 0); /* strays removed at each start */
}

/* A stop request (the flag a signal handler sets) saves at the next
 * buffer boundary and reports stopped; the resumed run ends on the bits
 * of an uninterrupted one. */
static volatile sig_atomic_t stop_flag;
static int stop_calls;
static int stopping_source(void *ctx, float *x, int n, al_rng *rng, al_err *e) {
    if (++stop_calls == 4) stop_flag = 1; /* the 4th buffer (after the scale's draw) */
    return planted_source(ctx, x, n, rng, e);
}

TEST(sae_train_stop_flag) {
    planted p;
    planted_init(&p, 6);
    al_sae_train_opts o = planted_opts(&p, t_path("full"));
    o.steps = 40;
    al_sae full, res;
    int stopped = 0;
    run_all(&o, &full, NULL, &stopped);
    o.out = t_path("stopped");
    o.source = stopping_source;
    o.stop = &stop_flag;
    al_sae_trainer *t;
    al_err e;
    CHECK_OK(al_sae_trainer_init(&t, &o, &e), &e);
    CHECK_OK(al_sae_trainer_run(t, &stopped, &e), &e);
    CHECK(stopped == 1 &&
          al_sae_trainer_step(t) == 12); /* buffers of 4 steps: the 3rd ends at 12 */
    al_sae_trainer_free(t);
    CHECK(resume_step(t_path("stopped")) == 12);
    stop_flag = 0;
    o.stop = NULL;
    o.resume = 1;
    run_all(&o, &res, NULL, &stopped);
    CHECK(stopped == 0);
    CHECK(memcmp(full.params, res.params, full.n_params * sizeof(float)) == 0);
    al_sae_free(&full);
    al_sae_free(&res);
}

/* The L1 ("standard") architecture through the trainer: on the planted
 * data it explains most of the variance with a sparse code, its decoder
 * rows stay at unit norm, and the directory it saves loads as
 * "standard" with its coefficient. */
TEST(sae_train_l1) {
    planted p;
    planted_init(&p, 8);
    al_sae_train_opts o = planted_opts(&p, t_path("l1"));
    o.arch = AL_SAE_L1;
    o.l1_coeff = 0.3;
    o.steps = 1500;
    al_sae_trainer *t;
    al_err e;
    CHECK_OK(al_sae_trainer_init(&t, &o, &e), &e);
    if (!t) return;
    int stopped;
    CHECK_OK(al_sae_trainer_run(t, &stopped, &e), &e);
    al_sae_eval ev;
    CHECK_OK(al_sae_trainer_eval(t, &ev, &e), &e);
    const al_sae *s = al_sae_trainer_sae(t);
    printf("  l1: FVE %.4f, L0 %.2f of %d, dead %.2f\n", ev.fve, ev.l0, s->cfg.d_sae, ev.dead_frac);
    CHECKF(ev.fve > 0.9, "FVE %g", ev.fve);
    CHECKF(ev.l0 < 16, "L0 %g", ev.l0);
    for (int i = 0; i < s->cfg.d_sae; i++) {
        double q = 0;
        for (int r = 0; r < PL_D; r++) q += (double)s->W_dec[i * PL_D + r] * s->W_dec[i * PL_D + r];
        CHECK_NEAR(q, 1, 1e-5);
    }
    al_sae l;
    al_sae_meta m;
    CHECK_OK(al_sae_load(t_path("l1"), &l, &m, &e), &e);
    CHECK(l.cfg.arch == AL_SAE_L1 && l.cfg.l1_coeff == 0.3);
    CHECK(memcmp(l.params, s->params, s->n_params * sizeof(float)) == 0);
    al_sae_free(&l);
    al_sae_trainer_free(t);
}

/* The residual-stream site: d_in = d_model, hook name
 * blocks.L.hook_resid_pre, and the evaluation's activations are the
 * forward's own residual stream entering layer L (variance explained
 * recomputed from m->x). */
TEST(sae_train_resid_site) {
    const char *dir = model_dir();
    al_sae_train_opts o = model_opts(dir, t_path("resid"));
    o.site = AL_SAE_SITE_RESID_PRE;
    o.layer = 1;
    o.steps = 8;
    o.eval_windows = 8;
    al_sae_trainer *t;
    al_err e;
    CHECK_OK(al_sae_trainer_init(&t, &o, &e), &e);
    if (!t) return;
    int stopped;
    CHECK_OK(al_sae_trainer_run(t, &stopped, &e), &e);
    al_sae_eval ev;
    CHECK_OK(al_sae_trainer_eval(t, &ev, &e), &e);
    al_sae_trainer_free(t);
    char *cfg = t_slurp(t_path("resid/cfg.json"));
    CHECK(cfg && strstr(cfg, "\"hook_name\":\t\"blocks.1.hook_resid_pre\""));
    free(cfg);
    al_model m;
    al_sae s;
    al_sae_meta meta;
    char md[1100], data[1100];
    snprintf(md, sizeof md, "%s/m2", dir);
    snprintf(data, sizeof data, "%s/s.train.bin", dir);
    CHECK_OK(al_ckpt_load(md, &m, NULL, &e), &e);
    CHECK_OK(al_sae_load(t_path("resid"), &s, &meta, &e), &e);
    CHECK(s.cfg.d_in == 32 && meta.site == AL_SAE_SITE_RESID_PRE);
    al_tokens tok, val;
    CHECK_OK(al_tokens_load(data, &tok, &e), &e);
    size_t nv = (size_t)((double)tok.n * 0.05);
    val.tok = tok.tok + tok.n - nv;
    val.n = nv;
    val.max_id = tok.max_id;
    const int W = 8, T = 32, d = 32;
    int in[8 * 32], tg[8 * 32];
    CHECK_OK(al_batch_fixed(&val, W, T, 0, 1, in, tg, &e), &e);
    CHECK_OK(al_model_forward(&m, in, tg, W, T, &e), &e);
    float x[8 * 32 * 32];
    memcpy(x, m.x + (size_t)1 * W * T * d, sizeof x); /* the stream entering layer 1 */
    for (int i = 0; i < W * T * d; i++) x[i] *= (float)meta.scale;
    al_sae_eval ev2;
    CHECK_OK(al_sae_evaluate_acts(&s, x, W * T, &ev2, &e), &e);
    CHECK_NEAR(ev.fve, ev2.fve, 1e-9);
    CHECK_NEAR(ev.l0, ev2.l0, 1e-12);
    CHECK_NEAR(ev.ce_clean, m.mean_loss, 1e-6);
    CHECK(isfinite(ev.ce_recovered) && ev.ce_zero > ev.ce_clean);
    printf("  resid: FVE %.4f, L0 %.2f, CE recovered %.4f\n", ev.fve, ev.l0, ev.ce_recovered);
    al_tokens_free(&tok);
    al_sae_free(&s);
    al_model_free(&m);
}
