/* bench_engine.c -- throughput of the C engine, one measurement per
 * process (bench/bench.sh runs it once per mode so that the peak RSS it
 * reports belongs to that measurement alone).
 *
 *   --mode train   forward + backward + AdamW (clip 1.0) on random tokens
 *   --mode infer   forward only (logits, softmax, loss); both with --norm
 *                  and --biases for LayerNorm and bias models
 *   --mode sgemm   cblas_sgemm on 4096x4096x4096, the machine's ceiling
 *   --mode matmul  the engine's product shapes at the default sizes
 *                  (B·T 4096, d_model 256, 3·H·D 768, d_vocab 4096;
 *                  forward and gradient products): GFLOP/s of al_sgemm
 *                  (the selected backend, packing included), of OpenBLAS,
 *                  and of oneDNN's matmul primitive called directly in
 *                  f32 and in bf16 (bf16 inputs, f32 output), the rates
 *                  the engine's tok/s is measured against
 *   --mode attr    attribution patching (al_attrpatch_run: every head,
 *                  head x position and path edge) on --pairs induction
 *                  pairs, beside the patching sweeps it approximates
 *                  (head, head_pos and path patching, incremental) and
 *                  beside two forwards and one activation backward per
 *                  batch, the cost it should be close to
 *   --mode discover  ACDC (al_discover_run, tau 0.01, KL) on --pairs
 *                  induction pairs: edges tested and circuit evaluations
 *                  per second, beside one plain forward pass of the
 *                  clean and corrupted sequences (what a naive evaluation
 *                  of a circuit costs at least); --wu-scale d_model gives
 *                  the random model logits of order 1, so that ACDC keeps
 *                  heads alive and visits every receiver of the graph
 *                  (at 1 it removes every logits edge and stops there)
 *   --mode sae     TopK SAE training steps (al_sae_forward, _backward,
 *                  Adam) on random activations of d_in = n_heads x d_head
 *   --mode sae-stream  the SAE trainer (al_sae_trainer_run) on --sae-model
 *                  and --sae-data: the model's forward to the z site
 *                  included, its own activations/s
 *   --mode patch   the activation-patching sweep al_patch_run (component
 *                  head_pos: every head x position, task induction) with
 *                  the incremental forward (al_model_forward_delta) on
 *                  --pairs pairs, and with one full patched forward per
 *                  configuration (o.naive) on --naive-pairs pairs (the
 *                  naive sweep takes minutes on all 64), plus the fast one
 *                  on those same pairs to compare results; rates are per
 *                  configuration·pair. One run each, no warm-up: a sweep
 *                  is thousands of forwards already.
 *
 * Warm-up iterations are excluded; then iterations run until --min-time
 * seconds have passed. Rates use the median iteration time (the mean is
 * printed too): on a shared machine the median is the robust figure.
 * Prints one JSON line. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <oneapi/dnnl/dnnl.h>

#include "attnlab/args.h"
#include "attnlab/checkpoint.h"
#include "attnlab/gemm.h"
#include "attnlab/model.h"
#include "attnlab/optim.h"
#include "attnlab/attrpatch.h"
#include "attnlab/discover.h"
#include "attnlab/patch.h"
#include "attnlab/prof.h"
#include "attnlab/sae.h"
#include "attnlab/sae_train.h"

static const char *o_mode = "train", *o_precision = "f32", *o_norm = "none", *o_biases = "none";
static int o_layers = 2, o_dmodel = 256, o_heads = 8, o_dhead = 32, o_ctx = 256;
static int o_vocab = 4096, o_batch = 16, o_threads = 2, o_warmup = 2, o_sgemm_n = 4096;
static double o_min_time = 3.0, o_wu_scale = 1.0;
static int o_pairs = 64, o_naive_pairs = 8, o_patch_r = 50, o_patch_batch = 8;
static int o_profile = 0;
static int o_sae_expansion = 8, o_sae_k = 32, o_sae_batch = 4096, o_sae_layer = 1;
static int o_sae_steps = 200;
static const char *o_sae_model = NULL, *o_sae_data = NULL, *o_sae_out = NULL;
static const char *o_model = NULL;

static al_flag flags[] =
    {{"mode", AL_STR, &o_mode, "M",
      "train, infer, sgemm, matmul, patch, attr, discover, sae or sae-stream", 0, 0},
     {"n-layers", AL_INT, &o_layers, "N", "attention layers", 0, 0},
     {"d-model", AL_INT, &o_dmodel, "N", "residual width", 0, 0},
     {"n-heads", AL_INT, &o_heads, "N", "heads per layer", 0, 0},
     {"d-head", AL_INT, &o_dhead, "N", "head width", 0, 0},
     {"n-ctx", AL_INT, &o_ctx, "N", "context length = sequence length", 0, 0},
     {"norm", AL_STR, &o_norm, "TYPE", "train, infer, patch, discover: LayerNorm none, ln or lnpre",
      0, 0},
     {"biases", AL_STR, &o_biases, "SET",
      "train, infer, patch, discover: biases none, all or letters of qkvou", 0, 0},
     {"d-vocab", AL_INT, &o_vocab, "N", "vocabulary size", 0, 0},
     {"model", AL_STR, &o_model, "DIR",
      "infer: a model directory's weights and shape instead of random ones (--n-ctx: the "
      "sequence length)",
      0, 0},
     {"batch", AL_INT, &o_batch, "N", "sequences per step", 0, 0},
     {"threads", AL_INT, &o_threads, "N", "OpenMP and OpenBLAS threads", 0, 0},
     {"warmup", AL_INT, &o_warmup, "N", "untimed iterations first", 0, 0},
     {"min-time", AL_FLOAT, &o_min_time, "S", "time iterations for at least S seconds", 0, 0},
     {"profile", AL_BOOL, &o_profile, NULL, "train, infer: ms per step of each operation (prof.h)",
      0, 0},
     {"precision", AL_STR, &o_precision, "P", "matmul inputs: f32 or bf16 (gemm.h)", 0, 0},
     {"sgemm-n", AL_INT, &o_sgemm_n, "N", "matrix size for --mode sgemm", 0, 0},
     {"pairs", AL_INT, &o_pairs, "N", "patch: pairs of the incremental sweep", 0, 0},
     {"naive-pairs", AL_INT, &o_naive_pairs, "N", "patch: pairs of the naive sweep", 0, 0},
     {"probe-r", AL_INT, &o_patch_r, "R", "patch: induction task R", 0, 0},
     {"patch-batch", AL_INT, &o_patch_batch, "N", "patch: pairs per forward", 0, 0},
     {"sae-expansion", AL_INT, &o_sae_expansion, "N", "sae: d_sae = N x d_in", 0, 0},
     {"sae-k", AL_INT, &o_sae_k, "K", "sae: TopK k", 0, 0},
     {"sae-batch", AL_INT, &o_sae_batch, "N", "sae: activations per step", 0, 0},
     {"sae-layer", AL_INT, &o_sae_layer, "L", "sae-stream: the z site's layer", 0, 0},
     {"sae-steps", AL_INT, &o_sae_steps, "N", "sae-stream: training steps", 0, 0},
     {"sae-model", AL_STR, &o_sae_model, "DIR", "sae-stream: model directory", 0, 0},
     {"sae-data", AL_STR, &o_sae_data, "FILE", "sae-stream: token file", 0, 0},
     {"sae-out", AL_STR, &o_sae_out, "DIR", "sae-stream: SAE directory to write", 0, 0},
     {"wu-scale", AL_FLOAT, &o_wu_scale, "X",
      "discover: W_U times X (logits of order 1 at X = d_model, so ACDC visits every receiver)", 0,
      0},
     AL_FLAGS_END};

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0; /* Linux: kilobytes */
}

