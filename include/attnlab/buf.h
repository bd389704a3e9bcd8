/* buf.h -- one growable byte buffer, for building text (HTML, JSON
 * headers, corpora) and binary blobs (PNG in memory) piece by piece.
 *
 * Appends never fail loudly: the first failed allocation sets oom and
 * every later append is a no-op, so a writer appends freely and checks
 * once at the end (al_buf_ok). The contents are always NUL-terminated
 * (the NUL is not counted in n). The buffer owns p; al_buf_free releases
 * it, al_buf_take hands it to the caller. */
#ifndef ATTNLAB_BUF_H
#define ATTNLAB_BUF_H

#include <stddef.h>

typedef struct al_buf {
    char *p; /* contents (NULL until the first append) */
    size_t n; /* bytes used */
    size_t cap; /* bytes allocated */
    int oom; /* an allocation failed: contents are incomplete */
} al_buf;

#define AL_BUF_INIT                                                                                \
    { NULL, 0, 0, 0 }

void al_buf_put(al_buf *b, const void *data, size_t n);
void al_buf_puts(al_buf *b, const char *s);
void al_buf_printf(al_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empty the contents but keep the memory, for a buffer reused piece
 * after piece. The oom flag stays: a writer still checks once at the
 * end, after all its pieces. */
void al_buf_reset(al_buf *b);
/* 1 if every append so far succeeded. */
int al_buf_ok(const al_buf *b);
/* The contents (caller frees; "" if nothing was appended), or NULL after
 * an allocation failure; the buffer is empty afterwards either way. */
char *al_buf_take(al_buf *b, size_t *n);
void al_buf_free(al_buf *b);

#endif
