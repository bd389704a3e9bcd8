#!/bin/sh
# tests/slurm/run.sh -- scripts/slurm/sweep.sh on a real Slurm: a one-node
# cluster on this machine (munged, slurmctld, slurmd from Debian's munge
# and slurm-wlm, `sh scripts/deps.sh slurm`), all of it in a temporary
# folder with its own munge key and socket, slurm.conf (SLURM_CONF) and
# ports, as root and without systemd. Submits a 4-task sweep (2 seeds x
# 2 learning rates of a tiny experiment), waits for the merge job and
# checks the merged database; then stops the daemons it started, by their
# pid files. `make test-slurm` runs it.
#
# Without Slurm or root it prints one line "SKIP slurm: <why>" and exits
# 0. If the daemons cannot start, that is a SKIP too on a developer's
# machine, but a failure in CI (CI=true), where the packages are
# installed first and the test must run. Prints its time at the end.
set -u
cd "$(dirname "$0")/../.."
t0=$(date +%s)
bin=${ATTNLAB_BIN:-build/attnlab}
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
ci=${CI:-}

skip() { # the environment lacks Slurm: one line, exit 0 (loud in CI)
    if [ "$ci" = true ]; then
        echo "SKIP slurm: $1 -- the Slurm test did NOT run in CI" >&2
    else
        echo "SKIP slurm: $1"
    fi
    exit 0
}
tmp=
fail() {
    echo "FAIL slurm: $1" >&2
    if [ -n "$tmp" ]; then
        for f in slurmctld.log slurmd.log munged.log shared/slurm/task-0.out shared/slurm/merge.out; do
            [ -f "$tmp/$f" ] && { echo "--- $f (last 15 lines)" >&2; tail -n 15 "$tmp/$f" >&2; }
        done
    fi
    exit 1
}
cannot_start() { # the daemons would not start: SKIP here, FAIL in CI
    if [ "$ci" = true ]; then fail "$1"; fi
    skip "$1"
}

for c in munged mungekey slurmctld slurmd sbatch squeue scontrol sinfo sqlite3; do
    command -v "$c" >/dev/null 2>&1 || skip "$c not installed (sh scripts/deps.sh slurm)"
done
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs (run as root)"
[ -x "$bin" ] || fail "no attnlab binary at $bin (make)"

tmp=$(mktemp -d /tmp/attnlab-slurm-XXXXXX)
chmod 755 "$tmp"
stop() { # the daemons this test started, by their pid files
    for d in slurmd slurmctld munged; do
        f=$tmp/$d.pid
        [ -s "$f" ] || continue
        p=$(cat "$f")
        kill "$p" 2>/dev/null || continue
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
    done
    if [ "${keep:-0}" = 1 ]; then echo "slurm: files kept in $tmp" >&2; else rm -rf "$tmp"; fi
}
keep=1
trap stop EXIT
trap 'exit 130' INT TERM

# ---- munge: its own key, socket, pid and log
mkdir -p "$tmp/munge" && chmod 711 "$tmp/munge" # munged wants its socket folder searchable
mungekey --create --keyfile="$tmp/munge/munge.key" >/dev/null 2>&1 ||
    dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$tmp/munge/munge.key"
sock=$tmp/munge/munge.socket
munged --force --key-file="$tmp/munge/munge.key" --socket="$sock" --pid-file="$tmp/munged.pid" \
    --log-file="$tmp/munged.log" --seed-file="$tmp/munge/munged.seed" >/dev/null 2>&1 ||
    cannot_start "munged would not start ($(tail -n 1 "$tmp/munged.log" 2>/dev/null))"

# ---- a one-node cluster on ports of its own (a port in use: the next)
port=$((17000 + $$ % 2000))
host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$tmp/state" "$tmp/spool"
export SLURM_CONF=$tmp/slurm.conf
cat > "$SLURM_CONF" <<CONF
ClusterName=attnlabtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -f "$SLURM_CONF" -c -i >/dev/null 2>&1 ||
    cannot_start "slurmctld would not start ($(tail -n 1 "$tmp/slurmctld.log" 2>/dev/null))"
slurmd -f "$SLURM_CONF" >/dev/null 2>&1 ||
    cannot_start "slurmd would not start ($(tail -n 1 "$tmp/slurmd.log" 2>/dev/null))"
