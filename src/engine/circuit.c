/* circuit.c -- running a circuit: hooks (hooks.h) that make a forward
 * pass carry, on the head graph's removed edges, a fill value instead of
 * what their sender computes in this run (contract in graph.h,
 * al_circuit_spec and al_circuit_attach).
 *
 * Without LayerNorm the model is linear between the embeddings and each
 * head's q/k/v (biases cancel in a difference), so a receiver's input
 * with some edges removed is its input in this run minus, over the
 * removed senders s, (value_s − fill_s). The forward therefore runs as
 * usual and the hooks subtract:
 * at Q/K/V of layer l, for a head's channel c, Δ · W_c[l,h] where Δ is
 * the removed embedding rows' difference (BT, C) and, for heads of later
 * layers, Σ over removed senders l0.h0 (l0 < l) of Δzg_{l0,h0} ·
 * W_O[l0,h0] W_c[l,h] (the product formed per receiver, D×D per sender,
 * so the correction is D-wide, not C-wide; one sgemm per sending layer).
 * Δzg of layer l0 is this run's gated z minus the fill run's, taken when
 * a later layer first needs it: this run's z of layer l0 already carries
 * the removals into layers <= l0, so removals upstream propagate. At
 * RESID_POST of the last layer (the logits'
 * input), the removed senders' differences in the residual. Nothing is
 * touched for a receiver with every edge kept, so the full circuit is
 * the plain forward bit for bit. The fill run (corrupted or resampled
 * tokens) is a second forward of the same weights, gates and other hooks
 * into x->fill's own activations, started by the first hook of a
 * forward (RESID_PRE of layer 0).
 *
 * Scratch (x->ws, grown on demand), for the forward's (B, T):
 *   fe    (BT, C)      fill embeddings W_E[fill token] (not for mean)
 *   de    (BT, C)      W_E[token] − fill embedding
 *   dz    (L, BT, HD)  zg − fill zg per layer (block 0 reused at RESID_POST)
 *   stack (HD, D)      Σ-weights of one receiver from one sending layer
 *   ft    (BT + H)     the resampled tokens (ints), later removed-head flags
 * The fill's gated z's are read from x->fill.zg (or the spec's fill_zg).
 *
 * With LayerNorm, ln1 normalises each receiver's input with statistics of
 * its own, so the subtraction moves before it: the hooks sit on the split
 * inputs (Q_INPUT..V_INPUT, each head's own copy of resid_pre) and take
 * the removed senders' differences off C-wide (circuit_recv); the
 * forward then normalises each head's input separately. The final
 * residual is adjusted as without LayerNorm, and ln_final follows it.
 *
 * Discovery's incremental evaluation (al_circuit_delta_run, below) is the
 * same edge removal against cached clean and corrupted runs: it shares
 * the composition products (comp_block) and the D-wide correction
 * (sub_comp), and takes exact corrupted-run values where a channel's
 * input is entirely the fill's (graph.h says why the two then agree to
 * float rounding rather than bit for bit). With 3 or more layers it takes
 * its own path (delta_run_deep, at the end): the first changed layer head
 * by head, every later one in full, reusing across a batch's evaluations
 * what depends only on the unchanged layers (al_circuit_memo); 1 and 2
 * layers keep the path they always had. A LayerNorm or bias model's
 * evaluation is the hooks' full forward (delta_run_hooks), with the
 * cached corrupted z as its fill. */
#include "attnlab/graph.h"

#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/layers.h"
#include "model_internal.h"

typedef struct cscr {
    float *fe, *de, *dz, *stack;
    const float *fz;
    int *ft;
} cscr;

static size_t scratch_floats(const al_config *c, size_t BT) {
    size_t C = c->d_model, HD = (size_t)c->n_heads * c->d_head;
    return BT * C + BT * C + (size_t)c->n_layers * BT * HD + HD * c->d_head + BT +
           (size_t)c->n_heads;
}

static void views(const al_circuit_exec *x, cscr *s) {
    const al_model *m = x->m;
    const al_config *c = &m->cfg;
    size_t BT = (size_t)m->B * m->T, C = c->d_model;
    size_t HD = (size_t)c->n_heads * c->d_head;
    s->fe = x->ws;
    s->fz = x->sp->fill_zg ? x->sp->fill_zg : x->fill.zg;
    s->de = s->fe + BT * C;
    s->dz = s->de + BT * C;
    s->stack = s->dz + (size_t)c->n_layers * BT * HD;
    s->ft = (int *)(s->stack + HD * c->d_head);
}

/* W_E rows of tokens (BT) into out (BT, C). */
static void embed_rows(const al_model *m, const int *tok, size_t BT, float *out) {
    const size_t C = m->cfg.d_model;
    for (size_t r = 0; r < BT; r++) memcpy(out + r * C, m->p[AL_P_WE] + (size_t)tok[r] * C, sizeof(float) * C);
}

/* RESID_PRE of layer 0, the first hook of a forward: check the fill
 * against this batch and run it (corrupted or resampled sequences)
 * through the model, keeping its embeddings; its gated z's stay in
 * x->fill. */
static int circuit_begin(al_hook_act *a, void *ctx, al_err *e) {
    al_circuit_exec *x = ctx;
    const al_circuit_spec *sp = x->sp;
    al_model *m = a->m;
    const al_config *c = &m->cfg;
    const int B = m->B, T = m->T;
    const int *inputs = m->inputs;
    const size_t BT = (size_t)B * T, V = c->d_vocab;
    a->intervened = 1;
    switch (sp->fill) {
    case AL_FILL_CORRUPTED:
        for (size_t r = 0; r < BT; r++)
            if (sp->corr[r] < 0 || (size_t)sp->corr[r] >= V)
                return al_errf(e, "corrupted token id %d is outside the vocabulary (0..%zu)",
                               sp->corr[r], V - 1);
        break;
    case AL_FILL_RESAMPLE:
        if (B < 2)
            return al_errf(e, "resampling a circuit's removed edges needs at least 2 sequences "
                              "per batch (got 1)");
        break;
    case AL_FILL_MEAN:
        if (sp->mean_T < T)
            return al_errf(e, "the circuit's mean fill covers %d positions, the batch has %d",
                           sp->mean_T, T);
        break;
    }
    size_t need = scratch_floats(c, BT);
    if (need > x->cap) {
        float *w = al_malloc(need, sizeof(float), e);
        if (!w) return al_err_prefix(e, "circuit run scratch");
        free(x->ws);
        x->ws = w, x->cap = need;
    }
    x->de_ready = 0, x->dz_ready = 0;
    if (sp->fill == AL_FILL_MEAN) return 0;
    cscr v, *s = &v;
    views(x, s);
    const int *fill = sp->corr;
    if (sp->fill == AL_FILL_RESAMPLE) { /* row b runs sequence (b + 1) mod B */
        for (int b = 0; b < B; b++)
            memcpy(s->ft + (size_t)b * T, inputs + (size_t)((b + 1) % B) * T, sizeof(int) * T);
        fill = s->ft;
    }
    /* the fill run: the same model (gates, other hooks) without this
     * circuit, unless the caller has it already */
    if (!sp->fill_zg && model_forward_shared(&x->fill, m, x, fill, B, T, e))
        return al_err_prefix(e, "the circuit's fill run");
    embed_rows(m, fill, BT, s->fe);
    return 0;
}

