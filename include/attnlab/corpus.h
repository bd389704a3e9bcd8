/* corpus.h -- plain-text corpora as documents: splitting a text into
 * documents, the cleaning every data source applies (trimming, dropping
 * empty documents and those holding the separator, removing exact
 * duplicates), the validation split by whole documents, byte-share
 * mixtures of several corpora, and the writer of the format the data
 * commands share. Pure functions over buffers: no files, no flags.
 *
 * The format (`attnlab data code`, `data prose`, `data mix`): documents
 * separated by a line holding only <|endoftext|>, the file ending in one
 * newline; `attnlab encode --docs eot` and `tokenizer train` read it. A
 * document is kept as its bytes, trimmed of surrounding whitespace (so
 * writing and splitting again give back the same documents).
 *
 * Two documents are duplicates when their normalised texts are equal:
 * "\r\n" read as "\n", spaces and tabs at the end of each line dropped,
 * whitespace at both ends dropped. Nothing else (case, inner spacing) is
 * changed: code differing in indentation is different code. */
#ifndef ATTNLAB_CORPUS_H
#define ATTNLAB_CORPUS_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/buf.h"
#include "attnlab/util.h"

/* One document: n bytes at p (borrowed). */
typedef struct al_doc {
    const unsigned char *p;
    size_t n;
} al_doc;

/* How a text is cut into documents (`encode --docs`, `data prose --docs`,
 * `data mix --docs`):
 *   BLANK  runs of non-blank lines (a blank line between documents)
 *   LINE   every non-blank line
 *   EOT    the pieces between literal <|endoftext|>, trimmed of
 *          surrounding whitespace (the data commands' format)
 *   STORY  a line break straight into another non-blank line starts a
 *          document, blank lines only separate its paragraphs (the
 *          TinyStories dumps without their <|endoftext|> lines)
 * A document keeps its inner newlines but not the line break (or \r)
 * that ends it. */
typedef enum { AL_DOCS_BLANK, AL_DOCS_LINE, AL_DOCS_EOT, AL_DOCS_STORY } al_docs_mode;

/* "blank", "line", "eot", "story" -> *m; -1 (e names the choices) else. */
int al_docs_mode_parse(const char *s, al_docs_mode *m, al_err *e);

/* The documents of s[0..n) (pointing into s) in *docs (caller frees),
 * *n_docs of them; blank-only pieces are no documents. -1 with e when
 * out of memory. */
int al_corpus_split(const unsigned char *s, size_t n, al_docs_mode mode, al_doc **docs,
                    size_t *n_docs, al_err *e);

/* The 64-bit FNV-1a hash of d's normalised text (see above): equal for
 * duplicates. */
uint64_t al_corpus_hash(al_doc d);
/* 1 if a and b are duplicates (their normalised texts are equal). */
int al_corpus_same(al_doc a, al_doc b);

/* What al_corpus_clean removed and kept. */
typedef struct al_corpus_stats {
    size_t docs_in; /* documents given */
    size_t empty; /* nothing but whitespace */
    size_t separator; /* held a literal <|endoftext|>, which would split them */
    size_t duplicates; /* equal to an earlier document (normalised) */
    size_t docs; /* kept */
    size_t bytes; /* the kept documents' bytes (trimmed, no separators) */
} al_corpus_stats;

/* The cleaning of every source: each docs[i] is trimmed of surrounding
 * whitespace in place, and keep[i] (n bytes) says whether it stays: not
 * empty, no literal <|endoftext|> in it, and not a duplicate of an
 * earlier kept document (the first of a group stays, so the result does
 * not depend on anything but the order). -1 with e when out of memory. */
int al_corpus_clean(al_doc *docs, size_t n, unsigned char *keep, al_corpus_stats *st, al_err *e);

/* The words of docs[i] with keep[i] (every one when keep is NULL): maximal
 * runs of bytes other than ASCII whitespace, the corpus's tokens before
 * any tokenizer. *words gets how many there are, *unique how many are
 * distinct (byte for byte). 0, or -1 with e when out of memory. */
