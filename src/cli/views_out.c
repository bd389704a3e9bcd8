/* views_out.c -- views (view.h) printed as a table or as JSON (views_out.h). */
#include "attnlab/views_out.h"

#include <cjson/cJSON.h>

/* the (L, H) of the first per-head view; 0 heads without one */
static int heads_of(const al_view *v, int n, int *L, int *H) {
    for (int k = 0; k < n; k++)
        if (v[k].shape == AL_VIEW_HEAD) return *L = v[k].L, *H = v[k].H, 1;
    return *L = *H = 0, 0;
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
        if (v[k].shape == AL_VIEW_MODEL) fprintf(f, "%s (%s): %.6g\n", v[k].metric, v[k].title,
                                                 v[k].v[0]);
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
                if (v[k].shape == AL_VIEW_HEAD && !cJSON_AddNumberToObject(j, v[k].metric, v[k].v[i]))
                    return -1;
        }
    }
    for (int k = 0; k < n; k++)
        if (v[k].shape == AL_VIEW_MODEL && !cJSON_AddNumberToObject(doc, v[k].metric, v[k].v[0]))
            return -1;
    return 0;
}
