/* store_analysis.c -- analysis results into rows (see store_analysis.h).
 *
 * The writers only translate: every value comes from the result struct,
 * so the database holds exactly what the analysis computed and the same
 * rows whether a command or an experiment ran it. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/store_analysis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- scores */

int al_store_put_scores(al_store *s, int64_t run, int64_t mid, const al_scores_result *r,
                        al_err *e) {
    const al_probe_scores *ps = &r->probe;
    for (int l = 0; l < r->L; l++)
        for (int h = 0; h < r->H; h++) {
            int i = l * r->H + h;
            if (al_store_put_head_score(s, run, mid, l, h, "induction", ps->induction[i], e) ||
                al_store_put_head_score(s, run, mid, l, h, "duplicate_token",
                                        ps->duplicate_token[i], e) ||
                al_store_put_head_score(s, run, mid, l, h, "prev_token", ps->prev_token[i], e) ||
                al_store_put_head_score(s, run, mid, l, h, "induction_all", ps->induction_all[i],
                                        e))
                return -1;
            if (r->have_text && !r->off[i] &&
                (al_store_put_head_score(s, run, mid, l, h, "copying_ablation", r->copying[i], e) ||
                 al_store_put_head_score(s, run, mid, l, h, "copying_ablation_excess", r->excess[i],
                                         e)))
                return -1;
        }
    if (r->ci) { /* each probe score's interval over the probe's sequences */
        static const char *const names[4] = {"induction", "duplicate_token", "prev_token",
                                             "induction_all"};
        const double *vals[4] = {ps->induction, ps->duplicate_token, ps->prev_token,
                                 ps->induction_all};
        int LH = r->L * r->H;
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < LH; i++)
                if (al_store_put_interval(s, run, mid, i / r->H, i % r->H, -1, names[k], vals[k][i],
                                          &r->ci[k * LH + i], r->ci_level, r->ci_n, r->ci_boot, e))
                    return -1;
        if (al_store_put_interval(s, run, mid, -1, -1, -1, "icl_gain", ps->icl_gain, &r->ci[4 * LH],
                                  r->ci_level, r->ci_n, r->ci_boot, e))
            return -1;
        /* copying_ablation's, over the validation windows */
        for (int i = 0; r->have_text && r->copying_ci && i < LH; i++)
            if (!r->off[i] &&
                al_store_put_interval(s, run, mid, i / r->H, i % r->H, -1, "copying_ablation",
                                      r->copying[i], &r->copying_ci[i], r->ci_level, r->copying_n,
                                      r->ci_boot, e))
                return -1;
    }
    for (int l = 0; l < r->L; l++)
        if (al_store_put_layer_score(s, run, mid, l, "induction_sum", ps->layer_induction[l], e) ||
            al_store_put_layer_score(s, run, mid, l, "induction_all_sum",
                                     ps->layer_induction_all[l], e))
            return -1;
    struct {
        const char *k;
        double v;
        int text;
    } ms[] = {{"icl_gain", ps->icl_gain, 0},
              {"probe_loss_first", ps->loss_first, 0},
              {"probe_loss_second", ps->loss_second, 0},
              {"icl_score", r->icl_score, 1},
              {"icl_score_se", r->icl_se, 1},
              {"icl_loss_early", r->icl_early, 1},
              {"icl_loss_late", r->icl_late, 1},
              {"val_loss", r->val_loss, 1},
              {"val_loss_copy", r->val_loss_copy, 1},
              {"copy_fraction", r->copy_fraction, 1},
              {"heads_off", r->n_off, 0}};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        if ((!ms[i].text || r->have_text) &&
            al_store_put_model_score(s, run, mid, ms[i].k, ms[i].v, e))
            return -1;
    return 0;
}

/* A path's interval (path patching's effect, attribution patching's
 * edge estimate): the receiver's layer and head (-1: direct), the
 * sender's index as pos, the channel in the metric's name
 * "<prefix>_<channel>". */
static int put_edge_interval(al_store *s, int64_t run, int64_t mid, const char *prefix, int c,
                             int recv_layer, int recv_head, int snd, double v,
                             const al_interval *iv, double level, int n, int boot, al_err *e) {
    char metric[48];
    snprintf(metric, sizeof metric, "%s_%s", prefix, al_paths_channel_name(c));
    return al_store_put_interval(s, run, mid, recv_layer, recv_head, snd, metric, v, iv, level, n,
                                 boot, e);
}

/* ---------------------------------------------------------- ablate */

