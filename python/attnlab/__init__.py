"""attnlab from Python: the C library's model, tokenizer, forward pass,
activation cache and analyses through ctypes (no second engine), plus
plain readers of the files attnlab writes.

    import attnlab
    m = attnlab.Model("runs/demo/2l")
    ids = m.encode("once upon a time", bos=True)
    logits, cache = m.run_with_cache(ids, hooks=["pattern", "z"])
    cache["blocks.1.attn.hook_pattern"].shape     # (1, H, T, T)
    doc = attnlab.analysis("scores", model="runs/demo/2l", db="r.db", probe_r=20)

Needs NumPy and build/libattnlab.so (`make`); ATTNLAB_LIB names another
copy of the library.
"""
import ctypes
import json
import os
import sqlite3
import struct
import tempfile

import numpy as np

__all__ = ["Model", "analysis", "read_safetensors", "read_cache", "open_results", "library"]

_DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U16": "<u2", "BF16": None}
_lib = None


def library():
    """The loaded libattnlab (ctypes.CDLL), loaded once."""
    global _lib
    if _lib is not None:
        return _lib
    path = os.environ.get("ATTNLAB_LIB") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "libattnlab.so")
    lib = ctypes.CDLL(os.path.abspath(path))
    c, sz, P = ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p
    ip = ctypes.POINTER(ctypes.c_int)
    fp = ctypes.POINTER(ctypes.c_float)
    lib.al_api_version.restype = c
    lib.al_api_load.restype = P
    lib.al_api_load.argtypes = [c, c, sz]
    lib.al_api_free.argtypes = [P]
    lib.al_api_config.argtypes = [P, ip]
    lib.al_api_encode.restype = ctypes.c_long
    lib.al_api_encode.argtypes = [P, c, sz, ctypes.c_int, ip, sz, c, sz]
    lib.al_api_decode.restype = ctypes.c_long
    lib.al_api_decode.argtypes = [P, ip, sz, c, sz, c, sz]
    lib.al_api_forward.argtypes = [P, ip, ctypes.c_int, ctypes.c_int, fp, fp, c, sz]
    lib.al_api_cache.argtypes = [P, ip, ctypes.c_int, ctypes.c_int, c, ctypes.c_double, c, c, sz]
    lib.al_api_run.argtypes = [c, ctypes.c_int, ctypes.POINTER(c), c, c, sz]
    _lib = lib
    return lib


class AttnlabError(RuntimeError):
    """What the C library said went wrong, one line."""


def _err():
    return ctypes.create_string_buffer(1024)


def _ids(ids):
    a = np.ascontiguousarray(np.asarray(ids, dtype=np.int32))
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2:
        raise ValueError("ids must be (T,) or (B, T)")
    return a


