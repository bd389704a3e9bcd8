/* store.h -- the SQLite results database (docs/design.md §6).
 *
 * One file holds many runs of many models. A run is one command
 * invocation (its kind is the command's name: "circuits", "train", ...); a
 * model is one checkpoint, keyed by the SHA-256 of its model.safetensors,
 * so analysing the same weights twice gives one models row and two runs.
 *
 * Life of a run, and why it can never look done when it is not:
 *
 *   al_store_run_begin    INSERT runs(status 'running', pid, host), committed
 *   al_store_tx_begin     BEGIN IMMEDIATE
 *   al_store_put_*        rows (bound parameters only)
 *   al_store_run_finish   UPDATE runs SET status 'done' + COMMIT, together
 *   (or al_store_run_fail ROLLBACK + status 'failed')
 *
 * A process killed between begin and finish leaves its rows uncommitted
 * (SQLite discards them) and its run 'running'; the next al_store_open
 * marks 'running' runs of this host whose pid is gone as 'failed'.
 * Long writers (training logs) may call al_store_tx_commit to make rows
 * visible early; those rows belong to a run that is still 'running'.
 *
 * The database is in WAL mode while a writer has it open, with a busy
 * timeout, so readers (sqlite3, report) never block a writer and two
 * writers wait for each other; the last writer to close leaves it in
 * rollback-journal mode, so that readers need write no file. The
 * schema version is PRAGMA user_version; opening to write migrates older
 * files. */
#ifndef ATTNLAB_STORE_H
#define ATTNLAB_STORE_H

#include <stdint.h>
#include "attnlab/model.h"
#include "attnlab/util.h"

#define AL_STORE_SCHEMA_VERSION 19

typedef struct al_store al_store;

/* Open or create path; create/migrate the schema; recover dead runs. */
int al_store_open(const char *path, al_store **out, al_err *e);
/* Open an existing results database to read only: nothing is created,
 * migrated, recovered or written, no file appears beside it, and a file
 * or folder the user cannot write is fine (a database of an older schema
 * reads as it is). 0, or -1 with e: no such file, not SQLite, not an
 * attnlab database, a newer schema. Close with al_store_close. */
int al_store_open_readonly(const char *path, al_store **out, al_err *e);
/* al_store_open_readonly for readers that query today's schema (the
 * pictures, the report): a database of an older schema is copied into
 * memory and migrated there, the file untouched. */
int al_store_open_read(const char *path, al_store **out, al_err *e);
/* Close; an open transaction is rolled back. NULL is fine. */
void al_store_close(al_store *s);
const char *al_store_path(const al_store *s);

/* ---- run kinds ---- */

/* Some readers look for the newest finished run of the analysis whose
 * results fill a family of tables (the report's newest scores, the
 * pictures' newest discovered circuit). runs.kind is that analysis's
 * name, which the analysis registry owns (registry.h, above the store):
 * so the store spells no kind, and the CLI names the kind of each family
 * once at start-up (al_registry_setup), before any reader runs. */
typedef enum {
    AL_RESULTS_NONE, /* results no reader finds by their run's kind */
    AL_RESULTS_TRAINING, /* train_log, train_head_scores (train_record.h) */
    AL_RESULTS_SCORES, /* the probe's head and model scores (al_store_put_scores) */
    AL_RESULTS_WEIGHTS, /* the weights' circuits: skip_trigrams, composition,
                              * singular_values, ... (al_store_put_circuits) */
    AL_RESULTS_NAMES, /* the names_* model_scores (names in text) */
    AL_RESULTS_ATTRIBUTION, /* attribution_runs and its tables (al_store_put_attribute) */
    AL_RESULTS_CIRCUIT, /* discovered circuits: circuit_runs, circuit_edges
                              * (al_store_put_discover) */
    AL_RESULTS_SAE_FEATURES, /* sae_feature_runs and its tables (al_store_put_sae_features) */
    AL_RESULTS_N
} al_store_results;

/* From now on, runs of kind `kind` hold the results of family r. kind is
 * kept, not copied (a string literal or a descriptor's name). 0; or -1
 * with e for AL_RESULTS_NONE or a family out of range, a NULL or empty
 * kind, or a family already given another kind (the same kind again is
 * fine). Not thread-safe: call it before any reader runs. */
int al_store_set_kind(al_store_results r, const char *kind, al_err *e);
/* The kind set for family r, or NULL if none is. */
const char *al_store_kind(al_store_results r);

/* ---- models ---- */

