/* pic_weights.c -- the pictures of a model's weights (family "weights"):
 * attention patterns on a prompt, positional QK, full QK and OV circuits
 * on a set of tokens, Q/K/V composition and the singular values of each
 * head (the last two read a circuits run from the database when given). */
#define _POSIX_C_SOURCE 200809L
#include "pictures_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/circuits.h"
#include "attnlab/data.h"

/* ---------------------------------------------------------- attention */

/* The prompt as ids (BOS first unless no_bos), cut from the left to
 * n_ctx; or BOS + repeat random non-special tokens, twice. */
static int attention_ids(pic *p, int **ids, int *T, al_err *e) {
    const al_pic_opts *o = p->o;
    int V = p->tok ? al_tok_vocab_size(p->tok) : p->m.cfg.d_vocab, n_ctx = p->m.cfg.n_ctx;
    int eot = p->tok ? al_tok_eot(p->tok) : -1, bos = !o->no_bos && eot >= 0;
    if (!o->prompt) {
        int R = o->repeat;
        if (R < 1 || 2 * R + bos > n_ctx)
            return al_errf(e, "--repeat must be in 1..%d (2 x repeat + BOS <= n_ctx)",
                           (n_ctx - bos) / 2);
        int *t = pic_calloc(p, (size_t)(2 * R + bos), sizeof(int), e);
        if (!t) return -1;
        al_rng r;
        al_rng_seed(&r, o->seed);
        if (bos) t[0] = eot;
        /* Printable tokens only: raw bytes that never occur in text
         * (a lone \xc3) make unreadable labels and untrained inputs. */
        int *pool = pic_calloc(p, (size_t)V, sizeof(int), e), np = 0;
        if (!pool) return -1;
        for (int id = 0; id < V; id++) {
            char b[LABEL_CAP];
            if (id == eot) continue;
            if (p->tok) al_tok_display(p->tok, id, b, sizeof b);
            if (!p->tok || !strchr(b, '\\')) pool[np++] = id;
        }
        if (np == 0) return al_errf(e, "the tokenizer has no printable tokens");
        for (int i = 0; i < R; i++)
            t[bos + i] = t[bos + R + i] = pool[al_rng_below(&r, (uint32_t)np)];
        *ids = t;
        *T = 2 * R + bos;
        p->prompt_txt =
            pic_printf(p, e, "%d random printable tokens, then the same again (seed %llu)", R,
                       (unsigned long long)o->seed);
        return p->prompt_txt ? 0 : -1;
    }
    if (!p->tok) return al_errf(e, "model %s has no tokenizer.json to encode the prompt", p->dir);
    int *raw = NULL;
    size_t n = 0;
    if (al_tok_encode(p->tok, (const unsigned char *)o->prompt, strlen(o->prompt), 1, &raw, &n, e))
        return -1;
    pic_keep(p, raw, e);
    size_t total = n + (size_t)bos;
    if (total == 0) return al_errf(e, "the prompt is empty");
    size_t keep_n = total > (size_t)n_ctx ? (size_t)n_ctx : total;
    int *t = pic_calloc(p, keep_n, sizeof(int), e);
    if (!t) return -1;
    for (size_t i = 0; i < keep_n; i++) {
        size_t src = total - keep_n + i;
        t[i] = bos ? (src == 0 ? eot : raw[src - 1]) : raw[src];
    }
    if (keep_n < total)
        fprintf(stderr,
                "attnlab: warning: prompt has %zu tokens, n_ctx is %d: showing the last %zu\n",
                total, n_ctx, keep_n);
    *ids = t;
    *T = (int)keep_n;
    p->prompt_txt = o->prompt;
    return 0;
}

/* Heads per row of an attention grid: two rows for 8 heads. */
#define GRID_COLS(H) ((H) > 4 ? ((H) + 1) / 2 : (H))

