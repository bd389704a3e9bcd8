/* cmd_scores.c -- `attnlab scores`: behavioural head scores (docs/design.md §5)
 * into the database, and a summary naming the induction heads and the
 * previous-token heads.
 *
 * Both named kinds use the same threshold (thresholds.h), 0.4 of the
 * attention on the defining position: far above what an unspecialised head gives (uniform
 * causal attention puts ≈ ln(T)/T ≈ 0.05 on any one position of a
 * 101-token probe). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/analyses.h"
#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/circuit_run.h"
#include "attnlab/doc_text.h"
#include "attnlab/json.h"
#include "attnlab/membudget.h"
#include "attnlab/registry.h"
#include "attnlab/store_analysis.h"
#include "attnlab/thresholds.h"

#include <cjson/cJSON.h>

typedef struct scores_args {
    al_an_where w;
    al_scores_opts o;
    const char *circuit, *fill; /* --circuit FILE --fill corrupted|mean */
    const char *probe_tokens; /* all | seen | a token file (al_probe_tokens) */
} scores_args;

#define SCORES_ARGS_INIT                                                                           \
    { AL_AN_WHERE_INIT, AL_SCORES_OPTS_INIT, NULL, AL_FILL_DEFAULT, AL_PROBE_TOKENS_DEFAULT }
static scores_args g = SCORES_ARGS_INIT;

static al_flag flags[] =
    {AL_FLAG_MODEL(g),
     AL_FLAG_DB(g),
     {"data", AL_STR, &g.w.data, "VAL.bin",
      "validation tokens for icl_score and copying_ablation (skipped without)", 0, 0},
     {"probe-r", AL_INT, &g.o.probe_r, "R",
      "random tokens per repeat of the probe (0: min(50, (n_ctx-1)/2))", 0, 0},
     {"probe-n", AL_INT, &g.o.probe_n, "N", "probe sequences", 0, 0},
     {"probe-seed", AL_U64, &g.o.probe_seed, "S", "probe seed", 0, 0},
     AL_FLAG_PROBE_TOKENS(g),
     {"batches", AL_INT, &g.o.batches, "N", "validation batches (windows of the trained length)", 0,
      0},
     {"batch", AL_INT, &g.o.batch, "B", "sequences per validation batch", 0, 0},
     AL_FLAGS_CI(g),
     {"mask", AL_STR, &g.w.mask, "FILE",
      "head mask (JSON, from attnlab prune): these heads are off", 0, 0},
     AL_FLAG_INTERVENE(g),
     AL_FLAGS_CIRCUIT(g, "what the circuit's removed edges carry: corrupted (the next sequence's "
                         "values) or mean (needs --data)"),
     AL_FLAG_THREADS(g),
     AL_FLAGS_END};

static int run_scores(int argc, char **argv);
al_command al_cmd_scores = {
    /* clang-format off */
    "scores",
    "measure induction, previous-token, duplicate-token and copying heads by running the model",
    "--model DIR --db FILE [--data VAL.bin] [--probe-r R --probe-n 64] [--mask FILE]\n"
    "       [--circuit FILE [--fill corrupted|mean]]",
    "The probe: <|endoftext|> + R random tokens + the same R tokens again, N\n"
    "sequences. Per head: induction = mean attention from the second repeat to\n"
    "the token after the current token's first occurrence (t -> t-R+1);\n"
    "duplicate_token = to that occurrence itself (t -> t-R); prev_token = to the\n"
    "previous token (t -> t-1, t >= 2); induction_all = to the successor of every\n"
    "earlier occurrence of the current token (the same as induction unless a token\n"
    "recurs inside a half, as on a text probe); per layer the heads' sums. Per\n"
    "model: icl_gain = probe loss on the first repeat - on the second. With\n"
    "--data, on validation windows: icl_score = loss at late - at early positions\n"
    "(Olsson et al.; n_ctx 256: positions 246..255 - 20..29; negative = in-context\n"
    "learning) and per head copying_ablation = mean drop in log p(next token) at\n"
    "copy positions (next token already in the window) when the head is\n"
    "mean-ablated, and copying_ablation_excess = that drop minus the mean drop at\n"
    "the other positions (what the head does for copying beyond its general use).\n"
    "Heads with induction > " AL_TH_STR(AL_TH_INDUCTION) " (on a text probe induction_all > "
    AL_TH_STR(AL_TH_INDUCTION) ") are named\n"
    "induction heads, prev_token > " AL_TH_STR(AL_TH_PREV_TOKEN) " previous-token heads. Tables head_scores,\n"
    "layer_scores and model_scores (one run). With --circuit every\n"

    "forward runs only the circuit's edges (docs/design.md, running a circuit):\n"
    "the removed edges carry the next sequence's values (--fill corrupted,\n"
    "resampling) or their senders' means over the --data windows (--fill mean).",
    flags,
    run_scores,
};
/* clang-format on */

