/* experiment_load.c -- reading an experiment file (see experiment.h).
 *
 * Loading checks every key against the flag table of the command it
 * configures, so the experiment file accepts exactly what the commands
 * accept and error messages can name the key path; a stage keeps the
 * keys it accepted as a JSON object (what experiment_run.c applies and
 * stamps). The analyses come from the registry (registry.h): one key per
 * descriptor, its list, data and method rules from the descriptor. */
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
#include "attnlab/corpus.h"
#include "attnlab/brown.h"
#include "attnlab/json.h"
#include "attnlab/pictures.h"
#include "attnlab/plot.h"
#include "attnlab/registry.h"
#include "attnlab/report.h"
#include "attnlab/store.h"
#include "attnlab/store_runs_read.h"

extern al_command al_cmd_data_synth, al_cmd_tokenizer_train, al_cmd_encode, al_cmd_train;

/* ------------------------------------------------------------ loading */

typedef struct jx {
    const char *src;
    al_err *e;
    al_experiment *x;
    const char *text; /* --text: replaces data.text, or NULL */
} jx;

static int bad(jx *j, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(jx *j, const char *path, const char *fmt, ...) {
    char m[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return al_errf(j->e, "%s: %s: %s", j->src, path, m); /* al_errf keeps it one line */
}

/* parent.key (a key printable in one line) or parent[i]. */
static void kpath(char *buf, size_t cap, const char *parent, const char *key) {
    char k[64];
    size_t i = 0;
    for (; key[i] && i < 60; i++) k[i] = isprint((unsigned char)key[i]) ? key[i] : '?';
    k[i] = 0;
    snprintf(buf, cap, "%s%s%s", parent, *parent ? "." : "", k);
}

static void ipath(char *buf, size_t cap, const char *parent, int i) {
    snprintf(buf, cap, "%s[%d]", parent, i);
}

static int in_list(const char *key, const char *const *list) {
    for (int i = 0; list && list[i]; i++)
        if (strcmp(key, list[i]) == 0) return 1;
    return 0;
}

/* What a value of a flag type must be, in this loader's words. */
static const char *need_of(al_flag_type t) {
    switch (t) {
    case AL_BOOL: return "true or false";
    case AL_INT: return "an integer";
    case AL_U64: return "a non-negative integer";
    case AL_FLOAT: return "a number";
    case AL_STR: return "a string";
    }
    return "a valid value";
}

/* The keys of obj checked as options of command c. Keys in `own` are
 * the caller's and skipped here; keys in `deny` are flags the experiment
 * sets itself. If out is not NULL each option goes into it under the
 * flag's name ('_' for '-'), replacing one already there: a key written
 * both ways, or given by "train" and then by a model, ends up once, with
 * the value given last. */
static int obj_to_opts(jx *j, const cJSON *obj, const char *path, const al_command *c,
                       const char *const *own, const char *const *deny, cJSON *out) {
    char kp[320];
    if (!cJSON_IsObject(obj)) return bad(j, path, "must be an object");
    const char *d = al_json_dup_key(obj);
    if (d) {
        kpath(kp, sizeof kp, path, d);
        return bad(j, kp, "given twice");
    }
    for (const cJSON *k = obj->child; k; k = k->next) {
        kpath(kp, sizeof kp, path, k->string);
        if (in_list(k->string, own)) continue;
        const al_flag *f = al_flag_for_key(c->flags, k->string);
        if (f && in_list(f->name, deny)) return bad(j, kp, "is set by the experiment itself");
        if (!f) return bad(j, kp, "unknown key (see 'attnlab help %s')", c->name);
        /* the check al_flags_apply_json makes at run time: a file that
         * loads also applies */
        if (!al_flag_json_ok(f, k)) return bad(j, kp, "must be %s", need_of(f->type));
        if (!out) continue;
        char name[64];
        snprintf(name, sizeof name, "%s", f->name);
        for (char *p = name; *p; p++)
            if (*p == '-') *p = '_';
        cJSON *v = cJSON_Duplicate(k, 1);
        int ok = v && (cJSON_GetObjectItemCaseSensitive(out, name)
                           ? cJSON_ReplaceItemInObjectCaseSensitive(out, name, v)
                           : cJSON_AddItemToObject(out, name, v));
        if (!ok) {
            cJSON_Delete(v);
            return bad(j, kp, "out of memory");
        }
    }
    return 0;
}

/* *dst = o as compact JSON (o is deleted). */
static int keep_json(jx *j, const char *path, cJSON *o, char **dst) {
    /* cJSON prints a number with 15 digits when that reads back within
     * an epsilon (0.1 + 0.2 as 0.3, 2^53 - 1 as 2^53 - 2): written as the
     * shortest exact text instead, a stage gets the very value of the file */
    *dst = o && al_json_exact_numbers(o->child) == 0 ? al_json_print(0, o) : NULL;
    cJSON_Delete(o);
    return *dst ? 0 : bad(j, path, "out of memory");
}

/* The options of obj for command c as compact JSON in *dst ("{}" if obj
 * is NULL), checked as obj_to_opts does. */
static int opts_json(jx *j, const cJSON *obj, const char *path, const al_command *c,
                     const char *const *own, const char *const *deny, char **dst) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return bad(j, path, "out of memory");
    if (obj && obj_to_opts(j, obj, path, c, own, deny, o)) {
        cJSON_Delete(o);
        return -1;
    }
    return keep_json(j, path, o, dst);
}

/* obj must have only keys from `known`. */
static int only_keys(jx *j, const cJSON *obj, const char *path, const char *const *known) {
    char kp[320];
    if (!cJSON_IsObject(obj)) return bad(j, path, "must be an object");
    const char *d = al_json_dup_key(obj);
    if (d) {
        kpath(kp, sizeof kp, path, d);
        return bad(j, kp, "given twice");
    }
    for (const cJSON *k = obj->child; k; k = k->next)
        if (!in_list(k->string, known)) {
            kpath(kp, sizeof kp, path, k->string);
            return bad(j, kp, "unknown key");
        }
    return 0;
}

static int get_str(jx *j, const cJSON *obj, const char *path, const char *key, char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char kp[320];
    *out = NULL;
    if (!v) return 0;
    kpath(kp, sizeof kp, path, key);
    if (!cJSON_IsString(v)) return bad(j, kp, "must be a string");
    if (!(*out = strdup(v->valuestring))) return bad(j, kp, "out of memory");
    return 0;
}

static int get_int(jx *j, const cJSON *obj, const char *path, const char *key, int lo, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char kp[320];
    if (!v) return 0;
    kpath(kp, sizeof kp, path, key);
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || d != floor(d) || d < lo || d > INT_MAX)
        return bad(j, kp, "must be an integer >= %d", lo);
    *out = (int)d;
    return 0;
}

