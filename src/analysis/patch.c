/* patch.c -- activation patching on the induction task (see patch.h).
 *
 * Per batch of pairs: the clean and the corrupted run once each, their
 * residual streams and z's cached, then one patched forward per
 * configuration. Every patched pass is a full forward from layer 0.
 * Future work: start a pass at the first patched layer (everything below
 * it equals the target run's cache), and patch several configurations of
 * one pass side by side in a larger batch. */
#include "attnlab/patch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/scores.h"

/* The corrupted halves come from their own stream, so changing how they
 * are drawn never moves the clean probe (which is scores' probe). */
#define CORRUPT_SEED_XOR 0x636f727275707431ULL

al_patch_opts al_patch_opts_defaults(void) {
    al_patch_opts o = AL_PATCH_OPTS_INIT;
    return o;
}

static int parse_component(const char *s, al_patch_component *c) {
    if (!s) return -1;
    if (!strcmp(s, "resid")) *c = AL_PATCH_RESID;
    else if (!strcmp(s, "head")) *c = AL_PATCH_HEAD;
    else if (!strcmp(s, "head_pos")) *c = AL_PATCH_HEAD_POS;
    else return -1;
    return 0;
}

static int parse_direction(const char *s, al_patch_direction *d) {
    if (!s) return -1;
    if (!strcmp(s, "denoise")) *d = AL_PATCH_DENOISE;
    else if (!strcmp(s, "noise")) *d = AL_PATCH_NOISE;
    else return -1;
    return 0;
}

int al_patch_opts_check(const al_patch_opts *o, al_err *e) {
    al_patch_component c;
    al_patch_direction d;
    if (!o->task || strcmp(o->task, "induction"))
        return al_errf(e, "unknown patching task '%s' (known: induction)",
                       o->task ? o->task : "(null)");
    if (parse_component(o->component, &c))
        return al_errf(e, "unknown patching component '%s' (known: resid, head, head_pos)",
                       o->component ? o->component : "(null)");
    if (parse_direction(o->direction, &d))
        return al_errf(e, "unknown patching direction '%s' (known: denoise, noise)",
                       o->direction ? o->direction : "(null)");
    if (o->probe_r < 2 || o->probe_r > 1000000 || o->probe_n < 1 || o->probe_n > 1000000 ||
        o->batch < 1 || o->batch > 100000)
        return al_errf(e, "patching needs 2 <= probe_r <= 1000000, 1 <= probe_n <= 1000000 "
                          "and 1 <= batch <= 100000 (got %d, %d, %d)",
                       o->probe_r, o->probe_n, o->batch);
    return 0;
}

void al_patch_result_free(al_patch_result *r) {
    free(r->metric);
    free(r->clean);
    memset(r, 0, sizeof *r);
}

/* The pairs and the per-batch caches. */
typedef struct task {
    int L, H, R, T, N, B;
    al_patch_direction dir;
    al_probe clean;             /* tokens (N, T) */
    int *corr;                  /* (N, T) */
    int *tg;                    /* (N, T) clean next tokens, -1 at the end */
    float *cx, *cz, *rx, *rz;   /* clean / corrupted x (L+1,B,T,C), z (L,B,T,H,D) */
    unsigned char *xm, *zm;     /* scratch masks (L+1, T), (L, H, T) */
} task;

static void task_free(task *k) {
    al_probe_free(&k->clean);
    free(k->corr);
    free(k->cx);
    free(k->xm);
    memset(k, 0, sizeof *k);
}

