/* test_attr_ln.c -- attribution (attribute.h) on LayerNorm and bias
 * models: the components and path terms add up to the model's logits
 * with the clean run's LayerNorm scales frozen (LN, LNPre, biases alone,
 * processed models; 1 to 3 layers; standard and shortformer positions);
 * each component against TransformerLens's apply_ln_to_stack recipe
 * computed here from hooked activations; a model with its LayerNorm
 * folded in (process.h) gives the same attribution; centring. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attribute.h"
#include "attnlab/hooks.h"
#include "attnlab/model.h"
#include "attnlab/patch.h"
#include "attnlab/process.h"
#include "randmodel.h"
#include "test.h"

enum { RR = 5, NV = 13 }; /* NV: ln_model's vocabulary */

/* A copy of m (its config, parameters and gates). */
static void copy_model(al_model *dst, const al_model *m) {
    al_err e;
    CHECK_OK(al_model_alloc(dst, &m->cfg, &e), &e);
    memcpy(dst->params, m->params, sizeof(float) * m->n_params);
    memcpy(dst->gates, m->gates, sizeof(float) * (size_t)m->cfg.n_layers * m->cfg.n_heads);
}

/* The model's logits row at item it, from a forward of its pair alone;
 * returns its metric (logit of the answer, less the wrong one's). */
static double model_row(al_model *m, const al_pairs *t, const al_pair_item *it, float *row) {
    al_err e;
    CHECK_OK(al_model_forward(m, t->clean + (size_t)it->pair * t->T, NULL, 1, t->T, &e), &e);
    const float *x = m->x + ((size_t)m->cfg.n_layers * t->T + it->pos) * m->cfg.d_model;
    al_model_unembed(m, x, 1, row);
    return (double)row[it->answer] - (it->wrong >= 0 ? (double)row[it->wrong] : 0.0);
}

/* |sum − ref| relative to the larger of |ref| and the largest part. */
static double rel(double sum, double ref, const double *parts, int n) {
    double s = fabs(ref);
    for (int k = 0; k < n; k++) s = fmax(s, fabs(parts[k]));
    return fabs(sum - ref) / (s > 0 ? s : 1);
}

/* Components, path terms and the terms' whole logits rows add up to the
 * model's (1e-4 of the scale), log-prob and logit-difference items.
 * Returns the worst relative error. */
static double check_sums(al_model *m, const char *what) {
    al_err e;
    al_pairs t;
    task(&t, m, RR, 7, &e);
    double worst = 0;
    for (int diff = 0; diff < 2; diff++) {
        if (diff) as_logit_diff(&t, NV);
        al_attr_opts o = al_attr_opts_defaults();
        o.batch = 3;
        al_attr_result r;
        if (al_attribute_run(m, &t, &o, &r, &e)) {
            t_fail(__FILE__, __LINE__, "%s: %s", what, e.msg);
            break;
        }
        const int L = m->cfg.n_layers, H = m->cfg.n_heads, nc = r.n_comp, nt = r.n_terms;
        CHECKF(nc == 3 + L * H + L && nt == al_attr_n_terms(L, H), "%s: %d components", what, nc);
        float row[NV], *pl = malloc(sizeof(float) * (size_t)nt * NV);
        for (int i = 0; i < t.n_items; i++) {
            const al_pair_item *it = &t.items[i];
            double ref = model_row(m, &t, it, row), sc = 0, st = 0;
            CHECK_NEAR(r.item_metric[i], ref, 1e-5 * (1 + fabs(ref)));
            for (int c = 0; c < nc; c++) sc += r.item_dla[(size_t)i * nc + c];
            for (int k = 0; k < nt; k++) st += r.item_term[(size_t)i * nt + k];
            double a = rel(sc, ref, r.item_dla + (size_t)i * nc, nc);
            double b = rel(st, ref, r.item_term + (size_t)i * nt, nt);
            worst = fmax(worst, fmax(a, b));
            if (m->cfg.pos_type == AL_POS_SHORTFORMER) CHECK(r.item_dla[(size_t)i * nc + 1] == 0);
            CHECK_OK(al_attr_path_logits(m, t.clean + (size_t)it->pair * t.T, t.T, it->pos, pl, &e),
                     &e);
            double mx = 0, dv = 0;
            for (int v = 0; v < NV; v++) {
                double s = 0;
                for (int k = 0; k < nt; k++) s += pl[(size_t)k * NV + v];
                mx = fmax(mx, fabs(row[v]));
                dv = fmax(dv, fabs(s - row[v]));
            }
            worst = fmax(worst, dv / mx);
            /* the run's term values are these rows' */
            for (int k = 0; k < nt; k++) {
                double c = pl[(size_t)k * NV + it->answer] -
                           (it->wrong >= 0 ? pl[(size_t)k * NV + it->wrong] : 0.0);
                CHECK_NEAR(r.item_term[(size_t)i * nt + k], c, 1e-5 * (1 + fabs(c)));
            }
        }
        CHECK_NEAR(r.kind_value[0] + r.kind_value[1] + r.kind_value[2], r.metric,
                   1e-4 * (1 + fabs(r.metric)));
        free(pl);
        al_attr_result_free(&r);
    }
    CHECKF(worst <= 1e-4, "%s: components, terms or rows off by %g of their scale", what, worst);
    al_pairs_free(&t);
    return worst;
}

