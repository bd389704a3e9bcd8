#!/usr/bin/python3
"""sae_ref.py -- independent PyTorch reference of the sparse autoencoder.

Written from the definitions in include/attnlab/sae.h (SAELens names and
conventions), not from src/engine/sae.c: float64 autograd on the C's f32
weights and inputs.

    pre  = (x - b_dec) @ W_enc + b_enc
    topk:     f = relu of the k largest pre per row (ties: lower index), 0 elsewhere
    standard: f = relu(pre)
    x_hat = f @ W_dec + b_dec
    mse   = mean_b sum_r (x - x_hat)^2
    topk:     aux = mean_b sum_r (e - e_hat)^2, e = (x - x_hat).detach(),
              e_hat = relu(top min(k_aux, |dead|) of pre over the dead latents) @ W_dec
              loss = mse + aux_coeff * aux
    standard: l1 = mean_b sum_i f_i * ||W_dec[i]||, loss = mse + l1_coeff * l1

Usage:
    sae_ref.py CASE.json [--tol 1e-5]   compare the C's numbers in CASE.json
    sae_ref.py --eval DIR ACTS.json     recompute an evaluation from a saved SAE
    sae_ref.py --check-torch            exit 0 if PyTorch imports, else 77

--eval reads DIR/cfg.json and DIR/sae_weights.safetensors with its own
safetensors parser (SAELens's layout: W_enc [d_in, d_sae], b_enc, W_dec
[d_sae, d_in], b_dec, F32), scales the raw site activations of ACTS.json
("x", rows of d_in) by norm_scaling_factor and compares L0, MSE and the
fraction of variance explained with the C's ("l0", "mse", "fve"): exit 1
if any differs by more than 1e-4 relative.

CASE.json (written by tests/test_sae.c): cfg {arch, k, k_aux, aux_coeff,
l1_coeff, d_in, d_sae}, B, x, W_enc, b_enc, W_dec, b_dec, dead (0/1 per
latent), and the C's outputs: mse, aux, l1, loss, x_hat, idx (topk), and
gradients g_W_enc, g_b_enc, g_W_dec, g_b_dec. Each compared quantity's
error is max|c - ref| / max(max|ref|, 1e-6); prints one line per
quantity ("name maxrel") and exits 1 if any is above tol, 2 if the top-k
selection differs or a row has a near tie (the gap between the k-th and
(k+1)-th pre below 1e-4: TopK is not differentiable there, and float32
rounding could pick either latent).
"""
import json
import sys

try:
    import torch
except ImportError:
    sys.exit(77)  # the C tests skip (or note) the comparison

if "--check-torch" in sys.argv:
    sys.exit(0)

