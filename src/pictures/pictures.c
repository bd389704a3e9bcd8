/* pictures.c -- from a model (and a results database) to a figure to a
 * PNG (see pictures.h).
 *
 * Each kind fills one al_figure: its numbers, labels and words. Layout
 * and drawing are plot.c's business; provenance goes into PNG text
 * chunks. Everything a figure points at is allocated through the pic's
 * list and freed together at the end, so the kinds stay linear code. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/pictures.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"
#include "attnlab/checkpoint.h"
#include "attnlab/circuits.h"
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/patch.h"
#include "attnlab/plot.h"
#include "attnlab/png.h"
#include "attnlab/store.h"
#include "attnlab/thresholds.h"
#include "attnlab/tokenizer.h"

const char *const al_pic_kinds[] = {"attention", "qk-pos",   "qk",       "ov",
                                    "composition", "ablation", "pruning", "training",
                                    "spectrum",  "patching", "paths",   "dla",
                                    "terms",     "attrpatch", "circuit", "circuit-curve",
                                    "sweep-induction", NULL};

al_pic_opts al_pic_defaults(void) {
    al_pic_opts o = {.what = NULL, .layer = -1, .head = -1, .repeat = 0, .seed = 1,
                     .top_n = 40, .n_pos = 64, .tau = NAN};
    return o;
}

#define MAX_PANELS 64
#define MAX_TOKENS 256 /* qk/ov axes; beyond this a picture is not readable */
#define LABEL_CAP 64

typedef struct pic {
    const al_pic_opts *o;
    const char *dir;
    al_model m;
    al_tokenizer *tok;
    al_store *st;
    int64_t model_id;
    int L, H, D;
    al_figure fig;
    al_panel panels[MAX_PANELS];
    al_cscale cs[4];
    al_legend_item legend[8];
    char title[256];
    char notes[AL_FIG_MAX_NOTES][640];
    /* provenance for the text chunks */
    char head_txt[64], run_txt[256];
    const char *prompt_txt, *tokens_txt;
    void **mem;
    int n_mem, cap_mem;
} pic;

/* ------------------------------------------------------------- helpers */

static void *keep(pic *p, void *ptr, al_err *e) {
    if (!ptr) return NULL;
    if (p->n_mem == p->cap_mem) {
        int cap = p->cap_mem ? 2 * p->cap_mem : 64;
        void **q = realloc(p->mem, sizeof(void *) * (size_t)cap);
        if (!q) {
            free(ptr);
            al_errf(e, "out of memory");
            return NULL;
        }
        p->mem = q;
        p->cap_mem = cap;
    }
    return p->mem[p->n_mem++] = ptr;
}

static void *pcalloc(pic *p, size_t n, size_t size, al_err *e) {
    return keep(p, al_calloc(n ? n : 1, size, e), e);
}

static float *pfloats(pic *p, size_t n, al_err *e) { return pcalloc(p, n, sizeof(float), e); }

static char *pprintf(pic *p, al_err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static char *pprintf(pic *p, al_err *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? pcalloc(p, (size_t)n + 1, 1, e) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static void note(pic *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(pic *p, const char *fmt, ...) {
    if (p->fig.n_notes >= AL_FIG_MAX_NOTES) return;
    char *b = p->notes[p->fig.n_notes];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof p->notes[0], fmt, ap);
    va_end(ap);
    p->fig.notes[p->fig.n_notes++] = b;
}

static al_panel *add_panel(pic *p, int kind) {
    if (p->fig.n_panels >= MAX_PANELS) return NULL;
    al_panel *q = &p->panels[p->fig.n_panels++];
    memset(q, 0, sizeof *q);
    q->kind = kind;
    if (kind == AL_PANEL_LINES) {
        q->ln.x_lo = q->ln.x_hi = q->ln.y_lo = q->ln.y_hi = NAN;
        q->ln.hline = NAN;
    }
    return q;
}

static al_cscale *scale(pic *p, int k, int diverging, double lo, double hi, const char *label) {
    al_cscale *c = &p->cs[k];
    memset(c, 0, sizeof *c);
    c->diverging = diverging;
    c->lo = lo;
    c->hi = hi;
    c->label = label;
    return c;
}

/* Display form of a token id for labels. */
static char *tok_label(pic *p, int id, al_err *e) {
    char b[LABEL_CAP];
    if (p->tok && id < al_tok_vocab_size(p->tok)) al_tok_display(p->tok, id, b, sizeof b);
    else snprintf(b, sizeof b, "#%d", id);
    return pprintf(p, e, "%s", b);
}

static const char **head_labels(pic *p, int l0, int l1, al_err *e) {
    const char **lab = pcalloc(p, (size_t)(l1 - l0) * p->H, sizeof(char *), e);
    for (int l = l0; lab && l < l1; l++)
        for (int h = 0; h < p->H; h++)
            if (!(lab[(l - l0) * p->H + h] = pprintf(p, e, "%d.%d", l, h))) return NULL;
    return lab;
}

/* Subtract each row's mean over its unmasked cells: softmax (over a QK
 * row) and the logits (over an OV row) ignore a per-row constant, and
 * without it one row's offset can swamp the picture. */
static void centre_rows(float *v, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        int n = 0;
        for (int c = 0; c < cols; c++)
            if (!isnan(v[(size_t)r * cols + c])) s += v[(size_t)r * cols + c], n++;
        for (int c = 0; n && c < cols; c++) v[(size_t)r * cols + c] -= (float)(s / n);
    }
}

static int need_layer(pic *p, int l, al_err *e) {
    if (l < 0 || l >= p->L)
        return al_errf(e, "--layer %d is out of range: the model has %d layer%s", l, p->L,
                       p->L == 1 ? "" : "s");
    return 0;
}

static int need_head(pic *p, int h, al_err *e) {
    if (h < 0) return al_errf(e, "--head is required for --what %s", p->o->what);
    if (h >= p->H)
        return al_errf(e, "--head %d is out of range: the model has %d heads per layer", h, p->H);
    return 0;
}

static int layer_or(pic *p, int dflt) { return p->o->layer >= 0 ? p->o->layer : dflt; }

/* ---------------------------------------------------------- database */

typedef struct qval {
    double v;
    int found;
} qval;

static int row_first(void *ctx, int nc, const char *const *t, const double *num, al_err *e) {
    (void)t, (void)e;
    qval *q = ctx;
    if (nc > 0 && !q->found && !isnan(num[0])) q->v = num[0], q->found = 1;
    return 0;
}

/* One number from a query (found = 0 if no row or NULL). */
static int query1(pic *p, const char *sql, const char *a, const char *b, qval *out, al_err *e) {
    const char *params[2] = {a, b};
    out->found = 0;
    out->v = NAN;
    return al_store_query(p->st, sql, params, 2, row_first, out, e);
}

static int open_db(pic *p, int required, al_err *e) {
    if (!p->o->db) {
        if (required) return al_errf(e, "--what %s reads the results database: give --db FILE", p->o->what);
        return 0;
    }
    if (!al_file_exists(p->o->db)) return al_errf(e, "database %s does not exist", p->o->db);
    if (al_store_open(p->o->db, &p->st, e)) return -1;
    char path[AL_PATH_MAX + 64], sha[65];
    if (al_path_join(path, sizeof path, p->dir, "model.safetensors", e) ||
        al_sha256_file(path, sha, e))
        return -1;
    qval q;
    if (query1(p, "SELECT model_id FROM models WHERE sha256 = ?1", sha, NULL, &q, e)) return -1;
    p->model_id = q.found ? (int64_t)q.v : 0;
    /* composition and spectrum then compute from the weights instead */
    if (!p->model_id && p->o->run_id <= 0 && required)
        return al_errf(e, "database %s has no results for model %s (these weights were never "
                       "analysed into it)", p->o->db, p->dir);
    return 0;
}

/* The run to read: --run, else the latest finished run with rows in
 * `table` (a FROM clause over alias x with x.run_id, x.model_id) matching
 * cond (which may use ?2 = extra). 0 if none. */
static int pick_run(pic *p, const char *table, const char *cond, const char *extra, long *run,
                    al_err *e) {
    if (p->o->run_id > 0) {
        *run = p->o->run_id;
        return 0;
    }
    char sql[1024], mid[32];
    snprintf(sql, sizeof sql,
             "SELECT MAX(x.run_id) FROM %s JOIN runs r ON r.run_id = x.run_id "
             "WHERE x.model_id = ?1 AND r.status = 'done'%s%s",
             table, cond ? " AND " : "", cond ? cond : "");
    snprintf(mid, sizeof mid, "%lld", (long long)p->model_id);
    qval q;
    if (query1(p, sql, mid, extra, &q, e)) return -1;
    *run = q.found ? (long)q.v : 0;
    return 0;
}

static void run_note(pic *p, const char *what, long run) {
    size_t n = strlen(p->run_txt);
    snprintf(p->run_txt + n, sizeof p->run_txt - n, "%s%s run %ld", n ? ", " : "", what, run);
}

/* The rows of run `run` from sql (its ?1 the run id) to fn. */
static int run_rows(pic *p, long run, const char *sql, al_store_row_fn fn, void *ctx, al_err *e) {
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[1] = {rs};
    return al_store_query(p->st, sql, params, 1, fn, ctx, e);
}

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
            return al_errf(e, "--repeat must be in 1..%d (2 x repeat + BOS <= n_ctx)", (n_ctx - bos) / 2);
        int *t = pcalloc(p, (size_t)(2 * R + bos), sizeof(int), e);
        if (!t) return -1;
        al_rng r;
        al_rng_seed(&r, o->seed);
        if (bos) t[0] = eot;
        /* Printable tokens only: raw bytes that never occur in text
         * (a lone \xc3) make unreadable labels and untrained inputs. */
        int *pool = pcalloc(p, (size_t)V, sizeof(int), e), np = 0;
        if (!pool) return -1;
        for (int id = 0; id < V; id++) {
            char b[LABEL_CAP];
            if (id == eot) continue;
            if (p->tok) al_tok_display(p->tok, id, b, sizeof b);
            if (!p->tok || !strchr(b, '\\')) pool[np++] = id;
        }
        if (np == 0) return al_errf(e, "the tokenizer has no printable tokens");
        for (int i = 0; i < R; i++) t[bos + i] = t[bos + R + i] = pool[al_rng_below(&r, (uint32_t)np)];
        *ids = t;
        *T = 2 * R + bos;
        p->prompt_txt = pprintf(p, e, "%d random printable tokens, then the same again (seed %llu)", R,
                                (unsigned long long)o->seed);
        return p->prompt_txt ? 0 : -1;
    }
    if (!p->tok) return al_errf(e, "model %s has no tokenizer.json to encode the prompt", p->dir);
    int *raw = NULL;
    size_t n = 0;
    if (al_tok_encode(p->tok, (const unsigned char *)o->prompt, strlen(o->prompt), 1, &raw, &n, e))
        return -1;
    keep(p, raw, e);
    size_t total = n + (size_t)bos;
    if (total == 0) return al_errf(e, "the prompt is empty");
    size_t keep_n = total > (size_t)n_ctx ? (size_t)n_ctx : total;
    int *t = pcalloc(p, keep_n, sizeof(int), e);
    if (!t) return -1;
    for (size_t i = 0; i < keep_n; i++) {
        size_t src = total - keep_n + i;
        t[i] = bos ? (src == 0 ? eot : raw[src - 1]) : raw[src];
    }
    if (keep_n < total)
        fprintf(stderr, "attnlab: warning: prompt has %zu tokens, n_ctx is %d: showing the last %zu\n",
                total, n_ctx, keep_n);
    *ids = t;
    *T = (int)keep_n;
    p->prompt_txt = o->prompt;
    return 0;
}

/* Heads per row of an attention grid: two rows for 8 heads. */
#define GRID_COLS(H) ((H) > 4 ? ((H) + 1) / 2 : (H))

