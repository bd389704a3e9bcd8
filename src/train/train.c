/* train.c -- the trainer (see train.h): options in, checkpoints out; the
 * caller's observer sees every evaluation and checkpoint. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "attnlab/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/data.h"
#include "attnlab/gemm.h"
#include "attnlab/membudget.h"
#include "attnlab/optim.h"

al_train_opts al_train_opts_defaults(void) {
    al_config c = al_config_default();
    al_train_opts o = {.out = "runs/default",
                       .n_layers = c.n_layers,
                       .d_model = c.d_model,
                       .n_heads = c.n_heads,
                       .d_head = c.d_head,
                       .n_ctx = c.n_ctx,
                       .seed = c.seed,
                       .steps = 1000,
                       .batch = 16,
                       .seq_len = 0,
                       .lr = 3e-3,
                       .min_lr_frac = 0.1,
                       .beta1 = 0.9,
                       .beta2 = 0.95,
                       .eps = 1e-8,
                       .weight_decay = 0.1,
                       .grad_clip = 1.0,
                       .warmup = 100,
                       .eval_every = 100,
                       .eval_batches = 8,
                       .ckpt_every = 500,
                       .threads = 0,
                       .val_fraction = 0.05,
                       .ln_eps = c.ln_eps};
    return o;
}

int al_train_norm_parse(const char *s, int *norm) {
    static const char *const names[] = {"none", "ln", "lnpre"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) {
            *norm = i; /* AL_NORM_NONE, AL_NORM_LN, AL_NORM_LNPRE */
            return 0;
        }
    return -1;
}

/* Messages name the options by their field names, which are also their
 * JSON keys (and, with '-' for '_', the CLI's flags). */
static int check_opts(const al_train_opts *o, al_err *e) {
    if (!o->data || !*o->data)
        return al_errf(e, "data is required (a token file from 'attnlab encode')");
    if (!o->out || !*o->out) return al_errf(e, "out (the model directory) is required");
    if (o->steps <= 0) return al_errf(e, "steps must be positive (got %d)", o->steps);
    if (o->batch <= 0) return al_errf(e, "batch must be positive (got %d)", o->batch);
    if (o->seq_len < 0) return al_errf(e, "seq_len must be >= 0 (got %d)", o->seq_len);
    if (!(o->lr > 0)) return al_errf(e, "lr must be positive (got %g)", o->lr);
    if (o->min_lr_frac < 0 || o->min_lr_frac > 1)
        return al_errf(e, "min_lr_frac must be in [0,1] (got %g)", o->min_lr_frac);
    if (o->warmup < 0) return al_errf(e, "warmup must be >= 0 (got %d)", o->warmup);
    if (o->beta1 < 0 || o->beta1 >= 1 || o->beta2 < 0 || o->beta2 >= 1)
        return al_errf(e, "beta1 and beta2 must be in [0,1)");
    if (!(o->eps > 0)) return al_errf(e, "eps must be positive (got %g)", o->eps);
    if (o->weight_decay < 0) return al_errf(e, "weight_decay must be >= 0");
    if (o->grad_clip < 0) return al_errf(e, "grad_clip must be >= 0");
    if (o->eval_every < 0 || o->eval_batches <= 0 || o->ckpt_every < 0)
        return al_errf(e, "eval_every and ckpt_every must be >= 0, eval_batches > 0");
    if (o->val_fraction <= 0 || o->val_fraction >= 1)
        return al_errf(e, "val_fraction must be in (0,1) (got %g)", o->val_fraction);
    if (al_threads_check(o->threads, e)) return -1;
    al_precision prec;
    if (o->precision && al_precision_parse(o->precision, &prec) != 0)
        return al_errf(e, "precision must be f32 or bf16 (got '%s')", o->precision);
    int pt;
    if (o->pos && al_pos_type_parse(o->pos, &pt) != 0)
        return al_errf(e, "pos must be standard or shortformer (got '%s')", o->pos);
    if (o->norm && al_train_norm_parse(o->norm, &pt) != 0)
        return al_errf(e, "norm must be none, ln or lnpre (got '%s')", o->norm);
    unsigned bits;
    if (o->biases && al_bias_spec_parse(o->biases, &bits) != 0)
        return al_errf(e, "biases must be none, all, or letters of q, k, v, o, u (got '%s')",
                       o->biases);
    if (!(o->ln_eps > 0 && o->ln_eps <= 1))
        return al_errf(e, "ln_eps must be in (0, 1] (got %g)", o->ln_eps);
    if (o->d_model > 0 && o->n_heads > 0 && o->d_head > 0 && o->n_heads * o->d_head != o->d_model)
        return al_errf(e, "n_heads x d_head must equal d_model (%d x %d != %d)", o->n_heads,
                       o->d_head, o->d_model);
    return 0;
}

