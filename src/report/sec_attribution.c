/* sec_attribution.c -- the attribution section of a model: the newest
 * finished attribute run, its direct logit attribution, path-expansion
 * kinds and whether virtual heads matter, the logit lens, and how far
 * attribution patching agrees with actual patching. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/thresholds.h"

/* The answer to "do virtual heads matter here?" from the kinds' Δloss
 * (each kind's terms removed at once): the virtual kind's |Δloss| as a
 * share of the three kinds' Σ|Δloss|, against AL_TH_VIRTUAL_SHARE, and
 * its sign (removing a kind can lower the loss: the demo's 2-layer model
 * does better on the induction task without its virtual terms). a: the
 * run's row (see sec_attribution). */
static int virtual_sentence(rep *R, const rmodel *M, const al_rows *a, al_err *e) {
    al_buf *h = &R->h;
    double d[3] = {al_rows_x(a, 0, 9), al_rows_x(a, 0, 10), al_rows_x(a, 0, 11)}, tot = 0;
    for (int k = 0; k < 3; k++) tot += isnan(d[k]) ? 0 : fabs(d[k]);
    al_buf_puts(h, "<p class=answer><b>Do virtual heads matter here?</b> ");
    if (M->cfg.n_layers < 2) {
        al_buf_puts(h, "There are none: the model has one layer, so no head reads another's "
                       "output.</p>\n");
        return 0;
    }
    if (isnan(d[2]) || isnan(d[0]) || isnan(d[1])) {
        al_buf_puts(h, "Not measured: the run has no path expansion.</p>\n");
        return 0;
    }
    /* virtual terms: H² per pair of layers, and from 3 layers the remainder */
    const int L = M->cfg.n_layers, H = M->cfg.n_heads;
    int n = H * H * L * (L - 1) / 2 + (L >= 3);
    if (!(tot > 0)) {
        al_buf_puts(h, "Cannot say: removing the terms of any kind leaves the loss as it "
                       "is.</p>\n");
        return 0;
    }
    double share = fabs(d[2]) / tot; /* sign apart */
    if (share < AL_TH_VIRTUAL_SHARE)
        al_buf_printf(h,
                      "Negligible: removing all %d virtual terms together changes the loss by "
                      "%+.4f nats, %.1f%% of the three kinds' summed |&Delta;loss| (below "
                      "the %.0f%% taken as negligible).",
                      n, d[2], 100 * share, 100 * AL_TH_VIRTUAL_SHARE);
    else if (d[2] < 0)
        al_buf_printf(h,
                      "They work against the task: removing all %d virtual terms together "
                      "<i>lowers</i> the loss by %.4f nats (%.1f%% of the three kinds' summed "
                      "|&Delta;loss|).",
                      n, -d[2], 100 * share);
    else
        al_buf_printf(h,
                      "Yes: removing all %d virtual terms together raises the loss by %.4f "
                      "nats, %.1f%% of the three kinds' summed |&Delta;loss| (under "
                      "%.0f%% would be negligible).",
                      n, d[2], 100 * share, 100 * AL_TH_VIRTUAL_SHARE);
    al_rows t;
    if (al_sr_top_virtual_term(R->st, al_rows_t(a, 0, 0), &t, e)) return -1;
    if (t.nr && d[2] > 0) {
        al_buf_puts(h, " The largest alone: <code>");
        rep_esc(h, al_rows_t(&t, 0, 0));
        al_buf_printf(h, "</code> (&Delta;loss %+.4f nats).", al_rows_x(&t, 0, 1));
    }
    al_rows_free(&t);
    al_buf_puts(h, "</p>\n");
    return 0;
}

/* Attribution: the newest finished attribute run of the model, its three
 * pictures and tables (path-expansion kinds, logit lens, agreement of
 * attribution patching with actual patching). No run: no section. */