static int pic_attention(pic *p, al_err *e) {
    int l = layer_or(p, 0), h = p->o->head, *ids = NULL, T = 0;
    if (need_layer(p, l, e)) return -1;
    if (h >= p->H) return need_head(p, h, e);
    if (!p->o->prompt && p->o->repeat <= 0)
        return al_errf(e, "--what attention needs --prompt TEXT (or --repeat N for a random "
                       "repeated sequence)");
    if (attention_ids(p, &ids, &T, e) || al_model_forward(&p->m, ids, NULL, 1, T, e)) return -1;
    const char **lab = pcalloc(p, (size_t)T, sizeof(char *), e);
    if (!lab) return -1;
    for (int t = 0; t < T; t++)
        if (!(lab[t] = tok_label(p, ids[t], e))) return -1;
    al_cscale *cs = scale(p, 0, 0, 0, 1, "attention probability");
    int h0 = h >= 0 ? h : 0, h1 = h >= 0 ? h + 1 : p->H;
    for (int k = h0; k < h1; k++) {
        float *v = pfloats(p, (size_t)T * T, e);
        if (!v) return -1;
        const float *a = p->m.att + ((size_t)l * p->H + k) * T * T; /* B = 1: (L,1,H,T,T) */
        for (int t = 0; t < T; t++)
            for (int s = 0; s < T; s++) v[t * T + s] = s <= t ? a[t * T + s] : NAN;
        al_panel *q = add_panel(p, AL_PANEL_HEATMAP);
        q->hm = (al_hm){.v = v, .rows = T, .cols = T, .row_labels = lab, .col_labels = lab,
                        .row_title = "destination (query) token",
                        .col_title = "source (key) token", .cs = cs, .bar = 1};
        if (h < 0) { /* grid: axis titles on the outer panels only */
            int ncols = GRID_COLS(p->H), i = k - h0;
            if (i % ncols) q->hm.row_title = NULL;
            if (i + ncols < p->H) q->hm.col_title = NULL;
            q->hm.title = pprintf(p, e, "head %d.%d", l, k);
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
    note(p, "row = destination (query) token, column = source (key) token: each row shows where "
            "that query attends (sums to 1); information flows key \xe2\x86\x92 query");
    note(p, "grey: future positions (causal mask).  prompt: %.200s%s", p->prompt_txt,
         strlen(p->prompt_txt) > 200 ? "\xe2\x80\xa6" : "");
    return 0;
}

/* ---------------------------------------------------------- qk-pos */

static int pic_qk_pos(pic *p, al_err *e) {
    int l = layer_or(p, 0), h = p->o->head, n_ctx = p->m.cfg.n_ctx;
    if (need_layer(p, l, e) || need_head(p, h, e)) return -1;
    int n = p->o->n_pos > 0 && p->o->n_pos < n_ctx ? p->o->n_pos : n_ctx;
    float *full = pfloats(p, (size_t)n_ctx * n_ctx, e), *v = pfloats(p, (size_t)n * n, e);
    if (!full || !v || al_circ_positional_qk(&p->m, l, h, full, e)) return -1;
    for (int t = 0; t < n; t++)
        for (int s = 0; s < n; s++) v[t * n + s] = s <= t ? full[(size_t)t * n_ctx + s] : NAN;
    centre_rows(v, n, n);
    al_cscale *cs = scale(p, 0, 1, NAN, NAN, "QK score, row-centred");
    al_cscale_fit(cs, v, (size_t)n * n);
    al_panel *q = add_panel(p, AL_PANEL_HEATMAP);
    q->hm = (al_hm){.v = v, .rows = n, .cols = n, .row_title = "destination (query) position",
                    .col_title = "source (key) position", .cs = cs, .bar = 1};
    if (n < n_ctx)
        snprintf(p->title, sizeof p->title, "positional QK, head %d.%d (positions 0-%d of %d)", l, h,
                 n - 1, n_ctx);
    else
        snprintf(p->title, sizeof p->title, "positional QK, head %d.%d", l, h);
    snprintf(p->head_txt, sizeof p->head_txt, "%d.%d", l, h);
    if (n < n_ctx) note(p, "only the first %d of the model's %d positions are shown (--n-pos)", n, n_ctx);
    note(p, "W_pos W_Q W_K^T W_pos^T: how much position t (row) attends to position s (column) "
            "from positions alone, before 1/sqrt(d_head)");
    note(p, "rows centred over s <= t (softmax ignores a per-row constant); grey: s > t, masked");
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
                return al_errf(e, "--tokens: '%s' is not a token id below %d", item, p->m.cfg.d_vocab);
            id = (int)v;
        } else {
            if (!p->tok) return al_errf(e, "model %s has no tokenizer.json", p->dir);
            char text[260];
            const char *open = "\xe2\x90\xa3"; /* ␣ */
            if (strncmp(item, open, 3) == 0) snprintf(text, sizeof text, " %s", item + 3);
            else snprintf(text, sizeof text, "%s", item);
            int *t;
            size_t k;
            if (al_tok_encode(p->tok, (const unsigned char *)text, strlen(text), 1, &t, &k, e))
                return -1;
            id = k == 1 ? t[0] : -1;
            free(t);
            if (id < 0)
                return al_errf(e, "--tokens: '%s' is %zu tokens for this tokenizer, not one "
                               "(write #ID for an id)", item, k);
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
    int V = p->tok ? al_tok_vocab_size(p->tok) : p->m.cfg.d_vocab, eot = p->tok ? al_tok_eot(p->tok) : -1;
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
    snprintf(how, cap, "tokens: the first %d BPE merges (learned first = most frequent pairs; "
             "give --data FILE for true frequencies)", *n);
    snprintf(brief, cap, "first %d BPE merges", *n);
    return 0;
}

static int pic_full(pic *p, int ov, al_err *e) {
    int l = layer_or(p, 0), h = p->o->head, ids[MAX_TOKENS], n = 0;
    char how[512], brief[512];
    if (need_layer(p, l, e) || need_head(p, h, e) ||
        choose_tokens(p, ids, &n, how, brief, sizeof how, e))
        return -1;
    float *v = pfloats(p, (size_t)n * n, e);
    const char **lab = pcalloc(p, (size_t)n, sizeof(char *), e);
    if (!v || !lab) return -1;
    for (int i = 0; i < n; i++)
        if (!(lab[i] = tok_label(p, ids[i], e))) return -1;
    if ((ov ? al_circ_full_ov(&p->m, l, h, ids, n, ids, n, v, e)
            : al_circ_full_qk(&p->m, l, h, ids, n, ids, n, v, e)))
        return -1;
    centre_rows(v, n, n);
    al_cscale *cs = scale(p, 0, 1, NAN, NAN, ov ? "logit change, row-centred" : "QK score, row-centred");
    al_cscale_fit(cs, v, (size_t)n * n);
    al_panel *q = add_panel(p, AL_PANEL_HEATMAP);
    q->hm = (al_hm){.v = v, .rows = n, .cols = n, .row_labels = lab, .col_labels = lab,
                    .row_title = ov ? "source token (attended to)" : "destination (query) token",
                    .col_title = ov ? "output token (its logit)" : "source (key) token",
                    .cs = cs, .bar = 1, .cell = n <= 40 ? 14 : 0};
    snprintf(p->title, sizeof p->title, "full %s circuit, head %d.%d (%.80s)", ov ? "OV" : "QK", l,
             h, brief);
    snprintf(p->head_txt, sizeof p->head_txt, "%d.%d", l, h);
    if (ov)
        note(p, "W_E W_V W_O W_U: how attending to the row token changes the logit of the column "
                "token; a red diagonal = copying");
    else
        note(p, "W_E W_Q W_K^T W_E^T: how much the row (query) token attends to the column (key) "
                "token from token identity alone, before 1/sqrt(d_head)");
    note(p, "rows centred (softmax ignores a per-row constant); %s", how);
    char *list = pcalloc(p, (size_t)n * (LABEL_CAP + 1) + 1, 1, e);
    if (!list) return -1;
    for (int i = 0; i < n; i++) {
        if (i) strcat(list, ",");
        strcat(list, lab[i]);
    }
    p->tokens_txt = list;
    return 0;
}

/* ---------------------------------------------------------- composition */

typedef struct comp_rows {
    pic *p;
    int l2, rows;
    float *v[3];
    double base[3];
    int n;
} comp_rows;

static int kind_index(const char *k) {
    return !k ? -1 : strcmp(k, "Q") == 0 ? 0 : strcmp(k, "K") == 0 ? 1 : strcmp(k, "V") == 0 ? 2 : -1;
}

static int comp_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    comp_rows *c = ctx;
    (void)nc, (void)e;
    int k = kind_index(t[0]), l1 = (int)x[1], h1 = (int)x[2], l2 = (int)x[3], h2 = (int)x[4];
    int H = c->p->H;
    if (k < 0 || l2 != c->l2 || l1 < 0 || l1 >= l2 || h1 < 0 || h1 >= H || h2 < 0 || h2 >= H) return 0;
    c->v[k][(l1 * H + h1) * H + h2] = (float)x[5];
    if (!isnan(x[6])) c->base[k] = x[6];
    c->n++;
    return 0;
}

static int comp_from_db(pic *p, comp_rows *c, al_err *e) {
    long run;
    if (pick_run(p, "composition x", NULL, NULL, &run, e)) return -1;
    if (!run) return 0;
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[1] = {rs};
    if (al_store_query(p->st, "SELECT kind, layer1, head1, layer2, head2, score, baseline "
                              "FROM composition WHERE run_id = ?1",
                       params, 1, comp_row, c, e))
        return -1;
    if (c->n) run_note(p, "composition from circuits", run);
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

static int pic_composition(pic *p, al_err *e) {
    if (p->L < 2) return al_errf(e, "--what composition needs a model with 2 or more layers (this one has %d)", p->L);
    comp_rows c = {.p = p, .l2 = layer_or(p, p->L - 1), .base = {NAN, NAN, NAN}};
    if (c.l2 < 1 || c.l2 >= p->L)
        return al_errf(e, "--layer %d: composition is into a later layer, 1..%d", c.l2, p->L - 1);
    c.rows = c.l2 * p->H;
    for (int k = 0; k < 3; k++) {
        if (!(c.v[k] = pfloats(p, (size_t)c.rows * p->H, e))) return -1;
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
    al_cscale *cs = scale(p, 0, 0, 0, hi > 0 ? hi : 1, "composition score");
    if (nb) {
        cs->n_marks = 1;
        cs->mark[0] = bmean / nb;
        cs->mark_label[0] = "random";
        if (cs->mark[0] > cs->hi) cs->hi = cs->mark[0] * 1.05;
    }
    const char **rl = head_labels(p, 0, c.l2, e), **cl = head_labels(p, c.l2, c.l2 + 1, e);
    if (!rl || !cl) return -1;
    static const char *const names[3] = {"Q", "K", "V"};
    for (int k = 0; k < 3; k++) {
        al_panel *q = add_panel(p, AL_PANEL_HEATMAP);
        q->hm = (al_hm){.v = c.v[k], .rows = c.rows, .cols = p->H, .row_labels = rl, .col_labels = cl,
                        .row_title = "earlier head (writes)", .col_title = "later head (reads)",
                        .cs = cs, .annotate = 1, .cell = c.rows <= 16 ? 34 : 0};
        q->hm.title = isnan(c.base[k]) ? pprintf(p, e, "%s-composition", names[k])
                                       : pprintf(p, e, "%s-composition (random %.3f)", names[k], c.base[k]);
        if (!q->hm.title) return -1;
    }
    p->fig.shared_bar = cs;
    snprintf(p->title, sizeof p->title, "composition into layer %d", c.l2);
    snprintf(p->head_txt, sizeof p->head_txt, "%d.* -> %d.*", c.l2 - 1, c.l2);
    note(p, "Q: |W_OV(1) W_QK(2)|, K: |W_OV(1) W_QK(2)^T|, V: |W_OV(1) W_OV(2)|, each divided by "
            "the norms of the two (Frobenius; Elhage et al. 2021)");
    note(p, "the colour bar marks the mean score of random Gaussian heads of the same shapes (%s)",
         p->run_txt);
    return 0;
}

/* ---------------------------------------------------------- spectrum */

typedef struct sv_rows {
    pic *p;
    double *qk, *ov; /* (L*H, D) */
    int n;
} sv_rows;

static int sv_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    sv_rows *s = ctx;
    (void)nc, (void)e;
    int l = (int)x[0], h = (int)x[1], i = (int)x[3], H = s->p->H, D = s->p->D;
    if (l < 0 || l >= s->p->L || h < 0 || h >= H || i < 0 || i >= D || !t[2]) return 0;
    double *dst = strcmp(t[2], "qk") == 0 ? s->qk : strcmp(t[2], "ov") == 0 ? s->ov : NULL;
    if (dst) dst[(l * H + h) * D + i] = x[4], s->n++;
    return 0;
}

static int pic_spectrum(pic *p, al_err *e) {
    int LH = p->L * p->H, D = p->D;
    sv_rows s = {.p = p};
    s.qk = pcalloc(p, (size_t)LH * D, sizeof(double), e);
    s.ov = pcalloc(p, (size_t)LH * D, sizeof(double), e);
    double *xs = pcalloc(p, (size_t)D, sizeof(double), e);
    if (!s.qk || !s.ov || !xs) return -1;
    for (int i = 0; i < LH * D; i++) s.qk[i] = s.ov[i] = NAN;
    if (p->st) {
        long run;
        if (pick_run(p, "singular_values x", NULL, NULL, &run, e)) return -1;
        char rs[32];
        snprintf(rs, sizeof rs, "%ld", run);
        const char *params[1] = {rs};
        if (run && al_store_query(p->st, "SELECT layer, head, circuit, idx, value FROM "
                                         "singular_values WHERE run_id = ?1",
                                  params, 1, sv_row, &s, e))
            return -1;
        if (s.n) run_note(p, "circuits", run);
    }
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
        al_series *sr = pcalloc(p, 2, sizeof *sr, e);
        if (!sr) return -1;
        sr[0] = (al_series){xs, s.qk + (size_t)i * D, D, NULL, 0x1F77B4, 2, 0, 0, 0, NULL};
        sr[1] = (al_series){xs, s.ov + (size_t)i * D, D, NULL, 0xFF7F0E, 2, 0, 0, 0, NULL};
        al_panel *q = add_panel(p, AL_PANEL_LINES);
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
        q->ln.title = pprintf(p, e, "head %d.%d", i / p->H, i % p->H);
        if (i % p->H == 0) q->ln.y_title = pprintf(p, e, "layer %d", i / p->H);
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
    note(p, "each head's %d nonzero singular values, largest first, log scale shared by all panels (%s)",
         D, p->run_txt);
    return 0;
}

/* ---------------------------------------------------------- ablation */

typedef struct abl_rows {
    pic *p;
    float *single; /* (L, H) */
    float *pair;   /* (LH, LH) interaction, NaN = absent */
    int n_single, n_pair;
    char method[32]; /* of the rows read */
} abl_rows;

/* "l.h" -> flat index, -1 if malformed or out of range. */
static int parse_head(pic *p, const char *s, const char **end) {
    int l, h, k = 0;
    if (sscanf(s, "%d.%d%n", &l, &h, &k) != 2 || l < 0 || l >= p->L || h < 0 || h >= p->H) return -1;
    *end = s + k;
    return l * p->H + h;
}

static int abl_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    abl_rows *a = ctx;
    (void)nc, (void)e;
    const char *end;
    if (!t[0] || !t[1]) return 0;
    if (t[4] && !a->method[0]) snprintf(a->method, sizeof a->method, "%s", t[4]);
    int i = parse_head(a->p, t[1], &end);
    if (i < 0) return 0;
    if (strcmp(t[0], "single") == 0 && !*end) {
        a->single[i] = (float)x[2];
        a->n_single++;
    } else if (strcmp(t[0], "pair") == 0 && *end == ',') {
        int j = parse_head(a->p, end + 1, &end);
        if (j < 0 || *end) return 0;
        int LH = a->p->L * a->p->H, lo = i < j ? i : j, hi = i < j ? j : i;
        a->pair[lo * LH + hi] = (float)x[3];
        a->n_pair++;
    }
    return 0;
}

static const char *abl_metric(pic *p, al_err *e) {
    const char *m = p->o->metric ? p->o->metric : "delta_loss";
    if (strcmp(m, "delta_loss") && strcmp(m, "delta_loss_copy") && strcmp(m, "delta_loss_probe")) {
        al_errf(e, "--metric %s: for ablation use delta_loss, delta_loss_copy or delta_loss_probe", m);
        return NULL;
    }
    return m;
}

/* The interaction panel: rows = heads that appear first in a pair,
 * columns = heads that appear second (8 x 8 for the cross-layer pairs of
 * a 2-layer model). */
static int abl_pair_panel(pic *p, abl_rows *a, al_cscale *cs, al_err *e) {
    int LH = p->L * p->H, rows[256], cols[256], nr = 0, nc = 0;
    if (LH > 256) return al_errf(e, "too many heads (%d) for a pair picture", LH);
    for (int i = 0; i < LH; i++) {
        int r = 0, c = 0;
        for (int j = 0; j < LH; j++) r |= !isnan(a->pair[i * LH + j]), c |= !isnan(a->pair[j * LH + i]);
        if (r) rows[nr++] = i;
        if (c) cols[nc++] = i;
    }
    float *v = pfloats(p, (size_t)nr * nc, e);
    const char **rl = pcalloc(p, (size_t)nr, sizeof(char *), e), **cl = pcalloc(p, (size_t)nc, sizeof(char *), e);
    if (!v || !rl || !cl) return -1;
    for (int r = 0; r < nr; r++) {
        if (!(rl[r] = pprintf(p, e, "%d.%d", rows[r] / p->H, rows[r] % p->H))) return -1;
        for (int c = 0; c < nc; c++) v[r * nc + c] = a->pair[rows[r] * LH + cols[c]];
    }
    for (int c = 0; c < nc; c++)
        if (!(cl[c] = pprintf(p, e, "%d.%d", cols[c] / p->H, cols[c] % p->H))) return -1;
    al_cscale_fit(cs, v, (size_t)nr * nc);
    al_panel *q = add_panel(p, AL_PANEL_HEATMAP);
    q->hm = (al_hm){.v = v, .rows = nr, .cols = nc, .row_labels = rl, .col_labels = cl,
                    .title = "pair interaction: Δ(pair) - Δ(h1) - Δ(h2)",
                    .row_title = "head h1", .col_title = "head h2", .cs = cs, .bar = 1,
                    .annotate = 1, .cell = nr <= 16 && nc <= 16 ? 34 : 0};
    return 0;
}

static int pic_ablation(pic *p, al_err *e) {
    const char *metric = abl_metric(p, e);
    if (!metric) return -1;
    int LH = p->L * p->H;
    abl_rows a = {.p = p, .single = pfloats(p, (size_t)LH, e), .pair = pfloats(p, (size_t)LH * LH, e)};
    if (!a.single || !a.pair) return -1;
    for (int i = 0; i < LH; i++) a.single[i] = NAN;
    for (int i = 0; i < LH * LH; i++) a.pair[i] = NAN;
    const char *meth = p->o->method;
    char sql[512], rs[32];
    long run_s, run_p;
    if (pick_run(p, "ablations x", "x.kind = 'single' AND (?2 IS NULL OR x.method = ?2)", meth, &run_s, e) ||
        pick_run(p, "ablations x", "x.kind = 'pair' AND (?2 IS NULL OR x.method = ?2)", meth, &run_p, e))
        return -1;
    if (!run_s && !run_p)
        return al_errf(e, "database %s has no finished ablation run for model %s%s%s (run attnlab "
                       "ablate --each --db)", p->o->db, p->dir, meth ? " with method " : "", meth ? meth : "");
    snprintf(sql, sizeof sql, "SELECT kind, heads, %s, interaction, method FROM ablations WHERE run_id = ?1 "
             "AND (?2 IS NULL OR method = ?2)", metric);
    long runs[2] = {run_s, run_p};
    for (int k = 0; k < 2; k++) {
        if (!runs[k] || (k == 1 && run_p == run_s)) continue;
        snprintf(rs, sizeof rs, "%ld", runs[k]);
        const char *params[2] = {rs, meth};
        if (al_store_query(p->st, sql, params, 2, abl_row, &a, e)) return -1;
        run_note(p, "ablate", runs[k]);
    }
    const char *bar_label = strcmp(metric, "delta_loss") == 0 ? "Δloss (nats)"
                            : strcmp(metric, "delta_loss_copy") == 0 ? "Δloss at copy positions"
                                                                    : "Δloss on the probe's 2nd repeat";
    al_cscale *cs = scale(p, 0, 1, NAN, NAN, bar_label);
    al_cscale_fit(cs, a.single, (size_t)LH);
    const char **rl = pcalloc(p, (size_t)p->L, sizeof(char *), e);
    if (!rl) return -1;
    for (int l = 0; l < p->L; l++)
        if (!(rl[l] = pprintf(p, e, "layer %d", l))) return -1;
    if (a.n_single) {
        al_panel *pn = add_panel(p, AL_PANEL_HEATMAP);
        pn->hm = (al_hm){.v = a.single, .rows = p->L, .cols = p->H, .row_labels = rl,
                         .title = "each head ablated alone", .col_title = "head", .cs = cs,
                         .bar = 1, .annotate = 1, .cell = 34};
    }
    if (a.n_pair && abl_pair_panel(p, &a, scale(p, 1, 1, NAN, NAN, "interaction (nats)"), e)) return -1;
    snprintf(p->title, sizeof p->title, "%s-ablation: what each head is worth", a.method);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    note(p, "Δ = loss with the head(s) ablated - loss with all heads; %s = %s", metric,
         strcmp(metric, "delta_loss") == 0 ? "validation text" :
         strcmp(metric, "delta_loss_copy") == 0 ? "positions whose next token already appeared"
                                                 : "second repeat of the random-token probe");
    if (a.n_pair)
        note(p, "interaction < 0: the pair costs less than the two apart (heads in series); > 0: "
                "each covers for the other");
    note(p, "%s", p->run_txt);
    return 0;
}

/* ---------------------------------------------------------- pruning */

typedef struct xy {
    double *x, *y;
    int n, cap;
} xy;

static int xy_row(void *ctx, int nc, const char *const *t, const double *v, al_err *e) {
    xy *s = ctx;
    (void)nc, (void)t;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double *x = realloc(s->x, sizeof(double) * (size_t)cap), *y;
        if (x) s->x = x;
        y = x ? realloc(s->y, sizeof(double) * (size_t)cap) : NULL;
        if (!x || !y) return al_errf(e, "out of memory");
        s->y = y;
        s->cap = cap;
    }
    s->x[s->n] = v[0];
    s->y[s->n++] = v[1];
    return 0;
}

