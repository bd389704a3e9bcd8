/* cmd_patch.c -- `attnlab patch` (activation patching) and `attnlab paths`
 * (path patching): clean / corrupted pairs of a task, one patched run
 * per configuration, the normalised effect of each (docs/design.md §5),
 * into tables patching / path_patching and patching_runs.
 *
 * The task is made from the loaded model before any run is begun, so an
 * input the task refuses (a probe longer than n_ctx, a model without a
 * tokenizer for names/file, a bad pair file) leaves no run behind; so
 * does SIGINT/SIGTERM while the task is made (the names task notices it
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
#include "attnlab/patch.h"
#include "attnlab/stop.h"
#include "attnlab/store_analysis.h"

typedef struct patch_args {
    al_an_where w;
    al_patch_opts o;
    int show; /* configurations (paths: paths) printed */
} patch_args;

static patch_args g_patch = {{NULL, NULL, NULL, NULL, 0}, AL_PATCH_OPTS_INIT, 10};
static patch_args g_paths = {{NULL, NULL, NULL, NULL, 0}, AL_PATCH_OPTS_INIT, 10};

#define WHERE_FLAGS(G)                                                                             \
    {"model", AL_STR, &G.w.model, "DIR", "model directory (from attnlab train)", 1, 0},            \
    {"db", AL_STR, &G.w.db, "FILE", "SQLite database to add the results to (created if missing)", \
     1, 0},                                                                                        \
    {"task", AL_STR, &G.o.task, "T", "induction, names or file (with --pairs)", 0, 0},            \
    {"pairs", AL_STR, &G.o.pairs, "FILE.jsonl",                                                    \
     "task file: one {\"clean\", \"corrupted\", \"answer\", \"wrong\"} object per line", 0, 0}
#define TASK_FLAGS(G)                                                                              \
    {"direction", AL_STR, &G.o.direction, "D",                                                     \
     "denoise (corrupted run, clean activations patched in) or noise (the reverse)", 0, 0},       \
    {"probe-r", AL_INT, &G.o.probe_r, "R", "induction: random tokens per half (length 2R+1)", 0,   \
     0},                                                                                           \
    {"n", AL_INT, &G.o.probe_n, "N", "induction, names: pairs", 0, 0},                             \
    {"seed", AL_U64, &G.o.probe_seed, "S", "induction, names: seed of the pairs", 0, 0},           \
    {"batch", AL_INT, &G.o.batch, "B", "pairs per forward pass", 0, 0},                            \
    {"naive", AL_BOOL, &G.o.naive, NULL,                                                           \
     "one full forward pass per configuration (the reference, for checking)", 0, 0},              \
    {"mask", AL_STR, &G.w.mask, "FILE", "head mask (JSON): these heads are off throughout", 0, 0}

