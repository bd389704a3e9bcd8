/* cmd_attnstats.c -- `attnlab attnstats`: the registry entry of the
 * attention statistics (attnstats.h). Its results are per-head views
 * (view.h), so storing (store_views.h) and printing (views_out.h) are the
 * generic ones: this file is only the options and the order of calls. */
#include <stdio.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/attnstats.h"
#include "attnlab/behave.h"
#include "attnlab/membudget.h"
#include "attnlab/doc_text.h"
#include "attnlab/registry.h"
#include "attnlab/store_views.h"
#include "attnlab/stop.h"
#include "attnlab/views_out.h"

#include <cjson/cJSON.h>

typedef struct attnstats_args {
    al_an_where w;
    al_attnstats_opts o;
} attnstats_args;

static attnstats_args g = {AL_AN_WHERE_INIT, AL_ATTNSTATS_OPTS_INIT};

static al_flag flags[] = {AL_FLAG_MODEL(g),
                          AL_FLAG_DB(g),
                          {"data", AL_STR, &g.w.data, "VAL.bin",
                           "validation tokens: the windows measured", 1, 0},
                          AL_FLAG_MASK(g),
                          AL_FLAG_INTERVENE(g),
                          {"batches", AL_INT, &g.o.batches, "N", "validation batches", 0, 0},
                          {"batch", AL_INT, &g.o.batch, "B", "windows per batch", 0, 0},
                          AL_FLAGS_CI(g),
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

/* The run's state between the driver's phases. */
typedef struct attnstats_state {
    al_tokens d;
    int T;
    al_attnstats_result r;
    al_view v[4];
    int n;
} attnstats_state;

static int attnstats_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    attnstats_args *a = args;
    attnstats_state *s = state;
    if (al_behave_tokens(dr->b, a->w.data, &s->d, &s->T, e)) return -1;
    /* shorter than one window of the trained length: every window is the
     * whole file, the same tokens counted batches x batch times */
    if (s->T < dr->b->train_T) {
        char w[AL_WARN_LEN];
        snprintf(w, sizeof w,
                 "the token file %s has %zu tokens, fewer than one window of the "
                 "model's %d (+1): each of the %d windows (--batches %d x --batch %d) is the same "
                 "%d tokens",
                 a->w.data, s->d.n, dr->b->train_T, a->o.batches * a->o.batch, a->o.batches,
                 a->o.batch, s->T);
        al_drive_warn(dr, w);
    }
    char what[160];
    snprintf(what, sizeof what, "--batches %d x --batch %d windows of %d tokens", a->o.batches,
             a->o.batch, s->T);
    return al_mem_check(al_attnstats_bytes(&dr->b->m.cfg, s->T, &a->o), "attnstats", what,
                        "lower --batch or --batches", e);
}

static int attnstats_compute(void *args, void *state, al_drive *dr, al_err *e) {
    attnstats_args *a = args;
    attnstats_state *s = state;
    al_attnstats_opts o = a->o;
    o.progress = dr->progress;
    o.stop = &al_stop;
    if (al_attnstats_run(&dr->b->m, &s->d, s->T, &o, &s->r, e)) return -1;
    s->n = al_attnstats_views(&s->r, s->v, 4);
    return 0;
}

static int attnstats_store(void *args, void *state, al_drive *dr, al_err *e) {
    attnstats_state *s = state;
    (void)args;
    return al_store_put_views(dr->b->st, dr->b->run_id, dr->b->model_id, s->v, s->n, e);
}

static int attnstats_doc(void *args, void *state, al_drive *dr, al_err *e) {
    attnstats_args *a = args;
    attnstats_state *s = state;
    if (!cJSON_AddStringToObject(dr->doc, "data", a->w.data) ||
        !cJSON_AddNumberToObject(dr->doc, "T", s->T) ||
        !cJSON_AddNumberToObject(dr->doc, "windows", s->r.windows) ||
        al_views_json(dr->doc, s->v, s->n, dr->b->off))
        return al_errf(e, "out of memory");
    return 0;
}

/* The text of attnlab.attnstats/1, from the document alone. */
static void attnstats_text(const cJSON *doc) {
    printf("model %s -> run %lld of %s; %d windows of %d tokens of %s\n", al_dt_str(doc, "model"),
           (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"), al_dt_int(doc, "windows"),
           al_dt_int(doc, "T"), al_dt_str(doc, "data"));
    al_views_text(stdout, doc);
}

static void attnstats_release(void *state) {
    attnstats_state *s = state;
    al_attnstats_result_free(&s->r);
    al_tokens_free(&s->d);
}

static void attnstats_init(void *args) {
    attnstats_args *a = args;
    memset(&a->w, 0, sizeof a->w);
    a->o = al_attnstats_opts_defaults();
}

const al_analysis al_an_attnstats = {.name = "attnstats",
                                     .cmd = &al_cmd_attnstats,
                                     .groups = AL_GROUP_WHERE,
                                     .tmpl = &g,
                                     .size = sizeof g,
                                     .init = attnstats_init,
                                     .check = attnstats_check,
                                     .state_size = sizeof(attnstats_state),
                                     .prepare = attnstats_prepare,
                                     .compute = attnstats_compute,
                                     .store = attnstats_store,
                                     .doc = attnstats_doc,
                                     .text = attnstats_text,
                                     .release = attnstats_release,
                                     .stops = 1,
                                     .exp_data = AL_EXP_DATA_VAL};

static int run_attnstats(int argc, char **argv) {
    return al_drive_main(&al_an_attnstats, argc, argv);
}
