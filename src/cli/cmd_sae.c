/* cmd_sae.c -- `attnlab sae train` and `attnlab sae features`: the
 * registry entries of sparse autoencoders on attention outputs.
 *
 * `sae train` (descriptor and run kind "sae", the experiment key): the
 * compute phase runs the trainer and its evaluation (sae_train.h), which
 * write the SAE directory (SAELens layout, resume file); the store phase
 * writes one sae_runs row with the evaluation. `sae features` (kind
 * "sae_features"): the features analysis (sae_features.h) of an SAE
 * directory on text windows and the induction probe, into the feature
 * tables (store_sae.h).
 *
 * Everything that can be refused is refused before the run row exists
 * (check: the options; prepare: against the loaded model): a layer the
 * model lacks, k larger than the dictionary, a non-finite coefficient, a
 * resume or an SAE directory of another model, a residual-stream SAE for
 * features. The trainer's set-up (which loads the data, estimates the
 * scale and writes the step-0 checkpoint) runs in prepare for that reason.
 * SIGINT/SIGTERM: the trainer saves a checkpoint at the next buffer
 * boundary, the run is marked failed with "interrupted" (exit 130), and
 * `--resume` continues it. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/doc_text.h"
#include "attnlab/json.h"
#include "attnlab/membudget.h"
#include "attnlab/registry.h"
#include "attnlab/sae.h"
#include "attnlab/sae_features.h"
#include "attnlab/sae_io.h"
#include "attnlab/sae_train.h"
#include "attnlab/stop.h"
#include "attnlab/store.h"
#include "attnlab/store_analysis.h"
#include "attnlab/store_sae.h"

#include <cjson/cJSON.h>

/* A number, or null when not finite (JSON has no NaN). */
static int json_num(cJSON *o, const char *k, double v) {
    return isfinite(v) ? cJSON_AddNumberToObject(o, k, v) != NULL
                       : cJSON_AddNullToObject(o, k) != NULL;
}

/* ================================================================ train */

typedef struct sae_args {
    al_an_where w;
    const char *out, *site, *arch, *val;
    int layer, expansion, k, steps, batch, resume, force, eval_windows, ckpt_every;
    uint64_t tokens, seed;
    double l1_coeff, lr;
    char out_buf[1100]; /* an experiment's --out (sae_exp_paths) */
} sae_args;

#define SAE_ARGS_INIT                                                                              \
    {                                                                                              \
        AL_AN_WHERE_INIT, NULL, "z", "topk", NULL, 0, 8, 32, 2000, 4096, 0, 0, 64, 500, 0, 1, 5.0, \
            1e-3, ""                                                                               \
    }
static sae_args g_sae = SAE_ARGS_INIT;

static al_flag sae_flags[] =
    {AL_FLAG_MODEL(g_sae),
     AL_FLAG_DB(g_sae),
     {"layer", AL_INT, &g_sae.layer, "L", "the layer whose activations the SAE reads", 1, 0},
     {"data", AL_STR, &g_sae.w.data, "FILE.bin",
      "token file the activations are streamed from (its tail 5% held out unless --val)", 1, 0},
     {"out", AL_STR, &g_sae.out, "DIR",
      "SAE directory: sae_weights.safetensors and cfg.json (SAELens layout), resume file", 1, 0},
     {"site", AL_STR, &g_sae.site, "S",
      "z (every head's z of the layer, head-major, hook_z) or resid (the residual stream "
      "entering it, hook_resid_pre)",
      0, 0},
     {"expansion", AL_INT, &g_sae.expansion, "X", "dictionary size: X times the site's width", 0,
      0},
     {"arch", AL_STR, &g_sae.arch, "A", "topk (TopK with the AuxK loss) or l1 (ReLU, L1 penalty)",
      0, 0},
     {"k", AL_INT, &g_sae.k, "K", "topk: active latents per activation", 0, 0},
     {"l1-coeff", AL_FLOAT, &g_sae.l1_coeff, "C", "l1: the penalty's coefficient", 0, 0},
     {"steps", AL_INT, &g_sae.steps, "N", "optimizer steps", 0, 0},
     {"tokens", AL_U64, &g_sae.tokens, "N",
      "train on N activations instead of --steps (steps = N / batch, rounded up)", 0, 0},
     {"batch", AL_INT, &g_sae.batch, "B", "activations per step", 0, 0},
     {"lr", AL_FLOAT, &g_sae.lr, "LR",
      "Adam's peak learning rate (warm-up, constant, linear decay over the last 20%)", 0, 0},
     {"seed", AL_U64, &g_sae.seed, "S", "initialisation and data order", 0, 0},
     {"val", AL_STR, &g_sae.val, "FILE.bin", "held-out token file for the evaluation", 0, 0},
     {"eval-windows", AL_INT, &g_sae.eval_windows, "N", "held-out windows evaluated", 0, 0},
     {"ckpt-every", AL_INT, &g_sae.ckpt_every, "N", "steps between checkpoints (0: at the end)", 0,
      0},
     {"resume", AL_BOOL, &g_sae.resume, NULL,
      "continue the checkpoint in --out (same options; bit for bit with the same threads)", 0, 0},
     {"force", AL_BOOL, &g_sae.force, NULL, "replace an SAE already in --out", 0, 0},
     AL_FLAG_THREADS(g_sae),
     AL_FLAGS_END};

