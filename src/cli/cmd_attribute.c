/* cmd_attribute.c -- `attnlab attribute`: direct logit attribution, the
 * exact path expansion and the logit lens (attribute.h) on a task's clean
 * sequences, and for pair tasks attribution patching beside actual
 * patching (attrpatch.h), into the attribution tables (schema v4).
 *
 * The task is one of: a pair task as `patch` makes it (induction, names,
 * file), plain-text windows of a token file (--data), or one prompt
 * (--prompt). Like patch, the task is made in the driver's prepare phase
 * (registry.h), before any run is begun, so input it refuses leaves no
 * run behind; SIGINT/SIGTERM marks the run failed with "interrupted",
 * commits none of its rows, and exits 130. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/attribute.h"
#include "attnlab/attrpatch.h"
#include "attnlab/behave.h"
#include "attnlab/membudget.h"
#include "attnlab/doc_text.h"
#include "attnlab/json.h"
#include "attnlab/patch.h"
#include "attnlab/registry.h"
#include "attnlab/stop.h"
#include "attnlab/store_analysis.h"

#include <cjson/cJSON.h>

typedef struct attr_args {
    al_an_where w; /* w.data: --data */
    al_patch_opts o; /* the pair task and attribution patching's options */
    const char *prompt;
    int windows, show, no_paths, no_patching, no_compare;
    const char *probe_tokens; /* all | seen | a token file: the induction task's ids */
    int center_unembed; /* al_attr_opts center_unembed */
} attr_args;

#define ATTR_ARGS_INIT                                                                             \
    { AL_AN_WHERE_INIT, AL_PATCH_OPTS_INIT, NULL, 32, 10, 0, 0, 0, AL_PROBE_TOKENS_DEFAULT, 0 }
static attr_args g_attr = ATTR_ARGS_INIT;

static al_flag attr_flags[] =
    {AL_FLAG_MODEL(g_attr),
     AL_FLAG_DB(g_attr),
     AL_FLAGS_TASK_FILE(g_attr),
     {"data", AL_STR, &g_attr.w.data, "VAL.bin",
      "plain text instead of a task: windows of a token file", 0, 0},
     {"windows", AL_INT, &g_attr.windows, "N", "--data: windows of the model's length", 0, 0},
     {"prompt", AL_STR, &g_attr.prompt, "TEXT", "one prompt instead of a task (every next token)",
      0, 0},
     {"direction", AL_STR, &g_attr.o.direction, "D",
      "attribution patching: denoise (clean into corrupted) or noise (the reverse)", 0, 0},
     AL_FLAGS_TASK_DRAW(g_attr),
     AL_FLAG_MASK(g_attr),
     {"show", AL_INT, &g_attr.show, "N", "rows printed per list (largest first)", 0, 0},
     {"no-paths", AL_BOOL, &g_attr.no_paths, NULL, "skip the path expansion", 0, 0},
     {"center-unembed", AL_BOOL, &g_attr.center_unembed, NULL,
      "log-prob items: measure each contribution against the mean logit (W_U less its mean "
      "column, as TransformerLens by default), leaving out the shift all logits share",
      0, 0},
     {"no-patching", AL_BOOL, &g_attr.no_patching, NULL, "skip attribution patching", 0, 0},
     {"no-compare", AL_BOOL, &g_attr.no_compare, NULL,
      "attribution patching without the actual patching sweeps it is compared with", 0, 0},
     AL_FLAGS_CI(g_attr),
     AL_FLAG_THREADS(g_attr),
     AL_FLAGS_END};

static int run_attribute(int argc, char **argv);
extern const al_analysis al_an_attribute;

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
    "it), the exact path expansion (direct, each head reading embed + pos, each\n"
    "virtual head l0.h0>l1.h1, and from 3 layers one remainder term chains>=3 for\n"
    "every chain of three or more heads: value, and the change in mean loss with\n"
    "the term removed), and the logit lens (the residual stream entering each layer\n"
    "through W_U: loss and accuracy). Pair tasks also get attribution patching:\n"
    "the first-order estimate of patching each head, head x position and path\n"
    "edge, beside actual patching and how well they agree (--no-compare: the\n"
    "estimates only; models of up to 16 layers). Rows go to attribution_runs,\n"
    "logit_attribution, path_terms, logit_lens, attribution_patching,\n"
    "attribution_agreement and\n"
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
        al_errf(e, "the prompt is %zu token%s; it must be 2 to n_ctx + 1 = %d", n,
                n == 1 ? "" : "s", n_ctx + 1);
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

