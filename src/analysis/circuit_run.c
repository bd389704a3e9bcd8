/* circuit_run.c -- a saved circuit made ready to run (circuit_run.h). */
#include "attnlab/circuit_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/circuit_file.h"
#include "attnlab/graph.h"

void al_circuit_run_close(al_circuit_run *cr) {
    al_circuit_detach(&cr->x);
    free(cr->kept);
    free(cr->mean_x0);
    memset(cr, 0, sizeof *cr);
}

/* Per-position means of W_E[token] and of every head's gated z over the
 * windows, accumulated in double (the order fixed: windows, then rows). */
static int means(al_circuit_run *cr, al_model *m, const al_tokens *val, int T, int batches,
                 int batch, al_err *e) {
    const al_config *c = &m->cfg;
    const size_t L = c->n_layers, H = c->n_heads, D = c->d_head, C = c->d_model, HD = H * D;
    const size_t BT = (size_t)batch * T, nz = L * T * HD;
    double *sx = al_calloc((size_t)T * C + nz, sizeof(double), e);
    int *in = sx ? al_malloc(2 * BT, sizeof(int), e) : NULL;
    cr->mean_x0 = in ? al_malloc((size_t)T * C + nz, sizeof(float), e) : NULL;
    if (!cr->mean_x0) goto fail;
    double *sz = sx + (size_t)T * C;
    for (int k = 0; k < batches; k++) {
        if (al_batch_fixed(val, batch, T, k, batches, in, in + BT, e) ||
            al_model_forward(m, in, NULL, batch, T, e))
            goto fail;
        for (size_t r = 0; r < BT; r++) {
            const size_t t = r % T;
            const float *w = m->p[AL_P_WE] + (size_t)in[r] * C;
            for (size_t i = 0; i < C; i++) sx[t * C + i] += w[i];
            for (size_t l = 0; l < L; l++) {
                const float *z = m->zg + (l * BT + r) * HD;
                double *acc = sz + (l * T + t) * HD;
                for (size_t i = 0; i < HD; i++) acc[i] += z[i];
            }
        }
    }
    const double n = (double)batches * batch;
    for (size_t i = 0; i < (size_t)T * C + nz; i++) cr->mean_x0[i] = (float)(sx[i] / n);
    free(sx);
    free(in);
    cr->mean_windows = batches * batch;
    return 0;
fail:
    free(sx);
    free(in);
    free(cr->mean_x0);
    cr->mean_x0 = NULL;
    return -1;
}

int al_circuit_fill_check(const char *fill, al_err *e) {
    if (fill && (strcmp(fill, "corrupted") == 0 || strcmp(fill, "mean") == 0)) return 0;
    return al_errf(e, "--fill must be corrupted or mean (got \"%s\")", fill ? fill : "");
}

int al_circuit_run_open(al_circuit_run *cr, al_model *m, const char *path, const char *fill,
                        const al_tokens *val, int T, int batches, int batch, al_err *e) {
    memset(cr, 0, sizeof *cr);
    const al_config *c = &m->cfg;
    if (al_circuit_fill_check(fill, e)) return -1;
    int mean = strcmp(fill, "mean") == 0;
    if (mean && !val)
        return al_errf(e, "--fill mean needs reference tokens (--data VAL.bin) for the means");
    if (mean && (T < 1 || T > c->n_ctx || batches < 1 || batch < 1))
        return al_errf(e, "mean fill: windows of %d tokens (n_ctx %d), %d x %d", T, c->n_ctx,
                       batches, batch);
    cr->L = c->n_layers, cr->H = c->n_heads;
    cr->n_edges = al_graph_n_edges(cr->L, cr->H);
    if (!cr->n_edges)
        return al_errf(e, "a circuit runs on models of 1 to %d layers (this one has %d)",
                       AL_GRAPH_MAX_LAYERS, cr->L);
    cr->kept = al_malloc((size_t)cr->n_edges, 1, e);
    if (!cr->kept || al_circuit_load(path, cr->L, cr->H, cr->kept, e)) goto fail;
    for (int k = 0; k < cr->n_edges; k++) cr->n_kept += cr->kept[k];
    /* the means come from the full model (the circuit is attached later) */
    if (mean && means(cr, m, val, T, batches, batch, e)) goto fail;
    cr->spec.kept = cr->kept;
    if (mean) {
        cr->spec.fill = AL_FILL_MEAN;
        cr->spec.mean_x0 = cr->mean_x0;
        cr->spec.mean_zg = cr->mean_x0 + (size_t)T * c->d_model;
        cr->spec.mean_T = T;
    } else
        cr->spec.fill = AL_FILL_RESAMPLE;
    return 0;
fail:
    al_circuit_run_close(cr);
    return -1;
}

int al_circuit_run_attach(al_circuit_run *cr, al_model *m, al_err *e) {
    return al_circuit_attach(&cr->x, m, &cr->spec, e);
}

const char *al_circuit_run_describe(const al_circuit_run *cr, char *buf, size_t cap) {
    const char *how = cr->spec.fill == AL_FILL_MEAN ? "their senders' mean values"
                      : cr->spec.fill == AL_FILL_CORRUPTED
                          ? "the corrupted input's values"
                          : "the next sequence's values (resampled)";
    if (cr->spec.fill == AL_FILL_MEAN)
        snprintf(buf, cap, "%d of %d edges kept; the removed edges carry %s over %d windows",
                 cr->n_kept, cr->n_edges, how, cr->mean_windows);
    else
        snprintf(buf, cap, "%d of %d edges kept; the removed edges carry %s", cr->n_kept,
                 cr->n_edges, how);
    return buf;
}
