/* viewer.c -- the explorers of `attnlab report --interactive` (see
 * viewer.h): the data of each model as one inline JSON element, the CSP
 * and CSS, and the script (src/report/viewer.js, compiled in as a string
 * by the Makefile into viewer_js.h).
 *
 * Where a number is in the database (patching, path patching, logit
 * attribution, attribution patching) the JSON takes it from those rows
 * as stored (read through store_report.h, the readers the static page
 * uses), so the page shows what a query shows. Attention, loss and
 * the top-5 are not stored: they come from running the model on the
 * prompt here, as the attention pictures and `attnlab run` do. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "attnlab/viewer.h"
#include "attnlab/stats.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/json.h"
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/pairs.h"
#include "attnlab/patch.h"
#include "attnlab/report.h"
#include "attnlab/sae_acts.h"
#include "attnlab/sae_io.h"
#include "attnlab/store_report.h"
#include "attnlab/store_sae_read.h"
#include "attnlab/tokenizer.h"
#include "viewer_js.h" /* static const char viewer_js[] */

/* Only inline scripts and styles, and pictures from the page's own
 * folder ('self' matches file:// in Chromium: checked by the browser
 * test, whose static PNGs load under it). Nothing can be fetched,
 * framed, posted or used as a base URL. */
#define CSP                                                                                        \
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "                  \
    "img-src 'self'; base-uri 'none'; form-action 'none'"

void al_viewer_head(al_buf *h) {
    al_buf_puts(
        h,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"" CSP "\">\n"
        "<style>\n"
        ".al-x{margin:1.5em 0;padding:.5em 1em 1em;border:1px solid #c8d3e0;"
        "border-radius:4px;background:#fbfcfe}\n"
        ".al-x h4{margin:1.2em 0 .4em}.al-thumbs{display:flex;flex-wrap:wrap;gap:6px;"
        "margin:.3em 0}\n"
        ".al-thumb{border:2px solid transparent;padding:2px;cursor:pointer;text-align:center;"
        "font-size:11px;background:#fff}.al-thumb.sel{border-color:#1f77b4}"
        ".al-thumb canvas{display:block;image-rendering:pixelated}\n"
        ".al-strip{line-height:2;margin:.4em 0;font-family:monospace}"
        ".al-tok{display:inline-block;line-height:1.4;border:1px solid #ccc;padding:1px 3px;margin:0 1px;white-space:pre;"
        "cursor:default}.al-tok.cur{outline:2px solid #d62728}\n"
        ".al-panel{font-size:.85em;display:flex;flex-wrap:wrap;gap:1.5em}"
        ".al-x td:nth-child(2){text-align:left;font-family:monospace;white-space:pre}"
        ".al-panel table{margin:.2em 0}.al-scroll{max-height:18em;overflow-y:auto}\n"
        ".al-grid{display:grid;gap:1px;font-size:10px;margin:.4em 0;width:max-content}"
        ".al-cell{width:14px;height:14px}.al-rl{text-align:right;padding-right:4px;"
        "white-space:pre;font-family:monospace}.al-cl{writing-mode:vertical-rl;"
        "transform:rotate(180deg);white-space:pre;max-height:9em;overflow:hidden;"
        "font-family:monospace}\n"
        ".al-scroll-x{overflow-x:auto;max-width:100%}.al-info{font-size:.9em;min-height:1.4em;font-family:monospace;white-space:pre}"
        ".al-hm{margin:1em 0}.al-hm-title{font-weight:bold}\n"
        ".al-feat{cursor:pointer}.al-feat.sel{background:#dbe9f6}"
        ".al-sae-sort button{margin-right:.5em}.al-sae-sort button.sel{font-weight:bold}"
        ".al-sae-nums{font-family:monospace;font-size:.9em;margin:.3em 0}"
        ".al-x td.al-sae-win{text-align:left;white-space:nowrap}\n"
        "@media print{.al-x{display:none}}\n"
        "</style>\n");
}

/* ------------------------------------------------------------ escaping */

char *al_viewer_json_for_html(const char *json) {
    al_buf b = AL_BUF_INIT;
    for (const char *p = json; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '<')
            al_buf_puts(&b, "\\u003c");
        else if (c == '>')
            al_buf_puts(&b, "\\u003e");
        else if (c == '&')
            al_buf_puts(&b, "\\u0026");
        else if (c == 0xE2 && (unsigned char)p[1] == 0x80 &&
                 ((unsigned char)p[2] == 0xA8 || (unsigned char)p[2] == 0xA9)) {
            /* U+2028, U+2029: line terminators to older JavaScript */
            al_buf_puts(&b, (unsigned char)p[2] == 0xA8 ? "\\u2028" : "\\u2029");
            p += 2;
        } else {
            al_buf_put(&b, p, 1);
        }
    }
    if (!b.p) al_buf_puts(&b, "");
    return al_buf_take(&b, NULL);
}

