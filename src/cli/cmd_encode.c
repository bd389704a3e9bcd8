/* cmd_encode.c -- `attnlab encode`: text -> train/validation token files
 * (llm.c format), one <|endoftext|> before every document so it serves as
 * both separator and BOS. The split is by whole documents (corpus.h): the
 * last --val share of them, or with --val-pick hash those whose text
 * hashes below it, is validation, so no document straddles the two files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/cmd_encode.h"
#include "attnlab/corpus.h"
#include "attnlab/data.h"
#include "attnlab/tokenizer.h"

al_encode_cli al_encode_cli_defaults(void) {
    al_encode_cli o = {.val = 0.05, .docs = "blank", .val_pick = "last"};
    return o;
}

void al_encode_cli_flags(al_encode_cli *o, al_flag f[AL_ENCODE_CLI_NFLAGS]) {
    const al_flag t[] =
        {{"tokenizer", AL_STR, &o->tokenizer, "FILE",
          "tokenizer.json from `attnlab tokenizer train`, or a Hugging Face one (byte-level BPE)",
          1, 0},
         {"in", AL_STR, &o->in, "FILE", "text to encode", 1, 0},
         {"out", AL_STR, &o->out, "PATH", "data/x.bin writes data/x.train.bin and data/x.val.bin",
          1, 0},
         {"val", AL_FLOAT, &o->val, "F",
          "share of documents (the last ones) for validation; 0: none", 0, 0},
         {"docs", AL_STR, &o->docs, "MODE",
          "document separation: blank (blank lines), line (one per line), eot (literal "
          "<|endoftext|>), story (a new line straight after a line; blank lines only separate "
          "paragraphs)",
          0, 0},
         {"val-pick", AL_STR, &o->val_pick, "last|hash",
          "which documents are validation: the last ones, or those whose text hashes below --val "
          "(the same side in every corpus or mixture holding them)",
          0, 0},
         AL_FLAGS_END};
    _Static_assert(sizeof t / sizeof t[0] <= AL_ENCODE_CLI_NFLAGS,
                   "AL_ENCODE_CLI_NFLAGS too small");
    memcpy(f, t, sizeof t);
}

/* What `attnlab help encode` and the experiment's key checks read before
 * run() is called (init_flags below). */
static al_encode_cli help_opts;
static al_flag flags[AL_ENCODE_CLI_NFLAGS];

static int run(int argc, char **argv);

al_command al_cmd_encode = {
    "encode",
    "encode a text file into train/validation token files",
    "--tokenizer T --in FILE --out data/x.bin [--val 0.05] [--docs blank|line|eot|story]\n"
    "       [--val-pick last|hash]",
    "Splits the text into documents, encodes each with the tokenizer and writes\n"
    "<|endoftext|> before each one. The last --val share of documents (at least\n"
    "one, and at least one left for training) goes to X.val.bin, the rest to\n"
    "X.train.bin, where --out X.bin names both; with --val-pick hash the documents\n"
    "whose normalised text hashes below --val go there instead (about that share;\n"
    "a document stays on its side in any corpus or mixture that holds it). Except with --docs eot, literal\n"
    "\"<|endoftext|>\" in a document is encoded as ordinary text. Token files hold\n"
    "uint16 ids, so the vocabulary must have at most 65536 tokens. Speed is printed\n"
    "in MB/s (1e6 bytes). --docs story is for text laid out like the TinyStories\n"
    "dumps: paragraphs of a story separated by a blank line, the next story\n"
    "starting on the very next line.",
    flags,
    run,
};

#define PLURAL(n) ((n) == 1 ? "" : "s")

/* Encode the documents with is_val[i] == want (every one when is_val is
 * NULL) into one array: <|endoftext|> doc <|endoftext|> doc ... */
