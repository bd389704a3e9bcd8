/* test_attr_torch.c -- attribution (attribute.h) and attribution patching
 * (attrpatch.h) against an independent PyTorch reference.
 *
 * Each test builds a small random model (randmodel.h, gates != 1; W_Q
 * and W_K scaled so that patterns are far from uniform), saves it, and makes
 * the induction task on it (R = 5, N = 6 pairs, batches of 4: the last
 * one is partial), once as patch.h makes it (log-probs) and once turned
 * into logit differences (a wrong token per item). For each it writes to
 * a JSON file:
 *   - al_attribute_run's every number (DLA, path terms and their Δloss,
 *     kinds, the lens);
 *   - the gradients of M w.r.t. x, zg, q/k/v from al_model_backward_acts
 *     fed with ∂M/∂x_L computed here from the definition of M (pairs.h),
 *     on the clean and the corrupted sequences, and al_attrpatch_grad's
 *     (whole task and one sub-batch: the gradient of that batch's mean);
 *   - al_attrpatch_run's estimates (compare = 0) in both directions.
 * tests/attr_ref.py recomputes all of it in float64 from the headers'
 * definitions (autograd for the gradients) and exits 0 iff every array
 * agrees within its tolerance (the script says which and why). The
 * LayerNorm and bias cases run the same on models with LN, LNPre and
 * biases, which attr_ref.py builds from TransformerLens's definitions,
 * the attribution read with the clean run's LayerNorm scales frozen
 * (attribute.h). Skipped only when PyTorch cannot be imported. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attribute.h"
#include "attnlab/attrpatch.h"
#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/patch.h"
#include "randmodel.h"
#include "refio.h"
#include "test.h"

#define SCRIPT "tests/attr_ref.py"

enum { AR = 5, AN = 6, AB = 4, AV = 32 };

/* A deliberate error, to show the check can fail: in the array named
 * what ("logprob attr term_dloss", "logitdiff grad engine corr 0+6 dqkv",
 * ...), element k is written as itself + by. Passed as an array ended by
 * what = NULL. */
typedef struct perturb {
    const char *what;
    int k;
    double by;
} perturb;

typedef struct writer {
    FILE *f;
    const perturb *pt; /* NULL: none */
    const char *prefix; /* the run's and section's name, for perturb */
    int first; /* no member written yet in the current object */
} writer;

/* The perturbation of array name of the current section, or NULL. */
static const perturb *pk(const writer *w, const char *name) {
    char full[160];
    snprintf(full, sizeof full, "%s %s", w->prefix, name);
    for (const perturb *p = w->pt; p && p->what; p++)
        if (!strcmp(p->what, full)) return p;
    return NULL;
}

static void key(writer *w, const char *name) {
    fprintf(w->f, "%s\"%s\": ", w->first ? "" : ",\n   ", name);
    w->first = 0;
}

static void nums(writer *w, const char *name, const double *a, int n) {
    key(w, name);
    const perturb *p = pk(w, name);
    ref_put_nums(w->f, a, n, p ? p->k : -1, p ? p->by : 0);
}

static void num(writer *w, const char *name, double x) { nums(w, name, &x, 1); }

/* Floats, perturbed through a double copy. */
static void floats(writer *w, const char *name, const float *a, size_t n) {
    key(w, name);
    const perturb *p = pk(w, name);
    if (!p) {
        ref_put_floats(w->f, a, n);
        return;
    }
    double *d = malloc(sizeof(double) * n);
    CHECK(d != NULL);
    if (!d) return;
    for (size_t i = 0; i < n; i++) d[i] = a[i];
    ref_put_nums(w->f, d, (int)n, p->k, p->by);
    free(d);
}

