/* report.c -- the driver of `attnlab report` (see report.h): loads the
 * models, walks one table of sections, writes index.html and
 * report.ipynb and tidies the pictures of an earlier report.
 *
 * The page is built in memory (an al_buf, which remembers running out of
 * memory instead of failing at every call) and written with one atomic
 * rename at the end. The sections (sec_*.c) read the database through
 * store_report.h and share the HTML helpers of html.c and figure.c;
 * pictures are drawn into the same folder, so the page refers to them by
 * bare file name. */
#define _XOPEN_SOURCE 700 /* gmtime_r */
#include "report_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attnlab/plot.h"
#include "attnlab/viewer.h"

al_report_opts al_report_defaults(void) {
    al_report_opts o;
    memset(&o, 0, sizeof o);
    o.repeat = 20;
    o.top_n = 30;
    return o;
}

/* ------------------------------------------------------------ models */

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
    rep_slug(M->label, M->slug, sizeof M->slug);
    for (int j = 0; j < i; j++) /* two folders of the same name: keep files apart */
        if (strcmp(R->m[j].slug, M->slug) == 0) {
            size_t k = strlen(M->slug);
            snprintf(M->slug + (k < 100 ? k : 100), 28, "-%d", i + 1);
        }
    double id;
    if (al_sr_model_id(R->st, M->sha, &id, e)) return -1;
    M->in_db = !isnan(id);
    snprintf(M->mid, sizeof M->mid, "%.0f", M->in_db ? id : 0.0);
    return 0;
}

/* ---------------------------------------------------------- sections */

/* The explorers of --interactive, last in a model's section. */
static int sec_explorers(rep *R, const rmodel *M, al_err *e) {
    if (!R->o->interactive) return 0;
    al_viewer_model vm = {M->dir, M->label, M->slug, M->in_db ? M->mid : NULL, R->o->prompt};
    return al_viewer_model_block(&R->h, R->st, &vm, e);
}

/* Where a section goes: once, before the models, or once per model. */
typedef enum { ONCE, PER_MODEL } sec_scope;

typedef struct sec_desc {
    const char *name; /* what it shows */
    const char *family; /* the file it lives in: sec_FAMILY.c */
    sec_scope scope;
    int (*fn)(rep *R, const rmodel *M, al_err *e); /* M NULL for ONCE */
} sec_desc;

/* The page, top to bottom. A new section is one row here and a function
 * in its family's file. */
static const sec_desc SECTIONS[] = {
    {"models compared", "compare", ONCE, sec_compare},
    {"names table", "behaviour", ONCE, sec_names},
    {"across seeds", "sweep", ONCE, sec_sweep},
    {"model card", "model", PER_MODEL, sec_card},
    {"warnings", "model", PER_MODEL, sec_warnings},
    {"training", "model", PER_MODEL, sec_training},
    {"heads at a glance", "weights", PER_MODEL, sec_heads},
    {"head kinds", "weights", PER_MODEL, sec_kinds},
    {"copying: weights vs behaviour", "weights", PER_MODEL, sec_copying},
    {"skip-trigrams", "weights", PER_MODEL, sec_trigrams},
    {"composition", "weights", PER_MODEL, sec_composition},
    {"ablation", "behaviour", PER_MODEL, sec_ablation},
    {"pruning", "behaviour", PER_MODEL, sec_pruning},
    {"patching", "patching", PER_MODEL, sec_patching},
    {"circuit", "circuit", PER_MODEL, sec_circuit},
    {"attribution", "attribution", PER_MODEL, sec_attribution},
    {"sparse autoencoders", "sae", PER_MODEL, sec_sae},
    {"per-head results", "views", PER_MODEL, sec_views},
    {"attention patterns and circuits", "weights", PER_MODEL, sec_pictures},
    {"explorers", "report", PER_MODEL, sec_explorers},
};
#define N_SECTIONS (sizeof SECTIONS / sizeof SECTIONS[0])

/* One model's <section>: its heading, then every PER_MODEL section. */
static int model_sections(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<section id=\"model-");
    rep_esc(h, M->slug);
    al_buf_puts(h, "\"><h2>Model ");
    rep_esc(h, M->label);
    al_buf_puts(h, "</h2>\n");
    if (!M->in_db)
        al_buf_puts(
            h, "<p class=warn>These weights have no rows in the database (their sha256 is not "
               "in table models): only the pictures computed from the weights are shown.</p>\n");
    for (size_t k = 0; k < N_SECTIONS; k++)
        if (SECTIONS[k].scope == PER_MODEL && SECTIONS[k].fn(R, M, e)) return -1;
    al_buf_puts(h, "</section>\n");
    return 0;
}

