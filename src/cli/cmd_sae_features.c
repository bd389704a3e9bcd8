/* cmd_sae_features.c -- `attnlab sae features` (kind "sae_features"):
 * the features analysis (sae_features.h) of an SAE directory on text
 * windows and the induction probe, into the feature tables
 * (store_sae.h); with --task, also which features carry a pair task
 * (sae_task.h: attribution patching at the SAE's latents).
 *
 * Everything that can be refused is refused before the run row exists
 * (check: the options; prepare: against the loaded model, the task made
 * and its memory counted): a residual-stream SAE, an SAE of another
 * model, a task the model cannot take. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/doc_text.h"
#include "attnlab/json.h"
#include "attnlab/membudget.h"
#include "attnlab/patch.h"
#include "attnlab/registry.h"
#include "attnlab/sae.h"
#include "attnlab/sae_features.h"
#include "attnlab/sae_io.h"
#include "attnlab/sae_task.h"
#include "attnlab/stop.h"
#include "attnlab/store.h"
#include "attnlab/store_analysis.h"
#include "attnlab/store_sae.h"

#include <cjson/cJSON.h>

/* A number, or null when not finite (JSON has no NaN). */
static int json_num(cJSON *o, const char *k, double v) {
    return cJSON_AddItemToObject(o, k, al_json_num_item(v));
}

/* ============================================================= features */

typedef struct feat_args {
    al_an_where w;
    const char *sae;
    al_sae_feat_opts o;
    int show;
    char sae_buf[1100]; /* an experiment's --sae, under the model's directory */
    const char *sae_typed; /* --sae as given, for the text and --json */
    /* --sae and --data resolved (realpath) before the run row, so the run
     * stores them as the model's path is stored: absolute, found by a
     * picture or the report from any folder */
    char sae_abs[AL_PATH_MAX], data_abs[AL_PATH_MAX];
    /* --task: which features carry a pair task (sae_task.h); po holds the
     * task as patch makes it and the attribution's options */
    struct feat_task {
        const char *name;
        al_patch_opts o;
        const char *probe_tokens; /* what the task's pairs are made of */
    } tk;
} feat_args;

#define FEAT_ARGS_INIT                                                                             \
    {                                                                                              \
        AL_AN_WHERE_INIT, NULL, AL_SAE_FEAT_OPTS_INIT, 10, "", NULL, "", "", {                     \
            NULL, AL_PATCH_OPTS_INIT, AL_PROBE_TOKENS_DEFAULT                                      \
        }                                                                                          \
    }
static feat_args g_feat = FEAT_ARGS_INIT;

static al_flag feat_flags[] =
    {AL_FLAG_MODEL(g_feat),
     AL_FLAG_DB(g_feat),
     {"sae", AL_STR, &g_feat.sae, "DIR", "SAE directory (from attnlab sae train) of this model", 1,
      0},
     {"data", AL_STR, &g_feat.w.data, "FILE.bin", "token file: the text windows read", 1, 0},
     {"windows", AL_INT, &g_feat.o.windows, "N", "text windows, spread evenly over --data", 0, 0},
     {"top-n", AL_INT, &g_feat.o.top_n, "N", "top activating contexts kept per feature", 0, 0},
     {"logit-n", AL_INT, &g_feat.o.logit_n, "N", "tokens raised and lowered kept per feature", 0,
      0},
     {"probe-r", AL_INT, &g_feat.o.probe_r, "R",
      "induction probe: random ids per half (0: min(50, (n_ctx-1)/2))", 0, 0},
     {"probe-n", AL_INT, &g_feat.o.probe_n, "N", "induction probe: sequences", 0, 0},
     {"probe-seed", AL_U64, &g_feat.o.probe_seed, "S", "induction probe: seed", 0, 0},
     {"show", AL_INT, &g_feat.show, "N", "features printed (by density; all are stored)", 0, 0},
     {"task", AL_STR, &g_feat.tk.name, "T",
      "also attribute a pair task to the features (attribution patching at the latents): "
      "induction, names, names-key, idents, idents-key or file, as for attnlab patch",
      0, 0},
     {"pairs", AL_STR, &g_feat.tk.o.pairs, "FILE.jsonl", "--task file: the pair file", 0, 0},
     {"n", AL_INT, &g_feat.tk.o.probe_n, "N", "--task: pairs", 0, 0},
     {"seed", AL_U64, &g_feat.tk.o.probe_seed, "S", "--task: seed of the pairs", 0, 0},
     {"batch", AL_INT, &g_feat.tk.o.batch, "B", "--task: pairs per forward pass", 0, 0},
     {"direction", AL_STR, &g_feat.tk.o.direction, "D",
      "--task: denoise (clean into corrupted) or noise (the reverse)", 0, 0},
     {"probe-tokens", AL_STR, &g_feat.tk.probe_tokens, "WHICH",
      "--task: what the pairs are made of, as for attnlab patch (text: the model's validation "
      "file; idents and names from held-out text need it)",
      0, 0},
     AL_FLAGS_CI(g_feat.tk),
     AL_FLAG_THREADS(g_feat),
     AL_FLAGS_END};

