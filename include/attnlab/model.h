/* model.h -- the attention-only transformer of docs/design.md §2.
 *
 * Row-vector convention (as TransformerLens). No MLP; LayerNorm and
 * biases optional (al_config: none by default). One flat buffer holds all parameters, one their gradients, one
 * the activations (llm.c style). Parameter tensors are stored in exactly
 * the TransformerLens layout, so a checkpoint is a plain dump:
 *
 *   W_E   (V, C)          embed.W_E
 *   W_pos (n_ctx, C)      pos_embed.W_pos
 *   W_Q   (L, H, C, D)    blocks.{l}.attn.W_Q  = W_Q[l]  (H, C, D)
 *   W_K   (L, H, C, D)    blocks.{l}.attn.W_K
 *   W_V   (L, H, C, D)    blocks.{l}.attn.W_V
 *   W_O   (L, H, D, C)    blocks.{l}.attn.W_O
 *   W_U   (C, V)          unembed.W_U   (absent when tied: W_U = W_Eᵀ)
 *
 * with V=d_vocab, C=d_model, H=n_heads, D=d_head, L=n_layers.
 *
 * Head gates g[l,h] (default 1) scale each head's output; ablation and
 * pruning set them, and backward fills ∂L/∂g. Everything else that
 * intervenes in a forward pass is a hook (hooks.h) at TransformerLens's
 * hook points: activation patching (al_patch_spec below, from another
 * run's cached activations), z replacement (mean and resample ablation)
 * and circuit runs (graph.h); the model holds only the list of hooks. */
#ifndef ATTNLAB_MODEL_H
#define ATTNLAB_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/hooks.h"
#include "attnlab/util.h"

/* Positional embeddings (TransformerLens' positional_embedding_type):
 *  standard    x_0 = W_E[tok] + W_pos[t]: positions live in the residual
 *              stream, so every head's q, k, v and the unembedding see them.
 *  shortformer x_0 = W_E[tok]: the residual stream never holds positions;
 *              every head (l, h) of every layer reads W_pos[t] in its query
 *              and key inputs only: q = (x_l + W_pos[t]) W_Q[l,h],
 *              k = (x_l + W_pos[t]) W_K[l,h], v = x_l W_V[l,h]. */
enum { AL_POS_STANDARD = 0, AL_POS_SHORTFORMER = 1 };

/* LayerNorm (TransformerLens' normalization_type), before every layer's
 * attention (ln1) and before the unembedding (ln_final):
 *  none   (null)     no normalisation (0, when zeroed)
 *  LN     ("LN")     x_c = x − mean(x), scale = sqrt(mean(x_c²) + ln_eps),
 *                    ln(x) = x_c / scale · w + b (w, b learned, (C) each)
 *  LNPre  ("LNPre")  ln(x) = x_c / scale: TransformerLens's LayerNorm with
 *                    w and b folded into the next weights (fold_ln) */
enum { AL_NORM_NONE = 0, AL_NORM_LN = 1, AL_NORM_LNPRE = 2 };

/* Biases (al_config.biases, a bitmask; TransformerLens has all five):
 * q = ln1(x) W_Q + b_Q (and k, v alike); attn_out = Σ_h z_h W_O[h] + b_O;
 * logits = ln_final(x) W_U + b_U. */
enum {
    AL_BIAS_Q = 1,
    AL_BIAS_K = 2,
    AL_BIAS_V = 4,
    AL_BIAS_O = 8,
    AL_BIAS_U = 16,
    AL_BIAS_ALL = 31
};

/* Weight processing done to a model (al_config.processed; process.h):
 * config.json's "processing" lists their names. */
enum {
    AL_PROC_FOLD_LN = 1,
    AL_PROC_CENTER_WRITING = 2,
    AL_PROC_CENTER_UNEMBED = 4,
    AL_PROC_FOLD_VALUE_BIASES = 8,
    AL_PROC_ALL = 15
};

/* A zeroed config (but its sizes) is the plain model: standard positions,
 * no LayerNorm, no biases. */
