/* test_pairs.c -- pair sets for activation patching (pairs.c): JSONL
 * pair files (tokens, padding, items, and every refusal naming its line)
 * and the names task (checked against the synthetic stories it is made
 * from, with a BPE trained on synthetic text so that names are several
 * tokens). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"
#include "attnlab/pairs.h"
#include "attnlab/synth.h"
#include "attnlab/tokenizer.h"
#include "test.h"

/* ------------------------------------------------------------ helpers */

static al_tokenizer *byte_tok(void) {
    al_tokenizer *t = NULL;
    al_err e;
    CHECK_OK(al_tok_byte_level(&t, &e), &e);
    return t;
}

/* A BPE trained on 300 synthetic stories (0.01 s): names are 2-5 pieces. */
static al_tokenizer *synth_tok(int vocab) {
    al_synth_opts o;
    al_synth_defaults(&o);
    o.seed = 5;
    o.repeat_fraction = 0;
    al_synth *s = NULL;
    al_err e;
    CHECK_OK(al_synth_new(&s, &o, &e), &e);
    al_buf b = AL_BUF_INIT;
    for (int i = 0; i < 300; i++) {
        const char *t;
        size_t n;
        CHECK_OK(al_synth_next(s, &t, &n, NULL, &e), &e);
        al_buf_put(&b, t, n);
        al_buf_puts(&b, "\n\n");
    }
    al_synth_free(s);
    al_tokenizer *tok = NULL;
    CHECK_OK(al_tok_train((const unsigned char *)b.p, b.n, vocab, 0, &tok, &e), &e);
    al_buf_free(&b);
    return tok;
}

/* Parse text expecting a refusal whose message holds both substrings;
 * *out must come back zeroed and the message be one line. */
static void refused(const al_tokenizer *tok, const char *text, size_t n, int n_ctx,
                    const char *want1, const char *want2, int line) {
    al_pairs p;
    al_err e;
    memset(&p, 0xab, sizeof p);
    e.msg[0] = 0;
    int rc = al_pairs_parse_jsonl(text, n, tok, n_ctx, &p, &e);
    CHECKF(rc == -1, "line %d: accepted", line);
    CHECKF(t_all_zero(&p, sizeof p), "line %d: *out not zeroed after failure", line);
    CHECKF(strstr(e.msg, want1) && (!want2 || strstr(e.msg, want2)) && !strchr(e.msg, '\n'),
           "line %d: message [%s] lacks [%s] / [%s]", line, e.msg, want1, want2 ? want2 : "");
    if (rc == 0) al_pairs_free(&p);
}
#define REFUSED(text, want1, want2) refused(tok, text, strlen(text), 64, want1, want2, __LINE__)

#define GOOD "{\"clean\": \"ab\", \"corrupted\": \"xy\", \"answer\": \"c\", \"wrong\": \"z\"}"

/* ------------------------------------------------------------- JSONL */

