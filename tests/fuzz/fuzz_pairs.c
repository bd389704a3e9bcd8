/* fuzz_pairs.c -- pair sets (src/data/pairs.c): al_pairs_load_jsonl on
 * arbitrary JSONL bytes with a byte-level tokenizer (n_ctx 64), and
 * al_pairs_parse_jsonl on the same bytes with a small trained BPE (n_ctx
 * 16). A refusal is one line and leaves *out zeroed; an accepted file is
 * a well-formed pair set: lengths within n_ctx, zero pads, one item per
 * pair at its last token, answer != wrong, ids in the vocabulary. (The
 * names task takes no bytes, only four numbers: test_pairs.c sweeps
 * them instead.) */
#include "fuzz.h"

#include "attnlab/pairs.h"
#include "attnlab/tokenizer.h"

static al_tokenizer *byte_tok, *bpe_tok;

static void init(void) {
    al_err e;
    FZ_ASSERT(al_tok_byte_level(&byte_tok, &e) == 0);
    static const char text[] = "Once upon a time, Bamurik saw a cat. Bamurik said \"hi\" to "
                               "the cat. The cat ran to Seoyeon. Seoyeon and Bamurik played.\n\n";
    char buf[sizeof text * 20];
    for (int i = 0; i < 20; i++) memcpy(buf + i * (sizeof text - 1), text, sizeof text - 1);
    FZ_ASSERT(al_tok_train((const unsigned char *)buf, 20 * (sizeof text - 1), 320, 0, &bpe_tok,
                           &e) == 0);
}

static void check(const al_pairs *p, int rc, const al_err *e, const al_tokenizer *tok, int n_ctx) {
    if (rc != 0) {
        FZ_ASSERT(rc == -1);
        fz_check_msg(e);
        static const al_pairs zero;
        FZ_ASSERT(memcmp(p, &zero, sizeof zero) == 0);
        return;
    }
    int V = al_tok_vocab_size(tok);
    FZ_ASSERT(p->N >= 1 && p->T >= 1 && p->T <= n_ctx && p->n_items == p->N);
    FZ_ASSERT(p->logit_diff == 1 && p->clean && p->corr && p->len && p->items);
    int longest = 0;
    for (int i = 0; i < p->N; i++) {
        int len = p->len[i];
        FZ_ASSERT(len >= 1 && len <= p->T);
        if (len > longest) longest = len;
        for (int t = 0; t < p->T; t++) {
            int c = p->clean[(size_t)i * p->T + t], x = p->corr[(size_t)i * p->T + t];
            if (t >= len)
                FZ_ASSERT(c == 0 && x == 0);
            else
                FZ_ASSERT(c >= 0 && c < V && x >= 0 && x < V);
        }
        const al_pair_item *it = &p->items[i];
        FZ_ASSERT(it->pair == i && it->pos == len - 1);
        FZ_ASSERT(it->answer >= 0 && it->answer < V && it->wrong >= 0 && it->wrong < V);
        FZ_ASSERT(it->answer != it->wrong);
    }
    FZ_ASSERT(longest == p->T);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (!byte_tok) init();
    al_pairs p;
    al_err e;
    memset(&p, 0xab, sizeof p);
    int rc = al_pairs_load_jsonl(fz_file("pairs", d, n), byte_tok, 64, &p, &e);
    check(&p, rc, &e, byte_tok, 64);
    if (rc == 0) {
        FZ_ASSERT(!strcmp(p.task, "file"));
        al_pairs_free(&p);
    }
    memset(&p, 0xab, sizeof p);
    rc = al_pairs_parse_jsonl((const char *)d, n, bpe_tok, 16, &p, &e);
    check(&p, rc, &e, bpe_tok, 16);
    if (rc == 0) al_pairs_free(&p);
    return 0;
}
