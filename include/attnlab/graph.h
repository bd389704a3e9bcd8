/* graph.h -- the head graph of an attention-only model of any depth.
 * layer: engine
 *
 * Which node sends into which, and an index per edge. Circuit discovery
 * (discover.h) removes edges of it; the engine runs a model with only
 * some of them (al_circuit_spec below); circuit files (circuit_file.h)
 * name them.
 *
 * The graph. Nodes: the token embedding, the positional embedding, each
 * head's q, k and v inputs and its output, the logits. Edges, index k:
 *   input edges     sender embed (s = 0) or pos (s = 1) into head (l, h)'s
 *                   channel c (q 0, k 1, v 2):
 *                     k = ((l·H + h)·3 + c)·2 + s           [0, 6·L·H)
 *   composition     head l0.h0 of an earlier layer (l0 < l1) into head
 *   edges             l1.h1's channel c; with s = l0·H + h0 (the sender
 *                     head's index over all layers), by receiver layer:
 *                     k = 6·L·H + 3·H²·l1(l1−1)/2 + (s·H + h1)·3 + c
 *                     [.., + 3·H²·L(L−1)/2)
 *   output edges    embed, pos, then each head l.h into the logits:
 *                     k = 6·L·H + 3·H²·L(L−1)/2 + j, j = 0 embed, 1 pos,
 *                     2 + l·H + h
 * n_edges = 6·L·H + 3·H²·L(L−1)/2 + 2 + L·H (a 2-layer 8-head model:
 * 96 + 192 + 18 = 306, a 4-layer one 192 + 1152 + 34 = 1378; for 1 and 2
 * layers the indices are those of the graph's first version, which
 * covered only those depths, so stored edge indices keep their meaning;
 * in a 2-layer model the 49 pos edges carry the same value
 * in both runs when the runs share positions, so ACDC removes them at no
 * cost). With shortformer positions (model.h) pos feeds only the q and k
 * channels (of every layer, directly, not through the residual stream):
 * its edges into v channels and the logits carry nothing at all, and its
 * q/k edges still carry the same value in both runs; the graph and its
 * indices are the same for both position types.
 */
#ifndef ATTNLAB_GRAPH_H
#define ATTNLAB_GRAPH_H

#include <stddef.h>

#include "attnlab/model.h"

/* Deeper graphs are refused: 3·H²·L(L−1)/2 composition edges make ACDC's
 * sweep quadratic in L, and no model here has more (16 layers of 8 heads
 * is 23,424 edges). */
#define AL_GRAPH_MAX_LAYERS 16

typedef enum { AL_EDGE_INPUT, AL_EDGE_COMPOSITION, AL_EDGE_OUTPUT } al_edge_kind;

typedef struct al_edge {
    al_edge_kind kind;
    int sender; /* 0 embed, 1 pos, 2 + l·H + h head l.h */
    int recv_layer; /* −1 for the logits */
    int recv_head; /* −1 for the logits */
    int channel; /* 0 q, 1 k, 2 v, 3 the logits (direct) */
} al_edge;

/* Edges of an L-layer, H-head graph (0 when L or H is below 1, or
 * L > AL_GRAPH_MAX_LAYERS). */
int al_graph_n_edges(int L, int H);
/* Edge k's ends; −1 if k is out of range. */
int al_graph_edge(int L, int H, int k, al_edge *out);
/* Index of an edge from its ends, −1 if the graph has no such edge. */
int al_graph_edge_index(int L, int H, const al_edge *ed);
/* Sender s's name: "embed", "pos" or "l.h" (s = 2 + l·H + h); returns buf. */
const char *al_graph_sender_name(int H, int s, char *buf, size_t cap);
/* Channel c's name: "q", "k", "v", "direct" (3, the logits); "?" otherwise. */
const char *al_graph_channel_name(int c);
/* "embed->1.3.k", "0.4->1.6.q", "1.2->logits" into buf; returns buf. */
const char *al_graph_edge_name(int L, int H, int k, char *buf, size_t cap);

