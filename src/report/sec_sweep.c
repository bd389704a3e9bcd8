/* sec_sweep.c -- "Across seeds", before the models when the database
 * holds a sweep (merged rows, or several seeds of one setting): view
 * sweep_summary as a table, sentences from its numbers and the
 * sweep-induction picture. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attnlab/stats.h"
#include "attnlab/thresholds.h"

/* Columns of al_sr_sweep_summary's rows, in order. */
enum {
    SW_SETTING,
    SW_LAYERS,
    SW_SEEDS,
    SW_MODELS,
    SW_SCORED,
    SW_SHARE,
    SW_CURVES,
    SW_NEVER,
    SW_FS_MEAN,
    SW_FS_SD,
    SW_FS_MIN,
    SW_FS_MAX,
    SW_BI_MEAN,
    SW_BI_MIN,
    SW_BI_MAX,
    SW_NK,
    SW_KSHARE,
    SW_NC,
    SW_COPY,
    SW_BI_SD,
    SW_BI_LO,
    SW_BI_HI,
    SW_FS_LO,
    SW_FS_HI
};

/* Whether the database holds findings across seeds: rows merged from
 * other databases, or a (setting, layer count) with several seeds. */
static int has_sweep(rep *R, int *yes, al_err *e) {
    double v;
    if (al_sr_has_sweep(R->st, &v, e)) return -1;
    *yes = v > 0;
    return 0;
}

/* "k of n" from a share of n (the view stores k / n). */
static int of_n(const al_rows *q, int r, int share_col, int n_col) {
    return (int)lround(al_rows_x(q, r, share_col) * al_rows_x(q, r, n_col));
}

/* The sentences of one group, every number from its sweep_summary row. */
static void sweep_sentences(al_buf *h, const al_rows *q, int r) {
    const char *set = al_rows_t(q, r, SW_SETTING);
    int L = (int)al_rows_x(q, r, SW_LAYERS), scored = (int)al_rows_x(q, r, SW_SCORED);
    int curves = (int)al_rows_x(q, r, SW_CURVES), never = (int)al_rows_x(q, r, SW_NEVER);
    int crossed = curves - never, nk = (int)al_rows_x(q, r, SW_NK),
        nc = (int)al_rows_x(q, r, SW_NC);
    const char *unit = al_rows_x(q, r, SW_SEEDS) == al_rows_x(q, r, SW_MODELS) ? "seeds" : "models";
    al_buf_puts(h, "<p><b>");
    rep_esc(h, set ? set : "all models");
    al_buf_printf(h, ", %d layer%s:</b> ", L, L == 1 ? "" : "s");
    /* clang-format off */
    if (scored > 1)
        al_buf_printf(h, "in <b>%d of %d</b> %s an induction head formed (best final induction "
                      "score &gt; " AL_TH_STR(AL_TH_INDUCTION) "; mean %.2f, 95%% t interval %.2f "
                      "to %.2f over the %d %s; min %.2f, max %.2f). ",
                      of_n(q, r, SW_SHARE, SW_SCORED), scored, unit, al_rows_x(q, r, SW_BI_MEAN),
                      al_rows_x(q, r, SW_BI_LO), al_rows_x(q, r, SW_BI_HI), scored, unit,
                      al_rows_x(q, r, SW_BI_MIN), al_rows_x(q, r, SW_BI_MAX));
    else if (scored)
        al_buf_printf(h, "in <b>%d of 1</b> %s an induction head formed (best final induction "
                      "score &gt; " AL_TH_STR(AL_TH_INDUCTION) ": %.2f; one run, so no interval). ",
                      of_n(q, r, SW_SHARE, SW_SCORED), unit, al_rows_x(q, r, SW_BI_MEAN));
    /* clang-format on */
    else
        al_buf_puts(h, "no model has a final induction score (attnlab scores). ");
    /* clang-format off */
    if (crossed > 1)
        al_buf_printf(h, "The best head's induction score first crossed " AL_TH_STR(AL_TH_INDUCTION)
                      " at step <b>%.0f &plusmn; %.0f</b> (mean &plusmn; sd over %d runs; 95%% t "
                      "interval of the mean %.0f to %.0f; min %.0f, max %.0f)",
                      al_rows_x(q, r, SW_FS_MEAN), al_rows_x(q, r, SW_FS_SD), crossed,
                      al_rows_x(q, r, SW_FS_LO), al_rows_x(q, r, SW_FS_HI),
                      al_rows_x(q, r, SW_FS_MIN), al_rows_x(q, r, SW_FS_MAX));
    else if (crossed == 1)
        al_buf_printf(h, "The best head's induction score first crossed " AL_TH_STR(AL_TH_INDUCTION)
                      " at step <b>%.0f</b> (one run)", al_rows_x(q, r, SW_FS_MIN));
    /* clang-format on */
    if (crossed && never)
        al_buf_printf(h, "; %d of %d training curves never did. ", never, curves);
    else if (crossed)
        al_buf_puts(h, ". ");
    /* clang-format off */
    else if (curves == 1)
        al_buf_puts(h, "In its one training curve the best head's induction score never crossed "
                       AL_TH_STR(AL_TH_INDUCTION) ". ");
    else if (curves)
        al_buf_printf(h, "In none of %d training curves did the best head's induction score cross "
                      AL_TH_STR(AL_TH_INDUCTION) ". ", curves);
    /* clang-format on */
    if (nk)
        al_buf_printf(h,
                      "The top K-composition pair was the pair of largest |interaction| in "
                      "pair ablation in <b>%d of %d</b> models. ",
                      of_n(q, r, SW_KSHARE, SW_NK), nk);
    if (nc)
        al_buf_printf(h,
                      "copying_eigen and copying_ablation classified %.0f%% of heads alike "
                      "(mean over %d model%s).",
                      100 * al_rows_x(q, r, SW_COPY), nc, nc == 1 ? "" : "s");
    al_buf_puts(h, "</p>\n");
}

