/* hooks.c -- the hook list of a model, and the two interventions the
 * engine itself offers as hooks: activation patching (al_patch_spec) and
 * z replacement (hooks.h). Circuit runs are hooks too (circuit_hooks.c). */
#include "attnlab/hooks.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/model.h"

/* ------------------------------------------------------- the table */

/* docs/hooks.md is this table in prose. `tail` is the name after
 * "blocks.{l}." (block points) or the whole name (model-level points);
 * `shape` lists the dims by letter (B batch, T positions, S source
 * positions (= T), H heads, D d_head, C d_model, V d_vocab, 1). */
static const struct hook_row {
    const char *tail;
    int model_level;
    int runs; /* the forward runs hooks here */
    const char *shape;
} HOOKS[AL_HOOK_N_POINTS] = {
    [AL_HOOK_RESID_PRE] = {"hook_resid_pre", 0, 1, "BTC"},
    [AL_HOOK_Q] = {"attn.hook_q", 0, 1, "BTHD"},
    [AL_HOOK_K] = {"attn.hook_k", 0, 1, "BTHD"},
    [AL_HOOK_V] = {"attn.hook_v", 0, 1, "BTHD"},
    [AL_HOOK_PATTERN] = {"attn.hook_pattern", 0, 1, "BHTS"},
    [AL_HOOK_Z] = {"attn.hook_z", 0, 1, "BTHD"},
    [AL_HOOK_RESULT] = {"attn.hook_result", 0, 1, "BTHC"},
    [AL_HOOK_RESID_POST] = {"hook_resid_post", 0, 1, "BTC"},
    [AL_HOOK_EMBED] = {"hook_embed", 1, 1, "BTC"},
    [AL_HOOK_POS_EMBED] = {"hook_pos_embed", 1, 1, "BTC"},
    [AL_HOOK_Q_INPUT] = {"hook_q_input", 0, 1, "BTHC"},
    [AL_HOOK_K_INPUT] = {"hook_k_input", 0, 1, "BTHC"},
    [AL_HOOK_V_INPUT] = {"hook_v_input", 0, 1, "BTHC"},
    [AL_HOOK_LN1_SCALE] = {"ln1.hook_scale", 0, 1, "BT1"},
    [AL_HOOK_LN1_NORMALIZED] = {"ln1.hook_normalized", 0, 1, "BTC"},
    [AL_HOOK_ATTN_SCORES] = {"attn.hook_attn_scores", 0, 1, "BHTS"},
    [AL_HOOK_ATTN_OUT] = {"hook_attn_out", 0, 1, "BTC"},
    [AL_HOOK_LNF_SCALE] = {"ln_final.hook_scale", 1, 1, "BT1"},
    [AL_HOOK_LNF_NORMALIZED] = {"ln_final.hook_normalized", 1, 1, "BTC"},
    [AL_HOOK_LOGITS] = {"logits", 1, 1, "BTV"},
};

static int known(al_hook_point p) { return (int)p >= 0 && p < AL_HOOK_N_POINTS; }

/* The LayerNorm points exist only in models with LayerNorm (the table's
 * "when it exists" column of docs/hooks.md). */
int al_hook_exists(const al_config *c, al_hook_point p) {
    if (!known(p)) return 0;
    int ln_point = p == AL_HOOK_LN1_SCALE || p == AL_HOOK_LN1_NORMALIZED ||
                   p == AL_HOOK_LNF_SCALE || p == AL_HOOK_LNF_NORMALIZED;
    return !ln_point || c->norm_type != AL_NORM_NONE;
}

int al_hook_is_model_level(al_hook_point point) { return known(point) && HOOKS[point].model_level; }

int al_hook_runs(al_hook_point point) { return known(point) && HOOKS[point].runs; }

const char *al_hook_layout(al_hook_point point) { return known(point) ? HOOKS[point].shape : NULL; }

int al_hook_name(al_hook_point point, int layer, char *buf, size_t cap) {
    if (!known(point)) return -1;
    int n = HOOKS[point].model_level ? snprintf(buf, cap, "%s", HOOKS[point].tail)
                                     : snprintf(buf, cap, "blocks.%d.%s", layer, HOOKS[point].tail);
    return n;
}

