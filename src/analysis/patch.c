/* patch.c -- activation patching and path patching (see patch.h).
 *
 * Per batch of pairs the clean and the corrupted run are computed once
 * and cached (al_acts); the metric's items are read from each run's
 * final residual stream with one shared routine (item_values), so a
 * patch that reproduces the other run's final residual reproduces its
 * metric bit for bit. A configuration is then a patch spec over the
 * target run: al_model_forward_delta recomputes only what the patch can
 * change, and only the items at positions it marks dirty are unembedded
 * again; the rest keep the target run's values. With o->naive every
 * configuration is one full patched forward (al_model_forward with
 * the patch's hooks, al_patch_hooks_add) instead: the reference for
 * tests and `make bench`.
 *
 * Path patching is the same machinery with a synthesised source: the
 * receiver's q, k or v computed from target residual + Δsender (linear,
 * so target q + Δsender·W_Q; with LayerNorm, through the receiver's own
 * ln1), or for the direct path the final residual plus Δsender (ln_final
 * follows it in the unembedding); everything else stays at the target
 * run's values. */
#include "attnlab/patch.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/graph.h"
#include "attnlab/layers.h"
#include "attnlab/membudget.h"
#include "attnlab/scores.h"

/* The corrupted halves come from their own stream, so changing how they
 * are drawn never moves the clean probe (which is scores' probe). */
#define CORRUPT_SEED_XOR 0x636f727275707431ULL
/* Rows unembedded at once: bounds the logits scratch to ROWS·V floats. */
#define ROWS 64

static const char *const comp_names[] = {"resid", "head", "head_pos", "q", "k", "v", "pattern"};
static const char *const chan_names[] = {"q", "k", "v", "direct"};

void al_patch_opts_from_config(const cJSON *j, al_patch_opts *o) {
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "task")) && cJSON_IsString(v))
        o->task = v->valuestring;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "pairs")) && cJSON_IsString(v))
        o->pairs = v->valuestring;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "probe_r")) && cJSON_IsNumber(v))
        o->probe_r = v->valueint;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "n")) && cJSON_IsNumber(v))
        o->probe_n = v->valueint;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "seed")) && cJSON_IsNumber(v))
        o->probe_seed = (uint64_t)v->valuedouble;
    if ((v = cJSON_GetObjectItemCaseSensitive(j, "seed")) && cJSON_IsString(v))
        o->probe_seed = strtoull(v->valuestring, NULL, 10);
}

al_patch_opts al_patch_opts_defaults(void) {
    al_patch_opts o = AL_PATCH_OPTS_INIT;
    return o;
}

int al_patch_component_parse(const char *s, al_patch_component *c) {
    for (int i = 0; s && i < (int)(sizeof comp_names / sizeof comp_names[0]); i++)
        if (!strcmp(s, comp_names[i])) {
            *c = (al_patch_component)i;
            return 0;
        }
    return -1;
}

int al_patch_direction_parse(const char *s, al_patch_direction *d) {
    if (!s) return -1;
    if (!strcmp(s, "denoise"))
        *d = AL_PATCH_DENOISE;
    else if (!strcmp(s, "noise"))
        *d = AL_PATCH_NOISE;
    else
        return -1;
    return 0;
}

const char *al_patch_component_name(al_patch_component c) { return comp_names[c]; }
const char *al_patch_direction_name(al_patch_direction d) {
    return d == AL_PATCH_DENOISE ? "denoise" : "noise";
}
const char *al_paths_channel_name(int c) { return chan_names[c]; }

const char *al_paths_sender_name(int H, int s, char *buf, size_t cap) {
    return al_graph_sender_name(H, s, buf, cap);
}

const char *al_paths_receiver_name(int H, int r, char *buf, size_t cap) {
    snprintf(buf, cap, "%d.%d", r / H + 1, r % H);
    return buf;
}

int al_paths_count(int L, int H) {
    int n = 0, W = al_paths_width(L, H);
    for (int c = 0; c < 4; c++)
        for (int s = 0; s < 2 + W; s++)
            for (int r = 0; r < W; r++) n += al_paths_exists(L, H, c, s, r);
    return n;
}

int al_paths_width(int L, int H) { return (L > 1 ? L - 1 : 1) * H; }

int al_paths_exists(int L, int H, int c, int s, int r) {
    if (L < 1 || H < 1 || c < 0 || c > 3 || s < 0 || s >= 2 + al_paths_width(L, H) || r < 0)
        return 0;
    if (c == 3) return r == 0;
    if (r >= (L - 1) * H) return 0; /* also every q/k/v of a 1-layer model */
    return s < 2 || (s - 2) / H < r / H + 1; /* a sender head of an earlier layer */
}

