/* pictures.c -- from a model (and a results database) to a figure to a
 * file (see pictures.h): the table of picture kinds and the driver.
 *
 * Each kind fills one al_figure: its numbers, labels and words; its draw
 * function lives in the file of its family (pic_weights.c,
 * pic_behaviour.c, pic_patching.c, pic_attribution.c, pic_circuits.c,
 * pic_views.c, pic_sae.c, pic_sweeps.c; shared helpers in pic_common.c). Layout and drawing are
 * plot.c's business; provenance goes into PNG text chunks. The driver
 * walks the table: what a kind needs (weights, database, the model of a
 * run, a small model) decides what is loaded and checked before it draws. */
#define _POSIX_C_SOURCE 200809L
#include "pictures_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/graph.h"
#include "attnlab/png.h"

#define PIC_KIND_ENTRY(id, name, family, needs, help) {name, family, help, needs, pic_draw_##id},
/* clang-format off */
const al_pic_kind al_pic_kind_table[] = {AL_PIC_KINDS(PIC_KIND_ENTRY)};
/* clang-format on */
#undef PIC_KIND_ENTRY
const int al_pic_n_kinds = (int)(sizeof al_pic_kind_table / sizeof al_pic_kind_table[0]);

#define PIC_KIND_NAME(id, name, family, needs, help) name,
/* clang-format off */
const char *const al_pic_kinds[] = {AL_PIC_KINDS(PIC_KIND_NAME) NULL};
/* clang-format on */
#undef PIC_KIND_NAME

const al_pic_kind *al_pic_kind_find(const char *name) {
    for (int k = 0; name && k < al_pic_n_kinds; k++)
        if (strcmp(al_pic_kind_table[k].name, name) == 0) return &al_pic_kind_table[k];
    return NULL;
}

al_pic_opts al_pic_defaults(void) {
    al_pic_opts o = {.what = NULL,
                     .layer = -1,
                     .head = -1,
                     .repeat = 0,
                     .seed = 1,
                     .top_n = 40,
                     .n_pos = 64,
                     .tau = NAN,
                     .feature = -1};
    return o;
}

/* ---------------------------------------------------------- the driver */

