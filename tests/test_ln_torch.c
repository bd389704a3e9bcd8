/* test_ln_torch.c -- LayerNorm and bias models against an independent
 * PyTorch reference (tests/ln_ref.py, written from TransformerLens's
 * definitions, float64).
 *
 * Random models (1 to 4 layers, standard and shortformer positions, LN
 * and LNPre, the demo's shape C 256, H 8 x 32 and TransformerLens's
 * attn-only shape C 512, H 8 x 64; LayerNorm weights and biases far from
 * their initial values; head gates not 1) are saved as model
 * directories; for each, the engine's logits, every hook point of
 * docs/hooks.md (read by hooks that copy what they see; the split q/k/v
 * inputs and their per-head ln1 in a second forward) and every
 * parameter's gradient of the mean loss go into a dump, and ln_ref.py
 * recomputes all of it: exit 0 means every hook and the logits are
 * within 1e-5 and every gradient within 1e-4 of the reference (norm of
 * the difference over norm of the reference, per tensor). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/hooks.h"
#include "attnlab/model.h"
#include "attnlab/safetensors.h"
#include "test.h"

#define PY "/usr/bin/python3"
#define MAXT 512

/* The dump under construction: tensors with owned names and data. */
typedef struct dump {
    al_st_tensor t[MAXT];
    char name[MAXT][96];
    void *data[MAXT];
    int n;
    const char *prefix; /* "hook." or "split." */
    const al_model *m;
} dump;

static void put(dump *d, const char *name, al_dtype dt, int nd, const int64_t *shape,
                const void *src, size_t bytes) {
    if (d->n >= MAXT) return;
    int i = d->n++;
    snprintf(d->name[i], sizeof d->name[i], "%s", name);
    d->data[i] = malloc(bytes);
    memcpy(d->data[i], src, bytes);
    d->t[i] = (al_st_tensor){d->name[i], dt, nd, {0}, d->data[i]};
    memcpy(d->t[i].shape, shape, sizeof(int64_t) * nd);
}

/* A hook that copies what it sees, in TransformerLens's shape: rows of
 * `width` floats, ld apart. */
static int capture(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    dump *d = ctx;
    const al_model *m = a->m;
    const al_config *c = &m->cfg;
    int B = m->B, T = m->T, H = c->n_heads;
    int64_t s[4];
    int nd = al_hook_shape(a->point, B, T, c->d_model, H, c->d_head, c->d_vocab, s);
    if (a->input >= 0) { /* split inputs' ln1: a head axis */
        s[3] = s[2], s[2] = H, nd = 4;
    }
    size_t total = 1;
    for (int i = 0; i < nd; i++) total *= (size_t)s[i];
    size_t width = a->point == AL_HOOK_PATTERN || a->point == AL_HOOK_ATTN_SCORES
                       ? (size_t)T
                       : total / ((size_t)B * T);
    size_t rows = total / width;
    float *buf = malloc(sizeof(float) * total);
    for (size_t r = 0; r < rows; r++) memcpy(buf + r * width, a->data + r * a->ld, 4 * width);
    char nm[96], tl[64];
    al_hook_name(a->point, a->layer, tl, sizeof tl);
    snprintf(nm, sizeof nm, "%s%s%s", d->prefix, tl,
             a->input < 0    ? ""
             : a->input == 0 ? ".q"
             : a->input == 1 ? ".k"
                             : ".v");
    put(d, nm, AL_DT_F32, nd, s, buf, 4 * total);
    free(buf);
    return 0;
}

typedef struct ln_case {
    int L, C, H, D, norm, pos, tied;
    unsigned biases;
} ln_case;