int al_patch_opts_check(const al_patch_opts *o, al_err *e) {
    al_patch_component c;
    al_patch_direction d;
    int idents = o->task && (!strcmp(o->task, "idents") || !strcmp(o->task, "idents-key"));
    if (!o->task || (strcmp(o->task, "induction") && strcmp(o->task, "names") &&
                     strcmp(o->task, "names-key") && strcmp(o->task, "file") && !idents))
        return al_errf(e,
                       "unknown patching task '%s' (known: induction, names, names-key, idents, "
                       "idents-key, file)",
                       o->task ? o->task : "(null)");
    if (o->probe_src && strcmp(o->task, "induction") &&
        ((strncmp(o->task, "names", 5) && !idents) || !o->probe_src->text))
        return al_errf(e, "task '%s' takes no %s (--probe-tokens)", o->task,
                       o->probe_src->text ? "text" : "id mask");

    int file = !strcmp(o->task, "file");
    if (file && (!o->pairs || !*o->pairs))
        return al_errf(e, "task 'file' needs a JSONL pair file (--pairs FILE)");
    if (!file && o->pairs)
        return al_errf(e, "a pair file (--pairs) is for task 'file', not '%s' (add --task file)",
                       o->task);
    if (al_patch_component_parse(o->component, &c))
        return al_errf(e,
                       "unknown patching component '%s' (known: resid, head, head_pos, q, k, "
                       "v, pattern)",
                       o->component ? o->component : "(null)");
    if (al_patch_direction_parse(o->direction, &d))
        return al_errf(e, "unknown patching direction '%s' (known: denoise, noise)",
                       o->direction ? o->direction : "(null)");
    /* probe_r is the induction task's, probe_n also the names task's; a
     * file has its own sizes */
    int r_bad = !strcmp(o->task, "induction") && o->probe_r != 0 &&
                (o->probe_r < 2 || o->probe_r > 1000000);
    int n_bad = !file && (o->probe_n < 1 || o->probe_n > 1000000);
    if (r_bad || n_bad || o->batch < 1 || o->batch > 100000)
        return al_errf(e,
                       "patching needs 2 <= probe_r <= 1000000, 1 <= n <= 1000000 "
                       "and 1 <= batch <= 100000 (got %d, %d, %d)",
                       o->probe_r, o->probe_n, o->batch);
    return al_ci_check(o->ci_level, o->bootstrap, e);
}

/* ------------------------------------------------------------- tasks */

static int pairs_alloc(al_pairs *t, const char *task, int N, int T, int n_items, al_err *e) {
    memset(t, 0, sizeof *t);
    snprintf(t->task, sizeof t->task, "%s", task);
    t->N = N, t->T = T, t->n_items = n_items;
    t->clean = al_calloc((size_t)N * (2 * (size_t)T + 1), sizeof(int), e);
    t->items = t->clean ? al_malloc((size_t)n_items, sizeof(al_pair_item), e) : NULL;
    if (!t->items) {
        al_pairs_free(t);
        return -1;
    }
    t->corr = t->clean + (size_t)N * T;
    t->len = t->corr + (size_t)N * T;
    return 0;
}

int al_patch_probe_r(const al_patch_opts *o, int n_ctx) {
    return al_probe_r_default(o->probe_r, n_ctx);
}

int al_patch_task_fits(const al_patch_opts *o, int n_ctx, al_err *e) {
    if (!o->task || strcmp(o->task, "induction")) return 0;
    int R = al_patch_probe_r(o, n_ctx);
    if (R < 2)
        return al_errf(e, "n_ctx %d is too short for the induction task (2R+1 tokens, R >= 2)",
                       n_ctx);
    if (2.0 * R + 1 > n_ctx)
        return al_errf(e, "induction task length 2R+1 = %d exceeds n_ctx %d (lower --probe-r)",
                       2 * R + 1, n_ctx);
    return 0;
}

static int induction_task(al_pairs *t, const al_model *m, int bos, const al_patch_opts *o,
                          al_err *e) {
    const al_config *c = &m->cfg;
    int R = al_patch_probe_r(o, c->n_ctx), N = o->probe_n, T = 2 * R + 1;
    if (al_patch_task_fits(o, c->n_ctx, e)) return -1;
    al_probe p, q = {0};
    int text = o->probe_src && o->probe_src->text;
    if (al_probe_make(&p, R, N, o->probe_seed, c->d_vocab, bos, o->probe_src, e)) return -1;
    /* text: the corrupted first halves are other windows of the same text */
    if ((text && al_probe_make(&q, R, N, o->probe_seed ^ CORRUPT_SEED_XOR, c->d_vocab, bos,
                               o->probe_src, e)) ||
        pairs_alloc(t, "induction", N, T, N * (R - 1), e)) {
        al_probe_free(&p);
        al_probe_free(&q);
        return -1;
    }
    const unsigned char *allowed = o->probe_src ? o->probe_src->allowed : NULL;
    al_rng r;
    al_rng_seed(&r, o->probe_seed ^ CORRUPT_SEED_XOR);
    al_pair_item *it = t->items;
    for (int n = 0; n < N; n++) {
        const int *a = p.tokens + (size_t)n * T;
        int *x = t->corr + (size_t)n * T;
        memcpy(t->clean + (size_t)n * T, a, sizeof(int) * T);
        memcpy(x, a, sizeof(int) * T);
        if (text) memcpy(x + 1, q.tokens + (size_t)n * T + 1, sizeof(int) * R);
        for (int i = 1; !text && i <= R; i++) {
            int id;
            /* rejection, as the probe's: uniform over the allowed ids, and
             * without a mask the stream of earlier versions (al_probe_make
             * made sure two ids besides BOS are allowed) */
            do id = (int)al_rng_below(&r, (uint32_t)c->d_vocab);
            while (id == bos || id == a[i] || (allowed && !allowed[id]));
            x[i] = id;
        }
        t->len[n] = T;
        for (int pos = R + 1; pos <= 2 * R - 1; pos++)
            *it++ = (al_pair_item){n, pos, a[pos + 1], -1};
    }
    al_probe_free(&p);
    al_probe_free(&q);
    return 0;
}

/* A sweep holds about five copies of one forward pass's activations for
 * a batch (the model's own, the clean and corrupted caches, the
 * incremental forward's scratch, the synthesised source of path
 * patching). Refuse before anything is begun when that cannot fit in
 * this machine's memory, rather than be killed by the OOM killer
 * half-way: each allocation alone might still succeed. */
