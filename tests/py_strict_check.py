#!/usr/bin/python3
"""py_strict_check.py MODEL_DIR WORK_DIR ATTNLAB_BIN -- the Python
package's refusals, each with its exception type and message: wrong types
raise TypeError; values out of range raise AttnlabValueError (a ValueError)
with the message the C library gives the CLI -- compared here with what
the CLI prints for the same value, or with the C library called directly
-- and never reach the engine narrowed (2**32 + 1 is not token 1); mistyped
names get the CLI's "did you mean"; every method of a closed, never-opened
or __del__'d model raises "the model is closed"; activations a hook kept
outlive the model; a Model is not copied. Prints one line per check,
exits 1 on the first mismatch."""
import copy
import ctypes
import json
import os
import pickle
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import attnlab  # noqa: E402

model, work, binary = sys.argv[1:4]


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def raises(kind, text, f, *args, **kw):
    """f(*args, **kw) raises kind with text in its message; the message."""
    try:
        f(*args, **kw)
    except kind as e:
        if text not in str(e):
            fail("%s raised %r, without %r" % (getattr(f, "__name__", f), str(e), text))
        return str(e)
    except Exception as e:  # noqa: BLE001 -- the wrong type is the failure
        fail("%s raised %s(%r), not %s" % (getattr(f, "__name__", f), type(e).__name__, str(e),
                                           kind.__name__))
    fail("%s did not raise %s (%s)" % (getattr(f, "__name__", f), kind.__name__, text))


def cli_err(*args):
    """What the CLI prints on stderr for args (it must fail)."""
    r = subprocess.run([binary] + list(args), capture_output=True, text=True)
    if r.returncode == 0:
        fail("attnlab %s succeeded" % " ".join(args))
    return r.stderr


VE = attnlab.AttnlabValueError
m = attnlab.Model(model)
c = m.config
V, n_ctx = c["d_vocab"], c["n_ctx"]
ids = np.arange(1, 9) % V
base, _ = m.forward(ids)

# 1. ids: types, ranges (the engine's message), nothing narrowed
raises(TypeError, "encode takes str or bytes, not int", m.encode, 123)
raises(TypeError, "bos must be True or False, not int", m.encode, "a", bos=1)
raises(TypeError, "token ids must be integers, not float64", m.forward, [1.9, 2.5])
raises(TypeError, "token ids must be integers, not bool", m.forward, [True, False])
raises(TypeError, "token ids must be integers, not bool", m.forward, np.ones(3, bool))
raises(TypeError, "token ids must be integers, not str", m.forward, [1, "a"])
raises(TypeError, "token ids must be integers, not NoneType", m.forward, [1, None])
raises(TypeError, "token ids must be integers, not text", m.decode, "abc")
raises(ValueError, "rectangular", m.forward, [[1, 2], [3]])
msg = raises(VE, "token id 4294967297 at position 0 is outside the vocabulary (d_vocab %d)" % V,
             m.forward, [2 ** 32 + 1])
raises(VE, "token id %d at position 1" % (2 ** 70), m.run_with_hooks, [1, 2 ** 70])
raises(VE, "token id -1 at position 1 is outside", m.forward, [3, -1])
raises(VE, "token id %d at position 2" % -(2 ** 64), m.decode, [1, 2, -(2 ** 64)])
# the engine's own words for an id it can see: the C forward called directly
e = ctypes.create_string_buffer(512)
one = np.array([V], np.int32)
lib = attnlab.library()
if lib.al_api_forward(m._h, one.ctypes.data_as(ctypes.POINTER(ctypes.c_int)), 1, 1, None, None,
                      e, len(e)) != -1:
    fail("the C forward took id %d" % V)
if raises(VE, "token id", m.forward, [V]) != e.value.decode():
    fail("forward([%d]): Python %r, C %r" % (V, raises(VE, "", m.forward, [V]), e.value.decode()))
raises(VE, "batch shape 1x0 is empty", m.forward, [])
raises(VE, "batch shape 0x3 is empty", m.run_with_hooks, np.zeros((0, 3), np.int64))
raises(VE, "sequence length %d exceeds n_ctx %d" % (n_ctx + 1, n_ctx), m.forward,
       np.ones(n_ctx + 1, np.int64))