static int need_file(jx *j, const char *path, const char *file) {
    return al_file_exists(file) ? 0 : bad(j, path, "no such file: %s", file);
}

static int safe_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 60 || s[0] == '.' || s[0] == '-') return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* A corpus the data commands write separates its documents by
 * <|endoftext|>, so encode must split them there: data.docs "eot". */
static int need_eot(jx *j, const cJSON *enc, const char *with) {
    const cJSON *docs = cJSON_GetObjectItemCaseSensitive(enc, "docs");
    if (cJSON_IsString(docs) && !strcmp(docs->valuestring, "eot")) return 0;
    return bad(j, "data.docs",
               "must be \"eot\" with %s (its documents are separated by "
               "<|endoftext|>)",
               with);
}

/* data.code: {"source": "pystdlib"|"gostd", "dir": DIR}, dir optional;
 * its documents are separated by <|endoftext|>, so encode must split
 * them there (docs, the encode options beside it). */
static int load_code(jx *j, const cJSON *c, const cJSON *enc) {
    static const char *const known[] = {"source", "dir", NULL};
    al_experiment *x = j->x;
    if (!cJSON_IsObject(c)) return bad(j, "data.code", "must be an object with \"source\"");
    if (only_keys(j, c, "data.code", known) ||
        get_str(j, c, "data.code", "source", &x->code_source) ||
        get_str(j, c, "data.code", "dir", &x->code_dir))
        return -1;
    if (!x->code_source) return bad(j, "data.code.source", "missing (\"pystdlib\" or \"gostd\")");
    if (!al_data_code_source_ok(x->code_source))
        return bad(j, "data.code.source", "must be \"pystdlib\" or \"gostd\"");
    if (x->code_dir && !al_is_dir(x->code_dir))
        return bad(j, "data.code.dir", "no such directory: %s", x->code_dir);
    return need_eot(j, enc, "data.code");
}

/* One input of data.mix: {"share": S, and one of "code": {"source",
 * "dir"}, "prose": {"source": "kjv"|"pydocs", "unit", "from", "dir"},
 * "brown": {"unit", "from"} or "text": FILE with "docs"}. Every value is
 * checked here, so that a bad input is refused before any stage runs. */