static int memory_fits(const al_pairs *t, const al_config *c, const al_patch_opts *o, al_err *e) {
    double B = o->batch < t->N ? o->batch : t->N, T = t->T, L = c->n_layers, H = c->n_heads;
    double HD = H * c->d_head, C = c->d_model;
    double acts = (L + 1) * B * T * C + L * B * T * 3 * HD + L * B * H * T * T +
                  2 * L * B * T * HD + B * T * c->d_vocab;
    double need = 5.0 * acts * sizeof(float);
    char what[96];
    snprintf(what, sizeof what, "--batch %d pairs of %d tokens", (int)B, t->T);
    if (al_mem_check(need, "patching", what, "lower --batch", e)) return -1;
    /* the intervals' per-pair sums of every configuration (head_pos: L·H·T
     * of them; paths: the grid) and the bootstrap's ratios */
    double W = (L > 1 ? L - 1 : 1) * H, n_paths = 4 * (2 + W) * W;
    double n_cfg = L * H * T > n_paths ? L * H * T : n_paths;
    snprintf(what, sizeof what, "--n %d pairs x %.0f configurations (and --bootstrap %d)", t->N,
             n_cfg, o->bootstrap);
    return al_mem_check(8.0 * n_cfg * ((double)t->N + 2 + o->bootstrap), "patching", what,
                        "lower --n or --bootstrap", e);
}

int al_patch_task_make(al_pairs *t, const al_model *m, const al_tokenizer *tok, int bos,
                       const al_patch_opts *o, al_err *e) {
    memset(t, 0, sizeof *t);
    if (al_patch_opts_check(o, e)) return -1;
    int rc;
    if (!strcmp(o->task, "induction"))
        rc = induction_task(t, m, bos, o, e);
    else if (!tok)
        return al_errf(e,
                       "task '%s' needs the model's tokenizer (tokenizer.json in the model "
                       "directory)",
                       o->task);
    else if ((!strncmp(o->task, "names", 5) || !strncmp(o->task, "idents", 6)) && o->probe_src &&
             o->probe_src->text) {
        al_tokens val = {(uint16_t *)o->probe_src->text, o->probe_src->n_text, 0};
        int code = !strncmp(o->task, "idents", 6);
        rc = al_pairs_names_text(tok, &val, o->probe_n, o->probe_seed, m->cfg.n_ctx,
                                 !strcmp(o->task, code ? "idents-key" : "names-key"), code, t, e);
    } else if (!strncmp(o->task, "idents", 6))
        return al_errf(e,
                       "task '%s' renames variables in held-out code: give it the code "
                       "(--probe-tokens text, or text:FILE.bin)",
                       o->task);
    else if (!strncmp(o->task, "names", 5))
        rc = al_pairs_names(tok, o->probe_n, o->probe_seed, m->cfg.n_ctx, bos,
                            !strcmp(o->task, "names-key"), o->stop, t, e);
    else
        rc = al_pairs_load_jsonl(o->pairs, tok, m->cfg.n_ctx, t, e);
    if (rc == 0 &&
        (al_pairs_check(t, m->cfg.n_ctx, m->cfg.d_vocab, e) || memory_fits(t, &m->cfg, o, e))) {
        al_pairs_free(t);
        rc = -1;
    }
    return rc;
}

/* ------------------------------------------------------------- sweep */

typedef struct sweep {
    al_model *m;
    const al_pairs *t;
    al_patch_direction dir;
    int naive, L, H, T, C, V, B; /* B: pairs per batch (capacity) */
    int n0, nb; /* the current batch: pairs n0..n0+nb−1 */
    int i0, ni; /* its items */
    al_acts cl, co; /* the two runs of the batch */
    int *tg; /* (B, T) target ids of the current batch, or NULL */
    double *v_cl, *v_co; /* (max items per batch) per-item values */
    double *v_p; /* scratch: a patched run's values */
    float *xL; /* (B, T, C) patched final residual */
    unsigned char *dirty; /* (T) */
    float *rows, *logits; /* (ROWS, C), (ROWS, V) */
    unsigned char *xm, *zm, *qm, *am; /* masks (L+1,T) (L,H,T) (L,3,H,T) (L,H,T) */
    float *syn; /* paths: synthesised qkv (L,B,T,3,H,D) or x (L+1,B,T,C) */
    float *delta; /* paths: (B, T, C) Δsender */
    const al_patch_opts *o; /* progress and stop */
    al_progress pg;
    long done, total; /* configurations x batches */
    const char *what; /* the progress line's label */
    int n_cfg; /* configurations per batch */
    double *it_cl, *it_co; /* (n_items) or NULL: every item's value in the two runs,
                                  * kept by drive for the gap check */
    double *pp; /* (N, pp_w) or NULL: each pair's Σ of the patched metric per
                 * configuration (patch: its index; paths: its grid index), for
                 * the intervals */
    int pp_w;
    double *pc, *pr; /* (N) with pp: each pair's Σ in the clean and corrupted runs */
    al_delta_ws ws; /* the incremental forwards' scratch */
} sweep;

static void sweep_free(sweep *s) {
    al_acts_free(&s->cl);
    al_acts_free(&s->co);
    free(s->v_cl);
    free(s->xL);
    free(s->xm);
    free(s->syn);
    al_delta_ws_free(&s->ws);
    memset(s, 0, sizeof *s);
}

