#!/usr/bin/env python3
"""Checkpoints for tests/test_torch_ckpt.c (and tests/fuzz/make_torch_ckpt_seeds.py).

  torch_ckpt_ref.py real DIR      torch.save files and their reference values (exit 77
                                  when PyTorch cannot be imported)
  torch_ckpt_ref.py hostile DIR   hand-built files that must be refused (no PyTorch needed)

Reference values: DIR/ref/<file>/<tensor name>.bin holds the tensor as PyTorch reads it,
contiguous: float tensors as float32 (float16 and bfloat16 widen exactly), int64 as int64,
bool as one byte each, all little-endian."""
import io, os, pickle, struct, sys, zipfile

# ---- hand-built torch.save layout (no PyTorch needed)


def zip_ckpt(path, pkl, storages, stem=None, version=b"3\n", byteorder=None):
    """A zip laid out as torch.save's: <stem>/data.pkl, <stem>/data/<key>, <stem>/version."""
    stem = stem or (os.path.splitext(os.path.basename(path))[0] if path else "ckpt")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(stem + "/data.pkl", pkl)
        if byteorder is not None:
            z.writestr(stem + "/byteorder", byteorder)
        for key, raw in storages:
            z.writestr(stem + "/data/" + key, raw)
        if version is not None:
            z.writestr(stem + "/version", version)
    data = buf.getvalue()
    if path:
        with open(path, "wb") as f:
            f.write(data)
    return data


def p_str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def p_int(v):
    return b"\x8a\x08" + struct.pack("<q", v)


def p_tuple(items):
    return b"(" + b"".join(items) + b"t"


def p_tensor(cls, key, numel, offset, size, stride):
    """_rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())."""
    pid = p_tuple([p_str("storage"), b"ctorch\n" + cls.encode() + b"\n", p_str(key),
                   p_str("cpu"), p_int(numel)])
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"Q" + p_int(offset) +
            p_tuple([p_int(x) for x in size]) + p_tuple([p_int(x) for x in stride]) +
            b"\x89ccollections\nOrderedDict\n)Rt" + b"R")


def p_dict(pairs):
    return b"\x80\x02}(" + b"".join(p_str(k) + v for k, v in pairs) + b"u."


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def one_tensor(path, numel, offset, size, stride, raw=None, cls="FloatStorage", **kw):
    pkl = p_dict([("w", p_tensor(cls, "0", numel, offset, size, stride))])
    return zip_ckpt(path, pkl, [("0", raw if raw is not None else f32(*range(numel)))], **kw)


def patch_sizes(raw, name, value, compressed=True):
    """Set the sizes (uncompressed, and compressed too unless told) of entry `name` in its
    local and central headers."""
    raw = bytearray(raw)
    for sig, name_len, name_at, sizes_at in ((b"PK\x03\x04", 26, 30, 18),
                                             (b"PK\x01\x02", 28, 46, 20)):
        at = raw.find(sig)
        while at >= 0:
            n = struct.unpack_from("<H", raw, at + name_len)[0]
            if raw[at + name_at:at + name_at + n].endswith(name):
                if compressed:
                    struct.pack_into("<I", raw, at + sizes_at, value)
                struct.pack_into("<I", raw, at + sizes_at + 4, value)
            at = raw.find(sig, at + 4)
    return bytes(raw)


