/* sec_weights.c -- the sections of a model's heads: the head summary, the
 * heads each score names, copying by weights against copying by
 * ablation, skip-trigrams, composition, and the pictures of attention
 * patterns, spectra and the chosen heads' QK/OV circuits. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/analyses.h"
#include "attnlab/stats.h"
#include "attnlab/thresholds.h"

/* 1 if M's circuits can be drawn from its weights (the plain model);
 * otherwise a note says why they are not, and 0. */
static int weights_drawn(rep *R, const rmodel *M) {
    if (al_config_is_plain(&M->cfg)) return 1;
    al_buf_puts(&R->h, "<p>Circuits from the weights (spectra, QK and OV circuits, composition) "
                       "are not drawn: this model has LayerNorm or biases, and they are exact "
                       "only for a model without.</p>\n");
    return 0;
}

int sec_heads(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    /* clang-format off */
    al_buf_puts(h, "<h3>Heads at a glance</h3>\n<p>Latest value of each score per head (view "
               "<code>head_summary</code>). Highlighted: induction or prev_token &gt; "
               AL_TH_STR(AL_TH_INDUCTION) ", copying_eigen or copying_top1 &gt; "
               AL_TH_STR(AL_TH_COPY_EIGEN) ", copying_ablation (and its excess over the "
               "other positions) &gt; " AL_TH_STR(AL_TH_COPY_ABLATION) " nats.</p>\n");
    /* clang-format on */
    static const char *const heads[] = {"head",
                                        "induction",
                                        "prev_token",
                                        "duplicate_token",
                                        "copying_eigen",
                                        "copying_top1",
                                        "copying_ablation",
                                        "copying_ablation_excess",
                                        "gradient_importance",
                                        "qk_rank",
                                        "ov_rank",
                                        "qk_eff_rank",
                                        "ov_eff_rank",
                                        "pos_prev_token",
                                        NULL};
    al_rows q;
    int rc = al_sr_head_table(R->st, M->mid, &q, e);
    return rep_rows_table(R, rc, &q, heads, "sIIICCAA3ii223",
                          "No head scores yet (run attnlab circuits and attnlab scores).") < 0
               ? -1
               : 0;
}

/* "0.3 (0.812 ± 0.010), 1.4 (0.455 ± 0.031, undecided)": the heads
 * above a score's threshold thr; with a stored interval, the call "scores
 * command" makes (al_scores_call at the level's z, Bonferroni-corrected
 * for the model's heads): undecided when the interval reaches thr. */
static int name_list(rep *R, const rmodel *M, al_sr_score sc, double thr, const char *what,
                     al_err *e) {
    al_rows q;
    if (al_sr_heads_above(R->st, M->mid, sc, &q, e)) return -1;
    al_buf *h = &R->h;
    al_buf_printf(h, "<li><b>%s</b>: ", what);
    if (!q.nr) al_buf_puts(h, "none");
    int LH = M->cfg.n_layers * M->cfg.n_heads;
    for (int r = 0; r < q.nr; r++) {
        double v = al_rows_x(&q, r, 1), se = q.nc > 3 ? al_rows_x(&q, r, 2) : NAN,
               lv = q.nc > 3 ? al_rows_x(&q, r, 3) : NAN;
        al_buf_printf(h, "%s", r ? ", " : "");
        rep_esc(h, al_rows_t(&q, r, 0));
        if (!isfinite(se) || !(lv > 0 && lv < 1)) {
            al_buf_printf(h, " (%.3f)", v);
            continue;
        }
        int call = al_scores_call(v, se, al_normal_quantile(1 - (1 - lv) / LH), thr);
        al_buf_printf(h, " (%.3f &plusmn; %.3f%s)", v, se, call > 0 ? "" : ", undecided");
    }
    al_buf_puts(h, "</li>\n");
    al_rows_free(&q);
    return 0;
}