static void attr_section(writer *w, al_model *m, const al_pairs *t) {
    al_attr_opts o = al_attr_opts_defaults();
    o.batch = AB;
    al_attr_result r;
    al_err e;
    if (al_attribute_run(m, t, &o, &r, &e) != 0) {
        t_fail(__FILE__, __LINE__, "attribute: %s", e.msg);
        return;
    }
    int L = m->cfg.n_layers;
    CHECK(r.n_comp == al_attr_n_comp(&m->cfg) && r.n_terms == al_attr_n_terms(L, 3) && r.T == t->T);
    fputs(",\n  \"attr\": {", w->f);
    w->first = 1;
    num(w, "metric", r.metric);
    num(w, "loss", r.loss);
    nums(w, "dla", r.dla, r.n_comp);
    nums(w, "dla_pos", r.dla_pos, r.n_comp * r.T);
    double pos_items[64];
    for (int p = 0; p < r.T; p++) pos_items[p] = r.pos_items[p];
    nums(w, "pos_items", pos_items, r.T);
    nums(w, "item_metric", r.item_metric, r.n_items);
    nums(w, "item_dla", r.item_dla, r.n_items * r.n_comp);
    nums(w, "term_value", r.term_value, r.n_terms);
    nums(w, "term_dloss", r.term_dloss, r.n_terms);
    nums(w, "item_term", r.item_term, r.n_items * r.n_terms);
    nums(w, "kind_value", r.kind_value, 3);
    nums(w, "kind_dloss", r.kind_dloss, 3);
    nums(w, "lens_loss", r.lens_loss, L + 1);
    nums(w, "lens_acc", r.lens_acc, L + 1);
    fputs("}", w->f);
    al_attr_result_free(&r);
}

/* ∂M/∂x_L (nb, T, C) of M = the mean over the items of pairs [n0, n0+nb)
 * of their metric (pairs.h), at the last forward (of those pairs):
 * ∂M/∂logits at an item is (onehot(answer) − onehot(wrong)) / n for a
 * logit difference, (onehot(answer) − softmax) / n for a log-prob, then
 * through W_U (and ln_final). Returns M. */
static double metric_dxL(al_model *m, const al_pairs *t, int n0, int nb, float *dxL) {
    const int T = t->T, C = m->cfg.d_model, V = m->cfg.d_vocab;
    float *dl = calloc((size_t)nb * T * V, sizeof(float));
    float *row = malloc(sizeof(float) * V);
    CHECK(dl && row);
    int n = 0;
    for (int i = 0; i < t->n_items; i++) n += t->items[i].pair >= n0 && t->items[i].pair < n0 + nb;
    double M = 0;
    for (int i = 0; dl && row && i < t->n_items; i++) {
        const al_pair_item *it = &t->items[i];
        if (it->pair < n0 || it->pair >= n0 + nb) continue;
        size_t bt = (size_t)(it->pair - n0) * T + it->pos;
        al_model_unembed(m, m->x + ((size_t)m->cfg.n_layers * nb * T + bt) * C, 1, row);
        float *d = dl + bt * V;
        if (it->wrong >= 0) {
            M += (double)row[it->answer] - row[it->wrong];
            d[it->answer] += 1.0f / n, d[it->wrong] -= 1.0f / n;
            continue;
        }
        double mx = row[0], s = 0;
        for (int v = 1; v < V; v++) mx = fmax(mx, row[v]);
        for (int v = 0; v < V; v++) s += exp(row[v] - mx);
        M += row[it->answer] - mx - log(s);
        for (int v = 0; v < V; v++) d[v] -= (float)(exp(row[v] - mx) / s) / n;
        d[it->answer] += 1.0f / n;
    }
    al_err ue;
    if (dl)
        CHECK_OK(al_model_unembed_backward_x(m, m->x + (size_t)m->cfg.n_layers * nb * T * C, dl,
                                             nb * T, dxL, &ue),
                 &ue);
    free(dl);
    free(row);
    return M / n;
}

typedef struct grad_bufs {
    float *dxL, *dx, *dzg, *dqkv;
    size_t n_x, n_zg, n_qkv;
} grad_bufs;

