/* delta.c -- al_model_forward_delta: a patched forward pass recomputed
 * incrementally from the cache of the unpatched run (contract in model.h).
 *
 * Why: activation patching evaluates thousands of configurations against
 * one cached target run, and a configuration usually changes very little:
 * one head's output at one position, one residual vector. A full patched
 * forward pays for every row of every layer and the whole unembedding;
 * this pays only for the rows the patch can reach.
 *
 * How. Masks are the same for every sequence b, so all bookkeeping is per
 * position t (and head h). Starting at the first layer any mask touches,
 * with dx[t] = "the residual row entering this layer differs from base's"
 * (none at first), each layer does, in al_model_forward's order:
 *   1. x mask: copy the source rows, dx[t] = 1;
 *   2. q, k, v of the dx rows: ln1 of the gathered rows (LayerNorm is
 *      per row, so a row's q|k|v depend on that row alone), an sgemm
 *      with the fused weights (rows_sgemm), b_Q, b_K, b_V, plus for
 *      shortformer positions
 *      W_pos[t] W_Q, W_pos[t] W_K on q and k (a constant of the position,
 *      the same in every run, so it changes nothing about which rows
 *      differ); then the q/k/v mask. chg[s,h,t] marks every q, k or
 *      v that differs from base's;
 *   3. attention rows that can change, for each head (not for a head
 *      whose z a hook set in full in base's run, base->zfixed: its
 *      output does not depend on them): rows t
 *      with a changed q, rows >= the first changed k or v (all rows >=
 *      the first dx row), and att-masked rows (copied from the source;
 *      they change if the row or a value up to t does). Per (b, h) in
 *      parallel: that head's keys and values are gathered (base's or
 *      new) and the rows are computed in attention_forward's blocks;
 *   4. z mask: gate · source z;
 *   5. next residual, at the dx rows and the rows where some head's zg
 *      changed: x (+ b_O) + zg·W_O as one sgemm on gathered rows, or, for rows
 *      whose residual was unchanged when only a few heads changed (e.g. a
 *      z patch of one head), base's next residual + Δzg·W_O over those
 *      heads alone. A z patch at the last layer thus costs a D×C product
 *      per row and no attention at all.
 * Then the x mask of layer L and the output: dx rows from the work
 * buffer, every other row copied from base.
 *
 * Cost: nothing before the first patched layer; after it, per layer, the
 * q|k|v product of the changed residual rows only, the attention rows
 * >= the first changed row (a fraction 1 − (t0/T)² of a layer's
 * attention) and x + zg·W_O of the changed rows. For the head_pos sweep
 * of `make bench` (2 layers, T 101) that averages a few percent of a
 * full patched forward's FLOPs, whose unembedding (half of them) it skips
 * entirely: the caller unembeds only dirty positions.
 *
 * A patch whose source equals base's value (bitwise, in every sequence)
 * changes nothing and is skipped, so for example patching positions where
 * the two runs agree costs a comparison.
 *
 * Bits: a value recomputed from the same inputs is computed with the same
 * arithmetic as al_model_forward (the same fused sgemm per row, attention
 * rows in the same ATT_BLOCK blocks against the same number of keys, the
 * same softmax, gate and patched-row code via layers.h and
 * model_internal.h), so e.g. patching every position of a layer with
 * another run's residual gives that run's final residual bit for bit; the
 * analysis' identity tests rely on this. It assumes the matrix product
 * computes an element the same way whatever the number of rows (al_sgemm
 * on oneDNN guarantees it, gemm.h; OpenBLAS's x86 kernels too, which
 * split work over rows and columns, never over the summed dimension). Only the Δzg form of step 5 rounds differently from
 * the full forward (within float rounding; it is never used where every
 * head of a row changed).
 *
 * Scratch lives in the caller's al_delta_ws; m's activations are not
 * touched, and m's hooks are not run. The only
 * parallel loop is over (b, h), each result computed by one thread with
 * single-threaded sgemms, so the same thread count gives the same bits. */
#include "attnlab/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attnlab/gemm.h"
#include "attnlab/layers.h"
#include "model_internal.h"

