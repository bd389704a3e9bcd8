/* store_schema.c -- the results database's schema: one migration per
 * version (AL_STORE_SCHEMA_VERSION), each the SQL that takes a file from
 * the version before it to its own. store.c runs them when it opens a
 * file; docs/sql.md describes the tables and views they make.
 *
 * A migration is history: files made by it exist, so it never changes;
 * a later change to a table or view is a new migration. */
#include "attnlab/store.h"

#include "attnlab/thresholds.h"
#include "store_conn.h"

/* Known per-head metrics, one column each in head_summary. Others are
 * stored all the same and can be read from head_scores. */
/* clang-format off */ /* X-macro lists read best as written */
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
/* clang-format on */

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
    "  PRIMARY KEY (run_id, step, layer, head, metric));\n" HEAD_SUMMARY(HEAD_METRICS_V1)
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
 * sd (n - 1), NULL for fewer than two values.
 * The views spell the run kinds they read ('train', 'scores', 'circuits'):
 * a view's SQL is stored in every file this migration made and can bind
 * no parameter, so these are the kinds as they were when it was
 * released; renaming an analysis would need a migration that rebuilds
 * the views. */
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
    "LEFT JOIN (SELECT lr.model_id, min(CASE WHEN t.value > " TH_IND
    " THEN t.step END) AS first_step\n"
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
    "LEFT JOIN (SELECT model_id, avg((copying_eigen > " AL_TH_STR(
        AL_TH_COPY_EIGEN) ") =\n"
                          "                               (copying_ablation > " AL_TH_STR(
                              AL_TH_COPY_ABLATION) ")) AS copying_agreement\n"
                                                   "           FROM head_summary\n"
                                                   "           WHERE copying_eigen IS NOT NULL AND copying_ablation IS NOT NULL\n"
                                                   "           GROUP BY model_id) cp\n"
                                                   "  ON cp.model_id = sm.model_id;\n"
                                                   "CREATE VIEW sweep_summary AS\n"
                                                   "SELECT setting, n_layers,\n"
                                                   "  count(DISTINCT seed) AS n_seeds,\n"
                                                   "  count(*) AS n_models,\n"
                                                   "  count(best_induction) AS n_scored,\n"
                                                   "  avg(best_induction > " TH_IND
                                                   ") AS share_with_induction_head,\n"
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
static const char schema_v15[] = "DROP VIEW IF EXISTS head_summary;\n" HEAD_SUMMARY(HEAD_METRICS);

/* v16: score_intervals, how sure each averaged number is (docs/design.md
 * §5, intervals), beside head_scores and model_scores: one row per
 * number with its standard error and bootstrap interval over the items
 * it averages (the probe's sequences, the pairs), the level, the item
 * count and the resamples. A table of its own, keyed like head_scores
 * and patching (layer, head and pos -1 where they do not apply), so that
 * the result tables and every reader of them stay as they are. */
static const char schema_v16[] =
    "CREATE TABLE IF NOT EXISTS score_intervals(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  layer INTEGER NOT NULL, head INTEGER NOT NULL,  -- -1, -1: a model-level number\n"
    "  pos INTEGER NOT NULL,          -- a position (patching's grids), else -1\n"
    "  metric TEXT NOT NULL, value REAL,\n"
    "  se REAL,                       -- standard error of the mean over the items\n"
    "  ci_lo REAL, ci_hi REAL,        -- bootstrap percentile interval (NULL: none)\n"
    "  level REAL, n_items INTEGER, bootstrap INTEGER,\n"
    "  PRIMARY KEY (run_id, layer, head, pos, metric));\n";

/* v17: sweep_summary says how sure its means are: the sample sd, the
 * standard error and the 95% t interval of best_induction_mean and
 * first_step_mean over the seeds (n_crossed: the runs whose curve
 * crossed, which first_step averages). A view cannot compute a t
 * quantile, so t_quantiles holds the two-sided 95% ones for 1..100
 * degrees of freedom (exact to 6 decimals); above 100 the view takes
 * df 100's, 1.983972, at most 1.2% wider than the true quantile. The old
 * columns keep their names, order and values. */
