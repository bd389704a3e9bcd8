/* test_lnorm.c -- LayerNorm and biases: config.json keys and refusals,
 * the parameter tensors (names, shapes, order, initial values),
 * checkpoints of such models and the loader's refusals. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/hooks.h"
#include "attnlab/layers.h"
#include "attnlab/model.h"
#include "attnlab/safetensors.h"
#include "test.h"

static al_config ln_cfg(int L, int norm, unsigned biases) {
    al_config c = al_config_default();
    c.n_layers = L;
    c.d_model = 16;
    c.n_heads = 2;
    c.d_head = 8;
    c.n_ctx = 6;
    c.d_vocab = 13;
    c.norm_type = norm;
    c.biases = biases;
    c.seed = 21;
    return c;
}

TEST(lnorm_config_json_roundtrip) {
    al_config c = ln_cfg(2, AL_NORM_LN, AL_BIAS_Q | AL_BIAS_O | AL_BIAS_U), d;
    c.ln_eps = 1e-6;
    char *s = al_config_to_json(&c);
    CHECK(s != NULL);
    if (!s) return;
    CHECKF(strstr(s, "\"normalization_type\":\t\"LN\"") && strstr(s, "\"eps\":\t1e-06") &&
               strstr(s, "\"biases\":\t[\"b_Q\", \"b_O\", \"b_U\"]"),
           "config.json: %s", s);
    al_err e;
    memset(&d, 0xab, sizeof d);
    CHECK_OK(al_config_from_json(s, &d, "config.json", &e), &e);
    CHECK(d.norm_type == AL_NORM_LN && d.ln_eps == 1e-6 &&
          d.biases == (AL_BIAS_Q | AL_BIAS_O | AL_BIAS_U));
    free(s);
    /* LNPre, every bias */
    c.norm_type = AL_NORM_LNPRE, c.biases = AL_BIAS_ALL, c.ln_eps = 1e-5;
    s = al_config_to_json(&c);
    CHECK(strstr(s, "\"normalization_type\":\t\"LNPre\"") &&
          strstr(s, "[\"b_Q\", \"b_K\", \"b_V\", \"b_O\", \"b_U\"]"));
    CHECK_OK(al_config_from_json(s, &d, "config.json", &e), &e);
    CHECK(d.norm_type == AL_NORM_LNPRE && d.biases == AL_BIAS_ALL && d.ln_eps == 1e-5);
    free(s);
    /* a zeroed config's extras: the plain model, eps written as the default */
    al_config z;
    memset(&z, 0, sizeof z);
    z.n_layers = 1, z.d_model = 8, z.n_heads = 2, z.d_head = 4, z.n_ctx = 4, z.d_vocab = 5;
    CHECK(al_config_is_plain(&z));
    s = al_config_to_json(&z);
    CHECKF(strstr(s, "\"normalization_type\":\tnull") && strstr(s, "\"eps\":\t1e-05") &&
               strstr(s, "\"biases\":\t[]"),
           "config.json: %s", s);
    CHECK_OK(al_config_from_json(s, &d, "config.json", &e), &e);
    CHECK(d.norm_type == AL_NORM_NONE && d.biases == 0 && d.ln_eps == 1e-5);
    free(s);
    /* files written before these keys: the plain model, eps 1e-5 */
    CHECK_OK(al_config_from_json("{\"n_layers\":1,\"d_model\":8,\"n_heads\":2,\"d_head\":4,"
                                 "\"n_ctx\":4,\"d_vocab\":5,\"normalization_type\":null}",
                                 &d, "old.json", &e),
             &e);
    CHECK(d.norm_type == AL_NORM_NONE && d.biases == 0 && d.ln_eps == 1e-5);
}

