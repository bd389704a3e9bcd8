#!/bin/sh
# bench.sh -- `make bench`: training and inference tokens/s of the C
# engine beside the same model in PyTorch (bench/torch_bench.py), same
# sizes, same thread count, in this one invocation; then how cost grows
# with n_ctx at a constant 4096 tokens per step; then the activation-
# patching sweep, incremental against one full forward per configuration
# (bench_engine --mode patch; also with LayerNorm and biases); then
# attribution patching beside the
# patching sweeps it estimates (bench_engine --mode attr); then ACDC's
# edges tested per second (bench_engine --mode discover, W_U scaled so
# that every receiver is visited; also on the same shape with LayerNorm
# and biases), then ACDC at 3 and 4 layers (the full 746- and 1,378-edge
# graphs), without and with LayerNorm, and the head_pos sweep at 4
# layers, each beside its naive evaluation; then the models from elsewhere at their true shapes
# (bench_import.sh: attn-only-2l's forward beside PyTorch's on the same
# weights, and every analysis' time and peak memory on attn-only-2l and
# redwood_attn_2l); then the tokenizer bench. The 1- and 2-layer rows
# also run with the engine's products on OpenBLAS (ATTNLAB_MATMUL=
# openblas) and in bf16 beside oneDNN f32, against oneDNN's rate on the
# engine's shapes (bench_engine --mode matmul, f32 and bf16); the
# 2-layer patching sweep and ACDC also run on OpenBLAS.
# Every measurement runs in its own process, so each peak RSS is that
# run's own. Rates are from the median step time (see bench_engine.c).
#   env: BUILD (default build), THREADS (2), MIN_TIME (seconds per run, 3),
#        SWEEP_TIME (seconds per n_ctx sweep run, 2),
#        SWEEP_TORCH (1: also run PyTorch in the n_ctx sweep; 0: C only),
#        TORCH_PYTHON (the python with torch, /usr/bin/python3),
#        PATCH (0: skip the patching sweep, which takes minutes),
#        PATCH_PAIRS (64), PATCH_NAIVE_PAIRS (8), PATCH_R (induction R, 50),
#        ATTR_PAIRS (pairs of the attribution bench, 16: its reference is
#        every patching sweep), DEEP (0: skip the 4-layer runs),
#        DEEP_PAIRS (pairs of the 4-layer runs, 8), DEEP_NAIVE_PAIRS (of its
#        naive head_pos sweep, 2: 3,232 full forwards), SAE (0: skip the
#        sparse-autoencoder runs), SAE_STEPS (steps of the streamed run, 100),
#        IMPORT (0: skip the imported models, which take tens of minutes),
#        TOKBENCH (0: skip the tokenizer bench), INTERVALS (0: skip what
#        the scores' intervals cost)
# The machine should be otherwise idle: with other processes on the cores
# both sides slow down, PyTorch (many short parallel regions) far more.
BUILD=${BUILD:-build}
THREADS=${THREADS:-2}
MIN_TIME=${MIN_TIME:-3}
SWEEP_TIME=${SWEEP_TIME:-2}
SWEEP_TORCH=${SWEEP_TORCH:-1}
PATCH=${PATCH:-1}
PATCH_PAIRS=${PATCH_PAIRS:-64}
PATCH_NAIVE_PAIRS=${PATCH_NAIVE_PAIRS:-8}
PATCH_R=${PATCH_R:-50}
ATTR_PAIRS=${ATTR_PAIRS:-16}
DEEP=${DEEP:-1}
DEEP_PAIRS=${DEEP_PAIRS:-8}
DEEP_NAIVE_PAIRS=${DEEP_NAIVE_PAIRS:-2}
SAE=${SAE:-1}
SAE_STEPS=${SAE_STEPS:-100}
BIN=$BUILD/bench_engine
PY=${TORCH_PYTHON:-/usr/bin/python3}
DIR=$(dirname "$0")
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS"

[ -x "$BIN" ] || { echo "bench: $BIN not built (run 'make bench')" >&2; exit 1; }

# jget FILE KEY: value of "KEY" in a one-line flat JSON object (quotes stripped)
jget() {
    sed -n "s/.*\"$2\": \(\"[^\"]*\"\|[^,}]*\).*/\1/p" "$1" | tr -d '"'
}

HAVE_TORCH=0
TORCH_WHY="skipped (PyTorch not installed)"
if [ -x "$PY" ] && "$PY" -c 'import torch' >/dev/null 2>&1; then HAVE_TORCH=1; fi