/* "what: 1.3 (0.870 ± 0.012), 1.5 (0.450 ± 0.031, undecided)": the
 * document's named heads (strongest first already), or "none". */
static void text_named(const char *what, const cJSON *arr) {
    printf("%s: ", what);
    int any = 0;
    const cJSON *j;
    cJSON_ArrayForEach(j, arr) {
        const char *call = al_dt_str(j, "call");
        printf("%s%s (%.3f", any++ ? ", " : "", al_dt_str(j, "head"), al_dt_num(j, "value"));
        if (isfinite(al_dt_num(j, "se"))) printf(" ± %.3f", al_dt_num(j, "se"));
        printf("%s%s)", al_dt_bool(j, "off") ? ", off" : "",
               strcmp(call, "undecided") ? "" : ", undecided");
    }
    printf("%s\n", any ? "" : "none");
}

/* "0.555±0.021" right-aligned in w columns ("±" is one column, two bytes);
 * the value alone when se is not a number. */
static void print_pm(double v, double se, int w) {
    char b[64];
    int n =
        isfinite(se) ? snprintf(b, sizeof b, "%.3f±%.3f", v, se) : snprintf(b, sizeof b, "%.3f", v);
    int cols = n - (isfinite(se) ? 1 : 0);
    printf(" %*s%s", cols < w ? w - cols : 0, "", b);
}

/* The score that names induction heads: induction_all on a text probe,
 * induction on random ids (docs/design.md §5). On text an induction head
 * matches "previous token = my token" wherever that holds, so induction,
 * which reads the one position R-1 back, is only a lower bound that
 * falls as recurrences rise; on random ids the two are equal but for the
 * rare id that recurs, and the named heads stay those of earlier
 * versions. */
static const double *verdict_scores(const al_scores_result *r, const char **name) {
    *name = r->probe_text ? "induction_all" : "induction";
    return r->probe_text ? r->probe.induction_all : r->probe.induction;
}

