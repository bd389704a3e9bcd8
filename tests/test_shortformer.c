/* test_shortformer.c -- shortformer positions (model.h, AL_POS_SHORTFORMER):
 * W_pos added to every head's query and key inputs, never to the residual
 * stream. The engine against finite differences and against a naive
 * forward written from the formula; checkpoints round-trip the type. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/experiment.h"
#include "attnlab/model.h"
#include "test.h"

static al_config sf_cfg(int L, int tied) {
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = 16, c.n_heads = 2, c.d_head = 8, c.n_ctx = 8;
    c.d_vocab = 11, c.tied_embeddings = tied, c.seed = 17 + (uint64_t)L;
    c.pos_type = AL_POS_SHORTFORMER;
    return c;
}

static void rand_tokens(int *in, int *tg, int n, int V, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        in[i] = (int)al_rng_below(&r, (uint32_t)V);
        if (tg) tg[i] = (int)al_rng_below(&r, (uint32_t)V);
    }
}

static double sf_loss(al_model *m, const int *in, const int *tg, int B, int T) {
    al_err e;
    if (al_model_forward(m, in, tg, B, T, &e) != 0) return NAN;
    double s = 0;
    for (int i = 0; i < B * T; i++) s += m->losses[i];
    return s / m->n_valid;
}

/* As test_model.c's check: the directional derivative along a random
 * direction of the whole tensor to 1e-2 relative, and four entries to an
 * absolute tolerance. Returns the directional relative error. */
static double fd_tensor(al_model *m, float *w, const float *g, size_t n, const char *name,
                        const int *in, const int *tg, int B, int T) {
    const double eps = 1e-2;
    float *u = malloc(n * sizeof *u);
    al_rng r;
    al_rng_seed(&r, 41 + n);
    double dir = 0;
    for (size_t i = 0; i < n; i++) {
        u[i] = (float)al_rng_normal(&r);
        dir += (double)u[i] * g[i];
    }
    for (size_t i = 0; i < n; i++) w[i] += (float)(eps * u[i]);
    double lp = sf_loss(m, in, tg, B, T);
    for (size_t i = 0; i < n; i++) w[i] -= (float)(2 * eps * u[i]);
    double lm = sf_loss(m, in, tg, B, T);
    for (size_t i = 0; i < n; i++) w[i] += (float)(eps * u[i]);
    double fd = (lp - lm) / (2 * eps);
    CHECKF(fabs(fd - dir) <= 1e-2 * fabs(fd) + 2e-4,
           "%s: directional derivative fd %.6g vs analytic %.6g", name, fd, dir);
    CHECKF(fabs(dir) > 1e-4, "%s: directional derivative %.3g is too small to test anything", name,
           dir);
    double rel = fabs(fd - dir) / fabs(fd);
    for (int k = 0; k < 4; k++) {
        size_t i = al_rng_below(&r, (uint32_t)n);
        float keep = w[i];
        w[i] = keep + (float)eps;
        lp = sf_loss(m, in, tg, B, T);
        w[i] = keep - (float)eps;
        lm = sf_loss(m, in, tg, B, T);
        w[i] = keep;
        fd = (lp - lm) / (2 * eps);
        CHECKF(fabs(fd - g[i]) <= 2e-2 * fabs(fd) + 3e-4, "%s[%zu]: fd %.6g vs analytic %.6g", name,
               i, fd, g[i]);
    }
    free(u);
    return rel;
}

static void sf_gradcheck(int L, int tied) {
    al_config c = sf_cfg(L, tied);
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    int B = 2, T = 7, BT = B * T;
    int in[14], tg[14];
    rand_tokens(in, tg, BT, c.d_vocab, 5);
    tg[2] = -1;
    if (!tied) /* logits of order 1, not ≈ 0 as at init: larger gradients everywhere */
        for (size_t i = 0; i < m.param_size[AL_P_WU]; i++) m.p[AL_P_WU][i] *= (float)c.d_model;
    for (int i = 0; i < L * c.n_heads; i++) m.gates[i] = 0.5f + 0.25f * (float)i;
    CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
    CHECK_OK(al_model_backward(&m, &e), &e);
    float *grads = malloc(sizeof(float) * m.n_params);
    memcpy(grads, m.grads, sizeof(float) * m.n_params);
    float gate_g[16];
    memcpy(gate_g, m.gate_grads, sizeof(float) * L * c.n_heads);
    static const char *names[] = {"W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_U"};
    size_t off = 0;
    double worst = 0;
    for (int p = 0; p < AL_NPARAM; p++) {
        if (m.param_size[p]) {
            double r = fd_tensor(&m, m.p[p], grads + off, m.param_size[p], names[p], in, tg, B, T);
            if (r > worst) worst = r;
        }
        off += m.param_size[p];
    }
    double r = fd_tensor(&m, m.gates, gate_g, (size_t)L * c.n_heads, "gates", in, tg, B, T);
    if (r > worst) worst = r;
    /* W_pos rows past T are never read */
    const float *gp = grads + m.param_size[AL_P_WE];
    for (size_t i = (size_t)T * c.d_model; i < m.param_size[AL_P_WPOS]; i++)
        CHECKF(gp[i] == 0.0f, "W_pos grad at unused row %zu: %g", i / c.d_model, gp[i]);
    fprintf(stderr, "    shortformer L=%d tied=%d: max directional FD rel error %.2e\n", L, tied,
            worst);
    free(grads);
    al_model_free(&m);
}

