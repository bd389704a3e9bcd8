/* model.c -- the config, parameters, initialisation and activation
 * buffers of the attention-only transformer of docs/design.md §2, its
 * unembedding of given rows, and cached runs; the forward pass is in
 * forward.c, the backward passes in backward.c.
 *
 * The per-layer Q, K, V weights are stored as TransformerLens has them,
 * (H, C, D) each. For speed the forward pass copies them into one fused
 * (C, 3·H·D) matrix so a single sgemm produces q|k|v for all heads; the
 * copy is 3·C·H·D floats per layer, negligible next to the matmul. */
#include "attnlab/model.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/layers.h"
#include "attnlab/prof.h"
#include "model_internal.h"

al_config al_config_default(void) {
    al_config c = {.n_layers = 2,
                   .d_model = 256,
                   .n_heads = 8,
                   .d_head = 32,
                   .n_ctx = 256,
                   .d_vocab = 0,
                   .tied_embeddings = 0,
                   .seed = 1337,
                   .norm_type = AL_NORM_NONE,
                   .ln_eps = 1e-5,
                   .biases = 0};
    return c;
}

int al_config_validate(const al_config *c, al_err *e) {
    if (c->n_layers < 1 || c->n_layers > 64)
        return al_errf(e, "n_layers must be in 1..64 (got %d)", c->n_layers);
    if (c->d_model < 1 || c->d_model > 16384)
        return al_errf(e, "d_model must be in 1..16384 (got %d)", c->d_model);
    if (c->n_heads < 1 || c->n_heads > 256)
        return al_errf(e, "n_heads must be in 1..256 (got %d)", c->n_heads);
    if (c->d_head < 1 || c->d_head > 4096)
        return al_errf(e, "d_head must be in 1..4096 (got %d)", c->d_head);
    if (c->n_ctx < 1 || c->n_ctx > 65536)
        return al_errf(e, "n_ctx must be in 1..65536 (got %d)", c->n_ctx);
    if (c->d_vocab < 2 || c->d_vocab > 65536)
        return al_errf(e, "d_vocab must be in 2..65536 (got %d)", c->d_vocab);
    if (!al_pos_type_name(c->pos_type))
        return al_errf(e, "pos_type must be %d (standard) or %d (shortformer) (got %d)",
                       AL_POS_STANDARD, AL_POS_SHORTFORMER, c->pos_type);
    if (c->norm_type < AL_NORM_NONE || c->norm_type > AL_NORM_LNPRE)
        return al_errf(e, "norm_type must be %d (none), %d (LN) or %d (LNPre) (got %d)",
                       AL_NORM_NONE, AL_NORM_LN, AL_NORM_LNPRE, c->norm_type);
    if (!isfinite(c->ln_eps) || c->ln_eps < 0 || c->ln_eps > 1)
        return al_errf(e, "ln_eps must be in [0, 1] (got %g)", c->ln_eps);
    if (c->norm_type != AL_NORM_NONE && !(c->ln_eps > 0))
        return al_errf(e, "ln_eps must be positive with LayerNorm (got %g)", c->ln_eps);
    if (c->biases & ~(unsigned)AL_BIAS_ALL)
        return al_errf(e, "biases must be a set of AL_BIAS_* bits (got %#x)", c->biases);
    if (c->processed & ~(unsigned)AL_PROC_ALL)
        return al_errf(e, "processed must be a set of AL_PROC_* bits (got %#x)", c->processed);
    return 0;
}

static const char *const PROC_NAMES[] = {"fold_ln", "center_writing_weights", "center_unembed",
                                         "fold_value_biases"};

const char *al_process_name(unsigned bit) {
    for (int i = 0; i < 4; i++)
        if (bit == 1u << i) return PROC_NAMES[i];
    return NULL;
}

unsigned al_process_parse(const char *name) {
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, PROC_NAMES[i])) return 1u << i;
    return 0;
}

const char *al_norm_type_name(int norm_type) {
    return norm_type == AL_NORM_LN ? "LN" : norm_type == AL_NORM_LNPRE ? "LNPre" : NULL;
}

int al_norm_type_parse(const char *name, int *norm_type) {
    if (!name)
        *norm_type = AL_NORM_NONE;
    else if (!strcmp(name, "LN"))
        *norm_type = AL_NORM_LN;
    else if (!strcmp(name, "LNPre"))
        *norm_type = AL_NORM_LNPRE;
    else
        return -1;
    return 0;
}

static const char *const BIAS_NAMES[] = {"b_Q", "b_K", "b_V", "b_O", "b_U"};

