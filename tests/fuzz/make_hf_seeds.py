#!/usr/bin/env python3
"""Regenerate the seed corpus of tests/fuzz/fuzz_hf_tokenizer.c (maintainer
tool, not run by make): python3 tests/fuzz/make_hf_seeds.py

Small Hugging Face tokenizer.json files over the 256-character ByteLevel
alphabet, one per supported feature, each followed by a text to encode
(the loader ignores what follows the JSON value)."""
import json, os

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_tokenizer")


def byte_chars():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BC = byte_chars()
G = BC[32]  # "Ġ", a space


def tok(merges, pre=None, norm=None, added=(), pair_merges=False, **model):
    vocab = {BC[b]: b for b in range(256)}
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    t = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [], "normalizer": norm,
        "pre_tokenizer": pre or {"type": "ByteLevel", "add_prefix_space": False,
                                 "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True,
                           "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": dict({"type": "BPE", "dropout": None, "unk_token": None,
                       "continuing_subword_prefix": "", "end_of_word_suffix": "",
                       "fuse_unk": False, "byte_fallback": False, "ignore_merges": False},
                      **model),
    }
    for content, special, normalized, lstrip, rstrip in added:
        i = vocab.get(content, None)
        if i is None:
            i = len(vocab) + sum(1 for a in t["added_tokens"] if a["id"] >= len(vocab))
        t["added_tokens"].append({"id": i, "content": content, "single_word": False,
                                  "lstrip": lstrip, "rstrip": rstrip,
                                  "normalized": normalized, "special": special})
    t["model"]["vocab"] = vocab
    t["model"]["merges"] = [[a, b] for a, b in merges] if pair_merges else \
        ["%s %s" % (a, b) for a, b in merges]
    return t


def bl(prefix=False, regex=True):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True,
            "use_regex": regex}


def put(name, t, text):
    os.makedirs(here, exist_ok=True)
    with open(os.path.join(here, name), "wb") as f:
        f.write(json.dumps(t, ensure_ascii=False).encode() + text.encode())


M = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (G, "w"), ("o", "r"), (G + "w", "or"),
     ("l", "d"), (G + "wor", "ld"), ("1", "2")]
EOT = [("<|endoftext|>", True, False, False, False)]
put("gpt2-like.json", tok(M, added=EOT), "hello world<|endoftext|>hello  12")
put("pairs-nfc.json", tok(M, norm={"type": "NFC"}, pair_merges=True,
                          added=EOT + [("  ", False, False, False, False)]),
    "cafe\u0301  hello \u00e9")
put("digits.json", tok(M, pre={"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True}, bl()]}), "a123 b\u00b2\u00b3 world")
put("split.json", tok(M, pre={"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+"},
     "behavior": "Isolated", "invert": False}, bl(True, False)]}, ignore_merges=True),
    "hello world 123456")
put("split-string.json", tok(M, pre={"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"String": ","}, "behavior": "MergedWithNext",
     "invert": True}, bl(False, False)]}), "a,,b,c")
put("strip.json", tok(M, added=[("<m>", False, False, True, True),
                                ("\u0151", False, True, False, False)],
                      norm={"type": "Sequence", "normalizers": [{"type": "NFC"}]}),
    "x  <m>  y o\u030b")
put("template.json", dict(tok(M, added=EOT), post_processor={
    "type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [], "special_tokens": {}}), "hello")