TEST(shortformer_gradcheck_1layer) { sf_gradcheck(1, 0); }
TEST(shortformer_gradcheck_2layer) { sf_gradcheck(2, 0); }
TEST(shortformer_gradcheck_tied) { sf_gradcheck(2, 1); }

/* The formula, naively in double: x0 = W_E[tok]; q, k from x + W_pos[t],
 * v from x; logits = x_L W_U. */
static void naive_logits(const al_model *m, const int *tok, int T, double *logits) {
    const al_config *c = &m->cfg;
    int C = c->d_model, H = c->n_heads, D = c->d_head, V = c->d_vocab, L = c->n_layers;
    double *x = calloc((size_t)T * C, sizeof *x), *xn = calloc((size_t)T * C, sizeof *xn);
    double *q = malloc(sizeof(double) * T * D), *k = malloc(sizeof(double) * T * D),
           *v = malloc(sizeof(double) * T * D), *a = malloc(sizeof(double) * T);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < C; i++) x[t * C + i] = m->p[AL_P_WE][(size_t)tok[t] * C + i];
    for (int l = 0; l < L; l++) {
        memcpy(xn, x, sizeof(double) * T * C);
        for (int h = 0; h < H; h++) {
            const float *wq = al_head_wq(m, l, h), *wk = al_head_wk(m, l, h),
                        *wv = al_head_wv(m, l, h), *wo = al_head_wo(m, l, h);
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    double sq = 0, sk = 0, sv = 0;
                    for (int i = 0; i < C; i++) {
                        double xi = x[t * C + i], pi = m->p[AL_P_WPOS][(size_t)t * C + i];
                        sq += (xi + pi) * wq[i * D + d];
                        sk += (xi + pi) * wk[i * D + d];
                        sv += xi * wv[i * D + d];
                    }
                    q[t * D + d] = sq, k[t * D + d] = sk, v[t * D + d] = sv;
                }
            for (int t = 0; t < T; t++) {
                double mx = -1e300, s = 0;
                for (int u = 0; u <= t; u++) {
                    double dot = 0;
                    for (int d = 0; d < D; d++) dot += q[t * D + d] * k[u * D + d];
                    a[u] = dot / sqrt((double)D);
                    if (a[u] > mx) mx = a[u];
                }
                for (int u = 0; u <= t; u++) s += a[u] = exp(a[u] - mx);
                double g = m->gates[l * H + h];
                for (int d = 0; d < D; d++) {
                    double z = 0;
                    for (int u = 0; u <= t; u++) z += a[u] / s * v[u * D + d];
                    for (int i = 0; i < C; i++) xn[t * C + i] += g * z * wo[d * C + i];
                }
            }
        }
        memcpy(x, xn, sizeof(double) * T * C);
    }
    for (int t = 0; t < T; t++)
        for (int j = 0; j < V; j++) {
            double s = 0;
            for (int i = 0; i < C; i++)
                s += x[t * C + i] * (c->tied_embeddings ? m->p[AL_P_WE][(size_t)j * C + i]
                                                        : m->p[AL_P_WU][(size_t)i * V + j]);
            logits[t * V + j] = s;
        }
    free(x), free(xn), free(q), free(k), free(v), free(a);
}

/* log p from the engine's probabilities against the naive logits' log
 * softmax, and the residual stream entering layer 0 is W_E alone. */