/* Common tail of every JSON line: the matmul backend (ATTNLAB_MATMUL),
 * the BLAS identity and memory. */
static void print_tail(void) {
    printf("\"matmul\": \"%s\", \"precision\": \"%s\", \"peak_rss_mb\": %.1f, "
           "\"blas\": \"%s\", \"blas_threads\": %d}\n",
           al_gemm_backend_name(), al_precision_name(al_gemm_precision()), peak_rss_mb(),
           openblas_get_config(), openblas_get_num_threads());
}

/* Per-iteration times, for the median. */
#define MAX_ITERS 100000
static double g_times[MAX_ITERS];

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of g_times[0..n) (sorts them). */
static double median(int n) {
    qsort(g_times, (size_t)n, sizeof *g_times, cmp_double);
    return n % 2 ? g_times[n / 2] : 0.5 * (g_times[n / 2 - 1] + g_times[n / 2]);
}

/* Run step() warmup times untimed, then timed until min_time seconds
 * and at least 3 iterations. Returns the count; *total the seconds. */
static int time_loop(int (*step)(void *), void *arg, int warmup, double min_time, double *total) {
    for (int k = 0; k < warmup; k++)
        if (step(arg) != 0) return -1;
    int it = 0;
    double t0 = al_now();
    while (it < MAX_ITERS) {
        double s = al_now();
        if (step(arg) != 0) return -1;
        g_times[it++] = al_now() - s;
        if (al_now() - t0 >= min_time && it >= 3) break;
    }
    *total = al_now() - t0;
    return it;
}

typedef struct sgemm_arg {
    int n;
    float *a, *b, *c;
} sgemm_arg;

static int sgemm_step(void *p) {
    sgemm_arg *g = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b,
                g->n, 0.0f, g->c, g->n);
    return 0;
}

