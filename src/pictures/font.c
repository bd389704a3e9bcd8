/* font.c -- a 5x9 bitmap font drawn from the sheet below (see font.h).
 *
 * The sheet is the font: 16 glyphs per block, one string per pixel row
 * (9 rows: 7 above the baseline, 2 below), '#' inked, glyphs separated by
 * a space. Glyph k is block k/16, column k%16. Keeping the art in this
 * shape lets a reader check and edit a letter by eye. */
#include "attnlab/font.h"

#include <string.h>

#define GW 5  /* glyph width */
#define PER_BLOCK 16

/* Printable ASCII from ' ' (glyph 0) to '~' (94), then the extras. */
enum { G_OPEN_BOX = 95, G_ELLIPSIS, G_RARROW, G_DELTA, G_PLUSMINUS, G_MIDDOT, G_LARROW,
       G_BOX, N_GLYPHS };

static const char *const sheet[] = {
  /*       !     "     #     $     %     &     '     (     )     *     +     ,     -     .     /     */
    "..... ..#.. .#.#. .#.#. ..#.. ##... .##.. ..#.. ...#. .#... ..... ..... ..... ..... ..... .....",
    "..... ..#.. .#.#. .#.#. .#### ##..# #..#. ..#.. ..#.. ..#.. ..#.. ..#.. ..... ..... ..... ....#",
    "..... ..#.. .#.#. ##### #.#.. ...#. #.#.. .#... .#... ...#. #.#.# ..#.. ..... ..... ..... ...#.",
    "..... ..#.. ..... .#.#. .###. ..#.. .#... ..... .#... ...#. .###. ##### ..... ##### ..... ..#..",
    "..... ..#.. ..... ##### ..#.# .#... #.#.# ..... .#... ...#. #.#.# ..#.. ..... ..... ..... .#...",
    "..... ..... ..... .#.#. ####. #..## #..#. ..... ..#.. ..#.. ..#.. ..#.. .##.. ..... .##.. #....",
    "..... ..#.. ..... .#.#. ..#.. ...## .##.# ..... ...#. .#... ..... ..... .##.. ..... .##.. .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..#.. ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .#... ..... ..... .....",
  /* 0     1     2     3     4     5     6     7     8     9     :     ;     <     =     >     ?     */
    ".###. ..#.. .###. ##### ...#. ##### ..##. ##### .###. .###. ..... ..... ...#. ..... .#... .###.",
    "#...# .##.. #...# ...#. ..##. #.... .#... ....# #...# #...# .##.. .##.. ..#.. ..... ..#.. #...#",
    "#..## ..#.. ....# ..#.. .#.#. ####. #.... ...#. #...# #...# .##.. .##.. .#... ##### ...#. ....#",
    "#.#.# ..#.. ...#. ...#. #..#. ....# ####. ..#.. .###. .#### ..... ..... #.... ..... ....# ...#.",
    "##..# ..#.. ..#.. ....# ##### ....# #...# .#... #...# ....# .##.. .##.. .#... ##### ...#. ..#..",
    "#...# ..#.. .#... #...# ...#. #...# #...# .#... #...# ...#. .##.. .##.. ..#.. ..... ..#.. .....",
    ".###. .###. ##### .###. ...#. .###. .###. .#... .###. .##.. ..... ..#.. ...#. ..... .#... ..#..",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .#... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
  /* @     A     B     C     D     E     F     G     H     I     J     K     L     M     N     O     */
    ".###. .###. ####. .###. ####. ##### ##### .###. #...# .###. ..### #...# #.... #...# #...# .###.",
    "#...# #...# #...# #...# #...# #.... #.... #...# #...# ..#.. ...#. #..#. #.... ##.## #...# #...#",
    "#.### #...# #...# #.... #...# #.... #.... #.... #...# ..#.. ...#. #.#.. #.... #.#.# ##..# #...#",
    "#.#.# ##### ####. #.... #...# ####. ####. #.### ##### ..#.. ...#. ##... #.... #.#.# #.#.# #...#",
    "#.### #...# #...# #.... #...# #.... #.... #...# #...# ..#.. ...#. #.#.. #.... #...# #..## #...#",
    "#.... #...# #...# #...# #...# #.... #.... #...# #...# ..#.. #..#. #..#. #.... #...# #...# #...#",
    ".#### #...# ####. .###. ####. ##### #.... .#### #...# .###. .##.. #...# ##### #...# #...# .###.",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
  /* P     Q     R     S     T     U     V     W     X     Y     Z     [     \     ]     ^     _     */
    "####. .###. ####. .#### ##### #...# #...# #...# #...# #...# ##### .###. ..... .###. ..#.. .....",
    "#...# #...# #...# #.... ..#.. #...# #...# #...# #...# #...# ....# .#... #.... ...#. .#.#. .....",
    "#...# #...# #...# #.... ..#.. #...# #...# #...# .#.#. .#.#. ...#. .#... .#... ...#. #...# .....",
    "####. #...# ####. .###. ..#.. #...# #...# #.#.# ..#.. ..#.. ..#.. .#... ..#.. ...#. ..... .....",
    "#.... #.#.# #.#.. ....# ..#.. #...# #...# #.#.# .#.#. ..#.. .#... .#... ...#. ...#. ..... .....",
    "#.... #..#. #..#. ....# ..#.. #...# .#.#. #.#.# #...# ..#.. #.... .#... ....# ...#. ..... .....",
    "#.... .##.# #...# ####. ..#.. .###. ..#.. .#.#. #...# ..#.. ##### .###. ..... .###. ..... .....",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... #####",
    "..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... ..... .....",
  /* `     a     b     c     d     e     f     g     h     i     j     k     l     m     n     o     */
    ".#... ..... #.... ..... ....# ..... ..##. ..... #.... ..#.. ...#. #.... .##.. ..... ..... .....",
    "..#.. ..... #.... ..... ....# ..... .#..# ..... #.... ..... ..... #.... ..#.. ..... ..... .....",
    "...#. .###. #.##. .###. .##.# .###. .#... .#### #.##. .##.. ..##. #..#. ..#.. ##.#. #.##. .###.",
    "..... ....# ##..# #.... #..## #...# ###.. #...# ##..# ..#.. ...#. #.#.. ..#.. #.#.# ##..# #...#",
    "..... .#### #...# #.... #...# ##### .#... #...# #...# ..#.. ...#. ##... ..#.. #.#.# #...# #...#",
    "..... #...# #...# #...# #...# #.... .#... #...# #...# ..#.. ...#. #.#.. ..#.. #.#.# #...# #...#",
    "..... .#### ####. .###. .#### .###. .#... .#### #...# .###. ...#. #..#. .###. #.#.# #...# .###.",
    "..... ..... ..... ..... ..... ..... ..... ....# ..... ..... #..#. ..... ..... ..... ..... .....",
    "..... ..... ..... ..... ..... ..... ..... .###. ..... ..... .##.. ..... ..... ..... ..... .....",
  /* p     q     r     s     t     u     v     w     x     y     z     {     |     }     ~     ␣     */
    "..... ..... ..... ..... .#... ..... ..... ..... ..... ..... ..... ...#. ..#.. .#... ..... .....",
    "..... ..... ..... ..... .#... ..... ..... ..... ..... ..... ..... ..#.. ..#.. ..#.. ..... .....",
    "####. .#### #.##. .#### ###.. #...# #...# #...# #...# #...# ##### ..#.. ..#.. ..#.. .#... .....",
    "#...# #...# ##..# #.... .#... #...# #...# #...# .#.#. #...# ...#. .#... ..#.. ...#. #.#.# .....",
    "#...# #...# #.... .###. .#... #...# #...# #.#.# ..#.. #...# ..#.. ..#.. ..#.. ..#.. ...#. .....",
    "#...# #...# #.... ....# .#..# #..## .#.#. #.#.# .#.#. #...# .#... ..#.. ..#.. ..#.. ..... .....",
    "####. .#### #.... ####. ..##. .##.# ..#.. .#.#. #...# .#### ##### ...#. ..#.. .#... ..... #...#",
    "#.... ....# ..... ..... ..... ..... ..... ..... ..... ....# ..... ..... ..#.. ..... ..... #####",
    "#.... ....# ..... ..... ..... ..... ..... ..... ..... .###. ..... ..... ..... ..... ..... .....",
  /* …     →     Δ     ±     ·     ←     box   */
    "..... ..... ..#.. ..#.. ..... ..... #####",
    "..... ..#.. ..#.. ..#.. ..... ..#.. #...#",
    "..... ...#. .#.#. ##### ..... .#... #...#",
    "..... ##### .#.#. ..#.. ..#.. ##### #...#",
    "..... ...#. #...# ..#.. ..... .#... #...#",
    "..... ..#.. #...# ..... ..... ..#.. #...#",
    "#.#.# ..... ##### ##### ..... ..... #...#",
    "..... ..... ..... ..... ..... ..... #####",
    "..... ..... ..... ..... ..... ..... .....",
};

