/* sec_sae.c -- the sparse-autoencoder section of a model: each finished
 * `sae train` run's evaluation, with a warning beside each number that is
 * easy to misread, and for each finished `sae features` run its densest
 * features as a table, the dashboards of the first few and the
 * head x feature picture, and with --task the features that carry the
 * task. No SAE run: no section. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/store_sae_read.h"

/* CE loss recovered is (L_zero − L_sae) / (L_zero − L_clean): over a gap
 * this small (nats) a rounding error of the losses moves it by whole
 * percents, so it is flagged rather than trusted. */
#define SAE_MIN_CE_GAP 0.05
/* A dictionary with this share of latents dead is much smaller than its
 * d_sae says. */
#define SAE_DEAD_WARN 0.2
/* Latents firing on more than 10% of positions (dense_frac) above this
 * share say the code is not sparse in the way L0 suggests. */
#define SAE_DENSE_WARN 0.05
#define SAE_TABLE_N 15 /* features in a run's table */
#define SAE_DASHBOARDS 5 /* and dashboards drawn */

static void num_cell(al_buf *h, double v, const char *fmt) {
    if (isnan(v)) {
        al_buf_puts(h, "<td class=na>&ndash;</td>");
        return;
    }
    al_buf_puts(h, "<td>");
    al_buf_printf(h, fmt, v);
    al_buf_puts(h, "</td>");
}

