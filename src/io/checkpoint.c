/* checkpoint.c -- model directories: journalled save, recovery, load.
 *
 * The journal (see checkpoint.h) makes a multi-file save all-or-nothing
 * across crashes; a POSIX record lock on DIR/.lock makes it so across
 * processes too, so `attnlab run` on a directory being trained never
 * sees half a save nor deletes the trainer's NAME.new files. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attnlab/safetensors.h"

enum { F_MODEL, F_CONFIG, F_TOK, F_OPTIM, F_STATE, N_FILES };
static const char *const FILES[N_FILES] = {"model.safetensors", "config.json", "tokenizer.json",
                                           "optim.safetensors", "state.json"};
#define COMMIT_NAME "COMMIT"
#define COMMIT_MAGIC "attnlab checkpoint commit 1"

static int file_index(const char *name, size_t len) {
    for (int i = 0; i < N_FILES; i++)
        if (strlen(FILES[i]) == len && strncmp(FILES[i], name, len) == 0) return i;
    return -1;
}

static int join2(char *buf, const char *dir, const char *name, const char *suffix, al_err *e) {
    int n = snprintf(buf, AL_PATH_MAX, "%s/%s%s", dir, name, suffix);
    if (n < 0 || n >= AL_PATH_MAX) return al_errf(e, "path too long: %s/%s%s", dir, name, suffix);
    return 0;
}

/* Make renames and unlinks in dir durable. Some file systems cannot
 * fsync a directory (EINVAL); nothing more can be done there. */
static int sync_dir(const char *dir, al_err *e) {
    int fd = open(dir, O_RDONLY);
    if (fd < 0) return al_errf(e, "cannot open directory %s: %s", dir, strerror(errno));
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        rc = al_errf(e, "cannot sync directory %s: %s", dir, strerror(errno));
    close(fd);
    return rc;
}

/* ------------------------------------------------------------ locking */

/* Exclusive when the lock file can be opened for writing; a read-only
 * directory gets a shared lock (it cannot be saved into or repaired
 * anyway) or none if .lock does not exist. Returns the fd, -2 for "no
 * lock", or -1 with e set. Released by close(). */
static int lock_dir(const char *dir, al_err *e) {
    char p[AL_PATH_MAX];
    if (join2(p, dir, ".lock", "", e) != 0) return -1;
    int excl = 1, fd = open(p, O_RDWR | O_CREAT, 0666);
    if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM)) {
        excl = 0;
        fd = open(p, O_RDONLY);
        if (fd < 0 && errno == ENOENT) return -2;
    }
    if (fd < 0) return al_errf(e, "cannot open checkpoint %s: %s", dir, strerror(errno));
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = excl ? F_WRLCK : F_RDLCK;
    fl.l_whence = SEEK_SET;
    while (fcntl(fd, F_SETLKW, &fl) != 0) {
        if (errno == EINTR) continue;
        if (errno == ENOLCK || errno == EOPNOTSUPP) break; /* e.g. some NFS: go unlocked */
        int err = errno;
        close(fd);
        return al_errf(e, "cannot lock checkpoint %s: %s", dir, strerror(err));
    }
    return fd;
}

/* 1 if dir holds a checkpoint, or what is left of one mid-save (a
 * COMMIT record): the readers below check this first, so that pointing
 * one at a folder that is no model (a data folder, a typo) neither
 * leaves a .lock file there nor says less than what went wrong. */
static int holds_checkpoint(const char *dir) {
    char p[AL_PATH_MAX];
    const char *names[] = {FILES[F_MODEL], FILES[F_CONFIG], COMMIT_NAME};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        al_err e;
        if (join2(p, dir, names[i], "", &e) == 0 && al_file_exists(p)) return 1;
    }
    return 0;
}

static int not_a_model(const char *dir, al_err *e) {
    struct stat st;
    if (stat(dir, &st) != 0)
        return al_errf(e, "cannot read checkpoint %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return al_errf(e,
                       "%s is not a model directory (it is a file): give the --out "
                       "directory of attnlab train",
                       dir);
    return al_errf(e,
                   "%s is not a model directory (no model.safetensors or config.json in it): "
                   "give the --out directory of attnlab train",
                   dir);
}

int al_ckpt_is_model_dir(const char *dir, al_err *e) {
    return holds_checkpoint(dir) ? 0 : not_a_model(dir, e);
}

