/* png.c -- PNG encode/decode through libpng, in memory (see png.h).
 *
 * Encoding goes to a memory buffer and then through
 * al_write_file_atomic, so libpng's longjmp error path never has a
 * half-written file to clean up. State that must survive a longjmp lives
 * in a struct reached through a pointer (locals changed after setjmp
 * would be indeterminate). */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/png.h"

#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"

/* Encoding appends to an al_buf; a failed append must still stop libpng
 * at once, so it becomes png_error. */
static void mem_write(png_structp png, png_bytep data, png_size_t len) {
    al_buf *b = png_get_io_ptr(png);
    al_buf_put(b, data, len);
    if (!al_buf_ok(b)) png_error(png, "out of memory");
}

static void mem_flush(png_structp png) { (void)png; }

/* Decoding reads the file's bytes in memory from a position. */
typedef struct memreader {
    unsigned char *p;
    size_t n, pos;
} memreader;

static void mem_read(png_structp png, png_bytep data, png_size_t len) {
    memreader *r = png_get_io_ptr(png);
    if (len > r->n - r->pos) png_error(png, "file is truncated");
    memcpy(data, r->p + r->pos, len);
    r->pos += len;
}

/* libpng reports errors here; keep the message for al_err. */
typedef struct pngctx {
    char msg[256];
} pngctx;

static void on_error(png_structp png, png_const_charp msg) {
    pngctx *c = png_get_error_ptr(png);
    if (c) snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static int ascii_only(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80) return 0;
    return 1;
}

static int check_texts(const al_png_text *t, int n, al_err *e) {
    for (int i = 0; i < n; i++) {
        size_t k = t[i].key ? strlen(t[i].key) : 0;
        if (k < 1 || k > 79 || !ascii_only(t[i].key) || !t[i].value)
            return al_errf(e, "bad PNG text chunk key '%s'", t[i].key ? t[i].key : "(null)");
    }
    return 0;
}