int sec_kinds(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Induction, previous-token and copying heads</h3>\n<ul>\n");
    al_sr_score isc;
    if (al_sr_induction_score(R->st, M->mid, &isc, e)) return -1;
    if (name_list(
            R, M, isc, AL_TH_INDUCTION,
            /* clang-format off */
                  isc == AL_SR_INDUCTION_ALL
                      ? "induction heads on held-out text (induction_all &gt; " AL_TH_STR(AL_TH_INDUCTION)
                        ": attention to the successor of every earlier occurrence)"
                      : "induction heads (induction &gt; " AL_TH_STR(AL_TH_INDUCTION) ")", e) ||
        name_list(R, M, AL_SR_PREV_TOKEN, AL_TH_PREV_TOKEN,
                  "previous-token heads (prev_token &gt; " AL_TH_STR(AL_TH_PREV_TOKEN) ")", e) ||
        name_list(R, M, AL_SR_COPY_ABLATION, AL_TH_COPY_ABLATION,
                  "copying heads by ablation (copying_ablation &gt; " AL_TH_STR(AL_TH_COPY_ABLATION)
                  " nats)", e) ||
        name_list(R, M, AL_SR_COPY_EIGEN, AL_TH_COPY_EIGEN,
                  "copying heads by eigenvalues (copying_eigen &gt; " AL_TH_STR(AL_TH_COPY_EIGEN) ")", e))
        return -1;
    /* clang-format on */
    al_buf_puts(h, "</ul>\n");
    static const char *const heads[] = {"metric", "value", NULL};
    al_rows q;
    int rc = al_sr_score_metrics(R->st, M->mid, &q, e);
    if (rep_rows_table(R, rc, &q, heads, "s4", NULL) < 0) return -1;
    double run;
    if (al_sr_latest_scores_intervals(R->st, M->mid, &run, e)) return -1;
    if (isnan(run)) return 0;
    al_pic_opts po = al_pic_defaults();
    po.run_id = (long)run;
    rep_run_picture(R, M, &po, "intervals", "scores",
                    "The strongest heads by each score with their 95% intervals over the probe's "
                    "sequences; dashed, the threshold of the calls above.");
    return 0;
}

/* Agreement of the weight-based and an ablation-based copying score:
 * copying_ablation (docs/design.md §5), or copying_ablation_excess, which does not
 * count a head's general usefulness (any head that lowers the loss
 * everywhere also lowers it at copy positions) as copying. */
static const char *const ABL_COL[2] = {"copying_ablation", "copying_ablation_excess"};

int rep_copy_agreement(rep *R, const rmodel *M, int excess, rep_agree *a, al_err *e) {
    const char *col = ABL_COL[excess != 0];
    memset(a, 0, sizeof *a);
    a->rho = NAN;
    a->col = col;
    al_rows q;
    if (al_sr_copy_pairs(R->st, M->mid, excess != 0, &q, e)) return -1;
    double *x = malloc(sizeof(double) * (size_t)(q.nr + 1) * 2);
    if (!x) {
        al_rows_free(&q);
        return al_errf(e, "out of memory");
    }
    double *y = x + q.nr + 1;
    a->n = q.nr;
    for (int r = 0; r < q.nr; r++) {
        x[r] = al_rows_x(&q, r, 1);
        y[r] = al_rows_x(&q, r, 2);
        int ce = x[r] > AL_TH_COPY_EIGEN, ca = y[r] > AL_TH_COPY_ABLATION;
        a->agree += ce == ca;
        a->abl_copy += ca;
        if (ca && x[r] < 0) {
            char one[96];
            snprintf(one, sizeof one, "%s%s (copying_eigen %+.2f, %s %+.3f nats)",
                     a->abl_copy_neg ? ", " : "", al_rows_t(&q, r, 0), x[r],
                     col == ABL_COL[0] ? "ablation" : "excess", y[r]);
            strncat(a->neg, one, sizeof a->neg - strlen(a->neg) - 1);
            a->abl_copy_neg++;
        }
    }
    a->rho = al_spearman(x, y, q.nr);
    free(x);
    al_rows_free(&q);
    return 0;
}

