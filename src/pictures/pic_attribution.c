/* pic_attribution.c -- the pictures of an attnlab attribute run (family
 * "attribution"): direct logit attribution per component and position,
 * the path expansion's terms as bars, and attribution patching against
 * actual patching. */
#define _POSIX_C_SOURCE 200809L
#include "pictures_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"

/* -------------------------------------------------------- attribution */

typedef al_store_attr_run arun;

/* Run --run (else the model's newest finished attribute run meeting
 * need; words say what it needs), checked. */
static int attr_run_info(pic *p, al_attr_need need, const char *words, arun *r, al_err *e) {
    memset(r, 0, sizeof *r);
    long run = p->o->run_id;
    if (run <= 0 && (al_store_latest_attribute_run(p->st, p->model_id, need, &run, e) ||
                     pic_need_run(p, run, "attribute", words, e)))
        return -1;
    if (al_store_read_attr_run(p->st, run, r, e)) return -1;
    return pic_run_checked(p, &r->h, "attribute", p->o->what, e);
}

/* What the run's values are contributions to. */
static const char *metric_words(const arun *r) {
    return strcmp(r->metric_kind, "logit_diff") == 0 ? "the logit difference (answer - wrong token)"
           : r->centred ? "the correct token's logit less the mean logit (W_U centred)"
                        : "the correct token's logit";
}

/* Token text as a label: spaces as ␣ and control bytes as \xNN, as the
 * tokenizer's display form shows them (the text is the run's, unchecked). */
static void token_text(const char *s, char *buf, size_t cap) {
    size_t o = 0;
    for (; *s && o + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == ' ')
            o += (size_t)snprintf(buf + o, cap - o, "\xe2\x90\xa3");
        else if (c < 0x20 || c == 0x7F)
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02X", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = 0;
}

typedef struct dla_cells {
    pic *p;
    float *v;
    const char **lab; /* (cols) */
    int rows, cols, n;
} dla_cells;

/* The row of a component beyond the heads (LayerNorm or bias models,
 * attribute.h): b_O_l at 2 + L·H + l, const after them; −1 otherwise. */
static int dla_bias_row(const pic *p, const char *t0) {
    int l, k = 0, LH = p->L * p->H;
    if (!strcmp(t0, "const")) return 2 + LH + p->L;
    if (sscanf(t0, "b_O_%d%n", &l, &k) == 1 && !t0[k] && l >= 0 && l < p->L) return 2 + LH + l;
    return -1;
}

/* component, pos, value -> the cell (row: embed, pos, then heads, then
 * each layer's b_O and the constant when the run has them). */
static void dla_row(dla_cells *c, const al_store_dla_row *x) {
    const char *end;
    const char *t0 = x->component;
    int row = !t0 ? -1 : strcmp(t0, "embed") == 0 ? 0 : strcmp(t0, "pos") == 0 ? 1 : -1;
    if (row < 0 && t0) {
        int k = pic_parse_head(c->p, t0, &end);
        row = k >= 0 && !*end ? 2 + k : dla_bias_row(c->p, t0);
    }
    int col = isnan(x->pos) ? -1 : (int)x->pos;
    if (row < 0 || row >= c->rows || col < 0 || col >= c->cols) return;
    c->v[(size_t)row * c->cols + col] = (float)x->value;
    c->n++;
}

static int dla_token(dla_cells *c, const al_store_token_row *x, al_err *e) {
    int pos = isnan(x->pos) ? -1 : (int)x->pos;
    if (pos < 0 || pos >= c->cols) return 0;
    char b[LABEL_CAP];
    token_text(x->text ? x->text : "", b, sizeof b);
    return (c->lab[pos] = pic_printf(c->p, e, "%d %s", pos, b)) ? 0 : -1;
}

