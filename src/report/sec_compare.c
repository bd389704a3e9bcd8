/* sec_compare.c -- "Models compared", first on a page of several models:
 * one row per model (layers, embeddings, losses, head counts, copying
 * agreement) and, with tied and untied models both present, the answer
 * to whether the eigenvalue copying score tracks ablation better for
 * one kind. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The open question of seed 003: does copying_eigen agree with ablation
 * when embeddings are tied vs untied? Answered from the numbers when the
 * report has models of both kinds, by two measures: the share of heads
 * both scores classify alike (thresholds.h) and Spearman's rho
 * (no threshold). A difference under 0.1 in a measure counts as none. */
typedef struct side {
    int n, agree, copy, neg, n_rho;
    double rho;
} side;

static void side_sentence(al_buf *h, const char *kind, const side *s, const char *col) {
    al_buf_printf(h,
                  "With %s embeddings the two scores classify %d of %d heads alike (%.0f%%) and "
                  "their rank correlation is &rho; = %+.2f%s; ",
                  kind, s->agree, s->n, 100.0 * s->agree / s->n, s->rho,
                  s->n_rho > 1 ? " (mean over models)" : "");
    if (!s->copy)
        al_buf_printf(h, "%s finds no copying head. ", col);
    else
        al_buf_printf(h,
                      "%s finds %d copying head%s, of which the eigenvalue score calls %d "
                      "negative. ",
                      col, s->copy, s->copy == 1 ? "" : "s", s->neg);
}

/* a: one agreement per model, all for the same ablation column. */
static void tied_answer(rep *R, const rep_agree *a) {
    side sd[2];
    memset(sd, 0, sizeof sd);
    for (int i = 0; i < R->o->n_models; i++) {
        side *s = &sd[R->m[i].cfg.tied_embeddings != 0];
        if (!a[i].n) continue;
        s->n += a[i].n, s->agree += a[i].agree, s->copy += a[i].abl_copy,
            s->neg += a[i].abl_copy_neg;
        if (!isnan(a[i].rho)) s->rho += a[i].rho, s->n_rho++;
    }
    if (!sd[0].n || !sd[1].n) return;
    for (int t = 0; t < 2; t++) sd[t].rho = sd[t].n_rho ? sd[t].rho / sd[t].n_rho : NAN;
    al_buf *h = &R->h;
    const char *col = a[0].col;
    int main_col = strcmp(col, "copying_ablation") == 0;
    if (main_col)
        al_buf_puts(
            h, "<p class=answer><b>Does the eigenvalue copying score agree with ablation, tied "
               "vs untied embeddings?</b> ");
    else
        al_buf_printf(h,
                      "<p class=answer>The same question with %s (the cost at copy positions "
                      "beyond the cost elsewhere): ",
                      col);
    side_sentence(h, "tied", &sd[1], col);
    side_sentence(h, "untied", &sd[0], col);
    /* > 0: untied agrees better */
    double dr = isnan(sd[0].rho) || isnan(sd[1].rho) ? 0 : sd[0].rho - sd[1].rho;
    double df = (double)sd[0].agree / sd[0].n - (double)sd[1].agree / sd[1].n;
    int vr = fabs(dr) < 0.1 ? 0 : dr > 0 ? 1 : -1, vf = fabs(df) < 0.1 ? 0 : df > 0 ? 1 : -1;
    const char *lead = main_col ? "Answer" : "By this measure";
    if (!vr && !vf)
        al_buf_printf(h,
                      "<b>%s:</b> in these models tying the embeddings makes little difference "
                      "to how well the eigenvalue score tracks ablation.</p>\n",
                      lead);
    else if (vr * vf < 0)
        al_buf_printf(h,
                      "<b>%s: mixed.</b> The rank correlation favours %s embeddings, the "
                      "thresholded agreement %s ones; more heads or models are needed to "
                      "settle it.</p>\n",
                      lead, vr > 0 ? "untied" : "tied", vf > 0 ? "untied" : "tied");
    else
        al_buf_printf(h,
                      "<b>%s:</b> the eigenvalue score tracks ablation better with <b>%s</b> "
                      "embeddings%s.</p>\n",
                      lead, vr + vf > 0 ? "untied" : "tied",
                      vr + vf > 0
                          ? ": with W_U = W_E<sup>T</sup> it is the less reliable guide to copying"
                          : "");
}

