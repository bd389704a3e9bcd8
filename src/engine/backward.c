/* backward.c -- the backward passes of the model of docs/design.md §2:
 * parameter gradients of the mean loss (training, gradient importance)
 * and activation gradients of a function of the final residual stream
 * (attribution patching). Both follow the unhooked forward (forward.c),
 * so a forward that a hook intervened in is refused.
 *
 * Column sums (biases, LayerNorm w and b) go by columns with rows in
 * order, and every product's bits are independent of the thread count
 * (gemm.h): the gradients are the same bits for any --threads. */
#include "attnlab/model.h"

#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/layers.h"
#include "attnlab/prof.h"
#include "model_internal.h"

/* Inverse of fuse_qkv for gradients: dW_{Q,K,V}[l,h] = columns of dwqkv. */
static void unfuse_qkv_grads(al_model *m, const float *dwqkv, int l) {
    int C = m->cfg.d_model, H = m->cfg.n_heads, D = m->cfg.d_head;
    size_t HD = (size_t)H * D, ph = (size_t)C * D;
    for (int s = 0; s < 3; s++)
        for (int h = 0; h < H; h++) {
            float *g = m->g[AL_P_WQ + s] + ((size_t)l * H + h) * ph;
            for (int c = 0; c < C; c++)
                memcpy(g + (size_t)c * D, dwqkv + (size_t)c * 3 * HD + s * HD + (size_t)h * D,
                       sizeof(float) * D);
        }
}

/* Backward of pos_qk_forward for layer l: with dqkv (B,T,3,H,D) and
 * m->wqkv layer l's, dwqkv (C,3HD) += the W_pos rows' share of dW_Q,K and
 * dW_pos[:T] += Σ_b dq W_Qᵀ + dk W_Kᵀ. */
static void pos_qk_backward(al_model *m, float *dwqkv) {
    if (m->cfg.pos_type != AL_POS_SHORTFORMER) return;
    int HD = m->cfg.n_heads * m->cfg.d_head;
    posqk_backward(m->g[AL_P_WPOS], dwqkv, m->posqk, m->dqkv, m->p[AL_P_WPOS], m->wqkv, m->B, m->T,
                   m->cfg.d_model, HD);
}

/* ln1 of layer l backward: m->dx += its input's gradient from m->dln
 * (∂ of its output); dw, db (C) of layer l = its w and b's (NULL: not
 * wanted; NULL for LNPre). */
static void ln1_backward(al_model *m, int l, float *dw, float *db) {
    const int C = m->cfg.d_model;
    const size_t BT = (size_t)m->B * m->T;
    const float *w = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
    layernorm_backward(m->dx, dw ? dw + (size_t)l * C : NULL, db ? db + (size_t)l * C : NULL,
                       m->dln, m->x + (size_t)l * BT * C, m->ln1_mean + (size_t)l * BT,
                       m->ln1_scale + (size_t)l * BT, w, BT, C, 1);
}

/* Gate gradients of layer l: ∂L/∂g[h] = Σ_{b,t} dzg[b,t,h,:] · src[b,t,h,:],
 * summed per batch row first and then over rows in a fixed order, so the
 * value does not depend on the thread count. Then dz = g · dzg in place
 * (0 for replaced heads: nothing upstream produced their output). */
/* Head h's gate as backward sees it: 0 for a head whose z a hook set in
 * full (nothing upstream of it reaches W_O). */
static float gate_of(const al_model *m, int l, int h) {
    int H = m->cfg.n_heads;
    return m->zfixed[l * H + h] ? 0.0f : m->gates[l * H + h];
}

/* dz = g·dzg in place for layer l; nothing to do when every gate is 1
 * (the product would be dzg itself, exactly). */
static void scale_by_gates(const al_model *m, int l, float *dzg, size_t BT) {
    int H = m->cfg.n_heads, D = m->cfg.d_head, one = 1;
    for (int h = 0; h < H; h++) one &= gate_of(m, l, h) == 1.0f;
    if (one) return;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < BT; i++)
        for (int h = 0; h < H; h++) {
            float g = gate_of(m, l, h), *p = dzg + (i * H + h) * D;
            for (int d = 0; d < D; d++) p[d] *= g;
        }
}

static void gate_backward(al_model *m, int l, float *dzg, const float *z, int B, int T) {
    int H = m->cfg.n_heads, D = m->cfg.d_head;
    if (m->skip_gate_grads) { /* dz = g·dzg still */
        scale_by_gates(m, l, dzg, (size_t)B * T);
        return;
    }
    /* what the gate scaled: z, or what the Z hooks made of it */
    const float *src = m->zhooked[l] ? m->zs + (size_t)l * B * T * H * D : z;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            double acc = 0.0;
            float g = gate_of(m, l, h);
            for (int t = 0; t < T; t++) {
                size_t i = (size_t)b * T + t, off = (i * H + h) * D;
                for (int d = 0; d < D; d++) acc += (double)dzg[off + d] * src[off + d];
                /* then dz = g·dzg (scale_by_gates), while the row is in cache */
                for (int d = 0; d < D; d++) dzg[off + d] *= g;
            }
            m->gate_part[b * H + h] = (float)acc;
        }
    for (int h = 0; h < H; h++) {
        double s = 0.0;
        for (int b = 0; b < B; b++) s += m->gate_part[b * H + h];
        m->gate_grads[l * H + h] = (float)s;
    }
}