static int pic_pruning(pic *p, al_err *e) {
    static const char *const methods[3] = {"ablation", "gradient", "random"};
    static const uint32_t colours[3] = {0x1F77B4, 0xFF7F0E, 0x7F7F7F};
    al_series *sr = pcalloc(p, 3, sizeof *sr, e);
    if (!sr) return -1;
    int ns = 0;
    for (int k = 0; k < 3; k++) {
        long run;
        if (pick_run(p, "pruning_steps x", "x.method = ?2", methods[k], &run, e)) return -1;
        if (!run) continue;
        char rs[32];
        snprintf(rs, sizeof rs, "%ld", run);
        const char *params[2] = {rs, methods[k]};
        xy s = {0};
        int rc = al_store_query(p->st, "SELECT heads_left, loss FROM pruning_steps WHERE run_id = ?1 "
                                "AND method = ?2 ORDER BY step", params, 2, xy_row, &s, e);
        int kept = keep(p, s.x, e) && keep(p, s.y, e);
        if (rc || (s.cap && !kept)) return -1;
        if (!s.n) continue;
        sr[ns++] = (al_series){s.x, s.y, s.n, methods[k], colours[k], 2, 1, k == 2 ? 5 : 0, 0, NULL};
        run_note(p, methods[k], run);
    }
    if (!ns)
        return al_errf(e, "database %s has no finished pruning run for model %s (run attnlab prune --db)",
                       p->o->db, p->dir);
    al_panel *q = add_panel(p, AL_PANEL_LINES);
    q->ln.s = sr;
    q->ln.n = ns;
    q->ln.w = 480;
    q->ln.h = 280;
    q->ln.x_reverse = 1;
    q->ln.x_integer = 1;
    q->ln.legend = 1;
    q->ln.x_title = "heads remaining (pruning proceeds to the right)";
    q->ln.y_title = "validation loss (nats)";
    snprintf(p->title, sizeof p->title, "pruning: loss as heads are removed");
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    note(p, "each step removes the head the method ranks least important: ablation = Δloss, "
            "gradient = E|dL/dg| (Michel et al. 2019), random = baseline");
    note(p, "%s", p->run_txt);
    return 0;
}

/* ---------------------------------------------------------- training */

typedef struct ths_rows {
    pic *p;
    long *steps;
    int n_steps;
    double *v; /* (LH, n_steps) */
} ths_rows;

static int ths_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    ths_rows *s = ctx;
    (void)nc, (void)t, (void)e;
    int l = (int)x[1], h = (int)x[2];
    if (l < 0 || l >= s->p->L || h < 0 || h >= s->p->H) return 0;
    /* steps are sorted; find this one */
    int lo = 0, hi = s->n_steps - 1;
    long st = (long)x[0];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (s->steps[mid] < st) lo = mid + 1;
        else hi = mid;
    }
    if (s->n_steps && s->steps[lo] == st) s->v[(size_t)(l * s->p->H + h) * s->n_steps + lo] = x[3];
    return 0;
}

typedef struct tlog {
    double *step, *train, *val;
    int n, cap;
} tlog;

static int tlog_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    tlog *s = ctx;
    (void)nc, (void)t;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        double **a[3] = {&s->step, &s->train, &s->val};
        for (int k = 0; k < 3; k++) {
            double *q = realloc(*a[k], sizeof(double) * (size_t)cap);
            if (!q) return al_errf(e, "out of memory");
            *a[k] = q;
        }
        s->cap = cap;
    }
    s->step[s->n] = x[0], s->train[s->n] = x[1], s->val[s->n] = x[2];
    s->n++;
    return 0;
}

static int train_loss_panel(pic *p, const char *rs, tlog *t, al_err *e) {
    const char *params[1] = {rs};
    int rc = al_store_query(p->st, "SELECT step, train_loss, val_loss FROM train_log WHERE run_id = ?1 "
                            "ORDER BY step", params, 1, tlog_row, t, e);
    int kept = keep(p, t->step, e) && keep(p, t->train, e) && keep(p, t->val, e);
    if (rc || (t->cap && !kept)) return -1;
    if (!t->n) return al_errf(e, "database %s: training run %s has no train_log rows", p->o->db, rs);
    al_series *sr = pcalloc(p, 2, sizeof *sr, e);
    if (!sr) return -1;
    sr[0] = (al_series){t->step, t->train, t->n, "train loss", 0x1F77B4, 2, 0, 0, 0, NULL};
    sr[1] = (al_series){t->step, t->val, t->n, "validation loss", 0xFF7F0E, 2, 1, 0, 0, NULL};
    al_panel *q = add_panel(p, AL_PANEL_LINES);
    q->ln = (al_lines){.s = sr, .n = 2, .title = "loss", .x_title = "step", .y_title = "loss (nats)",
                       .w = 420, .h = 260, .legend = 1, .x_lo = NAN, .x_hi = NAN, .y_lo = NAN,
                       .y_hi = NAN, .hline = NAN, .x_integer = 1};
    return 0;
}

/* Per-head metric over steps: the strongest heads (by their largest value)
 * in colour with a legend, the others thin grey. */