/* de = W_E[token] − fill embedding, once per forward. */
static void need_de(al_circuit_exec *x, cscr *s) {
    if (x->de_ready) return;
    const al_model *m = x->m;
    const al_circuit_spec *sp = x->sp;
    const size_t C = m->cfg.d_model, T = m->T, BT = (size_t)m->B * T;
    embed_rows(m, m->inputs, BT, s->de);
    for (size_t r = 0; r < BT; r++) {
        const float *f = sp->fill == AL_FILL_MEAN ? sp->mean_x0 + (r % T) * C : s->fe + r * C;
        float *d = s->de + r * C;
        for (size_t k = 0; k < C; k++) d[k] -= f[k];
    }
    x->de_ready = 1;
}

/* dz (BT, HD) = layer l's zg − its fill, with the heads not in
 * `removed` (H flags; NULL: all) zeroed. */
static void make_dz(const al_circuit_exec *x, cscr *s, int l, const unsigned char *removed,
                    float *dz) {
    const al_model *m = x->m;
    const al_circuit_spec *sp = x->sp;
    const al_config *c = &m->cfg;
    const size_t H = c->n_heads, D = c->d_head, HD = H * D, T = m->T, BT = (size_t)m->B * T;
    const float *zg = m->zg + (size_t)l * BT * HD;
    for (size_t r = 0; r < BT; r++)
        for (size_t h = 0; h < H; h++) {
            float *d = dz + r * HD + h * D;
            if (removed && !removed[h]) {
                memset(d, 0, sizeof(float) * D);
                continue;
            }
            const float *f = sp->fill == AL_FILL_MEAN
                                 ? sp->mean_zg + (((size_t)l * sp->mean_T + r % T) * H + h) * D
                                 : s->fz + (size_t)l * BT * HD + r * HD + h * D;
            const float *z = zg + r * HD + h * D;
            for (size_t k = 0; k < D; k++) d[k] = z[k] - f[k];
        }
}

static const float *head_w(const al_model *m, int l, int h, int ch) {
    return ch == 0 ? al_head_wq(m, l, h) : ch == 1 ? al_head_wk(m, l, h) : al_head_wv(m, l, h);
}

/* blk (D, D) = W_O[l0,h0] · W_c[l1,h1]: what a composition edge l0.h0
 * → l1.h1.c multiplies its sender's Δzg by (both paths use this
 * product). */
static void comp_block(const al_model *m, int l0, int h0, int l1, int h1, int ch, float *blk) {
    const int C = m->cfg.d_model, D = m->cfg.d_head;
    al_sgemm(false, false, D, D, C, 1.0f, al_head_wo(m, l0, h0), C,
                head_w(m, l1, h1, ch), D, 0.0f, blk, D);
}

/* dst (BT rows of D, stride 3·H·D) −= dz (BT, H·D) · stack (H·D, D): a
 * channel minus its removed senders' differences from one layer. */
static void sub_comp(float *dst, const float *dz, const float *stack, int BT, int H, int D) {
    al_sgemm(false, false, BT, D, H * D, -1.0f, dz, H * D, stack,
                D, 1.0f, dst, 3 * H * D);
}

/* A receiver: head l.h's q, k or v (channel ch), or under LayerNorm its
 * own input to them, minus what its removed edges carried.
 *
 * Without LayerNorm the hook sits at Q, K or V (rows of 3·H·D) and takes
 * the differences off after the projection, D-wide: Δembed · W_c[l,h],
 * and per sending layer Δzg · (W_O[l0,h0] W_c[l,h]) over the removed h0.
 *
 * With LayerNorm ln1 normalises each receiver's input with statistics of
 * its own, so the hook sits at the split inputs Q_INPUT..V_INPUT ((B, T,
 * H, C): each head's own copy of resid_pre, docs/hooks.md) and takes them
 * off before it, C-wide: Δembed, and per sending layer Δzg · W_O[l0] with
 * the kept heads' Δzg zeroed; the forward then normalises each head's
 * input on its own.
 *
 * A head with every edge kept is untouched, so it keeps the forward's
 * own value bit for bit. */
static int circuit_recv(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    al_circuit_exec *x = ctx;
    const al_circuit_spec *sp = x->sp;
    const al_model *m = a->m;
    cscr v, *s = &v;
    views(x, s);
    const al_config *c = &m->cfg;
    const int L = c->n_layers, H = c->n_heads, D = c->d_head, C = c->d_model, HD = H * D;
    const int split = a->point >= AL_HOOK_Q_INPUT; /* LayerNorm: before ln1 */
    const int BT = m->B * m->T, l = a->layer;
    const int ch = a->point - (split ? AL_HOOK_Q_INPUT : AL_HOOK_Q);
    const size_t ld = split ? (size_t)H * C : 3 * (size_t)HD;
    unsigned char *removed = (unsigned char *)s->ft; /* the fill tokens are used by now */
    if (!split) a->intervened = 1;
    for (int h = 0; h < H; h++) {
        int emb = !sp->kept[al_graph_k_input(H, l, h, ch, 0)], nh = 0;
        for (int s0 = 0; s0 < l * H; s0++) nh += !sp->kept[al_graph_k_comp(L, H, s0, l, h, ch)];
        if (!emb && !nh) continue;
        a->intervened = 1;
        float *dst = a->data + (size_t)h * (split ? C : D);
        if (emb) {
            need_de(x, s);
            if (split)
                for (int r = 0; r < BT; r++) {
                    float *o = dst + (size_t)r * ld;
                    const float *d = s->de + (size_t)r * C;
                    for (int k = 0; k < C; k++) o[k] -= d[k];
                }
            else
                al_sgemm(false, false, BT, D, C, -1.0f, s->de, C, head_w(m, l, h, ch), D, 1.0f,
                         dst, (int)ld);
        }
        for (int l0 = 0; nh && l0 < l; l0++) {
            int any = 0;
            for (int h0 = 0; h0 < H; h0++)
                any |= removed[h0] = !sp->kept[al_graph_k_comp(L, H, l0 * H + h0, l, h, ch)];
            if (!any) continue;
            float *dz = s->dz + (size_t)l0 * BT * HD;
            if (split) { /* the flags differ per head: not cached */
                make_dz(x, s, l0, removed, dz);
                al_sgemm(false, false, BT, C, HD, -1.0f, dz, HD,
                         m->p[AL_P_WO] + (size_t)l0 * HD * C, C, 1.0f, dst, (int)ld);
                continue;
            }
            /* layer l0's full difference, kept until RESID_POST */
            if (!(x->dz_ready & 1u << l0)) {
                make_dz(x, s, l0, NULL, dz);
                x->dz_ready |= 1u << l0;
            }
            /* stack (HD, D): W_O[l0,h0] · W_c[l,h] for removed h0, else 0 */
            for (int h0 = 0; h0 < H; h0++) {
                float *blk = s->stack + (size_t)h0 * D * D;
                if (!removed[h0]) memset(blk, 0, sizeof(float) * D * D);
                else comp_block(m, l0, h0, l, h, ch, blk);
            }
            sub_comp(dst, dz, s->stack, BT, H, D);
        }
    }
    return 0;
}

