/* discover.c -- circuit discovery over the head graph (discover.h).
 *
 * Both runs of every batch of pairs are computed once and cached (al_acts),
 * with what every evaluation reads from them: the clean run's next-token
 * distributions at the items (for KL), both runs' item values, and the
 * embedding difference (without LayerNorm already taken through each
 * later-layer head's W_Q, W_K, W_V). A circuit is then evaluated by the
 * engine's incremental circuit evaluation (graph.h, al_circuit_delta_run
 * in engine/circuit.c: the layers from the first changed one, against
 * the batch's cached runs, beside the hooks that run circuits in a full
 * forward). Only the item rows whose final residual changed are
 * unembedded; the others keep the clean run's values (KL 0), so the full
 * circuit is the clean run bit for bit.
 *
 * Sums run in double in a fixed order and the one parallel loop computes
 * each item by one thread, so results repeat bit for bit at one thread
 * count (as the engine's products do). */
#include "attnlab/discover.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"
#include "attnlab/edge_grad.h"
#include "attnlab/layers.h"
#include "attnlab/membudget.h"

/* Item rows unembedded at once: bounds the logits scratch to ROWS·V. */
#define ROWS 256

/* Edge indices (graph.h), short. */
#define k_input al_graph_k_input
#define k_comp al_graph_k_comp
#define k_out al_graph_k_out

/* ----------------------------------------------------------- options */

al_discover_opts al_discover_opts_defaults(void) {
    al_discover_opts o = AL_DISCOVER_OPTS_INIT;
    return o;
}

int al_discover_opts_check(const al_discover_opts *o, al_err *e) {
    if (!o->method || (strcmp(o->method, "acdc") && strcmp(o->method, "eap")))
        return al_errf(e, "unknown discovery method '%s' (known: acdc, eap)",
                       o->method ? o->method : "(null)");
    if (!o->metric || (strcmp(o->metric, "kl") && strcmp(o->metric, "logit_diff")))
        return al_errf(e, "unknown discovery metric '%s' (known: kl, logit_diff)",
                       o->metric ? o->metric : "(null)");
    if (!isfinite(o->tau) || o->tau < 0)
        return al_errf(e, "discovery needs a finite tau >= 0 (got %g)", o->tau);
    if (!(o->recover >= 0 && o->recover <= 1))
        return al_errf(e, "discovery needs 0 <= recover <= 1 (got %g)", o->recover);
    if (o->batch < 1 || o->batch > 100000)
        return al_errf(e, "discovery needs 1 <= batch <= 100000 (got %d)", o->batch);
    if (al_ci_check(o->ci_level, o->bootstrap, e)) return -1;
    if (!o->order || (strcmp(o->order, "embed-first") && strcmp(o->order, "latest-first")))
        return al_errf(e, "unknown ACDC sender order '%s' (known: embed-first, latest-first)",
                       o->order ? o->order : "(null)");
    if (!o->remove_if || (strcmp(o->remove_if, "le") && strcmp(o->remove_if, "lt")))
        return al_errf(e, "unknown ACDC removal rule '%s' (known: le, lt)",
                       o->remove_if ? o->remove_if : "(null)");
    return 0;
}

/* ----------------------------------------------------------- context */

typedef struct dbatch {
    int n0, nb, i0, ni; /* pairs n0..n0+nb−1, items i0..i0+ni−1 */
    al_acts cl, co;
    float *embp; /* L >= 2: al_circuit_delta_embp's (graph.h) */
    al_circuit_memo memo; /* heads and channel parts the batch's evaluations reuse */
} dbatch;

typedef struct dctx {
    al_model *m;
    const al_pairs *t;
    int L, H, D, C, V, T, B, nbat, maxi;
    dbatch *bt;
    float *p; /* (n_items, V) clean next-token distributions */
    double *negent; /* (n_items) Σ p log p of the clean run */
    double *psum; /* (n_items) Σ p (1 to rounding) */
    double *v_cl, *v_co; /* (n_items) item values of the two runs */
    double *kl_co; /* (n_items) KL(clean || corrupted) per item, for the gap check */
    double m_clean, m_corr;
    al_circuit_delta cd; /* the engine's circuit evaluation (graph.h) and its scratch */
    /* scratch for one batch (capacity B) */
    float *xL; /* (B, T, C) the circuit's final residual */
    float *rows, *logits; /* (ROWS, C), (2·ROWS, V): logits, and copies of them */
    unsigned char *changed; /* (B·T) */
    double *ikl, *im; /* (maxi) per item of the batch */
} dctx;

