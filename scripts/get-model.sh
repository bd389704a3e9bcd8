#!/bin/sh
# get-model.sh -- download a published attention-only model from the Hugging Face hub and
# import it as an attnlab model directory (docs/import.md).
#
# usage: sh scripts/get-model.sh NAME [DIR]     the model goes to DIR/NAME (DIR: models)
#
# NAME: attn-only-1l, attn-only-2l, attn-only-3l, attn-only-4l (TransformerLens's, LayerNorm),
#       attn-only-demo (also attn-only-2l-demo; no LayerNorm, shortformer positions),
#       redwood_attn_2l (ACDC's induction model; also fetches ACDC's induction data into
#       DIR/redwood_attn_2l-acdc), attn_only_2L_half (ARENA's induction-heads model)
#
# Files come from https://huggingface.co/REPO/resolve/main/FILE (curl, else wget) into
# DIR/.downloads/NAME, kept for the next run. ATTNLAB_HUB_MIRROR=FOLDER takes them from
# FOLDER/REPO/FILE instead (no network); ATTNLAB_BIN is the attnlab binary (build/attnlab).
# Extra arguments after DIR go to `attnlab import` (e.g. --no-fold-ln).
set -eu

NAME=${1:-}
DIR=${2:-models}
[ $# -ge 2 ] && shift 2 || shift $#
BIN=${ATTNLAB_BIN:-build/attnlab}
HUB=https://huggingface.co

die() { echo "get-model.sh: $*" >&2; exit 1; }

TOKREPO=""
CONFIG=config.json
PRESET=""
CKPTS=model_final.pth
case $NAME in
attn-only-[1-4]l)
    N=$(echo "$NAME" | sed 's/attn-only-\([1-4]\)l/\1/')
    REPO=NeelNanda/Attn_Only_${N}L512W_C4_Code
    TOKREPO=NeelNanda/gpt-neox-tokenizer-digits ;;
attn-only-demo | attn-only-2l-demo)
    NAME=attn-only-demo
    REPO=NeelNanda/Attn-Only-2L512W-Shortformer-6B-big-lr
    TOKREPO=EleutherAI/gpt-neox-20b ;;
redwood_attn_2l)
    REPO=ArthurConmy/redwood_attn_2l
    # TransformerLens loads the repository's file ending in final.pth; ACDC's first code
    # loaded et_model_state_dict.pt from the same repository
    CKPTS="model_final.pth et_model_state_dict.pt"
    TOKREPO=gpt2 ;;
attn_only_2L_half)
    REPO=callummcdougall/attn_only_2L_half
    CKPTS=attn_only_2L_half.pth
    CONFIG=""            # the course builds its config in code: the preset holds it
    PRESET=attn_only_2L_half
    TOKREPO=EleutherAI/gpt-neox-20b ;;
"")
    die "usage: sh scripts/get-model.sh NAME [DIR] (NAME: attn-only-1l..4l, attn-only-demo, redwood_attn_2l, attn_only_2L_half)" ;;
*)
    die "unknown model '$NAME' (attn-only-1l..4l, attn-only-demo, redwood_attn_2l, attn_only_2L_half)" ;;
esac

OUT=$DIR/$NAME
[ -e "$OUT" ] && die "$OUT already exists; remove it to import again"
[ -x "$BIN" ] || die "no attnlab binary at $BIN (run make, or set ATTNLAB_BIN)"
CACHE=$DIR/.downloads/$NAME

# fetch REPO FILE: prints the local path of REPO's FILE, or fails
fetch() {
    if [ -n "${ATTNLAB_HUB_MIRROR:-}" ]; then
        [ -f "$ATTNLAB_HUB_MIRROR/$1/$2" ] || return 1
        echo "$ATTNLAB_HUB_MIRROR/$1/$2"
        return 0
    fi
    dest=$CACHE/$1/$2
    if [ ! -f "$dest" ]; then
        mkdir -p "$(dirname "$dest")"
        url=$HUB/$1/resolve/main/$2
        echo "get-model.sh: downloading $url" >&2
        if command -v curl > /dev/null 2>&1; then
            curl -fL --retry 3 -o "$dest.part" "$url" >&2 || { rm -f "$dest.part"; return 1; }
        elif command -v wget > /dev/null 2>&1; then
            wget -O "$dest.part" "$url" >&2 || { rm -f "$dest.part"; return 1; }
        else
            die "neither curl nor wget is installed"
        fi
        mv "$dest.part" "$dest"
    fi
    echo "$dest"
}

CKPT=""
for f in $CKPTS; do
    if CKPT=$(fetch "$REPO" "$f"); then break; fi
    CKPT=""
done
[ -n "$CKPT" ] || die "could not get the checkpoint of $REPO (tried: $CKPTS)"

CONF=""
if [ -n "$CONFIG" ]; then
    CONF=$(fetch "$REPO" "$CONFIG") || die "could not get $REPO/$CONFIG"
    # the tokenizer the config names, where it names one
    T=$(sed -n 's/.*"tokenizer_name"[ 	]*:[ 	]*"\([^"]*\)".*/\1/p' "$CONF" | head -n 1)
    [ -n "$T" ] && TOKREPO=$T
fi
TOK=$(fetch "$TOKREPO" tokenizer.json) || die "could not get $TOKREPO/tokenizer.json"

if [ "$NAME" = redwood_attn_2l ]; then
    # ACDC's induction task (acdc/induction/utils.py): the validation tokens and the mask of
    # positions whose token repeats an earlier one, both torch.save'd tensors
    mkdir -p "$DIR/$NAME-acdc"
    for f in validation_data.pt mask_repeat_candidates.pkl; do
        if p=$(fetch "$REPO" "$f"); then cp "$p" "$DIR/$NAME-acdc/$f"
        else echo "get-model.sh: warning: could not get $REPO/$f" >&2; fi
    done
fi

if [ -n "$PRESET" ]; then
    "$BIN" import --checkpoint "$CKPT" --preset "$PRESET" --tokenizer "$TOK" --out "$OUT" "$@"
else
    "$BIN" import --checkpoint "$CKPT" --config "$CONF" --tokenizer "$TOK" --out "$OUT" "$@"
fi