static int sweep_init(sweep *s, al_model *m, const al_pairs *t, const al_patch_opts *o, int paths,
                      al_err *e) {
    memset(s, 0, sizeof *s);
    const al_config *c = &m->cfg;
    if (al_patch_opts_check(o, e)) return -1;
    if (al_pairs_check(t, c->n_ctx, c->d_vocab, e)) return -1;
    al_patch_direction_parse(o->direction, &s->dir);
    /* the incremental forward runs no hooks: with hooks registered (an
     * intervention) every configuration is one full patched forward */
    s->m = m, s->t = t, s->o = o;
    s->naive = o->naive || m->hooks.n > 0;
    s->L = c->n_layers, s->H = c->n_heads, s->T = t->T, s->C = c->d_model, s->V = c->d_vocab;
    s->B = o->batch < t->N ? o->batch : t->N;
    int maxi = 0; /* the most items any batch holds */
    for (int n0 = 0, i = 0; n0 < t->N; n0 += s->B) {
        int i1 = i;
        while (i1 < t->n_items && t->items[i1].pair < n0 + s->B) i1++;
        if (i1 - i > maxi) maxi = i1 - i;
        i = i1;
    }
    size_t L = s->L, H = s->H, T = s->T, BTC = (size_t)s->B * T * s->C;
    size_t HD = H * c->d_head;
    if (al_acts_alloc(&s->cl, c, s->B, s->T, e) || al_acts_alloc(&s->co, c, s->B, s->T, e))
        goto fail;
    s->v_cl = al_malloc(3 * (size_t)maxi, sizeof(double), e);
    s->xL = s->v_cl ? al_malloc(BTC + (size_t)ROWS * (s->C + s->V), sizeof(float), e) : NULL;
    s->xm = s->xL ? al_malloc((L + 1) * T + L * H * T * 5 + T, 1, e) : NULL;
    if (!s->xm) goto fail;
    s->v_co = s->v_cl + maxi;
    s->v_p = s->v_co + maxi;
    s->rows = s->xL + BTC;
    s->logits = s->rows + (size_t)ROWS * s->C;
    s->zm = s->xm + (L + 1) * T;
    s->qm = s->zm + L * H * T;
    s->am = s->qm + 3 * L * H * T;
    s->dirty = s->am + L * H * T;
    if (paths) {
        size_t nq = L * s->B * T * 3 * HD, nx = (L + 1) * BTC;
        /* LayerNorm: two ln1 outputs and their statistics (synth_qkv) */
        size_t nl = c->norm_type != AL_NORM_NONE ? 2 * BTC + 4 * (size_t)s->B * T : 0;
        s->syn = al_malloc((nq > nx ? nq : nx) + BTC + nl, sizeof(float), e);
        if (!s->syn) goto fail;
        s->delta = s->syn + (nq > nx ? nq : nx);
    }
    return 0;
fail:
    sweep_free(s);
    return -1;
}

static void clear_masks(sweep *s) {
    size_t L = s->L, H = s->H, T = s->T;
    memset(s->xm, 0, (L + 1) * T + L * H * T * 5);
}

/* out[i] = the metric of the current batch's item i0+i from final
 * residual xL (nb, T, C), for items at positions with dirty[pos] (all
 * when dirty is NULL); the others get base[i]. */
static void item_values(sweep *s, const float *xL, const unsigned char *dirty, const double *base,
                        double *out) {
    const al_pairs *t = s->t;
    int n = 0, idx[ROWS];
    for (int i = 0; i <= s->ni; i++) {
        const al_pair_item *it = i < s->ni ? &t->items[s->i0 + i] : NULL;
        if (it && dirty && !dirty[it->pos]) {
            out[i] = base[i];
            continue;
        }
        if (it && t->logit_diff) {
            const float *x = xL + ((size_t)(it->pair - s->n0) * s->T + it->pos) * s->C;
            out[i] = (double)al_model_logit(s->m, x, it->answer) -
                     (double)al_model_logit(s->m, x, it->wrong);
            continue;
        }
        if (it) {
            memcpy(s->rows + (size_t)n * s->C,
                   xL + ((size_t)(it->pair - s->n0) * s->T + it->pos) * s->C, sizeof(float) * s->C);
            idx[n++] = i;
        }
        if (n == ROWS || (!it && n)) {
            al_model_unembed(s->m, s->rows, n, s->logits);
            /* rows are independent: the same bits for any thread count */
#pragma omp parallel for schedule(static)
            for (int k = 0; k < n; k++) {
                float *lg = s->logits + (size_t)k * s->V;
                double a = lg[t->items[s->i0 + idx[k]].answer];
                out[idx[k]] = a - logsumexp_row(lg, s->V);
            }
            n = 0;
        }
    }
}

static double sum_of(const double *v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return s;
}

/* Run batch [n0, n0+nb): both runs, cached, and their item values. */
static int batch_begin(sweep *s, int n0, al_err *e) {
    const al_pairs *t = s->t;
    s->n0 = n0;
    s->nb = t->N - n0 < s->B ? t->N - n0 : s->B;
    while (s->i0 < t->n_items && t->items[s->i0].pair < n0) s->i0++;
    s->ni = 0;
    while (s->i0 + s->ni < t->n_items && t->items[s->i0 + s->ni].pair < n0 + s->nb) s->ni++;
    const size_t off = (size_t)n0 * s->T;
    al_acts *runs[2] = {&s->cl, &s->co};
    double *vals[2] = {s->v_cl, s->v_co};
    const int *in[2] = {t->clean + off, t->corr + off};
    for (int k = 0; k < 2; k++) {
        runs[k]->B = s->nb; /* a short last batch: the cache's first nb rows */
        if (al_model_forward(s->m, in[k], NULL, s->nb, s->T, e) || al_acts_save(s->m, runs[k], e))
            return -1;
        item_values(s, runs[k]->x + (size_t)s->L * s->nb * s->T * s->C, NULL, NULL, vals[k]);
    }
    return 0;
}

/* Σ of the metric over the batch's items with the masks as set and
 * sources src (paths: s->syn as q/k/v or x source). */
