/* test_sae_cli.c -- `attnlab sae train` and `attnlab sae features`, and the
 * features analysis (sae_features.h): a hand-set SAE on the planted
 * induction model's layer-1 z whose features are known one-hot directions
 * (so density, activations, head attribution, logit effects and the
 * induction index are recomputed here from plain forwards, without the
 * SAE code), the stored rows equal to the --json numbers, the evaluation
 * recomputed from the saved weights through the forward's own z cache, and
 * bad input refused with one line and no run. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attnlab/checkpoint.h"
#include "attnlab/data.h"
#include "attnlab/sae.h"
#include "attnlab/sae_features.h"
#include "attnlab/sae_io.h"
#include "attnlab/scores.h"
#include "attnlab/hooks.h"
#include "planted.h"
#include "randmodel.h"
#include "saefix.h"
#include "test.h"

/* The hand-set SAE, its token file and its constants are saefix.h's
 * (shared with the picture and report tests). */
enum { SD = SAE_D, SF = SAE_F, ST = SAE_T, SW = SAE_W };
#define THR SAE_THR
#define planted_sae saefix_sae
#define planted_ids saefix_ids
#define planted_files saefix_files

/* Layer 1's z of head h, dimension k at (b, t) of the last forward of B
 * rows of T (the forward's own cache, m->z: (L, B, T, H, D)). */
static float zc(const al_model *m, int B, int T, int b, int t, int h, int k) {
    return m->z[(((size_t)1 * B + b) * T + t) * SD + (size_t)h * PD + k];
}

