#!/bin/sh
# make demo: experiments/demo.json end to end on a fresh machine.
#   corpus (invented names) -> BPE tokenizer -> token files -> 1-layer and
#   2-layer models -> circuits, scores, ablations, pruning -> pictures,
#   index.html, report.ipynb (all under notebooks-out/demo/);
#   then seed 003's table (the probability of each piece of a repeated
#   invented name in a held-out story) and three questions asked in SQL.
# Running it again reuses every finished stage (DEMO_FORCE=1: start over).
set -eu
BIN=${ATTNLAB_BIN:-build/attnlab}
EXP=${DEMO_EXPERIMENT:-experiments/demo.json}
OUT=${DEMO_OUT:-notebooks-out/demo}
set -- --out "$OUT"
[ -n "${DEMO_FORCE:-}" ] && set -- "$@" --force
[ -n "${DEMO_THREADS:-}" ] && set -- "$@" --threads "$DEMO_THREADS"

$BIN experiment "$EXP" "$@"

DB=$OUT/results.db
echo
echo "== a held-out story (a seed the training corpus did not use) and its repeated name"
$BIN data synth --out "$OUT/data/heldout.txt" --stories 1 --seed 779 --repeat-fraction 0 \
    --names-out "$OUT/data/heldout.names" >/dev/null 2>&1
NAME=$(cut -f2 "$OUT/data/heldout.names")
head -c 400 "$OUT/data/heldout.txt"; echo " ..."
for M in "$OUT"/models/*/; do
    M=${M%/}
    echo
    echo "-- model $(basename "$M"): probability of each piece of \"$NAME\" at each occurrence"
    $BIN run --model "$M" --prompt-file "$OUT/data/heldout.txt" --track "$NAME"
done

command -v sqlite3 >/dev/null || { echo "(install sqlite3 to see the example queries)"; exit 0; }
ask() {
    echo
    echo "-- $1"
    echo "$2" | sed 's/^/   /'
    sqlite3 -header -column "$DB" "$2"
}
echo
echo "== three questions for the database ($DB)"
ask "Which heads are induction heads, and what does each model's best head score?" \
"SELECT m.path, h.name, round(h.induction, 3) AS induction,
       round(h.prev_token, 3) AS prev_token
FROM head_summary h JOIN models m USING (model_id)
ORDER BY h.induction DESC LIMIT 5;"
ask "Do the weights (copying_eigen) and ablation (copying_ablation, and its excess over the other positions) agree on the copying heads?" \
"SELECT m.path, h.name, round(h.copying_eigen, 3) AS eigen,
       round(h.copying_ablation, 4) AS ablation_nats,
       round(h.copying_ablation_excess, 4) AS excess_nats
FROM head_summary h JOIN models m USING (model_id)
ORDER BY h.copying_ablation DESC LIMIT 5;"
ask "Pruning: the fewest heads left at a step whose loss is within 10% of all heads', per method" \
"SELECT p.method, min(p.heads_left) AS fewest_heads,
       round(max(CASE WHEN p.step = 0 THEN p.loss END), 4) AS loss_all_heads
FROM pruning_steps p
WHERE p.run_id IN (SELECT max(run_id) FROM pruning_steps GROUP BY method)
  AND p.loss <= 1.1 * (SELECT q.loss FROM pruning_steps q
                       WHERE q.run_id = p.run_id AND q.step = 0)
GROUP BY p.method ORDER BY fewest_heads;"

echo
echo "== the report: $OUT/index.html (open it in a browser; no network needed)"
echo "   the notebook: $OUT/report.ipynb (jupyter notebook $OUT/report.ipynb)"