/* A string for cJSON: invalid UTF-8 as U+FFFD (cJSON copies bytes). */
static cJSON *jstr(const char *s) {
    char *u = al_utf8_sanitize(s, strlen(s));
    cJSON *j = u ? cJSON_CreateString(u) : NULL;
    free(u);
    return j;
}

static int add(cJSON *to, const char *key, cJSON *item) {
    if (!item) return -1;
    if (key)
        cJSON_AddItemToObject(to, key, item);
    else
        cJSON_AddItemToArray(to, item);
    return 0;
}

/* A number, or null for NaN / infinity (JSON has neither). */
static cJSON *jnum(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

/* ------------------------------------------------------- the prompt */

/* "prompt": the model on vm->prompt, read as `attnlab run` reads it (BOS
 * first, the last tokens kept): tokens, attention of every head (row t:
 * t+1 numbers, 4 decimals), p and loss of each token given the tokens
 * before it, the top-5 predictions at each position. A failure fills e
 * (the caller shows it as a note). */
static int prompt_json(cJSON *root, const al_viewer_model *vm, al_err *e) {
    al_model m;
    al_tokenizer *tok = NULL;
    int *raw = NULL, *ids = NULL, rc = -1;
    size_t n = 0;
    memset(&m, 0, sizeof m);
    if (al_ckpt_load(vm->dir, &m, &tok, e)) return -1;
    if (!tok) {
        al_errf(e, "model %s has no tokenizer.json to encode the prompt", vm->dir);
        goto out;
    }
    if (al_tok_encode(tok, (const unsigned char *)vm->prompt, strlen(vm->prompt), 1, &raw, &n, e))
        goto out;
    int eot = al_tok_eot(tok), bos = eot >= 0, V = m.cfg.d_vocab;
    int L = m.cfg.n_layers, H = m.cfg.n_heads;
    size_t total = n + (size_t)bos, cap = (size_t)m.cfg.n_ctx;
    if (cap > AL_VIEWER_MAX_T) cap = AL_VIEWER_MAX_T;
    size_t keep = total < cap ? total : cap;
    if (total == 0) {
        al_errf(e, "the prompt is empty");
        goto out;
    }
    ids = malloc(sizeof(int) * keep);
    if (!ids) {
        al_errf(e, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < keep; i++) {
        size_t src = total - keep + i;
        ids[i] = bos ? (src == 0 ? eot : raw[src - 1]) : raw[src];
    }
    int T = (int)keep;
    if (al_model_forward(&m, ids, NULL, 1, T, e)) goto out;
    cJSON *p = cJSON_CreateObject();
    if (!p) goto oom;
    cJSON_AddItemToObject(root, "prompt", p);
    cJSON *toks = cJSON_CreateArray(), *att = cJSON_CreateArray(), *pr = cJSON_CreateArray(),
          *loss = cJSON_CreateArray(), *top = cJSON_CreateArray();
    if (add(p, "text", jstr(vm->prompt)) || add(p, "n_layers", cJSON_CreateNumber(L)) ||
        add(p, "n_heads", cJSON_CreateNumber(H)) ||
        add(p, "cut", cJSON_CreateNumber((double)(total - keep))) || add(p, "tokens", toks) ||
        add(p, "att", att) || add(p, "p", pr) || add(p, "loss", loss) || add(p, "top", top))
        goto oom;
    char s[256];
    for (int t = 0; t < T; t++) {
        al_tok_display(tok, ids[t], s, sizeof s);
        if (add(toks, NULL, jstr(s))) goto oom;
    }
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            cJSON *a = cJSON_CreateArray();
            if (add(att, NULL, a)) goto oom;
            const float *A = m.att + ((size_t)l * H + h) * T * T; /* (L, B=1, H, T, T) */
            for (int t = 0; t < T; t++)
                for (int u = 0; u <= t; u++)
                    if (add(a, NULL, cJSON_CreateNumber(round((double)A[t * T + u] * 1e4) / 1e4)))
                        goto oom;
        }
    for (int t = 0; t < T; t++) {
        cJSON *k = cJSON_CreateArray();
        if (add(top, NULL, k)) goto oom;
        if (t == 0) { /* the first token has no prefix */
            if (add(pr, NULL, cJSON_CreateNull()) || add(loss, NULL, cJSON_CreateNull())) goto oom;
            continue;
        }
        const float *row = m.probs + (size_t)(t - 1) * V; /* predictions for position t */
        double pt = row[ids[t]];
        if (add(pr, NULL, jnum(pt)) || add(loss, NULL, jnum(-log(pt)))) goto oom;
        int idx[5], nk = V < 5 ? V : 5;
        al_top_k(row, V, nk, idx);
        for (int i = 0; i < nk; i++) {
            cJSON *c = cJSON_CreateArray();
            al_tok_display(tok, idx[i], s, sizeof s);
            if (add(k, NULL, c) || add(c, NULL, jstr(s)) || add(c, NULL, jnum(row[idx[i]])))
                goto oom;
        }
    }
    rc = 0;
    goto out;
oom:
    al_errf(e, "out of memory");
out:
    free(raw);
    free(ids);
    al_tok_free(tok);
    al_model_free(&m);
    return rc;
}

/* ------------------------------------------------------------ heatmaps */

/* A heatmap from the database: rows of (row label, row order, column
 * label, column order, value[, second value]); labels are placed by
 * their order keys. Cells carry the values as stored. */
typedef struct hm_rows {
    cJSON *rows, *cols, *cells;
    char **pos_lab; /* NULL, or "pos t token" for column keys 0..n_pos-1 */
    int n_pos, too_big;
    double rk[4096], ck[4096];
    int nr, nc, n;
} hm_rows;

static int slot(cJSON *labels, double *keys, int *n, const char *lab, double key) {
    for (int i = 0; i < *n; i++)
        if (keys[i] == key && strcmp(cJSON_GetArrayItem(labels, i)->valuestring, lab) == 0)
            return i;
    if (*n == 4096) return -1;
    keys[*n] = key;
    if (add(labels, NULL, jstr(lab))) return -1;
    return (*n)++;
}

static int hm_row(hm_rows *R, int nc, const char *const *t, const double *x, al_err *e) {
    if (nc < 5 || !t[0] || !t[2]) return 0;
    const char *col = t[2];
    if (R->pos_lab && x[3] >= 0 && x[3] < R->n_pos && R->pos_lab[(int)x[3]])
        col = R->pos_lab[(int)x[3]];
    int r = slot(R->rows, R->rk, &R->nr, t[0], x[1]), c = slot(R->cols, R->ck, &R->nc, col, x[3]);
    if (r < 0 || c < 0) { /* over 4096 rows or columns: left out, not fatal */
        R->too_big = 1;
        return 0;
    }
    cJSON *cell = cJSON_CreateArray();
    if (add(R->cells, NULL, cell) || add(cell, NULL, cJSON_CreateNumber(r)) ||
        add(cell, NULL, cJSON_CreateNumber(c)) ||
        add(cell, NULL, t[4] ? jnum(x[4]) : cJSON_CreateNull()) ||
        (nc > 5 && add(cell, NULL, t[5] ? jnum(x[5]) : cJSON_CreateNull())))
        return al_errf(e, "out of memory");
    /* the interval, when the run stored one: se, lo, hi after value2 */
    for (int k = 6; nc > 8 && t[6] && k < 9; k++)
        if (add(cell, NULL, t[k] ? jnum(x[k]) : cJSON_CreateNull()))
            return al_errf(e, "out of memory");
    R->n++;
    return 0;
}

/* Sort labels (and remap cells) by their order keys, so a heatmap reads
 * layer by layer, position by position, whatever the row order. */
static int reorder(cJSON *labels, const double *keys, int n, cJSON *cells, int which) {
    size_t cnt = n > 0 ? (size_t)n : 1;
    int *ord = malloc(sizeof(int) * cnt), *inv = malloc(sizeof(int) * cnt);
    char **names = calloc(cnt, sizeof(char *));
    int rc = ord && inv && names ? 0 : -1;
    for (int i = 0; !rc && i < n; i++) ord[i] = i;
    for (int i = 1; !rc && i < n; i++) /* insertion sort: stable, n is small */
        for (int j = i; j > 0 && keys[ord[j - 1]] > keys[ord[j]]; j--) {
            int s = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = s;
        }
    for (int i = 0; !rc && i < n; i++) inv[ord[i]] = i;
    for (int i = 0; !rc && i < n; i++)
        if (!(names[i] = strdup(cJSON_GetArrayItem(labels, i)->valuestring))) rc = -1;
    for (int i = 0; !rc && i < n; i++)
        if (!cJSON_SetValuestring(cJSON_GetArrayItem(labels, i), names[ord[i]])) rc = -1;
    cJSON *c;
    if (!rc) cJSON_ArrayForEach(c, cells) {
            cJSON *v = cJSON_GetArrayItem(c, which);
            cJSON_SetNumberValue(v, inv[(int)v->valuedouble]);
        }
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
    free(ord);
    free(inv);
    return rc;
}

/* One heatmap of a run's cells (store_report.h: which, and grid for
 * attribution patching) into list, when it has cells. kind: patching,
 * paths, dla or attrpatch (how the script colours and names it). */
static int heatmap(cJSON *list, al_store *st, const char *kind, const char *title,
                   const char *row_title, const char *col_title, const char *v2,
                   al_sr_heatmap which, const char *run, const char *grid, char **pos_lab,
                   int n_pos, al_err *e) {
    hm_rows *R = calloc(1, sizeof *R);
    if (!R) return al_errf(e, "out of memory");
    R->pos_lab = pos_lab, R->n_pos = n_pos;
    cJSON *o = cJSON_CreateObject();
    R->rows = cJSON_CreateArray(), R->cols = cJSON_CreateArray(), R->cells = cJSON_CreateArray();
    int rc = -1;
    if (!o || add(o, "kind", jstr(kind)) || add(o, "title", jstr(title)) ||
        add(o, "run", cJSON_CreateNumber(atof(run))) || add(o, "row_title", jstr(row_title)) ||
        add(o, "col_title", jstr(col_title)) || add(o, "rows", R->rows) ||
        add(o, "cols", R->cols) || add(o, "cells", R->cells) ||
        (v2 && add(o, "v2_name", jstr(v2)))) {
        al_errf(e, "out of memory");
        goto out;
    }
    al_rows q;
    if (al_sr_heatmap_cells(st, which, run, grid, &q, e)) goto out;
    for (int i = 0; i < q.nr; i++)
        if (hm_row(R, q.nc, (const char *const *)q.t + (size_t)i * q.nc, q.x + (size_t)i * q.nc,
                   e)) {
            al_rows_free(&q);
            goto out;
        }
    al_rows_free(&q);
    if (R->too_big)
        fprintf(stderr, "attnlab: warning: %s: over 4096 rows or columns, no explorer\n", title);
    if (R->n == 0 || R->too_big) {
        rc = 0;
        goto out;
    }
    if (reorder(R->rows, R->rk, R->nr, R->cells, 0) ||
        reorder(R->cols, R->ck, R->nc, R->cells, 1)) {
        al_errf(e, "out of memory");
        goto out;
    }
    cJSON_AddItemToArray(list, o);
    o = NULL;
    rc = 0;
out:
    cJSON_Delete(o);
    free(R);
    return rc;
}

/* Runs as (run_id, task, component, direction) rows. */
typedef struct runs {
    char id[32][24], task[32][64], comp[32][64], dir[32][16];
    int n;
} runs;

static void run_row(runs *r, int nc, const char *const *t) {
    if (r->n == 32 || nc < 4 || !t[0]) return;
    snprintf(r->id[r->n], sizeof r->id[0], "%s", t[0]);
    snprintf(r->task[r->n], sizeof r->task[0], "%s", t[1] ? t[1] : "?");
    snprintf(r->comp[r->n], sizeof r->comp[0], "%s", t[2] ? t[2] : "");
    snprintf(r->dir[r->n], sizeof r->dir[0], "%s", t[3] ? t[3] : "");
    r->n++;
}

/* config_json, task_hash, n_pairs, seq_len of a patching run. */
typedef struct prun_info {
    char cfg[4096], hash[24];
    int n, T, ok;
} prun_info;

/* Labels "pos t token" for a patching run's positions: pair 0's clean
 * tokens, the task re-made from the run's stored options as the
 * patching picture does (pictures.c), and only when it is still the
 * run's task (pair count, length and fingerprint agree). NULL (position
 * numbers) otherwise. Caller frees with free_labels. */
static char **position_labels(al_store *st, const char *run, const al_model *m,
                              const al_tokenizer *tok, int *n_out) {
    prun_info in = {0};
    *n_out = 0;
    if (!tok) return NULL;
    al_err e;
    al_rows q;
    if (al_sr_patching_run_info(st, run, &q, &e)) return NULL;
    for (int r = 0; q.nc >= 4 && r < q.nr; r++) /* the last full row, as it always was */
        if (al_rows_t(&q, r, 0) && al_rows_t(&q, r, 1)) {
            snprintf(in.cfg, sizeof in.cfg, "%s", al_rows_t(&q, r, 0));
            snprintf(in.hash, sizeof in.hash, "%s", al_rows_t(&q, r, 1));
            in.n = (int)al_rows_x(&q, r, 2), in.T = (int)al_rows_x(&q, r, 3), in.ok = 1;
        }
    al_rows_free(&q);
    if (!in.ok) return NULL;
    cJSON *j = cJSON_Parse(in.cfg);
    al_patch_opts o = al_patch_opts_defaults();
    al_patch_opts_from_config(j, &o);
    al_pairs t;
    int eot = al_tok_eot(tok), bos = eot < m->cfg.d_vocab ? eot : -1;
    int rc = al_patch_task_make(&t, m, tok, bos, &o, &e);
    cJSON_Delete(j);
    if (rc) return NULL;
    char hex[24], b[256];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)al_pairs_hash(&t));
    char **lab = NULL;
    if (t.T == in.T && t.N == in.n && strcmp(hex, in.hash) == 0 &&
        (lab = calloc((size_t)t.T, sizeof *lab))) {
        for (int i = 0; i < t.T; i++) {
            if (i < t.len[0])
                al_tok_display(tok, t.clean[i], b, sizeof b);
            else
                snprintf(b, sizeof b, "(pad)");
            size_t k = strlen(b) + 32;
            if ((lab[i] = malloc(k))) snprintf(lab[i], k, "pos %d %s", i, b);
        }
        *n_out = t.T;
    }
    al_pairs_free(&t);
    return lab;
}

