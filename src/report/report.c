/* report.c -- index.html and report.ipynb from the results database (see
 * report.h).
 *
 * The page is built in memory (an al_buf, which remembers running out of
 * memory instead of failing at every call) and written with one atomic
 * rename at the end. All numbers come from SQL over the store;
 * every string that came from the database or the user goes through
 * al_html_escape. Pictures are drawn by pictures.c into the same folder,
 * so the page refers to them by bare file name. */
#define _XOPEN_SOURCE 700 /* realpath, gmtime_r */
#include "attnlab/report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attnlab/buf.h"
#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/pictures.h"
#include "attnlab/plot.h"
#include "attnlab/stats.h"
#include "attnlab/store.h"
#include "attnlab/thresholds.h"
#include "attnlab/viewer.h"


al_report_opts al_report_defaults(void) {
    al_report_opts o;
    memset(&o, 0, sizeof o);
    o.repeat = 20;
    o.top_n = 30;
    return o;
}

/* ------------------------------------------------------- text hygiene */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid
 * (overlong forms, surrogates and values above U+10FFFF are invalid). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k;
    unsigned min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) k = 2, min = 0x80;
    else if ((c & 0xF0) == 0xE0) k = 3, min = 0x800;
    else if ((c & 0xF8) == 0xF0) k = 4, min = 0x10000;
    else return 0;
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
        const char *ent = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;"
                          : c == '"' ? "&quot;" : c == '\'' ? "&#39;" : NULL;
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

