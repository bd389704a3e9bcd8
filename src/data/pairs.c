/* pairs.c -- clean / corrupted pair sets (see pairs.h). */
#include "attnlab/pairs.h"

#include <stdlib.h>
#include <string.h>

void al_pairs_free(al_pairs *p) {
    free(p->clean);
    free(p->items);
    memset(p, 0, sizeof *p);
}

int al_pairs_parse_jsonl(const char *text, size_t n, const al_tokenizer *tok, int n_ctx,
                         al_pairs *out, al_err *e) {
    (void)text, (void)n, (void)tok, (void)n_ctx;
    memset(out, 0, sizeof *out);
    return al_errf(e, "JSONL pair files are not supported yet");
}

int al_pairs_load_jsonl(const char *path, const al_tokenizer *tok, int n_ctx, al_pairs *out,
                        al_err *e) {
    (void)path;
    return al_pairs_parse_jsonl(NULL, 0, tok, n_ctx, out, e);
}

int al_pairs_names(const al_tokenizer *tok, int n, uint64_t seed, int n_ctx, int bos,
                   al_pairs *out, al_err *e) {
    (void)tok, (void)n, (void)seed, (void)n_ctx, (void)bos;
    memset(out, 0, sizeof *out);
    return al_errf(e, "the names task is not built yet");
}