typedef struct al_config {
    int n_layers, d_model, n_heads, d_head, n_ctx, d_vocab;
    int tied_embeddings;
    int pos_type; /* AL_POS_* (0, standard, when zeroed) */
    uint64_t seed;
    int norm_type; /* AL_NORM_* (0, none, when zeroed) */
    unsigned biases; /* AL_BIAS_* bits (0: none) */
    double ln_eps; /* LayerNorm's eps (TransformerLens `eps`; 1e-5 by default;
                        unused without LayerNorm, where 0 is accepted) */
    unsigned processed; /* AL_PROC_* bits: the weight processing done (0: none) */
} al_config;

/* "standard" / "shortformer" (NULL for an unknown type), and back: 0, or
 * -1 when name is neither. */
const char *al_pos_type_name(int pos_type);
int al_pos_type_parse(const char *name, int *pos_type);
/* TransformerLens's normalization_type of norm_type: NULL for none (JSON
 * null), "LN", "LNPre"; and back (name NULL: none): 0, or −1 for another
 * name. */
const char *al_norm_type_name(int norm_type);
int al_norm_type_parse(const char *name, int *norm_type);
/* TransformerLens's name of one AL_BIAS_* bit ("b_Q", ..., "b_U"), NULL
 * for anything else; and the bit of such a name (0: none). */
const char *al_bias_name(unsigned bit);
unsigned al_bias_parse(const char *name);
/* The name of one AL_PROC_* bit ("fold_ln", "center_writing_weights",
 * "center_unembed", "fold_value_biases": TransformerLens's option names),
 * NULL for anything else; and the bit of such a name (0: none). */
const char *al_process_name(unsigned bit);
unsigned al_process_parse(const char *name);
/* A set of biases as a user writes it: "none", "all", or letters from
 * q, k, v, o, u, each at most once, commas ignored ("qkvo", "qkvo,u"):
 * 0 and *bits, or −1. */
int al_bias_spec_parse(const char *spec, unsigned *bits);
/* 1 if c is the plain model of docs/design.md §2 (no LayerNorm, no
 * biases), the one every analysis supports. */
int al_config_is_plain(const al_config *c);
/* 0 when c is plain; else −1 with e = "WHAT does not yet support
 * LayerNorm or bias models (this one has ...)": the one refusal of the
 * analyses and engine paths that assume the plain model. */
int al_config_plain_check(const al_config *c, const char *what, al_err *e);

/* Defaults of docs/design.md §2 (d_vocab must still be set). */
al_config al_config_default(void);
/* Refuse impossible configs with a message naming the field. */
int al_config_validate(const al_config *c, al_err *e);

/* The parameter tensors, in the order of the flat buffer. Those after
 * W_U exist only with LayerNorm or biases (size 0 otherwise), so a plain
 * model's buffer, arithmetic and checkpoint are those of W_E..W_U alone:
 *
 *   ln1.w, ln1.b  (L, C)      blocks.{l}.ln1.w / .b          LN only
 *   b_Q, b_K, b_V (L, H, D)   blocks.{l}.attn.b_Q, b_K, b_V  (H, D) a layer
 *   b_O           (L, C)      blocks.{l}.attn.b_O
 *   ln_final.w, .b (C)        ln_final.w / .b                LN only
 *   b_U           (V)         unembed.b_U
 *
 * (LNPre has no w or b: its LayerNorms only centre and scale.) */
enum {
    AL_P_WE,
    AL_P_WPOS,
    AL_P_WQ,
    AL_P_WK,
    AL_P_WV,
    AL_P_WO,
    AL_P_WU,
    AL_P_LN1W,
    AL_P_LN1B,
    AL_P_BQ,
    AL_P_BK,
    AL_P_BV,
    AL_P_BO,
    AL_P_LNFW,
    AL_P_LNFB,
    AL_P_BU,
    AL_NPARAM
};