/* How many seeds the difference between two settings of one layer count
 * needs (al_seeds_needed at their pooled sd), for each such pair with two
 * or more scored models on both sides: a difference the sweep cannot
 * tell from seed-to-seed spread is said to be so. */
static void seeds_needed(al_buf *h, const al_rows *q) {
    for (int a = 0; a < q->nr; a++)
        for (int b = a + 1; b < q->nr; b++) {
            int na = (int)al_rows_x(q, a, SW_SCORED), nb = (int)al_rows_x(q, b, SW_SCORED);
            if (al_rows_x(q, a, SW_LAYERS) != al_rows_x(q, b, SW_LAYERS) || na < 2 || nb < 2)
                continue;
            double sa = al_rows_x(q, a, SW_BI_SD), sb = al_rows_x(q, b, SW_BI_SD);
            double d = al_rows_x(q, b, SW_BI_MEAN) - al_rows_x(q, a, SW_BI_MEAN);
            double sd = sqrt(((na - 1) * sa * sa + (nb - 1) * sb * sb) / (na + nb - 2));
            double n = al_seeds_needed(d, sd, 0.95, 0.8);
            const char *ta = al_rows_t(q, a, SW_SETTING), *tb = al_rows_t(q, b, SW_SETTING);
            al_buf_puts(h, "<p>");
            rep_esc(h, tb ? tb : "-");
            al_buf_puts(h, " against ");
            rep_esc(h, ta ? ta : "-");
            al_buf_printf(h, " (%d layer%s): best induction differs by %+.3f (pooled sd %.3f). ",
                          (int)al_rows_x(q, a, SW_LAYERS),
                          al_rows_x(q, a, SW_LAYERS) == 1 ? "" : "s", d, sd);
            if (isnan(n))
                al_buf_puts(h, "No difference to size seeds for.</p>\n");
            else
                al_buf_printf(h,
                              "To show a difference this size at the 5%% level with 80%% power "
                              "needs about <b>%.0f seeds per setting</b> (normal approximation); "
                              "this sweep has %d and %d.</p>\n",
                              n, na, nb);
        }
}

/* Findings across seeds (a merged sweep database): view sweep_summary as a table, a few
 * sentences per group, and the sweep-induction picture. Only when the
 * database has merged rows or several seeds of one setting. */
int sec_sweep(rep *R, const rmodel *M, al_err *e) {
    (void)M;
    int yes;
    if (has_sweep(R, &yes, e)) return -1;
    if (!yes) return 0;
    al_rows q;
    if (al_sr_sweep_summary(R->st, &q, e)) return -1;
    al_buf *h = &R->h;
    /* clang-format off */
    al_buf_puts(h, "<section id=\"across-seeds\"><h2>Across seeds</h2>\n<p>One row per setting "
                   "(the swept values other than the seed) and layer count, over its models "
                   "(view <code>sweep_summary</code>, docs/design.md &sect;6). Induction head: "
                   "best final induction score &gt; " AL_TH_STR(AL_TH_INDUCTION) " (the newest "
                   "scores run); first step: the first evaluation of training at which any "
                   "head's induction score exceeds " AL_TH_STR(AL_TH_INDUCTION) " (sd: sample sd); "
                   "K-comp: whether the K-composition pair of the largest score is the pair of "
                   "largest |interaction| in pair ablation (2-layer models); copying: the share of "
                   "heads whose copying_eigen and copying_ablation agree, mean over models.</p>\n");
    /* clang-format on */
    static const char *const heads[] = {"setting",
                                        "layers",
                                        "seeds",
                                        "models",
                                        "with scores",
                                        "induction head",
                                        "curves",
                                        "never crossed",
                                        "first step mean",
                                        "sd",
                                        "min",
                                        "max",
                                        "best induction mean",
                                        "min",
                                        "max",
                                        "K-comp models",
                                        "K-comp = top interaction",
                                        "copying models",
                                        "copying agree",
                                        "best induction sd",
                                        "95% lo",
                                        "95% hi",
                                        "first step 95% lo",
                                        "95% hi",
                                        NULL};
    if (q.nr)
        rep_table(R, &q, heads, "siiii2ii00ii333i2i233300");
    else
        al_buf_puts(h, "<p class=none>No model has a finished run.</p>\n");
    for (int r = 0; r < q.nr; r++) sweep_sentences(h, &q, r);
    seeds_needed(h, &q);
    al_rows_free(&q);
    if (rep_want_pic(R, "sweep-induction")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "sweep-induction";
        rep_picture(R, NULL, &po, "across-seeds-induction.png",
                    "Across seeds: each model's best induction score over training, one faint line "
                    "per seed, their mean bold, one panel per setting and layer count.");
    }
    al_buf_puts(h, "</section>\n");
    return 0;
}
