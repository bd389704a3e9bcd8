/* test_ablate.c -- ablation and pruning on the hand-built induction
 * circuit (planted.h) and on small random models, checked against losses
 * computed here by hand; mask files; the ablate and prune commands end
 * to end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/ablate.h"
#include "attnlab/data.h"
#include "attnlab/scores.h"
#include "planted.h"
#include "test.h"

enum { NR = 10, NT = 2 * NR + 1, ROWS = 32 };

/* A text-like set (repeated random spans, copy positions marked) and the
 * probe, both prepared on the planted model. */
static void planted_sets(al_model *m, al_abl_set *text, al_abl_set *probe, al_probe *p) {
    static int in[ROWS * NT], tg[ROWS * NT];
    static unsigned char sel[ROWS * NT], cp[ROWS * NT];
    al_err e;
    repeated_batch(ROWS, NR, 77, in, tg);
    CHECK_OK(al_copy_positions(in, tg, ROWS, NT, PV, cp, &e), &e);
    for (int i = 0; i < ROWS * NT; i++)
        sel[i] = (unsigned char)((tg[i] >= 0 ? AL_SEL_LOSS : 0) | (cp[i] ? AL_SEL_COPY : 0));
    CHECK_OK(al_abl_set_from(text, in, tg, sel, ROWS, NT, 8, &e), &e);
    CHECK_OK(al_probe_make(p, NR, 32, 5, PV, 0, NULL, &e), &e);
    CHECK_OK(al_abl_set_probe(probe, p, 16, &e), &e);
    CHECK_OK(al_abl_prepare(m, text, &e), &e);
    CHECK_OK(al_abl_prepare(m, probe, &e), &e);
}

/* Singles (6) then the 3x3 cross-layer pairs, as `ablate --pairs`. */
static int singles_and_pairs(unsigned char *sets, int *a, int *b) {
    int LH = 2 * PH, n = 0;
    memset(sets, 0, 15 * LH);
    for (int i = 0; i < LH; i++) sets[n * LH + i] = 1, a[n] = i, b[n++] = -1;
    for (int i = 0; i < PH; i++)
        for (int j = PH; j < LH; j++) sets[n * LH + i] = sets[n * LH + j] = 1, a[n] = i, b[n++] = j;
    return n;
}

TEST(ablate_planted_circuit_and_pair_interaction) {
    al_model m;
    planted_model(&m);
    al_abl_set text, probe;
    al_probe p;
    planted_sets(&m, &text, &probe, &p);
    al_err e;
    CHECKF(probe.clean_mean[2] < 0.2, "clean probe loss %g", probe.clean_mean[2]);
    /* copy positions include unpredictable ones (position R: x[R+1] = x[1]) */
    CHECKF(text.clean_mean[1] < 1.0, "clean copy-position loss %g", text.clean_mean[1]);
    unsigned char sets[15 * 2 * PH];
    int a[15], b[15];
    int n = singles_and_pairs(sets, a, b);
    for (int method = AL_ABL_ZERO; method <= AL_ABL_RESAMPLE; method++) {
        al_abl_metrics r[15];
        /* pairs for zero and mean; resample (the costliest) on the key pair only */
        int nm = method == AL_ABL_RESAMPLE ? 2 * PH + 1 : n;
        CHECK_OK(al_abl_evaluate(&m, &text, &probe, method, sets, nm, r, NULL, NULL, 0, &e), &e);
        const char *mn = al_abl_method_name(method);
        /* either head of the circuit destroys the second-repeat prediction */
        CHECKF(r[0].delta_probe > 2 && r[PH].delta_probe > 2, "%s: Δprobe 0.0 %g, 1.0 %g", mn,
               r[0].delta_probe, r[PH].delta_probe);
        CHECKF(r[0].delta_copy > 1 && r[PH].delta_copy > 1, "%s: Δcopy 0.0 %g, 1.0 %g", mn,
               r[0].delta_copy, r[PH].delta_copy);
        /* the others barely matter (0.2/1.2 shift one logit by 1 under zero) */
        for (int i = 0; i < 2 * PH; i++)
            if (i % PH)
                CHECKF(fabs(r[i].delta_probe) < 0.05 && fabs(r[i].delta_loss) < 0.05,
                       "%s: head %d.%d Δ %g / %g", mn, i / PH, i % PH, r[i].delta_probe,
                       r[i].delta_loss);
        /* the pair 0.0+1.0 has the largest |interaction|, on every metric */
        double best[3] = {0}, inter01[3] = {0};
        for (int k = 2 * PH; k < nm; k++) {
            double v[3] = {r[k].delta_loss - r[a[k]].delta_loss - r[b[k]].delta_loss,
                           r[k].delta_copy - r[a[k]].delta_copy - r[b[k]].delta_copy,
                           r[k].delta_probe - r[a[k]].delta_probe - r[b[k]].delta_probe};
            for (int g = 0; g < 3; g++) {
                if (a[k] == 0 && b[k] == PH)
                    inter01[g] = v[g];
                else if (fabs(v[g]) > best[g])
                    best[g] = fabs(v[g]);
            }
        }
        for (int g = 0; g < 3; g++)
            CHECKF(fabs(inter01[g]) > 1 && (nm < n || fabs(inter01[g]) > 10 * best[g]),
                   "%s metric %d: interaction of 0.0+1.0 %g, next largest %g", mn, g, inter01[g],
                   best[g]);
    }
    al_abl_set_free(&text);
    al_abl_set_free(&probe);
    al_probe_free(&p);
    al_model_free(&m);
}

