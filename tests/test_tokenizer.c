/* test_tokenizer.c -- byte-level BPE: pre-splitting, hand-worked merges,
 * round trips against a reference encoder, determinism, tokenizer.json
 * validation, display strings, and the tokenizer/encode commands. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/data.h"
#include "attnlab/tokenizer.h"
#include "test.h"

/* ------------------------------------------------------------ helpers */

static al_tokenizer *train_str(const char *text, size_t n, int vocab) {
    al_tokenizer *t = NULL;
    al_err e;
    if (al_tok_train((const unsigned char *)text, n, vocab, 0, &t, &e) != 0) {
        t_fail(__FILE__, __LINE__, "al_tok_train: %s", e.msg);
        return NULL;
    }
    return t;
}

static void write_file(const char *path, const void *data, size_t n) {
    al_err e;
    if (al_write_file_atomic(path, data, n, &e) != 0) t_fail(__FILE__, __LINE__, "%s", e.msg);
}

/* Pieces of s joined by '|'. */
static void split_join(const char *s, char *out, size_t cap) {
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n;) {
        size_t j = al_tok_presplit((const unsigned char *)s, n, i);
        if (i > 0 && o + 1 < cap) out[o++] = '|';
        for (size_t k = i; k < j && o + 1 < cap; k++) out[o++] = s[k];
        i = j;
    }
    out[o] = 0;
}

/* Reference encoder straight from the definition: per pre-split piece,
 * apply every merge in learned order, each to all its occurrences left to
 * right (what training did). Quadratic, which is fine for tests. */
static size_t ref_encode(const al_tokenizer *t, const unsigned char *s, size_t n, int special,
                         int *out) {
    size_t m = 0, el = strlen(AL_EOT_TEXT);
    int n_merges = al_tok_vocab_size(t) - 257;
    int *w = malloc((n + 1) * sizeof(int));
    for (size_t i = 0; i < n;) {
        size_t end = n;
        if (special)
            for (size_t k = i; k + el <= n; k++)
                if (memcmp(s + k, AL_EOT_TEXT, el) == 0) {
                    end = k;
                    break;
                }
        for (size_t p = i; p < end;) {
            size_t q = al_tok_presplit(s, end, p), len = q - p;
            for (size_t k = 0; k < len; k++) w[k] = s[p + k];
            for (int r = 0; r < n_merges && len > 1; r++) {
                int a, b;
                al_tok_merge(t, 256 + r, &a, &b);
                size_t o = 0;
                for (size_t k = 0; k < len;) {
                    if (k + 1 < len && w[k] == a && w[k + 1] == b) {
                        w[o++] = 256 + r;
                        k += 2;
                    } else {
                        w[o++] = w[k++];
                    }
                }
                len = o;
            }
            for (size_t k = 0; k < len; k++) out[m++] = w[k];
            p = q;
        }
        if (end < n) out[m++] = al_tok_eot(t);
        i = end < n ? end + el : n;
    }
    free(w);
    return m;
}

/* A deterministic text of invented words with punctuation, digits,
 * newlines and some UTF-8, so training learns a few hundred merges. */
static char *gen_corpus(uint64_t seed, size_t n_words, size_t *len) {
    static const char *syl[] = {"ba",  "na", "to", "ri",   "ka", "mu",   "the", "and",
                                "ing", "é",  "ö",  "日本", "se", "yeon", "lo",  "ve"};
    static const char *sep[] = {" ",  " ",    " ",    " ",  " ",   ", ", ". ",
                                "\n", "\n\n", " 42 ", "! ", "'s ", "  "};
    al_rng r;
    al_rng_seed(&r, seed);
    size_t cap = n_words * 24 + 1, o = 0;
    char *s = malloc(cap);
    for (size_t w = 0; w < n_words; w++) {
        int k = 1 + (int)al_rng_below(&r, 3);
        for (int i = 0; i < k; i++) {
            const char *x = syl[al_rng_below(&r, 16) % (w % 7 == 0 ? 16 : 8)];
            o += (size_t)snprintf(s + o, cap - o, "%s", x);
        }
        o += (size_t)snprintf(s + o, cap - o, "%s", sep[al_rng_below(&r, 13)]);
    }
    *len = o;
    return s;
}

/* ------------------------------------------------------- pre-splitting */

