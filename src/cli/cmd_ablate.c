/* cmd_ablate.c -- `attnlab ablate`: knock out heads (one set, each head,
 * or head pairs) and measure what breaks (docs/design.md §5), into `ablations`.
 *
 * Pairs come with their singles, so each pair row carries the interaction
 * Δ(pair) − Δ(h1) − Δ(h2) of the validation Δloss; the same quantity for
 * the copy-position and probe Δ is printed (and is a join away in SQL).
 * Two heads in series (a previous-token head feeding an induction head)
 * give a negative interaction: either alone already breaks the circuit. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/analyses.h"
#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/ablate.h"
#include "attnlab/circuit_run.h"
#include "attnlab/doc_text.h"
#include "attnlab/json.h"
#include "attnlab/membudget.h"
#include "attnlab/registry.h"
#include "attnlab/stop.h"
#include "attnlab/store_analysis.h"

#include <cjson/cJSON.h>

typedef struct ablate_args {
    al_an_where w;
    al_ablate_opts o;
    int show; /* pairs printed */
    const char *circuit, *fill; /* --circuit FILE --fill corrupted|mean */
    const char *probe_tokens; /* all | seen | a token file (al_probe_tokens) */
} ablate_args;

#define ABLATE_ARGS_INIT                                                                           \
    { AL_AN_WHERE_INIT, AL_ABLATE_OPTS_INIT, 10, NULL, AL_FILL_DEFAULT, AL_PROBE_TOKENS_DEFAULT }
static ablate_args g = ABLATE_ARGS_INIT;

static al_flag flags[] =
    {AL_FLAG_MODEL(g),
     AL_FLAG_DB(g),
     {"data", AL_STR, &g.w.data, "VAL.bin", "validation tokens (windows of the trained length)", 1,
      0},
     {"heads", AL_STR, &g.o.heads, "LIST", "ablate this set of heads together, e.g. 0.3,1.4", 0, 0},
     {"each", AL_BOOL, &g.o.each, NULL, "ablate every head alone (the default)", 0, 0},
     {"pairs", AL_BOOL, &g.o.pairs, NULL,
      "every head alone and every pair (2 layers: the cross-layer pairs), with interactions", 0, 0},
     {"method", AL_STR, &g.o.method, "M", "zero, mean or resample", 0, 0},
     {"batches", AL_INT, &g.o.batches, "N", "validation batches", 0, 0},
     {"batch", AL_INT, &g.o.batch, "B", "sequences per validation batch", 0, 0},
     {"probe-r", AL_INT, &g.o.probe_r, "R",
      "random tokens per repeat of the probe (0: min(50, (n_ctx-1)/2))", 0, 0},
     {"probe-n", AL_INT, &g.o.probe_n, "N", "probe sequences", 0, 0},
     {"probe-seed", AL_U64, &g.o.probe_seed, "S", "probe seed", 0, 0},
     AL_FLAG_PROBE_TOKENS(g),
     AL_FLAG_MASK(g),
     AL_FLAG_INTERVENE(g),
     {"show", AL_INT, &g.show, "N", "pairs printed (largest |interaction| first)", 0, 0},
     AL_FLAGS_CIRCUIT(g, "what the circuit's removed edges carry: corrupted (the next sequence's "
                         "values) or mean (over the --data windows)"),
     AL_FLAGS_CI(g),
     AL_FLAG_THREADS(g),
     AL_FLAGS_END};

static int run_ablate(int argc, char **argv);
extern const al_analysis al_an_ablate;
al_command al_cmd_ablate = {
    "ablate",
    "knock out heads (a set, each, or pairs) and measure the loss they leave behind",
    "--model DIR --db FILE --data VAL.bin [--heads 0.3,1.4 | --each | --pairs] [--method zero|mean|resample]",
    "Methods: zero (gate 0), mean (the head's output replaced by its mean over the\n"
    "evaluation sequences at the same position), resample (by its output on another\n"
    "sequence of the batch). Metrics: validation loss and Δloss; Δloss at copy\n"
    "positions (next token already in the window); Δloss on the probe's second\n"
    "repeat (what induction heads predict). --pairs adds every pair (for 2 layers the\n"
    "layer-0 x layer-1 pairs) with interaction = Δ(pair) - Δ(h1) - Δ(h2). Each\n"
    "configuration is a row in table ablations (kind none = the clean model, single,\n"
    "pair or set). Cost: one forward pass per configuration and batch. Ctrl-C stops\n"
    "it: the run is marked failed, nothing is stored, and the exit code is 130.",
    flags,
    run_ablate,
};

