/* image.c -- RGB raster and clipped drawing primitives (see image.h). */
#include "attnlab/image.h"

#include <stdlib.h>
#include <string.h>

int al_image_init(al_image *im, int w, int h, uint32_t bg, al_err *e) {
    im->w = im->h = 0;
    im->px = NULL;
    if (w <= 0 || h <= 0 || w > AL_IMAGE_MAX_SIDE || h > AL_IMAGE_MAX_SIDE)
        return al_errf(e, "picture size %d x %d is out of range (1..%d per side)", w, h,
                       AL_IMAGE_MAX_SIDE);
    size_t n;
    if (al_mul_overflow((size_t)w * 3, (size_t)h, &n)) return al_errf(e, "picture too large");
    im->px = al_malloc(n, 1, e);
    if (!im->px) return -1;
    im->w = w;
    im->h = h;
    al_image_fill(im, 0, 0, w, h, bg);
    return 0;
}

void al_image_free(al_image *im) {
    free(im->px);
    im->px = NULL;
    im->w = im->h = 0;
}

uint32_t al_image_get(const al_image *im, int x, int y) {
    if (x < 0 || y < 0 || x >= im->w || y >= im->h) return 0;
    const uint8_t *p = im->px + ((size_t)y * im->w + x) * 3;
    return al_rgb(p[0], p[1], p[2]);
}

void al_image_set(al_image *im, int x, int y, uint32_t c) {
    if (x < 0 || y < 0 || x >= im->w || y >= im->h) return;
    uint8_t *p = im->px + ((size_t)y * im->w + x) * 3;
    p[0] = (uint8_t)(c >> 16);
    p[1] = (uint8_t)(c >> 8);
    p[2] = (uint8_t)c;
}

void al_image_fill(al_image *im, int x, int y, int w, int h, uint32_t c) {
    int x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    int x1 = x + w > im->w ? im->w : x + w, y1 = y + h > im->h ? im->h : y + h;
    if (x0 >= x1 || y0 >= y1) return;
    uint8_t *row = im->px + ((size_t)y0 * im->w + x0) * 3;
    for (int i = 0; i < x1 - x0; i++) {
        row[3 * i] = (uint8_t)(c >> 16);
        row[3 * i + 1] = (uint8_t)(c >> 8);
        row[3 * i + 2] = (uint8_t)c;
    }
    /* the first row is the pattern for the others */
    for (int yy = y0 + 1; yy < y1; yy++)
        memcpy(im->px + ((size_t)yy * im->w + x0) * 3, row, (size_t)(x1 - x0) * 3);
}

void al_image_rect(al_image *im, int x, int y, int w, int h, uint32_t c) {
    al_image_fill(im, x, y, w, 1, c);
    al_image_fill(im, x, y + h - 1, w, 1, c);
    al_image_fill(im, x, y, 1, h, c);
    al_image_fill(im, x + w - 1, y, 1, h, c);
}

/* Bresenham; the brush is a width x width square centred on the path. */
void al_image_line(al_image *im, int x0, int y0, int x1, int y1, int width,
                   int dash, uint32_t c) {
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy, off = (width - 1) / 2, k = 0;
    if (width < 1) width = 1;
    for (;;) {
        if (dash <= 0 || (k / dash) % 2 == 0)
            al_image_fill(im, x0 - off, y0 - off, width, width, c);
        k++;
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}
