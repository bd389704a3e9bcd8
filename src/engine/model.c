/* model.c -- parameters, initialisation, forward and backward with head
 * gates for the attention-only transformer of docs/design.md §2. The
 * forward calls the model's hooks (hooks.h) at their points and knows
 * nothing of what they do (patching, z replacement, circuits).
 *
 * The per-layer Q, K, V weights are stored as TransformerLens has them,
 * (H, C, D) each. For speed the forward pass copies them into one fused
 * (C, 3·H·D) matrix so a single sgemm produces q|k|v for all heads; the
 * copy is 3·C·H·D floats per layer, negligible next to the matmul. */
#include "attnlab/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/gemm.h"
#include "attnlab/layers.h"
#include "attnlab/prof.h"
#include "model_internal.h"

al_config al_config_default(void) {
    al_config c = {.n_layers = 2, .d_model = 256, .n_heads = 8, .d_head = 32,
                   .n_ctx = 256, .d_vocab = 0, .tied_embeddings = 0, .seed = 1337,
                   .norm_type = AL_NORM_NONE, .ln_eps = 1e-5, .biases = 0};
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
    return 0;
}

const char *al_norm_type_name(int norm_type) {
    return norm_type == AL_NORM_LN ? "LN" : norm_type == AL_NORM_LNPRE ? "LNPre" : NULL;
}

int al_norm_type_parse(const char *name, int *norm_type) {
    if (!name) *norm_type = AL_NORM_NONE;
    else if (!strcmp(name, "LN")) *norm_type = AL_NORM_LN;
    else if (!strcmp(name, "LNPre")) *norm_type = AL_NORM_LNPRE;
    else return -1;
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
        k += (size_t)snprintf(has, sizeof has, "normalization_type %s", al_norm_type_name(c->norm_type));
    for (unsigned b = 1; b <= AL_BIAS_U && k < sizeof has; b <<= 1)
        if (c->biases & b) k += (size_t)snprintf(has + k, sizeof has - k, "%s%s", k ? ", " : "", al_bias_name(b));
    return al_errf(e, "%s does not yet support LayerNorm or bias models (this one has %s); it needs "
                   "a model with normalization_type null and no biases", what, has);
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
    init_normal(m->p[AL_P_WE], m->param_size[AL_P_WE],
                cfg->tied_embeddings ? 1.0 / sqrt(C) : 0.5, &r);
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

static size_t per_head(const al_model *m) {
    return (size_t)m->cfg.d_model * m->cfg.d_head;
}
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

int al_param_tl_name(const al_model *m, int which, int l, char *name,
                     size_t cap, int64_t shape[4]) {
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
    double per_layer = 2.0 * BT * C * 3 * HD      /* q, k, v */
                       + 2.0 * 2.0 * pairs * c->d_head /* scores, weighted sum */
                       + 2.0 * BT * HD * C;       /* W_O */
    if (c->pos_type == AL_POS_SHORTFORMER)
        per_layer += 2.0 * T * C * 2 * HD + 2.0 * BT * HD; /* W_pos W_Q|K, and adding it */
    return c->n_layers * per_layer + 2.0 * BT * C * c->d_vocab;
}

/* ------------------------------------------------------- activations */

static int ensure_acts(al_model *m, int B, int T, al_err *e) {
    if (m->acts && B <= m->B_cap && T <= m->T_cap) return 0;
    const al_config *c = &m->cfg;
    size_t L = c->n_layers, C = c->d_model, HD = (size_t)c->n_heads * c->d_head;
    size_t BT = (size_t)B * T, V = c->d_vocab, H = c->n_heads;
    size_t sizes[] = {
        (L + 1) * BT * C,     /* x */
        L * BT * 3 * HD,      /* qkv */
        L * B * H * T * T,    /* att */
        L * BT * HD,          /* z */
        L * BT * HD,          /* zg */
        L * BT * HD,          /* zs */
        BT * V,               /* probs */
        BT,                   /* losses */
        BT * C,               /* dx */
        BT * HD,              /* dzg */
        BT * 3 * HD,          /* dqkv */
        C * 3 * HD,           /* wqkv */
        C * 3 * HD,           /* dwqkv */
        (size_t)B * H,        /* gate_part */
        (size_t)T * 2 * HD,   /* posqk */
        BT * H * C,           /* result (touched only with RESULT hooks) */
    };
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
    float **views[] = {&m->x,    &m->qkv,  &m->att,  &m->z,    &m->zg,  &m->zs,
                       &m->probs, &m->losses, &m->dx, &m->dzg, &m->dqkv,
                       &m->wqkv, &m->dwqkv, &m->gate_part, &m->posqk, &m->result};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        *views[i] = a;
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
            const float *w = s == 0 ? al_head_wq(m, l, h)
                             : s == 1 ? al_head_wk(m, l, h) : al_head_wv(m, l, h);
            for (int c = 0; c < C; c++)
                memcpy(wqkv + (size_t)c * 3 * HD + s * HD + (size_t)h * D,
                       w + (size_t)c * D, sizeof(float) * D);
        }
}

