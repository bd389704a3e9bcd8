#!/usr/bin/python3
"""circuit_ref.py -- independent PyTorch reference of circuit runs (any depth).

Written from the definition of the head graph and of running a circuit
in include/attnlab/graph.h and docs/design.md §2 (not from
src/engine/circuit.c, which subtracts differences from the plain
forward): here every receiver's input is built as the sum over its
senders, as the definition says, in float64.

Model (design §2):
    x0      = W_E[tok] + W_pos[t]            (shortformer: W_E[tok]; q, k read + W_pos[t])
    q, k, v = x W_Q[l,h], x W_K[l,h], x W_V[l,h]
    z       = softmax_{s<=t}(q_t . k_s / sqrt(D)) v
    out[l,h]= g[l,h] z W_O[l,h]
    x^{l+1} = x^l + sum_h out[l,h];  logits = x^L W_U

Circuit (graph.h): nodes embed, pos, each head's q/k/v inputs and its
output, the logits. The input of receiver (head l.h, channel c) is

    pos + sum over senders s in {embed, heads l0.h0 with l0 < l} of
          (kept(s -> l.h.c) ? value_s in this circuit run : value_s in the fill run)

and the logits' input the same sum over embed and every head. value of
embed: W_E[token]; of a head: its out[l0,h0]. pos is the same in both
runs, so its edges carry the same value either way. The fill is the
model's own run on the corrupted tokens. A head's value "in this circuit
run" is computed from its own circuit inputs, so removals propagate
through every layer.

Edge index (graph.h): input ((l*H+h)*3+c)*2+s; composition from sender
head s0 = l0*H+h0 into l1.h1.c: 6LH + 3H^2 l1(l1-1)/2 + (s0*H+h1)*3 + c;
output 6LH + 3H^2 L(L-1)/2 + j (j 0 embed, 1 pos, 2+l*H+h).

Metrics at the task's items: KL(p_clean || p_circuit) averaged over
items, and M = mean log p(answer) (logit(answer) - logit(wrong) when
logit_diff).

Input (JSON, written by tests/test_circuit_ref.c): the model's weights,
the task, and trials [{kept: [0/1 per edge], kl: [..], metric: [..]}]
where each list holds the engine's values by its different ways (the
hooks' full forward, discovery's incremental evaluation). Exit 0 iff
every value agrees within --tol, 1 otherwise, 2 on bad input, 77 if
PyTorch is not importable.

Usage:
    circuit_ref.py RESULTS_FILE [--tol 1e-4]
    circuit_ref.py --check-torch
"""
import argparse
import json
import math
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="?")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--check-torch", action="store_true")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch not importable")
        return 77
    if a.check_torch:
        return 0
    if not a.results:
        print("no results file")
        return 2
    torch.set_num_threads(1)
    with open(a.results) as f:
        r = json.load(f)
    L, H, D, C, V = r["L"], r["H"], r["D"], r["C"], r["V"]
    short = r["pos_type"] == "shortformer"
    dt = torch.float64

    def ten(name, shape):
        return torch.tensor(r[name], dtype=dt).reshape(shape)

    W_E = ten("W_E", (V, C))
    W_pos = ten("W_pos", (r["n_ctx"], C))
    W_Q = ten("W_Q", (L, H, C, D))
    W_K = ten("W_K", (L, H, C, D))
    W_V = ten("W_V", (L, H, C, D))
    W_O = ten("W_O", (L, H, D, C))
    W_U = ten("W_U", (C, V))
    g = ten("gates", (L, H))
    t = r["task"]
    N, T = t["N"], t["T"]
    clean = torch.tensor(t["clean"]).reshape(N, T)
    corr = torch.tensor(t["corr"]).reshape(N, T)
    items = t["items"]
    pos = W_pos[:T]  # (T, C)

    def k_input(l, h, c, s):
        return ((l * H + h) * 3 + c) * 2 + s

    def k_comp(s0, l1, h1, c):
        return 6 * L * H + 3 * H * H * l1 * (l1 - 1) // 2 + (s0 * H + h1) * 3 + c

    def k_out(j):
        return 6 * L * H + 3 * H * H * L * (L - 1) // 2 + j

    n_edges = 6 * L * H + 3 * H * H * L * (L - 1) // 2 + 2 + L * H
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)

    def head_out(l, h, xq, xk, xv):
        """out[l,h] from its three inputs (N, T, C)."""
        if short:
            xq, xk = xq + pos, xk + pos
        q, k, v = xq @ W_Q[l, h], xk @ W_K[l, h], xv @ W_V[l, h]
        s = (q @ k.transpose(1, 2)) / math.sqrt(D)
        s = s.masked_fill(mask, float("-inf"))
        z = torch.softmax(s, dim=-1) @ v
        return g[l, h] * (z @ W_O[l, h])

    def run(tok, kept=None, fill=None):
        """Logits (N, T, V) and head outputs [(l, h)] of the circuit kept on
        tok with fill values `fill` (None: every edge kept, the plain run)."""
        emb = W_E[tok]
        base = torch.zeros_like(emb) if short else pos.expand_as(emb)  # pos: same in both runs
        outs = {}
        for l in range(L):
            for h in range(H):
                ins = []
                for c in range(3):
                    x = base.clone()
                    x = x + (emb if kept is None or kept[k_input(l, h, c, 0)] else fill["embed"])
                    for l0 in range(l):
                        for h0 in range(H):
                            s0 = l0 * H + h0
                            if kept is None or kept[k_comp(s0, l, h, c)]:
                                x = x + outs[(l0, h0)]
                            else:
                                x = x + fill[(l0, h0)]
                    ins.append(x)
                outs[(l, h)] = head_out(l, h, *ins)
        x = base.clone()
        x = x + (emb if kept is None or kept[k_out(0)] else fill["embed"])
        for l in range(L):
            for h in range(H):
                j = 2 + l * H + h
                x = x + (outs[(l, h)] if kept is None or kept[k_out(j)] else fill[(l, h)])
        return x @ W_U, outs

    lc, _ = run(clean)
    lr, outs_r = run(corr)
    fill = dict(outs_r)
    fill["embed"] = W_E[corr]
    lpc = torch.log_softmax(lc, dim=-1)

    def metrics(logits):
        lp = torch.log_softmax(logits, dim=-1)
        kl = m = 0.0
        for (p, ps, ans, wr) in items:
            a_ = lpc[p, ps]
            kl += float((a_.exp() * (a_ - lp[p, ps])).sum())
            if t["logit_diff"]:
                m += float(logits[p, ps, ans] - logits[p, ps, wr])
            else:
                m += float(lp[p, ps, ans])
        return kl / len(items), m / len(items)

    worst = 0.0
    bad = 0
    for i, tr in enumerate(r["trials"]):
        kept = tr["kept"]
        if len(kept) != n_edges:
            print("trial %d: %d edges, the graph has %d" % (i, len(kept), n_edges))
            return 2
        lk, _ = run(clean, kept, fill)
        kl, m = metrics(lk)
        for way, (kc, mc) in enumerate(zip(tr["kl"], tr["metric"])):
            d = max(abs(kc - kl), abs(mc - m))
            worst = max(worst, d)
            ok = d <= a.tol
            bad += not ok
            print("trial %2d way %d: %4d of %d edges kept  kl %.8f (engine %.8f)  "
                  "metric %.8f (engine %.8f)  %s" % (i, way, sum(kept), n_edges, kl, kc, m, mc,
                                                    "ok" if ok else "DIFFERS"))
    print("circuit runs L=%d: worst |diff| %.3g over %d trials (tol %g)" %
          (L, worst, len(r["trials"]), a.tol))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