TEST(lnorm_config_json_refuses) {
    const char *base = "\"n_layers\":1,\"d_model\":16,\"n_heads\":2,\"d_head\":8,\"n_ctx\":4,"
                       "\"d_vocab\":11";
    struct {
        const char *extra, *msg;
    } bad[] = {
        {",\"normalization_type\":\"RMSPre\"", "key 'normalization_type' must be null, \"LN\""},
        {",\"normalization_type\":true", "key 'normalization_type' must be null"},
        {",\"eps\":0", "key 'eps' must be a number in (0, 1]"},
        {",\"eps\":-1e-5", "key 'eps' must be a number in (0, 1]"},
        {",\"eps\":\"1e-5\"", "key 'eps' must be a number"},
        {",\"biases\":\"b_Q\"", "key 'biases' must be an array"},
        {",\"biases\":[\"b_Q\",\"b_X\"]", "key 'biases' holds something other than"},
        {",\"biases\":[\"b_Q\",1]", "key 'biases' holds something other than"},
        {",\"biases\":[\"b_O\",\"b_O\"]", "key 'biases' lists b_O twice"},
        {",\"use_attn_scale\":false", "key 'use_attn_scale' must be true"},
        {",\"attn_scale\":1.0", "key 'attn_scale' must be sqrt(d_head)"},
        {",\"attention_dir\":\"bidirectional\"", "key 'attention_dir' must be \"causal\""},
        {",\"use_local_attn\":true", "key 'use_local_attn' must be false"},
        {",\"final_rms\":true", "key 'final_rms' must be false"},
        {",\"scale_attn_by_inverse_layer_idx\":true", "key 'scale_attn_by_inverse_layer_idx'"},
        {",\"post_embedding_ln\":true", "key 'post_embedding_ln' must be false"},
        {",\"n_key_value_heads\":1", "key 'n_key_value_heads' must be null or n_heads (2)"},
        {",\"d_vocab_out\":7", "key 'd_vocab_out' must be d_vocab (11)"},
        {",\"output_logits_soft_cap\":30", "key 'output_logits_soft_cap' must be -1"},
        {",\"attn_scores_soft_cap\":50.0", "key 'attn_scores_soft_cap' must be -1"},
        {",\"processing\":\"fold_ln\"", "key 'processing' must be an array"},
        {",\"processing\":[\"fold_ln\",\"fold\"]", "key 'processing' holds something other than"},
        {",\"processing\":[\"center_unembed\",\"center_unembed\"]", "lists center_unembed twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "{%s%s}", base, bad[i].extra);
        al_config c;
        memset(&c, 0x5a, sizeof c);
        al_config keep = c;
        al_err e = {{0}};
        int rc = al_config_from_json(json, &c, "m/config.json", &e);
        CHECKF(rc == -1 && strstr(e.msg, bad[i].msg) && !strncmp(e.msg, "m/config.json: ", 15),
               "case %zu: '%s' want '%s'", i, e.msg, bad[i].msg);
        CHECKF(memcmp(&c, &keep, sizeof c) == 0, "case %zu changed the config", i);
    }
    /* the values that leave the model as attnlab computes it are accepted */
    const char *good[] =
        {",\"use_attn_scale\":true,\"attn_scale\":2.8284271247461903",
         ",\"attn_scale\":-1.0,\"attention_dir\":\"causal\",\"n_key_value_heads\":null",
         ",\"n_key_value_heads\":2,\"d_vocab_out\":-1,\"final_rms\":false",
         ",\"d_vocab_out\":11,\"output_logits_soft_cap\":-1.0,\"use_split_qkv_input\":true",
         ",\"normalization_type\":\"LNPre\",\"eps\":1e-12,\"biases\":[]"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "{%s%s}", base, good[i]);
        al_config c;
        al_err e;
        CHECKF(al_config_from_json(json, &c, "m/config.json", &e) == 0, "good case %zu: %s", i,
               e.msg);
    }
}

TEST(lnorm_config_validate_and_spec) {
    al_config c = ln_cfg(1, AL_NORM_LN, 0);
    al_err e;
    CHECK_OK(al_config_validate(&c, &e), &e);
    c.ln_eps = 0;
    CHECK(al_config_validate(&c, &e) == -1 && strstr(e.msg, "ln_eps must be positive"));
    c.norm_type = AL_NORM_NONE; /* unused without LayerNorm: 0 is fine */
    CHECK_OK(al_config_validate(&c, &e), &e);
    c.norm_type = 3;
    CHECK(al_config_validate(&c, &e) == -1 && strstr(e.msg, "norm_type must be"));
    c.norm_type = AL_NORM_NONE, c.biases = 32;
    CHECK(al_config_validate(&c, &e) == -1 && strstr(e.msg, "biases must be"));
    struct {
        const char *s;
        int rc;
        unsigned bits;
    } sp[] = {{"all", 0, AL_BIAS_ALL},
              {"none", 0, 0},
              {"qkvo,u", 0, AL_BIAS_ALL},
              {"qk", 0, AL_BIAS_Q | AL_BIAS_K},
              {"u", 0, AL_BIAS_U},
              {"o,v", 0, AL_BIAS_O | AL_BIAS_V},
              {"qq", -1, 0},
              {"x", -1, 0},
              {"", -1, 0},
              {",", -1, 0},
              {"All", -1, 0}};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        unsigned b = 999;
        int rc = al_bias_spec_parse(sp[i].s, &b);
        CHECKF(rc == sp[i].rc && (rc || b == sp[i].bits), "'%s': rc %d bits %u", sp[i].s, rc, b);
    }
    c = ln_cfg(1, AL_NORM_LNPRE, AL_BIAS_K | AL_BIAS_U);
    CHECK(al_config_plain_check(&c, "attribution", &e) == -1);
    CHECKF(strstr(e.msg, "attribution does not yet support LayerNorm") &&
               strstr(e.msg, "normalization_type LNPre, b_K, b_U"),
           "%s", e.msg);
}

/* The tensors a LayerNorm + bias model has, their names, shapes and
 * TransformerLens order in the checkpoint, and their initial values. */