TEST(shortformer_forward_matches_formula) {
    for (int L = 1; L <= 2; L++) {
        al_config c = sf_cfg(L, 0);
        c.d_model = 24, c.n_heads = 3, c.n_ctx = 12;
        al_model m;
        al_err e;
        CHECK_OK(al_model_init(&m, &c, &e), &e);
        for (size_t i = 0; i < m.param_size[AL_P_WU]; i++) m.p[AL_P_WU][i] *= 24.0f;
        for (int i = 0; i < L * c.n_heads; i++) m.gates[i] = 0.6f + 0.3f * (float)i;
        int T = 12, tok[12];
        rand_tokens(tok, NULL, T, c.d_vocab, 9);
        CHECK_OK(al_model_forward(&m, tok, NULL, 1, T, &e), &e);
        for (int t = 0; t < T; t++)
            CHECK(memcmp(m.x + (size_t)t * c.d_model, m.p[AL_P_WE] + (size_t)tok[t] * c.d_model,
                         sizeof(float) * c.d_model) == 0);
        double *lg = malloc(sizeof(double) * T * c.d_vocab), worst = 0;
        naive_logits(&m, tok, T, lg);
        for (int t = 0; t < T; t++) {
            double mx = -1e300, s = 0;
            for (int j = 0; j < c.d_vocab; j++) mx = fmax(mx, lg[t * c.d_vocab + j]);
            for (int j = 0; j < c.d_vocab; j++) s += exp(lg[t * c.d_vocab + j] - mx);
            for (int j = 0; j < c.d_vocab; j++) {
                double lp = lg[t * c.d_vocab + j] - mx - log(s);
                double got = log(m.probs[(size_t)t * c.d_vocab + j]);
                worst = fmax(worst, fabs(got - lp));
            }
        }
        CHECKF(worst < 1e-4, "L=%d: log p differs from the formula by %.3g", L, worst);
        /* and it is not the standard model's: positions matter differently */
        m.cfg.pos_type = AL_POS_STANDARD;
        CHECK_OK(al_model_forward(&m, tok, NULL, 1, T, &e), &e);
        double d = 0;
        for (int j = 0; j < c.d_vocab; j++)
            d = fmax(d, fabs(log(m.probs[(size_t)(T - 1) * c.d_vocab + j]) -
                             (lg[(T - 1) * c.d_vocab + j])));
        CHECK(d > 1e-3);
        free(lg);
        al_model_free(&m);
    }
}

TEST(shortformer_config_json_round_trip) {
    al_config c = sf_cfg(2, 0);
    char *js = al_config_to_json(&c);
    CHECK(js && strstr(js, "\"positional_embedding_type\":\t\"shortformer\""));
    al_config r;
    al_err e;
    CHECK_OK(al_config_from_json(js, &r, NULL, &e), &e);
    CHECK(r.pos_type == AL_POS_SHORTFORMER);
    free(js);
    c.pos_type = AL_POS_STANDARD;
    js = al_config_to_json(&c);
    CHECK(js && strstr(js, "\"standard\""));
    CHECK_OK(al_config_from_json(js, &r, NULL, &e), &e);
    CHECK(r.pos_type == AL_POS_STANDARD);
    free(js);
    const char *bad = "{\"n_layers\": 1, \"d_model\": 8, \"n_heads\": 2, \"d_head\": 4, "
                      "\"n_ctx\": 8, \"d_vocab\": 5, \"positional_embedding_type\": \"rotary\"}";
    CHECK(al_config_from_json(bad, &r, "x.json", &e) == -1);
    CHECK(strstr(e.msg, "shortformer") != NULL);
    c.pos_type = 2;
    CHECK(al_config_validate(&c, &e) == -1);
}

/* A 2-layer shortformer model trained by the CLI reloads as shortformer
 * with the same logits, and saved again and reloaded, bit for bit. */
static void sf_tiny_model(const char *dir) {
    t_tiny_model(dir, 1, 2); /* corpus, tokenizer and token files */
    CHECK(t_sh("%s train --data %s/s.train.bin --val %s/s.val.bin --tokenizer %s/tok.json --out "
               "%s/sf --steps 30 --n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 "
               "--batch 4 --eval-every 0 --warmup 2 --lr 0.01 --threads 2 --pos shortformer "
               ">%s/train.log 2>&1",
               t_bin(), dir, dir, dir, dir, dir) == 0);
}