/* Activation patching: a forward pass in which chosen activations are
 * taken from a cached source run instead of computed. The source run must
 * have had the same (B, T) as the patched forward; the masks are laid out
 * for that T and apply to every sequence b alike.
 *
 *   src_x    (L+1, B, T, C)    the source's residual streams, as m->x
 *   src_z    (L, B, T, H, D)   the source's z (pre-gate, pre-W_O), as m->z
 *   x_mask   (L+1, T)          1 at [l, t]: the residual stream entering
 *                              layer l (l = L: the final one, read by W_U)
 *                              at position t is src_x[l, b, t, :]
 *   z_mask   (L, H, T)         1 at [l, h, t]: head (l, h)'s z at position
 *                              t is src_z[l, b, t, h, :]
 *   src_qkv  (L, B, T, 3, H, D) the source's q, k, v, as m->qkv
 *   src_att  (L, B, H, T, T)   the source's attention probabilities, as m->att
 *   qkv_mask (L, 3, H, T)      1 at [l, s, h, t]: head (l, h)'s query
 *                              (s = 0), key (1) or value (2) at position t
 *                              is src_qkv[l, b, t, s, h, :] (the head
 *                              computed it from the source's residual)
 *   att_mask (L, H, T)         1 at [l, h, t]: head (l, h)'s attention row
 *                              for destination t is src_att[l, b, h, t, :]
 *
 * A mask may be NULL (nothing of that kind patched); a non-NULL mask needs
 * its source. Order within a layer: x, then q/k/v, then the attention
 * rows (a patched row is used as is; z = row · v), then z. A patched x
 * is written into m->x, and patched q/k/v and rows into m->qkv and
 * m->att, so later layers read them and the cache of the patched run
 * shows them; a patched z goes into m->zg only (m->z keeps what the head
 * computed), and the head's gate still scales it, so patching z of a
 * head is patching its output (W_O is linear). A patched z overrides
 * a z replacement at the positions it covers when its hooks are added
 * after the replacement's. Backward refuses a forward that was patched:
 * the patched values are constants, and no caller needs their gradients
 * yet. A full patched forward: al_patch_hooks_add (hooks.h). */
typedef struct al_patch_spec {
    const float *src_x;
    const float *src_z;
    const unsigned char *x_mask;
    const unsigned char *z_mask;
    const float *src_qkv;
    const float *src_att;
    const unsigned char *qkv_mask;
    const unsigned char *att_mask;
} al_patch_spec;

/* A run's cached activations, for later patched passes (shapes as the
 * model's own; B and T those of the forward they were saved from). */
typedef struct al_acts {
    int B, T;
    float *x; /* (L+1, B, T, C) */
    float *qkv; /* (L, B, T, 3, H, D) */
    float *att; /* (L, B, H, T, T) */
    float *z; /* (L, B, T, H, D) before gates */
    float *zg; /* (L, B, T, H, D) gated (or replaced, or patched): input to W_O */
    unsigned char *zfixed; /* (L, H) 1: a hook set the head's z in full (hooks.h) */
} al_acts;