TEST(sae_features_planted) {
    al_model m;
    al_err e;
    planted_model(&m);
    al_sae s;
    al_sae_meta meta;
    planted_sae(&s, &meta, NULL);
    size_t n;
    int *ids = planted_ids(&n);
    al_tokens d = {0};
    d.tok = malloc(n * sizeof *d.tok);
    CHECK(d.tok != NULL);
    for (size_t i = 0; i < n; i++) {
        d.tok[i] = (uint16_t)ids[i];
        if (ids[i] > d.max_id) d.max_id = ids[i];
    }
    d.n = n;
    al_sae_feat_opts o = al_sae_feat_opts_defaults();
    o.windows = SW;
    al_sae_feat_result r;
    CHECK_OK(al_sae_features_run(&m, &s, &meta, &d, ST, &o, &r, &e), &e);
    CHECK(r.d_sae == SF && r.layer == 1 && r.H == PH && r.positions == SW * ST);
    CHECK(r.probe_r == 15 && r.probe_n == 1024);

    /* the text pass again, from plain forwards of the same windows */
    long fired[2] = {0, 0};
    double sum[2] = {0, 0}, mx[2] = {0, 0};
    static float act[SW][ST][2];
    int in[2 * ST];
    for (int w = 0; w < SW; w++) {
        CHECK_OK(al_batch_fixed(&d, 1, ST, w, SW, in, in + ST, &e), &e);
        CHECK_OK(al_model_forward(&m, in, NULL, 1, ST, &e), &e);
        for (int t = 0; t < ST; t++)
            for (int f = 0; f < 2; f++) {
                float a = zc(&m, 1, ST, 0, t, 0, f ? 9 : 3) + (-THR);
                act[w][t][f] = a;
                if (a > 0) fired[f]++, sum[f] += a, mx[f] = a > mx[f] ? a : mx[f];
            }
    }
    for (int f = 0; f < 2; f++) {
        CHECKF(fired[f] > 0 && r.fired[f] == fired[f], "feature %d fired %ld, by hand %ld", f,
               r.fired[f], fired[f]);
        CHECK_NEAR(r.density[f], (double)fired[f] / (SW * ST), 1e-12);
        CHECK_NEAR(r.mean_act[f], sum[f] / (double)fired[f], 1e-6);
        CHECK_NEAR(r.max_act[f], mx[f], 1e-6);
        /* the whole pre-activation comes from head 1.0's slice */
        CHECK_NEAR(r.share[f * PH + 0], 1.0, 1e-12);
        CHECK_NEAR(r.share[f * PH + 1], 0.0, 1e-12);
        CHECK_NEAR(r.share[f * PH + 2], 0.0, 1e-12);
        CHECK_NEAR(r.contrib[f * PH + 0], sum[f] / (double)fired[f] + THR, 1e-5);
        /* through W_O[1,0] (x GAMMA into OUT) and W_U (OUT is the identity): only its token */
        CHECK(r.up_tok[f * r.logit_n] == (f ? 9 : 3));
        CHECK_NEAR(r.up_val[f * r.logit_n], P_GAMMA, 1e-5);
        CHECK_NEAR(r.up_val[f * r.logit_n + 1], 0.0, 1e-6);
        CHECK_NEAR(r.down_val[f * r.logit_n], 0.0, 1e-6);
        /* contexts: descending, each the activation recomputed at its window and
         * position, its token the file's at offset + pos; mostly where the next token is
         * the feature's (induction; a chance match across a sequence boundary may not be) */
        int used = 0, next_ok = 0;
        for (int j = 0; j < r.top_n; j++) {
            const al_sae_feat_ctx *c = r.ctx + (size_t)f * r.top_n + j;
            if (c->window < 0) {
                CHECK(j == fired[f]); /* fewer firings than slots */
                break;
            }
            used++;
            CHECK(c->window < SW && c->pos >= 0 && c->pos < ST);
            CHECK_NEAR(c->act, act[c->window][c->pos][f], 1e-6);
            if (j == 0)
                CHECK_NEAR(c->act, r.max_act[f], 1e-6);
            else
                CHECK(c->act <= r.ctx[(size_t)f * r.top_n + j - 1].act);
            CHECK(c->token == d.tok[c->offset + c->pos]);
            next_ok +=
                c->offset + c->pos + 1 < (long)d.n && d.tok[c->offset + c->pos + 1] == (f ? 9 : 3);
        }
        CHECKF(used > 0 && 2 * next_ok >= used, "feature %d: %d of %d contexts predict it", f,
               next_ok, used);
        /* no firing position is larger than the smallest kept context when all slots are used */
        if (used == r.top_n) {
            int above = 0;
            float last = r.ctx[(size_t)f * r.top_n + used - 1].act;
            for (int w = 0; w < SW; w++)
                for (int t = 0; t < ST; t++) above += act[w][t][f] > last + 1e-6f;
            CHECKF(above < used, "feature %d: %d positions above the kept contexts", f, above);
        }
    }
    /* feature 2: head 1.2's constant output */
    CHECK(r.fired[2] == SW * ST);
    CHECK_NEAR(r.density[2], 1.0, 0);
    CHECK_NEAR(r.mean_act[2], 1.0, 1e-5);
    CHECK_NEAR(r.share[2 * PH + 2], 1.0, 1e-12);
    CHECK(r.up_tok[2 * r.logit_n] == 7); /* 1.2 raises token 7 by 1 */
    CHECK_NEAR(r.up_val[2 * r.logit_n], 1.0, 1e-6);
    CHECK_NEAR(r.induction_index[2], 0.5, 1e-6);
    /* feature 3: dead */
    CHECK(r.fired[3] == 0 && r.n_live == 3);

    /* the induction numbers again, on the same probe, from plain forwards:
     * means, firing counts, the binomial tail, and the AUROCs by brute force
     * over every (second, first) pair */
    enum { PN = 1024, PR = 15, TP = 2 * PR + 1, NH = PN * PR };
    al_probe p;
    CHECK_OK(al_probe_make(&p, PR, PN, 1, PV, -1, NULL, &e), &e);
    CHECK_OK(al_model_forward(&m, p.tokens, NULL, PN, TP, &e), &e);
    static double code[3][2][NH], znorm[PH][2][NH];
    for (int b = 0; b < PN; b++)
        for (int t = 1; t < TP; t++) {
            const int sec = t > PR, slot = b * PR + (sec ? t - PR - 1 : t - 1);
            for (int f = 0; f < 2; f++) {
                float a = zc(&m, PN, TP, b, t, 0, f ? 9 : 3) + (-THR);
                code[f][sec][slot] = a > 0 ? a : 0;
            }
            for (int h = 0; h < PH; h++) {
                double q = 0;
                for (int k = 0; k < PD; k++)
                    q += (double)zc(&m, PN, TP, b, t, h, k) * zc(&m, PN, TP, b, t, h, k);
                znorm[h][sec][slot] = sqrt(q);
            }
            code[2][sec][slot] = code[0][sec][slot] + code[1][sec][slot];
        }
    for (int f = 0; f < 3; f++) { /* 2: the two induction features summed */
        double first = 0, second = 0, u = 0;
        long n1 = 0, n2 = 0;
        for (int j = 0; j < NH; j++) {
            first += code[f][0][j], second += code[f][1][j];
            n1 += code[f][0][j] > 0, n2 += code[f][1][j] > 0;
        }
        /* every (second, first) pair: the zeros of each side in closed form,
         * the firings compared one by one */
        for (int j = 0; j < NH; j++) {
            double v = code[f][1][j];
            if (v == 0) {
                u += 0.5 * (double)(NH - n1);
                continue;
            }
            u += (double)(NH - n1);
            for (int k = 0; k < NH; k++) {
                double w = code[f][0][k];
                if (w > 0) u += w < v ? 1 : w == v ? 0.5 : 0;
            }
        }
        double auc = u / ((double)NH * NH);
        if (f == 2) {
            CHECK(r.n_induction == 2);
            CHECK_NEAR(r.group_auroc, auc, 1e-9);
            continue;
        }
        CHECK(r.first_fired[f] == n1 && r.second_fired[f] == n2);
        first /= NH, second /= NH;
        CHECK_NEAR(r.first_mean[f], first, 1e-6);
        CHECK_NEAR(r.second_mean[f], second, 1e-6);
        CHECKF(second > 0 && r.induction_index[f] > 0.9, "feature %d: induction index %g", f,
               r.induction_index[f]);
        CHECK_NEAR(r.induction_index[f], second / (first + second), 1e-6);
        CHECK_NEAR(r.auroc[f], auc, 1e-9);
        CHECKF(auc > 0.5, "feature %d: AUROC %g", f, auc);
        /* binomial tail by the recurrence, in double */
        double pt = 0, term = pow(0.5, (double)(n1 + n2)); /* C(n,0)/2^n */
        for (long j = 0; j <= n1 + n2; j++) {
            if (j >= n2) pt += term;
            term = term * (double)(n1 + n2 - j) / (double)(j + 1);
        }
        CHECK_NEAR(r.induction_p[f] / pt, 1.0, 1e-9);
        /* its token is due on about N·R/V second occurrences: enough to count */
        CHECKF(r.induction[f] == 1, "feature %d: %ld / %ld firings, p %g", f, n1, n2,
               r.induction_p[f]);
        /* token-specific: where it fires on a second occurrence, its token is due next
         * (not always: an id repeated inside a half of 15 draws from 128 sends the
         * induction head to another copy: feature 1 has 0.897) */
        CHECKF(r.next_token[f] == (f ? 9 : 3) && r.next_share[f] > 0.8,
               "feature %d: next token %d, share %g", f, r.next_token[f], r.next_share[f]);
    }
    /* feature 2 fires everywhere: even, p near 1, not an induction feature */
    CHECK(r.first_fired[2] == NH && r.second_fired[2] == NH && r.induction[2] == 0);
    CHECK_NEAR(r.auroc[2], 0.5, 0.02);
    CHECK(r.induction_p[2] > 0.4);
    for (int h = 0; h < PH; h++) {
        double u = 0;
        for (int j = 0; j < NH; j++)
            for (int k = 0; k < NH; k++) {
                double v = znorm[h][1][j], w = znorm[h][0][k];
                u += w < v ? 1 : w == v ? 0.5 : 0;
            }
        CHECK_NEAR(r.head_auroc[h], u / ((double)NH * NH), 1e-9);
    }
    al_probe_free(&p);
    /* the same again: deterministic */
    al_sae_feat_result r2;
    CHECK_OK(al_sae_features_run(&m, &s, &meta, &d, ST, &o, &r2, &e), &e);
    CHECK(memcmp(r.density, r2.density, sizeof(double) * SF * 8) == 0);
    CHECK(memcmp(r.head_auroc, r2.head_auroc, sizeof(double) * PH) == 0);
    CHECK(memcmp(r.contrib, r2.contrib, sizeof(double) * SF * PH * 2) == 0);
    al_sae_feat_result_free(&r2);
    /* a residual-stream SAE is refused, and the result is zeroed */
    meta.site = AL_SAE_SITE_RESID_PRE;
    CHECK(al_sae_features_run(&m, &s, &meta, &d, ST, &o, &r2, &e) == -1);
    CHECK(strstr(e.msg, "residual stream") != NULL);
    CHECK(t_all_zero(&r2, sizeof r2));
    al_sae_feat_result_free(&r);
    al_tokens_free(&d);
    free(ids);
    al_sae_free(&s);
    al_model_free(&m);
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* "(abs(col - v) <= 1e-14 * abs(v))": a stored double against its --json
 * number, which cJSON prints with 15 significant digits when they read
 * back within one double epsilon (so the two may differ in the last bit). */
static const char *near(const char *col, double v) {
    static char buf[4][160];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "(abs(%s - %.17g) <= 1e-14 * abs(%.17g))", col, v, v);
    return buf[k];
}

