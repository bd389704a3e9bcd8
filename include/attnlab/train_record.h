/* train_record.h -- the training observer that records a run's dynamics
 * in a SQLite database: one `runs` row of kind "train", and at every
 * evaluation one train_log row and L x H x 4 train_head_scores rows
 * (induction, prev_token, duplicate_token, induction_all on a small fixed
 * probe),
 * committed together so the curve can be watched while training runs.
 * At the end the final checkpoint is attached as the run's model and the
 * run marked done, or the run is marked failed with the reason. Used by
 * `attnlab train --db` and by the training stages of experiments. */
#ifndef ATTNLAB_TRAIN_RECORD_H
#define ATTNLAB_TRAIN_RECORD_H

#include <stdint.h>

#include "attnlab/scores.h"
#include "attnlab/store.h"
#include "attnlab/train.h"

/* runs.kind of a training run (the train command's name). */
#define AL_TRAIN_RUN_KIND "train"

typedef struct al_train_record {
    const char *db_path; /* SQLite file (borrowed; created if absent) */
    const char *config_json; /* the run's config column (borrowed; NULL = "{}") */
    const al_probe_src *probe_src; /* what the probe is made of (scores.h;
                              * borrowed; NULL = random ids, the whole vocabulary) */
    /* the observer's own, zero before on_start */
    al_store *db;
    int64_t run_id;
    al_probe probe;
    /* set when training ended well but its run could not be recorded as
     * done (the run is then marked failed, if the database allows): the
     * caller must report it, since the trainer's own result is success */
    int end_failed;
    al_err end_err;
} al_train_record;

/* An observer recording into r, which must be zeroed except for the two
 * borrowed fields and outlive the trainer's al_trainer_run. It owns no
 * memory once al_trainer_run has returned (on_end closes everything). */
al_train_observer al_train_record_observer(al_train_record *r);

#endif
