/* merge.h -- merging results databases (`attnlab db merge`).
 *
 * Every finished run of each input, with all its rows, is copied into
 * OUT under a new run id; models are matched by sha256 (one models row
 * per checkpoint), so the ids of different files may collide freely.
 * A run is identified across files by runs.uid, so merging an input
 * again adds nothing. Each merged run names where it came from
 * (runs.source_id -> merge_sources, with the input's sweep_task row);
 * a run that was itself merged keeps its first origin.
 *
 * Safety: inputs are opened read-only and never migrated or written.
 * All of them are validated before OUT is touched (an SQLite file that
 * passes quick_check, OUT's schema version, every table and column OUT
 * has with the same declared type, every run with a uid, no dangling
 * reference, not OUT itself). The copy is one transaction on OUT, so a
 * refusal, an error, an interruption or a SIGKILL leaves OUT as it was.
 *
 * Tables are found from the schema: every table with a run_id column is
 * copied (run_id and model_id remapped, an INTEGER PRIMARY KEY other
 * than run_id left for OUT to assign), so a table added by a later
 * schema version is merged without changes here. */
#ifndef ATTNLAB_MERGE_H
#define ATTNLAB_MERGE_H

#include <signal.h>
#include <stdint.h>
#include "attnlab/util.h"

typedef struct al_merge_stats {
    int inputs; /* inputs merged */
    long runs_added; /* done runs copied */
    long runs_present; /* done runs whose uid OUT already had */
    long runs_not_done; /* running or failed runs, skipped */
    long models_added; /* models rows OUT did not have */
    long sources_added; /* merge_sources rows */
    long rows_added; /* rows of the run tables, all tables */
} al_merge_stats;

typedef struct al_merge_opts {
    int progress; /* progress lines on stderr */
    volatile sig_atomic_t *stop; /* non-zero: stop, "interrupted" (NULL: none) */
    al_merge_stats *each; /* NULL, or n_in entries: the counts per input */
} al_merge_opts;

#define AL_MERGE_OPTS_INIT                                                                         \
    { 0, NULL, NULL }

/* Merge in_paths[0..n_in) into out_path (created if missing, migrated
 * if older, as al_store_open does; n_in = 0 does only that). 0 with *st (if non-NULL) filled, or
 * -1 with e (one line naming the file) and OUT's contents unchanged;
 * "interrupted" when *o->stop was set. st and o->each are zeroed first. */
int al_store_merge(const char *out_path, const char *const *in_paths, int n_in,
                   const al_merge_opts *o, al_merge_stats *st, al_err *e);

#endif