static int bench_sgemm(void) {
    size_t n = (size_t)o_sgemm_n;
    float *a = malloc(sizeof(float) * n * n * 3);
    if (!a) return fprintf(stderr, "bench_engine: out of memory\n"), 1;
    sgemm_arg g = {(int)n, a, a + n * n, a + 2 * n * n};
    for (size_t i = 0; i < 2 * n * n; i++) a[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
    double total;
    int it = time_loop(sgemm_step, &g, 1, o_min_time / 2, &total);
    double fl = 2.0 * n * n * n;
    printf("{\"impl\": \"c\", \"mode\": \"sgemm\", \"n\": %zu, \"threads\": %d, \"iters\": %d, "
           "\"seconds\": %.4f, \"gflops\": %.2f, \"gflops_mean\": %.2f, ",
           n, o_threads, it, total, fl / median(it) / 1e9, fl * it / total / 1e9);
    print_tail();
    free(a);
    return 0;
}

/* --mode matmul. The engine's products at the default sizes (M, N, K,
 * transA, transB): q|k|v, unembedding, dx from dlogits, W_U's and
 * W_QKV's gradients, the residual's W_O product. */
static const int MM_SHAPES[][5] = {{4096, 768, 256, 0, 0},  {4096, 4096, 256, 0, 0},
                                   {4096, 256, 4096, 0, 1}, {256, 4096, 4096, 1, 0},
                                   {256, 768, 4096, 1, 0},  {4096, 256, 256, 0, 0}};
#define MM_N (int)(sizeof MM_SHAPES / sizeof *MM_SHAPES)

/* Best of 5 timed runs (after one untimed) of one product, seconds. */
static double mm_best(int which, const int *s, const float *a, const float *b, float *c,
                      dnnl_engine_t eng, dnnl_stream_t st, int bf16) {
    int M = s[0], N = s[1], K = s[2], ta = s[3], tb = s[4];
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t am = NULL, bm = NULL, cm = NULL;
    if (which == 2) { /* oneDNN direct: dense operands, the same layouts */
        dnnl_data_type_t dt = bf16 ? dnnl_bf16 : dnnl_f32;
        dnnl_dims_t ad = {M, K}, bd = {K, N}, cd = {M, N};
        dnnl_dims_t as = {ta ? 1 : K, ta ? M : 1}, bs = {tb ? 1 : N, tb ? K : 1}, cs = {N, 1};
        dnnl_memory_desc_t amd, bmd, cmd;
        dnnl_matmul_desc_t md;
        dnnl_primitive_desc_t pd;
        if (dnnl_memory_desc_init_by_strides(&amd, 2, ad, dt, as) ||
            dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dt, bs) ||
            dnnl_memory_desc_init_by_strides(&cmd, 2, cd, dnnl_f32, cs) ||
            dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd) ||
            dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL))
            return -1;
        int bad = dnnl_primitive_create(&prim, pd) ||
                  dnnl_memory_create(&am, &amd, eng, DNNL_MEMORY_ALLOCATE) ||
                  dnnl_memory_create(&bm, &bmd, eng, DNNL_MEMORY_ALLOCATE) ||
                  dnnl_memory_create(&cm, &cmd, eng, c);
        dnnl_primitive_desc_destroy(pd);
        if (bad) return -1;
        void *h;
        dnnl_memory_get_data_handle(am, &h);
        memset(h, 0x3c, (size_t)M * K * (bf16 ? 2 : 4));
        dnnl_memory_get_data_handle(bm, &h);
        memset(h, 0x3c, (size_t)K * N * (bf16 ? 2 : 4));
    }
    double best = 1e30;
    for (int r = 0; r < 6; r++) {
        double t = al_now();
        if (which == 0)
            al_sgemm(ta, tb, M, N, K, 1.0f, a, ta ? M : K, b, tb ? K : N, 0.0f, c, N);
        else if (which == 1)
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, a, ta ? M : K, b, tb ? K : N,
                        0.0f, c, N);
        else {
            dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, am},
                                       {DNNL_ARG_WEIGHTS, bm},
                                       {DNNL_ARG_DST, cm}};
            if (dnnl_primitive_execute(prim, st, 3, args) || dnnl_stream_wait(st)) return -1;
        }
        t = al_now() - t;
        if (r && t < best) best = t;
    }
    if (prim) dnnl_primitive_destroy(prim);
    if (am) dnnl_memory_destroy(am), dnnl_memory_destroy(bm), dnnl_memory_destroy(cm);
    return best;
}