static int patched_sum(sweep *s, const al_acts *src, const float *syn_qkv, const float *syn_x,
                       double *sum, al_err *e) {
    int den = s->dir == AL_PATCH_DENOISE;
    const al_acts *base = den ? &s->co : &s->cl;
    const double *bv = den ? s->v_co : s->v_cl;
    al_patch_spec sp = {syn_x ? syn_x : src->x,       src->z,   s->xm, s->zm,
                        syn_qkv ? syn_qkv : src->qkv, src->att, s->qm, s->am};
    if (s->naive) {
        const int *in = (den ? s->t->corr : s->t->clean) + (size_t)s->n0 * s->T;
        int rc =
            al_patch_hooks_add(s->m, &sp, e) || al_model_forward(s->m, in, NULL, s->nb, s->T, e);
        al_hook_remove(s->m, &sp);
        if (rc) return -1;
        item_values(s, s->m->x + (size_t)s->L * s->nb * s->T * s->C, NULL, NULL, s->v_p);
    } else {
        if (al_model_forward_delta(s->m, base, &sp, s->xL, s->dirty, &s->ws, e)) return -1;
        item_values(s, s->xL, s->dirty, bv, s->v_p);
    }
    *sum = sum_of(s->v_p, s->ni);
    return 0;
}

static double effect(al_patch_direction d, double mp, double mc, double mr) {
    if (mc == mr) return NAN;
    return d == AL_PATCH_DENOISE ? (mp - mr) / (mc - mr) : (mc - mp) / (mc - mr);
}

/* Masks of configuration k of component c. */
static void config_masks(sweep *s, al_patch_component c, int k) {
    int T = s->T, H = s->H;
    clear_masks(s);
    int lh = k / T, t = k % T; /* for the (L·H, T) grids */
    switch (c) {
    case AL_PATCH_RESID: s->xm[k] = 1; break;
    case AL_PATCH_HEAD: memset(s->zm + (size_t)k * T, 1, T); break;
    case AL_PATCH_HEAD_POS: s->zm[k] = 1; break;
    case AL_PATCH_Q:
    case AL_PATCH_K:
    case AL_PATCH_V:
        s->qm[(((size_t)(lh / H) * 3 + (c - AL_PATCH_Q)) * H + lh % H) * T + t] = 1;
        break;
    case AL_PATCH_PATTERN: s->am[k] = 1; break;
    }
}

static int stopped(const al_patch_opts *o, al_err *e) {
    if (o->stop && *o->stop) return al_errf(e, "interrupted");
    return 0;
}

/* One configuration of the current batch done: the stop flag, then the
 * progress line. */
static int tick(sweep *s, al_err *e) {
    s->done++;
    if (s->o->progress)
        al_progress_count(&s->pg, 0, (double)s->done, (double)s->total,
                          "%s: %ld/%ld configurations x batches", s->what, s->done, s->total);
    return stopped(s->o, e);
}

/* The current batch's item values of both runs into s->it_cl, s->it_co
 * (when kept), for the gap check after the sweep. */
static void keep_items(sweep *s) {
    if (!s->it_cl) return;
    memcpy(s->it_cl + s->i0, s->v_cl, sizeof(double) * s->ni);
    memcpy(s->it_co + s->i0, s->v_co, sizeof(double) * s->ni);
}

/* The gap check of the sweep's task (from the items drive kept) and the
 * range of its n normalised effects eff (labelled what) into w. */
static int sweep_warnings(const sweep *s, const double *eff, int n, const char *what,
                          al_warnings *w, al_err *e) {
    if (al_gap_check_items(w, s->t, al_gap_metric_name(s->t), s->it_cl, s->it_co, e)) return -1;
    al_effect_check(w, what, eff, n);
    return 0;
}

/* The batches of a sweep of n configurations: both runs of each batch,
 * then fn adds each configuration's Σ metric over the batch's items into
 * sums (calling tick after each); then sums[i] /= the item count and
 * effect[i] from it (NaN sums stay NaN: configurations that do not
 * exist). 0, or −1 with e. */
typedef int (*batch_fn)(sweep *s, void *ctx, double *sums, al_err *e);

static int drive(sweep *s, int n, batch_fn fn, void *ctx, double *metric, double *eff,
                 double *m_clean, double *m_corr, al_err *e) {
    const al_pairs *t = s->t;
    double sc = 0.0, sr = 0.0;
    int rc = 0;
    al_progress_init(&s->pg, 10.0);
    s->done = 0;
    s->total = (long)s->n_cfg * ((t->N + s->B - 1) / s->B);
    for (int n0 = 0; rc == 0 && n0 < t->N; n0 += s->B) {
        if ((rc = batch_begin(s, n0, e))) break;
        sc += sum_of(s->v_cl, s->ni), sr += sum_of(s->v_co, s->ni);
        keep_items(s);
        rc = fn(s, ctx, metric, e);
    }
    if (s->o->progress) al_progress_done(&s->pg);
    if (rc) return -1;
    double cnt = (double)t->n_items;
    *m_clean = sc / cnt;
    *m_corr = sr / cnt;
    for (int i = 0; i < n; i++) {
        metric[i] /= cnt;
        eff[i] = effect(s->dir, metric[i], *m_clean, *m_corr);
    }
    return 0;
}

/* The current batch's item values v (the patched run's, of
 * configuration k; or with k < 0 the two unpatched runs') added to their
 * pairs' sums, when the intervals are kept. */
static void pair_sums(sweep *s, int k) {
    if (!s->pp) return;
    const al_pair_item *it = s->t->items + s->i0;
    for (int i = 0; i < s->ni; i++)
        if (k >= 0)
            s->pp[(size_t)it[i].pair * s->pp_w + k] += s->v_p[i];
        else
            s->pc[it[i].pair] += s->v_cl[i], s->pr[it[i].pair] += s->v_co[i];
}

