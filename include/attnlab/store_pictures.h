/* store_pictures.h -- what the pictures read of the results database
 * (docs/design.md §6, §7): typed readers, so src/pictures/ holds no SQL.
 *
 * Every reader returns 0, or -1 with e set on a database error. A list
 * reader hands back one malloc'd block, *rows, holding the rows and the
 * strings they point at (a SQL NULL is a NULL pointer, a NULL number is
 * NaN): free it with al_store_rows_free (plain free). On error *rows is
 * NULL and *n 0. Numbers come back as the database holds them (doubles),
 * so a caller converts them exactly as it would have converted a row of
 * al_store_query. "Finished" is runs.status = 'done'. */
#ifndef ATTNLAB_STORE_PICTURES_H
#define ATTNLAB_STORE_PICTURES_H

#include <stdint.h>
#include "attnlab/store.h"
#include "attnlab/util.h"

/* Frees a block of any reader below; NULL is fine. */
void al_store_rows_free(void *rows);

/* ---- models and runs ---- */

/* models.model_id of the checkpoint with this sha256 (0 if none). */
int al_store_model_by_sha(al_store *s, const char *sha256, int64_t *model_id, al_err *e);
/* models.path of the model run `run` analysed, malloc'd (caller frees);
 * *path NULL if no such run or model. */
int al_store_run_model_path(al_store *s, long run, char **path, al_err *e);

/* The newest finished run of model_id with rows in a table, 0 if none:
 *   composition / singular_values: any rows;
 *   ablations: kind ("single" | "pair") and method (NULL: any);
 *   pruning_steps: method. */
int al_store_latest_composition_run(al_store *s, int64_t model_id, long *run, al_err *e);
int al_store_latest_svals_run(al_store *s, int64_t model_id, long *run, al_err *e);
int al_store_latest_ablation_run(al_store *s, int64_t model_id, const char *kind,
                                 const char *method, long *run, al_err *e);
int al_store_latest_pruning_run(al_store *s, int64_t model_id, const char *method, long *run,
                                al_err *e);
/* The newest 'train' run of model_id, whatever its status (the curve of
 * a run still training is worth drawing); 0 if none. */
int al_store_latest_train_run(al_store *s, int64_t model_id, long *run, al_err *e);
/* *text = 1 if training run `run` recorded its head scores on a text
 * probe (--probe-tokens text...: windows of held-out text, where
 * induction_all names induction heads), else 0. */
int al_store_train_text_probe(al_store *s, long run, int *text, al_err *e);

/* The newest finished run of a command with its row in the command's run
 * table (patching_runs, attribution_runs, circuit_runs); 0 if none.
 * kind: "patch" or "paths". */
int al_store_latest_patch_run(al_store *s, int64_t model_id, const char *kind, long *run,
                              al_err *e);
/* What an attribute run must have to be picked. */
typedef enum {
    AL_ATTR_ANY, /* any finished attribute run */
    AL_ATTR_TERMS, /* a path expansion (attribution_runs.direct_dloss set) */
    AL_ATTR_PATCHING /* attribution patching (attribution_runs.direction set) */
} al_attr_need;
int al_store_latest_attribute_run(al_store *s, int64_t model_id, al_attr_need need, long *run,
                                  al_err *e);
int al_store_latest_discover_run(al_store *s, int64_t model_id, long *run, al_err *e);

/* What every run picture reads of its run: runs.kind, status, model_id
 * (0 when NULL), and the task of its row in the command's run table
 * (has_row 0: no row there, the run did not finish). found 0: no run. */
typedef struct al_store_run_head {
    long run;
    char kind[16], status[16], task[16];
    int64_t model_id;
    int found, has_row;
} al_store_run_head;

