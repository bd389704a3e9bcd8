/* process.c -- weight processing as TransformerLens's from_pretrained
 * does it (process.h): LN folding, centring, value-bias folding.
 *
 * The processed model is built beside the original (its config can gain
 * bias tensors, lose the LayerNorm weights, untie the unembedding), the
 * tensors it shares copied over, then each step rewrites them in double
 * precision from the values before that step; m takes the new model only
 * when all of it succeeded. */
#include "attnlab/process.h"

#include <stdlib.h>
#include <string.h>

/* The steps of o that apply to config c (process.h: TransformerLens's
 * exceptions). */
static unsigned steps_for(const al_config *c, const al_process_opts *o) {
    int short_pos = c->pos_type == AL_POS_SHORTFORMER, ln = c->norm_type != AL_NORM_NONE;
    unsigned s = 0;
    if (o->fold_ln && ln && !short_pos) s |= AL_PROC_FOLD_LN;
    if (o->center_writing_weights && ln && !short_pos) s |= AL_PROC_CENTER_WRITING;
    if (o->center_unembed && !short_pos) s |= AL_PROC_CENTER_UNEMBED;
    if (o->fold_value_biases && (c->biases & AL_BIAS_V)) s |= AL_PROC_FOLD_VALUE_BIASES;
    return s;
}

/* x (rows, n, stride inner) -= its mean over the n entries of each row:
 * row r, entry i at x[r·rs + i·is]. */
static void center(float *x, size_t rows, size_t rs, size_t n, size_t is) {
    for (size_t r = 0; r < rows; r++) {
        float *p = x + r * rs;
        double s = 0;
        for (size_t i = 0; i < n; i++) s += p[i * is];
        double mu = s / (double)n;
        for (size_t i = 0; i < n; i++) p[i * is] = (float)(p[i * is] - mu);
    }
}

/* LN folding of one reader: W (H, C, D) per head (or, for W_U, H = 1 and
 * D = V) and its bias b (H, D): b += ln.b W, W *= ln.w row-wise (w, b NULL:
 * LNPre, nothing to fold), then every column of W centred over C. */
static void fold_reader(float *W, float *bias, const float *w, const float *b, int H, int C,
                        int D) {
    for (int h = 0; h < H; h++) {
        float *Wh = W + (size_t)h * C * D;
        if (b && bias)
            for (int d = 0; d < D; d++) {
                double s = bias[(size_t)h * D + d];
                for (int c = 0; c < C; c++) s += (double)b[c] * Wh[(size_t)c * D + d];
                bias[(size_t)h * D + d] = (float)s;
            }
        if (w)
            for (int c = 0; c < C; c++)
                for (int d = 0; d < D; d++) Wh[(size_t)c * D + d] *= w[c];
        center(Wh, (size_t)D, 1, (size_t)C, (size_t)D);
    }
}

int al_model_process(al_model *m, const al_process_opts *o, al_err *e) {
    if (m->hooks.n > 0)
        return al_errf(e, "weight processing: remove the model's hooks first (%d registered)",
                       m->hooks.n);
    const al_config *c = &m->cfg;
    unsigned steps = steps_for(c, o);
    al_config c2 = *c;
    c2.processed |= steps;
    if (steps & AL_PROC_FOLD_LN) {
        if (c->norm_type == AL_NORM_LN) /* ln biases land in the readers' biases */
            c2.biases |= AL_BIAS_Q | AL_BIAS_K | AL_BIAS_V | AL_BIAS_U;
        c2.norm_type = AL_NORM_LNPRE;
    }
    if (steps & AL_PROC_FOLD_VALUE_BIASES) c2.biases |= AL_BIAS_O;
    /* a step that changes W_E or W_U breaks W_U = W_Eᵀ */
    if (steps & (AL_PROC_FOLD_LN | AL_PROC_CENTER_WRITING | AL_PROC_CENTER_UNEMBED))
        c2.tied_embeddings = 0;
    al_model n;
    if (al_model_alloc(&n, &c2, e)) return -1;
    const int L = c->n_layers, C = c->d_model, H = c->n_heads, D = c->d_head, V = c->d_vocab;
    const size_t HD = (size_t)H * D;
    for (int p = 0; p < AL_NPARAM; p++)
        if (m->param_size[p] && n.param_size[p] == m->param_size[p])
            memcpy(n.p[p], m->p[p], sizeof(float) * m->param_size[p]);
    if (c->tied_embeddings && !c2.tied_embeddings) /* W_U = W_Eᵀ, now its own tensor */
        for (int v = 0; v < V; v++)
            for (int k = 0; k < C; k++)
                n.p[AL_P_WU][(size_t)k * V + v] = m->p[AL_P_WE][(size_t)v * C + k];
    memcpy(n.gates, m->gates, sizeof(float) * (size_t)L * H);
    if (steps & AL_PROC_FOLD_LN) {
        for (int l = 0; l < L; l++) {
            const float *w = m->p[AL_P_LN1W] ? m->p[AL_P_LN1W] + (size_t)l * C : NULL;
            const float *b = m->p[AL_P_LN1B] ? m->p[AL_P_LN1B] + (size_t)l * C : NULL;
            for (int s = 0; s < 3; s++)
                fold_reader(n.p[AL_P_WQ + s] + (size_t)l * H * C * D,
                            n.p[AL_P_BQ + s] ? n.p[AL_P_BQ + s] + (size_t)l * HD : NULL, w, b, H, C,
                            D);
        }
        fold_reader(n.p[AL_P_WU], n.p[AL_P_BU], m->p[AL_P_LNFW], m->p[AL_P_LNFB], 1, C, V);
    }
    if (steps & AL_PROC_CENTER_WRITING) {
        center(n.p[AL_P_WE], (size_t)V, (size_t)C, (size_t)C, 1);
        center(n.p[AL_P_WPOS], (size_t)c->n_ctx, (size_t)C, (size_t)C, 1);
        center(n.p[AL_P_WO], (size_t)L * HD, (size_t)C, (size_t)C, 1);
        if (n.p[AL_P_BO]) center(n.p[AL_P_BO], (size_t)L, (size_t)C, (size_t)C, 1);
    }
    if (steps & AL_PROC_CENTER_UNEMBED) {
        center(n.p[AL_P_WU], (size_t)C, (size_t)V, (size_t)V, 1);
        if (n.p[AL_P_BU]) center(n.p[AL_P_BU], 1, (size_t)V, (size_t)V, 1);
    }
    if (steps & AL_PROC_FOLD_VALUE_BIASES)
        for (int l = 0; l < L; l++) {
            float *bv = n.p[AL_P_BV] + (size_t)l * HD, *bo = n.p[AL_P_BO] + (size_t)l * C;
            const float *wo = n.p[AL_P_WO] + (size_t)l * HD * C; /* (H·D, C) */
            for (int k = 0; k < C; k++) {
                double s = bo[k];
                for (size_t i = 0; i < HD; i++) s += (double)bv[i] * wo[i * C + k];
                bo[k] = (float)s;
            }
            memset(bv, 0, sizeof(float) * HD);
        }
    al_model_free(m);
    *m = n;
    return 0;
}
