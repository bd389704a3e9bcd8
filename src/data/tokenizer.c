/* tokenizer.c -- byte-level BPE: GPT-2-style pre-splitting by hand,
 * training that updates pair counts incrementally (only the words that
 * hold the merged pair are touched), encoding by merge rank with a word
 * cache, and tokenizer.json I/O. A Hugging Face tokenizer.json is the
 * other kind of al_tokenizer (tok_hf.c): the functions below hand it on.
 *
 * Training keeps, for every adjacent pair, its count and the list of
 * words that may hold it, plus a max-heap of (count, pair) with lazy
 * deletion. Merging (a,b) -> z only lowers the counts of existing pairs
 * and creates pairs that contain z, so a heap entry's count is never
 * below the pair's true count: an entry whose count is stale is re-pushed
 * with the true count, and the first fresh entry on top is the maximum. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"
#include "tok_hf.h"

#define EOT_LEN (sizeof AL_EOT_TEXT - 1)
#define MAX_VOCAB (1 << 24)
#define MAX_TOKEN_BYTES ((size_t)64 << 20) /* all tokens' bytes together */
#define MAX_JSON_BYTES ((size_t)512 << 20)
#define EMPTY_KEY UINT64_MAX
#define CACHE_SLOTS 16384 /* direct-mapped: frequent words stay resident */
#define CACHE_MAXLEN 24

typedef struct cache_slot {
    uint32_t hash;
    uint8_t len, nids; /* len 0: empty */
    unsigned char key[CACHE_MAXLEN];
    int32_t ids[CACHE_MAXLEN];
} cache_slot;

struct al_tokenizer {
    int vocab_size, n_merges, eot;
    int32_t *merges; /* (n_merges, 2): token 256+k joins merges[2k], [2k+1] */
    unsigned char *bytes; /* every token's bytes, concatenated */
    size_t *off; /* (vocab_size+1) offsets into bytes */
    uint64_t *rkey; /* merge-rank map: (a<<32|b) -> rank, open addressing */
    int32_t *rval;
    size_t rmask;
    cache_slot *cache; /* lazily allocated; guarded by cache_busy */
    atomic_flag cache_busy;
    al_tokhf *hf; /* a Hugging Face tokenizer: only vocab_size and eot above */
};

