/* test_refusals.c -- "nothing touched, nothing half-made": commands whose
 * options cannot work are refused with one line on stderr and a non-zero
 * exit, and leave their folder and database byte for byte as they were
 * (no run row, no folder, no file). Also the memory budget's sizes
 * against what the engine really allocates, and the other refusals and
 * warnings that belong to the same rule (a partly trained SAE, a token
 * file shorter than a window, an experiment's stage values). */
#define _GNU_SOURCE /* malloc_usable_size, wait4 (proc.h) */
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/membudget.h"
#include "attnlab/model.h"
#include "attnlab/sae.h"
#include "attnlab/sae_io.h"
#include "attnlab/sae_train.h"
#include "attnlab/safetensors.h"
#include "attnlab/scores.h"
#include "attnlab/util.h"
#include "proc.h"
#include "test.h"

/* Every path and file under dir with its bytes' hash, into t_path(sig)
 * (outside dir): two calls around a command compare the whole folder. */
static char *tree_sig(const char *dir, const char *sig) {
    CHECK(t_sh("cd %s && { find . | LC_ALL=C sort; find . -type f | LC_ALL=C sort | "
               "xargs -r sha256sum; } > %s",
               dir, t_path(sig)) == 0);
    return t_slurp(t_path(sig));
}

/* A tiny 1-layer model in DIR/w/m1 with a database DIR/w/r.db that already
 * holds one run (so "byte-identical" covers an existing database). */
static t_pbuf work_dir(void) {
    t_pbuf w = t_pcopy("w");
    t_scored_model(w.s, 1, 2);
    return w;
}

/* Run `env attnlab cmd` (in dir w, stderr to t_path("e")), which must
 * exit with code rc, say one line holding want, and leave w exactly as it
 * was. env: variables for the command ("" for none). */
static void refused_untouched(const char *w, const char *env, const char *cmd, int rc,
                              const char *want) {
    char *before = tree_sig(w, "sig0");
    int got = t_sh("cd %s && %s %s %s > /dev/null 2> %s", w, env, t_abs_bin(), cmd, t_path("e"));
    CHECKF(got == rc, "%s: exit %d, want %d", cmd, got, rc);
    CHECKF(t_one_line(t_path("e"), want), "%s", cmd);
    char *after = tree_sig(w, "sig1");
    CHECKF(before && after && !strcmp(before, after), "%s changed the folder:\n%s\nvs\n%s", cmd,
           before ? before : "", after ? after : "");
    free(before);
    free(after);
}

/* ------------------------------------------------------ memory budget */

TEST(refusal_mem_limit_env) {
    char e_msg[1024];
    al_err e;
    setenv("ATTNLAB_MEM_LIMIT", "2G", 1);
    int env = 0;
    CHECK(al_mem_limit(&env) == 2e9 && env == 1);
    CHECK(al_mem_check(1.9e9, "x", "y", "z", &e) == 0);
    CHECK(al_mem_check(2.1e9, "sae train", "--batch 9", "lower --batch", &e) == -1);
    snprintf(e_msg, sizeof e_msg, "%s", e.msg);
    CHECKF(!strcmp(e_msg, "sae train would allocate 2.1 GB for --batch 9 (limit: 2.0 GB, "
                          "ATTNLAB_MEM_LIMIT); lower --batch"),
           "%s", e_msg);
    CHECK(al_mem_check(NAN, "x", "y", "z", &e) == -1);
    setenv("ATTNLAB_MEM_LIMIT", "512k", 1);
    CHECK(al_mem_limit(NULL) == 512e3);
    setenv("ATTNLAB_MEM_LIMIT", "lots", 1); /* unparsable: the machine's */
    CHECK(al_mem_limit(&env) == 0.8 * al_mem_total() && env == 0);
    unsetenv("ATTNLAB_MEM_LIMIT");
    CHECK(al_mem_limit(NULL) == 0.8 * al_mem_total());
}

/* The sizes computed from a config alone against the engine's own
 * allocations (what malloc handed out: at least what was asked for, and
 * the slack of each block is a few words). */
