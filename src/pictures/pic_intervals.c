/* pic_intervals.c -- the picture "intervals" (family behaviour): a run's
 * numbers with their 95% intervals, as bars with whiskers.
 *
 *   scores  the strongest heads by induction, by induction_all and by
 *           previous-token score, the threshold of the call dashed, each
 *           head's bootstrap interval over the probe's sequences;
 *   patch   the strongest activation patching effects,
 *   paths   the strongest path patching effects, each with its interval
 *           over the pairs.
 *
 * Everything comes from score_intervals, so any run that stored
 * intervals draws without the model being run again. */
#include "pictures_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/patch.h"
#include "attnlab/thresholds.h"

#define SHOWN_HEADS 6 /* per score */
#define SHOWN_EFFECTS 12

typedef al_store_interval_row irow;

/* The run: --run, else the newest with intervals; checked. */
static int interval_run(pic *p, al_store_run_head *h, al_err *e) {
    long run = p->o->run_id;
    if (run <= 0 && (al_store_latest_interval_run(p->st, p->model_id, &run, e) ||
                     pic_need_run(p, run, "scores", "with intervals (or patch, paths)", e)))
        return -1;
    if (al_store_read_interval_run(p->st, run, h, e)) return -1;
    if (h->found && strcmp(h->kind, "scores") && strcmp(h->kind, "patch") &&
        strcmp(h->kind, "paths"))
        return al_errf(e,
                       "run %ld is a '%s' run; --what intervals draws scores, patch and paths runs",
                       run, h->kind);
    if (h->found && !strcmp(h->status, "done") && !h->has_row)
        return al_errf(e, "run %ld stored no intervals (--what intervals needs a run that did)",
                       run);
    return pic_run_checked(p, h, h->found ? h->kind : "scores", "intervals", e);
}

/* The label of an effect's row: "1.5", "1.5@12", "L1@12" (patch);
 * "0.4>1.5 k", "0.4>logits" (paths, pos = the sender's index). */
static char *effect_label(pic *p, const irow *r, int paths, al_err *e) {
    if (paths) {
        char snd[32];
        al_paths_sender_name(p->H, (int)r->pos, snd, sizeof snd);
        if (r->layer < 0) return pic_printf(p, e, "%s>logits", snd);
        return pic_printf(p, e, "%s>%d.%d %s", snd, (int)r->layer, (int)r->head,
                          r->metric + strlen("path_effect_"));
    }
    if (r->head >= 0 && r->pos >= 0)
        return pic_printf(p, e, "%d.%d@%d", (int)r->layer, (int)r->head, (int)r->pos);
    if (r->head >= 0) return pic_printf(p, e, "%d.%d", (int)r->layer, (int)r->head);
    if (r->layer >= 0 && r->pos >= 0) return pic_printf(p, e, "L%d@%d", (int)r->layer, (int)r->pos);
    return pic_printf(p, e, "%s", r->metric);
}

/* Up to `shown` rows of metric prefix `pre` (whole name when exact),
 * largest |value| (sign = 0) or value (sign = 1) first, into the bars'
 * arrays at *n, as group g. */
static int pick(pic *p, const irow *rows, int nr, const char *pre, int exact, int shown, int sign,
                int paths, int g, double *v, double *lo, double *hi, int *grp, const char **lab,
                int *n, al_err *e) {
    char *used = pic_calloc(p, (size_t)nr + 1, 1, e);
    if (!used) return -1;
    size_t k = strlen(pre);
    for (int s = 0; s < shown; s++) {
        int best = -1;
        for (int i = 0; i < nr; i++) {
            const irow *r = &rows[i];
            if (used[i] || !r->metric || !isfinite(r->value) ||
                (exact ? strcmp(r->metric, pre) : strncmp(r->metric, pre, k)))
                continue;
            double a = sign ? r->value : fabs(r->value), b = best < 0 ? 0
                                                             : sign   ? rows[best].value
                                                                      : fabs(rows[best].value);
            if (best < 0 || a > b) best = i;
        }
        if (best < 0) break;
        used[best] = 1;
        const irow *r = &rows[best];
        v[*n] = r->value, lo[*n] = r->lo, hi[*n] = r->hi, grp[*n] = g;
        if (!(lab[*n] = effect_label(p, r, paths, e))) return -1;
        (*n)++;
    }
    return 0;
}

int pic_draw_intervals(pic *p, al_err *e) {
    al_store_run_head h;
    if (interval_run(p, &h, e)) return -1;
    irow *rows = NULL;
    int nr = 0;
    if (al_store_read_intervals(p->st, h.run, &rows, &nr, e)) return -1;
    if (!pic_keep(p, rows, e) && nr) return -1;
    const int cap = 3 * SHOWN_HEADS + SHOWN_EFFECTS;
    double *v = pic_calloc(p, cap, sizeof *v, e), *lo = pic_calloc(p, cap, sizeof *lo, e),
           *hi = pic_calloc(p, cap, sizeof *hi, e);
    int *grp = pic_calloc(p, cap, sizeof *grp, e), n = 0;
    const char **lab = pic_calloc(p, cap, sizeof *lab, e);
    if (!v || !lo || !hi || !grp || !lab) return -1;
    int scores = !strcmp(h.kind, "scores"), paths = !strcmp(h.kind, "paths");
    static const char *const score_groups[] = {"induction", "induction_all", "prev_token"};
    const char **names = pic_calloc(p, 3, sizeof *names, e);
    if (!names) return -1;
    int ng = 0;
    if (scores) {
        /* both induction scores (the run names heads by induction_all on a
         * text probe, else by induction; the database does not say which
         * probe it was), then the previous-token score */
        for (int q = 0; q < 3; q++) {
            names[ng] = score_groups[q];
            if (pick(p, rows, nr, score_groups[q], 1, SHOWN_HEADS, 1, 0, ng, v, lo, hi, grp, lab,
                     &n, e))
                return -1;
            ng++;
        }
    } else if (pick(p, rows, nr, paths ? "path_effect_" : "effect_", 0, SHOWN_EFFECTS, 0, paths, 0,
                    v, lo, hi, grp, lab, &n, e))
        return -1;
    if (n == 0) return al_errf(e, "run %ld has no finite number with an interval to draw", h.run);
    al_panel *q = pic_add_panel(p, AL_PANEL_BARS);
    q->bars = (al_bars){.v = v,
                        .n = n,
                        .group = grp,
                        .group_names = scores ? names : NULL,
                        .n_groups = scores ? ng : 1,
                        .labels = lab,
                        .y_title = scores ? "score" : "normalised effect",
                        .h = 240,
                        .lo = lo,
                        .hi = hi,
                        .has_ref = scores,
                        .ref = AL_TH_INDUCTION};
    if (scores) {
        snprintf(p->title, sizeof p->title,
                 "head scores with their 95%% intervals: the %d strongest heads per score",
                 SHOWN_HEADS);
        pic_note(p,
                 "whiskers: the bootstrap interval over the probe's sequences; dashed: the "
                 "threshold %g of the calls (a call also needs the simultaneous interval "
                 "above it)",
                 AL_TH_INDUCTION);
    } else {
        snprintf(p->title, sizeof p->title,
                 "%s patching: the %d strongest effects with their 95%% intervals",
                 paths ? "path" : "activation", n);
        pic_note(p, "whiskers: the bootstrap interval over the pairs (pairs resampled whole, the "
                    "ratio recomputed)");
    }
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    return 0;
}