static void ctx_free(dctx *d) {
    for (int i = 0; d->bt && i < d->nbat; i++) {
        al_acts_free(&d->bt[i].cl);
        al_acts_free(&d->bt[i].co);
        free(d->bt[i].embp);
        al_circuit_memo_free(&d->bt[i].memo);
    }
    free(d->bt);
    free(d->p);
    free(d->negent);
    free(d->xL);
    al_circuit_delta_free(&d->cd);
    memset(d, 0, sizeof *d);
}

/* The caches of every batch (two runs' activations each) and the clean
 * distributions, against the memory budget. */
/* The LayerNorm memo parts (al_circuit_memo's lowc) of all batches
 * together take at most this many MB. */
#define LN_MEMO_MB 256

int al_discover_memory_check(const al_pairs *t, const al_config *c, al_err *e) {
    double N = t->N, T = t->T, L = c->n_layers, H = c->n_heads, HD = H * c->d_head;
    double C = c->d_model;
    const int ln = c->norm_type != AL_NORM_NONE;
    double acts = (L + 1) * T * C + L * T * 3 * HD + L * H * T * T + 2 * L * T * HD;
    /* per sequence: embp (Δembed, or L−1 layers of q|k|v) and the memo
     * (graph.h: L layers of z, without LayerNorm L−1 of q|k|v, one
     * residual); per batch the memo's keys (bytes), taken here as one per
     * sequence at worst (batch 1); the LayerNorm memo's C-wide parts up to
     * their budget; and the logits scratch of ROWS items */
    double embp = L < 2 ? 0.0 : ln ? T * C : (L - 1) * T * 3 * HD;
    double memo = L * T * HD + (ln ? 0.0 : (L - 1) * T * 3 * HD) + T * C;
    double keys = (L * H * (1 + 3 * (1 + (L - 1) * H)) + (L - 1) * 3 * H * (4 + (L - 1) * H) +
                   (4 + (L - 1) * H)) /
                  (double)sizeof(float);
    double lowc =
        ln ? fmin(N * (L - 1) * 3 * H * T * C, LN_MEMO_MB * 1048576.0 / sizeof(float)) : 0.0;
    double need =
        (2.0 * N * acts + N * (embp + memo + keys) + lowc + (double)t->n_items * c->d_vocab +
         (double)ROWS * (c->d_model + 2.0 * c->d_vocab)) *
        sizeof(float);
    char what[96];
    snprintf(what, sizeof what, "the caches of --n %d pairs of %d tokens", t->N, t->T);
    return al_mem_check(need, "discover", what, "lower --n", e);
}

/* The items of batch b from final residual xL (nb, T, C): rows not
 * changed[] keep the clean values (KL 0); the others are unembedded.
 * init = 1 (the clean run itself, every row) fills the clean
 * distributions instead of reading them; out_v (ni) gets the item values,
 * out_kl (ni) the KLs (NULL when init). */