static int data_task(const al_behave *bh, const char *path, int windows, const al_attr_opts *ao,
                     al_pairs *t, al_err *e) {
    al_tokens d;
    int T;
    if (al_behave_tokens(bh, path, &d, &T, e)) return -1;
    char what[160];
    snprintf(what, sizeof what, "--windows %d of %d tokens", windows, T);
    if (al_mem_check(al_attr_bytes(&bh->m.cfg, windows, T, (double)windows * T, ao), "attribute",
                     what, "lower --windows", e)) {
        al_tokens_free(&d);
        return -1;
    }
    int rc = al_pairs_from_tokens(&d, T, windows, bh->m.cfg.d_vocab, t, e);
    al_tokens_free(&d);
    return rc ? al_err_prefix(e, "%s", path) : 0;
}

/* ------------------------------------------------------------ printing */

/* The values of key k of the objects of arr, in order (malloc'd; NULL
 * when out of memory): what al_by_magnitude ranks. */
static double *values_of(const cJSON *arr, const char *k, int *n) {
    const cJSON *x;
    *n = cJSON_GetArraySize(arr);
    double *v = malloc(sizeof(double) * (size_t)(*n + 1)), *p = v;
    if (v) cJSON_ArrayForEach(x, arr) *p++ = al_dt_num(x, k);
    return v;
}

/* The first `show` of arr by |key| (al_by_magnitude's order), each by
 * name key nk: "  NAME  VALUE[ DLOSS]". */
static void text_ranked(const cJSON *arr, const char *key, const char *nk, const char *k2,
                        int show) {
    int n;
    double *v = values_of(arr, key, &n);
    int *idx = v ? al_by_magnitude(v, n) : NULL;
    for (int i = 0; idx && i < show && i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(arr, idx[i]);
        double se = al_dt_num(x, "value_se");
        printf("  %-10s %+9.4f", al_dt_str(x, nk), al_dt_num(x, k2 ? "value" : key) + 0.0);
        if (isfinite(se))
            printf(" %8.4f", se);
        else
            printf(" %8s", "");
        if (k2) printf(" %+9.4f", al_dt_num(x, k2) + 0.0);
        printf("\n");
    }
    free(idx);
    free(v);
}

