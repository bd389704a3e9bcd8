/* cmd_prune.c -- `attnlab prune`: remove heads one at a time, least
 * important first, recording the loss curve (table pruning_steps), and
 * save the surviving heads as a mask file usable with --mask.
 *
 * The validation batches are split in two: importance is estimated on the
 * first half and the loss after each removal is measured on the second,
 * so a head is never judged on the tokens that chose it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/analyses.h"
#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/membudget.h"
#include "attnlab/doc_text.h"
#include "attnlab/registry.h"
#include "attnlab/stop.h"
#include "attnlab/store_analysis.h"

#include <cjson/cJSON.h>

typedef struct prune_args {
    al_an_where w;
    al_prune_opts o;
    const char *out; /* mask file; NULL: DIR/mask-<method>.json */
} prune_args;

static prune_args g = {AL_AN_WHERE_INIT, AL_PRUNE_OPTS_INIT, NULL};

static al_flag flags[] =
    {AL_FLAG_MODEL(g),
     AL_FLAG_DB(g),
     {"data", AL_STR, &g.w.data, "VAL.bin", "validation tokens (windows of the trained length)", 1,
      0},
     {"method", AL_STR, &g.o.method, "M", "importance: ablation, gradient or random", 1, 0},
     {"budget", AL_FLOAT, &g.o.budget, "F",
      "stop when the loss exceeds (1+F) x the loss with all heads (F < 0: prune every head)", 0, 0},
     {"seed", AL_U64, &g.o.seed, "S", "seed of the random method", 0, 0},
     {"batches", AL_INT, &g.o.batches, "N",
      "validation batches: the first half estimates importance, the second half measures loss", 0,
      0},
     {"batch", AL_INT, &g.o.batch, "B", "sequences per validation batch", 0, 0},
     {"out", AL_STR, &g.out, "FILE", "mask file to write (default DIR/mask-<method>.json)", 0, 0},
     AL_FLAG_THREADS(g),
     AL_FLAGS_END};

static int run_prune(int argc, char **argv);
extern const al_analysis al_an_prune;
al_command al_cmd_prune = {
    "prune",
    "remove heads one at a time, least important first, and save the mask",
    "--model DIR --db FILE --data VAL.bin --method ablation|gradient|random [--budget 0.1]",
    "Each step removes (gates off) the remaining head of least importance, estimated\n"
    "on the first half of the validation batches with the heads removed so far:\n"
    "ablation = Δloss when the head is zero-ablated; gradient = Michel et al. 2019,\n"
    "E|dL/dg| over sequences, l2-normalised per layer; random = seeded baseline.\n"
    "The loss after the removal is measured on the second half. Steps go to table\n"
    "pruning_steps (step 0 = all heads). Stops when no head is left or a removal\n"
    "makes the loss exceed (1 + budget) x the all-heads loss; that last removal is\n"
    "recorded but not part of the mask. The mask (heads off, JSON) is written\n"
    "atomically to DIR/mask-<method>.json; use it with --mask in run, scores, ablate.\n"
    "With gradient, every head's importance in the full model also goes to\n"
    "head_scores as gradient_importance. Ctrl-C stops it: the run is marked failed,\n"
    "no mask is written, and the exit code is 130.",
    flags,
    run_prune,
};

static void text_steps(const cJSON *doc) {
    const cJSON *st;
    printf("%4s %8s %11s %9s %9s %5s\n", "step", "removed", "importance", "loss", "Δloss", "left");
    cJSON_ArrayForEach(st, al_dt_get(doc, "steps")) {
        const char *name = al_dt_str(st, "removed");
        printf("%4d %8s %11.4g %9.4f %+9.4f %5d%s\n", al_dt_int(st, "step"), *name ? name : "-",
               al_dt_num(st, "importance"), al_dt_num(st, "loss"), al_dt_num(st, "delta_loss"),
               al_dt_int(st, "heads_left"),
               al_dt_bool(st, "over_budget") ? "  over budget: not applied" : "");
    }
}

