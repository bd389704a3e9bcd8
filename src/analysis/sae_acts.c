/* sae_acts.c -- one feature's activation at every position of token
 * windows (sae_acts.h): the forward to the site, stopped there by a hook
 * as in sae_features.c, then the SAE's encoder. */
#include "attnlab/sae_acts.h"

#include <stdlib.h>
#include <string.h>

#include "attnlab/hooks.h"

typedef struct zgrab {
    int d;
    float *dst; /* (B·T, d) */
    int done;
} zgrab;

/* Copy z and stop the forward: nothing after the site is needed. */
static int zgrab_hook(al_hook_act *a, void *vctx, al_err *e) {
    zgrab *c = vctx;
    const size_t rows = (size_t)a->m->B * (size_t)a->m->T, d = (size_t)c->d;
    for (size_t r = 0; r < rows; r++) memcpy(c->dst + r * d, a->data + r * a->ld, d * sizeof(float));
    c->done = 1;
    return al_errf(e, "forward stopped at the SAE site");
}

int al_sae_feature_acts(al_model *m, al_sae *s, const al_sae_meta *meta, int feature,
                        const int *tokens, int B, int T, float *out, al_err *e) {
    if (meta->site != AL_SAE_SITE_Z)
        return al_errf(e, "only SAEs on a layer's z have per-head features (this one reads the "
                       "residual stream of layer %d)", meta->hook_layer);
    if (al_sae_fits_model(s, meta, &m->cfg, NULL, e) != 0) return -1;
    if (feature < 0 || feature >= s->cfg.d_sae)
        return al_errf(e, "feature %d is out of range: the SAE has %d", feature, s->cfg.d_sae);
    if (B < 1 || T < 1 || T > m->cfg.n_ctx)
        return al_errf(e, "windows of %d tokens: the model takes 1..%d", T, m->cfg.n_ctx);
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.d_vocab)
            return al_errf(e, "token id %d is outside the vocabulary (%d)", tokens[i],
                           m->cfg.d_vocab);
    const int d = s->cfg.d_in;
    const size_t rows = (size_t)B * T;
    float *z = al_malloc(rows * (size_t)d, sizeof(float), e);
    if (!z) return -1;
    zgrab c = {d, z, 0};
    int rc = al_hook_add(m, AL_HOOK_Z, meta->hook_layer, zgrab_hook, &c, e);
    if (rc == 0) {
        al_err fe;
        int frc = al_model_forward(m, tokens, NULL, B, T, &fe);
        al_hook_remove(m, &c);
        if (frc != 0 && !c.done) {
            *e = fe;
            rc = -1;
        }
    }
    if (rc == 0) {
        const float sc = (float)meta->scale;
        for (size_t i = 0; i < rows * (size_t)d; i++) z[i] *= sc;
        rc = al_sae_encode(s, z, (int)rows, e);
    }
    for (size_t r = 0; rc == 0 && r < rows; r++) {
        float v = 0;
        if (s->cfg.arch == AL_SAE_TOPK) {
            for (int j = 0; j < s->cfg.k; j++)
                if (s->idx[r * s->cfg.k + j] == feature && s->val[r * s->cfg.k + j] > 0)
                    v = s->val[r * s->cfg.k + j];
        } else {
            float f = s->f[r * s->cfg.d_sae + feature];
            v = f > 0 ? f : 0;
        }
        out[r] = v;
    }
    free(z);
    return rc;
}
