/* store.c -- the SQLite results database; with merge.c (which reaches
 * the connection through store_internal.h) the only user of sqlite3.h.
 * See include/attnlab/store.h for the life of a run. Every value goes
 * through a bound parameter (token strings contain quotes and arbitrary
 * bytes), and every statement is prepared once per connection. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "attnlab/store.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/gap.h"
#include "attnlab/thresholds.h"
#include "store_internal.h"

/* ------------------------------------------------------------ schema */

/* Known per-head metrics, one column each in head_summary. Others are
 * stored all the same and can be read from head_scores. */
#define HEAD_METRICS_V1(X)                                                   \
    X(copying_eigen) X(copying_top1) X(copying_ablation) X(qk_rank)          \
    X(ov_rank) X(qk_effective_rank) X(ov_effective_rank) X(qk_stable_rank)   \
    X(ov_stable_rank) X(qk_fro) X(ov_fro) X(qk_top1_self) X(pos_prev_token)  \
    X(induction) X(duplicate_token) X(prev_token) X(gradient_importance)
/* Version 2 adds copying_ablation_excess (scores.h), version 15
 * induction_all. */
#define HEAD_METRICS_V2(X) HEAD_METRICS_V1(X) X(copying_ablation_excess)
#define HEAD_METRICS(X) HEAD_METRICS_V2(X) X(induction_all)

#define PIVOT(m) ",\n  MAX(CASE WHEN metric = '" #m "' THEN value END) AS " #m

/* Latest value of each metric per head from runs that finished; one
 * column per metric in the list. */
#define HEAD_SUMMARY(LIST)                                                    \
    "CREATE VIEW head_summary AS\n"                                           \
    "WITH latest AS (\n"                                                      \
    "  SELECT hs.model_id, hs.layer, hs.head, hs.metric, hs.value,\n"         \
    "         ROW_NUMBER() OVER (PARTITION BY hs.model_id, hs.layer, hs.head, hs.metric\n" \
    "                            ORDER BY hs.run_id DESC) AS rn\n"            \
    "  FROM head_scores hs JOIN runs r ON r.run_id = hs.run_id\n"             \
    "  WHERE r.status = 'done')\n"                                            \
    "SELECT model_id, layer, head, layer || '.' || head AS name"               \
    LIST(PIVOT)                                                               \
    "\nFROM latest WHERE rn = 1 GROUP BY model_id, layer, head;\n"

static const char schema_v1[] =
    "CREATE TABLE models(\n"
    "  model_id INTEGER PRIMARY KEY,\n"
    "  sha256 TEXT NOT NULL UNIQUE,      -- of model.safetensors\n"
    "  path TEXT,                        -- directory last seen at\n"
    "  n_layers INTEGER, d_model INTEGER, n_heads INTEGER, d_head INTEGER,\n"
    "  n_ctx INTEGER, d_vocab INTEGER, tied_embeddings INTEGER, seed INTEGER,\n"
    "  n_params INTEGER, trained_tokens REAL, train_steps INTEGER,\n"
    "  final_train_loss REAL, final_val_loss REAL,\n"
    "  added_at TEXT NOT NULL);\n"
    "CREATE TABLE runs(\n"
    "  run_id INTEGER PRIMARY KEY,\n"
    "  kind TEXT NOT NULL,               -- circuits, scores, ablate, prune, train\n"
    "  config_json TEXT,\n"
    "  model_id INTEGER REFERENCES models(model_id),\n"
    "  started_at TEXT NOT NULL, finished_at TEXT,\n"
    "  status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),\n"
    "  attnlab_version TEXT NOT NULL,\n"
    "  pid INTEGER, pid_start TEXT, host TEXT, error TEXT);\n"
    "CREATE TABLE head_scores(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL, head INTEGER NOT NULL,\n"
    "  metric TEXT NOT NULL, value REAL,\n"
    "  PRIMARY KEY (run_id, layer, head, metric));\n"
    "CREATE INDEX head_scores_by_model ON head_scores(model_id, layer, head, metric, run_id);\n"
    "CREATE TABLE layer_scores(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL, metric TEXT NOT NULL, value REAL,\n"
    "  PRIMARY KEY (run_id, layer, metric));\n"
    "CREATE TABLE model_scores(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  metric TEXT NOT NULL, value REAL,\n"
    "  PRIMARY KEY (run_id, metric));\n"
    "CREATE TABLE singular_values(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL, head INTEGER NOT NULL,\n"
    "  circuit TEXT NOT NULL CHECK (circuit IN ('qk', 'ov')),\n"
    "  idx INTEGER NOT NULL, value REAL,\n"
    "  PRIMARY KEY (run_id, layer, head, circuit, idx));\n"
    "CREATE TABLE eigenvalues(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL, head INTEGER NOT NULL,\n"
    "  circuit TEXT NOT NULL, idx INTEGER NOT NULL, re REAL, im REAL,\n"
    "  PRIMARY KEY (run_id, layer, head, circuit, idx));\n"
    "CREATE TABLE skip_trigrams(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL, head INTEGER NOT NULL, rank INTEGER NOT NULL,\n"
    "  a INTEGER NOT NULL, b INTEGER NOT NULL, c INTEGER NOT NULL,\n"
    "  a_str TEXT, b_str TEXT, c_str TEXT,\n"
    "  qk REAL, ov REAL, score REAL,\n"
    "  PRIMARY KEY (run_id, layer, head, rank));\n"
    "CREATE TABLE composition(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('Q', 'K', 'V')),\n"
    "  layer1 INTEGER NOT NULL, head1 INTEGER NOT NULL,\n"
    "  layer2 INTEGER NOT NULL, head2 INTEGER NOT NULL,\n"
    "  score REAL, baseline REAL, baseline_sd REAL,\n"
    "  PRIMARY KEY (run_id, kind, layer1, head1, layer2, head2));\n"
    "CREATE TABLE head_overlap(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL,\n"
    "  space TEXT NOT NULL CHECK (space IN ('qk', 'v', 'o')),\n"
    "  head1 INTEGER NOT NULL, head2 INTEGER NOT NULL, value REAL,\n"
    "  PRIMARY KEY (run_id, layer, space, head1, head2));\n"
    "CREATE TABLE ablations(\n"
    "  ablation_id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  method TEXT NOT NULL, kind TEXT NOT NULL, heads TEXT NOT NULL,\n"
    "  n_heads INTEGER NOT NULL, loss REAL, delta_loss REAL,\n"
    "  delta_loss_copy REAL, delta_loss_probe REAL, interaction REAL);\n"
    "CREATE INDEX ablations_by_run ON ablations(run_id, heads);\n"
    "CREATE TABLE pruning_steps(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  method TEXT NOT NULL, step INTEGER NOT NULL,\n"
    "  layer INTEGER, head INTEGER, heads_left INTEGER,\n"
    "  importance REAL, loss REAL, delta_loss REAL, mask TEXT,\n"
    "  PRIMARY KEY (run_id, step));\n"
    "CREATE TABLE train_log(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  step INTEGER NOT NULL, tokens REAL, train_loss REAL, val_loss REAL,\n"
    "  icl_gain REAL, lr REAL, seconds REAL,\n"
    "  PRIMARY KEY (run_id, step));\n"
    "CREATE TABLE train_head_scores(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  step INTEGER NOT NULL, layer INTEGER NOT NULL, head INTEGER NOT NULL,\n"
    "  metric TEXT NOT NULL, value REAL,\n"
    "  PRIMARY KEY (run_id, step, layer, head, metric));\n"
    HEAD_SUMMARY(HEAD_METRICS_V1)
    /* The newest finished run of each kind per model, to join on. */
    "CREATE VIEW latest_run AS\n"
    "SELECT model_id, kind, max(run_id) AS run_id FROM runs\n"
    "WHERE status = 'done' GROUP BY model_id, kind;\n";

/* A view only: files written by version 1 keep every row. */
static const char schema_v2[] = "DROP VIEW head_summary;\n" HEAD_SUMMARY(HEAD_METRICS_V2);

/* Version 3: activation patching and path patching (patch.h). One row
 * per configuration; head is NULL where a component has none (resid),
 * pos NULL where it spans every position (head); the direct path has no
 * receiver (NULL receiver_layer, receiver_head). patching_runs holds a
 * run's two unpatched metrics, the size of its task and a fingerprint of
 * its pairs (a picture checks it before labelling positions). */
static const char schema_v3[] =
    "CREATE TABLE patching(\n"
    "  patch_id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL,\n"
    "  direction TEXT NOT NULL CHECK (direction IN ('denoise', 'noise')),\n"
    "  component TEXT NOT NULL,\n"
    "  layer INTEGER NOT NULL, head INTEGER, pos INTEGER,\n"
    "  value REAL,                       -- normalised effect\n"
    "  metric REAL);                     -- M with the patch\n"
    "CREATE INDEX patching_by_run ON patching(run_id, layer, head, pos);\n"
    "CREATE TABLE path_patching(\n"
    "  path_id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL,\n"
    "  direction TEXT NOT NULL CHECK (direction IN ('denoise', 'noise')),\n"
    "  sender TEXT NOT NULL,             -- embed, pos or 0.h\n"
    "  receiver_layer INTEGER, receiver_head INTEGER,\n"
    "  channel TEXT NOT NULL CHECK (channel IN ('q', 'k', 'v', 'direct')),\n"
    "  value REAL, metric REAL);\n"
    "CREATE INDEX path_patching_by_run ON path_patching(run_id, channel, sender);\n"
    "CREATE TABLE patching_runs(\n"
    "  run_id INTEGER PRIMARY KEY REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL, direction TEXT NOT NULL,\n"
    "  component TEXT,                   -- NULL for path patching\n"
    "  n_pairs INTEGER NOT NULL, seq_len INTEGER NOT NULL,\n"
    "  m_clean REAL, m_corr REAL, seconds REAL,\n"
    "  task_hash TEXT);                  -- al_pairs_hash, 16 hex digits\n"
    "CREATE INDEX patching_runs_by_model ON patching_runs(model_id, run_id);\n";

