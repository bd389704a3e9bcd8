/* cmd_attribute.c -- `attnlab attribute`: direct logit attribution, the
 * exact path expansion and the logit lens (attribute.h) on a task's clean
 * sequences, and for pair tasks attribution patching beside actual
 * patching (attrpatch.h), into the attribution tables (schema v4).
 *
 * The task is one of: a pair task as `patch` makes it (induction, names,
 * file), plain-text windows of a token file (--data), or one prompt
 * (--prompt). Like patch, the task is made before any run is begun, so
 * input it refuses leaves no run behind; SIGINT/SIGTERM marks the run
 * failed with "interrupted", commits none of its rows, and exits 130. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/attribute.h"
#include "attnlab/attrpatch.h"
#include "attnlab/behave.h"
#include "attnlab/patch.h"
#include "attnlab/stop.h"
#include "attnlab/store_analysis.h"

typedef struct attr_args {
    al_an_where w;      /* w.data: --data */
    al_patch_opts o;    /* the pair task and attribution patching's options */
    const char *prompt;
    int windows, show, no_paths, no_patching, no_compare;
} attr_args;

#define ATTR_ARGS_INIT {{NULL, NULL, NULL, NULL, 0}, AL_PATCH_OPTS_INIT, NULL, 32, 10, 0, 0, 0}
static attr_args g_attr = ATTR_ARGS_INIT;

