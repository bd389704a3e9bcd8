/* sae_io.c -- a sparse autoencoder directory in SAELens's layout (see
 * sae_io.h): save with temporary names and renames, load with every
 * field and shape checked before anything is allocated. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/sae_io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/json.h"
#include "attnlab/model.h"
#include "attnlab/safetensors.h"

int al_sae_hook_name(int site, int layer, char *buf, size_t cap) {
    int n;
    if (layer < 0) return -1;
    if (site == AL_SAE_SITE_Z)
        n = snprintf(buf, cap, "blocks.%d.attn.hook_z", layer);
    else if (site == AL_SAE_SITE_RESID_PRE)
        n = snprintf(buf, cap, "blocks.%d.hook_resid_pre", layer);
    else
        return -1;
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int al_sae_hook_parse(const char *name, int *site, int *layer) {
    if (!name || strncmp(name, "blocks.", 7) != 0) return -1;
    const char *p = name + 7;
    long l = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 6) {
        l = l * 10 + (*p++ - '0');
        digits++;
    }
    if (!digits || (digits > 1 && name[7] == '0')) return -1;
    int st;
    if (strcmp(p, ".attn.hook_z") == 0)
        st = AL_SAE_SITE_Z;
    else if (strcmp(p, ".hook_resid_pre") == 0)
        st = AL_SAE_SITE_RESID_PRE;
    else
        return -1;
    *site = st;
    *layer = (int)l;
    return 0;
}

int al_sae_fits_model(const al_sae *s, const al_sae_meta *meta, const al_config *c,
                      const char *model_sha256, al_err *e) {
    char hook[64];
    if (al_sae_hook_name(meta->site, meta->hook_layer, hook, sizeof hook) != 0)
        return al_errf(e, "the SAE's site is unknown");
    if (meta->hook_layer >= c->n_layers)
        return al_errf(e, "the SAE reads %s, but the model has %d layer%s", hook, c->n_layers,
                       c->n_layers == 1 ? "" : "s");
    int w = meta->site == AL_SAE_SITE_Z ? c->n_heads * c->d_head : c->d_model;
    if (s->cfg.d_in != w)
        return al_errf(e, "the SAE's d_in %d is not the width %d of %s in this model", s->cfg.d_in,
                       w, hook);
    if (model_sha256 && *model_sha256 && meta->model_sha256[0] &&
        strcmp(model_sha256, meta->model_sha256) != 0)
        return al_errf(e,
                       "the SAE was trained on another model (sha256 %.12s..., this one "
                       "%.12s...)",
                       meta->model_sha256, model_sha256);
    return 0;
}

/* ---------------------------------------------------------------- save */

static char *cfg_to_json(const al_sae *s, const al_sae_meta *m) {
    const al_sae_cfg *c = &s->cfg;
    char hook[64];
    if (al_sae_hook_name(m->site, m->hook_layer, hook, sizeof hook) != 0) return NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "architecture", al_sae_arch_name(c->arch));
    cJSON_AddNumberToObject(o, "d_in", c->d_in);
    cJSON_AddNumberToObject(o, "d_sae", c->d_sae);
    cJSON_AddStringToObject(o, "dtype", "float32");
    cJSON_AddStringToObject(o, "device", "cpu");
    cJSON_AddStringToObject(o, "model_name", "attnlab");
    cJSON_AddStringToObject(o, "hook_name", hook);
    cJSON_AddNumberToObject(o, "hook_layer", m->hook_layer);
    cJSON_AddNullToObject(o, "hook_head_index");
    cJSON_AddTrueToObject(o, "apply_b_dec_to_input");
    cJSON_AddStringToObject(o, "normalize_activations",
                            m->normalized ? "expected_average_only_in" : "none");
    cJSON_AddItemToObject(o, "norm_scaling_factor", al_json_num_item(m->scale));
    if (c->arch == AL_SAE_TOPK) {
        cJSON_AddNumberToObject(o, "k", c->k);
        cJSON_AddNumberToObject(o, "k_aux", c->k_aux);
        cJSON_AddItemToObject(o, "aux_coeff", al_json_num_item(c->aux_coeff));
    } else {
        cJSON_AddItemToObject(o, "l1_coefficient", al_json_num_item(c->l1_coeff));
    }
    cJSON_AddNumberToObject(o, "dead_tokens", (double)c->dead_tokens);
    cJSON_AddStringToObject(o, "model_sha256", m->model_sha256);
    cJSON_AddItemToObject(o, "seed", al_json_u64_item(m->seed));
    cJSON_AddStringToObject(o, "attnlab_version", AL_VERSION);
    char *txt = al_json_print(1, o);
    cJSON_Delete(o);
    return txt;
}

