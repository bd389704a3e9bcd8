/* fuzz_bpe.c -- BPE on arbitrary bytes. Encoding with a trained tokenizer
 * and decoding gives the input back byte for byte (invalid UTF-8, NULs and
 * literal <|endoftext|> included), with or without special tokens; and a
 * tokenizer trained on the input itself round-trips it too. */
#include "fuzz.h"

#include "attnlab/synth.h"
#include "attnlab/tokenizer.h"

static al_tokenizer *g_story, *g_bytes;

/* A tokenizer of 600 tokens trained once on 200 built-in stories. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    al_err e;
    al_synth_opts o;
    al_synth_defaults(&o);
    o.n_docs = 200;
    al_synth *s;
    FZ_ASSERT(al_synth_new(&s, &o, &e) == 0);
    size_t cap = 1 << 20, n = 0;
    unsigned char *text = malloc(cap);
    FZ_ASSERT(text);
    for (long i = 0; i < o.n_docs; i++) {
        const char *doc;
        size_t len;
        FZ_ASSERT(al_synth_next(s, &doc, &len, NULL, &e) == 0);
        if (n + len + 20 > cap) break;
        memcpy(text + n, doc, len);
        n += len;
        memcpy(text + n, AL_EOT_TEXT, strlen(AL_EOT_TEXT));
        n += strlen(AL_EOT_TEXT);
    }
    al_synth_free(s);
    FZ_ASSERT(al_tok_train(text, n, 600, 0, &g_story, &e) == 0);
    FZ_ASSERT(al_tok_byte_level(&g_bytes, &e) == 0);
    free(text);
    return 0;
}

static void round_trip(const al_tokenizer *t, const uint8_t *d, size_t n, int special) {
    al_err e;
    /* exactly n ids of room: an encoding never has more ids than bytes */
    int *ids = malloc((n ? n : 1) * sizeof(int));
    FZ_ASSERT(ids);
    size_t n_ids;
    FZ_ASSERT(al_tok_encode_into(t, d, n, special, ids, &n_ids, &e) == 0);
    FZ_ASSERT(n_ids <= n);
    for (size_t i = 0; i < n_ids; i++) FZ_ASSERT(ids[i] >= 0 && ids[i] < al_tok_vocab_size(t));
    if (!special)
        for (size_t i = 0; i < n_ids; i++) FZ_ASSERT(ids[i] != al_tok_eot(t));
    unsigned char *back;
    size_t n_back;
    FZ_ASSERT(al_tok_decode(t, ids, n_ids, &back, &n_back, &e) == 0);
    FZ_ASSERT(n_back == n && memcmp(back, d, n) == 0 && back[n] == 0);
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    for (int special = 0; special < 2; special++) {
        round_trip(g_story, d, n, special);
        round_trip(g_bytes, d, n, special);
    }
    /* train on the input (small ones: training is the slow part) */
    if (n >= 1 && n <= 1024) {
        al_tokenizer *t;
        al_err e;
        int vocab = 257 + d[0] % 64;
        FZ_ASSERT(al_tok_train(d + 1, n - 1, vocab, 0, &t, &e) == 0);
        FZ_ASSERT(al_tok_vocab_size(t) <= vocab);
        round_trip(t, d + 1, n - 1, 0);
        round_trip(t, d + 1, n - 1, 1);
        al_tok_free(t);
    }
    return 0;
}
