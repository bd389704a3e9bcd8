/* sae.c -- the sparse autoencoder of sae.h: initialisation, forward,
 * backward, dead-latent counters and Adam.
 *
 * Why this shape: the encoder's forward is the only dense product (one
 * sgemm, B × d_in × d_sae); with TopK everything else touches only the k
 * active latents per row (and the k_aux aux ones). The backward gathers
 * the (row, latent) pairs by latent (a counting sort) and accumulates each
 * latent's gradient rows over the batch in row order, so the result does
 * not depend on the number of threads and no two threads write the same
 * gradient. */
#include "attnlab/sae.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>

#include "attnlab/gemm.h"
#endif

/* scratch slots for the parallel loops: one per possible thread */
static int max_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
static int thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

const char *al_sae_arch_name(int arch) {
    return arch == AL_SAE_TOPK ? "topk" : arch == AL_SAE_L1 ? "standard" : NULL;
}

int al_sae_arch_parse(const char *name, int *arch) {
    for (int a = AL_SAE_TOPK; a <= AL_SAE_L1; a++)
        if (name && strcmp(name, al_sae_arch_name(a)) == 0) {
            *arch = a;
            return 0;
        }
    return -1;
}

al_sae_cfg al_sae_cfg_default(int d_in, int d_sae) {
    al_sae_cfg c = {.d_in = d_in,
                    .d_sae = d_sae,
                    .arch = AL_SAE_TOPK,
                    .k = 32,
                    .k_aux = d_in / 2 > 0 ? d_in / 2 : 1,
                    .aux_coeff = 1.0 / 32,
                    .l1_coeff = 5.0,
                    .dead_tokens = 1000000};
    if (d_sae > 0 && c.k > d_sae) c.k = d_sae;
    if (d_sae > 0 && c.k_aux > d_sae) c.k_aux = d_sae;
    return c;
}

#define SAE_MAX_DIM (1 << 20)

int al_sae_cfg_check(const al_sae_cfg *c, al_err *e) {
    if (c->d_in < 1 || c->d_in > SAE_MAX_DIM)
        return al_errf(e, "d_in must be in 1..%d (got %d)", SAE_MAX_DIM, c->d_in);
    if (c->d_sae < 1 || c->d_sae > SAE_MAX_DIM)
        return al_errf(e, "d_sae must be in 1..%d (got %d)", SAE_MAX_DIM, c->d_sae);
    if ((double)c->d_in * c->d_sae > 2147483648.0)
        return al_errf(e, "d_in x d_sae must be at most 2^31 (got %d x %d)", c->d_in, c->d_sae);
    if (!al_sae_arch_name(c->arch))
        return al_errf(e, "architecture must be topk or standard (got %d)", c->arch);
    if (c->arch == AL_SAE_TOPK) {
        if (c->k < 1 || c->k > c->d_sae)
            return al_errf(e, "k must be in 1..d_sae (%d) (got %d)", c->d_sae, c->k);
        if (c->k_aux < 0 || c->k_aux > c->d_sae)
            return al_errf(e, "k_aux must be in 0..d_sae (%d) (got %d)", c->d_sae, c->k_aux);
        if (!isfinite(c->aux_coeff) || c->aux_coeff < 0)
            return al_errf(e, "aux_coeff must be finite and >= 0 (got %g)", c->aux_coeff);
    } else {
        if (!isfinite(c->l1_coeff) || c->l1_coeff <= 0)
            return al_errf(e, "l1_coeff must be finite and > 0 (got %g)", c->l1_coeff);
    }
    if (c->dead_tokens < 1 || c->dead_tokens > 2147483647L)
        return al_errf(e, "dead_tokens must be in 1..2^31-1 (got %ld)", c->dead_tokens);
    return 0;
}

