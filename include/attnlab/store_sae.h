/* store_sae.h -- the rows of a `sae features` run (sae_features.h) in the
 * tables of schema version 13 (docs/design.md §6): why a file of its own:
 * the result has its own shapes (per feature, per context, per token, per
 * head), none of view.h's generic ones. Call inside the run's transaction,
 * like every al_store_put_*. */
#ifndef ATTNLAB_STORE_SAE_H
#define ATTNLAB_STORE_SAE_H

#include <stdint.h>

#include "attnlab/sae_features.h"
#include "attnlab/sae_task.h"
#include "attnlab/store.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

/* sae_feature_runs (sae_dir, hook_name as given), then for every live
 * feature (fired > 0) its sae_features row (top_* the head of the largest
 * DFA share, NULL when every share is NaN), its contexts (used slots, rank
 * 1..), its logit effects (up and down, rank 1..; token strings through
 * tok, "#id" without one) and one sae_feature_heads row per head. 0, or
 * −1 with e. */
int al_store_put_sae_features(al_store *s, int64_t run_id, int64_t model_id, const char *sae_dir,
                              const char *hook_name, const al_sae_feat_result *r,
                              const al_tokenizer *tok, al_err *e);
/* A task attribution (sae_task.h) of the same run: its sae_task_runs row
 * (task as named) and one sae_task_features row per feature whose
 * estimate is not 0. 0, or −1 with e. */
int al_store_put_sae_task(al_store *s, int64_t run_id, int64_t model_id, const char *task,
                          const al_sae_task_result *r, al_err *e);

#endif
