/* test_api.c -- api.h's hooks and gradients from C (the Python package's
 * ground, and what the sanitizer build checks, which cannot load the
 * library into Python): the views' shapes and strides address the
 * engine's own buffers (checked against a model run directly); a write
 * is an intervention with the architecture's effect (a zeroed pattern =
 * gate 0); hundreds of registrations; a failing hook and a call from
 * inside a hook are refused; gradients equal finite differences taken
 * through writing hooks, and are refused after one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/api.h"
#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/util.h"
#include "test.h"

enum { AB = 2, AT = 7, AL = 2, AH = 3, AD = 4, AC = 8, AV = 11 };

/* A random model saved to dir (no tokenizer), and the same loaded; with
 * norm != AL_NORM_NONE, LayerNorm and every bias, far from their
 * initial values. */
static al_api_model *api_model_norm(al_model *m, const char *dir, int norm) {
    al_config c = al_config_default();
    c.n_layers = AL, c.d_model = AC, c.n_heads = AH, c.d_head = AD, c.n_ctx = AT, c.d_vocab = AV;
    c.seed = 9;
    if (norm != AL_NORM_NONE) c.norm_type = norm, c.biases = AL_BIAS_ALL;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
    if (norm != AL_NORM_NONE) t_ln_perturb(m, 12);
    CHECK_OK(al_ckpt_save(dir, m, NULL, NULL, NULL, NULL, &e), &e);
    char err[256];
    al_api_model *h = al_api_load(dir, err, sizeof err);
    CHECKF(h != NULL, "%s", err);
    return h;
}

static al_api_model *api_model(al_model *m, const char *dir) {
    return api_model_norm(m, dir, AL_NORM_NONE);
}

static void ids_of(int *ids) {
    for (int i = 0; i < AB * AT; i++) ids[i] = (i * 5 + 3) % AV;
}

typedef struct probe {
    al_api_model *h;
    int calls, ndim[8];
    int64_t shape[8][4], strides[8][4];
    float copy[8][AB * AT * 3 * AH * AD + AB * AH * AT * AT];
    int busy_rc;
    char busy_msg[256];
    int fail_at, zero_head, order[700], n_order;
    float add; /* added along dir at slot 0 (finite differences) */
    const float *dir;
} probe;

/* Copies the view element by element through its strides (the sanitizer
 * catches a stride that leaves the buffer). */
static int probe_fn(void *user, int slot, float *data, int nd, const int64_t *shape,
                    const int64_t *st) {
    probe *p = user;
    if (p->n_order < 700) p->order[p->n_order++] = slot;
    p->calls++;
    if (slot == p->fail_at) return 1;
    if (p->busy_rc == 1) {
        char err[256];
        float lg[AB * AT * AV];
        int ids[AB * AT];
        ids_of(ids);
        p->busy_rc = al_api_forward(p->h, ids, AB, AT, lg, NULL, err, sizeof err);
        snprintf(p->busy_msg, sizeof p->busy_msg, "%s", err);
    }
    int64_t S[4] = {1, 1, 1, 1}, D[4] = {0, 0, 0, 0};
    for (int k = 0; k < nd; k++) S[4 - nd + k] = shape[k], D[4 - nd + k] = st[k];
    size_t i = 0;
    for (int64_t a = 0; a < S[0]; a++)
        for (int64_t b = 0; b < S[1]; b++)
            for (int64_t c = 0; c < S[2]; c++)
                for (int64_t d = 0; d < S[3]; d++, i++) {
                    float *x = data + a * D[0] + b * D[1] + c * D[2] + d * D[3];
                    if (slot < 8) p->copy[slot][i] = *x;
                    if (p->zero_head >= 0 && b == p->zero_head) *x = 0; /* (B, H, T, S) */
                    if (p->dir && slot == 0) *x += p->add * p->dir[i];
                }
    if (slot < 8) {
        p->ndim[slot] = nd;
        memcpy(p->shape[slot], shape, sizeof(int64_t) * nd);
        memcpy(p->strides[slot], st, sizeof(int64_t) * nd);
    }
    return 0;
}