/* Inverse of fuse_qkv for gradients: dW_{Q,K,V}[l,h] = columns of dwqkv. */
static void unfuse_qkv_grads(al_model *m, const float *dwqkv, int l) {
    int C = m->cfg.d_model, H = m->cfg.n_heads, D = m->cfg.d_head;
    size_t HD = (size_t)H * D, ph = per_head(m);
    for (int s = 0; s < 3; s++)
        for (int h = 0; h < H; h++) {
            float *g = m->g[AL_P_WQ + s] + ((size_t)l * H + h) * ph;
            for (int c = 0; c < C; c++)
                memcpy(g + (size_t)c * D,
                       dwqkv + (size_t)c * 3 * HD + s * HD + (size_t)h * D,
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

/* zg (B,T,H,D) = gate · src, src being z or what the Z hooks made of it. */
static void apply_gates(const al_model *m, int l, float *zg, const float *src, int BT) {
    int H = m->cfg.n_heads, D = m->cfg.d_head;
    const float *g = m->gates + (size_t)l * H;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < BT; i++)
        for (int h = 0; h < H; h++) {
            size_t off = ((size_t)i * H + h) * D;
            model_gate_row(zg + off, src + off, g[h], D);
        }
}

/* Run the hooks at (point, l) on data (ld floats per (b, t) row);
 * records `intervened`. */
static int hook(al_model *m, al_hook_point point, int l, float *data, size_t ld,
                unsigned char *rows, unsigned char *fixed, al_err *e) {
    al_hook_act a = {.m = m, .point = point, .layer = l, .data = data, .ld = ld,
                     .rows = rows, .fixed = fixed};
    if (al_hook_run(m, point, &a, e)) return -1;
    m->intervened |= a.intervened;
    return 0;
}

void model_att_row_z(float *z, const float *row, int t, const float *v, size_t vs, int D) {
    for (int d = 0; d < D; d++) z[d] = 0.0f;
    for (int u = 0; u <= t; u++) {
        float a = row[u];
        const float *vu = v + (size_t)u * vs;
        for (int d = 0; d < D; d++) z[d] += a * vu[d];
    }
}

static int check_inputs(const al_model *m, const int *in, const int *tg, int B,
                        int T, al_err *e) {
    if (B < 1 || T < 1) return al_errf(e, "batch shape %dx%d is empty", B, T);
    if (al_config_plain_check(&m->cfg, "the forward pass", e)) return -1;
    if (T > m->cfg.n_ctx)
        return al_errf(e, "sequence length %d exceeds n_ctx %d", T, m->cfg.n_ctx);
    size_t BT = (size_t)B * T;
    for (size_t i = 0; i < BT; i++) {
        if (in[i] < 0 || in[i] >= m->cfg.d_vocab)
            return al_errf(e, "token id %d at position %zu is outside the vocabulary (d_vocab %d)",
                           in[i], i, m->cfg.d_vocab);
        if (tg && tg[i] >= m->cfg.d_vocab)
            return al_errf(e, "target id %d at position %zu is outside the vocabulary (d_vocab %d)",
                           tg[i], i, m->cfg.d_vocab);
    }
    return 0;
}

/* Shortformer positions of layer l (no-op for standard ones): q and k of
 * qkv (B,T,3,H,D) += W_pos[t] W_Q, W_pos[t] W_K of every head, with
 * m->wqkv holding layer l's fused weights. Before the Q/K hooks, so a
 * patched q or k (the source's) includes the source's positions, as a
 * computed one does. */
static void pos_qk_forward(al_model *m, float *qkv) {
    if (m->cfg.pos_type != AL_POS_SHORTFORMER) return;
    int HD = m->cfg.n_heads * m->cfg.d_head;
    posqk_project(m->posqk, m->p[AL_P_WPOS], m->wqkv, m->T, m->cfg.d_model, HD); // (T,2HD)
    posqk_forward(qkv, m->posqk, m->B, m->T, HD);
}

/* Backward of pos_qk_forward for layer l: with dqkv (B,T,3,H,D) and
 * m->wqkv layer l's, dwqkv (C,3HD) += the W_pos rows' share of dW_Q,K and
 * dW_pos[:T] += Σ_b dq W_Qᵀ + dk W_Kᵀ. */
static void pos_qk_backward(al_model *m, float *dwqkv) {
    if (m->cfg.pos_type != AL_POS_SHORTFORMER) return;
    int HD = m->cfg.n_heads * m->cfg.d_head;
    posqk_backward(m->g[AL_P_WPOS], dwqkv, m->posqk, m->dqkv, m->p[AL_P_WPOS], m->wqkv, m->B,
                   m->T, m->cfg.d_model, HD);
}

/* xn (B,T,C) += Σ_h result_h, result (B,T,H,C) = each head's zg · W_O[l,h]
 * as the RESULT hooks left it (heads summed in order, per element). */
static int add_results(al_model *m, int l, float *xn, const float *zg, al_err *e) {
    const int H = m->cfg.n_heads, D = m->cfg.d_head, C = m->cfg.d_model, HD = H * D;
    const size_t BT = (size_t)m->B * m->T;
    for (int h = 0; h < H; h++)
        al_sgemm(false, false, (int)BT, C, D, 1.0f, zg + h * D, HD,
                    al_head_wo(m, l, h), C, 0.0f, m->result + (size_t)h * C, H * C);
    if (hook(m, AL_HOOK_RESULT, l, m->result, (size_t)H * C, NULL, NULL, e)) return -1;
    for (size_t r = 0; r < BT; r++)
        for (int h = 0; h < H; h++) {
            const float *o = m->result + (r * H + h) * C;
            float *x = xn + r * C;
            for (int k = 0; k < C; k++) x[k] += o[k];
        }
    return 0;
}

/* Layers and unembedding of the forward pass, from m->x[0] (the
 * embeddings) of shape (m->B, m->T) into m->x and m->probs (logits),
 * with the hooks at their points (hooks.h). */
static int forward_layers(al_model *m, int unembed, al_err *e) {
    const al_config *c = &m->cfg;
    int L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head, V = c->d_vocab;
    int B = m->B, T = m->T, BT = B * T, HD = H * D;
    int any = m->hooks.n > 0;
    for (int l = 0; l < L; l++) {
        float *x = m->x + (size_t)l * BT * C;                  // (B,T,C)
        float *xn = x + (size_t)BT * C;                        // (B,T,C)
        float *qkv = m->qkv + (size_t)l * BT * 3 * HD;         // (B,T,3,H,D)
        float *att = m->att + (size_t)l * B * H * T * T;       // (B,H,T,T)
        float *z = m->z + (size_t)l * BT * HD;                 // (B,T,H,D)
        float *zg = m->zg + (size_t)l * BT * HD;               // (B,T,H,D)
        const float *zsrc = z;
        if (any && hook(m, AL_HOOK_RESID_PRE, l, x, C, NULL, NULL, e)) return -1;
        double t0 = al_prof_t();
        model_fuse_qkv(m->wqkv, m, l);
        matmul_forward(qkv, x, m->wqkv, BT, C, 3 * HD, 0.0f);
        pos_qk_forward(m, qkv);
        al_prof_add(AL_OP_QKV, t0);
        for (int s = 0; any && s < 3; s++)
            if (hook(m, AL_HOOK_Q + s, l, qkv + (size_t)s * HD, 3 * HD, NULL, NULL, e)) return -1;
        t0 = al_prof_t();
        if (attention_forward(z, att, qkv, B, T, H, D, 1))
            return al_errf(e, "out of memory (attention scratch)");
        al_prof_add(AL_OP_ATT_FWD, t0);
        if (any && al_hook_any(m, AL_HOOK_PATTERN, l)) {
            /* rows a hook wrote: z = row · v there, for every sequence */
            memset(m->rows, 0, (size_t)H * T);
            if (hook(m, AL_HOOK_PATTERN, l, att, T, m->rows, NULL, e)) return -1;
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    if (!m->rows[(size_t)h * T + t]) continue;
                    for (int b = 0; b < B; b++) {
                        size_t ro = (((size_t)b * H + h) * T + t) * T;
                        const float *v = qkv + (size_t)b * T * 3 * HD + 2 * HD + (size_t)h * D;
                        model_att_row_z(z + ((size_t)b * T + t) * HD + (size_t)h * D, att + ro, t,
                                        v, 3 * (size_t)HD, D);
                    }
                }
        }
        m->zhooked[l] = 0;
        memset(m->zfixed + (size_t)l * H, 0, H);
        if (any && al_hook_any(m, AL_HOOK_Z, l)) {
            float *zs = m->zs + (size_t)l * BT * HD;
            memcpy(zs, z, sizeof(float) * (size_t)BT * HD);
            if (hook(m, AL_HOOK_Z, l, zs, HD, NULL, m->zfixed + (size_t)l * H, e)) return -1;
            m->zhooked[l] = 1;
            zsrc = zs;
        }
        t0 = al_prof_t();
        apply_gates(m, l, zg, zsrc, BT);
        model_copy(xn, x, (size_t)BT * C);
        if (any && al_hook_any(m, AL_HOOK_RESULT, l)) {
            if (add_results(m, l, xn, zg, e)) return -1;
        } else
            matmul_forward(xn, zg, m->p[AL_P_WO] + (size_t)l * HD * C, BT, HD, C, 1.0f);
        al_prof_add(AL_OP_WO, t0);
        if (any && hook(m, AL_HOOK_RESID_POST, l, xn, C, NULL, NULL, e)) return -1;
    }
    float *xL = m->x + (size_t)L * BT * C;
    if (!unembed) return 0;
    double t0 = al_prof_t();
    if (c->tied_embeddings)
        matmul_forward_wt(m->probs, xL, m->p[AL_P_WE], BT, C, V, 0.0f);
    else
        matmul_forward(m->probs, xL, m->p[AL_P_WU], BT, C, V, 0.0f);
    al_prof_add(AL_OP_UNEMBED, t0);
    return 0;
}

static int forward_body(al_model *m, const int *inputs, int unembed, al_err *e) {
    const al_config *c = &m->cfg;
    int shortformer = c->pos_type == AL_POS_SHORTFORMER; /* W_pos goes into q and k only */
    double t0 = al_prof_t();
    encoder_forward(m->x, inputs, m->p[AL_P_WE], shortformer ? NULL : m->p[AL_P_WPOS], m->B, m->T,
                    c->d_model);
    al_prof_add(AL_OP_EMBED, t0);
    m->intervened = 0;
    return forward_layers(m, unembed, e);
}

/* al_model_forward up to the logits (checks, inputs and targets kept,
 * layers, unembedding). */
static int model_forward_begin(al_model *m, const int *inputs, const int *targets, int B, int T,
                               al_err *e) {
    if (check_inputs(m, inputs, targets, B, T, e) != 0) return -1;
    if (ensure_acts(m, B, T, e) != 0) return -1;
    const int BT = B * T;
    m->B = B;
    m->T = T;
    memcpy(m->inputs, inputs, sizeof(int) * BT);
    m->has_targets = targets != NULL;
    for (int i = 0; i < BT; i++) m->targets[i] = targets ? targets[i] : -1;
    if (forward_body(m, inputs, 1, e)) {
        m->has_targets = 0; /* no backward of a failed forward */
        m->intervened = 1;
        return -1;
    }
    return 0;
}

static void model_mean_loss(al_model *m) {
    double sum = 0.0;
    for (int i = 0; i < m->B * m->T; i++) sum += m->losses[i];
    m->mean_loss = m->n_valid ? (float)(sum / m->n_valid) : -1.0f;
}

int al_model_forward(al_model *m, const int *inputs, const int *targets, int B,
                     int T, al_err *e) {
    if (model_forward_begin(m, inputs, targets, B, T, e)) return -1;
    double t0 = al_prof_t();
    m->n_valid = crossentropy_softmax_forward(m->probs, m->losses, m->targets, B * T,
                                              m->cfg.d_vocab);
    al_prof_add(AL_OP_CE, t0);
    model_mean_loss(m);
    return 0;
}

int model_forward_shared(al_model *own, const al_model *m, const void *skip, const int *inputs,
                         int B, int T, al_err *e) {
    if (check_inputs(m, inputs, NULL, B, T, e) != 0) return -1;
    own->cfg = m->cfg;
    memcpy(own->param_size, m->param_size, sizeof own->param_size);
    own->n_params = m->n_params;
    own->params = m->params;
    memcpy(own->p, m->p, sizeof own->p);
    own->gates = m->gates;
    own->hooks.n = 0;
    for (int i = 0; i < m->hooks.n; i++)
        if (m->hooks.h[i].ctx != skip) own->hooks.h[own->hooks.n++] = m->hooks.h[i];
    if (ensure_acts(own, B, T, e) != 0) return -1;
    own->B = B, own->T = T;
    memcpy(own->inputs, inputs, sizeof(int) * (size_t)B * T);
    own->has_targets = 0;
    for (size_t i = 0; i < (size_t)B * T; i++) own->targets[i] = -1;
    return forward_body(own, inputs, 0, e);
}

void model_shared_free(al_model *own) {
    free(own->acts);
    free(own->inputs);
    memset(own, 0, sizeof *own);
}

/* Gate gradients of layer l: ∂L/∂g[h] = Σ_{b,t} dzg[b,t,h,:] · src[b,t,h,:],
 * summed per batch row first and then over rows in a fixed order, so the
 * value does not depend on the thread count. Then dz = g · dzg in place
 * (0 for replaced heads: nothing upstream produced their output). */
/* Head h's gate as backward sees it: 0 for a head whose z a hook set in
 * full (nothing upstream of it reaches W_O). */
static float gate_of(const al_model *m, int l, int h) {
    int H = m->cfg.n_heads;
    return m->zfixed[l * H + h] ? 0.0f : m->gates[l * H + h];
}

/* dz = g·dzg in place for layer l; nothing to do when every gate is 1
 * (the product would be dzg itself, exactly). */
static void scale_by_gates(const al_model *m, int l, float *dzg, size_t BT) {
    int H = m->cfg.n_heads, D = m->cfg.d_head, one = 1;
    for (int h = 0; h < H; h++) one &= gate_of(m, l, h) == 1.0f;
    if (one) return;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < BT; i++)
        for (int h = 0; h < H; h++) {
            float g = gate_of(m, l, h), *p = dzg + (i * H + h) * D;
            for (int d = 0; d < D; d++) p[d] *= g;
        }
}