int al_store_put_ablate(al_store *s, int64_t run, int64_t mid, const al_ablate_result *r,
                        al_err *e) {
    int LH = r->L * r->H;
    const char *method = al_abl_method_name(r->method);
    al_ablation_row base = {method, "none", "", 0, r->clean_loss, 0, 0, r->clean_delta_probe, NAN};
    if (al_store_put_ablation(s, run, mid, &base, NULL, e)) return -1;
    size_t cap = (size_t)LH * 12 + 1; /* "l.h," per head, ints of <= 5 digits */
    char *heads = al_malloc(cap, 1, e);
    if (!heads) return -1;
    int rc = 0;
    for (int k = 0; k < r->n && !rc; k++) {
        const al_ablate_config *c = &r->c[k];
        al_heads_format(r->sets + (size_t)k * LH, r->L, r->H, 1, heads, cap);
        al_ablation_row row = {method,        c->kind,       heads,          c->n_heads,   c->loss,
                               c->delta_loss, c->delta_copy, c->delta_probe, c->inter_loss};
        int64_t id;
        rc = al_store_put_ablation(s, run, mid, &row, &id, e);
        /* its intervals, keyed by the row (pos = ablation_id) and, for a
         * single head, its layer and head; named as the row's columns */
        static const char *const metric[4] = {"delta_loss", "delta_loss_copy", "delta_loss_probe",
                                              "interaction"};
        const double val[4] = {c->delta_loss, c->delta_copy, c->delta_probe, c->inter_loss};
        const int ci[4] = {AL_ABL_CI_LOSS, AL_ABL_CI_COPY, AL_ABL_CI_PROBE, AL_ABL_CI_INTER_LOSS};
        const int nitems[4] = {r->ci_n_text, r->ci_n_text, r->ci_n_probe, r->ci_n_text};
        int l = c->kind[0] == 's' && c->n_heads == 1 && c->a >= 0 ? c->a / r->H : -1;
        for (int q = 0; q < 4 && !rc && r->ci_n_text; q++)
            if (q < 3 || c->b >= 0)
                rc = al_store_put_interval(s, run, mid, l, l < 0 ? -1 : c->a % r->H, (int)id,
                                           metric[q], val[q], &c->ci[ci[q]], r->ci_level, nitems[q],
                                           r->ci_boot, e);
    }
    free(heads);
    return rc;
}

/* ----------------------------------------------------------- prune */

int al_store_put_prune(al_store *s, int64_t run, int64_t mid, const al_prune_run_result *r,
                       al_err *e) {
    int L = r->L, H = r->H, LH = L * H;
    const char *method = al_prune_method_name(r->method);
    size_t cap = (size_t)LH * 12 + 1;
    char *mask = al_malloc(cap, 1, e);
    if (!mask) return -1;
    for (int k = 0; k < r->p.n_steps; k++) {
        const al_prune_step *st = &r->p.steps[k];
        al_heads_format(r->p.removal_off + (size_t)k * LH, L, H, 0, mask, cap);
        al_pruning_row row = {method,         st->step, st->layer,      st->head, st->heads_left,
                              st->importance, st->loss, st->delta_loss, mask};
        if (al_store_put_pruning_step(s, run, mid, &row, e)) {
            free(mask);
            return -1;
        }
    }
    free(mask);
    /* Michel et al.'s head importance of the full model, beside the other
     * per-head scores (head_summary.gradient_importance) */
    if (r->method == AL_PRUNE_GRADIENT)
        for (int i = 0; i < LH; i++)
            if (al_store_put_head_score(s, run, mid, i / H, i % H, "gradient_importance",
                                        r->p.importance0[i], e))
                return -1;
    return 0;
}

/* -------------------------------------------------------- circuits */

size_t al_store_token_str(const al_tokenizer *tok, int id, char *buf, size_t cap) {
    if (tok && id < al_tok_vocab_size(tok)) return al_tok_display(tok, id, buf, cap);
    int n = snprintf(buf, cap, "#%d", id);
    return n < 0 ? 0 : (size_t)n;
}

double al_store_mean_offdiag(const double *a, int H) {
    double s = 0;
    for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++)
            if (i != j) s += a[i * H + j];
    return H > 1 ? s / (H * (H - 1)) : 0;
}

typedef struct ctx {
    al_store *st;
    int64_t run, model;
    const al_tokenizer *tok;
} ctx;