const char *al_bias_name(unsigned bit) {
    for (int i = 0; i < 5; i++)
        if (bit == 1u << i) return BIAS_NAMES[i];
    return NULL;
}

unsigned al_bias_parse(const char *name) {
    for (int i = 0; name && i < 5; i++)
        if (!strcmp(name, BIAS_NAMES[i])) return 1u << i;
    return 0;
}

int al_bias_spec_parse(const char *spec, unsigned *bits) {
    if (!spec) return -1;
    if (!strcmp(spec, "none") || !strcmp(spec, "all")) {
        *bits = spec[0] == 'a' ? AL_BIAS_ALL : 0;
        return 0;
    }
    unsigned b = 0;
    for (const char *p = spec; *p; p++) {
        const char *at = strchr("qkvou", *p);
        if (*p == ',') continue;
        if (!at || (b >> (at - "qkvou") & 1)) return -1;
        b |= 1u << (at - "qkvou");
    }
    if (!b) return -1;
    *bits = b;
    return 0;
}

int al_config_is_plain(const al_config *c) {
    return c->norm_type == AL_NORM_NONE && c->biases == 0;
}

int al_config_plain_check(const al_config *c, const char *what, al_err *e) {
    if (al_config_is_plain(c)) return 0;
    char has[96] = "";
    size_t k = 0;
    if (c->norm_type != AL_NORM_NONE)
        k += (size_t)snprintf(has, sizeof has, "normalization_type %s",
                              al_norm_type_name(c->norm_type));
    for (unsigned b = 1; b <= AL_BIAS_U && k < sizeof has; b <<= 1)
        if (c->biases & b)
            k += (size_t)snprintf(has + k, sizeof has - k, "%s%s", k ? ", " : "", al_bias_name(b));
    return al_errf(e,
                   "%s does not yet support LayerNorm or bias models (this one has %s); it needs "
                   "a model with normalization_type null and no biases",
                   what, has);
}

const char *al_pos_type_name(int pos_type) {
    return pos_type == AL_POS_STANDARD      ? "standard"
           : pos_type == AL_POS_SHORTFORMER ? "shortformer"
                                            : NULL;
}

int al_pos_type_parse(const char *name, int *pos_type) {
    for (int t = AL_POS_STANDARD; t <= AL_POS_SHORTFORMER; t++)
        if (name && strcmp(name, al_pos_type_name(t)) == 0) {
            *pos_type = t;
            return 0;
        }
    return -1;
}

static void set_sizes(al_model *m) {
    const al_config *c = &m->cfg;
    size_t L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head;
    m->param_size[AL_P_WE] = (size_t)c->d_vocab * C;
    m->param_size[AL_P_WPOS] = (size_t)c->n_ctx * C;
    m->param_size[AL_P_WQ] = L * H * C * D;
    m->param_size[AL_P_WK] = L * H * C * D;
    m->param_size[AL_P_WV] = L * H * C * D;
    m->param_size[AL_P_WO] = L * H * D * C;
    m->param_size[AL_P_WU] = c->tied_embeddings ? 0 : C * (size_t)c->d_vocab;
    /* the optional tensors: size 0 (and a NULL view) when absent */
    size_t ln = c->norm_type == AL_NORM_LN;
    unsigned b = c->biases;
    m->param_size[AL_P_LN1W] = m->param_size[AL_P_LN1B] = ln * L * C;
    m->param_size[AL_P_BQ] = (b & AL_BIAS_Q) ? L * H * D : 0;
    m->param_size[AL_P_BK] = (b & AL_BIAS_K) ? L * H * D : 0;
    m->param_size[AL_P_BV] = (b & AL_BIAS_V) ? L * H * D : 0;
    m->param_size[AL_P_BO] = (b & AL_BIAS_O) ? L * C : 0;
    m->param_size[AL_P_LNFW] = m->param_size[AL_P_LNFB] = ln * C;
    m->param_size[AL_P_BU] = (b & AL_BIAS_U) ? (size_t)c->d_vocab : 0;
    m->n_params = 0;
    for (int i = 0; i < AL_NPARAM; i++) m->n_params += m->param_size[i];
}

double al_model_param_floats(const al_config *c) {
    double L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head, V = c->d_vocab;
    double ln = c->norm_type == AL_NORM_LN;
    unsigned b = c->biases;
    /* set_sizes's terms in double, so no product can wrap */
    return V * C + (double)c->n_ctx * C + 4 * L * H * C * D + (c->tied_embeddings ? 0 : C * V) +
           ln * (2 * L * C + 2 * C) +
           (((b & AL_BIAS_Q) != 0) + ((b & AL_BIAS_K) != 0) + ((b & AL_BIAS_V) != 0)) * L * H * D +
           ((b & AL_BIAS_O) ? L * C : 0) + ((b & AL_BIAS_U) ? V : 0);
}

