/* sae_train.c -- the SAE trainer and its evaluation (sae_train.h):
 * activations streamed from the model through a hook that stops the
 * forward at the site, a shuffled buffer, Adam, checkpoints at buffer
 * boundaries in one atomically written file. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/sae_train.h"

#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/hooks.h"
#include "attnlab/membudget.h"
#include "attnlab/safetensors.h"

al_sae_train_opts al_sae_train_opts_defaults(void) {
    al_sae_train_opts o = {.site = AL_SAE_SITE_Z,
                           .layer = 0,
                           .expansion = 8,
                           .arch = AL_SAE_TOPK,
                           .k = 32,
                           .k_aux = -1,
                           .aux_coeff = 1.0 / 32,
                           .l1_coeff = 5.0,
                           .dead_tokens = 1000000,
                           .seed = 1,
                           .steps = 2000,
                           .batch = 4096,
                           .buffer_batches = 4,
                           .lr = 1e-3,
                           .warmup = 50,
                           .decay_frac = 0.2,
                           .beta1 = 0.9,
                           .beta2 = 0.999,
                           .eps = 1e-8,
                           .normalize = 1,
                           .norm_batches = 4,
                           .b_dec_mean = 1,
                           .val_fraction = 0.05,
                           .eval_windows = 64,
                           .ckpt_every = 500};
    return o;
}

static int check_opts(const al_sae_train_opts *o, al_err *e) {
    if (!o->out || !*o->out) return al_errf(e, "out (the SAE directory) is required");
    if (!o->source) {
        if (!o->model || !*o->model) return al_errf(e, "model (a model directory) is required");
        if (!o->data || !*o->data)
            return al_errf(e, "data is required (a token file from 'attnlab encode')");
    } else if (o->source_d_in < 1) {
        return al_errf(e, "source_d_in must be positive (got %d)", o->source_d_in);
    }
    if (o->site != AL_SAE_SITE_Z && o->site != AL_SAE_SITE_RESID_PRE)
        return al_errf(e, "site must be z or resid_pre");
    if (o->layer < 0) return al_errf(e, "layer must be >= 0 (got %d)", o->layer);
    if (o->d_sae < 0 || (o->d_sae == 0 && (o->expansion < 1 || o->expansion > 1024)))
        return al_errf(e, "expansion must be in 1..1024 (got %d)", o->expansion);
    if (!isfinite(o->aux_coeff) || o->aux_coeff < 0)
        return al_errf(e, "aux_coeff must be finite and >= 0 (got %g)", o->aux_coeff);
    if (!isfinite(o->l1_coeff) || o->l1_coeff <= 0)
        return al_errf(e, "l1_coeff must be finite and > 0 (got %g)", o->l1_coeff);
    if (o->steps < 1) return al_errf(e, "steps must be positive (got %ld)", o->steps);
    if (o->batch < 1 || o->batch > (1 << 20))
        return al_errf(e, "batch must be in 1..%d (got %d)", 1 << 20, o->batch);
    if (o->buffer_batches < 1 || o->buffer_batches > 1024)
        return al_errf(e, "buffer_batches must be in 1..1024 (got %d)", o->buffer_batches);
    if (!isfinite(o->lr) || !(o->lr > 0)) return al_errf(e, "lr must be positive (got %g)", o->lr);
    if (o->warmup < 0) return al_errf(e, "warmup must be >= 0 (got %d)", o->warmup);
    if (!(o->decay_frac >= 0 && o->decay_frac <= 1))
        return al_errf(e, "decay_frac must be in [0,1] (got %g)", o->decay_frac);
    if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1))
        return al_errf(e, "beta1 and beta2 must be in [0,1)");
    if (!isfinite(o->eps) || !(o->eps > 0)) return al_errf(e, "eps must be positive");
    if (o->norm_batches < 1) return al_errf(e, "norm_batches must be >= 1");
    if (!(o->val_fraction > 0 && o->val_fraction < 1))
        return al_errf(e, "val_fraction must be in (0,1) (got %g)", o->val_fraction);
    if (o->eval_windows < 1) return al_errf(e, "eval_windows must be >= 1");
    if (o->ckpt_every < 0 || o->stop_at < 0)
        return al_errf(e, "ckpt_every and stop_at must be >= 0");
    if (o->resume && o->force) return al_errf(e, "resume and force exclude each other");
    return al_threads_check(o->threads, e);
}

/* ------------------------------------------------------------ state */

struct al_sae_trainer {
    al_sae_train_opts o;
    int have_model;
    al_model m;
    al_tokens train, val;
    al_sae sae;
    al_sae_meta meta;
    al_sae_adam adam;
    al_rng rng; /* data order: windows and the shuffle, nothing else */
    long step;
    int d_in, T, bm; /* bm: windows per model forward */
    float *buf; /* (buffer_batches·batch, d_in), in the order drawn */
    int *perm; /* (buffer_batches·batch) the shuffled order */
    float *batch; /* (batch, d_in) one batch gathered */
    float *cap; /* (bm·T, d_in) captured activations */
    int *in, *tg; /* (bm, T) */
    double rate;
    int made_dir; /* out did not exist before this trainer saved */
    long saved_step; /* step of the last checkpoint saved, -1 before one */
};

const al_sae *al_sae_trainer_sae(const al_sae_trainer *t) { return &t->sae; }
const al_sae_meta *al_sae_trainer_meta(const al_sae_trainer *t) { return &t->meta; }
long al_sae_trainer_step(const al_sae_trainer *t) { return t->step; }
double al_sae_trainer_rate(const al_sae_trainer *t) { return t->rate; }

void al_sae_trainer_free(al_sae_trainer *t) {
    if (!t) return;
    if (t->have_model) al_model_free(&t->m);
    al_tokens_free(&t->train);
    al_tokens_free(&t->val);
    al_sae_free(&t->sae);
    al_sae_adam_free(&t->adam);
    free(t->buf);
    free(t->perm);
    free(t->batch);
    free(t->cap);
    free(t->in);
    free(t);
}