/* -------------------------------------------------- the trainer's state */

struct al_trainer {
    al_train_opts o;
    al_precision prec_before; /* the process's matmul precision, restored by free */
    al_train_observer obs;
    al_model m;
    al_tokenizer *tok;
    al_tokens train, val;
    al_adamw adam;
    al_optim_cfg oc;
    al_train_state st;
    int T, B;
    int *in, *tg; /* [B, T] each, one allocation */
    long last_ckpt_step;
    int made_dir; /* out did not exist before this trainer */
    double t_start;
};

static int stopping(const al_trainer *t) { return t->o.stop && *t->o.stop; }

static int load_data(al_trainer *t, al_err *e) {
    const al_train_opts *o = &t->o;
    if (al_tokens_load(o->data, &t->train, e) != 0) return -1;
    if (o->val && *o->val) return al_tokens_load(o->val, &t->val, e);
    /* hold out the tail: no separate file needed for quick runs */
    return al_tokens_hold_out(&t->train, o->val_fraction, o->data, &t->val, e);
}

/* Training c on batches of (B, T) holds four copies of the parameters
 * (weights, gradients, AdamW's two moments), the activations of a forward
 * and backward, and the batch's ids: refused before any is allocated (or
 * the step-0 checkpoint written) when that exceeds the memory budget. */
static int memory_fits(const al_config *c, int B, int T, al_err *e) {
    double need = 4 * al_model_param_floats(c) * sizeof(float) + al_model_acts_bytes(c, B, T) +
                  2.0 * B * T * sizeof(int);
    char what[160];
    snprintf(what, sizeof what,
             "--batch %d x %d-token sequences (d_model %d, %d layers, d_vocab %d)", B, T,
             c->d_model, c->n_layers, c->d_vocab);
    return al_mem_check(need, "train", what, "lower --batch or --seq-len (or the model's size)", e);
}