/* The directory of the model o->run_id analysed (models.path). */
static int run_model_dir(const al_pic_opts *o, char *dir, size_t cap, al_err *e) {
    if (!o->db || o->run_id <= 0)
        return al_errf(e, "--what %s needs --model DIR, or --db FILE and --run ID", o->what);
    if (!al_file_exists(o->db)) return al_errf(e, "database %s does not exist", o->db);
    al_store *st;
    if (al_store_open_read(o->db, &st, e)) return -1;
    char *path = NULL;
    int rc = al_store_run_model_path(st, o->run_id, &path, e);
    al_store_close(st);
    if (rc) return -1;
    if (!path) return al_errf(e, "database %s has no run %ld with a model", o->db, o->run_id);
    if (strlen(path) >= cap)
        rc = al_errf(e, "model path of run %ld is too long", o->run_id);
    else
        snprintf(dir, cap, "%s", path);
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

/* Circuit discovery covers the models the head graph does (graph.h):
 * any other model is refused before the database is read (it cannot have
 * a circuit there). */
static int graph_model(pic *p, al_err *e) {
    if (al_graph_n_edges(p->L, p->H) > 0) return 0;
    return al_errf(e,
                   "--what %s: circuit discovery covers models of 1 to %d layers; %s has %d "
                   "layers",
                   p->o->what, AL_GRAPH_MAX_LAYERS, p->dir, p->L);
}

/* The database, and the model's id in it (0: never analysed into it). */
static int open_db(pic *p, int required, al_err *e) {
    if (!p->o->db) {
        if (required)
            return al_errf(e, "--what %s reads the results database: give --db FILE", p->o->what);
        return 0;
    }
    if (!al_file_exists(p->o->db)) return al_errf(e, "database %s does not exist", p->o->db);
    if (al_store_open_read(p->o->db, &p->st, e)) return -1;
    char path[AL_PATH_MAX + 64], sha[65];
    if (al_path_join(path, sizeof path, p->dir, "model.safetensors", e) ||
        al_sha256_file(path, sha, e))
        return -1;
    if (al_store_model_by_sha(p->st, sha, &p->model_id, e)) return -1;
    /* composition and spectrum then compute from the weights instead */
    if (!p->model_id && p->o->run_id <= 0 && required)
        return al_errf(e,
                       "database %s has no results for model %s (these weights were never "
                       "analysed into it)",
                       p->o->db, p->dir);
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
        size_t k =
            strlen(p->prompt_txt) < sizeof prompt - 1 ? strlen(p->prompt_txt) : sizeof prompt - 1;
        while (k > 0 && k < strlen(p->prompt_txt) &&
               ((unsigned char)p->prompt_txt[k] & 0xC0) == 0x80)
            k--;
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
        int n = *u < 0x80             ? 1
                : (*u & 0xE0) == 0xC0 ? 2
                : (*u & 0xF0) == 0xE0 ? 3
                : (*u & 0xF8) == 0xF0 ? 4
                                      : 0;
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

/* "unknown picture" with every kind's name, from the table. */
static int unknown_kind(const char *what, al_err *e) {
    char list[1024] = "";
    for (int k = 0; k < al_pic_n_kinds; k++) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", al_pic_kind_table[k].name);
    }
    return al_errf(e, "unknown picture '%s' (%s)", what ? what : "", list);
}

/* A kind without a model is about every model of the database: no model
 * directory, no weights. */
static int whole_db_picture(const al_pic_kind *k, const al_pic_opts *o, const char *out_png, int *w,
                            int *h, al_err *e) {
    if (!o->db) return al_errf(e, "--what %s reads the results database: give --db FILE", o->what);
    if (!al_file_exists(o->db)) return al_errf(e, "database %s does not exist", o->db);
    pic *p = calloc(1, sizeof *p);
    if (!p) return al_errf(e, "out of memory");
    p->o = o;
    p->dir = "(every model in the database)";
    p->fig.title = p->title;
    p->fig.panels = p->panels;
    int rc = al_store_open_read(o->db, &p->st, e);
    if (rc == 0) rc = k->draw(p, e);
    /* circuits from the weights of a LayerNorm or bias model: what they
     * leave out (circuits.h; the model's LayerNorm is folded, or the
     * circuits refused it) */
    if (rc == 0 && !strcmp(k->family, "weights") && strcmp(k->name, "attention") &&
        !al_config_is_plain(&p->m.cfg))
        pic_note(p, "%s",
                 p->m.cfg.norm_type != AL_NORM_NONE
                     ? "read from the weights with LayerNorm folded in and the biases "
                       "left out: each circuit is the model's up to LayerNorm's "
                       "per-position scale"
                     : "read from the weights with the biases left out");
    if (rc == 0) rc = write_fig(p, out_png, w, h, e);
    pic_free(p);
    return rc;
}

int al_picture(const char *model_dir, const al_pic_opts *o, const char *out_png, int *w, int *h,
               al_err *e) {
    const al_pic_kind *k = al_pic_kind_find(o->what);
    if (!k) return unknown_kind(o->what, e);
    if (!(k->needs & AL_PIC_MODEL)) return whole_db_picture(k, o, out_png, w, h, e);
    char dir[AL_PATH_MAX];
    if (!model_dir && (k->needs & AL_PIC_RUN_MODEL)) {
        if (run_model_dir(o, dir, sizeof dir, e)) return -1;
        model_dir = dir;
    }
    if (!model_dir) return al_errf(e, "--what %s needs --model DIR", o->what);
    if (o->prompt && !valid_utf8_prompt(o->prompt))
        return al_errf(e, "--prompt is not valid UTF-8");
    pic *p = calloc(1, sizeof *p);
    if (!p) return al_errf(e, "out of memory");
    p->o = o;
    p->dir = model_dir;
    p->fig.title = p->title;
    p->fig.panels = p->panels;
    int rc = load(p, e);
    if (rc == 0 && (k->needs & AL_PIC_GRAPH)) rc = graph_model(p, e);
    if (rc == 0) rc = open_db(p, (k->needs & AL_PIC_DB) != 0, e);
    if (rc == 0) rc = k->draw(p, e);
    /* circuits from the weights of a LayerNorm or bias model: what they
     * leave out (circuits.h; the model's LayerNorm is folded, or the
     * circuits refused it) */
    if (rc == 0 && !strcmp(k->family, "weights") && strcmp(k->name, "attention") &&
        !al_config_is_plain(&p->m.cfg))
        pic_note(p, "%s",
                 p->m.cfg.norm_type != AL_NORM_NONE
                     ? "read from the weights with LayerNorm folded in and the biases "
                       "left out: each circuit is the model's up to LayerNorm's "
                       "per-position scale"
                     : "read from the weights with the biases left out");
    if (rc == 0) rc = write_fig(p, out_png, w, h, e);
    pic_free(p);
    return rc;
}
