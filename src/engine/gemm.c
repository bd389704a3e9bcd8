/* gemm.c -- al_sgemm on oneDNN matmul primitives, or on OpenBLAS
 * (contract in gemm.h).
 *
 * A oneDNN primitive is made for one problem: shapes, transposes, alpha,
 * beta, and the number of threads it will run on, which fixes how the
 * work is blocked. Creating one costs far more than a small product, so
 * each is made once and kept in a hash table keyed by all of those. A
 * training step uses a few dozen distinct keys; the table never shrinks.
 *
 * Dense operands only. oneDNN 2.6's fast f32 matmul (brgemm) takes dense
 * row-major or transposed operands; given a leading dimension wider than
 * the matrix it falls back to its older "gemm:jit" kernels, which are
 * slower and round differently. So an operand with a wider leading
 * dimension (a head's slice of q|k|v, a block of attention rows) is
 * copied to a dense per-thread buffer first, and a strided C is gathered
 * (only when beta != 0) and scattered back. The copies are O(size) next
 * to O(size · K) arithmetic. What this buys: every product is brgemm,
 * and brgemm computes an element of C the same way whatever M, the
 * leading dimensions or the thread count (each element is one dot
 * product over K in a fixed order; tests/test_gemm.c checks it), which
 * the incremental forward (delta.c) relies on to recompute a subset of
 * rows bit for bit.
 *
 * Threads. oneDNN (OpenMP build, like the engine) runs a primitive on the
 * calling thread alone when called inside an active parallel region
 * (the attention's per-(b,h) products), so such a call uses a primitive
 * created while this thread's OpenMP thread count is set to 1 (the
 * `nthr` of the key); so does a small product anywhere (SMALL_MNK). Streams, scratchpads and packing buffers are per
 * thread (user-managed scratchpad, never the library's shared one), so
 * concurrent calls share nothing but the read-only primitives; the table
 * is guarded by a mutex held only to look up and insert.
 *
 * bf16 (al_gemm_set_precision): A and B are rounded into per-thread bf16
 * buffers (always a copy, so strides cost nothing extra) and multiplied
 * by a bf16 primitive writing f32 C; the key's `bf16` makes these their
 * own primitives. Only for products called outside a parallel region:
 * the ones inside, attention's per-(b,h) products of T x d_head slices,
 * stay f32, because rounding their small strided operands costs more
 * than bf16 saves (attention forward + backward alone, default sizes,
 * measured 1.3-1.7x slower in bf16 than in f32). A shape without a
 * native bf16 kernel takes the f32 path; on a CPU with no native bf16
 * at all, al_gemm_set_precision refuses bf16 outright, so bf16 never
 * silently means f32 everywhere. The logits gradient (B·T x d_vocab, the
 * biggest operand by far) is an input of two products; rounding it twice
 * read 64 MB twice a step at the default sizes, so the cross-entropy
 * backward rounds each row as it writes it, into a copy reserved here
 * (al_gemm_bf16_reserve), which both products then read.
 *
 * alpha is oneDNN's output scale, beta its "sum" post-op; with beta = 0
 * there is no post-op, so C is never read. A problem for which oneDNN
 * picks anything but brgemm, or fails to make a primitive, goes to
 * OpenBLAS: its other f32 kernels (gemm:jit, and the scalar reference)
 * are no faster than OpenBLAS and do not promise the per-element
 * arithmetic above. brgemm needs AVX-512 (avx512_core), so on an AVX2
 * CPU, or under valgrind, whose emulated CPU has no AVX-512, every
 * product runs on OpenBLAS. */
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#include "attnlab/gemm.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

/* Everything that makes a product a different primitive (operands are
 * dense, so no leading dimensions). All ints, so memcmp is equality. */
typedef struct {
    int ta, tb, M, N, K, nthr, bf16;
    uint32_t alpha, beta; /* bits */
} gkey;

typedef struct {
    gkey k;
    dnnl_primitive_t prim; /* NULL: OpenBLAS */
    dnnl_memory_desc_t a, b, c, scratch;
    size_t scratch_bytes;
    char impl[48];
} gentry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static gentry **tab; /* open addressing, cap a power of two */
static size_t cap, used;
static dnnl_engine_t eng;
static int ready; /* al_gemm_init ran */
static al_matmul_backend backend = AL_MATMUL_ONEDNN;
static al_precision precision = AL_PREC_F32;

static _Thread_local dnnl_stream_t tl_stream;
/* per-thread buffers: 0 scratchpad, 1..3 dense (or bf16) copies of A,
 * B, C */
