/* circuit_hooks.c -- running a circuit: hooks (hooks.h) that make a forward
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
 * Discovery's incremental evaluation of the same edge removal is
 * circuit.c: it shares the composition products (circuit_comp_block),
 * runs these hooks instead when the model has hooks of its own
 * registered, and has them as its oracle in the tests. */
#include "attnlab/graph.h"

#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/layers.h"
#include "circuit_internal.h"
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
    for (size_t r = 0; r < BT; r++)
        memcpy(out + r * C, m->p[AL_P_WE] + (size_t)tok[r] * C, sizeof(float) * C);
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

const float *circuit_head_w(const al_model *m, int l, int h, int ch) {
    return ch == 0 ? al_head_wq(m, l, h) : ch == 1 ? al_head_wk(m, l, h) : al_head_wv(m, l, h);
}

/* blk (D, D) = W_O[l0,h0] · W_c[l1,h1]: what a composition edge l0.h0
 * → l1.h1.c multiplies its sender's Δzg by (both paths use this
 * product). */
void circuit_comp_block(const al_model *m, int l0, int h0, int l1, int h1, int ch, float *blk) {
    const int C = m->cfg.d_model, D = m->cfg.d_head;
    al_sgemm(false, false, D, D, C, 1.0f, al_head_wo(m, l0, h0), C, circuit_head_w(m, l1, h1, ch),
             D, 0.0f, blk, D);
}

/* dst (BT rows of D, stride 3·H·D) −= dz (BT, H·D) · stack (H·D, D): a
 * channel minus its removed senders' differences from one layer. */
static void sub_comp(float *dst, const float *dz, const float *stack, int BT, int H, int D) {
    al_sgemm(false, false, BT, D, H * D, -1.0f, dz, H * D, stack, D, 1.0f, dst, 3 * H * D);
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
                al_sgemm(false, false, BT, D, C, -1.0f, s->de, C, circuit_head_w(m, l, h, ch), D,
                         1.0f, dst, (int)ld);
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
                if (!removed[h0])
                    memset(blk, 0, sizeof(float) * D * D);
                else
                    circuit_comp_block(m, l0, h0, l, h, ch, blk);
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
        for (int h = 0; h < H; h++)
            any |= removed[h] = !sp->kept[al_graph_k_out(L, H, 2 + l * H + h)];
        if (!any) continue;
        make_dz(x, s, l, removed, s->dz);
        al_sgemm(false, false, (int)BT, C, HD, -1.0f, s->dz, HD, m->p[AL_P_WO] + (size_t)l * HD * C,
                 C, 1.0f, xL, C);
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
