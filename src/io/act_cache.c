/* act_cache.c -- activations out under TransformerLens hook names
 * (act_cache.h). The engine keeps every activation of a forward in its
 * own layout (q|k|v interleaved per position, gated z); this file copies
 * them into TransformerLens's shapes, one tensor per hook and layer. */
#include "attnlab/act_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/safetensors.h"

enum { K_EMBED, K_POS, K_RESID_PRE, K_Q, K_K, K_V, K_PATTERN, K_Z, K_RESULT, K_RESID_POST, N_KINDS };
static const char *const KIND[N_KINDS] = {"embed", "pos_embed", "resid_pre", "q", "k",
                                          "v", "pattern", "z", "result", "resid_post"};

/* want[k] = 1 for each kind in the comma-separated list. */
static int parse_hooks(const char *hooks, int *want, al_err *e) {
    int all = !hooks || !strcmp(hooks, "all");
    for (int k = 0; k < N_KINDS; k++) want[k] = all;
    if (all) return 0;
    if (!*hooks) /* a cache of the tokens alone is no cache */
        return al_errf(e, "no hook kinds given (--hooks ''): name some (e.g. pattern,z) or all");
    for (const char *p = hooks; *p;) {
        size_t n = strcspn(p, ",");
        int k = 0;
        while (k < N_KINDS && (strlen(KIND[k]) != n || strncmp(KIND[k], p, n))) k++;
        const char *near = k == N_KINDS ? al_nearest_word(p, n, KIND, N_KINDS) : NULL;
        if (near)
            return al_errf(e, "unknown hook kind '%.*s' (did you mean '%s'?)", (int)n, p, near);
        if (k == N_KINDS)
            return al_errf(e, "unknown hook kind '%.*s' (known: embed, pos_embed, resid_pre, q, "
                           "k, v, pattern, z, result, resid_post, or all)", (int)n, p);
        want[k] = 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

/* Floats of one kind's tensor for one layer (embed and pos_embed: once). */
static size_t kind_floats(const al_config *c, int k, size_t BT, size_t T) {
    size_t C = c->d_model, H = c->n_heads, D = c->d_head;
    switch (k) {
    case K_Q: case K_K: case K_V: case K_Z: return BT * H * D;
    case K_PATTERN: return BT * H * T;
    case K_RESULT: return BT * H * C;
    default: return BT * C;
    }
}

int al_cache_limit_check(double max_mb, al_err *e) {
    if (!(max_mb > 0) || isinf(max_mb))
        return al_errf(e, "the cache limit must be a finite number of megabytes > 0, not %g",
                       max_mb);
    return 0;
}

size_t al_cache_bytes(const al_config *c, int B, int T, const char *hooks, al_err *e) {
    int want[N_KINDS];
    if (parse_hooks(hooks, want, e)) return 0;
    size_t BT = (size_t)B * T, total = BT * 4;
    for (int k = 0; k < N_KINDS; k++)
        if (want[k])
            total += 4 * kind_floats(c, k, BT, (size_t)T) *
                     (k == K_EMBED || k == K_POS ? 1 : (size_t)c->n_layers);
    return total;
}

int al_cache_write(al_model *m, const int *tokens, int B, int T, const char *hooks,
                   size_t max_bytes, const char *sha256, const char *path, al_err *e) {
    const al_config *c = &m->cfg;
    int want[N_KINDS];
    if (parse_hooks(hooks, want, e)) return -1;
    size_t need = al_cache_bytes(c, B, T, hooks, e);
    if (need > max_bytes)
        return al_errf(e, "the cache would take %.1f MB (%d x %d tokens, %d layers), over the "
                       "limit of %.1f MB: fewer windows or hooks, or raise the limit",
                       need / 1e6, B, T, c->n_layers, max_bytes / 1e6);
    if (al_model_forward(m, tokens, NULL, B, T, e)) return -1;
    const size_t L = c->n_layers, H = c->n_heads, D = c->d_head, C = c->d_model, V = c->d_vocab;
    const size_t BT = (size_t)B * T, HD = H * D;
    (void)V;
    int n_t = 1 + 2 + (int)L * (N_KINDS - 2);
    al_st_tensor *ts = al_calloc((size_t)n_t, sizeof *ts, e);
    char (*names)[64] = ts ? al_calloc((size_t)n_t, 64, e) : NULL;
    float *buf = names ? al_malloc(need / 4 + 1, sizeof(float), e) : NULL;
    int32_t *tok32 = buf ? al_malloc(BT, sizeof(int32_t), e) : NULL;
    int rc = -1, n = 0;
    if (!tok32) goto out;
    for (size_t i = 0; i < BT; i++) tok32[i] = tokens[i];
    ts[n++] = (al_st_tensor){"tokens", AL_DT_I32, 2, {B, T}, tok32};
    float *w = buf;
    if (want[K_EMBED]) {
        for (size_t i = 0; i < BT; i++)
            memcpy(w + i * C, m->p[AL_P_WE] + (size_t)tokens[i] * C, sizeof(float) * C);
        ts[n++] = (al_st_tensor){"hook_embed", AL_DT_F32, 3, {B, T, (int64_t)C}, w};
        w += BT * C;
    }
    if (want[K_POS]) {
        for (size_t i = 0; i < BT; i++)
            memcpy(w + i * C, m->p[AL_P_WPOS] + (i % (size_t)T) * C, sizeof(float) * C);
        ts[n++] = (al_st_tensor){"hook_pos_embed", AL_DT_F32, 3, {B, T, (int64_t)C}, w};
        w += BT * C;
    }
    for (size_t l = 0; l < L; l++) {
        const float *qkv = m->qkv + l * BT * 3 * HD, *att = m->att + l * B * H * T * T;
        const float *z = m->z + l * BT * HD, *zg = m->zg + l * BT * HD;
        for (int k = K_RESID_PRE; k < N_KINDS; k++) {
            if (!want[k]) continue;
            al_st_tensor *t = &ts[n];
            t->dtype = AL_DT_F32, t->data = w, t->name = names[n];
            const char *pre = k == K_RESID_PRE || k == K_RESID_POST ? "" : "attn.";
            snprintf(names[n], 64, "blocks.%zu.%shook_%s", l, pre, KIND[k]);
            switch (k) {
            case K_RESID_PRE: case K_RESID_POST:
                memcpy(w, m->x + (l + (k == K_RESID_POST)) * BT * C, sizeof(float) * BT * C);
                t->ndim = 3, t->shape[0] = B, t->shape[1] = T, t->shape[2] = (int64_t)C;
                break;
            case K_Q: case K_K: case K_V:
                for (size_t i = 0; i < BT; i++)
                    memcpy(w + i * HD, qkv + i * 3 * HD + (size_t)(k - K_Q) * HD, sizeof(float) * HD);
                t->ndim = 4, t->shape[0] = B, t->shape[1] = T, t->shape[2] = (int64_t)H;
                t->shape[3] = (int64_t)D;
                break;
            case K_Z:
                memcpy(w, z, sizeof(float) * BT * HD);
                t->ndim = 4, t->shape[0] = B, t->shape[1] = T, t->shape[2] = (int64_t)H;
                t->shape[3] = (int64_t)D;
                break;
            case K_PATTERN:
                memcpy(w, att, sizeof(float) * B * H * T * T);
                t->ndim = 4, t->shape[0] = B, t->shape[1] = (int64_t)H, t->shape[2] = T;
                t->shape[3] = T;
                break;
            case K_RESULT: /* each head's output: its gated z through its W_O rows */
                for (size_t i = 0; i < BT; i++)
                    for (size_t h = 0; h < H; h++) {
                        float *o = w + (i * H + h) * C;
                        const float *zz = zg + i * HD + h * D, *wo = al_head_wo(m, (int)l, (int)h);
                        memset(o, 0, sizeof(float) * C);
                        for (size_t d = 0; d < D; d++)
                            for (size_t cc = 0; cc < C; cc++) o[cc] += zz[d] * wo[d * C + cc];
                    }
                t->ndim = 4, t->shape[0] = B, t->shape[1] = T, t->shape[2] = (int64_t)H;
                t->shape[3] = (int64_t)C;
                break;
            }
            w += kind_floats(c, k, BT, (size_t)T);
            n++;
        }
    }
    char sL[16], sH[16], sD[16], sC[16], sB[16], sT[16];
    snprintf(sL, sizeof sL, "%zu", L), snprintf(sH, sizeof sH, "%zu", H);
    snprintf(sD, sizeof sD, "%zu", D), snprintf(sC, sizeof sC, "%zu", C);
    snprintf(sB, sizeof sB, "%d", B), snprintf(sT, sizeof sT, "%d", T);
    const char *mk[] = {"format", "n_layers", "n_heads", "d_head", "d_model", "B", "T", "model_sha256"};
    const char *mv[] = {"attnlab-cache", sL, sH, sD, sC, sB, sT, sha256 ? sha256 : ""};
    rc = al_st_write(path, ts, n, mk, mv, sha256 ? 8 : 7, e);
out:
    free(ts);
    free(names);
    free(buf);
    free(tok32);
    return rc;
}