/* Version 4: attribution (attribute.h, attrpatch.h). attribution_runs
 * holds what a run measured as a whole (the model's metric and loss on
 * the task's items, the per-kind totals of the path expansion, the two
 * unpatched metrics of attribution patching); logit_attribution one row
 * per component and position (pos NULL: the mean over every item);
 * path_terms one row per term of the exact path expansion; logit_lens
 * one row per residual stream read through W_U (layer l = the stream
 * entering layer l, l = n_layers the final one); attribution_patching
 * one row per configuration of each grid, the first-order estimate
 * beside actual patching's effect; attribution_agreement how well they
 * agree per grid; attribution_tokens the first pair's clean tokens, to
 * label positions. */
static const char schema_v4[] =
    "CREATE TABLE attribution_runs(\n"
    "  run_id INTEGER PRIMARY KEY REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL,               -- induction, names, file, data or prompt\n"
    "  n_pairs INTEGER NOT NULL, seq_len INTEGER NOT NULL, n_items INTEGER NOT NULL,\n"
    "  metric_kind TEXT NOT NULL CHECK (metric_kind IN ('logprob', 'logit_diff')),\n"
    "  metric REAL,                      -- mean metric logit: correct logit or logit difference\n"
    "  loss REAL,                        -- mean item loss -log p(answer)\n"
    "  direct_value REAL, head_value REAL, virtual_value REAL,  -- Σ of each kind's terms\n"
    "  direct_dloss REAL, head_dloss REAL, virtual_dloss REAL,  -- Δloss, the kind removed\n"
    "  direction TEXT CHECK (direction IN ('denoise', 'noise')),  -- NULL: no attribution patching\n"
    "  m_clean REAL, m_corr REAL,\n"
    "  seconds REAL,                     -- the attribution analyses\n"
    "  seconds_attrpatch REAL, seconds_patch REAL,\n"
    "  task_hash TEXT);\n"
    "CREATE INDEX attribution_runs_by_model ON attribution_runs(model_id, run_id);\n"
    "CREATE TABLE logit_attribution(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL,\n"
    "  component TEXT NOT NULL,          -- embed, pos or L.H (as head_summary.name)\n"
    "  pos INTEGER,                      -- NULL: the mean over every item\n"
    "  value REAL,                       -- mean contribution to the metric logit\n"
    "  n_items INTEGER);\n"
    "CREATE INDEX logit_attribution_by_run ON logit_attribution(run_id, component, pos);\n"
    "CREATE TABLE path_terms(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL,\n"
    "  term TEXT NOT NULL,               -- direct, 0.h, 1.h or 0.h0>1.h1\n"
    "  kind TEXT NOT NULL CHECK (kind IN ('direct', 'head', 'virtual')),\n"
    "  layer INTEGER, head INTEGER,      -- the term's head (virtual: the layer-1 head)\n"
    "  src_head INTEGER,                 -- virtual: the layer-0 head\n"
    "  value REAL,                       -- mean contribution to the metric logit\n"
    "  dloss REAL,                       -- Δ mean item loss with this term removed\n"
    "  PRIMARY KEY (run_id, term));\n"
    "CREATE TABLE logit_lens(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL,\n"
    "  layer INTEGER NOT NULL,           -- the stream entering layer l; n_layers: the final\n"
    "  loss REAL, accuracy REAL,\n"
    "  PRIMARY KEY (run_id, layer));\n"
    "CREATE TABLE attribution_patching(\n"
    "  ap_id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL,\n"
    "  direction TEXT NOT NULL CHECK (direction IN ('denoise', 'noise')),\n"
    "  grid TEXT NOT NULL CHECK (grid IN ('head', 'head_pos', 'edge')),\n"
    "  layer INTEGER, head INTEGER, pos INTEGER,  -- head, head_pos\n"
    "  sender TEXT, receiver_layer INTEGER, receiver_head INTEGER,  -- edge (as path_patching)\n"
    "  channel TEXT CHECK (channel IN ('q', 'k', 'v', 'direct')),\n"
    "  estimate REAL,                    -- first-order, normalised as patching.value\n"
    "  actual REAL);                     -- actual patching's value; NULL if not compared\n"
    "CREATE INDEX attribution_patching_by_run ON attribution_patching(run_id, grid);\n"
    "CREATE TABLE attribution_agreement(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  grid TEXT NOT NULL CHECK (grid IN ('head', 'head_pos', 'edge')),\n"
    "  n INTEGER NOT NULL, pearson REAL, spearman REAL,\n"
    "  top5 INTEGER,                     -- of the 5 largest |value| on each side, how many shared\n"
    "  PRIMARY KEY (run_id, grid));\n"
    "CREATE TABLE attribution_tokens(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  pos INTEGER NOT NULL, token INTEGER NOT NULL, text TEXT,\n"
    "  PRIMARY KEY (run_id, pos));\n";

/* Version 5: circuit discovery (discover.h). circuit_runs holds one row
 * per circuit a run found: ACDC at each tau of the run (one, or a sweep),
 * or EAP's (tau NULL); circuit_edges every edge of the head graph for
 * each of them, with its score and whether the circuit keeps it. */
static const char schema_v5[] =
    "CREATE TABLE circuit_runs(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL,\n"
    "  method TEXT NOT NULL CHECK (method IN ('acdc', 'eap')),\n"
    "  metric TEXT NOT NULL CHECK (metric IN ('kl', 'logit_diff')),\n"
    "  tau REAL,                         -- acdc's threshold; NULL for eap\n"
    "  recover REAL,                     -- eap's target faithfulness; NULL for acdc\n"
    "  n_edges INTEGER NOT NULL,         -- edges of the whole graph\n"
    "  n_kept INTEGER NOT NULL,          -- edges in the circuit\n"
    "  m_clean REAL, m_corr REAL,        -- the task's metric, unpatched runs\n"
    "  m_circuit REAL,                   -- the task's metric, the circuit run\n"
    "  kl REAL,                          -- mean KL(clean || circuit) at the items\n"
    "  faithfulness REAL,                -- (m_circuit - m_corr) / (m_clean - m_corr)\n"
    "  evals INTEGER, seconds REAL,\n"
    "  task_hash TEXT,\n"
    "  PRIMARY KEY (run_id, method, tau));\n"
    "CREATE INDEX circuit_runs_by_model ON circuit_runs(model_id, run_id);\n"
    "CREATE TABLE circuit_edges(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  method TEXT NOT NULL, tau REAL,   -- which circuit of the run (as circuit_runs)\n"
    "  edge INTEGER NOT NULL,            -- index in the head graph (discover.h)\n"
    "  sender TEXT NOT NULL,             -- embed, pos or L.H\n"
    "  receiver_layer INTEGER, receiver_head INTEGER,  -- NULL: the logits\n"
    "  channel TEXT NOT NULL CHECK (channel IN ('q', 'k', 'v', 'direct')),\n"
    "  score REAL,                       -- acdc: loss growth when tried; eap: |estimate|\n"
    "  kept INTEGER NOT NULL CHECK (kept IN (0, 1)));\n"
    "CREATE INDEX circuit_edges_by_run ON circuit_edges(run_id, method, tau, edge);\n";

/* v6: sweeps and merging (db merge, sweep tasks). A run's uid identifies it across
 * databases, so merging the same input twice adds nothing; a merged run
 * names the database it came from (merge_sources); a database made by one
 * task of a sweep says which (sweep_task, one row). */
static const char schema_v6[] =
    "ALTER TABLE runs ADD COLUMN uid TEXT;  -- 32 hex digits, random at begin\n"
    "UPDATE runs SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL;\n"
    "CREATE UNIQUE INDEX runs_by_uid ON runs(uid);\n"
    "CREATE TABLE merge_sources(\n"
    "  source_id INTEGER PRIMARY KEY,\n"
    "  path TEXT NOT NULL,                -- the input database as given\n"
    "  merged_at TEXT NOT NULL,\n"
    "  experiment TEXT, task INTEGER, n_tasks INTEGER,  -- its sweep_task row, if any\n"
    "  setting TEXT, seed INTEGER, params_json TEXT);\n"
    "ALTER TABLE runs ADD COLUMN source_id INTEGER;  -- merge_sources.source_id; NULL: run here\n"
    "CREATE TABLE sweep_task(\n"
    "  one INTEGER PRIMARY KEY CHECK (one = 1),\n"
    "  experiment TEXT NOT NULL,          -- the experiment's name\n"
    "  task INTEGER NOT NULL, n_tasks INTEGER NOT NULL,\n"
    "  setting TEXT NOT NULL,             -- the swept values other than the seed, e.g. train.lr=0.01\n"
    "  seed INTEGER,                      -- the swept seed, NULL if the sweep has none\n"
    "  params_json TEXT NOT NULL);        -- every swept key path and its value\n";

/* v7: findings across seeds of a sweep, views only. sweep_models puts each
 * model with a finished run in its group: the setting and seed of the
 * merge_sources row of its newest finished run that came from a merge
 * (train runs first, since training is what a seed changes), else this
 * database's own sweep_task setting (else '') and models.seed.
 * sweep_findings holds one row per such model, each number from the
 * newest finished run of its kind (latest_run; pair ablations: the newest
 * finished run that has pair rows, since a later --each run has none):
 *   best_induction      max over heads of head_scores 'induction' (scores)
 *   has_curve           1 if its train run has 'induction' train_head_scores
 *   first_step          the first step any head's induction > AL_TH_INDUCTION
 *                       (NULL: never, or no curve)
 *   kcomp_match         1 if the K-composition pair of the largest score
 *                       (ties: lowest layer1, head1, layer2, head2) is the
 *                       pair ablation of the largest |interaction| (ties:
 *                       lowest ablation_id); NULL without both
 *   copying_agreement   share of heads (head_summary, both scores non-NULL)
 *                       whose copying_eigen > AL_TH_COPY_EIGEN and
 *                       copying_ablation > AL_TH_COPY_ABLATION agree, as
 *                       the report counts it; NULL without such heads
 * sweep_summary aggregates them per (setting, n_layers); sd is the sample
 * sd (n - 1), NULL for fewer than two values. */
