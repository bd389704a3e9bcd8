#!/usr/bin/env python3
"""circuits_ref.py -- NumPy reference for `attnlab circuits` (DESIGN §4).

Reads DIR/model.safetensors with a small safetensors reader written here
(no torch or safetensors package needed) and computes, per head, from the
*dense* d_model x d_model products that attnlab never forms:

  W_QK = W_Q W_K^T, W_OV = W_V W_O        singular values (float64 SVD)
  rank                                      np.linalg.matrix_rank on float32
  copying_eigen                             eigenvalues of the d_model x
                                            d_model W_OV W_U W_E (same
                                            nonzero spectrum as full OV)

Output, one line each (whitespace separated):
  head L H qk_rank ov_rank copying_eigen
  qk_sv L H s_0 ... s_{D-1}
  ov_sv L H s_0 ... s_{D-1}

usage: circuits_ref.py MODEL_DIR
"""
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    """name -> float32 array; validates what it relies on."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} past end of file")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: {name} has dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if end - begin != 4 * count or base + end > len(data):
            raise ValueError(f"{path}: {name} has a bad data span")
        out[name] = np.frombuffer(data, dtype="<f4", count=count, offset=base + begin).reshape(shape)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: circuits_ref.py MODEL_DIR")
    t = read_safetensors(os.path.join(sys.argv[1], "model.safetensors"))
    W_E = t["embed.W_E"].astype(np.float64)
    W_U = t["unembed.W_U"].astype(np.float64) if "unembed.W_U" in t else W_E.T
    G = W_U @ W_E  # (C, C)
    L = 0
    while f"blocks.{L}.attn.W_Q" in t:
        L += 1
    for l in range(L):
        WQ, WK, WV, WO = (t[f"blocks.{l}.attn.{k}"].astype(np.float64) for k in ("W_Q", "W_K", "W_V", "W_O"))
        H, C, D = WQ.shape
        for h in range(H):
            qk = WQ[h] @ WK[h].T
            ov = WV[h] @ WO[h]
            sq = np.linalg.svd(qk, compute_uv=False)[:D]
            so = np.linalg.svd(ov, compute_uv=False)[:D]
            rq = np.linalg.matrix_rank(qk.astype(np.float32))
            ro = np.linalg.matrix_rank(ov.astype(np.float32))
            lam = np.linalg.eigvals(ov @ G)
            den = np.abs(lam).sum()
            copying = float(lam.real.sum() / den) if den > 0 else 0.0
            print(f"head {l} {h} {rq} {ro} {copying:.12g}")
            print(f"qk_sv {l} {h} " + " ".join(f"{v:.12g}" for v in sq))
            print(f"ov_sv {l} {h} " + " ".join(f"{v:.12g}" for v in so))


if __name__ == "__main__":
    main()