static _Thread_local void *tl_buf[5];
static _Thread_local size_t tl_buf_n[5];
/* al_gemm_bf16_reserve's matrix and its copy (tl_buf[4]) */
static _Thread_local const float *kept_src;
static _Thread_local size_t kept_n;

static int parse_backend(const char *v, al_matmul_backend *b) {
    if (!v || !*v || !strcmp(v, "onednn")) {
        *b = AL_MATMUL_ONEDNN;
        return 0;
    }
    if (!strcmp(v, "openblas")) {
        *b = AL_MATMUL_OPENBLAS;
        return 0;
    }
    return -1;
}

int al_gemm_init(al_err *e) {
    const char *v = getenv("ATTNLAB_MATMUL");
    al_matmul_backend b;
    int bad = parse_backend(v, &b);
    pthread_mutex_lock(&mu);
    if (!ready) {
        backend = bad ? AL_MATMUL_ONEDNN : b;
        ready = 1;
    }
    pthread_mutex_unlock(&mu);
    if (bad) return al_errf(e, "ATTNLAB_MATMUL=%s: unknown matmul backend (onednn or openblas)", v);
    return 0;
}

static void lazy_init(void) {
    if (__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) return;
    al_err e;
    if (al_gemm_init(&e)) fprintf(stderr, "attnlab: %s; using onednn\n", e.msg);
}

al_matmul_backend al_gemm_backend(void) {
    lazy_init();
    return backend;
}

const char *al_gemm_backend_name(void) {
    return al_gemm_backend() == AL_MATMUL_OPENBLAS ? "openblas" : "onednn";
}

void al_gemm_set_backend(al_matmul_backend b) {
    lazy_init();
    backend = b;
}

static uint64_t hash_key(const gkey *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The slot holding k, or the empty slot where it would go. mu held. */
static gentry **slot(const gkey *k) {
    size_t i = hash_key(k) & (cap - 1);
    while (tab[i] && memcmp(&tab[i]->k, k, sizeof *k)) i = (i + 1) & (cap - 1);
    return &tab[i];
}

/* Grow to keep the load under a half. mu held. 0 or -1 (out of memory:
 * the caller then uses OpenBLAS without caching). */
static int reserve(void) {
    if (cap && 2 * (used + 1) <= cap) return 0;
    size_t ncap = cap ? 2 * cap : 64;
    gentry **nt = calloc(ncap, sizeof *nt), **old = tab;
    if (!nt) return -1;
    size_t ocap = cap;
    tab = nt, cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i]) *slot(&old[i]->k) = old[i];
    free(old);
    return 0;
}

#define DN(x) ((x) == dnnl_success)

/* Make the primitive of k into g; g->prim stays NULL when oneDNN cannot
 * or would only run its reference code. mu held; when k.nthr is 1 the
 * thread count is lowered around the creation (see the file comment). */
static void make_prim(gentry *g) {
    const gkey *k = &g->k;
    snprintf(g->impl, sizeof g->impl, "openblas");
    if (!eng && !DN(dnnl_engine_create(&eng, dnnl_cpu, 0))) {
        eng = NULL;
        return;
    }
    dnnl_dims_t ad = {k->M, k->K}, bd = {k->K, k->N}, cd = {k->M, k->N};
    dnnl_dims_t as = {k->ta ? 1 : k->K, k->ta ? k->M : 1};
    dnnl_dims_t bs = {k->tb ? 1 : k->N, k->tb ? k->K : 1};
    dnnl_dims_t cs = {k->N, 1};
    float alpha, beta;
    memcpy(&alpha, &k->alpha, sizeof alpha);
    memcpy(&beta, &k->beta, sizeof beta);
    dnnl_matmul_desc_t md;
    dnnl_data_type_t in = k->bf16 ? dnnl_bf16 : dnnl_f32;
    if (!DN(dnnl_memory_desc_init_by_strides(&g->a, 2, ad, in, as)) ||
        !DN(dnnl_memory_desc_init_by_strides(&g->b, 2, bd, in, bs)) ||
        !DN(dnnl_memory_desc_init_by_strides(&g->c, 2, cd, dnnl_f32, cs)) ||
        !DN(dnnl_matmul_desc_init(&md, &g->a, &g->b, NULL, &g->c)))
        return;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int ok = DN(dnnl_primitive_attr_create(&attr)) &&
             DN(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) &&
             (alpha == 1.0f || DN(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha)));
    if (ok && beta != 0.0f)
        ok = DN(dnnl_post_ops_create(&po)) && DN(dnnl_post_ops_append_sum(po, beta)) &&
             DN(dnnl_primitive_attr_set_post_ops(attr, po));
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    if (k->nthr == 1) omp_set_num_threads(1);
#endif
    if (ok) ok = DN(dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL));
    const char *impl = NULL;
    if (ok) ok = DN(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    if (ok && impl && !strncmp(impl, "brg", 3) && (!k->bf16 || strstr(impl, "bf16"))) {
        const dnnl_memory_desc_t *sm =
            dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (sm) g->scratch = *sm;
        g->scratch_bytes = sm ? dnnl_memory_desc_get_size(sm) : 0;
        if (DN(dnnl_primitive_create(&g->prim, pd)))
            snprintf(g->impl, sizeof g->impl, "%s", impl);
        else
            g->prim = NULL;
    }
#ifdef _OPENMP
    if (k->nthr == 1) omp_set_num_threads(saved);
#endif
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
}

