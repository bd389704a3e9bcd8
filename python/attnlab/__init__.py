"""attnlab from Python: the C library's model, tokenizer, forward pass with
TransformerLens-style hooks, activation cache, activation gradients and
analyses through ctypes (no second engine), plus plain readers of the
files attnlab writes.

    import attnlab
    m = attnlab.Model("runs/demo/2l")
    ids = m.to_tokens("once upon a time")                       # (1, T)
    logits, cache = m.run_with_cache(ids)
    cache["pattern", 1].shape                                   # (1, H, T, T)
    def ablate(pattern, hook):
        pattern[:, 3] = 0                                       # head 1.3
    loss = m.run_with_hooks(ids, return_type="loss",
                            fwd_hooks=[("blocks.1.attn.hook_pattern", ablate)])
    doc = attnlab.analysis("scores", model="runs/demo/2l", db="r.db", probe_r=20)

Needs NumPy and libattnlab.so: installed beside this file by
`pip install ./python`, or build/libattnlab.so of the checkout (`make
python`); ATTNLAB_LIB names another copy. docs/python.md has the rest.
"""
import ctypes
import json
import math
import os
import sqlite3
import struct
import tempfile
import threading
import types
import urllib.parse
import warnings

import numpy as np

__version__ = "0.1.0"
__all__ = ["Model", "HookPoint", "ActivationCache", "AttnlabError", "AttnlabValueError",
           "AttnlabWarning", "analysis",
           "get_act_name", "read_safetensors", "read_cache", "open_results", "library"]

_DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U16": "<u2", "BF16": None}
_lib = None
_HOOK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                            ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                            ctypes.POINTER(ctypes.c_int64))
_I64P = ctypes.POINTER(ctypes.c_int64)
_INT64 = (-2 ** 63, 2 ** 63 - 1)
# docs/hooks.md's order of the points (model-level ones before and after
# the blocks); the cache and hook_names() list them by layer in this order
_ORDER = ["hook_embed", "hook_pos_embed", "hook_resid_pre", "hook_q_input", "hook_k_input",
          "hook_v_input", "ln1.hook_scale", "ln1.hook_normalized", "attn.hook_q", "attn.hook_k",
          "attn.hook_v", "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z",
          "attn.hook_result", "hook_attn_out", "hook_resid_post", "ln_final.hook_scale",
          "ln_final.hook_normalized", "logits"]
# the C library's message (api.c: enter) for a second call into a model
_BUSY = ("the model is busy: one call at a time per model (a hook, or another thread, is "
         "inside a forward of it)")
_CLOSED = "the model is closed"
_RETURN_TYPES = ("logits", "loss", "both", None)
# one analysis at a time in the process: the driver's threads, precision and
# stop flag are the process's (the C library refuses a second one too)
_RUN_LOCK = threading.Lock()


class AttnlabError(RuntimeError):
    """What the C library said went wrong, one line."""


class AttnlabWarning(UserWarning):
    """A warning an analysis raised (the gap check, unseen probe ids, ...):
    the line the CLI prints as "attnlab: warning: ...", also in the run's
    JSON document and stored with the run."""


class AttnlabValueError(AttnlabError, ValueError):
    """A value the C library refuses, with its message (the one the CLI
    prints): an id, position or limit out of range, an unknown hook or
    analysis name (with the nearest one), options an analysis refuses;
    also any call on a closed model. Both an AttnlabError and a ValueError."""


def _find_library():
    env = os.environ.get("ATTNLAB_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for p in (os.path.join(here, "libattnlab.so"),  # installed with the package
              os.path.join(here, "..", "..", "build", "libattnlab.so")):  # the checkout's
        if os.path.exists(p):
            return os.path.abspath(p)
    raise AttnlabError("libattnlab.so not found beside the package nor in the checkout's build/: "
                       "run `make python` in the checkout, or set ATTNLAB_LIB")


def library():
    """The loaded libattnlab (ctypes.CDLL), loaded once."""
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(_find_library())
    c, sz, P, i = ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
    i64 = ctypes.c_int64
    ip = ctypes.POINTER(ctypes.c_int)
    fp = ctypes.POINTER(ctypes.c_float)
    i64p = _I64P
    dp = ctypes.POINTER(ctypes.c_double)
    lib.al_api_version.restype = c
    lib.al_api_load.restype = P
    lib.al_api_load.argtypes = [c, c, sz]
    lib.al_api_free.argtypes = [P]
    lib.al_api_config.argtypes = [P, ip]
    lib.al_api_encode.restype = ctypes.c_long
    lib.al_api_encode.argtypes = [P, c, sz, i, ip, sz, c, sz]
    lib.al_api_decode.restype = ctypes.c_long
    lib.al_api_decode.argtypes = [P, ip, sz, c, sz, c, sz]
    lib.al_api_forward.argtypes = [P, ip, i, i, fp, fp, c, sz]
    lib.al_api_cache.argtypes = [P, ip, i, i, c, ctypes.c_double, c, c, sz]
    lib.al_api_analysis.argtypes = [c, c, ctypes.POINTER(ctypes.c_void_p), c, sz]
    lib.al_api_string_free.argtypes = [ctypes.c_void_p]
    lib.al_api_hook_point.argtypes = [P, i, i, i, i, c, sz, ip, i64p]
    lib.al_api_hook_parse.argtypes = [P, c, ip, ip, c, sz]
    lib.al_api_run_hooks.argtypes = [P, ip, i, i, i, i, ip, ip, _HOOK_FN, P, fp, fp, dp, c, sz]
    lib.al_api_grads.argtypes = [P, i, i, ip, fp, i, ip, ip, ctypes.POINTER(fp), dp, c, sz]
    lib.al_api_check_ids.argtypes = [P, i64p, i64, i64, i, c, sz]
    lib.al_api_check_logprob.argtypes = [P, i64, i64p, i64, i64, c, sz]
    lib.al_api_check_cache.argtypes = [c, ctypes.c_double, c, sz]
    lib.al_api_nearest.argtypes = [c, i, ctypes.POINTER(c)]
    _lib = lib
    return lib


