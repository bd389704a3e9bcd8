/* prof.h -- where a training step's wall-clock time goes, operation by
 * operation, for `bench_engine --profile` (make bench prints it).
 *
 * perf attributes the matrix products to oneDNN's JIT code, not to the
 * operation that called them, so the engine marks its operations itself:
 * t0 = al_prof_t(); ...; al_prof_add(AL_OP_X, t0). Off by default, and
 * then al_prof_t is one load and al_prof_add one branch. Only for serial
 * code (between parallel regions): the totals are plain globals. */
#ifndef ATTNLAB_PROF_H
#define ATTNLAB_PROF_H

typedef enum {
    AL_OP_EMBED, /* token + position embedding */
    AL_OP_QKV, /* q|k|v projection (and positions into q, k) */
    AL_OP_ATT_FWD, /* scores, softmax, mixing */
    AL_OP_WO, /* gates, output projection, residual add */
    AL_OP_UNEMBED, /* logits */
    AL_OP_CE, /* softmax cross-entropy, forward and backward */
    AL_OP_UNEMBED_BWD, /* dx and dW_U from dlogits */
    AL_OP_WO_BWD, /* dz, dW_O, gate gradients */
    AL_OP_ATT_BWD, /* dq, dk, dv */
    AL_OP_QKV_BWD, /* dW_QKV, dx, positions */
    AL_OP_EMBED_BWD, /* dW_E, dW_pos */
    AL_OP_ADAMW, /* gradient norm, clipping, AdamW */
    AL_OP_N
} al_op;

/* Start (or, with on = 0, stop) profiling; either way the totals are
 * set to zero. */
void al_prof_enable(int on);
/* The time now when profiling, else 0. */
double al_prof_t(void);
/* Add the time since t0 to op (nothing when profiling is off). */
void al_prof_add(al_op op, double t0);
/* Seconds spent in op since al_prof_enable. */
double al_prof_seconds(al_op op);
/* A short name for op ("att_bwd"). */
const char *al_prof_name(al_op op);

#endif