/* Running a circuit: a forward pass with only some edges of the head
 * graph carrying what their sender computes in this run; every
 * other edge carries a fill value instead (path-level, as path patching
 * and circuit discovery do). A receiver's input (head l.h's q, k or v
 * input; the logits' residual) is the sum over its senders of
 * (kept ? the sender's value in this run : the sender's fill value), so
 * a head reading a kept edge from an earlier head l0.h0 gets l0.h0's
 * output as computed in the circuit run (removals upstream propagate,
 * through any number of layers). A sender's
 * value: embed W_E[token], a head's output zg_h · W_O[l,h] (its gated z:
 * gates and hooks apply in the fill runs too). pos carries the
 * same value under every fill (the fill runs share positions; a mean at
 * position t is W_pos[t]), so its edges never change anything. Fill:
 *   AL_FILL_CORRUPTED  the model's own run on corr (B, T) tokens;
 *   AL_FILL_RESAMPLE   the model's own run on this batch with sequence b
 *                      taking sequence (b + 1) mod B's tokens (B >= 2);
 *   AL_FILL_MEAN       per-position means given (mean_x0, mean_zg).
 * All edges kept: the plain forward, bit for bit (nothing is adjusted).
 * Models of 1 to AL_GRAPH_MAX_LAYERS layers. Costs one extra forward for a corrupted
 * or resampled fill; the adjustments are small matmuls (D-wide).
 *
 * The run is a set of hooks (hooks.h; circuit_hooks.c): al_circuit_attach
 * registers them on m with x holding their state and scratch (the fill
 * run has its own activations, beside m's), and every forward of m then
 * runs the circuit, until al_circuit_detach. At a forward, −1 with e: a
 * resampled fill with B < 2, a mean fill shorter than T, corrupted ids
 * out of range or of another batch shape. */
typedef enum { AL_FILL_CORRUPTED, AL_FILL_RESAMPLE, AL_FILL_MEAN } al_fill_kind;
typedef struct al_circuit_spec {
    const unsigned char *kept; /* (al_graph_n_edges(L, H)) 1: the edge is in the circuit */
    al_fill_kind fill;
    const int *corr; /* AL_FILL_CORRUPTED: (B, T) tokens */
    const float *mean_x0; /* AL_FILL_MEAN: (mean_T, C) mean W_E[token] per position */
    const float *mean_zg; /* AL_FILL_MEAN: (L, mean_T, H, D) mean gated z per position */
    int mean_T; /* >= the forward's T */
    const float *fill_zg; /* AL_FILL_CORRUPTED: NULL, or the corrupted run's gated z
                                * (L, B, T, H, D), already computed: no fill forward */
} al_circuit_spec;

typedef struct al_circuit_exec {
    const al_circuit_spec *sp;
    al_model *m; /* attached to (NULL: not attached) */
    al_model fill; /* the fill run: m's weights, gates and other hooks */
    float *ws; /* scratch (circuit_hooks.c), grown on demand */
    size_t cap;
    int de_ready; /* this forward's embedding differences are computed */
    unsigned dz_ready; /* bit l: this forward's layer-l Δzg (all heads) is computed */
} al_circuit_exec;

/* Run circuit sp (borrowed) in m's forwards from now on: 0, or −1 with e
 * (no edges, a model deeper than AL_GRAPH_MAX_LAYERS, an unknown fill, a
 * mean fill without its means, no room for the hooks). x is zeroed
 * first. Without LayerNorm an edge comes off a receiver's q, k or v after
 * the projection (linear; biases cancel in the difference); with it, off
 * each head's own input before ln1 (the split inputs, hooks.h's
 * Q_INPUT..V_INPUT), so ln1 renormalises per receiver, as
 * TransformerLens's use_split_qkv_input does. */
int al_circuit_attach(al_circuit_exec *x, al_model *m, const al_circuit_spec *sp, al_err *e);
/* Remove x's hooks from its model and free its scratch (a zeroed or
 * detached x: no-op). */
void al_circuit_detach(al_circuit_exec *x);