int al_sae_save(const char *dir, const al_sae *s, const al_sae_meta *m, al_err *e) {
    if (al_sae_count_nonfinite(s) != 0)
        return al_errf(e, "cannot save the SAE to %s: it has non-finite weights", dir);
    if (!isfinite(m->scale) || !(m->scale > 0))
        return al_errf(e,
                       "cannot save the SAE to %s: norm_scaling_factor %g is not a positive "
                       "finite number",
                       dir, m->scale);
    char *txt = cfg_to_json(s, m);
    if (!txt) return al_errf(e, "cannot save the SAE to %s: bad hook or out of memory", dir);
    char wpath[AL_PATH_MAX + 64], cpath[AL_PATH_MAX + 64];
    int rc = -1;
    if (al_path_join(wpath, sizeof wpath, dir, AL_SAE_WEIGHTS_FILE, e) != 0 ||
        al_path_join(cpath, sizeof cpath, dir, AL_SAE_CFG_FILE, e) != 0 || al_mkdir_p(dir, e) != 0)
        goto out;
    const int64_t d = s->cfg.d_in, n = s->cfg.d_sae;
    al_st_tensor t[4] =
        {{.name = "W_enc", .dtype = AL_DT_F32, .ndim = 2, .shape = {d, n}, .data = s->W_enc},
         {.name = "b_enc", .dtype = AL_DT_F32, .ndim = 1, .shape = {n}, .data = s->b_enc},
         {.name = "W_dec", .dtype = AL_DT_F32, .ndim = 2, .shape = {n, d}, .data = s->W_dec},
         {.name = "b_dec", .dtype = AL_DT_F32, .ndim = 1, .shape = {d}, .data = s->b_dec}};
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    if (al_st_write(wpath, t, 4, mk, mv, 1, e) != 0) goto out;
    rc = al_write_file_atomic(cpath, txt, strlen(txt), e);
out:
    free(txt);
    return rc;
}

/* ---------------------------------------------------------- partial mark */

int al_sae_partial_mark(const char *dir, long step, long steps, al_err *e) {
    char path[AL_PATH_MAX + 64], txt[160];
    if (al_path_join(path, sizeof path, dir, AL_SAE_PARTIAL_FILE, e) != 0 ||
        al_mkdir_p(dir, e) != 0)
        return -1;
    int n = snprintf(txt, sizeof txt, "{\"step\": %ld, \"steps\": %ld}\n", step, steps);
    return al_write_file_atomic(path, txt, (size_t)n, e);
}

int al_sae_partial_clear(const char *dir, al_err *e) {
    char path[AL_PATH_MAX + 64];
    if (al_path_join(path, sizeof path, dir, AL_SAE_PARTIAL_FILE, e) != 0) return -1;
    if (unlink(path) != 0 && errno != ENOENT)
        return al_errf(e, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

/* meta's partial fields from dir's mark: absent 0; present 1, with its
 * step and steps when it reads as the trainer writes it (it is a file of
 * the directory like any other: nothing in it is trusted). */
static void read_partial(const char *dir, al_sae_meta *m) {
    char path[AL_PATH_MAX + 64];
    m->partial = 0;
    m->partial_step = m->partial_steps = -1;
    if (al_path_join(path, sizeof path, dir, AL_SAE_PARTIAL_FILE, NULL) != 0 ||
        !al_file_exists(path))
        return;
    m->partial = 1;
    cJSON *root;
    al_err le;
    if (al_json_read_file(path, 4096, &root, &le) != 0) return;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "step"),
                *b = cJSON_GetObjectItemCaseSensitive(root, "steps");
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b) && a->valuedouble >= 0 &&
        b->valuedouble >= a->valuedouble && b->valuedouble < 1e15 &&
        a->valuedouble == floor(a->valuedouble) && b->valuedouble == floor(b->valuedouble)) {
        m->partial_step = (long)a->valuedouble;
        m->partial_steps = (long)b->valuedouble;
    }
    cJSON_Delete(root);
}