TEST(api_hook_views_address_the_engine_buffers) {
    al_model m;
    al_api_model *h = api_model(&m, t_path("m"));
    int ids[AB * AT];
    ids_of(ids);
    al_err e;
    CHECK_OK(al_model_forward(&m, ids, NULL, AB, AT, &e), &e);
    int pts[3] = {AL_HOOK_Q, AL_HOOK_PATTERN, AL_HOOK_RESID_POST}, lys[3] = {1, 1, 0};
    probe *p = calloc(1, sizeof *p);
    p->h = h, p->fail_at = -1, p->zero_head = -1;
    float lg[AB * AT * AV], want[AB * AT * AV];
    double loss = 0;
    char err[256];
    CHECKF(al_api_run_hooks(h, ids, AB, AT, 1, 3, pts, lys, probe_fn, p, lg, NULL, &loss, err,
                            sizeof err) == 0,
           "%s", err);
    CHECK(p->calls == 3 && p->ndim[0] == 4 && p->ndim[1] == 4 && p->ndim[2] == 3);
    int64_t q_st[4] = {AT * 3 * AH * AD, 3 * AH * AD, AD, 1},
            a_st[4] = {AH * AT * AT, AT * AT, AT, 1};
    int64_t q_sh[4] = {AB, AT, AH, AD}, a_sh[4] = {AB, AH, AT, AT};
    CHECK(!memcmp(p->strides[0], q_st, sizeof q_st) && !memcmp(p->shape[0], q_sh, sizeof q_sh));
    CHECK(!memcmp(p->strides[1], a_st, sizeof a_st) && !memcmp(p->shape[1], a_sh, sizeof a_sh));
    /* q of layer 1 and its pattern, element for element as the model holds them */
    size_t BT = AB * AT, HD = AH * AD;
    int bad = 0;
    for (size_t i = 0; i < BT; i++)
        for (size_t k = 0; k < HD; k++)
            bad += p->copy[0][i * HD + k] != m.qkv[(BT + i) * 3 * HD + k];
    bad += memcmp(p->copy[1], m.att + (size_t)AB * AH * AT * AT, sizeof(float) * AB * AH * AT * AT);
    bad += memcmp(p->copy[2], m.x + BT * AC, sizeof(float) * BT * AC) != 0;
    CHECKF(bad == 0, "%d elements differ", bad);
    al_model_unembed(&m, m.x + 2 * BT * AC, (int)BT, want);
    CHECK(!memcmp(lg, want, sizeof want) && loss > 0);
    /* a zeroed pattern head = that head's gate 0, and an intervention */
    p->zero_head = 2;
    int one_pt = AL_HOOK_PATTERN, one_l = 1;
    CHECK(al_api_run_hooks(h, ids, AB, AT, 1, 1, &one_pt, &one_l, probe_fn, p, lg, NULL, NULL, err,
                           sizeof err) == 0);
    m.gates[1 * AH + 2] = 0;
    CHECK_OK(al_model_forward(&m, ids, NULL, AB, AT, &e), &e);
    al_model_unembed(&m, m.x + 2 * BT * AC, (int)BT, want);
    double worst = 0;
    for (size_t i = 0; i < BT * AV; i++) worst = fmax(worst, fabs(lg[i] - want[i]));
    CHECKF(worst < 1e-5, "zeroed pattern vs gate 0: %g", worst);
    float *out[1] = {p->copy[7]};
    int zp = AL_HOOK_Z, zl = 0;
    CHECK(al_api_grads(h, AL_API_METRIC_LOSS, 0, NULL, NULL, 1, &zp, &zl, out, NULL, err,
                       sizeof err) == -1 &&
          strstr(err, "intervention"));
    free(p);
    al_api_free(h);
    al_model_free(&m);
}

