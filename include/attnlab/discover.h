/* discover.h -- circuit discovery over the head graph (the library; the
 * command is cmd_discover.c). ACDC (Conmy et al. 2023) and, for comparison, a
 * ranking by edge attribution patching (Syed et al. 2023), on a task's
 * pairs (pairs.h, patch.h), for models of any depth the graph covers
 * (1 to AL_GRAPH_MAX_LAYERS layers).
 *
 * The graph and its edge indices: graph.h.
 *
 * Running a circuit (al_circuit_eval): the clean sequences, with every
 * edge not kept carrying its sender's value from the corrupted run
 * instead (path-level, as path patching): a receiver's input is the sum
 * over its senders of (kept ? the sender's value in this run : the
 * sender's value in the corrupted run). A kept edge from a head carries
 * that head's output as computed in this (circuit) run, so removals
 * upstream propagate through every layer. With every edge kept it is the clean run;
 * with none kept, the corrupted run's logits. pos carries the same value
 * in both runs (they share positions), so its edges never change a
 * circuit. A model's gates and hooks apply in both runs as in
 * patch.h.
 *
 * Metrics (o->metric): "kl" = mean over the task's items of
 * KL(p_clean || p_circuit) of the next-token distributions at the item
 * positions (0 for the full model; ACDC's default), or "logit_diff" = the
 * task's own metric M (pairs.h: mean log-prob or logit difference) with
 * the loss of the circuit counted as M_full − M_circuit. Faithfulness of a
 * circuit: (M_circuit − M_corr) / (M_clean − M_corr) on the task's metric
 * (1 = the circuit does all the model does; NaN when M_clean == M_corr).
 *
 * ACDC: receivers visited from the logits backwards (the logits, then
 * the last layer's heads from the last to the first, then the layer
 * before, down to layer 0; channels q, k, v in turn), and for each of a
 * receiver's incoming edges in the order o->order says (embed, pos, then
 * the heads of earlier layers from layer 0 up, or the reverse): remove it; if the metric's loss grows by at most tau over its
 * value before this removal, it stays removed, else it is put back (at
 * most, so that tau = 0 removes exactly the edges that change nothing; a
 * pos edge is removed at growth 0 without an evaluation). A head none of
 * whose outgoing edges is kept is skipped as a receiver (its inputs
 * cannot matter; they end removed, score NaN). Score of an edge: the
 * growth measured when it was tried. The circuit returned is evaluated
 * once more at the end. EAP: every edge scored by |edge attribution
 * patching estimate| (attrpatch.h, noising at the clean run, i.e. the
 * estimated change of the task's metric M when that edge alone carries
 * its corrupted value, in M's units; M whatever o->metric, as KL's
 * gradient vanishes at the clean run); edges kept in descending score
 * (ties: lower index first) until the circuit's faithfulness reaches
 * o->recover, the empty circuit evaluated first (all edges when
 * faithfulness is NaN).
 *
 * Ownership and failure contract as the analyses of analyses.h: 0 with
 * *r filled (al_discover_result_free), or −1 with e set and *r zeroed;
 * m's gates and hooks are as before on return. */
#ifndef ATTNLAB_DISCOVER_H
#define ATTNLAB_DISCOVER_H

#include <signal.h>
#include <stddef.h>
#include "attnlab/gap.h"
#include "attnlab/graph.h"
#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/stats.h"
#include "attnlab/util.h"

typedef struct al_discover_opts {
    const char *method; /* "acdc" (default) or "eap" */
    const char *metric; /* "kl" (default) or "logit_diff" (the task's metric) */
    double tau; /* acdc: threshold, >= 0 and finite (0.01) */
    double recover; /* eap: faithfulness to reach, 0..1 (0.9) */
    int batch; /* pairs per forward pass (8), 1..100000 */
    int progress; /* 1: a progress line on stderr */
    volatile sig_atomic_t *stop; /* set: stop, −1 "interrupted" */
    /* acdc: the order in which a receiver's senders are tried.
     * "embed-first" (default): index order, embed, pos, then the heads
     * of earlier layers from layer 0 up; "latest-first": the reverse,
     * the latest layer's last head first and embed last (at any depth),
     * as the reference implementation of Conmy et al. (2023) does. */
    const char *order;
    /* acdc: remove an edge when the loss grows by "le" (default): at
     * most tau; "lt": less than tau, as the reference implementation. */
    const char *remove_if;
    /* the faithfulness's interval (stats.h): level in (0, 1), resamples
     * of the pairs 0..100000 (0: the standard error only), their seed */
    double ci_level;
    int bootstrap;
    uint64_t ci_seed;
} al_discover_opts;

