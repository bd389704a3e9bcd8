/* attribute.c -- direct logit attribution, path expansion and logit lens
 * (see attribute.h).
 *
 * Per batch of clean sequences: one normal forward (no targets); then,
 * from its cache (m->x, m->att, m->zg),
 *   - the components' contributions, out_c(pos) · u, with out of head
 *     (l, h) = zg[l,h](pos) W_O[l,h] (zg already holds the gate);
 *   - the logit lens rows x_l(pos) W_U; x_L's row is also the full
 *     logits row the term importances start from;
 *   - each path term's logits at the batch's items, one term at a time
 *     (ni × V floats): a head's term is a (ni, D) block of z's times
 *     W_O W_U (D × V, computed once per head and batch), so the V-wide
 *     product costs D, not C, per row. A later head l1.h1's z splits by
 *     value source: z = g Σ_u A[t,u] (x0[u] W_V + Σ_{l0<l1,h0} zd[u] W_O0 W_V
 *     + the rest), zd the direct z of sender l0.h0 (its z from reading
 *     x0 alone: the forward's zg in layer 0, computed once per batch
 *     for later layers); the parts are computed per sequence as (T, D)
 *     value blocks;
 *   - from 3 layers, the remainder (chains of three or more heads) built
 *     forward layer by layer from the head outputs, never as a
 *     difference of logits (see chains3).
 * Each term's logits are also summed per kind (3 × ni × V) for the
 * kinds' joint importance. Sums over items run in item order, so the
 * results do not depend on the thread count. */
#include "attnlab/attribute.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/layers.h"
#include "attnlab/patch.h"

al_attr_opts al_attr_opts_defaults(void) {
    al_attr_opts o = AL_ATTR_OPTS_INIT;
    return o;
}

int al_attr_opts_check(const al_attr_opts *o, al_err *e) {
    if (o->batch < 1 || o->batch > 100000)
        return al_errf(e, "attribution needs 1 <= batch <= 100000 (got %d)", o->batch);
    if (o->paths != 0 && o->paths != 1)
        return al_errf(e, "attribution option paths must be 0 or 1 (got %d)", o->paths);
    if (o->center_unembed != 0 && o->center_unembed != 1)
        return al_errf(e, "attribution option center_unembed must be 0 or 1 (got %d)",
                       o->center_unembed);
    return al_ci_check(o->ci_level, o->bootstrap, e);
}

int al_attr_n_terms(int L, int H) {
    if (L < 1 || H < 1) return 0;
    long long n = 1 + (long long)L * H + (long long)H * H * L * (L - 1) / 2 + (L >= 3);
    return n > AL_ATTR_MAX_TERMS ? 0 : (int)n;
}

int al_attr_virtual_index(int L, int H, int s, int l1, int h1) {
    return 1 + L * H + H * H * l1 * (l1 - 1) / 2 + s * H + h1;
}

al_attr_term_kind al_attr_term_heads(int L, int H, int k, int *layer, int *head, int *src) {
    *layer = *head = *src = -1;
    if (k == 0) return AL_ATTR_DIRECT;
    if (k <= L * H) {
        *layer = (k - 1) / H, *head = (k - 1) % H;
        return AL_ATTR_HEAD;
    }
    int j = k - 1 - L * H, l1 = 1;
    /* receiver layer l1 holds l1·H·H terms from H²·l1(l1−1)/2 on */
    while (l1 < L && j >= H * H * l1 * (l1 + 1) / 2) l1++;
    if (l1 < L) { /* not the remainder */
        j -= H * H * l1 * (l1 - 1) / 2;
        *layer = l1, *head = j % H, *src = j / H;
    }
    return AL_ATTR_VIRTUAL;
}

al_attr_term_kind al_attr_term_kind_of(int L, int H, int k) {
    int l, h, src;
    return al_attr_term_heads(L, H, k, &l, &h, &src);
}

const char *al_attr_term_name(int L, int H, int k, char *buf, size_t cap) {
    int l, h, src;
    al_attr_term_kind kd = al_attr_term_heads(L, H, k, &l, &h, &src);
    if (kd == AL_ATTR_DIRECT)
        snprintf(buf, cap, "direct");
    else if (kd == AL_ATTR_HEAD)
        snprintf(buf, cap, "%d.%d", l, h);
    else if (l < 0)
        snprintf(buf, cap, "chains>=3");
    else
        snprintf(buf, cap, "%d.%d>%d.%d", src / H, src % H, l, h);
    return buf;
}

int al_attr_n_comp(const al_config *c) {
    int LH = c->n_layers * c->n_heads;
    return al_config_is_plain(c) ? 2 + LH : 3 + LH + c->n_layers;
}

const char *al_attr_comp_name(int L, int H, int c, char *buf, size_t cap) {
    if (c == 0)
        snprintf(buf, cap, "embed");
    else if (c == 1)
        snprintf(buf, cap, "pos");
    else if (c < 2 + L * H)
        snprintf(buf, cap, "%d.%d", (c - 2) / H, (c - 2) % H);
    else if (c < 2 + L * H + L)
        snprintf(buf, cap, "b_O_%d", c - 2 - L * H);
    else
        snprintf(buf, cap, "const");
    return buf;
}

int al_attr_notes(const al_config *c, const char *notes[2]) {
    int n = 0;
    if (c->norm_type != AL_NORM_NONE)
        notes[n++] = "attribution freezes LayerNorm scales at the clean run's: ln_final's for "
                     "every component and path term (TransformerLens's apply_ln_to_stack: "
                     "centred, divided by it, times ln_final.w), each ln1's in the path terms' "
                     "values; exact for the clean run, a linearisation for anything else";
    if (!al_config_is_plain(c))
        notes[n++] = "attribution of biases: each layer's b_O (b_O_l) and ln_final.b W_U + b_U "
                     "(const) are components of their own; in the path expansion the direct "
                     "term carries them, and each head's embed+pos term its value constant "
                     "ln1.b W_V + b_V and the b_O of the layers below it";
    return n;
}

