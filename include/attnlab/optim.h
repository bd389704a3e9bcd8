/* optim.h -- AdamW with decoupled weight decay, global-norm gradient
 * clipping, and linear warm-up followed by cosine decay. The moment
 * buffers m and v are one allocation (llm.c style). */
#ifndef ATTNLAB_OPTIM_H
#define ATTNLAB_OPTIM_H

#include <stddef.h>
#include "attnlab/model.h"
#include "attnlab/util.h"

typedef struct al_optim_cfg {
    double lr; /* peak learning rate */
    double min_lr_frac; /* cosine decays to lr * min_lr_frac */
    long warmup; /* linear warm-up steps */
    long total_steps; /* schedule length */
    double beta1, beta2, eps;
    double weight_decay; /* not applied to W_E, W_pos (embeddings), LayerNorm
                            weights or biases (al_param_decay_end) */
    double grad_clip; /* max global L2 norm; <= 0 disables */
} al_optim_cfg;

typedef struct al_adamw {
    float *m, *v; /* (n_params) each, one allocation */
    size_t n;
} al_adamw;

int al_adamw_init(al_adamw *o, size_t n, al_err *e);
void al_adamw_free(al_adamw *o);
/* Learning rate for 0-based step `step`. */
double al_lr_at(const al_optim_cfg *c, long step);
/* Global L2 norm of the gradients, summed in a fixed order. */
double al_grad_norm(const al_model *m);
/* One update (t = 1-based step count for bias correction). Scales the
 * gradients by min(1, clip/norm) first. Returns the pre-clip norm. */
/* The same with the gradient norm already computed (al_grad_norm of
 * these gradients): the trainer checks it for non-finite values first,
 * and it is a serial pass over every gradient. */
void al_adamw_step_norm(al_adamw *o, al_model *m, const al_optim_cfg *c, long t, double lr,
                        double norm);
double al_adamw_step(al_adamw *o, al_model *m, const al_optim_cfg *c, long t, double lr);

#endif
