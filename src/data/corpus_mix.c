/* corpus_mix.c -- a mixture of corpora by byte shares, whole documents
 * only (al_corpus_mix, corpus.h). Each input is walked in its own seeded
 * random order, so its share is a uniform sample of its documents, and
 * the mixture is shuffled at the end, so no input sits in one block (the
 * last documents, which `encode --val-pick last` holds out, are a sample
 * of every input). */
#include "attnlab/corpus.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The documents already taken, by normalised text. */
typedef struct seen_set {
    const al_doc **d;
    uint64_t *h;
    size_t cap;
} seen_set;

/* 1 if d is in the set; else adds it (when add) and returns 0. */
static int seen(seen_set *s, const al_doc *d, uint64_t h, int add) {
    size_t slot = (size_t)h & (s->cap - 1);
    for (; s->d[slot]; slot = (slot + 1) & (s->cap - 1))
        if (s->h[slot] == h && al_corpus_same(*s->d[slot], *d)) return 1;
    if (add) s->d[slot] = d, s->h[slot] = h;
    return 0;
}

static uint64_t input_seed(uint64_t seed, int i) {
    return seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(i + 1));
}

int al_corpus_mix(const al_mix_in *in, int n_in, size_t bytes, uint64_t seed, al_mix_pick **picks,
                  size_t *n_picks, size_t *taken, size_t *dups, al_err *e) {
    *picks = NULL, *n_picks = 0;
    if (n_in < 1) return al_errf(e, "a mixture needs at least one input");
    double sum = 0;
    size_t total = 0;
    for (int i = 0; i < n_in; i++) {
        if (!(in[i].share > 0 && isfinite(in[i].share)))
            return al_errf(e, "input %d: share %g must be > 0", i + 1, in[i].share);
        if (in[i].n == 0) return al_errf(e, "input %d holds no documents", i + 1);
        sum += in[i].share;
        total += in[i].n;
        taken[i] = 0;
    }
    if (fabs(sum - 1) > 1e-6) return al_errf(e, "the shares sum to %.9g, not 1", sum);
    if (total > 0xffffffffu) return al_errf(e, "too many documents to mix (%zu)", total);
    seen_set s = {0};
    s.cap = 16;
    while (s.cap < 2 * total) s.cap *= 2;
    s.d = al_calloc(s.cap, sizeof *s.d, e);
    s.h = al_malloc(s.cap, sizeof *s.h, e);
    size_t *perm = al_malloc(total, sizeof *perm, e),
           *avail = al_calloc((size_t)n_in, sizeof *avail, e);
    al_mix_pick *out = al_malloc(total, sizeof *out, e);
    int rc = -1;
    if (!s.d || !s.h || !perm || !avail || !out) goto done;
    /* each input's distinct bytes (within itself), for bytes 0 */
    for (int i = 0; i < n_in; i++) {
        for (size_t j = 0; j < in[i].n; j++) {
            uint64_t x = al_corpus_hash(in[i].docs[j]);
            if (!seen(&s, &in[i].docs[j], x, 1)) avail[i] += in[i].docs[j].n;
        }
        memset(s.d, 0, s.cap * sizeof *s.d);
    }
    if (bytes == 0) {
        double m = INFINITY;
        for (int i = 0; i < n_in; i++) m = fmin(m, (double)avail[i] / in[i].share);
        bytes = (size_t)m;
        if (bytes == 0) {
            al_errf(e, "the inputs hold no bytes to mix");
            goto done;
        }
    }
    size_t n = 0, skipped = 0;
    for (int i = 0; i < n_in; i++) {
        size_t ni = in[i].n, got = 0;
        double want = in[i].share * (double)bytes;
        al_rng r;
        al_rng_seed(&r, input_seed(seed, i));
        for (size_t j = 0; j < ni; j++) perm[j] = j;
        for (size_t j = ni - 1; j > 0; j--) {
            size_t k = al_rng_below(&r, (uint32_t)(j + 1)), t = perm[j];
            perm[j] = perm[k], perm[k] = t;
        }
        for (size_t j = 0; j < ni && (double)got < want; j++) {
            const al_doc *d = &in[i].docs[perm[j]];
            if (seen(&s, d, al_corpus_hash(*d), 1)) {
                skipped++;
                continue;
            }
            out[n++] = (al_mix_pick){i, perm[j]};
            got += d->n;
        }
        taken[i] = got;
        if ((double)got < want) {
            al_errf(e,
                    "input %d has %zu bytes of distinct documents (%zu of them not already "
                    "taken from another input); its share %.4g of %zu bytes needs %.0f",
                    i + 1, avail[i], got, in[i].share, bytes, ceil(want));
            goto done;
        }
    }
    al_rng r;
    al_rng_seed(&r, seed);
    for (size_t j = n; j > 1; j--) {
        size_t k = al_rng_below(&r, (uint32_t)j);
        al_mix_pick t = out[j - 1];
        out[j - 1] = out[k], out[k] = t;
    }
    *picks = out, *n_picks = n;
    out = NULL;
    if (dups) *dups = skipped;
    rc = 0;
done:
    free(s.d), free(s.h), free(perm), free(avail), free(out);
    return rc;
}
