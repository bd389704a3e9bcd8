#!/usr/bin/env python3
"""Regenerate the seed corpus of tests/fuzz/fuzz_sae.c (maintainer tool,
not run by make): python3 tests/fuzz/make_sae_seeds.py

A seed is a 4-byte little-endian length L, L bytes of cfg.json, then the
sae_weights.safetensors bytes: valid TopK and standard SAEs in SAELens's
layout, and one case beside each check of src/io/sae_io.c."""
import json, os, struct

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sae")
os.makedirs(here, exist_ok=True)


def st_file(tensors):
    hdr, data = {}, b""
    for name, shape, vals in tensors:
        raw = struct.pack("<%df" % len(vals), *vals)
        hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data


def sae(d, n, nan=False, extra=False, drop=None):
    t = [("W_enc", [d, n], [0.1 * ((i * 7) % 5 - 2) for i in range(d * n)]),
         ("b_enc", [n], [0.0] * n),
         ("W_dec", [n, d], [0.1 * ((i * 3) % 5 - 2) for i in range(d * n)]),
         ("b_dec", [d], [float("nan") if nan else 0.5] * d)]
    if extra:
        t.append(("threshold", [n], [0.0] * n))
    if drop:
        t = [x for x in t if x[0] != drop]
    return st_file(t)


def cfg(**kw):
    c = {"architecture": "topk", "d_in": 4, "d_sae": 8, "k": 2, "k_aux": 2, "aux_coeff": 0.03125,
         "dtype": "float32", "hook_name": "blocks.1.attn.hook_z", "hook_layer": 1,
         "apply_b_dec_to_input": True, "normalize_activations": "expected_average_only_in",
         "norm_scaling_factor": 1.5, "dead_tokens": 1000, "model_sha256": "0" * 64, "seed": 7}
    for k, v in kw.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    return json.dumps(c, indent=1).encode()


def put(name, c, w):
    with open(os.path.join(here, name), "wb") as f:
        f.write(struct.pack("<I", len(c)) + c + w)


put("topk.bin", cfg(), sae(4, 8))
put("standard.bin", cfg(architecture="standard", k=None, k_aux=None, aux_coeff=None,
                        l1_coefficient=5.0, hook_name="blocks.0.hook_resid_pre", hook_layer=0,
                        normalize_activations="none", norm_scaling_factor=None), sae(4, 8))
put("shape.bin", cfg(d_in=5), sae(4, 8))
put("hostile-size.bin", cfg(d_sae=1000000), sae(4, 8))
put("k-large.bin", cfg(k=9), sae(4, 8))
put("hook.bin", cfg(hook_layer=2), sae(4, 8))
put("nan.bin", cfg(), sae(4, 8, nan=True))
put("extra.bin", cfg(), sae(4, 8, extra=True))
put("missing.bin", cfg(), sae(4, 8, drop="b_dec"))
put("scale.bin", cfg(norm_scaling_factor=None), sae(4, 8))