static inline uint64_t pair_key(int32_t a, int32_t b) {
    return (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

static inline size_t mix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* ------------------------------------------------------- pre-splitting */

enum { C_LETTER = 1, C_DIGIT, C_OTHER, C_SPACE };

static inline int byte_class(unsigned char c) {
    if (c >= 0x80 || (unsigned)((c | 0x20) - 'a') < 26u) return C_LETTER;
    if ((unsigned)(c - '0') < 10u) return C_DIGIT;
    if (c == ' ' || (c >= 9 && c <= 13)) return C_SPACE;
    return C_OTHER;
}

size_t al_tok_presplit(const unsigned char *s, size_t n, size_t i) {
    if (i >= n) return n;
    if (s[i] == '\'' && i + 1 < n) { /* 's 't 'm 'd 'll 've 're */
        unsigned char d = s[i + 1];
        if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
        if (i + 2 < n && ((d == 'l' && s[i + 2] == 'l') || (d == 'v' && s[i + 2] == 'e') ||
                          (d == 'r' && s[i + 2] == 'e')))
            return i + 3;
    }
    size_t j = i;
    if (s[i] == ' ' && i + 1 < n && byte_class(s[i + 1]) != C_SPACE) j = i + 1;
    int k = byte_class(s[j]);
    if (k != C_SPACE) {
        for (j++; j < n && byte_class(s[j]) == k; j++) {}
        return j;
    }
    /* Whitespace: GPT-2's \s+(?!\S) leaves the last byte before a word,
     * so the word can take it (" word"); a lone one is its own piece. */
    for (; j < n && byte_class(s[j]) == C_SPACE; j++) {}
    if (j < n && j - i > 1) j--;
    return j;
}

/* Position of the next "<|endoftext|>" at or after i, or n. */
static size_t find_eot(const unsigned char *s, size_t n, size_t i) {
    while (i + EOT_LEN <= n) {
        const unsigned char *p = memchr(s + i, '<', n - EOT_LEN + 1 - i);
        if (!p) break;
        size_t at = (size_t)(p - s);
        if (memcmp(p, AL_EOT_TEXT, EOT_LEN) == 0) return at;
        i = at + 1;
    }
    return n;
}

/* ------------------------------------------------ building a tokenizer */

static int rank_of(const al_tokenizer *t, int32_t a, int32_t b) {
    uint64_t k = pair_key(a, b);
    for (size_t i = mix64(k) & t->rmask;; i = (i + 1) & t->rmask) {
        if (t->rkey[i] == k) return t->rval[i];
        if (t->rkey[i] == EMPTY_KEY) return -1;
    }
}

void al_tok_free(al_tokenizer *t) {
    if (!t) return;
    free(t->merges);
    free(t->bytes);
    free(t->off);
    free(t->rkey);
    free(t->rval);
    free(t->cache);
    al_tokhf_free(t->hf);
    free(t);
}

/* Make a tokenizer from a merge list that the caller has validated (ids
 * defined before use, no repeated pair). Takes ownership of merges. */
static int tok_build(int32_t *merges, int n_merges, al_tokenizer **out, al_err *e) {
    *out = NULL;
    al_tokenizer *t = al_calloc(1, sizeof *t, e);
    if (!t) {
        free(merges);
        return -1;
    }
    atomic_flag_clear(&t->cache_busy);
    t->merges = merges;
    t->n_merges = n_merges;
    t->vocab_size = 256 + n_merges + 1;
    t->eot = t->vocab_size - 1;
    size_t nv = (size_t)t->vocab_size, total = 256 + EOT_LEN;
    t->off = al_malloc(nv + 1, sizeof(size_t), e);
    if (!t->off) goto fail;
    /* off[id+1]-off[id] = length; a merge's length is the sum of its parts */
    t->off[0] = 0;
    for (size_t id = 0; id < 256; id++) t->off[id + 1] = id + 1;
    for (int k = 0; k < n_merges; k++) {
        int32_t a = merges[2 * k], b = merges[2 * k + 1];
        size_t len = (t->off[a + 1] - t->off[a]) + (t->off[b + 1] - t->off[b]);
        if (len > MAX_TOKEN_BYTES - total) {
            al_errf(e, "merges[%d] makes the tokens longer than %zu bytes in total", k,
                    MAX_TOKEN_BYTES);
            goto fail;
        }
        total += len;
        t->off[256 + k + 1] = t->off[256 + k] + len;
    }
    t->off[nv] = t->off[nv - 1] + EOT_LEN;
    t->bytes = al_malloc(t->off[nv], 1, e);
    if (!t->bytes) goto fail;
    for (int id = 0; id < 256; id++) t->bytes[id] = (unsigned char)id;
    for (int k = 0; k < n_merges; k++) {
        int32_t a = merges[2 * k], b = merges[2 * k + 1];
        unsigned char *dst = t->bytes + t->off[256 + k];
        size_t la = t->off[a + 1] - t->off[a];
        memcpy(dst, t->bytes + t->off[a], la);
        memcpy(dst + la, t->bytes + t->off[b], t->off[b + 1] - t->off[b]);
    }
    memcpy(t->bytes + t->off[nv - 1], AL_EOT_TEXT, EOT_LEN);
    size_t cap = 16;
    while (cap < 2 * (size_t)n_merges) cap *= 2;
    t->rmask = cap - 1;
    t->rkey = al_malloc(cap, sizeof(uint64_t), e);
    t->rval = al_malloc(cap, sizeof(int32_t), e);
    if (!t->rkey || !t->rval) goto fail;
    memset(t->rkey, 0xff, cap * sizeof(uint64_t));
    for (int k = 0; k < n_merges; k++) {
        uint64_t key = pair_key(merges[2 * k], merges[2 * k + 1]);
        size_t i = mix64(key) & t->rmask;
        while (t->rkey[i] != EMPTY_KEY) i = (i + 1) & t->rmask;
        t->rkey[i] = key;
        t->rval[i] = k;
    }
    *out = t;
    return 0;
fail:
    al_tok_free(t);
    return -1;
}

int al_tok_byte_level(al_tokenizer **out, al_err *e) {
    int32_t *m = al_malloc(1, sizeof(int32_t), e);
    if (!m) return -1;
    return tok_build(m, 0, out, e);
}

int al_tok_vocab_size(const al_tokenizer *t) { return t->vocab_size; }
int al_tok_eot(const al_tokenizer *t) { return t->eot; }
const char *al_tok_kind(const al_tokenizer *t) {
    return t->hf ? "Hugging Face byte-level BPE" : "attnlab byte-level BPE";
}

const unsigned char *al_tok_bytes(const al_tokenizer *t, int id, size_t *len) {
    if (t->hf) return al_tokhf_bytes(t->hf, id, len);
    if (id < 0 || id >= t->vocab_size) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->off[id + 1] - t->off[id];
    return t->bytes + t->off[id];
}

int al_tok_merge(const al_tokenizer *t, int id, int *left, int *right) {
    if (t->hf || id < 256 || id >= 256 + t->n_merges) return -1;
    *left = t->merges[2 * (id - 256)];
    *right = t->merges[2 * (id - 256) + 1];
    return 0;
}

/* ----------------------------------------------------------- training */

typedef struct word_ent {
    const unsigned char *p;
    uint32_t len;
    uint64_t hash;
    int64_t count;
} word_ent;

typedef struct pair_ent {
    int32_t a, b;
    int64_t count;
    int32_t *w; /* words that may hold the pair (some stale) */
    int32_t wn, wcap;
    int32_t last_w; /* last word appended, to skip repeats */
    int32_t touched_at; /* merge step that last raised the count */
} pair_ent;

typedef struct heap_ent {
    int64_t count;
    int32_t pair;
} heap_ent;

typedef struct trainer {
    int32_t *sym; /* all words' symbols */
    size_t *woff; /* (n_words) */
    int32_t *wlen; /* (n_words) */
    int64_t *wfreq;
    size_t n_words;
    pair_ent *pairs;
    size_t n_pairs, cap_pairs;
    uint64_t *pkey; /* pair_key -> index into pairs */
    int32_t *pidx;
    size_t pmask;
    heap_ent *heap;
    size_t hn, hcap;
    int32_t *touched;
    size_t n_touched, cap_touched;
    int32_t step;
    al_err *e;
} trainer;

/* Grow *p (an array of *cap elements of size sz) to hold need. */
static int grow(void **p, size_t *cap, size_t need, size_t sz, al_err *e) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    size_t bytes;
    if (al_mul_overflow(nc, sz, &bytes)) return al_errf(e, "out of memory");
    void *q = realloc(*p, bytes);
    if (!q) return al_errf(e, "out of memory (%zu bytes)", bytes);
    *p = q;
    *cap = nc;
    return 0;
}

/* Unique pre-split words with their counts (the text must outlive them). */
static int count_words(const unsigned char *s, size_t n, word_ent **out, size_t *n_out, al_err *e) {
    size_t cap = 1 << 14, used = 0;
    word_ent *tab = al_calloc(cap, sizeof *tab, e);
    if (!tab) return -1;
    for (size_t seg = 0; seg < n;) {
        size_t end = find_eot(s, n, seg);
        for (size_t i = seg; i < end;) {
            size_t j = al_tok_presplit(s, end, i);
            uint64_t h = fnv1a(s + i, j - i);
            size_t k = mix64(h) & (cap - 1);
            for (; tab[k].p; k = (k + 1) & (cap - 1))
                if (tab[k].hash == h && tab[k].len == j - i && memcmp(tab[k].p, s + i, j - i) == 0)
                    break;
            if (!tab[k].p) {
                if (j - i > UINT32_MAX) {
                    free(tab);
                    return al_errf(e, "a word of %zu bytes is too long", j - i);
                }
                tab[k] = (word_ent){s + i, (uint32_t)(j - i), h, 0};
                used++;
            }
            tab[k].count++;
            i = j;
            if (2 * used > cap) { /* rehash into a table twice the size */
                word_ent *nt = al_calloc(2 * cap, sizeof *nt, e);
                if (!nt) {
                    free(tab);
                    return -1;
                }
                for (size_t q = 0; q < cap; q++) {
                    if (!tab[q].p) continue;
                    size_t r = mix64(tab[q].hash) & (2 * cap - 1);
                    while (nt[r].p) r = (r + 1) & (2 * cap - 1);
                    nt[r] = tab[q];
                }
                free(tab);
                tab = nt;
                cap *= 2;
            }
        }
        seg = end < n ? end + EOT_LEN : n;
    }
    size_t m = 0;
    for (size_t q = 0; q < cap; q++)
        if (tab[q].p) tab[m++] = tab[q];
    *out = tab;
    *n_out = m;
    return 0;
}

static int32_t pair_find(trainer *tr, int32_t a, int32_t b) {
    uint64_t k = pair_key(a, b);
    for (size_t i = mix64(k) & tr->pmask;; i = (i + 1) & tr->pmask) {
        if (tr->pkey[i] == k) return tr->pidx[i];
        if (tr->pkey[i] == EMPTY_KEY) return -1;
    }
}

static int pair_rehash(trainer *tr) {
    size_t cap = (tr->pmask + 1) * 2;
    uint64_t *nk = al_malloc(cap, sizeof *nk, tr->e);
    int32_t *ni = al_malloc(cap, sizeof *ni, tr->e);
    if (!nk || !ni) {
        free(nk);
        free(ni);
        return -1;
    }
    memset(nk, 0xff, cap * sizeof *nk);
    for (size_t p = 0; p < tr->n_pairs; p++) {
        uint64_t k = pair_key(tr->pairs[p].a, tr->pairs[p].b);
        size_t i = mix64(k) & (cap - 1);
        while (nk[i] != EMPTY_KEY) i = (i + 1) & (cap - 1);
        nk[i] = k;
        ni[i] = (int32_t)p;
    }
    free(tr->pkey);
    free(tr->pidx);
    tr->pkey = nk;
    tr->pidx = ni;
    tr->pmask = cap - 1;
    return 0;
}

/* Index of pair (a,b), created with count 0 if new; -1 on failure. */
static int32_t pair_get(trainer *tr, int32_t a, int32_t b) {
    int32_t p = pair_find(tr, a, b);
    if (p >= 0) return p;
    if (2 * (tr->n_pairs + 1) > tr->pmask + 1 && pair_rehash(tr) != 0) return -1;
    if (tr->n_pairs >= INT32_MAX ||
        grow((void **)&tr->pairs, &tr->cap_pairs, tr->n_pairs + 1, sizeof(pair_ent), tr->e))
        return -1;
    p = (int32_t)tr->n_pairs++;
    tr->pairs[p] = (pair_ent){a, b, 0, NULL, 0, 0, -1, -1};
    uint64_t k = pair_key(a, b);
    size_t i = mix64(k) & tr->pmask;
    while (tr->pkey[i] != EMPTY_KEY) i = (i + 1) & tr->pmask;
    tr->pkey[i] = k;
    tr->pidx[i] = p;
    return p;
}

/* Heap order: larger count first, then smaller (left, right). */
static int heap_before(const trainer *tr, heap_ent x, heap_ent y) {
    if (x.count != y.count) return x.count > y.count;
    const pair_ent *p = &tr->pairs[x.pair], *q = &tr->pairs[y.pair];
    return p->a != q->a ? p->a < q->a : p->b < q->b;
}

static int heap_push(trainer *tr, int32_t pair) {
    if (grow((void **)&tr->heap, &tr->hcap, tr->hn + 1, sizeof(heap_ent), tr->e)) return -1;
    heap_ent x = {tr->pairs[pair].count, pair};
    size_t i = tr->hn++;
    while (i > 0 && heap_before(tr, x, tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = x;
    return 0;
}

static heap_ent heap_pop(trainer *tr) {
    heap_ent top = tr->heap[0], x = tr->heap[--tr->hn];
    size_t i = 0, n = tr->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(tr, tr->heap[c + 1], tr->heap[c])) c++;
        if (!heap_before(tr, tr->heap[c], x)) break;
        tr->heap[i] = tr->heap[c];
        i = c;
    }
    if (n > 0) tr->heap[i] = x;
    return top;
}

/* Add f occurrences of (a,b) in word w. */
static int pair_inc(trainer *tr, int32_t a, int32_t b, int64_t f, int32_t w) {
    int32_t p = pair_get(tr, a, b);
    if (p < 0) return -1;
    pair_ent *pe = &tr->pairs[p];
    pe->count += f;
    if (pe->last_w != w) {
        if (pe->wn == pe->wcap) {
            size_t cap = (size_t)pe->wcap;
            if (grow((void **)&pe->w, &cap, (size_t)pe->wn + 1, sizeof(int32_t), tr->e)) return -1;
            pe->wcap = (int32_t)cap;
        }
        pe->w[pe->wn++] = w;
        pe->last_w = w;
    }
    if (pe->touched_at != tr->step) {
        pe->touched_at = tr->step;
        if (grow((void **)&tr->touched, &tr->cap_touched, tr->n_touched + 1, sizeof(int32_t),
                 tr->e))
            return -1;
        tr->touched[tr->n_touched++] = p;
    }
    return 0;
}

static void pair_dec(trainer *tr, int32_t a, int32_t b, int64_t f) {
    int32_t p = pair_find(tr, a, b);
    if (p >= 0) tr->pairs[p].count -= f; /* always found: the word held it */
}

/* Replace every (a,b) in word w by z, left to right, updating the counts
 * of the neighbouring pairs. */
static int merge_word(trainer *tr, int32_t w, int32_t a, int32_t b, int32_t z) {
    int32_t *s = tr->sym + tr->woff[w];
    int32_t len = tr->wlen[w], o = 0;
    int64_t f = tr->wfreq[w];
    for (int32_t i = 0; i < len;) {
        if (i + 1 < len && s[i] == a && s[i + 1] == b) {
            if (o > 0) {
                pair_dec(tr, s[o - 1], a, f);
                if (pair_inc(tr, s[o - 1], z, f, w)) return -1;
            }
            if (i + 2 < len) {
                pair_dec(tr, b, s[i + 2], f);
                if (pair_inc(tr, z, s[i + 2], f, w)) return -1;
            }
            pair_dec(tr, a, b, f);
            s[o++] = z;
            i += 2;
        } else {
            s[o++] = s[i++];
        }
    }
    tr->wlen[w] = o;
    return 0;
}

static void trainer_free(trainer *tr) {
    for (size_t p = 0; p < tr->n_pairs; p++) free(tr->pairs[p].w);
    free(tr->pairs);
    free(tr->pkey);
    free(tr->pidx);
    free(tr->heap);
    free(tr->touched);
    free(tr->sym);
    free(tr->woff);
    free(tr->wlen);
    free(tr->wfreq);
}

static int trainer_init(trainer *tr, const word_ent *words, size_t n_words) {
    size_t total = 0;
    for (size_t w = 0; w < n_words; w++) total += words[w].len;
    tr->n_words = n_words;
    tr->sym = al_malloc(total ? total : 1, sizeof(int32_t), tr->e);
    tr->woff = al_malloc(n_words ? n_words : 1, sizeof(size_t), tr->e);
    tr->wlen = al_malloc(n_words ? n_words : 1, sizeof(int32_t), tr->e);
    tr->wfreq = al_malloc(n_words ? n_words : 1, sizeof(int64_t), tr->e);
    tr->pmask = (1 << 12) - 1;
    tr->pkey = al_malloc(tr->pmask + 1, sizeof(uint64_t), tr->e);
    tr->pidx = al_malloc(tr->pmask + 1, sizeof(int32_t), tr->e);
    if (!tr->sym || !tr->woff || !tr->wlen || !tr->wfreq || !tr->pkey || !tr->pidx) return -1;
    memset(tr->pkey, 0xff, (tr->pmask + 1) * sizeof(uint64_t));
    if (n_words > INT32_MAX) return al_errf(tr->e, "too many distinct words");
    size_t o = 0;
    for (size_t w = 0; w < n_words; w++) {
        tr->woff[w] = o;
        tr->wlen[w] = (int32_t)words[w].len;
        tr->wfreq[w] = words[w].count;
        for (uint32_t i = 0; i < words[w].len; i++) tr->sym[o + i] = words[w].p[i];
        for (uint32_t i = 0; i + 1 < words[w].len; i++)
            if (pair_inc(tr, words[w].p[i], words[w].p[i + 1], words[w].count, (int32_t)w))
                return -1;
        o += words[w].len;
    }
    for (size_t p = 0; p < tr->n_pairs; p++)
        if (heap_push(tr, (int32_t)p)) return -1;
    return 0;
}

/* Learn up to n_want merges into merges[]; sets *n_got. */
static int trainer_run(trainer *tr, int32_t *merges, int n_want, int *n_got, int progress) {
    al_progress pg;
    al_progress_init(&pg, 5.0);
    int k = 0;
    while (k < n_want && tr->hn > 0) {
        heap_ent top = heap_pop(tr);
        int64_t now = tr->pairs[top.pair].count;
        if (top.count != now) { /* stale: counts only fall, so re-queue */
            if (now > 0 && heap_push(tr, top.pair)) return -1;
            continue;
        }
        if (now <= 0) continue;
        int32_t a = tr->pairs[top.pair].a, b = tr->pairs[top.pair].b, z = 256 + k;
        merges[2 * k] = a;
        merges[2 * k + 1] = b;
        tr->step = k;
        tr->n_touched = 0;
        int32_t *wl = tr->pairs[top.pair].w, wn = tr->pairs[top.pair].wn;
        tr->pairs[top.pair].w = NULL; /* (a,b) gains no words while we merge it */
        tr->pairs[top.pair].wn = tr->pairs[top.pair].wcap = 0;
        for (int32_t i = 0; i < wn; i++)
            if (merge_word(tr, wl[i], a, b, z)) {
                free(wl);
                return -1;
            }
        free(wl);
        tr->pairs[top.pair].count = 0;
        for (size_t i = 0; i < tr->n_touched; i++)
            if (tr->pairs[tr->touched[i]].count > 0 && heap_push(tr, tr->touched[i])) return -1;
        k++;
        if (progress && k % 64 == 0 && al_now() - pg.t_start > 0.5) /* quiet when quick */
            al_progress_update(&pg, 0, "tokenizer: %d/%d merges, %.1f s", k, n_want,
                               al_now() - pg.t_start);
    }
    if (progress) al_progress_done(&pg);
    *n_got = k;
    return 0;
}

int al_tok_train(const unsigned char *text, size_t n, int vocab_size, int progress,
                 al_tokenizer **out, al_err *e) {
    *out = NULL;
    if (vocab_size < 257 || vocab_size > MAX_VOCAB)
        return al_errf(e, "vocabulary size %d is out of range (257..%d)", vocab_size, MAX_VOCAB);
    int n_want = vocab_size - 257;
    word_ent *words = NULL;
    size_t n_words = 0;
    if (count_words(text, n, &words, &n_words, e) != 0) return -1;
    trainer tr;
    memset(&tr, 0, sizeof tr);
    tr.e = e;
    tr.step = -1; /* pairs start with touched_at -1: the first count is no "touch" */
    int32_t *merges = al_malloc(n_want ? (size_t)n_want * 2 : 1, sizeof(int32_t), e);
    int n_got = 0, rc = -1;
    if (merges && trainer_init(&tr, words, n_words) == 0 &&
        trainer_run(&tr, merges, n_want, &n_got, progress) == 0)
        rc = 0;
    free(words);
    trainer_free(&tr);
    if (rc != 0) {
        free(merges);
        return -1;
    }
    return tok_build(merges, n_got, out, e);
}

/* ----------------------------------------------------------- encoding */

/* Symbols of one word, merged lowest rank first: a min-heap of
 * (rank << 32 | position) over a linked list, so equal ranks go left to
 * right -- the same result as applying the merges in order, as training
 * did -- in O(L log L) even for very long "words". */
typedef struct word_scratch {
    int32_t *sym, *prv, *nxt;
    uint64_t *heap;
} word_scratch;

/* The merge queue of both BPE kinds (tok_hf.h): a binary min-heap of
 * (rank << 32 | position) keys, so the lowest rank, then the leftmost
 * position, comes first. */
void bpe_heap_push(uint64_t *h, size_t *n, uint64_t x) {
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

uint64_t bpe_heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = x;
    return top;
}

static void push_pair(const al_tokenizer *t, word_scratch *w, size_t *hn, int32_t pos) {
    int32_t q = w->nxt[pos];
    if (q < 0) return;
    int r = rank_of(t, w->sym[pos], w->sym[q]);
    if (r >= 0) bpe_heap_push(w->heap, hn, (uint64_t)r << 32 | (uint32_t)pos);
}

static size_t bpe_word(const al_tokenizer *t, const unsigned char *p, size_t len, int32_t *out,
                       word_scratch *w) {
    size_t hn = 0;
    for (size_t i = 0; i < len; i++) {
        w->sym[i] = p[i];
        w->prv[i] = (int32_t)i - 1;
        w->nxt[i] = i + 1 < len ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < len; i++) push_pair(t, w, &hn, (int32_t)i);
    while (hn > 0) {
        uint64_t top = bpe_heap_pop(w->heap, &hn);
        int32_t pos = (int32_t)(uint32_t)top, r = (int32_t)(top >> 32), q = w->nxt[pos];
        if (w->sym[pos] < 0 || q < 0 || rank_of(t, w->sym[pos], w->sym[q]) != r)
            continue; /* stale: one side was merged away meanwhile */
        w->sym[pos] = 256 + r;
        w->sym[q] = -1;
        w->nxt[pos] = w->nxt[q];
        if (w->nxt[q] >= 0) w->prv[w->nxt[q]] = pos;
        if (w->prv[pos] >= 0) push_pair(t, w, &hn, w->prv[pos]);
        push_pair(t, w, &hn, pos);
    }
    size_t m = 0;
    for (int32_t i = 0; i >= 0; i = w->nxt[i]) out[m++] = w->sym[i];
    return m;
}

/* Encode one word, through the cache when there is one. */
static int encode_word(const al_tokenizer *t, const unsigned char *p, size_t len, int *out,
                       cache_slot *cache, size_t *n_out, al_err *e) {
    if (len == 1) {
        out[0] = p[0];
        *n_out = 1;
        return 0;
    }
    cache_slot *slot = NULL;
    uint32_t h = 0;
    if (cache && len <= CACHE_MAXLEN) {
        h = (uint32_t)fnv1a(p, len);
        slot = &cache[h & (CACHE_SLOTS - 1)];
        if (slot->len == len && slot->hash == h && memcmp(slot->key, p, len) == 0) {
            for (int i = 0; i < slot->nids; i++) out[i] = slot->ids[i];
            *n_out = slot->nids;
            return 0;
        }
    }
    enum { SMALL = 64 };
    int32_t s_sym[SMALL], s_prv[SMALL], s_nxt[SMALL], s_ids[SMALL];
    uint64_t s_heap[2 * SMALL]; /* each merge pops one entry and pushes <= 2 */
    word_scratch w = {s_sym, s_prv, s_nxt, s_heap};
    int32_t *ids = s_ids;
    void *big = NULL;
    if (len > SMALL) { /* one block: sym, prv, nxt, ids, then the heap */
        size_t bytes;
        if (al_mul_overflow(len, 4 * sizeof(int32_t) + 2 * sizeof(uint64_t), &bytes))
            return al_errf(e, "word too long");
        big = al_malloc(bytes, 1, e);
        if (!big) return -1;
        w.heap = big;
        w.sym = (int32_t *)(w.heap + 2 * len);
        w.prv = w.sym + len;
        w.nxt = w.prv + len;
        ids = w.nxt + len;
    }
    size_t m = bpe_word(t, p, len, ids, &w);
    for (size_t i = 0; i < m; i++) out[i] = ids[i];
    free(big);
    if (slot) {
        slot->hash = h;
        slot->len = (uint8_t)len;
        slot->nids = (uint8_t)m;
        memcpy(slot->key, p, len);
        for (size_t i = 0; i < m; i++) slot->ids[i] = ids[i];
    }
    *n_out = m;
    return 0;
}

static int encode_plain(const al_tokenizer *t, const unsigned char *s, size_t n, int *ids,
                        size_t *n_ids, cache_slot *cache, al_err *e) {
    for (size_t i = 0; i < n;) {
        size_t j = al_tok_presplit(s, n, i), m;
        if (encode_word(t, s + i, j - i, ids + *n_ids, cache, &m, e)) return -1;
        *n_ids += m;
        i = j;
    }
    return 0;
}

int al_tok_encode_into(const al_tokenizer *t, const unsigned char *text, size_t n,
                       int allow_special, int *ids, size_t *n_ids, al_err *e) {
    *n_ids = 0;
    if (t->hf) {
        size_t cap = n;
        return al_tokhf_encode(t->hf, text, n, allow_special, &ids, &cap, 1, n_ids, e);
    }
    al_tokenizer *mt = (al_tokenizer *)t; /* the cache is not part of the value */
    cache_slot *cache = NULL;
    /* One caller at a time uses the cache; a concurrent one goes without. */
    int locked = !atomic_flag_test_and_set(&mt->cache_busy);
    if (locked) {
        if (!mt->cache) mt->cache = calloc(CACHE_SLOTS, sizeof(cache_slot));
        cache = mt->cache;
    }
    int rc = 0;
    for (size_t seg = 0; seg < n && rc == 0;) {
        size_t end = allow_special ? find_eot(text, n, seg) : n;
        rc = encode_plain(t, text + seg, end - seg, ids, n_ids, cache, e);
        if (end < n) ids[(*n_ids)++] = t->eot;
        seg = end < n ? end + EOT_LEN : n;
    }
    if (locked) atomic_flag_clear(&mt->cache_busy);
    return rc;
}

int al_tok_encode(const al_tokenizer *t, const unsigned char *text, size_t n, int allow_special,
                  int **ids, size_t *n_ids, al_err *e) {
    *ids = NULL;
    *n_ids = 0;
    if (t->hf) { /* it may need more ids than bytes: a prefix space, NFC */
        int *buf = NULL;
        size_t cap = 0;
        if (al_tokhf_encode(t->hf, text, n, allow_special, &buf, &cap, 0, n_ids, e) != 0 ||
            (!buf && !(buf = al_malloc(1, sizeof(int), e)))) {
            free(buf);
            *n_ids = 0;
            return -1;
        }
        *ids = buf;
        return 0;
    }
    int *buf = al_malloc(n ? n : 1, sizeof(int), e);
    if (!buf) return -1;
    if (al_tok_encode_into(t, text, n, allow_special, buf, n_ids, e) != 0) {
        free(buf);
        return -1;
    }
    *ids = buf;
    return 0;
}

int al_tok_decode(const al_tokenizer *t, const int *ids, size_t n, unsigned char **out,
                  size_t *n_out, al_err *e) {
    *out = NULL;
    *n_out = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return al_errf(e,
                           "cannot decode: token %d at position %zu is not in the "
                           "vocabulary (size %d)",
                           ids[i], i, t->vocab_size);
        size_t l;
        al_tok_bytes(t, ids[i], &l);
        total += l;
    }
    unsigned char *buf = al_malloc(total + 1, 1, e);
    if (!buf) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const unsigned char *b = al_tok_bytes(t, ids[i], &l);
        memcpy(buf + o, b, l);
        o += l;
    }
    buf[o] = 0;
    *out = buf;
    *n_out = o;
    return 0;
}

