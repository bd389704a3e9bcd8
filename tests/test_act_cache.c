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
    CHECK(t_sh("%s run --model %s/m2 --prompt 'the cat sat on the mat' --save-cache %s/c.safetensors "
               "--json > %s 2> %s", t_bin(), dir, dir, t_path("run.json"), t_path("err")) == 0);
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
            for (int c = 0; c < C; c++) s += (double)xf[pos * C + c] * m.p[AL_P_WU][(size_t)c * V + v];
            lg[v] = s, mx = s > mx ? s : mx;
        }
        for (int v = 0; v < V; v++) z += exp(lg[v] - mx);
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(tk, "top")) {
            int id = (int)cJSON_GetObjectItemCaseSensitive(c, "id")->valuedouble;
            double p = exp(lg[id] - mx) / z, want = cJSON_GetObjectItemCaseSensitive(c, "p")->valuedouble;
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
                for (int c = 0; c < C; c++) s += (double)pre1[t * C + c] * al_head_wq(&m, 1, h)[c * D + d];
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
               "--save-cache %s/w.safetensors > %s", t_bin(), dir, dir, dir, t_path("out")) == 0);
    char p[1100];
    snprintf(p, sizeof p, "%s/w.safetensors", dir);
    al_st_file *f;
    al_err e;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    CHECK(al_st_count(f) == 3); /* tokens, z and pattern of one layer */
    al_st_close(f);
    /* too large: refused with the estimate, no file */
    CHECK(t_sh("%s run --model %s/m1 --data %s/s.val.bin --windows 50 --save-cache %s/big.safetensors "
               "--cache-max-mb 0.01 2> %s", t_bin(), dir, dir, dir, t_path("e1")) == 1);
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
    CHECK(t_sh("%s run --model %s/m1 --data %s/s.val.bin 2> %s", t_bin(), dir, dir, t_path("e3")) == 2);
    CHECK(t_one_line(t_path("e3"), "--data is for --save-cache"));
    CHECK(t_sh("test -e %s/x.safetensors", dir) != 0);
}