static int run_sae(int argc, char **argv);
al_command al_cmd_sae_train = {
    "sae train",
    "train a sparse autoencoder on a layer's attention output (z) -> SAELens directory + SQLite",
    "--model DIR --layer L --data FILE.bin --db FILE --out DIR [--site z|resid] [--expansion 8] "
    "[--arch topk|l1] [--k 32] [--steps N | --tokens N] [--resume]",
    "A dictionary of expansion x d_in directions trained to reconstruct the\n"
    "activations of one site -- every head's z of --layer, concatenated\n"
    "head-major as TransformerLens's hook_z, or the residual stream entering\n"
    "it -- streamed from the model over --data (the forward stops at the\n"
    "site). TopK with the AuxK loss for dead latents (Gao et al. 2024) or ReLU\n"
    "with an L1 penalty; decoder rows at unit norm; inputs scaled to\n"
    "E|x|^2 = d_in; Adam with warm-up and a final linear decay; checkpoints\n"
    "that --resume exactly. Saved in SAELens's layout in --out. Then evaluated\n"
    "on held-out windows: L0, fraction of variance explained, MSE, dead and\n"
    "dense latents, and cross-entropy loss recovered with the reconstruction\n"
    "spliced into the forward (against zero-ablating the site). Stored as one\n"
    "sae_runs row under run kind \"sae\".",
    sae_flags,
    run_sae,
};

static int site_parse(const char *s, int *site) {
    if (!strcmp(s, "z"))
        *site = AL_SAE_SITE_Z;
    else if (!strcmp(s, "resid") || !strcmp(s, "resid_pre"))
        *site = AL_SAE_SITE_RESID_PRE;
    else
        return -1;
    return 0;
}

static int arch_parse(const char *s, int *arch) {
    if (!strcmp(s, "topk"))
        *arch = AL_SAE_TOPK;
    else if (!strcmp(s, "l1") || !strcmp(s, "standard"))
        *arch = AL_SAE_L1;
    else
        return -1;
    return 0;
}

static int sae_check(const void *args, const al_flag *fl, al_err *e) {
    const sae_args *a = args;
    int site, arch;
    if (!a->site || site_parse(a->site, &site))
        return al_errf(e, "--site must be z or resid (got '%s')", a->site ? a->site : "");
    if (!a->arch || arch_parse(a->arch, &arch))
        return al_errf(e, "--arch must be topk or l1 (got '%s')", a->arch ? a->arch : "");
    if (a->layer < 0) return al_errf(e, "--layer must be >= 0 (got %d)", a->layer);
    if (a->expansion < 1 || a->expansion > 1024)
        return al_errf(e, "--expansion must be 1..1024 (got %d)", a->expansion);
    if (a->k < 1) return al_errf(e, "--k must be >= 1 (got %d)", a->k);
    if (!isfinite(a->l1_coeff) || !(a->l1_coeff > 0))
        return al_errf(e, "--l1-coeff must be finite and > 0 (got %g)", a->l1_coeff);
    if (!isfinite(a->lr) || !(a->lr > 0))
        return al_errf(e, "--lr must be finite and > 0 (got %g)", a->lr);
    if (a->steps < 1) return al_errf(e, "--steps must be >= 1 (got %d)", a->steps);
    if (a->batch < 1 || a->batch > (1 << 20))
        return al_errf(e, "--batch must be 1..%d (got %d)", 1 << 20, a->batch);
    if (al_flag_seen(fl, "steps") && al_flag_seen(fl, "tokens"))
        return al_errf(e, "give --steps or --tokens, not both");
    if (al_flag_seen(fl, "tokens") &&
        (a->tokens < 1 || a->tokens / (uint64_t)a->batch >= (uint64_t)1 << 31))
        return al_errf(e, "--tokens must be 1..2^31 batches (got %llu)",
                       (unsigned long long)a->tokens);
    if (a->eval_windows < 1 || a->eval_windows > 100000)
        return al_errf(e, "--eval-windows must be 1..100000 (got %d)", a->eval_windows);
    if (a->ckpt_every < 0) return al_errf(e, "--ckpt-every must be >= 0 (got %d)", a->ckpt_every);
    if (a->resume && a->force) return al_errf(e, "--resume and --force exclude each other");
    return al_threads_check(a->w.threads, e);
}

typedef struct sae_state {
    al_sae_trainer *t;
    al_sae_eval ev;
    long steps;
    double seconds, rate;
    char hook[64];
} sae_state;

/* The layer and k against the model's shape. */
static int sae_check_model(const void *args, const al_config *c, al_err *e) {
    const sae_args *a = args;
    int site = AL_SAE_SITE_Z, arch = AL_SAE_TOPK;
    site_parse(a->site, &site);
    arch_parse(a->arch, &arch);
    if (a->layer >= c->n_layers)
        return al_errf(e, "--layer %d: the model in %s has %d layer%s (0..%d)", a->layer,
                       a->w.model, c->n_layers, c->n_layers == 1 ? "" : "s", c->n_layers - 1);
    long d_in = site == AL_SAE_SITE_Z ? (long)c->n_heads * c->d_head : c->d_model;
    if (arch == AL_SAE_TOPK && a->k > d_in * a->expansion)
        return al_errf(e, "--k %d is larger than the dictionary (d_sae %ld = %d x %ld)", a->k,
                       d_in * a->expansion, a->expansion, d_in);
    return 0;
}

