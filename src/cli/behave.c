/* behave.c -- common set-up of the analysis commands (see behave.h). The store is opened before the model is read so that a
 * bad database path fails fast; the run row is created only once the
 * model and mask are known good, so bad input leaves no run behind. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/behave.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attnlab/ablate.h"
#include "attnlab/checkpoint.h"
#include "attnlab/circuit_run.h"
#include "attnlab/config.h"
#include "attnlab/json.h"

/* The "train" options of dir's state.json, parsed: al_ckpt_read_state's
 * 0 (*o NULL when it has none; cJSON_Delete it), 1 when there is no
 * state.json, or -1 with e set when it cannot be read. */
static int train_opts(const char *dir, cJSON **o, al_err *e) {
    al_train_state st;
    *o = NULL;
    int rc = al_ckpt_read_state(dir, &st, e);
    if (rc != 0) return rc;
    if (st.train_json &&
        al_json_parse(st.train_json, strlen(st.train_json), "state.json", o, e) != 0) {
        al_err_prefix(e, "%s", dir);
        rc = -1;
    }
    al_state_free(&st);
    return rc;
}

/* The training sequence length from state.json's "train" options; n_ctx
 * when it is absent or 0 (a model from elsewhere, or trained on n_ctx).
 * Evaluating past it would score positions the model never saw: its
 * positional embeddings there are still at their initial values. */
static int trained_len(const char *dir, int n_ctx) {
    al_err e;
    cJSON *o;
    int T = n_ctx, rc = train_opts(dir, &o, &e);
    if (rc == 1) return n_ctx; /* no state.json */
    if (rc != 0) { /* the weights loaded fine: go on, but say what is assumed */
        fprintf(stderr,
                "attnlab: warning: %s; the model is taken to have been trained on its n_ctx "
                "(%d-token sequences)\n",
                e.msg, n_ctx);
        return n_ctx;
    }
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, "seq_len");
    if (cJSON_IsNumber(j) && j->valuedouble >= 1 && j->valuedouble < n_ctx) T = (int)j->valuedouble;
    cJSON_Delete(o);
    return T;
}

/* The token file state.json of model_dir names under key ("data" for
 * the training data, "val" for the validation file), malloc'd; NULL with
 * e set when it names none. */
static char *state_file(const char *model_dir, const char *key, const char *which, al_err *e) {
    if (!model_dir) {
        al_errf(e, "--probe-tokens %s: no %s file named (give --probe-tokens %sFILE.bin%s)", which,
                strcmp(key, "val") ? "training" : "validation", strcmp(key, "val") ? "" : "text:",
                strcmp(key, "val") ? "" : ", or --val FILE.bin to train");
        return NULL;
    }
    cJSON *o;
    int rc = train_opts(model_dir, &o, e);
    if (rc == 1) {
        al_errf(e,
                "--probe-tokens %s: %s has no state.json naming its %s; give the token file "
                "instead (--probe-tokens %sFILE.bin)",
                which, model_dir, strcmp(key, "val") ? "training data" : "validation data",
                strcmp(key, "val") ? "" : "text:");
        return NULL;
    }
    if (rc != 0) {
        al_err_prefix(e, "--probe-tokens %s", which);
        return NULL;
    }
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    char *path = cJSON_IsString(j) ? strdup(j->valuestring) : NULL;
    int named = cJSON_IsString(j);
    cJSON_Delete(o);
    if (!path) {
        if (named)
            al_errf(e, "out of memory");
        else
            al_errf(e,
                    "--probe-tokens %s: the state.json of %s names no %s file; give the token "
                    "file instead (--probe-tokens %sFILE.bin)",
                    which, model_dir, strcmp(key, "val") ? "training data" : "validation",
                    strcmp(key, "val") ? "" : "text:");
    }
    return path;
}

/* n_unseen and the warning of the "all" probe (behave.h). Best effort: a
 * model whose training data moved or was never named just gets neither. */
