/* test_torch.c -- the engine against an independent PyTorch model.
 *
 * Each test trains a small model with the CLI for a few steps (so the
 * weights are not just the initialisation), dumps the engine's logits,
 * loss, every gradient, ∂L/∂gates and an AdamW trajectory with
 * `attnlab debug-dump` under non-trivial gates, and lets
 * tests/torch_ref.py (written from DESIGN §2, float64) recompute all of
 * it: exit 0 means every per-tensor error ||c - torch|| / ||torch|| is
 * <= 1e-4. Skipped only when PyTorch cannot be imported. */
#include <stdlib.h>
#include <string.h>

#include "attnlab/data.h"
#include "test.h"

#define PY "/usr/bin/python3"

/* n byte tokens of text-like data: words from a small list, so the model
 * has something to learn in a few steps. */
static void write_tokens(const char *path, size_t n) {
    static const char *words[] = {"the",  "cat", "sat",   "on",   "a",     "mat",
                                  "and",  "dog", "ate",   "bone", "Mary",  "John",
                                  "went", "to",  "store", "gave", "drink", "."};
    int *ids = malloc(sizeof(int) * n);
    al_rng r;
    al_rng_seed(&r, 2024);
    size_t i = 0;
    while (i < n) {
        const char *w = words[al_rng_below(&r, sizeof words / sizeof *words)];
        for (; *w && i < n; w++) ids[i++] = (unsigned char)*w;
        if (i < n) ids[i++] = ' ';
    }
    al_err e;
    CHECK_OK(al_tokens_save(path, ids, n, &e), &e);
    free(ids);
}

/* Train with train_flags into dir, unless it exists already. */
static int train(const char *dir, const char *train_flags) {
    int rc = t_sh("%s train --data %s --out %s --steps 5 --batch 4 --warmup 1 "
                  "--eval-every 0 --eval-batches 1 %s > %s 2>&1",
                  t_bin(), t_path("tok.bin"), dir, train_flags, t_path("train.log"));
    CHECKF(rc == 0, "train %s failed (%d): %s", train_flags, rc, t_slurp(t_path("train.log")));
    return rc;
}

/* Dump the engine's numbers for `model` and run torch_ref.py on them
 * against `ref_model`; returns torch_ref's exit code (skips the test if
 * PyTorch is missing). The output is left in t_path("ref.out"). */
static int crosscheck(const char *model, const char *ref_model, const char *dump_flags) {
    const char *dump = t_path("dump.safetensors");
    int rc = t_sh("%s debug-dump --model %s --data %s --out %s --adam-steps 10 --lr 1e-3 "
                  "--weight-decay 0.1 --grad-clip 1.0 %s > %s 2>&1",
                  t_bin(), model, t_path("tok.bin"), dump, dump_flags, t_path("dump.log"));
    CHECKF(rc == 0, "debug-dump failed (%d): %s", rc, t_slurp(t_path("dump.log")));
    if (rc != 0) return -1;
    rc = t_sh(PY " tests/torch_ref.py --model %s --dump %s > %s 2>&1", ref_model, dump,
              t_path("ref.out"));
    if (rc == 77) t_skip("PyTorch not installed");
    if (rc == 127) t_skip(PY " not found");
    return rc;
}

/* Every compared quantity appears in the report, so a passing run did
 * compare all of them. */
static void check_covered(int n_layers, int tied) {
    char *out = t_slurp(t_path("ref.out"));
    CHECK(out != NULL);
    if (!out) return;
    const char *always[] = {"logits",     "loss",         "grad.embed.W_E", "grad.pos_embed.W_pos",
                            "grad.gates", "adam_loss[0]", "adam_loss[10]"};
    for (size_t i = 0; i < sizeof always / sizeof *always; i++)
        CHECKF(strstr(out, always[i]) != NULL, "torch_ref did not compare %s", always[i]);
    for (int l = 0; l < n_layers; l++)
        for (int w = 0; w < 4; w++) {
            char name[64];
            snprintf(name, sizeof name, "grad.blocks.%d.attn.W_%c", l, "QKVO"[w]);
            CHECKF(strstr(out, name) != NULL, "torch_ref did not compare %s", name);
        }
    CHECKF((strstr(out, "grad.unembed.W_U") != NULL) == !tied,
           "grad.unembed.W_U should be compared iff untied");
    free(out);
}

static void run_case(const char *train_flags, const char *gates, int n_layers, int tied,
                     int batch) {
    write_tokens(t_path("tok.bin"), 20000);
    const char *dir = t_path("model");
    if (train(dir, train_flags) != 0) return;
    char dflags[512];
    snprintf(dflags, sizeof dflags, "--batch %d --gates %s", batch, gates);
    int rc = crosscheck(dir, dir, dflags);
    CHECKF(rc == 0, "torch_ref.py exit %d:\n%s", rc, t_slurp(t_path("ref.out")));
    check_covered(n_layers, tied);
}