/* ---------------------------------------------------- the site's hook */

enum { CAP_COPY, CAP_COPY_STOP, CAP_REPLACE, CAP_ZERO };

typedef struct cap_ctx {
    int mode;
    int d_in;
    float *dst; /* COPY: (B·T, d_in) */
    const float *src; /* REPLACE: (B·T, d_in) */
    int stopped; /* COPY_STOP: the forward was stopped here on purpose */
} cap_ctx;

static int site_hook(al_hook_act *a, void *vctx, al_err *e) {
    cap_ctx *c = vctx;
    const size_t rows = (size_t)a->m->B * (size_t)a->m->T, d = (size_t)c->d_in;
    for (size_t r = 0; r < rows; r++) {
        float *row = a->data + r * a->ld;
        if (c->mode == CAP_COPY || c->mode == CAP_COPY_STOP)
            memcpy(c->dst + r * d, row, d * sizeof(float));
        else if (c->mode == CAP_REPLACE)
            memcpy(row, c->src + r * d, d * sizeof(float));
        else
            memset(row, 0, d * sizeof(float));
    }
    if (c->mode == CAP_COPY_STOP) {
        /* nothing after the site is needed: fail the forward here */
        c->stopped = 1;
        return al_errf(e, "forward stopped at the SAE site");
    }
    return 0;
}

static int site_point(int site) { return site == AL_SAE_SITE_Z ? AL_HOOK_Z : AL_HOOK_RESID_PRE; }

/* The site's activations of nw windows (in) into dst (nw·T, d_in). */
static int capture(al_model *m, const al_sae_meta *meta, int d_in, const int *in, int nw, int T,
                   float *dst, al_err *e) {
    cap_ctx c = {.mode = CAP_COPY_STOP, .d_in = d_in, .dst = dst};
    if (al_hook_add(m, site_point(meta->site), meta->hook_layer, site_hook, &c, e) != 0) return -1;
    al_err fe;
    int rc = al_model_forward(m, in, NULL, nw, T, &fe);
    al_hook_remove(m, &c);
    if (rc == 0 || c.stopped) return 0;
    *e = fe;
    return -1;
}

/* ------------------------------------------------------ activations */

/* Fisher-Yates on the row order (the rows themselves stay put; a batch
 * gathers its rows through perm). */