/* Below this many multiply-adds a product runs on one thread. */
#define SMALL_MNK (double)(1 << 21)

static int k_in_parallel(void) {
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return 0;
#endif
}

static gkey make_key(bool ta, bool tb, int M, int N, int K, float alpha, float beta, int bf16) {
    gkey k;
    memset(&k, 0, sizeof k);
    k.ta = ta, k.tb = tb, k.M = M, k.N = N, k.K = K, k.bf16 = bf16;
    memcpy(&k.alpha, &alpha, sizeof alpha);
    memcpy(&k.beta, &beta, sizeof beta);
#ifdef _OPENMP
    /* small products on the calling thread alone: a parallel region's
     * start and barrier cost more than they share (8 x 768 x 256 took
     * 85 us on 2 threads, 50 on 1); the bits are the same either way */
    k.nthr = omp_in_parallel() || (double)M * N * K < SMALL_MNK ? 1 : omp_get_max_threads();
#else
    k.nthr = 1;
#endif
    return k;
}

/* The cached entry for k, made if new; NULL when out of memory. */
static gentry *lookup_shared(const gkey *k) {
    pthread_mutex_lock(&mu);
    gentry *g = NULL;
    if (!reserve()) {
        gentry **s = slot(k);
        if (!*s && (*s = calloc(1, sizeof **s))) {
            (*s)->k = *k;
            make_prim(*s);
            used++;
        }
        g = *s;
    }
    pthread_mutex_unlock(&mu);
    return g;
}

/* Each thread keeps its own table of the entries it has used, with the
 * oneDNN memory objects it runs them on. A small product (attention's
 * per-head ones: ~6,000 calls a 2-layer training step) spent about half
 * its time in the mutex and in the mallocs and frees of creating and
 * destroying its three or four memory objects; here they are made once
 * per thread and entry, and only pointed at each call's operands. The
 * table never shrinks (neither does the shared one); what it holds is
 * freed with the process. */
typedef struct {
    gentry *g;
    dnnl_memory_t m[4]; /* A, B, C, scratchpad; NULL until first run */
} tl_entry;

static _Thread_local tl_entry *tl_tab; /* open addressing, keyed by g->k */
static _Thread_local size_t tl_cap, tl_used;

static tl_entry *tl_slot(tl_entry *t, size_t c, const gkey *k) {
    size_t i = hash_key(k) & (c - 1);
    while (t[i].g && memcmp(&t[i].g->k, k, sizeof *k)) i = (i + 1) & (c - 1);
    return &t[i];
}

/* This thread's entry for k (made, and the shared entry looked up, if
 * new); NULL when out of memory. */
static tl_entry *lookup(const gkey *k) {
    if (tl_cap) {
        tl_entry *t = tl_slot(tl_tab, tl_cap, k);
        if (t->g) return t;
    }
    if (2 * (tl_used + 1) > tl_cap) {
        size_t nc = tl_cap ? 2 * tl_cap : 64;
        tl_entry *nt = calloc(nc, sizeof *nt);
        if (!nt) return NULL;
        for (size_t i = 0; i < tl_cap; i++)
            if (tl_tab[i].g) *tl_slot(nt, nc, &tl_tab[i].g->k) = tl_tab[i];
        free(tl_tab);
        tl_tab = nt, tl_cap = nc;
    }
    gentry *g = lookup_shared(k);
    if (!g) return NULL;
    tl_entry *t = tl_slot(tl_tab, tl_cap, k);
    t->g = g;
    tl_used++;
    return t;
}