static int run_feat(int argc, char **argv);
al_command al_cmd_sae_features = {
    "sae features",
    "every live feature of an SAE: density, top contexts, logit effects, head attribution, "
    "induction index -> SQLite",
    "--model DIR --sae DIR --data FILE.bin --db FILE [--windows 64] [--top-n 10] [--logit-n 10] "
    "[--task T [--n N] [--probe-tokens text]]",
    "For every feature of a z-site SAE that fires on the --windows text\n"
    "windows of --data: its density, mean and largest activation, its --top-n\n"
    "contexts (window, position, token, activation), the --logit-n tokens its\n"
    "decoder direction raises and lowers most (through each head's W_O and\n"
    "W_U, per unit of activation), its direct feature attribution by head (the\n"
    "share of its pre-activation each head's z slice contributes, averaged\n"
    "over its firing positions), and its induction index (the share of its\n"
    "activation on the induction probe that falls on the second occurrence of\n"
    "the repeated random half). Stored in sae_features, sae_feature_contexts,\n"
    "sae_feature_logits and sae_feature_heads under run kind \"sae_features\";\n"
    "the views sae_head_features and sae_induction_features answer \"features\n"
    "of head l.h\" and \"induction features\".",
    feat_flags,
    run_feat,
};

/* The task attribution's options of the command's arguments. */
static al_sae_task_opts task_opts(const feat_args *a) {
    al_sae_task_opts o = AL_SAE_TASK_OPTS_INIT;
    o.direction = a->tk.o.direction, o.batch = a->tk.o.batch;
    o.ci_level = a->tk.o.ci_level, o.bootstrap = a->tk.o.bootstrap, o.ci_seed = a->tk.o.ci_seed;
    return o;
}

/* The task as patch makes it: --task, and the probe's R shared with the
 * features' induction probe. */
static al_patch_opts task_patch_opts(const feat_args *a) {
    al_patch_opts po = a->tk.o;
    po.task = a->tk.name;
    po.probe_r = a->o.probe_r;
    return po;
}

static int feat_check(const void *args, const al_flag *fl, al_err *e) {
    const feat_args *a = args;
    static const feat_args d0 = FEAT_ARGS_INIT;
    /* numbers by whether they were given; strings by their value (an
     * experiment marks every string it passes on as given) */
    static const char *const task_nums[] = {"n",         "seed",    "batch", "ci",
                                            "bootstrap", "ci-seed", NULL};
    if (a->show < 0) return al_errf(e, "--show must be >= 0 (got %d)", a->show);
    if (al_sae_feat_opts_check(&a->o, e) || al_threads_check(a->w.threads, e)) return -1;
    if (!a->tk.name) {
        const char *given =
            a->tk.o.pairs ? "pairs"
            : strcmp(a->tk.o.direction ? a->tk.o.direction : "", d0.tk.o.direction) ? "direction"
            : strcmp(a->tk.probe_tokens ? a->tk.probe_tokens : "", d0.tk.probe_tokens)
                ? "probe-tokens"
                : NULL;
        for (int i = 0; !given && task_nums[i]; i++)
            if (al_flag_seen(fl, task_nums[i])) given = task_nums[i];
        if (given) return al_errf(e, "--%s is an option of --task (give the task too)", given);
        return 0;
    }
    al_patch_opts po = task_patch_opts(a);
    al_sae_task_opts to = task_opts(a);
    return al_patch_opts_check(&po, e) || al_probe_tokens_check(a->tk.probe_tokens, po.task, e) ||
                   al_sae_task_opts_check(&to, e)
               ? -1
               : 0;
}