def _err():
    return ctypes.create_string_buffer(1024)


def _msg(e, fallback="the call failed"):
    return e.value.decode(errors="replace") or fallback


def _raise(e, fallback="the call failed"):
    raise AttnlabError(_msg(e, fallback))


def _iptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int))


def _fptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


# ------------------------------------------------------------ argument checks
# Types are Python's to check (the C library sees none): wrong ones raise
# TypeError. Values go to the C library's own checks (api.h), so they are
# refused with its messages, the CLI's, before anything is narrowed to C's
# int: 2**32 + 1 must not become token 1.

def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _int(v, what):
    if not _is_int(v):
        raise TypeError("%s must be an integer, not %s" % (what, type(v).__name__))
    return int(v)


def _bool(v, what):
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError("%s must be True or False, not %s" % (what, type(v).__name__))
    return bool(v)


def _cbytes(v, what):
    """A str or path as the bytes a C call takes (no NUL inside)."""
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if not isinstance(v, (str, bytes)):
        raise TypeError("%s must be a str, not %s" % (what, type(v).__name__))
    b = os.fsencode(v)
    if b"\0" in b:
        raise ValueError("%s: embedded null byte" % what)
    return b


def _nearest(word, cands):
    """The candidate the C library's did-you-mean picks for word, or None."""
    cands = [c for c in cands if c]
    arr = (ctypes.c_char_p * max(1, len(cands)))(*[c.encode() for c in cands])
    i = library().al_api_nearest(os.fsencode(word).split(b"\0")[0], len(cands), arr)
    return cands[i] if i >= 0 else None


def _did_you_mean(word, cands):
    near = _nearest(word, cands) if isinstance(word, str) else None
    return " (did you mean %r?)" % near if near else ""


def _as_int64(x, what):
    """x (an integer, or a list or array of them, any depth) as an int64
    array, and {flat index: value as given} for values beyond int64 (which
    the array holds clamped: still out of every range, for the C checks)."""
    if isinstance(x, (str, bytes, bytearray)):
        raise TypeError("%s must be integers, not text (encode it with Model.encode or "
                        "Model.to_tokens)" % what)
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as ex:
        raise ValueError("%s must be a rectangular array of integers (%s)" % (what, ex)) from None
    if a.size == 0:
        return np.zeros(a.shape, np.int64), {}
    if a.dtype.kind in "iu" and a.dtype != np.uint64:
        return a.astype(np.int64), {}
    if a.dtype.kind != "O" and a.dtype != np.uint64:
        raise TypeError("%s must be integers, not %s" % (what, "str" if a.dtype.kind in "SU"
                                                         else a.dtype))
    vals = a.ravel().tolist()
    for v in vals:
        if not _is_int(v):
            raise TypeError("%s must be integers, not %s" % (what, type(v).__name__))
    big = {i: v for i, v in enumerate(vals) if not _INT64[0] <= v <= _INT64[1]}
    clamped = [min(max(v, _INT64[0]), _INT64[1]) for v in vals]
    return np.array(clamped, np.int64).reshape(a.shape), big


def _unclamp(msg, flat, big, V):
    """The C library's message about the first id out of 0..V-1, with
    that id as given when it did not fit int64."""
    bad = np.flatnonzero((flat < 0) | (flat >= V))
    if len(bad) and int(bad[0]) in big:
        msg = msg.replace(str(int(flat[bad[0]])), str(big[int(bad[0])]), 1)
    return msg


def _return_type(rt):
    if rt is not None and not isinstance(rt, str):
        raise TypeError("return_type is 'logits', 'loss', 'both' or None, not %s"
                        % type(rt).__name__)
    if rt not in _RETURN_TYPES:
        raise ValueError("return_type is 'logits', 'loss', 'both' or None, not %r%s"
                         % (rt, _did_you_mean(rt, _RETURN_TYPES[:3])))


def _mb(max_mb, hooks=None):
    """max_mb (and the old keyword's kinds) through the C library's check."""
    if not (isinstance(max_mb, (int, float, np.integer, np.floating))
            and not isinstance(max_mb, (bool, np.bool_))):
        raise TypeError("max_mb must be a number, not %s" % type(max_mb).__name__)
    try:
        mb = float(max_mb)
    except OverflowError:
        mb = float("inf")
    e = _err()
    if library().al_api_check_cache(hooks, mb, e, len(e)):
        raise AttnlabValueError(_msg(e))
    return mb


# get_act_name's kinds: a block's points, and the model-level ones
_BLOCK_KINDS = ["resid_pre", "q_input", "k_input", "v_input", "scale", "normalized", "q", "k", "v",
                "attn_scores", "pattern", "z", "result", "attn_out", "resid_post"]
_MODEL_KINDS = ["embed", "pos_embed", "scale", "normalized", "logits"]


