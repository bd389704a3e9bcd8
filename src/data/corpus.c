/* corpus.c -- documents of plain-text corpora: splitting, normalised
 * hashing, cleaning (trim, empty, separator, exact duplicates), the
 * writer of the shared format, the validation split by documents and
 * the document set builder (see corpus.h). Mixing is in corpus_mix.c. */
#include "attnlab/corpus.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/tokenizer.h"

static int is_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13); }

int al_docs_mode_parse(const char *s, al_docs_mode *m, al_err *e) {
    static const char *const names[] = {"blank", "line", "eot", "story"};
    for (int i = 0; i < 4; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *m = (al_docs_mode)i;
            return 0;
        }
    return al_errf(e, "--docs '%s': must be blank, line, eot or story", s ? s : "");
}

/* ------------------------------------------------------------- split */

typedef struct doc_list {
    al_doc *d;
    size_t n, cap;
} doc_list;

static int add_doc(doc_list *l, const unsigned char *p, size_t n, al_err *e) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        al_doc *d = al_malloc(cap, sizeof *d, e);
        if (!d) return -1;
        if (l->n) memcpy(d, l->d, l->n * sizeof *d);
        free(l->d);
        l->d = d;
        l->cap = cap;
    }
    l->d[l->n++] = (al_doc){p, n};
    return 0;
}

/* blank, line and story: see corpus.h. */
static int split_lines(const unsigned char *s, size_t n, al_docs_mode mode, doc_list *l,
                       al_err *e) {
    size_t start = 0, end = 0;
    int in_doc = 0, prev_blank = 1;
    for (size_t i = 0; i < n;) {
        const unsigned char *nl = memchr(s + i, '\n', n - i);
        size_t le = nl ? (size_t)(nl - s) : n, ce = le;
        if (ce > i && s[ce - 1] == '\r') ce--;
        int blank = 1;
        for (size_t k = i; k < ce && blank; k++) blank = is_space(s[k]);
        if (!blank && mode == AL_DOCS_LINE) {
            if (add_doc(l, s + i, ce - i, e)) return -1;
        } else if (!blank && mode == AL_DOCS_STORY && in_doc && !prev_blank) {
            if (add_doc(l, s + start, end - start, e)) return -1;
            start = i, end = ce;
        } else if (!blank) {
            if (!in_doc) start = i;
            end = ce;
            in_doc = 1;
        } else if (in_doc && mode != AL_DOCS_STORY) {
            if (add_doc(l, s + start, end - start, e)) return -1;
            in_doc = 0;
        }
        prev_blank = blank;
        i = le + 1;
    }
    return in_doc ? add_doc(l, s + start, end - start, e) : 0;
}

/* The first <|endoftext|> at or after i, or n. */
static size_t find_eot(const unsigned char *s, size_t n, size_t i) {
    const size_t el = strlen(AL_EOT_TEXT);
    for (; i + el <= n; i++) {
        const unsigned char *q = memchr(s + i, '<', n - i);
        if (!q) return n;
        i = (size_t)(q - s);
        if (i + el <= n && memcmp(s + i, AL_EOT_TEXT, el) == 0) return i;
    }
    return n;
}

static int split_eot(const unsigned char *s, size_t n, doc_list *l, al_err *e) {
    const size_t el = strlen(AL_EOT_TEXT);
    for (size_t i = 0; i < n;) {
        size_t j = find_eot(s, n, i), a = i, b = j;
        while (a < b && is_space(s[a])) a++;
        while (b > a && is_space(s[b - 1])) b--;
        if (b > a && add_doc(l, s + a, b - a, e)) return -1;
        i = j < n ? j + el : n;
    }
    return 0;
}

int al_corpus_split(const unsigned char *s, size_t n, al_docs_mode mode, al_doc **docs,
                    size_t *n_docs, al_err *e) {
    doc_list l = {0};
    int rc = mode == AL_DOCS_EOT ? split_eot(s, n, &l, e) : split_lines(s, n, mode, &l, e);
    if (rc) {
        free(l.d);
        *docs = NULL, *n_docs = 0;
        return -1;
    }
    *docs = l.d, *n_docs = l.n;
    return 0;
}

/* ------------------------------------------------ normalised text */

/* Reads a document's normalised bytes one at a time (corpus.h): the
 * trimmed range, "\r\n" as "\n", blanks before a line end skipped. A run
 * of blanks is measured once (run_end), so a long run costs linear time. */
typedef struct norm_it {
    const unsigned char *s;
    size_t i, end, run_end;
} norm_it;