/* Cross-entropy of the direct path (W_E[x] + W_pos[t]) W_U, by hand. */
static double direct_path_loss(const al_model *m, const al_abl_set *s) {
    int C = m->cfg.d_model, V = m->cfg.d_vocab, T = s->T;
    double total = 0;
    long n = 0;
    for (int i = 0; i < s->rows * T; i++) {
        if (s->targets[i] < 0) continue;
        int t = i % T, x = s->inputs[i];
        double lg[PV], mx = -1e300, z = 0;
        for (int v = 0; v < V; v++) {
            double acc = 0;
            for (int k = 0; k < C; k++)
                acc += ((double)m->p[AL_P_WE][x * C + k] + m->p[AL_P_WPOS][t * C + k]) *
                       m->p[AL_P_WU][k * V + v];
            lg[v] = acc;
            if (acc > mx) mx = acc;
        }
        for (int v = 0; v < V; v++) z += exp(lg[v] - mx);
        total += log(z) + mx - lg[s->targets[i]];
        n++;
    }
    return total / n;
}

TEST(ablate_zero_all_is_direct_path) {
    al_model m;
    planted_model(&m);
    al_abl_set text, probe;
    al_probe p;
    planted_sets(&m, &text, &probe, &p);
    unsigned char all[2 * PH];
    memset(all, 1, sizeof all);
    al_abl_out o;
    al_err e;
    double clean = text.clean_mean[0];
    CHECK_OK(al_abl_run(&m, &text, AL_ABL_ZERO, all, 1, &o, NULL, 0, &e), &e);
    double want = direct_path_loss(&m, &text);
    CHECK_NEAR(o.loss[0], want, 1e-4);
    CHECK_NEAR(o.delta[0], want - text.clean_mean[0], 1e-4);
    CHECKF(want > 3, "direct path loss %g should be far above the clean %g", want,
           text.clean_mean[0]);
    /* gates were restored: a clean pass gives the clean loss again */
    CHECK_OK(al_abl_prepare(&m, &text, &e), &e);
    CHECK_NEAR(text.clean_mean[0], clean, 0);
    for (int i = 0; i < 2 * PH; i++) CHECK(m.gates[i] == 1.0f && m.hooks.n == 0);
    al_abl_set_free(&text);
    al_abl_set_free(&probe);
    al_probe_free(&p);
    al_model_free(&m);
}

TEST(ablate_mean_of_constant_head_changes_nothing) {
    al_model m;
    planted_model(&m);
    al_abl_set text, probe;
    al_probe p;
    planted_sets(&m, &text, &probe, &p);
    unsigned char sets[3 * 2 * PH] = {0};
    sets[2] = 1; /* 0.2 */
    sets[2 * PH + PH + 2] = 1; /* 1.2 */
    sets[4 * PH + 2] = sets[4 * PH + PH + 2] = 1;
    al_err e;
    for (int method = AL_ABL_ZERO; method <= AL_ABL_RESAMPLE; method++) {
        al_abl_out o[3];
        CHECK_OK(al_abl_run(&m, &text, method, sets, 3, o, NULL, 0, &e), &e);
        for (int k = 0; k < 3; k++) {
            if (method == AL_ABL_ZERO) /* removing the +1 logit does change the loss */
                CHECKF(fabs(o[k].delta[0]) > 1e-3, "zero: set %d Δ %g", k, o[k].delta[0]);
            else
                CHECKF(fabs(o[k].delta[0]) < 1e-6 && fabs(o[k].delta[1]) < 1e-6,
                       "%s: set %d Δ %g %g", al_abl_method_name(method), k, o[k].delta[0],
                       o[k].delta[1]);
        }
    }
    al_abl_set_free(&text);
    al_abl_set_free(&probe);
    al_probe_free(&p);
    al_model_free(&m);
}

