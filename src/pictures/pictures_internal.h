/* layer: pictures
 *
 * pictures_internal.h -- what the picture families (pic_*.c) share: the
 * picture being built (struct al_pic), its memory list, and the helpers
 * every family uses (labels, scales, notes, run checks). Private to
 * src/pictures/; the public side is include/attnlab/pictures.h.
 *
 * A draw function (one per kind, the table of pictures.c names it) fills
 * p->fig from p->m (the weights) and/or p->st (the database, read through
 * store_pictures.h); every block it allocates goes on p's list
 * (pic_keep, pic_calloc) and is freed with the picture, so draw functions
 * stay linear code with plain early returns. Each returns 0, or -1 with e
 * set; nothing is written to disk until the driver draws the figure. */
#ifndef ATTNLAB_PICTURES_INTERNAL_H
#define ATTNLAB_PICTURES_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "attnlab/model.h"
#include "attnlab/pictures.h"
#include "attnlab/plot.h"
#include "attnlab/store.h"
#include "attnlab/store_pictures.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

#define MAX_PANELS 64
#define MAX_TOKENS 256 /* qk/ov axes; beyond this a picture is not readable */
#define LABEL_CAP 64

typedef struct al_pic {
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

/* The draw function of each kind: pic_draw_<id> (AL_PIC_KINDS). */
#define PIC_DECLARE_DRAW(id, name, family, needs, help) int pic_draw_##id(pic *p, al_err *e);
AL_PIC_KINDS(PIC_DECLARE_DRAW)
#undef PIC_DECLARE_DRAW

/* ---- memory: everything freed with the picture ---- */

/* ptr onto p's list (NULL stays NULL; on failure ptr is freed, NULL). */
void *pic_keep(pic *p, void *ptr, al_err *e);
/* Zeroed, on p's list; NULL with e on failure. */
void *pic_calloc(pic *p, size_t n, size_t size, al_err *e);
float *pic_floats(pic *p, size_t n, al_err *e);
char *pic_printf(pic *p, al_err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- the figure ---- */

/* A note line under the figure (dropped beyond AL_FIG_MAX_NOTES). */
void pic_note(pic *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The next panel (NULL beyond MAX_PANELS). */
al_panel *pic_add_panel(pic *p, int kind);
/* Colour scale k of p (0..3), reset. */
al_cscale *pic_scale(pic *p, int k, int diverging, double lo, double hi, const char *label);
/* Display form of a token id for labels. */
char *pic_tok_label(pic *p, int id, al_err *e);
/* "l.h" for every head of layers l0..l1-1. */
const char **pic_head_labels(pic *p, int l0, int l1, al_err *e);
/* Subtract each row's mean over its unmasked (non-NaN) cells. */
void pic_centre_rows(float *v, int rows, int cols);

/* ---- options against the model ---- */

int pic_need_layer(pic *p, int l, al_err *e);
int pic_need_head(pic *p, int h, al_err *e);
/* --layer, else dflt. */
int pic_layer_or(pic *p, int dflt);
/* "l.h" -> flat index l*H + h, *end after it; -1 if malformed or out of range. */
int pic_parse_head(pic *p, const char *s, const char **end);

/* ---- runs ---- */

/* Append "what run N" to the provenance (p->run_txt). */
void pic_run_note(pic *p, const char *what, long run);
/* 0 if run > 0; else the error that the model has no finished `kind`
 * run (words: what it must have, or NULL). */
int pic_need_run(pic *p, long run, const char *kind, const char *words, al_err *e);
/* A run against what a picture needs: it exists, is of `kind`, finished
 * (with its row in the kind's table), and is of this model; noted. */
int pic_run_checked(pic *p, const al_store_run_head *h, const char *kind, const char *what,
                    al_err *e);
/* Two note lines on a patching direction ("noise" or "denoise") and its effect. */
void pic_dir_notes(pic *p, const char *d);

#endif