#define TH_IND AL_TH_STR(AL_TH_INDUCTION)
static const char schema_v7[] =
    "CREATE VIEW sweep_models AS\n"
    "WITH src AS (\n"
    "  SELECT model_id, source_id, ROW_NUMBER() OVER (PARTITION BY model_id\n"
    "           ORDER BY kind = 'train' DESC, run_id DESC) AS rn\n"
    "  FROM runs WHERE status = 'done' AND model_id IS NOT NULL AND source_id IS NOT NULL)\n"
    "SELECT m.model_id, m.n_layers,\n"
    "       coalesce(ms.setting, (SELECT setting FROM sweep_task), '') AS setting,\n"
    "       coalesce(ms.seed, m.seed) AS seed, ms.source_id\n"
    "FROM models m\n"
    "LEFT JOIN src ON src.model_id = m.model_id AND src.rn = 1\n"
    "LEFT JOIN merge_sources ms ON ms.source_id = src.source_id\n"
    "WHERE EXISTS (SELECT 1 FROM runs r WHERE r.model_id = m.model_id AND r.status = 'done');\n"
    "CREATE VIEW sweep_findings AS\n"
    "SELECT sm.model_id, sm.setting, sm.seed, sm.n_layers, fin.best_induction,\n"
    "       cur.model_id IS NOT NULL AS has_curve, cur.first_step, kc.kcomp_match,\n"
    "       cp.copying_agreement\n"
    "FROM sweep_models sm\n"
    "LEFT JOIN (SELECT hs.model_id, max(hs.value) AS best_induction\n"
    "           FROM head_scores hs JOIN latest_run lr ON lr.run_id = hs.run_id AND lr.kind = 'scores'\n"
    "           WHERE hs.metric = 'induction' GROUP BY hs.model_id) fin\n"
    "  ON fin.model_id = sm.model_id\n"
    "LEFT JOIN (SELECT lr.model_id, min(CASE WHEN t.value > " TH_IND " THEN t.step END) AS first_step\n"
    "           FROM train_head_scores t JOIN latest_run lr ON lr.run_id = t.run_id AND lr.kind = 'train'\n"
    "           WHERE t.metric = 'induction' GROUP BY lr.model_id) cur\n"
    "  ON cur.model_id = sm.model_id\n"
    "LEFT JOIN (SELECT k.model_id, k.pair = i.pair AS kcomp_match\n"
    "           FROM (SELECT c.model_id,\n"
    "                        c.layer1 || '.' || c.head1 || ',' || c.layer2 || '.' || c.head2 AS pair,\n"
    "                        ROW_NUMBER() OVER (PARTITION BY c.model_id ORDER BY c.score DESC,\n"
    "                          c.layer1, c.head1, c.layer2, c.head2) AS rn\n"
    "                 FROM composition c\n"
    "                 JOIN latest_run lr ON lr.run_id = c.run_id AND lr.kind = 'circuits'\n"
    "                 WHERE c.kind = 'K' AND c.score IS NOT NULL) k\n"
    "           JOIN (SELECT a.model_id, a.heads AS pair, ROW_NUMBER() OVER (PARTITION BY a.model_id\n"
    "                          ORDER BY abs(a.interaction) DESC, a.ablation_id) AS rn\n"
    "                 FROM (SELECT x.model_id, max(x.run_id) AS run_id FROM ablations x\n"
    "                       JOIN runs r ON r.run_id = x.run_id AND r.status = 'done'\n"
    "                       WHERE x.kind = 'pair' GROUP BY x.model_id) pr\n"
    "                 JOIN ablations a ON a.run_id = pr.run_id\n"
    "                 WHERE a.kind = 'pair' AND a.interaction IS NOT NULL) i\n"
    "             ON i.model_id = k.model_id AND i.rn = 1\n"
    "           WHERE k.rn = 1) kc\n"
    "  ON kc.model_id = sm.model_id\n"
    "LEFT JOIN (SELECT model_id, avg((copying_eigen > " AL_TH_STR(AL_TH_COPY_EIGEN) ") =\n"
    "                               (copying_ablation > " AL_TH_STR(AL_TH_COPY_ABLATION) ")) AS copying_agreement\n"
    "           FROM head_summary\n"
    "           WHERE copying_eigen IS NOT NULL AND copying_ablation IS NOT NULL\n"
    "           GROUP BY model_id) cp\n"
    "  ON cp.model_id = sm.model_id;\n"
    "CREATE VIEW sweep_summary AS\n"
    "SELECT setting, n_layers,\n"
    "  count(DISTINCT seed) AS n_seeds,\n"
    "  count(*) AS n_models,\n"
    "  count(best_induction) AS n_scored,\n"
    "  avg(best_induction > " TH_IND ") AS share_with_induction_head,\n"
    "  sum(has_curve) AS n_curves,\n"
    "  sum(has_curve AND first_step IS NULL) AS n_never_crossed,\n"
    "  avg(first_step) AS first_step_mean,\n"
    "  sqrt(sum((first_step - fs_mean) * (first_step - fs_mean)) / (count(first_step) - 1))\n"
    "    AS first_step_sd,\n"
    "  min(first_step) AS first_step_min, max(first_step) AS first_step_max,\n"
    "  avg(best_induction) AS best_induction_mean,\n"
    "  min(best_induction) AS best_induction_min, max(best_induction) AS best_induction_max,\n"
    "  count(kcomp_match) AS n_kcomp,\n"
    "  avg(kcomp_match) AS kcomp_matches_interaction,\n"
    "  count(copying_agreement) AS n_copying,\n"
    "  avg(copying_agreement) AS copying_agreement\n"
    "FROM (SELECT *, avg(first_step) OVER (PARTITION BY setting, n_layers) AS fs_mean\n"
    "      FROM sweep_findings)\n"
    "GROUP BY setting, n_layers ORDER BY setting, n_layers;\n";
#undef TH_IND

/* v8: the gap check's warnings (gap.h), one row per warning a
 * run gave, seq 0.. in the order it gave them. IF NOT EXISTS: a file
 * turned back into an older version by dropping only that version's
 * objects (as tests do) still migrates. */
static const char schema_v8[] =
    "CREATE TABLE IF NOT EXISTS run_warnings(\n"
    "  warning_id INTEGER PRIMARY KEY,\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  seq INTEGER NOT NULL,\n"
    "  message TEXT NOT NULL);             -- without the 'attnlab: warning: ' prefix\n"
    "CREATE INDEX IF NOT EXISTS run_warnings_by_run ON run_warnings(run_id, seq);\n";

/* v9: generic result shapes (view.h): which metrics of a run are views,
 * with their title and shape, so the report and the pictures find a new
 * analysis's results without code of their own. */
static const char schema_v9[] =
    "CREATE TABLE IF NOT EXISTS views(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  metric TEXT NOT NULL,               -- head_scores.metric or model_scores.metric\n"
    "  shape TEXT NOT NULL,                -- 'head' or 'model'\n"
    "  title TEXT NOT NULL,\n"
    "  PRIMARY KEY (run_id, metric));\n";

/* v10: the cells of the generic shapes beyond head and model (view.h):
 * per-head-pair, per-edge and per-position views, one row per value with
 * its labels, so a new analysis of these shapes needs no table of its
 * own. row/col: pair, sender and receiver head (l*H + h, labels "l.h";
 * only cells with a value are stored); edge, the edge's index and 0
 * (labels sender and receiver); pos, the position and 0 (no labels). The
 * primary key's index serves the reads by (run_id, metric). */
static const char schema_v10[] =
    "CREATE TABLE IF NOT EXISTS view_cells(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  metric TEXT NOT NULL,               -- views.metric, shape 'pair', 'edge' or 'pos'\n"
    "  row INTEGER NOT NULL, col INTEGER NOT NULL,\n"
    "  row_label TEXT, col_label TEXT,\n"
    "  value REAL,\n"
    "  PRIMARY KEY (run_id, metric, row, col));\n";

/* v11: the size of a model's training data, so passes over it
 * (trained_tokens / data_tokens) can be read beside the tokens seen; and
 * whether a run's direct logit attribution was measured against the mean
 * logit (attribute --center-unembed), whose numbers differ from the raw
 * ones by the shift every logit shares. */
static const char schema_v11[] =
    "ALTER TABLE models ADD COLUMN data_tokens REAL; -- tokens in its training file\n"
    "ALTER TABLE attribution_runs ADD COLUMN centred INTEGER NOT NULL DEFAULT 0;\n";

/* v12: the main circuit of each discover run, one query away: the edges
 * the run's own circuit keeps (ACDC at the run's --tau, the one its
 * circuit file holds, not the sweep's other taus; or EAP's). Without it
 * "which edges did ACDC keep" needed a json_extract on the run's config. */
static const char schema_v12[] =
    "CREATE VIEW IF NOT EXISTS circuit_main AS\n"
    "  SELECT e.run_id, e.model_id, e.method, e.tau, e.edge, e.sender, e.receiver_layer,\n"
    "         e.receiver_head, e.channel, e.score\n"
    "  FROM circuit_edges e JOIN runs r ON r.run_id = e.run_id\n"
    "  WHERE e.kept = 1 AND (e.method = 'eap' OR (json_valid(r.config_json) AND\n"
    "        abs(e.tau - json_extract(r.config_json, '$.tau')) <= 1e-9 * abs(e.tau)));\n";

/* v13: sparse autoencoders. sae_runs: one row per `sae train` run, the
 * SAE's shape and training and its evaluation (sae_train.h). The feature
 * tables: one `sae features` run's SAE (sae_feature_runs) and, per live
 * feature, its numbers (sae_features), top contexts, logit effects and
 * direct feature attribution by head (sae_features.h). Two views make the
 * common questions one query: sae_head_features (the features whose DFA
 * share to a head is at least 0.5) and sae_induction_features (an
 * induction index of at least 0.8 on the probe). */
