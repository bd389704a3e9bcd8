/* test_delta.c -- al_model_forward_delta, the incremental patched forward,
 * against the full patched forward (al_model_forward with patch hooks) on
 * tiny random models with non-trivial gates, a gate of 0 and a z
 * replacement on one head: random masks of every kind, singly and
 * combined; the dirty set (a superset of the rows that change, tight in
 * simple cases); identities; errors. T = 70 > ATT_BLOCK, so attention
 * rows come in two blocks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/model.h"
#include "test.h"

enum { DB = 3, DT = 70, DH = 3, DD = 8, DC = 16, DV = 13 };

/* A model, two runs of it (a: the target, b: the source) and their caches. */
typedef struct fix {
    al_model m;
    int L, T;
    int in_a[DB * DT], in_b[DB * DT];
    al_acts a, b;
    float rep[DB * DT * DD]; /* z replacement of head (0, 2) */
    const float *zr[2 * DH]; /* its hook's per-head pointers */
} fix;

/* Positional embedding type of fix_init's models (the shortformer tests
 * set it: W_pos in q and k, not in the residual stream). */
static int g_pos_type = AL_POS_STANDARD;
/* Normalization and biases of fix_init's models (the LayerNorm tests set
 * them; t_ln_perturb moves their weights off their initial values). */
static int g_norm = AL_NORM_NONE;
static unsigned g_biases = 0;

static void tokens(int *in, int n, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) in[i] = (int)al_rng_below(&r, DV);
}

static void fix_init(fix *f, int L, int tied, int T) {
    memset(f, 0, sizeof *f);
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = DC, c.n_heads = DH, c.d_head = DD, c.n_ctx = DT;
    c.d_vocab = DV, c.tied_embeddings = tied, c.seed = 11 + L + tied;
    c.pos_type = g_pos_type, c.norm_type = g_norm, c.biases = g_biases;
    al_err e;
    CHECK_OK(al_model_init(&f->m, &c, &e), &e);
    if (g_norm != AL_NORM_NONE || g_biases) t_ln_perturb(&f->m, 17 + (uint64_t)L);
    f->L = L, f->T = T;
    for (int i = 0; i < L * DH; i++) f->m.gates[i] = 0.5f + 0.3f * (float)i;
    f->m.gates[1] = -1.25f;
    if (L > 1) f->m.gates[DH + 2] = 0.0f;
    al_rng r;
    al_rng_seed(&r, 5);
    for (int i = 0; i < DB * T * DD; i++) f->rep[i] = (float)al_rng_normal(&r);
    memset(f->zr, 0, sizeof f->zr);
    f->zr[2] = f->rep;
    CHECK_OK(al_zrep_hooks_add(&f->m, f->zr, &e), &e);
    tokens(f->in_a, DB * T, 100 + L);
    tokens(f->in_b, DB * T, 200 + L);
    CHECK_OK(al_acts_alloc(&f->a, &c, DB, T, &e), &e);
    CHECK_OK(al_acts_alloc(&f->b, &c, DB, T, &e), &e);
    CHECK_OK(al_model_forward(&f->m, f->in_b, NULL, DB, T, &e), &e);
    CHECK_OK(al_acts_save(&f->m, &f->b, &e), &e);
    CHECK_OK(al_model_forward(&f->m, f->in_a, NULL, DB, T, &e), &e);
    CHECK_OK(al_acts_save(&f->m, &f->a, &e), &e);
}

static void fix_free(fix *f) {
    al_acts_free(&f->a);
    al_acts_free(&f->b);
    al_model_free(&f->m);
}

static size_t btc(const fix *f) { return (size_t)DB * f->T * DC; }

/* The spec patching run a with sources from run b; masks may be NULL. */
static al_patch_spec spec_of(const fix *f, const unsigned char *xm, const unsigned char *zm,
                             const unsigned char *qm, const unsigned char *am) {
    al_patch_spec sp = {f->b.x, f->b.z, xm, zm, f->b.qkv, f->b.att, qm, am};
    return sp;
}

/* Run the delta on sp into xL/dirty and check it against the full patched
 * forward: every row within 1e-5 of the row's largest value, rows not
 * dirty bitwise base's, m's activations untouched by the delta. */
