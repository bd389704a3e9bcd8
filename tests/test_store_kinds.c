/* test_store_kinds.c -- the store spells no analysis's run kind: a
 * reader that looks for an analysis's newest run binds the kind the
 * registry told the store (store.h, "run kinds"). A scan of src/store's
 * string literals for every registered kind, with the justified
 * exceptions listed; the scan shown to catch a planted kind; the kinds
 * set as the registry says; al_store_set_kind's refusals. */
#define _DEFAULT_SOURCE /* DT_REG */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "attnlab/registry.h"
#include "attnlab/store.h"
#include "attnlab/train_record.h"

/* Where a kind may be spelled: the file and the definition it is in. */
typedef struct {
    const char *file, *def;
} allowed;
static const allowed allow[] = {
    /* a released migration's views: their SQL is stored in every file the
     * migration made and cannot bind a parameter */
    {"store_schema.c", "schema_v7"},
    /* docs/sql.md's queries, copied into the notebook as text to be run
     * and edited by hand */
    {"store_report.c", "nb_queries"},
};
#define N_ALLOW ((int)(sizeof allow / sizeof allow[0]))

typedef struct {
    const char *const *kinds;
    int n_kinds;
    int hits; /* outside the allowed places */
    int allow_hits[N_ALLOW];
    char first[512]; /* the first hit, for the message */
} scan;

/* The definition a line starts at column 0: the identifier before its
 * first '(' or '[' ("int f(", "static const char q[] ="), or the name of
 * a #define. Other lines keep the current one. */
