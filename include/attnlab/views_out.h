/* views_out.h -- layer: cli
 * Generic result shapes (view.h) on the command line: the text table and
 * the --json part every analysis whose results are views prints the same
 * way, so such an analysis writes no printer of its own. */
#ifndef ATTNLAB_VIEWS_OUT_H
#define ATTNLAB_VIEWS_OUT_H

#include <stdio.h>
#include "attnlab/view.h"

struct cJSON;

/* One row per head ("l.h" and each per-head view's value), then one line
 * per per-model view, on f. off (L*H flags, may be NULL) marks heads a
 * mask turned off ("off" after the row). */
void al_views_print(FILE *f, const al_view *v, int n, const unsigned char *off);
/* "heads": [{"head": "l.h", METRIC: value, ...}, ...] and one key per
 * per-model view, added to doc. 0, or -1 when out of memory. */
int al_views_json(struct cJSON *doc, const al_view *v, int n);

#endif