TEST(pairs_jsonl_good) {
    al_tokenizer *tok = byte_tok();
    const char *text =
        "{\"clean\": \"ab\", \"corrupted\": \"xy\", \"answer\": \"c\", \"wrong\": \"z\"}\n"
        "{\"wrong\": \"?\", \"answer\": \"!\", \"corrupted\": \"jello\", \"clean\": \"hello\"}\r\n"
        "  {\"clean\": \"<|endoftext|>q\", \"corrupted\": \"\xff\xfe\", \"answer\": \" \", "
        "\"wrong\": \"\\n\"}  \n";
    al_pairs p;
    al_err e;
    CHECK_OK(al_pairs_parse_jsonl(text, strlen(text), tok, 5, &p, &e), &e);
    CHECK(!strcmp(p.task, "file") && p.logit_diff == 1);
    CHECK(p.N == 3 && p.T == 5 && p.n_items == 3);
    CHECK(p.len[0] == 2 && p.len[1] == 5 && p.len[2] == 2);
    const int c0[5] = {'a', 'b', 0, 0, 0}, x0[5] = {'x', 'y', 0, 0, 0};
    const int c1[5] = {'h', 'e', 'l', 'l', 'o'}, x1[5] = {'j', 'e', 'l', 'l', 'o'};
    const int c2[5] = {256, 'q', 0, 0, 0}, x2[5] = {0xff, 0xfe, 0, 0, 0}; /* 256: <|endoftext|> */
    CHECK(!memcmp(p.clean, c0, sizeof c0) && !memcmp(p.corr, x0, sizeof x0));
    CHECK(!memcmp(p.clean + 5, c1, sizeof c1) && !memcmp(p.corr + 5, x1, sizeof x1));
    CHECK(!memcmp(p.clean + 10, c2, sizeof c2) && !memcmp(p.corr + 10, x2, sizeof x2));
    const al_pair_item want[3] = {{0, 1, 'c', 'z'}, {1, 4, '!', '?'}, {2, 1, ' ', '\n'}};
    for (int i = 0; i < 3; i++)
        CHECKF(!memcmp(&p.items[i], &want[i], sizeof want[i]), "item %d: %d %d %d %d", i,
               p.items[i].pair, p.items[i].pos, p.items[i].answer, p.items[i].wrong);
    al_pairs_free(&p);
    CHECK(t_all_zero(&p, sizeof p));

    /* one trailing newline or none: the same pairs */
    CHECK_OK(al_pairs_parse_jsonl(GOOD, strlen(GOOD), tok, 64, &p, &e), &e);
    CHECK(p.N == 1 && p.T == 2);
    al_pairs_free(&p);
    CHECK_OK(al_pairs_parse_jsonl(GOOD "\n", strlen(GOOD) + 1, tok, 64, &p, &e), &e);
    CHECK(p.N == 1 && p.T == 2);
    al_pairs_free(&p);
    al_tok_free(tok);
}

/* Answers are tokens of a trained BPE: " the" is one token, a name not. */
TEST(pairs_jsonl_bpe) {
    al_tokenizer *tok = synth_tok(600);
    const char *ok = "{\"clean\": \"Tom saw the\", \"corrupted\": \"Tim saw the\", "
                     "\"answer\": \" the\", \"wrong\": \" a\"}";
    al_pairs p;
    al_err e;
    CHECK_OK(al_pairs_parse_jsonl(ok, strlen(ok), tok, 64, &p, &e), &e);
    int *ids;
    size_t n;
    CHECK_OK(al_tok_encode(tok, (const unsigned char *)" the", 4, 0, &ids, &n, &e), &e);
    CHECK(n == 1 && p.items[0].answer == ids[0]);
    CHECK(p.items[0].pos == p.len[0] - 1);
    free(ids);
    al_pairs_free(&p);
    REFUSED("{\"clean\": \"a\", \"corrupted\": \"b\", \"answer\": \" Zoubakir\", \"wrong\": "
            "\" the\"}",
            "line 1: answer \" Zoubakir\" is ", "; it must be exactly one");
    al_tok_free(tok);
}