double al_sae_bytes(const al_sae_cfg *c, int B) {
    const double d = c->d_in, n = c->d_sae, Bd = (double)B * d, th = max_threads();
    const int topk = c->arch == AL_SAE_TOPK;
    const double k = topk ? c->k : 0, ka = topk ? c->k_aux : 0, dense = topk ? 0 : n;
    const double np = 2 * d * n + n + d;
    double b = np * 2 * sizeof(float) + n * sizeof(long); /* al_sae_alloc */
    b += (double)B * (4 * d + n + dense + 2 * k + 2 * ka) * sizeof(float); /* grow_acts */
    if (topk) {
        const double ne = (double)B * (k + ka); /* backward_topk */
        b += 2 * Bd * sizeof(float) + (n + 1) * sizeof(int) + ne * (16 + sizeof(float)) +
             n * d * sizeof(float);
        b += th * (k + ka) * 8 + th * n * sizeof(int); /* forward's heaps */
    } else {
        b += (Bd + (double)B * n + 2 * n) * sizeof(float); /* backward_l1 */
    }
    return b;
}

void al_sae_free(al_sae *s) {
    free(s->params);
    free(s->since);
    free(s->xin);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}

int al_sae_alloc(al_sae *s, const al_sae_cfg *c, al_err *e) {
    memset(s, 0, sizeof *s);
    if (al_sae_cfg_check(c, e) != 0) return -1;
    s->cfg = *c;
    size_t din = (size_t)c->d_in, dsae = (size_t)c->d_sae;
    s->n_params = 2 * din * dsae + dsae + din;
    s->params = al_calloc(s->n_params, 2 * sizeof(float), e);
    s->since = al_calloc(dsae, sizeof(long), e);
    if (!s->params || !s->since) {
        al_sae_free(s);
        return -1;
    }
    s->W_enc = s->params;
    s->b_enc = s->W_enc + din * dsae;
    s->W_dec = s->b_enc + dsae;
    s->b_dec = s->W_dec + dsae * din;
    s->grads = s->params + s->n_params;
    s->gW_enc = s->grads;
    s->gb_enc = s->gW_enc + din * dsae;
    s->gW_dec = s->gb_enc + dsae;
    s->gb_dec = s->gW_dec + dsae * din;
    return 0;
}

void al_sae_normalize_decoder(al_sae *s) {
    const int n = s->cfg.d_sae, d = s->cfg.d_in;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *w = s->W_dec + (size_t)i * d;
        double q = 0;
        for (int r = 0; r < d; r++) q += (double)w[r] * w[r];
        if (q > 0) {
            float inv = (float)(1.0 / sqrt(q));
            for (int r = 0; r < d; r++) w[r] *= inv;
        }
    }
}

int al_sae_init(al_sae *s, const al_sae_cfg *c, uint64_t seed, al_err *e) {
    if (al_sae_alloc(s, c, e) != 0) return -1;
    al_rng rng;
    al_rng_seed(&rng, seed);
    const size_t d = (size_t)c->d_in, n = (size_t)c->d_sae;
    for (size_t i = 0; i < n * d; i++) s->W_dec[i] = (float)al_rng_normal(&rng);
    al_sae_normalize_decoder(s);
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < d; r++) s->W_enc[r * n + i] = s->W_dec[i * d + r];
    return 0;
}

void al_sae_init_b_dec_mean(al_sae *s, const float *x, int n) {
    const int d = s->cfg.d_in;
    for (int r = 0; r < d; r++) {
        double a = 0;
        for (int b = 0; b < n; b++) a += x[(size_t)b * d + r];
        s->b_dec[r] = n > 0 ? (float)(a / n) : 0.0f;
    }
}

/* ------------------------------------------------------------ forward */