TEST(lnorm_params_names_order_init) {
    al_model m, plain;
    al_err e;
    al_config c = ln_cfg(2, AL_NORM_LN, AL_BIAS_ALL), cp = ln_cfg(2, AL_NORM_NONE, 0);
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    CHECK_OK(al_model_init(&plain, &cp, &e), &e);
    /* the plain tensors come first and are the plain model's, bit for bit */
    size_t np = plain.n_params;
    CHECK(m.n_params == np + 2 * 2 * 16 + 3 * 2 * 2 * 8 + 2 * 16 + 2 * 16 + 13);
    CHECK(memcmp(m.params, plain.params, sizeof(float) * np) == 0);
    CHECK(al_param_decay_end(&m) == np && al_param_decay_end(&plain) == np);
    for (size_t i = 0; i < m.param_size[AL_P_LN1W]; i++) CHECK(m.p[AL_P_LN1W][i] == 1.0f);
    for (size_t i = 0; i < m.param_size[AL_P_LNFW]; i++) CHECK(m.p[AL_P_LNFW][i] == 1.0f);
    int zeros[] = {AL_P_LN1B, AL_P_BQ, AL_P_BK, AL_P_BV, AL_P_BO, AL_P_LNFB, AL_P_BU};
    for (size_t k = 0; k < sizeof zeros / sizeof zeros[0]; k++)
        for (size_t i = 0; i < m.param_size[zeros[k]]; i++) CHECK(m.p[zeros[k]][i] == 0.0f);
    const char *p = t_path("model.safetensors");
    CHECK_OK(al_ckpt_write_weights(p, &m, &e), &e);
    al_st_file *f;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    static const char *want[][2] = {{"embed.W_E", "13x16"},
                                    {"pos_embed.W_pos", "6x16"},
                                    {"blocks.0.ln1.w", "16"},
                                    {"blocks.0.ln1.b", "16"},
                                    {"blocks.0.attn.W_Q", "2x16x8"},
                                    {"blocks.0.attn.W_K", "2x16x8"},
                                    {"blocks.0.attn.W_V", "2x16x8"},
                                    {"blocks.0.attn.W_O", "2x8x16"},
                                    {"blocks.0.attn.b_Q", "2x8"},
                                    {"blocks.0.attn.b_K", "2x8"},
                                    {"blocks.0.attn.b_V", "2x8"},
                                    {"blocks.0.attn.b_O", "16"},
                                    {"blocks.1.ln1.w", "16"},
                                    {"blocks.1.ln1.b", "16"},
                                    {"blocks.1.attn.W_Q", "2x16x8"},
                                    {"blocks.1.attn.W_K", "2x16x8"},
                                    {"blocks.1.attn.W_V", "2x16x8"},
                                    {"blocks.1.attn.W_O", "2x8x16"},
                                    {"blocks.1.attn.b_Q", "2x8"},
                                    {"blocks.1.attn.b_K", "2x8"},
                                    {"blocks.1.attn.b_V", "2x8"},
                                    {"blocks.1.attn.b_O", "16"},
                                    {"ln_final.w", "16"},
                                    {"ln_final.b", "16"},
                                    {"unembed.W_U", "16x13"},
                                    {"unembed.b_U", "13"}};
    int n = (int)(sizeof want / sizeof want[0]);
    CHECKF(al_st_count(f) == n, "%d tensors", al_st_count(f));
    /* data in the order of the list: TransformerLens's state-dict order */
    size_t prev_end = 0;
    for (int i = 0; i < n && i < al_st_count(f); i++) {
        const al_st_tensor *t = al_st_get(f, want[i][0]);
        CHECKF(t != NULL, "no %s", want[i][0]);
        if (!t) continue;
        char shape[64] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "x" : "",
                     (long long)t->shape[d]);
        CHECKF(!strcmp(shape, want[i][1]), "%s has shape %s, want %s", want[i][0], shape,
               want[i][1]);
        size_t begin =
            (size_t)((const char *)t->data - (const char *)al_st_get(f, "embed.W_E")->data);
        CHECKF(begin >= prev_end, "%s is out of order", want[i][0]);
        size_t cnt = 1;
        for (int d = 0; d < t->ndim; d++) cnt *= (size_t)t->shape[d];
        prev_end = begin + 4 * cnt;
    }
    al_st_close(f);
    /* LNPre: no ln tensors at all; biases alone */
    al_model q;
    c = ln_cfg(1, AL_NORM_LNPRE, AL_BIAS_V);
    CHECK_OK(al_model_init(&q, &c, &e), &e);
    CHECK(q.param_size[AL_P_LN1W] == 0 && q.param_size[AL_P_LNFB] == 0 && !q.p[AL_P_LN1W]);
    CHECK(q.param_size[AL_P_BV] == 2 * 8 && q.param_size[AL_P_BQ] == 0);
    al_model_free(&q);
    al_model_free(&m);
    al_model_free(&plain);
}

/* A checkpoint of a LayerNorm + bias model loads back bit for bit; its
 * loader refuses a bad LayerNorm or bias tensor in one line naming it. */