# run NAME IMPL SECONDS ARGS...: one measurement into $TMP/NAME.IMPL.json
run() {
    name=$1 impl=$2 secs=$3
    shift 3
    out=$TMP/$name.$impl.json
    if [ "$impl" = c ]; then
        "$BIN" --threads "$THREADS" --min-time "$secs" "$@" >"$out" 2>"$out.err"
    elif [ "$impl" = cob ]; then # the C engine with its products on OpenBLAS
        ATTNLAB_MATMUL=openblas "$BIN" --threads "$THREADS" --min-time "$secs" "$@" \
            >"$out" 2>"$out.err"
    elif [ "$impl" = cbf ]; then # the C engine, products in bf16 (where the CPU has it)
        "$BIN" --threads "$THREADS" --min-time "$secs" --precision bf16 "$@" \
            >"$out" 2>"$out.err"
    elif [ "$HAVE_TORCH" = 1 ] && [ "$impl" = tbf ]; then # PyTorch under bf16 autocast
        "$PY" "$DIR/torch_bench.py" --threads "$THREADS" --min-time "$secs" --precision bf16 \
            "$@" >"$out" 2>"$out.err"
    elif [ "$HAVE_TORCH" = 1 ]; then
        "$PY" "$DIR/torch_bench.py" --threads "$THREADS" --min-time "$secs" "$@" \
            >"$out" 2>"$out.err"
    else
        : >"$out"
        return 0
    fi
    [ $? -eq 0 ] || { echo "bench: $impl $name failed: $(tail -n 1 "$out.err")" >&2; : >"$out"; }
    printf '.' >&2
}

# busy: percent of all cores busy over one second (other processes, as
# nothing of ours runs then); the numbers are only meaningful near 0.
busy() {
    a=$(head -n 1 /proc/stat)
    sleep 1
    b=$(head -n 1 /proc/stat)
    echo "$a $b" | awk '{ t1 = 0; t2 = 0; for (i = 2; i <= 9; i++) { t1 += $i; t2 += $(i + 11) }
        idle = ($16 + $17) - ($5 + $6)
        if (t2 > t1) printf "%.0f", 100 * (1 - idle / (t2 - t1)); else print 0 }'
}
BUSY0=$(busy)
printf 'bench: measuring (%s threads, %s s per run)' "$THREADS" "$MIN_TIME" >&2
run sgemm c "$MIN_TIME" --mode sgemm
run sgemm torch "$MIN_TIME" --mode sgemm
run sgemm tbf "$MIN_TIME" --mode sgemm
run matmul c "$MIN_TIME" --mode matmul
for L in 1 2; do
    for mode in train infer; do
        run "L$L-$mode" c "$MIN_TIME" --mode "$mode" --n-layers "$L"
        run "L$L-$mode" cob "$MIN_TIME" --mode "$mode" --n-layers "$L"
        run "L$L-$mode" cbf "$MIN_TIME" --mode "$mode" --n-layers "$L"
        run "L$L-$mode" torch "$MIN_TIME" --mode "$mode" --n-layers "$L"
        run "L$L-$mode" tbf "$MIN_TIME" --mode "$mode" --n-layers "$L"
    done
done
# the same 2-layer model with TransformerLens's LayerNorm and every bias,
# beside the plain one (f32 and bf16; PyTorch's reference model has them too)
for impl in c cbf; do
    run L2ln-train "$impl" "$MIN_TIME" --mode train --n-layers 2 --norm ln --biases all
done
# where a 2-layer training step's time goes, per backend (prof.h)
for impl in cob c cbf; do run prof2 "$impl" "$MIN_TIME" --mode train --n-layers 2 --profile; done
for T in 64 128 256 512 1024; do
    B=$((4096 / T))
    if [ "$T" = 256 ]; then # the default 2-layer run above
        cp "$TMP/L2-train.c.json" "$TMP/ctx$T-train.c.json"
        [ -f "$TMP/L2-train.torch.json" ] && cp "$TMP/L2-train.torch.json" "$TMP/ctx$T-train.torch.json"
        continue
    fi
    run "ctx$T-train" c "$SWEEP_TIME" --mode train --n-layers 2 --n-ctx "$T" --batch "$B"
    [ "$SWEEP_TORCH" = 1 ] &&
        run "ctx$T-train" torch "$SWEEP_TIME" --mode train --n-layers 2 --n-ctx "$T" --batch "$B"
