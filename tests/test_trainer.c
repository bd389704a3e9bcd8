/* test_trainer.c -- the trainer API (train.h) called directly, without
 * the binary: what the observer sees, stop requests and exact resume,
 * an observer's error, refused options. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/data.h"
#include "attnlab/train.h"
#include "test.h"

/* A tiny model on a phrase corpus: a run of 20 steps takes well under a
 * second. */
static al_train_opts tiny_opts(const char *data, const char *out) {
    al_train_opts o = al_train_opts_defaults();
    o.data = data;
    o.out = out;
    o.n_layers = 1, o.d_model = 16, o.n_heads = 2, o.d_head = 8, o.n_ctx = 16;
    o.steps = 20, o.batch = 4, o.lr = 1e-2, o.warmup = 2;
    o.eval_every = 5, o.eval_batches = 2, o.ckpt_every = 0, o.threads = 1;
    o.opts_json = "{\"test\": \"tiny\"}";
    return o;
}

/* What an observer saw. */
typedef struct seen {
    int n_start, n_eval, n_ckpt, n_end, end_status;
    long eval_step[16], ckpt_step[16];
    al_train_eval ev[16];
    char end_msg[1024];
    long stop_at_eval; /* request a stop at this eval step (0: never) */
    long fail_at_eval; /* fail at this eval step (0: never) */
    volatile sig_atomic_t *stop;
} seen;

static int obs_start(void *ctx, al_trainer *t, al_err *e) {
    seen *s = ctx;
    (void)e;
    s->n_start++;
    al_train_state *st = al_trainer_state(t);
    free(st->curve_db);
    st->curve_db = strdup("/nowhere/test.db");
    st->curve_run = 42;
    return 0;
}

static int obs_eval(void *ctx, al_trainer *t, const al_train_eval *ev, al_err *e) {
    seen *s = ctx;
    CHECK(al_trainer_model(t)->n_params > 0);
    if (s->n_eval < 16) {
        s->eval_step[s->n_eval] = ev->step;
        s->ev[s->n_eval] = *ev;
    }
    s->n_eval++;
    if (s->stop_at_eval && ev->step == s->stop_at_eval) *s->stop = 1;
    if (s->fail_at_eval && ev->step == s->fail_at_eval)
        return al_errf(e, "observer refuses step %ld", ev->step);
    return 0;
}

static int obs_ckpt(void *ctx, al_trainer *t, al_err *e) {
    seen *s = ctx;
    (void)e;
    if (s->n_ckpt < 16) s->ckpt_step[s->n_ckpt] = al_trainer_state(t)->step;
    s->n_ckpt++;
    return 0;
}

static void obs_end(void *ctx, al_trainer *t, int status, const al_err *err) {
    seen *s = ctx;
    (void)t;
    s->n_end++;
    s->end_status = status;
    snprintf(s->end_msg, sizeof s->end_msg, "%s", err ? err->msg : "");
}

static al_train_observer observer(seen *s) {
    return (al_train_observer){s, obs_start, obs_eval, obs_ckpt, obs_end};
}

static long saved_step(const char *dir) {
    al_train_state st;
    if (al_ckpt_read_state(dir, &st, NULL) != 0) return -1;
    long step = st.step;
    al_state_free(&st);
    return step;
}

