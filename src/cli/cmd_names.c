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
#include "attnlab/namecopy.h"
#include "attnlab/names_text.h"
#include "attnlab/store.h"

typedef struct names_args {
    al_an_where w;
    int n;
    const char *name;
    uint64_t seed;
} names_args;

static names_args g = {{NULL, NULL, NULL, NULL, 0}, 200, NULL, 1};

static al_flag flags[] = {
    {"model", AL_STR, &g.w.model, "DIR", "model directory (from attnlab train)", 1, 0},
    {"db", AL_STR, &g.w.db, "FILE", "SQLite database to add the results to (created if missing)", 1, 0},
    {"data", AL_STR, &g.w.data, "VAL.bin",
     "held-out tokens (X.val.bin of attnlab encode: documents after <|endoftext|>)", 1, 0},
    {"stories", AL_INT, &g.n, "N", "stories (the first N usable ones of --data)", 0, 0},
    {"name", AL_STR, &g.name, "NAME",
     "insert this name in every story (default: an invented name per story)", 0, 0},
    {"seed", AL_U64, &g.seed, "S", "seed for the invented names", 0, 0},
    {"threads", AL_INT, &g.w.threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

static int run_names(int argc, char **argv);
al_command al_cmd_names = {
    "names",
    "copying an invented name: p(each piece) at its 1st and 2nd appearance in held-out stories",
    "--model DIR --db FILE --data VAL.bin [--stories 200] [--name NAME] [--seed 1]",
    "The seed notes' table on real text. Each held-out story (a document of\n"
    "--data) gets a name, \" Name\", inserted before a word at 1/5 and again at\n"
    "3/5 of the story (lower-cased in a lower-case story); names are invented\n"
    "from the synthetic corpus's syllables unless --name is given, and must be\n"
    "2..8 tokens. Printed and stored per piece: the mean probability the model\n"
    "gives the piece at the name's first appearance (nothing to copy) and at\n"
    "the second (a copy). An induction head raises the pieces after the first\n"
    "at the second appearance; a 1-layer model can copy only with skip-trigrams.\n"
    "model_scores of run kind \"names\": names_first_pJ, names_second_pJ\n"
    "(J = 1..), names_first_rest, names_second_rest (pieces 2..), names_stories.",
    flags,
    run_names,
};

static int names_do(void *args, const al_flag *fl, int64_t *run_id, al_err *e) {
    names_args *a = args;
    if (al_threads_check(a->w.threads, e)) return 2;
    if (a->n < 1 || a->n > 100000) {
        al_errf(e, "--stories must be in [1, 100000] (got %d)", a->n);
        return 2;
    }
    if (!a->w.data) {
        al_errf(e, "--data is required (the held-out stories)");
        return 2;
    }
    al_set_threads(a->w.threads);
    al_behave b;
    al_tokens d = {0};
    al_name_stories s = {0};
    al_namecopy_result r;
    int rc = 1;
    if (al_behave_load(&b, a->w.model, a->w.mask, a->w.db, e)) return 1;
    if (!b.tok) {
        al_errf(e, "%s has no tokenizer.json (names are text)", a->w.model);
        goto out;
    }
    if (al_tokens_load(a->w.data, &d, e) ||
        al_names_in_text(b.tok, &d, a->n, a->name, a->seed, b.m.cfg.n_ctx, &s, e) ||
        al_behave_begin(&b, "names", fl, e))
        goto out;
    if (al_namecopy_run(&b.m, &s, &r, e) || al_store_tx_begin(b.st, e)) {
        al_behave_fail(&b, e);
        goto out;
    }
    for (int j = 0; j < r.max_k; j++) {
        char m1[40], m2[40];
        snprintf(m1, sizeof m1, "names_first_p%d", j + 1);
        snprintf(m2, sizeof m2, "names_second_p%d", j + 1);
        if (al_store_put_model_score(b.st, b.run_id, b.model_id, m1, r.p_first[j], e) ||
            al_store_put_model_score(b.st, b.run_id, b.model_id, m2, r.p_second[j], e)) {
            al_behave_fail(&b, e);
            goto out;
        }
    }
    if (al_store_put_model_score(b.st, b.run_id, b.model_id, "names_first_rest", r.rest_first, e) ||
        al_store_put_model_score(b.st, b.run_id, b.model_id, "names_second_rest", r.rest_second, e) ||
        al_store_put_model_score(b.st, b.run_id, b.model_id, "names_stories", r.n, e) ||
        al_store_run_finish(b.st, b.run_id, e)) {
        al_behave_fail(&b, e);
        goto out;
    }
    printf("model %s (%d layer%s) -> run %lld of %s\n", a->w.model, b.m.cfg.n_layers,
           b.m.cfg.n_layers == 1 ? "" : "s", (long long)b.run_id, a->w.db);
    printf("%d held-out stories of %s, name %s (e.g. \"%s\" =", r.n, a->w.data,
           a->name ? "given" : "invented per story", s.s[0].name);
    for (int j = 0; j < s.s[0].k; j++) {
        char buf[64];
        al_tok_display(b.tok, s.s[0].piece[j], buf, sizeof buf);
        printf(" %s", buf);
    }
    printf(")\n%-7s %8s %12s %12s %8s\n", "piece", "stories", "p(1st)", "p(2nd)", "2nd/1st");
    for (int j = 0; j < r.max_k; j++)
        printf("%-7d %8d %12.4f %12.4f %8.1f\n", j + 1, r.count[j], r.p_first[j], r.p_second[j],
               r.p_first[j] > 0 ? r.p_second[j] / r.p_first[j] : 0);
    printf("%-7s %8s %12.4f %12.4f %8.1f\n", "2..", "", r.rest_first, r.rest_second,
           r.rest_first > 0 ? r.rest_second / r.rest_first : 0);
    if (run_id) *run_id = b.run_id;
    rc = 0;
out:
    al_name_stories_free(&s);
    al_tokens_free(&d);
    al_behave_close(&b);
    return rc;
}

static void names_init(void *args) {
    names_args *a = args;
    memset(&a->w, 0, sizeof a->w);
    a->n = 200, a->name = NULL, a->seed = 1;
}

const al_analysis_cmd al_an_names = {"names", &al_cmd_names, &g, sizeof g, names_init, names_do};

static int run_names(int argc, char **argv) { return al_an_main(&al_an_names, argc, argv); }