typedef struct dstate {
    const al_model *m;
    const al_acts *base;
    const al_patch_spec *sp;
    int B, T, C, H, D, HD, L;
    size_t BT;
    float *x[2]; /* (B,T,C) residual rows of the patched run, valid at dx rows */
    float *qkv; /* (B,T,3,H,D) this layer's q|k|v, valid where chg */
    float *zg; /* (B,T,H,D) this layer's gated z, valid where zc */
    float *gin, *gout; /* gathered rows (BT, max(C,HD)) and (BT, max(3HD,C)) */
    float *wqkv; /* (C, 3HD) fused weights */
    float *pos; /* (T, 2HD) shortformer: W_pos W_Q | W_pos W_K of this layer */
    float *lnm, *lns; /* (BT) LayerNorm: ln1's mean and scale of the recomputed rows */
    float *ts; /* attention scratch, ts_n floats per thread */
    size_t ts_n;
    int nthreads;
    unsigned char *dx, *dxn; /* (T) residual row entering this / the next layer differs */
    unsigned char *chg; /* (3,H,T) q/k/v of (s,h,t) differs from base's */
    unsigned char *need; /* (H,T) attention row (h,t) is recomputed */
    unsigned char *zc; /* (H,T) zg of head h at t differs from base's */
    unsigned char *hmask; /* (H) */
    int *full, *part; /* (T) position lists */
    int *heads; /* (H) heads with rows to recompute */
} dstate;

/* out (M,N) = a (M,K) · w (K,N) + beta · out, row-major with leading
 * dimensions lda, ldw, ldo, as one single-threaded sgemm per thread on
 * its share of the rows. OpenBLAS would thread the product itself (above
 * M·N·K = 4·65536, its threshold), but its threads hand packed panels to
 * each other by spinning on flags, which on shared cores costs more than
 * these products: the head_pos sweep's incremental forwards took 13 ms
 * each that way, 8 ms this way and 2 ms on one thread, with other
 * processes on both cores (measured on OpenBLAS; on oneDNN each share
 * is a one-thread primitive). An element's value does not depend on the
 * split (gemm.h). */
static void rows_sgemm(int M, int N, int K, const float *a, int lda, const float *w, int ldw,
                       float beta, float *out, int ldo, int nthreads) {
    int nc = (double)M * N * K < 4 * 65536.0 ? 1 : nthreads < M ? nthreads : M;
#pragma omp parallel for schedule(static) num_threads(nc) if (nc > 1)
    for (int i = 0; i < nc; i++) {
        int r0 = (int)((long)M * i / nc), r1 = (int)((long)M * (i + 1) / nc);
        al_sgemm(false, false, r1 - r0, N, K, 1.0f, a + (size_t)r0 * lda, lda, w, ldw, beta,
                 out + (size_t)r0 * ldo, ldo);
    }
}

static int any_set(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 1;
    return 0;
}

/* The first layer (0..L) a mask touches; L+1 when none does. */
static int first_layer(const dstate *s) {
    const al_patch_spec *p = s->sp;
    size_t T = s->T, HT = (size_t)s->H * T;
    if (!p) return s->L + 1;
    for (int l = 0; l <= s->L; l++) {
        if (p->x_mask && any_set(p->x_mask + l * T, T)) return l;
        if (l == s->L) break;
        if ((p->z_mask && any_set(p->z_mask + l * HT, HT)) ||
            (p->qkv_mask && any_set(p->qkv_mask + l * 3 * HT, 3 * HT)) ||
            (p->att_mask && any_set(p->att_mask + l * HT, HT)))
            return l;
    }
    return s->L + 1;
}

