/* tok_hf_pre.c -- the normalizer (NFC, by utf8proc) and pre-tokenizer
 * (ByteLevel, Split, Digits and Sequences of them, regular expressions by
 * Oniguruma) of a Hugging Face tokenizer.json, as its Rust library runs
 * them (tokenizers' normalizer.rs, pattern.rs and pre_tokenizers/).
 *
 * A Sequence is flattened into a list of steps; every step but the last
 * (ByteLevel) cuts each piece it is given into smaller pieces: it lists
 * the piece as (range, is_match) items -- the matches of its pattern and
 * the gaps between them -- folds the items by the split's behaviour, and
 * hands each non-empty piece to the next step. Regular expressions are
 * Oniguruma's with its default syntax, as the onig crate compiles them,
 * and iterate their matches as that crate's find_iter does (an empty
 * match right after a non-empty one is skipped), so the same pattern
 * cuts text at the same places. */
#define _POSIX_C_SOURCE 200809L
#include <oniguruma.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_hf.h"

#define MAX_STEPS 32
#define MAX_DEPTH 8 /* of nested Sequences */
#define MAX_PATTERN 4096
/* Backtracking steps one regex search may take before it is an error: a
 * hostile pattern must not hang the encoder (10 million is Oniguruma's
 * own default for one match; Hugging Face's panics when it is passed). */
#define RETRY_LIMIT 10000000UL

/* GPT-2's pre-tokenizer pattern, as Hugging Face's ByteLevel uses it. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

enum { ST_REGEX, ST_STRING, ST_DIGITS, ST_BYTELEVEL };
enum { B_REMOVED, B_ISOLATED, B_MERGED_PREV, B_MERGED_NEXT, B_CONTIGUOUS };

typedef struct hf_step {
    int kind, behavior, invert;
    regex_t *re; /* ST_REGEX; ST_BYTELEVEL with use_regex */
    char *lit; /* ST_STRING */
    size_t lit_n;
    int add_prefix_space; /* ST_BYTELEVEL */
} hf_step;

struct hf_pre {
    int nfc;
    hf_step steps[MAX_STEPS];
    int n_steps;
};

typedef struct item {
    size_t a, b;
    int match;
} item;

struct hf_scratch {
    item *items[MAX_STEPS]; /* one list per step: steps recurse */
    size_t cap[MAX_STEPS];
    unsigned char *pbuf; /* a piece with its prefix space */
    size_t pcap;
    OnigRegion *region;
    OnigMatchParam *mp;
};

/* ------------------------------------------------------------- UTF-8 */

size_t hf_utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the 2nd byte */
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0; /* no overlongs */
        if (c == 0xed) hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f; /* <= U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return len;
}

size_t hf_utf8_check(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = hf_utf8_len(s + i, n - i);
        if (!l) return i;
        i += l;
    }
    return n;
}

/* The code point of the valid character of len bytes at s. */
static uint32_t cp_of(const unsigned char *s, size_t len) {
    if (len == 1) return s[0];
    uint32_t c = s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) c = c << 6 | (s[i] & 0x3f);
    return c;
}

const char *hf_quote(char *buf, size_t cap, const char *s) {
    size_t o = 0, n = strlen(s), i = 0;
    if (cap < 8) return "";
    buf[o++] = '\'';
    while (i < n && o + 8 < cap && i < 40) {
        size_t l = hf_utf8_len((const unsigned char *)s + i, n - i);
        if (l <= 1) {
            buf[o++] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f ? '?' : s[i];
            i++;
        } else {
            memcpy(buf + o, s + i, l);
            o += l;
            i += l;
        }
    }
    if (i < n && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '\'';
    buf[o] = 0;
    return buf;
}

/* ------------------------------------------------------------ parsing */

/* Refuse keys of obj that are not in keys (NULL-terminated). */
static int only_keys(const cJSON *obj, const char *const *keys, const char *what, al_err *e) {
    unsigned seen = 0; /* a key given twice would be read once: refused */
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = 0;
        while (keys[k] && strcmp(it->string, keys[k]) != 0) k++;
        char q[64];
        if (!keys[k])
            return al_errf(e, "%s: unsupported key %s", what, hf_quote(q, sizeof q, it->string));
        if (seen >> k & 1)
            return al_errf(e, "%s: repeated key %s", what, hf_quote(q, sizeof q, it->string));
        seen |= 1u << k;
    }
    return 0;
}