/* RESID_POST of the last layer: the final residual minus what the
 * removed logits edges carried. */
static int circuit_out(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    al_circuit_exec *x = ctx;
    const al_circuit_spec *sp = x->sp;
    const al_model *m = a->m;
    float *xL = a->data;
    cscr v, *s = &v;
    views(x, s);
    a->intervened = 1;
    const al_config *c = &m->cfg;
    const int L = c->n_layers, H = c->n_heads, D = c->d_head, C = c->d_model, HD = H * D;
    const size_t BT = (size_t)m->B * m->T;
    if (!sp->kept[al_graph_k_out(L, H, 0)]) {
        need_de(x, s);
        for (size_t i = 0; i < BT * C; i++) xL[i] -= s->de[i];
    }
    /* removed heads' flags: in the fill-token scratch, free by now */
    unsigned char *removed = (unsigned char *)s->ft;
    for (int l = 0; l < L; l++) {
        int any = 0;
        for (int h = 0; h < H; h++) any |= removed[h] = !sp->kept[al_graph_k_out(L, H, 2 + l * H + h)];
        if (!any) continue;
        make_dz(x, s, l, removed, s->dz);
        al_sgemm(false, false, (int)BT, C, HD, -1.0f, s->dz, HD,
                    m->p[AL_P_WO] + (size_t)l * HD * C, C, 1.0f, xL, C);
    }
    return 0;
}

int al_circuit_attach(al_circuit_exec *x, al_model *m, const al_circuit_spec *sp, al_err *e) {
    memset(x, 0, sizeof *x);
    const al_config *c = &m->cfg;
    if (al_graph_n_edges(c->n_layers, c->n_heads) <= 0)
        return al_errf(e, "a circuit runs on models of 1 to %d layers (this one has %d)",
                       AL_GRAPH_MAX_LAYERS, c->n_layers);
    if (!sp || !sp->kept) return al_errf(e, "circuit spec without its edges");
    switch (sp->fill) {
    case AL_FILL_CORRUPTED:
        if (!sp->corr) return al_errf(e, "a corrupted fill needs corrupted tokens");
        break;
    case AL_FILL_RESAMPLE: break;
    case AL_FILL_MEAN:
        if (!sp->mean_x0 || !sp->mean_zg) return al_errf(e, "a mean fill needs its means");
        break;
    default: return al_errf(e, "unknown circuit fill %d", (int)sp->fill);
    }
    x->sp = sp, x->m = m;
    int L = c->n_layers;
    int rc = al_hook_add(m, AL_HOOK_RESID_PRE, 0, circuit_begin, x, e);
    /* Without LayerNorm a receiver's q, k and v are linear in its input
     * (biases cancel in a difference), so edges come off after the
     * projection, D-wide; with it, before ln1, on each head's own input. */
    const int ln = c->norm_type != AL_NORM_NONE;
    for (int ch = 0; rc == 0 && ch < 3; ch++)
        rc = al_hook_add(m, (ln ? AL_HOOK_Q_INPUT : AL_HOOK_Q) + ch, -1, circuit_recv, x, e);
    if (rc == 0) rc = al_hook_add(m, AL_HOOK_RESID_POST, L - 1, circuit_out, x, e);
    if (rc) {
        al_hook_remove(m, x);
        memset(x, 0, sizeof *x);
        return -1;
    }
    return 0;
}

void al_circuit_detach(al_circuit_exec *x) {
    if (x->m) al_hook_remove(x->m, x);
    if (x->fill.acts) model_shared_free(&x->fill);
    free(x->ws);
    memset(x, 0, sizeof *x);
}

/* --------------------------------------------- incremental evaluation */

/* Composition products W_O[l0,h0] · W_c[l1,h1]: one per composition edge. */
static size_t n_comp(int L, int H) { return (size_t)3 * H * H * L * (L - 1) / 2; }

int al_circuit_delta_init(al_circuit_delta *d, const al_model *m, int B, int T, al_err *e) {
    memset(d, 0, sizeof *d);
    const al_config *c = &m->cfg;
    if (al_graph_n_edges(c->n_layers, c->n_heads) <= 0)
        return al_errf(e, "circuit evaluation covers models of 1 to %d layers (this one has %d)",
                       AL_GRAPH_MAX_LAYERS, c->n_layers);
    d->L = c->n_layers, d->H = c->n_heads, d->D = c->d_head, d->C = c->d_model, d->B = B, d->T = T;
    /* the incremental forward (delta.c) is the plain model's */
    if (!al_config_is_plain(c)) {
        d->full = 1;
        return 0;
    }
    const size_t L = d->L, H = d->H, D = d->D, C = d->C, HD = H * D, BT = (size_t)B * T;
    const size_t nw = L >= 2 ? n_comp(d->L, d->H) * D * D : 1;
    /* the layers a deep circuit recomputes in full (L >= 3) */
    const size_t deep = L >= 3 ? L * C * 3 * HD + (L + 1) * BT * C + BT * 3 * HD +
                                     BT * H * T + BT * HD + BT * C + 6 * BT * D
                               : 0;
    d->wcomp = al_malloc(nw + L * BT * 3 * HD + L * BT * HD + BT * C + L * BT * HD + BT * HD +
                             HD * D + deep + H,
                         sizeof(float), e);
    /* a deep circuit's memo keys (al_circuit_memo: hw, lw bytes) being built */
    const size_t hw = 1 + 3 * (1 + (L - 1) * H), lw = 4 + (L - 1) * H;
    const size_t keys = L >= 3 ? hw + 2 * lw : 0;
    d->qm = d->wcomp ? al_malloc(L * 3 * H * T + L * H * T + T + keys, 1, e) : NULL;
    if (!d->qm) {
        al_circuit_delta_free(d);
        return -1;
    }
    d->syn = d->wcomp + nw;
    d->zsrc = d->syn + L * BT * 3 * HD;
    d->fix = d->zsrc + L * BT * HD;
    d->dz = d->fix + BT * C;
    d->dzm = d->dz + L * BT * HD;
    d->stack = d->dzm + BT * HD;
    if (deep) {
        d->wqkv = d->stack + HD * D;
        d->xs = d->wqkv + L * C * 3 * HD;
        d->qkv = d->xs + (L + 1) * BT * C;
        d->att = d->qkv + BT * 3 * HD;
        d->zb = d->att + BT * H * T;
        d->dxb = d->zb + BT * HD;
        d->qh = d->dxb + BT * C;
        d->lowt = d->qh + 5 * BT * D;
        d->sel = (int *)(d->lowt + BT * D); /* H ints in H floats' room */
        d->kh = d->qm + L * 3 * H * T + L * H * T + T;
        d->kc = d->kh + hw;
        d->kf = d->kc + lw;
        for (int l = 0; l < d->L; l++) model_fuse_qkv(d->wqkv + (size_t)l * C * 3 * HD, m, l);
    }
    d->zm = d->qm + L * 3 * H * T; /* right after qm: one memset clears both */
    d->dirty = d->zm + L * H * T;
    for (int l1 = 1; l1 < d->L; l1++)
        for (int s0 = 0; s0 < l1 * d->H; s0++)
            for (int h1 = 0; h1 < d->H; h1++)
                for (int ch = 0; ch < 3; ch++) {
                    size_t k = (size_t)al_graph_k_comp(d->L, d->H, s0, l1, h1, ch) - 6 * L * H;
                    comp_block(m, s0 / d->H, s0 % d->H, l1, h1, ch, d->wcomp + k * D * D);
                }
    return 0;
}

