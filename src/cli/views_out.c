/* views_out.c -- views (view.h) in the run's JSON document, and that
 * document as a table (views_out.h). */
#include "attnlab/views_out.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attnlab/doc_text.h"
#include "attnlab/json.h"
#include "attnlab/stats.h"

#include <cjson/cJSON.h>

/* the (L, H) of the first per-head view; 0 heads without one */
static int heads_of(const al_view *v, int n, int *L, int *H) {
    for (int k = 0; k < n; k++)
        if (v[k].shape == AL_VIEW_HEAD) return *L = v[k].L, *H = v[k].H, 1;
    return *L = *H = 0, 0;
}

/* "l.h" of flat head index i */
static void head_name(char *b, size_t cap, int i, int H) {
    snprintf(b, cap, "%d.%d", i / H, i % H);
}

/* A pair, edge or pos view of the document (its object o, under metric)
 * as lines: a heading, then one line per value (a pair's cells with a
 * value, every edge in order, every position). */
static void text_shaped(FILE *f, const char *metric, const cJSON *o) {
    const char *shape = al_dt_str(o, "shape"), *title = al_dt_str(o, "title");
    const cJSON *x;
    if (!strcmp(shape, "pos")) {
        const cJSON *vals = al_dt_get(o, "values");
        int n = cJSON_GetArraySize(vals), i = 0;
        fprintf(f, "%s (%s): %d position%s\n%-8s %18s\n", metric, title, n, n == 1 ? "" : "s",
                "position", metric);
        cJSON_ArrayForEach(x, vals) {
            fprintf(f, "%-8d %18.4f\n", i++, cJSON_IsNumber(x) ? x->valuedouble : NAN);
        }
        return;
    }
    const int edge = !strcmp(shape, "edge");
    const cJSON *cells = al_dt_get(o, edge ? "edges" : "cells");
    int n = cJSON_GetArraySize(cells), ws = 6, wr = 8; /* the longest label, at least the heading */
    if (edge) cJSON_ArrayForEach(x, cells) {
            int a = (int)strlen(al_dt_str(x, "sender")), b = (int)strlen(al_dt_str(x, "receiver"));
            ws = a > ws ? a : ws, wr = b > wr ? b : wr;
        }
    if (edge)
        fprintf(f, "%s (%s): %d edge%s\n", metric, title, n, n == 1 ? "" : "s");
    else
        fprintf(f, "%s (%s): %d head pair%s with a value\n", metric, title, n, n == 1 ? "" : "s");
    fprintf(f, "%-*s    %-*s %18s\n", ws, "sender", wr, "receiver", metric);
    cJSON_ArrayForEach(x, cells) {
        fprintf(f, "%-*s -> %-*s %18.4f\n", ws, al_dt_str(x, "sender"), wr,
                al_dt_str(x, "receiver"), al_dt_num(x, "value"));
    }
}

void al_views_text(FILE *f, const cJSON *doc) {
    const cJSON *hm = al_dt_get(doc, "head_metrics"), *m, *h;
    if (cJSON_GetArraySize(hm) > 0) {
        fprintf(f, "%-6s", "head");
        cJSON_ArrayForEach(m, hm) fprintf(f, " %18s", al_dt_str(m, "metric"));
        fprintf(f, "\n");
        cJSON_ArrayForEach(h, al_dt_get(doc, "heads")) {
            fprintf(f, "%-6s", al_dt_str(h, "head"));
            cJSON_ArrayForEach(m, hm) {
                /* "value ± se" when the view has intervals */
                char k[96], cell[64];
                snprintf(k, sizeof k, "%s_se", al_dt_str(m, "metric"));
                double v = al_dt_num(h, al_dt_str(m, "metric")), se = al_dt_num(h, k);
                if (!isfinite(v)) se = NAN; /* no value: nothing to be sure of */
                if (isfinite(se))
                    snprintf(cell, sizeof cell, "%.4f±%.4f", v, se);
                else
                    snprintf(cell, sizeof cell, "%.4f", v);
                /* "±" is two bytes for one column */
                fprintf(f, " %*s", isfinite(se) ? 19 : 18, cell);
            }
            fprintf(f, al_dt_bool(h, "off") ? "  off\n" : "\n");
        }
        cJSON_ArrayForEach(m, hm)
            fprintf(f, "  %s: %s\n", al_dt_str(m, "metric"), al_dt_str(m, "title"));
    }
    cJSON_ArrayForEach(m, al_dt_get(doc, "model_metrics")) {
        fprintf(f, "%s (%s): %.6g\n", al_dt_str(m, "metric"), al_dt_str(m, "title"),
                al_dt_num(doc, al_dt_str(m, "metric")));
    }
    cJSON_ArrayForEach(m, al_dt_get(doc, "shaped_metrics")) {
        if (cJSON_IsString(m)) text_shaped(f, m->valuestring, al_dt_get(doc, m->valuestring));
    }
}

/* x as a number, or null when it is not finite (JSON has no NaN). */
static cJSON *num_or_null(double x) {
    return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull();
}