/* The text of attnlab.scores/1, from the document alone. */
static void scores_text(const cJSON *doc) {
    const int L = al_dt_int(doc, "n_layers"), H = al_dt_int(doc, "heads_per_layer");
    const cJSON *heads = al_dt_get(doc, "heads"), *pr = al_dt_get(doc, "probe"),
                *tx = al_dt_get(doc, "text"), *h;
    const int probe_text = al_dt_get(pr, "recurrence") != NULL, have_text = cJSON_IsObject(tx);
    int masked = 0;
    cJSON_ArrayForEach(h, heads) masked |= al_dt_bool(h, "off");
    if (al_dt_get(doc, "probe_made_of"))
        printf("probe made of %s\n", al_dt_str(doc, "probe_made_of"));
    printf("model %s (sha256 %.12s…; %d layer%s × %d heads%s) -> run %lld of %s\n",
           al_dt_str(doc, "model"), al_dt_str(doc, "sha256"), L, L == 1 ? "" : "s", H,
           masked ? ", masked" : "", (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"));
    al_dt_circuit(doc);
    /* induction_all's column only for a text probe, where it differs */
    printf("%-5s %13s %13s %13s", "head", "induction", "dup_token", "prev_tok");
    if (probe_text) printf(" %13s", "ind_all");
    printf(" %12s %12s\n", "copying_abl", "excess");
    int i = 0;
    cJSON_ArrayForEach(h, heads) {
        printf("%d.%-3d", i / H, i % H);
        print_pm(al_dt_num(h, "induction"), al_dt_num(h, "induction_se"), 13);
        print_pm(al_dt_num(h, "duplicate_token"), al_dt_num(h, "duplicate_token_se"), 13);
        print_pm(al_dt_num(h, "prev_token"), al_dt_num(h, "prev_token_se"), 13);
        if (probe_text)
            print_pm(al_dt_num(h, "induction_all"), al_dt_num(h, "induction_all_se"), 13);
        double ex = al_dt_num(h, "copying_ablation_excess");
        if (al_dt_bool(h, "off"))
            printf(" %12s\n", "(off)");
        else if (have_text && isnan(ex))
            printf(" %+12.4f %12s\n", al_dt_num(h, "copying_ablation"), "-");
        else if (have_text)
            printf(" %+12.4f %+12.4f\n", al_dt_num(h, "copying_ablation"), ex);
        else
            printf(" %12s\n", "-");
        i++;
    }
    const cJSON *iv = al_dt_get(doc, "intervals"), *gci = al_dt_get(pr, "icl_gain_ci");
    if (iv)
        printf(
            "±: standard error over the %d probe sequences; %g%% intervals: bootstrap "
            "expanded percentile (%d resamples, seed %llu) in --json and table score_intervals; the "
            "named heads' calls use simultaneous %g%% intervals over the %d heads (z %.2f)\n",
            al_dt_int(iv, "items"), 100 * al_dt_num(iv, "level"), al_dt_int(iv, "bootstrap"),
            (unsigned long long)al_dt_u64(iv, "seed"), 100 * al_dt_num(iv, "level"),
            al_dt_int(iv, "heads"), al_dt_num(iv, "simultaneous_z"));
    printf("probe (R %d, N %d, seed %llu): loss first repeat %.4f, second %.4f, icl_gain %.4f",
           al_dt_int(pr, "r"), al_dt_int(pr, "n"), (unsigned long long)al_dt_u64(pr, "seed"),
           al_dt_num(pr, "loss_first"), al_dt_num(pr, "loss_second"), al_dt_num(pr, "icl_gain"));
    if (isfinite(al_dt_num(pr, "icl_gain_se"))) printf(" ± %.4f", al_dt_num(pr, "icl_gain_se"));
    if (isfinite(al_dt_at(gci, 0)))
        printf(" (%g%% CI %.4f to %.4f)", 100 * al_dt_num(iv, "level"), al_dt_at(gci, 0),
               al_dt_at(gci, 1));
    printf("\n");
    if (probe_text) {
        printf("text probe: at %.1f%% of second-half positions the token also sits elsewhere in "
               "the first half; induction counts attention to the one position R-1 back only, "
               "ind_all (induction_all) to the successor of every earlier occurrence (%.3f for "
               "uniform attention, %.3f for a previous-token head); a head attending evenly to "
               "those successors reads %.3f on induction\n",
               100 * al_dt_num(pr, "recurrence"), al_dt_num(pr, "uniform_all"),
               al_dt_num(pr, "prev_all"), al_dt_num(pr, "induction_ceiling"));
        printf("induction mass by layer (heads summed, induction / induction_all):");
        const cJSON *l;
        cJSON_ArrayForEach(l, al_dt_get(doc, "layers")) {
            int li = al_dt_int(l, "layer");
            printf("%s layer %d %.3f / %.3f", li ? "," : "", li, al_dt_num(l, "induction_sum"),
                   al_dt_num(l, "induction_all_sum"));
        }
        printf("\n");
    }
    if (have_text) {
        const cJSON *lp = al_dt_get(tx, "late_positions"), *ep = al_dt_get(tx, "early_positions");
        printf("text %s (%d x %d windows of %d): loss %.4f; icl_score %+.4f ± %.4f (late %d..%d "
               "%.4f - early %d..%d %.4f); copy positions %.1f%% (loss %.4f)\n",
               al_dt_str(tx, "data"), al_dt_int(tx, "batches"), al_dt_int(tx, "batch"),
               al_dt_int(tx, "T"), al_dt_num(tx, "loss"), al_dt_num(tx, "icl_score"),
               al_dt_num(tx, "icl_score_se"), cJSON_GetArrayItem(lp, 0)->valueint,
               cJSON_GetArrayItem(lp, 1)->valueint, al_dt_num(tx, "icl_late"),
               cJSON_GetArrayItem(ep, 0)->valueint, cJSON_GetArrayItem(ep, 1)->valueint,
               al_dt_num(tx, "icl_early"), 100 * al_dt_num(tx, "copy_fraction"),
               al_dt_num(tx, "loss_copy"));
    } else
        printf("no --data: icl_score and copying_ablation skipped\n");
    char what[96];
    /* clang-format off */
    snprintf(what, sizeof what, "induction heads (%s > " AL_TH_STR(AL_TH_INDUCTION) ")",
             al_dt_str(doc, "induction_heads_by"));
    text_named(what, al_dt_get(doc, "induction_heads"));
    text_named("previous-token heads (prev_token > " AL_TH_STR(AL_TH_PREV_TOKEN) ")",
               al_dt_get(doc, "previous_token_heads"));
    if (al_dt_get(doc, "copying_heads"))
        text_named("copying heads by ablation (copying_ablation > " AL_TH_STR(AL_TH_COPY_ABLATION)
                   " nats)", al_dt_get(doc, "copying_heads"));
    /* clang-format on */
}

/* [lo, hi] of iv as exact numbers (null where NaN), as doc[key]. */
static int json_ci(cJSON *doc, const char *key, double lo, double hi) {
    cJSON *a = cJSON_AddArrayToObject(doc, key);
    return a && cJSON_AddItemToArray(a, al_json_num_item(lo)) &&
                   cJSON_AddItemToArray(a, al_json_num_item(hi))
               ? 0
               : -1;
}

/* "induction_heads": [{"head": "1.3", "value": 0.87, "off": false, "se",
 * "ci" (the simultaneous interval), "call": "yes" | "undecided"}, ...] of
 * heads with v > thr, strongest first (as the text names them); se may
 * be NULL (no intervals). */
static int json_named(cJSON *doc, const char *key, const double *v, const al_interval *se, double z,
                      const unsigned char *off, int LH, int H, double thr) {
    cJSON *arr = cJSON_AddArrayToObject(doc, key);
    int *used = calloc((size_t)LH, sizeof(int)), rc = arr && used ? 0 : -1;
    for (; rc == 0;) {
        int best = -1;
        for (int i = 0; i < LH; i++)
            if (!used[i] && v[i] > thr && (best < 0 || v[i] > v[best])) best = i;
        if (best < 0) break;
        used[best] = 1;
        char nm[32];
        snprintf(nm, sizeof nm, "%d.%d", best / H, best % H);
        double s = se ? se[best].se : NAN;
        int call = al_scores_call(v[best], s, z, thr);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(arr, j) || !cJSON_AddStringToObject(j, "head", nm) ||
            !cJSON_AddNumberToObject(j, "value", v[best]) ||
            !cJSON_AddBoolToObject(j, "off", off[best]) ||
            !cJSON_AddItemToObject(j, "se", al_json_num_item(s)) ||
            json_ci(j, "ci", v[best] - z * s, v[best] + z * s) ||
            !cJSON_AddStringToObject(j, "call", call > 0 ? "yes" : "undecided"))
            rc = -1;
    }
    free(used);
    return rc;
}

/* attnlab.scores/1 (docs/json.md), beside the driver's run and model keys. */
static int json_scores(cJSON *doc, const scores_args *a, const al_probe_load *pl,
                       const al_scores_result *r) {
    const int n_allowed = pl->n_ids;
    int L = r->L, H = r->H;
    const al_probe_scores *ps = &r->probe;
    const al_scores_opts *o = &a->o;
    cJSON *heads, *probe;
    if ((!pl->random_all && !cJSON_AddStringToObject(doc, "probe_made_of", pl->what)) ||
        !cJSON_AddNumberToObject(doc, "n_layers", L) ||
        !cJSON_AddNumberToObject(doc, "heads_per_layer", H) ||
        !cJSON_AddStringToObject(doc, "probe_tokens", a->probe_tokens) ||
        !cJSON_AddNumberToObject(doc, "probe_ids", n_allowed) ||
        !(heads = cJSON_AddArrayToObject(doc, "heads")))
        return -1;
    for (int i = 0; i < L * H; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%d.%d", i / H, i % H);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(heads, j) || !cJSON_AddStringToObject(j, "head", nm) ||
            !cJSON_AddNumberToObject(j, "induction", ps->induction[i]) ||
            !cJSON_AddNumberToObject(j, "duplicate_token", ps->duplicate_token[i]) ||
            !cJSON_AddNumberToObject(j, "prev_token", ps->prev_token[i]) ||
            !cJSON_AddNumberToObject(j, "induction_all", ps->induction_all[i]) ||
            !cJSON_AddBoolToObject(j, "off", r->off[i]))
            return -1;
        static const char *const ks[4] = {"induction", "duplicate_token", "prev_token",
                                          "induction_all"};
        for (int k = 0; r->ci && k < 4; k++) {
            if (al_json_add_ci(j, ks[k], &r->ci[k * L * H + i])) return -1;
        }
        if (r->have_text && !r->off[i] &&
            (!cJSON_AddNumberToObject(j, "copying_ablation", r->copying[i]) ||
             (r->ci && al_json_add_ci(j, "copying_ablation", &r->copying_ci[i])) ||
             !cJSON_AddNumberToObject(j, "copying_ablation_excess", r->excess[i])))
            return -1;
    }
    cJSON *layers = cJSON_AddArrayToObject(doc, "layers");
    for (int l = 0; layers && l < L; l++) {
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(layers, j) || !cJSON_AddNumberToObject(j, "layer", l) ||
            !cJSON_AddNumberToObject(j, "induction_sum", ps->layer_induction[l]) ||
            !cJSON_AddNumberToObject(j, "induction_all_sum", ps->layer_induction_all[l]))
            return -1;
    }
    if (!layers || !(probe = cJSON_AddObjectToObject(doc, "probe")) ||
        !cJSON_AddNumberToObject(probe, "r", o->probe_r) ||
        !cJSON_AddNumberToObject(probe, "n", o->probe_n) ||
        !cJSON_AddItemToObject(probe, "seed", al_json_u64_item(o->probe_seed)) ||
        !cJSON_AddNumberToObject(probe, "loss_first", ps->loss_first) ||
        !cJSON_AddNumberToObject(probe, "loss_second", ps->loss_second) ||
        !cJSON_AddNumberToObject(probe, "icl_gain", ps->icl_gain) ||
        (r->ci && al_json_add_ci(probe, "icl_gain", &r->ci[4 * L * H])) ||
        (r->probe_text && (!cJSON_AddNumberToObject(probe, "recurrence", r->probe_recur) ||
                           !cJSON_AddNumberToObject(probe, "uniform_all", r->probe_uniform_all) ||
                           !cJSON_AddNumberToObject(probe, "prev_all", r->probe_prev_all) ||
                           !cJSON_AddNumberToObject(probe, "induction_ceiling", r->probe_ceiling))))
        return -1;
    if (r->have_text) {
        cJSON *t = cJSON_AddObjectToObject(doc, "text"), *lp, *ep;
        if (!t || !cJSON_AddStringToObject(t, "data", a->w.data) ||
            !cJSON_AddNumberToObject(t, "batches", o->batches) ||
            !cJSON_AddNumberToObject(t, "batch", o->batch) ||
            !cJSON_AddNumberToObject(t, "T", r->T) ||
            !(lp = cJSON_AddArrayToObject(t, "late_positions")) ||
            !cJSON_AddItemToArray(lp, cJSON_CreateNumber(r->rg.l0)) ||
            !cJSON_AddItemToArray(lp, cJSON_CreateNumber(r->rg.l1 - 1)) ||
            !(ep = cJSON_AddArrayToObject(t, "early_positions")) ||
            !cJSON_AddItemToArray(ep, cJSON_CreateNumber(r->rg.e0)) ||
            !cJSON_AddItemToArray(ep, cJSON_CreateNumber(r->rg.e1 - 1)) ||
            !cJSON_AddNumberToObject(t, "loss", r->val_loss) ||
            !cJSON_AddNumberToObject(t, "icl_score", r->icl_score) ||
            !cJSON_AddNumberToObject(t, "icl_score_se", r->icl_se) ||
            !cJSON_AddNumberToObject(t, "icl_late", r->icl_late) ||
            !cJSON_AddNumberToObject(t, "icl_early", r->icl_early) ||
            !cJSON_AddNumberToObject(t, "copy_fraction", r->copy_fraction) ||
            !cJSON_AddNumberToObject(t, "loss_copy", r->val_loss_copy))
            return -1;
    } else if (!cJSON_AddNullToObject(doc, "text"))
        return -1;
    const char *by;
    const double *v = verdict_scores(r, &by);
    /* the intervals of the score that names induction heads */
    const al_interval *vci = r->ci ? r->ci + (r->probe_text ? 3 : 0) * L * H : NULL;
    cJSON *iv;
    if (r->ci &&
        (!(iv = al_json_add_intervals(
               doc, r->ci_level, r->ci_boot, r->ci_seed, r->ci_n,
               "se: standard error of the mean over the probe sequences; *_ci: bootstrap "
               "expanded percentile interval, resampling whole sequences; the named heads' ci: "
               "value +- simultaneous_z * se (normal, Bonferroni over the heads)")) ||
         !cJSON_AddNumberToObject(iv, "heads", L * H) ||
         !cJSON_AddItemToObject(iv, "simultaneous_z", al_json_num_item(r->ci_z))))
        return -1;
    return !cJSON_AddStringToObject(doc, "induction_heads_by", by) ||
                   json_named(doc, "induction_heads", v, vci, r->ci_z, r->off, L * H, H,
                              AL_TH_INDUCTION) ||
                   json_named(doc, "previous_token_heads", ps->prev_token,
                              r->ci ? r->ci + 2 * L * H : NULL, r->ci_z, r->off, L * H, H,
                              AL_TH_PREV_TOKEN) ||
                   (r->have_text &&
                    json_named(doc, "copying_heads", r->copying, r->ci ? r->copying_ci : NULL,
                               r->ci_z, r->off, L * H, H, AL_TH_COPY_ABLATION))
               ? -1
               : 0;
}