static void check_delta(fix *f, const al_patch_spec *sp, float *xL, unsigned char *dirty,
                        const char *what) {
    al_err e;
    size_t n = btc(f), nx = (size_t)(f->L + 1) * n;
    float *ref = malloc(sizeof(float) * n), *snap = malloc(sizeof(float) * nx);
    CHECK_OK(al_patch_hooks_add(&f->m, sp, &e), &e);
    CHECK_OK(al_model_forward(&f->m, f->in_a, NULL, DB, f->T, &e), &e);
    al_hook_remove(&f->m, sp);
    memcpy(ref, f->m.x + (size_t)f->L * n, sizeof(float) * n);
    memcpy(snap, f->m.x, sizeof(float) * nx);
    CHECK_OK(al_model_forward_delta(&f->m, &f->a, sp, xL, dirty, NULL, &e), &e);
    CHECKF(!memcmp(snap, f->m.x, sizeof(float) * nx), "%s: m->x changed", what);
    const float *base = f->a.x + (size_t)f->L * n;
    int bad = 0, notbase = 0;
    for (int b = 0; b < DB; b++)
        for (int t = 0; t < f->T; t++) {
            size_t o = ((size_t)b * f->T + t) * DC;
            double big = 0, diff = 0;
            for (int c = 0; c < DC; c++) {
                big = fmax(big, fabs(ref[o + c]));
                diff = fmax(diff, fabs((double)xL[o + c] - ref[o + c]));
            }
            if (diff > 1e-5 * big && bad++ < 3)
                t_fail(__FILE__, __LINE__, "%s: b %d t %d differs by %g (row max %g)", what, b, t,
                       diff, big);
            if (!dirty[t] && memcmp(xL + o, base + o, sizeof(float) * DC) && notbase++ < 3)
                t_fail(__FILE__, __LINE__, "%s: b %d t %d not dirty but not base's", what, b, t);
        }
    free(ref);
    free(snap);
}

enum { KX = 1, KXL = 2, KZ = 4, KQ = 8, KK = 16, KV = 32, KATT = 64, KALL = 127 };

typedef struct masks {
    unsigned char x[3 * DT], z[2 * DH * DT], qkv[2 * 3 * DH * DT], att[2 * DH * DT];
} masks;

/* Each entry of the kinds asked for set with probability p, and one at
 * random of each kind for sure; the spec uses only those masks. */
static al_patch_spec random_spec(const fix *f, masks *k, int kinds, double p, al_rng *r) {
    int L = f->L, T = f->T;
    memset(k, 0, sizeof *k);
#define COIN() (al_rng_uniform(r) < p)
#define PICK(n) ((int)al_rng_below(r, (uint32_t)(n)))
    if (kinds & KX) {
        for (int i = 0; i < L * T; i++) k->x[i] = COIN();
        k->x[PICK(L * T)] = 1;
    }
    if (kinds & KXL) {
        for (int t = 0; t < T; t++) k->x[L * T + t] = COIN();
        k->x[L * T + PICK(T)] = 1;
    }
    if (kinds & KZ) {
        for (int i = 0; i < L * DH * T; i++) k->z[i] = COIN();
        k->z[PICK(L * DH * T)] = 1;
    }
    for (int s = 0; s < 3; s++) {
        if (!(kinds & (KQ << s))) continue;
        for (int l = 0; l < L; l++)
            for (int i = 0; i < DH * T; i++) k->qkv[(l * 3 + s) * DH * T + i] = COIN();
        k->qkv[(PICK(L) * 3 + s) * DH * T + PICK(DH * T)] = 1;
    }
    if (kinds & KATT) {
        for (int i = 0; i < L * DH * T; i++) k->att[i] = COIN();
        k->att[PICK(L * DH * T)] = 1;
    }
#undef COIN
#undef PICK
    return spec_of(f, kinds & (KX | KXL) ? k->x : NULL, kinds & KZ ? k->z : NULL,
                   kinds & (KQ | KK | KV) ? k->qkv : NULL, kinds & KATT ? k->att : NULL);
}

/* Random masks of every kind, singly and combined, sparse and dense, on
 * 1- and 2-layer models, tied and untied, T = 70 and T = 9. */