static void free_labels(char **lab, int n) {
    for (int i = 0; lab && i < n; i++) free(lab[i]);
    free(lab);
}

static int heatmaps_json(cJSON *root, al_store *st, const char *dir, const char *mid, al_err *e) {
    cJSON *list = cJSON_CreateArray();
    if (add(root, "heatmaps", list)) return al_errf(e, "out of memory");
    runs *r = calloc(1, sizeof *r);
    if (!r) return al_errf(e, "out of memory");
    char title[512];
    /* the runs the static page shows: the newest done run per task,
     * component and direction */
    al_rows q;
    int rc = al_sr_patching_runs(st, mid, &q, e);
    for (int i = 0; rc == 0 && i < q.nr; i++)
        run_row(r, q.nc, (const char *const *)q.t + (size_t)i * q.nc);
    if (rc == 0) al_rows_free(&q);
    al_model m;
    al_tokenizer *tok = NULL;
    memset(&m, 0, sizeof m);
    int loaded = 0;
    for (int i = 0; rc == 0 && i < r->n; i++) {
        const char *ding = strcmp(r->dir[i], "noise") == 0 ? "noising" : "denoising";
        char **lab = NULL;
        int n_lab = 0;
        if (r->comp[i][0] && !loaded) { /* the tokenizer and model, once, to re-make tasks */
            al_err le;
            loaded = al_ckpt_load(dir, &m, &tok, &le) == 0 ? 1 : -1;
        }
        if (r->comp[i][0] && loaded == 1) lab = position_labels(st, r->id[i], &m, tok, &n_lab);
        if (r->comp[i][0]) {
            snprintf(title, sizeof title, "Activation patching: %s, %s, task %s (run %s)",
                     r->comp[i], ding, r->task[i], r->id[i]);
            rc = heatmap(list, st, "patching", title, "layer.head", "position", NULL,
                         AL_SR_HM_PATCHING, r->id[i], NULL, lab, n_lab, e);
            free_labels(lab, n_lab);
        } else {
            snprintf(title, sizeof title, "Path patching: %s, task %s (run %s)", ding, r->task[i],
                     r->id[i]);
            rc = heatmap(list, st, "paths", title, "sender", "receiver", NULL, AL_SR_HM_PATHS,
                         r->id[i], NULL, NULL, 0, e);
        }
    }
    if (loaded == 1) {
        al_tok_free(tok);
        al_model_free(&m);
    }
    r->n = 0;
    if (rc == 0 && (rc = al_sr_attribution_run(st, mid, &q, e)) == 0) {
        if (q.nr) { /* run_id, task, direction */
            const char *t[4] = {al_rows_t(&q, 0, 0), al_rows_t(&q, 0, 1), "", al_rows_t(&q, 0, 12)};
            run_row(r, 4, t);
        }
        al_rows_free(&q);
    }
    if (rc == 0 && r->n) {
        const char *run = r->id[0], *task = r->task[0];
        snprintf(title, sizeof title, "Direct logit attribution, task %s (run %s)", task, run);
        rc = heatmap(list, st, "dla", title, "component", "position", NULL, AL_SR_HM_DLA, run, NULL,
                     NULL, 0, e);
        static const char *const grids[3] = {"head", "head_pos", "edge"};
        for (int g = 0; rc == 0 && g < 3; g++) {
            snprintf(title, sizeof title,
                     "Attribution patching estimate, grid %s, task %s (run %s)", grids[g], task,
                     run);
            rc = heatmap(list, st, "attrpatch", title, g < 2 ? "layer.head" : "sender",
                         g < 2 ? "position" : "receiver", "actual patching",
                         g < 2 ? AL_SR_HM_ATTRPATCH_HEAD : AL_SR_HM_ATTRPATCH_EDGE, run, grids[g],
                         NULL, 0, e);
        }
    }
    free(r);
    return rc;
}