TEST(tok_presplit_like_gpt2) {
    /* Each expected split is what GPT-2's pattern gives: a space joins the
     * following word, a whitespace run gives up its last byte when a word
     * follows, 's/'t are pieces, digits and punctuation are runs, and
     * bytes >= 0x80 (UTF-8) are letters. */
    static const char *cases[][2] = {
        {"Hello world's  end!!\n\n  x 42 3.5 été",
         "Hello| world|'s| | end|!!|\n\n | x| 42| 3|.|5| été"},
        {"a\n\nb", "a|\n|\n|b"},
        {"x  ", "x|  "},
        {"don't", "don|'t"},
        {"we'll 're", "we|'ll| '|re"},
        {"\t\tfoo", "\t|\t|foo"},
        {" ?!a", " ?!|a"},
        {"   x", "  | x"},
        {"a1b", "a|1|b"},
        {"日本語 text", "日本語| text"},
        {" ", " "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[256];
        split_join(cases[i][0], got, sizeof got);
        CHECKF(strcmp(got, cases[i][1]) == 0, "case %zu: got [%s] want [%s]", i, got, cases[i][1]);
    }
}

/* ------------------------------------------------ hand-worked training */

/* Corpus "aaaa aaaa bcbc. 12 12". Pre-split words and counts:
 *   "aaaa" x1, " aaaa" x1, " bcbc" x1, "." x1, " 12" x2.
 * Ids: ' '=32 '.'=46 '1'=49 '2'=50 a=97 b=98 c=99. Pair counts:
 *   (a,a)=3+3=6  (' ',a)=1  (' ',b)=1  (b,c)=2  (c,b)=1  (' ','1')=2  ('1','2')=2
 * 256 = (97,97): count 6. "aaaa" -> [256,256] (3 overlapping (a,a) become
 *   2 merges), " aaaa" -> [32,256,256]. New: (256,256)=2, (32,256)=1.
 * Now four pairs have count 2: (256,256) (98,99) (32,49) (49,50);
 * the smallest (left,right) wins:
 * 257 = (32,49): " 12" -> [257,50]. New (257,50)=2; (49,50)=0.
 * 258 = (98,99) (count 2, beats (256,256) and (257,50)): " bcbc" ->
 *   [32,258,258]. New (32,258)=1, (258,258)=1; (32,98), (99,98) gone.
 * 259 = (256,256) (count 2, beats (257,50)): "aaaa" -> [259],
 *   " aaaa" -> [32,259]; (32,256) gone, (32,259)=1.
 * 260 = (257,50): " 12" -> [260].
 * Left: (32,258)=1 (258,258)=1 (32,259)=1; smallest first:
 * 261 = (32,258): " bcbc" -> [261,258]; (258,258) gone, (261,258)=1.
 * 262 = (32,259): " aaaa" -> [262].   263 = (261,258): " bcbc" -> [263].
 * Then no pairs are left: 8 merges, <|endoftext|> = 264, vocab 265. */
TEST(tok_hand_worked_merges) {
    static const int want[8][2] = {{97, 97},  {32, 49},  {98, 99},  {256, 256},
                                   {257, 50}, {32, 258}, {32, 259}, {261, 258}};
    const char *text = "aaaa aaaa bcbc. 12 12";
    al_tokenizer *t = train_str(text, strlen(text), 300); /* asks for more than exists */
    if (!t) return;
    CHECK(al_tok_vocab_size(t) == 265);
    CHECK(al_tok_eot(t) == 264);
    for (int k = 0; k < 8; k++) {
        int a = -1, b = -1;
        CHECK(al_tok_merge(t, 256 + k, &a, &b) == 0);
        CHECKF(a == want[k][0] && b == want[k][1], "merge %d: got (%d,%d) want (%d,%d)", k, a, b,
               want[k][0], want[k][1]);
    }
    int a, b;
    CHECK(al_tok_merge(t, 264, &a, &b) == -1 && al_tok_merge(t, 97, &a, &b) == -1);
    /* Encoding by rank: "aaaaa" -> (a,a) twice left to right, leaving a:
     * [256,256,97] -> (256,256) -> [259,97]. "12" has no (49,50) merge. */
    struct {
        const char *s;
        int n, ids[4];
    } enc[] = {{"aaaaa", 2, {259, 97}},
               {" bcbc.", 2, {263, 46}},
               {" 12 12", 2, {260, 260}},
               {"12", 2, {49, 50}},
               {"aaaa<|endoftext|> aaaa", 3, {259, 264, 262}}};
    for (size_t i = 0; i < sizeof enc / sizeof enc[0]; i++) {
        int *ids;
        size_t n;
        al_err e;
        CHECK_OK(al_tok_encode(t, (const unsigned char *)enc[i].s, strlen(enc[i].s), 1, &ids, &n,
                               &e),
                 &e);
        int same = n == (size_t)enc[i].n;
        for (size_t k = 0; same && k < n; k++) same = ids[k] == enc[i].ids[k];
        CHECKF(same, "encode [%s]: got %zu ids, first %d", enc[i].s, n, n ? ids[0] : -1);
        free(ids);
    }
    size_t len;
    const unsigned char *p = al_tok_bytes(t, 263, &len);
    CHECK(len == 5 && memcmp(p, " bcbc", 5) == 0);
    al_tok_free(t);
    /* A smaller vocabulary keeps the first merges only. */
    t = train_str(text, strlen(text), 260);
    if (!t) return;
    CHECK(al_tok_vocab_size(t) == 260 && al_tok_eot(t) == 259);
    CHECK(al_tok_merge(t, 258, &a, &b) == 0 && a == 98 && b == 99);
    al_tok_free(t);
}

/* "<|endoftext|>" in training text separates documents: no merge may join
 * bytes across it, and its own bytes are not learned. */
TEST(tok_train_skips_eot_text) {
    const char *text = "ab<|endoftext|>ab<|endoftext|>ab";
    al_tokenizer *t = train_str(text, strlen(text), 300);
    if (!t) return;
    /* Words: "ab" x3 only -> one merge (97,98). */
    int a, b;
    CHECK(al_tok_vocab_size(t) == 258);
    CHECK(al_tok_merge(t, 256, &a, &b) == 0 && a == 97 && b == 98);
    al_tok_free(t);
}

/* ------------------------------------------------------- round trips */

TEST(tok_round_trip_random_bytes) {
    size_t clen;
    char *corpus = gen_corpus(7, 6000, &clen);
    al_tokenizer *t = train_str(corpus, clen, 600);
    free(corpus);
    if (!t) return;
    CHECK(al_tok_vocab_size(t) == 600);
    static const char *pieces[] = {"ba",   "na",       "the ",     " and", AL_EOT_TEXT,
                                   "\xc3", "\xff\xfe", "\xe2\x82", "é",    "日本",
                                   "\n\n", "  ",       "'s",       "42"};
    al_rng r;
    al_rng_seed(&r, 99);
    size_t cap = 20000;
    unsigned char *s = malloc(cap);
    int *ref = malloc(cap * sizeof(int));
    for (int trial = 0; trial < 300; trial++) {
        size_t n = 0, want = trial == 0 ? 0 : al_rng_below(&r, 400);
        if (trial == 1) { /* one very long "word": exercises the heap merger */
            for (; n < 9000; n++) s[n] = "banatori"[n % (n % 3 ? 4 : 8)];
            want = n;
        }
        while (n < want) {
            uint32_t kind = al_rng_below(&r, 10);
            if (kind < 3)
                s[n++] = (unsigned char)al_rng_below(&r, 256); /* NUL included */
            else if (kind < 4)
                s[n++] = 0;
            else {
                const char *p = pieces[al_rng_below(&r, 14)];
                size_t l = strlen(p);
                memcpy(s + n, p, l);
                n += l;
            }
        }
        size_t n_eot_text = 0, el = strlen(AL_EOT_TEXT);
        for (size_t k = 0; k + el <= n; k++)
            if (memcmp(s + k, AL_EOT_TEXT, el) == 0) n_eot_text++, k += el - 1;
        for (int special = 0; special < 2; special++) {
            int *ids;
            size_t m;
            al_err e;
            CHECK_OK(al_tok_encode(t, s, n, special, &ids, &m, &e), &e);
            size_t mr = ref_encode(t, s, n, special, ref);
            int same = m == mr;
            size_t n_eot = 0;
            for (size_t k = 0; k < m; k++) {
                if (same && ids[k] != ref[k]) same = 0;
                n_eot += ids[k] == al_tok_eot(t);
            }
            CHECKF(same, "trial %d special %d: %zu ids vs reference %zu", trial, special, m, mr);
            CHECKF(n_eot == (special ? n_eot_text : 0), "trial %d: %zu eot ids, %zu in text", trial,
                   n_eot, n_eot_text);
            CHECKF(m <= n, "more ids than bytes");
            unsigned char *back;
            size_t nb;
            CHECK_OK(al_tok_decode(t, ids, m, &back, &nb, &e), &e);
            CHECKF(nb == n && memcmp(back, s, n) == 0, "trial %d special %d: round trip differs",
                   trial, special);
            free(back);
            free(ids);
        }
    }
    int bad[2] = {5, 600};
    unsigned char *out;
    size_t nb;
    al_err e;
    CHECK(al_tok_decode(t, bad, 2, &out, &nb, &e) == -1 && strstr(e.msg, "600"));
    free(s);
    free(ref);
    al_tok_free(t);
}

TEST(tok_byte_level) {
    al_tokenizer *t;
    al_err e;
    CHECK_OK(al_tok_byte_level(&t, &e), &e);
    CHECK(al_tok_vocab_size(t) == 257 && al_tok_eot(t) == 256);
    const unsigned char s[] = "a\0b<|endoftext|>";
    int *ids;
    size_t m;
    CHECK_OK(al_tok_encode(t, s, sizeof s - 1, 1, &ids, &m, &e), &e);
    CHECK(m == 4 && ids[0] == 'a' && ids[1] == 0 && ids[2] == 'b' && ids[3] == 256);
    free(ids);
    al_tok_free(t);
}

/* ------------------------------------------------------- determinism */

TEST(tok_deterministic_and_json_round_trip) {
    size_t clen;
    char *corpus = gen_corpus(3, 4000, &clen);
    al_tokenizer *t1 = train_str(corpus, clen, 500), *t2 = train_str(corpus, clen, 500);
    free(corpus);
    if (!t1 || !t2) return;
    al_err e;
    CHECK_OK(al_tok_save(t1, t_path("a.json"), &e), &e);
    CHECK_OK(al_tok_save(t2, t_path("b.json"), &e), &e);
    char *a = t_slurp(t_path("a.json")), *b = t_slurp(t_path("b.json"));
    CHECK(a && b && strcmp(a, b) == 0);
    /* Load and save again: the same bytes, the same merges. */
    al_tokenizer *t3;
    CHECK_OK(al_tok_load(t_path("a.json"), &t3, &e), &e);
    CHECK_OK(al_tok_save(t3, t_path("c.json"), &e), &e);
    char *c = t_slurp(t_path("c.json"));
    CHECK(c && a && strcmp(a, c) == 0);
    CHECK(al_tok_vocab_size(t3) == 500 && al_tok_eot(t3) == 499);
    for (int id = 256; id < 499; id++) {
        int x1, y1, x3, y3;
        al_tok_merge(t1, id, &x1, &y1);
        al_tok_merge(t3, id, &x3, &y3);
        CHECKF(x1 == x3 && y1 == y3, "merge %d differs after load", id);
    }
    /* The file is readable JSON with the documented keys. */
    cJSON *root = a ? cJSON_Parse(a) : NULL;
    CHECK(root != NULL);
    if (root) {
        CHECK(strcmp(cJSON_GetObjectItem(root, "type")->valuestring, "bpe-bytes") == 0);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(root, "merges")) == 243);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(root, "vocab")) == 500);
        CHECK(strcmp(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "vocab"), 32)->valuestring,
                     "\xe2\x90\xa3") == 0);
        cJSON_Delete(root);
    }
    free(a);
    free(b);
    free(c);
    al_tok_free(t1);
    al_tok_free(t2);
    al_tok_free(t3);
}

