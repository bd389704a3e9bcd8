/* synth.h -- the built-in story corpus (docs/design.md §3, `attnlab data synth`).
 *
 * TinyStories-like stories whose characters have invented names made of
 * random syllables ("Seoyeon", "Bamurik"), each name recurring several
 * times in its story, plus an optional share of documents that are a
 * random span repeated 2-3 times. Both reward copying from context, so
 * induction heads form quickly. Output is a pure function of the options
 * (seed included). One document per line; documents are separated by a
 * blank line, so `encode --docs blank` and per-line splitting both work. */
#ifndef ATTNLAB_SYNTH_H
#define ATTNLAB_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/util.h"

typedef struct al_synth_opts {
    uint64_t seed;
    long n_docs; /* documents in total (stories + repeat docs) */
    double repeat_fraction; /* share of repeated-span documents, [0,1] */
    int min_sentences; /* body sentences per story (plus opening, */
    int max_sentences; /* introductions and a closer) */
    int span_min, span_max; /* pieces in a repeated span (20, 60): shorter
                               spans fit more whole repeats in a short window */
} al_synth_opts;

void al_synth_defaults(al_synth_opts *o);
/* Check ranges; fills e naming the bad option. */
int al_synth_check(const al_synth_opts *o, al_err *e);

enum { AL_SYNTH_STORY = 0, AL_SYNTH_REPEAT = 1 };
#define AL_SYNTH_MAX_CHARS 3
#define AL_SYNTH_NAME_MAX 24 /* bytes, NUL included */

/* What the generator put into one document, for tests and tools. */
typedef struct al_synth_doc {
    int kind; /* AL_SYNTH_STORY or AL_SYNTH_REPEAT */
    /* stories */
    int n_names;
    char names[AL_SYNTH_MAX_CHARS][AL_SYNTH_NAME_MAX];
    int name_uses[AL_SYNTH_MAX_CHARS]; /* times each name was written */
    /* repeat documents: the text is span (" " span) x (repeats-1) */
    int span_pieces; /* space-separated pieces in the span */
    int repeats; /* 2 or 3 */
    size_t span_bytes;
} al_synth_doc;

typedef struct al_synth al_synth;

int al_synth_new(al_synth **out, const al_synth_opts *o, al_err *e);
void al_synth_free(al_synth *s);
/* The next document (no trailing newline). *text stays valid until the
 * next call. info may be NULL. Returns 0, or -1 on allocation failure. */
int al_synth_next(al_synth *s, const char **text, size_t *len, al_synth_doc *info, al_err *e);

/* Write o->n_docs documents to path atomically, "doc\n\ndoc\n...". With
 * progress, a progress line is shown. *bytes (may be NULL) gets the size. */
int al_synth_write(const char *path, const al_synth_opts *o, int progress, size_t *bytes,
                   al_err *e);

/* The syllable inventory names are spelled from (distinct, lower case).
 * Index 0.. are consonant-initial syllables usable anywhere; the rest
 * (vowel-initial) only start a name. */
size_t al_synth_n_syllables(const al_synth *s);
const char *al_synth_syllable(const al_synth *s, size_t i);
/* 1 if lower-cased w is a word of the story lexicon, of the templates, or
 * of the built-in dictionary avoid list (what names are checked against). */
int al_synth_is_word(const al_synth *s, const char *w);
/* Words the stories are written with (not the avoid list). */
size_t al_synth_n_words(const al_synth *s);
const char *al_synth_word(const al_synth *s, size_t i);

#endif