TEST(lnorm_checkpoint_roundtrip_and_refusals) {
    al_model m, r;
    al_err e;
    al_config c = ln_cfg(2, AL_NORM_LN, AL_BIAS_ALL);
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    al_rng g;
    al_rng_seed(&g, 3);
    for (int i = AL_P_LN1W; i < AL_NPARAM; i++)
        for (size_t k = 0; k < m.param_size[i]; k++) m.p[i][k] = (float)al_rng_normal(&g);
    const char *dir = t_path("ck");
    CHECK_OK(al_ckpt_save(dir, &m, NULL, NULL, NULL, NULL, &e), &e);
    CHECK_OK(al_ckpt_load(dir, &r, NULL, &e), &e);
    CHECK(r.cfg.norm_type == AL_NORM_LN && r.cfg.biases == AL_BIAS_ALL && r.cfg.ln_eps == 1e-5);
    CHECK(r.n_params == m.n_params && memcmp(r.params, m.params, 4 * m.n_params) == 0);
    al_model_free(&r);
    /* rewrite model.safetensors with one tensor broken */
    char path[1200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct {
        const char *name;
        int kind;
        const char *msg;
    } cases[] = {
        {"blocks.1.ln1.w", 0, "tensor blocks.1.ln1.w contains NaN/Inf"},
        {"blocks.0.attn.b_K", 1, "tensor blocks.0.attn.b_K has shape [2,7], expected [2,8]"},
        {"ln_final.b", 0, "tensor ln_final.b contains NaN/Inf"},
        {"unembed.b_U", 2, "tensor unembed.b_U missing"},
        {"blocks.0.attn.b_O", 1, "tensor blocks.0.attn.b_O has shape [15], expected [16]"},
    };
    al_st_file *f;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_OK(al_ckpt_save(dir, &m, NULL, NULL, NULL, NULL, &e), &e);
        CHECK_OK(al_st_open(path, &f, &e), &e);
        int n = al_st_count(f), k = 0;
        al_st_tensor *t = calloc((size_t)n, sizeof *t);
        float *bad = calloc(64, sizeof(float));
        for (int j = 0; j < n; j++) {
            const al_st_tensor *s = al_st_at(f, j);
            if (!strcmp(s->name, cases[i].name)) {
                if (cases[i].kind == 2) continue;
                t[k] = *s;
                if (cases[i].kind == 0) {
                    size_t cnt = 1;
                    for (int d = 0; d < s->ndim; d++) cnt *= (size_t)s->shape[d];
                    memcpy(bad, s->data, 4 * cnt);
                    bad[cnt - 1] = NAN;
                    t[k].data = bad;
                } else
                    t[k].shape[t[k].ndim - 1] -= 1;
                k++;
                continue;
            }
            t[k++] = *s;
        }
        char tmp[1300];
        snprintf(tmp, sizeof tmp, "%s.x", path);
        CHECK_OK(al_st_write(tmp, t, k, NULL, NULL, 0, &e), &e);
        al_st_close(f);
        free(t);
        free(bad);
        CHECK(rename(tmp, path) == 0);
        al_err le = {{0}};
        CHECK(al_ckpt_load(dir, &r, NULL, &le) == -1);
        CHECKF(strstr(le.msg, cases[i].msg) && !strchr(le.msg, '\n'), "case %zu: %s", i, le.msg);
    }
    /* a plain config.json beside LayerNorm tensors: the extra tensor is named */
    CHECK_OK(al_ckpt_save(dir, &m, NULL, NULL, NULL, NULL, &e), &e);
    al_config pc = c;
    pc.norm_type = AL_NORM_NONE, pc.biases = 0;
    char *js = al_config_to_json(&pc), cp[1200];
    snprintf(cp, sizeof cp, "%s/config.json", dir);
    CHECK_OK(al_write_file_atomic(cp, js, strlen(js), &e), &e);
    free(js);
    al_err le = {{0}};
    CHECK(al_ckpt_load(dir, &r, NULL, &le) == -1);
    CHECKF(strstr(le.msg, "unexpected tensor blocks.0.ln1.w"), "%s", le.msg);
    al_model_free(&m);
}

/* ------------------------------------------------- layernorm_backward */

/* TransformerLens's LayerNorm of one row in double, from its definition. */
static void ln_ref(double *out, const double *x, const double *w, const double *b, int C,
                   double eps) {
    double mu = 0, v = 0;
    for (int c = 0; c < C; c++) mu += x[c];
    mu /= C;
    for (int c = 0; c < C; c++) v += (x[c] - mu) * (x[c] - mu);
    double scale = sqrt(v / C + eps);
    for (int c = 0; c < C; c++) out[c] = (x[c] - mu) / scale * (w ? w[c] : 1) + (b ? b[c] : 0);
}

/* f = Σ dout · LN(x): layernorm_backward's dx, dw, db against central
 * differences of the double reference, for LN and LNPre, overwrite and
 * accumulate; and layernorm_forward against the reference. */