static void point_into(float *base, float **views, const size_t *sizes) {
    for (int i = 0; i < AL_NPARAM; i++) {
        views[i] = sizes[i] ? base : NULL;
        base += sizes[i];
    }
}

int al_model_alloc(al_model *m, const al_config *cfg, al_err *e) {
    memset(m, 0, sizeof *m);
    if (al_config_validate(cfg, e) != 0) return -1;
    m->cfg = *cfg;
    set_sizes(m);
    size_t LH = (size_t)cfg->n_layers * cfg->n_heads;
    m->params = al_calloc(m->n_params, sizeof(float), e);
    m->gates = al_malloc(LH, sizeof(float), e);
    m->gate_grads = al_calloc(LH, sizeof(float), e);
    if (!m->params || !m->gates || !m->gate_grads) {
        al_model_free(m);
        return -1;
    }
    point_into(m->params, m->p, m->param_size);
    al_model_reset_gates(m);
    return 0;
}

/* Initial scales, chosen so that learning (and induction) can start:
 *  - W_E ~ N(0, 0.5²): tokens are loud, clearly separable signals in the
 *    residual stream from step 0 (with tied embeddings W_E uses 1/√C
 *    instead, since it is also the unembedding).
 *  - W_pos (still learned) starts as sinusoids of RMS 0.5, not Gaussian
 *    noise: "attend to t−1" is then a rotation a rank-32 head can express
 *    at once, whereas 256 random, nearly orthogonal position vectors
 *    first have to be reorganised by training. Measured on repeated random
 *    spans (2 layers, d_model 64, 3000 steps): loss 5.30 → 4.25 with
 *    sinusoids, → 5.20 with N(0, 0.5²), and only the former grew an
 *    induction head.
 *  - W_Q, W_K, W_V, W_O ~ N(0, 1/C): with |x|² ≈ C/2 the attention scores
 *    q·k/√D have std ≈ 0.5, so attention is neither uniform nor saturated
 *    and gradients reach QK at once (std 0.02 would leave the scores ~0
 *    and delay the previous-token/induction circuit for a long time).
 *  - W_U ~ N(0, 1/C²): initial logits are nearly uniform, so the initial
 *    loss is ≈ ln(d_vocab) (a test checks it); Adam grows it quickly. */
static void init_normal(float *w, size_t n, double std, al_rng *r) {
    for (size_t i = 0; i < n; i++) w[i] = (float)(std * al_rng_normal(r));
}

/* w (T,C): pairs of columns sin/cos(t·ω_i), ω_i = 10000^(−2i/C), scaled
 * so every column has RMS `rms` over a full period. */
static void init_sinusoidal(float *w, int T, int C, double rms) {
    double amp = rms * sqrt(2.0);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double om = pow(10000.0, -2.0 * (c / 2) / (double)C);
            w[(size_t)t * C + c] = (float)(amp * (c % 2 ? cos(t * om) : sin(t * om)));
        }
}

int al_model_init(al_model *m, const al_config *cfg, al_err *e) {
    if (al_model_alloc(m, cfg, e) != 0) return -1;
    al_rng r;
    al_rng_seed(&r, cfg->seed);
    double C = cfg->d_model;
    init_normal(m->p[AL_P_WE], m->param_size[AL_P_WE], cfg->tied_embeddings ? 1.0 / sqrt(C) : 0.5,
                &r);
    init_sinusoidal(m->p[AL_P_WPOS], cfg->n_ctx, cfg->d_model, 0.5);
    for (int i = AL_P_WQ; i <= AL_P_WO; i++)
        init_normal(m->p[i], m->param_size[i], 1.0 / sqrt(C), &r);
    if (m->p[AL_P_WU]) init_normal(m->p[AL_P_WU], m->param_size[AL_P_WU], 1.0 / C, &r);
    /* LayerNorm w = 1 (b and every bias stay 0, as TransformerLens
     * initialises them); no random draws, so the tensors above get the
     * plain model's values whatever the config's LayerNorm and biases */
    const int ones[] = {AL_P_LN1W, AL_P_LNFW};
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < m->param_size[ones[i]]; k++) m->p[ones[i]][k] = 1.0f;
    return 0;
}