TEST(sae_features_cli_rows_equal_json) {
    t_pbuf md = t_pcopy("planted"), bin = t_pcopy("p.bin"), sd = t_pcopy("sae"),
           db = t_pcopy("r.db"), out = t_pcopy("f.json");
    planted_files(md.s, bin.s, sd.s);
    CHECK(t_sh("%s sae features --model %s --sae %s --data %s --db %s --windows %d --json > %s",
               t_bin(), md.s, sd.s, bin.s, db.s, SW, out.s) == 0);
    char *txt = t_slurp(out.s);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    CHECK(j != NULL);
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(j, "schema");
    CHECK(cJSON_IsString(sc) && !strcmp(sc->valuestring, "attnlab.sae_features/1"));
    CHECK(num(j, "n_live") == 3 && num(j, "d_sae") == SF && num(j, "run") == 1);
    CHECK_SQL(db.s, "SELECT kind, status FROM runs", "sae_features|done");
    CHECK_SQL(db.s,
              "SELECT hook_name, layer, d_sae, n_live, windows, seq_len FROM sae_feature_runs",
              "blocks.1.attn.hook_z|1|4|3|16|32");
    CHECK_SQL(db.s, "SELECT count(*) FROM sae_features", "3");
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(j, "features"), *f;
    CHECK(cJSON_GetArraySize(fs) == 3);
    cJSON_ArrayForEach(f, fs) {
        int i = (int)num(f, "feature");
        char q[1024], want[512];
        char q2[512];
        snprintf(q2, sizeof q2, "%s, %s, ", near("density", num(f, "density")),
                 near("mean_act", num(f, "mean_act")));
        snprintf(q, sizeof q, "SELECT fired, %s%s, %s, %s FROM sae_features WHERE feature = %d", q2,
                 near("max_act", num(f, "max_act")), near("first_mean", num(f, "first_mean")),
                 near("second_mean", num(f, "second_mean")), i);
        snprintf(want, sizeof want, "%.0f|1|1|1|1|1", num(f, "fired"));
        CHECK_SQL(db.s, q, want);
        const cJSON *h, *u;
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(f, "heads")) {
            snprintf(q, sizeof q,
                     "SELECT %s, %s FROM sae_feature_heads WHERE feature = %d AND head = %d",
                     near("share", num(h, "share")), near("contribution", num(h, "contribution")),
                     i, (int)num(h, "head"));
            CHECK_SQL(db.s, q, "1|1");
        }
        int rank = 1;
        cJSON_ArrayForEach(u, cJSON_GetObjectItemCaseSensitive(f, "up")) {
            snprintf(q, sizeof q,
                     "SELECT token, %s FROM sae_feature_logits WHERE "
                     "feature = %d AND direction = 'up' AND rank = %d",
                     near("value", num(u, "value")), i, rank++);
            snprintf(want, sizeof want, "%d|1", (int)num(u, "token"));
            CHECK_SQL(db.s, q, want);
        }
        snprintf(q, sizeof q, "SELECT count(*) FROM sae_feature_contexts WHERE feature = %d", i);
        snprintf(want, sizeof want, "%d",
                 cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(f, "contexts")));
        CHECK_SQL(db.s, q, want);
    }
    CHECK_SQL(db.s,
              "SELECT token, value FROM sae_feature_logits WHERE feature = 0 AND "
              "direction = 'up' AND rank = 1",
              "3|15.0");
    /* the two questions, one query each */
    CHECK_SQL(db.s,
              "SELECT group_concat(feature) FROM (SELECT feature FROM sae_head_features "
              "WHERE name = '1.0' ORDER BY feature)",
              "0,1");
    CHECK_SQL(db.s,
              "SELECT group_concat(feature) FROM (SELECT feature FROM sae_head_features "
              "WHERE name = '1.2' ORDER BY feature)",
              "2");
    CHECK_SQL(db.s,
              "SELECT group_concat(feature) FROM (SELECT feature FROM "
              "sae_induction_features ORDER BY feature)",
              "0,1");
    CHECK_SQL(db.s, "SELECT top_layer, top_head FROM sae_features WHERE feature = 1", "1|0");
    cJSON_Delete(j);
    free(txt);
}

