/* cmd_train.c -- `attnlab train`: flags in, training loop out. */
#include "attnlab/args.h"
#include "attnlab/train.h"

static al_train_opts opts;

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
    NULL,
    run_train,
};

static int run_train(int argc, char **argv) {
    al_err e;
    opts = al_train_defaults();
    al_flag *flags = al_train_flags(&opts);
    al_cmd_train.flags = flags;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_train, &e);
    int interrupted = 0;
    if (al_train_run(&opts, flags, &interrupted, &e) != 0) return al_cli_error(&e);
    return interrupted ? 130 : 0;
}

/* `attnlab help train` needs the table before run() is called. */
__attribute__((constructor)) static void init_flags(void) {
    opts = al_train_defaults();
    al_cmd_train.flags = al_train_flags(&opts);
}
