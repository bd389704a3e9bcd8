/* cmd_names.c -- `attnlab names`: the seed notes' copying table on real
 * text. Held-out stories get an invented name inserted twice
 * (names_text.h); the model's probability of each name piece at the
 * first and the second appearance is printed and stored in model_scores
 * (run kind "names", metrics names_first_pJ / names_second_pJ for piece
 * J = 1.., names_first_rest / names_second_rest over the pieces after
 * the first, names_stories). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/doc_text.h"
#include "attnlab/namecopy.h"
#include "attnlab/names_text.h"
#include "attnlab/registry.h"
#include "attnlab/store.h"

#include <cjson/cJSON.h>

typedef struct names_args {
    al_an_where w;
    int n;
    const char *name;
    uint64_t seed;
    int code;
} names_args;

static names_args g = {AL_AN_WHERE_INIT, 200, NULL, 1, 0};

static al_flag flags[] =
    {AL_FLAG_MODEL(g),
     AL_FLAG_DB(g),
     {"data", AL_STR, &g.w.data, "VAL.bin",
      "held-out tokens (X.val.bin of attnlab encode: documents after <|endoftext|>)", 1, 0},
     {"stories", AL_INT, &g.n, "N", "stories (the first N usable ones of --data)", 0, 0},
     {"name", AL_STR, &g.name, "NAME",
      "insert this name in every story (default: an invented name per story)", 0, 0},
     {"seed", AL_U64, &g.seed, "S", "seed for the invented names", 0, 0},
     {"code", AL_BOOL, &g.code, NULL,
      "held-out code: in each function rename a variable to an invented name (first use vs "
      "next use)",
      0, 0},
     AL_FLAG_THREADS(g),
     AL_FLAGS_END};

static int run_names(int argc, char **argv);
extern const al_analysis al_an_names;
al_command al_cmd_names = {
    "names",
    "copying an invented name: p(each piece) at its 1st and 2nd appearance in held-out stories",
    "--model DIR --db FILE --data VAL.bin [--stories 200] [--name NAME] [--seed 1] [--code]",
    "The seed notes' table on real text. Each held-out story (a document of\n"
    "--data) gets a name, \" Name\", inserted before a word at 1/5 and again at\n"
    "3/5 of the story (lower-cased in a lower-case story); names are invented\n"
    "from the synthetic corpus's syllables unless --name is given, and must be\n"
    "2..8 tokens. Printed and stored per piece: the mean probability the model\n"
    "gives the piece at the name's first appearance (nothing to copy) and at\n"
    "the second (a copy). An induction head raises the pieces after the first\n"
    "at the second appearance; a 1-layer model can copy only with skip-trigrams.\n"
    "With --code, the same for code (a file a document, e.g. attnlab data code):\n"
    "in each held-out function (\"def \" or \"func \" and the lines indented\n"
    "under it) one variable used at least twice is renamed to an invented name,\n"
    "and the function alone is the sequence; the 1st appearance is the\n"
    "variable's first use, the 2nd its next use (--stories counts functions).\n"
    "model_scores of run kind \"names\": names_first_pJ, names_second_pJ\n"
    "(J = 1..), names_first_rest, names_second_rest (pieces 2..), names_stories.",
    flags,
    run_names,
};

/* attnlab.names/1 (docs/json.md), beside the driver's run and model keys. */
static int json_names(cJSON *doc, const names_args *a, const al_behave *b, const al_name_stories *s,
                      const al_namecopy_result *r) {
    cJSON *ex, *pieces, *rest;
    if (!cJSON_AddStringToObject(doc, "data", a->w.data) ||
        !cJSON_AddNumberToObject(doc, "n_layers", b->m.cfg.n_layers) ||
        !cJSON_AddNumberToObject(doc, "stories", r->n) ||
        !cJSON_AddStringToObject(doc, "mode", a->code ? "code" : "stories") ||
        !cJSON_AddStringToObject(doc, "name", a->name ? "given" : "invented per story") ||
        (a->code && !cJSON_AddStringToObject(doc, "renamed", s->s[0].was)) ||
        !(ex = cJSON_AddObjectToObject(doc, "example")) ||
        !cJSON_AddStringToObject(ex, "name", s->s[0].name) ||
        !(pieces = cJSON_AddArrayToObject(ex, "pieces")))
        return -1;
    for (int j = 0; j < s->s[0].k; j++) {
        char buf[64];
        al_tok_display(b->tok, s->s[0].piece[j], buf, sizeof buf);
        if (!cJSON_AddItemToArray(pieces, cJSON_CreateString(buf))) return -1;
    }
    if (!(pieces = cJSON_AddArrayToObject(doc, "pieces"))) return -1;
    for (int j = 0; j < r->max_k; j++) {
        cJSON *p = cJSON_CreateObject();
        if (!p || !cJSON_AddItemToArray(pieces, p) || !cJSON_AddNumberToObject(p, "piece", j + 1) ||
            !cJSON_AddNumberToObject(p, "stories", r->count[j]) ||
            !cJSON_AddNumberToObject(p, "p_first", r->p_first[j]) ||
            !cJSON_AddNumberToObject(p, "p_second", r->p_second[j]))
            return -1;
    }
    return (rest = cJSON_AddObjectToObject(doc, "rest")) &&
                   cJSON_AddNumberToObject(rest, "p_first", r->rest_first) &&
                   cJSON_AddNumberToObject(rest, "p_second", r->rest_second)
               ? 0
               : -1;
}