static int load_mix_in(jx *j, const cJSON *in, int i, al_exp_mix_in *m) {
    static const char *const known[] = {"share", "code", "prose", "brown", "text", "docs", NULL};
    static const char *const kinds[] = {"code", "prose", "brown", "text", NULL};
    static const char *const sub[][5] = {{"source", "dir", NULL},
                                         {"source", "unit", "from", "dir", NULL},
                                         {"unit", "from", NULL}};
    char p[64];
    snprintf(p, sizeof p, "data.mix.inputs[%d]", i);
    if (!cJSON_IsObject(in)) return bad(j, p, "must be an object with \"share\" and a source");
    if (only_keys(j, in, p, known)) return -1;
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(in, "share");
    if (!cJSON_IsNumber(sh) || !(sh->valuedouble > 0 && sh->valuedouble <= 1))
        return bad(j, p, "\"share\" must be a number in (0, 1]");
    m->share = sh->valuedouble;
    int k = -1, n = 0;
    for (int q = 0; kinds[q]; q++)
        if (cJSON_GetObjectItemCaseSensitive(in, kinds[q])) k = q, n++;
    if (n != 1) return bad(j, p, "give exactly one of \"code\", \"prose\", \"brown\" and \"text\"");
    snprintf(m->kind, sizeof m->kind, "%s", kinds[k]);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(in, kinds[k]);
    char q[96];
    snprintf(q, sizeof q, "%s.%s", p, kinds[k]);
    if (cJSON_GetObjectItemCaseSensitive(in, "docs") && k != 3)
        return bad(j, p, "\"docs\" is for a \"text\" input");
    if (k == 3) { /* text: a file, cut into documents by docs */
        if (!cJSON_IsString(v)) return bad(j, q, "must be a file name");
        if (!(m->source = strdup(v->valuestring)) || get_str(j, in, p, "docs", &m->docs))
            return m->source ? -1 : bad(j, q, "out of memory");
        al_docs_mode mode;
        al_err e;
        if (m->docs && al_docs_mode_parse(m->docs, &mode, &e)) return bad(j, p, "%s", e.msg);
        return need_file(j, q, m->source);
    }
    if (k == 2 && cJSON_IsTrue(v)) return 0;
    if (!cJSON_IsObject(v)) return bad(j, q, "must be an object");
    if (only_keys(j, v, q, sub[k]) || get_str(j, v, q, "unit", &m->unit) ||
        get_str(j, v, q, "from", &m->from) || (k < 2 && get_str(j, v, q, "source", &m->source)) ||
        (k < 2 && get_str(j, v, q, "dir", &m->dir)))
        return -1;
    if (k == 0 && !al_data_code_source_ok(m->source))
        return bad(j, q, "\"source\" must be \"pystdlib\" or \"gostd\"");
    if (k == 1 && (!m->source || (strcmp(m->source, "kjv") && strcmp(m->source, "pydocs"))))
        return bad(j, q,
                   "\"source\" must be \"kjv\" or \"pydocs\" (a file of your own: "
                   "{\"text\": FILE})");
    if (m->unit && k == 1 && strcmp(m->unit, "chapter") && strcmp(m->unit, "book") &&
        strcmp(m->unit, "verse"))
        return bad(j, q, "\"unit\" must be \"chapter\", \"book\" or \"verse\"");
    if (m->unit && k == 2 && strcmp(m->unit, "para") && strcmp(m->unit, "text"))
        return bad(j, q, "\"unit\" must be \"para\" or \"text\"");
    if (m->dir && !al_is_dir(m->dir)) return bad(j, q, "no such directory: %s", m->dir);
    return m->from ? need_file(j, q, m->from) : 0;
}

/* data.mix: {"inputs": [...], "bytes": N, "seed": S}: the inputs are
 * written one by one, then mixed by `data mix` (whole documents, the
 * shares of the bytes); documents are separated by <|endoftext|>. */
static int load_mix(jx *j, const cJSON *mx, const cJSON *enc) {
    static const char *const known[] = {"inputs", "bytes", "seed", NULL};
    al_experiment *x = j->x;
    if (!cJSON_IsObject(mx)) return bad(j, "data.mix", "must be an object with \"inputs\"");
    if (only_keys(j, mx, "data.mix", known)) return -1;
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(mx, "inputs"), *in;
    int n = cJSON_GetArraySize(ins);
    if (!cJSON_IsArray(ins) || n < 1 || n > AL_EXP_MAX_MIX)
        return bad(j, "data.mix.inputs", "must be a list of 1 to %d inputs", AL_EXP_MAX_MIX);
    double sum = 0;
    cJSON_ArrayForEach(in, ins) {
        /* counted before it loads, so that what a refused input holds is freed */
        al_exp_mix_in *m = &x->mix[x->n_mix++];
        if (load_mix_in(j, in, x->n_mix - 1, m)) return -1;
        sum += m->share;
    }
    if (fabs(sum - 1) > 1e-9)
        return bad(j, "data.mix.inputs", "the shares must sum to 1 (they sum to %.6g)", sum);
    x->mix_seed = 1;
    static const char *const nums[] = {"bytes", "seed"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(mx, nums[i]);
        if (!v) continue;
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9e15 ||
            v->valuedouble != floor(v->valuedouble))
            return bad(j, i ? "data.mix.seed" : "data.mix.bytes", "must be a whole number >= 0");
        *(i ? &x->mix_seed : &x->mix_bytes) = (uint64_t)v->valuedouble;
    }
    if (!(x->mix_json = al_json_print(0, mx))) return bad(j, "data.mix", "out of memory");
    return need_eot(j, enc, "data.mix");
}

/* data.brown: {"unit": "para"|"text", "from": PATH}, both optional. */
static int load_brown(jx *j, const cJSON *b) {
    static const char *const known[] = {"unit", "from", NULL};
    al_experiment *x = j->x;
    x->brown = 1;
    snprintf(x->brown_unit, sizeof x->brown_unit, "para");
    if (cJSON_IsTrue(b)) return 0;
    if (!cJSON_IsObject(b)) return bad(j, "data.brown", "must be true or an object");
    if (only_keys(j, b, "data.brown", known)) return -1;
    char *unit = NULL;
    if (get_str(j, b, "data.brown", "unit", &unit)) return -1;
    if (unit && strcmp(unit, "para") && strcmp(unit, "text")) {
        free(unit);
        return bad(j, "data.brown.unit", "must be \"para\" or \"text\"");
    }
    if (unit) snprintf(x->brown_unit, sizeof x->brown_unit, "%s", unit);
    free(unit);
    if (get_str(j, b, "data.brown", "from", &x->brown_from)) return -1;
    return x->brown_from ? need_file(j, "data.brown.from", x->brown_from) : 0;
}

