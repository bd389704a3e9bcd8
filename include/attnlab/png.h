/* png.h -- pictures to and from PNG files (libpng).
 *
 * Writing: 8-bit RGB, with text chunks that say where a picture came from
 * (model, what, head, prompt, software version); a value that is plain
 * ASCII goes in a tEXt chunk, other UTF-8 (e.g. a prompt with "é") in an
 * iTXt chunk, which is UTF-8 by definition. The file is written whole to
 * a temporary name and renamed, so a reader never sees half a picture.
 * Reading (for tests and tools) decodes any PNG to 8-bit RGB and returns
 * its text chunks. src/pictures/png.c is the only user of libpng. */
#ifndef ATTNLAB_PNG_H
#define ATTNLAB_PNG_H

#include "attnlab/image.h"
#include "attnlab/util.h"

typedef struct al_png_text {
    const char *key; /* 1..79 printable ASCII characters */
    const char *value; /* UTF-8 */
} al_png_text;

int al_png_write(const char *path, const al_image *im, const al_png_text *text, int n_text,
                 al_err *e);

/* Text chunks read back from a file. */
typedef struct al_png_meta {
    int n;
    char **key, **value;
} al_png_meta;

/* Decode path into im (caller frees with al_image_free); meta may be
 * NULL. Refuses files that are not PNG or exceed AL_IMAGE_MAX_SIDE. */
int al_png_read(const char *path, al_image *im, al_png_meta *meta, al_err *e);
/* The value of the first chunk with that key, or NULL. */
const char *al_png_meta_get(const al_png_meta *m, const char *key);
void al_png_meta_free(al_png_meta *m);

#endif
