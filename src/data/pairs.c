/* pairs.c -- clean / corrupted pair sets for activation and path patching
 * (see pairs.h): the user's JSONL pair files and the `names` task.
 *
 * Both build their pairs the same way: every pair is appended to one
 * growable buffer as it is made (lengths differ from pair to pair, and
 * the longest is only known at the end), then pairs_finish copies them
 * into the (N, T) layout, padded with token 0. So a pair set is only
 * allocated, and *out only assigned, once every pair is known good.
 *
 * JSONL files are parsed one line at a time with al_json_parse, so an
 * error names its line, and parsing stops at the first bad one.
 *
 * The names task draws its stories from the synthetic corpus generator
 * (synth.h) with the stream seed seed XOR AL_PAIRS_NAMES_SEED_XOR. It has
 * bit 62 set, so for every seed below 2^62 the stream seed is at least
 * 2^62: no corpus the project writes (the experiments use corpus seeds
 * 1, 2 and 3, the demo's held-out story 779, `data synth` defaults to
 * 1) is ever generated again as a names task, whatever seed the analysis
 * is given (its default is 1). A story is used whole or not at all:
 * stories whose clean sequence does not fit n_ctx are skipped rather
 * than cut, so a pair always starts where its story starts. The
 * replacement name shares the name's first piece (invent_name says why).
 * With a 2048-token BPE trained on the corpus, 64 pairs take ~73 stories
 * and ~0.05 s. */
#include "attnlab/pairs.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"
#include "attnlab/json.h"
#include "attnlab/names_text.h"
#include "attnlab/synth.h"

#define MAX_PAIRS 1000000
#define MAX_FILE_BYTES ((size_t)256 << 20)
/* The replacement names of a story come from their own stream, so how
 * they are drawn never moves the stories themselves. */
#define REPLACE_SEED_SALT 0x7265706c61636531ULL
#define REPLACE_TRIES 2000

void al_pairs_free(al_pairs *p) {
    free(p->clean);
    free(p->items);
    memset(p, 0, sizeof *p);
}

