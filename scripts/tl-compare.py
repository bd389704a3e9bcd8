#!/usr/bin/env python3
"""A TransformerLens run of a model, for `attnlab compare` (docs/import.md).

  python3 scripts/tl-compare.py NAME OUT.safetensors [--no-fold-ln] [--no-center-writing-weights]
                                [--no-center-unembed] [--no-fold-value-biases] [--prompt TEXT]...

NAME is a model TransformerLens's from_pretrained knows (attn-only-1l..4l, attn-only-demo,
redwood_attn_2l) or attn_only_2L_half (ARENA's model: its config is built here, as the course
does, and its weights processed with process_weights_). The model is loaded with the same
processing `attnlab import` applies by default (each step can be turned off, as there), run
with run_with_cache on fixed prompts (or --prompt, repeatable), and OUT gets:

  tokens   (B, T) int32     the prompts' tokens (BOS first, padded to the longest)
  logits   (B, T, V) F32
  every activation of the cache whose hook point attnlab has (docs/hooks.md), under its name

with metadata: processing (the steps TransformerLens applied), model, transformer_lens version,
and the loss on "Hello world!" (TransformerLens's own tests record it for some models). Then

  attnlab import ... --out DIR --compare OUT.safetensors     (or attnlab compare --model DIR --ref OUT)

checks attnlab's own logits and activations against it. Needs transformer_lens (pip) and
network access to the Hugging Face hub."""
import argparse, json, re, struct, sys

PROMPTS = [
    "Hello world!",
    "The cat sat on the mat. The cat sat on the mat.",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)",
    "Mr and Mrs Dursley, of number four, Privet Drive, were proud to say that they were",
]

# the hook points of docs/hooks.md (the split inputs are left out: attnlab compares a forward
# without them)
KNOWN = re.compile(r"^(hook_embed|hook_pos_embed|ln_final\.hook_(scale|normalized)|"
                   r"blocks\.\d+\.(hook_resid_pre|hook_resid_post|hook_attn_out|"
                   r"ln1\.hook_(scale|normalized)|attn\.hook_(q|k|v|attn_scores|pattern|z|result)))$")


def st_write(path, tensors, meta):
    """safetensors by hand (no dependency): tensors is a list of (name, numpy array)."""
    import numpy as np
    header, blobs, off = {}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        dt = {np.dtype("float32"): "F32", np.dtype("int32"): "I32"}[a.dtype]
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {k: str(v) for k, v in meta.items()}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def applied(cfg, fold_ln, center_writing, center_unembed, fold_vb):
    """The steps TransformerLens applies (from_pretrained turns the first three off for
    shortformer positions; center_writing_weights needs LayerNorm)."""
    sf = cfg.positional_embedding_type == "shortformer"
    norm = cfg.normalization_type
    steps = []
    if fold_ln and not sf and norm in ("LN", "LNPre") and norm_before == "LN":
        steps.append("fold_ln")
    if center_writing and not sf and norm in ("LN", "LNPre"):
        steps.append("center_writing_weights")
    if center_unembed and not sf:
        steps.append("center_unembed")
    if fold_vb:
        steps.append("fold_value_biases")
    return steps


norm_before = None


def load(name, a):
    global norm_before
    import torch
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    opts = dict(fold_ln=not a.no_fold_ln, center_writing_weights=not a.no_center_writing_weights,
                center_unembed=not a.no_center_unembed, fold_value_biases=not a.no_fold_value_biases)
    if name == "attn_only_2L_half":
        from huggingface_hub import hf_hub_download
        cfg = HookedTransformerConfig(d_model=768, d_head=64, n_heads=12, n_layers=2, n_ctx=2048,
                                      d_vocab=50278, attention_dir="causal", attn_only=True,
                                      tokenizer_name="EleutherAI/gpt-neox-20b", seed=398,
                                      normalization_type=None,
                                      positional_embedding_type="shortformer")
        model = HookedTransformer(cfg)
        path = hf_hub_download(repo_id="callummcdougall/attn_only_2L_half",
                               filename="attn_only_2L_half.pth")
        model.load_state_dict(torch.load(path, map_location="cpu"))
        norm_before = None
        # process_weights_ folds the value biases always; the others as from_pretrained would
        model.process_weights_(fold_ln=False, center_writing_weights=False, center_unembed=False)
        steps = ["fold_value_biases"]
        if not opts["fold_value_biases"]:
            sys.exit("tl-compare.py: process_weights_ always folds value biases; leave "
                     "--no-fold-value-biases out for attn_only_2L_half")
        return model, steps
    from transformer_lens.loading_from_pretrained import get_pretrained_model_config
    norm_before = get_pretrained_model_config(name).normalization_type
    model = HookedTransformer.from_pretrained(name, device="cpu", **opts)
    cfg = model.cfg
    return model, applied(cfg, opts["fold_ln"], opts["center_writing_weights"],
                          opts["center_unembed"], opts["fold_value_biases"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("name")
    p.add_argument("out")
    p.add_argument("--prompt", action="append")
    for s in ("fold-ln", "center-writing-weights", "center-unembed", "fold-value-biases"):
        p.add_argument("--no-" + s, action="store_true")
    a = p.parse_args()
    try:
        import torch
        import transformer_lens
    except ImportError as exc:
        sys.exit("tl-compare.py needs PyTorch and TransformerLens (pip install transformer_lens): %s" % exc)
    torch.set_grad_enabled(False)
    model, steps = load(a.name, a)
    model.set_use_attn_result(True)
    tokens = model.to_tokens(a.prompt or PROMPTS)
    logits, cache = model.run_with_cache(tokens)
    loss = model("Hello world!", return_type="loss").item()
    out = [("tokens", tokens.to(torch.int32).numpy()), ("logits", logits.float().numpy())]
    out += [(k, v.float().numpy()) for k, v in cache.items() if KNOWN.match(k)]
    meta = {"format": "attnlab-tl-compare", "model": a.name, "processing": ",".join(steps),
            "transformer_lens": getattr(transformer_lens, "__version__", "?"),
            "hello_world_loss": "%.6f" % loss}
    st_write(a.out, out, meta)
    flags = " ".join("--no-" + s.replace("_", "-") for s in
                     ("fold_ln", "center_writing_weights", "center_unembed", "fold_value_biases")
                     if getattr(a, "no_" + s))
    print("wrote %s: %d tensors on %d x %d tokens; processing %s; loss on 'Hello world!' %.4f"
          % (a.out, len(out), tokens.shape[0], tokens.shape[1], ",".join(steps) or "none", loss))
    print("check: attnlab import ... %s --compare %s   (or attnlab compare --model DIR --ref %s)"
          % (flags, a.out, a.out))


if __name__ == "__main__":
    main()