int sec_attribution(rep *R, const rmodel *M, al_err *e) {
    al_rows a;
    if (al_sr_attribution_run(R->st, M->mid, &a, e)) return -1;
    if (!a.nr) {
        al_rows_free(&a);
        return 0;
    }
    al_buf *h = &R->h;
    const char *run = al_rows_t(&a, 0, 0), *task = al_rows_t(&a, 0, 1) ? al_rows_t(&a, 0, 1) : "?";
    int diff = al_rows_t(&a, 0, 2) && strcmp(al_rows_t(&a, 0, 2), "logit_diff") == 0;
    int centred = al_rows_x(&a, 0, 15) == 1; /* attribute --center-unembed */
    const char *metric = diff      ? "the logit difference (answer &minus; wrong token)"
                         : centred ? "the correct token's logit less the mean logit (W_U centred)"
                                   : "the correct token's logit";
    char slug[64], cap[512], nl[16];
    snprintf(slug, sizeof slug, "%s-%s", task, run);
    rep_slug(slug, slug, sizeof slug);
    snprintf(nl, sizeof nl, "%d", M->cfg.n_layers);
    al_buf_puts(h, "<h3>Attribution</h3>\n<p>Run ");
    rep_esc(h, run);
    al_buf_puts(h, " on task ");
    rep_esc(h, task);
    al_buf_printf(h,
                  " (%.0f items): mean metric, %s, %.4f; mean loss %.4f nats. Direct logit "
                  "attribution splits the metric into each component's contribution (they add up "
                  "to it).</p>\n",
                  al_rows_x(&a, 0, 3), metric, al_rows_x(&a, 0, 4), al_rows_x(&a, 0, 5));
    al_pic_opts po = al_pic_defaults();
    po.run_id = atol(run);
    snprintf(cap, sizeof cap,
             "Direct logit attribution (task %s): each component's mean "
             "contribution to %s at each position.",
             task,
             diff      ? "the logit difference"
             : centred ? "the correct token's logit less the mean logit"
                       : "the correct token's logit");
    rep_run_picture(R, M, &po, "dla", slug, cap);
    int rc = 0;
    if (al_rows_x(&a, 0, 13) > 0) {
        if (M->cfg.n_layers <= 2)
            al_buf_puts(h,
                        "<p>Path expansion: the logits as a sum of exact terms (direct, each "
                        "head reading embed+pos, and in two layers each virtual head 0.a&gt;1.b); "
                        "per kind, its terms' summed contribution to the metric and the rise in "
                        "loss with all of them removed at once.</p>\n");
        else
            al_buf_puts(h, "<p>Path expansion: the logits as a sum of exact terms (direct, each "
                           "head reading embed+pos, each virtual head a&gt;b of two heads in "
                           "different layers, and one term <code>chains&gt;=3</code> for every "
                           "chain of three or more heads, counted with the virtual kind); per "
                           "kind, its terms' summed contribution to the metric and the rise in "
                           "loss with all of them removed at once.</p>\n");
        static const char *const heads[] = {"kind", "value", "\xce\x94loss (nats)",
                                            "share of \xce\xa3|\xce\x94loss|", NULL};
        al_rows q;
        int qrc = al_sr_path_kinds(R->st, run, &q, e);
        rc = rep_rows_table(R, qrc, &q, heads, "s++s", NULL) < 0;
        if (!rc) rc = virtual_sentence(R, M, &a, e);
        if (!rc) {
            snprintf(cap, sizeof cap,
                     "Path expansion (task %s): the rise in loss when each term "
                     "alone is removed, grouped by kind.",
                     task);
            rep_run_picture(R, M, &po, "terms", slug, cap);
        }
    }
    static const char *const lheads[] = {"residual stream", "loss (nats)", "top-1 accuracy", NULL};
    if (!rc) {
        al_buf_puts(h, "<p>Logit lens: each residual stream read through the unembedding.</p>\n");
        al_rows q;
        int qrc = al_sr_logit_lens(R->st, run, nl, &q, e);
        rc = rep_rows_table(R, qrc, &q, lheads, "s43", "No logit lens rows.") < 0;
    }
    if (!rc && al_rows_t(&a, 0, 12)) {
        al_buf_puts(h, "<p>Attribution patching (");
        rep_esc(h, strcmp(al_rows_t(&a, 0, 12), "noise") == 0 ? "noising" : "denoising");
        al_buf_puts(h, "): the first-order estimate of every patch, against actual patching where "
                       "the run compared them.</p>\n");
        static const char *const gheads[] = {"grid",         "n", "Pearson", "Spearman",
                                             "top-5 shared", NULL};
        al_rows q;
        int qrc = al_sr_attr_agreement(R->st, run, &q, e);
        rc = rep_rows_table(R, qrc, &q, gheads, "si33i", "Not compared with actual patching.") < 0;
        if (!rc && al_rows_x(&a, 0, 14) > 0) {
            snprintf(cap, sizeof cap,
                     "Attribution patching (task %s): each configuration's "
                     "estimate against actual patching, per grid.",
                     task);
            rep_run_picture(R, M, &po, "attrpatch", slug, cap);
        }
    }
    al_rows_free(&a);
    return rc ? -1 : 0;
}
