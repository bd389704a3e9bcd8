/* data.c -- token files in llm.c's format, and batches drawn from them.
 * The header is validated against the file size so a file whose count
 * lies is refused before anything is allocated from that count. */
#define _POSIX_C_SOURCE 200809L /* fileno */
#include "attnlab/data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* 1 if the n bytes look like text (no NUL, no control bytes besides
 * tab, newline and carriage return; bytes >= 0x80 are allowed: UTF-8):
 * what a token file's binary header never is, and what a user who gave
 * the corpus instead of its encoding has given. */
static int looks_like_text(const unsigned char *b, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (b[i] < 0x20 && b[i] != '\t' && b[i] != '\n' && b[i] != '\r') return 0;
    return 1;
}

static int text_not_tokens(const char *path, al_err *e) {
    return al_errf(e,
                   "%s is a text file, not a token file: make one with attnlab encode "
                   "--tokenizer T --in %s --out X.bin (it writes X.train.bin and X.val.bin)",
                   path, path);
}

int al_tokens_load(const char *path, al_tokens *out, al_err *e) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return al_errf(e, "cannot read token file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return al_errf(e, "cannot read token file %s: not a regular file", path);
    }
    unsigned char hdr[HEADER_BYTES];
    size_t hgot = fread(hdr, 1, HEADER_BYTES, f);
    if (st.st_size < HEADER_BYTES || hgot != HEADER_BYTES) {
        fclose(f);
        if (looks_like_text(hdr, hgot)) return text_not_tokens(path, e);
        return al_errf(e, "cannot read token file %s: shorter than its %d-byte header", path,
                       HEADER_BYTES);
    }
    uint32_t magic = le32(hdr), version = le32(hdr + 4), count = le32(hdr + 8);
    if (magic != AL_TOKENS_MAGIC || version != AL_TOKENS_VERSION) {
        fclose(f);
        if (looks_like_text(hdr, hgot)) return text_not_tokens(path, e);
        return al_errf(e, "cannot read token file %s: bad magic/version (%u/%u, want %d/%d)", path,
                       magic, version, AL_TOKENS_MAGIC, AL_TOKENS_VERSION);
    }
    uint64_t want = (uint64_t)HEADER_BYTES + 2ull * count;
    if ((uint64_t)st.st_size != want) {
        fclose(f);
        return al_errf(e,
                       "cannot read token file %s: header says %u tokens (%llu bytes) "
                       "but the file has %lld bytes",
                       path, count, (unsigned long long)want, (long long)st.st_size);
    }
    if (count == 0) {
        fclose(f);
        return al_errf(e, "cannot read token file %s: it holds no tokens", path);
    }
    uint16_t *tok = al_malloc(count, sizeof(uint16_t), e);
    if (!tok) {
        fclose(f);
        return al_err_prefix(e, "cannot read token file %s", path);
    }
    unsigned char *raw = (unsigned char *)tok;
    size_t got = fread(raw, 1, 2ull * count, f);
    fclose(f);
    if (got != 2ull * count) {
        free(tok);
        return al_errf(e, "cannot read token file %s: short read", path);
    }
    int max_id = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint16_t v = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8); /* LE on any host */
        tok[i] = v;
        if (v > max_id) max_id = v;
    }
    out->tok = tok;
    out->n = count;
    out->max_id = max_id;
    return 0;
}