void al_circuit_delta_free(al_circuit_delta *d) {
    free(d->wcomp);
    free(d->qm);
    al_delta_ws_free(&d->ws);
    memset(d, 0, sizeof *d);
}

void al_circuit_delta_embp(al_circuit_delta *d, const al_model *m, const int *clean,
                           const int *corr, int nb, float *embp) {
    if (d->full) return;
    const size_t C = d->C, D = d->D, HD = (size_t)d->H * D, bt = (size_t)nb * d->T;
    float *de = d->fix; /* scratch (bt, C) */
    for (size_t r = 0; r < bt; r++) {
        const float *a = m->p[AL_P_WE] + (size_t)clean[r] * C;
        const float *z = m->p[AL_P_WE] + (size_t)corr[r] * C;
        for (size_t k = 0; k < C; k++) de[r * C + k] = a[k] - z[k];
    }
    for (int l = 1; l < d->L; l++) {
        float *out = embp + (size_t)(l - 1) * bt * 3 * HD;
        for (int h = 0; h < d->H; h++)
            for (int ch = 0; ch < 3; ch++)
                al_sgemm(false, false, (int)bt, (int)D, (int)C,
                            1.0f, de, (int)C, head_w(m, l, h, ch), (int)D, 0.0f,
                            out + ch * HD + h * D, (int)(3 * HD));
    }
}

/* Copy channel slices (nb·T rows of D, row stride ld) from src to dst. */
static void copy_rows(float *dst, const float *src, size_t rows, int D, size_t ld) {
    for (size_t r = 0; r < rows; r++) memcpy(dst + r * ld, src + r * ld, sizeof(float) * D);
}

static int delta_run_deep(al_circuit_delta *d, al_model *m, const unsigned char *kept,
                          const al_acts *cl, const al_acts *co, const int *clean, const int *corr,
                          const float *embp, al_circuit_memo *memo, float *xL,
                          unsigned char *changed, al_err *e);

int al_circuit_memo_init(al_circuit_memo *mm, const al_circuit_delta *d, int nb, al_err *e) {
    memset(mm, 0, sizeof *mm);
    if (d->full) return 0; /* nothing to remember: every evaluation is a full forward */
    const size_t HD = (size_t)d->H * d->D, L = (size_t)d->L, H = (size_t)d->H;
    const size_t bt = (size_t)nb * d->T;
    mm->nb = nb;
    mm->hw = 1 + 3 * (1 + (d->L - 1) * d->H);
    mm->lw = 4 + (d->L - 1) * d->H;
    mm->zh = al_malloc(L * bt * HD + (L - 1) * bt * 3 * HD + bt * d->C, sizeof(float), e);
    mm->hkey = mm->zh ? al_calloc(L * H * mm->hw + (L - 1) * 3 * H * mm->lw + (size_t)mm->lw, 1, e)
                      : NULL;
    if (!mm->hkey) {
        al_circuit_memo_free(mm);
        return -1;
    }
    mm->low = mm->zh + L * bt * HD;
    mm->fix = mm->low + (L - 1) * bt * 3 * HD;
    mm->lkey = mm->hkey + L * H * mm->hw;
    mm->fkey = mm->lkey + (L - 1) * 3 * H * mm->lw;
    return 0;
}

void al_circuit_memo_free(al_circuit_memo *mm) {
    free(mm->zh);
    free(mm->hkey);
    memset(mm, 0, sizeof *mm);
}

/* A LayerNorm or bias model's circuit: one full forward of the clean tokens with
 * the circuit's hooks, the corrupted run's z read from co (so no fill
 * forward); changed marks the rows whose final residual differs from
 * cl's, bit for bit (every edge kept: none). */
static int delta_run_hooks(al_circuit_delta *d, al_model *m, const unsigned char *kept,
                           const al_acts *cl, const al_acts *co, const int *clean,
                           const int *corr, float *xL, unsigned char *changed, al_err *e) {
    const int nb = cl->B, T = d->T;
    const size_t C = d->C, BT = (size_t)nb * T, fin = (size_t)d->L * BT * C;
    al_circuit_spec sp = {.kept = kept, .fill = AL_FILL_CORRUPTED, .corr = corr,
                          .fill_zg = co->zg};
    al_circuit_exec x;
    if (al_circuit_attach(&x, m, &sp, e)) return -1;
    int rc = al_model_forward(m, clean, NULL, nb, T, e);
    al_circuit_detach(&x);
    if (rc) return -1;
    const float *xf = m->x + fin, *xc = cl->x + fin;
    memcpy(xL, xf, sizeof(float) * BT * C);
    for (size_t r = 0; r < BT; r++) changed[r] = memcmp(xf + r * C, xc + r * C, sizeof(float) * C) != 0;
    return 0;
}