static int setup_model(al_trainer *t, al_err *e) {
    const al_train_opts *o = &t->o;
    if (o->resume) {
        if (al_ckpt_load(o->resume, &t->m, &t->tok, e) != 0) return -1;
    } else {
        if (o->tokenizer && *o->tokenizer) {
            if (al_tok_load(o->tokenizer, &t->tok, e) != 0) return -1;
        } else if (al_tok_byte_level(&t->tok, e) != 0) {
            return -1;
        }
        al_config c = {.n_layers = o->n_layers,
                       .d_model = o->d_model,
                       .n_heads = o->n_heads,
                       .d_head = o->d_head,
                       .n_ctx = o->n_ctx,
                       .d_vocab = al_tok_vocab_size(t->tok),
                       .tied_embeddings = o->tied,
                       .seed = o->seed};
        if (o->pos) al_pos_type_parse(o->pos, &c.pos_type); /* checked by check_opts */
        if (o->norm) al_train_norm_parse(o->norm, &c.norm_type);
        if (o->biases) al_bias_spec_parse(o->biases, &c.biases);
        c.ln_eps = o->ln_eps;
        int T = o->seq_len ? o->seq_len : c.n_ctx;
        /* sizes the checks below refuse are left to them */
        if (al_config_validate(&c, e) != 0 ||
            (T <= c.n_ctx && memory_fits(&c, o->batch, T, e) != 0))
            return -1;
        if (al_model_init(&t->m, &c, e) != 0) return -1;
    }
    t->m.skip_gate_grads = 1;
    int V = t->m.cfg.d_vocab;
    if (t->train.max_id >= V || t->val.max_id >= V)
        return al_errf(
            e, "token id %d in the data is >= d_vocab %d: was it encoded with this tokenizer?",
            t->train.max_id > t->val.max_id ? t->train.max_id : t->val.max_id, V);
    t->T = o->seq_len ? o->seq_len : t->m.cfg.n_ctx;
    t->B = o->batch;
    if (t->T > t->m.cfg.n_ctx)
        return al_errf(e, "seq_len %d exceeds n_ctx %d", t->T, t->m.cfg.n_ctx);
    if ((size_t)t->T + 1 > t->train.n || (size_t)t->T + 1 > t->val.n)
        return al_errf(e,
                       "sequence length %d needs more tokens than the data has "
                       "(train %zu, validation %zu): lower n_ctx/seq_len or use more data",
                       t->T, t->train.n, t->val.n);
    if (o->resume && memory_fits(&t->m.cfg, t->B, t->T, e) != 0) return -1;
    if (al_model_alloc_grads(&t->m, e) != 0) return -1;
    if (al_adamw_init(&t->adam, t->m.n_params, e) != 0) return -1;
    t->in = al_malloc((size_t)t->B * t->T, 2 * sizeof(int), e);
    if (!t->in) return -1;
    t->tg = t->in + (size_t)t->B * t->T;
    return 0;
}

int al_trainer_save(al_trainer *t, al_err *e) {
    free(t->st.train_json);
    t->st.train_json = strdup(t->o.opts_json ? t->o.opts_json : "{}");
    if (!t->st.train_json) return al_errf(e, "out of memory copying the options");
    if (al_ckpt_save(t->o.out, &t->m, t->tok, &t->st, t->adam.m, t->adam.v, e) != 0) return -1;
    t->last_ckpt_step = t->st.step;
    return 0;
}

