/* cmd_patch.c -- `attnlab patch` (activation patching) and `attnlab paths`
 * (path patching): clean / corrupted pairs of a task, one patched run
 * per configuration, the normalised effect of each (docs/design.md §5),
 * into tables patching / path_patching and patching_runs.
 *
 * In the run driver's phases (registry.h) the task is made in prepare,
 * from the loaded model before any run is begun, so an input the task
 * refuses (a probe longer than n_ctx, a model without a tokenizer for
 * names/file, a bad pair file) leaves no run behind; so does
 * SIGINT/SIGTERM while the task is made (the names task notices it
 * between two stories), exiting 130. A sweep stops at SIGINT/SIGTERM
 * between two configurations: the run is marked failed with
 * "interrupted", none of its rows are committed, and the command exits
 * 130. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/doc_text.h"
#include "attnlab/json.h"
#include "attnlab/patch.h"
#include "attnlab/registry.h"
#include "attnlab/stop.h"
#include "attnlab/store_analysis.h"

#include <cjson/cJSON.h>

typedef struct patch_args {
    al_an_where w;
    al_patch_opts o;
    const char *probe_tokens; /* all | seen | a token file: the induction task's ids */
    int show; /* configurations (paths: paths) printed */
} patch_args;

#define PATCH_ARGS_INIT                                                                            \
    { AL_AN_WHERE_INIT, AL_PATCH_OPTS_INIT, AL_PROBE_TOKENS_DEFAULT, 10 }
static patch_args g_patch = PATCH_ARGS_INIT;
static patch_args g_paths = PATCH_ARGS_INIT;

#define OWN_FLAGS(G)                                                                               \
    {"direction",                                                                                  \
     AL_STR,                                                                                       \
     &G.o.direction,                                                                               \
     "D",                                                                                          \
     "denoise (corrupted run, clean activations patched in) or noise (the reverse)",               \
     0,                                                                                            \
     0},                                                                                           \
    {                                                                                              \
        "naive", AL_BOOL, &G.o.naive, NULL,                                                        \
            "one full forward pass per configuration (the reference, for checking)", 0, 0          \
    }

static al_flag patch_flags[] = {AL_FLAG_MODEL(g_patch),
                                AL_FLAG_DB(g_patch),
                                AL_FLAGS_TASK_FILE(g_patch),
                                {"component", AL_STR, &g_patch.o.component, "C",
                                 "resid, head, head_pos, q, k, v or pattern (see above)", 0, 0},
                                OWN_FLAGS(g_patch),
                                AL_FLAGS_TASK_DRAW(g_patch),
                                AL_FLAG_MASK(g_patch),
                                AL_FLAG_INTERVENE(g_patch),
                                {"show", AL_INT, &g_patch.show, "N",
                                 "configurations printed (largest |effect| first)", 0, 0},
                                AL_FLAGS_CI(g_patch),
                                AL_FLAG_THREADS(g_patch),
                                AL_FLAGS_END};

static al_flag paths_flags[] = {AL_FLAG_MODEL(g_paths),
                                AL_FLAG_DB(g_paths),
                                AL_FLAGS_TASK_FILE(g_paths),
                                OWN_FLAGS(g_paths),
                                AL_FLAGS_TASK_DRAW(g_paths),
                                AL_FLAG_MASK(g_paths),
                                AL_FLAG_INTERVENE(g_paths),
                                {"show", AL_INT, &g_paths.show, "N",
                                 "paths printed (largest |effect| first)", 0, 0},
                                AL_FLAGS_CI(g_paths),
                                AL_FLAG_THREADS(g_paths),
                                AL_FLAGS_END};

#define TASKS_HELP                                                                                 \
    "Tasks: induction (BOS + A + A against BOS + A' + A, A random tokens; metric =\n"              \
    "mean log p of the next token over the second half), names (synthetic stories\n"               \
    "whose invented name recurs, against the same with another name; metric =\n"                   \
    "logit(name) - logit(other name)), file (--pairs FILE.jsonl, your own pairs,\n"                \
    "logit difference at each pair's last position). Effect of a patch with metric\n"              \
    "M_p: denoise (M_p - M_corr) / (M_clean - M_corr), 1 = the patch restores the\n"               \
    "clean behaviour; noise (M_clean - M_p) / (M_clean - M_corr), 1 = it breaks it.\n"

