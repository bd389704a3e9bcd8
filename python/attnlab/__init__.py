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
import os
import sqlite3
import struct
import tempfile
import threading

import numpy as np

__version__ = "0.1.0"
__all__ = ["Model", "HookPoint", "ActivationCache", "AttnlabError", "analysis", "get_act_name",
           "read_safetensors", "read_cache", "open_results", "library"]

_DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U16": "<u2", "BF16": None}
_lib = None
_HOOK_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                            ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                            ctypes.POINTER(ctypes.c_int64))
_METRICS = {"loss": 0, "logprob": 1}
# docs/hooks.md's order of the points (model-level ones before and after
# the blocks); the cache and hook_names() list them by layer in this order
_ORDER = ["hook_embed", "hook_pos_embed", "hook_resid_pre", "hook_q_input", "hook_k_input",
          "hook_v_input", "ln1.hook_scale", "ln1.hook_normalized", "attn.hook_q", "attn.hook_k",
          "attn.hook_v", "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z",
          "attn.hook_result", "hook_attn_out", "hook_resid_post", "ln_final.hook_scale",
          "ln_final.hook_normalized", "logits"]
_BUSY = ("the model is busy: one call at a time per model (a hook, or another thread, is "
         "inside a forward of it)")


class AttnlabError(RuntimeError):
    """What the C library said went wrong, one line."""


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
    ip = ctypes.POINTER(ctypes.c_int)
    fp = ctypes.POINTER(ctypes.c_float)
    i64p = ctypes.POINTER(ctypes.c_int64)
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
    lib.al_api_run.argtypes = [c, i, ctypes.POINTER(c), c, c, sz]
    lib.al_api_hook_point.argtypes = [P, i, i, i, i, c, sz, ip, i64p]
    lib.al_api_hook_parse.argtypes = [P, c, ip, ip, c, sz]
    lib.al_api_run_hooks.argtypes = [P, ip, i, i, i, i, ip, ip, _HOOK_FN, P, fp, fp, dp, c, sz]
    lib.al_api_grads.argtypes = [P, i, i, ip, fp, i, ip, ip, ctypes.POINTER(fp), dp, c, sz]
    _lib = lib
    return lib


def _err():
    return ctypes.create_string_buffer(1024)


def _raise(e, fallback="the call failed"):
    raise AttnlabError(e.value.decode(errors="replace") or fallback)


def _iptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_int))


def _fptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def get_act_name(kind, layer=None):
    """TransformerLens's utils.get_act_name for the points attnlab names:
    ("pattern", 1) -> "blocks.1.attn.hook_pattern", ("resid_pre", 0) ->
    "blocks.0.hook_resid_pre", ("embed",) -> "hook_embed"."""
    attn = {"q", "k", "v", "pattern", "z", "result", "attn_scores"}
    if layer is None:
        return {"scale": "ln_final.hook_scale", "normalized": "ln_final.hook_normalized",
                "logits": "logits"}.get(kind, "hook_" + kind)
    if kind in ("scale", "normalized"):
        return "blocks.%d.ln1.hook_%s" % (layer, kind)
    return "blocks.%d.%shook_%s" % (layer, "attn." if kind in attn else "", kind)


class HookPoint:
    """What a hook function gets as its second argument, as TransformerLens's
    HookPoint: .name (the full hook name) and .layer()."""

    __slots__ = ("name", "point", "_layer")

    def __init__(self, name, point, layer):
        self.name, self.point, self._layer = name, point, layer

    def layer(self):
        """The block's index (blocks.L....); model-level points have none."""
        if not self.name.startswith("blocks."):
            raise ValueError("%s is not in a block" % self.name)
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


class _Busy:
    """The model's lock for one call; a second call (from a hook or another
    thread) is refused at once, not queued."""

    def __init__(self, model):
        self.m = model

    def __enter__(self):
        if self.m._h is None:
            raise AttnlabError("the model is closed")
        if not self.m._lock.acquire(blocking=False):
            raise AttnlabError(_BUSY)
        return self.m._h

    def __exit__(self, *exc):
        self.m._lock.release()