done
# the demo's vocabulary; n_ctx fits the induction task's 2R+1 tokens
PATCH_CTX=$((2 * PATCH_R + 1 > 128 ? 2 * PATCH_R + 1 : 128))
[ "$PATCH" = 1 ] &&
    run patch c 0 --mode patch --n-layers 2 --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs "$PATCH_PAIRS" --naive-pairs "$PATCH_NAIVE_PAIRS" --probe-r "$PATCH_R"
# the same sweep with LayerNorm and every bias (its recomputed rows go
# through ln1)
[ "$PATCH" = 1 ] &&
    run patch-ln c 0 --mode patch --n-layers 2 --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs "$PATCH_PAIRS" --naive-pairs "$PATCH_NAIVE_PAIRS" --probe-r "$PATCH_R" \
        --norm ln --biases all
[ "$PATCH" = 1 ] &&
    run attr c 0 --mode attr --n-layers 2 --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs "$ATTR_PAIRS" --probe-r "$PATCH_R"
# ACDC visits every receiver (W_U x d_model: logits of order 1)
[ "$PATCH" = 1 ] &&
    run discover c 0 --mode discover --n-layers 2 --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs 32 --probe-r "$PATCH_R" --wu-scale 256
# ACDC on the same shape with LayerNorm and every bias (each changed
# channel formed before its own ln1)
[ "$PATCH" = 1 ] &&
    run discover-ln c 0 --mode discover --n-layers 2 --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs 32 --probe-r "$PATCH_R" --norm ln --biases all --wu-scale 256
# the same two analyses with the products on OpenBLAS (cob), then in bf16
# (cbf), beside (the naive patching sweep only on 2 pairs: its rate, not
# the comparison, needs 8)
for impl in cob cbf; do
    [ "$PATCH" = 1 ] || break
    run patch "$impl" 0 --mode patch --n-layers 2 --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs "$PATCH_PAIRS" --naive-pairs 2 --probe-r "$PATCH_R"
    run discover "$impl" 0 --mode discover --n-layers 2 --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs 32 --probe-r "$PATCH_R" --wu-scale 256
done
# sparse autoencoders: TopK training steps on random activations (C and
# PyTorch), then the whole trainer on a 2-layer model's layer-1 z (a
# model trained one step on built-in stories: the forward's cost does not
# depend on what the weights learned)
if [ "$SAE" = 1 ]; then
    run sae c "$MIN_TIME" --mode sae
    run sae cbf "$MIN_TIME" --mode sae
    run sae torch "$MIN_TIME" --mode sae
    A=$BUILD/attnlab
    if [ -x "$A" ] && "$A" data synth --out "$TMP/s.txt" --stories 3000 >/dev/null 2>&1 &&
        "$A" tokenizer train --in "$TMP/s.txt" --vocab 2048 --out "$TMP/tok.json" >/dev/null 2>&1 &&
        "$A" encode --tokenizer "$TMP/tok.json" --in "$TMP/s.txt" --out "$TMP/s.bin" >/dev/null 2>&1 &&
        "$A" train --data "$TMP/s.train.bin" --tokenizer "$TMP/tok.json" --out "$TMP/m2" \
            --steps 1 --eval-every 0 --threads "$THREADS" >/dev/null 2>&1; then
        run sae-stream c 0 --mode sae-stream --sae-model "$TMP/m2" --sae-data "$TMP/s.train.bin" \
            --sae-out "$TMP/sae" --sae-layer 1 --sae-steps "$SAE_STEPS"
    fi
fi
# 3 and 4 layers, without and with LayerNorm and every bias: ACDC visits
# every receiver (W_U x d_model: logits of order 1)
for nl in 3 4; do
    [ "$PATCH" = 1 ] && [ "$DEEP" = 1 ] || break
    run "discover$nl" c 0 --mode discover --n-layers "$nl" --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs "$DEEP_PAIRS" --probe-r "$PATCH_R" --wu-scale 256
    run "discover$nl-ln" c 0 --mode discover --n-layers "$nl" --n-ctx "$PATCH_CTX" \
        --d-vocab 2048 --pairs "$DEEP_PAIRS" --probe-r "$PATCH_R" --wu-scale 256 --norm ln \
        --biases all
