/* hooks.h -- interventions as engine hooks: functions the forward pass
 * calls at named points with the activation there, which they may read
 * and overwrite in place (TransformerLens's hook points; model.h).
 *
 * Why: patching, z replacement (mean/resample ablation) and circuit runs
 * are each a few writes into the forward's activations. As hooks, their
 * owners (patch hooks below, the z replacement of ablate.c, the circuit
 * runs of circuit_run.h) keep their own state and scratch, and the
 * forward knows none of them. A model with no hooks pays one test per
 * point.
 *
 * Points, per layer l (shapes for the forward's batch B × T; C d_model,
 * H heads, D d_head; `ld` floats from one (b, t) row to the next):
 *   RESID_PRE   (B, T, C)        the residual stream entering layer l
 *   Q, K, V     (B, T, H, D)     head queries, keys, values (views into
 *                                the fused q|k|v buffer: ld = 3·H·D);
 *                                after shortformer positions are added
 *   PATTERN     (B, H, T, T)     attention probabilities; a hook that
 *                                writes row (h, t) sets rows[h·T + t]
 *                                and the engine recomputes z there as
 *                                row · v (for every b)
 *   Z           (B, T, H, D)     each head's z as the gate will scale it
 *                                (a copy: m->z keeps what the head
 *                                computed); a hook that sets a head's z
 *                                at every position from something that
 *                                does not depend on this run sets
 *                                fixed[h] (no gradient reaches its
 *                                q/k/v, and the incremental forward keeps
 *                                the cached value; al_acts.zfixed)
 *   RESULT      (B, T, H, C)     each head's output zg · W_O[l,h], the
 *                                terms the residual stream adds (ld =
 *                                H·C). Computed only when a hook is at
 *                                this point; the layer then adds them
 *                                head by head, which rounds differently
 *                                from the one fused product it uses
 *                                otherwise (within float rounding)
 *   RESID_POST  (B, T, C)        the residual stream after layer l (at
 *                                l = L − 1: the final one, read by
 *                                ln_final and W_U)
 * and the points of TransformerLens's whole attention-only model
 * (docs/hooks.md):
 *   EMBED, POS_EMBED (B, T, C)   W_E[tok], W_pos[t] (model level)
 *   Q_INPUT, K_INPUT, V_INPUT    (B, T, H, C) each head's own copy of
 *                                resid_pre (ld H·C): split inputs
 *   LN1_SCALE   (B, T, 1)        ln1's scale (ld 1); LN1_NORMALIZED (B,
 *                                T, C) its output; with split inputs a
 *                                head axis (ld H, H·C), three calls
 *                                (al_hook_act.input 0, 1, 2)
 *   ATTN_SCORES (B, H, T, T)     q·k/√D, −inf above the diagonal (ld T)
 *   ATTN_OUT    (B, T, C)        Σ_h result + b_O
 *   LNF_SCALE, LNF_NORMALIZED, LOGITS  (B, T, 1), (B, T, C), (B, T, V)
 *                                (model level)
 * Order within a layer: RESID_PRE, Q/K/V_INPUT, LN1_SCALE, LN1_NORMALIZED,
 * Q, K, V, ATTN_SCORES, PATTERN, Z, gates, RESULT, W_O, ATTN_OUT,
 * RESID_POST; at one point, hooks run in the order they were added.
 * RESID_POST of layer l < L − 1 is the same buffer as RESID_PRE of l + 1
 * (its hooks run first). A hook that writes what backward cannot
 * differentiate (a patched value) sets `intervened`: backward and
 * activation gradients then refuse that forward (model.h).
 *
 * The incremental forward (al_model_forward_delta) runs no hooks: its
 * interventions are its patch spec. */
#ifndef ATTNLAB_HOOKS_H
#define ATTNLAB_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "attnlab/util.h"

struct al_model;

/* The points' TransformerLens names, shapes and order are one table,
 * docs/hooks.md (TransformerLens 2.x semantics), kept in hooks.c
 * (al_hook_name, al_hook_parse, al_hook_shape). New points are added
 * at the end, so the values above stay. A point whose `runs` entry in
 * that table is 0 is named and parsed but not yet run by the forward:
 * al_hook_add refuses it. */
