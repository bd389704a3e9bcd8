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
