/* cmd_encode.c -- `attnlab encode`: text -> train/validation token files
 * (llm.c format), one <|endoftext|> before every document so it serves as
 * both separator and BOS. The split is by whole documents: the last --val
 * share of them is validation, so no document straddles the two files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/cmd_encode.h"
#include "attnlab/data.h"
#include "attnlab/tokenizer.h"

al_encode_cli al_encode_cli_defaults(void) {
    al_encode_cli o = {.val = 0.05, .docs = "blank"};
    return o;
}

void al_encode_cli_flags(al_encode_cli *o, al_flag f[AL_ENCODE_CLI_NFLAGS]) {
    const al_flag t[] = {
        {"tokenizer", AL_STR, &o->tokenizer, "FILE",
         "tokenizer.json from `attnlab tokenizer train`, or a Hugging Face one (byte-level BPE)", 1, 0},
        {"in", AL_STR, &o->in, "FILE", "text to encode", 1, 0},
        {"out", AL_STR, &o->out, "PATH",
         "data/x.bin writes data/x.train.bin and data/x.val.bin", 1, 0},
        {"val", AL_FLOAT, &o->val, "F", "share of documents (the last ones) for validation; 0: none",
         0, 0},
        {"docs", AL_STR, &o->docs, "MODE",
         "document separation: blank (blank lines), line (one per line), eot (literal "
         "<|endoftext|>), story (a new line straight after a line; blank lines only separate "
         "paragraphs)", 0, 0},
        AL_FLAGS_END};
    _Static_assert(sizeof t / sizeof t[0] <= AL_ENCODE_CLI_NFLAGS, "AL_ENCODE_CLI_NFLAGS too small");
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
    "--tokenizer T --in FILE --out data/x.bin [--val 0.05] [--docs blank|line|eot|story]",
    "Splits the text into documents, encodes each with the tokenizer and writes\n"
    "<|endoftext|> before each one. The last --val share of documents (at least\n"
    "one, and at least one left for training) goes to X.val.bin, the rest to\n"
    "X.train.bin, where --out X.bin names both. Except with --docs eot, literal\n"
    "\"<|endoftext|>\" in a document is encoded as ordinary text. Token files hold\n"
    "uint16 ids, so the vocabulary must have at most 65536 tokens. Speed is printed\n"
    "in MB/s (1e6 bytes). --docs story is for text laid out like the TinyStories\n"
    "dumps: paragraphs of a story separated by a blank line, the next story\n"
    "starting on the very next line.",
    flags,
    run,
};

#define PLURAL(n) ((n) == 1 ? "" : "s")

typedef struct span {
    size_t off, len;
} span;

typedef struct doc_list {
    span *d;
    size_t n, cap;
} doc_list;

static int add_doc(doc_list *l, size_t off, size_t len, al_err *e) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        span *d = al_malloc(cap, sizeof *d, e);
        if (!d) return -1;
        if (l->n) memcpy(d, l->d, l->n * sizeof *d);
        free(l->d);
        l->d = d;
        l->cap = cap;
    }
    l->d[l->n++] = (span){off, len};
    return 0;
}

static int is_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13); }

enum { DOCS_BLANK, DOCS_LINE, DOCS_EOT, DOCS_STORY };

/* blank: runs of non-blank lines; line: each non-blank line; story: a
 * line break straight into another non-blank line starts a document,
 * while blank lines only separate the paragraphs of one (the layout of
 * TinyStories text without <|endoftext|>: a story's paragraphs are
 * separated by a blank line, the next story starts on the next line). A
 * document keeps its inner newlines but not the line break (or \r) that
 * ends it. */
static int split_lines(const unsigned char *s, size_t n, int mode, doc_list *l, al_err *e) {
    size_t start = 0, end = 0;
    int in_doc = 0, prev_blank = 1;
    for (size_t i = 0; i < n;) {
        const unsigned char *nl = memchr(s + i, '\n', n - i);
        size_t le = nl ? (size_t)(nl - s) : n, ce = le;
        if (ce > i && s[ce - 1] == '\r') ce--;
        int blank = 1;
        for (size_t k = i; k < ce && blank; k++) blank = is_space(s[k]);
        if (!blank && mode == DOCS_LINE) {
            if (add_doc(l, i, ce - i, e)) return -1;
        } else if (!blank && mode == DOCS_STORY && in_doc && !prev_blank) {
            if (add_doc(l, start, end - start, e)) return -1;
            start = i, end = ce;
        } else if (!blank) {
            if (!in_doc) start = i;
            end = ce;
            in_doc = 1;
        } else if (in_doc && mode != DOCS_STORY) {
            if (add_doc(l, start, end - start, e)) return -1;
            in_doc = 0;
        }
        prev_blank = blank;
        i = le + 1;
    }
    return in_doc ? add_doc(l, start, end - start, e) : 0;
}