done
[ "$PATCH" = 1 ] && [ "$DEEP" = 1 ] &&
    run patch4 c 0 --mode patch --n-layers 4 --n-ctx "$PATCH_CTX" --d-vocab 2048 \
        --pairs "$DEEP_PAIRS" --naive-pairs "$DEEP_NAIVE_PAIRS" --probe-r "$PATCH_R"
echo >&2

BUSY1=$(busy)
SGEMM=$(jget "$TMP/sgemm.c.json" gflops)
echo
echo "attnlab bench: $(nproc) cores, $THREADS threads; other processes kept the cores" \
    "$BUSY0% busy before the runs, $BUSY1% after"
[ "$BUSY0" -gt 10 ] || [ "$BUSY1" -gt 10 ] &&
    echo "  NOTE: the machine was not idle; these numbers are noisy (PyTorch suffers more)"
echo "  C engine BLAS: $(jget "$TMP/sgemm.c.json" blas) ($(jget "$TMP/sgemm.c.json" blas_threads) threads)"
if [ "$HAVE_TORCH" = 1 ]; then
    TBLAS=$(jget "$TMP/sgemm.torch.json" blas)
    echo "  PyTorch $(jget "$TMP/sgemm.torch.json" torch) BLAS: $TBLAS ($(jget "$TMP/sgemm.torch.json" blas_threads) threads)"
    case $TBLAS in
    *openblas*) ;;
    *) echo "  WARNING: PyTorch is not on OpenBLAS; the reference BLAS is ~15x slower and the" \
            "ratios below mean nothing (apt-get install libopenblas-dev selects OpenBLAS)" ;;
    esac
else
    echo "  PyTorch: $TORCH_WHY"
fi
printf '  sgemm 4096x4096x4096: C %s GFLOP/s' "$SGEMM"
[ "$HAVE_TORCH" = 1 ] && printf ', PyTorch (torch.mm) %s GFLOP/s' "$(jget "$TMP/sgemm.torch.json" gflops)"
echo
echo