static void text_summary(const cJSON *doc) {
    const cJSON *tk = al_dt_get(doc, "task"), *x;
    const cJSON *dla = al_dt_get(doc, "direct_logit_attribution"),
                *terms = al_dt_get(doc, "path_terms");
    const int N = al_dt_int(tk, "sequences"), ni = al_dt_int(tk, "items"),
              L = al_dt_int(doc, "n_layers");
    int show = al_dt_int(doc, "show"), nc = cJSON_GetArraySize(dla), nt = cJSON_GetArraySize(terms);
    printf("model %s (sha256 %.12s…) -> run %lld of %s\n", al_dt_str(doc, "model"),
           al_dt_str(doc, "sha256"), (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"));
    const cJSON *iv = al_dt_get(doc, "intervals");
    printf("task %s: %d sequence%s of %d tokens, %d scored item%s; metric = mean %s = %.4f ± "
           "%.4f, loss = %.4f\n",
           al_dt_str(tk, "name"), N, N == 1 ? "" : "s", al_dt_int(tk, "T"), ni, ni == 1 ? "" : "s",
           al_dt_str(tk, "metric"), al_dt_num(doc, "metric"), al_dt_num(doc, "metric_se"),
           al_dt_num(doc, "loss"));
    printf("(± standard error over the %d sequences, each one's items together; %g%% bootstrap "
           "intervals, %d resamples, in --json and table score_intervals)\n",
           al_dt_int(iv, "items"), 100 * al_dt_num(iv, "level"), al_dt_int(iv, "bootstrap"));
    printf("direct logit attribution: top %d of %d components by |value| (they sum to the "
           "metric)\n  %-10s %9s %8s\n",
           show < nc ? show : nc, nc, "component", "value", "±");
    text_ranked(dla, "value", "component", NULL, show);
    if (nt) {
        const cJSON *kinds = al_dt_get(doc, "path_kinds");
        /* kinds can have either sign (removing virtual terms can lower the
         * loss): shares of Σ|dloss|, so that they add up to 100% */
        double tot = 0;
        cJSON_ArrayForEach(x, kinds) tot += fabs(al_dt_num(x, "dloss"));
        printf("path expansion (dloss = change in mean loss with the kind's terms removed; "
               "share = |dloss| / the sum of the kinds' |dloss|):\n  %-10s %9s %9s %7s\n",
               "kind", "value", "dloss", "share");
        cJSON_ArrayForEach(x, kinds) {
            printf("  %-10s %+9.4f %+9.4f ", al_dt_str(x, "kind"), al_dt_num(x, "value") + 0.0,
                   al_dt_num(x, "dloss") + 0.0);
            if (tot != 0)
                printf("%6.1f%%\n", 100 * fabs(al_dt_num(x, "dloss")) / tot);
            else
                printf("%7s\n", "n/a");
        }
        if (L >= 3) { /* the remainder, whether or not it is among the top terms */
            const cJSON *last = cJSON_GetArrayItem(terms, nt - 1);
            printf("  virtual = every path through two or more heads; of it, the chains of "
                   "three or more (one term, chains>=3): value %+.4f, dloss %+.4f\n",
                   al_dt_num(last, "value") + 0.0, al_dt_num(last, "dloss") + 0.0);
        }
        printf("top %d of %d terms by |dloss|:\n  %-10s %9s %8s %9s\n", show < nt ? show : nt, nt,
               "term", "value", "±", "dloss");
        text_ranked(terms, "dloss", "term", "dloss", show);
    }
    printf("logit lens (the residual stream entering each layer, through W_U):\n  %-10s %9s "
           "%9s\n",
           "layer", "loss", "accuracy");
    cJSON_ArrayForEach(x, al_dt_get(doc, "logit_lens")) {
        char lab[32];
        const cJSON *l = al_dt_get(x, "layer");
        if (cJSON_IsString(l))
            snprintf(lab, sizeof lab, "%s", l->valuestring);
        else
            snprintf(lab, sizeof lab, "%d", al_dt_int(x, "layer"));
        printf("  %-10s %9.4f %9.4f\n", lab, al_dt_num(x, "loss"), al_dt_num(x, "accuracy"));
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
    int ns = ap->n_senders, W = al_paths_width(ap->L, ap->H);
    int c = k / (ns * W), s = k / W % ns, h = k % W;
    char nm[32], rn[16];
    al_paths_sender_name(ap->H, s, nm, sizeof nm);
    if (c == 3)
        snprintf(buf, cap, "%s -> logits", nm);
    else
        snprintf(buf, cap, "%s -> %s %s", nm, al_paths_receiver_name(ap->H, h, rn, sizeof rn),
                 al_paths_channel_name(c));
}

static void text_attrpatch(const cJSON *doc) {
    const cJSON *p = al_dt_get(doc, "attribution_patching"), *x;
    const cJSON *est = al_dt_get(p, "estimates");
    printf("attribution patching (%s): M_clean = %.4f   M_corr = %.4f\n",
           strcmp(al_dt_str(p, "direction"), "denoise") ? "noising" : "denoising",
           al_dt_num(p, "m_clean"), al_dt_num(p, "m_corr"));
    if (al_dt_bool(p, "compared")) {
        printf("  %-10s %6s %9s %9s %5s\n", "grid", "n", "pearson", "spearman", "top5");
        cJSON_ArrayForEach(x, al_dt_get(p, "agreement")) {
            printf("  %-10s %6d %9.4f %9.4f %5d\n", al_dt_str(x, "grid"), al_dt_int(x, "n"),
                   al_dt_num(x, "pearson"), al_dt_num(x, "spearman"), al_dt_int(x, "top5"));
        }
    }
    /* the grids end to end, so the largest estimates of all of them show */
    int n, show = al_dt_int(doc, "show");
    double *v = values_of(est, "estimate", &n);
    int *idx = v ? al_by_magnitude(v, n) : NULL;
    if (idx) {
        show = show < n ? show : n;
        printf("top %d of %d estimates by |estimate| (± over the pairs; head x position: "
               "none):\n  %-26s %9s %8s %9s\n",
               show, n, "configuration", "estimate", "±", "actual");
        for (int i = 0; i < show; i++) {
            const cJSON *e = cJSON_GetArrayItem(est, idx[i]);
            double act = al_dt_num(e, "actual"), se = al_dt_num(e, "estimate_se");
            printf("  ");
            al_print_col(al_dt_str(e, "configuration"), 26);
            printf(" %+9.4f ", al_dt_num(e, "estimate") + 0.0);
            if (isfinite(se))
                printf("%8.4f ", se);
            else
                printf("%8s ", "");
            if (isnan(act))
                printf("%9s\n", "-");
            else
                printf("%+9.4f\n", act + 0.0);
        }
    }
    free(idx);
    free(v);
}

/* ------------------------------------------------------------ JSON */

static int num(cJSON *o, const char *k, double v) {
    return cJSON_AddNumberToObject(o, k, v) ? 0 : -1;
}

/* attnlab.attribute/1 (docs/json.md): every component, term and lens
 * layer, and with attribution patching every estimate beside its actual
 * value (after the model's fields, which the driver adds). */
static int json_attr(cJSON *doc, const attr_args *a, const al_behave *bh, const al_pairs *t,
                     const al_attr_result *r, const al_attrpatch_result *ap, double total) {
    cJSON *tk, *arr, *sec;
    char nm[160];
    if (num(doc, "n_layers", r->L) || num(doc, "show", a->show) ||
        !(sec = cJSON_AddObjectToObject(doc, "seconds")) || num(sec, "attribute", r->seconds) ||
        (ap && num(sec, "attribution_patching", ap->seconds)) ||
        (ap && ap->compared && num(sec, "actual_patching", ap->seconds_patch)) ||
        num(sec, "total", total) || !(tk = cJSON_AddObjectToObject(doc, "task")) ||
        !cJSON_AddStringToObject(tk, "name", t->task) || num(tk, "sequences", t->N) ||
        num(tk, "T", t->T) || num(tk, "items", r->n_items) ||
        !cJSON_AddStringToObject(tk, "metric",
                                 r->logit_diff ? "logit(answer) - logit(wrong)"
                                 : a->center_unembed
                                     ? "logit of the answer less the mean logit (W_U centred)"
                                     : "logit of the answer") ||
        !cJSON_AddStringToObject(tk, "probe_tokens", a->probe_tokens) ||
        num(doc, "metric", r->metric) || al_json_add_ci(doc, "metric", &r->ci[0]) ||
        num(doc, "loss", r->loss) ||
        !al_json_add_intervals(doc, r->ci_level, r->ci_boot, r->ci_seed, r->ci_n,
                               "value_se: delta method for the mean over items, each "
                               "sequence's items summed together; value_ci: bootstrap "
                               "expanded percentile interval, resampling whole sequences") ||
        !(arr = cJSON_AddArrayToObject(doc, "direct_logit_attribution")))
        return -1;
    for (int c = 0; c < r->n_comp; c++) {
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(arr, j) ||
            !cJSON_AddStringToObject(j, "component",
                                     al_attr_comp_name(r->L, r->H, c, nm, sizeof nm)) ||
            num(j, "value", r->dla[c]) || al_json_add_ci(j, "value", &r->ci[1 + c]))
            return -1;
    }
    if (!(arr = cJSON_AddArrayToObject(doc, "path_terms"))) return -1;
    for (int k = 0; k < r->n_terms; k++) {
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(arr, j) ||
            !cJSON_AddStringToObject(j, "term", al_attr_term_name(r->L, r->H, k, nm, sizeof nm)) ||
            num(j, "value", r->term_value[k]) ||
            al_json_add_ci(j, "value", &r->ci[1 + r->n_comp + k]) ||
            num(j, "dloss", r->term_dloss[k]))
            return -1;
    }
    if (r->n_terms) {
        static const char *const kinds[3] = {"direct", "head", "virtual"};
        cJSON *kj = cJSON_AddArrayToObject(doc, "path_kinds");
        if (!kj) return -1;
        for (int k = 0; k < (r->L >= 2 ? 3 : 2); k++) {
            cJSON *j = cJSON_CreateObject();
            if (!j || !cJSON_AddItemToArray(kj, j) ||
                !cJSON_AddStringToObject(j, "kind", kinds[k]) ||
                num(j, "value", r->kind_value[k]) || num(j, "dloss", r->kind_dloss[k]))
                return -1;
        }
    }
    if (!(arr = cJSON_AddArrayToObject(doc, "logit_lens"))) return -1;
    for (int l = 0; l <= r->L; l++) {
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(arr, j) ||
            !(l == r->L ? cJSON_AddStringToObject(j, "layer", "final")
                        : cJSON_AddNumberToObject(j, "layer", l)) ||
            num(j, "loss", r->lens_loss[l]) || num(j, "accuracy", r->lens_acc[l]))
            return -1;
    }
    if (!ap) return cJSON_AddNullToObject(doc, "attribution_patching") ? 0 : -1;
    cJSON *p = cJSON_AddObjectToObject(doc, "attribution_patching"), *ag, *est;
    if (!p || !cJSON_AddStringToObject(p, "direction", al_patch_direction_name(ap->direction)) ||
        num(p, "m_clean", ap->m_clean) || num(p, "m_corr", ap->m_corr) ||
        !cJSON_AddBoolToObject(p, "compared", ap->compared) ||
        !(ag = cJSON_AddArrayToObject(p, "agreement")) ||
        !(est = cJSON_AddArrayToObject(p, "estimates")))
        return -1;
    for (int g = 0; ap->compared && g < AL_AP_NGRID; g++) {
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(ag, j) ||
            !cJSON_AddStringToObject(j, "grid", al_attrpatch_grid_name(g)) ||
            num(j, "n", ap->agree[g].n) || num(j, "pearson", ap->agree[g].pearson) ||
            num(j, "spearman", ap->agree[g].spearman) || num(j, "top5", ap->agree[g].top5))
            return -1;
    }
    /* the grids end to end, as the text ranks them */
    int LH = ap->L * ap->H, n = LH + LH * ap->T + ap->n_edge;
    for (int k = 0; k < n; k++) {
        const double *e = k < LH                ? ap->head + k
                          : k < LH + LH * ap->T ? ap->head_pos + (k - LH)
                                                : ap->edge + (k - LH - LH * ap->T);
        const double *x = !ap->compared         ? NULL
                          : k < LH              ? ap->act_head + k
                          : k < LH + LH * ap->T ? ap->act_head_pos + (k - LH)
                                                : ap->act_edge + (k - LH - LH * ap->T);
        if (isnan(*e)) continue;
        ap_name(bh, t, ap, k, nm, sizeof nm);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(est, j) ||
            !cJSON_AddStringToObject(j, "grid",
                                     al_attrpatch_grid_name(k < LH                ? AL_AP_HEAD
                                                            : k < LH + LH * ap->T ? AL_AP_HEAD_POS
                                                                                  : AL_AP_EDGE)) ||
            !cJSON_AddStringToObject(j, "configuration", nm) || num(j, "estimate", *e) ||
            !(x ? cJSON_AddNumberToObject(j, "actual", *x) : cJSON_AddNullToObject(j, "actual")))
            return -1;
        /* the head and edge grids' intervals (head_pos has none) */
        const al_interval *ci = k < LH                ? ap->head_ci + k
                                : k < LH + LH * ap->T ? NULL
                                                      : ap->edge_ci + (k - LH - LH * ap->T);
        if (ci && ap->head_ci && al_json_add_ci(j, "estimate", ci)) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ running */