/* " +0.1234 ±0.0056" of c's key and key_se (the ± blank without one). */
static void print_delta(const cJSON *c, const char *key) {
    char se[48];
    snprintf(se, sizeof se, "%s_se", key);
    double v = al_dt_num(c, se);
    printf(" %+9.4f", al_dt_num(c, key));
    if (isfinite(v))
        printf(" ±%.4f", v);
    else
        printf("        ");
}

/* The single and set rows of the document's configurations. */
static void text_rows(const cJSON *doc) {
    const cJSON *c, *iv = al_dt_get(doc, "intervals");
    if (iv)
        printf("(± standard error over the sequences: %d windows, %d probe sequences; %g%% "
               "bootstrap intervals, %d resamples, in --json and table score_intervals)\n",
               al_dt_int(iv, "items"), al_dt_int(iv, "probe_items"), 100 * al_dt_num(iv, "level"),
               al_dt_int(iv, "bootstrap"));
    printf("%-12s %9s %17s %17s %17s\n", "ablated", "loss", "Δloss", "Δcopy", "Δprobe");
    printf("%-12s %9.4f %17s %17s %17s\n", "(none)", al_dt_num(doc, "clean_loss"), "-", "-", "-");
    cJSON_ArrayForEach(c, al_dt_get(doc, "configurations")) {
        if (!strcmp(al_dt_str(c, "kind"), "pair")) continue;
        const char *name = al_dt_str(c, "ablated");
        printf("%-12s %9.4f", strlen(name) < 64 ? name : "(set)", al_dt_num(c, "loss"));
        print_delta(c, "delta_loss"), print_delta(c, "delta_copy"), print_delta(c, "delta_probe");
        printf("\n");
    }
}

/* "0.3+1.4" as "0.3+1.4   ": the second head's index left-aligned in 4. */
static void print_pair_name(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) dot = name + strlen(name) - 1;
    printf("%.*s%-4s", (int)(dot + 1 - name), name, dot + 1);
}

/* The document's pairs sorted by |interaction| on the validation loss,
 * the first `show` printed, then the strongest on the copy and probe
 * metrics. */
static void text_pairs(const cJSON *doc) {
    const cJSON *c, *cs = al_dt_get(doc, "configurations");
    const cJSON **idx = malloc(sizeof *idx * (size_t)(1 + cJSON_GetArraySize(cs)));
    int np = 0, show = al_dt_int(doc, "show");
    if (!idx) return;
    cJSON_ArrayForEach(c, cs) {
        if (!strcmp(al_dt_str(c, "kind"), "pair")) idx[np++] = c;
    }
    /* insertion sort by |interaction| on the validation loss, descending */
    for (int i = 1; i < np; i++)
        for (int j = i; j > 0 && fabs(al_dt_num(idx[j], "inter_loss")) >
                                     fabs(al_dt_num(idx[j - 1], "inter_loss"));
             j--) {
            const cJSON *t = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = t;
        }
    printf("pairs: interaction = Δ(pair) - Δ(h1) - Δ(h2), largest |interaction| on the "
           "validation loss first (%d of %d):\n",
           show < np ? show : np, np);
    printf("%-10s %17s %17s %17s %17s\n", "pair", "Δloss", "inter_loss", "inter_copy",
           "inter_probe");
    for (int i = 0; i < np && i < show; i++) {
        print_pair_name(al_dt_str(idx[i], "ablated"));
        print_delta(idx[i], "delta_loss"), print_delta(idx[i], "inter_loss");
        print_delta(idx[i], "inter_copy"), print_delta(idx[i], "inter_probe");
        printf("\n");
    }
    const char *what[2] = {"copy positions", "probe second repeat"};
    const char *key[2] = {"inter_copy", "inter_probe"};
    for (int w = 0; w < 2 && np; w++) {
        const cJSON *best = idx[0];
        for (int i = 0; i < np; i++)
            if (fabs(al_dt_num(idx[i], key[w])) > fabs(al_dt_num(best, key[w]))) best = idx[i];
        printf("largest |interaction| on %s: %s (%+.4f)\n", what[w], al_dt_str(best, "ablated"),
               al_dt_num(best, key[w]));
    }
    free(idx);
}