/* {"sender": a, "receiver": b, "value": x} into arr. */
static int json_cell(cJSON *arr, const char *a, const char *b, double x) {
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddItemToArray(arr, j)) {
        cJSON_Delete(j);
        return -1;
    }
    if (!cJSON_AddStringToObject(j, "sender", a) || !cJSON_AddStringToObject(j, "receiver", b))
        return -1;
    cJSON *val = num_or_null(x);
    if (!val || !cJSON_AddItemToObject(j, "value", val)) {
        cJSON_Delete(val);
        return -1;
    }
    return 0;
}

/* METRIC: {"shape", "title", and "cells" (pair: the cells with a value),
 * "edges" (every edge in order) or "values" (one per position)}. */
static int json_shaped(cJSON *doc, const al_view *w) {
    cJSON *o = cJSON_AddObjectToObject(doc, w->metric);
    const char *shape = w->shape == AL_VIEW_PAIR   ? "pair"
                        : w->shape == AL_VIEW_EDGE ? "edge"
                                                   : "pos";
    if (!o || !cJSON_AddStringToObject(o, "shape", shape) ||
        !cJSON_AddStringToObject(o, "title", w->title))
        return -1;
    if (w->shape == AL_VIEW_POS) {
        cJSON *a = cJSON_AddArrayToObject(o, "values");
        for (int i = 0; a && i < w->n; i++) {
            cJSON *x = num_or_null(w->v[i]);
            if (!x || !cJSON_AddItemToArray(a, x)) {
                cJSON_Delete(x);
                return -1;
            }
        }
        return a ? 0 : -1;
    }
    cJSON *a = cJSON_AddArrayToObject(o, w->shape == AL_VIEW_PAIR ? "cells" : "edges");
    if (!a) return -1;
    if (w->shape == AL_VIEW_EDGE) {
        for (int i = 0; i < w->n; i++)
            if (json_cell(a, w->from[i], w->to[i], w->v[i])) return -1;
        return 0;
    }
    int LH = w->L * w->H;
    for (int i = 0; i < LH; i++)
        for (int j = 0; j < LH; j++) {
            double x = w->v[(size_t)i * LH + j];
            if (isnan(x)) continue;
            char a1[24], b1[24];
            head_name(a1, sizeof a1, i, w->H), head_name(b1, sizeof b1, j, w->H);
            if (json_cell(a, a1, b1, x)) return -1;
        }
    return 0;
}

/* {"metric", "title"} of each view of shape sh, in order, as doc[key]. */
static int json_order(cJSON *doc, const char *key, const al_view *v, int n, al_view_shape sh) {
    cJSON *a = cJSON_AddArrayToObject(doc, key);
    for (int k = 0; a && k < n; k++) {
        if (v[k].shape != sh) continue;
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(a, j) ||
            !cJSON_AddStringToObject(j, "metric", v[k].metric) ||
            !cJSON_AddStringToObject(j, "title", v[k].title))
            return -1;
    }
    return a ? 0 : -1;
}

int al_views_json(cJSON *doc, const al_view *v, int n, const unsigned char *off) {
    int L, H;
    cJSON *shaped;
    if (json_order(doc, "head_metrics", v, n, AL_VIEW_HEAD) ||
        json_order(doc, "model_metrics", v, n, AL_VIEW_MODEL) ||
        !(shaped = cJSON_AddArrayToObject(doc, "shaped_metrics")))
        return -1;
    for (int k = 0; k < n; k++)
        if ((v[k].shape == AL_VIEW_PAIR || v[k].shape == AL_VIEW_EDGE ||
             v[k].shape == AL_VIEW_POS) &&
            !cJSON_AddItemToArray(shaped, cJSON_CreateString(v[k].metric)))
            return -1;
    if (heads_of(v, n, &L, &H)) {
        cJSON *heads = cJSON_AddArrayToObject(doc, "heads");
        if (!heads) return -1;
        for (int i = 0; i < L * H; i++) {
            char nm[24];
            snprintf(nm, sizeof nm, "%d.%d", i / H, i % H);
            cJSON *j = cJSON_CreateObject();
            if (!j || !cJSON_AddItemToArray(heads, j) || !cJSON_AddStringToObject(j, "head", nm) ||
                !cJSON_AddBoolToObject(j, "off", off && off[i]))
                return -1;
            for (int k = 0; k < n; k++)
                if (v[k].shape == AL_VIEW_HEAD &&
                    (!cJSON_AddNumberToObject(j, v[k].metric, v[k].v[i]) ||
                     (v[k].ci && al_json_add_ci(j, v[k].metric, &v[k].ci[i]))))
                    return -1;
        }
    }
    for (int k = 0; k < n; k++)
        if (v[k].shape == AL_VIEW_MODEL &&
            (!cJSON_AddNumberToObject(doc, v[k].metric, v[k].v[0]) ||
             (v[k].ci && al_json_add_ci(doc, v[k].metric, &v[k].ci[0]))))
            return -1;
    for (int k = 0; k < n; k++)
        if ((v[k].shape == AL_VIEW_PAIR || v[k].shape == AL_VIEW_EDGE ||
             v[k].shape == AL_VIEW_POS) &&
            json_shaped(doc, &v[k]))
            return -1;
    return 0;
}