static int scores_check(const void *args, const al_flag *fl, al_err *e) {
    const scores_args *a = args;
    (void)fl;
    return al_scores_opts_check(&a->o, e) || al_threads_check(a->w.threads, e) ||
                   al_circuit_fill_check(a->fill, e)
               ? -1
               : 0;
}

/* The run's state between the driver's phases. */
typedef struct scores_state {
    al_tokens d;
    int T;
    al_probe_load pl; /* --probe-tokens: what the probe is made of */
    al_scores_result r;
} scores_state;

/* The probe against the model's context. */
static int scores_check_model(const void *args, const al_config *c, al_err *e) {
    return al_probe_fits(((const scores_args *)args)->o.probe_r, c->n_ctx, e);
}

/* The probe's ids, the tokens and the circuit, before the run row exists. */
static int scores_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    scores_args *a = args;
    scores_state *s = state;
    al_behave *b = dr->b;
    /* the probe's R for this model, so the run records and prints it */
    a->o.probe_r = al_probe_r_default(a->o.probe_r, b->m.cfg.n_ctx);
    if (al_probe_load_open(&s->pl, a->probe_tokens, a->w.model, NULL, NULL, b->m.cfg.d_vocab, e))
        return -1;
    al_drive_warn(dr, s->pl.warn);
    if (a->w.data && al_behave_tokens(b, a->w.data, &s->d, &s->T, e)) return -1;
    char what[160]; /* the windows only with --data; the probe always */
    snprintf(what, sizeof what, "--batch %d x --batches %d windows of %d tokens and --probe-n %d",
             a->o.batch, a->o.batches, a->w.data ? s->T : 0, a->o.probe_n);
    if (al_mem_check(al_scores_bytes(&b->m.cfg, a->w.data ? s->T : 0, &a->o), "scores", what,
                     "lower --batch, --batches or --probe-n", e))
        return -1;
    return a->circuit && al_behave_circuit(b, a->circuit, a->fill, a->w.data ? &s->d : NULL, s->T,
                                           a->o.batches, a->o.batch, e)
               ? -1
               : 0;
}

