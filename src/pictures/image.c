/* image.c -- the RGB raster pictures are handed around in (see image.h). */
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
    for (size_t i = 0; i < n; i += 3) {
        im->px[i] = (uint8_t)(bg >> 16);
        im->px[i + 1] = (uint8_t)(bg >> 8);
        im->px[i + 2] = (uint8_t)bg;
    }
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