TEST(pairs_jsonl_refusals) {
    al_tokenizer *tok = byte_tok();
    REFUSED("", "no pairs", NULL);
    REFUSED("\n", "line 1: empty line", NULL);
    REFUSED(GOOD "\n\n", "line 2: empty line", NULL);
    REFUSED(GOOD "\n \t\r\n" GOOD, "line 2: empty line", NULL);
    REFUSED(GOOD "\n" GOOD "\n[1, 2]", "line 3: expected a JSON object", NULL);
    REFUSED(GOOD "\n\"clean\"", "line 2: expected a JSON object", NULL);
    REFUSED(GOOD "\n{\"clean\": \"a\",", "line 2: invalid JSON at column", NULL);
    REFUSED("{\"clean\": \"a\", \"corrupted\": \"b\", \"answer\": \"c\"}",
            "line 1: missing field \"wrong\"", NULL);
    REFUSED("{\"clean\": \"a\", \"corrupted\": \"b\", \"answer\": 1, \"wrong\": \"d\"}",
            "line 1: field \"answer\" must be a string", NULL);
    REFUSED("{\"clean\": \"a\", \"corrupted\": null, \"answer\": \"c\", \"wrong\": \"d\"}",
            "line 1: field \"corrupted\" must be a string", NULL);
    REFUSED(GOOD "\n{\"clean\": \"a\", \"corrupted\": \"b\", \"answer\": \"c\", \"wrong\": "
                 "\"d\", \"note\": \"x\"}",
            "line 2: unknown field \"note\"", NULL);
    REFUSED("{\"clean\": \"a\", \"clean\": \"b\", \"corrupted\": \"b\", \"answer\": \"c\", "
            "\"wrong\": \"d\"}",
            "line 1: field \"clean\" given twice", NULL);
    REFUSED(GOOD "\n{\"clean\": \"abc\", \"corrupted\": \"ab\", \"answer\": \"c\", \"wrong\": "
                 "\"d\"}",
            "line 2: clean is 3 tokens, corrupted 2", NULL);
    REFUSED("{\"clean\": \"a\", \"corrupted\": \"b\", \"answer\": \"cd\", \"wrong\": \"d\"}",
            "line 1: answer \"cd\" is 2 tokens [c][d]; it must be exactly one", NULL);
    REFUSED("{\"clean\": \"a\", \"corrupted\": \"b\", \"answer\": \"c\", \"wrong\": \"def\"}",
            "line 1: wrong \"def\" is 3 tokens", NULL);
    REFUSED("{\"clean\": \"a\", \"corrupted\": \"b\", \"answer\": \"c\", \"wrong\": \"c\"}",
            "line 1: answer and wrong are the same token", NULL);
    REFUSED("{\"clean\": \"\", \"corrupted\": \"\", \"answer\": \"c\", \"wrong\": \"d\"}",
            "line 1: field \"clean\" is empty", NULL);
    REFUSED("{\"clean\": \"a\", \"corrupted\": \"b\", \"answer\": \"\", \"wrong\": \"d\"}",
            "line 1: field \"answer\" is empty", NULL);
    REFUSED("{\"clean\": \"a\\u0000b\", \"corrupted\": \"abc\", \"answer\": \"c\", \"wrong\": "
            "\"d\"}",
            "line 1: a string holds \\u0000", NULL);
    /* an escaped backslash before u0000 is text, not a NUL */
    const char *bs = "{\"clean\": \"\\\\u0000\", \"corrupted\": \"\\\\u0001\", \"answer\": "
                     "\"c\", \"wrong\": \"d\"}";
    al_pairs p;
    al_err e;
    CHECK_OK(al_pairs_parse_jsonl(bs, strlen(bs), tok, 64, &p, &e), &e);
    CHECK(p.N == 1 && p.T == 6);
    al_pairs_free(&p);
    /* longer than n_ctx: 5 tokens, n_ctx 4 */
    const char *lng = "{\"clean\": \"abcde\", \"corrupted\": \"abcdf\", \"answer\": \"c\", "
                      "\"wrong\": \"d\"}";
    refused(tok, lng, strlen(lng), 4, "line 1: clean and corrupted are 5 tokens",
            "longer than n_ctx 4", __LINE__);
    CHECK_OK(al_pairs_parse_jsonl(lng, strlen(lng), tok, 5, &p, &e), &e);
    al_pairs_free(&p);
    refused(tok, GOOD, strlen(GOOD), 0, "n_ctx", NULL, __LINE__);
    /* NUL bytes inside a line, in and out of strings */
    const char nul[] = GOOD "\n{\"clean\": \"a\0b\", \"corrupted\": \"abc\", \"answer\": \"c\", "
                            "\"wrong\": \"d\"}";
    refused(tok, nul, sizeof nul - 1, 64, "line 2: JSON contains a NUL byte", NULL, __LINE__);
    const char nul2[] = GOOD "\n\0";
    refused(tok, nul2, sizeof nul2 - 1, 64, "line 2:", NULL, __LINE__);
    al_tok_free(tok);
}

/* A file of 1000001 pairs is refused at its last line; 1000000 are fine
 * (~56 MB of text, about a second). */
TEST(pairs_jsonl_too_many) {
    al_tokenizer *tok = byte_tok();
    const char *line = "{\"clean\":\"a\",\"corrupted\":\"b\",\"answer\":\"c\",\"wrong\":\"d\"}\n";
    size_t ll = strlen(line), n = 1000001;
    char *text = malloc(ll * n);
    CHECK(text != NULL);
    if (!text) return;
    for (size_t i = 0; i < n; i++) memcpy(text + i * ll, line, ll);
    refused(tok, text, ll * n, 64, "line 1000001: more than 1000000 pairs", NULL, __LINE__);
    al_pairs p;
    al_err e;
    if (T_SAN) { /* the refusal is the memory check; the plain build parses a million */
        free(text);
        al_tok_free(tok);
        return;
    }
    CHECK_OK(al_pairs_parse_jsonl(text, ll * (n - 1), tok, 64, &p, &e), &e);
    CHECK(p.N == 1000000 && p.T == 1 && p.items[999999].pair == 999999);
    al_pairs_free(&p);
    free(text);
    al_tok_free(tok);
}