/* `sae features --task`: the task attribution's rows equal its --json
 * numbers, the stored features' effects and the error's sum to the site's,
 * and the text prints the task's lines. */
TEST(sae_features_cli_task_rows_equal_json) {
    t_pbuf md = t_pcopy("planted"), bin = t_pcopy("p.bin"), sd = t_pcopy("sae"),
           db = t_pcopy("r.db"), out = t_pcopy("f.json"), txt = t_pcopy("f.txt");
    planted_files(md.s, bin.s, sd.s);
    CHECK(t_sh("%s sae features --model %s --sae %s --data %s --db %s --windows %d --task "
               "induction --n 8 --batch 3 --bootstrap 50 --json > %s",
               t_bin(), md.s, sd.s, bin.s, db.s, SW, out.s) == 0);
    char *text = t_slurp(out.s);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(j, "task");
    CHECK(tk != NULL);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(tk, "name");
    CHECK(cJSON_IsString(nm) && !strcmp(nm->valuestring, "induction"));
    CHECK(num(tk, "pairs") == 8);
    const cJSON *site = cJSON_GetObjectItemCaseSensitive(tk, "site"),
                *err = cJSON_GetObjectItemCaseSensitive(tk, "error");
    char q[1024], want[256];
    snprintf(q, sizeof q,
             "SELECT task, direction, n_pairs, %s, %s, n_moved = (SELECT count(*) FROM "
             "sae_task_features), bootstrap FROM sae_task_runs",
             near("site_effect", num(site, "effect")), near("error_effect", num(err, "effect")));
    CHECK_SQL(db.s, q, "induction|denoise|8|1|1|1|50");
    snprintf(want, sizeof want, "%.0f", num(tk, "n_moved"));
    CHECK_SQL(db.s, "SELECT count(*) FROM sae_task_features", want);
    CHECK_SQL(db.s,
              "SELECT abs((SELECT sum(effect) FROM sae_task_features) + error_effect - "
              "site_effect) <= 1e-5 * (abs(site_effect) + 1e-3) FROM sae_task_runs",
              "1");
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(tk, "features")) {
        snprintf(q, sizeof q, "SELECT %s, %s FROM sae_task_features WHERE feature = %d",
                 near("effect", num(f, "effect")), near("se", num(f, "effect_se")),
                 (int)num(f, "feature"));
        CHECK_SQL(db.s, q, "1|1");
    }
    cJSON_Delete(j);
    free(text);
    /* the text: the task's header line */
    CHECK(t_sh("%s sae features --model %s --sae %s --data %s --db %s --windows %d --task "
               "induction --n 8 --bootstrap 0 > %s",
               t_bin(), md.s, sd.s, bin.s, db.s, SW, txt.s) == 0);
    char *tt = t_slurp(txt.s);
    CHECK(tt && strstr(tt, "task induction (denoise): 8 pairs") && strstr(tt, "features move"));
    free(tt);
    /* log-prob items: the estimates are first order, and the run says so */
    CHECK_SQL(db.s,
              "SELECT count(*) FROM run_warnings WHERE run_id = 1 AND message LIKE "
              "'task induction: the features'' estimates are first order%'",
              "1");
    /* the report's table of the features that carry the task */
    CHECK(t_sh("%s report --db %s --model %s --out %s > /dev/null 2>&1", t_bin(), db.s, md.s,
               t_path("rep")) == 0);
    char *html = t_slurp(t_path("rep/index.html"));
    CHECK(html && strstr(html, "Which features carry the task <code>induction</code> (run 1)") &&
          strstr(html, "what the SAE does not reconstruct (its error term)"));
    free(html);
}

