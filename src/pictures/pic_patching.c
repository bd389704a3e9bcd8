/* pic_patching.c -- the pictures of patching runs (family "patching"):
 * an attnlab patch run's effects per component and an attnlab paths
 * run's effects per sender, receiver and channel. */
#define _POSIX_C_SOURCE 200809L
#include "pictures_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/patch.h"

/* ---------------------------------------------------------- patching */

typedef al_store_patch_run prun;

/* Run --run (else the model's newest finished run of `kind`, "patch" or
 * "paths"), checked (pic_run_checked); its config_json goes with the
 * picture. */
static int patch_run_info(pic *p, const char *kind, prun *r, al_err *e) {
    memset(r, 0, sizeof *r);
    long run = p->o->run_id;
    if (run <= 0 && (al_store_latest_patch_run(p->st, p->model_id, kind, &run, e) ||
                     pic_need_run(p, run, kind, NULL, e)))
        return -1;
    if (al_store_read_patch_run(p->st, run, r, e)) return -1;
    pic_keep(p, r->config, e); /* freed with the picture */
    return pic_run_checked(p, &r->h, kind, strcmp(kind, "patch") == 0 ? "patching" : "paths", e);
}

/* Column labels for positions 0..T-1: "t token" of pair 0's clean
 * sequence, re-made from the run's options (al_patch_task_make) with the
 * model's tokenizer; NULL (position numbers) without a tokenizer or when
 * the task cannot be re-made as it was (a note says why). */
static const char **position_labels(pic *p, const prun *r, al_err *e) {
    if (!p->tok) return NULL;
    al_patch_opts o = al_patch_opts_defaults();
    cJSON *j = r->config ? cJSON_Parse(r->config) : NULL;
    al_patch_opts_from_config(j, &o);
    al_pairs t;
    al_err e2;
    int eot = al_tok_eot(p->tok), bos = eot < p->m.cfg.d_vocab ? eot : -1;
    int rc = al_patch_task_make(&t, &p->m, p->tok, bos, &o, &e2);
    cJSON_Delete(j);
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)(rc ? 0 : al_pairs_hash(&t)));
    if (rc == 0 && (t.T != r->seq_len || t.N != r->n_pairs || strcmp(hex, r->hash) != 0)) {
        al_pairs_free(&t);
        snprintf(e2.msg, sizeof e2.msg,
                 "its pairs are no longer the run's (%d pairs of %d "
                 "tokens, fingerprint %s)",
                 r->n_pairs, r->seq_len, r->hash);
        rc = -1;
    }
    if (rc) {
        pic_note(p, "positions are numbered: the task could not be re-made to label them (%s)",
                 e2.msg);
        fprintf(stderr,
                "attnlab: note: run %ld: positions are numbered: the task could not be "
                "re-made to label them (%s)\n",
                r->h.run, e2.msg);
        return NULL;
    }
    int lo = t.T;
    for (int n = 0; n < t.N; n++) lo = t.len[n] < lo ? t.len[n] : lo;
    if (lo < t.T)
        pic_note(p,
                 "the pairs are %d to %d tokens long: position t is a different token in each "
                 "pair, and the labels are pair 0's",
                 lo, t.T);
    const char **lab = pic_calloc(p, (size_t)t.T, sizeof(char *), e);
    for (int i = 0; lab && i < t.T; i++) {
        char b[LABEL_CAP];
        if (i < t.len[0])
            al_tok_display(p->tok, t.clean[i], b, sizeof b);
        else
            snprintf(b, sizeof b, "(pad)");
        if (!(lab[i] = pic_printf(p, e, "%d %s", i, b))) lab = NULL;
    }
    al_pairs_free(&t);
    return lab;
}

typedef struct patch_cells {
    pic *p;
    float *v;
    int comp, rows, cols, n;
} patch_cells;

static void patch_row(patch_cells *c, const al_store_patching_row *x) {
    int l = (int)x->layer, h = isnan(x->head) ? -1 : (int)x->head,
        pos = isnan(x->pos) ? -1 : (int)x->pos;
    int H = c->p->H, row, col;
    if (c->comp == AL_PATCH_RESID)
        row = l, col = pos;
    else if (c->comp == AL_PATCH_HEAD)
        row = l, col = h;
    else
        row = h < 0 || h >= H ? -1 : l * H + h, col = pos;
    if (row < 0 || row >= c->rows || col < 0 || col >= c->cols) return;
    c->v[(size_t)row * c->cols + col] = (float)x->value;
    c->n++;
}

