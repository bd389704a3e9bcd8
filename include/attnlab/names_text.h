/* names_text.h -- the seed notes' copying table on real text: held-out
 * stories of a token file, each with an invented name inserted at two
 * places, so that a model's probability of each name piece can be read at
 * the name's first appearance (nothing to copy) and its second (a copy of
 * the first: what an induction head predicts, and a 1-layer model's
 * skip-trigrams only partly do). The analysis that reads the model is
 * namecopy.h; this part only builds token sequences.
 *
 * Names are written " Name" (a leading space, so the name is one
 * pre-split word) before a token that begins a word (its bytes start
 * with a space), so the story's own words stay whole. */
#ifndef ATTNLAB_NAMES_TEXT_H
#define ATTNLAB_NAMES_TEXT_H

#include <stdint.h>
#include "attnlab/data.h"
#include "attnlab/synth.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

#define AL_NAME_MAX_PIECES 8

typedef struct al_name_story {
    int *ids; /* BOS, the story's tokens with the name twice; len ids */
    int len;
    int k; /* name pieces, 2..AL_NAME_MAX_PIECES */
    int piece[AL_NAME_MAX_PIECES]; /* the name's token ids */
    int first, second; /* positions in ids of the first piece of each appearance */
    char name[AL_SYNTH_NAME_MAX]; /* as written, without the leading space */
    char was[40]; /* code: the variable the name replaced (cut to 39 bytes) */
} al_name_story;

typedef struct al_name_stories {
    int n;
    al_name_story *s; /* (n); every ids points into one allocation */
    int *buf;
} al_name_stories;

/* Up to n stories (1..100000) from val, a token file whose documents each
 * begin with tok's <|endoftext|> (attnlab encode), taken in file order
 * (the encoder puts the last documents of the text in X.val.bin: held out
 * from training). A document is used if it has at least 16 tokens; it is
 * cut to n_ctx - 1 - 2k tokens when longer. The name goes before the
 * first word-starting token at or after 1/5 of the (cut) story and again
 * before the first at or after 3/5 (at least 4 tokens later); a story
 * without two such places is skipped. With name (not NULL, not empty)
 * every story gets that name; else each gets an invented one (synth.h's
 * syllables, 2 or 3 of them, drawn with seed; not a word of the synthetic
 * lexicon). A name is lower-cased in a story that has no upper-case
 * letter (TinyStories as shared here is lower case). A name must encode
 * (with its space) to 2..AL_NAME_MAX_PIECES tokens: a given name that
 * does not is an error; invented ones are redrawn. Fewer than n usable
 * stories is fine (out->n says how many); none is an error. -1 with e:
 * no <|endoftext|> in tok or at val's start, n or n_ctx (< 32) out of
 * range, out of memory. Deterministic in its arguments. */
int al_names_in_text(const al_tokenizer *tok, const al_tokens *val, int n, const char *name,
                     uint64_t seed, int n_ctx, al_name_stories *out, al_err *e);

/* The same table for code: up to n held-out functions of val (a token
 * file of documents after <|endoftext|>, as for al_names_in_text), at
 * most 16 from one document, in file order. A function is a line that
 * starts (after its indentation) with "def ", "async def " or "func "
 * and the lines after it up to the next non-blank one indented no deeper
 * (Python's body; Go's up to its closing brace). In each, one variable
 * (a word used at least twice, never after a '.', not a keyword, a
 * builtin or the function's name; drawn with seed) is renamed in the
 * whole function to an invented lower-case name that the function does
 * not contain, and the function alone, after <|endoftext|>, cut to
 * n_ctx - 1 tokens, is the sequence: first is the first use of the
 * name (a parameter or the first assignment: nothing to copy), second
 * the next use spelt by the same 2..AL_NAME_MAX_PIECES tokens (a copy).
 * A function with fewer than 16 tokens or without such a variable is
 * skipped; was holds the variable's own name. Fewer than n is fine;
 * none is an error. -1 with e as al_names_in_text. Deterministic in its
 * arguments. */
int al_idents_in_code(const al_tokenizer *tok, const al_tokens *val, int n, uint64_t seed,
                      int n_ctx, al_name_stories *out, al_err *e);
void al_name_stories_free(al_name_stories *s);

#endif