typedef struct feat_state {
    al_sae sae;
    al_sae_meta meta;
    al_tokens d;
    int T;
    char hook[64];
    al_sae_feat_result r;
    /* --task */
    al_probe_load pl;
    al_pairs t;
    al_sae_task_result tr;
    int have_task;
} feat_state;

/* The induction probe against the model's context. */
static int feat_check_model(const void *args, const al_config *c, al_err *e) {
    const feat_args *a = args;
    int R;
    if (al_sae_feat_probe_r(&a->o, c->n_ctx, &R, e)) return -1;
    al_patch_opts po = task_patch_opts(a);
    return a->tk.name ? al_patch_task_fits(&po, c->n_ctx, e) : 0;
}

/* --task: the pairs, made and counted before the run exists (a names
 * task read from text takes a while: a signal then leaves no run). */
static int task_prepare(feat_args *a, feat_state *s, al_drive *dr, al_err *e) {
    al_behave *bh = dr->b;
    al_patch_opts po = task_patch_opts(a);
    po.stop = &al_stop;
    if (al_probe_load_open(&s->pl, a->tk.probe_tokens, a->w.model, NULL, NULL, bh->m.cfg.d_vocab,
                           e))
        return -1;
    po.probe_src = al_probe_load_src(&s->pl);
    if (!strcmp(po.task, "induction")) al_drive_warn(dr, s->pl.warn);
    if (al_patch_task_make(&s->t, &bh->m, bh->tok, al_behave_bos(bh), &po, e)) return -1;
    if (al_stop) return al_errf(e, "interrupted");
    al_behave_warn_probe(bh, s->t.T);
    char note[AL_WARN_LEN];
    if (!al_sae_task_exact(&bh->m.cfg, s->meta.hook_layer, &s->t, note, sizeof note))
        al_drive_warn(dr, note);
    int B = po.batch < s->t.N ? po.batch : s->t.N;
    char what[200];
    snprintf(what, sizeof what,
             "--n %d pairs of %d tokens in batches of %d, d_sae %d, --bootstrap %d", s->t.N, s->t.T,
             B, s->sae.cfg.d_sae, po.bootstrap);
    return al_mem_check(al_sae_task_bytes(&bh->m.cfg, &s->sae.cfg, s->t.N, B, s->t.T, po.bootstrap),
                        "sae features --task", what, "lower --batch, --n or --bootstrap", e);
}

static int feat_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    feat_args *a = args;
    feat_state *s = state;
    if (al_sae_load(a->sae, &s->sae, &s->meta, e) != 0) return -1;
    if (al_sae_fits_model(&s->sae, &s->meta, &dr->b->m.cfg, dr->b->sha, e) != 0) return -1;
    if (s->meta.partial) { /* a warning; under --strict the one line of a refusal */
        char w[AL_WARN_LEN];
        al_sae_partial_msg(a->sae, &s->meta, w, sizeof w);
        if (dr->strict) return al_errf(e, "refused under --strict (nothing stored): %s", w);
        al_drive_warn(dr, w);
    }
    if (s->meta.site != AL_SAE_SITE_Z)
        return al_errf(e,
                       "%s reads the residual stream of layer %d: sae features needs an SAE "
                       "on a layer's z",
                       a->sae, s->meta.hook_layer);
    if (al_sae_hook_name(s->meta.site, s->meta.hook_layer, s->hook, sizeof s->hook) != 0)
        return al_errf(e, "%s: no hook name", a->sae);
    if (al_behave_tokens(dr->b, a->w.data, &s->d, &s->T, e) != 0) return -1;
    if (s->d.max_id >= dr->b->m.cfg.d_vocab)
        return al_errf(e,
                       "token id %d in %s is >= d_vocab %d: was it encoded with this model's "
                       "tokenizer?",
                       s->d.max_id, a->w.data, dr->b->m.cfg.d_vocab);
    int R;
    char what[200];
    if (al_sae_feat_probe_r(&a->o, dr->b->m.cfg.n_ctx, &R, e)) return -1;
    snprintf(what, sizeof what, "--windows %d of %d tokens and --probe-n %d x %d ids, d_sae %d",
             a->o.windows, s->T, a->o.probe_n, R, s->sae.cfg.d_sae);
    if (al_mem_check(al_sae_feat_bytes(&dr->b->m.cfg, &s->sae.cfg, s->T, R, &a->o), "sae features",
                     what, "lower --probe-n or --windows", e))
        return -1;
    al_drive_warn(dr, al_sae_feat_ln_note(&dr->b->m.cfg)); /* NULL without LayerNorm */
    char w[AL_WARN_LEN]; /* the logit effects rank every id, trained or not */
    if (al_unseen_ids_warning(a->w.model, dr->b->m.cfg.d_vocab,
                              "the features' logit effects (raises, lowers)", w, sizeof w))
        al_drive_warn(dr, w);
    a->sae_typed = a->sae;
    if (realpath(a->sae, a->sae_abs)) a->sae = a->sae_abs;
    if (realpath(a->w.data, a->data_abs)) a->w.data = a->data_abs;
    return a->tk.name ? task_prepare(a, s, dr, e) : 0;
}