static void random_masks(void) {
    static const int single[] = {KX, KXL, KZ, KQ, KK, KV, KATT};
    static const char *names[] = {"x", "x at L", "z", "q", "k", "v", "att"};
    float *xL = malloc(sizeof(float) * DB * DT * DC);
    unsigned char dirty[DT];
    char what[128];
    for (int L = 1; L <= 2; L++)
        for (int tied = 0; tied < 2; tied++)
            for (int T = DT; T >= 9; T -= DT - 9) {
                fix f;
                fix_init(&f, L, tied, T);
                al_rng r;
                al_rng_seed(&r, 1000 * L + 10 * tied + T);
                masks k;
                for (int i = 0; i < 7; i++)
                    for (int rep = 0; rep < 3; rep++) {
                        double p = rep == 0 ? 0.0 : rep == 1 ? 0.02 : 0.1;
                        al_patch_spec sp = random_spec(&f, &k, single[i], p, &r);
                        snprintf(what, sizeof what, "L %d tied %d T %d %s p %g", L, tied, T,
                                 names[i], p);
                        check_delta(&f, &sp, xL, dirty, what);
                    }
                for (int rep = 0; rep < 6; rep++) {
                    double p = rep < 3 ? 0.01 : 0.05;
                    int kinds = rep % 3 == 0   ? KALL
                                : rep % 3 == 1 ? KZ | KQ | KK | KV | KATT
                                               : KZ | KATT | KXL;
                    al_patch_spec sp = random_spec(&f, &k, kinds, p, &r);
                    snprintf(what, sizeof what, "L %d tied %d T %d combined %d p %g", L, tied, T,
                             kinds, p);
                    check_delta(&f, &sp, xL, dirty, what);
                }
                fix_free(&f);
            }
    free(xL);
}

TEST(delta_matches_full_forward_random_masks) { random_masks(); }
TEST(delta_shortformer_matches_full_forward) {
    g_pos_type = AL_POS_SHORTFORMER;
    random_masks();
}

static int dirty_is(const unsigned char *dirty, int T, int lo, int hi) {
    for (int t = 0; t < T; t++)
        if (dirty[t] != (t >= lo && t <= hi)) return 0;
    return 1;
}

/* Simple patches mark exactly the rows they can reach. */
TEST(delta_dirty_is_tight) {
    float *xL = malloc(sizeof(float) * DB * DT * DC);
    unsigned char dirty[DT];
    const int t = 37;
    for (int L = 1; L <= 2; L++) {
        fix f;
        fix_init(&f, L, 0, DT);
        int l = L - 1; /* the last layer */
        masks k;
        memset(&k, 0, sizeof k);
        /* z of a last-layer head at t: that row only */
        k.z[(l * DH + 1) * DT + t] = 1;
        al_patch_spec sp = spec_of(&f, NULL, k.z, NULL, NULL);
        check_delta(&f, &sp, xL, dirty, "z last layer");
        CHECKF(dirty_is(dirty, DT, t, t), "L %d: z patch at the last layer", L);
        /* q of a last-layer head at t: that row only; k or v: rows >= t */
        memset(&k, 0, sizeof k);
        k.qkv[((l * 3 + 0) * DH + 1) * DT + t] = 1;
        sp = spec_of(&f, NULL, NULL, k.qkv, NULL);
        check_delta(&f, &sp, xL, dirty, "q last layer");
        CHECKF(dirty_is(dirty, DT, t, t), "L %d: q patch", L);
        for (int s = 1; s <= 2; s++) {
            memset(&k, 0, sizeof k);
            k.qkv[((l * 3 + s) * DH + 0) * DT + t] = 1;
            sp = spec_of(&f, NULL, NULL, k.qkv, NULL);
            check_delta(&f, &sp, xL, dirty, s == 1 ? "k last layer" : "v last layer");
            CHECKF(dirty_is(dirty, DT, t, DT - 1), "L %d: %s patch", L, s == 1 ? "k" : "v");
        }
        /* an attention row at t: that row only */
        memset(&k, 0, sizeof k);
        k.att[(l * DH + 0) * DT + t] = 1;
        sp = spec_of(&f, NULL, NULL, NULL, k.att);
        check_delta(&f, &sp, xL, dirty, "att last layer");
        CHECKF(dirty_is(dirty, DT, t, t), "L %d: att patch", L);
        /* the final residual at t: that row only */
        memset(&k, 0, sizeof k);
        k.x[L * DT + t] = 1;
        sp = spec_of(&f, k.x, NULL, NULL, NULL);
        check_delta(&f, &sp, xL, dirty, "x at L");
        CHECKF(dirty_is(dirty, DT, t, t), "L %d: final residual patch", L);
        /* the residual entering layer 0 at t: rows t..T-1 */
        memset(&k, 0, sizeof k);
        k.x[t] = 1;
        sp = spec_of(&f, k.x, NULL, NULL, NULL);
        check_delta(&f, &sp, xL, dirty, "x at 0");
        CHECKF(dirty_is(dirty, DT, t, DT - 1), "L %d: residual patch at layer 0", L);
        /* a head whose z is replaced: patching its q, k, v or pattern does nothing */
        memset(&k, 0, sizeof k);
        for (int s = 0; s < 3; s++) k.qkv[(s * DH + 2) * DT + t] = 1;
        k.att[2 * DT + t] = 1;
        sp = spec_of(&f, NULL, NULL, k.qkv, k.att);
        check_delta(&f, &sp, xL, dirty, "replaced head");
        CHECKF(dirty_is(dirty, DT, 1, 0), "L %d: replaced head", L);
        fix_free(&f);
    }
    free(xL);
}