/* Carve the scratch out of ws, growing it if needed. */
static int scratch(al_delta_ws *ws, dstate *s, al_err *e) {
    size_t BT = s->BT, C = s->C, HD = s->HD, T = s->T, H = s->H, D = s->D;
    size_t AB = T < ATT_BLOCK ? T : ATT_BLOCK;
    size_t n_gin = BT * (C > HD ? C : HD), n_gout = BT * (3 * HD > C ? 3 * HD : C);
    s->nthreads = al_get_threads() > 0 ? al_get_threads() : 1;
    s->ts_n = 2 * T * D + 2 * AB * D + AB * T; /* K, V, Q block, z block, scores */
    size_t nf = 2 * BT * C + BT * 3 * HD + BT * HD + n_gin + n_gout + C * 3 * HD + T * 2 * HD +
                2 * BT + (size_t)s->nthreads * s->ts_n;
    size_t ni = 2 * T + H, nb = (2 + 5 * H) * T + H;
    size_t total = nf + ni + (nb + sizeof(float) - 1) / sizeof(float);
    if (ws->cap < total) {
        float *p = al_malloc(total, sizeof(float), e);
        if (!p) return al_err_prefix(e, "incremental patched forward");
        free(ws->p);
        ws->p = p;
        ws->cap = total;
    }
    float *f = ws->p;
    s->x[0] = f, f += BT * C;
    s->x[1] = f, f += BT * C;
    s->qkv = f, f += BT * 3 * HD;
    s->zg = f, f += BT * HD;
    s->gin = f, f += n_gin;
    s->gout = f, f += n_gout;
    s->wqkv = f, f += C * 3 * HD;
    s->pos = f, f += T * 2 * HD;
    s->lnm = f, f += BT;
    s->lns = f, f += BT;
    s->ts = f, f += (size_t)s->nthreads * s->ts_n;
    int *ip = (int *)f; /* int and float have the same size and alignment here */
    s->full = ip, ip += T;
    s->part = ip, ip += T;
    s->heads = ip, ip += H;
    unsigned char *b = (unsigned char *)ip;
    s->dx = b, b += T;
    s->dxn = b, b += T;
    s->chg = b, b += 3 * H * T;
    s->need = b, b += H * T;
    s->zc = b, b += H * T;
    s->hmask = b;
    return 0;
}

/* Step 1 (and the final residual, l = L): x-masked rows from the source
 * unless they already hold exactly that in every sequence. */
static void x_patch(dstate *s, int l, float *X) {
    const al_patch_spec *p = s->sp;
    if (!p || !p->x_mask) return;
    size_t T = s->T, C = s->C, lo = (size_t)l * s->BT * C;
    const unsigned char *xm = p->x_mask + l * T;
    for (size_t t = 0; t < T; t++) {
        if (!xm[t]) continue;
        int differs = 0;
        for (int b = 0; b < s->B && !differs; b++) {
            size_t off = ((size_t)b * T + t) * C;
            const float *cur = s->dx[t] ? X + off : s->base->x + lo + off;
            differs = memcmp(cur, p->src_x + lo + off, sizeof(float) * C) != 0;
        }
        if (!differs) continue;
        for (int b = 0; b < s->B; b++) {
            size_t off = ((size_t)b * T + t) * C;
            memcpy(X + off, p->src_x + lo + off, sizeof(float) * C);
        }
        s->dx[t] = 1;
    }
}