raises(ValueError, "(T,) or (B, T), not shape ()", m.forward, 5)
if m.decode([]) != b"" or m.to_str_tokens([]) != []:
    fail("decode([]) / to_str_tokens([])")
if len(m.decode(np.ones(n_ctx + 5, np.int64))) == 0:  # decode has no n_ctx
    fail("decode of more than n_ctx ids")
for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
    if not np.array_equal(m.forward(ids.astype(dt))[0], base):
        fail("ids as %s" % dt.__name__)
if not np.array_equal(m.forward(np.array(list(ids), dtype=object))[0], base) or \
        not np.array_equal(m.forward([np.int64(i) for i in ids])[0], base):
    fail("ids as Python ints in an object array, or NumPy scalars in a list")
print("ok ids: floats, bools, text, None raise TypeError; 2**32+1, 2**70, -1, -2**64, empty, "
      "> n_ctx raise the engine's message (%r); every NumPy integer dtype is accepted" % msg)

# 2. max_mb: the CLI's check of --cache-max-mb, its message
for bad, shown in ((-1, "-1"), (0, "0"), (float("inf"), "inf"), (float("nan"), "nan"),
                   (10 ** 400, "inf")):
    msg = raises(VE, "the cache limit must be a finite number of megabytes > 0, not " + shown,
                 m.run_with_cache, ids, max_mb=bad)
    raises(VE, msg, m.run_with_cache, ids, hooks=["z"], max_mb=bad)
for bad in (-1, 0):
    err = cli_err("run", "--model", model, "--prompt", "ab", "--save-cache",
                  os.path.join(work, "c.st"), "--cache-max-mb", str(bad))
    want = "the cache limit must be a finite number of megabytes > 0, not %d" % bad
    if want not in err:
        fail("the CLI says %r for --cache-max-mb %d" % (err, bad))
raises(TypeError, "max_mb must be a number, not bool", m.run_with_cache, ids, max_mb=True)
raises(TypeError, "max_mb must be a number, not str", m.run_with_cache, ids, max_mb="5")
raises(attnlab.AttnlabError, "above the limit", m.run_with_cache, ids, max_mb=1e-6)
print("ok max_mb: -1, 0, inf, nan, 10**400 refused with run --cache-max-mb's message; True, '5' "
      "raise TypeError")

# 3. names: the CLI's did-you-mean
bad_hook = "blocks.0.attn.hook_patern"
msg = raises(VE, "unknown hook name '%s' (did you mean 'blocks.0.attn.hook_pattern'?)" % bad_hook,
             m.run_with_hooks, ids, fwd_hooks=[(bad_hook, lambda a, h: None)])
with open(os.path.join(work, "iv.json"), "w") as f:
    json.dump({"attnlab_intervention": 1, "ops": [{"hook": bad_hook, "op": "zero"}]}, f)
err = cli_err("run", "--model", model, "--prompt", "ab", "--intervene",
              os.path.join(work, "iv.json"))
if msg not in err:
    fail("hook name: Python %r, the CLI %r" % (msg, err))
raises(VE, msg, m.run_with_cache, ids, names_filter=[bad_hook])
raises(VE, msg, m.backward_at, ids, bad_hook)
raises(VE, "'patern' or ends in hook_patern (did you mean 'pattern'?)", m.run_with_cache, ids,
       names_filter="patern")
raises(VE, "unknown hook kind 'patern' (did you mean 'pattern'?)", m.run_with_cache, ids,
       hooks=["z", "patern"])
raises(ValueError, "(did you mean 'pattern'?)", attnlab.get_act_name, "patern", 1)
raises(ValueError, "(did you mean 'logits'?)", m.run_with_hooks, ids, return_type="logit")
raises(ValueError, "(did you mean 'loss'?)", m.backward_at, ids, [], metric="los")
raises(VE, "unknown analysis 'scroes' (did you mean 'scores'?)", attnlab.analysis, "scroes")
if "did you mean 'attnlab scores'?" not in cli_err("scroes"):
    fail("the CLI's suggestion for scroes")
raises(VE, "unknown analysis 'zzzzzz' (the analyses: ", attnlab.analysis, "zzzzzz")
raises(VE, "unknown option '--modle' (did you mean --model?)", attnlab.analysis, "scores",
       modle=model)