/* ------------------------------------------------------------ driver */

static int write_page(rep *R, const char *title, al_report_result *res, al_err *e) {
    al_buf *h = &R->h;
    rep_open(R, title);
    al_buf_puts(h, "<h1>");
    rep_esc(h, title);
    char when[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    al_buf_puts(h, "</h1>\n<p class=meta>attnlab " AL_VERSION " &middot; database <code>");
    rep_esc(h, R->o->db);
    al_buf_printf(h,
                  "</code> &middot; %s &middot; the same numbers in <a href=\"report.ipynb\">"
                  "report.ipynb</a></p>\n",
                  when);
    if (R->o->intro) {
        al_buf_puts(h, "<p>");
        rep_esc(h, R->o->intro);
        al_buf_puts(h, "</p>\n");
    }
    for (size_t k = 0; k < N_SECTIONS; k++)
        if (SECTIONS[k].scope == ONCE && SECTIONS[k].fn(R, NULL, e)) return -1;
    for (int i = 0; i < R->o->n_models; i++)
        if (model_sections(R, &R->m[i], e)) return -1;
    if (R->o->interactive) al_viewer_script(h);
    al_buf_puts(h, "</body></html>\n");
    if (!al_buf_ok(h)) return al_errf(e, "out of memory building index.html");
    if (al_path_join(res->index_path, sizeof res->index_path, R->dir, "index.html", e) ||
        al_write_file_atomic(res->index_path, h->p, h->n, e))
        return -1;
    return al_path_join(res->index_path, sizeof res->index_path, R->o->out_dir, "index.html", e);
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
            (R->o->figures == AL_FIG_SVG && rep_svg_name(R->pics[i].file, svg, sizeof svg) &&
             strcmp(svg, file) == 0))
            return 1;
    return 0;
}

/* The previous report's list (NULL when there is none or it cannot be
 * read: tidying is best effort), read before the new files replace it. */
static char *old_pictures(const rep *R) {
    char path[AL_PATH_MAX + 320];
    unsigned char *txt = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", R->o->out_dir, PIC_LIST);
    if (!al_file_exists(path) || al_read_file(path, &txt, &n, 1 << 20, NULL) != 0) return NULL;
    return (char *)txt;
}

/* Delete the pictures of list `old` (old_pictures) this report did not
 * draw again. */
static void tidy_pictures(rep *R, char *old) {
    char path[AL_PATH_MAX + 320];
    for (char *line = old, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        size_t k = strlen(line);
        if (k < 5 || strchr(line, '/') || line[0] == '.' ||
            (strcmp(line + k - 4, ".png") != 0 && strcmp(line + k - 4, ".svg") != 0) ||
            drawn(R, line))
            continue;
        /* a name too long for path would be cut to some other file's
         * name: never delete that */
        if (snprintf(path, sizeof path, "%s/%s", R->o->out_dir, line) >= (int)sizeof path) continue;
        if (unlink(path) == 0) R->n_removed++;
    }
}

/* This report's list of pictures, into the staging folder. */
static int write_pic_list(rep *R, al_err *e) {
    char path[AL_PATH_MAX + 320];
    snprintf(path, sizeof path, "%s/%s", R->dir, PIC_LIST);
    al_buf list = AL_BUF_INIT;
    for (int i = 0; i < R->n_pics; i++) {
        char svg[256];
        al_buf_printf(&list, "%s\n", R->pics[i].file);
        if (R->o->figures == AL_FIG_SVG && rep_svg_name(R->pics[i].file, svg, sizeof svg))
            al_buf_printf(&list, "%s\n", svg);
    }
    int rc = !al_buf_ok(&list) ? al_errf(e, "out of memory")
                               : al_write_file_atomic(path, list.p ? list.p : "", list.n, e);
    al_buf_free(&list);
    return rc;
}

/* The report is written into a staging folder inside the output folder
 * (".report.tmp.<pid>": the same file system, so each file is renamed
 * into place), and its files are moved out only when all of them are
 * written, index.html last: a report that fails leaves the output folder
 * as it was, and removes it when the report made it. A staging folder
 * whose process is gone (a killed report) is removed by the next report
 * into the same folder. */