/* A patch or paths run (runs + patching_runs). */
typedef struct al_store_patch_run {
    al_store_run_head h;
    char direction[16], component[16];
    int n_pairs, seq_len;
    double m_clean, m_corr;
    char *config; /* runs.config_json, malloc'd (NULL: none) */
    char hash[24]; /* patching_runs.task_hash */
} al_store_patch_run;
int al_store_read_patch_run(al_store *s, long run, al_store_patch_run *out, al_err *e);
/* Frees out->config (the rest is plain data). */
void al_store_patch_run_free(al_store_patch_run *r);

/* An attribute run (runs + attribution_runs). */
typedef struct al_store_attr_run {
    al_store_run_head h;
    char metric_kind[16], direction[16];
    int seq_len, n_items;
    int centred; /* log-prob items against the mean logit (W_U centred) */
    double kind_dloss[3]; /* direct, head, virtual: all terms of the kind removed */
} al_store_attr_run;
int al_store_read_attr_run(al_store *s, long run, al_store_attr_run *out, al_err *e);

/* A discover run (runs + its circuit_runs rows, as stored: unsorted). */
#define AL_STORE_MAX_CIRCUITS 64
typedef struct al_store_circuit {
    char method[8];
    double tau; /* NaN: EAP */
    int n_edges, n_kept;
    double faith, kl;
} al_store_circuit;
typedef struct al_store_discover_run {
    al_store_run_head h;
    al_store_circuit c[AL_STORE_MAX_CIRCUITS];
    int n;
    char metric[16];
    double cfg_tau; /* runs.config_json's "tau" (NaN: none) */
} al_store_discover_run;
int al_store_read_discover_run(al_store *s, long run, al_store_discover_run *out, al_err *e);

/* The circuit of discover run `run` drawn without a tau: the run's own
 * tau first, then EAP, then the smallest tau. 1 with method (cap >= 8)
 * and *tau (NaN: EAP); 0 if the run has no circuit. */
int al_store_default_circuit(al_store *s, long run, char *method, double *tau, al_err *e);

/* ---- the rows of one run ---- */

typedef struct al_store_comp_row {
    const char *kind; /* "Q", "K", "V" */
    double layer1, head1, layer2, head2, score, baseline;
} al_store_comp_row;
int al_store_read_composition(al_store *s, long run, al_store_comp_row **rows, int *n, al_err *e);

typedef struct al_store_sval_row {
    double layer, head;
    const char *circuit; /* "qk", "ov" */
    double idx, value;
} al_store_sval_row;
int al_store_read_svals(al_store *s, long run, al_store_sval_row **rows, int *n, al_err *e);

/* value: the column named metric, one of delta_loss, delta_loss_copy,
 * delta_loss_probe (another name: -1); method NULL: any. */
typedef struct al_store_ablation_row {
    const char *kind, *heads;
    double value, interaction;
    const char *method;
} al_store_ablation_row;
int al_store_read_ablations(al_store *s, long run, const char *metric, const char *method,
                            al_store_ablation_row **rows, int *n, al_err *e);

/* A pruning method's steps, in step order. */
typedef struct al_store_prune_row {
    double heads_left, loss;
} al_store_prune_row;
int al_store_read_pruning(al_store *s, long run, const char *method, al_store_prune_row **rows,
                          int *n, al_err *e);

/* train_log in step order. */
typedef struct al_store_train_row {
    double step, train_loss, val_loss;
} al_store_train_row;
int al_store_read_train_log(al_store *s, long run, al_store_train_row **rows, int *n, al_err *e);

typedef struct al_store_head_step_row {
    double step, layer, head, value;
} al_store_head_step_row;
int al_store_read_train_head_scores(al_store *s, long run, const char *metric,
                                    al_store_head_step_row **rows, int *n, al_err *e);

/* The newest finished run of model_id that stored intervals
 * (score_intervals) and is a scores run or a patching run (patch,
 * paths), 0 if none. */