print("ok names: a hook name as the CLI's --intervene says it (%r); short kinds, cache kinds, "
      "get_act_name, return_type, metric and analyses suggest the nearest" % msg)

# 4. other types and values
raises(TypeError, "not callable", m.run_with_hooks, ids, fwd_hooks=[("blocks.0.attn.hook_z", 5)])
raises(TypeError, "pairs, not NoneType", m.run_with_hooks, ids, fwd_hooks=None)
raises(TypeError, "pairs, not str", m.run_with_hooks, ids, fwd_hooks=["ab"])
raises(TypeError, "hook names are strings, not int", m.run_with_cache, ids, names_filter=[3])
raises(TypeError, "or a predicate over names, not int", m.run_with_cache, ids, names_filter=3)
raises(ValueError, "embedded null byte", m.run_with_cache, ids, names_filter=["hook_\0embed"])
raises(TypeError, "return_type is 'logits', 'loss', 'both' or None, not int", m.run_with_hooks,
       ids, return_type=1)
raises(ValueError, "return_type", m.run_with_cache, ids, return_type="probs")
raises(TypeError, "loss_per_token must be True or False, not int", m.run_with_hooks, ids,
       loss_per_token=1)
raises(TypeError, "all must be True or False, not str", m.hook_names, all="yes")
raises(TypeError, "prepend_bos must be True or False", m.to_tokens, "a", prepend_bos=None)
z = ["blocks.0.attn.hook_z"]
T = len(ids)
raises(TypeError, "position must be an integer, not float", m.backward_at, ids, z,
       metric=("logprob", 1.5, 1))
raises(TypeError, "position must be an integer, not bool", m.backward_at, ids, z,
       metric=("logprob", True, 1))
raises(VE, "the log-prob metric's position %d is outside 0..%d" % (-T - 1, T - 1), m.backward_at,
       ids, z, metric=("logprob", -T - 1, 1))
raises(VE, "position %d is outside" % 2 ** 80, m.backward_at, ids, z,
       metric=("logprob", 2 ** 80, 1))
raises(VE, "target id %d (sequence 0) is outside the vocabulary (d_vocab %d)" % (2 ** 32 + 1, V),
       m.backward_at, ids, z, metric=("logprob", 1, 2 ** 32 + 1))
raises(TypeError, "target must be integers, not float64", m.backward_at, ids, z,
       metric=("logprob", 1, 1.5))
raises(ValueError, "one id or one per sequence (1), not shape (3,)", m.backward_at, ids, z,
       metric=("logprob", 1, [1, 2, 3]))
raises(TypeError, "a dlogits metric must be real numbers, not complex128", m.backward_at, ids, z,
       metric=np.zeros((1, T, V), complex))
raises(TypeError, "not NoneType", m.backward_at, ids, z, metric=None)
raises(TypeError, "option db: a str, path, int, float or True/False/None, not list",
       attnlab.analysis, "scores", db=["x"])
raises(ValueError, "embedded null byte", attnlab.analysis, "scores", model="a\0b")
raises(TypeError, "the analysis name must be a str, not int", attnlab.analysis, 5)
raises(TypeError, "the layer must be an integer, not bool", attnlab.get_act_name, "z", True)
raises(ValueError, "no model-level hook point is of kind 'pattern'", attnlab.get_act_name,
       "pattern")
raises(TypeError, "the model directory must be a str, not int", attnlab.Model, 5)
raises(ValueError, "is not a safetensors file this reads: a header of",
       attnlab.read_safetensors, os.path.join(model, "config.json"))
raises(FileNotFoundError, "no results database", attnlab.open_results, os.path.join(work, "no.db"))
raises(TypeError, "expected str, bytes or os.PathLike object, not bool", attnlab.read_cache, True)
os.fstat(1)  # (open(True) would have closed stdout)


def st_file(header, data=b""):
    h = json.dumps(header).encode()
    path = os.path.join(work, "bad.safetensors")
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + data)
    return path


f4 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
for header, data, want in (({"__metadata__": 5, "a": f4}, bytes(8), "__metadata__ is not"),
                           ({"a": dict(f4, shape=[3])}, bytes(8), "does not take 8 bytes"),
                           ({"a": dict(f4, data_offsets=[0, 16])}, bytes(8), "offsets 0..16 of 8"),
                           ({"a": dict(f4, shape=[-2])}, bytes(8), "shape [-2]"),
                           ({"a": [1, 2]}, b"", "no dtype, shape and data_offsets"),
                           ({"a": dict(f4, dtype=["F32"])}, bytes(8), "dtype ['F32'] is not read"),
                           ([1], b"", "not a JSON object")):
    raises(ValueError, want, attnlab.read_safetensors, st_file(header, data))