static int sae_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    sae_args *a = args;
    sae_state *s = state;
    const al_config *c = &dr->b->m.cfg;
    int site = AL_SAE_SITE_Z, arch = AL_SAE_TOPK;
    site_parse(a->site, &site);
    arch_parse(a->arch, &arch);
    long d_in = site == AL_SAE_SITE_Z ? (long)c->n_heads * c->d_head : c->d_model;
    if (!a->resume && !a->force) { /* before any work, naming the flags */
        char cp[AL_PATH_MAX + 64], rp[AL_PATH_MAX + 64];
        if (al_path_join(cp, sizeof cp, a->out, AL_SAE_CFG_FILE, e) ||
            al_path_join(rp, sizeof rp, a->out, AL_SAE_RESUME_FILE, e))
            return -1;
        if (al_file_exists(cp) || al_file_exists(rp))
            return al_errf(e, "%s already holds an SAE: --resume continues it, --force replaces it",
                           a->out);
    }
    al_sae_train_opts o = al_sae_train_opts_defaults();
    o.model = a->w.model;
    o.data = a->w.data;
    o.val = a->val;
    o.out = a->out;
    o.site = site;
    o.layer = a->layer;
    o.expansion = a->expansion;
    o.arch = arch;
    o.k = a->k;
    o.l1_coeff = a->l1_coeff;
    o.seed = a->seed;
    o.batch = a->batch;
    o.steps = a->steps;
    if (a->tokens) o.steps = (long)((a->tokens + (uint64_t)a->batch - 1) / (uint64_t)a->batch);
    o.lr = a->lr;
    o.eval_windows = a->eval_windows;
    o.ckpt_every = a->ckpt_every;
    o.threads = a->w.threads;
    o.resume = a->resume;
    o.force = a->force;
    o.stop = &al_stop;
    s->steps = o.steps;
    /* from the options and the model's shape, before the trainer loads or
     * writes anything (its own check would name its fields, not the flags) */
    char what[128];
    snprintf(what, sizeof what, "--batch %d x --expansion %d (d_sae %ld)", a->batch, a->expansion,
             d_in * a->expansion);
    if (al_mem_check(al_sae_train_bytes(&o, (int)d_in, c), "sae train", what,
                     "lower --batch or --expansion", e))
        return -1;
    if (al_sae_hook_name(site, a->layer, s->hook, sizeof s->hook) != 0)
        return al_errf(e, "--layer %d: no hook name", a->layer);
    return al_sae_trainer_init(&s->t, &o, e);
}

static int sae_compute(void *args, void *state, al_drive *dr, al_err *e) {
    sae_state *s = state;
    (void)args;
    (void)dr;
    int stopped = 0;
    double t0 = al_now();
    if (al_sae_trainer_run(s->t, &stopped, e) != 0) return -1;
    s->seconds = al_now() - t0;
    s->rate = al_sae_trainer_rate(s->t);
    if (stopped) return al_errf(e, "interrupted");
    return al_sae_trainer_eval(s->t, &s->ev, e);
}

static al_sae_run_row sae_row(const sae_args *a, const sae_state *s) {
    const al_sae *sae = al_sae_trainer_sae(s->t);
    const al_sae_meta *m = al_sae_trainer_meta(s->t);
    const int topk = sae->cfg.arch == AL_SAE_TOPK;
    al_sae_run_row r = {.layer = m->hook_layer,
                        .site = m->site == AL_SAE_SITE_Z ? "z" : "resid_pre",
                        .hook_name = s->hook,
                        .d_in = sae->cfg.d_in,
                        .d_sae = sae->cfg.d_sae,
                        .arch = al_sae_arch_name(sae->cfg.arch),
                        .k = topk ? sae->cfg.k : -1,
                        .l1_coeff = topk ? NAN : sae->cfg.l1_coeff,
                        .steps = al_sae_trainer_step(s->t),
                        .batch = a->batch,
                        .activations = (double)al_sae_trainer_step(s->t) * a->batch,
                        .seed = m->seed,
                        .scale = m->scale,
                        .eval_n = s->ev.n,
                        .l0 = s->ev.l0,
                        .fve = s->ev.fve,
                        .mse = s->ev.mse,
                        .dead_frac = s->ev.dead_frac,
                        .dense_frac = s->ev.dense_frac,
                        .ce_clean = s->ev.ce_clean,
                        .ce_sae = s->ev.ce_sae,
                        .ce_zero = s->ev.ce_zero,
                        .ce_recovered = s->ev.ce_recovered,
                        .seconds = s->seconds,
                        .rate = s->rate,
                        .out_dir = a->out};
    return r;
}

/* The evaluation's numbers that have intervals, as sae_runs names them. */
static int sae_ci_of(const al_sae_eval *ev, const char **name, const al_interval **iv, double *v) {
    const char *const n[7] = {"l0", "fve", "mse", "ce_clean", "ce_sae", "ce_zero", "ce_recovered"};
    const al_interval *c[7] = {&ev->ci_l0,          &ev->ci_fve,    &ev->ci_mse,
                               &ev->ci_ce_clean,    &ev->ci_ce_sae, &ev->ci_ce_zero,
                               &ev->ci_ce_recovered};
    const double x[7] = {ev->l0,     ev->fve,     ev->mse,         ev->ce_clean,
                         ev->ce_sae, ev->ce_zero, ev->ce_recovered};
    for (int i = 0; i < 7; i++) name[i] = n[i], iv[i] = c[i], v[i] = x[i];
    return 7;
}