static int encode_docs(const al_tokenizer *t, const al_doc *docs, size_t nd,
                       const unsigned char *is_val, int want, int **ids_out, size_t *n_out,
                       al_progress *pg, size_t *done_bytes, size_t total_bytes, al_err *e) {
    size_t cap = 0;
    for (size_t i = 0; i < nd; i++)
        if (!is_val || is_val[i] == want) cap += docs[i].n + 1;
    int *ids = al_malloc(cap ? cap : 1, sizeof(int), e);
    if (!ids) return -1;
    size_t n = 0;
    for (size_t i = 0; i < nd; i++) {
        if (is_val && is_val[i] != want) continue;
        size_t m;
        ids[n++] = al_tok_eot(t);
        if (al_tok_encode_into(t, docs[i].p, docs[i].n, 0, ids + n, &m, e)) {
            free(ids);
            return -1;
        }
        n += m;
        *done_bytes += docs[i].n;
        if ((i & 255) == 0 && al_now() - pg->t_start > 0.5) /* quiet when quick */
            al_progress_update(pg, 0, "encode: %.1f / %.1f MB, %.1f MB/s", *done_bytes / 1e6,
                               total_bytes / 1e6,
                               *done_bytes / 1e6 / (al_now() - pg->t_start + 1e-9));
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

/* data/x.bin -> data/x.train.bin, data/x.val.bin (and the dir exists). */
static int out_names(const char *out, char *train, char *val, size_t cap, al_err *e) {
    size_t l = strlen(out);
    if (l >= 4 && strcmp(out + l - 4, ".bin") == 0) l -= 4;
    if (l == 0 || l + 12 >= cap) return al_errf(e, "--out '%s': not a usable path", out);
    snprintf(train, cap, "%.*s.train.bin", (int)l, out);
    snprintf(val, cap, "%.*s.val.bin", (int)l, out);
    const char *slash = strrchr(out, '/');
    if (slash && slash != out) {
        char dir[AL_PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - out), out);
        if (al_mkdir_p(dir, e) != 0) return -1;
    }
    return 0;
}

static int encode_file(const al_encode_cli *o, al_val_pick pick, const al_tokenizer *t,
                       size_t n_bytes, const al_doc *docs, size_t nd, al_err *e) {
    char train_path[AL_PATH_MAX], val_path[AL_PATH_MAX];
    if (out_names(o->out, train_path, val_path, sizeof train_path, e)) return -1;
    size_t n_val = 0;
    unsigned char *is_val = NULL;
    if (o->val > 0) {
        if (nd < 2)
            return al_errf(e,
                           "%s has %zu document%s: a train/validation split needs at least 2 "
                           "(see --docs, or use --val 0)",
                           o->in, nd, PLURAL(nd));
        if (!(is_val = al_malloc(nd, 1, e)) ||
            al_corpus_val_split(docs, nd, o->val, pick, is_val, &n_val, e)) {
            free(is_val);
            return -1;
        }
    }
    size_t n_train = nd - n_val, total = 0, done = 0;
    for (size_t i = 0; i < nd; i++) total += docs[i].n;
    int *tr = NULL, *va = NULL;
    size_t ntr = 0, nva = 0;
    al_progress pg;
    al_progress_init(&pg, 5.0);
    double t0 = al_now();
    int rc = encode_docs(t, docs, nd, is_val, 0, &tr, &ntr, &pg, &done, total, e);
    if (rc == 0 && n_val) rc = encode_docs(t, docs, nd, is_val, 1, &va, &nva, &pg, &done, total, e);
    double dt = al_now() - t0;
    al_progress_done(&pg);
    free(is_val);
    if (rc == 0) rc = al_tokens_save(train_path, tr, ntr, e);
    if (rc == 0 && n_val) rc = al_tokens_save(val_path, va, nva, e);
    free(tr);
    free(va);
    if (rc != 0) return -1;
    printf("encode: %s: %zu document%s, %.2f MB (of %.2f MB in the file) in %.2f s = %.1f MB/s\n",
           o->in, nd, PLURAL(nd), total / 1e6, n_bytes / 1e6, dt,
           total / 1e6 / (dt > 0 ? dt : 1e-9));
    printf("  train: %zu tokens (%zu document%s) -> %s\n", ntr, n_train, PLURAL(n_train),
           train_path);
    if (n_val)
        printf("  val:   %zu tokens (%zu document%s%s) -> %s\n", nva, n_val, PLURAL(n_val),
               pick == AL_VAL_HASH ? ", picked by hash" : "", val_path);
    else
        printf("  val:   none (--val 0)\n");
    return 0;
}

int al_encode_cli_run(const al_encode_cli *o, al_err *e) {
    if (!o->tokenizer || !o->in || !o->out) {
        al_errf(e, "--%s is required", !o->tokenizer ? "tokenizer" : !o->in ? "in" : "out");
        return 2;
    }
    al_docs_mode mode;
    al_val_pick pick;
    if (al_docs_mode_parse(o->docs, &mode, e) || al_val_pick_parse(o->val_pick, &pick, e)) return 2;
    if (!(o->val >= 0 && o->val < 1)) {
        al_errf(e, "--val %g: must be in [0, 1)", o->val);
        return 2;
    }
    al_tokenizer *t;
    if (al_tok_load(o->tokenizer, &t, e) != 0) return 1;
    if (al_tok_eot(t) < 0) { /* a Hugging Face tokenizer without one */
        al_errf(e,
                "tokenizer %s has no special <|endoftext|> token to put before each "
                "document",
                o->tokenizer);
        al_tok_free(t);
        return 1;
    }
    if (al_tok_vocab_size(t) > 65536) {
        al_errf(e, "tokenizer %s has %d tokens; token files hold uint16 ids, so at most 65536",
                o->tokenizer, al_tok_vocab_size(t));
        al_tok_free(t);
        return 1;
    }
    unsigned char *s;
    size_t n;
    if (al_read_file(o->in, &s, &n, 0, e) != 0) {
        al_tok_free(t);
        return 1;
    }
    al_doc *docs = NULL;
    size_t nd = 0;
    int rc = al_corpus_split(s, n, mode, &docs, &nd, e);
    if (rc == 0 && nd == 0) rc = al_errf(e, "%s holds no documents (only blank text)", o->in);
    if (rc == 0) rc = encode_file(o, pick, t, n, docs, nd, e);
    free(docs);
    free(s);
    al_tok_free(t);
    return rc == 0 ? 0 : 1;
}

static int run(int argc, char **argv) {
    al_err e;
    al_encode_cli o = al_encode_cli_defaults();
    al_flag f[AL_ENCODE_CLI_NFLAGS];
    al_encode_cli_flags(&o, f);
    if (al_flags_parse(f, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_encode, &e);
    int rc = al_encode_cli_run(&o, &e);
    return rc == 2 ? al_cli_usage(&al_cmd_encode, &e) : rc ? al_cli_error(&e) : 0;
}

__attribute__((constructor)) static void init_flags(void) {
    help_opts = al_encode_cli_defaults();
    al_encode_cli_flags(&help_opts, flags);
}