static int names_check(const void *args, const al_flag *fl, al_err *e) {
    const names_args *a = args;
    (void)fl;
    if (al_threads_check(a->w.threads, e)) return -1;
    if (a->n < 1 || a->n > 100000)
        return al_errf(e, "--stories must be in [1, 100000] (got %d)", a->n);
    if (!a->w.data) return al_errf(e, "--data is required (the held-out stories)");
    if (a->code && a->name)
        return al_errf(e, "--name and --code cannot be combined: with --code every variable "
                          "gets a name of its own");
    if (a->name && !a->name[strspn(a->name, " \t")])
        return al_errf(e, "--name is empty: give a name (e.g. --name Seoyeon), or leave the "
                          "option out to invent one per story");
    return 0;
}

/* The run's state between the driver's phases. */
typedef struct names_state {
    al_tokens d;
    al_name_stories s;
    al_namecopy_result r;
} names_state;

/* The tokenizer and the stories (each with its name) before the run row
 * exists: a text without usable stories is refused without a run. */
static int names_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    names_args *a = args;
    names_state *s = state;
    al_behave *b = dr->b;
    if (!b->tok) return al_errf(e, "%s has no tokenizer.json (names are text)", a->w.model);
    if (al_tokens_load(a->w.data, &s->d, e)) return -1;
    return a->code
               ? al_idents_in_code(b->tok, &s->d, a->n, a->seed, b->m.cfg.n_ctx, &s->s, e)
               : al_names_in_text(b->tok, &s->d, a->n, a->name, a->seed, b->m.cfg.n_ctx, &s->s, e);
}

static int names_compute(void *args, void *state, al_drive *dr, al_err *e) {
    names_state *s = state;
    (void)args;
    return al_namecopy_run(&dr->b->m, &s->s, &s->r, e);
}

/* model_scores: names_first_pJ / names_second_pJ per piece J, the rest
 * and the story count. */