static const char schema_v13[] =
    "CREATE TABLE IF NOT EXISTS sae_runs(\n"
    "  run_id INTEGER PRIMARY KEY REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL,\n"
    "  site TEXT NOT NULL CHECK (site IN ('z', 'resid_pre')),\n"
    "  hook_name TEXT NOT NULL,            -- blocks.L.attn.hook_z or blocks.L.hook_resid_pre\n"
    "  d_in INTEGER NOT NULL, d_sae INTEGER NOT NULL,\n"
    "  arch TEXT NOT NULL CHECK (arch IN ('topk', 'standard')),\n"
    "  k INTEGER,                          -- topk; NULL for standard (L1)\n"
    "  l1_coeff REAL,                      -- standard; NULL for topk\n"
    "  steps INTEGER NOT NULL, batch INTEGER NOT NULL,\n"
    "  activations REAL NOT NULL,          -- steps x batch\n"
    "  seed INTEGER NOT NULL,\n"
    "  scale REAL,                         -- norm_scaling_factor\n"
    "  eval_n INTEGER,                     -- held-out activations evaluated\n"
    "  l0 REAL, fve REAL, mse REAL, dead_frac REAL, dense_frac REAL,\n"
    "  ce_clean REAL, ce_sae REAL, ce_zero REAL, ce_recovered REAL,\n"
    "  seconds REAL, rate REAL,            -- training wall time; activations per second\n"
    "  out_dir TEXT NOT NULL);\n"
    "CREATE INDEX IF NOT EXISTS sae_runs_by_model ON sae_runs(model_id, layer);\n"
    "CREATE TABLE IF NOT EXISTS sae_feature_runs(\n"
    "  run_id INTEGER PRIMARY KEY REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  sae_dir TEXT NOT NULL, hook_name TEXT NOT NULL, layer INTEGER NOT NULL,\n"
    "  d_sae INTEGER NOT NULL, n_live INTEGER NOT NULL,\n"
    "  windows INTEGER NOT NULL, seq_len INTEGER NOT NULL, positions INTEGER NOT NULL,\n"
    "  probe_r INTEGER NOT NULL, probe_n INTEGER NOT NULL, seconds REAL);\n"
    "CREATE TABLE IF NOT EXISTS sae_features(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  feature INTEGER NOT NULL,\n"
    "  fired INTEGER NOT NULL,             -- text positions with f > 0\n"
    "  density REAL NOT NULL, mean_act REAL, max_act REAL,\n"
    "  first_mean REAL, second_mean REAL,  -- mean f on the probe's 1st / 2nd occurrence\n"
    "  induction_index REAL,               -- second / (first + second); NULL: silent on it\n"
    "  top_layer INTEGER, top_head INTEGER, top_share REAL,  -- the head of the largest DFA share\n"
    "  PRIMARY KEY (run_id, feature));\n"
    "CREATE TABLE IF NOT EXISTS sae_feature_contexts(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  feature INTEGER NOT NULL, rank INTEGER NOT NULL,  -- rank 1: the largest activation\n"
    "  window INTEGER NOT NULL, offset INTEGER NOT NULL, -- the window; its first token's index\n"
    "  pos INTEGER NOT NULL, token INTEGER NOT NULL, token_str TEXT,\n"
    "  activation REAL NOT NULL,\n"
    "  PRIMARY KEY (run_id, feature, rank));\n"
    "CREATE TABLE IF NOT EXISTS sae_feature_logits(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  feature INTEGER NOT NULL,\n"
    "  direction TEXT NOT NULL CHECK (direction IN ('up', 'down')),\n"
    "  rank INTEGER NOT NULL, token INTEGER NOT NULL, token_str TEXT,\n"
    "  value REAL NOT NULL,                -- logit change per unit of activation\n"
    "  PRIMARY KEY (run_id, feature, direction, rank));\n"
    "CREATE TABLE IF NOT EXISTS sae_feature_heads(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  feature INTEGER NOT NULL, layer INTEGER NOT NULL, head INTEGER NOT NULL,\n"
    "  contribution REAL,                  -- mean pre-activation term of the head's z slice\n"
    "  share REAL,                         -- contribution / the sum over heads\n"
    "  PRIMARY KEY (run_id, feature, head));\n"
    "CREATE VIEW IF NOT EXISTS sae_head_features AS\n"
    "  SELECT h.run_id, h.model_id, h.layer, h.head, h.layer || '.' || h.head AS name,\n"
    "         h.feature, h.share, f.density, f.mean_act, f.induction_index\n"
    "  FROM sae_feature_heads h JOIN sae_features f\n"
    "       ON f.run_id = h.run_id AND f.feature = h.feature\n"
    "  WHERE h.share >= 0.5;\n"
    "CREATE VIEW IF NOT EXISTS sae_induction_features AS\n"
    "  SELECT f.run_id, f.model_id, f.feature, f.induction_index, f.first_mean, f.second_mean,\n"
    "         f.density, f.top_layer, f.top_head, f.top_share\n"
    "  FROM sae_features f WHERE f.induction_index >= 0.8;\n";

/* v14: an induction feature by counts, not by the mean ratio alone. A
 * feature that fires twice on the probe, both times on the second
 * occurrence, has an induction index of 1; the firing counts on each
 * occurrence and their binomial tail (sae_features.h) tell such a fluke
 * from a feature that fires only where its token is due. The AUROC of
 * each feature and of each head's ‖z‖ (sae_probe_heads) between the two
 * occurrences put features and heads on one scale. */
static const char schema_v14[] =
    "ALTER TABLE sae_feature_runs ADD COLUMN n_induction INTEGER;\n"
    "ALTER TABLE sae_feature_runs ADD COLUMN group_auroc REAL;  -- induction features summed\n"
    "ALTER TABLE sae_features ADD COLUMN first_fired INTEGER;   -- probe firings, 1st occurrence\n"
    "ALTER TABLE sae_features ADD COLUMN second_fired INTEGER;  -- and on the 2nd\n"
    "ALTER TABLE sae_features ADD COLUMN induction_p REAL;      -- P(Bin(n1+n2, 1/2) >= n2)\n"
    "ALTER TABLE sae_features ADD COLUMN auroc REAL;            -- 2nd vs 1st occurrence\n"
    "ALTER TABLE sae_features ADD COLUMN induction INTEGER;     -- 1: an induction feature\n"
    "ALTER TABLE sae_features ADD COLUMN next_token INTEGER;    -- most often due at its 2nd-\n"
    "ALTER TABLE sae_features ADD COLUMN next_token_str TEXT;   -- occurrence firings\n"
    "ALTER TABLE sae_features ADD COLUMN next_share REAL;       -- that token's share of them\n"
    "CREATE TABLE IF NOT EXISTS sae_probe_heads(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL, head INTEGER NOT NULL,\n"
    "  auroc REAL,                         -- of the head's z norm, 2nd vs 1st occurrence\n"
    "  PRIMARY KEY (run_id, head));\n"
    "DROP VIEW IF EXISTS sae_induction_features;\n"
    "CREATE VIEW sae_induction_features AS\n"
    "  SELECT f.run_id, f.model_id, f.feature, f.induction_index, f.first_fired,\n"
    "         f.second_fired, f.induction_p, f.auroc, f.next_token, f.next_token_str,\n"
    "         f.next_share, f.first_mean, f.second_mean,\n"
    "         f.density, f.top_layer, f.top_head, f.top_share\n"
    "  FROM sae_features f WHERE f.induction = 1;\n";

/* v15: head_summary gains induction_all, the all-occurrences induction
 * score (scores.h), a column beside induction. A view only: every row
 * is kept; the views that read head_summary read it by name, so they
 * need no rebuilding. */
static const char schema_v15[] =
    "DROP VIEW IF EXISTS head_summary;\n" HEAD_SUMMARY(HEAD_METRICS);

/* migrations[i] takes user_version i to i+1. */
static const char *const migrations[] = {schema_v1, schema_v2, schema_v3, schema_v4, schema_v5,
                                               schema_v6, schema_v7, schema_v8, schema_v9,
                                               schema_v10, schema_v11, schema_v12, schema_v13,
                                               schema_v14, schema_v15};
#define N_MIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(N_MIGRATIONS == AL_STORE_SCHEMA_VERSION, "one migration per version");

/* --------------------------------------------------------- statements */

enum {
    S_HEAD_SCORE, S_LAYER_SCORE, S_MODEL_SCORE, S_SV, S_EIG, S_TRI, S_COMP,
    S_OVERLAP, S_ABL, S_PRUNE, S_TLOG, S_THS, S_PATCH, S_PATH, S_PATCH_RUN,
    S_ATTR_RUN, S_LOGIT_ATTR, S_PATH_TERM, S_LENS, S_AP, S_AP_AGREE, S_ATTR_TOK, S_CIRC_RUN,
    S_CIRC_EDGE, S_WARN, S_VIEW, S_SAE_RUN, S_SAE_FRUN, S_SAE_FEAT, S_SAE_CTX, S_SAE_LOGIT,
    S_SAE_HEAD, S_SAE_PHEAD, S_N
};
static const char *const stmt_sql[S_N] = {
    [S_HEAD_SCORE] = "INSERT OR REPLACE INTO head_scores VALUES(?,?,?,?,?,?)",
    [S_LAYER_SCORE] = "INSERT OR REPLACE INTO layer_scores VALUES(?,?,?,?,?)",
    [S_MODEL_SCORE] = "INSERT OR REPLACE INTO model_scores VALUES(?,?,?,?)",
    [S_SV] = "INSERT OR REPLACE INTO singular_values VALUES(?,?,?,?,?,?,?)",
    [S_EIG] = "INSERT OR REPLACE INTO eigenvalues VALUES(?,?,?,?,?,?,?,?)",
    [S_TRI] = "INSERT OR REPLACE INTO skip_trigrams "
              "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_COMP] = "INSERT OR REPLACE INTO composition VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_OVERLAP] = "INSERT OR REPLACE INTO head_overlap VALUES(?,?,?,?,?,?,?)",
    [S_ABL] = "INSERT INTO ablations(run_id, model_id, method, kind, heads, "
              "n_heads, loss, delta_loss, delta_loss_copy, delta_loss_probe, "
              "interaction) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_PRUNE] = "INSERT OR REPLACE INTO pruning_steps VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_TLOG] = "INSERT OR REPLACE INTO train_log VALUES(?,?,?,?,?,?,?,?)",
    [S_THS] = "INSERT OR REPLACE INTO train_head_scores VALUES(?,?,?,?,?,?)",
    [S_PATCH] = "INSERT INTO patching(run_id, model_id, task, direction, component, layer, "
                "head, pos, value, metric) VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_PATH] = "INSERT INTO path_patching(run_id, model_id, task, direction, sender, "
               "receiver_layer, receiver_head, channel, value, metric) "
               "VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_PATCH_RUN] = "INSERT OR REPLACE INTO patching_runs VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_ATTR_RUN] = "INSERT OR REPLACE INTO attribution_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                   "?,?,?,?,?,?,?,?)",
    [S_LOGIT_ATTR] = "INSERT INTO logit_attribution VALUES(?,?,?,?,?,?,?)",
    [S_PATH_TERM] = "INSERT OR REPLACE INTO path_terms VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_LENS] = "INSERT OR REPLACE INTO logit_lens VALUES(?,?,?,?,?,?)",
    [S_AP] = "INSERT INTO attribution_patching(run_id, model_id, task, direction, grid, layer, "
             "head, pos, sender, receiver_layer, receiver_head, channel, estimate, actual) "
             "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_AP_AGREE] = "INSERT OR REPLACE INTO attribution_agreement VALUES(?,?,?,?,?,?,?)",
    [S_ATTR_TOK] = "INSERT OR REPLACE INTO attribution_tokens VALUES(?,?,?,?)",
    [S_CIRC_RUN] = "INSERT INTO circuit_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_CIRC_EDGE] = "INSERT INTO circuit_edges VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_WARN] = "INSERT INTO run_warnings(run_id, model_id, seq, message) VALUES(?,?,?,?)",
    [S_VIEW] = "INSERT OR REPLACE INTO views(run_id, model_id, metric, shape, title) "
               "VALUES(?,?,?,?,?)",
    [S_SAE_RUN] = "INSERT INTO sae_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                  "?,?,?,?)",
    [S_SAE_FRUN] = "INSERT INTO sae_feature_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_SAE_FEAT] = "INSERT INTO sae_features VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_SAE_CTX] = "INSERT INTO sae_feature_contexts VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_SAE_LOGIT] = "INSERT INTO sae_feature_logits VALUES(?,?,?,?,?,?,?,?)",
    [S_SAE_HEAD] = "INSERT INTO sae_feature_heads VALUES(?,?,?,?,?,?,?)",
    [S_SAE_PHEAD] = "INSERT INTO sae_probe_heads VALUES(?,?,?,?,?)",
};