int pic_draw_attention(pic *p, al_err *e) {
    int l = pic_layer_or(p, 0), h = p->o->head, *ids = NULL, T = 0;
    if (pic_need_layer(p, l, e)) return -1;
    if (h >= p->H) return pic_need_head(p, h, e);
    if (!p->o->prompt && p->o->repeat <= 0)
        return al_errf(e, "--what attention needs --prompt TEXT (or --repeat N for a random "
                          "repeated sequence)");
    if (attention_ids(p, &ids, &T, e) || al_model_forward(&p->m, ids, NULL, 1, T, e)) return -1;
    const char **lab = pic_calloc(p, (size_t)T, sizeof(char *), e);
    if (!lab) return -1;
    for (int t = 0; t < T; t++)
        if (!(lab[t] = pic_tok_label(p, ids[t], e))) return -1;
    al_cscale *cs = pic_scale(p, 0, 0, 0, 1, "attention probability");
    int h0 = h >= 0 ? h : 0, h1 = h >= 0 ? h + 1 : p->H;
    for (int k = h0; k < h1; k++) {
        float *v = pic_floats(p, (size_t)T * T, e);
        if (!v) return -1;
        const float *a = p->m.att + ((size_t)l * p->H + k) * T * T; /* B = 1: (L,1,H,T,T) */
        for (int t = 0; t < T; t++)
            for (int s = 0; s < T; s++) v[t * T + s] = s <= t ? a[t * T + s] : NAN;
        al_panel *q = pic_add_panel(p, AL_PANEL_HEATMAP);
        q->hm = (al_hm){.v = v,
                        .rows = T,
                        .cols = T,
                        .row_labels = lab,
                        .col_labels = lab,
                        .row_title = "destination (query) token",
                        .col_title = "source (key) token",
                        .cs = cs,
                        .bar = 1};
        if (h < 0) { /* grid: axis titles on the outer panels only */
            int ncols = GRID_COLS(p->H), i = k - h0;
            if (i % ncols) q->hm.row_title = NULL;
            if (i + ncols < p->H) q->hm.col_title = NULL;
            q->hm.title = pic_printf(p, e, "head %d.%d", l, k);
            q->hm.cell = T <= 24 ? 12 : T <= 64 ? 10 : 8; /* from 10 px every label fits */
            if (!q->hm.title) return -1;
        }
    }
    if (h >= 0) {
        snprintf(p->title, sizeof p->title, "attention pattern, head %d.%d", l, h);
        snprintf(p->head_txt, sizeof p->head_txt, "%d.%d", l, h);
    } else {
        snprintf(p->title, sizeof p->title, "attention patterns, layer %d (all %d heads)", l, p->H);
        snprintf(p->head_txt, sizeof p->head_txt, "%d.*", l);
        p->fig.ncols = GRID_COLS(p->H);
        p->fig.shared_bar = cs;
    }
    pic_note(p,
             "row = destination (query) token, column = source (key) token: each row shows where "
             "that query attends (sums to 1); information flows key \xe2\x86\x92 query");
    pic_note(p, "grey: future positions (causal mask).  prompt: %.200s%s", p->prompt_txt,
             strlen(p->prompt_txt) > 200 ? "\xe2\x80\xa6" : "");
    return 0;
}

/* ---------------------------------------------------------- qk-pos */

