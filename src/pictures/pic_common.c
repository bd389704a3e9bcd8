/* pic_common.c -- what every picture family uses (pictures_internal.h):
 * the picture's memory list, labels, scales, notes, option checks and the
 * checks of the run a picture draws. */
#define _POSIX_C_SOURCE 200809L
#include "pictures_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */

void *pic_keep(pic *p, void *ptr, al_err *e) {
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

/* The three allocate for their caller, which is the fault site (util.h):
 * a picture's hundred-odd allocations are each a fault point. */
static void *calloc_for(pic *p, size_t n, size_t size, const void *site, al_err *e) {
    return pic_keep(p, al_calloc_at(n ? n : 1, size, site, e), e);
}

void *pic_calloc(pic *p, size_t n, size_t size, al_err *e) {
    return calloc_for(p, n, size, __builtin_return_address(0), e);
}

float *pic_floats(pic *p, size_t n, al_err *e) {
    return calloc_for(p, n, sizeof(float), __builtin_return_address(0), e);
}

char *pic_printf(pic *p, al_err *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? calloc_for(p, (size_t)n + 1, 1, __builtin_return_address(0), e) : NULL;
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

void pic_note(pic *p, const char *fmt, ...) {
    if (p->fig.n_notes >= AL_FIG_MAX_NOTES) return;
    char *b = p->notes[p->fig.n_notes];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof p->notes[0], fmt, ap);
    va_end(ap);
    p->fig.notes[p->fig.n_notes++] = b;
}

al_panel *pic_add_panel(pic *p, int kind) {
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

al_cscale *pic_scale(pic *p, int k, int diverging, double lo, double hi, const char *label) {
    al_cscale *c = &p->cs[k];
    memset(c, 0, sizeof *c);
    c->diverging = diverging;
    c->lo = lo;
    c->hi = hi;
    c->label = label;
    return c;
}

/* Display form of a token id for labels. */
char *pic_tok_label(pic *p, int id, al_err *e) {
    char b[LABEL_CAP];
    if (p->tok && id < al_tok_vocab_size(p->tok))
        al_tok_display(p->tok, id, b, sizeof b);
    else
        snprintf(b, sizeof b, "#%d", id);
    return pic_printf(p, e, "%s", b);
}

const char **pic_head_labels(pic *p, int l0, int l1, al_err *e) {
    const char **lab = pic_calloc(p, (size_t)(l1 - l0) * p->H, sizeof(char *), e);
    for (int l = l0; lab && l < l1; l++)
        for (int h = 0; h < p->H; h++)
            if (!(lab[(l - l0) * p->H + h] = pic_printf(p, e, "%d.%d", l, h))) return NULL;
    return lab;
}

/* Subtract each row's mean over its unmasked cells: softmax (over a QK
 * row) and the logits (over an OV row) ignore a per-row constant, and
 * without it one row's offset can swamp the picture. */
void pic_centre_rows(float *v, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = 0;
        int n = 0;
        for (int c = 0; c < cols; c++)
            if (!isnan(v[(size_t)r * cols + c])) s += v[(size_t)r * cols + c], n++;
        for (int c = 0; n && c < cols; c++) v[(size_t)r * cols + c] -= (float)(s / n);
    }
}

int pic_need_layer(pic *p, int l, al_err *e) {
    if (l < 0 || l >= p->L)
        return al_errf(e, "--layer %d is out of range: the model has %d layer%s", l, p->L,
                       p->L == 1 ? "" : "s");
    return 0;
}

int pic_need_head(pic *p, int h, al_err *e) {
    if (h < 0) return al_errf(e, "--head is required for --what %s", p->o->what);
    if (h >= p->H)
        return al_errf(e, "--head %d is out of range: the model has %d heads per layer", h, p->H);
    return 0;
}

int pic_layer_or(pic *p, int dflt) { return p->o->layer >= 0 ? p->o->layer : dflt; }

/* "l.h" -> flat index, -1 if malformed or out of range. */
int pic_parse_head(pic *p, const char *s, const char **end) {
    int l, h, k = 0;
    if (sscanf(s, "%d.%d%n", &l, &h, &k) != 2 || l < 0 || l >= p->L || h < 0 || h >= p->H)
        return -1;
    *end = s + k;
    return l * p->H + h;
}

/* ---------------------------------------------------------- runs */

void pic_run_note(pic *p, const char *what, long run) {
    size_t n = strlen(p->run_txt);
    snprintf(p->run_txt + n, sizeof p->run_txt - n, "%s%s run %ld", n ? ", " : "", what, run);
}

int pic_need_run(pic *p, long run, const char *kind, const char *words, al_err *e) {
    if (run > 0) return 0;
    return al_errf(e,
                   "database %s has no finished %s run%s%s for model %s (run attnlab %s "
                   "--db, or give --run ID)",
                   p->o->db, kind, words ? " " : "", words ? words : "", p->dir, kind);
}

/* A run against what a picture needs: it exists, is of `kind`, finished
 * (with its row in the kind's table), and is of this model. */
int pic_run_checked(pic *p, const al_store_run_head *h, const char *kind, const char *what,
                    al_err *e) {
    if (!h->found) return al_errf(e, "database %s has no run %ld", p->o->db, h->run);
    if (strcmp(h->kind, kind) != 0)
        return al_errf(e, "run %ld is a '%s' run; --what %s draws the runs of attnlab %s", h->run,
                       h->kind, what, kind);
    if (strcmp(h->status, "done") != 0 || !h->has_row)
        return al_errf(e, "run %ld did not finish (status %s)", h->run, h->status);
    if (p->model_id && h->model_id != p->model_id)
        return al_errf(e, "run %ld analysed another model than %s", h->run, p->dir);
    pic_run_note(p, kind, h->run);
    /* the run's gap/effect warnings (gap.h) beside the effects they qualify */
    char **w = NULL;
    int n = 0;
    if (al_store_run_warnings(p->st, h->run, &w, &n, e)) return -1;
    for (int i = 0; i < n; i++) pic_note(p, "warning: %s", w[i]);
    al_store_strings_free(w, n);
    return 0;
}

/* Two note lines on the direction and the effect. */
void pic_dir_notes(pic *p, const char *d) {
    int noise = strcmp(d, "noise") == 0;
    pic_note(p, "%s",
             noise ? "noising: the clean run with one value taken from the corrupted run"
                   : "denoising: the corrupted run with one value taken from the clean run");
    pic_note(p, "%s",
             noise ? "effect = (M_clean - M_patched) / (M_clean - M_corr); 1 = the patch "
                     "breaks the behaviour"
                   : "effect = (M_patched - M_corr) / (M_clean - M_corr); 1 = the patch "
                     "restores it");
}