static int names_store(void *args, void *state, al_drive *dr, al_err *e) {
    names_state *s = state;
    al_behave *b = dr->b;
    const al_namecopy_result *r = &s->r;
    (void)args;
    for (int j = 0; j < r->max_k; j++) {
        char m1[40], m2[40];
        snprintf(m1, sizeof m1, "names_first_p%d", j + 1);
        snprintf(m2, sizeof m2, "names_second_p%d", j + 1);
        if (al_store_put_model_score(b->st, b->run_id, b->model_id, m1, r->p_first[j], e) ||
            al_store_put_model_score(b->st, b->run_id, b->model_id, m2, r->p_second[j], e))
            return -1;
    }
    return al_store_put_model_score(b->st, b->run_id, b->model_id, "names_first_rest",
                                    r->rest_first, e) ||
                   al_store_put_model_score(b->st, b->run_id, b->model_id, "names_second_rest",
                                            r->rest_second, e) ||
                   al_store_put_model_score(b->st, b->run_id, b->model_id, "names_stories", r->n, e)
               ? -1
               : 0;
}

static int names_doc(void *args, void *state, al_drive *dr, al_err *e) {
    names_state *st = state;
    return json_names(dr->doc, args, dr->b, &st->s, &st->r) ? al_errf(e, "out of memory") : 0;
}

/* The text of attnlab.names/1, from the document alone. */
static void names_text(const cJSON *doc) {
    const int L = al_dt_int(doc, "n_layers");
    const cJSON *ex = al_dt_get(doc, "example"), *x, *rest = al_dt_get(doc, "rest");
    printf("model %s (%d layer%s) -> run %lld of %s\n", al_dt_str(doc, "model"), L,
           L == 1 ? "" : "s", (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"));
    if (!strcmp(al_dt_str(doc, "mode"), "code"))
        printf("%d held-out functions of %s, a variable renamed to an invented name (e.g. %s -> "
               "\"%s\" =",
               al_dt_int(doc, "stories"), al_dt_str(doc, "data"), al_dt_str(doc, "renamed"),
               al_dt_str(ex, "name"));
    else
        printf("%d held-out stories of %s, name %s (e.g. \"%s\" =", al_dt_int(doc, "stories"),
               al_dt_str(doc, "data"), al_dt_str(doc, "name"), al_dt_str(ex, "name"));
    cJSON_ArrayForEach(x, al_dt_get(ex, "pieces")) printf(" %s", cJSON_GetStringValue(x));
    printf(")\n%-7s %8s %12s %12s %8s\n", "piece", "stories", "p(1st)", "p(2nd)", "2nd/1st");
    cJSON_ArrayForEach(x, al_dt_get(doc, "pieces")) {
        double p1 = al_dt_num(x, "p_first"), p2 = al_dt_num(x, "p_second");
        printf("%-7d %8d %12.4f %12.4f %8.1f\n", al_dt_int(x, "piece"), al_dt_int(x, "stories"), p1,
               p2, p1 > 0 ? p2 / p1 : 0);
    }
    double r1 = al_dt_num(rest, "p_first"), r2 = al_dt_num(rest, "p_second");
    printf("%-7s %8s %12.4f %12.4f %8.1f\n", "2..", "", r1, r2, r1 > 0 ? r2 / r1 : 0);
}

static void names_release(void *state) {
    names_state *s = state;
    al_name_stories_free(&s->s);
    al_tokens_free(&s->d);
}

static void names_init(void *args) {
    names_args *a = args;
    memset(&a->w, 0, sizeof a->w);
    a->n = 200, a->name = NULL, a->seed = 1, a->code = 0;
}

const al_analysis al_an_names = {.name = "names",
                                 .cmd = &al_cmd_names,
                                 .groups = AL_GROUP_WHERE,
                                 .tmpl = &g,
                                 .size = sizeof g,
                                 .init = names_init,
                                 .check = names_check,
                                 .state_size = sizeof(names_state),
                                 .prepare = names_prepare,
                                 .compute = names_compute,
                                 .store = names_store,
                                 .doc = names_doc,
                                 .text = names_text,
                                 .release = names_release,
                                 .exp_data = AL_EXP_DATA_VAL,
                                 .results = AL_RESULTS_NAMES};

static int run_names(int argc, char **argv) { return al_drive_main(&al_an_names, argc, argv); }