TEST(torch_crosscheck_2layer) {
    run_case("--n-layers 2 --d-model 64 --n-heads 4 --d-head 16 --n-ctx 32 --seed 5",
             "0.5,1,1.5,0.25,2,1,0.75,1.25", 2, 0, 3);
}

TEST(torch_crosscheck_tied) {
    run_case("--n-layers 2 --d-model 64 --n-heads 4 --d-head 16 --n-ctx 32 --seed 6 --tied",
             "1,0.5,1.25,2,0.75,1,1.5,0.25", 2, 1, 3);
}

/* The default sizes of DESIGN §2 (2 layers, d_model 256, 8x32 heads,
 * n_ctx 256), one head switched off (gate 0: its weights get exactly
 * zero gradient, its gate does not). */
TEST(torch_crosscheck_default_size) {
    run_case("--n-layers 2 --seed 7", "1,0.5,0,1.5,1,2,0.75,1.25,1,1,1.5,1,0.5,1,1,2", 2, 0, 2);
}

/* Shortformer positions (W_pos in every head's q and k inputs only), as
 * torch_ref.py computes them from positional_embedding_type: 2 layers
 * so the second layer's q/k read positions and a residual without them;
 * and 1 layer tied. */
TEST(torch_crosscheck_shortformer) {
    run_case(
        "--n-layers 2 --d-model 64 --n-heads 4 --d-head 16 --n-ctx 32 --seed 8 --pos shortformer",
        "0.5,1,1.5,0.25,2,1,0.75,1.25", 2, 0, 3);
    char *out = t_slurp(t_path("ref.out"));
    CHECK(out && strstr(out, "pos=shortformer") != NULL);
    free(out);
}

TEST(torch_crosscheck_shortformer_tied) {
    run_case("--n-layers 1 --d-model 64 --n-heads 4 --d-head 16 --n-ctx 32 --seed 9 --tied "
             "--pos shortformer",
             "1,0.5,1.25,2", 1, 1, 3);
}

/* LayerNorm and biases (TransformerLens's LN, every bias; LNPre with some
 * biases, shortformer, tied): trained by the CLI, then logits, loss, every
 * gradient and an AdamW trajectory (no decay on LayerNorm weights and
 * biases) against torch_ref.py. */
TEST(torch_crosscheck_ln_biases) {
    run_case("--n-layers 2 --d-model 64 --n-heads 4 --d-head 16 --n-ctx 32 --seed 10 --norm ln "
             "--biases all",
             "0.5,1,1.5,0.25,2,1,0.75,1.25", 2, 0, 3);
    char *out = t_slurp(t_path("ref.out"));
    CHECK(out && strstr(out, "norm=LN biases=b_K,b_O,b_Q,b_U,b_V") &&
          strstr(out, "grad.blocks.1.ln1.w") && strstr(out, "grad.ln_final.b") &&
          strstr(out, "grad.blocks.0.attn.b_O") && strstr(out, "grad.unembed.b_U"));
    free(out);
}

TEST(torch_crosscheck_lnpre_shortformer_tied) {
    run_case("--n-layers 2 --d-model 64 --n-heads 4 --d-head 16 --n-ctx 32 --seed 11 --norm lnpre "
             "--biases qkvo --pos shortformer --tied",
             "1,0.5,1.25,2,0.75,1,1.5,0.25", 2, 1, 3);
    char *out = t_slurp(t_path("ref.out"));
    CHECK(out && strstr(out, "norm=LNPre biases=b_K,b_O,b_Q,b_V") &&
          strstr(out, "grad.blocks.1.attn.b_V") && !strstr(out, "ln1.w"));
    free(out);
}

/* The check can fail: engine numbers of one model against the weights of
 * another (different seed) must be rejected. */
TEST(torch_crosscheck_detects_mismatch) {
    write_tokens(t_path("tok.bin"), 20000);
    const char *common = "--n-layers 1 --d-model 32 --n-heads 2 --d-head 16 --n-ctx 16";
    char f[256];
    snprintf(f, sizeof f, "%s --seed 1", common);
    if (train(t_path("a"), f) != 0) return;
    snprintf(f, sizeof f, "%s --seed 2", common);
    if (train(t_path("b"), f) != 0) return;
    int rc = crosscheck(t_path("a"), t_path("b"), "--batch 2");
    char *out = t_slurp(t_path("ref.out"));
    CHECKF(rc == 1, "torch_ref.py should report a mismatch (exit 1), got %d:\n%s", rc,
           out ? out : "");
    CHECK(out && strstr(out, "FAIL") != NULL);
    free(out);
}