static void gate_backward(al_model *m, int l, float *dzg, const float *z, int B, int T) {
    int H = m->cfg.n_heads, D = m->cfg.d_head;
    if (m->skip_gate_grads) { /* dz = g·dzg still */
        scale_by_gates(m, l, dzg, (size_t)B * T);
        return;
    }
    /* what the gate scaled: z, or what the Z hooks made of it */
    const float *src = m->zhooked[l] ? m->zs + (size_t)l * B * T * H * D : z;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            double acc = 0.0;
            float g = gate_of(m, l, h);
            for (int t = 0; t < T; t++) {
                size_t i = (size_t)b * T + t, off = (i * H + h) * D;
                for (int d = 0; d < D; d++) acc += (double)dzg[off + d] * src[off + d];
                /* then dz = g·dzg (scale_by_gates), while the row is in cache */
                for (int d = 0; d < D; d++) dzg[off + d] *= g;
            }
            m->gate_part[b * H + h] = (float)acc;
        }
    for (int h = 0; h < H; h++) {
        double s = 0.0;
        for (int b = 0; b < B; b++) s += m->gate_part[b * H + h];
        m->gate_grads[l * H + h] = (float)s;
    }
}

/* The backward pass from the logits' gradient, which m->probs holds
 * (and, in bf16, the copy al_gemm_bf16_reserve gave, released here). */
