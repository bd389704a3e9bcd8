/* viewer.h -- the explorers of `attnlab report --interactive` (docs/design.md §8,
 * "The interactive page").
 *
 * The report (src/report/: html.c and the driver) calls these hooks only when asked for an
 * interactive page; without it the page is the static one, byte for
 * byte. What they add stays a single folder with no network access:
 *
 *   - a Content-Security-Policy meta tag that allows inline scripts and
 *     styles and the pictures beside the page, and nothing else (no
 *     fetch, no remote script, style, font or frame);
 *   - per model, an "Explorers" block whose data is one inline JSON
 *     element, <script type="application/json" id="al-data-SLUG">:
 *     attention of every head on the prompt (a T×T matrix per head,
 *     lower triangle, 4 decimals), the prompt's tokens with each one's
 *     probability and loss given the tokens before it and the model's
 *     top-5 predictions at that position, and heatmaps built from the
 *     database rows of the newest patching, path patching, logit
 *     attribution and attribution patching runs (the values as stored),
 *     and every finished `sae features` run's densest features with
 *     their contexts, logit effects and head attribution (the features
 *     browser);
 *   - one inline script that draws the explorers from that data.
 *
 * Data is never markup: the JSON text has <, >, &, U+2028 and U+2029
 * written as \u escapes (so nothing inside can close the script element
 * or be read as HTML), and the script inserts every string with
 * textContent, never innerHTML. */
#ifndef ATTNLAB_VIEWER_H
#define ATTNLAB_VIEWER_H

#include "attnlab/buf.h"
#include "attnlab/store.h"
#include "attnlab/util.h"

/* The attention explorer keeps at most this many prompt tokens (the last
 * ones): L·H·T(T+1)/2 numbers must stay a sane page size. */
#define AL_VIEWER_MAX_T 128
/* The features browser holds at most this many features of each `sae
 * features` run (the densest): each brings its contexts, logit effects
 * and heads, about 1 KB. */
#define AL_VIEWER_SAE_MAX 256

/* The CSP meta tag and the explorers' CSS; goes in <head>, before any
 * other resource. */
void al_viewer_head(al_buf *h);

/* What the explorers of one model show. */
typedef struct al_viewer_model {
    const char *dir; /* model directory (weights and tokenizer) */
    const char *label; /* name shown */
    const char *slug; /* [A-Za-z0-9._-], unique on the page: element ids */
    const char *model_id; /* models.model_id as text; "0" or NULL: not in the db */
    const char *prompt; /* attention and loss on this text; NULL: no such explorers */
} al_viewer_model;

/* The explorers block of one model (section heading, the JSON data
 * element, the empty containers the script fills; hidden until the
 * script runs, never printed). A model or prompt that cannot be run is a
 * note on the page and a warning on stderr, not an error; -1 with e only
 * for a failing database query or running out of memory. */
int al_viewer_model_block(al_buf *h, al_store *st, const al_viewer_model *vm, al_err *e);

/* The one inline script; goes just before </body>. */
void al_viewer_script(al_buf *h);

/* json (cJSON's output, valid UTF-8) made safe inside a <script> element:
 * < > & as \u003c \u003e \u0026 and U+2028 U+2029 as \u2028 \u2029.
 * Outside strings JSON has none of these, so the result is the same JSON
 * value. Caller frees; NULL when out of memory. */
char *al_viewer_json_for_html(const char *json);

#endif
