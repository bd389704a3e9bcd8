/* optim.c -- AdamW, clipping and the learning-rate schedule. */
#include "attnlab/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/prof.h"

int al_adamw_init(al_adamw *o, size_t n, al_err *e) {
    o->m = al_calloc(n, 2 * sizeof(float), e);
    if (!o->m) return -1;
    o->v = o->m + n;
    o->n = n;
    return 0;
}

void al_adamw_free(al_adamw *o) {
    free(o->m);
    memset(o, 0, sizeof *o);
}

double al_lr_at(const al_optim_cfg *c, long step) {
    if (c->warmup > 0 && step < c->warmup) return c->lr * (double)(step + 1) / (double)c->warmup;
    long span = c->total_steps - c->warmup;
    if (span <= 0) return c->lr;
    double p = (double)(step - c->warmup) / (double)span;
    if (p > 1.0) p = 1.0;
    double min_lr = c->lr * c->min_lr_frac;
    return min_lr + 0.5 * (c->lr - min_lr) * (1.0 + cos(3.14159265358979323846 * p));
}

/* Serial on purpose: a parallel reduction's order would depend on the
 * thread count, and the norm feeds clipping, hence every weight. */
double al_grad_norm(const al_model *m) {
    double s = 0.0;
    for (size_t i = 0; i < m->n_params; i++) s += (double)m->grads[i] * m->grads[i];
    return sqrt(s);
}

double al_adamw_step(al_adamw *o, al_model *m, const al_optim_cfg *c, long t, double lr) {
    double t0 = al_prof_t();
    double norm = al_grad_norm(m);
    al_prof_add(AL_OP_ADAMW, t0);
    al_adamw_step_norm(o, m, c, t, lr, norm);
    return norm;
}

void al_adamw_step_norm(al_adamw *o, al_model *m, const al_optim_cfg *c, long t, double lr,
                        double norm) {
    double t0 = al_prof_t();
    float scale = 1.0f;
    if (c->grad_clip > 0 && norm > c->grad_clip) scale = (float)(c->grad_clip / norm);
    const float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    const float bc1 = (float)(1.0 - pow(c->beta1, (double)t));
    const float bc2 = (float)(1.0 - pow(c->beta2, (double)t));
    const float flr = (float)lr;
    /* decay the weight matrices between the embeddings and the LayerNorm
     * weights and biases (which follow W_U): W_Q..W_O and an untied W_U */
    const size_t no_decay = m->param_size[AL_P_WE] + m->param_size[AL_P_WPOS];
    const size_t decay_end = al_param_decay_end(m);
    const float wd = (float)c->weight_decay;
    const long n = (long)m->n_params;
    float *w = m->params, *g = m->grads, *mm = o->m, *vv = o->v;
    /* simd: every operation here is correctly rounded (no contraction
     * under -std=c11), so vector lanes give the scalar loop's bits */
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++) {
        float gi = g[i] * scale;
        float mi = b1 * mm[i] + (1.0f - b1) * gi;
        float vi = b2 * vv[i] + (1.0f - b2) * gi * gi;
        mm[i] = mi;
        vv[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        float decay = (size_t)i >= no_decay && (size_t)i < decay_end ? wd * w[i] : 0.0f;
        w[i] -= flr * (mhat / (sqrtf(vhat) + eps) + decay);
    }
    al_prof_add(AL_OP_ADAMW, t0);
}