static void item_eval(dctx *d, const dbatch *b, const float *xL, const unsigned char *changed,
                      int init, double *out_v, double *out_kl) {
    const al_pairs *t = d->t;
    int C = d->C, V = d->V, T = d->T, n = 0, idx[ROWS];
    for (int i = 0; i <= b->ni; i++) {
        const al_pair_item *it = i < b->ni ? &t->items[b->i0 + i] : NULL;
        size_t row = it ? (size_t)(it->pair - b->n0) * T + it->pos : 0;
        if (it && changed && !changed[row]) {
            out_v[i] = d->v_cl[b->i0 + i];
            if (out_kl) out_kl[i] = 0.0;
            continue;
        }
        if (it) {
            memcpy(d->rows + (size_t)n * C, xL + row * C, sizeof(float) * C);
            idx[n++] = i;
        }
        if (n < ROWS && (it || !n)) continue;
        al_model_unembed_own(d->m, d->rows, n, d->logits); /* rows are a copy */
        /* rows are independent: the same bits for any thread count */
#pragma omp parallel for schedule(static)
        for (int k = 0; k < n; k++) {
            int ii = b->i0 + idx[k];
            const al_pair_item *jt = &t->items[ii];
            float *lg = d->logits + (size_t)k * V, *p = d->p + (size_t)ii * V;
            float *keep = d->logits + (size_t)(ROWS + k) * V;
            double a = lg[jt->answer], w = jt->wrong >= 0 ? lg[jt->wrong] : 0.0, dot = 0.0;
            if (init)
                memcpy(keep, lg, sizeof(float) * V);
            else
                for (int v = 0; v < V; v++) dot += (double)p[v] * lg[v];
            double lse = logsumexp_row(lg, V); /* lg is overwritten */
            out_v[idx[k]] = t->logit_diff ? a - w : a - lse;
            if (!init) { /* KL = Σ p log p − Σ p (l − lse) */
                out_kl[idx[k]] = d->negent[ii] - dot + lse * d->psum[ii];
                continue;
            }
            double ne = 0.0, ps = 0.0;
            for (int v = 0; v < V; v++) {
                double lp = (double)keep[v] - lse;
                p[v] = (float)exp(lp);
                ne += (double)p[v] * lp;
                ps += p[v];
            }
            d->negent[ii] = ne, d->psum[ii] = ps;
        }
        n = 0;
    }
}

/* Both runs of every batch, cached, with the clean distributions and
 * item values, and the projections every evaluation reuses. */
static int ctx_init(dctx *d, al_model *m, const al_pairs *t, int batch, al_err *e) {
    memset(d, 0, sizeof *d);
    const al_config *c = &m->cfg;
    if (al_graph_n_edges(c->n_layers, c->n_heads) <= 0)
        return al_errf(e, "circuit discovery covers models of 1 to %d layers (this one has %d)",
                       AL_GRAPH_MAX_LAYERS, c->n_layers);
    if (batch < 1 || batch > 100000)
        return al_errf(e, "discovery needs 1 <= batch <= 100000 (got %d)", batch);
    if (al_pairs_check(t, c->n_ctx, c->d_vocab, e) || al_discover_memory_check(t, c, e)) return -1;
    d->m = m, d->t = t;
    d->L = c->n_layers, d->H = c->n_heads, d->D = c->d_head, d->C = c->d_model;
    d->V = c->d_vocab, d->T = t->T;
    d->B = batch < t->N ? batch : t->N;
    d->nbat = (t->N + d->B - 1) / d->B;
    const size_t L = d->L, C = d->C, V = d->V, T = d->T, B = d->B;
    const size_t BT = B * T, NI = t->n_items;
    d->bt = al_calloc((size_t)d->nbat, sizeof(dbatch), e);
    if (!d->bt) goto fail;
    for (int i = 0; i < d->nbat; i++) {
        dbatch *b = &d->bt[i];
        b->n0 = i * d->B;
        b->nb = t->N - b->n0 < d->B ? t->N - b->n0 : d->B;
        b->ni = al_pairs_batch_items(t, b->n0, b->nb, &b->i0);
        if (b->ni > d->maxi) d->maxi = b->ni;
    }
    d->p = al_malloc(NI * V, sizeof(float), e);
    d->negent = d->p ? al_malloc(5 * NI + 2 * (size_t)d->maxi, sizeof(double), e) : NULL;
    d->xL = d->negent
                ? al_malloc(BT * C + ROWS * (C + 2 * V) + (BT + sizeof(float) - 1) / sizeof(float),
                            sizeof(float), e)
                : NULL;
    if (!d->xL || al_circuit_delta_init(&d->cd, m, d->B, d->T, e)) goto fail;
    d->psum = d->negent + NI, d->v_cl = d->psum + NI, d->v_co = d->v_cl + NI;
    d->ikl = d->v_co + NI, d->im = d->ikl + d->maxi, d->kl_co = d->im + d->maxi;
    d->rows = d->xL + BT * C;
    d->logits = d->rows + ROWS * C;
    d->changed = (unsigned char *)(d->logits + 2 * ROWS * V);
    double sc = 0.0, sr = 0.0;
    for (int i = 0; i < d->nbat; i++) {
        dbatch *b = &d->bt[i];
        size_t off = (size_t)b->n0 * T, bt = (size_t)b->nb * T;
        al_acts *runs[2] = {&b->cl, &b->co};
        const int *in[2] = {t->clean + off, t->corr + off};
        double *vals[2] = {d->v_cl + b->i0, d->v_co + b->i0};
        for (int k = 0; k < 2; k++) {
            if (al_acts_alloc(runs[k], c, b->nb, d->T, e) ||
                al_model_forward(m, in[k], NULL, b->nb, d->T, e) || al_acts_save(m, runs[k], e))
                goto fail;
            /* the clean run first: its distributions are what KL reads */
            item_eval(d, b, runs[k]->x + L * bt * C, NULL, k == 0, vals[k], d->ikl);
            if (k == 1) memcpy(d->kl_co + b->i0, d->ikl, sizeof(double) * b->ni);
        }
        for (int k = 0; k < b->ni; k++) sc += vals[0][k], sr += vals[1][k];
        /* Δembed (clean − corrupted), or its product with each later head's W_c */
        size_t ne = al_circuit_delta_embp_floats(&d->cd, b->nb);
        if (ne) {
            b->embp = al_malloc(ne, sizeof(float), e);
            if (!b->embp) goto fail;
            al_circuit_delta_embp(&d->cd, m, in[0], in[1], b->nb, b->embp);
        }
        if (al_circuit_memo_init(&b->memo, &d->cd, b->nb, e)) goto fail;
        if (b->memo.lowc) b->memo.lowc_cap = ((size_t)LN_MEMO_MB << 20) / sizeof(float) / d->nbat;
    }
    d->m_clean = sc / (double)NI, d->m_corr = sr / (double)NI;
    return 0;
fail:
    ctx_free(d);
    return -1;
}