/* The name of configuration c ("0.3", "0.3+1.4", the --heads set). */
static void config_name(const ablate_args *a, const al_ablate_result *r, const al_ablate_config *c,
                        char *name, size_t cap) {
    int H = r->H;
    if (c->b >= 0)
        snprintf(name, cap, "%d.%d+%d.%d", c->a / H, c->a % H, c->b / H, c->b % H);
    else if (c->a >= 0)
        snprintf(name, cap, "%d.%d", c->a / H, c->a % H);
    else
        snprintf(name, cap, "%s", a->o.heads ? a->o.heads : "(set)");
}

/* attnlab.ablate/1 (docs/json.md): every configuration, singles and
 * pairs, with the clean model's loss (the driver adds the run and model keys). */
static int json_ablate(cJSON *doc, const ablate_args *a, const al_ablate_opts *o, int T,
                       const al_ablate_result *r, double total) {
    cJSON *cs, *sec, *iv;
    if (!cJSON_AddStringToObject(doc, "method", o->method) ||
        !cJSON_AddBoolToObject(doc, "pairs", o->pairs) ||
        !cJSON_AddNumberToObject(doc, "show", a->show) ||
        !(sec = cJSON_AddObjectToObject(doc, "seconds")) ||
        !cJSON_AddNumberToObject(sec, "ablate", r->seconds_ablate) ||
        !cJSON_AddNumberToObject(sec, "clean", r->seconds_clean) ||
        !cJSON_AddNumberToObject(sec, "total", total) ||
        !cJSON_AddNumberToObject(doc, "batches", o->batches) ||
        !cJSON_AddNumberToObject(doc, "batch", o->batch) || !cJSON_AddNumberToObject(doc, "T", T) ||
        !cJSON_AddNumberToObject(doc, "probe_r", o->probe_r) ||
        !cJSON_AddNumberToObject(doc, "probe_n", o->probe_n) ||
        !cJSON_AddNumberToObject(doc, "clean_loss", r->clean_loss) ||
        !(iv = al_json_add_intervals(
              doc, r->ci_level, r->ci_boot, r->ci_seed, r->ci_n_text,
              "*_se: delta method for the ratio sum of (ablated - clean) losses / positions "
              "over the sequences; *_ci: bootstrap expanded percentile interval of that ratio, "
              "resampling whole sequences (items: the windows; probe_items: the probe's "
              "sequences, for delta_probe and inter_probe)")) ||
        !cJSON_AddNumberToObject(iv, "probe_items", r->ci_n_probe) ||
        !(cs = cJSON_AddArrayToObject(doc, "configurations")))
        return -1;
    for (int k = 0; k < r->n; k++) {
        const al_ablate_config *c = &r->c[k];
        char name[256];
        config_name(a, r, c, name, sizeof name);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(cs, j) || !cJSON_AddStringToObject(j, "ablated", name) ||
            !cJSON_AddStringToObject(j, "kind", c->kind) ||
            !cJSON_AddNumberToObject(j, "loss", c->loss) ||
            !cJSON_AddNumberToObject(j, "delta_loss", c->delta_loss) ||
            !cJSON_AddNumberToObject(j, "delta_copy", c->delta_copy) ||
            !cJSON_AddNumberToObject(j, "delta_probe", c->delta_probe) ||
            al_json_add_ci(j, "delta_loss", &c->ci[AL_ABL_CI_LOSS]) ||
            al_json_add_ci(j, "delta_copy", &c->ci[AL_ABL_CI_COPY]) ||
            al_json_add_ci(j, "delta_probe", &c->ci[AL_ABL_CI_PROBE]))
            return -1;
        if (c->b >= 0 && (!cJSON_AddNumberToObject(j, "inter_loss", c->inter_loss) ||
                          !cJSON_AddNumberToObject(j, "inter_copy", c->inter_copy) ||
                          !cJSON_AddNumberToObject(j, "inter_probe", c->inter_probe) ||
                          al_json_add_ci(j, "inter_loss", &c->ci[AL_ABL_CI_INTER_LOSS]) ||
                          al_json_add_ci(j, "inter_copy", &c->ci[AL_ABL_CI_INTER_COPY]) ||
                          al_json_add_ci(j, "inter_probe", &c->ci[AL_ABL_CI_INTER_PROBE])))
            return -1;
    }
    return 0;
}

