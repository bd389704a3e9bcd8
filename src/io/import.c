/* import.c -- a TransformerLens checkpoint into an attnlab model (import.h):
 * find the state dict in the file, settle the configuration against its
 * keys and shapes, read the weights, process them, write the directory.
 *
 * The file's keys are held to the model's: every key under the state
 * dict's prefix must be a tensor of the model (or one of the two buffers
 * TransformerLens saves with it), and every tensor of the model must be
 * there, so a checkpoint of another architecture is refused by the first
 * key that does not fit, never half read. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/import.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attnlab/checkpoint.h"
#include "attnlab/json.h"
#include "attnlab/safetensors.h"
#include "attnlab/torch_ckpt.h"

/* ------------------------------------------------------- the file */

/* A checkpoint of either format, behind one interface. */
typedef struct ckpt {
    const char *path;
    al_pt_file *pt;
    al_st_file *st;
} ckpt;

static int ck_open(ckpt *c, const char *path, al_err *e) {
    memset(c, 0, sizeof *c);
    c->path = path;
    al_pt_kind kind;
    if (al_pt_kind_file(path, &kind, e)) return -1;
    if (kind != AL_PT_OTHER) return al_pt_open(path, &c->pt, e);
    /* not a torch.save file: safetensors, or nothing attnlab reads */
    al_err se;
    if (al_st_open(path, &c->st, &se) == 0) return 0;
    const char *dot = strrchr(path, '.');
    if (dot && !strcmp(dot, ".safetensors")) {
        *e = se;
        return -1;
    }
    return al_errf(e,
                   "cannot read checkpoint %s: neither a torch.save file (a zip holding "
                   "data.pkl) nor safetensors",
                   path);
}

static void ck_close(ckpt *c) {
    al_pt_close(c->pt);
    al_st_close(c->st);
    c->pt = NULL, c->st = NULL;
}

static int ck_count(const ckpt *c) { return c->pt ? al_pt_count(c->pt) : al_st_count(c->st); }

static const char *ck_name(const ckpt *c, int i) {
    return c->pt ? al_pt_at(c->pt, i)->name : al_st_at(c->st, i)->name;
}

/* Shape of tensor name (ndim, or −1 when absent) and its dtype's name. */
static int ck_shape(const ckpt *c, const char *name, int64_t shape[8], const char **dtype) {
    if (c->pt) {
        const al_pt_tensor *t = al_pt_get(c->pt, name);
        if (!t) return -1;
        for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
        if (dtype) *dtype = al_pt_dtype_name(t->dtype);
        return t->ndim;
    }
    const al_st_tensor *t = al_st_get(c->st, name);
    if (!t) return -1;
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    if (dtype)
        *dtype = t->dtype == AL_DT_F16    ? "F16"
                 : t->dtype == AL_DT_BF16 ? "BF16"
                 : t->dtype == AL_DT_I32  ? "I32"
                                          : "F32";
    return t->ndim;
}

static int ck_read(const ckpt *c, const char *name, int ndim, const int64_t *shape, float *dst,
                   al_err *e) {
    return c->pt ? al_pt_read_f32(c->pt, name, ndim, shape, dst, e)
                 : al_st_read_f32(c->st, name, ndim, shape, dst, e);
}

/* ------------------------------------------------------- the keys */

/* The state dict's prefix: "" or "A.B." such that PREFIX + "embed.W_E" is
 * a tensor; one only (or the user's). */
static int find_prefix(const ckpt *c, const char *want, char *prefix, size_t cap, al_err *e) {
    if (want) {
        size_t n = strlen(want);
        if (n + 2 > cap) return al_errf(e, "--prefix is too long");
        snprintf(prefix, cap, "%s%s", want, n && want[n - 1] != '.' ? "." : "");
        return 0;
    }
    const char *tail = "embed.W_E";
    size_t nt = strlen(tail);
    int found = 0;
    char first[256] = "";
    for (int i = 0; i < ck_count(c); i++) {
        const char *nm = ck_name(c, i);
        size_t n = strlen(nm);
        if (n < nt || strcmp(nm + n - nt, tail) || (n > nt && nm[n - nt - 1] != '.')) continue;
        if (n - nt >= cap) continue;
        if (found++ == 0) {
            snprintf(prefix, cap, "%.*s", (int)(n - nt), nm);
            snprintf(first, sizeof first, "%s", nm);
        } else
            return al_errf(e,
                           "checkpoint %s holds more than one state dict (%s and %.200s): say "
                           "which with --prefix",
                           c->path, first, nm);
    }
    if (found) return 0;
    return al_errf(e,
                   "checkpoint %s has no tensor embed.W_E (%d tensor%s, the first '%.80s'): "
                   "not a TransformerLens state dict",
                   c->path, ck_count(c), ck_count(c) == 1 ? "" : "s",
                   ck_count(c) ? ck_name(c, 0) : "");
}

