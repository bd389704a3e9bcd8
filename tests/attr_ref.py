#!/usr/bin/python3
"""attr_ref.py -- independent PyTorch reference of attribution (attribute.h)
and attribution patching (attrpatch.h).

Written from the definitions in include/attnlab/attribute.h, attrpatch.h,
patch.h, pairs.h and model.h (not from src/analysis/attribute.c,
attrpatch.c or the engine's backward), in float64:

    x0      = W_E[tok] + W_pos[t]     (shortformer: W_E[tok]; q, k read x + W_pos[t])
    q, k, v = x W_Q[l,h], x W_K[l,h], x W_V[l,h]                (B,T,H,D)
    A       = softmax_{s<=t}(q_t . k_s / sqrt(D))                 causal
    z       = A v;  zg = g[l,h] z;  out[l,h] = zg W_O[l,h]
    x^{l+1} = x^l + sum_h out[l,h];  logits = x^L W_U  (W_E^T when tied)

With LayerNorm and biases (config.json's normalization_type and biases;
TransformerLens's definitions, as tests/ln_ref.py writes them):

    ln(x)   = (x - mean x) / scale * w + b,  scale = sqrt(mean((x - mean x)^2) + eps)
              (LNPre: no w, b)
    q, k, v = ln1(x) W_Q + b_Q, ...            (shortformer: ln1(x) + W_pos[t] for q, k)
    x^{l+1} = x^l + sum_h out[l,h] + b_O[l];  logits = ln_final(x^L) W_U + b_U

Item (pair, pos, answer, wrong): metric logit x_L(pos) . u, u = W_U[:,answer]
- W_U[:,wrong] (W_U[:,answer] when wrong < 0); item loss -log p(answer).
(With LayerNorm or biases: the logit difference, or the answer's logit, of
the model's logits.)
The task metric M (pairs.h) is the mean over items of the logit difference
(logit_diff) or of log p(answer).

Attribution (attribute.h), from one forward of the clean tokens:
  components  embed, pos, each head's out: contribution = out_c(pos) . u
  path terms  with through(l, h, v) = g[l,h] A[l,h] (v W_V[l,h]) W_O[l,h] (head
              l.h reading the residual part v through its value input,
              patterns frozen) and d[l,h] = through(l, h, x0) (its direct
              part; d[0,h] = out[0,h]):
              direct (x0); l.h = d[l,h]; virtual l0.h0>l1.h1 (l0 < l1) =
              through(l1, h1, d[l0,h0]); from 3 layers the remainder
              chains>=3 = the sum over every chain of three or more heads
              l0.h0 > l1.h1 > ... (l0 < l1 < ...) of through(.., through(l1,
              h1, d[l0,h0])), each chain enumerated one by one (not the
              logits less the other terms, so that the terms summing to
              x_L is an identity checked here, not assumed);
              value = mean contribution, dloss = mean item loss with the
              term's logits subtracted - mean item loss; per kind (direct,
              head, virtual = the rest) the same with all the kind's terms
              subtracted at once
  logit lens  x_l W_U: mean item loss and top-1 accuracy (ties: lower id)
  LayerNorm and biases: every component and term is read out with the
              clean run's ln_final scale sf frozen, as TransformerLens's
              apply_ln_to_stack: read(y) = ((y - mean y) / sf * w_f) W_U;
              components embed, pos, heads, b_O[l] per layer, and const =
              b_f W_U + b_U; in the path terms each value split by source
              divides by the clean run's ln1 scale s1 of its layer:
              through(l, h, y) = g A (((y - mean y) / s1 * w1) W_V) W_O, and
              a head's own part d[l,h] = g A (ln1~(base_l) W_V + b_V) W_O
              with ln1~ the affine map of ln1 at the frozen scale and
              base_l = x0 + sum_{l' < l} b_O[l'] (d[0,h] = out[0,h] still);
              direct = base_L, read out plus const. The lens reads each
              stream through ln_final with its own scale, plus b_U.

Attribution patching (attrpatch.h), with torch autograd. Every activation
whose gradient is wanted gets a zero tensor added where it is formed (the
gradient w.r.t. that zero is the gradient w.r.t. the activation): x_l, q,
k, v, zg, and a private copy of the residual for each head's W_Q, W_K, W_V
(the receiver of an edge: the gradient through that one head's input, every
other head reading the residual unchanged), and the final residual.
  base = corrupted (denoise) or clean (noise) run, source = the other;
  head[l,h]      = sum_{b,t} (zg_src - zg_base) . dM/dzg_base
  head_pos[lh,t] = the same at one t
  edge[c,s,h]    = sum_{b,t} (sender_src - sender_base) . dM/d(receiver input)
  normalised: denoise est / (M_clean - M_corr), noise -est / (M_clean - M_corr).

Usage:
    attr_ref.py MODEL_DIR RESULTS_FILE [--threads 1]
    attr_ref.py --check-torch          exit 0 if PyTorch imports, else 77

RESULTS_FILE is written by tests/test_attr_torch.c. Prints one line per
compared array with its largest error. Exit 0 iff all agree within their
tolerances (below), 1 if not, 2 on bad input, 77 without PyTorch.
"""
import itertools
import math
import sys

