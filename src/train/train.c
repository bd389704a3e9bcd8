/* train.c -- the training loop (see train.h).
 *
 * Reproducibility: the data order comes from one al_rng that is used for
 * nothing else and is saved in state.json with AdamW's moments, so a run
 * resumed at step N continues bit-for-bit as if it had never stopped
 * (with the same thread count: sgemm's summation order depends on it).
 * Validation uses fixed windows and draws no random numbers. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "attnlab/train.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/data.h"
#include "attnlab/optim.h"
#include "attnlab/scores.h"
#include "attnlab/store.h"
#include "attnlab/tokenizer.h"

al_train_opts al_train_defaults(void) {
    al_config c = al_config_default();
    al_train_opts o = {
        .out = "runs/default", .n_layers = c.n_layers, .d_model = c.d_model,
        .n_heads = c.n_heads, .d_head = c.d_head, .n_ctx = c.n_ctx, .seed = c.seed,
        .steps = 1000, .batch = 16, .seq_len = 0, .lr = 3e-3, .min_lr_frac = 0.1,
        .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
        .grad_clip = 1.0, .warmup = 100, .eval_every = 100, .eval_batches = 8,
        .ckpt_every = 500, .threads = 0, .val_fraction = 0.05};
    return o;
}

al_flag *al_train_flags(al_train_opts *o) {
    static al_flag f[40];
    al_flag t[] = {
        {"config", AL_STR, &o->config, "FILE", "JSON file with any of these options (keys with _ or -)", 0, 0},
        {"data", AL_STR, &o->data, "FILE", "training token file (attnlab encode)", 0, 0},
        {"val", AL_STR, &o->val, "FILE", "validation token file (default: the tail of --data)", 0, 0},
        {"tokenizer", AL_STR, &o->tokenizer, "FILE", "tokenizer.json the data was encoded with (default: bytes)", 0, 0},
        {"out", AL_STR, &o->out, "DIR", "model directory to write", 0, 0},
        {"resume", AL_STR, &o->resume, "DIR", "continue the run saved in DIR exactly where it stopped", 0, 0},
        {"force", AL_BOOL, &o->force, NULL, "overwrite a checkpoint already in --out", 0, 0},
        {"db", AL_STR, &o->db, "FILE", "SQLite file to record training dynamics in", 0, 0},
        {"n-layers", AL_INT, &o->n_layers, "N", "attention layers", 0, 0},
        {"d-model", AL_INT, &o->d_model, "N", "residual stream width", 0, 0},
        {"n-heads", AL_INT, &o->n_heads, "N", "heads per layer", 0, 0},
        {"d-head", AL_INT, &o->d_head, "N", "width of each head", 0, 0},
        {"n-ctx", AL_INT, &o->n_ctx, "N", "context length (positions)", 0, 0},
        {"tied", AL_BOOL, &o->tied, NULL, "tie the unembedding to the embedding (W_U = W_E^T)", 0, 0},
        {"seed", AL_U64, &o->seed, "N", "seed for initialisation and data order", 0, 0},
        {"steps", AL_INT, &o->steps, "N", "optimizer steps in total", 0, 0},
        {"batch", AL_INT, &o->batch, "N", "sequences per step", 0, 0},
        {"seq-len", AL_INT, &o->seq_len, "N", "tokens per sequence (0 = n_ctx)", 0, 0},
        {"lr", AL_FLOAT, &o->lr, "X", "peak learning rate", 0, 0},
        {"min-lr-frac", AL_FLOAT, &o->min_lr_frac, "X", "cosine decays to lr times this", 0, 0},
        {"warmup", AL_INT, &o->warmup, "N", "linear warm-up steps", 0, 0},
        {"beta1", AL_FLOAT, &o->beta1, "X", "AdamW beta1", 0, 0},
        {"beta2", AL_FLOAT, &o->beta2, "X", "AdamW beta2", 0, 0},
        {"eps", AL_FLOAT, &o->eps, "X", "AdamW epsilon", 0, 0},
        {"weight-decay", AL_FLOAT, &o->weight_decay, "X", "decoupled weight decay (not on embeddings)", 0, 0},
        {"grad-clip", AL_FLOAT, &o->grad_clip, "X", "clip the global gradient norm (0 = off)", 0, 0},
        {"eval-every", AL_INT, &o->eval_every, "N", "validate every N steps (0 = only at the end)", 0, 0},
        {"eval-batches", AL_INT, &o->eval_batches, "N", "validation batches per evaluation", 0, 0},
        {"ckpt-every", AL_INT, &o->ckpt_every, "N", "checkpoint every N steps (and at the end)", 0, 0},
        {"val-fraction", AL_FLOAT, &o->val_fraction, "X", "share of --data held out when --val is absent", 0, 0},
        {"threads", AL_INT, &o->threads, "N", "threads (0 = OMP_NUM_THREADS or all cores)", 0, 0},
        {"stop-at", AL_INT, &o->stop_at, "N", "save and stop after step N, as Ctrl-C would (to split a run)", 0, 0},
        AL_FLAGS_END};
    memcpy(f, t, sizeof t);
    return f;
}

static int check_opts(const al_train_opts *o, al_err *e) {
    if (!o->data || !*o->data) return al_errf(e, "--data is required (a token file from 'attnlab encode')");
    if (o->steps <= 0) return al_errf(e, "--steps must be positive (got %d)", o->steps);
    if (o->batch <= 0) return al_errf(e, "--batch must be positive (got %d)", o->batch);
    if (o->seq_len < 0) return al_errf(e, "--seq-len must be >= 0 (got %d)", o->seq_len);
    if (!(o->lr > 0)) return al_errf(e, "--lr must be positive (got %g)", o->lr);
    if (o->min_lr_frac < 0 || o->min_lr_frac > 1)
        return al_errf(e, "--min-lr-frac must be in [0,1] (got %g)", o->min_lr_frac);
    if (o->warmup < 0) return al_errf(e, "--warmup must be >= 0 (got %d)", o->warmup);
    if (o->beta1 < 0 || o->beta1 >= 1 || o->beta2 < 0 || o->beta2 >= 1)
        return al_errf(e, "--beta1 and --beta2 must be in [0,1)");
    if (!(o->eps > 0)) return al_errf(e, "--eps must be positive (got %g)", o->eps);
    if (o->weight_decay < 0) return al_errf(e, "--weight-decay must be >= 0");
    if (o->grad_clip < 0) return al_errf(e, "--grad-clip must be >= 0");
    if (o->eval_every < 0 || o->eval_batches <= 0 || o->ckpt_every < 0)
        return al_errf(e, "--eval-every and --ckpt-every must be >= 0, --eval-batches > 0");
    if (o->val_fraction <= 0 || o->val_fraction >= 1)
        return al_errf(e, "--val-fraction must be in (0,1) (got %g)", o->val_fraction);
    if (o->threads < 0) return al_errf(e, "--threads must be >= 0");
    if (o->d_model > 0 && o->n_heads > 0 && o->d_head > 0 &&
        o->n_heads * o->d_head != o->d_model)
        return al_errf(e, "n_heads x d_head must equal d_model (%d x %d != %d)",
                       o->n_heads, o->d_head, o->d_model);
    return 0;
}

/* -------------------------------------------------- the loop's state */