struct al_store {
    sqlite3 *db;
    sqlite3_stmt *st[S_N];
    int in_tx;
    char path[AL_PATH_MAX];
};

const char *al_store_path(const al_store *s) { return s->path; }

sqlite3 *al_store_sqlite(al_store *s) { return s->db; }

/* How long a writer waits for another process's transaction. */
#define AL_STORE_BUSY_MS 60000

static int db_err(al_store *s, al_err *e, const char *what) {
    return al_errf(e, "database %s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static int exec(al_store *s, const char *sql, al_err *e) {
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        al_errf(e, "database %s: %s", s->path, msg ? msg : sqlite3_errmsg(s->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int prepare(al_store *s, const char *sql, sqlite3_stmt **st, al_err *e) {
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return db_err(s, e, "cannot prepare statement");
    return 0;
}

/* The cached statement for id, reset and cleared. */
static sqlite3_stmt *stmt(al_store *s, int id, al_err *e) {
    if (!s->st[id] && prepare(s, stmt_sql[id], &s->st[id], e)) return NULL;
    sqlite3_reset(s->st[id]);
    sqlite3_clear_bindings(s->st[id]);
    return s->st[id];
}

/* Step a statement to completion (no rows expected). */
static int step_done(al_store *s, sqlite3_stmt *st, al_err *e) {
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) db_err(s, e, "write failed");
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Non-finite numbers become NULL: SQLite has no NaN. */
static void bind_real(sqlite3_stmt *st, int i, double v) {
    if (isfinite(v))
        sqlite3_bind_double(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

static void bind_text(sqlite3_stmt *st, int i, const char *t, size_t n) {
    if (!t || n > INT_MAX)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_text(st, i, t, (int)n, SQLITE_TRANSIENT);
}

static void bind_str(sqlite3_stmt *st, int i, const char *t) {
    bind_text(st, i, t, t ? strlen(t) : 0);
}

/* -------------------------------------------------------- dead runs */

/* Start time of process pid (field 22 of /proc/pid/stat) as text, so a
 * recycled pid is not mistaken for the run's process. "" if unknown. */
static void proc_start(long pid, char *buf, size_t cap) {
    char path[64], line[1024];
    buf[0] = 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    char *p = strrchr(line, ')');
    if (!p) return;
    /* after ") " come fields 3.. ; starttime is field 22 */
    int field = 2;
    for (char *t = p + 1; *t; t++) {
        if (*t == ' ') {
            field++;
            if (field == 22) {
                size_t k = strcspn(t + 1, " ");
                if (k >= cap) k = cap - 1;
                memcpy(buf, t + 1, k);
                buf[k] = 0;
                return;
            }
        }
    }
}

static int pid_alive(long pid, const char *start) {
    if (pid <= 0) return 0;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 0;
    char now[64];
    proc_start(pid, now, sizeof now);
    /* Unknown start times (no /proc): trust kill(). */
    if (!start || !start[0] || !now[0]) return 1;
    return strcmp(now, start) == 0;
}

static void host_name(char *buf, size_t cap) {
    if (gethostname(buf, cap) != 0) snprintf(buf, cap, "unknown");
    buf[cap - 1] = 0;
}

/* Runs left 'running' by a process of this host that no longer exists
 * are marked failed; their uncommitted rows are already gone. */
static int recover_dead_runs(al_store *s, al_err *e) {
    char host[256];
    host_name(host, sizeof host);
    sqlite3_stmt *q, *u;
    if (prepare(s, "SELECT run_id, pid, pid_start FROM runs "
                   "WHERE status = 'running' AND host = ?", &q, e))
        return -1;
    bind_str(q, 1, host);
    /* Collect first: updating rows under an open cursor is undefined. */
    int64_t *dead = NULL;
    int n = 0, cap = 0;
    int r, rc = 0;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        long pid = (long)sqlite3_column_int64(q, 1);
        if (pid_alive(pid, (const char *)sqlite3_column_text(q, 2))) continue;
        int64_t *nd = al_grow(dead, &cap, n, sizeof *nd, 16, e);
        if (!nd) {
            rc = -1;
            break;
        }
        dead = nd;
        dead[n++] = sqlite3_column_int64(q, 0);
    }
    if (rc == 0 && r != SQLITE_DONE) rc = db_err(s, e, "cannot list running runs");
    sqlite3_finalize(q);
    if (rc == 0 && n > 0 &&
        prepare(s, "UPDATE runs SET status = 'failed', "
                   "finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), "
                   "error = 'process ' || pid || ' ended without finishing' "
                   "WHERE run_id = ? AND status = 'running'", &u, e) == 0) {
        for (int i = 0; i < n && rc == 0; i++) {
            sqlite3_bind_int64(u, 1, dead[i]);
            rc = step_done(s, u, e);
        }
        sqlite3_finalize(u);
    } else if (rc == 0 && n > 0) {
        rc = -1;
    }
    free(dead);
    return rc;
}

/* ------------------------------------------------------ open, migrate */

static int user_version(al_store *s, int *v, al_err *e) {
    sqlite3_stmt *q;
    if (prepare(s, "PRAGMA user_version", &q, e)) return -1;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    if (rc != SQLITE_ROW) return db_err(s, e, "cannot read schema version");
    return 0;
}

static int migrate(al_store *s, al_err *e) {
    int v;
    if (user_version(s, &v, e)) return -1;
    if (v == N_MIGRATIONS) return 0;
    if (exec(s, "BEGIN IMMEDIATE", e)) return -1;
    /* Read again under the write lock: another process may have won. */
    if (user_version(s, &v, e)) goto fail;
    if (v > N_MIGRATIONS) {
        al_errf(e, "database %s: schema version %d is newer than this attnlab's %d",
                s->path, v, N_MIGRATIONS);
        goto fail;
    }
    for (; v < N_MIGRATIONS; v++) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
        if (exec(s, migrations[v], e) || exec(s, pragma, e)) goto fail;
    }
    return exec(s, "COMMIT", e);
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* Switching a new file to WAL needs a moment's exclusive lock, and SQLite
 * answers SQLITE_BUSY at once there instead of calling the busy handler,
 * so processes that open one new database together would fail. Retry for
 * as long as the busy timeout would have waited. */
static int set_wal(al_store *s, al_err *e) {
    for (long waited_ms = 0;; ) {
        int rc = sqlite3_exec(s->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        if (rc == SQLITE_OK) return 0;
        if ((rc & 0xff) != SQLITE_BUSY || waited_ms >= AL_STORE_BUSY_MS)
            return db_err(s, e, "cannot switch to WAL journal");
        long ms = 1 + waited_ms / 8; /* back off: 1 ms at first, then longer */
        if (ms > 100) ms = 100;
        struct timespec ts = {0, ms * 1000000L};
        nanosleep(&ts, NULL);
        waited_ms += ms;
    }
}

int al_store_open(const char *path, al_store **out, al_err *e) {
    *out = NULL;
    /* SQLite opens "" as a private temporary database: it would take a
     * run's rows and drop them at close, so a command would report
     * success and store nothing. (":memory:" is the same, but db merge
     * uses one for the schema; the commands refuse it as --db.) */
    if (!path || !*path)
        return al_errf(e, "no database file given (--db ''): name a file, e.g. --db results.db");
    al_store *s = al_calloc(1, sizeof *s, e);
    if (!s) return -1;
    snprintf(s->path, sizeof s->path, "%s", path);
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        NULL) != SQLITE_OK) {
        al_errf(e, "cannot open database %s: %s", path,
                s->db ? sqlite3_errmsg(s->db) : "out of memory");
        al_store_close(s);
        return -1;
    }
    sqlite3_busy_timeout(s->db, AL_STORE_BUSY_MS);
    if (set_wal(s, e) ||
        exec(s, "PRAGMA synchronous = NORMAL", e) ||
        exec(s, "PRAGMA foreign_keys = ON", e) || migrate(s, e) ||
        recover_dead_runs(s, e)) {
        if (e) { /* "database P: why" -> "cannot open database P: why" */
            char why[sizeof e->msg], pfx[AL_PATH_MAX + 64];
            snprintf(pfx, sizeof pfx, "database %s: ", path);
            size_t n = strlen(pfx);
            snprintf(why, sizeof why, "%s", strncmp(e->msg, pfx, n) ? e->msg : e->msg + n);
            al_errf(e, "cannot open database %s: %s", path, why);
        }
        al_store_close(s);
        return -1;
    }
    *out = s;
    return 0;
}

int al_store_open_readonly(const char *path, al_store **out, al_err *e) {
    *out = NULL;
    if (!al_file_exists(path)) return al_errf(e, "no database %s", path);
    al_store *s = al_calloc(1, sizeof *s, e);
    if (!s) return -1;
    snprintf(s->path, sizeof s->path, "%s", path);
    int v = 0, n = 0;
    sqlite3_stmt *q = NULL;
    if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        al_errf(e, "cannot open database %s: %s", path,
                s->db ? sqlite3_errmsg(s->db) : "out of memory");
        goto fail;
    }
    sqlite3_busy_timeout(s->db, AL_STORE_BUSY_MS);
    if (user_version(s, &v, e)) goto fail;
    if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                           "name IN ('runs', 'models')", -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW) {
        db_err(s, e, "not an SQLite database attnlab can read");
        goto fail;
    }
    n = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    q = NULL;
    if (n != 2 || v < 1) {
        al_errf(e, "%s is not an attnlab results database (no runs and models tables)", path);
        goto fail;
    }
    if (v > N_MIGRATIONS) {
        al_errf(e, "database %s: schema version %d is newer than this attnlab's %d", path, v,
                N_MIGRATIONS);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    sqlite3_finalize(q);
    al_store_close(s);
    return -1;
}

void al_store_close(al_store *s) {
    if (!s) return;
    if (s->in_tx) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    for (int i = 0; i < S_N; i++) sqlite3_finalize(s->st[i]);
    sqlite3_close(s->db);
    free(s);
}

/* ------------------------------------------------------------ models */

/* Training facts from dir/state.json, if present and readable. */
static void facts_from_state(const char *dir, al_model_facts *f) {
    al_train_state st;
    if (al_ckpt_read_state(dir, &st, NULL) != 0) return;
    f->trained_tokens = st.tokens_seen;
    f->train_steps = st.step;
    f->final_train_loss = st.last_train_loss;
    f->final_val_loss = st.last_val_loss;
    f->data_tokens = st.data_tokens > 0 ? st.data_tokens : NAN;
    al_state_free(&st);
}

int al_store_model(al_store *s, const char *dir, const char *sha256,
                   const al_model *m, const al_model_facts *facts,
                   int64_t *model_id, al_err *e) {
    char wpath[AL_PATH_MAX + 64], hex[65];
    if (sha256) {
        if (strlen(sha256) != 64 || strspn(sha256, "0123456789abcdef") != 64)
            return al_errf(e, "model %s: bad sha256 '%s'", dir, sha256);
        memcpy(hex, sha256, sizeof hex);
    } else if (al_path_join(wpath, sizeof wpath, dir, "model.safetensors", e) ||
               al_sha256_file(wpath, hex, e)) {
        return -1;
    }
    al_model_facts f = {NAN, -1, NAN, NAN, NAN};
    if (facts)
        f = *facts;
    else
        facts_from_state(dir, &f);
    char *abs = realpath(dir, NULL);
    sqlite3_stmt *q;
    if (prepare(s,
                "INSERT INTO models(sha256, path, n_layers, d_model, n_heads, d_head,"
                " n_ctx, d_vocab, tied_embeddings, seed, n_params, trained_tokens,"
                " train_steps, final_train_loss, final_val_loss, data_tokens, added_at)"
                " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                " strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
                " ON CONFLICT(sha256) DO UPDATE SET path = excluded.path,"
                " trained_tokens = coalesce(excluded.trained_tokens, trained_tokens),"
                " train_steps = coalesce(excluded.train_steps, train_steps),"
                " final_train_loss = coalesce(excluded.final_train_loss, final_train_loss),"
                " final_val_loss = coalesce(excluded.final_val_loss, final_val_loss),"
                " data_tokens = coalesce(excluded.data_tokens, data_tokens)",
                &q, e)) {
        free(abs);
        return -1;
    }
    const al_config *c = &m->cfg;
    bind_str(q, 1, hex);
    bind_str(q, 2, abs ? abs : dir);
    int ints[7] = {c->n_layers, c->d_model, c->n_heads, c->d_head,
                   c->n_ctx,    c->d_vocab, c->tied_embeddings};
    for (int i = 0; i < 7; i++) sqlite3_bind_int(q, 3 + i, ints[i]);
    sqlite3_bind_int64(q, 10, (sqlite3_int64)c->seed); /* > 2^63 wraps */
    sqlite3_bind_int64(q, 11, (sqlite3_int64)m->n_params);
    bind_real(q, 12, f.trained_tokens);
    if (f.train_steps >= 0) sqlite3_bind_int64(q, 13, f.train_steps);
    bind_real(q, 14, f.final_train_loss);
    bind_real(q, 15, f.final_val_loss);
    bind_real(q, 16, f.data_tokens);
    free(abs);
    int rc = step_done(s, q, e);
    sqlite3_finalize(q);
    if (rc) return -1;
    if (prepare(s, "SELECT model_id FROM models WHERE sha256 = ?", &q, e)) return -1;
    bind_str(q, 1, hex);
    rc = sqlite3_step(q) == SQLITE_ROW ? 0 : db_err(s, e, "cannot find model row");
    if (rc == 0) *model_id = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return rc;
}

/* -------------------------------------------------------------- runs */

int al_store_run_begin(al_store *s, const char *kind, const char *config_json,
                       int64_t model_id, int64_t *run_id, al_err *e) {
    if (s->in_tx) return al_errf(e, "database %s: run_begin inside a transaction", s->path);
    char host[256], start[64];
    host_name(host, sizeof host);
    proc_start((long)getpid(), start, sizeof start);
    sqlite3_stmt *q;
    if (prepare(s,
                "INSERT INTO runs(kind, config_json, model_id, started_at, status,"
                " attnlab_version, pid, pid_start, host, uid) VALUES(?, ?, ?,"
                " strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'running', ?, ?, ?, ?,"
                " lower(hex(randomblob(16))))",
                &q, e))
        return -1;
    bind_str(q, 1, kind);
    bind_str(q, 2, config_json);
    if (model_id > 0) sqlite3_bind_int64(q, 3, model_id);
    bind_str(q, 4, AL_VERSION);
    sqlite3_bind_int64(q, 5, (sqlite3_int64)getpid());
    bind_str(q, 6, start);
    bind_str(q, 7, host);
    int rc = step_done(s, q, e);
    sqlite3_finalize(q);
    if (rc == 0) *run_id = sqlite3_last_insert_rowid(s->db);
    return rc;
}

int al_store_put_sweep_task(al_store *s, const al_sweep_task_row *r, al_err *e) {
    if (s->in_tx) return al_errf(e, "database %s: put_sweep_task inside a transaction", s->path);
    sqlite3_stmt *q;
    if (prepare(s,
                "INSERT OR REPLACE INTO sweep_task(one, experiment, task, n_tasks, setting,"
                " seed, params_json) VALUES(1, ?, ?, ?, ?, ?, ?)",
                &q, e))
        return -1;
    bind_str(q, 1, r->experiment);
    sqlite3_bind_int(q, 2, r->task);
    sqlite3_bind_int(q, 3, r->n_tasks);
    bind_str(q, 4, r->setting ? r->setting : "");
    if (r->has_seed) sqlite3_bind_int64(q, 5, (sqlite3_int64)r->seed);
    bind_str(q, 6, r->params_json ? r->params_json : "{}");
    int rc = step_done(s, q, e);
    sqlite3_finalize(q);
    return rc;
}

int al_store_run_set_model(al_store *s, int64_t run_id, int64_t model_id,
                           al_err *e) {
    sqlite3_stmt *q;
    if (prepare(s, "UPDATE runs SET model_id = ? WHERE run_id = ?", &q, e)) return -1;
    sqlite3_bind_int64(q, 1, model_id);
    sqlite3_bind_int64(q, 2, run_id);
    int rc = step_done(s, q, e);
    sqlite3_finalize(q);
    return rc;
}

int al_store_tx_begin(al_store *s, al_err *e) {
    if (s->in_tx) return 0;
    if (exec(s, "BEGIN IMMEDIATE", e)) return -1;
    s->in_tx = 1;
    return 0;
}

int al_store_tx_commit(al_store *s, al_err *e) {
    if (!s->in_tx) return 0;
    if (exec(s, "COMMIT", e)) return -1;
    s->in_tx = 0;
    return 0;
}

static int set_status(al_store *s, int64_t run_id, const char *status,
                      const char *msg, al_err *e) {
    sqlite3_stmt *q;
    if (prepare(s, "UPDATE runs SET status = ?, error = ?,"
                   " finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
                   " WHERE run_id = ?", &q, e))
        return -1;
    bind_str(q, 1, status);
    bind_str(q, 2, msg);
    sqlite3_bind_int64(q, 3, run_id);
    int rc = step_done(s, q, e);
    if (rc == 0 && sqlite3_changes(s->db) != 1)
        rc = al_errf(e, "database %s: no run %lld", s->path, (long long)run_id);
    sqlite3_finalize(q);
    return rc;
}

int al_store_run_finish(al_store *s, int64_t run_id, al_err *e) {
    if (set_status(s, run_id, "done", NULL, e)) return -1;
    return al_store_tx_commit(s, e);
}

int al_store_run_fail(al_store *s, int64_t run_id, const char *msg, al_err *e) {
    if (s->in_tx) {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        s->in_tx = 0;
    }
    return set_status(s, run_id, "failed", msg ? msg : "failed", e);
}

/* -------------------------------------------------------------- rows */

/* Bind the values after fmt to statement id in order and step it. One
 * letter per column: 'I' int64_t, 'i' int, 'o' int or NULL when negative
 * (an optional column), 'd' double (NULL when not finite), 's' C string,
 * 't' const char * and size_t length (token bytes may hold NULs). Every
 * row writer below is one call, so the binding rules live only here. */
static int put_row(al_store *s, int id, al_err *e, const char *fmt, ...) {
    sqlite3_stmt *q = stmt(s, id, e);
    if (!q) return -1;
    if ((int)strlen(fmt) != sqlite3_bind_parameter_count(q) || strspn(fmt, "Iiodst") != strlen(fmt))
        return al_errf(e, "database %s: internal error: row format '%s' does not fit: %s", s->path,
                       fmt, stmt_sql[id]);
    va_list ap;
    va_start(ap, fmt);
    for (int i = 1; fmt[i - 1]; i++) {
        switch (fmt[i - 1]) {
        case 'I': sqlite3_bind_int64(q, i, va_arg(ap, int64_t)); break;
        case 'i': sqlite3_bind_int(q, i, va_arg(ap, int)); break;
        case 'o': {
            int v = va_arg(ap, int);
            if (v >= 0) sqlite3_bind_int(q, i, v);
            break;
        }
        case 'd': bind_real(q, i, va_arg(ap, double)); break;
        case 's': bind_str(q, i, va_arg(ap, const char *)); break;
        case 't': {
            const char *t = va_arg(ap, const char *);
            bind_text(q, i, t, va_arg(ap, size_t));
            break;
        }
        }
    }
    va_end(ap);
    return step_done(s, q, e);
}

int al_store_put_head_score(al_store *s, int64_t run_id, int64_t model_id,
                            int layer, int head, const char *metric,
                            double value, al_err *e) {
    return put_row(s, S_HEAD_SCORE, e, "IIiisd", run_id, model_id, layer,
                   head, metric, value);
}

int al_store_put_layer_score(al_store *s, int64_t run_id, int64_t model_id,
                             int layer, const char *metric, double value,
                             al_err *e) {
    return put_row(s, S_LAYER_SCORE, e, "IIisd", run_id, model_id, layer,
                   metric, value);
}

int al_store_put_model_score(al_store *s, int64_t run_id, int64_t model_id,
                             const char *metric, double value, al_err *e) {
    return put_row(s, S_MODEL_SCORE, e, "IIsd", run_id, model_id, metric,
                   value);
}

int al_store_put_singular_value(al_store *s, int64_t run_id, int64_t model_id,
                                int layer, int head, const char *circuit,
                                int idx, double value, al_err *e) {
    return put_row(s, S_SV, e, "IIiisid", run_id, model_id, layer, head,
                   circuit, idx, value);
}

int al_store_put_eigenvalue(al_store *s, int64_t run_id, int64_t model_id,
                            int layer, int head, const char *circuit, int idx,
                            double re, double im, al_err *e) {
    return put_row(s, S_EIG, e, "IIiisidd", run_id, model_id, layer, head,
                   circuit, idx, re, im);
}

int al_store_put_skip_trigram(al_store *s, int64_t run_id, int64_t model_id,
                              int layer, int head, const al_trigram_row *t,
                              al_err *e) {
    return put_row(s, S_TRI, e, "IIiiiiiitttddd", run_id, model_id, layer,
                   head, t->rank, t->a, t->b, t->c, t->a_str, t->a_len,
                   t->b_str, t->b_len, t->c_str, t->c_len, t->qk, t->ov,
                   t->score);
}

int al_store_put_composition(al_store *s, int64_t run_id, int64_t model_id,
                             const char *kind, int l1, int h1, int l2, int h2,
                             double score, double baseline, double baseline_sd,
                             al_err *e) {
    return put_row(s, S_COMP, e, "IIsiiiiddd", run_id, model_id, kind, l1,
                   h1, l2, h2, score, baseline, baseline_sd);
}

int al_store_put_head_overlap(al_store *s, int64_t run_id, int64_t model_id,
                              int layer, const char *space, int h1, int h2,
                              double value, al_err *e) {
    return put_row(s, S_OVERLAP, e, "IIisiid", run_id, model_id, layer,
                   space, h1, h2, value);
}

int al_store_put_ablation(al_store *s, int64_t run_id, int64_t model_id,
                          const al_ablation_row *r, al_err *e) {
    return put_row(s, S_ABL, e, "IIsssiddddd", run_id, model_id, r->method,
                   r->kind, r->heads, r->n_heads, r->loss, r->delta_loss,
                   r->delta_loss_copy, r->delta_loss_probe, r->interaction);
}

int al_store_put_pruning_step(al_store *s, int64_t run_id, int64_t model_id,
                              const al_pruning_row *r, al_err *e) {
    return put_row(s, S_PRUNE, e, "IIsiooiddds", run_id, model_id, r->method,
                   r->step, r->layer, r->head, r->heads_left, r->importance,
                   r->loss, r->delta_loss, r->mask);
}

int al_store_put_patching(al_store *s, int64_t run_id, int64_t model_id,
                          const al_patching_row *r, al_err *e) {
    return put_row(s, S_PATCH, e, "IIsssioodd", run_id, model_id, r->task, r->direction,
                   r->component, r->layer, r->head, r->pos, r->value, r->metric);
}

int al_store_put_path_patching(al_store *s, int64_t run_id, int64_t model_id,
                               const al_path_patching_row *r, al_err *e) {
    return put_row(s, S_PATH, e, "IIsssoosdd", run_id, model_id, r->task, r->direction,
                   r->sender, r->receiver_layer, r->receiver_head, r->channel, r->value,
                   r->metric);
}

int al_store_put_patching_run(al_store *s, int64_t run_id, int64_t model_id,
                              const al_patching_run_row *r, al_err *e) {
    return put_row(s, S_PATCH_RUN, e, "IIsssiiddds", run_id, model_id, r->task,
                   r->direction, r->component, r->n_pairs, r->seq_len, r->m_clean, r->m_corr,
                   r->seconds, r->task_hash);
}

int al_store_put_attribution_run(al_store *s, int64_t run_id, int64_t model_id,
                                 const al_attribution_run_row *r, al_err *e) {
    return put_row(s, S_ATTR_RUN, e, "IIsiiisddddddddsdddddsi", run_id, model_id, r->task,
                   r->n_pairs, r->seq_len, r->n_items, r->metric_kind, r->metric, r->loss,
                   r->kind_value[0], r->kind_value[1], r->kind_value[2], r->kind_dloss[0],
                   r->kind_dloss[1], r->kind_dloss[2], r->direction, r->m_clean, r->m_corr,
                   r->seconds, r->seconds_attrpatch, r->seconds_patch, r->task_hash, r->centred);
}

int al_store_put_logit_attribution(al_store *s, int64_t run_id, int64_t model_id,
                                   const char *task, const char *component, int pos,
                                   double value, int n_items, al_err *e) {
    return put_row(s, S_LOGIT_ATTR, e, "IIssodi", run_id, model_id, task, component, pos, value,
                   n_items);
}

int al_store_put_path_term(al_store *s, int64_t run_id, int64_t model_id,
                           const al_path_term_row *r, al_err *e) {
    return put_row(s, S_PATH_TERM, e, "IIsssooodd", run_id, model_id, r->task, r->term, r->kind,
                   r->layer, r->head, r->src_head, r->value, r->dloss);
}

int al_store_put_logit_lens(al_store *s, int64_t run_id, int64_t model_id, const char *task,
                            int layer, double loss, double accuracy, al_err *e) {
    return put_row(s, S_LENS, e, "IIsidd", run_id, model_id, task, layer, loss, accuracy);
}

int al_store_put_attribution_patching(al_store *s, int64_t run_id, int64_t model_id,
                                      const al_attribution_patching_row *r, al_err *e) {
    return put_row(s, S_AP, e, "IIsssooosoosdd", run_id, model_id, r->task, r->direction,
                   r->grid, r->layer, r->head, r->pos, r->sender, r->receiver_layer,
                   r->receiver_head, r->channel, r->estimate, r->actual);
}

int al_store_put_attribution_agreement(al_store *s, int64_t run_id, int64_t model_id,
                                       const char *grid, int n, double pearson, double spearman,
                                       int top5, al_err *e) {
    return put_row(s, S_AP_AGREE, e, "IIsiddi", run_id, model_id, grid, n, pearson, spearman,
                   top5);
}

int al_store_put_attribution_token(al_store *s, int64_t run_id, int pos, int token,
                                   const char *text, size_t len, al_err *e) {
    return put_row(s, S_ATTR_TOK, e, "Iiit", run_id, pos, token, text, len);
}

int al_store_put_circuit_run(al_store *s, int64_t run_id, int64_t model_id,
                             const al_circuit_run_row *r, al_err *e) {
    return put_row(s, S_CIRC_RUN, e, "IIsssddiidddddIds", run_id, model_id, r->task, r->method,
                   r->metric, r->tau, r->recover, r->n_edges, r->n_kept, r->m_clean, r->m_corr,
                   r->m_circuit, r->kl, r->faithfulness, r->evals, r->seconds, r->task_hash);
}

int al_store_put_circuit_edge(al_store *s, int64_t run_id, int64_t model_id,
                              const al_circuit_edge_row *r, al_err *e) {
    return put_row(s, S_CIRC_EDGE, e, "IIsdisoosdi", run_id, model_id, r->method, r->tau,
                   r->edge, r->sender, r->receiver_layer, r->receiver_head, r->channel, r->score,
                   r->kept);
}

int al_store_put_sae_run(al_store *s, int64_t run_id, int64_t model_id,
                         const al_sae_run_row *r, al_err *e) {
    return put_row(s, S_SAE_RUN, e, "IIissiisodIiIIdIddddddddddds", run_id, model_id, r->layer,
                   r->site, r->hook_name, r->d_in, r->d_sae, r->arch, r->k, r->l1_coeff,
                   (int64_t)r->steps, r->batch, (int64_t)r->activations, (int64_t)r->seed,
                   r->scale, (int64_t)r->eval_n, r->l0, r->fve, r->mse, r->dead_frac,
                   r->dense_frac, r->ce_clean, r->ce_sae, r->ce_zero, r->ce_recovered,
                   r->seconds, r->rate, r->out_dir);
}

int al_store_put_sae_feature_run(al_store *s, int64_t run_id, int64_t model_id,
                                 const al_sae_feature_run_row *r, al_err *e) {
    return put_row(s, S_SAE_FRUN, e, "IIssiiiiiIiidid", run_id, model_id, r->sae_dir,
                   r->hook_name, r->layer, r->d_sae, r->n_live, r->windows, r->seq_len,
                   (int64_t)r->positions, r->probe_r, r->probe_n, r->seconds, r->n_induction,
                   r->group_auroc);
}

int al_store_put_sae_feature(al_store *s, int64_t run_id, int64_t model_id,
                             const al_sae_feature_row *r, al_err *e) {
    return put_row(s, S_SAE_FEAT, e, "IIiIddddddoodIIddiotd", run_id, model_id, r->feature,
                   (int64_t)r->fired, r->density, r->mean_act, r->max_act, r->first_mean,
                   r->second_mean, r->induction_index, r->top_layer, r->top_head, r->top_share,
                   (int64_t)r->first_fired, (int64_t)r->second_fired, r->induction_p, r->auroc,
                   r->induction, r->next_token, r->next_token_str, r->next_token_len,
                   r->next_share);
}

int al_store_put_sae_feature_context(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                     int rank, int window, long offset, int pos, int token,
                                     const char *token_str, size_t len, double act, al_err *e) {
    return put_row(s, S_SAE_CTX, e, "IIiiiIiitd", run_id, model_id, feature, rank, window,
                   (int64_t)offset, pos, token, token_str, len, act);
}

int al_store_put_sae_feature_logit(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                   const char *direction, int rank, int token,
                                   const char *token_str, size_t len, double value, al_err *e) {
    return put_row(s, S_SAE_LOGIT, e, "IIisiitd", run_id, model_id, feature, direction, rank,
                   token, token_str, len, value);
}

int al_store_put_sae_feature_head(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                  int layer, int head, double contribution, double share,
                                  al_err *e) {
    return put_row(s, S_SAE_HEAD, e, "IIiiidd", run_id, model_id, feature, layer, head,
                   contribution, share);
}

int al_store_put_sae_probe_head(al_store *s, int64_t run_id, int64_t model_id, int layer,
                                int head, double auroc, al_err *e) {
    return put_row(s, S_SAE_PHEAD, e, "IIiid", run_id, model_id, layer, head, auroc);
}

int al_store_put_train_log(al_store *s, int64_t run_id,
                           const al_train_log_row *r, al_err *e) {
    return put_row(s, S_TLOG, e, "IIdddddd", run_id, (int64_t)r->step,
                   r->tokens, r->train_loss, r->val_loss, r->icl_gain, r->lr,
                   r->seconds);
}

int al_store_put_train_head_score(al_store *s, int64_t run_id, long step,
                                  int layer, int head, const char *metric,
                                  double value, al_err *e) {
    return put_row(s, S_THS, e, "IIiisd", run_id, (int64_t)step, layer, head,
                   metric, value);
}

int al_store_carry_train_log(al_store *s, int64_t run_id, int64_t from, long max_step,
                             int *carried, al_err *e) {
    static const char check[] =
        "SELECT count(*) FROM runs WHERE run_id = ?1 AND kind = 'train' AND ?1 < ?2";
    static const char *const copy[] = {
        "INSERT OR REPLACE INTO train_log SELECT ?1, step, tokens, train_loss, val_loss,"
        " icl_gain, lr, seconds FROM train_log WHERE run_id = ?2 AND step <= ?3",
        "INSERT OR REPLACE INTO train_head_scores SELECT ?1, step, layer, head, metric, value"
        " FROM train_head_scores WHERE run_id = ?2 AND step <= ?3"};
    sqlite3_stmt *q;
    *carried = 0;
    if (s->in_tx) return al_errf(e, "database %s: carry_train_log inside a transaction", s->path);
    if (prepare(s, check, &q, e)) return -1;
    sqlite3_bind_int64(q, 1, from);
    sqlite3_bind_int64(q, 2, run_id);
    int rc = sqlite3_step(q);
    int found = rc == SQLITE_ROW && sqlite3_column_int(q, 0) == 1;
    sqlite3_finalize(q);
    if (rc != SQLITE_ROW) return db_err(s, e, "cannot read runs");
    if (!found) return 0;
    if (al_store_tx_begin(s, e)) return -1;
    for (int i = 0; i < 2; i++) {
        if (prepare(s, copy[i], &q, e)) goto fail;
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int64(q, 2, from);
        sqlite3_bind_int64(q, 3, max_step);
        rc = step_done(s, q, e);
        sqlite3_finalize(q);
        if (rc) goto fail;
    }
    *carried = 1;
    return al_store_tx_commit(s, e);
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL); /* keep the first error */
    s->in_tx = 0;
    return -1;
}

/* ---------------------------------------------------------- warnings */

int al_store_put_warnings(al_store *s, int64_t run, int64_t mid, const al_warnings *w,
                          al_err *e) {
    for (int i = 0; w && i < w->n && i < AL_WARN_MAX; i++) {
        char msg[AL_WARN_LEN];
        snprintf(msg, sizeof msg, "%s", w->msg[i]); /* NUL-terminated whatever w holds */
        if (put_row(s, S_WARN, e, "IIis", run, mid, i, msg)) return -1;
    }
    return 0;
}

int al_store_put_view_row(al_store *s, int64_t run, int64_t mid, const char *metric,
                          const char *shape, const char *title, al_err *e) {
    return put_row(s, S_VIEW, e, "IIsss", run, mid, metric, shape, title);
}

void al_store_strings_free(char **v, int n) {
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

int al_store_run_warnings(al_store *s, int64_t run, char ***msgs, int *n, al_err *e) {
    *msgs = NULL, *n = 0;
    sqlite3_stmt *q;
    if (prepare(s, "SELECT message FROM run_warnings WHERE run_id = ? ORDER BY seq, warning_id",
                &q, e))
        return -1;
    sqlite3_bind_int64(q, 1, run);
    char **v = NULL;
    int cnt = 0, cap = 0, rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(q, 0);
        char **nv = al_grow(v, &cap, cnt, sizeof *v, 8, e);
        char *d = nv ? al_malloc(strlen(t ? t : "") + 1, 1, e) : NULL;
        if (nv) v = nv;
        if (!d) {
            rc = SQLITE_NOMEM;
            break;
        }
        strcpy(d, t ? t : "");
        v[cnt++] = d;
    }
    if (rc != SQLITE_DONE && rc != SQLITE_NOMEM) db_err(s, e, "cannot read run_warnings");
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) {
        al_store_strings_free(v, cnt);
        return -1;
    }
    *msgs = v, *n = cnt;
    return 0;
}

/* ----------------------------------------------------------- discard */

int al_store_run_discard(al_store *s, int64_t run, al_err *e) {
    if (s->in_tx) { /* the run's own uncommitted rows */
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        s->in_tx = 0;
    }
    sqlite3_stmt *q = NULL, *d = NULL;
    if (exec(s, "BEGIN IMMEDIATE", e)) return -1;
    int rc = -1, r;
    if (prepare(s, "SELECT status FROM runs WHERE run_id = ?", &q, e)) goto out;
    sqlite3_bind_int64(q, 1, run);
    if ((r = sqlite3_step(q)) != SQLITE_ROW) {
        if (r == SQLITE_DONE) al_errf(e, "database %s: no run %lld", s->path, (long long)run);
        else db_err(s, e, "cannot read the run");
        goto out;
    }
    if (!strcmp((const char *)sqlite3_column_text(q, 0), "done")) {
        al_errf(e, "database %s: run %lld is finished; only a run not yet done can be discarded",
                s->path, (long long)run);
        goto out;
    }
    sqlite3_finalize(q);
    /* every table with a run_id column, from the schema (as merge.c finds
     * them), so a table added later is covered; runs itself last */
    if (prepare(s,
                "SELECT m.name FROM sqlite_schema m JOIN pragma_table_info(m.name) c "
                "WHERE m.type = 'table' AND c.name = 'run_id' AND m.name <> 'runs' ORDER BY m.name",
                &q, e))
        goto out;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(q, 0);
        char *sql = sqlite3_mprintf("DELETE FROM \"%w\" WHERE run_id = ?", name);
        if (!sql) {
            al_errf(e, "out of memory");
            goto out;
        }
        int p = prepare(s, sql, &d, e);
        sqlite3_free(sql);
        if (p) goto out;
        sqlite3_bind_int64(d, 1, run);
        if (step_done(s, d, e)) goto out;
        sqlite3_finalize(d);
        d = NULL;
    }
    if (r != SQLITE_DONE) {
        db_err(s, e, "cannot read the schema");
        goto out;
    }
    if (prepare(s, "DELETE FROM runs WHERE run_id = ?", &d, e)) goto out;
    sqlite3_bind_int64(d, 1, run);
    rc = step_done(s, d, e);
out:
    sqlite3_finalize(q);
    sqlite3_finalize(d);
    if (rc == 0) return exec(s, "COMMIT", e);
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL); /* keep the first error */
    return -1;
}