/* The attribution options of the command's arguments. */
static al_attr_opts attr_opts(const attr_args *a) {
    al_attr_opts ao = al_attr_opts_defaults();
    ao.batch = a->o.batch;
    ao.paths = !a->no_paths;
    ao.center_unembed = a->center_unembed;
    ao.ci_level = a->o.ci_level, ao.bootstrap = a->o.bootstrap, ao.ci_seed = a->o.ci_seed;
    return ao;
}

static int attr_check(const void *args, const al_flag *fl, al_err *e) {
    const attr_args *a = args;
    if ((al_flag_seen(fl, "task") || al_flag_seen(fl, "pairs")) + !!a->w.data + !!a->prompt > 1)
        return al_errf(e, "give one task: --task/--pairs, --data or --prompt");
    if (al_patch_opts_check(&a->o, e)) return -1;
    if (al_probe_tokens_check(a->probe_tokens, a->w.data || a->prompt ? NULL : a->o.task, e))
        return -1;
    if (a->windows < 1 || a->windows > 1000000)
        return al_errf(e, "--windows must be 1..1000000 (got %d)", a->windows);
    if (a->show < 0) return al_errf(e, "--show must be >= 0");
    al_attr_opts ao = attr_opts(a);
    return al_attr_opts_check(&ao, e) || al_threads_check(a->w.threads, e) ? -1 : 0;
}