int pic_draw_dla(pic *p, al_err *e) {
    arun r;
    if (attr_run_info(p, AL_ATTR_ANY, NULL, &r, e)) return -1;
    int T = r.seq_len;
    if (T < 1 || T > 100000) return al_errf(e, "run %ld: bad sequence length %d", r.h.run, T);
    dla_cells c = {.p = p, .rows = 2 + p->L * p->H, .cols = T};
    char top[256] = "";
    al_store_dla_row *rows;
    int n_rows;
    if (al_store_read_dla(p->st, r.h.run, &rows, &n_rows, e) || !pic_keep(p, rows, e)) return -1;
    int bias_rows = 0; /* a LayerNorm or bias model's b_O_l and const */
    for (int i = 0; i < n_rows && !bias_rows; i++)
        bias_rows = rows[i].component && dla_bias_row(p, rows[i].component) >= 0;
    if (bias_rows) c.rows += p->L + 1;
    if (!(c.v = pic_floats(p, (size_t)c.rows * T, e))) return -1;
    for (int i = 0; i < c.rows * T; i++) c.v[i] = NAN;
    for (int i = 0; i < n_rows; i++) dla_row(&c, &rows[i]);
    if (!c.n) return al_errf(e, "run %ld has no per-position logit attribution rows", r.h.run);
    al_store_token_row *toks;
    if (!(c.lab = pic_calloc(p, (size_t)T, sizeof(char *), e)) ||
        al_store_read_attr_tokens(p->st, r.h.run, &toks, &n_rows, e) || !pic_keep(p, toks, e))
        return -1;
    for (int i = 0; i < n_rows; i++)
        if (dla_token(&c, &toks[i], e)) return -1;
    /* the largest mean contributions over every item, for a note */
    if (al_store_read_dla_top(p->st, r.h.run, &rows, &n_rows, e) || !pic_keep(p, rows, e))
        return -1;
    for (int i = 0; i < n_rows; i++) {
        size_t n = strlen(top);
        snprintf(top + n, sizeof top - n, "%s%s %+.3f", n ? ", " : "",
                 rows[i].component ? rows[i].component : "?", rows[i].value);
    }
    int labelled = 0;
    for (int t = 0; t < T; t++) labelled += c.lab[t] != NULL;
    for (int t = 0; labelled && t < T; t++) /* a token the run did not name: its position */
        if (!c.lab[t] && !(c.lab[t] = pic_printf(p, e, "%d", t))) return -1;
    const char **rl = pic_calloc(p, (size_t)c.rows, sizeof(char *), e),
               **hl = pic_head_labels(p, 0, p->L, e);
    if (!rl || !hl) return -1;
    rl[0] = "embed", rl[1] = "pos";
    for (int k = 0; k < p->L * p->H; k++) rl[2 + k] = hl[k];
    for (int l = 0; bias_rows && l <= p->L; l++)
        if (!(rl[2 + p->L * p->H + l] = l < p->L ? pic_printf(p, e, "b_O_%d", l) : "const"))
            return -1;
    al_cscale *cs = pic_scale(p, 0, 1, NAN, NAN, "mean contribution to the metric logit");
    al_cscale_fit(cs, c.v, (size_t)c.rows * T);
    al_panel *q = pic_add_panel(p, AL_PANEL_HEATMAP);
    q->hm = (al_hm){.v = c.v,
                    .rows = c.rows,
                    .cols = T,
                    .row_labels = rl,
                    .col_labels = labelled ? c.lab : NULL,
                    .row_title = "component",
                    .col_title = labelled ? "position (the first prompt's token)" : "position",
                    .cs = cs,
                    .bar = 1,
                    .cell = T <= 128 ? 14 : 0};
    snprintf(p->title, sizeof p->title,
             "direct logit attribution: mean contribution to %s "
             "(task %s)",
             strcmp(r.metric_kind, "logit_diff") == 0 ? "the logit difference"
             : r.centred ? "the correct token's logit less the mean logit"
                         : "the correct token's logit",
             r.h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p,
             "each cell: the mean contribution of a component's output at that position to %s, "
             "over the task's items there; a column sums to the mean metric",
             metric_words(&r));
    pic_note(p, "red raises it, blue lowers it; grey: no item at that position");
    if (top[0]) pic_note(p, "largest mean contributions over all %d items: %s", r.n_items, top);
    pic_note(p, "%s", p->run_txt);
    return 0;
}