/* Σ over batch b's items of KL(clean || circuit) and of the metric, the
 * circuit being kept[] (n_edges): the engine's incremental evaluation
 * (graph.h), then the changed items unembedded. */
static int eval_batch(dctx *d, int bi, const unsigned char *kept, double *kl_sum, double *m_sum,
                      al_err *e) {
    const al_pairs *t = d->t;
    dbatch *b = &d->bt[bi];
    const size_t off = (size_t)b->n0 * d->T;
    if (al_circuit_delta_run(&d->cd, d->m, kept, &b->cl, &b->co, t->clean + off, t->corr + off,
                             b->embp, &b->memo, d->xL, d->changed, e))
        return -1;
    item_eval(d, b, d->xL, d->changed, 0, d->im, d->ikl);
    for (int i = 0; i < b->ni; i++) *kl_sum += d->ikl[i], *m_sum += d->im[i];
    return 0;
}

/* The circuit kept[] over every batch: mean KL and mean metric. */
static int eval_all(dctx *d, const unsigned char *kept, double *kl, double *metric, al_err *e) {
    double ks = 0.0, ms = 0.0;
    for (int i = 0; i < d->nbat; i++)
        if (eval_batch(d, i, kept, &ks, &ms, e)) return -1;
    *kl = ks / d->t->n_items, *metric = ms / d->t->n_items;
    return 0;
}

int al_circuit_eval(al_model *m, const al_pairs *t, const unsigned char *kept, int batch,
                    double *kl, double *metric, al_err *e) {
    if (!kept) return al_errf(e, "al_circuit_eval: no edge set (kept is NULL)");
    dctx d;
    double k = 0, v = 0;
    int rc = ctx_init(&d, m, t, batch, e) || eval_all(&d, kept, &k, &v, e);
    if (d.bt) ctx_free(&d);
    if (rc) return -1;
    if (kl) *kl = k;
    if (metric) *metric = v;
    return 0;
}

/* ------------------------------------------------------------- runs */

