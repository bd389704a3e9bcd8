/* store_views.c -- generic result shapes as rows (store_views.h). */
#include "attnlab/store_views.h"

int al_store_put_views(al_store *s, int64_t run, int64_t mid, const al_view *v, int n,
                       al_err *e) {
    for (int k = 0; k < n; k++) {
        const al_view *w = &v[k];
        if (w->shape == AL_VIEW_MODEL) {
            if (al_store_put_model_score(s, run, mid, w->metric, w->v[0], e) ||
                al_store_put_view_row(s, run, mid, w->metric, "model", w->title, e))
                return -1;
            continue;
        }
        if (w->shape != AL_VIEW_HEAD || w->L < 1 || w->H < 1)
            return al_errf(e, "view %s: unknown shape", w->metric);
        if (al_store_put_view_row(s, run, mid, w->metric, "head", w->title, e)) return -1;
        for (int l = 0; l < w->L; l++)
            for (int h = 0; h < w->H; h++)
                if (al_store_put_head_score(s, run, mid, l, h, w->metric, w->v[l * w->H + h], e))
                    return -1;
    }
    return 0;
}
