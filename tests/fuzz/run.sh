#!/bin/sh
# Run libFuzzer targets: tests/fuzz/run.sh BUILD_DIR SECONDS TARGET...
# Each target first replays its seed corpus tests/fuzz/<target>/ (and the
# inputs earlier runs found, kept in BUILD_DIR/corpus/<target>/), then
# fuzzes for SECONDS. Two targets run at a time. A crash leaves the input
# in BUILD_DIR/crash-<target>-* and makes this script fail. The last line
# per target says how many inputs were executed.
set -u
b=$1 secs=$2
shift 2
mkdir -p "$b/logs"
run_one() {
    t=$1
    mkdir -p "$b/corpus/$t"
    # rss/malloc limits: a "huge allocation" on hostile input is a finding
    "$b/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -malloc_limit_mb=512 -print_final_stats=1 \
        -artifact_prefix="$b/crash-$t-" "$b/corpus/$t" "tests/fuzz/$t" \
        >"$b/logs/$t.log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$b/logs/$t.log")
    if [ $rc -eq 0 ]; then
        echo "fuzz $t: ${execs:-?} executions in ${secs}s, no crash"
    else
        echo "fuzz $t: FAILED (exit $rc) -- see $b/logs/$t.log"
        # what failed first (a CI log shows only its tail), then the
        # input itself, so that a crash on another machine can be replayed
        grep -m 5 -e 'property failed' -e '^==[0-9]*==ERROR' -e 'runtime error' \
            -e '^SUMMARY' "$b/logs/$t.log" | sed 's/^/    /'
        tail -n 20 "$b/logs/$t.log" | sed 's/^/    /'
        for c in "$b/crash-$t-"*; do
            [ -f "$c" ] || continue
            echo "    input $c (base64, first 4 KB):"
            head -c 4096 "$c" | base64 | sed 's/^/      /'
        done
    fi
    return $rc
}
fail=0
while [ $# -gt 0 ]; do
    run_one "$1" &
    p1=$!
    p2=
    if [ $# -gt 1 ]; then
        run_one "$2" &
        p2=$!
        shift
    fi
    shift
    wait $p1 || fail=1
    [ -n "$p2" ] && { wait $p2 || fail=1; }
done
exit $fail
