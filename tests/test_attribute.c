/* test_attribute.c -- attribution (attribute.h): direct logit attribution
 * and the path expansion add up to the model's logits exactly (random
 * models of 1 to 4 layers, tied and untied, gates != 1), the term
 * indices, known answers on the hand-built circuit of planted.h (2 and 3
 * layers, and copies with a planted V-composition), the logit lens
 * against the forward's loss, and refused options. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attribute.h"
#include "attnlab/model.h"
#include "attnlab/patch.h"
#include "planted.h"
#include "randmodel.h"
#include "test.h"

enum { RR = 5, RT = 2 * RR + 1 };

/* The model's logits row at (pair n, pos), from its own forward of the
 * pair alone, into row (V); returns the metric logit of item it. */
static double model_row(al_model *m, const al_pairs *t, const al_pair_item *it, float *row) {
    al_err e;
    CHECK_OK(al_model_forward(m, t->clean + (size_t)it->pair * t->T, NULL, 1, t->T, &e), &e);
    const float *x = m->x + ((size_t)m->cfg.n_layers * t->T + it->pos) * m->cfg.d_model;
    al_model_unembed(m, x, 1, row);
    return (double)row[it->answer] - (it->wrong >= 0 ? (double)row[it->wrong] : 0.0);
}

/* |sum − ref| relative to the larger of |ref| and the largest part. */
static double rel(double sum, double ref, const double *parts, int n, size_t stride) {
    double s = fabs(ref);
    for (int k = 0; k < n; k++)
        if (fabs(parts[k * stride]) > s) s = fabs(parts[k * stride]);
    return fabs(sum - ref) / (s > 0 ? s : 1);
}

/* Components and path terms add up to the model's metric logit at every
 * item, and the terms' logits rows to its logits rows; for both metrics
 * (log-prob and logit difference). Gates are as set, and m's z
 * replacements and patch spec are back on return. */