/* The identities on every kind of LayerNorm and bias model, unprocessed
 * and processed (TransformerLens's defaults: LN folded, ln_final's w and
 * b in W_U and b_U). */
TEST(attr_ln_sums_exact) {
    static const struct {
        int L, norm;
        unsigned biases;
        int pos;
    } cases[] = {{1, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD},
                 {2, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD},
                 {3, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD},
                 {2, AL_NORM_LN, AL_BIAS_ALL, AL_POS_SHORTFORMER},
                 {2, AL_NORM_LN, 0, AL_POS_STANDARD},
                 {2, AL_NORM_LNPRE, AL_BIAS_Q | AL_BIAS_V | AL_BIAS_O, AL_POS_STANDARD},
                 {3, AL_NORM_NONE, AL_BIAS_ALL, AL_POS_SHORTFORMER},
                 {1, AL_NORM_NONE, AL_BIAS_U, AL_POS_STANDARD}};
    double worst = 0;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int processed = 0; processed < 2; processed++) {
            al_model m;
            ln_model(&m, cases[k].L, cases[k].norm, cases[k].biases, cases[k].pos, 7 + k);
            al_err e;
            if (processed) {
                const al_process_opts po = AL_PROCESS_OPTS_INIT;
                CHECK_OK(al_model_process(&m, &po, &e), &e);
                /* folding LN makes it LNPre with ln_final in W_U */
                if (cases[k].norm == AL_NORM_LN && cases[k].pos == AL_POS_STANDARD)
                    CHECK(m.cfg.norm_type == AL_NORM_LNPRE && (m.cfg.processed & AL_PROC_FOLD_LN) &&
                          !m.p[AL_P_LNFW]);
            }
            char what[64];
            snprintf(what, sizeof what, "case %zu%s", k, processed ? " processed" : "");
            worst = fmax(worst, check_sums(&m, what));
            al_model_free(&m);
        }
    if (getenv("ATTR_LN_VERBOSE")) fprintf(stderr, "worst relative error %.3g\n", worst);
}

/* ------------------------------------------ components, by hand */

typedef struct capture {
    int L, H, C;
    float *scale; /* (B, T) ln_final's */
    float *result; /* (L, B, T, H, C) */
    size_t bt;
} capture;

static int cap_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    capture *c = ctx;
    if (a->point == AL_HOOK_LNF_SCALE)
        memcpy(c->scale, a->data, sizeof(float) * c->bt);
    else
        memcpy(c->result + (size_t)a->layer * c->bt * c->H * c->C, a->data,
               sizeof(float) * c->bt * c->H * c->C);
    return 0;
}

/* Σ_k y_k · u_k, y centred and divided by scale, times w (TransformerLens's
 * apply_ln_to_stack, then ln_final.w), u = W_U[:,a] − W_U[:,w]. */
static double by_hand(const al_model *m, const float *y, double scale, int a, int w) {
    const int C = m->cfg.d_model, V = m->cfg.d_vocab;
    double mu = 0, s = 0;
    for (int k = 0; k < C; k++) mu += y[k];
    mu /= C;
    for (int k = 0; k < C; k++) {
        double u =
            m->p[AL_P_WU][(size_t)k * V + a] - (w >= 0 ? m->p[AL_P_WU][(size_t)k * V + w] : 0);
        s += (y[k] - mu) / scale * m->p[AL_P_LNFW][k] * u;
    }
    return s;
}