/* --------------------------------------------------- corrupted files */

/* Write the hand-worked tokenizer's JSON after `edit`, load it, and check
 * the error names the file and contains `want`. */
static void expect_refused(cJSON *(*edit)(cJSON *), const char *name, const char *want) {
    const char *text = "aaaa aaaa bcbc. 12 12";
    al_tokenizer *t = train_str(text, strlen(text), 300);
    if (!t) return;
    al_err e;
    CHECK_OK(al_tok_save(t, t_path("good.json"), &e), &e);
    al_tok_free(t);
    char *good = t_slurp(t_path("good.json"));
    cJSON *root = cJSON_Parse(good);
    free(good);
    root = edit(root);
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    const char *path = t_path(name);
    write_file(path, js, strlen(js));
    cJSON_free(js);
    al_tokenizer *bad = NULL;
    int rc = al_tok_load(path, &bad, &e);
    CHECKF(rc == -1 && bad == NULL, "%s: accepted", name);
    if (rc == -1) {
        CHECKF(strstr(e.msg, path) != NULL, "%s: message does not name the file: %s", name, e.msg);
        CHECKF(strstr(e.msg, want) != NULL, "%s: message [%s] lacks [%s]", name, e.msg, want);
    }
    al_tok_free(bad);
}

static cJSON *set_merge(cJSON *r, int k, cJSON *pair) {
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(r, "merges"), k, pair);
    return r;
}
static cJSON *ed_future(cJSON *r) {
    int p[2] = {900, 97};
    return set_merge(r, 2, cJSON_CreateIntArray(p, 2));
}
static cJSON *ed_self(cJSON *r) { /* merges[3] defines 259, so 259 is not yet defined */
    int p[2] = {97, 259};
    return set_merge(r, 3, cJSON_CreateIntArray(p, 2));
}
static cJSON *ed_type(cJSON *r) {
    cJSON *p = cJSON_CreateArray();
    cJSON_AddItemToArray(p, cJSON_CreateNumber(1));
    cJSON_AddItemToArray(p, cJSON_CreateString("x"));
    return set_merge(r, 1, p);
}
static cJSON *ed_fraction(cJSON *r) {
    double p[2] = {97.5, 98};
    return set_merge(r, 0, cJSON_CreateDoubleArray(p, 2));
}
static cJSON *ed_repeat(cJSON *r) {
    int p[2] = {97, 97};
    return set_merge(r, 4, cJSON_CreateIntArray(p, 2));
}
static cJSON *ed_vocab_size(cJSON *r) {
    cJSON_ReplaceItemInObject(r, "vocab_size", cJSON_CreateNumber(300));
    return r;
}
static cJSON *ed_eot(cJSON *r) {
    cJSON_ReplaceItemInObject(r, "eot_id", cJSON_CreateNumber(5));
    return r;
}
static cJSON *ed_kind(cJSON *r) {
    cJSON_ReplaceItemInObject(r, "type", cJSON_CreateString("wordpiece"));
    return r;
}
static cJSON *ed_no_merges(cJSON *r) {
    cJSON_DeleteItemFromObject(r, "merges");
    return r;
}
static cJSON *ed_unknown(cJSON *r) {
    cJSON_AddNumberToObject(r, "mergez", 1);
    return r;
}
static cJSON *ed_short_vocab(cJSON *r) {
    cJSON_DeleteItemFromArray(cJSON_GetObjectItem(r, "vocab"), 3);
    return r;
}
static cJSON *ed_vocab_number(cJSON *r) {
    cJSON_ReplaceItemInArray(cJSON_GetObjectItem(r, "vocab"), 7, cJSON_CreateNumber(7));
    return r;
}
static cJSON *ed_not_object(cJSON *r) {
    cJSON_Delete(r);
    return cJSON_CreateArray();
}
/* 40 merges, each token twice the previous: 2^40 bytes if believed. */
static cJSON *ed_doubling(cJSON *r) {
    cJSON *m = cJSON_CreateArray(), *v = cJSON_CreateArray();
    for (int k = 0; k < 40; k++) {
        int p[2] = {k ? 255 + k : 97, k ? 255 + k : 97};
        cJSON_AddItemToArray(m, cJSON_CreateIntArray(p, 2));
    }
    for (int k = 0; k < 297; k++) cJSON_AddItemToArray(v, cJSON_CreateString("x"));
    cJSON_ReplaceItemInObject(r, "merges", m);
    cJSON_ReplaceItemInObject(r, "vocab", v);
    cJSON_ReplaceItemInObject(r, "vocab_size", cJSON_CreateNumber(297));
    cJSON_ReplaceItemInObject(r, "eot_id", cJSON_CreateNumber(296));
    return r;
}