static int bench_matmul(void) {
    size_t big = (size_t)4096 * 4096;
    float *a = malloc(sizeof(float) * big), *b = malloc(sizeof(float) * big),
          *c = malloc(sizeof(float) * big);
    if (!a || !b || !c) return fprintf(stderr, "bench_engine: out of memory\n"), 1;
    for (size_t i = 0; i < big; i++) a[i] = b[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
    dnnl_engine_t eng;
    dnnl_stream_t st;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) ||
        dnnl_stream_create(&st, eng, dnnl_stream_default_flags))
        return fprintf(stderr, "bench_engine: oneDNN engine\n"), 1;
    /* rate over all shapes: total FLOPs / total best time */
    static const char *names[4] = {"al_sgemm", "openblas", "onednn_f32", "onednn_bf16"};
    double fl = 0, t[4] = {0};
    for (int s = 0; s < MM_N; s++) {
        fl += 2.0 * MM_SHAPES[s][0] * MM_SHAPES[s][1] * MM_SHAPES[s][2];
        for (int w = 0; w < 4; w++) {
            double x = mm_best(w < 2 ? w : 2, MM_SHAPES[s], a, b, c, eng, st, w == 3);
            if (x < 0) return fprintf(stderr, "bench_engine: oneDNN %s failed\n", names[w]), 1;
            t[w] += x;
        }
    }
    printf("{\"impl\": \"c\", \"mode\": \"matmul\", \"threads\": %d, \"shapes\": %d, ", o_threads,
           MM_N);
    for (int w = 0; w < 4; w++) printf("\"%s_gflops\": %.1f, ", names[w], fl / t[w] / 1e9);
    printf("\"impl_f32\": \"%s\", ", al_sgemm_impl(false, false, 4096, 768, 256, 1.0f, 0.0f));
    print_tail();
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
    free(a), free(b), free(c);
    return 0;
}

typedef struct model_arg {
    al_model *m;
    al_adamw *opt;
    al_optim_cfg *oc;
    const int *in;
    int B, T, train;
    long step, calls;
} model_arg;

/* One inference forward, or one training step (forward, backward, AdamW). */
static int model_step(void *p) {
    model_arg *g = p;
    al_err e;
    int BT = g->B * g->T;
    g->calls++;
    /* training as the trainer does it (one pass of the cross-entropy) */
    if ((g->train ? al_model_forward_backward(g->m, g->in, g->in + BT, g->B, g->T, &e)
                  : al_model_forward(g->m, g->in, g->in + BT, g->B, g->T, &e)) != 0) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        return -1;
    }
    if (g->train) al_adamw_step(g->opt, g->m, g->oc, ++g->step, g->oc->lr);
    return 0;
}

static int bench_model(int train) {
    al_err e;
    al_config c = al_config_default();
    c.n_layers = o_layers, c.d_model = o_dmodel, c.n_heads = o_heads, c.d_head = o_dhead;
    c.n_ctx = o_ctx, c.d_vocab = o_vocab, c.seed = 1;
    c.norm_type = !strcmp(o_norm, "ln") ? AL_NORM_LN : !strcmp(o_norm, "lnpre") ? AL_NORM_LNPRE : 0;
    if ((c.norm_type == 0 && strcmp(o_norm, "none")) || al_bias_spec_parse(o_biases, &c.biases))
        return fprintf(stderr, "bench_engine: --norm none|ln|lnpre, --biases none|all|qkvou\n"), 1;
    al_model m;
    al_adamw opt = {0};
    if (o_model && train) return fprintf(stderr, "bench_engine: --model is for --mode infer\n"), 1;
    if (o_model ? al_ckpt_load(o_model, &m, NULL, &e) : al_model_init(&m, &c, &e))
        return fprintf(stderr, "bench_engine: %s\n", e.msg), 1;
    if (o_model) { /* its shape, the sequences of --n-ctx tokens */
        int T = o_ctx;
        c = m.cfg;
        if (T > c.n_ctx)
            return fprintf(stderr, "bench_engine: --n-ctx %d > the model's %d\n", T, c.n_ctx), 1;
        c.n_ctx = T;
        o_norm = c.norm_type == AL_NORM_LN ? "ln" : c.norm_type == AL_NORM_LNPRE ? "lnpre" : "none";
        static char bs[8];
        int n = 0;
        for (int i = 0; i < 5; i++)
            if (c.biases & (1u << i)) bs[n++] = "qkvou"[i];
        bs[n] = 0;
        o_biases = n ? bs : "none";
    }
    m.skip_gate_grads = train; /* as the trainer does */
    int B = o_batch, T = o_ctx, BT = B * T;
    int *in = malloc(sizeof(int) * 2 * (size_t)BT);
    if (!in || (train && al_adamw_init(&opt, m.n_params, &e) != 0)) {
        fprintf(stderr, "bench_engine: out of memory\n");
        return 1;
    }
    al_rng r;
    al_rng_seed(&r, 42);
    for (int i = 0; i < 2 * BT; i++) in[i] = (int)al_rng_below(&r, (uint32_t)c.d_vocab);
    al_optim_cfg oc = {.lr = 1e-3,
                       .min_lr_frac = 1.0,
                       .beta1 = 0.9,
                       .beta2 = 0.95,
                       .eps = 1e-8,
                       .weight_decay = 0.1,
                       .grad_clip = 1.0};
    model_arg g = {&m, &opt, &oc, in, B, T, train, 0, 0};
    double total;
    al_prof_enable(o_profile);
    int it = time_loop(model_step, &g, o_warmup, o_min_time, &total);
    if (it < 0) return 1;
    double flops = al_model_forward_flops(&c, B, T) * (train ? 3.0 : 1.0), med = median(it);
    printf("{\"impl\": \"c\", \"mode\": \"%s\", \"n_layers\": %d, \"d_model\": %d, "
           "\"n_heads\": %d, \"d_head\": %d, \"n_ctx\": %d, \"d_vocab\": %d, \"batch\": %d, "
           "\"norm\": \"%s\", \"biases\": \"%s\", "
           "\"threads\": %d, \"iters\": %d, \"seconds\": %.4f, \"tokens_per_s\": %.1f, "
           "\"tokens_per_s_mean\": %.1f, \"gflops\": %.2f, \"loss\": %.4f, ",
           train ? "train" : "infer", c.n_layers, c.d_model, c.n_heads, c.d_head, c.n_ctx,
           c.d_vocab, B, o_norm, o_biases, o_threads, it, total, BT / med, (double)BT * it / total,
           flops / med / 1e9, m.mean_loss);
    if (o_profile) {
        /* ms per step of each operation (warm-up steps included in both
         * the totals and the count), and what no operation covers */
        double all = 0.0;
        printf("\"profile_ms\": {");
        for (int op = 0; op < AL_OP_N; op++) {
            double ms = 1e3 * al_prof_seconds(op) / (double)g.calls;
            all += ms;
            printf("\"%s\": %.2f, ", al_prof_name(op), ms);
        }
        printf("\"sum\": %.2f, \"step\": %.2f}, ", all, 1e3 * med);
        al_prof_enable(0);
    }
    print_tail();
    free(in);
    al_adamw_free(&opt);
    al_model_free(&m);
    return 0;
}