TEST(refusal_mem_sizes_match_engine) {
    al_err e;
    for (int k = 0; k < 4; k++) {
        al_config c = al_config_default();
        c.n_layers = 1 + k % 3, c.d_model = 16, c.n_heads = 2, c.d_head = 8, c.n_ctx = 12;
        c.d_vocab = 37 + k, c.tied_embeddings = k == 1, c.seed = 3;
        if (k >= 2) c.norm_type = AL_NORM_LN, c.biases = k == 3 ? AL_BIAS_ALL : AL_BIAS_Q;
        al_model m;
        CHECK_OK(al_model_init(&m, &c, &e), &e);
        CHECKF(al_model_param_floats(&c) == (double)m.n_params, "config %d: %.0f vs %zu", k,
               al_model_param_floats(&c), m.n_params);
        const int B = 3 + k, T = 5 + k;
        int in[64] = {0}, tg[64] = {0};
        for (int i = 0; i < B * T; i++) in[i] = tg[i] = i % c.d_vocab;
        CHECK_OK(al_model_forward(&m, in, tg, B, T, &e), &e);
        double got = (double)malloc_usable_size(m.acts) + (double)malloc_usable_size(m.inputs);
        double want = al_model_acts_bytes(&c, B, T);
        CHECKF(got >= want && got - want < 64, "config %d: activations %.0f bytes, computed %.0f",
               k, got, want);
        al_model_free(&m);
    }
    for (int arch = 0; arch < 2; arch++) {
        al_sae_cfg c = al_sae_cfg_default(16, 96);
        c.arch = arch;
        al_sae s;
        CHECK_OK(al_sae_init(&s, &c, 1, &e), &e);
        const int B = 40;
        float x[40 * 16];
        for (int i = 0; i < B * 16; i++) x[i] = sinf((float)i);
        CHECK_OK(al_sae_forward(&s, x, B, &e), &e);
        CHECK_OK(al_sae_backward(&s, &e), &e);
        double got = (double)malloc_usable_size(s.params) + (double)malloc_usable_size(s.since) +
                     (double)malloc_usable_size(s.xin) + (double)malloc_usable_size(s.scratch);
        double want = al_sae_bytes(&c, B);
        /* want also counts the forward's heaps, freed again; the aux part of
         * the backward's scratch only when latents are dead; 64 bytes of
         * slack a block */
        CHECKF(got <= want + 4 * 64 && got > 0.6 * want, "arch %d: %.0f bytes, computed %.0f", arch,
               got, want);
        al_sae_free(&s);
    }
}

/* sae train with a dictionary and batch this machine cannot hold: refused
 * before the run row and before the SAE folder exists (it used to leave
 * an untrained SAE and a failed run). */
TEST(refusal_mem_sae_train) {
    t_pbuf w = work_dir();
    /* a budget of its own, so that a machine with that much memory still
     * refuses (about 37 GB here) */
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=16G",
                      "sae train --model m1 --layer 0 --data s.train.bin --db r.db --out sae "
                      "--expansion 1024 --batch 262144 --threads 2",
                      1, "sae train would allocate");
    CHECK(t_one_line(t_path("e"), "for --batch 262144 x --expansion 1024"));
    CHECK(t_one_line(t_path("e"), "; lower --batch or --expansion"));
    /* the budget is the environment's when set, and a database the run
     * would have made is not left behind either */
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=100k",
                      "sae train --model m1 --layer 0 --data s.train.bin --db new.db --out sae "
                      "--steps 2 --threads 2",
                      1, "(limit: 100.0 kB, ATTNLAB_MEM_LIMIT)");
}

/* discover --strict on a model whose task warns: one line, and no --out
 * folder, no run (the folder is made only when the circuit is stored). */
TEST(refusal_discover_strict_no_out) {
    t_pbuf w = work_dir();
    refused_untouched(w.s, "",
                      "discover --model m1 --db r.db --probe-r 5 --n 4 --out circ --strict "
                      "--threads 2",
                      1, "refused under --strict (nothing stored): ");
}

/* train: four copies of the parameters and a batch's activations. */
TEST(refusal_mem_train) {
    t_pbuf w = work_dir();
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=1G",
                      "train --data s.train.bin --tokenizer tok.json --out big --steps 2 "
                      "--n-layers 1 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 100000 "
                      "--threads 2",
                      1, "train would allocate");
    CHECK(t_one_line(t_path("e"), "for --batch 100000 x 32-token sequences"));
}

/* scores and ablate: a batch of windows, the probe; patching: five copies
 * of a batch's activations; run --save-cache: the forward and the cache. */