int al_circuit_delta_run(al_circuit_delta *d, al_model *m, const unsigned char *kept,
                         const al_acts *cl, const al_acts *co, const int *clean, const int *corr,
                         const float *embp, al_circuit_memo *memo, float *xL,
                         unsigned char *changed, al_err *e) {
    const int L = d->L, H = d->H, D = d->D, C = d->C, T = d->T, nb = cl->B;
    if (nb > d->B || cl->T != T || co->B != nb || co->T != T)
        return al_errf(e, "circuit evaluation: runs of %dx%d and %dx%d for a workspace of %dx%d",
                       cl->B, cl->T, co->B, co->T, d->B, T);
    /* the incremental forward runs no hooks: with hooks registered (an
     * intervention) every evaluation is a full forward that runs them */
    if (d->full || m->hooks.n > 0)
        return delta_run_hooks(d, m, kept, cl, co, clean, corr, xL, changed, e);
    if (L >= 3 && memo && memo->zh && (memo->nb < nb || memo->hw != 1 + 3 * (1 + (L - 1) * H)))
        return al_errf(e, "circuit evaluation: a memo made for %d sequences of another workspace "
                          "(this batch has %d)",
                       memo->nb, nb);
    if (L >= 3)
        return delta_run_deep(d, m, kept, cl, co, clean, corr, embp, memo, xL, changed, e);
    const size_t HD = (size_t)H * D, BT = (size_t)nb * T, Q = BT * 3 * HD, Z = BT * HD;
    memset(d->qm, 0, (size_t)L * 3 * H * T + (size_t)L * H * T);
    /* layer-0 channels: embed + pos, and pos is the same in both runs */
    int l0dirty = 0;
    for (int h = 0; h < H; h++)
        for (int ch = 0; ch < 3; ch++) {
            if (kept[al_graph_k_input(H, 0, h, ch, 0)]) continue;
            memset(d->qm + ((size_t)ch * H + h) * T, 1, T);
            size_t o = (size_t)ch * HD + (size_t)h * D;
            copy_rows(d->syn + o, co->qkv + o, BT, D, 3 * HD);
            l0dirty = 1;
        }
    const float *zg0 = NULL; /* the circuit's layer-0 zg (nb, T, H, D) */
    int dz_ready = 0;
    if (L == 2) {
        const float *q1 = cl->qkv + Q; /* layer 1's q/k/v from this run's residual */
        if (l0dirty) {
            /* layer 0 of the circuit first: a patched forward of the clean
             * sequences; forward_delta below leaves m's activations alone */
            al_patch_spec sa = {.src_qkv = d->syn, .qkv_mask = d->qm};
            int rc = al_patch_hooks_add(m, &sa, e) || al_model_forward(m, clean, NULL, nb, T, e);
            al_hook_remove(m, &sa);
            if (rc) return -1;
            zg0 = m->zg, q1 = m->qkv + Q;
        } else zg0 = cl->zg;
        for (int h1 = 0; h1 < H; h1++)
            for (int ch = 0; ch < 3; ch++) {
                int emb = !kept[al_graph_k_input(H, 1, h1, ch, 0)], nr = emb;
                for (int h0 = 0; h0 < H; h0++) nr += !kept[al_graph_k_comp(L, H, h0, 1, h1, ch)];
                if (!nr) continue;
                memset(d->qm + ((size_t)(3 + ch) * H + h1) * T, 1, T);
                size_t o = (size_t)ch * HD + (size_t)h1 * D;
                float *dst = d->syn + Q + o;
                if (nr == 1 + H) { /* every sender removed: the corrupted run's */
                    copy_rows(dst, co->qkv + Q + o, BT, D, 3 * HD);
                    continue;
                }
                copy_rows(dst, q1 + o, BT, D, 3 * HD);
                if (emb)
                    for (size_t r = 0; r < BT; r++)
                        for (int k = 0; k < D; k++)
                            dst[r * 3 * HD + k] -= embp[r * 3 * HD + o + k];
                if (nr == emb) continue;
                if (!dz_ready) {
                    for (size_t i = 0; i < Z; i++) d->dz[i] = zg0[i] - co->zg[i];
                    dz_ready = 1;
                }
                /* dst −= Σ over removed 0.h0 of Δzg_h0 · W_O[0,h0] W_c[1,h1] */
                for (int h0 = 0; h0 < H; h0++) {
                    float *blk = d->stack + (size_t)h0 * D * D;
                    if (kept[al_graph_k_comp(L, H, h0, 1, h1, ch)]) memset(blk, 0, sizeof(float) * D * D);
                    else
                        memcpy(blk, d->wcomp + (((size_t)h0 * H + h1) * 3 + ch) * D * D,
                               sizeof(float) * D * D);
                }
                sub_comp(dst, d->dz, d->stack, (int)BT, H, D);
            }
    }
    /* last-layer heads: read by the logits only, so a removed logits edge
     * is the head's z taken from the corrupted run (a head whose z a hook
     * set in full, zfixed, has the same zg in both runs: nothing to do) */
    const int ll = L - 1;
    for (int h = 0; h < H; h++) {
        if (kept[al_graph_k_out(L, H, 2 + ll * H + h)] || co->zfixed[ll * H + h]) continue;
        memset(d->zm + ((size_t)ll * H + h) * T, 1, T);
        float *dst = d->zsrc + (size_t)ll * Z + (size_t)h * D;
        for (size_t r = 0; r < BT; r++)
            memcpy(dst + r * HD, co->z + (size_t)ll * Z + r * HD + (size_t)h * D,
                   sizeof(float) * D);
    }
    al_patch_spec sp = {NULL, d->zsrc, NULL, d->zm, d->syn, NULL, d->qm, NULL};
    if (al_model_forward_delta(m, cl, &sp, xL, d->dirty, &d->ws, e)) return -1;
    for (size_t r = 0; r < BT; r++) changed[r] = d->dirty[r % T];
    /* the logits' other senders: embed and (2 layers) the layer-0 heads */
    int all = !kept[al_graph_k_out(L, H, 0)], any0 = 0;
    for (int j = 2; j < 2 + L * H; j++) all &= !kept[al_graph_k_out(L, H, j)];
    for (int h = 0; L == 2 && h < H; h++) any0 |= !kept[al_graph_k_out(L, H, 2 + h)];
    if (all) { /* the corrupted run's final residual, exactly */
        memcpy(xL, co->x + (size_t)L * BT * C, sizeof(float) * BT * C);
        memset(changed, 1, BT);
    } else {
        if (!kept[al_graph_k_out(L, H, 0)]) {
            const int *ic = clean, *ir = corr;
            for (size_t r = 0; r < BT; r++) {
                if (ic[r] == ir[r]) continue;
                const float *a = m->p[AL_P_WE] + (size_t)ic[r] * C;
                const float *z = m->p[AL_P_WE] + (size_t)ir[r] * C;
                float *x = xL + r * C;
                for (int k = 0; k < C; k++) x[k] -= a[k] - z[k];
                changed[r] = 1;
            }
        }
        if (any0) {
            if (!dz_ready)
                for (size_t i = 0; i < Z; i++) d->dz[i] = zg0[i] - co->zg[i];
            for (size_t r = 0; r < BT; r++)
                for (int h = 0; h < H; h++) {
                    float *o = d->dzm + r * HD + (size_t)h * D;
                    if (kept[al_graph_k_out(L, H, 2 + h)]) memset(o, 0, sizeof(float) * D);
                    else memcpy(o, d->dz + r * HD + (size_t)h * D, sizeof(float) * D);
                }
            /* fix (BT, C) = Δzg of the removed heads · W_O[0] (H·D, C) */
            al_sgemm(false, false, (int)BT, C, (int)HD, 1.0f,
                        d->dzm, (int)HD, al_head_wo(m, 0, 0), C, 0.0f, d->fix, C);
            for (size_t r = 0; r < BT; r++) {
                const float *f = d->fix + r * C;
                float *x = xL + r * C;
                int nz = 0;
                for (int k = 0; k < C; k++) nz |= f[k] != 0.0f;
                if (!nz) continue;
                for (int k = 0; k < C; k++) x[k] -= f[k];
                changed[r] = 1;
            }
        }
    }
    return 0;
}

/* ------------------------------------------- incremental, 3+ layers */

/* o = a − b over n floats, vectorized and, when large, split over the
 * threads (each element is exact whatever the split). */
static void sub_f(float *restrict o, const float *restrict a, const float *restrict b, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= ((size_t)1 << 16))
    for (size_t i = 0; i < n; i++) o[i] = a[i] - b[i];
}

/* Channel (l, h, ch)'s removed senders (pos never counts: it carries the
 * same value in both runs): 0 none, 1 some, 2 every one. */
static int chan_state(const unsigned char *kept, int L, int H, int l, int h, int ch) {
    int n = !kept[al_graph_k_input(H, l, h, ch, 0)];
    for (int s0 = 0; s0 < l * H; s0++) n += !kept[al_graph_k_comp(L, H, s0, l, h, ch)];
    return n == 0 ? 0 : n == 1 + l * H ? 2 : 1;
}