/* Optional facts about a model beyond its config (NaN / -1 = unknown). */
typedef struct al_model_facts {
    double trained_tokens;
    long train_steps;
    double final_train_loss, final_val_loss;
    double data_tokens; /* tokens in its training file (NAN: unknown) */
} al_model_facts;

/* The models row for checkpoint directory dir holding m: keyed by the
 * sha256 of dir/model.safetensors (computed here if sha256 is NULL, else
 * the 64 hex digits given); inserted if new, else its path and known
 * facts are updated. Facts are read from dir/state.json when it exists
 * (and facts is NULL). */
int al_store_model(al_store *s, const char *dir, const char *sha256, const al_model *m,
                   const al_model_facts *facts, int64_t *model_id, al_err *e);

/* ---- runs and transactions ---- */

/* Insert a run (status 'running') and commit it at once. model_id <= 0
 * means none yet (e.g. training before the first checkpoint). */
int al_store_run_begin(al_store *s, const char *kind, const char *config_json, int64_t model_id,
                       int64_t *run_id, al_err *e);
/* Attach a model to a run created without one. */
int al_store_run_set_model(al_store *s, int64_t run_id, int64_t model_id, al_err *e);
int al_store_tx_begin(al_store *s, al_err *e);
/* Commit the open transaction (rows visible; run still 'running'). */
int al_store_tx_commit(al_store *s, al_err *e);
/* Mark done and commit the open transaction (if any) in one step. */
int al_store_run_finish(al_store *s, int64_t run_id, al_err *e);
/* Roll back the open transaction (if any), then mark failed with msg. */
int al_store_run_fail(al_store *s, int64_t run_id, const char *msg, al_err *e);
/* Remove a run that is not done (running or failed) as if it had never
 * been begun: the open transaction (if any) rolled back, then, in one
 * transaction of its own, its rows in every table with a run_id column
 * and its runs row deleted (for a refusal after the run was begun, e.g.
 * --strict: nothing stored). −1 with e: no such run, a run already done
 * (refused: finished results are never deleted), a database error (then
 * nothing is deleted). */
int al_store_run_discard(al_store *s, int64_t run_id, al_err *e);

/* ---- warnings (schema version 8) ---- */

/* w's messages (gap.h) as run_warnings rows, seq 0..w->n−1 (w NULL or
 * empty: none). Inside the run's transaction, like the row writers. */
struct al_warnings;
int al_store_put_warnings(al_store *s, int64_t run_id, int64_t model_id,
                          const struct al_warnings *w, al_err *e);
/* A run's warnings in the order given: *msgs (n strings; NULL when none)
 * is the caller's, freed with al_store_strings_free. −1 with e (*msgs
 * NULL, *n 0) on a database error or out of memory. */
int al_store_run_warnings(al_store *s, int64_t run_id, char ***msgs, int *n, al_err *e);
void al_store_strings_free(char **v, int n);
/* One row of table views (schema version 9; store_views.h writes them):
 * metric of run is a generic view of shape "head", "model", "pair",
 * "edge" or "pos" (view.h). Inside the run's transaction. 0, or -1 with e. */
int al_store_put_view_row(al_store *s, int64_t run, int64_t mid, const char *metric,
                          const char *shape, const char *title, al_err *e);

/* ---- sweeps: tasks of an experiment sweep ---- */

/* Which task of a sweep made this database: the one sweep_task row. */
typedef struct al_sweep_task_row {
    const char *experiment; /* the experiment's name */
    int task, n_tasks; /* 0..n_tasks-1 */
    const char *setting; /* swept values but the seed, "train.lr=0.01 tied=1" ("" if none) */
    int has_seed; /* 0: the sweep does not vary the seed (seed NULL) */
    int64_t seed;
    const char *params_json; /* {"key.path": value, ...}: every swept value */
} al_sweep_task_row;
/* Write it (replacing any earlier row), committed at once; outside a
 * transaction. 0, or -1 with e. */
int al_store_put_sweep_task(al_store *s, const al_sweep_task_row *r, al_err *e);

/* ---- rows (call inside a transaction) ---- */

/* Long format: one metric per row. */
int al_store_put_head_score(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                            const char *metric, double value, al_err *e);
int al_store_put_layer_score(al_store *s, int64_t run_id, int64_t model_id, int layer,
                             const char *metric, double value, al_err *e);
int al_store_put_model_score(al_store *s, int64_t run_id, int64_t model_id, const char *metric,
                             double value, al_err *e);