typedef struct trainer {
    al_train_opts *o;
    al_flag *flags;
    al_model m;
    al_tokenizer *tok;
    al_tokens train, val;
    al_adamw adam;
    al_optim_cfg oc;
    al_train_state st;
    int T, B;
    int *in, *tg;
    long last_ckpt_step;
    const char *dir;
    /* training dynamics (--db): a small fixed probe, scored at every eval */
    al_store *db;
    int64_t run_id;
    al_probe probe;
    double t_start;
} trainer;

/* Probe size for training dynamics: 16 sequences of 2R+1 <= 101 tokens
 * are ~1.6K tokens of forward pass per evaluation, well under 1% of the
 * training compute between two evaluations at the defaults. */
#define DYN_PROBE_N 16
#define DYN_PROBE_SEED 20240520

/* Every checkpoint names, in state.json, the run and database that
 * logged its curve. A run resumed into the same database copies that
 * run's rows up to the resumed step, so the curve of a model trained in
 * several sittings starts at step 0; later checkpoints name this run. */
static int carry_curve(trainer *tr, al_err *e) {
    char db[PATH_MAX];
    if (!realpath(tr->o->db, db)) return al_errf(e, "cannot resolve %s: %s", tr->o->db, strerror(errno));
    int64_t from = tr->st.curve_run;
    int carried = 0;
    if (from > 0 && tr->st.curve_db && strcmp(tr->st.curve_db, db) == 0 &&
        al_store_carry_train_log(tr->db, tr->run_id, from, tr->st.step, &carried, e) != 0)
        return -1;
    if (carried)
        al_log("training curve up to step %ld carried over from run %lld", tr->st.step,
               (long long)from);
    free(tr->st.curve_db);
    tr->st.curve_db = strdup(db);
    if (!tr->st.curve_db) return al_errf(e, "out of memory");
    tr->st.curve_run = tr->run_id;
    return 0;
}

