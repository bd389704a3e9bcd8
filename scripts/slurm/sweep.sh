#!/bin/sh
# scripts/slurm/sweep.sh FILE [sbatch options...] -- run the tasks of a
# sweep (an experiment file with a "sweep" block) on a Slurm cluster.
#
# Submits a job array of N tasks (N from `attnlab experiment FILE
# --list-tasks`) whose task K runs `attnlab experiment FILE --task K` with
# its output on the node's local disk (SQLite's WAL mode needs a local
# file system, not NFS or Lustre), then copies OUT/task-K to the shared
# folder; and a merge job, run only when every task succeeded
# (--dependency=afterok), that merges the task databases into
# SHARED/sweep.db with `attnlab db merge`. Prints the two job ids.
#
#   SHARED           the shared folder (default: the experiment's "out",
#                    as --list-tasks prints it); ATTNLAB_SHARED overrides
#   ATTNLAB_BIN      the attnlab binary (default: build/attnlab of this
#                    repository); it must be reachable from every node
#   ATTNLAB_LOCAL    node-local scratch (default: $TMPDIR, else /tmp); a
#                    task works in ATTNLAB_LOCAL/attnlab-JOBID-K, removed
#                    at its end
#   ATTNLAB_THREADS  passed as --threads to every task (default: the
#                    file's "threads"); match it to --cpus-per-task
#
# sbatch options (after FILE) go to both jobs, after this script's own,
# so they win (--partition, --time, --cpus-per-task, --mem, --account).
# The jobs run in the directory this script was called from, so the
# file's relative paths mean what they mean here. Job scripts and Slurm's
# output files are kept in SHARED/slurm/.
set -eu
me=scripts/slurm/sweep.sh
if [ $# -lt 1 ]; then
    echo "usage: $me FILE.json [sbatch options...]" >&2
    exit 2
fi
file=$1
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${ATTNLAB_BIN:-$root/build/attnlab}
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
[ -x "$bin" ] || { echo "$me: no attnlab binary at $bin (run make, or set ATTNLAB_BIN)" >&2; exit 1; }
[ -f "$file" ] || { echo "$me: no such file: $file" >&2; exit 1; }
command -v sbatch >/dev/null 2>&1 || { echo "$me: sbatch not found (is this a Slurm login node?)" >&2; exit 1; }
case $file in /*) ;; *) file=$(pwd)/$file ;; esac

# the tasks, checked: a bad file or sweep block stops here, before Slurm
list=$("$bin" experiment "$file" --list-tasks) || exit 1
n=$(printf '%s\n' "$list" | wc -l)
first=$(printf '%s\n' "$list" | head -n 1 | cut -f 2)
shared=${ATTNLAB_SHARED:-${first%/task-0}}
mkdir -p "$shared/slurm"
shared=$(cd "$shared" && pwd)
name=$(basename "$file" .json)
threads=
[ -n "${ATTNLAB_THREADS:-}" ] && threads="--threads $ATTNLAB_THREADS"

# Values go into the job scripts quoted, so paths with spaces survive.
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

cat > "$shared/slurm/task.sh" <<JOB
#!/bin/sh
# one task of the sweep $name (written by $me)
set -u
k=\$SLURM_ARRAY_TASK_ID
scratch=\${ATTNLAB_LOCAL:-\${TMPDIR:-/tmp}}/attnlab-\$SLURM_ARRAY_JOB_ID-\$k
shared=$(q "$shared")
rm -rf "\$scratch"
mkdir -p "\$scratch" || exit 1
trap 'rm -rf "\$scratch"' EXIT
$(q "$bin") experiment $(q "$file") --task "\$k" --out "\$scratch" $threads
rc=\$?
# copied whole even after a failure (its log and database are the
# evidence), under a temporary name so the folder is never half there
rm -rf "\$shared/task-\$k.part" "\$shared/task-\$k"
cp -R "\$scratch/task-\$k" "\$shared/task-\$k.part" && mv "\$shared/task-\$k.part" "\$shared/task-\$k" || exit 1
exit \$rc
JOB

cat > "$shared/slurm/merge.sh" <<JOB
#!/bin/sh
# merge the task databases of the sweep $name (written by $me)
set -eu
shared=$(q "$shared")
tmp="\$shared/sweep.db.tmp-\$SLURM_JOB_ID"
rm -f "\$tmp" "\$tmp-wal" "\$tmp-shm"
k=0
while [ \$k -lt $n ]; do   # in task order, 512 inputs per call
    set --
    while [ \$k -lt $n ] && [ \$# -lt 512 ]; do
        set -- "\$@" "\$shared/task-\$k/results.db"
        k=\$((k + 1))
    done
    $(q "$bin") db merge "\$tmp" "\$@"
done
mv "\$tmp" "\$shared/sweep.db"
echo "merged $n task databases into \$shared/sweep.db"
JOB

jid() { printf '%s' "$1" | cut -d ';' -f 1; } # --parsable: id[;cluster]
out=$(sbatch --parsable --job-name="attnlab-$name" --array="0-$((n - 1))" --chdir="$(pwd)" \
    --output="$shared/slurm/task-%a.out" "$@" "$shared/slurm/task.sh") || {
    echo "$me: sbatch of the task array failed" >&2
    exit 1
}
array=$(jid "$out")
out=$(sbatch --parsable --job-name="attnlab-$name-merge" --dependency="afterok:$array" \
    --kill-on-invalid-dep=yes --chdir="$(pwd)" --output="$shared/slurm/merge.out" "$@" \
    "$shared/slurm/merge.sh") || {
    echo "$me: sbatch of the merge job failed (cancelling array job $array)" >&2
    scancel "$array" 2>/dev/null || true
    exit 1
}
merge=$(jid "$out")
echo "$me: $n tasks of $file -> $shared"
echo "array job: $array"
echo "merge job: $merge"
