#!/usr/bin/python3
"""py_hooks_check.py MODEL_DIR -- the Python package's hooks, caches and
gradients against independent computations: every point's activation (the
hook's own array, unchanged by later forwards) equals the activation cache
`attnlab run --save-cache` writes (act_cache.c, another path through the
engine); writes at each point have the effect the
architecture implies (zeroing a head's v, z, result or pattern rows gives
one forward; zeroing q or k makes its pattern uniform); hooks run in the
order given, 500 of them; a returned array is copied in; exceptions are
re-raised with their traceback and leave the model usable; a second call
from a hook, from a thread or through the C library directly is refused;
closed models and bad input raise; every gradient equals a central
finite difference taken through a writing hook. Prints one line per
check, exits 1 on the first mismatch."""
import os
import sys
import threading
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import attnlab  # noqa: E402

model = sys.argv[1]


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def close(a, b, tol, what):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    # the same infinities (hook_attn_scores' masked entries) agree; any
    # other non-finite value is a difference
    same_inf = np.isinf(a) & (a == b)
    if np.any(~np.isfinite(a) & ~same_inf) or np.any(~np.isfinite(b) & ~same_inf):
        fail("%s: non-finite values differ" % what)
    a, b = np.where(same_inf, 0, a), np.where(same_inf, 0, b)
    err = float(np.abs(a - b).max()) / max(1.0, float(np.abs(b).max()))
    if not err <= tol:
        fail("%s: relative difference %.3g > %.3g" % (what, err, tol))
    return err


def raises(kind, text, f, *args, **kw):
    try:
        f(*args, **kw)
    except kind as e:
        if text not in str(e):
            fail("%s raised %r, without %r" % (getattr(f, "__name__", f), str(e), text))
        return
    fail("%s did not raise %s (%s)" % (getattr(f, "__name__", f), kind.__name__, text))


m = attnlab.Model(model)
c = m.config
L, H, D, C, V = c["n_layers"], c["n_heads"], c["d_head"], c["d_model"], c["d_vocab"]
rng = np.random.default_rng(5)
ids = rng.integers(0, V - 1, (2, 12))
B, T = ids.shape

# 1. every point's activation: the hook's own array (a copy it may keep,
# written back after it returns), equal to the activation cache file's copy
names = m.hook_names(all=True)
want = {"hook_resid_pre", "hook_q", "hook_k", "hook_v", "hook_pattern", "hook_z", "hook_result",
        "hook_resid_post"}
if not want <= {n.rsplit(".", 1)[-1] for n in names} or len(names) < 8 * L:
    fail("hook_names: %s" % names)
seen = {}


def look(act, hook):
    layer = hook.layer() if hook.name.startswith("blocks.") else None
    seen[hook.name] = (act, act.flags.owndata and act.flags.writeable, layer)


m.run_with_hooks(ids, fwd_hooks=[(n, look) for n in names])
kept = {n: v[0].copy() for n, v in seen.items()}
m.run_with_hooks(ids[:1, :5])  # another forward, another shape: the kept arrays stay
_, old = m.run_with_cache(ids, hooks=["resid_pre", "q", "k", "v", "pattern", "z", "result",
                                      "resid_post"])
for n in names:
    a, own, layer = seen[n]
    if not own or (n.startswith("blocks.") and layer != int(n.split(".")[1])):
        fail("%s: not the hook's own writable array, or layer %s" % (n, layer))
    if not np.array_equal(a, kept[n]):
        fail("%s: the array a hook kept changed with a later forward" % n)
    if n in old:
        close(a, old[n], 1e-6, "view of %s against run --save-cache" % n)
if sum(n in old for n in names) != 8 * L:
    fail("the --save-cache file has %d of the views" % sum(n in old for n in names))
_, cache = m.run_with_cache(ids)
if set(cache) != set(m.hook_names()) or "blocks.0.attn.hook_result" in cache:
    fail("run_with_cache: %s" % sorted(cache))
for n in cache:  # (seen had hook_result hooked: the heads added one by one)
    close(cache[n], seen[n][0], 1e-6, "run_with_cache's %s against the hook's view" % n)
if not np.array_equal(cache["pattern", 1], cache["blocks.1.attn.hook_pattern"]):
    fail("cache['pattern', 1]")