def get_act_name(kind, layer=None):
    """TransformerLens's utils.get_act_name for the points attnlab names:
    ("pattern", 1) -> "blocks.1.attn.hook_pattern", ("resid_pre", 0) ->
    "blocks.0.hook_resid_pre", ("embed",) -> "hook_embed". A kind that is
    no point (with a layer: a block's; without: a model-level one) raises
    ValueError, with the nearest kind."""
    if not isinstance(kind, str):
        raise TypeError("the kind must be a str, not %s" % type(kind).__name__)
    attn = {"q", "k", "v", "pattern", "z", "result", "attn_scores"}
    if layer is None:
        if kind not in _MODEL_KINDS:
            raise ValueError("no model-level hook point is of kind %r%s (with a layer: one of a "
                             "block's)" % (kind, _did_you_mean(kind, _MODEL_KINDS + _BLOCK_KINDS)))
        return {"scale": "ln_final.hook_scale", "normalized": "ln_final.hook_normalized",
                "logits": "logits"}.get(kind, "hook_" + kind)
    layer = _int(layer, "the layer")
    if layer < 0:
        raise ValueError("the layer must be >= 0, not %d" % layer)
    if kind not in _BLOCK_KINDS:
        raise ValueError("no hook point of a block is of kind %r%s (model-level ones take no "
                         "layer)" % (kind, _did_you_mean(kind, _BLOCK_KINDS)))
    if kind in ("scale", "normalized"):
        return "blocks.%d.ln1.hook_%s" % (layer, kind)
    return "blocks.%d.%shook_%s" % (layer, "attn." if kind in attn else "", kind)


class HookPoint:
    """What a hook function gets as its second argument, as TransformerLens's
    HookPoint: .name (the full hook name) and .layer()."""

    __slots__ = ("name", "point", "_layer")

    def __init__(self, name, point, layer):
        if not isinstance(name, str):
            raise TypeError("a hook point's name is a str, not %s" % type(name).__name__)
        self.name, self.point, self._layer = name, _int(point, "point"), _int(layer, "layer")

    def layer(self):
        """The block's index (blocks.L....); model-level points have none."""
        if not (isinstance(self.name, str) and self.name.startswith("blocks.")):
            raise ValueError("%s is not in a block" % (self.name,))
        return self._layer

    def __repr__(self):
        return "HookPoint(%r)" % self.name


class ActivationCache(dict):
    """A dict from full hook names to arrays that also takes TransformerLens's
    short keys: cache["pattern", 1] is cache["blocks.1.attn.hook_pattern"]."""

    def __getitem__(self, key):
        if isinstance(key, tuple):
            key = get_act_name(*key)
        return dict.__getitem__(self, key)

    def __contains__(self, key):
        if isinstance(key, tuple):
            key = get_act_name(*key)
        return dict.__contains__(self, key)

    def get(self, key, default=None):
        return self[key] if key in self else default


class _Use:
    """One call's hold on a model: its handle stays valid (close() is
    refused) until the call returns. forward=True: also the model's one
    forward at a time; a second (from a hook, or another thread) is refused
    at once, not queued. Tokenizer and name lookups may run beside it (a
    hook may call m.to_str_tokens)."""

    def __init__(self, model, forward=False):
        self.m, self.forward = model, forward

    def __enter__(self):
        m = self.m
        mu = m.__dict__.get("_mu")
        if mu is None:  # never opened (Model.__new__, or an __init__ that raised)
            raise AttnlabValueError(_CLOSED)
        with mu:
            if m._h is None:
                raise AttnlabValueError(_CLOSED)
            if self.forward:
                if m._fwd:
                    raise AttnlabError(_BUSY)
                m._fwd = True
            m._active += 1
            return m._h

    def __exit__(self, *exc):
        with self.m._mu:
            self.m._active -= 1
            if self.forward:
                self.m._fwd = False


