/* test_patch_torch.c -- activation and path patching (patch.h) against an
 * independent PyTorch reference.
 *
 * Each test trains a small model with the CLI (1000 steps, a couple of
 * seconds, on blocks BOS + A + A of random tokens, so that clean and
 * corrupted runs differ by a clear margin), builds the induction task on
 * it (R = 6, N = 6 pairs, batches of 4: the last one is partial), runs
 * al_patch_run for every component in both directions and al_paths_run
 * in both directions (each also with o.naive = 1, which must give the
 * same numbers to 1e-5) and attribution patching's edges (the first-order
 * estimate of each path, al_attrpatch_run) in both directions, and writes
 * the task's tokens and items and every result to a JSON file. Models
 * of 1 to 4 layers. tests/patch_ref.py recomputes all of it
 * in float64 with forward hooks on its own small nn.Modules,
 * written from the definitions of patch.h and docs/design.md §2 and §5
 * (not from the C): exit 0 means every metric agrees within 1e-4, and
 * every effect too where |M_clean − M_corr| is not tiny. Skipped only
 * when PyTorch cannot be imported. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"
#include "attnlab/checkpoint.h"
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/patch.h"
#include "refio.h"
#include "test.h"

enum { PR = 6, PN = 6, PB = 4, NCOMP = 7 };
static const char *comps[NCOMP] = {"resid", "head", "head_pos", "q", "k", "v", "pattern"};
static const char *dirs[2] = {"denoise", "noise"};

/* A deliberate error in one written metric, to show the check can fail:
 * metric[k] of the result named what ("pattern noise", "paths denoise")
 * is written as metric[k] + by. */
typedef struct perturb {
    const char *what;
    int k;
    double by;
} perturb;

/* n byte tokens shaped like the task: blocks BOS (0) + A + A, A of 4..7
 * tokens uniform over 1..255, so that the probe's random tokens are
 * ordinary inputs and copying (one layer) or induction (two) pays. */
static void write_tokens(const char *path, size_t n) {
    int *ids = malloc(sizeof(int) * n);
    CHECK(ids != NULL);
    if (!ids) return;
    al_rng r;
    al_rng_seed(&r, 2025);
    size_t i = 0;
    while (i < n) {
        int a[8], len = 4 + (int)al_rng_below(&r, 4);
        for (int j = 0; j < len; j++) a[j] = 1 + (int)al_rng_below(&r, 255);
        ids[i++] = 0;
        for (int j = 0; j < 2 * len && i < n; j++) ids[i++] = a[j % len];
    }
    al_err e;
    CHECK_OK(al_tokens_save(path, ids, n, &e), &e);
    free(ids);
}

/* steps of training with flags into dir (a second or two for 1000). */
static int train(const char *dir, int steps, const char *flags) {
    int rc = t_sh("%s train --data %s --out %s --steps %d --batch 8 --warmup 10 --lr 1e-2 "
                  "--eval-every 0 --eval-batches 1 --threads 1 %s > %s 2>&1",
                  t_bin(), t_path("tok.bin"), dir, steps, flags, t_path("train.log"));
    CHECKF(rc == 0, "train %s failed (%d): %s", flags, rc, t_slurp(t_path("train.log")));
    return rc;
}

static int perturbed(const perturb *pt, const char *what) {
    return pt && !strcmp(pt->what, what) ? pt->k : -1;
}

/* Naive and incremental results: the same metrics to 1e-5, the same NaNs. */
static void same_numbers(const char *what, const double *a, const double *b, int n) {
    double worst = 0;
    int nan_ok = 1;
    for (int i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            nan_ok &= isnan(a[i]) && isnan(b[i]);
            continue;
        }
        worst = fmax(worst, fabs(a[i] - b[i]));
    }
    CHECKF(nan_ok && worst <= 1e-5, "%s: naive vs default differ by %.3g (NaNs %s)", what, worst,
           nan_ok ? "agree" : "differ");
}

/* One gate setting: every component and the paths, both directions, each
 * run incrementally (written) and naively (compared). */
