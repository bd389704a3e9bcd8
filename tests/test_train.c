/* test_train.c -- optimizer, overfitting, and `attnlab train`/`run` end to
 * end: determinism, exact resume, non-finite stop, bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/optim.h"
#include "test.h"

TEST(train_lr_schedule) {
    al_optim_cfg c = {.lr = 1.0, .min_lr_frac = 0.1, .warmup = 10, .total_steps = 110};
    CHECK_NEAR(al_lr_at(&c, 0), 0.1, 1e-12);
    CHECK_NEAR(al_lr_at(&c, 9), 1.0, 1e-12);
    CHECK_NEAR(al_lr_at(&c, 10), 1.0, 1e-12);
    CHECK_NEAR(al_lr_at(&c, 60), 0.55, 1e-12); /* half way: (1 + 0.1) / 2 */
    CHECK_NEAR(al_lr_at(&c, 110), 0.1, 1e-12);
    CHECK_NEAR(al_lr_at(&c, 500), 0.1, 1e-12);
}

/* One AdamW step by hand: the first step moves every weight by lr·sign(g)
 * (m̂ = g, v̂ = g²) plus decay, except embeddings which get no decay. */
TEST(train_adamw_first_step_closed_form) {
    al_config c = {.n_layers = 1,
                   .d_model = 4,
                   .n_heads = 1,
                   .d_head = 4,
                   .n_ctx = 4,
                   .d_vocab = 5,
                   .seed = 3};
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    CHECK_OK(al_model_alloc_grads(&m, &e), &e);
    float *w0 = malloc(sizeof(float) * m.n_params);
    memcpy(w0, m.params, sizeof(float) * m.n_params);
    for (size_t i = 0; i < m.n_params; i++) m.grads[i] = (i % 3 == 0) ? 0.5f : -0.25f;
    al_adamw o;
    CHECK_OK(al_adamw_init(&o, m.n_params, &e), &e);
    al_optim_cfg oc =
        {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .grad_clip = 0};
    al_adamw_step(&o, &m, &oc, 1, 0.01);
    size_t n_emb = m.param_size[AL_P_WE] + m.param_size[AL_P_WPOS];
    for (size_t i = 0; i < m.n_params; i++) {
        double g = (i % 3 == 0) ? 0.5 : -0.25;
        double want = w0[i] - 0.01 * (g / (fabs(g) + 1e-8) + (i >= n_emb ? 0.1 * w0[i] : 0));
        CHECK_NEAR(m.params[i], want, 1e-6);
    }
    /* clipping: norm of this gradient, then scaled */
    double nrm = al_grad_norm(&m), s = 0;
    for (size_t i = 0; i < m.n_params; i++) s += (double)m.grads[i] * m.grads[i];
    CHECK_NEAR(nrm, sqrt(s), 1e-9 * sqrt(s));
    al_adamw_free(&o);
    free(w0);
    al_model_free(&m);
}

TEST(train_overfits_tiny_batch) {
    al_config c = {.n_layers = 2,
                   .d_model = 32,
                   .n_heads = 4,
                   .d_head = 8,
                   .n_ctx = 16,
                   .d_vocab = 20,
                   .seed = 5};
    al_model m;
    al_err e;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    int in[32], tg[32];
    al_rng r;
    al_rng_seed(&r, 9);
    for (int i = 0; i < 32; i++) {
        in[i] = (int)al_rng_below(&r, 20);
        tg[i] = (int)al_rng_below(&r, 20);
    }
    al_adamw o;
    CHECK_OK(al_adamw_init(&o, m.n_params, &e), &e);
    al_optim_cfg oc = {.lr = 1e-2,
                       .beta1 = 0.9,
                       .beta2 = 0.95,
                       .eps = 1e-8,
                       .weight_decay = 0.0,
                       .grad_clip = 1.0};
    /* best of the last 100 steps: once the loss is at its floor (2 ln 2 / 32
     * here: both rows start with the same token), Adam at lr 1e-2 has
     * occasional spikes, and where they fall depends on float rounding */
    float first = 0, last = 1e9f;
    for (int s = 0; s < 400; s++) {
        CHECK_OK(al_model_forward(&m, in, tg, 2, 16, &e), &e);
        if (s == 0) first = m.mean_loss;
        if (s >= 300 && m.mean_loss < last) last = m.mean_loss;
        CHECK_OK(al_model_backward(&m, &e), &e);
        al_adamw_step(&o, &m, &oc, s + 1, 1e-2);
    }
    CHECKF(first > 2.5 && last < 0.05, "loss %g -> %g, want < 0.05", first, last);
    al_adamw_free(&o);
    al_model_free(&m);
}

