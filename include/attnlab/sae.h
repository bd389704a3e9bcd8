/* sae.h -- sparse autoencoders (SAEs) on one activation site: the
 * dictionary, its forward and backward passes and Adam (the SAELens
 * layout on disk is sae_io.h).
 *
 * Why here: an SAE is a second, much simpler network trained on the
 * model's activations; it lives beside the model in the engine (llm.c
 * style: one flat parameter buffer, one flat gradient buffer, forward /
 * backward pairs), so the trainer (train/sae_train.c) and later analyses
 * use it the way they use al_model.
 *
 * Parameters, SAELens names and shapes (row-major, f32):
 *   W_enc (d_in, d_sae)   b_enc (d_sae)   W_dec (d_sae, d_in)   b_dec (d_in)
 * Forward on a batch x (B, d_in):
 *   pre  = (x − b_dec) · W_enc + b_enc                    (B, d_sae)
 *   TopK ("topk"): f = ReLU of the k largest entries of each row of pre,
 *        0 elsewhere (ties: the lower index wins; f ≥ 0)
 *   L1 ("standard"): f = ReLU(pre)
 *   x̂    = f · W_dec + b_dec                              (B, d_in)
 * Loss (every term a mean over the batch of a sum over the row):
 *   mse  = (1/B) Σ_b ‖x_b − x̂_b‖²
 *   TopK: + aux_coeff · aux, the AuxK loss of Gao et al. (2024): with
 *        e_b = x_b − x̂_b held constant (no gradient through it) and D the
 *        dead latents (not fired for dead_tokens tokens, al_sae.since),
 *        a_b = ReLU of the k_aux' = min(k_aux, |D|) largest pre_b,i over
 *        i ∈ D, ê_b = a_b · W_dec (no b_dec),
 *        aux = (1/B) Σ_b ‖e_b − ê_b‖²   (0 when no latent is dead)
 *   L1:  + l1_coeff · l1, l1 = (1/B) Σ_b Σ_i f_b,i ‖W_dec,i‖ (the
 *        decoder-norm-weighted penalty of SAELens's "standard" SAE: it
 *        cannot be lowered by shrinking f and growing W_dec, and with the
 *        rows at unit norm, as training keeps them, it is the plain L1)
 * Gradients are those of this loss exactly (al_sae_backward); what
 * training does on top (decoder rows: the component of their gradient
 * parallel to the row removed, then renormalised to unit norm after
 * each step, as Gao et al. and SAELens do) is al_sae_adam_step's.
 *
 * Sparsity (TopK): the encoder forward is one dense sgemm; the decoder
 * forward and the whole backward touch only the active (and aux) latents:
 * O(B·(k + k_aux)·d_in) instead of O(B·d_sae·d_in). The L1 path is dense
 * (sgemm throughout).
 *
 * Reproducibility: sums run in a fixed order whatever the thread count
 * (gradients are accumulated per latent, over the batch in order), except
 * inside sgemm, whose order depends on the thread count. */
#ifndef ATTNLAB_SAE_H
#define ATTNLAB_SAE_H

#include <stddef.h>
#include <stdint.h>

#include "attnlab/util.h"

enum { AL_SAE_TOPK = 0, AL_SAE_L1 = 1 };

typedef struct al_sae_cfg {
    int d_in, d_sae;
    int arch; /* AL_SAE_TOPK or AL_SAE_L1 */
    int k; /* TopK: active latents per row, 1..d_sae */
    int k_aux; /* TopK: aux latents per row (0: no aux loss) */
    double aux_coeff; /* TopK: weight of aux (1/32) */
    double l1_coeff; /* L1: weight of l1 (> 0) */
    long dead_tokens; /* a latent is dead after this many tokens unfired */
} al_sae_cfg;

/* SAELens's architecture name: "topk" / "standard"; NULL if unknown. */
const char *al_sae_arch_name(int arch);
/* Back: 0 and *arch, or −1 when name is neither. */
int al_sae_arch_parse(const char *name, int *arch);
/* Defaults: TopK, k 32 (capped at d_sae when set), k_aux d_in/2 (at least
 * 1), aux_coeff 1/32, l1_coeff 5, dead_tokens 10^6; d_in, d_sae as given. */
al_sae_cfg al_sae_cfg_default(int d_in, int d_sae);
/* Refuse an impossible config with one line naming the field: d_in and
 * d_sae in 1..2^20 with d_in·d_sae ≤ 2^31, unknown arch, k outside
 * 1..d_sae, k_aux outside 0..d_sae, a non-finite or negative coefficient,
 * l1_coeff ≤ 0 for L1, dead_tokens outside 1..2^31−1. */
int al_sae_cfg_check(const al_sae_cfg *c, al_err *e);