TEST(refusal_mem_analyses) {
    t_pbuf w = work_dir();
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=20M",
                      "scores --model m1 --db r.db --data s.val.bin --probe-r 5 --batch 2000 "
                      "--batches 1 --threads 2",
                      1, "scores would allocate");
    CHECK(t_one_line(t_path("e"), "--batch 2000 x --batches 1 windows of 32 tokens"));
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=20M",
                      "ablate --model m1 --db r.db --data s.val.bin --probe-r 5 --batch 2000 "
                      "--batches 1 --threads 2",
                      1, "ablate would allocate");
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=1M", "patch --model m1 --db r.db --batch 64", 1,
                      "patching would allocate");
    CHECK(t_one_line(t_path("e"), "for --batch 64 pairs of 31 tokens"));
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=1M",
                      "run --model m1 --data s.val.bin --save-cache c.st --windows 50 --hooks z", 1,
                      "run --save-cache would allocate");
    CHECK(t_one_line(t_path("e"), "for 50 windows of 32 tokens"));
    /* attnstats and prune: their windows; attribute --data: the items'
     * tables of the windows, refused before the task is made */
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=20M",
                      "attnstats --model m1 --db r.db --data s.val.bin --batch 2000 --batches 1 "
                      "--threads 2",
                      1, "attnstats would allocate");
    CHECK(t_one_line(t_path("e"), "for --batches 1 x --batch 2000 windows of 32 tokens"));
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=20M",
                      "prune --model m1 --db r.db --data s.val.bin --method random --batch 2000 "
                      "--batches 2 --threads 2",
                      1, "prune would allocate");
    CHECK(t_one_line(t_path("e"), "; lower --batch or --batches"));
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=20M",
                      "attribute --model m1 --db r.db --data s.val.bin --windows 100000 "
                      "--threads 2",
                      1, "attribute would allocate");
    CHECK(t_one_line(t_path("e"), "for --windows 100000 of 32 tokens"));
    refused_untouched(w.s, "ATTNLAB_MEM_LIMIT=2M",
                      "attribute --model m1 --db r.db --probe-r 5 --n 2000 --no-patching "
                      "--threads 2",
                      1, "attribute would allocate");
    /* and a probe longer than the model's context, before the run row */
    refused_untouched(w.s, "", "scores --model m1 --db r.db --probe-r 50 --threads 2", 1,
                      "probe length 2R+1 = 101 exceeds n_ctx 32 (lower --probe-r)");
}

/* ------------------------------------------------- a partly trained SAE */

static int gauss_source(void *ctx, float *x, int n, al_rng *rng, al_err *e) {
    (void)ctx, (void)e;
    for (int i = 0; i < n * 8; i++) x[i] = (float)al_rng_normal(rng);
    return 0;
}

/* The trainer marks its folder from the step-0 checkpoint on and removes
 * the mark with the last step's: stopped half-way it is partial (with its
 * step), resumed to the end it is not. */
TEST(refusal_sae_partial_mark) {
    al_err e;
    t_pbuf out = t_pcopy("sae");
    al_sae_train_opts o = al_sae_train_opts_defaults();
    o.source = gauss_source, o.source_d_in = 8, o.out = out.s;
    o.expansion = 2, o.k = 4, o.steps = 8, o.batch = 16, o.buffer_batches = 1;
    o.stop_at = 4, o.ckpt_every = 0, o.eval_windows = 1, o.threads = 1;
    al_sae_trainer *t;
    CHECK_OK(al_sae_trainer_init(&t, &o, &e), &e);
    al_sae s;
    al_sae_meta m;
    CHECK_OK(al_sae_load(out.s, &s, &m, &e), &e); /* the step-0 SAE */
    CHECK(m.partial == 1 && m.partial_step == 0 && m.partial_steps == 8);
    al_sae_free(&s);
    int stopped = 0;
    CHECK_OK(al_sae_trainer_run(t, &stopped, &e), &e);
    CHECK(stopped == 1 && al_sae_trainer_step(t) == 4);
    al_sae_trainer_free(t);
    CHECK_OK(al_sae_load(out.s, &s, &m, &e), &e);
    CHECK(m.partial == 1 && m.partial_step == 4 && m.partial_steps == 8);
    char msg[512];
    al_sae_partial_msg("D", &m, msg, sizeof msg);
    CHECKF(!strcmp(msg, "the SAE D is partly trained (step 4 of 8: its training was interrupted "
                        "or failed; sae train --resume finishes it)"),
           "%s", msg);
    al_sae_free(&s);
    o.stop_at = 0, o.resume = 1;
    CHECK_OK(al_sae_trainer_init(&t, &o, &e), &e);
    CHECK_OK(al_sae_trainer_run(t, &stopped, &e), &e);
    CHECK(stopped == 0 && al_sae_trainer_step(t) == 8);
    al_sae_trainer_free(t);
    CHECK_OK(al_sae_load(out.s, &s, &m, &e), &e);
    CHECK(m.partial == 0 && m.partial_step == -1);
    al_sae_free(&s);
    CHECK(t_sh("test ! -e %s/" AL_SAE_PARTIAL_FILE, out.s) == 0);
    /* a mark that does not read as the trainer's still marks the folder */
    CHECK(t_sh("echo '{\"step\": -3}' > %s/" AL_SAE_PARTIAL_FILE, out.s) == 0);
    CHECK_OK(al_sae_load(out.s, &s, &m, &e), &e);
    CHECK(m.partial == 1 && m.partial_step == -1);
    al_sae_partial_msg("D", &m, msg, sizeof msg);
    CHECK(strstr(msg, "the SAE D is partly trained (its training"));
    al_sae_free(&s);
}

