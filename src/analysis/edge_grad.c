/* edge_grad.c -- the gradient edge estimate shared by EAP and attribution
 * patching (edge_grad.h). */
#include "attnlab/edge_grad.h"

#include "attnlab/gemm.h"
#include "attnlab/layers.h"

void al_edge_senders(const al_model *m, const int *src, const int *base, size_t rows,
                     const float *zg_src, const float *zg_base, int with_pos, int n_heads,
                     float *dz, float *out) {
    const int C = m->cfg.d_model, D = m->cfg.d_head, H = m->cfg.n_heads;
    const size_t HD = (size_t)H * D, n = rows * (size_t)C;
    for (size_t i = 0; i < rows; i++) {
        const float *a = m->p[AL_P_WE] + (size_t)src[i] * C;
        const float *b = m->p[AL_P_WE] + (size_t)base[i] * C;
        for (int k = 0; k < C; k++) out[i * C + k] = a[k] - b[k];
    }
    float *heads = out + n;
    if (with_pos) { /* both runs share positions (with shortformer positions pos
                     * is not in the residual stream at all) */
        for (size_t i = 0; i < n; i++) heads[i] = 0.0f;
        heads += n;
    }
    for (int j = 0; j < n_heads; j++) {
        const int l0 = j / H, h = j % H;
        const size_t lay = (size_t)l0 * rows * HD;
        for (size_t i = 0; i < rows; i++)
            for (int k = 0; k < D; k++) {
                size_t q = lay + i * HD + (size_t)h * D + k;
                dz[i * D + k] = zg_src[q] - zg_base[q];
            }
        /* Δout (rows, C) = Δzg (rows, D) · W_O[l0,h] (D, C) */
        al_sgemm(false, false, (int)rows, C, D, 1.0f, dz, D, al_head_wo(m, l0, h), C, 0.0f,
                 heads + (size_t)j * n, C);
    }
}

void al_edge_receiver_grad(const al_model *m, const float *dqkv, int l, int h, int c, size_t rows,
                           float *lnd, float *g) {
    const int C = m->cfg.d_model, D = m->cfg.d_head;
    const size_t HD = (size_t)m->cfg.n_heads * D;
    const int ln = m->cfg.norm_type != AL_NORM_NONE;
    const float *w = c == 0   ? al_head_wq(m, l, h)
                     : c == 1 ? al_head_wk(m, l, h)
                              : al_head_wv(m, l, h); /* (C, D) */
    const float *dq = dqkv + (size_t)l * rows * 3 * HD + (size_t)c * HD + (size_t)h * D;
    al_sgemm(false, true, (int)rows, C, D, 1.0f, dq, (int)(3 * HD), w, D, 0.0f, ln ? lnd : g, C);
    if (ln)
        layernorm_backward(g, NULL, NULL, lnd, m->x + (size_t)l * rows * C,
                           m->ln1_mean + (size_t)l * rows, m->ln1_scale + (size_t)l * rows,
                           m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL, rows, C, 0);
}

double al_edge_dot(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}