typedef struct deep {
    al_circuit_delta *d;
    const unsigned char *kept;
    const al_acts *cl, *co;
    const float *embp;
    const al_model *m;
    size_t BT, Q, Z, X;
    unsigned ready; /* bit l0: d->dz block l0 holds the circuit's Δzg of layer l0 */
    int lo;         /* l_first: layers below it are the clean run's */
    al_circuit_memo *memo; /* NULL: nothing is reused */
} deep;

/* Δzg of layer l0 (circuit − corrupted). A layer before every changed
 * one is the clean run's; a recomputed layer set its block itself. */
static const float *deep_dz(deep *g, int l0) {
    float *dz = g->d->dz + (size_t)l0 * g->Z;
    if (!(g->ready & 1u << l0)) {
        const float *a = g->cl->zg + (size_t)l0 * g->Z, *b = g->co->zg + (size_t)l0 * g->Z;
        sub_f(dz, a, b, g->Z);
        g->ready |= 1u << l0;
    }
    return dz;
}

/* dst (BT rows of D, stride ldd) = beta·dst + sign · Σ over the heads
 * h0 of layer l0 whose edge into channel (l, h, ch) has kept bit want of
 * Δzg_{l0,h0} · W_O[l0,h0] W_c[l,h]: one sgemm, the chosen heads' Δzg
 * columns and products gathered (into d->dzm and d->stack). Returns 1
 * when some head was chosen (else dst is untouched). */
static int sender_terms(deep *g, int l0, int l, int h, int ch, unsigned char want, float sign,
                        int beta, float *dst, size_t ldd) {
    al_circuit_delta *d = g->d;
    const int L = d->L, H = d->H, D = d->D;
    const size_t HD = (size_t)H * D, BT = g->BT;
    int *sel = d->sel, cnt = 0;
    for (int h0 = 0; h0 < H; h0++)
        if (g->kept[al_graph_k_comp(L, H, l0 * H + h0, l, h, ch)] == want) sel[cnt++] = h0;
    if (!cnt) return 0;
    const float *dz = deep_dz(g, l0), *a = dz;
    size_t lda = HD;
    for (int i = 0; i < cnt; i++) {
        int k = al_graph_k_comp(L, H, l0 * H + sel[i], l, h, ch);
        memcpy(d->stack + (size_t)i * D * D, d->wcomp + (size_t)(k - 6 * L * H) * D * D,
               sizeof(float) * D * D);
    }
    if (cnt < H) { /* the chosen heads' Δzg columns, side by side */
        for (size_t r = 0; r < BT; r++)
            for (int i = 0; i < cnt; i++)
                memcpy(d->dzm + r * cnt * D + (size_t)i * D, dz + r * HD + (size_t)sel[i] * D,
                       sizeof(float) * D);
        a = d->dzm, lda = (size_t)cnt * D;
    }
    al_sgemm(false, false, (int)BT, D, cnt * D, sign, a, (int)lda, d->stack, D,
             beta ? 1.0f : 0.0f, dst, (int)ldd);
    return 1;
}

/* A channel's input is the sum over its senders of (kept ? the circuit's
 * value : the corrupted run's), so it is either the circuit's own channel
 * minus the removed senders' differences or the corrupted run's channel
 * plus the kept senders' differences: whichever has fewer senders to
 * take through their D×D products (every one removed: the corrupted
 * run's exactly). 1 for the corrupted run's; *nk gets the kept count. */
static int chan_from_co(const deep *g, int l, int h, int ch, int *nk) {
    const int L = g->d->L, H = g->d->H;
    int n = g->kept[al_graph_k_input(H, l, h, ch, 0)];
    for (int s0 = 0; s0 < l * H; s0++) n += g->kept[al_graph_k_comp(L, H, s0, l, h, ch)];
    *nk = n;
    return n < 1 + l * H - n;
}

/* dst (BT rows of D, stride ldd) = channel (l, h, ch) of the circuit,
 * from base (stride ldb), the channel as the circuit's own residual
 * gives it (chan_from_co says which form). The part from embed and the
 * layers below l_first comes from, or goes to, g->memo. */
static void deep_channel(deep *g, int l, int h, int ch, const float *base, size_t ldb,
                         float *dst, size_t ldd) {
    al_circuit_delta *d = g->d;
    const int L = d->L, H = d->H, D = d->D;
    const size_t HD = (size_t)H * D, o = (size_t)ch * HD + (size_t)h * D, BT = g->BT;
    int nk;
    const int from_co = chan_from_co(g, l, h, ch, &nk);
    const float *src = from_co ? g->co->qkv + (size_t)l * g->Q + o : base;
    const size_t lds = from_co ? 3 * HD : ldb;
    if (src != dst)
        for (size_t r = 0; r < BT; r++) memcpy(dst + r * ldd, src + r * lds, sizeof(float) * D);
    if (!nk) return;
    /* from_co: add the kept senders' (circuit − corrupted); else subtract the removed ones' */
    const float sign = from_co ? 1.0f : -1.0f;
    const unsigned char want = from_co ? 1 : 0;
    const int lo = g->lo < l ? g->lo : l, emb = l >= 1 && g->kept[al_graph_k_input(H, l, h, ch, 0)] == want;
    /* embed and the senders of layers < lo are the clean run's in every
     * evaluation with this l_first: their sum is formed apart (so that a
     * stored one gives the same bits) and kept in the memo */
    int nlow = emb;
    for (int s0 = 0; s0 < lo * H; s0++) nlow += g->kept[al_graph_k_comp(L, H, s0, l, h, ch)] == want;
    if (nlow) {
        float *low = d->lowt;
        size_t ldl = D;
        unsigned char *cur = d->kc, *key = NULL; /* lw bytes */
        const int nkey = 4 + lo * H;
        int hit = 0;
        if (lo > 0 && g->memo && g->memo->low && nkey <= g->memo->lw) {
            al_circuit_memo *mm = g->memo;
            key = mm->lkey + (((size_t)(l - 1) * 3 + ch) * H + h) * mm->lw;
            cur[0] = 1, cur[1] = (unsigned char)lo, cur[2] = (unsigned char)from_co;
            cur[3] = g->kept[al_graph_k_input(H, l, h, ch, 0)];
            for (int s0 = 0; s0 < lo * H; s0++) cur[4 + s0] = g->kept[al_graph_k_comp(L, H, s0, l, h, ch)];
            low = mm->low + (size_t)(l - 1) * g->Q + o, ldl = 3 * HD;
            hit = !memcmp(key, cur, (size_t)nkey);
            mm->hits += hit;
        }
        if (!hit) {
            int started = 0;
            if (emb) {
                const float *ep = g->embp + (size_t)(l - 1) * g->Q + o; /* clean − corrupted */
                for (size_t r = 0; r < BT; r++)
#pragma omp simd
                    for (int k = 0; k < D; k++) low[r * ldl + k] = sign * ep[r * 3 * HD + k];
                started = 1;
            }
            for (int l0 = 0; l0 < lo; l0++)
                started |= sender_terms(g, l0, l, h, ch, want, sign, started, low, ldl);
            if (key) memcpy(key, cur, (size_t)nkey);
        }
        for (size_t r = 0; r < BT; r++)
#pragma omp simd
            for (int k = 0; k < D; k++) dst[r * ldd + k] += low[r * ldl + k];
    }
    for (int l0 = lo; l0 < l; l0++) sender_terms(g, l0, l, h, ch, want, sign, 1, dst, ldd);
}