static int dynamics_open(trainer *tr, al_err *e) {
    if (!tr->o->db) return 0;
    /* the probe fits the trained sequence length (positions past it are
     * never trained when --seq-len < n_ctx) */
    int R = (tr->T - 1) / 2;
    if (R > 50) R = 50;
    if (R < 2) return al_errf(e, "--db needs sequences of at least 5 tokens for the induction probe");
    if (al_probe_make(&tr->probe, R, DYN_PROBE_N, DYN_PROBE_SEED, tr->m.cfg.d_vocab,
                      al_tok_eot(tr->tok), e) != 0)
        return -1;
    if (al_store_open(tr->o->db, &tr->db, e) != 0) return -1;
    char *cfg = al_flags_to_json(tr->flags);
    int rc = al_store_run_begin(tr->db, "train", cfg ? cfg : "{}", 0, &tr->run_id, e);
    free(cfg);
    return rc ? rc : carry_curve(tr, e);
}

/* One row of train_log and L×H×3 rows of train_head_scores, committed at
 * once so that they can be watched (and plotted) while training runs. */
static int dynamics_record(trainer *tr, double train_loss, double val_loss, al_err *e) {
    if (!tr->db) return 0;
    al_probe_scores ps;
    if (al_probe_run(&tr->m, &tr->probe, DYN_PROBE_N, &ps, e) != 0) return -1;
    al_train_log_row row = {.step = tr->st.step, .tokens = tr->st.tokens_seen,
                            .train_loss = train_loss, .val_loss = val_loss,
                            .icl_gain = ps.icl_gain,
                            .lr = al_lr_at(&tr->oc, tr->st.step > 0 ? tr->st.step - 1 : 0),
                            .seconds = al_now() - tr->t_start};
    int rc = al_store_tx_begin(tr->db, e) != 0 || al_store_put_train_log(tr->db, tr->run_id, &row, e) != 0;
    int H = tr->m.cfg.n_heads;
    for (int i = 0; !rc && i < tr->m.cfg.n_layers * H; i++) {
        rc = al_store_put_train_head_score(tr->db, tr->run_id, tr->st.step, i / H, i % H,
                                           "induction", ps.induction[i], e) != 0 ||
             al_store_put_train_head_score(tr->db, tr->run_id, tr->st.step, i / H, i % H,
                                           "prev_token", ps.prev_token[i], e) != 0 ||
             al_store_put_train_head_score(tr->db, tr->run_id, tr->st.step, i / H, i % H,
                                           "duplicate_token", ps.duplicate_token[i], e) != 0;
    }
    al_probe_scores_free(&ps);
    if (rc) return -1;
    return al_store_tx_commit(tr->db, e);
}