int al_tokens_save(const char *path, const int *ids, size_t n, al_err *e) {
    if (n > 0xffffffffu) return al_errf(e, "cannot write %s: too many tokens", path);
    al_atomic_file af;
    if (al_atomic_open(&af, path, e) != 0) return -1;
    unsigned char hdr[HEADER_BYTES] = {0};
    uint32_t h[3] = {AL_TOKENS_MAGIC, AL_TOKENS_VERSION, (uint32_t)n};
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++) hdr[4 * i + b] = (unsigned char)(h[i] >> (8 * b));
    int ok = fwrite(hdr, 1, sizeof hdr, af.f) == sizeof hdr;
    unsigned char buf[8192];
    size_t k = 0;
    for (size_t i = 0; ok && i < n; i++) {
        if (ids[i] < 0 || ids[i] > 65535) {
            al_errf(e, "cannot write %s: token id %d does not fit in 16 bits", path, ids[i]);
            al_atomic_commit(&af, 0, NULL);
            return -1;
        }
        buf[k++] = (unsigned char)(ids[i] & 0xff);
        buf[k++] = (unsigned char)(ids[i] >> 8);
        if (k == sizeof buf || i + 1 == n) {
            ok = fwrite(buf, 1, k, af.f) == k;
            k = 0;
        }
    }
    if (!ok) {
        al_errf(e, "cannot write %s: %s", path, strerror(errno));
        al_atomic_commit(&af, 0, NULL);
        return -1;
    }
    return al_atomic_commit(&af, 1, e);
}

void al_tokens_free(al_tokens *t) {
    free(t->tok);
    memset(t, 0, sizeof *t);
}

int al_tokens_hold_out(al_tokens *train, double frac, const char *name, al_tokens *val, al_err *e) {
    size_t n_val = (size_t)((double)train->n * frac);
    if (n_val < 2 || train->n - n_val < 2)
        return al_errf(e, "%s has %zu tokens: too few to hold out a validation split", name,
                       train->n);
    uint16_t *tok = al_malloc(n_val, sizeof(uint16_t), e);
    if (!tok) return -1;
    memcpy(tok, train->tok + train->n - n_val, n_val * sizeof(uint16_t));
    val->tok = tok;
    val->n = n_val;
    val->max_id = train->max_id;
    train->n -= n_val;
    return 0;
}

unsigned char *al_tokens_present(const al_tokens *t, int d_vocab, int *n_present, al_err *e) {
    if (t->max_id >= d_vocab) {
        al_errf(e, "the token file holds id %d, outside the model's vocabulary of %d", t->max_id,
                d_vocab);
        return NULL;
    }
    unsigned char *f = al_calloc((size_t)d_vocab, 1, e);
    if (!f) return NULL;
    int n = 0;
    for (size_t i = 0; i < t->n; i++)
        if (!f[t->tok[i]]) f[t->tok[i]] = 1, n++;
    if (n_present) *n_present = n;
    return f;
}

static void fill_row(const al_tokens *d, size_t start, int T, int *in, int *tg) {
    for (int t = 0; t < T; t++) {
        in[t] = d->tok[start + t];
        tg[t] = d->tok[start + t + 1];
    }
}

int al_batch_random(const al_tokens *d, int B, int T, al_rng *rng, int *inputs, int *targets,
                    al_err *e) {
    if ((size_t)T + 1 > d->n)
        return al_errf(e, "sequence length %d needs at least %d tokens, data has %zu", T, T + 1,
                       d->n);
    size_t span = d->n - (size_t)T; /* valid starts: 0 .. n-T-1 */
    for (int b = 0; b < B; b++) {
        size_t start = span > 0xffffffffu ? (size_t)(al_rng_u64(rng) % span)
                                          : al_rng_below(rng, (uint32_t)span);
        fill_row(d, start, T, inputs + (size_t)b * T, targets + (size_t)b * T);
    }
    return 0;
}

int al_batch_fixed(const al_tokens *d, int B, int T, int k, int n_batches, int *inputs,
                   int *targets, al_err *e) {
    if ((size_t)T + 1 > d->n)
        return al_errf(e, "sequence length %d needs at least %d tokens, data has %zu", T, T + 1,
                       d->n);
    size_t span = d->n - (size_t)T;
    size_t rows = (size_t)B * (size_t)(n_batches > 0 ? n_batches : 1);
    for (int b = 0; b < B; b++) {
        size_t r = (size_t)k * (size_t)B + (size_t)b;
        /* evenly spread starts; with few tokens windows overlap, fine */
        size_t start = (size_t)((double)r * (double)span / (double)rows);
        if (start >= span) start = span - 1;
        fill_row(d, start, T, inputs + (size_t)b * T, targets + (size_t)b * T);
    }
    return 0;
}