static int grow_acts(al_sae *s, int B, al_err *e) {
    if (B <= s->B_cap) return 0;
    const size_t d = (size_t)s->cfg.d_in, n = (size_t)s->cfg.d_sae;
    const size_t k = s->cfg.arch == AL_SAE_TOPK ? (size_t)s->cfg.k : 0;
    const size_t ka = s->cfg.arch == AL_SAE_TOPK ? (size_t)s->cfg.k_aux : 0;
    const size_t dense = s->cfg.arch == AL_SAE_L1 ? n : 0;
    /* floats: xin, xc, xhat, ehat (B·d each), pre (B·n), f (B·dense),
     * val (B·k), aval (B·ka); ints: idx (B·k), aidx (B·ka) */
    size_t per_row = 4 * d + n + dense + 2 * k + 2 * ka, tot;
    if (al_mul_overflow(per_row, (size_t)B, &tot) != 0)
        return al_errf(e, "SAE batch of %d rows is too large", B);
    float *p = al_malloc(tot, sizeof(float), e);
    if (!p) return -1;
    free(s->xin);
    size_t Bs = (size_t)B;
    s->xin = p;
    s->xc = p += Bs * d;
    s->xhat = p += Bs * d;
    s->ehat = p += Bs * d;
    s->pre = p += Bs * d;
    p += Bs * n;
    s->f = dense ? p : NULL;
    p += Bs * dense;
    s->val = p;
    p += Bs * k;
    s->aval = p;
    p += Bs * ka;
    s->idx = (int *)p;
    p += Bs * k;
    s->aidx = (int *)p;
    s->B_cap = B;
    return 0;
}

/* a ranks before b: larger value, then lower index (a total order, so
 * the selection is deterministic, ties included) */
static inline int better(float av, int ai, float bv, int bi) {
    return av > bv || (av == bv && ai < bi);
}

typedef struct {
    float v;
    int i;
} vi_t;

static void sift_down(vi_t *h, int n, int p) {
    /* min-heap by rank: the root is the worst kept */
    for (;;) {
        int c = 2 * p + 1, w = p;
        if (c < n && better(h[w].v, h[w].i, h[c].v, h[c].i)) w = c;
        if (c + 1 < n && better(h[w].v, h[w].i, h[c + 1].v, h[c + 1].i)) w = c + 1;
        if (w == p) return;
        vi_t t = h[p];
        h[p] = h[w];
        h[w] = t;
        p = w;
    }
}

static int cmp_rank(const void *a, const void *b) {
    const vi_t *x = a, *y = b;
    return better(x->v, x->i, y->v, y->i) ? -1 : better(y->v, y->i, x->v, x->i) ? 1 : 0;
}

/* Offer (v, i) to the heap of the n ≤ k best kept so far; *thr is the
 * heap's worst value once it holds k. */
static inline void heap_offer(vi_t *heap, int *n, int k, float v, int i, float *thr) {
    if (*n < k) {
        /* sift up */
        int c = (*n)++;
        heap[c] = (vi_t){v, i};
        while (c > 0) {
            int p = (c - 1) / 2;
            if (!better(heap[p].v, heap[p].i, heap[c].v, heap[c].i)) break;
            vi_t t = heap[p];
            heap[p] = heap[c];
            heap[c] = t;
            c = p;
        }
        if (*n == k) *thr = heap[0].v;
    } else if (better(v, i, heap[0].v, heap[0].i)) {
        heap[0] = (vi_t){v, i};
        sift_down(heap, *n, 0);
        *thr = heap[0].v;
    }
}

/* The k best of row[cand[j]] (cand NULL: of row[0..m)), by descending
 * rank, into out_i / out_v (ReLU applied to the value). heap: k slots.
 * Once the heap is full, an entry below its worst value can never enter
 * (exact, ties included), so a dense row is scanned in chunks of 16 whose
 * maximum (one vector reduction) is compared first: after the first few
 * hundred entries almost every chunk is skipped whole. */
static void select_top(const float *row, const int *cand, int m, int k, vi_t *heap, int *out_i,
                       float *out_v) {
    enum { CH = 16 };
    int n = 0;
    float thr = -INFINITY;
    for (int j = 0; j < m; j += CH) {
        int end = j + CH < m ? j + CH : m;
        if (!cand && n == k) {
            float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
            for (int t = j; t < end; t++) mx = row[t] > mx ? row[t] : mx;
            if (mx < thr) continue;
        }
        for (int t = j; t < end; t++) {
            int i = cand ? cand[t] : t;
            float v = row[i];
            if (n == k && v < thr) continue;
            heap_offer(heap, &n, k, v, i, &thr);
        }
    }
    qsort(heap, (size_t)n, sizeof *heap, cmp_rank);
    for (int j = 0; j < n; j++) {
        out_i[j] = heap[j].i;
        out_v[j] = heap[j].v > 0 ? heap[j].v : 0.0f;
    }
}