static void blas(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Per-thread buffer i of at least n bytes, 64-byte aligned; NULL when
 * out of memory. */
static void *buf(int i, size_t n) {
    if (n > tl_buf_n[i]) {
        void *p = NULL;
        if (posix_memalign(&p, 64, n)) return NULL;
        free(tl_buf[i]);
        tl_buf[i] = p, tl_buf_n[i] = n;
    }
    return tl_buf[i];
}

/* rows x cols at src (row stride ld) as a dense matrix: src itself when
 * already dense, else a copy in buffer i; NULL when out of memory. */
static float *dense(int i, const float *src, int rows, int cols, int ld) {
    if (ld == cols) return (float *)src;
    float *d = buf(i, sizeof(float) * (size_t)rows * cols);
    if (d)
        for (int r = 0; r < rows; r++)
            memcpy(d + (size_t)r * cols, src + (size_t)r * ld, sizeof(float) * (size_t)cols);
    return d;
}

/* f32 -> bf16 as the AVX512-BF16 instruction VCVTNEPS2BF16 does it, so
 * that the vector and scalar paths below agree bit for bit: round to
 * nearest even, NaN stays NaN (quietened), a denormal becomes a zero of
 * its sign. */
static inline uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    if (!(u & 0x7f800000u)) return (uint16_t)((u >> 16) & 0x8000u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* n floats to bf16: 32 at a time with the instruction where the build
 * targets it (-march=native on such a CPU: it is ~10x the scalar loop,
 * which took a tenth of a bf16 training step), the rest one by one. */
static void row_bf16(uint16_t *o, const float *s, int n) {
    int c = 0;
#ifdef __AVX512BF16__
    for (; c + 32 <= n; c += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + c + 16), _mm512_loadu_ps(s + c));
        _mm512_storeu_si512((void *)(o + c), (__m512i)v);
    }
#endif
    for (; c < n; c++) o[c] = to_bf16(s[c]);
}

void al_round_bf16(uint16_t *out, const float *in, size_t n) {
    const size_t step = (size_t)1 << 30; /* row_bf16 counts in int */
    for (size_t i = 0; i < n; i += step)
        row_bf16(out + i, in + i, (int)(n - i < step ? n - i : step));
}

uint16_t *al_gemm_bf16_reserve(const float *src, size_t rows, size_t cols) {
    kept_src = NULL;
    if (precision != AL_PREC_BF16 || backend != AL_MATMUL_ONEDNN) return NULL;
    uint16_t *d = buf(4, sizeof(uint16_t) * rows * cols);
    if (d) kept_src = src, kept_n = rows * cols;
    return d;
}

void al_gemm_bf16_release(void) { kept_src = NULL; }

/* rows x cols at src (row stride ld) rounded to a dense bf16 matrix in
 * buffer i (or the reserved copy when src is that matrix); NULL when out
 * of memory. Rows in parallel when the call is not already inside a
 * parallel region and the matrix is big enough to pay for it (each
 * element is independent: the same bits either way). */
static uint16_t *dense_bf16(int i, const float *src, int rows, int cols, int ld) {
    if (src == kept_src && ld == cols && (size_t)rows * cols == kept_n) return tl_buf[4];
    uint16_t *d = buf(i, sizeof(uint16_t) * (size_t)rows * cols);
    if (!d) return NULL;
    int par = (size_t)rows * cols >= ((size_t)1 << 16);
#ifdef _OPENMP
    par = par && !omp_in_parallel();
#endif
#pragma omp parallel for schedule(static) if (par)
    for (int r = 0; r < rows; r++) row_bf16(d + (size_t)r * cols, src + (size_t)r * ld, cols);
    return d;
}

/* Point memory object *m (made on first use, of descriptor d) at p. */
static int bind(dnnl_memory_t *m, const dnnl_memory_desc_t *d, void *p) {
    if (!*m) {
        if (!DN(dnnl_memory_create(m, d, eng, p))) return *m = NULL, -1;
        return 0;
    }
    return DN(dnnl_memory_set_data_handle(*m, p)) ? 0 : -1;
}

/* Execute t's primitive; -1 if oneDNN refused to (out of memory for a
 * stream, a buffer or a memory object), having written nothing to C,
 * and the caller then does the product on OpenBLAS. */