static int write_case(FILE *f, al_model *m, const al_pairs *t, const perturb *pt) {
    const al_config *c = &m->cfg;
    int LH = c->n_layers * c->n_heads;
    al_err e;
    fputs("{\"gates\": [", f);
    for (int i = 0; i < LH; i++) fprintf(f, "%s%.9g", i ? "," : "", (double)m->gates[i]);
    fputs("],\n \"patch\": [", f);
    float gates[64];
    memcpy(gates, m->gates, sizeof(float) * (size_t)LH);
    int first = 1;
    for (int ci = 0; ci < NCOMP; ci++)
        for (int d = 0; d < 2; d++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s", comps[ci], dirs[d]);
            al_patch_opts o = al_patch_opts_defaults();
            o.component = comps[ci], o.direction = dirs[d];
            o.probe_r = PR, o.probe_n = PN, o.batch = PB;
            al_patch_result r, rn;
            if (al_patch_run(m, t, &o, &r, &e) != 0) {
                t_fail(__FILE__, __LINE__, "%s: %s", what, e.msg);
                return -1;
            }
            o.naive = 1;
            if (al_patch_run(m, t, &o, &rn, &e) != 0) {
                t_fail(__FILE__, __LINE__, "%s naive: %s", what, e.msg);
                al_patch_result_free(&r);
                return -1;
            }
            CHECKF(rn.n == r.n && rn.rows == r.rows && rn.cols == r.cols, "%s: grids", what);
            CHECKF(rn.m_clean == r.m_clean && rn.m_corr == r.m_corr, "%s: naive M %g %g vs %g %g",
                   what, rn.m_clean, rn.m_corr, r.m_clean, r.m_corr);
            if (rn.n == r.n) same_numbers(what, r.metric, rn.metric, r.n);
            CHECKF(!memcmp(gates, m->gates, sizeof(float) * (size_t)LH) && m->hooks.n == 0,
                   "%s: gates or patch spec changed", what);
            fprintf(f,
                    "%s\n  {\"component\": \"%s\", \"direction\": \"%s\", \"rows\": %d, "
                    "\"cols\": %d, \"L\": %d, \"H\": %d, \"N\": %d, \"T\": %d, \"m_clean\": ",
                    first ? "" : ",", comps[ci], dirs[d], r.rows, r.cols, r.L, r.H, r.N, r.T);
            first = 0;
            ref_put_num(f, r.m_clean);
            fputs(", \"m_corr\": ", f);
            ref_put_num(f, r.m_corr);
            fputs(",\n   \"metric\": ", f);
            ref_put_nums(f, r.metric, r.n, perturbed(pt, what), pt ? pt->by : 0);
            fputs(",\n   \"effect\": ", f);
            ref_put_nums(f, r.effect, r.n, -1, 0);
            fputc('}', f);
            al_patch_result_free(&r);
            al_patch_result_free(&rn);
        }
    fputs("],\n \"paths\": [", f);
    /* attribution patching's estimates on LayerNorm and bias models: test_attrpatch_ln.c */
    const int plain = al_config_is_plain(c);
    for (int d = 0; d < 2; d++) {
        char what[64];
        snprintf(what, sizeof what, "paths %s", dirs[d]);
        al_patch_opts o = al_patch_opts_defaults();
        o.direction = dirs[d], o.probe_r = PR, o.probe_n = PN, o.batch = PB;
        al_paths_result r, rn;
        if (al_paths_run(m, t, &o, &r, &e) != 0) {
            t_fail(__FILE__, __LINE__, "%s: %s", what, e.msg);
            return -1;
        }
        o.naive = 1;
        if (al_paths_run(m, t, &o, &rn, &e) != 0) {
            t_fail(__FILE__, __LINE__, "%s naive: %s", what, e.msg);
            al_paths_result_free(&r);
            return -1;
        }
        CHECKF(rn.n == r.n && rn.n_senders == r.n_senders && rn.n_recv == r.n_recv, "%s: layouts",
               what);
        CHECKF(rn.m_clean == r.m_clean && rn.m_corr == r.m_corr, "%s: naive M", what);
        if (rn.n == r.n) same_numbers(what, r.metric, rn.metric, r.n);
        int W = (c->n_layers > 1 ? c->n_layers - 1 : 1) * c->n_heads;
        CHECKF(r.width == W && r.n == 4 * r.n_senders * W && r.n_senders == 2 + W &&
                   r.n_recv == (c->n_layers - 1) * c->n_heads,
               "%s: n %d, n_senders %d, n_recv %d", what, r.n, r.n_senders, r.n_recv);
        CHECKF(!memcmp(gates, m->gates, sizeof(float) * (size_t)LH) && m->hooks.n == 0,
               "%s: gates or patch spec changed", what);
        fprintf(f,
                "%s\n  {\"direction\": \"%s\", \"n_senders\": %d, \"n_recv\": %d, "
                "\"L\": %d, \"H\": %d, \"N\": %d, \"T\": %d, \"m_clean\": ",
                d ? "," : "", dirs[d], r.n_senders, r.n_recv, r.L, r.H, r.N, r.T);
        ref_put_num(f, r.m_clean);
        fputs(", \"m_corr\": ", f);
        ref_put_num(f, r.m_corr);
        fputs(",\n   \"metric\": ", f);
        ref_put_nums(f, r.metric, r.n, perturbed(pt, what), pt ? pt->by : 0);
        fputs(",\n   \"effect\": ", f);
        ref_put_nums(f, r.effect, r.n, -1, 0);
        fputc('}', f);
        al_paths_result_free(&r);
        al_paths_result_free(&rn);
    }
    /* attribution patching's edges: the first-order estimate of each path */
    fputs("],\n \"attrpatch\": [", f);
    for (int d = 0; plain && d < 2; d++) {
        al_patch_opts o = al_patch_opts_defaults();
        o.direction = dirs[d], o.probe_r = PR, o.probe_n = PN, o.batch = PB;
        al_attrpatch_result r;
        if (al_attrpatch_run(m, t, &o, 0, &r, &e) != 0) {
            t_fail(__FILE__, __LINE__, "attrpatch %s: %s", dirs[d], e.msg);
            return -1;
        }
        fprintf(f,
                "%s\n  {\"direction\": \"%s\", \"n_senders\": %d, \"n_recv\": %d, "
                "\"n_edge\": %d, \"m_clean\": ",
                d ? "," : "", dirs[d], r.n_senders, r.n_recv, r.n_edge);
        ref_put_num(f, r.m_clean);
        fputs(", \"m_corr\": ", f);
        ref_put_num(f, r.m_corr);
        fputs(",\n   \"edge\": ", f);
        char what[64];
        snprintf(what, sizeof what, "attrpatch %s", dirs[d]);
        ref_put_nums(f, r.edge, r.n_edge, perturbed(pt, what), pt ? pt->by : 0);
        fputc('}', f);
        al_attrpatch_result_free(&r);
    }
    fputs("]}", f);
    return 0;
}

