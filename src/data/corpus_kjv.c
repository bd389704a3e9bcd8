/* corpus_kjv.c -- the King James Bible as Debian's bible-kjv prints it,
 * into documents by chapter, book or verse (al_kjv_parse, corpus_src.h).
 * bible-kjv-text keeps the text in its own compressed format; the
 * package's reader, `bible`, is the one program that decodes it, so the
 * data command runs it and this file reads what it prints. */
#include "attnlab/corpus_src.h"

#include <string.h>

int al_kjv_unit_parse(const char *s, al_kjv_unit *u, al_err *e) {
    if (s && strcmp(s, "chapter") == 0)
        *u = AL_KJV_CHAPTER;
    else if (s && strcmp(s, "book") == 0)
        *u = AL_KJV_BOOK;
    else if (s && strcmp(s, "verse") == 0)
        *u = AL_KJV_VERSE;
    else
        return al_errf(e, "--unit '%s': must be chapter, book or verse", s ? s : "");
    return 0;
}

static int is_blank(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t') return 0;
    return 1;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* "Song of Solomon 3": at column 0, a letter somewhere, a space, then
 * digits to the end. *name_n gets the book's length (before the space). */
static int heading(const unsigned char *p, size_t n, size_t *name_n) {
    if (n < 3 || p[0] == ' ' || p[0] == '\t' || !is_digit(p[n - 1])) return 0;
    size_t k = n;
    while (k > 0 && is_digit(p[k - 1])) k--;
    if (k < 2 || p[k - 1] != ' ') return 0;
    int letter = 0;
    for (size_t i = 0; i + 1 < k; i++) letter |= (p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'z';
    *name_n = k - 1;
    return letter;
}

/* "  12 text": spaces, digits, one space, text; *num and *text point in p. */
static int verse(const unsigned char *p, size_t n, size_t *num, size_t *num_n, size_t *text) {
    size_t i = 0;
    while (i < n && p[i] == ' ') i++;
    size_t d = i;
    while (i < n && is_digit(p[i])) i++;
    if (i == d || i >= n || p[i] != ' ' || i + 1 >= n) return 0;
    *num = d, *num_n = i - d, *text = i + 1;
    return 1;
}

int al_kjv_parse(const unsigned char *s, size_t n, al_kjv_unit unit, al_docset *out,
                 al_kjv_counts *c, al_err *e) {
    memset(c, 0, sizeof *c);
    const unsigned char *book = NULL;
    size_t book_n = 0;
    int prev_blank = 1, in_verse = 0;
    long line_no = 0;
    for (size_t i = 0; i < n;) {
        const unsigned char *nl = memchr(s + i, '\n', n - i);
        size_t le = nl ? (size_t)(nl - s) : n, ln = le - i;
        const unsigned char *p = s + i;
        i = le + 1;
        line_no++;
        if (ln && p[ln - 1] == '\r') ln--;
        size_t name_n, num, num_n, text;
        if (is_blank(p, ln)) {
            prev_blank = 1;
            continue;
        }
        if (prev_blank && heading(p, ln, &name_n)) {
            int same_book = book && book_n == name_n && memcmp(book, p, name_n) == 0;
            if (!same_book) c->books++;
            c->chapters++;
            if (unit == AL_KJV_CHAPTER || (unit == AL_KJV_BOOK && !same_book)) al_docset_end(out);
            if (unit != AL_KJV_VERSE) {
                if (unit == AL_KJV_BOOK && same_book) al_docset_put(out, "\n\n", 2);
                al_docset_put(out, p, ln);
                al_docset_put(out, "\n", 1);
            }
            book = p, book_n = name_n;
            in_verse = 0;
        } else if (book && verse(p, ln, &num, &num_n, &text)) {
            c->verses++;
            if (unit == AL_KJV_VERSE) {
                al_docset_end(out);
            } else {
                al_docset_put(out, "\n", 1); /* after the heading's "\n": a blank line */
                al_docset_put(out, p + num, num_n);
                al_docset_put(out, " ", 1);
            }
            al_docset_put(out, p + text, ln - text);
            in_verse = 1;
        } else if (in_verse) {
            size_t a = 0;
            while (a < ln && (p[a] == ' ' || p[a] == '\t')) a++;
            al_docset_put(out, " ", 1);
            al_docset_put(out, p + a, ln - a);
        } else {
            return al_errf(e,
                           "line %ld is neither a chapter heading (\"Genesis 1\" after a blank "
                           "line) nor a verse (\"  1 In the beginning ...\"): is this the output "
                           "of `bible`?",
                           line_no);
        }
        prev_blank = 0;
    }
    al_docset_end(out);
    if (c->chapters == 0)
        return al_errf(e, "no chapter heading (\"Genesis 1\") in the text: is it "
                          "the output of `bible`?");
    return 0;
}