static int run_patch(int argc, char **argv);
static int run_paths(int argc, char **argv);
extern const al_analysis al_an_patch, al_an_paths;

al_command al_cmd_patch = {
    "patch",
    "activation patching: which component carries the behaviour (one run per configuration)",
    "--model DIR --db FILE [--task induction|names|file] [--component C] [--direction denoise|noise]",
    TASKS_HELP "Components (one configuration each): resid (the residual stream entering layer\n"
               "l at position t), head (head l.h's output at every position), head_pos (at one\n"
               "position), q, k, v (head l.h's query / key / value at position t computed from\n"
               "the other run), pattern (its attention row t from the other run). Rows go to\n"
               "table patching (head NULL for resid, pos NULL for head; value = effect, metric\n"
               "= M_p) and patching_runs (M_clean, M_corr). Ctrl-C stops the sweep: the run is\n"
               "marked failed, nothing is stored, exit 130.",
    patch_flags,
    run_patch,
};

al_command al_cmd_paths = {
    "paths",
    "path patching: embed, pos and each head into each later head's q, k, v and the logits",
    "--model DIR --db FILE [--task induction|names|file] [--direction noise|denoise]",
    TASKS_HELP "Senders: embed, pos and every head of layers 0..L-2; receivers: the query, key\n"
               "and value input of every head of layers 1..L-1 (from the senders of earlier\n"
               "layers), and the logits directly (the only receiver of a 1-layer model).\n"
               "Noising runs the clean sequences with the receiver's input computed from clean\n"
               "residual - sender(clean) + sender(corrupted), every other head's input clean,\n"
               "the layers after the receiver's recomputed; denoising is the mirror image.\n"
               "Models of up to 16 layers. The induction circuit shows\n"
               "as a previous-token head's path into an induction head's keys (channel k).\n"
               "Rows go to table path_patching (direct paths: channel 'direct', receiver NULL)\n"
               "and patching_runs. Ctrl-C stops the sweep: the run is marked failed, nothing is\n"
               "stored, exit 130.",
    paths_flags,
    run_paths,
};

/* The run's state between the driver's phases (patch and paths share it:
 * r is patch's result, pr paths'). */
typedef struct patch_state {
    al_patch_opts o; /* the options with the task's ids, the stop flag and progress */
    al_probe_load pl; /* --probe-tokens: what the induction task is made of */
    al_pairs t;
    al_patch_result r;
    al_paths_result pr;
    double t0; /* when the model was loaded: the printed total */
} patch_state;

/* ------------------------------------------------------------ printing */

static const char *metric_words(const al_pairs *t) {
    return t->logit_diff ? "logit(answer) - logit(wrong)" : "log p of the answer";
}

/* " @ t 'tok'" (pair 0's clean token at t) or " @ t" without a tokenizer. */
static void at_pos(const al_behave *bh, const al_pairs *t, int pos, char *buf, size_t cap) {
    char tok[64];
    if (!bh->tok || pos >= t->len[0]) {
        snprintf(buf, cap, " @ %d", pos);
        return;
    }
    al_store_token_str(bh->tok, t->clean[pos], tok, sizeof tok);
    snprintf(buf, cap, " @ %d '%s'", pos, tok);
}

/* The name of configuration k of r (its grid as in patch.h). */
static void config_name(const al_behave *bh, const al_pairs *t, const al_patch_result *r, int k,
                        char *buf, size_t cap) {
    char at[96];
    int row = k / r->cols, col = k % r->cols;
    switch (r->component) {
    case AL_PATCH_RESID:
        at_pos(bh, t, col, at, sizeof at);
        snprintf(buf, cap, "resid %d%s", row, at);
        break;
    case AL_PATCH_HEAD: snprintf(buf, cap, "%d.%d", row, col); break;
    case AL_PATCH_HEAD_POS:
        at_pos(bh, t, col, at, sizeof at);
        snprintf(buf, cap, "%d.%d%s", row / r->H, row % r->H, at);
        break;
    default:
        at_pos(bh, t, col, at, sizeof at);
        snprintf(buf, cap, "%d.%d %s%s", row / r->H, row % r->H,
                 al_patch_component_name(r->component), at);
        break;
    }
}