int al_model_alloc_grads(al_model *m, al_err *e) {
    if (m->grads) return 0;
    m->grads = al_calloc(m->n_params, sizeof(float), e);
    if (!m->grads) return -1;
    point_into(m->grads, m->g, m->param_size);
    return 0;
}

void al_model_free(al_model *m) {
    free(m->params);
    free(m->grads);
    free(m->gates);
    free(m->gate_grads);
    free(m->acts);
    free(m->inputs);
    al_hooks_free(&m->hooks);
    free(m->hk);
    free(m->pos);
    memset(m, 0, sizeof *m);
}

void al_model_reset_gates(al_model *m) {
    size_t LH = (size_t)m->cfg.n_layers * m->cfg.n_heads;
    for (size_t i = 0; i < LH; i++) m->gates[i] = 1.0f;
}

void al_model_copy_acts(const al_model *m, float *x, float *z) {
    const al_config *c = &m->cfg;
    size_t BT = (size_t)m->B * m->T, HD = (size_t)c->n_heads * c->d_head;
    if (!m->acts) return; /* no forward yet: nothing to copy */
    if (x) memcpy(x, m->x, sizeof(float) * ((size_t)c->n_layers + 1) * BT * c->d_model);
    if (z) memcpy(z, m->z, sizeof(float) * (size_t)c->n_layers * BT * HD);
}

static size_t per_head(const al_model *m) { return (size_t)m->cfg.d_model * m->cfg.d_head; }
float *al_head_wq(const al_model *m, int l, int h) {
    return m->p[AL_P_WQ] + ((size_t)l * m->cfg.n_heads + h) * per_head(m);
}
float *al_head_wk(const al_model *m, int l, int h) {
    return m->p[AL_P_WK] + ((size_t)l * m->cfg.n_heads + h) * per_head(m);
}
float *al_head_wv(const al_model *m, int l, int h) {
    return m->p[AL_P_WV] + ((size_t)l * m->cfg.n_heads + h) * per_head(m);
}
float *al_head_wo(const al_model *m, int l, int h) {
    return m->p[AL_P_WO] + ((size_t)l * m->cfg.n_heads + h) * per_head(m);
}
float *al_model_wu(const al_model *m) { return m->p[AL_P_WU]; }

int al_param_per_layer(int which) {
    return (which >= AL_P_WQ && which <= AL_P_WO) || (which >= AL_P_LN1W && which <= AL_P_BO);
}

size_t al_param_layer_size(const al_model *m, int which) {
    if (al_param_per_layer(which)) return m->param_size[which] / (size_t)m->cfg.n_layers;
    return m->param_size[which];
}

size_t al_param_decay_end(const al_model *m) {
    size_t n = 0;
    for (int i = AL_P_WE; i <= AL_P_WU; i++) n += m->param_size[i];
    return n;
}

int al_param_tl_name(const al_model *m, int which, int l, char *name, size_t cap,
                     int64_t shape[4]) {
    const al_config *c = &m->cfg;
    static const char *attn[] = {"W_Q", "W_K", "W_V", "W_O"};
    switch (which) {
    case AL_P_WE:
        snprintf(name, cap, "embed.W_E");
        shape[0] = c->d_vocab, shape[1] = c->d_model;
        return 2;
    case AL_P_WPOS:
        snprintf(name, cap, "pos_embed.W_pos");
        shape[0] = c->n_ctx, shape[1] = c->d_model;
        return 2;
    case AL_P_WU:
        snprintf(name, cap, "unembed.W_U");
        shape[0] = c->d_model, shape[1] = c->d_vocab;
        return 2;
    case AL_P_LN1W:
    case AL_P_LN1B:
        snprintf(name, cap, "blocks.%d.ln1.%c", l, which == AL_P_LN1W ? 'w' : 'b');
        shape[0] = c->d_model;
        return 1;
    case AL_P_BQ:
    case AL_P_BK:
    case AL_P_BV:
        snprintf(name, cap, "blocks.%d.attn.b_%c", l, "QKV"[which - AL_P_BQ]);
        shape[0] = c->n_heads, shape[1] = c->d_head;
        return 2;
    case AL_P_BO:
        snprintf(name, cap, "blocks.%d.attn.b_O", l);
        shape[0] = c->d_model;
        return 1;
    case AL_P_LNFW:
    case AL_P_LNFB:
        snprintf(name, cap, "ln_final.%c", which == AL_P_LNFW ? 'w' : 'b');
        shape[0] = c->d_model;
        return 1;
    case AL_P_BU:
        snprintf(name, cap, "unembed.b_U");
        shape[0] = c->d_vocab;
        return 1;
    default:
        snprintf(name, cap, "blocks.%d.attn.%s", l, attn[which - AL_P_WQ]);
        shape[0] = c->n_heads;
        shape[1] = which == AL_P_WO ? c->d_head : c->d_model;
        shape[2] = which == AL_P_WO ? c->d_model : c->d_head;
        return 3;
    }
}

