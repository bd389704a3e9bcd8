/* test_pics_table.c -- the picture kinds table (pictures.h) and the typed
 * readers the pictures use (store_pictures.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/pictures.h"
#include "attnlab/store.h"
#include "attnlab/store_pictures.h"
#include "test.h"

/* One table: unique names, a family, help and draw function each; the
 * name list, the lookup, the unknown-kind message and heatmap's help all
 * agree with it. */
TEST(pics_kind_table) {
    static const char *const families[] = {"weights",  "behaviour", "patching", "attribution",
                                           "circuits", "views",     "sae",      "sweeps"};
    CHECK(al_pic_n_kinds == 21);
    for (int k = 0; k < al_pic_n_kinds; k++) {
        const al_pic_kind *d = &al_pic_kind_table[k];
        CHECKF(d->name && d->help && d->help[0] && d->draw, "kind %d", k);
        int fam = 0;
        for (size_t f = 0; f < sizeof families / sizeof *families; f++)
            fam |= strcmp(d->family, families[f]) == 0;
        CHECKF(fam, "%s: family %s", d->name, d->family);
        CHECKF(al_pic_kinds[k] && strcmp(al_pic_kinds[k], d->name) == 0, "%s", d->name);
        CHECK(al_pic_kind_find(d->name) == d);
        for (int j = 0; j < k; j++)
            CHECKF(strcmp(al_pic_kind_table[j].name, d->name), "%s twice", d->name);
        /* a kind without a model is about the whole database, which it must have */
        CHECKF((d->needs & AL_PIC_MODEL) || (d->needs & AL_PIC_DB), "%s", d->name);
        CHECKF(!(d->needs & AL_PIC_RUN_MODEL) || (d->needs & AL_PIC_DB), "%s", d->name);
    }
    CHECK(al_pic_kinds[al_pic_n_kinds] == NULL);
    CHECK(al_pic_kind_find("nosuch") == NULL && al_pic_kind_find(NULL) == NULL);

    al_pic_opts o = al_pic_defaults();
    o.what = "nosuch";
    al_err e;
    CHECK(al_picture(NULL, &o, t_path("x.png"), NULL, NULL, &e) == -1);
    CHECK(strstr(e.msg, "unknown picture 'nosuch' (attention, qk-pos,") != NULL);
    CHECK(t_sh("%s help heatmap > %s", t_bin(), t_path("help.txt")) == 0);
    char *help = t_slurp(t_path("help.txt"));
    CHECK(help != NULL);
    for (int k = 0; help && k < al_pic_n_kinds; k++) {
        char line[128];
        snprintf(line, sizeof line, "\n  %s (%s): ", al_pic_kind_table[k].name,
                 al_pic_kind_table[k].family);
        CHECKF(strstr(help, line) && strstr(e.msg, al_pic_kind_table[k].name), "%s",
               al_pic_kind_table[k].name);
    }
    CHECK(help && strstr(help, "--what KIND                attention | qk-pos | qk | ov |"));
    CHECK(!al_file_exists(t_path("x.png")));
    free(help);
}

/* The readers return what the rows hold (NULL as NaN or a NULL string),
 * pick the newest *finished* run, and refuse a metric that is no column. */