TEST(api_hooks_order_failures_busy) {
    al_model m;
    al_api_model *h = api_model(&m, t_path("m"));
    int ids[AB * AT];
    ids_of(ids);
    enum { N = 600 };
    int pts[N], lys[N];
    int runs[AL_HOOK_N_POINTS], nr = 0;
    char nm[96], err[256];
    int info[3];
    int64_t shape[4];
    for (int p = 0; al_api_hook_point(h, p, 0, AB, AT, nm, sizeof nm, info, shape) >= 0; p++)
        if (info[0] && !info[1] && !info[2]) runs[nr++] = p;
    CHECK(nr >= 7);
    for (int i = 0; i < N; i++) pts[i] = runs[i % nr], lys[i] = (i / nr) % AL;
    probe *p = calloc(1, sizeof *p);
    p->h = h, p->fail_at = -1, p->zero_head = -1;
    CHECKF(al_api_run_hooks(h, ids, AB, AT, 0, N, pts, lys, probe_fn, p, NULL, NULL, NULL, err,
                            sizeof err) == 0,
           "%s", err);
    CHECK(p->calls == N && p->n_order == N);
    for (int pt = 0; pt < nr; pt++)
        for (int l = 0; l < AL; l++) { /* at each point, the order registered */
            int last = -1;
            for (int k = 0; k < N; k++) {
                int s = p->order[k];
                if (pts[s] != runs[pt] || lys[s] != l) continue;
                CHECK(s > last);
                last = s;
            }
        }
    /* a failing hook fails the forward, naming the point; the model works after */
    p->calls = 0, p->n_order = 0, p->fail_at = 3;
    CHECK(al_api_run_hooks(h, ids, AB, AT, 0, N, pts, lys, probe_fn, p, NULL, NULL, NULL, err,
                           sizeof err) == -1 &&
          strstr(err, "a hook failed at blocks."));
    p->fail_at = -1, p->busy_rc = 1;
    CHECK(al_api_run_hooks(h, ids, AB, AT, 0, 1, pts, lys, probe_fn, p, NULL, NULL, NULL, err,
                           sizeof err) == 0);
    CHECKF(p->busy_rc == -1 && strstr(p->busy_msg, "busy"), "%d %s", p->busy_rc, p->busy_msg);
    float lg[AB * AT * AV];
    CHECK(al_api_forward(h, ids, AB, AT, lg, NULL, err, sizeof err) == 0);
    /* refusals: a point the forward does not run, a bad shape, bad ids */
    for (int q = 0; q < AL_HOOK_N_POINTS; q++)
        if (!al_hook_runs(q)) {
            int z = 0;
            CHECK(al_api_run_hooks(h, ids, AB, AT, 0, 1, &q, &z, probe_fn, p, NULL, NULL, NULL, err,
                                   sizeof err) == -1 &&
                  strstr(err, "not run"));
            break;
        }
    CHECK(al_api_run_hooks(h, ids, AB, AT + 1, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, err,
                           sizeof err) == -1 &&
          strstr(err, "n_ctx"));
    ids[3] = AV;
    CHECK(al_api_run_hooks(h, ids, AB, AT, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, err,
                           sizeof err) == -1 &&
          strstr(err, "outside the vocabulary"));
    free(p);
    al_api_free(h);
    al_model_free(&m);
}

/* Each gradient against a central finite difference of the log-prob
 * metric, the activation moved along a random direction by a hook. */
/* Gradients at every kind of point against central differences of the
 * log-prob, through an added direction at that point; then the
 * refusals (plain model only). */