static int ablate_check(const void *args, const al_flag *fl, al_err *e) {
    const ablate_args *a = args;
    (void)fl;
    if (al_ablate_opts_check(&a->o, e)) return -1;
    if (a->show < 0)
        return al_errf(e, "need --probe-r >= 2, 1 <= --probe-n <= 1000000, --batches and --batch "
                          "in 1..100000, --show >= 0");
    return al_threads_check(a->w.threads, e) || al_circuit_fill_check(a->fill, e) ? -1 : 0;
}

/* --heads against the loaded model and its mask: a head the model has
 * not, or one the mask already turned off, is refused before any run. */
static int check_heads(const ablate_args *a, const al_behave *bh, al_err *e) {
    int L = bh->m.cfg.n_layers, H = bh->m.cfg.n_heads, bad = -1;
    if (!a->o.heads) return 0;
    unsigned char *sel = al_calloc((size_t)L * H, 1, e);
    if (!sel) return -1;
    int rc = al_heads_parse(a->o.heads, L, H, sel, e);
    for (int i = 0; rc == 0 && i < L * H && bad < 0; i++)
        if (sel[i] && bh->off[i]) bad = i;
    free(sel);
    if (rc) return al_err_prefix(e, "--heads");
    /* the analysis knows no file names: name the mask here */
    if (bad >= 0)
        return al_errf(e, "head %d.%d is already off in the mask %s", bad / H, bad % H, a->w.mask);
    return 0;
}

/* The run's state between the driver's phases. */
typedef struct ablate_state {
    al_tokens d;
    int T;
    al_probe_load pl; /* --probe-tokens: what the probe is made of */
    double t0; /* al_now() as the run began (the printed total) */
    al_ablate_result r;
} ablate_state;

/* The probe against the model's context. */
static int ablate_check_model(const void *args, const al_config *c, al_err *e) {
    return al_probe_fits(((const ablate_args *)args)->o.probe_r, c->n_ctx, e);
}

/* Every input against the model before the run row exists: the heads,
 * the probe's ids, the tokens, the circuit. */
static int ablate_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    ablate_args *a = args;
    ablate_state *s = state;
    al_behave *bh = dr->b;
    /* the probe's R for this model, so the run records and prints it */
    a->o.probe_r = al_probe_r_default(a->o.probe_r, bh->m.cfg.n_ctx);
    if (check_heads(a, bh, e) ||
        al_probe_load_open(&s->pl, a->probe_tokens, a->w.model, NULL, NULL, bh->m.cfg.d_vocab, e))
        return -1;
    al_drive_warn(dr, s->pl.warn);
    if (al_behave_tokens(bh, a->w.data, &s->d, &s->T, e)) return -1;
    char what[160];
    snprintf(what, sizeof what, "--batch %d x --batches %d windows of %d tokens and --probe-n %d",
             a->o.batch, a->o.batches, s->T, a->o.probe_n);
    if (al_mem_check(al_ablate_bytes(&bh->m.cfg, s->T, &a->o), "ablate", what,
                     "lower --batch, --batches or --probe-n", e))
        return -1;
    return a->circuit && al_behave_circuit(bh, a->circuit, a->fill, &s->d, s->T, a->o.batches,
                                           a->o.batch, e)
               ? -1
               : 0;
}