/* The backward pass from the logits' gradient, which m->probs holds
 * (and, in bf16, the copy al_gemm_bf16_reserve gave, released here). */
static int backward_from_dlogits(al_model *m, al_err *e) {
    const al_config *c = &m->cfg;
    int L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head, V = c->d_vocab;
    int B = m->B, T = m->T, BT = B * T, HD = H * D;
    const float *dlogits = m->probs; // (B,T,V)
    const int ln = c->norm_type != AL_NORM_NONE;
    double t0 = al_prof_t();
    memset(m->g[AL_P_WPOS], 0, sizeof(float) * m->param_size[AL_P_WPOS]);
    const float *xL = m->x + (size_t)L * BT * C;
    /* logits = u W_U + b_U, u = ln_final(xL) (or xL): du into dln (or dx) */
    const float *u = ln ? m->lnf : xL;
    float *du = ln ? m->dln : m->dx;
    if (c->tied_embeddings) {
        /* logits = u W_Eᵀ: dW_E = dlogitsᵀ u (V,C), du = dlogits W_E */
        matmul_forward(du, dlogits, m->p[AL_P_WE], BT, V, C, 0.0f);
        matmul_weight_grad(m->g[AL_P_WE], dlogits, u, BT, V, C, 0.0f);
    } else {
        memset(m->g[AL_P_WE], 0, sizeof(float) * m->param_size[AL_P_WE]);
        matmul_forward_wt(du, dlogits, m->p[AL_P_WU], BT, V, C, 0.0f);
        matmul_weight_grad(m->g[AL_P_WU], u, dlogits, BT, C, V, 0.0f);
    }
    al_gemm_bf16_release();
    if (ln)
        layernorm_backward(m->dx, m->g[AL_P_LNFW], m->g[AL_P_LNFB], m->dln, xL, m->lnf_mean,
                           m->lnf_scale, m->p[AL_P_LNFW], (size_t)BT, C, 0);
    al_prof_add(AL_OP_UNEMBED_BWD, t0);
    for (int l = L - 1; l >= 0; l--) {
        const float *x = m->x + (size_t)l * BT * C;
        const float *qkv = m->qkv + (size_t)l * BT * 3 * HD;
        const float *att = m->att + (size_t)l * B * H * T * T;
        const float *z = m->z + (size_t)l * BT * HD;
        const float *zg = m->zg + (size_t)l * BT * HD;
        const float *wo = m->p[AL_P_WO] + (size_t)l * HD * C;
        /* x_{l+1} = x_l + zg W_O + b_O: dx passes through unchanged, plus the head path */
        t0 = al_prof_t();
        matmul_forward_wt(m->dzg, m->dx, wo, BT, C, HD, 0.0f); // (B,T,H,D)
        matmul_weight_grad(m->g[AL_P_WO] + (size_t)l * HD * C, zg, m->dx, BT, HD, C, 0.0f);
        if (m->p[AL_P_BO]) bias_backward(m->g[AL_P_BO] + (size_t)l * C, m->dx, (size_t)BT, C, C);
        gate_backward(m, l, m->dzg, z, B, T);
        al_prof_add(AL_OP_WO_BWD, t0);
        t0 = al_prof_t();
        if (attention_backward(m->dqkv, m->dzg, qkv, att, B, T, H, D, 1))
            return al_errf(e, "out of memory (attention scratch)");
        al_prof_add(AL_OP_ATT_BWD, t0);
        t0 = al_prof_t();
        if (m->p[AL_P_BQ] || m->p[AL_P_BK] || m->p[AL_P_BV]) {
            /* db_Q|db_K|db_V (3HD) in one pass, into dwqkv (scratch until below) */
            bias_backward(m->dwqkv, m->dqkv, (size_t)BT, 3 * HD, 3 * (size_t)HD);
            for (int s = 0; s < 3; s++)
                if (m->p[AL_P_BQ + s])
                    memcpy(m->g[AL_P_BQ + s] + (size_t)l * HD, m->dwqkv + (size_t)s * HD,
                           sizeof(float) * HD);
        }
        /* q|k|v = inp W_QKV (+ positions): inp is ln1(x) or x */
        const float *inp = ln ? m->ln1 + (size_t)l * BT * C : x;
        model_fuse_qkv(m->wqkv, m, l);
        matmul_weight_grad(m->dwqkv, inp, m->dqkv, BT, C, 3 * HD, 0.0f);
        pos_qk_backward(m, m->dwqkv);
        unfuse_qkv_grads(m, m->dwqkv, l);
        if (ln) {
            matmul_forward_wt(m->dln, m->dqkv, m->wqkv, BT, 3 * HD, C, 0.0f);
            ln1_backward(m, l, m->g[AL_P_LN1W], m->g[AL_P_LN1B]);
        } else
            matmul_forward_wt(m->dx, m->dqkv, m->wqkv, BT, 3 * HD, C, 1.0f);
        al_prof_add(AL_OP_QKV_BWD, t0);
    }
    t0 = al_prof_t();
    encoder_backward(m->g[AL_P_WE], c->pos_type == AL_POS_SHORTFORMER ? NULL : m->g[AL_P_WPOS],
                     m->dx, m->inputs, B, T, C);
    al_prof_add(AL_OP_EMBED_BWD, t0);
    return 0;
}

