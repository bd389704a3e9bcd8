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
    for (size_t r = 0; r < rows; r++)
        memcpy(c->dst + r * d, a->data + r * a->ld, d * sizeof(float));
    c->done = 1;
    return al_errf(e, "forward stopped at the SAE site");
}

int al_sae_features_acts(al_model *m, al_sae *s, const al_sae_meta *meta, const int *features,
                         int nf, const int *tokens, int B, int T, float *out, al_err *e) {
    if (meta->site != AL_SAE_SITE_Z)
        return al_errf(e,
                       "only SAEs on a layer's z have per-head features (this one reads the "
                       "residual stream of layer %d)",
                       meta->hook_layer);
    if (al_sae_fits_model(s, meta, &m->cfg, NULL, e) != 0) return -1;
    if (nf < 1) return al_errf(e, "no feature asked for");
    for (int j = 0; j < nf; j++)
        if (features[j] < 0 || features[j] >= s->cfg.d_sae)
            return al_errf(e, "feature %d is out of range: the SAE has %d", features[j],
                           s->cfg.d_sae);
    if (B < 1 || T < 1 || T > m->cfg.n_ctx)
        return al_errf(e, "windows of %d tokens: the model takes 1..%d", T, m->cfg.n_ctx);
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.d_vocab)
            return al_errf(e, "token id %d is outside the vocabulary (%d)", tokens[i],
                           m->cfg.d_vocab);
    const int d = s->cfg.d_in, F = s->cfg.d_sae;
    const int bm = 4096 / T > 0 ? (4096 / T < B ? 4096 / T : B) : 1;
    float *z = al_malloc((size_t)bm * T * d, sizeof(float), e);
    int *col = al_malloc((size_t)F, sizeof(int), e); /* latent -> its first column, -1 */
    int rc = z && col ? 0 : -1;
    for (int i = 0; rc == 0 && i < F; i++) col[i] = -1;
    for (int j = nf - 1; rc == 0 && j >= 0; j--) col[features[j]] = j;
    for (int b0 = 0; rc == 0 && b0 < B; b0 += bm) {
        const int nb = B - b0 < bm ? B - b0 : bm;
        const size_t rows = (size_t)nb * T;
        zgrab c = {d, z, 0};
        if ((rc = al_hook_add(m, AL_HOOK_Z, meta->hook_layer, zgrab_hook, &c, e)) != 0) break;
        al_err fe;
        int frc = al_model_forward(m, tokens + (size_t)b0 * T, NULL, nb, T, &fe);
        al_hook_remove(m, &c);
        if (frc != 0 && !c.done) {
            *e = fe;
            rc = -1;
            break;
        }
        const float sc = (float)meta->scale;
        for (size_t i = 0; i < rows * (size_t)d; i++) z[i] *= sc;
        if ((rc = al_sae_encode(s, z, (int)rows, e)) != 0) break;
        float *o = out + (size_t)b0 * T * nf;
        for (size_t r = 0; r < rows; r++) {
            float *orow = o + r * nf;
            for (int j = 0; j < nf; j++) orow[j] = 0;
            if (s->cfg.arch == AL_SAE_TOPK) {
                for (int q = 0; q < s->cfg.k; q++) {
                    int lat = s->idx[r * s->cfg.k + q];
                    float v = s->val[r * s->cfg.k + q];
                    if (v > 0 && lat >= 0 && col[lat] >= 0) orow[col[lat]] = v;
                }
            } else {
                for (int j = 0; j < nf; j++) {
                    float v = s->f[r * F + features[j]];
                    orow[j] = v > 0 ? v : 0;
                }
            }
        }
    }
    /* a repeated feature: its later columns copy the first */
    for (int j = 0; rc == 0 && s->cfg.arch == AL_SAE_TOPK && j < nf; j++)
        if (col[features[j]] != j)
            for (size_t r = 0; r < (size_t)B * T; r++)
                out[r * nf + j] = out[r * nf + col[features[j]]];
    free(z);
    free(col);
    return rc;
}

int al_sae_feature_acts(al_model *m, al_sae *s, const al_sae_meta *meta, int feature,
                        const int *tokens, int B, int T, float *out, al_err *e) {
    return al_sae_features_acts(m, s, meta, &feature, 1, tokens, B, T, out, e);
}