int al_hook_parse(const char *name, int n_layers, al_hook_point *point, int *layer, al_err *e) {
    if (!name) return al_errf(e, "hook name: none given");
    int l = 0;
    const char *tail = name;
    int block = !strncmp(name, "blocks.", 7);
    if (block) {
        const char *p = name + 7;
        if (*p < '0' || *p > '9')
            return al_errf(e, "hook name '%s': no layer after 'blocks.'", name);
        long v = 0;
        while (*p >= '0' && *p <= '9' && v <= 1000000) v = v * 10 + (*p++ - '0');
        if (*p != '.') return al_errf(e, "hook name '%s': no '.' after the layer", name);
        if (v >= n_layers)
            return al_errf(e, "hook name '%s': layer %ld, but the model has %d layer%s", name, v,
                           n_layers, n_layers == 1 ? "" : "s");
        l = (int)v, tail = p + 1;
    }
    for (int i = 0; i < AL_HOOK_N_POINTS; i++)
        if (HOOKS[i].model_level == !block && !strcmp(HOOKS[i].tail, tail)) {
            *point = (al_hook_point)i, *layer = l;
            return 0;
        }
    /* the nearest name of the same kind, else of the other: a block point
     * named without its "blocks.L.", or a model-level one with it */
    const char *same[AL_HOOK_N_POINTS], *other[AL_HOOK_N_POINTS];
    for (int i = 0; i < AL_HOOK_N_POINTS; i++) {
        int mine = HOOKS[i].model_level == !block;
        same[i] = mine ? HOOKS[i].tail : NULL, other[i] = mine ? NULL : HOOKS[i].tail;
    }
    const char *near = al_nearest_word(tail, strlen(tail), same, AL_HOOK_N_POINTS);
    int flip = !near;
    if (flip) near = al_nearest_word(tail, strlen(tail), other, AL_HOOK_N_POINTS);
    if (near && block != flip)
        return al_errf(e, "unknown hook name '%s' (did you mean 'blocks.%d.%s'?)", name, l, near);
    if (near) return al_errf(e, "unknown hook name '%s' (did you mean '%s'?)", name, near);
    return al_errf(e,
                   "unknown hook name '%s' (docs/hooks.md lists them, e.g. "
                   "blocks.0.attn.hook_pattern, blocks.0.hook_resid_post, ln_final.hook_scale)",
                   name);
}

int al_hook_shape(al_hook_point point, int B, int T, int C, int H, int D, int V, int64_t shape[4]) {
    if (!known(point)) return -1;
    int n = 0;
    for (const char *s = HOOKS[point].shape; *s; s++) {
        int64_t v = 1;
        switch (*s) {
        case 'B': v = B; break;
        case 'T':
        case 'S': v = T; break;
        case 'H': v = H; break;
        case 'D': v = D; break;
        case 'C': v = C; break;
        case 'V': v = V; break;
        }
        shape[n++] = v;
    }
    return n;
}

int al_hook_view(const al_hook_act *a, int64_t shape[4], int64_t strides[4]) {
    const al_model *m = a->m;
    const al_config *c = &m->cfg;
    int nd =
        al_hook_shape(a->point, m->B, m->T, c->d_model, c->n_heads, c->d_head, c->d_vocab, shape);
    if (nd < 0) return -1;
    const char *s = HOOKS[a->point].shape;
    int64_t st = 1;
    for (int k = nd - 1; k >= 0; k--) {
        /* the query position's dim steps by ld (0: contiguous rows) */
        if (s[k] == 'T' && a->ld) st = (int64_t)a->ld;
        strides[k] = st;
        st *= shape[k];
    }
    return nd;
}

/* ------------------------------------------------------- the list */

/* Room for need hooks in hs (doubling, so n adds cost O(n) copies). */
static int grow(al_hooks *hs, int need, al_err *e) {
    if (need <= hs->cap) return 0;
    if (need > INT_MAX / 2) return al_errf(e, "hook: more than %d hooks", INT_MAX / 2);
    int cap = hs->cap ? hs->cap : 16;
    while (cap < need) cap *= 2;
    al_hook *h = realloc(hs->h, sizeof *h * (size_t)cap);
    if (!h) return al_errf(e, "out of memory (a list of %d hooks)", cap);
    hs->h = h, hs->cap = cap;
    return 0;
}

