/* behave.h -- set-up shared by the behaviour commands (scores, ablate,
 * prune): load a model directory (weights keyed by their sha256, the
 * tokenizer if present, an optional head mask), open the database, file
 * the model and start a run. The commands then only do their analysis. */
#ifndef ATTNLAB_BEHAVE_H
#define ATTNLAB_BEHAVE_H

#include <stdint.h>
#include "attnlab/args.h"
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/store.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

typedef struct al_behave {
    al_model m;
    int loaded;
    al_tokenizer *tok;     /* NULL if the directory has none */
    char sha[65];          /* of model.safetensors */
    unsigned char *off;    /* (L*H) heads off by the mask; all 0 without */
    int n_off;
    al_store *st;
    int64_t model_id, run_id; /* run_id 0 until a run is begun */
    int train_T;           /* sequence length it was trained on (state.json) */
} al_behave;

/* Open db, load model_dir (and mask_path if not NULL: gates applied),
 * insert/update the models row and begin a run of `kind` whose config is
 * the flag table. On failure everything is released. */
int al_behave_open(al_behave *b, const char *model_dir, const char *mask_path,
                   const char *db, const char *kind, const al_flag *flags,
                   al_err *e);
/* The BOS id for probes: <|endoftext|> of the tokenizer, else -1. */
int al_behave_bos(const al_behave *b);
/* Load a validation token file and pick the window length: the length
 * the model was trained on (n_ctx unless --seq-len said less), or fewer if
 * the file is short (needs at least 6 tokens). */
int al_behave_tokens(const al_behave *b, const char *path, al_tokens *d, int *T,
                     al_err *e);
/* Warn on stderr if a probe of len tokens reaches positions the model
 * never trained on (its numbers there say little about the model). */
void al_behave_warn_probe(const al_behave *b, int len);
/* Mark the run failed (if begun) with e's message; e is kept. */
void al_behave_fail(al_behave *b, const al_err *e);
void al_behave_close(al_behave *b);

#endif