TEST(lnorm_layernorm_backward_finite_differences) {
    enum { N = 5, C = 24 };
    const double eps = 1e-5;
    al_rng r;
    al_rng_seed(&r, 11);
    float x[N * C], w[C], b[C], dout[N * C], out[N * C], mean[N], scale[N];
    double xd[N * C], wd[C], bd[C];
    for (int i = 0; i < N * C; i++) xd[i] = x[i] = (float)(3 * al_rng_normal(&r) + (i / C));
    for (int c = 0; c < C; c++) {
        wd[c] = w[c] = (float)(1 + 0.5 * al_rng_normal(&r));
        bd[c] = b[c] = (float)al_rng_normal(&r);
    }
    for (int i = 0; i < N * C; i++) dout[i] = (float)al_rng_normal(&r);
    for (int pre = 0; pre < 2; pre++) {
        const float *fw = pre ? NULL : w, *fb = pre ? NULL : b;
        const double *rw = pre ? NULL : wd, *rb = pre ? NULL : bd;
        layernorm_forward(out, mean, scale, x, fw, fb, N, C, eps);
        double ref[C], worst = 0;
        for (int n = 0; n < N; n++) {
            ln_ref(ref, xd + n * C, rw, rb, C, eps);
            for (int c = 0; c < C; c++)
                worst = fmax(worst, fabs(out[n * C + c] - ref[c]) / (fabs(ref[c]) + 1e-3));
        }
        CHECKF(worst < 1e-5, "forward (pre %d): worst relative error %g", pre, worst);
        float dx[N * C], dw[C], db[C], acc[N * C];
        for (int i = 0; i < N * C; i++) acc[i] = 0.25f * (float)i;
        layernorm_backward(dx, pre ? NULL : dw, pre ? NULL : db, dout, x, mean, scale, fw, N, C, 0);
        layernorm_backward(acc, NULL, NULL, dout, x, mean, scale, fw, N, C, 1);
        /* f(x) = Σ_n Σ_c dout · LN(x_n), in double */
        const double h = 1e-6;
        double o1[C], o2[C], wc = 0;
        for (int i = 0; i < N * C; i++) {
            int n = i / C;
            double keep = xd[i];
            xd[i] = keep + h, ln_ref(o1, xd + n * C, rw, rb, C, eps);
            xd[i] = keep - h, ln_ref(o2, xd + n * C, rw, rb, C, eps);
            xd[i] = keep;
            double fd = 0;
            for (int c = 0; c < C; c++) fd += dout[n * C + c] * (o1[c] - o2[c]) / (2 * h);
            wc = fmax(wc, fabs(dx[i] - fd) / (fabs(fd) + 1e-2));
            CHECKF(acc[i] == 0.25f * (float)i + dx[i], "accumulate at %d", i);
        }
        CHECKF(wc < 1e-4, "dx (pre %d): worst relative error %g", pre, wc);
        for (int c = 0; c < C && !pre; c++) { /* dw, db: LN is linear in them */
            double sw = 0, sb = 0;
            for (int n = 0; n < N; n++) {
                double tmp[C];
                ln_ref(tmp, xd + n * C, NULL, NULL, C, eps);
                sw += dout[n * C + c] * tmp[c];
                sb += dout[n * C + c];
            }
            CHECKF(fabs(dw[c] - sw) <= 1e-5 * (fabs(sw) + 1) &&
                       fabs(db[c] - sb) <= 1e-5 * (fabs(sb) + 1),
                   "dw/db[%d]: %g %g vs %g %g", c, dw[c], db[c], sw, sb);
        }
    }
}

/* ------------------------------------------------- the model's gradients */

/* Random LayerNorm weights and biases far from their initial values, so
 * that every one of them matters to the loss. */
static void randomise_extras(al_model *m, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    for (int p = AL_P_LN1W; p < AL_NPARAM; p++)
        for (size_t i = 0; i < m->param_size[p]; i++) {
            double v = 0.3 * al_rng_normal(&r);
            m->p[p][i] = (float)(p == AL_P_LN1W || p == AL_P_LNFW ? 1 + v : v);
        }
}

static double mean_loss(al_model *m, const int *in, const int *tg, int B, int T) {
    al_err e;
    return al_model_forward(m, in, tg, B, T, &e) ? NAN : m->mean_loss;
}

/* The directional derivative of the loss along a random direction of
 * the tensor, and 3 single entries, against central differences. */
static void fd_tensor(al_model *m, float *w, const float *g, size_t n, const char *name,
                      const int *in, const int *tg, int B, int T) {
    const double eps = 1e-2;
    al_rng r;
    al_rng_seed(&r, 5 + n);
    float *u = malloc(sizeof(float) * n);
    double dir = 0;
    for (size_t i = 0; i < n; i++) u[i] = (float)al_rng_normal(&r), dir += (double)u[i] * g[i];
    for (size_t i = 0; i < n; i++) w[i] += (float)(eps * u[i]);
    double lp = mean_loss(m, in, tg, B, T);
    for (size_t i = 0; i < n; i++) w[i] -= (float)(2 * eps * u[i]);
    double lm = mean_loss(m, in, tg, B, T);
    for (size_t i = 0; i < n; i++) w[i] += (float)(eps * u[i]);
    double fd = (lp - lm) / (2 * eps);
    CHECKF(fabs(fd - dir) <= 1e-2 * fabs(fd) + 3e-4, "%s: directional fd %.6g vs analytic %.6g",
           name, fd, dir);
    for (int k = 0; k < 3; k++) {
        size_t i = al_rng_below(&r, (uint32_t)n);
        float keep = w[i];
        w[i] = keep + (float)eps, lp = mean_loss(m, in, tg, B, T);
        w[i] = keep - (float)eps, lm = mean_loss(m, in, tg, B, T);
        w[i] = keep;
        fd = (lp - lm) / (2 * eps);
        CHECKF(fabs(fd - g[i]) <= 2e-2 * fabs(fd) + 4e-4, "%s[%zu]: fd %.6g vs analytic %.6g", name,
               i, fd, g[i]);
    }
    free(u);
}