class Model:
    """A model directory (weights, config, tokenizer) held by the C library.
    One call at a time per model; close() (or a with block) frees it, after
    which every call raises AttnlabError."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._h = None
        self._lock = threading.Lock()
        self._points = None
        self._weights = None
        e = _err()
        h = library().al_api_load(self.path.encode(), e, len(e))
        if not h:
            _raise(e)
        self._h = h
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

    # ---------------------------------------------------------- lifetime

    def close(self):
        """Free the model (the C library's memory). Later calls raise."""
        if self._h is None:
            return
        if not self._lock.acquire(blocking=False):
            raise AttnlabError(_BUSY)
        try:
            library().al_api_free(self._h)
            self._h = None
        finally:
            self._lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) and _lib is not None:
            _lib.al_api_free(self._h)
            self._h = None

    def _handle(self):
        if self._h is None:
            raise AttnlabError("the model is closed")
        return self._h

    # ---------------------------------------------------------- tokens

    def encode(self, text, bos=False, allow_special=False):
        """Token ids of text (str: UTF-8; bytes: as they are), as `attnlab`
        encodes it; bos puts <|endoftext|> first."""
        if not isinstance(text, (str, bytes, bytearray)):
            raise TypeError("encode takes str or bytes, not %s" % type(text).__name__)
        b = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if bos and self.config["eot_id"] < 0:
            raise AttnlabError("the tokenizer has no <|endoftext|> to put first")
        out = (ctypes.c_int * max(1, len(b)))()
        e = _err()
        n = library().al_api_encode(self._handle(), b, len(b), int(allow_special), out, len(b), e,
                                    len(e))
        if n < 0:
            _raise(e)
        ids = np.array(out[:n], dtype=np.int32)
        if bos:
            ids = np.concatenate([[self.config["eot_id"]], ids]).astype(np.int32)
        return ids

    def decode(self, ids):
        """The bytes of ids."""
        a = self._ids(ids).ravel()
        cap = 64 + 32 * len(a)
        while True:
            buf = ctypes.create_string_buffer(cap)
            e = _err()
            n = library().al_api_decode(self._handle(), _iptr(a), len(a), buf, cap, e, len(e))
            if n < 0:
                _raise(e)
            if n <= cap:
                return buf.raw[:n]
            cap = n

    def to_tokens(self, text, prepend_bos=True):
        """TransformerLens's to_tokens: (1, T) ids of text, <|endoftext|> first."""
        return self.encode(text, bos=prepend_bos)[None, :]

    def to_string(self, ids):
        """The text of ids (invalid UTF-8 replaced)."""
        return self.decode(ids).decode("utf-8", errors="replace")

    def to_str_tokens(self, ids):
        """Each token's own text, as a list."""
        return [self.to_string([i]) for i in self._ids(ids).ravel()]

    def _ids(self, ids):
        """ids as a (B, T) int32 array, or the CLI's message as an exception."""
        if isinstance(ids, (str, bytes, bytearray)):
            raise TypeError("token ids must be integers, not text (encode it with Model.encode "
                            "or Model.to_tokens)")
        a = np.asarray(ids)
        if a.dtype.kind not in "iu":
            raise TypeError("token ids must be integers, not %s" % a.dtype)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2:
            raise ValueError("token ids must be (T,) or (B, T), not shape %s" % (a.shape,))
        if a.size == 0:
            raise ValueError("batch shape %dx%d is empty" % a.shape)
        V = self.config["d_vocab"]
        bad = np.flatnonzero((a.ravel() < 0) | (a.ravel() >= V))
        if len(bad):
            raise ValueError("token id %d at position %d is outside the vocabulary (d_vocab %d)"
                             % (int(a.ravel()[bad[0]]), bad[0], V))
        return np.ascontiguousarray(a, dtype=np.int32)

    # ---------------------------------------------------------- hook names

    def _point_table(self):
        """[(name, point, layer, model_level, optional)] of every point the
        forward runs, in the order of docs/hooks.md's table."""
        if self._points is None:
            lib, h = library(), self._handle()
            name = ctypes.create_string_buffer(128)
            info = (ctypes.c_int * 3)()
            shape = (ctypes.c_int64 * 4)()
            rows, p = [], 0
            while lib.al_api_hook_point(h, p, 0, 1, 1, name, len(name), info, shape) >= 0:
                if info[0]:
                    for L in range(1 if info[1] else self.config["n_layers"]):
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
        return [r[0] for r in self._point_table() if all or not r[4]]

    def _select(self, names):
        """[(name, point, layer)] that names picks: a full name, an old short
        kind ("pattern": every layer), a list of them, or a predicate over
        full names (never picking the only-when-hooked points: name those)."""
        table = self._point_table()
        if names is None:
            return [(n, p, L) for n, p, L, _, opt in table if not opt]
        if callable(names):
            return [(n, p, L) for n, p, L, _, opt in table if not opt and names(n)]
        if isinstance(names, str):
            names = [names]
        out = []
        for want in names:
            if not isinstance(want, str):
                raise TypeError("hook names are strings, not %s" % type(want).__name__)
            hit = [(n, p, L) for n, p, L, _, _ in table if n == want]
            if not hit and "." not in want:  # an old short kind: every layer
                hit = [(n, p, L) for n, p, L, _, _ in table
                       if n.rsplit(".", 1)[-1] == "hook_" + want]
            if not hit:
                pt, ly, e = ctypes.c_int(), ctypes.c_int(), _err()
                if library().al_api_hook_parse(self._handle(), want.encode(), ctypes.byref(pt),
                                               ctypes.byref(ly), e, len(e)) == 0:
                    raise AttnlabError("hook point %s is not run by this engine's forward" % want)
                if "." not in want:
                    raise AttnlabError("no hook point the forward runs is called %r or ends in "
                                       "hook_%s (Model.hook_names() lists them)" % (want, want))
                _raise(e)
            out += hit
        return out

    # ---------------------------------------------------------- forward

    def forward(self, ids):
        """(logits, probs), each (B, T, d_vocab) float32, for ids (T,) or (B, T)."""
        a = self._ids(ids)
        B, T = a.shape
        V = self.config["d_vocab"]
        logits = np.empty((B, T, V), np.float32)
        probs = np.empty((B, T, V), np.float32)
        e = _err()
        with _Busy(self) as h:
            if library().al_api_forward(h, _iptr(a), B, T, _fptr(logits), _fptr(probs), e, len(e)):
                _raise(e)
        return logits, probs

    def _run(self, h, a, hooks, loss, want_logits):
        """One forward of a (B, T) with hooks [(point, layer, fn, HookPoint)]
        (the caller holds the lock): (logits or None, mean loss, per-token
        losses (B, T)). A hook's exception is re-raised as it was."""
        B, T = a.shape
        V = self.config["d_vocab"]
        logits = np.empty((B, T, V), np.float32) if want_logits else None
        losses = np.empty((B, T), np.float32)
        mean = ctypes.c_double(float("nan"))
        raised = []

        def call(user, slot, data, nd, shape, strides):
            try:
                _, _, fn, hp = hooks[slot]
                shp = tuple(shape[k] for k in range(nd))
                st = tuple(strides[k] for k in range(nd))
                span = 1 + sum((s - 1) * d for s, d in zip(shp, st))
                base = np.frombuffer((ctypes.c_float * span).from_address(data), np.float32)
                act = np.lib.stride_tricks.as_strided(base, shp, tuple(4 * d for d in st))
                r = fn(act, hp)
                if r is not None and r is not act:
                    r = np.asarray(r)
                    if r.shape != act.shape:
                        raise ValueError("the hook at %s returned shape %s; the activation is %s"
                                         % (hp.name, r.shape, act.shape))
                    np.copyto(act, r, casting="same_kind")
                return 0
            except BaseException as ex:  # noqa: B036 -- re-raised below, KeyboardInterrupt too
                raised.append(ex)
                return 1

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

    def _hooks(self, fwd_hooks):
        out = []
        for item in fwd_hooks:
            if not (isinstance(item, (tuple, list)) and len(item) == 2 and callable(item[1])):
                raise TypeError("fwd_hooks holds (name or predicate, function) pairs")
            name, fn = item
            for n, p, L in self._select(name):
                out.append((p, L, fn, HookPoint(n, p, L)))
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
        TransformerLens's shape -- a view into the engine's own buffer (hook_q
        is a strided view into the fused q|k|v one), valid only during the
        call: to keep it, keep act.copy() -- and hook.name, hook.layer(). It
        may write act in place or return an array of its shape (copied in).
        At one point, hooks run in the order given; no cap on their number.
        An exception in fn stops the forward and is raised here as it was.
        return_type: "logits" (B, T, d_vocab), "loss" (the mean next-token
        loss; per token (B, T - 1) with loss_per_token), "both" or None."""
        if return_type not in ("logits", "loss", "both", None):
            raise ValueError("return_type is 'logits', 'loss', 'both' or None")
        a = self._ids(ids)
        with _Busy(self) as h:
            hooks = self._hooks(fwd_hooks)
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
        predicate over full names. Refused above max_mb megabytes. The old
        keyword hooks=["pattern", ...] writes and reads the cache file of
        `attnlab run --save-cache` instead (kinds embed, pos_embed, resid_pre,
        q, k, v, pattern, z, result, resid_post)."""
        if not (isinstance(max_mb, (int, float)) and max_mb > 0):
            raise ValueError("max_mb must be a number > 0 (got %r)" % (max_mb,))
        if hooks is not None:
            return self._cache_file(ids, hooks, max_mb)
        a = self._ids(ids)
        B, T = a.shape
        cache = ActivationCache()

        def keep(act, hook):
            cache[hook.name] = act.copy()

        with _Busy(self) as h:
            sel = self._select(names_filter)
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
            hk = [(p, L, keep, HookPoint(n, p, L)) for n, p, L in sel]
            logits, loss, losses = self._run(h, a, hk, return_type in ("loss", "both"),
                                             return_type in ("logits", "both"))
        return self._returns(return_type, logits, loss, losses, False), cache

    def _cache_file(self, ids, hooks, max_mb):
        a = self._ids(ids)
        logits, _ = self.forward(a)
        hk = ",".join(hooks).encode()
        fd, path = tempfile.mkstemp(suffix=".safetensors")
        os.close(fd)
        try:
            e = _err()
            with _Busy(self) as h:
                rc = library().al_api_cache(h, _iptr(a), a.shape[0], a.shape[1], hk, float(max_mb),
                                            path.encode(), e, len(e))
            if rc:
                _raise(e)
            cache, _ = read_safetensors(path)
        finally:
            os.unlink(path)
        return logits, ActivationCache(cache)

    # ---------------------------------------------------------- gradients

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
        a = self._ids(ids)
        B, T = a.shape
        V = self.config["d_vocab"]
        pos, target, dl = 0, None, None
        if isinstance(metric, str) and metric == "loss":
            code = 0
        elif isinstance(metric, tuple) and len(metric) == 3 and metric[0] == "logprob":
            code, pos = 1, int(metric[1])
            if pos < 0:
                pos += T
            target = np.ascontiguousarray(np.broadcast_to(np.asarray(metric[2]), (B,)), np.int32)
        elif isinstance(metric, np.ndarray):
            code = 2
            if metric.shape != (B, T, V):
                raise ValueError("a dlogits metric must be (B, T, d_vocab) = %s, not %s"
                                 % ((B, T, V), metric.shape))
            dl = np.ascontiguousarray(metric, np.float32)
        else:
            raise ValueError("metric is 'loss', ('logprob', pos, token) or a (B, T, d_vocab) array")
        with _Busy(self) as h:
            sel = self._select(names)
            hooks = self._hooks(fwd_hooks)
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
        if self._weights is None:
            self._handle()
            self._weights, _ = read_safetensors(os.path.join(self.path, "model.safetensors"))
        return self._weights

    def _stack(self, name):
        w = self.state_dict()
        return np.stack([w["blocks.%d.attn.%s" % (L, name)] for L in range(self.config["n_layers"])])

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
