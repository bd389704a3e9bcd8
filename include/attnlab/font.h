/* font.h -- metrics of picture text: every character is one cell of a
 * monospace font.
 *
 * Plot layout counts cells, so sizes follow from the strings alone and a
 * figure has the same layout in PNG, SVG and PDF. The glyphs are drawn
 * by cairo from a real monospace font (DejaVu Sans Mono through
 * fontconfig) scaled so one cell is exactly AL_FONT_ADV px wide; the cap
 * height is AL_FONT_CAP px at scale 1 (labels), twice that at scale 2
 * (titles). A valid UTF-8 character is one cell (a character the font
 * lacks shows as its box); bytes that are not valid UTF-8 and control
 * bytes are the text "\xNN", four cells, so what a token really contains
 * is always visible. */
#ifndef ATTNLAB_FONT_H
#define ATTNLAB_FONT_H

#include <stddef.h>
#include <stdint.h>

#define AL_FONT_ADV 6 /* horizontal advance per cell at scale 1 */
#define AL_FONT_GLYPH_H 9 /* rows a line of text may ink, from its top */
#define AL_FONT_CAP 7 /* rows above the baseline */
#define AL_FONT_LINE 11 /* line pitch at scale 1 */

/* Cells s occupies (a "\xNN" escape is 4); width in pixels is
 * cells * AL_FONT_ADV * scale. */
int al_font_cells(const char *s);
int al_font_width(const char *s, int scale);
/* s as the text to draw: valid UTF-8, escapes spelled out, one character
 * per cell. Returns the length it needs (excluding the NUL); writes at
 * most cap - 1 bytes and always terminates when cap > 0. */
size_t al_font_display(const char *s, char *buf, size_t cap);
/* Copy s into buf, cut to at most max_cells cells with "…" as the last
 * cell when cut (never inside a character or an escape). */
void al_font_fit(const char *s, int max_cells, char *buf, size_t cap);

#endif
