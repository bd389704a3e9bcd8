/* test_process.c -- weight processing (process.h): a processed model's
 * log-probs are the unprocessed one's (to 1e-5), on LayerNorm, LNPre,
 * shortformer and plain models; the weights take the shapes
 * TransformerLens's processing gives them; what was done is recorded in
 * config.json and read back. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/process.h"
#include "test.h"

enum { PB = 3, PT = 9 };

static void make(al_model *m, int L, int norm, unsigned biases, int pos, int tied) {
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = 24, c.n_heads = 3, c.d_head = 8, c.n_ctx = 12, c.d_vocab = 17;
    c.norm_type = norm, c.biases = biases, c.pos_type = pos, c.tied_embeddings = tied, c.seed = 4;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
    al_rng r;
    al_rng_seed(&r, 77);
    for (int p = AL_P_LN1W; p < AL_NPARAM; p++) /* LayerNorm and biases far from 1 and 0 */
        for (size_t i = 0; i < m->param_size[p]; i++) {
            double v = 0.5 * al_rng_normal(&r);
            m->p[p][i] = (float)(p == AL_P_LN1W || p == AL_P_LNFW ? 1 + v : v);
        }
    for (size_t i = 0; i < m->param_size[AL_P_WU]; i++) m->p[AL_P_WU][i] *= 20.0f;
}

/* log-probs (B, T, V) of a fixed batch */
static void logprobs(al_model *m, double *out) {
    int in[PB * PT];
    for (int i = 0; i < PB * PT; i++) in[i] = (i * 7 + 3) % m->cfg.d_vocab;
    al_err e;
    CHECK_OK(al_model_forward(m, in, NULL, PB, PT, &e), &e);
    for (int i = 0; i < PB * PT * m->cfg.d_vocab; i++) out[i] = log((double)m->probs[i]);
}

/* Process m with o: the log-probs must not move by more than 1e-5; returns
 * the largest move. */
static double same_logprobs(al_model *m, const al_process_opts *o) {
    size_t n = (size_t)PB * PT * m->cfg.d_vocab;
    double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n), worst = 0;
    logprobs(m, a);
    al_err e;
    CHECK_OK(al_model_process(m, o, &e), &e);
    logprobs(m, b);
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    CHECKF(worst <= 1e-5, "log-probs moved by %g", worst);
    free(a);
    free(b);
    return worst;
}

static double col_mean(const float *x, size_t rows, size_t stride, size_t col) {
    double s = 0;
    for (size_t r = 0; r < rows; r++) s += x[r * stride + col];
    return s / (double)rows;
}

/* TransformerLens's defaults on an LN model with every bias: LN folded
 * (LNPre, no ln tensors), writing weights and W_U centred, b_V in b_O. */