/* ------------------------------------------------------- SAE features */

/* Each feature's context windows for the browser: the tokens around each
 * context's position from the run's token file and, when the model and
 * the run's SAE reproduce the stored activations, the feature's
 * activation at each of them (recomputed as the sae-feature picture
 * does). */
#define SAE_WIN_BEFORE 8
#define SAE_WIN_AFTER 3
typedef struct sae_windows {
    al_tokens d; /* the run's token file (d.tok NULL: none) */
    al_tokenizer *tok; /* display forms (NULL: "#id") */
    int T; /* window length */
    int *row; /* (windows) window -> its row in acts, -1 */
    float *acts; /* (rows·T, nf) or NULL */
    char note[AL_PATH_MAX + 1536]; /* why the windows or the activations are missing ("" : none) */
} sae_windows;

static void sae_windows_free(sae_windows *w) {
    al_tokens_free(&w->d);
    al_tok_free(w->tok);
    free(w->row);
    free(w->acts);
    memset(w, 0, sizeof *w);
}

/* Fill w for run fr's features F (nf). Problems are notes, not errors:
 * the browser then shows what the database holds. */
static void sae_windows_make(sae_windows *w, const char *dir, const al_sae_frun *fr,
                             const al_sae_feature *F, int nf) {
    memset(w, 0, sizeof *w);
    w->T = fr->seq_len;
    al_err le;
    if (!fr->data || al_tokens_load(fr->data, &w->d, &le) != 0) {
        snprintf(w->note, sizeof w->note,
                 "the run's token file %s cannot be read: contexts show "
                 "the activating token only",
                 fr->data ? fr->data : "(none)");
        memset(&w->d, 0, sizeof w->d);
        return;
    }
    for (int k = 0; k < nf; k++)
        for (int j = 0; j < F[k].n_ctx; j++) {
            const al_sae_fctx *c = F[k].ctx + j;
            if (c->offset < 0 || c->window < 0 || c->window >= fr->windows ||
                (size_t)c->offset + (size_t)w->T > w->d.n || c->pos < 0 || c->pos >= w->T ||
                w->d.tok[c->offset + c->pos] != c->token) {
                snprintf(w->note, sizeof w->note,
                         "%s does not hold the stored tokens at the "
                         "stored offsets: contexts show the activating token only",
                         fr->data);
                al_tokens_free(&w->d);
                return;
            }
        }
    char tp[AL_PATH_MAX + 64];
    if (al_path_join(tp, sizeof tp, dir, "tokenizer.json", &le) == 0 && al_file_exists(tp))
        al_tok_load(tp, &w->tok, &le);
    /* the activations: every window any context is in, through the model and the SAE */
    w->row = malloc(sizeof(int) * (size_t)(fr->windows > 0 ? fr->windows : 1));
    int *feat = malloc(sizeof(int) * (size_t)(nf > 0 ? nf : 1)), B = 0;
    al_model m;
    al_sae sae;
    al_sae_meta meta;
    memset(&m, 0, sizeof m);
    memset(&sae, 0, sizeof sae);
    int *in = NULL, ok = w->row && feat && nf > 0;
    for (int i = 0; ok && i < fr->windows; i++) w->row[i] = -1;
    for (int k = 0; ok && k < nf; k++) {
        feat[k] = F[k].feature;
        for (int j = 0; j < F[k].n_ctx; j++)
            if (w->row[F[k].ctx[j].window] < 0) w->row[F[k].ctx[j].window] = B++;
    }
    if (ok && (size_t)B * w->T * nf > ((size_t)1 << 24)) { /* 64 MB of activations */
        snprintf(w->note, sizeof w->note,
                 "activations around the contexts not recomputed: "
                 "%d windows of %d features is too many for the page",
                 B, nf);
        ok = 0;
    }
    if (ok && (!fr->sae_dir || al_sae_load(fr->sae_dir, &sae, &meta, &le) != 0)) {
        snprintf(w->note, sizeof w->note,
                 "activations around the contexts not recomputed: the "
                 "SAE %s cannot be read",
                 fr->sae_dir ? fr->sae_dir : "(none)");
        memset(&sae, 0, sizeof sae);
        ok = 0;
    }
    if (ok && al_ckpt_load(dir, &m, NULL, &le) != 0) {
        snprintf(w->note, sizeof w->note, "activations around the contexts not recomputed: %s",
                 le.msg);
        memset(&m, 0, sizeof m);
        ok = 0;
    }
    in = ok ? malloc(sizeof(int) * (size_t)B * w->T) : NULL;
    w->acts = ok ? malloc(sizeof(float) * (size_t)B * w->T * nf) : NULL;
    ok = ok && in && w->acts;
    for (int k = 0; ok && k < nf; k++)
        for (int j = 0; j < F[k].n_ctx; j++) {
            const al_sae_fctx *c = F[k].ctx + j;
            for (int t = 0; t < w->T; t++)
                in[(size_t)w->row[c->window] * w->T + t] = w->d.tok[c->offset + t];
        }
    if (ok && al_sae_features_acts(&m, &sae, &meta, feat, nf, in, B, w->T, w->acts, &le) != 0) {
        snprintf(w->note, sizeof w->note, "activations around the contexts not recomputed: %s",
                 le.msg);
        ok = 0;
    }
    for (int k = 0; ok && k < nf; k++) /* the SAE must still be the run's */
        for (int j = 0; ok && j < F[k].n_ctx; j++) {
            const al_sae_fctx *c = F[k].ctx + j;
            double got = w->acts[((size_t)w->row[c->window] * w->T + c->pos) * nf + k];
            if (!(fabs(got - c->act) <= 1e-3 * fmax(1, fabs(c->act)))) {
                snprintf(w->note, sizeof w->note,
                         "activations around the contexts not "
                         "recomputed: the SAE at %s gives %.6g where the run stored %.6g "
                         "(retrained since?)",
                         fr->sae_dir, got, c->act);
                ok = 0;
            }
        }
    if (!ok) {
        free(w->acts);
        w->acts = NULL;
    }
    free(in);
    free(feat);
    al_sae_free(&sae);
    al_model_free(&m);
}