int al_model_backward(al_model *m, al_err *e) {
    if (!m->acts || !m->has_targets)
        return al_errf(e, "backward needs a forward pass with targets first");
    if (m->intervened)
        return al_errf(e, "backward of a patched forward pass (or a circuit run) is not supported");
    if (al_model_alloc_grads(m, e) != 0) return -1;
    const int BT = m->B * m->T, V = m->cfg.d_vocab;
    double t0 = al_prof_t();
    /* in bf16, both products of dlogits read one copy rounded here */
    uint16_t *d16 = al_gemm_bf16_reserve(m->probs, (size_t)BT, (size_t)V);
    crossentropy_softmax_backward(m->probs, m->targets, BT, V, m->n_valid, d16, m->g[AL_P_BU],
                                  m->part);
    al_prof_add(AL_OP_CE, t0);
    return backward_from_dlogits(m, e);
}

int al_model_forward_backward(al_model *m, const int *inputs, const int *targets, int B, int T,
                              al_err *e) {
    if (!targets) return al_errf(e, "forward_backward needs targets");
    if (m->hooks.n > 0) return al_errf(e, "forward_backward does not run hooks (training only)");
    if (al_model_alloc_grads(m, e) != 0) return -1;
    if (model_forward_begin(m, inputs, targets, B, T, e)) return -1;
    const int BT = B * T, V = m->cfg.d_vocab;
    double t0 = al_prof_t();
    uint16_t *d16 = al_gemm_bf16_reserve(m->probs, (size_t)BT, (size_t)V);
    m->n_valid = crossentropy_softmax_forward_backward(m->probs, m->losses, m->targets, BT, V, d16,
                                                       m->bu_pending ? m->p[AL_P_BU] : NULL,
                                                       m->g[AL_P_BU], m->part);
    al_prof_add(AL_OP_CE, t0);
    model_mean_loss(m);
    return backward_from_dlogits(m, e);
}

int al_model_backward_acts(al_model *m, const float *dxL, float *dx, float *dzg, float *dqkv,
                           al_err *e) {
    if (!m->acts) return al_errf(e, "activation gradients need a forward pass first");
    if (m->intervened)
        return al_errf(e, "activation gradients of a patched forward pass are not supported");
    const al_config *c = &m->cfg;
    int L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head;
    int B = m->B, T = m->T, BT = B * T, HD = H * D;
    size_t nx = (size_t)BT * C, nz = (size_t)BT * HD;
    memcpy(m->dx, dxL, sizeof(float) * nx);
    if (dx) memcpy(dx + (size_t)L * nx, dxL, sizeof(float) * nx);
    for (int l = L - 1; l >= 0; l--) {
        const float *qkv = m->qkv + (size_t)l * BT * 3 * HD;
        const float *att = m->att + (size_t)l * B * H * T * T;
        const float *wo = m->p[AL_P_WO] + (size_t)l * HD * C;
        /* x_{l+1} = x_l + zg W_O: dx passes through, plus the heads' path */
        matmul_forward_wt(m->dzg, m->dx, wo, BT, C, HD, 0.0f);
        if (dzg) memcpy(dzg + (size_t)l * nz, m->dzg, sizeof(float) * nz);
        scale_by_gates(m, l, m->dzg, (size_t)BT);
        if (attention_backward(m->dqkv, m->dzg, qkv, att, B, T, H, D, 1))
            return al_errf(e, "out of memory (attention scratch)");
        if (dqkv) memcpy(dqkv + (size_t)l * 3 * nz, m->dqkv, sizeof(float) * 3 * nz);
        model_fuse_qkv(m->wqkv, m, l);
        if (c->norm_type != AL_NORM_NONE) {
            matmul_forward_wt(m->dln, m->dqkv, m->wqkv, BT, 3 * HD, C, 0.0f);
            ln1_backward(m, l, NULL, NULL);
        } else
            matmul_forward_wt(m->dx, m->dqkv, m->wqkv, BT, 3 * HD, C, 1.0f);
        if (dx) memcpy(dx + (size_t)l * nx, m->dx, sizeof(float) * nx);
    }
    return 0;
}