TEST(pairs_jsonl_file) {
    al_tokenizer *tok = byte_tok();
    const char *path = t_path("pairs.jsonl");
    al_err e;
    CHECK_OK(al_write_file_atomic(path, GOOD "\n" GOOD "\n", 2 * strlen(GOOD) + 2, &e), &e);
    al_pairs p;
    CHECK_OK(al_pairs_load_jsonl(path, tok, 64, &p, &e), &e);
    CHECK(p.N == 2 && p.T == 2 && p.clean[2] == 'a' && p.corr[3] == 'y');
    al_pairs_free(&p);
    /* errors name the file, then the line */
    CHECK_OK(al_write_file_atomic(path, GOOD "\n{}\n", strlen(GOOD) + 4, &e), &e);
    memset(&p, 0xab, sizeof p);
    CHECK(al_pairs_load_jsonl(path, tok, 64, &p, &e) == -1);
    char want[600];
    snprintf(want, sizeof want, "%s: line 2: missing field \"clean\"", path);
    CHECKF(!strcmp(e.msg, want), "got [%s]", e.msg);
    CHECK(t_all_zero(&p, sizeof p));
    memset(&p, 0xab, sizeof p);
    CHECK(al_pairs_load_jsonl(t_path("missing.jsonl"), tok, 64, &p, &e) == -1);
    CHECKF(strstr(e.msg, "missing.jsonl") != NULL, "got [%s]", e.msg);
    CHECK(t_all_zero(&p, sizeof p));
    al_tok_free(tok);
}

/* -------------------------------------------------------------- names */

/* The pieces of " W" for the word W starting at text[0] (a space, then
 * letters); returns the count, 0 if text does not start so. */
static size_t word_ids(const al_tokenizer *tok, const char *text, char *word, int *ids) {
    size_t k = 1;
    if (text[0] != ' ') return 0;
    while (isalpha((unsigned char)text[k]) && k < 30) k++;
    if (k < 2) return 0;
    memcpy(word, text + 1, k - 1);
    word[k - 1] = 0;
    size_t n;
    al_err e;
    if (al_tok_encode_into(tok, (const unsigned char *)text, k, 0, ids, &n, &e)) return 0;
    return n;
}

/* Whole-word occurrences of w in text. */
static int count_word(const char *text, const char *w) {
    int c = 0;
    size_t n = strlen(w);
    for (const char *q = strstr(text, w); q; q = strstr(q + 1, w))
        c += (q == text || !isalpha((unsigned char)q[-1])) && !isalpha((unsigned char)q[n]);
    return c;
}

/* Everything the names task promises of each pair, checked against the
 * stories it comes from (the synth stream, regenerated here in order:
 * pairs come from stories in stream order, one per story at most). */
