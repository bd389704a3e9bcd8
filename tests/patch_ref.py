#!/usr/bin/python3
"""patch_ref.py -- independent PyTorch reference of activation and path patching.

Written from the definitions in include/attnlab/patch.h, pairs.h and
docs/design.md §2 and §5 (not from src/analysis/patch.c or the engine),
the TransformerLens way: a small attention-only transformer of nn.Modules
with identity hook points (hook_embed, hook_pos_embed, hook_resid_pre,
hook_q, hook_k, hook_v, hook_pattern, hook_z, hook_result,
hook_resid_final), forward hooks that cache or overwrite them, float64.

    x0      = W_E[tok] + W_pos[t]                     hook_embed + hook_pos_embed
    q, k, v = x W_Q[l,h], x W_K[l,h], x W_V[l,h]       hook_q, hook_k, hook_v (B,T,H,D)
    A       = softmax_{s<=t}(q_t . k_s / sqrt(D))      hook_pattern (B,H,T,T)
    z       = A v                                      hook_z (B,T,H,D), before the gate
    r[l,h]  = g[l,h] z W_O[l,h]                        hook_result (B,T,H,C)
    x^{l+1} = x^l + sum_h r[l,h]                       hook_resid_pre of the next layer
    logits  = x^L W_U   (W_E^T when tied)

With positional_embedding_type "shortformer" x0 = W_E[tok] alone and every
head's q and k read x + W_pos[t] (v reads x), as TransformerLens'
shortformer attention does; hook_pos_embed still holds W_pos.

With normalization_type "LN" or "LNPre" and "biases" (TransformerLens's
LayerNorm: ln(x) = x_c / sqrt(mean(x_c^2) + eps) * w + b, x_c = x -
mean(x); LNPre without w, b): q, k, v read ln1(x) (shortformer: ln1(x) +
W_pos[t] for q, k) plus b_Q, b_K, b_V; a layer adds sum_h r[l,h] + b_O;
logits = ln_final(hook_resid_final(x)) W_U + b_U. Activation and path
patching are checked on such models (attribution patching refuses them); a
path's receiver reads ln1(target residual + delta), its own LayerNorm.

Task (given in the results file, checked against patch.h's definition
of `induction`): N clean / corrupted pairs and items (pair, pos, answer,
wrong); M = mean over items of log p(answer) (logit(answer) −
logit(wrong) when logit_diff). Denoising runs the corrupted tokens with
activations from the cached clean run, noising the clean tokens with the
corrupted run's; effect (M_p − M_corr)/(M_clean − M_corr) resp.
(M_clean − M_p)/(M_clean − M_corr).

Activation patching components, grid index k:
    resid     hook_resid_pre of layer l at position t         k = l*T + t
    head      hook_z of head (l,h), every position            k = l*H + h
    head_pos  hook_z of (l,h) at position t                   k = (l*H+h)*T + t
    q, k, v   hook_q / hook_k / hook_v of (l,h) at t          k = (l*H+h)*T + t
    pattern   hook_pattern row t of (l,h) (z recomputed)      k = (l*H+h)*T + t

Path patching (Wang et al. 2022), any depth. W = max(1, L-1)*H; senders
s: 0 embed, 1 pos, 2 + l*H + h head l.h for l = 0..max(0, L-2); receivers
of the q/k/v channels: head l1.h1 for l1 = 1..L-1 at r = (l1-1)*H + h1;
the direct path (the logits) at r = 0. The patched run ("target") is the
corrupted one when denoising, the clean one when noising, the other is
the "source". Two passes, as in the paper:
  pass 2: target tokens with the sender's activation (hook_embed,
    hook_pos_embed, or head l.h's hook_z) from the source and every other
    head's hook_z frozen at the target's; cache every layer's
    hook_q/k/v and the logits. So the residual entering every layer after
    the sender's is target − sender_target + sender_source, and the final
    one the same (every other head frozen).
  pass 3 (L >= 2): target tokens with receiver head l1.h1's q (k, v) at
    every position from pass 2's layer l1, nothing frozen (the layers
    after l1 recomputed), for every sender of a layer before l1.
  direct: the metric of pass 2.
Layout: [(c*n_senders + s)*W + r] for c = 0 q, 1 k, 2 v, 3 direct; NaN
where no path exists (a sender head of layer >= l1, direct at r > 0, q/k/v
of a 1-layer model).

Attribution patching's edges (attrpatch.h, results key "attrpatch"), the
first-order estimate of
each path above: with every hook point's output plus a zero tensor that
requires grad (so autograd gives dM/d(that output), every path after it
live), on the base run (= the target: corrupted when denoising, clean when
noising),
    edge[c, s, l1.h1] = sum_{b,t} Δsender . (dM/d hook_c[l1][..., h1, :]) W_c[l1,h1]^T
    edge[3, s, 0]     = sum_{b,t} Δsender . dM/d hook_resid_final
normalised as the effects (denoise est / (M_clean - M_corr), noise
-est / (...)), NaN where the path does not exist; the raw estimates
compared always (the C's un-normalised with its own M's), the normalised
ones where |M_clean - M_corr| >= min-den.

Speed: the configurations of one component (the senders of pass 2, the
paths of pass 3) run in one forward, configuration i on its own copy of
the N pairs (batch rows i*N..(i+1)*N-1), its hooks editing only those
rows (one configuration per forward gives the same numbers, slowly).

Usage:
    patch_ref.py MODEL_DIR RESULTS_FILE [--tol 1e-4] [--min-den 1e-2] [--threads 1]
    patch_ref.py --check-torch          exit 0 if PyTorch imports, else 77

RESULTS_FILE is written by tests/test_patch_torch.c. Prints the largest
error of each compared result. Exit 0 iff every metric (M_clean, M_corr,
each M_p) agrees within tol (absolute), every effect does where
|M_clean − M_corr| >= min-den, the NaNs sit in the same places and the
task is the one patch.h defines; 1 if not, 2 on bad input, 77 if PyTorch
is not importable.
"""
import contextlib
import json
import math
import os
import sys

