/* sec_patching.c -- activation patching and path patching of a model:
 * the newest finished run of each (task, component, direction), its
 * strongest effects and its picture. */
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Activation patching and path patching: the newest finished run of
 * each (task, component, direction) of the model, its strongest effects
 * and its picture. No runs: no section. */
int sec_patching(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_rows runs;
    if (al_sr_patching_runs(R->st, M->mid, &runs, e)) return -1;
    static const char *const heads[] = {"configuration", "effect", "metric", "± se",
                                        "95% lo",        "95% hi", NULL};
    static const char *const pheads[] = {"path",   "effect", "metric", "± se",
                                         "95% lo", "95% hi", NULL};
    int rc = 0, n_patch = 0, n_paths = 0, deep = M->cfg.n_layers > 2;
    for (int i = 0; rc == 0 && i < runs.nr; i++) {
        const char *run = al_rows_t(&runs, i, 0), *task = al_rows_t(&runs, i, 1),
                   *comp = al_rows_t(&runs, i, 2), *dir = al_rows_t(&runs, i, 3);
        if (!task || !dir) continue;
        if (comp ? !n_patch++ : !n_paths++)
            al_buf_puts(
                h, comp   ? "<h3>Activation patching</h3>\n<p>Each configuration patches one "
                            "activation between the clean and the corrupted run of a task. "
                            "Effect: denoising (M<sub>patched</sub> &minus; M<sub>corr</sub>) / "
                            "(M<sub>clean</sub> &minus; M<sub>corr</sub>), 1 = the patch "
                            "restores the clean behaviour; noising (M<sub>clean</sub> &minus; "
                            "M<sub>patched</sub>) / (M<sub>clean</sub> &minus; "
                            "M<sub>corr</sub>), 1 = it breaks it.</p>\n"
                   : deep ? "<h3>Path patching</h3>\n<p>Only the path from a sender (embed, "
                            "pos, a head of an earlier layer) to a receiver (a later head's query, "
                            "key or value input, or the logits directly) carries the other run's "
                            "value; the layers after the receiver's are recomputed. An induction "
                            "circuit shows as a previous-token head's path into an induction "
                            "head's keys, across any layers between them.</p>\n"
                          : "<h3>Path patching</h3>\n<p>Only the path from a sender (embed, "
                            "pos, a layer-0 head) to a receiver (a layer-1 head's query, key "
                            "or value input, or the logits directly) carries the other run's "
                            "value. An induction circuit shows as a previous-token head's "
                            "path into an induction head's keys.</p>\n");
        const char *ding = strcmp(dir, "noise") == 0 ? "noising" : "denoising";
        al_buf_puts(h, "<p><b>");
        rep_esc(h, comp ? comp : "paths");
        al_buf_printf(h, "</b>, %s, task ", ding);
        rep_esc(h, task);
        al_buf_printf(h,
                      " (run %s, %.0f pairs): M<sub>clean</sub> = %.4f, M<sub>corr</sub> = "
                      "%.4f; the strongest effects, each with its standard error and 95%% "
                      "bootstrap interval over the pairs (empty: a run made without them):</p>\n",
                      run, al_rows_x(&runs, i, 6), al_rows_x(&runs, i, 4), al_rows_x(&runs, i, 5));
        al_rows q;
        int qrc = comp ? al_sr_patching_top(R->st, run, &q, e) : al_sr_paths_top(R->st, run, &q, e);
        rc = rep_rows_table(R, qrc, &q, comp ? heads : pheads, "s+44++", "No rows.") < 0;
        if (rc) continue;
        al_pic_opts po = al_pic_defaults();
        po.what = comp ? "patching" : "paths";
        po.run_id = atol(run);
        char file[256], cap[512], slug[64];
        snprintf(slug, sizeof slug, "%s%s%s-%s", task, comp ? "-" : "", comp ? comp : "", dir);
        rep_slug(slug, slug, sizeof slug);
        snprintf(file, sizeof file, "%s-%s-%s.png", M->slug, comp ? "patching" : "paths", slug);
        if (comp)
            snprintf(cap, sizeof cap,
                     "Activation patching (%s, %s, task %s): the effect of "
                     "patching each configuration.",
                     comp, ding, task);
        else
            snprintf(cap, sizeof cap,
                     "Path patching (%s, task %s): the effect of each "
                     "sender's path into each %s head's q, k and v, and directly into the "
                     "logits.",
                     ding, task, deep ? "later" : "layer-1");
        if (rep_want_pic(R, po.what)) rep_picture(R, M, &po, file, cap);
        snprintf(file, sizeof file, "%s-%s", comp ? "patching" : "paths", slug);
        snprintf(cap, sizeof cap,
                 "%s patching (%s, task %s): the strongest effects with their 95%% intervals "
                 "over the pairs.",
                 comp ? "Activation" : "Path", ding, task);
        rep_run_picture(R, M, &po, "intervals", file, cap);
    }
    al_rows_free(&runs);
    return rc ? -1 : 0;
}
