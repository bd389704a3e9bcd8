/* store_views.h -- the store's side of generic result shapes (view.h):
 * per-head views as head_scores rows, per-model views as model_scores
 * rows, per-head-pair, per-edge and per-position views as view_cells
 * rows, each under its metric name with a views row naming its shape and
 * title, so an analysis whose results take these shapes needs neither a
 * writer nor a reader of its own. */
#ifndef ATTNLAB_STORE_VIEWS_H
#define ATTNLAB_STORE_VIEWS_H

#include <stdint.h>
#include "attnlab/store.h"
#include "attnlab/util.h"
#include "attnlab/view.h"

/* Write n views of run `run` (model mid). Call inside the run's
 * transaction (it neither begins nor commits). Non-finite values are
 * stored as NULL (as every row writer does); a per-head-pair view stores
 * only its cells that have a value. 0, or -1 with e (a bad shape or size,
 * a missing label, a failed insert). */
int al_store_put_views(al_store *s, int64_t run, int64_t mid, const al_view *v, int n, al_err *e);

/* A view read back (al_store_read_view): v as the analysis gave it, its
 * metric, title, values and labels owned by this struct. */
typedef struct al_view_read {
    al_view v;
    char *metric, *title;
    double *val;
    char **from, **to; /* EDGE: n labels each */
} al_view_read;

/* View `metric` of run `run`, whatever its shape: the shape and title
 * from table views, the values from head_scores, model_scores or
 * view_cells. L, H are the model's: a per-head view comes back as L*H
 * values and a pair view as (L*H)^2, NaN where nothing is stored (cells
 * outside L x H are ignored); a per-position view has one value per
 * position up to the last stored (NaN for a gap); edges keep their
 * order. *found = 0 (out zeroed) when the run has no such view. 0, or -1
 * with e (out zeroed). Free out with al_view_read_free. */
int al_store_read_view(al_store *s, long run, const char *metric, int L, int H, al_view_read *out,
                       int *found, al_err *e);
/* Frees what r owns and zeroes it; a zeroed r is fine. */
void al_view_read_free(al_view_read *r);

/* "head", "model", "pair", "edge" or "pos" (the views.shape text); NULL
 * for a value outside the enum. */
const char *al_view_shape_name(al_view_shape s);
/* The shape named t (as above); -1 if none (or t NULL). */
int al_view_shape_of(const char *t);

#endif