/* ------------------------------------- methods against a hand computation */

static void random_model(al_model *m, int L, uint64_t seed) {
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = 16, c.n_heads = 2, c.d_head = 8, c.n_ctx = 8, c.d_vocab = 11;
    c.seed = seed;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
    /* a louder unembedding than the init's so that heads matter */
    for (size_t i = 0; i < m->param_size[AL_P_WU]; i++) m->p[AL_P_WU][i] *= 16;
}

/* 1-layer model: loss with head 0's z replaced by zrep (rows,T,D), by hand
 * from the clean z of the other head. */
static double loss_with_z(const al_model *m, const int *in, const int *tg, int rows, int T,
                          const float *zall /* (rows,T,H,D) */, const float *zrep) {
    int C = m->cfg.d_model, V = m->cfg.d_vocab, H = m->cfg.n_heads, D = m->cfg.d_head;
    double total = 0;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)r * T + t;
            double x[16], lg[11], mx = -1e300, z = 0;
            for (int k = 0; k < C; k++)
                x[k] = (double)m->p[AL_P_WE][in[i] * C + k] + m->p[AL_P_WPOS][t * C + k];
            for (int h = 0; h < H; h++) {
                const float *zh = h == 0 ? zrep + i * D : zall + (i * H + h) * D;
                const float *wo = al_head_wo(m, 0, h);
                for (int d = 0; d < D; d++)
                    for (int k = 0; k < C; k++) x[k] += (double)zh[d] * wo[d * C + k];
            }
            for (int v = 0; v < V; v++) {
                lg[v] = 0;
                for (int k = 0; k < C; k++) lg[v] += x[k] * m->p[AL_P_WU][k * V + v];
                if (lg[v] > mx) mx = lg[v];
            }
            for (int v = 0; v < V; v++) z += exp(lg[v] - mx);
            total += log(z) + mx - lg[tg[i]];
        }
    return total / (rows * T);
}

TEST(ablate_methods_match_hand_computation) {
    enum { R = 6, T = 8, H = 2, D = 8, B = 3 };
    al_model m;
    random_model(&m, 1, 3);
    int in[R * T], tg[R * T];
    al_rng r;
    al_rng_seed(&r, 8);
    for (int i = 0; i < R * T; i++)
        in[i] = (int)al_rng_below(&r, 11), tg[i] = (int)al_rng_below(&r, 11);
    al_err e;
    /* clean z of every row, from one forward over all rows */
    static float zall[R * T * H * D], zrep[R * T * D];
    CHECK_OK(al_model_forward(&m, in, tg, R, T, &e), &e);
    memcpy(zall, m.z, sizeof zall);
    al_abl_set s;
    CHECK_OK(al_abl_set_from(&s, in, tg, NULL, R, T, B, &e), &e);
    CHECK_OK(al_abl_prepare(&m, &s, &e), &e);
    unsigned char set[H] = {1, 0};
    al_abl_out o;
    /* mean: per position over all rows */
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++) {
            double acc = 0;
            for (int q = 0; q < R; q++) acc += zall[((q * T + t) * H) * D + d];
            for (int q = 0; q < R; q++) zrep[(q * T + t) * D + d] = (float)(acc / R);
        }
    CHECK_OK(al_abl_run(&m, &s, AL_ABL_MEAN, set, 1, &o, NULL, 0, &e), &e);
    CHECK_NEAR(o.loss[0], loss_with_z(&m, in, tg, R, T, zall, zrep), 1e-5);
    /* resample: row b of each batch of 3 takes row (b+1) mod 3 of that batch */
    for (int q = 0; q < R; q++) {
        int src = q / B * B + (q % B + 1) % B;
        for (int t = 0; t < T; t++)
            memcpy(zrep + (q * T + t) * D, zall + ((src * T + t) * H) * D, sizeof(float) * D);
    }
    CHECK_OK(al_abl_run(&m, &s, AL_ABL_RESAMPLE, set, 1, &o, NULL, 0, &e), &e);
    CHECK_NEAR(o.loss[0], loss_with_z(&m, in, tg, R, T, zall, zrep), 1e-5);
    /* zero */
    memset(zrep, 0, sizeof zrep);
    CHECK_OK(al_abl_run(&m, &s, AL_ABL_ZERO, set, 1, &o, NULL, 0, &e), &e);
    CHECK_NEAR(o.loss[0], loss_with_z(&m, in, tg, R, T, zall, zrep), 1e-5);
    /* and the clean loss by hand */
    for (int q = 0; q < R * T; q++) memcpy(zrep + q * D, zall + q * H * D, sizeof(float) * D);
    CHECK_NEAR(s.clean_mean[0], loss_with_z(&m, in, tg, R, T, zall, zrep), 1e-5);
    CHECK_NEAR(o.delta[0], o.loss[0] - s.clean_mean[0], 1e-6);
    /* resample needs batches of two rows or more */
    al_abl_set s1;
    CHECK_OK(al_abl_set_from(&s1, in, tg, NULL, R, T, 1, &e), &e);
    CHECK_OK(al_abl_prepare(&m, &s1, &e), &e);
    CHECK(al_abl_run(&m, &s1, AL_ABL_RESAMPLE, set, 1, &o, NULL, 0, &e) == -1);
    al_abl_set_free(&s1);
    al_abl_set_free(&s);
    al_model_free(&m);
}