typedef struct drun {
    dctx d;
    const al_discover_opts *o;
    int kl; /* the loss is KL (else M_clean − M) */
    int strict; /* acdc: remove on growth < tau (else <= tau) */
    unsigned char *kept;
    double *score;
    double cur_kl, cur_m;
    long evals;
    al_progress pg;
    const char *what;
    int step, steps; /* progress: edges tried of all */
} drun;

static int stopped(const al_discover_opts *o, al_err *e) {
    if (o->stop && *o->stop) return al_errf(e, "interrupted");
    return 0;
}

/* Evaluate the circuit run->kept into *kl, *mv (stop flag first). */
static int run_eval(drun *r, double *kl, double *mv, al_err *e) {
    if (stopped(r->o, e) || eval_all(&r->d, r->kept, kl, mv, e)) return -1;
    r->evals++;
    if (r->o->progress)
        al_progress_count(&r->pg, 0, r->step, r->steps, "%s: %d/%d edges, %ld evaluations", r->what,
                          r->step, r->steps, r->evals);
    return 0;
}

static double loss_of(const drun *r, double kl, double mv) {
    return r->kl ? kl : r->d.m_clean - mv;
}

/* ACDC's step for edge k: remove it, keep it removed if the loss grows
 * by at most tau (less than tau under remove_if "lt"). A pos edge
 * carries the same value in both runs: its removal changes nothing
 * (growth 0, no evaluation needed). */
static int acdc_try(drun *r, int k, int is_pos, al_err *e) {
    r->step++;
    r->kept[k] = 0;
    double kl = r->cur_kl, mv = r->cur_m;
    if (!is_pos && run_eval(r, &kl, &mv, e)) return -1;
    double g = is_pos ? 0.0 : loss_of(r, kl, mv) - loss_of(r, r->cur_kl, r->cur_m);
    r->score[k] = g;
    if (r->strict ? g < r->o->tau : g <= r->o->tau)
        r->cur_kl = kl, r->cur_m = mv;
    else
        r->kept[k] = 1;
    return 0;
}

static int acdc(drun *r, al_err *e) {
    const int L = r->d.L, H = r->d.H;
    const int rev = strcmp(r->o->order, "latest-first") == 0;
    r->strict = strcmp(r->o->remove_if, "lt") == 0;
    if (run_eval(r, &r->cur_kl, &r->cur_m, e)) return -1;
    const int nl = 2 + L * H; /* the logits' senders: embed, pos, every head */
    for (int jj = 0; jj < nl; jj++) {
        int j = rev ? nl - 1 - jj : jj;
        if (acdc_try(r, k_out(L, H, j), j == 1, e)) return -1;
    }
    for (int l = L - 1; l >= 0; l--)
        for (int h = H - 1; h >= 0; h--) {
            /* alive: some outgoing edge kept, to the logits or a later head */
            int alive = r->kept[k_out(L, H, 2 + l * H + h)];
            for (int l1 = l + 1; l1 < L; l1++)
                for (int h1 = 0; h1 < H; h1++)
                    for (int ch = 0; ch < 3; ch++)
                        alive |= r->kept[k_comp(L, H, l * H + h, l1, h1, ch)];
            /* the receiver's incoming edges in index order (embed, pos,
             * then the heads of earlier layers from layer 0 up), or its
             * reverse (the latest layer's last head first, embed last) */
            const int ns = 2 + l * H;
            for (int ch = 0; ch < 3; ch++)
                for (int ii = 0; ii < ns; ii++) {
                    int i = rev ? ns - 1 - ii : ii;
                    int k = i < 2 ? k_input(H, l, h, ch, i) : k_comp(L, H, i - 2, l, h, ch);
                    if (!alive) { /* cut off: its inputs cannot matter */
                        r->kept[k] = 0;
                        r->step++;
                    } else if (acdc_try(r, k, i == 1, e))
                        return -1;
                }
        }
    return 0;
}