static void gradcheck_ln(int L, int norm, unsigned biases, int pos, int tied) {
    al_config c = ln_cfg(L, norm, biases);
    c.pos_type = pos, c.tied_embeddings = tied, c.n_ctx = 8;
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    randomise_extras(&m, 17);
    int B = 2, T = 7, in[14], tg[14];
    al_rng r;
    al_rng_seed(&r, 4);
    for (int i = 0; i < B * T; i++)
        in[i] = (int)al_rng_below(&r, 13), tg[i] = i == 5 ? -1 : (int)al_rng_below(&r, 13);
    for (int i = 0; i < L * c.n_heads; i++) m.gates[i] = 0.5f + 0.25f * (float)i;
    CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
    CHECK_OK(al_model_backward(&m, &e), &e);
    float *g = malloc(sizeof(float) * m.n_params), gg[16];
    memcpy(g, m.grads, sizeof(float) * m.n_params);
    memcpy(gg, m.gate_grads, sizeof(float) * L * c.n_heads);
    /* forward_backward: the same gradients to the bit */
    float *g2 = malloc(sizeof(float) * m.n_params);
    CHECK_OK(al_model_forward_backward(&m, in, tg, B, T, &e), &e);
    memcpy(g2, m.grads, sizeof(float) * m.n_params);
    CHECK(memcmp(g, g2, sizeof(float) * m.n_params) == 0);
    size_t off = 0;
    for (int p = 0; p < AL_NPARAM; p++) {
        char nm[64];
        int64_t shape[4];
        al_param_tl_name(&m, p, 0, nm, sizeof nm, shape);
        if (m.param_size[p]) fd_tensor(&m, m.p[p], g + off, m.param_size[p], nm, in, tg, B, T);
        off += m.param_size[p];
    }
    fd_tensor(&m, m.gates, gg, (size_t)L * c.n_heads, "gates", in, tg, B, T);
    free(g);
    free(g2);
    al_model_free(&m);
}

TEST(lnorm_gradcheck_ln_biases) {
    gradcheck_ln(1, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 0);
    gradcheck_ln(2, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 0);
}
TEST(lnorm_gradcheck_lnpre_shortformer_tied) {
    gradcheck_ln(2, AL_NORM_LNPRE, AL_BIAS_Q | AL_BIAS_V | AL_BIAS_U, AL_POS_SHORTFORMER, 1);
    gradcheck_ln(2, AL_NORM_LN, AL_BIAS_K | AL_BIAS_O, AL_POS_SHORTFORMER, 0);
}
TEST(lnorm_gradcheck_biases_only) {
    gradcheck_ln(2, AL_NORM_NONE, AL_BIAS_ALL, AL_POS_STANDARD, 0);
}

/* ------------------------------------------------- hook points */

static int noop(al_hook_act *a, void *ctx, al_err *e) {
    (void)a, (void)ctx, (void)e;
    return 0;
}

static int has_point(const al_config *c, int p) {
    int ln_point = p == AL_HOOK_LN1_SCALE || p == AL_HOOK_LN1_NORMALIZED ||
                   p == AL_HOOK_LNF_SCALE || p == AL_HOOK_LNF_NORMALIZED;
    return !ln_point || c->norm_type != AL_NORM_NONE;
}

/* A hook that writes nothing, at each point alone and at all at once,
 * leaves the probabilities and the gradients bit for bit, on plain,
 * LayerNorm and LNPre models with biases, standard and shortformer
 * positions. */
TEST(lnorm_noop_hooks_same_bits) {
    struct {
        int norm;
        unsigned biases;
        int pos;
    } cases[] = {{AL_NORM_NONE, 0, AL_POS_STANDARD},
                 {AL_NORM_NONE, 0, AL_POS_SHORTFORMER},
                 {AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD},
                 {AL_NORM_LNPRE, AL_BIAS_ALL, AL_POS_SHORTFORMER},
                 {AL_NORM_LN, AL_BIAS_Q | AL_BIAS_U, AL_POS_SHORTFORMER}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        al_config c = ln_cfg(2, cases[k].norm, cases[k].biases);
        c.pos_type = cases[k].pos;
        al_model m;
        al_err e;
        CHECK_OK(al_model_init(&m, &c, &e), &e);
        randomise_extras(&m, 8 + k);
        int B = 3, T = 6, in[18], tg[18];
        for (int i = 0; i < B * T; i++) in[i] = (i * 5 + 1) % 13, tg[i] = (i * 7 + 2) % 13;
        size_t np = (size_t)B * T * c.d_vocab;
        float *p0 = malloc(sizeof(float) * np), *g0 = malloc(sizeof(float) * m.n_params);
        CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
        memcpy(p0, m.probs, sizeof(float) * np);
        CHECK_OK(al_model_backward(&m, &e), &e);
        memcpy(g0, m.grads, sizeof(float) * m.n_params);
        for (int p = 0; p <= AL_HOOK_N_POINTS; p++) { /* N_POINTS: all of them */
            if (p < AL_HOOK_N_POINTS && (p == AL_HOOK_RESULT || !has_point(&c, p))) continue;
            for (int q = 0; q < AL_HOOK_N_POINTS; q++)
                if ((q == p || (p == AL_HOOK_N_POINTS && q != AL_HOOK_RESULT)) && has_point(&c, q))
                    CHECK_OK(al_hook_add(&m, q, al_hook_is_model_level(q) ? 0 : -1, noop, &m, &e),
                             &e);
            CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
            CHECKF(!memcmp(p0, m.probs, sizeof(float) * np) && !m.intervened,
                   "case %zu: a no-op hook at point %d changed the forward", k, p);
            CHECK_OK(al_model_backward(&m, &e), &e);
            CHECKF(!memcmp(g0, m.grads, sizeof(float) * m.n_params),
                   "case %zu: a no-op hook at point %d changed the gradients", k, p);
            al_hook_remove(&m, &m);
        }
        /* the LayerNorm points exist only with LayerNorm */
        CHECK((al_hook_add(&m, AL_HOOK_LNF_SCALE, 0, noop, &m, &e) == 0) ==
              (c.norm_type != AL_NORM_NONE));
        al_hook_remove(&m, &m);
        free(p0);
        free(g0);
        al_model_free(&m);
    }
}