static norm_it norm_begin(al_doc d) {
    size_t a = 0, b = d.n;
    while (a < b && is_space(d.p[a])) a++;
    while (b > a && is_space(d.p[b - 1])) b--;
    return (norm_it){d.p, a, b, a};
}

static int at_line_end(const norm_it *it, size_t j) {
    return j == it->end || it->s[j] == '\n' ||
           (it->s[j] == '\r' && j + 1 < it->end && it->s[j + 1] == '\n');
}

/* The next byte, or -1 at the end. */
static int norm_next(norm_it *it) {
    while (it->i < it->end) {
        unsigned char c = it->s[it->i];
        if (it->i >= it->run_end && (c == ' ' || c == '\t')) {
            size_t j = it->i;
            while (j < it->end && (it->s[j] == ' ' || it->s[j] == '\t')) j++;
            if (at_line_end(it, j)) {
                it->i = j;
                continue;
            }
            it->run_end = j;
        }
        if (c == '\r' && it->i + 1 < it->end && it->s[it->i + 1] == '\n') {
            it->i++;
            continue;
        }
        it->i++;
        return c;
    }
    return -1;
}

uint64_t al_corpus_hash(al_doc d) {
    norm_it it = norm_begin(d);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int c; (c = norm_next(&it)) >= 0;) h = (h ^ (uint64_t)c) * 0x100000001b3ull;
    return h;
}

int al_corpus_same(al_doc a, al_doc b) {
    norm_it x = norm_begin(a), y = norm_begin(b);
    for (;;) {
        int c = norm_next(&x), d = norm_next(&y);
        if (c != d) return 0;
        if (c < 0) return 1;
    }
}

/* ------------------------------------------------------------ clean */

static int holds_eot(al_doc d) { return find_eot(d.p, d.n, 0) < d.n; }

int al_corpus_clean(al_doc *docs, size_t n, unsigned char *keep, al_corpus_stats *st, al_err *e) {
    memset(st, 0, sizeof *st);
    st->docs_in = n;
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    size_t *table = al_calloc(cap, sizeof(size_t), e); /* doc index + 1, 0 = empty */
    uint64_t *hash = al_malloc(n ? n : 1, sizeof(uint64_t), e);
    if (!table || !hash) {
        free(table), free(hash);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        al_doc *d = &docs[i];
        while (d->n && is_space(d->p[0])) d->p++, d->n--;
        while (d->n && is_space(d->p[d->n - 1])) d->n--;
        keep[i] = 0;
        if (d->n == 0) {
            st->empty++;
            continue;
        }
        if (holds_eot(*d)) {
            st->separator++;
            continue;
        }
        uint64_t h = hash[i] = al_corpus_hash(*d);
        size_t slot = (size_t)h & (cap - 1);
        int dup = 0;
        for (; table[slot] && !dup; slot = (slot + 1) & (cap - 1)) {
            size_t j = table[slot] - 1;
            dup = hash[j] == h && al_corpus_same(docs[j], *d);
        }
        if (dup) {
            st->duplicates++;
            continue;
        }
        table[slot] = i + 1;
        keep[i] = 1;
        st->docs++;
        st->bytes += d->n;
    }
    free(table), free(hash);
    return 0;
}

/* A distinct word: where it first occurs, its length and hash. */
typedef struct word_slot {
    const unsigned char *p;
    size_t n;
    uint64_t h;
} word_slot;

int al_corpus_words(const al_doc *docs, size_t n, const unsigned char *keep, size_t *words,
                    size_t *unique, al_err *e) {
    size_t cap = 1 << 16, used = 0, total = 0;
    word_slot *t = al_calloc(cap, sizeof *t, e);
    if (!t) return -1;
    for (size_t i = 0; i < n; i++) {
        if (keep && !keep[i]) continue;
        const unsigned char *s = docs[i].p, *end = s + docs[i].n;
        while (s < end) {
            while (s < end && is_space(*s)) s++;
            const unsigned char *w = s;
            uint64_t h = 0xcbf29ce484222325ull;
            for (; s < end && !is_space(*s); s++) h = (h ^ *s) * 0x100000001b3ull;
            if (s == w) break;
            size_t len = (size_t)(s - w), slot = (size_t)h & (cap - 1);
            total++;
            while (t[slot].p && !(t[slot].h == h && t[slot].n == len && !memcmp(t[slot].p, w, len)))
                slot = (slot + 1) & (cap - 1);
            if (t[slot].p) continue;
            t[slot] = (word_slot){w, len, h};
            if (++used * 2 <= cap) continue;
            /* half full: double, rehashing every distinct word */
            word_slot *g = al_calloc(cap * 2, sizeof *g, e);
            if (!g) {
                free(t);
                return -1;
            }
            for (size_t k = 0; k < cap; k++) {
                if (!t[k].p) continue;
                size_t q = (size_t)t[k].h & (cap * 2 - 1);
                while (g[q].p) q = (q + 1) & (cap * 2 - 1);
                g[q] = t[k];
            }
            free(t);
            t = g, cap *= 2;
        }
    }
    free(t);
    *words = total, *unique = used;
    return 0;
}