static void check_names(const al_tokenizer *tok, const al_pairs *p, int n, uint64_t seed, int n_ctx,
                        int bos) {
    CHECK(p->N == n && p->n_items == n && p->logit_diff == 1 && !strcmp(p->task, "names"));
    CHECK(p->T <= n_ctx);
    al_synth_opts o;
    al_synth_defaults(&o);
    o.seed = seed ^ AL_PAIRS_NAMES_SEED_XOR;
    o.repeat_fraction = 0;
    al_synth *s = NULL;
    al_err e;
    CHECK_OK(al_synth_new(&s, &o, &e), &e);
    int b = bos >= 0, story = 0, T = p->T;
    for (int i = 0; i < p->N && s; i++) {
        const int *c = p->clean + (size_t)i * T, *x = p->corr + (size_t)i * T;
        int len = p->len[i];
        const al_pair_item *it = &p->items[i];
        CHECKF(len >= 3 + b && len <= T, "pair %d: len %d", i, len);
        CHECK(it->pair == i && it->pos == len - 1 && it->answer != it->wrong);
        CHECK(t_all_zero(c + len, (size_t)(T - len) * sizeof(int)));
        CHECK(t_all_zero(x + len, (size_t)(T - len) * sizeof(int)));
        if (b) CHECK(c[0] == bos && x[0] == bos);
        /* the story: the first one after the last pair's that starts with
         * clean + answer */
        int found = 0;
        al_synth_doc d;
        const char *text = NULL;
        size_t tl;
        int *ids = NULL;
        size_t n_ids = 0;
        for (; story < 100 * n + 1000 && !found; story++) {
            CHECK_OK(al_synth_next(s, &text, &tl, &d, &e), &e);
            free(ids);
            CHECK_OK(al_tok_encode(tok, (const unsigned char *)text, tl, 0, &ids, &n_ids, &e), &e);
            found = n_ids >= (size_t)(len - b + 1) &&
                    !memcmp(ids, c + b, (size_t)(len - b) * sizeof(int)) &&
                    ids[len - b] == it->answer;
        }
        CHECKF(found, "pair %d: no story starts with its clean tokens and answer", i);
        /* the span where clean and corrupted differ is one name's pieces */
        int a = b;
        while (a < len && c[a] == x[a]) a++;
        CHECKF(a < len, "pair %d: clean == corrupted", i);
        unsigned char *ct, *xt;
        size_t cn, xn;
        CHECK_OK(al_tok_decode(tok, c + a, (size_t)(len - a), &ct, &cn, &e), &e);
        CHECK_OK(al_tok_decode(tok, x + a, (size_t)(len - a), &xt, &xn, &e), &e);
        /* a difference may start inside the name when a first piece is
         * shared: back up to the piece starting with a space */
        while (a > b && (ct[0] != ' ' || !isupper(ct[1]))) {
            a--;
            free(ct), free(xt);
            CHECK_OK(al_tok_decode(tok, c + a, (size_t)(len - a), &ct, &cn, &e), &e);
            CHECK_OK(al_tok_decode(tok, x + a, (size_t)(len - a), &xt, &xn, &e), &e);
        }
        char name[40], repl[40];
        int S[40], R[40];
        size_t k = word_ids(tok, (const char *)ct, name, S),
               kr = word_ids(tok, (const char *)xt, repl, R);
        int is_name = 0;
        for (int j = 0; j < d.n_names; j++) is_name |= !strcmp(d.names[j], name);
        CHECKF(is_name, "pair %d: the changed span [%s] is not a name of the story", i, name);
        CHECKF(k >= 2 && kr == k, "pair %d: %s is %zu pieces, %s %zu", i, name, k, repl, kr);
        CHECK(!memcmp(c + a, S, k * sizeof(int)) && !memcmp(x + a, R, k * sizeof(int)));
        for (int t = 0; t < len; t++)
            if (t < a || t >= a + (int)k) CHECKF(c[t] == x[t], "pair %d: differs at %d", i, t);
        /* the replacement: invented, capitalised, not a name of the story */
        CHECK(isupper((unsigned char)repl[0]) && strcmp(repl, name) != 0);
        for (int j = 0; j < d.n_names; j++) CHECK(strcmp(d.names[j], repl) != 0);
        /* the last token and the answer begin the name; wrong is the
         * replacement's second piece */
        CHECK(c[len - 1] == S[0] && it->answer == S[1] && it->wrong == R[1]);
        CHECKF(R[0] == S[0], "pair %d: %s and %s begin with different pieces", i, name, repl);
        /* the name is mentioned once in the prefix, at a */
        unsigned char *all;
        size_t an;
        CHECK_OK(al_tok_decode(tok, c + b, (size_t)(len - b - 1), &all, &an, &e), &e);
        int mentions = count_word((const char *)all, name);
        CHECKF(mentions == 1, "pair %d: %s mentioned %d times before its second occurrence", i,
               name, mentions);
        /* no other name of >= 2 pieces is written " Name" twice before: it
         * would have been chosen (the earliest second mention wins) */
        for (int j = 0; j < d.n_names; j++) {
            char sp[40], w2[40];
            int S2[40];
            snprintf(sp, sizeof sp, " %s", d.names[j]);
            if (!strcmp(d.names[j], name) || word_ids(tok, sp, w2, S2) < 2) continue;
            int spaced = 0;
            for (const char *q = strstr((char *)all, sp); q; q = strstr(q + 1, sp))
                spaced += !isalpha((unsigned char)q[strlen(sp)]);
            CHECKF(spaced < 2 || spaced < count_word((char *)all, d.names[j]),
                   "pair %d: %s has an earlier second mention than %s", i, d.names[j], name);
        }
        free(all), free(ct), free(xt), free(ids);
    }
    al_synth_free(s);
}

