#!/bin/sh
# bench_intervals.sh ATTNLAB THREADS -- what the intervals cost: each
# analysis that reports them (scores with a probe of 64 sequences, ablate
# --each, patch, attribute with attribution patching) on a 2-layer model
# of the default shape, with --bootstrap 0 (standard errors only) and at
# the default 500 resamples, interleaved, 5 runs each; the medians and
# their ratio (the intervals are computed from the per-item values the
# analysis keeps, so they must stay within 20% of it).
set -u
A=$1
TH=${2:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$A" data synth --out "$T/s.txt" --stories 3000 >/dev/null 2>&1 &&
    "$A" tokenizer train --in "$T/s.txt" --vocab 2048 --out "$T/tok.json" >/dev/null 2>&1 &&
    "$A" encode --tokenizer "$T/tok.json" --in "$T/s.txt" --out "$T/s.bin" >/dev/null 2>&1 &&
    "$A" train --data "$T/s.train.bin" --tokenizer "$T/tok.json" --out "$T/m2" --steps 1 \
        --eval-every 0 --threads "$TH" >/dev/null 2>&1 || {
    echo "intervals: could not make the model"
    exit 0
}
secs() { # the wall seconds of one run of analysis $1 with --bootstrap $2
    s=$(date +%s.%N)
    case $1 in
    ablate) "$A" ablate --model "$T/m2" --db "$T/r.db" --data "$T/s.val.bin" --threads "$TH" \
        --bootstrap "$2" >/dev/null 2>&1 ;;
    attribute) "$A" attribute --model "$T/m2" --db "$T/r.db" --threads "$TH" --no-compare \
        --bootstrap "$2" >/dev/null 2>&1 ;;
    *) "$A" "$1" --model "$T/m2" --db "$T/r.db" --threads "$TH" --bootstrap "$2" >/dev/null 2>&1 ;;
    esac
    e=$(date +%s.%N)
    echo "$s $e" | awk '{ printf "%.4f\n", $2 - $1 }'
}
med() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for an in scores ablate patch attribute; do
    : > "$T/b0"
    : > "$T/b500"
    for i in 1 2 3 4 5; do
        secs $an 0 >> "$T/b0"
        secs $an 500 >> "$T/b500"
    done
    m0=$(med "$T/b0")
    m5=$(med "$T/b500")
    echo "$an $m0 $m5" | awk '{ printf "intervals: %-9s (2 layers x 8 heads, d_model 256), median of 5 interleaved: %.3f s with --bootstrap 0, %.3f s at the default 500 resamples: %+.1f%% (%s the 20%% bar)\n", $1, $2, $3, 100 * ($3 / $2 - 1), ($3 / $2 - 1 <= 0.2) ? "within" : "over" }'
done