/* est[k]: the edge attribution patching estimate of every edge (noising
 * at the clean run: the change of the task's metric M when edge k alone
 * carries its corrupted value), from one backward per batch
 * (al_attrpatch_grad), as edge_grad.h forms it, the estimate attribution
 * patching makes of path patching's edges: each sender's difference,
 * C-wide (the embeddings, W_E[corrupted] − W_E[clean]; every head,
 * Δzg · W_O[l0,h0]), against each receiver's input gradient (each
 * head's q, k and v input, through ln1 with LayerNorm; the logits'
 * ∂M/∂x_L, through ln_final's backward already). */
static int eap_estimates(drun *r, double *est, al_err *e) {
    dctx *d = &r->d;
    al_model *m = d->m;
    const al_pairs *t = d->t;
    const int L = d->L, H = d->H, D = d->D, C = d->C, T = d->T, LH = L * H;
    const size_t HD = (size_t)H * D, BTc = (size_t)d->B * T;
    /* dx (L+1, BT, C), dzg (L, BT, HD), dqkv (L, BT, 3HD), snd (1 + LH, BT, C),
     * g and lnd (BT, C), dz (BT, D) */
    float *dx = al_malloc((L + 1) * BTc * C + L * BTc * HD * 4 + (1 + (size_t)LH) * BTc * C +
                              2 * BTc * C + BTc * D,
                          sizeof(float), e);
    if (!dx) return -1;
    float *dzg = dx + (L + 1) * BTc * C, *dqkv = dzg + L * BTc * HD;
    float *snd = dqkv + L * BTc * 3 * HD, *g = snd + (1 + (size_t)LH) * BTc * C;
    float *lnd = g + BTc * C, *dz = lnd + BTc * C;
    memset(est, 0, sizeof(double) * al_graph_n_edges(L, H));
    int rc = 0;
    for (int bi = 0; rc == 0 && bi < d->nbat; bi++) {
        const dbatch *b = &d->bt[bi];
        const size_t BT = (size_t)b->nb * T, n = BT * C;
        if ((rc = stopped(r->o, e))) break;
        if ((rc = al_attrpatch_grad(m, t, 0, b->n0, b->nb, NULL, dx, dzg, dqkv, e))) break;
        /* the batch's mean → the task's mean */
        const double w = (double)b->ni / t->n_items;
        const int *ic = t->clean + (size_t)b->n0 * T, *ir = t->corr + (size_t)b->n0 * T;
        al_edge_senders(m, ir, ic, BT, b->co.zg, b->cl.zg, 0, LH, dz, snd);
        /* the logits' receiver: every sender directly */
        const float *dxL = dx + (size_t)L * n;
        est[k_out(L, H, 0)] += w * al_edge_dot(snd, dxL, n);
        for (int j = 0; j < LH; j++)
            est[k_out(L, H, 2 + j)] += w * al_edge_dot(snd + (size_t)(1 + j) * n, dxL, n);
        /* each head's q, k and v input: the embeddings and every earlier head */
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                for (int ch = 0; ch < 3; ch++) {
                    al_edge_receiver_grad(m, dqkv, l, h, ch, BT, lnd, g);
                    est[k_input(H, l, h, ch, 0)] += w * al_edge_dot(snd, g, n);
                    for (int s0 = 0; s0 < l * H; s0++)
                        est[k_comp(L, H, s0, l, h, ch)] +=
                            w * al_edge_dot(snd + (size_t)(1 + s0) * n, g, n);
                }
    }
    free(dx);
    return rc ? -1 : 0;
}

typedef struct ranked {
    double score;
    int k;
} ranked;

/* descending score, ties by index: a total order, so qsort is deterministic */
static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->k - y->k;
}

static double faith_of(const dctx *d, double mv) {
    return d->m_clean == d->m_corr ? NAN : (mv - d->m_corr) / (d->m_clean - d->m_corr);
}

/* EAP: edges by descending |estimate| (ties by index), added one at a
 * time until the circuit's faithfulness reaches o->recover. */
