/* circuit.c -- running a circuit: a forward pass in which only the kept
 * edges of the head graph carry what their sender computes in this run
 * (contract in model.h, al_circuit_spec; the graph in graph.h).
 *
 * The model is linear between the embeddings and each head's q/k/v (no
 * LayerNorm, no biases), so a receiver's input with some edges removed
 * is its input in this run minus, over the removed senders s, (value_s −
 * fill_s). The forward therefore runs as usual and subtracts: for a
 * head's channel c, Δ · W_c[l,h] where Δ is the removed embedding rows'
 * difference (BT, C) and, for layer-1 heads, Σ over removed 0.h0 of
 * Δzg_h0 · W_O[0,h0] W_c[1,h] (the product precomputed per receiver, D×D
 * per sender, so the correction is D-wide, not C-wide); for the logits,
 * the removed senders' differences in the residual. Nothing is touched
 * for a receiver with every edge kept, so the full circuit is the plain
 * forward bit for bit.
 *
 * Scratch (m->cws, grown on demand), for the forward's (B, T):
 *   fe    (BT, C)      fill embeddings W_E[fill token] (not for mean)
 *   fz    (L, BT, HD)  fill gated z's (not for mean)
 *   de    (BT, C)      W_E[token] − fill embedding
 *   dz    (BT, HD)     zg − fill zg of one layer
 *   stack (HD, D)      Σ-weights of one layer-1 receiver
 *   ft    (BT + H)     the resampled tokens (ints), later removed-head flags */
#include "attnlab/model.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/graph.h"
#include "model_internal.h"

typedef struct cscr {
    float *fe, *fz, *de, *dz, *stack;
    int *ft;
} cscr;

static size_t scratch_floats(const al_config *c, size_t BT) {
    size_t L = c->n_layers, C = c->d_model, HD = (size_t)c->n_heads * c->d_head;
    return BT * C + L * BT * HD + BT * C + BT * HD + HD * c->d_head + BT + (size_t)c->n_heads;
}

static void views(al_model *m, cscr *s) {
    const al_config *c = &m->cfg;
    size_t BT = (size_t)m->B * m->T, L = c->n_layers, C = c->d_model;
    size_t HD = (size_t)c->n_heads * c->d_head;
    s->fe = m->cws;
    s->fz = s->fe + BT * C;
    s->de = s->fz + L * BT * HD;
    s->dz = s->de + BT * C;
    s->stack = s->dz + BT * HD;
    s->ft = (int *)(s->stack + HD * c->d_head);
}

/* W_E rows of tokens (BT) into out (BT, C). */
static void embed_rows(const al_model *m, const int *tok, size_t BT, float *out) {
    const size_t C = m->cfg.d_model;
    for (size_t r = 0; r < BT; r++) memcpy(out + r * C, m->p[AL_P_WE] + (size_t)tok[r] * C, sizeof(float) * C);
}

int circuit_begin(al_model *m, const int *inputs, int B, int T, al_err *e) {
    const al_circuit_spec *sp = m->circuit;
    const al_config *c = &m->cfg;
    if (c->n_layers != 1 && c->n_layers != 2)
        return al_errf(e, "a circuit runs on 1- and 2-layer models (this one has %d layers)",
                       c->n_layers);
    if (m->patch) return al_errf(e, "a circuit and a patch spec cannot be run together");
    if (!sp->kept) return al_errf(e, "circuit spec without its edges");
    const size_t BT = (size_t)B * T, V = c->d_vocab;
    switch (sp->fill) {
    case AL_FILL_CORRUPTED:
        if (!sp->corr) return al_errf(e, "a corrupted fill needs corrupted tokens");
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
        if (!sp->mean_x0 || !sp->mean_zg) return al_errf(e, "a mean fill needs its means");
        if (sp->mean_T < T)
            return al_errf(e, "the circuit's mean fill covers %d positions, the batch has %d",
                           sp->mean_T, T);
        break;
    default:
        return al_errf(e, "unknown circuit fill %d", (int)sp->fill);
    }
    size_t need = scratch_floats(c, BT);
    if (need > m->cws_cap) {
        float *w = al_malloc(need, sizeof(float), e);
        if (!w) return al_err_prefix(e, "circuit run scratch");
        free(m->cws);
        m->cws = w, m->cws_cap = need;
    }
    cscr v, *s = &v;
    views(m, s);
    m->cws_de = 0;
    if (sp->fill == AL_FILL_MEAN) return 0;
    const int *fill = sp->corr;
    if (sp->fill == AL_FILL_RESAMPLE) { /* row b runs sequence (b + 1) mod B */
        for (int b = 0; b < B; b++)
            memcpy(s->ft + (size_t)b * T, inputs + (size_t)((b + 1) % B) * T, sizeof(int) * T);
        fill = s->ft;
    }
    /* the fill run: the same model (gates, replacements) with no circuit */
    const al_circuit_spec *keep = m->circuit;
    m->circuit = NULL;
    model_forward_body(m, fill, 0);
    m->circuit = keep;
    embed_rows(m, fill, BT, s->fe);
    memcpy(s->fz, m->zg, sizeof(float) * (size_t)c->n_layers * BT * c->n_heads * c->d_head);
    return 0;
}