static void unlock_dir(int fd) {
    if (fd >= 0) close(fd);
}

/* ----------------------------------------------------------- recovery */

/* NAME.new, NAME.tmp.<digits>, NAME.new.tmp.<digits>, COMMIT.tmp.<digits>
 * for our NAMEs only: never touch other files a user keeps here. */
static int is_stray(const char *ent) {
    const char *dot = NULL;
    for (int i = 0; i < N_FILES + 1 && !dot; i++) {
        const char *nm = i < N_FILES ? FILES[i] : COMMIT_NAME;
        size_t l = strlen(nm);
        if (strncmp(ent, nm, l) == 0 && ent[l] == '.') dot = ent + l;
    }
    if (!dot) return 0;
    if (strcmp(dot, ".new") == 0) return strncmp(ent, COMMIT_NAME ".", 7) != 0;
    if (strncmp(dot, ".new", 4) == 0) dot += 4;
    if (strncmp(dot, ".tmp.", 5) != 0 || !dot[5]) return 0;
    for (const char *p = dot + 5; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

static int remove_strays(const char *dir, al_err *e) {
    DIR *d = opendir(dir);
    if (!d) return al_errf(e, "cannot list checkpoint %s: %s", dir, strerror(errno));
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!is_stray(de->d_name)) continue;
        char p[AL_PATH_MAX];
        if (join2(p, dir, de->d_name, "", e) != 0)
            rc = -1;
        else if (unlink(p) != 0 && errno != ENOENT)
            rc = al_errf(e, "cannot remove %s: %s", p, strerror(errno));
    }
    closedir(d);
    return rc;
}

/* Carry out one COMMIT line: "rename NAME" (NAME.new over NAME; already
 * done if only NAME exists) or "remove NAME". */
static int commit_action(const char *dir, const char *line, size_t len, al_err *e) {
    int rename_op = len > 7 && strncmp(line, "rename ", 7) == 0;
    int remove_op = len > 7 && strncmp(line, "remove ", 7) == 0;
    int f = (rename_op || remove_op) ? file_index(line + 7, len - 7) : -1;
    if (f < 0)
        return al_errf(e, "checkpoint %s: bad line in COMMIT: '%.*s'", dir,
                       (int)(len > 80 ? 80 : len), line);
    char p[AL_PATH_MAX], pn[AL_PATH_MAX];
    if (join2(p, dir, FILES[f], "", e) != 0 || join2(pn, dir, FILES[f], ".new", e) != 0) return -1;
    if (remove_op) {
        if (unlink(p) != 0 && errno != ENOENT)
            return al_errf(e, "cannot remove %s: %s", p, strerror(errno));
        return 0;
    }
    if (rename(pn, p) == 0) return 0;
    if (errno == ENOENT && al_file_exists(p)) return 0;
    return al_errf(e, "checkpoint %s is damaged: cannot rename %s: %s", dir, pn, strerror(errno));
}

static int roll_forward(const char *dir, const char *commit_path, al_err *e) {
    unsigned char *txt;
    size_t n;
    if (al_read_file(commit_path, &txt, &n, 1 << 16, e) != 0) return -1;
    const char *s = (const char *)txt, *end = s + n;
    size_t ml = strlen(COMMIT_MAGIC);
    int rc = 0;
    if (n < ml + 1 || strncmp(s, COMMIT_MAGIC "\n", ml + 1) != 0)
        rc = al_errf(e, "checkpoint %s: COMMIT is not an attnlab commit record", dir);
    for (s += ml + 1; rc == 0 && s < end;) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (len) rc = commit_action(dir, s, len, e);
        s += len + 1;
    }
    free(txt);
    if (rc == 0) rc = sync_dir(dir, e);
    if (rc == 0 && unlink(commit_path) != 0)
        rc = al_errf(e, "cannot remove %s: %s", commit_path, strerror(errno));
    return rc;
}

static int recover_locked(const char *dir, al_err *e) {
    char cp[AL_PATH_MAX];
    if (join2(cp, dir, COMMIT_NAME, "", e) != 0) return -1;
    if (al_file_exists(cp) && roll_forward(dir, cp, e) != 0) return -1;
    if (remove_strays(dir, e) != 0) return -1;
    return sync_dir(dir, e);
}

