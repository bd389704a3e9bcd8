/* buf.c -- the growable byte buffer (see buf.h). */
#include "attnlab/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Make room for n more bytes plus the terminating NUL; 0 or -1 (oom
 * set). Doubling keeps a long run of small appends linear. */
static int grow(al_buf *b, size_t n) {
    if (b->oom) return -1;
    if (n > (size_t)-1 / 2 - b->n - 1) {
        b->oom = 1;
        return -1;
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return -1;
        }
        b->p = q;
        b->cap = cap;
    }
    return 0;
}

void al_buf_put(al_buf *b, const void *data, size_t n) {
    if (grow(b, n)) return;
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
}

void al_buf_puts(al_buf *b, const char *s) { al_buf_put(b, s, strlen(s)); }

void al_buf_printf(al_buf *b, const char *fmt, ...) {
    char small[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        al_buf_put(b, small, (size_t)n);
        return;
    }
    /* rare: longer than the stack buffer, so format a second time straight
     * into the buffer (small holds only the first 1023 bytes) */
    if (grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void al_buf_reset(al_buf *b) {
    b->n = 0;
    if (b->p) b->p[0] = 0;
}

int al_buf_ok(const al_buf *b) { return !b->oom; }

char *al_buf_take(al_buf *b, size_t *n) {
    char *p = b->oom ? NULL : b->p;
    if (!b->oom && !p) p = calloc(1, 1);
    if (n) *n = p ? b->n : 0;
    if (b->oom) free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    b->oom = 0;
    return p;
}

void al_buf_free(al_buf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    b->oom = 0;
}