void al_attr_result_free(al_attr_result *r) {
    free(r->dla);
    free(r->dla_pos);
    free(r->pos_items);
    free(r->item_metric);
    free(r->item_dla);
    free(r->term_value);
    free(r->term_dloss);
    free(r->item_term);
    free(r->lens_loss);
    free(r->lens_acc);
    free(r->ci);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------- paths */

typedef struct ctx {
    al_model *m;
    int L, H, C, D, V, T;
    int nb; /* sequences of the last forward */
    int nbmax; /* the most sequences a forward holds (zd's room) */
    float *ou; /* (D, V) W_O[l,h] W_U */
    float *dd; /* (D, D) W_O[l0,h0] W_V[l1,h1] */
    float *seq; /* (T, D) gathered zg0 of one sequence */
    float *val; /* (T, D) value part of one sequence */
    float *Z; /* (cap, D) */
    float *rows; /* (cap, C) */
    float *TL; /* (cap, V) one term's logits */
    float *full; /* (cap, V) the model's logits */
    double *ubar; /* (C) the mean unembedding column, when centring; else NULL */
    /* LayerNorm or bias models (np; else all NULL): the frozen-scale
     * readout of attribute.h */
    int np, ln; /* not the plain model; norm_type != none */
    double *cst; /* (V) the constant's logits: ln_final.b W_U + b_U */
    double cst_mean; /* its mean over the vocabulary (centring) */
    double bu_mean; /* b_U's mean (0 without) */
    double *yh; /* (C) one component as W_U reads it (DLA) */
    float *bsum; /* (L+1, C) Σ_{l'<l} b_O[l']: what the biases put in the stream
                      * entering layer l (0 without b_O) */
    float *wo2; /* (D, C) one head's W_O read through ln_final (rows centred, × w) */
    float *veff; /* (C, D) one head's W_V read through ln1: P diag(ln1.w) W_V */
    float *cv; /* (D) that head's value constant: ln1.b W_V + b_V */
    float *xb; /* (T, C) the bias-and-embedding stream of one sequence at a layer */
    /* 3 layers and more (else NULL): */
    float *zd; /* (L, nbmax, H, T, D) direct z of heads in layers >= 1 */
    float *S; /* (T, C) the head outputs of the layers below, summed */
    float *R; /* (L, T, C) chains of >= 2 heads ending below layer l */
    float *oc; /* (T, C) one head's output part */
    float *zt; /* (T, D) one head's z part */
} ctx;

/* Called with term k's logits TL (ni, V) at the items (rows rb, rt). */
typedef void (*term_fn)(void *arg, int k, float *TL, int ni);

static void ctx_free(ctx *s) {
    free(s->ou);
    free(s->ubar);
    free(s->zd);
    free(s->cst);
    free(s->bsum);
    memset(s, 0, sizeof *s);
}

/* x (C) as W_U (or tied W_Eᵀ) reads it at column v, in double. */
static double col_dot(const ctx *s, const double *x, int v) {
    const al_model *m = s->m;
    const int C = s->C, V = s->V;
    double a = 0.0;
    for (int k = 0; k < C; k++)
        a += x[k] * (m->cfg.tied_embeddings ? m->p[AL_P_WE][(size_t)v * C + k]
                                            : m->p[AL_P_WU][(size_t)k * V + v]);
    return a;
}

/* The LayerNorm or bias model's constants (s->np; nothing for the plain
 * model): the constant term's logits, the biases' stream per layer, and
 * scratch. */
static int ctx_init_np(ctx *s, al_err *e) {
    const al_model *m = s->m;
    const al_config *c = &m->cfg;
    if (al_config_is_plain(c)) return 0;
    s->np = 1, s->ln = c->norm_type != AL_NORM_NONE;
    const size_t C = s->C, D = s->D, V = s->V, L = s->L, T = s->T;
    s->cst = al_malloc(V + C, sizeof(double), e);
    s->bsum = al_calloc((L + 1) * C + 2 * D * C + D + T * C, sizeof(float), e);
    if (!s->cst || !s->bsum) return -1;
    s->yh = s->cst + V;
    s->wo2 = s->bsum + (L + 1) * C;
    s->veff = s->wo2 + D * C;
    s->cv = s->veff + C * D;
    s->xb = s->cv + D;
    const float *bf = m->p[AL_P_LNFB], *bu = m->p[AL_P_BU];
    for (size_t k = 0; k < C; k++) s->yh[k] = bf ? bf[k] : 0.0;
    s->cst_mean = s->bu_mean = 0.0;
    for (int v = 0; v < s->V; v++) {
        s->cst[v] = (bf ? col_dot(s, s->yh, v) : 0.0) + (bu ? bu[v] : 0.0);
        s->cst_mean += s->cst[v], s->bu_mean += bu ? bu[v] : 0.0;
    }
    s->cst_mean /= s->V, s->bu_mean /= s->V;
    for (size_t l = 1; l <= L && m->p[AL_P_BO]; l++)
        for (size_t k = 0; k < C; k++)
            s->bsum[l * C + k] = s->bsum[(l - 1) * C + k] + m->p[AL_P_BO][(l - 1) * C + k];
    return 0;
}

/* cap: the most items of a batch; nbmax: the most sequences. */
static int ctx_init(ctx *s, al_model *m, int T, int cap, int nbmax, al_err *e) {
    memset(s, 0, sizeof *s);
    const al_config *c = &m->cfg;
    s->m = m, s->L = c->n_layers, s->H = c->n_heads, s->C = c->d_model, s->D = c->d_head;
    s->V = c->d_vocab, s->T = T, s->nbmax = nbmax;
    size_t D = s->D, V = s->V, C = s->C, n = cap;
    size_t tot = D * V + D * D + 2 * (size_t)T * D + n * (D + C + 2 * V);
    s->ou = al_malloc(tot, sizeof(float), e);
    if (!s->ou) return -1;
    s->dd = s->ou + D * V;
    s->seq = s->dd + D * D;
    s->val = s->seq + (size_t)T * D;
    s->Z = s->val + (size_t)T * D;
    s->rows = s->Z + n * D;
    s->TL = s->rows + n * C;
    s->full = s->TL + n * V;
    if (s->L >= 3) {
        size_t L = s->L, zd = L * nbmax * s->H * T * D, tc = (size_t)T * C;
        if (!(s->zd = al_malloc(zd + (L + 2) * tc + (size_t)T * D, sizeof(float), e))) {
            ctx_free(s);
            return -1;
        }
        s->S = s->zd + zd;
        s->R = s->S + tc;
        s->oc = s->R + L * tc;
        s->zt = s->oc + tc;
    }
    return ctx_init_np(s, e);
}

/* s->ubar = the mean over the vocabulary of W_U's columns: x · ubar is
 * the mean logit of x, the shift common to every logit that log-softmax
 * ignores (TransformerLens's centred W_U). */
static int ctx_center(ctx *s, al_err *e) {
    const al_model *m = s->m;
    const int C = s->C, V = s->V;
    if (!(s->ubar = al_calloc((size_t)C, sizeof(double), e))) return -1;
    for (int v = 0; v < V; v++)
        for (int k = 0; k < C; k++)
            s->ubar[k] += m->cfg.tied_embeddings ? m->p[AL_P_WE][(size_t)v * C + k]
                                                 : m->p[AL_P_WU][(size_t)k * V + v];
    for (int k = 0; k < C; k++) s->ubar[k] /= V;
    return 0;
}

/* Rows x (n, C) in place as ln_final reads them with its scale frozen,
 * less that scale: each row centred and times ln_final.w (LN; LNPre:
 * centred only). Without LayerNorm: unchanged. */
static void ln_rows(const ctx *s, float *x, int n) {
    if (!s->ln) return;
    const float *w = s->m->p[AL_P_LNFW];
    const int C = s->C;
    for (int i = 0; i < n; i++) {
        float *r = x + (size_t)i * C;
        double mu = 0.0;
        for (int k = 0; k < C; k++) mu += r[k];
        mu /= C;
        for (int k = 0; k < C; k++) r[k] = (float)((r[k] - mu) * (w ? w[k] : 1.0f));
    }
}

/* out (n, V) = x (n, C) W_U (W_Eᵀ when tied), no bias. */
static void unembed_lin(const ctx *s, const float *x, int n, float *out) {
    const al_model *m = s->m;
    if (m->cfg.tied_embeddings)
        matmul_forward_wt(out, x, m->p[AL_P_WE], n, s->C, s->V, 0.0f);
    else
        matmul_forward(out, x, m->p[AL_P_WU], n, s->C, s->V, 0.0f);
}

/* Logits rows TL (ni, V) of the items /= ln_final's scale frozen at each
 * item's (b, t) in the clean run (LayerNorm only). */
static void by_final_scale(const ctx *s, float *TL, const int *rb, const int *rt, int ni) {
    if (!s->ln) return;
    for (int i = 0; i < ni; i++) {
        const float sc = s->m->lnf_scale[(size_t)rb[i] * s->T + rt[i]];
        float *r = TL + (size_t)i * s->V;
        for (int v = 0; v < s->V; v++) r[v] /= sc;
    }
}

/* ou = W_O[l,h] W_U (D, V); with LayerNorm, W_O's rows as ln_final reads
 * them (ln_rows; the scale is divided out of the logits). */
static void head_ou(ctx *s, int l, int h) {
    const al_model *m = s->m;
    const float *wo = al_head_wo(m, l, h);
    if (s->ln) {
        memcpy(s->wo2, wo, sizeof(float) * (size_t)s->D * s->C);
        ln_rows(s, s->wo2, s->D);
        wo = s->wo2;
    }
    unembed_lin(s, wo, s->D, s->ou);
}

/* Head (l, h)'s W_V as it reads the residual stream: with LayerNorm
 * P diag(ln1.w) W_V (P centres over d_model; ln1's scale is divided out
 * per position, value_rows), else W_V itself; and (np) s->cv = its value
 * constant ln1.b W_V + b_V. */
static const float *head_veff(ctx *s, int l, int h) {
    const al_model *m = s->m;
    const int C = s->C, D = s->D;
    const float *wv = al_head_wv(m, l, h);
    if (!s->np) return wv;
    const float *w = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
    const float *b = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l * C : NULL;
    const float *bv = m->p[AL_P_BV] ? m->p[AL_P_BV] + ((size_t)l * s->H + h) * D : NULL;
    for (int d = 0; d < D; d++) {
        double mu = 0.0, cb = bv ? bv[d] : 0.0;
        for (int k = 0; k < C; k++) {
            mu += (double)wv[(size_t)k * D + d] * (w ? w[k] : 1.0f);
            if (b) cb += (double)b[k] * wv[(size_t)k * D + d];
        }
        mu /= C;
        s->cv[d] = (float)cb;
        for (int k = 0; s->ln && k < C; k++)
            s->veff[(size_t)k * D + d] = (float)(wv[(size_t)k * D + d] * (w ? w[k] : 1.0f) - mu);
    }
    return s->ln ? s->veff : wv;
}

/* A value block val (T, D) of sequence b read from part of the stream
 * entering layer l: divided by ln1's scale frozen at each position
 * (LayerNorm), then plus the value constant s->cv where cst (the head's
 * own embed+pos part, which carries its biases). */
static void value_rows(const ctx *s, int l, int b, float *val, int cst) {
    const int T = s->T, D = s->D;
    const float *sc = s->m->ln1_scale + ((size_t)l * s->nb + b) * T;
    for (int u = 0; u < T; u++) {
        float *r = val + (size_t)u * D;
        if (s->ln)
            for (int d = 0; d < D; d++) r[d] /= sc[u];
        if (cst)
            for (int d = 0; d < D; d++) r[d] += s->cv[d];
    }
}

/* zg of head (l, h) at sequence b, position t (D floats, gated). */
static const float *zg_at(const ctx *s, int l, int b, int t, int h) {
    return s->m->zg + ((((size_t)l * s->nb + b) * s->T + t) * s->H + h) * s->D;
}

static const float *x_at(const ctx *s, int l, int b, int t) {
    return s->m->x + (((size_t)l * s->nb + b) * s->T + t) * s->C;
}

/* The (T, D) direct z block of head (l, h), l >= 1, at sequence b. */
static float *zd_at(const ctx *s, int l, int b, int h) {
    return s->zd + (((size_t)l * s->nbmax + b) * s->H + h) * (size_t)s->T * s->D;
}

/* z (D) = g[l,h] Σ_{u<=t} A[l,h](t, u) val[u]: head (l, h)'s z at (b, t)
 * from the value block val (T, D), with the forward's pattern. */
static void mix(const ctx *s, int l, int h, int b, int t, const float *val, float *z) {
    const al_model *m = s->m;
    const int T = s->T, D = s->D, H = s->H;
    const float g = m->gates[l * H + h];
    const float *A = m->att + ((((size_t)l * s->nb + b) * H + h) * T + t) * T;
    for (int d = 0; d < D; d++) z[d] = 0.0f;
    for (int u = 0; u <= t; u++) {
        const float a = A[u], *v = val + (size_t)u * D;
        for (int d = 0; d < D; d++) z[d] += a * v[d];
    }
    for (int d = 0; d < D; d++) z[d] *= g;
}

/* What head (l, h)'s value reads of embed + pos at sequence b, into
 * s->val (T, D): x0 W_V; with LayerNorm or biases, the stream entering
 * layer l less every head's output (x0 + the b_O of layers below l)
 * through the head's value readout wv (head_veff), ln1's frozen scale and
 * the value constant. */
static void base_value(ctx *s, int l, int b, const float *wv) {
    const int T = s->T, C = s->C;
    if (!s->np) {
        matmul_forward(s->val, x_at(s, 0, b, 0), wv, T, C, s->D, 0.0f);
        return;
    }
    const float *x0 = x_at(s, 0, b, 0), *bs = s->bsum + (size_t)l * C;
    for (size_t i = 0; i < (size_t)T * C; i++) s->xb[i] = x0[i] + bs[i % C];
    matmul_forward(s->val, s->xb, wv, T, C, s->D, 0.0f);
    value_rows(s, l, b, s->val, 1);
}

/* Head l1.h1's (l1 >= 1) z parts at the items from value source src
 * (−1: embed + pos, the residual entering layer 0, which for shortformer
 * positions is embed alone; with biases also the b_O below l1 and the
 * head's value constant, base_value; s >= 0: the direct part of sender
 * head s = l0·H + h0, l0 < l1), into s->Z; wv is head_veff(l1, h1), and
 * s->dd must hold W_O[l0,h0] wv for src >= 0. */
static void head_part(ctx *s, int l1, int h1, int src, const float *wv, const int *rb,
                      const int *rt, int ni) {
    const int T = s->T, D = s->D, H = s->H;
    int cur = -1;
    for (int i = 0; i < ni; i++) {
        int b = rb[i], t = rt[i];
        if (b != cur) { /* value block of sequence b, positions 0..T−1 */
            cur = b;
            if (src < 0)
                base_value(s, l1, b, wv);
            else if (src < H) { /* layer 0: the forward's own z is its direct z */
                for (int u = 0; u < T; u++)
                    memcpy(s->seq + (size_t)u * D, zg_at(s, 0, b, u, src), sizeof(float) * D);
                matmul_forward(s->val, s->seq, s->dd, T, D, D, 0.0f);
            } else
                matmul_forward(s->val, zd_at(s, src / H, b, src % H), s->dd, T, D, D, 0.0f);
            if (src >= 0 && s->np) value_rows(s, l1, b, s->val, 0);
        }
        mix(s, l1, h1, b, t, s->val, s->Z + (size_t)i * D);
    }
}

/* zd for the batch's sequences with items: each head of layers 1..L−2
 * (the senders of virtual heads beyond layer 0) reading embed + pos
 * only, at every position. */
static void direct_z(ctx *s, const int *rb, int ni) {
    const int T = s->T, D = s->D, H = s->H;
    for (int i = 0; i < ni; i++) {
        int b = rb[i];
        if (i && b == rb[i - 1]) continue;
        for (int l = 1; l <= s->L - 2; l++)
            for (int h = 0; h < H; h++) {
                float *zd = zd_at(s, l, b, h);
                base_value(s, l, b, head_veff(s, l, h));
                for (int t = 0; t < T; t++) mix(s, l, h, b, t, s->val, zd + (size_t)t * D);
            }
    }
}

/* acc (n, C) += z (n, D) W_O[l,h]. */
static void add_out(const ctx *s, int l, int h, const float *z, int n, float *acc) {
    matmul_forward(s->oc, z, al_head_wo(s->m, l, h), n, s->D, s->C, 0.0f);
    for (size_t k = 0; k < (size_t)n * s->C; k++) acc[k] += s->oc[k];
}

/* The remainder's residual rows at the items into s->rows: every chain
 * of three or more heads, l0.h0 → l1.h1 → ... → lk.hk (k >= 2), with the
 * patterns frozen. Built forward, never as a difference of terms: head
 * l.h's output splits into its direct part (its value reading x0) and
 * I[l,h] = g A ((Σ_{l'<l,h'} out[l',h']) W_V) W_O, which is every chain
 * of two or more heads ending at l.h; R[l] = Σ_{l'<l,h'} I[l',h'] is
 * what chains of >= 2 heads bring to layer l's value input, and the
 * remainder is Σ_{l>=2,h} g A (R[l] W_V) W_O. */
static void chains3(ctx *s, const int *rb, const int *rt, int ni) {
    const al_model *m = s->m;
    const int T = s->T, D = s->D, H = s->H, C = s->C, L = s->L;
    const size_t tc = (size_t)T * C;
    memset(s->rows, 0, sizeof(float) * (size_t)ni * C);
    for (int i0 = 0, i1; i0 < ni; i0 = i1) {
        const int b = rb[i0];
        for (i1 = i0; i1 < ni && rb[i1] == b; i1++) {}
        memset(s->S, 0, sizeof(float) * tc);
        memset(s->R, 0, sizeof(float) * tc * L);
        for (int l0 = 0; l0 <= L - 2; l0++) {
            for (int h0 = 0; l0 >= 1 && h0 < H; h0++) { /* I[l0,h0], added to R[l] for l > l0 */
                matmul_forward(s->val, s->S, head_veff(s, l0, h0), T, C, D, 0.0f);
                if (s->np) value_rows(s, l0, b, s->val, 0);
                for (int t = 0; t < T; t++) mix(s, l0, h0, b, t, s->val, s->zt + (size_t)t * D);
                matmul_forward(s->oc, s->zt, al_head_wo(m, l0, h0), T, D, C, 0.0f);
                for (int l = l0 + 1; l < L; l++)
                    for (size_t k = 0; k < tc; k++) s->R[l * tc + k] += s->oc[k];
            }
            for (int h = 0; h < H; h++) { /* S += out[l0,h] */
                for (int u = 0; u < T; u++)
                    memcpy(s->seq + (size_t)u * D, zg_at(s, l0, b, u, h), sizeof(float) * D);
                add_out(s, l0, h, s->seq, T, s->S);
            }
        }
        for (int l1 = 2; l1 < L; l1++)
            for (int h1 = 0; h1 < H; h1++) {
                matmul_forward(s->val, s->R + l1 * tc, head_veff(s, l1, h1), T, C, D, 0.0f);
                if (s->np) value_rows(s, l1, b, s->val, 0);
                for (int i = i0; i < i1; i++) {
                    mix(s, l1, h1, b, rt[i], s->val, s->zt);
                    add_out(s, l1, h1, s->zt, 1, s->rows + (size_t)i * C);
                }
            }
    }
}

/* The logits of residual rows s->rows (ni, C) at the items: the model's
 * unembedding for the plain model; else the frozen-scale readout (the
 * constant's logits added when cst: the direct term carries them). */
static void rows_logits(ctx *s, const int *rb, const int *rt, int ni, int cst) {
    if (!s->np) {
        al_model_unembed(s->m, s->rows, ni, s->TL);
        return;
    }
    ln_rows(s, s->rows, ni);
    unembed_lin(s, s->rows, ni, s->TL);
    by_final_scale(s, s->TL, rb, rt, ni);
    for (int i = 0; cst && i < ni; i++)
        for (int v = 0; v < s->V; v++) s->TL[(size_t)i * s->V + v] += (float)s->cst[v];
}

/* Every path term's logits at the items (rb, rt) of the last forward,
 * each handed to fn (one or two layers: in the order they always were,
 * which the kinds' float sums depend on). With LayerNorm or biases the
 * direct term is the whole stream less the heads' outputs (x0 and every
 * b_O) and carries the constant's logits (ln_final.b W_U + b_U), and
 * each head's own term its value constant (base_value). */
static void path_terms(ctx *s, const int *rb, const int *rt, int ni, term_fn fn, void *arg) {
    al_model *m = s->m;
    const int H = s->H, D = s->D, V = s->V, L = s->L, C = s->C;
    for (int i = 0; i < ni; i++) {
        float *r = s->rows + (size_t)i * C;
        memcpy(r, x_at(s, 0, rb[i], rt[i]), sizeof(float) * C);
        for (int k = 0; s->np && k < C; k++) r[k] += s->bsum[(size_t)L * C + k];
    }
    rows_logits(s, rb, rt, ni, 1);
    fn(arg, 0, s->TL, ni);
    for (int h = 0; h < H; h++) {
        head_ou(s, 0, h);
        for (int i = 0; i < ni; i++)
            memcpy(s->Z + (size_t)i * D, zg_at(s, 0, rb[i], rt[i], h), sizeof(float) * D);
        matmul_forward(s->TL, s->Z, s->ou, ni, D, V, 0.0f);
        by_final_scale(s, s->TL, rb, rt, ni);
        fn(arg, 1 + h, s->TL, ni);
    }
    if (L >= 3) direct_z(s, rb, ni);
    for (int l1 = 1; l1 < L; l1++)
        for (int h1 = 0; h1 < H; h1++) {
            head_ou(s, l1, h1);
            const float *wv = head_veff(s, l1, h1);
            head_part(s, l1, h1, -1, wv, rb, rt, ni);
            matmul_forward(s->TL, s->Z, s->ou, ni, D, V, 0.0f);
            by_final_scale(s, s->TL, rb, rt, ni);
            fn(arg, 1 + l1 * H + h1, s->TL, ni);
            for (int src = 0; src < l1 * H; src++) {
                matmul_forward(s->dd, al_head_wo(m, src / H, src % H), wv, D, C, D, 0.0f);
                head_part(s, l1, h1, src, wv, rb, rt, ni);
                matmul_forward(s->TL, s->Z, s->ou, ni, D, V, 0.0f);
                by_final_scale(s, s->TL, rb, rt, ni);
                fn(arg, al_attr_virtual_index(L, H, src, l1, h1), s->TL, ni);
            }
        }
    if (L >= 3) {
        chains3(s, rb, rt, ni);
        rows_logits(s, rb, rt, ni, 0);
        fn(arg, al_attr_n_terms(L, H) - 1, s->TL, ni);
    }
}

/* ------------------------------------------------------------- run */

typedef struct run_st {
    ctx s;
    const al_pairs *t;
    al_attr_result *r;
    int i0; /* the batch's first item */
    int cap; /* the most items of a batch */
    double *base; /* (cap) item loss of the model's logits */
    double *dl; /* (cap) per-item Δloss of one term */
    float *kind; /* (3, cap, V) the batch's logits summed per term kind */
} run_st;

static void run_term(void *arg, int k, float *TL, int ni) {
    run_st *st = arg;
    const al_pairs *t = st->t;
    al_attr_result *r = st->r;
    const int V = st->s.V, nt = r->n_terms;
    float *kind = st->kind + (size_t)al_attr_term_kind_of(r->L, r->H, k) * st->cap * V;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < ni; i++) {
        const al_pair_item *it = &t->items[st->i0 + i];
        float *lg = TL + (size_t)i * V, *ks = kind + (size_t)i * V;
        const float *fu = st->s.full + (size_t)i * V;
        double c = lg[it->answer];
        if (it->wrong >= 0)
            c -= lg[it->wrong];
        else if (st->s.ubar) { /* centred: the answer's logit less the row's mean */
            double mean = 0.0;
            for (int v = 0; v < V; v++) mean += lg[v];
            c -= mean / V;
        }
        r->item_term[(size_t)(st->i0 + i) * nt + k] = c;
        for (int v = 0; v < V; v++) ks[v] += lg[v], lg[v] = fu[v] - lg[v];
        double a = lg[it->answer];
        st->dl[i] = logsumexp_row(lg, V) - a - st->base[i];
    }
    double sum = 0.0;
    for (int i = 0; i < ni; i++) sum += st->dl[i];
    r->term_dloss[k] += sum;
}