static int train_head_panel(pic *p, const char *rs, const tlog *t, const char *metric, al_err *e) {
    int LH = p->L * p->H;
    ths_rows s = {.p = p, .n_steps = t->n};
    s.steps = pcalloc(p, (size_t)t->n, sizeof(long), e);
    s.v = pcalloc(p, (size_t)LH * t->n, sizeof(double), e);
    if (!s.steps || !s.v) return -1;
    for (int i = 0; i < t->n; i++) s.steps[i] = (long)t->step[i];
    for (size_t i = 0; i < (size_t)LH * t->n; i++) s.v[i] = NAN;
    const char *params[2] = {rs, metric};
    if (al_store_query(p->st, "SELECT step, layer, head, value FROM train_head_scores WHERE run_id = ?1 "
                       "AND metric = ?2", params, 2, ths_row, &s, e))
        return -1;
    double *best = pcalloc(p, (size_t)LH, sizeof(double), e);
    int *order = pcalloc(p, (size_t)LH, sizeof(int), e);
    al_series *sr = pcalloc(p, (size_t)LH, sizeof *sr, e);
    if (!best || !order || !sr) return -1;
    int any = 0;
    for (int i = 0; i < LH; i++) {
        best[i] = -INFINITY;
        for (int k = 0; k < t->n; k++)
            if (!isnan(s.v[(size_t)i * t->n + k])) best[i] = fmax(best[i], s.v[(size_t)i * t->n + k]), any = 1;
        order[i] = i;
    }
    if (!any) return al_errf(e, "database %s: training run %s has no '%s' head scores", p->o->db, rs, metric);
    for (int i = 1; i < LH; i++) /* insertion sort, best first */
        for (int j = i; j > 0 && best[order[j]] > best[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1], order[j - 1] = tmp;
        }
    int n_col = LH < 6 ? LH : 6, n = 0;
    for (int r = 0; r < LH; r++) { /* best first: drawn on top, listed first */
        int i = order[r], col = r < n_col;
        sr[n++] = (al_series){t->step, s.v + (size_t)i * t->n, t->n,
                              col ? pprintf(p, e, "head %d.%d", i / p->H, i % p->H)
                                  : (r == n_col ? "other heads" : NULL),
                              col ? al_plot_colour(r) : 0xC0C0C0, col ? 2 : 1, 0, 0, 0, NULL};
        if (col && !sr[n - 1].label) return -1;
    }
    al_panel *q = add_panel(p, AL_PANEL_LINES);
    int ind = strcmp(metric, "induction") == 0;
    q->ln = (al_lines){.s = sr, .n = n, .title = pprintf(p, e, "%s score per head", metric),
                       .x_title = "step", .y_title = pprintf(p, e, "%s score", metric), .w = 420,
                       .h = 260, .legend = 1, .x_lo = NAN, .x_hi = NAN, .y_lo = NAN, .y_hi = NAN,
                       .hline = ind ? AL_TH_INDUCTION : NAN,
                       .hline_label = ind ? "induction head: > " AL_TH_STR(AL_TH_INDUCTION) : NULL,
                       .x_integer = 1};
    return q->ln.title && q->ln.y_title ? 0 : -1;
}

static int pic_training(pic *p, al_err *e) {
    const char *metric = p->o->metric ? p->o->metric : "induction";
    if (strcmp(metric, "induction") && strcmp(metric, "prev_token") && strcmp(metric, "duplicate_token"))
        return al_errf(e, "--metric %s: for training use induction, prev_token or duplicate_token", metric);
    long run = p->o->run_id;
    if (run <= 0) {
        char mid[32];
        snprintf(mid, sizeof mid, "%lld", (long long)p->model_id);
        qval q;
        if (query1(p, "SELECT MAX(run_id) FROM runs WHERE kind = 'train' AND model_id = ?1", mid,
                   NULL, &q, e))
            return -1;
        if (!q.found)
            return al_errf(e, "database %s has no training run for model %s (train with --db, or give "
                           "--run ID)", p->o->db, p->dir);
        run = (long)q.v;
    }
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    tlog t = {0};
    if (train_loss_panel(p, rs, &t, e) || train_head_panel(p, rs, &t, metric, e)) return -1;
    run_note(p, "train", run);
    snprintf(p->title, sizeof p->title, "training: loss and %s score over steps", metric);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    note(p, "%s score of every head, measured on the random-token probe at each evaluation "
            "(the %d highest in colour); %s", metric, p->L * p->H < 6 ? p->L * p->H : 6, p->run_txt);
    return 0;
}

/* ---------------------------------------------------------- patching */

/* What every run picture reads of its run first: r.kind, r.status,
 * r.model_id, then the task from the command's run table (NULL: no row
 * there, the run did not finish). */
typedef struct run_head {
    long run;
    char kind[16], status[16], task[16];
    int64_t model_id;
    int found, has_row;
} run_head;

static void run_head_read(run_head *h, const char *const *t, const double *x) {
    h->found = 1;
    snprintf(h->kind, sizeof h->kind, "%s", t[0] ? t[0] : "");
    snprintf(h->status, sizeof h->status, "%s", t[1] ? t[1] : "");
    h->model_id = isnan(x[2]) ? 0 : (int64_t)x[2];
    h->has_row = t[3] != NULL;
    snprintf(h->task, sizeof h->task, "%s", t[3] ? t[3] : "");
}

/* A patch or paths run: what runs and patching_runs say about it. */
typedef struct prun {
    run_head h;
    char direction[16], component[16];
    int n_pairs, seq_len;
    double m_clean, m_corr;
    char *config; /* runs.config_json (malloc'd) */
    char hash[24]; /* patching_runs.task_hash */
} prun;

static int prun_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    prun *r = ctx;
    (void)nc;
    run_head_read(&r->h, t, x);
    snprintf(r->direction, sizeof r->direction, "%s", t[4] ? t[4] : "");
    snprintf(r->component, sizeof r->component, "%s", t[5] ? t[5] : "");
    r->n_pairs = isnan(x[6]) ? 0 : (int)x[6];
    r->seq_len = isnan(x[7]) ? 0 : (int)x[7];
    r->m_clean = x[8], r->m_corr = x[9];
    snprintf(r->hash, sizeof r->hash, "%s", t[11] ? t[11] : "");
    free(r->config);
    r->config = t[10] ? strdup(t[10]) : NULL;
    return t[10] && !r->config ? al_errf(e, "out of memory") : 0;
}

/* What a picture needs of a run, for choosing one: an SQL condition on
 * the kind's table (x) and how to say it; NULL: any finished run. */
typedef struct run_need {
    const char *cond, *words;
} run_need;

/* The run to draw: --run, else the newest finished run of `kind` of the
 * model with a row in `table` (patching_runs, attribution_runs) meeting
 * need (a --data attribute run has no attribution patching to draw, so
 * the attrpatch picture looks past it). */
static int latest_of(pic *p, const char *table, const char *kind, const run_need *need, long *run,
                     al_err *e) {
    *run = p->o->run_id;
    if (*run > 0) return 0;
    char sql[384], mid[32];
    snprintf(sql, sizeof sql, "SELECT MAX(x.run_id) FROM %s x JOIN runs r ON r.run_id = x.run_id "
             "WHERE x.model_id = ?1 AND r.status = 'done' AND r.kind = ?2%s%s%s", table,
             need ? " AND (" : "", need ? need->cond : "", need ? ")" : "");
    snprintf(mid, sizeof mid, "%lld", (long long)p->model_id);
    qval q;
    if (query1(p, sql, mid, kind, &q, e)) return -1;
    if (!q.found)
        return al_errf(e, "database %s has no finished %s run%s%s for model %s (run attnlab %s "
                       "--db, or give --run ID)", p->o->db, kind, need ? " " : "",
                       need ? need->words : "", p->dir, kind);
    *run = (long)q.v;
    return 0;
}

/* A run against what a picture needs: it exists, is of `kind`, finished
 * (with its row in the kind's table), and is of this model. */
static int run_checked(pic *p, const run_head *h, const char *kind, const char *what, al_err *e) {
    if (!h->found) return al_errf(e, "database %s has no run %ld", p->o->db, h->run);
    if (strcmp(h->kind, kind) != 0)
        return al_errf(e, "run %ld is a '%s' run; --what %s draws the runs of attnlab %s", h->run,
                       h->kind, what, kind);
    if (strcmp(h->status, "done") != 0 || !h->has_row)
        return al_errf(e, "run %ld did not finish (status %s)", h->run, h->status);
    if (p->model_id && h->model_id != p->model_id)
        return al_errf(e, "run %ld analysed another model than %s", h->run, p->dir);
    run_note(p, kind, h->run);
    return 0;
}

/* Read run h->run (latest_of's when 0) of `kind` from runs and `table`:
 * run_head's four columns, then cols; fn fills ctx (its run_head is h). */
static int run_read(pic *p, const char *table, const char *kind, const run_need *need,
                    const char *cols, al_store_row_fn fn, void *ctx, run_head *h, al_err *e) {
    if (latest_of(p, table, kind, need, &h->run, e)) return -1;
    char rs[32], sql[1024];
    snprintf(rs, sizeof rs, "%ld", h->run);
    snprintf(sql, sizeof sql, "SELECT r.kind, r.status, r.model_id, x.task, %s FROM runs r LEFT "
             "JOIN %s x ON x.run_id = r.run_id WHERE r.run_id = ?1", cols, table);
    const char *params[1] = {rs};
    return al_store_query(p->st, sql, params, 1, fn, ctx, e);
}

/* Run `run` (the latest finished one of `kind` for the model when 0) of
 * kind "patch" or "paths", checked (run_checked). */
static int patch_run_info(pic *p, const char *kind, prun *r, al_err *e) {
    memset(r, 0, sizeof *r);
    if (run_read(p, "patching_runs", kind, NULL, "x.direction, x.component, x.n_pairs, x.seq_len, "
                 "x.m_clean, x.m_corr, r.config_json, x.task_hash", prun_row, r, &r->h, e)) {
        free(r->config);
        return -1;
    }
    keep(p, r->config, e); /* freed with the picture */
    return run_checked(p, &r->h, kind, strcmp(kind, "patch") == 0 ? "patching" : "paths", e);
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
        snprintf(e2.msg, sizeof e2.msg, "its pairs are no longer the run's (%d pairs of %d "
                 "tokens, fingerprint %s)", r->n_pairs, r->seq_len, r->hash);
        rc = -1;
    }
    if (rc) {
        note(p, "positions are numbered: the task could not be re-made to label them (%s)", e2.msg);
        fprintf(stderr, "attnlab: note: run %ld: positions are numbered: the task could not be "
                        "re-made to label them (%s)\n", r->h.run, e2.msg);
        return NULL;
    }
    int lo = t.T;
    for (int n = 0; n < t.N; n++) lo = t.len[n] < lo ? t.len[n] : lo;
    if (lo < t.T)
        note(p, "the pairs are %d to %d tokens long: position t is a different token in each "
                "pair, and the labels are pair 0's", lo, t.T);
    const char **lab = pcalloc(p, (size_t)t.T, sizeof(char *), e);
    for (int i = 0; lab && i < t.T; i++) {
        char b[LABEL_CAP];
        if (i < t.len[0]) al_tok_display(p->tok, t.clean[i], b, sizeof b);
        else snprintf(b, sizeof b, "(pad)");
        if (!(lab[i] = pprintf(p, e, "%d %s", i, b))) lab = NULL;
    }
    al_pairs_free(&t);
    return lab;
}

typedef struct patch_cells {
    pic *p;
    float *v;
    int comp, rows, cols, n;
} patch_cells;

static int patch_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    patch_cells *c = ctx;
    (void)nc, (void)t, (void)e;
    int l = (int)x[0], h = isnan(x[1]) ? -1 : (int)x[1], pos = isnan(x[2]) ? -1 : (int)x[2];
    int H = c->p->H, row, col;
    if (c->comp == AL_PATCH_RESID) row = l, col = pos;
    else if (c->comp == AL_PATCH_HEAD) row = l, col = h;
    else row = h < 0 || h >= H ? -1 : l * H + h, col = pos;
    if (row < 0 || row >= c->rows || col < 0 || col >= c->cols) return 0;
    c->v[(size_t)row * c->cols + col] = (float)x[3];
    c->n++;
    return 0;
}

/* Two note lines on the direction and the effect. */
static void dir_notes(pic *p, const char *d) {
    int noise = strcmp(d, "noise") == 0;
    note(p, "%s", noise ? "noising: the clean run with one value taken from the corrupted run"
                        : "denoising: the corrupted run with one value taken from the clean run");
    note(p, "%s", noise ? "effect = (M_clean - M_patched) / (M_clean - M_corr); 1 = the patch "
                          "breaks the behaviour"
                        : "effect = (M_patched - M_corr) / (M_clean - M_corr); 1 = the patch "
                          "restores it");
}