static int scores_compute(void *args, void *state, al_drive *dr, al_err *e) {
    scores_args *a = args;
    scores_state *s = state;
    al_behave *b = dr->b;
    al_scores_opts o = a->o;
    o.progress = dr->progress;
    o.probe_src = al_probe_load_src(&s->pl);
    /* said before the (long) analysis, as the run begins */
    al_behave_warn_probe(b, 2 * o.probe_r + 1);
    return al_scores_run(&b->m, a->w.data ? &s->d : NULL, s->T, al_behave_bos(b), b->off, &o, &s->r,
                         e);
}

static int scores_store(void *args, void *state, al_drive *dr, al_err *e) {
    scores_state *s = state;
    (void)args;
    return al_store_put_scores(dr->b->st, dr->b->run_id, dr->b->model_id, &s->r, e);
}

static int scores_doc(void *args, void *state, al_drive *dr, al_err *e) {
    scores_state *s = state;
    return json_scores(dr->doc, args, &s->pl, &s->r) ? al_errf(e, "out of memory") : 0;
}

static void scores_release(void *state) {
    scores_state *s = state;
    al_probe_load_free(&s->pl);
    al_scores_result_free(&s->r);
    al_tokens_free(&s->d);
}

static void scores_init(void *args) {
    static const scores_args dflt = SCORES_ARGS_INIT;
    *(scores_args *)args = dflt;
}

