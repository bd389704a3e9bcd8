/* report.h -- a static HTML report and a Jupyter notebook from the
 * results database (docs/design.md §7).
 *
 * al_report_write draws every picture a model's rows allow (through
 * pictures.h, into the output folder) and writes, beside them:
 *
 *   index.html    one page, no JavaScript and no network: inline CSS,
 *                 <img src="NAME.png"> relative to the page. Per model:
 *                 the model card, the training curve, the head summary,
 *                 induction / previous-token / copying heads, whether the
 *                 weight-based and ablation-based copying scores agree,
 *                 skip-trigrams, composition, ablation, pruning,
 *                 patching, the circuit (the newest discover run: the
 *                 circuit its picture draws, its size and faithfulness,
 *                 the heads in it against the previous-token and
 *                 induction heads head_summary names, its picture and
 *                 the tau sweep's curve), attribution (the newest attribute run: its
 *                 pictures, path-expansion kinds, logit lens, agreement
 *                 and whether virtual heads matter, against
 *                 AL_TH_VIRTUAL_SHARE), sparse autoencoders (each finished
 *                 sae train run's evaluation with warnings where a number
 *                 misleads; each sae features run's densest features,
 *                 their dashboards and the head x feature picture) and
 *                 the pictures. With several models a comparison comes first,
 *                 including the tied-vs-untied answer when both kinds are
 *                 present. A database holding a sweep (merge_sources rows,
 *                 or several seeds of one setting and layer count) gets an
 *                 "Across seeds" section before the models: the
 *                 sweep_summary view, sentences from its numbers and the
 *                 sweep-induction picture.
 *   report.ipynb  nbformat 4.5: cells that open the database with
 *                 Python's sqlite3, run the queries of docs/sql.md and show the
 *                 pictures, to carry the analysis on in Jupyter.
 *
 * Every token string is HTML-escaped (they hold quotes, <, & and stray
 * bytes); both files are written atomically. */
#ifndef ATTNLAB_REPORT_H
#define ATTNLAB_REPORT_H

#include "attnlab/util.h"

#define AL_REPORT_MAX_MODELS 16

typedef struct al_report_opts {
    const char *db; /* results database (must exist) */
    const char *models[AL_REPORT_MAX_MODELS]; /* model directories */
    const char *labels[AL_REPORT_MAX_MODELS]; /* names shown (NULL: the folder name) */
    int n_models;
    const char *out_dir; /* created if missing */
    const char *title; /* NULL: "attnlab report" */
    const char *intro; /* a paragraph under the title, or NULL */
    const char *prompt; /* attention pictures on this text (NULL: none) */
    int repeat; /* attention on BOS + N random tokens twice (0: none) */
    const char *data; /* token file: qk/ov show its most frequent tokens (NULL: BPE order) */
    int top_n; /* tokens in qk/ov pictures */
    const char *pictures; /* comma list of picture kinds to draw (NULL: all) */
    int threads; /* 0: default */
    int interactive; /* add the explorers (viewer.h); 0: the static page only */
    int figures; /* AL_FIG_PNG (0) or AL_FIG_SVG (plot.h): the page's <img> show
                              SVGs drawn beside the PNGs (which the notebook shows) */
} al_report_opts;

al_report_opts al_report_defaults(void);

typedef struct al_report_result {
    int n_pictures; /* PNGs written */
    int n_failed; /* pictures that could not be drawn (warned on stderr) */
    int n_removed; /* pictures of an earlier report no longer drawn, deleted */
    char index_path[AL_PATH_MAX + 64], notebook_path[AL_PATH_MAX + 64];
} al_report_result;

/* Draw the pictures and write index.html and report.ipynb into o->out_dir
 * (and the list .report-pictures: pictures of the previous report there
 * that this one did not draw are deleted).
 * A picture that fails is reported (stderr and the page) and counted, not
 * fatal; a bad database, model or output folder is. */
int al_report_write(const al_report_opts *o, al_report_result *r, al_err *e);

/* ---- pieces, for tests ---- */

/* s (n bytes, any content) as HTML text: & < > " ' as entities, valid
 * UTF-8 kept, control bytes (but \n, \t) and invalid UTF-8 as the text
 * \xNN. Caller frees; NULL when out of memory. */
char *al_html_escape(const char *s, size_t n);
/* s (n bytes) with invalid UTF-8 bytes replaced by U+FFFD, so JSON
 * writers emit valid UTF-8. Caller frees. */
char *al_utf8_sanitize(const char *s, size_t n);

#endif
