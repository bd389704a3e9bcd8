/* cmd_attnstats.c -- `attnlab attnstats`: the registry entry of the
 * attention statistics (attnstats.h). Its results are per-head views
 * (view.h), so storing (store_views.h) and printing (views_out.h) are the
 * generic ones: this file is only the options and the order of calls. */
#include <stdio.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/attnstats.h"
#include "attnlab/behave.h"
#include "attnlab/registry.h"
#include "attnlab/store.h"
#include "attnlab/store_views.h"
#include "attnlab/stop.h"
#include "attnlab/views_out.h"

#include <cjson/cJSON.h>

typedef struct attnstats_args {
    al_an_where w;
    al_attnstats_opts o;
} attnstats_args;

static attnstats_args g = {AL_AN_WHERE_INIT, AL_ATTNSTATS_OPTS_INIT};

static al_flag flags[] = {
    AL_FLAG_MODEL(g),
    AL_FLAG_DB(g),
    {"data", AL_STR, &g.w.data, "VAL.bin", "validation tokens: the windows measured", 1, 0},
    AL_FLAG_MASK(g),
    {"batches", AL_INT, &g.o.batches, "N", "validation batches", 0, 0},
    {"batch", AL_INT, &g.o.batch, "B", "windows per batch", 0, 0},
    AL_FLAG_THREADS(g),
    AL_FLAGS_END};

static int run_attnstats(int argc, char **argv);
al_command al_cmd_attnstats = {
    "attnstats",
    "per-head attention entropy and mean attention distance over text windows -> SQLite",
    "--model DIR --db FILE --data VAL.bin [--batches 4] [--batch 8] [--mask FILE]",
    "Where each head looks, from its attention pattern over --batches x --batch\n"
    "windows of --data (the windows ablate uses). Per head, averaged over query\n"
    "positions 1..T-1 (position 0 can only attend to itself): attn_entropy, the\n"
    "row entropy in nats; attn_entropy_norm, the same divided by ln(t+1), 0 for\n"
    "one-hot and 1 for uniform attention; attn_distance, the mean number of\n"
    "tokens back it attends (1 for a previous-token head, about t/2 for uniform).\n"
    "Stored in head_scores under run kind \"attnstats\".",
    flags,
    run_attnstats,
};

static int attnstats_check(const void *args, const al_flag *fl, al_err *e) {
    const attnstats_args *a = args;
    (void)fl;
    return al_attnstats_opts_check(&a->o, e) || al_threads_check(a->w.threads, e) ? -1 : 0;
}

static int attnstats_do(void *args, const al_flag *fl, al_drive *dr, int64_t *run_id, al_err *e) {
    attnstats_args *a = args;
    al_set_threads(a->w.threads);
    al_behave b;
    al_tokens d = {0};
    al_attnstats_result r = {0};
    al_attnstats_opts o = a->o;
    al_view v[4];
    int T = 0, rc = 1;
    o.progress = dr->progress;
    o.stop = &al_stop;
    if (al_behave_load(&b, a->w.model, a->w.mask, a->w.db, e)) return 1;
    if (al_behave_tokens(&b, a->w.data, &d, &T, e) || al_behave_begin(&b, "attnstats", fl, e))
        goto out;
    int n = al_attnstats_run(&b.m, &d, T, &o, &r, e) ? -1 : al_attnstats_views(&r, v, 4);
    if (n < 0 || al_store_tx_begin(b.st, e) || al_store_put_views(b.st, b.run_id, b.model_id, v, n, e) ||
        al_store_run_finish(b.st, b.run_id, e)) {
        al_behave_fail(&b, e);
        rc = o.stop && *o.stop ? 130 : 1;
        goto out;
    }
    if (dr->json) {
        if (al_behave_json(dr->doc, &b, a->w.db) || !cJSON_AddNumberToObject(dr->doc, "T", T) ||
            !cJSON_AddNumberToObject(dr->doc, "windows", r.windows) || al_views_json(dr->doc, v, n)) {
            al_errf(e, "out of memory");
            goto out;
        }
    } else {
        printf("model %s -> run %lld of %s; %d windows of %d tokens of %s\n", a->w.model,
               (long long)b.run_id, a->w.db, r.windows, T, a->w.data);
        al_views_print(stdout, v, n, b.off);
    }
    if (run_id) *run_id = b.run_id;
    rc = 0;
out:
    al_attnstats_result_free(&r);
    al_tokens_free(&d);
    al_behave_close(&b);
    return rc;
}

static void attnstats_init(void *args) {
    attnstats_args *a = args;
    memset(&a->w, 0, sizeof a->w);
    a->o = al_attnstats_opts_defaults();
}

const al_analysis al_an_attnstats = {
    .name = "attnstats", .cmd = &al_cmd_attnstats, .groups = AL_GROUP_WHERE, .tmpl = &g,
    .size = sizeof g, .init = attnstats_init, .check = attnstats_check, .run = attnstats_do,
    .stops = 1, .exp_data = AL_EXP_DATA_VAL};

static int run_attnstats(int argc, char **argv) {
    return al_drive_main(&al_an_attnstats, argc, argv);
}