static int grad_alloc(grad_bufs *g, const al_config *c, int T) {
    size_t bt = (size_t)AN * T;
    g->n_x = (size_t)(c->n_layers + 1) * bt * c->d_model;
    g->n_zg = (size_t)c->n_layers * bt * c->n_heads * c->d_head;
    g->n_qkv = 3 * g->n_zg;
    g->dxL = malloc(sizeof(float) * bt * c->d_model);
    g->dx = malloc(sizeof(float) * g->n_x);
    g->dzg = malloc(sizeof(float) * g->n_zg);
    g->dqkv = malloc(sizeof(float) * g->n_qkv);
    CHECK(g->dxL && g->dx && g->dzg && g->dqkv);
    return g->dxL && g->dx && g->dzg && g->dqkv ? 0 : -1;
}

static void grad_free(grad_bufs *g) { free(g->dxL), free(g->dx), free(g->dzg), free(g->dqkv); }

/* One gradient set (sizes for nb pairs) as a member of "grads". */
static void grad_entry(writer *w, const char *run, const char *source, int which, int n0, int nb,
                       double M, const grad_bufs *g, int *first_entry) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s grad %s %s %d+%d", run, source, which ? "corr" : "clean",
             n0, nb);
    w->prefix = prefix;
    fprintf(w->f, "%s\n   {\"source\": \"%s\", \"which\": %d, \"n0\": %d, \"nb\": %d",
            *first_entry ? "" : ",", source, which, n0, nb);
    *first_entry = 0;
    w->first = 0;
    num(w, "metric", M);
    floats(w, "dx", g->dx, g->n_x / AN * nb);
    floats(w, "dzg", g->dzg, g->n_zg / AN * nb);
    floats(w, "dqkv", g->dqkv, g->n_qkv / AN * nb);
    fputs("}", w->f);
}

/* The engine's activation gradients of M from ∂M/∂x_L computed here, and
 * al_attrpatch_grad's. */
static void grads_section(writer *w, al_model *m, const al_pairs *t, const char *run) {
    grad_bufs g;
    al_err e;
    int first = 1;
    fputs(",\n  \"grads\": [", w->f);
    if (grad_alloc(&g, &m->cfg, t->T) == 0)
        for (int which = 0; which < 2; which++) {
            const int *tok = which ? t->corr : t->clean;
            CHECK_OK(al_model_forward(m, tok, NULL, AN, t->T, &e), &e);
            double M = metric_dxL(m, t, 0, AN, g.dxL);
            CHECK_OK(al_model_backward_acts(m, g.dxL, g.dx, g.dzg, g.dqkv, &e), &e);
            grad_entry(w, run, "engine", which, 0, AN, M, &g, &first);
            /* the library's own, whole task and the pairs 2..4 */
            static const int n0s[2] = {0, 2}, nbs[2] = {AN, 3};
            for (int i = 0; i < 2; i++) {
                if (al_attrpatch_grad(m, t, which, n0s[i], nbs[i], &M, g.dx, g.dzg, g.dqkv, &e)) {
                    t_fail(__FILE__, __LINE__, "%s attrpatch_grad: %s", run, e.msg);
                    break;
                }
                grad_entry(w, run, "attrpatch_grad", which, n0s[i], nbs[i], M, &g, &first);
            }
        }
    grad_free(&g);
    fputs("]", w->f);
}

static void attrpatch_section(writer *w, al_model *m, const al_pairs *t, const char *run) {
    static const char *dirs[2] = {"denoise", "noise"};
    const int LH = m->cfg.n_layers * m->cfg.n_heads;
    float gates[16];
    memcpy(gates, m->gates, sizeof(float) * (size_t)LH);
    fputs(",\n  \"attrpatch\": [", w->f);
    for (int d = 0; d < 2; d++) {
        al_patch_opts o = al_patch_opts_defaults();
        o.direction = dirs[d], o.probe_r = AR, o.probe_n = AN, o.batch = AB;
        al_attrpatch_result r;
        al_err e;
        if (al_attrpatch_run(m, t, &o, 0, &r, &e) != 0) {
            t_fail(__FILE__, __LINE__, "%s attrpatch %s: %s", run, dirs[d], e.msg);
            break;
        }
        CHECK(!r.compared && r.L == m->cfg.n_layers && r.H == m->cfg.n_heads && r.T == t->T &&
              r.N == t->N && (int)r.direction == d);
        CHECKF(!memcmp(gates, m->gates, sizeof(float) * (size_t)LH) && m->hooks.n == 0,
               "%s attrpatch %s: gates or patch spec changed", run, dirs[d]);
        char prefix[128];
        snprintf(prefix, sizeof prefix, "%s attrpatch %s", run, dirs[d]);
        w->prefix = prefix;
        fprintf(w->f,
                "%s\n   {\"direction\": \"%s\", \"n_senders\": %d, \"n_recv\": %d, "
                "\"n_edge\": %d",
                d ? "," : "", dirs[d], r.n_senders, r.n_recv, r.n_edge);
        w->first = 0;
        num(w, "m_clean", r.m_clean);
        num(w, "m_corr", r.m_corr);
        nums(w, "head", r.head, LH);
        nums(w, "head_pos", r.head_pos, LH * r.T);
        nums(w, "edge", r.edge, r.n_edge);
        fputs("}", w->f);
        al_attrpatch_result_free(&r);
    }
    fputs("]", w->f);
}

