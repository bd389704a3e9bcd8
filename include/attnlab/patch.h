/* patch.h -- activation patching and path patching (docs/design.md §5).
 *
 * A task is a pair set (pairs.h): N pairs of clean / corrupted token
 * sequences of equal length and the items where the metric M is read
 * (mean log-prob of the answer, or mean logit difference answer − wrong).
 * Built-in tasks:
 *   induction  clean = the scores probe BOS + A + A (scores.h, same seed);
 *              corrupted = BOS + A' + A (A' from a second stream seeded
 *              from the seed; A'[i] != A[i], != BOS). Items: every
 *              t = R+1..2R−1, answer = the clean next token, log-prob.
 *              With o->probe_src, A and A' are drawn as the probe's
 *              halves are (scores.h): random ids only over its allowed
 *              ids, or two windows of its text (A' a second window
 *              drawn with the second stream); without it the pairs
 *              are those of earlier versions, id for id.
 *   names      held-out synthetic stories with a repeated invented name
 *              (al_pairs_names), logit difference.
 *   file       the user's JSONL pairs (al_pairs_load_jsonl), logit
 *              difference at each pair's last position.
 *
 * Directions: denoising runs the corrupted sequences with chosen
 * activations taken from the clean run; noising runs the clean ones with
 * activations from the corrupted run. Normalised effect of a patch with
 * metric M_p (as TransformerLens reports it):
 *   denoising  (M_p − M_corr) / (M_clean − M_corr)   1 = fully restores
 *   noising    (M_clean − M_p) / (M_clean − M_corr)  1 = fully breaks
 * NaN when M_clean == M_corr (nothing to restore).
 *
 * Activation patching components (one configuration each; k = the index
 * into the result's rows × cols grid):
 *   resid     the residual stream entering layer l at position t (whole
 *             d_model vector), l < L:            k = l·T + t       (L, T)
 *   head      head (l, h)'s output, every position: k = l·H + h     (L, H)
 *   head_pos  head (l, h)'s output at position t:  k = (l·H+h)·T + t (L·H, T)
 *   q, k, v   head (l, h)'s query / key / value at position t computed
 *             from the other run's residual stream (the head's other
 *             inputs from its own):                 k = (l·H+h)·T + t (L·H, T)
 *   pattern   head (l, h)'s attention row for destination t taken from
 *             the other run:                        k = (l·H+h)·T + t (L·H, T)
 * A head's output is its z (pre-W_O); the gate still scales it.
 *
 * Path patching (Wang et al. 2022), any depth up to AL_PATHS_MAX_LAYERS:
 * senders are embed, pos and each head of layers 0..L−2; receivers are
 * the q, k and v input of each head of layers 1..L−1 (from every sender
 * of an earlier layer), and the logits directly (the only receiver of a
 * 1-layer model, whose one sender layer is layer 0). Δsender = the
 * sender's own output (an embed row, 0 for pos, head l0.h0's zg·W_O) in
 * the source run minus in the target run. The receiver's input becomes
 * the target run's input + Δsender (so its q, k or v: target + Δsender ·
 * W_c[l1,h1]); every other head keeps the target run's input, and
 * everything from the receiver's layer on is recomputed, so the
 * receiver's change reaches the logits through every later layer. The
 * direct path: the target's final residual + Δsender. Noising: target
 * the clean run, source the corrupted one; denoising the mirror image.
 * pos is the same in both runs, so its paths are 0
 * (with shortformer positions, model.h, pos never reaches v or the logits
 * at all; it feeds each layer's q and k directly, with the same value in
 * both runs). Everything else holds for shortformer models as written: the
 * residual stream simply holds no positions, and a q or k computed or
 * patched always includes its own position's W_pos term.
 *
 * Cost: per batch of pairs, the clean and corrupted runs once each,
 * cached; each configuration then recomputes only from the patched layer
 * on, and only the rows it can change (al_model_forward_delta), and
 * unembeds only the metric's positions among them. o->naive = 1 runs one
 * full patched forward per configuration instead (the reference the
 * benchmark compares against; same numbers to float rounding).
 *
 * Ownership and failure contract as the analyses of analyses.h: 0 with
 * *r filled (free with its _free), or −1 with e set and *r zeroed; m's
 * gates and hooks are as before on return. */
#ifndef ATTNLAB_PATCH_H
#define ATTNLAB_PATCH_H

#include <signal.h>
#include <stdint.h>
#include "attnlab/gap.h"
#include "attnlab/graph.h"
#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/stats.h"
#include "attnlab/scores.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

