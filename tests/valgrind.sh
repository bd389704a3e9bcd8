#!/bin/sh
# valgrind memcheck over the CLI end to end: every command once, on a tiny
# model, each under
#   valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
# Any invalid read/write, use of uninitialised memory or definite leak
# fails the script (and `make valgrind`). The commands that make the model
# run one at a time, then the others two at a time (lanes, one per core:
# each takes minutes under valgrind). "Still reachable" and "possibly
# lost" blocks are not errors: the OpenMP and OpenBLAS runtimes keep their
# thread pools and buffers until exit by design.
#
#   sh tests/valgrind.sh BINARY       (make valgrind builds build-vg/attnlab)
#
# The binary must not use AVX-512 (valgrind 3.19 cannot decode it), hence
# the x86-64-v2 build, and OpenBLAS is told to use its Haswell (AVX2)
# kernels. oneDNN sees valgrind's CPU, which has no AVX-512, so al_sgemm
# runs every product on OpenBLAS here (gemm.c); the primitive cache is
# still exercised (each shape's failed lookup is cached). One thread:
# valgrind runs threads one at a time anyway.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d /tmp/attnlab-valgrind-XXXXXX)
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell
# no restart with a passive wait policy on a busy machine (main.c): the
# new process would run outside valgrind
export ATTNLAB_OMP_PASSIVE=0
t0=$(date +%s)
# fontconfig's own leaks under cairo's text (tests/valgrind.supp says why)
supp=$(cd "$(dirname "$0")" && pwd)/valgrind.supp
hf=$(cd "$(dirname "$0")" && pwd)/fuzz/hf_tokenizer/pairs-nfc.json

vg() { # vg NAME WANT ARGS...: run attnlab ARGS under memcheck, expect exit code WANT
    name=$1 want=$2
    shift 2
    s=$(date +%s)
    valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite --track-origins=yes --log-file="$tmp/$name.vg" \
        --suppressions="$supp" \
        "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    if [ $rc = "$want" ] && [ ! -s "$tmp/$name.vg" ]; then
        echo "valgrind ok   $name ($(( $(date +%s) - s )) s)"
    else
        echo "valgrind FAIL $name (exit $rc, want $want): attnlab $*"
        sed 's/^/    /' "$tmp/$name.vg" | head -60
        tail -n 5 "$tmp/$name.err" | sed 's/^/    stderr: /'
        : >"$tmp/FAILED"
    fi
}

cd "$tmp" || exit 1
vg synth 0 data synth --out stories.txt --stories 60 --seed 3
vg tokenizer 0 tokenizer train --in stories.txt --vocab 300 --out tok.json
vg encode 0 encode --tokenizer tok.json --in stories.txt --out s.bin --val 0.2
vg tokshow 0 tokenizer show --tokenizer tok.json --text "Once upon a time" --special
# a Hugging Face tokenizer.json (NFC, added tokens; the fuzz seed's trailing text is ignored)
vg hftok 0 tokenizer show --tokenizer "$hf" --text "cafe$(printf '\314\201')  hello 12<|endoftext|>" --special
small="--d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 --eval-every 2 --eval-batches 2 --threads 1"
vg train 130 train --data s.train.bin --val s.val.bin --tokenizer tok.json --out m --n-layers 2 \
    --steps 4 --ckpt-every 2 --stop-at 2 $small --db r.db
