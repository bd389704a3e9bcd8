#!/usr/bin/env python3
"""Checkpoints and references for tests/test_import.c (exit 77 when PyTorch cannot be imported).

  import_ref.py small DIR   each layout the importer reads, at small sizes, with references
  import_ref.py big DIR     one model of attn-only-2l's true shape (random weights)
  import_ref.py redwood DIR one model of redwood_attn_2l's true shape (random weights)

Layouts (random weights, TransformerLens key names, torch.save of the state dict):
  ln_std      LayerNorm, all biases, standard positions; TransformerLens config.json;
              also as ln_std_f16.pth, ln_std_bf16.pth, ln_std.safetensors, and nested
              ({"model_state_dict": ..., "optimizer_state_dict": ..., "step": 3})
  none_sf     no LayerNorm, shortformer positions; the hub config format (NeelNanda's keys)
  ln_sf       LayerNorm, shortformer positions (redwood_attn_2l's layout); hub config format
  none_std    no LayerNorm, standard positions (a model like attnlab's own, with biases)
  mlp         an MLP model (blocks.0.mlp.W_in), which must be refused

For each NAME, DIR/NAME.ref.safetensors holds: tokens (B, T) int32; logits_raw (B, T, V),
the forward of the unprocessed weights; logprobs (B, T, V) of the same; proc.<key> the
weights after TransformerLens's from_pretrained processing (written here from its
documented definitions: fold_ln, center_writing_weights, center_unembed, fold_value_biases;
only the last for shortformer models); DIR/NAME.cmp.safetensors is a run_with_cache-style
reference of the processed model (logits and every hook point) for `attnlab compare`.
Everything is computed in float64 from the weights as saved (float16/bfloat16 rounded)."""
import json, math, os, struct, sys

try:
    import numpy as np
    import torch
except Exception as exc:  # noqa: BLE001
    print("skipped: cannot import torch (%s)" % exc)
    sys.exit(77)

V, C, H, D, NCTX, L = 300, 32, 4, 8, 64, 2
B, T = 64, 16


def st_write(path, tensors, meta=None):
    """safetensors by hand: tensors is a list of (name, numpy array)."""
    header, blobs, off = {}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        dt = {np.dtype("float32"): "F32", np.dtype("int32"): "I32",
              np.dtype("float16"): "F16"}[a.dtype]
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def st_write_bf16(path, sd):
    """A state dict as safetensors in BF16 (numpy has no bfloat16: the raw halves)."""
    header, blobs, off = {}, [], 0
    for name, t in sd.items():
        raw = t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_sd(g, norm, biases=True, nl=L, v=V, c=C, h=H, d=D, nctx=NCTX):
    """A random TransformerLens state dict (float32); logits of order 1."""
    def r(*s, std=1.0):
        return torch.randn(*s, generator=g) * std
    sd = {"embed.W_E": r(v, c), "pos_embed.W_pos": r(nctx, c, std=0.5)}
    for l in range(nl):
        p = "blocks.%d." % l
        if norm == "LN":
            sd[p + "ln1.w"] = 1 + r(c, std=0.2)
            sd[p + "ln1.b"] = r(c, std=0.2)
        for w in "QKV":
            sd[p + "attn.W_" + w] = r(h, c, d, std=c ** -0.5)
        sd[p + "attn.W_O"] = r(h, d, c, std=(h * d) ** -0.5)
        if biases:
            for w in "QKV":
                sd[p + "attn.b_" + w] = r(h, d, std=0.3)
            sd[p + "attn.b_O"] = r(c, std=0.3)
        sd[p + "attn.mask"] = torch.tril(torch.ones(nctx, nctx, dtype=torch.bool))
        sd[p + "attn.IGNORE"] = torch.tensor(-1e5)
    if norm == "LN":
        sd["ln_final.w"] = 1 + r(c, std=0.2)
        sd["ln_final.b"] = r(c, std=0.2)
    sd["unembed.W_U"] = r(c, v, std=c ** -0.5 * 2)
    if biases:
        sd["unembed.b_U"] = r(v, std=0.3)
    return sd


def weights(sd):
    return {k: t.double() for k, t in sd.items() if t.is_floating_point() and not k.endswith("IGNORE")}


def layernorm(x, w, b, eps):
    """TransformerLens's LayerNorm: centre, scale = sqrt(mean(x_c^2) + eps), normalise, w and
    b (LNPre: w, b None). Returns (scale, normalized)."""
    xc = x - x.mean(-1, keepdim=True)
    scale = (xc.pow(2).mean(-1, keepdim=True) + eps).sqrt()
    n = xc / scale
    if w is not None:
        n = n * w + b
    return scale, n