class Model:
    """A model directory: weights, config and tokenizer, held by the C library."""

    def __init__(self, path):
        self.path = str(path)
        e = _err()
        self._h = library().al_api_load(self.path.encode(), e, len(e))
        if not self._h:
            raise AttnlabError(e.value.decode(errors="replace"))
        cfg = (ctypes.c_int * 9)()
        library().al_api_config(self._h, cfg)
        keys = ["n_layers", "d_model", "n_heads", "d_head", "n_ctx", "d_vocab", "pos_type",
                "tied_embeddings", "eot_id"]
        self.config = dict(zip(keys, list(cfg)))
        self.config["positional_embedding_type"] = "shortformer" if cfg[6] == 1 else "standard"
        with open(os.path.join(self.path, "config.json")) as f:  # checked by the loader
            j = json.load(f)
        self.config["normalization_type"] = j.get("normalization_type")
        self.config["eps"] = j.get("eps", 1e-5)
        self.config["biases"] = list(j.get("biases", []))

    def __del__(self):
        if getattr(self, "_h", None):
            library().al_api_free(self._h)
            self._h = None

    def encode(self, text, bos=False, allow_special=False):
        """Token ids of text (str: UTF-8; bytes: as they are), as `attnlab` encodes it;
        bos puts <|endoftext|> first."""
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        out = (ctypes.c_int * max(1, len(b)))()
        e = _err()
        n = library().al_api_encode(self._h, b, len(b), int(allow_special), out, len(b), e, len(e))
        if n < 0:
            raise AttnlabError(e.value.decode(errors="replace"))
        ids = np.array(out[:n], dtype=np.int32)
        if bos:
            ids = np.concatenate([[self.config["eot_id"]], ids]).astype(np.int32)
        return ids

    def decode(self, ids):
        """The bytes of ids."""
        a = np.ascontiguousarray(np.asarray(ids, dtype=np.int32).ravel())
        p = a.ctypes.data_as(ctypes.POINTER(ctypes.c_int))
        cap = 64 + 32 * len(a)
        while True:
            buf = ctypes.create_string_buffer(cap)
            e = _err()
            n = library().al_api_decode(self._h, p, len(a), buf, cap, e, len(e))
            if n < 0:
                raise AttnlabError(e.value.decode(errors="replace"))
            if n <= cap:
                return buf.raw[:n]
            cap = n

    def forward(self, ids):
        """(logits, probs), each (B, T, d_vocab) float32, for ids (T,) or (B, T)."""
        a = _ids(ids)
        B, T = a.shape
        V = self.config["d_vocab"]
        logits = np.empty((B, T, V), np.float32)
        probs = np.empty((B, T, V), np.float32)
        fp = ctypes.POINTER(ctypes.c_float)
        e = _err()
        rc = library().al_api_forward(self._h, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int)), B, T,
                                      logits.ctypes.data_as(fp), probs.ctypes.data_as(fp), e, len(e))
        if rc:
            raise AttnlabError(e.value.decode(errors="replace"))
        return logits, probs

    def run_with_cache(self, ids, hooks=None, max_mb=2000):
        """(logits, cache): cache maps TransformerLens hook names
        ('blocks.0.attn.hook_pattern', ...) to NumPy arrays in its shapes; hooks
        picks kinds (embed, pos_embed, resid_pre, q, k, v, pattern, z, result,
        resid_post; None: all)."""
        a = _ids(ids)
        logits, _ = self.forward(a)
        hk = None if hooks is None else ",".join(hooks).encode()
        fd, path = tempfile.mkstemp(suffix=".safetensors")
        os.close(fd)
        try:
            e = _err()
            rc = library().al_api_cache(self._h, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int)),
                                        a.shape[0], a.shape[1], hk, float(max_mb), path.encode(),
                                        e, len(e))
            if rc:
                raise AttnlabError(e.value.decode(errors="replace"))
            cache, _ = read_safetensors(path)
        finally:
            os.unlink(path)
        return logits, cache


def analysis(name, **options):
    """Run the registered analysis `name` (scores, ablate, patch, paths, attribute,
    discover, ...) exactly as `attnlab NAME --json` would; options are its flags
    (model="DIR", db="r.db", probe_r=20; True for a flag without a value).
    Returns the JSON document as a dict; raises AttnlabError with the CLI's
    message on failure."""
    argv = []
    for k, v in options.items():
        if v is None or v is False:
            continue
        argv.append("--" + k.replace("_", "-"))
        if v is not True:
            argv.append(str(v))
    arr = (ctypes.c_char_p * max(1, len(argv)))(*[s.encode() for s in argv])
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        e = _err()
        rc = library().al_api_run(name.encode(), len(argv), arr, path.encode(), e, len(e))
        with open(path) as f:
            text = f.read()
    finally:
        os.unlink(path)
    if rc != 0:
        raise AttnlabError(e.value.decode(errors="replace") or "analysis %s failed (%d)" % (name, rc))
    return json.loads(text)


def read_safetensors(path):
    """({name: NumPy array}, {metadata}) of a safetensors file (model weights, a
    --save-cache file, an SAE): a plain reader, no library needed."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, d in header.items():
        dt = _DTYPES.get(d["dtype"])
        if dt is None:
            raise ValueError("%s: dtype %s is not read here" % (name, d["dtype"]))
        b0, b1 = d["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b0:8 + n + b1], dtype=dt).reshape(d["shape"]).copy()
    return out, meta


def read_cache(path):
    """A `run --save-cache` file: ({hook name: array}, metadata)."""
    cache, meta = read_safetensors(path)
    if meta.get("format") != "attnlab-cache":
        raise ValueError("%s is not an attnlab activation cache" % path)
    return cache, meta


def open_results(db):
    """The results database, read-only, rows as sqlite3.Row."""
    con = sqlite3.connect("file:%s?mode=ro" % os.path.abspath(db), uri=True)
    con.row_factory = sqlite3.Row
    return con