/* Save m's hooks (z replacements, patches and any other: hooks.h) into saved and
 * clear them: the decompositions hold for the model's own z's. */
static void replacements_off(al_model *m, al_hooks *saved) { al_hooks_save(m, saved); }

static int result_alloc(al_attr_result *r, al_err *e) {
    size_t nc = r->n_comp, ni = r->n_items, nt = r->n_terms, L1 = r->L + 1;
    r->dla = al_calloc(nc, sizeof(double), e);
    r->dla_pos = al_calloc(nc * r->T, sizeof(double), e);
    r->pos_items = al_calloc(r->T, sizeof(int), e);
    r->item_metric = al_calloc(ni, sizeof(double), e);
    r->item_dla = al_calloc(ni * nc, sizeof(double), e);
    r->lens_loss = al_calloc(L1, sizeof(double), e);
    r->lens_acc = al_calloc(L1, sizeof(double), e);
    int ok = r->dla && r->dla_pos && r->pos_items && r->item_metric && r->item_dla &&
             r->lens_loss && r->lens_acc;
    if (ok && nt) {
        r->term_value = al_calloc(nt, sizeof(double), e);
        r->term_dloss = al_calloc(nt, sizeof(double), e);
        r->item_term = al_calloc(ni * nt, sizeof(double), e);
        ok = r->term_value && r->term_dloss && r->item_term;
    }
    return ok ? 0 : -1;
}