static int eap(drun *r, al_err *e) {
    const int n = al_graph_n_edges(r->d.L, r->d.H);
    if (n <= 0) return al_errf(e, "the model has no head graph"); /* ctx_init checked L */
    ranked *order = al_malloc((size_t)n, sizeof(ranked), e);
    if (!order) return -1;
    int rc = eap_estimates(r, r->score, e);
    for (int k = 0; k < n; k++) {
        r->score[k] = fabs(r->score[k]);
        order[k] = (ranked){r->score[k], k};
    }
    if (rc == 0) {
        qsort(order, (size_t)n, sizeof(ranked), by_score);
        memset(r->kept, 0, (size_t)n);
        rc = run_eval(r, &r->cur_kl, &r->cur_m, e);
        for (int i = 0; rc == 0 && i < n && !(faith_of(&r->d, r->cur_m) >= r->o->recover); i++) {
            r->kept[order[i].k] = 1;
            r->step++;
            rc = run_eval(r, &r->cur_kl, &r->cur_m, e);
        }
    }
    free(order);
    return rc;
}

/* The faithfulness's interval: the circuit kept[] evaluated once more,
 * each item's value minus the corrupted one summed per pair beside the
 * clean minus the corrupted, and the ratio of the sums resampled by pair
 * (al_boot_ratio); its ratio is the faithfulness up to summation order. */
static int faith_interval(dctx *d, const unsigned char *kept, const al_discover_opts *o,
                          al_interval *out, al_err *e) {
    const al_pairs *t = d->t;
    double *num = al_calloc(2 * (size_t)t->N, sizeof(double), e), ks = 0, ms = 0;
    if (!num) return -1;
    double *den = num + t->N;
    int rc = 0;
    for (int i = 0; rc == 0 && i < d->nbat; i++) {
        const dbatch *b = &d->bt[i];
        rc = eval_batch(d, i, kept, &ks, &ms, e);
        for (int k = 0; rc == 0 && k < b->ni; k++) {
            int ii = b->i0 + k, p = t->items[ii].pair;
            num[p] += d->im[k] - d->v_co[ii];
            den[p] += d->v_cl[ii] - d->v_co[ii];
        }
    }
    if (rc == 0)
        rc = al_boot_ratio(num, den, t->N, 1, o->bootstrap, o->ci_level, o->ci_seed, out, e);
    free(num);
    return rc;
}

/* The gap checks (gap.h) of the task's metric, which faithfulness divides
 * by, and with metric kl of the corrupted run's KL, which ACDC's tau is
 * measured against; then the faithfulness's range. */
static int discover_warnings(const drun *run, al_discover_result *r, al_err *e) {
    const dctx *d = &run->d;
    if (al_gap_check_items(&r->warn, d->t, al_gap_metric_name(d->t), d->v_cl, d->v_co, e) ||
        (run->kl && al_gap_check_items(&r->warn, d->t, "kl", NULL, d->kl_co, e)))
        return -1;
    al_effect_check(&r->warn, "faithfulness", &r->faithfulness, 1);
    return 0;
}

void al_discover_result_free(al_discover_result *r) {
    free(r->score);
    memset(r, 0, sizeof *r);
}

int al_discover_run(al_model *m, const al_pairs *t, const al_discover_opts *o,
                    al_discover_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    double t0 = al_now();
    if (al_discover_opts_check(o, e)) return -1;
    drun run;
    memset(&run, 0, sizeof run);
    run.o = o;
    run.kl = !strcmp(o->metric, "kl");
    int eapm = !strcmp(o->method, "eap");
    run.what = eapm ? "eap" : "acdc";
    if (ctx_init(&run.d, m, t, o->batch, e)) return -1;
    const int L = run.d.L, H = run.d.H, n = al_graph_n_edges(L, H);
    run.score = al_malloc((size_t)n * (sizeof(double) + 1), 1, e);
    int rc = run.score ? 0 : -1;
    if (rc == 0) {
        run.kept = (unsigned char *)(run.score + n);
        memset(run.kept, 1, (size_t)n);
        for (int k = 0; k < n; k++) run.score[k] = NAN;
        run.steps = n;
        if (o->progress) al_progress_init(&run.pg, 10.0);
        rc = eapm ? eap(&run, e) : acdc(&run, e);
        /* ACDC's last state cut off inputs of dead heads without a measure */
        if (rc == 0 && !eapm) rc = run_eval(&run, &run.cur_kl, &run.cur_m, e);
        if (rc == 0) rc = faith_interval(&run.d, run.kept, o, &r->faith_ci, e);
        if (o->progress) al_progress_done(&run.pg);
    }
    if (rc) {
        free(run.score);
        ctx_free(&run.d);
        memset(r, 0, sizeof *r);
        return -1;
    }
    r->L = L, r->H = H, r->n_edges = n;
    r->score = run.score, r->kept = run.kept;
    for (int k = 0; k < n; k++) r->n_kept += run.kept[k];
    r->m_clean = run.d.m_clean, r->m_corr = run.d.m_corr;
    r->m_circuit = run.cur_m, r->kl_circuit = run.cur_kl;
    r->faithfulness = faith_of(&run.d, run.cur_m);
    r->ci_level = o->ci_level, r->ci_boot = o->bootstrap, r->ci_n = t->N;
    r->evals = run.evals;
    if (discover_warnings(&run, r, e)) {
        al_discover_result_free(r);
        ctx_free(&run.d);
        return -1;
    }
    ctx_free(&run.d);
    r->seconds = al_now() - t0;
    return 0;
}

