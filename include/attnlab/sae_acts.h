/* sae_acts.h -- one SAE feature's activation at every position of given
 * token windows (a z-site SAE, sae.h, on the model it was trained for).
 *
 * Why: the database keeps a feature's activation only at its top
 * contexts' own positions (sae_features.h); a dashboard that colours the
 * tokens around them recomputes the rest here, from the same model and
 * SAE, the same way (the site's z times the SAE's scale, encoded). */
#ifndef ATTNLAB_SAE_ACTS_H
#define ATTNLAB_SAE_ACTS_H

#include "attnlab/model.h"
#include "attnlab/sae.h"
#include "attnlab/sae_io.h"
#include "attnlab/util.h"

/* Feature `feature` of s on B windows of T tokens (tokens: (B, T) ids)
 * through m: out (B·T, caller's) gets f_feature at each position (0 where
 * it does not fire). The forward stops at the site. 0, or −1 with e (a
 * residual-stream SAE, an SAE that does not fit m's shape, a feature out
 * of range, T outside 1..n_ctx, an id outside the vocabulary, out of
 * memory). */
int al_sae_feature_acts(al_model *m, al_sae *s, const al_sae_meta *meta, int feature,
                        const int *tokens, int B, int T, float *out, al_err *e);
/* The same for nf features at once (features: nf ids, repeats allowed):
 * out (B·T, nf) row-major gets f_features[j] at row r in out[r·nf + j].
 * The windows go through the model and the encoder in chunks of about
 * 4096 positions, so memory stays that of one chunk's codes whatever B. */
int al_sae_features_acts(al_model *m, al_sae *s, const al_sae_meta *meta, const int *features,
                         int nf, const int *tokens, int B, int T, float *out, al_err *e);

#endif