int pic_draw_qk_pos(pic *p, al_err *e) {
    int l = pic_layer_or(p, 0), h = p->o->head, n_ctx = p->m.cfg.n_ctx;
    if (pic_need_layer(p, l, e) || pic_need_head(p, h, e)) return -1;
    int n = p->o->n_pos > 0 && p->o->n_pos < n_ctx ? p->o->n_pos : n_ctx;
    float *full = pic_floats(p, (size_t)n_ctx * n_ctx, e), *v = pic_floats(p, (size_t)n * n, e);
    if (!full || !v || al_circ_positional_qk(&p->m, l, h, full, e)) return -1;
    for (int t = 0; t < n; t++)
        for (int s = 0; s < n; s++) v[t * n + s] = s <= t ? full[(size_t)t * n_ctx + s] : NAN;
    pic_centre_rows(v, n, n);
    al_cscale *cs = pic_scale(p, 0, 1, NAN, NAN, "QK score, row-centred");
    al_cscale_fit(cs, v, (size_t)n * n);
    al_panel *q = pic_add_panel(p, AL_PANEL_HEATMAP);
    q->hm = (al_hm){.v = v,
                    .rows = n,
                    .cols = n,
                    .row_title = "destination (query) position",
                    .col_title = "source (key) position",
                    .cs = cs,
                    .bar = 1};
    if (n < n_ctx)
        snprintf(p->title, sizeof p->title, "positional QK, head %d.%d (positions 0-%d of %d)", l,
                 h, n - 1, n_ctx);
    else
        snprintf(p->title, sizeof p->title, "positional QK, head %d.%d", l, h);
    snprintf(p->head_txt, sizeof p->head_txt, "%d.%d", l, h);
    if (n < n_ctx)
        pic_note(p, "only the first %d of the model's %d positions are shown (--n-pos)", n, n_ctx);
    pic_note(p, "W_pos W_Q W_K^T W_pos^T: how much position t (row) attends to position s (column) "
                "from positions alone, before 1/sqrt(d_head)");
    pic_note(p,
             "rows centred over s <= t (softmax ignores a per-row constant); grey: s > t, masked");
    return 0;
}

/* ---------------------------------------------------------- qk / ov */

/* Ids of --tokens "a,b,c": each item must be one token. */
static int parse_tokens(pic *p, int *ids, int *n, al_err *e) {
    const char *s = p->o->tokens;
    *n = 0;
    while (*s) {
        size_t len = strcspn(s, ",");
        char item[256];
        if (len >= sizeof item) return al_errf(e, "--tokens: item too long");
        memcpy(item, s, len);
        item[len] = 0;
        s += len + (s[len] == ',');
        if (!len) continue;
        if (*n >= MAX_TOKENS) return al_errf(e, "--tokens: at most %d tokens", MAX_TOKENS);
        int id;
        char *end;
        if (item[0] == '#' && item[1]) {
            long v = strtol(item + 1, &end, 10);
            if (*end || v < 0 || v >= p->m.cfg.d_vocab)
                return al_errf(e, "--tokens: '%s' is not a token id below %d", item,
                               p->m.cfg.d_vocab);
            id = (int)v;
        } else {
            if (!p->tok) return al_errf(e, "model %s has no tokenizer.json", p->dir);
            char text[260];
            const char *open = "\xe2\x90\xa3"; /* ␣ */
            if (strncmp(item, open, 3) == 0)
                snprintf(text, sizeof text, " %s", item + 3);
            else
                snprintf(text, sizeof text, "%s", item);
            int *t;
            size_t k;
            if (al_tok_encode(p->tok, (const unsigned char *)text, strlen(text), 1, &t, &k, e))
                return -1;
            id = k == 1 ? t[0] : -1;
            free(t);
            if (id < 0)
                return al_errf(e,
                               "--tokens: '%s' is %zu tokens for this tokenizer, not one "
                               "(write #ID for an id)",
                               item, k);
        }
        ids[(*n)++] = id;
    }
    if (*n == 0) return al_errf(e, "--tokens: no tokens given");
    return 0;
}

typedef struct cnt {
    long n;
    int id;
} cnt;

static int by_count(const void *a, const void *b) {
    const cnt *x = a, *y = b;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;
    return x->id - y->id;
}