/* sae train killed mid-run (SIGKILL: no handler runs) leaves a marked
 * folder; sae features on it warns (stored with the run, in --json) and
 * under --strict refuses in one line, storing nothing. */
TEST(refusal_sae_killed_features_warn) {
    t_pbuf w = work_dir();
    t_pbuf db = t_pcopy("w/r.db"), rf = t_pcopy("w/sae/" AL_SAE_RESUME_FILE);
    pid_t p = t_spawn(NULL, NULL,
                      "sae train --model %s/m1 --layer 0 --data %s/s.train.bin --db %s --out "
                      "%s/sae --steps 1000000 --batch 64 --ckpt-every 8 --threads 1",
                      w.s, w.s, db.s, w.s);
    int seen = 0;
    for (int i = 0; i < 600 && !seen; i++) {
        t_sleep(0.05);
        seen = al_file_exists(rf.s);
    }
    CHECK(seen);
    t_sleep(0.2);
    kill(p, SIGKILL);
    CHECK(t_wait(p, NULL) == 128 + SIGKILL);
    CHECK(t_sh("test -e %s/sae/" AL_SAE_PARTIAL_FILE, w.s) == 0);
    const char *feat = "sae features --model m1 --sae sae --data s.val.bin --db r.db --windows 4 "
                       "--probe-n 8 --threads 2";
    /* first without --strict: this also marks the killed run failed, the
     * store's housekeeping on opening, which the refusal below then finds
     * done */
    CHECK(t_sh("cd %s && %s %s --json > %s 2> %s", w.s, t_abs_bin(), feat, t_path("o"),
               t_path("e")) == 0);
    CHECK(t_sh("grep -q '^attnlab: warning: the SAE sae is partly trained (step [0-9]* of "
               "1000000: its training was interrupted or failed; sae train --resume finishes "
               "it)$' %s",
               t_path("e")) == 0);
    CHECK(t_sh("grep -q 'the SAE sae is partly trained' %s", t_path("o")) == 0);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM run_warnings JOIN runs USING (run_id) WHERE "
                           "kind = 'sae_features' AND message LIKE '%partly trained%'") == 1);
    refused_untouched(w.s, "",
                      "sae features --model m1 --sae sae --data s.val.bin --db r.db "
                      "--windows 4 --probe-n 8 --threads 2 --strict",
                      1,
                      "refused under --strict (nothing stored): the SAE sae is partly trained "
                      "(step ");
}

/* --probe-r that cannot fit the model's context: refused before the run
 * row (it used to be refused by the computation, leaving a failed run). */
TEST(refusal_sae_features_probe_r) {
    t_pbuf w = work_dir();
    CHECK(t_sh("cd %s && %s sae train --model m1 --layer 0 --data s.train.bin --db r.db --out sae "
               "--steps 2 --batch 64 --threads 2 >/dev/null 2>&1",
               w.s, t_abs_bin()) == 0);
    refused_untouched(w.s, "",
                      "sae features --model m1 --sae sae --data s.val.bin --db r.db --probe-r 1000",
                      1, "--probe-r 1000: the probe's 2R+1 tokens must fit n_ctx 32");
}