static int put_head(const ctx *c, const al_circ_result *r, const al_circ_head *h, al_err *e) {
    struct {
        const char *name;
        double v;
    } m[] = {
        {"qk_rank", h->qk_rank},
        {"ov_rank", h->ov_rank},
        {"qk_effective_rank", h->qk_eff_rank},
        {"ov_effective_rank", h->ov_eff_rank},
        {"qk_stable_rank", h->qk_stable_rank},
        {"ov_stable_rank", h->ov_stable_rank},
        {"qk_fro", h->qk_fro},
        {"ov_fro", h->ov_fro},
        {"copying_eigen", h->copying_eigen},
        {"copying_top1", h->copying_top1},
        {"qk_top1_self", h->qk_top1_self},
        {"pos_prev_token", h->pos_prev_token},
    };
    int L = h->layer, H = h->head;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (al_store_put_head_score(c->st, c->run, c->model, L, H, m[i].name, m[i].v, e)) return -1;
    for (int i = 0; i < r->D; i++)
        if (al_store_put_singular_value(c->st, c->run, c->model, L, H, "qk", i, h->qk_sv[i], e) ||
            al_store_put_singular_value(c->st, c->run, c->model, L, H, "ov", i, h->ov_sv[i], e) ||
            al_store_put_eigenvalue(c->st, c->run, c->model, L, H, "ov_full", i, h->eig_re[i],
                                    h->eig_im[i], e))
            return -1;
    for (int i = 0; i < h->n_tri; i++) {
        const al_trigram *t = &h->tri[i];
        char sa[128], sb[128], sc[128];
        al_trigram_row row = {i + 1,
                              t->a,
                              t->b,
                              t->c,
                              sa,
                              sb,
                              sc,
                              al_store_token_str(c->tok, t->a, sa, sizeof sa),
                              al_store_token_str(c->tok, t->b, sb, sizeof sb),
                              al_store_token_str(c->tok, t->c, sc, sizeof sc),
                              t->qk,
                              t->ov,
                              t->score};
        if (al_store_put_skip_trigram(c->st, c->run, c->model, L, H, &row, e)) return -1;
    }
    return 0;
}

static int put_layer(const ctx *c, int l, const al_circ_layer *ly, int H, al_err *e) {
    const char *spaces[3] = {"qk", "v", "o"};
    const double *ov[3] = {ly->ov_qk, ly->ov_v, ly->ov_o};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < H; j++)
                if (al_store_put_head_overlap(c->st, c->run, c->model, l, spaces[s], i, j,
                                              ov[s][i * H + j], e))
                    return -1;
    struct {
        const char *name;
        double v;
    } m[] = {{"read_qk_rank", ly->rank_qk},
             {"read_v_rank", ly->rank_v},
             {"write_o_rank", ly->rank_o},
             {"mean_overlap_qk", al_store_mean_offdiag(ly->ov_qk, H)},
             {"mean_overlap_v", al_store_mean_offdiag(ly->ov_v, H)},
             {"mean_overlap_o", al_store_mean_offdiag(ly->ov_o, H)}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (al_store_put_layer_score(c->st, c->run, c->model, l, m[i].name, m[i].v, e)) return -1;
    return 0;
}

int al_store_put_circuits(al_store *s, int64_t run_id, int64_t model_id, const al_circ_result *r,
                          const al_tokenizer *tok, al_err *e) {
    ctx c = {s, run_id, model_id, tok};
    for (int i = 0; i < r->L * r->H; i++)
        if (put_head(&c, r, &r->heads[i], e)) return -1;
    for (int l = 0; l < r->L; l++)
        if (put_layer(&c, l, &r->layers[l], r->H, e)) return -1;
    for (int i = 0; i < r->n_comp; i++) {
        const al_circ_comp *p = &r->comp[i];
        for (int k = 0; k < AL_COMP_N; k++)
            if (al_store_put_composition(s, run_id, model_id, al_comp_names[k], p->l1, p->h1, p->l2,
                                         p->h2, p->score[k], r->base_mean[k], r->base_sd[k], e))
                return -1;
    }
    return 0;
}

/* ---------------------------------------------------------- patching */

/* The task's fingerprint as patching_runs stores it. */
static void task_hash(const al_pairs *t, char hex[17]) {
    snprintf(hex, 17, "%016llx", (unsigned long long)al_pairs_hash(t));
}