/* x · ubar: the mean logit of residual x (centring). */
static double mean_logit(const ctx *s, const float *x) {
    double a = 0.0;
    for (int k = 0; k < s->C; k++) a += x[k] * s->ubar[k];
    return a;
}

/* yh · ubar, in double. */
static double dot_ubar(const ctx *s, const double *yh) {
    double a = 0.0;
    for (int k = 0; k < s->C; k++) a += yh[k] * s->ubar[k];
    return a;
}

/* Direct logit attribution of one item at (b, t) of the last forward. */
static void item_dla(const ctx *s, const al_pair_item *it, int b, int t, int tok, double *out,
                     double *metric, float *buf) {
    const al_model *m = s->m;
    const int C = s->C, D = s->D, H = s->H;
#define DIFF(x)                                                                                    \
    ((double)al_model_logit(m, (x), it->answer) - (it->wrong >= 0                                  \
                                                       ? (double)al_model_logit(m, (x), it->wrong) \
                                                   : s->ubar ? mean_logit(s, (x))                  \
                                                             : 0.0))
    out[0] = DIFF(m->p[AL_P_WE] + (size_t)tok * C);
    /* shortformer: positions never enter the residual stream (only the
     * heads' q and k), so the pos component is exactly 0 */
    out[1] = m->cfg.pos_type == AL_POS_SHORTFORMER ? 0.0 : DIFF(m->p[AL_P_WPOS] + (size_t)t * C);
    for (int l = 0; l < s->L; l++)
        for (int h = 0; h < H; h++) {
            const float *z = zg_at(s, l, b, t, h), *wo = al_head_wo(m, l, h);
            for (int c = 0; c < C; c++) buf[c] = 0.0f;
            for (int d = 0; d < D; d++)
                for (int c = 0; c < C; c++) buf[c] += z[d] * wo[(size_t)d * C + c];
            out[2 + l * H + h] = DIFF(buf);
        }
    *metric = DIFF(x_at(s, s->L, b, t));
#undef DIFF
}