static void line_def(const char *line, char *def, size_t cap) {
    const char *p = line, *end;
    if (!(*p == '#' || *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return; /* indented: inside the current definition */
    if (!strncmp(p, "#define", 7)) {
        p += 7;
        while (*p == ' ') p++;
        end = p;
        while (*end == '_' || (*end >= 'a' && *end <= 'z') || (*end >= 'A' && *end <= 'Z') ||
               (*end >= '0' && *end <= '9'))
            end++;
    } else {
        if (*p == '#' || *p == '}') return;
        end = p + strcspn(p, "([\n");
        if (!*end || *end == '\n') return;
        while (end > p && end[-1] == ' ') end--;
        const char *b = end;
        while (b > p && (b[-1] == '_' || (b[-1] >= 'a' && b[-1] <= 'z') ||
                         (b[-1] >= 'A' && b[-1] <= 'Z') || (b[-1] >= '0' && b[-1] <= '9')))
            b--;
        p = b;
    }
    snprintf(def, cap, "%.*s", (int)(end - p), p);
}

/* One string literal's text s (escapes kept) at file:line inside def. */
static void check_literal(scan *S, const char *file, int line, const char *def, const char *s,
                          size_t n) {
    for (int k = 0; k < S->n_kinds; k++) {
        const char *kind = S->kinds[k];
        size_t kn = strlen(kind);
        int found = n == kn && !memcmp(s, kind, kn); /* "kind" */
        for (size_t i = 0; !found && i + kn + 2 <= n; i++) /* 'kind' inside SQL */
            found = s[i] == '\'' && !memcmp(s + i + 1, kind, kn) && s[i + 1 + kn] == '\'';
        if (!found) continue;
        int a = 0;
        while (a < N_ALLOW && (strcmp(allow[a].file, file) || strcmp(allow[a].def, def))) a++;
        if (a < N_ALLOW) {
            S->allow_hits[a]++;
        } else if (S->hits++ == 0) {
            snprintf(S->first, sizeof S->first, "%s:%d (in %s): '%s'", file, line, def, kind);
        }
    }
}

/* Every string literal of the C text t (comments and character
 * constants skipped). */
static void scan_text(scan *S, const char *file, const char *t) {
    char def[128] = "";
    int line = 1, bol = 1;
    for (const char *p = t; *p;) {
        if (bol) {
            line_def(p, def, sizeof def);
            bol = 0;
        }
        if (p[0] == '/' && p[1] == '*') {
            for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++) line += *p == '\n';
            p += *p ? 2 : 0;
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n') p++;
        } else if (*p == '"' || *p == '\'') {
            char q = *p++;
            const char *s = p;
            while (*p && *p != q && *p != '\n') p += p[0] == '\\' && p[1] ? 2 : 1;
            if (q == '"') check_literal(S, file, line, def, s, (size_t)(p - s));
            if (*p == q) p++;
        } else {
            if (*p == '\n') line++, bol = 1;
            p++;
        }
    }
}

/* Scan every .c and .h file of dir. */
static int scan_dir(scan *S, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *ent;
    int files = 0;
    while ((ent = readdir(d))) {
        size_t n = strlen(ent->d_name);
        if (n < 3 || ent->d_name[n - 2] != '.' ||
            (ent->d_name[n - 1] != 'c' && ent->d_name[n - 1] != 'h'))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        char *text = t_slurp(path);
        CHECKF(text != NULL, "cannot read %s", path);
        if (!text) continue;
        scan_text(S, ent->d_name, text);
        free(text);
        files++;
    }
    closedir(d);
    return files;
}

/* The kinds to look for: every analysis's name and every family's kind. */
static int all_kinds(const char **kinds, int cap) {
    int n = 0;
    for (const al_analysis *const *a = al_analyses; *a && n < cap; a++) kinds[n++] = (*a)->name;
    for (int r = AL_RESULTS_NONE + 1; r < AL_RESULTS_N && n < cap; r++)
        if (al_store_kind((al_store_results)r)) kinds[n++] = al_store_kind((al_store_results)r);
    return n;
}

TEST(store_kinds_no_analysis_name_in_store_sql) {
    const char *kinds[64];
    scan S = {.kinds = kinds, .n_kinds = all_kinds(kinds, 64)};
    CHECK(S.n_kinds > 12);
    int files = scan_dir(&S, "src/store");
    CHECKF(files >= 15, "scanned %d files of src/store", files);
    CHECKF(S.hits == 0,
           "%d run kinds spelled in src/store's strings outside the allowed places; "
           "the first: %s (bind al_store_kind_needed's kind instead)",
           S.hits, S.first);
    /* an exception that no longer spells a kind is taken off the list */
    for (int a = 0; a < N_ALLOW; a++)
        CHECKF(S.allow_hits[a] > 0, "allowed place %s (%s) spells no run kind now", allow[a].file,
               allow[a].def);
}

/* The scan on a planted file: the kind in SQL and as a C string is found,
 * in a comment or a character constant it is not, in an allowed place it
 * is let through. */
TEST(store_kinds_scan_catches_a_planted_kind) {
    const char *kinds[] = {"discover", "names"};
    scan S = {.kinds = kinds, .n_kinds = 2};
    scan_text(&S, "store_x.c",
              "/* 'discover' and \"names\" in a comment */\n"
              "static const char q[] =\n"
              "    \"SELECT max(run_id) FROM runs WHERE kind = 'discover' AND \"\n"
              "    \"status = 'done'\";\n"
              "int f(void) {\n"
              "    char c = '\"'; /* a quote in a character constant */\n"
              "    return g(\"names\", \"namesake\", \"'names_x'\");\n"
              "}\n");
    CHECKF(S.hits == 2, "hits %d", S.hits);
    CHECKF(strstr(S.first, "store_x.c:3 (in q): 'discover'") != NULL, "first: %s", S.first);
    scan A = {.kinds = kinds, .n_kinds = 2};
    scan_text(&A, "store_report.c",
              "static const al_sr_nb_query nb_queries[] = {\n"
              "    {\"t\", \"SELECT 1 FROM runs WHERE kind = 'names'\"},\n"
              "};\n");
    CHECK(A.hits == 0);
    CHECK(A.allow_hits[1] == 1);
}

TEST(store_kinds_set_from_the_registry) {
    /* the runner, as main.c, has called al_registry_setup */
    int claimed[AL_RESULTS_N] = {0};
    for (const al_analysis *const *a = al_analyses; *a; a++) {
        if ((*a)->results == AL_RESULTS_NONE) continue;
        CHECKF((*a)->results > AL_RESULTS_NONE && (*a)->results < AL_RESULTS_N, "%s", (*a)->name);
        const char *k = al_store_kind((*a)->results);
        CHECKF(k && !strcmp(k, (*a)->name), "%s: kind %s", (*a)->name, k ? k : "(none)");
        claimed[(*a)->results]++;
    }
    const char *t = al_store_kind(AL_RESULTS_TRAINING);
    CHECKF(t && !strcmp(t, AL_TRAIN_RUN_KIND), "training: %s", t ? t : "(none)");
    claimed[AL_RESULTS_TRAINING]++;
    /* every family a reader uses has its one kind */
    for (int r = AL_RESULTS_NONE + 1; r < AL_RESULTS_N; r++)
        CHECKF(claimed[r] == 1, "family %d claimed %d times", r, claimed[r]);
    CHECK(al_store_kind(AL_RESULTS_NONE) == NULL);
    CHECK(al_store_kind(AL_RESULTS_N) == NULL);
    al_err e;
    CHECK(al_registry_setup(&e) == 0); /* again: nothing changes */
    CHECK(al_store_kind(AL_RESULTS_TRAINING) == t);
}

TEST(store_kinds_refusals) {
    al_err e;
    const char *scores = al_store_kind(AL_RESULTS_SCORES);
    CHECK(scores != NULL);
    CHECK(al_store_set_kind(AL_RESULTS_NONE, "x", &e) == -1);
    CHECK(strstr(e.msg, "no result family 0") != NULL);
    CHECK(al_store_set_kind(AL_RESULTS_N, "x", &e) == -1);
    CHECK(al_store_set_kind(AL_RESULTS_SCORES, NULL, &e) == -1);
    CHECK(al_store_set_kind(AL_RESULTS_SCORES, "", &e) == -1);
    CHECK(strstr(e.msg, "no kind") != NULL);
    /* a family keeps its kind: another is refused, naming both */
    CHECK(al_store_set_kind(AL_RESULTS_SCORES, "other", &e) == -1);
    CHECKF(strstr(e.msg, scores) && strstr(e.msg, "'other'"), "%s", e.msg);
    CHECK(al_store_kind(AL_RESULTS_SCORES) == scores);
    CHECK(al_store_set_kind(AL_RESULTS_SCORES, "scores", &e) == 0); /* the same kind again */
    CHECK(strcmp(al_store_kind(AL_RESULTS_SCORES), "scores") == 0);
}
