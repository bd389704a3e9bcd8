#!/usr/bin/python3
"""torch_ref.py -- independent PyTorch reference of the attnlab model.

Written from DESIGN §2 alone (not translated from the C code), so that
agreement with the engine means something:

    x0      = W_E[tok] + W_pos[t]
    q, k, v = x W_Q[l,h], x W_K[l,h], x W_V[l,h]
    A       = softmax_{s<=t}(q_t . k_s / sqrt(d_head))        causal
    r[l,h]  = (A v) W_O[l,h]
    x^{l+1} = x^l + sum_h g[l,h] r[l,h]
    logits  = x^L W_U   (W_U = W_E^T when tied_embeddings)
    loss    = mean next-token cross-entropy

With positional_embedding_type "shortformer" (TransformerLens' name)
positions never enter the residual stream; every head reads them in its
query and key inputs only:

    x0      = W_E[tok]
    q, k    = (x + W_pos[t]) W_Q[l,h], (x + W_pos[t]) W_K[l,h]
    v       = x W_V[l,h]

With normalization_type "LN" or "LNPre" and "biases" (TransformerLens's
LayerNorm, tests/ln_ref.py has the hook points too): q, k, v read
ln1(x) (shortformer: ln1(x) + W_pos[t] for q and k), each plus its bias
b_Q, b_K, b_V; the layer adds sum_h g r[l,h] + b_O; logits =
ln_final(x^L) W_U + b_U, where ln(x) = x_c / sqrt(mean(x_c^2) + eps) * w
+ b with x_c = x - mean(x) (LNPre: no w, b). AdamW decays W_Q..W_O and
W_U only (not the embeddings, LayerNorm weights or biases).

Usage:
    torch_ref.py --model DIR --dump FILE [--dtype float64|float32] [--tol 1e-4]

DIR holds model.safetensors and config.json; FILE is written by
`attnlab debug-dump` (inputs, targets, gates, logits, loss, grad.<name>
for every parameter, grad.gates, adam_losses). The script recomputes all
of it -- the AdamW trajectory with torch.optim.AdamW and
clip_grad_norm_ -- and prints ||c - torch|| / ||torch|| per tensor. Exit
0 iff every error is <= tol, 1 if not, 2 on bad input, 77 if PyTorch is
not importable. bench/torch_bench.py imports the model from here.
"""
import argparse
import json
import math
import os
import struct
import sys

try:
    import numpy as np
    import torch
except Exception as exc:  # ImportError, or a broken install
    torch = None
    TORCH_ERROR = exc

ST_DTYPES = {"F32": "f4", "F64": "f8", "I32": "i4", "I64": "i8", "F16": "f2", "U16": "u2"}


def read_safetensors(path):
    """{name: numpy array} and the metadata dict of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError("%s: header length %d exceeds the file" % (path, n))
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out, meta = {}, header.pop("__metadata__", {}) or {}
    for name, d in header.items():
        dt = np.dtype("<" + ST_DTYPES[d["dtype"]])
        begin, end = d["data_offsets"]
        shape = tuple(d["shape"])
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= begin <= end <= len(data) - base) or end - begin != count * dt.itemsize:
            raise ValueError("%s: tensor %s has bad data_offsets" % (path, name))
        out[name] = np.frombuffer(data, dtype=dt, count=count,
                                  offset=base + begin).reshape(shape).astype(dt.newbyteorder("="))
    return out, meta


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    return {"n_layers": int(c["n_layers"]), "d_model": int(c["d_model"]),
            "n_heads": int(c["n_heads"]), "d_head": int(c["d_head"]),
            "n_ctx": int(c["n_ctx"]), "d_vocab": int(c["d_vocab"]),
            "tied": bool(c.get("tied_embeddings", False)),
            "pos": c.get("positional_embedding_type", "standard"),
            "norm": c.get("normalization_type"), "eps": float(c.get("eps", 1e-5)),
            "biases": set(c.get("biases", []))}


def param_names(cfg):
    """TransformerLens state-dict names of every trainable tensor."""
    ln, bs = cfg.get("norm") == "LN", cfg.get("biases", set())
    names = ["embed.W_E", "pos_embed.W_pos"]
    for l in range(cfg["n_layers"]):
        a = "blocks.%d." % l
        names += [a + "ln1.w", a + "ln1.b"] if ln else []
        names += [a + "attn." + w for w in ("W_Q", "W_K", "W_V", "W_O")]
        names += [a + "attn." + b for b in ("b_Q", "b_K", "b_V", "b_O") if b in bs]
    names += ["ln_final.w", "ln_final.b"] if ln else []
    if not cfg["tied"]:
        names.append("unembed.W_U")
    if "b_U" in bs:
        names.append("unembed.b_U")
    return names


def decayed(name):
    """AdamW's weight decay applies to these (W_Q..W_O, W_U) only."""
    return name.split(".")[-1] in ("W_Q", "W_K", "W_V", "W_O", "W_U")


