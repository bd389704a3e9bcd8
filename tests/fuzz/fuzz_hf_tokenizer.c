/* fuzz_hf_tokenizer.c -- al_tok_load on arbitrary bytes taken as a
 * Hugging Face tokenizer.json; the bytes after the JSON value (which the
 * loader ignores) are a text to encode. A tokenizer it accepts must work:
 * every id displays within its buffer, and encoding a fixed text and that
 * text (with and without special tokens) gives ids in range that decode,
 * the same into a caller's buffer as allocated; text that is not UTF-8 is
 * refused in one line. */
#include "fuzz.h"

#include <cjson/cJSON.h>

#include "attnlab/tokenizer.h"

static const char fixed[] = "Hello world, it's 12 345 <|endoftext|> caf\xc3\xa9 e\xcc\x81 "
                            "\xf0\x9f\x98\x80\n\t  x  \xe4\xbd\xa0\xe5\xa5\xbd";

static void check_encode(const al_tokenizer *t, const unsigned char *s, size_t n) {
    int V = al_tok_vocab_size(t);
    for (int special = 0; special < 2; special++) {
        int *ids;
        size_t n_ids;
        al_err e;
        if (al_tok_encode(t, s, n, special, &ids, &n_ids, &e) != 0) {
            fz_check_msg(&e);
            continue;
        }
        for (size_t i = 0; i < n_ids; i++) FZ_ASSERT(ids[i] >= 0 && ids[i] < V);
        unsigned char *back;
        size_t n_back;
        FZ_ASSERT(al_tok_decode(t, ids, n_ids, &back, &n_back, &e) == 0);
        int *buf = malloc((n ? n : 1) * sizeof(int));
        FZ_ASSERT(buf);
        size_t m;
        if (al_tok_encode_into(t, s, n, special, buf, &m, &e) == 0)
            FZ_ASSERT(m == n_ids && m <= n && memcmp(buf, ids, m * sizeof(int)) == 0);
        else
            FZ_ASSERT(n_ids > n && strstr(e.msg, "more ids than") != NULL);
        free(buf);
        free(back);
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    al_tokenizer *t;
    al_err e;
    if (al_tok_load(fz_file("hf_tokenizer", d, n), &t, &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(t == NULL);
        return 0;
    }
    if (strcmp(al_tok_kind(t), "Hugging Face byte-level BPE") != 0) { /* fuzz_tokenizer's */
        al_tok_free(t);
        return 0;
    }
    int V = al_tok_vocab_size(t), eot = al_tok_eot(t);
    FZ_ASSERT(V >= 1 && eot >= -1 && eot < V);
    int a, b;
    for (int id = -1; id <= V; id++) {
        if (id == 600 && V > 700) id = V - 100; /* the first and last ids */
        char buf[12];
        size_t len = al_tok_display(t, id, buf, sizeof buf);
        FZ_ASSERT(len < sizeof buf && strlen(buf) == len);
        FZ_ASSERT(al_tok_merge(t, id, &a, &b) == -1);
        size_t bl;
        FZ_ASSERT((al_tok_bytes(t, id, &bl) != NULL) == (id >= 0 && id < V));
    }
    check_encode(t, (const unsigned char *)fixed, sizeof fixed - 1);
    const char *end = NULL; /* the text after the JSON */
    cJSON *j = cJSON_ParseWithLengthOpts((const char *)d, n, &end, 0);
    cJSON_Delete(j);
    if (end && end >= (const char *)d && end <= (const char *)d + n)
        check_encode(t, (const unsigned char *)end, n - (size_t)(end - (const char *)d));
    al_tok_free(t);
    return 0;
}
