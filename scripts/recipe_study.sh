#!/usr/bin/env bash
# Recipe study for induction heads on real text.
#
# Trains 2-layer attention-only models with different recipes on a text
# corpus, logs head scores every EVERY steps into ONE database (train_head_scores),
# stops a run (SIGINT: saves a checkpoint, as Ctrl-C would) once any head's
# induction score passes 0.4 or the token budget is spent, and prints the table
# recipe -> tokens to the first induction score > 0.4, val loss at the stop,
# tokens/s. Models and token files live in $WORK (not committed).
#
# usage: scripts/recipe_study.sh prep CORPUS TEXT VOCAB...   tokenizer + token files
#        scripts/recipe_study.sh run LABEL CORPUS VOCAB [train flags...]
#        scripts/recipe_study.sh rescore LABEL CORPUS VOCAB   (needs SNAP at run time)
#        scripts/recipe_study.sh table
# env:   WORK (/tmp/study), DB (study/study.db), BUDGET tokens (6000000),
#        EVERY eval steps (50), THREADS per run (1), ATTNLAB (build/attnlab),
#        SNAP steps (0 = off): checkpoint every SNAP steps and keep each one's
#        weights as $WORK/models/NAME.snap/STEP (to re-score them later)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/study}
DB=${DB:-$ROOT/study/study.db}
BUDGET=${BUDGET:-6000000}
EVERY=${EVERY:-50}
SNAP=${SNAP:-0}
THREADS=${THREADS:-1}
A=${ATTNLAB:-$ROOT/build/attnlab}
mkdir -p "$WORK" "$(dirname "$DB")"

# The study's own index of runs: which label and corpus each train run was.
sqlite3 "$DB" "CREATE TABLE IF NOT EXISTS study(label TEXT, corpus TEXT, vocab INTEGER,
  batch INTEGER, n_ctx INTEGER, run_id INTEGER, flags TEXT, wall_s REAL, stopped TEXT,
  PRIMARY KEY(label, corpus, vocab));" 2>/dev/null || true

case "${1:-}" in
prep)
    corpus=$2 text=$3; shift 3
    for v in "$@"; do
        "$A" tokenizer train --in "$text" --vocab "$v" --out "$WORK/$corpus$v.json"
        "$A" encode --tokenizer "$WORK/$corpus$v.json" --in "$text" --out "$WORK/$corpus$v.bin" \
            --docs "${DOCS:-line}"
    done ;;
