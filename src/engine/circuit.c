/* circuit.c -- discovery's incremental evaluation of circuits
 * (al_circuit_delta_run; contract in graph.h): the edge removal of the
 * hooks in circuit_hooks.c against cached clean and corrupted runs, one
 * implementation at every depth: the first changed layer head by head,
 * every later one in full, reusing across a batch's evaluations what
 * depends only on the unchanged layers (al_circuit_memo). It shares the
 * composition products (circuit_comp_block), builds each channel on its
 * receiving head's own input as the hooks do (D-wide after the
 * projection without LayerNorm, C-wide before ln1 with it: ln_channel),
 * and takes exact corrupted-run values where a channel's input is
 * entirely the fill's (graph.h says why the two then agree to float
 * rounding rather than bit for bit). With hooks registered (an
 * intervention) its evaluation is the hooks' full forward
 * (delta_run_hooks), with the cached corrupted z as its fill. */
#include "attnlab/graph.h"

#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/layers.h"
#include "circuit_internal.h"
#include "model_internal.h"

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
    d->ln = c->norm_type != AL_NORM_NONE;
    const size_t L = d->L, H = d->H, D = d->D, C = d->C, HD = H * D, BT = (size_t)B * T;
    const int sf = d->ln && c->pos_type == AL_POS_SHORTFORMER;
    /* LayerNorm takes a channel's removed senders off its C-wide input,
     * so it needs no D×D products but a residual, its statistics and the
     * senders' W_O rows */
    const size_t nw = !d->ln && L >= 2 ? n_comp(d->L, d->H) * D * D : 0;
    const size_t lnf = d->ln ? 2 * BT * C + 2 * BT + (sf ? L * (size_t)T * 2 * HD : 0) : 0;
    const size_t stack = HD * (d->ln ? C : D);
    d->wcomp =
        al_malloc(nw + BT * C + L * BT * HD + BT * HD + stack + L * C * 3 * HD + (L + 1) * BT * C +
                      BT * 3 * HD + BT * H * T + BT * HD + BT * C + 6 * BT * D + lnf + 2 * H,
                  sizeof(float), e);
    /* memo keys (al_circuit_memo: hw, lw bytes) being built */
    const size_t hw = 1 + 3 * (1 + (L - 1) * H), lw = 4 + (L - 1) * H;
    d->kh = d->wcomp ? al_malloc(hw + 2 * lw, 1, e) : NULL;
    if (!d->kh) {
        al_circuit_delta_free(d);
        return -1;
    }
    d->kc = d->kh + hw;
    d->kf = d->kc + lw;
    d->fix = d->wcomp + nw;
    d->dz = d->fix + BT * C;
    d->dzm = d->dz + L * BT * HD;
    d->stack = d->dzm + BT * HD;
    d->wqkv = d->stack + stack;
    d->xs = d->wqkv + L * C * 3 * HD;
    d->qkv = d->xs + (L + 1) * BT * C;
    d->att = d->qkv + BT * 3 * HD;
    d->zb = d->att + BT * H * T;
    d->dxb = d->zb + BT * HD;
    d->qh = d->dxb + BT * C;
    d->lowt = d->qh + 5 * BT * D;
    float *f = d->lowt + BT * D;
    if (d->ln) {
        d->rb = f, d->lowb = d->rb + BT * C, d->mean = d->lowb + BT * C;
        d->scale = d->mean + BT;
        f = d->scale + BT;
        if (sf) d->posqk = f, f += L * (size_t)T * 2 * HD;
    }
    d->sel = (int *)f; /* H ints, then H flags, in 2·H floats' room */
    for (int l = 0; l < d->L; l++) {
        float *w = d->wqkv + (size_t)l * C * 3 * HD;
        model_fuse_qkv(w, m, l);
        if (d->posqk)
            posqk_project(d->posqk + (size_t)l * T * 2 * HD, m->p[AL_P_WPOS], w, T, (int)C,
                          (int)HD);
    }
    for (int l1 = 1; nw && l1 < d->L; l1++)
        for (int s0 = 0; s0 < l1 * d->H; s0++)
            for (int h1 = 0; h1 < d->H; h1++)
                for (int ch = 0; ch < 3; ch++) {
                    size_t k = (size_t)al_graph_k_comp(d->L, d->H, s0, l1, h1, ch) - 6 * L * H;
                    circuit_comp_block(m, s0 / d->H, s0 % d->H, l1, h1, ch, d->wcomp + k * D * D);
                }
    return 0;
}

