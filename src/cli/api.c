/* api.c -- the C interface of api.h: thin wrappers over the checkpoint
 * loader, tokenizer, forward pass with hooks, activation gradients,
 * activation cache and the registry's driver, so that another language
 * sees the CLI's numbers. */
#include "attnlab/api.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "attnlab/act_cache.h"
#include "attnlab/args.h"
#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/hooks.h"
#include "attnlab/json.h"
#include "attnlab/model.h"
#include "attnlab/registry.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

struct al_api_model {
    al_model m;
    al_tokenizer *tok;
    char sha[65];
    atomic_int busy; /* 1 while a call runs on m (api.h: one at a time) */
};

static void put_err(char *err, size_t cap, const char *msg) {
    if (err && cap) snprintf(err, cap, "%s", msg);
}

/* Take the model for one call, or refuse at once: a hook that calls back
 * into its own model, or a second thread, must not run a forward over
 * the buffers the first one is using. */
static int enter(al_api_model *h, char *err, size_t cap) {
    if (!h) {
        put_err(err, cap, "no model (it was closed)");
        return -1;
    }
    if (atomic_exchange(&h->busy, 1)) {
        put_err(err, cap,
                "the model is busy: one call at a time per model (a hook, or another "
                "thread, is inside a forward of it)");
        return -1;
    }
    return 0;
}

static void leave(al_api_model *h) { atomic_store(&h->busy, 0); }

const char *al_api_version(void) { return AL_VERSION; }

al_api_model *al_api_load(const char *dir, char *err, size_t cap) {
    al_err e;
    al_api_model *h = calloc(1, sizeof *h);
    char p[AL_PATH_MAX + 32];
    if (!h) {
        put_err(err, cap, "out of memory");
        return NULL;
    }
    /* the tokenizer only if the directory has one (a hand-built model may not) */
    int tok = al_path_join(p, sizeof p, dir, "tokenizer.json", &e) == 0 && al_file_exists(p);
    if (al_ckpt_load(dir, &h->m, tok ? &h->tok : NULL, &e) ||
        al_path_join(p, sizeof p, dir, "model.safetensors", &e) || al_sha256_file(p, h->sha, &e)) {
        put_err(err, cap, e.msg);
        al_api_free(h);
        return NULL;
    }
    return h;
}

void al_api_free(al_api_model *h) {
    if (!h) return;
    al_model_free(&h->m);
    al_tok_free(h->tok);
    free(h);
}

void al_api_config(const al_api_model *h, int *cfg) {
    const al_config *c = &h->m.cfg;
    cfg[0] = c->n_layers, cfg[1] = c->d_model, cfg[2] = c->n_heads, cfg[3] = c->d_head;
    cfg[4] = c->n_ctx, cfg[5] = c->d_vocab, cfg[6] = c->pos_type, cfg[7] = c->tied_embeddings;
    cfg[8] = h->tok ? al_tok_eot(h->tok) : -1;
}