/* out += Σ_j vv[j]·W_dec[ii[j]] over the k selected latents: the sparse
 * decode of one row, for the main code and the auxiliary (dead) one. */
static void decode_add(float *out, const int *ii, const float *vv, int k, const float *W_dec,
                       int d) {
    for (int j = 0; j < k; j++) {
        if (vv[j] == 0) continue;
        const float *w = W_dec + (size_t)ii[j] * d;
#pragma omp simd
        for (int r = 0; r < d; r++) out[r] += vv[j] * w[r];
    }
}

/* select_top over a whole row of n pre-activations, cheaper: the
 * (2k·S/n)-th largest of the first S = n/8 entries estimates a value
 * about 2k entries of the row reach; the entries at or above it (one
 * vectorisable pass) are the candidates, and when there are at least k of
 * them they hold every entry of the exact top k (ties included, as all
 * entries ≥ the estimate are in), so select_top over them gives the same
 * answer as over the row. Fewer than k: the whole row. cand: n slots. */
static void select_top_dense(const float *row, int n, int k, vi_t *heap, int *cand, int *out_i,
                             float *out_v) {
    int S = n / 8, ks = S > 0 ? (int)(((long)2 * k * S + n - 1) / n) : 0;
    if (ks < 1 || ks > S || ks > k) {
        select_top(row, NULL, n, k, heap, out_i, out_v);
        return;
    }
    int h = 0;
    float est = -INFINITY;
    for (int t = 0; t < S; t++) heap_offer(heap, &h, ks, row[t], t, &est);
    int c = 0;
    for (int t = 0; t < n; t++)
        if (row[t] >= est) cand[c++] = t;
    if (c >= k)
        select_top(row, cand, c, k, heap, out_i, out_v);
    else
        select_top(row, NULL, n, k, heap, out_i, out_v);
}