typedef enum {
    AL_HOOK_RESID_PRE,
    AL_HOOK_Q,
    AL_HOOK_K,
    AL_HOOK_V,
    AL_HOOK_PATTERN,
    AL_HOOK_Z,
    AL_HOOK_RESULT,
    AL_HOOK_RESID_POST,
    AL_HOOK_EMBED, /* hook_embed                (B, T, C)     model */
    AL_HOOK_POS_EMBED, /* hook_pos_embed            (B, T, C)     model */
    AL_HOOK_Q_INPUT, /* blocks.l.hook_q_input     (B, T, H, C)        */
    AL_HOOK_K_INPUT, /* blocks.l.hook_k_input     (B, T, H, C)        */
    AL_HOOK_V_INPUT, /* blocks.l.hook_v_input     (B, T, H, C)        */
    AL_HOOK_LN1_SCALE, /* blocks.l.ln1.hook_scale   (B, T, 1)           */
    AL_HOOK_LN1_NORMALIZED, /* blocks.l.ln1.hook_normalized (B, T, C)        */
    AL_HOOK_ATTN_SCORES, /* blocks.l.attn.hook_attn_scores (B, H, T, T)   */
    AL_HOOK_ATTN_OUT, /* blocks.l.hook_attn_out    (B, T, C)           */
    AL_HOOK_LNF_SCALE, /* ln_final.hook_scale       (B, T, 1)     model */
    AL_HOOK_LNF_NORMALIZED, /* ln_final.hook_normalized  (B, T, C)     model */
    AL_HOOK_LOGITS, /* logits                    (B, T, V)     model */
    AL_HOOK_N_POINTS
} al_hook_point;

/* TransformerLens's name of point at layer (model-level points ignore
 * layer) into buf: its length, or -1 for an unknown point. */
int al_hook_name(al_hook_point point, int layer, char *buf, size_t cap);
/* The point and layer a TransformerLens hook name names
 * ("blocks.1.attn.hook_pattern" -> PATTERN, 1; "ln_final.hook_scale" ->
 * LNF_SCALE, 0; model-level points get layer 0): 0, or -1 with e naming
 * the name (with the nearest known name when one is near, as the CLI
 * suggests a mistyped command; for a layer >= n_layers, the model's layer
 * count). */
int al_hook_parse(const char *name, int n_layers, al_hook_point *point, int *layer, al_err *e);
/* 1 if point is at model level (one per model, not per layer). */
int al_hook_is_model_level(al_hook_point point);
/* The letters of point's shape in the table ("BTHD", "BHTS", ...: B
 * batch, T positions, S key positions, H heads, D d_head, C d_model, V
 * d_vocab, 1), or NULL for an unknown point: which axis is the head's,
 * the position's, the vector's. */
const char *al_hook_layout(al_hook_point point);
/* 1 if the forward runs hooks at point (see the `runs` column). */
int al_hook_runs(al_hook_point point);
/* 1 if point exists in a model of config c (the LayerNorm points only
 * with LayerNorm); al_hook_add refuses the others. */
struct al_config;
int al_hook_exists(const struct al_config *c, al_hook_point point);
/* TransformerLens's shape of point for a batch B x T of a model with
 * d_model C, H heads of D, vocabulary V: the number of dims (3 or 4),
 * or -1 for an unknown point. */
int al_hook_shape(al_hook_point point, int B, int T, int C, int H, int D, int V, int64_t shape[4]);

/* What a hook sees. data is writable; the rest describes it. */
typedef struct al_hook_act {
    struct al_model *m; /* the model (weights, gates, m->B, m->T, m->inputs) */
    al_hook_point point;
    int layer;
    float *data; /* the activation (shape above) */
    size_t ld; /* floats between consecutive (b, t) rows (Q/K/V/Z/RESID) */
    unsigned char *rows; /* PATTERN: (H, T) rows written; else NULL */
    unsigned char *fixed; /* Z: (H) heads set in full; else NULL */
    int intervened; /* set 1: the forward is not differentiable */
    int input; /* LN1_SCALE, LN1_NORMALIZED under split inputs
                               (docs/hooks.md): 0, 1, 2 for the ln1 of the
                               query, key, value input, whose data then has
                               a head axis, (B, T, H, 1) and (B, T, H, C)
                               (ld H and H·C); −1 otherwise */
} al_hook_act;