/* Incremental evaluation of circuits against cached runs (circuit
 * discovery's fast path, discover.c; circuit.c, beside the hooks of
 * circuit_hooks.c, whose composition products it shares and whose full
 * forward is its oracle in the tests). The fill
 * is the corrupted run of the same pairs: cl and co are the clean and
 * corrupted runs of nb <= B sequences of T tokens (al_acts_save after
 * plain forwards of clean and corr, (nb, T) each). One implementation
 * at every depth and architecture: let l_first be the first layer with
 * a removed edge into a channel. Layers before it are the clean run's;
 * in layer l_first only the heads with such an edge are run again, from
 * their corrected channels; every later layer is recomputed in full from
 * the circuit's own residual; a removed last-layer head → logits edge
 * takes that head's z from co; removed embed and earlier heads' logits
 * edges are subtracted from the final residual. A channel is built on
 * its receiving head's own input: without LayerNorm D-wide after the
 * projection (the channel minus its removed senders' Δ · W_O W_c, or
 * co's channel plus its kept senders'; every sender removed: co's,
 * exactly); with it C-wide before ln1, which then normalises that one
 * head's input (circuit.c, ln_channel). So it agrees with the hooks'
 * full forward to float rounding, not bit for bit (that one subtracts
 * throughout). */
typedef struct al_circuit_delta {
    int L, H, D, C, B, T; /* B, T: capacity */
    int ln; /* LayerNorm: channels are formed C-wide before ln1 */
    float *wcomp; /* no LayerNorm, L >= 2: (D, D) W_O[l0,h0] · W_c[l1,h1] per
                             * composition edge k, at (k − 6·L·H)·D² */
    float *fix; /* (B, T, C) removed logits edges of earlier heads */
    float *dz; /* (L, B, T, H, D) zg per layer: circuit − corrupted */
    float *dzm; /* (B, T, H, D) one layer's, heads kept zeroed */
    float *stack; /* (H·D, D), under LayerNorm (H·D, C) */
    float *wqkv; /* (L, C, 3·H·D) fused W_Q|W_K|W_V */
    float *xs; /* (L+1, B, T, C) the circuit's residual */
    float *qkv, *att, *zb, *dxb; /* (B,T,3HD) (B,H,T,T) (B,T,HD) (B,T,C) */
    float *qh; /* (B,T,5D) one head's q|k|v, z and Δzg */
    float *lowt; /* (B,T,D) a channel's correction from the clean layers */
    float *rb, *lowb; /* LayerNorm: (B,T,C) a head's own input, its lower part */
    float *mean, *scale; /* LayerNorm: (B,T) (B,T) */
    float *posqk; /* LayerNorm + shortformer: (L, T, 2·H·D) W_pos W_Q|W_K */
    int *sel; /* (H) the sender heads of one product, then H flags */
    unsigned char *kh, *kc, *kf; /* memo keys being built: a head's, a channel's, the fix's */
} al_circuit_delta;

/* Workspace for batches of up to B sequences of T tokens of m (1 to
 * AL_GRAPH_MAX_LAYERS layers, any normalization, biases and positions),
 * with the composition products: 0, or −1 with e (*d zeroed). */
int al_circuit_delta_init(al_circuit_delta *d, const al_model *m, int B, int T, al_err *e);
void al_circuit_delta_free(al_circuit_delta *d);
/* Floats of a batch's embp for nb sequences (0: none is needed). */
size_t al_circuit_delta_embp_floats(const al_circuit_delta *d, int nb);
/* What every evaluation of a batch subtracts for a removed embed edge
 * (L >= 2): without LayerNorm embp (L−1, nb, T, 3, H, D) = (W_E[clean] −
 * W_E[corr]) · W_c[l, h] for every head of layers 1..L−1 and channel;
 * with it embp (nb, T, C) = W_E[clean] − W_E[corr]. nb <= d->B; uses
 * d->fix. */
void al_circuit_delta_embp(al_circuit_delta *d, const al_model *m, const int *clean,
                           const int *corr, int nb, float *embp);