static int sae_store(void *args, void *state, al_drive *dr, al_err *e) {
    sae_state *s = state;
    al_sae_run_row r = sae_row(args, state);
    if (al_store_put_sae_run(dr->b->st, dr->b->run_id, dr->b->model_id, &r, e)) return -1;
    /* the intervals, under the sae_runs column's name with a "sae_" prefix */
    const char *name[7];
    const al_interval *iv[7];
    double v[7];
    char metric[32];
    for (int i = 0, n = sae_ci_of(&s->ev, name, iv, v); s->ev.ci_n && i < n; i++) {
        snprintf(metric, sizeof metric, "sae_%s", name[i]);
        if (al_store_put_interval(dr->b->st, dr->b->run_id, dr->b->model_id, -1, -1, -1, metric,
                                  v[i], iv[i], AL_CI_LEVEL, s->ev.ci_n, AL_CI_BOOTSTRAP, e))
            return -1;
    }
    return 0;
}

static int sae_doc(void *args, void *state, al_drive *dr, al_err *e) {
    sae_args *a = args;
    sae_state *s = state;
    al_sae_run_row r = sae_row(a, s);
    cJSON *d = dr->doc, *ev = NULL;
    int ok = cJSON_AddStringToObject(d, "out", r.out_dir) &&
             cJSON_AddStringToObject(d, "hook_name", r.hook_name) &&
             cJSON_AddNumberToObject(d, "layer", r.layer) &&
             cJSON_AddStringToObject(d, "site", r.site) &&
             cJSON_AddNumberToObject(d, "d_in", r.d_in) &&
             cJSON_AddNumberToObject(d, "d_sae", r.d_sae) &&
             cJSON_AddStringToObject(d, "arch", r.arch) &&
             (r.k >= 0 ? cJSON_AddNumberToObject(d, "k", r.k) != NULL
                       : cJSON_AddNullToObject(d, "k") != NULL) &&
             json_num(d, "l1_coeff", r.l1_coeff) &&
             cJSON_AddNumberToObject(d, "steps", (double)r.steps) &&
             cJSON_AddNumberToObject(d, "batch", r.batch) &&
             cJSON_AddNumberToObject(d, "activations", r.activations) &&
             cJSON_AddNumberToObject(d, "seed", (double)r.seed) && json_num(d, "scale", r.scale) &&
             json_num(d, "seconds", r.seconds) && json_num(d, "rate", r.rate) &&
             (ev = cJSON_AddObjectToObject(d, "eval")) &&
             cJSON_AddNumberToObject(ev, "n", (double)r.eval_n) && json_num(ev, "l0", r.l0) &&
             json_num(ev, "fve", r.fve) && json_num(ev, "mse", r.mse) &&
             json_num(ev, "dead_frac", r.dead_frac) && json_num(ev, "dense_frac", r.dense_frac) &&
             json_num(ev, "ce_clean", r.ce_clean) && json_num(ev, "ce_sae", r.ce_sae) &&
             json_num(ev, "ce_zero", r.ce_zero) && json_num(ev, "ce_recovered", r.ce_recovered);
    const char *name[7];
    const al_interval *iv[7];
    double v[7];
    for (int i = 0, n = sae_ci_of(&s->ev, name, iv, v); ok && s->ev.ci_n && i < n; i++)
        ok = al_json_add_ci(ev, name[i], iv[i]) == 0;
    ok = ok && (!s->ev.ci_n ||
                al_json_add_intervals(ev, AL_CI_LEVEL, AL_CI_BOOTSTRAP, AL_CI_SEED, s->ev.ci_n,
                                      "*_se: delta method for the ratio of sums over the held-out "
                                      "windows; *_ci: bootstrap expanded percentile interval, "
                                      "resampling whole windows"));
    return ok ? 0 : al_errf(e, "out of memory");
}

/* " ± 0.0123" of o's key_se, or "" without one (a static buffer: one
 * use per printf argument list is safe only with distinct buffers, so a
 * small ring of them). */
static const char *pm(const cJSON *o, const char *key) {
    static char ring[8][32];
    static int at;
    char k[48];
    snprintf(k, sizeof k, "%s_se", key);
    double se = al_dt_num(o, k);
    char *b = ring[at++ % 8];
    if (isfinite(se))
        snprintf(b, 32, " ± %.4f", se);
    else
        b[0] = 0;
    return b;
}