/* The model (saved to dir) and its task, both metrics, into out.
 * 0, or −1 after recording a failure. */
static int write_results(al_model *m, const char *dir, const char *out, const perturb *pt) {
    al_err e;
    al_set_threads(1); /* tiny batches; and 2 cores shared: OpenMP threads only wait */
    if (al_ckpt_save(dir, m, NULL, NULL, NULL, NULL, &e) != 0) {
        t_fail(__FILE__, __LINE__, "save %s: %s", dir, e.msg);
        return -1;
    }
    al_pairs t;
    task(&t, m, AR, AN, &e);
    if (t.N != AN) return -1;
    FILE *f = fopen(out, "w");
    CHECK(f != NULL);
    if (!f) {
        al_pairs_free(&t);
        return -1;
    }
    const int LH = m->cfg.n_layers * m->cfg.n_heads;
    fprintf(f, "{\"L\": %d, \"H\": %d, \"gates\": [", m->cfg.n_layers, m->cfg.n_heads);
    for (int i = 0; i < LH; i++) fprintf(f, "%s%.9g", i ? "," : "", (double)m->gates[i]);
    fputs("],\n\"runs\": [", f);
    writer w = {f, pt, "", 1};
    for (int diff = 0; diff < 2; diff++) {
        const char *run = diff ? "logitdiff" : "logprob";
        if (diff) {
            /* the same pairs scored as logit differences against a wrong
             * token that is not the answer */
            t.logit_diff = 1;
            for (int i = 0; i < t.n_items; i++)
                t.items[i].wrong = (t.items[i].answer + 1 + i % 7) % AV;
        }
        fprintf(f, "%s\n {\"name\": \"%s\", ", diff ? "," : "", run);
        ref_put_task(f, &t);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s attr", run);
        w.prefix = prefix;
        attr_section(&w, m, &t);
        if (m->cfg.n_layers <= 2) { /* attribution patching covers 1 and 2 layers */
            grads_section(&w, m, &t, run);
            attrpatch_section(&w, m, &t, run);
        }
        fputs("}", f);
    }
    fputs("]}\n", f);
    al_pairs_free(&t);
    return fclose(f) == 0 ? 0 : -1;
}

/* attr_ref.py on dir and results; its exit code, output in ref.out. */
static int attr_ref(const char *dir, const char *results) {
    char args[2200];
    snprintf(args, sizeof args, "%s %s", dir, results);
    return ref_run(SCRIPT, args);
}

/* Every section of both runs was compared (attr_only: the attribution
 * section only, deeper models). */
static void check_covered(int attr_only) {
    char *out = t_slurp(t_path("ref.out"));
    CHECK(out != NULL);
    if (!out) return;
    static const char *want[] = {"attr dla ",
                                 "attr term_dloss ",
                                 "attr kind_dloss ",
                                 "attr lens_acc ",
                                 "grad engine clean 0+6 dqkv ",
                                 "grad engine corr 0+6 dx ",
                                 "grad attrpatch_grad clean 2+3 dzg ",
                                 "grad attrpatch_grad corr 0+6 dqkv ",
                                 "attrpatch denoise edge ",
                                 "attrpatch noise head_pos "};
    for (int run = 0; run < 2; run++) {
        for (size_t i = 0; i < (attr_only ? 4 : sizeof want / sizeof *want); i++) {
            char name[128];
            snprintf(name, sizeof name, "%s %s", run ? "logitdiff" : "logprob", want[i]);
            CHECKF(strstr(out, name) != NULL, "attr_ref.py did not compare %s", name);
        }
    }
    free(out);
}

