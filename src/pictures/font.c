/* font.c -- text metrics of picture text (see font.h): cells per
 * character, escapes for bytes no font can show, cutting to a width.
 * The glyphs themselves come from a real font through cairo (plot_canvas.c). */
#include "attnlab/font.h"

#include <string.h>

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

/* Cells of the character at s (1, or 4 for a "\xNN" escape); *adv gets
 * the bytes consumed. */
static int cells_at(const unsigned char *s, int *adv) {
    uint32_t cp;
    int n = utf8_seq(s, &cp);
    if (n >= 1 && cp >= 0x20 && cp != 0x7F) {
        *adv = n;
        return 1;
    }
    *adv = 1; /* control byte or invalid UTF-8: "\xNN" */
    return 4;
}

int al_font_cells(const char *s) {
    int cells = 0, adv;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += adv)
        cells += cells_at(p, &adv);
    return cells;
}

int al_font_width(const char *s, int scale) { return al_font_cells(s) * AL_FONT_ADV * scale; }

/* Display text of s: what al_font_cells counts, as UTF-8 a real font can
 * draw (escapes spelled out). Returns the bytes needed (excluding the
 * NUL); writes at most cap - 1 and always terminates. */
size_t al_font_display(const char *s, char *buf, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t len = 0;
    uint32_t cp;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        char tmp[4];
        int n = utf8_seq(p, &cp), k;
        if (n == 0 || cp < 0x20 || cp == 0x7F) {
            tmp[0] = '\\', tmp[1] = 'x', tmp[2] = hex[p[0] >> 4], tmp[3] = hex[p[0] & 15];
            k = 4, n = 1;
        } else {
            memcpy(tmp, p, (size_t)n);
            k = n;
        }
        for (int i = 0; i < k; i++, len++)
            if (cap && len < cap - 1) buf[len] = tmp[i];
        p += n;
    }
    if (cap) buf[len < cap ? len : cap - 1] = 0;
    return len;
}

void al_font_fit(const char *s, int max_cells, char *buf, size_t cap) {
    static const char ell[] = "\xe2\x80\xa6"; /* … */
    if (cap == 0) return;
    buf[0] = 0;
    int fits = al_font_cells(s) <= max_cells;
    int budget = fits ? max_cells : max_cells - 1, cells = 0, adv;
    size_t len = 0, room = fits ? cap - 1 : cap - 1 - (sizeof ell - 1);
    if (budget < 0 || cap <= sizeof ell) return;
    for (const unsigned char *p = (const unsigned char *)s; *p; p += adv) {
        int n = cells_at(p, &adv);
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