/* Path terms in bar order: direct, layer-0 heads, layer-1 heads' paths
 * from embed + pos, virtual heads (by their layer-0 head, then layer-1). */
enum { TG_DIRECT, TG_HEAD0, TG_HEAD1, TG_VIRTUAL, TG_N };
#define TERMS_LABELLED 5 /* virtual terms named: the largest |Δloss| */

typedef struct term_bars {
    pic *p;
    double *v;
    int *group;
    const char **lab;
    int n, cap;
} term_bars;

static int term_row(term_bars *b, const al_store_term_row *x, al_err *e) {
    if (b->n >= b->cap || !x->term || !x->kind) return 0;
    int g = strcmp(x->kind, "direct") == 0 ? TG_DIRECT
            : strcmp(x->kind, "head") == 0 ? (x->layer == 1 ? TG_HEAD1 : TG_HEAD0)
                                           : TG_VIRTUAL;
    b->v[b->n] = x->dloss;
    b->group[b->n] = g;
    if (!(b->lab[b->n] = pic_printf(b->p, e, "%s", x->term))) return -1;
    b->n++;
    return 0;
}

/* Deep models (3 layers and more): 1 + L·H + H²·L(L−1)/2 + 1 terms (418
 * at 4 × 8) would be bars too thin to read, and almost all of them are
 * near 0: the TERMS_SHOWN largest by |Δloss|, in term order, each named,
 * and a note on the rest. */
#define TERMS_SHOWN 40
enum { TD_DIRECT, TD_HEAD, TD_VIRTUAL, TD_CHAINS, TD_N };

static int draw_terms_deep(pic *p, const arun *r, const al_store_term_row *rows, int n_rows,
                           al_err *e) {
    double *v = pic_calloc(p, (size_t)n_rows, sizeof(double), e);
    int *group = pic_calloc(p, (size_t)n_rows, sizeof(int), e);
    const char **lab = pic_calloc(p, (size_t)n_rows, sizeof(char *), e);
    char *keep = pic_calloc(p, (size_t)n_rows, 1, e);
    if (!v || !group || !lab || !keep) return -1;
    int n_fin = 0, shown = 0, n = 0;
    for (int i = 0; i < n_rows; i++)
        n_fin += rows[i].term && rows[i].kind && isfinite(rows[i].dloss);
    for (; shown < TERMS_SHOWN && shown < n_fin; shown++) { /* the largest |Δloss| first */
        int best = -1;
        for (int i = 0; i < n_rows; i++)
            if (rows[i].term && rows[i].kind && isfinite(rows[i].dloss) && !keep[i] &&
                (best < 0 || fabs(rows[i].dloss) > fabs(rows[best].dloss)))
                best = i;
        keep[best] = 1;
    }
    double rest_max = 0, rest_sum = 0;
    for (int i = 0; i < n_rows; i++) {
        const al_store_term_row *x = &rows[i];
        if (!keep[i]) {
            if (x->term && x->kind && isfinite(x->dloss)) {
                rest_max = fmax(rest_max, fabs(x->dloss));
                rest_sum += fabs(x->dloss);
            }
            continue;
        }
        group[n] = strcmp(x->kind, "direct") == 0 ? TD_DIRECT
                   : strcmp(x->kind, "head") == 0 ? TD_HEAD
                   : isnan(x->layer)              ? TD_CHAINS /* the remainder: no head */
                                                  : TD_VIRTUAL;
        v[n] = x->dloss;
        if (!(lab[n] = pic_printf(p, e, "%s", x->term))) return -1;
        n++;
    }
    static const char *const names[TD_N] = {"direct", "heads (from embed+pos)", "virtual heads a>b",
                                            "chains of 3+ heads"};
    al_panel *q = pic_add_panel(p, AL_PANEL_BARS);
    q->bars = (al_bars){.v = v,
                        .n = n,
                        .group = group,
                        .group_names = names,
                        .n_groups = TD_N,
                        .labels = lab,
                        .y_title = "\xce\x94 loss (nats)",
                        .bar_w = 0,
                        .h = 240};
    if (n < n_rows)
        snprintf(p->title, sizeof p->title,
                 "path expansion: loss increase with each term removed, "
                 "the %d largest (task %s)",
                 n, r->h.task);
    else
        snprintf(p->title, sizeof p->title,
                 "path expansion: loss increase with each term removed "
                 "(task %s)",
                 r->h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p,
             "each bar: how much the mean item loss rises when that term alone is subtracted from "
             "the logits (below 0: the model does better without it)");
    if (n < n_rows)
        pic_note(p,
                 "shown: the %d of the %d terms with the largest |\xce\x94 loss|, in term order; "
                 "the other %d are not drawn (each |\xce\x94 loss| at most %.3g, %.3g summed)",
                 n, n_rows, n_rows - n, rest_max, rest_sum);
    pic_note(p, "direct = embed+pos straight to the unembedding; l.h = head l.h reading embed+pos; "
                "a>b = virtual head: head b reading through its values what head a wrote from "
                "embed+pos; chains>=3 = every chain of three or more heads, one term");
    pic_note(p,
             "each kind removed at once: direct %+.3f, heads %+.3f, virtual (chains>=3 "
             "included) %+.3f nats",
             r->kind_dloss[0], r->kind_dloss[1], r->kind_dloss[2]);
    pic_note(p, "%s", p->run_txt);
    return 0;
}

