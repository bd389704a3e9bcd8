/* attrpatch.c -- attribution patching (attrpatch.h). Being written. */
#include "attnlab/attrpatch.h"

#include <stdlib.h>
#include <string.h>

static const char *const grid_names[AL_AP_NGRID] = {"head", "head_pos", "edge"};

const char *al_attrpatch_grid_name(int grid) {
    return grid >= 0 && grid < AL_AP_NGRID ? grid_names[grid] : "?";
}

void al_attrpatch_result_free(al_attrpatch_result *r) {
    free(r->head);
    memset(r, 0, sizeof *r);
}

int al_attrpatch_run(al_model *m, const al_pairs *t, const al_patch_opts *o, int compare,
                     al_attrpatch_result *r, al_err *e) {
    (void)m, (void)t, (void)o, (void)compare;
    memset(r, 0, sizeof *r);
    return al_errf(e, "attribution patching: not built yet");
}

int al_attrpatch_grad(al_model *m, const al_pairs *t, int which, int n0, int nb, double *metric,
                      float *dx, float *dzg, float *dqkv, al_err *e) {
    (void)m, (void)t, (void)which, (void)n0, (void)nb, (void)metric, (void)dx, (void)dzg,
        (void)dqkv;
    return al_errf(e, "attribution patching: not built yet");
}