/* A boolean member: absent gives def, or is an error when def < 0. */
static int get_bool(const cJSON *obj, const char *key, int def, int *out, const char *what,
                    al_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v && def >= 0) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) return al_errf(e, "%s: \"%s\" must be true or false", what, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;
static void start_onig(void) {
    OnigEncoding use[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(use, 1);
}

static int compile(const char *pat, size_t n, regex_t **re, const char *what, al_err *e) {
    pthread_once(&onig_once, start_onig);
    if (n > MAX_PATTERN)
        return al_errf(e, "%s: the pattern is longer than %d bytes", what, MAX_PATTERN);
    if (hf_utf8_check((const unsigned char *)pat, n) != n)
        return al_errf(e, "%s: the pattern is not valid UTF-8", what);
    OnigErrorInfo info;
    int r = onig_new(re, (const OnigUChar *)pat, (const OnigUChar *)pat + n, ONIG_OPTION_NONE,
                     ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
    if (r != ONIG_NORMAL) {
        *re = NULL;
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &info);
        char q[64], m[64];
        return al_errf(e, "%s: pattern %s: %s", what, hf_quote(q, sizeof q, pat),
                       hf_quote(m, sizeof m, (const char *)msg));
    }
    return 0;
}

static int add_step(hf_pre *p, hf_step s, al_err *e) {
    if (p->n_steps == MAX_STEPS) {
        if (s.re) onig_free(s.re);
        free(s.lit);
        return al_errf(e, "pre_tokenizer: more than %d steps", MAX_STEPS);
    }
    p->steps[p->n_steps++] = s;
    return 0;
}

static int parse_split(hf_pre *p, const cJSON *j, al_err *e) {
    static const char *const keys[] = {"type", "pattern", "behavior", "invert", NULL};
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    if (only_keys(j, keys, "pre_tokenizer Split", e)) return -1;
    hf_step s = {.kind = ST_REGEX, .behavior = -1};
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "behavior");
    for (int i = 0; i < 5 && cJSON_IsString(b); i++)
        if (strcmp(b->valuestring, names[i]) == 0) s.behavior = i;
    if (s.behavior < 0) {
        char q[64];
        return al_errf(e,
                       "pre_tokenizer Split: unsupported behavior %s (Removed, Isolated, "
                       "MergedWithPrevious, MergedWithNext or Contiguous)",
                       cJSON_IsString(b) ? hf_quote(q, sizeof q, b->valuestring) : "(none)");
    }
    if (get_bool(j, "invert", -1, &s.invert, "pre_tokenizer Split", e)) return -1;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(j, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
    if (!cJSON_IsObject(pat) || cJSON_GetArraySize(pat) != 1 ||
        !(cJSON_IsString(re) || cJSON_IsString(str)))
        return al_errf(e, "pre_tokenizer Split: \"pattern\" must be {\"Regex\": \"...\"} or "
                          "{\"String\": \"...\"}");
    if (cJSON_IsString(re)) {
        if (compile(re->valuestring, strlen(re->valuestring), &s.re, "pre_tokenizer Split", e))
            return -1;
    } else {
        s.kind = ST_STRING;
        s.lit_n = strlen(str->valuestring);
        if (s.lit_n == 0 || s.lit_n > MAX_PATTERN)
            return al_errf(e, "pre_tokenizer Split: the String pattern must have 1..%d bytes",
                           MAX_PATTERN);
        if (hf_utf8_check((const unsigned char *)str->valuestring, s.lit_n) != s.lit_n)
            return al_errf(e, "pre_tokenizer Split: the String pattern is not valid UTF-8");
        s.lit = malloc(s.lit_n);
        if (!s.lit) return al_errf(e, "out of memory");
        memcpy(s.lit, str->valuestring, s.lit_n);
    }
    return add_step(p, s, e);
}

static int parse_pre(hf_pre *p, const cJSON *j, int depth, al_err *e) {
    if (depth > MAX_DEPTH)
        return al_errf(e, "pre_tokenizer: Sequences nested deeper than %d", MAX_DEPTH);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (!cJSON_IsObject(j) || !cJSON_IsString(type))
        return al_errf(e, "pre_tokenizer: each step must be an object with a \"type\"");
    const char *t = type->valuestring;
    if (strcmp(t, "Sequence") == 0) {
        static const char *const keys[] = {"type", "pretokenizers", NULL};
        if (only_keys(j, keys, "pre_tokenizer Sequence", e)) return -1;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers"), *it;
        if (!cJSON_IsArray(list))
            return al_errf(e, "pre_tokenizer Sequence: \"pretokenizers\" must be an array");
        cJSON_ArrayForEach(it, list) if (parse_pre(p, it, depth + 1, e)) return -1;
        return 0;
    }
    if (strcmp(t, "ByteLevel") == 0) {
        static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex",
                                           NULL};
        hf_step s = {.kind = ST_BYTELEVEL};
        int trim, use_regex;
        if (only_keys(j, keys, "pre_tokenizer ByteLevel", e) ||
            get_bool(j, "add_prefix_space", -1, &s.add_prefix_space, "pre_tokenizer ByteLevel",
                     e) ||
            get_bool(j, "trim_offsets", 1, &trim, "pre_tokenizer ByteLevel", e) ||
            get_bool(j, "use_regex", 1, &use_regex, "pre_tokenizer ByteLevel", e))
            return -1;
        if (use_regex &&
            compile(gpt2_pattern, sizeof gpt2_pattern - 1, &s.re, "pre_tokenizer ByteLevel", e))
            return -1;
        return add_step(p, s, e);
    }
    if (strcmp(t, "Digits") == 0) {
        static const char *const keys[] = {"type", "individual_digits", NULL};
        int ind;
        if (only_keys(j, keys, "pre_tokenizer Digits", e) ||
            get_bool(j, "individual_digits", -1, &ind, "pre_tokenizer Digits", e))
            return -1;
        hf_step s = {.kind = ST_DIGITS, .behavior = ind ? B_ISOLATED : B_CONTIGUOUS};
        return add_step(p, s, e);
    }
    if (strcmp(t, "Split") == 0) return parse_split(p, j, e);
    char q[64];
    return al_errf(e,
                   "unsupported pre_tokenizer %s (ByteLevel, Split, Digits and Sequences of "
                   "them are)",
                   hf_quote(q, sizeof q, t));
}

static int parse_norm(hf_pre *p, const cJSON *j, int depth, al_err *e) {
    if (depth > MAX_DEPTH)
        return al_errf(e, "normalizer: Sequences nested deeper than %d", MAX_DEPTH);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    if (!cJSON_IsObject(j) || !cJSON_IsString(type))
        return al_errf(e, "normalizer: must be null or an object with a \"type\"");
    if (strcmp(type->valuestring, "NFC") == 0) {
        static const char *const keys[] = {"type", NULL};
        p->nfc = 1; /* NFC of NFC is NFC: a Sequence of them is one */
        return only_keys(j, keys, "normalizer NFC", e);
    }
    if (strcmp(type->valuestring, "Sequence") == 0) {
        static const char *const keys[] = {"type", "normalizers", NULL};
        if (only_keys(j, keys, "normalizer Sequence", e)) return -1;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "normalizers"), *it;
        if (!cJSON_IsArray(list))
            return al_errf(e, "normalizer Sequence: \"normalizers\" must be an array");
        cJSON_ArrayForEach(it, list) if (parse_norm(p, it, depth + 1, e)) return -1;
        return 0;
    }
    char q[64];
    return al_errf(e, "unsupported normalizer %s (NFC and Sequences of it are)",
                   hf_quote(q, sizeof q, type->valuestring));
}