int al_hook_add(al_model *m, al_hook_point point, int layer, al_hook_fn fn, void *ctx, al_err *e) {
    if (!known(point) || !fn)
        return al_errf(e, "hook: unknown point %d (or no function)", (int)point);
    if (!HOOKS[point].runs) {
        char nm[64];
        al_hook_name(point, layer < 0 ? 0 : layer, nm, sizeof nm);
        return al_errf(e, "hook point %s is not run by this engine's forward", nm);
    }
    if (!al_hook_exists(&m->cfg, point)) {
        char nm[64];
        al_hook_name(point, layer < 0 ? 0 : layer, nm, sizeof nm);
        return al_errf(e, "hook point %s does not exist in a model without LayerNorm", nm);
    }
    if (HOOKS[point].model_level && layer > 0)
        return al_errf(e, "hook: %s is a model-level point (layer %d given)", HOOKS[point].tail,
                       layer);
    if (layer < -1 || layer >= m->cfg.n_layers)
        return al_errf(e, "hook: layer %d outside the model's %d layers", layer, m->cfg.n_layers);
    if (grow(&m->hooks, m->hooks.n + 1, e)) return -1;
    m->hooks.h[m->hooks.n++] = (al_hook){point, layer, fn, ctx};
    return 0;
}

void al_hook_remove(al_model *m, const void *ctx) {
    int k = 0;
    for (int i = 0; i < m->hooks.n; i++)
        if (m->hooks.h[i].ctx != ctx) m->hooks.h[k++] = m->hooks.h[i];
    m->hooks.n = k;
}

void al_hook_clear(al_model *m) { m->hooks.n = 0; }

void al_hooks_save(al_model *m, al_hooks *saved) {
    *saved = m->hooks;
    memset(&m->hooks, 0, sizeof m->hooks);
}

void al_hooks_restore(al_model *m, al_hooks *saved) {
    al_hooks_free(&m->hooks);
    m->hooks = *saved;
    memset(saved, 0, sizeof *saved);
}

int al_hooks_copy(al_hooks *dst, const al_hooks *src, const void *skip, al_err *e) {
    dst->n = 0;
    if (grow(dst, src->n, e)) return -1;
    for (int i = 0; i < src->n; i++)
        if (src->h[i].ctx != skip) dst->h[dst->n++] = src->h[i];
    return 0;
}

void al_hooks_free(al_hooks *hs) {
    free(hs->h);
    memset(hs, 0, sizeof *hs);
}

int al_hook_any(const al_model *m, al_hook_point point, int l) {
    for (int i = 0; i < m->hooks.n; i++)
        if (m->hooks.h[i].point == point && (m->hooks.h[i].layer < 0 || m->hooks.h[i].layer == l))
            return 1;
    return 0;
}

int al_hook_run(al_model *m, al_hook_point point, al_hook_act *a, al_err *e) {
    for (int i = 0; i < m->hooks.n; i++) {
        const al_hook *h = &m->hooks.h[i];
        if (h->point != point || (h->layer >= 0 && h->layer != a->layer)) continue;
        a->m = m, a->point = point;
        if (h->fn(a, h->ctx, e)) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ patching */

/* RESID_PRE of layer l (x_mask row l) and RESID_POST of the last layer
 * (row L): masked positions from the source, in every sequence. */
static int patch_x(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const al_patch_spec *p = ctx;
    a->intervened = 1;
    if (!p->x_mask) return 0;
    const al_model *m = a->m;
    int B = m->B, T = m->T, C = m->cfg.d_model;
    int l = a->point == AL_HOOK_RESID_POST ? a->layer + 1 : a->layer;
    const unsigned char *xm = p->x_mask + (size_t)l * T;
    const float *src = p->src_x + (size_t)l * B * T * C;
    for (int t = 0; t < T; t++) {
        if (!xm[t]) continue;
        for (int b = 0; b < B; b++) {
            size_t off = ((size_t)b * T + t) * C;
            memcpy(a->data + off, src + off, sizeof(float) * C);
        }
    }
    return 0;
}

/* Q, K or V of layer l: the masked (h, t) vectors from the source. */
static int patch_qkv(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const al_patch_spec *p = ctx;
    a->intervened = 1;
    const al_model *m = a->m;
    int B = m->B, T = m->T, H = m->cfg.n_heads, D = m->cfg.d_head, l = a->layer;
    int s = a->point - AL_HOOK_Q;
    size_t HD = (size_t)H * D, BT = (size_t)B * T;
    const unsigned char *qm = p->qkv_mask + ((size_t)l * 3 + s) * H * T;
    const float *src = p->src_qkv + (size_t)l * BT * 3 * HD + s * HD;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            if (!qm[(size_t)h * T + t]) continue;
            for (int b = 0; b < B; b++) {
                size_t off = ((size_t)b * T + t) * a->ld + (size_t)h * D;
                memcpy(a->data + off, src + off, sizeof(float) * D);
            }
        }
    return 0;
}

/* PATTERN of layer l: masked rows (h, t) from the source (z follows). */
static int patch_att(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const al_patch_spec *p = ctx;
    a->intervened = 1;
    const al_model *m = a->m;
    int B = m->B, T = m->T, H = m->cfg.n_heads, l = a->layer;
    const unsigned char *am = p->att_mask + (size_t)l * H * T;
    const float *src = p->src_att + (size_t)l * B * H * T * T;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            if (!am[(size_t)h * T + t]) continue;
            for (int b = 0; b < B; b++) {
                size_t ro = (((size_t)b * H + h) * T + t) * T;
                memcpy(a->data + ro, src + ro, sizeof(float) * T);
            }
            a->rows[(size_t)h * T + t] = 1;
        }
    return 0;
}

