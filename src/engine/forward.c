/* forward.c -- the forward pass of the model of docs/design.md §2:
 * embeddings, each layer's ln1, q|k|v, attention, head gates and W_O,
 * then ln_final and the unembedding, calling the model's hooks at the
 * points of docs/hooks.md (hooks.h) and knowing nothing of what they do
 * (patching, z replacement, circuits).
 *
 * A point whose hooks need arithmetic of its own (split q/k/v inputs,
 * hook_attn_out, hook_pos_embed under shortformer positions, the
 * attention scores) computes it only when a hook is there, and keeps the
 * unhooked path's result wherever the hooks left the activation as it
 * was: a hook that writes nothing changes no bit of the forward. Where
 * such a point's hooks did change something, the forward marks itself
 * intervened (backward follows the unhooked path only). */
#include "attnlab/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/layers.h"
#include "attnlab/prof.h"
#include "model_internal.h"

/* zg (B,T,H,D) = gate · src, src being z or what the Z hooks made of it. */
static void apply_gates(const al_model *m, int l, float *zg, const float *src, int BT) {
    int H = m->cfg.n_heads, D = m->cfg.d_head;
    const float *g = m->gates + (size_t)l * H;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < BT; i++)
        for (int h = 0; h < H; h++) {
            size_t off = ((size_t)i * H + h) * D;
            model_gate_row(zg + off, src + off, g[h], D);
        }
}

/* Run the hooks at (point, l) on data (ld floats per (b, t) row; input:
 * al_hook_act.input); records `intervened`. */
static int hook_in(al_model *m, al_hook_point point, int l, float *data, size_t ld,
                   unsigned char *rows, unsigned char *fixed, int input, al_err *e) {
    al_hook_act a = {.m = m,
                     .point = point,
                     .layer = l,
                     .data = data,
                     .ld = ld,
                     .rows = rows,
                     .fixed = fixed,
                     .input = input};
    if (al_hook_run(m, point, &a, e)) return -1;
    m->intervened |= a.intervened;
    return 0;
}

static int hook(al_model *m, al_hook_point point, int l, float *data, size_t ld,
                unsigned char *rows, unsigned char *fixed, al_err *e) {
    return hook_in(m, point, l, data, ld, rows, fixed, -1, e);
}

/* 1 if a hook is registered at (point, l). */
static int hooked(const al_model *m, al_hook_point point, int l) {
    return m->hooks.n > 0 && al_hook_any(m, point, l);
}

void model_att_row_z(float *z, const float *row, int t, const float *v, size_t vs, int D) {
    for (int d = 0; d < D; d++) z[d] = 0.0f;
    for (int u = 0; u <= t; u++) {
        float a = row[u];
        const float *vu = v + (size_t)u * vs;
        for (int d = 0; d < D; d++) z[d] += a * vu[d];
    }
}

/* n floats of the hooks' per-layer scratch (m->hk), grown on demand. */
static float *hook_scratch(al_model *m, size_t n, al_err *e) {
    if (n > m->hk_cap) {
        float *p = al_malloc(n, sizeof(float), e);
        if (!p) {
            al_err_prefix(e, "cannot allocate the hooks' scratch");
            return NULL;
        }
        free(m->hk);
        m->hk = p, m->hk_cap = n;
    }
    return m->hk;
}

/* ------------------------------------------------------- embeddings */

/* x_0 (B,T,C) = W_E[tok] + W_pos[t] (shortformer: W_E[tok] alone), with
 * the EMBED and POS_EMBED hooks when there are any: W_E[tok] is hooked
 * in x_0 itself, W_pos[t] in m->pos, and x_0 += pos adds them as
 * encoder_forward does (the same bits when the hooks wrote nothing).
 * With shortformer positions, m->pos_changed says whether the hooks
 * changed a position anywhere: then every layer's q and k read m->pos. */