/* The model, the task and the unpatched runs of the document. */
static void text_head(const cJSON *doc, const char *what) {
    const cJSON *tk = al_dt_get(doc, "task");
    const int N = al_dt_int(tk, "pairs"), T = al_dt_int(tk, "T"), n = al_dt_int(tk, "items");
    const int lo = al_dt_int(tk, "min_len"), den = !strcmp(al_dt_str(doc, "direction"), "denoise");
    const double mc = al_dt_num(doc, "m_clean"), mr = al_dt_num(doc, "m_corr");
    if (al_dt_get(doc, "pairs_made_of"))
        printf("induction pairs made of %s\n", al_dt_str(doc, "pairs_made_of"));
    printf("model %s (sha256 %.12s…) -> run %lld of %s\n", al_dt_str(doc, "model"),
           al_dt_str(doc, "sha256"), (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"));
    printf("task %s: %d pair%s of %d tokens, %d scored item%s (metric M = mean %s); %s, %s\n",
           al_dt_str(tk, "name"), N, N == 1 ? "" : "s", T, n, n == 1 ? "" : "s",
           al_dt_str(tk, "metric"), what, den ? "denoising" : "noising");
    if (lo < T)
        printf("note: the pairs are %d to %d tokens long, so position t is a different token in "
               "each pair: a per-position effect averages over the pairs, and positions are "
               "named by pair 0's tokens\n",
               lo, T);
    printf("M_clean = %.4f   M_corr = %.4f   effect = %s / (M_clean - M_corr)%s\n", mc, mr,
           den ? "(M_patched - M_corr)" : "(M_clean - M_patched)",
           mc == mr ? "  (undefined: the two runs agree)" : "");
}

/* " (± standard error over the N pairs; ...)" after a list's heading,
 * when the run has intervals. */
static void text_ci_note(const cJSON *doc) {
    const cJSON *iv = al_dt_get(doc, "intervals");
    if (iv)
        printf(" (± standard error over the %d pairs; %g%% interval: bootstrap over the pairs, %d "
               "resamples)",
               al_dt_int(iv, "items"), 100 * al_dt_num(iv, "level"), al_dt_int(iv, "bootstrap"));
}

/* " effect metric se  [lo, hi]" of one configuration or path, and the
 * line's end. */
static void text_effect(const cJSON *c) {
    const cJSON *ci = al_dt_get(c, "effect_ci");
    printf(" %+9.4f %10.4f %8.4f", al_dt_num(c, "effect") + 0.0, al_dt_num(c, "metric"),
           al_dt_num(c, "effect_se"));
    if (isfinite(al_dt_at(ci, 0)))
        printf("  [%+.4f, %+.4f]", al_dt_at(ci, 0) + 0.0, al_dt_at(ci, 1) + 0.0);
    printf("\n");
}

/* The last line: how many configurations or paths, in how long. */
static void text_tail(const cJSON *doc, const char *cmd, const char *what, int n) {
    const int nb = al_dt_int(doc, "batches");
    printf("%s: %d %s x %d batch%s of pairs in %.2f s (total %.2f s)\n", cmd, n, what, nb,
           nb == 1 ? "" : "es", al_dt_num(doc, "seconds"), al_dt_num(doc, "total_seconds"));
}

/* The text of attnlab.patch/1, from the document alone. */
static void patch_text(const cJSON *doc) {
    const cJSON *cs = al_dt_get(doc, "configurations");
    char what[64];
    snprintf(what, sizeof what, "component %s", al_dt_str(doc, "component"));
    text_head(doc, what);
    int n = cJSON_GetArraySize(cs), show = al_dt_int(doc, "show");
    show = show < n ? show : n;
    printf("top %d of %d configurations by |effect|", show, n);
    text_ci_note(doc);
    printf(":\n  %-30s %9s %10s %8s %19s\n", "configuration", "effect", "metric", "±", "interval");
    for (int i = 0; i < show; i++) {
        const cJSON *c = cJSON_GetArrayItem(cs, i);
        printf("  ");
        al_print_col(al_dt_str(c, "name"), 30);
        text_effect(c);
    }
    text_tail(doc, "patch", "configurations", n);
}

/* The effect of the path sender -> receiver over channel (receiver NULL:
 * direct) in the document's list; NAN when it has none. */
static double path_effect(const cJSON *ps, const char *sender, const char *receiver,
                          const char *channel) {
    const cJSON *p;
    cJSON_ArrayForEach(p, ps) {
        if (!strcmp(al_dt_str(p, "sender"), sender) && !strcmp(al_dt_str(p, "channel"), channel) &&
            (!receiver || !strcmp(al_dt_str(p, "receiver"), receiver)))
            return al_dt_num(p, "effect");
    }
    return NAN;
}

/* The text of attnlab.paths/1, from the document alone: the K channel as
 * a matrix (senders x receiver heads of layers 1..L-1) beside the direct
 * path, then the strongest paths over every channel. A path that does
 * not exist (a sender head in the receiver's layer or a later one)
 * prints as "." in the matrix. */
static void paths_text(const cJSON *doc) {
    const int L = al_dt_int(doc, "n_layers"), H = al_dt_int(doc, "heads_per_layer");
    const int ns = al_dt_int(doc, "senders"), n_recv = al_dt_int(doc, "receivers");
    const cJSON *ps = al_dt_get(doc, "paths");
    char nm[32], rn[16], what[64];
    if (L <= 2)
        snprintf(what, sizeof what, "paths from embed, pos and layer 0");
    else
        snprintf(what, sizeof what, "paths from embed, pos and layers 0-%d", L - 2);
    text_head(doc, what);
    if (L > 2)
        printf("effect of each sender's path into the keys of each head of layers 1-%d "
               "(channel k), and directly into the logits:\n%-7s",
               L - 1, "sender");
    else if (n_recv)
        printf("effect of each sender's path into the keys of each layer-1 head (channel k), "
               "and directly into the logits:\n%-7s",
               "sender");
    else
        printf("a 1-layer model has only direct paths (sender -> logits):\n%-7s", "sender");
    for (int h = 0; h < n_recv; h++) {
        char c[16];
        snprintf(c, sizeof c, "k:%s", al_paths_receiver_name(H, h, rn, sizeof rn));
        printf(" %7s", c);
    }
    printf(" | %7s\n", "direct");
    for (int s = 0; s < ns; s++) {
        printf("%-7s", al_paths_sender_name(H, s, nm, sizeof nm));
        for (int h = 0; h < n_recv; h++) /* + 0.0: no "-0.000" */
            if (al_paths_exists(L, H, 1, s, h))
                printf(" %+7.3f",
                       path_effect(ps, nm, al_paths_receiver_name(H, h, rn, sizeof rn), "k") + 0.0);
            else
                printf(" %7s", ".");
        printf(" | %+7.3f\n", path_effect(ps, nm, NULL, "direct") + 0.0);
    }
    int n_paths = cJSON_GetArraySize(ps), show = al_dt_int(doc, "show");
    show = show < n_paths ? show : n_paths;
    printf("top %d of %d paths by |effect|", show, n_paths);
    text_ci_note(doc);
    printf(":\n  %-20s %9s %10s %8s %19s\n", "path", "effect", "metric", "±", "interval");
    for (int i = 0; i < show; i++) {
        const cJSON *p = cJSON_GetArrayItem(ps, i);
        char name[64];
        if (!strcmp(al_dt_str(p, "channel"), "direct"))
            snprintf(name, sizeof name, "%s -> logits", al_dt_str(p, "sender"));
        else
            snprintf(name, sizeof name, "%s -> %s %s", al_dt_str(p, "sender"),
                     al_dt_str(p, "receiver"), al_dt_str(p, "channel"));
        printf("  %-20s", name);
        text_effect(p);
    }
    text_tail(doc, "paths", "paths", n_paths);
}

/* ------------------------------------------------------------ JSON */

/* The task and the two unpatched runs (attnlab.patch/1, attnlab.paths/1;
 * the driver has added the model's fields before them). */
static int json_head(cJSON *doc, const patch_args *a, const patch_state *s, al_patch_direction d,
                     double mc, double mr, double seconds) {
    const al_pairs *t = &s->t;
    cJSON *tk;
    int lo = t->T;
    for (int n = 0; n < t->N; n++) lo = t->len[n] < lo ? t->len[n] : lo;
    return (!s->pl.random_all && !cJSON_AddStringToObject(doc, "pairs_made_of", s->pl.what)) ||
                   !cJSON_AddNumberToObject(doc, "show", a->show) ||
                   !cJSON_AddNumberToObject(doc, "batches", (t->N + s->o.batch - 1) / s->o.batch) ||
                   !cJSON_AddNumberToObject(doc, "seconds", seconds) ||
                   !cJSON_AddNumberToObject(doc, "total_seconds", al_now() - s->t0) ||
                   !(tk = cJSON_AddObjectToObject(doc, "task")) ||
                   !cJSON_AddStringToObject(tk, "name", t->task) ||
                   !cJSON_AddNumberToObject(tk, "pairs", t->N) ||
                   !cJSON_AddNumberToObject(tk, "T", t->T) ||
                   !cJSON_AddNumberToObject(tk, "min_len", lo) ||
                   !cJSON_AddNumberToObject(tk, "items", t->n_items) ||
                   !cJSON_AddStringToObject(tk, "metric", metric_words(t)) ||
                   !cJSON_AddStringToObject(tk, "probe_tokens", a->probe_tokens) ||
                   !cJSON_AddStringToObject(doc, "direction", al_patch_direction_name(d)) ||
                   !cJSON_AddNumberToObject(doc, "m_clean", mc) ||
                   !cJSON_AddNumberToObject(doc, "m_corr", mr)
               ? -1
               : 0;
}

/* The intervals' settings (attnlab.patch/1, attnlab.paths/1). */
static int json_intervals(cJSON *doc, double level, int boot, uint64_t seed, int n) {
    return al_json_add_intervals(doc, level, boot, seed, n,
                                 "effect_se: delta method for the ratio; effect_ci: "
                                 "bootstrap expanded percentile interval, resampling "
                                 "whole pairs and recomputing the ratio (numerator and "
                                 "denominator together)")
               ? 0
               : -1;
}

/* Every configuration by |effect| (the text shows the first --show). */
static int json_patch(cJSON *doc, const patch_args *a, const al_behave *bh, const patch_state *s) {
    const al_pairs *t = &s->t;
    const al_patch_result *r = &s->r;
    cJSON *cs;
    if (json_head(doc, a, s, r->direction, r->m_clean, r->m_corr, r->seconds) ||
        (r->effect_ci && json_intervals(doc, r->ci_level, r->ci_boot, r->ci_seed, r->ci_n)) ||
        !cJSON_AddStringToObject(doc, "component", al_patch_component_name(r->component)) ||
        !(cs = cJSON_AddArrayToObject(doc, "configurations")))
        return -1;
    int *idx = al_by_magnitude(r->effect, r->n), rc = idx ? 0 : -1;
    for (int i = 0; rc == 0 && i < r->n; i++) {
        char name[160];
        int k = idx[i], row = k / r->cols, col = k % r->cols;
        config_name(bh, t, r, k, name, sizeof name);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(cs, j) || !cJSON_AddStringToObject(j, "name", name) ||
            !cJSON_AddNumberToObject(j, "row", row) || !cJSON_AddNumberToObject(j, "col", col) ||
            !cJSON_AddNumberToObject(j, "effect", r->effect[k]) ||
            !cJSON_AddNumberToObject(j, "metric", r->metric[k]))
            rc = -1;
        if (rc == 0 && r->effect_ci && al_json_add_ci(j, "effect", &r->effect_ci[k])) rc = -1;
    }
    free(idx);
    return rc;
}

static int json_paths(cJSON *doc, const patch_args *a, const patch_state *s) {
    const al_paths_result *r = &s->pr;
    cJSON *ps;
    int ns = r->n_senders, H = r->H, W = r->width;
    if (json_head(doc, a, s, r->direction, r->m_clean, r->m_corr, r->seconds) ||
        !cJSON_AddNumberToObject(doc, "n_layers", r->L) ||
        !cJSON_AddNumberToObject(doc, "heads_per_layer", H) ||
        !cJSON_AddNumberToObject(doc, "senders", ns) ||
        !cJSON_AddNumberToObject(doc, "receivers", r->n_recv) ||
        (r->effect_ci && json_intervals(doc, r->ci_level, r->ci_boot, r->ci_seed, r->ci_n)) ||
        !(ps = cJSON_AddArrayToObject(doc, "paths")))
        return -1;
    int *idx = al_by_magnitude(r->effect, r->n), rc = idx ? 0 : -1;
    for (int i = 0; rc == 0 && i < r->n; i++) {
        int k = idx[i], c = k / (ns * W), s = k / W % ns, h = k % W;
        if (!al_paths_exists(r->L, H, c, s, h)) continue; /* no such path */
        char nm[32], recv[32];
        al_paths_sender_name(H, s, nm, sizeof nm);
        al_paths_receiver_name(H, h, recv, sizeof recv);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(ps, j) || !cJSON_AddStringToObject(j, "sender", nm) ||
            !(c == 3 ? cJSON_AddNullToObject(j, "receiver")
                     : cJSON_AddStringToObject(j, "receiver", recv)) ||
            !cJSON_AddStringToObject(j, "channel", c == 3 ? "direct" : al_paths_channel_name(c)) ||
            !cJSON_AddNumberToObject(j, "effect", r->effect[k]) ||
            !cJSON_AddNumberToObject(j, "metric", r->metric[k]) ||
            (r->effect_ci && al_json_add_ci(j, "effect", &r->effect_ci[k])))
            rc = -1;
    }
    free(idx);
    return rc;
}