# row LABEL NAME: one table line from $TMP/NAME.{c,torch}.json
row() {
    c=$TMP/$2.c.json t=$TMP/$2.torch.json
    ctok=$(jget "$c" tokens_per_s) cgf=$(jget "$c" gflops) crss=$(jget "$c" peak_rss_mb)
    if [ -s "$t" ]; then
        ttok=$(jget "$t" tokens_per_s) trss=$(jget "$t" peak_rss_mb)
        ratio=$(awk -v a="$ctok" -v b="$ttok" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    elif [ "$HAVE_TORCH" = 1 ]; then
        ttok="-" trss="-" ratio="-"
    else
        ttok=$TORCH_WHY trss="" ratio=""
    fi
    pct=$(awk -v a="$cgf" -v b="$SGEMM" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "-" }')
    if [ "$HAVE_TORCH" = 1 ]; then
        printf '%-24s %10s %10s %7s %9s %8s %8s %8s\n' "$1" "$ctok" "$ttok" "$ratio" "$cgf" "$pct" "$crss" "$trss"
    else
        printf '%-24s %10s %9s %8s %8s   %s\n' "$1" "$ctok" "$cgf" "$pct" "$crss" "$ttok"
    fi
}

header() {
    echo "$1"
    if [ "$HAVE_TORCH" = 1 ]; then
        printf '%-24s %10s %10s %7s %9s %8s %8s %8s\n' "" "tok/s C" "tok/s pt" "C/pt" \
            "GFLOP/s C" "%sgemm" "RSS C MB" "RSS pt MB"
    else
        printf '%-24s %10s %9s %8s %8s   %s\n' "" "tok/s C" "GFLOP/s C" "%sgemm" "RSS C MB" "PyTorch"
    fi
}

header "default models: d_model 256, 8x32 heads, n_ctx 256, batch 16, d_vocab 4096"
for L in 1 2; do
    row "$L-layer training" "L$L-train"
    row "$L-layer inference" "L$L-infer"
done
row "2-layer LN + biases" "L2ln-train"
# LayerNorm and biases' share of a training step: plain tok/s over LN tok/s
for impl in c cbf; do
    a=$(jget "$TMP/L2-train.$impl.json" tokens_per_s) b=$(jget "$TMP/L2ln-train.$impl.json" tokens_per_s)
    awk -v a="$a" -v b="$b" -v i="$impl" 'BEGIN { if (a > 0 && b > 0)
        printf "  LN + biases: a %s training step takes %.3fx the plain one'"'"'s\n", i == "c" ? "f32" : "bf16", a / b }'
done
echo
header "2-layer training at 4096 tokens per step"
for T in 64 128 256 512 1024; do
    row "n_ctx $T x batch $((4096 / T))" "ctx$T-train"
done
echo
echo "tok/s from the median step; training = forward + backward + AdamW with clipping,"
echo "inference = forward with loss; GFLOP/s counted analytically (training = 3x forward);"
echo "%sgemm = C GFLOP/s as a share of the C sgemm rate above; pt = PyTorch."

# the engine's matrix products on OpenBLAS (ATTNLAB_MATMUL=openblas) and on
# oneDNN (the default), each run beside the other in this one invocation,
# against the rate of the engine's own shapes (bench_engine --mode matmul)
if [ -s "$TMP/matmul.c.json" ]; then
    M=$TMP/matmul.c.json
    MF=$(jget "$M" onednn_f32_gflops)
    echo
    echo "matmul on the engine's shapes (GFLOP/s): oneDNN f32 $MF, oneDNN bf16" \
        "$(jget "$M" onednn_bf16_gflops), OpenBLAS $(jget "$M" openblas_gflops)," \
        "al_sgemm $(jget "$M" al_sgemm_gflops) ($(jget "$M" impl_f32))"
    MB=$(jget "$M" onednn_bf16_gflops)
    printf '%-18s %10s %10s %10s %8s %8s %7s %7s %7s\n' "" "tok/s OB" "tok/s f32" "tok/s bf16" \
        "f32/OB" "bf16/OB" "%mm OB" "%mm f32" "%mm bf"
    for L in 1 2; do
        for mode in train infer; do
            o=$TMP/L$L-$mode.cob.json d=$TMP/L$L-$mode.c.json b=$TMP/L$L-$mode.cbf.json
            [ -s "$o" ] && [ -s "$d" ] || continue
            bt=-; bg=0
            [ -s "$b" ] && bt=$(jget "$b" tokens_per_s) bg=$(jget "$b" gflops)
            awk -v lab="$L-layer $mode" -v ot="$(jget "$o" tokens_per_s)" -v dt="$(jget "$d" tokens_per_s)" \
                -v bt="$bt" -v og="$(jget "$o" gflops)" -v dg="$(jget "$d" gflops)" -v bg="$bg" \
                -v mf="$MF" -v mb="$MB" 'BEGIN {
                printf "%-18s %10s %10s %10s %7.2fx %7s %6.0f%% %6.0f%% %6s\n", lab, ot, dt, bt,
                    dt / ot, bt == "-" ? "-" : sprintf("%.2fx", bt / ot), 100 * og / mf,
                    100 * dg / mf, bt == "-" ? "-" : sprintf("%.0f%%", 100 * bg / mb) }'
        done
    done
    echo "OB = products on OpenBLAS (ATTNLAB_MATMUL=openblas), f32 and bf16 on oneDNN (bf16 '-'"
    echo "when the CPU has no native bf16); %mm = the run's GFLOP/s as a share of oneDNN's rate"
    echo "on the engine's shapes in its precision (the OpenBLAS and f32 runs: the f32 rate)."
    if [ -s "$TMP/prof2.c.json" ]; then
        echo
        echo "where a 2-layer training step goes (ms per step, bench_engine --profile)"
        printf '%-12s %10s %10s %10s\n' "" "OpenBLAS" "oneDNN f32" "oneDNN bf16"
        for op in embed qkv att_fwd wo unembed ce unembed_bwd wo_bwd att_bwd qkv_bwd embed_bwd \
            adamw sum step; do
            v() { [ -s "$TMP/prof2.$1.json" ] && jget "$TMP/prof2.$1.json" "$op" || echo -; }
            printf '%-12s %10s %10s %10s\n' "$op" "$(v cob)" "$(v c)" "$(v cbf)"
        done
        echo "each operation's wall-clock time (its products, its own loops and the waits inside"
        echo "it; qkv = q|k|v projection, wo = gates and output projection, ce = cross-entropy"
        echo "forward and backward, adamw = gradient norm, clipping, update); step = the median step."
    fi
    if [ "$HAVE_TORCH" = 1 ]; then
        echo
        echo "beside PyTorch $(jget "$TMP/sgemm.torch.json" torch) in f32 and under bf16 CPU autocast" \
            "(its own 4096^3 product: f32 $(jget "$TMP/sgemm.torch.json" gflops) GFLOP/s, bf16" \
            "$(jget "$TMP/sgemm.tbf.json" gflops) GFLOP/s)"
        printf '%-18s %10s %10s %10s %10s %9s %9s