int al_store_put_patch(al_store *s, int64_t run, int64_t mid, const al_pairs *t,
                       const al_patch_result *r, al_err *e) {
    const char *dir = al_patch_direction_name(r->direction), *task = t->task;
    const char *comp = al_patch_component_name(r->component);
    char hex[17];
    task_hash(t, hex);
    al_patching_run_row pr = {task, dir, comp, r->N, r->T, r->m_clean, r->m_corr, r->seconds, hex};
    if (al_store_put_patching_run(s, run, mid, &pr, e)) return -1;
    for (int k = 0; k < r->n; k++) {
        /* the grids of patch.h: resid (L, T), head (L, H), the rest (L·H, T) */
        int row = k / r->cols, col = k % r->cols;
        al_patching_row pw = {task, dir, comp, row, -1, -1, r->effect[k], r->metric[k]};
        if (r->component == AL_PATCH_RESID)
            pw.pos = col;
        else if (r->component == AL_PATCH_HEAD)
            pw.head = col;
        else
            pw.layer = row / r->H, pw.head = row % r->H, pw.pos = col;
        if (al_store_put_patching(s, run, mid, &pw, e)) return -1;
        /* the effect's interval over the pairs, keyed as the patching row */
        char metric[48];
        snprintf(metric, sizeof metric, "effect_%s", comp);
        if (r->effect_ci &&
            al_store_put_interval(s, run, mid, pw.layer, pw.head, pw.pos, metric, r->effect[k],
                                  &r->effect_ci[k], r->ci_level, r->ci_n, r->ci_boot, e))
            return -1;
    }
    return 0;
}

int al_store_put_paths(al_store *s, int64_t run, int64_t mid, const al_pairs *t,
                       const al_paths_result *r, al_err *e) {
    const char *dir = al_patch_direction_name(r->direction), *task = t->task;
    char hex[17];
    task_hash(t, hex);
    al_patching_run_row pr = {task, dir, NULL, r->N, r->T, r->m_clean, r->m_corr, r->seconds, hex};
    if (al_store_put_patching_run(s, run, mid, &pr, e)) return -1;
    char sender[32];
    int H = r->H, W = al_paths_width(r->L, H);
    for (int c = 0; c < 4; c++)
        for (int snd = 0; snd < r->n_senders; snd++)
            for (int h = 0; h < (c == 3 ? 1 : r->n_recv); h++) {
                if (!al_paths_exists(r->L, H, c, snd, h)) continue; /* a later sender */
                size_t i = ((size_t)c * r->n_senders + snd) * W + h;
                al_path_patching_row pw = {task,
                                           dir,
                                           al_paths_sender_name(H, snd, sender, sizeof sender),
                                           c == 3 ? -1 : h / H + 1,
                                           c == 3 ? -1 : h % H,
                                           al_paths_channel_name(c),
                                           r->effect[i],
                                           r->metric[i]};
                if (al_store_put_path_patching(s, run, mid, &pw, e)) return -1;
                if (r->effect_ci &&
                    put_edge_interval(s, run, mid, "path_effect", c, pw.receiver_layer,
                                      pw.receiver_head, snd, r->effect[i], &r->effect_ci[i],
                                      r->ci_level, r->ci_n, r->ci_boot, e))
                    return -1;
            }
    return 0;
}

/* ---------------------------------------------------------- attribute */

/* The grids of attrpatch.h as rows: head (L, H), head_pos (L·H, T), and
 * the edges in path_patching's layout (direct: receiver NULL). */