TEST(pairs_names) {
    al_tokenizer *tok = synth_tok(600);
    int bos = al_tok_eot(tok);
    al_pairs p;
    al_err e;
    CHECK_OK(al_pairs_names(tok, 16, 1, 256, bos, 0, NULL, &p, &e), &e);
    check_names(tok, &p, 16, 1, 256, bos);
    /* no BOS; a short n_ctx (stories too long are skipped) */
    al_pairs q;
    CHECK_OK(al_pairs_names(tok, 8, 2, 40, -1, 0, NULL, &q, &e), &e);
    check_names(tok, &q, 8, 2, 40, -1);
    al_pairs_free(&q);
    al_pairs_free(&p);
    al_tok_free(tok);
}

/* Byte-level: a name of L letters is L + 1 pieces (" ", letters). */
TEST(pairs_names_bytes) {
    al_tokenizer *tok = byte_tok();
    al_pairs p;
    al_err e;
    CHECK_OK(al_pairs_names(tok, 64, 7, 512, al_tok_eot(tok), 0, NULL, &p, &e), &e);
    check_names(tok, &p, 64, 7, 512, al_tok_eot(tok));
    for (int i = 0; i < p.N; i++) CHECK(p.clean[(size_t)i * p.T + p.len[i] - 1] == ' ');
    al_pairs_free(&p);
    al_tok_free(tok);
}

static int same_pairs(const al_pairs *a, const al_pairs *b) {
    return a->N == b->N && a->T == b->T && a->n_items == b->n_items && !strcmp(a->task, b->task) &&
           !memcmp(a->clean, b->clean, (size_t)a->N * (2 * (size_t)a->T + 1) * sizeof(int)) &&
           !memcmp(a->items, b->items, (size_t)a->n_items * sizeof *a->items);
}

TEST(pairs_names_deterministic) {
    al_tokenizer *tok = synth_tok(600);
    al_pairs a, b, c, d;
    al_err e;
    CHECK_OK(al_pairs_names(tok, 12, 1, 256, 0, 0, NULL, &a, &e), &e);
    CHECK_OK(al_pairs_names(tok, 12, 1, 256, 0, 0, NULL, &b, &e), &e);
    CHECK(same_pairs(&a, &b));
    /* fewer pairs: the first ones of the same stream */
    al_pairs h;
    CHECK_OK(al_pairs_names(tok, 5, 1, 256, 0, 0, NULL, &h, &e), &e);
    for (int i = 0; i < 5; i++)
        CHECK(h.len[i] == a.len[i] &&
              !memcmp(h.clean + (size_t)i * h.T, a.clean + (size_t)i * a.T,
                      (size_t)h.len[i] * sizeof(int)) &&
              !memcmp(h.corr + (size_t)i * h.T, a.corr + (size_t)i * a.T,
                      (size_t)h.len[i] * sizeof(int)) &&
              !memcmp(&h.items[i], &a.items[i], sizeof h.items[i]));
    al_pairs_free(&h);
    /* another seed: other stories */
    CHECK_OK(al_pairs_names(tok, 12, 2, 256, 0, 0, NULL, &c, &e), &e);
    CHECK(c.N == 12 && !same_pairs(&a, &c));
    int common = 0;
    for (int i = 0; i < 12; i++)
        for (int j = 0; j < 12; j++)
            common += a.len[i] == c.len[j] &&
                      !memcmp(a.clean + (size_t)i * a.T, c.clean + (size_t)j * c.T,
                              (size_t)a.len[i] * sizeof(int));
    CHECK(common == 0);
    /* the same stories without BOS: every pair one token shorter */
    CHECK_OK(al_pairs_names(tok, 12, 1, 256, -1, 0, NULL, &d, &e), &e);
    for (int i = 0; i < 12; i++)
        CHECK(d.len[i] == a.len[i] - 1 &&
              !memcmp(d.corr + (size_t)i * d.T, a.corr + (size_t)i * a.T + 1,
                      (size_t)d.len[i] * sizeof(int)));
    /* n_ctx exactly the first pair's length keeps it; one less skips its
     * story (its name is the one with the earliest second mention) */
    al_pairs f;
    CHECK_OK(al_pairs_names(tok, 1, 1, a.len[0], 0, 0, NULL, &f, &e), &e);
    CHECK(f.T == a.len[0] && !memcmp(f.clean, a.clean, (size_t)f.T * sizeof(int)));
    al_pairs_free(&f);
    CHECK_OK(al_pairs_names(tok, 1, 1, a.len[0] - 1, 0, 0, NULL, &f, &e), &e);
    CHECK(f.T <= a.len[0] - 1 && memcmp(f.clean, a.clean, (size_t)f.T * sizeof(int)) != 0);
    al_pairs_free(&f);
    al_pairs_free(&a);
    al_pairs_free(&b);
    al_pairs_free(&c);
    al_pairs_free(&d);
    al_tok_free(tok);
}