/* Context j of feature k (column k of w->acts): the window's tokens
 * around it and their activations (null without them), and where the
 * context's own token is in that list. */
static int window_json(cJSON *r, const sae_windows *w, const al_sae_fctx *c, int k, int nf) {
    if (!w->d.tok) return 0;
    cJSON *ts = cJSON_CreateArray(), *as = w->acts ? cJSON_CreateArray() : cJSON_CreateNull();
    if (add(r, NULL, ts) || add(r, NULL, as)) return -1;
    int lo = c->pos - SAE_WIN_BEFORE < 0 ? 0 : c->pos - SAE_WIN_BEFORE;
    int hi = c->pos + SAE_WIN_AFTER >= w->T ? w->T - 1 : c->pos + SAE_WIN_AFTER;
    char b[256];
    for (int t = lo; t <= hi; t++) {
        int id = w->d.tok[c->offset + t];
        if (w->tok && id < al_tok_vocab_size(w->tok))
            al_tok_display(w->tok, id, b, sizeof b);
        else
            snprintf(b, sizeof b, "#%d", id);
        if (add(ts, NULL, jstr(b))) return -1;
        if (w->acts &&
            add(as, NULL, jnum(w->acts[((size_t)w->row[c->window] * w->T + t) * nf + k])))
            return -1;
    }
    return add(r, NULL, cJSON_CreateNumber(c->pos - lo));
}