static int forward(al_sae *s, const float *x, int B, int want_loss, al_err *e) {
    if (B < 1) return al_errf(e, "SAE forward needs at least one row (got %d)", B);
    const int d = s->cfg.d_in, n = s->cfg.d_sae;
    const size_t Bd = (size_t)B * d;
    for (size_t i = 0; i < Bd; i++)
        if (!isfinite(x[i]))
            return al_errf(e, "SAE input row %zu has a non-finite value", i / (size_t)d);
    if (grow_acts(s, B, e) != 0) return -1;
    s->B = B;
    s->fwd_loss = 0;
    memcpy(s->xin, x, Bd * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int r = 0; r < d; r++) s->xc[(size_t)b * d + r] = x[(size_t)b * d + r] - s->b_dec[r];
    for (int b = 0; b < B; b++) memcpy(s->pre + (size_t)b * n, s->b_enc, (size_t)n * sizeof(float));
    al_sgemm(false, false, B, n, d, 1.0f, s->xc, d, s->W_enc, n, 1.0f, s->pre, n);
    for (int b = 0; b < B; b++)
        memcpy(s->xhat + (size_t)b * d, s->b_dec, (size_t)d * sizeof(float));
    double l0 = 0;
    if (s->cfg.arch == AL_SAE_TOPK) {
        const int k = s->cfg.k;
        vi_t *heap = al_malloc((size_t)k, sizeof *heap * (size_t)max_threads(), e);
        int *cand = heap ? al_malloc((size_t)n, sizeof(int) * (size_t)max_threads(), e) : NULL;
        if (!cand) {
            free(heap);
            return -1;
        }
#pragma omp parallel for schedule(static)
        for (int b = 0; b < B; b++) {
            vi_t *h = heap + (size_t)k * (size_t)thread_num();
            int *ii = s->idx + (size_t)b * k;
            float *vv = s->val + (size_t)b * k;
            select_top_dense(s->pre + (size_t)b * n, n, k, h, cand + (size_t)n * thread_num(), ii,
                             vv);
            decode_add(s->xhat + (size_t)b * d, ii, vv, k, s->W_dec, d);
        }
        free(heap);
        free(cand);
        for (size_t j = 0; j < (size_t)B * k; j++) l0 += s->val[j] > 0;
    } else {
        const size_t Bn = (size_t)B * n;
        for (size_t j = 0; j < Bn; j++) {
            s->f[j] = s->pre[j] > 0 ? s->pre[j] : 0.0f;
            l0 += s->f[j] > 0;
        }
        al_sgemm(false, false, B, d, n, 1.0f, s->f, n, s->W_dec, d, 1.0f, s->xhat, d);
    }
    s->l0 = l0 / B;
    s->mse = s->aux = s->l1 = s->loss = 0;
    s->n_dead = 0;
    if (!want_loss) return 0;

    double mse = 0;
    for (size_t i = 0; i < Bd; i++) {
        double r = (double)x[i] - s->xhat[i];
        mse += r * r;
    }
    s->mse = mse / B;
    if (s->cfg.arch == AL_SAE_TOPK) {
        const int ka = s->cfg.k_aux;
        int *dead = NULL;
        int nd = 0;
        if (ka > 0) {
            dead = al_malloc((size_t)n, sizeof(int), e);
            if (!dead) return -1;
            for (int i = 0; i < n; i++)
                if (s->since[i] >= s->cfg.dead_tokens) dead[nd++] = i;
        }
        s->n_dead = nd;
        if (ka > 0) {
            for (size_t j = 0; j < (size_t)B * ka; j++) {
                s->aidx[j] = -1;
                s->aval[j] = 0;
            }
        }
        memset(s->ehat, 0, Bd * sizeof(float));
        if (nd > 0) {
            const int kk = ka < nd ? ka : nd;
            vi_t *heap = al_malloc((size_t)kk, sizeof *heap * (size_t)max_threads(), e);
            if (!heap) {
                free(dead);
                return -1;
            }
#pragma omp parallel for schedule(static)
            for (int b = 0; b < B; b++) {
                vi_t *h = heap + (size_t)kk * (size_t)thread_num();
                int *ii = s->aidx + (size_t)b * ka;
                float *vv = s->aval + (size_t)b * ka;
                select_top(s->pre + (size_t)b * n, dead, nd, kk, h, ii, vv);
                decode_add(s->ehat + (size_t)b * d, ii, vv, kk, s->W_dec, d);
            }
            free(heap);
            double aux = 0;
            for (size_t i = 0; i < Bd; i++) {
                double r = ((double)x[i] - s->xhat[i]) - s->ehat[i];
                aux += r * r;
            }
            s->aux = aux / B;
        }
        free(dead);
        s->loss = s->mse + s->cfg.aux_coeff * s->aux;
    } else {
        double l1 = 0;
        for (int i = 0; i < n; i++) {
            const float *w = s->W_dec + (size_t)i * d;
            double q = 0, fs = 0;
            for (int r = 0; r < d; r++) q += (double)w[r] * w[r];
            for (int b = 0; b < B; b++) fs += s->f[(size_t)b * n + i];
            l1 += fs * sqrt(q);
        }
        s->l1 = l1 / B;
        s->loss = s->mse + s->cfg.l1_coeff * s->l1;
    }
    s->fwd_loss = 1;
    return 0;
}

int al_sae_forward(al_sae *s, const float *x, int B, al_err *e) { return forward(s, x, B, 1, e); }

int al_sae_encode(al_sae *s, const float *x, int B, al_err *e) { return forward(s, x, B, 0, e); }

/* ----------------------------------------------------------- backward */

static void *scratch(al_sae *s, size_t bytes, al_err *e) {
    if (bytes <= s->scratch_cap) return s->scratch;
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        al_errf(e, "out of memory (%zu bytes of SAE scratch)", bytes);
        return NULL;
    }
    free(s->scratch);
    s->scratch = p;
    s->scratch_cap = bytes;
    return p;
}

typedef struct {
    int b; /* row */
    int aux; /* 1: an aux latent (its x̂ is ê, its output gradient daux) */
    float f; /* the latent's value */
    float dpre;
} entry_t;

static double dotf(const float *a, const float *b, int n) {
    float acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int r = 0; r < n; r++) acc += a[r] * b[r];
    return acc;
}

