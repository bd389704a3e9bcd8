/* report_internal.h -- layer: report. Shared by the files of the report
 * (the .c files of src/report/) only: the page being built, the HTML helpers, the
 * figures and the sections the driver (report.c) walks.
 *
 * The sections read the database through store_report.h's readers and
 * write HTML into R->h; every string from the database or the user goes
 * through rep_esc. A section returns 0, or -1 with e set for a failing
 * query or running out of memory (a picture that cannot be drawn is a
 * warning, not a failure). */
#ifndef ATTNLAB_REPORT_INTERNAL_H
#define ATTNLAB_REPORT_INTERNAL_H

#include "attnlab/buf.h"
#include "attnlab/config.h"
#include "attnlab/pictures.h"
#include "attnlab/report.h"
#include "attnlab/store.h"
#include "attnlab/store_report.h"

/* A picture on the page, listed again in the notebook. */
typedef struct pic_ref {
    char file[256];
    char caption[512];
} pic_ref;

/* One model of the report. */
typedef struct rmodel {
    const char *dir;
    char label[128], slug[128];
    char sha[65], mid[32]; /* mid: model_id as text ("0" if not in the db) */
    al_config cfg;
    int in_db;
} rmodel;

/* The report being written. */
typedef struct rep {
    const al_report_opts *o;
    al_store *st;
    al_buf h; /* index.html */
    rmodel m[AL_REPORT_MAX_MODELS];
    pic_ref *pics;
    int n_pics, cap_pics, n_failed, n_removed;
    /* where the files are written: a staging folder in the output folder,
     * renamed into it only when the whole report is written (report.c) */
    char dir[AL_PATH_MAX + 64];
} rep;

/* ---- html.c: escaping, tables, the page head ---- */

/* s as HTML text (see al_html_escape); NULL s writes nothing. */
void rep_esc(al_buf *b, const char *s);
/* The rows of q as a table: heads[c] names column c (NULL ends the
 * columns shown), fmt[c] its cell format:
 *   s text   i integer   0/2/3/4 decimals   + signed 4 decimals   g %.4g
 *   I / C / A: 3 decimals, 3 decimals, signed 4 decimals, highlighted
 *   above the induction-or-previous-token / copying_eigen / ablation
 *   thresholds. SQL NULL is a dash. */
void rep_table(rep *R, const al_rows *q, const char *const *heads, const char *fmt);
/* q as a table, or the paragraph none (NULL: nothing) when it has no
 * rows; then frees q. rc is the reader's return: -1 is passed on (q is
 * already empty). Returns the rows shown, or -1. */
int rep_rows_table(rep *R, int rc, al_rows *q, const char *const *heads, const char *fmt,
                   const char *none);
/* <!DOCTYPE> to <body>: title, CSS, and the explorers' CSP when
 * interactive. */
void rep_open(rep *R, const char *title);
/* A two-cell row of the model card table. */
void rep_card_row(al_buf *h, const char *k, const char *v);

/* ---- figure.c: pictures drawn into the folder, as <figure> ---- */

/* Whether the report draws picture kind (opts.pictures). */
int rep_want_pic(const rep *R, const char *kind);
/* Draw one picture of model M (NULL: of the whole database) as file in
 * the output folder and put it on the page (and in R->pics); with
 * --figures svg also NAME.svg, shown instead. A failure is a warning on
 * stderr and the page, counted in R->n_failed. */
void rep_picture(rep *R, const rmodel *M, al_pic_opts *po, const char *file, const char *caption);
/* Picture `kind` of one run (po->run_id) as "<model>-<kind>-<slug>.png"
 * when the report draws that kind. */
void rep_run_picture(rep *R, const rmodel *M, al_pic_opts *po, const char *kind, const char *slug,
                     const char *caption);
/* "NAME.svg" for "NAME.png" into buf; 0 if file does not end in .png. */
int rep_svg_name(const char *file, char *buf, size_t cap);
/* s with every byte but [A-Za-z0-9._-] as '_' ("model" if empty or
 * starting with '.'); out may be s. */
void rep_slug(const char *s, char *out, size_t cap);

/* ---- notebook.c ---- */

/* report.ipynb into the output folder (path into path_out); 0 or -1. */
int rep_write_notebook(rep *R, const char *title, char *path_out, al_err *e);

/* ---- sections (the driver's table in report.c) ---- */

/* Agreement of copying_eigen with an ablation score over a model's heads
 * (sec_weights.c; the comparison uses it too). excess: 0 for
 * copying_ablation, 1 for copying_ablation_excess. */
typedef struct rep_agree {
    int n, agree, abl_copy, abl_copy_neg;
    double rho;
    const char *col;
    char neg[512];
} rep_agree;
int rep_copy_agreement(rep *R, const rmodel *M, int excess, rep_agree *a, al_err *e);

/* Sections of the whole database: M is NULL. */
int sec_compare(rep *R, const rmodel *M, al_err *e); /* sec_compare.c */
int sec_names(rep *R, const rmodel *M, al_err *e); /* sec_behaviour.c */
int sec_sweep(rep *R, const rmodel *M, al_err *e); /* sec_sweep.c */
/* Sections of one model. */
int sec_card(rep *R, const rmodel *M, al_err *e); /* sec_model.c */
int sec_training(rep *R, const rmodel *M, al_err *e);
int sec_warnings(rep *R, const rmodel *M, al_err *e);
int sec_views(rep *R, const rmodel *M, al_err *e); /* sec_views.c */
int sec_heads(rep *R, const rmodel *M, al_err *e); /* sec_weights.c */
int sec_kinds(rep *R, const rmodel *M, al_err *e); /* sec_weights.c */
int sec_copying(rep *R, const rmodel *M, al_err *e); /* sec_weights.c */
int sec_trigrams(rep *R, const rmodel *M, al_err *e); /* sec_weights.c */
int sec_composition(rep *R, const rmodel *M, al_err *e); /* sec_weights.c */
int sec_ablation(rep *R, const rmodel *M, al_err *e); /* sec_behaviour.c */
int sec_pruning(rep *R, const rmodel *M, al_err *e); /* sec_behaviour.c */
int sec_patching(rep *R, const rmodel *M, al_err *e); /* sec_patching.c */
int sec_circuit(rep *R, const rmodel *M, al_err *e); /* sec_circuit.c */
int sec_attribution(rep *R, const rmodel *M, al_err *e); /* sec_attribution.c */
int sec_sae(rep *R, const rmodel *M, al_err *e); /* sec_sae.c */
int sec_pictures(rep *R, const rmodel *M, al_err *e); /* sec_weights.c */

#endif