static int ablate_compute(void *args, void *state, al_drive *dr, al_err *e) {
    ablate_args *a = args;
    ablate_state *s = state;
    al_behave *bh = dr->b;
    al_ablate_opts o = a->o;
    s->t0 = al_now();
    o.progress = dr->progress;
    o.stop = &al_stop;
    o.probe_src = al_probe_load_src(&s->pl);
    al_behave_warn_probe(bh, 2 * o.probe_r + 1);
    return al_ablate_run(&bh->m, &s->d, s->T, al_behave_bos(bh), bh->off, &o, &s->r, e);
}

static int ablate_store(void *args, void *state, al_drive *dr, al_err *e) {
    ablate_state *s = state;
    (void)args;
    return al_store_put_ablate(dr->b->st, dr->b->run_id, dr->b->model_id, &s->r, e);
}

static int ablate_doc(void *args, void *state, al_drive *dr, al_err *e) {
    ablate_args *a = args;
    ablate_state *s = state;
    return json_ablate(dr->doc, a, &a->o, s->T, &s->r, al_now() - s->t0)
               ? al_errf(e, "out of memory")
               : 0;
}

/* The text of attnlab.ablate/1, from the document alone. */
static void ablate_text(const cJSON *doc) {
    const cJSON *sec = al_dt_get(doc, "seconds");
    int n = cJSON_GetArraySize(al_dt_get(doc, "configurations"));
    printf("model %s (sha256 %.12s…) -> run %lld of %s; method %s, %d x %d windows of %d, "
           "probe R %d N %d\n",
           al_dt_str(doc, "model"), al_dt_str(doc, "sha256"), (long long)al_dt_num(doc, "run"),
           al_dt_str(doc, "db"), al_dt_str(doc, "method"), al_dt_int(doc, "batches"),
           al_dt_int(doc, "batch"), al_dt_int(doc, "T"), al_dt_int(doc, "probe_r"),
           al_dt_int(doc, "probe_n"));
    al_dt_circuit(doc);
    text_rows(doc);
    if (al_dt_bool(doc, "pairs")) text_pairs(doc);
    printf("ablate: %d configuration%s in %.2f s (%.3f s each; one clean pass over the "
           "evaluation tokens took %.3f s; total %.2f s)\n",
           n, n == 1 ? "" : "s", al_dt_num(sec, "ablate"), al_dt_num(sec, "ablate") / n,
           al_dt_num(sec, "clean"), al_dt_num(sec, "total"));
}

static void ablate_release(void *state) {
    ablate_state *s = state;
    al_probe_load_free(&s->pl);
    al_ablate_result_free(&s->r);
    al_tokens_free(&s->d);
}

static void ablate_init(void *args) {
    static const ablate_args dflt = ABLATE_ARGS_INIT;
    *(ablate_args *)args = dflt;
}

/* "ablate (pairs, mean)" */
static void ablate_label(const cJSON *v, char *buf, size_t cap) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, "method");
    snprintf(buf, cap, "ablate (%s, %s)",
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "pairs")) ? "pairs"
             : cJSON_GetObjectItemCaseSensitive(v, "heads")             ? "set"
                                                                        : "each",
             cJSON_IsString(m) ? m->valuestring : "zero");
}

const al_analysis al_an_ablate = {.name = "ablate",
                                  .cmd = &al_cmd_ablate,
                                  .groups = AL_GROUP_WHERE | AL_GROUP_CIRCUIT,
                                  .tmpl = &g,
                                  .size = sizeof g,
                                  .init = ablate_init,
                                  .check = ablate_check,
                                  .check_model = ablate_check_model,
                                  .state_size = sizeof(ablate_state),
                                  .prepare = ablate_prepare,
                                  .compute = ablate_compute,
                                  .store = ablate_store,
                                  .doc = ablate_doc,
                                  .text = ablate_text,
                                  .release = ablate_release,
                                  .stops = 1,
                                  .exp_list = 1,
                                  .exp_data = AL_EXP_DATA_VAL,
                                  .exp_label = ablate_label};

static int run_ablate(int argc, char **argv) { return al_drive_main(&al_an_ablate, argc, argv); }