typedef struct al_model {
    al_config cfg;
    /* parameters */
    size_t param_size[AL_NPARAM]; /* floats per tensor (W_U: 0 when tied) */
    size_t n_params;
    float *params; /* one allocation, n_params floats */
    float *p[AL_NPARAM]; /* views into params */
    float *grads; /* same layout as params; NULL until needed */
    float *g[AL_NPARAM];
    /* head gates and their gradients, (L, H) */
    float *gates;
    float *gate_grads;
    int skip_gate_grads; /* 1: backward leaves gate_grads as they were (the
                            trainer: gates are not trained, and their
                            gradient is a serial pass over every z) */
    /* interventions: hooks the forward calls (hooks.h; borrowed contexts) */
    al_hooks hooks;

    /* activations for the current (B, T); (re)allocated by forward */
    int B, T; /* shapes of the last forward */
    int B_cap, T_cap; /* allocated for */
    float *acts; /* one allocation */
    float *x; /* (L+1, B, T, C) residual stream before each layer and final */
    float *qkv; /* (L, B, T, 3, H, D) */
    float *att; /* (L, B, H, T, T) attention probabilities (causal) */
    float *z; /* (L, B, T, H, D) attention-weighted values, before gates */
    float *zg; /* (L, B, T, H, D) gated (or replaced) z: input to W_O */
    float *zs; /* (L, B, T, H, D) z after the Z hooks, where a layer has any */
    float *result; /* (B, T, H, C) one layer's head outputs, for RESULT hooks */
    unsigned char *zfixed; /* (L, H) 1: a Z hook set the head's z in full */
    unsigned char *zhooked; /* (L) 1: the layer's gates scaled zs, not z */
    unsigned char *rows; /* (H, T) PATTERN hooks' written rows (scratch) */
    float *probs; /* (B, T, V) softmax of logits (logits kept in place
                         of probs only transiently) */
    float *losses; /* (B, T) per-position loss; 0 where target < 0 */
    float mean_loss; /* mean over positions with target >= 0; -1 if none */
    int has_targets;
    int *inputs; /* owned copy */
    int *targets; /* owned copy; -1 = ignore */
    /* backward scratch, allocated with acts */
    float *dx; /* (B, T, C) */
    float *dzg; /* (B, T, H, D) */
    float *dqkv; /* (B, T, 3, H, D) */
    float *wqkv; /* (C, 3*H*D) fused per-layer Q|K|V weights (scratch) */
    float *dwqkv; /* (C, 3*H*D) */
    float *gate_part; /* (B, H) per-batch partial ∂L/∂g, summed in order */
    float *posqk; /* (T, 2, H, D) shortformer: a layer's W_pos W_Q | W_pos W_K
                         (forward), Σ_b dq | dk (backward); scratch */
    /* LayerNorm (norm_type LN or LNPre; NULL without), allocated with acts */
    float *ln1; /* (L, B, T, C) ln1's output: what W_Q, W_K, W_V read */
    float *ln1_mean; /* (L, B, T) */
    float *ln1_scale; /* (L, B, T) as the LN1_SCALE hooks left it */
    float *lnf; /* (B, T, C) ln_final's output: what W_U reads */
    float *lnf_mean; /* (B, T) */
    float *lnf_scale; /* (B, T) */
    float *dln; /* (B, T, C) backward scratch: ∂ of a LayerNorm's output */
    float *part; /* backward scratch of the block sums of b_U's gradient
                         (layers.h); NULL without b_U */
    int bu_pending; /* the last forward's logits lack b_U: its cross-entropy adds it */
    /* scratch of the hook points that need arithmetic of their own (split
     * inputs, attn_out, pos_embed), allocated when such a hook is added
     * and the forward reaches it */
    float *hk; /* per-layer scratch */
    size_t hk_cap; /* floats */
    float *pos; /* (B, T, C) the POS_EMBED hooks' W_pos[t] */
    size_t pos_cap;
    int pos_changed; /* shortformer: the POS_EMBED hooks changed it: q, k read m->pos */
    int n_valid; /* positions with a target in the last forward */
    int intervened; /* a hook of the last forward set `intervened` (hooks.h) */
} al_model;

/* Allocate parameters for cfg and initialise them from cfg->seed (see
 * model.c for the scales and why). */
int al_model_init(al_model *m, const al_config *cfg, al_err *e);
/* Allocate parameters only (zeroed), e.g. before loading a checkpoint. */
int al_model_alloc(al_model *m, const al_config *cfg, al_err *e);
void al_model_free(al_model *m);
/* Allocate the gradient buffer (done lazily by backward as well). */
int al_model_alloc_grads(al_model *m, al_err *e);
/* Sizes from a config alone, for refusing work before it starts
 * (membudget.h): the floats of the parameter buffer (n_params; the
 * gradients and each of AdamW's moments are as many), and the bytes of
 * the activations a forward (and backward) of (B, T) allocates. Computed
 * in double: no product wraps, whatever the config. */
double al_model_param_floats(const al_config *c);
double al_model_acts_bytes(const al_config *c, int B, int T);

/* Per-head views: W_Q[l,h] is (C,D) row-major; W_O[l,h] is (D,C). */
float *al_head_wq(const al_model *m, int l, int h);
float *al_head_wk(const al_model *m, int l, int h);
float *al_head_wv(const al_model *m, int l, int h);
float *al_head_wo(const al_model *m, int l, int h);
/* W_U as (C,V) is m->p[AL_P_WU] when untied; when tied the caller must
 * use W_Eᵀ. This returns NULL when tied. */
float *al_model_wu(const al_model *m);

/* TransformerLens name and shape of parameter tensor `which` at layer l
 * (l ignored for non-block tensors). Per-layer tensors are views
 * p[which] + l * per_layer. Returns the number of dims. */
int al_param_tl_name(const al_model *m, int which, int l, char *name, size_t cap, int64_t shape[4]);
size_t al_param_layer_size(const al_model *m, int which);
/* 1 if tensor `which` has one slice per layer (W_Q..W_O, ln1, b_Q..b_O). */
int al_param_per_layer(int which);
/* Floats of params (and grads) from W_Q to the end of W_U: the span
 * AdamW's weight decay applies to (docs/design.md §2: not the
 * embeddings, the LayerNorm weights or the biases). Starts at
 * param_size[AL_P_WE] + param_size[AL_P_WPOS]. */