/* No patch: nothing dirty and base's final residual bit for bit, with
 * all-zero masks, with no masks and with no spec at all. Patching with
 * the target run itself as the source changes nothing either. */
TEST(delta_no_patch_is_base) {
    float *xL = malloc(sizeof(float) * DB * DT * DC);
    unsigned char dirty[DT];
    for (int L = 1; L <= 2; L++) {
        fix f;
        fix_init(&f, L, L == 2, DT);
        size_t n = btc(&f);
        const float *base = f.a.x + (size_t)L * n;
        masks k;
        memset(&k, 0, sizeof k);
        al_patch_spec zero = spec_of(&f, k.x, k.z, k.qkv, k.att), none = {0};
        const al_patch_spec *sps[] = {&zero, &none, NULL};
        al_err e;
        for (int i = 0; i < 3; i++) {
            memset(dirty, 7, sizeof dirty);
            CHECK_OK(al_model_forward_delta(&f.m, &f.a, sps[i], xL, dirty, NULL, &e), &e);
            CHECKF(dirty_is(dirty, DT, 1, 0), "L %d spec %d: dirty", L, i);
            CHECKF(!memcmp(xL, base, sizeof(float) * n), "L %d spec %d: xL", L, i);
        }
        memset(&k, 1, sizeof k);
        memset(k.z + 2 * DT, 0, DT); /* a patched z would override head 0.2's replacement */
        al_patch_spec self = {f.a.x, f.a.z, k.x, k.z, f.a.qkv, f.a.att, k.qkv, NULL};
        CHECK_OK(al_model_forward_delta(&f.m, &f.a, &self, xL, dirty, NULL, &e), &e);
        CHECKF(dirty_is(dirty, DT, 1, 0), "L %d: patched with itself", L);
        CHECK(!memcmp(xL, base, sizeof(float) * n));
        fix_free(&f);
    }
    free(xL);
}

/* No LayerNorm, no MLP: the residual stream entering a layer determines
 * everything after it, so patching it at every position gives the source
 * run's final residual. Bit for bit, too: every row is recomputed from
 * the same inputs with the forward's arithmetic (the analysis' identity
 * tests in test_patch.c rely on this). */
static void full_resid(void) {
    float *xL = malloc(sizeof(float) * DB * DT * DC);
    unsigned char dirty[DT];
    for (int L = 1; L <= 2; L++) {
        fix f;
        fix_init(&f, L, 0, DT);
        size_t n = btc(&f);
        const float *src = f.b.x + (size_t)L * n;
        for (int l = 0; l <= L; l++) {
            masks k;
            memset(&k, 0, sizeof k);
            memset(k.x + l * DT, 1, DT);
            al_patch_spec sp = spec_of(&f, k.x, NULL, NULL, NULL);
            char what[64];
            snprintf(what, sizeof what, "L %d, every position at layer %d", L, l);
            check_delta(&f, &sp, xL, dirty, what);
            CHECKF(dirty_is(dirty, DT, 0, DT - 1), "%s: dirty", what);
            double diff = 0;
            for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)xL[i] - src[i]));
            CHECKF(diff <= 1e-5, "%s: max diff %g from the source run", what, diff);
            CHECKF(!memcmp(xL, src, sizeof(float) * n), "%s: not bit for bit", what);
        }
        fix_free(&f);
    }
    free(xL);
}