try:
    import numpy as np
    import torch
    from torch import nn
except Exception:  # ImportError, or a broken install: results_cli says so
    torch = None

from torch_ref import load_config, read_safetensors, results_cli  # the same directory

MAX_LAYERS = 16  # patch.h's AL_PATHS_MAX_LAYERS


def load_results(args):
    """Config, weights and results JSON of results_cli's args; ValueError
    unless the results are for this model's L and H and 1 <= L <= 16 (the
    depths path patching covers)."""
    cfg = load_config(args.model)
    weights, _ = read_safetensors(os.path.join(args.model, "model.safetensors"))
    with open(args.results) as f:
        res = json.load(f)
    L, H = cfg["n_layers"], cfg["n_heads"]
    if (res["L"], res["H"]) != (L, H) or not 1 <= L <= MAX_LAYERS:
        raise ValueError("results are for L=%d H=%d, the model has L=%d H=%d"
                         % (res["L"], res["H"], L, H))
    return cfg, weights, res

COMPONENTS = ("resid", "head", "head_pos", "q", "k", "v", "pattern")
DIRECTIONS = ("denoise", "noise")


if torch is not None:

    class HookPoint(nn.Module):
        """Identity; a place for forward hooks to read or replace a tensor."""

        def forward(self, x):
            return x

    def layer_norm(x, w, b, norm, eps):
        """TransformerLens's LayerNorm (LNPre: w, b None); identity without."""
        if norm is None:
            return x
        x = x - x.mean(-1, keepdim=True)
        x = x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()
        return x * w + b if w is not None else x

    class Attention(nn.Module):
        def __init__(self, W_Q, W_K, W_V, W_O, gates, extra=None):
            super().__init__()
            self.W_Q, self.W_K, self.W_V, self.W_O = W_Q, W_K, W_V, W_O  # (H,C,D) / (H,D,C)
            self.gates = gates                                          # (H)
            # LayerNorm and biases: {"norm", "eps", "ln1.w", "ln1.b", "b_Q", ..., "b_O"}
            self.extra = extra or {"norm": None}
            for name in ("q", "k", "v", "pattern", "z", "result"):
                setattr(self, "hook_" + name, HookPoint())

        def forward(self, x, pos=None):
            # pos: shortformer positions (B,T,C), added to the q and k inputs only
            T, D = x.shape[1], self.W_Q.shape[2]
            ex = self.extra
            x = layer_norm(x, ex.get("ln1.w"), ex.get("ln1.b"), ex["norm"], ex.get("eps"))
            xqk = x if pos is None else x + pos
            q = self.hook_q(torch.einsum("btc,hcd->bthd", xqk, self.W_Q) + ex.get("b_Q", 0.0))
            k = self.hook_k(torch.einsum("btc,hcd->bthd", xqk, self.W_K) + ex.get("b_K", 0.0))
            v = self.hook_v(torch.einsum("btc,hcd->bthd", x, self.W_V) + ex.get("b_V", 0.0))
            scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(D)
            future = torch.ones(T, T, dtype=torch.bool).triu(1)
            pattern = self.hook_pattern(scores.masked_fill(future, float("-inf")).softmax(-1))
            z = self.hook_z(torch.einsum("bhts,bshd->bthd", pattern, v))
            result = self.hook_result(torch.einsum("bthd,hdc->bthc", z, self.W_O)
                                      * self.gates.view(1, 1, -1, 1))
            return result.sum(2) + ex.get("b_O", 0.0)

    class Block(nn.Module):
        def __init__(self, attn):
            super().__init__()
            self.hook_resid_pre = HookPoint()
            self.attn = attn

        def forward(self, x, pos=None):
            x = self.hook_resid_pre(x)
            return x + self.attn(x, pos)

    class HookedAttnOnly(nn.Module):
        def __init__(self, cfg, w, gates):
            super().__init__()
            t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64)
            self.W_E, self.W_pos = t(w["embed.W_E"]), t(w["pos_embed.W_pos"])
            self.shortformer = cfg.get("pos", "standard") == "shortformer"
            self.W_U = self.W_E.t() if cfg["tied"] else t(w["unembed.W_U"])
            g = t(gates).view(cfg["n_layers"], cfg["n_heads"])
            self.hook_embed, self.hook_pos_embed = HookPoint(), HookPoint()
            norm, eps = cfg.get("norm"), cfg.get("eps", 1e-5)

            def extra(l):
                ex = {"norm": norm, "eps": eps}
                for n in ("ln1.w", "ln1.b", "attn.b_Q", "attn.b_K", "attn.b_V", "attn.b_O"):
                    name = "blocks.%d.%s" % (l, n)
                    if name in w:
                        ex[n.split(".", 1)[1] if n.startswith("attn.") else n] = t(w[name])
                return ex
            self.blocks = nn.ModuleList(
                Block(Attention(*(t(w["blocks.%d.attn.%s" % (l, n)])
                                  for n in ("W_Q", "W_K", "W_V", "W_O")), g[l], extra(l)))
                for l in range(cfg["n_layers"]))
            self.hook_resid_final = HookPoint()
            self.final = (norm, eps, t(w["ln_final.w"]) if "ln_final.w" in w else None,
                          t(w["ln_final.b"]) if "ln_final.b" in w else None)
            self.b_U = t(w["unembed.b_U"]) if "unembed.b_U" in w else 0.0

        def forward(self, tokens):
            B, T = tokens.shape
            pos = self.hook_pos_embed(self.W_pos[:T].expand(B, T, -1))
            # shortformer: positions into every head's q and k, not the residual
            x = self.hook_embed(self.W_E[tokens]) + (0 if self.shortformer else pos)
            for b in self.blocks:
                x = b(x, pos if self.shortformer else None)
            norm, eps, w, b = self.final
            return layer_norm(self.hook_resid_final(x), w, b, norm, eps) @ self.W_U + self.b_U

        @contextlib.contextmanager
        def hooks(self, fwd):
            """fwd: [(hook name, fn(tensor) -> tensor or None)] for one forward."""
            handles = [self.get_submodule(name).register_forward_hook(
                (lambda f: lambda mod, inp, out: f(out))(fn)) for name, fn in fwd]
            try:
                yield self
            finally:
                for h in handles:
                    h.remove()

        def run_with_cache(self, tokens):
            cache = {}
            names = [n for n, mod in self.named_modules() if isinstance(mod, HookPoint)]

            def saver(name):
                def f(out):
                    cache[name] = out.detach().clone()
                return f
            with self.hooks([(n, saver(n)) for n in names]):
                logits = self(tokens)
            return logits, cache

        def run_with_hooks(self, tokens, fwd):
            with self.hooks(fwd):
                return self(tokens)

    def run_patched(model, tok, configs, M, extra=()):
        """M_p of each configuration, all in one forward: configuration i
        runs on rows i*N..(i+1)*N-1 of the batch (its own copy of tok),
        and is a list of edits (hook name, index, source): the hook's
        tensor for one run (N, ...) gets source[index] at [index], in
        order. extra: more (name, fn) hooks (to cache)."""
        N, K = tok.shape[0], len(configs)
        by_hook = {}
        for i, edits in enumerate(configs):
            for name, index, src in edits:
                by_hook.setdefault(name, []).append((i, index, src))

        def overwrite(edits):
            def f(out):
                out = out.clone()
                for i, index, src in edits:
                    out[i * N:(i + 1) * N][index] = src[index]  # a view: writes into out
                return out
            return f
        fwd = [(name, overwrite(e)) for name, e in by_hook.items()] + list(extra)
        return M(model.run_with_hooks(tok.repeat(K, 1), fwd), K)

    def metrics(logits, K, items, logit_diff):
        """M of each of the K runs stacked in logits (K*N, T, V): the mean
        over items of log p(answer) (or logit(answer) - logit(wrong))."""
        n, t, a, w = (torch.tensor(c, dtype=torch.long) for c in zip(*items))
        at = logits.view(K, -1, logits.shape[1], logits.shape[2])[:, n, t]  # (K, items, V)
        i = torch.arange(len(items))
        if logit_diff:
            vals = at[:, i, a] - at[:, i, w]
        else:
            vals = at.log_softmax(-1)[:, i, a]
        return [float(x) for x in vals.mean(1)]

    ALL = slice(None)

    def patch_grid(model, comp, tok, src, L, H, T, M):
        """M_p of every configuration of comp, in grid order (src: the
        source run's cache)."""
        if comp == "resid":
            cfgs = [[("blocks.%d.hook_resid_pre" % l, (ALL, t),
                      src["blocks.%d.hook_resid_pre" % l])]
                    for l in range(L) for t in range(T)]
        elif comp == "head":
            cfgs = [[("blocks.%d.attn.hook_z" % l, (ALL, ALL, h), src["blocks.%d.attn.hook_z" % l])]
                    for l in range(L) for h in range(H)]
        else:
            hook = "blocks.%d.attn.hook_" + {"head_pos": "z"}.get(comp, comp)
            # (B,T,H,D) tensors are indexed [b, t, h]; the pattern (B,H,T,T) [b, h, t]
            cfgs = [[(hook % l, (ALL, h, t) if comp == "pattern" else (ALL, t, h), src[hook % l])]
                    for l in range(L) for h in range(H) for t in range(T)]
        return run_patched(model, tok, cfgs, M)

    def paths(model, tok, tgt, src, L, H, M):
        """M_p of every sender -> receiver path, in the results' layout."""
        N, W = tok.shape[0], max(1, L - 1) * H
        ns = 2 + W
        out = [float("nan")] * (4 * ns * W)
        sender_layer = lambda s: -1 if s < 2 else (s - 2) // H  # embed, pos: before layer 0
        # pass 2, sender s in rows s*N..: every head frozen at the target's
        # z, then the sender at the source's activation
        cfgs = []
        for s in range(ns):
            edits = [("blocks.%d.attn.hook_z" % l, ALL, tgt["blocks.%d.attn.hook_z" % l])
                     for l in range(L)]
            if s == 0:
                edits.append(("hook_embed", ALL, src["hook_embed"]))
            elif s == 1:
                edits.append(("hook_pos_embed", ALL, src["hook_pos_embed"]))
            else:
                l0 = sender_layer(s)
                edits.append(("blocks.%d.attn.hook_z" % l0, (ALL, ALL, (s - 2) % H),
                              src["blocks.%d.attn.hook_z" % l0]))
            cfgs.append(edits)
        recv = {}
        saver = lambda key: lambda o: recv.__setitem__(key, o.detach().clone())
        extra = [("blocks.%d.attn.hook_%s" % (l, c), saver((l, c)))
                 for l in range(1, L) for c in "qkv"]
        direct = run_patched(model, tok, cfgs, M, extra)
        for s in range(ns):
            out[(3 * ns + s) * W] = direct[s]
        # patch.h's formula, directly: receiver input = target residual −
        # sender_target + sender_source; pass 2 must have computed just that
        sender = lambda c, s: (c["hook_embed"] if s == 0 else c["hook_pos_embed"] if s == 1
                               else c["blocks.%d.attn.hook_result" % sender_layer(s)]
                               [:, :, (s - 2) % H])
        formula_err = 0.0
        norm, eps, fw, fb = model.final
        for s in range(ns):
            delta = sender(src, s) - sender(tgt, s)
            u = layer_norm(tgt["hook_resid_final"] + delta, fw, fb, norm, eps)
            m = M(u @ model.W_U + model.b_U)[0]
            formula_err = max(formula_err, abs(m - direct[s]))
            for l1 in range(max(1, sender_layer(s) + 1), L):
                ex = model.blocks[l1].attn.extra
                for ch in "qkv":
                    W_c = getattr(model.blocks[l1].attn, "W_" + ch.upper())
                    inp = layer_norm(tgt["blocks.%d.hook_resid_pre" % l1] + delta,
                                     ex.get("ln1.w"), ex.get("ln1.b"), ex["norm"], ex.get("eps"))
                    if model.shortformer and ch in "qk":
                        inp = inp + tgt["hook_pos_embed"]
                    x = torch.einsum("btc,hcd->bthd", inp, W_c) + ex.get("b_" + ch.upper(), 0.0)
                    formula_err = max(formula_err, float(
                        (x - recv[(l1, ch)][s * N:(s + 1) * N]).abs().max()))
        # pass 3: receiver head l1.h1's q (k, v) at every position from
        # sender s's pass 2, everything else computed as it comes
        keys = [(c, s, r) for c in range(3) for s in range(ns) for r in range(W if L > 1 else 0)
                if sender_layer(s) < r // H + 1]
        cfgs = [[("blocks.%d.attn.hook_%s" % (r // H + 1, "qkv"[c]), (ALL, ALL, r % H),
                  recv[(r // H + 1, "qkv"[c])][s * N:(s + 1) * N])] for c, s, r in keys]
        for (c, s, r), m in zip(keys, run_patched(model, tok, cfgs, M) if cfgs else []):
            out[(c * ns + s) * W + r] = m
        return out, formula_err

    def attr_edges(model, tok, tgt, src, L, H, items, logit_diff):
        """attrpatch.h's raw (un-normalised) edge estimates, in the
        results' layout, from the gradient at the base run tok (cache
        tgt; the source run's cache src)."""
        W = max(1, L - 1) * H
        ns = 2 + W
        eps = {}

        def add_eps(name):
            def f(out):
                e = torch.zeros_like(out, requires_grad=True)
                eps[name] = e
                return out + e
            return f
        names = ["hook_resid_final"] + ["blocks.%d.attn.hook_%s" % (l, c)
                                        for l in range(1, L) for c in "qkv"]
        with torch.enable_grad():
            logits = model.run_with_hooks(tok, [(n, add_eps(n)) for n in names])
            n, t, a, w = (torch.tensor(c, dtype=torch.long) for c in zip(*items))
            at = logits[n, t]
            i = torch.arange(len(items))
            vals = at[i, a] - at[i, w] if logit_diff else at.log_softmax(-1)[i, a]
            grads = torch.autograd.grad(vals.mean(), [eps[k] for k in names])
        g = dict(zip(names, grads))
        sender = lambda c, s: (c["hook_embed"] if s == 0 else c["hook_pos_embed"] if s == 1
                               else c["blocks.%d.attn.hook_result" % ((s - 2) // H)]
                               [:, :, (s - 2) % H])
        out = [float("nan")] * (4 * ns * W)
        for s in range(ns):
            # pos: both runs share positions (and a shortformer model has none in the residual)
            delta = sender(src, s) - sender(tgt, s)
            if s == 1 and model.shortformer:
                delta = torch.zeros_like(delta)
            out[(3 * ns + s) * W] = float((delta * g["hook_resid_final"]).sum())
            l0 = -1 if s < 2 else (s - 2) // H
            for r in range(W if L > 1 else 0):
                l1, h1 = r // H + 1, r % H
                if l0 >= l1:
                    continue
                for c, ch in enumerate("qkv"):
                    Wc = getattr(model.blocks[l1].attn, "W_" + ch.upper())[h1]  # (C, D)
                    gin = g["blocks.%d.attn.hook_%s" % (l1, ch)][:, :, h1] @ Wc.t()
                    out[(c * ns + s) * W + r] = float((delta * gin).sum())
        return out

    def effect(mp, m_clean, m_corr, direction):
        den = m_clean - m_corr
        if den == 0 or not math.isfinite(mp):
            return float("nan")
        return (mp - m_corr) / den if direction == "denoise" else (m_clean - mp) / den


def check_task(res, task):
    """The induction task of patch.h: BOS + A + A against BOS + A' + A,
    items at t = R+1..2R-1 answering the clean next token."""
    R, bos, N, T = res["R"], res["bos"], task["N"], task["T"]
    clean = np.array(task["clean"]).reshape(N, T)
    corr = np.array(task["corr"]).reshape(N, T)
    problems = []
    if task["name"] != "induction" or T != 2 * R + 1 or task["logit_diff"] != 0:
        problems.append("not the induction task of R=%d" % R)
        return problems
    if list(task["len"]) != [T] * N:
        problems.append("lengths %s" % task["len"])
    if not (clean[:, 0] == bos).all() or not (corr[:, 0] == bos).all():
        problems.append("position 0 is not BOS")
    if not (clean[:, 1:R + 1] == clean[:, R + 1:]).all():
        problems.append("clean is not BOS + A + A")
    if not (corr[:, R + 1:] == clean[:, R + 1:]).all():
        problems.append("corrupted second half differs from clean")
    if not ((corr[:, 1:R + 1] != clean[:, 1:R + 1]) & (corr[:, 1:R + 1] != bos)).all():
        problems.append("corrupted first half is not A' (A'[i] != A[i], != BOS)")
    want = [[n, t, int(clean[n, t + 1]), -1] for n in range(N) for t in range(R + 1, 2 * R)]
    if [list(it) for it in task["items"]] != want:
        problems.append("items are not t = R+1..2R-1 with the clean next token")
    return problems


def compare(label, ref_m, ref_e, c_m, c_e, m_clean, m_corr, c_mc, c_mr, tol, min_den):
    """One result's errors: (report line, ok, largest error)."""
    nan = float("nan")
    c_mc, c_mr = (nan if x is None else x for x in (c_mc, c_mr))
    err_M = max(abs(m_clean - c_mc), abs(m_corr - c_mr))
    if math.isnan(err_M):
        err_M = float("inf")
    err_m, err_e, nan_ok, n_cmp = 0.0, 0.0, len(ref_m) == len(c_m), 0
    use_e = abs(m_clean - m_corr) >= min_den
    for i in range(min(len(ref_m), len(c_m))):
        cm = nan if c_m[i] is None else c_m[i]
        ce = nan if c_e[i] is None else c_e[i]
        if math.isnan(ref_m[i]) or math.isnan(cm):
            nan_ok &= math.isnan(ref_m[i]) and math.isnan(cm)
            continue
        n_cmp += 1
        err_m = max(err_m, abs(ref_m[i] - cm))
        if use_e:
            if math.isnan(ce):
                nan_ok = False
            else:
                err_e = max(err_e, abs(ref_e[i] - ce))
    ok = nan_ok and err_M <= tol and err_m <= tol and err_e <= tol
    line = ("  %-28s n %4d  M err %.2e  metric err %.2e  effect err %s%s%s"
            % (label, n_cmp, err_M, err_m, "%.2e" % err_e if use_e else "(den tiny)",
               "" if nan_ok else "  NaNs differ", "" if ok else "  FAIL"))
    return line, ok, max(err_M, err_m, err_e)


def main():
    args, rc = results_cli(__doc__, "results JSON of tests/test_patch_torch.c", (
        ("--tol", {"type": float, "default": 1e-4}),
        ("--min-den", {"type": float, "default": 1e-2,
                       "help": "compare effects only where |M_clean - M_corr| >= this"})))
    if args is None:
        return rc
    try:
        cfg, weights, res = load_results(args)
        task = res["task"]
        L, H, N, T = cfg["n_layers"], cfg["n_heads"], task["N"], task["T"]
        clean = torch.tensor(task["clean"], dtype=torch.long).view(N, T)
        corr = torch.tensor(task["corr"], dtype=torch.long).view(N, T)
        items = [tuple(it) for it in task["items"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print("patch_ref: %s" % exc, file=sys.stderr)
        return 2
    print("torch %s, float64; model %s: L=%d C=%d H=%d D=%d tied=%s; task %s N=%d T=%d, %d items"
          % (torch.__version__, args.model, L, cfg["d_model"], H, cfg["d_head"], cfg["tied"],
             task["name"], N, T, len(items)))
    all_ok, worst = True, 0.0
    problems = check_task(res, task)
    print("  task %s" % ("ok" if not problems else "FAIL: " + "; ".join(problems)))
    all_ok &= not problems

    for ci, case in enumerate(res["cases"]):
        model = HookedAttnOnly(cfg, weights, case["gates"])
        M = lambda logits, K=1: metrics(logits, K, items, task["logit_diff"])
        with torch.no_grad():
            lc, cache_clean = model.run_with_cache(clean)
            lr, cache_corr = model.run_with_cache(corr)
            (m_clean,), (m_corr,) = M(lc), M(lr)
            print(" case %d: gates %s; M_clean %.6f M_corr %.6f"
                  % (ci, case["gates"], m_clean, m_corr))
            runs = {"denoise": (corr, cache_corr, cache_clean),  # tokens, target, source
                    "noise": (clean, cache_clean, cache_corr)}
            checks = [(r["component"], r["direction"], r) for r in case["patch"]]
            checks += [("paths", r["direction"], r) for r in case["paths"]]
            checks += [("attrpatch", r["direction"], r) for r in case.get("attrpatch", [])]
            seen = set()
            for comp, direction, r in checks:
                seen.add((comp, direction))
                if comp == "attrpatch":
                    W = max(1, L - 1) * H
                    want = {"n_senders": 2 + W, "n_recv": (L - 1) * H,
                            "n_edge": 4 * (2 + W) * W}
                    n_want = 4 * (2 + W) * W
                elif comp == "paths":
                    W = max(1, L - 1) * H
                    want = {"n_senders": 2 + W, "n_recv": (L - 1) * H}
                    n_want = 4 * (2 + W) * W
                else:
                    want = {"rows": {"resid": L, "head": L}.get(comp, L * H),
                            "cols": {"head": H}.get(comp, T)}
                    n_want = want["rows"] * want["cols"]
                got = {k: r.get(k) for k in want}
                if comp == "attrpatch":
                    if got != want or len(r["edge"]) != n_want:
                        print("  case %d attrpatch %s: layout %s, %d values; want %s, %d  FAIL"
                              % (ci, direction, got, len(r["edge"]), want, n_want))
                        all_ok = False
                        continue
                    tok, tgt, src = runs[direction]
                    raw = attr_edges(model, tok, tgt, src, L, H, items, task["logit_diff"])
                    den = m_clean - m_corr
                    ref_e = [x / den if direction == "denoise" else -x / den for x in raw]
                    # raw estimates compared always (the C's un-normalised with its own
                    # M's), the normalised ones where the gap is not tiny
                    sign = 1.0 if direction == "denoise" else -1.0
                    c_den = (r["m_clean"] or 0.0) - (r["m_corr"] or 0.0)
                    c_raw = [None if x is None else x * c_den * sign for x in r["edge"]]
                    line, ok, err = compare("case %d attrpatch %s" % (ci, direction), raw,
                                            ref_e, c_raw, r["edge"], m_clean, m_corr,
                                            r["m_clean"], r["m_corr"], args.tol, args.min_den)
                    print(line)
                    all_ok &= ok
                    worst = max(worst, err)
                    continue
                if (got != want or len(r["metric"]) != n_want or len(r["effect"]) != n_want
                        or (r["L"], r["H"], r["N"], r["T"]) != (L, H, N, T)):
                    print("  case %d %s %s: layout %s, %d values; want %s, %d  FAIL"
                          % (ci, comp, direction, got, len(r["metric"]), want, n_want))
                    all_ok = False
                    continue
                tok, tgt, src = runs[direction]
                if comp == "paths":
                    ref_m, formula_err = paths(model, tok, tgt, src, L, H, M)
                    # float64 rounding only: the two are the same sums, grouped differently
                    ok = formula_err <= 1e-9
                    print("  case %d paths %s: passes 2-3 vs patch.h's formula: err %.2e%s"
                          % (ci, direction, formula_err, "" if ok else "  FAIL"))
                    all_ok &= ok
                else:
                    ref_m = patch_grid(model, comp, tok, src, L, H, T, M)
                ref_e = [effect(x, m_clean, m_corr, direction) for x in ref_m]
                line, ok, err = compare("case %d %s %s" % (ci, comp, direction), ref_m, ref_e,
                                        r["metric"], r["effect"], m_clean, m_corr,
                                        r["m_clean"], r["m_corr"], args.tol, args.min_den)
                print(line)
                all_ok &= ok
                worst = max(worst, err)
            missing = [(c, d) for c in COMPONENTS + ("paths",)
                       for d in DIRECTIONS if (c, d) not in seen]
            if missing:
                print("  case %d: results missing for %s  FAIL" % (ci, missing))
                all_ok = False
    print("%s: worst error %.3e (tolerance %.0e; effects where |M_clean - M_corr| >= %g)"
          % ("ok" if all_ok else "MISMATCH", worst, args.tol, args.min_den))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