static int feat_compute(void *args, void *state, al_drive *dr, al_err *e) {
    feat_args *a = args;
    feat_state *s = state;
    al_sae_feat_opts o = a->o;
    o.bos = al_behave_bos(dr->b);
    o.progress = dr->progress;
    o.stop = &al_stop;
    if (al_sae_features_run(&dr->b->m, &s->sae, &s->meta, &s->d, s->T, &o, &s->r, e)) return -1;
    if (!a->tk.name) return 0;
    al_sae_task_opts to = task_opts(a);
    to.progress = dr->progress;
    to.stop = &al_stop;
    if (al_sae_task_run(&dr->b->m, &s->sae, &s->meta, &s->t, &to, &s->tr, e)) return -1;
    s->have_task = 1;
    return 0;
}

static int feat_store(void *args, void *state, al_drive *dr, al_err *e) {
    feat_args *a = args;
    feat_state *s = state;
    return al_store_put_sae_features(dr->b->st, dr->b->run_id, dr->b->model_id, a->sae, s->hook,
                                     &s->r, dr->b->tok, e) ||
                   (s->have_task && al_store_put_sae_task(dr->b->st, dr->b->run_id, dr->b->model_id,
                                                          a->tk.name, &s->tr, e))
               ? -1
               : 0;
}