/* Step 2: q, k, v at the dx rows, then the q/k/v mask. */
static void qkv_layer(dstate *s, int l, const float *X) {
    size_t T = s->T, C = s->C, HD = s->HD, H = s->H, D = s->D, rs = 3 * HD;
    int np = 0;
    memset(s->chg, 0, 3 * H * T);
    for (size_t t = 0; t < T; t++)
        if (s->dx[t]) s->full[np++] = (int)t;
    if (np) {
        const al_model *m = s->m;
        const int ln = m->cfg.norm_type != AL_NORM_NONE;
        const float *lw = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
        const float *lb = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l * C : NULL;
        model_fuse_qkv(s->wqkv, m, l);
        if ((size_t)np == T) {
            const float *in = X;
            if (ln) { /* ln1 of every row, as the forward's layernorm_forward */
                layernorm_forward(s->gin, s->lnm, s->lns, X, lw, lb, s->BT, (int)C, m->cfg.ln_eps);
                in = s->gin;
            }
            rows_sgemm((int)s->BT, (int)rs, (int)C, in, (int)C, s->wqkv, (int)rs, 0.0f, s->qkv,
                       (int)rs, s->nthreads);
        } else {
            int M = s->B * np;
            for (int b = 0; b < s->B; b++)
                for (int j = 0; j < np; j++)
                    memcpy(s->gin + ((size_t)b * np + j) * C, X + ((size_t)b * T + s->full[j]) * C,
                           sizeof(float) * C);
            if (ln) /* row by row: the same bits as over every row */
                layernorm_forward(s->gin, s->lnm, s->lns, s->gin, lw, lb, (size_t)M, (int)C,
                                  m->cfg.ln_eps);
            rows_sgemm(M, (int)rs, (int)C, s->gin, (int)C, s->wqkv, (int)rs, 0.0f, s->gout, (int)rs,
                       s->nthreads);
            for (int b = 0; b < s->B; b++)
                for (int j = 0; j < np; j++)
                    memcpy(s->qkv + ((size_t)b * T + s->full[j]) * rs,
                           s->gout + ((size_t)b * np + j) * rs, sizeof(float) * rs);
        }
        /* the forward's qkv_extras on the recomputed rows: b_Q, b_K, b_V,
         * then the shortformer positions (posqk_project over all T
         * positions, as the forward, so the same bits) */
        const float *b3[3];
        for (int k = 0; k < 3; k++)
            b3[k] = m->p[AL_P_BQ + k] ? m->p[AL_P_BQ + k] + (size_t)l * HD : NULL;
        const int sf = m->cfg.pos_type == AL_POS_SHORTFORMER;
        if (sf) posqk_project(s->pos, m->p[AL_P_WPOS], s->wqkv, (int)T, (int)C, (int)HD);
        for (int b = 0; (sf || b3[0] || b3[1] || b3[2]) && b < s->B; b++)
            for (int j = 0; j < np; j++) {
                float *r = s->qkv + ((size_t)b * T + s->full[j]) * rs;
                for (int k = 0; k < 3; k++) {
                    if (!b3[k]) continue;
                    float *o = r + (size_t)k * HD;
                    for (size_t i = 0; i < HD; i++) o[i] += b3[k][i];
                }
                if (!sf) continue;
                const float *pp = s->pos + (size_t)s->full[j] * 2 * HD;
                for (size_t i = 0; i < 2 * HD; i++) r[i] += pp[i];
            }
        for (size_t sh = 0; sh < 3 * H; sh++)
            for (int j = 0; j < np; j++) s->chg[sh * T + s->full[j]] = 1;
    }
    const al_patch_spec *p = s->sp;
    if (!p || !p->qkv_mask) return;
    const unsigned char *qm = p->qkv_mask + (size_t)l * 3 * H * T;
    size_t lo = (size_t)l * s->BT * rs;
    for (size_t k = 0; k < 3 * H * T; k++) {
        if (!qm[k]) continue;
        size_t sh = k / T, t = k % T, slot = (sh / H) * HD + (sh % H) * D;
        int differs = 0;
        for (int b = 0; b < s->B && !differs; b++) {
            size_t off = ((size_t)b * T + t) * rs + slot;
            const float *cur = s->chg[k] ? s->qkv + off : s->base->qkv + lo + off;
            differs = memcmp(cur, p->src_qkv + lo + off, sizeof(float) * D) != 0;
        }
        if (!differs) continue;
        for (int b = 0; b < s->B; b++) {
            size_t off = ((size_t)b * T + t) * rs + slot;
            memcpy(s->qkv + off, p->src_qkv + lo + off, sizeof(float) * D);
        }
        s->chg[k] = 1;
    }
}

/* Does att-masked row (h, t) of the source differ from base's row? */
static int att_row_differs(const dstate *s, int l, int h, int t) {
    size_t T = s->T;
    for (int b = 0; b < s->B; b++) {
        size_t ro = ((((size_t)l * s->B + b) * s->H + h) * T + t) * T;
        if (memcmp(s->sp->src_att + ro, s->base->att + ro, sizeof(float) * (t + 1))) return 1;
    }
    return 0;
}

/* Step 3's plan: need (H,T), zc = need, and the list of heads with rows.
 * Returns the number of such heads. */