int al_store_print_query(al_store *s, const char *sql, FILE *f, al_err *e) {
    sqlite3_stmt *q;
    if (prepare(s, sql, &q, e)) return -1;
    if (!sqlite3_stmt_readonly(q)) {
        sqlite3_finalize(q);
        return al_errf(e, "database %s: query is not read-only", s->path);
    }
    int nc = sqlite3_column_count(q), rc;
    for (int i = 0; i < nc; i++)
        fprintf(f, "%s%s", i ? "\t" : "", sqlite3_column_name(q, i));
    fputc('\n', f);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        for (int i = 0; i < nc; i++) {
            const unsigned char *t = sqlite3_column_text(q, i);
            fprintf(f, "%s%s", i ? "\t" : "", t ? (const char *)t : "NULL");
        }
        fputc('\n', f);
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) return db_err(s, e, "query failed");
    return 0;
}

/* Generic read-only query for pictures and reports: parameters bound as
 * text (column affinity converts them), each row handed to fn as text and
 * as numbers. */
int al_store_query(al_store *s, const char *sql, const char *const *params, int n_params,
                   al_store_row_fn fn, void *ctx, al_err *e) {
    sqlite3_stmt *q;
    if (prepare(s, sql, &q, e)) return -1;
    if (!sqlite3_stmt_readonly(q)) {
        sqlite3_finalize(q);
        return al_errf(e, "database %s: query is not read-only", s->path);
    }
    int np = sqlite3_bind_parameter_count(q); /* extra params are ignored */
    for (int i = 0; i < n_params && i < np; i++) bind_str(q, i + 1, params[i]);
    int nc = sqlite3_column_count(q), rc, frc = 0;
    if (nc > AL_STORE_MAX_COLS) {
        sqlite3_finalize(q);
        return al_errf(e, "database %s: query has more than %d columns", s->path,
                       AL_STORE_MAX_COLS);
    }
    const char *text[AL_STORE_MAX_COLS];
    double num[AL_STORE_MAX_COLS];
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        for (int i = 0; i < nc; i++) {
            int null = sqlite3_column_type(q, i) == SQLITE_NULL;
            num[i] = null ? NAN : sqlite3_column_double(q, i);
            text[i] = null ? NULL : (const char *)sqlite3_column_text(q, i);
        }
        if ((frc = fn(ctx, nc, text, num, e)) != 0) break;
    }
    sqlite3_finalize(q);
    if (frc) return -1;
    if (rc != SQLITE_DONE) return db_err(s, e, "query failed");
    return 0;
}