/* A hook that writes its point: ctx says how. */
typedef struct writer {
    int what; /* the case below */
    int layer; /* the layer it writes (block points) */
    int calls;
} writer;

static int write_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    writer *w = ctx;
    const al_model *m = a->m;
    const al_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->d_model, H = c->n_heads, V = c->d_vocab;
    if (!al_hook_is_model_level(a->point) && a->layer != w->layer) return 0;
    w->calls++;
    a->intervened = 1;
    switch (w->what) {
    case 0: /* ATTN_SCORES: every score of head 1 is 0, also above the diagonal at t = 2 */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int s = 0; s < T; s++)
                    if (s <= t || t == 2) a->data[(((size_t)b * H + 1) * T + t) * T + s] = 0.0f;
        break;
    case 1: /* LOGITS: all 0 */ memset(a->data, 0, sizeof(float) * (size_t)B * T * V); break;
    case 2: /* Q_INPUT: head 1's query input is 0 */
        for (size_t i = 0; i < (size_t)B * T; i++) memset(a->data + i * a->ld + C, 0, 4 * C);
        break;
    case 3: /* ATTN_OUT: 0 */ memset(a->data, 0, sizeof(float) * (size_t)B * T * C); break;
    case 4: /* POS_EMBED: 0 */ memset(a->data, 0, sizeof(float) * (size_t)B * T * C); break;
    case 5: /* LN1_SCALE: doubled */
        for (size_t i = 0; i < (size_t)B * T; i++) a->data[i] *= 2.0f;
        break;
    case 6: /* EMBED: 0 */ memset(a->data, 0, sizeof(float) * (size_t)B * T * C); break;
    }
    return 0;
}

/* Writes at the new points change the forward as TransformerLens's
 * would, and mark it intervened (backward refuses it). */
TEST(lnorm_hook_writes) {
    al_config c = ln_cfg(2, AL_NORM_LN, AL_BIAS_ALL);
    c.pos_type = AL_POS_SHORTFORMER;
    al_model m, z;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    randomise_extras(&m, 5);
    enum { B = 2, T = 5 };
    int in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) in[i] = (i * 3 + 1) % 13, tg[i] = (i * 5) % 13;
    const int C = c.d_model, H = c.n_heads, D = c.d_head, HD = H * D, V = c.d_vocab;
    const size_t BT = B * T;
    CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
    float *q0 = malloc(sizeof(float) * 2 * BT * 3 * HD), *x0 = malloc(sizeof(float) * 3 * BT * C);
    memcpy(q0, m.qkv, sizeof(float) * 2 * BT * 3 * HD);
    memcpy(x0, m.x, sizeof(float) * 3 * BT * C);
    struct {
        int point, what, layer;
    } cases[] = {{AL_HOOK_ATTN_SCORES, 0, 1}, {AL_HOOK_LOGITS, 1, 0},    {AL_HOOK_Q_INPUT, 2, 0},
                 {AL_HOOK_ATTN_OUT, 3, 1},    {AL_HOOK_POS_EMBED, 4, 0}, {AL_HOOK_LN1_SCALE, 5, 0},
                 {AL_HOOK_EMBED, 6, 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        writer w = {cases[k].what, cases[k].layer, 0};
        CHECK_OK(al_hook_add(&m, cases[k].point, al_hook_is_model_level(cases[k].point) ? 0 : -1,
                             write_hook, &w, &e),
                 &e);
        CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
        CHECKF(w.calls == 1 && m.intervened, "case %zu: %d calls", k, w.calls);
        CHECK(al_model_backward(&m, &e) == -1);
        al_hook_remove(&m, &w);
        const float *att1 = m.att + (size_t)BT * H * T; /* layer 1's (B,H,T,T) */
        switch (cases[k].what) {
        case 0: /* head 1 of layer 1 uniform over s <= t; at t = 2 over every s */
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++)
                    for (int s = 0; s < T; s++) {
                        float want = t == 2 ? 1.0f / T : s <= t ? 1.0f / (t + 1) : 0.0f;
                        float got = att1[(((size_t)b * H + 1) * T + t) * T + s];
                        CHECKF(fabsf(got - want) < 1e-6f, "pattern [%d,%d,%d] = %g, want %g", b, t,
                               s, got, want);
                    }
            break;
        case 1: /* uniform probabilities, loss ln V */
            for (size_t i = 0; i < BT * V; i++) CHECK(fabsf(m.probs[i] - 1.0f / V) < 1e-7f);
            CHECK(fabs(m.mean_loss - log(V)) < 1e-5);
            break;
        case 2: { /* head 1's q = ln1(0) W_Q + b_Q + pos W_Q = (b + pos) W_Q + b_Q; head 0's unchanged */
            for (size_t i = 0; i < BT; i++) {
                CHECK(!memcmp(m.qkv + i * 3 * HD, q0 + i * 3 * HD, 4 * (size_t)D));
                CHECK(!memcmp(m.qkv + i * 3 * HD + HD, q0 + i * 3 * HD + HD, 4 * 2 * (size_t)HD));
                int t = (int)(i % T);
                for (int d = 0; d < D; d++) {
                    double s = m.p[AL_P_BQ][D + d]; /* b_Q[0, 1] */
                    for (int k2 = 0; k2 < C; k2++)
                        s += ((double)m.p[AL_P_LN1B][k2] + m.p[AL_P_WPOS][t * C + k2]) *
                             al_head_wq(&m, 0, 1)[k2 * D + d];
                    CHECKF(fabs(m.qkv[i * 3 * HD + D + d] - s) < 1e-4, "q[%zu, 1, %d] = %g vs %g",
                           i, d, m.qkv[i * 3 * HD + D + d], s);
                }
            }
            break;
        }
        case 3: /* layer 1 adds nothing */
            CHECK(!memcmp(m.x + 2 * BT * C, m.x + BT * C, sizeof(float) * BT * C));
            break;
        case 4: { /* as the model with W_pos = 0 (shortformer: only q and k read it) */
            CHECK_OK(al_model_init(&z, &c, &e), &e);
            memcpy(z.params, m.params, sizeof(float) * m.n_params);
            memset(z.p[AL_P_WPOS], 0, sizeof(float) * z.param_size[AL_P_WPOS]);
            CHECK_OK(al_model_forward(&z, in, tg, B, T, &e), &e);
            double worst = 0;
            for (size_t i = 0; i < BT * V; i++) worst = fmax(worst, fabs(z.probs[i] - m.probs[i]));
            CHECKF(worst < 1e-6, "W_pos hooked to 0 vs W_pos = 0: %g", worst);
            al_model_free(&z);
            break;
        }
        case 5: /* ln1 of layer 0 with the scale doubled: (x_c / 2s) w + b */
            for (size_t i = 0; i < BT; i++) {
                double mu = 0, v = 0;
                for (int k2 = 0; k2 < C; k2++) mu += m.x[i * C + k2] / C;
                for (int k2 = 0; k2 < C; k2++) v += pow(m.x[i * C + k2] - mu, 2) / C;
                CHECK(fabs(m.ln1_scale[i] - 2 * sqrt(v + 1e-5)) < 1e-5 * m.ln1_scale[i]);
            }
            for (size_t i = 0; i < BT; i++)
                for (int k2 = 0; k2 < C; k2++) {
                    float xc = m.x[i * C + k2] - m.ln1_mean[i];
                    float want = xc / m.ln1_scale[i] * m.p[AL_P_LN1W][k2] + m.p[AL_P_LN1B][k2];
                    CHECK(fabsf(m.ln1[i * C + k2] - want) < 1e-5f * (1 + fabsf(want)));
                }
            break;
        case 6: /* shortformer: x_0 = embed = 0 */
            for (size_t i = 0; i < BT * C; i++) CHECK(m.x[i] == 0.0f);
            break;
        }
    }
    free(q0);
    free(x0);
    al_model_free(&m);
}

