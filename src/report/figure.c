/* figure.c -- the report's pictures: drawn by pictures.h into the output
 * folder, then shown on the page as <figure> by bare file name and
 * remembered for the notebook (see report_internal.h). */
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/plot.h"

int rep_want_pic(const rep *R, const char *kind) {
    const char *l = R->o->pictures;
    if (!l) return 1;
    size_t k = strlen(kind);
    for (const char *p = l; *p;) {
        size_t n = strcspn(p, ",");
        if (n == k && strncmp(p, kind, k) == 0) return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

static int add_pic_ref(rep *R, const char *file, const char *caption) {
    if (R->n_pics == R->cap_pics) {
        int cap = R->cap_pics ? 2 * R->cap_pics : 32;
        pic_ref *p = realloc(R->pics, sizeof *p * (size_t)cap);
        if (!p) return -1;
        R->pics = p;
        R->cap_pics = cap;
    }
    pic_ref *p = &R->pics[R->n_pics++];
    snprintf(p->file, sizeof p->file, "%s", file);
    snprintf(p->caption, sizeof p->caption, "%s", caption);
    return 0;
}

/* "NAME.svg" for "NAME.png" into buf; 0 if file does not end in .png. */
int rep_svg_name(const char *file, char *buf, size_t cap) {
    size_t n = strlen(file);
    if (n < 5 || strcmp(file + n - 4, ".png") != 0 || n >= cap) return 0;
    memcpy(buf, file, n - 4);
    memcpy(buf + n - 4, ".svg", 5);
    return 1;
}

/* Draw one picture of model M (NULL: a picture of the whole database)
 * into the folder and put it on the page. Failure is a warning (stderr
 * and page), counted in R->n_failed. */
void rep_picture(rep *R, const rmodel *M, al_pic_opts *po, const char *file, const char *caption) {
    char path[AL_PATH_MAX + 320];
    al_err e;
    int w = 0, h = 0;
    po->db = R->o->db;
    snprintf(path, sizeof path, "%s/%s", R->dir, file);
    if (al_picture(M ? M->dir : NULL, po, path, &w, &h, &e) != 0) {
        fprintf(stderr, "attnlab: warning: picture %s not drawn: %s\n", file, e.msg);
        al_buf_puts(&R->h, "<p class=warn>Picture ");
        rep_esc(&R->h, file);
        al_buf_puts(&R->h, " could not be drawn: ");
        rep_esc(&R->h, e.msg);
        al_buf_puts(&R->h, "</p>\n");
        R->n_failed++;
        return;
    }
    if (add_pic_ref(R, file, caption)) R->h.oom = 1;
    /* --figures svg: the same picture as SVG beside the PNG, shown on the
     * page (the notebook keeps the PNG); failing that, the PNG is shown */
    char svg[256];
    const char *shown = file;
    if (R->o->figures == AL_FIG_SVG && rep_svg_name(file, svg, sizeof svg)) {
        po->format = AL_FIG_SVG;
        snprintf(path, sizeof path, "%s/%s", R->dir, svg);
        if (al_picture(M ? M->dir : NULL, po, path, NULL, NULL, &e) == 0)
            shown = svg;
        else
            fprintf(stderr, "attnlab: warning: picture %s not drawn: %s\n", svg, e.msg);
        po->format = AL_FIG_PNG;
    }
    al_buf_puts(&R->h, "<figure><img src=\"");
    rep_esc(&R->h, shown);
    al_buf_printf(&R->h, "\" width=\"%d\" height=\"%d\" alt=\"", w, h);
    rep_esc(&R->h, caption);
    al_buf_puts(&R->h, "\"><figcaption>");
    rep_esc(&R->h, caption);
    al_buf_puts(&R->h, "</figcaption></figure>\n");
}

/* Picture `kind` of one run (po->run_id) as "<model>-<kind>-<slug>.png"
 * when the report draws that kind. */
void rep_run_picture(rep *R, const rmodel *M, al_pic_opts *po, const char *kind, const char *slug,
                     const char *caption) {
    if (!rep_want_pic(R, kind)) return;
    char file[256];
    po->what = kind;
    snprintf(file, sizeof file, "%s-%s-%s.png", M->slug, kind, slug);
    rep_picture(R, M, po, file, caption);
}

void rep_slug(const char *s, char *out, size_t cap) {
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) {
        char c = s[i];
        out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                         c == '-' || c == '_' || c == '.'
                     ? c
                     : '_';
    }
    out[i] = 0;
    if (!i || out[0] == '.') snprintf(out, cap, "model");
}