int al_corpus_words(const al_doc *docs, size_t n, const unsigned char *keep, size_t *words,
                    size_t *unique, al_err *e);

/* Append docs[i] with keep[i] (every one when keep is NULL) to out in the
 * format above. The documents must be clean (al_corpus_clean). Returns
 * the bytes appended; out's oom flag says whether all of them were. */
size_t al_corpus_write(al_buf *out, const al_doc *docs, size_t n, const unsigned char *keep);

/* Which documents are held out for validation (`encode --val-pick`):
 *   LAST  the last round(frac * n) of them (attnlab encode's split of
 *         earlier versions, unchanged);
 *   HASH  those whose normalised text hashes below frac, so a document
 *         lands on the same side in every corpus, order and mixture that
 *         holds it (and duplicates on one side); the count is frac * n
 *         on average, not exactly.
 * Either way at least one document is held out and one kept: with HASH
 * the lowest-hashed document is held out when none was, and the
 * highest-hashed kept when all were. is_val (n bytes) gets 1 for held-out
 * documents, *n_val (may be NULL) their count. Needs n >= 2 and 0 < frac
 * < 1 (-1 with e otherwise). */
typedef enum { AL_VAL_LAST = 0, AL_VAL_HASH = 1 } al_val_pick;
int al_val_pick_parse(const char *s, al_val_pick *v, al_err *e);
int al_corpus_val_split(const al_doc *docs, size_t n, double frac, al_val_pick how,
                        unsigned char *is_val, size_t *n_val, al_err *e);

/* One input of a mixture: its documents (clean) and its byte share. */
typedef struct al_mix_in {
    const al_doc *docs;
    size_t n;
    double share; /* > 0; the shares of a mixture sum to 1 */
} al_mix_in;

/* One document of a mixture: input `in`, its document `doc`. */
typedef struct al_mix_pick {
    int in;
    size_t doc;
} al_mix_pick;

/* A mixture of whole documents: from each input, documents in a seeded
 * random order until its share of `bytes` is reached (so each input
 * overshoots its share by less than one document), skipping a document
 * equal to one already taken from any input; then all of them in one
 * seeded random order. bytes 0: the largest total every input can
 * supply without repeating a document, min over inputs of (its distinct
 * documents' bytes / its share). *picks (caller frees) and *n_picks: the
 * mixture in order; taken[i] (n_in) the bytes taken from input i;
 * *dups (may be NULL) the duplicates skipped. A pure function of its
 * arguments. -1 with e when the shares do not sum to 1 (within 1e-6), an
 * input is empty, or an input has too few distinct bytes for its share
 * (the message names the input by its index and says how many it has). */
int al_corpus_mix(const al_mix_in *in, int n_in, size_t bytes, uint64_t seed, al_mix_pick **picks,
                  size_t *n_picks, size_t *taken, size_t *dups, al_err *e);

/* A growing set of documents in one buffer, for sources that build their
 * documents piece by piece (a directory of files, the KJV's chapters).
 * al_docset_put appends to the open document (opening one if none is);
 * al_docset_end closes it. Appends never fail loudly: al_docset_docs
 * reports a failed allocation. */
typedef struct al_docset {
    al_buf text;
    size_t *off, *len; /* per document */
    size_t n, cap;
    int open, oom;
} al_docset;

#define AL_DOCSET_INIT                                                                             \
    { AL_BUF_INIT, NULL, NULL, 0, 0, 0, 0 }
void al_docset_put(al_docset *s, const void *p, size_t n);
void al_docset_end(al_docset *s);
/* The documents (closing an open one), pointing into s->text (valid until
 * the next append or al_docset_free); caller frees *docs. -1 with e when
 * an append or this allocation failed. */
int al_docset_docs(al_docset *s, al_doc **docs, size_t *n, al_err *e);
void al_docset_free(al_docset *s);

#endif