/* s->yh (C) = component y as W_U reads it under ln_final's scale sf,
 * frozen: (y − mean(y)) / sf · ln_final.w (LN; LNPre: no w); y itself
 * without LayerNorm. */
static void readout(const ctx *s, const float *y, float sf) {
    const int C = s->C;
    const float *w = s->m->p[AL_P_LNFW];
    double mu = 0.0;
    for (int k = 0; s->ln && k < C; k++) mu += y[k];
    mu /= C;
    for (int k = 0; k < C; k++)
        s->yh[k] = s->ln ? (y[k] - mu) / sf * (w ? w[k] : 1.0f) : (double)y[k];
}

/* The model's mean logit of final residual row x (centring): ln_final(x)
 * as al_model_logit computes it, times the mean column, plus b_U's mean. */
static double model_mean_logit(const ctx *s, const float *x) {
    const al_model *m = s->m;
    const int C = s->C;
    const float *w = m->p[AL_P_LNFW], *b = m->p[AL_P_LNFB];
    float mu = 0.0f, inv = 1.0f, scale;
    if (s->ln) {
        layernorm_stats(&mu, &scale, x, 1, C, m->cfg.ln_eps);
        inv = 1.0f / scale;
    }
    double a = s->bu_mean;
    for (int k = 0; k < C; k++) {
        float u = !s->ln ? x[k] : w ? (x[k] - mu) * inv * w[k] + b[k] : (x[k] - mu) * inv;
        a += (double)u * s->ubar[k];
    }
    return a;
}