static int load_data(jx *j, const cJSON *d) {
    al_experiment *x = j->x;
    static const char *const own[] = {"synthetic", "text", "brown", "code", "mix", NULL};
    static const char *const deny[] = {"tokenizer", "in", "out", NULL};
    if (!d)
        return bad(j, "data",
                   "missing (give {\"synthetic\": {...}}, {\"text\": FILE}, "
                   "{\"brown\": {}}, {\"code\": {\"source\": ...}} or {\"mix\": "
                   "{\"inputs\": [...]}})");
    cJSON *enc = cJSON_CreateObject();
    if (!enc) return bad(j, "data", "out of memory");
    if (obj_to_opts(j, d, "data", &al_cmd_encode, own, deny, enc)) {
        cJSON_Delete(enc);
        return -1;
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(enc, "val");
    int val_ok = !v || v->valuedouble > 0;
    if (keep_json(j, "data", enc, &x->encode)) return -1;
    const cJSON *syn = cJSON_GetObjectItemCaseSensitive(d, "synthetic");
    const cJSON *txt = cJSON_GetObjectItemCaseSensitive(d, "text");
    const cJSON *brn = cJSON_GetObjectItemCaseSensitive(d, "brown");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(d, "code");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(d, "mix");
    if (!!syn + !!txt + !!brn + !!code + !!mx != 1)
        return bad(j, "data",
                   "give exactly one of \"synthetic\", \"text\", \"brown\", \"code\" and "
                   "\"mix\"");
    if (!val_ok) return bad(j, "data.val", "must be > 0: the analyses need validation tokens");
    if (j->text && !txt)
        return bad(j, "data", "--text replaces data.text, which this file has not");
    if (txt) {
        if (get_str(j, d, "data", "text", &x->text)) return -1;
        if (j->text) {
            free(x->text);
            if (!(x->text = strdup(j->text))) return bad(j, "data.text", "out of memory");
            return al_file_exists(x->text)
                       ? 0
                       : bad(j, "data.text", "--text: no such file: %s", x->text);
        }
        return need_file(j, "data.text", x->text);
    }
    if (brn) return load_brown(j, brn);
    if (code || mx) {
        cJSON *e2 = cJSON_Parse(x->encode);
        int rc = !e2    ? bad(j, "data", "out of memory")
                 : code ? load_code(j, code, e2)
                        : load_mix(j, mx, e2);
        cJSON_Delete(e2);
        return rc;
    }
    x->synthetic = 1;
    static const char *const sdeny[] = {"out", "names-out", NULL};
    return opts_json(j, cJSON_IsTrue(syn) ? NULL : syn, "data.synthetic", &al_cmd_data_synth, NULL,
                     sdeny, &x->synth);
}

static int load_tokenizer(jx *j, const cJSON *t) {
    al_experiment *x = j->x;
    static const char *const own[] = {"file", NULL};
    static const char *const deny[] = {"in", "out", NULL};
    if (opts_json(j, t, "tokenizer", &al_cmd_tokenizer_train, own, deny, &x->tok) ||
        (t && get_str(j, t, "tokenizer", "file", &x->tok_file)))
        return -1;
    if (x->tok_file && strcmp(x->tok, "{}") != 0)
        return bad(j, "tokenizer", "give \"file\" or training options, not both");
    return x->tok_file ? need_file(j, "tokenizer.file", x->tok_file) : 0;
}

static const char *const TRAIN_DENY[] = {"config", "data",  "val", "tokenizer", "out",
                                         "resume", "force", "db",  "stop-at",   NULL};

/* An int option of a model as it will train: its key, else the default. */
static int train_int(const cJSON *o, const char *key, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v ? (int)v->valuedouble : dflt;
}

/* The top-level "seed": the training seed of every model, so that one
 * key (what a sweep over "seed" sets) decides them all. Given with
 * train.seed or a model's own seed it would be ambiguous which wins:
 * refused. */
static int top_seed(jx *j, const cJSON *seed, const cJSON *defaults, const cJSON *models) {
    if (!seed) return 0;
    const al_flag *f = al_flag_for_key(al_cmd_train.flags, "seed");
    if (!f || !al_flag_json_ok(f, seed)) return bad(j, "seed", "must be %s", need_of(AL_U64));
    if (cJSON_GetObjectItemCaseSensitive(defaults, "seed"))
        return bad(j, "seed", "given twice: here and as train.seed (give one)");
    int i = 0;
    for (const cJSON *m = cJSON_IsArray(models) ? models->child : NULL; m; m = m->next, i++)
        if (cJSON_IsObject(m) && cJSON_GetObjectItemCaseSensitive(m, "seed"))
            return bad(j, "seed", "given twice: here and as models[%d].seed (give one)", i);
    return 0;
}

static int load_models(jx *j, const cJSON *defaults, const cJSON *models, const cJSON *seed) {
    al_experiment *x = j->x;
    cJSON *common = cJSON_CreateObject(), *mine = NULL;
    char kp[320];
    if (!common) return bad(j, "train", "out of memory");
    if (defaults && obj_to_opts(j, defaults, "train", &al_cmd_train, NULL, TRAIN_DENY, common))
        goto fail;
    if (top_seed(j, seed, defaults, models)) goto fail;
    if (seed) { /* as if "train" had it: every model gets it */
        cJSON *v = cJSON_Duplicate(seed, 1);
        if (!v || !cJSON_AddItemToObject(common, "seed", v)) {
            cJSON_Delete(v);
            bad(j, "seed", "out of memory");
            goto fail;
        }
    }
    if (!cJSON_IsArray(models) || cJSON_GetArraySize(models) < 1) {
        bad(j, "models", models ? "must be a non-empty array of objects" : "missing");
        goto fail;
    }
    if (cJSON_GetArraySize(models) > AL_EXP_MAX_MODELS) {
        bad(j, "models", "at most %d models", AL_EXP_MAX_MODELS);
        goto fail;
    }
    static const char *const own[] = {"name", NULL};
    const al_train_cli dflt = al_train_cli_defaults();
    for (const cJSON *m = models->child; m; m = m->next) {
        int i = x->n_models++;
        al_exp_model *M = &x->models[i];
        ipath(kp, sizeof kp, "models", i);
        /* "train" first, then the model's own keys, which win */
        if (!(mine = cJSON_Duplicate(common, 1))) {
            bad(j, kp, "out of memory");
            goto fail;
        }
        if (obj_to_opts(j, m, kp, &al_cmd_train, own, TRAIN_DENY, mine)) goto fail;
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(m, "name");
        char np[340];
        kpath(np, sizeof np, kp, "name");
        if (!nm) {
            bad(j, np, "missing (each model needs a name: its folder under models/)");
            goto fail;
        }
        if (!cJSON_IsString(nm) || !safe_name(nm->valuestring)) {
            bad(j, np, "must be a string of letters, digits, '.', '_' or '-' (at most 60)");
            goto fail;
        }
        snprintf(M->name, sizeof M->name, "%s", nm->valuestring);
        for (int k = 0; k < i; k++)
            if (strcmp(x->models[k].name, M->name) == 0) {
                bad(j, np, "'%s' is the name of models[%d] too", M->name, k);
                goto fail;
            }
        M->steps = train_int(mine, "steps", dflt.t.steps);
        M->n_layers = train_int(mine, "n_layers", dflt.t.n_layers);
        const cJSON *tied = cJSON_GetObjectItemCaseSensitive(mine, "tied");
        M->tied = tied ? cJSON_IsTrue(tied) : dflt.t.tied;
        const cJSON *pos = cJSON_GetObjectItemCaseSensitive(mine, "pos");
        int pos_type,
            pos_ok = !cJSON_IsString(pos) || al_pos_type_parse(pos->valuestring, &pos_type) == 0;
        const cJSON *norm = cJSON_GetObjectItemCaseSensitive(mine, "norm");
        const cJSON *bias = cJSON_GetObjectItemCaseSensitive(mine, "biases");
        unsigned bits;
        int norm_ok =
            !cJSON_IsString(norm) || al_train_norm_parse(norm->valuestring, &pos_type) == 0;
        int bias_ok = !cJSON_IsString(bias) || al_bias_spec_parse(bias->valuestring, &bits) == 0;
        int rc = keep_json(j, kp, mine, &M->train);
        mine = NULL;
        if (rc) goto fail;
        kpath(np, sizeof np, kp, "steps");
        if (M->steps < 1) {
            bad(j, np, "must be >= 1");
            goto fail;
        }
        kpath(np, sizeof np, kp, "n_layers");
        if (M->n_layers < 1) {
            bad(j, np, "must be >= 1");
            goto fail;
        }
        kpath(np, sizeof np, kp, "pos");
        if (!pos_ok) {
            bad(j, np, "must be \"standard\" or \"shortformer\"");
            goto fail;
        }
        kpath(np, sizeof np, kp, "norm");
        if (!norm_ok) {
            bad(j, np, "must be \"none\", \"ln\" or \"lnpre\"");
            goto fail;
        }
        kpath(np, sizeof np, kp, "biases");
        if (!bias_ok) {
            bad(j, np, "must be \"none\", \"all\" or letters of q, k, v, o, u");
            goto fail;
        }
    }
    cJSON_Delete(common);
    return 0;
fail:
    cJSON_Delete(mine);
    cJSON_Delete(common);
    return -1;
}

/* "models": ["a", "b"] of an analysis -> bit mask (all models if absent). */
static int model_mask(jx *j, const cJSON *obj, const char *path, unsigned *mask) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(obj, "models");
    char kp[320], ip[340];
    *mask = (1u << j->x->n_models) - 1;
    if (!ms) return 0;
    kpath(kp, sizeof kp, path, "models");
    if (!cJSON_IsArray(ms)) return bad(j, kp, "must be an array of model names");
    *mask = 0;
    int i = 0;
    for (const cJSON *m = ms->child; m; m = m->next, i++) {
        ipath(ip, sizeof ip, kp, i);
        if (!cJSON_IsString(m)) return bad(j, ip, "must be a model name (a string)");
        int k = 0;
        while (k < j->x->n_models && strcmp(j->x->models[k].name, m->valuestring) != 0) k++;
        if (k == j->x->n_models) return bad(j, ip, "no model is named '%.60s'", m->valuestring);
        *mask |= 1u << k;
    }
    return 0;
}