def forward(w, tok, norm, pos, nl, eps=1e-5, cache=None):
    """The forward pass of an attention-only TransformerLens model, float64."""
    Bn, Tn = tok.shape
    get = lambda k: w.get(k)  # noqa: E731
    embed = w["embed.W_E"][tok]
    pe = w["pos_embed.W_pos"][:Tn].unsqueeze(0).expand(Bn, Tn, -1)
    resid = embed + pe if pos == "standard" else embed
    c = cache if cache is not None else {}
    c["hook_embed"], c["hook_pos_embed"] = embed, pe
    mask = torch.triu(torch.ones(Tn, Tn, dtype=torch.bool), 1)
    for l in range(nl):
        p = "blocks.%d." % l
        c[p + "hook_resid_pre"] = resid
        x = resid
        if norm != "none":
            s, x = layernorm(resid, get(p + "ln1.w"), get(p + "ln1.b"), eps)
            c[p + "ln1.hook_scale"], c[p + "ln1.hook_normalized"] = s, x
        qk_in = x + pe if pos == "shortformer" else x
        def proj(inp, wn, bn):
            out = torch.einsum("btc,hcd->bthd", inp, w[p + "attn." + wn])
            return out + w[p + "attn." + bn] if p + "attn." + bn in w else out
        q, k, v = proj(qk_in, "W_Q", "b_Q"), proj(qk_in, "W_K", "b_K"), proj(x, "W_V", "b_V")
        sc = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        sc = sc.masked_fill(mask, float("-inf"))
        pat = torch.softmax(sc, -1)
        z = torch.einsum("bhqk,bkhd->bqhd", pat, v)
        res = torch.einsum("bqhd,hdc->bqhc", z, w[p + "attn.W_O"])
        out = res.sum(2) + (w[p + "attn.b_O"] if p + "attn.b_O" in w else 0)
        c.update({p + "attn.hook_q": q, p + "attn.hook_k": k, p + "attn.hook_v": v,
                  p + "attn.hook_attn_scores": sc, p + "attn.hook_pattern": pat,
                  p + "attn.hook_z": z, p + "attn.hook_result": res, p + "hook_attn_out": out})
        resid = resid + out
        c[p + "hook_resid_post"] = resid
    x = resid
    if norm != "none":
        s, x = layernorm(resid, get("ln_final.w"), get("ln_final.b"), eps)
        c["ln_final.hook_scale"], c["ln_final.hook_normalized"] = s, x
    logits = x @ w["unembed.W_U"]
    if "unembed.b_U" in w:
        logits = logits + w["unembed.b_U"]
    return logits


def process(w, norm, pos, nl):
    """from_pretrained's defaults on a float64 weight dict: returns (weights, norm, steps)."""
    w = dict(w)
    steps = []
    sf = pos == "shortformer"
    centre = lambda t, dim: t - t.mean(dim, keepdim=True)  # noqa: E731
    if norm == "LN" and not sf:  # fold_ln: LN -> LNPre
        for l in range(nl):
            p = "blocks.%d." % l
            lw, lb = w.pop(p + "ln1.w"), w.pop(p + "ln1.b")
            for x in "QKV":
                W = w[p + "attn.W_" + x]
                w[p + "attn.b_" + x] = w.get(p + "attn.b_" + x, 0) + torch.einsum("c,hcd->hd", lb, W)
                w[p + "attn.W_" + x] = centre(W * lw[None, :, None], 1)
        lw, lb = w.pop("ln_final.w"), w.pop("ln_final.b")
        w["unembed.b_U"] = w.get("unembed.b_U", 0) + lb @ w["unembed.W_U"]
        w["unembed.W_U"] = centre(w["unembed.W_U"] * lw[:, None], 0)
        norm = "LNPre"
        steps.append("fold_ln")
    if norm != "none" and not sf:  # center_writing_weights
        w["embed.W_E"] = centre(w["embed.W_E"], -1)
        w["pos_embed.W_pos"] = centre(w["pos_embed.W_pos"], -1)
        for l in range(nl):
            p = "blocks.%d." % l
            w[p + "attn.W_O"] = centre(w[p + "attn.W_O"], -1)
            if p + "attn.b_O" in w:
                w[p + "attn.b_O"] = centre(w[p + "attn.b_O"], -1)
        steps.append("center_writing_weights")
    if not sf:  # center_unembed
        w["unembed.W_U"] = centre(w["unembed.W_U"], -1)
        if "unembed.b_U" in w:
            w["unembed.b_U"] = centre(w["unembed.b_U"], -1)
        steps.append("center_unembed")
    if "blocks.0.attn.b_V" in w:  # fold_value_biases
        for l in range(nl):
            p = "blocks.%d." % l
            bo = w.get(p + "attn.b_O", 0) + torch.einsum("hd,hdc->c", w[p + "attn.b_V"], w[p + "attn.W_O"])
            w[p + "attn.b_O"] = bo
            w[p + "attn.b_V"] = torch.zeros_like(w[p + "attn.b_V"])
        steps.append("fold_value_biases")
    return w, norm, steps