int al_pairs_pick(const al_pairs *t, const int *idx, int n, al_pairs *out, al_err *e) {
    memset(out, 0, sizeof *out);
    if (n < 1) return al_errf(e, "pairs: need at least one pair to pick");
    int *first =
        al_calloc((size_t)t->N + 1, sizeof *first, e); /* items of pair p: [first[p], first[p+1]) */
    if (!first) return -1;
    for (int i = 0; i < t->n_items; i++) first[t->items[i].pair + 1]++;
    for (int p = 0; p < t->N; p++) first[p + 1] += first[p];
    size_t ni = 0;
    for (int k = 0; k < n; k++) {
        if (idx[k] < 0 || idx[k] >= t->N) {
            free(first);
            return al_errf(e, "pairs: index %d outside the task's %d pairs", idx[k], t->N);
        }
        ni += (size_t)(first[idx[k] + 1] - first[idx[k]]);
    }
    al_pairs p;
    memset(&p, 0, sizeof p);
    size_t NT = (size_t)n * t->T;
    p.clean = al_calloc(2 * NT + (size_t)n, sizeof(int), e);
    p.items = p.clean && ni ? al_malloc(ni, sizeof *p.items, e) : NULL;
    if (!p.clean || (ni && !p.items) || ni > INT_MAX) {
        free(first);
        al_pairs_free(&p);
        return ni > INT_MAX ? al_errf(e, "pairs: too many items") : -1;
    }
    p.corr = p.clean + NT, p.len = p.corr + NT;
    memcpy(p.task, t->task, sizeof p.task);
    p.N = n, p.T = t->T, p.logit_diff = t->logit_diff;
    for (int k = 0; k < n; k++) {
        const size_t src = (size_t)idx[k] * t->T, dst = (size_t)k * t->T;
        memcpy(p.clean + dst, t->clean + src, sizeof(int) * t->T);
        memcpy(p.corr + dst, t->corr + src, sizeof(int) * t->T);
        p.len[k] = t->len[idx[k]];
        for (int i = first[idx[k]]; i < first[idx[k] + 1]; i++) {
            p.items[p.n_items] = t->items[i];
            p.items[p.n_items++].pair = k;
        }
    }
    free(first);
    *out = p;
    return 0;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *c = data;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t al_pairs_hash(const al_pairs *p) {
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t NT = (size_t)p->N * p->T;
    int dims[4] = {p->N, p->T, p->n_items, p->logit_diff};
    char task[sizeof p->task + 1] = {0};
    memcpy(task, p->task, sizeof p->task); /* NUL-terminated, padded with zeros */
    h = fnv(h, task, sizeof task);
    h = fnv(h, dims, sizeof dims);
    if (p->len) h = fnv(h, p->len, sizeof(int) * (size_t)p->N);
    if (p->clean) h = fnv(h, p->clean, sizeof(int) * NT);
    if (p->corr) h = fnv(h, p->corr, sizeof(int) * NT);
    for (int i = 0; p->items && i < p->n_items; i++) {
        const al_pair_item *it = &p->items[i];
        int v[4] = {it->pair, it->pos, it->answer, it->wrong};
        h = fnv(h, v, sizeof v);
    }
    return h;
}

/* ------------------------------------------------------------ builder */

/* Pairs as they are made: per pair the ints len, answer, wrong, then len
 * clean ids and len corrupted ids. */
typedef struct builder {
    al_buf b;
    int N, T;
} builder;

static void put_pair(builder *bd, const int *clean, const int *corr, int len, int answer,
                     int wrong) {
    int head[3] = {len, answer, wrong};
    al_buf_put(&bd->b, head, sizeof head);
    al_buf_put(&bd->b, clean, (size_t)len * sizeof(int));
    al_buf_put(&bd->b, corr, (size_t)len * sizeof(int));
    bd->N++;
    if (len > bd->T) bd->T = len;
}

/* The pairs in the (N, T) layout of pairs.h: clean, corr and len in one
 * zeroed allocation, one item per pair at its last position. Frees the
 * builder either way. */
static int pairs_finish(builder *bd, const char *task, al_pairs *out, al_err *e) {
    al_pairs p;
    memset(&p, 0, sizeof p);
    int rc = -1;
    if (!al_buf_ok(&bd->b)) {
        al_errf(e, "out of memory building %d pairs", bd->N);
        goto out;
    }
    snprintf(p.task, sizeof p.task, "%s", task);
    p.N = bd->N, p.T = bd->T, p.n_items = bd->N, p.logit_diff = 1;
    p.clean = al_calloc((size_t)p.N * (2 * (size_t)p.T + 1), sizeof(int), e);
    p.items = p.clean ? al_malloc((size_t)p.N, sizeof(al_pair_item), e) : NULL;
    if (!p.items) {
        al_pairs_free(&p);
        goto out;
    }
    p.corr = p.clean + (size_t)p.N * p.T;
    p.len = p.corr + (size_t)p.N * p.T;
    const char *q = bd->b.p;
    for (int n = 0; n < p.N; n++) {
        int head[3];
        memcpy(head, q, sizeof head);
        q += sizeof head;
        size_t row = (size_t)head[0] * sizeof(int);
        memcpy(p.clean + (size_t)n * p.T, q, row);
        memcpy(p.corr + (size_t)n * p.T, q + row, row);
        q += 2 * row;
        p.len[n] = head[0];
        p.items[n] = (al_pair_item){n, head[0] - 1, head[1], head[2]};
    }
    *out = p;
    rc = 0;
out:
    al_buf_free(&bd->b);
    return rc;
}

/* -------------------------------------------------------------- JSONL */

static const char *const FIELDS[4] = {"clean", "corrupted", "answer", "wrong"};

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

/* cJSON decodes the escape \u0000 into its C string, which silently ends
 * the text there; refuse it instead. Only called on text that parsed, so
 * every backslash is inside a string and escapes the next byte. */
static int has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '\\') {
            if (s[i + 1] == 'u' && i + 5 < n && memcmp(s + i + 2, "0000", 4) == 0) return 1;
            i++;
        }
    return 0;
}

/* al_json_parse counts lines within the text it is given, here always
 * one line: keep just the column, and name the file's line instead. */
static int json_line_err(al_err *e, size_t line) {
    static const char one[] = "invalid JSON at line 1, ";
    if (e && strncmp(e->msg, one, sizeof one - 1) == 0) {
        char rest[64];
        snprintf(rest, sizeof rest, "%s", e->msg + sizeof one - 1);
        al_errf(e, "invalid JSON at %s", rest);
    }
    return al_err_prefix(e, "line %zu", line);
}

/* A field's text for a message: quoted, one line, at most 60 bytes. */
#define SHOW(s, buf) al_json_key_disp(s, buf)

