/* fuzz_experiment.c -- al_exp_load (src/cli/experiment.c) on arbitrary
 * experiment JSON: a file it refuses gives a one-line error naming the
 * problem; one it accepts loads completely and frees cleanly. Nothing is
 * run. */
#include "fuzz.h"

#include "attnlab/args.h"
#include "attnlab/experiment.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    al_experiment *x;
    al_err e;
    if (al_exp_load(fz_file("experiment", d, n), &x, &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(x == NULL);
    } else {
        FZ_ASSERT(x->name[0] && x->out[0]);
        FZ_ASSERT(x->n_models >= 0 && x->n_models <= AL_EXP_MAX_MODELS);
        FZ_ASSERT(x->n_analyses >= 0 && x->n_analyses <= AL_EXP_MAX_ANALYSES);
        al_exp_free(x);
    }
    al_config_arena_free(); /* strings the command flag tables took */
    return 0;
}