/* The text of attnlab.sae/1, from the document alone. */
static void sae_text(const cJSON *doc) {
    const cJSON *ev = al_dt_get(doc, "eval");
    printf("model %s -> run %lld of %s; SAE on %s in %s\n", al_dt_str(doc, "model"),
           (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"), al_dt_str(doc, "hook_name"),
           al_dt_str(doc, "out"));
    if (cJSON_IsNumber(al_dt_get(doc, "k")))
        printf("d_in %d, d_sae %d, %s k %d; ", al_dt_int(doc, "d_in"), al_dt_int(doc, "d_sae"),
               al_dt_str(doc, "arch"), al_dt_int(doc, "k"));
    else
        printf("d_in %d, d_sae %d, %s l1 %g; ", al_dt_int(doc, "d_in"), al_dt_int(doc, "d_sae"),
               al_dt_str(doc, "arch"), al_dt_num(doc, "l1_coeff"));
    printf("%ld steps x %d = %.0f activations (%.1f s, %.0f activations/s)\n",
           (long)al_dt_num(doc, "steps"), al_dt_int(doc, "batch"), al_dt_num(doc, "activations"),
           al_dt_num(doc, "seconds"), al_dt_num(doc, "rate"));
    printf("held out (%ld activations): L0 %.2f%s, variance explained %.4f%s, MSE %.4f%s, dead "
           "%.4f, dense %.4f\n",
           (long)al_dt_num(ev, "n"), al_dt_num(ev, "l0"), pm(ev, "l0"), al_dt_num(ev, "fve"),
           pm(ev, "fve"), al_dt_num(ev, "mse"), pm(ev, "mse"), al_dt_num(ev, "dead_frac"),
           al_dt_num(ev, "dense_frac"));
    printf("cross-entropy: clean %.4f%s, with the SAE %.4f%s, site zeroed %.4f%s; recovered "
           "%.4f%s\n",
           al_dt_num(ev, "ce_clean"), pm(ev, "ce_clean"), al_dt_num(ev, "ce_sae"), pm(ev, "ce_sae"),
           al_dt_num(ev, "ce_zero"), pm(ev, "ce_zero"), al_dt_num(ev, "ce_recovered"),
           pm(ev, "ce_recovered"));
    if (al_dt_get(ev, "intervals"))
        printf("(± standard error over the %d held-out windows; 95%% intervals in --json and "
               "table score_intervals)\n",
               al_dt_int(al_dt_get(ev, "intervals"), "items"));
}

static void sae_release(void *state) {
    sae_state *s = state;
    al_sae_trainer_free(s->t);
    s->t = NULL;
}

static void sae_init(void *args) {
    static const sae_args d = SAE_ARGS_INIT;
    *(sae_args *)args = d;
}

/* The folder an experiment's sae stage writes (sae_exp_paths set it). */
static const char *sae_exp_output(const void *args) { return ((const sae_args *)args)->out; }

/* In an experiment: activations from the training tokens, evaluated on
 * the validation tokens, written under the model's directory as sae-L<l>
 * (z) or sae-resid-L<l>, where `sae features` stages find them. A stage
 * runs again only when it did not finish, so it starts over (--force). */
static int sae_exp_paths(void *args, const al_exp_paths *p, al_err *e) {
    sae_args *a = args;
    int site = AL_SAE_SITE_Z;
    site_parse(a->site, &site);
    int n = snprintf(a->out_buf, sizeof a->out_buf, "%s/sae-%sL%d", p->model_dir,
                     site == AL_SAE_SITE_Z ? "" : "resid-", a->layer);
    if (n < 0 || (size_t)n >= sizeof a->out_buf)
        return al_errf(e, "the model directory's path is too long for an SAE under it");
    a->out = a->out_buf;
    a->w.data = p->train_bin;
    a->val = p->val_bin;
    a->force = 1;
    return 0;
}

static const char *const sae_deny[] = {"out", "val", "resume", "force", NULL};

const al_analysis al_an_sae = {.name = "sae",
                               .cmd = &al_cmd_sae_train,
                               .groups = AL_GROUP_WHERE,
                               .tmpl = &g_sae,
                               .size = sizeof g_sae,
                               .init = sae_init,
                               .check = sae_check,
                               .check_model = sae_check_model,
                               .state_size = sizeof(sae_state),
                               .prepare = sae_prepare,
                               .compute = sae_compute,
                               .store = sae_store,
                               .doc = sae_doc,
                               .text = sae_text,
                               .release = sae_release,
                               .stops = 1,
                               .exp_data = AL_EXP_DATA_NONE,
                               .exp_deny = sae_deny,
                               .exp_paths = sae_exp_paths,
                               .exp_output = sae_exp_output};

static int run_sae(int argc, char **argv) { return al_drive_main(&al_an_sae, argc, argv); }

/* ============================================================= features */

typedef struct feat_args {
    al_an_where w;
    const char *sae;
    al_sae_feat_opts o;
    int show;
    char sae_buf[1100]; /* an experiment's --sae, under the model's directory */
    const char *sae_typed; /* --sae as given, for the text and --json */
    /* --sae and --data resolved (realpath) before the run row, so the run
     * stores them as the model's path is stored: absolute, found by a
     * picture or the report from any folder */
    char sae_abs[AL_PATH_MAX], data_abs[AL_PATH_MAX];
} feat_args;

#define FEAT_ARGS_INIT                                                                             \
    { AL_AN_WHERE_INIT, NULL, AL_SAE_FEAT_OPTS_INIT, 10, "", NULL, "", "" }
static feat_args g_feat = FEAT_ARGS_INIT;

static al_flag feat_flags[] =
    {AL_FLAG_MODEL(g_feat),
     AL_FLAG_DB(g_feat),
     {"sae", AL_STR, &g_feat.sae, "DIR", "SAE directory (from attnlab sae train) of this model", 1,
      0},
     {"data", AL_STR, &g_feat.w.data, "FILE.bin", "token file: the text windows read", 1, 0},
     {"windows", AL_INT, &g_feat.o.windows, "N", "text windows, spread evenly over --data", 0, 0},
     {"top-n", AL_INT, &g_feat.o.top_n, "N", "top activating contexts kept per feature", 0, 0},
     {"logit-n", AL_INT, &g_feat.o.logit_n, "N", "tokens raised and lowered kept per feature", 0,
      0},
     {"probe-r", AL_INT, &g_feat.o.probe_r, "R",
      "induction probe: random ids per half (0: min(50, (n_ctx-1)/2))", 0, 0},
     {"probe-n", AL_INT, &g_feat.o.probe_n, "N", "induction probe: sequences", 0, 0},
     {"probe-seed", AL_U64, &g_feat.o.probe_seed, "S", "induction probe: seed", 0, 0},
     {"show", AL_INT, &g_feat.show, "N", "features printed (by density; all are stored)", 0, 0},
     AL_FLAG_THREADS(g_feat),
     AL_FLAGS_END};

static int run_feat(int argc, char **argv);
al_command al_cmd_sae_features = {
    "sae features",
    "every live feature of an SAE: density, top contexts, logit effects, head attribution, "
    "induction index -> SQLite",
    "--model DIR --sae DIR --data FILE.bin --db FILE [--windows 64] [--top-n 10] [--logit-n 10]",
    "For every feature of a z-site SAE that fires on the --windows text\n"
    "windows of --data: its density, mean and largest activation, its --top-n\n"
    "contexts (window, position, token, activation), the --logit-n tokens its\n"
    "decoder direction raises and lowers most (through each head's W_O and\n"
    "W_U, per unit of activation), its direct feature attribution by head (the\n"
    "share of its pre-activation each head's z slice contributes, averaged\n"
    "over its firing positions), and its induction index (the share of its\n"
    "activation on the induction probe that falls on the second occurrence of\n"
    "the repeated random half). Stored in sae_features, sae_feature_contexts,\n"
    "sae_feature_logits and sae_feature_heads under run kind \"sae_features\";\n"
    "the views sae_head_features and sae_induction_features answer \"features\n"
    "of head l.h\" and \"induction features\".",
    feat_flags,
    run_feat,
};

static int feat_check(const void *args, const al_flag *fl, al_err *e) {
    const feat_args *a = args;
    (void)fl;
    if (a->show < 0) return al_errf(e, "--show must be >= 0 (got %d)", a->show);
    return al_sae_feat_opts_check(&a->o, e) || al_threads_check(a->w.threads, e) ? -1 : 0;
}

typedef struct feat_state {
    al_sae sae;
    al_sae_meta meta;
    al_tokens d;
    int T;
    char hook[64];
    al_sae_feat_result r;
} feat_state;

/* The induction probe against the model's context. */
static int feat_check_model(const void *args, const al_config *c, al_err *e) {
    int R;
    return al_sae_feat_probe_r(&((const feat_args *)args)->o, c->n_ctx, &R, e);
}

static int feat_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    feat_args *a = args;
    feat_state *s = state;
    if (al_sae_load(a->sae, &s->sae, &s->meta, e) != 0) return -1;
    if (al_sae_fits_model(&s->sae, &s->meta, &dr->b->m.cfg, dr->b->sha, e) != 0) return -1;
    if (s->meta.partial) { /* a warning; under --strict the one line of a refusal */
        char w[AL_WARN_LEN];
        al_sae_partial_msg(a->sae, &s->meta, w, sizeof w);
        if (dr->strict) return al_errf(e, "refused under --strict (nothing stored): %s", w);
        al_drive_warn(dr, w);
    }
    if (s->meta.site != AL_SAE_SITE_Z)
        return al_errf(e,
                       "%s reads the residual stream of layer %d: sae features needs an SAE "
                       "on a layer's z",
                       a->sae, s->meta.hook_layer);
    if (al_sae_hook_name(s->meta.site, s->meta.hook_layer, s->hook, sizeof s->hook) != 0)
        return al_errf(e, "%s: no hook name", a->sae);
    if (al_behave_tokens(dr->b, a->w.data, &s->d, &s->T, e) != 0) return -1;
    if (s->d.max_id >= dr->b->m.cfg.d_vocab)
        return al_errf(e,
                       "token id %d in %s is >= d_vocab %d: was it encoded with this model's "
                       "tokenizer?",
                       s->d.max_id, a->w.data, dr->b->m.cfg.d_vocab);
    al_drive_warn(dr, al_sae_feat_ln_note(&dr->b->m.cfg)); /* NULL without LayerNorm */
    char w[AL_WARN_LEN]; /* the logit effects rank every id, trained or not */
    if (al_unseen_ids_warning(a->w.model, dr->b->m.cfg.d_vocab,
                              "the features' logit effects (raises, lowers)", w, sizeof w))
        al_drive_warn(dr, w);
    a->sae_typed = a->sae;
    if (realpath(a->sae, a->sae_abs)) a->sae = a->sae_abs;
    if (realpath(a->w.data, a->data_abs)) a->w.data = a->data_abs;
    return 0;
}