static int embed_forward(al_model *m, const int *inputs, al_err *e) {
    const al_config *c = &m->cfg;
    int shortformer = c->pos_type == AL_POS_SHORTFORMER; /* W_pos goes into q and k only */
    int B = m->B, T = m->T, C = c->d_model;
    size_t n = (size_t)B * T * C;
    const float *wpe = m->p[AL_P_WPOS];
    m->pos_changed = 0;
    if (!hooked(m, AL_HOOK_EMBED, 0) && !hooked(m, AL_HOOK_POS_EMBED, 0)) {
        encoder_forward(m->x, inputs, m->p[AL_P_WE], shortformer ? NULL : wpe, B, T, C);
        return 0;
    }
    encoder_forward(m->x, inputs, m->p[AL_P_WE], NULL, B, T, C);
    if (hook(m, AL_HOOK_EMBED, 0, m->x, C, NULL, NULL, e)) return -1;
    if (n > m->pos_cap) {
        float *p = al_malloc(n, sizeof(float), e);
        if (!p) return al_err_prefix(e, "cannot allocate the positions for hook_pos_embed");
        free(m->pos);
        m->pos = p, m->pos_cap = n;
    }
    for (int b = 0; b < B; b++)
        memcpy(m->pos + (size_t)b * T * C, wpe, sizeof(float) * (size_t)T * C);
    if (hook(m, AL_HOOK_POS_EMBED, 0, m->pos, C, NULL, NULL, e)) return -1;
    if (!shortformer) {
        float *x = m->x;
        const float *p = m->pos;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) x[i] = x[i] + p[i];
        return 0;
    }
    for (int b = 0; b < B && !m->pos_changed; b++)
        m->pos_changed = memcmp(m->pos + (size_t)b * T * C, wpe, sizeof(float) * (size_t)T * C);
    m->intervened |= m->pos_changed != 0;
    return 0;
}

/* ------------------------------------------------------- LayerNorm */

/* out (N, C) = a LayerNorm of rows x (N, C) (w, b NULL: LNPre), keeping
 * mean and scale (N), with the hooks of its scale point ps (ld_s floats a
 * (b, t) row) and of its normalized point ps + 1 (ld_n) between the
 * steps, when there are any: the bits of layernorm_forward when they
 * write nothing. out may be x. */
static int ln_forward(al_model *m, al_hook_point ps, int l, int input, float *out, float *mean,
                      float *scale, const float *x, const float *w, const float *b, size_t N,
                      size_t ld_s, size_t ld_n, al_err *e) {
    const int C = m->cfg.d_model;
    const al_hook_point pn = (al_hook_point)(ps + 1);
    if (!hooked(m, ps, l) && !hooked(m, pn, l)) {
        layernorm_forward(out, mean, scale, x, w, b, N, C, m->cfg.ln_eps);
        return 0;
    }
    layernorm_stats(mean, scale, x, N, C, m->cfg.ln_eps);
    if (hook_in(m, ps, l, scale, ld_s, NULL, NULL, input, e)) return -1;
    layernorm_apply(out, x, mean, scale, w, b, N, C);
    return hook_in(m, pn, l, out, ld_n, NULL, NULL, input, e);
}

/* ------------------------------------------------------- q, k, v */

/* Shortformer positions of layer l (no-op for standard ones): q and k of
 * qkv (B,T,3,H,D) += W_pos[t] W_Q, W_pos[t] W_K of every head, with
 * m->wqkv holding layer l's fused weights (the rows of m->pos instead,
 * when the POS_EMBED hooks changed them). Before the Q/K hooks, so a
 * patched q or k (the source's) includes the source's positions, as a
 * computed one does. */
static void pos_qk_forward(al_model *m, float *qkv) {
    if (m->cfg.pos_type != AL_POS_SHORTFORMER) return;
    int HD = m->cfg.n_heads * m->cfg.d_head, C = m->cfg.d_model, BT = m->B * m->T;
    if (m->pos_changed) {
        al_sgemm(false, false, BT, 2 * HD, C, 1.0f, m->pos, C, m->wqkv, 3 * HD, 1.0f, qkv, 3 * HD);
        return;
    }
    posqk_project(m->posqk, m->p[AL_P_WPOS], m->wqkv, m->T, C, HD); // (T,2HD)
    posqk_forward(qkv, m->posqk, m->B, m->T, HD);
}