/* The top_n most frequent non-special ids of --data. */
static int frequent_tokens(pic *p, int *ids, int *n, al_err *e) {
    al_tokens d;
    if (al_tokens_load(p->o->data, &d, e)) return -1;
    int V = p->m.cfg.d_vocab, eot = p->tok ? al_tok_eot(p->tok) : -1;
    cnt *c = al_calloc((size_t)V, sizeof *c, e);
    if (!c) {
        al_tokens_free(&d);
        return -1;
    }
    for (int i = 0; i < V; i++) c[i].id = i;
    for (size_t i = 0; i < d.n; i++)
        if (d.tok[i] < V) c[d.tok[i]].n++;
    al_tokens_free(&d);
    qsort(c, (size_t)V, sizeof *c, by_count);
    *n = 0;
    for (int i = 0; i < V && *n < p->o->top_n; i++)
        if (c[i].id != eot && c[i].n > 0) ids[(*n)++] = c[i].id;
    free(c);
    if (*n == 0) return al_errf(e, "%s has no tokens of this model's vocabulary", p->o->data);
    return 0;
}

/* Without data: the tokenizer's first merges (BPE learns the most
 * frequent pairs first), then printable bytes. */
static void first_merges(pic *p, int *ids, int *n) {
    int V = p->tok ? al_tok_vocab_size(p->tok) : p->m.cfg.d_vocab,
        eot = p->tok ? al_tok_eot(p->tok) : -1;
    *n = 0;
    for (int id = 256; id < V && *n < p->o->top_n; id++)
        if (id != eot) ids[(*n)++] = id;
    for (int b = 'a'; b <= 'z' && *n < p->o->top_n; b++) ids[(*n)++] = b;
    for (int b = 32; b < 127 && *n < p->o->top_n; b++)
        if (b < 'a' || b > 'z') ids[(*n)++] = b;
}

/* The tokens of a qk/ov picture; how (a note) and brief (for the title)
 * say where they came from. */
static int choose_tokens(pic *p, int *ids, int *n, char *how, char *brief, size_t cap, al_err *e) {
    if (p->o->top_n < 1 || p->o->top_n > MAX_TOKENS)
        return al_errf(e, "--top-n must be in 1..%d", MAX_TOKENS);
    if (p->o->tokens) {
        if (parse_tokens(p, ids, n, e)) return -1;
        snprintf(how, cap, "tokens given with --tokens");
        snprintf(brief, cap, "%d given tokens", *n);
        return 0;
    }
    if (p->o->data) {
        if (frequent_tokens(p, ids, n, e)) return -1;
        const char *base = strrchr(p->o->data, '/');
        snprintf(how, cap, "tokens: the %d most frequent in %s", *n, p->o->data);
        snprintf(brief, cap, "top %d tokens of %s", *n, base ? base + 1 : p->o->data);
        return 0;
    }
    first_merges(p, ids, n);
    snprintf(how, cap,
             "tokens: the first %d BPE merges (learned first = most frequent pairs; "
             "give --data FILE for true frequencies)",
             *n);
    snprintf(brief, cap, "first %d BPE merges", *n);
    return 0;
}

static int pic_full(pic *p, int ov, al_err *e) {
    int l = pic_layer_or(p, 0), h = p->o->head, ids[MAX_TOKENS], n = 0;
    char how[512], brief[512];
    if (pic_need_layer(p, l, e) || pic_need_head(p, h, e) ||
        choose_tokens(p, ids, &n, how, brief, sizeof how, e))
        return -1;
    float *v = pic_floats(p, (size_t)n * n, e);
    const char **lab = pic_calloc(p, (size_t)n, sizeof(char *), e);
    if (!v || !lab) return -1;
    for (int i = 0; i < n; i++)
        if (!(lab[i] = pic_tok_label(p, ids[i], e))) return -1;
    if ((ov ? al_circ_full_ov(&p->m, l, h, ids, n, ids, n, v, e)
            : al_circ_full_qk(&p->m, l, h, ids, n, ids, n, v, e)))
        return -1;
    pic_centre_rows(v, n, n);
    al_cscale *cs =
        pic_scale(p, 0, 1, NAN, NAN, ov ? "logit change, row-centred" : "QK score, row-centred");
    al_cscale_fit(cs, v, (size_t)n * n);
    al_panel *q = pic_add_panel(p, AL_PANEL_HEATMAP);
    q->hm = (al_hm){.v = v,
                    .rows = n,
                    .cols = n,
                    .row_labels = lab,
                    .col_labels = lab,
                    .row_title = ov ? "source token (attended to)" : "destination (query) token",
                    .col_title = ov ? "output token (its logit)" : "source (key) token",
                    .cs = cs,
                    .bar = 1,
                    .cell = n <= 40 ? 14 : 0};
    snprintf(p->title, sizeof p->title, "full %s circuit, head %d.%d (%.80s)", ov ? "OV" : "QK", l,
             h, brief);
    snprintf(p->head_txt, sizeof p->head_txt, "%d.%d", l, h);
    if (ov)
        pic_note(p,
                 "W_E W_V W_O W_U: how attending to the row token changes the logit of the column "
                 "token; a red diagonal = copying");
    else
        pic_note(p,
                 "W_E W_Q W_K^T W_E^T: how much the row (query) token attends to the column (key) "
                 "token from token identity alone, before 1/sqrt(d_head)");
    pic_note(p, "rows centred (softmax ignores a per-row constant); %s", how);
    char *list = pic_calloc(p, (size_t)n * (LABEL_CAP + 1) + 1, 1, e);
    if (!list) return -1;
    for (int i = 0; i < n; i++) {
        if (i) strcat(list, ",");
        strcat(list, lab[i]);
    }
    p->tokens_txt = list;
    return 0;
}