size_t al_param_decay_end(const al_model *m);

/* The forward's checks of its token ids, with its messages, for callers
 * that hold ids wider than an int (the Python package checks its int64
 * ids here before narrowing them): a batch B x T that is not empty and
 * whose T fits n_ctx; an id in 0 .. d_vocab-1 (pos its index in the
 * flattened batch). 0, or -1 with e. */
int al_check_batch(int64_t B, int64_t T, int n_ctx, al_err *e);
int al_check_token(int64_t id, size_t pos, int d_vocab, al_err *e);
/* Forward pass on inputs (B,T) token ids; targets (B,T) may be NULL (no
 * loss) and may hold -1 to ignore a position. T <= n_ctx. After it,
 * m->probs holds softmax probabilities and m->losses the per-position
 * losses. Ids out of range are refused. The model's hooks run at their
 * points (hooks.h); a hook's error fails the forward (-1 with its
 * message; the activations are then undefined). */
int al_model_forward(al_model *m, const int *inputs, const int *targets, int B, int T, al_err *e);
/* Backward of the mean loss of the last forward (which must have had
 * targets and no hook that set `intervened`: -1 otherwise). Overwrites m->grads and
 * m->gate_grads (no accumulation; gate_grads untouched with
 * m->skip_gate_grads). Destroys m->probs (used in place for
 * dlogits). */
int al_model_backward(al_model *m, al_err *e);
/* al_model_forward then al_model_backward, for training: the same losses,
 * mean_loss and gradients to the bit, with the cross-entropy's forward
 * and backward in one pass over the logits (which leaves m->probs holding
 * dlogits, never probabilities). Needs targets and no hooks: -1
 * otherwise, as for either call's errors. */
int al_model_forward_backward(al_model *m, const int *inputs, const int *targets, int B, int T,
                              al_err *e);

/* The last forward's cache, for a later patched forward of the same
 * (B, T): x gets m->x, (L+1)·B·T·C floats (the residual stream entering
 * each layer, then the final one), z gets m->z, L·B·T·H·D floats (each
 * head's z before gates and replacements). Either may be NULL. Both are
 * contiguous in m->acts for the last forward's B and T, so this is two
 * memcpys; valid until the next forward. Before any forward it copies
 * nothing. */
void al_model_copy_acts(const al_model *m, float *x, float *z);

/* One allocation for a cache of (B, T) runs of c: 0, or −1 with e.
 * Free with al_acts_free (also fine on a zeroed struct). */
int al_acts_alloc(al_acts *a, const al_config *c, int B, int T, al_err *e);
void al_acts_free(al_acts *a);
/* Copy the last forward's x, qkv, att, z and zg into a, whose B and T
 * must be the forward's (−1 with e otherwise); z as each layer used it,
 * after its hook_z hooks (an intervention's, say) when they ran. */
int al_acts_save(const al_model *m, al_acts *a, al_err *e);

/* Incremental patched forward (delta.c). base is the cache of the run
 * being patched (the target: same inputs and gates as now, saved by
 * al_acts_save after an unpatched forward; a head whose z a hook set in
 * full there, base->zfixed, keeps base's value); sp's masks and
 * sources are as al_patch_spec's for base's (B, T), applied to every
 * sequence b alike (sp NULL: no patch). Computes the patched run's final
 * residual stream xL (B, T, C), recomputing only from the first layer a
 * patch touches, and in each layer only the rows a patch can change: a
 * residual row changed at position t changes q, k, v at t only, so
 * attention rows >= t, so z and the next residual at rows >= t (causal);
 * a patched q changes its own row, a patched k or v rows >= t, a patched
 * attention row or z its own row. A patch whose source equals base's
 * value in every sequence changes nothing. dirty (T) gets 1 at the
 * positions whose final residual may differ from base's (the same for
 * every b); xL rows elsewhere are base's, bit for bit. Everything equals
 * al_model_forward with sp's hooks (al_patch_hooks_add) to float
 * rounding (and a row recomputed from unchanged inputs is the forward's
 * bit for bit; delta.c says why). m's activations (m->x, m->probs, ...)
 * are untouched and m's hooks are not run. Scratch is ws (grown on
 * demand; the caller's, so repeated calls reuse it; NULL: allocated and
 * freed in the call). 0, or −1 with e and nothing written: a mask without
 * its source, a cache whose B or T is no batch shape for m (B < 1, T < 1
 * or T > n_ctx), out of memory. */
