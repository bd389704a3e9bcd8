#!/usr/bin/python3
"""ln_circuit_ref.py -- independent reference of circuit runs (edge removal) on
models with LayerNorm and biases, in float64.

The definition, from docs/hooks.md and graph.h's head graph (path-level edge
removal, as ACDC and path patching define it), written without the C code:
every receiver reads the sum over its senders of the sender's value in the
circuit run if the edge is kept, else its value in the corrupted run:

    receiver head (l, h), channel c in q, k, v:
        in = (kept(embed->l.h.c) ? W_E[clean] : W_E[corr]) + pos (standard)
             + sum_{l0 < l} (b_O[l0] + sum_h0 (kept(l0.h0->l.h.c) ? out_circ[l0,h0]
                                                                : out_corr[l0,h0]))
        c_h = ln1_l(in) (+ pos for q, k with shortformer) W_c[l,h] + b_c[l,h]
    out_circ[l,h] = g[l,h] * softmax(q k^T / sqrt(D), causal) v  W_O[l,h]
    logits = ln_final(embed' + pos + sum_l (b_O[l] + sum_h out'[l,h])) W_U + b_U

with embed', out' taken the same way for the logits' edges. pos edges carry the
same value in both runs.

Usage: ln_circuit_ref.py [--tol 1e-5] MODEL_DIR DUMP [MODEL_DIR DUMP ...]
DUMP (tests/test_ln_circuit.c): clean, corr (B, T) int32, gates (L, H), and
per circuit i kept.i (n_edges) int32 and logits.i (B, T, V) float32.
Exit 0 iff every circuit's logits are within --tol (norm of the difference over
the norm of the reference), 1 if not, 2 on bad input, 77 without PyTorch.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402
from torch_ref import read_safetensors, rel_err  # noqa: E402

torch = torch_ref.torch


def k_input(H, l, h, c, s):
    return ((l * H + h) * 3 + c) * 2 + s


def k_comp(L, H, s, l1, h1, c):
    return 6 * L * H + 3 * H * H * l1 * (l1 - 1) // 2 + (s * H + h1) * 3 + c


def k_out(L, H, j):
    return 6 * L * H + 3 * H * H * L * (L - 1) // 2 + j


def circuit_logits(ref, clean, corr, gates, kept):
    cfg, p = ref.cfg, ref.p
    L, H, D, C = cfg["L"], cfg["H"], cfg["D"], cfg["C"]
    B, T = clean.shape
    short = cfg["pos"] == "shortformer"
    _, hk = ref.forward(corr, gates)
    out_corr = [hk["blocks.%d.attn.hook_result" % l] for l in range(L)]  # (B, T, H, C)
    emb = {1: p["embed.W_E"][clean], 0: p["embed.W_E"][corr]}
    pos = p["pos_embed.W_pos"][:T].unsqueeze(0).expand(B, T, C)
    base = 0.0 if short else pos
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    out_circ = []
    junk = {}
    for l in range(L):
        a = "blocks.%d." % l
        res = torch.zeros(B, T, H, C, dtype=torch.float64)
        for h in range(H):
            chans = []
            for c in range(3):
                x = emb[int(kept[k_input(H, l, h, c, 0)])] + base
                for l0 in range(l):
                    x = x + ref.bias("blocks.%d.attn.b_O" % l0, x[0, 0])
                    for h0 in range(H):
                        src = out_circ if kept[k_comp(L, H, l0 * H + h0, l, h, c)] else out_corr
                        x = x + src[l0][:, :, h0]
                n = ref.ln(x, a + "ln1.", junk)
                if short and c < 2:
                    n = n + pos
                W = p[a + "attn." + ("W_Q", "W_K", "W_V")[c]][h]
                bname = a + "attn." + ("b_Q", "b_K", "b_V")[c]
                bias = p[bname][h] if bname in p else 0.0
                chans.append(n @ W + bias)
            q, k, v = chans
            scores = torch.einsum("bqd,bkd->bqk", q, k) / math.sqrt(D)
            pattern = scores.masked_fill(mask, float("-inf")).softmax(-1)
            z = torch.einsum("bqk,bkd->bqd", pattern, v)
            res[:, :, h] = (z * gates[l, h]) @ p[a + "attn.W_O"][h]
        out_circ.append(res)
    x = emb[int(kept[k_out(L, H, 0)])] + base
    for l in range(L):
        x = x + ref.bias("blocks.%d.attn.b_O" % l, x[0, 0])
        for h in range(H):
            src = out_circ if kept[k_out(L, H, 2 + l * H + h)] else out_corr
            x = x + src[l][:, :, h]
    u = ref.ln(x, "ln_final.", junk)
    W_U = p["embed.W_E"].t() if cfg["tied"] else p["unembed.W_U"]
    return u @ W_U + ref.bias("unembed.b_U", W_U[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("pairs", nargs="+")
    args = ap.parse_args()
    if torch is None:
        print("PyTorch not installed")
        return 77
    if len(args.pairs) % 2:
        print("need MODEL_DIR DUMP pairs")
        return 2
    from ln_ref import Ref, load_config
    worst, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(args.pairs), 2):
            mdir, dump = args.pairs[i], args.pairs[i + 1]
            cfg = load_config(mdir)
            weights, _ = read_safetensors(os.path.join(mdir, "model.safetensors"))
            ref = Ref(cfg, weights)
            d, _ = read_safetensors(dump)
            clean = torch.tensor(d["clean"], dtype=torch.long)
            corr = torch.tensor(d["corr"], dtype=torch.long)
            gates = torch.tensor(d["gates"], dtype=torch.float64)
            j = 0
            while "kept.%d" % j in d:
                kept = [int(v) for v in d["kept.%d" % j]]
                want = circuit_logits(ref, clean, corr, gates, kept)
                got = torch.tensor(d["logits.%d" % j], dtype=torch.float64)
                err, _ = rel_err(got.numpy(), want.numpy())
                print("%s circuit %d (%d of %d edges kept): %.3g" % (
                    mdir, j, sum(kept), len(kept), err))
                worst = max(worst, err)
                n += 1
                j += 1
    print("circuits: %d" % n)
    print("worst: %.3g" % worst)
    return 0 if n and worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