/* The model in dir under each of n_cases gate settings (gates or gates[i]
 * NULL: all 1), into the JSON file out. 0, or −1 after recording a
 * failure. */
static int write_results(const char *dir, const float *const *gates, int n_cases, const char *out,
                         const perturb *pt) {
    al_model m;
    al_err e;
    al_set_threads(1); /* tiny batches; and 2 cores shared: OpenMP threads only wait */
    if (al_ckpt_load(dir, &m, NULL, &e) != 0) {
        t_fail(__FILE__, __LINE__, "load %s: %s", dir, e.msg);
        return -1;
    }
    al_patch_opts o = al_patch_opts_defaults();
    o.probe_r = PR, o.probe_n = PN, o.batch = PB;
    al_pairs t;
    if (al_patch_task_make(&t, &m, NULL, 0, &o, &e) != 0) {
        t_fail(__FILE__, __LINE__, "task: %s", e.msg);
        al_model_free(&m);
        return -1;
    }
    CHECK(t.N == PN && t.T == 2 * PR + 1 && t.n_items == PN * (PR - 1) && !t.logit_diff);
    FILE *f = fopen(out, "w");
    CHECK(f != NULL);
    int rc = f ? 0 : -1;
    if (f) {
        fprintf(f, "{\"R\": %d, \"bos\": 0, \"L\": %d, \"H\": %d,\n", PR, m.cfg.n_layers,
                m.cfg.n_heads);
        ref_put_task(f, &t);
        fputs(",\n\"cases\": [", f);
        for (int i = 0; i < n_cases && rc == 0; i++) {
            int LH = m.cfg.n_layers * m.cfg.n_heads;
            for (int k = 0; k < LH; k++) m.gates[k] = gates && gates[i] ? gates[i][k] : 1.0f;
            if (i) fputs(",\n", f);
            rc = write_case(f, &m, &t, pt);
        }
        fputs("]}\n", f);
        if (fclose(f) != 0) rc = -1;
    }
    al_pairs_free(&t);
    al_model_free(&m);
    return rc;
}

