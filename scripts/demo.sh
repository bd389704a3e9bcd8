#!/bin/sh
# make demo: the built-in corpus end to end on a fresh machine.
#   corpus (invented names) -> BPE tokenizer -> token files
#   -> 1-layer and 2-layer models -> `attnlab run` on a held-out story,
#   tracking the pieces of its repeated invented name (seed 003's table).
# Everything lands in data/demo* and runs/demo-*; re-running starts over.
set -eu
BIN=${ATTNLAB_BIN:-build/attnlab}
STEPS=${DEMO_STEPS:-1000}
THREADS=${DEMO_THREADS:-0}
mkdir -p data runs

echo "== 1. corpus: synthetic stories with invented names"
$BIN data synth --out data/demo.txt --stories 40000 --seed 1 --repeat-fraction 0.1
echo "== 2. tokenizer: byte-level BPE, 2048 tokens"
$BIN tokenizer train --in data/demo.txt --vocab 2048 --out data/demo-tokenizer.json
$BIN encode --tokenizer data/demo-tokenizer.json --in data/demo.txt --out data/demo.bin --val 0.02

for L in 1 2; do
    echo "== 3.$L. train the ${L}-layer model ($STEPS steps)"
    $BIN train --data data/demo.train.bin --val data/demo.val.bin \
        --tokenizer data/demo-tokenizer.json --out runs/demo-${L}l --n-layers $L \
        --steps "$STEPS" --threads "$THREADS" --force
done

echo "== 4. a held-out story (a seed the training corpus did not use)"
$BIN data synth --out data/demo-heldout.txt --stories 1 --seed 777 --repeat-fraction 0 \
    --names-out data/demo-heldout.names
NAME=$(cut -f2 data/demo-heldout.names)
head -c 400 data/demo-heldout.txt; echo " ..."
for L in 1 2; do
    echo
    echo "-- ${L}-layer model: probability of each piece of \"$NAME\" at each occurrence"
    $BIN run --model runs/demo-${L}l --prompt-file data/demo-heldout.txt --track " $NAME"
done
echo
echo "-- 2-layer model, full table for the first 40 tokens:"
$BIN run --model runs/demo-2l --prompt-file data/demo-heldout.txt | head -41