/* ------------------------------------------------------- head lists, masks */

TEST(ablate_heads_and_mask_files) {
    unsigned char sel[16], off[16];
    char buf[128];
    al_err e;
    CHECK_OK(al_heads_parse("0.3,1.7,1.0", 2, 8, sel, &e), &e);
    CHECK(al_heads_format(sel, 2, 8, 1, buf, sizeof buf) == 11 && strcmp(buf, "0.3,1.0,1.7") == 0);
    CHECK(al_heads_format(sel, 2, 8, 0, buf, 8) == 51 && strcmp(buf, "0.0,0.1") == 0);
    const char *bad[] = {"", "0.8", "2.0", "0.1,0.1", "0.1,", "a.1", "0,1", "0.1;0.2", "-1.0"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECKF(al_heads_parse(bad[i], 2, 8, sel, &e) == -1, "accepted '%s'", bad[i]);
    al_config c = al_config_default();
    c.d_vocab = 10;
    memset(off, 0, sizeof off);
    off[3] = off[12] = 1;
    al_mask_info info = {"random", 0.1, 2.5, 2.6, 7, 1};
    CHECK_OK(al_mask_save(t_path("m.json"), &c, off, &info, &e), &e);
    memset(sel, 9, sizeof sel);
    CHECK_OK(al_mask_load(t_path("m.json"), &c, sel, &e), &e);
    CHECK(memcmp(sel, off, sizeof off) == 0);
    char *txt = t_slurp(t_path("m.json"));
    CHECKF(txt && strstr(txt, "\"1.4\"") && strstr(txt, "\"heads_left\":\t14"), "%s",
           txt ? txt : "");
    free(txt);
    /* every way a file can be wrong is refused with a message naming it */
    const char *files[][2] = {
        {"not json", "invalid JSON"},
        {"[1]", "object"},
        {"{\"n_layers\": 2, \"n_heads\": 8}", "needs"},
        {"{\"n_layers\": 1, \"n_heads\": 8, \"off\": []}", "model has 2 x 8"},
        {"{\"n_layers\": 2, \"n_heads\": 8, \"off\": [\"0.8\"]}", "not in the model"},
        {"{\"n_layers\": 2, \"n_heads\": 8, \"off\": [\"0.1\", \"0.1\"]}", "twice"},
        {"{\"n_layers\": 2, \"n_heads\": 8, \"off\": [\"0.1,0.2\"]}", "one head"},
        {"{\"n_layers\": 2, \"n_heads\": 8, \"off\": [3]}", "strings"},
        {"{\"n_layers\": 2, \"n_heads\": 8, \"off\": \"0.1\"}", "array"},
        {"{\"n_layers\": 2, \"n_heads\": 8, \"off\": [], \"of\": 1}", "unknown key \"of\""},
        {"{\"n_layers\": 2, \"n_heads\": 8, \"off\": [], \"loss\": \"x\"}", "number"},
        {"{\"attnlab_mask\": 2, \"n_layers\": 2, \"n_heads\": 8, \"off\": []}", "must be 1"},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        FILE *f = fopen(t_path("bad.json"), "w");
        fputs(files[i][0], f);
        fclose(f);
        int rc = al_mask_load(t_path("bad.json"), &c, sel, &e);
        CHECKF(rc == -1 && strstr(e.msg, files[i][1]) && strstr(e.msg, "bad.json"), "%s -> %d %s",
               files[i][0], rc, e.msg);
    }
    CHECK(al_mask_load(t_path("missing.json"), &c, sel, &e) == -1);
    /* applying: gates 0 exactly where off */
    al_model m;
    c.n_layers = 2, c.d_model = 8, c.d_head = 2, c.n_ctx = 4;
    CHECK_OK(al_model_alloc(&m, &c, &e), &e);
    al_mask_apply(&m, off);
    for (int i = 0; i < 16; i++) CHECK(m.gates[i] == (off[i] ? 0.0f : 1.0f));
    al_model_free(&m);
}

/* ------------------------------------------------------------ pruning */

TEST(prune_ablation_keeps_circuit_until_null_heads_are_gone) {
    al_model m;
    planted_model(&m);
    al_abl_set text, probe;
    al_probe p;
    planted_sets(&m, &text, &probe, &p);
    al_abl_set est, eval;
    al_err e;
    CHECK_OK(al_abl_set_from(&est, text.inputs, text.targets, text.sel, 16, NT, 8, &e), &e);
    CHECK_OK(al_abl_set_from(&eval, text.inputs + 16 * NT, text.targets + 16 * NT,
                             text.sel + 16 * NT, 16, NT, 8, &e),
             &e);
    al_prune_result r;
    CHECK_OK(al_prune(&m, &est, &eval, AL_PRUNE_ABLATION, -1, 1, 0, &r, &e), &e);
    CHECK(r.n_steps == 2 * PH + 1 && !r.stopped_by_budget);
    int when[2 * PH] = {0};
    for (int k = 1; k < r.n_steps; k++) when[r.steps[k].layer * PH + r.steps[k].head] = k;
    /* the circuit's heads go last: after the null heads (0.1, 1.1) and the
     * constant ones (0.2, 1.2, which may even help a little) */
    CHECKF(when[PH] >= 5 && when[0] >= 5, "circuit removed at steps %d (1.0), %d (0.0)", when[PH],
           when[0]);
    for (int k = 1; k < r.n_steps; k++)
        if (r.steps[k].head == 1) CHECK(r.steps[k].importance == 0);
    CHECK(r.steps[0].layer == -1 && r.steps[0].heads_left == 2 * PH);
    CHECK_NEAR(r.steps[2 * PH].loss, direct_path_loss(&m, &eval), 1e-4);
    al_prune_result_free(&r);
    /* with a budget the circuit survives in the mask */
    CHECK_OK(al_prune(&m, &est, &eval, AL_PRUNE_ABLATION, 0.2, 1, 0, &r, &e), &e);
    CHECK(r.stopped_by_budget && r.steps[r.n_steps - 1].over_budget);
    CHECK(!r.off[0] && !r.off[PH] && r.off[1] && r.off[PH + 1]);
    CHECK(r.steps[r.n_steps - 2].loss <= 1.2 * r.base_loss &&
          r.steps[r.n_steps - 1].loss > 1.2 * r.base_loss);
    for (int i = 0; i < 2 * PH; i++) CHECK(m.gates[i] == 1.0f);
    al_prune_result_free(&r);
    al_abl_set_free(&est);
    al_abl_set_free(&eval);
    al_abl_set_free(&text);
    al_abl_set_free(&probe);
    al_probe_free(&p);
    al_model_free(&m);
}

static void removal_order(al_model *m, al_abl_set *est, al_abl_set *eval, uint64_t seed,
                          int *order) {
    al_prune_result r;
    al_err e;
    CHECK_OK(al_prune(m, est, eval, AL_PRUNE_RANDOM, -1, seed, 0, &r, &e), &e);
    CHECK(r.n_steps == 5);
    for (int k = 1; k < r.n_steps && k <= 4; k++)
        order[k - 1] = r.steps[k].layer * 2 + r.steps[k].head;
    al_prune_result_free(&r);
}

TEST(prune_random_is_reproducible) {
    al_model m;
    random_model(&m, 2, 4);
    int in[4 * 8], tg[4 * 8];
    for (int i = 0; i < 32; i++) in[i] = i % 11, tg[i] = (i * 7) % 11;
    al_abl_set s;
    al_err e;
    CHECK_OK(al_abl_set_from(&s, in, tg, NULL, 4, 8, 2, &e), &e);
    int a[4], b[4], c[4], d[4];
    removal_order(&m, &s, &s, 5, a);
    removal_order(&m, &s, &s, 5, b);
    removal_order(&m, &s, &s, 6, c);
    removal_order(&m, &s, &s, 7, d);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0 || memcmp(a, d, sizeof a) != 0);
    int seen[4] = {0};
    for (int i = 0; i < 4; i++) seen[a[i]]++;
    CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1 && seen[3] == 1);
    al_abl_set_free(&s);
    al_model_free(&m);
}