def deflated(pkl, storages, stem="d"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(stem + "/data.pkl", pkl)
        for key, raw in storages:
            z.writestr(stem + "/data/" + key, raw)
        z.writestr(stem + "/version", "3\n")
    return buf.getvalue()


class Evil:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


def hostile(d):
    os.makedirs(d, exist_ok=True)
    j = lambda n: os.path.join(d, n)
    marker = j("MARKER")
    # a pickle that would run `touch MARKER` in Python's unpickler, as torch.load(weights_only=False)
    zip_ckpt(j("evil.pt"), pickle.dumps({"w": Evil("touch " + marker)}, protocol=2), [])
    zip_ckpt(j("evil4.pt"), pickle.dumps(Evil("touch " + marker), protocol=4), [])
    zip_ckpt(j("proto0.pt"), pickle.dumps({"w": 1}, protocol=0), [])
    zip_ckpt(j("empty_tuple.pt"), b"\x80\x02(t.", [])  # MARK, TUPLE before any push
    zip_ckpt(j("double.pt"), p_dict([("w", p_tensor("DoubleStorage", "0", 2, 0, [2], [1]))]),
             [("0", struct.pack("<2d", 1, 2))])
    one_tensor(j("ok.pt"), 6, 0, [2, 3], [3, 1])
    one_tensor(j("small_storage.pt"), 10, 0, [4, 4], [4, 1])
    one_tensor(j("offset.pt"), 10, 9, [2], [1])
    one_tensor(j("stride.pt"), 9, 0, [3, 3], [4, 1])
    one_tensor(j("huge_shape.pt"), 4, 0, [1 << 20, 1 << 20], [1 << 20, 1])
    one_tensor(j("huge_stride0.pt"), 1, 0, [1 << 40], [0])
    one_tensor(j("stride_overflow.pt"), 4, 0, [3, 2], [1 << 62, 1])
    one_tensor(j("storage_numel.pt"), 1 << 61, 0, [1], [1], raw=f32(1))
    one_tensor(j("entry_short.pt"), 10, 0, [10], [1], raw=f32(*range(9)))
    one_tensor(j("ndim9.pt"), 1, 0, [1] * 9, [1] * 9)
    one_tensor(j("big_endian.pt"), 6, 0, [6], [1], byteorder=b"big")
    one_tensor(j("no_version.pt"), 6, 0, [6], [1], version=None)
    zip_ckpt(j("no_storage.pt"), p_dict([("w", p_tensor("FloatStorage", "7", 2, 0, [2], [1]))]), [])
    zip_ckpt(j("dup_name.pt"), p_dict([("a.b", p_tensor("FloatStorage", "0", 2, 0, [2], [1])),
                                       ("a", b"}(" + p_str("b") +
                                        p_tensor("FloatStorage", "0", 2, 0, [2], [1]) + b"u")]),
             [("0", f32(1, 2))])
    # the local and central headers of data/0 claim 4 GB
    open(j("huge_entry.pt"), "wb").write(patch_sizes(one_tensor(None, 6, 0, [6], [1]),
                                                      b"data/0", 0xFFFFFFF0))
    # deflated entries are read; one claiming more than deflate can expand to is refused
    pkl = p_dict([("w", p_tensor("FloatStorage", "0", 4096, 0, [64, 64], [64, 1]))])
    z = deflated(pkl, [("0", f32(*[float(i % 7) for i in range(4096)]))], stem="deflated")
    open(j("deflated.pt"), "wb").write(z)
    open(j("deflate_bomb.pt"), "wb").write(patch_sizes(z, b"data/0", 0x7FFFFFF0, False))
    # a zip64 end record claiming 2^40 entries in front of a valid end record
    raw = one_tensor(None, 6, 0, [6], [1])
    eocd = raw.rfind(b"PK\x05\x06")
    n, size, off = struct.unpack("<HII", raw[eocd + 10:eocd + 20])
    z64 = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, 1 << 40, 1 << 40, size, off)
    loc = struct.pack("<4sIQI", b"PK\x06\x07", 0, eocd, 1)
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    open(j("zip64_count.pt"), "wb").write(raw[:eocd] + z64 + loc + end)

    # pickles that break one rule of the restricted VM each (torch_pickle.c), in pk_<name>.pt
    g2 = lambda m, n: b"c" + m.encode() + b"\n" + n.encode() + b"\n"
    rebuild = g2("torch._utils", "_rebuild_tensor_v2")
    pid = lambda ty, key, loc, numel: p_tuple([p_str("storage"), ty, key, loc, numel])
    good_pid = pid(g2("torch", "FloatStorage"), p_str("0"), p_str("cpu"), p_int(2))
    pk = {
        "stack_global": b"\x80\x02" + p_int(1) + p_int(2) + b"\x93.",
        "build_list": b"\x80\x02]}b.",
        "setitem_list": b"\x80\x02]" + p_str("a") + p_str("b") + b"s.",
        "setitems_odd": b"\x80\x02}(" + p_str("a") + b"u.",
        "append_dict": b"\x80\x02}" + p_int(1) + b"a.",
        "appends_nomark": b"\x80\x02]e.",
        "memo_unset": b"\x80\x02h\x05.",
        "memo_unset4": b"\x80\x02j\x05\x00\x00\x00.",
        "memo_empty": b"\x80\x02q\x00.",
        "memo_huge": b"\x80\x02}r\xff\xff\xff\x7f.",
        "no_stop": b"\x80\x02}",
        "two_left": b"\x80\x02}}.",
        "proto_late": b"\x80\x02}\x80\x02.",
        "proto9": b"\x80\x09}.",
        "frame_long": b"\x80\x04\x95" + struct.pack("<Q", 1000) + b"}.",
        "reduce_int": b"\x80\x02" + p_int(1) + b")R.",
        "reduce_args": b"\x80\x02" + g2("collections", "OrderedDict") + p_int(1) + b"R.",
        "odict_args": b"\x80\x02" + g2("collections", "OrderedDict") + b"(" + p_int(1) + b"tR.",
        "call_storage": b"\x80\x02" + g2("torch", "FloatStorage") + b")R.",
        "param_args": b"\x80\x02" + g2("torch._utils", "_rebuild_parameter") + b"(" +
        p_int(1) + p_int(2) + p_int(3) + b"tR.",
        "persid_int": b"\x80\x02" + p_int(1) + b"Q.",
        "persid_type": b"\x80\x02" + pid(p_int(1), p_str("0"), p_str("cpu"), p_int(2)) + b"Q.",
        "persid_key": b"\x80\x02" + pid(g2("torch", "FloatStorage"), p_str(""), p_str("cpu"),
                                        p_int(2)) + b"Q.",
        "persid_numel": b"\x80\x02" + pid(g2("torch", "FloatStorage"), p_str("0"), p_str("cpu"),
                                          p_int(-1)) + b"Q.",
        "rebuild_nargs": b"\x80\x02" + rebuild + b"(" + good_pid + b"Q" + p_int(0) + b"tR.",
        "rebuild_hooks": b"\x80\x02" + rebuild + b"(" + good_pid + b"Q" + p_int(0) +
        p_tuple([p_int(2)]) + p_tuple([p_int(1)]) + p_int(0) + b"}tR.",
        "rebuild_v1": b"\x80\x02" + g2("torch._utils", "_rebuild_tensor") + b"(" + good_pid +
        b"Q" + p_int(0) + b"tR.",
        "global_line": b"\x80\x02ctorch",
        "torchscript": b"\x80\x02" + g2("__torch__.model", "Net") + b".",
        "obj_opcode": b"\x80\x02}o.",
        "tuple1_empty": b"\x80\x02\x85.",
        "tuple_nomark": b"\x80\x02t.",
        "unicode_short": b"\x80\x02X\xff\x00\x00\x00ab.",
        "top_int": b"\x80\x02K\x01.",
        "key_nul": p_dict([("a\x00b", p_tensor("FloatStorage", "0", 2, 0, [2], [1]))]),
        "key_long": p_dict([("k" * 5000, p_tensor("FloatStorage", "0", 2, 0, [2], [1]))]),
        "deep": b"\x80\x02" + b"".join(b"}(" + p_str("d") for _ in range(20)) +
        b"}" + b"u" * 20 + b".",
    }
    for name, b in pk.items():
        zip_ckpt(j("pk_" + name + ".pt"), b, [("0", f32(1, 2))])

    # the zip around it, one rule broken each, in zip_<name>.pt
    ok = one_tensor(None, 6, 0, [6], [1])
    eocd = ok.rfind(b"PK\x05\x06")
    zp = {
        "version99": one_tensor(None, 6, 0, [6], [1], version=b"99\n"),
        "byteorder": one_tensor(None, 6, 0, [6], [1], byteorder=b"middle"),
        "multidisk": ok[:eocd + 4] + struct.pack("<H", 1) + ok[eocd + 6:],
        "cdir_outside": ok[:eocd + 16] + struct.pack("<I", len(ok) + 100) + ok[eocd + 20:],
        "two_sizes": patch_sizes(ok, b"data/0", 20, compressed=False),
        "claims_more": patch_sizes(ok, b"data/0", len(ok) + 1000),
    }
    def zipped(method, stem, version_at):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as z:
            z.writestr(stem + "/data.pkl",
                       p_dict([("w", p_tensor("FloatStorage", "0", 2, 0, [2], [1]))]))
            z.writestr(stem + "/data/0", f32(1, 2))
            z.writestr(stem + "/" + version_at, "3\n")
        return buf.getvalue()
    # bzip2: a compression method attnlab does not read
    zp["bzip2"] = zipped(zipfile.ZIP_BZIP2, "b", "version")
    # torch >= 2.x's layout keeps the version under .data/ as well: accepted
    zp["dot_data_version"] = zipped(zipfile.ZIP_STORED, "d", ".data/version")
    for name, b in zp.items():
        open(j("zip_" + name + ".pt"), "wb").write(b)