static void shuffle_perm(int *perm, long n, al_rng *rng) {
    for (long i = 0; i < n; i++) perm[i] = (int)i;
    for (long i = n - 1; i > 0; i--) {
        long j = (long)al_rng_below(rng, (uint32_t)(i + 1));
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

/* n raw activations into x drawing windows (or source values) with rng. */
static int draw(al_sae_trainer *t, float *x, long n, al_rng *rng, al_err *e) {
    if (t->o.source) return t->o.source(t->o.source_ctx, x, (int)n, rng, e);
    long filled = 0;
    const int T = t->T, d = t->d_in;
    while (filled < n) {
        long need_w = (n - filled + T - 1) / T;
        int nw = need_w < t->bm ? (int)need_w : t->bm;
        if (al_batch_random(&t->train, nw, T, rng, t->in, t->tg, e) != 0) return -1;
        if (capture(&t->m, &t->meta, d, t->in, nw, T, t->cap, e) != 0) return -1;
        long take = (long)nw * T < n - filled ? (long)nw * T : n - filled;
        memcpy(x + (size_t)filled * d, t->cap, (size_t)take * d * sizeof(float));
        filled += take;
    }
    for (long i = 0; i < n * d; i++)
        if (!isfinite(x[i]))
            return al_errf(e, "the model's activations at the site are not finite");
    return 0;
}

static int fill_buffer(al_sae_trainer *t, al_err *e) {
    const long n = (long)t->o.buffer_batches * t->o.batch;
    if (draw(t, t->buf, n, &t->rng, e) != 0) return -1;
    const float s = (float)t->meta.scale;
    for (long i = 0; i < n * t->d_in; i++) t->buf[i] *= s;
    shuffle_perm(t->perm, n, &t->rng);
    return 0;
}

/* Batch pos of the buffer, gathered in shuffled order into t->batch. */
static const float *batch_at(al_sae_trainer *t, int pos) {
    const int B = t->o.batch, d = t->d_in;
    const int *p = t->perm + (size_t)pos * B;
    for (int b = 0; b < B; b++)
        memcpy(t->batch + (size_t)b * d, t->buf + (size_t)p[b] * d, (size_t)d * sizeof(float));
    return t->batch;
}

/* ------------------------------------------------------ checkpoints */

/* The options that shape the run's numbers, as one string saved in the
 * checkpoint: a resume with other values is refused. */
static void opts_key(const al_sae_trainer *t, char *buf, size_t cap) {
    const al_sae_train_opts *o = &t->o;
    const al_sae_cfg *c = &t->sae.cfg;
    snprintf(buf, cap,
             "site=%d layer=%d d_in=%d d_sae=%d arch=%d k=%d k_aux=%d aux=%.17g l1=%.17g "
             "dead=%ld seed=%" PRIu64 " steps=%ld batch=%d buffer=%d lr=%.17g warmup=%d "
             "decay=%.17g b1=%.17g b2=%.17g eps=%.17g norm=%d nb=%d bdec=%d val=%.17g",
             o->site, o->layer, c->d_in, c->d_sae, c->arch, c->k, c->k_aux, c->aux_coeff,
             c->l1_coeff, c->dead_tokens, o->seed, o->steps, o->batch, o->buffer_batches, o->lr,
             o->warmup, o->decay_frac, o->beta1, o->beta2, o->eps, o->normalize, o->norm_batches,
             o->b_dec_mean, o->val_fraction);
}

static int save(al_sae_trainer *t, al_err *e) {
    char path[AL_PATH_MAX + 64];
    if (al_path_join(path, sizeof path, t->o.out, AL_SAE_RESUME_FILE, e) != 0) return -1;
    if (al_sae_count_nonfinite(&t->sae) != 0)
        return al_errf(e, "refusing to checkpoint non-finite SAE weights at step %ld", t->step);
    const al_sae_cfg *c = &t->sae.cfg;
    int32_t *since = al_malloc((size_t)c->d_sae, sizeof(int32_t), e);
    if (!since) return -1;
    for (int i = 0; i < c->d_sae; i++) since[i] = (int32_t)t->sae.since[i];
    const int64_t np = (int64_t)t->sae.n_params;
    al_st_tensor ts[4] =
        {{.name = "params", .dtype = AL_DT_F32, .ndim = 1, .shape = {np}, .data = t->sae.params},
         {.name = "adam_m", .dtype = AL_DT_F32, .ndim = 1, .shape = {np}, .data = t->adam.m},
         {.name = "adam_v", .dtype = AL_DT_F32, .ndim = 1, .shape = {np}, .data = t->adam.v},
         {.name = "since", .dtype = AL_DT_I32, .ndim = 1, .shape = {c->d_sae}, .data = since}};
    char step[32], rng[80], scale[40], key[1024];
    snprintf(step, sizeof step, "%ld", t->step);
    snprintf(rng, sizeof rng, "%016" PRIx64 ",%016" PRIx64 ",%016" PRIx64 ",%016" PRIx64,
             t->rng.s[0], t->rng.s[1], t->rng.s[2], t->rng.s[3]);
    snprintf(scale, sizeof scale, "%.17g", t->meta.scale);
    opts_key(t, key, sizeof key);
    const char *mk[6] = {"format", "step", "rng", "scale", "opts", "model_sha256"};
    const char *mv[6] = {"attnlab-sae-resume-1", step, rng, scale, key, t->meta.model_sha256};
    /* the SAELens pair first, the resume file last: a resume file on disk
     * always has a pair beside it (of its step, or of the next one when a
     * crash came between the two). Before both, while steps remain, the
     * partial mark; after the last step's, its removal: a folder whose
     * training stopped anywhere on the way is marked so. */
    const int last = t->step >= t->o.steps;
    int rc = last ? 0 : al_sae_partial_mark(t->o.out, t->step, t->o.steps, e);
    if (rc == 0) rc = al_sae_save(t->o.out, &t->sae, &t->meta, e);
    if (rc == 0) rc = al_st_write(path, ts, 4, mk, mv, 6, e);
    if (rc == 0 && last) rc = al_sae_partial_clear(t->o.out, e);
    if (rc == 0) t->saved_step = t->step;
    free(since);
    return rc;
}

static void remove_strays(const char *dir);

/* A new SAE's folder that holds no trained step is worth nothing to keep:
 * remove what this trainer wrote (the folder too when it made it). */
static void discard_untrained(al_sae_trainer *t) {
    if (t->o.resume || t->saved_step > 0 || !t->o.out) return;
    static const char *names[4] = {AL_SAE_RESUME_FILE, AL_SAE_WEIGHTS_FILE, AL_SAE_CFG_FILE,
                                   AL_SAE_PARTIAL_FILE};
    char p[AL_PATH_MAX + 64];
    for (int i = 0; i < 4; i++)
        if (al_path_join(p, sizeof p, t->o.out, names[i], NULL) == 0) unlink(p);
    remove_strays(t->o.out);
    if (t->made_dir) al_remove_made_dir(t->o.out);
}

int al_sae_trainer_failed(al_sae_trainer *t, al_err *e) {
    if (!t || t->o.resume || t->saved_step > 0) {
        if (t && t->saved_step > 0 && e) {
            size_t l = strnlen(e->msg, sizeof e->msg);
            if (t->saved_step < t->o.steps)
                snprintf(e->msg + l, sizeof e->msg - l,
                         "; the SAE saved at step %ld of %ld is in %s (--resume continues it)",
                         t->saved_step, t->o.steps, t->o.out);
            else
                snprintf(e->msg + l, sizeof e->msg - l, "; the trained SAE is in %s", t->o.out);
        }
        return -1;
    }
    discard_untrained(t);
    return -1;
}

static int load_resume(al_sae_trainer *t, al_err *e) {
    char path[AL_PATH_MAX + 64];
    if (al_path_join(path, sizeof path, t->o.out, AL_SAE_RESUME_FILE, e) != 0) return -1;
    if (!al_file_exists(path))
        return al_errf(e, "%s holds no SAE checkpoint to resume (%s missing)", t->o.out,
                       AL_SAE_RESUME_FILE);
    al_st_file *f;
    if (al_st_open_as(path, "SAE checkpoint", &f, e) != 0) return -1;
    int rc = -1;
    char key[1024];
    opts_key(t, key, sizeof key);
    const char *fmt = al_st_meta(f, "format"), *step = al_st_meta(f, "step"),
               *rng = al_st_meta(f, "rng"), *scale = al_st_meta(f, "scale"),
               *okey = al_st_meta(f, "opts");
    const int64_t np = (int64_t)t->sae.n_params, ns = t->sae.cfg.d_sae;
    const al_st_tensor *sn = al_st_get(f, "since");
    char *end;
    if (!fmt || strcmp(fmt, "attnlab-sae-resume-1") != 0 || !step || !rng || !scale || !okey) {
        al_errf(e, "%s: not an SAE checkpoint (metadata missing)", path);
        goto out;
    }
    if (strcmp(okey, key) != 0) {
        al_errf(e, "%s was made with other options than these; resume with the same ones", path);
        goto out;
    }
    const char *msha = al_st_meta(f, "model_sha256");
    if (!msha || strcmp(msha, t->meta.model_sha256) != 0) {
        al_errf(e, "%s was trained on another model than %s (model sha256 differs)", path,
                t->o.model ? t->o.model : "the source");
        goto out;
    }
    long st = strtol(step, &end, 10);
    if (*end || st < 0 || st > t->o.steps) {
        al_errf(e, "%s: bad step '%s'", path, step);
        goto out;
    }
    double sc = strtod(scale, &end);
    if (*end || !isfinite(sc) || !(sc > 0)) {
        al_errf(e, "%s: bad scale", path);
        goto out;
    }
    if (sscanf(rng, "%16" SCNx64 ",%16" SCNx64 ",%16" SCNx64 ",%16" SCNx64, &t->rng.s[0],
               &t->rng.s[1], &t->rng.s[2], &t->rng.s[3]) != 4) {
        al_errf(e, "%s: bad rng", path);
        goto out;
    }
    if (al_st_read_f32(f, "params", 1, &np, t->sae.params, e) != 0 ||
        al_st_read_f32(f, "adam_m", 1, &np, t->adam.m, e) != 0 ||
        al_st_read_f32(f, "adam_v", 1, &np, t->adam.v, e) != 0)
        goto out;
    if (!sn || sn->dtype != AL_DT_I32 || sn->ndim != 1 || sn->shape[0] != ns) {
        al_errf(e, "%s: tensor since missing or of the wrong shape", path);
        goto out;
    }
    for (int64_t i = 0; i < ns; i++) {
        int32_t v;
        memcpy(&v, (const char *)sn->data + 4 * i, 4);
        if (v < 0 || v > t->sae.cfg.dead_tokens) {
            al_errf(e, "%s: since[%" PRId64 "] out of range", path, i);
            goto out;
        }
        t->sae.since[i] = v;
    }
    t->step = st;
    t->meta.scale = sc;
    t->meta.normalized = t->o.normalize != 0; /* part of opts, checked above */
    rc = 0;
out:
    al_st_close(f);
    return rc;
}

/* Temporary files a killed save left behind (NAME.tmp.<pid> of the four
 * files the trainer writes; nothing else is touched). */
static void remove_strays(const char *dir) {
    static const char *names[4] = {AL_SAE_RESUME_FILE, AL_SAE_WEIGHTS_FILE, AL_SAE_CFG_FILE,
                                   AL_SAE_PARTIAL_FILE};
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        for (int i = 0; i < 4; i++) {
            size_t n = strlen(names[i]);
            if (strncmp(de->d_name, names[i], n) == 0 && strncmp(de->d_name + n, ".tmp.", 5) == 0) {
                char p[AL_PATH_MAX + 320];
                if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p) unlink(p);
            }
        }
    closedir(d);
}

/* ------------------------------------------------------------- init */

static int load_data(al_sae_trainer *t, al_err *e) {
    const al_sae_train_opts *o = &t->o;
    if (al_tokens_load(o->data, &t->train, e) != 0) return -1;
    if (o->val && *o->val) {
        if (al_tokens_load(o->val, &t->val, e) != 0) return -1;
        if (t->val.max_id > t->train.max_id) t->train.max_id = t->val.max_id; /* checked below */
        return 0;
    }
    return al_tokens_hold_out(&t->train, o->val_fraction, o->data, &t->val, e);
}

static int setup_model(al_sae_trainer *t, al_err *e) {
    const al_sae_train_opts *o = &t->o;
    if (al_ckpt_load(o->model, &t->m, NULL, e) != 0) return -1;
    t->have_model = 1;
    const al_config *c = &t->m.cfg;
    if (o->layer >= c->n_layers)
        return al_errf(e, "layer %d: the model in %s has %d layer%s (0..%d)", o->layer, o->model,
                       c->n_layers, c->n_layers == 1 ? "" : "s", c->n_layers - 1);
    if (load_data(t, e) != 0) return -1;
    if (t->train.max_id >= c->d_vocab)
        return al_errf(e,
                       "token id %d in the data is >= d_vocab %d: was it encoded with this "
                       "model's tokenizer?",
                       t->train.max_id, c->d_vocab);
    t->T = c->n_ctx;
    if ((size_t)t->T + 1 > t->train.n || (size_t)t->T + 1 > t->val.n)
        return al_errf(e,
                       "windows of n_ctx %d tokens need more data than %s has (train %zu, "
                       "held out %zu)",
                       t->T, o->data, t->train.n, t->val.n);
    t->d_in = o->site == AL_SAE_SITE_Z ? c->n_heads * c->d_head : c->d_model;
    t->bm = 4096 / t->T > 0 ? 4096 / t->T : 1;
    if (t->bm > 64) t->bm = 64;
    char mp[AL_PATH_MAX + 64];
    if (al_path_join(mp, sizeof mp, o->model, "model.safetensors", e) != 0 ||
        al_sha256_file(mp, t->meta.model_sha256, e) != 0)
        return -1;
    return 0;
}

static int estimate_scale(al_sae_trainer *t, al_err *e) {
    const long n = (long)t->o.norm_batches * t->o.batch;
    float *x = al_malloc((size_t)n * t->d_in, sizeof(float), e);
    if (!x) return -1;
    al_rng r;
    al_rng_seed(&r, t->o.seed ^ 0x5ca1ef0c7a11ull); /* its own stream: not the data order */
    if (draw(t, x, n, &r, e) != 0) {
        free(x);
        return -1;
    }
    double q = 0;
    for (long i = 0; i < n * t->d_in; i++) q += (double)x[i] * x[i];
    q /= (double)n;
    if (!(q > 0)) {
        free(x);
        return al_errf(e, "the activations at the site are all zero: nothing to train on");
    }
    t->meta.normalized = t->o.normalize != 0;
    t->meta.scale = t->o.normalize ? sqrt((double)t->d_in / q) : 1.0;
    if (t->o.b_dec_mean) {
        for (long i = 0; i < n * t->d_in; i++) x[i] *= (float)t->meta.scale;
        al_sae_init_b_dec_mean(&t->sae, x, (int)n);
    }
    free(x);
    return 0;
}

/* d_sae of options o on a site of width d_in */
static double opts_d_sae(const al_sae_train_opts *o, int d_in) {
    return o->d_sae > 0 ? o->d_sae : (double)o->expansion * d_in;
}

double al_sae_train_bytes(const al_sae_train_opts *o, int d_in, const al_config *mc) {
    const double n = opts_d_sae(o, d_in), d = d_in, B = o->batch;
    const int T = mc ? mc->n_ctx : 1;
    int bm = mc ? (4096 / T > 0 ? 4096 / T : 1) : 1;
    if (bm > 64) bm = 64;
    al_sae_cfg c = al_sae_cfg_default(d_in, n < (1 << 30) ? (int)n : 1 << 30);
    c.arch = o->arch;
    c.k = o->k;
    if (o->k_aux >= 0) c.k_aux = o->k_aux;
    /* the SAE's activations grow to the larger of a training batch and
     * the evaluation's chunks (4096 rows, at most bm windows') */
    double rows = (double)bm * T < 4096 ? (double)bm * T : 4096;
    int Bmax = B > rows ? o->batch : (int)rows;
    double b = al_sae_bytes(&c, Bmax);
    b += (2 * d * n + n + d) * 2 * sizeof(float); /* Adam */
    const double nbuf = (double)o->buffer_batches * B;
    b += nbuf * (d + 1) * sizeof(float) + B * d * sizeof(float); /* buffer, perm, batch */
    b += (double)o->norm_batches * B * d * sizeof(float); /* the scale's sample */
    b += (double)bm * T * (d * sizeof(float) + 2 * sizeof(int)); /* capture */
    if (mc) /* the model, its activations, the evaluation's two copies of the site */
        b += al_model_param_floats(mc) * sizeof(float) + al_model_acts_bytes(mc, bm, T) +
             2.0 * bm * T * d * sizeof(float);
    return b;
}

int al_sae_trainer_init(al_sae_trainer **out, const al_sae_train_opts *o, al_err *e) {
    *out = NULL;
    if (check_opts(o, e) != 0) return -1;
    al_sae_trainer *t = al_calloc(1, sizeof *t, e);
    if (!t) return -1;
    t->o = *o;
    t->saved_step = -1;
    al_set_threads(o->threads);
    if (o->source) {
        t->d_in = o->source_d_in;
        t->T = 1;
        t->bm = 1;
    } else if (setup_model(t, e) != 0) {
        goto fail;
    }
    t->meta.site = o->site;
    t->meta.hook_layer = o->layer;
    t->meta.seed = o->seed;
    t->meta.scale = 1.0;
    long d_sae = o->d_sae > 0 ? o->d_sae : (long)o->expansion * t->d_in;
    if (d_sae > (1 << 20)) {
        al_errf(e, "d_sae %ld is too large (at most %d)", d_sae, 1 << 20);
        goto fail;
    }
    al_sae_cfg c = al_sae_cfg_default(t->d_in, (int)d_sae);
    c.arch = o->arch;
    c.k = o->k;
    if (o->arch == AL_SAE_TOPK && o->k > d_sae) {
        al_errf(e, "k %d is larger than the dictionary (d_sae %ld)", o->k, d_sae);
        goto fail;
    }
    if (al_mem_check(al_sae_train_bytes(o, t->d_in, o->source ? NULL : &t->m.cfg), "SAE training",
                     "this batch and dictionary", "lower batch or expansion", e) != 0)
        goto fail;
    if (o->k_aux >= 0) c.k_aux = o->k_aux;
    c.aux_coeff = o->aux_coeff;
    c.l1_coeff = o->l1_coeff;
    c.dead_tokens = o->dead_tokens;
    if (al_sae_init(&t->sae, &c, o->seed, e) != 0) goto fail;
    if (al_sae_adam_init(&t->adam, t->sae.n_params, e) != 0) goto fail;
    const size_t nbuf = (size_t)o->buffer_batches * (size_t)o->batch;
    if (nbuf > 0x7fffffffu) {
        al_errf(e, "buffer_batches x batch must be below 2^31");
        goto fail;
    }
    t->buf = al_malloc(nbuf * t->d_in, sizeof(float), e);
    t->perm = al_malloc(nbuf, sizeof(int), e);
    t->batch = al_malloc((size_t)o->batch * t->d_in, sizeof(float), e);
    size_t ncap = (size_t)t->bm * t->T;
    if (ncap < 1) ncap = 1;
    t->cap = al_malloc(ncap * t->d_in, sizeof(float), e);
    t->in = al_malloc((size_t)t->bm * t->T * 2, sizeof(int), e);
    if (!t->buf || !t->perm || !t->batch || !t->cap || !t->in) goto fail;
    t->tg = t->in + (size_t)t->bm * t->T;
    char cp[AL_PATH_MAX + 64], rp[AL_PATH_MAX + 64];
    if (al_path_join(cp, sizeof cp, o->out, AL_SAE_CFG_FILE, e) != 0 ||
        al_path_join(rp, sizeof rp, o->out, AL_SAE_RESUME_FILE, e) != 0)
        goto fail;
    if (o->resume) {
        if (load_resume(t, e) != 0) goto fail;
        t->saved_step = t->step;
        remove_strays(o->out);
        al_log("resuming the SAE in %s at step %ld", o->out, t->step);
    } else {
        if (!o->force && (al_file_exists(cp) || al_file_exists(rp))) {
            al_errf(e, "%s already holds an SAE: resume it, or force to replace it", o->out);
            goto fail;
        }
        al_rng_seed(&t->rng, o->seed ^ 0xda7a0dd3ull);
        if (estimate_scale(t, e) != 0) goto fail;
        t->step = 0;
        remove_strays(o->out);
        t->made_dir = !al_file_exists(o->out);
        if (save(t, e) != 0) {
            discard_untrained(t);
            goto fail;
        }
    }
    *out = t;
    return 0;
fail:
    al_sae_trainer_free(t);
    return -1;
}

/* -------------------------------------------------------------- run */

int al_sae_trainer_run(al_sae_trainer *t, int *stopped, al_err *e) {
    const al_sae_train_opts *o = &t->o;
    *stopped = 0;
    al_progress pr;
    al_progress_init(&pr, 10.0);
    const long decay = (long)(o->decay_frac * (double)o->steps);
    const long start = t->step;
    long last_ckpt = t->step;
    int pos = 0; /* batches of the buffer used; 0: empty (a boundary) */
    double t0 = al_now();
    while (t->step < o->steps) {
        if (pos == 0 && fill_buffer(t, e) != 0) return -1;
        const float *x = batch_at(t, pos);
        if (al_sae_forward(&t->sae, x, o->batch, e) != 0) return -1;
        if (!isfinite(t->sae.loss)) {
            al_progress_done(&pr);
            return al_errf(e,
                           "non-finite SAE loss at step %ld: training stopped; the last good "
                           "checkpoint (step %ld) is in %s",
                           t->step + 1, last_ckpt, o->out);
        }
        if (al_sae_backward(&t->sae, e) != 0) return -1;
        double lr = al_sae_lr_at(o->lr, o->warmup, decay, o->steps, t->step);
        al_sae_adam_step(&t->sae, &t->adam, lr, o->beta1, o->beta2, o->eps, t->step + 1);
        al_sae_update_dead(&t->sae);
        t->step++;
        pos = (pos + 1) % o->buffer_batches;
        double el = al_now() - t0;
        t->rate = (double)(t->step - start) * o->batch / (el > 0 ? el : 1e-9);
        char eta[32];
        al_fmt_duration(eta, sizeof eta,
                        el / (double)(t->step - start) * (double)(o->steps - t->step));
        al_progress_update(&pr, t->step == o->steps,
                           "sae step %ld/%ld | mse %.4f | aux %.4f | L0 %.1f | dead %d | lr %.2e | "
                           "%.0f act/s | ETA %s",
                           t->step, o->steps, t->sae.mse, t->sae.aux, t->sae.l0,
                           al_sae_count_dead(&t->sae), lr, t->rate, eta);
        if (pos != 0 && t->step < o->steps) continue; /* checkpoints at boundaries only */
        int last = t->step == o->steps;
        int want_stop = !last && ((o->stop && *o->stop) || (o->stop_at && t->step >= o->stop_at));
        if (last || want_stop || (o->ckpt_every && t->step - last_ckpt >= o->ckpt_every)) {
            if (save(t, e) != 0) return -1;
            last_ckpt = t->step;
        }
        if (want_stop) {
            al_progress_done(&pr);
            al_log("stopped at step %ld; SAE checkpoint saved in %s", t->step, o->out);
            *stopped = 1;
            return 0;
        }
    }
    al_progress_done(&pr);
    return 0;
}

/* --------------------------------------------------------- evaluation */

/* Running sums of the metrics over chunks of activations. */
typedef struct ev_sums {
    long n;
    double sse, l0;
    double *sum, *sumsq; /* (d_in) per-dimension sums of x and x² */
    long *fires; /* (d_sae) activations each latent fired on */
} ev_sums;

static int ev_init(ev_sums *a, const al_sae *s, al_err *e) {
    memset(a, 0, sizeof *a);
    a->sum = al_calloc((size_t)s->cfg.d_in * 2, sizeof(double), e);
    a->fires = al_calloc((size_t)s->cfg.d_sae, sizeof(long), e);
    if (!a->sum || !a->fires) {
        free(a->sum);
        free(a->fires);
        return -1;
    }
    a->sumsq = a->sum + s->cfg.d_in;
    return 0;
}

static void ev_free(ev_sums *a) {
    free(a->sum);
    free(a->fires);
}

/* after al_sae_encode of x (B rows) */
static void ev_add(ev_sums *a, const al_sae *s, const float *x, int B) {
    const int d = s->cfg.d_in, n = s->cfg.d_sae;
    for (int b = 0; b < B; b++)
        for (int r = 0; r < d; r++) {
            double v = x[(size_t)b * d + r], q = v - s->xhat[(size_t)b * d + r];
            a->sse += q * q;
            a->sum[r] += v;
            a->sumsq[r] += v * v;
        }
    if (s->cfg.arch == AL_SAE_TOPK) {
        for (size_t j = 0; j < (size_t)B * s->cfg.k; j++)
            if (s->val[j] > 0) a->fires[s->idx[j]]++, a->l0 += 1;
    } else {
        for (size_t j = 0; j < (size_t)B * n; j++)
            if (s->f[j] > 0) a->fires[j % n]++, a->l0 += 1;
    }
    a->n += B;
}

static void ev_finish(const ev_sums *a, const al_sae *s, al_sae_eval *ev) {
    const int d = s->cfg.d_in, n = s->cfg.d_sae;
    double var = 0;
    for (int r = 0; r < d; r++) var += a->sumsq[r] - a->sum[r] * a->sum[r] / (double)a->n;
    int dead = 0, dense = 0;
    for (int i = 0; i < n; i++) {
        dead += a->fires[i] == 0;
        dense += (double)a->fires[i] > 0.1 * (double)a->n;
    }
    ev->n = a->n;
    ev->l0 = a->l0 / (double)a->n;
    ev->mse = a->sse / (double)a->n;
    ev->fve = var > 0 ? 1.0 - a->sse / var : NAN;
    ev->dead_frac = (double)dead / n;
    ev->dense_frac = (double)dense / n;
}

int al_sae_evaluate_acts(al_sae *s, const float *x, long n, al_sae_eval *ev, al_err *e) {
    ev_sums a;
    if (n < 1) return al_errf(e, "SAE evaluation needs activations");
    if (ev_init(&a, s, e) != 0) return -1;
    const long chunk = 4096;
    for (long i = 0; i < n; i += chunk) {
        int B = (int)(n - i < chunk ? n - i : chunk);
        if (al_sae_encode(s, x + (size_t)i * s->cfg.d_in, B, e) != 0) {
            ev_free(&a);
            return -1;
        }
        ev_add(&a, s, x + (size_t)i * s->cfg.d_in, B);
    }
    ev_finish(&a, s, ev);
    ev->ce_clean = ev->ce_sae = ev->ce_zero = ev->ce_recovered = NAN;
    const al_interval none = {NAN, NAN, NAN};
    ev->ci_l0 = ev->ci_mse = ev->ci_fve = ev->ci_ce_clean = ev->ci_ce_sae = ev->ci_ce_zero =
        ev->ci_ce_recovered = none;
    ev->ci_n = 0;
    ev_free(&a);
    return 0;
}

/* Per held-out window, what the intervals resample (W_* columns of w):
 * its activations, SSE, active latents, the three losses summed over its
 * positions and their count; sum and sumsq (d_in each) give its SST. */
enum { W_N, W_SSE, W_L0, W_LC, W_LS, W_LZ, W_NV, W_COLS };

/* The window sums of rows [r0, r0 + nb) of a batch (window = row / T)
 * after al_sae_encode of x (nb rows). */
static void win_add(const al_sae *s, const float *x, int nb, size_t r0, int T, int w0, double *w,
                    double *wsum) {
    const int d = s->cfg.d_in, n = s->cfg.d_sae;
    for (int b = 0; b < nb; b++) {
        int k = w0 + (int)((r0 + b) / T);
        double *wk = w + (size_t)k * W_COLS, *sk = wsum + (size_t)k * 2 * d;
        wk[W_N] += 1;
        for (int r = 0; r < d; r++) {
            double v = x[(size_t)b * d + r], q = v - s->xhat[(size_t)b * d + r];
            wk[W_SSE] += q * q;
            sk[r] += v, sk[d + r] += v * v;
        }
        if (s->cfg.arch == AL_SAE_TOPK) {
            for (int j = 0; j < s->cfg.k; j++) wk[W_L0] += s->val[(size_t)b * s->cfg.k + j] > 0;
        } else {
            for (int j = 0; j < n; j++) wk[W_L0] += s->f[(size_t)b * n + j] > 0;
        }
    }
}

/* Each of the batch's nw windows' summed loss over its positions with a
 * target into column col of its row of w (and, with the clean losses,
 * the count into W_NV). */
static void win_losses(const al_model *m, const int *tg, int nw, int T, double *w, int col) {
    for (int b = 0; b < nw; b++)
        for (int t = 0; t < T; t++)
            if (tg[(size_t)b * T + t] >= 0) {
                w[(size_t)b * W_COLS + col] += m->losses[(size_t)b * T + t];
                if (col == W_LC) w[(size_t)b * W_COLS + W_NV] += 1;
            }
}

/* The intervals of ev from the windows' sums (nw windows). */
static int win_intervals(const double *w, const double *wsum, int nw, int d, al_sae_eval *ev,
                         al_err *e) {
    /* columns: l0, mse, sse (fve), ce_clean, ce_sae, ce_zero, recovered;
     * denominators: activations for the first three but fve's (its SST),
     * positions for the losses, zero − clean for recovered */
    enum { C_L0, C_MSE, C_CL, C_CS, C_CZ, NC };
    double *a = al_malloc((size_t)nw * (NC + 4), sizeof *a, e), mu_n = 0;
    double *mu = al_calloc((size_t)d, sizeof *mu, e);
    int rc = -1;
    if (a && mu) {
        double *da = a + (size_t)nw * NC, *ds = da + nw, *dl = ds + nw, *dr = dl + nw;
        for (int k = 0; k < nw; k++) {
            mu_n += w[(size_t)k * W_COLS + W_N];
            for (int r = 0; r < d; r++) mu[r] += wsum[(size_t)k * 2 * d + r];
        }
        for (int r = 0; r < d; r++) mu[r] /= mu_n;
        double *sse = al_malloc((size_t)nw * 2, sizeof *sse, e), *rec = sse ? sse + nw : NULL;
        al_interval iv[NC], f, c;
        if (sse) {
            for (int k = 0; k < nw; k++) {
                const double *wk = w + (size_t)k * W_COLS, *sk = wsum + (size_t)k * 2 * d;
                double *ak = a + (size_t)k * NC, sst = 0;
                for (int r = 0; r < d; r++)
                    sst += sk[d + r] - 2 * mu[r] * sk[r] + wk[W_N] * mu[r] * mu[r];
                ak[C_L0] = wk[W_L0], ak[C_MSE] = wk[W_SSE];
                ak[C_CL] = wk[W_LC], ak[C_CS] = wk[W_LS], ak[C_CZ] = wk[W_LZ];
                da[k] = wk[W_N], ds[k] = sst, dl[k] = wk[W_NV], sse[k] = wk[W_SSE];
                rec[k] = wk[W_LZ] - wk[W_LS], dr[k] = wk[W_LZ] - wk[W_LC];
            }
            const int B = AL_CI_BOOTSTRAP;
            const double lv = AL_CI_LEVEL;
            const uint64_t sd = AL_CI_SEED;
            rc = al_boot_ratio(a, da, nw, NC, B, lv, sd, iv, e) ||
                         al_boot_ratio(sse, ds, nw, 1, B, lv, sd, &f, e) ||
                         al_boot_ratio(rec, dr, nw, 1, B, lv, sd, &c, e)
                     ? -1
                     : 0;
            /* the losses' denominators are positions, not activations */
            al_interval il[3];
            double *al = al_malloc((size_t)nw * 3, sizeof *al, e);
            if (rc == 0 && al) {
                for (int k = 0; k < nw; k++)
                    for (int q = 0; q < 3; q++)
                        al[(size_t)k * 3 + q] = a[(size_t)k * NC + C_CL + q];
                rc = al_boot_ratio(al, dl, nw, 3, B, lv, sd, il, e);
            } else if (!al)
                rc = -1;
            free(al);
            if (rc == 0) {
                ev->ci_l0 = iv[C_L0], ev->ci_mse = iv[C_MSE];
                ev->ci_fve = (al_interval){f.se, 1 - f.hi, 1 - f.lo}; /* fve = 1 − ratio */
                ev->ci_ce_clean = il[0], ev->ci_ce_sae = il[1], ev->ci_ce_zero = il[2];
                ev->ci_ce_recovered = c;
                ev->ci_n = nw;
            }
        }
        free(sse);
    }
    free(a);
    free(mu);
    return rc;
}

int al_sae_evaluate(al_model *m, al_sae *s, const al_sae_meta *meta, const al_tokens *val,
                    int n_windows, int T, int bm, al_sae_eval *ev, al_err *e) {
    const int d = s->cfg.d_in;
    if (al_sae_fits_model(s, meta, &m->cfg, NULL, e) != 0) return -1;
    if (n_windows < 1 || bm < 1 || T < 1 || T > m->cfg.n_ctx)
        return al_errf(e, "SAE evaluation: bad window counts");
    if (bm > n_windows) bm = n_windows; /* so the windows spread over all of val */
    ev_sums a;
    if (ev_init(&a, s, e) != 0) return -1;
    const size_t rows = (size_t)bm * T;
    int *in = al_malloc(rows * 2, sizeof(int), e);
    float *z = al_malloc(rows * d, sizeof(float), e);
    float *rec = al_malloc(rows * d, sizeof(float), e);
    /* the windows' sums, for the intervals (kept apart from the sums
     * above, so the metrics are summed as before) */
    double *w = al_calloc((size_t)n_windows * (W_COLS + 2 * (size_t)d), sizeof *w, e);
    double *wsum = w ? w + (size_t)n_windows * W_COLS : NULL;
    int rc = -1;
    double lc = 0, ls = 0, lz = 0, nv = 0;
    if (!in || !z || !rec || !w) goto out;
    int *tg = in + rows;
    const int n_batches = (n_windows + bm - 1) / bm;
    const float sc = (float)meta->scale;
    for (int k = 0; k < n_batches; k++) {
        int nw = n_windows - k * bm < bm ? n_windows - k * bm : bm;
        /* al_batch_fixed spreads bm·n_batches windows evenly over val; a
         * short last batch uses the first nw of its bm */
        if (al_batch_fixed(val, bm, T, k, n_batches, in, tg, e) != 0) goto out;
        cap_ctx cc = {.mode = CAP_COPY, .d_in = d, .dst = z};
        int pt = site_point(meta->site);
        if (al_hook_add(m, pt, meta->hook_layer, site_hook, &cc, e) != 0) goto out;
        int f = al_model_forward(m, in, tg, nw, T, e);
        al_hook_remove(m, &cc);
        if (f != 0) goto out;
        double nvalid = m->n_valid;
        lc += (double)m->mean_loss * nvalid;
        win_losses(m, tg, nw, T, w + (size_t)k * bm * W_COLS, W_LC);
        const size_t nr = (size_t)nw * T, chunk = 4096; /* bounds the SAE's (rows, d_sae) */
        for (size_t i = 0; i < nr * d; i++) z[i] *= sc;
        for (size_t r0 = 0; r0 < nr; r0 += chunk) {
            int nb = (int)(nr - r0 < chunk ? nr - r0 : chunk);
            if (al_sae_encode(s, z + r0 * d, nb, e) != 0) goto out;
            ev_add(&a, s, z + r0 * d, nb);
            win_add(s, z + r0 * d, nb, r0, T, k * bm, w, wsum);
            for (size_t i = 0; i < (size_t)nb * d; i++) rec[r0 * d + i] = s->xhat[i] / sc;
        }
        cap_ctx cr = {.mode = CAP_REPLACE, .d_in = d, .src = rec};
        if (al_hook_add(m, pt, meta->hook_layer, site_hook, &cr, e) != 0) goto out;
        f = al_model_forward(m, in, tg, nw, T, e);
        al_hook_remove(m, &cr);
        if (f != 0) goto out;
        ls += (double)m->mean_loss * nvalid;
        win_losses(m, tg, nw, T, w + (size_t)k * bm * W_COLS, W_LS);
        cap_ctx c0 = {.mode = CAP_ZERO, .d_in = d};
        if (al_hook_add(m, pt, meta->hook_layer, site_hook, &c0, e) != 0) goto out;
        f = al_model_forward(m, in, tg, nw, T, e);
        al_hook_remove(m, &c0);
        if (f != 0) goto out;
        lz += (double)m->mean_loss * nvalid;
        win_losses(m, tg, nw, T, w + (size_t)k * bm * W_COLS, W_LZ);
        nv += nvalid;
    }
    ev_finish(&a, s, ev);
    ev->ce_clean = lc / nv;
    ev->ce_sae = ls / nv;
    ev->ce_zero = lz / nv;
    ev->ce_recovered = ev->ce_zero != ev->ce_clean
                           ? (ev->ce_zero - ev->ce_sae) / (ev->ce_zero - ev->ce_clean)
                           : NAN;
    if (win_intervals(w, wsum, n_windows, d, ev, e)) goto out;
    rc = 0;
out:
    free(w);
    ev_free(&a);
    free(in);
    free(z);
    free(rec);
    return rc;
}

int al_sae_trainer_eval(al_sae_trainer *t, al_sae_eval *ev, al_err *e) {
    if (!t->o.source)
        return al_sae_evaluate(&t->m, &t->sae, &t->meta, &t->val, t->o.eval_windows, t->T, t->bm,
                               ev, e);
    const long n = (long)t->o.eval_windows * 256;
    float *x = al_malloc((size_t)n * t->d_in, sizeof(float), e);
    if (!x) return -1;
    al_rng r;
    al_rng_seed(&r, t->o.seed ^ 0xe7a1e7a1ull);
    int rc = t->o.source(t->o.source_ctx, x, (int)n, &r, e);
    if (rc == 0) {
        for (long i = 0; i < n * t->d_in; i++) x[i] *= (float)t->meta.scale;
        rc = al_sae_evaluate_acts(&t->sae, x, n, ev, e);
    }
    free(x);
    return rc;
}