static int backward_from_dlogits(al_model *m, al_err *e) {
    const al_config *c = &m->cfg;
    int L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head, V = c->d_vocab;
    int B = m->B, T = m->T, BT = B * T, HD = H * D;
    const float *dlogits = m->probs;                            // (B,T,V)
    double t0 = al_prof_t();
    memset(m->g[AL_P_WPOS], 0, sizeof(float) * m->param_size[AL_P_WPOS]);
    const float *xL = m->x + (size_t)L * BT * C;
    if (c->tied_embeddings) {
        /* logits = x W_Eᵀ: dW_E = dlogitsᵀ x (V,C), dx = dlogits W_E */
        matmul_forward(m->dx, dlogits, m->p[AL_P_WE], BT, V, C, 0.0f);
        matmul_weight_grad(m->g[AL_P_WE], dlogits, xL, BT, V, C, 0.0f);
    } else {
        memset(m->g[AL_P_WE], 0, sizeof(float) * m->param_size[AL_P_WE]);
        matmul_forward_wt(m->dx, dlogits, m->p[AL_P_WU], BT, V, C, 0.0f);
        matmul_weight_grad(m->g[AL_P_WU], xL, dlogits, BT, C, V, 0.0f);
    }
    al_gemm_bf16_release();
    al_prof_add(AL_OP_UNEMBED_BWD, t0);
    for (int l = L - 1; l >= 0; l--) {
        const float *x = m->x + (size_t)l * BT * C;
        const float *qkv = m->qkv + (size_t)l * BT * 3 * HD;
        const float *att = m->att + (size_t)l * B * H * T * T;
        const float *z = m->z + (size_t)l * BT * HD;
        const float *zg = m->zg + (size_t)l * BT * HD;
        const float *wo = m->p[AL_P_WO] + (size_t)l * HD * C;
        /* x_{l+1} = x_l + zg W_O: dx passes through unchanged, plus the head path */
        t0 = al_prof_t();
        matmul_forward_wt(m->dzg, m->dx, wo, BT, C, HD, 0.0f);   // (B,T,H,D)
        matmul_weight_grad(m->g[AL_P_WO] + (size_t)l * HD * C, zg, m->dx, BT, HD, C, 0.0f);
        gate_backward(m, l, m->dzg, z, B, T);
        al_prof_add(AL_OP_WO_BWD, t0);
        t0 = al_prof_t();
        if (attention_backward(m->dqkv, m->dzg, qkv, att, B, T, H, D, 1))
            return al_errf(e, "out of memory (attention scratch)");
        al_prof_add(AL_OP_ATT_BWD, t0);
        t0 = al_prof_t();
        model_fuse_qkv(m->wqkv, m, l);
        matmul_weight_grad(m->dwqkv, x, m->dqkv, BT, C, 3 * HD, 0.0f);
        pos_qk_backward(m, m->dwqkv);
        unfuse_qkv_grads(m, m->dwqkv, l);
        matmul_forward_wt(m->dx, m->dqkv, m->wqkv, BT, 3 * HD, C, 1.0f);
        al_prof_add(AL_OP_QKV_BWD, t0);
    }
    t0 = al_prof_t();
    encoder_backward(m->g[AL_P_WE], c->pos_type == AL_POS_SHORTFORMER ? NULL : m->g[AL_P_WPOS],
                     m->dx, m->inputs, B, T, C);
    al_prof_add(AL_OP_EMBED_BWD, t0);
    return 0;
}