class Model:
    """A model directory (weights, config, tokenizer) held by the C library.
    One forward at a time per model; close() (or a with block) frees it,
    after which every call raises AttnlabValueError("the model is closed").
    A Model cannot be copied or pickled (it owns C memory): open the
    directory again."""

    _h = None  # the C handle; None before __init__ and after close()
    _points = None
    _weights = None
    config = None
    path = None

    def __init__(self, path):
        if self.__dict__.get("_mu") is not None:
            raise AttnlabError("Model.__init__ runs once per object (%s): open another Model"
                               % self.path)
        b = _cbytes(path, "the model directory")
        e = _err()
        h = library().al_api_load(b, e, len(e))
        if not h:
            _raise(e)
        try:
            cfg = (ctypes.c_int * 9)()
            library().al_api_config(h, cfg)
            keys = ["n_layers", "d_model", "n_heads", "d_head", "n_ctx", "d_vocab", "pos_type",
                    "tied_embeddings", "eot_id"]
            # the sizes the calls allocate by: a private copy, whatever
            # becomes of the public dict
            self._cfg = types.MappingProxyType(dict(zip(keys, list(cfg))))
            self._dir = os.fsdecode(b)
            with open(os.path.join(self._dir, "config.json")) as f:  # checked by the loader
                j = json.load(f)
        except BaseException:
            library().al_api_free(h)
            raise
        self.path = self._dir
        self.config = dict(self._cfg)
        self.config["positional_embedding_type"] = "shortformer" if cfg[6] == 1 else "standard"
        self.config["normalization_type"] = j.get("normalization_type")
        self.config["eps"] = j.get("eps", 1e-5)
        self.config["biases"] = list(j.get("biases", []))
        self._active, self._fwd = 0, False
        self._tok = threading.Lock()  # one tokenizer call at a time
        self._h = h
        self._mu = threading.Lock()  # guards _h, _active, _fwd

    # ---------------------------------------------------------- lifetime

    def close(self):
        """Free the model (the C library's memory). Later calls raise
        AttnlabValueError; closing again does nothing. Refused (busy) while
        a call of this model runs."""
        mu = self.__dict__.get("_mu")
        if mu is None:
            return
        with mu:
            if self._h is None:
                return
            if self._active:
                raise AttnlabError(_BUSY)
            h, self._h = self._h, None
        library().al_api_free(h)

    def __enter__(self):
        self._handle()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        h = self.__dict__.get("_h")
        if h and _lib is not None:
            self._h = None
            _lib.al_api_free(h)

    def __reduce_ex__(self, protocol):
        raise TypeError("a Model holds the C library's memory and cannot be copied or pickled: "
                        "open the directory again (attnlab.Model(path))")

    def __repr__(self):
        return "Model(%r%s)" % (self.path, "" if self._h else ", closed")

    def _handle(self):
        if self._h is None:
            raise AttnlabValueError(_CLOSED)
        return self._h

    # ---------------------------------------------------------- tokens

    def encode(self, text, bos=False, allow_special=False):
        """Token ids of text (str: UTF-8; bytes: as they are), as `attnlab`
        encodes it; bos puts <|endoftext|> first."""
        with _Use(self) as h:
            if not isinstance(text, (str, bytes, bytearray)):
                raise TypeError("encode takes str or bytes, not %s" % type(text).__name__)
            bos = _bool(bos, "bos")
            allow_special = _bool(allow_special, "allow_special")
            b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
            if bos and self._cfg["eot_id"] < 0:
                raise AttnlabError("the tokenizer has no <|endoftext|> to put first")
            out = (ctypes.c_int * max(1, len(b)))()
            e = _err()
            with self._tok:
                n = library().al_api_encode(h, b, len(b), int(allow_special), out, len(b), e,
                                            len(e))
            if n < 0:
                _raise(e)
        ids = np.array(out[:n], dtype=np.int32)
        if bos:
            ids = np.concatenate([[self._cfg["eot_id"]], ids]).astype(np.int32)
        return ids

    def decode(self, ids):
        """The bytes of ids (any shape, read in order; empty: b"")."""
        with _Use(self) as h:
            return self._decode(h, self._ids(h, ids, forward=False).ravel())

    def _decode(self, h, a):
        if a.size == 0:
            return b""
        cap = 64 + 32 * len(a)
        while True:
            buf = ctypes.create_string_buffer(cap)
            e = _err()
            with self._tok:
                n = library().al_api_decode(h, _iptr(a), len(a), buf, cap, e, len(e))
            if n < 0:
                _raise(e)
            if n <= cap:
                return buf.raw[:n]
            cap = n

    def to_tokens(self, text, prepend_bos=True):
        """TransformerLens's to_tokens: (1, T) ids of text, <|endoftext|> first."""
        self._handle()  # closed before anything else, as every call
        return self.encode(text, bos=_bool(prepend_bos, "prepend_bos"))[None, :]

    def to_string(self, ids):
        """The text of ids (invalid UTF-8 replaced)."""
        return self.decode(ids).decode("utf-8", errors="replace")

    def to_str_tokens(self, ids):
        """Each token's own text, as a list."""
        with _Use(self) as h:
            a = self._ids(h, ids, forward=False).ravel()
            return [self._decode(h, a[i:i + 1]).decode("utf-8", errors="replace")
                    for i in range(len(a))]

    def _ids(self, h, ids, forward=True):
        """ids as a (B, T) int32 array, after the C library's checks (the
        forward's with forward=True: not empty, T <= n_ctx; every id in
        the vocabulary) with its messages."""
        a, big = _as_int64(ids, "token ids")
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2:
            raise ValueError("token ids must be (T,) or (B, T), not shape %s" % (a.shape,))
        a = np.ascontiguousarray(a)
        e = _err()
        if library().al_api_check_ids(h, a.ctypes.data_as(_I64P), a.shape[0], a.shape[1],
                                      int(forward), e, len(e)):
            raise AttnlabValueError(_unclamp(_msg(e), a.ravel(), big, self._cfg["d_vocab"]))
        return a.astype(np.int32)

    # ---------------------------------------------------------- hook names

    def _point_table(self, h):
        """[(name, point, layer, model_level, optional)] of every point the
        forward runs, in the order of docs/hooks.md's table."""
        if self._points is None:
            lib = library()
            name = ctypes.create_string_buffer(128)
            info = (ctypes.c_int * 3)()
            shape = (ctypes.c_int64 * 4)()
            rows, p = [], 0
            while lib.al_api_hook_point(h, p, 0, 1, 1, name, len(name), info, shape) >= 0:
                if info[0]:
                    for L in range(1 if info[1] else self._cfg["n_layers"]):
                        lib.al_api_hook_point(h, p, L, 1, 1, name, len(name), info, shape)
                        rows.append((name.value.decode(), p, L, bool(info[1]), bool(info[2])))
                p += 1

            def rank(r):
                name, point, layer, model_level = r[:4]
                tail = name if model_level else name.split(".", 2)[2]
                k = _ORDER.index(tail) if tail in _ORDER else len(_ORDER) + point
                group = 1 if not model_level else 0 if k < _ORDER.index("hook_resid_pre") else 2
                return (group, layer, k)

            self._points = sorted(rows, key=rank)
        return self._points

    def hook_names(self, all=False):
        """Full names of the points the forward runs (TransformerLens's
        hook_dict keys). The ones that exist only when hooked (hook_result,
        hook_q/k/v_input) are included with all=True."""
        with _Use(self) as h:
            all = _bool(all, "all")
            return [r[0] for r in self._point_table(h) if all or not r[4]]

    def _select(self, h, names):
        """[(name, point, layer)] that names picks: a full name, an old short
        kind ("pattern": every layer), a list of them, or a predicate over
        full names (never picking the only-when-hooked points: name those)."""
        table = self._point_table(h)
        if names is None:
            return [(n, p, L) for n, p, L, _, opt in table if not opt]
        if isinstance(names, str):
            names = [names]
        elif callable(names):
            return [(n, p, L) for n, p, L, _, opt in table if not opt and names(n)]
        elif not isinstance(names, (list, tuple)):
            raise TypeError("hook names are a name, a list of names or a predicate over names, "
                            "not %s" % type(names).__name__)
        out = []
        for want in names:
            if not isinstance(want, str):
                raise TypeError("hook names are strings, not %s" % type(want).__name__)
            wb = _cbytes(want, "the hook name %r" % want)
            hit = [(n, p, L) for n, p, L, _, _ in table if n == want]
            if not hit and "." not in want:  # an old short kind: every layer
                hit = [(n, p, L) for n, p, L, _, _ in table
                       if n.rsplit(".", 1)[-1] == "hook_" + want]
            if not hit:
                pt, ly, e = ctypes.c_int(), ctypes.c_int(), _err()
                if library().al_api_hook_parse(h, wb, ctypes.byref(pt), ctypes.byref(ly), e,
                                               len(e)) == 0:
                    raise AttnlabValueError("hook point %s is not run by this engine's forward"
                                            % want)
                if "." not in want:
                    kinds = sorted({n.rsplit(".", 1)[-1][5:] for n, *_ in table
                                    if n.rsplit(".", 1)[-1].startswith("hook_")} |
                                   {n for n, *_ in table if "." not in n})
                    near = _nearest(want, kinds)
                    raise AttnlabValueError(
                        "no hook point the forward runs is called %r or ends in hook_%s (%s)"
                        % (want, want, "did you mean %r?" % near if near else
                           "Model.hook_names() lists them"))
                raise AttnlabValueError(_msg(e))
            out += hit
        return out

    # ---------------------------------------------------------- forward

    def forward(self, ids):
        """(logits, probs), each (B, T, d_vocab) float32, for ids (T,) or (B, T)."""
        with _Use(self, forward=True) as h:
            a = self._ids(h, ids)
            B, T = a.shape
            V = self._cfg["d_vocab"]
            logits = np.empty((B, T, V), np.float32)
            probs = np.empty((B, T, V), np.float32)
            e = _err()
            if library().al_api_forward(h, _iptr(a), B, T, _fptr(logits), _fptr(probs), e, len(e)):
                _raise(e)
        return logits, probs

    def _run(self, h, a, hooks, loss, want_logits):
        """One forward of a (B, T) with hooks [(point, layer, fn, HookPoint,
        raw)] (the caller holds the model): (logits or None, mean loss,
        per-token losses (B, T)). A hook's exception is re-raised as it was.
        A hook gets its own copy of the activation, written back after it
        returns: it may keep it, and no array of the engine's memory
        outlives the call. raw=True (the package's own reading hooks, which
        keep nothing) gets the engine's buffer itself."""
        B, T = a.shape
        V = self._cfg["d_vocab"]
        logits = np.empty((B, T, V), np.float32) if want_logits else None
        losses = np.empty((B, T), np.float32)
        mean = ctypes.c_double(float("nan"))
        raised = []

        def call(user, slot, data, nd, shape, strides):
            mem = base = view = None
            try:
                _, _, fn, hp, raw = hooks[slot]
                shp = tuple(shape[k] for k in range(nd))
                st = tuple(strides[k] for k in range(nd))
                span = 1 + sum((s - 1) * d for s, d in zip(shp, st))
                mem = (ctypes.c_float * span).from_address(data)
                base = np.frombuffer(mem, np.float32)
                view = np.lib.stride_tricks.as_strided(base, shp, tuple(4 * d for d in st))
                if raw:
                    fn(view, hp)
                    return 0
                act = view.copy()
                r = fn(act, hp)
                if r is not None and r is not act:
                    r = np.asarray(r)
                    if r.shape != act.shape:
                        raise ValueError("the hook at %s returned shape %s; the activation is %s"
                                         % (hp.name, r.shape, act.shape))
                    np.copyto(act, r, casting="same_kind")
                if act.shape != shp:
                    raise ValueError("the hook at %s reshaped its activation in place to %s; it "
                                     "is %s" % (hp.name, act.shape, shp))
                np.copyto(view, act)
                return 0
            except BaseException as ex:  # noqa: B036 -- re-raised below, KeyboardInterrupt too
                raised.append(ex)
                return 1
            finally:  # nothing of the engine's memory stays reachable (a traceback's frame)
                mem = base = view = None

        cb = _HOOK_FN(call)
        n = len(hooks)
        pts = np.array([x[0] for x in hooks] or [0], np.int32)
        lys = np.array([x[1] for x in hooks] or [0], np.int32)
        e = _err()
        rc = library().al_api_run_hooks(h, _iptr(a), B, T, int(loss), n, _iptr(pts), _iptr(lys),
                                        cb, None, _fptr(logits) if want_logits else None,
                                        _fptr(losses), ctypes.byref(mean), e, len(e))
        if raised:
            raise raised[0]
        if rc:
            _raise(e)
        return logits, mean.value, losses

    def _hooks(self, h, fwd_hooks):
        if not isinstance(fwd_hooks, (list, tuple)):
            raise TypeError("fwd_hooks is a list of (name or predicate, function) pairs, not %s"
                            % type(fwd_hooks).__name__)
        out = []
        for item in fwd_hooks:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise TypeError("fwd_hooks holds (name or predicate, function) pairs, not %s"
                                % type(item).__name__)
            name, fn = item
            if not callable(fn):
                raise TypeError("fwd_hooks holds (name or predicate, function) pairs: the "
                                "function for %r is a %s, not callable"
                                % (name, type(fn).__name__))
            for n, p, L in self._select(h, name):
                out.append((p, L, fn, HookPoint(n, p, L), False))
        return out

    @staticmethod
    def _returns(return_type, logits, loss, losses, loss_per_token):
        if loss_per_token:
            loss = losses[:, :-1]
        if return_type == "logits":
            return logits
        if return_type == "loss":
            return loss
        if return_type == "both":
            return logits, loss
        return None

    def run_with_hooks(self, ids, fwd_hooks=(), return_type="logits", loss_per_token=False):
        """A forward of ids (T,) or (B, T) with hooks, TransformerLens's
        run_with_hooks: fwd_hooks is a list of (name, fn), name a full hook
        name ("blocks.1.attn.hook_pattern"; docs/hooks.md), an old short kind
        ("pattern": every layer) or a predicate `lambda name: ...` over full
        names. fn(act, hook) gets the activation as a writable NumPy array in
        TransformerLens's shape -- its own copy, which it may keep -- and
        hook.name, hook.layer(). It may write act in place or return an array
        of its shape; either is written back into the forward. At one point,
        hooks run in the order given; no cap on their number. An exception
        in fn stops the forward and is raised here as it was. return_type:
        "logits" (B, T, d_vocab), "loss" (the mean next-token loss; per token
        (B, T - 1) with loss_per_token), "both" or None."""
        with _Use(self, forward=True) as h:
            _return_type(return_type)
            loss_per_token = _bool(loss_per_token, "loss_per_token")
            a = self._ids(h, ids)
            hooks = self._hooks(h, fwd_hooks)
            logits, loss, losses = self._run(h, a, hooks, return_type in ("loss", "both"),
                                             return_type in ("logits", "both"))
        return self._returns(return_type, logits, loss, losses, loss_per_token)

    def run_with_cache(self, ids, names_filter=None, return_type="logits", hooks=None,
                       max_mb=2000):
        """(output, cache): cache an ActivationCache (a dict by full hook name,
        also taking cache["pattern", 1]) of copies of the activations, in
        TransformerLens's shapes. names_filter: None (every point the forward
        runs but hook_result and hook_q/k/v_input, which exist only when
        named, as in TransformerLens without use_attn_result), a name, a list
        of names (full, or old short kinds: "pattern" is every layer's), or a
        predicate over full names. Refused above max_mb megabytes (a finite
        number > 0, as the CLI's --cache-max-mb). The old keyword
        hooks=["pattern", ...] writes and reads the cache file of `attnlab
        run --save-cache` instead (kinds embed, pos_embed, resid_pre, q, k,
        v, pattern, z, result, resid_post)."""
        with _Use(self, forward=True) as h:
            _return_type(return_type)
            if hooks is not None:
                if isinstance(hooks, str):
                    hooks = [hooks]
                if not isinstance(hooks, (list, tuple)):
                    raise TypeError("hooks is a list of hook kinds, not %s" % type(hooks).__name__)
                for k in hooks:
                    if not isinstance(k, str):
                        raise TypeError("hook kinds are strings, not %s" % type(k).__name__)
                kinds = _cbytes(",".join(hooks), "hooks")
                max_mb = _mb(max_mb, kinds)
                return self._cache_file(h, ids, kinds, max_mb, return_type)
            max_mb = _mb(max_mb)
            a = self._ids(h, ids)
            B, T = a.shape
            cache = ActivationCache()

            def keep(act, hook):
                cache[hook.name] = act.copy()

            sel = self._select(h, names_filter)
            shape = (ctypes.c_int64 * 4)()
            info = (ctypes.c_int * 3)()
            nm = ctypes.create_string_buffer(128)
            total = 0
            for _, p, L in sel:
                nd = library().al_api_hook_point(h, p, L, B, T, nm, len(nm), info, shape)
                total += 4 * int(np.prod([shape[k] for k in range(nd)]))
            if total > max_mb * 1e6:
                raise AttnlabError("the cache would take %.1f MB, above the limit of %.1f MB: "
                                   "fewer tokens or hooks, or raise max_mb" % (total / 1e6, max_mb))
            hk = [(p, L, keep, HookPoint(n, p, L), True) for n, p, L in sel]
            logits, loss, losses = self._run(h, a, hk, return_type in ("loss", "both"),
                                             return_type in ("logits", "both"))
        return self._returns(return_type, logits, loss, losses, False), cache

    def _cache_file(self, h, ids, kinds, max_mb, return_type):
        a = self._ids(h, ids)
        B, T = a.shape
        logits, loss, _ = self._run(h, a, [], return_type in ("loss", "both"),
                                    return_type in ("logits", "both"))
        fd, path = tempfile.mkstemp(suffix=".safetensors")
        os.close(fd)
        try:
            e = _err()
            if library().al_api_cache(h, _iptr(a), B, T, kinds, max_mb, os.fsencode(path), e,
                                      len(e)):
                _raise(e)
            cache, _ = read_safetensors(path)
        finally:
            os.unlink(path)
        return self._returns(return_type, logits, loss, None, False), ActivationCache(cache)

    # ---------------------------------------------------------- gradients

    def _metric(self, h, metric, B, T):
        """(code, pos, target int32 or None, dlogits float32 or None) of a
        backward_at metric, its values through the C library's checks."""
        V = self._cfg["d_vocab"]
        form = "metric is 'loss', ('logprob', pos, token) or a (B, T, d_vocab) array"
        if isinstance(metric, str):
            if metric != "loss":
                raise ValueError("%s, not %r%s" % (form, metric,
                                                   _did_you_mean(metric, ["loss", "logprob"])))
            return 0, 0, None, None
        if isinstance(metric, (tuple, list)):
            if len(metric) != 3 or not (isinstance(metric[0], str) and metric[0] == "logprob"):
                raise ValueError("%s, not a %s %r" % (form, type(metric).__name__,
                                                      tuple(metric)[:3]))
            pos = _int(metric[1], "the log-prob metric's position")
            if -T <= pos < 0:
                pos += T
            pos = min(max(pos, _INT64[0]), _INT64[1])
            t, big = _as_int64(metric[2], "the log-prob metric's target")
            if t.ndim == 0:
                t, big = np.full(B, t, np.int64), {b: big[0] for b in range(B)} if big else {}
            elif t.shape != (B,):
                raise ValueError("the log-prob metric's target is one id or one per sequence "
                                 "(%d), not shape %s" % (B, t.shape))
            t = np.ascontiguousarray(t)
            e = _err()
            if library().al_api_check_logprob(h, pos, t.ctypes.data_as(_I64P), B, T, e, len(e)):
                msg = _msg(e)
                if "position" not in msg:
                    msg = _unclamp(msg, t, big, V)
                elif metric[1] != pos:  # the position as given
                    msg = msg.replace(" %d " % pos, " %d " % metric[1], 1)
                raise AttnlabValueError(msg)
            return 1, pos, t.astype(np.int32), None
        if isinstance(metric, np.ndarray) or (hasattr(metric, "__array__")
                                              and not isinstance(metric, (dict, set))):
            dl = np.asarray(metric)
            if dl.dtype.kind not in "fiu":
                raise TypeError("a dlogits metric must be real numbers, not %s" % dl.dtype)
            if dl.shape != (B, T, V):
                raise ValueError("a dlogits metric must be (B, T, d_vocab) = %s, not %s"
                                 % ((B, T, V), dl.shape))
            return 2, 0, None, np.ascontiguousarray(dl, np.float32)
        raise TypeError("%s, not %s" % (form, type(metric).__name__))

    def backward_at(self, ids, names, metric="loss", fwd_hooks=()):
        """(value, grads): the gradient of a metric of the forward of ids at
        hook points, grads a dict by full name in TransformerLens's shapes.
        names as run_with_cache's names_filter; the points with a gradient are
        resid_pre, resid_post, q, k, v, pattern, z and result. metric:
          "loss"                  the mean next-token loss (run_with_hooks's)
          ("logprob", pos, tok)   log p(tok | ids[:pos+1]), summed over the
                                  batch (tok an id, or one per sequence; pos
                                  may be negative, from the end)
          an array (B, T, d_vocab) d(metric)/d(logits): the gradient of the
                                  linear metric sum(array * logits), its value
        fwd_hooks run in the forward as in run_with_hooks, to read; a hook that
        writes an activation stops the gradient: the engine does not
        differentiate through an intervention, and the call raises."""
        with _Use(self, forward=True) as h:
            a = self._ids(h, ids)
            B, T = a.shape
            code, pos, target, dl = self._metric(h, metric, B, T)
            sel = self._select(h, names)
            hooks = self._hooks(h, fwd_hooks)
            self._run(h, a, hooks, code == 0, False)
            grads, outs = {}, []
            shape = (ctypes.c_int64 * 4)()
            info = (ctypes.c_int * 3)()
            nm = ctypes.create_string_buffer(128)
            for n, p, L in sel:
                nd = library().al_api_hook_point(h, p, L, B, T, nm, len(nm), info, shape)
                grads[n] = np.zeros(tuple(shape[k] for k in range(nd)), np.float32)
                outs.append(_fptr(grads[n]))
            pts = np.array([p for _, p, _ in sel] or [0], np.int32)
            lys = np.array([L for _, _, L in sel] or [0], np.int32)
            arr = (ctypes.POINTER(ctypes.c_float) * max(1, len(outs)))(*outs)
            value = ctypes.c_double()
            e = _err()
            if library().al_api_grads(h, code, pos, _iptr(target) if target is not None else None,
                                      _fptr(dl) if dl is not None else None, len(sel), _iptr(pts),
                                      _iptr(lys), arr, ctypes.byref(value), e, len(e)):
                _raise(e)
        return value.value, grads

    # ---------------------------------------------------------- weights

    def state_dict(self):
        """The weights under TransformerLens's names (model.safetensors)."""
        with _Use(self):
            if self._weights is None:
                self._weights, _ = read_safetensors(os.path.join(self._dir, "model.safetensors"))
            return self._weights

    def _stack(self, name):
        w = self.state_dict()
        return np.stack([w["blocks.%d.attn.%s" % (L, name)] for L in range(self._cfg["n_layers"])])

    W_E = property(lambda self: self.state_dict()["embed.W_E"], doc="(d_vocab, d_model)")
    W_pos = property(lambda self: self.state_dict()["pos_embed.W_pos"], doc="(n_ctx, d_model)")
    W_Q = property(lambda self: self._stack("W_Q"), doc="(n_layers, n_heads, d_model, d_head)")
    W_K = property(lambda self: self._stack("W_K"), doc="(n_layers, n_heads, d_model, d_head)")
    W_V = property(lambda self: self._stack("W_V"), doc="(n_layers, n_heads, d_model, d_head)")
    W_O = property(lambda self: self._stack("W_O"), doc="(n_layers, n_heads, d_head, d_model)")

    @property
    def W_U(self):
        """(d_model, d_vocab); W_E transposed when the embeddings are tied."""
        w = self.state_dict()
        return w["unembed.W_U"] if "unembed.W_U" in w else w["embed.W_E"].T


