/* test_act_cache.c -- `run --save-cache`: the activations under
 * TransformerLens hook names, read back: the final residual through W_U
 * gives run --json's probabilities, every pattern row sums to 1, the
 * head outputs add up to the layer's residual update, q is the residual
 * times W_Q; too large a cache and bad hook lists are refused with no
 * file written. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/safetensors.h"
#include "test.h"

/* A tensor that may hold −inf (the masked attention scores, as
 * TransformerLens keeps them): its data as stored, shape checked. */
static float *raw_tensor(const al_st_file *f, const char *name, int ndim, const int64_t *shape,
                         size_t n) {
    const al_st_tensor *t = al_st_get(f, name);
    CHECKF(t && t->dtype == AL_DT_F32 && t->ndim == ndim &&
               !memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim),
           "%s: missing or of another shape", name);
    if (!t || t->ndim != ndim || memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim))
        return NULL;
    float *v = malloc(sizeof(float) * n);
    memcpy(v, t->data, sizeof(float) * n);
    return v;
}

static float *tensor(const al_st_file *f, const char *name, int ndim, const int64_t *shape,
                     size_t n) {
    float *v = malloc(sizeof(float) * n);
    al_err e;
    if (al_st_read_f32(f, name, ndim, shape, v, &e) != 0) {
        CHECKF(0, "%s: %s", name, e.msg);
        free(v);
        return NULL;
    }
    return v;
}

TEST(act_cache_read_back) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 2, 10);
    CHECK(
        t_sh("%s run --model %s/m2 --prompt 'the cat sat on the mat' --save-cache %s/c.safetensors "
             "--json > %s 2> %s",
             t_bin(), dir, dir, t_path("run.json"), t_path("err")) == 0);
    char mdir[1100], cpath[1100];
    snprintf(mdir, sizeof mdir, "%s/m2", dir);
    snprintf(cpath, sizeof cpath, "%s/c.safetensors", dir);
    al_model m;
    al_err e;
    CHECK_OK(al_ckpt_load(mdir, &m, NULL, &e), &e);
    al_st_file *f;
    CHECK_OK(al_st_open(cpath, &f, &e), &e);
    const char *fmt = al_st_meta(f, "format");
    CHECK(fmt && !strcmp(fmt, "attnlab-cache"));
    int B = 1, T = atoi(al_st_meta(f, "T") ? al_st_meta(f, "T") : "0");
    const int L = 2, H = m.cfg.n_heads, D = m.cfg.d_head, C = m.cfg.d_model, V = m.cfg.d_vocab;
    CHECK(T > 3);
    /* probabilities from the cached final residual = run --json's top-5 */
    int64_t sx[3] = {B, T, C};
    float *xf = tensor(f, "blocks.1.hook_resid_post", 3, sx, (size_t)T * C);
    char *js = t_slurp(t_path("run.json"));
    cJSON *doc = js ? cJSON_Parse(js) : NULL;
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(doc, "tokens"), *tk;
    double worst = 0;
    int n_cmp = 0;
    cJSON_ArrayForEach(tk, toks) {
        int pos = (int)cJSON_GetObjectItemCaseSensitive(tk, "pos")->valuedouble;
        double lg[512], mx = -1e300, z = 0;
        for (int v = 0; v < V && xf; v++) {
            double s = 0;
            for (int c = 0; c < C; c++)
                s += (double)xf[pos * C + c] * m.p[AL_P_WU][(size_t)c * V + v];
            lg[v] = s, mx = s > mx ? s : mx;
        }
        for (int v = 0; v < V; v++) z += exp(lg[v] - mx);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(tk, "top")) {
            int id = (int)cJSON_GetObjectItemCaseSensitive(c, "id")->valuedouble;
            double p = exp(lg[id] - mx) / z,
                   want = cJSON_GetObjectItemCaseSensitive(c, "p")->valuedouble;
            worst = fmax(worst, fabs(p - want));
            n_cmp++;
        }
    }
    CHECKF(n_cmp == 5 * T && worst < 1e-5, "%d compared, worst |dp| %.3g", n_cmp, worst);
    /* pattern rows sum to 1, causal */
    int64_t sp[4] = {B, H, T, T};
    float *pat = tensor(f, "blocks.0.attn.hook_pattern", 4, sp, (size_t)H * T * T);
    double rs = 0, above = 0;
    for (int h = 0; pat && h < H; h++)
        for (int t = 0; t < T; t++) {
            double s = 0;
            for (int u = 0; u < T; u++) {
                s += pat[((size_t)h * T + t) * T + u];
                if (u > t) above += fabs(pat[((size_t)h * T + t) * T + u]);
            }
            rs = fmax(rs, fabs(s - 1));
        }
    CHECKF(rs < 1e-5 && above == 0, "row sums off by %.3g, %.3g above the diagonal", rs, above);
    /* resid_post(0) - resid_pre(0) = sum of the heads' results */
    int64_t sr[4] = {B, T, H, C};
    float *pre = tensor(f, "blocks.0.hook_resid_pre", 3, sx, (size_t)T * C);
    float *post = tensor(f, "blocks.0.hook_resid_post", 3, sx, (size_t)T * C);
    float *res = tensor(f, "blocks.0.attn.hook_result", 4, sr, (size_t)T * H * C);
    double id_err = 0;
    for (int t = 0; res && pre && post && t < T; t++)
        for (int c = 0; c < C; c++) {
            double s = pre[t * C + c];
            for (int h = 0; h < H; h++) s += res[((size_t)t * H + h) * C + c];
            id_err = fmax(id_err, fabs(s - post[t * C + c]));
        }
    CHECKF(id_err < 1e-4, "residual identity off by %.3g", id_err);
    /* q = resid_pre · W_Q (standard positions: q reads the residual) */
    int64_t sq[4] = {B, T, H, D};
    float *q = tensor(f, "blocks.1.attn.hook_q", 4, sq, (size_t)T * H * D);
    float *pre1 = tensor(f, "blocks.1.hook_resid_pre", 3, sx, (size_t)T * C);
    double q_err = 0;
    for (int t = 0; q && pre1 && t < T; t++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) {
                double s = 0;
                for (int c = 0; c < C; c++)
                    s += (double)pre1[t * C + c] * al_head_wq(&m, 1, h)[c * D + d];
                q_err = fmax(q_err, fabs(s - q[((size_t)t * H + h) * D + d]));
            }
    CHECKF(q_err < 1e-4, "q off by %.3g", q_err);
    CHECK(L == m.cfg.n_layers);
    free(xf), free(pat), free(pre), free(post), free(res), free(q), free(pre1);
    cJSON_Delete(doc);
    free(js);
    al_st_close(f);
    al_model_free(&m);
}