/* de = W_E[token] − fill embedding, once per forward. */
static void need_de(al_model *m, cscr *s) {
    if (m->cws_de) return;
    const al_circuit_spec *sp = m->circuit;
    const size_t C = m->cfg.d_model, T = m->T, BT = (size_t)m->B * T;
    embed_rows(m, m->inputs, BT, s->de);
    for (size_t r = 0; r < BT; r++) {
        const float *f = sp->fill == AL_FILL_MEAN ? sp->mean_x0 + (r % T) * C : s->fe + r * C;
        float *d = s->de + r * C;
        for (size_t k = 0; k < C; k++) d[k] -= f[k];
    }
    m->cws_de = 1;
}

/* dz = layer l's zg − its fill, with the heads not in `removed` (H
 * flags; NULL: all) zeroed. */
static void make_dz(al_model *m, cscr *s, int l, const unsigned char *removed) {
    const al_circuit_spec *sp = m->circuit;
    const al_config *c = &m->cfg;
    const size_t H = c->n_heads, D = c->d_head, HD = H * D, T = m->T, BT = (size_t)m->B * T;
    const float *zg = m->zg + (size_t)l * BT * HD;
    for (size_t r = 0; r < BT; r++)
        for (size_t h = 0; h < H; h++) {
            float *d = s->dz + r * HD + h * D;
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

void circuit_qkv(al_model *m, int l, float *qkv) {
    const al_circuit_spec *sp = m->circuit;
    cscr v, *s = &v;
    views(m, s);
    const al_config *c = &m->cfg;
    const int L = c->n_layers, H = c->n_heads, D = c->d_head, C = c->d_model, HD = H * D;
    const int BT = m->B * m->T;
    int dz_full = 0; /* s->dz holds layer 0's full difference */
    for (int h = 0; h < H; h++)
        for (int ch = 0; ch < 3; ch++) {
            int emb = !sp->kept[al_graph_k_input(H, l, h, ch, 0)], nh = 0;
            for (int h0 = 0; l == 1 && h0 < H; h0++)
                nh += !sp->kept[al_graph_k_comp(L, H, h0, h, ch)];
            if (!emb && !nh) continue;
            float *dst = qkv + (size_t)ch * HD + (size_t)h * D;
            const float *w = head_w(m, l, h, ch);
            if (emb) {
                need_de(m, s);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BT, D, C, -1.0f, s->de, C,
                            w, D, 1.0f, dst, 3 * HD);
            }
            if (!nh) continue;
            if (!dz_full) {
                make_dz(m, s, 0, NULL);
                dz_full = 1;
            }
            /* stack (HD, D): W_O[0,h0] · W_c[1,h] for removed h0, else 0 */
            for (int h0 = 0; h0 < H; h0++) {
                float *blk = s->stack + (size_t)h0 * D * D;
                if (sp->kept[al_graph_k_comp(L, H, h0, h, ch)]) memset(blk, 0, sizeof(float) * D * D);
                else
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, D, D, C, 1.0f,
                                al_head_wo(m, 0, h0), C, w, D, 0.0f, blk, D);
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BT, D, HD, -1.0f, s->dz, HD,
                        s->stack, D, 1.0f, dst, 3 * HD);
        }
}

void circuit_out(al_model *m, float *xL) {
    const al_circuit_spec *sp = m->circuit;
    cscr v, *s = &v;
    views(m, s);
    const al_config *c = &m->cfg;
    const int L = c->n_layers, H = c->n_heads, D = c->d_head, C = c->d_model, HD = H * D;
    const size_t BT = (size_t)m->B * m->T;
    if (!sp->kept[al_graph_k_out(L, H, 0)]) {
        need_de(m, s);
        for (size_t i = 0; i < BT * C; i++) xL[i] -= s->de[i];
    }
    /* removed heads' flags: in the fill-token scratch, free by now */
    unsigned char *removed = (unsigned char *)s->ft;
    for (int l = 0; l < L; l++) {
        int any = 0;
        for (int h = 0; h < H; h++) any |= removed[h] = !sp->kept[al_graph_k_out(L, H, 2 + l * H + h)];
        if (!any) continue;
        make_dz(m, s, l, removed);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)BT, C, HD, -1.0f, s->dz, HD,
                    m->p[AL_P_WO] + (size_t)l * HD * C, C, 1.0f, xL, C);
    }
}