static al_flag attr_flags[] = {
    {"model", AL_STR, &g_attr.w.model, "DIR", "model directory (from attnlab train)", 1, 0},
    {"db", AL_STR, &g_attr.w.db, "FILE", "SQLite database to add the results to (created if missing)",
     1, 0},
    {"task", AL_STR, &g_attr.o.task, "T", "induction, names or file (with --pairs)", 0, 0},
    {"pairs", AL_STR, &g_attr.o.pairs, "FILE.jsonl",
     "task file: one {\"clean\", \"corrupted\", \"answer\", \"wrong\"} object per line", 0, 0},
    {"data", AL_STR, &g_attr.w.data, "VAL.bin", "plain text instead of a task: windows of a token file",
     0, 0},
    {"windows", AL_INT, &g_attr.windows, "N", "--data: windows of the model's length", 0, 0},
    {"prompt", AL_STR, &g_attr.prompt, "TEXT", "one prompt instead of a task (every next token)", 0,
     0},
    {"direction", AL_STR, &g_attr.o.direction, "D",
     "attribution patching: denoise (clean into corrupted) or noise (the reverse)", 0, 0},
    {"probe-r", AL_INT, &g_attr.o.probe_r, "R", "induction: random tokens per half (length 2R+1)", 0,
     0},
    {"n", AL_INT, &g_attr.o.probe_n, "N", "induction, names: pairs", 0, 0},
    {"seed", AL_U64, &g_attr.o.probe_seed, "S", "induction, names: seed of the pairs", 0, 0},
    {"batch", AL_INT, &g_attr.o.batch, "B", "sequences per forward pass", 0, 0},
    {"mask", AL_STR, &g_attr.w.mask, "FILE", "head mask (JSON): these heads are off throughout", 0, 0},
    {"show", AL_INT, &g_attr.show, "N", "rows printed per list (largest first)", 0, 0},
    {"no-paths", AL_BOOL, &g_attr.no_paths, NULL, "skip the path expansion", 0, 0},
    {"no-patching", AL_BOOL, &g_attr.no_patching, NULL, "skip attribution patching", 0, 0},
    {"no-compare", AL_BOOL, &g_attr.no_compare, NULL,
     "attribution patching without the actual patching sweeps it is compared with", 0, 0},
    {"threads", AL_INT, &g_attr.w.threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

static int run_attribute(int argc, char **argv);

al_command al_cmd_attribute = {
    "attribute",
    "attribution: direct logit attribution, path expansion, logit lens, attribution patching",
    "--model DIR --db FILE [--task induction|names|file | --data VAL.bin | --prompt TEXT]",
    "Task (one of): --task as for `attnlab patch` (induction, names, file with\n"
    "--pairs), --data VAL.bin (plain text: --windows windows of the model's length,\n"
    "every next token scored), --prompt TEXT (one sequence, every next token).\n"
    "On the clean sequences, read from one forward pass with the attention\n"
    "patterns as computed: direct logit attribution (embed, pos and each head's\n"
    "contribution to the metric logit, in total and per position; they sum to\n"
    "it), the exact path expansion of a 1- or 2-layer model (direct, each head,\n"
    "and each virtual head 0.h0>1.h1: value, and the change in mean loss with the\n"
    "term removed), and the logit lens (the residual stream entering each layer\n"
    "through W_U: loss and accuracy). Pair tasks also get attribution patching:\n"
    "the first-order estimate of patching each head, head x position and path\n"
    "edge, beside actual patching and how well they agree (--no-compare: the\n"
    "estimates only). Models of more than 2 layers: no paths, no attribution\n"
    "patching. Rows go to attribution_runs, logit_attribution, path_terms,\n"
    "logit_lens, attribution_patching, attribution_agreement and\n"
    "attribution_tokens. Ctrl-C stops it: the run is marked failed, nothing is\n"
    "stored, exit 130.",
    attr_flags,
    run_attribute,
};

/* ------------------------------------------------------------ the task */

/* One prompt as a one-window "data" task: items at every position but
 * the last, T = len − 1 (the window al_pairs_from_tokens reads is the
 * whole prompt). */
static int prompt_task(const al_behave *bh, const char *text, al_pairs *t, al_err *e) {
    int n_ctx = bh->m.cfg.n_ctx, *ids = NULL;
    size_t n = 0;
    if (!bh->tok) return al_errf(e, "--prompt needs the model's tokenizer (%s has none)", bh->dir);
    if (al_tok_encode(bh->tok, (const unsigned char *)text, strlen(text), 1, &ids, &n, e))
        return -1;
    int rc = -1;
    uint16_t *u = NULL;
    if (n < 2 || n > (size_t)n_ctx + 1) {
        al_errf(e, "the prompt is %zu token%s; it must be 2 to n_ctx + 1 = %d", n, n == 1 ? "" : "s",
                n_ctx + 1);
        goto out;
    }
    if (!(u = al_malloc(n, sizeof *u, e))) goto out;
    al_tokens d = {u, n, 0};
    for (size_t i = 0; i < n; i++) {
        u[i] = (uint16_t)ids[i];
        d.max_id = ids[i] > d.max_id ? ids[i] : d.max_id;
    }
    rc = al_pairs_from_tokens(&d, (int)n - 1, 1, bh->m.cfg.d_vocab, t, e);
    if (rc == 0) snprintf(t->task, sizeof t->task, "prompt");
out:
    free(ids);
    free(u);
    return rc;
}

static int data_task(const al_behave *bh, const char *path, int windows, al_pairs *t, al_err *e) {
    al_tokens d;
    int T;
    if (al_behave_tokens(bh, path, &d, &T, e)) return -1;
    int rc = al_pairs_from_tokens(&d, T, windows, bh->m.cfg.d_vocab, t, e);
    al_tokens_free(&d);
    return rc ? al_err_prefix(e, "%s", path) : 0;
}

/* ------------------------------------------------------------ printing */

static void print_summary(const attr_args *a, const al_behave *bh, const al_pairs *t,
                          const al_attr_result *r) {
    printf("model %s (sha256 %.12s…) -> run %lld of %s\n", a->w.model, bh->sha,
           (long long)bh->run_id, a->w.db);
    printf("task %s: %d sequence%s of %d tokens, %d scored item%s; metric = mean %s = %.4f, "
           "loss = %.4f\n",
           t->task, t->N, t->N == 1 ? "" : "s", t->T, r->n_items, r->n_items == 1 ? "" : "s",
           r->logit_diff ? "logit(answer) - logit(wrong)" : "logit of the answer", r->metric,
           r->loss);
    int *idx = al_by_magnitude(r->dla, r->n_comp);
    if (!idx) return;
    int show = a->show < r->n_comp ? a->show : r->n_comp;
    char nm[64];
    printf("direct logit attribution: top %d of %d components by |value| (they sum to the "
           "metric)\n  %-10s %9s\n", show, r->n_comp, "component", "value");
    for (int i = 0; i < show; i++)
        printf("  %-10s %+9.4f\n", al_attr_comp_name(r->H, idx[i], nm, sizeof nm),
               r->dla[idx[i]] + 0.0);
    free(idx);
    if (r->n_terms) {
        static const char *const kinds[3] = {"direct", "head", "virtual"};
        /* kinds can have either sign (removing virtual terms can lower the
         * loss): shares of Σ|dloss|, so that they add up to 100% */
        double tot = fabs(r->kind_dloss[0]) + fabs(r->kind_dloss[1]) + fabs(r->kind_dloss[2]);
        printf("path expansion (dloss = change in mean loss with the kind's terms removed; "
               "share = |dloss| / the sum of the kinds' |dloss|):\n  %-10s %9s %9s %7s\n",
               "kind", "value", "dloss", "share");
        for (int k = 0; k < (r->L == 2 ? 3 : 2); k++) {
            printf("  %-10s %+9.4f %+9.4f ", kinds[k], r->kind_value[k] + 0.0,
                   r->kind_dloss[k] + 0.0);
            if (tot != 0) printf("%6.1f%%\n", 100 * fabs(r->kind_dloss[k]) / tot);
            else printf("%7s\n", "n/a");
        }
        idx = al_by_magnitude(r->term_dloss, r->n_terms);
        if (!idx) return;
        show = a->show < r->n_terms ? a->show : r->n_terms;
        printf("top %d of %d terms by |dloss|:\n  %-10s %9s %9s\n", show, r->n_terms, "term",
               "value", "dloss");
        for (int i = 0; i < show; i++)
            printf("  %-10s %+9.4f %+9.4f\n", al_attr_term_name(r->L, r->H, idx[i], nm, sizeof nm),
                   r->term_value[idx[i]] + 0.0, r->term_dloss[idx[i]] + 0.0);
        free(idx);
    }
    printf("logit lens (the residual stream entering each layer, through W_U):\n  %-10s %9s "
           "%9s\n", "layer", "loss", "accuracy");
    for (int l = 0; l <= r->L; l++) {
        char lab[32];
        if (l == r->L) snprintf(lab, sizeof lab, "final");
        else snprintf(lab, sizeof lab, "%d", l);
        printf("  %-10s %9.4f %9.4f\n", lab, r->lens_loss[l], r->lens_acc[l]);
    }
}

/* Configuration k of the three grids laid end to end, by name. */
static void ap_name(const al_behave *bh, const al_pairs *t, const al_attrpatch_result *ap, int k,
                    char *buf, size_t cap) {
    int LH = ap->L * ap->H;
    if (k < LH) {
        snprintf(buf, cap, "head %d.%d", k / ap->H, k % ap->H);
        return;
    }
    k -= LH;
    if (k < LH * ap->T) {
        int lh = k / ap->T, pos = k % ap->T;
        char tok[64] = "";
        if (bh->tok && pos < t->len[0]) al_store_token_str(bh->tok, t->clean[pos], tok, sizeof tok);
        snprintf(buf, cap, "%d.%d @ %d%s%s%s", lh / ap->H, lh % ap->H, pos, tok[0] ? " '" : "", tok,
                 tok[0] ? "'" : "");
        return;
    }
    k -= LH * ap->T;
    int ns = ap->n_senders, c = k / (ns * ap->H), s = k / ap->H % ns, h = k % ap->H;
    char nm[32];
    al_paths_sender_name(s, nm, sizeof nm);
    if (c == 3) snprintf(buf, cap, "%s -> logits", nm);
    else snprintf(buf, cap, "%s -> 1.%d %s", nm, h, al_paths_channel_name(c));
}

static void print_attrpatch(const attr_args *a, const al_behave *bh, const al_pairs *t,
                            const al_attrpatch_result *ap) {
    printf("attribution patching (%s): M_clean = %.4f   M_corr = %.4f\n",
           ap->direction == AL_PATCH_DENOISE ? "denoising" : "noising", ap->m_clean, ap->m_corr);
    if (ap->compared) {
        printf("  %-10s %6s %9s %9s %5s\n", "grid", "n", "pearson", "spearman", "top5");
        for (int g = 0; g < AL_AP_NGRID; g++)
            printf("  %-10s %6d %9.4f %9.4f %5d\n", al_attrpatch_grid_name(g), ap->agree[g].n,
                   ap->agree[g].pearson, ap->agree[g].spearman, ap->agree[g].top5);
    }
    /* the grids end to end, so the largest estimates of all of them show */
    int LH = ap->L * ap->H, n = LH + LH * ap->T + 4 * ap->n_senders * ap->H;
    double *est = malloc(sizeof(double) * (size_t)n), *act = malloc(sizeof(double) * (size_t)n);
    int *idx = NULL;
    if (est && act) {
        memcpy(est, ap->head, sizeof(double) * (size_t)LH);
        memcpy(est + LH, ap->head_pos, sizeof(double) * (size_t)LH * ap->T);
        memcpy(est + LH + LH * ap->T, ap->edge, sizeof(double) * (size_t)(n - LH - LH * ap->T));
        for (int i = 0; i < n; i++) act[i] = NAN;
        if (ap->compared) {
            memcpy(act, ap->act_head, sizeof(double) * (size_t)LH);
            memcpy(act + LH, ap->act_head_pos, sizeof(double) * (size_t)LH * ap->T);
            memcpy(act + LH + LH * ap->T, ap->act_edge,
                   sizeof(double) * (size_t)(n - LH - LH * ap->T));
        }
        idx = al_by_magnitude(est, n);
    }
    if (idx) {
        int finite = 0;
        for (int i = 0; i < n; i++) finite += !isnan(est[i]);
        int show = a->show < finite ? a->show : finite;
        printf("top %d of %d estimates by |estimate|:\n  %-26s %9s %9s\n", show, finite,
               "configuration", "estimate", "actual");
        for (int i = 0; i < show; i++) {
            char name[160];
            ap_name(bh, t, ap, idx[i], name, sizeof name);
            printf("  ");
            al_print_col(name, 26);
            printf(" %+9.4f ", est[idx[i]] + 0.0);
            if (isnan(act[idx[i]])) printf("%9s\n", "-");
            else printf("%+9.4f\n", act[idx[i]] + 0.0);
        }
    }
    free(idx);
    free(est);
    free(act);
}

/* ------------------------------------------------------------ running */

static int attr_do(void *args, const al_flag *fl, int64_t *run_id, al_err *e) {
    attr_args *a = args;
    al_patch_opts o = a->o;
    int pairs_task = !a->w.data && !a->prompt;
    if ((al_flag_seen(fl, "task") || al_flag_seen(fl, "pairs")) + !!a->w.data + !!a->prompt > 1)
        return al_errf(e, "give one task: --task/--pairs, --data or --prompt"), 2;
    if (al_patch_opts_check(&o, e)) return 2;
    if (a->windows < 1 || a->windows > 1000000)
        return al_errf(e, "--windows must be 1..1000000 (got %d)", a->windows), 2;
    if (a->show < 0) return al_errf(e, "--show must be >= 0"), 2;
    al_attr_opts ao = al_attr_opts_defaults();
    ao.batch = o.batch;
    ao.paths = !a->no_paths;
    if (al_attr_opts_check(&ao, e) || al_threads_check(a->w.threads, e)) return 2;
    al_set_threads(a->w.threads);
    al_behave bh;
    if (al_behave_load(&bh, a->w.model, a->w.mask, a->w.db, e)) return 1;
    al_pairs t = {0};
    al_attr_result r = {0};
    al_attrpatch_result ap = {0};
    int rc = 1, L = bh.m.cfg.n_layers, have_ap = 0;
    double t0 = al_now();
    /* handlers before the run begins: a signal never leaves it 'running';
     * building the names task already listens */
    al_stop_catch();
    o.stop = &al_stop;
    /* everything the task or the model can refuse, before a run exists */
    if (a->w.data ? data_task(&bh, a->w.data, a->windows, &t, e)
        : a->prompt ? prompt_task(&bh, a->prompt, &t, e)
                    : al_patch_task_make(&t, &bh.m, bh.tok, al_behave_bos(&bh), &o, e))
        goto out;
    if (al_stop) {
        al_errf(e, "interrupted");
        rc = 130;
        goto out;
    }
    int patching = pairs_task && !a->no_patching && L <= 2;
    if (L > 2 && (ao.paths || (pairs_task && !a->no_patching)))
        fprintf(stderr, "attnlab: note: %s has %d layers: the path expansion and attribution "
                        "patching cover 1 and 2; direct logit attribution and the lens only\n",
                a->w.model, L);
    if (L > 2) ao.paths = 0;
    if (!pairs_task && !a->no_patching)
        fprintf(stderr, "attnlab: note: no attribution patching on %s: it needs clean / "
                        "corrupted pairs (a pair task)\n", a->w.data ? "--data" : "--prompt");
    if (pairs_task) al_behave_warn_probe(&bh, t.T);
    if (al_behave_begin(&bh, "attribute", fl, e)) goto out;
    ao.progress = 1;
    ao.stop = &al_stop;
    int failed = al_attribute_run(&bh.m, &t, &ao, &r, e);
    if (!failed && !al_stop && patching) {
        o.progress = 1;
        failed = al_attrpatch_run(&bh.m, &t, &o, !a->no_compare, &ap, e);
        have_ap = !failed;
    }
    if (al_stop) { /* also when it came after the last step */
        al_errf(e, "interrupted");
        rc = 130;
        goto fail;
    }
    if (failed || al_store_tx_begin(bh.st, e) ||
        al_store_put_attribute(bh.st, bh.run_id, bh.model_id, &t, &r, have_ap ? &ap : NULL, bh.tok,
                               e) ||
        al_store_run_finish(bh.st, bh.run_id, e))
        goto fail;
    print_summary(a, &bh, &t, &r);
    if (have_ap) print_attrpatch(a, &bh, &t, &ap);
    printf("attribute: %d sequence%s, %d items in %.2f s", t.N, t.N == 1 ? "" : "s", r.n_items,
           r.seconds);
    if (have_ap) printf("; attribution patching %.2f s", ap.seconds);
    if (have_ap && ap.compared) printf(", actual patching %.2f s", ap.seconds_patch);
    printf(" (total %.2f s)\n", al_now() - t0);
    if (run_id) *run_id = bh.run_id;
    rc = 0;
    goto out;
fail:
    al_behave_fail(&bh, e);
out:
    al_stop_release();
    al_pairs_free(&t);
    al_attr_result_free(&r);
    al_attrpatch_result_free(&ap);
    al_behave_close(&bh);
    return rc;
}

static void attr_init(void *args) {
    static const attr_args dflt = ATTR_ARGS_INIT;
    *(attr_args *)args = dflt;
}

const al_analysis_cmd al_an_attribute = {"attribute", &al_cmd_attribute, &g_attr, sizeof g_attr,
                                         attr_init, attr_do};

static int run_attribute(int argc, char **argv) { return al_an_main(&al_an_attribute, argc, argv); }
