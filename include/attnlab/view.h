/* view.h -- layer: core
 * A result in a generic shape, so that storing, drawing and reporting it
 * needs no code of its own.
 *
 * An analysis describes each of its results that takes one of the shapes
 * below as an al_view that borrows the result's arrays. The store writes
 * views under their metric name (al_store_put_views: per-head views as
 * head_scores rows, per-model ones as model_scores rows, the other
 * shapes as view_cells rows), and the pictures (`heatmap --what view`)
 * and the report find those metrics in the database by run kind, with
 * the title and shape stored beside them, so a new analysis of these
 * shapes adds no code below the CLI. */
#ifndef ATTNLAB_VIEW_H
#define ATTNLAB_VIEW_H

typedef enum {
    AL_VIEW_HEAD, /* (L, H): one value per head, row-major by layer */
    AL_VIEW_MODEL, /* one value */
    AL_VIEW_PAIR, /* (L*H, L*H): one value per (sender head, receiver head),
                    * row-major by sender, head i = layer i / H, head i % H;
                    * NaN = no value (e.g. a receiver before its sender) */
    AL_VIEW_EDGE, /* n labelled edges: from[i] -> to[i] has value v[i] */
    AL_VIEW_POS /* n values, one per position 0..n-1 */
} al_view_shape;

typedef struct al_view {
    const char *metric; /* stored name, [a-z0-9_]+, unique within a run */
    const char *title; /* for pictures and the report, e.g. "attention entropy (nats)" */
    al_view_shape shape;
    int L, H; /* HEAD, PAIR: the model's layers and heads */
    const double *v; /* HEAD (L*H), MODEL (1), PAIR (L*H*L*H), EDGE, POS (n);
                         * borrowed from the result */
    int n; /* EDGE: edges; POS: positions (0 for the other shapes) */
    /* EDGE: (n) each edge's sender and receiver label, free text such as
     * "embed", "0.3", "1.2.k", "logits"; borrowed. NULL for other shapes. */
    const char *const *from, *const *to;
    /* how sure each value is (as v; NULL: no intervals): stored beside it
     * in score_intervals (HEAD: its layer and head; MODEL: −1, −1; POS:
     * pos; PAIR: the receiver's layer and head, pos the sender's flat
     * index; EDGE: pos the edge's index), with the level, the items the
     * interval resamples and the resamples; borrowed */
    const struct al_interval *ci;
    double ci_level;
    int ci_n, ci_boot;
} al_view;

#endif