static int feat_compute(void *args, void *state, al_drive *dr, al_err *e) {
    feat_args *a = args;
    feat_state *s = state;
    al_sae_feat_opts o = a->o;
    o.bos = al_behave_bos(dr->b);
    o.progress = dr->progress;
    o.stop = &al_stop;
    return al_sae_features_run(&dr->b->m, &s->sae, &s->meta, &s->d, s->T, &o, &s->r, e);
}

static int feat_store(void *args, void *state, al_drive *dr, al_err *e) {
    feat_args *a = args;
    feat_state *s = state;
    return al_store_put_sae_features(dr->b->st, dr->b->run_id, dr->b->model_id, a->sae, s->hook,
                                     &s->r, dr->b->tok, e);
}

static cJSON *feat_json(const al_sae_feat_result *r, int i, const al_tokenizer *tok) {
    cJSON *f = cJSON_CreateObject(), *hs = NULL, *up = NULL, *dn = NULL, *cx = NULL;
    if (!f) return NULL;
    char buf[256];
    int ok = cJSON_AddNumberToObject(f, "feature", i) &&
             cJSON_AddNumberToObject(f, "fired", (double)r->fired[i]) &&
             json_num(f, "density", r->density[i]) && json_num(f, "mean_act", r->mean_act[i]) &&
             json_num(f, "max_act", r->max_act[i]) && json_num(f, "first_mean", r->first_mean[i]) &&
             json_num(f, "second_mean", r->second_mean[i]) &&
             json_num(f, "induction_index", r->induction_index[i]) &&
             cJSON_AddNumberToObject(f, "first_fired", (double)r->first_fired[i]) &&
             cJSON_AddNumberToObject(f, "second_fired", (double)r->second_fired[i]) &&
             json_num(f, "induction_p", r->induction_p[i]) && json_num(f, "auroc", r->auroc[i]) &&
             cJSON_AddBoolToObject(f, "induction", r->induction[i]) &&
             (r->next_token[i] < 0
                  ? cJSON_AddNullToObject(f, "next_token") != NULL
                  : cJSON_AddNumberToObject(f, "next_token", r->next_token[i]) != NULL) &&
             json_num(f, "next_share", r->next_share[i]) &&
             (hs = cJSON_AddArrayToObject(f, "heads")) && (up = cJSON_AddArrayToObject(f, "up")) &&
             (dn = cJSON_AddArrayToObject(f, "down")) &&
             (cx = cJSON_AddArrayToObject(f, "contexts"));
    for (int h = 0; ok && h < r->H; h++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(hs, o) && cJSON_AddNumberToObject(o, "layer", r->layer) &&
             cJSON_AddNumberToObject(o, "head", h) &&
             json_num(o, "contribution", r->contrib[(size_t)i * r->H + h]) &&
             json_num(o, "share", r->share[(size_t)i * r->H + h]);
    }
    for (int dir = 0; ok && dir < 2; dir++) {
        const int *tk = (dir ? r->down_tok : r->up_tok) + (size_t)i * r->logit_n;
        const float *vl = (dir ? r->down_val : r->up_val) + (size_t)i * r->logit_n;
        for (int j = 0; ok && j < r->logit_n && tk[j] >= 0; j++) {
            cJSON *o = cJSON_CreateObject();
            al_store_token_str(tok, tk[j], buf, sizeof buf);
            ok = o && cJSON_AddItemToArray(dir ? dn : up, o) &&
                 cJSON_AddNumberToObject(o, "token", tk[j]) &&
                 cJSON_AddStringToObject(o, "str", buf) && json_num(o, "value", vl[j]);
        }
    }
    for (int j = 0; ok && j < r->top_n; j++) {
        const al_sae_feat_ctx *c = r->ctx + (size_t)i * r->top_n + j;
        if (c->window < 0) break;
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(cx, o) && cJSON_AddNumberToObject(o, "window", c->window) &&
             cJSON_AddNumberToObject(o, "offset", (double)c->offset) &&
             cJSON_AddNumberToObject(o, "pos", c->pos) &&
             cJSON_AddNumberToObject(o, "token", c->token) && json_num(o, "activation", c->act);
    }
    if (!ok) {
        cJSON_Delete(f);
        return NULL;
    }
    return f;
}