/* item_dla of a LayerNorm or bias model: every component (embed, pos,
 * heads, each layer's b_O) centred and divided by ln_final's scale at
 * (b, t) in this run (TransformerLens's apply_ln_to_stack), times
 * ln_final.w, through W_U; then the constant ln_final.b W_U + b_U. They
 * add up to the model's metric logit, which is read through the whole
 * unembedding. */
static void item_dla_np(const ctx *s, const al_pair_item *it, int b, int t, int tok, double *out,
                        double *metric, float *buf) {
    const al_model *m = s->m;
    const int C = s->C, D = s->D, H = s->H, L = s->L;
    const float sf = s->ln ? m->lnf_scale[(size_t)b * s->T + t] : 1.0f;
    double *yh = s->yh, sum;
#define DIFF_NP(y)                                                                                 \
    (readout(s, (y), sf), sum = col_dot(s, yh, it->answer),                                        \
     sum - (it->wrong >= 0 ? col_dot(s, yh, it->wrong)                                             \
            : s->ubar      ? dot_ubar(s, yh)                                                       \
                           : 0.0))
    out[0] = DIFF_NP(m->p[AL_P_WE] + (size_t)tok * C);
    out[1] = m->cfg.pos_type == AL_POS_SHORTFORMER ? 0.0 : DIFF_NP(m->p[AL_P_WPOS] + (size_t)t * C);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            const float *z = zg_at(s, l, b, t, h), *wo = al_head_wo(m, l, h);
            for (int c = 0; c < C; c++) buf[c] = 0.0f;
            for (int d = 0; d < D; d++)
                for (int c = 0; c < C; c++) buf[c] += z[d] * wo[(size_t)d * C + c];
            out[2 + l * H + h] = DIFF_NP(buf);
        }
    for (int l = 0; l < L; l++)
        out[2 + L * H + l] = m->p[AL_P_BO] ? DIFF_NP(m->p[AL_P_BO] + (size_t)l * C) : 0.0;
    out[2 + L * H + L] = s->cst[it->answer] - (it->wrong >= 0 ? s->cst[it->wrong]
                                               : s->ubar      ? s->cst_mean
                                                              : 0.0);