void al_sae_partial_msg(const char *dir, const al_sae_meta *m, char *buf, size_t cap) {
    char at[64] = "";
    if (m->partial_step >= 0)
        snprintf(at, sizeof at, "step %ld of %ld: ", m->partial_step, m->partial_steps);
    snprintf(buf, cap,
             "the SAE %s is partly trained (%sits training was interrupted or failed; "
             "sae train --resume finishes it)",
             dir, at);
}

/* ---------------------------------------------------------------- load */

static const cJSON *key(const cJSON *o, const char *k) {
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static int get_int(const cJSON *o, const char *k, double lo, double hi, int required, double *out,
                   const char *src, al_err *e) {
    const cJSON *j = key(o, k);
    if (!j || cJSON_IsNull(j)) {
        if (required) return al_errf(e, "%s: key '%s' missing", src, k);
        return 1;
    }
    if (al_json_int_in(j, lo, hi, out) != 0)
        return al_errf(e, "%s: key '%s' must be an integer in %.0f..%.0f", src, k, lo, hi);
    return 0;
}

static int get_num(const cJSON *o, const char *k, double *out, const char *src, al_err *e) {
    const cJSON *j = key(o, k);
    if (!j || cJSON_IsNull(j)) return 1;
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
        return al_errf(e, "%s: key '%s' must be a finite number", src, k);
    *out = j->valuedouble;
    return 0;
}

/* cfg.json's fields into c and m; nothing allocated. */
static int parse_cfg(const cJSON *o, al_sae_cfg *c, al_sae_meta *m, const char *src, al_err *e) {
    if (!cJSON_IsObject(o)) return al_errf(e, "%s: not a JSON object", src);
    if (al_json_unique_keys(o, src, e)) return -1;
    double v;
    int d_in, d_sae;
    if (get_int(o, "d_in", 1, 1 << 20, 1, &v, src, e) < 0) return -1;
    d_in = (int)v;
    if (get_int(o, "d_sae", 1, 1 << 20, 1, &v, src, e) < 0) return -1;
    d_sae = (int)v;
    *c = al_sae_cfg_default(d_in, d_sae);
    const cJSON *a = key(o, "architecture");
    if (!a) return al_errf(e, "%s: key 'architecture' missing", src);
    if (!cJSON_IsString(a) || al_sae_arch_parse(a->valuestring, &c->arch) != 0)
        return al_errf(e, "%s: architecture must be \"topk\" or \"standard\"", src);
    if (c->arch == AL_SAE_TOPK) {
        if (get_int(o, "k", 1, d_sae, 1, &v, src, e) < 0) return -1;
        c->k = (int)v;
        int r = get_int(o, "k_aux", 0, d_sae, 0, &v, src, e);
        if (r < 0) return -1;
        if (r == 0) c->k_aux = (int)v;
        r = get_num(o, "aux_coeff", &v, src, e);
        if (r < 0) return -1;
        if (r == 0) c->aux_coeff = v;
    } else {
        int r = get_num(o, "l1_coefficient", &v, src, e);
        if (r < 0) return -1;
        if (r == 0) c->l1_coeff = v;
    }
    int r = get_int(o, "dead_tokens", 1, 2147483647.0, 0, &v, src, e);
    if (r < 0) return -1;
    if (r == 0) c->dead_tokens = (long)v;
    if (al_sae_cfg_check(c, e) != 0) return al_err_prefix(e, "%s", src);

    memset(m, 0, sizeof *m);
    const cJSON *h = key(o, "hook_name");
    if (!h) return al_errf(e, "%s: key 'hook_name' missing", src);
    if (!cJSON_IsString(h) || al_sae_hook_parse(h->valuestring, &m->site, &m->hook_layer) != 0)
        return al_errf(e,
                       "%s: hook_name must be \"blocks.L.attn.hook_z\" or "
                       "\"blocks.L.hook_resid_pre\"",
                       src);
    if (get_int(o, "hook_layer", 0, 999999, 1, &v, src, e) < 0) return -1;
    if ((int)v != m->hook_layer)
        return al_errf(e, "%s: hook_layer %d differs from the layer of hook_name (%d)", src, (int)v,
                       m->hook_layer);
    const cJSON *na = key(o, "normalize_activations");
    m->scale = 1.0;
    if (na && !cJSON_IsNull(na)) {
        if (!cJSON_IsString(na) || (strcmp(na->valuestring, "none") != 0 &&
                                    strcmp(na->valuestring, "expected_average_only_in") != 0))
            return al_errf(e,
                           "%s: normalize_activations must be \"none\" or "
                           "\"expected_average_only_in\"",
                           src);
        m->normalized = strcmp(na->valuestring, "none") != 0;
    }
    r = get_num(o, "norm_scaling_factor", &v, src, e);
    if (r < 0) return -1;
    if (r == 0) {
        if (!(v > 0)) return al_errf(e, "%s: norm_scaling_factor must be positive", src);
        m->scale = v;
    } else if (m->normalized) {
        return al_errf(e,
                       "%s: normalize_activations is expected_average_only_in but "
                       "norm_scaling_factor is missing",
                       src);
    }
    const cJSON *dt = key(o, "dtype");
    if (dt && !(cJSON_IsString(dt) && (strcmp(dt->valuestring, "float32") == 0 ||
                                       strcmp(dt->valuestring, "torch.float32") == 0)))
        return al_errf(e, "%s: dtype must be float32", src);
    const cJSON *ab = key(o, "apply_b_dec_to_input");
    if (ab && !cJSON_IsTrue(ab))
        return al_errf(e, "%s: apply_b_dec_to_input must be true (the encoder reads x - b_dec)",
                       src);
    const cJSON *sh = key(o, "model_sha256");
    if (sh && !cJSON_IsNull(sh)) {
        size_t len = cJSON_IsString(sh) ? strlen(sh->valuestring) : 0;
        int ok = cJSON_IsString(sh) && (len == 0 || len == 64);
        for (size_t i = 0; ok && i < len; i++) {
            char ch = sh->valuestring[i];
            ok = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
        }
        if (!ok) return al_errf(e, "%s: model_sha256 must be 64 lowercase hex digits", src);
        memcpy(m->model_sha256, sh->valuestring, len + 1);
    }
    const cJSON *sd = key(o, "seed");
    if (sd && !cJSON_IsNull(sd) && al_json_u64(sd, &m->seed) != 0)
        return al_errf(e, "%s: seed must be an unsigned integer", src);
    return 0;
}

static int load_parsed(const cJSON *root, const al_st_file *f, const char *name, al_sae *s,
                       al_sae_meta *m, al_err *e) {
    char src[AL_PATH_MAX + 64];
    snprintf(src, sizeof src, "%s/%s", name, AL_SAE_CFG_FILE);
    al_sae_cfg c;
    if (parse_cfg(root, &c, m, src, e) != 0) return -1;
    snprintf(src, sizeof src, "%s/%s", name, AL_SAE_WEIGHTS_FILE);
    const int64_t d = c.d_in, n = c.d_sae;
    static const char *names[4] = {"W_enc", "b_enc", "W_dec", "b_dec"};
    const int nd[4] = {2, 1, 2, 1};
    const int64_t shp[4][2] = {{d, n}, {n, 0}, {n, d}, {d, 0}};
    for (int i = 0; i < al_st_count(f); i++) {
        const char *tn = al_st_at(f, i)->name;
        int known = 0;
        for (int k = 0; k < 4; k++) known |= strcmp(tn, names[k]) == 0;
        if (!known) {
            char disp[64];
            return al_errf(e, "%s: tensor '%s' is not part of an SAE", src,
                           al_json_key_disp(tn, disp));
        }
    }
    /* shapes before the allocation: what is allocated is what the file holds */
    for (int k = 0; k < 4; k++) {
        const al_st_tensor *t = al_st_get(f, names[k]);
        if (!t) return al_errf(e, "%s: tensor %s missing", src, names[k]);
        int ok = t->dtype == AL_DT_F32 && t->ndim == nd[k];
        for (int q = 0; ok && q < nd[k]; q++) ok = t->shape[q] == shp[k][q];
        if (!ok) {
            if (nd[k] == 2)
                return al_errf(e,
                               "%s: %s must be F32 of shape [%" PRId64 ", %" PRId64
                               "] (cfg.json's d_in %d, d_sae %d)",
                               src, names[k], shp[k][0], shp[k][1], c.d_in, c.d_sae);
            return al_errf(e,
                           "%s: %s must be F32 of shape [%" PRId64 "] (cfg.json's d_in %d, "
                           "d_sae %d)",
                           src, names[k], shp[k][0], c.d_in, c.d_sae);
        }
    }
    if (al_sae_alloc(s, &c, e) != 0) return -1;
    float *dst[4] = {s->W_enc, s->b_enc, s->W_dec, s->b_dec};
    for (int k = 0; k < 4; k++)
        if (al_st_read_f32(f, names[k], nd[k], shp[k], dst[k], e) != 0) {
            al_sae_free(s);
            return -1;
        }
    return 0;
}

int al_sae_load_mem(const char *cfg_json, size_t cfg_n, const void *st, size_t st_n,
                    const char *name, al_sae *s, al_sae_meta *m, al_err *e) {
    memset(s, 0, sizeof *s);
    memset(m, 0, sizeof *m);
    char src[AL_PATH_MAX + 64];
    snprintf(src, sizeof src, "%s/%s", name, AL_SAE_CFG_FILE);
    if (cfg_n > AL_SAE_CFG_MAX) return al_errf(e, "%s: larger than %u bytes", src, AL_SAE_CFG_MAX);
    cJSON *root;
    if (al_json_parse(cfg_json, cfg_n, src, &root, e) != 0) return -1;
    snprintf(src, sizeof src, "%s/%s", name, AL_SAE_WEIGHTS_FILE);
    al_st_file *f;
    int rc = -1;
    if (al_st_open_mem_as(st, st_n, src, "SAE", &f, e) == 0) {
        rc = load_parsed(root, f, name, s, m, e);
        al_st_close(f);
    }
    cJSON_Delete(root);
    if (rc != 0)
        memset(m, 0, sizeof *m);
    else
        m->partial_step = m->partial_steps = -1; /* bytes alone: no mark */
    return rc;
}

int al_sae_load(const char *dir, al_sae *s, al_sae_meta *m, al_err *e) {
    memset(s, 0, sizeof *s);
    memset(m, 0, sizeof *m);
    char wpath[AL_PATH_MAX + 64], cpath[AL_PATH_MAX + 64];
    if (al_path_join(wpath, sizeof wpath, dir, AL_SAE_WEIGHTS_FILE, e) != 0 ||
        al_path_join(cpath, sizeof cpath, dir, AL_SAE_CFG_FILE, e) != 0)
        return -1;
    if (!al_file_exists(cpath) || !al_file_exists(wpath))
        return al_errf(e, "%s is no SAE directory (it needs %s and %s)", dir, AL_SAE_CFG_FILE,
                       AL_SAE_WEIGHTS_FILE);
    cJSON *root;
    if (al_json_read_file(cpath, AL_SAE_CFG_MAX, &root, e) != 0) return -1;
    al_st_file *f;
    int rc = -1;
    if (al_st_open_as(wpath, "SAE", &f, e) == 0) {
        rc = load_parsed(root, f, dir, s, m, e);
        al_st_close(f);
    }
    cJSON_Delete(root);
    if (rc != 0)
        memset(m, 0, sizeof *m);
    else
        read_partial(dir, m);
    return rc;
}