/* Attach the final checkpoint as the run's model and mark it done, or
 * mark it failed with the reason (why) when training did not finish. */
static void dynamics_close(trainer *tr, const char *why) {
    al_probe_free(&tr->probe);
    if (!tr->db) return;
    al_err e2, e3;
    int64_t model_id = 0;
    if (!why && (al_store_model(tr->db, tr->dir, NULL, &tr->m, NULL, &model_id, &e2) != 0 ||
                 al_store_run_set_model(tr->db, tr->run_id, model_id, &e2) != 0 ||
                 al_store_run_finish(tr->db, tr->run_id, &e2) != 0))
        why = e2.msg;
    if (why) al_store_run_fail(tr->db, tr->run_id, why, &e3);
    al_store_close(tr->db);
    tr->db = NULL;
}

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int sig) { g_stop = sig; }

static int load_data(trainer *tr, al_err *e) {
    al_train_opts *o = tr->o;
    if (al_tokens_load(o->data, &tr->train, e) != 0) return -1;
    if (o->val && *o->val) return al_tokens_load(o->val, &tr->val, e);
    /* hold out the tail: no separate file needed for quick runs */
    size_t n_val = (size_t)((double)tr->train.n * o->val_fraction);
    if (n_val < 2 || tr->train.n - n_val < 2)
        return al_errf(e, "%s has %zu tokens: too few to hold out a validation split",
                       o->data, tr->train.n);
    tr->val.tok = al_malloc(n_val, sizeof(uint16_t), e);
    if (!tr->val.tok) return -1;
    memcpy(tr->val.tok, tr->train.tok + tr->train.n - n_val, n_val * sizeof(uint16_t));
    tr->val.n = n_val;
    tr->val.max_id = tr->train.max_id;
    tr->train.n -= n_val;
    return 0;
}

static int setup_model(trainer *tr, al_err *e) {
    al_train_opts *o = tr->o;
    if (o->resume) {
        if (al_ckpt_load(o->resume, &tr->m, &tr->tok, e) != 0) return -1;
    } else {
        if (o->tokenizer && *o->tokenizer) {
            if (al_tok_load(o->tokenizer, &tr->tok, e) != 0) return -1;
        } else if (al_tok_byte_level(&tr->tok, e) != 0) {
            return -1;
        }
        al_config c = {.n_layers = o->n_layers, .d_model = o->d_model,
                       .n_heads = o->n_heads, .d_head = o->d_head, .n_ctx = o->n_ctx,
                       .d_vocab = al_tok_vocab_size(tr->tok),
                       .tied_embeddings = o->tied, .seed = o->seed};
        if (al_model_init(&tr->m, &c, e) != 0) return -1;
    }
    int V = tr->m.cfg.d_vocab;
    if (tr->train.max_id >= V || tr->val.max_id >= V)
        return al_errf(e, "token id %d in the data is >= d_vocab %d: was it encoded with this tokenizer?",
                       tr->train.max_id > tr->val.max_id ? tr->train.max_id : tr->val.max_id, V);
    tr->T = o->seq_len ? o->seq_len : tr->m.cfg.n_ctx;
    tr->B = o->batch;
    if (tr->T > tr->m.cfg.n_ctx)
        return al_errf(e, "--seq-len %d exceeds n_ctx %d", tr->T, tr->m.cfg.n_ctx);
    if ((size_t)tr->T + 1 > tr->train.n || (size_t)tr->T + 1 > tr->val.n)
        return al_errf(e, "sequence length %d needs more tokens than the data has "
                       "(train %zu, validation %zu): lower --n-ctx/--seq-len or use more data",
                       tr->T, tr->train.n, tr->val.n);
    if (al_model_alloc_grads(&tr->m, e) != 0) return -1;
    if (al_adamw_init(&tr->adam, tr->m.n_params, e) != 0) return -1;
    tr->in = al_malloc((size_t)tr->B * tr->T, 2 * sizeof(int), e);
    if (!tr->in) return -1;
    tr->tg = tr->in + (size_t)tr->B * tr->T;
    return 0;
}