TEST(trainer_run_observed) {
    char data[1024], out[1024];
    snprintf(data, sizeof data, "%s", t_path("c.bin"));
    snprintf(out, sizeof out, "%s", t_path("m"));
    t_phrase_corpus(data, 6000);
    al_train_opts o = tiny_opts(data, out);
    seen s = {0};
    al_train_observer obs = observer(&s);
    al_trainer *t;
    al_err e;
    CHECK_OK(al_trainer_init(&t, &o, &obs, &e), &e);
    CHECK(saved_step(out) == 0); /* init saves step 0 */
    CHECK(s.n_start == 0 && s.n_ckpt == 0);
    int stopped = -1;
    CHECK_OK(al_trainer_run(t, &stopped, &e), &e);
    CHECK(stopped == 0);
    CHECK(s.n_start == 1 && s.n_end == 1 && s.end_status == 0);
    /* with on_eval the curve starts at step 0 */
    CHECKF(s.n_eval == 5, "%d evaluations", s.n_eval);
    for (int i = 0; i < 5 && i < s.n_eval; i++) {
        CHECK(s.eval_step[i] == 5 * i);
        CHECK(s.ev[i].tokens == 5.0 * i * 4 * 16);
        CHECK(isfinite(s.ev[i].val_loss) && s.ev[i].lr > 0 && s.ev[i].seconds >= 0);
        CHECK(i == 0 ? isnan(s.ev[i].train_loss) : isfinite(s.ev[i].train_loss));
    }
    if (s.n_eval == 5)
        CHECKF(s.ev[4].val_loss < s.ev[0].val_loss - 0.5, "val loss %g -> %g", s.ev[0].val_loss,
               s.ev[4].val_loss);
    /* ckpt_every 0: one checkpoint, at the end */
    CHECK(s.n_ckpt == 1 && s.ckpt_step[0] == 20);
    CHECK(al_trainer_state(t)->step == 20 && al_trainer_seq_len(t) == 16);
    CHECK(strcmp(al_trainer_dir(t), out) == 0);
    al_trainer_free(t);
    /* the checkpoint holds the options verbatim and the observer's curve */
    al_train_state st;
    CHECK_OK(al_ckpt_read_state(out, &st, &e), &e);
    CHECK(st.step == 20 && st.curve_run == 42 && st.curve_db &&
          strcmp(st.curve_db, "/nowhere/test.db") == 0);
    CHECKF(st.train_json && strstr(st.train_json, "tiny"), "%s",
           st.train_json ? st.train_json : "");
    al_state_free(&st);
}

/* A stop requested from on_eval saves and stops; a trainer resuming that
 * checkpoint ends with exactly the weights of an uninterrupted run. */
TEST(trainer_stop_then_resume_is_exact) {
    char data[1024], full[1024], half[1024];
    snprintf(data, sizeof data, "%s", t_path("c.bin"));
    snprintf(full, sizeof full, "%s", t_path("full"));
    snprintf(half, sizeof half, "%s", t_path("half"));
    t_phrase_corpus(data, 6000);
    al_err e;
    al_trainer *t;
    int stopped;
    /* uninterrupted, no observer */
    al_train_opts o = tiny_opts(data, full);
    o.steps = 16, o.eval_every = 4;
    CHECK_OK(al_trainer_init(&t, &o, NULL, &e), &e);
    CHECK_OK(al_trainer_run(t, &stopped, &e), &e);
    CHECK(stopped == 0);
    size_t n = al_trainer_model(t)->n_params;
    float *want = malloc(n * sizeof(float));
    memcpy(want, al_trainer_model(t)->params, n * sizeof(float));
    al_trainer_free(t);
    /* stopped at the step-8 evaluation */
    volatile sig_atomic_t stop = 0;
    seen s = {.stop_at_eval = 8, .stop = &stop};
    al_train_observer obs = observer(&s);
    o.out = half;
    o.stop = &stop;
    CHECK_OK(al_trainer_init(&t, &o, &obs, &e), &e);
    CHECK_OK(al_trainer_run(t, &stopped, &e), &e);
    CHECK(stopped == 1 && s.end_status == 1);
    CHECK(s.n_ckpt == 1 && s.ckpt_step[0] == 8);
    al_trainer_free(t);
    CHECK(saved_step(half) == 8);
    /* resumed with the same options (the trainer does not read them back:
     * that is the CLI's business) */
    stop = 0;
    o.resume = half;
    CHECK_OK(al_trainer_init(&t, &o, NULL, &e), &e);
    CHECK(al_trainer_state(t)->step == 8);
    CHECK(al_trainer_state(t)->curve_run == 0 && !al_trainer_state(t)->curve_db); /* no recorder */
    CHECK_OK(al_trainer_run(t, &stopped, &e), &e);
    CHECK(stopped == 0 && al_trainer_state(t)->step == 16);
    CHECK(al_trainer_model(t)->n_params == n);
    CHECK(memcmp(al_trainer_model(t)->params, want, n * sizeof(float)) == 0);
    al_trainer_free(t);
    CHECK(t_sh("cmp -s %s/model.safetensors %s/model.safetensors && "
               "cmp -s %s/optim.safetensors %s/optim.safetensors",
               full, half, full, half) == 0);
    free(want);
}

