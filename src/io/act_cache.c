/* act_cache.c -- activations out under TransformerLens hook names
 * (act_cache.h). Each chosen point gets a hook that copies what the
 * forward shows it (al_hook_view: TransformerLens's shape, the engine's
 * strides) into one contiguous tensor per point and layer, so the cache
 * holds exactly what a hook there sees. */
#include "attnlab/act_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/hooks.h"
#include "attnlab/safetensors.h"

/* The split q/k/v inputs are left out: with a hook on them ln1 runs per
 * head and input (docs/hooks.md), so they would change what the ln1
 * points hold; Python's run_with_cache reads them. */
static int cacheable(al_hook_point p) {
    return al_hook_runs(p) && p != AL_HOOK_Q_INPUT && p != AL_HOOK_K_INPUT && p != AL_HOOK_V_INPUT;
}

/* A point's kind: its hook name without "blocks.l.", "attn." and "hook_",
 * dots as underscores ("pattern", "resid_pre", "ln1_scale", "logits"). */
static void kind_name(al_hook_point p, char *buf, size_t cap) {
    char full[64];
    if (al_hook_name(p, 0, full, sizeof full) < 0) full[0] = 0;
    const char *s = full;
    if (!strncmp(s, "blocks.0.", 9)) s += 9;
    if (!strncmp(s, "attn.", 5)) s += 5;
    size_t n = 0;
    for (; *s && n + 1 < cap; s++) {
        if (!strncmp(s, "hook_", 5)) {
            s += 4;
            continue;
        }
        buf[n++] = *s == '.' ? '_' : *s;
    }
    buf[n] = 0;
}

/* want[p] = 1 for each point in the comma-separated list of kinds (NULL
 * or "all": every cacheable point the model has). */
static int parse_hooks(const al_config *c, const char *hooks, int *want, al_err *e) {
    int all = !hooks || !strcmp(hooks, "all");
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        want[p] = all && cacheable((al_hook_point)p) && al_hook_exists(c, (al_hook_point)p);
    if (all) return 0;
    if (!*hooks) /* a cache of the tokens alone is no cache */
        return al_errf(e, "no hook kinds given (--hooks ''): name some (e.g. pattern,z) or all");
    for (const char *s = hooks; *s;) {
        size_t n = strcspn(s, ",");
        int p = 0;
        char k[64];
        for (; p < AL_HOOK_N_POINTS; p++) {
            if (!cacheable((al_hook_point)p)) continue;
            kind_name((al_hook_point)p, k, sizeof k);
            if (strlen(k) == n && !strncmp(k, s, n)) break;
        }
        if (p == AL_HOOK_N_POINTS) {
            char known[512] = "", names[AL_HOOK_N_POINTS][32];
            const char *cands[AL_HOOK_N_POINTS];
            int nc = 0;
            for (int q = 0; q < AL_HOOK_N_POINTS; q++)
                if (cacheable((al_hook_point)q)) {
                    kind_name((al_hook_point)q, names[nc], sizeof names[nc]);
                    snprintf(known + strlen(known), sizeof known - strlen(known), "%s, ",
                             names[nc]);
                    cands[nc] = names[nc], nc++;
                }
            const char *near = al_nearest_word(s, n, cands, nc);
            if (near)
                return al_errf(e, "unknown hook kind '%.*s' (did you mean '%s'?)", (int)n, s, near);
            return al_errf(e, "unknown hook kind '%.*s' (known: %sor all)", (int)n, s, known);
        }
        if (!al_hook_exists(c, (al_hook_point)p))
            return al_errf(e, "hook kind '%.*s' needs a model with LayerNorm", (int)n, s);
        want[p] = 1;
        s += n + (s[n] == ',');
    }
    return 0;
}

/* Floats of point p's tensor for one layer (model-level points: the one). */
static size_t point_floats(const al_config *c, int p, int B, int T) {
    int64_t sh[4];
    int nd =
        al_hook_shape((al_hook_point)p, B, T, c->d_model, c->n_heads, c->d_head, c->d_vocab, sh);
    size_t n = 1;
    for (int k = 0; k < nd; k++) n *= (size_t)sh[k];
    return n;
}

int al_cache_limit_check(double max_mb, al_err *e) {
    if (!(max_mb > 0) || isinf(max_mb))
        return al_errf(e, "the cache limit must be a finite number of megabytes > 0, not %g",
                       max_mb);
    return 0;
}

size_t al_cache_bytes(const al_config *c, int B, int T, const char *hooks, al_err *e) {
    int want[AL_HOOK_N_POINTS];
    if (parse_hooks(c, hooks, want, e)) return 0;
    size_t total = (size_t)B * T * 4;
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        if (want[p])
            total += 4 * point_floats(c, p, B, T) *
                     (al_hook_is_model_level((al_hook_point)p) ? 1 : (size_t)c->n_layers);
    return total;
}