static const al_warnings *scores_warnings(const void *state) {
    return &((const scores_state *)state)->r.warn;
}

/* An experiment stage's label: the probe, so that a list of scores
 * stages reads apart. */
static void scores_label(const cJSON *v, char *buf, size_t cap) {
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(v, "probe_tokens");
    if (!cJSON_IsString(pt)) pt = cJSON_GetObjectItemCaseSensitive(v, "probe-tokens");
    if (cJSON_IsString(pt))
        snprintf(buf, cap, "scores (probe %s)", pt->valuestring);
    else
        snprintf(buf, cap, "scores");
}

const al_analysis al_an_scores = {.name = "scores",
                                  .cmd = &al_cmd_scores,
                                  .groups = AL_GROUP_WHERE | AL_GROUP_CIRCUIT,
                                  .tmpl = &g,
                                  .size = sizeof g,
                                  .init = scores_init,
                                  .check = scores_check,
                                  .check_model = scores_check_model,
                                  .state_size = sizeof(scores_state),
                                  .prepare = scores_prepare,
                                  .compute = scores_compute,
                                  .store = scores_store,
                                  .doc = scores_doc,
                                  .text = scores_text,
                                  .release = scores_release,
                                  .warnings = scores_warnings,
                                  .exp_data = AL_EXP_DATA_VAL,
                                  .results = AL_RESULTS_SCORES,
                                  .exp_list = 1,
                                  .exp_label = scores_label};

static int run_scores(int argc, char **argv) { return al_drive_main(&al_an_scores, argc, argv); }