/* q|k|v (B,T,3,H,D) of layer l after the product: + b_Q, b_K, b_V and
 * the shortformer positions, in one pass when there are biases. */
static void qkv_extras(al_model *m, int l, float *qkv) {
    const int HD = m->cfg.n_heads * m->cfg.d_head, C = m->cfg.d_model;
    const float *b[3];
    for (int s = 0; s < 3; s++)
        b[s] = m->p[AL_P_BQ + s] ? m->p[AL_P_BQ + s] + (size_t)l * HD : NULL;
    if (!b[0] && !b[1] && !b[2]) {
        pos_qk_forward(m, qkv);
        return;
    }
    const float *pos = NULL;
    if (m->cfg.pos_type == AL_POS_SHORTFORMER && !m->pos_changed) {
        posqk_project(m->posqk, m->p[AL_P_WPOS], m->wqkv, m->T, C, HD); // (T,2HD)
        pos = m->posqk;
    }
    qkv_bias_forward(qkv, b[0], b[1], b[2], pos, m->B, m->T, HD);
    if (m->pos_changed) pos_qk_forward(m, qkv);
}

/* Split inputs of layer l (docs/hooks.md, TransformerLens's
 * use_split_qkv_input): each head's own copy of resid_pre x for its
 * query, key and value, hooked at Q_INPUT, K_INPUT, V_INPUT; with
 * LayerNorm, ln1 of each (b, t, h) row with its hooks (a head axis, once
 * per input); then a head whose rows differ anywhere from inp (the
 * shared ln1(x), or x) gets that q, k or v from its own rows (bias and
 * positions included). A head whose rows came out as inp keeps the
 * fused product's value, bit for bit. */
static int split_inputs(al_model *m, int l, const float *x, const float *inp, float *qkv,
                        al_err *e) {
    const al_config *c = &m->cfg;
    const int C = c->d_model, H = c->n_heads, D = c->d_head, HD = H * D, T = m->T;
    const size_t BT = (size_t)m->B * T, BTH = BT * H, nin = BTH * C, rs = 3 * (size_t)HD;
    const int ln = c->norm_type != AL_NORM_NONE;
    float *buf = hook_scratch(m, 3 * nin + 2 * BTH, e);
    if (!buf) return -1;
    float *mean = buf + 3 * nin, *scale = mean + BTH;
    for (int s = 0; s < 3; s++) {
        float *in = buf + s * nin;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < BT; i++)
            for (int h = 0; h < H; h++) memcpy(in + (i * H + h) * C, x + i * C, sizeof(float) * C);
        if (hook(m, (al_hook_point)(AL_HOOK_Q_INPUT + s), l, in, (size_t)H * C, NULL, NULL, e))
            return -1;
    }
    for (int s = 0; ln && s < 3; s++) {
        float *in = buf + s * nin;
        const float *w = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
        const float *b = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l * C : NULL;
        if (ln_forward(m, AL_HOOK_LN1_SCALE, l, s, in, mean, scale, in, w, b, BTH, H, (size_t)H * C,
                       e))
            return -1;
    }
    for (int s = 0; s < 3; s++)
        for (int h = 0; h < H; h++) {
            const float *in = buf + s * nin + (size_t)h * C;
            int same = 1;
            for (size_t i = 0; i < BT && same; i++)
                same = !memcmp(in + i * H * C, inp + i * C, sizeof(float) * C);
            if (same) continue;
            m->intervened = 1;
            const float *w = s == 0   ? al_head_wq(m, l, h)
                             : s == 1 ? al_head_wk(m, l, h)
                                      : al_head_wv(m, l, h);
            float *dst = qkv + (size_t)s * HD + (size_t)h * D;
            al_sgemm(false, false, (int)BT, D, C, 1.0f, in, H * C, w, D, 0.0f, dst, (int)rs);
            if (m->p[AL_P_BQ + s])
                bias_forward(dst, m->p[AL_P_BQ + s] + (size_t)l * HD + (size_t)h * D, BT, D, rs);
            if (c->pos_type != AL_POS_SHORTFORMER || s == 2) continue;
            if (m->pos_changed) {
                al_sgemm(false, false, (int)BT, D, C, 1.0f, m->pos, C, w, D, 1.0f, dst, (int)rs);
                continue;
            }
            for (size_t i = 0; i < BT; i++) { /* this layer's W_pos W_Q|K, pos_qk_forward's */
                const float *p = m->posqk + (i % T) * 2 * HD + (size_t)s * HD + (size_t)h * D;
                for (int d = 0; d < D; d++) dst[i * rs + d] += p[d];
            }
        }
    return 0;
}