typedef struct al_sae {
    al_sae_cfg cfg;
    size_t n_params;
    float *params; /* one allocation: W_enc|b_enc|W_dec|b_dec */
    float *W_enc, *b_enc, *W_dec, *b_dec;
    float *grads; /* same layout (allocated with params) */
    float *gW_enc, *gb_enc, *gW_dec, *gb_dec;
    long *since; /* (d_sae) tokens since each latent last fired */

    /* activations of the last forward (grown on demand) */
    int B, B_cap;
    float *xin; /* (B, d_in) the input, copied */
    float *xc; /* (B, d_in) x − b_dec */
    float *pre; /* (B, d_sae) pre-activations */
    float *f; /* L1: (B, d_sae) dense codes; TopK: NULL */
    int *idx; /* TopK: (B, k) active latents, by descending pre */
    float *val; /* TopK: (B, k) their f (may be 0 where pre ≤ 0) */
    int *aidx; /* TopK: (B, k_aux) aux latents (−1: unused slot) */
    float *aval; /* TopK: (B, k_aux) their a */
    float *xhat; /* (B, d_in) reconstruction */
    float *ehat; /* TopK: (B, d_in) aux reconstruction ê */
    void *scratch; /* backward scratch (grown on demand) */
    size_t scratch_cap; /* bytes */
    int fwd_loss; /* 1: the last forward computed losses (al_sae_forward) */
    int n_dead; /* dead latents in the last forward */
    /* losses of the last forward (doubles, as defined above) */
    double mse, aux, l1, loss;
    double l0; /* mean number of f > 0 per row */
} al_sae;

/* Allocate for cfg (checked) and initialise from seed: W_dec rows random
 * directions of unit norm (normal entries, normalised), W_enc = W_decᵀ,
 * biases 0, every latent counted as just fired. 0, or −1 with e (s
 * zeroed). Free with al_sae_free. */
int al_sae_init(al_sae *s, const al_sae_cfg *c, uint64_t seed, al_err *e);
/* The same with every parameter 0 (before loading weights). */
int al_sae_alloc(al_sae *s, const al_sae_cfg *c, al_err *e);
/* Free everything; a zeroed s is fine; s is zeroed. */
void al_sae_free(al_sae *s);
/* Bytes an SAE of c takes when it trains on batches of B rows: its
 * parameters and gradients, the dead-latent counters, a forward's
 * activations and the backward's scratch (Adam's moments, al_sae_adam,
 * are as many floats as the parameters again). In double, from the
 * config alone: for refusing before anything is allocated (membudget.h). */
double al_sae_bytes(const al_sae_cfg *c, int B);

/* b_dec = the mean of the n rows of x (n, d_in): the geometric median of
 * SAELens's option is not needed at this scale, and the mean is what the
 * reconstruction of an all-zero code should be under the MSE. */
void al_sae_init_b_dec_mean(al_sae *s, const float *x, int n);

/* Forward on x (B, d_in) (copied): codes, reconstruction, losses (the
 * aux latents from the current dead counters, which it does not change).
 * 0, or −1 with e: B < 1, out of memory, a non-finite input. */
int al_sae_forward(al_sae *s, const float *x, int B, al_err *e);
/* Codes only, for analyses: pre and f of the forward (losses not
 * computed, x̂ still filled). Same contract as al_sae_forward. */
int al_sae_encode(al_sae *s, const float *x, int B, al_err *e);
/* Gradients of the last forward's loss into s->grads (overwritten, not
 * accumulated). 0, or −1 with e: no forward yet, out of memory. */
int al_sae_backward(al_sae *s, al_err *e);
/* After a training forward: each latent's count grows by B (saturating
 * at dead_tokens), and is reset to 0 for the latents that fired (f > 0)
 * in some row. */
void al_sae_update_dead(al_sae *s);
/* Dead latents by the counters now. */
int al_sae_count_dead(const al_sae *s);
/* Rescale every decoder row to unit norm (a zero row is left as it is). */
void al_sae_normalize_decoder(al_sae *s);

/* Adam (no weight decay, as SAELens) on the flat buffer. */
typedef struct al_sae_adam {
    float *m, *v; /* (n_params) each, one allocation */
    size_t n;
} al_sae_adam;
int al_sae_adam_init(al_sae_adam *o, size_t n, al_err *e);
void al_sae_adam_free(al_sae_adam *o);
/* One training update with the gradients of the last backward: the
 * component of each decoder row's gradient parallel to the row removed,
 * Adam (t: 1-based step for bias correction) at learning rate lr, then
 * the decoder rows renormalised. */
void al_sae_adam_step(al_sae *s, al_sae_adam *o, double lr, double beta1, double beta2, double eps,
                      long t);
/* Learning rate at 0-based step: linear warm-up over warmup steps, then
 * constant, then a linear decay to 0 over the last decay steps (Gao et
 * al. and SAELens decay to 0 at the end). */
double al_sae_lr_at(double lr, long warmup, long decay, long total, long step);

/* Count of non-finite parameters (0 = all finite). */
size_t al_sae_count_nonfinite(const al_sae *s);

#endif