void al_circuit_delta_free(al_circuit_delta *d) {
    free(d->wcomp);
    free(d->kh);
    memset(d, 0, sizeof *d);
}

size_t al_circuit_delta_embp_floats(const al_circuit_delta *d, int nb) {
    if (d->L < 2) return 0;
    const size_t bt = (size_t)nb * d->T;
    return d->ln ? bt * d->C : (size_t)(d->L - 1) * bt * 3 * d->H * d->D;
}

void al_circuit_delta_embp(al_circuit_delta *d, const al_model *m, const int *clean,
                           const int *corr, int nb, float *embp) {
    if (d->L < 2) return;
    const size_t C = d->C, D = d->D, HD = (size_t)d->H * D, bt = (size_t)nb * d->T;
    float *de = d->ln ? embp : d->fix; /* LayerNorm: Δembed itself; else scratch (bt, C) */
    for (size_t r = 0; r < bt; r++) {
        const float *a = m->p[AL_P_WE] + (size_t)clean[r] * C;
        const float *z = m->p[AL_P_WE] + (size_t)corr[r] * C;
        for (size_t k = 0; k < C; k++) de[r * C + k] = a[k] - z[k];
    }
    for (int l = 1; !d->ln && l < d->L; l++) {
        float *out = embp + (size_t)(l - 1) * bt * 3 * HD;
        for (int h = 0; h < d->H; h++)
            for (int ch = 0; ch < 3; ch++)
                al_sgemm(false, false, (int)bt, (int)D, (int)C, 1.0f, de, (int)C,
                         circuit_head_w(m, l, h, ch), (int)D, 0.0f, out + ch * HD + h * D,
                         (int)(3 * HD));
    }
}

static int delta_run_incr(al_circuit_delta *d, al_model *m, const unsigned char *kept,
                          const al_acts *cl, const al_acts *co, const int *clean, const int *corr,
                          const float *embp, al_circuit_memo *memo, float *xL,
                          unsigned char *changed, al_err *e);

int al_circuit_memo_init(al_circuit_memo *mm, const al_circuit_delta *d, int nb, al_err *e) {
    memset(mm, 0, sizeof *mm);
    const size_t HD = (size_t)d->H * d->D, L = (size_t)d->L, H = (size_t)d->H;
    const size_t bt = (size_t)nb * d->T;
    /* under LayerNorm a channel's lower part is C-wide and normalised
     * with the rest, so only heads and the logits' fix are kept */
    const size_t nlow = d->ln ? 0 : (L - 1) * bt * 3 * HD;
    mm->nb = nb;
    mm->hw = 1 + 3 * (1 + (d->L - 1) * d->H);
    mm->lw = 4 + (d->L - 1) * d->H;
    mm->zh = al_malloc(L * bt * HD + nlow + bt * d->C, sizeof(float), e);
    mm->hkey =
        mm->zh ? al_calloc(L * H * mm->hw + (L - 1) * 3 * H * mm->lw + (size_t)mm->lw, 1, e) : NULL;
    if (!mm->hkey) {
        al_circuit_memo_free(mm);
        return -1;
    }
    mm->low = nlow ? mm->zh + L * bt * HD : NULL;
    mm->fix = mm->zh + L * bt * HD + nlow;
    if (d->ln && L >= 2) { /* C-wide parts, allocated as they are first stored */
        mm->lowc = al_calloc((L - 1) * 3 * H, sizeof(float *), e);
        if (!mm->lowc) {
            al_circuit_memo_free(mm);
            return -1;
        }
        mm->lowc_cap = (size_t)AL_CIRCUIT_MEMO_LN_MB << 20 >> 2;
    }
    mm->lkey = mm->hkey + L * H * mm->hw;
    mm->fkey = mm->lkey + (L - 1) * 3 * H * mm->lw;
    return 0;
}

void al_circuit_memo_free(al_circuit_memo *mm) {
    if (mm->lowc)
        for (size_t i = 0; i < (size_t)(mm->lw - 4) * 3; i++) free(mm->lowc[i]);
    free(mm->lowc);
    free(mm->zh);
    free(mm->hkey);
    memset(mm, 0, sizeof *mm);
}

