/* font.h -- the built-in bitmap font for picture text.
 *
 * Glyphs are 5 x 9 pixels (7 above the baseline, 2 for descenders) on a
 * 6-pixel advance, drawn at integer scales (1 for labels, 2 for titles).
 * Covered: printable ASCII, "␣" (U+2423, how token strings show a
 * leading space), "…", "→", "←", "Δ", "±", "·". Any other valid UTF-8
 * character is drawn as an empty box, one cell wide; bytes that are not
 * valid UTF-8 and control bytes are drawn as the text "\xNN", so what a
 * token really contains is always visible. */
#ifndef ATTNLAB_FONT_H
#define ATTNLAB_FONT_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/image.h"

#define AL_FONT_ADV 6   /* horizontal advance per cell at scale 1 */
#define AL_FONT_GLYPH_H 9 /* rows a glyph may ink, from the top of the line */
#define AL_FONT_CAP 7   /* rows above the baseline */
#define AL_FONT_LINE 11 /* line pitch at scale 1 */

/* Cells s occupies (a "\xNN" escape is 4); width in pixels is
 * cells * AL_FONT_ADV * scale. */
int al_font_cells(const char *s);
int al_font_width(const char *s, int scale);
/* Draw s with the top-left of its first cell at (x,y). Returns the
 * width drawn. */
int al_font_draw(al_image *im, int x, int y, const char *s, int scale,
                 uint32_t colour);
/* Draw s rotated 90° counter-clockwise (reading bottom to top) in the box
 * [x, x + AL_FONT_GLYPH_H*scale) x [y, y + width): the first character
 * is at the bottom, the tops of the glyphs face left. */
int al_font_draw_up(al_image *im, int x, int y, const char *s, int scale,
                    uint32_t colour);
/* Copy s into buf, cut to at most max_cells cells with "…" as the last
 * cell when cut (never inside a character or an escape). */
void al_font_fit(const char *s, int max_cells, char *buf, size_t cap);

#endif