/* ------------------------------------------------------------ display */

size_t al_tok_display(const al_tokenizer *t, int id, char *buf, size_t cap) {
    if (cap == 0) return 0;
    size_t len, o = 0;
    const unsigned char *s = al_tok_bytes(t, id, &len);
    if (!s || id == t->eot) { /* (-1 when a Hugging Face tokenizer has none) */
        snprintf(buf, cap, "%s", s ? AL_EOT_TEXT : "<bad id>");
        return strlen(buf);
    }
    for (size_t i = 0; i < len;) {
        char piece[8];
        size_t pl = 1, adv = 1;
        unsigned char c = s[i];
        if (c == ' ')
            pl = (size_t)snprintf(piece, sizeof piece, "\xe2\x90\xa3");
        else if (c == '\n')
            pl = (size_t)snprintf(piece, sizeof piece, "\\n");
        else if (c == '\t')
            pl = (size_t)snprintf(piece, sizeof piece, "\\t");
        else if (c < 0x20 || c == 0x7f)
            pl = (size_t)snprintf(piece, sizeof piece, "\\x%02x", c);
        else if (c < 0x80)
            piece[0] = (char)c;
        else if ((adv = hf_utf8_len(s + i, len - i)) > 0) {
            memcpy(piece, s + i, adv);
            pl = adv;
        } else {
            adv = 1;
            pl = (size_t)snprintf(piece, sizeof piece, "\\x%02x", c);
        }
        if (o + pl >= cap) break;
        memcpy(buf + o, piece, pl);
        o += pl;
        i += adv;
    }
    buf[o] = 0;
    return o;
}

