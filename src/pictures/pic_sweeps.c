/* pic_sweeps.c -- the pictures across the models of a database (family
 * "sweeps"): the induction score over training, one panel per group of
 * a sweep. */
#define _POSIX_C_SOURCE 200809L
#include "pictures_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/thresholds.h"

/* ---------------------------------------------------- sweep-induction */

/* One point of one model's curve: the best head's induction score at a
 * step of its latest finished train run, with the model's group. */
typedef struct sw_rows {
    pic *p;
    const char **setting;
    int *layers;
    long *model, *seed;
    double *step, *val;
    int n, cap;
} sw_rows;

static int sw_row(sw_rows *s, const al_store_sweep_row *x, al_err *e) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        /* the old arrays stay on the pic's list and go with it */
        const char **st = pic_calloc(s->p, (size_t)cap, sizeof *st, e);
        int *ly = pic_calloc(s->p, (size_t)cap, sizeof *ly, e);
        long *md = pic_calloc(s->p, (size_t)cap, sizeof *md, e),
             *sd = pic_calloc(s->p, (size_t)cap, sizeof *sd, e);
        double *sp = pic_calloc(s->p, (size_t)cap, sizeof *sp, e),
               *v = pic_calloc(s->p, (size_t)cap, sizeof *v, e);
        if (!st || !ly || !md || !sd || !sp || !v) return -1;
        if (s->n) {
            memcpy(st, s->setting, sizeof *st * (size_t)s->n),
                memcpy(ly, s->layers, sizeof *ly * (size_t)s->n);
            memcpy(md, s->model, sizeof *md * (size_t)s->n),
                memcpy(sd, s->seed, sizeof *sd * (size_t)s->n);
            memcpy(sp, s->step, sizeof *sp * (size_t)s->n),
                memcpy(v, s->val, sizeof *v * (size_t)s->n);
        }
        s->setting = st, s->layers = ly, s->model = md, s->seed = sd, s->step = sp, s->val = v;
        s->cap = cap;
    }
    int i = s->n;
    const char *set = x->setting ? x->setting : "";
    /* consecutive rows of one group share the text */
    if (i && s->setting[i - 1] && strcmp(s->setting[i - 1], set) == 0)
        s->setting[i] = s->setting[i - 1];
    else if (!(s->setting[i] = pic_printf(s->p, e, "%s", set)))
        return -1;
    s->layers[i] = (int)x->n_layers, s->model[i] = (long)x->model_id,
    s->seed[i] = isnan(x->seed) ? -1 : (long)x->seed;
    s->step[i] = x->step, s->val[i] = x->value;
    s->n++;
    return 0;
}

/* c mixed with share w of white: a seed's line, faint beside the mean. */
static uint32_t pale(uint32_t c, double w) {
    uint32_t out = 0;
    for (int k = 0; k < 24; k += 8) {
        double v = (c >> k & 0xFF) + w * (255 - (c >> k & 0xFF));
        out |= (uint32_t)(v + 0.5) << k;
    }
    return out;
}

static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One panel per (setting, n_layers) group of view sweep_models: each
 * model's best induction score over steps as a faint line, their mean
 * (at the steps every one was evaluated at) bold, the threshold dashed;
 * the same step axis in every panel, so settings compare at a glance. */