/* k = "blocks.L.REST": 1 with *l and *rest; else 0. */
static int block_key(const char *k, int *l, const char **rest) {
    if (strncmp(k, "blocks.", 7)) return 0;
    const char *p = k + 7;
    long v = 0;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9' && v < 100000) v = v * 10 + (*p++ - '0');
    if (*p != '.') return 0;
    *l = (int)v, *rest = p + 1;
    return 1;
}

/* The buffers TransformerLens keeps in a state dict: not weights. */
static int is_buffer(const char *rest) {
    return !strcmp(rest, "attn.mask") || !strcmp(rest, "attn.IGNORE");
}

/* What the keys under the prefix say: layer count (max L + 1), MLP or
 * not (its first MLP key), LayerNorm weights present. */
typedef struct key_survey {
    int n_layers;
    char mlp_key[256];
    int has_ln;
} key_survey;

static void survey(const ckpt *c, const char *prefix, key_survey *s) {
    memset(s, 0, sizeof *s);
    size_t np = strlen(prefix);
    for (int i = 0; i < ck_count(c); i++) {
        const char *nm = ck_name(c, i), *rest;
        int l;
        if (strncmp(nm, prefix, np)) continue;
        const char *k = nm + np;
        if (!strcmp(k, "ln_final.w")) s->has_ln = 1;
        if (!block_key(k, &l, &rest)) continue;
        if (l + 1 > s->n_layers) s->n_layers = l + 1;
        if (!strcmp(rest, "ln1.w")) s->has_ln = 1;
        if (!s->mlp_key[0] && (!strncmp(rest, "mlp.", 4) || !strncmp(rest, "ln2.", 4)))
            snprintf(s->mlp_key, sizeof s->mlp_key, "%.250s", k);
    }
}

/* The size at dim i of tensor prefix+name (of ndim dims), or 0 with e. */
static int dim_of(const ckpt *c, const char *prefix, const char *name, int ndim, int i, al_err *e) {
    char full[512];
    int64_t shape[8];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int nd = ck_shape(c, full, shape, NULL);
    if (nd < 0)
        return al_errf(e, "cannot read checkpoint %s: tensor %.300s missing", c->path, full), 0;
    if (nd != ndim || shape[i] < 1 || shape[i] > 1000000)
        return al_errf(e, "cannot read checkpoint %s: tensor %.300s has %d dimensions, expected %d",
                       c->path, full, nd, ndim),
               0;
    return (int)shape[i];
}

/* The sizes nobody gave, off the shapes: W_E (V, C), W_pos (n_ctx, C),
 * blocks.0.attn.W_Q (H, C, D); the layer count off the keys. */
static int fill_sizes(const ckpt *c, const char *prefix, const key_survey *s, al_config *cfg,
                      al_err *e) {
    struct {
        int *dst;
        const char *name;
        int ndim, i;
    } q[] = {{&cfg->d_vocab, "embed.W_E", 2, 0},
             {&cfg->d_model, "embed.W_E", 2, 1},
             {&cfg->n_ctx, "pos_embed.W_pos", 2, 0},
             {&cfg->n_heads, "blocks.0.attn.W_Q", 3, 0},
             {&cfg->d_head, "blocks.0.attn.W_Q", 3, 2}};
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++)
        if (!*q[k].dst && !(*q[k].dst = dim_of(c, prefix, q[k].name, q[k].ndim, q[k].i, e)))
            return -1;
    if (!cfg->n_layers) cfg->n_layers = s->n_layers;
    if (!cfg->n_layers)
        return al_errf(e, "cannot read checkpoint %s: no blocks.L tensors (no layers)", c->path);
    return 0;
}