/* An SAE's weight file that cannot be read is called an SAE in the
 * message, not a checkpoint: a missing, short or damaged file and a
 * non-finite weight, from the library and from the command. */
TEST(refusal_sae_weights_named_sae) {
    al_err e;
    t_pbuf dir = t_pcopy("sae");
    al_sae s;
    al_sae_meta m = {.site = AL_SAE_SITE_Z, .hook_layer = 0, .scale = 1.0};
    al_sae_cfg c = al_sae_cfg_default(32, 64);
    CHECK_OK(al_sae_init(&s, &c, 1, &e), &e);
    CHECK_OK(al_sae_save(dir.s, &s, &m, &e), &e);
    char want[2048];
    snprintf(want, sizeof want, "cannot read SAE %s/" AL_SAE_WEIGHTS_FILE ": ", dir.s);
    /* W_enc with a NaN, written as a valid file */
    s.W_enc[5] = NAN;
    const int64_t d = 32, n = 64;
    al_st_tensor t[4] =
        {{.name = "W_enc", .dtype = AL_DT_F32, .ndim = 2, .shape = {d, n}, .data = s.W_enc},
         {.name = "b_enc", .dtype = AL_DT_F32, .ndim = 1, .shape = {n}, .data = s.b_enc},
         {.name = "W_dec", .dtype = AL_DT_F32, .ndim = 2, .shape = {n, d}, .data = s.W_dec},
         {.name = "b_dec", .dtype = AL_DT_F32, .ndim = 1, .shape = {d}, .data = s.b_dec}};
    char wpath[2048];
    snprintf(wpath, sizeof wpath, "%s/" AL_SAE_WEIGHTS_FILE, dir.s);
    CHECK_OK(al_st_write(wpath, t, 4, NULL, NULL, 0, &e), &e);
    al_sae_free(&s);
    al_sae s2;
    CHECK(al_sae_load(dir.s, &s2, &m, &e) == -1);
    CHECKF(!strncmp(e.msg, want, strlen(want)) && strstr(e.msg, "NaN/Inf"), "%s", e.msg);
    /* cut short */
    CHECK(t_sh("head -c 100 %s > %s.x && mv %s.x %s", wpath, wpath, wpath, wpath) == 0);
    CHECK(al_sae_load(dir.s, &s2, &m, &e) == -1);
    CHECKF(!strncmp(e.msg, want, strlen(want)), "%s", e.msg);
    CHECK(!strstr(e.msg, "checkpoint"));
    /* not a regular file */
    CHECK(t_sh("rm %s && mkdir %s", wpath, wpath) == 0);
    CHECK(al_sae_load(dir.s, &s2, &m, &e) == -1);
    CHECKF(!strncmp(e.msg, want, strlen(want)) && strstr(e.msg, "not a regular file"), "%s", e.msg);
    /* the command says the same in its one line */
    t_pbuf w = work_dir();
    CHECK(
        t_sh(
            "cd %s && %s sae train --model m1 --layer 0 --data s.train.bin --db r.db --out sae "
            "--steps 2 --batch 64 --threads 2 >/dev/null 2>&1 && head -c 64 sae/" AL_SAE_WEIGHTS_FILE
            " > x && mv x sae/" AL_SAE_WEIGHTS_FILE,
            w.s, t_abs_bin()) == 0);
    refused_untouched(w.s, "", "sae features --model m1 --sae sae --data s.val.bin --db r.db", 1,
                      "attnlab: cannot read SAE sae/" AL_SAE_WEIGHTS_FILE ": ");
}

/* attnstats on a token file shorter than one window of the model's
 * length: every window would be the same few tokens, so it says so (a
 * warning, stored with the run and in --json); a file of whole windows
 * gets none. */