/* The run's state between the driver's phases. */
typedef struct attr_state {
    al_patch_opts o; /* the pair task and attribution patching */
    al_attr_opts ao;
    al_probe_load pl; /* --probe-tokens: what the induction task is made of */
    al_pairs t;
    al_attr_result r;
    al_attrpatch_result ap;
    int patching; /* attribution patching is due (a pair task, <= 16 layers) */
    int have_ap; /* ... and done */
    double t0; /* when the model was loaded: the printed total */
} attr_state;

/* The task, and everything it or the model can refuse, before a run
 * exists; a signal while the names task is made leaves no run (the
 * driver catches SIGINT/SIGTERM from before the load). */
static int attr_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    attr_args *a = args;
    attr_state *s = state;
    al_behave *bh = dr->b;
    int pairs_task = !a->w.data && !a->prompt, L = bh->m.cfg.n_layers;
    s->t0 = al_now();
    s->o = a->o;
    s->ao = attr_opts(a);
    s->o.stop = &al_stop;
    if (al_probe_load_open(&s->pl, a->probe_tokens, a->w.model, NULL, NULL, bh->m.cfg.d_vocab, e))
        return -1;
    s->o.probe_src = al_probe_load_src(&s->pl);
    if (pairs_task && (!s->o.task || !strcmp(s->o.task, "induction")))
        al_drive_warn(dr, s->pl.warn);
    if (a->w.data   ? data_task(bh, a->w.data, a->windows, &s->ao, &s->t, e)
        : a->prompt ? prompt_task(bh, a->prompt, &s->t, e)
                    : al_patch_task_make(&s->t, &bh->m, bh->tok, al_behave_bos(bh), &s->o, e))
        return -1;
    if (al_stop) return al_errf(e, "interrupted");
    if (pairs_task) {
        char what[160];
        snprintf(what, sizeof what, "--n %d pairs of %d tokens (%d items)", s->t.N, s->t.T,
                 s->t.n_items);
        if (al_mem_check(al_attr_bytes(&bh->m.cfg, s->t.N, s->t.T, s->t.n_items, &s->ao),
                         "attribute", what, "lower --n", e))
            return -1;
    }
    s->patching = pairs_task && !a->no_patching && L <= AL_PATHS_MAX_LAYERS;
    if (L > AL_PATHS_MAX_LAYERS && pairs_task && !a->no_patching)
        fprintf(stderr,
                "attnlab: note: %s has %d layers: attribution patching covers up to %d; "
                "no attribution patching\n",
                a->w.model, L, AL_PATHS_MAX_LAYERS);
    if (!pairs_task && !a->no_patching)
        fprintf(stderr,
                "attnlab: note: no attribution patching on %s: it needs clean / "
                "corrupted pairs (a pair task)\n",
                a->w.data ? "--data" : "--prompt");
    if (pairs_task) al_behave_warn_probe(bh, s->t.T);
    /* LayerNorm and biases: what the decomposition freezes and where the
     * biases go, stored with the run */
    const char *notes[2];
    for (int i = 0, n = al_attr_notes(&bh->m.cfg, notes); i < n; i++) al_drive_warn(dr, notes[i]);
    return 0;
}

