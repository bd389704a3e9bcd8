#!/usr/bin/python3
"""ln_ref.py -- independent PyTorch reference of attnlab models with LayerNorm and biases.

Written from TransformerLens's definitions (components/layer_norm.py,
layer_norm_pre.py, abstract_attention.py, transformer_block.py, 2.x) and
docs/hooks.md, not from the C code, in float64:

    embed    = W_E[tok];  pos_embed = W_pos[t]
    x0       = embed + pos_embed          (shortformer: embed; pos_embed goes to q, k)
    ln(x)    = x_c / scale * w + b,  x_c = x - mean(x),  scale = sqrt(mean(x_c^2) + eps)
               (LNPre: x_c / scale)
    q, k, v  = ln1(x) W_Q + b_Q, ln1(x) W_K + b_K, ln1(x) W_V + b_V
               (shortformer: (ln1(x) + pos_embed) for q and k)
    scores   = q k^T / sqrt(d_head), -inf above the diagonal;  pattern = softmax(scores)
    z        = pattern v;  result_h = g[l,h] z_h W_O[h]   (g: attnlab's head gates)
    attn_out = sum_h result_h + b_O;  resid_post = resid_pre + attn_out
    logits   = ln_final(x_L) W_U + b_U    (W_U = W_E^T when tied)
    loss     = mean cross-entropy over positions with a target >= 0

Split inputs (use_split_qkv_input): each head's q, k, v input is its own
copy of resid_pre, and ln1 normalises each (b, t, head) row.

Usage: ln_ref.py [--tol 1e-5] [--grad-tol 1e-4] MODEL_DIR DUMP [MODEL_DIR DUMP ...]

DUMP (written by tests/test_ln_torch.c) holds inputs, targets, gates,
"hook.NAME" for every hook point, "split.NAME" for the split-input forward
(ln1 hooks suffixed .q/.k/.v), loss and "grad.NAME" for every parameter.
Prints ||c - ref|| / ||ref|| per tensor (scores: the finite entries, and
the -inf ones must match; a gradient that is 0 in exact arithmetic, as
b_K's, ||c|| over the model's largest gradient norm); exit 0 iff hooks, logits and loss are within
--tol and gradients within --grad-tol, 1 if not, 2 on bad input, 77
without PyTorch.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref import read_safetensors, rel_err  # noqa: E402
import torch_ref  # noqa: E402

torch = torch_ref.torch
np = torch_ref.np if torch is not None else None


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    return {"L": int(c["n_layers"]), "C": int(c["d_model"]), "H": int(c["n_heads"]),
            "D": int(c["d_head"]), "V": int(c["d_vocab"]),
            "tied": bool(c.get("tied_embeddings", False)),
            "pos": c.get("positional_embedding_type", "standard"),
            "norm": c.get("normalization_type"), "eps": float(c.get("eps", 1e-5)),
            "biases": set(c.get("biases", []))}


def param_names(cfg):
    names = ["embed.W_E", "pos_embed.W_pos"]
    for l in range(cfg["L"]):
        a = "blocks.%d." % l
        if cfg["norm"] == "LN":
            names += [a + "ln1.w", a + "ln1.b"]
        names += [a + "attn." + w for w in ("W_Q", "W_K", "W_V", "W_O")]
        names += [a + "attn." + b for b in ("b_Q", "b_K", "b_V", "b_O") if b in cfg["biases"]]
    if cfg["norm"] == "LN":
        names += ["ln_final.w", "ln_final.b"]
    if not cfg["tied"]:
        names.append("unembed.W_U")
    if "b_U" in cfg["biases"]:
        names.append("unembed.b_U")
    return names


class Ref:
    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.names = param_names(cfg)
        self.p = {}
        for n in self.names:
            self.p[n] = torch.tensor(np.asarray(weights[n]), dtype=torch.float64,
                                     requires_grad=True)

    def ln(self, x, prefix, hooks, suffix=""):
        """TransformerLens's LayerNorm (or LNPre), over the last axis."""
        cfg = self.cfg
        if cfg["norm"] is None:
            return x
        x = x - x.mean(-1, keepdim=True)
        scale = (x.pow(2).mean(-1, keepdim=True) + cfg["eps"]).sqrt()
        hooks[prefix + "hook_scale" + suffix] = scale
        out = x / scale
        if cfg["norm"] == "LN":
            out = out * self.p[prefix + "w"] + self.p[prefix + "b"]
        hooks[prefix + "hook_normalized" + suffix] = out
        return out

    def bias(self, name, like):
        return self.p[name] if name in self.p else torch.zeros_like(like)

    def forward(self, tokens, gates, split=False):
        cfg, p = self.cfg, self.p
        B, T = tokens.shape
        C, H, D = cfg["C"], cfg["H"], cfg["D"]
        hooks = {}
        short = cfg["pos"] == "shortformer"
        embed = p["embed.W_E"][tokens]
        pos = p["pos_embed.W_pos"][:T].unsqueeze(0).expand(B, T, C)
        hooks["hook_embed"], hooks["hook_pos_embed"] = embed, pos
        x = embed if short else embed + pos
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        for l in range(cfg["L"]):
            a = "blocks.%d." % l
            hooks[a + "hook_resid_pre"] = x
            W = {w: p[a + "attn." + w] for w in ("W_Q", "W_K", "W_V", "W_O")}
            if split:
                ins = []
                for s, nm in enumerate(("q", "k", "v")):
                    xin = x.unsqueeze(2).expand(B, T, H, C).clone()
                    hooks[a + "hook_%s_input" % nm] = xin
                    ins.append(xin)
                n = [self.ln(xi, a + "ln1.", hooks, "." + nm) for xi, nm in zip(ins, "qkv")]
                ph = pos.unsqueeze(2) if short else 0.0
                q = torch.einsum("bthc,hcd->bthd", n[0] + ph, W["W_Q"])
                k = torch.einsum("bthc,hcd->bthd", n[1] + ph, W["W_K"])
                v = torch.einsum("bthc,hcd->bthd", n[2], W["W_V"])
            else:
                n = self.ln(x, a + "ln1.", hooks)
                nq = n + pos if short else n
                q = torch.einsum("btc,hcd->bthd", nq, W["W_Q"])
                k = torch.einsum("btc,hcd->bthd", nq, W["W_K"])
                v = torch.einsum("btc,hcd->bthd", n, W["W_V"])
            q = q + self.bias(a + "attn.b_Q", q[0, 0])
            k = k + self.bias(a + "attn.b_K", k[0, 0])
            v = v + self.bias(a + "attn.b_V", v[0, 0])
            hooks[a + "attn.hook_q"], hooks[a + "attn.hook_k"], hooks[a + "attn.hook_v"] = q, k, v
            scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D)
            scores = scores.masked_fill(mask, float("-inf"))
            hooks[a + "attn.hook_attn_scores"] = scores
            pattern = scores.softmax(-1)
            hooks[a + "attn.hook_pattern"] = pattern
            z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
            hooks[a + "attn.hook_z"] = z
            result = torch.einsum("bqhd,hdc->bqhc", z * gates[l].view(1, 1, H, 1), W["W_O"])
            hooks[a + "attn.hook_result"] = result
            attn_out = result.sum(2) + self.bias(a + "attn.b_O", x[0, 0])
            hooks[a + "hook_attn_out"] = attn_out
            x = x + attn_out
            hooks[a + "hook_resid_post"] = x
        u = self.ln(x, "ln_final.", hooks)
        W_U = p["embed.W_E"].t() if cfg["tied"] else p["unembed.W_U"]
        logits = u @ W_U + self.bias("unembed.b_U", W_U[0])
        hooks["logits"] = logits
        return logits, hooks


