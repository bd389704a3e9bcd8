#!/bin/sh
# report_identical.sh -- are `attnlab report`'s outputs byte-identical
# between two binaries? Runs both on fresh copies of one experiment folder
# (a demo output: results.db, models/, data/) in three modes (static,
# --interactive, --figures svg) and cmp's every file each report wrote:
# index.html, report.ipynb, .report-pictures and each picture listed.
#
# index.html carries the minute it was written ("YYYY-MM-DD HH:MM UTC");
# when the two runs straddle a minute, that stamp is the one difference
# allowed (it is blanked on both sides before a second cmp, and said so).
#
# Usage: sh tests/report_identical.sh OLD_BIN NEW_BIN DEMO_DIR WORK_DIR
# Exit status 0 when every file is identical.
# Analyses multiply matrices on oneDNN by default; comparing against a
# binary from before that backend, run with ATTNLAB_MATMUL=openblas in the
# environment so both sides use OpenBLAS's arithmetic.
set -eu
OLD=$1 NEW=$2 DEMO=$3 WORK=$4
[ -f "$DEMO/results.db" ] || { echo "no $DEMO/results.db" >&2; exit 2; }
MODELS=""
for m in "$DEMO"/models/*/; do
    MODELS="$MODELS --model models/$(basename "$m")"
done
LABELS=$(cd "$DEMO/models" && ls | paste -sd, -)
PROMPT="Once upon a time, a girl named Bamurik found a red ball. Bamurik gave the ball to her friend Seoyeon, and Seoyeon said thank you to Bamurik."
TITLE="attnlab demo: 1-layer vs 2-layer attention-only models"
mkdir -p "$WORK"
same=0 differ=0
# files a and b equal once the minute stamp is blanked
stamp_same() {
    sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} UTC/STAMP/' "$1" > "$WORK/a.html"
    sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} UTC/STAMP/' "$2" > "$WORK/b.html"
    cmp -s "$WORK/a.html" "$WORK/b.html"
}
for mode in static interactive svg; do
    case $mode in
    static) extra="" ;;
    interactive) extra="--interactive" ;;
    svg) extra="--figures svg" ;;
    esac
    for side in old new; do
        d=$WORK/$side-$mode
        rm -rf "$d"
        cp -a "$DEMO" "$d"
        bin=$OLD
        [ $side = new ] && bin=$NEW
        # the db and the output in one folder, as the experiment writes
        # them: both paths are then the same text on both sides
        # shellcheck disable=SC2086
        (cd "$d" && "$bin" report --db results.db $MODELS --labels "$LABELS" --out . \
            --title "$TITLE" --prompt "$PROMPT" --repeat 20 --top-n 30 \
            --data data/tokens.val.bin --threads 2 $extra) > "$WORK/$side-$mode.log" 2>&1
    done
    a=$WORK/old-$mode b=$WORK/new-$mode
    for f in index.html report.ipynb .report-pictures $(cat "$a/.report-pictures"); do
        if cmp -s "$a/$f" "$b/$f"; then
            same=$((same + 1))
        elif [ "$f" = index.html ] && stamp_same "$a/$f" "$b/$f"; then
            echo "$mode/$f: identical but for the minute stamp"
            same=$((same + 1))
        else
            echo "$mode/$f: DIFFERS"
            differ=$((differ + 1))
        fi
    done
    # the same set of pictures on both sides
    if ! cmp -s "$a/.report-pictures" "$b/.report-pictures"; then
        echo "$mode: different picture lists"
        differ=$((differ + 1))
    fi
    echo "$mode: $(wc -l < "$a/.report-pictures") pictures listed"
done
echo "identical: $same files, different: $differ"
[ "$differ" -eq 0 ]