/* One al_patch_run of component head_pos on the induction task. */
static int patch_sweep(al_model *m, int naive, int pairs, al_patch_result *r) {
    al_patch_opts o = al_patch_opts_defaults();
    o.component = "head_pos", o.probe_r = o_patch_r, o.probe_n = pairs;
    o.batch = o_patch_batch, o.naive = naive;
    al_pairs t;
    al_err e;
    if (al_patch_task_make(&t, m, NULL, 0, &o, &e) != 0) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        return -1;
    }
    int rc = al_patch_run(m, &t, &o, r, &e);
    if (rc) fprintf(stderr, "bench_engine: %s\n", e.msg);
    al_pairs_free(&t);
    return rc;
}

/* The model of the patching and attribution benches: the sizes of the
 * flags (LayerNorm and biases too), seed 1. */
static int sweep_model(al_model *m, al_err *e) {
    al_config c = al_config_default();
    c.n_layers = o_layers, c.d_model = o_dmodel, c.n_heads = o_heads, c.d_head = o_dhead;
    c.n_ctx = o_ctx, c.d_vocab = o_vocab, c.seed = 1;
    c.norm_type = !strcmp(o_norm, "ln") ? AL_NORM_LN : !strcmp(o_norm, "lnpre") ? AL_NORM_LNPRE : 0;
    if ((c.norm_type == 0 && strcmp(o_norm, "none")) || al_bias_spec_parse(o_biases, &c.biases))
        return al_errf(e, "bad --norm '%s' or --biases '%s'", o_norm, o_biases);
    return al_model_init(m, &c, e);
}

