/* fuzz_corpus.c -- the corpus readers of corpus.h and corpus_src.h on
 * arbitrary bytes: al_corpus_split in every mode (documents inside the
 * input, non-blank), al_corpus_clean then al_corpus_write then a split
 * with --docs eot (the same documents back: the data commands' round
 * trip), the validation split (one document at least on each side), a
 * two-input mixture of the documents (no document twice, each input's
 * bytes up to its share), and al_kjv_parse (a refusal is one line; the
 * documents are non-empty and a chapter unit gives one per chapter); and
 * the code table's renaming parser on the input as a file of code. */
#include "fuzz.h"

#include "attnlab/corpus.h"
#include "attnlab/corpus_src.h"
#include "attnlab/names_text.h"

static void round_trip(const uint8_t *d, size_t n, al_docs_mode mode) {
    al_doc *docs;
    size_t nd;
    al_err e;
    FZ_ASSERT(al_corpus_split(d, n, mode, &docs, &nd, &e) == 0);
    for (size_t i = 0; i < nd; i++)
        FZ_ASSERT(docs[i].n > 0 && docs[i].p >= d && docs[i].p + docs[i].n <= d + n);
    unsigned char *keep = malloc(nd + 1);
    al_corpus_stats st;
    FZ_ASSERT(keep && al_corpus_clean(docs, nd, keep, &st, &e) == 0);
    FZ_ASSERT(st.docs + st.empty + st.separator + st.duplicates == nd);
    al_buf b = AL_BUF_INIT;
    al_corpus_write(&b, docs, nd, keep);
    FZ_ASSERT(al_buf_ok(&b));
    al_doc *back;
    size_t nb;
    FZ_ASSERT(al_corpus_split((const unsigned char *)(b.p ? b.p : ""), b.n, AL_DOCS_EOT, &back, &nb,
                              &e) == 0);
    FZ_ASSERT(nb == st.docs);
    for (size_t i = 0, k = 0; i < nd; i++) {
        if (!keep[i]) continue;
        FZ_ASSERT(back[k].n == docs[i].n && !memcmp(back[k].p, docs[i].p, docs[i].n));
        k++;
    }
    /* the kept documents, compacted, split for validation and mixed */
    size_t k = 0;
    for (size_t i = 0; i < nd; i++)
        if (keep[i]) docs[k++] = docs[i];
    if (k >= 2) {
        unsigned char *v = malloc(k);
        size_t nv;
        FZ_ASSERT(v && al_corpus_val_split(docs, k, 0.3, AL_VAL_HASH, v, &nv, &e) == 0);
        FZ_ASSERT(nv >= 1 && nv <= k - 1);
        free(v);
        al_mix_in in[2] = {{docs, k / 2, 0.5}, {docs + k / 2, k - k / 2, 0.5}};
        al_mix_pick *p;
        size_t np, taken[2];
        if (al_corpus_mix(in, 2, 0, 1, &p, &np, taken, NULL, &e) == 0) {
            size_t seen = 0;
            for (size_t j = 0; j < np; j++) {
                FZ_ASSERT(p[j].in >= 0 && p[j].in < 2 && p[j].doc < in[p[j].in].n);
                for (size_t q = 0; q < j; q++)
                    FZ_ASSERT(p[q].in != p[j].in || p[q].doc != p[j].doc);
                seen += in[p[j].in].docs[p[j].doc].n;
            }
            FZ_ASSERT(seen == taken[0] + taken[1]);
            free(p);
        } else {
            fz_check_msg(&e);
        }
    }
    free(back), free(keep), free(docs);
    al_buf_free(&b);
}

/* The code table's parser (al_idents_in_code) on the input as held-out
 * code, with the byte tokenizer: each item is a function of at most
 * n_ctx tokens whose two uses carry the same pieces. */
static void idents(const uint8_t *d, size_t n) {
    static al_tokenizer *tok;
    al_err e;
    if (!tok) FZ_ASSERT(al_tok_byte_level(&tok, &e) == 0);
    al_tokens v = {calloc(n + 1, sizeof(uint16_t)), n + 1, 256};
    FZ_ASSERT(v.tok);
    v.tok[0] = (uint16_t)al_tok_eot(tok);
    for (size_t i = 0; i < n; i++) v.tok[i + 1] = d[i];
    al_name_stories s;
    if (al_idents_in_code(tok, &v, 64, 1, 64, &s, &e) == 0) {
        FZ_ASSERT(s.n >= 1 && s.n <= 64);
        for (int i = 0; i < s.n; i++) {
            const al_name_story *t = &s.s[i];
            FZ_ASSERT(t->len <= 64 && t->ids[0] == al_tok_eot(tok));
            FZ_ASSERT(t->k >= 2 && t->k <= AL_NAME_MAX_PIECES);
            FZ_ASSERT(t->first >= 1 && t->first + t->k <= t->second && t->second + t->k <= t->len);
            FZ_ASSERT(!memcmp(t->ids + t->first, t->piece, (size_t)t->k * sizeof(int)));
            FZ_ASSERT(!memcmp(t->ids + t->second, t->piece, (size_t)t->k * sizeof(int)));
        }
        al_name_stories_free(&s);
    } else {
        fz_check_msg(&e);
    }
    free(v.tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    if (n > (1 << 16)) return 0;
    idents(d, n);
    for (int m = 0; m < 4; m++) round_trip(d, n, (al_docs_mode)m);
    for (int u = 0; u < 3; u++) {
        al_docset ds = AL_DOCSET_INIT;
        al_kjv_counts c;
        al_err e;
        if (al_kjv_parse(d, n, (al_kjv_unit)u, &ds, &c, &e) == 0) {
            al_doc *docs;
            size_t nd;
            FZ_ASSERT(al_docset_docs(&ds, &docs, &nd, &e) == 0);
            FZ_ASSERT(c.chapters >= 1 && c.books >= 1 && c.books <= c.chapters);
            if (u == AL_KJV_CHAPTER) FZ_ASSERT(nd == (size_t)c.chapters);
            if (u == AL_KJV_VERSE) FZ_ASSERT(nd == (size_t)c.verses);
            for (size_t i = 0; i < nd; i++) FZ_ASSERT(docs[i].n > 0);
            free(docs);
        } else {
            fz_check_msg(&e);
        }
        al_docset_free(&ds);
    }
    return 0;
}