size_t al_model_count_nonfinite(const al_model *m) {
    size_t bad = 0;
    for (size_t i = 0; i < m->n_params; i++) bad += !isfinite(m->params[i]);
    return bad;
}

double al_model_forward_flops(const al_config *c, int B, int T) {
    double BT = (double)B * T, C = c->d_model, HD = (double)c->n_heads * c->d_head;
    double pairs = (double)B * c->n_heads * ((double)T * (T + 1) / 2.0);
    double per_layer = 2.0 * BT * C * 3 * HD /* q, k, v */
                       + 2.0 * 2.0 * pairs * c->d_head /* scores, weighted sum */
                       + 2.0 * BT * HD * C; /* W_O */
    if (c->pos_type == AL_POS_SHORTFORMER)
        per_layer += 2.0 * T * C * 2 * HD + 2.0 * BT * HD; /* W_pos W_Q|K, and adding it */
    return c->n_layers * per_layer + 2.0 * BT * C * c->d_vocab;
}

/* ------------------------------------------------------- activations */

/* The activation buffers of a (B, T) forward of c, in floats, in the
 * order of model_ensure_acts's views; returns their count. */
#define N_ACT_BUFS 24
static int acts_sizes(const al_config *c, int B, int T, size_t sizes[N_ACT_BUFS]) {
    size_t L = c->n_layers, C = c->d_model, HD = (size_t)c->n_heads * c->d_head;
    size_t BT = (size_t)B * T, V = c->d_vocab, H = c->n_heads;
    size_t ln = c->norm_type != AL_NORM_NONE; /* the LayerNorm buffers: 0 floats without */
    size_t part = (c->biases & AL_BIAS_U) ? CE_PART_FLOATS(BT, V) : 0; /* b_U's block sums */
    const size_t s[] = {
        (L + 1) * BT * C, /* x */
        L * BT * 3 * HD, /* qkv */
        L * B * H * T * T, /* att */
        L * BT * HD, /* z */
        L * BT * HD, /* zg */
        L * BT * HD, /* zs */
        BT * V, /* probs */
        BT, /* losses */
        BT * C, /* dx */
        BT * HD, /* dzg */
        BT * 3 * HD, /* dqkv */
        C * 3 * HD, /* wqkv */
        C * 3 * HD, /* dwqkv */
        (size_t)B * H, /* gate_part */
        (size_t)T * 2 * HD, /* posqk */
        BT * H * C, /* result (touched only with RESULT hooks) */
        ln * L * BT * C, /* ln1 */
        ln * L * BT, /* ln1_mean */
        ln * L * BT, /* ln1_scale */
        ln * BT * C, /* lnf */
        ln * BT, /* lnf_mean */
        ln * BT, /* lnf_scale */
        ln * BT * C, /* dln */
        part, /* part */
    };
    _Static_assert(sizeof s / sizeof s[0] == N_ACT_BUFS, "N_ACT_BUFS");
    memcpy(sizes, s, sizeof s);
    return N_ACT_BUFS;
}

double al_model_acts_bytes(const al_config *c, int B, int T) {
    double BT = (double)B * T, L = c->n_layers, H = c->n_heads, C = c->d_model;
    double HD = H * c->d_head, V = c->d_vocab, ln = c->norm_type != AL_NORM_NONE;
    /* acts_sizes's terms in double, so no product can wrap */
    double f = (L + 1) * BT * C + L * BT * 3 * HD + L * B * H * (double)T * T + 3 * L * BT * HD +
               BT * V + BT + BT * C + BT * HD + BT * 3 * HD + 2 * C * 3 * HD + (double)B * H +
               (double)T * 2 * HD + BT * H * C +
               ln * (L * BT * C + 2 * L * BT + BT * C + 2 * BT + BT * C) +
               ((c->biases & AL_BIAS_U) ? floor((BT + 31) / 32) * V : 0);
    return f * sizeof(float) + L * H + L + H * (double)T + 2 * BT * sizeof(int);
}

