/* image.h -- an 8-bit RGB raster in memory: what plot draws (through
 * cairo) and png writes and reads.
 *
 * Pixels are row-major, 3 bytes each, (h, w, 3); (0,0) is the top-left.
 * Colours are 0xRRGGBB integers so callers can write them as literals.
 * get and set ignore pixels outside the image. */
#ifndef ATTNLAB_IMAGE_H
#define ATTNLAB_IMAGE_H

#include <stdint.h>
#include "attnlab/util.h"

typedef struct al_image {
    int w, h;
    uint8_t *px; /* (h, w, 3) */
} al_image;

/* Largest side accepted, so a layout bug cannot ask for gigabytes. */
#define AL_IMAGE_MAX_SIDE 16384

/* Allocate w x h filled with colour bg. */
int al_image_init(al_image *im, int w, int h, uint32_t bg, al_err *e);
void al_image_free(al_image *im);

static inline uint32_t al_rgb(int r, int g, int b) {
    return ((uint32_t)(r & 255) << 16) | ((uint32_t)(g & 255) << 8) | (uint32_t)(b & 255);
}
/* The pixel at (x,y) as 0xRRGGBB (0 outside the image). */
uint32_t al_image_get(const al_image *im, int x, int y);
void al_image_set(al_image *im, int x, int y, uint32_t c);
#endif