/* The model of a case: patterns sharp (mean largest attention weight
 * 0.5 to 0.8) and, untied, W_U scaled back to item losses of a few nats:
 * randmodel.h's logits are made for 1-layer sums, and with two layers of
 * sharp heads they reach 20, a saturated softmax whose log-prob gradient
 * is nearly onehot(answer) − onehot(argmax), a weaker test. */
static int g_pos_type = AL_POS_STANDARD; /* attr_torch_shortformer sets it */
static int g_norm = AL_NORM_NONE; /* the LayerNorm cases set these */
static unsigned g_biases = 0;
static void case_model(al_model *m, int L, int tied) {
    if (g_norm == AL_NORM_NONE && !g_biases) {
        rand_model(m, L, tied, AV);
        m->cfg.pos_type = g_pos_type;
        scale_qk(m, 3.0f); /* QK scores ×9: far from uniform */
        if (!tied)
            for (size_t i = 0; i < m->param_size[AL_P_WU]; i++) m->p[AL_P_WU][i] *= 0.25f;
        return;
    }
    /* LayerNorm and biases: rand_model's shape, LayerNorm weights and
     * biases far from their initial values; ln1's output has unit-variance
     * coordinates, so W_Q, W_K as initialised already give scores of order
     * 1 (×4 here), and W_U × 4 logits of a few units */
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = 24, c.n_heads = 3, c.d_head = 8, c.n_ctx = 16, c.d_vocab = AV;
    c.tied_embeddings = tied, c.pos_type = g_pos_type, c.norm_type = g_norm, c.biases = g_biases;
    c.seed = 17 + (uint64_t)L;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
    al_rng r;
    al_rng_seed(&r, 23 + (uint64_t)L);
    for (int p = AL_P_LN1W; p < AL_NPARAM; p++)
        for (size_t i = 0; i < m->param_size[p]; i++) {
            double v = 0.3 * al_rng_normal(&r);
            m->p[p][i] = (float)(p == AL_P_LN1W || p == AL_P_LNFW ? 1 + v : v);
        }
    scale_qk(m, 2.0f);
    for (size_t i = 0; i < m->param_size[AL_P_WU]; i++) m->p[AL_P_WU][i] *= 4.0f;
    for (int k = 0; k < L * c.n_heads; k++) m->gates[k] = 0.4f + 0.3f * (float)k;
}

/* Results of the model written (with perturbation pt) and compared:
 * attr_ref.py's exit code (−1: the results could not be written). */
static int run_ref(int L, int tied, const perturb *pt) {
    al_model m;
    case_model(&m, L, tied);
    char dir[1024]; /* t_path's buffers are reused */
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    const char *res = t_path("results.json");
    int rc = write_results(&m, dir, res, pt);
    al_model_free(&m);
    return rc != 0 ? -1 : attr_ref(dir, res);
}

static void run_case(int L, int tied) {
    ref_need_torch(SCRIPT);
    int rc = run_ref(L, tied, NULL);
    if (rc == -1) return;
    char *out = t_slurp(t_path("ref.out"));
    CHECKF(rc == 0, "attr_ref.py exit %d:\n%s", rc, out ? out : "");
    if (getenv("ATTR_TORCH_VERBOSE")) fputs(out ? out : "", stderr);
    free(out);
    check_covered(L > 2);
}

/* Two layers, untied: virtual heads, q/k/v edges into layer 1. */
TEST(attr_torch_2layer) { run_case(2, 0); }

/* Three and four layers (attribution only): virtual heads from every
 * earlier layer, and the remainder, which attr_ref.py builds chain by
 * chain (and checks that the terms sum to x_L in float64). */