TEST(pairs_names_refusals) {
    al_tokenizer *tok = synth_tok(600);
    al_pairs p;
    al_err e;
    memset(&p, 0xab, sizeof p);
    double t0 = al_now();
    CHECK(al_pairs_names(tok, 4, 1, 8, al_tok_eot(tok), 0, NULL, &p, &e) == -1);
    CHECKF(al_now() - t0 < 10, "n_ctx 8 took %.1f s", al_now() - t0);
    CHECKF(strstr(e.msg, "only 0 of 4 stories found in 1400 tries") && strstr(e.msg, "n_ctx 8"),
           "got [%s]", e.msg);
    CHECK(t_all_zero(&p, sizeof p));
    memset(&p, 0xab, sizeof p);
    CHECK(al_pairs_names(tok, 4, 1, 256, al_tok_vocab_size(tok), 0, NULL, &p, &e) == -1);
    CHECKF(strstr(e.msg, "BOS id") != NULL, "got [%s]", e.msg);
    CHECK(t_all_zero(&p, sizeof p));
    /* every n_ctx from hopeless to ample: a refusal in one line with
     * *out zeroed, or pairs that fit */
    for (int n_ctx = 1; n_ctx <= 40; n_ctx += 3)
        for (int bos = -1; bos <= 0; bos++) {
            memset(&p, 0xab, sizeof p);
            if (al_pairs_names(tok, 2, (uint64_t)n_ctx, n_ctx, bos, 0, NULL, &p, &e) == 0) {
                CHECKF(p.N == 2 && p.T <= n_ctx, "n_ctx %d: N %d T %d", n_ctx, p.N, p.T);
                al_pairs_free(&p);
            } else {
                CHECKF(strstr(e.msg, "names: only") && !strchr(e.msg, '\n'), "[%s]", e.msg);
                CHECK(t_all_zero(&p, sizeof p));
            }
        }
    CHECK(al_pairs_names(tok, 0, 1, 256, 0, 0, NULL, &p, &e) == -1 &&
          strstr(e.msg, "number of pairs"));
    CHECK(al_pairs_names(tok, 4, 1, 0, 0, 0, NULL, &p, &e) == -1 && strstr(e.msg, "n_ctx"));
    CHECK(t_all_zero(&p, sizeof p));
    al_tok_free(tok);
}

/* A stop flag (Ctrl-C in the CLI) ends the builder before its next
 * story: set from the start, not one story is made, even for n = 10^6. */
TEST(pairs_names_stop) {
    al_tokenizer *tok = synth_tok(600);
    al_pairs p;
    al_err e;
    volatile sig_atomic_t stop = 1;
    memset(&p, 0xab, sizeof p);
    double t0 = al_now();
    CHECK(al_pairs_names(tok, 1000000, 1, 256, 0, 0, &stop, &p, &e) == -1);
    CHECKF(!strcmp(e.msg, "interrupted"), "got [%s]", e.msg);
    CHECKF(al_now() - t0 < 1, "took %.2f s", al_now() - t0);
    CHECK(t_all_zero(&p, sizeof p));
    /* a flag that stays clear changes nothing */
    al_pairs a, b;
    stop = 0;
    CHECK_OK(al_pairs_names(tok, 6, 1, 256, 0, 0, &stop, &a, &e), &e);
    CHECK_OK(al_pairs_names(tok, 6, 1, 256, 0, 0, NULL, &b, &e), &e);
    CHECK(same_pairs(&a, &b));
    al_pairs_free(&a);
    al_pairs_free(&b);
    al_tok_free(tok);
}