static cJSON *feat_json(const al_sae_feat_result *r, int i, const al_tokenizer *tok) {
    cJSON *f = cJSON_CreateObject(), *hs = NULL, *up = NULL, *dn = NULL, *cx = NULL;
    if (!f) return NULL;
    char buf[256];
    int ok = cJSON_AddNumberToObject(f, "feature", i) &&
             cJSON_AddNumberToObject(f, "fired", (double)r->fired[i]) &&
             json_num(f, "density", r->density[i]) && json_num(f, "mean_act", r->mean_act[i]) &&
             json_num(f, "max_act", r->max_act[i]) && json_num(f, "first_mean", r->first_mean[i]) &&
             json_num(f, "second_mean", r->second_mean[i]) &&
             json_num(f, "induction_index", r->induction_index[i]) &&
             cJSON_AddNumberToObject(f, "first_fired", (double)r->first_fired[i]) &&
             cJSON_AddNumberToObject(f, "second_fired", (double)r->second_fired[i]) &&
             json_num(f, "induction_p", r->induction_p[i]) && json_num(f, "auroc", r->auroc[i]) &&
             cJSON_AddBoolToObject(f, "induction", r->induction[i]) &&
             (r->next_token[i] < 0
                  ? cJSON_AddNullToObject(f, "next_token") != NULL
                  : cJSON_AddNumberToObject(f, "next_token", r->next_token[i]) != NULL) &&
             json_num(f, "next_share", r->next_share[i]) &&
             (hs = cJSON_AddArrayToObject(f, "heads")) && (up = cJSON_AddArrayToObject(f, "up")) &&
             (dn = cJSON_AddArrayToObject(f, "down")) &&
             (cx = cJSON_AddArrayToObject(f, "contexts"));
    for (int h = 0; ok && h < r->H; h++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(hs, o) && cJSON_AddNumberToObject(o, "layer", r->layer) &&
             cJSON_AddNumberToObject(o, "head", h) &&
             json_num(o, "contribution", r->contrib[(size_t)i * r->H + h]) &&
             json_num(o, "share", r->share[(size_t)i * r->H + h]);
    }
    for (int dir = 0; ok && dir < 2; dir++) {
        const int *tk = (dir ? r->down_tok : r->up_tok) + (size_t)i * r->logit_n;
        const float *vl = (dir ? r->down_val : r->up_val) + (size_t)i * r->logit_n;
        for (int j = 0; ok && j < r->logit_n && tk[j] >= 0; j++) {
            cJSON *o = cJSON_CreateObject();
            al_store_token_str(tok, tk[j], buf, sizeof buf);
            ok = o && cJSON_AddItemToArray(dir ? dn : up, o) &&
                 cJSON_AddNumberToObject(o, "token", tk[j]) &&
                 cJSON_AddStringToObject(o, "str", buf) && json_num(o, "value", vl[j]);
        }
    }
    for (int j = 0; ok && j < r->top_n; j++) {
        const al_sae_feat_ctx *c = r->ctx + (size_t)i * r->top_n + j;
        if (c->window < 0) break;
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(cx, o) && cJSON_AddNumberToObject(o, "window", c->window) &&
             cJSON_AddNumberToObject(o, "offset", (double)c->offset) &&
             cJSON_AddNumberToObject(o, "pos", c->pos) &&
             cJSON_AddNumberToObject(o, "token", c->token) && json_num(o, "activation", c->act);
    }
    if (!ok) {
        cJSON_Delete(f);
        return NULL;
    }
    return f;
}

/* The head whose z slice contributes most of feature i's pre-activation
 * (its largest DFA share), or −1 (a feature that never fired). */
static int top_head(const al_sae_feat_result *r, int i) {
    int best = -1;
    for (int h = 0; r->fired[i] && h < r->H; h++) {
        double v = r->share[(size_t)i * r->H + h];
        if (isfinite(v) && (best < 0 || v > r->share[(size_t)i * r->H + best])) best = h;
    }
    return best;
}

/* "task": the task attribution, its features by |effect|, largest first. */
static int task_doc(cJSON *d, const char *name, const al_sae_task_result *t,
                    const al_sae_feat_result *r) {
    cJSON *o = cJSON_AddObjectToObject(d, "task"), *er = NULL, *si = NULL, *fs = NULL;
    int *ix = malloc(sizeof *ix * (size_t)(t->d_sae + 1)), n = 0;
    int ok = o && ix && cJSON_AddStringToObject(o, "name", name) &&
             cJSON_AddStringToObject(o, "direction", al_patch_direction_name(t->direction)) &&
             cJSON_AddNumberToObject(o, "pairs", t->N) &&
             cJSON_AddNumberToObject(o, "items", t->n_items) &&
             json_num(o, "m_clean", t->m_clean) && json_num(o, "m_corr", t->m_corr) &&
             cJSON_AddNumberToObject(o, "n_moved", t->n_moved) &&
             (er = cJSON_AddObjectToObject(o, "error")) &&
             json_num(er, "effect", t->effect[AL_SAE_TASK_ERROR(t)]) &&
             !al_json_add_ci(er, "effect", &t->ci[AL_SAE_TASK_ERROR(t)]) &&
             (si = cJSON_AddObjectToObject(o, "site")) &&
             json_num(si, "effect", t->effect[AL_SAE_TASK_SITE(t)]) &&
             !al_json_add_ci(si, "effect", &t->ci[AL_SAE_TASK_SITE(t)]) &&
             al_json_add_intervals(o, t->ci_level, t->ci_boot, t->ci_seed, t->N,
                                   "effect_se: delta method for the ratio over the pairs; "
                                   "effect_ci: bootstrap expanded percentile interval, "
                                   "resampling whole pairs") &&
             (fs = cJSON_AddArrayToObject(o, "features"));
    for (int i = 0; ok && i < t->d_sae; i++)
        if (t->effect[i] != 0) ix[n++] = i;
    for (int i = 1; i < n; i++) { /* by |effect| descending; insertion sort: stable */
        int v = ix[i], j = i;
        while (j > 0 && fabs(t->effect[ix[j - 1]]) < fabs(t->effect[v])) ix[j] = ix[j - 1], j--;
        ix[j] = v;
    }
    for (int q = 0; ok && q < n; q++) {
        int i = ix[q], h = top_head(r, i);
        cJSON *f = cJSON_CreateObject();
        ok = f && cJSON_AddItemToArray(fs, f) && cJSON_AddNumberToObject(f, "feature", i) &&
             json_num(f, "effect", t->effect[i]) && !al_json_add_ci(f, "effect", &t->ci[i]) &&
             json_num(f, "act_clean", t->act_clean[i]) && json_num(f, "act_corr", t->act_corr[i]) &&
             cJSON_AddBoolToObject(f, "induction", r->induction[i]) &&
             json_num(f, "induction_index", r->induction_index[i]) &&
             (h < 0 ? cJSON_AddNullToObject(f, "head") != NULL
                    : cJSON_AddNumberToObject(f, "head", h) != NULL) &&
             json_num(f, "share", h < 0 ? NAN : r->share[(size_t)i * r->H + h]);
    }
    free(ix);
    return ok ? 0 : -1;
}