def write_refs(d, name, sd, norm, pos, nl, tok, eps=1e-5, hooks=True):
    w = weights(sd)
    logits = forward(w, tok, norm, pos, nl, eps)
    pw, pnorm, steps = process(w, norm, pos, nl)
    out = [("tokens", tok.numpy().astype(np.int32)),
           ("logits_raw", logits.float().numpy()),
           ("logprobs", torch.log_softmax(logits, -1).float().numpy())]
    out += [("proc." + k, t.float().numpy()) for k, t in sorted(pw.items()) if not k.endswith(".mask")]
    st_write(os.path.join(d, name + ".ref.safetensors"), out)
    if not hooks:
        return
    cache = {}
    plogits = forward(pw, tok[:4], pnorm, pos, nl, eps, cache)
    cmp = [("tokens", tok[:4].numpy().astype(np.int32)), ("logits", plogits.float().numpy())]
    cmp += [(k, t.float().numpy()) for k, t in cache.items()]
    st_write(os.path.join(d, name + ".cmp.safetensors"), cmp, {"processing": ",".join(steps)})


def tl_config(norm, pos, **extra):
    """config.json as HookedTransformerConfig.to_dict() writes it (the fields that matter and
    some that do not)."""
    c = {"n_layers": L, "d_model": C, "n_ctx": NCTX, "d_head": D, "model_name": "custom",
         "n_heads": H, "d_mlp": None, "act_fn": None, "d_vocab": V, "eps": 1e-5,
         "use_attn_result": False, "use_attn_scale": True, "attn_scale": math.sqrt(D),
         "use_split_qkv_input": False, "use_local_attn": False, "original_architecture": None,
         "tokenizer_name": None, "normalization_type": None if norm == "none" else norm,
         "device": "cpu", "n_devices": 1, "attention_dir": "causal", "attn_only": True,
         "seed": None, "initializer_range": 0.1, "init_weights": True,
         "positional_embedding_type": pos, "final_rms": False, "d_vocab_out": V,
         "n_params": 4 * L * C * H * D, "default_prepend_bos": True, "dtype": "torch.float32",
         "n_key_value_heads": None, "attn_scores_soft_cap": -1.0, "output_logits_soft_cap": -1.0}
    c.update(extra)
    return c


def hub_config(norm, shortformer):
    """config.json in the format of NeelNanda's hub models (training keys and all)."""
    return {"n_layers": L, "d_model": C, "d_mlp": 4 * C, "d_head": D, "n_heads": H,
            "lr_hidden": 0.002, "lr_vector": 0.001, "batch_size_per_device": 32,
            "batches_per_step": 1, "seed": 5678, "save_checkpoints": True, "debug": False,
            "debug_batch": False, "normalization": None if norm == "none" else norm,
            "max_tokens": 22000000000, "version": 7, "use_bfloat16_matmul": True, "n_ctx": NCTX,
            "d_vocab": V, "tokenizer_name": "NeelNanda/gpt-neox-tokenizer-digits",
            "betas": [0.9, 0.99], "weight_decay": 0.05, "dataset_name": "c4_code",
            "grad_norm_clip": 1.0, "n_devices": 8, "act_fn": "solu_ln",
            "shortformer_pos": shortformer, "attn_only": True, "ln_eps": 1e-5,
            "lr_schedule": "cosine_warmup", "warmup_tokens": 300000000,
            "train_loss_ewma_beta": 0.99, "truncate_tokens": 1000000000000, "log_interval": 50,
            "initializer_scale_global": 1.0, "initializer_scale_hidden": 0.02,
            "initializer_scale_embed": 0.1, "initializer_scale_unembed": 0.02,
            "neuron_scale": 1.0, "neuron_temp": 1.0, "use_acc": False,
            "weight_init_scheme": "mup", "fixed_init": "", "store_init": False, "control": 1.0,
            "tokens_per_step": 262144, "batch_size": 256, "max_steps": 83923,
            "warmup_steps": 1144, "n_params": 3 * L * C * C}