int al_model_backward(al_model *m, al_err *e) {
    if (!m->acts || !m->has_targets)
        return al_errf(e, "backward needs a forward pass with targets first");
    if (m->intervened)
        return al_errf(e, "backward of a patched forward pass (or a circuit run) is not supported");
    if (al_model_alloc_grads(m, e) != 0) return -1;
    const int BT = m->B * m->T, V = m->cfg.d_vocab;
    double t0 = al_prof_t();
    /* in bf16, both products of dlogits read one copy rounded here */
    uint16_t *d16 = al_gemm_bf16_reserve(m->probs, (size_t)BT, (size_t)V);
    crossentropy_softmax_backward(m->probs, m->targets, BT, V, m->n_valid, d16);
    al_prof_add(AL_OP_CE, t0);
    return backward_from_dlogits(m, e);
}

int al_model_forward_backward(al_model *m, const int *inputs, const int *targets, int B, int T,
                              al_err *e) {
    if (!targets) return al_errf(e, "forward_backward needs targets");
    if (m->hooks.n > 0) return al_errf(e, "forward_backward does not run hooks (training only)");
    if (al_model_alloc_grads(m, e) != 0) return -1;
    if (model_forward_begin(m, inputs, targets, B, T, e)) return -1;
    const int BT = B * T, V = m->cfg.d_vocab;
    double t0 = al_prof_t();
    uint16_t *d16 = al_gemm_bf16_reserve(m->probs, (size_t)BT, (size_t)V);
    m->n_valid = crossentropy_softmax_forward_backward(m->probs, m->losses, m->targets, BT, V, d16);
    al_prof_add(AL_OP_CE, t0);
    model_mean_loss(m);
    return backward_from_dlogits(m, e);
}

