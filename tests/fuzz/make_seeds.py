#!/usr/bin/env python3
"""Regenerate the seed corpora of tests/fuzz/ (maintainer tool, not run by
make): python3 tests/fuzz/make_seeds.py build/attnlab

Seeds are small valid files of every kind written by attnlab itself (a
tiny model trained for 2 steps), plus hand-made edge cases next to each
validation rule. libFuzzer mutates from these."""
import json, os, struct, subprocess, sys, tempfile

binary = sys.argv[1] if len(sys.argv) > 1 else "build/attnlab"
here = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(here, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def st_file(tensors, meta=None, header_override=None):
    """safetensors bytes: tensors = [(name, dtype, shape, bytes)]."""
    hdr, data = {}, b""
    for name, dt, shape, raw in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if meta is not None:
        hdr["__metadata__"] = meta
    h = header_override if header_override is not None else json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data


def tokens_file(ids, count=None):
    hdr = [20240520, 1, len(ids) if count is None else count] + [0] * 253
    return struct.pack("<256I", *hdr) + struct.pack("<%dH" % len(ids), *ids)


with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "c.txt")
    with open(corpus, "w") as f:
        f.write("the cat sat on the mat. Bamurik saw Bamurik. ' \"q\" \\ é\n\n" * 40)
    run = lambda *a: subprocess.run([binary, *a], check=True, capture_output=True)
    run("tokenizer", "train", "--in", corpus, "--vocab", "280", "--out", tmp + "/tok.json")
    run("encode", "--tokenizer", tmp + "/tok.json", "--in", corpus, "--out", tmp + "/c.bin",
        "--val", "0.1")
    run("train", "--data", tmp + "/c.train.bin", "--val", tmp + "/c.val.bin", "--tokenizer",
        tmp + "/tok.json", "--out", tmp + "/m", "--steps", "2", "--d-model", "8",
        "--n-heads", "2", "--d-head", "4", "--n-ctx", "8", "--batch", "2", "--threads", "1")
    m = tmp + "/m/"
    put("config", "config.json", open(m + "config.json", "rb").read())
    put("config", "state.json", open(m + "state.json", "rb").read())
    put("tokenizer", "tokenizer.json", open(m + "tokenizer.json", "rb").read())
    put("safetensors", "model.safetensors", open(m + "model.safetensors", "rb").read())
    ids = list(struct.unpack("<%dH" % ((os.path.getsize(tmp + "/c.val.bin") - 1024) // 2),
                             open(tmp + "/c.val.bin", "rb").read()[1024:]))
    put("tokens", "val.bin", tokens_file(ids[:200]))
    run("tokenizer", "train", "--in", corpus, "--vocab", "257", "--out", tmp + "/t0.json")
    put("tokenizer", "bytes-only.json", open(tmp + "/t0.json", "rb").read())

f32 = lambda *v: struct.pack("<%df" % len(v), *v)
put("safetensors", "one.st", st_file([("a", "F32", [2], f32(1, 2))], {"format": "pt"}))
put("safetensors", "two.st", st_file([("embed.W_E", "F32", [2, 2], f32(1, 2, 3, 4)),
                                      ("x", "I32", [1], struct.pack("<i", 7))]))
put("safetensors", "empty.st", st_file([]))
put("safetensors", "zero-dim.st", st_file([("z", "F32", [0, 3], b"")]))
put("safetensors", "nan.st", st_file([("n", "F32", [1], f32(float("nan")))]))
put("safetensors", "huge-len.st", struct.pack("<Q", 1 << 63) + b"{}")
put("safetensors", "overlap.st", st_file([], header_override=json.dumps(
    {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
     "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()) + f32(1))
put("safetensors", "big-shape.st", st_file([], header_override=json.dumps(
    {"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}}).encode()))

cfgs = {
    "flags.json": '{"out_dir": "x", "steps": 3, "lr": 0.5, "tied": true, "seed": "18446744073709551615"}',
    "flags-null.json": '{"out-dir": null, "seed": 12}',
    "deep.json": "[" * 120 + "]" * 120,
    "unicode.json": '{"out_dir": "\\u00e9\\ud83d\\ude00", "lr": 1e308}',
    "state-inf.json": '{"attnlab_version": "0.1.0", "step": 3, "tokens_seen": 1e400, '
                      '"last_train_loss": null, "last_val_loss": -0.0, '
                      '"rng": ["0", "1", "ffffffffffffffff", "0123456789abcdef"], "train": {"a": 1}}',
    "dup.json": '{"steps": 1, "steps": 2}',
    "config-ln.json": '{"n_layers": 2, "d_model": 8, "n_heads": 2, "d_head": 4, "n_ctx": 8, '
                      '"d_vocab": 280, "attn_only": true, "normalization_type": "LN", '
                      '"eps": 1e-06, "biases": ["b_Q", "b_K", "b_V", "b_O", "b_U"], '
                      '"positional_embedding_type": "shortformer", "use_attn_scale": true, '
                      '"attn_scale": 2, "attention_dir": "causal", "n_key_value_heads": null, '
                      '"d_mlp": null, "tied_embeddings": false, "seed": 1337}',
}
for k, v in cfgs.items():
    put("config", k, v)

put("tokenizer", "bad-merge.json", json.dumps(
    {"type": "bpe-bytes", "version": 1, "pretokenizer": "gpt2", "vocab_size": 258,
     "eot_id": 257, "merges": [[300, 1]], "vocab": [""] * 258}))

put("tokens", "empty.bin", tokens_file([]))
put("tokens", "liar.bin", tokens_file([1, 2, 3], count=1 << 31))
put("tokens", "short.bin", b"\x28\x0f\x35\x01")
put("tokens", "max-id.bin", tokens_file([65535, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]))

masks = {
    "mask.json": '{"attnlab_mask": 1, "n_layers": 2, "n_heads": 8, "off": ["0.3", "1.4"], '
                 '"method": "gradient", "budget": 0.1, "seed": 1, "base_loss": 2.5, '
                 '"loss": 2.6, "heads_left": 14}',
    "empty.json": '{"n_layers": 2, "n_heads": 8, "off": []}',
    "list.txt": "0.1,1.7,0.0",
    "bad.json": '{"n_layers": 2, "n_heads": 8, "off": ["9.9", "0.-1", "1.4,0.3"]}',
}
for k, v in masks.items():
    put("mask", k, v)

bpe = {
    "story.txt": "Once upon a time, Bamurik saw a cat. Bamurik said \"hi\".",
    "eot.txt": "a<|endoftext|>b<|endoftext|<|endoftext|>>",
    "bytes.bin": bytes(range(256)),
    "utf8.txt": "héllo wörld 日本語 🙂  \t\n\r 's 't 're 'll",
    "spaces.txt": " " * 100 + "x" * 100 + "1" * 50,
}
for k, v in bpe.items():
    put("bpe", k, v)
def pair(clean, corrupted, answer, wrong, **extra):
    return json.dumps(dict(clean=clean, corrupted=corrupted, answer=answer, wrong=wrong, **extra))


pairs = {
    "good.jsonl": "\n".join([pair("ab", "xy", "c", "z"),
                             pair("Bamurik saw Bamurik", "Seoyeon saw Bamurik", " B", " S"),
                             pair("<|endoftext|>q", "\u00e9", " ", "\n")]) + "\n",
    "crlf.jsonl": pair("the cat", "the dog", " sat", " ran") + "\r\n" + pair("a", "b", "c", "d") + "\r\n",
    "no-newline.jsonl": pair("a", "b", "c", "d"),
    "two-newlines.jsonl": pair("a", "b", "c", "d") + "\n\n",
    "blank-line.jsonl": pair("a", "b", "c", "d") + "\n \t\n" + pair("a", "b", "c", "d") + "\n",
    "lengths.jsonl": pair("abc", "ab", "c", "d") + "\n",
    "answer-two.jsonl": pair("a", "b", "cd", "d") + "\n",
    "same.jsonl": pair("a", "b", "c", "c") + "\n",
    "empty-text.jsonl": pair("", "", "c", "d") + "\n",
    "unknown.jsonl": pair("a", "b", "c", "d", note="x") + "\n",
    "dup.jsonl": '{"clean": "a", "clean": "b", "corrupted": "b", "answer": "c", "wrong": "d"}\n',
    "types.jsonl": '{"clean": 1, "corrupted": null, "answer": ["c"], "wrong": {"d": 1}}\n',
    "nul-escape.jsonl": '{"clean": "a\\u0000b", "corrupted": "abc", "answer": "c", "wrong": "d"}\n',
    "not-object.jsonl": '[1, 2]\n"clean"\n{"clean": "a",\n',
    "long.jsonl": pair("x" * 70, "y" * 70, "c", "d") + "\n",
}
for k, v in pairs.items():
    put("pairs", k, v)


# circuit files (circuit_file.h), parsed for a 2-layer 8-head and a 1-layer 3-head graph
def edge(s, r, c, score=0.5):
    return {"sender": s, "receiver": r, "channel": c, "score": score}


def circuit(edges, **kw):
    d = {"format": "attnlab-circuit", "version": 1, "model_sha256": "0" * 64, "task": "induction",
         "method": "acdc", "metric": "kl", "tau": 0.01, "recover": None, "faithfulness": 0.9,
         "kl": 0.01, "graph_edges": 306, "n_edges": len(edges), "edges": edges}
    d.update(kw)
    return json.dumps(d, indent=1)


good = [edge("0.1", "1.2", "k"), edge("embed", "1.2", "q"), edge("pos", "0.0", "v", None),
        edge("1.2", "logits", "direct"), edge("embed", "logits", "direct")]
circuits = {
    "good.json": circuit(good),
    "one-layer.json": circuit([edge("embed", "0.2", "v"), edge("0.1", "logits", "direct")]),
    "empty-circuit.json": circuit([]),
    "bad-head.json": circuit([edge("0.1", "1.9", "k")]),
    "bad-edge.json": circuit([edge("1.2", "0.3", "q")]),
    "bad-channel.json": circuit([edge("0.1", "1.2", "o")]),
    "dup.json": circuit([edge("0.1", "1.2", "k"), edge("0.1", "1.2", "k")]),
    "count.json": circuit(good, n_edges=2),
    "missing.json": circuit([{"sender": "pos", "receiver": "logits", "score": 1}]),
    "version.json": circuit(good, version=2),
    "trailing.json": circuit(good) + " }",
}
for k, v in circuits.items():
    put("circuit", k, v)


# intervention files (fuzz_intervene: the JSON and the .npy reader on the same bytes)
def npy(major, descr, shape, data):
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    off = 10 if major == 1 else 12
    pad = (64 - (off + len(hdr) + 1) % 64) % 64
    h = (hdr + " " * pad + "\n").encode()
    size = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([major, 0]) + size + h + data


def iv(*ops, **kw):
    d = {"attnlab_intervention": 1, "ops": list(ops)}
    d.update(kw)
    return json.dumps(d)


interventions = {
    "zero-pattern.json": iv({"hook": "blocks.1.attn.hook_pattern", "head": 3, "op": "zero"}),
    "steer.json": iv({"hook": "blocks.0.hook_resid_post", "pos": -1, "op": "add",
                      "values": [0.5] * 16}, description="steer"),
    "scale-set.json": iv({"hook": "blocks.1.attn.hook_z", "head": 2, "op": "scale", "factor": 0.5},
                         {"hook": "blocks.0.attn.hook_pattern", "head": 0, "pos": 3, "op": "set",
                          "values": [1, 0, 0, 0]}),
    "npy-vector.json": iv({"hook": "blocks.0.attn.hook_q", "op": "add", "vector": "v.npy"}),
    "result-set.json": iv({"hook": "blocks.0.attn.hook_result", "head": 1, "pos": 7, "op": "set",
                           "values": [0] * 16}),
    "dup-key.json": '{"attnlab_intervention": 1, "ops": [{"hook": "blocks.0.attn.hook_z", '
                    '"op": "zero", "op": "zero"}]}',
    "f32.npy": npy(1, "<f4", "(4,)", struct.pack("<4f", 1, 2, 3, 4)),
    "f64.npy": npy(2, "<f8", "(3,)", struct.pack("<3d", 0.5, -1, 1e30)),
    "two-axes.npy": npy(1, "<f4", "(2, 2)", struct.pack("<4f", 1, 2, 3, 4)),
}
for k, v in interventions.items():
    put("intervene", k, v)
print("seeds written under", here)