/* RESID_PRE of layer 0: + eps at one element (a finite difference). */
typedef struct nudge {
    size_t at;
    float eps;
} nudge;

static int nudge_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const nudge *n = ctx;
    if (a->layer == 0) a->data[n->at] += n->eps, a->intervened = 1;
    return 0;
}

/* f = Σ c · x_L (before ln_final): al_model_backward_acts's ∂f/∂x_0
 * against central differences of the forward, through LayerNorm, biases
 * and shortformer positions. */
TEST(lnorm_backward_acts_finite_differences) {
    al_config c = ln_cfg(2, AL_NORM_LN, AL_BIAS_ALL);
    c.pos_type = AL_POS_SHORTFORMER;
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    randomise_extras(&m, 9);
    enum { B = 2, T = 5 };
    const int C = c.d_model, L = c.n_layers;
    const size_t nx = (size_t)B * T * C;
    int in[B * T];
    for (int i = 0; i < B * T; i++) in[i] = (i * 5 + 2) % 13;
    float *cw = malloc(sizeof(float) * nx), *dx = malloc(sizeof(float) * (L + 1) * nx);
    al_rng r;
    al_rng_seed(&r, 12);
    for (size_t i = 0; i < nx; i++) cw[i] = (float)al_rng_normal(&r);
    CHECK_OK(al_model_forward(&m, in, NULL, B, T, &e), &e);
    CHECK_OK(al_model_backward_acts(&m, cw, dx, NULL, NULL, &e), &e);
    nudge n = {0, 0};
    CHECK_OK(al_hook_add(&m, AL_HOOK_RESID_PRE, 0, nudge_hook, &n, &e), &e);
    for (int k = 0; k < 8; k++) {
        n.at = al_rng_below(&r, (uint32_t)nx);
        double f[2];
        for (int s = 0; s < 2; s++) {
            n.eps = s ? -1e-2f : 1e-2f;
            CHECK_OK(al_model_forward(&m, in, NULL, B, T, &e), &e);
            const float *xL = m.x + (size_t)L * nx;
            double acc = 0;
            for (size_t i = 0; i < nx; i++) acc += (double)cw[i] * xL[i];
            f[s] = acc;
        }
        double fd = (f[0] - f[1]) / 2e-2;
        CHECKF(fabs(fd - dx[n.at]) <= 2e-2 * fabs(fd) + 2e-3,
               "d f / d x_0[%zu]: fd %g, backward %g", n.at, fd, dx[n.at]);
    }
    al_hook_remove(&m, &n);
    free(cw);
    free(dx);
    al_model_free(&m);
}