static int feat_doc(void *args, void *state, al_drive *dr, al_err *e) {
    feat_args *a = args;
    feat_state *s = state;
    const al_sae_feat_result *r = &s->r;
    int rc = 0, best = -1;
    for (int i = 0; i < r->d_sae; i++)
        if (r->fired[i] && isfinite(r->auroc[i]) && (best < 0 || r->auroc[i] > r->auroc[best]))
            best = i;
    cJSON *d = dr->doc, *fs = NULL, *ha = NULL;
    int ok = cJSON_AddStringToObject(d, "sae", a->sae_typed) &&
             cJSON_AddNumberToObject(d, "show", a->show) &&
             cJSON_AddStringToObject(d, "hook_name", s->hook) &&
             cJSON_AddNumberToObject(d, "layer", r->layer) &&
             cJSON_AddNumberToObject(d, "d_sae", r->d_sae) &&
             cJSON_AddNumberToObject(d, "n_live", r->n_live) &&
             cJSON_AddNumberToObject(d, "windows", r->windows) &&
             cJSON_AddNumberToObject(d, "T", r->T) &&
             cJSON_AddNumberToObject(d, "positions", (double)r->positions) &&
             cJSON_AddNumberToObject(d, "probe_r", r->probe_r) &&
             cJSON_AddNumberToObject(d, "probe_n", r->probe_n) &&
             cJSON_AddNumberToObject(d, "n_induction", r->n_induction) &&
             json_num(d, "group_auroc", r->group_auroc) &&
             (best < 0 || (cJSON_AddNumberToObject(d, "best_auroc_feature", best) &&
                           json_num(d, "best_auroc", r->auroc[best]))) &&
             (ha = cJSON_AddArrayToObject(d, "head_auroc")) &&
             (fs = cJSON_AddArrayToObject(d, "features"));
    for (int h = 0; ok && h < r->H; h++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(ha, o) && cJSON_AddNumberToObject(o, "layer", r->layer) &&
             cJSON_AddNumberToObject(o, "head", h) && json_num(o, "auroc", r->head_auroc[h]);
    }
    for (int i = 0; ok && i < r->d_sae; i++) {
        if (!r->fired[i]) continue;
        cJSON *f = feat_json(r, i, dr->b->tok);
        ok = f && cJSON_AddItemToArray(fs, f);
    }
    if (!ok) rc = al_errf(e, "out of memory");
    return rc;
}

