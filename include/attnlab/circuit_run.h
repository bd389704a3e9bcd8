/* circuit_run.h -- a saved circuit (circuit_file.h) made ready to run in
 * the analyses: `run`, `scores` and `ablate` take --circuit FILE and
 * --fill corrupted|mean and run the model with only the circuit's edges
 * (graph.h: al_circuit_spec, run through engine hooks).
 *
 * Fills for the edges not in the circuit:
 *   corrupted  each sequence's removed edges carry what their senders
 *              compute on another input: the caller's corrupted tokens
 *              (`run --corrupted TEXT`, AL_FILL_CORRUPTED with spec.corr
 *              set by the caller), or, in the batch analyses, the next
 *              sequence of the same batch (sequence b takes b + 1 mod B,
 *              AL_FILL_RESAMPLE: resample ablation, as `ablate --method
 *              resample`);
 *   mean       each sender's mean value at the same position over
 *              reference windows of a token file (mean ablation, as
 *              `ablate --method mean`): al_batch_fixed's batches × batch
 *              windows of T tokens, run through the full model (its
 *              gates, i.e. any head mask, in force).
 * pos edges carry the same value under both fills, so they never matter.
 *
 * Ownership: al_circuit_run_open fills *cr (its kept, means and spec);
 * al_circuit_run_attach makes the model's forwards run the circuit (its
 * hooks and their scratch live in cr->x); al_circuit_run_close removes
 * the hooks and frees everything. */
#ifndef ATTNLAB_CIRCUIT_RUN_H
#define ATTNLAB_CIRCUIT_RUN_H

#include "attnlab/data.h"
#include "attnlab/graph.h"
#include "attnlab/model.h"
#include "attnlab/util.h"

typedef struct al_circuit_run {
    int L, H, n_edges, n_kept;
    unsigned char *kept; /* (n_edges) */
    float *mean_x0; /* mean fill: (T, C) mean W_E[token] per position, then
                             * (L, T, H, D) mean gated z (spec.mean_zg); else NULL */
    int mean_windows; /* windows the means are over (0: not mean) */
    al_circuit_spec spec;
    al_circuit_exec x; /* the run's hooks while attached */
} al_circuit_run;

/* Load the circuit file at path for m (al_circuit_load: one-line errors
 * naming the file) and prepare fill "corrupted" (spec.fill =
 * AL_FILL_RESAMPLE; a caller with its own corrupted tokens switches it
 * to AL_FILL_CORRUPTED and sets spec.corr) or "mean" (needs val: means
 * over batches × batch windows of T tokens; T <= n_ctx). Nothing is
 * attached to m. 0, or −1 with e and *cr zeroed: an unknown fill, a mean
 * without tokens, a model deeper than AL_GRAPH_MAX_LAYERS, a bad file, out
 * of memory. */
int al_circuit_run_open(al_circuit_run *cr, al_model *m, const char *path, const char *fill,
                        const al_tokens *val, int T, int batches, int batch, al_err *e);
void al_circuit_run_close(al_circuit_run *cr);
/* Run the circuit (cr->spec as it is now) in m's forwards until
 * al_circuit_run_close: 0, or −1 with e (al_circuit_attach's errors). */
int al_circuit_run_attach(al_circuit_run *cr, al_model *m, al_err *e);
/* 0 if fill is "corrupted" or "mean", else −1 with e (for the commands'
 * option checks, before anything is loaded). */
int al_circuit_fill_check(const char *fill, al_err *e);
/* "42 of 306 edges; removed edges carry the next sequence's values" etc.
 * into buf (for the commands' summaries); returns buf. */
const char *al_circuit_run_describe(const al_circuit_run *cr, char *buf, size_t cap);

#endif