/* ------------------------------------------------------------ running */

/* --probe-tokens: for the induction task, and a text for the names tasks. */
static int task_check(const patch_args *a, al_err *e) {
    return al_probe_tokens_check(a->probe_tokens, a->o.task, e);
}

static int patch_check(const void *args, const al_flag *fl, al_err *e) {
    const patch_args *a = args;
    (void)fl;
    if (al_patch_opts_check(&a->o, e) || task_check(a, e)) return -1;
    if (a->show < 0) return al_errf(e, "--show must be >= 0");
    return al_threads_check(a->w.threads, e);
}

/* Everything the task or the model can refuse, before a run exists. The
 * driver catches SIGINT/SIGTERM from before the load, and the names task
 * listens to the stop flag while it is made (a large --n takes a while):
 * a signal then ends the command with no run (exit 130). */
static int prepare_common(patch_args *a, patch_state *s, al_drive *dr, int paths, al_err *e) {
    al_behave *bh = dr->b;
    int L = bh->m.cfg.n_layers;
    s->t0 = al_now();
    s->o = a->o;
    s->o.stop = &al_stop;
    if (al_probe_load_open(&s->pl, a->probe_tokens, a->w.model, NULL, NULL, bh->m.cfg.d_vocab, e))
        return -1;
    s->o.probe_src = al_probe_load_src(&s->pl);
    if (!s->o.task || !strcmp(s->o.task, "induction")) al_drive_warn(dr, s->pl.warn);
    int made = al_patch_task_make(&s->t, &bh->m, bh->tok, al_behave_bos(bh), &s->o, e) == 0;
    if (al_stop) return al_errf(e, "interrupted"); /* the task may have stopped for it */
    if (!made) return -1;
    if (paths && L > AL_PATHS_MAX_LAYERS)
        return al_errf(e, "path patching covers models of up to %d layers (%s has %d)",
                       AL_PATHS_MAX_LAYERS, a->w.model, L);
    al_behave_warn_probe(bh, s->t.T);
    return 0;
}