static int plan_heads(dstate *s, int l) {
    int T = s->T, H = s->H, nh = 0;
    const al_patch_spec *p = s->sp;
    memset(s->need, 0, (size_t)H * T);
    memset(s->zc, 0, (size_t)H * T);
    for (int h = 0; h < H; h++) {
        if (s->base->zfixed[l * H + h]) continue; /* zg is gate · what a hook set */
        const unsigned char *cq = s->chg + (size_t)h * T, *ck = cq + (size_t)H * T,
                            *cv = ck + (size_t)H * T;
        const unsigned char *zm = p && p->z_mask ? p->z_mask + ((size_t)l * H + h) * T : NULL;
        const unsigned char *am = p && p->att_mask ? p->att_mask + ((size_t)l * H + h) * T : NULL;
        int kvf = T, vf = T;
        for (int u = 0; u < T && kvf == T; u++)
            if (ck[u] || cv[u]) kvf = u;
        for (int u = 0; u < T && vf == T; u++)
            if (cv[u]) vf = u;
        unsigned char *need = s->need + (size_t)h * T;
        int any = 0;
        for (int t = 0; t < T; t++) {
            if (zm && zm[t]) continue; /* its z is the source's whatever attention does */
            if (am && am[t])
                need[t] = vf <= t || att_row_differs(s, l, h, t);
            else
                need[t] = cq[t] || kvf <= t;
            any |= need[t];
        }
        if (any) s->heads[nh++] = h;
    }
    memcpy(s->zc, s->need, (size_t)H * T);
    return nh;
}

/* Step 3 for one (b, h): the needed rows' z, gated, into s->zg. ts is
 * this thread's scratch. Rows go in attention_forward's blocks: block
 * [t0, t0+nt) scores against keys 0..t0+nt−1 with one sgemm, takes
 * attention_softmax_row, and sums values over the same keys. */
static void head_rows(const dstate *s, int l, int b, int h, float *ts) {
    const int T = s->T, D = s->D, HD = s->HD, H = s->H;
    const size_t rs = 3 * (size_t)HD;
    const unsigned char *need = s->need + (size_t)h * T, *cq = s->chg + (size_t)h * T,
                        *ck = cq + (size_t)H * T, *cv = ck + (size_t)H * T;
    const unsigned char *am =
        s->sp && s->sp->att_mask ? s->sp->att_mask + ((size_t)l * H + h) * T : NULL;
    const float *bq = s->base->qkv + (size_t)l * s->BT * rs + (size_t)b * T * rs + (size_t)h * D;
    const float *nq = s->qkv + (size_t)b * T * rs + (size_t)h * D;
    float *zg = s->zg + (size_t)b * T * HD + (size_t)h * D;
    const float g = s->m->gates[l * H + h], scale = 1.0f / sqrtf((float)D);
    int last = T - 1;
    while (!need[last]) last--;
    int nk = (last / ATT_BLOCK + 1) * ATT_BLOCK;
    if (nk > T) nk = T;
    int AB = T < ATT_BLOCK ? T : ATT_BLOCK;
    float *K = ts, *V = K + (size_t)T * D, *Q = V + (size_t)T * D, *Z = Q + (size_t)AB * D,
          *S = Z + (size_t)AB * D; /* S (AB, T) */
    for (int u = 0; u < nk; u++) {
        memcpy(K + (size_t)u * D, (ck[u] ? nq : bq) + u * rs + HD, sizeof(float) * D);
        memcpy(V + (size_t)u * D, (cv[u] ? nq : bq) + u * rs + 2 * HD, sizeof(float) * D);
    }
    for (int t0 = 0; t0 < nk; t0 += ATT_BLOCK) {
        int nt = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK, nkb = t0 + nt, rows[ATT_BLOCK], n = 0;
        for (int t = t0; t < nkb; t++)
            if (need[t] && !(am && am[t])) rows[n++] = t;
        if (n) {
            for (int i = 0; i < n; i++)
                memcpy(Q + (size_t)i * D, (cq[rows[i]] ? nq : bq) + rows[i] * rs,
                       sizeof(float) * D);
            al_sgemm(false, true, n, nkb, D, scale, Q, D, K, D, 0.0f, S, T);
            for (int i = 0; i < n; i++) attention_softmax_row(S + (size_t)i * T, rows[i] + 1, T);
            al_sgemm(false, false, n, D, nkb, 1.0f, S, T, V, D, 0.0f, Z, D);
            for (int i = 0; i < n; i++)
                model_gate_row(zg + (size_t)rows[i] * HD, Z + (size_t)i * D, g, D);
        }
        for (int t = t0; am && t < nkb; t++) {
            if (!need[t] || !am[t]) continue;
            const float *row =
                s->sp->src_att + ((((size_t)l * s->B + b) * H + h) * T + t) * (size_t)T;
            model_att_row_z(Z, row, t, V, (size_t)D, D);
            model_gate_row(zg + (size_t)t * HD, Z, g, D);
        }
    }
}