# ---- real torch.save files


def dump_ref(d, fname, sd, prefix=""):
    import torch
    for k, v in sd.items():
        name = prefix + str(k)
        if isinstance(v, dict):
            dump_ref(d, fname, v, name + ".")
            continue
        if not isinstance(v, torch.Tensor):
            continue
        out = os.path.join(d, "ref", fname, name + ".bin")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        t = v.detach().contiguous()
        if t.dtype in (torch.float16, torch.bfloat16, torch.float32):
            raw = t.float().numpy().astype("<f4").tobytes()
        elif t.dtype == torch.int64:
            raw = t.numpy().astype("<i8").tobytes()
        else:
            raw = t.numpy().astype("u1").tobytes()
        with open(out, "wb") as f:
            f.write(raw)


def tl_state_dict(torch, dtype, V=50, C=16, H=2, D=8, n_ctx=12):
    """A 1-layer TransformerLens state dict: its key names and shapes."""
    g = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, generator=g).to(dtype)
    sd = {
        "embed.W_E": r(V, C), "pos_embed.W_pos": r(n_ctx, C),
        "blocks.0.ln1.w": r(C), "blocks.0.ln1.b": r(C),
        "blocks.0.attn.W_Q": r(H, C, D), "blocks.0.attn.W_K": r(H, C, D),
        "blocks.0.attn.W_V": r(H, C, D), "blocks.0.attn.W_O": r(H, D, C),
        "blocks.0.attn.b_Q": r(H, D), "blocks.0.attn.b_K": r(H, D),
        "blocks.0.attn.b_V": r(H, D), "blocks.0.attn.b_O": r(C),
        "blocks.0.attn.mask": torch.tril(torch.ones(n_ctx, n_ctx, dtype=torch.bool)),
        "blocks.0.attn.IGNORE": torch.tensor(-1e5).to(dtype),
        "blocks.0.attn.pos_ids": torch.arange(n_ctx, dtype=torch.int64) * 3 - 7,
        "unembed.W_U": r(C, V), "unembed.b_U": r(V),
    }
    return sd