/* -------------------------------------------------------- tokenizer.json */

#define TOK_TYPE "bpe-bytes"
#define TOK_PRESPLIT "gpt2"

/* Laid out one merge and one token per line so a person can read and diff
 * it; cJSON does all string escaping. */
int al_tok_save(const al_tokenizer *t, const char *path, al_err *e) {
    if (t->hf) return al_tokhf_save(t->hf, path, e);
    al_buf b = AL_BUF_INIT;
    al_buf_printf(&b,
                  "{\n  \"type\": \"%s\",\n  \"version\": 1,\n  \"pretokenizer\": \"%s\",\n"
                  "  \"vocab_size\": %d,\n  \"eot_id\": %d,\n  \"merges\": [",
                  TOK_TYPE, TOK_PRESPLIT, t->vocab_size, t->eot);
    for (int k = 0; k < t->n_merges; k++)
        al_buf_printf(&b, "%s\n    [%d, %d]", k ? "," : "", t->merges[2 * k], t->merges[2 * k + 1]);
    al_buf_puts(&b, t->n_merges ? "\n  ],\n  \"vocab\": [" : "],\n  \"vocab\": [");
    for (int id = 0; id < t->vocab_size && al_buf_ok(&b); id++) {
        char disp[1024];
        al_tok_display(t, id, disp, sizeof disp);
        cJSON *str = cJSON_CreateString(disp);
        char *js = str ? cJSON_PrintUnformatted(str) : NULL;
        cJSON_Delete(str);
        if (!js) {
            al_buf_free(&b);
            return al_errf(e, "cannot write tokenizer %s: out of memory", path);
        }
        al_buf_puts(&b, id ? ",\n    " : "\n    ");
        al_buf_puts(&b, js);
        cJSON_free(js);
    }
    al_buf_puts(&b, "\n  ]\n}\n");
    int rc = al_buf_ok(&b) ? al_write_file_atomic(path, b.p, b.n, e)
                           : al_errf(e, "cannot write tokenizer %s: out of memory", path);
    al_buf_free(&b);
    return rc;
}