/* Each component of a 2-layer LN model with every bias as computed here
 * from the hooked ln_final.hook_scale and attn.hook_result of a forward:
 * embed, pos, each head's result, each layer's b_O, and the constant
 * ln_final.b · u + b_U[a] − b_U[w]. */
TEST(attr_ln_components_by_hand) {
    al_model m;
    ln_model(&m, 2, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 31);
    al_err e;
    al_pairs t;
    task(&t, &m, RR, 5, &e);
    as_logit_diff(&t, NV);
    al_attr_opts o = al_attr_opts_defaults();
    o.paths = 0;
    al_attr_result r;
    CHECK_OK(al_attribute_run(&m, &t, &o, &r, &e), &e);
    const int L = 2, H = 3, C = 24, T = t.T, nc = r.n_comp;
    capture c = {L, H, C, NULL, NULL, (size_t)t.N * T};
    c.scale = malloc(sizeof(float) * c.bt);
    c.result = malloc(sizeof(float) * L * c.bt * H * C);
    CHECK_OK(al_hook_add(&m, AL_HOOK_LNF_SCALE, 0, cap_hook, &c, &e), &e);
    CHECK_OK(al_hook_add(&m, AL_HOOK_RESULT, -1, cap_hook, &c, &e), &e);
    CHECK_OK(al_model_forward(&m, t.clean, NULL, t.N, T, &e), &e);
    al_hook_remove(&m, &c);
    char nm[32];
    CHECK(!strcmp(al_attr_comp_name(L, H, 2 + L * H, nm, sizeof nm), "b_O_0") &&
          !strcmp(al_attr_comp_name(L, H, 3 + L * H, nm, sizeof nm), "b_O_1") &&
          !strcmp(al_attr_comp_name(L, H, 4 + L * H, nm, sizeof nm), "const") &&
          !strcmp(al_attr_comp_name(L, H, 7, nm, sizeof nm), "1.2"));
    double worst = 0, big = 0;
    for (int i = 0; i < t.n_items; i++) {
        const al_pair_item *it = &t.items[i];
        size_t bt = (size_t)it->pair * T + it->pos;
        double sc = c.scale[bt], want[32];
        int a = it->answer, w = it->wrong, tok = t.clean[bt];
        want[0] = by_hand(&m, m.p[AL_P_WE] + (size_t)tok * C, sc, a, w);
        want[1] = by_hand(&m, m.p[AL_P_WPOS] + (size_t)it->pos * C, sc, a, w);
        for (int l = 0; l < L; l++) {
            for (int h = 0; h < H; h++)
                want[2 + l * H + h] =
                    by_hand(&m, c.result + (((size_t)l * c.bt + bt) * H + h) * C, sc, a, w);
            want[2 + L * H + l] = by_hand(&m, m.p[AL_P_BO] + (size_t)l * C, sc, a, w);
        }
        double k0 = m.p[AL_P_BU][a] - m.p[AL_P_BU][w];
        for (int k = 0; k < C; k++)
            k0 += m.p[AL_P_LNFB][k] *
                  ((double)m.p[AL_P_WU][(size_t)k * NV + a] - m.p[AL_P_WU][(size_t)k * NV + w]);
        want[2 + L * H + L] = k0;
        for (int k = 0; k < nc; k++) {
            double got = r.item_dla[(size_t)i * nc + k];
            worst = fmax(worst, fabs(got - want[k]) / (1 + fabs(want[k])));
            big = fmax(big, fabs(want[k]));
        }
    }
    CHECKF(worst <= 1e-5 && big > 0.1, "components off by %g (largest %g)", worst, big);
    free(c.scale);
    free(c.result);
    al_attr_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* A model and its copy with the LayerNorm folded in (fold_ln and
 * center_writing_weights: LNPre, ln_final's w and b in W_U and b_U) give
 * the same components and path terms: centring a component does not
 * change what LayerNorm reads of it, and the folded weights read it as
 * the frozen scale does. */
TEST(attr_ln_folded_same_attribution) {
    for (int L = 1; L <= 2; L++) {
        al_model m, f;
        ln_model(&m, L, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 41 + L);
        copy_model(&f, &m);
        al_err e;
        const al_process_opts po = {.fold_ln = 1, .center_writing_weights = 1};
        CHECK_OK(al_model_process(&f, &po, &e), &e);
        CHECK(f.cfg.norm_type == AL_NORM_LNPRE && f.cfg.processed & AL_PROC_FOLD_LN);
        al_pairs t;
        task(&t, &m, RR, 6, &e);
        al_attr_opts o = al_attr_opts_defaults();
        al_attr_result a, b;
        CHECK_OK(al_attribute_run(&m, &t, &o, &a, &e), &e);
        CHECK_OK(al_attribute_run(&f, &t, &o, &b, &e), &e);
        CHECK(a.n_comp == b.n_comp && a.n_terms == b.n_terms);
        double worst = 0, big = 0;
        for (int i = 0; i < t.n_items; i++) {
            for (int k = 0; k < a.n_comp; k++) {
                double x = a.item_dla[(size_t)i * a.n_comp + k],
                       y = b.item_dla[(size_t)i * b.n_comp + k];
                worst = fmax(worst, fabs(x - y) / (1 + fabs(x)));
                big = fmax(big, fabs(x));
            }
            for (int k = 0; k < a.n_terms; k++) {
                double x = a.item_term[(size_t)i * a.n_terms + k];
                double y = b.item_term[(size_t)i * b.n_terms + k];
                worst = fmax(worst, fabs(x - y) / (1 + fabs(x)));
            }
        }
        CHECKF(worst <= 2e-5 && big > 0.1, "L %d: folded vs not: %g (largest %g)", L, worst, big);
        CHECK_NEAR(a.loss, b.loss, 1e-5);
        al_attr_result_free(&a);
        al_attr_result_free(&b);
        al_pairs_free(&t);
        al_model_free(&m);
        al_model_free(&f);
    }
}

/* --centre-unembed on a LayerNorm model: each component against the
 * mean logit; they still add up to the answer's logit less the mean. */
TEST(attr_ln_center_unembed) {
    al_model m;
    ln_model(&m, 2, AL_NORM_LN, AL_BIAS_ALL, AL_POS_STANDARD, 55);
    al_err e;
    al_pairs t;
    task(&t, &m, RR, 4, &e);
    al_attr_opts o = al_attr_opts_defaults();
    o.center_unembed = 1;
    al_attr_result r;
    CHECK_OK(al_attribute_run(&m, &t, &o, &r, &e), &e);
    float row[NV];
    for (int i = 0; i < t.n_items; i++) {
        const al_pair_item *it = &t.items[i];
        model_row(&m, &t, it, row);
        double mean = 0, sc = 0, st = 0;
        for (int v = 0; v < NV; v++) mean += row[v];
        double ref = row[it->answer] - mean / NV;
        CHECK_NEAR(r.item_metric[i], ref, 1e-5 * (1 + fabs(ref)));
        for (int c = 0; c < r.n_comp; c++) sc += r.item_dla[(size_t)i * r.n_comp + c];
        for (int k = 0; k < r.n_terms; k++) st += r.item_term[(size_t)i * r.n_terms + k];
        CHECK(rel(sc, ref, r.item_dla + (size_t)i * r.n_comp, r.n_comp) <= 1e-4);
        CHECK(rel(st, ref, r.item_term + (size_t)i * r.n_terms, r.n_terms) <= 1e-4);
    }
    al_attr_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* The notes a run records: none for the plain model; with LayerNorm the
 * frozen scales, with LayerNorm or biases where the biases go; each fits
 * a run's warning row. */
TEST(attr_ln_notes) {
    al_config c = al_config_default();
    const char *notes[2];
    CHECK(al_attr_notes(&c, notes) == 0);
    c.biases = AL_BIAS_O;
    CHECK(al_attr_notes(&c, notes) == 1 && strstr(notes[0], "b_O_l"));
    c.norm_type = AL_NORM_LNPRE;
    CHECK(al_attr_notes(&c, notes) == 2 && strstr(notes[0], "freezes LayerNorm scales") &&
          strstr(notes[1], "(const)"));
    c.biases = 0;
    CHECK(al_attr_notes(&c, notes) == 2);
    for (int i = 0; i < 2; i++) CHECK(strlen(notes[i]) < AL_WARN_LEN);
}