/* The tensors being filled, in the order the forward shows them. */
typedef struct cap {
    al_st_tensor *ts;
    char (*names)[64];
    int n, cap;
    float *w; /* the next free float of the buffer */
} cap;

static int capture(al_hook_act *a, void *ctx, al_err *e) {
    cap *k = ctx;
    if (a->input >= 0) return 0; /* ln1 of a split input: not cached (cacheable) */
    if (k->n >= k->cap) return al_errf(e, "activation cache: more tensors than planned");
    int64_t sh[4], st[4];
    int nd = al_hook_view(a, sh, st);
    al_st_tensor *t = &k->ts[k->n];
    al_hook_name(a->point, a->layer, k->names[k->n], 64);
    *t = (al_st_tensor){k->names[k->n], AL_DT_F32, nd, {0}, k->w};
    memcpy(t->shape, sh, sizeof(int64_t) * (size_t)nd);
    /* copy rows of the last dim, walking the others by their strides */
    size_t rows = 1, len = (size_t)sh[nd - 1];
    for (int d = 0; d < nd - 1; d++) rows *= (size_t)sh[d];
    for (size_t r = 0; r < rows; r++) {
        size_t off = 0, rem = r;
        for (int d = nd - 2; d >= 0; d--) {
            off += (rem % (size_t)sh[d]) * (size_t)st[d];
            rem /= (size_t)sh[d];
        }
        memcpy(k->w + r * len, a->data + off, sizeof(float) * len);
    }
    k->w += rows * len;
    k->n++;
    return 0;
}

int al_cache_write(al_model *m, const int *tokens, int B, int T, const char *hooks,
                   size_t max_bytes, const char *sha256, const char *path, al_err *e) {
    const al_config *c = &m->cfg;
    int want[AL_HOOK_N_POINTS];
    if (parse_hooks(c, hooks, want, e)) return -1;
    size_t need = al_cache_bytes(c, B, T, hooks, e);
    if (need > max_bytes)
        return al_errf(e,
                       "the cache would take %.1f MB (%d x %d tokens, %d layers), over the "
                       "limit of %.1f MB: fewer windows or hooks, or raise the limit",
                       need / 1e6, B, T, c->n_layers, max_bytes / 1e6);
    const size_t BT = (size_t)B * T;
    int n_t = 1;
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        if (want[p]) n_t += al_hook_is_model_level((al_hook_point)p) ? 1 : c->n_layers;
    cap k = {0};
    k.ts = al_calloc((size_t)n_t, sizeof *k.ts, e);
    k.names = k.ts ? al_calloc((size_t)n_t, 64, e) : NULL;
    float *buf = k.names ? al_malloc(need / 4 + 1, sizeof(float), e) : NULL;
    int32_t *tok32 = buf ? al_malloc(BT, sizeof(int32_t), e) : NULL;
    int rc = -1;
    if (!tok32) goto out;
    for (size_t i = 0; i < BT; i++) tok32[i] = tokens[i];
    k.ts[k.n++] = (al_st_tensor){"tokens", AL_DT_I32, 2, {B, T}, tok32};
    k.cap = n_t, k.w = buf;
    /* the cache sees the model's own forward: its other hooks (an
     * intervention) stay, and run before these */
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        if (want[p] &&
            al_hook_add(m, (al_hook_point)p, al_hook_is_model_level((al_hook_point)p) ? 0 : -1,
                        capture, &k, e))
            goto out;
    int fwd = al_model_forward(m, tokens, NULL, B, T, e);
    al_hook_remove(m, &k);
    if (fwd) goto out;
    if (k.n != n_t) {
        al_errf(e, "activation cache: %d tensors for %d planned", k.n, n_t);
        goto out;
    }
    char sL[16], sH[16], sD[16], sC[16], sB[16], sT[16];
    snprintf(sL, sizeof sL, "%d", c->n_layers), snprintf(sH, sizeof sH, "%d", c->n_heads);
    snprintf(sD, sizeof sD, "%d", c->d_head), snprintf(sC, sizeof sC, "%d", c->d_model);
    snprintf(sB, sizeof sB, "%d", B), snprintf(sT, sizeof sT, "%d", T);
    const char *mk[] = {"format",  "n_layers", "n_heads", "d_head",
                        "d_model", "B",        "T",       "model_sha256"};
    const char *mv[] = {"attnlab-cache", sL, sH, sD, sC, sB, sT, sha256 ? sha256 : ""};
    rc = al_st_write(path, k.ts, k.n, mk, mv, sha256 ? 8 : 7, e);
out:
    al_hook_remove(m, &k);
    free(k.ts);
    free(k.names);
    free(buf);
    free(tok32);
    return rc;
}