/* a->data as TransformerLens's array at a->point: shape as al_hook_shape
 * for the forward's B × T, strides in floats (the row of a position,
 * letter T of the shape, is a->ld floats from the next; the dims after
 * it are contiguous; those before it step over whole rows), so a view
 * into the fused q|k|v buffer or the pattern needs no copy. The number
 * of dims, or −1 for an unknown point. */
int al_hook_view(const al_hook_act *a, int64_t shape[4], int64_t strides[4]);

/* A hook: 0, or −1 with e (the forward then fails with that error). */
typedef int (*al_hook_fn)(al_hook_act *a, void *ctx, al_err *e);

/* A registered hook; layer −1: every layer. */
typedef struct al_hook {
    al_hook_point point;
    int layer;
    al_hook_fn fn;
    void *ctx;
} al_hook;

/* The model's hook list (in al_model). It grows on demand (hundreds of
 * hooks, one per head of every layer, are common) and the model owns its
 * storage: al_model_free frees it. So it is no plain value: a caller that
 * must run without the hooks in force moves them out with al_hooks_save
 * and back with al_hooks_restore, never by assignment. */
typedef struct al_hooks {
    int n, cap;
    al_hook *h;
} al_hooks;

/* Register fn(ctx) at point, layer (−1: every layer) on m, after the
 * hooks already there: 0, or −1 with e when the point or layer is out
 * of range, the forward does not run the point, or out of memory. */
int al_hook_add(struct al_model *m, al_hook_point point, int layer, al_hook_fn fn, void *ctx,
                al_err *e);
/* Remove every hook registered with ctx (none: no-op). */
void al_hook_remove(struct al_model *m, const void *ctx);
/* Remove every hook (the storage stays for later ones). */
void al_hook_clear(struct al_model *m);
/* Move m's hooks into *saved, leaving m with none (no allocation: it
 * cannot fail). Hooks added to m meanwhile are its own; al_hooks_restore
 * drops them and puts *saved back. */
void al_hooks_save(struct al_model *m, al_hooks *saved);
/* Remove m's hooks (freeing their storage) and move *saved back into m;
 * *saved is then empty. */
void al_hooks_restore(struct al_model *m, al_hooks *saved);
/* dst = the hooks of src whose ctx is not skip, in order, dst's storage
 * reused and grown as needed (a second forward beside the model's own
 * that runs its hooks: model_forward_shared): 0, or −1 with e (out of
 * memory; dst then holds none). */
int al_hooks_copy(al_hooks *dst, const al_hooks *src, const void *skip, al_err *e);
/* Free a list's storage (a zeroed list is empty; fine twice). */
void al_hooks_free(al_hooks *hs);
/* 1 if a hook is registered at (point, l). */
int al_hook_any(const struct al_model *m, al_hook_point point, int l);
/* Run the hooks at (point, a->layer) in order on a (the forward calls
 * this): 0, or the first −1. */
int al_hook_run(struct al_model *m, al_hook_point point, al_hook_act *a, al_err *e);

/* ------------------------------------------------ patching as hooks */

/* Activation patching (model.h, al_patch_spec) in the full forward:
 * register the hooks that apply sp (borrowed; it must outlive them) at
 * RESID_PRE / RESID_POST (x), Q/K/V (q, k, v), PATTERN (attention rows)
 * and Z (head z). 0, or −1 with e: a mask without its source, no room.
 * Remove them with al_hook_remove(m, sp). */
struct al_patch_spec;
int al_patch_hooks_add(struct al_model *m, const struct al_patch_spec *sp, al_err *e);

/* ------------------------------------------- z replacement as hooks */

/* Replacement of chosen heads' z (mean and resample ablation): rep[l·H
 * + h] NULL or (B, T, D) for the forward's B, T; the head's z is set in
 * full (fixed: no gradient upstream). The caller owns rep (L·H pointers)
 * and what it points at; register with al_zrep_hooks_add, remove with
 * al_hook_remove(m, rep). */
int al_zrep_hooks_add(struct al_model *m, const float *const *rep, al_err *e);

#endif
