/* view.h -- layer: core
 * A result in a generic shape, so that storing, drawing and reporting it
 * needs no code of its own.
 *
 * An analysis whose results are per-head numbers (one per head, e.g. an
 * attention statistic) or per-model numbers (one per run) describes each
 * as an al_view that borrows the result's array. The store writes views
 * as head_scores / model_scores rows under their metric name
 * (al_store_put_views), and the pictures and the report find those
 * metrics in the database by run kind, with the title stored beside them,
 * so a new analysis of these shapes adds no code below the CLI. */
#ifndef ATTNLAB_VIEW_H
#define ATTNLAB_VIEW_H

typedef enum {
    AL_VIEW_HEAD, /* (L, H): one value per head, row-major by layer */
    AL_VIEW_MODEL /* one value */
} al_view_shape;

typedef struct al_view {
    const char *metric; /* stored name, [a-z0-9_]+, unique within a run */
    const char *title;  /* for pictures and the report, e.g. "attention entropy (nats)" */
    al_view_shape shape;
    int L, H;           /* AL_VIEW_HEAD: the model's layers and heads */
    const double *v;    /* (L*H) or (1); borrowed from the result */
} al_view;

#endif