/* attnlab.prune/1 (docs/json.md), beside the driver's run and model keys. */
static int json_prune(cJSON *doc, const al_prune_opts *o, int T, const char *path,
                      const al_prune_run_result *r, double seconds) {
    const al_prune_step *last = &r->p.steps[r->last];
    int LH = r->L * r->H;
    cJSON *steps;
    if (!cJSON_AddStringToObject(doc, "method", o->method) ||
        !cJSON_AddNumberToObject(doc, "budget", o->budget) ||
        !cJSON_AddNumberToObject(doc, "estimate_batches", r->est_batches) ||
        !cJSON_AddNumberToObject(doc, "evaluate_batches", r->eval_batches) ||
        !cJSON_AddNumberToObject(doc, "batch", o->batch) || !cJSON_AddNumberToObject(doc, "T", T) ||
        !cJSON_AddNumberToObject(doc, "base_loss", r->p.base_loss) ||
        !cJSON_AddNumberToObject(doc, "seconds", seconds) ||
        !(steps = cJSON_AddArrayToObject(doc, "steps")))
        return -1;
    for (int k = 0; k < r->p.n_steps; k++) {
        const al_prune_step *s = &r->p.steps[k];
        char name[32] = "";
        if (s->layer >= 0) snprintf(name, sizeof name, "%d.%d", s->layer, s->head);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(steps, j) || !cJSON_AddNumberToObject(j, "step", s->step) ||
            !(s->layer >= 0 ? cJSON_AddStringToObject(j, "removed", name)
                            : cJSON_AddNullToObject(j, "removed")) ||
            !cJSON_AddNumberToObject(j, "importance", s->importance) ||
            !cJSON_AddNumberToObject(j, "loss", s->loss) ||
            !cJSON_AddNumberToObject(j, "delta_loss", s->delta_loss) ||
            !cJSON_AddNumberToObject(j, "heads_left", s->heads_left) ||
            !cJSON_AddBoolToObject(j, "over_budget", s->over_budget))
            return -1;
    }
    cJSON *m = cJSON_AddObjectToObject(doc, "mask");
    return m && cJSON_AddStringToObject(m, "file", path) &&
                   cJSON_AddNumberToObject(m, "heads_off", LH - last->heads_left) &&
                   cJSON_AddNumberToObject(m, "heads", LH) &&
                   cJSON_AddNumberToObject(m, "loss", last->loss)
               ? 0
               : -1;
}

static int prune_check(const void *args, const al_flag *fl, al_err *e) {
    const prune_args *a = args;
    (void)fl;
    if (al_prune_opts_check(&a->o, e) || al_threads_check(a->w.threads, e)) return -1;
    if (a->out && strlen(a->out) >= AL_PATH_MAX)
        return al_errf(e, "--out path too long (%zu bytes)", strlen(a->out));
    return 0;
}

/* The run's state between the driver's phases. */
typedef struct prune_state {
    al_tokens d;
    int T;
    char path[AL_PATH_MAX + 64]; /* the mask file written */
    al_prune_run_result r;
} prune_state;

/* The mask file's path and the tokens before the run row exists. */
static int prune_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    prune_args *a = args;
    prune_state *s = state;
    if (a->out)
        snprintf(s->path, sizeof s->path, "%s", a->out);
    else {
        char name[64];
        snprintf(name, sizeof name, "mask-%s.json", a->o.method);
        if (al_path_join(s->path, sizeof s->path, a->w.model, name, e)) return -1;
    }
    if (al_behave_tokens(dr->b, a->w.data, &s->d, &s->T, e)) return -1;
    char what[160];
    snprintf(what, sizeof what, "--batch %d x --batches %d windows of %d tokens", a->o.batch,
             a->o.batches, s->T);
    return al_mem_check(al_prune_bytes(&dr->b->m.cfg, s->T, &a->o), "prune", what,
                        "lower --batch or --batches", e);
}