static void grads_fd(int norm) {
    al_model m;
    al_api_model *h = api_model_norm(&m, t_path("m"), norm);
    int ids[AB * AT];
    ids_of(ids);
    const int pos = AT - 2, tgt[AB] = {4, 9};
    int pts[] = {AL_HOOK_RESID_PRE, AL_HOOK_Q, AL_HOOK_K,      AL_HOOK_V,
                 AL_HOOK_PATTERN,   AL_HOOK_Z, AL_HOOK_RESULT, AL_HOOK_RESID_POST};
    enum { NP = sizeof pts / sizeof pts[0] };
    enum { MAXN = AB * AT * AH * AC };
    probe *p = calloc(1, sizeof *p);
    float *g = malloc(sizeof(float) * MAXN * NP), *dir = malloc(sizeof(float) * MAXN);
    float *lg = malloc(sizeof(float) * AB * AT * AV);
    al_rng r;
    al_rng_seed(&r, 4);
    for (int i = 0; i < MAXN; i++) dir[i] = (float)al_rng_normal(&r);
    char err[256];
    for (int l = 0; l < AL; l++) {
        int lys[NP];
        float *out[NP];
        for (int i = 0; i < NP; i++) lys[i] = l, out[i] = g + (size_t)i * MAXN;
        double v0 = 0;
        p->h = h, p->fail_at = -1, p->zero_head = -1;
        CHECK(al_api_run_hooks(h, ids, AB, AT, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, err,
                               sizeof err) == 0);
        CHECKF(al_api_grads(h, AL_API_METRIC_LOGPROB, pos, tgt, NULL, NP, pts, lys, out, &v0, err,
                            sizeof err) == 0,
               "%s", err);
        for (int i = 0; i < NP; i++) {
            int64_t sh[4];
            char nm[96];
            int info[3];
            int nd = al_api_hook_point(h, pts[i], l, AB, AT, nm, sizeof nm, info, sh);
            size_t n = 1;
            for (int k = 0; k < nd; k++) n *= (size_t)sh[k];
            double an = 0, f[2];
            for (size_t k = 0; k < n; k++) an += (double)out[i][k] * dir[k];
            for (int s = 0; s < 2; s++) {
                p->dir = dir, p->add = s ? -1e-2f : 1e-2f;
                CHECK(al_api_run_hooks(h, ids, AB, AT, 0, 1, &pts[i], &l, probe_fn, p, lg, NULL,
                                       NULL, err, sizeof err) == 0);
                f[s] = 0;
                for (int b = 0; b < AB; b++) {
                    const float *x = lg + ((size_t)b * AT + pos) * AV;
                    double mx = x[0], z = 0;
                    for (int v = 1; v < AV; v++) mx = fmax(mx, x[v]);
                    for (int v = 0; v < AV; v++) z += exp(x[v] - mx);
                    f[s] += x[tgt[b]] - mx - log(z);
                }
            }
            p->dir = NULL;
            double fd = (f[0] - f[1]) / 2e-2;
            CHECKF(fabs(fd - an) <= 1e-2 * fmax(1.0, fabs(an)), "%s: fd %g, grad %g", nm, fd, an);
        }
        CHECK(v0 < 0);
    }
    int zl = 0, zp = AL_HOOK_Z;
    float *o1[1] = {g};
    if (norm == AL_NORM_NONE) { /* the refusals, once */
        /* the last forward wrote (the finite differences): refused; then a plain one without loss */
        CHECK(al_api_grads(h, AL_API_METRIC_LOGPROB, pos, tgt, NULL, 1, &zp, &zl, o1, NULL, err,
                           sizeof err) == -1 &&
              strstr(err, "intervention"));
        CHECK(al_api_run_hooks(h, ids, AB, AT, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, err,
                               sizeof err) == 0);
        CHECK(al_api_grads(h, AL_API_METRIC_LOSS, 0, NULL, NULL, 1, &zp, &zl, o1, NULL, err,
                           sizeof err) == -1 &&
              strstr(err, "loss"));
        CHECK(al_api_grads(h, AL_API_METRIC_LOGPROB, AT, tgt, NULL, 1, &zp, &zl, o1, NULL, err,
                           sizeof err) == -1 &&
              strstr(err, "position"));
    }
    free(p);
    free(g);
    free(dir);
    free(lg);
    al_api_free(h);
    al_model_free(&m);
}

TEST(api_grads_finite_differences) { grads_fd(AL_NORM_NONE); }

/* Through ln1 and ln_final too: a LayerNorm model with every bias. */
TEST(api_grads_finite_differences_layernorm) { grads_fd(AL_NORM_LN); }

/* al_api_analysis twice in one process: the second call starts from the
 * command's defaults (the first call's option strings are gone), so a
 * required option it lacks is refused, never taken from the first call.
 * A mistyped analysis gets the CLI's "did you mean"; options that are not
 * an object, a driver option that is not true/false, an unknown key and
 * a wrong type are refused (2) with *doc left NULL. */