static void agree_sentence(al_buf *h, const rep_agree *a) {
    /* clang-format off */
    al_buf_printf(h, "The eigenvalue score (copying_eigen &gt; " AL_TH_STR(AL_TH_COPY_EIGEN)
                  ") and mean ablation (%s &gt; " AL_TH_STR(AL_TH_COPY_ABLATION) " nats) agree on "
                  "<b>%d of %d</b> heads; Spearman rank correlation between the two scores over "
                  "all heads: <b>&rho; = ",
                  a->col, a->agree, a->n);
    /* clang-format on */
    if (isnan(a->rho))
        al_buf_puts(h, "undefined");
    else
        al_buf_printf(h, "%+.2f", a->rho);
    al_buf_printf(h, "</b>. By %s, %d head%s cop%s", a->col, a->abl_copy,
                  a->abl_copy == 1 ? "" : "s", a->abl_copy == 1 ? "ies" : "y");
    if (a->abl_copy_neg) {
        al_buf_printf(h, ", of which the eigenvalue score calls %d negative: ", a->abl_copy_neg);
        rep_esc(h, a->neg);
        al_buf_puts(h, ".");
    } else {
        al_buf_puts(h, a->abl_copy ? "; the eigenvalue score calls none of them negative." : ".");
    }
}

int sec_copying(rep *R, const rmodel *M, al_err *e) {
    rep_agree a[2];
    if (rep_copy_agreement(R, M, 0, &a[0], e) || rep_copy_agreement(R, M, 1, &a[1], e)) return -1;
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Copying: weights vs behaviour</h3>\n");
    if (!a[0].n) {
        al_buf_puts(h, "<p class=none>Needs copying_eigen (attnlab circuits) and copying_ablation "
                       "(attnlab scores --data) for the same model.</p>\n");
        return 0;
    }
    for (int k = 0; k < 2 && a[k].n; k++) {
        al_buf_puts(h, "<p>");
        if (k)
            al_buf_puts(h, "Counting only what ablating a head costs at copy positions beyond its "
                           "cost at the other positions: ");
        agree_sentence(h, &a[k]);
        al_buf_puts(h, "</p>\n");
    }
    return 0;
}

int sec_trigrams(rep *R, const rmodel *M, al_err *e) {
    al_buf_puts(
        &R->h, "<h3>Top skip-trigrams (layer 0)</h3>\n<p>\"A &hellip; B &rarr; C\": "
               "destination B attends to source A, whose value raises output C (score = qk &times; "
               "ov, from the full QK and OV circuits; &#9251; = a leading space). The best two of "
               "each head, strongest first.</p>\n");
    static const char *const heads[] = {"head", "A … B → C", "qk", "ov", "score", NULL};
    al_rows q;
    int rc = al_sr_skip_trigrams(R->st, M->mid, &q, e);
    return rep_rows_table(R, rc, &q, heads, "ss223", "No skip-trigrams (run attnlab circuits).") < 0
               ? -1
               : 0;
}

int sec_composition(rep *R, const rmodel *M, al_err *e) {
    if (M->cfg.n_layers < 2) return 0;
    al_buf *h = &R->h;
    al_buf_puts(h, "<h3>Composition</h3>\n<p>Strongest pairs per kind, with how many standard "
                   "deviations they stand above random heads of the same shapes.</p>\n");
    static const char *const heads[] = {"kind",  "earlier head",    "later head",
                                        "score", "random baseline", "sd above",
                                        NULL};
    al_rows q;
    int rc = al_sr_composition_top(R->st, M->mid, &q, e);
    int pic = rep_want_pic(R, "composition") && al_config_is_plain(&M->cfg);
    /* the picture is computed from the weights, so it is there even when
     * no circuits run stored the scores */
    if (rep_rows_table(R, rc, &q, heads, "sss332",
                       pic ? "No composition scores in the database (attnlab circuits stores "
                             "them); the picture below is computed from the weights."
                           : "No composition scores (run attnlab circuits).") < 0)
        return -1;
    if (pic && weights_drawn(R, M)) {
        al_pic_opts po = al_pic_defaults();
        po.what = "composition";
        char file[256];
        snprintf(file, sizeof file, "%s-composition.png", M->slug);
        rep_picture(R, M, &po, file,
                    "Q-, K- and V-composition of every earlier head into every later "
                    "head; the random baseline is marked on the colour bar.");
    }
    return 0;
}