int pic_draw_terms(pic *p, al_err *e) {
    arun r;
    if (attr_run_info(p, AL_ATTR_TERMS, "with a path expansion", &r, e)) return -1;
    if (p->L >= 3) {
        al_store_term_row *rows;
        int n_rows;
        if (al_store_read_path_terms(p->st, r.h.run, &rows, &n_rows, e) || !pic_keep(p, rows, e))
            return -1;
        if (!n_rows)
            return al_errf(e,
                           "run %ld has no path expansion (path_terms is empty: it was turned "
                           "off)",
                           r.h.run);
        return draw_terms_deep(p, &r, rows, n_rows, e);
    }
    int cap = 1 + p->L * p->H + p->H * p->H;
    term_bars b = {.p = p, .cap = cap};
    b.v = pic_calloc(p, (size_t)cap, sizeof(double), e);
    b.group = pic_calloc(p, (size_t)cap, sizeof(int), e);
    b.lab = pic_calloc(p, (size_t)cap, sizeof(char *), e);
    if (!b.v || !b.group || !b.lab) return -1;
    al_store_term_row *rows;
    int n_rows;
    if (al_store_read_path_terms(p->st, r.h.run, &rows, &n_rows, e) || !pic_keep(p, rows, e))
        return -1;
    for (int i = 0; i < n_rows; i++)
        if (term_row(&b, &rows[i], e)) return -1;
    if (!b.n)
        return al_errf(e,
                       "run %ld has no path expansion (path_terms is empty: it was turned "
                       "off, or the run is older than the expansion of deeper models)",
                       r.h.run);
    /* Of the virtual terms only the largest few are named: 64 names
     * would be unreadable and most of the terms are near 0. */
    int n_virt = 0, named = 0;
    char top[256] = "";
    for (int i = 0; i < b.n; i++) n_virt += b.group[i] == TG_VIRTUAL;
    if (n_virt > TERMS_LABELLED) {
        const char **keep_lab = pic_calloc(p, (size_t)b.n, sizeof(char *), e);
        if (!keep_lab) return -1;
        for (int k = 0; k < TERMS_LABELLED; k++) {
            int best = -1;
            for (int i = 0; i < b.n; i++)
                if (b.group[i] == TG_VIRTUAL && !keep_lab[i] && isfinite(b.v[i]) &&
                    (best < 0 || fabs(b.v[i]) > fabs(b.v[best])))
                    best = i;
            if (best < 0) break;
            keep_lab[best] = b.lab[best];
            size_t n = strlen(top);
            snprintf(top + n, sizeof top - n, "%s%s %+.3f", n ? ", " : "", b.lab[best], b.v[best]);
            named++;
        }
        for (int i = 0; i < b.n; i++)
            if (b.group[i] == TG_VIRTUAL) b.lab[i] = keep_lab[i];
    }
    static const char *const names[TG_N] = {"direct", "layer-0 heads",
                                            "layer-1 heads (from embed+pos)",
                                            "virtual heads 0.a>1.b"};
    al_panel *q = pic_add_panel(p, AL_PANEL_BARS);
    q->bars = (al_bars){.v = b.v,
                        .n = b.n,
                        .group = b.group,
                        .group_names = names,
                        .n_groups = TG_N,
                        .labels = b.lab,
                        .y_title = "\xce\x94 loss (nats)",
                        .bar_w = b.n > 42 ? 10 : 0,
                        .h = 240};
    snprintf(p->title, sizeof p->title,
             "path expansion: loss increase with each term removed "
             "(task %s)",
             r.h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p,
             "each bar: how much the mean item loss rises when that term alone is subtracted from "
             "the logits (below 0: the model does better without it)");
    if (p->L == 2)
        pic_note(p,
                 "direct = embed+pos straight to the unembedding; 0.h, 1.h = a head reading "
                 "embed+pos; 0.a>1.b = virtual head: head 0.a's output read by head 1.b's values");
    else
        pic_note(p,
                 "direct = embed+pos straight to the unembedding; 0.h = head h reading embed+pos");
    if (p->L == 2)
        pic_note(p, "each kind removed at once: direct %+.3f, heads %+.3f, virtual %+.3f nats",
                 r.kind_dloss[0], r.kind_dloss[1], r.kind_dloss[2]);
    else
        pic_note(p,
                 "each kind removed at once: direct %+.3f, heads %+.3f nats (one layer: no virtual "
                 "heads)",
                 r.kind_dloss[0], r.kind_dloss[1]);
    if (named)
        pic_note(p, "the %d largest of the %d virtual terms are named: %s", named, n_virt, top);
    pic_note(p, "%s", p->run_txt);
    return 0;
}