/* A circuit on a model with hooks registered: one full forward of the
 * clean tokens with the circuit's hooks, the corrupted run's z read from co (so no fill
 * forward); changed marks the rows whose final residual differs from
 * cl's, bit for bit (every edge kept: none). */
static int delta_run_hooks(al_circuit_delta *d, al_model *m, const unsigned char *kept,
                           const al_acts *cl, const al_acts *co, const int *clean, const int *corr,
                           float *xL, unsigned char *changed, al_err *e) {
    const int nb = cl->B, T = d->T;
    const size_t C = d->C, BT = (size_t)nb * T, fin = (size_t)d->L * BT * C;
    al_circuit_spec sp = {.kept = kept, .fill = AL_FILL_CORRUPTED, .corr = corr, .fill_zg = co->zg};
    al_circuit_exec x;
    if (al_circuit_attach(&x, m, &sp, e)) return -1;
    int rc = al_model_forward(m, clean, NULL, nb, T, e);
    al_circuit_detach(&x);
    if (rc) return -1;
    const float *xf = m->x + fin, *xc = cl->x + fin;
    memcpy(xL, xf, sizeof(float) * BT * C);
    for (size_t r = 0; r < BT; r++)
        changed[r] = memcmp(xf + r * C, xc + r * C, sizeof(float) * C) != 0;
    return 0;
}

int al_circuit_delta_run(al_circuit_delta *d, al_model *m, const unsigned char *kept,
                         const al_acts *cl, const al_acts *co, const int *clean, const int *corr,
                         const float *embp, al_circuit_memo *memo, float *xL,
                         unsigned char *changed, al_err *e) {
    const int L = d->L, H = d->H, T = d->T, nb = cl->B;
    if (nb > d->B || cl->T != T || co->B != nb || co->T != T)
        return al_errf(e, "circuit evaluation: runs of %dx%d and %dx%d for a workspace of %dx%d",
                       cl->B, cl->T, co->B, co->T, d->B, T);
    /* the incremental forward runs no hooks: with hooks registered (an
     * intervention) every evaluation is a full forward that runs them */
    if (m->hooks.n > 0) return delta_run_hooks(d, m, kept, cl, co, clean, corr, xL, changed, e);
    if (memo && memo->zh && (memo->nb < nb || memo->hw != 1 + 3 * (1 + (L - 1) * H)))
        return al_errf(e,
                       "circuit evaluation: a memo made for %d sequences of another workspace "
                       "(this batch has %d)",
                       memo->nb, nb);
    return delta_run_incr(d, m, kept, cl, co, clean, corr, embp, memo, xL, changed, e);
}

/* ------------------------------------------- the incremental forward */

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
    int lo; /* l_first: layers below it are the clean run's */
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
    al_sgemm(false, false, (int)BT, D, cnt * D, sign, a, (int)lda, d->stack, D, beta ? 1.0f : 0.0f,
             dst, (int)ldd);
    return 1;
}

/* The lower part of channel (l, h, ch) in an evaluation whose first
 * changed layer is lo or later: embed and the senders of layers < lo
 * whose kept bit is the form's (removed ones when the channel is the
 * circuit's own, kept ones when it is the corrupted run's: from_co).
 * They are the clean run's in every evaluation with this l_first, so
 * their sum is formed apart (a stored one gives the same bits) and kept
 * in the memo under the key cur gets (4 + lo·H bytes: stored, lo, the
 * form, embed's kept bit, then the senders'). Returns how many there are
 * (0: none). */