' "" "tok/s f32" "tok/s pt" "tok/s bf16" \
            "tok/s ptbf" "f32/pt" "bf16/ptbf"
        for L in 1 2; do
            for mode in train infer; do
                d=$TMP/L$L-$mode.c.json t=$TMP/L$L-$mode.torch.json
                b=$TMP/L$L-$mode.cbf.json tb=$TMP/L$L-$mode.tbf.json
                [ -s "$d" ] && [ -s "$t" ] || continue
                bt=-; tbt=-
                [ -s "$b" ] && bt=$(jget "$b" tokens_per_s)
                [ -s "$tb" ] && tbt=$(jget "$tb" tokens_per_s)
                awk -v lab="$L-layer $mode" -v dt="$(jget "$d" tokens_per_s)" \
                    -v tt="$(jget "$t" tokens_per_s)" -v bt="$bt" -v tbt="$tbt" 'BEGIN {
                    printf "%-18s %10s %10s %10s %10s %8.2fx %9s\n", lab, dt, tt, bt, tbt, dt / tt,
                        (bt == "-" || tbt == "-") ? "-" : sprintf("%.2fx", bt / tbt) }'
            done
        done
        echo "pt = PyTorch f32, ptbf = PyTorch under torch.autocast(\"cpu\", bfloat16); both on"
        echo "$THREADS threads, the same model, batch and sequence length as the engine's rows."
    fi
fi

if [ "$PATCH" = 1 ] && [ -s "$TMP/patch.c.json" ]; then
    P=$TMP/patch.c.json
    NP=$(jget "$P" pairs) NN=$(jget "$P" naive_pairs)
    echo
    echo "activation patching, head_pos sweep on induction ($(jget "$P" configs) configurations =" \
        "every head x position;"
    echo "R $PATCH_R, batch $(jget "$P" batch)), 2-layer d_model 256, 8x32 heads, d_vocab 2048"
    printf '%-24s %10s %14s %6s %9s\n' "" "configs/s" "config-pairs/s" "pairs" "seconds"
    printf '%-24s %10s %14s %6s %9s\n' "incremental (delta)" "$(jget "$P" configs_per_s)" \
        "$(jget "$P" config_pairs_per_s)" "$NP" "$(jget "$P" seconds)"
    printf '%-24s %10s %14s %6s %9s\n' "full forward (naive)" \
        "$(awk -v r="$(jget "$P" naive_config_pairs_per_s)" -v n="$NP" 'BEGIN { printf "%.2f%s", r / n, "*" }')" \
        "$(jget "$P" naive_config_pairs_per_s)" "$NN" "$(jget "$P" naive_seconds)"
    echo "speed-up $(jget "$P" speedup)x per configuration-pair ($(jget "$P" speedup_same_pairs)x on" \
        "the same $NN pairs, metrics within $(jget "$P" max_metric_diff))"
    awk -v s="$(jget "$P" naive_seconds)" -v a="$NN" -v b="$NP" 'BEGIN {
        printf "* naive on %d of the %d pairs (all would take ~%.0f s); configs/s from its per-pair rate\n",
            a, b, s * b / a }'
fi

if [ "$PATCH" = 1 ] && [ -s "$TMP/patch-ln.c.json" ]; then
    P=$TMP/patch-ln.c.json
    echo "with LayerNorm and every bias: incremental $(jget "$P" config_pairs_per_s)" \
        "configuration-pairs/s, naive $(jget "$P" naive_config_pairs_per_s) ($(jget "$P" naive_pairs)" \
        "pairs): $(jget "$P" speedup)x ($(jget "$P" speedup_same_pairs)x on the same pairs," \
        "metrics within $(jget "$P" max_metric_diff))"
fi

if [ "$PATCH" = 1 ] && [ -s "$TMP/attr.c.json" ]; then
    A=$TMP/attr.c.json
    echo
    echo "attribution patching on induction ($(jget "$A" pairs) pairs, R $PATCH_R): every head," \
        "head x position and path edge ($(jget "$A" configs) estimates)"
    printf '%-44s %9s\n' "" "seconds"
    printf '%-44s %9s\n' "attribution patching (one pass per batch)" "$(jget "$A" attr_seconds)"
    printf '%-44s %9s\n' "two forwards + one backward per batch" "$(jget "$A" fwd_bwd_seconds)"
    printf '%-44s %9s\n' "the patching sweeps it estimates (incremental)" "$(jget "$A" patch_seconds)"
    echo "attribution = $(jget "$A" attr_over_fwd_bwd)x two forwards + a backward;" \
        "$(jget "$A" speedup)x faster than patching (Pearson with it: heads" \
        "$(jget "$A" pearson_head), edges $(jget "$A" pearson_edge); random weights)"