def dump_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def small(d):
    g = torch.Generator().manual_seed(1234)
    tok = torch.randint(0, V, (B, T), generator=g)
    layouts = [("ln_std", "LN", "standard"), ("none_sf", "none", "shortformer"),
               ("ln_sf", "LN", "shortformer"), ("none_std", "none", "standard")]
    for name, norm, pos in layouts:
        sd = make_sd(g, norm)
        torch.save(sd, os.path.join(d, name + ".pth"))
        write_refs(d, name, sd, norm, pos, L, tok)
        if name in ("none_sf", "ln_sf"):
            dump_json(os.path.join(d, name + ".config.json"), hub_config(norm, pos == "shortformer"))
        else:
            dump_json(os.path.join(d, name + ".config.json"), tl_config(norm, pos))
        if name != "ln_std":
            continue
        for dt, tdt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            sdh = {k: (t.to(tdt) if t.is_floating_point() else t) for k, t in sd.items()}
            torch.save(sdh, os.path.join(d, "ln_std_%s.pth" % dt))
            write_refs(d, "ln_std_" + dt, sdh, norm, pos, L, tok, hooks=False)
        st_write(os.path.join(d, "ln_std.safetensors"),
                 [(k, t.numpy()) for k, t in sd.items() if t.is_floating_point()])
        st_write_bf16(os.path.join(d, "ln_std_bf16.safetensors"),
                      {k: t for k, t in sd.items() if t.is_floating_point()})
        torch.save({"model_state_dict": sd, "optimizer_state_dict": {"state": {0: {"exp_avg": torch.zeros(3)}}},
                    "step": 3}, os.path.join(d, "nested.pth"))
        # a config and checkpoint that disagree: the config's d_model is not the tensors'
        dump_json(os.path.join(d, "wrong_dmodel.config.json"), tl_config(norm, pos, d_model=2 * C))
        # one tensor of the wrong shape
        bad = dict(sd)
        bad["blocks.1.attn.W_K"] = torch.randn(H, C, D + 1, generator=g)
        torch.save(bad, os.path.join(d, "bad_shape.pth"))
        # a stray key
        extra = dict(sd)
        extra["blocks.0.attn.W_X"] = torch.zeros(3)
        torch.save(extra, os.path.join(d, "extra_key.pth"))
        # a missing key
        miss = {k: t for k, t in sd.items() if k != "blocks.1.attn.W_V"}
        torch.save(miss, os.path.join(d, "missing_key.pth"))
    # an MLP model (GELU_1L-like): its keys and a config that says so
    sd = make_sd(g, "LN", nl=1)
    sd["blocks.0.ln2.w"], sd["blocks.0.ln2.b"] = torch.ones(C), torch.zeros(C)
    sd["blocks.0.mlp.W_in"], sd["blocks.0.mlp.b_in"] = torch.randn(C, 4 * C), torch.zeros(4 * C)
    sd["blocks.0.mlp.W_out"], sd["blocks.0.mlp.b_out"] = torch.randn(4 * C, C), torch.zeros(C)
    torch.save(sd, os.path.join(d, "mlp.pth"))
    dump_json(os.path.join(d, "mlp.config.json"),
              tl_config("LN", "standard", n_layers=1, attn_only=False, d_mlp=4 * C, act_fn="gelu"))
    return 0


def true_shape(d, name, shape, shortformer, seed):
    """A random LayerNorm model of a published model's shape: d/NAME.pth, d/NAME.config.json
    (the hub format); returns its state dict and generator."""
    global V, C, H, D, NCTX, L
    V, C, H, D, NCTX, L = shape
    g = torch.Generator().manual_seed(seed)
    sd = make_sd(g, "LN", v=V, c=C, h=H, d=D, nctx=NCTX)
    torch.save(sd, os.path.join(d, name + ".pth"))
    dump_json(os.path.join(d, name + ".config.json"), hub_config("LN", shortformer))
    return sd, g


def big(d):
    """attn-only-2l's shape: 2 layers, d_model 512, 8 heads of 64, n_ctx 1024, d_vocab 48262;
    with the log-probabilities of 4 random sequences (big.ref.safetensors)."""
    sd, g = true_shape(d, "big", (48262, 512, 8, 64, 1024, 2), False, 99)
    tok = torch.randint(0, V, (4, 24), generator=g)
    w = weights(sd)
    logits = forward(w, tok, "LN", "standard", L)
    st_write(os.path.join(d, "big.ref.safetensors"),
             [("tokens", tok.numpy().astype(np.int32)),
              ("logprobs", torch.log_softmax(logits, -1).float().numpy())])
    return 0


def redwood(d):
    """redwood_attn_2l's shape: 2 layers, d_model 256, 8 heads of 32, n_ctx 2048, d_vocab
    50259, LayerNorm, shortformer positions."""
    true_shape(d, "redwood", (50259, 256, 8, 32, 2048, 2), True, 98)
    return 0


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    sys.exit({"small": small, "big": big, "redwood": redwood}[mode](out))