/* An integer-valued JSON number in [lo, hi], or -1 with *ok cleared. */
static long json_int(const cJSON *x, long lo, long hi, int *ok) {
    if (!cJSON_IsNumber(x) || !(x->valuedouble >= (double)lo && x->valuedouble <= (double)hi) ||
        x->valuedouble != (double)(long)x->valuedouble) {
        *ok = 0;
        return -1;
    }
    *ok = 1;
    return (long)x->valuedouble;
}

static int parse_merges(const cJSON *arr, int32_t *m, const char *path, al_err *e) {
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        int ok = cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2;
        if (ok) {
            for (int s = 0; s < 2 && ok; s++) {
                long v = json_int(cJSON_GetArrayItem(it, s), 0, MAX_VOCAB, &ok);
                if (ok && v >= 256 + k) {
                    return al_errf(e,
                                   "cannot read tokenizer %s: merges[%d] refers to token "
                                   "%ld which is not yet defined (merges[%d] defines token %d)",
                                   path, k, v, k, 256 + k);
                }
                m[2 * k + s] = (int32_t)v;
            }
        }
        if (!ok)
            return al_errf(e,
                           "cannot read tokenizer %s: merges[%d] is not a pair of "
                           "non-negative integer token ids",
                           path, k);
        k++;
    }
    return 0;
}