static int run(tl_entry *t, const float *A, int lda, const float *B, int ldb, float beta, float *C,
               int ldc) {
    const gentry *g = t->g;
    const gkey *k = &g->k;
    if (!tl_stream && !DN(dnnl_stream_create(&tl_stream, eng, dnnl_stream_default_flags))) {
        tl_stream = NULL;
        return -1;
    }
    void *scratch = g->scratch_bytes ? buf(0, g->scratch_bytes) : NULL;
    int ar = k->ta ? k->K : k->M, ac = k->ta ? k->M : k->K;
    int br = k->tb ? k->N : k->K, bc = k->tb ? k->K : k->N;
    const void *a =
        k->bf16 ? (void *)dense_bf16(1, A, ar, ac, lda) : (void *)dense(1, A, ar, ac, lda);
    const void *b =
        k->bf16 ? (void *)dense_bf16(2, B, br, bc, ldb) : (void *)dense(2, B, br, bc, ldb);
    float *c = C;
    if (ldc != k->N) {
        c = beta != 0.0f ? dense(3, C, k->M, k->N, ldc)
                         : buf(3, sizeof(float) * (size_t)k->M * k->N);
    }
    if ((g->scratch_bytes && !scratch) || !a || !b || !c) return -1;
    int ok = !bind(&t->m[0], &g->a, (void *)a) && !bind(&t->m[1], &g->b, (void *)b) &&
             !bind(&t->m[2], &g->c, c) &&
             (!g->scratch_bytes || !bind(&t->m[3], &g->scratch, scratch));
    if (ok) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, t->m[0]},
                                   {DNNL_ARG_WEIGHTS, t->m[1]},
                                   {DNNL_ARG_DST, t->m[2]},
                                   {DNNL_ARG_SCRATCHPAD, t->m[3]}};
        ok = DN(dnnl_primitive_execute(g->prim, tl_stream, g->scratch_bytes ? 4 : 3, args)) &&
             DN(dnnl_stream_wait(tl_stream));
    }
    if (ok && c != C)
        for (int r = 0; r < k->M; r++)
            memcpy(C + (size_t)r * ldc, c + (size_t)r * k->N, sizeof(float) * (size_t)k->N);
    return ok ? 0 : -1;
}

void al_sgemm(bool transA, bool transB, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    lazy_init();
    if (backend == AL_MATMUL_OPENBLAS || K <= 0) {
        blas(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (precision == AL_PREC_BF16 && !k_in_parallel()) {
        gkey k = make_key(transA, transB, M, N, K, alpha, beta, 1);
        tl_entry *t = lookup(&k);
        if (t && t->g->prim && !run(t, A, lda, B, ldb, beta, C, ldc)) return;
    }
    gkey k = make_key(transA, transB, M, N, K, alpha, beta, 0);
    tl_entry *t = lookup(&k);
    if (!t || !t->g->prim || run(t, A, lda, B, ldb, beta, C, ldc))
        blas(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int al_precision_parse(const char *s, al_precision *p) {
    if (s && !strcmp(s, "f32")) return *p = AL_PREC_F32, 0;
    if (s && !strcmp(s, "bf16")) return *p = AL_PREC_BF16, 0;
    return -1;
}

const char *al_precision_name(al_precision p) { return p == AL_PREC_BF16 ? "bf16" : "f32"; }

al_precision al_gemm_precision(void) { return precision; }

int al_gemm_set_precision(al_precision p, al_err *e) {
    lazy_init();
    if (p == AL_PREC_BF16) {
        if (backend != AL_MATMUL_ONEDNN)
            return al_errf(e, "precision bf16 needs the onednn matmul backend "
                              "(ATTNLAB_MATMUL is openblas)");
        /* a product of the engine's kind: oneDNN's choice for it says
         * whether this CPU multiplies bf16 natively */
        gkey k = make_key(false, false, 256, 256, 256, 1.0f, 0.0f, 1);
        const gentry *g = lookup_shared(&k);
        if (!g || !g->prim)
            return al_errf(e, "precision bf16: this CPU has no native bf16 matrix multiply "
                              "(oneDNN needs AVX512-BF16 or AMX); use precision f32");
    }
    precision = p;
    return 0;
}

const char *al_sgemm_impl(bool transA, bool transB, int M, int N, int K, float alpha, float beta) {
    lazy_init();
    if (backend == AL_MATMUL_OPENBLAS || M <= 0 || N <= 0 || K <= 0) return "openblas";
    gkey k = make_key(transA, transB, M, N, K, alpha, beta, precision == AL_PREC_BF16);
    const gentry *g = lookup_shared(&k);
    if (g && !g->prim && k.bf16) {
        k.bf16 = 0;
        g = lookup_shared(&k);
    }
    return g ? g->impl : "openblas";
}