size_t al_corpus_write(al_buf *out, const al_doc *docs, size_t n, const unsigned char *keep) {
    size_t before = out->n, written = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep && !keep[i]) continue;
        if (written++) al_buf_puts(out, "\n" AL_EOT_TEXT "\n");
        al_buf_put(out, docs[i].p, docs[i].n);
    }
    if (written) al_buf_puts(out, "\n");
    return out->n - before;
}

/* ------------------------------------------------ validation split */

int al_val_pick_parse(const char *s, al_val_pick *v, al_err *e) {
    if (s && strcmp(s, "last") == 0)
        *v = AL_VAL_LAST;
    else if (s && strcmp(s, "hash") == 0)
        *v = AL_VAL_HASH;
    else
        return al_errf(e, "--val-pick '%s': must be last or hash", s ? s : "");
    return 0;
}

/* A document's place in [0, 1) for the hash split: the normalised hash
 * through a finaliser (FNV's low bits alone are poorly mixed). */
static double unit_of(al_doc d) {
    uint64_t h = al_corpus_hash(d) ^ 0x5851f42d4c957f2dull;
    h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ull,
        h ^= h >> 33;
    return (double)(h >> 11) * 0x1p-53;
}

int al_corpus_val_split(const al_doc *docs, size_t n, double frac, al_val_pick how,
                        unsigned char *is_val, size_t *n_val, al_err *e) {
    if (n < 2)
        return al_errf(e, "a train/validation split needs at least 2 documents (got %zu)", n);
    if (!(frac > 0 && frac < 1)) return al_errf(e, "validation share %g: must be in (0, 1)", frac);
    size_t k = 0;
    if (how == AL_VAL_LAST) {
        k = (size_t)llround(frac * (double)n);
        if (k < 1) k = 1;
        if (k > n - 1) k = n - 1;
        for (size_t i = 0; i < n; i++) is_val[i] = i >= n - k;
    } else {
        size_t lo = 0, hi = 0;
        double ulo = 2, uhi = -1;
        for (size_t i = 0; i < n; i++) {
            double u = unit_of(docs[i]);
            is_val[i] = u < frac;
            k += is_val[i];
            if (u < ulo) ulo = u, lo = i;
            if (u > uhi) uhi = u, hi = i;
        }
        if (k == 0) is_val[lo] = 1, k = 1;
        if (k == n) is_val[hi] = 0, k = n - 1;
    }
    if (n_val) *n_val = k;
    return 0;
}

/* ------------------------------------------------------ document set */

void al_docset_put(al_docset *s, const void *p, size_t n) {
    if (!s->open) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 256;
            size_t *off = realloc(s->off, cap * sizeof *off);
            if (off) s->off = off;
            size_t *len = off ? realloc(s->len, cap * sizeof *len) : NULL;
            if (len) s->len = len;
            if (!off || !len) {
                s->oom = 1;
                return;
            }
            s->cap = cap;
        }
        s->off[s->n] = s->text.n;
        s->len[s->n++] = 0;
        s->open = 1;
    }
    al_buf_put(&s->text, p, n);
    if (al_buf_ok(&s->text)) s->len[s->n - 1] += n;
}

void al_docset_end(al_docset *s) { s->open = 0; }

int al_docset_docs(al_docset *s, al_doc **docs, size_t *n, al_err *e) {
    s->open = 0;
    *docs = NULL, *n = 0;
    if (s->oom || !al_buf_ok(&s->text)) return al_errf(e, "out of memory building the corpus");
    al_doc *d = al_malloc(s->n ? s->n : 1, sizeof *d, e);
    if (!d) return -1;
    static const unsigned char none[1] = {0};
    for (size_t i = 0; i < s->n; i++)
        d[i] = (al_doc){s->text.p ? (const unsigned char *)s->text.p + s->off[i] : none, s->len[i]};
    *docs = d, *n = s->n;
    return 0;
}

void al_docset_free(al_docset *s) {
    al_buf_free(&s->text);
    free(s->off), free(s->len);
    memset(s, 0, sizeof *s);
}
