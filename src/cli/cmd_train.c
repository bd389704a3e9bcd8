/* cmd_train.c -- `attnlab train`: flags in, the trainer (train.h) run,
 * Ctrl-C turned into a save-and-stop, the dynamics recorded with --db
 * (train_record.h). */
#include "attnlab/cmd_train.h"

#include <stdlib.h>
#include <string.h>

#include "attnlab/behave.h"
#include "attnlab/checkpoint.h"
#include "attnlab/stop.h"
#include "attnlab/train_record.h"

al_train_cli al_train_cli_defaults(void) {
    al_train_cli o = {.t = al_train_opts_defaults(), .probe_tokens = "all"};
    return o;
}

void al_train_cli_flags(al_train_cli *c, al_flag f[AL_TRAIN_CLI_NFLAGS]) {
    al_train_opts *o = &c->t;
    /* the order is that of the JSON saved in state.json: keep it */
    const al_flag t[] = {
        {"config", AL_STR, &c->config, "FILE",
         "JSON file with any of these options (keys with _ or -)", 0, 0},
        {"data", AL_STR, &o->data, "FILE", "training token file (attnlab encode)", 0, 0},
        {"val", AL_STR, &o->val, "FILE", "validation token file (default: the tail of --data)", 0,
         0},
        {"tokenizer", AL_STR, &o->tokenizer, "FILE",
         "tokenizer.json the data was encoded with, attnlab's or a Hugging Face one (default: bytes)",
         0, 0},
        {"out", AL_STR, &o->out, "DIR", "model directory to write", 0, 0},
        {"resume", AL_STR, &o->resume, "DIR",
         "continue the run saved in DIR exactly where it stopped", 0, 0},
        {"force", AL_BOOL, &o->force, NULL, "overwrite a checkpoint already in --out", 0, 0},
        {"db", AL_STR, &c->db, "FILE", "SQLite file to record training dynamics in", 0, 0},
        {"n-layers", AL_INT, &o->n_layers, "N", "attention layers", 0, 0},
        {"d-model", AL_INT, &o->d_model, "N", "residual stream width", 0, 0},
        {"n-heads", AL_INT, &o->n_heads, "N", "heads per layer", 0, 0},
        {"d-head", AL_INT, &o->d_head, "N", "width of each head", 0, 0},
        {"n-ctx", AL_INT, &o->n_ctx, "N", "context length (positions)", 0, 0},
        {"tied", AL_BOOL, &o->tied, NULL, "tie the unembedding to the embedding (W_U = W_E^T)", 0,
         0},
        {"pos", AL_STR, &o->pos, "TYPE",
         "positions: standard (W_pos in the residual stream) or "
         "shortformer (W_pos added to every head's query and key inputs only)",
         0, 0},
        {"norm", AL_STR, &o->norm, "TYPE",
         "LayerNorm before every layer's attention and before "
         "the unembedding: none, ln (TransformerLens's LN: learned w and b) or lnpre (LNPre: "
         "centre and scale only)",
         0, 0},
        {"biases", AL_STR, &o->biases, "SET",
         "bias tensors: none, all (b_Q, b_K, b_V, b_O, "
         "b_U), or letters of q, k, v, o, u (e.g. qkvo)",
         0, 0},
        {"ln-eps", AL_FLOAT, &o->ln_eps, "X", "LayerNorm's eps", 0, 0},
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
        {"weight-decay", AL_FLOAT, &o->weight_decay, "X",
         "decoupled weight decay (not on embeddings)", 0, 0},
        {"grad-clip", AL_FLOAT, &o->grad_clip, "X", "clip the global gradient norm (0 = off)", 0,
         0},
        {"eval-every", AL_INT, &o->eval_every, "N", "validate every N steps (0 = only at the end)",
         0, 0},
        {"eval-batches", AL_INT, &o->eval_batches, "N", "validation batches per evaluation", 0, 0},
        {"ckpt-every", AL_INT, &o->ckpt_every, "N", "checkpoint every N steps (and at the end)", 0,
         0},
        {"val-fraction", AL_FLOAT, &o->val_fraction, "X",
         "share of --data held out when --val is absent", 0, 0},
        {"threads", AL_INT, &o->threads, "N", "threads (0 = OMP_NUM_THREADS or all cores)", 0, 0},
        {"precision", AL_STR, &o->precision, "P",
         "matrix-product inputs: f32, or bf16 (rounded to "
         "bfloat16, f32 accumulation; attention's per-head products, weights, gradients and "
         "AdamW state stay f32)",
         0, 0},
        {"stop-at", AL_INT, &o->stop_at, "N",
         "save and stop after step N, as Ctrl-C would (to split a run)", 0, 0},
        {"probe-tokens", AL_STR, &c->probe_tokens, "WHICH",
         "what --db's induction probe repeats: "
         "random ids over all (the vocabulary), seen (those in --data) or FILE.bin (those in a token "
         "file); or windows of held-out text: text (--val) or text:FILE.bin",
         0, 0},
        AL_FLAGS_END};
    _Static_assert(sizeof t / sizeof t[0] <= AL_TRAIN_CLI_NFLAGS, "AL_TRAIN_CLI_NFLAGS too small");
    memcpy(f, t, sizeof t);
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
static int prepare(al_train_cli *c, al_flag *flags, al_err *e) {
    al_train_opts *o = &c->t;
    int out_on_cli = al_flag_seen(flags, "out");
    if (c->config && apply_json_file(flags, c->config, e) != 0) return -1;
    if (!o->resume) return 0;
    al_train_state st;
    int rc = al_ckpt_read_state(o->resume, &st, e);
    if (rc < 0) return al_err_prefix(e, "cannot resume from %s", o->resume);
    if (rc > 0)
        return al_errf(e,
                       "cannot resume from %s: it has no state.json (a checkpoint saved "
                       "for inference only)",
                       o->resume);
    char src[AL_PATH_MAX + 64];
    snprintf(src, sizeof src, "%s/state.json", o->resume);
    rc = st.train_json ? al_flags_apply_json(flags, st.train_json, src, e) : 0;
    al_state_free(&st);
    if (rc != 0) return -1;
    if (!out_on_cli) o->out = o->resume; /* the directory may have moved */
    return 0;
}

int al_train_cli_run(al_train_cli *c, al_flag *flags, int *interrupted, al_err *e) {
    *interrupted = 0;
    if (prepare(c, flags, e) != 0) return -1;
    /* the options as they now stand: saved in every state.json (for a
     * resume) and as the database run's config */
    char *json = al_flags_to_json(flags);
    if (!json) return al_errf(e, "out of memory serialising options");
    c->t.opts_json = json;
    c->t.stop = &al_stop;
    al_train_record rec = {.db_path = c->db, .config_json = json};
    al_train_observer obs = al_train_record_observer(&rec);
    al_trainer *t = NULL;
    al_probe_load pl = {0};
    /* before the trainer, which writes the step-0 checkpoint; for every id
     * a token file can hold (the trainer itself refuses ids past the
     * model's vocabulary, and the probe ids past it) */
    int rc = c->db && c->t.data
                 ? al_probe_load_open(&pl, c->probe_tokens, NULL, c->t.data, c->t.val, 65536, e)
                 : 0;
    rec.probe_src = al_probe_load_src(&pl);
    if (rc != 0 || al_trainer_init(&t, &c->t, c->db ? &obs : NULL, e) != 0) {
        al_probe_load_free(&pl);
        c->t.opts_json = NULL; /* c may be reused: point at nothing freed */
        c->t.stop = NULL;
        free(json);
        return -1;
    }
    /* Handlers only now: before the step-0 checkpoint exists, Ctrl-C just
     * ends the process, with nothing to save. */
    al_stop_catch();
    rc = al_trainer_run(t, interrupted, e);
    if (rc == 0 && rec.end_failed) {
        *e = rec.end_err;
        al_err_prefix(e, "%s is trained, but its run in %s is not marked done", al_trainer_dir(t),
                      c->db);
        rc = -1;
    }
    if (rc != 0) al_trainer_failed(t, e);
    al_stop_release();
    if (rc == 0 && *interrupted) al_log("continue with --resume %s", al_trainer_dir(t));
    al_trainer_free(t);
    al_probe_load_free(&pl);
    c->t.opts_json = NULL;
    c->t.stop = NULL;
    free(json);
    return rc;
}

/* ------------------------------------------------------------ command */

static al_train_cli opts;
static al_flag flags[AL_TRAIN_CLI_NFLAGS];

static int run_train(int argc, char **argv);

al_command al_cmd_train = {
    "train",
    "train an attention-only transformer on a token file",
    "--data FILE [--tokenizer FILE] [--out DIR] [options] | --resume DIR",
    "Trains with AdamW (warm-up then cosine decay), validates every --eval-every\n"
    "steps, and writes a checkpoint directory (model.safetensors, config.json,\n"
    "tokenizer.json, optim.safetensors, state.json) every --ckpt-every steps and\n"
    "at the end. --config FILE takes the same options as JSON keys; flags given on\n"
    "the command line win. --resume DIR continues bit-for-bit where the run\n"
    "stopped (same --threads). Ctrl-C saves a checkpoint and stops. A non-finite\n"
    "loss stops training and keeps the last good checkpoint.",
    flags,
    run_train,
};

static int run_train(int argc, char **argv) {
    al_err e;
    opts = al_train_cli_defaults();
    al_train_cli_flags(&opts, flags);
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_train, &e);
    int interrupted = 0;
    if (al_train_cli_run(&opts, flags, &interrupted, &e) != 0) return al_cli_error(&e);
    return interrupted ? 130 : 0;
}

/* `attnlab help train` and the experiment's key checks need the table
 * before run() is called. */
__attribute__((constructor)) static void init_flags(void) {
    opts = al_train_cli_defaults();
    al_train_cli_flags(&opts, flags);
}
