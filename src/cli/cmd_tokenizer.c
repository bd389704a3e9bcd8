/* cmd_tokenizer.c -- `attnlab tokenizer train`: learn BPE merges from a
 * text file and write tokenizer.json. */
#include <stdio.h>
#include <stdlib.h>

#include "attnlab/args.h"
#include "attnlab/tokenizer.h"

static const char *opt_in = NULL, *opt_out = NULL;
static int opt_vocab = 4096;

static al_flag flags[] = {
    {"in", AL_STR, &opt_in, "FILE", "training text (any bytes; UTF-8 words stay whole)", 1, 0},
    {"vocab", AL_INT, &opt_vocab, "N",
     "vocabulary size: 256 bytes + merges + <|endoftext|> (257..65536 for token files)", 0, 0},
    {"out", AL_STR, &opt_out, "FILE", "where to write the tokenizer (JSON)", 1, 0},
    AL_FLAGS_END};

static int run(int argc, char **argv);

al_command al_cmd_tokenizer_train = {
    "tokenizer train",
    "learn a byte-level BPE tokenizer from a text file",
    "--in FILE --vocab N --out tokenizer.json",
    "Byte-level BPE as GPT-2: ids 0..255 are bytes, then merges in the order\n"
    "learned, and last <|endoftext|>. Text is pre-split into words (a leading\n"
    "space belongs to the word) so merges never cross word boundaries; literal\n"
    "\"<|endoftext|>\" text separates documents. Ties between equally frequent\n"
    "pairs go to the smallest (left id, right id), so the output is the same for\n"
    "the same input. If the text runs out of pairs the vocabulary is smaller.",
    flags,
    run,
};

static int run(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_tokenizer_train, &e);
    if (opt_vocab < 257 || opt_vocab > (1 << 24)) {
        al_errf(&e, "--vocab %d: must be at least 257 (256 bytes + <|endoftext|>)", opt_vocab);
        return al_cli_usage(&al_cmd_tokenizer_train, &e);
    }
    unsigned char *text;
    size_t n;
    if (al_read_file(opt_in, &text, &n, 0, &e) != 0) return al_cli_error(&e);
    if (n == 0) {
        free(text);
        al_errf(&e, "cannot train a tokenizer on %s: the file is empty", opt_in);
        return al_cli_error(&e);
    }
    al_tokenizer *t;
    double t0 = al_now();
    int rc = al_tok_train(text, n, opt_vocab, 1, &t, &e);
    double dt = al_now() - t0;
    free(text);
    if (rc != 0) {
        al_err_prefix(&e, "cannot train a tokenizer on %s", opt_in);
        return al_cli_error(&e);
    }
    if (al_tok_save(t, opt_out, &e) != 0) {
        al_tok_free(t);
        return al_cli_error(&e);
    }
    int nv = al_tok_vocab_size(t);
    if (nv < opt_vocab)
        al_log("note: %s only has pairs for %d merges, so the vocabulary is %d, not %d",
               opt_in, nv - 257, nv, opt_vocab);
    printf("tokenizer: %d merges learned from %.2f MB in %.2f s (%.2f MB/s); vocab %d, "
           "<|endoftext|> = %d -> %s\n",
           nv - 257, (double)n / 1e6, dt, (double)n / 1e6 / (dt > 0 ? dt : 1e-9), nv,
           al_tok_eot(t), opt_out);
    al_tok_free(t);
    return 0;
}