def analysis(name, **options):
    """Run the registered analysis `name` (scores, ablate, patch, paths, attribute,
    discover, ...) in this process, through the driver `attnlab NAME --json` uses;
    options are its flags (model="DIR", db="r.db", probe_r=20; True for a flag
    without a value, False or None to leave it out; values are str, paths, ints or
    floats; strict=True and progress=True are the driver's --strict and
    --progress). Returns the run's JSON document as a dict; its "warnings" are
    also raised as AttnlabWarning. An unknown name (with the nearest one) or
    options the CLI refuses raise AttnlabValueError, a failed run AttnlabError,
    each with the CLI's message. Each call starts from the analysis's defaults.
    One analysis runs at a time in a process."""
    nb = _cbytes(name, "the analysis name")
    opts = {}
    for k, v in options.items():
        if v is None or v is False or (isinstance(v, np.bool_) and not v):
            continue
        if not isinstance(k, str) or not k:
            raise TypeError("option names are non-empty str")
        if v is True or isinstance(v, np.bool_):
            v = True
        elif _is_int(v):
            v = int(v)
            if abs(v) > 2**53:  # JSON numbers are doubles; a 64-bit seed goes as its digits
                v = str(v)
        elif isinstance(v, (float, np.floating)):
            v = float(v)
            if not math.isfinite(v):
                raise ValueError("option %s: %r is not a finite number" % (k, v))
        elif isinstance(v, (str, bytes, os.PathLike)):
            v = os.fsdecode(v)
            _cbytes(v, "option %s" % k)  # refuses an embedded NUL
        else:
            raise TypeError("option %s: a str, path, int, float or True/False/None, not %s"
                            % (k, type(v).__name__))
        opts[k] = v
    text = json.dumps(opts).encode()
    lib = library()
    e = _err()
    doc = ctypes.c_void_p()
    with _RUN_LOCK:
        rc = lib.al_api_analysis(nb, text, ctypes.byref(doc), e, len(e))
    if rc == 2:
        raise AttnlabValueError(_msg(e, "analysis %s: bad options" % name))
    if rc != 0:
        raise AttnlabError(_msg(e, "analysis %s failed (%d)" % (name, rc)))
    try:
        out = json.loads(ctypes.string_at(doc.value).decode())
    finally:
        lib.al_api_string_free(doc)
    for w in out.get("warnings", ()):
        warnings.warn(w, AttnlabWarning, stacklevel=2)
    return out