static int patch_batch(sweep *s, void *ctx, double *sums, al_err *e) {
    const al_patch_component comp = *(const al_patch_component *)ctx;
    const al_acts *src = s->dir == AL_PATCH_DENOISE ? &s->cl : &s->co;
    pair_sums(s, -1);
    for (int k = 0; k < s->n_cfg; k++) {
        double v;
        config_masks(s, comp, k);
        if (patched_sum(s, src, NULL, NULL, &v, e) || tick(s, e)) return -1;
        sums[k] += v;
        pair_sums(s, k);
    }
    return 0;
}

/* The effects' intervals from the pairs' sums (al_boot_ratio): per pair
 * the patched minus the corrupted Σ (denoising; noising the clean minus
 * the patched) over the clean minus the corrupted, built in place in
 * s->pp. */
static int effect_intervals(sweep *s, const al_patch_opts *o, al_interval **out, al_err *e) {
    const int N = s->t->N, n = s->pp_w, den = s->dir == AL_PATCH_DENOISE;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < n; k++) {
            double *p = &s->pp[(size_t)i * n + k];
            *p = den ? *p - s->pr[i] : s->pc[i] - *p;
        }
        s->pc[i] -= s->pr[i];
    }
    return !(*out = al_malloc((size_t)n, sizeof **out, e)) ||
                   al_boot_ratio(s->pp, s->pc, N, n, o->bootstrap, o->ci_level, o->ci_seed, *out, e)
               ? -1
               : 0;
}

void al_patch_result_free(al_patch_result *r) {
    free(r->metric);
    free(r->effect_ci);
    memset(r, 0, sizeof *r);
}

int al_patch_run(al_model *m, const al_pairs *t, const al_patch_opts *o, al_patch_result *r,
                 al_err *e) {
    memset(r, 0, sizeof *r);
    double t0 = al_now();
    al_patch_component comp = AL_PATCH_HEAD;
    sweep s;
    if (sweep_init(&s, m, t, o, 0, e)) return -1;
    al_patch_component_parse(o->component, &comp);
    int L = s.L, H = s.H, T = s.T;
    int rows = comp == AL_PATCH_HEAD ? L : comp == AL_PATCH_RESID ? L : L * H;
    int cols = comp == AL_PATCH_HEAD ? H : T;
    int n = rows * cols;
    double *buf = al_calloc((size_t)n * 2, sizeof(double), e);
    double *items = buf ? al_malloc(2 * (size_t)t->n_items, sizeof(double), e) : NULL;
    /* each pair's sums, for the intervals */
    double *pairs = items ? al_calloc((size_t)t->N * (n + 2), sizeof(double), e) : NULL;
    char what[32], label[64];
    snprintf(what, sizeof what, "patch %s", comp_names[comp]);
    snprintf(label, sizeof label, "normalised effect (%s, %s)", comp_names[comp],
             al_patch_direction_name(s.dir));
    s.what = what;
    s.n_cfg = n;
    s.it_cl = items, s.it_co = items ? items + t->n_items : NULL;
    s.pp = pairs, s.pp_w = n;
    s.pc = pairs ? pairs + (size_t)t->N * n : NULL, s.pr = s.pc ? s.pc + t->N : NULL;
    if (!pairs || drive(&s, n, patch_batch, &comp, buf, buf + n, &r->m_clean, &r->m_corr, e) ||
        sweep_warnings(&s, buf + n, n, label, &r->warn, e) ||
        effect_intervals(&s, o, &r->effect_ci, e)) {
        free(buf);
        free(items);
        free(pairs);
        free(r->effect_ci);
        sweep_free(&s);
        memset(r, 0, sizeof *r);
        return -1;
    }
    free(items);
    free(pairs);
    r->ci_level = o->ci_level, r->ci_boot = o->bootstrap, r->ci_seed = o->ci_seed, r->ci_n = t->N;
    r->L = L, r->H = H, r->N = t->N, r->T = T;
    r->component = comp;
    r->direction = s.dir;
    r->rows = rows, r->cols = cols, r->n = n;
    r->metric = buf;
    r->effect = buf + n;
    r->seconds = al_now() - t0;
    sweep_free(&s);
    return 0;
}

/* The one configuration of al_patch_eval: the masks as the caller set them. */
static int eval_batch(sweep *s, void *ctx, double *sums, al_err *e) {
    (void)ctx;
    double v;
    if (patched_sum(s, s->dir == AL_PATCH_DENOISE ? &s->cl : &s->co, NULL, NULL, &v, e) ||
        tick(s, e))
        return -1;
    sums[0] += v;
    return 0;
}

int al_patch_eval(al_model *m, const al_pairs *t, const al_patch_opts *o,
                  const unsigned char *x_mask, const unsigned char *z_mask,
                  const unsigned char *qkv_mask, const unsigned char *att_mask, double *m_patched,
                  double *m_clean, double *m_corr, al_err *e) {
    sweep s;
    if (sweep_init(&s, m, t, o, 0, e)) return -1;
    size_t L = s.L, H = s.H, T = s.T;
    double mp = 0.0, eff, mc, mr;
    clear_masks(&s);
    if (x_mask) memcpy(s.xm, x_mask, (L + 1) * T);
    if (z_mask) memcpy(s.zm, z_mask, L * H * T);
    if (qkv_mask) memcpy(s.qm, qkv_mask, 3 * L * H * T);
    if (att_mask) memcpy(s.am, att_mask, L * H * T);
    s.what = "patch";
    s.n_cfg = 1;
    int rc = drive(&s, 1, eval_batch, NULL, &mp, &eff, &mc, &mr, e);
    sweep_free(&s);
    if (rc) return -1;
    if (m_patched) *m_patched = mp;
    if (m_clean) *m_clean = mc;
    if (m_corr) *m_corr = mr;
    return 0;
}