typedef enum {
    AL_PATCH_RESID,
    AL_PATCH_HEAD,
    AL_PATCH_HEAD_POS,
    AL_PATCH_Q,
    AL_PATCH_K,
    AL_PATCH_V,
    AL_PATCH_PATTERN
} al_patch_component;
typedef enum { AL_PATCH_DENOISE, AL_PATCH_NOISE } al_patch_direction;

typedef struct al_patch_opts {
    const char *task; /* "induction" (default), "names" or "file" */
    const char *pairs; /* task "file": the JSONL path */
    const char *component; /* "resid", "head" (default), "head_pos", "q", "k", "v",
                            * "pattern" (ignored by al_paths_run) */
    const char *direction; /* "denoise" (default) or "noise" */
    int probe_r; /* induction: random tokens per half, >= 2; 0 (the default):
                            * min(50, (n_ctx − 1) / 2), so a model of short context
                            * runs without the flag (al_patch_probe_r) */
    int probe_n; /* induction, names: pairs (64), 1..1000000 */
    uint64_t probe_seed; /* induction, names: seed (1) */
    int batch; /* pairs per forward pass (8), 1..100000 */
    int naive; /* 1: one full forward per configuration */
    int progress; /* 1: a progress line on stderr */
    volatile sig_atomic_t *stop; /* non-NULL and set: stop, −1 "interrupted" */
    const al_probe_src *probe_src; /* what the induction task's halves are made of, clean
                                    * and corrupted (scores.h); NULL = random ids, all */
    double ci_level; /* al_patch_run's intervals: level (AL_CI_LEVEL), in (0, 1) */
    int bootstrap; /* resamples of the pairs (AL_CI_BOOTSTRAP), 0..100000 */
    uint64_t ci_seed; /* their seed (AL_CI_SEED) */
} al_patch_opts;

#define AL_PATCH_OPTS_DEFAULT_N 64 /* pairs */
#define AL_PATCH_OPTS_INIT                                                                         \
    {                                                                                              \
        "induction", NULL, "head", "denoise", 0, AL_PATCH_OPTS_DEFAULT_N, 1, 8, 0, 0, NULL, NULL,  \
            AL_CI_LEVEL, AL_CI_BOOTSTRAP, AL_CI_SEED                                               \
    }
/* The induction task's R for opts o on a model of context n_ctx. */
int al_patch_probe_r(const struct al_patch_opts *o, int n_ctx);
/* 0 when o's task fits a model of context n_ctx (the induction task's
 * 2R+1 tokens, R >= 2; the other tasks are checked when made), else −1
 * with e. al_patch_task_make checks it; a command checks it before its
 * run begins, an experiment before its first stage. */
int al_patch_task_fits(const struct al_patch_opts *o, int n_ctx, al_err *e);
al_patch_opts al_patch_opts_defaults(void);
/* The task options a patching run stored in its config_json (the
 * command's flags: task, pairs, probe_r, n, seed as a number or a
 * decimal string) into o, for re-making its task later (pictures, the
 * report); keys absent or mistyped leave o as it was. o's strings then
 * point into j: keep j until o is done with. */
struct cJSON;
void al_patch_opts_from_config(const struct cJSON *j, al_patch_opts *o);
/* 0 if the names are known and the numbers in range (and task "file" has
 * a path), else −1 with e naming the choices or limits. (n_ctx and the
 * tokenizer are checked when the task is made.) */
int al_patch_opts_check(const al_patch_opts *o, al_err *e);
/* Component / direction from their names; −1 if unknown. */
int al_patch_component_parse(const char *s, al_patch_component *c);
int al_patch_direction_parse(const char *s, al_patch_direction *d);
const char *al_patch_component_name(al_patch_component c);
const char *al_patch_direction_name(al_patch_direction d);

/* The task of o for model m: induction needs no tokenizer (bos = its BOS
 * id, −1: none, token 0); names and file need tok (−1 "needs a
 * tokenizer" when NULL). Every token id must be < d_vocab and every
 * length <= n_ctx, else −1 naming it. o->stop is read while the names
 * task is built (al_pairs_names), which can take a while for a large
 * probe_n: set, −1 "interrupted" and *t empty. *t is the caller's
 * (al_pairs_free). */
int al_patch_task_make(al_pairs *t, const al_model *m, const al_tokenizer *tok, int bos,
                       const al_patch_opts *o, al_err *e);

typedef struct al_patch_result {
    int L, H, N, T; /* T = the task's padded length */
    al_patch_component component;
    al_patch_direction direction;
    double m_clean, m_corr; /* the metric on the two unpatched runs */
    int rows, cols; /* the grid of configurations (above) */
    int n; /* rows·cols */
    double *metric; /* (n) M_p; one allocation with effect */
    double *effect; /* (n) normalised effect */
    /* (n) how sure each effect is, from the pairs (al_boot_ratio: the
     * patched minus the corrupted metric and the clean minus the
     * corrupted, summed per pair, resampled together); the level,
     * resamples, seed and pair count; NULL for al_patch_eval's runs */
    al_interval *effect_ci;
    double ci_level;
    int ci_boot, ci_n;
    uint64_t ci_seed;
    double seconds; /* wall time of the sweep */
    al_warnings warn; /* the gap check and the effects' range (gap.h) */
} al_patch_result;