/* A feature's dashboard data as JSON: its numbers, contexts [token,
 * activation, window, position(, window tokens, their activations or
 * null, the context's index among them)], logit effects [token, value]
 * each way and heads [head, share, contribution], the values as stored. */
static cJSON *feature_json(const al_sae_feature *f, const sae_windows *w, int k, int nf) {
    cJSON *o = cJSON_CreateObject(), *cx = NULL, *up = NULL, *dn = NULL, *hs = NULL;
    char head[32];
    snprintf(head, sizeof head, "%d.%d", f->top_layer, f->top_head);
    int bad =
        !o || add(o, "feature", cJSON_CreateNumber(f->feature)) ||
        add(o, "fired", cJSON_CreateNumber((double)f->fired)) ||
        add(o, "density", jnum(f->density)) || add(o, "mean_act", jnum(f->mean_act)) ||
        add(o, "max_act", jnum(f->max_act)) ||
        add(o, "induction_index", jnum(f->induction_index)) ||
        add(o, "first_mean", jnum(f->first_mean)) || add(o, "second_mean", jnum(f->second_mean)) ||
        add(o, "top_head", f->top_head >= 0 ? jstr(head) : cJSON_CreateNull()) ||
        add(o, "top_share", jnum(f->top_share)) || add(o, "contexts", cx = cJSON_CreateArray()) ||
        add(o, "up", up = cJSON_CreateArray()) || add(o, "down", dn = cJSON_CreateArray()) ||
        add(o, "heads", hs = cJSON_CreateArray());
    for (int i = 0; !bad && i < f->n_ctx; i++) {
        cJSON *r = cJSON_CreateArray();
        bad = add(cx, NULL, r) ||
              add(r, NULL, jstr(f->ctx[i].token_str ? f->ctx[i].token_str : "?")) ||
              add(r, NULL, jnum(f->ctx[i].act)) ||
              add(r, NULL, cJSON_CreateNumber(f->ctx[i].window)) ||
              add(r, NULL, cJSON_CreateNumber(f->ctx[i].pos)) ||
              window_json(r, w, f->ctx + i, k, nf);
    }
    for (int d = 0; !bad && d < 2; d++) {
        const al_sae_flogit *l = d ? f->down : f->up;
        for (int i = 0; !bad && i < (d ? f->n_down : f->n_up); i++) {
            cJSON *r = cJSON_CreateArray();
            bad = add(d ? dn : up, NULL, r) ||
                  add(r, NULL, jstr(l[i].token_str ? l[i].token_str : "?")) ||
                  add(r, NULL, jnum(l[i].value));
        }
    }
    for (int i = 0; !bad && i < f->n_heads; i++) {
        cJSON *r = cJSON_CreateArray();
        snprintf(head, sizeof head, "%d.%d", f->heads[i].layer, f->heads[i].head);
        bad = add(hs, NULL, r) || add(r, NULL, jstr(head)) ||
              add(r, NULL, jnum(f->heads[i].share)) || add(r, NULL, jnum(f->heads[i].contribution));
    }
    if (bad) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* "sae": every finished `sae features` run of the model, each with its
 * AL_VIEWER_SAE_MAX densest features. */
static int sae_json(cJSON *root, al_store *st, const char *dir, const char *mid, al_err *e) {
    long *runs = NULL;
    int n = 0;
    if (al_store_sae_fruns_of_model(st, (int64_t)atoll(mid), &runs, &n, e)) return -1;
    cJSON *list = NULL;
    int rc = 0;
    if (n && add(root, "sae", list = cJSON_CreateArray())) rc = al_errf(e, "out of memory");
    for (int i = 0; i < n && !rc; i++) {
        al_sae_frun fr;
        al_rows q;
        if (al_store_read_sae_frun(st, runs[i], &fr, e)) {
            rc = -1;
            break;
        }
        memset(&q, 0, sizeof q);
        cJSON *r = cJSON_CreateObject(), *fs = NULL; /* owned by the list once added */
        if (add(list, NULL, r) || add(r, "run", cJSON_CreateNumber((double)runs[i])) ||
            add(r, "layer", cJSON_CreateNumber(fr.layer)) ||
            add(r, "hook_name", jstr(fr.hook_name ? fr.hook_name : "")) ||
            add(r, "sae_dir", jstr(fr.sae_dir ? fr.sae_dir : "")) ||
            add(r, "d_sae", cJSON_CreateNumber(fr.d_sae)) ||
            add(r, "n_live", cJSON_CreateNumber(fr.n_live)) ||
            add(r, "positions", cJSON_CreateNumber((double)fr.positions)) ||
            add(r, "probe_r", cJSON_CreateNumber(fr.probe_r)) ||
            add(r, "probe_n", cJSON_CreateNumber(fr.probe_n)) ||
            add(r, "features", fs = cJSON_CreateArray()))
            rc = al_errf(e, "out of memory");
        if (!rc)
            rc =
                al_store_sae_top_features(st, runs[i], AL_SAE_BY_DENSITY, AL_VIEWER_SAE_MAX, &q, e);
        al_sae_feature *F = rc ? NULL : calloc((size_t)(q.nr > 0 ? q.nr : 1), sizeof *F);
        if (!rc && !F) rc = al_errf(e, "out of memory");
        int nf = 0;
        for (int k = 0; !rc && k < q.nr; k++, nf++)
            rc = al_store_read_sae_feature(st, runs[i], (int)al_rows_x(&q, k, 0), &F[k], e);
        sae_windows w;
        memset(&w, 0, sizeof w);
        if (!rc) sae_windows_make(&w, dir, &fr, F, nf);
        if (!rc && (add(r, "context_before", cJSON_CreateNumber(SAE_WIN_BEFORE)) ||
                    add(r, "context_after", cJSON_CreateNumber(SAE_WIN_AFTER)) ||
                    add(r, "context_note", jstr(w.note))))
            rc = al_errf(e, "out of memory");
        if (!rc && w.note[0])
            fprintf(stderr, "attnlab: warning: features browser of run %ld: %s\n", runs[i], w.note);
        for (int k = 0; !rc && k < nf; k++)
            if (add(fs, NULL, feature_json(&F[k], &w, k, nf))) rc = al_errf(e, "out of memory");
        for (int k = 0; F && k < nf; k++) al_sae_feature_free(&F[k]);
        free(F);
        sae_windows_free(&w);
        al_rows_free(&q);
        al_sae_frun_free(&fr);
    }
    free(runs);
    return rc;
}

/* ------------------------------------------------------------ the block */

int al_viewer_model_block(al_buf *h, al_store *st, const al_viewer_model *vm, al_err *e) {
    cJSON *root = cJSON_CreateObject();
    if (!root || add(root, "model", jstr(vm->label))) {
        cJSON_Delete(root);
        return al_errf(e, "out of memory");
    }
    if (vm->prompt) {
        al_err pe;
        if (prompt_json(root, vm, &pe)) {
            fprintf(stderr, "attnlab: warning: %s: no attention or loss explorer: %s\n", vm->label,
                    pe.msg);
            cJSON_DeleteItemFromObject(root, "prompt");
            if (add(root, "prompt_error", jstr(pe.msg))) {
                cJSON_Delete(root);
                return al_errf(e, "out of memory");
            }
        }
    }
    if (vm->model_id && strcmp(vm->model_id, "0") != 0 &&
        (heatmaps_json(root, st, vm->dir, vm->model_id, e) ||
         sae_json(root, st, vm->dir, vm->model_id, e))) {
        cJSON_Delete(root);
        return -1;
    }
    char *json = al_json_print(0, root);
    cJSON_Delete(root);
    char *safe = json ? al_viewer_json_for_html(json) : NULL;
    char *slug = al_html_escape(vm->slug, strlen(vm->slug));
    free(json);
    if (!safe || !slug) {
        free(safe);
        free(slug);
        return al_errf(e, "out of memory");
    }
    /* hidden until the script fills it: without JavaScript the page is
     * the static one */
    al_buf_printf(h,
                  "<div class=\"al-x\" id=\"al-x-%s\" data-model=\"%s\" hidden><h3>Explorers</h3>"
                  "<p class=meta>Interactive views of the numbers above, drawn in the page from "
                  "the data below it (nothing is fetched). Hover a token or a cell to read its "
                  "values; click a head's thumbnail to enlarge it.</p></div>\n"
                  "<script type=\"application/json\" id=\"al-data-%s\">%s</script>\n",
                  slug, slug, slug, safe);
    free(safe);
    free(slug);
    return 0;
}

void al_viewer_script(al_buf *h) {
    al_buf_puts(h, "<script>\n");
    al_buf_puts(h, viewer_js);
    al_buf_puts(h, "</script>\n");
}