/* The attribution, then attribution patching with its comparison sweep;
 * a signal also counts when it came after the last step. */
static int attr_compute(void *args, void *state, al_drive *dr, al_err *e) {
    attr_args *a = args;
    attr_state *s = state;
    s->ao.progress = dr->progress;
    s->ao.stop = &al_stop;
    int failed = al_attribute_run(&dr->b->m, &s->t, &s->ao, &s->r, e);
    if (!failed && !al_stop && s->patching) {
        s->o.progress = dr->progress;
        if (dr->progress)
            al_log("attribute: attribution patching%s",
                   a->no_compare
                       ? ""
                       : ", then the comparison sweep (actual patching of every head, head x "
                         "position and path edge)");
        failed = al_attrpatch_run(&dr->b->m, &s->t, &s->o, !a->no_compare, &s->ap, e);
        s->have_ap = !failed;
    }
    if (al_stop) return al_errf(e, "interrupted");
    return failed ? -1 : 0;
}

static int attr_store(void *args, void *state, al_drive *dr, al_err *e) {
    attr_state *s = state;
    al_behave *bh = dr->b;
    (void)args;
    return al_store_put_attribute(bh->st, bh->run_id, bh->model_id, &s->t, &s->r,
                                  s->have_ap ? &s->ap : NULL, bh->tok, e);
}