/* What the evaluations of one batch can reuse. The
 * layers before the first one with a removed channel edge (l_first) are
 * the clean run's, so whatever depends on them alone is the same in
 * every evaluation with the same kept bits: a head of layer l_first (its
 * gated z), the part of a later channel that comes from embed and those
 * layers, and their heads' removed logits edges. Each is stored with the
 * kept bits it was computed for and reused when they match, so ACDC's
 * sweep, which changes one channel per evaluation, recomputes one head,
 * not every head with a removed edge. Valid for one batch's cl, co and
 * embp, and the model's weights and gates as they were (its keys hold
 * kept bits only). */
typedef struct al_circuit_memo {
    float *zh; /* (L, nb, T, H, D) gated z of a head of layer l_first */
    unsigned char *hkey; /* (L, H, hw): [0] 1 when stored, then per channel the kept
                           * bits of embed and of each earlier layer's heads */
    int hw; /* bytes per hkey */
    float *low; /* (L−1, nb, T, 3, H, D) a channel's correction from embed and
                           * the senders of layers < l_first (layers 1..L−1); NULL under
                           * LayerNorm (lowc) */
    unsigned char *lkey; /* (L−1, 3·H, lw): [0] 1 when stored, [1] l_first, [2] the
                           * channel taken from the corrupted run, [3] embed's kept
                           * bit, then the senders' */
    int lw; /* bytes per lkey */
    float *fix; /* (nb, T, C) the removed logits edges of heads of layers < l_first */
    unsigned char *fkey; /* 2 + (L−1)·H: [0] 1 when stored, [1] the layers summed, then the
                           * kept bits of their heads' logits edges */
    int fn; /* products summed into fix (0: it is unused) */
    float **lowc; /* LayerNorm: (L−1, 3·H) slots of (nb, T, C), low's C-wide
                           * counterpart (before ln1), each allocated when first stored
                           * while lowc_used + its size <= lowc_cap floats (else not
                           * kept: the same bits, more products) */
    size_t lowc_used, lowc_cap;
    long hits; /* parts taken from the memo (for tests) */
    int nb; /* the batch size it was made for */
} al_circuit_memo;
/* The default lowc_cap, in MB (a caller with several memos may lower it). */
#define AL_CIRCUIT_MEMO_LN_MB 64
/* Room for batches of nb sequences of d: 0, or −1 with e (*mm zeroed). */
int al_circuit_memo_init(al_circuit_memo *mm, const al_circuit_delta *d, int nb, al_err *e);
void al_circuit_memo_free(al_circuit_memo *mm);

/* The final residual xL (nb, T, C) of the circuit kept[] (n_edges) on the
 * clean sequences, and changed (nb·T): 1 where a row may differ from
 * cl's (elsewhere xL is cl's, bit for bit; every edge kept: nothing
 * changed). m's activations are left alone, except when m has hooks
 * registered (an intervention: the incremental forward runs none), when
 * every circuit is a full forward of m with the circuit's hooks.
 * memo: NULL, or the batch's memory (refused, −1, when made for fewer
 * sequences or another workspace); the result is the same bits with it
 * as without. 0, or −1 with e. */
int al_circuit_delta_run(al_circuit_delta *d, al_model *m, const unsigned char *kept,
                         const al_acts *cl, const al_acts *co, const int *clean, const int *corr,
                         const float *embp, al_circuit_memo *memo, float *xL,
                         unsigned char *changed, al_err *e);

/* The index formulas above (no range checks: callers loop in range). */
static inline int al_graph_k_input(int H, int l, int h, int c, int s) {
    return ((l * H + h) * 3 + c) * 2 + s;
}
/* s: the sender head's index over all layers (l0·H + h0, l0 < l1). */
static inline int al_graph_k_comp(int L, int H, int s, int l1, int h1, int c) {
    return 6 * L * H + 3 * H * H * l1 * (l1 - 1) / 2 + (s * H + h1) * 3 + c;
}
static inline int al_graph_k_out(int L, int H, int j) {
    return 6 * L * H + 3 * H * H * L * (L - 1) / 2 + j;
}

#endif