int model_ensure_acts(al_model *m, int B, int T, al_err *e) {
    if (m->acts && B <= m->B_cap && T <= m->T_cap) return 0;
    const al_config *c = &m->cfg;
    size_t L = c->n_layers, H = c->n_heads, BT = (size_t)B * T;
    size_t sizes[N_ACT_BUFS];
    acts_sizes(c, B, T, sizes);
    size_t total = 0, nbytes = L * H + L + H * (size_t)T; /* zfixed, zhooked, rows */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += sizes[i];
    float *a = al_malloc(total + (nbytes + sizeof(float) - 1) / sizeof(float), sizeof(float), e);
    int *in = al_malloc(2 * BT, sizeof(int), e);
    if (!a || !in) {
        free(a);
        free(in);
        return al_err_prefix(e, "cannot allocate activations for batch %dx%d", B, T);
    }
    free(m->acts);
    free(m->inputs);
    m->acts = a;
    m->inputs = in;
    m->targets = in + BT;
    float **views[] = {&m->x,        &m->qkv,       &m->att,      &m->z,         &m->zg,
                       &m->zs,       &m->probs,     &m->losses,   &m->dx,        &m->dzg,
                       &m->dqkv,     &m->wqkv,      &m->dwqkv,    &m->gate_part, &m->posqk,
                       &m->result,   &m->ln1,       &m->ln1_mean, &m->ln1_scale, &m->lnf,
                       &m->lnf_mean, &m->lnf_scale, &m->dln,      &m->part};
    _Static_assert(sizeof views / sizeof views[0] == sizeof sizes / sizeof sizes[0],
                   "a view per buffer");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *views[i] = sizes[i] ? a : NULL;
        a += sizes[i];
    }
    m->zfixed = (unsigned char *)a;
    m->zhooked = m->zfixed + L * H;
    m->rows = m->zhooked + L;
    memset(m->zfixed, 0, L * H + L);
    m->B_cap = B;
    m->T_cap = T;
    return 0;
}

void model_fuse_qkv(float *wqkv, const al_model *m, int l) {
    int C = m->cfg.d_model, H = m->cfg.n_heads, D = m->cfg.d_head;
    size_t HD = (size_t)H * D;
    for (int s = 0; s < 3; s++)
        for (int h = 0; h < H; h++) {
            const float *w = s == 0   ? al_head_wq(m, l, h)
                             : s == 1 ? al_head_wk(m, l, h)
                                      : al_head_wv(m, l, h);
            for (int c = 0; c < C; c++)
                memcpy(wqkv + (size_t)c * 3 * HD + s * HD + (size_t)h * D, w + (size_t)c * D,
                       sizeof(float) * D);
        }
}

void model_copy(float *restrict o, const float *restrict a, size_t n) {
    const size_t chunk = (size_t)1 << 15;
    if (n < 2 * chunk) {
        memcpy(o, a, sizeof(float) * n);
        return;
    }
    const long nc = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < nc; c++) {
        size_t i = (size_t)c * chunk, m = n - i < chunk ? n - i : chunk;
        memcpy(o + i, a + i, sizeof(float) * m);
    }
}

int al_model_unembed_backward(const al_model *m, const float *dlogits, int n, float *dx,
                              al_err *e) {
    const al_config *c = &m->cfg;
    if (c->norm_type != AL_NORM_NONE) /* ln_final's backward needs the rows */
        return al_errf(e, "the unembedding's backward from logits alone does not support "
                          "LayerNorm models");
    if (c->tied_embeddings)
        matmul_forward(dx, dlogits, m->p[AL_P_WE], n, c->d_vocab, c->d_model, 0.0f);
    else
        matmul_forward_wt(dx, dlogits, m->p[AL_P_WU], n, c->d_vocab, c->d_model, 0.0f);
    return 0;
}

int al_check_batch(int64_t B, int64_t T, int n_ctx, al_err *e) {
    if (B < 1 || T < 1) return al_errf(e, "batch shape %" PRId64 "x%" PRId64 " is empty", B, T);
    if (T > n_ctx) return al_errf(e, "sequence length %" PRId64 " exceeds n_ctx %d", T, n_ctx);
    return 0;
}

int al_check_token(int64_t id, size_t pos, int d_vocab, al_err *e) {
    if (id < 0 || id >= d_vocab)
        return al_errf(e,
                       "token id %" PRId64 " at position %zu is outside the vocabulary "
                       "(d_vocab %d)",
                       id, pos, d_vocab);
    return 0;
}