static al_exp_analysis *new_analysis(jx *j, const char *path, const char *kind) {
    if (j->x->n_analyses == AL_EXP_MAX_ANALYSES) {
        bad(j, path, "at most %d analyses", AL_EXP_MAX_ANALYSES);
        return NULL;
    }
    al_exp_analysis *a = &j->x->an[j->x->n_analyses++];
    a->kind = kind;
    snprintf(a->label, sizeof a->label, "%s", kind);
    return a;
}

/* a->opts = the options of obj (NULL: {}) for command c, without the keys
 * in own, plus "method": method if not NULL, as compact JSON: what the
 * stage applies to the analysis's flag table, and what its stamp hashes.
 * Keys are normalised as obj_to_opts does (a key written with '-' and
 * with '_' ends up once), so a file that loads also runs. obj must have
 * passed check_opts. */
static int set_opts(jx *j, al_exp_analysis *a, const char *path, const cJSON *obj,
                    const al_command *c, const char *const *own, const char *method) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return bad(j, path, "out of memory");
    if (cJSON_IsObject(obj) && obj_to_opts(j, obj, path, c, own, NULL, o)) {
        cJSON_Delete(o);
        return -1;
    }
    if (method && !cJSON_AddStringToObject(o, "method", method)) {
        cJSON_Delete(o);
        return bad(j, path, "out of memory");
    }
    return keep_json(j, path, o, &a->opts);
}