TEST(act_cache_windows_hooks_and_refusals) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 5);
    CHECK(t_sh("%s run --model %s/m1 --data %s/s.val.bin --windows 3 --hooks z,pattern "
               "--save-cache %s/w.safetensors > %s",
               t_bin(), dir, dir, dir, t_path("out")) == 0);
    char p[1100];
    snprintf(p, sizeof p, "%s/w.safetensors", dir);
    al_st_file *f;
    al_err e;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    CHECK(al_st_count(f) == 3); /* tokens, z and pattern of one layer */
    al_st_close(f);
    /* too large: refused with the estimate, no file */
    CHECK(
        t_sh(
            "%s run --model %s/m1 --data %s/s.val.bin --windows 50 --save-cache %s/big.safetensors "
            "--cache-max-mb 0.01 2> %s",
            t_bin(), dir, dir, dir, t_path("e1")) == 1);
    CHECK(t_one_line(t_path("e1"), "over the limit of 0.0 MB"));
    CHECK(t_sh("test -e %s/big.safetensors", dir) != 0);
    /* an unknown hook kind; --data without --save-cache */
    CHECK(t_sh("%s run --model %s/m1 --prompt hi --hooks zz --save-cache %s/x.safetensors 2> %s",
               t_bin(), dir, dir, t_path("e2")) == 2);
    CHECK(t_one_line(t_path("e2"), "unknown hook kind 'zz'"));
    /* no kinds at all: refused, not a cache of the tokens alone */
    CHECK(t_sh("%s run --model %s/m1 --prompt hi --hooks '' --save-cache %s/x.safetensors 2> %s",
               t_bin(), dir, dir, t_path("e4")) == 2);
    CHECK(t_one_line(t_path("e4"), "no hook kinds given"));
    CHECK(t_sh("%s run --model %s/m1 --data %s/s.val.bin 2> %s", t_bin(), dir, dir, t_path("e3")) ==
          2);
    CHECK(t_one_line(t_path("e3"), "--data is for --save-cache"));
    CHECK(t_sh("test -e %s/x.safetensors", dir) != 0);
}

/* Every point of a LayerNorm model with biases (docs/hooks.md), each
 * checked against the ones around it: ln1's output is resid_pre
 * normalised by its scale (w, b applied), softmax of the scores is the
 * pattern, attn_out is the heads' results plus b_O, resid_post is
 * resid_pre plus attn_out, the logits are ln_final's output through W_U
 * plus b_U; a plain model refuses the LayerNorm kinds in one line. */