def read_safetensors(path):
    """({name: NumPy array}, {metadata}) of a safetensors file (model weights, a
    --save-cache file, an SAE): a plain reader, no library needed. A file
    that is not one raises ValueError naming what is wrong."""
    path = os.fspath(path)  # a path: open() would take an int as a descriptor, and close it
    with open(path, "rb") as f:
        data = f.read()

    def bad(why):
        return ValueError("%s is not a safetensors file this reads: %s" % (path, why))

    if len(data) < 8:
        raise bad("%d bytes, shorter than the header's length" % len(data))
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise bad("a header of %d bytes in a file of %d" % (n, len(data)))
    try:
        header = json.loads(data[8:8 + n])
    except (ValueError, UnicodeDecodeError) as ex:
        raise bad("the header is not JSON (%s)" % ex) from None
    if not isinstance(header, dict):
        raise bad("the header is not a JSON object")
    meta = header.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict):
        raise bad("__metadata__ is not a JSON object")
    out = {}
    size = len(data) - 8 - n
    for name, d in header.items():
        try:
            dt, shape, (b0, b1) = d["dtype"], list(d["shape"]), d["data_offsets"]
        except (TypeError, KeyError, ValueError) as ex:
            raise bad("tensor %s: no dtype, shape and data_offsets (%s)" % (name, ex)) from None
        if not isinstance(dt, str) or _DTYPES.get(dt) is None:
            raise ValueError("%s: dtype %r is not read here" % (name, dt))
        if not all(_is_int(x) and x >= 0 for x in shape + [b0, b1]) or not b0 <= b1 <= size:
            raise bad("tensor %s: shape %s, offsets %s..%s of %d bytes" % (name, shape, b0, b1,
                                                                           size))
        if int(np.prod(shape, dtype=object)) * np.dtype(_DTYPES[dt]).itemsize != b1 - b0:
            raise bad("tensor %s: shape %s of %s does not take %d bytes" % (name, shape, dt,
                                                                            b1 - b0))
        raw = data[8 + n + b0:8 + n + b1]
        out[name] = np.frombuffer(raw, dtype=_DTYPES[dt]).reshape(shape).copy()
    return out, meta


def read_cache(path):
    """A `run --save-cache` file: ({hook name: array}, metadata)."""
    cache, meta = read_safetensors(path)
    if meta.get("format") != "attnlab-cache":
        raise ValueError("%s is not an attnlab activation cache" % path)
    return cache, meta


def open_results(db):
    """The results database, read-only, rows as sqlite3.Row."""
    p = os.path.abspath(os.fsdecode(os.fspath(db)))
    if not os.path.isfile(p):
        raise FileNotFoundError("no results database at %s" % p)
    # as the C readers open it (store.c): a file at rest is in rollback-
    # journal mode and mode=ro makes no file beside it; a WAL-mode file
    # with no -wal has no connection open and is read immutable, so no
    # -shm appears either (a writer starting meanwhile is not seen)
    with open(p, "rb") as f:
        hdr = f.read(20)
    wal = len(hdr) == 20 and hdr[18] == 2 and hdr[19] == 2
    immutable = wal and not os.path.exists(p + "-wal")
    con = sqlite3.connect("file:%s?mode=ro%s" % (urllib.parse.quote(p),
                                                 "&immutable=1" if immutable else ""),
                          uri=True)
    con.row_factory = sqlite3.Row
    return con
