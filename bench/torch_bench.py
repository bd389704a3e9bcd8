#!/usr/bin/python3
"""torch_bench.py -- the PyTorch side of `make bench`.

The same attention-only model as the C engine (the class from
tests/torch_ref.py, in float32), the same sizes and thread count, one
measurement per process; prints one JSON line with the fields
bench/bench_engine.c prints, plus the libblas.so.3 PyTorch really loaded
(Debian's python3-torch calls whatever BLAS alternative is selected; the
reference BLAS is ~15x slower than OpenBLAS and would make any ratio
meaningless).

  --mode train   forward + backward + clip_grad_norm_ + AdamW
  --mode infer   forward (logits and loss) under torch.no_grad; with --model DIR
                 the weights and shape of an attnlab model directory
  --mode sgemm   torch.mm on 4096x4096 matrices
  --mode sae     TopK SAE training steps on random activations, written as
                 SAELens trains one (dense encoder and decoder matmuls,
                 torch.topk, autograd, Adam, decoder rows kept at unit norm
                 with the parallel gradient removed); the C side is
                 bench_engine --mode sae
Exit 77 when torch cannot be imported.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import torch_ref  # noqa: E402

torch = torch_ref.torch


def blas_in_use():
    """Resolved path of the libblas/libopenblas mapped into this process."""
    found = []
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            base = os.path.basename(path)
            if base.startswith(("libblas.so", "libopenblas", "libmkl_rt", "libcblas.so")):
                entry = path if os.path.realpath(path) == path else \
                    "%s -> %s" % (path, os.path.realpath(path))
                if entry not in found:
                    found.append(entry)
    return "; ".join(found) if found else "unknown (no BLAS library mapped)"


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(step, warmup, min_time):
    """Iterations, total seconds and median seconds per iteration."""
    for _ in range(warmup):
        step()
    times, t0 = [], time.perf_counter()
    while True:
        s = time.perf_counter()
        step()
        times.append(time.perf_counter() - s)
        if time.perf_counter() - t0 >= min_time and len(times) >= 3:
            break
    return len(times), time.perf_counter() - t0, statistics.median(times)


def sae_bench(a):
    """One TopK SAE training step per iteration on a fixed random batch."""
    d_in = a.n_heads * a.d_head
    d_sae, k, B = a.sae_expansion * d_in, a.sae_k, a.sae_batch
    g = torch.Generator().manual_seed(7)
    W_dec = torch.randn(d_sae, d_in, generator=g)
    W_dec /= W_dec.norm(dim=1, keepdim=True)
    W_dec.requires_grad_(True)
    W_enc = W_dec.detach().t().clone().requires_grad_(True)
    b_enc = torch.zeros(d_sae, requires_grad=True)
    b_dec = torch.zeros(d_in, requires_grad=True)
    params = [W_enc, b_enc, W_dec, b_dec]
    opt = torch.optim.Adam(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    x = torch.randn(B, d_in, generator=g)
    last = {}

    def step():
        opt.zero_grad(set_to_none=True)
        pre = (x - b_dec) @ W_enc + b_enc
        val, idx = torch.topk(pre, k, dim=1)
        f = torch.zeros_like(pre).scatter(1, idx, torch.relu(val))
        xhat = f @ W_dec + b_dec
        loss = ((xhat - x) ** 2).sum(dim=1).mean()
        loss.backward()
        with torch.no_grad():
            W_dec.grad -= (W_dec.grad * W_dec).sum(dim=1, keepdim=True) * W_dec
        opt.step()
        with torch.no_grad():
            W_dec.div_(W_dec.norm(dim=1, keepdim=True))
        last["loss"] = loss.item()

    it, t, med = timed(step, a.warmup, a.min_time)
    return dict(d_in=d_in, d_sae=d_sae, k=k, batch=B, threads=a.threads, iters=it,
                seconds=round(t, 4), acts_per_s=round(B / med, 1),
                acts_per_s_mean=round(B * it / t, 1),
                gflops_dense_equiv=round(6.0 * B * d_in * d_sae / med / 1e9, 2),
                loss=round(last["loss"], 5))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", default="train", choices=["train", "infer", "sgemm", "sae"])
    ap.add_argument("--n-layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--n-heads", type=int, default=8)
    ap.add_argument("--d-head", type=int, default=32)
    ap.add_argument("--n-ctx", type=int, default=256)
    ap.add_argument("--d-vocab", type=int, default=4096)
    ap.add_argument("--model", default=None,
                    help="infer: a model directory's weights and shape (config.json, "
                         "model.safetensors) instead of random ones")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=3.0)
    ap.add_argument("--sgemm-n", type=int, default=4096)
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                    help="bf16: the model under CPU autocast (bf16 matmuls, f32 weights, "
                         "gradients and optimiser); sgemm: the product in bf16")
    ap.add_argument("--sae-expansion", type=int, default=8)
    ap.add_argument("--sae-k", type=int, default=32)
    ap.add_argument("--sae-batch", type=int, default=4096)
    a = ap.parse_args()
    if torch is None:
        print("skipped: cannot import torch (%s)" % torch_ref.TORCH_ERROR)
        return 77
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    out = {"impl": "torch", "mode": a.mode, "precision": a.precision}
    bf = a.precision == "bf16"

    def amp():
        # CPU autocast: matmuls in bf16 with f32 weights (PyTorch's mixed precision)
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf)
    if a.mode == "sgemm":
        n = a.sgemm_n
        dt = torch.bfloat16 if bf else torch.float32
        x, y = torch.rand(n, n).to(dt), torch.rand(n, n).to(dt)
        it, t, med = timed(lambda: torch.mm(x, y), 1, a.min_time / 2)
        out.update(n=n, threads=a.threads, iters=it, seconds=round(t, 4),
                   gflops=round(2.0 * n ** 3 / med / 1e9, 2),
                   gflops_mean=round(2.0 * n ** 3 * it / t / 1e9, 2))
    elif a.mode == "sae":
        out.update(sae_bench(a))
    else:
        if a.model:  # a model directory's weights and shape, sequences of --n-ctx tokens
            if a.mode != "infer":
                raise SystemExit("torch_bench: --model is for --mode infer")
            cfg = torch_ref.load_config(a.model)
            if a.n_ctx > cfg["n_ctx"]:
                raise SystemExit("torch_bench: --n-ctx %d > the model's %d" % (a.n_ctx, cfg["n_ctx"]))
            weights, _ = torch_ref.read_safetensors(os.path.join(a.model, "model.safetensors"))
            model = torch_ref.AttnOnly(cfg, weights, torch.float32)
            for k in ("n_layers", "d_model", "n_heads", "d_head", "d_vocab"):
                setattr(a, k, cfg[k])
            out.update(norm=cfg["norm"] or "none", biases=",".join(sorted(cfg["biases"])) or "none")
        else:
            cfg = {"n_layers": a.n_layers, "d_model": a.d_model, "n_heads": a.n_heads,
                   "d_head": a.d_head, "n_ctx": a.n_ctx, "d_vocab": a.d_vocab, "tied": False}
            model = torch_ref.AttnOnly(cfg, None, torch.float32)
        g = torch.Generator().manual_seed(42)
        tokens = torch.randint(0, a.d_vocab, (a.batch, a.n_ctx), generator=g)
        targets = torch.randint(0, a.d_vocab, (a.batch, a.n_ctx), generator=g)
        last = {}
        if a.mode == "train":
            opt = torch_ref.make_adamw(model, 1e-3, 0.1)
            params = [p for _, p in model.named()]

            def step():
                opt.zero_grad(set_to_none=True)
                with amp():
                    logits = model(tokens)
                loss = torch_ref.loss_fn(logits.float(), targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                last["loss"] = loss.item()
        else:
            def step():
                with torch.no_grad(), amp():
                    logits = model(tokens)
                last["loss"] = torch_ref.loss_fn(logits.float(), targets).item()
        it, t, med = timed(step, a.warmup, a.min_time)
        # the C side counts FLOPs analytically the same way (al_model_forward_flops)
        BT, C, HD = a.batch * a.n_ctx, a.d_model, a.n_heads * a.d_head
        pairs = a.batch * a.n_heads * a.n_ctx * (a.n_ctx + 1) / 2.0
        fwd = a.n_layers * (2.0 * BT * C * 3 * HD + 4.0 * pairs * a.d_head + 2.0 * BT * HD * C) \
            + 2.0 * BT * C * a.d_vocab
        flops = fwd * (3.0 if a.mode == "train" else 1.0)
        out.update(n_layers=a.n_layers, d_model=a.d_model, n_heads=a.n_heads, d_head=a.d_head,
                   n_ctx=a.n_ctx, d_vocab=a.d_vocab, batch=a.batch, threads=a.threads,
                   iters=it, seconds=round(t, 4), tokens_per_s=round(BT / med, 1),
                   tokens_per_s_mean=round(BT * it / t, 1), gflops=round(flops / med / 1e9, 2),
                   loss=round(last["loss"], 4))
    out.update(peak_rss_mb=round(peak_rss_mb(), 1), blas=blas_in_use(),
               blas_threads=torch.get_num_threads(), torch=torch.__version__)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