/* The keys of obj checked as options of c (see obj_to_opts); an
 * analysis keeps them through set_opts. */
static int check_opts(jx *j, const cJSON *obj, const char *path, const al_command *c,
                      const char *const *own, const char *const *deny) {
    return obj_to_opts(j, obj, path, c, own, deny, NULL);
}

/* "data": true of an analysis that reads the experiment's validation
 * tokens when asked (AL_EXP_DATA_ASKED: attribute's plain-text task) goes
 * into a->opts as is, so the stamp tells it from a pair task;
 * run_analysis takes it out again. */
static int asked_data(jx *j, al_exp_analysis *a, const cJSON *v, const char *path) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(v, "data");
    char kp[340];
    kpath(kp, sizeof kp, path, "data");
    if (!d) return 0;
    if (!cJSON_IsBool(d))
        return bad(j, kp, "must be true or false (true: the experiment's validation tokens)");
    if (cJSON_IsFalse(d)) return 0;
    cJSON *o = cJSON_Parse(a->opts);
    free(a->opts);
    a->opts = NULL;
    if (!o || !cJSON_AddTrueToObject(o, "data")) {
        cJSON_Delete(o);
        return bad(j, path, "out of memory");
    }
    return keep_json(j, path, o, &a->opts);
}

/* The keys no analysis object may set (the experiment's paths): the
 * where group, and what the descriptor adds (discover's "out"). */
static void deny_list(const al_analysis *d, const char **out, int cap) {
    static const char *const where[] = {"model", "db", "data", "mask", "threads"};
    int n = 0;
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) out[n++] = where[i];
    for (const char *const *k = d->exp_deny; k && *k && n < cap - 1; k++) out[n++] = *k;
    out[n] = NULL;
}

/* An analysis of the registry: true, false, an object, or (exp_list) a
 * list of objects, each its own stage and run. */
static int load_simple(jx *j, const cJSON *v, const char *path, const al_analysis *d, int list_ok) {
    static const char *const own_plain[] = {"models", NULL};
    static const char *const own_data[] = {"models", "data", NULL};
    const char *deny[16];
    int asked = d->exp_data == AL_EXP_DATA_ASKED;
    const char *const *own = asked ? own_data : own_plain;
    al_command *c = d->cmd;
    char ip[320];
    if (!v || cJSON_IsFalse(v)) return 0;
    if (cJSON_IsArray(v) && list_ok) {
        int i = 0;
        for (const cJSON *o = v->child; o; o = o->next, i++) {
            ipath(ip, sizeof ip, path, i);
            if (load_simple(j, o, ip, d, 0)) return -1;
        }
        return 0;
    }
    al_exp_analysis *a = new_analysis(j, path, d->name);
    if (!a) return -1;
    if (cJSON_IsTrue(v))
        return model_mask(j, v, path, &a->models) || set_opts(j, a, path, NULL, c, own, NULL);
    if (!cJSON_IsObject(v))
        return bad(j, path,
                   list_ok ? "must be true, false, an object or a list of objects"
                           : "must be an object");
    deny_list(d, deny, 16);
    if (check_opts(j, v, path, c, own, deny) || model_mask(j, v, path, &a->models) ||
        set_opts(j, a, path, v, c, own, NULL) || (asked && asked_data(j, a, v, path)))
        return -1;
    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(v, "pairs"); /* the task group */
    char kp[340];
    kpath(kp, sizeof kp, path, "pairs");
    if ((d->groups & AL_GROUP_TASK) && cJSON_IsString(pf) && need_file(j, kp, pf->valuestring))
        return -1;
    if (d->exp_label) d->exp_label(v, a->label, sizeof a->label);
    return 0;
}

/* An analysis with exp_methods (prune): "methods": [...] (default: all of
 * them) is one stage per method, each with "method" set. */