/* The gap check alone: drive with no configurations. */
static int no_configs(sweep *s, void *ctx, double *sums, al_err *e) {
    (void)s, (void)ctx, (void)sums, (void)e;
    return 0;
}

int al_patch_gap(al_model *m, const al_pairs *t, const al_patch_opts *o, al_warnings *w,
                 double *m_clean, double *m_corr, al_err *e) {
    sweep s;
    if (sweep_init(&s, m, t, o, 0, e)) return -1;
    double *items = al_malloc(2 * (size_t)t->n_items, sizeof(double), e), mc, mr;
    s.what = "gap";
    s.n_cfg = 0;
    s.it_cl = items, s.it_co = items ? items + t->n_items : NULL;
    int rc = !items || drive(&s, 0, no_configs, NULL, NULL, NULL, &mc, &mr, e) ||
                     al_gap_check_items(w, t, al_gap_metric_name(t), s.it_cl, s.it_co, e)
                 ? -1
                 : 0;
    free(items);
    sweep_free(&s);
    if (rc == 0 && m_clean) *m_clean = mc;
    if (rc == 0 && m_corr) *m_corr = mr;
    return rc;
}

/* ------------------------------------------------------------- paths */

/* s->delta (nb, T, C) = sender snd's output on the source run minus on
 * the target run: embed rows of W_E, zero for pos (both runs have the
 * same positions), or zg·W_O of head l0.h0 (snd = 2 + l0·H + h0). */
static void sender_delta(sweep *s, int snd, const al_acts *tgt, const al_acts *src, const int *tin,
                         const int *sin) {
    const al_model *m = s->m;
    int C = s->C, D = m->cfg.d_head, H = s->H;
    size_t rows = (size_t)s->nb * s->T, HD = (size_t)H * D;
    memset(s->delta, 0, sizeof(float) * rows * C);
    if (snd == 1) return;
    int l0 = snd < 2 ? 0 : (snd - 2) / H, h = snd < 2 ? 0 : (snd - 2) % H;
    const float *wo = snd < 2 ? NULL : al_head_wo(m, l0, h); /* (D, C) */
    size_t lay = (size_t)l0 * rows * HD; /* the caches' layer stride is the batch's own nb */
    for (size_t i = 0; i < rows; i++) {
        float *d = s->delta + i * C;
        if (snd == 0) {
            const float *a = m->p[AL_P_WE] + (size_t)sin[i] * C;
            const float *b = m->p[AL_P_WE] + (size_t)tin[i] * C;
            for (int c = 0; c < C; c++) d[c] = a[c] - b[c];
            continue;
        }
        const float *za = src->zg + lay + i * HD + (size_t)h * D;
        const float *zb = tgt->zg + lay + i * HD + (size_t)h * D;
        for (int k = 0; k < D; k++) {
            float dz = za[k] - zb[k];
            if (dz == 0.0f) continue;
            for (int c = 0; c < C; c++) d[c] += dz * wo[(size_t)k * C + c];
        }
    }
}

/* s->syn as a q/k/v source: the target's qkv with channel ch of head
 * (l1, h) = target + Δsender · W_ch[l1, h] at every position; with
 * LayerNorm, target + (ln1(x + Δsender) − ln1(x)) · W_ch[l1, h], x the
 * target's resid_pre of layer l1 (the receiver's own input renormalised,
 * as the split inputs do it; biases and shortformer positions are the
 * target's). */
static void synth_qkv(sweep *s, const al_acts *tgt, int ch, int l1, int h) {
    const al_model *m = s->m;
    int C = s->C, D = m->cfg.d_head, H = s->H;
    size_t rows = (size_t)s->nb * s->T, HD = (size_t)H * D, lay = rows * 3 * HD;
    const float *w = ch == 0   ? al_head_wq(m, l1, h)
                     : ch == 1 ? al_head_wk(m, l1, h)
                               : al_head_wv(m, l1, h); /* (C, D) */
    float *sl = s->syn + (size_t)l1 * lay;
    memcpy(sl, tgt->qkv + (size_t)l1 * lay, sizeof(float) * lay);
    if (m->cfg.norm_type != AL_NORM_NONE) {
        const size_t n = rows * C;
        const float *x = tgt->x + (size_t)l1 * n;
        float *a = s->delta + n, *b = a + n, *mu = b + n, *sc = mu + rows;
        const float *lw = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l1 * C : NULL;
        const float *lb = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l1 * C : NULL;
        for (size_t i = 0; i < n; i++) b[i] = x[i] + s->delta[i];
        layernorm_forward(a, mu, sc, x, lw, lb, rows, C, m->cfg.ln_eps);
        layernorm_forward(b, mu, sc, b, lw, lb, rows, C, m->cfg.ln_eps);
        for (size_t i = 0; i < n; i++) b[i] -= a[i];
        al_sgemm(false, false, (int)rows, D, C, 1.0f, b, C, w, D, 1.0f,
                 sl + (size_t)ch * HD + (size_t)h * D, (int)(3 * HD));
        return;
    }
    for (size_t i = 0; i < rows; i++) {
        float *o = sl + i * 3 * HD + (size_t)ch * HD + (size_t)h * D;
        const float *d = s->delta + i * C;
        for (int c = 0; c < C; c++) {
            if (d[c] == 0.0f) continue;
            for (int k = 0; k < D; k++) o[k] += d[c] * w[(size_t)c * D + k];
        }
    }
}