/* No pair may be learned twice: the second copy could never apply. */
static int check_repeats(const int32_t *m, int n_merges, const char *path, al_err *e) {
    size_t cap = 16;
    while (cap < 2 * (size_t)n_merges) cap *= 2;
    uint64_t *keys = al_malloc(cap, sizeof *keys, e);
    int32_t *at = al_malloc(cap, sizeof *at, e);
    int rc = 0;
    if (!keys || !at)
        rc = -1;
    else
        memset(keys, 0xff, cap * sizeof *keys);
    for (int k = 0; k < n_merges && rc == 0; k++) {
        uint64_t key = pair_key(m[2 * k], m[2 * k + 1]);
        size_t i = mix64(key) & (cap - 1);
        for (; keys[i] != EMPTY_KEY; i = (i + 1) & (cap - 1))
            if (keys[i] == key) {
                rc = al_errf(e,
                             "cannot read tokenizer %s: merges[%d] repeats the pair "
                             "[%d, %d] of merges[%d]",
                             path, k, m[2 * k], m[2 * k + 1], at[i]);
                break;
            }
        keys[i] = key;
        at[i] = k;
    }
    free(keys);
    free(at);
    return rc;
}

static const char *const known_keys[] = {"type",   "version", "pretokenizer", "vocab_size",
                                         "eot_id", "merges",  "vocab",        NULL};