static int attr_doc(void *args, void *state, al_drive *dr, al_err *e) {
    attr_state *s = state;
    return json_attr(dr->doc, args, dr->b, &s->t, &s->r, s->have_ap ? &s->ap : NULL,
                     al_now() - s->t0)
               ? al_errf(e, "out of memory")
               : 0;
}

/* The text of attnlab.attribute/1, from the document alone. */
static void attr_text(const cJSON *doc) {
    const cJSON *tk = al_dt_get(doc, "task"), *sec = al_dt_get(doc, "seconds");
    const int N = al_dt_int(tk, "sequences");
    const int ap = cJSON_IsObject(al_dt_get(doc, "attribution_patching"));
    text_summary(doc);
    if (ap) text_attrpatch(doc);
    printf("attribute: %d sequence%s, %d items in %.2f s", N, N == 1 ? "" : "s",
           al_dt_int(tk, "items"), al_dt_num(sec, "attribute"));
    if (ap) printf("; attribution patching %.2f s", al_dt_num(sec, "attribution_patching"));
    if (al_dt_get(sec, "actual_patching"))
        printf(", actual patching %.2f s", al_dt_num(sec, "actual_patching"));
    printf(" (total %.2f s)\n", al_dt_num(sec, "total"));
}

static void attr_release(void *state) {
    attr_state *s = state;
    al_probe_load_free(&s->pl);
    al_pairs_free(&s->t);
    al_attr_result_free(&s->r);
    al_attrpatch_result_free(&s->ap);
}

static void attr_init(void *args) {
    static const attr_args dflt = ATTR_ARGS_INIT;
    *(attr_args *)args = dflt;
}

/* "attribute (induction)", "attribute (data)", "attribute (prompt)" */
static void attr_label(const cJSON *v, char *buf, size_t cap) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "task");
    snprintf(buf, cap, "attribute (%s)",
             cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "data")) ? "data"
             : cJSON_GetObjectItemCaseSensitive(v, "prompt")           ? "prompt"
             : cJSON_IsString(t)                                       ? t->valuestring
                                                                       : "induction");
}

/* The attribution's gap warnings (attribution patching raises none). */
static const al_warnings *attr_warnings(const void *state) {
    return &((const attr_state *)state)->r.warn;
}

/* The pair task (not --data or --prompt) against the model's context. */
static int attr_check_model(const void *args, const al_config *c, al_err *e) {
    const attr_args *a = args;
    return a->w.data || a->prompt ? 0 : al_patch_task_fits(&a->o, c->n_ctx, e);
}

const al_analysis al_an_attribute = {.name = "attribute",
                                     .cmd = &al_cmd_attribute,
                                     .groups = AL_GROUP_WHERE | AL_GROUP_TASK,
                                     .tmpl = &g_attr,
                                     .size = sizeof g_attr,
                                     .init = attr_init,
                                     .check = attr_check,
                                     .check_model = attr_check_model,
                                     .state_size = sizeof(attr_state),
                                     .prepare = attr_prepare,
                                     .compute = attr_compute,
                                     .store = attr_store,
                                     .doc = attr_doc,
                                     .text = attr_text,
                                     .release = attr_release,
                                     .warnings = attr_warnings,
                                     .stops = 1,
                                     .exp_list = 1,
                                     .exp_data = AL_EXP_DATA_ASKED,
                                     .exp_label = attr_label,
                                     .results = AL_RESULTS_ATTRIBUTION};

static int run_attribute(int argc, char **argv) {
    return al_drive_main(&al_an_attribute, argc, argv);
}