static int backward_topk(al_sae *s, al_err *e) {
    const int B = s->B, d = s->cfg.d_in, n = s->cfg.d_sae, k = s->cfg.k, ka = s->cfg.k_aux;
    const int has_aux = s->n_dead > 0 && ka > 0;
    const size_t Bd = (size_t)B * d, ne_max = (size_t)B * (size_t)(k + (has_aux ? ka : 0));
    size_t bytes = 2 * Bd * sizeof(float) + (size_t)(n + 1) * sizeof(int) +
                   ne_max * sizeof(entry_t) + ne_max * sizeof(float) +
                   (size_t)n * d * sizeof(float);
    char *p = scratch(s, bytes, e);
    if (!p) return -1;
    float *dxhat = (float *)p;
    float *daux = dxhat + Bd;
    float *gT = daux + Bd; /* (n, d) the encoder gradient transposed */
    float *dp = gT + (size_t)n * d; /* (ne_max) dpre per (row, slot) */
    entry_t *ent = (entry_t *)(dp + ne_max);
    int *off = (int *)(ent + ne_max);

    const float sc = 2.0f / (float)B, sca = (float)(2.0 * s->cfg.aux_coeff / B);
    for (size_t i = 0; i < Bd; i++) {
        float r = s->xhat[i] - s->xin[i];
        dxhat[i] = sc * r;
        /* ê − e with e = x − x̂ */
        daux[i] = has_aux ? sca * (s->ehat[i] + r) : 0.0f;
    }
    const int kk = k + (has_aux ? ka : 0);
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < k; j++) {
            size_t q = (size_t)b * k + j;
            float v = s->val[q];
            dp[(size_t)b * kk + j] =
                v > 0 ? (float)dotf(dxhat + (size_t)b * d, s->W_dec + (size_t)s->idx[q] * d, d) : 0;
        }
        if (has_aux)
            for (int j = 0; j < ka; j++) {
                size_t q = (size_t)b * ka + j;
                float v = s->aval[q];
                dp[(size_t)b * kk + k + j] =
                    s->aidx[q] >= 0 && v > 0
                        ? (float)dotf(daux + (size_t)b * d, s->W_dec + (size_t)s->aidx[q] * d, d)
                        : 0;
            }
    }
    /* counting sort of the (row, slot) pairs by latent, rows in order */
    memset(off, 0, (size_t)(n + 1) * sizeof(int));
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < k; j++) off[s->idx[(size_t)b * k + j] + 1]++;
        if (has_aux)
            for (int j = 0; j < ka; j++)
                if (s->aidx[(size_t)b * ka + j] >= 0) off[s->aidx[(size_t)b * ka + j] + 1]++;
    }
    for (int i = 0; i < n; i++) off[i + 1] += off[i];
    {
        int *cur = malloc((size_t)n * sizeof(int));
        if (!cur) return al_errf(e, "out of memory (SAE backward)");
        memcpy(cur, off, (size_t)n * sizeof(int));
        for (int b = 0; b < B; b++) {
            for (int j = 0; j < k; j++) {
                size_t q = (size_t)b * k + j;
                ent[cur[s->idx[q]]++] = (entry_t){b, 0, s->val[q], dp[(size_t)b * kk + j]};
            }
            if (has_aux)
                for (int j = 0; j < ka; j++) {
                    size_t q = (size_t)b * ka + j;
                    if (s->aidx[q] < 0) continue;
                    ent[cur[s->aidx[q]]++] =
                        (entry_t){b, 1, s->aval[q], dp[(size_t)b * kk + k + j]};
                }
        }
        free(cur);
    }
    memset(s->grads, 0, s->n_params * sizeof(float));
    /* latents fire unevenly: dynamic chunks (each latent's sums are its
     * own, so the schedule cannot change a bit) */