TEST(refusal_attnstats_short_data_warns) {
    t_pbuf w = work_dir();
    t_pbuf shortf = t_pcopy("w/short.bin"), db = t_pcopy("w/r.db");
    t_phrase_corpus(shortf.s, 10);
    CHECK(t_sh("cd %s && %s attnstats --model m1 --db r.db --data short.bin --threads 2 --json "
               "> %s 2> %s",
               w.s, t_abs_bin(), t_path("o"), t_path("e")) == 0);
    const char *want = "the token file short.bin has 10 tokens, fewer than one window of the "
                       "model's 32 (+1): each of the 32 windows (--batches 4 x --batch 8) is the "
                       "same 9 tokens";
    char *err = t_slurp(t_path("e")), *out = t_slurp(t_path("o"));
    CHECKF(err && strstr(err, want), "stderr: %s", err ? err : "");
    CHECK(out && strstr(out, want));
    free(err);
    free(out);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM run_warnings JOIN runs USING (run_id) WHERE kind "
                           "= 'attnstats' AND message LIKE '%fewer than one window%'") == 1);
    CHECK(
        t_sh("cd %s && %s attnstats --model m1 --db r.db --data s.val.bin --threads 2 > /dev/null "
             "2> %s",
             w.s, t_abs_bin(), t_path("e2")) == 0);
    char *e2 = t_slurp(t_path("e2"));
    CHECK(e2 && !strstr(e2, "fewer than one window"));
    free(e2);
}

/* sae features stores its SAE folder and token file as the model's path
 * is stored (absolute), so heatmap --what sae-feature drawn from another
 * folder finds all three and recomputes the contexts' activations. */
TEST(refusal_heatmap_sae_paths_from_db) {
    t_pbuf w = work_dir();
    CHECK(t_sh("cd %s && %s sae train --model m1 --layer 0 --data s.train.bin --db r.db --out sae "
               "--steps 20 --batch 64 --threads 2 >/dev/null 2>&1 && %s sae features --model m1 "
               "--sae sae --data s.val.bin --db r.db --windows 4 --probe-n 8 --threads 2 "
               ">/dev/null 2>&1",
               w.s, t_abs_bin(), t_abs_bin()) == 0);
    t_pbuf db = t_pcopy("w/r.db");
    long run = t_sql_long(db.s, "SELECT max(run_id) FROM runs WHERE kind = 'sae_features'");
    long feat = t_sql_long(db.s, "SELECT min(feature) FROM sae_features WHERE run_id = (SELECT "
                                 "max(run_id) FROM runs WHERE kind = 'sae_features')");
    CHECK(run > 0 && feat >= 0);
    char *dir = t_sql(db.s, "SELECT sae_dir FROM sae_feature_runs");
    char *data = t_sql(db.s, "SELECT json_extract(config_json, '$.data') FROM runs WHERE kind = "
                             "'sae_features'");
    CHECKF(dir && dir[0] == '/' && strstr(dir, "/w/sae"), "%s", dir ? dir : "");
    CHECKF(data && data[0] == '/' && strstr(data, "/w/s.val.bin"), "%s", data ? data : "");
    free(dir);
    free(data);
    /* from the test's folder, one above the run's */
    CHECK(t_sh("cd %s && %s heatmap --what sae-feature --db w/r.db --run %ld --feature %ld --out "
               "f.svg > /dev/null 2> %s",
               t_tmpdir(), t_abs_bin(), run, feat, t_path("e")) == 0);
    char *svg = t_slurp(t_path("f.svg"));
    CHECK(svg && strstr(svg, "recomputed with the SAE (it agrees with the stored one"));
    CHECK(svg && !strstr(svg, "cannot be read"));
    free(svg);
}

/* ------------------------------------------------------- experiments */

/* An experiment checks every stage's values, with the commands' own
 * checks, before its first stage runs and under --dry-run: a layer the
 * declared model lacks, k 0, an SAE no stage makes, a probe longer than
 * the declared context, windows -1 after an SAE stage. Refused in one
 * line naming the stage; a real run makes no folder at all. */