static int feat_doc(void *args, void *state, al_drive *dr, al_err *e) {
    feat_args *a = args;
    feat_state *s = state;
    const al_sae_feat_result *r = &s->r;
    int rc = 0, best = -1;
    for (int i = 0; i < r->d_sae; i++)
        if (r->fired[i] && isfinite(r->auroc[i]) && (best < 0 || r->auroc[i] > r->auroc[best]))
            best = i;
    cJSON *d = dr->doc, *fs = NULL, *ha = NULL;
    int ok = cJSON_AddStringToObject(d, "sae", a->sae_typed) &&
             cJSON_AddNumberToObject(d, "show", a->show) &&
             cJSON_AddStringToObject(d, "hook_name", s->hook) &&
             cJSON_AddNumberToObject(d, "layer", r->layer) &&
             cJSON_AddNumberToObject(d, "d_sae", r->d_sae) &&
             cJSON_AddNumberToObject(d, "n_live", r->n_live) &&
             cJSON_AddNumberToObject(d, "windows", r->windows) &&
             cJSON_AddNumberToObject(d, "T", r->T) &&
             cJSON_AddNumberToObject(d, "positions", (double)r->positions) &&
             cJSON_AddNumberToObject(d, "probe_r", r->probe_r) &&
             cJSON_AddNumberToObject(d, "probe_n", r->probe_n) &&
             cJSON_AddNumberToObject(d, "n_induction", r->n_induction) &&
             json_num(d, "group_auroc", r->group_auroc) &&
             (best < 0 || (cJSON_AddNumberToObject(d, "best_auroc_feature", best) &&
                           json_num(d, "best_auroc", r->auroc[best]))) &&
             (ha = cJSON_AddArrayToObject(d, "head_auroc")) &&
             (fs = cJSON_AddArrayToObject(d, "features"));
    for (int h = 0; ok && h < r->H; h++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(ha, o) && cJSON_AddNumberToObject(o, "layer", r->layer) &&
             cJSON_AddNumberToObject(o, "head", h) && json_num(o, "auroc", r->head_auroc[h]);
    }
    for (int i = 0; ok && i < r->d_sae; i++) {
        if (!r->fired[i]) continue;
        cJSON *f = feat_json(r, i, dr->b->tok);
        ok = f && cJSON_AddItemToArray(fs, f);
    }
    if (ok && s->have_task) ok = !task_doc(d, a->tk.name, &s->tr, r);
    if (!ok) rc = al_errf(e, "out of memory");
    return rc;
}

/* The task attribution's lines: the site, the SAE's error term and the
 * features that carry most of the task. */