/* qkv (BT, 3HD) = layer l's q|k|v from the circuit's residual x (NULL:
 * the clean run's, unchanged): the clean run's plus (x − clean x) · W_qkv,
 * so shortformer positions (the same in both) need no term of their own. */
static void deep_qkv(deep *g, int l, const float *x, float *qkv) {
    al_circuit_delta *d = g->d;
    const size_t C = d->C, HD3 = 3 * (size_t)d->H * d->D;
    model_copy(qkv, g->cl->qkv + (size_t)l * g->Q, g->Q);
    if (!x) return;
    const float *xc = g->cl->x + (size_t)l * g->X;
    sub_f(d->dxb, x, xc, g->X);
    al_sgemm(false, false, (int)g->BT, (int)HD3, (int)C, 1.0f,
                d->dxb, (int)C, d->wqkv + (size_t)l * C * HD3, (int)HD3, 1.0f, qkv, (int)HD3);
}

/* Layer l of the circuit in full, from the circuit's residual x entering
 * it (not the clean run's) into xn: q|k|v from x, the channels with
 * removed senders corrected, attention, gates, x + zg·W_O; the gated z's
 * stay in d->zb. In the last layer a head whose logits edge is removed
 * outputs the corrupted run's zg (the logits are its only receiver).
 * Returns 0, or -1 when attention's scratch could not be allocated. */
static int deep_layer(deep *g, int l, const float *x, float *xn) {
    al_circuit_delta *d = g->d;
    const al_model *m = g->m;
    const int L = d->L, H = d->H, D = d->D, C = d->C, T = d->T, nb = g->cl->B;
    const size_t HD = (size_t)H * D, BT = g->BT;
    deep_qkv(g, l, x, d->qkv);
    for (int h = 0; h < H; h++)
        for (int ch = 0; ch < 3; ch++)
            if (chan_state(g->kept, L, H, l, h, ch)) {
                float *q = d->qkv + (size_t)ch * HD + (size_t)h * D;
                deep_channel(g, l, h, ch, q, 3 * HD, q, 3 * HD);
            }
    if (attention_forward(d->zb, d->att, d->qkv, nb, T, H, D, 1)) return -1;
    for (int h = 0; h < H; h++) { /* zb becomes the gated z */
        const float gt = m->gates[l * H + h];
        const float *keep = g->cl->zfixed[l * H + h] ? g->cl->zg : NULL;
        if (!keep && l == L - 1 && !g->kept[al_graph_k_out(L, H, 2 + l * H + h)])
            keep = g->co->zg;
        for (size_t r = 0; r < BT; r++) {
            float *z = d->zb + r * HD + (size_t)h * D;
            if (keep) memcpy(z, keep + (size_t)l * g->Z + r * HD + (size_t)h * D, sizeof(float) * D);
            else model_gate_row(z, z, gt, D);
        }
    }
    model_copy(xn, x, g->X);
    al_sgemm(false, false, (int)BT, C, (int)HD, 1.0f, d->zb, (int)HD,
             m->p[AL_P_WO] + (size_t)l * HD * C, C, 1.0f, xn, C);
    return 0;
}

/* Layer l of the circuit into xn when the residual entering it is the
 * clean run's (l = l_first, or the last layer when no channel edge is
 * removed): only heads with a removed edge into a channel, or (last
 * layer) into the logits, change, so only their attention is run, one
 * head at a time, and xn is the clean run's next residual plus their
 * Δzg · W_O, head by head. A head whose channels' senders are as in an
 * earlier evaluation takes its gated z from the memo. d->zb gets the
 * layer's gated z's. Returns 0, or -1 as deep_layer. */
static int deep_partial(deep *g, int l, float *xn) {
    al_circuit_delta *d = g->d;
    const al_model *m = g->m;
    const al_acts *cl = g->cl;
    const int L = d->L, H = d->H, D = d->D, C = d->C, T = d->T, nb = cl->B;
    const size_t HD = (size_t)H * D, BT = g->BT;
    al_circuit_memo *mm = g->memo && g->memo->zh ? g->memo : NULL;
    model_copy(d->zb, cl->zg + (size_t)l * g->Z, g->Z);
    model_copy(xn, cl->x + (size_t)(l + 1) * g->X, g->X);
    float *qh = d->qh, *zh = qh + BT * 3 * D, *dzh = zh + BT * D;
    unsigned char *cur = d->kh; /* hw bytes */
    const int nkey = 1 + 3 * (1 + l * H);
    for (int h = 0; h < H; h++) {
        if (cl->zfixed[l * H + h]) continue; /* its output does not depend on its channels */
        const float gt = m->gates[l * H + h];
        const float *src = NULL; /* the head's gated z, stride sld */
        size_t sld = D;
        if (l == L - 1 && !g->kept[al_graph_k_out(L, H, 2 + l * H + h)]) {
            src = g->co->zg + (size_t)l * g->Z + (size_t)h * D, sld = HD;
        } else {
            int any = 0;
            for (int ch = 0; ch < 3; ch++) any |= chan_state(g->kept, L, H, l, h, ch) != 0;
            if (!any) continue;
            unsigned char *key = NULL;
            int hit = 0;
            if (mm && nkey <= mm->hw) {
                key = mm->hkey + ((size_t)l * H + h) * mm->hw;
                int n = 0;
                cur[n++] = 1;
                for (int ch = 0; ch < 3; ch++) {
                    cur[n++] = g->kept[al_graph_k_input(H, l, h, ch, 0)];
                    for (int s0 = 0; s0 < l * H; s0++) cur[n++] = g->kept[al_graph_k_comp(L, H, s0, l, h, ch)];
                }
                hit = !memcmp(key, cur, (size_t)nkey);
                mm->hits += hit;
            }
            float *out = key ? mm->zh + (size_t)l * g->Z + (size_t)h * D : zh;
            const size_t old = key ? HD : (size_t)D;
            if (!hit) {
                for (int ch = 0; ch < 3; ch++) {
                    const float *b0 = cl->qkv + (size_t)l * g->Q + (size_t)ch * HD + (size_t)h * D;
                    if (chan_state(g->kept, L, H, l, h, ch))
                        deep_channel(g, l, h, ch, b0, 3 * HD, qh + (size_t)ch * D, 3 * (size_t)D);
                    else
                        for (size_t r = 0; r < BT; r++)
                            memcpy(qh + r * 3 * D + (size_t)ch * D, b0 + r * 3 * HD, sizeof(float) * D);
                }
                if (attention_forward(zh, d->att, qh, nb, T, 1, D, 1)) return -1;
                for (size_t r = 0; r < BT; r++) model_gate_row(out + r * old, zh + r * D, gt, D);
                if (key) memcpy(key, cur, (size_t)nkey);
            }
            src = out, sld = old;
        }
        for (size_t r = 0; r < BT; r++) {
            float *z = d->zb + r * HD + (size_t)h * D;
            const float *zc = cl->zg + (size_t)l * g->Z + r * HD + (size_t)h * D;
            memcpy(z, src + r * sld, sizeof(float) * D);
#pragma omp simd
            for (int k = 0; k < D; k++) dzh[r * D + k] = z[k] - zc[k];
        }
        al_sgemm(false, false, (int)BT, C, D, 1.0f, dzh, D, al_head_wo(m, l, h), C, 1.0f, xn, C);
    }
    return 0;
}