/* The evaluation of `sae train` recomputed from the saved weights: the
 * held-out windows through a plain forward (the model's own z cache, no
 * hook), encoded by the loaded SAE; L0, variance explained and MSE summed
 * here. And the sae_runs row equals the --json numbers. */
TEST(sae_train_cli_rows_equal_json) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("t.json"), sd = t_pcopy("sae1");
    t_tiny_model(dir.s, 2, 20);
    CHECK(t_sh("%s sae train --model %s/m2 --layer 1 --data %s/s.train.bin --val %s/s.val.bin "
               "--db %s --out %s --steps 8 --batch 128 --eval-windows 4 --threads 2 --json > %s "
               "2>/dev/null",
               t_bin(), dir.s, dir.s, dir.s, db.s, sd.s, out.s) == 0);
    char *txt = t_slurp(out.s);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    CHECK(j != NULL);
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(j, "schema");
    CHECK(cJSON_IsString(sc) && !strcmp(sc->valuestring, "attnlab.sae/1"));
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "eval");
    CHECK(num(j, "d_in") == 32 && num(j, "d_sae") == 256 && num(j, "k") == 32 &&
          num(j, "steps") == 8 && num(j, "activations") == 1024);
    CHECK_SQL(db.s, "SELECT kind, status FROM runs", "sae|done");
    CHECK_SQL(db.s,
              "SELECT layer, site, hook_name, d_in, d_sae, arch, k, l1_coeff IS NULL, steps, "
              "batch FROM sae_runs",
              "1|z|blocks.1.attn.hook_z|32|256|topk|32|1|8|128");
    const char *keys[] = {"l0",       "fve",    "mse",     "dead_frac",   "dense_frac",
                          "ce_clean", "ce_sae", "ce_zero", "ce_recovered"};
    for (int i = 0; i < 9; i++) {
        char q[256];
        snprintf(q, sizeof q, "SELECT %s FROM sae_runs", near(keys[i], num(ev, keys[i])));
        CHECK_SQL(db.s, q, "1");
    }
    CHECK(num(ev, "ce_zero") > num(ev, "ce_clean"));
    /* recompute from the directory */
    al_model m;
    al_sae s;
    al_sae_meta meta;
    al_tokens val;
    al_err e;
    char mdir[1100], vpath[1100];
    snprintf(mdir, sizeof mdir, "%s/m2", dir.s);
    snprintf(vpath, sizeof vpath, "%s/s.val.bin", dir.s);
    CHECK_OK(al_ckpt_load(mdir, &m, NULL, &e), &e);
    CHECK_OK(al_sae_load(sd.s, &s, &meta, &e), &e);
    CHECK_OK(al_tokens_load(vpath, &val, &e), &e);
    const int T = m.cfg.n_ctx, B = 4, d = s.cfg.d_in;
    int *in = malloc(sizeof(int) * B * T * 2);
    float *x = malloc(sizeof(float) * B * T * d);
    CHECK(in && x);
    CHECK_OK(al_batch_fixed(&val, B, T, 0, 1, in, in + B * T, &e), &e);
    CHECK_OK(al_model_forward(&m, in, in + B * T, B, T, &e), &e);
    CHECK_NEAR(m.mean_loss, num(ev, "ce_clean"), 1e-5);
    const int H = m.cfg.n_heads, D = m.cfg.d_head;
    for (int r = 0; r < B * T; r++)
        for (int k = 0; k < d; k++)
            x[(size_t)r * d + k] = m.z[(((size_t)1 * B) * T + r) * H * D + k] * (float)meta.scale;
    CHECK_OK(al_sae_encode(&s, x, B * T, &e), &e);
    double l0 = 0, sse = 0, ss = 0, mean[64] = {0};
    for (int r = 0; r < B * T; r++)
        for (int k = 0; k < d; k++) mean[k] += x[(size_t)r * d + k] / (double)(B * T);
    for (int r = 0; r < B * T; r++) {
        for (int q = 0; q < s.cfg.k; q++) l0 += s.val[(size_t)r * s.cfg.k + q] > 0;
        for (int k = 0; k < d; k++) {
            double a = x[(size_t)r * d + k], dd = a - s.xhat[(size_t)r * d + k];
            sse += dd * dd;
            ss += (a - mean[k]) * (a - mean[k]);
        }
    }
    CHECK_NEAR(l0 / (B * T), num(ev, "l0"), 1e-9);
    CHECK_NEAR(sse / (B * T), num(ev, "mse"), 1e-4 * (1 + sse / (B * T)));
    CHECK_NEAR(1 - sse / ss, num(ev, "fve"), 1e-4);
    free(in);
    free(x);
    al_tokens_free(&val);
    al_sae_free(&s);
    al_model_free(&m);
    cJSON_Delete(j);
    free(txt);
}

