/* tlcompare.h -- attnlab's forward pass against a reference run of the
 * same model elsewhere (TransformerLens's run_with_cache, written by
 * scripts/tl-compare.py): the reference file's logits and activations,
 * hook by hook, against the engine's own on the same tokens.
 *
 * Reference file: safetensors with
 *   tokens   (B, T) I32      the inputs
 *   logits   (B, T, V) F32   the logits
 *   NAME     F32             any hook point of docs/hooks.md under its
 *                            TransformerLens name and shape (for a
 *                            forward without split inputs:
 *                            blocks.l.ln1.hook_scale is (B, T, 1))
 * and optional metadata "processing" (comma-separated names of the steps
 * of process.h the reference model was processed with), which is checked
 * against the model's own (a model processed otherwise computes other
 * residual streams, so the comparison would mean nothing).
 *
 * Error of a tensor: max |ours − ref| / max |ref| over its elements (the
 * error relative to the tensor's scale; an element-wise ratio blows up at
 * zeros); equal infinities (masked attention scores) count as equal. */
#ifndef ATTNLAB_TLCOMPARE_H
#define ATTNLAB_TLCOMPARE_H

#include <stdint.h>

#include "attnlab/model.h"
#include "attnlab/util.h"

typedef struct al_compare_row {
    char name[96]; /* the reference's tensor name */
    double max_abs; /* max |ours − ref| */
    double scale; /* max |ref| (finite elements) */
    double rel; /* max_abs / scale (0 when both are 0) */
    int64_t n; /* elements compared */
    int pass; /* rel <= tolerance */
} al_compare_row;

typedef struct al_compare_result {
    al_compare_row *rows; /* one per reference tensor but tokens, in file order */
    int n;
    int B, T;
    double worst; /* max rel */
    int worst_row; /* its index (−1 when n == 0) */
    int pass; /* every row passed, and n > 0 */
    char skipped[512]; /* reference tensors not compared (split inputs), comma-separated */
} al_compare_result;

/* Run m on the reference's tokens with hooks at the reference's points
 * and compare (m's own hooks are kept and run before these). −1 with e:
 * the file unreadable, tokens missing or outside the vocabulary or n_ctx,
 * a tensor name that is no hook point of m (e.g. a LayerNorm point of a
 * model without LayerNorm), a shape that differs from m's, the
 * reference's processing not m's. */
int al_compare_run(al_model *m, const char *ref_path, double tolerance, al_compare_result *r,
                   al_err *e);
void al_compare_free(al_compare_result *r);

#endif