static int load_methods(jx *j, const cJSON *v, const char *path, const al_analysis *d) {
    static const char *const own[] = {"models", "methods", NULL};
    const char *deny[16];
    const char *const *known = d->exp_methods;
    char kp[320], ip[340], choices[160] = "";
    int n_known = 0;
    for (; known[n_known]; n_known++)
        snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s\"%s\"",
                 n_known ? ", " : "", known[n_known]);
    if (!v || cJSON_IsFalse(v)) return 0;
    if (cJSON_IsArray(v)) {
        int i = 0;
        for (const cJSON *o = v->child; o; o = o->next, i++) {
            ipath(ip, sizeof ip, path, i);
            if (!cJSON_IsObject(o)) return bad(j, ip, "must be an object");
            if (load_methods(j, o, ip, d)) return -1;
        }
        return 0;
    }
    unsigned mask;
    deny_list(d, deny, 16);
    if ((!cJSON_IsTrue(v) && check_opts(j, v, path, d->cmd, own, deny)) ||
        model_mask(j, v, path, &mask))
        return -1;
    const cJSON *ms = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "methods") : NULL;
    kpath(kp, sizeof kp, path, "methods");
    if (ms && (!cJSON_IsArray(ms) || !cJSON_GetArraySize(ms)))
        return bad(j, kp, "must be a non-empty array of %s", choices);
    int i = 0, rc = 0;
    for (const cJSON *m = ms ? ms->child : NULL; rc == 0 && (ms ? m != NULL : i < n_known);
         m = m ? m->next : NULL, i++) {
        const char *name = ms ? (cJSON_IsString(m) ? m->valuestring : NULL) : known[i];
        ipath(ip, sizeof ip, kp, i);
        if (!name || !in_list(name, known)) {
            rc = bad(j, ip, "must be one of %s", choices);
            break;
        }
        al_exp_analysis *a = new_analysis(j, path, d->name);
        if (!a || set_opts(j, a, path, v, d->cmd, own, name)) {
            rc = -1;
            break;
        }
        a->models = mask;
        snprintf(a->label, sizeof a->label, "%s (%s)", d->name, name);
    }
    return rc;
}

/* "analyses": one key per analysis of the registry, in its order. */
static int load_analyses(jx *j, const cJSON *a) {
    const char *known[32];
    int n = 0;
    char path[96];
    for (const al_analysis *const *d = al_analyses; *d && n < 31; d++) known[n++] = (*d)->name;
    known[n] = NULL;
    if (!a) return 0;
    if (only_keys(j, a, "analyses", known)) return -1;
    for (const al_analysis *const *d = al_analyses; *d; d++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, (*d)->name);
        snprintf(path, sizeof path, "analyses.%s", (*d)->name);
        if ((*d)->exp_methods ? load_methods(j, v, path, *d)
                              : load_simple(j, v, path, *d, (*d)->exp_list))
            return -1;
    }
    return 0;
}

static int load_pictures(jx *j, const cJSON *p) {
    al_experiment *x = j->x;
    static const char *const known[] = {"kinds", "prompt", "repeat", "top_n", "format", NULL};
    x->pictures = 1;
    if (!p || cJSON_IsTrue(p)) return 0;
    if (cJSON_IsFalse(p)) {
        x->pictures = 0;
        return 0;
    }
    if (only_keys(j, p, "pictures", known) || get_str(j, p, "pictures", "prompt", &x->prompt) ||
        get_int(j, p, "pictures", "repeat", 0, &x->repeat) ||
        get_int(j, p, "pictures", "top_n", 1, &x->top_n))
        return -1;
    char *fmt = NULL;
    if (get_str(j, p, "pictures", "format", &fmt)) return -1;
    x->figures = fmt ? al_fig_format_parse(fmt) : AL_FIG_PNG;
    free(fmt);
    if (x->figures != AL_FIG_PNG && x->figures != AL_FIG_SVG)
        return bad(j, "pictures.format", "must be \"png\" or \"svg\"");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(p, "kinds");
    if (!k) return 0;
    if (!cJSON_IsArray(k)) return bad(j, "pictures.kinds", "must be an array of picture kinds");
    size_t len = 1;
    for (const cJSON *s = k->child; s; s = s->next)
        len += cJSON_IsString(s) ? strlen(s->valuestring) + 1 : 0;
    if (!(x->pic_kinds = calloc(len, 1))) return bad(j, "pictures.kinds", "out of memory");
    int i = 0;
    for (const cJSON *s = k->child; s; s = s->next, i++) {
        char ip[64];
        ipath(ip, sizeof ip, "pictures.kinds", i);
        if (!cJSON_IsString(s) || !in_list(s->valuestring, (const char *const *)al_pic_kinds))
            return bad(j, ip,
                       "must be one of attention, qk-pos, qk, ov, composition, ablation, "
                       "pruning, training, spectrum, patching, paths, dla, terms, "
                       "attrpatch");
        if (i) strcat(x->pic_kinds, ",");
        strcat(x->pic_kinds, s->valuestring);
    }
    return 0;
}

