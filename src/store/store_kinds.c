/* store_kinds.c -- which run kind holds each family of results (store.h,
 * "run kinds"). The CLI sets them from the analysis registry at start-up;
 * the readers that look for a family's newest run bind the kind as a
 * parameter, so no SQL of the store spells an analysis's name. */
#include "attnlab/store.h"

#include <string.h>

#include "store_internal.h"

static const char *kinds[AL_RESULTS_N];

int al_store_set_kind(al_store_results r, const char *kind, al_err *e) {
    if ((int)r <= AL_RESULTS_NONE || (int)r >= AL_RESULTS_N)
        return al_errf(e, "run kinds: no result family %d", (int)r);
    if (!kind || !*kind) return al_errf(e, "run kinds: result family %d: no kind", (int)r);
    if (kinds[r] && strcmp(kinds[r], kind) != 0)
        return al_errf(e, "run kinds: result family %d is kind '%s' already, not '%s'", (int)r,
                       kinds[r], kind);
    kinds[r] = kind;
    return 0;
}

const char *al_store_kind(al_store_results r) {
    return (int)r > AL_RESULTS_NONE && (int)r < AL_RESULTS_N ? kinds[r] : NULL;
}

const char *al_store_kind_needed(al_store_results r, al_err *e) {
    const char *k = al_store_kind(r);
    if (!k)
        al_errf(e,
                "internal error: no run kind for result family %d (al_store_set_kind was not "
                "called)",
                (int)r);
    return k;
}