/* 1 if k (after the prefix) is a tensor of m: (which, layer). */
static int model_key(const al_model *m, const char *k, int *which, int *layer) {
    char nm[128];
    int64_t shape[4];
    for (int p = 0; p < AL_NPARAM; p++) {
        if (!m->param_size[p]) continue;
        int L = al_param_per_layer(p) ? m->cfg.n_layers : 1;
        for (int l = 0; l < L; l++) {
            al_param_tl_name(m, p, l, nm, sizeof nm, shape);
            if (!strcmp(nm, k)) {
                *which = p, *layer = l;
                return 1;
            }
        }
    }
    return 0;
}

/* Every key under the prefix a tensor of m or a buffer (counted). */
static int check_extra(const ckpt *c, const char *prefix, const al_model *m, int *n_skipped,
                       al_err *e) {
    size_t np = strlen(prefix);
    *n_skipped = 0;
    for (int i = 0; i < ck_count(c); i++) {
        const char *nm = ck_name(c, i), *rest;
        int l, w;
        if (strncmp(nm, prefix, np)) continue; /* beside the state dict (optimizer, step, ...) */
        const char *k = nm + np;
        if (block_key(k, &l, &rest) && is_buffer(rest)) {
            (*n_skipped)++;
            continue;
        }
        if (model_key(m, k, &w, &l)) continue;
        const char *why = "not a tensor of an attention-only TransformerLens model";
        if (block_key(k, &l, &rest) && l >= m->cfg.n_layers)
            why = "beyond the model's layers";
        else if (!strncmp(k, "ln_final.", 9) ||
                 (block_key(k, &l, &rest) && !strncmp(rest, "ln1.", 4)))
            why = "a LayerNorm weight, but the configuration's normalization has none";
        return al_errf(e, "checkpoint %s: key '%.200s' is %s (%d layer%s, normalization %s)",
                       c->path, nm, why, m->cfg.n_layers, m->cfg.n_layers == 1 ? "" : "s",
                       al_norm_type_name(m->cfg.norm_type) ? al_norm_type_name(m->cfg.norm_type)
                                                           : "none");
    }
    return 0;
}

/* The biases the file has: a kind is present when its layer-0 tensor
 * (or unembed.b_U) is; the other layers must then have it too (read). */
static unsigned biases_of(const ckpt *c, const char *prefix) {
    static const char *const names[5] = {"blocks.0.attn.b_Q", "blocks.0.attn.b_K",
                                         "blocks.0.attn.b_V", "blocks.0.attn.b_O", "unembed.b_U"};
    unsigned bits = 0;
    for (int i = 0; i < 5; i++) {
        char full[512];
        int64_t shape[8];
        snprintf(full, sizeof full, "%s%s", prefix, names[i]);
        if (ck_shape(c, full, shape, NULL) >= 0) bits |= 1u << i;
    }
    return bits;
}

static int read_all(const ckpt *c, const char *prefix, al_model *m, int *n_read, al_err *e) {
    *n_read = 0;
    for (int p = 0; p < AL_NPARAM; p++) {
        if (!m->param_size[p]) continue;
        int L = al_param_per_layer(p) ? m->cfg.n_layers : 1;
        for (int l = 0; l < L; l++) {
            char nm[128], full[512];
            int64_t shape[4];
            int nd = al_param_tl_name(m, p, l, nm, sizeof nm, shape);
            snprintf(full, sizeof full, "%s%s", prefix, nm);
            if (ck_read(c, full, nd, shape, m->p[p] + (size_t)l * al_param_layer_size(m, p), e))
                return -1;
            (*n_read)++;
        }
    }
    return 0;
}

/* The config's checks that needed the sizes. */
static int late_checks(const al_config *c, const al_import_info *info, const char *src, al_err *e) {
    double want = sqrt((double)c->d_head);
    if (info->attn_scale != -1 && !(fabs(info->attn_scale - want) <= 1e-6 * want))
        return al_errf(e, "%s: attn_scale %g is not sqrt(d_head) = %g", src, info->attn_scale,
                       want);
    if (info->n_kv_heads != -1 && info->n_kv_heads != c->n_heads)
        return al_errf(e,
                       "%s: n_key_value_heads %d is not n_heads (%d): attnlab has no grouped "
                       "keys and values",
                       src, info->n_kv_heads, c->n_heads);
    if (info->d_vocab_out != -1 && info->d_vocab_out != c->d_vocab)
        return al_errf(e, "%s: d_vocab_out %d is not d_vocab (%d)", src, info->d_vocab_out,
                       c->d_vocab);
    return 0;
}