static const struct {
    uint32_t cp;
    int glyph;
} extras[] = {{0x2423, G_OPEN_BOX}, {0x2026, G_ELLIPSIS}, {0x2192, G_RARROW},
              {0x0394, G_DELTA},    {0x00B1, G_PLUSMINUS}, {0x00B7, G_MIDDOT},
              {0x2190, G_LARROW}};

static int inked(int glyph, int gx, int gy) {
    const char *row = sheet[(glyph / PER_BLOCK) * AL_FONT_GLYPH_H + gy];
    return row[(glyph % PER_BLOCK) * (GW + 1) + gx] == '#';
}

/* Length of the valid UTF-8 sequence at s (1..4) and its code point, or 0
 * if s does not start one (overlong forms and surrogates refused). */
static int utf8_seq(const unsigned char *s, uint32_t *cp) {
    int n;
    uint32_t c, min;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    } else if ((s[0] & 0xE0) == 0xC0) {
        n = 2, c = s[0] & 0x1F, min = 0x80;
    } else if ((s[0] & 0xF0) == 0xE0) {
        n = 3, c = s[0] & 0x0F, min = 0x800;
    } else if ((s[0] & 0xF8) == 0xF0) {
        n = 4, c = s[0] & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return n;
}

/* Glyphs for the text at s[0..]: fills g (up to 4) and returns how many;
 * *adv gets the bytes consumed. */