/* Bad input: one line on stderr, no run row. */
TEST(sae_cli_bad_input_no_run) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), db2 = t_pcopy("other.db"),
           err = t_pcopy("err.txt");
    t_tiny_model(dir.s, 2, 20);
    t_tiny_model(dir.s, 1, 20);
    /* SAEs of the 1-layer model: on its z, and on its residual stream */
    CHECK(t_sh("%s sae train --model %s/m1 --layer 0 --data %s/s.train.bin --db %s --out %s/s1 "
               "--steps 4 --batch 64 --eval-windows 2 >/dev/null 2>&1",
               t_bin(), dir.s, dir.s, db2.s, dir.s) == 0);
    CHECK(t_sh("%s sae train --model %s/m2 --layer 0 --site resid --data %s/s.train.bin --db %s "
               "--out %s/sr --steps 4 --batch 64 --eval-windows 2 >/dev/null 2>&1",
               t_bin(), dir.s, dir.s, db2.s, dir.s) == 0);
    struct {
        const char *args, *want;
        int rc;
    } cases[] = {
        {"sae train --model %s/m2 --layer 2 --data %s/s.train.bin --out %s/x", "--layer 2", 1},
        {"sae train --model %s/m2 --layer 1 --k 300 --data %s/s.train.bin --out %s/x",
         "larger than the dictionary", 1},
        {"sae train --model %s/m2 --layer 1 --arch l1 --l1-coeff nan --data %s/s.train.bin "
         "--out %s/x",
         "--l1-coeff", 2},
        {"sae train --model %s/m2 --layer 1 --lr inf --data %s/s.train.bin --out %s/x", "--lr", 2},
        {"sae train --model %s/m2 --layer 0 --resume --steps 4 --batch 64 --data %s/s.train.bin "
         "--out %s/s1",
         "another model", 1},
        {"sae train --model %s/m2 --layer 0 --site q --data %s/s.train.bin --out %s/x", "--site",
         2},
        {"sae features --model %s/m2 --data %s/s.val.bin --sae %s/s1", "another model", 1},
        {"sae features --model %s/m2 --data %s/s.val.bin --sae %s/sr", "residual stream", 1},
        {"sae features --model %s/m2 --data %s/s.val.bin --sae %s/nothing", "nothing", 1},
        {"sae features --model %s/m1 --data %s/s.val.bin --sae %s/s1 --n 8",
         "--n is an option of --task", 2},
        {"sae features --model %s/m1 --data %s/s.val.bin --sae %s/s1 --task sideways",
         "unknown patching task", 2},
        {"sae features --model %s/m1 --data %s/s.val.bin --sae %s/s1 --task induction "
         "--direction up",
         "direction", 2},
        {"sae features --model %s/m1 --data %s/s.val.bin --sae %s/s1 --task idents-key",
         "held-out code", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, cases[i].args, dir.s, dir.s, dir.s);
        int rc = t_sh("%s %s --db %s 2> %s > /dev/null", t_bin(), cmd, db.s, err.s);
        CHECKF(rc == cases[i].rc, "case %zu: exit %d: %s", i, rc, cmd);
        CHECKF(t_one_line(err.s, cases[i].want), "case %zu: %s", i, cmd);
        CHECKF(t_sql_long(db.s, "SELECT count(*) FROM runs") <= 0, "case %zu left a run", i);
    }
    /* the memory budget: the probe's firings and the text pass, counted
     * before the run row */
    int rc = t_sh("ATTNLAB_MEM_LIMIT=100k %s sae features --model %s/m1 --data %s/s.val.bin --sae "
                  "%s/s1 --db %s 2> %s > /dev/null",
                  t_bin(), dir.s, dir.s, dir.s, db.s, err.s);
    CHECKF(rc == 1, "exit %d", rc);
    CHECK(t_one_line(err.s, "sae features would allocate") &&
          t_one_line(err.s, "; lower --probe-n or --windows"));
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM runs") <= 0);
}