/* The interval of one averaged number (score_intervals): layer, head and
 * pos -1 where they do not apply (a model-level number: all three); iv's
 * se, lo, hi (NaN: NULL), at level over n_items items and boot
 * resamples. */
struct al_interval;
int al_store_put_interval(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                          int pos, const char *metric, double value, const struct al_interval *iv,
                          double level, int n_items, int boot, al_err *e);
/* circuit: "qk" or "ov"; idx 0 = largest. */
int al_store_put_singular_value(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                                const char *circuit, int idx, double value, al_err *e);
/* circuit: "ov_full" (eigenvalues of full OV); idx 0 = largest |λ|. */
int al_store_put_eigenvalue(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                            const char *circuit, int idx, double re, double im, al_err *e);
/* Token strings are stored byte for byte (length given), NULL allowed. */
typedef struct al_trigram_row {
    int rank, a, b, c;
    const char *a_str, *b_str, *c_str;
    size_t a_len, b_len, c_len;
    double qk, ov, score;
} al_trigram_row;
int al_store_put_skip_trigram(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                              const al_trigram_row *t, al_err *e);
/* kind "Q", "K" or "V"; baseline = mean random score, baseline_sd its sd. */
int al_store_put_composition(al_store *s, int64_t run_id, int64_t model_id, const char *kind,
                             int l1, int h1, int l2, int h2, double score, double baseline,
                             double baseline_sd, al_err *e);
/* space "qk", "v" or "o". */
int al_store_put_head_overlap(al_store *s, int64_t run_id, int64_t model_id, int layer,
                              const char *space, int h1, int h2, double value, al_err *e);

/* Tables for behaviour (scores, ablation, pruning). NaN values are stored as NULL. */
typedef struct al_ablation_row {
    const char *method; /* zero | mean | resample */
    const char *kind; /* single | pair | set */
    const char *heads; /* "0.3,1.4" */
    int n_heads;
    double loss, delta_loss, delta_loss_copy, delta_loss_probe, interaction;
} al_ablation_row;
/* id (NULL: not wanted): the row's ablation_id, which keys its intervals
 * (score_intervals.pos) */
int al_store_put_ablation(al_store *s, int64_t run_id, int64_t model_id, const al_ablation_row *r,
                          int64_t *id, al_err *e);
typedef struct al_pruning_row {
    const char *method; /* ablation | gradient | random */
    int step, layer, head, heads_left;
    double importance, loss, delta_loss;
    const char *mask; /* heads still on, "0.1,0.2,..." */
} al_pruning_row;
int al_store_put_pruning_step(al_store *s, int64_t run_id, int64_t model_id,
                              const al_pruning_row *r, al_err *e);
/* Activation patching (schema version 3): one row per configuration.
 * head < 0 and pos < 0 are stored as NULL (resid has no head, head
 * spans every position); NaN value/metric as NULL. */
typedef struct al_patching_row {
    const char *task, *direction, *component;
    int layer, head, pos;
    double value, metric; /* normalised effect, M with the patch */
} al_patching_row;
int al_store_put_patching(al_store *s, int64_t run_id, int64_t model_id, const al_patching_row *r,
                          al_err *e);
/* Path patching: sender "embed", "pos" or "l.h"; channel "q", "k", "v"
 * or "direct" (receiver_layer, receiver_head < 0: NULL). */
typedef struct al_path_patching_row {
    const char *task, *direction, *sender;
    int receiver_layer, receiver_head;
    const char *channel;
    double value, metric;
} al_path_patching_row;
int al_store_put_path_patching(al_store *s, int64_t run_id, int64_t model_id,
                               const al_path_patching_row *r, al_err *e);
/* One row per patch or paths run: the unpatched metrics and the task's
 * size (component NULL for path patching). */
typedef struct al_patching_run_row {
    const char *task, *direction, *component;
    int n_pairs, seq_len;
    double m_clean, m_corr, seconds;
    const char *task_hash; /* 16 hex digits of al_pairs_hash */
} al_patching_run_row;
int al_store_put_patching_run(al_store *s, int64_t run_id, int64_t model_id,
                              const al_patching_run_row *r, al_err *e);
/* Attribution (schema version 4), one writer per table; NaN or a
 * non-finite number is stored as NULL, a negative optional int (pos,
 * layer, head, ...) as NULL, a NULL string as NULL. */
