/* fuzz_tokenizer.c -- al_tok_load on arbitrary tokenizer.json bytes. A
 * tokenizer it accepts must work: every token displays within its buffer,
 * and encoding any text (here: the input itself) decodes back to it. */
#include "fuzz.h"

#include "attnlab/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    al_tokenizer *t;
    al_err e;
    if (al_tok_load(fz_file("tokenizer", d, n), &t, &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(t == NULL);
        return 0;
    }
    if (strcmp(al_tok_kind(t), "attnlab byte-level BPE") != 0) { /* fuzz_hf_tokenizer's */
        al_tok_free(t);
        return 0;
    }
    int V = al_tok_vocab_size(t);
    FZ_ASSERT(V >= 257 && al_tok_eot(t) == V - 1);
    for (int id = -1; id <= V; id++) {
        char buf[12];
        size_t len = al_tok_display(t, id, buf, sizeof buf);
        FZ_ASSERT(len < sizeof buf && strlen(buf) == len);
        int l, r;
        if (al_tok_merge(t, id, &l, &r) == 0) FZ_ASSERT(l >= 0 && l < id && r >= 0 && r < id);
    }
    for (int special = 0; special < 2; special++) {
        int *ids;
        size_t n_ids;
        unsigned char *back;
        size_t n_back;
        FZ_ASSERT(al_tok_encode(t, d, n, special, &ids, &n_ids, &e) == 0);
        FZ_ASSERT(n_ids <= n);
        FZ_ASSERT(al_tok_decode(t, ids, n_ids, &back, &n_back, &e) == 0);
        FZ_ASSERT(n_back == n && memcmp(back, d, n) == 0);
        free(ids);
        free(back);
    }
    al_tok_free(t);
    return 0;
}