TEST(pairs_from_tokens) {
    uint16_t tok[21];
    for (int i = 0; i < 21; i++) tok[i] = (uint16_t)(i % 7);
    al_tokens d = {tok, 21, 6};
    al_pairs p;
    al_err e;
    CHECK_OK(al_pairs_from_tokens(&d, 5, 3, 7, &p, &e), &e);
    CHECK(p.N == 3 && p.T == 5 && p.n_items == 15 && !p.logit_diff && !strcmp(p.task, "data"));
    for (int i = 0; i < p.N; i++)
        for (int t = 0; t < p.T; t++) {
            const al_pair_item *it = &p.items[i * 5 + t];
            CHECK(it->pair == i && it->pos == t && it->wrong == -1);
            /* the answer is the token after the input at t: ids count up mod 7 */
            CHECK(it->answer == (p.clean[i * 5 + t] + 1) % 7);
            CHECK(p.corr[i * 5 + t] == p.clean[i * 5 + t]);
        }
    CHECK(p.len[2] == 5);
    al_pairs_free(&p);
    /* refusals: nothing assigned, one line */
    CHECK(al_pairs_from_tokens(&d, 5, 3, 6, &p, &e) == -1 && strstr(e.msg, "id 6"));
    CHECK(p.N == 0 && p.clean == NULL);
    CHECK(al_pairs_from_tokens(&d, 21, 3, 7, &p, &e) == -1 && strstr(e.msg, "too few"));
    CHECK(al_pairs_from_tokens(&d, 5, 0, 7, &p, &e) == -1 && strstr(e.msg, "windows"));
}

/* The items of a batch of pairs: items are in pair order, so a range;
 * a batch with none gets 0 and where they would start. */
TEST(pairs_batch_items) {
    al_pair_item it[] = {{0, 1, 2, -1}, {0, 2, 3, -1}, {2, 1, 4, -1}, {3, 0, 5, -1}};
    al_pairs t = {.N = 5, .n_items = 4, .items = it};
    int i0 = -1;
    CHECK(al_pairs_batch_items(&t, 0, 2, &i0) == 2 && i0 == 0);
    CHECK(al_pairs_batch_items(&t, 1, 1, &i0) == 0 && i0 == 2);
    CHECK(al_pairs_batch_items(&t, 2, 3, &i0) == 2 && i0 == 2);
    CHECK(al_pairs_batch_items(&t, 4, 1, &i0) == 0 && i0 == 4);
    CHECK(al_pairs_batch_items(&t, 0, 5, &i0) == 4 && i0 == 0);
}

/* The key variant: the replacement's first piece differs from the
 * name's too (and its second), and nothing else of the story changes. */
TEST(pairs_names_key) {
    al_tokenizer *tok = synth_tok(600);
    al_pairs p, v;
    al_err e;
    CHECK_OK(al_pairs_names(tok, 12, 1, 256, 0, 1, NULL, &p, &e), &e);
    CHECK_OK(al_pairs_names(tok, 12, 1, 256, 0, 0, NULL, &v, &e), &e);
    CHECK(!strcmp(p.task, "names-key") && !strcmp(v.task, "names"));
    CHECK(p.N == 12 && v.N == 12);
    int bad = 0;
    for (int i = 0; i < p.N; i++) {
        const int *cl = p.clean + (size_t)i * p.T, *co = p.corr + (size_t)i * p.T;
        int first = -1, last = -1;
        for (int j = 0; j < p.len[i]; j++)
            if (cl[j] != co[j]) last = j, first = first < 0 ? j : first;
        /* the first difference is the first piece itself: the item's
         * position holds the name's first piece, which the corrupted run
         * no longer has at the first appearance */
        int pos = p.items[i].pos;
        bad += first < 0 || cl[first] != cl[pos] || co[first] == cl[pos];
        bad += last < first + 1 || p.items[i].answer != cl[first + 1] ||
               p.items[i].wrong != co[first + 1] || p.items[i].wrong == p.items[i].answer;
    }
    CHECKF(bad == 0, "%d faults", bad);
    al_pairs_free(&p);
    al_pairs_free(&v);
    al_tok_free(tok);
}