for k, l in (("pattern", 1), ("z", 0), ("q", 1), ("resid_pre", 0), ("resid_post", 1)):
    if attnlab.get_act_name(k, l) not in cache:
        fail("get_act_name(%r, %d) = %s, not a cached name" % (k, l, attnlab.get_act_name(k, l)))
_, short = m.run_with_cache(ids, names_filter=["pattern", "blocks.0.hook_resid_post"])
if sorted(short) != sorted(["blocks.%d.attn.hook_pattern" % l for l in range(L)] +
                           ["blocks.0.hook_resid_post"]):
    fail("names_filter with a short kind: %s" % sorted(short))
print("ok views: %d points give the hook its own array, equal to run --save-cache's copies and "
      "unchanged by a later forward" % len(names))

# 2. writes: their effect on what follows
base = m.run_with_hooks(ids)


def zero_head(h):
    def fn(act, hook):
        if hook.name.endswith("hook_pattern"):
            act[:, h] = 0
        else:
            act[:, :, h] = 0
    return fn


h = 2
by = {p: m.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_" + p, zero_head(h))])
      for p in ("v", "z", "result", "pattern")}
for p in ("v", "result", "pattern"):
    close(by[p], by["z"], 1e-5, "zeroing head 1.%d's %s vs its z" % (h, p))
if np.abs(by["z"] - base).max() < 1e-4:
    fail("zeroing a head's z changed nothing")
for p in ("q", "k"):
    got = {}
    m.run_with_hooks(ids, fwd_hooks=[("blocks.0.attn.hook_" + p, zero_head(h)),
                                     ("blocks.0.attn.hook_pattern",
                                      lambda a, hook: got.setdefault("p", a.copy()))])
    uni = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    close(got["p"][:, h], np.broadcast_to(uni, (B, T, T)), 1e-6, "pattern after zeroing %s" % p)
got = {}
m.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_resid_pre", lambda a, hook: a.fill(0)),
                                 ("blocks.0.hook_resid_post",
                                  lambda a, hook: got.setdefault("x", a.copy()))])
if np.abs(got["x"]).max() != 0:
    fail("a zero residual stream did not stay zero through layer 0")
# a returned array is copied in, the same as writing in place
ret = m.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_z", lambda a, hook: a * 0.5)])
inp = m.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_z",
                                        lambda a, hook: a.__imul__(np.float32(0.5)))])
if not np.array_equal(ret, inp):
    fail("a returned z differs from the same z written in place")
raises(ValueError, "returned shape", m.run_with_hooks, ids,
       fwd_hooks=[("blocks.1.attn.hook_z", lambda a, hook: a[0])])
print("ok writes: zeroing a head's v, result or pattern = zeroing its z; zero q or k -> uniform "
      "pattern; a returned array = the same written in place")

# 3. order: 512 hooks (every head of every layer at every point, 4 times)
log = []


def logger(i):
    def fn(act, hook):
        log.append((hook.name, i))
    return fn


per = [n for n in m.hook_names() if "hook_" in n]
hooks = [(per[i % len(per)], logger(i)) for i in range(512)]
m.run_with_hooks(ids, fwd_hooks=hooks)
if len(log) != 512:
    fail("512 hooks: %d calls" % len(log))
for n in per:
    order = [i for name, i in log if name == n]
    if order != sorted(order) or order != [i for i in range(512) if per[i % len(per)] == n]:
        fail("hooks at %s ran in the order %s" % (n, order))
chain = []
m.run_with_hooks(ids, fwd_hooks=[("blocks.0.hook_resid_post",
                                  lambda a, hook: chain.append(float(a[0, 0, 0])) or
                                  a.__setitem__((0, 0, 0), a[0, 0, 0] + 1))] * 40)
if not np.allclose(np.diff(chain), 1.0, atol=1e-4):
    fail("40 hooks at one point do not see each other's writes in order")
print("ok order: 512 hooks ran once each, in the order given at each point; 40 at one point chain")

# 4. exceptions: re-raised as they were, the model usable after
def boom(act, hook):
    raise KeyError("boom at " + hook.name)


try:
    m.run_with_hooks(ids, fwd_hooks=[("blocks.1.attn.hook_pattern", boom)])
    fail("the hook's exception was not raised")