TEST(act_cache_every_point_layernorm) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 1); /* the data, tokenizer and a plain model m1 */
    CHECK(t_sh("%s train --data %s/s.train.bin --tokenizer %s/tok.json --out %s/ln --steps 20 "
               "--n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 "
               "--eval-every 0 --warmup 2 --lr 0.01 --threads 1 --norm ln --biases all > %s 2>&1",
               t_bin(), dir, dir, dir, t_path("train.log")) == 0);
    char mdir[1100], cpath[1100];
    snprintf(mdir, sizeof mdir, "%s/ln", dir);
    snprintf(cpath, sizeof cpath, "%s/c.safetensors", dir);
    CHECK(t_sh("%s run --model %s --data %s/s.val.bin --windows 2 --save-cache %s > %s 2>&1",
               t_bin(), mdir, dir, cpath, t_path("run.out")) == 0);
    al_model m;
    al_err e;
    CHECK_OK(al_ckpt_load(mdir, &m, NULL, &e), &e);
    al_st_file *f;
    CHECK_OK(al_st_open(cpath, &f, &e), &e);
    const int L = 2, B = 2, T = 32, H = 4, C = 32, V = m.cfg.d_vocab;
    /* tokens, embed and pos_embed, 12 per layer, ln_final's two and the logits */
    CHECKF(al_st_count(f) == 1 + 2 + 12 * L + 3, "%d tensors", al_st_count(f));
    const size_t BT = (size_t)B * T;
    int64_t s3[3] = {B, T, C}, s1[3] = {B, T, 1}, sr[4] = {B, T, H, C}, sa[4] = {B, H, T, T};
    int64_t sv[3] = {B, T, V};
    double ln_err = 0, sm_err = 0, out_err = 0, post_err = 0;
    char nm[96];
    for (int l = 0; l < L; l++) {
#define GET(var, name, nd, shp, n)                                                                 \
    snprintf(nm, sizeof nm, "blocks.%d." name, l);                                                 \
    float *var = tensor(f, nm, nd, shp, n)
        GET(pre, "hook_resid_pre", 3, s3, BT * C);
        GET(scale, "ln1.hook_scale", 3, s1, BT);
        GET(nrm, "ln1.hook_normalized", 3, s3, BT * C);
        snprintf(nm, sizeof nm, "blocks.%d.attn.hook_attn_scores", l);
        float *sc = raw_tensor(f, nm, 4, sa, (size_t)B * H * T * T);
        GET(pat, "attn.hook_pattern", 4, sa, (size_t)B * H * T * T);
        GET(res, "attn.hook_result", 4, sr, BT * H * C);
        GET(out, "hook_attn_out", 3, s3, BT * C);
        GET(post, "hook_resid_post", 3, s3, BT * C);
#undef GET
        if (!pre || !scale || !nrm || !sc || !pat || !res || !out || !post) return;
        const float *w = m.p[AL_P_LN1W] + (size_t)l * C, *b = m.p[AL_P_LN1B] + (size_t)l * C;
        const float *bo = m.p[AL_P_BO] + (size_t)l * C;
        for (size_t r = 0; r < BT; r++) {
            double mu = 0;
            for (int c = 0; c < C; c++) mu += pre[r * C + c];
            mu /= C;
            for (int c = 0; c < C; c++) {
                double want = (pre[r * C + c] - mu) / scale[r] * w[c] + b[c];
                ln_err = fmax(ln_err, fabs(want - nrm[r * C + c]));
                double s = bo[c];
                for (int h = 0; h < H; h++) s += res[(r * H + h) * C + c];
                out_err = fmax(out_err, fabs(s - out[r * C + c]));
                post_err = fmax(post_err, fabs(pre[r * C + c] + out[r * C + c] - post[r * C + c]));
            }
        }
        for (size_t row = 0; row < (size_t)B * H * T; row++) {
            int t = (int)(row % T);
            const float *srow = sc + row * T, *prow = pat + row * T;
            double mx = -1e300, z = 0;
            for (int u = 0; u <= t; u++) mx = fmax(mx, srow[u]);
            for (int u = 0; u <= t; u++) z += exp(srow[u] - mx);
            for (int u = 0; u <= t; u++)
                sm_err = fmax(sm_err, fabs(exp(srow[u] - mx) / z - prow[u]));
            for (int u = t + 1; u < T; u++) CHECK(isinf(srow[u]) && srow[u] < 0 && prow[u] == 0);
        }
        free(pre), free(scale), free(nrm), free(sc), free(pat), free(res), free(out), free(post);
    }
    float *fn = tensor(f, "ln_final.hook_normalized", 3, s3, BT * C);
    float *lg = tensor(f, "logits", 3, sv, BT * V);
    float *fs = tensor(f, "ln_final.hook_scale", 3, s1, BT);
    double lg_err = 0;
    for (size_t r = 0; fn && lg && r < BT; r++)
        for (int v = 0; v < V; v++) {
            double s = m.p[AL_P_BU][v];
            for (int c = 0; c < C; c++)
                s += (double)fn[r * C + c] * m.p[AL_P_WU][(size_t)c * V + v];
            lg_err = fmax(lg_err, fabs(s - lg[r * V + v]));
        }
    CHECKF(ln_err < 1e-4 && sm_err < 1e-5 && out_err < 1e-4 && post_err < 1e-5 && lg_err < 1e-4,
           "ln1 %.3g softmax %.3g attn_out %.3g resid_post %.3g logits %.3g", ln_err, sm_err,
           out_err, post_err, lg_err);
    CHECK(fs != NULL);
    free(fn), free(lg), free(fs);
    al_st_close(f);
    al_model_free(&m);
    /* the LayerNorm kinds on a plain model: one line, no file */
    CHECK(t_sh("%s run --model %s/m1 --prompt hi --hooks ln1_scale,pattern --save-cache "
               "%s/p.safetensors 2> %s",
               t_bin(), dir, dir, t_path("e")) == 1);
    CHECK(t_one_line(t_path("e"), "hook kind 'ln1_scale' needs a model with LayerNorm"));
    CHECK(t_sh("test -e %s/p.safetensors", dir) != 0);
}