static void exact_random_models(int pos_type) {
    for (int L = 1; L <= 4; L++)
        for (int tied = 0; tied < 2; tied++)
            for (int diff = 0; diff < 2; diff++) {
                al_model m;
                rand_model(&m, L, tied, 13);
                m.cfg.pos_type = pos_type;
                al_err e;
                al_pairs t;
                task(&t, &m, RR, 7, &e);
                if (diff) {
                    t.logit_diff = 1;
                    for (int i = 0; i < t.n_items; i++)
                        t.items[i].wrong = (t.items[i].answer + 1 + i % 5) % 13;
                }
                float gates[12];
                memcpy(gates, m.gates, sizeof(float) * L * 3);
                float zbuf[1];
                al_patch_spec ps = {0};
                const float *zr[12] = {NULL, zbuf};
                CHECK_OK(al_zrep_hooks_add(&m, zr, &e), &e);
                CHECK_OK(al_patch_hooks_add(&m, &ps, &e), &e);
                int nh = m.hooks.n;
                al_attr_opts o = al_attr_opts_defaults();
                o.batch = 3; /* batches of 3, 3, 1 pairs */
                al_attr_result r;
                CHECK_OK(al_attribute_run(&m, &t, &o, &r, &e), &e);
                CHECK(m.hooks.n == nh && m.hooks.h[0].ctx == (void *)zr &&
                      m.hooks.h[nh - 1].ctx == (void *)&ps);
                CHECK(!memcmp(gates, m.gates, sizeof(float) * L * 3));
                al_hook_clear(&m);
                /* 1 + 3L + 9·L(L−1)/2, and the remainder from 3 layers */
                static const int nterms[5] = {0, 4, 16, 38, 68};
                CHECK(r.n_comp == 2 + 3 * L && r.n_terms == nterms[L]);
                const int V = 13, nt = r.n_terms;
                float row[13], *pl = malloc(sizeof(float) * nt * V);
                double worst_c = 0, worst_t = 0, worst_row = 0, msum = 0;
                for (int i = 0; i < t.n_items; i++) {
                    const al_pair_item *it = &t.items[i];
                    double ref = model_row(&m, &t, it, row);
                    msum += ref;
                    CHECK_NEAR(r.item_metric[i], ref, 1e-4 * (1 + fabs(ref)));
                    double sc = 0, st = 0;
                    for (int c = 0; c < r.n_comp; c++) sc += r.item_dla[(size_t)i * r.n_comp + c];
                    for (int k = 0; k < nt; k++) st += r.item_term[(size_t)i * nt + k];
                    double a = rel(sc, ref, r.item_dla + (size_t)i * r.n_comp, r.n_comp, 1);
                    double b = rel(st, ref, r.item_term + (size_t)i * nt, nt, 1);
                    if (a > worst_c) worst_c = a;
                    /* shortformer: no positions in the residual stream */
                    if (pos_type == AL_POS_SHORTFORMER)
                        CHECK(r.item_dla[(size_t)i * r.n_comp + 1] == 0.0);
                    if (b > worst_t) worst_t = b;
                    /* whole rows */
                    CHECK_OK(al_attr_path_logits(&m, t.clean + (size_t)it->pair * t.T, t.T, it->pos,
                                                 pl, &e),
                             &e);
                    double mx = 0, dv = 0;
                    for (int v = 0; v < V; v++) {
                        double s = 0;
                        for (int k = 0; k < nt; k++) s += pl[k * V + v];
                        if (fabs(row[v]) > mx) mx = fabs(row[v]);
                        if (fabs(s - row[v]) > dv) dv = fabs(s - row[v]);
                        /* the run's per-item term values are these rows' */
                        if (v == it->answer)
                            for (int k = 0; k < nt; k++) {
                                double c =
                                    pl[k * V + v] - (it->wrong >= 0 ? pl[k * V + it->wrong] : 0.0);
                                /* float rounding on the scale of the term's row (deep
                                 * random models: tens) */
                                double sc = 1;
                                for (int w = 0; w < V; w++) sc = fmax(sc, fabs(pl[k * V + w]));
                                CHECK_NEAR(r.item_term[(size_t)i * nt + k], c, 2e-5 * sc);
                            }
                    }
                    if (dv / mx > worst_row) worst_row = dv / mx;
                }
                CHECKF(worst_c <= 1e-4 && worst_t <= 1e-4 && worst_row <= 1e-4,
                       "L %d tied %d diff %d: rel. errors dla %g terms %g rows %g", L, tied, diff,
                       worst_c, worst_t, worst_row);
                CHECK_NEAR(r.metric, msum / t.n_items, 1e-5 * (1 + fabs(r.metric)));
                /* the means are the items' */
                double s0 = 0, sv = 0;
                for (int i = 0; i < t.n_items; i++) {
                    s0 += r.item_dla[(size_t)i * r.n_comp + 2];
                    sv += r.item_term[(size_t)i * nt + nt - 1];
                }
                CHECK_NEAR(r.dla[2], s0 / t.n_items, 1e-12);
                /* per kind: values add up to the metric; the direct kind is
                 * the direct term; a 1-layer model has no virtual heads */
                CHECK_NEAR(r.kind_value[0] + r.kind_value[1] + r.kind_value[2], r.metric,
                           1e-4 * (1 + fabs(r.metric)));
                CHECK_NEAR(r.kind_dloss[AL_ATTR_DIRECT], r.term_dloss[0], 1e-9);
                if (L == 1) CHECK(r.kind_value[2] == 0 && r.kind_dloss[2] == 0);
                CHECK_NEAR(r.term_value[nt - 1], sv / t.n_items, 1e-12);
                /* every item is at a repeated position R+1..2R−1 */
                for (int p = 0; p < t.T; p++)
                    CHECK(r.pos_items[p] == (p > RR && p < 2 * RR ? 7 : 0) &&
                          isnan(r.dla_pos[p]) == (r.pos_items[p] == 0));
                free(pl);
                al_attr_result_free(&r);
                al_pairs_free(&t);
                al_model_free(&m);
            }
}

TEST(attr_exact_random_models) { exact_random_models(AL_POS_STANDARD); }
/* Shortformer positions (W_pos in q and k only): the pos component is 0
 * and the same identities hold. */
TEST(attr_exact_random_models_shortformer) { exact_random_models(AL_POS_SHORTFORMER); }

/* The term indices: the header's formulas, names and heads agree for
 * every term, in order; 1 and 2 layers keep their indices. */
