#!/usr/bin/env python3
"""Regenerate the seed corpus of tests/fuzz/fuzz_torch_ckpt.c (maintainer tool,
not run by make): /usr/bin/python3 tests/fuzz/make_torch_ckpt_seeds.py

pkl-*.pkl seeds are data.pkl alone, which the target wraps in a zip with four
fixed storages (0: 16 float32, 1: 12 float16, 2: one int64, 3: three bools);
the others are tiny checkpoints: torch.save's own (when PyTorch is installed: every
dtype, views, a Parameter, a nested dict, pickle protocol 4, the legacy format),
hand-built ones in torch.save's layout (tests/torch_ckpt_ref.py), one of them
deflated, and one case beside each check of src/io/torch_ckpt.c and
src/io/torch_pickle.c. They are committed, so the fuzzer needs no PyTorch."""
import io, os, pickle, struct, sys, tempfile, zipfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
import torch_ckpt_ref as ref  # noqa: E402

out = os.path.join(here, "torch_ckpt")
os.makedirs(out, exist_ok=True)


def put(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


with tempfile.TemporaryDirectory() as tmp:
    ref.hostile(tmp)
    for n in ("ok.pt", "small_storage.pt", "huge_shape.pt", "stride_overflow.pt", "evil.pt",
              "evil4.pt", "dup_name.pt", "zip64_count.pt", "big_endian.pt", "ndim9.pt",
              "entry_short.pt", "double.pt", "deflate_bomb.pt"):
        put("hand-" + n, open(os.path.join(tmp, n), "rb").read())

# deflated entries (torch.save stores; libzip inflates what others may write)
pkl = ref.p_dict([("a", ref.p_tensor("HalfStorage", "0", 4, 1, [3], [1])),
                  ("b", ref.p_tensor("BFloat16Storage", "1", 2, 0, [2, 1], [1, 5]))])
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("m/data.pkl", pkl)
    z.writestr("m/data/0", struct.pack("<4e", 1, -2, 0.5, 65504))
    z.writestr("m/data/1", struct.pack("<2H", 0x3f80, 0xc000))
    z.writestr("m/version", "3\n")
put("hand-deflated.pt", buf.getvalue())
# a nested dict with int keys, a list, a tuple and a shared tensor, by memo
pkl = (b"\x80\x02}q\x00(X\x01\x00\x00\x00sq\x01}(K\x03" +
       ref.p_tensor("LongStorage", "0", 2, 0, [2], [1]) + b"q\x02u" +
       b"X\x01\x00\x00\x00l](h\x02NK\x01\x89G?\xf0\x00\x00\x00\x00\x00\x00e" +
       b"X\x01\x00\x00\x00t" + ref.p_tensor("BoolStorage", "1", 3, 0, [], []) + b"\x85u.")
put("hand-nested.pt", ref.zip_ckpt(None, pkl, [("0", struct.pack("<2q", -1, 7)),
                                               ("1", b"\x01\x00\x01")], stem="n"))

# data.pkl seeds over the target's fixed storages
T = ref.p_tensor
put("pkl-hand-all.pkl", ref.p_dict([
    ("w", T("FloatStorage", "0", 16, 0, [4, 4], [4, 1])),
    ("wt", T("FloatStorage", "0", 16, 1, [3, 2], [1, 4])),
    ("h", T("HalfStorage", "1", 12, 2, [2, 3], [1, 2])),
    ("i", T("LongStorage", "2", 1, 0, [], [])),
    ("m", T("BoolStorage", "3", 3, 0, [3], [1]))]))
put("pkl-hand-bf16.pkl", ref.p_dict([("bf", T("BFloat16Storage", "1", 12, 0, [3, 4], [1, 3]))]))
put("pkl-hand-past-end.pkl", ref.p_dict([("w", T("FloatStorage", "0", 16, 3, [4, 4], [4, 1]))]))
put("pkl-hand-stride0.pkl", ref.p_dict([("w", T("FloatStorage", "0", 16, 15, [5, 3], [0, 0]))]))

try:
    import torch
except ImportError:
    print("PyTorch not installed: torch.save seeds not regenerated", file=sys.stderr)
    sys.exit(0)

g = torch.Generator().manual_seed(1)
base = torch.randn(3, 2, generator=g)
cases = {
    "torch-small.pt": ({"w": torch.arange(6.0)}, {}),
    "torch-dtypes.pt": ({"f": torch.randn(2, generator=g), "h": torch.randn(2, generator=g).half(),
                         "b": torch.randn(2, generator=g).bfloat16(),
                         "i": torch.arange(3), "m": torch.tril(torch.ones(2, 2, dtype=torch.bool)),
                         "s": torch.tensor(-1e5)}, {}),
    "torch-views.pt": ({"base": base, "t": base.t(), "row": base[1], "col": base[:, 1],
                        "p": torch.nn.Parameter(torch.zeros(2))}, {}),
    "torch-nested.pt": ({"model_state_dict": {"embed.W_E": torch.ones(2, 2)}, "step": 3,
                         "cfg": {"lr": 0.5, "name": "x"}}, {}),
    "torch-proto4.pt": ({"w": torch.ones(3)}, {"pickle_protocol": 4}),
    "torch-legacy.pt": ({"w": torch.ones(2)}, {"_use_new_zipfile_serialization": False}),
    "torch-single.pt": (torch.ones(2, 3), {}),
}
four = {"a": torch.randn(4, 4, generator=g), "b": torch.randn(12, generator=g).half(),
        "c": torch.tensor([5]), "d": torch.tensor([1, 0, 1]).bool()}
pkls = {"pkl-torch.pkl": (four, {}), "pkl-torch-proto4.pkl": (four, {"pickle_protocol": 4}),
        "pkl-torch-nested.pkl": ({"model_state_dict": four, "step": 3, "losses": [0.5]}, {}),
        "pkl-torch-views.pkl": ({"a": four["a"], "t": four["a"].t(), "r": four["a"][1:3, ::2],
                                 "p": torch.nn.Parameter(four["a"][0])}, {})}
with tempfile.TemporaryDirectory() as tmp:
    for name, (obj, kw) in pkls.items():
        p = os.path.join(tmp, "x.pt")
        torch.save(obj, p, **kw)
        put(name, zipfile.ZipFile(p).read("x/data.pkl"))
    for name, (obj, kw) in cases.items():
        p = os.path.join(tmp, name)
        torch.save(obj, p, **kw)
        put(name, open(p, "rb").read())