/* An observer's error stops training with that error; the last periodic
 * checkpoint stays as it was. */
TEST(trainer_observer_error_stops) {
    char data[1024], out[1024];
    snprintf(data, sizeof data, "%s", t_path("c.bin"));
    snprintf(out, sizeof out, "%s", t_path("m"));
    t_phrase_corpus(data, 6000);
    al_train_opts o = tiny_opts(data, out);
    o.ckpt_every = 5;
    seen s = {.fail_at_eval = 10};
    al_train_observer obs = observer(&s);
    al_trainer *t;
    al_err e;
    CHECK_OK(al_trainer_init(&t, &o, &obs, &e), &e);
    int stopped;
    CHECK(al_trainer_run(t, &stopped, &e) == -1);
    CHECKF(strcmp(e.msg, "observer refuses step 10") == 0, "%s", e.msg);
    CHECK(s.n_end == 1 && s.end_status == -1 && strcmp(s.end_msg, e.msg) == 0);
    al_trainer_free(t);
    CHECK(saved_step(out) == 5); /* the evaluation at 10 comes before its checkpoint */
}

/* Step, evaluate and save one at a time; a stop request cuts an
 * evaluation short. */
TEST(trainer_step_evaluate_save) {
    char data[1024], out[1024];
    snprintf(data, sizeof data, "%s", t_path("c.bin"));
    snprintf(out, sizeof out, "%s", t_path("m"));
    t_phrase_corpus(data, 6000);
    volatile sig_atomic_t stop = 0;
    al_train_opts o = tiny_opts(data, out);
    o.stop = &stop;
    al_trainer *t;
    al_err e;
    CHECK_OK(al_trainer_init(&t, &o, NULL, &e), &e);
    double loss = 0, norm = 0, v0 = 0, v1 = 0;
    CHECK_OK(al_trainer_evaluate(t, &v0, NULL, &e), &e);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(al_trainer_step(t, &loss, &norm, &e), &e);
        CHECK(isfinite(loss) && norm > 0);
    }
    CHECK(al_trainer_state(t)->step == 3);
    double se = NAN, v2 = 0;
    CHECK_OK(al_trainer_evaluate(t, &v1, NULL, &e), &e);
    CHECK_OK(al_trainer_evaluate(t, &v2, &se, &e), &e);
    CHECK(isfinite(v0) && isfinite(v1) && v1 != v0 && v2 == v1);
    /* the standard error by hand: the same validation windows (the file's
     * last 5%, al_batch_fixed's batches), each sequence's mean loss */
    al_tokens tr, va;
    CHECK_OK(al_tokens_load(data, &tr, &e), &e);
    CHECK_OK(al_tokens_hold_out(&tr, o.val_fraction, data, &va, &e), &e);
    int B = o.batch, T = o.n_ctx, in[64], tg[64];
    double q[16], mean = 0, ss = 0;
    al_model *m = al_trainer_model(t);
    for (int k = 0; k < o.eval_batches; k++) {
        CHECK_OK(al_batch_fixed(&va, B, T, k, o.eval_batches, in, tg, &e), &e);
        CHECK_OK(al_model_forward(m, in, tg, B, T, &e), &e);
        for (int b = 0; b < B; b++) {
            double x = 0;
            for (int i = 0; i < T; i++) x += m->losses[b * T + i];
            q[k * B + b] = x / T, mean += x / T;
        }
    }
    int n = o.eval_batches * B;
    mean /= n;
    for (int i = 0; i < n; i++) ss += (q[i] - mean) * (q[i] - mean);
    double want = sqrt(ss / (n - 1) / n);
    CHECKF(fabs(mean - v1) < 1e-5 && fabs(se - want) < 1e-6 * (1 + want) && se > 0,
           "mean %g vs %g, se %g vs %g", mean, v1, se, want);
    al_tokens_free(&tr);
    al_tokens_free(&va);
    stop = 1;
    CHECK(al_trainer_evaluate(t, &v1, NULL, &e) == 1);
    CHECK_OK(al_trainer_save(t, &e), &e);
    al_trainer_free(t);
    CHECK(saved_step(out) == 3);
}