if torch is not None:
    class AttnOnly(torch.nn.Module):
        """Attention-only transformer, parameters named as TransformerLens."""

        def __init__(self, cfg, weights=None, dtype=torch.float64):
            super().__init__()
            self.cfg = cfg
            C, H, D, V = cfg["d_model"], cfg["n_heads"], cfg["d_head"], cfg["d_vocab"]
            shapes = {"embed.W_E": (V, C), "pos_embed.W_pos": (cfg["n_ctx"], C),
                      "unembed.W_U": (C, V), "unembed.b_U": (V,), "ln_final.w": (C,),
                      "ln_final.b": (C,)}
            for l in range(cfg["n_layers"]):
                a = "blocks.%d." % l
                for w in ("W_Q", "W_K", "W_V"):
                    shapes[a + "attn." + w] = (H, C, D)
                    shapes[a + "attn.b_" + w[-1]] = (H, D)
                shapes[a + "attn.W_O"] = (H, D, C)
                shapes[a + "attn.b_O"] = shapes[a + "ln1.w"] = shapes[a + "ln1.b"] = (C,)
            self.names = param_names(cfg)
            self.params = torch.nn.ParameterDict()
            for name in self.names:
                if weights is not None:
                    w = weights[name]
                    if tuple(w.shape) != shapes[name]:
                        raise ValueError("%s has shape %s, expected %s"
                                         % (name, tuple(w.shape), shapes[name]))
                    t = torch.tensor(np.asarray(w), dtype=dtype)
                else:
                    t = torch.randn(shapes[name], dtype=dtype) / math.sqrt(C)
                # ParameterDict keys may not contain '.'
                self.params[name.replace(".", "__")] = torch.nn.Parameter(t)

        def w(self, name):
            return self.params[name.replace(".", "__")]

        def named(self):
            return [(n, self.w(n)) for n in self.names]

        def ln(self, x, prefix):
            """TransformerLens's LayerNorm (LNPre: no w, b); identity without."""
            norm = self.cfg.get("norm")
            if norm is None:
                return x
            x = x - x.mean(-1, keepdim=True)
            x = x / (x.pow(2).mean(-1, keepdim=True) + self.cfg["eps"]).sqrt()
            return x * self.w(prefix + "w") + self.w(prefix + "b") if norm == "LN" else x

        def b(self, name):
            return self.w(name) if name in self.names else 0.0

        def forward(self, tokens, gates=None):
            """tokens (B,T) long -> logits (B,T,V). gates (L,H) or None (1)."""
            cfg = self.cfg
            B, T = tokens.shape
            pos = self.w("pos_embed.W_pos")[:T]
            shortformer = cfg.get("pos", "standard") == "shortformer"
            if cfg.get("pos", "standard") not in ("standard", "shortformer"):
                raise ValueError("positional_embedding_type %r" % cfg["pos"])
            if cfg.get("norm") not in (None, "LN", "LNPre"):
                raise ValueError("normalization_type %r" % cfg["norm"])
            x = self.w("embed.W_E")[tokens] + (0 if shortformer else pos)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            for l in range(cfg["n_layers"]):
                a = "blocks.%d.attn." % l
                n = self.ln(x, "blocks.%d.ln1." % l)
                xqk = n + pos if shortformer else n
                q = torch.einsum("btc,hcd->bhtd", xqk, self.w(a + "W_Q"))
                k = torch.einsum("btc,hcd->bhtd", xqk, self.w(a + "W_K"))
                v = torch.einsum("btc,hcd->bhtd", n, self.w(a + "W_V"))
                if a + "b_Q" in self.names:
                    q = q + self.w(a + "b_Q").unsqueeze(1)             # (H,1,D)
                if a + "b_K" in self.names:
                    k = k + self.w(a + "b_K").unsqueeze(1)
                if a + "b_V" in self.names:
                    v = v + self.w(a + "b_V").unsqueeze(1)
                scores = q @ k.transpose(-1, -2) / math.sqrt(cfg["d_head"])
                pattern = scores.masked_fill(mask, float("-inf")).softmax(-1)
                z = pattern @ v                                     # (B,H,T,D)
                r = torch.einsum("bhtd,hdc->bhtc", z, self.w(a + "W_O"))
                if gates is not None:
                    r = r * gates[l].view(1, -1, 1, 1)
                x = x + r.sum(1) + self.b(a + "b_O")
            W_U = self.w("embed.W_E").t() if cfg["tied"] else self.w("unembed.W_U")
            return self.ln(x, "ln_final.") @ W_U + self.b("unembed.b_U")

    def loss_fn(logits, targets):
        """Mean cross-entropy over positions whose target is >= 0."""
        return torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1)

    def make_adamw(model, lr, weight_decay):
        """AdamW as DESIGN §2's engine uses it: no decay on the embeddings,
        LayerNorm weights or biases."""
        decay = [p for n, p in model.named() if decayed(n)]
        no_decay = [p for n, p in model.named() if not decayed(n)]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": no_decay, "weight_decay": 0.0}],
                                 lr=lr, betas=(0.9, 0.95), eps=1e-8)