TEST(prune_gradient_importance_matches_finite_differences) {
    enum { R = 3, T = 8, LH = 4 };
    al_model m;
    random_model(&m, 2, 9);
    int in[R * T], tg[R * T];
    al_rng r;
    al_rng_seed(&r, 10);
    for (int i = 0; i < R * T; i++)
        in[i] = (int)al_rng_below(&r, 11), tg[i] = (int)al_rng_below(&r, 11);
    tg[5] = -1;
    al_abl_set s;
    al_err e;
    CHECK_OK(al_abl_set_from(&s, in, tg, NULL, R, T, 2, &e), &e);
    m.gates[2] = 0.5f; /* away from 1, to test the gate as a variable */
    double imp[LH], fd[LH] = {0};
    CHECK_OK(al_gate_importance(&m, &s, imp, &e), &e);
    const float eps = 1e-2f;
    for (int h = 0; h < LH; h++)
        for (int q = 0; q < R; q++) {
            float g = m.gates[h];
            m.gates[h] = g + eps;
            CHECK_OK(al_model_forward(&m, in + q * T, tg + q * T, 1, T, &e), &e);
            double lp = m.mean_loss;
            m.gates[h] = g - eps;
            CHECK_OK(al_model_forward(&m, in + q * T, tg + q * T, 1, T, &e), &e);
            double lm = m.mean_loss;
            m.gates[h] = g;
            fd[h] += fabs((lp - lm) / (2 * eps)) / R;
        }
    for (int h = 0; h < LH; h++) {
        CHECKF(fabs(imp[h] - fd[h]) <= 2e-3 + 1e-2 * fabs(fd[h]), "head %d: backward %g, fd %g", h,
               imp[h], fd[h]);
        CHECK(fd[h] > 1e-2);
    }
    /* ℓ2 normalisation per layer, over the heads still on */
    unsigned char off[LH] = {0, 0, 0, 1};
    double n[LH];
    memcpy(n, imp, sizeof n);
    al_importance_normalise(n, off, 2, 2);
    CHECK_NEAR(n[0] * n[0] + n[1] * n[1], 1, 1e-12);
    CHECK_NEAR(n[2], 1, 1e-12);
    CHECK_NEAR(n[0] / n[1], imp[0] / imp[1], 1e-12);
    al_abl_set_free(&s);
    al_model_free(&m);
}