TEST(tok_corrupt_json_refused) {
    expect_refused(ed_future, "future.json",
                   "merges[2] refers to token 900 which is not yet defined");
    expect_refused(ed_self, "self.json", "merges[3] refers to token 259 which is not yet defined");
    expect_refused(ed_type, "type.json", "merges[1] is not a pair");
    expect_refused(ed_fraction, "fraction.json", "merges[0] is not a pair");
    expect_refused(ed_repeat, "repeat.json", "merges[4] repeats the pair [97, 97] of merges[0]");
    expect_refused(ed_vocab_size, "vsize.json", "vocab_size 300 needs 43 merges");
    expect_refused(ed_eot, "eot.json", "\"eot_id\" must be the last id, 264");
    expect_refused(ed_kind, "kind.json", "\"type\" must be \"bpe-bytes\"");
    expect_refused(ed_no_merges, "nomerges.json", "\"merges\" must be an array");
    expect_refused(ed_unknown, "unknown.json", "unknown key \"mergez\"");
    expect_refused(ed_short_vocab, "shortvocab.json", "\"vocab\" must be an array of");
    expect_refused(ed_vocab_number, "vocabnum.json", "vocab[7] is not a string");
    expect_refused(ed_not_object, "array.json", "not a JSON object");
    expect_refused(ed_doubling, "doubling.json", "merges[");

    al_err e;
    al_tokenizer *t = NULL;
    const char *trunc = "{\"type\": \"bpe-bytes\", \"merges\": [[97, 9";
    write_file(t_path("trunc.json"), trunc, strlen(trunc));
    CHECK(al_tok_load(t_path("trunc.json"), &t, &e) == -1 && strstr(e.msg, "not valid JSON") &&
          strstr(e.msg, "trunc.json"));
    write_file(t_path("empty.json"), "", 0);
    CHECK(al_tok_load(t_path("empty.json"), &t, &e) == -1 && strstr(e.msg, "empty.json"));
    CHECK(al_tok_load(t_path("missing.json"), &t, &e) == -1 && strstr(e.msg, "missing.json"));
    CHECK(t == NULL);
}