except KeyError as e:
    tb = [f.name for f in traceback.extract_tb(e.__traceback__)]
    if "boom" not in tb or "blocks.1.attn.hook_pattern" not in str(e):
        fail("the traceback %s lacks the hook" % tb)
for exc in (KeyboardInterrupt, SystemExit):
    try:
        m.run_with_hooks(ids, fwd_hooks=[(lambda n: n.endswith("hook_z"),
                                          lambda a, hook, exc=exc: (_ for _ in ()).throw(exc()))])
        fail("%s in a hook was swallowed" % exc.__name__)
    except exc:
        pass
if not np.array_equal(m.run_with_hooks(ids), base):
    fail("the model's forward changed after a failed one")
print("ok exceptions: re-raised with the hook's frame (KeyboardInterrupt too); the model works after")

# 5. one call at a time
raises(attnlab.AttnlabError, "busy", m.run_with_hooks, ids,
       fwd_hooks=[("blocks.0.attn.hook_z", lambda a, hook: m.forward(ids))])
errs = []


def c_call(act, hook):  # past the Python lock, straight into the C library
    e = ctypes.create_string_buffer(256)
    lg = np.empty((B, T, V), np.float32)
    a = np.ascontiguousarray(ids, np.int32)
    rc = attnlab.library().al_api_forward(m._h, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int)), B,
                                          T, lg.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                          None, e, len(e))
    errs.append((rc, e.value.decode()))


import ctypes  # noqa: E402

m.run_with_hooks(ids, fwd_hooks=[("blocks.0.attn.hook_z", c_call)])
if errs != [(-1, errs[0][1])] or "busy" not in errs[0][1]:
    fail("a C call from inside a hook: %s" % errs)
inside, go = threading.Event(), threading.Event()
result = {}


def slow(act, hook):
    inside.set()
    go.wait(10)


th = threading.Thread(target=lambda: result.setdefault(
    "logits", m.run_with_hooks(ids, fwd_hooks=[("blocks.1.hook_resid_post", slow)])))
th.start()
inside.wait(10)
raises(attnlab.AttnlabError, "busy", m.forward, ids)
raises(attnlab.AttnlabError, "busy", m.close)
go.set()
th.join()
if not np.array_equal(result.get("logits"), base):
    fail("the thread's forward")
print("ok busy: a call from a hook, from another thread, or into the C library is refused")

# 6. bad input, with the CLI's words
raises(TypeError, "integers", m.forward, [1.5, 2.0])
raises(TypeError, "not text", m.run_with_hooks, "hello")
raises(ValueError, "outside the vocabulary (d_vocab %d)" % V, m.forward, [1, V])
raises(ValueError, "outside the vocabulary", m.forward, [-1])
raises(ValueError, "token id 2147483648", m.forward, [2 ** 31])
raises(ValueError, "token id 18446744073709551615", m.forward, np.array([2 ** 64 - 1], np.uint64))
raises(ValueError, "empty", m.forward, np.zeros((1, 0), np.int64))
raises(ValueError, "(T,) or (B, T)", m.forward, np.zeros((1, 2, 3), np.int64))
raises(attnlab.AttnlabError, "exceeds n_ctx", m.forward, np.zeros(c["n_ctx"] + 1, np.int64))
raises(ValueError, "the cache limit must be a finite number of megabytes > 0, not -1",
       m.run_with_cache, ids, max_mb=-1)
raises(attnlab.AttnlabError, "above the limit", m.run_with_cache, ids, max_mb=1e-6)
raises(attnlab.AttnlabValueError, "blocks.9.attn.hook_z", m.run_with_hooks, ids,
       fwd_hooks=[("blocks.9.attn.hook_z", boom)])
raises(attnlab.AttnlabValueError, "hook_zz", m.run_with_hooks, ids,
       fwd_hooks=[("blocks.0.attn.hook_zz", boom)])
planned = [n for n in ("hook_embed", "blocks.0.hook_attn_out", "logits") if n not in names]
for n in planned:
    raises(attnlab.AttnlabError, "not run", m.run_with_hooks, ids, fwd_hooks=[(n, boom)])
raises(TypeError, "pairs", m.run_with_hooks, ids, fwd_hooks=["blocks.0.attn.hook_z"])
raises(ValueError, "return_type", m.run_with_hooks, ids, return_type="probs")
print("ok input: floats, text, ids out of range or >= 2**31, bad shapes, names and max_mb raise")