static void probe_unseen(al_probe_load *pl, const char *model_dir, const char *train_data,
                         int d_vocab) {
    al_err e2;
    char *path = NULL;
    const char *file = train_data;
    if (!file && model_dir) file = path = state_file(model_dir, "data", "all", &e2);
    al_tokens d = {0};
    if (file && al_tokens_load(file, &d, &e2) == 0 && d.max_id < d_vocab) {
        int n = 0;
        unsigned char *ids = al_tokens_present(&d, d_vocab, &n, &e2);
        if (ids) {
            pl->n_unseen = d_vocab - n;
            if (pl->n_unseen > AL_PROBE_UNSEEN_WARN * d_vocab)
                snprintf(pl->warn, sizeof pl->warn,
                         "%d of the probe's %d ids (%.0f%%) never occur in the model's training "
                         "data, so no head can attend by them: the induction scores shrink by "
                         "about that share (--probe-tokens seen draws only ids it saw)",
                         pl->n_unseen, d_vocab, 100.0 * pl->n_unseen / d_vocab);
        }
        free(ids);
    }
    al_tokens_free(&d);
    free(path);
}

int al_unseen_ids_warning(const char *model_dir, int d_vocab, const char *what, char *warn,
                          size_t cap) {
    al_probe_load pl;
    memset(&pl, 0, sizeof pl);
    warn[0] = 0;
    probe_unseen(&pl, model_dir, NULL, d_vocab);
    if (!pl.warn[0]) return 0;
    snprintf(warn, cap,
             "%d of the model's %d ids (%.0f%%) never occur in its training data and keep their "
             "random initial embeddings: %s over all ids include them (their values are noise)",
             pl.n_unseen, d_vocab, 100.0 * pl.n_unseen / d_vocab, what);
    return 1;
}

int al_probe_load_open(al_probe_load *pl, const char *which, const char *model_dir,
                       const char *train_data, const char *val_data, int d_vocab, al_err *e) {
    memset(pl, 0, sizeof *pl);
    pl->n_ids = d_vocab;
    if (!which || strcmp(which, "all") == 0) {
        pl->random_all = 1;
        snprintf(pl->what, sizeof pl->what, "random ids over the whole vocabulary");
        probe_unseen(pl, model_dir, train_data, d_vocab);
        return 0;
    }
    int text = strcmp(which, "text") == 0 || strncmp(which, "text:", 5) == 0;
    int seen = strcmp(which, "seen") == 0;
    if (strncmp(which, "text:", 5) == 0 && !which[5])
        return al_errf(e, "--probe-tokens text: needs a token file after the colon "
                          "(text:FILE.bin), or say text for the model's validation file");
    char *path = NULL;
    const char *file = which;
    if (seen)
        file = train_data ? train_data : (path = state_file(model_dir, "data", which, e));
    else if (strcmp(which, "text") == 0)
        file = val_data ? val_data : (path = state_file(model_dir, "val", which, e));
    else if (text)
        file = which + 5;
    if (!file) return -1;
    int rc = al_tokens_load(file, &pl->text, e);
    if (rc == 0 && text) {
        int n = 0;
        unsigned char *ids = al_tokens_present(&pl->text, 65536, &n, e);
        if (!ids)
            rc = -1;
        else if (pl->text.max_id >= d_vocab)
            rc = al_errf(e,
                         "%s holds id %d, outside the model's vocabulary (0..%d): encoded "
                         "with another tokenizer?",
                         file, pl->text.max_id, d_vocab - 1);
        free(ids);
        pl->n_ids = n;
        pl->src.text = pl->text.tok, pl->src.n_text = pl->text.n;
        snprintf(pl->what, sizeof pl->what,
                 "windows of the text of %s (%zu tokens, %d distinct ids)", file, pl->text.n, n);
    } else if (rc == 0) {
        pl->allowed = al_tokens_present(&pl->text, d_vocab, &pl->n_ids, e);
        rc = pl->allowed ? 0 : -1;
        al_tokens_free(&pl->text);
        pl->src.allowed = pl->allowed;
        snprintf(pl->what, sizeof pl->what, "the %d token ids that occur in %s", pl->n_ids,
                 seen ? "the model's training data" : file);
    }
    if (rc != 0) {
        al_err_prefix(e, "--probe-tokens %s", which);
        al_probe_load_free(pl);
    }
    free(path);
    return rc;
}

