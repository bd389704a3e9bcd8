/* checkpoint.h -- model directories (docs/design.md §2).
 *
 *   DIR/model.safetensors   weights, TransformerLens names and shapes
 *   DIR/config.json         model config (TransformerLens keys + ours)
 *   DIR/tokenizer.json      the tokenizer the model was trained with
 *   DIR/optim.safetensors   AdamW m and v (only for resuming)
 *   DIR/state.json          step, RNG, training flags (only for resuming)
 *
 * A checkpoint spans several files, so saving is journalled: every file
 * is first written completely as NAME.new, then an empty COMMIT marker is
 * created atomically, then each NAME.new is renamed over NAME, then
 * COMMIT is removed. Every loader first calls al_ckpt_recover(): with a
 * COMMIT marker present it finishes the renames (roll forward); without
 * one it deletes stray *.new files (roll back). So a crash at any
 * instant leaves either the old checkpoint or the new one, whole.
 *
 * COMMIT is text: the line "attnlab checkpoint commit 1", then one line
 * per file name above, "rename NAME" (NAME.new replaces NAME) or "remove
 * NAME" (a file of that name not part of this save, e.g. the optimizer
 * state of an earlier training save when saving inference-only, is
 * deleted so the directory never mixes two checkpoints). Only stray files
 * with the names above (+ ".new", ".tmp.<pid>") are ever deleted.
 *
 * Processes coordinate through a POSIX record lock on DIR/.lock (created
 * on first use): save, recover and load hold it, so a reader never sees
 * half a save and never rolls back a save in progress. */
#ifndef ATTNLAB_CHECKPOINT_H
#define ATTNLAB_CHECKPOINT_H

#include "attnlab/config.h"
#include "attnlab/model.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

/* Save a checkpoint (creating dir). st/adam_m/adam_v may be NULL
 * (inference-only directory: no optim.safetensors / state.json); tok may
 * be NULL (no tokenizer.json). Adam m and v hold m->n_params floats.
 * Refuses non-finite weights or optimizer state, so a diverged run never
 * replaces its last good checkpoint. With tied embeddings unembed.W_U is
 * still written (= W_Eᵀ) so the file loads in TransformerLens. */
int al_ckpt_save(const char *dir, const al_model *m, const al_tokenizer *tok,
                 const al_train_state *st, const float *adam_m, const float *adam_v, al_err *e);
/* Finish or undo an interrupted save (see above). */
int al_ckpt_recover(const char *dir, al_err *e);
/* Make the checkpoint in dir impossible to resume (state.json removed,
 * under the lock, after recovery); the weights stay loadable. 0 if there
 * is no state.json. */
int al_ckpt_forget_state(const char *dir, al_err *e);
/* Read DIR/state.json under the lock, after recovery, with the one size
 * limit every reader uses (AL_CKPT_JSON_MAX). Returns 0 with *st filled
 * (free with al_state_free), 1 if the directory has no state.json (an
 * inference-only checkpoint; *st zeroed), -1 with e set on any other
 * failure (*st zeroed). */
#define AL_CKPT_JSON_MAX (16u << 20)
int al_ckpt_read_state(const char *dir, al_train_state *st, al_err *e);
/* Load config + weights (+ tokenizer if tok != NULL) into an
 * uninitialised model. Validates names, shapes and finite values, refuses
 * tensors not in the model, and with tied embeddings checks that a stored
 * unembed.W_U equals W_Eᵀ. On failure m is freed (zeroed) and *tok NULL. */
int al_ckpt_load(const char *dir, al_model *m, al_tokenizer **tok, al_err *e);
/* 0 if dir holds a checkpoint (or one being saved), else -1 with e
 * saying dir is no model directory and what to give instead. The
 * readers (al_ckpt_load, al_ckpt_load_state; al_ckpt_read_state returns
 * 1) check this before they lock, so a folder that is no model never
 * gets a .lock file. */
int al_ckpt_is_model_dir(const char *dir, al_err *e);
/* Load state.json and optim.safetensors (n floats each for m and v). */
int al_ckpt_load_state(const char *dir, al_train_state *st, float *adam_m, float *adam_v, size_t n,
                       al_err *e);
/* Write only model.safetensors for m to an explicit path (tests, tools). */
int al_ckpt_write_weights(const char *path, const al_model *m, al_err *e);

#endif