int al_model_backward_acts(al_model *m, const float *dxL, float *dx, float *dzg, float *dqkv,
                           al_err *e) {
    if (!m->acts) return al_errf(e, "activation gradients need a forward pass first");
    if (m->intervened)
        return al_errf(e, "activation gradients of a patched forward pass are not supported");
    const al_config *c = &m->cfg;
    int L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head;
    int B = m->B, T = m->T, BT = B * T, HD = H * D;
    size_t nx = (size_t)BT * C, nz = (size_t)BT * HD;
    memcpy(m->dx, dxL, sizeof(float) * nx);
    if (dx) memcpy(dx + (size_t)L * nx, dxL, sizeof(float) * nx);
    for (int l = L - 1; l >= 0; l--) {
        const float *qkv = m->qkv + (size_t)l * BT * 3 * HD;
        const float *att = m->att + (size_t)l * B * H * T * T;
        const float *wo = m->p[AL_P_WO] + (size_t)l * HD * C;
        /* x_{l+1} = x_l + zg W_O: dx passes through, plus the heads' path */
        matmul_forward_wt(m->dzg, m->dx, wo, BT, C, HD, 0.0f);
        if (dzg) memcpy(dzg + (size_t)l * nz, m->dzg, sizeof(float) * nz);
        scale_by_gates(m, l, m->dzg, (size_t)BT);
        if (attention_backward(m->dqkv, m->dzg, qkv, att, B, T, H, D, 1))
            return al_errf(e, "out of memory (attention scratch)");
        if (dqkv) memcpy(dqkv + (size_t)l * 3 * nz, m->dqkv, sizeof(float) * 3 * nz);
        model_fuse_qkv(m->wqkv, m, l);
        matmul_forward_wt(m->dx, m->dqkv, m->wqkv, BT, 3 * HD, C, 1.0f);
        if (dx) memcpy(dx + (size_t)l * nx, m->dx, sizeof(float) * nx);
    }
    return 0;
}