/* Estimate and actual per grid (head, head_pos, edge), finite pairs only. */
typedef struct ap_points {
    double *x[AL_AP_NGRID], *y[AL_AP_NGRID];
    int n[AL_AP_NGRID], cap, rows, compared;
    double lo, hi;
} ap_points;

static int ap_grid(const char *s) {
    for (int g = 0; s && g < AL_AP_NGRID; g++)
        if (strcmp(s, al_attrpatch_grid_name(g)) == 0) return g;
    return -1;
}

static void ap_row(ap_points *a, const al_store_ap_row *x) {
    int g = ap_grid(x->grid);
    a->rows++;
    a->compared += x->compared;
    if (g < 0 || a->n[g] >= a->cap || !isfinite(x->estimate) || !isfinite(x->actual)) return;
    a->x[g][a->n[g]] = x->estimate;
    a->y[g][a->n[g]++] = x->actual;
    a->lo = fmin(a->lo, fmin(x->estimate, x->actual));
    a->hi = fmax(a->hi, fmax(x->estimate, x->actual));
}

typedef struct ap_agree {
    pic *p;
    const char *lab[AL_AP_NGRID];
} ap_agree;

static int ap_agree_row(ap_agree *a, const al_store_agree_row *x, al_err *e) {
    int g = ap_grid(x->grid);
    if (g < 0) return 0;
    char pe[16] = "n/a", sp[16] = "n/a";
    if (!isnan(x->pearson)) snprintf(pe, sizeof pe, "%.3f", x->pearson);
    if (!isnan(x->spearman)) snprintf(sp, sizeof sp, "%.3f", x->spearman);
    a->lab[g] = pic_printf(a->p, e, "%s: n %.0f, Pearson %s, Spearman %s, top-5 shared %.0f",
                           x->grid, x->n, pe, sp, isnan(x->top5) ? 0 : x->top5);
    return a->lab[g] ? 0 : -1;
}