void hf_pre_free(hf_pre *p) {
    if (!p) return;
    for (int i = 0; i < p->n_steps; i++) {
        if (p->steps[i].re) onig_free(p->steps[i].re);
        free(p->steps[i].lit);
    }
    free(p);
}

int hf_pre_parse(const cJSON *normalizer, const cJSON *pre_tokenizer, hf_pre **out, al_err *e) {
    *out = NULL;
    hf_pre *p = al_calloc(1, sizeof *p, e);
    if (!p) return -1;
    int rc = 0;
    if (normalizer && !cJSON_IsNull(normalizer)) rc = parse_norm(p, normalizer, 0, e);
    if (rc == 0 && (!pre_tokenizer || cJSON_IsNull(pre_tokenizer)))
        rc = al_errf(e, "no pre_tokenizer: only byte-level BPE (a ByteLevel pre_tokenizer) is "
                        "supported");
    if (rc == 0) rc = parse_pre(p, pre_tokenizer, 0, e);
    /* ByteLevel maps bytes to its alphabet; a step after it would cut the
     * mapped text, which this implementation never builds. */
    int bl = -1;
    for (int i = 0; rc == 0 && i < p->n_steps; i++)
        if (p->steps[i].kind == ST_BYTELEVEL) {
            if (bl >= 0) rc = al_errf(e, "pre_tokenizer: more than one ByteLevel step");
            bl = i;
        }
    if (rc == 0 && bl < 0)
        rc = al_errf(e, "pre_tokenizer: no ByteLevel step (only byte-level BPE is supported)");
    if (rc == 0 && bl != p->n_steps - 1)
        rc = al_errf(e, "pre_tokenizer: a step after ByteLevel is not supported");
    if (rc) {
        hf_pre_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

/* ----------------------------------------------------------- scratch */

hf_scratch *hf_scratch_new(al_err *e) {
    hf_scratch *sc = al_calloc(1, sizeof *sc, e);
    if (!sc) return NULL;
    sc->region = onig_region_new();
    sc->mp = onig_new_match_param();
    if (!sc->region || !sc->mp) {
        hf_scratch_free(sc);
        al_errf(e, "out of memory");
        return NULL;
    }
    onig_initialize_match_param(sc->mp);
    onig_set_retry_limit_in_match_of_match_param(sc->mp, RETRY_LIMIT);
    onig_set_retry_limit_in_search_of_match_param(sc->mp, RETRY_LIMIT);
    return sc;
}

void hf_scratch_free(hf_scratch *sc) {
    if (!sc) return;
    for (int i = 0; i < MAX_STEPS; i++) free(sc->items[i]);
    free(sc->pbuf);
    if (sc->region) onig_region_free(sc->region, 1);
    if (sc->mp) onig_free_match_param(sc->mp);
    free(sc);
}

static int push_item(hf_scratch *sc, int k, size_t *n, size_t a, size_t b, int match, al_err *e) {
    if (*n == sc->cap[k]) {
        size_t cap = sc->cap[k] ? 2 * sc->cap[k] : 64;
        item *p = realloc(sc->items[k], cap * sizeof *p);
        if (!p) return al_errf(e, "out of memory");
        sc->items[k] = p;
        sc->cap[k] = cap;
    }
    sc->items[k][(*n)++] = (item){a, b, match};
    return 0;
}

/* -------------------------------------------------------- normalizer */

int hf_normalize(const hf_pre *p, const unsigned char *s, size_t n, unsigned char **out,
                 size_t *n_out, al_err *e) {
    *out = NULL;
    *n_out = 0;
    if (!p->nfc) return 0;
    size_t i = 0;
    while (i < n && s[i] < 0x80) i++; /* ASCII is its own NFC */
    if (i == n) return 0;
    if (n > (size_t)(PTRDIFF_MAX / 4)) return al_errf(e, "text too long to normalize");
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r =
        utf8proc_map(s, (utf8proc_ssize_t)n, &dst, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0) return al_errf(e, "NFC: %s", utf8proc_errmsg(r));
    *out = dst;
    *n_out = (size_t)r;
    return 0;
}

/* ----------------------------------------------------- pre-tokenizing */

/* The matches of re in s[0..n) as the onig crate's find_iter yields them,
 * with the gaps between, as items of list k. */
static int regex_items(const regex_t *re, hf_scratch *sc, int k, const unsigned char *s, size_t n,
                       size_t *m, al_err *e) {
    size_t last_end = 0, prev = 0;
    int skip_next_empty = 0;
    while (last_end <= n) {
        onig_region_clear(sc->region);
        int r = onig_search_with_param((regex_t *)re, s, s + n, s + last_end, s + n, sc->region,
                                       ONIG_OPTION_NONE, sc->mp);
        if (r == ONIG_MISMATCH) break;
        if (r < 0) {
            OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
            onig_error_code_to_str(msg, r);
            return al_errf(e, "pre-tokenizing: regular expression: %s", (const char *)msg);
        }
        size_t ms = (size_t)sc->region->beg[0], me = (size_t)sc->region->end[0];
        last_end = me;
        if (me == ms) { /* step over one character so the search moves on */
            last_end += me < n ? hf_utf8_len(s + me, n - me) : 1;
            if (skip_next_empty) {
                skip_next_empty = 0;
                continue;
            }
        } else {
            skip_next_empty = 1;
        }
        if (prev != ms && push_item(sc, k, m, prev, ms, 0, e)) return -1;
        if (push_item(sc, k, m, ms, me, 1, e)) return -1;
        prev = me;
    }
    if (prev != n && push_item(sc, k, m, prev, n, 0, e)) return -1;
    return 0;
}

static int string_items(const hf_step *st, hf_scratch *sc, int k, const unsigned char *s, size_t n,
                        size_t *m, al_err *e) {
    size_t prev = 0;
    for (size_t i = 0; i + st->lit_n <= n;) {
        const unsigned char *q = memchr(s + i, st->lit[0], n - st->lit_n + 1 - i);
        if (!q) break;
        size_t at = (size_t)(q - s);
        if (memcmp(q, st->lit, st->lit_n) != 0) {
            i = at + 1;
            continue;
        }
        if (prev != at && push_item(sc, k, m, prev, at, 0, e)) return -1;
        if (push_item(sc, k, m, at, at + st->lit_n, 1, e)) return -1;
        prev = i = at + st->lit_n;
    }
    if (prev != n && push_item(sc, k, m, prev, n, 0, e)) return -1;
    return 0;
}

/* Rust's char::is_numeric: general category Nd, Nl or No. */
static int is_numeric(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

static int digit_items(hf_scratch *sc, int k, const unsigned char *s, size_t n, size_t *m,
                       al_err *e) {
    size_t last = 0;
    for (size_t i = 0; i < n;) {
        size_t l = hf_utf8_len(s + i, n - i);
        if (is_numeric(cp_of(s + i, l))) {
            if (last < i && push_item(sc, k, m, last, i, 0, e)) return -1;
            if (push_item(sc, k, m, i, i + l, 1, e)) return -1;
            last = i + l;
        }
        i += l;
    }
    if (last < n && push_item(sc, k, m, last, n, 0, e)) return -1;
    return 0;
}

/* Fold the items into pieces by behaviour (NormalizedString::split). */
static size_t fold(item *it, size_t n, int behavior) {
    size_t m = 0;
    int prev = 0;
    switch (behavior) {
    case B_ISOLATED: return n;
    case B_REMOVED:
        for (size_t i = 0; i < n; i++)
            if (!it[i].match) it[m++] = it[i];
        return m;
    case B_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            if (it[i].match == prev && m > 0)
                it[m - 1].b = it[i].b;
            else
                it[m++] = it[i];
            prev = it[i].match;
        }
        return m;
    case B_MERGED_PREV:
        for (size_t i = 0; i < n; i++) {
            if (it[i].match && !prev && m > 0)
                it[m - 1].b = it[i].b;
            else
                it[m++] = it[i];
            prev = it[i].match;
        }
        return m;
    default: { /* B_MERGED_NEXT: the same from the right, written from the end */
        size_t w = n;
        for (size_t i = n; i-- > 0;) {
            item x = it[i];
            if (x.match && !prev && w < n)
                it[w].a = x.a;
            else
                it[--w] = x;
            prev = x.match;
        }
        memmove(it, it + w, (n - w) * sizeof *it);
        return n - w;
    }
    }
}

static int byte_level(const hf_step *st, hf_scratch *sc, const unsigned char *s, size_t n,
                      hf_word_fn word, void *ctx, al_err *e) {
    if (st->add_prefix_space && s[0] != ' ') {
        if (n + 1 > sc->pcap) {
            size_t cap = n + 1 > 2 * sc->pcap ? n + 1 : 2 * sc->pcap;
            unsigned char *b = realloc(sc->pbuf, cap);
            if (!b) return al_errf(e, "out of memory");
            sc->pbuf = b;
            sc->pcap = cap;
        }
        sc->pbuf[0] = ' ';
        memcpy(sc->pbuf + 1, s, n);
        s = sc->pbuf;
        n++;
    }
    if (!st->re) return word(ctx, s, n, e);
    /* the find_iter of regex_items, streamed: Isolated keeps every piece */
    size_t last_end = 0, prev = 0;
    int skip_next_empty = 0;
    while (last_end <= n) {
        onig_region_clear(sc->region);
        int r = onig_search_with_param(st->re, s, s + n, s + last_end, s + n, sc->region,
                                       ONIG_OPTION_NONE, sc->mp);
        if (r == ONIG_MISMATCH) break;
        if (r < 0) return al_errf(e, "pre-tokenizing: the ByteLevel pattern failed (%d)", r);
        size_t ms = (size_t)sc->region->beg[0], me = (size_t)sc->region->end[0];
        last_end = me;
        if (me == ms) {
            last_end += me < n ? hf_utf8_len(s + me, n - me) : 1;
            if (skip_next_empty) {
                skip_next_empty = 0;
                continue;
            }
        } else {
            skip_next_empty = 1;
        }
        if (prev < ms && word(ctx, s + prev, ms - prev, e)) return -1;
        if (me > ms && word(ctx, s + ms, me - ms, e)) return -1;
        prev = me;
    }
    if (prev < n && word(ctx, s + prev, n - prev, e)) return -1;
    return 0;
}

static int run_step(const hf_pre *p, int k, hf_scratch *sc, const unsigned char *s, size_t n,
                    hf_word_fn word, void *ctx, al_err *e) {
    const hf_step *st = &p->steps[k];
    if (st->kind == ST_BYTELEVEL) return byte_level(st, sc, s, n, word, ctx, e);
    size_t m = 0;
    int rc = st->kind == ST_REGEX    ? regex_items(st->re, sc, k, s, n, &m, e)
             : st->kind == ST_STRING ? string_items(st, sc, k, s, n, &m, e)
                                     : digit_items(sc, k, s, n, &m, e);
    if (rc) return -1;
    if (st->invert)
        for (size_t i = 0; i < m; i++) sc->items[k][i].match = !sc->items[k][i].match;
    m = fold(sc->items[k], m, st->behavior);
    for (size_t i = 0; i < m; i++) {
        item x = sc->items[k][i];
        if (x.b > x.a && run_step(p, k + 1, sc, s + x.a, x.b - x.a, word, ctx, e)) return -1;
    }
    return 0;
}

int hf_pretokenize(const hf_pre *p, hf_scratch *sc, const unsigned char *s, size_t n,
                   hf_word_fn word, void *ctx, al_err *e) {
    return run_step(p, 0, sc, s, n, word, ctx, e);
}