TEST(api_analysis_starts_from_defaults) {
    char opts[256], err[512], *doc = (char *)1;
    snprintf(opts, sizeof opts, "{\"model\": \"/nonexistent/model\", \"db\": \"%s\"}",
             t_path("x.db"));
    CHECK(al_api_analysis("scores", opts, &doc, err, sizeof err) == 1 && doc == NULL);
    CHECKF(strstr(err, "/nonexistent/model"), "%s", err);
    memset(opts, 'x', sizeof opts - 1);
    CHECK(al_api_analysis("scores", NULL, &doc, err, sizeof err) == 2);
    CHECKF(strstr(err, "--model is required"), "%s", err);
    CHECK(al_api_analysis("scroes", NULL, &doc, err, sizeof err) == 2);
    CHECKF(!strcmp(err, "unknown analysis 'scroes' (did you mean 'scores'?)"), "%s", err);
    CHECK(al_api_analysis("zzzzzzzz", "{}", &doc, err, sizeof err) == 2);
    CHECKF(strstr(err, "unknown analysis 'zzzzzzzz' (the analyses: ") && strstr(err, "scores"),
           "%s", err);
    CHECK(al_api_analysis(NULL, NULL, &doc, err, sizeof err) == -1);
    CHECK(al_api_analysis("scores", NULL, NULL, err, sizeof err) == -1);
    static const struct {
        const char *opts, *msg;
    } bad[] = {
        {"[1]", "must be a JSON object"},
        {"{\"model\": ", "options"},
        {"{\"strict\": 1}", "'strict' must be true or false"},
        {"{\"json\": true}", "'json'"},
        {"{\"modle\": \"m\"}", "unknown option '--modle' (did you mean --model?)"},
        {"{\"probe_r\": \"six\"}", "'probe_r' must be"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        doc = (char *)1;
        CHECKF(al_api_analysis("scores", bad[k].opts, &doc, err, sizeof err) == 2 && !doc, "%s",
               bad[k].opts);
        CHECKF(strstr(err, bad[k].msg), "%s: %s", bad[k].opts, err);
    }
}

/* api.h's checks for wider values, with the calls' and the CLI's
 * messages; the cache limit refused by the call too (once it fell back
 * to 2000) and by the CLI; hook names with the nearest one. */
TEST(api_checks_wide_values) {
    al_model m;
    t_pbuf mdir = t_pcopy("m");
    char *dir = mdir.s, err[512];
    al_api_model *h = api_model(&m, dir);
    int64_t ids[2 * AT] = {0};
    ids[3] = (int64_t)1 << 32 | 1; /* would wrap to 1 as an int */
    CHECK(al_api_check_ids(h, ids, 1, 4, 1, err, sizeof err) == -1);
    CHECKF(!strcmp(err, "token id 4294967297 at position 3 is outside the vocabulary (d_vocab 11)"),
           "%s", err);
    ids[3] = -1;
    CHECK(al_api_check_ids(h, ids, 2, 2, 0, err, sizeof err) == -1 && strstr(err, "token id -1"));
    ids[3] = AV - 1;
    CHECK(al_api_check_ids(h, ids, 2, AT, 1, err, sizeof err) == 0);
    CHECK(al_api_check_ids(h, ids, 1, 2 * AT, 0, err, sizeof err) == 0); /* decode: no n_ctx */
    CHECK(al_api_check_ids(h, ids, 1, 2 * AT, 1, err, sizeof err) == -1);
    CHECKF(!strcmp(err, "sequence length 14 exceeds n_ctx 7"), "%s", err);
    CHECK(al_api_check_ids(h, ids, 0, 3, 1, err, sizeof err) == -1);
    CHECKF(!strcmp(err, "batch shape 0x3 is empty"), "%s", err);
    CHECK(al_api_check_ids(NULL, ids, 1, 1, 1, err, sizeof err) == -1 && strstr(err, "closed"));
    int64_t tg[2] = {3, (int64_t)1 << 40};
    CHECK(al_api_check_logprob(h, AT, tg, 2, AT, err, sizeof err) == -1);
    CHECKF(!strcmp(err, "the log-prob metric's position 7 is outside 0..6"), "%s", err);
    CHECK(al_api_check_logprob(h, -3, tg, 2, AT, err, sizeof err) == -1 && strstr(err, "-3"));
    CHECK(al_api_check_logprob(h, 2, tg, 2, AT, err, sizeof err) == -1);
    CHECKF(!strcmp(err, "target id 1099511627776 (sequence 1) is outside the vocabulary (d_vocab "
                        "11)"),
           "%s", err);
    CHECK(al_api_check_logprob(h, 2, tg, 1, AT, err, sizeof err) == 0);
    const double bad[] = {-1, 0, INFINITY, NAN};
    int one[AT] = {1, 2, 3};
    for (int i = 0; i < 4; i++) {
        CHECK(al_api_check_cache(NULL, bad[i], err, sizeof err) == -1 &&
              strstr(err, "cache limit"));
        CHECK(al_api_cache(h, one, 1, 3, "z", bad[i], t_path("c.st"), err, sizeof err) == -1);
        CHECKF(strstr(err, "the cache limit must be a finite number of megabytes > 0"), "%s", err);
        CHECK(!al_file_exists(t_path("c.st")));
    }
    CHECK(al_api_check_cache(NULL, 0.5, err, sizeof err) == 0);
    CHECK(al_api_check_cache("z,pattern", 0.5, err, sizeof err) == 0);
    CHECK(al_api_check_cache("z,patern", 0.5, err, sizeof err) == -1);
    CHECKF(!strcmp(err, "unknown hook kind 'patern' (did you mean 'pattern'?)"), "%s", err);
    CHECK(al_api_check_cache("", 0.5, err, sizeof err) == -1 && strstr(err, "no hook kinds"));
    CHECK(al_api_cache(h, one, 1, 3, "patern", 10, t_path("c.st"), err, sizeof err) == -1);
    CHECKF(!strcmp(err, "unknown hook kind 'patern' (did you mean 'pattern'?)"), "%s", err);
    const char *cands[] = {"logits", NULL, "loss", "both"};
    CHECK(al_api_nearest("los", 4, cands) == 2 && al_api_nearest("logit", 4, cands) == 0);
    CHECK(al_api_nearest("zzzz", 4, cands) == -1 && al_api_nearest(NULL, 4, cands) == -1);
    const char *names[][2] = {{"blocks.1.attn.hook_patern", "'blocks.1.attn.hook_pattern'"},
                              {"attn.hook_z", "'blocks.0.attn.hook_z'"},
                              {"blocks.0.hook_embd", "'hook_embed'"},
                              {"hook_resid_pst", "'blocks.0.hook_resid_post'"},
                              {"ln_finl.hook_scale", "'ln_final.hook_scale'"}};
    for (int i = 0; i < 5; i++) {
        int pt, ly;
        char want[128];
        snprintf(want, sizeof want, "unknown hook name '%s' (did you mean %s?)", names[i][0],
                 names[i][1]);
        CHECK(al_api_hook_parse(h, names[i][0], &pt, &ly, err, sizeof err) == -1);
        CHECKF(!strcmp(err, want), "%s, want %s", err, want);
    }
    /* the CLI: the same limit check, and the suggestion for a kind */
    CHECK(t_sh("%s run --model %s --prompt ab --save-cache %s --cache-max-mb -1 2> %s", t_bin(),
               dir, t_path("c.st"), t_path("e1")) == 2);
    CHECK(t_one_line(t_path("e1"), "--cache-max-mb: the cache limit must be a finite number of "
                                   "megabytes > 0, not -1"));
    CHECK(t_sh("%s run --model %s --prompt ab --save-cache %s --hooks z,patern 2> %s", t_bin(), dir,
               t_path("c.st"), t_path("e2")) == 2);
    CHECK(t_one_line(t_path("e2"), "unknown hook kind 'patern' (did you mean 'pattern'?)"));
    al_api_free(h);
    al_model_free(&m);
}