int pic_draw_patching(pic *p, al_err *e) {
    prun r;
    if (patch_run_info(p, "patch", &r, e)) return -1;
    al_patch_component comp;
    if (al_patch_component_parse(r.component, &comp))
        return al_errf(e, "run %ld: unknown component '%s'", r.h.run, r.component);
    int T = r.seq_len, L = p->L, H = p->H;
    patch_cells c = {.p = p,
                     .comp = comp,
                     .rows = comp == AL_PATCH_RESID || comp == AL_PATCH_HEAD ? L : L * H,
                     .cols = comp == AL_PATCH_HEAD ? H : T};
    if (T < 1 || T > 100000) return al_errf(e, "run %ld: bad sequence length %d", r.h.run, T);
    if (!(c.v = pic_floats(p, (size_t)c.rows * c.cols, e))) return -1;
    for (int i = 0; i < c.rows * c.cols; i++) c.v[i] = NAN;
    al_store_patching_row *rows;
    int n_rows;
    if (al_store_read_patching(p->st, r.h.run, &rows, &n_rows, e) || !pic_keep(p, rows, e))
        return -1;
    for (int i = 0; i < n_rows; i++) patch_row(&c, &rows[i]);
    if (!c.n) return al_errf(e, "run %ld has no patching rows", r.h.run);
    const char **rl = NULL, **cl = NULL;
    if (comp == AL_PATCH_RESID || comp == AL_PATCH_HEAD) {
        rl = pic_calloc(p, (size_t)L, sizeof(char *), e);
        for (int l = 0; rl && l < L; l++)
            if (!(rl[l] =
                      pic_printf(p, e, comp == AL_PATCH_RESID ? "into layer %d" : "layer %d", l)))
                return -1;
        if (!rl) return -1;
    } else if (!(rl = pic_head_labels(p, 0, L, e))) {
        return -1;
    }
    if (comp != AL_PATCH_HEAD) cl = position_labels(p, &r, e);
    al_cscale *cs = pic_scale(p, 0, 1, NAN, NAN, "normalised effect");
    al_cscale_fit(cs, c.v, (size_t)c.rows * c.cols);
    al_panel *q = pic_add_panel(p, AL_PANEL_HEATMAP);
    static const char *const row_titles[] = {"resid",
                                             "layer",
                                             "head",
                                             "head (query input)",
                                             "head (key input)",
                                             "head (value input)",
                                             "head (attention row)"};
    q->hm = (al_hm){.v = c.v,
                    .rows = c.rows,
                    .cols = c.cols,
                    .row_labels = rl,
                    .col_labels = cl,
                    .row_title = row_titles[comp],
                    .col_title = comp == AL_PATCH_HEAD ? "head"
                                 : cl                  ? "position (pair 0's clean token)"
                                                       : "position",
                    .cs = cs,
                    .bar = 1,
                    .annotate = comp == AL_PATCH_HEAD,
                    .cell = comp == AL_PATCH_HEAD ? 34
                            : c.cols <= 128       ? 12
                                                  : 0};
    snprintf(p->title, sizeof p->title, "activation patching: %s, %s (task %s)", r.component,
             r.direction, r.h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_dir_notes(p, r.direction);
    pic_note(p, "M_clean = %.4f, M_corr = %.4f (mean %s over %d pairs)", r.m_clean, r.m_corr,
             strcmp(r.h.task, "induction") == 0 ? "log p of the next token" : "logit difference",
             r.n_pairs);
    pic_note(p, "%s", p->run_txt);
    return 0;
}

typedef struct path_cells {
    pic *p;
    float *v[4]; /* q, k, v: (2+W, W); direct: (2+W, 1) (patch.h's layout, W wide) */
    int W, n;
} path_cells;

/* Sender s of a stored name ("embed", "pos", "l.h"); −1 if unknown. */
static int sender_index(const char *name, int H) {
    if (strcmp(name, "embed") == 0) return 0;
    if (strcmp(name, "pos") == 0) return 1;
    int l, h;
    char end;
    if (sscanf(name, "%d.%d%c", &l, &h, &end) != 2 || l < 0 || h < 0 || h >= H) return -1;
    return 2 + l * H + h;
}

static void path_row(path_cells *c, const al_store_path_row *x) {
    int H = c->p->H, L = c->p->L, W = c->W, ch = -1;
    if (!x->sender || !x->channel) return;
    int s = sender_index(x->sender, H);
    for (int k = 0; k < 4; k++)
        if (strcmp(x->channel, al_paths_channel_name(k)) == 0) ch = k;
    int r = ch == 3 ? 0
            : isnan(x->receiver_head) || isnan(x->receiver_layer)
                ? -1
                : ((int)x->receiver_layer - 1) * H + (int)x->receiver_head;
    int w = ch == 3 ? 1 : W;
    if (ch < 0 || (ch < 3 && (x->receiver_head < 0 || x->receiver_head >= H)) ||
        !al_paths_exists(L, H, ch, s, r))
        return;
    c->v[ch][s * w + r] = (float)x->value;
    c->n++;
}

int pic_draw_paths(pic *p, al_err *e) {
    prun r;
    if (patch_run_info(p, "paths", &r, e)) return -1;
    if (p->L > AL_PATHS_MAX_LAYERS)
        return al_errf(e, "path patching covers models of up to %d layers (%d layers)",
                       AL_PATHS_MAX_LAYERS, p->L);
    int H = p->H, L = p->L, W = al_paths_width(L, H), ns = 2 + W;
    path_cells c = {.p = p, .W = W};
    float *all = pic_floats(p, (size_t)ns * (3 * W + 1), e);
    if (!all) return -1;
    for (int k = 0; k < 4; k++) c.v[k] = all + (size_t)k * ns * W;
    for (int i = 0; i < ns * (3 * W + 1); i++) all[i] = NAN;
    al_store_path_row *rows;
    int n_rows;
    if (al_store_read_path_patching(p->st, r.h.run, &rows, &n_rows, e) || !pic_keep(p, rows, e))
        return -1;
    for (int i = 0; i < n_rows; i++) path_row(&c, &rows[i]);
    if (!c.n) return al_errf(e, "run %ld has no path_patching rows", r.h.run);
    const char **rl = pic_calloc(p, (size_t)ns, sizeof(char *), e);
    /* receivers: the heads of layers 1..L−1, labelled l.h, so the columns
     * group by layer */
    const char **cl = L >= 2 ? pic_head_labels(p, 1, L, e) : NULL;
    static const char *const logits[1] = {"logits"};
    if (!rl || (L >= 2 && !cl)) return -1;
    for (int s = 0; s < ns; s++) {
        char b[32];
        if (!(rl[s] = pic_printf(p, e, "%s", al_paths_sender_name(H, s, b, sizeof b)))) return -1;
    }
    al_cscale *cs = pic_scale(p, 0, 1, NAN, NAN, "normalised effect");
    al_cscale_fit(cs, all, (size_t)ns * (3 * W + 1));
    static const char *const titles[4] = {"into each layer-1 head's queries (q)",
                                          "into each layer-1 head's keys (k)",
                                          "into each layer-1 head's values (v)", "direct"};
    static const char *const deep_titles[3] = {"into each later head's queries (q)",
                                               "into each later head's keys (k)",
                                               "into each later head's values (v)"};
    char col_title[64] = "receiver head";
    if (L > 2) snprintf(col_title, sizeof col_title, "receiver head (layers 1-%d)", L - 1);
    const char *ct = pic_printf(p, e, "%s", col_title);
    if (!ct) return -1;
    for (int k = L >= 2 ? 0 : 3; k < 4; k++) {
        al_panel *q = pic_add_panel(p, AL_PANEL_HEATMAP);
        q->hm = (al_hm){.v = c.v[k],
                        .rows = ns,
                        .cols = k == 3 ? 1 : W,
                        .row_labels = rl,
                        .col_labels = k == 3 ? logits : cl,
                        .title = k < 3 && L > 2 ? deep_titles[k] : titles[k],
                        .row_title = "sender",
                        .col_title = k == 3 ? "receiver" : ct,
                        .cs = cs,
                        .annotate = L <= 2 || W <= 8,
                        .cell = L > 2 && W > 8 ? 22 : 34}; /* wide deep grids: no values */
    }
    p->fig.shared_bar = cs;
    snprintf(p->title, sizeof p->title, "path patching: sender -> receiver, %s (task %s)",
             r.direction, r.h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_dir_notes(p, r.direction);
    pic_note(p, "only the path from the sender to the receiver carries the other run's value; "
                "every other head is frozen");
    if (L > 2)
        pic_note(p, "a grey cell: no such path (the sender's layer is not before the receiver's)");
    pic_note(
        p,
        "an induction circuit: a previous-token head (sender) into an induction head's keys (k)");
    pic_note(p, "M_clean = %.4f, M_corr = %.4f (mean %s over %d pairs); %s", r.m_clean, r.m_corr,
             strcmp(r.h.task, "induction") == 0 ? "log p of the next token" : "logit difference",
             r.n_pairs, p->run_txt);
    return 0;
}
