/* plot_output.c -- a drawn surface as a file's bytes: the PNG's pixels,
 * the PDF's document information, and the SVG with its text as <text>
 * elements, its title and provenance. */
#include "plot_internal.h"

#include <cairo-pdf.h>
#include <string.h>

cairo_status_t buf_write(void *closure, const unsigned char *data, unsigned int n) {
    al_buf *b = closure;
    al_buf_put(b, data, n);
    return al_buf_ok(b) ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_NO_MEMORY;
}

int image_of(cairo_surface_t *sf, al_image *img, al_err *e) {
    int W = cairo_image_surface_get_width(sf), H = cairo_image_surface_get_height(sf);
    int stride = cairo_image_surface_get_stride(sf);
    const unsigned char *d = cairo_image_surface_get_data(sf);
    if (al_image_init(img, W, H, AL_PLOT_BG, e)) return -1;
    for (int y = 0; y < H; y++) {
        const uint32_t *row = (const uint32_t *)(const void *)(d + (size_t)y * stride);
        uint8_t *o = img->px + (size_t)y * W * 3;
        for (int x = 0; x < W; x++) {
            o[3 * x] = (uint8_t)(row[x] >> 16), o[3 * x + 1] = (uint8_t)(row[x] >> 8);
            o[3 * x + 2] = (uint8_t)row[x];
        }
    }
    return 0;
}

static const char *meta_get(const al_png_text *m, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (m[i].key && !strcmp(m[i].key, key)) return m[i].value;
    return NULL;
}

/* Provenance as one line: "key: value; key: value" (Title left out). */
static void meta_line(al_buf *b, const al_png_text *m, int n) {
    for (int i = 0; i < n; i++) {
        if (!m[i].key || !m[i].value || !strcmp(m[i].key, "Title")) continue;
        al_buf_printf(b, "%s%s: %s", b->n ? "; " : "", m[i].key, m[i].value);
    }
}

/* PDF document information: Title, Creator (the software) and Subject
 * (the provenance line), what the PNG's text chunks say. */
void pdf_meta(cairo_surface_t *sf, const al_figure *f, const al_png_text *m, int n) {
    const char *title = meta_get(m, n, "Title");
    if (!title) title = f->title;
    if (title) cairo_pdf_surface_set_metadata(sf, CAIRO_PDF_METADATA_TITLE, title);
    const char *sw = meta_get(m, n, "Software");
    cairo_pdf_surface_set_metadata(sf, CAIRO_PDF_METADATA_CREATOR, sw ? sw : "attnlab");
    al_buf b = AL_BUF_INIT;
    meta_line(&b, m, n);
    if (b.p && al_buf_ok(&b)) cairo_pdf_surface_set_metadata(sf, CAIRO_PDF_METADATA_SUBJECT, b.p);
    al_buf_free(&b);
}

/* s as XML character data. XML 1.0 forbids control characters (but tab,
 * newline, return) and U+FFFE/U+FFFF even as references: those become
 * "\xNN" text and U+FFFD, one character for one, so the file always
 * parses (labels reach here through al_font_display, which has already
 * spelled out control bytes; the provenance in <desc> has not). */
static void xml_text(al_buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char u = (unsigned char)*s;
        if (u == 0xEF && (unsigned char)s[1] == 0xBF && ((unsigned char)s[2] & 0xFE) == 0xBE) {
            al_buf_puts(b, "\xef\xbf\xbd");
            s += 2;
            continue;
        }
        switch (u) {
        case '&': al_buf_puts(b, "&amp;"); break;
        case '<': al_buf_puts(b, "&lt;"); break;
        case '>': al_buf_puts(b, "&gt;"); break;
        case '"': al_buf_puts(b, "&quot;"); break;
        default:
            if (u < 0x20 && u != '\t' && u != '\n' && u != '\r')
                al_buf_printf(b, "\\x%02x", u);
            else
                al_buf_put(b, s, 1);
        }
    }
}

/* cairo's SVG with the recorded text added as <text> elements (on top,
 * in drawing order) and the title and provenance as <title> and <desc>
 * right after the opening <svg> tag. Each <text> has textLength = its
 * cells' width, so whatever monospace font the viewer has, a label
 * covers exactly the width the layout gave it. */
int svg_finish(al_buf *vec, const cv *c, const al_figure *f, const al_png_text *m, int n,
               al_err *e) {
    const char *doc = vec->p, *open = doc ? strstr(doc, "<svg") : NULL;
    const char *open_end = open ? strchr(open, '>') : NULL, *close = NULL;
    for (const char *p = open_end; p && (p = strstr(p, "</svg>")); p++) close = p;
    if (!open_end || !close) return al_errf(e, "cairo wrote no <svg> element");
    al_buf o = AL_BUF_INIT;
    al_buf_put(&o, doc, (size_t)(open_end + 1 - doc));
    const char *title = meta_get(m, n, "Title");
    if (!title) title = f->title;
    if (title) {
        al_buf_puts(&o, "\n<title>");
        xml_text(&o, title);
        al_buf_puts(&o, "</title>");
    }
    al_buf line = AL_BUF_INIT;
    meta_line(&line, m, n);
    if (line.p) {
        al_buf_puts(&o, "\n<desc>");
        xml_text(&o, line.p);
        al_buf_puts(&o, "</desc>");
    }
    int line_ok = al_buf_ok(&line);
    al_buf_free(&line);
    /* cairo names the drawing's group by a process-wide surface counter:
     * renamed, so the same figure is the same file whichever call draws it
     * (nothing refers to it: no "#surface" link in a drawing without images) */
    const char *body = open_end + 1, *grp = strstr(body, "<g id=\"surface");
    if (grp && grp < close && !strstr(body, "#surface")) {
        const char *q = grp + strlen("<g id=\"surface");
        while (*q >= '0' && *q <= '9') q++;
        al_buf_put(&o, body, (size_t)(grp - body));
        al_buf_puts(&o, "<g id=\"figure");
        body = q;
    }
    al_buf_put(&o, body, (size_t)(close - body));
    al_buf_puts(&o, "<g id=\"text\" font-family=\"" FONT_FAMILY
                    ", monospace\" xml:space=\"preserve\">\n");
    for (int i = 0; i < c->nt; i++) {
        const cv_text_rec *t = &c->t[i];
        al_buf_printf(&o,
                      "<text font-size=\"%g\" textLength=\"%d\" "
                      "lengthAdjust=\"spacingAndGlyphs\" fill=\"#%06X\" ",
                      FONT_PX * t->scale, t->cells * AL_FONT_ADV * t->scale, (unsigned)t->colour);
        if (t->up)
            al_buf_printf(&o, "transform=\"translate(%g %g) rotate(-90)\">", t->x, t->y);
        else
            al_buf_printf(&o, "x=\"%g\" y=\"%g\">", t->x, t->y);
        xml_text(&o, t->s);
        al_buf_puts(&o, "</text>\n");
    }
    al_buf_puts(&o, "</g>\n");
    al_buf_puts(&o, close);
    if (!al_buf_ok(&o) || !line_ok) {
        al_buf_free(&o);
        return al_errf(e, "out of memory");
    }
    al_buf_free(vec);
    *vec = o;
    return 0;
}