/* One line's pair, appended to bd; -1 with a message naming the line. */
/* The tokens' pieces, "[␣Se][o][y]" (a space shown as ␣, other bytes
 * below 0x20 as \xNN), into buf (always NUL-terminated, cut to cap): a
 * token-count error shows where the tokenizer split the text. */
static void pieces(const al_tokenizer *tok, const int *ids, size_t n, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && k + 16 < cap; i++) {
        size_t nb = 0;
        const unsigned char *b = al_tok_bytes(tok, ids[i], &nb);
        buf[k++] = '[';
        for (size_t j = 0; b && j < nb && k + 12 < cap; j++) {
            if (b[j] == ' ')
                k += (size_t)snprintf(buf + k, cap - k, "\xe2\x90\xa3");
            else if (b[j] < 0x20)
                k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", b[j]);
            else
                buf[k++] = (char)b[j];
        }
        buf[k++] = ']';
        buf[k] = 0;
    }
}

static int parse_line(const char *s, size_t n, size_t line, const al_tokenizer *tok, int n_ctx,
                      builder *bd, al_err *e) {
    cJSON *o = NULL;
    if (al_json_parse(s, n, NULL, &o, e)) return json_line_err(e, line);
    const cJSON *f[4] = {NULL, NULL, NULL, NULL};
    int *ids[4] = {NULL, NULL, NULL, NULL};
    size_t len[4] = {0, 0, 0, 0};
    char shown[64];
    int rc = -1;
    if (!cJSON_IsObject(o)) {
        al_errf(e,
                "line %zu: expected a JSON object {\"clean\": ..., \"corrupted\": ..., "
                "\"answer\": ..., \"wrong\": ...}",
                line);
        goto out;
    }
    if (has_nul_escape(s, n)) {
        al_errf(e,
                "line %zu: a string holds \\u0000 (a NUL character), which a pair's text "
                "cannot hold",
                line);
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        int k = 0;
        while (k < 4 && strcmp(FIELDS[k], it->string)) k++;
        if (k == 4) {
            al_errf(e, "line %zu: unknown field \"%s\" (known: clean, corrupted, answer, wrong)",
                    line, SHOW(it->string, shown));
            goto out;
        }
        if (f[k]) {
            al_errf(e, "line %zu: field \"%s\" given twice", line, FIELDS[k]);
            goto out;
        }
        if (!cJSON_IsString(it)) {
            al_errf(e, "line %zu: field \"%s\" must be a string", line, FIELDS[k]);
            goto out;
        }
        f[k] = it;
    }
    for (int k = 0; k < 4; k++) {
        if (!f[k]) {
            al_errf(e, "line %zu: missing field \"%s\"", line, FIELDS[k]);
            goto out;
        }
        if (!f[k]->valuestring[0]) {
            al_errf(e, "line %zu: field \"%s\" is empty", line, FIELDS[k]);
            goto out;
        }
    }
    /* The literal <|endoftext|> becomes the special token, so a pair can
     * start with the BOS the model was trained with. */
    for (int k = 0; k < 4; k++)
        if (al_tok_encode(tok, (const unsigned char *)f[k]->valuestring, strlen(f[k]->valuestring),
                          1, &ids[k], &len[k], e)) {
            al_err_prefix(e, "line %zu", line);
            goto out;
        }
    if (len[0] != len[1]) {
        al_errf(e,
                "line %zu: clean is %zu tokens, corrupted %zu (a pair needs the same "
                "length, so that a position means the same in both)",
                line, len[0], len[1]);
        goto out;
    }
    if (len[0] > (size_t)n_ctx) {
        al_errf(e, "line %zu: clean and corrupted are %zu tokens, longer than n_ctx %d", line,
                len[0], n_ctx);
        goto out;
    }
    for (int k = 2; k < 4; k++)
        if (len[k] != 1) {
            char pc[160];
            pieces(tok, ids[k], len[k], pc, sizeof pc);
            al_errf(e,
                    "line %zu: %s \"%s\" is %zu tokens %s; it must be exactly one (a "
                    "leading space is often part of the token)",
                    line, FIELDS[k], SHOW(f[k]->valuestring, shown), len[k], pc);
            goto out;
        }
    if (ids[2][0] == ids[3][0]) {
        al_errf(e, "line %zu: answer and wrong are the same token (\"%s\")", line,
                SHOW(f[2]->valuestring, shown));
        goto out;
    }
    put_pair(bd, ids[0], ids[1], (int)len[0], ids[2][0], ids[3][0]);
    rc = 0;
out:
    for (int k = 0; k < 4; k++) free(ids[k]);
    cJSON_Delete(o);
    return rc;
}