static int load_report(jx *j, const cJSON *r) {
    static const char *const known[] = {"title", "intro", "interactive", NULL};
    j->x->report = 1;
    if (!r || cJSON_IsTrue(r)) return 0;
    if (cJSON_IsFalse(r)) {
        j->x->report = 0;
        return 0;
    }
    if (!cJSON_IsObject(r)) return bad(j, "report", "must be true, false or an object");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(r, "interactive");
    if (it && !cJSON_IsBool(it)) return bad(j, "report.interactive", "must be true or false");
    j->x->interactive = cJSON_IsTrue(it);
    return only_keys(j, r, "report", known) || get_str(j, r, "report", "title", &j->x->title) ||
           get_str(j, r, "report", "intro", &j->x->intro);
}

static int load_top(jx *j, const cJSON *root) {
    static const char *const known[] = {"name",     "description", "out",   "threads", "seed",
                                        "data",     "tokenizer",   "train", "models",  "analyses",
                                        "pictures", "report",      NULL};
    al_experiment *x = j->x;
    if (!cJSON_IsObject(root)) return al_errf(j->e, "%s: top level must be a JSON object", j->src);
    const char *d = al_json_dup_key(root);
    if (d) {
        char kp[80];
        kpath(kp, sizeof kp, "", d);
        return bad(j, kp, "given twice");
    }
    if (cJSON_GetObjectItemCaseSensitive(root, "sweep"))
        return bad(j, "sweep",
                   "this file is a sweep: run its tasks with --list-tasks, --task K "
                   "or --jobs N (a task cannot hold a sweep)");
    for (const cJSON *k = root->child; k; k = k->next)
        if (!in_list(k->string, known)) {
            char kp[80];
            kpath(kp, sizeof kp, "", k->string);
            return bad(j, kp, "unknown key");
        }
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (!nm) return bad(j, "name", "missing (the experiment's name, used for its folder)");
    if (!cJSON_IsString(nm) || !safe_name(nm->valuestring))
        return bad(j, "name", "must be a string of letters, digits, '.', '_' or '-' (at most 60)");
    snprintf(x->name, sizeof x->name, "%s", nm->valuestring);
    char *out = NULL;
    if (get_str(j, root, "", "out", &out) || get_str(j, root, "", "description", &x->description) ||
        get_int(j, root, "", "threads", 0, &x->threads))
        return -1;
    if (x->threads > AL_MAX_THREADS) return bad(j, "threads", "must be at most %d", AL_MAX_THREADS);
    if (out && (!*out || strlen(out) >= sizeof x->out - 200)) {
        free(out);
        return bad(j, "out", "must be a folder path");
    }
    snprintf(x->out, sizeof x->out, out ? "%s" : "notebooks-out/%s", out ? out : x->name);
    free(out);
    x->repeat = 20;
    x->top_n = 30;
    return load_data(j, cJSON_GetObjectItemCaseSensitive(root, "data")) ||
           load_tokenizer(j, cJSON_GetObjectItemCaseSensitive(root, "tokenizer")) ||
           load_models(j, cJSON_GetObjectItemCaseSensitive(root, "train"),
                       cJSON_GetObjectItemCaseSensitive(root, "models"),
                       cJSON_GetObjectItemCaseSensitive(root, "seed")) ||
           load_analyses(j, cJSON_GetObjectItemCaseSensitive(root, "analyses")) ||
           load_pictures(j, cJSON_GetObjectItemCaseSensitive(root, "pictures")) ||
           load_report(j, cJSON_GetObjectItemCaseSensitive(root, "report"));
}

int al_exp_load_root_text(const cJSON *root, const char *src, const char *text, al_experiment **out,
                          al_err *e) {
    *out = NULL;
    al_experiment *x = calloc(1, sizeof *x);
    if (!x) return al_errf(e, "out of memory");
    snprintf(x->source, sizeof x->source, "%s", src);
    jx j = {src, e, x, text};
    if (load_top(&j, root)) {
        al_exp_free(x);
        return -1;
    }
    *out = x;
    return 0;
}

int al_exp_load_root(const cJSON *root, const char *src, al_experiment **out, al_err *e) {
    return al_exp_load_root_text(root, src, NULL, out, e);
}

int al_exp_load_text(const char *path, const char *text, al_experiment **out, al_err *e) {
    *out = NULL;
    cJSON *root;
    if (al_json_read_file(path, 16u << 20, &root, e)) return -1;
    int rc = al_exp_load_root_text(root, path, text, out, e);
    cJSON_Delete(root);
    return rc;
}

int al_exp_load(const char *path, al_experiment **out, al_err *e) {
    return al_exp_load_text(path, NULL, out, e);
}

void al_exp_free(al_experiment *x) {
    if (!x) return;
    free(x->synth);
    free(x->encode);
    free(x->tok);
    for (int i = 0; i < x->n_models; i++) free(x->models[i].train);
    for (int i = 0; i < x->n_analyses; i++) free(x->an[i].opts);
    free(x->description);
    free(x->text);
    free(x->brown_from);
    free(x->code_source);
    free(x->code_dir);
    for (int i = 0; i < x->n_mix; i++) {
        al_exp_mix_in *m = &x->mix[i];
        free(m->source), free(m->dir), free(m->unit), free(m->from), free(m->docs);
    }
    free(x->mix_json);
    free(x->tok_file);
    free(x->pic_kinds);
    free(x->prompt);
    free(x->title);
    free(x->intro);
    free(x);
}
