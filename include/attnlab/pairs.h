/* pairs.h -- clean / corrupted token pairs for activation and path
 * patching (docs/design.md §5): the `names` task and the user's own JSONL
 * pair files. (The `induction` task is built in analysis, from the
 * scores probe: patch.h.)
 *
 * A pair set is N pairs of token sequences, padded to one length T; the
 * two sequences of a pair always have the same length len[n] <= T (a
 * patch at position t means the same t in both). Pads (beyond len[n])
 * hold token 0 and are never scored: attention is causal, so they change
 * no earlier position. The metric is read at items, each naming a pair,
 * a position and an answer token:
 *   logit_diff = 1:  logit(answer) − logit(wrong) at (pair, pos)
 *   logit_diff = 0:  log p(answer | tokens 0..pos) (wrong = −1)
 * and M is the mean over all items. */
#ifndef ATTNLAB_PAIRS_H
#define ATTNLAB_PAIRS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "attnlab/data.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

typedef struct al_pair_item {
    int pair; /* 0..N−1 */
    int pos; /* 0..len[pair]−1 */
    int answer; /* token id */
    int wrong; /* token id, or −1 when the metric is a log-prob */
} al_pair_item;

typedef struct al_pairs {
    char task[16]; /* "induction", "names" or "file" */
    int N, T; /* pairs; the longest pair's length */
    int *clean, *corr; /* (N, T) each, 0-padded; one allocation with len */
    int *len; /* (N) */
    int n_items;
    al_pair_item *items; /* sorted by pair, then pos */
    int logit_diff; /* 1: logit differences, 0: log-probs */
} al_pairs;

void al_pairs_free(al_pairs *p);
/* The pairs idx[0..n) of t (repeats allowed: a bootstrap resample), in
 * that order, each with its items (renumbered to its new index); same
 * task, T and metric. 0, or −1 with e (an index outside t, n < 1, out
 * of memory; *out zeroed). *out is the caller's (al_pairs_free). */
int al_pairs_pick(const al_pairs *t, const int *idx, int n, al_pairs *out, al_err *e);
/* A 64-bit fingerprint (FNV-1a) of everything that defines the pair set:
 * task, sizes, lengths, both token arrays and the items. Stored with a
 * patching run, so a picture that re-makes the task later can tell that
 * it is no longer the same (a pair file edited since). */
uint64_t al_pairs_hash(const al_pairs *p);

/* Parse a JSONL pair file's text (n bytes, need not be NUL-terminated):
 * one object per line, {"clean": "...", "corrupted": "...", "answer":
 * " x", "wrong": " y"}, encoded with tok. Each pair is scored at its
 * last position (logit_diff = 1). Refused, with one line naming the line
 * number (1-based) and what is wrong: an empty or blank line (a single
 * trailing newline at the end of the file is fine), text that is not a
 * JSON object, a missing, repeated or non-string field, an unknown
 * field, a clean and corrupted text whose token lengths differ, an answer
 * or wrong that is not exactly one token, answer == wrong, an empty text,
 * a text holding \u0000, a text longer than n_ctx tokens, more than
 * 1000000 pairs. Texts are bytes (invalid UTF-8 is fine; the tokenizer
 * is byte-level), a line may end in \r\n, and the literal text
 * "<|endoftext|>" is the special token (so a pair can begin with the BOS
 * the model was trained with). Pairs may differ in length from line to
 * line (padded to the longest). Nothing is assigned on error (*out
 * zeroed). 0 or −1; *out is the caller's (al_pairs_free). */
int al_pairs_parse_jsonl(const char *text, size_t n, const al_tokenizer *tok, int n_ctx,
                         al_pairs *out, al_err *e);
/* The same from a file (at most 256 MiB); errors name the file. */
int al_pairs_load_jsonl(const char *path, const al_tokenizer *tok, int n_ctx, al_pairs *out,
                        al_err *e);