static void attention_layer(dstate *s, int l, int nh) {
    int n = s->B * nh;
#pragma omp parallel for schedule(dynamic)
    for (int i = 0; i < n; i++) {
#ifdef _OPENMP
        int th = omp_get_thread_num();
#else
        int th = 0;
#endif
        head_rows(s, l, i / nh, s->heads[i % nh], s->ts + (size_t)th * s->ts_n);
    }
}

/* Step 4: z-masked (h, t): gate · source z, marked changed unless equal
 * to base's zg in every sequence. */
static void z_patch(dstate *s, int l) {
    const al_patch_spec *p = s->sp;
    if (!p || !p->z_mask) return;
    size_t T = s->T, H = s->H, D = s->D, HD = s->HD;
    const unsigned char *zm = p->z_mask + (size_t)l * H * T;
    size_t lo = (size_t)l * s->BT * HD;
    for (size_t k = 0; k < H * T; k++) {
        if (!zm[k]) continue;
        size_t h = k / T, t = k % T;
        float g = s->m->gates[l * H + h];
        int differs = 0;
        for (int b = 0; b < s->B; b++) {
            size_t off = ((size_t)b * T + t) * HD + h * D;
            model_gate_row(s->zg + off, p->src_z + lo + off, g, (int)D);
            differs |= memcmp(s->zg + off, s->base->zg + lo + off, sizeof(float) * D) != 0;
        }
        s->zc[k] = (unsigned char)differs;
    }
}

/* Step 5: Xn rows of the next residual that differ from base's; sets dxn. */
static void resid_layer(dstate *s, int l, const float *X, float *Xn) {
    const al_model *m = s->m;
    size_t T = s->T, C = s->C, HD = s->HD, D = s->D;
    int H = s->H, B = s->B, nf = 0, nd = 0, nh = 0;
    const float *bx = s->base->x + (size_t)l * s->BT * C, *bxn = bx + s->BT * C;
    const float *bzg = s->base->zg + (size_t)l * s->BT * HD;
    const float *wo = m->p[AL_P_WO] + (size_t)l * HD * C;
    const float *bo = m->p[AL_P_BO] ? m->p[AL_P_BO] + (size_t)l * C : NULL;
    memset(s->hmask, 0, (size_t)H);
    for (size_t t = 0; t < T; t++) {
        if (s->dx[t]) {
            s->full[nf++] = (int)t;
            continue;
        }
        int any = 0;
        for (int h = 0; h < H; h++)
            if (s->zc[(size_t)h * T + t]) any = s->hmask[h] = 1;
        if (any) s->part[nd++] = (int)t;
    }
    for (int h = 0; h < H; h++) nh += s->hmask[h];
    if (nd && 2 * nh > H) { /* the Δ form would not save much: use the full one */
        for (int j = 0; j < nd; j++) s->full[nf++] = s->part[j];
        nd = 0;
    }
    size_t Mf = (size_t)B * nf, Md = (size_t)B * nd;
    /* full form: x (+ b_O) + zg·W_O, as the forward computes it */
    for (int b = 0; b < B; b++)
        for (int j = 0; j < nf; j++) {
            size_t i = (size_t)b * nf + j, t = s->full[j], r = (size_t)b * T + t;
            for (int h = 0; h < H; h++)
                memcpy(s->gin + i * HD + h * D,
                       (s->zc[(size_t)h * T + t] ? s->zg : bzg) + r * HD + h * D,
                       sizeof(float) * D);
            const float *xr = (s->dx[t] ? X : bx) + r * C;
            if (bo) /* x + b_O, as the forward's copy_bias_forward */
                for (size_t k = 0; k < C; k++) s->gout[i * C + k] = xr[k] + bo[k];
            else
                memcpy(s->gout + i * C, xr, sizeof(float) * C);
        }
    if (Mf)
        rows_sgemm((int)Mf, (int)C, (int)HD, s->gin, (int)HD, wo, (int)C, 1.0f, s->gout, (int)C,
                   s->nthreads);
    /* Δ form: base's next residual + (zg − base zg)·W_O over the changed heads */
    float *gi = s->gin + Mf * HD, *go = s->gout + Mf * C;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < nd; j++) {
            size_t i = (size_t)b * nd + j, t = s->part[j], r = (size_t)b * T + t;
            memcpy(go + i * C, bxn + r * C, sizeof(float) * C);
            for (int h = 0; h < H; h++) {
                if (!s->hmask[h]) continue;
                float *d = gi + i * HD + h * D;
                const float *zn = s->zg + r * HD + h * D, *zb = bzg + r * HD + h * D;
                if (s->zc[(size_t)h * T + t])
                    for (size_t k = 0; k < D; k++) d[k] = zn[k] - zb[k];
                else
                    memset(d, 0, sizeof(float) * D);
            }
        }
    for (int h = 0; Md && h < H; h++)
        if (s->hmask[h])
            rows_sgemm((int)Md, (int)C, (int)D, gi + h * D, (int)HD, al_head_wo(m, l, h), (int)C,
                       1.0f, go, (int)C, s->nthreads);
    memset(s->dxn, 0, T);
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < nf; j++)
            memcpy(Xn + ((size_t)b * T + s->full[j]) * C, s->gout + ((size_t)b * nf + j) * C,
                   sizeof(float) * C);
        for (int j = 0; j < nd; j++)
            memcpy(Xn + ((size_t)b * T + s->part[j]) * C, go + ((size_t)b * nd + j) * C,
                   sizeof(float) * C);
    }
    for (int j = 0; j < nf; j++) s->dxn[s->full[j]] = 1;
    for (int j = 0; j < nd; j++) s->dxn[s->part[j]] = 1;
}