/* eot: pieces between literal <|endoftext|>, trimmed of surrounding space. */
static int split_eot(const unsigned char *s, size_t n, doc_list *l, al_err *e) {
    const size_t el = strlen(AL_EOT_TEXT);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + el <= n && memcmp(s + j, AL_EOT_TEXT, el) != 0) j++;
        if (j + el > n) j = n;
        size_t a = i, b = j;
        while (a < b && is_space(s[a])) a++;
        while (b > a && is_space(s[b - 1])) b--;
        if (b > a && add_doc(l, a, b - a, e)) return -1;
        i = j < n ? j + el : n;
    }
    return 0;
}

/* Encode docs[lo..hi) into one array: <|endoftext|> doc <|endoftext|> doc ... */
static int encode_docs(const al_tokenizer *t, const unsigned char *s, const span *docs,
                       size_t lo, size_t hi, int **ids_out, size_t *n_out, al_progress *pg,
                       size_t done_bytes, size_t total_bytes, al_err *e) {
    size_t cap = hi - lo;
    for (size_t i = lo; i < hi; i++) cap += docs[i].len;
    int *ids = al_malloc(cap ? cap : 1, sizeof(int), e);
    if (!ids) return -1;
    size_t n = 0;
    for (size_t i = lo; i < hi; i++) {
        size_t m;
        ids[n++] = al_tok_eot(t);
        if (al_tok_encode_into(t, s + docs[i].off, docs[i].len, 0, ids + n, &m, e)) {
            free(ids);
            return -1;
        }
        n += m;
        done_bytes += docs[i].len;
        if ((i & 255) == 0 && al_now() - pg->t_start > 0.5) /* quiet when quick */
            al_progress_update(pg, 0, "encode: %.1f / %.1f MB, %.1f MB/s", done_bytes / 1e6,
                               total_bytes / 1e6,
                               done_bytes / 1e6 / (al_now() - pg->t_start + 1e-9));
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

static int encode_file(const al_encode_cli *o, const al_tokenizer *t, const unsigned char *s,
                       size_t n_bytes, const doc_list *docs, al_err *e) {
    char train_path[AL_PATH_MAX], val_path[AL_PATH_MAX];
    if (out_names(o->out, train_path, val_path, sizeof train_path, e)) return -1;
    size_t nd = docs->n, n_val = 0;
    if (o->val > 0) {
        if (nd < 2)
            return al_errf(e, "%s has %zu document%s: a train/validation split needs at least 2 "
                           "(see --docs, or use --val 0)", o->in, nd, PLURAL(nd));
        n_val = (size_t)llround(o->val * (double)nd);
        if (n_val < 1) n_val = 1;
        if (n_val > nd - 1) n_val = nd - 1;
    }
    size_t n_train = nd - n_val, total = 0;
    for (size_t i = 0; i < nd; i++) total += docs->d[i].len;
    int *tr = NULL, *va = NULL;
    size_t ntr = 0, nva = 0, tr_bytes = 0;
    for (size_t i = 0; i < n_train; i++) tr_bytes += docs->d[i].len;
    al_progress pg;
    al_progress_init(&pg, 5.0);
    double t0 = al_now();
    int rc = encode_docs(t, s, docs->d, 0, n_train, &tr, &ntr, &pg, 0, total, e);
    if (rc == 0 && n_val)
        rc = encode_docs(t, s, docs->d, n_train, nd, &va, &nva, &pg, tr_bytes, total, e);
    double dt = al_now() - t0;
    al_progress_done(&pg);
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
        printf("  val:   %zu tokens (%zu document%s) -> %s\n", nva, n_val, PLURAL(n_val), val_path);
    else printf("  val:   none (--val 0)\n");
    return 0;
}

int al_encode_cli_run(const al_encode_cli *o, al_err *e) {
    if (!o->tokenizer || !o->in || !o->out) {
        al_errf(e, "--%s is required", !o->tokenizer ? "tokenizer" : !o->in ? "in" : "out");
        return 2;
    }
    const char *dm = o->docs ? o->docs : "";
    int mode = strcmp(dm, "blank") == 0 ? DOCS_BLANK : strcmp(dm, "line") == 0 ? DOCS_LINE
               : strcmp(dm, "eot") == 0 ? DOCS_EOT : strcmp(dm, "story") == 0 ? DOCS_STORY : -1;
    if (mode < 0) {
        al_errf(e, "--docs '%s': must be blank, line, eot or story", dm);
        return 2;
    }
    if (!(o->val >= 0 && o->val < 1)) {
        al_errf(e, "--val %g: must be in [0, 1)", o->val);
        return 2;
    }
    al_tokenizer *t;
    if (al_tok_load(o->tokenizer, &t, e) != 0) return 1;
    if (al_tok_eot(t) < 0) { /* a Hugging Face tokenizer without one */
        al_errf(e, "tokenizer %s has no special <|endoftext|> token to put before each "
                "document", o->tokenizer);
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
    doc_list docs = {0};
    int rc = mode == DOCS_EOT ? split_eot(s, n, &docs, e) : split_lines(s, n, mode, &docs, e);
    if (rc == 0 && docs.n == 0) rc = al_errf(e, "%s holds no documents (only blank text)", o->in);
    if (rc == 0) rc = encode_file(o, t, s, n, &docs, e);
    free(docs.d);
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