/* ------------------------------------------------------- the output */

/* xn (B,T,C) += Σ_h result_h, result (B,T,H,C) = each head's zg · W_O[l,h]
 * as the RESULT hooks left it (heads summed in order, per element). */
static int add_results(al_model *m, int l, float *xn, const float *zg, al_err *e) {
    const int H = m->cfg.n_heads, D = m->cfg.d_head, C = m->cfg.d_model, HD = H * D;
    const size_t BT = (size_t)m->B * m->T;
    for (int h = 0; h < H; h++)
        al_sgemm(false, false, (int)BT, C, D, 1.0f, zg + h * D, HD, al_head_wo(m, l, h), C, 0.0f,
                 m->result + (size_t)h * C, H * C);
    if (hook(m, AL_HOOK_RESULT, l, m->result, (size_t)H * C, NULL, NULL, e)) return -1;
    for (size_t r = 0; r < BT; r++)
        for (int h = 0; h < H; h++) {
            const float *o = m->result + (r * H + h) * C;
            float *x = xn + r * C;
            for (int k = 0; k < C; k++) x[k] += o[k];
        }
    return 0;
}

/* ATTN_OUT of layer l: attn_out (B,T,C) = Σ_h result_h + b_O (the RESULT
 * hooks' results, or zg W_O), computed apart from the residual update xn
 * (which added it to x directly); where the hooks changed it, xn = x +
 * attn_out again, so a hook that writes nothing leaves xn's bits. */
static int attn_out_hook(al_model *m, int l, const float *x, float *xn, const float *zg,
                         int results, al_err *e) {
    const int H = m->cfg.n_heads, D = m->cfg.d_head, C = m->cfg.d_model, HD = H * D;
    const size_t BT = (size_t)m->B * m->T, n = BT * C;
    float *a = hook_scratch(m, 2 * n, e), *a0 = a + n;
    if (!a) return -1;
    if (results) {
        memset(a, 0, sizeof(float) * n);
        for (size_t r = 0; r < BT; r++)
            for (int h = 0; h < H; h++)
                for (int k = 0; k < C; k++) a[r * C + k] += m->result[(r * H + h) * C + k];
    } else
        matmul_forward(a, zg, m->p[AL_P_WO] + (size_t)l * HD * C, (int)BT, HD, C, 0.0f);
    if (m->p[AL_P_BO]) bias_forward(a, m->p[AL_P_BO] + (size_t)l * C, BT, C, C);
    memcpy(a0, a, sizeof(float) * n);
    if (hook(m, AL_HOOK_ATTN_OUT, l, a, C, NULL, NULL, e)) return -1;
    if (!memcmp(a, a0, sizeof(float) * n)) return 0;
    m->intervened = 1;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) xn[i] = x[i] + a[i];
    return 0;
}

/* ------------------------------------------------------- the layers */

/* The attention of layer l: probabilities att and z from qkv, with the
 * ATTN_SCORES hooks between the scores and the softmax when there are any,
 * then the PATTERN hooks (z = row · v again where they wrote a row). */