void al_delta_ws_free(al_delta_ws *ws) {
    free(ws->p);
    ws->p = NULL, ws->cap = 0;
}

int al_model_forward_delta(al_model *m, const al_acts *base, const al_patch_spec *sp, float *xL,
                           unsigned char *dirty, al_delta_ws *ws, al_err *e) {
    const al_config *c = &m->cfg;
    if (!base || !base->x || base->B < 1 || base->T < 1 || base->T > c->n_ctx)
        return al_errf(e,
                       "incremental patched forward: the run cache has batch shape %dx%d "
                       "(needs B >= 1 and 1 <= T <= n_ctx %d)",
                       base ? base->B : 0, base ? base->T : 0, c->n_ctx);
    if (sp && ((sp->x_mask && !sp->src_x) || (sp->z_mask && !sp->src_z) ||
               (sp->qkv_mask && !sp->src_qkv) || (sp->att_mask && !sp->src_att)))
        return al_errf(e, "patch spec has a mask without its source activations");
    dstate s = {.m = m,
                .base = base,
                .sp = sp,
                .B = base->B,
                .T = base->T,
                .C = c->d_model,
                .H = c->n_heads,
                .D = c->d_head,
                .HD = c->n_heads * c->d_head,
                .L = c->n_layers};
    s.BT = (size_t)s.B * s.T;
    size_t T = s.T, C = s.C, BTC = s.BT * C;
    const float *bxL = base->x + (size_t)s.L * BTC;
    int l0 = first_layer(&s);
    if (l0 > s.L) { /* nothing patched */
        memcpy(xL, bxL, sizeof(float) * BTC);
        memset(dirty, 0, T);
        return 0;
    }
    al_delta_ws own = {0};
    if (scratch(ws ? ws : &own, &s, e)) return -1;
    memset(s.dx, 0, T);
    int cur = 0;
    for (int l = l0; l < s.L; l++) {
        float *X = s.x[cur];
        x_patch(&s, l, X);
        qkv_layer(&s, l, X);
        int nh = plan_heads(&s, l);
        if (nh) attention_layer(&s, l, nh);
        z_patch(&s, l);
        resid_layer(&s, l, X, s.x[1 - cur]);
        memcpy(s.dx, s.dxn, T);
        cur = 1 - cur;
    }
    x_patch(&s, s.L, s.x[cur]);
    for (int b = 0; b < s.B; b++)
        for (size_t t = 0; t < T; t++) {
            size_t off = ((size_t)b * T + t) * C;
            memcpy(xL + off, (s.dx[t] ? s.x[cur] : bxL) + off, sizeof(float) * C);
        }
    memcpy(dirty, s.dx, T);
    al_delta_ws_free(&own);
    return 0;
}