/* The experiment keys: `sae` trains on the experiment's training tokens
 * into the model's sae-L1, `sae_features` finds it by that name; both run
 * after training whatever their order in the file, are reused on a second
 * run, and a path the runner owns ("out") is refused. */
TEST(sae_experiment_stages) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    static const char x[] =
        "{\"name\": \"saetiny\",\n"
        " \"data\": {\"synthetic\": {\"stories\": 600, \"seed\": 2, \"repeat_fraction\": 0.3},"
        " \"val\": 0.05},\n"
        " \"tokenizer\": {\"vocab\": 300},\n"
        " \"train\": {\"d_model\": 64, \"n_heads\": 4, \"d_head\": 16, \"n_ctx\": 64, \"batch\": 8,"
        " \"steps\": 30, \"lr\": 0.01, \"warmup\": 10, \"eval_every\": 30, \"eval_batches\": 2},\n"
        " \"models\": [{\"name\": \"2l\", \"n_layers\": 2}],\n"
        " \"analyses\": {\"sae_features\": {\"sae\": \"sae-L1\", \"windows\": 8, \"probe_n\": 64},\n"
        "   \"sae\": {\"layer\": 1, \"steps\": 12, \"batch\": 256, \"eval_windows\": 4}},\n"
        " \"report\": false}\n";
    t_write("x.json", x);
    char out[600], db[700], sae[700];
    snprintf(out, sizeof out, "%s", t_path("out"));
    snprintf(db, sizeof db, "%s/results.db", out);
    snprintf(sae, sizeof sae, "%s/models/2l/sae-L1", out);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), t_path("x.json"), out,
               t_path("run1")) == 0);
    char *log = t_slurp(t_path("run1"));
    CHECK(log && strstr(log, "$ attnlab sae train") && strstr(log, "tokens.train.bin") &&
          strstr(log, "$ attnlab sae features"));
    CHECK(log && strstr(log, "$ attnlab sae train") < strstr(log, "$ attnlab sae features"));
    free(log);
    char p[800];
    snprintf(p, sizeof p, "%s/cfg.json", sae);
    CHECK(al_file_exists(p));
    CHECK(t_sql_long(db, "SELECT count(*) FROM sae_runs WHERE steps = 12 AND out_dir LIKE "
                         "'%/models/2l/sae-L1'") == 1);
    CHECK(t_sql_long(db, "SELECT count(*) FROM sae_feature_runs WHERE sae_dir LIKE "
                         "'%/models/2l/sae-L1' AND windows = 8 AND probe_n = 64") == 1);
    CHECK(t_sql_long(db, "SELECT count(*) FROM sae_probe_heads") == 4);
    /* again: both reused, nothing new */
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), t_path("x.json"), out,
               t_path("run2")) == 0);
    log = t_slurp(t_path("run2"));
    int reused = 0;
    for (const char *q = log; q && (q = strstr(q, "reused: outputs complete")) != NULL; q++)
        reused++;
    CHECKF(reused == 6, "%d stages reused", reused);
    free(log);
    CHECK(t_sql_long(db, "SELECT count(*) FROM runs") == 3);
    /* the runner owns the SAE's directory */
    static const char bad[] =
        "{\"name\": \"saebad\", \"data\": {\"synthetic\": {\"stories\": 600}},"
        " \"train\": {\"d_model\": 64, \"n_heads\": 4, \"d_head\": 16, \"n_ctx\": 64},"
        " \"models\": [{\"name\": \"2l\", \"n_layers\": 2}],"
        " \"analyses\": {\"sae\": {\"layer\": 1, \"out\": \"elsewhere\"}}}";
    t_write("bad.json", bad);
    CHECK(t_sh("%s experiment %s --out %s/b > %s 2>&1", t_bin(), t_path("bad.json"), out,
               t_path("err")) != 0);
    char *err = t_slurp(t_path("err"));
    CHECKF(err && strstr(err, "out"), "%s", err ? err : "(none)");
    free(err);
}

/* Hooks of the LayerNorm check below: z of the SAE's layer set to one
 * vector at every head and position (or zero), ln_final's scale set to 1,
 * the logits read. */
typedef struct lnfx {
    const float *z; /* (H·D) or NULL: zero */
    float logits[64];
    int V;
} lnfx;

static int lnfx_z(al_hook_act *a, void *vc, al_err *e) {
    (void)e;
    const lnfx *c = vc;
    const int H = a->m->cfg.n_heads, HD = H * a->m->cfg.d_head;
    for (int bt = 0; bt < a->m->B * a->m->T; bt++)
        for (int i = 0; i < HD; i++) a->data[(size_t)bt * a->ld + i] = c->z ? c->z[i] : 0.0f;
    for (int h = 0; h < H; h++) a->fixed[h] = 1;
    return 0;
}

static int lnfx_scale(al_hook_act *a, void *vc, al_err *e) {
    (void)vc, (void)e;
    for (int bt = 0; bt < a->m->B * a->m->T; bt++) a->data[bt] = 1.0f;
    return 0;
}