static int save(trainer *tr, al_err *e) {
    free(tr->st.train_json);
    tr->st.train_json = al_flags_to_json(tr->flags);
    if (!tr->st.train_json) return al_errf(e, "out of memory serialising options");
    if (al_ckpt_save(tr->dir, &tr->m, tr->tok, &tr->st, tr->adam.m, tr->adam.v, e) != 0)
        return -1;
    tr->last_ckpt_step = tr->st.step;
    return 0;
}

/* Mean validation loss; 1 (no loss) if a stop signal came meanwhile, so
 * that Ctrl-C is honoured within one batch even with --eval-batches in
 * the thousands. Evaluation touches neither weights nor RNG, so cutting
 * it short changes nothing a resume depends on. */
static int evaluate(trainer *tr, double *loss, al_err *e) {
    double s = 0;
    int nb = tr->o->eval_batches;
    for (int k = 0; k < nb; k++) {
        if (g_stop) return 1;
        if (al_batch_fixed(&tr->val, tr->B, tr->T, k, nb, tr->in, tr->tg, e) != 0 ||
            al_model_forward(&tr->m, tr->in, tr->tg, tr->B, tr->T, e) != 0)
            return -1;
        s += tr->m.mean_loss;
    }
    *loss = s / nb;
    return 0;
}

static void fmt_eta(char *buf, size_t cap, double s) {
    if (s < 0 || !isfinite(s)) s = 0;
    long t = (long)s;
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, cap, "%lds", t);
}

static int step_once(trainer *tr, double *loss, double *norm, al_err *e) {
    long step = tr->st.step;
    if (al_batch_random(&tr->train, tr->B, tr->T, &tr->st.rng, tr->in, tr->tg, e) != 0 ||
        al_model_forward(&tr->m, tr->in, tr->tg, tr->B, tr->T, e) != 0)
        return -1;
    *loss = tr->m.mean_loss;
    if (!isfinite(*loss)) return 1;
    if (al_model_backward(&tr->m, e) != 0) return -1;
    double lr = al_lr_at(&tr->oc, step);
    /* The norm is checked before it can touch the weights, so a blow-up
     * leaves the parameters (and the last checkpoint) as they were. */
    *norm = al_grad_norm(&tr->m);
    if (!isfinite(*norm)) return 1;
    al_adamw_step(&tr->adam, &tr->m, &tr->oc, step + 1, lr);
    tr->st.step = step + 1;
    tr->st.tokens_seen += (double)tr->B * tr->T;
    tr->st.last_train_loss = *loss;
    return 0;
}