TEST(process_ln_model_defaults) {
    al_model m;
    make(&m, 2, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 0);
    al_process_opts o = AL_PROCESS_OPTS_INIT;
    double w = same_logprobs(&m, &o);
    fprintf(stderr, "    LN, all biases: log-probs moved by %.2e at most\n", w);
    const al_config *c = &m.cfg;
    CHECK(c->norm_type == AL_NORM_LNPRE && c->processed == AL_PROC_ALL && c->biases == AL_BIAS_ALL);
    CHECK(!m.p[AL_P_LN1W] && !m.p[AL_P_LNFB]);
    int C = c->d_model, V = c->d_vocab, D = c->d_head;
    double worst = 0;
    for (int v = 0; v < V; v++) { /* each embedding's mean over d_model */
        double s = 0;
        for (int k = 0; k < C; k++) s += m.p[AL_P_WE][(size_t)v * C + k];
        worst = fmax(worst, fabs(s / C));
    }
    for (int k = 0; k < C; k++)
        worst = fmax(worst, fabs(col_mean(m.p[AL_P_WU] + (size_t)k * V, V, 1, 0)));
    for (int v = 0; v < V; v++) worst = fmax(worst, fabs(col_mean(m.p[AL_P_WU], C, V, v)));
    for (int d = 0; d < D; d++) worst = fmax(worst, fabs(col_mean(al_head_wq(&m, 1, 2), C, D, d)));
    CHECKF(worst < 1e-6, "a centred weight has mean %g", worst);
    for (size_t i = 0; i < m.param_size[AL_P_BV]; i++) CHECK(m.p[AL_P_BV][i] == 0.0f);
    /* recorded in config.json, and read back */
    char *js = al_config_to_json(c);
    CHECK(js && strstr(js, "\"processing\":\t[\"fold_ln\", \"center_writing_weights\", "
                           "\"center_unembed\", \"fold_value_biases\"]"));
    al_config back;
    al_err e;
    CHECK_OK(al_config_from_json(js, &back, "config.json", &e), &e);
    CHECK(back.processed == AL_PROC_ALL && back.norm_type == AL_NORM_LNPRE);
    free(js);
    /* a checkpoint of it loads with the same log-probs */
    const char *dir = t_path("p");
    CHECK_OK(al_ckpt_save(dir, &m, NULL, NULL, NULL, NULL, &e), &e);
    al_model r;
    CHECK_OK(al_ckpt_load(dir, &r, NULL, &e), &e);
    CHECK(r.cfg.processed == AL_PROC_ALL && !memcmp(r.params, m.params, 4 * m.n_params));
    al_model_free(&r);
    al_model_free(&m);
}

/* Shortformer: no LN folding and no centring, value biases still folded. */
TEST(process_shortformer_only_value_biases) {
    for (int norm = AL_NORM_LN; norm <= AL_NORM_LNPRE; norm++) {
        al_model m;
        make(&m, 2, norm, AL_BIAS_V | AL_BIAS_Q, AL_POS_SHORTFORMER, 0);
        al_process_opts o = AL_PROCESS_OPTS_INIT;
        double w = same_logprobs(&m, &o);
        fprintf(stderr, "    shortformer, norm %d: log-probs moved by %.2e at most\n", norm, w);
        CHECK(m.cfg.processed == AL_PROC_FOLD_VALUE_BIASES && m.cfg.norm_type == norm);
        CHECK(m.cfg.biases == (AL_BIAS_V | AL_BIAS_Q | AL_BIAS_O));
        al_model_free(&m);
    }
}

static int noop(al_hook_act *a, void *ctx, al_err *e) {
    (void)a, (void)ctx, (void)e;
    return 0;
}

/* LNPre (centring only), each step alone, a tied plain model (centring
 * the unembedding unties it), and the refusal with hooks. */
TEST(process_each_step_and_plain) {
    for (unsigned step = 1; step <= AL_PROC_FOLD_VALUE_BIASES; step <<= 1) {
        al_model m;
        make(&m, 3, AL_NORM_LNPRE, AL_BIAS_V | AL_BIAS_U, AL_POS_STANDARD, step == 2);
        al_process_opts o = {step == 1, step == 2, step == 4, step == 8};
        same_logprobs(&m, &o);
        CHECKF(m.cfg.processed == step, "step %u: processed %u", step, m.cfg.processed);
        al_model_free(&m);
    }
    al_model m;
    make(&m, 2, AL_NORM_NONE, 0, AL_POS_STANDARD, 1);
    al_process_opts o = AL_PROCESS_OPTS_INIT;
    double w = same_logprobs(&m, &o);
    fprintf(stderr, "    plain, tied: log-probs moved by %.2e at most\n", w);
    CHECK(m.cfg.processed == AL_PROC_CENTER_UNEMBED && !m.cfg.tied_embeddings &&
          m.cfg.norm_type == AL_NORM_NONE && m.cfg.biases == 0);
    static int dummy;
    al_err e;
    CHECK_OK(al_hook_add(&m, AL_HOOK_Z, -1, noop, &dummy, &e), &e);
    al_config before = m.cfg;
    CHECK(al_model_process(&m, &o, &e) == -1 && strstr(e.msg, "remove the model's hooks"));
    CHECK(!memcmp(&before, &m.cfg, sizeof before));
    al_model_free(&m);
}