static int pic_patching(pic *p, al_err *e) {
    prun r;
    if (patch_run_info(p, "patch", &r, e)) return -1;
    al_patch_component comp;
    if (al_patch_component_parse(r.component, &comp))
        return al_errf(e, "run %ld: unknown component '%s'", r.h.run, r.component);
    int T = r.seq_len, L = p->L, H = p->H;
    patch_cells c = {.p = p, .comp = comp, .rows = comp == AL_PATCH_RESID || comp == AL_PATCH_HEAD ? L : L * H,
                     .cols = comp == AL_PATCH_HEAD ? H : T};
    if (T < 1 || T > 100000) return al_errf(e, "run %ld: bad sequence length %d", r.h.run, T);
    if (!(c.v = pfloats(p, (size_t)c.rows * c.cols, e))) return -1;
    for (int i = 0; i < c.rows * c.cols; i++) c.v[i] = NAN;
    if (run_rows(p, r.h.run, "SELECT layer, head, pos, value FROM patching WHERE run_id = ?1",
                 patch_row, &c, e))
        return -1;
    if (!c.n) return al_errf(e, "run %ld has no patching rows", r.h.run);
    const char **rl = NULL, **cl = NULL;
    if (comp == AL_PATCH_RESID || comp == AL_PATCH_HEAD) {
        rl = pcalloc(p, (size_t)L, sizeof(char *), e);
        for (int l = 0; rl && l < L; l++)
            if (!(rl[l] = pprintf(p, e, comp == AL_PATCH_RESID ? "into layer %d" : "layer %d", l)))
                return -1;
        if (!rl) return -1;
    } else if (!(rl = head_labels(p, 0, L, e))) {
        return -1;
    }
    if (comp != AL_PATCH_HEAD) cl = position_labels(p, &r, e);
    al_cscale *cs = scale(p, 0, 1, NAN, NAN, "normalised effect");
    al_cscale_fit(cs, c.v, (size_t)c.rows * c.cols);
    al_panel *q = add_panel(p, AL_PANEL_HEATMAP);
    static const char *const row_titles[] = {"resid", "layer", "head",
                                             "head (query input)", "head (key input)",
                                             "head (value input)", "head (attention row)"};
    q->hm = (al_hm){.v = c.v, .rows = c.rows, .cols = c.cols, .row_labels = rl, .col_labels = cl,
                    .row_title = row_titles[comp],
                    .col_title = comp == AL_PATCH_HEAD ? "head"
                                 : cl ? "position (pair 0's clean token)" : "position",
                    .cs = cs, .bar = 1, .annotate = comp == AL_PATCH_HEAD,
                    .cell = comp == AL_PATCH_HEAD ? 34 : c.cols <= 128 ? 12 : 0};
    snprintf(p->title, sizeof p->title, "activation patching: %s, %s (task %s)", r.component,
             r.direction, r.h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    dir_notes(p, r.direction);
    note(p, "M_clean = %.4f, M_corr = %.4f (mean %s over %d pairs)", r.m_clean, r.m_corr,
         strcmp(r.h.task, "induction") == 0 ? "log p of the next token" : "logit difference",
         r.n_pairs);
    note(p, "%s", p->run_txt);
    return 0;
}

typedef struct path_cells {
    pic *p;
    float *v[4]; /* q, k, v: (2+H, H); direct: (2+H, 1) */
    int n;
} path_cells;

static int path_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    path_cells *c = ctx;
    (void)nc, (void)e;
    int H = c->p->H, s = -1, ch = -1;
    if (!t[0] || !t[2]) return 0;
    if (strcmp(t[0], "embed") == 0) s = 0;
    else if (strcmp(t[0], "pos") == 0) s = 1;
    else if (strncmp(t[0], "0.", 2) == 0) s = 2 + atoi(t[0] + 2);
    for (int k = 0; k < 4; k++)
        if (strcmp(t[2], al_paths_channel_name(k)) == 0) ch = k;
    int h = ch == 3 ? 0 : isnan(x[1]) ? -1 : (int)x[1], w = ch == 3 ? 1 : H;
    if (s < 0 || s >= 2 + H || ch < 0 || h < 0 || h >= w) return 0;
    c->v[ch][s * w + h] = (float)x[3];
    c->n++;
    return 0;
}

static int pic_paths(pic *p, al_err *e) {
    prun r;
    if (patch_run_info(p, "paths", &r, e)) return -1;
    if (p->L > 2) return al_errf(e, "path patching covers 1- and 2-layer models (%d layers)", p->L);
    int H = p->H, ns = 2 + H;
    path_cells c = {.p = p};
    float *all = pfloats(p, (size_t)ns * (3 * H + 1), e);
    if (!all) return -1;
    for (int k = 0; k < 4; k++) c.v[k] = all + (size_t)k * ns * H;
    for (int i = 0; i < ns * (3 * H + 1); i++) all[i] = NAN;
    if (run_rows(p, r.h.run, "SELECT sender, receiver_head, channel, value FROM path_patching "
                 "WHERE run_id = ?1", path_row, &c, e))
        return -1;
    if (!c.n) return al_errf(e, "run %ld has no path_patching rows", r.h.run);
    const char **rl = pcalloc(p, (size_t)ns, sizeof(char *), e);
    const char **cl = p->L == 2 ? head_labels(p, 1, 2, e) : NULL;
    static const char *const logits[1] = {"logits"};
    if (!rl || (p->L == 2 && !cl)) return -1;
    for (int s = 0; s < ns; s++) {
        char b[32];
        if (!(rl[s] = pprintf(p, e, "%s", al_paths_sender_name(s, b, sizeof b)))) return -1;
    }
    al_cscale *cs = scale(p, 0, 1, NAN, NAN, "normalised effect");
    al_cscale_fit(cs, all, (size_t)ns * (3 * H + 1));
    static const char *const titles[4] = {"into each layer-1 head's queries (q)",
                                          "into each layer-1 head's keys (k)",
                                          "into each layer-1 head's values (v)", "direct"};
    for (int k = p->L == 2 ? 0 : 3; k < 4; k++) {
        al_panel *q = add_panel(p, AL_PANEL_HEATMAP);
        q->hm = (al_hm){.v = c.v[k], .rows = ns, .cols = k == 3 ? 1 : H, .row_labels = rl,
                        .col_labels = k == 3 ? logits : cl, .title = titles[k],
                        .row_title = "sender", .col_title = k == 3 ? "receiver" : "receiver head",
                        .cs = cs, .annotate = 1, .cell = 34};
    }
    p->fig.shared_bar = cs;
    snprintf(p->title, sizeof p->title, "path patching: sender -> receiver, %s (task %s)",
             r.direction, r.h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    dir_notes(p, r.direction);
    note(p, "only the path from the sender to the receiver carries the other run's value; "
            "every other head is frozen");
    note(p, "an induction circuit: a previous-token head (sender) into an induction head's keys (k)");
    note(p, "M_clean = %.4f, M_corr = %.4f (mean %s over %d pairs); %s", r.m_clean, r.m_corr,
         strcmp(r.h.task, "induction") == 0 ? "log p of the next token" : "logit difference",
         r.n_pairs, p->run_txt);
    return 0;
}

/* -------------------------------------------------------- attribution */

/* An attribute run: what runs and attribution_runs say about it. */
typedef struct arun {
    run_head h;
    char metric_kind[16], direction[16];
    int seq_len, n_items;
    double kind_dloss[3]; /* direct, head, virtual: all terms of the kind removed */
} arun;

static int arun_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    arun *r = ctx;
    (void)nc, (void)e;
    run_head_read(&r->h, t, x);
    snprintf(r->metric_kind, sizeof r->metric_kind, "%s", t[4] ? t[4] : "");
    snprintf(r->direction, sizeof r->direction, "%s", t[5] ? t[5] : "");
    r->seq_len = isnan(x[6]) ? 0 : (int)x[6];
    r->n_items = isnan(x[7]) ? 0 : (int)x[7];
    for (int k = 0; k < 3; k++) r->kind_dloss[k] = x[8 + k];
    return 0;
}

/* Run --run (else the model's newest finished attribute run meeting
 * need), checked. */
static int attr_run_info(pic *p, const run_need *need, arun *r, al_err *e) {
    memset(r, 0, sizeof *r);
    if (run_read(p, "attribution_runs", "attribute", need, "x.metric_kind, x.direction, x.seq_len, "
                 "x.n_items, x.direct_dloss, x.head_dloss, x.virtual_dloss", arun_row, r, &r->h, e))
        return -1;
    return run_checked(p, &r->h, "attribute", p->o->what, e);
}

/* What the run's values are contributions to. */
static const char *metric_words(const arun *r) {
    return strcmp(r->metric_kind, "logit_diff") == 0 ? "the logit difference (answer - wrong token)"
                                                     : "the correct token's logit";
}

/* Token text as a label: spaces as ␣ and control bytes as \xNN, as the
 * tokenizer's display form shows them (the text is the run's, unchecked). */
static void token_text(const char *s, char *buf, size_t cap) {
    size_t o = 0;
    for (; *s && o + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == ' ') o += (size_t)snprintf(buf + o, cap - o, "\xe2\x90\xa3");
        else if (c < 0x20 || c == 0x7F) o += (size_t)snprintf(buf + o, cap - o, "\\x%02X", c);
        else buf[o++] = (char)c;
    }
    buf[o] = 0;
}

typedef struct dla_cells {
    pic *p;
    float *v;
    const char **lab; /* (cols) */
    int rows, cols, n;
} dla_cells;

/* component, pos, value -> the cell (row: embed, pos, then heads). */
static int dla_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    dla_cells *c = ctx;
    (void)nc, (void)e;
    const char *end;
    int row = !t[0] ? -1 : strcmp(t[0], "embed") == 0 ? 0 : strcmp(t[0], "pos") == 0 ? 1 : -1;
    if (row < 0 && t[0]) {
        int k = parse_head(c->p, t[0], &end);
        row = k >= 0 && !*end ? 2 + k : -1;
    }
    int col = isnan(x[1]) ? -1 : (int)x[1];
    if (row < 0 || row >= c->rows || col < 0 || col >= c->cols) return 0;
    c->v[(size_t)row * c->cols + col] = (float)x[2];
    c->n++;
    return 0;
}

static int dla_token(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    dla_cells *c = ctx;
    (void)nc;
    int pos = isnan(x[0]) ? -1 : (int)x[0];
    if (pos < 0 || pos >= c->cols) return 0;
    char b[LABEL_CAP];
    token_text(t[1] ? t[1] : "", b, sizeof b);
    return (c->lab[pos] = pprintf(c->p, e, "%d %s", pos, b)) ? 0 : -1;
}

/* The largest mean contributions over every item, for a note. */
static int dla_top(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    char *s = ctx;
    (void)nc, (void)e;
    size_t n = strlen(s);
    snprintf(s + n, 256 - n, "%s%s %+.3f", n ? ", " : "", t[0] ? t[0] : "?", x[1]);
    return 0;
}