/* tests/patch_ref.py on the model in dir and the results file (its exit
 * code; output in t_path("ref.out")). */
static int patch_ref(const char *dir, const char *results) {
    char args[2200];
    snprintf(args, sizeof args, "%s %s", dir, results);
    return ref_run("tests/patch_ref.py", args);
}

/* Every component, direction and path family (attribution patching only
 * for plain models) was compared. */
static void check_covered(int n_cases, int plain) {
    char *out = t_slurp(t_path("ref.out"));
    CHECK(out != NULL);
    if (!out) return;
    CHECKF(strstr(out, "task ok") != NULL, "the task was not checked:\n%s", out);
    for (int i = 0; i < n_cases; i++)
        for (int ci = 0; ci <= (plain ? NCOMP + 1 : NCOMP); ci++)
            for (int d = 0; d < 2; d++) {
                char name[64];
                snprintf(name, sizeof name, "case %d %s %s", i,
                         ci < NCOMP    ? comps[ci]
                         : ci == NCOMP ? "paths"
                                       : "attrpatch",
                         dirs[d]);
                CHECKF(strstr(out, name) != NULL, "patch_ref.py did not compare %s", name);
            }
    free(out);
}

static void run_case(const char *train_flags, const float *const *gates, int n_cases) {
    ref_need_torch("tests/patch_ref.py");
    write_tokens(t_path("tok.bin"), 40000);
    char dir[1024]; /* t_path's buffers are reused */
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    /* trained so that the effects are not all small; a quarter as long
     * under the sanitizers */
    if (train(dir, T_SAN ? 250 : 1000, train_flags) != 0) return;
    const char *res = t_path("results.json");
    if (write_results(dir, gates, n_cases, res, NULL) != 0) return;
    int rc = patch_ref(dir, res);
    CHECKF(rc == 0, "patch_ref.py exit %d:\n%s", rc, t_slurp(t_path("ref.out")));
    check_covered(n_cases, !strstr(train_flags, "--norm") && !strstr(train_flags, "--biases"));
}

/* Under the sanitizers, which check memory and not these numbers, the
 * configurations whose patching code no other case runs: 2 layers, the
 * LayerNorm and bias forwards; the others are the plain build's. */
static void san_skip(void) {
    if (T_SAN) t_skip("the same patching code as patch_torch_2layer: the plain build's");
}

/* Two layers: q/k/v paths into layer 1 and the direct path; all gates 1,
 * then gates that are not (one head off: its patches do nothing). */
TEST(patch_torch_2layer) {
    static const float g[8] = {0.5f, 1.5f, 1.0f, 0.0f, 2.0f, 0.75f, 1.25f, 1.0f};
    const float *gates[2] = {NULL, g};
    run_case("--n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 16 --seed 5", gates, 2);
}

/* One layer: only the direct path exists (the q/k/v channels are NaN). */
TEST(patch_torch_1layer) {
    san_skip();
    static const float g[4] = {1.5f, 0.5f, 1.0f, 2.0f};
    const float *gates[1] = {g};
    run_case("--n-layers 1 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 16 --seed 6 --tied", gates,
             1);
}