static int bench_patch(void) {
    al_err e;
    al_model m;
    if (sweep_model(&m, &e) != 0) return fprintf(stderr, "bench_engine: %s\n", e.msg), 1;
    const al_config c = m.cfg;
    al_patch_result fast, fast_few, naive;
    if (patch_sweep(&m, 0, o_pairs, &fast) || patch_sweep(&m, 0, o_naive_pairs, &fast_few) ||
        patch_sweep(&m, 1, o_naive_pairs, &naive))
        return 1;
    double diff = 0.0; /* the two ways on the same pairs: the same numbers to rounding */
    for (int i = 0; i < naive.n; i++) {
        double d = fabs(naive.metric[i] - fast_few.metric[i]);
        if (d > diff || d != d) diff = d;
    }
    int n = fast.n;
    double cp = (double)n * o_pairs / fast.seconds,
           cpf = (double)n * o_naive_pairs / fast_few.seconds,
           cpn = (double)n * o_naive_pairs / naive.seconds;
    printf("{\"impl\": \"c\", \"mode\": \"patch\", \"component\": \"head_pos\", \"n_layers\": %d, "
           "\"d_model\": %d, \"n_heads\": %d, \"d_head\": %d, \"n_ctx\": %d, \"d_vocab\": %d, "
           "\"probe_r\": %d, \"batch\": %d, \"threads\": %d, \"configs\": %d, \"pairs\": %d, "
           "\"seconds\": %.2f, \"configs_per_s\": %.2f, \"config_pairs_per_s\": %.1f, "
           "\"naive_pairs\": %d, \"naive_seconds\": %.2f, \"naive_config_pairs_per_s\": %.1f, "
           "\"fast_few_seconds\": %.2f, \"fast_few_config_pairs_per_s\": %.1f, "
           "\"speedup\": %.2f, \"speedup_same_pairs\": %.2f, \"max_metric_diff\": %.3g, ",
           c.n_layers, c.d_model, c.n_heads, c.d_head, c.n_ctx, c.d_vocab, o_patch_r, o_patch_batch,
           o_threads, n, o_pairs, fast.seconds, n / fast.seconds, cp, o_naive_pairs, naive.seconds,
           cpn, fast_few.seconds, cpf, cp / cpn, cpf / cpn, diff);
    print_tail();
    al_patch_result_free(&fast);
    al_patch_result_free(&fast_few);
    al_patch_result_free(&naive);
    al_model_free(&m);
    return 0;
}

/* Two forwards (clean, corrupted) and one activation backward per batch
 * of t: what attribution patching should cost about. */
static double fwd_bwd_seconds(al_model *m, const al_pairs *t) {
    al_err e;
    double t0 = al_now();
    for (int n0 = 0; n0 < t->N; n0 += o_patch_batch) {
        int nb = t->N - n0 < o_patch_batch ? t->N - n0 : o_patch_batch;
        if (al_model_forward(m, t->clean + (size_t)n0 * t->T, NULL, nb, t->T, &e) ||
            al_attrpatch_grad(m, t, 1, n0, nb, NULL, NULL, NULL, NULL, &e)) {
            fprintf(stderr, "bench_engine: %s\n", e.msg);
            return -1;
        }
    }
    return al_now() - t0;
}

static int bench_attr(void) {
    al_err e;
    al_model m;
    if (sweep_model(&m, &e) != 0) return fprintf(stderr, "bench_engine: %s\n", e.msg), 1;
    const al_config c = m.cfg;
    al_patch_opts o = al_patch_opts_defaults();
    o.probe_r = o_patch_r, o.probe_n = o_pairs, o.batch = o_patch_batch;
    al_pairs t;
    al_attrpatch_result r;
    if (al_patch_task_make(&t, &m, NULL, 0, &o, &e) || al_attrpatch_run(&m, &t, &o, 1, &r, &e)) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        return 1;
    }
    double fb = fwd_bwd_seconds(&m, &t);
    if (fb < 0) return 1;
    int configs = r.L * r.H + r.L * r.H * r.T; /* heads, head x position, existing edges */
    for (int i = 0; i < r.n_edge; i++) configs += isfinite(r.edge[i]) != 0;
    printf("{\"impl\": \"c\", \"mode\": \"attr\", \"n_layers\": %d, \"d_model\": %d, "
           "\"n_heads\": %d, \"d_head\": %d, \"d_vocab\": %d, \"probe_r\": %d, \"pairs\": %d, "
           "\"batch\": %d, \"threads\": %d, \"configs\": %d, \"attr_seconds\": %.3f, "
           "\"patch_seconds\": %.2f, \"fwd_bwd_seconds\": %.3f, \"speedup\": %.1f, "
           "\"attr_over_fwd_bwd\": %.2f, \"pearson_head\": %.3f, \"pearson_edge\": %.3f, ",
           c.n_layers, c.d_model, c.n_heads, c.d_head, c.d_vocab, o_patch_r, o_pairs, o_patch_batch,
           o_threads, configs, r.seconds, r.seconds_patch, fb, r.seconds_patch / r.seconds,
           r.seconds / fb, r.agree[AL_AP_HEAD].pearson, r.agree[AL_AP_EDGE].pearson);
    print_tail();
    al_attrpatch_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
    return 0;
}

/* *best = the fastest of its value (negative: none yet) and reps
 * forwards of both runs of every pair of t, in batches: 0, or −1 with
 * the error printed. */