int al_probe_tokens_check(const char *which, const char *task, al_err *e) {
    int text = which && (!strcmp(which, "text") || !strncmp(which, "text:", 5));
    if (task && !strncmp(task, "idents", 6) && !text)
        return al_errf(e,
                       "--task %s renames variables in held-out code: give it the code with "
                       "--probe-tokens text (or text:FILE.bin)",
                       task);
    if (!which || !strcmp(which, "all") || (task && !strcmp(task, "induction"))) return 0;
    if (task && (!strncmp(task, "names", 5) || !strncmp(task, "idents", 6)) && text) return 0;
    return al_errf(e, "--probe-tokens %s is for the induction task%s (got %s%s)", which,
                   text ? " and the names and idents tasks" : "", task ? "--task " : "no pair task",
                   task ? task : "");
}

const al_probe_src *al_probe_load_src(const al_probe_load *pl) {
    return pl->random_all ? NULL : &pl->src;
}

void al_probe_load_free(al_probe_load *pl) {
    free(pl->allowed);
    al_tokens_free(&pl->text);
    memset(pl, 0, sizeof *pl);
}

/* Model (and tokenizer if present); sha256 taken before and after the
 * load so that weights replaced mid-read are not filed under a wrong key. */
static int load(al_behave *b, const char *dir, al_err *e) {
    char path[AL_PATH_MAX + 64], sha2[65];
    if (al_ckpt_is_model_dir(dir, e) ||
        al_path_join(path, sizeof path, dir, "model.safetensors", e) ||
        al_sha256_file(path, b->sha, e) || al_ckpt_load(dir, &b->m, NULL, e))
        return -1;
    b->loaded = 1;
    b->train_T = trained_len(dir, b->m.cfg.n_ctx);
    if (al_sha256_file(path, sha2, e)) return -1;
    if (strcmp(b->sha, sha2) != 0)
        return al_errf(e, "checkpoint %s changed while being read; try again", path);
    if (al_path_join(path, sizeof path, dir, "tokenizer.json", e)) return -1;
    if (al_file_exists(path) && al_tok_load(path, &b->tok, e)) return -1;
    return 0;
}

int al_behave_load(al_behave *b, const char *model_dir, const char *mask_path, const char *db,
                   al_err *e) {
    memset(b, 0, sizeof *b);
    b->dir = model_dir;
    if (al_store_open(db, &b->st, e) || load(b, model_dir, e)) goto fail;
    size_t LH = (size_t)b->m.cfg.n_layers * b->m.cfg.n_heads;
    b->off = al_calloc(LH, 1, e);
    if (!b->off) goto fail;
    if (mask_path) {
        if (al_mask_load(mask_path, &b->m.cfg, b->off, e)) goto fail;
        al_mask_apply(&b->m, b->off);
        for (size_t i = 0; i < LH; i++) b->n_off += b->off[i];
    }
    if (b->tok && al_tok_vocab_size(b->tok) != b->m.cfg.d_vocab)
        fprintf(stderr, "attnlab: warning: tokenizer has %d tokens, model d_vocab %d\n",
                al_tok_vocab_size(b->tok), b->m.cfg.d_vocab);
    return 0;
fail:
    al_behave_close(b);
    return -1;
}

/* cfg (a JSON object) with "intervention": the file as parsed, so the run
 * records what was done, not only the file's name; cfg itself when that
 * cannot be done (out of memory: the name is there). */
static char *with_intervention(char *cfg, const char *iv_json) {
    cJSON *o = cfg ? cJSON_Parse(cfg) : NULL, *iv = cJSON_Parse(iv_json);
    char *out = NULL;
    if (o && iv && cJSON_AddItemToObject(o, "intervention", iv)) {
        iv = NULL;
        out = al_json_print(0, o);
    }
    cJSON_Delete(o), cJSON_Delete(iv);
    if (!out) return cfg;
    free(cfg);
    return out;
}

int al_behave_begin(al_behave *b, const char *kind, const al_flag *flags, al_err *e) {
    char *cfg = al_flags_to_json(flags);
    if (!cfg) return al_errf(e, "out of memory");
    if (b->iv_json) cfg = with_intervention(cfg, b->iv_json);
    int rc = al_store_model(b->st, b->dir, b->sha, &b->m, NULL, &b->model_id, e) ||
             al_store_run_begin(b->st, kind, cfg, b->model_id, &b->run_id, e);
    free(cfg);
    return rc ? -1 : 0;
}