TEST(attr_term_indices) {
    CHECK(al_attr_n_terms(1, 8) == 9 && al_attr_n_terms(2, 8) == 1 + 16 + 64 &&
          al_attr_n_terms(3, 8) == 1 + 24 + 3 * 64 + 1 && al_attr_n_terms(4, 8) == 418);
    CHECK(al_attr_n_terms(0, 3) == 0 && al_attr_n_terms(64, 256) == 0);
    for (int L = 1; L <= 5; L++) {
        const int H = 3, nt = al_attr_n_terms(L, H);
        int k = 0, ok = 1;
        char buf[64], want[64];
        ok &= al_attr_term_kind_of(L, H, k++) == AL_ATTR_DIRECT;
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++, k++) {
                int tl, th, ts;
                ok &= al_attr_term_heads(L, H, k, &tl, &th, &ts) == AL_ATTR_HEAD && tl == l &&
                      th == h && ts == -1;
                snprintf(want, sizeof want, "%d.%d", l, h);
                ok &= !strcmp(al_attr_term_name(L, H, k, buf, sizeof buf), want);
            }
        for (int l1 = 1; l1 < L; l1++)
            for (int src = 0; src < l1 * H; src++)
                for (int h1 = 0; h1 < H; h1++, k++) {
                    int tl, th, ts;
                    ok &= al_attr_virtual_index(L, H, src, l1, h1) == k &&
                          k == 1 + L * H + H * H * l1 * (l1 - 1) / 2 + src * H + h1;
                    ok &= al_attr_term_heads(L, H, k, &tl, &th, &ts) == AL_ATTR_VIRTUAL &&
                          tl == l1 && th == h1 && ts == src;
                    snprintf(want, sizeof want, "%d.%d>%d.%d", src / H, src % H, l1, h1);
                    ok &= !strcmp(al_attr_term_name(L, H, k, buf, sizeof buf), want);
                }
        if (L >= 3) {
            int tl, th, ts;
            ok &= al_attr_term_heads(L, H, k, &tl, &th, &ts) == AL_ATTR_VIRTUAL && tl == -1 &&
                  th == -1 && ts == -1;
            ok &= !strcmp(al_attr_term_name(L, H, k, buf, sizeof buf), "chains>=3");
            k++;
        }
        CHECKF(ok && k == nt, "L %d: %d terms walked, %d counted", L, k, nt);
    }
    /* 2 layers: the indices they always had */
    CHECK(al_attr_virtual_index(2, 4, 3, 1, 2) == 1 + 8 + 3 * 4 + 2);
}

