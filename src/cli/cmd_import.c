/* cmd_import.c -- `attnlab import`: a TransformerLens checkpoint into a
 * model directory (import.h), optionally checked against a reference run
 * before the directory is written; and `attnlab compare`: a model
 * directory against such a reference (tlcompare.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/checkpoint.h"
#include "attnlab/import.h"
#include "attnlab/tlcompare.h"

static al_import_opts o;
static const char *o_out, *o_compare;
static int o_no_fold_ln, o_no_center_writing, o_no_center_unembed, o_no_fold_vb, o_list;
static int o_threads;
static double o_tol = 1e-4;

static al_flag flags[] =
    {{"checkpoint", AL_STR, &o.checkpoint, "FILE",
      "the state dict: torch.save file (.pth, .pt) or .safetensors, TransformerLens key names", 0,
      0},
     {"out", AL_STR, &o_out, "DIR", "the model directory to write (new, or an empty folder)", 0, 0},
     {"config", AL_STR, &o.config, "FILE",
      "config.json: TransformerLens's HookedTransformerConfig fields, or the hub format of "
      "NeelNanda's models",
      0, 0},
     {"preset", AL_STR, &o.preset, "NAME", "a published model's configuration (--list-presets)", 0,
      0},
     {"tokenizer", AL_STR, &o.tokenizer, "FILE", "tokenizer.json to put in the directory", 0, 0},
     {"n-layers", AL_INT, &o.n_layers, "N", "layers (else from the config or the checkpoint)", 0,
      0},
     {"d-model", AL_INT, &o.d_model, "N", "residual width", 0, 0},
     {"n-heads", AL_INT, &o.n_heads, "N", "heads per layer", 0, 0},
     {"d-head", AL_INT, &o.d_head, "N", "head width", 0, 0},
     {"n-ctx", AL_INT, &o.n_ctx, "N", "context length", 0, 0},
     {"d-vocab", AL_INT, &o.d_vocab, "N", "vocabulary size", 0, 0},
     {"norm", AL_STR, &o.norm, "TYPE", "none, LN or LNPre", 0, 0},
     {"positions", AL_STR, &o.positions, "TYPE", "standard or shortformer", 0, 0},
     {"eps", AL_FLOAT, &o.eps, "X", "LayerNorm eps (1e-5)", 0, 0},
     {"ignore-key", AL_STR, &o.ignore_keys, "K1,K2",
      "config keys that do not change the model, beyond the ones attnlab knows", 0, 0},
     {"prefix", AL_STR, &o.prefix, "P",
      "key prefix of the state dict inside the checkpoint (found when there is one)", 0, 0},
     {"no-fold-ln", AL_BOOL, &o_no_fold_ln, NULL, "keep LayerNorm's weights (no fold_ln)", 0, 0},
     {"no-center-writing-weights", AL_BOOL, &o_no_center_writing, NULL, "no center_writing_weights",
      0, 0},
     {"no-center-unembed", AL_BOOL, &o_no_center_unembed, NULL, "no center_unembed", 0, 0},
     {"no-fold-value-biases", AL_BOOL, &o_no_fold_vb, NULL, "no fold_value_biases", 0, 0},
     {"compare", AL_STR, &o_compare, "FILE",
      "check the imported model against a reference run (scripts/tl-compare.py) before writing", 0,
      0},
     {"tolerance", AL_FLOAT, &o_tol, "X", "largest relative error that passes --compare", 0, 0},
     {"list-presets", AL_BOOL, &o_list, NULL, "list the presets and exit", 0, 0},
     {"threads", AL_INT, &o_threads, "N", "threads (0: all cores)", 0, 0},
     AL_FLAGS_END};

static int run_import(int argc, char **argv);
al_command al_cmd_import = {
    "import",
    "a TransformerLens checkpoint (.pth/.pt/.safetensors) into a model directory",
    "--checkpoint FILE [--config config.json | --preset NAME] [--tokenizer tokenizer.json] "
    "--out DIR [options]",
    "Reads a state dict under TransformerLens's key names (torch.save files are read by a\n"
    "pickle reader that runs no code; float32, float16 and bfloat16) with its configuration:\n"
    "TransformerLens's config fields, the hub format of NeelNanda's models, a preset\n"
    "(--list-presets) or the flags, sizes nobody gave read off the tensors. A config key\n"
    "attnlab does not know is refused (--ignore-key names harmless ones); so is a model with\n"
    "MLP layers. The weights are processed as TransformerLens's from_pretrained does by\n"
    "default (fold_ln, center_writing_weights, center_unembed, fold_value_biases; for\n"
    "shortformer positions only fold_value_biases), each step optional; the model directory\n"
    "(config.json, model.safetensors, tokenizer.json, import.json with the sources' sha256)\n"
    "appears whole or not at all. docs/import.md walks through it.",
    flags,
    run_import,
};

static const char *norm_name(int n) {
    const char *s = al_norm_type_name(n);
    return s ? s : "none";
}

static void print_compare(const al_compare_result *r, double tol) {
    printf("%-44s %12s %12s %10s\n", "tensor", "max |diff|", "max |ref|", "rel");
    for (int k = 0; k < r->n; k++) {
        const al_compare_row *w = &r->rows[k];
        printf("%-44s %12.3e %12.3e %10.2e%s\n", w->name, w->max_abs, w->scale, w->rel,
               w->pass ? "" : "  FAIL");
    }
    if (r->skipped[0]) printf("not compared (split inputs): %s\n", r->skipped);
    if (r->pass)
        printf("compare: PASS, %d tensors on %d x %d tokens, worst relative error %.2e (%s), "
               "tolerance %.0e\n",
               r->n, r->B, r->T, r->worst, r->rows[r->worst_row].name, tol);
    else
        printf("compare: FAIL, worst relative error %.2e (%s), tolerance %.0e\n", r->worst,
               r->worst_row >= 0 ? r->rows[r->worst_row].name : "no tensors", tol);
}

static int list_presets(void) {
    for (const al_import_preset *p = al_import_presets(); p->name; p++)
        printf("%-18s %-50s %dL %d %dx%d n_ctx %d d_vocab %d norm %s %s\n", p->name, p->repo,
               p->cfg.n_layers, p->cfg.d_model, p->cfg.n_heads, p->cfg.d_head, p->cfg.n_ctx,
               p->cfg.d_vocab, norm_name(p->cfg.norm_type), al_pos_type_name(p->cfg.pos_type));
    return 0;
}

static int run_import(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e))
        return al_cli_usage(&al_cmd_import, &e);
    if (o_list) return list_presets();
    if (!o.checkpoint || !o_out) {
        al_errf(&e, "--checkpoint and --out are required");
        return al_cli_usage(&al_cmd_import, &e);
    }
    if (al_threads_check(o_threads, &e)) return al_cli_usage(&al_cmd_import, &e);
    if (!(o_tol > 0)) {
        al_errf(&e, "--tolerance must be positive");
        return al_cli_usage(&al_cmd_import, &e);
    }
    al_set_threads(o_threads);
    o.process =
        (al_process_opts){!o_no_fold_ln, !o_no_center_writing, !o_no_center_unembed, !o_no_fold_vb};
    if (al_import_out_check(o_out, &e)) return al_cli_error(&e);
    al_tokenizer *tok = NULL;
    if (o.tokenizer && al_tok_load(o.tokenizer, &tok, &e)) return al_cli_error(&e);
    al_model m;
    al_import_info info;
    memset(&info, 0, sizeof info);
    int rc = 1;
    if (al_import_model(&o, &m, &info, &e)) {
        al_tok_free(tok);
        return al_cli_error(&e);
    }
    const al_config *c = &m.cfg;
    if (tok && al_tok_vocab_size(tok) > c->d_vocab) {
        al_errf(&e, "tokenizer %s has %d tokens but the model's d_vocab is %d", o.tokenizer,
                al_tok_vocab_size(tok), c->d_vocab);
        goto done;
    }
    if (o_compare) {
        al_compare_result r;
        if (al_compare_run(&m, o_compare, o_tol, &r, &e)) goto done;
        print_compare(&r, o_tol);
        int pass = r.pass;
        al_compare_free(&r);
        if (!pass) {
            al_errf(&e, "the imported model does not match %s: nothing written", o_compare);
            goto done;
        }
    }
    if (al_import_write(o_out, &o, &m, tok, &info, &e)) goto done;
    char procs[128] = "";
    size_t n = 0;
    for (unsigned b = 1; b <= AL_PROC_FOLD_VALUE_BIASES; b <<= 1)
        if (info.processed & b)
            n += (size_t)snprintf(procs + n, sizeof procs - n, "%s%s", n ? ", " : "",
                                  al_process_name(b));
    char bias[64] = "";
    size_t k = 0;
    for (unsigned b = 1; b <= AL_BIAS_U; b <<= 1)
        if (c->biases & b)
            k += (size_t)snprintf(bias + k, sizeof bias - k, "%s%s", k ? " " : "", al_bias_name(b));
    printf("imported %s (%s config, %s, %d tensors, %d buffers skipped%s%s)\n", o.checkpoint,
           info.config_format, info.dtype, info.n_read, info.n_skipped,
           info.prefix[0] ? ", state dict under " : "", info.prefix);
    printf("model: %d layers, d_model %d, %d heads x %d, n_ctx %d, d_vocab %d, normalization %s, "
           "%s positions, biases %s\n",
           c->n_layers, c->d_model, c->n_heads, c->d_head, c->n_ctx, c->d_vocab,
           norm_name(c->norm_type), al_pos_type_name(c->pos_type), k ? bias : "none");
    printf("processed: %s\n", n ? procs : "nothing");
    printf("wrote %s%s\n", o_out, tok ? "" : " (no tokenizer: --tokenizer adds one)");
    rc = 0;
done:
    al_model_free(&m);
    al_tok_free(tok);
    return rc ? al_cli_error(&e) : 0;
}

/* ------------------------------------------------------- compare */

