#!/usr/bin/python3
"""py_fuzz.py MODEL_DIR WORK_DIR [SEED [CALLS]] -- random calls on the
Python package, open, closed, never-opened and misused models alike: every
public method and function with arguments drawn at random (ids huge,
negative, float, text, None, mixed lists, NumPy arrays of every dtype and
shape; hooks that read, write, raise, return garbage, call back into the
model or close it; models closed, deleted or never opened; caches, hook
points and activations of closed models). The calls run in a child
process, so that a crash (a signal) or a hang (a timeout) is caught and
reported with the call that caused it. Each call must return or raise one
of the package's documented exceptions with a one-line message; a call
on a closed model must raise AttnlabValueError('the model is closed');
after the calls, the models still open give the forward they gave before.
SEED (default 40, or $ATTNLAB_FUZZ_SEED) makes a run reproducible; it is
printed. Prints "ok fuzz: ..." or "FAIL ..." and exits 1 on a failure."""
import os
import subprocess
import sys

TIMEOUT = 120  # seconds for all the calls: far above a run's few, far below forever


def parent(model, work, seed, calls):
    print("seed %d (ATTNLAB_FUZZ_SEED=%d reruns this run)" % (seed, seed), flush=True)
    log = os.path.join(work, "fuzz.log")
    cmd = [sys.executable, "-X", "faulthandler", os.path.abspath(__file__), "--child", model, work,
           str(seed), str(calls)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        print("FAIL hang: no end within %d s; the last call begun: %s" % (TIMEOUT, last(log)))
        return 1
    if r.returncode < 0 or r.returncode > 1:
        print("FAIL crash: the child died with %s during: %s\n%s"
              % ("signal %d" % -r.returncode if r.returncode < 0 else "exit %d" % r.returncode,
                 last(log), r.stderr[-3000:]))
        return 1
    sys.stdout.write(r.stdout)
    if r.returncode != 0 or "ok fuzz" not in r.stdout:
        print("FAIL the child (exit %d): %s" % (r.returncode, r.stderr[-3000:]))
        return 1
    return 0


def last(log):
    try:
        with open(log) as f:
            lines = f.read().splitlines()
        return lines[-1] if lines else "(none)"
    except OSError:
        return "(no log)"


# ------------------------------------------------------------ the child

def child(model, work, seed, calls):
    import copy
    import inspect
    import random
    import sqlite3

    import numpy as np

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import attnlab

    rng = random.Random(seed)
    logf = open(os.path.join(work, "fuzz.log"), "w")

    def fail(msg):
        print("FAIL " + msg, flush=True)
        sys.exit(1)

    class Boom(Exception):
        """What the fuzz's own hooks and predicates raise."""

    probe = attnlab.Model(model)
    V, n_ctx, L = probe.config["d_vocab"], probe.config["n_ctx"], probe.config["n_layers"]
    names = probe.hook_names(all=True)
    ids0 = np.arange(2, 12) % V
    logits0, _ = probe.forward(ids0)
    probe.close()

    # the fixtures: models in slots (open or closed, the fuzz knows which),
    # objects never opened, and what closed models left behind
    slots = [attnlab.Model(model) for _ in range(3)]
    is_open = [True] * 3
    never = attnlab.Model.__new__(attnlab.Model)
    failed = attnlab.Model.__new__(attnlab.Model)
    try:
        failed.__init__(os.path.join(work, "no-model"))
    except attnlab.AttnlabError:
        pass
    dead = attnlab.Model(model)
    dead.__del__()
    with attnlab.Model(model) as exited:
        _, left_cache = exited.run_with_cache(ids0[:4])
    left_points, left_acts = [], []
    exited2 = attnlab.Model(model)
    def leave(act, hook):
        left_points.append(hook)
        left_acts.append((act, act.copy()))

    exited2.run_with_hooks(ids0, fwd_hooks=[(lambda n: True, leave)])
    exited2.close()
    closed_objs = [never, failed, dead, exited, exited2]

    good_names = names + ["pattern", "z", "resid_pre", "embed"]
    bad_names = ["blocks.0.attn.hook_patern", "patern", "blocks.%d.attn.hook_z" % L, "hook_\0z",
                 "", "blocks.x.hook_z", "blocks.0.", "ln_final.hook_scale", "blocks.-1.hook_z",
                 "logit", "x" * 300]
    files = [os.path.join(model, "model.safetensors"), os.path.join(model, "config.json"),
             os.path.join(model, "tokenizer.json"), os.path.join(work, "none"), model,
             os.path.join(work, "junk.bin"), os.path.join(work, "short.st"),
             os.path.join(work, "fuzz.log")]
    with open(files[5], "wb") as f:
        f.write(bytes(rng.randrange(256) for _ in range(200)))
    with open(files[0], "rb") as f:
        head = f.read(300)
    with open(files[6], "wb") as f:
        f.write(head)

    def any_model():
        return rng.choice(slots + closed_objs)

    # hooks: each a function of (act, hook), some misbehaving
    def h_read(act, hook):
        float(act.sum())

    def h_write(act, hook):
        act *= np.float32(0.5)

    def h_raise(act, hook):
        raise Boom("hook at " + hook.name)

    def h_garbage(act, hook):
        return value(2)

    def h_reenter(act, hook):
        any_model().forward(ids0)

    def h_close(act, hook):
        k = rng.randrange(len(slots))
        slots[k].close()  # refused (busy) when it is the model running this hook
        is_open[k] = False

    def h_keep(act, hook):
        left_acts.append((act, act.copy()))

    def h_shape(act, hook):
        act.shape = (act.size,)

    def p_raise(name):
        raise Boom("predicate at " + name)

    hook_fns = [h_read, h_write, h_raise, h_garbage, h_reenter, h_close, h_keep, h_shape]
    preds = [lambda n: True, lambda n: "hook_z" in n, lambda n: False, p_raise]

    dtypes = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
              np.float16, np.float32, np.float64, np.bool_, np.complex64, object, "<U3", "S2"]
    shapes = [(), (0,), (1,), (5,), (2, 4), (1, 0), (0, 3), (2, 2, 2), (1, n_ctx + 1), (3, 1)]
    ints = [0, 1, -1, V - 1, V, 2 ** 31 - 1, 2 ** 31, 2 ** 32 + 1, 2 ** 63 - 1, 2 ** 63, -2 ** 63,
            -2 ** 63 - 1, 10 ** 30, -10 ** 30, n_ctx, n_ctx + 1]

    def array():
        dt, shp = rng.choice(dtypes), rng.choice(shapes)
        if dt in ("<U3", "S2"):
            return np.full(shp, "ab", dtype=dt)
        vals = np.array([rng.choice([0, 1, 2, V - 1, V, -1, 3]) for _ in range(int(np.prod(shp)))])
        if dt is object:
            return np.array([rng.choice(ints + [1.5, None, "a"]) for _ in vals], dtype=object
                            ).reshape(shp) if len(vals) else np.empty(shp, object)
        with np.errstate(all="ignore"):
            return vals.astype(dt).reshape(shp)

    def value(depth=0):
        k = rng.randrange(16 if depth < 2 else 10)
        if k == 0:
            return rng.choice(ints)
        if k == 1:
            return rng.choice([1.5, -0.0, float("nan"), float("inf"), 1e308, 2.0])
        if k == 2:
            return rng.choice([True, False, np.bool_(True), None])
        if k == 3:
            return rng.choice(good_names + bad_names + ["", "hello", "scores", "loss", "logits",
                                                        "both", "logprob", "\udcff", "é" * 5])
        if k == 4:
            return rng.choice([b"abc", b"\xff\xfe\0", bytearray(b"xy"), b""])
        if k == 5:
            return array()
        if k == 6:
            return rng.choice(hook_fns + preds + [str, len, object])
        if k == 7:
            return rng.choice([object(), {}, {"a": 1}, set(), any_model(),
                               left_points[0] if left_points else None, left_cache])
        if k == 8:
            return list(rng.choice([ids0[:3], [1, 2], [], [[1, 2], [3, 4]], [[1, 2], [3]]]))
        if k == 9:
            return rng.choice([(rng.choice(good_names), rng.choice(hook_fns)),
                               ("logprob", rng.choice(ints), rng.choice(ints))])
        if k < 12:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        if k < 14:
            return tuple(value(depth + 1) for _ in range(rng.randrange(4)))
        return rng.choice(ints + [ids0, ids0[None], ids0[:2]])

    # plausible values per parameter (half the time), to reach deep paths
    def good_ids():
        return rng.choice([ids0, ids0[None, :5], np.stack([ids0, ids0[::-1]]), list(ids0[:4])])

    def good_hooks():
        n = rng.randrange(4)
        return [(rng.choice(good_names + preds + bad_names[:2]), rng.choice(hook_fns))
                for _ in range(n)]

    def flag():
        return rng.choice([True, False])

    plausible = {
        "ids": good_ids, "text": lambda: rng.choice(["once upon a time", b"\xff\x00ab", ""]),
        "bos": flag, "allow_special": flag, "prepend_bos": flag, "all": flag,
        "fwd_hooks": good_hooks,
        "return_type": lambda: rng.choice(["logits", "loss", "both", None]),
        "loss_per_token": flag,
        "names_filter": lambda: rng.choice([None, rng.choice(good_names), good_names[:3]] + preds),
        "names": lambda: rng.choice(["blocks.0.attn.hook_z", ["blocks.0.hook_resid_pre"], [], "z"]),
        "metric": lambda: rng.choice(["loss", ("logprob", -1, 3), ("logprob", 2, [1, 2]),
                                      np.zeros((1, 10, V), np.float32)]),
        "hooks": lambda: rng.choice([None, ["pattern"], ["z", "q"], "z"]),
        "max_mb": lambda: rng.choice([2000, 0.001, 1e-9]),
    }

    def args_for(f):
        sig = inspect.signature(f)
        pos, kw = [], {}
        for p in sig.parameters.values():
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            if p.default is not p.empty and rng.random() < 0.5:
                continue
            v = plausible[p.name]() if p.name in plausible and rng.random() < 0.7 else value()
            if p.default is p.empty and rng.random() < 0.9:
                pos.append(v)
            else:
                kw[p.name] = v
        if rng.random() < 0.05:
            pos.append(value())  # one too many
        if rng.random() < 0.05:
            kw[rng.choice(["idz", "hook", "max_MB"])] = value()
        return pos, kw

    methods = sorted(n for n in dir(attnlab.Model) if not n.startswith("_"))
    props = [n for n in methods if isinstance(getattr(attnlab.Model, n), property)]
    calls_on = [n for n in methods if n not in props and n not in ("config", "path")]
    allowed = (TypeError, ValueError, attnlab.AttnlabError, Boom)
    tally, actions, closed_refusals = {}, {}, 0

    def check_message(ex, what):
        s = str(ex)
        if isinstance(ex, attnlab.AttnlabError) and (not s or "\n" in s):
            fail("%s: %s with a message that is not one line: %r" % (what, type(ex).__name__, s))

    def run(what, f, pos, kw, expect_closed, also=()):
        """f(*pos, **kw) returns or raises one of the package's exceptions
        (or also); on a closed model (expect_closed), with arguments that
        bind, it raises 'the model is closed'. True if it returned."""
        nonlocal closed_refusals
        logf.write(what + "\n")
        logf.flush()
        try:
            sig = inspect.signature(f)
        except (TypeError, ValueError):  # a builtin (getattr): its arguments are right
            sig = None
        try:
            binds = sig is None or sig.bind(*pos, **kw) is not None
        except TypeError:
            binds = False
        try:
            f(*pos, **kw)
            out = "returned"
            if expect_closed and binds:
                fail("%s returned on a closed model" % what)
        except allowed + tuple(also) as ex:
            out = type(ex).__name__
            check_message(ex, what)
            if expect_closed and binds:
                if not (isinstance(ex, attnlab.AttnlabValueError)
                        and str(ex) == "the model is closed"):
                    fail("%s on a closed model raised %s(%r)" % (what, out, str(ex)))
                closed_refusals += 1
        except BaseException as ex:  # noqa: B036 -- any other type is the failure
            fail("%s raised %s(%r): not one of the package's exceptions"
                 % (what, type(ex).__name__, str(ex)))
        tally[out] = tally.get(out, 0) + 1
        return out == "returned"

    def short(x):
        r = repr(x)
        return r if len(r) < 60 else r[:57] + "..."

    i = 0
    while sum(tally.values()) < calls:
        i += 1
        r = rng.random()
        if r < 0.70:  # a method of a model, open or not
            k = rng.randrange(len(slots)) if rng.random() < 0.8 else \
                len(slots) + rng.randrange(len(closed_objs))
            if k < len(slots) and not is_open[k] and rng.random() < 0.7:
                logf.write("#%d reopen slot %d\n" % (i, k))
                slots[k], is_open[k] = attnlab.Model(model), True
                actions["reopen"] = actions.get("reopen", 0) + 1
            obj = slots[k] if k < len(slots) else closed_objs[k - len(slots)]
            closed = k >= len(slots) or not is_open[k]
            name = rng.choice(calls_on + props)
            if name in props:
                run("#%d model%d.%s" % (i, k, name), getattr, [obj, name], {}, closed)
                continue
            f = getattr(obj, name)
            pos, kw = args_for(f)
            # close() returns on anything (no call of the model runs here)
            if run("#%d model%d.%s(%s, %s)" % (i, k, name, short(pos), short(kw)), f, pos, kw,
                   closed and name != "close") and name == "close" and k < len(slots):
                is_open[k] = False
        elif r < 0.76:  # close, delete or reopen a slot
            k = rng.randrange(len(slots))
            how = "reopen" if not is_open[k] else rng.choice(["close", "del", "exit"])
            logf.write("#%d %s slot %d\n" % (i, how, k))
            if how == "close":
                slots[k].close()
            elif how == "del":
                slots[k].__del__()
            elif how == "exit":
                slots[k].__exit__(None, None, None)
            else:
                slots[k] = attnlab.Model(model)
            is_open[k] = how == "reopen"
            actions[how] = actions.get(how, 0) + 1
        elif r < 0.84:
            pos = [value() for _ in range(rng.randrange(3))]
            run("#%d get_act_name%s" % (i, short(pos)), attnlab.get_act_name, pos, {}, False)
        elif r < 0.90:
            name = rng.choice(["scores", "scroes", "patch", "ablate", "", "nope", "sae", value()])
            kw = {rng.choice(["model", "db", "probe_r", "modle", "heads", "strict", "json"]):
                  rng.choice([model, os.path.join(work, "no", "x.db"), value()])
                  for _ in range(rng.randrange(3))}
            kw.pop("db", None)
            if rng.random() < 0.5:  # never a database that opens: every run fails fast
                kw["db"] = os.path.join(work, "no", "r.db")
            run("#%d analysis(%s, %s)" % (i, short(name), short(kw)), attnlab.analysis, [name], kw,
                False)
        elif r < 0.95:
            f = rng.choice([attnlab.read_safetensors, attnlab.read_cache, attnlab.open_results])
            a = rng.choice(files + [value()])
            run("#%d %s(%s)" % (i, f.__name__, short(a)), f, [a], {}, False,
                also=(OSError, sqlite3.Error))
        else:  # what closed models left behind still works
            logf.write("#%d leftovers\n" % i)
            if left_cache:
                key = rng.choice(list(left_cache) + [("pattern", 0), ("z", 0)])
                float(np.asarray(left_cache[key]).sum())
            key = rng.choice([value(), (value(), value()), ("z", rng.choice(ints))])
            f = rng.choice([left_cache.__getitem__, left_cache.__contains__, left_cache.get])
            run("#%d cache.%s(%s)" % (i, f.__name__, short(key)), f, [key], {}, False,
                also=(KeyError,))
            if left_points:
                p = rng.choice(left_points)
                run("#%d %r.layer()" % (i, p), p.layer, [], {}, False)
            hp = [rng.choice(good_names + [value()]), value(), rng.choice([0, 1, value()])]
            if run("#%d HookPoint(%s)" % (i, short(hp)), attnlab.HookPoint, hp, {}, False):
                p = attnlab.HookPoint(*hp)
                run("#%d %r.layer()" % (i, p), p.layer, [], {}, False)
            a, snap = rng.choice(left_acts)
            if not np.array_equal(a, snap, equal_nan=True) and a.shape == snap.shape:
                fail("an activation a hook kept changed after its model went on or closed")
            run("#%d copy of a model" % i, copy.copy, [rng.choice(slots)], {}, False)

    # the open models give the forward they gave before all this
    still = 0
    for k, s in enumerate(slots):
        if is_open[k] != (s._h is not None):
            fail("model %d: the fuzz has it %s, the package %s" % (
                k, "open" if is_open[k] else "closed", "closed" if s._h is None else "open"))
        if is_open[k]:
            got, _ = s.forward(ids0)
            if not np.array_equal(got, logits0):
                fail("model %d's forward changed after the fuzz" % k)
            still += 1
    logf.close()
    def counts(d):
        return ", ".join("%s %d" % kv for kv in sorted(d.items()))

    print("ok fuzz: %d calls (seed %d): %s; %d calls on closed models raised 'the model is "
          "closed'; models closed or reopened between them: %s; %d models still open give "
          "their first forward" % (sum(tally.values()), seed, counts(tally), closed_refusals,
                                   counts(actions), still), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else int(os.environ.get("ATTNLAB_FUZZ_SEED", 40))
    calls = int(sys.argv[4]) if len(sys.argv) > 4 else 1500
    sys.exit(parent(sys.argv[1], sys.argv[2], seed, calls))