static int task_make(task *k, const al_model *m, int bos, const al_patch_opts *o, al_err *e) {
    memset(k, 0, sizeof *k);
    const al_config *c = &m->cfg;
    al_patch_component comp;
    if (al_patch_opts_check(o, e)) return -1;
    parse_component(o->component, &comp);
    parse_direction(o->direction, &k->dir);
    k->L = c->n_layers, k->H = c->n_heads, k->R = o->probe_r, k->N = o->probe_n;
    k->T = 2 * k->R + 1;
    k->B = o->batch < k->N ? o->batch : k->N;
    if (k->T > c->n_ctx)
        return al_errf(e, "induction task length 2R+1 = %d exceeds n_ctx %d (lower probe_r)",
                       k->T, c->n_ctx);
    if (al_probe_make(&k->clean, k->R, k->N, o->probe_seed, c->d_vocab, bos, e)) return -1;
    size_t NT = (size_t)k->N * k->T, BT = (size_t)k->B * k->T;
    size_t nx = ((size_t)k->L + 1) * BT * c->d_model, nz = (size_t)k->L * BT * c->n_heads * c->d_head;
    size_t nxm = ((size_t)k->L + 1) * k->T, nzm = (size_t)k->L * k->H * k->T;
    k->corr = al_malloc(2 * NT, sizeof(int), e);
    k->cx = k->corr ? al_malloc(2 * (nx + nz), sizeof(float), e) : NULL;
    k->xm = k->cx ? al_malloc(nxm + nzm, 1, e) : NULL;
    if (!k->xm) {
        task_free(k);
        return -1;
    }
    k->tg = k->corr + NT;
    k->cz = k->cx + nx;
    k->rx = k->cz + nz;
    k->rz = k->rx + nx;
    k->zm = k->xm + nxm;
    al_rng r;
    al_rng_seed(&r, o->probe_seed ^ CORRUPT_SEED_XOR);
    int T = k->T, R = k->R;
    for (int n = 0; n < k->N; n++) {
        const int *a = k->clean.tokens + (size_t)n * T;
        int *x = k->corr + (size_t)n * T, *tg = k->tg + (size_t)n * T;
        memcpy(x, a, sizeof(int) * T);
        for (int i = 1; i <= R; i++) {
            int id;
            do id = (int)al_rng_below(&r, (uint32_t)c->d_vocab);
            while (id == bos || id == a[i]);
            x[i] = id;
        }
        for (int t = 0; t < T; t++) tg[t] = t + 1 < T ? a[t + 1] : -1;
    }
    return 0;
}

/* Σ over the batch's sequences and t = R+1..2R−1 of log p(target). */
static double metric_sum(const al_model *m, int B, int R) {
    int T = 2 * R + 1;
    double s = 0.0;
    for (int b = 0; b < B; b++)
        for (int t = R + 1; t <= 2 * R - 1; t++) s -= m->losses[(size_t)b * T + t];
    return s;
}

/* Masks of configuration cfg of component comp into k->xm / k->zm; the
 * spec points at the ones it uses. */
static void config_masks(task *k, al_patch_component comp, int cfg, al_patch_spec *sp) {
    int T = k->T, H = k->H;
    if (comp == AL_PATCH_RESID) {
        memset(k->xm, 0, ((size_t)k->L + 1) * T);
        k->xm[cfg] = 1; /* cfg = l·T + t */
        sp->x_mask = k->xm;
        sp->z_mask = NULL;
        return;
    }
    memset(k->zm, 0, (size_t)k->L * H * T);
    if (comp == AL_PATCH_HEAD) memset(k->zm + (size_t)cfg * T, 1, T); /* cfg = l·H + h */
    else k->zm[cfg] = 1;                                               /* cfg = (l·H+h)·T + t */
    sp->x_mask = NULL;
    sp->z_mask = k->zm;
}

/* The engine of both entry points: with fixed masks (fx/fz, n = 1) or the
 * n configurations of comp. sums[0..n) get Σ M_p, *sc and *sr Σ M_clean
 * and Σ M_corr. m->patch is NULL during the call; the caller restores it. */