static int load_json(const cJSON *root, const char *path, al_tokenizer **out, al_err *e) {
    if (!cJSON_IsObject(root))
        return al_errf(e, "cannot read tokenizer %s: not a JSON object", path);
    for (const cJSON *it = root->child; it; it = it->next) {
        int known = 0;
        for (int i = 0; known_keys[i]; i++) known |= strcmp(it->string, known_keys[i]) == 0;
        if (!known) { /* the key is quoted on one line, control bytes as '?' */
            char k[48];
            size_t i = 0;
            for (; it->string[i] && i < 40; i++)
                k[i] = (unsigned char)it->string[i] < 0x20 ? '?' : it->string[i];
            k[i] = 0;
            return al_errf(e, "cannot read tokenizer %s: unknown key \"%s%s\"", path, k,
                           it->string[i] ? "..." : "");
        }
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "type");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pretokenizer");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, TOK_TYPE) != 0)
        return al_errf(e, "cannot read tokenizer %s: \"type\" must be \"%s\"", path, TOK_TYPE);
    if (!cJSON_IsString(pre) || strcmp(pre->valuestring, TOK_PRESPLIT) != 0)
        return al_errf(e, "cannot read tokenizer %s: \"pretokenizer\" must be \"%s\"", path,
                       TOK_PRESPLIT);
    int ok;
    long version = json_int(cJSON_GetObjectItemCaseSensitive(root, "version"), 0, 1000, &ok);
    if (!ok || version != 1)
        return al_errf(e, "cannot read tokenizer %s: \"version\" must be 1", path);
    long nv = json_int(cJSON_GetObjectItemCaseSensitive(root, "vocab_size"), 257, MAX_VOCAB, &ok);
    if (!ok)
        return al_errf(e,
                       "cannot read tokenizer %s: \"vocab_size\" must be an integer in "
                       "257..%d",
                       path, MAX_VOCAB);
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(root, "merges");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(root, "vocab");
    if (!cJSON_IsArray(merges))
        return al_errf(e, "cannot read tokenizer %s: \"merges\" must be an array", path);
    int n_merges = cJSON_GetArraySize(merges);
    if (n_merges != nv - 257)
        return al_errf(e,
                       "cannot read tokenizer %s: vocab_size %ld needs %ld merges "
                       "(256 bytes + merges + <|endoftext|>) but there are %d",
                       path, nv, nv - 257, n_merges);
    long eot = json_int(cJSON_GetObjectItemCaseSensitive(root, "eot_id"), 0, MAX_VOCAB, &ok);
    if (!ok || eot != nv - 1)
        return al_errf(e, "cannot read tokenizer %s: \"eot_id\" must be the last id, %ld", path,
                       nv - 1);
    if (!cJSON_IsArray(vocab) || cJSON_GetArraySize(vocab) != nv)
        return al_errf(e,
                       "cannot read tokenizer %s: \"vocab\" must be an array of "
                       "vocab_size (%ld) strings",
                       path, nv);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!cJSON_IsString(it))
            return al_errf(e, "cannot read tokenizer %s: vocab[%d] is not a string", path, i);
        i++;
    }
    int32_t *m = al_malloc(n_merges ? (size_t)n_merges * 2 : 1, sizeof(int32_t), e);
    if (!m) return al_err_prefix(e, "cannot read tokenizer %s", path);
    if (parse_merges(merges, m, path, e) || check_repeats(m, n_merges, path, e)) {
        free(m);
        return -1;
    }
    if (tok_build(m, n_merges, out, e)) return al_err_prefix(e, "cannot read tokenizer %s", path);
    return 0;
}