long al_api_encode(al_api_model *h, const unsigned char *bytes, size_t n, int allow_special,
                   int *out, size_t cap, char *err, size_t ecap) {
    al_err e;
    if (!h->tok) {
        put_err(err, ecap, "the model directory has no tokenizer.json");
        return -1;
    }
    if (cap < n) {
        put_err(err, ecap, "the output needs room for as many ids as there are bytes");
        return -1;
    }
    size_t k = 0;
    if (al_tok_encode_into(h->tok, bytes, n, allow_special, out, &k, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    return (long)k;
}

long al_api_decode(al_api_model *h, const int *ids, size_t n, unsigned char *out, size_t cap,
                   char *err, size_t ecap) {
    al_err e;
    unsigned char *b = NULL;
    size_t k = 0;
    if (!h->tok) {
        put_err(err, ecap, "the model directory has no tokenizer.json");
        return -1;
    }
    if (al_tok_decode(h->tok, ids, n, &b, &k, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    memcpy(out, b, k < cap ? k : cap);
    free(b);
    return (long)k;
}

/* The last forward's logits (B·T rows): its final residual stream
 * through the unembedding, the product the forward itself uses. */
static void last_logits(const al_model *m, float *logits) {
    size_t BT = (size_t)m->B * m->T;
    al_model_unembed(m, m->x + (size_t)m->cfg.n_layers * BT * m->cfg.d_model, (int)BT, logits);
}

int al_api_forward(al_api_model *h, const int *ids, int B, int T, float *logits, float *probs,
                   char *err, size_t ecap) {
    al_err e;
    if (enter(h, err, ecap)) return -1;
    al_model *m = &h->m;
    int rc = al_model_forward(m, ids, NULL, B, T, &e);
    if (rc)
        put_err(err, ecap, e.msg);
    else {
        if (probs) memcpy(probs, m->probs, sizeof(float) * (size_t)B * T * m->cfg.d_vocab);
        if (logits) last_logits(m, logits);
    }
    leave(h);
    return rc;
}

int al_api_cache(al_api_model *h, const int *ids, int B, int T, const char *hooks, double max_mb,
                 const char *path, char *err, size_t ecap) {
    al_err e;
    if (al_api_check_cache(hooks, max_mb, err, ecap) || enter(h, err, ecap)) return -1;
    int rc = al_cache_write(&h->m, ids, B, T, hooks, (size_t)(max_mb * 1e6), h->sha, path, &e);
    if (rc) put_err(err, ecap, e.msg);
    leave(h);
    return rc;
}

/* ------------------------------------------------------------ hooks */

int al_api_hook_point(const al_api_model *h, int point, int layer, int B, int T, char *name,
                      size_t cap, int *info, int64_t *shape) {
    const al_config *c = &h->m.cfg;
    if (point < 0 || point >= AL_HOOK_N_POINTS) return -1;
    al_hook_name(point, layer, name, cap);
    info[0] = al_hook_runs(point) && al_hook_exists(c, point);
    info[1] = al_hook_is_model_level(point);
    info[2] = point == AL_HOOK_RESULT || point == AL_HOOK_Q_INPUT || point == AL_HOOK_K_INPUT ||
              point == AL_HOOK_V_INPUT;
    return al_hook_shape(point, B, T, c->d_model, c->n_heads, c->d_head, c->d_vocab, shape);
}

int al_api_hook_parse(const al_api_model *h, const char *name, int *point, int *layer, char *err,
                      size_t ecap) {
    al_err e;
    al_hook_point p;
    if (al_hook_parse(name, h->m.cfg.n_layers, &p, layer, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    *point = (int)p;
    return 0;
}

/* One al_api_run_hooks call: the caller's function and a scratch copy of
 * the activation each hook is given, to see what it changed. */
typedef struct api_run {
    al_api_hook_fn fn;
    void *user;
    float *snap;
    size_t cap;
} api_run;

typedef struct api_slot {
    api_run *r;
    int i;
} api_slot;

/* Offset in floats of element (i0, i1, i2, i3) of a view padded to 4
 * dims (leading dims of size 1). */
#define VIEW_FOR(S, D, OFF, BODY)                                                                  \
    for (int64_t i0 = 0; i0 < S[0]; i0++)                                                          \
        for (int64_t i1 = 0; i1 < S[1]; i1++)                                                      \
            for (int64_t i2 = 0; i2 < S[2]; i2++)                                                  \
                for (int64_t i3 = 0; i3 < S[3]; i3++) {                                            \
                    size_t OFF = (size_t)(i0 * D[0] + i1 * D[1] + i2 * D[2] + i3 * D[3]);          \
                    BODY                                                                           \
                }

/* The engine hook behind each registration: copy the view, call the
 * caller, and compare. Any changed float makes the forward an
 * intervention (backward is then refused); a changed pattern row (h, t)
 * is marked so the engine recomputes its z from it. */
static int api_hook(al_hook_act *a, void *ctx, al_err *e) {
    api_slot *sl = ctx;
    api_run *r = sl->r;
    int64_t shape[4], st[4], S[4] = {1, 1, 1, 1}, D[4] = {0, 0, 0, 0};
    char nm[96];
    al_hook_name(a->point, a->layer, nm, sizeof nm);
    int nd = al_hook_view(a, shape, st);
    if (nd < 1 || nd > 4) return al_errf(e, "hook at %s: no view of it", nm);
    size_t n = 1;
    for (int k = 0; k < nd; k++) {
        S[4 - nd + k] = shape[k], D[4 - nd + k] = st[k];
        n *= (size_t)shape[k];
    }
    if (n > r->cap) {
        float *p = realloc(r->snap, sizeof(float) * n);
        if (!p) return al_errf(e, "out of memory (a copy of %s, %zu floats)", nm, n);
        r->snap = p, r->cap = n;
    }
    float *snap = r->snap;
    size_t i = 0;
    VIEW_FOR(S, D, off, { snap[i++] = a->data[off]; })
    if (r->fn(r->user, sl->i, a->data, nd, shape, st)) return al_errf(e, "a hook failed at %s", nm);
    int pattern = a->point == AL_HOOK_PATTERN && a->rows, T = a->m->T;
    i = 0;
    VIEW_FOR(S, D, off, {
        if (memcmp(&a->data[off], &snap[i++], sizeof(float))) {
            a->intervened = 1;
            if (pattern) a->rows[(size_t)i1 * T + (size_t)i2] = 1; /* (B, H, T, S): row (h, t) */
        }
    })
    return 0;
}

int al_api_run_hooks(al_api_model *h, const int *ids, int B, int T, int loss, int n,
                     const int *points, const int *layers, al_api_hook_fn fn, void *user,
                     float *logits, float *losses, double *mean_loss, char *err, size_t ecap) {
    if (enter(h, err, ecap)) return -1;
    al_err e = {{0}};
    al_model *m = &h->m;
    api_run r = {fn, user, NULL, 0};
    api_slot *slots = NULL;
    int *tg = NULL, rc = -1;
    al_hooks saved;
    al_hooks_save(m, &saved);
    if (al_check_batch(B, T, m->cfg.n_ctx, &e)) goto out;
    if (n < 0 || (n > 0 && (!points || !layers || !fn))) {
        al_errf(&e, "hooks: %d given without their points, layers or function", n);
        goto out;
    }
    size_t BT = (size_t)B * T;
    if (!(slots = al_calloc(n > 0 ? (size_t)n : 1, sizeof *slots, &e)) ||
        (loss && !(tg = al_malloc(BT, sizeof *tg, &e))))
        goto out;
    for (int i = 0; i < n; i++) {
        slots[i] = (api_slot){&r, i};
        if (al_hook_add(m, (al_hook_point)points[i], layers[i], api_hook, &slots[i], &e)) goto out;
    }
    for (size_t i = 0; tg && i < BT; i++) tg[i] = (int)(i % T) + 1 < T ? ids[i + 1] : -1;
    if (al_model_forward(m, ids, tg, B, T, &e)) goto out;
    if (logits) last_logits(m, logits);
    if (losses) memcpy(losses, m->losses, sizeof(float) * BT);
    if (mean_loss) *mean_loss = loss && m->n_valid ? (double)m->mean_loss : NAN;
    rc = 0;
out:
    if (rc) put_err(err, ecap, e.msg);
    al_hooks_restore(m, &saved);
    free(slots);
    free(tg);
    free(r.snap);
    leave(h);
    return rc;
}

/* ------------------------------------------------------------ gradients */

/* Can al_api_grads give the gradient at point? */
static int grad_point(int p) {
    return p == AL_HOOK_RESID_PRE || p == AL_HOOK_RESID_POST || p == AL_HOOK_Q || p == AL_HOOK_K ||
           p == AL_HOOK_V || p == AL_HOOK_PATTERN || p == AL_HOOK_Z || p == AL_HOOK_RESULT;
}

/* The log-prob metric's position and one sequence's target, in range. */
static int logprob_pos(int64_t pos, int64_t T, al_err *e) {
    if (pos < 0 || pos >= T)
        return al_errf(e, "the log-prob metric's position %" PRId64 " is outside 0..%" PRId64, pos,
                       T - 1);
    return 0;
}

static int logprob_target(int64_t target, int64_t b, int V, al_err *e) {
    if (target < 0 || target >= V)
        return al_errf(e,
                       "target id %" PRId64 " (sequence %" PRId64 ") is outside the vocabulary "
                       "(d_vocab %d)",
                       target, b, V);
    return 0;
}

/* ∂metric/∂x_L (B, T, C) into dxL (zeroed) and the metric into *val. */
static int metric_dxl(al_model *m, int metric, int pos, const int *target, const float *dlogits,
                      float *dxL, double *val, al_err *e) {
    const al_config *c = &m->cfg;
    int V = c->d_vocab, C = c->d_model, B = m->B, T = m->T;
    size_t BT = (size_t)B * T;
    const float *xL = m->x + (size_t)c->n_layers * BT * C;
    float *d = NULL;
    *val = 0;
    if (metric == AL_API_METRIC_LOSS) {
        if (!m->has_targets || m->n_valid == 0)
            return al_errf(e, "the loss metric needs a forward with loss (and T >= 2)");
        if (!(d = al_calloc(BT * V, sizeof(float), e))) return -1;
        float w = 1.0f / (float)m->n_valid;
        for (size_t i = 0; i < BT; i++) {
            if (m->targets[i] < 0) continue;
            for (int v = 0; v < V; v++) d[i * V + v] = w * m->probs[i * V + v];
            d[i * V + m->targets[i]] -= w;
        }
        if (al_model_unembed_backward_x(m, xL, d, (int)BT, dxL, e)) {
            free(d);
            return -1;
        }
        *val = m->mean_loss;
    } else if (metric == AL_API_METRIC_LOGPROB) {
        if (logprob_pos(pos, T, e)) return -1;
        if (!target) return al_errf(e, "the log-prob metric needs a target id per sequence");
        for (int b = 0; b < B; b++)
            if (logprob_target(target[b], b, V, e)) return -1;
        if (!(d = al_malloc(2 * (size_t)V, sizeof(float), e))) return -1;
        float *lg = d + V;
        for (int b = 0; b < B; b++) {
            size_t row = (size_t)b * T + pos;
            /* log p from the logits (a tiny probability keeps its digits) */
            al_model_unembed(m, xL + row * C, 1, lg);
            double mx = lg[0], s = 0;
            for (int v = 1; v < V; v++) mx = lg[v] > mx ? lg[v] : mx;
            for (int v = 0; v < V; v++) s += exp(lg[v] - mx);
            *val += lg[target[b]] - mx - log(s);
            for (int v = 0; v < V; v++) d[v] = -(float)(exp(lg[v] - mx) / s);
            d[target[b]] += 1.0f;
            if (al_model_unembed_backward_x(m, xL + row * C, d, 1, dxL + row * C, e)) {
                free(d);
                return -1;
            }
        }
    } else if (metric == AL_API_METRIC_DLOGITS) {
        if (!dlogits) return al_errf(e, "the dlogits metric needs dlogits (B, T, d_vocab)");
        if (!(d = al_malloc(BT * V, sizeof(float), e))) return -1;
        last_logits(m, d);
        double s = 0;
        for (size_t i = 0; i < BT * V; i++) s += (double)dlogits[i] * d[i];
        *val = s;
        if (al_model_unembed_backward_x(m, xL, dlogits, (int)BT, dxL, e)) {
            free(d);
            return -1;
        }
    } else
        return al_errf(e, "unknown metric %d (loss 0, log-prob 1, dlogits 2)", metric);
    free(d);
    return 0;
}

/* out (TransformerLens's shape of point at layer l) from the activation
 * gradients dx (L+1, B, T, C), dzg (L, B, T, H, D), dqkv (L, B, T, 3, H, D). */
static void grad_out(const al_model *m, int point, int l, const float *dx, const float *dzg,
                     const float *dqkv, float *out) {
    const al_config *c = &m->cfg;
    int C = c->d_model, H = c->n_heads, D = c->d_head, B = m->B, T = m->T, HD = H * D;
    size_t BT = (size_t)B * T;
    const float *g = m->gates + (size_t)l * H;
    switch (point) {
    case AL_HOOK_RESID_PRE:
    case AL_HOOK_RESID_POST:
        memcpy(out, dx + (size_t)(l + (point == AL_HOOK_RESID_POST)) * BT * C,
               sizeof(float) * BT * C);
        break;
    case AL_HOOK_RESULT: /* each head's output is added to resid_post */
        for (size_t i = 0; i < BT; i++)
            for (int h = 0; h < H; h++)
                memcpy(out + (i * H + h) * C, dx + ((size_t)(l + 1) * BT + i) * C,
                       sizeof(float) * C);
        break;
    case AL_HOOK_Q:
    case AL_HOOK_K:
    case AL_HOOK_V:
        for (size_t i = 0; i < BT; i++)
            memcpy(out + i * HD, dqkv + ((size_t)l * BT + i) * 3 * HD + (point - AL_HOOK_Q) * HD,
                   sizeof(float) * HD);
        break;
    case AL_HOOK_Z: /* z is the gate's input: ∂/∂z = g · ∂/∂zg */
        for (size_t i = 0; i < BT; i++)
            for (int h = 0; h < H; h++)
                for (int d = 0; d < D; d++)
                    out[(i * H + h) * D + d] = g[h] * dzg[((size_t)l * BT + i) * HD + h * D + d];
        break;
    case AL_HOOK_PATTERN: { /* z_t = Σ_{s<=t} A[t, s] v_s: ∂/∂A[t, s] = ∂/∂z_t · v_s */
        const float *qkv = m->qkv + (size_t)l * BT * 3 * HD;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    const float *dz = dzg + ((size_t)l * BT + (size_t)b * T + t) * HD + h * D;
                    float *o = out + (((size_t)b * H + h) * T + t) * T;
                    for (int s = 0; s <= t; s++) { /* above the diagonal: 0 (never read) */
                        const float *v = qkv + ((size_t)b * T + s) * 3 * HD + 2 * HD + h * D;
                        double acc = 0;
                        for (int d = 0; d < D; d++) acc += (double)dz[d] * v[d];
                        o[s] = g[h] * (float)acc;
                    }
                    for (int s = t + 1; s < T; s++) o[s] = 0.0f;
                }
        break;
    }
    }
}

int al_api_grads(al_api_model *h, int metric, int pos, const int *target, const float *dlogits,
                 int n, const int *points, const int *layers, float *const *out, double *value,
                 char *err, size_t ecap) {
    if (enter(h, err, ecap)) return -1;
    al_err e = {{0}};
    al_model *m = &h->m;
    const al_config *c = &m->cfg;
    int L = c->n_layers, rc = -1, need_x = 0, need_z = 0, need_qkv = 0;
    float *dxL = NULL, *dx = NULL, *dzg = NULL, *dqkv = NULL;
    if (!m->acts || m->B < 1) {
        al_errf(&e, "gradients need a forward first");
        goto out;
    }
    if (m->intervened) {
        al_errf(&e, "a hook wrote an activation in this forward: the engine does not "
                    "differentiate through an intervention (hooks that only read are fine)");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        char nm[96];
        if (points[i] < 0 || points[i] >= AL_HOOK_N_POINTS || layers[i] < 0 || layers[i] >= L) {
            al_errf(&e, "gradient at point %d layer %d: no such hook point", points[i], layers[i]);
            goto out;
        }
        al_hook_name(points[i], layers[i], nm, sizeof nm);
        if (!grad_point(points[i])) {
            al_errf(&e,
                    "no gradient at %s: resid_pre, resid_post, q, k, v, pattern, z and result "
                    "have one",
                    nm);
            goto out;
        }
        int p = points[i];
        need_x |= p == AL_HOOK_RESID_PRE || p == AL_HOOK_RESID_POST || p == AL_HOOK_RESULT;
        need_z |= p == AL_HOOK_Z || p == AL_HOOK_PATTERN;
        need_qkv |= p == AL_HOOK_Q || p == AL_HOOK_K || p == AL_HOOK_V;
    }
    size_t BT = (size_t)m->B * m->T, HD = (size_t)c->n_heads * c->d_head;
    if (!(dxL = al_calloc(BT * c->d_model, sizeof(float), &e)) ||
        (need_x && !(dx = al_malloc((L + 1) * BT * c->d_model, sizeof(float), &e))) ||
        (need_z && !(dzg = al_malloc(L * BT * HD, sizeof(float), &e))) ||
        (need_qkv && !(dqkv = al_malloc(L * BT * 3 * HD, sizeof(float), &e))))
        goto out;
    double val = 0;
    if (metric_dxl(m, metric, pos, target, dlogits, dxL, &val, &e) ||
        al_model_backward_acts(m, dxL, dx, dzg, dqkv, &e))
        goto out;
    for (int i = 0; i < n; i++) grad_out(m, points[i], layers[i], dx, dzg, dqkv, out[i]);
    if (value) *value = val;
    rc = 0;
out:
    if (rc) put_err(err, ecap, e.msg);
    free(dxL);
    free(dx);
    free(dzg);
    free(dqkv);
    leave(h);
    return rc;
}

/* The registered analysis called name, or NULL with err (rc 2) saying
 * the CLI's "unknown command" with the nearest name or the list. */
static const al_analysis *find_analysis(const char *name, char *err, size_t ecap) {
    const char *names[64] = {0};
    int n = 0;
    for (const al_analysis *const *p = al_analyses; *p; p++) {
        if (!strcmp((*p)->name, name)) return *p;
        if (n < 64) names[n++] = (*p)->name;
    }
    const char *near = al_nearest_word(name, strlen(name), names, n);
    char list[1024] = "";
    for (int i = 0, k = 0; i < n && k < (int)sizeof list; i++)
        k += snprintf(list + k, sizeof list - (size_t)k, "%s%s", i ? ", " : "", names[i]);
    if (near && err && ecap)
        snprintf(err, ecap, "unknown analysis '%s' (did you mean '%s'?)", name, near);
    else if (err && ecap)
        snprintf(err, ecap, "unknown analysis '%s' (the analyses: %s)", name, list);
    return NULL;
}

/* The driver's own options (--strict, --progress) out of the options
 * object o, before the rest go onto the analysis's flags: 0, or −1 with
 * e when one is not true or false. */
static int take_driver_option(cJSON *o, const char *key, int *out, al_err *e) {
    cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(o, key);
    *out = 0;
    if (!v) return 0;
    int ok = cJSON_IsBool(v);
    *out = cJSON_IsTrue(v);
    cJSON_Delete(v);
    return ok ? 0 : al_errf(e, "options: key '%s' must be true or false", key);
}

/* A number given for a string option (heads=3, a layer) is that option's
 * text, as on the command line: replaced in o by its JSON spelling. 0, or
 * −1 when out of memory. */
static int numbers_as_text(cJSON *o, const al_flag *fl) {
    for (cJSON *v = o->child; v; v = v->next) {
        const al_flag *f = al_flag_for_key(fl, v->string);
        if (!f || f->type != AL_STR || !cJSON_IsNumber(v)) continue;
        char *txt = al_json_print(0, v);
        cJSON *str = txt ? cJSON_CreateString(txt) : NULL;
        cJSON_free(txt);
        if (!str || !cJSON_ReplaceItemViaPointer(o, v, str)) return cJSON_Delete(str), -1;
        v = str;
    }
    return 0;
}

/* The process's analysis: the driver's state (threads, the products'
 * precision, the stop flag, the option arena) is the process's. */
static atomic_int g_analysis_busy;

int al_api_analysis(const char *name, const char *options, char **doc, char *err, size_t ecap) {
    if (doc) *doc = NULL;
    if (!name || !doc) {
        put_err(err, ecap, "al_api_analysis: no analysis name, or nowhere to put the document");
        return -1;
    }
    const al_analysis *a = find_analysis(name, err, ecap);
    if (!a) return 2;
    if (atomic_exchange(&g_analysis_busy, 1)) {
        put_err(err, ecap, "an analysis is already running in this process: one at a time");
        return -1;
    }
    al_err e = {0};
    int rc = 2, strict = 0, progress = 0;
    cJSON *o = NULL;
    char *rest = NULL;
    void *args = NULL;
    al_flag fl[64];
    al_drive d = {.an = a, .json = 1, .quiet = 1};
    if (al_registry_setup(&e)) { /* the store learns the analyses' run kinds, as in main.c */
        rc = -1;
        goto out;
    }
    if (!options) options = "{}";
    if (al_json_parse(options, strlen(options), "options", &o, &e)) goto out;
    if (!cJSON_IsObject(o)) {
        al_errf(&e, "options: must be a JSON object");
        goto out;
    }
    if (take_driver_option(o, "strict", &strict, &e) ||
        take_driver_option(o, "progress", &progress, &e))
        goto out;
    if (cJSON_GetObjectItemCaseSensitive(o, "json")) {
        al_errf(&e, "options: 'json' is the library's already (the document comes back)");
        goto out;
    }
    args = calloc(1, a->size);
    if (!args) {
        rc = (al_errf(&e, "out of memory"), -1);
        goto out;
    }
    a->init(args);
    if (al_analysis_flags(a, args, fl, (int)(sizeof fl / sizeof fl[0]), &e)) {
        rc = -1;
        goto out;
    }
    for (const cJSON *v = o->child; v; v = v->next) /* the CLI's line, with the nearest flag */
        if (!al_flag_for_key(fl, v->string)) {
            char key[128];
            snprintf(key, sizeof key, "%s", v->string);
            for (char *p = key; *p; p++)
                if (*p == '_') *p = '-';
            al_flag_unknown(fl, key, strlen(key), &e);
            goto out;
        }
    if (numbers_as_text(o, fl) || !(rest = al_json_print(0, o))) {
        rc = (al_errf(&e, "out of memory"), -1);
        goto out;
    }
    if (al_flags_apply_json(fl, rest, "options", &e)) goto out;
    for (const al_flag *f = fl; f->name; f++) /* the parser's check, which JSON skips */
        if (f->required && !f->seen) {
            al_errf(&e, "--%s is required", f->name);
            goto out;
        }
    d.strict = strict, d.progress = progress;
    rc = al_drive_run(a, args, fl, &d, NULL, &e);
    if (rc == 0 && !(*doc = al_json_print(0, d.doc))) rc = (al_errf(&e, "out of memory"), 1);
out:
    if (rc) put_err(err, ecap, e.msg);
    cJSON_Delete(d.doc);
    cJSON_Delete(o);
    cJSON_free(rest);
    free(args);
    al_config_arena_free(); /* the option strings, which lived as long as args */
    atomic_store(&g_analysis_busy, 0);
    return rc;
}

void al_api_string_free(char *s) { cJSON_free(s); }

/* ------------------------------------------------------------ checks */

int al_api_check_ids(const al_api_model *h, const int64_t *ids, int64_t B, int64_t T, int forward,
                     char *err, size_t ecap) {
    al_err e;
    if (!h) {
        put_err(err, ecap, "no model (it was closed)");
        return -1;
    }
    const al_config *c = &h->m.cfg;
    if (forward && al_check_batch(B, T, c->n_ctx, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    size_t n = B > 0 && T > 0 ? (size_t)B * (size_t)T : 0;
    for (size_t i = 0; i < n; i++)
        if (al_check_token(ids[i], i, c->d_vocab, &e)) {
            put_err(err, ecap, e.msg);
            return -1;
        }
    return 0;
}

int al_api_check_logprob(const al_api_model *h, int64_t pos, const int64_t *target, int64_t B,
                         int64_t T, char *err, size_t ecap) {
    al_err e;
    if (!h) {
        put_err(err, ecap, "no model (it was closed)");
        return -1;
    }
    if (logprob_pos(pos, T, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    for (int64_t b = 0; b < B; b++)
        if (logprob_target(target[b], b, h->m.cfg.d_vocab, &e)) {
            put_err(err, ecap, e.msg);
            return -1;
        }
    return 0;
}

int al_api_check_cache(const char *hooks, double max_mb, char *err, size_t ecap) {
    al_err e;
    al_config one = {.n_layers = 1, .d_model = 1, .n_heads = 1, .d_head = 1};
    if (al_cache_limit_check(max_mb, &e) || al_cache_bytes(&one, 1, 1, hooks, &e) == 0) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    return 0;
}

int al_api_nearest(const char *word, int n, const char *const *cands) {
    if (!word || !cands || n < 1) return -1;
    const char *near = al_nearest_word(word, strlen(word), cands, n);
    for (int i = 0; near && i < n; i++)
        if (cands[i] == near) return i;
    return -1;
}