int al_model_unembed_backward_x(const al_model *m, const float *x, const float *dlogits, int n,
                                float *dx, al_err *e) {
    const al_config *c = &m->cfg;
    if (c->norm_type == AL_NORM_NONE) return al_model_unembed_backward(m, dlogits, n, dx, e);
    const int C = c->d_model;
    /* du (n, C) = ∂ of ln_final's output, then its mean and scale (n each) */
    float *du = al_malloc((size_t)n * (C + 2), sizeof(float), e);
    if (!du) return al_err_prefix(e, "the unembedding's backward of %d rows", n);
    float *mean = du + (size_t)n * C, *scale = mean + n;
    if (c->tied_embeddings)
        matmul_forward(du, dlogits, m->p[AL_P_WE], n, c->d_vocab, C, 0.0f);
    else
        matmul_forward_wt(du, dlogits, m->p[AL_P_WU], n, c->d_vocab, C, 0.0f);
    layernorm_stats(mean, scale, x, (size_t)n, C, c->ln_eps);
    layernorm_backward(dx, NULL, NULL, du, x, mean, scale, m->p[AL_P_LNFW], (size_t)n, C, 0);
    free(du);
    return 0;
}

int model_check_inputs(const al_model *m, const int *in, const int *tg, int B, int T, al_err *e) {
    if (al_check_batch(B, T, m->cfg.n_ctx, e)) return -1;
    size_t BT = (size_t)B * T;
    for (size_t i = 0; i < BT; i++) {
        if (al_check_token(in[i], i, m->cfg.d_vocab, e)) return -1;
        if (tg && tg[i] >= m->cfg.d_vocab)
            return al_errf(e, "target id %d at position %zu is outside the vocabulary (d_vocab %d)",
                           tg[i], i, m->cfg.d_vocab);
    }
    return 0;
}

int model_forward_shared(al_model *own, const al_model *m, const void *skip, const int *inputs,
                         int B, int T, al_err *e) {
    if (model_check_inputs(m, inputs, NULL, B, T, e) != 0) return -1;
    own->cfg = m->cfg;
    memcpy(own->param_size, m->param_size, sizeof own->param_size);
    own->n_params = m->n_params;
    own->params = m->params;
    memcpy(own->p, m->p, sizeof own->p);
    own->gates = m->gates;
    if (model_ensure_acts(own, B, T, e) != 0 || al_hooks_copy(&own->hooks, &m->hooks, skip, e))
        return -1;
    own->B = B, own->T = T;
    memcpy(own->inputs, inputs, sizeof(int) * (size_t)B * T);
    own->has_targets = 0;
    for (size_t i = 0; i < (size_t)B * T; i++) own->targets[i] = -1;
    return model_forward_body(own, inputs, 0, e);
}

void model_shared_free(al_model *own) {
    al_hooks_free(&own->hooks);
    free(own->acts);
    free(own->inputs);
    free(own->hk);
    free(own->pos);
    memset(own, 0, sizeof *own);
}

/* ------------------------------------------------------- cached runs */

int al_acts_alloc(al_acts *a, const al_config *c, int B, int T, al_err *e) {
    memset(a, 0, sizeof *a);
    size_t L = c->n_layers, BT = (size_t)B * T, HD = (size_t)c->n_heads * c->d_head;
    size_t nx = (L + 1) * BT * c->d_model, nq = L * BT * 3 * HD;
    size_t na = L * B * c->n_heads * (size_t)T * T, nz = L * BT * HD;
    size_t nf = (L * c->n_heads + sizeof(float) - 1) / sizeof(float); /* zfixed */
    float *p = al_malloc(nx + nq + na + 2 * nz + nf, sizeof(float), e);
    if (!p) return al_err_prefix(e, "cannot allocate a run cache for batch %dx%d", B, T);
    a->B = B, a->T = T;
    a->x = p;
    a->qkv = a->x + nx;
    a->att = a->qkv + nq;
    a->z = a->att + na;
    a->zg = a->z + nz;
    a->zfixed = (unsigned char *)(a->zg + nz);
    memset(a->zfixed, 0, L * c->n_heads);
    return 0;
}

void al_acts_free(al_acts *a) {
    free(a->x);
    memset(a, 0, sizeof *a);
}

