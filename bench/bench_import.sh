#!/bin/sh
# bench_import.sh ATTNLAB BENCH_ENGINE PYTHON THREADS MIN_TIME -- the models
# from elsewhere, at their true shapes (part of `make bench`).
#
# tests/import_ref.py writes PyTorch checkpoints (torch.save of a
# TransformerLens state dict, random weights: speed and memory do not
# depend on what the weights learned) of attn-only-2l's shape (2 layers,
# d_model 512, 8 heads of 64, n_ctx 1024, d_vocab 48262, LayerNorm, every
# bias) and of redwood_attn_2l's (d_model 256, 8 heads of 32, n_ctx 2048,
# d_vocab 50259, LayerNorm, shortformer positions); `attnlab import`
# brings each in, processed as TransformerLens's from_pretrained does.
# Then:
#   - forward tokens/s of the imported attn-only-2l, 4 sequences of 1,024
#     tokens, in the C engine (bench_engine --model) and in PyTorch
#     (torch_bench.py --model: tests/torch_ref.py's model on the same
#     model directory's weights), each in its own process;
#   - every analysis on both models (data: the built-in stories in a
#     257-token byte tokenizer), with its wall time and peak resident
#     memory from /usr/bin/time (exit status beside it): at its defaults,
#     but the text analyses on fewer windows of the model's length (at
#     their defaults, ablate --each runs 7 minutes and prune --method
#     ablation hours here: every window's 1,024 positions go through the
#     48,262-wide unembedding once per head and step; prune runs with
#     --method gradient), paths, attribute and discover on 8 pairs (paths
#     at its 64 pairs takes 5 minutes at attn-only-2l's shape; attribute
#     without its comparison with actual patching, 2 minutes more) and sae
#     train for 20 steps.
# Prints two tables. Exit 0; a part that cannot run says why.
A=$1 BENCH=$2 PY=$3 THREADS=$4 MIN_TIME=$5
DIR=$(dirname "$0")
W=$(mktemp -d) || exit 1
trap 'rm -rf "$W"' EXIT INT TERM

echo
echo "models from elsewhere at their true shapes (random weights, imported from torch.save files)"
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    echo "  skipped: PyTorch (which writes the checkpoints) is not installed"
    exit 0
fi
if [ ! -x /usr/bin/time ]; then
    echo "  skipped: /usr/bin/time (GNU time, for peak memory) is not installed"
    exit 0
fi
for shape in big redwood; do
    "$PY" "$DIR/../tests/import_ref.py" "$shape" "$W" >"$W/gen.log" 2>&1 || {
        echo "  skipped: import_ref.py $shape failed: $(tail -n 1 "$W/gen.log")"
        exit 0
    }
done
"$A" data synth --out "$W/s.txt" --stories 400 >/dev/null 2>&1 &&
    "$A" tokenizer train --in "$W/s.txt" --vocab 257 --out "$W/byte.json" >/dev/null 2>&1 &&
    "$A" encode --tokenizer "$W/byte.json" --in "$W/s.txt" --out "$W/s.bin" --val 0.2 \
        >/dev/null 2>&1 || { echo "  skipped: cannot make the token files"; exit 0; }
for shape in big redwood; do
    "$A" import --checkpoint "$W/$shape.pth" --config "$W/$shape.config.json" \
        --tokenizer "$W/byte.json" --out "$W/$shape" >/dev/null 2>"$W/imp.err" || {
        echo "  skipped: attnlab import $shape failed: $(tail -n 1 "$W/imp.err")"
        exit 0
    }
done

# forward tokens/s, C beside PyTorch, on the same weights
"$BENCH" --mode infer --model "$W/big" --n-ctx 1024 --batch 4 --threads "$THREADS" \
    --min-time "$MIN_TIME" >"$W/fwd.c.json" 2>"$W/fwd.c.err"
OMP_NUM_THREADS=$THREADS "$PY" "$DIR/torch_bench.py" --mode infer --model "$W/big" --n-ctx 1024 \
    --batch 4 --threads "$THREADS" --min-time "$MIN_TIME" >"$W/fwd.t.json" 2>"$W/fwd.t.err"
jget() { sed -n "s/.*\"$2\": \(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$1" | tr -d '"'; }
ct=$(jget "$W/fwd.c.json" tokens_per_s) tt=$(jget "$W/fwd.t.json" tokens_per_s)
echo "  attn-only-2l forward (4 x 1,024 tokens, logits and loss, $THREADS threads):" \
    "C ${ct:-failed} tok/s, PyTorch ${tt:-failed} tok/s$(awk -v a="$ct" -v b="$tt" \
    'BEGIN { if (a > 0 && b > 0) printf " (C/PyTorch %.2fx)", a / b }');" \
    "peak RSS C $(jget "$W/fwd.c.json" peak_rss_mb) MB, PyTorch $(jget "$W/fwd.t.json" peak_rss_mb) MB"

# every analysis at its defaults: wall time and peak RSS
printf '  %-44s %12s %12s %12s %12s\n' "analysis (defaults unless given)" "attn-only-2l" "peak MB" \
    "redwood_2l" "peak MB"
V=$W/s.val.bin
for c in "circuits" "scores" "ablate --data $V --each --batches 1 --batch 4" \
    "prune --data $V --method gradient --batches 2 --batch 2" "patch" "paths --n 8" \
    "attribute --n 8 --no-compare" "discover --n 8" "names --data $V" "attnstats --data $V --batches 1 --batch 4" \
    "sae train --data $W/s.train.bin --val $V --layer 1 --out $W/SAE --steps 20 --eval-windows 2" \
    "sae features --data $V --sae $W/SAE --windows 8"; do
    line=
    for shape in big redwood; do
        args=$(echo "$c" | sed "s|$W/SAE|$W/sae-$shape|")
        # shellcheck disable=SC2086 # the analysis' words
        /usr/bin/time -o "$W/t" -f "%e %M" "$A" $args --model "$W/$shape" --db "$W/$shape.db" \
            --threads "$THREADS" >/dev/null 2>"$W/err"
        rc=$?
        set -- $(tail -n 1 "$W/t")
        if [ "$rc" = 0 ]; then line="$line $(printf '%11.1fs %12.0f' "$1" "$(($2 / 1024))")"
        elif [ "$rc" = 1 ]; then line="$line $(printf '%12s %12s' "refused" "-")" # one line, by design
        else line="$line $(printf '%12s %12s' "exit $rc" "-")"; fi
    done
    label=$(echo "$c" | sed "s|$W/||g; s|SAE|sae|g")
    printf '  %-44.44s%s\n' "$label" "$line"
done
echo "  wall time and peak resident memory of each command (/usr/bin/time), $THREADS threads; the"
echo "  machine has $(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo) GB. refused: the command's one-line refusal"
exit 0