int sec_pictures(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    char file[256], cap[512];
    al_buf_puts(h,
                "<h3>Attention patterns and circuits</h3>\n<p>In attention pictures rows are "
                "destination (query) tokens and columns source (key) tokens: the query attends to "
                "the key, and information flows from the key to the query.</p>\n");
    for (int l = 0; l < M->cfg.n_layers && rep_want_pic(R, "attention"); l++) {
        al_pic_opts po = al_pic_defaults();
        po.what = "attention";
        po.layer = l;
        if (R->o->prompt) {
            po.prompt = R->o->prompt;
            snprintf(file, sizeof file, "%s-attention-L%d.png", M->slug, l);
            snprintf(cap, sizeof cap, "Layer %d, every head, on the prompt.", l);
            rep_picture(R, M, &po, file, cap);
            po.prompt = NULL;
        }
        if (R->o->repeat > 0) {
            po.repeat = R->o->repeat;
            snprintf(file, sizeof file, "%s-repeat-L%d.png", M->slug, l);
            snprintf(cap, sizeof cap,
                     "Layer %d, every head, on %d random tokens shown twice: an "
                     "induction head lights the diagonal one step after the repeat's start; a "
                     "previous-token head the sub-diagonal.",
                     l, R->o->repeat);
            rep_picture(R, M, &po, file, cap);
        }
    }
    if (!weights_drawn(R, M)) return 0;
    if (rep_want_pic(R, "spectrum")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "spectrum";
        snprintf(file, sizeof file, "%s-spectrum.png", M->slug);
        rep_picture(R, M, &po, file, "Singular values of every head's W_QK and W_OV.");
    }
    int l, hh, f;
    if ((f = al_sr_best_head(R->st, M->mid, AL_SR_PICK_PREV, &l, &hh, e)) < 0) return -1;
    if (f && rep_want_pic(R, "qk-pos")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "qk-pos";
        po.layer = l, po.head = hh, po.n_pos = 48;
        snprintf(file, sizeof file, "%s-qk-pos-%d.%d.png", M->slug, l, hh);
        snprintf(cap, sizeof cap, "Positional QK of head %d.%d, the strongest previous-token head.",
                 l, hh);
        rep_picture(R, M, &po, file, cap);
    }
    /* The picture should show copying in the head's own OV circuit (a red
     * diagonal): prefer heads whose eigenvalue score says so, ranked by
     * what ablation says they contribute. Ablation alone can pick a head
     * that copies only through a later head (a previous-token head). */
    /* clang-format off */
    const char *why = "the head whose own OV circuit copies (copying_eigen > "
                      AL_TH_STR(AL_TH_COPY_EIGEN) ") and that "
                      "matters most to copying by ablation";
    /* clang-format on */
    if ((f = al_sr_best_head(R->st, M->mid, AL_SR_PICK_OWN_COPY, &l, &hh, e)) < 0) return -1;
    if (!f) {
        why = "the strongest copying head";
        if ((f = al_sr_best_head(R->st, M->mid, AL_SR_PICK_ANY_COPY, &l, &hh, e)) < 0) return -1;
    }
    const char *kinds[2] = {"qk", "ov"};
    for (int k = 0; f && k < 2; k++) {
        if (!rep_want_pic(R, kinds[k])) continue;
        al_pic_opts po = al_pic_defaults();
        po.what = kinds[k];
        po.layer = l, po.head = hh, po.top_n = R->o->top_n > 0 ? R->o->top_n : 30;
        po.data = R->o->data;
        snprintf(file, sizeof file, "%s-%s-%d.%d.png", M->slug, kinds[k], l, hh);
        snprintf(cap, sizeof cap,
                 "Full %s circuit of head %d.%d, %s, on the %d most "
                 "frequent tokens.",
                 k ? "OV" : "QK", l, hh, why, po.top_n);
        rep_picture(R, M, &po, file, cap);
    }
    return 0;
}