int al_behave_bos(const al_behave *b) {
    if (!b->tok) return -1;
    int id = al_tok_eot(b->tok);
    return id < b->m.cfg.d_vocab ? id : -1;
}

int al_behave_tokens(const al_behave *b, const char *path, al_tokens *d, int *T, al_err *e) {
    if (al_tokens_load(path, d, e)) return -1;
    if (d->n < 6) {
        al_tokens_free(d);
        return al_errf(e, "token file %s has %zu tokens; need at least 6", path, d->n);
    }
    if (d->max_id >= b->m.cfg.d_vocab) {
        int id = d->max_id;
        al_tokens_free(d);
        return al_errf(e, "token file %s holds id %d but the model's vocabulary has %d tokens",
                       path, id, b->m.cfg.d_vocab);
    }
    *T = d->n - 1 < (size_t)b->train_T ? (int)(d->n - 1) : b->train_T;
    if (b->train_T < b->m.cfg.n_ctx)
        fprintf(stderr,
                "attnlab: note: the model was trained on %d-token sequences (n_ctx %d); "
                "validation windows are %d tokens\n",
                b->train_T, b->m.cfg.n_ctx, *T);
    return 0;
}

int al_behave_circuit(al_behave *b, const char *path, const char *fill, const al_tokens *val, int T,
                      int batches, int batch, al_err *e) {
    al_circuit_run *cr = al_malloc(1, sizeof *cr, e);
    if (!cr) return -1;
    if (al_circuit_run_open(cr, &b->m, path, fill, val, T, batches, batch, e)) {
        free(cr);
        return -1;
    }
    b->circ = cr;
    b->circ_path = path;
    return al_circuit_run_attach(cr, &b->m, e);
}

void al_behave_warn_probe(const al_behave *b, int len) {
    if (len > b->train_T && len <= b->m.cfg.n_ctx)
        fprintf(stderr,
                "attnlab: warning: the probe is %d tokens but the model was trained "
                "on %d-token sequences; lower --probe-r to stay within them\n",
                len, b->train_T);
}

int al_behave_json(cJSON *doc, const al_behave *b, const char *db) {
    char buf[256];
    cJSON *c;
    if (!cJSON_AddStringToObject(doc, "model", b->dir) ||
        !cJSON_AddStringToObject(doc, "sha256", b->sha) ||
        !cJSON_AddStringToObject(doc, "db", db) ||
        !cJSON_AddNumberToObject(doc, "model_id", (double)b->model_id))
        return -1;
    if (!b->circ) return 0;
    return (c = cJSON_AddObjectToObject(doc, "circuit_run")) &&
                   cJSON_AddStringToObject(c, "file", b->circ_path ? b->circ_path : "") &&
                   cJSON_AddStringToObject(c, "what",
                                           al_circuit_run_describe(b->circ, buf, sizeof buf))
               ? 0
               : -1;
}

void al_behave_fail(al_behave *b, const al_err *e) {
    al_err e2;
    if (b->st && b->run_id) al_store_run_fail(b->st, b->run_id, e->msg, &e2);
}

void al_behave_close(al_behave *b) {
    al_store_close(b->st);
    al_tok_free(b->tok);
    if (b->loaded) al_model_free(&b->m);
    if (b->circ) al_circuit_run_close(b->circ);
    free(b->circ);
    free(b->off);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------ printing */

void al_print_col(const char *s, int w) {
    int n = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) n += (*u & 0xC0) != 0x80;
    printf("%s%*s", s, n < w ? w - n : 0, "");
}

int *al_by_magnitude(const double *v, int n) {
    int *idx = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!idx) return NULL;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) idx[m++] = i;
    for (int i = 1; i < m; i++) /* insertion sort: stable */
        for (int j = i; j > 0 && fabs(v[idx[j]]) > fabs(v[idx[j - 1]]); j--) {
            int x = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = x;
        }
    for (int i = 0; i < n; i++)
        if (isnan(v[i])) idx[m++] = i;
    return idx;
}
