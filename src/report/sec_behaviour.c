/* sec_behaviour.c -- the behaviour sections: ablation (each head alone
 * and pairs, per method), pruning (loss against heads left, per method)
 * and, across models, the names table of `attnlab names`. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sec_ablation(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Ablation</h3>\n");
    al_rows runs;
    if (al_sr_ablation_runs(R->st, M->mid, &runs, e)) return -1;
    if (!runs.nr) al_buf_puts(h, "<p class=none>No ablation runs (attnlab ablate).</p>\n");
    static const char *const heads[] = {"head", "loss", "Δloss", "Δloss copy", "Δloss probe", NULL};
    static const char *const pheads[] = {"pair", "Δloss", "interaction", NULL};
    int rc = 0;
    for (int i = 0; rc == 0 && i < runs.nr; i++) {
        const char *m = al_rows_t(&runs, i, 0), *run = al_rows_t(&runs, i, 1);
        double clean;
        if (al_sr_ablation_clean(R->st, run, m, &clean, e)) {
            rc = -1;
            break;
        }
        al_buf_puts(h, "<p><b>");
        rep_esc(h, m);
        al_buf_printf(h,
                      "-ablation</b> (run %s): loss with all heads %.4f; each head alone, most "
                      "costly first:</p>\n",
                      run, clean);
        al_rows q;
        int qrc = al_sr_ablation_singles(R->st, run, m, &q, e);
        if (rep_rows_table(R, qrc, &q, heads, "s4+++", NULL) < 0) {
            rc = -1;
            break;
        }
        qrc = al_sr_ablation_pairs(R->st, run, m, &q, e);
        if (rep_rows_table(R, qrc, &q, pheads, "s++", NULL) < 0) rc = -1;
    }
    al_rows_free(&runs);
    double n;
    if (rc || al_sr_ablation_count(R->st, M->mid, &n, e)) return -1;
    if (n > 0 && rep_want_pic(R, "ablation")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "ablation";
        char file[256];
        snprintf(file, sizeof file, "%s-ablation.png", M->slug);
        rep_picture(R, M, &po, file,
                    "Ablation: validation Δloss when each head is ablated alone, and "
                    "pair interactions Δ(pair) − Δ(h1) − Δ(h2).");
    }
    return 0;
}

/* Loss against heads remaining, one column per pruning method. */
int sec_pruning(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Pruning</h3>\n");
    al_rows runs;
    if (al_sr_pruning_runs(R->st, M->mid, &runs, e)) return -1;
    if (!runs.nr) {
        al_buf_puts(h, "<p class=none>No pruning runs (attnlab prune).</p>\n");
        al_rows_free(&runs);
        return 0;
    }
    int LH = M->cfg.n_layers * M->cfg.n_heads, nm = runs.nr, rc = 0;
    double *loss = malloc(sizeof(double) * (size_t)(LH + 1) * nm);
    if (!loss) {
        al_rows_free(&runs);
        return al_errf(e, "out of memory");
    }
    for (int i = 0; i < (LH + 1) * nm; i++) loss[i] = NAN;
    al_buf_puts(
        h,
        "<p>Each step removes the head the method ranks least important. Order of removal:</p><ul>\n");
    for (int k = 0; rc == 0 && k < nm; k++) {
        al_rows s;
        if (al_sr_pruning_steps(R->st, al_rows_t(&runs, k, 1), &s, e)) {
            rc = -1;
            break;
        }
        al_buf_puts(h, "<li><b>");
        rep_esc(h, al_rows_t(&runs, k, 0));
        al_buf_puts(h, "</b>: ");
        for (int r = 0; r < s.nr; r++) {
            int left = (int)al_rows_x(&s, r, 0);
            if (left >= 0 && left <= LH) loss[left * nm + k] = al_rows_x(&s, r, 1);
            if (al_rows_t(&s, r, 2)) {
                al_buf_puts(h, r > 1 ? ", " : "");
                rep_esc(h, al_rows_t(&s, r, 2));
            }
        }
        al_buf_puts(h, "</li>\n");
        al_rows_free(&s);
    }
    al_buf_puts(h, "</ul>\n<table><thead><tr><th>heads left</th>");
    for (int k = 0; k < nm; k++) {
        al_buf_puts(h, "<th>loss (");
        rep_esc(h, al_rows_t(&runs, k, 0));
        al_buf_puts(h, ")</th>");
    }
    al_buf_puts(h, "</tr></thead><tbody>\n");
    for (int left = LH; left >= 0; left--) {
        int any = 0;
        for (int k = 0; k < nm; k++) any |= !isnan(loss[left * nm + k]);
        if (!any) continue;
        al_buf_printf(h, "<tr><td>%d</td>", left);
        for (int k = 0; k < nm; k++) {
            double v = loss[left * nm + k];
            if (isnan(v))
                al_buf_puts(h, "<td class=na>&ndash;</td>");
            else
                al_buf_printf(h, "<td>%.4f</td>", v);
        }
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table>\n");
    free(loss);
    al_rows_free(&runs);
    if (rc) return -1;
    if (rep_want_pic(R, "pruning")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "pruning";
        char file[256];
        snprintf(file, sizeof file, "%s-pruning.png", M->slug);
        rep_picture(R, M, &po, file,
                    "Pruning: validation loss as heads are removed, one line per "
                    "importance method.");
    }
    return 0;
}

/* ------------------------------------------------------ names table */

/* The seed notes' copying table (attnlab names): per name piece, each
 * model's mean probability at the name's first and second appearance,
 * side by side. Nothing when no model has a names run. */
int sec_names(rep *R, const rmodel *M, al_err *e) {
    (void)M;
    al_buf *h = &R->h;
    double k = 0, any = 0;
    for (int i = 0; i < R->o->n_models; i++) {
        double ki;
        if (al_sr_names_pieces(R->st, R->m[i].mid, &ki, e)) return -1;
        if (ki > k) k = ki;
        any += ki > 0;
    }
    if (!any) return 0;
    al_rows nm;
    if (al_sr_names_run(R->st, &nm, e)) return -1;
    al_buf_puts(h, "<section id=\"names\"><h2>Copying a name (the seed notes' table)</h2>\n<p>");
    al_buf_printf(h, "Held-out stories (%.0f) with the name ", nm.nr ? al_rows_x(&nm, 0, 1) : 0.0);
    if (nm.nr && al_rows_t(&nm, 0, 0)) {
        al_buf_puts(h, "&ldquo;");
        rep_esc(h, al_rows_t(&nm, 0, 0));
        al_buf_puts(h, "&rdquo;");
    } else {
        al_buf_puts(h, "invented per story");
    }
    al_rows_free(&nm);
    al_buf_puts(
        h, " inserted twice: the probability of each name piece at its first appearance "
           "(nothing to copy) and its second (a copy). An induction head raises pieces 2.. at the "
           "second appearance.</p>\n<table><thead><tr><th>piece</th>");
    for (int i = 0; i < R->o->n_models; i++) {
        al_buf_puts(h, "<th>");
        rep_esc(h, R->m[i].label);
        al_buf_puts(h, ": 1st</th><th>");
        rep_esc(h, R->m[i].label);
        al_buf_puts(h, ": 2nd</th>");
    }
    al_buf_puts(h, "</tr></thead><tbody>\n");
    for (int j = 1; j <= (int)k + 1; j++) {
        char m1[40], m2[40];
        if (j <= (int)k) {
            snprintf(m1, sizeof m1, "names_first_p%d", j);
            snprintf(m2, sizeof m2, "names_second_p%d", j);
            al_buf_printf(h, "<tr><td>%d</td>", j);
        } else {
            snprintf(m1, sizeof m1, "names_first_rest");
            snprintf(m2, sizeof m2, "names_second_rest");
            al_buf_puts(h, "<tr><td>2.. (mean)</td>");
        }
        for (int i = 0; i < R->o->n_models; i++) {
            double a, b;
            if (al_sr_names_value(R->st, R->m[i].mid, m1, &a, e) ||
                al_sr_names_value(R->st, R->m[i].mid, m2, &b, e))
                return -1;
            al_buf_printf(h, isnan(a) ? "<td class=na>&ndash;</td>" : "<td>%.4f</td>", a);
            al_buf_printf(h, isnan(b) ? "<td class=na>&ndash;</td>" : "<td>%.4f</td>", b);
        }
        al_buf_puts(h, "</tr>\n");
    }
    al_buf_puts(h, "</tbody></table></section>\n");
    return 0;
}