int al_store_latest_interval_run(al_store *s, int64_t model_id, long *run, al_err *e);
/* Run `run`'s head; has_row: it stored intervals (task empty). */
int al_store_read_interval_run(al_store *s, long run, al_store_run_head *out, al_err *e);
/* score_intervals of a run (layer, head, pos −1 as stored; NaN: NULL). */
typedef struct al_store_interval_row {
    double layer, head, pos;
    const char *metric;
    double value, se, lo, hi;
} al_store_interval_row;
int al_store_read_intervals(al_store *s, long run, al_store_interval_row **rows, int *n, al_err *e);

typedef struct al_store_patching_row {
    double layer, head, pos, value;
} al_store_patching_row;
int al_store_read_patching(al_store *s, long run, al_store_patching_row **rows, int *n, al_err *e);

typedef struct al_store_path_row {
    const char *sender;
    double receiver_layer, receiver_head; /* NaN for the direct path */
    const char *channel;
    double value;
} al_store_path_row;
int al_store_read_path_patching(al_store *s, long run, al_store_path_row **rows, int *n, al_err *e);

/* logit_attribution: the per-position rows (pos not NULL). */
typedef struct al_store_dla_row {
    const char *component;
    double pos, value;
} al_store_dla_row;
int al_store_read_dla(al_store *s, long run, al_store_dla_row **rows, int *n, al_err *e);
/* The (at most) 4 largest |value| over all items (pos NULL), largest first. */
int al_store_read_dla_top(al_store *s, long run, al_store_dla_row **rows, int *n, al_err *e);

typedef struct al_store_token_row {
    double pos;
    const char *text;
} al_store_token_row;
int al_store_read_attr_tokens(al_store *s, long run, al_store_token_row **rows, int *n, al_err *e);

/* path_terms in term order (attribute.h): direct, heads by layer,
 * virtual heads by receiver layer, sender (src_head), receiver head, the
 * remainder (layer NULL) last. */
typedef struct al_store_term_row {
    const char *term, *kind;
    double layer, dloss;
} al_store_term_row;
int al_store_read_path_terms(al_store *s, long run, al_store_term_row **rows, int *n, al_err *e);

typedef struct al_store_ap_row {
    const char *grid;
    double estimate, actual;
    int compared; /* actual is not NULL */
} al_store_ap_row;
int al_store_read_attr_patching(al_store *s, long run, al_store_ap_row **rows, int *n, al_err *e);

typedef struct al_store_agree_row {
    const char *grid;
    double n, pearson, spearman, top5;
} al_store_agree_row;
int al_store_read_attr_agreement(al_store *s, long run, al_store_agree_row **rows, int *n,
                                 al_err *e);

/* The edges of one circuit of a run (tau NaN: the EAP circuit), in edge
 * order. */
typedef struct al_store_edge_row {
    const char *sender;
    double receiver_layer, receiver_head;
    const char *channel;
    double score, kept;
} al_store_edge_row;
int al_store_read_circuit_edges(al_store *s, long run, const char *method, double tau,
                                al_store_edge_row **rows, int *n, al_err *e);

/* Every model of view sweep_models with its latest finished train run's
 * best induction score per step, ordered by setting, n_layers, seed,
 * model_id, step. */
typedef struct al_store_sweep_row {
    const char *setting;
    double n_layers, model_id, seed, step, value;
} al_store_sweep_row;
int al_store_read_sweep_induction(al_store *s, al_store_sweep_row **rows, int *n, al_err *e);

/* ---- generic views (view.h, table views) ---- */

/* The newest finished run of model_id holding view metric in any shape
 * (head, model, pair, edge, pos; 0: none): `heatmap --what view` draws
 * whichever it is, its values read by al_store_read_view (store_views.h).
 * 0, or -1 with e. */
int al_store_latest_view_any_run(al_store *s, int64_t model_id, const char *metric, long *run,
                                 al_err *e);
/* Per-head view metric of run: its values into v (L*H, NaN where a head
 * has none; rows outside L x H are ignored) and its title into title (cap bytes; "" when the run has
 * no such view). 0, or -1 with e. */
int al_store_read_head_view(al_store *s, long run, const char *metric, int L, int H, double *v,
                            char *title, size_t cap, al_err *e);

#endif