static al_flag patch_flags[] = {
    WHERE_FLAGS(g_patch),
    {"component", AL_STR, &g_patch.o.component, "C",
     "resid, head, head_pos, q, k, v or pattern (see above)", 0, 0},
    TASK_FLAGS(g_patch),
    {"show", AL_INT, &g_patch.show, "N", "configurations printed (largest |effect| first)", 0, 0},
    {"threads", AL_INT, &g_patch.w.threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

static al_flag paths_flags[] = {
    WHERE_FLAGS(g_paths),
    TASK_FLAGS(g_paths),
    {"show", AL_INT, &g_paths.show, "N", "paths printed (largest |effect| first)", 0, 0},
    {"threads", AL_INT, &g_paths.w.threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

#define TASKS_HELP                                                                                 \
    "Tasks: induction (BOS + A + A against BOS + A' + A, A random tokens; metric =\n"               \
    "mean log p of the next token over the second half), names (synthetic stories\n"               \
    "whose invented name recurs, against the same with another name; metric =\n"                   \
    "logit(name) - logit(other name)), file (--pairs FILE.jsonl, your own pairs,\n"                \
    "logit difference at each pair's last position). Effect of a patch with metric\n"              \
    "M_p: denoise (M_p - M_corr) / (M_clean - M_corr), 1 = the patch restores the\n"               \
    "clean behaviour; noise (M_clean - M_p) / (M_clean - M_corr), 1 = it breaks it.\n"

static int run_patch(int argc, char **argv);
static int run_paths(int argc, char **argv);

al_command al_cmd_patch = {
    "patch",
    "activation patching: which component carries the behaviour (one run per configuration)",
    "--model DIR --db FILE [--task induction|names|file] [--component C] [--direction denoise|noise]",
    TASKS_HELP
    "Components (one configuration each): resid (the residual stream entering layer\n"
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
    "path patching: embed, pos and each layer-0 head into each layer-1 head's q, k, v and the logits",
    "--model DIR --db FILE [--task induction|names|file] [--direction noise|denoise]",
    TASKS_HELP
    "Senders: embed, pos and every layer-0 head; receivers: the query, key and value\n"
    "input of every layer-1 head, and the logits directly (the only receiver of a\n"
    "1-layer model). Noising runs the clean sequences with the receiver's input\n"
    "computed from clean residual - sender(clean) + sender(corrupted), everything\n"
    "else frozen clean; denoising is the mirror image. The induction circuit shows\n"
    "as a previous-token head's path into an induction head's keys (channel k).\n"
    "Rows go to table path_patching (direct paths: channel 'direct', receiver NULL)\n"
    "and patching_runs. Ctrl-C stops the sweep: the run is marked failed, nothing is\n"
    "stored, exit 130.",
    paths_flags,
    run_paths,
};

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

static void print_head(const patch_args *a, const al_behave *bh, const al_pairs *t,
                       const char *what, al_patch_direction d) {
    printf("model %s (sha256 %.12s…) -> run %lld of %s\n", a->w.model, bh->sha,
           (long long)bh->run_id, a->w.db);
    printf("task %s: %d pair%s of %d tokens, %d scored item%s (metric M = mean %s); %s, %s\n",
           t->task, t->N, t->N == 1 ? "" : "s", t->T, t->n_items, t->n_items == 1 ? "" : "s",
           metric_words(t), what, d == AL_PATCH_DENOISE ? "denoising" : "noising");
    int lo = t->T;
    for (int n = 0; n < t->N; n++) lo = t->len[n] < lo ? t->len[n] : lo;
    if (lo < t->T)
        printf("note: the pairs are %d to %d tokens long, so position t is a different token in "
               "each pair: a per-position effect averages over the pairs, and positions are "
               "named by pair 0's tokens\n", lo, t->T);
}

static void print_metrics(double mc, double mr, al_patch_direction d) {
    printf("M_clean = %.4f   M_corr = %.4f   effect = %s / (M_clean - M_corr)%s\n", mc, mr,
           d == AL_PATCH_DENOISE ? "(M_patched - M_corr)" : "(M_clean - M_patched)",
           mc == mr ? "  (undefined: the two runs agree)" : "");
}

static void print_patch(const patch_args *a, const al_behave *bh, const al_pairs *t,
                        const al_patch_result *r) {
    char what[64];
    snprintf(what, sizeof what, "component %s", al_patch_component_name(r->component));
    print_head(a, bh, t, what, r->direction);
    print_metrics(r->m_clean, r->m_corr, r->direction);
    int *idx = al_by_magnitude(r->effect, r->n);
    if (!idx) return;
    int show = a->show < r->n ? a->show : r->n;
    printf("top %d of %d configurations by |effect|:\n", show, r->n);
    printf("  %-30s %9s %10s\n", "configuration", "effect", "metric");
    for (int i = 0; i < show; i++) {
        char name[160];
        config_name(bh, t, r, idx[i], name, sizeof name);
        printf("  ");
        al_print_col(name, 30);
        printf(" %+9.4f %10.4f\n", r->effect[idx[i]] + 0.0, r->metric[idx[i]]);
    }
    free(idx);
}

/* The K channel as a matrix (senders x layer-1 heads) beside the direct
 * path, then the strongest paths over every channel. */
static void print_paths(const patch_args *a, const al_behave *bh, const al_pairs *t,
                        const al_paths_result *r) {
    int ns = r->n_senders, H = r->H;
    char nm[32];
    print_head(a, bh, t, "paths from embed, pos and layer 0", r->direction);
    print_metrics(r->m_clean, r->m_corr, r->direction);
    if (r->n_recv)
        printf("effect of each sender's path into the keys of each layer-1 head (channel k), "
               "and directly into the logits:\n%-7s", "sender");
    else
        printf("a 1-layer model has only direct paths (sender -> logits):\n%-7s", "sender");
    for (int h = 0; h < r->n_recv; h++) {
        char c[16];
        snprintf(c, sizeof c, "k:1.%d", h);
        printf(" %7s", c);
    }
    printf(" | %7s\n", "direct");
    for (int s = 0; s < ns; s++) {
        printf("%-7s", al_paths_sender_name(s, nm, sizeof nm));
        for (int h = 0; h < r->n_recv; h++) /* + 0.0: no "-0.000" */
            printf(" %+7.3f", r->effect[((size_t)1 * ns + s) * H + h] + 0.0);
        printf(" | %+7.3f\n", r->effect[((size_t)3 * ns + s) * H] + 0.0);
    }
    int *idx = al_by_magnitude(r->effect, r->n);
    if (!idx) return;
    int n_paths = ns * (3 * r->n_recv + 1), show = a->show < n_paths ? a->show : n_paths;
    printf("top %d of %d paths by |effect|:\n", show, n_paths);
    printf("  %-20s %9s %10s\n", "path", "effect", "metric");
    for (int i = 0; i < show; i++) {
        int k = idx[i], c = k / (ns * H), s = k / H % ns, h = k % H;
        char name[64];
        al_paths_sender_name(s, nm, sizeof nm);
        if (c == 3) snprintf(name, sizeof name, "%s -> logits", nm);
        else snprintf(name, sizeof name, "%s -> 1.%d %s", nm, h, al_paths_channel_name(c));
        printf("  %-20s %+9.4f %10.4f\n", name, r->effect[k] + 0.0, r->metric[k]);
    }
    free(idx);
}

/* ------------------------------------------------------------ running */

static int do_common(patch_args *a, const al_flag *fl, int64_t *run_id, int paths, al_err *e) {
    const char *kind = paths ? "paths" : "patch";
    al_patch_opts o = a->o;
    if (al_patch_opts_check(&o, e)) return 2;
    if (a->show < 0) {
        al_errf(e, "--show must be >= 0");
        return 2;
    }
    if (al_threads_check(a->w.threads, e)) return 2;
    al_set_threads(a->w.threads);
    al_behave bh;
    if (al_behave_load(&bh, a->w.model, a->w.mask, a->w.db, e)) return 1;
    al_pairs t;
    al_patch_result r = {0};
    al_paths_result pr = {0};
    int rc = 1, L = bh.m.cfg.n_layers;
    double t0 = al_now();
    /* Handlers from here on, so that there is no moment between the run's
     * beginning and the sweep where a signal would end the process with
     * the run left 'running'. */
    al_stop_catch();
    /* Before the task, not the sweep: building the names task for a large
     * --n takes a while, and Ctrl-C must end that too. */
    o.stop = &al_stop;
    /* everything the task or the model can refuse, before a run exists */
    int made = al_patch_task_make(&t, &bh.m, bh.tok, al_behave_bos(&bh), &o, e) == 0;
    if (al_stop) { /* while the task was made (it may have stopped for it): no run */
        al_errf(e, "interrupted");
        rc = 130;
        goto out;
    }
    if (!made) goto out;
    if (paths && L > 2) {
        al_errf(e, "path patching covers 1- and 2-layer models (%s has %d layers)", a->w.model, L);
        goto out;
    }
    al_behave_warn_probe(&bh, t.T);
    if (al_behave_begin(&bh, kind, fl, e)) goto out;
    o.progress = 1;
    int failed = paths ? al_paths_run(&bh.m, &t, &o, &pr, e) : al_patch_run(&bh.m, &t, &o, &r, e);
    if (al_stop) { /* also when it came after the last configuration */
        al_errf(e, "interrupted");
        rc = 130;
        goto fail;
    }
    if (failed || al_store_tx_begin(bh.st, e) ||
        (paths ? al_store_put_paths(bh.st, bh.run_id, bh.model_id, &t, &pr, e)
               : al_store_put_patch(bh.st, bh.run_id, bh.model_id, &t, &r, e)) ||
        al_store_run_finish(bh.st, bh.run_id, e))
        goto fail;
    if (paths) print_paths(a, &bh, &t, &pr);
    else print_patch(a, &bh, &t, &r);
    int nb = (t.N + o.batch - 1) / o.batch;
    printf("%s: %d %s x %d batch%s of pairs in %.2f s (total %.2f s)\n", kind,
           paths ? pr.n_senders * (3 * pr.n_recv + 1) : r.n, paths ? "paths" : "configurations",
           nb, nb == 1 ? "" : "es", paths ? pr.seconds : r.seconds, al_now() - t0);
    if (run_id) *run_id = bh.run_id;
    rc = 0;
    goto out;
fail:
    al_behave_fail(&bh, e);
out:
    al_stop_release();
    al_pairs_free(&t);
    al_patch_result_free(&r);
    al_paths_result_free(&pr);
    al_behave_close(&bh);
    return rc;
}

static int patch_do(void *args, const al_flag *fl, int64_t *run_id, al_err *e) {
    return do_common(args, fl, run_id, 0, e);
}

static int paths_do(void *args, const al_flag *fl, int64_t *run_id, al_err *e) {
    return do_common(args, fl, run_id, 1, e);
}

static void patch_init(void *args) {
    patch_args *a = args;
    memset(&a->w, 0, sizeof a->w);
    a->o = al_patch_opts_defaults();
    a->show = 10;
}

static void paths_init(void *args) {
    patch_args *a = args;
    patch_init(a);
    a->o.direction = "noise";
}

const al_analysis_cmd al_an_patch = {"patch", &al_cmd_patch, &g_patch, sizeof g_patch, patch_init,
                                     patch_do};
const al_analysis_cmd al_an_paths = {"paths", &al_cmd_paths, &g_paths, sizeof g_paths, paths_init,
                                     paths_do};

static int run_patch(int argc, char **argv) { return al_an_main(&al_an_patch, argc, argv); }
static int run_paths(int argc, char **argv) { return al_an_main(&al_an_paths, argc, argv); }

/* `attnlab help paths` shows noising as the default, as paths_init sets */
__attribute__((constructor)) static void init_paths_default(void) { g_paths.o.direction = "noise"; }