#define STAGE_PREFIX ".report.tmp."

static int dot_entry(const char *name) { return !strcmp(name, ".") || !strcmp(name, ".."); }

/* Remove the staging folders of reports whose process is gone. */
static void stage_sweep(const char *out) {
    DIR *d = opendir(out);
    if (!d) return;
    struct dirent *de;
    char p[AL_PATH_MAX + 320];
    const size_t k = strlen(STAGE_PREFIX);
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, STAGE_PREFIX, k) != 0) continue;
        char *end;
        long pid = strtol(de->d_name + k, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* still running */
        if (snprintf(p, sizeof p, "%s/%s", out, de->d_name) < (int)sizeof p) al_remove_made_dir(p);
    }
    closedir(d);
}

/* Move every file of the staging folder (the picture list among them)
 * into the output folder, index.html last, then remove the staging
 * folder. */
static int stage_commit(rep *R, al_err *e) {
    DIR *d = opendir(R->dir);
    if (!d) return al_errf(e, "cannot read %s: %s", R->dir, strerror(errno));
    struct dirent *de;
    char from[AL_PATH_MAX + 320], to[AL_PATH_MAX + 320];
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        rewinddir(d);
        while (rc == 0 && (de = readdir(d)) != NULL) {
            if (dot_entry(de->d_name) || (strcmp(de->d_name, "index.html") == 0) != pass) continue;
            if (snprintf(from, sizeof from, "%s/%s", R->dir, de->d_name) >= (int)sizeof from ||
                snprintf(to, sizeof to, "%s/%s", R->o->out_dir, de->d_name) >= (int)sizeof to)
                rc = al_errf(e, "report: path too long for %s", de->d_name);
            else if (rename(from, to) != 0)
                rc = al_errf(e, "cannot move %s into %s: %s", de->d_name, R->o->out_dir,
                             strerror(errno));
        }
    }
    closedir(d);
    if (rc == 0) rmdir(R->dir);
    return rc;
}

int al_report_write(const al_report_opts *o, al_report_result *res, al_err *e) {
    memset(res, 0, sizeof *res);
    if (o->n_models < 1 || o->n_models > AL_REPORT_MAX_MODELS)
        return al_errf(e, "report: give 1 to %d model directories", AL_REPORT_MAX_MODELS);
    if (!o->db || !al_file_exists(o->db))
        return al_errf(e, "database %s does not exist", o->db ? o->db : "");
    if (!o->out_dir) return al_errf(e, "report: no output folder");
    if (al_threads_check(o->threads, e)) return -1;
    rep *R = al_calloc(1, sizeof *R, e);
    if (!R) return -1;
    R->o = o;
    const int made = !al_file_exists(o->out_dir);
    if (snprintf(R->dir, sizeof R->dir, "%s/" STAGE_PREFIX "%ld", o->out_dir, (long)getpid()) >=
        (int)sizeof R->dir) {
        free(R);
        return al_errf(e, "report: output folder path too long");
    }
    if (al_mkdir_p(o->out_dir, e) || al_mkdir_p(R->dir, e)) {
        if (made) rmdir(o->out_dir);
        free(R);
        return -1;
    }
    stage_sweep(o->out_dir);
    if (o->threads > 0) al_set_threads(o->threads);
    const char *title = o->title ? o->title : "attnlab report";
    int rc = al_store_open_read(o->db, &R->st, e);
    for (int i = 0; rc == 0 && i < o->n_models; i++) rc = load_model(R, i, e);
    if (rc == 0) rc = write_page(R, title, res, e);
    if (rc == 0) rc = rep_write_notebook(R, title, res->notebook_path, e);
    if (rc == 0) rc = write_pic_list(R, e);
    char *old = rc == 0 ? old_pictures(R) : NULL;
    if (rc == 0) rc = stage_commit(R, e);
    if (rc == 0) tidy_pictures(R, old);
    free(old);
    if (rc != 0) {
        al_remove_made_dir(R->dir);
        if (made) rmdir(o->out_dir);
    }
    res->n_pictures = R->n_pics;
    res->n_removed = R->n_removed;
    res->n_failed = R->n_failed;
    al_store_close(R->st);
    free(R->pics);
    al_buf_free(&R->h);
    free(R);
    return rc;
}