int al_trainer_init(al_trainer **out, const al_train_opts *o, const al_train_observer *obs,
                    al_err *e) {
    *out = NULL;
    if (check_opts(o, e) != 0) return -1;
    al_trainer *t = al_calloc(1, sizeof *t, e);
    if (!t) return -1;
    t->o = *o;
    if (obs) t->obs = *obs;
    al_set_threads(o->threads);
    al_precision prec = AL_PREC_F32;
    if (o->precision) al_precision_parse(o->precision, &prec); /* checked above */
    /* process-wide, so analyses run after training (an experiment) get
     * their own precision back from al_trainer_free */
    t->prec_before = al_gemm_precision();
    if (al_gemm_set_precision(prec, e) != 0) goto fail;
    if (!o->resume && !o->force) {
        char p[AL_PATH_MAX + 64];
        if (al_path_join(p, sizeof p, o->out, "model.safetensors", e) != 0) goto fail;
        if (al_file_exists(p)) {
            al_errf(e,
                    "%s already holds a checkpoint: continue it with --resume %s, or start "
                    "over in it with --force (or give another --out)",
                    o->out, o->out);
            goto fail;
        }
    }
    if (load_data(t, e) != 0 || setup_model(t, e) != 0) goto fail;
    t->made_dir = !al_file_exists(o->out);
    if (al_mkdir_p(o->out, e) != 0) goto fail;
    t->oc = (al_optim_cfg){.lr = o->lr,
                           .min_lr_frac = o->min_lr_frac,
                           .warmup = o->warmup,
                           .total_steps = o->steps,
                           .beta1 = o->beta1,
                           .beta2 = o->beta2,
                           .eps = o->eps,
                           .weight_decay = o->weight_decay,
                           .grad_clip = o->grad_clip};
    t->st.data_tokens = (double)t->train.n;
    if (o->resume) {
        if (al_ckpt_load_state(o->resume, &t->st, t->adam.m, t->adam.v, t->adam.n, e) != 0)
            goto fail;
        t->st.data_tokens = (double)t->train.n; /* the data of this sitting */
        if (!t->obs.on_start) { /* nobody records this sitting: later checkpoints name no curve */
            free(t->st.curve_db);
            t->st.curve_db = NULL;
            t->st.curve_run = 0;
        }
        t->last_ckpt_step = t->st.step;
        al_log("resuming %s at step %ld of %d", o->resume, t->st.step, o->steps);
    } else {
        al_rng_seed(&t->st.rng, o->seed ^ 0x5eed0da7aULL);
        if (al_trainer_save(t, e) != 0) goto fail; /* step 0: there is always a checkpoint */
    }
    al_log("model: %d layers, d_model %d, %d heads x %d, n_ctx %d, %s positions, d_vocab %d, "
           "%zu params; %zu train / %zu val tokens; batch %dx%d; %d threads",
           t->m.cfg.n_layers, t->m.cfg.d_model, t->m.cfg.n_heads, t->m.cfg.d_head, t->m.cfg.n_ctx,
           al_pos_type_name(t->m.cfg.pos_type), t->m.cfg.d_vocab, t->m.n_params, t->train.n,
           t->val.n, t->B, t->T, al_get_threads());
    const al_config *mc = &t->m.cfg;
    if (!al_config_is_plain(mc)) {
        char bs[64] = "";
        for (unsigned b = 1; b <= AL_BIAS_U; b <<= 1)
            if (mc->biases & b)
                snprintf(bs + strlen(bs), sizeof bs - strlen(bs), "%s%s", bs[0] ? ", " : "",
                         al_bias_name(b));
        al_log("model: normalization %s (eps %g), biases %s",
               mc->norm_type == AL_NORM_NONE ? "none" : al_norm_type_name(mc->norm_type),
               mc->ln_eps, bs[0] ? bs : "none");
    }
    *out = t;
    return 0;
fail:
    if (t->made_dir) al_remove_made_dir(o->out);
    al_trainer_free(t);
    return -1;
}

int al_trainer_failed(al_trainer *t, al_err *e) {
    if (e && strstr(e->msg, t->o.out)) return -1; /* the message says where the model is */
    if (!t->o.resume && t->last_ckpt_step == 0) {
        if (t->made_dir) al_remove_made_dir(t->o.out);
    } else if (e) {
        size_t l = strnlen(e->msg, sizeof e->msg);
        snprintf(e->msg + l, sizeof e->msg - l,
                 "; the checkpoint of step %ld is in %s (--resume continues it)", t->last_ckpt_step,
                 t->o.out);
    }
    return -1;
}

void al_trainer_free(al_trainer *t) {
    if (!t) return;
    al_gemm_set_precision(t->prec_before, NULL); /* was in use: cannot fail */
    free(t->in);
    al_adamw_free(&t->adam);
    al_tokens_free(&t->train);
    al_tokens_free(&t->val);
    al_tok_free(t->tok);
    al_state_free(&t->st);
    al_model_free(&t->m);
    free(t);
}

al_model *al_trainer_model(al_trainer *t) { return &t->m; }
al_train_state *al_trainer_state(al_trainer *t) { return &t->st; }
const al_tokenizer *al_trainer_tokenizer(const al_trainer *t) { return t->tok; }
const char *al_trainer_dir(const al_trainer *t) { return t->o.out; }
int al_trainer_seq_len(const al_trainer *t) { return t->T; }

/* ------------------------------------------------------------ training */

/* The stop request is checked before every batch, so that it is honoured
 * within one batch even with eval_batches in the thousands. */