static int lnfx_logits(al_hook_act *a, void *vc, al_err *e) {
    (void)e;
    lnfx *c = vc;
    memcpy(c->logits, a->data, sizeof(float) * (size_t)c->V); /* (0, 0)'s row */
    return 0;
}

/* On LayerNorm models (LN and LNPre, with every bias) a feature's logit
 * effects are its decoder row sent through the forward itself: z of the
 * SAE's (last) layer set to W_dec[i] / scale, minus the same with z zero,
 * with ln_final's scale held at 1 in both, read at the logits. The
 * engine's own W_O, b_O, ln_final and W_U give what the analysis computes
 * from the weights; the run stores the note that says so. */
TEST(sae_features_layernorm_logit_effects) {
    const int norms[2] = {AL_NORM_LN, AL_NORM_LNPRE};
    for (int ni = 0; ni < 2; ni++) {
        al_model m;
        al_err e;
        ln_model(&m, 2, norms[ni], AL_BIAS_Q | AL_BIAS_K | AL_BIAS_V | AL_BIAS_O | AL_BIAS_U,
                 AL_POS_STANDARD, 7 + (uint64_t)ni);
        for (int k = 0; k < 2 * m.cfg.n_heads; k++) m.gates[k] = 1.0f;
        const int HD = m.cfg.n_heads * m.cfg.d_head, V = m.cfg.d_vocab, F = 6;
        CHECK(V <= 64);
        al_sae s;
        al_sae_cfg sc = al_sae_cfg_default(HD, F);
        sc.k = 3;
        CHECK_OK(al_sae_init(&s, &sc, 11, &e), &e);
        for (int f = 0; f < F; f++) s.b_enc[f] = 0.5f; /* every feature fires somewhere */
        al_sae_meta meta = {.site = AL_SAE_SITE_Z, .hook_layer = 1, .scale = 1.7};
        al_tokens d = {0};
        d.n = 400;
        d.tok = malloc(d.n * sizeof *d.tok);
        al_rng r;
        al_rng_seed(&r, 5);
        for (size_t i = 0; d.tok && i < d.n; i++) {
            d.tok[i] = (uint16_t)al_rng_below(&r, (uint64_t)V);
            if (d.tok[i] > d.max_id) d.max_id = d.tok[i];
        }
        al_sae_feat_opts o = al_sae_feat_opts_defaults();
        o.windows = 16, o.probe_n = 16, o.logit_n = 4;
        al_sae_feat_result res;
        CHECK_OK(al_sae_features_run(&m, &s, &meta, &d, 12, &o, &res, &e), &e);
        CHECK(res.n_live > 0);
        lnfx c = {.V = V};
        CHECK_OK(al_hook_add(&m, AL_HOOK_Z, 1, lnfx_z, &c, &e), &e);
        CHECK_OK(al_hook_add(&m, AL_HOOK_LNF_SCALE, 0, lnfx_scale, &c, &e), &e);
        CHECK_OK(al_hook_add(&m, AL_HOOK_LOGITS, 0, lnfx_logits, &c, &e), &e);
        int in[1] = {2};
        float base[64], zrow[64 * 4];
        CHECK_OK(al_model_forward(&m, in, NULL, 1, 1, &e), &e);
        memcpy(base, c.logits, sizeof(float) * (size_t)V);
        double worst = 0;
        int checked = 0;
        for (int f = 0; f < F; f++) {
            if (!res.fired[f]) continue;
            for (int i = 0; i < HD; i++)
                zrow[i] = (float)(s.W_dec[(size_t)f * HD + i] / meta.scale);
            c.z = zrow;
            CHECK_OK(al_model_forward(&m, in, NULL, 1, 1, &e), &e);
            c.z = NULL;
            for (int j = 0; j < o.logit_n; j++) {
                const size_t at = (size_t)f * o.logit_n + j;
                double up = c.logits[res.up_tok[at]] - base[res.up_tok[at]];
                double dn = c.logits[res.down_tok[at]] - base[res.down_tok[at]];
                double eu = fabs(up - res.up_val[at]) / (fabs(up) + 1e-3);
                double ed = fabs(dn - res.down_val[at]) / (fabs(dn) + 1e-3);
                worst = fmax(worst, fmax(eu, ed));
            }
            /* the largest raised is the largest difference over the vocabulary */
            double best = -1e30;
            for (int v = 0; v < V; v++) best = fmax(best, c.logits[v] - base[v]);
            CHECK_NEAR(best, res.up_val[(size_t)f * o.logit_n], 1e-4 * (fabs(best) + 1e-3));
            checked++;
        }
        printf("    %s: %d features, worst relative error %.2e\n", ni ? "LNPre" : "LN", checked,
               worst);
        CHECK(checked > 0 && worst < 1e-4);
        CHECK(al_sae_feat_ln_note(&m.cfg) != NULL);
        al_hook_clear(&m);
        al_sae_feat_result_free(&res);
        al_tokens_free(&d);
        al_sae_free(&s);
        al_model_free(&m);
    }
    al_config plain = al_config_default();
    CHECK(al_sae_feat_ln_note(&plain) == NULL);
}