#pragma omp parallel for schedule(dynamic, 8)
    for (int i = 0; i < n; i++) {
        if (off[i] == off[i + 1]) continue;
        float *gd = s->gW_dec + (size_t)i * d, *ge = gT + (size_t)i * d;
        memset(ge, 0, (size_t)d * sizeof(float));
        double gb = 0;
        for (int q = off[i]; q < off[i + 1]; q++) {
            const entry_t *t = &ent[q];
            if (t->f != 0) {
                const float *g = (t->aux ? daux : dxhat) + (size_t)t->b * d;
                const float fv = t->f;
#pragma omp simd
                for (int r = 0; r < d; r++) gd[r] += fv * g[r];
            }
            if (t->dpre != 0) {
                const float *xc = s->xc + (size_t)t->b * d;
                const float dv = t->dpre;
#pragma omp simd
                for (int r = 0; r < d; r++) ge[r] += dv * xc[r];
                gb += t->dpre;
            }
        }
        s->gb_enc[i] = (float)gb;
        for (int r = 0; r < d; r++) s->gW_enc[(size_t)r * n + i] = ge[r];
    }
    for (int r = 0; r < d; r++) {
        double a = 0;
        for (int b = 0; b < B; b++) a += dxhat[(size_t)b * d + r];
        s->gb_dec[r] = (float)a;
    }
    /* pre = (x − b_dec) W_enc + b_enc: ∂/∂b_dec = −W_enc · Σ_b dpre_b */
    cblas_sgemv(CblasRowMajor, CblasNoTrans, d, n, -1.0f, s->W_enc, n, s->gb_enc, 1, 1.0f,
                s->gb_dec, 1);
    return 0;
}

static int backward_l1(al_sae *s, al_err *e) {
    const int B = s->B, d = s->cfg.d_in, n = s->cfg.d_sae;
    const size_t Bd = (size_t)B * d, Bn = (size_t)B * n;
    char *p = scratch(s, (Bd + Bn + 2 * (size_t)n) * sizeof(float), e);
    if (!p) return -1;
    float *dxhat = (float *)p, *dpre = dxhat + Bd, *nrm = dpre + Bn, *fs = nrm + n;
    const float sc = 2.0f / (float)B;
    for (size_t i = 0; i < Bd; i++) dxhat[i] = sc * (s->xhat[i] - s->xin[i]);
    const double c = s->cfg.l1_coeff / B;
    for (int i = 0; i < n; i++) {
        const float *w = s->W_dec + (size_t)i * d;
        double q = 0, a = 0;
        for (int r = 0; r < d; r++) q += (double)w[r] * w[r];
        for (int b = 0; b < B; b++) a += s->f[(size_t)b * n + i];
        nrm[i] = (float)sqrt(q);
        fs[i] = (float)a;
    }
    /* ∂loss/∂f = dx̂ W_decᵀ + (l1_coeff/B) ‖W_dec,i‖, through the ReLU */
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n; i++) dpre[(size_t)b * n + i] = (float)(c * nrm[i]);
    al_sgemm(false, true, B, n, d, 1.0f, dxhat, d, s->W_dec, d, 1.0f, dpre, n);
    for (size_t j = 0; j < Bn; j++)
        if (!(s->pre[j] > 0)) dpre[j] = 0;
    /* W_dec: fᵀ dx̂ + (l1_coeff/B) Σ_b f_b,i W_dec,i / ‖W_dec,i‖ */
    for (int i = 0; i < n; i++) {
        float *g = s->gW_dec + (size_t)i * d;
        const float *w = s->W_dec + (size_t)i * d;
        float a = nrm[i] > 0 ? (float)(c * fs[i] / nrm[i]) : 0.0f;
        for (int r = 0; r < d; r++) g[r] = a * w[r];
    }
    al_sgemm(true, false, n, d, B, 1.0f, s->f, n, dxhat, d, 1.0f, s->gW_dec, d);
    al_sgemm(true, false, d, n, B, 1.0f, s->xc, d, dpre, n, 0.0f, s->gW_enc, n);
    for (int i = 0; i < n; i++) {
        double a = 0;
        for (int b = 0; b < B; b++) a += dpre[(size_t)b * n + i];
        s->gb_enc[i] = (float)a;
    }
    for (int r = 0; r < d; r++) {
        double a = 0;
        for (int b = 0; b < B; b++) a += dxhat[(size_t)b * d + r];
        s->gb_dec[r] = (float)a;
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, d, n, -1.0f, s->W_enc, n, s->gb_enc, 1, 1.0f,
                s->gb_dec, 1);
    return 0;
}