raises(ValueError, "attnlab activation cache", attnlab.read_cache, st_file({"a": f4}, bytes(8)))
raises(TypeError, "a hook point's name is a str, not int", attnlab.HookPoint, 5, 0, 0)
raises(TypeError, "layer must be an integer, not float", attnlab.HookPoint, "hook_z", 0, 1.5)
raises(ValueError, "hook_embed is not in a block", attnlab.HookPoint("hook_embed", 8, 0).layer)
print("ok types: hooks, names, flags, metrics, options and paths of the wrong type raise TypeError "
      "naming it; positions and targets beyond int64 keep their value in the message; malformed "
      "safetensors raise ValueError naming the fault")

# 5. each analysis call starts from the defaults (the earlier call's options are gone)
db = os.path.join(work, "s.db")
attnlab.analysis("scores", model=model, db=db, probe_r=4, probe_n=2)
raises(VE, "--model is required", attnlab.analysis, "scores")
raises(VE, "--db is required", attnlab.analysis, "scores", model=model)
print("ok analysis: a call without --model or --db after one with them is refused")

# 6. closed models: every public method, every way of closing
methods = {n for n in dir(attnlab.Model) if not n.startswith("_")}
props = {n for n in methods if isinstance(getattr(attnlab.Model, n), property)}
args = {"encode": ("a",), "decode": (ids,), "to_tokens": ("a",), "to_string": (ids,),
        "to_str_tokens": (ids,), "forward": (ids,), "run_with_hooks": (ids,),
        "run_with_cache": (ids,), "backward_at": (ids, z), "hook_names": (), "state_dict": (),
        "close": ()}
if methods - props - {"config", "path"} != set(args):
    fail("public methods %s: test them all here" % sorted(methods - props - set(args)))


def closed_ways():
    a = attnlab.Model(model)
    a.close()
    yield "close()", a
    with attnlab.Model(model) as b:
        pass
    yield "a with block", b
    d = attnlab.Model(model)
    d.__del__()
    yield "__del__", d
    yield "Model.__new__", attnlab.Model.__new__(attnlab.Model)
    f = attnlab.Model.__new__(attnlab.Model)
    try:
        f.__init__(os.path.join(work, "nope"))
    except attnlab.AttnlabError:
        pass
    yield "a failed __init__", f


kept = []
live = attnlab.Model(model)
live.run_with_hooks(ids, fwd_hooks=[(lambda n: True, lambda a, h: kept.append((a, a.copy())))])
live.close()
n = 0
for how, x in closed_ways():
    for name in sorted(args):
        f = getattr(x, name)
        if name == "close":
            if f() is not None:
                fail("close() of a model closed by %s" % how)
            continue
        raises(VE, "the model is closed", f, *args[name])
        n += 1
    for p in sorted(props):
        raises(VE, "the model is closed", getattr, x, p)
        n += 1
    raises(VE, "the model is closed", x.__enter__)
    raises(TypeError, "cannot be copied or pickled", copy.copy, x)
for fn in (copy.copy, copy.deepcopy, pickle.dumps):
    raises(TypeError, "cannot be copied or pickled", fn, m)
if not kept or not all(np.array_equal(a, b) for a, b in kept):
    fail("activations kept by hooks changed or went away when the model closed")
print("ok closed: %d calls on models closed by close(), a with block, __del__, never opened or "
      "failed to open raise 'the model is closed'; %d activations kept by hooks outlive theirs; "
      "copy and pickle refused" % (n, len(kept)))

# 7. the public config is the caller's: changing it changes no allocation
m.config["d_vocab"], m.config["n_layers"] = 1, 99
with attnlab.Model(model) as other:
    same = m.hook_names() == other.hook_names()
if not np.array_equal(m.forward(ids)[0], base) or not same:
    fail("a changed m.config changed the forward or the hook names")
print("ok config: m.config changed by the caller, the forward's logits are (B, T, %d) as before"
      % V)