TEST(delta_full_resid_reproduces_source) { full_resid(); }
TEST(delta_shortformer_full_resid_reproduces_source) {
    g_pos_type = AL_POS_SHORTFORMER;
    full_resid();
}

/* LayerNorm (LN and LNPre), every bias or some, standard and
 * shortformer positions: every kind of mask against the full patched
 * forward, and a whole patched residual reproduces the source run bit
 * for bit. */
TEST(delta_layernorm_matches_full_forward) {
    g_norm = AL_NORM_LN, g_biases = AL_BIAS_ALL;
    random_masks();
    full_resid();
    g_norm = AL_NORM_LNPRE, g_biases = AL_BIAS_Q | AL_BIAS_V | AL_BIAS_O;
    g_pos_type = AL_POS_SHORTFORMER;
    random_masks();
    full_resid();
    g_norm = AL_NORM_NONE, g_biases = AL_BIAS_ALL, g_pos_type = AL_POS_STANDARD;
    random_masks();
    full_resid();
}

/* The same call twice gives the same bits. */
TEST(delta_deterministic) {
    fix f;
    fix_init(&f, 2, 0, DT);
    size_t n = btc(&f);
    float *x1 = malloc(sizeof(float) * n), *x2 = malloc(sizeof(float) * n);
    unsigned char d1[DT], d2[DT];
    masks k;
    al_rng r;
    al_rng_seed(&r, 3);
    al_patch_spec sp = random_spec(&f, &k, KALL, 0.02, &r);
    al_err e;
    CHECK_OK(al_model_forward_delta(&f.m, &f.a, &sp, x1, d1, NULL, &e), &e);
    CHECK_OK(al_model_forward_delta(&f.m, &f.a, &sp, x2, d2, NULL, &e), &e);
    CHECK(!memcmp(x1, x2, sizeof(float) * n) && !memcmp(d1, d2, DT));
    free(x1);
    free(x2);
    fix_free(&f);
}

/* A mask without its source and a cache of an impossible shape are
 * refused with a message; nothing is written. */
TEST(delta_errors) {
    fix f;
    fix_init(&f, 2, 0, DT);
    size_t n = btc(&f);
    float *xL = malloc(sizeof(float) * n);
    unsigned char dirty[DT];
    masks k;
    memset(&k, 0, sizeof k);
    k.x[3] = k.z[3] = k.qkv[3] = k.att[3] = 1;
    al_patch_spec bad[4] = {{.x_mask = k.x},
                            {.z_mask = k.z},
                            {.qkv_mask = k.qkv},
                            {.att_mask = k.att}};
    for (int i = 0; i < 4; i++) {
        al_err e = {0};
        memset(xL, 0xab, sizeof(float) * n);
        memset(dirty, 0xab, sizeof dirty);
        CHECKF(al_model_forward_delta(&f.m, &f.a, &bad[i], xL, dirty, NULL, &e) == -1, "case %d",
               i);
        CHECKF(strstr(e.msg, "without its source") != NULL, "case %d: '%s'", i, e.msg);
        CHECK(((unsigned char *)xL)[0] == 0xab && ((unsigned char *)xL)[4 * n - 1] == 0xab &&
              dirty[0] == 0xab && dirty[DT - 1] == 0xab);
    }
    al_patch_spec sp = spec_of(&f, k.x, NULL, NULL, NULL);
    al_acts wrong = f.a;
    int shapes[][2] = {{DB, DT + 1}, {0, DT}, {DB, 0}};
    for (int i = 0; i < 3; i++) {
        al_err e = {0};
        wrong.B = shapes[i][0], wrong.T = shapes[i][1];
        dirty[0] = 0xab;
        CHECKF(al_model_forward_delta(&f.m, &wrong, &sp, xL, dirty, NULL, &e) == -1, "shape %d", i);
        CHECKF(strstr(e.msg, "batch shape") != NULL, "shape %d: '%s'", i, e.msg);
        CHECK(dirty[0] == 0xab);
    }
    free(xL);
    fix_free(&f);
}
