/* views_out.h -- layer: cli
 * Generic result shapes (view.h) on the command line: the part of the
 * run's JSON document every analysis whose results are views writes the
 * same way, and its text table drawn from that document, so such an
 * analysis writes no printer of its own. */
#ifndef ATTNLAB_VIEWS_OUT_H
#define ATTNLAB_VIEWS_OUT_H

#include <stdio.h>
#include "attnlab/view.h"

struct cJSON;

/* Added to doc: "heads": [{"head": "l.h", "off": mask, METRIC: value,
 * ...}, ...] for the per-head views (off: L*H flags of the heads a mask
 * turned off, may be NULL), one number per per-model view under its
 * metric, and one object per view of the other shapes under its metric:
 * {"shape": "pair"|"edge"|"pos", "title", and "cells" (pair: the cells
 * with a value) or "edges" (every edge), each {"sender", "receiver",
 * "value"}, or "values" (pos: one per position)}; a value that is not
 * finite is null (docs/json.md). The views' order and titles:
 * "head_metrics" and "model_metrics" ([{"metric", "title"}]) and
 * "shaped_metrics" (the other views' metrics). 0, or -1 when out of
 * memory. */
int al_views_json(struct cJSON *doc, const al_view *v, int n, const unsigned char *off);
/* That part of doc as text on f: one row per head ("l.h" and each
 * per-head view's value, "off" after a masked head's row) and each
 * per-head view's title, then one line per per-model view, then each
 * per-head-pair, per-edge and per-position view as a heading line
 * ("METRIC (TITLE): N ...") and one line per value. */
void al_views_text(FILE *f, const struct cJSON *doc);

#endif