static int prune_compute(void *args, void *state, al_drive *dr, al_err *e) {
    prune_args *a = args;
    prune_state *s = state;
    al_prune_opts o = a->o;
    o.progress = dr->progress;
    o.stop = &al_stop;
    return al_prune_run(&dr->b->m, &s->d, s->T, &o, &s->r, e);
}

/* The steps, and the mask file (al_drive_file: in place once the steps
 * are committed; a failed write fails the run). */
static int prune_store(void *args, void *state, al_drive *dr, al_err *e) {
    prune_args *a = args;
    prune_state *s = state;
    al_behave *bh = dr->b;
    const al_prune_opts *o = &a->o;
    const al_prune_step *last = &s->r.p.steps[s->r.last];
    al_mask_info info = {o->method,  o->budget, s->r.p.base_loss,
                         last->loss, o->seed,   s->r.method == AL_PRUNE_RANDOM};
    if (al_store_put_prune(bh->st, bh->run_id, bh->model_id, &s->r, e)) return -1;
    char *text = al_mask_text(&bh->m.cfg, s->r.p.off, &info, e);
    int rc = text ? al_drive_file(dr, s->path, text, strlen(text), e) : -1;
    free(text);
    return rc;
}

static int prune_doc(void *args, void *state, al_drive *dr, al_err *e) {
    prune_args *a = args;
    prune_state *s = state;
    return json_prune(dr->doc, &a->o, s->T, s->path, &s->r, al_now() - dr->t_start)
               ? al_errf(e, "out of memory")
               : 0;
}

/* The text of attnlab.prune/1, from the document alone. */
static void prune_text(const cJSON *doc) {
    const cJSON *m = al_dt_get(doc, "mask");
    const double budget = al_dt_num(doc, "budget"), base = al_dt_num(doc, "base_loss");
    const int batch = al_dt_int(doc, "batch");
    printf("model %s (sha256 %.12s…) -> run %lld of %s; prune by %s, estimate on %d x %d "
           "windows of %d, evaluate on %d x %d\n",
           al_dt_str(doc, "model"), al_dt_str(doc, "sha256"), (long long)al_dt_num(doc, "run"),
           al_dt_str(doc, "db"), al_dt_str(doc, "method"), al_dt_int(doc, "estimate_batches"),
           batch, al_dt_int(doc, "T"), al_dt_int(doc, "evaluate_batches"), batch);
    text_steps(doc);
    if (budget >= 0)
        printf("budget %g: loss limit %.4f (base %.4f); ", budget, (1 + budget) * base, base);
    printf("mask: %d of %d heads off, loss %.4f -> %s (%.2f s)\n", al_dt_int(m, "heads_off"),
           al_dt_int(m, "heads"), al_dt_num(m, "loss"), al_dt_str(m, "file"),
           al_dt_num(doc, "seconds"));
}

static void prune_release(void *state) {
    prune_state *s = state;
    al_prune_run_result_free(&s->r);
    al_tokens_free(&s->d);
}

static void prune_init(void *args) {
    prune_args *a = args;
    memset(&a->w, 0, sizeof a->w);
    a->o = al_prune_opts_defaults();
    a->out = NULL;
}

static const char *const prune_methods[] = {"ablation", "gradient", "random", NULL};
static const char *const prune_deny[] = {"method", "out", NULL};

const al_analysis al_an_prune = {.name = "prune",
                                 .cmd = &al_cmd_prune,
                                 .groups = AL_GROUP_WHERE,
                                 .tmpl = &g,
                                 .size = sizeof g,
                                 .init = prune_init,
                                 .check = prune_check,
                                 .state_size = sizeof(prune_state),
                                 .prepare = prune_prepare,
                                 .compute = prune_compute,
                                 .store = prune_store,
                                 .doc = prune_doc,
                                 .text = prune_text,
                                 .release = prune_release,
                                 .stops = 1,
                                 .exp_data = AL_EXP_DATA_VAL,
                                 .exp_deny = prune_deny,
                                 .exp_methods = prune_methods};

static int run_prune(int argc, char **argv) { return al_drive_main(&al_an_prune, argc, argv); }