fi

if [ "$PATCH" = 1 ] && [ -s "$TMP/discover.c.json" ]; then
    Q=$TMP/discover.c.json
    echo
    echo "circuit discovery, ACDC (tau 0.01, KL) on induction ($(jget "$Q" pairs) pairs, R $PATCH_R)," \
        "2-layer d_model 256, 8x32 heads, random weights"
    echo "$(jget "$Q" edges_tested) of $(jget "$Q" edges) edges tested in $(jget "$Q" seconds) s:" \
        "$(jget "$Q" edges_per_s) edges/s, $(jget "$Q" evals_per_s) circuit evaluations/s;" \
        "$(jget "$Q" kept) kept"
    echo "a naive evaluation (both runs forward, no reuse) takes at least" \
        "$(jget "$Q" naive_eval_floor_s) s: ACDC is $(jget "$Q" speedup_vs_naive_floor)x faster per evaluation"
    QO=$TMP/discover.cob.json PO=$TMP/patch.cob.json
    if [ -s "$QO" ] && [ -s "$PO" ]; then
        echo "with the products on OpenBLAS (ATTNLAB_MATMUL=openblas):" \
            "ACDC $(jget "$QO" evals_per_s) evaluations/s (oneDNN/OpenBLAS" \
            "$(awk -v a="$(jget "$Q" evals_per_s)" -v b="$(jget "$QO" evals_per_s)" 'BEGIN { if (b > 0) printf "%.2f", a / b }')x)," \
            "head_pos patching $(jget "$PO" config_pairs_per_s) configuration-pairs/s (oneDNN/OpenBLAS" \
            "$(awk -v a="$(jget "$TMP/patch.c.json" config_pairs_per_s)" -v b="$(jget "$PO" config_pairs_per_s)" 'BEGIN { if (b > 0) printf "%.2f", a / b }')x)"
    fi
fi

if [ "$PATCH" = 1 ] && [ -s "$TMP/discover-ln.c.json" ]; then
    Q=$TMP/discover-ln.c.json
    echo "with LayerNorm and every bias ($(jget "$Q" pairs) pairs): $(jget "$Q" evals) evaluations in" \
        "$(jget "$Q" seconds) s ($(jget "$Q" evals_per_s)/s), $(jget "$Q" kept) kept; a naive" \
        "evaluation takes at least $(jget "$Q" naive_eval_floor_s) s:" \
        "$(jget "$Q" speedup_vs_naive_floor)x faster per evaluation"
fi

if [ "$PATCH" = 1 ] && [ "$DEEP" = 1 ]; then
    for nl in 3 4; do
        for v in "" -ln; do
            Q=$TMP/discover$nl$v.c.json
            [ -s "$Q" ] || continue
            [ "$nl$v" = 3 ] && echo
            [ "$nl$v" = 3 ] && echo "ACDC (tau 0.01, KL; W_U x 256 so every receiver is visited) at 3 and 4" \
                "layers (d_model 256, 8x32 heads, d_vocab 2048, random weights), induction," \
                "$(jget "$Q" pairs) pairs, R $PATCH_R:"
            echo "  $nl layers$([ -n "$v" ] && echo ", LayerNorm and every bias"):" \
                "$(jget "$Q" edges_tested) of $(jget "$Q" edges) edges tested, $(jget "$Q" evals)" \
                "evaluations in $(jget "$Q" seconds) s ($(jget "$Q" evals_per_s)/s)," \
                "$(jget "$Q" kept) kept; naive floor $(jget "$Q" naive_eval_floor_s) s:" \
                "$(jget "$Q" speedup_vs_naive_floor)x faster per evaluation"
        done
    done
fi
if [ "$PATCH" = 1 ] && [ "$DEEP" = 1 ] && [ -s "$TMP/patch4.c.json" ]; then
    P=$TMP/patch4.c.json
    echo "activation patching, head_pos ($(jget "$P" configs) configurations): incremental" \
        "$(jget "$P" config_pairs_per_s) configuration-pairs/s, naive (one full patched forward" \
        "each, on $(jget "$P" naive_pairs) pairs) $(jget "$P" naive_config_pairs_per_s):" \
        "$(jget "$P" speedup)x ($(jget "$P" speedup_same_pairs)x on the same pairs; metrics within" \
        "$(jget "$P" max_metric_diff))"