static int naive_floor(al_model *m, const al_pairs *t, int reps, double *best) {
    al_err e;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = al_now();
        for (int n0 = 0; n0 < t->N; n0 += o_patch_batch) {
            int nb = t->N - n0 < o_patch_batch ? t->N - n0 : o_patch_batch;
            if (al_model_forward(m, t->clean + (size_t)n0 * t->T, NULL, nb, t->T, &e) ||
                al_model_forward(m, t->corr + (size_t)n0 * t->T, NULL, nb, t->T, &e)) {
                fprintf(stderr, "bench_engine: %s\n", e.msg);
                return -1;
            }
        }
        double dt = al_now() - t0;
        if (*best < 0 || dt < *best) *best = dt;
    }
    return 0;
}

static int bench_discover(void) {
    al_err e;
    al_model m;
    if (sweep_model(&m, &e) != 0) return fprintf(stderr, "bench_engine: %s\n", e.msg), 1;
    const al_config c = m.cfg;
    for (size_t i = 0; i < m.param_size[AL_P_WU]; i++) m.p[AL_P_WU][i] *= (float)o_wu_scale;
    al_patch_opts po = al_patch_opts_defaults();
    po.probe_r = o_patch_r, po.probe_n = o_pairs, po.batch = o_patch_batch;
    al_discover_opts o = al_discover_opts_defaults();
    o.batch = o_patch_batch;
    al_pairs t;
    al_discover_result r;
    if (al_patch_task_make(&t, &m, NULL, 0, &po, &e)) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        return 1;
    }
    /* the floor of a naive evaluation: both runs forward, every pair; the
     * fastest of eight, three before discovery (so that it also starts
     * with the forward's kernels made and its buffers touched) and five
     * after, so that a slow moment of a shared machine does not flatter
     * the ratio */
    double fwd = -1.0;
    if (naive_floor(&m, &t, 3, &fwd)) return 1;
    if (al_discover_run(&m, &t, &o, &r, &e)) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        return 1;
    }
    if (naive_floor(&m, &t, 5, &fwd)) return 1;
    int tested = 0;
    for (int k = 0; k < r.n_edges; k++) tested += !isnan(r.score[k]);
    printf("{\"impl\": \"c\", \"mode\": \"discover\", \"norm\": \"%s\", \"biases\": \"%s\", "
           "\"n_layers\": %d, \"d_model\": %d, "
           "\"n_heads\": %d, \"d_head\": %d, \"d_vocab\": %d, \"probe_r\": %d, \"pairs\": %d, "
           "\"batch\": %d, \"threads\": %d, \"edges\": %d, \"edges_tested\": %d, \"evals\": %ld, "
           "\"kept\": %d, \"seconds\": %.2f, \"edges_per_s\": %.1f, \"evals_per_s\": %.2f, "
           "\"naive_eval_floor_s\": %.3f, \"speedup_vs_naive_floor\": %.1f, ",
           o_norm, o_biases, c.n_layers, c.d_model, c.n_heads, c.d_head, c.d_vocab, o_patch_r,
           o_pairs, o_patch_batch, o_threads, r.n_edges, tested, r.evals, r.n_kept, r.seconds,
           tested / r.seconds, r.evals / r.seconds, fwd, fwd * r.evals / r.seconds);
    print_tail();
    al_discover_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
    return 0;
}

/* One SAE training step on a fixed batch of random activations: forward,
 * backward, dead counters, Adam with the decoder-row constraint (the
 * trainer's inner loop without the model). */
typedef struct sae_arg {
    al_sae *s;
    al_sae_adam *o;
    const float *x;
    int B;
    long t;
} sae_arg;

static int sae_step(void *p) {
    sae_arg *g = p;
    al_err e;
    if (al_sae_forward(g->s, g->x, g->B, &e) || al_sae_backward(g->s, &e)) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        return -1;
    }
    al_sae_update_dead(g->s);
    al_sae_adam_step(g->s, g->o, 1e-4, 0.9, 0.999, 1e-8, ++g->t);
    return 0;
}

/* TopK SAE on z of the default model's width (d_in = n_heads x d_head):
 * activations/s from the median step; dense-equivalent GFLOP/s counts
 * the 6·B·d_in·d_sae a dense implementation does (encoder and decoder,
 * forward and backward), which TopK's sparse decoder and backward skip. */