int al_import_model(const al_import_opts *o, al_model *m, al_import_info *info, al_err *e) {
    memset(m, 0, sizeof *m);
    memset(info, 0, sizeof *info);
    al_config cfg;
    int norm_known;
    if (!o->checkpoint) return al_errf(e, "no checkpoint given");
    if (al_import_config(o, &cfg, &norm_known, info, e)) return -1;
    ckpt c;
    if (ck_open(&c, o->checkpoint, e)) return -1;
    int rc = -1;
    key_survey s;
    const char *dt = "F32";
    int64_t shape[8];
    if (find_prefix(&c, o->prefix, info->prefix, sizeof info->prefix, e)) goto done;
    survey(&c, info->prefix, &s);
    if (s.mlp_key[0]) {
        al_errf(e, "checkpoint %s holds MLP weights (%s): attnlab takes attention-only models",
                o->checkpoint, s.mlp_key);
        goto done;
    }
    if (!norm_known && !s.has_ln) {
        al_errf(e, "checkpoint %s has no LayerNorm weights: give --norm none or --norm LNPre",
                o->checkpoint);
        goto done;
    }
    if (!norm_known) cfg.norm_type = AL_NORM_LN;
    cfg.biases = biases_of(&c, info->prefix);
    cfg.tied_embeddings = 0;
    if (fill_sizes(&c, info->prefix, &s, &cfg, e) ||
        late_checks(&cfg, info, o->config ? o->config : "the configuration", e))
        goto done;
    char full[512];
    snprintf(full, sizeof full, "%sembed.W_E", info->prefix);
    ck_shape(&c, full, shape, &dt);
    snprintf(info->dtype, sizeof info->dtype, "%s", dt);
    if (al_model_alloc(m, &cfg, e)) {
        al_err_prefix(e, "checkpoint %s", o->checkpoint);
        goto done;
    }
    if (check_extra(&c, info->prefix, m, &info->n_skipped, e) ||
        read_all(&c, info->prefix, m, &info->n_read, e))
        goto done;
    unsigned before = m->cfg.processed;
    if (al_model_process(m, &o->process, e)) goto done;
    info->processed = m->cfg.processed & ~before;
    rc = 0;
done:
    ck_close(&c);
    if (rc) al_model_free(m);
    return rc;
}

/* ------------------------------------------------------- writing */

int al_import_out_check(const char *out, al_err *e) {
    struct stat st;
    if (!out || !*out) return al_errf(e, "--out: no folder given");
    if (stat(out, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return al_errf(e, "--out %s exists and is not a folder", out);
        DIR *d = opendir(out);
        if (!d) return al_errf(e, "cannot open --out %s: %s", out, strerror(errno));
        struct dirent *de;
        int empty = 1;
        while (empty && (de = readdir(d)))
            empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
        closedir(d);
        if (!empty) return al_errf(e, "--out %s exists and is not empty: give a new folder", out);
        return 0;
    }
    return al_mkdir_p_check(out, e);
}

/* Remove dir and the files in it (a folder this process made). */
static void remove_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char p[AL_PATH_MAX + 320];
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p) unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* {"path", "bytes", "sha256"} of a source file, or null. */
static cJSON *source_item(const char *path, al_err *e, int *rc) {
    if (!path) return cJSON_CreateNull();
    char hex[65];
    struct stat st;
    if (al_sha256_file(path, hex, e) || stat(path, &st)) {
        *rc = -1;
        return cJSON_CreateNull();
    }
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "path", path);
    cJSON_AddNumberToObject(s, "bytes", (double)st.st_size);
    cJSON_AddStringToObject(s, "sha256", hex);
    return s;
}