/* The models' links, then the table and the answers; only with several
 * models. */
int sec_compare(rep *R, const rmodel *M_unused, al_err *e) {
    (void)M_unused;
    if (R->o->n_models < 2) return 0;
    al_buf *h = &R->h;
    al_buf_puts(h, "<nav><b>Models:</b> ");
    for (int i = 0; i < R->o->n_models; i++) {
        al_buf_printf(h, "%s<a href=\"#model-", i ? " &middot; " : "");
        rep_esc(h, R->m[i].slug);
        al_buf_puts(h, "\">");
        rep_esc(h, R->m[i].label);
        al_buf_puts(h, "</a>");
    }
    al_buf_puts(h, "</nav>\n");
    rep_agree a[AL_REPORT_MAX_MODELS], x[AL_REPORT_MAX_MODELS];
    al_buf_puts(h,
                "<h2>Models compared</h2>\n<table><thead><tr><th>model</th><th>layers</th>"
                "<th>embeddings</th><th>val loss</th><th>icl_gain</th><th>induction heads</th>"
                "<th>prev-token heads</th><th>copying: eigen vs ablation agree</th><th>&rho;</th>"
                "<th>eigen vs ablation excess agree</th><th>&rho;</th>"
                "</tr></thead><tbody>\n");
    for (int i = 0; i < R->o->n_models; i++) {
        const rmodel *M = &R->m[i];
        double vl, icl, ni, np;
        al_sr_score isc;
        if (rep_copy_agreement(R, M, 0, &a[i], e) || rep_copy_agreement(R, M, 1, &x[i], e) ||
            al_sr_final_val_loss(R->st, M->mid, &vl, e) || al_sr_icl_gain(R->st, M->mid, &icl, e) ||
            al_sr_induction_score(R->st, M->mid, &isc, e) ||
            al_sr_count_heads_above(R->st, M->mid, isc, &ni, e) ||
            al_sr_count_heads_above(R->st, M->mid, AL_SR_PREV_TOKEN, &np, e))
            return -1;
        al_buf_puts(h, "<tr><td class=t><a href=\"#model-");
        rep_esc(h, M->slug);
        al_buf_puts(h, "\">");
        rep_esc(h, M->label);
        al_buf_printf(h, "</a></td><td>%d</td><td>%s</td>", M->cfg.n_layers,
                      M->cfg.tied_embeddings ? "tied" : "untied");
        al_buf_printf(h, isnan(vl) ? "<td class=na>&ndash;</td>" : "<td>%.4f</td>", vl);
        al_buf_printf(h, isnan(icl) ? "<td class=na>&ndash;</td>" : "<td>%+.4f</td>", icl);
        al_buf_printf(h, "<td>%.0f</td><td>%.0f</td>", ni, np);
        if (a[i].n)
            al_buf_printf(h, "<td>%d of %d</td>", a[i].agree, a[i].n);
        else
            al_buf_puts(h, "<td class=na>&ndash;</td>");
        al_buf_printf(h, isnan(a[i].rho) ? "<td class=na>&ndash;</td>" : "<td>%+.2f</td>",
                      a[i].rho);
        if (x[i].n)
            al_buf_printf(h, "<td>%d of %d</td>", x[i].agree, x[i].n);
        else
            al_buf_puts(h, "<td class=na>&ndash;</td>");
        al_buf_printf(h, isnan(x[i].rho) ? "<td class=na>&ndash;</td>" : "<td>%+.2f</td>",
                      x[i].rho);
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table>\n");
    tied_answer(R, a);
    tied_answer(R, x);
    return 0;
}
