/* prof.c -- per-operation wall-clock totals (contract in prof.h). */
#include "attnlab/prof.h"

#include "attnlab/util.h"

static int on;
static double total[AL_OP_N];

void al_prof_enable(int o) {
    on = o;
    for (int i = 0; i < AL_OP_N; i++) total[i] = 0.0;
}

double al_prof_t(void) { return on ? al_now() : 0.0; }

void al_prof_add(al_op op, double t0) {
    if (on && op >= 0 && op < AL_OP_N) total[op] += al_now() - t0;
}

double al_prof_seconds(al_op op) { return op >= 0 && op < AL_OP_N ? total[op] : 0.0; }

const char *al_prof_name(al_op op) {
    static const char *names[AL_OP_N] = {"embed",   "qkv",     "att_fwd",     "wo",
                                         "unembed", "ce",      "unembed_bwd", "wo_bwd",
                                         "att_bwd", "qkv_bwd", "embed_bwd",   "adamw"};
    return op >= 0 && op < AL_OP_N ? names[op] : "?";
}