static int bench_sae(void) {
    al_err e;
    int d_in = o_heads * o_dhead, d_sae = o_sae_expansion * d_in, B = o_sae_batch;
    al_sae_cfg c = al_sae_cfg_default(d_in, d_sae);
    c.k = o_sae_k;
    al_sae s = {0};
    al_sae_adam o = {0};
    float *x = malloc(sizeof(float) * (size_t)B * d_in);
    if (!x || al_sae_init(&s, &c, 1, &e) || al_sae_adam_init(&o, s.n_params, &e)) {
        fprintf(stderr, "bench_engine: %s\n", x ? e.msg : "out of memory");
        return 1;
    }
    al_rng r;
    al_rng_seed(&r, 7);
    for (size_t i = 0; i < (size_t)B * d_in; i++) x[i] = (float)al_rng_normal(&r);
    sae_arg g = {&s, &o, x, B, 0};
    double total;
    int it = time_loop(sae_step, &g, o_warmup, o_min_time, &total);
    if (it < 0) return 1;
    double med = median(it), dense = 6.0 * B * d_in * (double)d_sae;
    printf("{\"impl\": \"c\", \"mode\": \"sae\", \"d_in\": %d, \"d_sae\": %d, \"k\": %d, "
           "\"batch\": %d, \"threads\": %d, \"iters\": %d, \"seconds\": %.4f, "
           "\"acts_per_s\": %.1f, \"acts_per_s_mean\": %.1f, \"gflops_dense_equiv\": %.2f, "
           "\"loss\": %.5f, ",
           d_in, d_sae, c.k, B, o_threads, it, total, B / med, (double)B * it / total,
           dense / med / 1e9, s.loss);
    print_tail();
    free(x);
    al_sae_adam_free(&o);
    al_sae_free(&s);
    return 0;
}

/* The whole trainer (al_sae_trainer_run): windows of the token file
 * through the model up to the z site of --sae-layer, the shuffle buffer,
 * the SAE steps; its own activations/s (model forward included). */
static int bench_sae_stream(void) {
    al_err e;
    if (!o_sae_model || !o_sae_data || !o_sae_out) {
        fprintf(stderr,
                "bench_engine: --mode sae-stream needs --sae-model, --sae-data, --sae-out\n");
        return 2;
    }
    al_sae_train_opts o = al_sae_train_opts_defaults();
    o.model = o_sae_model, o.data = o_sae_data, o.out = o_sae_out;
    o.layer = o_sae_layer, o.expansion = o_sae_expansion, o.k = o_sae_k;
    o.batch = o_sae_batch, o.steps = o_sae_steps, o.threads = o_threads, o.force = 1;
    o.ckpt_every = 0;
    al_sae_trainer *t = NULL;
    int stopped = 0;
    double t0 = al_now();
    if (al_sae_trainer_init(&t, &o, &e) || al_sae_trainer_run(t, &stopped, &e)) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        al_sae_trainer_free(t);
        return 1;
    }
    double secs = al_now() - t0, rate = al_sae_trainer_rate(t);
    const al_sae *s = al_sae_trainer_sae(t);
    printf("{\"impl\": \"c\", \"mode\": \"sae-stream\", \"d_in\": %d, \"d_sae\": %d, "
           "\"k\": %d, \"batch\": %d, \"steps\": %ld, \"threads\": %d, \"seconds\": %.3f, "
           "\"acts_per_s\": %.1f, \"minutes_per_10m\": %.2f, ",
           s->cfg.d_in, s->cfg.d_sae, s->cfg.k, o.batch, al_sae_trainer_step(t), o_threads, secs,
           rate, rate > 0 ? 1e7 / rate / 60 : 0.0);
    print_tail();
    al_sae_trainer_free(t);
    return 0;
}

int main(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(flags, argc - 1, argv + 1, NULL, 0, NULL, &e) != 0) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        return 2;
    }
    if (o_threads < 1 || o_batch < 1 || o_ctx < 1 || o_warmup < 0 || o_sgemm_n < 1 || o_pairs < 1 ||
        o_naive_pairs < 1 || o_patch_batch < 1) {
        fprintf(stderr, "bench_engine: --threads, --batch, --n-ctx, --sgemm-n, --pairs, "
                        "--naive-pairs, --patch-batch must be positive\n");
        return 2;
    }
    al_set_threads(o_threads);
    openblas_set_num_threads(o_threads);
    al_precision prec;
    if (al_precision_parse(o_precision, &prec) != 0) {
        fprintf(stderr, "bench_engine: --precision must be f32 or bf16\n");
        return 2;
    }
    if (al_gemm_set_precision(prec, &e) != 0) {
        fprintf(stderr, "bench_engine: %s\n", e.msg);
        return 2;
    }
    if (!strcmp(o_mode, "sgemm")) return bench_sgemm();
    if (!strcmp(o_mode, "matmul")) return bench_matmul();
    if (!strcmp(o_mode, "train") || !strcmp(o_mode, "infer"))
        return bench_model(!strcmp(o_mode, "train"));
    if (!strcmp(o_mode, "patch")) return bench_patch();
    if (!strcmp(o_mode, "attr")) return bench_attr();
    if (!strcmp(o_mode, "discover")) return bench_discover();
    if (!strcmp(o_mode, "sae")) return bench_sae();
    if (!strcmp(o_mode, "sae-stream")) return bench_sae_stream();
    fprintf(stderr,
            "bench_engine: unknown --mode %s (train, infer, sgemm, matmul, patch, attr, "
            "discover, sae or sae-stream)\n",
            o_mode);
    return 2;
}