int al_ckpt_forget_state(const char *dir, al_err *e) {
    char p[AL_PATH_MAX];
    if (join2(p, dir, "state.json", "", e) != 0) return -1;
    if (!al_file_exists(p)) return 0;
    int fd = lock_dir(dir, e);
    if (fd == -1) return -1;
    int rc = recover_locked(dir, e);
    if (rc == 0 && unlink(p) != 0 && errno != ENOENT)
        rc = al_errf(e, "cannot remove %s: %s", p, strerror(errno));
    if (rc == 0) rc = sync_dir(dir, e);
    unlock_dir(fd);
    return rc;
}

int al_ckpt_recover(const char *dir, al_err *e) {
    int fd = lock_dir(dir, e);
    if (fd == -1) return -1;
    int rc = recover_locked(dir, e);
    unlock_dir(fd);
    return rc;
}

/* ------------------------------------------------------------ writing */

/* Tensor table of a model in TransformerLens state-dict order. When the
 * embeddings are tied, unembed.W_U is still written (as W_Eᵀ, in *wu_t)
 * so the file loads in TransformerLens unchanged. */
typedef struct tensor_list {
    al_st_tensor *t;
    char (*names)[64];
    int n;
    float *wu_t;
} tensor_list;

static void tensor_list_free(tensor_list *tl) {
    free(tl->t);
    free(tl->names);
    free(tl->wu_t);
}

static void add_tensor(tensor_list *tl, const al_model *m, int which, int l, const float *data) {
    al_st_tensor *t = &tl->t[tl->n];
    t->ndim = al_param_tl_name(m, which, l, tl->names[tl->n], sizeof tl->names[0], t->shape);
    t->name = tl->names[tl->n];
    t->dtype = AL_DT_F32;
    t->data = data;
    tl->n++;
}

/* Tensor `which` of layer l, if the model has it (optional tensors have
 * size 0 when absent). */
static void add_layer_tensor(tensor_list *tl, const al_model *m, int which, int l) {
    if (m->param_size[which])
        add_tensor(tl, m, which, l, m->p[which] + (size_t)l * al_param_layer_size(m, which));
}

static int model_tensors(const al_model *m, tensor_list *tl, al_err *e) {
    memset(tl, 0, sizeof *tl);
    const al_config *c = &m->cfg;
    /* a layer's ln1.w, ln1.b, W_Q..W_O, b_Q..b_O; W_E, W_pos, ln_final.w,
     * ln_final.b, W_U, b_U */
    int cap = 6 + 10 * c->n_layers;
    tl->t = al_calloc((size_t)cap, sizeof *tl->t, e);
    tl->names = al_calloc((size_t)cap, sizeof *tl->names, e);
    if (!tl->t || !tl->names) return -1;
    add_tensor(tl, m, AL_P_WE, 0, m->p[AL_P_WE]);
    add_tensor(tl, m, AL_P_WPOS, 0, m->p[AL_P_WPOS]);
    /* TransformerLens's state-dict order: ln1, W_Q..W_O, b_Q..b_O */
    static const int layer_order[] = {AL_P_LN1W, AL_P_LN1B, AL_P_WQ, AL_P_WK, AL_P_WV,
                                      AL_P_WO,   AL_P_BQ,   AL_P_BK, AL_P_BV, AL_P_BO};
    for (int l = 0; l < c->n_layers; l++)
        for (size_t i = 0; i < sizeof layer_order / sizeof layer_order[0]; i++)
            add_layer_tensor(tl, m, layer_order[i], l);
    add_layer_tensor(tl, m, AL_P_LNFW, 0);
    add_layer_tensor(tl, m, AL_P_LNFB, 0);
    const float *wu = m->p[AL_P_WU];
    if (c->tied_embeddings) {
        size_t V = (size_t)c->d_vocab, C = (size_t)c->d_model;
        tl->wu_t = al_malloc(V * C, sizeof(float), e);
        if (!tl->wu_t) return -1;
        for (size_t v = 0; v < V; v++)
            for (size_t k = 0; k < C; k++) tl->wu_t[k * V + v] = m->p[AL_P_WE][v * C + k];
        wu = tl->wu_t;
    }
    add_tensor(tl, m, AL_P_WU, 0, wu);
    add_layer_tensor(tl, m, AL_P_BU, 0);
    return 0;
}