/* import.json's text (malloc'd), or NULL with e. */
static char *import_json(const al_import_opts *o, const al_model *m, const al_import_info *info,
                         al_err *e) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return al_errf(e, "out of memory"), NULL;
    int rc = 0;
    cJSON_AddStringToObject(j, "schema", "attnlab.import/1");
    cJSON_AddStringToObject(j, "attnlab_version", AL_VERSION);
    cJSON *src = cJSON_AddObjectToObject(j, "sources");
    cJSON_AddItemToObject(src, "checkpoint", source_item(o->checkpoint, e, &rc));
    cJSON_AddItemToObject(src, "config", source_item(o->config, e, &rc));
    cJSON_AddItemToObject(src, "tokenizer", source_item(o->tokenizer, e, &rc));
    cJSON_AddStringToObject(j, "config_format", info->config_format);
    cJSON *rec = cJSON_Parse(info->recorded);
    cJSON_AddItemToObject(j, "config_recorded", rec ? rec : cJSON_CreateObject());
    cJSON *ign = cJSON_AddArrayToObject(j, "config_ignored");
    for (const char *p = info->ignored; *p;) {
        size_t k = strcspn(p, ",");
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(k < 255 ? k : 255), p);
        cJSON_AddItemToArray(ign, cJSON_CreateString(key));
        p += k + (p[k] == ',');
    }
    cJSON_AddStringToObject(j, "state_dict_prefix", info->prefix);
    cJSON_AddStringToObject(j, "checkpoint_dtype", info->dtype);
    cJSON_AddNumberToObject(j, "tensors_read", info->n_read);
    cJSON_AddNumberToObject(j, "buffers_skipped", info->n_skipped);
    cJSON *asked = cJSON_AddObjectToObject(j, "processing_asked");
    const int a[4] = {o->process.fold_ln, o->process.center_writing_weights,
                      o->process.center_unembed, o->process.fold_value_biases};
    cJSON *done = cJSON_AddObjectToObject(j, "processing");
    for (int i = 0; i < 4; i++) {
        cJSON_AddBoolToObject(asked, al_process_name(1u << i), a[i] != 0);
        cJSON_AddBoolToObject(done, al_process_name(1u << i), (info->processed >> i) & 1);
    }
    const char *nt = al_norm_type_name(m->cfg.norm_type);
    cJSON_AddStringToObject(j, "normalization_type", nt ? nt : "none");
    cJSON_AddStringToObject(j, "positional_embedding_type", al_pos_type_name(m->cfg.pos_type));
    char *s = rc ? NULL : al_json_print(1, j);
    cJSON_Delete(j);
    if (!s && !rc) al_errf(e, "out of memory");
    return s;
}

int al_import_write(const char *out, const al_import_opts *o, const al_model *m,
                    const al_tokenizer *tok, const al_import_info *info, al_err *e) {
    if (al_import_out_check(out, e)) return -1;
    char base[AL_PATH_MAX], tmp[AL_PATH_MAX + 64], parent[AL_PATH_MAX];
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') n--;
    if (n >= sizeof base) return al_errf(e, "--out path too long");
    snprintf(base, sizeof base, "%.*s", (int)n, out);
    snprintf(parent, sizeof parent, "%s", base);
    char *sl = strrchr(parent, '/');
    if (sl) { /* the folders above out, made only now that the model is whole */
        sl[sl == parent] = 0;
        if (al_mkdir_p(parent, e)) return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.import-XXXXXX", base);
    if (!mkdtemp(tmp))
        return al_errf(e, "cannot make a folder beside %s: %s", base, strerror(errno));
    mode_t mask = umask(0); /* mkdtemp made it 0700: give it a new folder's mode */
    umask(mask);
    chmod(tmp, 0777 & ~mask);
    char *card = import_json(o, m, info, e);
    char p[AL_PATH_MAX + 128];
    int rc = -1;
    if (!card || al_ckpt_save(tmp, m, tok, NULL, NULL, NULL, e)) goto done;
    snprintf(p, sizeof p, "%s/import.json", tmp);
    if (al_write_file_atomic(p, card, strlen(card), e)) goto done;
    if (rename(tmp, base)) {
        al_errf(e, "cannot rename %s to %s: %s", tmp, base, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    free(card);
    if (rc) remove_tmp(tmp);
    return rc;
}