# 7. gradients: each a central finite difference through a writing hook
pos, tok = T - 2, 7


def logprob(lg):
    x = lg[:, pos].astype(np.float64)
    mx = x.max(-1, keepdims=True)
    return float((x[:, tok] - (mx[:, 0] + np.log(np.exp(x - mx).sum(-1)))).sum())


gnames = ["blocks.0.hook_resid_pre", "blocks.0.hook_resid_post", "blocks.1.attn.hook_q",
          "blocks.0.attn.hook_k", "blocks.1.attn.hook_v", "blocks.1.attn.hook_pattern",
          "blocks.0.attn.hook_z", "blocks.0.attn.hook_result", "blocks.%d.hook_resid_post" % (L - 1)]
value, grads = m.backward_at(ids, gnames, metric=("logprob", pos, tok))
close(value, logprob(base), 1e-5, "the log-prob metric's value")
worst = 0.0
for n in gnames:
    d = rng.standard_normal(grads[n].shape).astype(np.float32)
    eps = np.float32(3e-3)
    f = [logprob(m.run_with_hooks(ids, fwd_hooks=[(n, lambda a, hook, s=s: a + s * eps * d)]))
         for s in (1, -1)]
    fd = (f[0] - f[1]) / (2 * eps)
    an = float((grads[n].astype(np.float64) * d).sum())
    err = abs(fd - an) / max(1.0, abs(an))
    worst = max(worst, err)
    if err > 2e-2:
        fail("gradient at %s: finite difference %.6g, backward_at %.6g" % (n, fd, an))
pat = grads["blocks.1.attn.hook_pattern"]
if np.abs(np.triu(pat, 1)).max() != 0:
    fail("the pattern's gradient above the diagonal is not 0")
# the loss and a dlogits metric: values, and the final residual's gradient exactly g · W_U^T
lv, lg = m.backward_at(ids, ["blocks.%d.hook_resid_post" % (L - 1)], metric="loss")
close(lv, m.run_with_hooks(ids, return_type="loss"), 1e-6, "the loss metric's value")
g = rng.standard_normal((B, T, V)).astype(np.float32)
dv, dg = m.backward_at(ids, ["blocks.%d.hook_resid_post" % (L - 1)], metric=g)
close(dv, float((g.astype(np.float64) * base).sum()), 1e-5, "the dlogits metric's value")
close(dg["blocks.%d.hook_resid_post" % (L - 1)], g @ m.W_U.T, 1e-5, "dlogits' final residual")
raises(attnlab.AttnlabError, "intervention", m.backward_at, ids, ["blocks.0.attn.hook_z"],
       fwd_hooks=[("blocks.0.attn.hook_z", zero_head(0))])
reads = []
m.backward_at(ids, ["blocks.0.attn.hook_z"], fwd_hooks=[("blocks.0.attn.hook_z",
                                                          lambda a, hook: reads.append(1))])
if reads != [1]:
    fail("a reading hook in backward_at")
raises(attnlab.AttnlabError, "position", m.backward_at, ids, ["blocks.0.attn.hook_z"],
       metric=("logprob", T, tok))
raises(attnlab.AttnlabError, "target id", m.backward_at, ids, ["blocks.0.attn.hook_z"],
       metric=("logprob", 0, V))
print("ok gradients: %d points equal central finite differences (worst %.2g); pattern 0 above the "
      "diagonal; loss and dlogits metrics; a writing hook refused" % (len(gnames), worst))

# 8. a closed model refuses everything; the context manager closes
with attnlab.Model(model) as m2:
    pass
for f, args in ((m2.forward, (ids,)), (m2.run_with_hooks, (ids,)), (m2.run_with_cache, (ids,)),
                (m2.backward_at, (ids, ["blocks.0.attn.hook_z"])), (m2.encode, ("a",)),
                (m2.decode, ([1],)), (m2.hook_names, ()), (m2.state_dict, ())):
    raises(attnlab.AttnlabValueError, "closed", f, *args)
m2.close()
m.close()
raises(attnlab.AttnlabValueError, "closed", m.run_with_hooks, ids)
print("ok closed: every call on a closed model raises; the interpreter is alive")