int al_ckpt_write_weights(const char *path, const al_model *m, al_err *e) {
    tensor_list tl;
    if (model_tensors(m, &tl, e) != 0) {
        tensor_list_free(&tl);
        return -1;
    }
    /* "format": "pt" is what torch-side safetensors loaders expect */
    const char *mk[2] = {"format", "attnlab_version"}, *mv[2] = {"pt", AL_VERSION};
    int rc = al_st_write(path, tl.t, tl.n, mk, mv, 2, e);
    tensor_list_free(&tl);
    return rc;
}

static int write_optim(const char *path, const float *am, const float *av, size_t n, al_err *e) {
    al_st_tensor t[2] = {{"adam.m", AL_DT_F32, 1, {(int64_t)n}, am},
                         {"adam.v", AL_DT_F32, 1, {(int64_t)n}, av}};
    const char *mk[1] = {"attnlab_version"}, *mv[1] = {AL_VERSION};
    return al_st_write(path, t, 2, mk, mv, 1, e);
}

static int write_text(const char *path, char *text, al_err *e) {
    if (!text) return al_errf(e, "cannot write %s: out of memory", path);
    int rc = al_write_file_atomic(path, text, strlen(text), e);
    free(text);
    return rc;
}

static size_t count_nonfinite(const float *x, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !isfinite(x[i]);
    return bad;
}

/* Write every file of the checkpoint as NAME.new; have[f] says which. */
static int write_new_files(const char *dir, const al_model *m, const al_tokenizer *tok,
                           const al_train_state *st, const float *am, const float *av,
                           const int *have, al_err *e) {
    char p[AL_PATH_MAX];
    for (int f = 0; f < N_FILES; f++) {
        if (!have[f]) continue;
        if (join2(p, dir, FILES[f], ".new", e) != 0) return -1;
        int rc = 0;
        switch (f) {
        case F_MODEL: rc = al_ckpt_write_weights(p, m, e); break;
        case F_CONFIG: rc = write_text(p, al_config_to_json(&m->cfg), e); break;
        case F_TOK: rc = al_tok_save(tok, p, e); break;
        case F_OPTIM: rc = write_optim(p, am, av, m->n_params, e); break;
        case F_STATE: rc = write_text(p, al_state_to_json(st), e); break;
        }
        if (rc != 0) return -1;
    }
    return 0;
}

static int write_commit(const char *dir, const int *have, al_err *e) {
    char txt[512], p[AL_PATH_MAX];
    size_t k = (size_t)snprintf(txt, sizeof txt, "%s\n", COMMIT_MAGIC);
    for (int f = 0; f < N_FILES; f++)
        k += (size_t)snprintf(txt + k, sizeof txt - k, "%s %s\n", have[f] ? "rename" : "remove",
                              FILES[f]);
    if (join2(p, dir, COMMIT_NAME, "", e) != 0) return -1;
    return al_write_file_atomic(p, txt, k, e);
}

static int save_locked(const char *dir, const al_model *m, const al_tokenizer *tok,
                       const al_train_state *st, const float *am, const float *av, al_err *e) {
    int have[N_FILES] = {1, 1, tok != NULL, st != NULL, st != NULL};
    if (recover_locked(dir, e) != 0) return -1;
    if (write_new_files(dir, m, tok, st, am, av, have, e) != 0 || sync_dir(dir, e) != 0) {
        al_err ignore;
        recover_locked(dir, &ignore); /* no COMMIT yet: removes the .new files */
        return -1;
    }
    char cp[AL_PATH_MAX];
    /* From the moment COMMIT exists, the new checkpoint is the checkpoint. */
    if (write_commit(dir, have, e) != 0 || sync_dir(dir, e) != 0) return -1;
    if (join2(cp, dir, COMMIT_NAME, "", e) != 0) return -1;
    if (roll_forward(dir, cp, e) != 0) return -1;
    return sync_dir(dir, e);
}

int al_ckpt_save(const char *dir, const al_model *m, const al_tokenizer *tok,
                 const al_train_state *st, const float *adam_m, const float *adam_v, al_err *e) {
    if (st && (!adam_m || !adam_v))
        return al_errf(e, "cannot save checkpoint %s: training state without optimizer state", dir);
    /* Never replace a good checkpoint with one no loader would accept. */
    size_t bad = al_model_count_nonfinite(m);
    if (bad) return al_errf(e, "refusing to save checkpoint %s: %zu weights are NaN/Inf", dir, bad);
    if (st && (count_nonfinite(adam_m, m->n_params) || count_nonfinite(adam_v, m->n_params)))
        return al_errf(e, "refusing to save checkpoint %s: optimizer state is NaN/Inf", dir);
    if (al_mkdir_p(dir, e) != 0) return -1;
    int fd = lock_dir(dir, e);
    if (fd == -1) return -1;
    int rc = save_locked(dir, m, tok, st, adam_m, adam_v, e);
    unlock_dir(fd);
    if (rc != 0 && e && strncmp(e->msg, "cannot save", 11) != 0)
        al_err_prefix(e, "cannot save checkpoint %s", dir);
    return rc;
}