int al_tok_load(const char *path, al_tokenizer **out, al_err *e) {
    *out = NULL;
    unsigned char *data;
    size_t n;
    if (al_read_file(path, &data, &n, MAX_JSON_BYTES, e)) {
        return al_err_prefix(e, "cannot read tokenizer %s", path);
    }
    cJSON *root = cJSON_ParseWithLength((const char *)data, n);
    if (!root) {
        const char *where = cJSON_GetErrorPtr();
        size_t at = where && where >= (const char *)data && where <= (const char *)data + n
                        ? (size_t)(where - (const char *)data)
                        : 0;
        free(data);
        return al_errf(e, "cannot read tokenizer %s: not valid JSON (near byte %zu)", path, at);
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!model) {
        free(data);
        int rc = load_json(root, path, out, e);
        cJSON_Delete(root);
        return rc;
    }
    /* a Hugging Face tokenizer.json: the model object says what it is */
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    al_tokenizer *t = NULL;
    int rc;
    if (!cJSON_IsString(type)) {
        free(data);
        rc = al_errf(e, "cannot read tokenizer %s: \"model\" has no \"type\"", path);
    } else if (strcmp(type->valuestring, "BPE") != 0) {
        char k[48];
        snprintf(k, sizeof k, "%s", type->valuestring);
        free(data);
        rc = al_errf(e,
                     "cannot read tokenizer %s: unsupported model type '%s' (only BPE, "
                     "byte-level, is supported)",
                     path, k);
    } else if (!(t = al_calloc(1, sizeof *t, e))) {
        free(data);
        rc = -1;
    } else if ((rc = al_tokhf_load(root, data, n, path, &t->hf, e)) == 0) {
        t->vocab_size = al_tokhf_vocab_size(t->hf);
        t->eot = al_tokhf_eot(t->hf);
        *out = t;
    }
    if (rc) al_tok_free(t);
    cJSON_Delete(root);
    return rc;
}