int al_sae_backward(al_sae *s, al_err *e) {
    if (!s->fwd_loss || s->B < 1) return al_errf(e, "SAE backward needs a forward with loss first");
    return s->cfg.arch == AL_SAE_TOPK ? backward_topk(s, e) : backward_l1(s, e);
}

/* ------------------------------------------------- dead latents, Adam */

void al_sae_update_dead(al_sae *s) {
    const int n = s->cfg.d_sae, B = s->B;
    /* saturated at dead_tokens: a dead latent stays dead until it fires,
     * and the counters fit in 32 bits (the trainer's checkpoint) */
    for (int i = 0; i < n; i++)
        s->since[i] = s->since[i] + B < s->cfg.dead_tokens ? s->since[i] + B : s->cfg.dead_tokens;
    if (s->cfg.arch == AL_SAE_TOPK) {
        const size_t m = (size_t)B * s->cfg.k;
        for (size_t j = 0; j < m; j++)
            if (s->val[j] > 0) s->since[s->idx[j]] = 0;
    } else {
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++)
                if (s->f[(size_t)b * n + i] > 0) s->since[i] = 0;
    }
}

int al_sae_count_dead(const al_sae *s) {
    int c = 0;
    for (int i = 0; i < s->cfg.d_sae; i++) c += s->since[i] >= s->cfg.dead_tokens;
    return c;
}

int al_sae_adam_init(al_sae_adam *o, size_t n, al_err *e) {
    o->m = al_calloc(n, 2 * sizeof(float), e);
    if (!o->m) return -1;
    o->v = o->m + n;
    o->n = n;
    return 0;
}

void al_sae_adam_free(al_sae_adam *o) {
    free(o->m);
    memset(o, 0, sizeof *o);
}

void al_sae_adam_step(al_sae *s, al_sae_adam *o, double lr, double beta1, double beta2, double eps,
                      long t) {
    const int n = s->cfg.d_sae, d = s->cfg.d_in;
    /* the decoder's gradient tangent to the unit sphere of each row */
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *g = s->gW_dec + (size_t)i * d;
        const float *w = s->W_dec + (size_t)i * d;
        double gw = 0, ww = 0;
        for (int r = 0; r < d; r++) {
            gw += (double)g[r] * w[r];
            ww += (double)w[r] * w[r];
        }
        if (ww > 0) {
            float a = (float)(gw / ww);
            for (int r = 0; r < d; r++) g[r] -= a * w[r];
        }
    }
    const float b1 = (float)beta1, b2 = (float)beta2, ep = (float)eps, flr = (float)lr;
    const float bc1 = (float)(1.0 - pow(beta1, (double)t));
    const float bc2 = (float)(1.0 - pow(beta2, (double)t));
    const long np = (long)s->n_params;
    float *w = s->params, *g = s->grads, *mm = o->m, *vv = o->v;
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < np; i++) {
        float gi = g[i];
        float mi = b1 * mm[i] + (1.0f - b1) * gi;
        float vi = b2 * vv[i] + (1.0f - b2) * gi * gi;
        mm[i] = mi;
        vv[i] = vi;
        w[i] -= flr * ((mi / bc1) / (sqrtf(vi / bc2) + ep));
    }
    al_sae_normalize_decoder(s);
}

double al_sae_lr_at(double lr, long warmup, long decay, long total, long step) {
    if (warmup > 0 && step < warmup) return lr * (double)(step + 1) / (double)warmup;
    if (decay > 0 && step >= total - decay) {
        double left = (double)(total - step) / (double)decay;
        return lr * (left < 0 ? 0 : left > 1 ? 1 : left);
    }
    return lr;
}

size_t al_sae_count_nonfinite(const al_sae *s) {
    size_t c = 0;
    for (size_t i = 0; i < s->n_params; i++) c += !isfinite(s->params[i]);
    return c;
}