/* ------------------------------------------------------------ loading */

static int read_small(const char *dir, const char *name, char **txt, char *path, al_err *e) {
    size_t n;
    if (join2(path, dir, name, "", e) != 0) return -1;
    if (al_read_file(path, (unsigned char **)txt, &n, AL_CKPT_JSON_MAX, e) != 0) {
        if (!al_file_exists(path))
            return al_errf(e, "cannot read checkpoint %s: %s missing", dir, name);
        return al_err_prefix(e, "cannot read checkpoint %s", dir);
    }
    return 0;
}

int al_ckpt_read_state(const char *dir, al_train_state *st, al_err *e) {
    char path[AL_PATH_MAX], src[AL_PATH_MAX + 32];
    char *txt = NULL;
    memset(st, 0, sizeof *st);
    if (join2(path, dir, "state.json", "", e) != 0) return -1;
    if (!holds_checkpoint(dir)) return 1; /* no model, so no state: nothing locked */
    int fd = lock_dir(dir, e);
    if (fd == -1) return -1;
    int rc = recover_locked(dir, e);
    if (rc == 0 && !al_file_exists(path)) rc = 1;
    if (rc == 0) rc = read_small(dir, FILES[F_STATE], &txt, path, e);
    unlock_dir(fd);
    if (rc != 0) return rc;
    snprintf(src, sizeof src, "cannot read checkpoint %s", path);
    rc = al_state_from_json(txt, st, src, e);
    free(txt);
    if (rc != 0) al_state_free(st);
    return rc;
}

/* With tied embeddings W_U is W_Eᵀ by definition; a W_U in the file must
 * say the same or the file contradicts its config. */
static int check_tied_wu(const al_st_file *f, const al_model *m, const char *path, al_err *e) {
    char name[64];
    int64_t shape[4];
    int nd = al_param_tl_name(m, AL_P_WU, 0, name, sizeof name, shape);
    if (!al_st_get(f, name)) return 0;
    size_t V = (size_t)m->cfg.d_vocab, C = (size_t)m->cfg.d_model;
    float *wu = al_malloc(V * C, sizeof(float), e);
    if (!wu) return -1;
    int rc = al_st_read_f32(f, name, nd, shape, wu, e);
    for (size_t v = 0; rc == 0 && v < V; v++)
        for (size_t k = 0; k < C; k++)
            if (wu[k * V + v] != m->p[AL_P_WE][v * C + k]) {
                rc = al_errf(e,
                             "cannot read checkpoint %s: tensor %s is not embed.W_E "
                             "transposed, but config.json says tied_embeddings",
                             path, name);
                break;
            }
    free(wu);
    return rc;
}

static int load_weights(const char *path, al_model *m, al_err *e) {
    al_st_file *f;
    if (al_st_open(path, &f, e) != 0) return -1;
    tensor_list tl;
    int rc = model_tensors(m, &tl, e);
    /* the list's data pointers are where each tensor belongs in m; with
     * tied embeddings, unembed.W_U's is our transposed copy (checked below) */
    for (int i = 0; rc == 0 && i < tl.n; i++)
        if (!(m->cfg.tied_embeddings && tl.t[i].data == tl.wu_t))
            rc = al_st_read_f32(f, tl.t[i].name, tl.t[i].ndim, tl.t[i].shape, (float *)tl.t[i].data,
                                e);
    if (rc == 0 && m->cfg.tied_embeddings) rc = check_tied_wu(f, m, path, e);
    for (int i = 0; rc == 0 && i < al_st_count(f); i++) {
        const char *nm = al_st_at(f, i)->name;
        int known = 0;
        for (int k = 0; k < tl.n && !known; k++) known = strcmp(nm, tl.t[k].name) == 0;
        if (!known) { /* the name comes from the file: shown on one line */
            char shown[81];
            size_t k = 0;
            for (; nm[k] && k < 80; k++) shown[k] = (unsigned char)nm[k] < 0x20 ? '?' : nm[k];
            shown[k] = 0;
            rc = al_errf(e,
                         "cannot read checkpoint %s: unexpected tensor %s%s "
                         "(not in a model of this config.json)",
                         path, shown, nm[k] ? "..." : "");
        }
    }
    tensor_list_free(&tl);
    al_st_close(f);
    return rc;
}