/* The `names` task: n held-out synthetic stories (synth.h) generated
 * with seed (documented to differ from any corpus seed the project's
 * experiments use), each with an invented name of >= 2 tokens that
 * occurs at least twice. Clean = the story's tokens up to and including
 * the first piece of the name's second occurrence (BOS first when bos >=
 * 0); corrupted = the same with the first occurrence's tokens replaced by
 * another invented name with the same number of tokens, the same first
 * piece and a different second piece (not a name of the story), so that
 * copying what followed the first piece earlier gives answer in the
 * clean run and wrong in the corrupted one. One item per pair at the last
 * position: answer = the name's second piece, wrong = the replacement's
 * second piece (logit_diff = 1). With key set (task "names-key") the
 * replacement differs in its first piece as well as its second, so the
 * last position's piece occurs nowhere earlier in the corrupted run:
 * what differs is where an induction head finds something to attend to
 * (the key side, through the previous-token head), not only what it
 * copies (the value side, the only side the default variant changes).
 * The name is written " Name" (after a
 * space, one pre-split piece) at both occurrences, and mentioned nowhere
 * else before the second; of several such names, the one whose second
 * occurrence comes first. Stories with no such name, whose pair does
 * not fit n_ctx (never cut to fit), or with no replacement found in 2000
 * draws are skipped; −1 with e if n usable stories are not found within
 * 100·n + 1000 tries. The stories are synth.h's stream with seed
 * seed ^ AL_PAIRS_NAMES_SEED_XOR and repeat_fraction 0: for any seed
 * < 2^62 that stream seed is >= 2^62, so no corpus the project's
 * experiments or demo write (seeds 1, 2, 3, 779) is ever a names task.
 * Deterministic in (tok, n, seed, n_ctx, bos). A large n takes a while
 * (up to 100·n + 1000 stories), so stop, if non-NULL, is read before
 * every story: once it is set (by a signal handler, stop.h), −1 with
 * "interrupted" and nothing assigned (*out zeroed). */
#define AL_PAIRS_NAMES_SEED_XOR 0x6e616d6573000000ULL /* "names" << 24 */
int al_pairs_names(const al_tokenizer *tok, int n, uint64_t seed, int n_ctx, int bos, int key,
                   volatile sig_atomic_t *stop, al_pairs *out, al_err *e);
/* The names task on held-out real text: up to n stories of val with an
 * invented name inserted twice (al_names_in_text, names_text.h: the
 * insertions of `attnlab names`, seed and n_ctx passed on), each a pair
 * as above (clean up to and including the second appearance's first
 * piece, which begins with BOS; corrupted with the first appearance
 * replaced by another invented name of as many pieces, the same first
 * piece and another second one, or with key set another first piece
 * too; written in lower case where the story is). Task "names-text" or
 * "names-text-key". Fewer than n pairs is fine (out->N says how many),
 * none is an error; −1 with e as al_names_in_text fails. Deterministic in
 * its arguments. *out is the caller's (al_pairs_free). With code set the
 * items are held-out functions with a variable renamed instead
 * (al_idents_in_code): the first use is replaced, and only renames whose
 * first piece begins a word (a space, then letters) are kept, as the
 * replacement is written " name"; task "idents" or "idents-key". */
int al_pairs_names_text(const al_tokenizer *tok, const al_tokens *val, int n, uint64_t seed,
                        int n_ctx, int key, int code, al_pairs *out, al_err *e);

/* 0 if pair set t fits a model of context n_ctx and vocabulary d_vocab:
 * at least one pair and one item, T <= n_ctx, every token and answer id
 * in range (wrong −1 or in range), items in pair order, each inside its
 * pair. Else −1 with e naming the task and the first offender; every
 * analysis checks a task with this before running it. */
int al_pairs_check(const al_pairs *t, int n_ctx, int d_vocab, al_err *e);
/* The items of pairs [n0, n0 + nb) (items are in pair order): *i0 gets
 * the first one's index, the count is returned (0: none, *i0 where they
 * would start). For analyses that run the pairs in batches. */
int al_pairs_batch_items(const al_pairs *t, int n0, int nb, int *i0);

/* Plain text as a pair set, for analyses that read only clean runs
 * (attribute --data): n windows of T + 1 tokens of d spread evenly over
 * the file as validation batches are (al_batch_fixed with B = n, one
 * batch); clean = corr = the window's first T tokens; one item at every
 * position t, answer = the token after it (logit_diff = 0); task "data".
 * −1 with e (nothing assigned): n outside 1..1000000, T < 1, a file of
 * at most T tokens, an id >= d_vocab (naming it), out of memory. */
int al_pairs_from_tokens(const al_tokens *d, int T, int n, int d_vocab, al_pairs *out, al_err *e);

#endif