/* DLA on any number of layers (paths off), exact on a 3-layer model. */
TEST(attr_dla_three_layers) {
    al_model m;
    rand_model(&m, 3, 0, 13);
    al_err e;
    al_pairs t;
    task(&t, &m, RR, 4, &e);
    al_attr_opts o = al_attr_opts_defaults();
    o.paths = 0;
    al_attr_result r;
    CHECK_OK(al_attribute_run(&m, &t, &o, &r, &e), &e);
    CHECK(r.n_terms == 0 && r.term_value == NULL && r.n_comp == 11);
    float row[13];
    for (int i = 0; i < t.n_items; i++) {
        double ref = model_row(&m, &t, &t.items[i], row), s = 0;
        for (int c = 0; c < r.n_comp; c++) s += r.item_dla[(size_t)i * r.n_comp + c];
        CHECKF(rel(s, ref, r.item_dla + (size_t)i * r.n_comp, r.n_comp, 1) <= 1e-4,
               "item %d: sum %g model %g", i, s, ref);
    }
    al_attr_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* W_U centring (center_unembed, TransformerLens's default): on log-prob
 * items the metric is the answer's logit less the row's mean logit (from
 * the model's own logits row), components and path terms still sum to
 * it, and adding one vector w to every column of W_U -- which moves every
 * logit by x·w and leaves log p alone -- leaves the centred attribution
 * where it was while the raw one moves. Losses are the same either way. */
TEST(attr_center_unembed) {
    al_model m;
    rand_model(&m, 2, 0, 13);
    al_err e;
    al_pairs t;
    task(&t, &m, RR, 6, &e);
    const int C = m.cfg.d_model, V = m.cfg.d_vocab;
    al_attr_opts o = al_attr_opts_defaults();
    al_attr_result raw, cen, raw2, cen2;
    CHECK_OK(al_attribute_run(&m, &t, &o, &raw, &e), &e);
    o.center_unembed = 1;
    CHECK_OK(al_attribute_run(&m, &t, &o, &cen, &e), &e);
    float row[13];
    for (int i = 0; i < t.n_items; i++) {
        const al_pair_item *it = &t.items[i];
        CHECK(it->wrong < 0); /* the induction task's items are log-prob */
        model_row(&m, &t, it, row);
        double mean = 0;
        for (int v = 0; v < V; v++) mean += row[v];
        double ref = row[it->answer] - mean / V, sd = 0, st = 0;
        CHECK_NEAR(cen.item_metric[i], ref, 1e-4);
        for (int c = 0; c < cen.n_comp; c++) sd += cen.item_dla[(size_t)i * cen.n_comp + c];
        for (int k = 0; k < cen.n_terms; k++) st += cen.item_term[(size_t)i * cen.n_terms + k];
        CHECKF(rel(sd, ref, cen.item_dla + (size_t)i * cen.n_comp, cen.n_comp, 1) <= 1e-4,
               "item %d: components %g, centred logit %g", i, sd, ref);
        CHECKF(rel(st, ref, cen.item_term + (size_t)i * cen.n_terms, cen.n_terms, 1) <= 1e-4,
               "item %d: terms %g, centred logit %g", i, st, ref);
    }
    /* the losses do not depend on where logits are measured from */
    CHECK(!memcmp(raw.term_dloss, cen.term_dloss, sizeof(double) * raw.n_terms));
    CHECK(raw.loss == cen.loss);
    /* shift every logit: W_U[:, v] += w for all v */
    float *wu = m.p[AL_P_WU];
    for (int k = 0; k < C; k++) {
        float w = 0.5f * (float)((k * 7919) % 13 - 6);
        for (int v = 0; v < V; v++) wu[(size_t)k * V + v] += w;
    }
    CHECK_OK(al_attribute_run(&m, &t, &o, &cen2, &e), &e);
    o.center_unembed = 0;
    CHECK_OK(al_attribute_run(&m, &t, &o, &raw2, &e), &e);
    double moved = 0;
    for (int c = 0; c < cen.n_comp; c++) {
        CHECKF(fabs(cen2.dla[c] - cen.dla[c]) <= 1e-3 * (1 + fabs(cen.dla[c])),
               "component %d: centred %g before the shift, %g after", c, cen.dla[c], cen2.dla[c]);
        moved = fmax(moved, fabs(raw2.dla[c] - raw.dla[c]));
    }
    CHECKF(moved > 0.1, "the raw attribution moved by at most %g", moved);
    CHECK_NEAR(raw2.loss, raw.loss, 1e-4);
    al_attr_result_free(&raw2);
    o.center_unembed = 2;
    CHECK(al_attribute_run(&m, &t, &o, &raw2, &e) == -1 && strstr(e.msg, "center_unembed"));
    al_attr_result_free(&raw);
    al_attr_result_free(&cen);
    al_attr_result_free(&cen2);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* The logit lens's last layer is the forward's own mean item loss. */
TEST(attr_lens_final_is_model_loss) {
    for (int L = 1; L <= 2; L++) {
        al_model m;
        rand_model(&m, L, L == 2, 13);
        al_err e;
        al_pairs t;
        task(&t, &m, RR, 6, &e);
        al_attr_result r;
        al_attr_opts o = al_attr_opts_defaults();
        CHECK_OK(al_attribute_run(&m, &t, &o, &r, &e), &e);
        int *tg = malloc(sizeof(int) * t.N * t.T);
        for (int i = 0; i < t.N * t.T; i++) tg[i] = -1;
        for (int i = 0; i < t.n_items; i++)
            tg[t.items[i].pair * t.T + t.items[i].pos] = t.items[i].answer;
        CHECK_OK(al_model_forward(&m, t.clean, tg, t.N, t.T, &e), &e);
        CHECK(m.n_valid == t.n_items);
        CHECK_NEAR(r.lens_loss[L], m.mean_loss, 1e-5);
        CHECK(r.loss == r.lens_loss[L]);
        for (int l = 0; l <= L; l++) CHECK(r.lens_acc[l] >= 0 && r.lens_acc[l] <= 1);
        free(tg);
        al_attr_result_free(&r);
        al_pairs_free(&t);
        al_model_free(&m);
    }
}

enum { PR = 10 };

static void planted_run(al_model *m, al_pairs *t, al_attr_result *r) {
    al_err e;
    task(t, m, PR, 20, &e);
    al_attr_opts o = al_attr_opts_defaults();
    CHECK_OK(al_attribute_run(m, t, &o, r, &e), &e);
}

#define TERM_HEAD1(h) (1 + PH + (h))
#define TERM_VIRT(h0, h1) (1 + 2 * PH + (h0)*PH + (h1))

/* planted.h: 1.0 carries the correct logit (≈ GAMMA) at the repeated
 * positions, 0.1 and 1.1 nothing; no virtual head does anything (1.0's
 * value reads TOK, 0.0 writes PREV). The lens: x_0 is poor, x_2 right. */
TEST(attr_planted_induction) {
    al_model m;
    planted_model(&m);
    al_pairs t;
    al_attr_result r;
    planted_run(&m, &t, &r);
    const int c10 = 2 + PH, c01 = 3, c11 = 2 + PH + 1;
    CHECKF(r.dla[c10] > 0.9 * P_GAMMA && r.dla[c10] < 1.01 * P_GAMMA, "1.0: %g", r.dla[c10]);
    CHECK(fabs(r.dla[c01]) < 1e-6 && fabs(r.dla[c11]) < 1e-6);
    for (int p = PR + 1; p < 2 * PR; p++)
        CHECKF(r.dla_pos[(size_t)c10 * r.T + p] > 0.8 * P_GAMMA, "pos %d: %g", p,
               r.dla_pos[(size_t)c10 * r.T + p]);
    /* paths: 1.0's own embed+pos path is the induction; virtual terms 0 */
    CHECK(r.n_terms == 1 + 2 * PH + PH * PH);
    CHECK_NEAR(r.term_value[TERM_HEAD1(0)], r.dla[c10], 1e-4);
    CHECKF(r.term_dloss[TERM_HEAD1(0)] > 3, "Δloss of 1.0: %g", r.term_dloss[TERM_HEAD1(0)]);
    for (int h0 = 0; h0 < PH; h0++)
        for (int h1 = 0; h1 < PH; h1++) {
            CHECK(fabs(r.term_value[TERM_VIRT(h0, h1)]) < 1e-6);
            CHECK(fabs(r.term_dloss[TERM_VIRT(h0, h1)]) < 1e-5);
        }
    CHECK(fabs(r.term_value[1 + 1]) < 1e-6 && fabs(r.term_value[TERM_HEAD1(1)]) < 1e-6);
    CHECK(fabs(r.kind_dloss[AL_ATTR_VIRTUAL]) < 1e-5 && r.kind_dloss[AL_ATTR_HEAD] > 3);
    CHECKF(r.lens_loss[0] > r.lens_loss[2] + 3 && r.lens_acc[2] > 0.9, "lens loss %g %g %g acc %g",
           r.lens_loss[0], r.lens_loss[1], r.lens_loss[2], r.lens_acc[2]);
    char buf[32];
    CHECK(!strcmp(al_attr_term_name(2, PH, TERM_VIRT(0, 1), buf, sizeof buf), "0.0>1.1"));
    CHECK(!strcmp(al_attr_term_name(2, PH, TERM_HEAD1(2), buf, sizeof buf), "1.2"));
    CHECK(!strcmp(al_attr_term_name(2, PH, 0, buf, sizeof buf), "direct"));
    CHECK(!strcmp(al_attr_comp_name(2, PH, c11, buf, sizeof buf), "1.1"));
    CHECK(al_attr_term_kind_of(2, PH, TERM_VIRT(2, 2)) == AL_ATTR_VIRTUAL &&
          al_attr_term_kind_of(2, PH, TERM_HEAD1(0)) == AL_ATTR_HEAD &&
          al_attr_term_kind_of(2, PH, 0) == AL_ATTR_DIRECT);
    al_attr_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* A planted V-composition: 1.0's value reads PREV (what 0.0 writes)
 * instead of TOK. 1.0 then copies x[s−1] = the current token into OUT:
 * all of it through the virtual head 0.0 → 1.0 (GAMMA on the current
 * token's logit at a repeated position), nothing through 1.0's own
 * embed+pos path, and no other virtual head matters. */
TEST(attr_planted_v_composition) {
    al_model m;
    planted_model(&m);
    float *wv = al_head_wv(&m, 1, 0);
    for (int v = 0; v < PV; v++) {
        wv[(P_TOK + v) * PD + v] = 0;
        wv[(P_PREV + v) * PD + v] = 1;
    }
    al_pairs t;
    al_attr_result r;
    planted_run(&m, &t, &r);
    const int k = TERM_VIRT(0, 0);
    CHECKF(fabs(r.term_dloss[k]) > 1, "Δloss of 0.0>1.0: %g", r.term_dloss[k]);
    for (int h0 = 0; h0 < PH; h0++)
        for (int h1 = 0; h1 < PH; h1++) {
            if (h0 == 0 && h1 == 0) continue;
            CHECKF(fabs(r.term_dloss[TERM_VIRT(h0, h1)]) < 1e-3 * fabs(r.term_dloss[k]) &&
                       fabs(r.term_value[TERM_VIRT(h0, h1)]) < 1e-6,
                   "%d>%d: %g %g", h0, h1, r.term_dloss[TERM_VIRT(h0, h1)],
                   r.term_value[TERM_VIRT(h0, h1)]);
        }
    CHECK(fabs(r.term_value[TERM_HEAD1(0)]) < 1e-6);
    CHECK_NEAR(r.kind_dloss[AL_ATTR_VIRTUAL], r.term_dloss[k], 1e-4 * fabs(r.term_dloss[k]));
    /* at a repeated position: GAMMA on the current token, via 0.0>1.0 */
    const al_pair_item *it = &t.items[3];
    const int tok = t.clean[(size_t)it->pair * t.T + it->pos];
    float *pl = malloc(sizeof(float) * r.n_terms * PV);
    al_err e;
    CHECK_OK(al_attr_path_logits(&m, t.clean + (size_t)it->pair * t.T, t.T, it->pos, pl, &e), &e);
    CHECKF(fabs(pl[k * PV + tok] - P_GAMMA) < 0.05 * P_GAMMA, "virtual logit %g", pl[k * PV + tok]);
    CHECK(fabs(pl[TERM_HEAD1(0) * PV + tok]) < 1e-6);
    free(pl);
    al_attr_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* planted_model_deep(3, 2): previous-token head 0.0, induction head 2.0,
 * layer 1 idle. 2.0's value reads TOK, which only the embedding writes,
 * so the induction logit (GAMMA on the answer at each repeated position)
 * is in the term "2.0" (2.0 reading embed + pos); the virtual head
 * 0.0 > 2.0 is 0 (0.0 writes PREV, which 2.0's value ignores), and so is
 * every other virtual head and the remainder: no head's value reads
 * what another head writes. The lens: the answer appears only after
 * layer 2. With 2.0's value reading PREV instead, all of it moves to
 * the virtual head 0.0 > 2.0. */
TEST(attr_planted_deep) {
    for (int vcomp = 0; vcomp < 2; vcomp++) {
        al_model m;
        planted_model_deep(&m, 3, 2);
        if (vcomp) {
            float *wv = al_head_wv(&m, 2, 0);
            for (int v = 0; v < PV; v++) {
                wv[(P_TOK + v) * PD + v] = 0;
                wv[(P_PREV + v) * PD + v] = 1;
            }
        }
        al_pairs t;
        al_attr_result r;
        planted_run(&m, &t, &r);
        const int L = 3, nt = al_attr_n_terms(L, PH);
        const int k20 = 1 + 2 * PH, kv = al_attr_virtual_index(L, PH, 0, 2, 0);
        const int on = vcomp ? kv : k20, off = vcomp ? k20 : kv, c20 = 2 + 2 * PH;
        CHECK(r.n_terms == nt && nt == 1 + 3 * PH + PH * PH * 3 + 1);
        char buf[32];
        CHECK(!strcmp(al_attr_term_name(L, PH, kv, buf, sizeof buf), "0.0>2.0"));
        /* the term holds all of 2.0's contribution */
        CHECKF(fabs(r.term_value[on] - r.dla[c20]) < 1e-4, "vcomp %d: term %g, DLA of 2.0 %g",
               vcomp, r.term_value[on], r.dla[c20]);
        if (!vcomp) {
            CHECKF(r.dla[c20] > 0.9 * P_GAMMA && r.dla[c20] < 1.01 * P_GAMMA, "2.0: %g",
                   r.dla[c20]);
            CHECKF(r.term_dloss[on] > 3, "Δloss of 2.0: %g", r.term_dloss[on]);
            CHECKF(r.lens_loss[2] > r.lens_loss[3] + 3 && r.lens_acc[3] > 0.9,
                   "lens loss %g %g %g %g acc %g", r.lens_loss[0], r.lens_loss[1], r.lens_loss[2],
                   r.lens_loss[3], r.lens_acc[3]);
        } else /* copying x[s−1] = the current token: a large loss change either way */
            CHECKF(fabs(r.term_dloss[on]) > 1, "Δloss of 0.0>2.0: %g", r.term_dloss[on]);
        CHECK(fabs(r.term_value[off]) < 1e-6 && fabs(r.term_dloss[off]) < 1e-5);
        /* every other virtual head and the remainder: 0 */
        double worst = 0;
        for (int k = 1 + L * PH; k < nt; k++)
            if (k != kv) worst = fmax(worst, fabs(r.term_value[k]) + fabs(r.term_dloss[k]));
        CHECKF(worst < 1e-5, "vcomp %d: a virtual term of %g", vcomp, worst);
        CHECK(fabs(r.term_value[nt - 1]) < 1e-6);
        /* the idle layer: nothing through 1.0 or 1.1 */
        CHECK(fabs(r.term_value[1 + PH]) < 1e-6 && fabs(r.term_value[1 + PH + 1]) < 1e-6);
        /* at the second occurrence: GAMMA in that one term, on the answer
         * (the V-composition: on the current token, x[s−1] of the
         * attended s) */
        const al_pair_item *it = &t.items[3];
        const int want = vcomp ? t.clean[(size_t)it->pair * t.T + it->pos] : it->answer;
        float *pl = malloc(sizeof(float) * nt * PV);
        al_err e;
        CHECK_OK(al_attr_path_logits(&m, t.clean + (size_t)it->pair * t.T, t.T, it->pos, pl, &e),
                 &e);
        CHECKF(fabs(pl[on * PV + want] - P_GAMMA) < 0.05 * P_GAMMA, "vcomp %d: term logit %g",
               vcomp, pl[on * PV + want]);
        CHECK(fabs(pl[off * PV + want]) < 1e-6);
        float most = 0;
        for (int v = 0; v < PV; v++) most = fmaxf(most, fabsf(pl[(nt - 1) * PV + v]));
        CHECKF(most < 1e-6, "the remainder's logits reach %g", most);
        free(pl);
        al_attr_result_free(&r);
        al_pairs_free(&t);
        al_model_free(&m);
    }
}

/* Refused: batch 0, bad paths flag, an item outside its pair; one line,
 * result zeroed. A 3-layer model's paths are not refused. */
TEST(attr_bad_options) {
    al_model m2, m3;
    rand_model(&m2, 2, 0, 13);
    rand_model(&m3, 3, 0, 13);
    al_err e;
    al_pairs t;
    task(&t, &m2, RR, 3, &e);
    al_attr_result r, zero;
    memset(&zero, 0, sizeof zero);
    struct {
        al_model *m;
        int batch, paths;
        const char *want;
    } bad[] = {{&m2, 0, 1, "batch"},
               {&m2, 100001, 1, "batch"},
               {&m3, 8, 2, "paths"},
               {&m2, 8, 2, "paths"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        al_attr_opts o = al_attr_opts_defaults();
        o.batch = bad[i].batch, o.paths = bad[i].paths;
        memset(&r, 0xab, sizeof r);
        CHECKF(al_attribute_run(bad[i].m, &t, &o, &r, &e) == -1, "case %zu", i);
        CHECKF(strstr(e.msg, bad[i].want) && !strchr(e.msg, '\n'), "case %zu: %s", i, e.msg);
        CHECK(!memcmp(&r, &zero, sizeof r));
    }
    al_attr_opts o = al_attr_opts_defaults();
    volatile sig_atomic_t stop = 1; /* Ctrl-C: stops before the next batch */
    o.stop = &stop;
    memset(&r, 0xab, sizeof r);
    CHECK(al_attribute_run(&m2, &t, &o, &r, &e) == -1 && !strcmp(e.msg, "interrupted"));
    CHECK(!memcmp(&r, &zero, sizeof r));
    o.stop = NULL;
    t.items[0].pos = t.T;
    memset(&r, 0xab, sizeof r);
    CHECK(al_attribute_run(&m2, &t, &o, &r, &e) == -1 && strstr(e.msg, "position"));
    CHECK(!memcmp(&r, &zero, sizeof r));
    float out[38 * 13];
    CHECK_OK(al_attr_path_logits(&m3, t.clean, t.T, 0, out, &e), &e);
    CHECK(al_attr_path_logits(&m2, t.clean, t.T, t.T, out, &e) == -1);
    al_pairs_free(&t);
    al_model_free(&m2);
    al_model_free(&m3);
}
