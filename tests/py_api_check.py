#!/usr/bin/python3
"""py_api_check.py MODEL_DIR WORK_DIR ATTNLAB_BIN -- the Python package
against the CLI: the tokenizer round-trips random bytes (non-UTF-8
included) with the ids `attnlab encode` writes; the forward pass's
probabilities are `attnlab run --json`'s; a cache's patterns sum to 1 per
row; an analysis run by name stores the rows the CLI stores. Prints one
line per check, exits 1 on the first mismatch."""
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import attnlab  # noqa: E402

model, work, binary = sys.argv[1:4]


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


m = attnlab.Model(model)
rng = random.Random(7)
# 1. random bytes, non-UTF-8 included: the CLI's ids, and back
for k in range(3):
    data = bytes(rng.randrange(256) for _ in range(300 + 100 * k))
    data = data.replace(b"<|endoftext|>", b"")
    src = os.path.join(work, "bytes%d.txt" % k)
    with open(src, "wb") as f:
        f.write(data)
    out = os.path.join(work, "bytes%d.bin" % k)
    subprocess.run([binary, "encode", "--tokenizer", os.path.join(model, "tokenizer.json"),
                    "--in", src, "--out", out, "--val", "0", "--docs", "eot"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    raw = open(out.replace(".bin", ".train.bin"), "rb").read()
    cli = np.frombuffer(raw[1024:], dtype="<u2").astype(np.int32)
    py = m.encode(data)
    if cli[0] != m.config["eot_id"] or not np.array_equal(cli[1:], py):
        fail("encode: %d CLI ids vs %d Python ids" % (len(cli) - 1, len(py)))
    if m.decode(py) != data:
        fail("decode(encode(bytes)) != bytes")
print("ok tokenizer: 3 random byte strings, ids equal to attnlab encode's, decode(encode) = bytes")
# 2. the forward pass against run --json
prompt = "the cat sat on the mat and the cat sat"
doc = json.loads(subprocess.run([binary, "run", "--model", model, "--prompt", prompt, "--json"],
                                check=True, capture_output=True).stdout)
ids = m.encode(prompt, bos=True)
logits, probs = m.forward(ids)
worst = 0.0
for tk in doc["tokens"]:
    if tk["id"] != ids[tk["pos"]]:
        fail("token %d: CLI id %d, Python %d" % (tk["pos"], tk["id"], ids[tk["pos"]]))
    for c in tk["top"]:
        worst = max(worst, abs(float(probs[0, tk["pos"], c["id"]]) - c["p"]))
sm = np.exp(logits - logits.max(-1, keepdims=True))
sm /= sm.sum(-1, keepdims=True)
if worst > 1e-6 or np.abs(sm - probs).max() > 1e-5:
    fail("forward: |p - run --json| %.3g, |softmax(logits) - p| %.3g" % (worst, np.abs(sm - probs).max()))
print("ok forward: top-5 probabilities equal run --json's (worst %.2g); softmax(logits) = probs" % worst)
_, cache = m.run_with_cache(ids, hooks=["pattern", "resid_post"])
L = m.config["n_layers"]
pat = cache["blocks.0.attn.hook_pattern"]
if pat.shape != (1, m.config["n_heads"], len(ids), len(ids)) or np.abs(pat.sum(-1) - 1).max() > 1e-5:
    fail("cache: pattern shape %s, row sums off by %.3g" % (pat.shape, np.abs(pat.sum(-1) - 1).max()))
x = cache["blocks.%d.hook_resid_post" % (L - 1)].astype(np.float64)
W, _ = attnlab.read_safetensors(os.path.join(model, "model.safetensors"))
lg = x @ W["unembed.W_U"]
if np.abs(lg - logits).max() > 1e-3:
    fail("cache: final residual . W_U differs from the logits by %.3g" % np.abs(lg - logits).max())
print("ok cache: pattern rows sum to 1, final residual . W_U = logits")
# 3. an analysis by name stores what the CLI stores
a, b = os.path.join(work, "py.db"), os.path.join(work, "cli.db")
# in process: nothing written on the process's stdout or stderr (no
# descriptor is redirected; the document comes back, warnings as warnings)
outs = [tempfile.TemporaryFile() for _ in range(2)]
saved = [os.dup(1), os.dup(2)]
sys.stdout.flush(), sys.stderr.flush()
os.dup2(outs[0].fileno(), 1), os.dup2(outs[1].fileno(), 2)
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = attnlab.analysis("scores", model=model, db=a, probe_r=6, probe_n=4)
finally:
    os.dup2(saved[0], 1), os.dup2(saved[1], 2)
said = [f.seek(0) or f.read() for f in outs]
if said != [b"", b""]:
    fail("analysis wrote on the process's stdout/stderr: %r" % said)
cli = subprocess.run([binary, "scores", "--model", model, "--db", b, "--probe-r", "6",
                      "--probe-n", "4", "--json"], check=True, capture_output=True)
dc = json.loads(cli.stdout)
if [str(w.message) for w in caught] != d["warnings"] or d["warnings"] != dc["warnings"]:
    fail("analysis warnings %s, raised %s, CLI %s" % (d["warnings"], caught, dc["warnings"]))
for k in ("db", "run"):
    d.pop(k), dc.pop(k)
if d != dc:
    fail("analysis: the document differs from scores --json's: %s"
         % sorted(k for k in set(d) | set(dc) if d.get(k) != dc.get(k)))
q = "SELECT layer, head, metric, value FROM head_scores ORDER BY layer, head, metric"
ra, rb = sqlite3.connect(a).execute(q).fetchall(), sqlite3.connect(b).execute(q).fetchall()
if not ra or ra != rb:
    fail("analysis: %d Python rows vs %d CLI rows, or values differ" % (len(ra), len(rb)))
# cJSON prints a double with 15 digits when they read back within an ulp or so
jv = np.array([h["induction"] for h in d["heads"]])
sv = np.array([r[3] for r in ra if r[2] == "induction"])
if jv.shape != sv.shape or np.abs(jv - sv).max() > 1e-14:
    fail("analysis: the JSON's induction scores are not the stored ones")
try:
    attnlab.analysis("scores", model=os.path.join(work, "nope"), db=a)
    fail("analysis on a missing model did not raise")
except attnlab.AttnlabError as e:
    if "nope" not in str(e):
        fail("error message does not name the folder: %s" % e)
print("ok analysis: scores by name in process: the document equals --json's, %d stored rows "
      "equal to the CLI's, nothing on stdout/stderr; errors raise with the CLI's line" % len(ra))