/* ------------------------------------------------------------ the CLI */

static void write_tokens(const char *path, size_t n, uint64_t seed) {
    int *ids = malloc(sizeof(int) * n);
    al_rng r;
    al_rng_seed(&r, seed);
    for (size_t k = 0; k < n;) { /* random 6-letter spans, each twice */
        int span[6];
        for (int i = 0; i < 6; i++) span[i] = 'a' + (int)al_rng_below(&r, 26);
        for (int rep = 0; rep < 2; rep++)
            for (int i = 0; i < 6 && k < n; i++) ids[k++] = span[i];
        if (k < n) ids[k++] = ' ';
    }
    al_err e;
    CHECK_OK(al_tokens_save(path, ids, n, &e), &e);
    free(ids);
}

#define SMALL                                                                                      \
    "--d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 --eval-every 0 "                     \
    "--eval-batches 2 --threads 2 --warmup 2"
#define PROBE "--probe-r 10 --probe-n 8 --batches 2 --batch 4"

TEST(ablate_cli_end_to_end) {
    char dir[1024], db[1024], val[1024];
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    snprintf(val, sizeof val, "%s", t_path("val.bin"));
    write_tokens(t_path("train.bin"), 20000, 1);
    write_tokens(val, 3000, 2);
    CHECK(t_sh("%s train --data %s --out %s --steps 30 " SMALL " 2>/dev/null", t_bin(),
               t_path("train.bin"), dir) == 0);
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --each " PROBE " > %s 2>&1", t_bin(), dir,
               db, val, t_path("out.txt")) == 0);
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --pairs --method mean " PROBE " > %s 2>&1",
               t_bin(), dir, db, val, t_path("out2.txt")) == 0);
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --heads 0.1,1.2 --method resample " PROBE
               " > /dev/null 2>&1",
               t_bin(), dir, db, val) == 0);
    char *out = t_slurp(t_path("out2.txt"));
    CHECKF(out && strstr(out, "largest |interaction|") && strstr(out, "inter_probe") &&
               strstr(out, "± standard error over the sequences: 8 windows"),
           "%s", out ? out : "");
    free(out);
    /* the intervals: each configuration's three Δ, each pair's interaction,
     * keyed by the ablation row and carrying its value */
    CHECK_SQL(db,
              "SELECT i.metric, count(*), sum(i.n_items), count(i.se), count(i.ci_lo) FROM "
              "score_intervals i JOIN ablations a ON a.ablation_id = i.pos AND a.run_id = "
              "i.run_id WHERE i.run_id = 2 AND i.value IS (CASE i.metric WHEN 'delta_loss' "
              "THEN a.delta_loss WHEN 'delta_loss_copy' THEN a.delta_loss_copy WHEN "
              "'delta_loss_probe' THEN a.delta_loss_probe ELSE a.interaction END) AND "
              "(a.kind = 'pair' OR (i.layer || '.' || i.head) = a.heads) GROUP BY 1 ORDER BY 1",
              "delta_loss|24|192|24|24\ndelta_loss_copy|24|192|24|24\n"
              "delta_loss_probe|24|192|24|24\ninteraction|16|128|16|16");
    CHECK_SQL(db, "SELECT run_id, kind, status FROM runs",
              "1|ablate|done\n2|ablate|done\n3|ablate|done");
    CHECK_SQL(db, "SELECT run_id, method, kind, count(*) FROM ablations GROUP BY 1, 2, 3",
              "1|zero|none|1\n1|zero|single|8\n2|mean|none|1\n2|mean|pair|16\n2|mean|single|8\n"
              "3|resample|none|1\n3|resample|set|1");
    CHECK_SQL(db, "SELECT heads, n_heads FROM ablations WHERE run_id = 3 AND kind = 'set'",
              "0.1,1.2|2");
    /* every row: delta = loss - clean loss; interaction = Δpair - Δh1 - Δh2 */
    CHECK_SQL(db,
              "SELECT count(*) FROM ablations a JOIN ablations n ON n.run_id = a.run_id AND "
              "n.kind = 'none' WHERE abs(a.loss - n.loss - a.delta_loss) < 1e-6",
              "36");
    CHECK_SQL(db,
              "SELECT count(*) FROM ablations p JOIN ablations s1 ON s1.run_id = p.run_id "
              "AND s1.kind = 'single' JOIN ablations s2 ON s2.run_id = p.run_id AND "
              "s2.kind = 'single' WHERE p.kind = 'pair' AND p.heads = s1.heads || ',' || "
              "s2.heads AND abs(p.interaction - (p.delta_loss - s1.delta_loss - "
              "s2.delta_loss)) < 1e-9 AND s1.heads LIKE '0.%' AND s2.heads LIKE '1.%'",
              "16");
    CHECK_SQL(db,
              "SELECT count(*) FROM ablations WHERE kind != 'none' AND (delta_loss_copy IS NULL "
              "OR delta_loss_probe IS NULL)",
              "0");
    /* prune: every step recorded, the mask usable by run, scores, ablate */
    CHECK(t_sh("%s prune --model %s --db %s --data %s --method ablation --budget -1 --batches 2 "
               "--batch 4 > %s 2>&1",
               t_bin(), dir, db, val, t_path("p.txt")) == 0);
    CHECK_SQL(db,
              "SELECT count(*), min(step), max(step), min(heads_left) FROM pruning_steps "
              "WHERE run_id = 4",
              "9|0|8|0");
    CHECK_SQL(db,
              "SELECT count(*) FROM pruning_steps WHERE run_id = 4 AND step > 0 AND "
              "(layer IS NULL OR importance IS NULL)",
              "0");
    CHECK(t_sh("%s prune --model %s --db %s --data %s --method gradient --budget 0.02 "
               "--batches 2 --batch 4 > %s 2>&1",
               t_bin(), dir, db, val, t_path("p.txt")) == 0);
    CHECK_SQL(db,
              "SELECT layer, round(sum(value * value), 9) FROM head_scores WHERE run_id = 5 "
              "AND metric = 'gradient_importance' GROUP BY layer",
              "0|1.0\n1|1.0");
    CHECK(t_sh("%s prune --model %s --db %s --data %s --method random --seed 3 --budget -1 "
               "--batches 2 --batch 4 --out %s > /dev/null 2>&1",
               t_bin(), dir, db, val, t_path("r1.json")) == 0);
    CHECK(t_sh("%s prune --model %s --db %s --data %s --method random --seed 3 --budget -1 "
               "--batches 2 --batch 4 --out %s > /dev/null 2>&1",
               t_bin(), dir, db, val, t_path("r2.json")) == 0);
    CHECK_SQL(db,
              "SELECT count(*) FROM pruning_steps a JOIN pruning_steps b ON a.step = b.step "
              "WHERE a.run_id = 6 AND b.run_id = 7 AND a.layer = b.layer AND a.head = b.head",
              "8");
    /* the gradient mask: exactly the heads of the last step within budget */
    char mask[1200];
    snprintf(mask, sizeof mask, "%s/mask-gradient.json", dir);
    al_config c = al_config_default();
    c.n_heads = 4;
    unsigned char off[8];
    al_err e;
    CHECK_OK(al_mask_load(mask, &c, off, &e), &e);
    int n_off = 0;
    for (int i = 0; i < 8; i++) n_off += off[i];
    char want[64];
    snprintf(want, sizeof want, "%d", n_off);
    CHECK_SQL(db,
              "SELECT count(*) FROM pruning_steps WHERE run_id = 5 AND step > 0 AND "
              "loss <= 1.02 * (SELECT loss FROM pruning_steps WHERE run_id = 5 AND step = 0)",
              want);
    CHECK(t_sh("%s run --model %s --prompt 'abcabc' --mask %s > %s 2>&1", t_bin(), dir,
               t_path("r1.json"), t_path("run.txt")) == 0);
    CHECK(t_sh("%s run --model %s --prompt 'abcabc' > %s 2>&1", t_bin(), dir, t_path("run0.txt")) ==
          0);
    CHECK(t_sh("cmp -s %s %s", t_path("run.txt"), t_path("run0.txt")) != 0); /* all heads off */
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --each --mask %s " PROBE " > /dev/null 2>&1",
               t_bin(), dir, db, val, mask) == 0);
    snprintf(want, sizeof want, "%d", 8 - n_off);
    CHECK_SQL(db, "SELECT count(*) FROM ablations WHERE run_id = 8 AND kind = 'single'", want);
    /* errors: usage (2) and bad input (1), no run left behind */
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --each --pairs 2>/dev/null", t_bin(), dir,
               db, val) == 2);
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --method half 2>/dev/null", t_bin(), dir, db,
               val) == 2);
    CHECK(t_sh("%s prune --model %s --db %s --data %s 2>/dev/null", t_bin(), dir, db, val) == 2);
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --heads 0.9 2>/dev/null", t_bin(), dir, db,
               val) == 1);
    CHECK(t_sh("%s run --model %s --prompt x --mask %s 2>/dev/null", t_bin(), dir, val) == 1);
    CHECK(t_sh("%s prune --model %s --db %s --data %s --method random 2>/dev/null", t_bin(), dir,
               db, t_path("nope.bin")) == 1);
    /* a bad --heads and a missing token file are refused before a run row exists */
    CHECK_SQL(db, "SELECT count(*), sum(status = 'done') FROM runs", "8|8");
    CHECK_SQL(db, "PRAGMA integrity_check", "ok");
}