TEST(attr_torch_3layer) { run_case(3, 0); }
TEST(attr_torch_4layer_tied) { run_case(4, 1); }

/* One layer, tied embeddings: only direct edges. */
TEST(attr_torch_1layer) { run_case(1, 1); }

/* Two layers, shortformer positions (W_pos in q and k only): the pos
 * component is 0, every number as attr_ref.py computes it from
 * positional_embedding_type. */
TEST(attr_torch_shortformer) {
    g_pos_type = AL_POS_SHORTFORMER;
    run_case(2, 0);
}

/* Three layers, shortformer: heads deeper than layer 1 read embed alone
 * as their "embed + pos" value part. */
TEST(attr_torch_shortformer_3layer) {
    g_pos_type = AL_POS_SHORTFORMER;
    run_case(3, 0);
}

/* LayerNorm and every bias, two layers: DLA and the path expansion with
 * the clean run's ln_final and ln1 scales frozen (apply_ln_to_stack),
 * b_O per layer and the constant as components, the logit lens through
 * the whole unembedding, the activation gradients through ln1 and
 * ln_final, and attribution patching's edges at each head's copy of the
 * residual before ln1; as attr_ref.py computes them from TransformerLens's
 * definitions. */
TEST(attr_torch_ln_biases) {
    g_norm = AL_NORM_LN, g_biases = AL_BIAS_ALL;
    run_case(2, 0);
}

/* The same with shortformer positions (added to q, k after ln1), and
 * LNPre with some biases at three layers (attribution only: the chains
 * of three or more heads through frozen ln1 scales). */
TEST(attr_torch_ln_shortformer) {
    g_norm = AL_NORM_LN, g_biases = AL_BIAS_ALL, g_pos_type = AL_POS_SHORTFORMER;
    run_case(2, 0);
}
TEST(attr_torch_lnpre_3layer) {
    g_norm = AL_NORM_LNPRE, g_biases = AL_BIAS_Q | AL_BIAS_V | AL_BIAS_O | AL_BIAS_U;
    run_case(3, 0);
}

/* Biases alone, no LayerNorm, one layer with tied embeddings. */
TEST(attr_torch_biases_only) {
    g_biases = AL_BIAS_ALL;
    run_case(1, 1);
}

/* The check can fail: three numbers, each off by a little more than its
 * tolerance (an attribution Δloss, a gradient, an edge estimate), are
 * reported, each naming its array, and nothing else is. */
TEST(attr_torch_detects_mismatch) {
    ref_need_torch(SCRIPT);
    /* 1 layer: 2e-4 on a Δloss of scale ~1 (tolerance 2e-5); a q gradient
     * off by 1e-4, ~7e-3 of the largest; the direct edge of sender 2
     * (head 0.0), whose normalised estimates are ~1 */
    const perturb pts[4] = {{"logprob attr term_dloss", 2, 2e-4},
                            {"logitdiff grad engine corr 0+6 dqkv", 100, 1e-4},
                            {"logprob attrpatch noise edge", (3 * 5 + 2) * 3, 2e-4},
                            {NULL, 0, 0}};
    int rc = run_ref(1, 1, pts);
    if (rc == -1) return;
    char *out = t_slurp(t_path("ref.out"));
    CHECKF(rc == 1, "attr_ref.py should report a mismatch (exit 1), got %d:\n%s", rc,
           out ? out : "");
    /* one FAIL line per perturbed array, each naming it */
    int n_fail = 0, n_want = 3;
    for (const char *p = out ? strstr(out, "FAIL") : NULL; p; p = strstr(p + 4, "FAIL")) {
        const char *line = p;
        while (line > out && line[-1] != '\n') line--;
        line += strspn(line, " ");
        n_fail++;
        int named = 0;
        for (int i = 0; i < n_want; i++) named |= !strncmp(line, pts[i].what, strlen(pts[i].what));
        CHECKF(named, "a FAIL on an array that was not perturbed:\n%.*s", (int)(p - line + 4),
               line);
    }
    CHECKF(n_fail == n_want, "%d FAIL lines, want %d:\n%s", n_fail, n_want, out ? out : "");
    free(out);
}
