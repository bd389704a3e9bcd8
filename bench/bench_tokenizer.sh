#!/bin/sh
# bench_tokenizer.sh -- BPE training time (4 MB of text to vocab 4096) and
# encoding speed, as the commands themselves measure them (file reading
# and writing excluded). Text: $TOKBENCH_TEXT, else data/tinystories.txt (the
# docs/commands.md says how to make it), else 4 MB of `attnlab data synth` stories.
#   usage: sh bench/bench_tokenizer.sh [path/to/attnlab]
BIN=${1:-${ATTNLAB_BIN:-build/attnlab}}
TEXT=${TOKBENCH_TEXT:-data/tinystories.txt}
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
if [ ! -f "$TEXT" ]; then
    if "$BIN" data synth --out "$TMP/synth.txt" --stories 8000 --seed 1 >/dev/null 2>&1; then
        head -c 4194304 "$TMP/synth.txt" > "$TMP/text.txt"
        TEXT=$TMP/text.txt
    else
        echo "bench tokenizer: skipped (no $TEXT and no 'attnlab data synth')"
        exit 0
    fi
fi
"$BIN" tokenizer train --in "$TEXT" --vocab 4096 --out "$TMP/tok.json" >"$TMP/train.out" 2>"$TMP/train.err" ||
    { cat "$TMP/train.err"; exit 1; }
"$BIN" encode --tokenizer "$TMP/tok.json" --in "$TEXT" --out "$TMP/x.bin" >"$TMP/enc.out" 2>"$TMP/enc.err" ||
    { cat "$TMP/enc.err"; exit 1; }
# "tokenizer: 3839 merges learned from 4.19 MB in 0.05 s (...)"
sed -n 's/^tokenizer: \([0-9]*\) merges learned from \([0-9.]*\) MB in \([0-9.]*\) s.*/bench tokenizer train: \2 MB -> vocab 4096 (\1 merges) in \3 s/p' "$TMP/train.out"
# "encode: FILE: N documents, X MB (...) in T s = R MB/s"
sed -n 's/^encode: .*: \([0-9]*\) documents*, \([0-9.]*\) MB .* in \([0-9.]*\) s = \([0-9.]*\) MB\/s$/bench tokenizer encode: \2 MB in \3 s = \4 MB\/s (one core)/p' "$TMP/enc.out"
