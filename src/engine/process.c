/* process.c -- TransformerLens's weight processing (process.h): fold_ln,
 * center_writing_weights, center_unembed, fold_value_biases, in that
 * order, as from_pretrained runs them. Sums are taken in double, so the
 * folded weights round once. */
#include "attnlab/process.h"

#include <stdlib.h>
#include <string.h>

static const char *const NAMES[] = {"fold_ln", "center_writing_weights", "center_unembed",
                                    "fold_value_biases"};

al_process_opts al_process_defaults(void) {
    al_process_opts o = {1, 1, 1, 1};
    return o;
}

const char *al_proc_name(unsigned bit) {
    for (int i = 0; i < 4; i++)
        if (bit == 1u << i) return NAMES[i];
    return NULL;
}

unsigned al_proc_parse(const char *name) {
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, NAMES[i])) return 1u << i;
    return 0;
}

unsigned al_process_plan(const al_config *c, const al_process_opts *o) {
    unsigned p = 0;
    int shortformer = c->pos_type == AL_POS_SHORTFORMER;
    if (o->fold_ln && !shortformer && c->norm_type == AL_NORM_LN) p |= AL_PROC_FOLD_LN;
    if (o->center_writing_weights && !shortformer && c->norm_type != AL_NORM_NONE)
        p |= AL_PROC_CENTER_WRITING;
    if (o->center_unembed && !shortformer) p |= AL_PROC_CENTER_UNEMBED;
    /* fold_ln makes b_V (ln1.b W_V) where there was none */
    if (o->fold_value_biases && ((c->biases & AL_BIAS_V) || (p & AL_PROC_FOLD_LN)))
        p |= AL_PROC_FOLD_VALUE_BIASES;
    return p;
}

/* ------------------------------------------------------- the steps */

/* Each of n rows of length k (row-major) loses its mean. */
static void center_rows(float *w, size_t n, size_t k) {
    for (size_t i = 0; i < n; i++) {
        float *r = w + i * k;
        double s = 0;
        for (size_t j = 0; j < k; j++) s += r[j];
        float mean = (float)(s / (double)k);
        for (size_t j = 0; j < k; j++) r[j] -= mean;
    }
}

/* Each of the k columns of w (n, k) loses its mean over the n rows. */
static int center_cols(float *w, size_t n, size_t k, al_err *e) {
    double *s = al_calloc(k, sizeof *s, e);
    if (!s) return -1;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++) s[j] += w[i * k + j];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++) w[i * k + j] -= (float)(s[j] / (double)n);
    free(s);
    return 0;
}

/* A LayerNorm (w, b (C)) folded into the matrix W (C, k) it feeds and
 * that matrix's bias bias (k): bias += b · W, W ← diag(w) W, then W's
 * columns centred. */
static int fold_norm(float *W, float *bias, const float *w, const float *b, size_t C, size_t k,
                     al_err *e) {
    for (size_t j = 0; j < k; j++) {
        double s = 0;
        for (size_t c = 0; c < C; c++) s += (double)b[c] * W[c * k + j];
        bias[j] = (float)(bias[j] + s);
    }
    for (size_t c = 0; c < C; c++)
        for (size_t j = 0; j < k; j++) W[c * k + j] *= w[c];
    return center_cols(W, C, k, e);
}

/* fold_ln: every layer's ln1 into its W_Q, W_K, W_V (H, C, D) and b_Q,
 * b_K, b_V (H, D); ln_final into W_U (C, V) and b_U (V). src holds the
 * LayerNorm weights (dst, already of the LNPre config, has none). */