/* Three layers: senders embed, pos and the heads of layers 0 and 1;
 * receivers the q/k/v of the heads of layers 1 and 2 (from every earlier
 * sender) and the logits; every path in both directions. */
TEST(patch_torch_3layer) {
    san_skip();
    static const float g[12] = {0.5f,  1.5f, 1.0f, 0.0f, 2.0f, 0.75f,
                                1.25f, 1.0f, 0.8f, 1.1f, 0.0f, 1.3f};
    const float *gates[2] = {NULL, g};
    run_case("--n-layers 3 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 16 --seed 8", gates, 2);
}

/* Four layers (receivers in layers 1-3, a sender two layers before its
 * receiver), tied embeddings. */
TEST(patch_torch_4layer) {
    san_skip();
    run_case("--n-layers 4 --d-model 24 --n-heads 3 --d-head 8 --n-ctx 16 --seed 9 --tied", NULL,
             1);
}

/* Shortformer positions (W_pos in every head's q and k only): the
 * reference model reads positional_embedding_type from config.json. */
TEST(patch_torch_shortformer) {
    san_skip();
    static const float g[8] = {0.5f, 1.5f, 1.0f, 0.0f, 2.0f, 0.75f, 1.25f, 1.0f};
    const float *gates[2] = {NULL, g};
    run_case(
        "--n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 16 --seed 5 --pos shortformer",
        gates, 2);
}

/* LayerNorm and biases: every configuration is one full patched forward
 * (the incremental one is the plain model's), against the reference's
 * TransformerLens LayerNorm; path patching refuses such models. */
TEST(patch_torch_ln_biases) {
    static const float g[8] = {0.5f, 1.5f, 1.0f, 0.0f, 2.0f, 0.75f, 1.25f, 1.0f};
    const float *gates[1] = {g};
    run_case("--n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 16 --seed 5 --norm ln "
             "--biases all",
             gates, 1);
}

TEST(patch_torch_lnpre_shortformer) {
    run_case("--n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 16 --seed 6 --norm lnpre "
             "--biases qkvo --pos shortformer --tied",
             NULL, 1);
}

/* The check can fail: one number off by 3e-4 (in a grid entry, in a path
 * and in an attribution patching edge) is reported, naming the result it
 * is in and no other. */
TEST(patch_torch_detects_mismatch) {
    if (T_SAN) t_skip("checks the Python checker: the plain build's");
    ref_need_torch("tests/patch_ref.py");
    write_tokens(t_path("tok.bin"), 40000);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    if (train(dir, 200, "--n-layers 1 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 16 --seed 7"))
        return;
    /* head 0.0's pattern row 9; the direct path of sender 2 (head 0.0); its
     * attribution patching estimate */
    const perturb pts[3] = {{"pattern noise", 9, 3e-4},
                            {"paths denoise", (3 * 6 + 2) * 4, -3e-4},
                            {"attrpatch noise", (3 * 6 + 2) * 4, 3e-4}};
    const char *fail[3] = {"case 0 pattern noise", "case 0 paths denoise",
                           "case 0 attrpatch noise"};
    for (int i = 0; i < 3; i++) {
        const char *res = t_path("results.json");
        if (write_results(dir, NULL, 1, res, &pts[i]) != 0) return;
        int rc = patch_ref(dir, res);
        char *out = t_slurp(t_path("ref.out"));
        CHECKF(rc == 1, "patch_ref.py should report a mismatch (exit 1), got %d:\n%s", rc,
               out ? out : "");
        /* exactly one FAIL line, on the perturbed result */
        const char *p = out ? strstr(out, "FAIL") : NULL;
        CHECKF(p && !strstr(p + 4, "FAIL"), "one FAIL expected:\n%s", out ? out : "");
        const char *line = p;
        while (line && line > out && line[-1] != '\n') line--;
        CHECKF(line && !strncmp(line + strspn(line, " "), fail[i], strlen(fail[i])),
               "the FAIL should name %s:\n%s", fail[i], out ? out : "");
        free(out);
    }
}
