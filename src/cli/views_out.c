/* views_out.c -- views (view.h) printed as a table or as JSON (views_out.h). */
#include "attnlab/views_out.h"

#include <math.h>
#include <string.h>

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

/* A pair, edge or pos view as lines: a heading, then one line per value
 * (a pair's cells with a value, every edge in order, every position). */
static void print_shaped(FILE *f, const al_view *w) {
    if (w->shape == AL_VIEW_POS) {
        fprintf(f, "%s (%s): %d position%s\n%-8s %18s\n", w->metric, w->title, w->n,
                w->n == 1 ? "" : "s", "position", w->metric);
        for (int i = 0; i < w->n; i++) fprintf(f, "%-8d %18.4f\n", i, w->v[i]);
        return;
    }
    if (w->shape == AL_VIEW_EDGE) {
        int ws = 6, wr = 8; /* column widths: the longest label, at least the heading */
        for (int i = 0; i < w->n; i++) {
            int a = (int)strlen(w->from[i]), b = (int)strlen(w->to[i]);
            ws = a > ws ? a : ws, wr = b > wr ? b : wr;
        }
        fprintf(f, "%s (%s): %d edge%s\n%-*s    %-*s %18s\n", w->metric, w->title, w->n,
                w->n == 1 ? "" : "s", ws, "sender", wr, "receiver", w->metric);
        for (int i = 0; i < w->n; i++)
            fprintf(f, "%-*s -> %-*s %18.4f\n", ws, w->from[i], wr, w->to[i], w->v[i]);
        return;
    }
    int LH = w->L * w->H, cnt = 0;
    for (size_t i = 0; i < (size_t)LH * LH; i++) cnt += !isnan(w->v[i]);
    fprintf(f, "%s (%s): %d head pair%s with a value\n%-6s    %-8s %18s\n", w->metric, w->title,
            cnt, cnt == 1 ? "" : "s", "sender", "receiver", w->metric);
    for (int i = 0; i < LH; i++)
        for (int j = 0; j < LH; j++) {
            double x = w->v[(size_t)i * LH + j];
            if (isnan(x)) continue;
            char a[24], b[24];
            head_name(a, sizeof a, i, w->H), head_name(b, sizeof b, j, w->H);
            fprintf(f, "%-6s -> %-8s %18.4f\n", a, b, x);
        }
}

void al_views_print(FILE *f, const al_view *v, int n, const unsigned char *off) {
    int L, H;
    if (heads_of(v, n, &L, &H)) {
        fprintf(f, "%-6s", "head");
        for (int k = 0; k < n; k++)
            if (v[k].shape == AL_VIEW_HEAD) fprintf(f, " %18s", v[k].metric);
        fputc('\n', f);
        for (int i = 0; i < L * H; i++) {
            char nm[24];
            snprintf(nm, sizeof nm, "%d.%d", i / H, i % H);
            fprintf(f, "%-6s", nm);
            for (int k = 0; k < n; k++)
                if (v[k].shape == AL_VIEW_HEAD) fprintf(f, " %18.4f", v[k].v[i]);
            fputs(off && off[i] ? "  off\n" : "\n", f);
        }
        for (int k = 0; k < n; k++)
            if (v[k].shape == AL_VIEW_HEAD) fprintf(f, "  %s: %s\n", v[k].metric, v[k].title);
    }
    for (int k = 0; k < n; k++)
        if (v[k].shape == AL_VIEW_MODEL)
            fprintf(f, "%s (%s): %.6g\n", v[k].metric, v[k].title, v[k].v[0]);
    for (int k = 0; k < n; k++)
        if (v[k].shape == AL_VIEW_PAIR || v[k].shape == AL_VIEW_EDGE || v[k].shape == AL_VIEW_POS)
            print_shaped(f, &v[k]);
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

int al_views_json(cJSON *doc, const al_view *v, int n) {
    int L, H;
    if (heads_of(v, n, &L, &H)) {
        cJSON *heads = cJSON_AddArrayToObject(doc, "heads");
        if (!heads) return -1;
        for (int i = 0; i < L * H; i++) {
            char nm[24];
            snprintf(nm, sizeof nm, "%d.%d", i / H, i % H);
            cJSON *j = cJSON_CreateObject();
            if (!j || !cJSON_AddItemToArray(heads, j) || !cJSON_AddStringToObject(j, "head", nm))
                return -1;
            for (int k = 0; k < n; k++)
                if (v[k].shape == AL_VIEW_HEAD &&
                    !cJSON_AddNumberToObject(j, v[k].metric, v[k].v[i]))
                    return -1;
        }
    }
    for (int k = 0; k < n; k++)
        if (v[k].shape == AL_VIEW_MODEL && !cJSON_AddNumberToObject(doc, v[k].metric, v[k].v[0]))
            return -1;
    for (int k = 0; k < n; k++)
        if ((v[k].shape == AL_VIEW_PAIR || v[k].shape == AL_VIEW_EDGE ||
             v[k].shape == AL_VIEW_POS) &&
            json_shaped(doc, &v[k]))
            return -1;
    return 0;
}