static int attention(al_model *m, int l, const float *qkv, float *att, float *z, al_err *e) {
    const int H = m->cfg.n_heads, D = m->cfg.d_head, HD = H * D, B = m->B, T = m->T;
    double t0 = al_prof_t();
    if (hooked(m, AL_HOOK_ATTN_SCORES, l)) {
        if (attention_scores_forward(att, qkv, B, T, H, D))
            return al_errf(e, "out of memory (attention scratch)");
        if (hook(m, AL_HOOK_ATTN_SCORES, l, att, T, NULL, NULL, e)) return -1;
        if (attention_pattern_forward(z, att, qkv, B, T, H, D))
            return al_errf(e, "out of memory (attention scratch)");
    } else if (attention_forward(z, att, qkv, B, T, H, D, 1))
        return al_errf(e, "out of memory (attention scratch)");
    al_prof_add(AL_OP_ATT_FWD, t0);
    if (!hooked(m, AL_HOOK_PATTERN, l)) return 0;
    /* rows a hook wrote: z = row · v there, for every sequence */
    memset(m->rows, 0, (size_t)H * T);
    if (hook(m, AL_HOOK_PATTERN, l, att, T, m->rows, NULL, e)) return -1;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            if (!m->rows[(size_t)h * T + t]) continue;
            for (int b = 0; b < B; b++) {
                size_t ro = (((size_t)b * H + h) * T + t) * T;
                const float *v = qkv + (size_t)b * T * 3 * HD + 2 * HD + (size_t)h * D;
                model_att_row_z(z + ((size_t)b * T + t) * HD + (size_t)h * D, att + ro, t, v,
                                3 * (size_t)HD, D);
            }
        }
    return 0;
}

/* Layers and unembedding of the forward pass, from m->x[0] (the
 * embeddings) of shape (m->B, m->T) into m->x and m->probs (logits),
 * with the hooks at their points (hooks.h). */
static int forward_layers(al_model *m, int unembed, al_err *e) {
    const al_config *c = &m->cfg;
    int L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head, V = c->d_vocab;
    int B = m->B, T = m->T, BT = B * T, HD = H * D;
    int any = m->hooks.n > 0, ln = c->norm_type != AL_NORM_NONE;
    for (int l = 0; l < L; l++) {
        float *x = m->x + (size_t)l * BT * C; // (B,T,C)
        float *xn = x + (size_t)BT * C; // (B,T,C)
        float *qkv = m->qkv + (size_t)l * BT * 3 * HD; // (B,T,3,H,D)
        float *att = m->att + (size_t)l * B * H * T * T; // (B,H,T,T)
        float *z = m->z + (size_t)l * BT * HD; // (B,T,H,D)
        float *zg = m->zg + (size_t)l * BT * HD; // (B,T,H,D)
        const float *zsrc = z, *inp = x; // inp: what W_Q|K|V read
        if (any && hook(m, AL_HOOK_RESID_PRE, l, x, C, NULL, NULL, e)) return -1;
        int split = hooked(m, AL_HOOK_Q_INPUT, l) || hooked(m, AL_HOOK_K_INPUT, l) ||
                    hooked(m, AL_HOOK_V_INPUT, l);
        double t0 = al_prof_t();
        if (ln) { /* ln1 (B,T,C); under split inputs its hooks run per input, below */
            float *n = m->ln1 + (size_t)l * BT * C, *mean = m->ln1_mean + (size_t)l * BT;
            float *scale = m->ln1_scale + (size_t)l * BT;
            const float *w = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
            const float *b = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l * C : NULL;
            if (split)
                layernorm_forward(n, mean, scale, x, w, b, BT, C, c->ln_eps);
            else if (ln_forward(m, AL_HOOK_LN1_SCALE, l, -1, n, mean, scale, x, w, b, BT, 1, C, e))
                return -1;
            inp = n;
        }
        model_fuse_qkv(m->wqkv, m, l);
        matmul_forward(qkv, inp, m->wqkv, BT, C, 3 * HD, 0.0f);
        qkv_extras(m, l, qkv);
        al_prof_add(AL_OP_QKV, t0);
        if (split && split_inputs(m, l, x, inp, qkv, e)) return -1;
        for (int s = 0; any && s < 3; s++)
            if (hook(m, AL_HOOK_Q + s, l, qkv + (size_t)s * HD, 3 * HD, NULL, NULL, e)) return -1;
        if (attention(m, l, qkv, att, z, e)) return -1;
        m->zhooked[l] = 0;
        memset(m->zfixed + (size_t)l * H, 0, H);
        if (any && al_hook_any(m, AL_HOOK_Z, l)) {
            float *zs = m->zs + (size_t)l * BT * HD;
            memcpy(zs, z, sizeof(float) * (size_t)BT * HD);
            if (hook(m, AL_HOOK_Z, l, zs, HD, NULL, m->zfixed + (size_t)l * H, e)) return -1;
            m->zhooked[l] = 1;
            zsrc = zs;
        }
        t0 = al_prof_t();
        apply_gates(m, l, zg, zsrc, BT);
        if (m->p[AL_P_BO]) /* x + b_O, then + Σ_h results */
            copy_bias_forward(xn, x, m->p[AL_P_BO] + (size_t)l * C, (size_t)BT, C);
        else
            model_copy(xn, x, (size_t)BT * C);
        int results = hooked(m, AL_HOOK_RESULT, l);
        if (results) {
            if (add_results(m, l, xn, zg, e)) return -1;
        } else
            matmul_forward(xn, zg, m->p[AL_P_WO] + (size_t)l * HD * C, BT, HD, C, 1.0f);
        al_prof_add(AL_OP_WO, t0);
        if (hooked(m, AL_HOOK_ATTN_OUT, l) && attn_out_hook(m, l, x, xn, zg, results, e)) return -1;
        if (any && hook(m, AL_HOOK_RESID_POST, l, xn, C, NULL, NULL, e)) return -1;
    }
    float *xL = m->x + (size_t)L * BT * C;
    if (!unembed) return 0;
    double t0 = al_prof_t();
    const float *u = xL;
    if (ln) {
        if (ln_forward(m, AL_HOOK_LNF_SCALE, 0, -1, m->lnf, m->lnf_mean, m->lnf_scale, xL,
                       m->p[AL_P_LNFW], m->p[AL_P_LNFB], (size_t)BT, 1, C, e))
            return -1;
        u = m->lnf;
    }
    /* b_U: added by the cross-entropy's pass over the logits, unless the
     * LOGITS hooks see them first */
    int logits_hooked = hooked(m, AL_HOOK_LOGITS, 0);
    model_unembed_rows(m, u, BT, m->probs, logits_hooked);
    m->bu_pending = m->p[AL_P_BU] && !logits_hooked;
    al_prof_add(AL_OP_UNEMBED, t0);
    if (logits_hooked && hook(m, AL_HOOK_LOGITS, 0, m->probs, V, NULL, NULL, e)) return -1;
    return 0;
}