/* A circuit of a model of 3 or more layers. Let l_first be the first
 * layer with a removed edge into a channel. Layers before it are the
 * clean run's; layer l_first changes only in the heads with such an edge
 * (deep_partial); every later layer may change in every row, so each is
 * recomputed in full (deep_layer: q|k|v from the circuit's residual, the
 * channels corrected, attention, gates, the next residual), keeping each
 * one's Δzg for the channels and logits edges it sends to. With no
 * channel edge removed only the last layer's heads with removed logits
 * edges change. Removed embed and earlier heads' logits edges are then
 * subtracted from the final residual. ACDC's sweep, receivers from the
 * logits back, changes one channel per evaluation: what depends only on
 * the layers before l_first (a head of layer l_first, the part of a
 * later channel from those layers, the removed logits edges of their
 * heads) is kept in the memo across evaluations. Heads whose z a hook set
 * in full (zfixed) keep the clean run's output; other hooks are not run.
 * Rows of xL equal to the clean run's are not marked changed. */
static int delta_run_deep(al_circuit_delta *d, al_model *m, const unsigned char *kept,
                          const al_acts *cl, const al_acts *co, const int *clean, const int *corr,
                          const float *embp, al_circuit_memo *memo, float *xL,
                          unsigned char *changed, al_err *e) {
    const int L = d->L, H = d->H, D = d->D, C = d->C, nb = cl->B;
    const size_t HD = (size_t)H * D, BT = (size_t)nb * d->T;
    deep g = {d, kept, cl, co, embp, m, BT, BT * 3 * HD, BT * HD, BT * C, 0, L, memo};
    int l_first = L;
    for (int l = 0; l < L && l_first == L; l++)
        for (int h = 0; h < H && l_first == L; h++)
            for (int ch = 0; ch < 3; ch++)
                if (chan_state(kept, L, H, l, h, ch)) {
                    l_first = l;
                    break;
                }
    g.lo = l_first;
    const float *x = NULL;
    for (int l = l_first < L ? l_first : L - 1; l < L; l++) {
        float *xn = l == L - 1 ? xL : d->xs + (size_t)(l + 1) * g.X;
        if (!x ? deep_partial(&g, l, xn) : deep_layer(&g, l, x, xn))
            return al_errf(e, "out of memory (attention scratch)");
        if (l < L - 1) {
            float *dz = d->dz + (size_t)l * g.Z;
            const float *zc = co->zg + (size_t)l * g.Z;
            sub_f(dz, d->zb, zc, g.Z);
            g.ready |= 1u << l;
        }
        x = xn;
    }
    const float *xc = cl->x + (size_t)L * g.X;
#pragma omp parallel for schedule(static) if (BT >= 256)
    for (size_t r = 0; r < BT; r++) changed[r] = memcmp(xL + r * C, xc + r * C, sizeof(float) * C) != 0;
    /* the logits' other senders: embed and the heads before the last layer */
    int all = !kept[al_graph_k_out(L, H, 0)];
    for (int j = 2; j < 2 + L * H; j++) all &= !kept[al_graph_k_out(L, H, j)];
    if (all) { /* the corrupted run's final residual, exactly */
        memcpy(xL, co->x + (size_t)L * g.X, sizeof(float) * g.X);
        memset(changed, 1, BT);
        return 0;
    }
    if (!kept[al_graph_k_out(L, H, 0)])
        for (size_t r = 0; r < BT; r++) {
            if (clean[r] == corr[r]) continue;
            const float *a = m->p[AL_P_WE] + (size_t)clean[r] * C;
            const float *z = m->p[AL_P_WE] + (size_t)corr[r] * C;
            float *xr = xL + r * C;
#pragma omp simd
            for (int k = 0; k < C; k++) xr[k] -= a[k] - z[k];
            changed[r] = 1;
        }
    /* fix (BT, C) = Σ over layers of the removed heads' Δzg · W_O[l0].
     * The layers below l_first are the clean run's, so their part is the
     * same in every evaluation that removes the same logits edges (after
     * ACDC's first sweep, all of them): the memo keeps it */
    const int lc = l_first < L - 1 ? l_first : L - 1;
    const int fkn = 2 + lc * H;
    unsigned char *fk = d->kf; /* lw bytes: 2 + (L−1)·H needed */
    int nfix = 0, l0 = 0, store = 0;
    const float *fix = d->fix;
    if (memo && memo->fix && lc > 0) {
        fk[0] = 1, fk[1] = (unsigned char)lc;
        for (int j = 0; j < lc * H; j++) fk[2 + j] = kept[al_graph_k_out(L, H, 2 + j)];
        if (!memcmp(memo->fkey, fk, (size_t)fkn)) {
            nfix = memo->fn, l0 = lc, memo->hits++;
            if (nfix && lc == L - 1) fix = memo->fix;
            else if (nfix) memcpy(d->fix, memo->fix, sizeof(float) * g.X);
        } else
            store = 1;
    }
    for (;; l0++) {
        if (store && l0 == lc) {
            if (nfix) memcpy(memo->fix, d->fix, sizeof(float) * g.X);
            memo->fn = nfix;
            memcpy(memo->fkey, fk, (size_t)fkn);
            store = 0;
        }
        if (l0 >= L - 1) break;
        int any = 0;
        for (int h = 0; h < H; h++) any |= !kept[al_graph_k_out(L, H, 2 + l0 * H + h)];
        if (!any) continue;
        const float *dz = deep_dz(&g, l0);
        for (size_t r = 0; r < BT; r++)
            for (int h = 0; h < H; h++) {
                float *o = d->dzm + r * HD + (size_t)h * D;
                if (kept[al_graph_k_out(L, H, 2 + l0 * H + h)]) memset(o, 0, sizeof(float) * D);
                else memcpy(o, dz + r * HD + (size_t)h * D, sizeof(float) * D);
            }
        al_sgemm(false, false, (int)BT, C, (int)HD, 1.0f, d->dzm,
                    (int)HD, al_head_wo(m, l0, 0), C, nfix ? 1.0f : 0.0f, d->fix, C);
        nfix++;
    }
    for (size_t r = 0; nfix && r < BT; r++) {
        const float *f = fix + r * C;
        float *xr = xL + r * C;
        int nz = 0;
#pragma omp simd reduction(|:nz)
        for (int k = 0; k < C; k++) nz |= f[k] != 0.0f;
        if (!nz) continue;
#pragma omp simd
        for (int k = 0; k < C; k++) xr[k] -= f[k];
        changed[r] = 1;
    }
    return 0;
}