static int fold_ln(al_model *dst, const al_model *src, al_err *e) {
    const al_config *c = &src->cfg;
    size_t L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head;
    for (size_t l = 0; l < L; l++) {
        const float *w = src->p[AL_P_LN1W] + l * C, *b = src->p[AL_P_LN1B] + l * C;
        for (int s = 0; s < 3; s++)
            for (size_t h = 0; h < H; h++) {
                float *W = dst->p[AL_P_WQ + s] + (l * H + h) * C * D;
                float *bias = dst->p[AL_P_BQ + s] + (l * H + h) * D;
                if (fold_norm(W, bias, w, b, C, D, e)) return -1;
            }
    }
    return fold_norm(dst->p[AL_P_WU], dst->p[AL_P_BU], src->p[AL_P_LNFW], src->p[AL_P_LNFB], C,
                     (size_t)c->d_vocab, e);
}

static void center_writing(al_model *m) {
    const al_config *c = &m->cfg;
    size_t L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head;
    center_rows(m->p[AL_P_WE], (size_t)c->d_vocab, C);
    center_rows(m->p[AL_P_WPOS], (size_t)c->n_ctx, C);
    center_rows(m->p[AL_P_WO], L * H * D, C);
    if (m->p[AL_P_BO]) center_rows(m->p[AL_P_BO], L, C);
}

static void center_unembed(al_model *m) {
    size_t C = m->cfg.d_model, V = m->cfg.d_vocab;
    center_rows(m->p[AL_P_WU], C, V);
    if (m->p[AL_P_BU]) center_rows(m->p[AL_P_BU], 1, V);
}

/* b_O[l] (C) += Σ_h b_V[l,h] (D) · W_O[l,h] (D, C); b_V ← 0. */
static void fold_value_biases(al_model *m) {
    const al_config *c = &m->cfg;
    size_t L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head;
    for (size_t l = 0; l < L; l++)
        for (size_t k = 0; k < C; k++) {
            double s = 0;
            for (size_t h = 0; h < H; h++)
                for (size_t d = 0; d < D; d++)
                    s += (double)m->p[AL_P_BV][(l * H + h) * D + d] *
                         m->p[AL_P_WO][((l * H + h) * D + d) * C + k];
            float *bo = m->p[AL_P_BO] + l * C + k;
            *bo = (float)(*bo + s);
        }
    memset(m->p[AL_P_BV], 0, sizeof(float) * L * H * D);
}

/* ------------------------------------------------------- the driver */

int al_model_process(al_model *m, const al_process_opts *o, al_err *e) {
    unsigned plan = al_process_plan(&m->cfg, o);
    if (!plan) return 0;
    if (m->cfg.tied_embeddings)
        return al_errf(e, "cannot process the weights of a model with tied embeddings "
                          "(W_U is W_Eᵀ; %s would change both)", al_proc_name(plan & -plan));
    al_config nc = m->cfg;
    if (plan & AL_PROC_FOLD_LN) {
        nc.norm_type = AL_NORM_LNPRE;
        nc.biases |= AL_BIAS_Q | AL_BIAS_K | AL_BIAS_V | AL_BIAS_U;
    }
    if (plan & AL_PROC_FOLD_VALUE_BIASES) nc.biases |= AL_BIAS_O;
    nc.processing |= plan;
    al_model n;
    if (al_model_alloc(&n, &nc, e)) return -1;
    for (int p = 0; p < AL_NPARAM; p++)
        if (n.param_size[p] && n.param_size[p] == m->param_size[p])
            memcpy(n.p[p], m->p[p], sizeof(float) * n.param_size[p]);
    if (((plan & AL_PROC_FOLD_LN) && fold_ln(&n, m, e))) {
        al_model_free(&n);
        return -1;
    }
    if (plan & AL_PROC_CENTER_WRITING) center_writing(&n);
    if (plan & AL_PROC_CENTER_UNEMBED) center_unembed(&n);
    if (plan & AL_PROC_FOLD_VALUE_BIASES) fold_value_biases(&n);
    memcpy(n.gates, m->gates, sizeof(float) * (size_t)nc.n_layers * nc.n_heads);
    n.hooks = m->hooks;
    n.skip_gate_grads = m->skip_gate_grads;
    al_model_free(m);
    *m = n;
    return 0;
}
