/* tokenizer.h -- byte-level BPE (docs/design.md §3), of two kinds behind
 * one opaque al_tokenizer:
 *
 * attnlab's own: ids 0..255 are the raw bytes; ids 256.. are merges in
 * the order they were learned; the last id is the special <|endoftext|>.
 * Text is pre-split so merges never cross word boundaries (a leading
 * space belongs to the following word, as GPT-2 does). Encode/decode
 * round-trips any byte string, invalid UTF-8 included.
 *
 * A Hugging Face tokenizer.json with a byte-level BPE model (GPT-2,
 * GPT-NeoX; the subset in docs/formats.md), loaded by al_tok_load when the
 * file has a "model" object: the ids are the file's and are Hugging
 * Face's for the same text. It encodes valid UTF-8 only (an error names
 * the first bad byte); decode(encode(x)) is x, or NFC(x) if the file
 * normalizes, when the vocabulary holds all 256 bytes (a byte it lacks
 * is dropped, as Hugging Face drops it). */
#ifndef ATTNLAB_TOKENIZER_H
#define ATTNLAB_TOKENIZER_H

#include <stddef.h>
#include "attnlab/util.h"

typedef struct al_tokenizer al_tokenizer;

#define AL_EOT_TEXT "<|endoftext|>"

/* A tokenizer with only the 256 byte tokens and <|endoftext|> (id 256). */
int al_tok_byte_level(al_tokenizer **out, al_err *e);
/* Train on text to vocab_size tokens in total (>= 257). Deterministic:
 * ties between equally frequent pairs go to the smallest (left id, right
 * id). Literal "<|endoftext|>" text separates documents and is not
 * learned. Stops early (smaller vocabulary) when no pair is left to merge.
 * If progress is non-zero, prints a progress line. */
int al_tok_train(const unsigned char *text, size_t n, int vocab_size, int progress,
                 al_tokenizer **out, al_err *e);
/* attnlab's tokenizer.json, or Hugging Face's (refused with one line
 * naming what is unsupported, e.g. "unsupported pre_tokenizer
 * 'Metaspace'"). */
int al_tok_load(const char *path, al_tokenizer **out, al_err *e);
/* Written atomically (temp file + rename); a Hugging Face tokenizer
 * writes the bytes it was loaded from. */
int al_tok_save(const al_tokenizer *t, const char *path, al_err *e);
void al_tok_free(al_tokenizer *t);

int al_tok_vocab_size(const al_tokenizer *t);
/* The <|endoftext|> id; for a Hugging Face tokenizer -1 unless
 * "<|endoftext|>" is a special added token. */
int al_tok_eot(const al_tokenizer *t);
/* "attnlab byte-level BPE" or "Hugging Face byte-level BPE", for messages. */
const char *al_tok_kind(const al_tokenizer *t);

/* Encode bytes to ids (caller frees *ids). If allow_special, the literal
 * text "<|endoftext|>" becomes the special token (for a Hugging Face
 * tokenizer: every special added token; its other added tokens always
 * match); otherwise it is encoded as ordinary text. Safe to call from
 * several threads on one tokenizer (the word cache is used by one caller
 * at a time). */
int al_tok_encode(const al_tokenizer *t, const unsigned char *text, size_t n, int allow_special,
                  int **ids, size_t *n_ids, al_err *e);
/* The same into the caller's buffer, which must have room for n ids (an
 * encoding never has more ids than the text has bytes -- except with a
 * Hugging Face tokenizer that adds prefix spaces or whose NFC lengthens
 * the text: then needing more is an error). */
int al_tok_encode_into(const al_tokenizer *t, const unsigned char *text, size_t n,
                       int allow_special, int *ids, size_t *n_ids, al_err *e);
/* Decode ids to bytes (caller frees *out; NUL-terminated, not counted).
 * Ids out of range are an error. The bytes are al_tok_bytes' joined: for
 * ids that end inside a character Hugging Face would print U+FFFD. */
int al_tok_decode(const al_tokenizer *t, const int *ids, size_t n, unsigned char **out,
                  size_t *n_out, al_err *e);
/* Raw bytes of one token (not NUL-terminated); NULL if id out of range.
 * A Hugging Face token's bytes are its vocabulary string mapped back
 * from the ByteLevel alphabet (an added token not in that alphabet: its
 * UTF-8), as its ByteLevel decoder does. */
const unsigned char *al_tok_bytes(const al_tokenizer *t, int id, size_t *len);
/* Printable form for tables and plots: a space shown as "␣" (spaces lead
 * tokens, except in runs of whitespace), newline as "\n", tab as "\t",
 * other control bytes and invalid UTF-8 as \xNN, valid UTF-8 kept;
 * <|endoftext|> as itself; a bad id as "<bad id>". Always NUL-terminates
 * (truncates to fit, never inside a character or escape). Returns strlen. */
size_t al_tok_display(const al_tokenizer *t, int id, char *buf, size_t cap);
/* The pair that merge token `id` joins (0), or -1 if id is a byte, the
 * special token or out of range, and always for a Hugging Face
 * tokenizer (several merges may make one of its ids). */
int al_tok_merge(const al_tokenizer *t, int id, int *left, int *right);
/* attnlab's pre-splitting as GPT-2's pattern, by hand over bytes: returns the end
 * of the piece that starts at s[i] (i < n). Pieces: 's 't 're 've 'm 'll
 * 'd; an optional space then a run of letters (bytes >= 0x80 count as
 * letters, so UTF-8 words stay whole), of digits, or of other non-space
 * bytes; a run of whitespace, less its last byte when a word follows. */
size_t al_tok_presplit(const unsigned char *s, size_t n, size_t i);

#endif