TEST(refusal_experiment_stage_values) {
    static const struct {
        const char *analyses, *want;
    } cases[] = {
        {"{\"sae\": {\"layer\": 7, \"steps\": 2}}", "(sae: model two): --layer 7: the model in "},
        {"{\"sae\": {\"layer\": 1, \"k\": 0}}", "(sae: model two): --k must be >= 1 (got 0)"},
        {"{\"sae\": {\"layer\": 1, \"k\": 100000}}",
         "--k 100000 is larger than the dictionary (d_sae 256 = 8 x 32)"},
        {"{\"sae_features\": {\"sae\": \"sae-L1\"}}", "(sae_features: model two): it reads "},
        {"{\"sae\": {\"layer\": 0}, \"sae_features\": {\"sae\": \"sae-L1\"}}",
         "/models/two/sae-L1, which no stage before it writes"},
        {"{\"sae\": {\"layer\": 1, \"steps\": 2}, \"sae_features\": {\"sae\": \"sae-L1\", "
         "\"windows\": -1}}",
         "(sae_features: model two): --windows must be"},
        {"{\"sae_features\": {\"sae\": \"/\", \"probe_r\": 1000}}",
         "--probe-r 1000: the probe's 2R+1 tokens must fit n_ctx 32"},
        {"{\"scores\": {\"probe_r\": 50}}",
         "(scores: model two): probe length 2R+1 = 101 exceeds n_ctx 32 (lower --probe-r)"},
        {"{\"patch\": {\"probe_r\": 40}}",
         "induction task length 2R+1 = 81 exceeds n_ctx 32 (lower --probe-r)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text, T_EXP_TINY_2L("x") " \"analyses\": %s, \"report\": false}",
                 cases[i].analyses);
        t_write("x.json", text);
        for (int dry = 1; dry >= 0; dry--) {
            int rc = t_sh("cd %s && %s experiment x.json --out out %s > /dev/null 2> %s",
                          t_tmpdir(), t_abs_bin(), dry ? "--dry-run" : "", t_path("e"));
            CHECKF(rc == 1, "case %zu (dry %d): exit %d", i, dry, rc);
            CHECKF(t_one_line(t_path("e"), cases[i].want), "case %zu (dry %d)", i, dry);
            CHECKF(t_sh("test ! -e %s/out", t_tmpdir()) == 0, "case %zu left a folder", i);
        }
    }
    /* the same stages with good values pass the dry run */
    t_write("x.json", T_EXP_TINY_2L("x") " \"analyses\": {\"sae\": {\"layer\": 1}, "
                                         "\"sae_features\": {\"sae\": \"sae-L1\"}, \"scores\": "
                                         "{\"probe_r\": 10}, \"patch\": true}, \"report\": "
                                         "false}");
    CHECK(t_sh("cd %s && %s experiment x.json --out out --dry-run > /dev/null 2> %s", t_tmpdir(),
               t_abs_bin(), t_path("e")) == 0);
}

/* --probe-r 0 (the default) is min(50, (n_ctx-1)/2) for every command
 * that takes it that way, by one helper: paths, attribute and discover
 * on a model of n_ctx 64 use R 31 (2R+1 = 63 tokens) as patch and sae
 * features do; a given R that cannot fit is refused before the run row. */
TEST(refusal_probe_r_default_adapts) {
    CHECK(al_probe_r_default(0, 64) == 31 && al_probe_r_default(0, 32) == 15);
    CHECK(al_probe_r_default(0, 256) == 50 && al_probe_r_default(0, 101) == 50);
    CHECK(al_probe_r_default(7, 32) == 7 && al_probe_r_default(0, 4) == 1);
    t_pbuf w = work_dir();
    CHECK(t_sh("cd %s && %s train --data s.train.bin --val s.val.bin --tokenizer tok.json --out "
               "m64 --steps 2 --n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 64 "
               "--batch 4 --eval-every 0 --warmup 2 --threads 2 >/dev/null 2>&1",
               w.s, t_abs_bin()) == 0);
    const char *cmds[] = {"paths --n 4", "attribute --n 4 --no-patching", "discover --n 4",
                          "patch --n 4"};
    for (int i = 0; i < 4; i++) {
        CHECKF(t_sh("cd %s && %s %s --model m64 --db r.db --threads 2 --json > %s 2> %s", w.s,
                    t_abs_bin(), cmds[i], t_path("o"), t_path("e")) == 0,
               "%s", cmds[i]);
        CHECKF(t_sh("grep -q '\"T\":[[:space:]]*63,' %s", t_path("o")) == 0, "%s: not R 31",
               cmds[i]);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s --model m64 --db r.db --probe-r 40", cmds[i]);
        refused_untouched(w.s, "", cmd, 1,
                          "induction task length 2R+1 = 81 exceeds n_ctx 64 (lower --probe-r)");
    }
}

/* Every option value the commands check, one bad value at a time: refused
 * in one line naming the option and what it must be, the folder (and its
 * database) byte for byte as before. */