def real(d):
    try:
        import torch
    except Exception:
        sys.exit(77)
    import collections
    os.makedirs(d, exist_ok=True)
    j = lambda n: os.path.join(d, n)
    for tag, dt in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
        sd = collections.OrderedDict(tl_state_dict(torch, dt))
        # extremes of each type: largest, subnormals, signed zero
        ext = {torch.float32: [3.4e38, -1e-45, 1e-39, -0.0, 1.0],
               torch.float16: [65504.0, -2.0 ** -24, 6.1e-5, -0.0, 3.0e-6],
               torch.bfloat16: [3.0e38, -1e-40, 1e-39, -0.0, 1.0]}[dt]
        sd["blocks.0.attn.W_Q"][0, 0, :5] = torch.tensor(ext, dtype=dt)
        torch.save(sd, j("tl_%s.pt" % tag))
        dump_ref(d, "tl_%s.pt" % tag, sd)
    g = torch.Generator().manual_seed(9)
    base = torch.randn(6, 5, generator=g)
    we = torch.randn(7, 4, generator=g)
    views = collections.OrderedDict([
        ("W_E", we), ("W_U", we.t()), ("base", base), ("rows", base[1:4]),
        ("col", base[:, 2]), ("sub", base[1:5:2, 1:4]),
        ("param", torch.nn.Parameter(torch.randn(3, generator=g))),
        ("inf", torch.tensor([1.0, float("inf")])),
        ("half_t", torch.randn(3, 5, generator=g).half().t()),
    ])
    torch.save(views, j("views.pt"))
    dump_ref(d, "views.pt", views)
    sd = collections.OrderedDict(tl_state_dict(torch, torch.float32, V=20, C=8))
    ck = {"model_state_dict": sd, "step": 7, "cfg": {"n_layers": 1, "name": "x", "lr": 0.5},
          "losses": [1.5, 2.5], "ema": {"embed.W_E": sd["embed.W_E"] * 2}}
    torch.save(ck, j("model_final.pth"))
    dump_ref(d, "model_final.pth", ck)
    torch.save(sd, j("proto4.pt"), pickle_protocol=4)
    dump_ref(d, "proto4.pt", sd)
    single = torch.randn(3, 4, generator=g)
    torch.save(single, j("single.pt"))
    dump_ref(d, "single.pt", {"": single})
    torch.save({"w": torch.randn(4, generator=g)}, j("legacy.pt"),
               _use_new_zipfile_serialization=False)
    torch.save({"w": torch.arange(6.0)}, j("small.pt"))
    # a module's state_dict() carries _metadata, set by BUILD
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    torch.save(m.state_dict(), j("module.pt"))
    dump_ref(d, "module.pt", m.state_dict())


if __name__ == "__main__":
    {"real": real, "hostile": hostile}[sys.argv[1]](sys.argv[2])
