#!/bin/sh
# Install the Debian packages attnlab needs, if any are missing.
# As root: apt-get install them. Otherwise: print the command and fail.
# Optional extras (PyTorch for the cross-check test and the benchmark)
# are attempted but their absence is not an error: those tests skip.
set -u
need="gcc make pkg-config libcjson-dev libpng-dev libsqlite3-dev libopenblas-openmp-dev liblapacke-dev sqlite3"
extra="python3-torch python3-numpy"
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
missing_extra=""
for p in $extra; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing_extra="$missing_extra $p"
done
[ -z "$missing" ] && [ -z "$missing_extra" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    if [ -n "$missing" ]; then
        echo "attnlab: missing packages:$missing" >&2
        echo "run: sudo apt-get install -y$missing$missing_extra" >&2
        exit 1
    fi
    echo "attnlab: optional packages missing:$missing_extra (PyTorch cross-checks will be skipped)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
echo "attnlab: installing$missing$missing_extra" >&2
apt-get update -qq >/dev/null 2>&1 || true
if [ -n "$missing" ]; then
    apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
        echo "attnlab: apt-get install failed for:$missing" >&2; exit 1; }
fi
if [ -n "$missing_extra" ]; then
    apt-get install -y -qq --no-install-recommends $missing_extra >/dev/null ||
        echo "attnlab: could not install$missing_extra; PyTorch cross-checks will be skipped" >&2
fi
exit 0