static int patch_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    return prepare_common(args, state, dr, 0, e);
}
static int paths_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    return prepare_common(args, state, dr, 1, e);
}

/* The sweep; a signal also counts when it came after the last
 * configuration (the run is then failed "interrupted"). */
static int compute_common(patch_state *s, al_drive *dr, int paths, al_err *e) {
    s->o.progress = dr->progress;
    int failed = paths ? al_paths_run(&dr->b->m, &s->t, &s->o, &s->pr, e)
                       : al_patch_run(&dr->b->m, &s->t, &s->o, &s->r, e);
    if (al_stop) return al_errf(e, "interrupted");
    return failed ? -1 : 0;
}

static int patch_compute(void *args, void *state, al_drive *dr, al_err *e) {
    (void)args;
    return compute_common(state, dr, 0, e);
}
static int paths_compute(void *args, void *state, al_drive *dr, al_err *e) {
    (void)args;
    return compute_common(state, dr, 1, e);
}

static int patch_store(void *args, void *state, al_drive *dr, al_err *e) {
    patch_state *s = state;
    (void)args;
    return al_store_put_patch(dr->b->st, dr->b->run_id, dr->b->model_id, &s->t, &s->r, e);
}
static int paths_store(void *args, void *state, al_drive *dr, al_err *e) {
    patch_state *s = state;
    (void)args;
    return al_store_put_paths(dr->b->st, dr->b->run_id, dr->b->model_id, &s->t, &s->pr, e);
}