static int load_tokenizer(const char *dir, const al_model *m, al_tokenizer **tok, al_err *e) {
    char p[AL_PATH_MAX];
    if (join2(p, dir, FILES[F_TOK], "", e) != 0) return -1;
    if (!al_file_exists(p))
        return al_errf(e, "cannot read checkpoint %s: tokenizer.json missing", dir);
    if (al_tok_load(p, tok, e) != 0) return -1;
    if (al_tok_vocab_size(*tok) > m->cfg.d_vocab)
        return al_errf(e, "cannot read checkpoint %s: tokenizer has %d tokens but d_vocab is %d",
                       dir, al_tok_vocab_size(*tok), m->cfg.d_vocab);
    return 0;
}

static int load_locked(const char *dir, al_model *m, al_tokenizer **tok, al_err *e) {
    char path[AL_PATH_MAX], src[AL_PATH_MAX + 32];
    char *txt = NULL;
    if (recover_locked(dir, e) != 0) return -1;
    if (read_small(dir, FILES[F_CONFIG], &txt, path, e) != 0) return -1;
    al_config cfg;
    snprintf(src, sizeof src, "cannot read checkpoint %s", path);
    int rc = al_config_from_json(txt, &cfg, src, e);
    free(txt);
    if (rc != 0) return -1;
    if (al_model_alloc(m, &cfg, e) != 0) return al_err_prefix(e, "cannot read checkpoint %s", dir);
    if (join2(path, dir, FILES[F_MODEL], "", e) != 0 || load_weights(path, m, e) != 0) return -1;
    return tok ? load_tokenizer(dir, m, tok, e) : 0;
}

int al_ckpt_load(const char *dir, al_model *m, al_tokenizer **tok, al_err *e) {
    memset(m, 0, sizeof *m);
    if (tok) *tok = NULL;
    if (!holds_checkpoint(dir)) return not_a_model(dir, e);
    int fd = lock_dir(dir, e);
    if (fd == -1) return -1;
    int rc = load_locked(dir, m, tok, e);
    unlock_dir(fd);
    if (rc != 0) {
        al_model_free(m);
        if (tok && *tok) {
            al_tok_free(*tok);
            *tok = NULL;
        }
    }
    return rc;
}

static int load_state_locked(const char *dir, al_train_state *st, float *am, float *av, size_t n,
                             al_err *e) {
    char path[AL_PATH_MAX], src[AL_PATH_MAX + 32];
    char *txt = NULL;
    if (recover_locked(dir, e) != 0) return -1;
    if (read_small(dir, FILES[F_STATE], &txt, path, e) != 0) return -1;
    snprintf(src, sizeof src, "cannot read checkpoint %s", path);
    int rc = al_state_from_json(txt, st, src, e);
    free(txt);
    if (rc != 0) return -1;
    al_st_file *f;
    if (join2(path, dir, FILES[F_OPTIM], "", e) != 0 || al_st_open(path, &f, e) != 0) return -1;
    int64_t shape[1] = {(int64_t)n};
    rc = al_st_read_f32(f, "adam.m", 1, shape, am, e);
    if (rc == 0) rc = al_st_read_f32(f, "adam.v", 1, shape, av, e);
    if (rc == 0 && al_st_count(f) != 2)
        rc = al_errf(e, "cannot read checkpoint %s: expected only adam.m and adam.v", path);
    al_st_close(f);
    return rc;
}

int al_ckpt_load_state(const char *dir, al_train_state *st, float *adam_m, float *adam_v, size_t n,
                       al_err *e) {
    memset(st, 0, sizeof *st);
    if (n > (size_t)INT64_MAX / 4) return al_errf(e, "bad optimizer size %zu", n);
    if (!holds_checkpoint(dir)) return not_a_model(dir, e);
    int fd = lock_dir(dir, e);
    if (fd == -1) return -1;
    int rc = load_state_locked(dir, st, adam_m, adam_v, n, e);
    unlock_dir(fd);
    if (rc != 0) al_state_free(st);
    return rc;
}