/* ------------------------------------------------------- CLI helpers */

#define SMALL                                                                                      \
    "--d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 --eval-every 5 "                     \
    "--eval-batches 2 --threads 2 --warmup 2"

static int files_equal(const char *a, const char *b) { return t_sh("cmp -s '%s' '%s'", a, b) == 0; }

TEST(train_cli_deterministic) {
    t_phrase_corpus(t_path("c.bin"), 20000);
    CHECK(t_sh("%s train --data %s --out %s --steps 12 " SMALL " 2>%s", t_bin(), t_path("c.bin"),
               t_path("a"), t_path("a.err")) == 0);
    CHECK(t_sh("%s train --data %s --out %s --steps 12 " SMALL " 2>/dev/null", t_bin(),
               t_path("c.bin"), t_path("b")) == 0);
    CHECK(files_equal(t_path("a/model.safetensors"), t_path("b/model.safetensors")));
    CHECK(files_equal(t_path("a/optim.safetensors"), t_path("b/optim.safetensors")));
    /* a different seed gives a different model */
    CHECK(t_sh("%s train --data %s --out %s --steps 12 --seed 2 " SMALL " 2>/dev/null", t_bin(),
               t_path("c.bin"), t_path("c")) == 0);
    CHECK(!files_equal(t_path("a/model.safetensors"), t_path("c/model.safetensors")));
    char *log = t_slurp(t_path("a.err"));
    CHECK(log && strstr(log, "val loss") && strstr(log, "tok/s"));
    free(log);
}

TEST(train_cli_resume_is_exact) {
    t_phrase_corpus(t_path("c.bin"), 20000);
    CHECK(t_sh("%s train --data %s --out %s --steps 16 --ckpt-every 100 " SMALL " 2>/dev/null",
               t_bin(), t_path("c.bin"), t_path("full")) == 0);
    /* the same run stopped after step 8 (as a Ctrl-C would), then resumed */
    CHECK(t_sh("%s train --data %s --out %s --steps 16 --ckpt-every 100 --stop-at 8 " SMALL
               " 2>/dev/null",
               t_bin(), t_path("c.bin"), t_path("half")) == 130);
    char *st = t_slurp(t_path("half/state.json"));
    CHECKF(st && strstr(st, "\"step\":\t8"), "%s", st ? st : "");
    free(st);
    CHECK(t_sh("%s train --resume %s 2>%s", t_bin(), t_path("half"), t_path("r.err")) == 0);
    CHECK(files_equal(t_path("full/model.safetensors"), t_path("half/model.safetensors")));
    CHECK(files_equal(t_path("full/optim.safetensors"), t_path("half/optim.safetensors")));
}

TEST(train_cli_nonfinite_stops) {
    t_phrase_corpus(t_path("c.bin"), 20000);
    int rc = t_sh("%s train --data %s --out %s --steps 200 --lr 1e6 --grad-clip 0 --warmup 0 "
                  "--ckpt-every 1000 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 "
                  "2>%s",
                  t_bin(), t_path("c.bin"), t_path("m"), t_path("err"));
    CHECK(rc == 1);
    char *err = t_slurp(t_path("err"));
    CHECKF(err && strstr(err, "non-finite") && strstr(err, "at step"), "stderr: %s",
           err ? err : "");
    free(err);
    /* the step-0 checkpoint is there and loads */
    CHECK(t_sh("%s run --model %s --prompt 'the cat' >/dev/null 2>&1", t_bin(), t_path("m")) == 0);
}