/* Model directory dir and its engine dump at path, for case k. */
static void make_case(const ln_case *k, uint64_t seed, const char *dir, const char *path) {
    al_config c = al_config_default();
    c.n_layers = k->L, c.d_model = k->C, c.n_heads = k->H, c.d_head = k->D;
    c.n_ctx = 16, c.d_vocab = 61, c.norm_type = k->norm, c.pos_type = k->pos;
    c.tied_embeddings = k->tied, c.biases = k->biases, c.seed = seed, c.ln_eps = 1e-5;
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    t_ln_perturb(&m, seed * 31 + 7);
    for (size_t i = 0; i < m.param_size[AL_P_WU]; i++) m.p[AL_P_WU][i] *= (float)sqrt(c.d_model);
    al_rng r; /* the inputs: the stream after the perturbation's */
    al_rng_seed(&r, seed * 31 + 7);
    for (int p = AL_P_LN1W; p < AL_NPARAM; p++)
        for (size_t i = 0; i < m.param_size[p]; i++) al_rng_normal(&r);
    CHECK_OK(al_ckpt_save(dir, &m, NULL, NULL, NULL, NULL, &e), &e);
    const int B = 2, T = 11;
    int in[22], tg[22];
    for (int i = 0; i < B * T; i++)
        in[i] = (int)al_rng_below(&r, 61), tg[i] = i == 4 ? -1 : (int)al_rng_below(&r, 61);
    static dump d;
    d.n = 0, d.m = &m;
    int64_t sh[2] = {B, T}, sg[2] = {c.n_layers, c.n_heads};
    put(&d, "inputs", AL_DT_I32, 2, sh, in, sizeof in);
    put(&d, "targets", AL_DT_I32, 2, sh, tg, sizeof tg);
    put(&d, "gates", AL_DT_F32, 2, sg, m.gates, 4 * (size_t)c.n_layers * c.n_heads);
    /* every point but the split inputs (they change how ln1 runs) */
    d.prefix = "hook.";
    for (int p = 0; p < AL_HOOK_N_POINTS; p++) {
        if (p == AL_HOOK_Q_INPUT || p == AL_HOOK_K_INPUT || p == AL_HOOK_V_INPUT) continue;
        if (c.norm_type == AL_NORM_NONE && (p == AL_HOOK_LN1_SCALE || p == AL_HOOK_LN1_NORMALIZED ||
                                            p == AL_HOOK_LNF_SCALE || p == AL_HOOK_LNF_NORMALIZED))
            continue;
        CHECK_OK(al_hook_add(&m, p, al_hook_is_model_level(p) ? 0 : -1, capture, &d, &e), &e);
    }
    CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
    CHECK(!m.intervened);
    al_hook_remove(&m, &d);
    /* split inputs: q/k/v inputs and the per-head ln1 of each */
    d.prefix = "split.";
    int split_pts[] = {AL_HOOK_Q_INPUT,   AL_HOOK_K_INPUT,        AL_HOOK_V_INPUT,
                       AL_HOOK_LN1_SCALE, AL_HOOK_LN1_NORMALIZED, AL_HOOK_Q};
    for (size_t i = 0; i < sizeof split_pts / sizeof split_pts[0]; i++)
        if (c.norm_type != AL_NORM_NONE || i < 3 || i == 5)
            CHECK_OK(al_hook_add(&m, split_pts[i], -1, capture, &d, &e), &e);
    CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
    al_hook_remove(&m, &d);
    /* the gradients of a training step */
    CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
    CHECK_OK(al_model_backward(&m, &e), &e);
    int64_t one = 1;
    put(&d, "loss", AL_DT_F32, 1, &one, &m.mean_loss, 4);
    for (int p = 0; p < AL_NPARAM; p++) {
        if (!m.param_size[p]) continue;
        for (int l = 0; l < (al_param_per_layer(p) ? c.n_layers : 1); l++) {
            char nm[80], gn[96];
            int64_t s[4];
            int nd = al_param_tl_name(&m, p, l, nm, sizeof nm, s);
            snprintf(gn, sizeof gn, "grad.%s", nm);
            size_t n = al_param_layer_size(&m, p);
            put(&d, gn, AL_DT_F32, nd, s, m.g[p] + (size_t)l * n, 4 * n);
        }
    }
    CHECK(d.n < MAXT);
    CHECK_OK(al_st_write(path, d.t, d.n, NULL, NULL, 0, &e), &e);
    for (int i = 0; i < d.n; i++) free(d.data[i]);
    al_model_free(&m);
}

static const ln_case CASES[] = {
    /* the demo's shape */
    {1, 256, 8, 32, AL_NORM_LN, AL_POS_STANDARD, 0, AL_BIAS_ALL},
    {2, 256, 8, 32, AL_NORM_LNPRE, AL_POS_SHORTFORMER, 0, AL_BIAS_ALL},
    {3, 256, 8, 32, AL_NORM_LN, AL_POS_SHORTFORMER, 1, AL_BIAS_Q | AL_BIAS_V | AL_BIAS_U},
    {4, 256, 8, 32, AL_NORM_LNPRE, AL_POS_STANDARD, 0, AL_BIAS_ALL},
    /* TransformerLens's attn-only-Nl shape */
    {1, 512, 8, 64, AL_NORM_LNPRE, AL_POS_SHORTFORMER, 0, AL_BIAS_ALL},
    {2, 512, 8, 64, AL_NORM_LN, AL_POS_STANDARD, 0, AL_BIAS_ALL},
    {3, 512, 8, 64, AL_NORM_LNPRE, AL_POS_STANDARD, 0, AL_BIAS_K | AL_BIAS_O},
    {4, 512, 8, 64, AL_NORM_LN, AL_POS_SHORTFORMER, 0, AL_BIAS_ALL},
    /* biases without LayerNorm */
    {2, 256, 8, 32, AL_NORM_NONE, AL_POS_STANDARD, 0, AL_BIAS_ALL},
};