def results_cli(doc, results_help, extra=()):
    """The command line of the references that check a C test's results
    file against a model directory (patch_ref.py, attr_ref.py): MODEL_DIR
    RESULTS_FILE [--threads N] [extra], or --check-torch. Returns (args,
    None) to go on, or (None, exit code): 77 without PyTorch, 0 after
    --check-torch. extra: (flag, add_argument keywords) pairs."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("model", nargs="?", help="model directory")
    ap.add_argument("results", nargs="?", help=results_help)
    ap.add_argument("--check-torch", action="store_true",
                    help="only check that PyTorch can be imported (exit 0 or 77)")
    ap.add_argument("--threads", type=int, default=1)
    for flag, kw in extra:
        ap.add_argument(flag, **kw)
    args = ap.parse_args()
    if torch is None:
        print("skipped: cannot import torch (%s)" % TORCH_ERROR)
        return None, 77
    if args.check_torch:
        print("torch %s" % torch.__version__)
        return None, 0
    if args.model is None or args.results is None:
        ap.error("MODEL_DIR and RESULTS_FILE are required")
    torch.set_num_threads(args.threads)
    return args, None


def load_results(args, max_layers=2):
    """Config, weights and results JSON of results_cli's args; ValueError
    unless the results are for this model's L and H and 1 <= L <=
    max_layers (None: any L; the caller says what its reference covers)."""
    cfg = load_config(args.model)
    weights, _ = read_safetensors(os.path.join(args.model, "model.safetensors"))
    with open(args.results) as f:
        res = json.load(f)
    L, H = cfg["n_layers"], cfg["n_heads"]
    if (res["L"], res["H"]) != (L, H) or L < 1 or (max_layers is not None and L > max_layers):
        raise ValueError("results are for L=%d H=%d, the model has L=%d H=%d"
                         % (res["L"], res["H"], L, H))
    return cfg, weights, res


def rel_err(c, ref):
    c = np.asarray(c, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    if c.shape != ref.shape:
        return float("inf"), "shape"
    den = np.linalg.norm(ref)
    num = np.linalg.norm(c - ref)
    if den == 0.0:
        return num, "abs"  # reference exactly 0 (e.g. a gate of 0): absolute
    return num / den, "rel"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="model directory")
    ap.add_argument("--dump", required=True, help="attnlab debug-dump output")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if torch is None:
        print("skipped: cannot import torch (%s)" % TORCH_ERROR)
        return 77
    torch.set_num_threads(args.threads)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    try:
        cfg = load_config(args.model)
        weights, _ = read_safetensors(os.path.join(args.model, "model.safetensors"))
        dump, _ = read_safetensors(args.dump)
        model = AttnOnly(cfg, weights, dtype)
    except (OSError, ValueError, KeyError) as exc:
        print("torch_ref: %s" % exc, file=sys.stderr)
        return 2
    inputs = torch.tensor(dump["inputs"].astype(np.int64))
    targets = torch.tensor(dump["targets"].astype(np.int64))
    L, H = cfg["n_layers"], cfg["n_heads"]
    gates = torch.tensor(dump["gates"].reshape(L, H), dtype=dtype, requires_grad=True)
    print("torch %s, %s, %d threads; model %s: L=%d C=%d H=%d D=%d n_ctx=%d V=%d tied=%s pos=%s "
          "norm=%s biases=%s; batch %s" % (
              torch.__version__, args.dtype, args.threads, args.model, L, cfg["d_model"], H,
              cfg["d_head"], cfg["n_ctx"], cfg["d_vocab"], cfg["tied"], cfg["pos"], cfg["norm"],
              ",".join(sorted(cfg["biases"])) or "-", tuple(inputs.shape)))

    results = []
    if cfg["tied"] and "unembed.W_U" in weights:
        # a tied checkpoint may still carry W_U for TransformerLens; it must be W_E^T
        results.append(("unembed.W_U == W_E^T",
                        rel_err(weights["unembed.W_U"], weights["embed.W_E"].T)))
    logits = model(inputs, gates)
    loss = loss_fn(logits, targets)
    loss.backward()
    results.append(("logits", rel_err(dump["logits"], logits.detach().numpy())))
    print("  logits max |c - torch| %.3e" % float(np.max(np.abs(
        np.asarray(dump["logits"], dtype=np.float64).ravel() - logits.detach().numpy().ravel()))))
    results.append(("loss", rel_err(dump["loss"], [loss.item()])))
    # b_K's gradient is 0 in exact arithmetic (the softmax ignores a
    # constant added to a row of scores): compared to the largest gradient
    gmax = max(float(p.grad.norm()) for _, p in model.named())
    for name, p in model.named():
        if float(p.grad.norm()) <= 1e-12 * gmax:
            c = np.asarray(dump["grad." + name], dtype=np.float64)
            results.append(("grad." + name, (float(np.linalg.norm(c)) / gmax, "zero")))
        else:
            results.append(("grad." + name, rel_err(dump["grad." + name], p.grad.numpy())))
    results.append(("grad.gates", rel_err(dump["grad.gates"], gates.grad.numpy())))

    # AdamW on the same batch, gates fixed, constant lr; loss before each step and after the last
    gates = gates.detach()
    opt = make_adamw(model, args.lr, args.weight_decay)
    params = [p for _, p in model.named()]
    c_losses = dump["adam_losses"]
    for s in range(len(c_losses)):
        opt.zero_grad()
        loss = loss_fn(model(inputs, gates), targets)
        results.append(("adam_loss[%d]" % s, rel_err([c_losses[s]], [loss.item()])))
        if s == len(c_losses) - 1:
            break
        loss.backward()
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        opt.step()

    worst, ok = 0.0, True
    for name, (err, kind) in results:
        bad = not (err <= args.tol)
        ok &= not bad
        worst = max(worst, err) if math.isfinite(err) else float("inf")
        print("  %-28s %s err %.3e%s" % (name, kind, err, "  FAIL" if bad else ""))
    print("%s: worst error %.3e (tolerance %.0e)" % ("ok" if ok else "FAILED", worst, args.tol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