static void sb_esc(al_buf *b, const char *s) {
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

/* ------------------------------------------------------------ numbers */

/* ------------------------------------------------------------ queries */

/* All rows of a query, copied: text (NULL for SQL NULL) and numbers. */
typedef struct qres {
    int nr, nc, cap;
    char **t;
    double *x;
} qres;

static int q_collect(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    qres *q = ctx;
    q->nc = nc;
    if (q->nr == q->cap) {
        int cap = q->cap ? 2 * q->cap : 16;
        char **nt = realloc(q->t, sizeof(char *) * (size_t)cap * (size_t)nc);
        if (!nt) return al_errf(e, "out of memory");
        q->t = nt;
        double *nx = realloc(q->x, sizeof(double) * (size_t)cap * (size_t)nc);
        if (!nx) return al_errf(e, "out of memory");
        q->x = nx;
        q->cap = cap;
    }
    for (int c = 0; c < nc; c++) {
        size_t k = (size_t)q->nr * nc + c;
        q->t[k] = t[c] ? strdup(t[c]) : NULL;
        if (t[c] && !q->t[k]) return al_errf(e, "out of memory");
        q->x[k] = x[c];
    }
    q->nr++;
    return 0;
}

static void q_free(qres *q) {
    for (size_t i = 0; q->t && i < (size_t)q->nr * q->nc; i++) free(q->t[i]);
    free(q->t);
    free(q->x);
    memset(q, 0, sizeof *q);
}

static const char *qt(const qres *q, int r, int c) { return q->t[(size_t)r * q->nc + c]; }
static double qx(const qres *q, int r, int c) { return q->x[(size_t)r * q->nc + c]; }

/* ------------------------------------------------------------ the page */

typedef struct pic_ref {
    char file[256];
    char caption[512];
} pic_ref;

typedef struct rmodel {
    const char *dir;
    char label[128], slug[128];
    char sha[65], mid[32]; /* mid: model_id as text ("0" if not in the db) */
    al_config cfg;
    int in_db;
} rmodel;

typedef struct rep {
    const al_report_opts *o;
    al_store *st;
    al_buf h;
    rmodel m[AL_REPORT_MAX_MODELS];
    pic_ref *pics;
    int n_pics, cap_pics, n_failed, n_removed;
} rep;

/* All rows of sql with parameters ?1..?n into q (freed on failure). */
static int q_runv(rep *R, qres *q, const char *sql, const char *const *params, int n, al_err *e) {
    memset(q, 0, sizeof *q);
    if (al_store_query(R->st, sql, params, n, q_collect, q, e) == 0) return 0;
    q_free(q);
    return -1;
}

static int q_run(rep *R, qres *q, const char *sql, const char *p1, const char *p2, al_err *e) {
    const char *params[2] = {p1, p2};
    return q_runv(R, q, sql, params, 2, e);
}

/* One number (NaN if no row or NULL). */
static int q_num(rep *R, const char *sql, const char *p1, const char *p2, double *out, al_err *e) {
    qres q;
    if (q_run(R, &q, sql, p1, p2, e)) return -1;
    *out = q.nr && q.nc ? qx(&q, 0, 0) : NAN;
    q_free(&q);
    return 0;
}

/* Cell formats of html_table, one character per column:
 *   s text   i integer   0/2/3/4 decimals   + signed 4 decimals   g %.4g
 *   I / C / A: 3 decimals, 3 decimals, signed 4 decimals, highlighted
 *   above the induction-or-previous-token / copying_eigen / ablation
 *   thresholds. */
static void cell(al_buf *h, const qres *q, int r, int c, char f) {
    const char *t = qt(q, r, c);
    double v = qx(q, r, c);
    if (!t) {
        al_buf_puts(h, "<td class=na>&ndash;</td>");
        return;
    }
    if (f == 's') {
        al_buf_puts(h, "<td class=t>");
        sb_esc(h, t);
        al_buf_puts(h, "</td>");
        return;
    }
    int hi = (f == 'I' && v > AL_TH_INDUCTION) || (f == 'C' && v > AL_TH_COPY_EIGEN) ||
             (f == 'A' && v > AL_TH_COPY_ABLATION);
    al_buf_puts(h, hi ? "<td class=hi>" : "<td>");
    switch (f) {
    case 'i': case '0': al_buf_printf(h, "%.0f", v); break;
    case '2': al_buf_printf(h, "%.2f", v); break;
    case '4': al_buf_printf(h, "%.4f", v); break;
    case '+': case 'A': al_buf_printf(h, "%+.4f", v); break;
    case 'g': al_buf_printf(h, "%.4g", v); break;
    default: al_buf_printf(h, "%.3f", v); break;
    }
    al_buf_puts(h, "</td>");
}

static void html_table(rep *R, const qres *q, const char *const *heads, const char *fmt) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<div class=scroll><table><thead><tr>");
    for (int c = 0; c < q->nc && heads[c]; c++) {
        al_buf_puts(h, "<th>");
        sb_esc(h, heads[c]);
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

/* Query and table in one; returns rows shown (or -1). */
static int sql_table(rep *R, const char *sql, const char *p1, const char *p2,
                     const char *const *heads, const char *fmt, const char *none, al_err *e) {
    qres q;
    if (q_run(R, &q, sql, p1, p2, e)) return -1;
    if (q.nr) html_table(R, &q, heads, fmt);
    else if (none) al_buf_printf(&R->h, "<p class=none>%s</p>\n", none);
    int n = q.nr;
    q_free(&q);
    return n;
}

static void h_open(rep *R, const char *title) {
    al_buf_puts(&R->h, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    if (R->o->interactive) al_viewer_head(&R->h); /* the CSP before anything it governs */
    al_buf_puts(&R->h, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    sb_esc(&R->h, title);
    al_buf_puts(&R->h,
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

/* ------------------------------------------------------------ pictures */

static int want_pic(const rep *R, const char *kind) {
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
static int svg_name(const char *file, char *buf, size_t cap) {
    size_t n = strlen(file);
    if (n < 5 || strcmp(file + n - 4, ".png") != 0 || n >= cap) return 0;
    memcpy(buf, file, n - 4);
    memcpy(buf + n - 4, ".svg", 5);
    return 1;
}

/* Draw one picture of model M (NULL: a picture of the whole database)
 * into the folder and put it on the page. Failure is a warning (stderr
 * and page), counted in R->n_failed. */
static void picture(rep *R, const rmodel *M, al_pic_opts *po, const char *file,
                    const char *caption) {
    char path[AL_PATH_MAX + 320];
    al_err e;
    int w = 0, h = 0;
    po->db = R->o->db;
    snprintf(path, sizeof path, "%s/%s", R->o->out_dir, file);
    if (al_picture(M ? M->dir : NULL, po, path, &w, &h, &e) != 0) {
        fprintf(stderr, "attnlab: warning: picture %s not drawn: %s\n", file, e.msg);
        al_buf_puts(&R->h, "<p class=warn>Picture ");
        sb_esc(&R->h, file);
        al_buf_puts(&R->h, " could not be drawn: ");
        sb_esc(&R->h, e.msg);
        al_buf_puts(&R->h, "</p>\n");
        R->n_failed++;
        return;
    }
    if (add_pic_ref(R, file, caption)) R->h.oom = 1;
    /* --figures svg: the same picture as SVG beside the PNG, shown on the
     * page (the notebook keeps the PNG); failing that, the PNG is shown */
    char svg[256];
    const char *shown = file;
    if (R->o->figures == AL_FIG_SVG && svg_name(file, svg, sizeof svg)) {
        po->format = AL_FIG_SVG;
        snprintf(path, sizeof path, "%s/%s", R->o->out_dir, svg);
        if (al_picture(M ? M->dir : NULL, po, path, NULL, NULL, &e) == 0) shown = svg;
        else fprintf(stderr, "attnlab: warning: picture %s not drawn: %s\n", svg, e.msg);
        po->format = AL_FIG_PNG;
    }
    al_buf_puts(&R->h, "<figure><img src=\"");
    sb_esc(&R->h, shown);
    al_buf_printf(&R->h, "\" width=\"%d\" height=\"%d\" alt=\"", w, h);
    sb_esc(&R->h, caption);
    al_buf_puts(&R->h, "\"><figcaption>");
    sb_esc(&R->h, caption);
    al_buf_puts(&R->h, "</figcaption></figure>\n");
}

/* Picture `kind` of one run (po->run_id) as "<model>-<kind>-<slug>.png"
 * when the report draws that kind. */
static void run_picture(rep *R, const rmodel *M, al_pic_opts *po, const char *kind,
                        const char *slug, const char *caption) {
    if (!want_pic(R, kind)) return;
    char file[256];
    po->what = kind;
    snprintf(file, sizeof file, "%s-%s-%s.png", M->slug, kind, slug);
    picture(R, M, po, file, caption);
}

/* "l.h" of the head with the largest value of expr (over heads where it
 * is not NULL); 0 if none. */
static int best_head(rep *R, const rmodel *M, const char *expr, int *l, int *h, al_err *e) {
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT layer, head FROM head_summary WHERE model_id = ?1 AND (%s) "
             "IS NOT NULL ORDER BY (%s) DESC, layer, head LIMIT 1", expr, expr);
    qres q;
    if (q_run(R, &q, sql, M->mid, NULL, e)) return -1;
    int found = q.nr > 0;
    if (found) *l = (int)qx(&q, 0, 0), *h = (int)qx(&q, 0, 1);
    q_free(&q);
    return found;
}

static int count_rows(rep *R, const rmodel *M, const char *table, double *n, al_err *e) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s x JOIN runs r ON r.run_id = x.run_id "
             "WHERE r.model_id = ?1 AND r.status = 'done'", table);
    return q_num(R, sql, M->mid, NULL, n, e);
}

/* ------------------------------------------------------------ sections */

static void card_row(al_buf *h, const char *k, const char *v) {
    al_buf_puts(h, "<tr><td>");
    sb_esc(h, k);
    al_buf_puts(h, "</td><td>");
    sb_esc(h, v);
    al_buf_puts(h, "</td></tr>\n");
}

/* Training options from the checkpoint's state.json; none (no row) for
 * an inference-only checkpoint or an unreadable state. */
static void train_opts_rows(al_buf *h, const rmodel *M) {
    al_train_state st;
    if (al_ckpt_read_state(M->dir, &st, NULL) != 0) return;
    if (st.train_json) {
        cJSON *o = cJSON_Parse(st.train_json);
        static const char *const keys[] = {"steps", "batch", "seq_len", "lr", "warmup",
                                           "weight_decay", "seed", "probe_tokens", NULL};
        char v[1024] = "", one[128];
        for (int i = 0; o && keys[i]; i++) {
            const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
            if (cJSON_IsNumber(j)) snprintf(one, sizeof one, "%s%s %g", v[0] ? ", " : "", keys[i], j->valuedouble);
            /* the probe over every id is the default; say only when not */
            else if (cJSON_IsString(j) && strcmp(j->valuestring, "all") != 0)
                snprintf(one, sizeof one, "%s%s %.60s", v[0] ? ", " : "", keys[i], j->valuestring);
            else continue;
            strncat(v, one, sizeof v - strlen(v) - 1);
        }
        if (v[0]) card_row(h, "training options", v);
        cJSON_Delete(o);
    }
    al_state_free(&st);
}

static int sec_card(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    char v[512];
    al_buf_puts(h, "<h3>Model card</h3>\n<table class=card>\n");
    card_row(h, "directory", M->dir);
    const al_config *c = &M->cfg;
    snprintf(v, sizeof v, "%d layer%s, d_model %d, %d heads x d_head %d, n_ctx %d, d_vocab %d",
             c->n_layers, c->n_layers == 1 ? "" : "s", c->d_model, c->n_heads, c->d_head, c->n_ctx,
             c->d_vocab);
    card_row(h, "architecture", v);
    card_row(h, "embeddings", c->tied_embeddings ? "tied (W_U = W_E^T)" : "untied");
    card_row(h, "positions", c->pos_type == AL_POS_SHORTFORMER
                                 ? "shortformer (W_pos added to every head's query and key "
                                   "inputs, not to the residual stream)"
                                 : "standard (W_pos added to the residual stream)");
    qres q;
    if (q_run(R, &q, "SELECT n_params, trained_tokens, train_steps, final_train_loss, "
              "final_val_loss, sha256, seed FROM models WHERE model_id = ?1", M->mid, NULL, e))
        return -1;
    if (q.nr) {
        snprintf(v, sizeof v, "%.0f", qx(&q, 0, 0));
        card_row(h, "parameters", v);
        snprintf(v, sizeof v, isnan(qx(&q, 0, 1)) ? "unknown" : "%.0f (%.2f M)", qx(&q, 0, 1),
                 qx(&q, 0, 1) / 1e6);
        card_row(h, "trained tokens", v);
        snprintf(v, sizeof v, isnan(qx(&q, 0, 2)) ? "unknown" : "%.0f", qx(&q, 0, 2));
        card_row(h, "training steps", v);
        snprintf(v, sizeof v, "train %.4f, validation %.4f", qx(&q, 0, 3), qx(&q, 0, 4));
        card_row(h, "final loss (nats/token)", v);
        card_row(h, "sha256 of model.safetensors", qt(&q, 0, 5) ? qt(&q, 0, 5) : "");
        card_row(h, "seed", qt(&q, 0, 6) ? qt(&q, 0, 6) : "");
    }
    q_free(&q);
    train_opts_rows(h, M);
    al_buf_puts(h, "</table>\n");
    return 0;
}

static const char *LATEST_TRAIN =
    "(SELECT max(run_id) FROM runs WHERE kind = 'train' AND model_id = ?1)";

static int sec_training(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT t.step, t.tokens, t.train_loss, t.val_loss, t.icl_gain, t.seconds, "
             "(SELECT max(value) FROM train_head_scores s WHERE s.run_id = t.run_id AND s.step = t.step "
             " AND s.metric = 'induction') FROM train_log t WHERE t.run_id = %s ORDER BY t.step",
             LATEST_TRAIN);
    qres q;
    if (q_run(R, &q, sql, M->mid, NULL, e)) return -1;
    al_buf_puts(h, "<h3>Training</h3>\n");
    if (!q.nr) {
        al_buf_puts(h, "<p class=none>No training log in the database (train with --db).</p>\n");
        q_free(&q);
        return 0;
    }
    /* at most 12 rows: evenly spaced, always the first and the last */
    qres s = {0};
    int keep = q.nr < 12 ? q.nr : 12;
    s.nc = q.nc;
    s.nr = keep;
    s.t = malloc(sizeof(char *) * (size_t)keep * q.nc);
    s.x = malloc(sizeof(double) * (size_t)keep * q.nc);
    if (!s.t || !s.x) {
        free(s.t);
        free(s.x);
        q_free(&q);
        return al_errf(e, "out of memory");
    }
    for (int i = 0; i < keep; i++) {
        int r = keep == 1 ? 0 : (int)((long)i * (q.nr - 1) / (keep - 1));
        for (int c = 0; c < q.nc; c++) {
            s.t[(size_t)i * q.nc + c] = (char *)qt(&q, r, c);
            s.x[(size_t)i * q.nc + c] = qx(&q, r, c);
        }
    }
    static const char *const heads[] = {"step", "tokens", "train loss", "val loss", "icl_gain",
                                        "seconds", "best induction score", NULL};
    html_table(R, &s, heads, "ii44+iI");
    free(s.t);
    free(s.x);
    q_free(&q);
    if (want_pic(R, "training")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "training";
        char file[256];
        snprintf(file, sizeof file, "%s-training.png", M->slug);
        picture(R, M, &po, file, "Training: train and validation loss, and every head's induction "
                                  "score on the random-token probe, over steps.");
    }
    return 0;
}

static int sec_heads(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Heads at a glance</h3>\n<p>Latest value of each score per head (view "
               "<code>head_summary</code>). Highlighted: induction or prev_token &gt; "
               AL_TH_STR(AL_TH_INDUCTION) ", copying_eigen or copying_top1 &gt; "
               AL_TH_STR(AL_TH_COPY_EIGEN) ", copying_ablation (and its excess over the "
               "other positions) &gt; " AL_TH_STR(AL_TH_COPY_ABLATION) " nats.</p>\n");
    static const char *const heads[] = {"head", "induction", "prev_token", "duplicate_token",
                                        "copying_eigen", "copying_top1", "copying_ablation",
                                        "copying_ablation_excess", "gradient_importance", "qk_rank", "ov_rank", "qk_eff_rank",
                                        "ov_eff_rank", "pos_prev_token", NULL};
    return sql_table(R, "SELECT name, induction, prev_token, duplicate_token, copying_eigen, "
                     "copying_top1, copying_ablation, copying_ablation_excess, gradient_importance, "
                     "qk_rank, ov_rank, "
                     "qk_effective_rank, ov_effective_rank, pos_prev_token FROM head_summary "
                     "WHERE model_id = ?1 ORDER BY layer, head",
                     M->mid, NULL, heads, "sIIICCAA3ii223",
                     "No head scores yet (run attnlab circuits and attnlab scores).", e) < 0 ? -1 : 0;
}

/* "0.3 (0.812), 1.4 (0.455)" of a query's (name, value) rows. */
static int name_list(rep *R, const rmodel *M, const char *sql, const char *what, al_err *e) {
    qres q;
    if (q_run(R, &q, sql, M->mid, NULL, e)) return -1;
    al_buf *h = &R->h;
    al_buf_printf(h, "<li><b>%s</b>: ", what);
    if (!q.nr) al_buf_puts(h, "none");
    for (int r = 0; r < q.nr; r++) {
        al_buf_printf(h, "%s", r ? ", " : "");
        sb_esc(h, qt(&q, r, 0));
        al_buf_printf(h, " (%.3f)", qx(&q, r, 1));
    }
    al_buf_puts(h, "</li>\n");
    q_free(&q);
    return 0;
}

static int sec_kinds(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Induction, previous-token and copying heads</h3>\n<ul>\n");
    if (name_list(R, M, "SELECT name, induction FROM head_summary WHERE model_id = ?1 AND "
                  "induction > " AL_TH_STR(AL_TH_INDUCTION) " ORDER BY induction DESC",
                  "induction heads (induction &gt; " AL_TH_STR(AL_TH_INDUCTION) ")", e) ||
        name_list(R, M, "SELECT name, prev_token FROM head_summary WHERE model_id = ?1 AND "
                  "prev_token > " AL_TH_STR(AL_TH_PREV_TOKEN) " ORDER BY prev_token DESC",
                  "previous-token heads (prev_token &gt; " AL_TH_STR(AL_TH_PREV_TOKEN) ")", e) ||
        name_list(R, M, "SELECT name, copying_ablation FROM head_summary WHERE model_id = ?1 AND "
                  "copying_ablation > " AL_TH_STR(AL_TH_COPY_ABLATION) " ORDER BY copying_ablation DESC",
                  "copying heads by ablation (copying_ablation &gt; " AL_TH_STR(AL_TH_COPY_ABLATION)
                  " nats)", e) ||
        name_list(R, M, "SELECT name, copying_eigen FROM head_summary WHERE model_id = ?1 AND "
                  "copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) " ORDER BY copying_eigen DESC",
                  "copying heads by eigenvalues (copying_eigen &gt; " AL_TH_STR(AL_TH_COPY_EIGEN) ")", e))
        return -1;
    al_buf_puts(h, "</ul>\n");
    static const char *const heads[] = {"metric", "value", NULL};
    return sql_table(R, "SELECT metric, value FROM model_scores WHERE run_id = (SELECT run_id "
                     "FROM latest_run WHERE model_id = ?1 AND kind = 'scores') ORDER BY metric",
                     M->mid, NULL, heads, "s4", NULL, e) < 0 ? -1 : 0;
}

/* Agreement of the weight-based and an ablation-based copying score:
 * copying_ablation (docs/design.md §5), or copying_ablation_excess, which does not
 * count a head's general usefulness (any head that lowers the loss
 * everywhere also lowers it at copy positions) as copying. */
static const char *const ABL_COL[2] = {"copying_ablation", "copying_ablation_excess"};

typedef struct agree {
    int n, agree, abl_copy, abl_copy_neg;
    double rho;
    const char *col;
    char neg[512];
} agree;

static int copy_agreement(rep *R, const rmodel *M, const char *col, agree *a, al_err *e) {
    memset(a, 0, sizeof *a);
    a->rho = NAN;
    a->col = col;
    qres q;
    char sql[300];
    snprintf(sql, sizeof sql, "SELECT name, copying_eigen, %s FROM head_summary WHERE model_id = "
             "?1 AND copying_eigen IS NOT NULL AND %s IS NOT NULL ORDER BY layer, head", col, col);
    if (q_run(R, &q, sql, M->mid, NULL, e)) return -1;
    double *x = malloc(sizeof(double) * (size_t)(q.nr + 1) * 2);
    if (!x) {
        q_free(&q);
        return al_errf(e, "out of memory");
    }
    double *y = x + q.nr + 1;
    a->n = q.nr;
    for (int r = 0; r < q.nr; r++) {
        x[r] = qx(&q, r, 1);
        y[r] = qx(&q, r, 2);
        int ce = x[r] > AL_TH_COPY_EIGEN, ca = y[r] > AL_TH_COPY_ABLATION;
        a->agree += ce == ca;
        a->abl_copy += ca;
        if (ca && x[r] < 0) {
            char one[96];
            snprintf(one, sizeof one, "%s%s (copying_eigen %+.2f, %s %+.3f nats)",
                     a->abl_copy_neg ? ", " : "", qt(&q, r, 0), x[r],
                     col == ABL_COL[0] ? "ablation" : "excess", y[r]);
            strncat(a->neg, one, sizeof a->neg - strlen(a->neg) - 1);
            a->abl_copy_neg++;
        }
    }
    a->rho = al_spearman(x, y, q.nr);
    free(x);
    q_free(&q);
    return 0;
}

static void agree_sentence(al_buf *h, const agree *a) {
    al_buf_printf(h, "The eigenvalue score (copying_eigen &gt; " AL_TH_STR(AL_TH_COPY_EIGEN)
                  ") and mean ablation (%s &gt; " AL_TH_STR(AL_TH_COPY_ABLATION) " nats) agree on "
                  "<b>%d of %d</b> heads; Spearman rank correlation between the two scores over "
                  "all heads: <b>&rho; = ",
                  a->col, a->agree, a->n);
    if (isnan(a->rho)) al_buf_puts(h, "undefined");
    else al_buf_printf(h, "%+.2f", a->rho);
    al_buf_printf(h, "</b>. By %s, %d head%s cop%s", a->col, a->abl_copy,
              a->abl_copy == 1 ? "" : "s", a->abl_copy == 1 ? "ies" : "y");
    if (a->abl_copy_neg) {
        al_buf_printf(h, ", of which the eigenvalue score calls %d negative: ", a->abl_copy_neg);
        sb_esc(h, a->neg);
        al_buf_puts(h, ".");
    } else {
        al_buf_puts(h, a->abl_copy ? "; the eigenvalue score calls none of them negative." : ".");
    }
}

static int sec_copying(rep *R, const rmodel *M, al_err *e) {
    agree a[2];
    if (copy_agreement(R, M, ABL_COL[0], &a[0], e) || copy_agreement(R, M, ABL_COL[1], &a[1], e))
        return -1;
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Copying: weights vs behaviour</h3>\n");
    if (!a[0].n) {
        al_buf_puts(h, "<p class=none>Needs copying_eigen (attnlab circuits) and copying_ablation "
                   "(attnlab scores --data) for the same model.</p>\n");
        return 0;
    }
    for (int k = 0; k < 2 && a[k].n; k++) {
        al_buf_puts(h, "<p>");
        if (k)
            al_buf_puts(h, "Counting only what ablating a head costs at copy positions beyond its "
                       "cost at the other positions: ");
        agree_sentence(h, &a[k]);
        al_buf_puts(h, "</p>\n");
    }
    return 0;
}

static int sec_trigrams(rep *R, const rmodel *M, al_err *e) {
    al_buf_puts(&R->h, "<h3>Top skip-trigrams (layer 0)</h3>\n<p>\"A &hellip; B &rarr; C\": "
                   "destination B attends to source A, whose value raises output C (score = qk &times; "
                   "ov, from the full QK and OV circuits; &#9251; = a leading space). The best two of "
                   "each head, strongest first.</p>\n");
    static const char *const heads[] = {"head", "A … B → C", "qk", "ov", "score", NULL};
    return sql_table(R, "SELECT h, tri, qk, ov, score FROM (SELECT t.layer || '.' || t.head AS h, "
                     "coalesce(t.a_str, '?') || ' … ' || coalesce(t.b_str, '?') || ' → ' || "
                     "coalesce(t.c_str, '?') AS tri, t.qk, t.ov, t.score, ROW_NUMBER() OVER "
                     "(PARTITION BY t.head ORDER BY t.score DESC) AS rn FROM skip_trigrams t JOIN "
                     "latest_run r ON r.run_id = t.run_id AND r.kind = 'circuits' WHERE r.model_id = ?1 "
                     "AND t.layer = 0) WHERE rn <= 2 ORDER BY score DESC",
                     M->mid, NULL, heads, "ss223", "No skip-trigrams (run attnlab circuits).", e) < 0
               ? -1 : 0;
}

static int sec_composition(rep *R, const rmodel *M, al_err *e) {
    if (M->cfg.n_layers < 2) return 0;
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Composition</h3>\n<p>Strongest pairs per kind, with how many standard "
               "deviations they stand above random heads of the same shapes.</p>\n");
    static const char *const heads[] = {"kind", "earlier head", "later head", "score",
                                        "random baseline", "sd above", NULL};
    if (sql_table(R, "SELECT kind, h1, h2, score, baseline, sd FROM (SELECT c.kind, c.layer1 || '.' "
                  "|| c.head1 AS h1, c.layer2 || '.' || c.head2 AS h2, c.score, c.baseline, (c.score - "
                  "c.baseline) / c.baseline_sd AS sd, ROW_NUMBER() OVER (PARTITION BY c.kind ORDER BY "
                  "(c.score - c.baseline) / c.baseline_sd DESC) AS rn FROM composition c JOIN latest_run r "
                  "ON r.run_id = c.run_id AND r.kind = 'circuits' WHERE r.model_id = ?1) WHERE rn <= 5 "
                  "ORDER BY kind, sd DESC",
                  M->mid, NULL, heads, "sss332", "No composition scores (run attnlab circuits).", e) < 0)
        return -1;
    if (want_pic(R, "composition")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "composition";
        char file[256];
        snprintf(file, sizeof file, "%s-composition.png", M->slug);
        picture(R, M, &po, file, "Q-, K- and V-composition of every earlier head into every later "
                                 "head; the random baseline is marked on the colour bar.");
    }
    return 0;
}

static int sec_ablation(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Ablation</h3>\n");
    qres runs;
    if (q_run(R, &runs, "SELECT a.method, max(a.run_id) FROM ablations a JOIN runs r ON r.run_id = "
              "a.run_id WHERE a.model_id = ?1 AND r.status = 'done' AND a.kind = 'single' "
              "GROUP BY a.method ORDER BY a.method", M->mid, NULL, e))
        return -1;
    if (!runs.nr) al_buf_puts(h, "<p class=none>No ablation runs (attnlab ablate).</p>\n");
    static const char *const heads[] = {"head", "loss", "Δloss", "Δloss copy", "Δloss probe", NULL};
    static const char *const pheads[] = {"pair", "Δloss", "interaction", NULL};
    int rc = 0;
    for (int i = 0; rc == 0 && i < runs.nr; i++) {
        const char *m = qt(&runs, i, 0), *run = qt(&runs, i, 1);
        double clean;
        if (q_num(R, "SELECT loss FROM ablations WHERE run_id = ?1 AND method = ?2 AND kind = 'none'",
                  run, m, &clean, e)) {
            rc = -1;
            break;
        }
        al_buf_puts(h, "<p><b>");
        sb_esc(h, m);
        al_buf_printf(h, "-ablation</b> (run %s): loss with all heads %.4f; each head alone, most "
                     "costly first:</p>\n", run, clean);
        if (sql_table(R, "SELECT heads, loss, delta_loss, delta_loss_copy, delta_loss_probe FROM "
                      "ablations WHERE run_id = ?1 AND method = ?2 AND kind = 'single' ORDER BY "
                      "delta_loss DESC", run, m, heads, "s4+++", NULL, e) < 0 ||
            sql_table(R, "SELECT replace(heads, ',', ' + '), delta_loss, interaction FROM ablations "
                      "WHERE run_id = ?1 AND method = ?2 AND kind = 'pair' ORDER BY abs(interaction) "
                      "DESC LIMIT 8", run, m, pheads, "s++", NULL, e) < 0)
            rc = -1;
    }
    q_free(&runs);
    double n;
    if (rc || count_rows(R, M, "ablations", &n, e)) return -1;
    if (n > 0 && want_pic(R, "ablation")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "ablation";
        char file[256];
        snprintf(file, sizeof file, "%s-ablation.png", M->slug);
        picture(R, M, &po, file, "Ablation: validation Δloss when each head is ablated alone, and "
                                 "pair interactions Δ(pair) − Δ(h1) − Δ(h2).");
    }
    return 0;
}

/* Loss against heads remaining, one column per pruning method. */
static int sec_pruning(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Pruning</h3>\n");
    qres runs;
    if (q_run(R, &runs, "SELECT p.method, max(p.run_id) FROM pruning_steps p JOIN runs r ON "
              "r.run_id = p.run_id WHERE p.model_id = ?1 AND r.status = 'done' GROUP BY p.method "
              "ORDER BY p.method", M->mid, NULL, e))
        return -1;
    if (!runs.nr) {
        al_buf_puts(h, "<p class=none>No pruning runs (attnlab prune).</p>\n");
        q_free(&runs);
        return 0;
    }
    int LH = M->cfg.n_layers * M->cfg.n_heads, nm = runs.nr, rc = 0;
    double *loss = malloc(sizeof(double) * (size_t)(LH + 1) * nm);
    if (!loss) {
        q_free(&runs);
        return al_errf(e, "out of memory");
    }
    for (int i = 0; i < (LH + 1) * nm; i++) loss[i] = NAN;
    al_buf_puts(h, "<p>Each step removes the head the method ranks least important. Order of removal:</p><ul>\n");
    for (int k = 0; rc == 0 && k < nm; k++) {
        qres s;
        if (q_run(R, &s, "SELECT heads_left, loss, layer || '.' || head FROM pruning_steps WHERE "
                  "run_id = ?1 ORDER BY step", qt(&runs, k, 1), NULL, e)) {
            rc = -1;
            break;
        }
        al_buf_puts(h, "<li><b>");
        sb_esc(h, qt(&runs, k, 0));
        al_buf_puts(h, "</b>: ");
        for (int r = 0; r < s.nr; r++) {
            int left = (int)qx(&s, r, 0);
            if (left >= 0 && left <= LH) loss[left * nm + k] = qx(&s, r, 1);
            if (qt(&s, r, 2)) {
                al_buf_puts(h, r > 1 ? ", " : "");
                sb_esc(h, qt(&s, r, 2));
            }
        }
        al_buf_puts(h, "</li>\n");
        q_free(&s);
    }
    al_buf_puts(h, "</ul>\n<table><thead><tr><th>heads left</th>");
    for (int k = 0; k < nm; k++) {
        al_buf_puts(h, "<th>loss (");
        sb_esc(h, qt(&runs, k, 0));
        al_buf_puts(h, ")</th>");
    }
    al_buf_puts(h, "</tr></thead><tbody>\n");
    for (int left = LH; left >= 0; left--) {
        int any = 0;
        for (int k = 0; k < nm; k++) any |= !isnan(loss[left * nm + k]);
        if (!any) continue;
        al_buf_printf(h, "<tr><td>%d</td>", left);
        for (int k = 0; k < nm; k++) {
            double v = loss[left * nm + k];
            if (isnan(v)) al_buf_puts(h, "<td class=na>&ndash;</td>");
            else al_buf_printf(h, "<td>%.4f</td>", v);
        }
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table>\n");
    free(loss);
    q_free(&runs);
    if (rc) return -1;
    if (want_pic(R, "pruning")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "pruning";
        char file[256];
        snprintf(file, sizeof file, "%s-pruning.png", M->slug);
        picture(R, M, &po, file, "Pruning: validation loss as heads are removed, one line per "
                                 "importance method.");
    }
    return 0;
}

static void make_slug(const char *s, char *out, size_t cap);

/* Activation patching and path patching: the newest finished run of
 * each (task, component, direction) of the model, its strongest effects
 * and its picture. No runs: no section. */
static int sec_patching(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    qres runs;
    if (q_run(R, &runs, "SELECT x.run_id, x.task, x.component, x.direction, x.m_clean, x.m_corr, "
              "x.n_pairs FROM patching_runs x JOIN runs r ON r.run_id = x.run_id WHERE x.model_id "
              "= ?1 AND r.status = 'done' AND x.run_id = (SELECT max(y.run_id) FROM patching_runs "
              "y JOIN runs r2 ON r2.run_id = y.run_id WHERE r2.status = 'done' AND y.model_id = "
              "x.model_id AND y.task = x.task AND y.direction = x.direction AND y.component IS "
              "x.component) ORDER BY x.component IS NULL, x.component, x.task, x.direction",
              M->mid, NULL, e))
        return -1;
    static const char *const heads[] = {"configuration", "effect", "metric", NULL};
    static const char *const pheads[] = {"path", "effect", "metric", NULL};
    int rc = 0, n_patch = 0, n_paths = 0;
    for (int i = 0; rc == 0 && i < runs.nr; i++) {
        const char *run = qt(&runs, i, 0), *task = qt(&runs, i, 1), *comp = qt(&runs, i, 2),
                   *dir = qt(&runs, i, 3);
        if (!task || !dir) continue;
        if (comp ? !n_patch++ : !n_paths++)
            al_buf_puts(h, comp ? "<h3>Activation patching</h3>\n<p>Each configuration patches one "
                                  "activation between the clean and the corrupted run of a task. "
                                  "Effect: denoising (M<sub>patched</sub> &minus; M<sub>corr</sub>) / "
                                  "(M<sub>clean</sub> &minus; M<sub>corr</sub>), 1 = the patch "
                                  "restores the clean behaviour; noising (M<sub>clean</sub> &minus; "
                                  "M<sub>patched</sub>) / (M<sub>clean</sub> &minus; "
                                  "M<sub>corr</sub>), 1 = it breaks it.</p>\n"
                                : "<h3>Path patching</h3>\n<p>Only the path from a sender (embed, "
                                  "pos, a layer-0 head) to a receiver (a layer-1 head's query, key "
                                  "or value input, or the logits directly) carries the other run's "
                                  "value. An induction circuit shows as a previous-token head's "
                                  "path into an induction head's keys.</p>\n");
        const char *ding = strcmp(dir, "noise") == 0 ? "noising" : "denoising";
        al_buf_puts(h, "<p><b>");
        sb_esc(h, comp ? comp : "paths");
        al_buf_printf(h, "</b>, %s, task ", ding);
        sb_esc(h, task);
        al_buf_printf(h, " (run %s, %.0f pairs): M<sub>clean</sub> = %.4f, M<sub>corr</sub> = "
                     "%.4f; the strongest effects:</p>\n", run, qx(&runs, i, 6), qx(&runs, i, 4),
                     qx(&runs, i, 5));
        if (comp)
            rc = sql_table(R, "SELECT CASE WHEN head IS NULL THEN 'resid ' || layer ELSE layer || "
                           "'.' || head END || CASE WHEN pos IS NULL THEN '' ELSE ' @ ' || pos END, "
                           "value, metric FROM patching WHERE run_id = ?1 ORDER BY value IS NULL, "
                           "abs(value) DESC, patch_id LIMIT 8", run, NULL, heads, "s+4",
                           "No rows.", e) < 0;
        else
            rc = sql_table(R, "SELECT sender || ' -> ' || CASE WHEN channel = 'direct' THEN "
                           "'logits' ELSE receiver_layer || '.' || receiver_head || ' ' || channel "
                           "END, value, metric FROM path_patching WHERE run_id = ?1 ORDER BY value "
                           "IS NULL, abs(value) DESC, path_id LIMIT 8", run, NULL, pheads, "s+4",
                           "No rows.", e) < 0;
        if (rc || !want_pic(R, comp ? "patching" : "paths")) continue;
        al_pic_opts po = al_pic_defaults();
        po.what = comp ? "patching" : "paths";
        po.run_id = atol(run);
        char file[256], cap[512], slug[64];
        snprintf(slug, sizeof slug, "%s%s%s-%s", task, comp ? "-" : "", comp ? comp : "", dir);
        make_slug(slug, slug, sizeof slug);
        snprintf(file, sizeof file, "%s-%s-%s.png", M->slug, comp ? "patching" : "paths", slug);
        if (comp)
            snprintf(cap, sizeof cap, "Activation patching (%s, %s, task %s): the effect of "
                     "patching each configuration.", comp, ding, task);
        else
            snprintf(cap, sizeof cap, "Path patching (%s, task %s): the effect of each "
                     "sender's path into each layer-1 head's q, k and v, and directly into the "
                     "logits.", ding, task);
        picture(R, M, &po, file, cap);
    }
    q_free(&runs);
    return rc ? -1 : 0;
}

/* The answer to "do virtual heads matter here?" from the kinds' Δloss
 * (each kind's terms removed at once): the virtual kind's |Δloss| as a
 * share of the three kinds' Σ|Δloss|, against AL_TH_VIRTUAL_SHARE, and
 * its sign (removing a kind can lower the loss: the demo's 2-layer model
 * does better on the induction task without its virtual terms). a: the
 * run's row (see sec_attribution). */
static int virtual_sentence(rep *R, const rmodel *M, const qres *a, al_err *e) {
    al_buf *h = &R->h;
    double d[3] = {qx(a, 0, 9), qx(a, 0, 10), qx(a, 0, 11)}, tot = 0;
    for (int k = 0; k < 3; k++) tot += isnan(d[k]) ? 0 : fabs(d[k]);
    al_buf_puts(h, "<p class=answer><b>Do virtual heads matter here?</b> ");
    if (M->cfg.n_layers < 2) {
        al_buf_puts(h, "There are none: the model has one layer, so no head reads another's "
                       "output.</p>\n");
        return 0;
    }
    if (isnan(d[2]) || isnan(d[0]) || isnan(d[1])) {
        al_buf_puts(h, "Not measured: the run has no path expansion.</p>\n");
        return 0;
    }
    int n = M->cfg.n_heads * M->cfg.n_heads;
    if (!(tot > 0)) {
        al_buf_puts(h, "Cannot say: removing the terms of any kind leaves the loss as it "
                       "is.</p>\n");
        return 0;
    }
    double share = fabs(d[2]) / tot; /* sign apart */
    if (share < AL_TH_VIRTUAL_SHARE)
        al_buf_printf(h, "Negligible: removing all %d virtual terms together changes the loss by "
                      "%+.4f nats, %.1f%% of the three kinds' summed |&Delta;loss| (below "
                      "the %.0f%% taken as negligible).", n, d[2], 100 * share,
                      100 * AL_TH_VIRTUAL_SHARE);
    else if (d[2] < 0)
        al_buf_printf(h, "They work against the task: removing all %d virtual terms together "
                      "<i>lowers</i> the loss by %.4f nats (%.1f%% of the three kinds' summed "
                      "|&Delta;loss|).", n, -d[2], 100 * share);
    else
        al_buf_printf(h, "Yes: removing all %d virtual terms together raises the loss by %.4f "
                      "nats, %.1f%% of the three kinds' summed |&Delta;loss| (under "
                      "%.0f%% would be negligible).", n, d[2], 100 * share,
                      100 * AL_TH_VIRTUAL_SHARE);
    qres t;
    if (q_run(R, &t, "SELECT term, dloss FROM path_terms WHERE run_id = ?1 AND kind = 'virtual' "
              "AND dloss IS NOT NULL ORDER BY dloss DESC LIMIT 1", qt(a, 0, 0), NULL, e))
        return -1;
    if (t.nr && d[2] > 0) {
        al_buf_puts(h, " The largest alone: <code>");
        sb_esc(h, qt(&t, 0, 0));
        al_buf_printf(h, "</code> (&Delta;loss %+.4f nats).", qx(&t, 0, 1));
    }
    q_free(&t);
    al_buf_puts(h, "</p>\n");
    return 0;
}

/* Attribution: the newest finished attribute run of the model, its three
 * pictures and tables (path-expansion kinds, logit lens, agreement of
 * attribution patching with actual patching). No run: no section. */
static int sec_attribution(rep *R, const rmodel *M, al_err *e) {
    qres a;
    if (q_run(R, &a, "SELECT x.run_id, x.task, x.metric_kind, x.n_items, x.metric, x.loss, "
              "x.direct_value, x.head_value, x.virtual_value, x.direct_dloss, x.head_dloss, "
              "x.virtual_dloss, x.direction, (SELECT count(*) FROM path_terms p WHERE p.run_id = "
              "x.run_id), (SELECT count(actual) FROM attribution_patching p WHERE p.run_id = "
              "x.run_id) FROM attribution_runs x JOIN runs r ON r.run_id = x.run_id WHERE "
              "x.model_id = ?1 AND r.status = 'done' AND r.kind = 'attribute' ORDER BY x.run_id "
              "DESC LIMIT 1", M->mid, NULL, e))
        return -1;
    if (!a.nr) {
        q_free(&a);
        return 0;
    }
    al_buf *h = &R->h;
    const char *run = qt(&a, 0, 0), *task = qt(&a, 0, 1) ? qt(&a, 0, 1) : "?";
    int diff = qt(&a, 0, 2) && strcmp(qt(&a, 0, 2), "logit_diff") == 0;
    const char *metric = diff ? "the logit difference (answer &minus; wrong token)"
                              : "the correct token's logit";
    char slug[64], cap[512], nl[16];
    snprintf(slug, sizeof slug, "%s-%s", task, run);
    make_slug(slug, slug, sizeof slug);
    snprintf(nl, sizeof nl, "%d", M->cfg.n_layers);
    al_buf_puts(h, "<h3>Attribution</h3>\n<p>Run ");
    sb_esc(h, run);
    al_buf_puts(h, " on task ");
    sb_esc(h, task);
    al_buf_printf(h, " (%.0f items): mean metric, %s, %.4f; mean loss %.4f nats. Direct logit "
                  "attribution splits the metric into each component's contribution (they add up "
                  "to it).</p>\n", qx(&a, 0, 3), metric, qx(&a, 0, 4), qx(&a, 0, 5));
    al_pic_opts po = al_pic_defaults();
    po.run_id = atol(run);
    snprintf(cap, sizeof cap, "Direct logit attribution (task %s): each component's mean "
             "contribution to %s at each position.", task, diff ? "the logit difference" :
             "the correct token's logit");
    run_picture(R, M, &po, "dla", slug, cap);
    int rc = 0;
    if (qx(&a, 0, 13) > 0) {
        al_buf_puts(h, "<p>Path expansion: the logits as a sum of exact terms (direct, each "
                       "head reading embed+pos, and in two layers each virtual head 0.a&gt;1.b); "
                       "per kind, its terms' summed contribution to the metric and the rise in "
                       "loss with all of them removed at once.</p>\n");
        static const char *const heads[] = {"kind", "value", "\xce\x94loss (nats)",
                                            "share of \xce\xa3|\xce\x94loss|", NULL};
        rc = sql_table(R, "SELECT k, v, d, CASE WHEN s > 0 THEN printf('%.1f%%', 100 * abs(d) / s) END "
                       "FROM (SELECT 0 AS o, 'direct' AS k, direct_value AS v, direct_dloss AS d "
                       "FROM attribution_runs WHERE run_id = ?1 UNION ALL SELECT 1, 'head', "
                       "head_value, head_dloss FROM attribution_runs WHERE run_id = ?1 UNION ALL "
                       "SELECT 2, 'virtual', virtual_value, virtual_dloss FROM attribution_runs "
                       "WHERE run_id = ?1 AND virtual_dloss IS NOT NULL), (SELECT "
                       "abs(coalesce(direct_dloss, 0)) + abs(coalesce(head_dloss, 0)) + "
                       "abs(coalesce(virtual_dloss, 0)) AS s FROM attribution_runs WHERE run_id = ?1) "
                       "ORDER BY o", run, NULL, heads, "s++s", NULL, e) < 0;
        if (!rc) rc = virtual_sentence(R, M, &a, e);
        if (!rc) {
            snprintf(cap, sizeof cap, "Path expansion (task %s): the rise in loss when each term "
                     "alone is removed, grouped by kind.", task);
            run_picture(R, M, &po, "terms", slug, cap);
        }
    }
    static const char *const lheads[] = {"residual stream", "loss (nats)", "top-1 accuracy", NULL};
    if (!rc) {
        al_buf_puts(h, "<p>Logit lens: each residual stream read through the unembedding.</p>\n");
        rc = sql_table(R, "SELECT CASE WHEN layer = 0 THEN 'embed + pos' WHEN layer = ?2 THEN "
                       "'final (the model''s own)' ELSE 'entering layer ' || layer END, loss, "
                       "accuracy FROM logit_lens WHERE run_id = ?1 ORDER BY layer", run, nl, lheads,
                       "s43", "No logit lens rows.", e) < 0;
    }
    if (!rc && qt(&a, 0, 12)) {
        al_buf_puts(h, "<p>Attribution patching (");
        sb_esc(h, strcmp(qt(&a, 0, 12), "noise") == 0 ? "noising" : "denoising");
        al_buf_puts(h, "): the first-order estimate of every patch, against actual patching where "
                       "the run compared them.</p>\n");
        static const char *const gheads[] = {"grid", "n", "Pearson", "Spearman",
                                             "top-5 shared", NULL};
        rc = sql_table(R, "SELECT grid, n, pearson, spearman, top5 FROM attribution_agreement WHERE "
                       "run_id = ?1 ORDER BY CASE grid WHEN 'head' THEN 0 WHEN 'head_pos' THEN 1 "
                       "ELSE 2 END", run, NULL, gheads, "si33i",
                       "Not compared with actual patching.", e) < 0;
        if (!rc && qx(&a, 0, 14) > 0) {
            snprintf(cap, sizeof cap, "Attribution patching (task %s): each configuration's "
                     "estimate against actual patching, per grid.", task);
            run_picture(R, M, &po, "attrpatch", slug, cap);
        }
    }
    q_free(&a);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------ circuit */

/* Names (column 0 of q) as "a, b, c" or "none". */
static void name_run(al_buf *h, const qres *q) {
    if (!q->nr) al_buf_puts(h, "none");
    for (int r = 0; r < q->nr; r++) {
        al_buf_puts(h, r ? ", " : "");
        sb_esc(h, qt(q, r, 0) ? qt(q, r, 0) : "?");
    }
}

static int in_list(const qres *q, const char *name) {
    for (int r = 0; name && r < q->nr; r++)
        if (qt(q, r, 0) && strcmp(qt(q, r, 0), name) == 0) return 1;
    return 0;
}

/* "kind heads (score > th): a (in the circuit), b (missed)." */
static void identified_sentence(al_buf *h, const char *what, const qres *ident,
                                const qres *heads) {
    al_buf_printf(h, " Identified %s: ", what);
    if (!ident->nr) al_buf_puts(h, "none");
    for (int r = 0; r < ident->nr; r++) {
        al_buf_puts(h, r ? ", " : "");
        sb_esc(h, qt(ident, r, 0));
        al_buf_puts(h, in_list(heads, qt(ident, r, 0)) ? " (in the circuit)" : " (missed)");
    }
    al_buf_puts(h, ".");
}

/* The K edges "a &rarr; 1.b.k" of kq whose sender is in from (NULL: any)
 * and receiver in to, comma-separated. */
static void k_edges(al_buf *h, const qres *kq, const qres *from, const qres *to) {
    for (int r = 0, k = 0; r < kq->nr; r++)
        if ((!from || in_list(from, qt(kq, r, 0))) && in_list(to, qt(kq, r, 1))) {
            al_buf_puts(h, k++ ? ", " : "");
            sb_esc(h, qt(kq, r, 0));
            al_buf_puts(h, " &rarr; ");
            sb_esc(h, qt(kq, r, 1));
            al_buf_puts(h, ".k");
        }
}

/* The answer to "is it the previous-token -> induction circuit?" from the
 * circuit's kept layer-0 -> layer-1 K edges (kq: sender, receiver head
 * name) and the heads head_summary identifies (prev, ind). */
static void induction_answer(al_buf *h, const rmodel *M, const qres *kq, const qres *prev,
                             const qres *ind, const qres *heads) {
    al_buf_puts(h, "<p class=answer><b>Is it the previous-token &rarr; induction circuit?</b> ");
    if (M->cfg.n_layers < 2) {
        al_buf_puts(h, "No: a one-layer model has no K-composition, and the induction circuit "
                       "needs a previous-token head in one layer feeding an induction head's keys "
                       "in the next.");
    } else if (!prev->nr && !ind->nr) {
        al_buf_puts(h, "Cannot say: the database identifies no previous-token heads (prev_token "
                       "&gt; " AL_TH_STR(AL_TH_PREV_TOKEN) ") and no induction heads (induction "
                       "&gt; " AL_TH_STR(AL_TH_INDUCTION) ") in this model (attnlab scores names "
                       "them).");
    } else {
        int yes = 0, into_ind = 0;
        for (int r = 0; r < kq->nr; r++) {
            int p = in_list(prev, qt(kq, r, 0)), i = in_list(ind, qt(kq, r, 1));
            yes += p && i;
            into_ind += i;
        }
        if (yes) {
            al_buf_puts(h, "Yes: it keeps ");
            k_edges(h, kq, prev, ind);
            al_buf_puts(h, ", a previous-token head's output read by an induction head's keys.");
        } else if (into_ind) {
            al_buf_puts(h, "Partly: it keeps K-composition into an induction head, but not from "
                           "an identified previous-token head (");
            k_edges(h, kq, NULL, ind);
            al_buf_puts(h, ").");
        } else {
            al_buf_puts(h, "No: none of its kept K-composition edges joins an identified "
                           "previous-token head to an identified induction head.");
        }
        identified_sentence(h, "previous-token heads (prev_token &gt; "
                            AL_TH_STR(AL_TH_PREV_TOKEN) ")", prev, heads);
        identified_sentence(h, "induction heads (induction &gt; " AL_TH_STR(AL_TH_INDUCTION) ")",
                            ind, heads);
    }
    al_buf_puts(h, "</p>\n");
}

/* The kept edges of one circuit as table k: ?1 run, ?2 method, ?3 tau
 * (NULL for EAP; as text, exact). */
#define CIRCUIT_KEPT                                                                   \
    "WITH k AS (SELECT * FROM circuit_edges WHERE run_id = ?1 AND method = ?2 AND tau " \
    "IS CAST(?3 AS REAL) AND kept = 1) "

/* Circuit: the newest finished discover run of the model, the circuit
 * the picture draws (al_pic_circuit_of), its size and faithfulness, the
 * heads it contains against those the database identifies, its picture
 * and, with a tau sweep, the curve. No run: no section. */
static int sec_circuit(rep *R, const rmodel *M, al_err *e) {
    double last;
    if (q_num(R, "SELECT max(x.run_id) FROM circuit_runs x JOIN runs r ON r.run_id = x.run_id "
              "WHERE x.model_id = ?1 AND r.status = 'done' AND r.kind = 'discover'", M->mid, NULL,
              &last, e))
        return -1;
    if (isnan(last)) return 0;
    char run[32], method[8], tau_txt[32];
    double tau;
    snprintf(run, sizeof run, "%.0f", last);
    if (al_pic_circuit_of(R->st, (long)last, method, &tau, tau_txt, e) < 0) return -1;
    const char *p3[3] = {run, method, isnan(tau) ? NULL : tau_txt};
    qres c = {0}, heads = {0}, kq = {0}, prev = {0}, ind = {0};
    int rc = q_runv(R, &c, "SELECT task, n_kept, n_edges, faithfulness, kl, metric, (SELECT "
                    "count(*) FROM circuit_runs y WHERE y.run_id = x.run_id AND y.tau IS NOT "
                    "NULL), (SELECT count(*) FROM circuit_runs y WHERE y.run_id = x.run_id) FROM "
                    "circuit_runs x WHERE run_id = ?1 AND method = ?2 AND tau IS CAST(?3 AS REAL)",
                    p3, 3, e);
    /* a head is in the circuit when a kept edge leaves or enters it */
    if (!rc)
        rc = q_runv(R, &heads, CIRCUIT_KEPT "SELECT sender AS name FROM k WHERE sender NOT IN "
                    "('embed', 'pos') UNION SELECT receiver_layer || '.' || receiver_head FROM k "
                    "WHERE receiver_layer IS NOT NULL ORDER BY name", p3, 3, e);
    /* with the composition score and path patching's effect of the same
     * path, where the database has them */
    if (!rc)
        rc = q_runv(R, &kq, CIRCUIT_KEPT "SELECT k.sender, '1.' || k.receiver_head, k.score, "
                    "c.score, c.baseline, (SELECT p.value FROM path_patching p JOIN runs r ON "
                    "r.run_id = p.run_id WHERE r.status = 'done' AND p.model_id = k.model_id AND "
                    "p.sender = k.sender AND p.receiver_layer = 1 AND p.receiver_head = "
                    "k.receiver_head AND p.channel = 'k' ORDER BY p.run_id DESC LIMIT 1) FROM k "
                    "LEFT JOIN composition c ON c.run_id = (SELECT max(y.run_id) FROM composition "
                    "y JOIN runs r ON r.run_id = y.run_id WHERE r.status = 'done' AND y.model_id "
                    "= k.model_id AND y.kind = 'K') AND c.kind = 'K' AND c.layer1 = 0 AND "
                    "c.head1 = CAST(substr(k.sender, 3) AS INTEGER) AND c.layer2 = 1 AND c.head2 "
                    "= k.receiver_head WHERE k.channel = 'k' AND k.receiver_layer = 1 AND "
                    "k.sender GLOB '0.*' ORDER BY k.score DESC, k.edge", p3, 3, e);
    if (!rc)
        rc = q_run(R, &prev, "SELECT name FROM head_summary WHERE model_id = ?1 AND prev_token > "
                   AL_TH_STR(AL_TH_PREV_TOKEN) " ORDER BY layer, head", M->mid, NULL, e);
    if (!rc)
        rc = q_run(R, &ind, "SELECT name FROM head_summary WHERE model_id = ?1 AND induction > "
                   AL_TH_STR(AL_TH_INDUCTION) " ORDER BY layer, head", M->mid, NULL, e);
    if (!rc && c.nr) {
        al_buf *h = &R->h;
        const char *task = qt(&c, 0, 0) ? qt(&c, 0, 0) : "?";
        al_buf_puts(h, "<h3>Circuit</h3>\n<p>Run ");
        sb_esc(h, run);
        al_buf_puts(h, " on task ");
        sb_esc(h, task);
        if (isnan(tau)) al_buf_puts(h, ", the EAP circuit");
        else al_buf_printf(h, ", the ACDC circuit at tau %g", tau);
        if (qx(&c, 0, 7) > 1)
            al_buf_printf(h, " (of the run's %.0f circuits: the one at the run's own tau, else "
                          "EAP's, else the smallest tau's)", qx(&c, 0, 7));
        al_buf_printf(h, ": it keeps %.0f of the %.0f edges of the head graph, with "
                      "faithfulness %.3f (1 = it does all the model does on the task, 0 = no "
                      "better than the corrupted run) and KL %.4f nats from the full model "
                      "(metric ", qx(&c, 0, 1), qx(&c, 0, 2), qx(&c, 0, 3), qx(&c, 0, 4));
        sb_esc(h, qt(&c, 0, 5) ? qt(&c, 0, 5) : "?");
        al_buf_puts(h, ").</p>\n<p>Heads in the circuit (in a kept edge): ");
        name_run(h, &heads);
        al_buf_puts(h, ".");
        if (M->cfg.n_layers == 2) {
            al_buf_puts(h, " Layer-0 &rarr; layer-1 K-composition edges kept: ");
            if (!kq.nr) al_buf_puts(h, "none");
            for (int r = 0; r < kq.nr; r++) {
                al_buf_puts(h, r ? "; " : "");
                sb_esc(h, qt(&kq, r, 0));
                al_buf_puts(h, " &rarr; ");
                sb_esc(h, qt(&kq, r, 1));
                al_buf_printf(h, ".k (score %.4g", qx(&kq, r, 2));
                if (!isnan(qx(&kq, r, 3)))
                    al_buf_printf(h, "; K-composition %.3f, random baseline %.3f", qx(&kq, r, 3),
                                  qx(&kq, r, 4));
                if (!isnan(qx(&kq, r, 5)))
                    al_buf_printf(h, "; path patching effect %.3f", qx(&kq, r, 5));
                al_buf_puts(h, ")");
            }
            al_buf_puts(h, ".");
        }
        al_buf_puts(h, "</p>\n");
        induction_answer(h, M, &kq, &prev, &ind, &heads);
        al_pic_opts po = al_pic_defaults();
        po.run_id = (long)last;
        char cap[512], slug[64];
        snprintf(slug, sizeof slug, "%s-%s", task, run);
        make_slug(slug, slug, sizeof slug);
        snprintf(cap, sizeof cap, "The circuit (task %s): embeddings at the bottom, the logits "
                 "on top; an edge's colour is its channel (q, k, v, direct), its width its "
                 "score; removed edges pale.", task);
        run_picture(R, M, &po, "circuit", slug, cap);
        if (qx(&c, 0, 6) >= 2) {
            snprintf(cap, sizeof cap, "The tau sweep (task %s): edges kept against faithfulness, "
                     "one point per tau.", task);
            run_picture(R, M, &po, "circuit-curve", slug, cap);
        }
    }
    q_free(&c);
    q_free(&heads);
    q_free(&kq);
    q_free(&prev);
    q_free(&ind);
    return rc ? -1 : 0;
}

static int sec_pictures(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    char file[256], cap[512];
    al_buf_puts(h, "<h3>Attention patterns and circuits</h3>\n<p>In attention pictures rows are "
               "destination (query) tokens and columns source (key) tokens: the query attends to "
               "the key, and information flows from the key to the query.</p>\n");
    for (int l = 0; l < M->cfg.n_layers && want_pic(R, "attention"); l++) {
        al_pic_opts po = al_pic_defaults();
        po.what = "attention";
        po.layer = l;
        if (R->o->prompt) {
            po.prompt = R->o->prompt;
            snprintf(file, sizeof file, "%s-attention-L%d.png", M->slug, l);
            snprintf(cap, sizeof cap, "Layer %d, every head, on the prompt.", l);
            picture(R, M, &po, file, cap);
            po.prompt = NULL;
        }
        if (R->o->repeat > 0) {
            po.repeat = R->o->repeat;
            snprintf(file, sizeof file, "%s-repeat-L%d.png", M->slug, l);
            snprintf(cap, sizeof cap, "Layer %d, every head, on %d random tokens shown twice: an "
                     "induction head lights the diagonal one step after the repeat's start; a "
                     "previous-token head the sub-diagonal.", l, R->o->repeat);
            picture(R, M, &po, file, cap);
        }
    }
    if (want_pic(R, "spectrum")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "spectrum";
        snprintf(file, sizeof file, "%s-spectrum.png", M->slug);
        picture(R, M, &po, file, "Singular values of every head's W_QK and W_OV.");
    }
    int l, hh, f;
    if ((f = best_head(R, M, "coalesce(prev_token, pos_prev_token)", &l, &hh, e)) < 0) return -1;
    if (f && want_pic(R, "qk-pos")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "qk-pos";
        po.layer = l, po.head = hh, po.n_pos = 48;
        snprintf(file, sizeof file, "%s-qk-pos-%d.%d.png", M->slug, l, hh);
        snprintf(cap, sizeof cap, "Positional QK of head %d.%d, the strongest previous-token head.", l, hh);
        picture(R, M, &po, file, cap);
    }
    /* The picture should show copying in the head's own OV circuit (a red
     * diagonal): prefer heads whose eigenvalue score says so, ranked by
     * what ablation says they contribute. Ablation alone can pick a head
     * that copies only through a later head (a previous-token head). */
    const char *why = "the head whose own OV circuit copies (copying_eigen > "
                      AL_TH_STR(AL_TH_COPY_EIGEN) ") and that "
                      "matters most to copying by ablation";
    if ((f = best_head(R, M, "CASE WHEN copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN)
                       " THEN coalesce(copying_ablation, "
                       "copying_eigen) END", &l, &hh, e)) < 0)
        return -1;
    if (!f) {
        why = "the strongest copying head";
        if ((f = best_head(R, M, "coalesce(copying_ablation, copying_eigen)", &l, &hh, e)) < 0)
            return -1;
    }
    const char *kinds[2] = {"qk", "ov"};
    for (int k = 0; f && k < 2; k++) {
        if (!want_pic(R, kinds[k])) continue;
        al_pic_opts po = al_pic_defaults();
        po.what = kinds[k];
        po.layer = l, po.head = hh, po.top_n = R->o->top_n > 0 ? R->o->top_n : 30;
        po.data = R->o->data;
        snprintf(file, sizeof file, "%s-%s-%d.%d.png", M->slug, kinds[k], l, hh);
        snprintf(cap, sizeof cap, "Full %s circuit of head %d.%d, %s, on the %d most "
                 "frequent tokens.", k ? "OV" : "QK", l, hh, why, po.top_n);
        picture(R, M, &po, file, cap);
    }
    return 0;
}

/* ------------------------------------------------------------ models */

static void make_slug(const char *s, char *out, size_t cap) {
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) {
        char c = s[i];
        out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                         c == '-' || c == '_' || c == '.'
                     ? c : '_';
    }
    out[i] = 0;
    if (!i || out[0] == '.') snprintf(out, cap, "model");
}

static int load_model(rep *R, int i, al_err *e) {
    rmodel *M = &R->m[i];
    M->dir = R->o->models[i];
    char path[AL_PATH_MAX + 64];
    unsigned char *txt;
    size_t n;
    if (al_path_join(path, sizeof path, M->dir, "config.json", e) ||
        al_read_file(path, &txt, &n, 1 << 20, e))
        return -1;
    int rc = al_config_from_json((const char *)txt, &M->cfg, path, e);
    free(txt);
    if (rc || al_path_join(path, sizeof path, M->dir, "model.safetensors", e) ||
        al_sha256_file(path, M->sha, e))
        return -1;
    const char *lab = R->o->labels[i];
    if (!lab) {
        size_t len = strlen(M->dir);
        while (len > 1 && M->dir[len - 1] == '/') len--;
        size_t s = len;
        while (s > 0 && M->dir[s - 1] != '/') s--;
        snprintf(M->label, sizeof M->label, "%.*s", (int)(len - s), M->dir + s);
    } else {
        snprintf(M->label, sizeof M->label, "%s", lab);
    }
    make_slug(M->label, M->slug, sizeof M->slug);
    for (int j = 0; j < i; j++) /* two folders of the same name: keep files apart */
        if (strcmp(R->m[j].slug, M->slug) == 0) {
            size_t k = strlen(M->slug);
            snprintf(M->slug + (k < 100 ? k : 100), 28, "-%d", i + 1);
        }
    double id;
    if (q_num(R, "SELECT model_id FROM models WHERE sha256 = ?1", M->sha, NULL, &id, e)) return -1;
    M->in_db = !isnan(id);
    snprintf(M->mid, sizeof M->mid, "%.0f", M->in_db ? id : 0.0);
    return 0;
}

static int sec_model(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<section id=\"model-");
    sb_esc(h, M->slug);
    al_buf_puts(h, "\"><h2>Model ");
    sb_esc(h, M->label);
    al_buf_puts(h, "</h2>\n");
    if (!M->in_db)
        al_buf_puts(h, "<p class=warn>These weights have no rows in the database (their sha256 is not "
                   "in table models): only the pictures computed from the weights are shown.</p>\n");
    if (sec_card(R, M, e) || sec_training(R, M, e) || sec_heads(R, M, e) || sec_kinds(R, M, e) ||
        sec_copying(R, M, e) || sec_trigrams(R, M, e) || sec_composition(R, M, e) ||
        sec_ablation(R, M, e) || sec_pruning(R, M, e) || sec_patching(R, M, e) ||
        sec_circuit(R, M, e) || sec_attribution(R, M, e) || sec_pictures(R, M, e))
        return -1;
    if (R->o->interactive) {
        al_viewer_model vm = {M->dir, M->label, M->slug, M->in_db ? M->mid : NULL, R->o->prompt};
        if (al_viewer_model_block(h, R->st, &vm, e)) return -1;
    }
    al_buf_puts(h, "</section>\n");
    return 0;
}

/* ---------------------------------------------------------- comparison */

/* The open question of seed 003: does copying_eigen agree with ablation
 * when embeddings are tied vs untied? Answered from the numbers when the
 * report has models of both kinds, by two measures: the share of heads
 * both scores classify alike (thresholds as README) and Spearman's rho
 * (no threshold). A difference under 0.1 in a measure counts as none. */
typedef struct side {
    int n, agree, copy, neg, n_rho;
    double rho;
} side;

static void side_sentence(al_buf *h, const char *kind, const side *s, const char *col) {
    al_buf_printf(h, "With %s embeddings the two scores classify %d of %d heads alike (%.0f%%) and "
                 "their rank correlation is &rho; = %+.2f%s; ", kind, s->agree, s->n,
              100.0 * s->agree / s->n, s->rho, s->n_rho > 1 ? " (mean over models)" : "");
    if (!s->copy) al_buf_printf(h, "%s finds no copying head. ", col);
    else
        al_buf_printf(h, "%s finds %d copying head%s, of which the eigenvalue score calls %d "
                     "negative. ", col, s->copy, s->copy == 1 ? "" : "s", s->neg);
}

/* a: one agreement per model, all for the same ablation column. */
static void tied_answer(rep *R, const agree *a) {
    side sd[2];
    memset(sd, 0, sizeof sd);
    for (int i = 0; i < R->o->n_models; i++) {
        side *s = &sd[R->m[i].cfg.tied_embeddings != 0];
        if (!a[i].n) continue;
        s->n += a[i].n, s->agree += a[i].agree, s->copy += a[i].abl_copy, s->neg += a[i].abl_copy_neg;
        if (!isnan(a[i].rho)) s->rho += a[i].rho, s->n_rho++;
    }
    if (!sd[0].n || !sd[1].n) return;
    for (int t = 0; t < 2; t++) sd[t].rho = sd[t].n_rho ? sd[t].rho / sd[t].n_rho : NAN;
    al_buf *h = &R->h;
    const char *col = a[0].col;
    int main_col = strcmp(col, ABL_COL[0]) == 0;
    if (main_col)
        al_buf_puts(h, "<p class=answer><b>Does the eigenvalue copying score agree with ablation, tied "
                   "vs untied embeddings?</b> ");
    else
        al_buf_printf(h, "<p class=answer>The same question with %s (the cost at copy positions "
                     "beyond the cost elsewhere): ", col);
    side_sentence(h, "tied", &sd[1], col);
    side_sentence(h, "untied", &sd[0], col);
    /* > 0: untied agrees better */
    double dr = isnan(sd[0].rho) || isnan(sd[1].rho) ? 0 : sd[0].rho - sd[1].rho;
    double df = (double)sd[0].agree / sd[0].n - (double)sd[1].agree / sd[1].n;
    int vr = fabs(dr) < 0.1 ? 0 : dr > 0 ? 1 : -1, vf = fabs(df) < 0.1 ? 0 : df > 0 ? 1 : -1;
    const char *lead = main_col ? "Answer" : "By this measure";
    if (!vr && !vf)
        al_buf_printf(h, "<b>%s:</b> in these models tying the embeddings makes little difference "
                     "to how well the eigenvalue score tracks ablation.</p>\n", lead);
    else if (vr * vf < 0)
        al_buf_printf(h, "<b>%s: mixed.</b> The rank correlation favours %s embeddings, the "
                     "thresholded agreement %s ones; more heads or models are needed to "
                     "settle it.</p>\n", lead, vr > 0 ? "untied" : "tied", vf > 0 ? "untied" : "tied");
    else
        al_buf_printf(h, "<b>%s:</b> the eigenvalue score tracks ablation better with <b>%s</b> "
                     "embeddings%s.</p>\n", lead, vr + vf > 0 ? "untied" : "tied",
                  vr + vf > 0 ? ": with W_U = W_E<sup>T</sup> it is the less reliable guide to copying"
                              : "");
}

static int sec_compare(rep *R, al_err *e) {
    al_buf *h = &R->h;
    agree a[AL_REPORT_MAX_MODELS], x[AL_REPORT_MAX_MODELS];
    al_buf_puts(h, "<h2>Models compared</h2>\n<table><thead><tr><th>model</th><th>layers</th>"
               "<th>embeddings</th><th>val loss</th><th>icl_gain</th><th>induction heads</th>"
               "<th>prev-token heads</th><th>copying: eigen vs ablation agree</th><th>&rho;</th>"
               "<th>eigen vs ablation excess agree</th><th>&rho;</th>"
               "</tr></thead><tbody>\n");
    for (int i = 0; i < R->o->n_models; i++) {
        const rmodel *M = &R->m[i];
        double vl, icl, ni, np;
        if (copy_agreement(R, M, ABL_COL[0], &a[i], e) ||
            copy_agreement(R, M, ABL_COL[1], &x[i], e) ||
            q_num(R, "SELECT final_val_loss FROM models WHERE model_id = ?1", M->mid, NULL, &vl, e) ||
            q_num(R, "SELECT value FROM model_scores WHERE metric = 'icl_gain' AND run_id = (SELECT "
                  "run_id FROM latest_run WHERE model_id = ?1 AND kind = 'scores')", M->mid, NULL, &icl, e) ||
            q_num(R, "SELECT count(*) FROM head_summary WHERE model_id = ?1 AND induction > "
                  AL_TH_STR(AL_TH_INDUCTION),
                  M->mid, NULL, &ni, e) ||
            q_num(R, "SELECT count(*) FROM head_summary WHERE model_id = ?1 AND prev_token > "
                  AL_TH_STR(AL_TH_PREV_TOKEN),
                  M->mid, NULL, &np, e))
            return -1;
        al_buf_puts(h, "<tr><td class=t><a href=\"#model-");
        sb_esc(h, M->slug);
        al_buf_puts(h, "\">");
        sb_esc(h, M->label);
        al_buf_printf(h, "</a></td><td>%d</td><td>%s</td>", M->cfg.n_layers,
                  M->cfg.tied_embeddings ? "tied" : "untied");
        al_buf_printf(h, isnan(vl) ? "<td class=na>&ndash;</td>" : "<td>%.4f</td>", vl);
        al_buf_printf(h, isnan(icl) ? "<td class=na>&ndash;</td>" : "<td>%+.4f</td>", icl);
        al_buf_printf(h, "<td>%.0f</td><td>%.0f</td>", ni, np);
        if (a[i].n) al_buf_printf(h, "<td>%d of %d</td>", a[i].agree, a[i].n);
        else al_buf_puts(h, "<td class=na>&ndash;</td>");
        al_buf_printf(h, isnan(a[i].rho) ? "<td class=na>&ndash;</td>" : "<td>%+.2f</td>", a[i].rho);
        if (x[i].n) al_buf_printf(h, "<td>%d of %d</td>", x[i].agree, x[i].n);
        else al_buf_puts(h, "<td class=na>&ndash;</td>");
        al_buf_printf(h, isnan(x[i].rho) ? "<td class=na>&ndash;</td>" : "<td>%+.2f</td>", x[i].rho);
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table>\n");
    tied_answer(R, a);
    tied_answer(R, x);
    return 0;
}

/* ------------------------------------------------------ names table */

/* The seed notes' copying table (attnlab names): per name piece, each
 * model's mean probability at the name's first and second appearance,
 * side by side. Nothing when no model has a names run. */
static const char *NAMES_RUN =
    "SELECT run_id FROM latest_run WHERE model_id = ?1 AND kind = 'names'";
static int sec_names(rep *R, al_err *e) {
    al_buf *h = &R->h;
    double k = 0, any = 0;
    for (int i = 0; i < R->o->n_models; i++) {
        double ki;
        if (q_num(R, "SELECT count(*) FROM model_scores WHERE metric LIKE 'names_first_p%' AND "
                  "run_id = (SELECT run_id FROM latest_run WHERE model_id = ?1 AND kind = 'names')",
                  R->m[i].mid, NULL, &ki, e))
            return -1;
        if (ki > k) k = ki;
        any += ki > 0;
    }
    if (!any) return 0;
    qres nm;
    if (q_run(R, &nm, "SELECT json_extract(config_json, '$.name'), (SELECT value FROM model_scores s "
              "WHERE s.run_id = r.run_id AND metric = 'names_stories') FROM runs r WHERE run_id IN "
              "(SELECT run_id FROM latest_run WHERE kind = 'names') ORDER BY run_id DESC LIMIT 1",
              NULL, NULL, e))
        return -1;
    al_buf_puts(h, "<section id=\"names\"><h2>Copying a name (the seed notes' table)</h2>\n<p>");
    al_buf_printf(h, "Held-out stories (%.0f) with the name ", nm.nr ? qx(&nm, 0, 1) : 0.0);
    if (nm.nr && qt(&nm, 0, 0)) {
        al_buf_puts(h, "&ldquo;");
        sb_esc(h, qt(&nm, 0, 0));
        al_buf_puts(h, "&rdquo;");
    } else {
        al_buf_puts(h, "invented per story");
    }
    q_free(&nm);
    al_buf_puts(h, " inserted twice: the probability of each name piece at its first appearance "
               "(nothing to copy) and its second (a copy). An induction head raises pieces 2.. at the "
               "second appearance.</p>\n<table><thead><tr><th>piece</th>");
    for (int i = 0; i < R->o->n_models; i++) {
        al_buf_puts(h, "<th>");
        sb_esc(h, R->m[i].label);
        al_buf_puts(h, ": 1st</th><th>");
        sb_esc(h, R->m[i].label);
        al_buf_puts(h, ": 2nd</th>");
    }
    al_buf_puts(h, "</tr></thead><tbody>\n");
    for (int j = 1; j <= (int)k + 1; j++) {
        char m1[40], m2[40];
        if (j <= (int)k) {
            snprintf(m1, sizeof m1, "names_first_p%d", j);
            snprintf(m2, sizeof m2, "names_second_p%d", j);
            al_buf_printf(h, "<tr><td>%d</td>", j);
        } else {
            snprintf(m1, sizeof m1, "names_first_rest");
            snprintf(m2, sizeof m2, "names_second_rest");
            al_buf_puts(h, "<tr><td>2.. (mean)</td>");
        }
        for (int i = 0; i < R->o->n_models; i++) {
            double a, b;
            char sql[300];
            snprintf(sql, sizeof sql, "SELECT value FROM model_scores WHERE metric = ?2 AND run_id = (%s)",
                     NAMES_RUN);
            if (q_num(R, sql, R->m[i].mid, m1, &a, e) || q_num(R, sql, R->m[i].mid, m2, &b, e))
                return -1;
            al_buf_printf(h, isnan(a) ? "<td class=na>&ndash;</td>" : "<td>%.4f</td>", a);
            al_buf_printf(h, isnan(b) ? "<td class=na>&ndash;</td>" : "<td>%.4f</td>", b);
        }
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table></section>\n");
    return 0;
}

/* ------------------------------------------------------- across seeds */

/* Columns of the section's query, in order. */
enum { SW_SETTING, SW_LAYERS, SW_SEEDS, SW_MODELS, SW_SCORED, SW_SHARE, SW_CURVES, SW_NEVER,
       SW_FS_MEAN, SW_FS_SD, SW_FS_MIN, SW_FS_MAX, SW_BI_MEAN, SW_BI_MIN, SW_BI_MAX, SW_NK,
       SW_KSHARE, SW_NC, SW_COPY };

/* Whether the database holds findings across seeds: rows merged from
 * other databases, or a (setting, layer count) with several seeds. */
static int has_sweep(rep *R, int *yes, al_err *e) {
    double v;
    if (q_num(R, "SELECT EXISTS (SELECT 1 FROM merge_sources) OR EXISTS (SELECT 1 FROM "
              "sweep_summary WHERE n_seeds > 1)", NULL, NULL, &v, e))
        return -1;
    *yes = v > 0;
    return 0;
}

/* "k of n" from a share of n (the view stores k / n). */
static int of_n(const qres *q, int r, int share_col, int n_col) {
    return (int)lround(qx(q, r, share_col) * qx(q, r, n_col));
}

/* The sentences of one group, every number from its sweep_summary row. */
static void sweep_sentences(al_buf *h, const qres *q, int r) {
    const char *set = qt(q, r, SW_SETTING);
    int L = (int)qx(q, r, SW_LAYERS), scored = (int)qx(q, r, SW_SCORED);
    int curves = (int)qx(q, r, SW_CURVES), never = (int)qx(q, r, SW_NEVER);
    int crossed = curves - never, nk = (int)qx(q, r, SW_NK), nc = (int)qx(q, r, SW_NC);
    const char *unit = qx(q, r, SW_SEEDS) == qx(q, r, SW_MODELS) ? "seeds" : "models";
    al_buf_puts(h, "<p><b>");
    sb_esc(h, set ? set : "all models");
    al_buf_printf(h, ", %d layer%s:</b> ", L, L == 1 ? "" : "s");
    if (scored)
        al_buf_printf(h, "in <b>%d of %d</b> %s an induction head formed (best final induction "
                      "score &gt; " AL_TH_STR(AL_TH_INDUCTION) "; mean %.2f, min %.2f, max %.2f). ",
                      of_n(q, r, SW_SHARE, SW_SCORED), scored, unit, qx(q, r, SW_BI_MEAN),
                      qx(q, r, SW_BI_MIN), qx(q, r, SW_BI_MAX));
    else
        al_buf_puts(h, "no model has a final induction score (attnlab scores). ");
    if (crossed > 1)
        al_buf_printf(h, "The best head's induction score first crossed " AL_TH_STR(AL_TH_INDUCTION)
                      " at step <b>%.0f &plusmn; %.0f</b> (mean &plusmn; sd over %d runs; min %.0f, "
                      "max %.0f)", qx(q, r, SW_FS_MEAN), qx(q, r, SW_FS_SD), crossed,
                      qx(q, r, SW_FS_MIN), qx(q, r, SW_FS_MAX));
    else if (crossed == 1)
        al_buf_printf(h, "The best head's induction score first crossed " AL_TH_STR(AL_TH_INDUCTION)
                      " at step <b>%.0f</b> (one run)", qx(q, r, SW_FS_MIN));
    if (crossed && never)
        al_buf_printf(h, "; %d of %d training curves never did. ", never, curves);
    else if (crossed)
        al_buf_puts(h, ". ");
    else if (curves == 1)
        al_buf_puts(h, "In its one training curve the best head's induction score never crossed "
                       AL_TH_STR(AL_TH_INDUCTION) ". ");
    else if (curves)
        al_buf_printf(h, "In none of %d training curves did the best head's induction score cross "
                      AL_TH_STR(AL_TH_INDUCTION) ". ", curves);
    if (nk)
        al_buf_printf(h, "The top K-composition pair was the pair of largest |interaction| in "
                      "pair ablation in <b>%d of %d</b> models. ", of_n(q, r, SW_KSHARE, SW_NK), nk);
    if (nc)
        al_buf_printf(h, "copying_eigen and copying_ablation classified %.0f%% of heads alike "
                      "(mean over %d model%s).", 100 * qx(q, r, SW_COPY), nc, nc == 1 ? "" : "s");
    al_buf_puts(h, "</p>\n");
}

/* Findings across seeds (issue 16): view sweep_summary as a table, a few
 * sentences per group, and the sweep-induction picture. Only when the
 * database has merged rows or several seeds of one setting. */
static int sec_sweep(rep *R, al_err *e) {
    int yes;
    if (has_sweep(R, &yes, e)) return -1;
    if (!yes) return 0;
    qres q;
    /* setting '' (a database of one setting) shows as a dash */
    if (q_run(R, &q, "SELECT nullif(setting, ''), n_layers, n_seeds, n_models, n_scored, "
              "share_with_induction_head, n_curves, n_never_crossed, first_step_mean, "
              "first_step_sd, first_step_min, first_step_max, best_induction_mean, "
              "best_induction_min, best_induction_max, n_kcomp, kcomp_matches_interaction, "
              "n_copying, copying_agreement FROM sweep_summary", NULL, NULL, e))
        return -1;
    al_buf *h = &R->h;
    al_buf_puts(h, "<section id=\"across-seeds\"><h2>Across seeds</h2>\n<p>One row per setting "
                   "(the swept values other than the seed) and layer count, over its models "
                   "(view <code>sweep_summary</code>, docs/design.md &sect;6). Induction head: "
                   "best final induction score &gt; " AL_TH_STR(AL_TH_INDUCTION) " (the newest "
                   "scores run); first step: the first evaluation of training at which any "
                   "head's induction score exceeds " AL_TH_STR(AL_TH_INDUCTION) " (sd: sample sd); "
                   "K-comp: whether the K-composition pair of the largest score is the pair of "
                   "largest |interaction| in pair ablation (2-layer models); copying: the share of "
                   "heads whose copying_eigen and copying_ablation agree, mean over models.</p>\n");
    static const char *const heads[] = {
        "setting", "layers", "seeds", "models", "with scores", "induction head", "curves",
        "never crossed", "first step mean", "sd", "min", "max", "best induction mean", "min",
        "max", "K-comp models", "K-comp = top interaction", "copying models", "copying agree",
        NULL};
    if (q.nr) html_table(R, &q, heads, "siiii2ii00ii333i2i2");
    else al_buf_puts(h, "<p class=none>No model has a finished run.</p>\n");
    for (int r = 0; r < q.nr; r++) sweep_sentences(h, &q, r);
    q_free(&q);
    if (want_pic(R, "sweep-induction")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "sweep-induction";
        picture(R, NULL, &po, "across-seeds-induction.png",
                "Across seeds: each model's best induction score over training, one faint line "
                "per seed, their mean bold, one panel per setting and layer count.");
    }
    al_buf_puts(h, "</section>\n");
    return 0;
}

/* ------------------------------------------------------------ notebook */

static cJSON *nb_source(const char *text) {
    cJSON *arr = cJSON_CreateArray();
    char *clean = al_utf8_sanitize(text, strlen(text));
    if (!arr || !clean) {
        cJSON_Delete(arr);
        free(clean);
        return NULL;
    }
    /* nbformat keeps source as lines, each with its newline but the last */
    for (char *p = clean; *p;) {
        size_t n = strcspn(p, "\n");
        size_t k = n + (p[n] == '\n');
        char save = p[k];
        p[k] = 0;
        cJSON_AddItemToArray(arr, cJSON_CreateString(p));
        p[k] = save;
        p += k;
    }
    free(clean);
    return arr;
}

static int nb_cell(cJSON *cells, const char *type, const char *text) {
    cJSON *c = cJSON_CreateObject(), *src = nb_source(text);
    char id[32];
    if (!c || !src) {
        cJSON_Delete(c);
        cJSON_Delete(src);
        return -1;
    }
    snprintf(id, sizeof id, "cell-%d", cJSON_GetArraySize(cells) + 1);
    cJSON_AddStringToObject(c, "cell_type", type);
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddItemToObject(c, "metadata", cJSON_CreateObject());
    if (strcmp(type, "code") == 0) {
        cJSON_AddNullToObject(c, "execution_count");
        cJSON_AddItemToObject(c, "outputs", cJSON_CreateArray());
    }
    cJSON_AddItemToObject(c, "source", src);
    cJSON_AddItemToArray(cells, c);
    return 0;
}

/* The README's queries (its Circuits and Behaviour sections, patching
 * included). */
static const char *const nb_queries[][2] = {
    {"The most positive copying heads of every model, with the second copying score beside it",
     "SELECT m.path, s.name, round(s.copying_eigen, 3) AS copying_eigen,\n"
     "       round(s.copying_top1, 3) AS copying_top1\n"
     "FROM head_summary s JOIN models m USING (model_id)\n"
     "ORDER BY s.copying_eigen DESC LIMIT 5"},
    {"The top skip-trigrams of head 0.4 in the newest circuits run of each model",
     "SELECT t.model_id, t.rank, t.a_str || ' … ' || t.b_str || ' → ' || t.c_str AS trigram,\n"
     "       round(t.qk, 2) AS qk, round(t.ov, 2) AS ov, round(t.score, 2) AS score\n"
     "FROM skip_trigrams t JOIN latest_run r ON r.run_id = t.run_id AND r.kind = 'circuits'\n"
     "WHERE t.layer = 0 AND t.head = 4\n"
     "ORDER BY t.model_id, t.rank LIMIT 10"},
    {"The strongest K-composition pairs, with how many baseline standard deviations they stand out",
     "SELECT c.model_id, c.layer1 || '.' || c.head1 AS earlier, c.layer2 || '.' || c.head2 AS later,\n"
     "       round(c.score, 3) AS score, round(c.baseline, 3) AS random,\n"
     "       round((c.score - c.baseline) / c.baseline_sd, 1) AS sd_above\n"
     "FROM composition c JOIN latest_run r ON r.run_id = c.run_id AND r.kind = 'circuits'\n"
     "WHERE c.kind = 'K'\n"
     "ORDER BY sd_above DESC LIMIT 5"},
    {"Ranks per layer: each head's own (min/max over the layer's heads) and all heads together",
     "SELECT s.model_id, s.layer, min(s.qk_rank) AS qk_min, max(s.qk_rank) AS qk_max,\n"
     "       min(s.ov_rank) AS ov_min, round(avg(s.qk_effective_rank), 1) AS qk_eff,\n"
     "       (SELECT value FROM layer_scores l JOIN latest_run r ON r.run_id = l.run_id\n"
     "        WHERE r.kind = 'circuits' AND l.model_id = s.model_id AND l.layer = s.layer\n"
     "          AND l.metric = 'read_qk_rank') AS union_qk,\n"
     "       (SELECT value FROM layer_scores l JOIN latest_run r ON r.run_id = l.run_id\n"
     "        WHERE r.kind = 'circuits' AND l.model_id = s.model_id AND l.layer = s.layer\n"
     "          AND l.metric = 'write_o_rank') AS union_o\n"
     "FROM head_summary s GROUP BY s.model_id, s.layer"},
    {"Head-overlap matrix of layer 0's value spaces (row = head, columns = heads 0..7)",
     "SELECT head1 AS head, group_concat(printf('%.2f', value), ' ') AS overlap_with_0_to_7\n"
     "FROM (SELECT o.* FROM head_overlap o JOIN latest_run r ON r.run_id = o.run_id\n"
     "      WHERE r.kind = 'circuits' AND r.model_id = 1 AND o.layer = 0 AND o.space = 'v'\n"
     "      ORDER BY o.head1, o.head2)\n"
     "GROUP BY head1"},
    {"The singular-value spectrum of head 1.6's QK circuit, relative to its largest",
     "SELECT v.idx, round(v.value, 4) AS sigma,\n"
     "       round(v.value / first_value(v.value) OVER (ORDER BY v.idx), 4) AS relative\n"
     "FROM singular_values v JOIN latest_run r ON r.run_id = v.run_id AND r.kind = 'circuits'\n"
     "WHERE r.model_id = 1 AND v.layer = 1 AND v.head = 6 AND v.circuit = 'qk'\n"
     "ORDER BY v.idx"},
    {"Eigenvalues of a head's full OV circuit, and how much of their weight is real and positive",
     "SELECT e.layer || '.' || e.head AS head,\n"
     "       round(sum(e.re) / sum(sqrt(e.re * e.re + e.im * e.im)), 3) AS copying_eigen,\n"
     "       sum(e.im != 0) AS complex_ones, round(max(e.re), 2) AS largest_re\n"
     "FROM eigenvalues e JOIN latest_run r ON r.run_id = e.run_id AND r.kind = 'circuits'\n"
     "WHERE r.model_id = 1\n"
     "GROUP BY e.layer, e.head ORDER BY copying_eigen DESC"},
    {"Copying skip-trigrams (the output is the attended-to token, A = C) per head",
     "SELECT t.layer || '.' || t.head AS head, count(*) AS copying_trigrams,\n"
     "       group_concat(DISTINCT t.a_str) AS tokens\n"
     "FROM skip_trigrams t JOIN latest_run r ON r.run_id = t.run_id AND r.kind = 'circuits'\n"
     "WHERE r.model_id = 1 AND t.a = t.c\n"
     "GROUP BY t.layer, t.head ORDER BY copying_trigrams DESC"},
    {"Every trigram that predicts a given token (strings are stored exactly; ␣ is a leading space)",
     "SELECT t.layer || '.' || t.head AS head, t.a_str, t.b_str, round(t.score, 2) AS score\n"
     "FROM skip_trigrams t JOIN latest_run r ON r.run_id = t.run_id AND r.kind = 'circuits'\n"
     "WHERE t.c_str = '␣the' ORDER BY t.score DESC LIMIT 10"},
    {"Two models side by side (e.g. tied vs untied embeddings): mean copying score per layer",
     "SELECT m.path, m.tied_embeddings, s.layer, round(avg(s.copying_eigen), 3) AS mean_copying,\n"
     "       sum(s.copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) ") AS copying_heads\n"
     "FROM head_summary s JOIN models m USING (model_id)\n"
     "GROUP BY m.model_id, s.layer ORDER BY m.model_id, s.layer"},
    {"What ran, when, and what failed",
     "SELECT r.run_id, r.kind, r.status, r.started_at, r.finished_at, m.path, r.error\n"
     "FROM runs r LEFT JOIN models m USING (model_id)\n"
     "ORDER BY r.run_id DESC LIMIT 10"},
    {"How a metric changed between two analyses of the same model",
     "SELECT a.name, round(a.copying_eigen, 3) AS first, round(b.copying_eigen, 3) AS last\n"
     "FROM head_summary a JOIN head_summary b ON a.layer = b.layer AND a.head = b.head\n"
     "WHERE a.model_id = (SELECT min(model_id) FROM models)\n"
     "  AND b.model_id = (SELECT max(model_id) FROM models)\n"
     "ORDER BY abs(b.copying_eigen - a.copying_eigen) DESC LIMIT 5"},
    {"Induction heads (latest scores of each model)",
     "SELECT m.path, h.name, round(h.induction, 3) AS induction, round(h.prev_token, 3) AS prev_token\n"
     "FROM head_summary h JOIN models m USING (model_id)\n"
     "WHERE h.induction > " AL_TH_STR(AL_TH_INDUCTION) " ORDER BY h.induction DESC"},
    {"The pruning curve of the latest prune run: loss against heads left",
     "SELECT step, heads_left, layer || '.' || head AS removed, round(importance, 4) AS importance,\n"
     "       round(loss, 4) AS loss, round(delta_loss, 4) AS delta_loss\n"
     "FROM pruning_steps WHERE run_id = (SELECT max(run_id) FROM runs WHERE kind = 'prune' AND status = 'done')\n"
     "ORDER BY step"},
    {"Pair interactions on the probe, largest first, from the singles of the same run",
     "SELECT p.heads, round(p.delta_loss_probe - s1.delta_loss_probe - s2.delta_loss_probe, 4) AS interaction_probe\n"
     "FROM ablations p\n"
     "JOIN ablations s1 ON s1.run_id = p.run_id AND s1.kind = 'single'\n"
     "JOIN ablations s2 ON s2.run_id = p.run_id AND s2.kind = 'single'\n"
     "WHERE p.kind = 'pair' AND p.heads = s1.heads || ',' || s2.heads\n"
     "ORDER BY abs(interaction_probe) DESC LIMIT 10"},
    {"Heads whose three copying scores disagree",
     "SELECT model_id, name, round(copying_eigen, 3) AS eigen, round(copying_top1, 3) AS top1,\n"
     "       round(copying_ablation, 4) AS ablation\n"
     "FROM head_summary\n"
     "WHERE copying_eigen IS NOT NULL AND copying_ablation IS NOT NULL\n"
     "  AND ((copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) ") != (copying_top1 > "
     AL_TH_STR(AL_TH_COPY_EIGEN) ")\n"
     "       OR (copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) " OR copying_top1 > "
     AL_TH_STR(AL_TH_COPY_EIGEN) ") != (copying_ablation > " AL_TH_STR(AL_TH_COPY_ABLATION) "))\n"
     "ORDER BY copying_ablation DESC"},
    {"Which layer-0 head's path into which layer-1 head's keys carries the induction effect",
     "SELECT sender, receiver_layer || '.' || receiver_head AS receiver, round(value, 3) AS effect\n"
     "FROM path_patching\n"
     "WHERE channel = 'k' AND direction = 'noise' AND task = 'induction'\n"
     "  AND run_id = (SELECT max(run_id) FROM runs WHERE kind = 'paths' AND status = 'done')\n"
     "ORDER BY value DESC LIMIT 5"},
    {"The heads whose output restores induction on the corrupted input, per model",
     "SELECT p.model_id, p.layer || '.' || p.head AS head, round(p.value, 3) AS effect\n"
     "FROM patching p JOIN runs r ON r.run_id = p.run_id AND r.status = 'done'\n"
     "WHERE p.component = 'head' AND p.direction = 'denoise' AND p.task = 'induction'\n"
     "ORDER BY p.value DESC LIMIT 5"},
    {"Where a head's output matters: the strongest (head, position) of the newest head_pos run",
     "SELECT p.layer || '.' || p.head AS head, p.pos, round(p.value, 3) AS effect\n"
     "FROM patching p\n"
     "WHERE p.run_id = (SELECT max(x.run_id) FROM patching_runs x JOIN runs r USING (run_id)\n"
     "                  WHERE r.status = 'done' AND x.component = 'head_pos')\n"
     "ORDER BY abs(p.value) DESC LIMIT 10"},
    {"Findings across seeds: per setting and layer count (view sweep_summary)",
     "SELECT * FROM sweep_summary"},
    {"Every patching run with its two unpatched metrics",
     "SELECT x.run_id, r.kind, x.task, x.component, x.direction, x.n_pairs,\n"
     "       round(x.m_clean, 4) AS m_clean, round(x.m_corr, 4) AS m_corr\n"
     "FROM patching_runs x JOIN runs r USING (run_id) WHERE r.status = 'done' ORDER BY x.run_id"},
    {"Circuit discovery: kept edges against faithfulness, every circuit of every discover run",
     "SELECT x.run_id, x.method, x.tau, x.n_kept, x.n_edges, round(x.faithfulness, 3) AS faithfulness,\n"
     "       round(x.kl, 4) AS kl FROM circuit_runs x JOIN runs r USING (run_id)\n"
     "WHERE r.status = 'done' ORDER BY x.run_id, x.method, x.tau"},
    {"The newest ACDC circuit (its run's own --tau): kept edges, strongest first",
     "SELECT e.sender, coalesce(e.receiver_layer || '.' || e.receiver_head, 'logits') AS receiver,\n"
     "       e.channel, round(e.score, 4) AS score\n"
     "FROM circuit_edges e JOIN runs r USING (run_id)\n"
     "WHERE r.run_id = (SELECT max(x.run_id) FROM circuit_runs x JOIN runs q USING (run_id)\n"
     "                  WHERE q.status = 'done' AND x.method = 'acdc')\n"
     "  AND e.tau = json_extract(r.config_json, '$.tau') AND e.kept = 1\n"
     "ORDER BY e.score DESC"},
};

static const char nb_setup[] =
    "import sqlite3\n"
    "from IPython.display import Image, display\n"
    "\n"
    "con = sqlite3.connect(DB)\n"
    "\n"
    "def show(sql, params=(), limit=50):\n"
    "    \"\"\"Run a query and print its rows as an aligned table.\"\"\"\n"
    "    cur = con.execute(sql, params)\n"
    "    cols = [d[0] for d in cur.description]\n"
    "    rows = cur.fetchmany(limit)\n"
    "    fmt = lambda v: 'NULL' if v is None else ('%.4g' % v if isinstance(v, float) else str(v))\n"
    "    text = [[fmt(v) for v in r] for r in rows]\n"
    "    width = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(cols)]\n"
    "    print('  '.join(c.ljust(w) for c, w in zip(cols, width)))\n"
    "    for r in text:\n"
    "        print('  '.join(v.ljust(w) for v, w in zip(r, width)))\n"
    "    print('(%d row%s)' % (len(rows), '' if len(rows) == 1 else 's'))\n"
    "\n"
    "show('SELECT model_id, path, n_layers, tied_embeddings, n_params, final_val_loss FROM models')\n";

/* Path of the database as the notebook (in out_dir) should open it. */
static void db_for_notebook(const char *db, const char *out_dir, char *buf, size_t cap) {
    char *rd = realpath(db, NULL), *ro = realpath(out_dir, NULL);
    if (rd && ro) {
        size_t k = strlen(ro);
        if (strncmp(rd, ro, k) == 0 && rd[k] == '/' && !strchr(rd + k + 1, '/'))
            snprintf(buf, cap, "%s", rd + k + 1);
        else
            snprintf(buf, cap, "%s", rd);
    } else {
        snprintf(buf, cap, "%s", db);
    }
    free(rd);
    free(ro);
}

/* A Python string literal of s (ASCII-safe escapes for quotes and \). */
static void py_str(al_buf *b, const char *s) {
    al_buf_puts(b, "'");
    for (; *s; s++) {
        if (*s == '\\' || *s == '\'') al_buf_put(b, "\\", 1);
        if (*s == '\n') al_buf_puts(b, "\\n");
        else al_buf_put(b, s, 1);
    }
    al_buf_puts(b, "'");
}

static int write_notebook(rep *R, const char *title, char *path_out, al_err *e) {
    cJSON *nb = cJSON_CreateObject(), *cells = cJSON_CreateArray();
    al_buf t = AL_BUF_INIT;
    int rc = -1, io = 0; /* io: a file error already in e */
    if (!nb || !cells) goto done;
    char dbp[AL_PATH_MAX + 64];
    db_for_notebook(R->o->db, R->o->out_dir, dbp, sizeof dbp);
    al_buf_printf(&t, "# %s\n\nThe analysis behind `index.html`, to carry on in Python: the results "
                  "database (`%s`) opened with `sqlite3`, the README's queries, and the pictures. "
                  "Table and column meanings are in the README.", title, dbp);
    int bad = nb_cell(cells, "markdown", t.p);
    al_buf_reset(&t);
    al_buf_puts(&t, "DB = ");
    py_str(&t, dbp);
    al_buf_puts(&t, "  # relative to this notebook's folder\n");
    al_buf_puts(&t, nb_setup);
    bad |= nb_cell(cells, "code", t.p);
    for (size_t i = 0; !bad && i < sizeof nb_queries / sizeof nb_queries[0]; i++) {
        al_buf_reset(&t);
        al_buf_printf(&t, "### %s", nb_queries[i][0]);
        bad |= nb_cell(cells, "markdown", t.p);
        al_buf_reset(&t);
        al_buf_printf(&t, "show('''\n%s\n''')", nb_queries[i][1]);
        bad |= nb_cell(cells, "code", t.p);
    }
    if (R->n_pics && !bad) bad |= nb_cell(cells, "markdown", "## Pictures");
    for (int i = 0; !bad && i < R->n_pics; i++) {
        al_buf_reset(&t);
        al_buf_printf(&t, "`%s`: %s", R->pics[i].file, R->pics[i].caption);
        bad |= nb_cell(cells, "markdown", t.p);
        al_buf_reset(&t);
        al_buf_puts(&t, "display(Image(filename=");
        py_str(&t, R->pics[i].file);
        al_buf_puts(&t, "))");
        bad |= nb_cell(cells, "code", t.p);
    }
    if (bad || !al_buf_ok(&t)) goto done;
    cJSON *meta = cJSON_CreateObject(), *ks = cJSON_CreateObject(), *li = cJSON_CreateObject();
    cJSON_AddStringToObject(ks, "display_name", "Python 3");
    cJSON_AddStringToObject(ks, "language", "python");
    cJSON_AddStringToObject(ks, "name", "python3");
    cJSON_AddStringToObject(li, "name", "python");
    cJSON_AddItemToObject(meta, "kernelspec", ks);
    cJSON_AddItemToObject(meta, "language_info", li);
    cJSON_AddItemToObject(nb, "cells", cells);
    cells = NULL;
    cJSON_AddItemToObject(nb, "metadata", meta);
    cJSON_AddNumberToObject(nb, "nbformat", 4);
    cJSON_AddNumberToObject(nb, "nbformat_minor", 5);
    char *txt = cJSON_Print(nb);
    if (!txt) goto done;
    if (al_path_join(path_out, AL_PATH_MAX + 64, R->o->out_dir, "report.ipynb", e) == 0 &&
        al_write_file_atomic(path_out, txt, strlen(txt), e) == 0)
        rc = 0;
    else
        io = 1;
    free(txt);
done:
    if (rc && !io) al_errf(e, "out of memory writing report.ipynb");
    cJSON_Delete(cells);
    cJSON_Delete(nb);
    al_buf_free(&t);
    return rc;
}

/* ------------------------------------------------------------ driver */

static int write_page(rep *R, const char *title, al_report_result *res, al_err *e) {
    al_buf *h = &R->h;
    h_open(R, title);
    al_buf_puts(h, "<h1>");
    sb_esc(h, title);
    char when[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    al_buf_puts(h, "</h1>\n<p class=meta>attnlab " AL_VERSION " &middot; database <code>");
    sb_esc(h, R->o->db);
    al_buf_printf(h, "</code> &middot; %s &middot; the same numbers in <a href=\"report.ipynb\">"
                 "report.ipynb</a></p>\n", when);
    if (R->o->intro) {
        al_buf_puts(h, "<p>");
        sb_esc(h, R->o->intro);
        al_buf_puts(h, "</p>\n");
    }
    if (R->o->n_models > 1) {
        al_buf_puts(h, "<nav><b>Models:</b> ");
        for (int i = 0; i < R->o->n_models; i++) {
            al_buf_printf(h, "%s<a href=\"#model-", i ? " &middot; " : "");
            sb_esc(h, R->m[i].slug);
            al_buf_puts(h, "\">");
            sb_esc(h, R->m[i].label);
            al_buf_puts(h, "</a>");
        }
        al_buf_puts(h, "</nav>\n");
        if (sec_compare(R, e)) return -1;
    }
    if (sec_names(R, e) || sec_sweep(R, e)) return -1;
    for (int i = 0; i < R->o->n_models; i++)
        if (sec_model(R, &R->m[i], e)) return -1;
    if (R->o->interactive) al_viewer_script(h);
    al_buf_puts(h, "</body></html>\n");
    if (!al_buf_ok(h)) return al_errf(e, "out of memory building index.html");
    if (al_path_join(res->index_path, sizeof res->index_path, R->o->out_dir, "index.html", e))
        return -1;
    return al_write_file_atomic(res->index_path, h->p, h->n, e);
}

/* The pictures of the previous report in the folder are listed in
 * .report-pictures; those this report did not draw again (a head choice
 * or a model changed) are deleted, so the folder never shows a picture
 * the page does not. Only names the report itself wrote are touched:
 * plain "*.png" and "*.svg" names from the list, never anything else in
 * the folder. */
#define PIC_LIST ".report-pictures"

static int drawn(const rep *R, const char *file) {
    char svg[256];
    for (int i = 0; i < R->n_pics; i++)
        if (strcmp(R->pics[i].file, file) == 0 ||
            (R->o->figures == AL_FIG_SVG && svg_name(R->pics[i].file, svg, sizeof svg) &&
             strcmp(svg, file) == 0))
            return 1;
    return 0;
}

static int tidy_pictures(rep *R, al_err *e) {
    char path[AL_PATH_MAX + 320], old[AL_PATH_MAX + 320];
    unsigned char *txt = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", R->o->out_dir, PIC_LIST);
    if (al_file_exists(path) && al_read_file(path, &txt, &n, 1 << 20, NULL) == 0) {
        for (char *line = (char *)txt, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next) *next++ = 0;
            size_t k = strlen(line);
            if (k < 5 || strchr(line, '/') || line[0] == '.' ||
                (strcmp(line + k - 4, ".png") != 0 && strcmp(line + k - 4, ".svg") != 0) ||
                drawn(R, line))
                continue;
            /* a name too long for old would be cut to some other file's
             * name: never delete that */
            if (snprintf(old, sizeof old, "%s/%s", R->o->out_dir, line) >= (int)sizeof old)
                continue;
            if (unlink(old) == 0) R->n_removed++;
        }
        free(txt);
    }
    al_buf list = AL_BUF_INIT;
    for (int i = 0; i < R->n_pics; i++) {
        char svg[256];
        al_buf_printf(&list, "%s\n", R->pics[i].file);
        if (R->o->figures == AL_FIG_SVG && svg_name(R->pics[i].file, svg, sizeof svg))
            al_buf_printf(&list, "%s\n", svg);
    }
    int rc = !al_buf_ok(&list) ? al_errf(e, "out of memory")
                               : al_write_file_atomic(path, list.p ? list.p : "", list.n, e);
    al_buf_free(&list);
    return rc;
}

int al_report_write(const al_report_opts *o, al_report_result *res, al_err *e) {
    memset(res, 0, sizeof *res);
    if (o->n_models < 1 || o->n_models > AL_REPORT_MAX_MODELS)
        return al_errf(e, "report: give 1 to %d model directories", AL_REPORT_MAX_MODELS);
    if (!o->db || !al_file_exists(o->db)) return al_errf(e, "database %s does not exist", o->db ? o->db : "");
    if (!o->out_dir || al_mkdir_p(o->out_dir, e)) return o->out_dir ? -1 : al_errf(e, "report: no output folder");
    if (al_threads_check(o->threads, e)) return -1;
    rep *R = calloc(1, sizeof *R);
    if (!R) return al_errf(e, "out of memory");
    R->o = o;
    if (o->threads > 0) al_set_threads(o->threads);
    const char *title = o->title ? o->title : "attnlab report";
    int rc = al_store_open(o->db, &R->st, e);
    for (int i = 0; rc == 0 && i < o->n_models; i++) rc = load_model(R, i, e);
    if (rc == 0) rc = write_page(R, title, res, e);
    if (rc == 0) rc = write_notebook(R, title, res->notebook_path, e);
    if (rc == 0) rc = tidy_pictures(R, e);
    res->n_pictures = R->n_pics;
    res->n_removed = R->n_removed;
    res->n_failed = R->n_failed;
    al_store_close(R->st);
    free(R->pics);
    al_buf_free(&R->h);
    free(R);
    return rc;
}
