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
 * per per-model view, then each per-head-pair, per-edge and per-position
 * view as a heading line ("METRIC (TITLE): N ...") and one line per value
 * (a pair's cells that have one, every edge in order, every position),
 * on f. off (L*H flags, may be NULL) marks heads a mask turned off ("off"
 * after the row). */
void al_views_print(FILE *f, const al_view *v, int n, const unsigned char *off);
/* Added to doc: "heads": [{"head": "l.h", METRIC: value, ...}, ...] for
 * the per-head views, one number per per-model view under its metric,
 * and one object per view of the other shapes under its metric:
 * {"shape": "pair"|"edge"|"pos", "title", and "cells" (pair: the cells
 * with a value) or "edges" (every edge), each {"sender", "receiver",
 * "value"}, or "values" (pos: one per position)}; a value that is not
 * finite is null (docs/json.md). 0, or -1 when out of memory. */
int al_views_json(struct cJSON *doc, const al_view *v, int n);

#endif