def compare(name, c, ref):
    """(error, kind): relative error of c against ref; for scores, the
    -inf entries must be the same and the rest is compared."""
    c = np.asarray(c, dtype=np.float64)
    ref = ref.detach().numpy() if hasattr(ref, "detach") else np.asarray(ref, dtype=np.float64)
    if c.shape != ref.shape:
        return float("inf"), "shape %s vs %s" % (c.shape, ref.shape)
    inf_c, inf_r = np.isneginf(c), np.isneginf(ref)
    if (inf_c != inf_r).any():
        return float("inf"), "-inf entries differ"
    if inf_r.any():
        return rel_err(c[~inf_r], ref[~inf_r])
    return rel_err(c, ref)


def check(model_dir, dump_path, tol, grad_tol, worst):
    cfg = load_config(model_dir)
    weights, _ = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    dump, _ = read_safetensors(dump_path)
    model = Ref(cfg, weights)
    tokens = torch.tensor(dump["inputs"].astype(np.int64))
    targets = torch.tensor(dump["targets"].astype(np.int64))
    gates = torch.tensor(dump["gates"], dtype=torch.float64)
    print("model %s: L=%d C=%d H=%d D=%d norm=%s pos=%s tied=%s biases=%s" % (
        model_dir, cfg["L"], cfg["C"], cfg["H"], cfg["D"], cfg["norm"], cfg["pos"],
        cfg["tied"], ",".join(sorted(cfg["biases"])) or "-"))
    logits, hooks = model.forward(tokens, gates)
    _, split = model.forward(tokens, gates, split=True)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg["V"]), targets.reshape(-1),
                                             ignore_index=-1)
    loss.backward()
    ok = True
    rows = []
    # b_K's gradient is 0 in exact arithmetic (a key bias adds q.b_K to a
    # whole row of scores, which the softmax ignores): a gradient whose
    # reference is 0 to rounding is compared absolutely, against the
    # model's largest gradient
    gmax = max(float(par.grad.norm()) for par in model.p.values())
    for key in dump:
        if key.startswith("hook."):
            ref = hooks.get(key[5:])
            kind = "hooks"
        elif key.startswith("split."):
            ref = split.get(key[6:])
            kind = "hooks"
        elif key.startswith("grad."):
            par = model.p.get(key[5:])
            ref = par.grad if par is not None else None
            kind = "grads"
        elif key == "loss":
            ref, kind = loss.detach().reshape(1), "hooks"
        else:
            continue
        if ref is None:
            print("  %-44s no such tensor in the reference  FAIL" % key)
            ok = False
            continue
        err, how = compare(key, dump[key], ref)
        if kind == "grads" and float(ref.norm()) <= 1e-12 * gmax:
            err = float(np.linalg.norm(np.asarray(dump[key], dtype=np.float64))) / gmax
            how = "zero: |c| / max |grad|"
        lim = grad_tol if kind == "grads" else tol
        bad = not (err <= lim)
        ok &= not bad
        k2 = "logits" if key == "hook.logits" else kind
        if not (err <= worst[k2][0]):
            worst[k2] = (err, key) if err == err else (float("inf"), key)
        rows.append("  %-44s %s err %.3e%s" % (key, how, err, "  FAIL" if bad else ""))
    for name in model.names:  # every parameter's gradient was dumped
        if "grad." + name not in dump:
            rows.append("  %-44s missing from the dump  FAIL" % ("grad." + name))
            ok = False
    print("\n".join(rows))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pairs", nargs="*", help="MODEL_DIR DUMP ...")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--grad-tol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if torch is None:
        print("skipped: cannot import torch (%s)" % torch_ref.TORCH_ERROR)
        return 77
    if not args.pairs or len(args.pairs) % 2:
        ap.error("give MODEL_DIR DUMP pairs")
    torch.set_num_threads(args.threads)
    worst = {"hooks": (0.0, "-"), "logits": (0.0, "-"), "grads": (0.0, "-")}
    ok = True
    try:
        for i in range(0, len(args.pairs), 2):
            ok &= check(args.pairs[i], args.pairs[i + 1], args.tol, args.grad_tol, worst)
    except (OSError, ValueError, KeyError) as exc:
        print("ln_ref: %s" % exc, file=sys.stderr)
        return 2
    print("models: %d" % (len(args.pairs) // 2))
    print("worst: logits %.3e, hooks %.3e (%s), grads %.3e (%s)" % (
        worst["logits"][0], worst["hooks"][0], worst["hooks"][1], worst["grads"][0],
        worst["grads"][1]))
    print("%s (tolerances %.0e, gradients %.0e)" % ("ok" if ok else "FAILED", args.tol,
                                                  args.grad_tol))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
