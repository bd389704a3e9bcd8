/* test_readme.c -- the README's commands run as written: every ```sh
 * block of README.md (the quick start) runs under `sh -e` against a small
 * trained model, with the quick start's paths replaced by this test's, so the
 * front page cannot drift from the flags the commands take. Indented
 * blocks (set-up, training recipes that take minutes) are not run. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "test.h"

/* s with every `from` replaced by `to` (malloc'd). */
static char *replace_all(const char *s, const char *from, const char *to) {
    size_t nf = strlen(from), nt = strlen(to), n = 0;
    for (const char *p = strstr(s, from); p; p = strstr(p + nf, from)) n++;
    char *out = malloc(strlen(s) + n * (nt > nf ? nt - nf : 0) + 1), *o = out;
    for (const char *p = s;;) {
        const char *q = strstr(p, from);
        if (!q) {
            strcpy(o, p);
            break;
        }
        memcpy(o, p, (size_t)(q - p)), o += q - p;
        memcpy(o, to, nt), o += nt;
        p = q + nf;
    }
    return out;
}

TEST(readme_commands_run) {
    char *readme = t_slurp("README.md");
    if (!readme) t_skip("README.md not found (run from the repository root)");
    if (!readme) return;
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 2, 2); /* the corpus, tokenizer and token files */
    /* n_ctx 128: the commands' default induction task is 2·50 + 1 tokens */
    CHECK(
        t_sh("%s train --data %s/s.train.bin --val %s/s.val.bin --tokenizer %s/tok.json --out "
             "%s/quickstart/models/2l --n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 128 "
             "--batch 2 --steps 5 --eval-every 0 --db %s/quickstart/results.db > /dev/null 2>&1",
             t_bin(), dir, dir, dir, dir, dir) == 0);
    CHECK(t_sh("mkdir -p %s/quickstart/data && cp %s/s.val.bin %s/quickstart/data/s.val.bin", dir,
               dir, dir) == 0);
    int n = 0;
    for (char *p = strstr(readme, "```sh\n"); p; p = strstr(p, "```sh\n")) {
        p += 6;
        char *end = strstr(p, "\n```");
        if (!end) break;
        *end = 0;
        char root[1100], bin[1100];
        snprintf(root, sizeof root, "%s/", dir);
        snprintf(bin, sizeof bin, "%s ", t_bin());
        char *a = replace_all(p, "notebooks-out/", root);
        char *b = replace_all(a, "\nattnlab ", "\n__AL__ ");
        char *c = replace_all(b, "__AL__ ", bin);
        char *d = replace_all(c, "\x01", ""); /* a copy */
        if (!strncmp(c, "attnlab ", 8)) {
            free(d);
            d = replace_all(c, "attnlab ", bin);
        }
        FILE *f = fopen(t_path("block.sh"), "w");
        CHECK(f != NULL);
        if (f) {
            fprintf(f, "set -e\n%s\n", d);
            fclose(f);
        }
        int rc = t_sh("sh %s > %s 2>&1", t_path("block.sh"), t_path("block.out"));
        char *out = t_slurp(t_path("block.out"));
        CHECKF(rc == 0, "README sh block %d failed (%d):\n%s\n--- output:\n%s", n + 1, rc, d,
               out ? out : "");
        free(out), free(a), free(b), free(c), free(d);
        n++;
        p = end + 4;
    }
    CHECK(n >= 1);
    free(readme);
}

/* `make quickstart` (scripts/quickstart.sh) as written, on a tiny model
 * (QUICK_STORIES, QUICK_TRAIN shrink it; the recipe itself is measured in
 * docs/findings.md): every stage runs in the README's order, each stores
 * its run, the circuit file and the report are written, and the closing
 * line gives the time. */
TEST(readme_quickstart_script) {
    if (access("scripts/quickstart.sh", R_OK) != 0)
        t_skip("scripts/quickstart.sh not found (run from the repository root)");
    char out[1100];
    snprintf(out, sizeof out, "%s/qs", t_tmpdir());
    int rc = t_sh("QUICK_OUT=%s QUICK_STORIES=300 QUICK_THREADS=2 ATTNLAB_BIN=%s "
                  "QUICK_TRAIN='--steps 6 --d-model 32 --n-heads 4 --d-head 8 --batch 2 "
                  "--eval-every 3' sh scripts/quickstart.sh > %s 2>&1",
                  out, t_bin(), t_path("qs.out"));
    char *log = t_slurp(t_path("qs.out"));
    CHECKF(rc == 0, "quickstart.sh exit %d:\n%s", rc, log ? log : "");
    const char *order[] = {"== data:",   "== train:",
                           "== scores:", "== patch:",
                           "== paths:",  "== discover:",
                           "== report:", "quick start: report written"};
    const char *at = log;
    for (size_t i = 0; at && i < sizeof order / sizeof *order; i++) {
        at = strstr(at, order[i]);
        CHECKF(at != NULL, "'%s' missing or out of order", order[i]);
    }
    char db[1200];
    snprintf(db, sizeof db, "%s/results.db", out);
    CHECK_SQL(db,
              "SELECT group_concat(kind, ',') FROM (SELECT kind FROM runs WHERE status = 'done' "
              "ORDER BY run_id)",
              "train,scores,patch,paths,discover");
    CHECK(t_sh("test -s %s/report/index.html && test -s %s/circuit-induction-acdc.json", out,
               out) == 0);
    free(log);
}
