/* sae_io.h -- a sparse autoencoder on disk in SAELens's layout, so that
 * SAELens (SAE.load_from_disk) and attnlab read the same directory:
 *
 *   OUT/sae_weights.safetensors   W_enc (d_in, d_sae), b_enc (d_sae),
 *                                 W_dec (d_sae, d_in), b_dec (d_in), F32
 *   OUT/cfg.json                  d_in, d_sae, architecture ("topk" or
 *                                 "standard"), k (topk), hook_name
 *                                 ("blocks.L.attn.hook_z" or
 *                                 "blocks.L.hook_resid_pre"), hook_layer,
 *                                 normalize_activations ("none" or
 *                                 "expected_average_only_in") and
 *                                 norm_scaling_factor, model_sha256, seed,
 *                                 dtype "float32", apply_b_dec_to_input
 *                                 true, plus the training's k_aux,
 *                                 aux_coeff / l1_coefficient, dead_tokens.
 *
 * The weights are those of the normalised activations: an input x of the
 * site is encoded as (x · norm_scaling_factor), and a reconstruction is
 * divided by it again (SAELens's "expected_average_only_in" with the
 * factor kept beside the weights instead of folded into them, so the
 * trainer can resume exactly).
 *
 * Loading trusts nothing: cfg.json is read with a size limit and every
 * field checked for type and range, the safetensors file is validated
 * (safetensors.h), the four tensors must have exactly cfg's shapes (and
 * no other tensor may be present) before the SAE is allocated, so a
 * hostile cfg.json cannot make it allocate more than the weights file
 * holds; every value must be finite. One line names the file and what is
 * wrong ("cannot read SAE DIR/sae_weights.safetensors: ..." for the
 * weights). */
#ifndef ATTNLAB_SAE_IO_H
#define ATTNLAB_SAE_IO_H

#include <stddef.h>
#include <stdint.h>

#include "attnlab/sae.h"
#include "attnlab/util.h"

#define AL_SAE_WEIGHTS_FILE "sae_weights.safetensors"
#define AL_SAE_CFG_FILE "cfg.json"
#define AL_SAE_CFG_MAX (1u << 20) /* bytes of cfg.json read at most */
/* The mark of an SAE whose training has not finished (below). */
#define AL_SAE_PARTIAL_FILE "sae_partial.json"

/* Sites an SAE reads. */
enum { AL_SAE_SITE_Z = 0, AL_SAE_SITE_RESID_PRE = 1 };

/* What cfg.json records besides the SAE's own config. */
typedef struct al_sae_meta {
    int site; /* AL_SAE_SITE_* */
    int hook_layer;
    int normalized; /* 1: "expected_average_only_in" */
    double scale; /* norm_scaling_factor (1 when not normalised) */
    char model_sha256[65]; /* hex of the model's weights file ("" unknown) */
    uint64_t seed;
    /* al_sae_load: 1 when the directory holds AL_SAE_PARTIAL_FILE (its
     * training began and has not finished: interrupted, killed or failed),
     * with the step of its last checkpoint and the steps it was to run
     * (both −1 when the mark cannot be read); 0, −1, −1 otherwise */
    int partial;
    long partial_step, partial_steps;
} al_sae_meta;

/* TransformerLens's hook name of a site at a layer into buf:
 * "blocks.L.attn.hook_z" or "blocks.L.hook_resid_pre". 0, or −1. */
int al_sae_hook_name(int site, int layer, char *buf, size_t cap);
/* Back: 0 with *site and *layer, or −1 (no such hook name). */
int al_sae_hook_parse(const char *name, int *site, int *layer);

/* 0 if the SAE reads a site this model has: hook_layer < n_layers, d_in
 * the site's width (n_heads·d_head for z, d_model for resid_pre), and,
 * when both are known (non-empty), meta's model_sha256 equal to
 * model_sha256 (of the model's model.safetensors). Else −1 with one line
 * saying which. */
struct al_config;
int al_sae_fits_model(const al_sae *s, const al_sae_meta *meta, const struct al_config *c,
                      const char *model_sha256, al_err *e);

/* Write OUT/sae_weights.safetensors then OUT/cfg.json (creating OUT),
 * each to a temporary name, fsynced and renamed. Refuses non-finite
 * weights or scale before writing anything. 0, or −1 with e. */
int al_sae_save(const char *dir, const al_sae *s, const al_sae_meta *meta, al_err *e);
/* Load what al_sae_save wrote into an uninitialised s (free with
 * al_sae_free) and meta (meta->partial from the partial mark, below). On
 * failure one line in e, s zeroed. */
int al_sae_load(const char *dir, al_sae *s, al_sae_meta *meta, al_err *e);
/* The partial mark: the trainer writes DIR/sae_partial.json ({"step": S,
 * "steps": N}, atomically, creating DIR) before it writes any checkpoint
 * of an unfinished run, and removes it once the last step's checkpoint is
 * written, so a directory whose training was interrupted at any point
 * (SIGINT, SIGTERM, SIGKILL, a crash, a non-finite loss) says so.
 * al_sae_partial_mark: 0, or −1 with e; al_sae_partial_clear: 0 (also
 * when there was no mark), or −1 with e. */
int al_sae_partial_mark(const char *dir, long step, long steps, al_err *e);
int al_sae_partial_clear(const char *dir, al_err *e);
/* The one sentence about a partly trained SAE (meta->partial) into buf:
 * "the SAE DIR is partly trained (step S of N: its training was
 * interrupted or failed; sae train --resume finishes it)". */
void al_sae_partial_msg(const char *dir, const al_sae_meta *meta, char *buf, size_t cap);
/* The same from the two files' bytes (the fuzz target); name stands for
 * the directory in messages. */
int al_sae_load_mem(const char *cfg_json, size_t cfg_n, const void *st, size_t st_n,
                    const char *name, al_sae *s, al_sae_meta *meta, al_err *e);

#endif