int model_forward_body(al_model *m, const int *inputs, int unembed, al_err *e) {
    m->intervened = 0;
    double t0 = al_prof_t();
    int rc = embed_forward(m, inputs, e);
    al_prof_add(AL_OP_EMBED, t0);
    return rc ? -1 : forward_layers(m, unembed, e);
}

int model_forward_begin(al_model *m, const int *inputs, const int *targets, int B, int T,
                        al_err *e) {
    if (model_check_inputs(m, inputs, targets, B, T, e) != 0) return -1;
    if (model_ensure_acts(m, B, T, e) != 0) return -1;
    const int BT = B * T;
    m->B = B;
    m->T = T;
    memcpy(m->inputs, inputs, sizeof(int) * BT);
    m->has_targets = targets != NULL;
    for (int i = 0; i < BT; i++) m->targets[i] = targets ? targets[i] : -1;
    if (model_forward_body(m, inputs, 1, e)) {
        m->has_targets = 0; /* no backward of a failed forward */
        m->intervened = 1;
        return -1;
    }
    return 0;
}

void model_mean_loss(al_model *m) {
    double sum = 0.0;
    for (int i = 0; i < m->B * m->T; i++) sum += m->losses[i];
    m->mean_loss = m->n_valid ? (float)(sum / m->n_valid) : -1.0f;
}

int al_model_forward(al_model *m, const int *inputs, const int *targets, int B, int T, al_err *e) {
    if (model_forward_begin(m, inputs, targets, B, T, e)) return -1;
    double t0 = al_prof_t();
    m->n_valid = crossentropy_softmax_forward(m->probs, m->losses, m->targets, B * T,
                                              m->cfg.d_vocab, m->bu_pending ? m->p[AL_P_BU] : NULL);
    al_prof_add(AL_OP_CE, t0);
    model_mean_loss(m);
    return 0;
}
