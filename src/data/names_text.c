/* names_text.c -- held-out stories with an invented name inserted twice
 * (names_text.h): the seed notes' "Seoyeon" table on any text corpus. */
#include "attnlab/names_text.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MIN_STORY 16

void al_name_stories_free(al_name_stories *s) {
    free(s->s);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* 1 if token id begins a word: its bytes start with a space. */
static int word_start(const al_tokenizer *tok, int id) {
    size_t n;
    const unsigned char *b = al_tok_bytes(tok, id, &n);
    return b && n > 0 && b[0] == ' ';
}

static int has_upper(const al_tokenizer *tok, const uint16_t *d, int len) {
    for (int i = 0; i < len; i++) {
        size_t n;
        const unsigned char *b = al_tok_bytes(tok, d[i], &n);
        for (size_t j = 0; b && j < n; j++)
            if (b[j] >= 'A' && b[j] <= 'Z') return 1;
    }
    return 0;
}

/* " name" (lower-cased if lower) into piece[]; its piece count, or 0 if
 * not 2..AL_NAME_MAX_PIECES tokens. */
static int encode_name(const al_tokenizer *tok, const char *name, int lower, int *piece,
                       al_err *e) {
    char w[AL_SYNTH_NAME_MAX + 2];
    int ids[AL_SYNTH_NAME_MAX + 2];
    size_t k = 0, n = strlen(name);
    if (n == 0 || n >= AL_SYNTH_NAME_MAX) return 0;
    w[0] = ' ';
    for (size_t i = 0; i < n; i++)
        w[i + 1] = lower ? (char)tolower((unsigned char)name[i]) : name[i];
    if (al_tok_encode_into(tok, (const unsigned char *)w, n + 1, 0, ids, &k, e)) return -1;
    if (k < 2 || k > AL_NAME_MAX_PIECES) return 0;
    memcpy(piece, ids, k * sizeof(int));
    return (int)k;
}

/* An invented name: 2 or 3 syllables, capitalised, not a lexicon word. */
static void invent(const al_synth *sy, size_t n_cons, al_rng *r, char *out) {
    for (;;) {
        int ns = 2 + (int)al_rng_below(r, 2);
        out[0] = 0;
        for (int i = 0; i < ns; i++) {
            size_t pick = i == 0 ? al_rng_below(r, (uint32_t)al_synth_n_syllables(sy))
                                 : al_rng_below(r, (uint32_t)n_cons);
            const char *syl = al_synth_syllable(sy, pick);
            if (strlen(out) + strlen(syl) >= AL_SYNTH_NAME_MAX) break;
            strcat(out, syl);
        }
        if (!al_synth_is_word(sy, out)) break;
    }
    out[0] = (char)toupper((unsigned char)out[0]);
}

/* The first i >= from (i < len) where token d[i] begins a word, or -1. */
static int next_word(const al_tokenizer *tok, const uint16_t *d, int len, int from) {
    for (int i = from; i < len; i++)
        if (word_start(tok, d[i])) return i;
    return -1;
}

int al_names_in_text(const al_tokenizer *tok, const al_tokens *val, int n, const char *name,
                     uint64_t seed, int n_ctx, al_name_stories *out, al_err *e) {
    memset(out, 0, sizeof *out);
    int bos = al_tok_eot(tok);
    if (n < 1 || n > 100000) return al_errf(e, "names: stories must be in [1, 100000] (got %d)", n);
    if (n_ctx < 32) return al_errf(e, "names: n_ctx must be >= 32 (got %d)", n_ctx);
    if (bos < 0) return al_errf(e, "names: the tokenizer has no <|endoftext|> to split stories at");
    if (val->n == 0 || val->tok[0] != bos)
        return al_errf(e, "names: the token file does not begin with <|endoftext|> (encode it "
                          "with attnlab encode)");
    if (name && *name && strlen(name) >= AL_SYNTH_NAME_MAX)
        return al_errf(e, "names: name '%s' is longer than %d bytes", name, AL_SYNTH_NAME_MAX - 1);
    al_synth *sy = NULL;
    al_synth_opts so;
    al_synth_defaults(&so);
    if (al_synth_new(&sy, &so, e)) return al_err_prefix(e, "names");
    size_t n_cons = 0; /* consonant-initial syllables come first (synth.h) */
    while (n_cons < al_synth_n_syllables(sy) && !strchr("aeiou", al_synth_syllable(sy, n_cons)[0]))
        n_cons++;
    al_rng r;
    al_rng_seed(&r, seed);
    out->s = al_malloc((size_t)n, sizeof *out->s, e);
    out->buf = out->s ? al_malloc((size_t)n * (size_t)n_ctx, sizeof(int), e) : NULL;
    if (!out->buf) goto fail;
    size_t at = 0;
    while (at < val->n && out->n < n) {
        size_t end = at + 1;
        while (end < val->n && val->tok[end] != bos) end++;
        const uint16_t *d = val->tok + at + 1;
        int len = (int)(end - at - 1);
        at = end;
        if (len < MIN_STORY) continue;
        al_name_story *s = &out->s[out->n];
        memset(s, 0, sizeof *s);
        int lower = !has_upper(tok, d, len), k = 0;
        if (name && *name) {
            snprintf(s->name, sizeof s->name, "%s", name);
            if ((k = encode_name(tok, name, lower, s->piece, e)) < 0) goto fail;
            if (k == 0) {
                al_errf(e, "names: ' %s' is not 2..%d tokens with this tokenizer", name,
                        AL_NAME_MAX_PIECES);
                goto fail;
            }
        } else {
            while (k == 0) {
                invent(sy, n_cons, &r, s->name);
                if ((k = encode_name(tok, s->name, lower, s->piece, e)) < 0) goto fail;
            }
        }
        if (lower)
            for (char *c = s->name; *c; c++) *c = (char)tolower((unsigned char)*c);
        if (len > n_ctx - 1 - 2 * k) len = n_ctx - 1 - 2 * k;
        int i1 = next_word(tok, d, len, len / 5 > 1 ? len / 5 : 1);
        int i2 = i1 < 0 ? -1 : next_word(tok, d, len, 3 * len / 5 > i1 + 4 ? 3 * len / 5 : i1 + 4);
        if (i2 < 0) continue;
        int *ids = out->buf + (size_t)out->n * (size_t)n_ctx, t = 0;
        ids[t++] = bos;
        for (int i = 0; i < len; i++) {
            if (i == i1 || i == i2) {
                if (i == i1)
                    s->first = t;
                else
                    s->second = t;
                for (int j = 0; j < k; j++) ids[t++] = s->piece[j];
            }
            ids[t++] = d[i];
        }
        s->ids = ids, s->len = t, s->k = k;
        out->n++;
    }
    al_synth_free(sy);
    if (out->n == 0) {
        al_name_stories_free(out);
        return al_errf(e, "names: no story of at least %d tokens with room for a name", MIN_STORY);
    }
    return 0;
fail:
    al_synth_free(sy);
    al_name_stories_free(out);
    return -1;
}

/* ------------------------------------------------------------- code */

/* Code: a variable of a held-out function renamed to an invented name,
 * so that its first use in the function has nothing to copy and its
 * later uses are copies (al_idents_in_code). Words a rename would turn
 * into a different program's keywords or builtins are never candidates. */
static const char *const NOT_VARS[] = {
    /* Python */
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "self", "cls", "print", "len", "str", "int", "float", "bool", "list", "dict",
    "set", "tuple", "object", "type", "isinstance", "super", "open", "range", "bytes", "Exception",
    "ValueError", "TypeError", "KeyError",
    /* Go */
    "case", "chan", "const", "default", "defer", "fallthrough", "func", "go", "goto", "interface",
    "map", "package", "select", "struct", "switch", "var", "nil", "true", "false", "make", "new",
    "append", "cap", "copy", "delete", "panic", "recover", "string", "byte", "rune", "error",
    "uint", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32",
    "float64", "uintptr", NULL};

#define MIN_FUNC 16 /* tokens */
#define MAX_PER_DOC 16 /* functions taken from one document */

static int ident_char(unsigned char c) { return isalnum(c) || c == '_' || c >= 0x80; }

static int not_var(const unsigned char *w, size_t n) {
    for (int i = 0; NOT_VARS[i]; i++)
        if (strlen(NOT_VARS[i]) == n && !memcmp(NOT_VARS[i], w, n)) return 1;
    return 0;
}

/* Indentation (leading spaces and tabs) of the line at s[i]; *blank set
 * when the line holds nothing else. */
static size_t indent_of(const unsigned char *s, size_t n, size_t i, int *blank) {
    size_t j = i;
    while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
    *blank = j >= n || s[j] == '\n' || s[j] == '\r';
    return j - i;
}

static size_t next_line(const unsigned char *s, size_t n, size_t i) {
    while (i < n && s[i] != '\n') i++;
    return i < n ? i + 1 : n;
}

/* 1 if the line at s[i] (after indent ind) starts a function: "def ",
 * "async def " or "func " (Python, Go). *name, *name_n: its name. */
static int func_line(const unsigned char *s, size_t n, size_t i, size_t ind, size_t *name,
                     size_t *name_n) {
    static const char *const starts[] = {"def ", "async def ", "func ", NULL};
    const unsigned char *l = s + i + ind;
    size_t left = n - i - ind;
    for (int k = 0; starts[k]; k++) {
        size_t m = strlen(starts[k]);
        if (left <= m || memcmp(l, starts[k], m)) continue;
        size_t a = i + ind + m;
        if (s[a] == '(') { /* a Go method: the name follows the receiver */
            while (a < n && s[a] != ')' && s[a] != '\n') a++;
            if (a < n && s[a] == ')') a++;
            while (a < n && s[a] == ' ') a++;
        }
        size_t b = a;
        while (b < n && ident_char(s[b])) b++;
        *name = a, *name_n = b - a;
        return 1;
    }
    return 0;
}

/* The end of the function whose first line is at s[i] (indent ind): the
 * start of the next non-blank line indented no deeper that does not
 * close the signature (")" in Python) -- Go's closing "}" is left out. */
static size_t func_end(const unsigned char *s, size_t n, size_t i, size_t ind) {
    for (size_t j = next_line(s, n, i); j < n; j = next_line(s, n, j)) {
        int blank;
        size_t d = indent_of(s, n, j, &blank);
        if (!blank && d <= ind && s[j + d] != ')') return j;
    }
    return n;
}

/* Whole-word occurrences of w (wn bytes) in s[0..n); *attr set if one
 * follows a '.' (an attribute, which a rename must not touch). */
static int count_word(const unsigned char *s, size_t n, const unsigned char *w, size_t wn,
                      int *attr) {
    int c = 0;
    *attr = 0;
    for (size_t i = 0; i + wn <= n; i++) {
        if (memcmp(s + i, w, wn) || (i > 0 && ident_char(s[i - 1])) ||
            (i + wn < n && ident_char(s[i + wn])))
            continue;
        if (i > 0 && s[i - 1] == '.') *attr = 1;
        c++;
        i += wn - 1;
    }
    return c;
}

/* f (fn bytes) with every whole-word w replaced by r, into out (room for
 * fn * (rn + 1) bytes); its length. */
static size_t rename_word(const unsigned char *f, size_t fn, const unsigned char *w, size_t wn,
                          const char *r, unsigned char *out) {
    size_t o = 0, rn = strlen(r);
    for (size_t i = 0; i < fn;) {
        if (i + wn <= fn && !memcmp(f + i, w, wn) && (i == 0 || !ident_char(f[i - 1])) &&
            (i + wn == fn || !ident_char(f[i + wn]))) {
            memcpy(out + o, r, rn);
            o += rn, i += wn;
        } else
            out[o++] = f[i++];
    }
    return o;
}

/* The tokens (bytes at off[0..m], off[m] the end) that spell the
 * occurrence of the name at bytes a..b of g, with its leading space when
 * the first token carries one: the index of the first and the count in
 * *k; -1 when token edges do not fall on the occurrence's. */
static int occurrence_tokens(const unsigned char *g, const size_t *off, int m, size_t a, size_t b,
                             int *k) {
    int t = 0;
    while (t < m && off[t + 1] <= a) t++;
    if (t >= m || (off[t] != a && !(off[t] + 1 == a && g[a - 1] == ' '))) return -1;
    int u = t;
    while (u < m && off[u + 1] < b) u++;
    if (u >= m || off[u + 1] != b) return -1;
    *k = u - t + 1;
    return t;
}

/* One item from function text f (fn bytes): pick a variable, rename it,
 * encode, find its first use and the next use spelt by the same tokens.
 * 1 if made, 0 if the function has no usable variable, -1 with e. */
static int code_item(const al_tokenizer *tok, const unsigned char *f, size_t fn, size_t skip,
                     const al_synth *sy, size_t n_cons, al_rng *r, int n_ctx, al_name_story *s,
                     int *ids, al_err *e) {
    /* candidates: identifiers used at least twice, never as attributes */
    size_t cand[64], cand_n[64];
    int nc = 0;
    for (size_t i = 0; i < fn && nc < 64;) {
        if (!ident_char(f[i]) || (i > 0 && ident_char(f[i - 1])) || isdigit(f[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < fn && ident_char(f[j])) j++;
        int attr, dup = 0;
        for (int c = 0; c < nc && !dup; c++)
            dup = cand_n[c] == j - i && !memcmp(f + cand[c], f + i, j - i);
        if (!dup && i != skip && (i == 0 || f[i - 1] != '.') && !not_var(f + i, j - i) &&
            j - i < 40 && count_word(f, fn, f + i, j - i, &attr) >= 2 && !attr)
            cand[nc] = i, cand_n[nc++] = j - i;
        i = j;
    }
    if (nc == 0) return 0;
    /* the candidates in a seeded order: the first that has a first and a
     * second use spelt by the same tokens (a first use right after "(" has
     * no leading space, and a later " name" is other tokens) */
    for (int i = nc - 1; i > 0; i--) {
        int j = (int)al_rng_below(r, (uint32_t)(i + 1));
        size_t t0 = cand[i], t1 = cand_n[i];
        cand[i] = cand[j], cand_n[i] = cand_n[j], cand[j] = t0, cand_n[j] = t1;
    }
    const unsigned char *w = f + cand[0];
    size_t wn = cand_n[0];
    unsigned char *g = malloc(fn * (AL_SYNTH_NAME_MAX + 1) + 1);
    size_t *off = g ? malloc((fn * (AL_SYNTH_NAME_MAX + 1) + 2) * sizeof *off) : NULL;
    int *tk = NULL, made = 0;
    size_t m = 0;
    if (!off) {
        free(g);
        return al_errf(e, "names: out of memory");
    }
    for (int tries = 0; tries < 4 * nc && !made; tries++) {
        w = f + cand[tries / 4], wn = cand_n[tries / 4];
        invent(sy, n_cons, r, s->name);
        for (char *p = s->name; *p; p++) *p = (char)tolower((unsigned char)*p);
        int attr;
        size_t rn = strlen(s->name);
        if (count_word(f, fn, (const unsigned char *)s->name, rn, &attr)) continue;
        size_t gn = rename_word(f, fn, w, wn, s->name, g);
        free(tk);
        tk = NULL;
        if (al_tok_encode(tok, g, gn, 0, &tk, &m, e)) goto fail;
        if (m > (size_t)n_ctx - 1) m = (size_t)n_ctx - 1;
        off[0] = 0;
        for (size_t t = 0; t < m; t++) {
            size_t bl = 0;
            al_tok_bytes(tok, tk[t], &bl);
            off[t + 1] = off[t] + bl;
        }
        /* the first use, then the first later one spelt the same way */
        int t1 = -1, k1 = 0, t2 = -1;
        for (size_t i = 0; i + rn <= off[m]; i++) {
            if (memcmp(g + i, s->name, rn) || (i > 0 && ident_char(g[i - 1])) ||
                (i + rn < gn && ident_char(g[i + rn])))
                continue;
            int k, t = occurrence_tokens(g, off, (int)m, i, i + rn, &k);
            if (t1 < 0) {
                if (t < 0 || k < 2 || k > AL_NAME_MAX_PIECES) break;
                t1 = t, k1 = k;
            } else if (t >= 0 && k == k1 && !memcmp(tk + t, tk + t1, (size_t)k * sizeof(int))) {
                t2 = t;
                break;
            }
            i += rn - 1;
        }
        if (t1 < 0 || t2 < 0 || m < MIN_FUNC) continue;
        ids[0] = al_tok_eot(tok);
        memcpy(ids + 1, tk, m * sizeof(int));
        s->ids = ids, s->len = (int)m + 1, s->k = k1;
        memcpy(s->piece, tk + t1, (size_t)k1 * sizeof(int));
        s->first = t1 + 1, s->second = t2 + 1;
        snprintf(s->was, sizeof s->was, "%.*s", (int)(wn < sizeof s->was ? wn : sizeof s->was - 1),
                 (const char *)w);
        made = 1;
    }
    free(tk);
    free(off);
    free(g);
    return made;
fail:
    free(tk);
    free(off);
    free(g);
    return -1;
}

int al_idents_in_code(const al_tokenizer *tok, const al_tokens *val, int n, uint64_t seed,
                      int n_ctx, al_name_stories *out, al_err *e) {
    memset(out, 0, sizeof *out);
    int bos = al_tok_eot(tok);
    if (n < 1 || n > 100000)
        return al_errf(e, "names: functions must be in [1, 100000] (got %d)", n);
    if (n_ctx < 32) return al_errf(e, "names: n_ctx must be >= 32 (got %d)", n_ctx);
    if (bos < 0) return al_errf(e, "names: the tokenizer has no <|endoftext|> to split files at");
    if (val->n == 0 || val->tok[0] != bos)
        return al_errf(e, "names: the token file does not begin with <|endoftext|> (encode it "
                          "with attnlab encode --docs eot)");
    al_synth *sy = NULL;
    al_synth_opts so;
    al_synth_defaults(&so);
    if (al_synth_new(&sy, &so, e)) return al_err_prefix(e, "names");
    size_t n_cons = 0;
    while (n_cons < al_synth_n_syllables(sy) && !strchr("aeiou", al_synth_syllable(sy, n_cons)[0]))
        n_cons++;
    al_rng r;
    al_rng_seed(&r, seed);
    int *doc = NULL;
    unsigned char *text = NULL;
    out->s = al_malloc((size_t)n, sizeof *out->s, e);
    out->buf = out->s ? al_malloc((size_t)n * (size_t)n_ctx, sizeof(int), e) : NULL;
    if (!out->buf || !(doc = al_malloc(val->n, sizeof *doc, e))) goto fail;
    size_t at = 0;
    while (at < val->n && out->n < n) {
        size_t end = at + 1;
        while (end < val->n && val->tok[end] != bos) end++;
        size_t len = end - at - 1, tn = 0;
        for (size_t i = 0; i < len; i++) doc[i] = val->tok[at + 1 + i];
        at = end;
        free(text);
        text = NULL;
        if (al_tok_decode(tok, doc, len, &text, &tn, e)) goto fail;
        int taken = 0;
        for (size_t i = 0; i < tn && taken < MAX_PER_DOC && out->n < n;
             i = next_line(text, tn, i)) {
            int blank;
            size_t ind = indent_of(text, tn, i, &blank), nm, nm_n;
            if (blank || !func_line(text, tn, i, ind, &nm, &nm_n)) continue;
            size_t fe = func_end(text, tn, i, ind);
            al_name_story *s = &out->s[out->n];
            memset(s, 0, sizeof *s);
            int got = code_item(tok, text + i, fe - i, nm - i, sy, n_cons, &r, n_ctx, s,
                                out->buf + (size_t)out->n * (size_t)n_ctx, e);
            if (got < 0) goto fail;
            if (got) out->n++, taken++;
        }
    }
    free(text);
    free(doc);
    al_synth_free(sy);
    if (out->n == 0) {
        al_name_stories_free(out);
        return al_errf(e, "names: no function (a line starting \"def \" or \"func \") with a "
                          "variable used twice in the held-out text");
    }
    return 0;
fail:
    free(text);
    free(doc);
    al_synth_free(sy);
    al_name_stories_free(out);
    return -1;
}