#undef DIFF_NP
    const float *xL = x_at(s, L, b, t);
    *metric = (double)al_model_logit(m, xL, it->answer) -
              (it->wrong >= 0 ? (double)al_model_logit(m, xL, it->wrong)
               : s->ubar      ? model_mean_logit(s, xL)
                              : 0.0);
}

static int run_batches(run_st *st, const al_attr_opts *o, al_err *e) {
    ctx *s = &st->s;
    al_model *m = s->m;
    const al_pairs *t = st->t;
    al_attr_result *r = st->r;
    const int T = t->T, V = s->V, L = s->L, nc = r->n_comp;
    const int B = o->batch < t->N ? o->batch : t->N;
    int *rb = al_malloc(2 * (size_t)t->n_items, sizeof(int), e);
    float *buf = al_malloc((size_t)s->C, sizeof(float), e);
    if (!rb || !buf) {
        free(rb);
        free(buf);
        return -1;
    }
    int *rt = rb + t->n_items, rc = 0;
    al_progress pg;
    al_progress_init(&pg, 10.0);
    for (int n0 = 0, i0 = 0; n0 < t->N; n0 += B) {
        if (o->stop && *o->stop) {
            rc = al_errf(e, "interrupted");
            break;
        }
        int nb = t->N - n0 < B ? t->N - n0 : B, ni = 0;
        if (o->progress && n0) /* from the second batch: a one-batch run says nothing */
            al_progress_count(&pg, 0, n0, t->N, "attribution: %d/%d sequences", n0, t->N);
        while (i0 + ni < t->n_items && t->items[i0 + ni].pair < n0 + nb) ni++;
        if (ni == 0) continue;
        if (al_model_forward(m, t->clean + (size_t)n0 * T, NULL, nb, T, e)) {
            rc = -1;
            break;
        }
        s->nb = nb;
        st->i0 = i0;
        for (int i = 0; i < ni; i++) {
            const al_pair_item *it = &t->items[i0 + i];
            rb[i] = it->pair - n0, rt[i] = it->pos;
            (s->np ? item_dla_np
                   : item_dla)(s, it, rb[i], rt[i], t->clean[(size_t)it->pair * T + it->pos],
                               r->item_dla + (size_t)(i0 + i) * nc, &r->item_metric[i0 + i], buf);
        }
        /* logit lens; x_L's logits stay in s->full */
        for (int l = 0; l <= L; l++) {
            for (int i = 0; i < ni; i++)
                memcpy(s->rows + (size_t)i * s->C, x_at(s, l, rb[i], rt[i]), sizeof(float) * s->C);
            al_model_unembed(m, s->rows, ni, s->full);
            double ls = 0.0, acc = 0.0;
            for (int i = 0; i < ni; i++) {
                const float *lg = s->full + (size_t)i * V;
                int a = t->items[i0 + i].answer, best = 0;
                for (int v = 1; v < V; v++)
                    if (lg[v] > lg[best]) best = v;
                acc += best == a;
                memcpy(s->TL, lg, sizeof(float) * V);
                double li = logsumexp_row(s->TL, V) - lg[a];
                if (l == L) st->base[i] = li;
                ls += li;
            }
            r->lens_loss[l] += ls;
            r->lens_acc[l] += acc;
        }
        if (r->n_terms) {
            memset(st->kind, 0, sizeof(float) * 3 * st->cap * V);
            path_terms(s, rb, rt, ni, run_term, st);
            for (int k = 0; k < 3; k++) {
                const float *ks = st->kind + (size_t)k * st->cap * V;
                double sum = 0.0;
                for (int i = 0; i < ni; i++) {
                    const float *fu = s->full + (size_t)i * V, *kr = ks + (size_t)i * V;
                    for (int v = 0; v < V; v++) s->TL[v] = fu[v] - kr[v];
                    double a = s->TL[t->items[i0 + i].answer];
                    sum += logsumexp_row(s->TL, V) - a - st->base[i];
                }
                r->kind_dloss[k] += sum;
            }
        }
        i0 += ni;
    }
    if (o->progress) al_progress_done(&pg);
    free(rb);
    free(buf);
    return rc;
}

/* A pair task's gap check (gap.h) into w, with the model as this run
 * sees it (z replacements off); a "data" task (clean = corrupted) has no
 * gap to check. */
static int pair_gap(al_model *m, const al_pairs *t, const al_attr_opts *o, al_warnings *w,
                    al_err *e) {
    if (!strcmp(t->task, "data")) return 0;
    al_patch_opts po = al_patch_opts_defaults();
    po.batch = o->batch, po.stop = o->stop;
    return al_patch_gap(m, t, &po, w, NULL, NULL, e);
}

/* r->ci from the items' values, each sequence's items resampled together. */
static int attr_intervals(const al_pairs *t, const al_attr_opts *o, al_attr_result *r, al_err *e) {
    const int nc = r->n_comp, nt = r->n_terms, m = 1 + nc + nt, ni = r->n_items;
    double *x = al_malloc((size_t)ni * m, sizeof *x, e);
    int *grp = al_malloc((size_t)ni, sizeof *grp, e);
    int rc = -1;
    if (x && grp && (r->ci = al_malloc((size_t)m, sizeof *r->ci, e))) {
        for (int i = 0; i < ni; i++) {
            double *xi = x + (size_t)i * m;
            grp[i] = t->items[i].pair;
            xi[0] = r->item_metric[i];
            memcpy(xi + 1, r->item_dla + (size_t)i * nc, (size_t)nc * sizeof *xi);
            if (nt) memcpy(xi + 1 + nc, r->item_term + (size_t)i * nt, (size_t)nt * sizeof *xi);
        }
        rc = al_boot_group_means(x, grp, ni, m, t->N, o->bootstrap, o->ci_level, o->ci_seed, r->ci,
                                 e);
        r->ci_level = o->ci_level, r->ci_boot = o->bootstrap, r->ci_seed = o->ci_seed;
        for (int i = 0, last = -1; i < ni; i++) /* items are in pair order */
            if (grp[i] != last) r->ci_n++, last = grp[i];
    }
    free(x);
    free(grp);
    return rc;
}

