/* tok_hf.h -- Hugging Face tokenizer.json (byte-level BPE) as the second
 * kind of al_tokenizer; private to src/data (tokenizer.c dispatches to
 * tok_hf.c, which runs the normalizer and pre-tokenizer of tok_hf_pre.c).
 * docs/formats.md lists the subset of tokenizer.json that is supported.
 *
 * Text moves through the stages as byte ranges of UTF-8: the byte-level
 * alphabet of the vocabulary is mapped back to bytes when the file is
 * loaded, so the model merges byte strings as attnlab's own BPE does. */
#ifndef ATTNLAB_TOK_HF_H
#define ATTNLAB_TOK_HF_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "attnlab/util.h"

typedef struct al_tokhf al_tokhf;

/* ---- tok_hf.c */

/* Build from a parsed tokenizer.json whose "model" is {"type": "BPE"}.
 * file/n are the file's bytes, kept (and freed) by the tokenizer so that
 * al_tokhf_save writes them back unchanged; on failure they are freed.
 * Errors say "cannot read tokenizer PATH: ...". */
int al_tokhf_load(const cJSON *root, unsigned char *file, size_t n, const char *path,
                  al_tokhf **out, al_err *e);
void al_tokhf_free(al_tokhf *h);
int al_tokhf_vocab_size(const al_tokhf *h);
/* Id of "<|endoftext|>" when it is a special added token, else -1. */
int al_tokhf_eot(const al_tokhf *h);
/* The bytes id decodes to (the ByteLevel decoder's rule); NULL if out of range. */
const unsigned char *al_tokhf_bytes(const al_tokhf *h, int id, size_t *len);
/* The ids of text (valid UTF-8, else an error naming the byte). With
 * fixed set, *ids has room for cap ids and needing more is an error;
 * otherwise *ids (NULL or malloc'd with room for *cap) grows as needed.
 * allow_special 0 leaves special added tokens unmatched (Hugging Face's
 * encode_special_tokens); other added tokens always match. */
int al_tokhf_encode(const al_tokhf *h, const unsigned char *s, size_t n, int allow_special,
                    int **ids, size_t *cap, int fixed, size_t *n_ids, al_err *e);
/* The original tokenizer.json bytes, written atomically. */
int al_tokhf_save(const al_tokhf *h, const char *path, al_err *e);

/* ---- tok_hf_pre.c: the normalizer and the pre-tokenizer */

typedef struct hf_pre hf_pre;
typedef struct hf_scratch hf_scratch;

/* Parse "normalizer" and "pre_tokenizer" (either may be NULL: absent).
 * Errors name what is unsupported, without the file's name. */
int hf_pre_parse(const cJSON *normalizer, const cJSON *pre_tokenizer, hf_pre **out, al_err *e);
void hf_pre_free(hf_pre *p);
/* Per-call working memory (one encode call at a time each). */
hf_scratch *hf_scratch_new(al_err *e);
void hf_scratch_free(hf_scratch *sc);
/* NFC of s (valid UTF-8) into *out (malloc'd; the caller frees), or
 * *out = NULL when the text is unchanged. */
int hf_normalize(const hf_pre *p, const unsigned char *s, size_t n, unsigned char **out,
                 size_t *n_out, al_err *e);
/* Pre-tokenize s (valid UTF-8, non-empty), calling word() on every
 * non-empty word, in order, as bytes; a non-zero return stops it. */
typedef int (*hf_word_fn)(void *ctx, const unsigned char *w, size_t n, al_err *e);
int hf_pretokenize(const hf_pre *p, hf_scratch *sc, const unsigned char *s, size_t n,
                   hf_word_fn word, void *ctx, al_err *e);

/* Length of the valid UTF-8 character at s (n > 0 bytes available), or 0. */
size_t hf_utf8_len(const unsigned char *s, size_t n);

/* tokenizer.c's merge queue, shared by both BPE kinds: a binary min-heap
 * of uint64 keys (rank << 32 | position); n counts the keys in h. */
void bpe_heap_push(uint64_t *h, size_t *n, uint64_t x);
uint64_t bpe_heap_pop(uint64_t *h, size_t *n);
/* Offset of the first byte of s that is not valid UTF-8, or n. */
size_t hf_utf8_check(const unsigned char *s, size_t n);
/* A JSON string for a message: quoted, control bytes as '?', cut at
 * about 40 bytes (never inside a character). */
const char *hf_quote(char *buf, size_t cap, const char *s);

#endif