static int patch_doc(void *args, void *state, al_drive *dr, al_err *e) {
    return json_patch(dr->doc, args, dr->b, state) ? al_errf(e, "out of memory") : 0;
}
static int paths_doc(void *args, void *state, al_drive *dr, al_err *e) {
    return json_paths(dr->doc, args, state) ? al_errf(e, "out of memory") : 0;
}

static void patch_release(void *state) {
    patch_state *s = state;
    al_probe_load_free(&s->pl);
    al_pairs_free(&s->t);
    al_patch_result_free(&s->r);
    al_paths_result_free(&s->pr);
}

static void patch_init(void *args) {
    static const patch_args dflt = PATCH_ARGS_INIT;
    *(patch_args *)args = dflt;
}

static void paths_init(void *args) {
    patch_init(args);
    ((patch_args *)args)->o.direction = "noise";
}

/* "patch (induction, head, denoise)", "paths (induction, noise)" */
static void label(const char *name, int patch, const cJSON *v, char *buf, size_t cap) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "task");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(v, "component");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(v, "direction");
    snprintf(buf, cap, "%s (%s%s%s, %s)", name, cJSON_IsString(t) ? t->valuestring : "induction",
             patch ? ", " : "", patch ? (cJSON_IsString(k) ? k->valuestring : "head") : "",
             cJSON_IsString(d) ? d->valuestring
             : patch           ? "denoise"
                               : "noise");
}
static void patch_label(const cJSON *v, char *buf, size_t cap) { label("patch", 1, v, buf, cap); }
static void paths_label(const cJSON *v, char *buf, size_t cap) { label("paths", 0, v, buf, cap); }