static const char schema_v17[] =
    "CREATE TABLE IF NOT EXISTS t_quantiles(\n"
    "  level REAL NOT NULL, df INTEGER NOT NULL,\n"
    "  t REAL NOT NULL,                 -- P(|T_df| <= t) = level\n"
    "  PRIMARY KEY (level, df));\n"
    "INSERT OR REPLACE INTO t_quantiles(level, df, t) VALUES\n"
    "(0.95, 1, 12.706205), (0.95, 2, 4.302653), (0.95, 3, 3.182446), (0.95, 4, 2.776445), (0.95, 5, 2.570582),\n"
    "(0.95, 6, 2.446912), (0.95, 7, 2.364624), (0.95, 8, 2.306004), (0.95, 9, 2.262157), (0.95, 10, 2.228139),\n"
    "(0.95, 11, 2.200985), (0.95, 12, 2.178813), (0.95, 13, 2.160369), (0.95, 14, 2.144787), (0.95, 15, 2.131450),\n"
    "(0.95, 16, 2.119905), (0.95, 17, 2.109816), (0.95, 18, 2.100922), (0.95, 19, 2.093024), (0.95, 20, 2.085963),\n"
    "(0.95, 21, 2.079614), (0.95, 22, 2.073873), (0.95, 23, 2.068658), (0.95, 24, 2.063899), (0.95, 25, 2.059539),\n"
    "(0.95, 26, 2.055529), (0.95, 27, 2.051831), (0.95, 28, 2.048407), (0.95, 29, 2.045230), (0.95, 30, 2.042272),\n"
    "(0.95, 31, 2.039513), (0.95, 32, 2.036933), (0.95, 33, 2.034515), (0.95, 34, 2.032245), (0.95, 35, 2.030108),\n"
    "(0.95, 36, 2.028094), (0.95, 37, 2.026192), (0.95, 38, 2.024394), (0.95, 39, 2.022691), (0.95, 40, 2.021075),\n"
    "(0.95, 41, 2.019541), (0.95, 42, 2.018082), (0.95, 43, 2.016692), (0.95, 44, 2.015368), (0.95, 45, 2.014103),\n"
    "(0.95, 46, 2.012896), (0.95, 47, 2.011741), (0.95, 48, 2.010635), (0.95, 49, 2.009575), (0.95, 50, 2.008559),\n"
    "(0.95, 51, 2.007584), (0.95, 52, 2.006647), (0.95, 53, 2.005746), (0.95, 54, 2.004879), (0.95, 55, 2.004045),\n"
    "(0.95, 56, 2.003241), (0.95, 57, 2.002465), (0.95, 58, 2.001717), (0.95, 59, 2.000995), (0.95, 60, 2.000298),\n"
    "(0.95, 61, 1.999624), (0.95, 62, 1.998972), (0.95, 63, 1.998341), (0.95, 64, 1.997730), (0.95, 65, 1.997138),\n"
    "(0.95, 66, 1.996564), (0.95, 67, 1.996008), (0.95, 68, 1.995469), (0.95, 69, 1.994945), (0.95, 70, 1.994437),\n"
    "(0.95, 71, 1.993943), (0.95, 72, 1.993464), (0.95, 73, 1.992997), (0.95, 74, 1.992543), (0.95, 75, 1.992102),\n"
    "(0.95, 76, 1.991673), (0.95, 77, 1.991254), (0.95, 78, 1.990847), (0.95, 79, 1.990450), (0.95, 80, 1.990063),\n"
    "(0.95, 81, 1.989686), (0.95, 82, 1.989319), (0.95, 83, 1.988960), (0.95, 84, 1.988610), (0.95, 85, 1.988268),\n"
    "(0.95, 86, 1.987934), (0.95, 87, 1.987608), (0.95, 88, 1.987290), (0.95, 89, 1.986979), (0.95, 90, 1.986675),\n"
    "(0.95, 91, 1.986377), (0.95, 92, 1.986086), (0.95, 93, 1.985802), (0.95, 94, 1.985523), (0.95, 95, 1.985251),\n"
    "(0.95, 96, 1.984984), (0.95, 97, 1.984723), (0.95, 98, 1.984467), (0.95, 99, 1.984217), (0.95, 100, 1.983972);\n"
    "DROP VIEW IF EXISTS sweep_summary;\n"
    "CREATE VIEW sweep_summary AS\n"
    "SELECT g.*,\n"
    "  g.best_induction_sd / sqrt(g.n_scored) AS best_induction_se,\n"
    "  g.best_induction_mean - t1.t * g.best_induction_sd / sqrt(g.n_scored) AS best_induction_lo,\n"
    "  g.best_induction_mean + t1.t * g.best_induction_sd / sqrt(g.n_scored) AS best_induction_hi,\n"
    "  g.first_step_sd / sqrt(g.n_crossed) AS first_step_se,\n"
    "  g.first_step_mean - t2.t * g.first_step_sd / sqrt(g.n_crossed) AS first_step_lo,\n"
    "  g.first_step_mean + t2.t * g.first_step_sd / sqrt(g.n_crossed) AS first_step_hi\n"
    "FROM (SELECT setting, n_layers,\n"
    "  count(DISTINCT seed) AS n_seeds,\n"
    "  count(*) AS n_models,\n"
    "  count(best_induction) AS n_scored,\n"
    "  avg(best_induction > " AL_TH_STR(
        AL_TH_INDUCTION) ") AS share_with_induction_head,\n"
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
                         "  avg(copying_agreement) AS copying_agreement,\n"
                         "  sqrt(sum((best_induction - bi_mean) * (best_induction - bi_mean))\n"
                         "       / (count(best_induction) - 1)) AS best_induction_sd,\n"
                         "  count(first_step) AS n_crossed\n"
                         "FROM (SELECT *, avg(first_step) OVER (PARTITION BY setting, n_layers) AS fs_mean,\n"
                         "             avg(best_induction) OVER (PARTITION BY setting, n_layers) AS bi_mean\n"
                         "      FROM sweep_findings)\n"
                         "GROUP BY setting, n_layers) g\n"
                         "LEFT JOIN t_quantiles t1 ON t1.level = 0.95 AND t1.df = min(g.n_scored - 1, 100)\n"
                         "LEFT JOIN t_quantiles t2 ON t2.level = 0.95 AND t2.df = min(g.n_crossed - 1, 100)\n"
                         "ORDER BY g.setting, g.n_layers;\n";

