/* cmd_sae.c -- `attnlab sae train` (descriptor and run kind "sae", the
 * experiment key): the registry entry of training sparse autoencoders on
 * attention outputs (`sae features` is cmd_sae_features.c). The compute
 * phase runs the trainer and its evaluation (sae_train.h), which write
 * the SAE directory (SAELens layout, resume file); the store phase writes
 * one sae_runs row with the evaluation.
 *
 * Everything that can be refused is refused before the run row exists
 * (check: the options; prepare: against the loaded model): a layer the
 * model lacks, k larger than the dictionary, a non-finite coefficient, a
 * resume or an SAE directory of another model. The trainer's set-up (which loads the data, estimates the
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
#include "attnlab/sae_io.h"
#include "attnlab/sae_train.h"
#include "attnlab/stop.h"
#include "attnlab/store.h"
#include "attnlab/store_analysis.h"

#include <cjson/cJSON.h>

/* A number, or null when not finite (JSON has no NaN). */
static int json_num(cJSON *o, const char *k, double v) {
    return cJSON_AddItemToObject(o, k, al_json_num_item(v));
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

/* A failed run keeps an SAE that has trained steps, and says where. */
static void sae_failed(void *args, void *state, al_err *e) {
    (void)args;
    al_sae_trainer_failed(((sae_state *)state)->t, e);
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
                               .failed = sae_failed,
                               .doc = sae_doc,
                               .text = sae_text,
                               .release = sae_release,
                               .stops = 1,
                               .exp_data = AL_EXP_DATA_NONE,
                               .exp_deny = sae_deny,
                               .exp_paths = sae_exp_paths,
                               .exp_output = sae_exp_output};

static int run_sae(int argc, char **argv) { return al_drive_main(&al_an_sae, argc, argv); }