/* Invalid options: a clear error naming the option, *out NULL, and no
 * file or directory written. A checkpoint in out is not overwritten
 * without force. */
TEST(trainer_invalid_options) {
    char data[1024], out[1024], p[1100];
    snprintf(data, sizeof data, "%s", t_path("c.bin"));
    snprintf(out, sizeof out, "%s", t_path("m"));
    t_phrase_corpus(data, 6000);
    struct {
        const char *field, *want;
    } bad[] = {{"steps", "steps must be positive"},
               {"batch", "batch must be positive"},
               {"lr", "lr must be positive"},
               {"d_model", "n_heads x d_head must equal d_model"},
               {"data", "data is required"},
               {"eval_batches", "eval_batches > 0"},
               {"val_fraction", "val_fraction"},
               {"seq_len", "seq_len 17 exceeds n_ctx 16"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        al_train_opts o = tiny_opts(data, out);
        if (!strcmp(bad[i].field, "steps")) o.steps = 0;
        if (!strcmp(bad[i].field, "batch")) o.batch = -1;
        if (!strcmp(bad[i].field, "lr")) o.lr = 0;
        if (!strcmp(bad[i].field, "d_model")) o.d_model = 30;
        if (!strcmp(bad[i].field, "data")) o.data = NULL;
        if (!strcmp(bad[i].field, "eval_batches")) o.eval_batches = 0;
        if (!strcmp(bad[i].field, "val_fraction")) o.val_fraction = 1;
        if (!strcmp(bad[i].field, "seq_len")) o.seq_len = 17;
        static char not_null;
        al_trainer *t = (al_trainer *)(void *)&not_null; /* must come back NULL */
        al_err e = {{0}};
        CHECK(al_trainer_init(&t, &o, NULL, &e) == -1);
        CHECK(t == NULL);
        CHECKF(strstr(e.msg, bad[i].want) && !strchr(e.msg, '\n'), "%s: '%s'", bad[i].field, e.msg);
        CHECKF(!al_file_exists(out), "%s: %s was created", bad[i].field, out);
    }
    /* a checkpoint already there */
    al_train_opts o = tiny_opts(data, out);
    o.steps = 2;
    al_trainer *t;
    al_err e;
    CHECK_OK(al_trainer_init(&t, &o, NULL, &e), &e);
    al_trainer_free(t);
    snprintf(p, sizeof p, "%s/model.safetensors", out);
    CHECK(t_sh("cp %s %s.keep", p, p) == 0);
    o.seed = 99;
    CHECK(al_trainer_init(&t, &o, NULL, &e) == -1 && t == NULL);
    CHECKF(strstr(e.msg, "already holds a checkpoint"), "%s", e.msg);
    CHECK(t_sh("cmp -s %s %s.keep", p, p) == 0);
    o.force = 1;
    CHECK_OK(al_trainer_init(&t, &o, NULL, &e), &e);
    al_trainer_free(t);
}