static int sweep(al_model *m, task *k, int fixed, const unsigned char *fx,
                 const unsigned char *fz, al_patch_component comp, int n, double *sums,
                 double *sc, double *sr, al_err *e) {
    int T = k->T;
    *sc = *sr = 0.0;
    for (int i = 0; i < n; i++) sums[i] = 0.0;
    for (int n0 = 0; n0 < k->N; n0 += k->B) {
        int B = k->N - n0 < k->B ? k->N - n0 : k->B;
        const int *cin = k->clean.tokens + (size_t)n0 * T, *rin = k->corr + (size_t)n0 * T;
        const int *tg = k->tg + (size_t)n0 * T;
        m->patch = NULL;
        if (al_model_forward(m, cin, tg, B, T, e)) return -1;
        *sc += metric_sum(m, B, k->R);
        al_model_copy_acts(m, k->cx, k->cz);
        if (al_model_forward(m, rin, tg, B, T, e)) return -1;
        *sr += metric_sum(m, B, k->R);
        al_model_copy_acts(m, k->rx, k->rz);
        int den = k->dir == AL_PATCH_DENOISE;
        al_patch_spec sp = {den ? k->cx : k->rx, den ? k->cz : k->rz, fx, fz};
        const int *target = den ? rin : cin;
        for (int i = 0; i < n; i++) {
            if (!fixed) config_masks(k, comp, i, &sp);
            m->patch = &sp;
            int rc = al_model_forward(m, target, tg, B, T, e);
            m->patch = NULL;
            if (rc) return -1;
            sums[i] += metric_sum(m, B, k->R);
        }
    }
    return 0;
}

static double effect(al_patch_direction d, double mp, double mc, double mr) {
    if (mc == mr) return NAN;
    return d == AL_PATCH_DENOISE ? (mp - mr) / (mc - mr) : (mc - mp) / (mc - mr);
}

int al_patch_run(al_model *m, int bos, const al_patch_opts *o, al_patch_result *r,
                 al_err *e) {
    memset(r, 0, sizeof *r);
    task k;
    if (task_make(&k, m, bos, o, e)) return -1;
    al_patch_component comp;
    parse_component(o->component, &comp);
    int rows = comp == AL_PATCH_HEAD ? k.L : k.L * (comp == AL_PATCH_HEAD_POS ? k.H : 1);
    int cols = comp == AL_PATCH_HEAD ? k.H : k.T;
    int n = rows * cols;
    size_t NT = (size_t)k.N * k.T;
    double *buf = al_malloc((size_t)n * 2, sizeof(double), e);
    int *tok = buf ? al_malloc(2 * NT, sizeof(int), e) : NULL;
    const al_patch_spec *saved = m->patch;
    double sc, sr;
    int rc = tok ? sweep(m, &k, 0, NULL, NULL, comp, n, buf, &sc, &sr, e) : -1;
    m->patch = saved;
    if (rc) {
        free(buf);
        free(tok);
        task_free(&k);
        return -1;
    }
    double cnt = (double)k.N * (k.R - 1);
    r->L = k.L, r->H = k.H, r->R = k.R, r->N = k.N, r->T = k.T;
    r->component = comp;
    r->direction = k.dir;
    r->m_clean = sc / cnt;
    r->m_corr = sr / cnt;
    r->rows = rows, r->cols = cols, r->n = n;
    r->metric = buf;
    r->effect = buf + n;
    r->clean = tok;
    r->corr = tok + NT;
    memcpy(r->clean, k.clean.tokens, sizeof(int) * NT);
    memcpy(r->corr, k.corr, sizeof(int) * NT);
    for (int i = 0; i < n; i++) {
        buf[i] /= cnt;
        r->effect[i] = effect(k.dir, buf[i], r->m_clean, r->m_corr);
    }
    task_free(&k);
    return 0;
}

int al_patch_eval(al_model *m, int bos, const al_patch_opts *o,
                  const unsigned char *x_mask, const unsigned char *z_mask,
                  double *m_patched, double *m_clean, double *m_corr, al_err *e) {
    task k;
    if (task_make(&k, m, bos, o, e)) return -1;
    const al_patch_spec *saved = m->patch;
    double sp, sc, sr;
    int rc = sweep(m, &k, 1, x_mask, z_mask, AL_PATCH_RESID, 1, &sp, &sc, &sr, e);
    m->patch = saved;
    double cnt = (double)k.N * (k.R - 1);
    task_free(&k);
    if (rc) return -1;
    if (m_patched) *m_patched = sp / cnt;
    if (m_clean) *m_clean = sc / cnt;
    if (m_corr) *m_corr = sr / cnt;
    return 0;
}