int pic_draw_qk(pic *p, al_err *e) { return pic_full(p, 0, e); }
int pic_draw_ov(pic *p, al_err *e) { return pic_full(p, 1, e); }

/* ---------------------------------------------------------- composition */

typedef struct comp_rows {
    int l2, rows;
    float *v[3];
    double base[3];
    int n;
} comp_rows;

static int kind_index(const char *k) {
    return !k                    ? -1
           : strcmp(k, "Q") == 0 ? 0
           : strcmp(k, "K") == 0 ? 1
           : strcmp(k, "V") == 0 ? 2
                                 : -1;
}

/* The composition rows of the model's latest circuits run (or --run). */
static int comp_from_db(pic *p, comp_rows *c, al_err *e) {
    long run = p->o->run_id;
    if (run <= 0 && al_store_latest_composition_run(p->st, p->model_id, &run, e)) return -1;
    if (!run) return 0;
    al_store_comp_row *rows;
    int n;
    if (al_store_read_composition(p->st, run, &rows, &n, e) || !pic_keep(p, rows, e)) return -1;
    int H = p->H;
    for (int i = 0; i < n; i++) {
        const al_store_comp_row *x = &rows[i];
        int k = kind_index(x->kind), l1 = (int)x->layer1, h1 = (int)x->head1, l2 = (int)x->layer2,
            h2 = (int)x->head2;
        if (k < 0 || l2 != c->l2 || l1 < 0 || l1 >= l2 || h1 < 0 || h1 >= H || h2 < 0 || h2 >= H)
            continue;
        c->v[k][(l1 * H + h1) * H + h2] = (float)x->score;
        if (!isnan(x->baseline)) c->base[k] = x->baseline;
        c->n++;
    }
    if (c->n) pic_run_note(p, "composition from circuits", run);
    return 0;
}

static int comp_compute(pic *p, comp_rows *c, al_err *e) {
    double sd[3];
    for (int l1 = 0; l1 < c->l2; l1++)
        for (int h1 = 0; h1 < p->H; h1++)
            for (int h2 = 0; h2 < p->H; h2++) {
                double s[AL_COMP_N];
                if (al_circ_composition(&p->m, l1, h1, c->l2, h2, s, e)) return -1;
                for (int k = 0; k < 3; k++) c->v[k][(l1 * p->H + h1) * p->H + h2] = (float)s[k];
            }
    return al_circ_comp_baseline(p->m.cfg.d_model, p->D, 200, 1, c->base, sd, e);
}

