#!/usr/bin/python3
"""py_doc_examples.py DOC M2 M1 PLANTED WORK ATTNLAB_BIN -- the examples of
docs/python.md run as written (the blocks after `<!-- example X -->`, at
most ten lines each, one namespace, model paths pointed at the test's
models), each checked against something independent:
  a   the loss change of zeroing head 1.3's pattern = `attnlab ablate
      --heads 1.3 --method zero` (gate 0) on the same tokens
  b   steered − base logits = vec · W_U
  c   writes the pair and its per-head estimates to WORK/attrpatch.txt;
      test_python.c compares them with al_attrpatch_run's
  d*  the induction tutorial on the planted circuit (tests/planted.h): the
      repeat is predicted, 0.0 is the previous-token head, 1.0 the
      induction head, ablating it costs loss, the direct logit
      attribution adds up to the logits and names 1.0.
Prints one line per check, exits 1 on the first mismatch."""
import contextlib
import io
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
doc, m2, m1, planted, work, binary = sys.argv[1:7]


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


blocks = dict(re.findall(r"<!-- example (\w+) -->\n```python\n(.*?)```", open(doc).read(), re.S))
want = ["a", "b", "c", "d1", "d2", "d3", "d4", "d5"]
for k in want:
    if k not in blocks or len(blocks[k].strip().splitlines()) > 10:
        fail("docs/python.md: example %s missing or over ten lines" % k)
ns = {}


def run(name, paths):
    code = blocks[name]
    for a, b in paths.items():
        code = code.replace(a, b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/python.md example " + name, "exec"), ns)
    return out.getvalue().strip()


tiny = {"notebooks-out/demo/models/2l": m2, "notebooks-out/demo/models/1l": m1}

# a: the hook's ablation against the CLI's
out_a = run("a", tiny)
ids = np.asarray(ns["ids"])
hdr = np.zeros(256, np.int32)
hdr[:3] = [20240520, 1, len(ids)]
tokfile = os.path.join(work, "rep.bin")
with open(tokfile, "wb") as f:
    f.write(hdr.tobytes() + ids.astype("<u2").tobytes())
doc_a = json.loads(subprocess.run(
    [binary, "ablate", "--model", m2, "--db", os.path.join(work, "abl.db"), "--data", tokfile,
     "--heads", "1.3", "--method", "zero", "--batches", "1", "--batch", "1", "--probe-r", "4",
     "--probe-n", "1", "--json"], check=True, capture_output=True).stdout)
cli = doc_a["configurations"][0]
hook = ns["ablated"] - ns["clean"]
if doc_a["T"] != len(ids) - 1 or abs(doc_a["clean_loss"] - ns["clean"]) > 1e-5 or \
        abs(cli["delta_loss"] - hook) > 1e-5 or abs(hook) < 1e-3:
    fail("a: hook %.7f (clean %.7f), ablate --method zero %.7f (clean %.7f, T %d)"
         % (hook, ns["clean"], cli["delta_loss"], doc_a["clean_loss"], doc_a["T"]))
print("ok a: %s; Δloss %.6f = attnlab ablate's %.6f" % (out_a, hook, cli["delta_loss"]))

# b: steering is exact
out_b = run("b", tiny)
shift = ns["vec"] @ ns["m1"].W_U
err = np.abs(ns["steered"] - ns["base"] - shift).max() / np.abs(shift).max()
if err > 1e-5 or float(out_b) > 1e-3:
    fail("b: logits moved by vec . W_U to %.3g relative (printed %s)" % (err, out_b))
print("ok b: logits moved by vec . W_U to %.2g relative (printed %s)" % (err, out_b))

# c: the estimates, for test_python.c to compare with al_attrpatch_run
out_c = run("c", tiny)
est = ns["est"] / (ns["m_clean"] - ns["m_corr"])
if est.shape != (2, 4) or not np.isfinite(est).all():
    fail("c: estimates %s" % est)
with open(os.path.join(work, "attrpatch.txt"), "w") as f:
    f.write("%d %d %d %.17g %.17g\n" % (len(ids), ns["pos"], ns["answer"], ns["m_clean"],
                                        ns["m_corr"]))
    f.write(" ".join(str(int(x)) for x in ids) + "\n")
    f.write(" ".join(str(int(x)) for x in ns["corrupted"]) + "\n")
    f.write(" ".join("%.17g" % x for x in est.ravel()) + "\n")
print("ok c: estimates written (%s)" % " ".join(out_c.split()))

# d: the tutorial on the planted induction circuit
pl = {"notebooks-out/demo/models/2l": planted}
out = run("d1", pl)
R, loss = ns["R"], ns["loss"]
if not (loss[:, R:].mean() < 0.5 < 2.0 < loss[:, :R - 1].mean()):
    fail("d1: loss %s" % out)
out += " | " + run("d2", pl).replace("\n", " | ")
p0 = ns["cache"]["pattern", 0].mean(0)
if np.diagonal(p0, -1, axis1=1, axis2=2).mean(1)[0] < 0.9:
    fail("d2: head 0.0 is not the previous-token head: %s" % out)
out += " | " + run("d3", pl).replace("\n", " ")
if (ns["layer"], ns["head"]) != (1, 0) or ns["scores"][1, 0] < 0.8:
    fail("d3: induction scores %s" % ns["scores"])
out += " | " + run("d4", pl)
if ns["ablated"][:, R:].mean() - loss[:, R:].mean() < 1.0:
    fail("d4: ablating 1.0: %s" % out)
out5 = run("d5", pl).splitlines()
total = ns["direct"] + ns["heads"].sum((0, 3))
err = np.abs(total - ns["correct"]).max() / np.abs(ns["correct"]).max()
share = ns["heads"][:, :, R:].mean((1, 2))
if err > 1e-5 or np.unravel_index(share.argmax(), share.shape) != (1, 0):
    fail("d5: the parts miss the logit by %.3g relative; shares %s" % (err, share))
print("ok d: %s | d5: parts sum to the logit (%.2g relative), 1.0 the largest share"
      % (" ".join(out.split()), err))
