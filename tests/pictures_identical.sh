#!/bin/sh
# pictures_identical.sh -- draw every picture kind with two attnlab
# binaries from the same inputs and compare the files byte for byte
# (moving the pictures' code must not change a picture).
#
# Usage: sh tests/pictures_identical.sh OLD_BIN NEW_BIN DEMO_DIR OUT_DIR
#   DEMO_DIR  a copy of a `make demo` output: models/*, results.db,
#             data/tokens.val.bin (read only; copied into OUT_DIR/in)
#   OUT_DIR   made here: in/ (the inputs), old/, new/ (one folder per
#             binary: the pictures and each command's stdout, stderr and
#             exit status, so refusals are compared too)
# Every kind is drawn as PNG and SVG, with the options of
# experiments/demo.json's "pictures" and with the defaults, per model.
# When the database has no patch or paths run, OLD_BIN makes one first
# (both binaries then read the same database). Prints the number of
# identical and differing files; exits 1 if any differ.
# Analyses multiply matrices on oneDNN by default; comparing against a
# binary from before that backend, run with ATTNLAB_MATMUL=openblas in the
# environment so both sides use OpenBLAS's arithmetic.
set -eu
OLD=$(readlink -f "$1") NEW=$(readlink -f "$2") DEMO=$3 OUT=$4
PROMPT="Once upon a time, a girl named Bamurik found a red ball. Bamurik gave the ball to her friend Seoyeon, and Seoyeon said thank you to Bamurik."
rm -rf "$OUT"
mkdir -p "$OUT/in" "$OUT/old" "$OUT/new"
cp -a "$DEMO/models" "$OUT/in/"
sqlite3 "$DEMO/results.db" ".backup '$OUT/in/results.db'"
[ -f "$DEMO/data/tokens.val.bin" ] && cp "$DEMO/data/tokens.val.bin" "$OUT/in/"
IN=$(readlink -f "$OUT/in")
DB=$IN/results.db