TEST(shortformer_checkpoint_reloads_same_logits) {
    t_pbuf dir = t_pcopy("."), sf = t_pcopy("sf"), again = t_pcopy("again");
    sf_tiny_model(dir.s);
    char *cfg = t_slurp(t_path("sf/config.json"));
    CHECK(cfg && strstr(cfg, "\"shortformer\""));
    free(cfg);
    char *log = t_slurp(t_path("train.log"));
    CHECK(log && strstr(log, "shortformer positions"));
    free(log);
    al_model m, m2;
    al_tokenizer *tok = NULL, *tok2 = NULL;
    al_err e;
    CHECK_OK(al_ckpt_load(sf.s, &m, &tok, &e), &e);
    CHECK(m.cfg.pos_type == AL_POS_SHORTFORMER);
    int T = 20, in[20];
    rand_tokens(in, NULL, T, m.cfg.d_vocab, 3);
    CHECK_OK(al_model_forward(&m, in, NULL, 1, T, &e), &e);
    size_t n = (size_t)T * m.cfg.d_vocab;
    float *p1 = malloc(sizeof(float) * n);
    memcpy(p1, m.probs, sizeof(float) * n);
    CHECK_OK(al_ckpt_save(again.s, &m, tok, NULL, NULL, NULL, &e), &e);
    CHECK_OK(al_ckpt_load(again.s, &m2, &tok2, &e), &e);
    CHECK(m2.cfg.pos_type == AL_POS_SHORTFORMER);
    CHECK_OK(al_model_forward(&m2, in, NULL, 1, T, &e), &e);
    CHECK(memcmp(p1, m2.probs, sizeof(float) * n) == 0);
    /* read as a standard model, the same weights give other logits */
    m2.cfg.pos_type = AL_POS_STANDARD;
    CHECK_OK(al_model_forward(&m2, in, NULL, 1, T, &e), &e);
    CHECK(memcmp(p1, m2.probs, sizeof(float) * n) != 0);
    /* and `attnlab run` reads it too */
    CHECK(t_sh("%s run --model %s --prompt 'the cat' >/dev/null 2>&1", t_bin(), sf.s) == 0);
    free(p1);
    al_model_free(&m);
    al_model_free(&m2);
    al_tok_free(tok);
    al_tok_free(tok2);
}

/* Every analysis runs on a shortformer model end to end and records a
 * finished run. */
TEST(shortformer_cli_every_analysis) {
    t_pbuf dir = t_pcopy("."), sf = t_pcopy("sf"), db = t_pcopy("r.db"), err = t_pcopy("err.txt");
    sf_tiny_model(dir.s);
    const char *task = "--probe-r 6 --n 4 --batch 2 --threads 2";
    static const char *const cmds[] = {"circuits --top-k 5",
                                       "scores --probe-r 6",
                                       "ablate --data %s/s.val.bin --each --probe-r 6",
                                       "patch %s",
                                       "paths %s",
                                       "attribute %s",
                                       "discover %s",
                                       "discover --method eap %s"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char args[512];
        if (strstr(cmds[i], "%s/"))
            snprintf(args, sizeof args, cmds[i], dir.s);
        else if (strstr(cmds[i], "%s"))
            snprintf(args, sizeof args, cmds[i], task);
        else
            snprintf(args, sizeof args, "%s", cmds[i]);
        int rc = t_sh("%s %s --model %s --db %s >%s/out%zu.txt 2>%s", t_bin(), args, sf.s, db.s,
                      dir.s, i, err.s);
        CHECKF(rc == 0, "attnlab %s: exit %d: %s", args, rc, t_slurp(err.s));
    }
    char *out = t_slurp(t_path("out0.txt"));
    CHECK(out && strstr(out, "shortformer positions")); /* circuits names the type */
    free(out);
    CHECK_SQL(db.s, "SELECT count(*), sum(status = 'done') FROM runs", "8|8");
    /* attribution: the pos component is 0 (no positions in the residual) */
    CHECK_SQL(db.s,
              "SELECT count(*) > 0, max(abs(value)) FROM logit_attribution WHERE component = 'pos'",
              "1|0.0");
    CHECK(
        t_sh(
            "%s heatmap --model %s --what qk-pos --layer 1 --head 2 --out %s/p.png >/dev/null 2>&1",
            t_bin(), sf.s, dir.s) == 0);
}

/* An experiment's model takes "pos" as any train option, and a type that
 * does not exist is refused when the file loads. */
TEST(shortformer_experiment_key) {
    const char *text =
        T_EXP_TINY_2L("sf") " \"analyses\": {}, \"pictures\": false, \"report\": false}";
    char *t2 = malloc(strlen(text) + 64);
    const char *cut = strstr(text, "\"n_layers\": 2}");
    CHECK(cut != NULL);
    if (!cut) return;
    sprintf(t2, "%.*s\"n_layers\": 2, \"pos\": \"shortformer\"}%s", (int)(cut - text), text,
            cut + strlen("\"n_layers\": 2}"));
    const char *p = t_write("sf.json", t2);
    al_experiment *x = NULL;
    al_err e = {{0}};
    CHECK_OK(al_exp_load(p, &x, &e), &e);
    if (x) CHECK(strstr(x->models[0].train, "\"pos\":\"shortformer\"") != NULL);
    al_exp_free(x);
    t_exp_refused(t2, "\"shortformer\"", "\"rotary\"", "\"standard\" or \"shortformer\"");
    free(t2);
}