static void task_text(const cJSON *t, int show, int layer) {
    const cJSON *er = al_dt_get(t, "error"), *si = al_dt_get(t, "site"), *f;
    printf("task %s (%s): %d pairs, %d items; metric clean %.4f, corrupted %.4f\n",
           al_dt_str(t, "name"), al_dt_str(t, "direction"), al_dt_int(t, "pairs"),
           al_dt_int(t, "items"), al_dt_num(t, "m_clean"), al_dt_num(t, "m_corr"));
    printf("attribution patching, normalised (1: all of it): layer %d's z %.3f ± %.3f = features "
           "+ the SAE's error %.3f ± %.3f; %d features move\n",
           layer, al_dt_num(si, "effect"), al_dt_num(si, "effect_se"), al_dt_num(er, "effect"),
           al_dt_num(er, "effect_se"), al_dt_int(t, "n_moved"));
    int q = 0;
    cJSON_ArrayForEach(f, al_dt_get(t, "features")) {
        if (q >= show) break;
        if (q++ == 0)
            printf("%-8s %8s %7s %18s %9s %9s %9s %6s %6s\n", "feature", "effect", "se", "interval",
                   "act clean", "act corr", "induction", "head", "share");
        const cJSON *ci = al_dt_get(f, "effect_ci");
        char head[16] = "-";
        if (!cJSON_IsNull(al_dt_get(f, "head")))
            snprintf(head, sizeof head, "%d.%d", layer, al_dt_int(f, "head"));
        char iv[48] = "-"; /* --bootstrap 0: no interval */
        if (isfinite(al_dt_at(ci, 0)))
            snprintf(iv, sizeof iv, "[%7.4f, %7.4f]", al_dt_at(ci, 0), al_dt_at(ci, 1));
        printf("%-8d %8.4f %7.4f %18s %9.3f %9.3f %8.3f%s %6s %6.3f\n", al_dt_int(f, "feature"),
               al_dt_num(f, "effect"), al_dt_num(f, "effect_se"), iv, al_dt_num(f, "act_clean"),
               al_dt_num(f, "act_corr"), al_dt_num(f, "induction_index"),
               al_dt_bool(f, "induction") ? "*" : " ", head, al_dt_num(f, "share"));
    }
}