double al_attr_bytes(const al_config *c, int N, int T, double n_items, const al_attr_opts *o) {
    double nc = al_attr_n_comp(c), nt = o->paths ? al_attr_n_terms(c->n_layers, c->n_heads) : 0;
    int B = o->batch < N ? o->batch : N;
    double cap = (double)B * T; /* the most items a batch holds */
    return (double)N * T * 2 * sizeof(int) + n_items * (sizeof(al_pair_item) + sizeof(int)) +
           2 * n_items * (1 + nc + nt) * sizeof(double) + al_model_acts_bytes(c, B, T) +
           (nt ? 3 * cap * c->d_vocab * sizeof(float) : 0) + nc * T * sizeof(double);
}

int al_attribute_run(al_model *m, const al_pairs *t, const al_attr_opts *o, al_attr_result *r,
                     al_err *e) {
    memset(r, 0, sizeof *r);
    const al_config *c = &m->cfg;
    if (al_attr_opts_check(o, e)) return -1;
    if (o->paths && !al_attr_n_terms(c->n_layers, c->n_heads))
        return al_errf(e,
                       "path expansion of %d layers x %d heads: more than %d terms; run "
                       "with paths off",
                       c->n_layers, c->n_heads, AL_ATTR_MAX_TERMS);
    if (al_pairs_check(t, c->n_ctx, c->d_vocab, e)) return -1;
    double t0 = al_now();
    r->L = c->n_layers, r->H = c->n_heads, r->N = t->N, r->T = t->T;
    r->n_items = t->n_items, r->logit_diff = t->logit_diff;
    r->n_comp = al_attr_n_comp(c);
    r->n_terms = o->paths ? al_attr_n_terms(r->L, r->H) : 0;
    const int B = o->batch < t->N ? o->batch : t->N;
    int cap = 0; /* the most items any batch holds */
    for (int n0 = 0, i = 0; n0 < t->N; n0 += B) {
        int i1 = i;
        while (i1 < t->n_items && t->items[i1].pair < n0 + B) i1++;
        if (i1 - i > cap) cap = i1 - i;
        i = i1;
    }
    run_st st = {.t = t, .r = r};
    al_hooks zr;
    replacements_off(m, &zr);
    int rc = -1;
    r->centred = o->center_unembed;
    if (result_alloc(r, e) || ctx_init(&st.s, m, t->T, cap, o->paths ? B : 0, e) ||
        (o->center_unembed && ctx_center(&st.s, e)))
        goto out;
    st.base = al_malloc(2 * (size_t)cap, sizeof(double), e);
    if (!st.base) goto out;
    st.dl = st.base + cap;
    st.cap = cap;
    if (r->n_terms && !(st.kind = al_malloc((size_t)3 * cap * c->d_vocab, sizeof(float), e)))
        goto out;
    if (run_batches(&st, o, e) || pair_gap(m, t, o, &r->warn, e)) goto out;
    /* means, summed in item order */
    const int nc = r->n_comp, nt = r->n_terms, T = r->T;
    double n = r->n_items;
    for (int i = 0; i < t->n_items; i++) {
        int p = t->items[i].pos;
        r->metric += r->item_metric[i];
        r->pos_items[p]++;
        for (int k = 0; k < nc; k++) {
            r->dla[k] += r->item_dla[(size_t)i * nc + k];
            r->dla_pos[(size_t)k * T + p] += r->item_dla[(size_t)i * nc + k];
        }
        for (int k = 0; k < nt; k++) r->term_value[k] += r->item_term[(size_t)i * nt + k];
    }
    r->metric /= n;
    for (int k = 0; k < nc; k++) {
        r->dla[k] /= n;
        for (int p = 0; p < T; p++)
            r->dla_pos[(size_t)k * T + p] =
                r->pos_items[p] ? r->dla_pos[(size_t)k * T + p] / r->pos_items[p] : NAN;
    }
    for (int k = 0; k < nt; k++) {
        r->term_value[k] /= n, r->term_dloss[k] /= n;
        r->kind_value[al_attr_term_kind_of(r->L, r->H, k)] += r->term_value[k];
    }
    for (int k = 0; k < 3; k++) r->kind_dloss[k] /= n;
    for (int l = 0; l <= r->L; l++) r->lens_loss[l] /= n, r->lens_acc[l] /= n;
    r->loss = r->lens_loss[r->L];
    if (attr_intervals(t, o, r, e)) goto out;
    r->seconds = al_now() - t0;
    rc = 0;
out:
    al_hooks_restore(m, &zr);
    free(st.base);
    free(st.kind);
    ctx_free(&st.s);
    if (rc) al_attr_result_free(r);
    return rc;
}

/* ------------------------------------------------- one sequence's terms */

typedef struct copy_st {
    float *out;
    int V;
} copy_st;

static void copy_term(void *arg, int k, float *TL, int ni) {
    (void)ni;
    copy_st *cs = arg;
    memcpy(cs->out + (size_t)k * cs->V, TL, sizeof(float) * cs->V);
}

int al_attr_path_logits(al_model *m, const int *tokens, int T, int pos, float *out, al_err *e) {
    const al_config *c = &m->cfg;
    if (!al_attr_n_terms(c->n_layers, c->n_heads))
        return al_errf(e, "path expansion of %d layers x %d heads: more than %d terms", c->n_layers,
                       c->n_heads, AL_ATTR_MAX_TERMS);
    if (T < 1 || T > c->n_ctx || pos < 0 || pos >= T)
        return al_errf(e, "path logits need 1 <= T <= n_ctx %d and 0 <= pos < T (got %d, %d)",
                       c->n_ctx, T, pos);
    al_hooks zr;
    replacements_off(m, &zr);
    ctx s;
    int rc = -1;
    if (ctx_init(&s, m, T, 1, 1, e) == 0 && al_model_forward(m, tokens, NULL, 1, T, e) == 0) {
        s.nb = 1;
        int rb = 0, rt = pos;
        copy_st cs = {out, c->d_vocab};
        path_terms(&s, &rb, &rt, 1, copy_term, &cs);
        rc = 0;
    }
    al_hooks_restore(m, &zr);
    ctx_free(&s);
    return rc;
}