static int pic_dla(pic *p, al_err *e) {
    arun r;
    if (attr_run_info(p, NULL, &r, e)) return -1;
    int T = r.seq_len;
    if (T < 1 || T > 100000) return al_errf(e, "run %ld: bad sequence length %d", r.h.run, T);
    dla_cells c = {.p = p, .rows = 2 + p->L * p->H, .cols = T};
    if (!(c.v = pfloats(p, (size_t)c.rows * T, e))) return -1;
    for (int i = 0; i < c.rows * T; i++) c.v[i] = NAN;
    char top[256] = "";
    if (run_rows(p, r.h.run, "SELECT component, pos, value FROM logit_attribution WHERE run_id = "
                 "?1 AND pos IS NOT NULL", dla_row, &c, e))
        return -1;
    if (!c.n) return al_errf(e, "run %ld has no per-position logit attribution rows", r.h.run);
    if (!(c.lab = pcalloc(p, (size_t)T, sizeof(char *), e)) ||
        run_rows(p, r.h.run, "SELECT pos, text FROM attribution_tokens WHERE run_id = ?1",
                 dla_token, &c, e) ||
        run_rows(p, r.h.run, "SELECT component, value FROM logit_attribution WHERE run_id = ?1 "
                 "AND pos IS NULL AND value IS NOT NULL ORDER BY abs(value) DESC LIMIT 4",
                 dla_top, top, e))
        return -1;
    int labelled = 0;
    for (int t = 0; t < T; t++) labelled += c.lab[t] != NULL;
    for (int t = 0; labelled && t < T; t++) /* a token the run did not name: its position */
        if (!c.lab[t] && !(c.lab[t] = pprintf(p, e, "%d", t))) return -1;
    const char **rl = pcalloc(p, (size_t)c.rows, sizeof(char *), e), **hl = head_labels(p, 0, p->L, e);
    if (!rl || !hl) return -1;
    rl[0] = "embed", rl[1] = "pos";
    for (int k = 0; k < p->L * p->H; k++) rl[2 + k] = hl[k];
    al_cscale *cs = scale(p, 0, 1, NAN, NAN, "mean contribution to the metric logit");
    al_cscale_fit(cs, c.v, (size_t)c.rows * T);
    al_panel *q = add_panel(p, AL_PANEL_HEATMAP);
    q->hm = (al_hm){.v = c.v, .rows = c.rows, .cols = T, .row_labels = rl,
                    .col_labels = labelled ? c.lab : NULL, .row_title = "component",
                    .col_title = labelled ? "position (the first prompt's token)" : "position",
                    .cs = cs, .bar = 1, .cell = T <= 128 ? 14 : 0};
    snprintf(p->title, sizeof p->title, "direct logit attribution: mean contribution to %s "
             "(task %s)", strcmp(r.metric_kind, "logit_diff") == 0 ? "the logit difference"
                          : "the correct token's logit", r.h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    note(p, "each cell: the mean contribution of a component's output at that position to %s, "
            "over the task's items there; a column sums to the mean metric", metric_words(&r));
    note(p, "red raises it, blue lowers it; grey: no item at that position");
    if (top[0]) note(p, "largest mean contributions over all %d items: %s", r.n_items, top);
    note(p, "%s", p->run_txt);
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

static int term_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    term_bars *b = ctx;
    (void)nc;
    if (b->n >= b->cap || !t[0] || !t[1]) return 0;
    int g = strcmp(t[1], "direct") == 0 ? TG_DIRECT
            : strcmp(t[1], "head") == 0 ? (x[2] == 1 ? TG_HEAD1 : TG_HEAD0)
                                        : TG_VIRTUAL;
    b->v[b->n] = x[3];
    b->group[b->n] = g;
    if (!(b->lab[b->n] = pprintf(b->p, e, "%s", t[0]))) return -1;
    b->n++;
    return 0;
}

static int pic_terms(pic *p, al_err *e) {
    static const run_need need = {"x.direct_dloss IS NOT NULL", "with a path expansion"};
    arun r;
    if (attr_run_info(p, &need, &r, e)) return -1;
    int cap = 1 + p->L * p->H + p->H * p->H;
    term_bars b = {.p = p, .cap = cap};
    b.v = pcalloc(p, (size_t)cap, sizeof(double), e);
    b.group = pcalloc(p, (size_t)cap, sizeof(int), e);
    b.lab = pcalloc(p, (size_t)cap, sizeof(char *), e);
    if (!b.v || !b.group || !b.lab) return -1;
    if (run_rows(p, r.h.run, "SELECT term, kind, layer, dloss FROM path_terms WHERE run_id = ?1 "
                 "ORDER BY CASE kind WHEN 'direct' THEN 0 WHEN 'head' THEN 1 + layer ELSE 3 "
                 "END, src_head, head", term_row, &b, e))
        return -1;
    if (!b.n)
        return al_errf(e, "run %ld has no path expansion (path_terms is empty: it covers 1- and "
                       "2-layer models, and can be turned off)", r.h.run);
    /* Of the virtual terms only the largest few are named: 64 names
     * would be unreadable and most of the terms are near 0. */
    int n_virt = 0, named = 0;
    char top[256] = "";
    for (int i = 0; i < b.n; i++) n_virt += b.group[i] == TG_VIRTUAL;
    if (n_virt > TERMS_LABELLED) {
        const char **keep_lab = pcalloc(p, (size_t)b.n, sizeof(char *), e);
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
    al_panel *q = add_panel(p, AL_PANEL_BARS);
    q->bars = (al_bars){.v = b.v, .n = b.n, .group = b.group, .group_names = names,
                        .n_groups = TG_N, .labels = b.lab, .y_title = "\xce\x94 loss (nats)",
                        .bar_w = b.n > 42 ? 10 : 0, .h = 240};
    snprintf(p->title, sizeof p->title, "path expansion: loss increase with each term removed "
             "(task %s)", r.h.task);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    note(p, "each bar: how much the mean item loss rises when that term alone is subtracted from "
            "the logits (below 0: the model does better without it)");
    if (p->L == 2)
        note(p, "direct = embed+pos straight to the unembedding; 0.h, 1.h = a head reading "
                "embed+pos; 0.a>1.b = virtual head: head 0.a's output read by head 1.b's values");
    else
        note(p, "direct = embed+pos straight to the unembedding; 0.h = head h reading embed+pos");
    if (p->L == 2)
        note(p, "each kind removed at once: direct %+.3f, heads %+.3f, virtual %+.3f nats",
             r.kind_dloss[0], r.kind_dloss[1], r.kind_dloss[2]);
    else
        note(p, "each kind removed at once: direct %+.3f, heads %+.3f nats (one layer: no virtual "
                "heads)", r.kind_dloss[0], r.kind_dloss[1]);
    if (named) note(p, "the %d largest of the %d virtual terms are named: %s", named, n_virt, top);
    note(p, "%s", p->run_txt);
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

static int ap_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    ap_points *a = ctx;
    (void)nc, (void)e;
    int g = ap_grid(t[0]);
    a->rows++;
    a->compared += t[2] != NULL;
    if (g < 0 || a->n[g] >= a->cap || !isfinite(x[1]) || !isfinite(x[2])) return 0;
    a->x[g][a->n[g]] = x[1];
    a->y[g][a->n[g]++] = x[2];
    a->lo = fmin(a->lo, fmin(x[1], x[2]));
    a->hi = fmax(a->hi, fmax(x[1], x[2]));
    return 0;
}

typedef struct ap_agree {
    pic *p;
    const char *lab[AL_AP_NGRID];
} ap_agree;

static int ap_agree_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    ap_agree *a = ctx;
    (void)nc;
    int g = ap_grid(t[0]);
    if (g < 0) return 0;
    char pe[16] = "n/a", sp[16] = "n/a";
    if (!isnan(x[2])) snprintf(pe, sizeof pe, "%.3f", x[2]);
    if (!isnan(x[3])) snprintf(sp, sizeof sp, "%.3f", x[3]);
    a->lab[g] = pprintf(a->p, e, "%s: n %.0f, Pearson %s, Spearman %s, top-5 shared %.0f",
                        t[0], x[1], pe, sp, isnan(x[4]) ? 0 : x[4]);
    return a->lab[g] ? 0 : -1;
}

static int pic_attrpatch(pic *p, al_err *e) {
    static const run_need need = {"x.direction IS NOT NULL",
                                  "with attribution patching (a pair task: --task)"};
    arun r;
    if (attr_run_info(p, &need, &r, e)) return -1;
    qval q = {NAN, 0};
    if (run_rows(p, r.h.run, "SELECT count(*) FROM attribution_patching WHERE run_id = ?1",
                 row_first, &q, e))
        return -1;
    ap_points a = {.cap = q.found ? (int)q.v : 0, .lo = INFINITY, .hi = -INFINITY};
    if (!a.cap)
        return al_errf(e, "run %ld has no attribution patching (a --data or --prompt run, or "
                       "--no-patching)", r.h.run);
    for (int g = 0; g < AL_AP_NGRID; g++)
        if (!(a.x[g] = pcalloc(p, (size_t)a.cap, sizeof(double), e)) ||
            !(a.y[g] = pcalloc(p, (size_t)a.cap, sizeof(double), e)))
            return -1;
    if (run_rows(p, r.h.run, "SELECT grid, estimate, actual FROM attribution_patching WHERE "
                 "run_id = ?1", ap_row, &a, e))
        return -1;
    if (!a.compared)
        return al_errf(e, "run %ld did not compare its estimates with actual patching (every "
                       "actual is NULL): there is nothing to plot them against", r.h.run);
    ap_agree ag = {.p = p};
    if (run_rows(p, r.h.run, "SELECT grid, n, pearson, spearman, top5 FROM attribution_agreement "
                 "WHERE run_id = ?1", ap_agree_row, &ag, e))
        return -1;
    if (!(a.lo <= a.hi)) a.lo = 0, a.hi = 1;
    /* the y = x line's two points outlive this function (drawn later):
     * the picture owns them */
    double pad = fmax(a.hi - a.lo, 1e-6) * 0.05, *lim = pcalloc(p, 2, sizeof(double), e);
    if (!lim) return -1;
    lim[0] = a.lo - pad, lim[1] = a.hi + pad;
    static const char *const grid_words[AL_AP_NGRID] = {"heads", "head x position", "edges"};
    static const int shape[AL_AP_NGRID] = {AL_MARK_CIRCLE, AL_MARK_SQUARE, AL_MARK_TRIANGLE};
    al_series *s = pcalloc(p, AL_AP_NGRID + 1, sizeof *s, e);
    if (!s) return -1;
    /* heads first: the fewest points, drawn on top of the crowded grids */
    static const int order[AL_AP_NGRID] = {AL_AP_HEAD, AL_AP_EDGE, AL_AP_HEAD_POS};
    int ns = 0;
    for (int k = 0; k < AL_AP_NGRID; k++) {
        int g = order[k];
        if (!a.n[g]) continue;
        const char *lab = ag.lab[g] ? ag.lab[g] : pprintf(p, e, "%s: n %d", grid_words[g], a.n[g]);
        if (!lab) return -1;
        s[ns++] = (al_series){a.x[g], a.y[g], a.n[g], lab, al_plot_colour(g), 0, shape[g], 0, 1, NULL};
    }
    s[ns++] = (al_series){lim, lim, 2, "y = x: the estimate is exact", 0x606060, 1, 0, 4, 0, NULL};
    al_panel *pn = add_panel(p, AL_PANEL_LINES);
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
    note(p, "each point is one configuration: its first-order estimate from one forward and one "
            "backward pass (x) against actually patching it (y), both normalised as patching's "
            "effect");
    dir_notes(p, r.direction);
    note(p, "legend: agreement per grid over the configurations where both are finite; top-5 "
            "shared = how many of the 5 largest |effects| the two agree on; %s", p->run_txt);
    return 0;
}

/* ------------------------------------------------------------ circuits */

/* One circuit of a discover run (a row of circuit_runs). */
typedef struct crow {
    char method[8];
    double tau; /* NaN: EAP */
    int n_edges, n_kept;
    double faith, kl;
} crow;

#define MAX_CIRCUITS 64
/* A discover run: what runs and circuit_runs say about it. */
typedef struct crun {
    run_head h;
    crow c[MAX_CIRCUITS];
    int n;
    char metric[16];
    double cfg_tau; /* runs.config_json's "tau" (NaN: none) */
} crun;

static int crun_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    crun *r = ctx;
    (void)nc, (void)e;
    run_head_read(&r->h, t, x);
    r->cfg_tau = x[11];
    if (!t[4] || r->n >= MAX_CIRCUITS) return 0;
    crow *c = &r->c[r->n++];
    snprintf(c->method, sizeof c->method, "%s", t[4]);
    c->tau = x[5];
    c->n_edges = isnan(x[6]) ? 0 : (int)x[6];
    c->n_kept = isnan(x[7]) ? 0 : (int)x[7];
    c->faith = x[8], c->kl = x[9];
    snprintf(r->metric, sizeof r->metric, "%s", t[10] ? t[10] : "");
    return 0;
}

/* ACDC first, by tau ascending; then EAP. */
static int crow_cmp(const void *a, const void *b) {
    const crow *x = a, *y = b;
    int ex = isnan(x->tau), ey = isnan(y->tau);
    if (ex != ey) return ex - ey;
    return (x->tau > y->tau) - (x->tau < y->tau);
}

/* The same tau, allowing for the decimal round trip through config_json. */
static int same_tau(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1, fabs(b)); }

/* Circuit discovery covers 1 and 2 layers: any other model is refused
 * before the database is read (it cannot have a circuit there). */
static int circuit_model(pic *p, al_err *e) {
    if (p->L >= 1 && p->L <= 2) return 0;
    return al_errf(e, "--what %s: circuit discovery covers 1- and 2-layer models; %s has %d "
                   "layers", p->o->what, p->dir, p->L);
}

/* Run --run (else the model's newest finished discover run), checked,
 * its circuits sorted (crow_cmp). */
static int circuit_run_info(pic *p, crun *r, al_err *e) {
    memset(r, 0, sizeof *r);
    if (run_read(p, "circuit_runs", "discover", NULL, "x.method, x.tau, x.n_edges, x.n_kept, "
                 "x.faithfulness, x.kl, x.metric, CASE WHEN json_valid(r.config_json) THEN "
                 "json_extract(r.config_json, '$.tau') END", crun_row, r, &r->h, e) ||
        run_checked(p, &r->h, "discover", p->o->what, e))
        return -1;
    qsort(r->c, (size_t)r->n, sizeof r->c[0], crow_cmp);
    return 0;
}

typedef struct cpick {
    char method[8];
    double tau;
    int found;
} cpick;

static int cpick_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    cpick *c = ctx;
    (void)nc, (void)e;
    snprintf(c->method, sizeof c->method, "%s", t[0] ? t[0] : "");
    c->tau = x[1];
    c->found = 1;
    return 0;
}

/* One ORDER BY for the rule, so the picture and the report cannot differ:
 * the run's own tau first, then EAP, then tau ascending. */
int al_pic_circuit_of(al_store *st, long run, char *method, double *tau, char *tau_txt,
                      al_err *e) {
    char rs[32];
    snprintf(rs, sizeof rs, "%ld", run);
    const char *params[1] = {rs};
    cpick c = {.found = 0};
    if (al_store_query(st, "SELECT x.method, x.tau FROM circuit_runs x JOIN runs r ON r.run_id = "
                       "x.run_id WHERE x.run_id = ?1 ORDER BY coalesce(abs(x.tau - CASE WHEN "
                       "json_valid(r.config_json) THEN json_extract(r.config_json, '$.tau') END) "
                       "<= 1e-9 * max(1, abs(x.tau)), 0) DESC, x.tau IS NULL DESC, x.tau LIMIT 1",
                       params, 1, cpick_row, &c, e))
        return -1;
    if (!c.found) return 0;
    snprintf(method, 8, "%s", c.method);
    *tau = c.tau;
    if (isnan(c.tau)) tau_txt[0] = 0;
    else snprintf(tau_txt, 32, "%.17g", c.tau);
    return 1;
}

/* The circuit to draw (pictures.h): --tau's ACDC row, else
 * al_pic_circuit_of's. */
static int circuit_pick(pic *p, const crun *r, al_err *e) {
    double want = p->o->tau;
    if (isfinite(want)) {
        char taus[256] = "";
        for (int i = 0; i < r->n; i++) {
            if (isnan(r->c[i].tau)) continue;
            if (same_tau(r->c[i].tau, want)) return i;
            size_t n = strlen(taus);
            snprintf(taus + n, sizeof taus - n, "%s%g", n ? ", " : "", r->c[i].tau);
        }
        al_errf(e, "run %ld has no ACDC circuit at tau %g (%s%s)", r->h.run, want,
                taus[0] ? "its taus: " : "it has none", taus);
        return -1;
    }
    char method[8], txt[32];
    double tau;
    int found = al_pic_circuit_of(p->st, r->h.run, method, &tau, txt, e);
    if (found < 0) return -1;
    for (int i = 0; found && i < r->n; i++)
        if (strcmp(r->c[i].method, method) == 0 &&
            (isnan(tau) ? isnan(r->c[i].tau) : !isnan(r->c[i].tau) && same_tau(r->c[i].tau, tau)))
            return i;
    return 0; /* run_checked saw a row: r->n >= 1 */
}