int al_pairs_parse_jsonl(const char *text, size_t n, const al_tokenizer *tok, int n_ctx,
                         al_pairs *out, al_err *e) {
    memset(out, 0, sizeof *out);
    if (n_ctx < 1) return al_errf(e, "pairs: n_ctx must be >= 1 (got %d)", n_ctx);
    if (n == 0) return al_errf(e, "no pairs (the text is empty)");
    builder bd = {AL_BUF_INIT, 0, 0};
    size_t line = 1;
    /* Lines end at '\n'; a final '\n' ends the last line rather than
     * starting an empty one, so s == n after it ends the loop. */
    for (size_t s = 0; s < n; line++) {
        const char *nl = memchr(text + s, '\n', n - s);
        size_t end = nl ? (size_t)(nl - text) : n;
        if (line > MAX_PAIRS) {
            al_errf(e, "line %zu: more than %d pairs", line, MAX_PAIRS);
            goto fail;
        }
        if (is_blank(text + s, end - s)) {
            al_errf(e,
                    "line %zu: empty line (a JSONL pair file has one JSON object on every "
                    "line)",
                    line);
            goto fail;
        }
        if (parse_line(text + s, end - s, line, tok, n_ctx, &bd, e)) goto fail;
        s = end + 1;
    }
    return pairs_finish(&bd, "file", out, e);
fail:
    al_buf_free(&bd.b);
    return -1;
}

int al_pairs_load_jsonl(const char *path, const al_tokenizer *tok, int n_ctx, al_pairs *out,
                        al_err *e) {
    memset(out, 0, sizeof *out);
    unsigned char *text;
    size_t n;
    if (al_read_file(path, &text, &n, MAX_FILE_BYTES, e)) return -1;
    int rc = al_pairs_parse_jsonl((const char *)text, n, tok, n_ctx, out, e);
    free(text);
    if (rc) return al_err_prefix(e, "%s", path);
    return 0;
}

/* -------------------------------------------------------------- names */

/* What the tokenizer's pre-splitting counts as a letter (tokenizer.h):
 * a name followed by one is not a whole word, nor a whole piece. */
