/* store_runs_read.c -- typed reads of the runs table (see
 * store_runs_read.h). */
#include "attnlab/store_runs_read.h"

#include <math.h>

/* The first column of the first row, as a number (NaN: no row). */
static int first_num(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    (void)t, (void)e;
    if (nc > 0 && isnan(*(double *)ctx)) *(double *)ctx = x[0];
    return 0;
}

/* *v = the first cell of sql's first row with parameters p1, p2 (NaN: no row). */
static int num2(al_store *s, const char *sql, const char *p1, const char *p2, double *v,
                al_err *e) {
    const char *params[2] = {p1, p2};
    *v = NAN;
    return al_store_query(s, sql, params, 2, first_num, v, e);
}

int al_store_count_done(al_store *s, const char *sha, const char *kind, long *n, al_err *e) {
    double v;
    *n = 0;
    if (num2(s,
             "SELECT count(*) FROM runs r JOIN models m USING (model_id) WHERE "
             "m.sha256 = ?1 AND r.kind = ?2 AND r.status = 'done'",
             sha, kind, &v, e))
        return -1;
    *n = isnan(v) ? 0 : (long)v;
    return 0;
}

int al_store_run_done(al_store *s, const char *run, const char *sha, int *done, al_err *e) {
    double v;
    *done = 0;
    if (num2(s,
             "SELECT r.status = 'done' FROM runs r JOIN models m USING (model_id) "
             "WHERE r.run_id = ?1 AND m.sha256 = ?2",
             run, sha, &v, e))
        return -1;
    *done = v == 1;
    return 0;
}