TEST(train_cli_bad_input) {
    t_phrase_corpus(t_path("c.bin"), 2000);
    const char *bad[] = {
        "--d-model 30 --n-heads 4 --d-head 8", /* 4x8 != 30 */
        "--n-ctx 4096", /* longer than the data */
        "--steps 0",
        "--batch -1",
        "--lr -1",
        "--lr 0",
        "--n-heads 0",
        "--warmup -3",
        "--eval-batches 0",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = t_sh("%s train --data %s --out %s --steps 2 %s 2>%s", t_bin(), t_path("c.bin"),
                      t_path("m"), bad[i], t_path("err"));
        char *err = t_slurp(t_path("err"));
        CHECKF(rc == 1 && err && strncmp(err, "attnlab: ", 9) == 0 && !strchr(err + 9, '\n') == 0,
               "%s: rc %d, stderr '%s'", bad[i], rc, err ? err : "");
        free(err);
    }
    /* missing and empty files, unknown flag (usage: 2) */
    CHECK(t_sh("%s train --data %s --out %s 2>/dev/null", t_bin(), t_path("none.bin"),
               t_path("m")) == 1);
    CHECK(t_sh(": > %s && %s train --data %s --out %s 2>/dev/null", t_path("e.bin"), t_bin(),
               t_path("e.bin"), t_path("m")) == 1);
    CHECK(t_sh("%s train --data %s --bogus 1 2>/dev/null", t_bin(), t_path("c.bin")) == 2);
    /* token ids >= d_vocab: ids up to 300 with the byte tokenizer (257) */
    int ids[400];
    for (int i = 0; i < 400; i++) ids[i] = i % 301;
    al_err e;
    CHECK_OK(al_tokens_save(t_path("big.bin"), ids, 400, &e), &e);
    CHECK(t_sh("%s train --data %s --out %s --n-ctx 16 2>%s", t_bin(), t_path("big.bin"),
               t_path("m"), t_path("err")) == 1);
    char *err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "d_vocab"));
    free(err);
    /* JSON config: unknown key and wrong type name the key */
    FILE *f = fopen(t_path("cfg.json"), "w");
    fputs("{\"steps\": 3, \"learning_rate\": 0.1}", f);
    fclose(f);
    CHECK(t_sh("%s train --data %s --config %s 2>%s", t_bin(), t_path("c.bin"), t_path("cfg.json"),
               t_path("err")) == 1);
    err = t_slurp(t_path("err"));
    CHECKF(err && strstr(err, "learning_rate"), "%s", err ? err : "");
    free(err);
    f = fopen(t_path("cfg.json"), "w");
    fputs("{\"steps\": \"many\"}", f);
    fclose(f);
    CHECK(t_sh("%s train --data %s --config %s 2>%s", t_bin(), t_path("c.bin"), t_path("cfg.json"),
               t_path("err")) != 0);
    err = t_slurp(t_path("err"));
    CHECKF(err && strstr(err, "steps"), "%s", err ? err : "");
    free(err);
}

TEST(train_cli_refuses_overwrite) {
    t_phrase_corpus(t_path("c.bin"), 20000);
    CHECK(t_sh("%s train --data %s --out %s --steps 2 " SMALL " 2>/dev/null", t_bin(),
               t_path("c.bin"), t_path("m")) == 0);
    CHECK(t_sh("%s train --data %s --out %s --steps 2 " SMALL " 2>/dev/null", t_bin(),
               t_path("c.bin"), t_path("m")) == 1);
    CHECK(t_sh("%s train --data %s --out %s --steps 2 --force " SMALL " 2>/dev/null", t_bin(),
               t_path("c.bin"), t_path("m")) == 0);
}