/* Encode im into b; returns 0 or -1 with c->msg set. */
static int encode(const al_image *im, const al_png_text *t, int n_text, al_buf *b, pngctx *c) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, c, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_textp txt = NULL;
    if (!png || !info) {
        snprintf(c->msg, sizeof c->msg, "out of memory");
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    txt = calloc((size_t)(n_text > 0 ? n_text : 1), sizeof *txt);
    if (!txt) {
        snprintf(c->msg, sizeof c->msg, "out of memory");
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(txt);
        return -1;
    }
    png_set_write_fn(png, b, mem_write, mem_flush);
    png_set_IHDR(png, info, (png_uint_32)im->w, (png_uint_32)im->h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    for (int i = 0; i < n_text; i++) {
        int itxt = !ascii_only(t[i].value);
        txt[i].compression = itxt ? PNG_ITXT_COMPRESSION_NONE : PNG_TEXT_COMPRESSION_NONE;
        txt[i].key = (png_charp)t[i].key;
        txt[i].text = (png_charp)t[i].value;
        txt[i].text_length = strlen(t[i].value);
        txt[i].lang = NULL;
        txt[i].lang_key = NULL;
    }
    if (n_text > 0) png_set_text(png, info, txt, n_text);
    png_write_info(png, info);
    for (int y = 0; y < im->h; y++) png_write_row(png, im->px + (size_t)y * im->w * 3);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(txt);
    return 0;
}

int al_png_write(const char *path, const al_image *im, const al_png_text *text, int n_text,
                 al_err *e) {
    if (!im->px || im->w <= 0 || im->h <= 0)
        return al_errf(e, "cannot write picture %s: empty image", path);
    if (check_texts(text, n_text, e)) return al_err_prefix(e, "cannot write picture %s", path);
    al_buf b = AL_BUF_INIT;
    pngctx c = {{0}};
    if (encode(im, text, n_text, &b, &c) != 0) {
        al_buf_free(&b);
        return al_errf(e, "cannot write picture %s: %s", path, c.msg);
    }
    al_err e2;
    int rc = al_write_file_atomic(path, b.p, b.n, &e2);
    al_buf_free(&b);
    if (rc != 0) { /* name the picture, not the temporary file; keep the reason */
        const char *why = strrchr(e2.msg, ':');
        if (!why) return al_errf(e, "cannot write picture %s: %s", path, e2.msg);
        return al_errf(e, "cannot write picture %s: %s", path, why ? why + 2 : e2.msg);
    }
    return 0;
}

/* ---------------------------------------------------------------- read */

typedef struct readstate {
    png_structp png;
    png_infop info;
    uint8_t *px;
    png_bytep *rows;
} readstate;

static int decode(memreader *b, al_image *im, al_png_meta *meta, pngctx *c, readstate *s) {
    s->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, c, on_error, on_warning);
    s->info = s->png ? png_create_info_struct(s->png) : NULL;
    if (!s->png || !s->info) {
        snprintf(c->msg, sizeof c->msg, "out of memory");
        return -1;
    }
    if (setjmp(png_jmpbuf(s->png))) return -1;
    png_set_read_fn(s->png, b, mem_read);
    png_set_user_limits(s->png, AL_IMAGE_MAX_SIDE, AL_IMAGE_MAX_SIDE);
    png_read_info(s->png, s->info);
    png_uint_32 w = png_get_image_width(s->png, s->info), h = png_get_image_height(s->png, s->info);
    int ct = png_get_color_type(s->png, s->info);
    png_set_expand(s->png);
    png_set_strip_16(s->png);
    png_set_strip_alpha(s->png);
    if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(s->png);
    png_set_interlace_handling(s->png);
    png_read_update_info(s->png, s->info);
    if (png_get_rowbytes(s->png, s->info) != (size_t)w * 3)
        png_error(s->png, "unexpected row size");
    s->px = malloc((size_t)w * h * 3);
    s->rows = malloc(sizeof(png_bytep) * h);
    if (!s->px || !s->rows) png_error(s->png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) s->rows[y] = s->px + (size_t)y * w * 3;
    png_read_image(s->png, s->rows);
    png_read_end(s->png, s->info);
    im->w = (int)w;
    im->h = (int)h;
    im->px = s->px;
    s->px = NULL;
    if (meta) {
        png_textp t;
        int n = 0;
        png_get_text(s->png, s->info, &t, &n);
        meta->key = calloc((size_t)(n > 0 ? n : 1), sizeof(char *));
        meta->value = calloc((size_t)(n > 0 ? n : 1), sizeof(char *));
        if (!meta->key || !meta->value) png_error(s->png, "out of memory");
        for (int i = 0; i < n; i++) {
            meta->key[i] = strdup(t[i].key);
            meta->value[i] = strdup(t[i].text ? t[i].text : "");
            meta->n = i + 1;
            if (!meta->key[i] || !meta->value[i]) png_error(s->png, "out of memory");
        }
    }
    return 0;
}

int al_png_read(const char *path, al_image *im, al_png_meta *meta, al_err *e) {
    memreader b = {0};
    pngctx c = {{0}};
    readstate s = {0};
    im->w = im->h = 0;
    im->px = NULL;
    if (meta) memset(meta, 0, sizeof *meta);
    if (al_read_file(path, &b.p, &b.n, (size_t)1 << 30, e) != 0) return -1;
    if (b.n < 8 || png_sig_cmp(b.p, 0, 8) != 0) {
        free(b.p);
        return al_errf(e, "cannot read picture %s: not a PNG file", path);
    }
    int rc = decode(&b, im, meta, &c, &s);
    png_destroy_read_struct(&s.png, &s.info, NULL);
    free(s.px);
    free(s.rows);
    free(b.p);
    if (rc != 0) {
        al_image_free(im);
        if (meta) al_png_meta_free(meta);
        return al_errf(e, "cannot read picture %s: %s", path, c.msg);
    }
    return 0;
}

const char *al_png_meta_get(const al_png_meta *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (m->key[i] && strcmp(m->key[i], key) == 0) return m->value[i];
    return NULL;
}

void al_png_meta_free(al_png_meta *m) {
    for (int i = 0; i < m->n; i++) {
        free(m->key[i]);
        free(m->value[i]);
    }
    free(m->key);
    free(m->value);
    memset(m, 0, sizeof *m);
}