static int put_attrpatch(al_store *s, int64_t run, int64_t mid, const char *task,
                         const al_attrpatch_result *ap, al_err *e) {
    const char *dir = al_patch_direction_name(ap->direction);
    int LH = ap->L * ap->H;
    for (int g = AL_AP_HEAD; g <= AL_AP_HEAD_POS; g++) {
        int n = g == AL_AP_HEAD ? LH : LH * ap->T;
        const double *est = g == AL_AP_HEAD ? ap->head : ap->head_pos;
        const double *act = g == AL_AP_HEAD ? ap->act_head : ap->act_head_pos;
        for (int k = 0; k < n; k++) {
            int lh = g == AL_AP_HEAD ? k : k / ap->T;
            al_attribution_patching_row w =
                {task,       dir,        al_attrpatch_grid_name(g),
                 lh / ap->H, lh % ap->H, g == AL_AP_HEAD ? -1 : k % ap->T,
                 NULL,       -1,         -1,
                 NULL,       est[k],     ap->compared ? act[k] : NAN};
            if (al_store_put_attribution_patching(s, run, mid, &w, e)) return -1;
            /* a head's interval (the grid head_pos has none) */
            if (g == AL_AP_HEAD && ap->head_ci &&
                al_store_put_interval(s, run, mid, w.layer, w.head, -1, "attrpatch_head", est[k],
                                      &ap->head_ci[k], ap->ci_level, ap->ci_n, ap->ci_boot, e))
                return -1;
        }
    }
    char sender[32];
    int H = ap->H, W = al_paths_width(ap->L, H);
    for (int c = 0; c < 4; c++)
        for (int snd = 0; snd < ap->n_senders; snd++)
            for (int h = 0; h < (c == 3 ? 1 : ap->n_recv); h++) {
                if (!al_paths_exists(ap->L, H, c, snd, h)) continue; /* a later sender */
                size_t i = ((size_t)c * ap->n_senders + snd) * W + h;
                al_attribution_patching_row w = {task,
                                                 dir,
                                                 al_attrpatch_grid_name(AL_AP_EDGE),
                                                 -1,
                                                 -1,
                                                 -1,
                                                 al_paths_sender_name(H, snd, sender,
                                                                      sizeof sender),
                                                 c == 3 ? -1 : h / H + 1,
                                                 c == 3 ? -1 : h % H,
                                                 al_paths_channel_name(c),
                                                 ap->edge[i],
                                                 ap->compared ? ap->act_edge[i] : NAN};
                if (al_store_put_attribution_patching(s, run, mid, &w, e)) return -1;
                if (ap->edge_ci &&
                    put_edge_interval(s, run, mid, "attrpatch_edge", c, w.receiver_layer,
                                      w.receiver_head, snd, ap->edge[i], &ap->edge_ci[i],
                                      ap->ci_level, ap->ci_n, ap->ci_boot, e))
                    return -1;
            }
    for (int g = 0; ap->compared && g < AL_AP_NGRID; g++) {
        const al_agreement *a = &ap->agree[g];
        if (al_store_put_attribution_agreement(s, run, mid, al_attrpatch_grid_name(g), a->n,
                                               a->pearson, a->spearman, a->top5, e))
            return -1;
    }
    return 0;
}

int al_store_put_attribute(al_store *s, int64_t run, int64_t mid, const al_pairs *t,
                           const al_attr_result *r, const al_attrpatch_result *ap,
                           const al_tokenizer *tok, al_err *e) {
    const char *task = t->task;
    char hex[17], name[64];
    task_hash(t, hex);
    al_attribution_run_row ar = {task,
                                 t->N,
                                 t->T,
                                 r->n_items,
                                 r->logit_diff ? "logit_diff" : "logprob",
                                 r->metric,
                                 r->loss,
                                 {NAN, NAN, NAN},
                                 {NAN, NAN, NAN},
                                 ap ? al_patch_direction_name(ap->direction) : NULL,
                                 ap ? ap->m_clean : NAN,
                                 ap ? ap->m_corr : NAN,
                                 r->seconds,
                                 ap ? ap->seconds : NAN,
                                 ap && ap->compared ? ap->seconds_patch : NAN,
                                 hex,
                                 r->centred};
    for (int k = 0; r->n_terms && k < 3; k++)
        ar.kind_value[k] = r->kind_value[k], ar.kind_dloss[k] = r->kind_dloss[k];
    if (al_store_put_attribution_run(s, run, mid, &ar, e)) return -1;
    /* the intervals (score_intervals): metric "metric", "dla:<component>"
     * and "term:<term>", so that a join on the name finds each row's */
    char key[80];
    if (r->ci && al_store_put_interval(s, run, mid, -1, -1, -1, "metric", r->metric, &r->ci[0],
                                       r->ci_level, r->ci_n, r->ci_boot, e))
        return -1;
    for (int c = 0; c < r->n_comp; c++) {
        al_attr_comp_name(r->L, r->H, c, name, sizeof name);
        if (al_store_put_logit_attribution(s, run, mid, task, name, -1, r->dla[c], r->n_items, e))
            return -1;
        snprintf(key, sizeof key, "dla:%s", name);
        if (r->ci && al_store_put_interval(s, run, mid, -1, -1, -1, key, r->dla[c], &r->ci[1 + c],
                                           r->ci_level, r->ci_n, r->ci_boot, e))
            return -1;
        for (int p = 0; p < r->T; p++)
            if (r->pos_items[p] > 0 &&
                al_store_put_logit_attribution(s, run, mid, task, name, p,
                                               r->dla_pos[(size_t)c * r->T + p], r->pos_items[p],
                                               e))
                return -1;
    }
    static const char *const kinds[3] = {"direct", "head", "virtual"};
    for (int k = 0; k < r->n_terms; k++) {
        /* layer, head: the term's head (virtual: the receiver); src_head:
         * the virtual head's sender over all layers, l0·H + h0 (h0 for a
         * 2-layer model); all NULL for the direct term and the remainder */
        int layer, head, src;
        al_attr_term_kind kd = al_attr_term_heads(r->L, r->H, k, &layer, &head, &src);
        al_path_term_row w = {task,
                              al_attr_term_name(r->L, r->H, k, name, sizeof name),
                              kinds[kd],
                              layer,
                              head,
                              src,
                              r->term_value[k],
                              r->term_dloss[k]};
        if (al_store_put_path_term(s, run, mid, &w, e)) return -1;
        snprintf(key, sizeof key, "term:%s", w.term);
        if (r->ci &&
            al_store_put_interval(s, run, mid, -1, -1, -1, key, r->term_value[k],
                                  &r->ci[1 + r->n_comp + k], r->ci_level, r->ci_n, r->ci_boot, e))
            return -1;
    }
    for (int l = 0; l <= r->L; l++)
        if (al_store_put_logit_lens(s, run, mid, task, l, r->lens_loss[l], r->lens_acc[l], e))
            return -1;
    for (int p = 0; t->N > 0 && p < t->len[0]; p++) {
        int id = t->clean[p];
        size_t n = al_store_token_str(tok, id, name, sizeof name);
        if (al_store_put_attribution_token(s, run, p, id, name, n, e)) return -1;
    }
    return ap ? put_attrpatch(s, run, mid, task, ap, e) : 0;
}

