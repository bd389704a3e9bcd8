/* fuzz_sweep.c -- the sweep block of an experiment file (sweep.c) on
 * arbitrary input: parsing the block, enumerating the tasks, describing
 * task K and substituting it into the file for the ordinary loader.
 * Properties: a refusal is one line and assigns nothing; an accepted
 * sweep has 1..AL_SWEEP_MAX_TASKS tasks, every task's values describe it
 * (params_json is an object with one key per swept path), a task loads
 * or is refused in one line with nothing assigned, its folder is
 * BASE/task-K, and an index out of range is refused. Nothing is run.
 * Memory and time stay bounded because the product of the lists is
 * capped before anything per task exists, and the checks here touch at
 * most the sum of the list lengths, never their product. */
#include "fuzz.h"

#include <cjson/cJSON.h>

#include "attnlab/args.h"
#include "attnlab/sweep.h"

static void one_task(const al_sweep *s, long k) {
    al_sweep_values v;
    al_err e;
    FZ_ASSERT(al_sweep_values_of(s, k, &v, &e) == 0);
    FZ_ASSERT(v.setting && v.all && v.params_json);
    cJSON *p = cJSON_Parse(v.params_json);
    FZ_ASSERT(cJSON_IsObject(p) && cJSON_GetArraySize(p) == al_sweep_n_keys(s));
    cJSON_Delete(p);
    al_sweep_values_free(&v);
    al_experiment *x = (al_experiment *)&v; /* must be replaced */
    if (al_sweep_task_load(s, k, "base", &x, &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(x == NULL);
    } else {
        char want[64];
        snprintf(want, sizeof want, "base/task-%ld", k);
        FZ_ASSERT(strcmp(x->out, want) == 0 && x->name[0]);
        FZ_ASSERT(x->n_models >= 1 && x->n_models <= AL_EXP_MAX_MODELS);
        al_exp_free(x);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    al_sweep *s = (al_sweep *)d; /* must be replaced */
    al_err e;
    if (al_sweep_load(fz_file("sweep", d, n), &s, &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(s == NULL);
    } else if (s) {
        long t = al_sweep_n_tasks(s);
        FZ_ASSERT(t >= 1 && t <= AL_SWEEP_MAX_TASKS);
        FZ_ASSERT(al_sweep_n_keys(s) >= 1 && al_sweep_n_keys(s) <= AL_SWEEP_MAX_KEYS);
        one_task(s, 0);
        if (t > 1) one_task(s, t - 1);
        if (t > 2) one_task(s, t / 2);
        al_sweep_values v;
        FZ_ASSERT(al_sweep_values_of(s, t, &v, &e) == -1 && v.all == NULL);
        fz_check_msg(&e);
        al_experiment *x = (al_experiment *)&v;
        FZ_ASSERT(al_sweep_task_load(s, t, NULL, &x, &e) == -1 && x == NULL);
        fz_check_msg(&e);
        if (al_sweep_check(s, &e) != 0) fz_check_msg(&e);
        al_sweep_free(s);
    }
    al_config_arena_free(); /* strings the command flag tables took */
    return 0;
}