TEST(train_cli_config_file_and_run_table) {
    t_phrase_corpus(t_path("c.bin"), 20000);
    FILE *f = fopen(t_path("cfg.json"), "w");
    fprintf(f,
            "{\"data\": \"%s\", \"out\": \"%s\", \"steps\": 60, \"d_model\": 32, "
            "\"n_heads\": 4, \"d_head\": 8, \"n_ctx\": 32, \"batch\": 8, \"lr\": 0.01, "
            "\"eval-every\": 30, \"warmup\": 5}",
            t_path("c.bin"), t_path("m"));
    fclose(f);
    CHECK(t_sh("%s train --config %s 2>/dev/null", t_bin(), t_path("cfg.json")) == 0);
    char *cfg = t_slurp(t_path("m/config.json"));
    CHECK(cfg && strstr(cfg, "\"d_model\"") && strstr(cfg, "32"));
    free(cfg);
    CHECK(t_sh("%s run --model %s --prompt 'the cat sat on the m' > %s", t_bin(), t_path("m"),
               t_path("out")) == 0);
    char *out = t_slurp(t_path("out"));
    CHECKF(out && strstr(out, "p(token)") && strstr(out, "␣"), "%s", out ? out : "");
    /* the model has learned the phrase: after "the m" comes "a" with high p */
    free(out);
    CHECK(t_sh("%s run --model %s --prompt 'the cat sat on the m' --json --generate 5 > %s",
               t_bin(), t_path("m"), t_path("j")) == 0);
    char *j = t_slurp(t_path("j"));
    CHECK(j && strstr(j, "\"tokens\"") && strstr(j, "\"generated\"") && strstr(j, "\"top\""));
    free(j);
    /* same seed, same sample */
    CHECK(t_sh("%s run --model %s --prompt 'the' --generate 20 --seed 4 > %s && "
               "%s run --model %s --prompt 'the' --generate 20 --seed 4 > %s",
               t_bin(), t_path("m"), t_path("g1"), t_bin(), t_path("m"), t_path("g2")) == 0);
    CHECK(files_equal(t_path("g1"), t_path("g2")));
}

/* A model trained in two sittings has one curve from step 0: the resumed
 * run copies the rows of the run its checkpoint names, redoes an
 * evaluation the interrupt cut short (with the train loss it had), and
 * copies nothing when the checkpoint was since replaced by a run without
 * a database. */