/* ---------------------------------------------------------- discover */

int al_store_put_discover(al_store *s, int64_t run, int64_t mid, const al_pairs *t,
                          const al_discover_opts *o, const al_discover_result *r, int index,
                          al_err *e) {
    int acdc = strcmp(o->method, "acdc") == 0;
    double tau = acdc ? o->tau : NAN;
    char hex[17], sender[32];
    task_hash(t, hex);
    al_circuit_run_row cr =
        {t->task,       o->method,       o->metric,  tau,        acdc ? NAN : o->recover,
         r->n_edges,    r->n_kept,       r->m_clean, r->m_corr,  r->m_circuit,
         r->kl_circuit, r->faithfulness, r->evals,   r->seconds, hex};
    if (al_store_put_circuit_run(s, run, mid, &cr, e) ||
        al_store_put_interval(s, run, mid, -1, -1, index ? index : -1, "faithfulness",
                              r->faithfulness, &r->faith_ci, r->ci_level, r->ci_n, r->ci_boot, e))
        return -1;
    for (int k = 0; k < r->n_edges; k++) {
        al_edge ed;
        if (al_graph_edge(r->L, r->H, k, &ed))
            return al_errf(e, "circuit_edges: edge %d is not in the graph", k);
        al_circuit_edge_row er = {o->method,
                                  tau,
                                  k,
                                  al_graph_sender_name(r->H, ed.sender, sender, sizeof sender),
                                  ed.recv_layer,
                                  ed.recv_head,
                                  al_graph_channel_name(ed.channel),
                                  r->score[k],
                                  r->kept[k] != 0};
        if (al_store_put_circuit_edge(s, run, mid, &er, e)) return -1;
    }
    return 0;
}

int al_store_put_stability(al_store *s, int64_t run, int64_t mid, const al_discover_result *r,
                           const al_discover_stability *st, al_err *e) {
    al_interval j = {st->jaccard_sd / sqrt((double)st->n), NAN, NAN};
    if (al_store_put_interval(s, run, mid, -1, -1, -1, "jaccard", st->jaccard_mean, &j, NAN, st->n,
                              st->n, e))
        return -1;
    char nm[64], key[80];
    for (int k = 0; k < st->n_edges && k < r->n_edges; k++) {
        double f = st->freq[k];
        if (!(f > 0 || r->kept[k])) continue;
        al_interval iv = {sqrt(f * (1 - f) / st->n), NAN, NAN};
        snprintf(key, sizeof key, "inclusion:%s", al_graph_edge_name(r->L, r->H, k, nm, sizeof nm));
        if (al_store_put_interval(s, run, mid, -1, -1, -1, key, f, &iv, NAN, st->n, st->n, e))
            return -1;
    }
    return 0;
}