int al_trainer_evaluate(al_trainer *t, double *loss, double *se, al_err *e) {
    double s = 0, s1 = 0, s2 = 0; /* the mean as always; the sequences' sums apart */
    int nb = t->o.eval_batches, B = t->B, T = t->T;
    for (int k = 0; k < nb; k++) {
        if (stopping(t)) return 1;
        if (al_batch_fixed(&t->val, B, T, k, nb, t->in, t->tg, e) != 0 ||
            al_model_forward(&t->m, t->in, t->tg, B, T, e) != 0)
            return -1;
        s += t->m.mean_loss;
        for (int b = 0; se && b < B; b++) {
            double q = 0;
            int n = 0;
            for (int i = 0; i < T; i++)
                if (t->tg[(size_t)b * T + i] >= 0) q += t->m.losses[(size_t)b * T + i], n++;
            q = n ? q / n : 0;
            s1 += q, s2 += q * q;
        }
    }
    *loss = s / nb;
    if (se) {
        double n = (double)nb * B, mean = s1 / n, var = (s2 - n * mean * mean) / (n - 1);
        *se = n >= 2 ? sqrt(var > 0 ? var : 0) / sqrt(n) : NAN;
    }
    return 0;
}

/* 0 stepped, 1 non-finite loss or gradient (nothing changed), -1 error. */
static int step_once(al_trainer *t, double *loss, double *norm, al_err *e) {
    long step = t->st.step;
    if (al_batch_random(&t->train, t->B, t->T, &t->st.rng, t->in, t->tg, e) != 0 ||
        al_model_forward_backward(&t->m, t->in, t->tg, t->B, t->T, e) != 0)
        return -1;
    *loss = t->m.mean_loss;
    if (!isfinite(*loss)) return 1;
    double lr = al_lr_at(&t->oc, step);
    /* The norm is checked before it can touch the weights, so a blow-up
     * leaves the parameters (and the last checkpoint) as they were. */
    *norm = al_grad_norm(&t->m);
    if (!isfinite(*norm)) return 1;
    al_adamw_step_norm(&t->adam, &t->m, &t->oc, step + 1, lr, *norm);
    t->st.step = step + 1;
    t->st.tokens_seen += (double)t->B * t->T;
    t->st.last_train_loss = *loss;
    return 0;
}

static int nonfinite(const al_trainer *t, double loss, al_err *e) {
    return al_errf(e,
                   "non-finite %s at step %ld (loss %g, lr %.3g): training stopped; "
                   "the last good checkpoint (step %ld) is in %s",
                   isfinite(loss) ? "gradient" : "loss", t->st.step + 1, loss,
                   al_lr_at(&t->oc, t->st.step), t->last_ckpt_step, t->o.out);
}

int al_trainer_step(al_trainer *t, double *loss, double *grad_norm, al_err *e) {
    *loss = *grad_norm = 0;
    int rc = step_once(t, loss, grad_norm, e);
    return rc > 0 ? nonfinite(t, *loss, e) : rc;
}

static int observe_eval(al_trainer *t, double train_loss, double val_loss, double se, al_err *e) {
    if (!t->obs.on_eval) return 0;
    long s = t->st.step;
    al_train_eval ev = {.step = s,
                        .tokens = t->st.tokens_seen,
                        .train_loss = train_loss,
                        .val_loss = val_loss,
                        .val_loss_se = se,
                        .lr = al_lr_at(&t->oc, s > 0 ? s - 1 : 0),
                        .seconds = al_now() - t->t_start};
    return t->obs.on_eval(t->obs.ctx, t, &ev, e) != 0 ? -1 : 0;
}

static int save_observed(al_trainer *t, al_err *e) {
    if (al_trainer_save(t, e) != 0) return -1;
    if (t->obs.on_checkpoint && t->obs.on_checkpoint(t->obs.ctx, t, e) != 0) return -1;
    return 0;
}