/* Channel colours: q blue, k red (the K-composition of an induction
 * circuit stands out), v green, direct purple. */
static const uint32_t channel_colour[4] = {0x1F77B4, 0xD62728, 0x2CA02C, 0x9467BD};
static const char *const channel_name[4] = {"q", "k", "v", "direct"};

static int channel_index(const char *s) {
    for (int c = 0; s && c < 4; c++)
        if (strcmp(s, channel_name[c]) == 0) return c;
    return -1;
}

/* Graph node of a sender: 0 embed, 1 pos, 2 + l·H + h; -1 if malformed. */
static int circuit_node(pic *p, const char *s) {
    if (!s) return -1;
    if (strcmp(s, "embed") == 0) return 0;
    if (strcmp(s, "pos") == 0) return 1;
    const char *end;
    int k = parse_head(p, s, &end);
    return k >= 0 && !*end ? 2 + k : -1;
}

typedef struct cedges {
    pic *p;
    al_gedge *ed;
    double *score;
    int n, cap, bad, kept;
} cedges;

static int cedge_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    cedges *c = ctx;
    (void)nc, (void)e;
    pic *p = c->p;
    int from = circuit_node(p, t[0]), ch = channel_index(t[3]), kept = x[5] == 1;
    int rl = isnan(x[1]) ? -1 : (int)x[1], rh = isnan(x[2]) ? -1 : (int)x[2];
    int logits = rl < 0 && rh < 0, to = logits ? 2 + p->L * p->H : 2 + rl * p->H + rh;
    int ok = from >= 0 && ch >= 0 && c->n < c->cap && (logits ? ch == 3 : ch < 3 && rl >= 0 &&
             rl < p->L && rh >= 0 && rh < p->H && (from < 2 || (from - 2) / p->H < rl));
    if (!ok) {
        c->bad++;
        return 0;
    }
    c->kept += kept;
    c->score[c->n] = x[4];
    c->ed[c->n++] = (al_gedge){from, to, logits ? -1 : ch, channel_colour[ch], 1, !kept};
    return 0;
}

#define CIRCUIT_MAX_W 6 /* px of the strongest kept edge */

static int pic_circuit(pic *p, al_err *e) {
    crun r;
    if (circuit_run_info(p, &r, e)) return -1;
    int pick = circuit_pick(p, &r, e);
    if (pick < 0) return -1;
    const crow *c = &r.c[pick];
    int L = p->L, H = p->H, n_nodes = 3 + L * H;
    al_gnode *nodes = pcalloc(p, (size_t)n_nodes, sizeof *nodes, e);
    cedges ce = {.p = p, .cap = 6 * L * H + 3 * H * H + 2 + L * H};
    ce.ed = pcalloc(p, (size_t)ce.cap, sizeof *ce.ed, e);
    ce.score = pcalloc(p, (size_t)ce.cap, sizeof *ce.score, e);
    if (!nodes || !ce.ed || !ce.score) return -1;
    char rs[32], ts[40], sql[512];
    snprintf(rs, sizeof rs, "%ld", r.h.run);
    snprintf(ts, sizeof ts, "%.17g", c->tau);
    snprintf(sql, sizeof sql, "SELECT sender, receiver_layer, receiver_head, channel, score, kept "
             "FROM circuit_edges WHERE run_id = ?1 AND method = ?2 AND %s ORDER BY edge",
             isnan(c->tau) ? "tau IS NULL" : "tau = ?3");
    const char *params[3] = {rs, c->method, ts};
    if (al_store_query(p->st, sql, params, isnan(c->tau) ? 2 : 3, cedge_row, &ce, e)) return -1;
    if (!ce.n)
        return al_errf(e, "run %ld has no edges for its %s circuit%s%s (circuit_edges is empty)",
                       r.h.run, c->method, isnan(c->tau) ? "" : " at tau ", isnan(c->tau) ? "" : ts);
    /* width ∝ |score| among the kept edges, 1..CIRCUIT_MAX_W px */
    double top = 0;
    for (int i = 0; i < ce.n; i++)
        if (!ce.ed[i].faint && isfinite(ce.score[i])) top = fmax(top, fabs(ce.score[i]));
    int *used = pcalloc(p, (size_t)n_nodes, sizeof(int), e);
    if (!used) return -1;
    for (int i = 0; i < ce.n; i++) {
        al_gedge *g = &ce.ed[i];
        if (g->faint) continue;
        double s = ce.score[i];
        g->width = top > 0 && isfinite(s) ? 1 + (int)lround((CIRCUIT_MAX_W - 1) * fabs(s) / top) : 2;
        used[g->from] = used[g->to] = 1;
    }
    if (p->o->hide_removed) { /* keep only the kept edges, in order */
        int k = 0;
        for (int i = 0; i < ce.n; i++)
            if (!ce.ed[i].faint) ce.ed[k++] = ce.ed[i];
        ce.n = k;
    }
    nodes[0] = (al_gnode){.label = "embed", .row = 0, .fill = 0xEEEEEE, .dim = !used[0]};
    nodes[1] = (al_gnode){.label = "pos", .row = 0, .fill = 0xEEEEEE, .dim = !used[1]};
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            al_gnode *n = &nodes[2 + l * H + h];
            if (!(n->label = pprintf(p, e, "%d.%d", l, h))) return -1;
            n->row = 1 + l, n->n_ports = 3, n->fill = 0xFFFFFF, n->dim = !used[2 + l * H + h];
            for (int k = 0; k < 3; k++)
                n->port_label[k] = channel_name[k], n->port_colour[k] = channel_colour[k];
        }
    nodes[2 + L * H] = (al_gnode){.label = "logits", .row = L + 1, .fill = 0xEEEEEE};
    static const char *const rows2[] = {"embeddings", "layer 0", "layer 1", "logits"};
    static const char *const rows1[] = {"embeddings", "layer 0", "logits"};
    al_panel *q = add_panel(p, AL_PANEL_GRAPH);
    q->graph = (al_graph){nodes, n_nodes, ce.ed, ce.n, L == 2 ? rows2 : rows1, L + 2, 0, 0};
    for (int k = 0; k < 4; k++)
        p->legend[k] = (al_legend_item){channel_name[k], channel_colour[k], 0};
    p->legend[4] = (al_legend_item){"removed (pale)", al_graph_faint(0x404040), 0};
    p->fig.legend = p->legend;
    p->fig.n_legend = p->o->hide_removed ? 4 : 5;
    int acdc = !isnan(c->tau);
    if (acdc)
        snprintf(p->title, sizeof p->title, "circuit (ACDC, tau %g, task %s): %d of %d edges kept",
                 c->tau, r.h.task, c->n_kept, c->n_edges);
    else
        snprintf(p->title, sizeof p->title, "circuit (EAP, task %s): %d of %d edges kept",
                 r.h.task, c->n_kept, c->n_edges);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    note(p, "faithfulness %.3f (1 = the circuit does all the model does on the task), KL from the "
            "full model %.4f nats, metric %s", c->faith, c->kl, r.metric);
    note(p, "an edge enters a head at its q, k or v port, or the logits directly; its colour is "
            "its channel, its width its score (widest: %.4g)%s; grey boxes: in no kept edge",
         top, p->o->hide_removed ? "; removed edges not drawn" : ", removed edges pale");
    if (r.n > 1)
        note(p, "the run has %d circuits; this one by %s (--tau chooses another)", r.n,
             isfinite(p->o->tau) ? "--tau" : isfinite(r.cfg_tau) && acdc && same_tau(c->tau, r.cfg_tau)
             ? "the run's own tau" : acdc ? "the smallest tau" : "being the EAP circuit");
    if (ce.bad) note(p, "%d edge rows did not fit the model's graph and are not drawn", ce.bad);
    note(p, "%s", p->run_txt);
    return 0;
}

static int pic_circuit_curve(pic *p, al_err *e) {
    crun r;
    if (circuit_run_info(p, &r, e)) return -1;
    int n_acdc = 0, eap = -1;
    for (int i = 0; i < r.n; i++) {
        if (isnan(r.c[i].tau)) eap = i;
        else n_acdc++;
    }
    if (n_acdc < 2)
        return al_errf(e, "run %ld has %d ACDC circuit%s: no tau sweep to draw (discover with "
                       "several taus)", r.h.run, n_acdc, n_acdc == 1 ? "" : "s");
    double *x = pcalloc(p, (size_t)n_acdc + 1, sizeof(double), e);
    double *y = pcalloc(p, (size_t)n_acdc + 1, sizeof(double), e);
    const char **lab = pcalloc(p, (size_t)n_acdc + 1, sizeof(char *), e);
    al_series *s = pcalloc(p, 2, sizeof *s, e);
    if (!x || !y || !lab || !s) return -1;
    for (int i = 0; i < n_acdc; i++) { /* r.c is in tau order: the line joins the sweep in order */
        x[i] = r.c[i].n_kept, y[i] = r.c[i].faith;
        if (!(lab[i] = pprintf(p, e, "tau %g", r.c[i].tau))) return -1;
    }
    int ns = 0;
    s[ns++] = (al_series){x, y, n_acdc, "ACDC, one point per tau", channel_colour[0], 2,
                          AL_MARK_CIRCLE, 0, 0, lab};
    if (eap >= 0) {
        x[n_acdc] = r.c[eap].n_kept, y[n_acdc] = r.c[eap].faith;
        lab[n_acdc] = "EAP";
        s[ns++] = (al_series){x + n_acdc, y + n_acdc, 1, "EAP (edges by attribution)",
                              channel_colour[1], 0, AL_MARK_DIAMOND, 0, 1, lab + n_acdc};
    }
    al_panel *q = add_panel(p, AL_PANEL_LINES);
    q->ln.s = s;
    q->ln.n = ns;
    q->ln.x_title = "edges kept";
    q->ln.y_title = "faithfulness";
    q->ln.w = 420, q->ln.h = 260;
    /* room right of the largest circuit for its tau label */
    double most = 0;
    for (int i = 0; i < n_acdc + (eap >= 0); i++) most = fmax(most, x[i]);
    q->ln.x_lo = 0;
    q->ln.x_hi = ceil(most * 1.2) + 1;
    q->ln.hline = 1;
    q->ln.hline_label = "the full model";
    q->ln.legend = 1;
    q->ln.x_integer = 1;
    snprintf(p->title, sizeof p->title, "circuit size against faithfulness (task %s, %d taus)",
             r.h.task, n_acdc);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    note(p, "each point: the circuit ACDC keeps at one threshold tau (a larger tau removes more "
            "edges); faithfulness 1 = it does all the model does on the task, 0 = no better than "
            "the corrupted run; metric %s", r.metric);
    note(p, "%s", p->run_txt);
    return 0;
}

/* ---------------------------------------------------- sweep-induction */

/* One point of one model's curve: the best head's induction score at a
 * step of its latest finished train run, with the model's group. */
typedef struct sw_rows {
    pic *p;
    const char **setting;
    int *layers;
    long *model, *seed;
    double *step, *val;
    int n, cap;
} sw_rows;

static int sw_row(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    sw_rows *s = ctx;
    (void)nc;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        /* the old arrays stay on the pic's list and go with it */
        const char **st = pcalloc(s->p, (size_t)cap, sizeof *st, e);
        int *ly = pcalloc(s->p, (size_t)cap, sizeof *ly, e);
        long *md = pcalloc(s->p, (size_t)cap, sizeof *md, e), *sd = pcalloc(s->p, (size_t)cap, sizeof *sd, e);
        double *sp = pcalloc(s->p, (size_t)cap, sizeof *sp, e), *v = pcalloc(s->p, (size_t)cap, sizeof *v, e);
        if (!st || !ly || !md || !sd || !sp || !v) return -1;
        if (s->n) {
            memcpy(st, s->setting, sizeof *st * (size_t)s->n), memcpy(ly, s->layers, sizeof *ly * (size_t)s->n);
            memcpy(md, s->model, sizeof *md * (size_t)s->n), memcpy(sd, s->seed, sizeof *sd * (size_t)s->n);
            memcpy(sp, s->step, sizeof *sp * (size_t)s->n), memcpy(v, s->val, sizeof *v * (size_t)s->n);
        }
        s->setting = st, s->layers = ly, s->model = md, s->seed = sd, s->step = sp, s->val = v;
        s->cap = cap;
    }
    int i = s->n;
    /* consecutive rows of one group share the text */
    if (i && s->setting[i - 1] && strcmp(s->setting[i - 1], t[0] ? t[0] : "") == 0)
        s->setting[i] = s->setting[i - 1];
    else if (!(s->setting[i] = pprintf(s->p, e, "%s", t[0] ? t[0] : "")))
        return -1;
    s->layers[i] = (int)x[1], s->model[i] = (long)x[2], s->seed[i] = isnan(x[3]) ? -1 : (long)x[3];
    s->step[i] = x[4], s->val[i] = x[5];
    s->n++;
    return 0;
}

/* c mixed with share w of white: a seed's line, faint beside the mean. */
static uint32_t pale(uint32_t c, double w) {
    uint32_t out = 0;
    for (int k = 0; k < 24; k += 8) {
        double v = (c >> k & 0xFF) + w * (255 - (c >> k & 0xFF));
        out |= (uint32_t)(v + 0.5) << k;
    }
    return out;
}

static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One panel per (setting, n_layers) group of view sweep_models: each
 * model's best induction score over steps as a faint line, their mean
 * (at the steps every one was evaluated at) bold, the threshold dashed;
 * the same step axis in every panel, so settings compare at a glance. */