void al_paths_result_free(al_paths_result *r) {
    free(r->metric);
    free(r->effect_ci);
    memset(r, 0, sizeof *r);
}

/* Every sender's path into every receiver of the current batch: sums
 * laid out as al_paths_result's metric. Receivers of layer l1 are
 * patched at layer l1 and everything after it is recomputed (the
 * incremental forward), so a receiver's change reaches the logits
 * through every later layer, as in Wang et al.'s last pass. */
static int paths_batch(sweep *s, void *ctx, double *sums, al_err *e) {
    (void)ctx;
    const al_pairs *t = s->t;
    int L = s->L, H = s->H, T = s->T, C = s->C, W = al_paths_width(L, H), ns = 2 + W;
    int nr = (L - 1) * H;
    int den = s->dir == AL_PATCH_DENOISE;
    const al_acts *tgt = den ? &s->co : &s->cl, *src = den ? &s->cl : &s->co;
    size_t off = (size_t)s->n0 * T, rows = (size_t)s->nb * T;
    const int *tin = (den ? t->corr : t->clean) + off, *sin = (den ? t->clean : t->corr) + off;
    pair_sums(s, -1);
    for (int snd = 0; snd < ns; snd++) {
        sender_delta(s, snd, tgt, src, tin, sin);
        for (int c = 0; c < 3 * nr + 1; c++) {
            int ch = c < 3 * nr ? c / nr : 3, r = c < 3 * nr ? c % nr : 0, rc;
            if (!al_paths_exists(L, H, ch, snd, r)) continue;
            double v;
            clear_masks(s);
            if (ch == 3) { /* direct: the final residual + Δsender */
                float *xs = s->syn + (size_t)L * rows * C;
                const float *xt = tgt->x + (size_t)L * rows * C;
                for (size_t i = 0; i < rows * C; i++) xs[i] = xt[i] + s->delta[i];
                memset(s->xm + (size_t)L * T, 1, T);
                rc = patched_sum(s, src, NULL, s->syn, &v, e);
            } else {
                int l1 = r / H + 1, h = r % H;
                synth_qkv(s, tgt, ch, l1, h);
                memset(s->qm + (((size_t)l1 * 3 + ch) * H + h) * T, 1, T);
                rc = patched_sum(s, src, s->syn, NULL, &v, e);
            }
            if (rc || tick(s, e)) return -1;
            sums[((size_t)ch * ns + snd) * W + r] += v;
            pair_sums(s, (int)(((size_t)ch * ns + snd) * W + r));
        }
    }
    return 0;
}

int al_paths_run(al_model *m, const al_pairs *t, const al_patch_opts *o, al_paths_result *r,
                 al_err *e) {
    memset(r, 0, sizeof *r);
    double t0 = al_now();
    if (m->cfg.n_layers > AL_PATHS_MAX_LAYERS)
        return al_errf(e, "path patching covers models of up to %d layers (this one has %d)",
                       AL_PATHS_MAX_LAYERS, m->cfg.n_layers);
    sweep s;
    if (sweep_init(&s, m, t, o, 1, e)) return -1;
    int L = s.L, H = s.H, W = al_paths_width(L, H), ns = 2 + W, nr = (L - 1) * H;
    int n = 4 * ns * W, n_cfg = 0;
    double *buf = al_calloc((size_t)n * 2, sizeof(double), e);
    /* grid entries no path fills: NaN, which drive keeps */
    for (int ch = 0; buf && ch < 4; ch++)
        for (int snd = 0; snd < ns; snd++)
            for (int rr = 0; rr < W; rr++) {
                if (al_paths_exists(L, H, ch, snd, rr))
                    n_cfg++;
                else
                    buf[((size_t)ch * ns + snd) * W + rr] = NAN;
            }
    double *items = buf ? al_malloc(2 * (size_t)t->n_items, sizeof(double), e) : NULL;
    double *pairs = items ? al_calloc((size_t)t->N * (n + 2), sizeof(double), e) : NULL;
    char label[64];
    snprintf(label, sizeof label, "path effect (%s)", al_patch_direction_name(s.dir));
    s.what = "paths";
    s.n_cfg = n_cfg;
    s.it_cl = items, s.it_co = items ? items + t->n_items : NULL;
    s.pp = pairs, s.pp_w = n;
    s.pc = pairs ? pairs + (size_t)t->N * n : NULL, s.pr = s.pc ? s.pc + t->N : NULL;
    if (!pairs || drive(&s, n, paths_batch, NULL, buf, buf + n, &r->m_clean, &r->m_corr, e) ||
        sweep_warnings(&s, buf + n, n, label, &r->warn, e) ||
        effect_intervals(&s, o, &r->effect_ci, e)) {
        free(buf);
        free(items);
        free(pairs);
        free(r->effect_ci);
        sweep_free(&s);
        memset(r, 0, sizeof *r);
        return -1;
    }
    free(items);
    free(pairs);
    for (int i = 0; i < n; i++) /* a path that does not exist has no interval */
        if (isnan(buf[n + i])) r->effect_ci[i].se = r->effect_ci[i].lo = r->effect_ci[i].hi = NAN;
    r->ci_level = o->ci_level, r->ci_boot = o->bootstrap, r->ci_seed = o->ci_seed, r->ci_n = t->N;
    r->L = L, r->H = H, r->N = t->N, r->T = s.T;
    r->n_senders = ns, r->n_recv = nr, r->width = W;
    r->direction = s.dir;
    r->n = n;
    r->metric = buf;
    r->effect = buf + n;
    r->seconds = al_now() - t0;
    sweep_free(&s);
    return 0;
}