TEST(refusal_option_values) {
    t_pbuf w = work_dir();
#define TR "train --data s.train.bin --val s.val.bin --tokenizer tok.json --out t9 --steps 2 "
#define ST "sae train --model m1 --layer 0 --data s.train.bin --out s9 --db r.db "
#define SF "sae features --model m1 --sae nosae --data s.val.bin --db r.db "
    static const char *const cases[][2] = {
        {ST "--arch relu", "--arch must be topk or l1 (got 'relu')"},
        {ST "--expansion 0", "--expansion must be 1..1024 (got 0)"},
        {ST "--arch l1 --l1-coeff 0", "--l1-coeff must be finite and > 0 (got 0)"},
        {ST "--lr 0", "--lr must be finite and > 0 (got 0)"},
        {ST "--batch 0", "--batch must be 1..1048576 (got 0)"},
        {ST "--eval-windows 0", "--eval-windows must be 1..100000 (got 0)"},
        {TR "--min-lr-frac 2", "min_lr_frac must be in [0,1] (got 2)"},
        {TR "--beta2 1", "beta1 and beta2 must be in [0,1)"},
        {TR "--precision f16", "precision must be f32 or bf16 (got 'f16')"},
        {TR "--pos rotary", "pos must be standard or shortformer (got 'rotary')"},
        {TR "--norm rms", "norm must be none, ln or lnpre (got 'rms')"},
        {TR "--biases xyz", "biases must be none, all, or letters of q, k, v, o, u (got 'xyz')"},
        {TR "--norm ln --ln-eps 2", "ln_eps must be in (0, 1] (got 2)"},
        {TR "--n-layers 65", "n_layers must be in 1..64 (got 65)"},
        {TR "--d-model 20000 --n-heads 625 --d-head 32", "d_model must be in 1..16384 (got 20000)"},
        {TR "--d-model 5000 --n-heads 1 --d-head 5000", "d_head must be in 1..4096 (got 5000)"},
        {TR "--n-ctx 70000", "n_ctx must be in 1..65536 (got 70000)"},
        {SF "--top-n 0", "--top-n must be 1..100 (got 0)"},
        {SF "--logit-n 0", "--logit-n must be 1..100 (got 0)"},
        {SF "--probe-n 0", "--probe-n must be 1..100000 (got 0)"},
        {"circuits --model m1 --db r.db --mc-samples 1", "need 1 <= --top-k <= 100000, 2 <= "},
        {"import --checkpoint x.pt --out imp --tolerance 0", "--tolerance must be positive"},
        {"run --model m1 --prompt ab --temperature 0", "need --temperature > 0"},
        {"run --model m1 --data s.val.bin --save-cache c.safetensors --windows 0",
         "need 1 <= --windows <= 100000"},
        {"scores --model m1 --db r.db --probe-r 5 --bootstrap 200000",
         "--bootstrap must be in 0..100000 (got 200000)"},
        {"data synth --out x.txt --min-sentences 0", "--min-sentences must be in [1,1000] (got 0)"},
        {"data synth --out x.txt --min-sentences 5 --max-sentences 3",
         "--max-sentences must be in [min-sentences,1000] (got 3)"},
        {"heatmap --model m1 --what attention --out a.png", "--what attention needs --prompt TEXT"},
        {"heatmap --model m1 --what qk --top-n 0 --out q.png", "need --layer >= 0, --head >= 0, "},
        {"heatmap --model m1 --what qk --head 0 --top-n 100000 --out q.png",
         "--top-n must be in 1.."},
        {"heatmap --what patching --out p.png", "--model is required (or, for a kind drawn from"},
        {"data prose --source quran --out x.txt", "--source 'quran': must be kjv, pydocs or file"},
        {"data mix --in s.txt:1.5 --out x.txt", "the share must be a number in (0, 1]"},
    };
#undef TR
#undef ST
#undef SF
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *before = tree_sig(w.s, "sig0");
        int got =
            t_sh("cd %s && %s %s > /dev/null 2> %s", w.s, t_abs_bin(), cases[i][0], t_path("e"));
        CHECKF(got == 1 || got == 2, "%s: exit %d", cases[i][0], got);
        CHECKF(t_one_line(t_path("e"), cases[i][1]), "%s", cases[i][0]);
        char *after = tree_sig(w.s, "sig1");
        CHECKF(before && after && !strcmp(before, after), "%s changed the folder", cases[i][0]);
        free(before);
        free(after);
    }
}
