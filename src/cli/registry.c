/* registry.c -- the table of analysis commands (registry.h). Each
 * descriptor lives beside its command in cmd_<name>.c; this file only
 * lists them, in `attnlab help` order, and binds their flag tables to a
 * fresh argument struct for the experiment runner. */
#include "attnlab/registry.h"

#include <string.h>

extern const al_analysis al_an_circuits, al_an_scores, al_an_ablate, al_an_prune, al_an_patch,
    al_an_paths, al_an_attribute, al_an_discover, al_an_names, al_an_attnstats, al_an_sae,
    al_an_sae_features;

const al_analysis *const al_analyses[] = {&al_an_circuits, &al_an_scores,    &al_an_ablate,
                                          &al_an_prune,    &al_an_patch,     &al_an_paths,
                                          &al_an_attribute, &al_an_discover, &al_an_names,
                                          &al_an_attnstats, &al_an_sae,
                                          &al_an_sae_features,
                                          NULL};

const al_analysis *al_analysis_of(const char *name) {
    for (const al_analysis *const *a = al_analyses; *a; a++)
        if (strcmp((*a)->name, name) == 0) return *a;
    return NULL;
}

int al_analysis_flags(const al_analysis *a, void *args, al_flag *out, int cap, al_err *e) {
    int n = 0;
    for (const al_flag *f = a->cmd->flags; f->name; f++, n++) {
        size_t off = (size_t)((const char *)f->dst - (const char *)a->tmpl);
        if (n + 1 >= cap) return al_errf(e, "%s: too many flags", a->name);
        if ((const char *)f->dst < (const char *)a->tmpl || off >= a->size)
            return al_errf(e, "%s: flag --%s is not in its argument struct", a->name, f->name);
        out[n] = *f;
        out[n].dst = (char *)args + off;
        out[n].seen = 0;
    }
    out[n] = (al_flag)AL_FLAGS_END;
    return 0;
}
