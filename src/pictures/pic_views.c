/* pic_views.c -- family views: the generic picture of a per-head view
 * (view.h), so an analysis whose results are views is drawn without a
 * picture kind of its own. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attnlab/store_pictures.h"
#include "pictures_internal.h"

int pic_draw_view(pic *p, al_err *e) {
    const char *metric = p->o->metric;
    if (!metric) return al_errf(e, "the view picture needs --metric NAME (a per-head view, e.g. attn_entropy)");
    int LH = p->L * p->H;
    long run = p->o->run_id;
    if (run <= 0 && al_store_latest_view_run(p->st, p->model_id, metric, &run, e)) return -1;
    if (!run)
        return al_errf(e, "database %s has no finished run with a per-head view '%s' for model %s",
                       p->o->db, metric, p->dir);
    float *v = pic_floats(p, (size_t)LH, e);
    double *x = pic_calloc(p, (size_t)LH, sizeof *x, e);
    char title[256];
    if (!v || !x ||
        al_store_read_head_view(p->st, run, metric, p->L, p->H, x, title, sizeof title, e))
        return -1;
    if (!title[0]) return al_errf(e, "run %ld has no per-head view '%s'", run, metric);
    int signed_v = 0; /* a diverging map only for values of both signs */
    for (int i = 0; i < LH; i++) v[i] = (float)x[i], signed_v |= x[i] < 0;
    al_cscale *cs = pic_scale(p, 0, signed_v, NAN, NAN, metric);
    al_cscale_fit(cs, v, (size_t)LH);
    const char **rl = pic_calloc(p, (size_t)p->L, sizeof(char *), e);
    if (!rl) return -1;
    for (int l = 0; l < p->L; l++)
        if (!(rl[l] = pic_printf(p, e, "layer %d", l))) return -1;
    al_panel *pn = pic_add_panel(p, AL_PANEL_HEATMAP);
    pn->hm = (al_hm){.v = v, .rows = p->L, .cols = p->H, .row_labels = rl, .title = metric,
                     .col_title = "head", .cs = cs, .bar = 1, .annotate = 1, .cell = 34};
    snprintf(p->title, sizeof p->title, "%s", title);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p, "run %ld, metric %s", run, metric);
    return 0;
}