void al_model_unembed_backward(const al_model *m, const float *dlogits, int n, float *dx) {
    const al_config *c = &m->cfg;
    if (c->tied_embeddings)
        matmul_forward(dx, dlogits, m->p[AL_P_WE], n, c->d_vocab, c->d_model, 0.0f);
    else
        matmul_forward_wt(dx, dlogits, m->p[AL_P_WU], n, c->d_vocab, c->d_model, 0.0f);
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
    memcpy(a->z, m->z, sizeof(float) * L * BT * HD);
    memcpy(a->zg, m->zg, sizeof(float) * L * BT * HD);
    memcpy(a->zfixed, m->zfixed, L * c->n_heads);
    return 0;
}

void al_model_unembed(const al_model *m, const float *x, int n, float *logits) {
    const al_config *c = &m->cfg;
    if (c->tied_embeddings)
        matmul_forward_wt(logits, x, m->p[AL_P_WE], n, c->d_model, c->d_vocab, 0.0f);
    else
        matmul_forward(logits, x, m->p[AL_P_WU], n, c->d_model, c->d_vocab, 0.0f);
}

float al_model_logit(const al_model *m, const float *x, int v) {
    const al_config *c = &m->cfg;
    int C = c->d_model, V = c->d_vocab;
    double s = 0.0;
    if (c->tied_embeddings)
        for (int k = 0; k < C; k++) s += (double)x[k] * m->p[AL_P_WE][(size_t)v * C + k];
    else
        for (int k = 0; k < C; k++) s += (double)x[k] * m->p[AL_P_WU][(size_t)k * V + v];
    return (float)s;
}