# the database's model paths point at the copies, so pictures drawn by
# --run (whose model is the run's) read the same weights as the others
for m in "$IN"/models/*/; do
    m=${m%/}
    sqlite3 "$DB" "UPDATE models SET path = '$m' WHERE path LIKE '%/models/$(basename "$m")'"
done

for m in "$IN"/models/*/; do
    m=${m%/}
    n=$(sqlite3 "$DB" "SELECT count(*) FROM runs r JOIN models x ON x.model_id = r.model_id
        WHERE x.path LIKE '%$(basename "$m")' AND r.kind IN ('patch', 'paths')")
    if [ "$n" = 0 ]; then
        "$OLD" patch --model "$m" --db "$DB" --component resid > /dev/null
        "$OLD" patch --model "$m" --db "$DB" --component head > /dev/null
        "$OLD" paths --model "$m" --db "$DB" > /dev/null
    fi
done

# case NAME ARGS...: one heatmap call per binary, as png and svg
case_() {
    name=$1
    shift
    for fmt in png svg; do
        for side in old new; do
            bin=$OLD
            [ $side = new ] && bin=$NEW
            (cd "$OUT/$side" && rc=0 && "$bin" heatmap "$@" --out "$name.$fmt" \
                > "$name.$fmt.stdout" 2> "$name.$fmt.stderr" || rc=$?; echo $rc > "$name.$fmt.rc")
        done
    done
}

for m in "$IN"/models/*/; do
    m=${m%/}
    b=$(basename "$m")
    L=$(sed -n 's/.*"n_layers": *\([0-9]*\).*/\1/p' "$m/config.json" | head -n 1)
    M="--model $m"
    last=$((L - 1))
    for l in $(seq 0 "$last"); do
        case_ "$b-attention-L$l-prompt" $M --what attention --layer "$l" --prompt "$PROMPT"
        case_ "$b-attention-L$l-repeat" $M --what attention --layer "$l" --repeat 20
        case_ "$b-attention-$l.1-prompt" $M --what attention --layer "$l" --head 1 --prompt "$PROMPT"
        case_ "$b-qkpos-$l.0" $M --what qk-pos --layer "$l" --head 0
        case_ "$b-qkpos-$l.2-48" $M --what qk-pos --layer "$l" --head 2 --n-pos 48
        for k in qk ov; do
            case_ "$b-$k-$l.0" $M --what $k --layer "$l" --head 0
            case_ "$b-$k-$l.3-top30" $M --what $k --layer "$l" --head 3 --top-n 30
            [ -f "$IN/tokens.val.bin" ] &&
                case_ "$b-$k-$l.1-data" $M --what $k --layer "$l" --head 1 --top-n 30 --data "$IN/tokens.val.bin"
            case_ "$b-$k-$l.0-tokens" $M --what $k --layer "$l" --head 0 --tokens "#300,#301,#302,a,#7"
        done
    done
    case_ "$b-attention-nohead" $M --what attention
    case_ "$b-composition" $M --what composition
    case_ "$b-composition-db" $M --what composition --db "$DB"
    case_ "$b-spectrum" $M --what spectrum
    case_ "$b-spectrum-db" $M --what spectrum --db "$DB"
    case_ "$b-ablation" $M --what ablation --db "$DB"
    case_ "$b-ablation-probe" $M --what ablation --db "$DB" --metric delta_loss_probe
    case_ "$b-ablation-copy-mean" $M --what ablation --db "$DB" --metric delta_loss_copy --method mean
    case_ "$b-ablation-zero" $M --what ablation --db "$DB" --method zero
    case_ "$b-ablation-nodb" $M --what ablation
    case_ "$b-pruning" $M --what pruning --db "$DB"
    case_ "$b-training" $M --what training --db "$DB"
    case_ "$b-training-prev" $M --what training --db "$DB" --metric prev_token
    case_ "$b-training-dup" $M --what training --db "$DB" --metric duplicate_token
    for k in patching paths dla terms attrpatch circuit circuit-curve; do
        case_ "$b-$k" $M --what $k --db "$DB"
    done
    case_ "$b-circuit-tau" $M --what circuit --db "$DB" --tau 0.03
    case_ "$b-circuit-tau-bad" $M --what circuit --db "$DB" --tau 0.5
    case_ "$b-circuit-kept" $M --what circuit --db "$DB" --kept-only
done
# every run of the database drawn by --run (the model taken from the run)
for r in $(sqlite3 "$DB" "SELECT run_id FROM runs ORDER BY run_id"); do
    kind=$(sqlite3 "$DB" "SELECT kind FROM runs WHERE run_id = $r")
    # the kinds that take their model from the run (no --model) ...
    case $kind in
    patch) ks="patching paths" ;;
    paths) ks="paths" ;;
    attribute) ks="dla terms attrpatch" ;;
    discover) ks="circuit circuit-curve" ;;
    *) ks="" ;;
    esac
    for k in $ks; do case_ "run$r-$k" --what "$k" --db "$DB" --run "$r"; done
    # ... and those that need --model, given the run's own
    case $kind in
    ablate) ks="ablation" ;;
    prune) ks="pruning" ;;
    train) ks="training" ;;
    circuits) ks="composition spectrum" ;;
    *) ks="" ;;
    esac
    m=$(sqlite3 "$DB" "SELECT m.path FROM runs r JOIN models m ON m.model_id = r.model_id
        WHERE r.run_id = $r")
    [ -n "$m" ] || continue
    for k in $ks; do case_ "run$r-$k-model" --model "$m" --what "$k" --db "$DB" --run "$r"; done
done
case_ "sweep-induction" --what sweep-induction --db "$DB"
case_ "unknown-kind" --model "$IN/models/$(ls "$IN/models" | head -n 1)" --what nosuch

# the report draws every picture the database allows, as PNG and SVG
for side in old new; do
    bin=$OLD
    [ $side = new ] && bin=$NEW
    set --
    for m in "$IN"/models/*/; do set -- "$@" --model "${m%/}"; done
    (cd "$OUT/$side" && rc=0 && "$bin" report --db "$DB" "$@" --out report --figures svg \
        --prompt "$PROMPT" > report.stdout 2> report.stderr || rc=$?; echo $rc > report.rc)
done

same=0 diff=0
[ "$(cd "$OUT/old" && find . -type f | sort)" = "$(cd "$OUT/new" && find . -type f | sort)" ] ||
    { echo "DIFFERS: the lists of files"; diff=1; }
for f in $(cd "$OUT/old" && find . -type f | sort); do
    if cmp -s "$OUT/old/$f" "$OUT/new/$f"; then
        same=$((same + 1))
    else
        diff=$((diff + 1))
        echo "DIFFERS: $f"
    fi
done
pics=$(cd "$OUT/old" && find . -type f | grep -c -E '\.(png|svg)$' || true)
echo "identical: $same files ($pics pictures), differing: $diff"
[ "$diff" = 0 ]