/* The text of attnlab.sae_features/1, from the document alone. */
static void feat_text(const cJSON *doc) {
    const cJSON *fs = al_dt_get(doc, "features"), *x;
    const int n = cJSON_GetArraySize(fs), show = al_dt_int(doc, "show");
    const int n_ind = al_dt_int(doc, "n_induction");
    const cJSON *bh = NULL;
    cJSON_ArrayForEach(x, al_dt_get(doc, "head_auroc")) {
        double v = al_dt_num(x, "auroc");
        if (isfinite(v) && (!bh || v > al_dt_num(bh, "auroc"))) bh = x;
    }
    printf("model %s -> run %lld of %s; SAE %s on %s: %d of %d features live on %d windows of "
           "%d tokens; induction probe R %d, N %d\n",
           al_dt_str(doc, "model"), (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"),
           al_dt_str(doc, "sae"), al_dt_str(doc, "hook_name"), al_dt_int(doc, "n_live"),
           al_dt_int(doc, "d_sae"), al_dt_int(doc, "windows"), al_dt_int(doc, "T"),
           al_dt_int(doc, "probe_r"), al_dt_int(doc, "probe_n"));
    printf("induction features (index >= %.1f, binomial p < %g): %d", AL_SAE_INDUCTION_INDEX,
           AL_SAE_INDUCTION_P, n_ind);
    if (al_dt_get(doc, "best_auroc_feature"))
        printf("; best AUROC second vs first occurrence: feature %d %.3f",
               al_dt_int(doc, "best_auroc_feature"), al_dt_num(doc, "best_auroc"));
    if (bh)
        printf(", best head z norm %d.%d %.3f", al_dt_int(bh, "layer"), al_dt_int(bh, "head"),
               al_dt_num(bh, "auroc"));
    if (n_ind) printf(", induction features summed %.3f", al_dt_num(doc, "group_auroc"));
    printf("\n");
    const cJSON **ix = malloc(sizeof *ix * (size_t)(n + 1));
    if (!ix) return;
    int m = 0;
    cJSON_ArrayForEach(x, fs) ix[m++] = x;
    for (int i = 1; i < m; i++) { /* by density, descending; insertion sort: stable */
        const cJSON *v = ix[i];
        int j = i;
        while (j > 0 && al_dt_num(ix[j - 1], "density") < al_dt_num(v, "density"))
            ix[j] = ix[j - 1], j--;
        ix[j] = v;
    }
    if (m > 0 && show > 0)
        printf("%-8s %8s %8s %8s %9s %6s %6s %6s  %s\n", "feature", "density", "mean", "max",
               "induction", "auroc", "head", "share", "raises");
    for (int q = 0; q < m && q < show; q++) {
        const cJSON *f = ix[q], *top = NULL, *h;
        cJSON_ArrayForEach(h, al_dt_get(f, "heads")) {
            double v = al_dt_num(h, "share");
            if (isfinite(v) && (!top || v > al_dt_num(top, "share"))) top = h;
        }
        char head[16] = "-";
        if (top)
            snprintf(head, sizeof head, "%d.%d", al_dt_int(top, "layer"), al_dt_int(top, "head"));
        const cJSON *up0 = cJSON_GetArrayItem(al_dt_get(f, "up"), 0);
        printf("%-8d %8.4f %8.3f %8.3f %8.3f%s %6.3f %6s %6.3f  %s\n", al_dt_int(f, "feature"),
               al_dt_num(f, "density"), al_dt_num(f, "mean_act"), al_dt_num(f, "max_act"),
               al_dt_num(f, "induction_index"), al_dt_bool(f, "induction") ? "*" : " ",
               al_dt_num(f, "auroc"), head, top ? al_dt_num(top, "share") : NAN,
               up0 ? al_dt_str(up0, "str") : "");
    }
    free(ix);
    if (al_dt_get(doc, "task")) task_text(al_dt_get(doc, "task"), show, al_dt_int(doc, "layer"));
}

static void feat_release(void *state) {
    feat_state *s = state;
    al_sae_feat_result_free(&s->r);
    al_sae_task_result_free(&s->tr);
    al_pairs_free(&s->t);
    al_probe_load_free(&s->pl);
    al_sae_free(&s->sae);
    al_tokens_free(&s->d);
}

static void feat_init(void *args) {
    static const feat_args d = FEAT_ARGS_INIT;
    *(feat_args *)args = d;
}

/* In an experiment "sae" names the SAE's directory under the model's
 * (sae-L1: what an `sae` stage with layer 1 writes). */
static int feat_exp_paths(void *args, const al_exp_paths *p, al_err *e) {
    feat_args *a = args;
    if (!a->sae)
        return al_errf(e, "\"sae\" must name the SAE's directory under the model's, "
                          "e.g. \"sae-L1\" (what an sae stage with layer 1 writes)");
    if (a->sae[0] == '/') return 0;
    int n = snprintf(a->sae_buf, sizeof a->sae_buf, "%s/%s", p->model_dir, a->sae);
    if (n < 0 || (size_t)n >= sizeof a->sae_buf)
        return al_errf(e, "the model directory's path is too long for an SAE under it");
    a->sae = a->sae_buf;
    return 0;
}

static const char *feat_exp_input(const void *args) { return ((const feat_args *)args)->sae; }

/* --task: the gap check of its clean and corrupted runs (what every
 * estimate divides by); none without a task. */
static const al_warnings *feat_warnings(const void *state) {
    const feat_state *s = state;
    return s->have_task ? &s->tr.warn : NULL;
}

const al_analysis al_an_sae_features = {.name = "sae_features",
                                        .cmd = &al_cmd_sae_features,
                                        .groups = AL_GROUP_WHERE | AL_GROUP_TASK,
                                        .tmpl = &g_feat,
                                        .size = sizeof g_feat,
                                        .init = feat_init,
                                        .check = feat_check,
                                        .check_model = feat_check_model,
                                        .state_size = sizeof(feat_state),
                                        .prepare = feat_prepare,
                                        .compute = feat_compute,
                                        .store = feat_store,
                                        .doc = feat_doc,
                                        .text = feat_text,
                                        .release = feat_release,
                                        .warnings = feat_warnings,
                                        .stops = 1,
                                        .exp_data = AL_EXP_DATA_VAL,
                                        .exp_paths = feat_exp_paths,
                                        .exp_input = feat_exp_input,
                                        .results = AL_RESULTS_SAE_FEATURES};

static int run_feat(int argc, char **argv) {
    return al_drive_main(&al_an_sae_features, argc, argv);
}