static int loop(trainer *tr, int *interrupted, al_err *e) {
    al_train_opts *o = tr->o;
    al_progress pr;
    al_progress_init(&pr, 10.0);
    long start = tr->st.step;
    double t0 = al_now();
    while (tr->st.step < o->steps) {
        double loss = 0, norm = 0;
        int rc = step_once(tr, &loss, &norm, e);
        if (rc < 0) return -1;
        if (rc > 0) {
            al_progress_done(&pr);
            return al_errf(e, "non-finite %s at step %ld (loss %g, lr %.3g): training stopped; "
                           "the last good checkpoint (step %ld) is in %s",
                           isfinite(loss) ? "gradient" : "loss", tr->st.step + 1, loss,
                           al_lr_at(&tr->oc, tr->st.step), tr->last_ckpt_step, tr->dir);
        }
        long done = tr->st.step - start;
        double el = al_now() - t0, tps = (double)done * tr->B * tr->T / (el > 0 ? el : 1e-9);
        char eta[32];
        fmt_eta(eta, sizeof eta, el / (double)done * (double)(o->steps - tr->st.step));
        al_progress_update(&pr, tr->st.step == o->steps, "step %ld/%d | loss %.4f | lr %.2e | norm %.2f | %.0f tok/s | ETA %s",
                           tr->st.step, o->steps, loss, al_lr_at(&tr->oc, tr->st.step - 1),
                           norm, tps, eta);
        int last = tr->st.step == o->steps;
        if ((o->eval_every && tr->st.step % o->eval_every == 0) || last) {
            double vl;
            int ev = evaluate(tr, &vl, e);
            if (ev < 0) return -1;
            tr->st.last_val_loss = NAN; /* unless the evaluation finishes */
            if (ev == 0) {
                tr->st.last_val_loss = vl;
                if (dynamics_record(tr, loss, vl, e) != 0) return -1;
                al_log("step %ld: train loss %.4f, val loss %.4f", tr->st.step, loss, vl);
            }
        }
        if ((o->ckpt_every && tr->st.step % o->ckpt_every == 0) || last) {
            if (save(tr, e) != 0) return -1;
        }
        if ((g_stop || (o->stop_at && tr->st.step == o->stop_at)) && !last) {
            al_progress_done(&pr);
            if (save(tr, e) != 0) return -1;
            al_log("stopped at step %ld; checkpoint saved in %s (continue with --resume %s)",
                   tr->st.step, tr->dir, tr->dir);
            *interrupted = 1;
            return 0;
        }
    }
    al_progress_done(&pr);
    return 0;
}

static int apply_json_file(al_flag *flags, const char *path, al_err *e) {
    unsigned char *txt;
    size_t n;
    if (al_read_file(path, &txt, &n, 1 << 24, e) != 0) return -1;
    int rc = al_flags_apply_json(flags, (const char *)txt, path, e);
    free(txt);
    return rc;
}

/* Precedence: command line > --config file > the resumed run's saved
 * options > defaults. (al_flags_apply_json marks what it sets as seen.) */
static int prepare(trainer *tr, al_flag *flags, al_err *e) {
    al_train_opts *o = tr->o;
    int out_on_cli = al_flag_seen(flags, "out");
    if (o->config && apply_json_file(flags, o->config, e) != 0) return -1;
    if (o->resume) {
        if (al_ckpt_recover(o->resume, e) != 0) return -1;
        char path[4096];
        unsigned char *txt;
        size_t n;
        if (al_path_join(path, sizeof path, o->resume, "state.json", e) != 0) return -1;
        if (al_read_file(path, &txt, &n, 1 << 24, e) != 0)
            return al_err_prefix(e, "cannot resume from %s", o->resume);
        int rc = al_state_from_json((const char *)txt, &tr->st, path, e);
        free(txt);
        if (rc != 0) return -1;
        if (tr->st.train_json &&
            al_flags_apply_json(flags, tr->st.train_json, path, e) != 0)
            return -1;
        if (!out_on_cli) o->out = o->resume; /* the directory may have moved */
    }
    return check_opts(o, e);
}