i=0
until [ "$(sinfo -h -o %t 2>/dev/null | head -n 1)" = idle ]; do
    i=$((i + 1))
    [ $i -gt 60 ] && cannot_start "the node did not become idle in 30 s (sinfo: $(sinfo -h -o '%t %E' 2>&1 | head -n 1))"
    sleep 0.5
done
echo "slurm: one-node cluster up ($host, $cpus CPUs, port $port) in $(( $(date +%s) - t0 )) s"

# ---- a tiny sweep: 2 seeds x 2 learning rates, scores on each model
cat > "$tmp/sweep.json" <<JSON
{"name": "slurm-test", "threads": 1, "out": "$tmp/shared",
 "data": {"synthetic": {"stories": 60, "seed": 4}, "val": 0.1},
 "tokenizer": {"vocab": 300},
 "train": {"d_model": 32, "n_heads": 4, "d_head": 8, "n_ctx": 32, "batch": 4,
           "steps": 10, "eval_every": 10, "warmup": 2},
 "models": [{"name": "two", "n_layers": 2}],
 "analyses": {"scores": {"probe_r": 10, "probe_n": 8, "batches": 2, "batch": 4}},
 "pictures": false, "report": false,
 "sweep": {"seed": [1, 2], "train.lr": [0.003, 0.01]}}
JSON
ATTNLAB_BIN=$bin ATTNLAB_LOCAL=$tmp/local sh scripts/slurm/sweep.sh "$tmp/sweep.json" --cpus-per-task=1 \
    > "$tmp/submit.out" 2>&1 || { cat "$tmp/submit.out" >&2; fail "scripts/slurm/sweep.sh failed"; }
array=$(sed -n 's/^array job: //p' "$tmp/submit.out")
merge=$(sed -n 's/^merge job: //p' "$tmp/submit.out")
[ -n "$array" ] && [ -n "$merge" ] || fail "sweep.sh printed no job ids: $(cat "$tmp/submit.out")"
echo "slurm: submitted array job $array (4 tasks) and merge job $merge"

state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1; }
i=0
while :; do
    s=$(state "$merge")
    case $s in
        COMPLETED) break ;;
        FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
            done_tasks=$(ls -d "$tmp"/shared/task-[0-3] 2>/dev/null | wc -l)
            "$bin" help db >/dev/null 2>&1 ||
                fail "merge job $merge ended $s: this attnlab has no 'db merge' command yet ($done_tasks of 4 task folders copied to the shared folder)"
            fail "merge job $merge ended $s ($done_tasks of 4 task folders copied to the shared folder)" ;;
    esac
    i=$((i + 1))
    [ $i -gt 600 ] && fail "merge job $merge not done after 300 s (state ${s:-gone})"
    sleep 0.5
done

# ---- the merged database: 4 sources, 4 trainings + 4 score runs, 4 models
db=$tmp/shared/sweep.db
n() { sqlite3 -batch "$db" "$1" 2>&1; }
[ "$(n "SELECT count(*) FROM merge_sources")" = 4 ] || fail "merge_sources: $(n 'SELECT count(*) FROM merge_sources')"
[ "$(n "SELECT count(*) FROM runs WHERE kind = 'train' AND status = 'done'")" = 4 ] || fail "train runs: $(n "SELECT count(*) FROM runs WHERE kind = 'train'")"
[ "$(n "SELECT count(*) FROM runs WHERE kind != 'train' AND status = 'done'")" = 4 ] || fail "analysis runs: $(n "SELECT kind, count(*) FROM runs GROUP BY kind")"
[ "$(n "SELECT count(DISTINCT sha256) FROM models")" = 4 ] || fail "distinct models: $(n 'SELECT count(DISTINCT sha256) FROM models')"
[ "$(n "SELECT group_concat(task || ':' || setting || ':' || seed, ' ') FROM (SELECT * FROM merge_sources ORDER BY task)")" = \
  "0:train.lr=0.003:1 1:train.lr=0.01:1 2:train.lr=0.003:2 3:train.lr=0.01:2" ] ||
    fail "merge_sources settings: $(n "SELECT task, setting, seed FROM merge_sources")"
ls "$tmp"/local 2>/dev/null | grep -q attnlab- && fail "node-local scratch left behind: $(ls "$tmp/local")"
keep=0
echo "slurm: PASS: 4 tasks and the merge on a real Slurm in $(( $(date +%s) - t0 )) s"