int pic_draw_composition(pic *p, al_err *e) {
    if (p->L < 2)
        return al_errf(e,
                       "--what composition needs a model with 2 or more layers (this one has %d)",
                       p->L);
    comp_rows c = {.l2 = pic_layer_or(p, p->L - 1), .base = {NAN, NAN, NAN}};
    if (c.l2 < 1 || c.l2 >= p->L)
        return al_errf(e, "--layer %d: composition is into a later layer, 1..%d", c.l2, p->L - 1);
    c.rows = c.l2 * p->H;
    for (int k = 0; k < 3; k++) {
        if (!(c.v[k] = pic_floats(p, (size_t)c.rows * p->H, e))) return -1;
        for (int i = 0; i < c.rows * p->H; i++) c.v[k][i] = NAN;
    }
    if (p->st && comp_from_db(p, &c, e)) return -1;
    if (!c.n) {
        if (comp_compute(p, &c, e)) return -1;
        snprintf(p->run_txt, sizeof p->run_txt, "computed from the weights");
    }
    double hi = 0, bmean = 0;
    int nb = 0;
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < c.rows * p->H; i++)
            if (!isnan(c.v[k][i])) hi = fmax(hi, c.v[k][i]);
        if (!isnan(c.base[k])) bmean += c.base[k], nb++;
    }
    al_cscale *cs = pic_scale(p, 0, 0, 0, hi > 0 ? hi : 1, "composition score");
    if (nb) {
        cs->n_marks = 1;
        cs->mark[0] = bmean / nb;
        cs->mark_label[0] = "random";
        if (cs->mark[0] > cs->hi) cs->hi = cs->mark[0] * 1.05;
    }
    const char **rl = pic_head_labels(p, 0, c.l2, e), **cl = pic_head_labels(p, c.l2, c.l2 + 1, e);
    if (!rl || !cl) return -1;
    static const char *const names[3] = {"Q", "K", "V"};
    for (int k = 0; k < 3; k++) {
        al_panel *q = pic_add_panel(p, AL_PANEL_HEATMAP);
        q->hm = (al_hm){.v = c.v[k],
                        .rows = c.rows,
                        .cols = p->H,
                        .row_labels = rl,
                        .col_labels = cl,
                        .row_title = "earlier head (writes)",
                        .col_title = "later head (reads)",
                        .cs = cs,
                        .annotate = 1,
                        .cell = c.rows <= 16 ? 34 : 0};
        q->hm.title = isnan(c.base[k])
                          ? pic_printf(p, e, "%s-composition", names[k])
                          : pic_printf(p, e, "%s-composition (random %.3f)", names[k], c.base[k]);
        if (!q->hm.title) return -1;
    }
    p->fig.shared_bar = cs;
    snprintf(p->title, sizeof p->title, "composition into layer %d", c.l2);
    snprintf(p->head_txt, sizeof p->head_txt, "%d.* -> %d.*", c.l2 - 1, c.l2);
    pic_note(p,
             "Q: |W_OV(1) W_QK(2)|, K: |W_OV(1) W_QK(2)^T|, V: |W_OV(1) W_OV(2)|, each divided by "
             "the norms of the two (Frobenius; Elhage et al. 2021)");
    pic_note(p,
             "the colour bar marks the mean score of random Gaussian heads of the same shapes (%s)",
             p->run_txt);
    return 0;
}

/* ---------------------------------------------------------- spectrum */

typedef struct sv_rows {
    double *qk, *ov; /* (L*H, D) */
    int n;
} sv_rows;

/* The singular values of the model's latest circuits run (or --run). */
static int sv_from_db(pic *p, sv_rows *s, al_err *e) {
    long run = p->o->run_id;
    if (run <= 0 && al_store_latest_svals_run(p->st, p->model_id, &run, e)) return -1;
    if (!run) return 0;
    al_store_sval_row *rows;
    int n, H = p->H, D = p->D;
    if (al_store_read_svals(p->st, run, &rows, &n, e) || !pic_keep(p, rows, e)) return -1;
    for (int k = 0; k < n; k++) {
        const al_store_sval_row *x = &rows[k];
        int l = (int)x->layer, h = (int)x->head, i = (int)x->idx;
        if (l < 0 || l >= p->L || h < 0 || h >= H || i < 0 || i >= D || !x->circuit) continue;
        double *dst = strcmp(x->circuit, "qk") == 0   ? s->qk
                      : strcmp(x->circuit, "ov") == 0 ? s->ov
                                                      : NULL;
        if (dst) dst[(l * H + h) * D + i] = x->value, s->n++;
    }
    if (s->n) pic_run_note(p, "circuits", run);
    return 0;
}