/* ------------------------------------------------------- stability */

void al_discover_stability_free(al_discover_stability *s) {
    free(s->freq);
    memset(s, 0, sizeof *s);
}

int al_discover_stability_run(al_model *m, const al_pairs *t, const al_discover_opts *o,
                              const unsigned char *main_kept, int n, uint64_t seed,
                              al_discover_stability *s, al_err *e) {
    memset(s, 0, sizeof *s);
    if (n < 1 || n > 10000) return al_errf(e, "resamples must be 1..10000 (got %d)", n);
    double t0 = al_now();
    const int ne = al_graph_n_edges(m->cfg.n_layers, m->cfg.n_heads);
    int *idx = al_malloc((size_t)t->N, sizeof *idx, e);
    double *jac = al_malloc((size_t)n, sizeof *jac, e);
    s->freq = al_calloc((size_t)ne, sizeof *s->freq, e);
    if (!idx || !jac || !s->freq) {
        free(idx), free(jac);
        al_discover_stability_free(s);
        return -1;
    }
    al_discover_opts ro = *o;
    ro.bootstrap = 0; /* the resamples' own intervals are not wanted */
    ro.progress = 0;
    al_rng rng;
    al_rng_seed(&rng, seed);
    int rc = 0;
    for (int b = 0; rc == 0 && b < n; b++) {
        for (int i = 0; i < t->N; i++) idx[i] = (int)al_rng_below(&rng, (uint32_t)t->N);
        al_pairs rt;
        al_discover_result rr;
        if (al_pairs_pick(t, idx, t->N, &rt, e)) {
            rc = -1;
            break;
        }
        rc = al_discover_run(m, &rt, &ro, &rr, e);
        al_pairs_free(&rt);
        if (rc) break;
        int both = 0, either = 0;
        for (int k = 0; k < ne && k < rr.n_edges; k++) {
            s->freq[k] += rr.kept[k];
            both += rr.kept[k] && main_kept[k];
            either += rr.kept[k] || main_kept[k];
        }
        jac[b] = either ? (double)both / either : 1.0;
        al_discover_result_free(&rr);
        if (o->progress)
            al_log("stability: resample %d/%d, Jaccard with the main circuit %.3f", b + 1, n,
                   jac[b]);
    }
    if (rc == 0) {
        double sum = 0, ss = 0, mn = 1;
        for (int b = 0; b < n; b++) sum += jac[b], mn = jac[b] < mn ? jac[b] : mn;
        for (int b = 0; b < n; b++) ss += (jac[b] - sum / n) * (jac[b] - sum / n);
        for (int k = 0; k < ne; k++) s->freq[k] /= n;
        s->n = n, s->seed = seed, s->n_edges = ne;
        s->jaccard_mean = sum / n, s->jaccard_min = mn;
        s->jaccard_sd = n > 1 ? sqrt(ss / (n - 1)) : NAN;
        s->seconds = al_now() - t0;
    }
    free(idx), free(jac);
    if (rc) al_discover_stability_free(s);
    return rc;
}
