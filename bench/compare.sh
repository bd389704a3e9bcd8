#!/bin/sh
# compare.sh OLD_BENCH NEW_BENCH: two builds of bench_engine (e.g. the
# last release's and this checkout's) measured interleaved in one sitting,
# old and new alternating, ROUNDS (3) times each, and the median of each
# rate printed with new/old. For a change that must not slow the engine
# (a refactor must stay within 3%): training and inference tokens/s, the patching
# sweep's configuration-pairs/s and ACDC's evaluations/s.
#   env: THREADS (2), ROUNDS (3), MIN_TIME (3)
# The machine should be otherwise idle.
set -eu
OLD=$1 NEW=$2
THREADS=${THREADS:-2} ROUNDS=${ROUNDS:-3} MIN_TIME=${MIN_TIME:-3}
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
jget() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1" | tr -d '"'; }
# mode key args...
set_train="train tokens_per_s --mode train --n-layers 2"
set_infer="infer tokens_per_s --mode infer --n-layers 2"
set_patch="patch config_pairs_per_s --mode patch --n-layers 2 --n-ctx 128 --d-vocab 2048 --pairs 16 --naive-pairs 2 --probe-r 50"
set_disc="discover evals_per_s --mode discover --n-layers 2 --n-ctx 128 --d-vocab 2048 --pairs 64 --probe-r 50"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-9s %-18s %12s %12s %8s\n' mode rate old new new/old
for s in "$set_train" "$set_infer" "$set_patch" "$set_disc"; do
    set -- $s
    mode=$1 key=$2
    shift 2
    for r in $(seq "$ROUNDS"); do
        for which in old new; do
            bin=$OLD
            [ "$which" = new ] && bin=$NEW
            "$bin" --threads "$THREADS" --min-time "$MIN_TIME" "$@" >"$TMP/$mode.$which.$r.json" 2>/dev/null
            jget "$TMP/$mode.$which.$r.json" "$key" >>"$TMP/$mode.$which"
        done
    done
    o=$(median <"$TMP/$mode.old") n=$(median <"$TMP/$mode.new")
    printf '%-9s %-18s %12s %12s %8s\n' "$mode" "$key" "$o" "$n" "$(awk -v a="$o" -v b="$n" 'BEGIN {printf "%.3f", b / a}')"
done