/* The evaluation of every finished `sae train` run, then its warnings. */
static int train_runs(rep *R, const rmodel *M, al_err *e) {
    al_rows q;
    if (al_store_sae_train_runs(R->st, M->mid, &q, e)) return -1;
    if (!q.nr) {
        al_rows_free(&q);
        return 0;
    }
    al_buf *h = &R->h;
    al_buf_puts(h, "<p>Training (<code>attnlab sae train</code>): each SAE evaluated on held-out "
                   "windows. L0: latents firing per position; FVE: the fraction of the site's "
                   "variance its reconstruction explains; CE: the model's loss with the site as "
                   "it is (clean), replaced by the SAE's reconstruction, and zeroed; CE recovered "
                   "= (zero &minus; SAE) / (zero &minus; clean); dead: latents that never fired; "
                   "dense: latents firing on more than 10% of positions.</p>\n"
                   "<div class=scroll><table><thead><tr><th>run</th><th>layer</th><th>site</th>"
                   "<th>SAE</th><th>activations</th><th>L0</th><th>FVE</th><th>MSE</th>"
                   "<th>CE clean</th><th>CE SAE</th><th>CE zero</th><th>CE recovered</th>"
                   "<th>dead</th><th>dense</th><th>act/s</th></tr></thead><tbody>\n");
    for (int r = 0; r < q.nr; r++) {
        al_buf_puts(h, "<tr><td class=t>");
        rep_esc(h, al_rows_t(&q, r, 0));
        al_buf_puts(h, "</td>");
        num_cell(h, al_rows_x(&q, r, 1), "%.0f");
        al_buf_puts(h, "<td class=t>");
        rep_esc(h, al_rows_t(&q, r, 2));
        al_buf_puts(h, "</td><td class=t>");
        const char *arch = al_rows_t(&q, r, 3);
        if (arch && strcmp(arch, "topk") == 0)
            al_buf_printf(h, "TopK k=%.0f, %.0f&times;%.0f", al_rows_x(&q, r, 6),
                          al_rows_x(&q, r, 4), al_rows_x(&q, r, 5));
        else
            al_buf_printf(h, "L1 %.3g, %.0f&times;%.0f", al_rows_x(&q, r, 7), al_rows_x(&q, r, 4),
                          al_rows_x(&q, r, 5));
        al_buf_puts(h, "</td>");
        num_cell(h, al_rows_x(&q, r, 9), "%.4g");
        num_cell(h, al_rows_x(&q, r, 10), "%.2f");
        num_cell(h, al_rows_x(&q, r, 11), "%.3f");
        num_cell(h, al_rows_x(&q, r, 12), "%.4g");
        num_cell(h, al_rows_x(&q, r, 13), "%.4f");
        num_cell(h, al_rows_x(&q, r, 14), "%.4f");
        num_cell(h, al_rows_x(&q, r, 15), "%.4f");
        num_cell(h, al_rows_x(&q, r, 16), "%.3f");
        num_cell(h, al_rows_x(&q, r, 17), "%.3f");
        num_cell(h, al_rows_x(&q, r, 18), "%.3f");
        num_cell(h, al_rows_x(&q, r, 19), "%.0f");
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table></div>\n");
    for (int r = 0; r < q.nr; r++) {
        const char *run = al_rows_t(&q, r, 0);
        double clean = al_rows_x(&q, r, 13), zero = al_rows_x(&q, r, 15),
               rec = al_rows_x(&q, r, 16), dead = al_rows_x(&q, r, 17),
               dense = al_rows_x(&q, r, 18);
        if (isfinite(clean) && isfinite(zero) && zero - clean < SAE_MIN_CE_GAP) {
            al_buf_puts(h, "<p class=warn>Run ");
            rep_esc(h, run);
            al_buf_printf(h,
                          ": CE recovered (%.3f) is a ratio over a gap of only %.4f nats "
                          "between the zeroed and the clean loss (under %.2f): zeroing this "
                          "site barely hurts the model, so the ratio says little about the "
                          "SAE.</p>\n",
                          rec, zero - clean, SAE_MIN_CE_GAP);
        } else if (isfinite(rec) && (rec < 0 || rec > 1)) {
            al_buf_puts(h, "<p class=warn>Run ");
            rep_esc(h, run);
            al_buf_printf(h,
                          ": CE recovered is %.3f, outside [0, 1]: the reconstruction does "
                          "%s.</p>\n",
                          rec,
                          rec > 1 ? "better than the clean site on these windows (noise in a "
                                    "small evaluation, or the SAE fixes a quirk)"
                                  : "worse than zeroing the site");
        }
        if (isfinite(dead) && dead > SAE_DEAD_WARN) {
            al_buf_puts(h, "<p class=warn>Run ");
            rep_esc(h, run);
            al_buf_printf(h,
                          ": %.0f%% of the latents never fired on the held-out windows; the "
                          "dictionary in use is %.0f latents, not %.0f.</p>\n",
                          100 * dead, round((1 - dead) * al_rows_x(&q, r, 5)), al_rows_x(&q, r, 5));
        }
        if (isfinite(dense) && dense > SAE_DENSE_WARN) {
            al_buf_puts(h, "<p class=warn>Run ");
            rep_esc(h, run);
            al_buf_printf(h,
                          ": %.1f%% of the latents fire on more than 10%% of positions: "
                          "dense latents read like a bias, not a feature.</p>\n",
                          100 * dense);
        }
    }
    al_rows_free(&q);
    return 0;
}

/* One row of a run's feature table (f read with al_store_read_sae_feature). */
static void feature_row(al_buf *h, const al_sae_feature *f) {
    al_buf_printf(h, "<tr><td>%d</td>", f->feature);
    num_cell(h, f->density, "%.4f");
    num_cell(h, f->mean_act, "%.3f");
    if (f->top_head >= 0)
        al_buf_printf(h, "<td class=t>%d.%d</td><td>%.3f</td>", f->top_layer, f->top_head,
                      f->top_share);
    else
        al_buf_puts(h, "<td class=na>&ndash;</td><td class=na>&ndash;</td>");
    num_cell(h, f->induction_index, "%.3f");
    al_buf_puts(h, "<td class=t>");
    for (int j = 0; j < f->n_up && j < 3; j++) {
        if (j) al_buf_puts(h, "  ");
        rep_esc(h, f->up[j].token_str ? f->up[j].token_str : "?");
        al_buf_printf(h, " (%+.3g)", f->up[j].value);
    }
    al_buf_puts(h, "</td></tr>\n");
}

/* A `sae features --task` run's attribution: the layer, the SAE's error
 * term and the features that carry the most of the task. */
static int task_table(rep *R, long run, int layer, al_err *e) {
    al_rows t, q;
    if (al_store_sae_task_run(R->st, run, &t, e)) return -1;
    if (!t.nr) {
        al_rows_free(&t);
        return 0;
    }
    if (al_store_sae_task_features(R->st, run, SAE_TABLE_N, &q, e)) {
        al_rows_free(&t);
        return -1;
    }
    al_buf *h = &R->h;
    al_buf_puts(h, "<h4>Which features carry the task <code>");
    rep_esc(h, al_rows_t(&t, 0, 0));
    al_buf_printf(h, "</code> (run %ld)</h4>\n<p>Attribution patching at the latents (", run);
    rep_esc(h, al_rows_t(&t, 0, 1));
    al_buf_printf(h,
                  ", %.0f pairs): each feature's codes moved to the other run's at every "
                  "position, the rest of z held, as a share of the clean &minus; corrupted "
                  "metric (%.4g against %.4g; 1: all of it). Layer %d's whole z: %.3f "
                  "&plusmn; %.3f; what the SAE does not reconstruct (its error term): %.3f "
                  "&plusmn; %.3f; %.0f features move. The %d largest by |effect|, with the "
                  "probe's induction index (* an induction feature) and the head each reads "
                  "most:</p>\n",
                  al_rows_x(&t, 0, 2), al_rows_x(&t, 0, 4), al_rows_x(&t, 0, 5), layer,
                  al_rows_x(&t, 0, 9), al_rows_x(&t, 0, 10), al_rows_x(&t, 0, 7),
                  al_rows_x(&t, 0, 8), al_rows_x(&t, 0, 6), SAE_TABLE_N);
    al_buf_puts(h, "<div class=scroll><table><thead><tr><th>feature</th><th>effect</th>"
                   "<th>&plusmn; se</th><th>interval</th><th>act clean</th><th>act corrupted</th>"
                   "<th>induction</th><th>top head</th><th>DFA share</th></tr></thead><tbody>\n");
    for (int r = 0; r < q.nr; r++) {
        al_buf_printf(h, "<tr><td>%.0f</td>", al_rows_x(&q, r, 0));
        num_cell(h, al_rows_x(&q, r, 1), "%+.4f");
        num_cell(h, al_rows_x(&q, r, 2), "%.4f");
        if (isfinite(al_rows_x(&q, r, 3)))
            al_buf_printf(h, "<td>[%+.4f, %+.4f]</td>", al_rows_x(&q, r, 3), al_rows_x(&q, r, 4));
        else
            al_buf_puts(h, "<td class=na>&ndash;</td>");
        num_cell(h, al_rows_x(&q, r, 5), "%.3f");
        num_cell(h, al_rows_x(&q, r, 6), "%.3f");
        if (isfinite(al_rows_x(&q, r, 7)))
            al_buf_printf(h, "<td>%.3f%s</td>", al_rows_x(&q, r, 7),
                          al_rows_x(&q, r, 8) == 1 ? "*" : "");
        else
            al_buf_puts(h, "<td class=na>&ndash;</td>");
        if (isfinite(al_rows_x(&q, r, 10)))
            al_buf_printf(h, "<td class=t>%.0f.%.0f</td>", al_rows_x(&q, r, 9),
                          al_rows_x(&q, r, 10));
        else
            al_buf_puts(h, "<td class=na>&ndash;</td>");
        num_cell(h, al_rows_x(&q, r, 11), "%.3f");
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table></div>\n");
    al_rows_free(&q);
    al_rows_free(&t);
    return 0;
}

/* A `sae features` run: its table, dashboards and head x feature picture. */
static int feature_run(rep *R, const rmodel *M, long run, al_err *e) {
    al_sae_frun fr;
    if (al_store_read_sae_frun(R->st, run, &fr, e)) return -1;
    al_buf *h = &R->h;
    al_buf_printf(h, "<h4>Features of layer %d (run %ld)</h4>\n<p>SAE <code>", fr.layer, run);
    rep_esc(h, fr.sae_dir);
    al_buf_puts(h, "</code> on <code>");
    rep_esc(h, fr.hook_name);
    al_buf_printf(h,
                  "</code>: %d of %d features fired on %d windows of %d tokens (%ld "
                  "positions). By density, the first %d: DFA is the share of the feature's "
                  "pre-activation from each head's z slice (the top head's shown); the "
                  "induction index is the share of its activation on the induction probe's "
                  "second occurrence (R %d, N %d; &ndash;: silent on the probe); the tokens its "
                  "decoder direction raises most, per unit of activation.</p>\n",
                  fr.n_live, fr.d_sae, fr.windows, fr.seq_len, fr.positions, SAE_TABLE_N,
                  fr.probe_r, fr.probe_n);
    al_rows q;
    if (al_store_sae_top_features(R->st, run, AL_SAE_BY_DENSITY, SAE_TABLE_N, &q, e)) {
        al_sae_frun_free(&fr);
        return -1;
    }
    int rc = 0;
    if (q.nr) {
        al_buf_puts(h, "<div class=scroll><table><thead><tr><th>feature</th><th>density</th>"
                       "<th>mean act</th><th>top head</th><th>DFA share</th>"
                       "<th>induction</th><th>raises most</th></tr></thead><tbody>\n");
        for (int r = 0; r < q.nr && !rc; r++) {
            al_sae_feature f;
            rc = al_store_read_sae_feature(R->st, run, (int)al_rows_x(&q, r, 0), &f, e);
            if (!rc) feature_row(h, &f);
            al_sae_feature_free(&f);
        }
        al_buf_puts(h, "</tbody></table></div>\n");
    } else {
        al_buf_puts(h, "<p class=none>No feature fired.</p>\n");
    }
    char slug[64], cap[512];
    for (int r = 0; r < q.nr && r < SAE_DASHBOARDS && !rc; r++) {
        int feat = (int)al_rows_x(&q, r, 0);
        al_pic_opts po = al_pic_defaults();
        po.run_id = run;
        po.feature = feat;
        snprintf(slug, sizeof slug, "r%ld-f%d", run, feat);
        snprintf(cap, sizeof cap,
                 "SAE feature %d of layer %d (run %ld): its numbers, logit "
                 "effects, head attribution and top contexts (the activating token coloured).",
                 feat, fr.layer, run);
        rep_run_picture(R, M, &po, "sae-feature", slug, cap);
    }
    if (!rc && q.nr) {
        al_pic_opts po = al_pic_defaults();
        po.run_id = run;
        snprintf(slug, sizeof slug, "r%ld", run);
        snprintf(cap, sizeof cap,
                 "Head attribution of the %d densest features of layer %d (run "
                 "%ld): each feature's DFA share per head.",
                 po.top_n, fr.layer, run);
        rep_run_picture(R, M, &po, "sae-heads", slug, cap);
    }
    if (!rc) rc = task_table(R, run, fr.layer, e);
    al_rows_free(&q);
    al_sae_frun_free(&fr);
    return rc ? -1 : 0;
}

int sec_sae(rep *R, const rmodel *M, al_err *e) {
    if (!M->in_db) return 0;
    al_rows t;
    if (al_store_sae_train_runs(R->st, M->mid, &t, e)) return -1;
    int n_train = t.nr;
    al_rows_free(&t);
    long *runs = NULL;
    int n = 0;
    if (al_store_sae_fruns_of_model(R->st, (int64_t)atoll(M->mid), &runs, &n, e)) return -1;
    int rc = 0;
    if (n_train || n) {
        al_buf_puts(&R->h, "<h3>Sparse autoencoders</h3>\n");
        rc = train_runs(R, M, e);
        for (int i = 0; i < n && !rc; i++) rc = feature_run(R, M, runs[i], e);
    }
    free(runs);
    return rc;
}