run)
    label=$2 corpus=$3 vocab=$4; shift 4
    batch=16 nctx=256 args=("$@")
    for ((i = 0; i < ${#args[@]}; i++)); do
        case "${args[$i]}" in
        --batch) batch=${args[$((i + 1))]} ;;
        --n-ctx) nctx=${args[$((i + 1))]} ;;
        esac
    done
    steps=$((BUDGET / (batch * nctx)))
    out="$WORK/models/$corpus-v$vocab-$label"
    rm -rf "$out" "$out.snap"; mkdir -p "$WORK/models"
    t0=$(date +%s.%N)
    "$A" train --data "$WORK/$corpus$vocab.train.bin" --val "$WORK/$corpus$vocab.val.bin" \
        --tokenizer "$WORK/$corpus$vocab.json" --out "$out" --db "$DB" --n-layers 2 \
        --steps "$steps" --eval-every "$EVERY" --eval-batches 4 --ckpt-every "${SNAP/#0/100000}" \
        --threads "$THREADS" "$@" > "$WORK/$corpus-v$vocab-$label.log" 2>&1 &
    pid=$!
    run_id=""
    stopped=budget
    snapped=""
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5
        if [ "$SNAP" -gt 0 ] && [ -f "$out/state.json" ]; then
            # checkpoints are written to temporary names and renamed, so a
            # copy is whole; state.json names the step they belong to
            s=$(sed -n 's/^[[:space:]]*"step":[[:space:]]*\([0-9]*\).*/\1/p' "$out/state.json")
            if [ -n "$s" ] && [ "$s" != "$snapped" ]; then
                mkdir -p "$out.snap/$s"
                cp "$out/model.safetensors" "$out/config.json" "$out/tokenizer.json" "$out.snap/$s/"
                snapped=$s
            fi
        fi
        [ -n "$run_id" ] || run_id=$(sqlite3 -cmd ".timeout 5000" "$DB" \
            "SELECT run_id FROM runs WHERE kind='train' AND pid=$pid ORDER BY run_id DESC LIMIT 1")
        [ -n "$run_id" ] || continue
        hit=$(sqlite3 -cmd ".timeout 5000" "$DB" "SELECT count(*) FROM train_head_scores
              WHERE run_id=$run_id AND metric='induction' AND value > 0.4")
        if [ "$hit" -gt 0 ]; then stopped=crossed; kill -INT "$pid"; wait "$pid" || true; break; fi
    done
    wait "$pid" 2>/dev/null || true
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN{print b-a}")
    sqlite3 -cmd ".timeout 5000" "$DB" "INSERT OR REPLACE INTO study VALUES('$label', '$corpus',
        $vocab, $batch, $nctx, ${run_id:-NULL}, '$*', $wall, '$stopped')"
    echo "$corpus $label: $stopped after ${wall}s" ;;
rescore)
    # The kept checkpoints of a run scored again (scores: R 50, N 64) with
    # the probe drawn from the ids the training text holds, as train's own
    # probe (the whole vocabulary unless --probe-tokens was given) may not be.
    label=$2 corpus=$3 vocab=$4
    snaps="$WORK/models/$corpus-v$vocab-$label.snap"
    for d in $(ls "$snaps" | sort -n); do
        "$A" scores --model "$snaps/$d" --db "$DB" --probe-tokens "$WORK/$corpus$vocab.train.bin" \
            --threads "$THREADS" > /dev/null
    done
    sqlite3 -cmd ".timeout 5000" -column -header "$DB" "
    SELECT CAST(substr(json_extract(r.config_json, '$.model'),
                       instr(json_extract(r.config_json, '$.model'), '.snap/') + 6) AS INTEGER) AS step,
      printf('%.3f', max(CASE WHEN h.metric = 'induction' THEN h.value END)) AS induction_seen,
      printf('%.3f', max(CASE WHEN h.metric = 'prev_token' THEN h.value END)) AS prev_token_seen
    FROM runs r JOIN head_scores h USING (run_id)
    WHERE r.kind = 'scores' AND json_extract(r.config_json, '$.model') LIKE '%/$corpus-v$vocab-$label.snap/%'
    GROUP BY r.run_id ORDER BY step" ;;
table)
    sqlite3 -cmd ".timeout 5000" -column -header "$DB" "
    SELECT s.corpus, s.label AS recipe, s.vocab,
      s.batch || 'x' || s.n_ctx AS bxT,
      CASE WHEN c.step IS NULL THEN 'not within ' ||
             printf('%.1f', (SELECT max(tokens) FROM train_log WHERE run_id = s.run_id) / 1e6) || ' M'
           ELSE printf('%.2f M', c.step * s.batch * s.n_ctx / 1e6) END AS tokens_to_ind_0_4,
      printf('%.2f', (SELECT max(value) FROM train_head_scores WHERE run_id = s.run_id
                      AND metric = 'induction')) AS best_ind,
      printf('%.3f', (SELECT val_loss FROM train_log WHERE run_id = s.run_id AND val_loss IS NOT NULL
                      ORDER BY step DESC LIMIT 1)) AS val_loss_at_stop,
      printf('%.0f', (SELECT max(tokens) FROM train_log WHERE run_id = s.run_id) / s.wall_s) AS tok_per_s,
      printf('%.0f', s.wall_s) AS wall_s, s.stopped
    FROM study s LEFT JOIN (SELECT run_id, min(step) AS step FROM train_head_scores
      WHERE metric = 'induction' AND value > 0.4 GROUP BY run_id) c ON c.run_id = s.run_id
    ORDER BY s.corpus, s.rowid" ;;
*) sed -n 2,16p "$0"; exit 2 ;;
esac