static int glyphs_at(const unsigned char *s, int *g, int *adv) {
    uint32_t cp;
    int n = utf8_seq(s, &cp);
    if (n == 1 && cp >= 0x20 && cp < 0x7F) {
        *adv = 1;
        g[0] = (int)cp - 0x20;
        return 1;
    }
    if (n > 1) {
        *adv = n;
        g[0] = G_BOX;
        for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++)
            if (extras[i].cp == cp) g[0] = extras[i].glyph;
        return 1;
    }
    /* control byte or invalid UTF-8: "\xNN" */
    static const char hex[] = "0123456789abcdef";
    *adv = 1;
    g[0] = '\\' - 0x20;
    g[1] = 'x' - 0x20;
    g[2] = hex[s[0] >> 4] - 0x20;
    g[3] = hex[s[0] & 15] - 0x20;
    return 4;
}

int al_font_cells(const char *s) {
    int cells = 0, g[4], adv;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += adv)
        cells += glyphs_at(p, g, &adv);
    return cells;
}

int al_font_width(const char *s, int scale) { return al_font_cells(s) * AL_FONT_ADV * scale; }

/* One glyph at pen cell `cell`; up != 0 rotates it (see font.h). */
static void draw_glyph(al_image *im, int x, int y, int glyph, int cell, int total, int scale,
                       int up, uint32_t colour) {
    for (int gy = 0; gy < AL_FONT_GLYPH_H; gy++)
        for (int gx = 0; gx < GW; gx++) {
            if (!inked(glyph, gx, gy)) continue;
            int along = cell * AL_FONT_ADV + gx; /* position along the text */
            if (!up)
                al_image_fill(im, x + along * scale, y + gy * scale, scale, scale, colour);
            else
                al_image_fill(im, x + gy * scale, y + (total * AL_FONT_ADV - 1 - along) * scale,
                              scale, scale, colour);
        }
}

static int draw(al_image *im, int x, int y, const char *s, int scale, int up, uint32_t colour) {
    int total = al_font_cells(s), cell = 0, g[4], adv;
    if (scale < 1) scale = 1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += adv) {
        int n = glyphs_at(p, g, &adv);
        for (int i = 0; i < n; i++) draw_glyph(im, x, y, g[i], cell++, total, scale, up, colour);
    }
    return total * AL_FONT_ADV * scale;
}

int al_font_draw(al_image *im, int x, int y, const char *s, int scale, uint32_t colour) {
    return draw(im, x, y, s, scale, 0, colour);
}

int al_font_draw_up(al_image *im, int x, int y, const char *s, int scale, uint32_t colour) {
    return draw(im, x, y, s, scale, 1, colour);
}

void al_font_fit(const char *s, int max_cells, char *buf, size_t cap) {
    static const char ell[] = "\xe2\x80\xa6"; /* … */
    if (cap == 0) return;
    buf[0] = 0;
    int fits = al_font_cells(s) <= max_cells;
    int budget = fits ? max_cells : max_cells - 1, cells = 0, g[4], adv;
    size_t len = 0, room = fits ? cap - 1 : cap - 1 - (sizeof ell - 1);
    if (budget < 0 || cap <= sizeof ell) return;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += adv) {
        int n = glyphs_at(p, g, &adv);
        if (cells + n > budget || len + (size_t)adv > room) break;
        memcpy(buf + len, p, (size_t)adv);
        len += (size_t)adv;
        cells += n;
    }
    if (!fits) {
        memcpy(buf + len, ell, sizeof ell - 1);
        len += sizeof ell - 1;
    }
    buf[len] = 0;
}