static int is_letter(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* Reusable scratch for one story. */
typedef struct story {
    int *ids; /* the story's tokens */
    size_t n_ids;
    size_t *off; /* (n_ids + 1) byte offset of each token in the text */
    size_t cap; /* of off */
} story;

/* The name as the stories write it after the first word: " Name", one
 * pre-split piece when a non-letter follows (synth.h). */
static int encode_name(const al_tokenizer *tok, const char *name, int *ids, size_t *n_ids,
                       al_err *e) {
    char w[2 * AL_SYNTH_NAME_MAX];
    int k = snprintf(w, sizeof w, " %s", name);
    if (k < 0 || (size_t)k >= sizeof w) return al_errf(e, "names: name too long");
    return al_tok_encode_into(tok, (const unsigned char *)w, (size_t)k, 0, ids, n_ids, e);
}

/* 1 if name occurs as a whole word within text[0..upto), other than at
 * byte `except`. */
static int other_mentions(const char *text, size_t n, size_t upto, const char *name,
                          size_t except) {
    size_t k = strlen(name);
    for (size_t i = 0; i + k <= upto; i++) {
        if (i == except || memcmp(text + i, name, k) != 0) continue;
        if (i > 0 && is_letter((unsigned char)text[i - 1])) continue;
        if (i + k < n && is_letter((unsigned char)text[i + k])) continue;
        return 1;
    }
    return 0;
}

/* The first two token-level occurrences m1 < m2 of the name's pieces S
 * (k >= 2 ids) in the story, each a whole piece (no letter follows), and
 * no other mention of the name before m2 (as the story's first word it
 * would be other pieces): so the clean prefix mentions the name exactly
 * at m1, and the corrupted one not at all. 0 with *m1, *m2, else -1. */
static int find_twice(const story *st, const char *text, size_t n, const char *name, const int *S,
                      size_t k, size_t *m1, size_t *m2) {
    size_t found[2], nf = 0;
    for (size_t i = 0; i + k <= st->n_ids && nf < 2; i++) {
        if (memcmp(st->ids + i, S, k * sizeof(int)) != 0) continue;
        size_t end = st->off[i + k];
        if (end < n && is_letter((unsigned char)text[end])) continue;
        found[nf++] = i;
    }
    if (nf < 2) return -1;
    /* +1: the name starts after the space its first piece begins with;
     * the second mention starts at off[found[1]] + 1, past the scan. */
    if (other_mentions(text, n, st->off[found[1]], name, st->off[found[0]] + 1)) return -1;
    *m1 = found[0], *m2 = found[1];
    return 0;
}

/* Appends to w (cap bytes) one syllable drawn from those that agree
 * with rem (what is left of the prefix to spell: the syllable starts
 * with rem, or rem with it), only consonant-initial ones unless first;
 * advances *rem past it. 0, or -1 if none agrees or w is full. */
static int put_syllable(const al_synth *sy, size_t n_cons, al_rng *r, size_t *cand, int first,
                        const char **rem, char *w, size_t cap) {
    size_t lim = first ? al_synth_n_syllables(sy) : n_cons, nc = 0, rl = strlen(*rem);
    if (rl == 0) { /* every syllable agrees: no need to list them */
        if (!lim) return -1;
        nc = lim;
    } else {
        for (size_t j = 0; j < lim; j++) {
            const char *syl = al_synth_syllable(sy, j);
            size_t sl = strlen(syl);
            if (strncmp(syl, *rem, sl < rl ? sl : rl) == 0) cand[nc++] = j;
        }
        if (!nc) return -1;
    }
    size_t pick = al_rng_below(r, (uint32_t)nc);
    const char *syl = al_synth_syllable(sy, rl ? cand[pick] : pick);
    size_t sl = strlen(syl), wl = strlen(w);
    if (wl + sl >= cap) return -1;
    memcpy(w + wl, syl, sl + 1);
    *rem += sl < rl ? sl : rl;
    return 0;
}

/* An invented name for the replacement, spelled from synth's syllables
 * as its names are (2 to 4, vowel-initial ones only first, capitalised,
 * 4 to 12 letters), not a word and not a name of the story, whose
 * " Name" is k pieces: the same first piece S[0] as the name, another
 * second piece.
 * Sharing the first piece is what makes wrong the corrupted run's answer:
 * at the last position (S[0] again) an induction head copies whatever
 * followed S[0] earlier, the name's second piece in the clean run and
 * the replacement's in the corrupted one. So the spelling starts with
 * the letters of S[0] (syllables that agree with them), and the
 * tokenizer has the last word.
 * With key set, the replacement's first piece differs too (and its
 * second): at the last position S[0] then occurs nowhere earlier, so
 * nothing tells an induction head where to look (the key side of the
 * circuit, the previous-token information, is what differs), not only
 * what to copy. A name the story writes in lower case gets a lower-case
 * replacement. taken: the story's names (n_taken). Its ids go to R. 1
 * if one was found within REPLACE_TRIES draws, 0 if not, -1 on error. */
static int invent_name(const al_synth *sy, size_t n_cons, size_t *cand, al_rng *r,
                       const al_tokenizer *tok, const char (*taken_names)[AL_SYNTH_NAME_MAX],
                       int n_taken, const int *S, size_t k, int key, int *R, al_err *e) {
    char first[AL_SYNTH_NAME_MAX];
    size_t fl = 0;
    const unsigned char *fb = al_tok_bytes(tok, S[0], &fl);
    if (!fb || fl < 1 || fl > sizeof first) return 0;
    for (size_t i = 1; i < fl; i++) first[i - 1] = (char)tolower(fb[i]);
    first[fl - 1] = 0;
    int lower = fl > 1 && islower(fb[1]);
    for (int t = 0; t < REPLACE_TRIES; t++) {
        char w[AL_SYNTH_NAME_MAX * 2] = "";
        const char *rem = key ? "" : first, *none = "";
        int n_parts = 2 + (int)al_rng_below(r, 3), i = 0, bad = 0;
        while (!bad && *rem) bad = put_syllable(sy, n_cons, r, cand, i++ == 0, &rem, w, sizeof w);
        while (!bad && i < n_parts)
            bad = put_syllable(sy, n_cons, r, cand, i++ == 0, &none, w, sizeof w);
        size_t len = strlen(w);
        if (bad || len < 4 || len > 12) continue;
        w[0] = (char)toupper((unsigned char)w[0]);
        if (al_synth_is_word(sy, w)) continue;
        int taken = 0;
        for (int j = 0; j < n_taken; j++) taken |= strcmp(taken_names[j], w) == 0;
        if (taken) continue;
        if (lower) w[0] = (char)tolower((unsigned char)w[0]);
        size_t nr;
        if (encode_name(tok, w, R, &nr, e)) return -1;
        if (nr == k && (key ? R[0] != S[0] : R[0] == S[0]) && R[1] != S[1]) return 1;
    }
    return 0;
}

/* Tokens and their byte offsets for one story. */
static int story_encode(story *st, const al_tokenizer *tok, const char *text, size_t n, al_err *e) {
    free(st->ids);
    st->ids = NULL;
    if (al_tok_encode(tok, (const unsigned char *)text, n, 0, &st->ids, &st->n_ids, e)) return -1;
    if (st->n_ids + 1 > st->cap) {
        size_t cap = 2 * (st->n_ids + 1);
        size_t *o = al_malloc(cap, sizeof *o, e);
        if (!o) return -1;
        free(st->off);
        st->off = o, st->cap = cap;
    }
    st->off[0] = 0;
    for (size_t i = 0; i < st->n_ids; i++) {
        size_t l = 0;
        al_tok_bytes(tok, st->ids[i], &l);
        st->off[i + 1] = st->off[i] + l;
    }
    return 0;
}

/* The story stream of the names task (and the syllables of replacement
 * names), and how many of its syllables start with a consonant
 * (they come first, synth.h, and may follow another syllable). */
static int names_synth(uint64_t seed, long n_docs, al_synth_opts *so, al_synth **sy, size_t *n_cons,
                       al_err *e) {
    al_synth_defaults(so);
    so->seed = seed ^ AL_PAIRS_NAMES_SEED_XOR;
    so->n_docs = n_docs;
    so->repeat_fraction = 0;
    *sy = NULL;
    if (al_synth_new(sy, so, e)) return al_err_prefix(e, "names");
    *n_cons = 0;
    while (*n_cons < al_synth_n_syllables(*sy) &&
           !strchr("aeiou", al_synth_syllable(*sy, *n_cons)[0]))
        (*n_cons)++;
    return 0;
}

int al_pairs_names(const al_tokenizer *tok, int n, uint64_t seed, int n_ctx, int bos, int key,
                   volatile sig_atomic_t *stop, al_pairs *out, al_err *e) {
    memset(out, 0, sizeof *out);
    if (n < 1 || n > MAX_PAIRS)
        return al_errf(e, "names: the number of pairs must be in [1, %d] (got %d)", MAX_PAIRS, n);
    if (n_ctx < 1) return al_errf(e, "names: n_ctx must be >= 1 (got %d)", n_ctx);
    if (bos >= al_tok_vocab_size(tok))
        return al_errf(e, "names: BOS id %d is outside the tokenizer's vocabulary (%d)", bos,
                       al_tok_vocab_size(tok));
    long tries = 100L * n + 1000;
    al_synth_opts so;
    al_synth *sy = NULL;
    size_t n_cons;
    if (names_synth(seed, tries, &so, &sy, &n_cons, e)) return -1;
    builder bd = {AL_BUF_INIT, 0, 0};
    story st = {NULL, 0, NULL, 0};
    int *clean = al_malloc((size_t)n_ctx, sizeof(int), e);
    int *corr = clean ? al_malloc((size_t)n_ctx, sizeof(int), e) : NULL;
    size_t *cand = corr ? al_malloc(al_synth_n_syllables(sy), sizeof(size_t), e) : NULL;
    int rc = -1, b = bos >= 0;
    long t = 0;
    if (!cand) goto out;
    for (; t < tries && bd.N < n; t++) {
        /* one story is at most a few milliseconds of work, so Ctrl-C is
         * noticed at once even when n asks for millions of them */
        if (stop && *stop) {
            al_errf(e, "interrupted");
            goto out;
        }
        const char *text;
        size_t len;
        al_synth_doc d;
        if (al_synth_next(sy, &text, &len, &d, e)) goto out;
        if (d.kind != AL_SYNTH_STORY) continue;
        if (story_encode(&st, tok, text, len, e)) goto out;
        /* Of the names written twice the same way, the one whose second
         * mention comes first: the shortest pair, the likeliest to fit. */
        int best = -1, S[AL_SYNTH_NAME_MAX + 1], Sb[AL_SYNTH_NAME_MAX + 1];
        size_t kb = 0, m1b = 0, m2b = 0;
        for (int j = 0; j < d.n_names; j++) {
            size_t k, m1, m2;
            if (encode_name(tok, d.names[j], S, &k, e)) goto out;
            if (k < 2 || find_twice(&st, text, len, d.names[j], S, k, &m1, &m2)) continue;
            if ((size_t)b + m2 + 1 > (size_t)n_ctx || (best >= 0 && m2 >= m2b)) continue;
            best = j, kb = k, m1b = m1, m2b = m2;
            memcpy(Sb, S, k * sizeof(int));
        }
        if (best < 0) continue;
        al_rng r;
        al_rng_seed(&r, so.seed ^ REPLACE_SEED_SALT ^ ((uint64_t)t * 0x9e3779b97f4a7c15ULL));
        int R[AL_SYNTH_NAME_MAX * 2];
        int got = invent_name(sy, n_cons, cand, &r, tok, d.names, d.n_names, Sb, kb, key, R, e);
        if (got < 0) goto out;
        if (!got) continue;
        int T = b + (int)m2b + 1;
        if (b) clean[0] = bos;
        memcpy(clean + b, st.ids, (m2b + 1) * sizeof(int));
        memcpy(corr, clean, (size_t)T * sizeof(int));
        memcpy(corr + b + m1b, R, kb * sizeof(int));
        put_pair(&bd, clean, corr, T, Sb[1], R[1]);
    }
    if (bd.N < n) {
        al_errf(e,
                "names: only %d of %d stories found in %ld tries (each needs a name of >= 2 "
                "tokens written twice the same way within n_ctx %d tokens)",
                bd.N, n, t, n_ctx);
        goto out;
    }
    rc = pairs_finish(&bd, key ? "names-key" : "names", out, e);
out:
    al_buf_free(&bd.b);
    free(clean);
    free(corr);
    free(cand);
    free(st.ids);
    free(st.off);
    al_synth_free(sy);
    return rc;
}

int al_pairs_names_text(const al_tokenizer *tok, const al_tokens *val, int n, uint64_t seed,
                        int n_ctx, int key, int code, al_pairs *out, al_err *e) {
    memset(out, 0, sizeof *out);
    if (n < 1 || n > MAX_PAIRS)
        return al_errf(e, "names: the number of pairs must be in [1, %d] (got %d)", MAX_PAIRS, n);
    al_name_stories ns = {0};
    al_synth_opts so;
    al_synth *sy = NULL;
    size_t n_cons;
    if (code ? al_idents_in_code(tok, val, n, seed, n_ctx, &ns, e)
             : al_names_in_text(tok, val, n, NULL, seed, n_ctx, &ns, e))
        return al_err_prefix(e, code ? "idents" : "names");
    if (names_synth(seed, 1, &so, &sy, &n_cons, e)) {
        al_name_stories_free(&ns);
        return -1;
    }
    builder bd = {AL_BUF_INIT, 0, 0};
    int *corr = al_malloc((size_t)n_ctx, sizeof(int), e);
    size_t *cand = corr ? al_malloc(al_synth_n_syllables(sy), sizeof(size_t), e) : NULL;
    int rc = -1;
    if (!cand) goto out;
    for (int i = 0; i < ns.n; i++) {
        const al_name_story *st = &ns.s[i];
        size_t b0;
        const unsigned char *c0 = al_tok_bytes(tok, st->piece[0], &b0);
        if (code && (!c0 || b0 < 2 || c0[0] != ' ')) continue; /* replacements begin a word */
        al_rng r;
        al_rng_seed(&r, so.seed ^ REPLACE_SEED_SALT ^ ((uint64_t)i * 0x9e3779b97f4a7c15ULL));
        int R[AL_SYNTH_NAME_MAX * 2];
        char taken[1][AL_SYNTH_NAME_MAX];
        snprintf(taken[0], sizeof taken[0], "%s", st->name);
        int got =
            invent_name(sy, n_cons, cand, &r, tok, taken, 1, st->piece, (size_t)st->k, key, R, e);
        if (got < 0) goto out;
        if (!got) continue;
        int T = st->second + 1; /* up to and including the second appearance's first piece */
        memcpy(corr, st->ids, (size_t)T * sizeof(int));
        memcpy(corr + st->first, R, (size_t)st->k * sizeof(int));
        put_pair(&bd, st->ids, corr, T, st->piece[1], R[1]);
    }
    if (bd.N < 1) {
        al_errf(e,
                "%s: no %s of the text took an invented name twice with a replacement found "
                "(%d read)",
                code ? "idents" : "names", code ? "function" : "story", ns.n);
        goto out;
    }
    rc = pairs_finish(&bd,
                      code ? (key ? "idents-key" : "idents")
                           : (key ? "names-text-key" : "names-text"),
                      out, e);
out:
    al_buf_free(&bd.b);
    free(corr);
    free(cand);
    al_synth_free(sy);
    al_name_stories_free(&ns);
    return rc;
}

/* --------------------------------------------------------- plain text */

int al_pairs_from_tokens(const al_tokens *d, int T, int n, int d_vocab, al_pairs *out, al_err *e) {
    memset(out, 0, sizeof *out);
    if (n < 1 || n > MAX_PAIRS) return al_errf(e, "windows must be 1..%d (got %d)", MAX_PAIRS, n);
    if (T < 1) return al_errf(e, "window length must be >= 1 (got %d)", T);
    if (d->n <= (size_t)T)
        return al_errf(e, "token file has %zu tokens, too few for one window of %d + 1", d->n, T);
    if (d->max_id >= d_vocab)
        return al_errf(e, "token file holds id %d, outside the model's vocabulary of %d", d->max_id,
                       d_vocab);
    al_pairs p;
    memset(&p, 0, sizeof p);
    size_t NT = (size_t)n * T;
    p.clean = al_calloc(3 * NT + (size_t)n, sizeof(int), e);
    p.items = p.clean ? al_malloc(NT, sizeof(al_pair_item), e) : NULL;
    if (!p.items) {
        al_pairs_free(&p);
        return al_err_prefix(e, "cannot hold %d windows of %d tokens", n, T);
    }
    p.corr = p.clean + NT;
    int *targets = p.corr + NT;
    p.len = targets + NT;
    if (al_batch_fixed(d, n, T, 0, 1, p.clean, targets, e)) {
        al_pairs_free(&p);
        return -1;
    }
    memcpy(p.corr, p.clean, sizeof(int) * NT);
    snprintf(p.task, sizeof p.task, "data");
    p.N = n, p.T = T, p.n_items = (int)NT, p.logit_diff = 0;
    for (int i = 0; i < n; i++) {
        p.len[i] = T;
        for (int t = 0; t < T; t++)
            p.items[(size_t)i * T + t] = (al_pair_item){i, t, targets[(size_t)i * T + t], -1};
    }
    *out = p;
    return 0;
}

int al_pairs_batch_items(const al_pairs *t, int n0, int nb, int *i0) {
    int i = 0;
    while (i < t->n_items && t->items[i].pair < n0) i++;
    int j = i;
    while (j < t->n_items && t->items[j].pair < n0 + nb) j++;
    *i0 = i;
    return j - i;
}

int al_pairs_check(const al_pairs *t, int n_ctx, int d_vocab, al_err *e) {
    if (t->N < 1 || t->T < 1 || t->n_items < 1)
        return al_errf(e, "task '%s' has no pairs or no items", t->task);
    if (t->T > n_ctx)
        return al_errf(e, "task '%s' has sequences of %d tokens; the model's n_ctx is %d", t->task,
                       t->T, n_ctx);
    for (size_t i = 0; i < (size_t)t->N * t->T; i++)
        if (t->clean[i] < 0 || t->clean[i] >= d_vocab || t->corr[i] < 0 || t->corr[i] >= d_vocab)
            return al_errf(e, "task '%s', pair %zu: token id outside the model's vocabulary (%d)",
                           t->task, i / (size_t)t->T + 1, d_vocab);
    for (int i = 0; i < t->n_items; i++) {
        const al_pair_item *it = &t->items[i];
        if (it->pair < 0 || it->pair >= t->N || (i && it->pair < t->items[i - 1].pair))
            return al_errf(e, "task '%s', item %d: pair %d out of range or out of order", t->task,
                           i + 1, it->pair);
        if (it->pos < 0 || it->pos >= t->len[it->pair] || it->pos >= t->T)
            return al_errf(e, "task '%s', item %d: position %d outside its pair", t->task, i + 1,
                           it->pos);
        if (it->answer < 0 || it->answer >= d_vocab || it->wrong < -1 || it->wrong >= d_vocab)
            return al_errf(e, "task '%s', pair %d: answer id outside the model's vocabulary (%d)",
                           t->task, it->pair + 1, d_vocab);
    }
    return 0;
}