int pic_draw_attrpatch(pic *p, al_err *e) {
    arun r;
    if (attr_run_info(p, AL_ATTR_PATCHING, "with attribution patching (a pair task: --task)", &r,
                      e))
        return -1;
    al_store_ap_row *rows;
    int n_rows;
    if (al_store_read_attr_patching(p->st, r.h.run, &rows, &n_rows, e) || !pic_keep(p, rows, e))
        return -1;
    ap_points a = {.cap = n_rows, .lo = INFINITY, .hi = -INFINITY};
    if (!a.cap)
        return al_errf(e,
                       "run %ld has no attribution patching (a --data or --prompt run, or "
                       "--no-patching)",
                       r.h.run);
    for (int g = 0; g < AL_AP_NGRID; g++)
        if (!(a.x[g] = pic_calloc(p, (size_t)a.cap, sizeof(double), e)) ||
            !(a.y[g] = pic_calloc(p, (size_t)a.cap, sizeof(double), e)))
            return -1;
    for (int i = 0; i < n_rows; i++) ap_row(&a, &rows[i]);
    if (!a.compared)
        return al_errf(e,
                       "run %ld did not compare its estimates with actual patching (every "
                       "actual is NULL): there is nothing to plot them against",
                       r.h.run);
    ap_agree ag = {.p = p};
    al_store_agree_row *agr;
    if (al_store_read_attr_agreement(p->st, r.h.run, &agr, &n_rows, e) || !pic_keep(p, agr, e))
        return -1;
    for (int i = 0; i < n_rows; i++)
        if (ap_agree_row(&ag, &agr[i], e)) return -1;
    if (!(a.lo <= a.hi)) a.lo = 0, a.hi = 1;
    /* the y = x line's two points outlive this function (drawn later):
     * the picture owns them */
    double pad = fmax(a.hi - a.lo, 1e-6) * 0.05, *lim = pic_calloc(p, 2, sizeof(double), e);
    if (!lim) return -1;
    lim[0] = a.lo - pad, lim[1] = a.hi + pad;
    static const char *const grid_words[AL_AP_NGRID] = {"heads", "head x position", "edges"};
    static const int shape[AL_AP_NGRID] = {AL_MARK_CIRCLE, AL_MARK_SQUARE, AL_MARK_TRIANGLE};
    al_series *s = pic_calloc(p, AL_AP_NGRID + 1, sizeof *s, e);
    if (!s) return -1;
    /* heads first: the fewest points, drawn on top of the crowded grids */
    static const int order[AL_AP_NGRID] = {AL_AP_HEAD, AL_AP_EDGE, AL_AP_HEAD_POS};
    int ns = 0;
    for (int k = 0; k < AL_AP_NGRID; k++) {
        int g = order[k];
        if (!a.n[g]) continue;
        const char *lab =
            ag.lab[g] ? ag.lab[g] : pic_printf(p, e, "%s: n %d", grid_words[g], a.n[g]);
        if (!lab) return -1;
        s[ns++] =
            (al_series){a.x[g], a.y[g], a.n[g], lab, al_plot_colour(g), 0, shape[g], 0, 1, NULL};
    }
    s[ns++] = (al_series){lim, lim, 2, "y = x: the estimate is exact", 0x606060, 1, 0, 4, 0, NULL};
    al_panel *pn = pic_add_panel(p, AL_PANEL_LINES);
    pn->ln.s = s;
    pn->ln.n = ns;
    pn->ln.x_title = "estimate (attribution patching, first order)";
    pn->ln.y_title = "actual patching effect";
    pn->ln.w = pn->ln.h = 360;
    pn->ln.x_lo = pn->ln.y_lo = lim[0];
    pn->ln.x_hi = pn->ln.y_hi = lim[1];
    pn->ln.legend = 1;
    snprintf(p->title, sizeof p->title, "attribution patching vs actual patching (task %s, %s)",
             r.h.task, strcmp(r.direction, "noise") == 0 ? "noising" : "denoising");
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p,
             "each point is one configuration: its first-order estimate from one forward and one "
             "backward pass (x) against actually patching it (y), both normalised as patching's "
             "effect");
    pic_dir_notes(p, r.direction);
    pic_note(p,
             "legend: agreement per grid over the configurations where both are finite; top-5 "
             "shared = how many of the 5 largest |effects| the two agree on; %s",
             p->run_txt);
    return 0;
}