/* A model trained on 16-token sequences of an n_ctx 32 context is
 * evaluated on 16-token windows (positions 16..31 never trained), with a
 * note, and a probe longer than 16 tokens is warned about. */
TEST(ablate_uses_trained_sequence_length) {
    char dir[1024], db[1024], val[1024];
    snprintf(dir, sizeof dir, "%s", t_path("model"));
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    snprintf(val, sizeof val, "%s", t_path("val.bin"));
    write_tokens(t_path("train.bin"), 8000, 1);
    write_tokens(val, 2000, 2);
    CHECK(t_sh("%s train --data %s --out %s --steps 5 --seq-len 16 " SMALL " 2>/dev/null", t_bin(),
               t_path("train.bin"), dir) == 0);
    CHECK(t_sh("%s ablate --model %s --db %s --data %s --each " PROBE " > %s 2> %s", t_bin(), dir,
               db, val, t_path("out.txt"), t_path("err.txt")) == 0);
    char *out = t_slurp(t_path("out.txt")), *err = t_slurp(t_path("err.txt"));
    CHECKF(out && strstr(out, "windows of 16,"), "%s", out ? out : "");
    CHECKF(
        err &&
            strstr(err,
                   "trained on 16-token sequences (n_ctx 32); validation windows are 16 tokens") &&
            strstr(err, "the probe is 21 tokens"),
        "%s", err ? err : "");
    free(out);
    free(err);
    /* a probe within the trained length: no warning of it */
    CHECK(t_sh("%s scores --model %s --db %s --probe-r 6 --probe-n 4 > /dev/null 2> %s", t_bin(),
               dir, db, t_path("err2.txt")) == 0);
    err = t_slurp(t_path("err2.txt"));
    CHECKF(err && !strstr(err, "the probe is"), "%s", err ? err : "");
    free(err);
}