typedef struct al_attribution_run_row {
    const char *task;
    int n_pairs, seq_len, n_items;
    const char *metric_kind; /* "logprob" or "logit_diff" */
    double metric, loss;
    double kind_value[3], kind_dloss[3]; /* direct, head, virtual */
    const char *direction; /* NULL: no attribution patching */
    double m_clean, m_corr, seconds, seconds_attrpatch, seconds_patch;
    const char *task_hash; /* 16 hex digits of al_pairs_hash */
    int centred; /* 1: log-prob items against the mean logit (W_U centred) */
} al_attribution_run_row;
int al_store_put_attribution_run(al_store *s, int64_t run_id, int64_t model_id,
                                 const al_attribution_run_row *r, al_err *e);
int al_store_put_logit_attribution(al_store *s, int64_t run_id, int64_t model_id, const char *task,
                                   const char *component, int pos, double value, int n_items,
                                   al_err *e);
typedef struct al_path_term_row {
    const char *task, *term, *kind; /* kind "direct", "head" or "virtual" */
    int layer, head, src_head; /* < 0: NULL */
    double value, dloss;
} al_path_term_row;
int al_store_put_path_term(al_store *s, int64_t run_id, int64_t model_id, const al_path_term_row *r,
                           al_err *e);
int al_store_put_logit_lens(al_store *s, int64_t run_id, int64_t model_id, const char *task,
                            int layer, double loss, double accuracy, al_err *e);
typedef struct al_attribution_patching_row {
    const char *task, *direction, *grid;
    int layer, head, pos; /* head, head_pos; < 0: NULL */
    const char *sender; /* edge; NULL otherwise */
    int receiver_layer, receiver_head;
    const char *channel;
    double estimate, actual; /* actual NaN: not compared */
} al_attribution_patching_row;
int al_store_put_attribution_patching(al_store *s, int64_t run_id, int64_t model_id,
                                      const al_attribution_patching_row *r, al_err *e);
int al_store_put_attribution_agreement(al_store *s, int64_t run_id, int64_t model_id,
                                       const char *grid, int n, double pearson, double spearman,
                                       int top5, al_err *e);
/* text: len bytes (token bytes may hold NULs). */
int al_store_put_attribution_token(al_store *s, int64_t run_id, int pos, int token,
                                   const char *text, size_t len, al_err *e);
/* Circuit discovery (schema version 5): one circuit_runs row per circuit
 * of a run (tau NaN: NULL, for eap; recover NaN: NULL, for acdc), one
 * circuit_edges row per edge of the graph of each circuit. */
typedef struct al_circuit_run_row {
    const char *task, *method, *metric; /* method "acdc"|"eap", metric "kl"|"logit_diff" */
    double tau, recover;
    int n_edges, n_kept;
    double m_clean, m_corr, m_circuit, kl, faithfulness;
    int64_t evals; /* circuit evaluations */
    double seconds;
    const char *task_hash; /* 16 hex digits of al_pairs_hash */
} al_circuit_run_row;
int al_store_put_circuit_run(al_store *s, int64_t run_id, int64_t model_id,
                             const al_circuit_run_row *r, al_err *e);
typedef struct al_circuit_edge_row {
    const char *method;
    double tau; /* NaN: NULL (eap) */
    int edge; /* index in the head graph (discover.h) */
    const char *sender; /* "embed", "pos" or "L.H" */
    int receiver_layer, receiver_head; /* < 0: NULL (the logits) */
    const char *channel; /* "q", "k", "v" or "direct" */
    double score; /* NaN: NULL */
    int kept;
} al_circuit_edge_row;
int al_store_put_circuit_edge(al_store *s, int64_t run_id, int64_t model_id,
                              const al_circuit_edge_row *r, al_err *e);
/* Sparse autoencoders (schema version 13). One sae_runs row per `sae
 * train` run: the SAE's shape, its training and its evaluation (k < 0:
 * NULL, for standard; l1_coeff NaN: NULL, for topk; NaN metrics NULL). */
typedef struct al_sae_run_row {
    int layer;
    const char *site; /* "z" or "resid_pre" */
    const char *hook_name;
    int d_in, d_sae;
    const char *arch; /* "topk" or "standard" */
    int k;
    double l1_coeff;
    long steps;
    int batch;
    double activations; /* steps x batch */
    uint64_t seed;
    double scale;
    long eval_n;
    double l0, fve, mse, dead_frac, dense_frac, ce_clean, ce_sae, ce_zero, ce_recovered;
    double seconds, rate;
    const char *out_dir;
} al_sae_run_row;
int al_store_put_sae_run(al_store *s, int64_t run_id, int64_t model_id, const al_sae_run_row *r,
                         al_err *e);