TEST(train_cli_resume_carries_curve) {
    char c[1024], m[1024], db[1024], q[2048];
    snprintf(c, sizeof c, "%s", t_path("c.bin"));
    snprintf(m, sizeof m, "%s", t_path("m"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    t_phrase_corpus(c, 20000);
    CHECK(t_sh("%s train --data %s --out %s --steps 30 --stop-at 20 --db %s " SMALL " 2>/dev/null",
               t_bin(), c, m, db) == 130);
    /* run 1: steps 0, 5, ..., 20, named by the step-20 checkpoint */
    CHECK_SQL(db, "SELECT group_concat(step) FROM train_log WHERE run_id = 1", "0,5,10,15,20");
    /* every evaluation with its standard errors, well under the values */
    CHECK_SQL(db,
              "SELECT count(*) FROM train_log WHERE run_id = 1 AND val_loss_se > 0 AND "
              "val_loss_se < 0.2 * val_loss AND icl_gain_se > 0",
              "5");
    snprintf(q, sizeof q, "%s/state.json", m);
    char *st = t_slurp(q);
    CHECKF(st && strstr(st, "\"curve\"") && strstr(st, "\"run_id\":\t1"), "%s", st ? st : "");
    free(st);
    CHECK_SQL(db, "SELECT count(*) FROM models", "0"); /* no model row for a stopped run */
    char *row20 =
        t_sql(db, "SELECT train_loss, val_loss FROM train_log WHERE run_id = 1 AND step = 20");
    /* as if the interrupt had cut the step-20 evaluation short */
    CHECK(t_sh("sed -i 's/\"last_val_loss\":[^,]*/\"last_val_loss\": null/' %s/state.json && "
               "sqlite3 %s 'DELETE FROM train_log WHERE run_id = 1 AND step = 20'",
               m, db) == 0);
    CHECK(t_sh("%s train --resume %s 2>%s", t_bin(), m, t_path("r.err")) == 0);
    char *err = t_slurp(t_path("r.err"));
    CHECKF(err && strstr(err, "training curve up to step 20 carried over from run 1"), "%s",
           err ? err : "");
    free(err);
    CHECK_SQL(db, "SELECT group_concat(step) FROM train_log WHERE run_id = 2",
              "0,5,10,15,20,25,30");
    snprintf(q, sizeof q,
             "SELECT train_loss, val_loss FROM train_log WHERE run_id = 2 AND step = 20");
    /* the carried rows keep their standard errors */
    CHECK_SQL(db,
              "SELECT count(*) FROM train_log a JOIN train_log b ON b.run_id = 1 AND a.step = "
              "b.step AND a.val_loss_se = b.val_loss_se AND a.icl_gain_se = b.icl_gain_se WHERE "
              "a.run_id = 2 AND a.step <= 15",
              "4");
    CHECK_SQL(db, q, row20 ? row20 : "?");
    free(row20);
    CHECK_SQL(db,
              "SELECT count(*) FROM train_head_scores a JOIN train_head_scores b ON b.run_id = 1 "
              "AND a.step = b.step AND a.layer = b.layer AND a.head = b.head AND a.metric = "
              "b.metric AND a.value = b.value WHERE a.run_id = 2 AND a.step <= 15",
              "128");
    /* a fresh run replaced the checkpoint without --db: nothing to carry */
    CHECK(t_sh("%s train --data %s --out %s --steps 30 --stop-at 10 --force " SMALL " 2>/dev/null",
               t_bin(), c, m) == 130);
    CHECK(t_sh("%s train --resume %s --db %s 2>/dev/null", t_bin(), m, db) == 0);
    CHECK_SQL(db, "SELECT group_concat(step) FROM train_log WHERE run_id = 3", "15,20,25,30");
}

/* The size of the training data is kept with the model (state.json's
 * data_tokens, models.data_tokens), so the passes over it can be read
 * beside the tokens seen: here the train tokens the trainer announces
 * after its validation split, and tokens seen = steps x batch x T. */
TEST(train_cli_records_data_tokens) {
    char c[1024], m[1024], db[1024], q[2048];
    snprintf(c, sizeof c, "%s", t_path("c.bin"));
    snprintf(m, sizeof m, "%s", t_path("m"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    t_phrase_corpus(c, 20000);
    CHECK(t_sh("%s train --data %s --out %s --steps 20 --db %s " SMALL " 2>%s", t_bin(), c, m, db,
               t_path("err")) == 0);
    char *err = t_slurp(t_path("err"));
    const char *p = err ? strstr(err, "params; ") : NULL;
    long n_train = -1;
    CHECKF(p && sscanf(p, "params; %ld train", &n_train) == 1, "%s", err ? err : "");
    free(err);
    snprintf(q, sizeof q, "%s/state.json", m);
    char *st = t_slurp(q), want[64];
    snprintf(want, sizeof want, "\"data_tokens\":\t%ld", n_train);
    CHECKF(st && strstr(st, want), "state.json lacks [%s]: %s", want, st ? st : "");
    free(st);
    snprintf(want, sizeof want, "%ld", n_train);
    CHECK_SQL(db, "SELECT CAST(data_tokens AS INTEGER) FROM models", want);
    char *seen = t_sql(db, "SELECT trained_tokens FROM models");
    CHECKF(seen && atof(seen) > 0, "trained_tokens %s", seen ? seen : "(error)");
    free(seen);
}