/* The text of attnlab.sae_features/1, from the document alone. */
static void feat_text(const cJSON *doc) {
    const cJSON *fs = al_dt_get(doc, "features"), *x;
    const int n = cJSON_GetArraySize(fs), show = al_dt_int(doc, "show");
    const int n_ind = al_dt_int(doc, "n_induction");
    const cJSON *bh = NULL;
    cJSON_ArrayForEach(x, al_dt_get(doc, "head_auroc")) {
        double v = al_dt_num(x, "auroc");
        if (isfinite(v) && (!bh || v > al_dt_num(bh, "auroc"))) bh = x;
    }
    printf("model %s -> run %lld of %s; SAE %s on %s: %d of %d features live on %d windows of "
           "%d tokens; induction probe R %d, N %d\n",
           al_dt_str(doc, "model"), (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"),
           al_dt_str(doc, "sae"), al_dt_str(doc, "hook_name"), al_dt_int(doc, "n_live"),
           al_dt_int(doc, "d_sae"), al_dt_int(doc, "windows"), al_dt_int(doc, "T"),
           al_dt_int(doc, "probe_r"), al_dt_int(doc, "probe_n"));
    printf("induction features (index >= %.1f, binomial p < %g): %d", AL_SAE_INDUCTION_INDEX,
           AL_SAE_INDUCTION_P, n_ind);
    if (al_dt_get(doc, "best_auroc_feature"))
        printf("; best AUROC second vs first occurrence: feature %d %.3f",
               al_dt_int(doc, "best_auroc_feature"), al_dt_num(doc, "best_auroc"));
    if (bh)
        printf(", best head z norm %d.%d %.3f", al_dt_int(bh, "layer"), al_dt_int(bh, "head"),
               al_dt_num(bh, "auroc"));
    if (n_ind) printf(", induction features summed %.3f", al_dt_num(doc, "group_auroc"));
    printf("\n");
    const cJSON **ix = malloc(sizeof *ix * (size_t)(n + 1));
    if (!ix) return;
    int m = 0;
    cJSON_ArrayForEach(x, fs) ix[m++] = x;
    for (int i = 1; i < m; i++) { /* by density, descending; insertion sort: stable */
        const cJSON *v = ix[i];
        int j = i;
        while (j > 0 && al_dt_num(ix[j - 1], "density") < al_dt_num(v, "density"))
            ix[j] = ix[j - 1], j--;
        ix[j] = v;
    }
    if (m > 0 && show > 0)
        printf("%-8s %8s %8s %8s %9s %6s %6s %6s  %s\n", "feature", "density", "mean", "max",
               "induction", "auroc", "head", "share", "raises");
    for (int q = 0; q < m && q < show; q++) {
        const cJSON *f = ix[q], *top = NULL, *h;
        cJSON_ArrayForEach(h, al_dt_get(f, "heads")) {
            double v = al_dt_num(h, "share");
            if (isfinite(v) && (!top || v > al_dt_num(top, "share"))) top = h;
        }
        char head[16] = "-";
        if (top)
            snprintf(head, sizeof head, "%d.%d", al_dt_int(top, "layer"), al_dt_int(top, "head"));
        const cJSON *up0 = cJSON_GetArrayItem(al_dt_get(f, "up"), 0);
        printf("%-8d %8.4f %8.3f %8.3f %8.3f%s %6.3f %6s %6.3f  %s\n", al_dt_int(f, "feature"),
               al_dt_num(f, "density"), al_dt_num(f, "mean_act"), al_dt_num(f, "max_act"),
               al_dt_num(f, "induction_index"), al_dt_bool(f, "induction") ? "*" : " ",
               al_dt_num(f, "auroc"), head, top ? al_dt_num(top, "share") : NAN,
               up0 ? al_dt_str(up0, "str") : "");
    }
    free(ix);
}

static void feat_release(void *state) {
    feat_state *s = state;
    al_sae_feat_result_free(&s->r);
    al_sae_free(&s->sae);
    al_tokens_free(&s->d);
}

static void feat_init(void *args) {
    static const feat_args d = FEAT_ARGS_INIT;
    *(feat_args *)args = d;
}

/* In an experiment "sae" names the SAE's directory under the model's
 * (sae-L1: what an `sae` stage with layer 1 writes). */
static int feat_exp_paths(void *args, const al_exp_paths *p, al_err *e) {
    feat_args *a = args;
    if (!a->sae)
        return al_errf(e, "\"sae\" must name the SAE's directory under the model's, "
                          "e.g. \"sae-L1\" (what an sae stage with layer 1 writes)");
    if (a->sae[0] == '/') return 0;
    int n = snprintf(a->sae_buf, sizeof a->sae_buf, "%s/%s", p->model_dir, a->sae);
    if (n < 0 || (size_t)n >= sizeof a->sae_buf)
        return al_errf(e, "the model directory's path is too long for an SAE under it");
    a->sae = a->sae_buf;
    return 0;
}

static const char *feat_exp_input(const void *args) { return ((const feat_args *)args)->sae; }

const al_analysis al_an_sae_features = {.name = "sae_features",
                                        .cmd = &al_cmd_sae_features,
                                        .groups = AL_GROUP_WHERE,
                                        .tmpl = &g_feat,
                                        .size = sizeof g_feat,
                                        .init = feat_init,
                                        .check = feat_check,
                                        .check_model = feat_check_model,
                                        .state_size = sizeof(feat_state),
                                        .prepare = feat_prepare,
                                        .compute = feat_compute,
                                        .store = feat_store,
                                        .doc = feat_doc,
                                        .text = feat_text,
                                        .release = feat_release,
                                        .stops = 1,
                                        .exp_data = AL_EXP_DATA_VAL,
                                        .exp_paths = feat_exp_paths,
                                        .exp_input = feat_exp_input,
                                        .results = AL_RESULTS_SAE_FEATURES};

static int run_feat(int argc, char **argv) {
    return al_drive_main(&al_an_sae_features, argc, argv);
}