/* ------------------------------------------------------------ display */

TEST(tok_display_strings) {
    al_tokenizer *t;
    al_err e;
    CHECK_OK(al_tok_byte_level(&t, &e), &e);
    char buf[64];
    struct {
        int id;
        const char *want;
    } cases[] = {{' ', "\xe2\x90\xa3"}, {'\n', "\\n"},   {'\t', "\\t"},      {0, "\\x00"},
                 {'\r', "\\x0d"},       {0x7f, "\\x7f"}, {'A', "A"},         {'\\', "\\"},
                 {0xff, "\\xff"},       {0xc3, "\\xc3"}, {256, AL_EOT_TEXT}, {257, "<bad id>"},
                 {-1, "<bad id>"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = al_tok_display(t, cases[i].id, buf, sizeof buf);
        CHECKF(strcmp(buf, cases[i].want) == 0 && n == strlen(buf), "id %d: [%s] want [%s]",
               cases[i].id, buf, cases[i].want);
    }
    al_tok_free(t);
    /* " é" four times: pairs (32,0xc3) and (0xc3,0xa9) both count 4, the
     * smaller pair goes first: 256 = " \xc3" (half a character), then
     * 257 = (256, 0xa9) = " é". */
    t = train_str(" é é é é", strlen(" é é é é"), 259);
    if (!t) return;
    al_tok_display(t, 256, buf, sizeof buf);
    CHECKF(strcmp(buf, "\xe2\x90\xa3\\xc3") == 0, "256: [%s]", buf);
    al_tok_display(t, 257, buf, sizeof buf);
    CHECKF(strcmp(buf, "\xe2\x90\xa3\xc3\xa9") == 0, "257: [%s]", buf);
    /* Truncation never cuts a character or an escape: "␣" is 3 bytes,
     * "é" 2, so with room for 4 bytes only "␣" fits. */
    CHECK(al_tok_display(t, 257, buf, 4) == 3 && strcmp(buf, "\xe2\x90\xa3") == 0);
    CHECK(al_tok_display(t, 257, buf, 5) == 3);
    CHECK(al_tok_display(t, 257, buf, 6) == 5);
    CHECK(al_tok_display(t, 256, buf, 6) == 3 && strcmp(buf, "\xe2\x90\xa3") == 0);
    CHECK(al_tok_display(t, 256, buf, 1) == 0 && buf[0] == 0);
    al_tok_free(t);
}

/* ------------------------------------------------------------- CLI */

/* Documents of a few lines each, separated by blank lines (some with
 * spaces or \r, which still count as blank). */
static char *gen_docs(int n_docs, char ***docs_out) {
    static const char *words[] = {"the",     "cat", "sat",  "on", "a",  "mat",
                                  "Seoyeon", "ran", "home", "é",  "42", "!"};
    al_rng r;
    al_rng_seed(&r, 5);
    char **docs = calloc((size_t)n_docs, sizeof *docs);
    size_t cap = (size_t)n_docs * 400, o = 0;
    char *all = malloc(cap);
    for (int d = 0; d < n_docs; d++) {
        char doc[400];
        size_t k = 0;
        int lines = 1 + (int)al_rng_below(&r, 3);
        for (int l = 0; l < lines; l++) {
            int nw = 2 + (int)al_rng_below(&r, 8);
            for (int w = 0; w < nw; w++)
                k += (size_t)snprintf(doc + k, sizeof doc - k, "%s%s", w ? " " : "",
                                      words[al_rng_below(&r, 12)]);
            if (l + 1 < lines) doc[k++] = '\n';
        }
        doc[k] = 0;
        docs[d] = strdup(doc);
        o += (size_t)snprintf(all + o, cap - o, "%s%s", doc,
                              d % 3 == 0   ? "\n\n"
                              : d % 3 == 1 ? "\n  \n\n"
                                           : "\n\r\n");
    }
    *docs_out = docs;
    return all;
}

/* Check a token file's header by hand and decode it to text. */
static char *decode_file(const al_tokenizer *t, const char *path, size_t *n_tok, size_t *n_eot) {
    char *raw = t_slurp(path);
    al_tokens tk;
    al_err e;
    *n_tok = *n_eot = 0;
    if (!raw || al_tokens_load(path, &tk, &e) != 0) {
        t_fail(__FILE__, __LINE__, "cannot load %s", path);
        free(raw);
        return NULL;
    }
    int32_t hdr[3];
    memcpy(hdr, raw, sizeof hdr);
    CHECK(hdr[0] == 20240520 && hdr[1] == 1 && (size_t)hdr[2] == tk.n);
    free(raw);
    int *ids = malloc(tk.n * sizeof(int));
    for (size_t i = 0; i < tk.n; i++) {
        ids[i] = tk.tok[i];
        *n_eot += ids[i] == al_tok_eot(t);
    }
    CHECK(ids[0] == al_tok_eot(t));
    unsigned char *text;
    size_t nb;
    CHECK_OK(al_tok_decode(t, ids, tk.n, &text, &nb, &e), &e);
    *n_tok = tk.n;
    free(ids);
    al_tokens_free(&tk);
    return (char *)text;
}

static char *join_docs(char **docs, int lo, int hi) {
    size_t cap = 1;
    for (int d = lo; d < hi; d++) cap += strlen(docs[d]) + strlen(AL_EOT_TEXT);
    char *s = malloc(cap);
    s[0] = 0;
    for (int d = lo; d < hi; d++) {
        strcat(s, AL_EOT_TEXT);
        strcat(s, docs[d]);
    }
    return s;
}

TEST(tok_cli_train_and_encode) {
    char **docs;
    char *text = gen_docs(40, &docs);
    write_file(t_path("in.txt"), text, strlen(text));
    CHECK(t_sh("%s tokenizer train --in %s --vocab 280 --out %s >%s 2>&1", t_bin(),
               t_path("in.txt"), t_path("tok.json"), t_path("train.out")) == 0);
    al_tokenizer *t;
    al_err e;
    CHECK_OK(al_tok_load(t_path("tok.json"), &t, &e), &e);
    if (!t) return;
    CHECK(al_tok_vocab_size(t) == 280);
    /* 40 documents, --val 0.25: the last 10 are validation. */
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --val 0.25 >%s 2>&1", t_bin(),
               t_path("tok.json"), t_path("in.txt"), t_path("sub/x.bin"), t_path("enc.out")) == 0);
    size_t ntr, nva, etr, eva;
    char *tr = decode_file(t, t_path("sub/x.train.bin"), &ntr, &etr);
    char *va = decode_file(t, t_path("sub/x.val.bin"), &nva, &eva);
    char *want_tr = join_docs(docs, 0, 30), *want_va = join_docs(docs, 30, 40);
    CHECK(tr && strcmp(tr, want_tr) == 0);
    CHECK(va && strcmp(va, want_va) == 0);
    CHECK(etr == 30 && eva == 10);
    char *out = t_slurp(t_path("enc.out")), line[128];
    snprintf(line, sizeof line, "train: %zu tokens (30 documents)", ntr);
    CHECKF(out && strstr(out, line), "stdout lacks [%s]: %s", line, out ? out : "");
    /* The same tokens as the library gives for each document. */
    size_t n_lib = 0;
    for (int d = 0; d < 30; d++) {
        int *ids;
        size_t m;
        CHECK_OK(al_tok_encode(t, (const unsigned char *)docs[d], strlen(docs[d]), 0, &ids, &m, &e),
                 &e);
        n_lib += m + 1;
        free(ids);
    }
    CHECK(n_lib == ntr);
    /* --docs line: every non-blank line is a document; --val 0: no val file. */
    int n_lines = 0;
    for (int d = 0; d < 40; d++) {
        n_lines++;
        for (char *p = docs[d]; *p; p++) n_lines += *p == '\n';
    }
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --val 0 --docs line >/dev/null 2>&1",
               t_bin(), t_path("tok.json"), t_path("in.txt"), t_path("y.bin")) == 0);
    size_t nl, el;
    free(decode_file(t, t_path("y.train.bin"), &nl, &el));
    CHECKF(el == (size_t)n_lines, "%zu documents, want %d lines", el, n_lines);
    CHECK(!al_file_exists(t_path("y.val.bin")));
    /* --docs story: paragraphs (blank line between) stay in one document,
     * a line straight after a line starts the next; --docs blank cuts the
     * same text at paragraphs and misses the story boundary. */
    const char *stories = "once a fox ran.\n\nthe fox slept.\nlily had a cat.\n\n\nthe cat "
                          "sat.\n\nthe end.\nbob swam.\n";
    write_file(t_path("st.txt"), stories, strlen(stories));
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --val 0 --docs story >/dev/null 2>&1",
               t_bin(), t_path("tok.json"), t_path("st.txt"), t_path("st.bin")) == 0);
    size_t ns, es;
    char *st = decode_file(t, t_path("st.train.bin"), &ns, &es);
    CHECKF(es == 3 && st &&
               !strcmp(st, "<|endoftext|>once a fox ran.\n\nthe fox slept."
                           "<|endoftext|>lily had a cat.\n\n\nthe cat sat.\n\nthe "
                           "end.<|endoftext|>bob swam."),
           "%zu stories: [%s]", es, st ? st : "");
    free(st);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --val 0 --docs blank >/dev/null 2>&1",
               t_bin(), t_path("tok.json"), t_path("st.txt"), t_path("sb.bin")) == 0);
    free(decode_file(t, t_path("sb.train.bin"), &ns, &es));
    CHECKF(es == 4, "--docs blank: %zu documents", es);
    /* Errors: usage (2) and bad input (1), with nothing written. */
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --docs para 2>/dev/null", t_bin(),
               t_path("tok.json"), t_path("in.txt"), t_path("z.bin")) == 2);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s 2>%s", t_bin(), t_path("nope.json"),
               t_path("in.txt"), t_path("z.bin"), t_path("err.txt")) == 1);
    char *err = t_slurp(t_path("err.txt"));
    CHECK(err && strstr(err, "nope.json"));
    write_file(t_path("one.txt"), "just one document\n", 18);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s 2>/dev/null", t_bin(), t_path("tok.json"),
               t_path("one.txt"), t_path("z.bin")) == 1);
    CHECK(!al_file_exists(t_path("z.train.bin")));
    CHECK(t_sh("%s tokenizer train --in %s --vocab 100 --out %s 2>/dev/null", t_bin(),
               t_path("in.txt"), t_path("t2.json")) == 2);
    free(err);
    free(out);
    free(tr);
    free(va);
    free(want_tr);
    free(want_va);
    for (int d = 0; d < 40; d++) free(docs[d]);
    free(docs);
    free(text);
    al_tok_free(t);
}

