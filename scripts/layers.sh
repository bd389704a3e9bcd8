#!/bin/sh
# layers.sh -- `make layers`: check the include graph against the layer
# order of docs/design.md, bottom to top:
#
#   core <- data, engine <- io <- train, analysis <- store <- pictures
#        <- report <- cli
#
# A file may include headers of its own folder and of folders below it
# (#include "attnlab/X.h" or <attnlab/X.h>).
# Including a header of a folder above, or of the folder beside it on the
# same level (data/engine, train/analysis), is an error naming the file,
# the header and the rule. A header include/attnlab/X.h belongs to the
# folder of src/*/X.c; a header with no such file says where it belongs
# with a comment "layer: NAME" in its first 5 lines.
# Usage: sh scripts/layers.sh [ROOT]   (ROOT: the checkout, default .)
set -eu
ROOT=${1:-.}
cd "$ROOT"

rank() {
    case $1 in
    core) echo 0 ;; data | engine) echo 1 ;; io) echo 2 ;;
    train | analysis) echo 3 ;; store) echo 4 ;; pictures) echo 5 ;;
    report) echo 6 ;; cli) echo 7 ;; *) echo -1 ;;
    esac
}

# layer_of_header NAME.h -> folder name, or "" if unknown
layer_of_header() {
    base=${1%.h}
    for c in src/*/"$base".c; do
        [ -f "$c" ] && { basename "$(dirname "$c")"; return; }
    done
    h=include/attnlab/$1
    if [ -f "$h" ]; then
        head -n 5 "$h" | sed -n 's/.*layer: *\([a-z]*\).*/\1/p' | head -n 1
    fi
}

fail=0
checked=0
for f in src/*/*.c include/attnlab/*.h; do
    [ -f "$f" ] || continue # an unmatched glob
    case $f in
    src/*) own=$(basename "$(dirname "$f")") ;;
    *) own=$(layer_of_header "$(basename "$f")") ;;
    esac
    if [ "$(rank "$own")" -lt 0 ]; then
        echo "layers: $f: not in a known layer (src/<layer>/ or a 'layer: NAME' comment)"
        fail=1
        continue
    fi
    for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]attnlab\/\([A-Za-z0-9_]*\.h\)[">].*/\1/p' "$f"); do
        checked=$((checked + 1))
        to=$(layer_of_header "$h")
        ro=$(rank "$own")
        rt=$(rank "$to")
        if [ "$rt" -lt 0 ]; then
            echo "layers: $f includes attnlab/$h, which belongs to no layer"
            fail=1
        elif [ "$to" = "$own" ]; then
            :
        elif [ "$rt" -gt "$ro" ]; then
            echo "layers: $f ($own) includes attnlab/$h ($to): $own may not include a layer above it"
            fail=1
        elif [ "$rt" -eq "$ro" ]; then
            echo "layers: $f ($own) includes attnlab/$h ($to): $own and $to are beside each other and never include each other"
            fail=1
        fi
    done
done
if [ $fail -ne 0 ]; then
    echo "layers: FAILED (order: core <- data, engine <- io <- train, analysis <- store <- pictures <- report <- cli)"
    exit 1
fi
echo "layers: ok ($checked includes checked)"
