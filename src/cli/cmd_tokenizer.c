/* cmd_tokenizer.c -- `attnlab tokenizer train`: learn BPE merges from a
 * text file and write tokenizer.json; `attnlab tokenizer show`: the
 * tokens a tokenizer (attnlab's or a Hugging Face tokenizer.json) cuts a
 * text into. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/cmd_tokenizer.h"
#include "attnlab/tokenizer.h"

al_tok_cli al_tok_cli_defaults(void) {
    al_tok_cli o = {.vocab = 4096};
    return o;
}

void al_tok_cli_flags(al_tok_cli *o, al_flag f[AL_TOK_CLI_NFLAGS]) {
    const al_flag t[] =
        {{"in", AL_STR, &o->in, "FILE", "training text (any bytes; UTF-8 words stay whole)", 1, 0},
         {"vocab", AL_INT, &o->vocab, "N",
          "vocabulary size: 256 bytes + merges + <|endoftext|> (257..65536 for token files)", 0, 0},
         {"out", AL_STR, &o->out, "FILE", "where to write the tokenizer (JSON)", 1, 0},
         AL_FLAGS_END};
    _Static_assert(sizeof t / sizeof t[0] <= AL_TOK_CLI_NFLAGS, "AL_TOK_CLI_NFLAGS too small");
    memcpy(f, t, sizeof t);
}

/* What `attnlab help tokenizer train` and the experiment's key checks
 * read before run() is called (init_flags below). */
static al_tok_cli help_opts;
static al_flag flags[AL_TOK_CLI_NFLAGS];

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

int al_tok_cli_run(const al_tok_cli *o, al_err *e) {
    if (!o->in || !o->out) {
        al_errf(e, "--%s is required", o->in ? "out" : "in");
        return 2;
    }
    if (o->vocab < 257 || o->vocab > (1 << 24)) {
        al_errf(e, "--vocab %d: must be at least 257 (256 bytes + <|endoftext|>)", o->vocab);
        return 2;
    }
    unsigned char *text;
    size_t n;
    if (al_read_file(o->in, &text, &n, 0, e) != 0) return 1;
    if (n == 0) {
        free(text);
        al_errf(e, "cannot train a tokenizer on %s: the file is empty", o->in);
        return 1;
    }
    al_tokenizer *t;
    double t0 = al_now();
    int rc = al_tok_train(text, n, o->vocab, 1, &t, e);
    double dt = al_now() - t0;
    free(text);
    if (rc != 0) {
        al_err_prefix(e, "cannot train a tokenizer on %s", o->in);
        return 1;
    }
    if (al_tok_save(t, o->out, e) != 0) {
        al_tok_free(t);
        return 1;
    }
    int nv = al_tok_vocab_size(t);
    if (nv < o->vocab)
        al_log("note: %s only has pairs for %d merges, so the vocabulary is %d, not %d", o->in,
               nv - 257, nv, o->vocab);
    printf("tokenizer: %d merges learned from %.2f MB in %.2f s (%.2f MB/s); vocab %d, "
           "<|endoftext|> = %d -> %s\n",
           nv - 257, (double)n / 1e6, dt, (double)n / 1e6 / (dt > 0 ? dt : 1e-9), nv, al_tok_eot(t),
           o->out);
    al_tok_free(t);
    return 0;
}

static int run(int argc, char **argv) {
    al_err e;
    al_tok_cli o = al_tok_cli_defaults();
    al_flag f[AL_TOK_CLI_NFLAGS];
    al_tok_cli_flags(&o, f);
    if (al_flags_parse(f, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_tokenizer_train, &e);
    int rc = al_tok_cli_run(&o, &e);
    return rc == 2 ? al_cli_usage(&al_cmd_tokenizer_train, &e) : rc ? al_cli_error(&e) : 0;
}

__attribute__((constructor)) static void init_flags(void) {
    help_opts = al_tok_cli_defaults();
    al_tok_cli_flags(&help_opts, flags);
}

/* ---------------------------------------------------- tokenizer show */

static const char *show_tok, *show_text, *show_in;
static int show_special;
static al_flag show_flags[] =
    {{"tokenizer", AL_STR, &show_tok, "FILE", "tokenizer.json: attnlab's or a Hugging Face one", 1,
      0},
     {"text", AL_STR, &show_text, "TEXT", "the text to encode", 0, 0},
     {"in", AL_STR, &show_in, "FILE", "encode this file instead of --text", 0, 0},
     {"special", AL_BOOL, &show_special, NULL,
      "match \"<|endoftext|>\" (and a Hugging Face file's other special tokens)", 0, 0},
     AL_FLAGS_END};

static int show_run(int argc, char **argv);

al_command al_cmd_tokenizer_show = {
    "tokenizer show",
    "encode a text and list its tokens",
    "--tokenizer FILE (--text TEXT | --in FILE) [--special]",
    "Prints what the tokenizer is (attnlab's or Hugging Face's, its size and\n"
    "<|endoftext|> id), then one line per token: its position, id and display\n"
    "form (a space as \"\xe2\x90\xa3\", newline as \\n, tab as \\t, other control bytes and\n"
    "bytes that end inside a character as \\xNN).",
    show_flags,
    show_run,
};

static int show(al_err *e) {
    al_tokenizer *t;
    if (al_tok_load(show_tok, &t, e) != 0) return -1;
    unsigned char *file = NULL;
    const unsigned char *s = (const unsigned char *)show_text;
    size_t n = show_text ? strlen(show_text) : 0;
    int *ids = NULL;
    size_t n_ids = 0;
    int rc = show_in ? al_read_file(show_in, &file, &n, 0, e) : 0;
    if (show_in) s = file;
    if (rc == 0) rc = al_tok_encode(t, s, n, show_special, &ids, &n_ids, e);
    if (rc == 0) {
        int eot = al_tok_eot(t);
        printf("%s: %s, %d tokens, <|endoftext|> = ", show_tok, al_tok_kind(t),
               al_tok_vocab_size(t));
        printf(eot >= 0 ? "%d\n" : "none\n", eot);
        printf("%zu bytes -> %zu tokens\n", n, n_ids);
        for (size_t i = 0; i < n_ids; i++) {
            char d[256];
            al_tok_display(t, ids[i], d, sizeof d);
            printf("%6zu %7d  %s\n", i, ids[i], d);
        }
    }
    free(ids);
    free(file);
    al_tok_free(t);
    return rc;
}

static int show_run(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(show_flags, argc, argv, NULL, 0, NULL, &e) != 0 ||
        (!show_text == !show_in && al_errf(&e, "give one of --text and --in")))
        return al_cli_usage(&al_cmd_tokenizer_show, &e);
    return show(&e) ? al_cli_error(&e) : 0;
}