int al_acts_save(const al_model *m, al_acts *a, al_err *e) {
    if (!m->acts || m->B != a->B || m->T != a->T)
        return al_errf(e, "run cache is for batch %dx%d, the last forward was %dx%d", a->B, a->T,
                       m->B, m->T);
    const al_config *c = &m->cfg;
    size_t L = c->n_layers, BT = (size_t)a->B * a->T, HD = (size_t)c->n_heads * c->d_head;
    memcpy(a->x, m->x, sizeof(float) * (L + 1) * BT * c->d_model);
    memcpy(a->qkv, m->qkv, sizeof(float) * L * BT * 3 * HD);
    memcpy(a->att, m->att, sizeof(float) * L * a->B * c->n_heads * (size_t)a->T * a->T);
    /* z as the layer used it: after its hook_z hooks (an intervention
     * there is part of the run), the copy zs when they ran */
    for (size_t l = 0; l < L; l++)
        memcpy(a->z + l * BT * HD, (m->zhooked[l] ? m->zs : m->z) + l * BT * HD,
               sizeof(float) * BT * HD);
    memcpy(a->zg, m->zg, sizeof(float) * L * BT * HD);
    memcpy(a->zfixed, m->zfixed, L * c->n_heads);
    return 0;
}

void model_unembed_rows(const al_model *m, const float *u, int n, float *logits, int bias) {
    const al_config *c = &m->cfg;
    if (c->tied_embeddings)
        matmul_forward_wt(logits, u, m->p[AL_P_WE], n, c->d_model, c->d_vocab, 0.0f);
    else
        matmul_forward(logits, u, m->p[AL_P_WU], n, c->d_model, c->d_vocab, 0.0f);
    if (bias && m->p[AL_P_BU])
        bias_forward(logits, m->p[AL_P_BU], (size_t)n, c->d_vocab, c->d_vocab);
}

/* Rows normalised at once by al_model_unembed: at most 64, and at most
 * 16384 floats (d_model's limit), on the stack. A row's logits do not
 * depend on the rows beside it (gemm.h), so chunks change no bits. */
#define UNEMBED_FLOATS 16384
#define UNEMBED_ROWS 64

/* al_model_unembed with ln_final (its own function: only it needs the
 * stack buffer). */
static void unembed_ln(const al_model *m, const float *x, int n, float *logits) {
    const al_config *c = &m->cfg;
    int C = c->d_model;
    float u[UNEMBED_FLOATS], mean[UNEMBED_ROWS], scale[UNEMBED_ROWS];
    int per = UNEMBED_FLOATS / C < UNEMBED_ROWS ? UNEMBED_FLOATS / C : UNEMBED_ROWS;
    for (int i = 0; i < n; i += per) {
        int k = n - i < per ? n - i : per;
        layernorm_forward(u, mean, scale, x + (size_t)i * C, m->p[AL_P_LNFW], m->p[AL_P_LNFB],
                          (size_t)k, C, c->ln_eps);
        model_unembed_rows(m, u, k, logits + (size_t)i * c->d_vocab, 1);
    }
}

void al_model_unembed(const al_model *m, const float *x, int n, float *logits) {
    if (m->cfg.norm_type == AL_NORM_NONE)
        model_unembed_rows(m, x, n, logits, 1);
    else
        unembed_ln(m, x, n, logits);
}

void al_model_unembed_own(const al_model *m, float *x, int n, float *logits) {
    const al_config *c = &m->cfg;
    const int C = c->d_model;
    if (c->norm_type != AL_NORM_NONE) {
        float mean[UNEMBED_ROWS], scale[UNEMBED_ROWS];
        for (int i = 0; i < n; i += UNEMBED_ROWS) {
            int k = n - i < UNEMBED_ROWS ? n - i : UNEMBED_ROWS;
            layernorm_forward(x + (size_t)i * C, mean, scale, x + (size_t)i * C, m->p[AL_P_LNFW],
                              m->p[AL_P_LNFB], (size_t)k, C, c->ln_eps);
        }
    }
    model_unembed_rows(m, x, n, logits, 1);
}

float al_model_logit(const al_model *m, const float *x, int v) {
    const al_config *c = &m->cfg;
    int C = c->d_model, V = c->d_vocab;
    const float *w = m->p[AL_P_LNFW], *b = m->p[AL_P_LNFB];
    float mu = 0.0f, inv = 1.0f;
    if (c->norm_type != AL_NORM_NONE) { /* ln_final's row, as layernorm_forward computes it */
        float scale;
        layernorm_stats(&mu, &scale, x, 1, C, c->ln_eps);
        inv = 1.0f / scale;
    }
    double s = m->p[AL_P_BU] ? m->p[AL_P_BU][v] : 0.0;
    for (int k = 0; k < C; k++) {
        float u = c->norm_type == AL_NORM_NONE ? x[k]
                  : w                          ? (x[k] - mu) * inv * w[k] + b[k]
                                               : (x[k] - mu) * inv;
        s += (double)u * (c->tied_embeddings ? m->p[AL_P_WE][(size_t)v * C + k]
                                             : m->p[AL_P_WU][(size_t)k * V + v]);
    }
    return (float)s;
}
