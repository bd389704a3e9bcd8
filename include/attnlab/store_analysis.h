/* store_analysis.h -- the rows of each analysis's result (docs/design.md §6).
 *
 * One writer per analysis, turning the result struct of analyses.h or
 * circuits.h into the rows its command has always written: same tables,
 * columns and values. Like every al_store_put_*, call them inside a
 * transaction: al_store_tx_begin, the writer, al_store_run_finish, so a
 * run's rows appear together with its 'done' status. Each returns 0, or
 * -1 with e set (the caller then fails the run, which rolls back). */
#ifndef ATTNLAB_STORE_ANALYSIS_H
#define ATTNLAB_STORE_ANALYSIS_H

#include <stdint.h>
#include "attnlab/analyses.h"
#include "attnlab/attribute.h"
#include "attnlab/attrpatch.h"
#include "attnlab/circuits.h"
#include "attnlab/discover.h"
#include "attnlab/patch.h"
#include "attnlab/store.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

/* head_scores: induction, duplicate_token, prev_token, induction_all per
 * head, and with text copying_ablation(_excess) for heads not off;
 * layer_scores: induction_sum and induction_all_sum (the layer's heads
 * summed); model_scores: the
 * probe losses, icl_gain, heads_off, and with text icl_score, its early
 * and late losses, val_loss, val_loss_copy, copy_fraction. */
int al_store_put_scores(al_store *s, int64_t run_id, int64_t model_id, const al_scores_result *r,
                        al_err *e);
/* ablations: the clean row (kind none), then one per configuration. */
int al_store_put_ablate(al_store *s, int64_t run_id, int64_t model_id, const al_ablate_result *r,
                        al_err *e);
/* pruning_steps: one row per step; for the gradient method also every
 * head's full-model importance as head_scores.gradient_importance. */
int al_store_put_prune(al_store *s, int64_t run_id, int64_t model_id, const al_prune_run_result *r,
                       al_err *e);
/* head_scores, singular_values, eigenvalues, skip_trigrams (token
 * strings through tok; "#id" without one or past its vocabulary),
 * head_overlap, layer_scores and composition. */
int al_store_put_circuits(al_store *s, int64_t run_id, int64_t model_id, const al_circ_result *r,
                          const al_tokenizer *tok, al_err *e);

/* patching: one row per configuration of r's grid (resid: head NULL;
 * head: pos NULL); patching_runs: M_clean, M_corr, the size and the
 * fingerprint (al_pairs_hash) of task t, the task r was run on. */
int al_store_put_patch(al_store *s, int64_t run_id, int64_t model_id, const al_pairs *t,
                       const al_patch_result *r, al_err *e);
/* path_patching: every existing (sender, receiver, channel) of r (the
 * direct path with receiver NULL; a 1-layer model has only direct
 * paths); patching_runs with component NULL. */
int al_store_put_paths(al_store *s, int64_t run_id, int64_t model_id, const al_pairs *t,
                       const al_paths_result *r, al_err *e);

/* One attribute run (run kind "attribute"): attribution_runs (task t's
 * size and fingerprint, r's metric, loss and per-kind path totals, ap's
 * direction and unpatched metrics); logit_attribution (each component's
 * mean over every item with pos NULL, then one row per position holding
 * items); path_terms (when r has paths); logit_lens (layers 0..L);
 * attribution_tokens (pair 0's clean tokens, text through tok, "#id"
 * without one); and when ap is not NULL attribution_patching (every cell
 * of the three grids, actual NULL unless compared) and, when compared,
 * attribution_agreement (one row per grid). */
int al_store_put_attribute(al_store *s, int64_t run_id, int64_t model_id, const al_pairs *t,
                           const al_attr_result *r, const al_attrpatch_result *ap,
                           const al_tokenizer *tok, al_err *e);

/* One circuit of a discover run (run kind "discover"): its circuit_runs
 * row (task t's name and fingerprint; o's method and metric; tau for
 * acdc, recover for eap, the other NULL) and one circuit_edges row per
 * edge of r's graph (kept 0 or 1, score NULL when NaN). A run calls it
 * once per circuit it found (each tau of a sweep), all in one
 * transaction; two circuits of one method and tau are refused by the
 * table's key. */
/* Its faithfulness's interval goes to score_intervals (metric
 * "faithfulness", layer and head -1, pos -1 for the run's main circuit
 * and the circuit's index (1..) for the others, index as the run gives
 * it: --sweep's taus in their order). */
int al_store_put_discover(al_store *s, int64_t run_id, int64_t model_id, const al_pairs *t,
                          const al_discover_opts *o, const al_discover_result *r, int index,
                          al_err *e);

/* The main circuit r under resampling (--resample) into score_intervals,
 * layer, head and pos −1: metric "jaccard" (the mean Jaccard similarity
 * with r, se its sd over sqrt of the resamples), and "inclusion:<edge>"
 * for every edge r keeps or any resample kept (its inclusion frequency,
 * se the binomial sqrt(f (1 − f) / n)); n_items and bootstrap: the
 * resamples. */
int al_store_put_stability(al_store *s, int64_t run_id, int64_t model_id,
                           const al_discover_result *r, const al_discover_stability *st, al_err *e);

/* "#id" or the token's display string into buf (cap bytes); its length.
 * Shared with the printing of circuits so both show the same strings. */
size_t al_store_token_str(const al_tokenizer *tok, int id, char *buf, size_t cap);
/* Mean off-diagonal entry of an (H,H) matrix (layer_scores mean_overlap_*). */
double al_store_mean_offdiag(const double *a, int H);

#endif
