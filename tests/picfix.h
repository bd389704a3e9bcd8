/* picfix.h -- what the picture tests over hand-made database rows share:
 * a model directory of a given shape, SQL text built up and run in one
 * go, `attnlab heatmap` run and decoded, a refusal checked, the plot
 * frame found (static functions: each test file gets its own copy). */
#ifndef ATTNLAB_TEST_PICFIX_H
#define ATTNLAB_TEST_PICFIX_H

#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"
#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/png.h"
#include "attnlab/report.h"
#include "test.h"

#define FRAME 0x808080u /* the frame around a plot area (plot_internal.h) */

/* The first k x k block of colour c in row order (its four corners that
 * colour): 1 with its top-left pixel in *x, *y, or 0 with both -1. */
static inline int find_block(const al_image *im, uint32_t c, int k, int *x, int *y) {
    *x = *y = -1;
    for (int j = 0; j + k <= im->h; j++)
        for (int i = 0; i + k <= im->w; i++)
            if (al_image_get(im, i, j) == c && al_image_get(im, i + k - 1, j + k - 1) == c &&
                al_image_get(im, i + k - 1, j) == c && al_image_get(im, i, j + k - 1) == c) {
                *x = i, *y = j;
                return 1;
            }
    return 0;
}

/* A model directory of L layers x H heads (untrained: the pictures read
 * only its shape and its sha256, so the shape tells models apart). */
static inline void make_model(const char *dir, int L, int H) {
    al_err e;
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = 32, c.n_heads = H, c.d_head = 4, c.n_ctx = 32, c.d_vocab = 64;
    al_model m;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    CHECK_OK(al_ckpt_save(dir, &m, NULL, NULL, NULL, NULL, &e), &e);
    al_model_free(&m);
}

static inline void sqlf(al_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void sqlf(al_buf *b, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    al_buf_puts(b, line);
}

/* Run the statements of b (taken: b is empty after) on database db with
 * the sqlite3 library, as a command writing its rows would. */
static inline void exec_sql(const char *db, al_buf *b) {
    sqlite3 *s3 = NULL;
    char *err = NULL;
    char *sql = al_buf_take(b, NULL);
    CHECK(sql != NULL);
    CHECK(sqlite3_open(db, &s3) == SQLITE_OK);
    CHECKF(sqlite3_exec(s3, sql ? sql : "", NULL, NULL, &err) == SQLITE_OK, "fixture: %s",
           err ? err : "?");
    sqlite3_free(err);
    sqlite3_close(s3);
    free(sql);
}

/* `attnlab heatmap` of model dir over t_path("r.db"); 0 with the decoded
 * PNG (its size the one reported), else the exit status (stderr in
 * t_path("hm.err")). */
static inline int draw(const char *dir, const char *args, const char *name, al_image *im) {
    t_pbuf out = t_pcopy(name);
    int rc = t_sh("%s heatmap --model %s --db %s --out %s %s > %s 2> %s", t_bin(), dir,
                  t_path("r.db"), out.s, args, t_path("hm.out"), t_path("hm.err"));
    if (rc) return rc;
    int w = 0, h = 0;
    t_reported_size(t_path("hm.out"), &w, &h);
    al_err e;
    CHECK_OK(al_png_read(out.s, im, NULL, &e), &e);
    CHECKF(im->w == w && im->h == h, "%s: decoded %dx%d, reported %dx%d", name, im->w, im->h, w, h);
    return 0;
}

/* Exit status 1, one line on stderr holding want, no file. */
static inline void refused(const char *dir, const char *args, const char *want) {
    al_image im;
    int rc = draw(dir, args, "refused.png", &im);
    if (!rc) al_image_free(&im);
    char *err = t_slurp(t_path("hm.err"));
    CHECKF(rc == 1 && err && strstr(err, want) && strchr(err, '\n') == err + strlen(err) - 1,
           "%s: exit %d, stderr [%s], want one line with [%s]", args, rc, err ? err : "", want);
    free(err);
    CHECK(!al_file_exists(t_path("refused.png")));
}

/* The bounding box of the FRAME lines (runs of at least 40 px, across or
 * down): a plot's area. Antialiased text has stray pixels of any grey,
 * FRAME's included, so single pixels do not count. */
static inline void frame_box(const al_image *im, int *x0, int *y0, int *x1, int *y1) {
    *x0 = im->w, *x1 = -1, *y0 = im->h, *y1 = -1;
    for (int y = 0; y < im->h; y++)
        for (int x = 0, run = 0; x <= im->w; x++) {
            if (x < im->w && al_image_get(im, x, y) == FRAME) {
                run++;
                continue;
            }
            if (run >= 40) {
                if (x - run < *x0) *x0 = x - run;
                if (x - 1 > *x1) *x1 = x - 1;
                if (y < *y0) *y0 = y;
                if (y > *y1) *y1 = y;
            }
            run = 0;
        }
}

/* The report of models dirs[0..n-1] over t_path("r.db") drawing only the
 * picture kinds in `pictures`, into t_path("out"); returns index.html
 * (malloc'd) and, when n_pictures is not NULL, the pictures drawn. */
static inline char *report_html(const char *const *dirs, int n, const char *pictures,
                                int *n_pictures) {
    al_report_opts o = al_report_defaults();
    o.db = t_path("r.db");
    for (int i = 0; i < n; i++) o.models[i] = dirs[i];
    o.n_models = n;
    o.out_dir = t_path("out");
    o.pictures = pictures;
    o.repeat = 0;
    o.threads = 2;
    al_report_result r;
    al_err e;
    CHECK_OK(al_report_write(&o, &r, &e), &e);
    CHECK(r.n_failed == 0);
    if (n_pictures) *n_pictures = r.n_pictures;
    return t_slurp(r.index_path);
}

/* The page from "<h2>Model " + label on, up to the end. */
static inline const char *model_part(const char *html, const char *label) {
    char key[256];
    snprintf(key, sizeof key, "<h2>Model %s", label);
    return html ? strstr(html, key) : NULL;
}

#endif
