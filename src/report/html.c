/* html.c -- the report's HTML pieces: escaping of every string that
 * came from the database or the user, tables of query rows, the page's
 * head and CSS (see report_internal.h). */
#include "report_internal.h"

#include <stdio.h>
#include <string.h>

#include "attnlab/thresholds.h"
#include "attnlab/viewer.h"

/* ------------------------------------------------------- text hygiene */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid
 * (overlong forms, surrogates and values above U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k;
    unsigned min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0)
        k = 2, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        k = 3, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        k = 4, min = 0x10000;
    else
        return 0;
    if (k > n) return 0;
    unsigned v = c & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    return k;
}

static void sb_esc_n(al_buf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        const char *ent = c == '&'    ? "&amp;"
                          : c == '<'  ? "&lt;"
                          : c == '>'  ? "&gt;"
                          : c == '"'  ? "&quot;"
                          : c == '\'' ? "&#39;"
                                      : NULL;
        if (ent) {
            al_buf_puts(b, ent);
            i++;
            continue;
        }
        size_t k = utf8_len(u + i, n - i);
        if (k == 0 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
            al_buf_printf(b, "\\x%02x", c);
            i++;
            continue;
        }
        al_buf_put(b, s + i, k);
        i += k;
    }
}

void rep_esc(al_buf *b, const char *s) {
    if (s) sb_esc_n(b, s, strlen(s));
}

char *al_html_escape(const char *s, size_t n) {
    al_buf b = AL_BUF_INIT;
    sb_esc_n(&b, s, n);
    return al_buf_take(&b, NULL);
}

char *al_utf8_sanitize(const char *s, size_t n) {
    al_buf b = AL_BUF_INIT;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_len(u + i, n - i);
        if (k == 0 || u[i] == 0) {
            al_buf_puts(&b, "\xef\xbf\xbd");
            i++;
        } else {
            al_buf_put(&b, s + i, k);
            i += k;
        }
    }
    return al_buf_take(&b, NULL);
}

/* ------------------------------------------------------------ tables */

/* Cell formats of rep_table, one character per column:
 *   s text   i integer   0/2/3/4 decimals   + signed 4 decimals   g %.4g
 *   I / C / A: 3 decimals, 3 decimals, signed 4 decimals, highlighted
 *   above the induction-or-previous-token / copying_eigen / ablation
 *   thresholds. */
static void cell(al_buf *h, const al_rows *q, int r, int c, char f) {
    const char *t = al_rows_t(q, r, c);
    double v = al_rows_x(q, r, c);
    if (!t) {
        al_buf_puts(h, "<td class=na>&ndash;</td>");
        return;
    }
    if (f == 's') {
        al_buf_puts(h, "<td class=t>");
        rep_esc(h, t);
        al_buf_puts(h, "</td>");
        return;
    }
    int hi = (f == 'I' && v > AL_TH_INDUCTION) || (f == 'C' && v > AL_TH_COPY_EIGEN) ||
             (f == 'A' && v > AL_TH_COPY_ABLATION);
    al_buf_puts(h, hi ? "<td class=hi>" : "<td>");
    switch (f) {
    case 'i':
    case '0': al_buf_printf(h, "%.0f", v); break;
    case '2': al_buf_printf(h, "%.2f", v); break;
    case '4': al_buf_printf(h, "%.4f", v); break;
    case '+':
    case 'A': al_buf_printf(h, "%+.4f", v); break;
    case 'g': al_buf_printf(h, "%.4g", v); break;
    default: al_buf_printf(h, "%.3f", v); break;
    }
    al_buf_puts(h, "</td>");
}

void rep_table(rep *R, const al_rows *q, const char *const *heads, const char *fmt) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<div class=scroll><table><thead><tr>");
    for (int c = 0; c < q->nc && heads[c]; c++) {
        al_buf_puts(h, "<th>");
        rep_esc(h, heads[c]);
        al_buf_puts(h, "</th>");
    }
    al_buf_puts(h, "</tr></thead><tbody>\n");
    for (int r = 0; r < q->nr; r++) {
        al_buf_puts(h, "<tr>");
        for (int c = 0; c < q->nc && heads[c]; c++) cell(h, q, r, c, fmt[c] ? fmt[c] : 's');
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table></div>\n");
}

int rep_rows_table(rep *R, int rc, al_rows *q, const char *const *heads, const char *fmt,
                   const char *none) {
    if (rc) return -1;
    if (q->nr)
        rep_table(R, q, heads, fmt);
    else if (none)
        al_buf_printf(&R->h, "<p class=none>%s</p>\n", none);
    int n = q->nr;
    al_rows_free(q);
    return n;
}

void rep_open(rep *R, const char *title) {
    al_buf_puts(&R->h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    if (R->o->interactive) al_viewer_head(&R->h); /* the CSP before anything it governs */
    al_buf_puts(
        &R->h, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    rep_esc(&R->h, title);
    al_buf_puts(
        &R->h,
        "</title>\n<style>\n"
        "body{font:15px/1.45 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1a1a1a;"
        "max-width:1200px;margin:0 auto;padding:1em 2em 4em;background:#fff}\n"
        "h1{font-size:1.8em;margin-bottom:.2em}h2{border-bottom:2px solid #1f77b4;padding-bottom:.2em;"
        "margin-top:2.5em}h3{margin-top:1.8em}\n"
        "table{border-collapse:collapse;margin:.6em 0 1em;font-size:.9em}"
        "th,td{border:1px solid #ccc;padding:.2em .6em;text-align:right}"
        "th{background:#f0f3f7}td.t{text-align:left;font-family:monospace;white-space:pre}"
        "td.na{color:#999;text-align:center}td.hi{background:#fde6b8;font-weight:bold}\n"
        "table.card td:first-child{text-align:left;background:#f7f7f7}"
        "table.card td{text-align:left}\n"
        "figure{margin:1em 0 2em;display:inline-block;max-width:100%;vertical-align:top}"
        "figure img{max-width:100%;height:auto;border:1px solid #ddd}"
        "figcaption{font-size:.85em;color:#444;max-width:60em}\n"
        ".meta{color:#666;font-size:.9em}.none{color:#888;font-style:italic}"
        ".warn{color:#a00}.answer{background:#eef6ee;border-left:4px solid #2ca02c;padding:.6em 1em}\n"
        "div.scroll{overflow-x:auto;max-width:100%}code{background:#f4f4f4;padding:0 .2em}\n"
        "</style></head><body>\n");
}

void rep_card_row(al_buf *h, const char *k, const char *v) {
    al_buf_puts(h, "<tr><td>");
    rep_esc(h, k);
    al_buf_puts(h, "</td><td>");
    rep_esc(h, v);
    al_buf_puts(h, "</td></tr>\n");
}
