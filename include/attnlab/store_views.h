/* store_views.h -- the store's side of generic result shapes (view.h):
 * per-head views as head_scores rows and per-model views as model_scores
 * rows, under their metric names, so an analysis whose results take
 * these shapes needs no writer of its own. */
#ifndef ATTNLAB_STORE_VIEWS_H
#define ATTNLAB_STORE_VIEWS_H

#include <stdint.h>
#include "attnlab/store.h"
#include "attnlab/util.h"
#include "attnlab/view.h"

/* Write n views of run `run` (model mid). Call inside the run's
 * transaction (it neither begins nor commits). Non-finite values are
 * stored as NULL (as every row writer does). 0, or -1 with e (a bad
 * shape, a failed insert). */
int al_store_put_views(al_store *s, int64_t run, int64_t mid, const al_view *v, int n,
                       al_err *e);

#endif