static int low_part(const deep *g, int l, int h, int ch, int lo, int from_co, unsigned char *cur) {
    const int L = g->d->L, H = g->d->H;
    const unsigned char want = from_co ? 1 : 0;
    cur[0] = 1, cur[1] = (unsigned char)lo, cur[2] = (unsigned char)from_co;
    cur[3] = g->kept[al_graph_k_input(H, l, h, ch, 0)];
    int n = l >= 1 && cur[3] == want;
    for (int s0 = 0; s0 < lo * H; s0++) {
        cur[4 + s0] = g->kept[al_graph_k_comp(L, H, s0, l, h, ch)];
        n += cur[4 + s0] == want;
    }
    return n;
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
static void deep_channel(deep *g, int l, int h, int ch, const float *base, size_t ldb, float *dst,
                         size_t ldd) {
    al_circuit_delta *d = g->d;
    const int H = d->H, D = d->D;
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
    const int lo = g->lo < l ? g->lo : l,
              emb = l >= 1 && g->kept[al_graph_k_input(H, l, h, ch, 0)] == want;
    unsigned char *cur = d->kc; /* lw bytes */
    if (low_part(g, l, h, ch, lo, from_co, cur)) {
        float *low = d->lowt;
        size_t ldl = D;
        unsigned char *key = NULL;
        const int nkey = 4 + lo * H;
        int hit = 0;
        if (lo > 0 && g->memo && g->memo->low && nkey <= g->memo->lw) {
            al_circuit_memo *mm = g->memo;
            key = mm->lkey + (((size_t)(l - 1) * 3 + ch) * H + h) * mm->lw;
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

/* layernorm_forward of N rows split over the threads (rows are
 * independent: the same bits for any split). out may be x. */
static void ln_rows(float *out, float *mean, float *scale, const float *x, const float *w,
                    const float *b, size_t N, int C, double eps) {
    const size_t blk = 64;
    const long nb = (long)((N + blk - 1) / blk);
#pragma omp parallel for schedule(static) if (nb > 1)
    for (long i = 0; i < nb; i++) {
        size_t r0 = (size_t)i * blk, n = N - r0 < blk ? N - r0 : blk;
        layernorm_forward(out + r0 * C, mean + r0, scale + r0, x + r0 * C, w, b, n, C, eps);
    }
}

/* dst (BT rows of D, stride ld) += b_c (NULL: none) and, for rows of
 * position t, pq[t] (stride 2·H·D; NULL: none), split over the threads. */
static void add_bias_pos(float *dst, size_t ld, const float *bc, const float *pq, size_t BT, int T,
                         int D, size_t pld) {
    if (!bc && !pq) return;
#pragma omp parallel for schedule(static) if (BT >= 256)
    for (size_t r = 0; r < BT; r++) {
        float *o = dst + r * ld;
        if (bc)
#pragma omp simd
            for (int k = 0; k < D; k++) o[k] += bc[k];
        if (pq) {
            const float *p = pq + (r % (size_t)T) * pld;
#pragma omp simd
            for (int k = 0; k < D; k++) o[k] += p[k];
        }
    }
}

/* LayerNorm: r (BT, C) += sign · Σ over the heads h0 of layer l0 whose
 * edge into channel (l, h, ch) has kept bit want of Δzg_{l0,h0} ·
 * W_O[l0,h0] (C-wide; the chosen heads' Δzg columns and W_O rows
 * gathered into d->dzm and d->stack, one sgemm). */
static void ln_sender_terms(deep *g, int l0, int l, int h, int ch, unsigned char want, float sign,
                            float *r) {
    al_circuit_delta *d = g->d;
    const int L = d->L, H = d->H, D = d->D, C = d->C;
    const size_t HD = (size_t)H * D, BT = g->BT;
    int *sel = d->sel, cnt = 0;
    for (int h0 = 0; h0 < H; h0++)
        if (g->kept[al_graph_k_comp(L, H, l0 * H + h0, l, h, ch)] == want) sel[cnt++] = h0;
    if (!cnt) return;
    const float *dz = deep_dz(g, l0), *a = dz, *w = al_head_wo(g->m, l0, 0);
    size_t lda = HD;
    if (cnt < H) {
#pragma omp parallel for schedule(static) if (BT >= 256)
        for (size_t i = 0; i < BT; i++)
            for (int j = 0; j < cnt; j++)
                memcpy(d->dzm + i * cnt * D + (size_t)j * D, dz + i * HD + (size_t)sel[j] * D,
                       sizeof(float) * D);
        for (int j = 0; j < cnt; j++)
            memcpy(d->stack + (size_t)j * D * C, al_head_wo(g->m, l0, sel[j]),
                   sizeof(float) * D * C);
        a = d->dzm, lda = (size_t)cnt * D, w = d->stack;
    }
    al_sgemm(false, false, (int)BT, C, cnt * D, sign, a, (int)lda, w, C, 1.0f, r, C);
}

/* LayerNorm: dst (BT rows of D, stride ldd) = ln1(r) W_c[l,h] + b_c[l,h],
 * plus W_pos W_c for a query or key under shortformer positions: what
 * the forward's split inputs compute for one head's own input r (BT, C),
 * which is overwritten by its normalisation. */
static void ln_project(deep *g, int l, int h, int ch, float *r, float *dst, size_t ldd) {
    al_circuit_delta *d = g->d;
    const al_model *m = g->m;
    const int C = d->C, D = d->D, T = d->T;
    const size_t HD = (size_t)d->H * D, BT = g->BT;
    const float *w = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
    const float *b = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l * C : NULL;
    ln_rows(r, d->mean, d->scale, r, w, b, BT, C, m->cfg.ln_eps);
    al_sgemm(false, false, (int)BT, D, C, 1.0f, r, C, circuit_head_w(m, l, h, ch), D, 0.0f, dst,
             (int)ldd);
    const float *bc =
        m->p[AL_P_BQ + ch] ? m->p[AL_P_BQ + ch] + (size_t)l * HD + (size_t)h * D : NULL;
    const float *pq = d->posqk && ch < 2
                          ? d->posqk + (size_t)l * T * 2 * HD + (size_t)ch * HD + (size_t)h * D
                          : NULL;
    add_bias_pos(dst, ldd, bc, pq, BT, T, D, 2 * HD);
}

/* LayerNorm: dst = channel (l, h, ch) of the circuit, its input formed
 * C-wide before ln1: the circuit's residual x entering layer l minus the
 * removed senders' differences, or the corrupted run's residual plus the
 * kept senders' (chan_from_co: whichever has fewer senders); every
 * sender removed: the corrupted run's channel, exactly. */
static void ln_channel(deep *g, int l, int h, int ch, const float *x, float *dst, size_t ldd) {
    al_circuit_delta *d = g->d;
    const int H = d->H, D = d->D;
    const size_t HD = (size_t)H * D, o = (size_t)ch * HD + (size_t)h * D, BT = g->BT;
    int nk;
    const int from_co = chan_from_co(g, l, h, ch, &nk);
    if (from_co && !nk) {
        const float *src = g->co->qkv + (size_t)l * g->Q + o;
        for (size_t r = 0; r < BT; r++) memcpy(dst + r * ldd, src + r * 3 * HD, sizeof(float) * D);
        return;
    }
    float *r = d->rb;
    const float *base = from_co ? g->co->x + (size_t)l * g->X : x;
    const float sign = from_co ? 1.0f : -1.0f;
    const unsigned char want = from_co ? 1 : 0;
    /* the lower part (low_part), C-wide */
    const int lo = g->lo < l ? g->lo : l,
              emb = l >= 1 && g->kept[al_graph_k_input(H, l, h, ch, 0)] == want;
    unsigned char *cur = d->kc; /* lw bytes */
    const float *low = NULL;
    if (low_part(g, l, h, ch, lo, from_co, cur)) {
        al_circuit_memo *mm = g->memo;
        unsigned char *key = NULL;
        float *slot = NULL;
        const int nkey = 4 + lo * H;
        int hit = 0;
        if (lo > 0 && mm && mm->lowc && nkey <= mm->lw) {
            const size_t si = ((size_t)(l - 1) * 3 + ch) * H + h;
            slot = mm->lowc[si];
            if (!slot && mm->lowc_used + g->X <= mm->lowc_cap &&
                (slot = malloc(sizeof(float) * g->X)) != NULL) {
                mm->lowc[si] = slot, mm->lowc_used += g->X;
                memset(mm->lkey + si * mm->lw, 0, (size_t)mm->lw);
            }
            if (slot) {
                key = mm->lkey + si * mm->lw;
                hit = !memcmp(key, cur, (size_t)nkey);
                mm->hits += hit;
            }
        }
        float *lb = slot ? slot : d->lowb;
        if (!hit) {
            const float *de = g->embp; /* (BT, C) W_E[clean] − W_E[corr] */
            const size_t n = g->X;
            if (emb) {
#pragma omp parallel for simd schedule(static) if (n >= ((size_t)1 << 16))
                for (size_t i = 0; i < n; i++) lb[i] = sign * de[i];
            } else
                memset(lb, 0, sizeof(float) * n);
            for (int l0 = 0; l0 < lo; l0++) ln_sender_terms(g, l0, l, h, ch, want, sign, lb);
            if (key) memcpy(key, cur, (size_t)nkey);
        }
        low = lb;
    }
    if (low) {
        const size_t n = g->X;
#pragma omp parallel for simd schedule(static) if (n >= ((size_t)1 << 16))
        for (size_t i = 0; i < n; i++) r[i] = base[i] + low[i];
    } else
        model_copy(r, base, g->X);
    for (int l0 = lo; l0 < l; l0++) ln_sender_terms(g, l0, l, h, ch, want, sign, r);
    ln_project(g, l, h, ch, r, dst, ldd);
}

/* Channel (l, h, ch) of the circuit into dst: from base (the channel as
 * the circuit's residual x gives it, stride ldb) without LayerNorm, from
 * x itself with it. */
static void chan(deep *g, int l, int h, int ch, const float *base, size_t ldb, const float *x,
                 float *dst, size_t ldd) {
    if (g->d->ln)
        ln_channel(g, l, h, ch, x, dst, ldd);
    else
        deep_channel(g, l, h, ch, base, ldb, dst, ldd);
}

/* qkv (BT, 3HD) = layer l's q|k|v from the circuit's residual x (NULL:
 * the clean run's, unchanged): the clean run's plus (x − clean x) · W_qkv,
 * so shortformer positions (the same in both) need no term of their own. */
static void deep_qkv(deep *g, int l, const float *x, float *qkv) {
    al_circuit_delta *d = g->d;
    const al_model *m = g->m;
    const size_t C = d->C, HD = (size_t)d->H * d->D, HD3 = 3 * HD;
    const float *w = d->wqkv + (size_t)l * C * HD3;
    if (!x) {
        model_copy(qkv, g->cl->qkv + (size_t)l * g->Q, g->Q);
        return;
    }
    if (d->ln) { /* ln1(x) W_qkv + biases + shortformer positions, as the forward */
        const float *lw = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
        const float *lb = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l * C : NULL;
        ln_rows(d->dxb, d->mean, d->scale, x, lw, lb, g->BT, (int)C, m->cfg.ln_eps);
        al_sgemm(false, false, (int)g->BT, (int)HD3, (int)C, 1.0f, d->dxb, (int)C, w, (int)HD3,
                 0.0f, qkv, (int)HD3);
        const float *b[3];
        for (int s = 0; s < 3; s++)
            b[s] = m->p[AL_P_BQ + s] ? m->p[AL_P_BQ + s] + (size_t)l * HD : NULL;
        const float *pos = d->posqk ? d->posqk + (size_t)l * d->T * 2 * HD : NULL;
        qkv_bias_forward(qkv, b[0], b[1], b[2], pos, g->cl->B, d->T, (int)HD);
        return;
    }
    model_copy(qkv, g->cl->qkv + (size_t)l * g->Q, g->Q);
    const float *xc = g->cl->x + (size_t)l * g->X;
    sub_f(d->dxb, x, xc, g->X);
    al_sgemm(false, false, (int)g->BT, (int)HD3, (int)C, 1.0f, d->dxb, (int)C, w, (int)HD3, 1.0f,
             qkv, (int)HD3);
}

/* 1 when head l.h outputs the corrupted run's z in the circuit: every
 * edge out of it is removed (each receiver takes its corrupted value, so
 * that value in the residual with Δzg 0 is the same circuit), or every
 * sender into each of its channels is (its inputs are the corrupted
 * run's). Its channels and attention are then not computed. */
static int head_co(const deep *g, int l, int h) {
    const int L = g->d->L, H = g->d->H;
    int out = g->kept[al_graph_k_out(L, H, 2 + l * H + h)];
    for (int l1 = l + 1; l1 < L && !out; l1++)
        for (int h1 = 0; h1 < H && !out; h1++)
            for (int ch = 0; ch < 3 && !out; ch++)
                out = g->kept[al_graph_k_comp(L, H, l * H + h, l1, h1, ch)];
    if (!out) return 1;
    for (int ch = 0; ch < 3; ch++)
        if (chan_state(g->kept, L, H, l, h, ch) != 2) return 0;
    return 1;
}

/* 1 when channel (l, h, ch) of a recomputed layer starts from its value
 * as the circuit's residual gives it: every sender kept, or, without
 * LayerNorm, some removed and the channel formed as that value minus
 * their differences (chan_from_co). Otherwise the channel is made from
 * the corrupted run or, under LayerNorm, from the residual itself. */
static int needs_base(const deep *g, int l, int h, int ch) {
    const int st = chan_state(g->kept, g->d->L, g->d->H, l, h, ch);
    if (st == 0) return 1;
    if (g->d->ln || st == 2) return 0;
    int nk;
    return !chan_from_co(g, l, h, ch, &nk);
}

/* qh (BT rows of 3D) = head l.h's q|k|v as the circuit's residual gives
 * them, for the channels that need it (needs_base; the caller corrects
 * or replaces the others), from d->dxb: x − the clean run's residual
 * without LayerNorm, ln1(x) with it. */
static void head_base(deep *g, int l, int h, float *qh) {
    al_circuit_delta *d = g->d;
    const al_model *m = g->m;
    const int H = d->H, D = d->D, C = d->C, T = d->T;
    const size_t HD = (size_t)H * D, BT = g->BT, ld = 3 * (size_t)D;
    const float *w = d->wqkv + (size_t)l * C * 3 * HD;
    for (int s = 0; s < 3; s++) {
        if (!needs_base(g, l, h, s)) continue;
        float *o = qh + (size_t)s * D;
        const size_t col = (size_t)s * HD + (size_t)h * D;
        if (!d->ln) {
            const float *q0 = g->cl->qkv + (size_t)l * g->Q + col;
            for (size_t r = 0; r < BT; r++) memcpy(o + r * ld, q0 + r * 3 * HD, sizeof(float) * D);
            al_sgemm(false, false, (int)BT, D, C, 1.0f, d->dxb, C, w + col, (int)(3 * HD), 1.0f, o,
                     (int)ld);
            continue;
        }
        al_sgemm(false, false, (int)BT, D, C, 1.0f, d->dxb, C, w + col, (int)(3 * HD), 0.0f, o,
                 (int)ld);
        add_bias_pos(o, ld,
                     m->p[AL_P_BQ + s] ? m->p[AL_P_BQ + s] + (size_t)l * HD + (size_t)h * D : NULL,
                     d->posqk && s < 2 ? d->posqk + (size_t)l * T * 2 * HD + col : NULL, BT, T, D,
                     2 * HD);
    }
}

/* Layer l of the circuit in full, from the circuit's residual x entering
 * it (not the clean run's) into xn: q|k|v from x, the channels with
 * removed senders corrected, attention, gates, x + zg·W_O; the gated z's
 * stay in d->zb. A head that outputs the corrupted run's z (head_co; in
 * the last layer, one whose logits edge is removed) is not computed;
 * when there are such heads, or channels that do not start from the
 * layer's own q|k|v, the others are computed one by one.
 * Returns 0, or -1 when attention's scratch could not be allocated. */
static int deep_layer(deep *g, int l, const float *x, float *xn) {
    al_circuit_delta *d = g->d;
    const al_model *m = g->m;
    const al_acts *cl = g->cl;
    const int L = d->L, H = d->H, D = d->D, C = d->C, T = d->T, nb = cl->B;
    const size_t HD = (size_t)H * D, BT = g->BT;
    unsigned char *fixed = (unsigned char *)(d->sel + H); /* H flags: z not computed */
    int nfixed = 0, nbase = 0;
    for (int h = 0; h < H; h++) {
        nfixed += fixed[h] = cl->zfixed[l * H + h] || head_co(g, l, h);
        for (int ch = 0; ch < 3 && !fixed[h]; ch++) nbase += needs_base(g, l, h, ch);
    }
    /* every head computed and every channel's base needed: one product
     * for the layer; else head by head, only the bases needed (late in
     * ACDC's sweep most channels come from the corrupted run or, under
     * LayerNorm, from their own input) */
    if (!nfixed && nbase == 3 * H) {
        deep_qkv(g, l, x, d->qkv);
        for (int h = 0; h < H; h++)
            for (int ch = 0; ch < 3; ch++)
                if (chan_state(g->kept, L, H, l, h, ch)) {
                    float *q = d->qkv + (size_t)ch * HD + (size_t)h * D;
                    chan(g, l, h, ch, q, 3 * HD, x, q, 3 * HD);
                }
        if (attention_forward(d->zb, d->att, d->qkv, nb, T, H, D, 1)) return -1;
        for (size_t r = 0; r < BT; r++) /* zb becomes the gated z */
            for (int h = 0; h < H; h++) {
                float *z = d->zb + r * HD + (size_t)h * D;
                model_gate_row(z, z, m->gates[l * H + h], D);
            }
    } else if (nfixed < H) {
        if (nbase && d->ln) {
            const float *lw = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
            const float *lb = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l * C : NULL;
            ln_rows(d->dxb, d->mean, d->scale, x, lw, lb, BT, C, m->cfg.ln_eps);
        } else if (nbase)
            sub_f(d->dxb, x, cl->x + (size_t)l * g->X, g->X);
        float *qh = d->qh, *zh = qh + BT * 3 * D;
        const size_t ld = 3 * (size_t)D;
        for (int h = 0; h < H; h++) {
            if (fixed[h]) continue;
            head_base(g, l, h, qh);
            for (int ch = 0; ch < 3; ch++)
                if (chan_state(g->kept, L, H, l, h, ch))
                    chan(g, l, h, ch, qh + (size_t)ch * D, ld, x, qh + (size_t)ch * D, ld);
            if (attention_forward(zh, d->att, qh, nb, T, 1, D, 1)) return -1;
            for (size_t r = 0; r < BT; r++)
                model_gate_row(d->zb + r * HD + (size_t)h * D, zh + r * D, m->gates[l * H + h], D);
        }
    }
    for (int h = 0; nfixed && h < H; h++) {
        if (!fixed[h]) continue;
        const float *src = (cl->zfixed[l * H + h] ? cl->zg : g->co->zg) + (size_t)l * g->Z;
        for (size_t r = 0; r < BT; r++)
            memcpy(d->zb + r * HD + (size_t)h * D, src + r * HD + (size_t)h * D, sizeof(float) * D);
    }
    if (m->p[AL_P_BO])
        copy_bias_forward(xn, x, m->p[AL_P_BO] + (size_t)l * C, BT, C);
    else
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
        int any = 0;
        for (int ch = 0; ch < 3; ch++) any |= chan_state(g->kept, L, H, l, h, ch) != 0;
        if ((l == L - 1 && !g->kept[al_graph_k_out(L, H, 2 + l * H + h)]) ||
            (any && head_co(g, l, h))) {
            src = g->co->zg + (size_t)l * g->Z + (size_t)h * D, sld = HD;
        } else {
            if (!any) continue;
            unsigned char *key = NULL;
            int hit = 0;
            if (mm && nkey <= mm->hw) {
                key = mm->hkey + ((size_t)l * H + h) * mm->hw;
                int n = 0;
                cur[n++] = 1;
                for (int ch = 0; ch < 3; ch++) {
                    cur[n++] = g->kept[al_graph_k_input(H, l, h, ch, 0)];
                    for (int s0 = 0; s0 < l * H; s0++)
                        cur[n++] = g->kept[al_graph_k_comp(L, H, s0, l, h, ch)];
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
                        chan(g, l, h, ch, b0, 3 * HD, cl->x + (size_t)l * g->X, qh + (size_t)ch * D,
                             3 * (size_t)D);
                    else
                        for (size_t r = 0; r < BT; r++)
                            memcpy(qh + r * 3 * D + (size_t)ch * D, b0 + r * 3 * HD,
                                   sizeof(float) * D);
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

/* A circuit, incrementally, at any depth. Let l_first be the first
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
static int delta_run_incr(al_circuit_delta *d, al_model *m, const unsigned char *kept,
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
    for (size_t r = 0; r < BT; r++)
        changed[r] = memcmp(xL + r * C, xc + r * C, sizeof(float) * C) != 0;
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
            if (nfix && lc == L - 1)
                fix = memo->fix;
            else if (nfix)
                memcpy(d->fix, memo->fix, sizeof(float) * g.X);
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
                if (kept[al_graph_k_out(L, H, 2 + l0 * H + h)])
                    memset(o, 0, sizeof(float) * D);
                else
                    memcpy(o, dz + r * HD + (size_t)h * D, sizeof(float) * D);
            }
        al_sgemm(false, false, (int)BT, C, (int)HD, 1.0f, d->dzm, (int)HD, al_head_wo(m, l0, 0), C,
                 nfix ? 1.0f : 0.0f, d->fix, C);
        nfix++;
    }
    for (size_t r = 0; nfix && r < BT; r++) {
        const float *f = fix + r * C;
        float *xr = xL + r * C;
        int nz = 0;
#pragma omp simd reduction(| : nz)
        for (int k = 0; k < C; k++) nz |= f[k] != 0.0f;
        if (!nz) continue;
#pragma omp simd
        for (int k = 0; k < C; k++) xr[k] -= f[k];
        changed[r] = 1;
    }
    return 0;
}