int al_train_run(al_train_opts *o, al_flag *flags, int *interrupted, al_err *e) {
    trainer tr;
    memset(&tr, 0, sizeof tr);
    tr.o = o;
    tr.flags = flags;
    *interrupted = 0;
    int rc = -1;
    if (prepare(&tr, flags, e) != 0) goto done;
    al_set_threads(o->threads);
    tr.dir = o->out;
    if (!o->resume && !o->force) {
        char p[4096];
        if (al_path_join(p, sizeof p, o->out, "model.safetensors", e) != 0) goto done;
        if (al_file_exists(p)) {
            al_errf(e, "%s already holds a checkpoint: use --resume %s to continue it or --force to overwrite",
                    o->out, o->out);
            goto done;
        }
    }
    if (load_data(&tr, e) != 0 || setup_model(&tr, e) != 0) goto done;
    if (al_mkdir_p(tr.dir, e) != 0) goto done;
    tr.oc = (al_optim_cfg){.lr = o->lr, .min_lr_frac = o->min_lr_frac, .warmup = o->warmup,
                           .total_steps = o->steps, .beta1 = o->beta1, .beta2 = o->beta2,
                           .eps = o->eps, .weight_decay = o->weight_decay,
                           .grad_clip = o->grad_clip};
    if (o->resume) {
        al_train_state st2;
        memset(&st2, 0, sizeof st2);
        if (al_ckpt_load_state(o->resume, &st2, tr.adam.m, tr.adam.v, tr.adam.n, e) != 0) goto done;
        al_state_free(&tr.st);
        tr.st = st2;
        if (!o->db) { /* this sitting logs no curve: later checkpoints name none */
            free(tr.st.curve_db);
            tr.st.curve_db = NULL;
            tr.st.curve_run = 0;
        }
        tr.last_ckpt_step = tr.st.step;
        al_log("resuming %s at step %ld of %d", o->resume, tr.st.step, o->steps);
    } else {
        al_rng_seed(&tr.st.rng, o->seed ^ 0x5eed0da7aULL);
        if (save(&tr, e) != 0) goto done; /* step 0: there is always a checkpoint */
    }
    al_log("model: %d layers, d_model %d, %d heads x %d, n_ctx %d, d_vocab %d, %zu params; "
           "%zu train / %zu val tokens; batch %dx%d; %d threads",
           tr.m.cfg.n_layers, tr.m.cfg.d_model, tr.m.cfg.n_heads, tr.m.cfg.d_head,
           tr.m.cfg.n_ctx, tr.m.cfg.d_vocab, tr.m.n_params, tr.train.n, tr.val.n, tr.B,
           tr.T, al_get_threads());
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    g_stop = 0;
    tr.t_start = al_now();
    if (dynamics_open(&tr, e) != 0) goto restore;
    /* The curve starts with an evaluation at step 0; a run resumed from
     * step 0 repeats it, and one resumed where an interrupt cut an
     * evaluation short (val loss NaN) repeats that one. Evaluation draws
     * no random numbers, so the run stays exact. If this evaluation is
     * itself interrupted, stop before training: the checkpoint on disk is
     * this very state, so the next resume repeats it. */
    if (tr.db && (!o->resume || tr.st.step == 0 || isnan(tr.st.last_val_loss))) {
        double vl;
        int ev = evaluate(&tr, &vl, e);
        double tl = tr.st.step > 0 ? tr.st.last_train_loss : NAN;
        if (ev < 0 || (ev == 0 && dynamics_record(&tr, tl, vl, e) != 0)) goto restore;
        if (ev == 0 && o->resume) tr.st.last_val_loss = vl;
        if (ev > 0) {
            al_log("stopped before training; checkpoint in %s (continue with --resume %s)",
                   tr.dir, tr.dir);
            *interrupted = 1;
            rc = 0;
            goto restore;
        }
    }
    rc = loop(&tr, interrupted, e);
restore:
    /* e is set only when rc != 0 */
    dynamics_close(&tr, rc != 0 ? e->msg : *interrupted ? "interrupted (continue with --resume)"
                                                        : NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (rc == 0 && !*interrupted)
        al_log("done: %ld steps, val loss %.4f; model in %s", tr.st.step, tr.st.last_val_loss, tr.dir);
done:
    free(tr.in);
    al_adamw_free(&tr.adam);
    al_tokens_free(&tr.train);
    al_tokens_free(&tr.val);
    al_tok_free(tr.tok);
    al_state_free(&tr.st);
    al_model_free(&tr.m);
    return rc;
}
