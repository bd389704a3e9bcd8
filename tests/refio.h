/* refio.h -- what the tests against a Python reference share (static
 * functions: each test file gets its own copy): numbers and a task
 * written as JSON for the reference to read, and running the reference
 * with Debian's /usr/bin/python3 (the test is skipped when PyTorch
 * cannot be imported: exit 77, or 127 without python3). */
#ifndef ATTNLAB_TEST_REFIO_H
#define ATTNLAB_TEST_REFIO_H

#include <math.h>
#include <stdio.h>

#include "attnlab/pairs.h"
#include "test.h"

#define REF_PY "/usr/bin/python3"

/* A double as JSON: NaN and infinities (which JSON lacks) as null. */
static __attribute__((unused)) void ref_put_num(FILE *f, double x) {
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}

/* n doubles as a JSON array; a[perturb_k] is written as a[perturb_k] + by
 * (perturb_k = −1: none), to show a check can fail. */
static __attribute__((unused)) void ref_put_nums(FILE *f, const double *a, int n, int perturb_k,
                                                 double by) {
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', f);
        ref_put_num(f, i == perturb_k ? a[i] + by : a[i]);
    }
    fputc(']', f);
}

/* n floats, as exactly as they are (%.9g round-trips a float). */
static __attribute__((unused)) void ref_put_floats(FILE *f, const float *a, size_t n) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++) {
        if (i) fputc(',', f);
        if (isfinite(a[i]))
            fprintf(f, "%.9g", (double)a[i]);
        else
            fputs("null", f);
    }
    fputc(']', f);
}

static __attribute__((unused)) void ref_put_ints(FILE *f, const int *a, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, i ? ",%d" : "%d", a[i]);
    fputc(']', f);
}

/* "task": {name, N, T, logit_diff, len, clean, corr, items [[pair, pos,
 * answer, wrong], ...]} (no braces around it: a member of the caller's
 * object). */
static __attribute__((unused)) void ref_put_task(FILE *f, const al_pairs *t) {
    fprintf(f, "\"task\": {\"name\": \"%s\", \"N\": %d, \"T\": %d, \"logit_diff\": %d, \"len\": ",
            t->task, t->N, t->T, t->logit_diff);
    ref_put_ints(f, t->len, t->N);
    fputs(",\n  \"clean\": ", f);
    ref_put_ints(f, t->clean, t->N * t->T);
    fputs(",\n  \"corr\": ", f);
    ref_put_ints(f, t->corr, t->N * t->T);
    fputs(",\n  \"items\": [", f);
    for (int i = 0; i < t->n_items; i++) {
        const al_pair_item *it = &t->items[i];
        fprintf(f, "%s[%d,%d,%d,%d]", i ? "," : "", it->pair, it->pos, it->answer, it->wrong);
    }
    fputs("]}", f);
}

/* Skip the test (before any work) if `script --check-torch` cannot
 * import PyTorch. */
static __attribute__((unused)) void ref_need_torch(const char *script) {
    int rc = t_sh(REF_PY " %s --check-torch > %s 2>&1", script, t_path("ref.out"));
    if (rc == 77) t_skip("PyTorch not installed");
    if (rc == 127) t_skip(REF_PY " not found");
    CHECKF(rc == 0, "%s --check-torch exit %d: %s", script, rc, t_slurp(t_path("ref.out")));
}

/* `script args` with its output in t_path("ref.out"); its exit code (the
 * test is skipped if PyTorch cannot be imported). */
static __attribute__((unused)) int ref_run(const char *script, const char *args) {
    int rc = t_sh(REF_PY " %s %s > %s 2>&1", script, args, t_path("ref.out"));
    if (rc == 77) t_skip("PyTorch not installed");
    if (rc == 127) t_skip(REF_PY " not found");
    return rc;
}

#endif