#define AL_DISCOVER_OPTS_INIT                                                                      \
    {                                                                                              \
        "acdc", "kl", 0.01, 0.9, 8, 0, NULL, "embed-first", "le", AL_CI_LEVEL, AL_CI_BOOTSTRAP,    \
            AL_CI_SEED                                                                             \
    }
al_discover_opts al_discover_opts_defaults(void);
/* 0 if the names are known and the numbers in range (tau negative or not
 * finite, recover outside 0..1 refused), else −1 with e naming them. */
int al_discover_opts_check(const al_discover_opts *o, al_err *e);

/* The metrics of task t with only the edges kept[k] != 0 (n_edges
 * entries) as above: *kl (mean KL from the clean run) and *metric (the
 * task's metric M); either may be NULL. −1 with e: a model deeper than
 * AL_GRAPH_MAX_LAYERS, a task that does not fit m, out of memory. */
int al_circuit_eval(al_model *m, const al_pairs *t, const unsigned char *kept, int batch,
                    double *kl, double *metric, al_err *e);

typedef struct al_discover_result {
    int L, H, n_edges;
    unsigned char *kept; /* (n_edges) 1 = in the circuit; one allocation with score */
    double *score; /* (n_edges) acdc: loss growth when tried (NaN: never
                            * tried, its receiver was already cut off); eap: |estimate| */
    int n_kept;
    double m_clean, m_corr; /* the task's metric on the two unpatched runs */
    double m_circuit; /* ... on the circuit */
    double kl_circuit; /* mean KL(clean || circuit) (−1e-15 or so: rounding) */
    double faithfulness; /* (m_circuit − m_corr) / (m_clean − m_corr) */
    /* how sure it is: a ratio of sums over the pairs, so its standard
     * error by the delta method and the expanded percentile interval of
     * the ratio recomputed on resamples of whole pairs (al_boot_ratio, as
     * patching's normalised effects), at ci_level over ci_n pairs */
    al_interval faith_ci;
    double ci_level;
    int ci_boot, ci_n;
    long evals; /* circuit evaluations run (over all pairs each) */
    double seconds;
    al_warnings warn; /* the gap check of the task's metric (and with metric kl of the
                             * corrupted run's KL) and the faithfulness's range (gap.h) */
} al_discover_result;

/* 0 when discovery's caches for task t (both runs of every pair, the
 * clean distributions) fit the memory budget (membudget.h); else −1 with
 * e naming --n. al_discover_run checks it first; a command checks it
 * before its run begins. */
int al_discover_memory_check(const al_pairs *t, const al_config *c, al_err *e);
/* Discover a circuit for task t with o. −1 (nothing assigned): bad
 * options, a model deeper than AL_GRAPH_MAX_LAYERS, a task that does not
 * fit m, no items, out of memory, interrupted. */
int al_discover_run(al_model *m, const al_pairs *t, const al_discover_opts *o,
                    al_discover_result *r, al_err *e);
void al_discover_result_free(al_discover_result *r);

/* How stable a circuit is under resampling of the pairs: the search of o
 * rerun on n bootstrap resamples of t's pairs (N drawn with replacement,
 * whole pairs, from seed; n times the search's cost). freq[k]: the share
 * of the resamples whose circuit keeps edge k; jaccard_*: the Jaccard
 * similarity |A ∩ B| / |A ∪ B| of each resample's kept edges A with the
 * main circuit's B (1 when both are empty), their mean, sd and minimum. */
typedef struct al_discover_stability {
    int n; /* resamples */
    uint64_t seed;
    int n_edges;
    double *freq; /* (n_edges) */
    double jaccard_mean, jaccard_sd, jaccard_min;
    double seconds;
} al_discover_stability;
/* main_kept: the main circuit's kept edges (n_edges of m's graph). The
 * resamples' searches run without their faithfulness intervals. 0, or −1
 * with e (n outside 1..10000, and al_discover_run's failures; *s
 * zeroed). */
int al_discover_stability_run(al_model *m, const al_pairs *t, const al_discover_opts *o,
                              const unsigned char *main_kept, int n, uint64_t seed,
                              al_discover_stability *s, al_err *e);
void al_discover_stability_free(al_discover_stability *s);

#endif