static int pic_sweep_induction(pic *p, al_err *e) {
    sw_rows s = {.p = p};
    if (al_store_query(p->st,
                       "SELECT sm.setting, sm.n_layers, sm.model_id, sm.seed, t.step, max(t.value) "
                       "FROM sweep_models sm "
                       "JOIN latest_run lr ON lr.model_id = sm.model_id AND lr.kind = 'train' "
                       "JOIN train_head_scores t ON t.run_id = lr.run_id AND t.metric = 'induction' "
                       "GROUP BY sm.model_id, t.step "
                       "ORDER BY sm.setting, sm.n_layers, sm.seed, sm.model_id, t.step",
                       NULL, 0, sw_row, &s, e))
        return -1;
    if (!s.n)
        return al_errf(e, "database %s has no training curves (induction in train_head_scores of "
                       "a finished train run): train with --db and --eval-every", p->o->db);
    int n_groups = 0, n_models = 0;
    for (int i = 0; i < s.n; i++) {
        int new_group = !i || s.setting[i] != s.setting[i - 1] || s.layers[i] != s.layers[i - 1];
        n_groups += new_group;
        n_models += new_group || s.model[i] != s.model[i - 1];
    }
    if (n_groups > MAX_PANELS)
        return al_errf(e, "database %s has %d (setting, layers) groups: at most %d can be drawn",
                       p->o->db, n_groups, MAX_PANELS);
    double *ustep = pcalloc(p, (size_t)s.n, sizeof(double), e), x_lo = s.step[0], x_hi = s.step[0];
    if (!ustep) return -1;
    for (int i = 1; i < s.n; i++) x_lo = fmin(x_lo, s.step[i]), x_hi = fmax(x_hi, s.step[i]);
    if (x_hi == x_lo) x_lo = NAN, x_hi = NAN; /* one step: let the plot widen it */
    for (int g0 = 0, gi = 0; g0 < s.n; gi++) {
        int g1 = g0 + 1;
        while (g1 < s.n && s.setting[g1] == s.setting[g0] && s.layers[g1] == s.layers[g0]) g1++;
        int nm = 1;
        for (int i = g0 + 1; i < g1; i++) nm += s.model[i] != s.model[i - 1];
        al_series *sr = pcalloc(p, (size_t)nm + 1, sizeof *sr, e);
        if (!sr) return -1;
        uint32_t col = al_plot_colour(gi);
        int ns = 0;
        if (nm > 1) {
            /* the mean at the steps every model of the group was evaluated
             * at: a mean over whichever models happen to have a step would
             * jump where one is missing */
            int nu = 0;
            for (int i = g0; i < g1; i++) ustep[nu++] = s.step[i];
            qsort(ustep, (size_t)nu, sizeof *ustep, dbl_cmp);
            double *mx = pcalloc(p, (size_t)nu, sizeof(double), e), *my = pcalloc(p, (size_t)nu, sizeof(double), e);
            if (!mx || !my) return -1;
            int k = 0;
            for (int a = 0, b; a < nu; a = b) {
                for (b = a + 1; b < nu && ustep[b] == ustep[a];) b++;
                if (b - a < nm) continue; /* a model has at most one row per step */
                double sum = 0;
                for (int i = g0; i < g1; i++)
                    if (s.step[i] == ustep[a]) sum += s.val[i];
                mx[k] = ustep[a], my[k++] = sum / nm;
            }
            char *lab = pprintf(p, e, "mean of %d models", nm);
            if (!lab) return -1;
            if (k) sr[ns++] = (al_series){mx, my, k, lab, col, 3, 0, 0, 0, NULL};
        }
        for (int a = g0; a < g1;) {
            int b = a + 1;
            while (b < g1 && s.model[b] == s.model[a]) b++;
            const char *lab = NULL;
            if (nm == 1) lab = s.seed[a] >= 0 ? pprintf(p, e, "seed %ld", s.seed[a]) : "the model";
            else if (a == g0) lab = "one line per seed";
            if (nm == 1 && !lab) return -1;
            sr[ns++] = (al_series){s.step + a, s.val + a, b - a, lab, nm == 1 ? col : pale(col, 0.55),
                                   nm == 1 ? 2 : 1, 0, 0, 0, NULL};
            a = b;
        }
        al_panel *q = add_panel(p, AL_PANEL_LINES);
        const char *set = s.setting[g0][0] ? s.setting[g0] : "all models";
        q->ln = (al_lines){.s = sr, .n = ns,
                           .title = pprintf(p, e, "%s, %d layer%s (%d model%s)", set, s.layers[g0],
                                            s.layers[g0] == 1 ? "" : "s", nm, nm == 1 ? "" : "s"),
                           .x_title = "step", .y_title = "best induction score", .w = 360, .h = 220,
                           .legend = 1, .x_lo = x_lo, .x_hi = x_hi, .y_lo = 0, .y_hi = 1,
                           .hline = AL_TH_INDUCTION,
                           .hline_label = "induction head: > " AL_TH_STR(AL_TH_INDUCTION),
                           .x_integer = 1};
        if (!q->ln.title) return -1;
        g0 = g1;
    }
    p->fig.ncols = n_groups < 2 ? 1 : 2;
    snprintf(p->title, sizeof p->title, "induction score over training, across seeds");
    snprintf(p->head_txt, sizeof p->head_txt, "best of all");
    snprintf(p->run_txt, sizeof p->run_txt, "%s: latest train run of %d model%s in %d group%s",
             p->o->db, n_models, n_models == 1 ? "" : "s", n_groups, n_groups == 1 ? "" : "s");
    note(p, "each model's best head's induction score on the training probe at every evaluation "
            "of its latest finished train run; one panel per setting and number of layers "
            "(view sweep_models)");
    return 0;
}

/* ---------------------------------------------------------- the driver */

static int path_row_text(void *ctx, int nc, const char *const *t, const double *x, al_err *e) {
    (void)nc, (void)x;
    char **out = ctx;
    if (t[0] && !*out && !(*out = strdup(t[0]))) return al_errf(e, "out of memory");
    return 0;
}

/* The directory of the model run o->run_id analysed (models.path). */
static int run_model_dir(const al_pic_opts *o, char *dir, size_t cap, al_err *e) {
    if (!o->db || o->run_id <= 0)
        return al_errf(e, "--what %s needs --model DIR, or --db FILE and --run ID", o->what);
    if (!al_file_exists(o->db)) return al_errf(e, "database %s does not exist", o->db);
    al_store *st;
    if (al_store_open(o->db, &st, e)) return -1;
    char rs[32], *path = NULL;
    snprintf(rs, sizeof rs, "%ld", o->run_id);
    const char *params[1] = {rs};
    int rc = al_store_query(st, "SELECT m.path FROM runs r JOIN models m ON m.model_id = "
                            "r.model_id WHERE r.run_id = ?1", params, 1, path_row_text, &path, e);
    al_store_close(st);
    if (rc) return -1;
    if (!path) return al_errf(e, "database %s has no run %ld with a model", o->db, o->run_id);
    if (strlen(path) >= cap) rc = al_errf(e, "model path of run %ld is too long", o->run_id);
    else snprintf(dir, cap, "%s", path);
    free(path);
    return rc;
}

static int load(pic *p, al_err *e) {
    char tp[AL_PATH_MAX + 64];
    if (al_path_join(tp, sizeof tp, p->dir, "tokenizer.json", e)) return -1;
    int has_tok = al_file_exists(tp);
    if (al_ckpt_load(p->dir, &p->m, has_tok ? &p->tok : NULL, e)) return -1;
    p->L = p->m.cfg.n_layers;
    p->H = p->m.cfg.n_heads;
    p->D = p->m.cfg.d_head;
    return 0;
}

/* The figure in o->format, with its provenance (PNG text chunks, SVG
 * <desc>, PDF document info). */
static int write_fig(pic *p, const char *out, int *w, int *h, al_err *e) {
    al_png_text t[8];
    int n = 0;
    char sw[64], prompt[2048];
    snprintf(sw, sizeof sw, "attnlab %s", AL_VERSION);
    t[n++] = (al_png_text){"Title", p->title};
    t[n++] = (al_png_text){"model", p->dir};
    t[n++] = (al_png_text){"what", p->o->what};
    t[n++] = (al_png_text){"head", p->head_txt};
    if (p->prompt_txt) {
        /* cut on a character boundary */
        size_t k = strlen(p->prompt_txt) < sizeof prompt - 1 ? strlen(p->prompt_txt) : sizeof prompt - 1;
        while (k > 0 && k < strlen(p->prompt_txt) && ((unsigned char)p->prompt_txt[k] & 0xC0) == 0x80) k--;
        memcpy(prompt, p->prompt_txt, k);
        prompt[k] = 0;
        t[n++] = (al_png_text){"prompt", prompt};
    }
    if (p->tokens_txt) t[n++] = (al_png_text){"tokens", p->tokens_txt};
    if (p->o->db) t[n++] = (al_png_text){"db", p->run_txt[0] ? p->run_txt : p->o->db};
    t[n++] = (al_png_text){"Software", sw};
    if (al_plot_write(&p->fig, p->o->format, out, t, n, w, h, e))
        return al_err_prefix(e, "cannot draw %s", out);
    return 0;
}

static int valid_utf8_prompt(const char *s) {
    /* text chunks must be valid UTF-8; the prompt is user input */
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        int n = *u < 0x80 ? 1 : (*u & 0xE0) == 0xC0 ? 2 : (*u & 0xF0) == 0xE0 ? 3 : (*u & 0xF8) == 0xF0 ? 4 : 0;
        if (!n) return 0;
        for (int i = 1; i < n; i++)
            if ((u[i] & 0xC0) != 0x80) return 0;
        u += n;
    }
    return 1;
}

static void pic_free(pic *p) {
    for (int i = 0; i < p->n_mem; i++) free(p->mem[i]);
    free(p->mem);
    al_store_close(p->st);
    al_tok_free(p->tok);
    al_model_free(&p->m);
    free(p);
}

/* sweep-induction is about every model of the database, so it needs no
 * model directory and loads no weights. */
static int sweep_picture(const al_pic_opts *o, const char *out_png, int *w, int *h, al_err *e) {
    if (!o->db) return al_errf(e, "--what %s reads the results database: give --db FILE", o->what);
    if (!al_file_exists(o->db)) return al_errf(e, "database %s does not exist", o->db);
    pic *p = calloc(1, sizeof *p);
    if (!p) return al_errf(e, "out of memory");
    p->o = o;
    p->dir = "(every model in the database)";
    p->fig.title = p->title;
    p->fig.panels = p->panels;
    int rc = al_store_open(o->db, &p->st, e);
    if (rc == 0) rc = pic_sweep_induction(p, e);
    if (rc == 0) rc = write_fig(p, out_png, w, h, e);
    pic_free(p);
    return rc;
}

int al_picture(const char *model_dir, const al_pic_opts *o, const char *out_png, int *w, int *h,
               al_err *e) {
    int k = 0;
    while (o->what && al_pic_kinds[k] && strcmp(al_pic_kinds[k], o->what) != 0) k++;
    if (!o->what || !al_pic_kinds[k])
        return al_errf(e, "unknown picture '%s' (attention, qk-pos, qk, ov, composition, ablation, "
                       "pruning, training, spectrum, patching, paths, dla, terms, attrpatch, "
                       "circuit, circuit-curve, sweep-induction)",
                       o->what ? o->what : "");
    if (k == 16) return sweep_picture(o, out_png, w, h, e);
    char dir[AL_PATH_MAX];
    if (!model_dir && k >= 9) { /* patching, paths, attribution, circuits: the run's model */
        if (run_model_dir(o, dir, sizeof dir, e)) return -1;
        model_dir = dir;
    }
    if (!model_dir) return al_errf(e, "--what %s needs --model DIR", o->what);
    if (o->prompt && !valid_utf8_prompt(o->prompt)) return al_errf(e, "--prompt is not valid UTF-8");
    pic *p = calloc(1, sizeof *p);
    if (!p) return al_errf(e, "out of memory");
    p->o = o;
    p->dir = model_dir;
    p->fig.title = p->title;
    p->fig.panels = p->panels;
    int db_required = k >= 5 && k != 8; /* ablation, pruning, training and the run pictures */
    int rc = load(p, e);
    if (rc == 0 && k >= 14) rc = circuit_model(p, e);
    if (rc == 0) rc = open_db(p, db_required, e);
    if (rc == 0) {
        switch (k) {
        case 0: rc = pic_attention(p, e); break;
        case 1: rc = pic_qk_pos(p, e); break;
        case 2: rc = pic_full(p, 0, e); break;
        case 3: rc = pic_full(p, 1, e); break;
        case 4: rc = pic_composition(p, e); break;
        case 5: rc = pic_ablation(p, e); break;
        case 6: rc = pic_pruning(p, e); break;
        case 7: rc = pic_training(p, e); break;
        case 8: rc = pic_spectrum(p, e); break;
        case 9: rc = pic_patching(p, e); break;
        case 10: rc = pic_paths(p, e); break;
        case 11: rc = pic_dla(p, e); break;
        case 12: rc = pic_terms(p, e); break;
        case 13: rc = pic_attrpatch(p, e); break;
        case 14: rc = pic_circuit(p, e); break;
        case 15: rc = pic_circuit_curve(p, e); break;
        default: rc = al_errf(e, "picture %s: internal error, no such kind", o->what); break;
        }
    }
    if (rc == 0) rc = write_fig(p, out_png, w, h, e);
    pic_free(p);
    return rc;
}