/* Token files hold uint16 ids: a 65537-token vocabulary is refused. */
TEST(tok_cli_refuses_big_vocab) {
    const int nv = 65537, nm = nv - 257;
    cJSON *r = cJSON_CreateObject(), *m = cJSON_CreateArray(), *v = cJSON_CreateArray();
    cJSON_AddStringToObject(r, "type", "bpe-bytes");
    cJSON_AddNumberToObject(r, "version", 1);
    cJSON_AddStringToObject(r, "pretokenizer", "gpt2");
    cJSON_AddNumberToObject(r, "vocab_size", nv);
    cJSON_AddNumberToObject(r, "eot_id", nv - 1);
    for (int k = 0; k < nm; k++) {
        int p[2] = {k % 256, k / 256}; /* all distinct pairs of bytes */
        cJSON_AddItemToArray(m, cJSON_CreateIntArray(p, 2));
    }
    for (int k = 0; k < nv; k++) cJSON_AddItemToArray(v, cJSON_CreateString("x"));
    cJSON_AddItemToObject(r, "merges", m);
    cJSON_AddItemToObject(r, "vocab", v);
    char *js = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    write_file(t_path("big.json"), js, strlen(js));
    cJSON_free(js);
    al_tokenizer *t;
    al_err e;
    CHECK_OK(al_tok_load(t_path("big.json"), &t, &e), &e); /* valid as a tokenizer */
    al_tok_free(t);
    write_file(t_path("in.txt"), "a\n\nb\n", 5);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s 2>%s", t_bin(), t_path("big.json"),
               t_path("in.txt"), t_path("x.bin"), t_path("err.txt")) == 1);
    char *err = t_slurp(t_path("err.txt"));
    CHECKF(err && strstr(err, "65537 tokens"), "stderr: %s", err ? err : "");
    CHECK(!al_file_exists(t_path("x.train.bin")));
    free(err);
}

/* The loader reads one JSON value and ignores the bytes after it, which
 * the fuzz target's inputs rely on (a tokenizer, then a text to encode):
 * its seed files load. */
TEST(tok_load_ignores_bytes_after_the_json) {
    al_tokenizer *t = NULL;
    al_err e;
    CHECK_OK(al_tok_load("tests/fuzz/hf_tokenizer/pairs-nfc.json", &t, &e), &e);
    CHECK(t != NULL && al_tok_vocab_size(t) == 268);
    al_tok_free(t);
}