vg resume 0 train --resume m
# The analyses in two lanes, one per core (each lane's own order keeps
# what its commands read: heatmaps after their runs, the mask after prune);
# then the report and the error paths beside the experiments.
lane_a() {
    vg run 0 run --model m --prompt "Once upon a time, Bamurik saw Bamurik" --generate 5 --json
    vg track 0 run --model m --prompt "Bamurik saw Bamurik" --track Bamurik
    vg circuits 0 circuits --model m --db r.db --top-k 5 --mc-samples 5 --threads 1
    vg scores 0 scores --model m --db r.db --data s.val.bin --probe-r 10 --probe-n 4 --batches 2 --batch 2 --threads 1
    vg ablate 0 ablate --model m --db r.db --data s.val.bin --pairs --method mean --probe-r 10 \
        --probe-n 4 --batches 2 --batch 2 --threads 1
    vg prune 0 prune --model m --db r.db --data s.val.bin --method gradient --budget -1 --batches 2 \
        --batch 2 --threads 1
    vg attnstats 0 attnstats --model m --db r.db --data s.val.bin --batches 1 --batch 2 --threads 1
    vg heatmap-view 0 heatmap --model m --what view --metric attn_entropy --db r.db --out view.png --threads 1
    vg mask 0 run --model m --prompt "the cat" --mask m/mask-gradient.json
    vg heatmap 0 heatmap --model m --what attention --repeat 5 --out att.png --threads 1
    vg heatmap-ov 0 heatmap --model m --what ov --layer 1 --head 2 --top-n 8 --out ov.png --threads 1
}
lane_b() {
    vg patch 0 patch --model m --db r.db --component head_pos --probe-r 5 --n 3 --batch 2 --threads 1
    vg paths 0 paths --model m --db r.db --probe-r 5 --n 3 --batch 2 --threads 1
    vg attribute 0 attribute --model m --db r.db --probe-r 5 --n 3 --batch 2 --no-patching --threads 1
    vg attribute-data 0 attribute --model m --db r.db --data s.val.bin --windows 2 --threads 1
    vg attribute-prompt 0 attribute --model m --db r.db --prompt "Once upon a time" --no-paths --threads 1
    vg discover 0 discover --model m --db r.db --probe-r 5 --n 3 --batch 2 --sweep 0,0.1 --threads 1
    vg discover-eap 0 discover --model m --db r.db --probe-r 5 --n 3 --method eap --out circ --threads 1
    vg heatmap-patching 0 heatmap --model m --what patching --db r.db --out patch.png --threads 1
    vg heatmap-paths 0 heatmap --model m --what paths --db r.db --out paths.png --threads 1
}
lane_a >"$tmp/lane-a.log" 2>&1 &
lane_b >"$tmp/lane-b.log" 2>&1
wait
cat "$tmp/lane-a.log" "$tmp/lane-b.log"
lane_c() {
    vg debug 0 debug-dump --model m --data s.val.bin --out d.safetensors --adam-steps 2 --threads 1
    vg experiment 0 experiment exp.json --out exp --threads 1
    # a sweep: its tasks listed and checked, one task run (with its sweep_task row)
    vg sweep-list 0 experiment sweep.json --list-tasks --out sw
    vg sweep-task 0 experiment sweep.json --task 3 --out sw --threads 1
}
lane_d() {
    vg report 0 report --db r.db --model m --out rep --repeat 5 --top-n 8 --threads 1
    # error paths leak nothing either
    printf '{"name": "x", "models": [{"name": "a"}], "sweep": {"train.opt.lr": [1]}}' > bad-sweep.json
    vg bad-sweep 1 experiment bad-sweep.json --list-tasks
    sed 's/"seed": \[1, 2\]/"train.lr": [0.1, "x"]/' sweep.json > bad-sweep2.json
    vg bad-sweep-value 1 experiment bad-sweep2.json --jobs 2
    vg bad-model 1 run --model nonexistent --prompt x
    printf '{"name": "x", "train": {"stpes": 3}}' > bad.json
    vg bad-experiment 1 experiment bad.json --dry-run
    vg bad-tokens 1 train --data stories.txt --out m2
    vg bad-patch 1 patch --model m --db r.db --probe-r 40
    vg bad-attribute 1 attribute --model m --db r.db --prompt x
    vg bad-discover 1 discover --model m --db r.db --probe-r 40
}
cat > exp.json <<'EOF2'
{"name": "vg", "data": {"synthetic": {"stories": 40, "seed": 2}, "val": 0.2},
 "tokenizer": {"vocab": 280},
 "train": {"d_model": 16, "n_heads": 2, "d_head": 8, "n_ctx": 16, "batch": 2, "steps": 2,
           "eval_every": 1, "eval_batches": 1, "threads": 1},
 "models": [{"name": "a", "n_layers": 1}],
 "analyses": {"circuits": {"top_k": 3, "mc_samples": 3},
              "prune": {"methods": ["random"], "budget": -1, "batches": 2, "batch": 2}},
 "report": false}
EOF2
sed 's/"report": false}/"report": false, "sweep": {"seed": [1, 2], "analyses.circuits.top_k": [3, 4]}}/' \
    exp.json > sweep.json
lane_c >"$tmp/lane-c.log" 2>&1 &
lane_d >"$tmp/lane-d.log" 2>&1
wait
cat "$tmp/lane-c.log" "$tmp/lane-d.log"
n=$(ls "$tmp"/*.vg | wc -l)
fail=0
[ -e "$tmp/FAILED" ] && fail=1
echo "valgrind: $n commands in $(( $(date +%s) - t0 )) s, $( [ $fail = 0 ] && echo 'no errors, no definite leaks' || echo FAILED)"
if [ $fail = 0 ]; then rm -rf "$tmp"; else echo "files kept in $tmp"; fi
exit $fail