int pic_draw_spectrum(pic *p, al_err *e) {
    int LH = p->L * p->H, D = p->D;
    sv_rows s = {0};
    s.qk = pic_calloc(p, (size_t)LH * D, sizeof(double), e);
    s.ov = pic_calloc(p, (size_t)LH * D, sizeof(double), e);
    double *xs = pic_calloc(p, (size_t)D, sizeof(double), e);
    if (!s.qk || !s.ov || !xs) return -1;
    for (int i = 0; i < LH * D; i++) s.qk[i] = s.ov[i] = NAN;
    if (p->st && sv_from_db(p, &s, e)) return -1;
    if (!s.n) {
        for (int i = 0; i < LH; i++)
            if (al_circ_qk_svals(&p->m, i / p->H, i % p->H, s.qk + (size_t)i * D, e) ||
                al_circ_ov_svals(&p->m, i / p->H, i % p->H, s.ov + (size_t)i * D, e))
                return -1;
        snprintf(p->run_txt, sizeof p->run_txt, "computed from the weights");
    }
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < LH * D; i++) {
        double a[2] = {s.qk[i], s.ov[i]};
        for (int k = 0; k < 2; k++)
            if (a[k] > 0) lo = fmin(lo, a[k]), hi = fmax(hi, a[k]);
    }
    if (!(hi > 0)) lo = 0.1, hi = 1;
    /* σ below 1e-4 σ_max is rank deficiency; keep the scale on the rest */
    lo = fmax(lo, hi * 1e-4);
    for (int i = 0; i < D; i++) xs[i] = i + 1;
    for (int i = 0; i < LH; i++) {
        al_series *sr = pic_calloc(p, 2, sizeof *sr, e);
        if (!sr) return -1;
        sr[0] = (al_series){xs, s.qk + (size_t)i * D, D, NULL, 0x1F77B4, 2, 0, 0, 0, NULL};
        sr[1] = (al_series){xs, s.ov + (size_t)i * D, D, NULL, 0xFF7F0E, 2, 0, 0, 0, NULL};
        al_panel *q = pic_add_panel(p, AL_PANEL_LINES);
        if (!q) return al_errf(e, "too many heads for one picture (%d)", LH);
        q->ln.s = sr;
        q->ln.n = 2;
        q->ln.w = 150;
        q->ln.h = 100;
        q->ln.log_y = 1;
        q->ln.y_lo = lo / 1.3;
        q->ln.y_hi = hi * 1.3;
        q->ln.x_lo = 1;
        q->ln.x_hi = D;
        q->ln.x_integer = 1;
        q->ln.title = pic_printf(p, e, "head %d.%d", i / p->H, i % p->H);
        if (i % p->H == 0) q->ln.y_title = pic_printf(p, e, "layer %d", i / p->H);
        if (i / p->H == p->L - 1) q->ln.x_title = "index i";
        if (!q->ln.title) return -1;
    }
    p->fig.ncols = p->H;
    p->legend[0] = (al_legend_item){"W_QK = W_Q W_K^T", 0x1F77B4, 0};
    p->legend[1] = (al_legend_item){"W_OV = W_V W_O", 0xFF7F0E, 0};
    p->fig.legend = p->legend;
    p->fig.n_legend = 2;
    snprintf(p->title, sizeof p->title, "singular values of each head's QK and OV circuits");
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(
        p,
        "each head's %d nonzero singular values, largest first, log scale shared by all panels (%s)",
        D, p->run_txt);
    return 0;
}