static const char *c_model, *c_ref;
static double c_tol = 1e-4;
static int c_threads;

static al_flag cflags[] = {{"model", AL_STR, &c_model, "DIR", "model directory", 1, 0},
                           {"ref", AL_STR, &c_ref, "FILE",
                            "reference run (scripts/tl-compare.py's safetensors)", 1, 0},
                           {"tolerance", AL_FLOAT, &c_tol, "X",
                            "largest relative error that passes", 0, 0},
                           {"threads", AL_INT, &c_threads, "N", "threads (0: all cores)", 0, 0},
                           AL_FLAGS_END};

static int run_compare(int argc, char **argv);
al_command al_cmd_compare = {
    "compare",
    "check a model's logits and activations against a TransformerLens run",
    "--model DIR --ref FILE.safetensors [--tolerance 1e-4]",
    "Runs the model on the reference's tokens and prints, for the logits and every hook\n"
    "point the file holds (docs/hooks.md names), the largest difference relative to the\n"
    "reference's scale (max |ours - ref| / max |ref|), then a PASS or FAIL line; exit 1 on\n"
    "FAIL. scripts/tl-compare.py writes such a file from TransformerLens.",
    cflags,
    run_compare,
};

static int run_compare(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(cflags, argc, argv, NULL, 0, NULL, &e) || al_threads_check(c_threads, &e))
        return al_cli_usage(&al_cmd_compare, &e);
    if (!(c_tol > 0)) {
        al_errf(&e, "--tolerance must be positive");
        return al_cli_usage(&al_cmd_compare, &e);
    }
    al_set_threads(c_threads);
    al_model m;
    if (al_ckpt_load(c_model, &m, NULL, &e)) return al_cli_error(&e);
    al_compare_result r;
    int rc = al_compare_run(&m, c_ref, c_tol, &r, &e);
    al_model_free(&m);
    if (rc) return al_cli_error(&e);
    print_compare(&r, c_tol);
    int pass = r.pass;
    al_compare_free(&r);
    if (pass) return 0;
    fprintf(stderr, "attnlab: %s does not match %s\n", c_model, c_ref);
    return 1;
}