/* v18: how sure the training curve's evaluations are: the standard
 * errors of val_loss (over the evaluation's sequences) and of icl_gain
 * (over the probe's sequences), NULL where a run recorded none. */
static const char schema_v18[] = "ALTER TABLE train_log ADD COLUMN val_loss_se REAL;\n"
                                 "ALTER TABLE train_log ADD COLUMN icl_gain_se REAL;\n";

/* v19: which features of an SAE carry a pair task (sae_task.h): one row
 * per `sae features --task` run in sae_task_runs (the task, the metric on
 * both runs, and the estimates of the SAE's error term and of the whole
 * site), and one per feature whose estimate is not 0 in sae_task_features,
 * each with its interval inline: a table keyed by feature, which
 * score_intervals' (layer, head, pos) keys do not fit. */
static const char schema_v19[] =
    "CREATE TABLE IF NOT EXISTS sae_task_runs(\n"
    "  run_id INTEGER PRIMARY KEY REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  task TEXT NOT NULL, direction TEXT NOT NULL,\n"
    "  n_pairs INTEGER NOT NULL, n_items INTEGER NOT NULL,\n"
    "  m_clean REAL, m_corr REAL,       -- the metric, mean over the items\n"
    "  n_moved INTEGER,                 -- features whose estimate is not 0\n"
    "  error_effect REAL, error_se REAL, -- the SAE's error term, normalised\n"
    "  site_effect REAL, site_se REAL,  -- the layer's whole z (features + error)\n"
    "  level REAL, bootstrap INTEGER);\n"
    "CREATE TABLE IF NOT EXISTS sae_task_features(\n"
    "  run_id INTEGER NOT NULL REFERENCES runs(run_id),\n"
    "  model_id INTEGER NOT NULL REFERENCES models(model_id),\n"
    "  feature INTEGER NOT NULL,\n"
    "  effect REAL,                     -- normalised as patching's effect (1: all of it)\n"
    "  se REAL, ci_lo REAL, ci_hi REAL, -- over the pairs\n"
    "  act_clean REAL, act_corr REAL,   -- mean code at the items' positions\n"
    "  PRIMARY KEY (run_id, feature));\n";

/* al_store_migrations[i] takes user_version i to i+1; with its declared
 * size (store_conn.h), a missing or extra migration does not compile. */
const char *const al_store_migrations[] = {schema_v1,  schema_v2,  schema_v3,  schema_v4,
                                           schema_v5,  schema_v6,  schema_v7,  schema_v8,
                                           schema_v9,  schema_v10, schema_v11, schema_v12,
                                           schema_v13, schema_v14, schema_v15, schema_v16,
                                           schema_v17, schema_v18, schema_v19};
_Static_assert(sizeof al_store_migrations / sizeof al_store_migrations[0] ==
                   AL_STORE_SCHEMA_VERSION,
               "one migration per version");