/* Patch every configuration of o->component in o->direction on task t. */
int al_patch_run(al_model *m, const al_pairs *t, const al_patch_opts *o, al_patch_result *r,
                 al_err *e);
void al_patch_result_free(al_patch_result *r);

/* The gap check (gap.h) of task t alone: both unpatched runs, as a sweep
 * computes them (o->batch, o->stop; m's gates and hooks apply),
 * their per-pair metric values into al_gap_check_items; *m_clean and
 * *m_corr (either may be NULL) get M as al_patch_run's. For analyses
 * that report a pair task without patching it (al_attribute_run). 0, or
 * −1 with e (bad options, a task that does not fit m, out of memory,
 * interrupted); w unchanged on failure. */
int al_patch_gap(al_model *m, const al_pairs *t, const al_patch_opts *o, al_warnings *w,
                 double *m_clean, double *m_corr, al_err *e);

/* The metric of one arbitrary patch on task t: masks as al_patch_spec's
 * (model.h) for T = t->T (any may be NULL), applied in o->direction; also
 * M_clean and M_corr (any output pointer may be NULL). For sets the
 * component grids do not cover (several positions or heads at once). */
int al_patch_eval(al_model *m, const al_pairs *t, const al_patch_opts *o,
                  const unsigned char *x_mask, const unsigned char *z_mask,
                  const unsigned char *qkv_mask, const unsigned char *att_mask, double *m_patched,
                  double *m_clean, double *m_corr, al_err *e);

/* Path patching's layout, the same for every depth (for 1 and 2 layers
 * the one of earlier versions, index for index). W = max(1, L−1)·H
 * (al_paths_width). Senders s: 0 = embed, 1 = pos, 2 + l·H + h = head l.h
 * for l = 0..max(0, L−2) (n_senders = 2 + W). Receivers r of channels c
 * = 0 q, 1 k, 2 v: head l1.h1 for l1 = 1..L−1 at r = (l1−1)·H + h1
 * (n_recv = (L−1)·H); c = 3 is the direct path into the logits, r = 0.
 * Value [c][s][r] at index (c·n_senders + s)·W + r; NaN where no such
 * path exists (al_paths_exists: a sender head in a layer >= the
 * receiver's, direct at r > 0, q/k/v of a 1-layer model). */
#define AL_PATHS_MAX_LAYERS AL_GRAPH_MAX_LAYERS
typedef struct al_paths_result {
    int L, H, N, T;
    int n_senders, n_recv; /* 2 + W; (L−1)·H q/k/v receivers */
    int width; /* W */
    al_patch_direction direction;
    double m_clean, m_corr;
    int n; /* 4·n_senders·W */
    double *metric, *effect; /* (n) each, one allocation; NaN where
                                      * no path exists */
    al_interval *effect_ci; /* (n) as al_patch_result's (NaN where no path exists) */
    double ci_level;
    int ci_boot, ci_n;
    uint64_t ci_seed;
    double seconds;
    al_warnings warn; /* the gap check and the effects' range (gap.h) */
} al_paths_result;

/* Every sender × receiver path in o->direction on task t; a model of
 * more than AL_PATHS_MAX_LAYERS layers: −1. */
int al_paths_run(al_model *m, const al_pairs *t, const al_patch_opts *o, al_paths_result *r,
                 al_err *e);
void al_paths_result_free(al_paths_result *r);
/* W = max(1, L−1)·H. */
int al_paths_width(int L, int H);
/* 1 if path (channel c, sender s, receiver r) exists in an L-layer,
 * H-head model (the layout above), else 0 (also out of range). */
int al_paths_exists(int L, int H, int c, int s, int r);
/* Sender s's name in an H-head model: "embed", "pos" or "l.h" into buf;
 * returns buf. */
const char *al_paths_sender_name(int H, int s, char *buf, size_t cap);
/* q/k/v receiver r's head "l1.h1" (l1 = r / H + 1, h1 = r % H) into buf;
 * returns buf. */
const char *al_paths_receiver_name(int H, int r, char *buf, size_t cap);
/* How many paths exist (the layout's non-NaN entries): for 1 and 2
 * layers n_senders·(3·n_recv + 1). */
int al_paths_count(int L, int H);
/* "q", "k", "v" or "direct". */
const char *al_paths_channel_name(int c);

#endif