try:
    import numpy as np
    import torch
except Exception:  # ImportError, or a broken install: results_cli says so
    torch = None

from torch_ref import load_results, results_cli  # the same directory; safe without torch

# Tolerances, relative to the compared array's scale: max |ref| over the
# array, at least FLOOR (attribution numbers are logits and losses, read
# on a scale of 1; gradients, and the estimates (compared as the sums
# Δ . gradient, see main), have no natural scale, so theirs is their own
# largest element). The C computes in float32 (relative rounding
# 6e-8) through sums of at most a few hundred products, so its errors are
# of order 1e-6 of the scale (measured: below 2e-6); 2e-5 leaves room for
# that and still catches any real mistake (a wrong term, sign, item
# weighting or normalisation is of the order of the scale itself).
TOL = {"attr": 2e-5, "grad": 2e-5, "estimate": 2e-5}
FLOOR = {"attr": 1.0, "grad": 0.0, "estimate": 0.0}
# A logit-lens top-1 whose two best logits are closer than this may
# honestly differ between float32 and float64.
TIE = 1e-5
# The reference's own check of its estimates against central differences
# of M (float64): step, and the largest relative error allowed (the
# difference's truncation error is of order step^2).
FD_STEP, FD_TOL = 1e-4, 1e-6

if torch is not None:

    class Model:
        def __init__(self, cfg, w, gates):
            t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64)
            self.L, self.H, self.D = cfg["n_layers"], cfg["n_heads"], cfg["d_head"]
            self.W_E, self.W_pos = t(w["embed.W_E"]), t(w["pos_embed.W_pos"])
            # shortformer: W_pos into every head's q and k inputs, not the residual
            self.shortformer = cfg.get("pos", "standard") == "shortformer"
            self.W_U = self.W_E.t() if cfg["tied"] else t(w["unembed.W_U"])
            self.W = [{n: t(w["blocks.%d.attn.%s" % (l, n)]) for n in ("W_Q", "W_K", "W_V", "W_O")}
                      for l in range(self.L)]
            self.g = t(gates).view(self.L, self.H)
            # LayerNorm (None: none; w, b None: LNPre) and biases (zeros when absent)
            self.norm, self.eps = cfg.get("norm"), cfg.get("eps", 1e-5)
            C, H, D = self.W_E.shape[1], self.H, self.D
            opt = lambda name, shape: t(w[name]) if name in w else torch.zeros(shape, dtype=torch.float64)
            lnw = lambda name: t(w[name]) if self.norm == "LN" else None
            self.ln1 = [(lnw("blocks.%d.ln1.w" % l), lnw("blocks.%d.ln1.b" % l)) for l in range(self.L)]
            self.lnf = (lnw("ln_final.w"), lnw("ln_final.b"))
            self.b = [{n: opt("blocks.%d.attn.%s" % (l, n), (C,) if n == "b_O" else (H, D))
                       for n in ("b_Q", "b_K", "b_V", "b_O")} for l in range(self.L)]
            self.b_U = opt("unembed.b_U", (self.W_U.shape[1],))
            self.plain = self.norm is None and not cfg.get("biases")

        def ln(self, x, wb, scale=None):
            """TransformerLens's LayerNorm of x over its last axis (scale:
            frozen, else x's own); returns (output, scale)."""
            if self.norm is None:
                return x, torch.ones_like(x[..., :1])
            xc = x - x.mean(-1, keepdim=True)
            if scale is None:
                scale = (xc.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()
            out = xc / scale
            return (out if wb[0] is None else out * wb[0] + wb[1]), scale

        def forward(self, tok, eps=None):
            """Cache of one forward of tok (B,T). eps: the zero tensors to add
            (keys x (L+1), rq/rk/rv (L, H: each head's own residual copy),
            q/k/v/zg (L)), or None."""
            B, T = tok.shape
            e = (lambda k, *i: eps[k][i[0]] if len(i) == 1 else eps[k][i[0]][i[1]]) if eps \
                else (lambda k, *i: 0.0)
            P = self.W_pos[:T].expand(B, T, -1)
            c = {"embed": self.W_E[tok], "pos": torch.zeros_like(P) if self.shortformer else P}
            x = c["embed"] + c["pos"] + e("x", 0)
            c["x"], c["A"], c["zg"], c["out"] = [x], [], [], []
            future = torch.ones(T, T, dtype=torch.bool).triu(1)
            c["s1"] = []
            for l in range(self.L):
                W = self.W[l]
                qkv = []
                c["s1"].append(self.ln(x, self.ln1[l])[1])
                for s, n in enumerate("qkv"):
                    # each head reads its own copy of x (an edge's receiver), before ln1
                    rows = []
                    for h in range(self.H):
                        xin = self.ln(x + e("r" + n, l, h), self.ln1[l])[0]
                        xin = xin + P if self.shortformer and n in "qk" else xin
                        rows.append(torch.einsum("btc,cd->btd", xin, W["W_" + n.upper()][h]) +
                                    self.b[l]["b_" + n.upper()][h])
                    qkv.append(torch.stack(rows, 2) + e(n, l))  # (B,T,H,D)
                q, k, v = qkv
                A = (torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(self.D)) \
                    .masked_fill(future, float("-inf")).softmax(-1)
                z = torch.einsum("bhts,bshd->bthd", A, v)
                zg = z * self.g[l].view(1, 1, -1, 1) + e("zg", l)
                out = torch.einsum("bthd,hdc->bthc", zg, W["W_O"])  # (B,T,H,C)
                x = x + out.sum(2) + self.b[l]["b_O"] + e("x", l + 1)
                c["A"].append(A), c["zg"].append(zg), c["out"].append(out), c["x"].append(x)
            c["sf"] = self.ln(x, self.lnf)[1]
            c["logits"] = self.unembed(x)
            return c

        def unembed(self, x):
            """The model's logits of residual x: ln_final with x's own scale."""
            return self.ln(x, self.lnf)[0] @ self.W_U + self.b_U

        def readout(self, c, vec):
            """Logits of residual part vec with the clean run's ln_final
            scale frozen (apply_ln_to_stack, then w), no constant."""
            if self.norm is None:
                return vec @ self.W_U
            out = (vec - vec.mean(-1, keepdim=True)) / c["sf"]
            return (out if self.lnf[0] is None else out * self.lnf[0]) @ self.W_U

        def const(self):
            """(V) ln_final.b W_U + b_U."""
            return (self.b_U if self.lnf[1] is None else self.lnf[1] @ self.W_U + self.b_U)

        def base(self, c, l):
            """x0 and the b_O of the layers below l: the stream less the heads."""
            v = c["embed"] + c["pos"]
            for k in range(l):
                v = v + self.b[k]["b_O"]
            return v

        def path_terms(self, c):
            """(n_terms, B, T, C) residual vectors of attribute.h's terms."""
            L, H = self.L, self.H
            x0 = self.base(c, L)  # the direct term: x0 and every b_O

            def through(l, h, src, cst=False):  # head l.h reading src through its value input
                W, g, A = self.W[l], self.g[l], c["A"][l]
                if self.norm is None:
                    v = src @ W["W_V"][h]
                else:  # ln1 at the clean run's scale: affine with the constant, else linear
                    xc = (src - src.mean(-1, keepdim=True)) / c["s1"][l]
                    w1, b1 = self.ln1[l]
                    v = (xc if w1 is None else xc * w1 + (b1 if cst else 0.0)) @ W["W_V"][h]
                v = v + (self.b[l]["b_V"][h] if cst else 0.0)
                return g[h] * (A[:, h] @ v) @ W["W_O"][h]
            d = {(l, h): c["out"][0][:, :, h] if l == 0 else through(l, h, self.base(c, l), True)
                 for l in range(L) for h in range(H)}
            terms = [x0] + [d[l, h] for l in range(L) for h in range(H)]
            terms += [through(l1, h1, d[s // H, s % H])
                      for l1 in range(1, L) for s in range(l1 * H) for h1 in range(H)]
            if L >= 3:
                rem = torch.zeros_like(x0)
                for k in range(3, L + 1):
                    for layers in itertools.combinations(range(L), k):
                        for heads in itertools.product(range(H), repeat=k):
                            v = d[layers[0], heads[0]]
                            for l, h in zip(layers[1:], heads[1:]):
                                v = through(l, h, v)
                            rem = rem + v
                terms.append(rem)
            return torch.stack(terms)

    def item_index(items):
        return [torch.tensor(col, dtype=torch.long) for col in zip(*items)]

    def item_metric(logits, items, logit_diff):
        """(n_items) metric of each item from logits (B,T,V)."""
        n, t, a, w = item_index(items)
        row = logits[n, t]
        i = torch.arange(len(items))
        return row[i, a] - row[i, w] if logit_diff else row.log_softmax(-1)[i, a]

    def item_loss(logits, items):
        n, t, a, _ = item_index(items)
        return -logits[n, t].log_softmax(-1)[torch.arange(len(items)), a]

    def u_vectors(model, items):
        """(n_items, C): the direction whose dot product is the metric logit."""
        _, _, a, w = item_index(items)
        u = model.W_U[:, a].t().clone()
        has = w >= 0
        u[has] -= model.W_U[:, w[has]].t()
        return u

    def attribution(model, tok, items, logit_diff, T):
        """attribute.h's numbers, as a dict named as al_attr_result."""
        L, H = model.L, model.H
        c = model.forward(tok)
        n, t, a, w = item_index(items)
        i = torch.arange(len(items))
        has = (w >= 0).double()
        # (B,T,V) logits -> (n_items) metric logit
        metric = lambda lg: lg[n, t][i, a] - has * lg[n, t][i, w.clamp(min=0)]
        if model.plain:
            u = u_vectors(model, items)
            dot = lambda vec: (vec[n, t] * u).sum(-1)  # vec (B,T,C) -> (n_items)
        else:
            dot = lambda vec: metric(model.readout(c, vec))
        comps = [c["embed"], c["pos"]] + [c["out"][l][:, :, h] for l in range(L) for h in range(H)]
        if not model.plain:
            comps += [model.b[l]["b_O"].expand_as(c["embed"]) for l in range(L)]
        item_dla = torch.stack([dot(v) for v in comps], 1)
        if not model.plain:
            cst = model.const().expand(c["logits"].shape)
            item_dla = torch.cat([item_dla, metric(cst).unsqueeze(1)], 1)
        r = {"item_metric": dot(c["x"][L]) if model.plain else metric(c["logits"]),
             "item_dla": item_dla, "dla": item_dla.mean(0)}
        r["metric"] = r["item_metric"].mean()
        r["pos_items"] = torch.bincount(t, minlength=T)
        dla_pos = torch.full((item_dla.shape[1], T), float("nan"), dtype=torch.float64)
        for p in range(T):
            if r["pos_items"][p] > 0:
                dla_pos[:, p] = item_dla[t == p].mean(0)
        r["dla_pos"] = dla_pos
        base = item_loss(c["logits"], items).mean()
        r["loss"] = base
        # the lens
        lens_loss, lens_acc, ties = [], [], 0
        for l in range(L + 1):
            lg = c["x"][l] @ model.W_U if model.plain else model.unembed(c["x"][l])
            lens_loss.append(item_loss(lg, items).mean())
            row = lg[n, t]
            best = row.argmax(-1)  # the first of equal maxima: ties to the lower id
            lens_acc.append((best == item_index(items)[2]).double().mean())
            top2 = row.topk(2, -1).values
            ties += int(((top2[:, 0] - top2[:, 1]) < TIE).sum())
        r["lens_loss"], r["lens_acc"], r["lens_ties"] = torch.stack(lens_loss), torch.stack(lens_acc), ties
        # path terms
        terms = model.path_terms(c)
        r["term_sum_err"] = float((terms.sum(0) - c["x"][L]).abs().max())
        if model.plain:
            tl = terms @ model.W_U  # (n_terms, B, T, V)
        else:
            tl = torch.stack([model.readout(c, v) for v in terms])
            tl[0] = tl[0] + model.const()
        # how much the chains of >= 3 heads carry (0 below 3 layers): the
        # identity above only tests the remainder if it is not negligible
        r["rem_scale"] = float(terms[-1].abs().max()) if L >= 3 else 0.0
        item_term = torch.stack([metric(x) for x in tl], 1)
        r["item_term"], r["term_value"] = item_term, item_term.mean(0)
        r["term_dloss"] = torch.stack([item_loss(c["logits"] - tl[k], items).mean() - base
                                       for k in range(len(terms))])
        kinds = [[0], list(range(1, 1 + L * H)), list(range(1 + L * H, len(terms)))]
        r["kind_value"] = torch.stack([r["term_value"][k].sum() for k in kinds])
        r["kind_dloss"] = torch.stack([item_loss(c["logits"] - tl[k].sum(0), items).mean() - base
                                       if k else torch.tensor(0.0, dtype=torch.float64)
                                       for k in kinds])
        r["att_max"] = float(torch.stack([a.max(-1).values.mean() for a in c["A"]]).mean())
        return r

    def zero_eps(model, B, T, grad):
        """Model.forward's eps, all zero (leaves for autograd when grad)."""
        C, L, H, D = model.W_E.shape[1], model.L, model.H, model.D
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, requires_grad=grad)
        eps = {"x": [z(B, T, C) for _ in range(L + 1)]}
        for n in "qkv":
            eps["r" + n] = [[z(B, T, C) for _ in range(H)] for _ in range(L)]
            eps[n] = [z(B, T, H, D) for _ in range(L)]
        eps["zg"] = [z(B, T, H, D) for _ in range(L)]
        return eps

    def grads(model, tok, items, logit_diff):
        """M (mean over items) at tok and its gradient w.r.t. every
        activation: {name: tensor} of the eps keys, and the cache."""
        eps = zero_eps(model, *tok.shape, True)
        c = model.forward(tok, eps)
        M = item_metric(c["logits"], items, logit_diff).mean()
        M.backward()
        g = {k: ([[e.grad for e in row] for row in v] if k[0] == "r" else [e.grad for e in v])
             for k, v in eps.items()}
        return float(M), g, c

    def engine_layout(g):
        """dx (L+1,B,T,C), dzg (L,B,T,H,D), dqkv (L,B,T,3,H,D) as model.h lays them out."""
        return {"dx": torch.stack(g["x"]), "dzg": torch.stack(g["zg"]),
                "dqkv": torch.stack([torch.stack([g[n][l] for n in "qkv"], 2)
                                     for l in range(len(g["zg"]))])}

    def estimates(model, clean, corr, items, logit_diff, direction):
        """attrpatch.h's head, head_pos, edge, M_clean, M_corr."""
        L, H = model.L, model.H
        base_tok, src_tok = (corr, clean) if direction == "denoise" else (clean, corr)
        _, g, base = grads(model, base_tok, items, logit_diff)
        with torch.no_grad():
            src = model.forward(src_tok)
            m = {k: float(item_metric(model.forward(tk)["logits"], items, logit_diff).mean())
                 for k, tk in (("clean", clean), ("corr", corr))}
        den = m["clean"] - m["corr"]
        norm = (lambda d: d / den) if direction == "denoise" else (lambda d: -d / den)
        T = clean.shape[1]
        head = torch.zeros(L, H, dtype=torch.float64)
        head_pos = torch.zeros(L * H, T, dtype=torch.float64)
        for l in range(L):
            d = ((src["zg"][l] - base["zg"][l]) * g["zg"][l]).sum(-1)  # (B,T,H)
            head[l] = d.sum((0, 1))
            head_pos[l * H:(l + 1) * H] = d.sum(0).t()
        ns = 2 + H
        edge = torch.full((4 * ns * H,), float("nan"), dtype=torch.float64)
        senders = [src["embed"] - base["embed"], src["pos"] - base["pos"]] + \
                  [src["out"][0][:, :, h] - base["out"][0][:, :, h] for h in range(H)]
        for s, delta in enumerate(senders):
            edge[(3 * ns + s) * H] = (delta * g["x"][L]).sum()
            if L == 2:
                for ci, n in enumerate("qkv"):
                    for h in range(H):
                        edge[(ci * ns + s) * H + h] = (delta * g["r" + n][1][h]).sum()
        # the reference checks itself: each estimate is a directional
        # derivative, so a central difference of M along the same Δ, added
        # where the gradient was taken, must give it (float64: to ~1e-9)
        def fd(put):
            Ms = []
            for sign in (1.0, -1.0):
                eps = zero_eps(model, *base_tok.shape, False)
                put(eps, sign * FD_STEP)
                Ms.append(float(item_metric(model.forward(base_tok, eps)["logits"], items,
                                            logit_diff).mean()))
            return (Ms[0] - Ms[1]) / (2 * FD_STEP)
        raw, num = [], []
        for l in range(L):
            for h in range(H):
                d = src["zg"][l][:, :, h] - base["zg"][l][:, :, h]
                raw.append(head[l, h])
                num.append(fd(lambda e, a: e["zg"][l][:, :, h].__iadd__(a * d)))
        for s, delta in enumerate(senders):
            raw.append(edge[(3 * ns + s) * H])
            num.append(fd(lambda e, a: e["x"][L].__iadd__(a * delta)))
            for ci, n in enumerate("qkv" if L == 2 else ""):
                for h in range(H):
                    raw.append(edge[(ci * ns + s) * H + h])
                    num.append(fd(lambda e, a: e["r" + n][1][h].__iadd__(a * delta)))
        raw, num = torch.stack(raw), torch.tensor(num, dtype=torch.float64)
        fd_err = float((raw - num).abs().max() / max(1e-12, float(raw.abs().max())))
        raw = {"head": head.flatten(), "head_pos": head_pos.flatten(), "edge": edge}
        out = {k: norm(v) for k, v in raw.items()}
        out.update({"raw": raw, "m_clean": m["clean"], "m_corr": m["corr"], "fd_err": fd_err})
        return out


class Report:
    def __init__(self):
        self.ok, self.worst, self.n = True, 0.0, 0

    def compare(self, name, ref, got, kind, slack=0.0):
        """ref (tensor or number) vs got (JSON list or number, null = NaN):
        |got - ref| <= TOL[kind] * max(FLOOR[kind], max |ref|) elementwise,
        NaNs in the same places. slack: an allowance added (lens ties)."""
        tol = TOL[kind]
        ref = torch.as_tensor(ref, dtype=torch.float64).flatten()
        got = torch.tensor([float("nan") if x is None else x
                            for x in (got if isinstance(got, list) else [got])],
                           dtype=torch.float64)
        if ref.numel() != got.numel():
            print("  %-40s %d values, want %d  FAIL" % (name, got.numel(), ref.numel()))
            self.ok = False
            return
        nan_ok = bool((ref.isnan() == got.isnan()).all())
        fin = ~ref.isnan() & ~got.isnan()
        scale = max(FLOOR[kind], float(ref[fin].abs().max()) if fin.any() else 0.0)
        scale = scale if scale > 0 else 1.0  # an all-zero array: absolute
        err = float((ref[fin] - got[fin]).abs().max()) if fin.any() else 0.0
        ok = nan_ok and err <= tol * scale + slack
        print("  %-40s n %5d  max err %.2e  scale %8.3g  rel %.2e%s%s"
              % (name, int(fin.sum()), err, scale, err / scale, "" if nan_ok else "  NaNs differ",
                 "" if ok else "  FAIL"))
        self.ok &= ok
        self.worst = max(self.worst, err / scale)
        self.n += 1


def main():
    args, rc = results_cli(__doc__, "results JSON of tests/test_attr_torch.c")
    if args is None:
        return rc
    try:
        cfg, weights, res = load_results(args, None)  # the path expansion: any depth
        L, H = cfg["n_layers"], cfg["n_heads"]
        model = Model(cfg, weights, res["gates"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print("attr_ref: %s" % exc, file=sys.stderr)
        return 2
    print("torch %s, float64; model %s: L=%d C=%d H=%d D=%d tied=%s pos=%s norm=%s biases=%s; "
          "gates %s" % (torch.__version__, args.model, L, cfg["d_model"], H, cfg["d_head"],
                        cfg["tied"], cfg["pos"], cfg["norm"], ",".join(sorted(cfg["biases"])) or "-",
                        res["gates"]))
    rep = Report()
    for run in res["runs"]:
        task, name = run["task"], run["name"]
        N, T, ld = task["N"], task["T"], task["logit_diff"]
        clean = torch.tensor(task["clean"], dtype=torch.long).view(N, T)
        corr = torch.tensor(task["corr"], dtype=torch.long).view(N, T)
        items = [tuple(it) for it in task["items"]]
        print(" %s: task %s N=%d T=%d, %d items, logit_diff %d" % (name, task["name"], N, T,
                                                                   len(items), ld))
        if "attr" in run:
            a = run["attr"]
            with torch.no_grad():
                r = attribution(model, clean, items, ld, T)
            print("  (mean max attention prob %.3f; path terms sum to x_L within %.1e; "
                  "%d near-ties in the lens%s)" % (r["att_max"], r["term_sum_err"], r["lens_ties"],
                                                   "; chains of >= 3 heads up to %.3g"
                                                   % r["rem_scale"] if L >= 3 else ""))
            if r["term_sum_err"] > 1e-9:  # float64 rounding only
                print("  %s reference's path terms do not add up  FAIL" % name)
                rep.ok = False
            for k in ("metric", "loss", "dla", "dla_pos", "pos_items", "item_metric", "item_dla",
                      "term_value", "term_dloss", "item_term", "kind_value", "kind_dloss",
                      "lens_loss"):
                rep.compare("%s attr %s" % (name, k), r[k], a[k], "attr")
            # accuracy is a count: exact, but for near-ties (one item each)
            rep.compare("%s attr lens_acc" % name, r["lens_acc"], a["lens_acc"], "attr",
                        r["lens_ties"] / len(items))
        for gr in run.get("grads", []):
            sel = slice(gr["n0"], gr["n0"] + gr["nb"])
            tok = (clean if gr["which"] == 0 else corr)[sel]
            sub = [(p - gr["n0"], t, an, w) for p, t, an, w in items
                   if gr["n0"] <= p < gr["n0"] + gr["nb"]]
            M, g, _ = grads(model, tok, sub, ld)
            lay = engine_layout(g)
            label = "%s grad %s %s %d+%d" % (name, gr["source"], ("clean", "corr")[gr["which"]],
                                             gr["n0"], gr["nb"])
            if "metric" in gr:
                rep.compare(label + " metric", M, gr["metric"], "attr")
            for k in ("dx", "dzg", "dqkv"):
                rep.compare("%s %s" % (label, k), lay[k], gr[k], "grad")
        for ap_ in run.get("attrpatch", []):
            est = estimates(model, clean, corr, items, ld, ap_["direction"])
            label = "%s attrpatch %s" % (name, ap_["direction"])
            ok = est["fd_err"] <= FD_TOL
            print("  %s: the reference's estimates vs central differences: rel. err %.1e%s"
                  % (label, est["fd_err"], "" if ok else "  FAIL"))
            rep.ok &= ok
            ns = 2 + H
            want = {"n_senders": ns, "n_recv": H if L == 2 else 0, "n_edge": 4 * ns * H}
            got = {k: ap_[k] for k in want}
            if got != want:
                print("  %s layout %s, want %s  FAIL" % (label, got, want))
                rep.ok = False
            for k in ("m_clean", "m_corr"):
                rep.compare("%s %s" % (label, k), est[k], ap_[k], "attr")
            # The estimates are compared before normalisation: on a random
            # model M_clean - M_corr can be 1e-3, and dividing by it would
            # turn the C's float32 rounding of M (1e-7) into 1e-4 of every
            # estimate. So the C's numbers are un-normalised with its own M's
            # by the documented formula (denoise est = d / (M_clean - M_corr),
            # noise -d / (...)) and d is compared with the reference's; the
            # M's are compared above. Together they pin the normalised values.
            one = lambda x: (x[0] if isinstance(x, list) else x) or 0.0  # null: NaN
            den = one(ap_["m_clean"]) - one(ap_["m_corr"])
            sign = 1.0 if ap_["direction"] == "denoise" else -1.0
            print("  %s: M_clean - M_corr = %.3g (reference %.3g)"
                  % (label, den, est["m_clean"] - est["m_corr"]))
            for k in ("head", "head_pos", "edge"):
                raw = [None if x is None else x * den * sign for x in ap_[k]]
                rep.compare("%s %s" % (label, k), est["raw"][k], raw, "estimate")
    print("%s: %d arrays compared, worst relative error %.3e (tolerances %s, scale floors %s)"
          % ("ok" if rep.ok else "MISMATCH", rep.n, rep.worst, TOL, FLOOR))
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