static int run_ref(const char *args) {
    double t0 = al_now();
    int rc = t_sh(PY " tests/ln_ref.py %s > %s 2>&1", args, t_path("ref.out"));
    fprintf(stderr, "    ln_ref.py: %.1f s\n", al_now() - t0);
    if (rc == 77) t_skip("PyTorch not installed");
    if (rc == 127) t_skip(PY " not found");
    return rc;
}

/* Models [i0, i1) of CASES against the reference; must: names the
 * output must hold (each kind of point compared). */
static void run_cases(size_t i0, size_t i1, const char *const *must, size_t n_must) {
    char args[8192] = "";
    size_t k = 0;
    for (size_t i = i0; i < i1; i++) {
        char dn[16], pn[32];
        snprintf(dn, sizeof dn, "m%zu", i);
        snprintf(pn, sizeof pn, "d%zu.safetensors", i);
        t_pbuf dir = t_pcopy(dn), path = t_pcopy(pn);
        make_case(&CASES[i], 100 + i, dir.s, path.s);
        k += (size_t)snprintf(args + k, sizeof args - k, " %s %s", dir.s, path.s);
    }
    int rc = run_ref(args);
    char *out = t_slurp(t_path("ref.out"));
    CHECKF(rc == 0, "ln_ref.py exit %d:\n%s", rc, out ? out : "");
    char models[32];
    snprintf(models, sizeof models, "models: %zu", i1 - i0);
    CHECKF(out && strstr(out, models), "ln_ref.py did not compare %s", models);
    for (size_t i = 0; i < n_must; i++)
        CHECKF(out && strstr(out, must[i]), "ln_ref.py did not compare %s", must[i]);
    const char *w = out ? strstr(out, "worst:") : NULL; /* the measured errors, for the record */
    if (w) fprintf(stderr, "    %.*s\n", (int)strcspn(w, "\n"), w);
    free(out);
}

/* Every kind of point, in every model. */
static const char *const MUST[] = {"hook.hook_embed",
                                   "hook.hook_pos_embed",
                                   "hook.blocks.0.ln1.hook_scale",
                                   "hook.blocks.3.ln1.hook_normalized",
                                   "hook.blocks.0.attn.hook_attn_scores",
                                   "hook.blocks.1.attn.hook_pattern",
                                   "hook.blocks.0.attn.hook_result",
                                   "hook.blocks.3.hook_attn_out",
                                   "hook.ln_final.hook_scale",
                                   "hook.ln_final.hook_normalized",
                                   "hook.logits",
                                   "split.blocks.1.hook_v_input",
                                   "split.blocks.0.ln1.hook_scale.k",
                                   "split.blocks.2.ln1.hook_normalized.v",
                                   "grad.blocks.2.ln1.w",
                                   "grad.blocks.0.attn.b_Q",
                                   "grad.blocks.1.attn.b_O",
                                   "grad.ln_final.b",
                                   "grad.unembed.b_U",
                                   "grad.pos_embed.W_pos"};

TEST(ln_torch_reference_demo_shape) { run_cases(0, 4, MUST, sizeof MUST / sizeof MUST[0]); }
TEST(ln_torch_reference_tl_shape) { run_cases(4, 8, MUST, sizeof MUST / sizeof MUST[0]); }

/* Biases without LayerNorm; and the check can fail: the dump of model 0
 * against a model of the same config with other weights. */
TEST(ln_torch_reference_biases_and_mismatch) {
    const char *must[] = {"grad.blocks.1.attn.b_K", "hook.blocks.1.hook_attn_out"};
    run_cases(8, 9, must, 2);
    t_pbuf d0 = t_pcopy("d0.safetensors"), m0 = t_pcopy("m0"), mx = t_pcopy("mx");
    t_pbuf dx = t_pcopy("dx.safetensors");
    make_case(&CASES[0], 100, m0.s, d0.s);
    make_case(&CASES[0], 999, mx.s, dx.s);
    char bad[4200];
    snprintf(bad, sizeof bad, " %s %s", mx.s, d0.s);
    int rc = run_ref(bad);
    char *out = t_slurp(t_path("ref.out"));
    CHECKF(rc == 1 && out && strstr(out, "FAIL"),
           "ln_ref.py should refuse a dump of another model, exit %d:\n%s", rc, out ? out : "");
    free(out);
}