static int loop(al_trainer *t, int *stopped, al_err *e) {
    const al_train_opts *o = &t->o;
    al_progress pr;
    al_progress_init(&pr, 10.0);
    long start = t->st.step;
    double t0 = al_now();
    while (t->st.step < o->steps) {
        double loss = 0, norm = 0;
        int rc = step_once(t, &loss, &norm, e);
        if (rc < 0) return -1;
        if (rc > 0) {
            al_progress_done(&pr);
            return nonfinite(t, loss, e);
        }
        long done = t->st.step - start;
        double el = al_now() - t0, tps = (double)done * t->B * t->T / (el > 0 ? el : 1e-9);
        char eta[32];
        al_fmt_duration(eta, sizeof eta, el / (double)done * (double)(o->steps - t->st.step));
        al_progress_update(&pr, t->st.step == o->steps,
                           "step %ld/%d | loss %.4f | lr %.2e | norm %.2f | %.0f tok/s | ETA %s",
                           t->st.step, o->steps, loss, al_lr_at(&t->oc, t->st.step - 1), norm, tps,
                           eta);
        int last = t->st.step == o->steps;
        if ((o->eval_every && t->st.step % o->eval_every == 0) || last) {
            double vl, vse;
            int ev = al_trainer_evaluate(t, &vl, &vse, e);
            if (ev < 0) return -1;
            t->st.last_val_loss = NAN; /* unless the evaluation finishes */
            if (ev == 0) {
                t->st.last_val_loss = vl;
                if (observe_eval(t, loss, vl, vse, e) != 0) return -1;
                al_log("step %ld: train loss %.4f, val loss %.4f ± %.4f", t->st.step, loss, vl,
                       vse);
            }
        }
        if ((o->ckpt_every && t->st.step % o->ckpt_every == 0) || last) {
            if (save_observed(t, e) != 0) return -1;
        }
        if ((stopping(t) || (o->stop_at && t->st.step == o->stop_at)) && !last) {
            al_progress_done(&pr);
            if (save_observed(t, e) != 0) return -1;
            al_log("stopped at step %ld; checkpoint saved in %s", t->st.step, o->out);
            *stopped = 1;
            return 0;
        }
    }
    al_progress_done(&pr);
    return 0;
}

/* The curve starts with an evaluation at step 0; a run resumed from step
 * 0 repeats it, and one resumed where a stop cut an evaluation short (val
 * loss NaN) repeats that one. Evaluation draws no random numbers, so the
 * run stays exact. If this evaluation is itself stopped, stop before
 * training: the checkpoint on disk is this very state, so the next resume
 * repeats it. */
static int first_eval(al_trainer *t, int *stopped, al_err *e) {
    const al_train_opts *o = &t->o;
    if (!t->obs.on_eval || (o->resume && t->st.step != 0 && !isnan(t->st.last_val_loss))) return 0;
    double vl, vse;
    int ev = al_trainer_evaluate(t, &vl, &vse, e);
    if (ev < 0) return -1;
    if (ev > 0) {
        al_log("stopped before training; checkpoint in %s", o->out);
        *stopped = 1;
        return 0;
    }
    if (observe_eval(t, t->st.step > 0 ? t->st.last_train_loss : NAN, vl, vse, e) != 0) return -1;
    if (o->resume) t->st.last_val_loss = vl;
    return 0;
}

int al_trainer_run(al_trainer *t, int *stopped, al_err *e) {
    *stopped = 0;
    t->t_start = al_now();
    int rc = 0;
    if (t->obs.on_start && t->obs.on_start(t->obs.ctx, t, e) != 0) rc = -1;
    if (rc == 0) rc = first_eval(t, stopped, e);
    if (rc == 0 && !*stopped) rc = loop(t, stopped, e);
    /* e is set only when rc != 0 */
    if (t->obs.on_end) t->obs.on_end(t->obs.ctx, t, rc != 0 ? -1 : *stopped, rc != 0 ? e : NULL);
    if (rc == 0 && !*stopped)
        al_log("done: %ld steps, val loss %.4f; model in %s", t->st.step, t->st.last_val_loss,
               t->o.out);
    return rc;
}
