/* patch.h -- activation patching on the induction task (docs/design.md §5;
 * first slice: library only, no command, table or picture yet).
 *
 * The task: N pairs of sequences of length T = 2R+1,
 *   clean     = BOS + A  + A    (the probe of scores.h, same seed: A is
 *                                al_probe_make's R random tokens)
 *   corrupted = BOS + A' + A    (A' drawn from a second stream seeded
 *                                from the seed; A'[i] != A[i], != BOS)
 * so only the first half differs, and in the clean run an induction
 * circuit can predict the second half while in the corrupted one it
 * cannot. Targets are the clean next tokens; the two runs agree on them
 * where the metric looks.
 *
 * Metric M = mean over pairs and positions t = R+1..2R−1 of
 * log p(token t+1 | tokens 0..t): the second repeat's predictable
 * positions, the ones icl_gain scores (scores.h). M_clean and M_corr are
 * its values on the two runs (current gates and replacements apply).
 *
 * Directions: denoising runs the corrupted sequences with chosen
 * activations taken from the clean run; noising runs the clean ones with
 * activations from the corrupted run. Normalised effect of a patch with
 * metric M_p:
 *   denoising  (M_p − M_corr) / (M_clean − M_corr)   1 = fully restores
 *   noising    (M_clean − M_p) / (M_clean − M_corr)  1 = fully breaks
 * NaN when M_clean == M_corr (nothing to restore).
 *
 * Components (one configuration each; k = the index into the result):
 *   resid     the residual stream entering layer l at position t (whole
 *             d_model vector), l < L:           k = l·T + t      (L, T)
 *   head      head (l, h)'s z at every position: k = l·H + h      (L, H)
 *   head_pos  head (l, h)'s z at position t:     k = (l·H + h)·T + t (L·H, T)
 * Patching z patches the head's output (W_O is linear; the gate still
 * scales it). The engine hook is al_patch_spec (model.h).
 *
 * Cost: two unpatched passes per batch of pairs (cached: x (L+1,B,T,C) and
 * z (L,B,T,H,D) per run, copied out with al_model_copy_acts) plus one full
 * forward per configuration and batch. Same ownership and failure
 * contract as the analyses of analyses.h. */
#ifndef ATTNLAB_PATCH_H
#define ATTNLAB_PATCH_H

#include <stdint.h>
#include "attnlab/model.h"
#include "attnlab/util.h"

typedef enum { AL_PATCH_RESID, AL_PATCH_HEAD, AL_PATCH_HEAD_POS } al_patch_component;
typedef enum { AL_PATCH_DENOISE, AL_PATCH_NOISE } al_patch_direction;

typedef struct al_patch_opts {
    const char *task;      /* "induction" (the only one so far) */
    const char *component; /* "resid", "head" (default) or "head_pos" */
    const char *direction; /* "denoise" (default) or "noise" */
    int probe_r;           /* random tokens per half (50), >= 2; 2R+1 <= n_ctx */
    int probe_n;           /* pairs (64), 1..1000000 */
    uint64_t probe_seed;   /* (1) */
    int batch;             /* pairs per forward pass (8), 1..100000 */
} al_patch_opts;

#define AL_PATCH_OPTS_INIT {"induction", "head", "denoise", 50, 64, 1, 8}
al_patch_opts al_patch_opts_defaults(void);
/* 0 if the names are known and the numbers in range, else -1 with e
 * naming the choices or limits. (n_ctx is checked by the run.) */
int al_patch_opts_check(const al_patch_opts *o, al_err *e);

typedef struct al_patch_result {
    int L, H, R, N, T;               /* T = 2R+1 */
    al_patch_component component;
    al_patch_direction direction;
    double m_clean, m_corr;          /* the metric on the two unpatched runs */
    int rows, cols;                  /* the grid of configurations (above) */
    int n;                           /* rows·cols */
    double *metric;                  /* (n) M_p; one allocation with effect */
    double *effect;                  /* (n) normalised effect */
    int *clean, *corr;               /* (N, T) each, the two runs' tokens;
                                      * one allocation */
} al_patch_result;

/* Patch every configuration of o->component in o->direction on the
 * induction task, whose BOS id is bos (-1: none, token 0). m's gates,
 * z replacements and patch spec are as before on return. 0 with *r
 * filled (al_patch_result_free), or -1 with e set and *r zeroed. */
int al_patch_run(al_model *m, int bos, const al_patch_opts *o, al_patch_result *r,
                 al_err *e);
void al_patch_result_free(al_patch_result *r);

/* The metric of one arbitrary patch on the same task: x_mask (L+1, T) and
 * z_mask (L, H, T) as al_patch_spec's, T = 2R+1 (either NULL), applied in
 * o->direction; also M_clean and M_corr (either pointer may be NULL).
 * For sets the component grid does not cover (several positions or heads
 * at once). Same restoring and error contract as al_patch_run. */
int al_patch_eval(al_model *m, int bos, const al_patch_opts *o,
                  const unsigned char *x_mask, const unsigned char *z_mask,
                  double *m_patched, double *m_clean, double *m_corr, al_err *e);

#endif