static const al_warnings *patch_warnings(const void *state) {
    return &((const patch_state *)state)->r.warn;
}
static const al_warnings *paths_warnings(const void *state) {
    return &((const patch_state *)state)->pr.warn;
}

/* The induction task against the model's context. */
static int patch_check_model(const void *args, const al_config *c, al_err *e) {
    return al_patch_task_fits(&((const patch_args *)args)->o, c->n_ctx, e);
}

const al_analysis al_an_patch = {.name = "patch",
                                 .cmd = &al_cmd_patch,
                                 .groups = AL_GROUP_WHERE | AL_GROUP_TASK,
                                 .tmpl = &g_patch,
                                 .size = sizeof g_patch,
                                 .init = patch_init,
                                 .check = patch_check,
                                 .check_model = patch_check_model,
                                 .state_size = sizeof(patch_state),
                                 .prepare = patch_prepare,
                                 .compute = patch_compute,
                                 .store = patch_store,
                                 .doc = patch_doc,
                                 .text = patch_text,
                                 .release = patch_release,
                                 .warnings = patch_warnings,
                                 .stops = 1,
                                 .exp_list = 1,
                                 .exp_data = AL_EXP_DATA_NONE,
                                 .exp_label = patch_label};
const al_analysis al_an_paths = {.name = "paths",
                                 .cmd = &al_cmd_paths,
                                 .groups = AL_GROUP_WHERE | AL_GROUP_TASK,
                                 .tmpl = &g_paths,
                                 .size = sizeof g_paths,
                                 .init = paths_init,
                                 .check = patch_check,
                                 .check_model = patch_check_model,
                                 .state_size = sizeof(patch_state),
                                 .prepare = paths_prepare,
                                 .compute = paths_compute,
                                 .store = paths_store,
                                 .doc = paths_doc,
                                 .text = paths_text,
                                 .release = patch_release,
                                 .warnings = paths_warnings,
                                 .stops = 1,
                                 .exp_list = 1,
                                 .exp_data = AL_EXP_DATA_NONE,
                                 .exp_label = paths_label};

static int run_patch(int argc, char **argv) { return al_drive_main(&al_an_patch, argc, argv); }
static int run_paths(int argc, char **argv) { return al_drive_main(&al_an_paths, argc, argv); }

/* `attnlab help paths` shows noising as the default, as paths_init sets */
__attribute__((constructor)) static void init_paths_default(void) { g_paths.o.direction = "noise"; }