TEST(pics_store_readers) {
    al_store *st;
    al_err e;
    int64_t mid = 0, run1, run2, run3;
    CHECK_OK(al_store_open(t_path("r.db"), &st, &e), &e);
    CHECK_OK(al_store_model_by_sha(st, "00", &mid, &e), &e);
    CHECK(mid == 0);
    t_tiny_model(t_tmpdir(), 1, 2);
    al_model_facts f = {NAN, -1, NAN, NAN, NAN};
    al_model m;
    CHECK_OK(al_ckpt_load(t_path("m1"), &m, NULL, &e), &e);
    CHECK_OK(al_store_model(st, t_path("m1"), NULL, &m, &f, &mid, &e), &e);
    al_model_free(&m);
    CHECK(mid > 0);
    /* two finished ablate runs and a newer one still running */
    int64_t runs[3];
    for (int k = 0; k < 3; k++) {
        CHECK_OK(al_store_run_begin(st, "ablate", "{}", mid, &runs[k], &e), &e);
        CHECK_OK(al_store_tx_begin(st, &e), &e);
        al_ablation_row r = {k ? "mean" : "zero", "single", "0.1", 1, 3, 0.25 * k, NAN, 1, NAN};
        CHECK_OK(al_store_put_ablation(st, runs[k], mid, &r, NULL, &e), &e);
        al_ablation_row q = {"mean", "pair", "0.0,0.1", 2, 3, 0.5, 0, 0, -0.125};
        CHECK_OK(al_store_put_ablation(st, runs[k], mid, &q, NULL, &e), &e);
        if (k < 2)
            CHECK_OK(al_store_run_finish(st, runs[k], &e), &e);
        else
            CHECK_OK(al_store_tx_commit(st, &e), &e);
    }
    run1 = runs[0], run2 = runs[1], run3 = runs[2];
    long got;
    CHECK_OK(al_store_latest_ablation_run(st, mid, "single", NULL, &got, &e), &e);
    CHECK(got == run2); /* run3 is not done */
    CHECK_OK(al_store_latest_ablation_run(st, mid, "single", "zero", &got, &e), &e);
    CHECK(got == run1);
    CHECK_OK(al_store_latest_ablation_run(st, mid, "pair", "resample", &got, &e), &e);
    CHECK(got == 0);
    CHECK_OK(al_store_latest_composition_run(st, mid, &got, &e), &e);
    CHECK(got == 0);
    al_store_ablation_row *a;
    int n;
    CHECK_OK(al_store_read_ablations(st, run2, "delta_loss_copy", NULL, &a, &n, &e), &e);
    CHECK(n == 2);
    int si = n == 2 && strcmp(a[0].kind, "single") != 0; /* no ORDER BY: either order */
    CHECK(strcmp(a[si].kind, "single") == 0 && strcmp(a[si].heads, "0.1") == 0 &&
          isnan(a[si].value));
    CHECK(isnan(a[si].interaction) && strcmp(a[si].method, "mean") == 0);
    CHECK(strcmp(a[1 - si].heads, "0.0,0.1") == 0 && a[1 - si].interaction == -0.125);
    CHECK(a[1 - si].value == 0);
    al_store_rows_free(a);
    CHECK_OK(al_store_read_ablations(st, run2, "delta_loss", "zero", &a, &n, &e), &e);
    CHECK(n == 0 && a != NULL);
    al_store_rows_free(a);
    CHECK(al_store_read_ablations(st, run2, "loss; DROP TABLE runs", NULL, &a, &n, &e) == -1);
    CHECK(a == NULL && n == 0 && strstr(e.msg, "delta_loss"));
    (void)run3;
    /* a run head: the LEFT JOIN gives the run without a patching_runs row */
    al_store_patch_run pr;
    CHECK_OK(al_store_read_patch_run(st, run2, &pr, &e), &e);
    CHECK(pr.h.found && !pr.h.has_row && strcmp(pr.h.kind, "ablate") == 0 &&
          strcmp(pr.h.status, "done") == 0 && pr.h.model_id == mid && pr.config &&
          pr.h.run == run2);
    al_store_patch_run_free(&pr);
    CHECK_OK(al_store_read_patch_run(st, 999, &pr, &e), &e);
    CHECK(!pr.h.found && pr.config == NULL);
    char *path;
    CHECK_OK(al_store_run_model_path(st, run1, &path, &e), &e);
    CHECK(path && strstr(path, "m1"));
    free(path);
    CHECK_OK(al_store_run_model_path(st, 999, &path, &e), &e);
    CHECK(path == NULL);
    al_store_close(st);
}
