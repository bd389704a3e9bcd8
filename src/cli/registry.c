/* registry.c -- the table of analysis commands (registry.h). Each
 * descriptor lives beside its command in cmd_<name>.c; this file only
 * lists them, in `attnlab help` order, binds their flag tables to a
 * fresh argument struct for the experiment runner, and tells the store
 * the run kinds its readers look for. */
#define _POSIX_C_SOURCE 200809L /* pthread_once */
#include "attnlab/registry.h"

#include <pthread.h>
#include <string.h>

#include "attnlab/json.h"
#include "attnlab/train_record.h"

extern const al_analysis al_an_circuits, al_an_scores, al_an_ablate, al_an_prune, al_an_patch,
    al_an_paths, al_an_attribute, al_an_discover, al_an_names, al_an_attnstats, al_an_sae,
    al_an_sae_features;

const al_analysis *const al_analyses[] = {&al_an_circuits,
                                          &al_an_scores,
                                          &al_an_ablate,
                                          &al_an_prune,
                                          &al_an_patch,
                                          &al_an_paths,
                                          &al_an_attribute,
                                          &al_an_discover,
                                          &al_an_names,
                                          &al_an_attnstats,
                                          &al_an_sae,
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

static int setup_rc;
static al_err setup_err;

static void setup_once(void) {
    al_json_setup();
    setup_rc = al_store_set_kind(AL_RESULTS_TRAINING, AL_TRAIN_RUN_KIND, &setup_err);
    for (const al_analysis *const *a = al_analyses; *a && setup_rc == 0; a++)
        if ((*a)->results != AL_RESULTS_NONE)
            setup_rc = al_store_set_kind((*a)->results, (*a)->name, &setup_err);
}

int al_registry_setup(al_err *e) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, setup_once);
    if (setup_rc && e) *e = setup_err;
    return setup_rc;
}