fi

if [ "$SAE" = 1 ] && [ -s "$TMP/sae.c.json" ]; then
    S=$TMP/sae.c.json T=$TMP/sae.torch.json
    echo
    echo "sparse autoencoder (TopK k $(jget "$S" k), d_in $(jget "$S" d_in), d_sae $(jget "$S" d_sae)," \
        "batch $(jget "$S" batch)): training steps on random activations"
    printf '%-24s %12s %20s %8s\n' "" "activations/s" "dense-equiv GFLOP/s" "%sgemm"
    for f in "$S" "$T"; do
        [ -s "$f" ] || continue
        printf '%-24s %12s %20s %8s\n' "$([ "$f" = "$S" ] && echo "C (sparse TopK)" || echo "PyTorch (dense, SAELens)")" \
            "$(jget "$f" acts_per_s)" "$(jget "$f" gflops_dense_equiv)" \
            "$(awk -v a="$(jget "$f" gflops_dense_equiv)" -v b="$SGEMM" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b }')"
    done
    [ -s "$T" ] && echo "C/PyTorch $(awk -v a="$(jget "$S" acts_per_s)" -v b="$(jget "$T" acts_per_s)" 'BEGIN { printf "%.1fx", a / b }');" \
        "dense-equivalent = the 6·batch·d_in·d_sae FLOPs a dense implementation does, as a share of sgemm"
    if [ -s "$TMP/sae-stream.c.json" ]; then
        W=$TMP/sae-stream.c.json
        echo "the whole trainer on layer-1 z of a 2-layer model (d_model 256, n_ctx 256; the model's forward" \
            "included), $(jget "$W" steps) steps: $(jget "$W" acts_per_s) activations/s," \
            "$(jget "$W" minutes_per_10m) min per 10 M activations"
    fi
fi

# f32 against bf16 products for the analyses and the SAE
BF_LINE=
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }'; }
if [ -s "$TMP/patch.cbf.json" ]; then
    f=$(jget "$TMP/patch.c.json" config_pairs_per_s) b=$(jget "$TMP/patch.cbf.json" config_pairs_per_s)
    BF_LINE="$BF_LINE
  head_pos patching (2 layers): f32 $f, bf16 $b configuration-pairs/s (bf16/f32 $(ratio "$b" "$f")x)"
fi
if [ -s "$TMP/discover.cbf.json" ]; then
    f=$(jget "$TMP/discover.c.json" evals_per_s) b=$(jget "$TMP/discover.cbf.json" evals_per_s)
    BF_LINE="$BF_LINE
  ACDC (2 layers, 32 pairs): f32 $f, bf16 $b circuit evaluations/s (bf16/f32 $(ratio "$b" "$f")x)"
fi
if [ -s "$TMP/sae.cbf.json" ]; then
    f=$(jget "$TMP/sae.c.json" acts_per_s) b=$(jget "$TMP/sae.cbf.json" acts_per_s)
    BF_LINE="$BF_LINE
  SAE training steps (TopK, random activations): f32 $f, bf16 $b activations/s (bf16/f32 $(ratio "$b" "$f")x)"
fi
if [ -n "$BF_LINE" ]; then
    echo
    echo "analyses and SAE training in both precisions (oneDNN; --precision bf16 rounds the inputs"
    echo "of products made outside a parallel region; the rest stays f32, gemm.h):$BF_LINE"
fi

if [ "${IMPORT:-1}" = 1 ] && [ -x "$BUILD/attnlab" ]; then
    sh "$DIR/bench_import.sh" "$BUILD/attnlab" "$BIN" "$PY" "$THREADS" "$MIN_TIME"
fi

if [ "${INTERVALS:-1}" = 1 ] && [ -x "$BUILD/attnlab" ]; then
    echo
    sh "$DIR/bench_intervals.sh" "$BUILD/attnlab" "$THREADS"
fi

if [ "${TOKBENCH:-1}" = 1 ] && [ -f "$DIR/bench_tokenizer.sh" ] && [ -x "$BUILD/attnlab" ]; then
    echo
    sh "$DIR/bench_tokenizer.sh" "$BUILD/attnlab"
fi
exit 0