/* One `sae features` run: its SAE and the text and probe it read. */
typedef struct al_sae_feature_run_row {
    const char *sae_dir, *hook_name;
    int layer, d_sae, n_live, windows, seq_len;
    long positions;
    int probe_r, probe_n;
    double seconds;
    int n_induction;
    double group_auroc;
} al_sae_feature_run_row;
int al_store_put_sae_feature_run(al_store *s, int64_t run_id, int64_t model_id,
                                 const al_sae_feature_run_row *r, al_err *e);
/* One live feature (top_layer/top_head < 0: NULL; NaN: NULL). */
typedef struct al_sae_feature_row {
    int feature;
    long fired;
    double density, mean_act, max_act, first_mean, second_mean, induction_index;
    int top_layer, top_head;
    double top_share;
    long first_fired, second_fired;
    double induction_p, auroc;
    int induction;
    int next_token; /* −1: NULL */
    const char *next_token_str; /* next_token_len bytes */
    size_t next_token_len;
    double next_share;
} al_sae_feature_row;
int al_store_put_sae_feature(al_store *s, int64_t run_id, int64_t model_id,
                             const al_sae_feature_row *r, al_err *e);
/* One head's ‖z‖ AUROC on a `sae features` run's induction probe. */
int al_store_put_sae_probe_head(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                                double auroc, al_err *e);
/* One top context of a feature (rank 1 = the largest); token_str: len bytes. */
int al_store_put_sae_feature_context(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                     int rank, int window, long offset, int pos, int token,
                                     const char *token_str, size_t len, double act, al_err *e);
/* One logit effect of a feature; direction "up" or "down". */
int al_store_put_sae_feature_logit(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                   const char *direction, int rank, int token,
                                   const char *token_str, size_t len, double value, al_err *e);
/* A feature's direct attribution to one head of its layer. */
int al_store_put_sae_feature_head(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                  int layer, int head, double contribution, double share,
                                  al_err *e);
/* One `sae features --task` run: the task and the estimates of the SAE's
 * error term and of the whole site (sae_task.h; NaN: NULL). */
typedef struct al_sae_task_run_row {
    const char *task, *direction;
    int n_pairs, n_items;
    double m_clean, m_corr;
    int n_moved;
    double error_effect, error_se, site_effect, site_se, level;
    int bootstrap;
} al_sae_task_run_row;
int al_store_put_sae_task_run(al_store *s, int64_t run_id, int64_t model_id,
                              const al_sae_task_run_row *r, al_err *e);
/* One feature's estimate on that task, with its interval over the pairs
 * and its mean code at the items' positions in each run. */
int al_store_put_sae_task_feature(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                  double effect, const struct al_interval *ci, double act_clean,
                                  double act_corr, al_err *e);

typedef struct al_train_log_row {
    long step;
    double tokens, train_loss, val_loss, icl_gain, lr, seconds;
    double val_loss_se, icl_gain_se; /* standard errors (NaN: NULL) */
} al_train_log_row;
int al_store_put_train_log(al_store *s, int64_t run_id, const al_train_log_row *r, al_err *e);
/* A resumed training run (run_id) takes over the curve of the run it
 * continues (from: the run recorded in the resumed checkpoint's
 * state.json): from's train_log and train_head_scores rows up to step
 * max_step are copied in one transaction, if from is an earlier 'train'
 * run of this file. *carried = 1 if they were. Not inside a transaction. */
int al_store_carry_train_log(al_store *s, int64_t run_id, int64_t from, long max_step, int *carried,
                             al_err *e);
int al_store_put_train_head_score(al_store *s, int64_t run_id, long step, int layer, int head,
                                  const char *metric, double value, al_err *e);

/* Run a read-only query with text parameters ?1..?n and call fn for
 * every row: text[i] is column i as text (NULL for SQL NULL), num[i] as a
 * number (NaN for NULL). fn returns 0 to go on, non-zero to stop with an
 * error (it fills e). At most AL_STORE_MAX_COLS columns. */
#define AL_STORE_MAX_COLS 32
typedef int (*al_store_row_fn)(void *ctx, int ncol, const char *const *text, const double *num,
                               al_err *e);
int al_store_query(al_store *s, const char *sql, const char *const *params, int n_params,
                   al_store_row_fn fn, void *ctx, al_err *e);

#endif