int pic_draw_sweep_induction(pic *p, al_err *e) {
    sw_rows s = {.p = p};
    al_store_sweep_row *rows;
    int n_rows;
    if (al_store_read_sweep_induction(p->st, &rows, &n_rows, e) || !pic_keep(p, rows, e)) return -1;
    for (int i = 0; i < n_rows; i++)
        if (sw_row(&s, &rows[i], e)) return -1;
    if (!s.n)
        return al_errf(e,
                       "database %s has no training curves (induction in train_head_scores of "
                       "a finished train run): train with --db and --eval-every",
                       p->o->db);
    int n_groups = 0, n_models = 0;
    for (int i = 0; i < s.n; i++) {
        int new_group = !i || s.setting[i] != s.setting[i - 1] || s.layers[i] != s.layers[i - 1];
        n_groups += new_group;
        n_models += new_group || s.model[i] != s.model[i - 1];
    }
    if (n_groups > MAX_PANELS)
        return al_errf(e, "database %s has %d (setting, layers) groups: at most %d can be drawn",
                       p->o->db, n_groups, MAX_PANELS);
    double *ustep = pic_calloc(p, (size_t)s.n, sizeof(double), e), x_lo = s.step[0],
           x_hi = s.step[0];
    if (!ustep) return -1;
    for (int i = 1; i < s.n; i++) x_lo = fmin(x_lo, s.step[i]), x_hi = fmax(x_hi, s.step[i]);
    if (x_hi == x_lo) x_lo = NAN, x_hi = NAN; /* one step: let the plot widen it */
    for (int g0 = 0, gi = 0; g0 < s.n; gi++) {
        int g1 = g0 + 1;
        while (g1 < s.n && s.setting[g1] == s.setting[g0] && s.layers[g1] == s.layers[g0]) g1++;
        int nm = 1;
        for (int i = g0 + 1; i < g1; i++) nm += s.model[i] != s.model[i - 1];
        al_series *sr = pic_calloc(p, (size_t)nm + 1, sizeof *sr, e);
        if (!sr) return -1;
        uint32_t col = al_plot_colour(gi);
        int ns = 0;
        if (nm > 1) {
            /* the mean at the steps every model of the group was evaluated
             * at: a mean over whichever models happen to have a step would
             * jump where one is missing */
            int nu = 0;
            for (int i = g0; i < g1; i++) ustep[nu++] = s.step[i];
            qsort(ustep, (size_t)nu, sizeof *ustep, dbl_cmp);
            double *mx = pic_calloc(p, (size_t)nu, sizeof(double), e),
                   *my = pic_calloc(p, (size_t)nu, sizeof(double), e);
            if (!mx || !my) return -1;
            int k = 0;
            for (int a = 0, b; a < nu; a = b) {
                for (b = a + 1; b < nu && ustep[b] == ustep[a];) b++;
                if (b - a < nm) continue; /* a model has at most one row per step */
                double sum = 0;
                for (int i = g0; i < g1; i++)
                    if (s.step[i] == ustep[a]) sum += s.val[i];
                mx[k] = ustep[a], my[k++] = sum / nm;
            }
            char *lab = pic_printf(p, e, "mean of %d models", nm);
            if (!lab) return -1;
            if (k) sr[ns++] = (al_series){mx, my, k, lab, col, 3, 0, 0, 0, NULL};
        }
        for (int a = g0; a < g1;) {
            int b = a + 1;
            while (b < g1 && s.model[b] == s.model[a]) b++;
            const char *lab = NULL;
            if (nm == 1)
                lab = s.seed[a] >= 0 ? pic_printf(p, e, "seed %ld", s.seed[a]) : "the model";
            else if (a == g0)
                lab = "one line per seed";
            if (nm == 1 && !lab) return -1;
            sr[ns++] =
                (al_series){s.step + a,      s.val + a, b - a, lab, nm == 1 ? col : pale(col, 0.55),
                            nm == 1 ? 2 : 1, 0,         0,     0,   NULL};
            a = b;
        }
        al_panel *q = pic_add_panel(p, AL_PANEL_LINES);
        const char *set = s.setting[g0][0] ? s.setting[g0] : "all models";
        q->ln =
            (al_lines){.s = sr,
                       .n = ns,
                       .title = pic_printf(p, e, "%s, %d layer%s (%d model%s)", set, s.layers[g0],
                                           s.layers[g0] == 1 ? "" : "s", nm, nm == 1 ? "" : "s"),
                       .x_title = "step",
                       .y_title = "best induction score",
                       .w = 360,
                       .h = 220,
                       .legend = 1,
                       .x_lo = x_lo,
                       .x_hi = x_hi,
                       .y_lo = 0,
                       .y_hi = 1,
                       .hline = AL_TH_INDUCTION,
                       /* clang-format off */
                           .hline_label = "induction head: > " AL_TH_STR(AL_TH_INDUCTION),
                           .x_integer = 1};
        /* clang-format on */
        if (!q->ln.title) return -1;
        g0 = g1;
    }
    p->fig.ncols = n_groups < 2 ? 1 : 2;
    snprintf(p->title, sizeof p->title, "induction score over training, across seeds");
    snprintf(p->head_txt, sizeof p->head_txt, "best of all");
    snprintf(p->run_txt, sizeof p->run_txt, "%s: latest train run of %d model%s in %d group%s",
             p->o->db, n_models, n_models == 1 ? "" : "s", n_groups, n_groups == 1 ? "" : "s");
    pic_note(p,
             "each model's best head's induction score on the training probe at every evaluation "
             "of its latest finished train run; one panel per setting and number of layers "
             "(view sweep_models)");
    return 0;
}