if "--eval" in sys.argv:
    import struct
    d_dir = sys.argv[sys.argv.index("--eval") + 1]
    acts = json.load(open(sys.argv[sys.argv.index("--eval") + 2]))
    cfg = json.load(open(d_dir + "/cfg.json"))
    raw = open(d_dir + "/sae_weights.safetensors", "rb").read()
    (hl,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + hl])
    ten = {}
    for name, v in hdr.items():
        if name == "__metadata__":
            continue
        assert v["dtype"] == "F32", name
        a, b = v["data_offsets"]
        buf = raw[8 + hl + a:8 + hl + b]
        ten[name] = torch.tensor(struct.unpack("<%df" % (len(buf) // 4), buf),
                                 dtype=torch.float64).reshape(v["shape"])
    din, dsae = cfg["d_in"], cfg["d_sae"]
    assert list(ten["W_enc"].shape) == [din, dsae] and list(ten["W_dec"].shape) == [dsae, din]
    assert cfg["architecture"] == "topk" and cfg["apply_b_dec_to_input"] is True
    x = torch.tensor(acts["x"], dtype=torch.float64).reshape(-1, din) * cfg["norm_scaling_factor"]
    pre = (x - ten["b_dec"]) @ ten["W_enc"] + ten["b_enc"]
    top = pre.topk(cfg["k"], dim=-1)
    f = torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
    xh = f @ ten["W_dec"] + ten["b_dec"]
    sse = float(((x - xh) ** 2).sum())
    var = float(((x - x.mean(0)) ** 2).sum())
    got = {"l0": float((f > 0).sum()) / x.shape[0], "mse": sse / x.shape[0], "fve": 1 - sse / var}
    worst = 0.0
    for k, v in got.items():
        r = abs(v - acts[k]) / max(abs(v), 1e-6)
        print("%s ref %.9g C %.9g rel %.3g" % (k, v, acts[k], r))
        worst = max(worst, r)
    print("max %.3g" % worst)
    sys.exit(0 if worst <= 1e-4 else 1)

path = sys.argv[1]
tol = float(sys.argv[sys.argv.index("--tol") + 1]) if "--tol" in sys.argv else 1e-5
c = json.load(open(path))
cfg = c["cfg"]
B, d, n = c["B"], cfg["d_in"], cfg["d_sae"]
T = lambda a, *shape: torch.tensor(a, dtype=torch.float64).reshape(*shape)
x = T(c["x"], B, d)
W_enc = T(c["W_enc"], d, n).requires_grad_()
b_enc = T(c["b_enc"], n).requires_grad_()
W_dec = T(c["W_dec"], n, d).requires_grad_()
b_dec = T(c["b_dec"], d).requires_grad_()
dead = torch.tensor(c["dead"], dtype=torch.bool)

pre = (x - b_dec) @ W_enc + b_enc
bad = 0


def topk_rows(p, k):
    """Indices of the k largest per row, larger value first, ties to the lower index."""
    out = []
    for row in p.detach().tolist():
        order = sorted(range(len(row)), key=lambda i: (-row[i], i))
        out.append(order[:k])
        if k < len(row) and row[order[k - 1]] - row[order[k]] < 1e-4:
            print("near tie in a row: k-th %.9g, (k+1)-th %.9g" % (row[order[k - 1]], row[order[k]]))
            global bad
            bad = 2
    return out


if cfg["arch"] == "topk":
    k = cfg["k"]
    idx = topk_rows(pre, k)
    mask = torch.zeros(B, n, dtype=torch.float64)
    for b in range(B):
        mask[b, idx[b]] = 1.0
    f = torch.relu(pre) * mask
    x_hat = f @ W_dec + b_dec
    mse = ((x - x_hat) ** 2).sum(-1).mean()
    aux = torch.zeros((), dtype=torch.float64)
    nd = int(dead.sum())
    if nd > 0 and cfg["k_aux"] > 0:
        ka = min(cfg["k_aux"], nd)
        dead_ids = [i for i in range(n) if dead[i]]
        sub = pre[:, dead_ids]
        aidx = topk_rows(sub, ka)
        amask = torch.zeros(B, n, dtype=torch.float64)
        for b in range(B):
            amask[b, [dead_ids[j] for j in aidx[b]]] = 1.0
        a = torch.relu(pre) * amask
        e = (x - x_hat).detach()
        aux = ((e - a @ W_dec) ** 2).sum(-1).mean()
    loss = mse + cfg["aux_coeff"] * aux
    c_idx = [sorted(c["idx"][b * k:(b + 1) * k]) for b in range(B)]
    if [sorted(r) for r in idx] != c_idx:
        print("top-k selection differs from the C's")
        bad = 2
    terms = {"mse": mse, "aux": aux, "loss": loss}
else:
    f = torch.relu(pre)
    x_hat = f @ W_dec + b_dec
    mse = ((x - x_hat) ** 2).sum(-1).mean()
    l1 = (f * W_dec.norm(dim=1)).sum(-1).mean()
    loss = mse + cfg["l1_coeff"] * l1
    terms = {"mse": mse, "l1": l1, "loss": loss}

loss.backward()


def rel(name, ref, got):
    ref = ref.detach().reshape(-1)
    got = torch.tensor(got, dtype=torch.float64).reshape(-1)
    den = max(float(ref.abs().max()), 1e-6)
    r = float((got - ref).abs().max()) / den
    print("%s %.3g" % (name, r))
    return r


worst = 0.0
for name, v in terms.items():
    worst = max(worst, rel(name, v, [c[name]]))
worst = max(worst, rel("x_hat", x_hat, c["x_hat"]))
for name, t in (("g_W_enc", W_enc), ("g_b_enc", b_enc), ("g_W_dec", W_dec), ("g_b_dec", b_dec)):
    worst = max(worst, rel(name, t.grad, c[name]))
print("max %.3g (tol %g)" % (worst, tol))
if bad:
    sys.exit(bad)
sys.exit(0 if worst <= tol else 1)