/* Z of layer l: masked (h, t) from the source's z (the gate scales it). */
static int patch_z(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const al_patch_spec *p = ctx;
    a->intervened = 1;
    const al_model *m = a->m;
    int T = m->T, H = m->cfg.n_heads, D = m->cfg.d_head, l = a->layer;
    size_t BT = (size_t)m->B * T;
    const unsigned char *zm = p->z_mask + (size_t)l * H * T;
    const float *pz = p->src_z + (size_t)l * BT * H * D; /* (B,T,H,D) */
    for (int h = 0; h < H; h++)
        for (size_t i = 0; i < BT; i++) {
            if (!zm[(size_t)h * T + i % T]) continue;
            size_t off = (i * H + h) * D;
            memcpy(a->data + off, pz + off, sizeof(float) * D);
        }
    return 0;
}

int al_patch_hooks_add(al_model *m, const al_patch_spec *p, al_err *e) {
    if ((p->x_mask && !p->src_x) || (p->z_mask && !p->src_z) || (p->qkv_mask && !p->src_qkv) ||
        (p->att_mask && !p->src_att))
        return al_errf(e, "patch spec has a mask without its source activations");
    void *ctx = (void *)p;
    int L = m->cfg.n_layers;
    /* RESID_PRE always: it marks the forward as patched even with no mask */
    int rc = al_hook_add(m, AL_HOOK_RESID_PRE, -1, patch_x, ctx, e) ||
             (p->x_mask && al_hook_add(m, AL_HOOK_RESID_POST, L - 1, patch_x, ctx, e));
    for (int s = 0; rc == 0 && p->qkv_mask && s < 3; s++)
        rc = al_hook_add(m, AL_HOOK_Q + s, -1, patch_qkv, ctx, e);
    if (rc == 0 && p->att_mask) rc = al_hook_add(m, AL_HOOK_PATTERN, -1, patch_att, ctx, e);
    if (rc == 0 && p->z_mask) rc = al_hook_add(m, AL_HOOK_Z, -1, patch_z, ctx, e);
    if (rc) al_hook_remove(m, ctx);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------- z replacement */

static int zrep(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const float *const *rep = ctx;
    const al_model *m = a->m;
    int H = m->cfg.n_heads, D = m->cfg.d_head, l = a->layer;
    size_t BT = (size_t)m->B * m->T;
    for (int h = 0; h < H; h++) {
        const float *r = rep[l * H + h];
        if (!r) continue;
        for (size_t i = 0; i < BT; i++)
            memcpy(a->data + (i * H + h) * D, r + i * D, sizeof(float) * D);
        a->fixed[h] = 1;
    }
    return 0;
}

int al_zrep_hooks_add(al_model *m, const float *const *rep, al_err *e) {
    return al_hook_add(m, AL_HOOK_Z, -1, zrep, (void *)rep, e);
}