typedef struct al_delta_ws {
    float *p;
    size_t cap; /* floats */
} al_delta_ws;
/* Any architecture: a recomputed row goes through ln1 (LayerNorm is per
 * row), its q|k|v get the biases and shortformer positions, and a
 * recomputed residual row gets b_O, as in the forward. */
int al_model_forward_delta(al_model *m, const al_acts *base, const al_patch_spec *sp, float *xL,
                           unsigned char *dirty, al_delta_ws *ws, al_err *e);
/* Free ws's scratch (a zeroed ws is empty; fine to free twice). */
void al_delta_ws_free(al_delta_ws *ws);

/* Logits of n final residual rows x (n, C) into logits (n, V):
 * ln_final(x) W_U + b_U (W_Eᵀ when tied; without LayerNorm and b_U,
 * x W_U), the same arithmetic the forward uses. */
void al_model_unembed(const al_model *m, const float *x, int n, float *logits);
/* The same bits, for rows the caller no longer needs: ln_final normalises
 * x in place, then one product for all n rows (al_model_unembed works in
 * chunks of a stack buffer so as not to touch x). */
void al_model_unembed_own(const al_model *m, float *x, int n, float *logits);
/* One logit of a final residual row x (C): ln_final(x) · W_U[:, v] +
 * b_U[v], summed in double. */
float al_model_logit(const al_model *m, const float *x, int v);

/* dx (n, C) = dlogits (n, V) · W_Uᵀ (or · W_E when tied): the gradient
 * of a function of n logits rows with respect to the residual rows they
 * were read from (al_model_unembed's backward). 0, or −1 with e for a
 * LayerNorm model (ln_final's backward needs the rows themselves). */
int al_model_unembed_backward(const al_model *m, const float *dlogits, int n, float *dx, al_err *e);
/* The same for any model, given the rows x (n, C) the logits were read
 * from: dx = ln_final's backward of dlogits · W_Uᵀ at x (its mean and
 * scale recomputed from x as the forward computes them), so the gradient
 * reaches the residual stream before ln_final; without LayerNorm it is
 * al_model_unembed_backward's, bit for bit. 0, or −1 with e (out of
 * memory). */
int al_model_unembed_backward_x(const al_model *m, const float *x, const float *dlogits, int n,
                                float *dx, al_err *e);

/* Activation gradients of a scalar function f of the last forward's
 * final residual stream (before ln_final), for attribution patching
 * (attrpatch.h); through every later layer's ln1 too. dxL
 * (B, T, C) is ∂f/∂x_L (zero rows where f does not read; e.g. from
 * al_model_unembed_backward). Fills, where non-NULL:
 *   dx   (L+1, B, T, C)      ∂f/∂x_l, the residual stream entering layer l
 *                            (l = L: dxL itself), through every later layer
 *   dzg  (L, B, T, H, D)     ∂f/∂zg, each head's gated z (W_O's input)
 *   dqkv (L, B, T, 3, H, D)  ∂f/∂q, k, v with the attention softmax
 *                            differentiated (a pattern is a function of q, k)
 * A head whose z a hook set in full (hooks.h, fixed) passes no gradient
 * to its q/k/v;
 * a gate g scales what reaches them. Parameter gradients and m->probs
 * are untouched (m->dx, m->dzg, m->dqkv, m->wqkv are scratch). −1 with e:
 * no forward yet, or the last forward was patched. */
int al_model_backward_acts(al_model *m, const float *dxL, float *dx, float *dzg, float *dqkv,
                           al_err *e);

/* Set all gates to 1 (hooks stay registered). */
void al_model_reset_gates(al_model *m);

/* Count of finite-ness problems in params (0 = all finite). */
size_t al_model_count_nonfinite(const al_model *m);

/* FLOPs of one forward pass over B*T tokens (matmuls and attention),
 * counted analytically; backward is about twice this. */
double al_model_forward_flops(const al_config *c, int B, int T);

#endif
