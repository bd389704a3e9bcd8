/* test_corpus.c -- corpora as documents (corpus.h, corpus_src.h):
 * splitting, cleaning and exact duplicates, the writer's round trip, the
 * validation split by documents, byte-share mixtures, the KJV as `bible`
 * prints it and a directory tree, each on hand-built input whose answer
 * is counted by hand; then `data code`, `data prose`, `data mix` and
 * `encode --val-pick` end to end on small files (no installed package
 * needed). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include "attnlab/corpus.h"
#include "attnlab/corpus_src.h"
#include "attnlab/data.h"
#include "test.h"

static al_doc D(const char *s) { return (al_doc){(const unsigned char *)s, strlen(s)}; }

static int doc_is(al_doc d, const char *s) { return d.n == strlen(s) && !memcmp(d.p, s, d.n); }

/* ------------------------------------------------------------ pure */

/* The four modes on one text (as `encode --docs` cut it). */
TEST(corpus_split_modes) {
    const char *t = "a b\r\nc\n\n\n  d\ne\n<|endoftext|> f \n";
    al_doc *d;
    size_t n;
    al_err e;
    CHECK_OK(al_corpus_split((const unsigned char *)t, strlen(t), AL_DOCS_BLANK, &d, &n, &e), &e);
    CHECK(n == 2 && doc_is(d[0], "a b\r\nc") && doc_is(d[1], "  d\ne\n<|endoftext|> f "));
    free(d);
    CHECK_OK(al_corpus_split((const unsigned char *)t, strlen(t), AL_DOCS_LINE, &d, &n, &e), &e);
    CHECK(n == 5 && doc_is(d[0], "a b") && doc_is(d[1], "c") && doc_is(d[2], "  d") &&
          doc_is(d[4], "<|endoftext|> f "));
    free(d);
    CHECK_OK(al_corpus_split((const unsigned char *)t, strlen(t), AL_DOCS_EOT, &d, &n, &e), &e);
    CHECK(n == 2 && doc_is(d[0], "a b\r\nc\n\n\n  d\ne") && doc_is(d[1], "f"));
    free(d);
    const char *s = "One.\n\nTwo.\nNext story.\n\nIts end.\n";
    CHECK_OK(al_corpus_split((const unsigned char *)s, strlen(s), AL_DOCS_STORY, &d, &n, &e), &e);
    CHECK(n == 2 && doc_is(d[0], "One.\n\nTwo.") && doc_is(d[1], "Next story.\n\nIts end."));
    free(d);
    al_docs_mode m;
    CHECK(al_docs_mode_parse("story", &m, &e) == 0 && m == AL_DOCS_STORY);
    CHECK(al_docs_mode_parse("para", &m, &e) == -1 && strstr(e.msg, "blank, line, eot or story"));
}

/* Duplicates by normalised text: line ends, blanks before them and
 * around the document do not count; indentation and case do. */
TEST(corpus_clean_duplicates) {
    al_doc d[9] = {D("def f():\n    return 1\n"),
                   D("\n\ndef f():  \r\n    return 1"),
                   D("def f():\n  return 1\n"),
                   D("   \n\t"),
                   D("x <|endoftext|> y"),
                   D("DEF f():\n    return 1"),
                   D("def f():\n    return 1 \t "),
                   D("a\tb"),
                   D("a b")};
    unsigned char keep[9];
    al_corpus_stats st;
    al_err e;
    CHECK(al_corpus_hash(d[0]) == al_corpus_hash(d[1]) && al_corpus_same(d[0], d[6]));
    CHECK(!al_corpus_same(d[0], d[2]) && !al_corpus_same(d[7], d[8]));
    CHECK_OK(al_corpus_clean(d, 9, keep, &st, &e), &e);
    const unsigned char want[9] = {1, 0, 1, 0, 0, 1, 0, 1, 1};
    CHECK(!memcmp(keep, want, 9));
    CHECK(st.docs_in == 9 && st.empty == 1 && st.separator == 1 && st.duplicates == 2 &&
          st.docs == 5);
    /* trimmed in place: the kept bytes are the documents without their ends */
    CHECK(doc_is(d[0], "def f():\n    return 1") && doc_is(d[1], "def f():  \r\n    return 1"));
    CHECK(st.bytes == d[0].n + d[2].n + d[5].n + d[7].n + d[8].n);
    /* a long run of blanks inside a line is kept, at a line end dropped */
    char *a = malloc(200001), *b = malloc(200001);
    memset(a, ' ', 200000), memset(b, ' ', 200000);
    a[0] = b[0] = 'x', a[199999] = 'y', b[199999] = '\n';
    a[200000] = b[200000] = 0;
    CHECK(!al_corpus_same(D(a), D("x y")) && al_corpus_same(D(b), D("x")));
    free(a), free(b);
}

/* Written and split again (--docs eot): the same documents. */
/* Words and distinct words: whitespace-separated, byte for byte, over the
 * kept documents only; enough distinct words to grow the table twice. */
TEST(corpus_words) {
    al_doc d[3] = {{(const unsigned char *)"a b\ta\n\nc  ", 10},
                   {(const unsigned char *)"skipped words", 13},
                   {(const unsigned char *)" c A", 4}};
    unsigned char keep[3] = {1, 0, 1};
    size_t w, u;
    al_err e;
    CHECK_OK(al_corpus_words(d, 3, keep, &w, &u, &e), &e);
    CHECKF(w == 6 && u == 4, "%zu words, %zu distinct", w, u); /* a b a c c A */
    CHECK_OK(al_corpus_words(d, 3, NULL, &w, &u, &e), &e);
    CHECK(w == 8 && u == 6);
    enum { NW = 200000 };
    char *big = malloc((size_t)NW * 8);
    size_t n = 0;
    for (int i = 0; i < NW; i++) n += (size_t)sprintf(big + n, "w%d ", i % 150000);
    al_doc b = {(const unsigned char *)big, n};
    CHECK_OK(al_corpus_words(&b, 1, NULL, &w, &u, &e), &e);
    CHECK(w == NW && u == 150000);
    free(big);
}

TEST(corpus_write_round_trip) {
    al_doc d[4] = {D("first\n\nwith a blank line"), D(" "), D("  indented code\n  more"),
                   D("last")};
    unsigned char keep[4];
    al_corpus_stats st;
    al_err e;
    CHECK_OK(al_corpus_clean(d, 4, keep, &st, &e), &e);
    al_buf b = AL_BUF_INIT;
    size_t n = al_corpus_write(&b, d, 4, keep);
    const char *want = "first\n\nwith a blank line\n<|endoftext|>\nindented code\n  more\n"
                       "<|endoftext|>\nlast\n";
    CHECKF(b.p && !strcmp(b.p, want) && n == strlen(want), "%s", b.p ? b.p : "");
    al_doc *back;
    size_t nb;
    CHECK_OK(al_corpus_split((const unsigned char *)b.p, b.n, AL_DOCS_EOT, &back, &nb, &e), &e);
    CHECK(nb == 3 && doc_is(back[0], "first\n\nwith a blank line") &&
          doc_is(back[1], "indented code\n  more") && doc_is(back[2], "last"));
    free(back);
    al_buf_free(&b);
}

/* last: the old split exactly; hash: a document's side does not depend
 * on the corpus around it, about frac of them held out, never all. */
TEST(corpus_val_split) {
    enum { N = 4000 };
    static char txt[N][16];
    static al_doc d[N], sub[N];
    static unsigned char v[N], w[N];
    for (int i = 0; i < N; i++) {
        snprintf(txt[i], sizeof txt[i], "doc %d", i);
        d[i] = D(txt[i]);
    }
    size_t k;
    al_err e;
    CHECK_OK(al_corpus_val_split(d, 10, 0.25, AL_VAL_LAST, v, &k, &e), &e);
    CHECK(k == 3 && !v[6] && v[7] && v[8] && v[9]); /* llround(2.5) = 3 */
    CHECK_OK(al_corpus_val_split(d, 3, 0.01, AL_VAL_LAST, v, &k, &e), &e);
    CHECK(k == 1 && v[2]);
    CHECK_OK(al_corpus_val_split(d, N, 0.1, AL_VAL_HASH, v, &k, &e), &e);
    CHECKF(k > 320 && k < 480, "%zu of %d held out", k, N);
    /* every other document, backwards: each keeps its side */
    int m = 0;
    for (int i = N - 1; i >= 0; i -= 2) sub[m++] = d[i];
    CHECK_OK(al_corpus_val_split(sub, (size_t)m, 0.1, AL_VAL_HASH, w, NULL, &e), &e);
    int moved = 0;
    for (int j = 0; j < m; j++) moved += w[j] != v[N - 1 - 2 * j];
    CHECK(moved == 0);
    /* normalised text decides: a duplicate with CRLF lands on the same side */
    al_doc pair[2] = {D("line one\nline two"), D("line one\r\nline two  ")};
    unsigned char pv[2];
    for (double f = 0.05; f < 1; f += 0.1) {
        CHECK_OK(al_corpus_val_split(pair, 2, f, AL_VAL_HASH, pv, &k, &e), &e);
        CHECK(k == 1); /* same hash: the tie is broken to keep one on each side */
    }
    /* refusals */
    CHECK(al_corpus_val_split(d, 1, 0.1, AL_VAL_HASH, v, &k, &e) == -1 &&
          strstr(e.msg, "at least 2"));
    CHECK(al_corpus_val_split(d, 5, 1.0, AL_VAL_LAST, v, &k, &e) == -1);
    al_val_pick p;
    CHECK(al_val_pick_parse("hash", &p, &e) == 0 && p == AL_VAL_HASH);
    CHECK(al_val_pick_parse("random", &p, &e) == -1 && strstr(e.msg, "last or hash"));
}

/* Byte shares met to within one document, no document twice (also across
 * inputs), a pure function of the seed, refusals naming the input. */
TEST(corpus_mix_shares) {
    enum { NA = 300, NB = 100 };
    static char ta[NA][48], tb[NB][64];
    static al_doc a[NA], b[NB];
    al_rng r;
    al_rng_seed(&r, 3);
    for (int i = 0; i < NA; i++) {
        snprintf(ta[i], sizeof ta[i], "code %d %.*s", i, (int)al_rng_below(&r, 30),
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        a[i] = D(ta[i]);
    }
    for (int i = 0; i < NB; i++) {
        snprintf(tb[i], sizeof tb[i], "prose %d %.*s", i, (int)al_rng_below(&r, 40),
                 "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy");
        b[i] = D(tb[i]);
    }
    snprintf(tb[7], sizeof tb[7], "code 5 %.*s", (int)strlen(ta[5]) - 7, ta[5] + 7); /* = a[5] */
    b[7] = D(tb[7]);
    size_t bytes_a = 0, bytes_b = 0, max_a = 0, max_b = 0;
    for (int i = 0; i < NA; i++) bytes_a += a[i].n, max_a = a[i].n > max_a ? a[i].n : max_a;
    for (int i = 0; i < NB; i++) bytes_b += b[i].n, max_b = b[i].n > max_b ? b[i].n : max_b;
    al_mix_in in[2] = {{a, NA, 0.75}, {b, NB, 0.25}};
    al_mix_pick *p, *q;
    size_t n, nq, taken[2], taken2[2], dups;
    al_err e;
    CHECK_OK(al_corpus_mix(in, 2, 4000, 9, &p, &n, taken, &dups, &e), &e);
    CHECK(taken[0] >= 3000 && taken[0] < 3000 + max_a && taken[1] >= 1000 &&
          taken[1] < 1000 + max_b);
    size_t sum[2] = {0, 0};
    static unsigned char used_a[NA], used_b[NB];
    int twice = 0, from_b_first = -1;
    for (size_t k = 0; k < n; k++) {
        sum[p[k].in] += p[k].in ? b[p[k].doc].n : a[p[k].doc].n;
        unsigned char *u = p[k].in ? &used_b[p[k].doc] : &used_a[p[k].doc];
        twice += *u;
        *u = 1;
        if (p[k].in == 1 && from_b_first < 0) from_b_first = (int)k;
    }
    CHECK(sum[0] == taken[0] && sum[1] == taken[1] && twice == 0);
    CHECK(from_b_first >= 0 && from_b_first < (int)n / 2); /* shuffled, not in blocks */
    CHECK(!(used_a[5] && used_b[7])); /* the shared document at most once */
    CHECK_OK(al_corpus_mix(in, 2, 4000, 9, &q, &nq, taken2, NULL, &e), &e);
    CHECK(nq == n && !memcmp(p, q, n * sizeof *p) && !memcmp(taken, taken2, sizeof taken));
    free(q);
    CHECK_OK(al_corpus_mix(in, 2, 4000, 10, &q, &nq, taken2, NULL, &e), &e);
    CHECK(nq != n || memcmp(p, q, n * sizeof *p) != 0);
    free(q), free(p);
    /* bytes 0: as much as the scarcer input allows, min(bytes_a / 0.75, bytes_b / 0.25) */
    CHECK_OK(al_corpus_mix(in, 2, 0, 9, &p, &n, taken, &dups, &e), &e);
    double ta_ = (double)bytes_a / 0.75, tb_ = (double)bytes_b / 0.25;
    size_t all = (size_t)(ta_ < tb_ ? ta_ : tb_);
    CHECKF((double)taken[0] >= 0.75 * (double)all &&
               (double)taken[0] < 0.75 * (double)all + (double)max_a &&
               (double)taken[1] >= 0.25 * (double)all &&
               (double)taken[1] < 0.25 * (double)all + (double)max_b,
           "taken %zu + %zu of %zu", taken[0], taken[1], all);
    free(p);
    /* refusals */
    CHECK(al_corpus_mix(in, 2, 100000, 9, &p, &n, taken, NULL, &e) == -1 &&
          strstr(e.msg, "input 1 has") && p == NULL);
    al_mix_in bad[2] = {{a, NA, 0.7}, {b, NB, 0.2}};
    CHECK(al_corpus_mix(bad, 2, 100, 9, &p, &n, taken, NULL, &e) == -1 && strstr(e.msg, "sum to"));
    al_mix_in empty[1] = {{a, 0, 1.0}};
    CHECK(al_corpus_mix(empty, 1, 100, 9, &p, &n, taken, NULL, &e) == -1 &&
          strstr(e.msg, "no documents"));
}

/* `bible -l 100000` prints chapters like this; a narrower run wraps a
 * verse onto a line of its own. */
static const char KJV[] =
    "\nGenesis 1\n\n  1 In the beginning God created the heaven and the earth.\n"
    "  2 And the earth was without form, and void; and darkness was upon the face of\n"
    "the deep.\n\nGenesis 2\n\n  1 Thus the heavens were finished.\n"
    "\n1 Samuel 3\n\n  10 And the LORD came, and stood.\n  100 Verse of 3 digits.\n";

TEST(corpus_kjv_parse) {
    al_err e;
    const al_kjv_unit units[3] = {AL_KJV_CHAPTER, AL_KJV_BOOK, AL_KJV_VERSE};
    const char *want[3][4] =
        {{"Genesis 1\n\n1 In the beginning God created the heaven and the earth.\n2 And the earth "
          "was without form, and void; and darkness was upon the face of the deep.",
          "Genesis 2\n\n1 Thus the heavens were finished.",
          "1 Samuel 3\n\n10 And the LORD came, and stood.\n100 Verse of 3 digits.", NULL},
         {"Genesis 1\n\n1 In the beginning God created the heaven and the earth.\n2 And the earth "
          "was without form, and void; and darkness was upon the face of the deep.\n\nGenesis 2\n\n"
          "1 Thus the heavens were finished.",
          "1 Samuel 3\n\n10 And the LORD came, and stood.\n100 Verse of 3 digits.", NULL, NULL},
         {"In the beginning God created the heaven and the earth.",
          "And the earth was without form, and void; and darkness was upon the face of the deep.",
          "Thus the heavens were finished.", "And the LORD came, and stood."}};
    const size_t n_want[3] = {3, 2, 5};
    for (int u = 0; u < 3; u++) {
        al_docset ds = AL_DOCSET_INIT;
        al_kjv_counts c;
        al_doc *d;
        size_t n;
        CHECK_OK(al_kjv_parse((const unsigned char *)KJV, strlen(KJV), units[u], &ds, &c, &e), &e);
        CHECK(c.books == 2 && c.chapters == 3 && c.verses == 5);
        CHECK_OK(al_docset_docs(&ds, &d, &n, &e), &e);
        CHECKF(n == n_want[u], "unit %d: %zu documents", u, n);
        for (size_t i = 0; i < 4 && i < n && want[u][i]; i++)
            CHECKF(doc_is(d[i], want[u][i]), "unit %d doc %zu: [%.*s]", u, i, (int)d[i].n,
                   (const char *)d[i].p);
        free(d);
        al_docset_free(&ds);
    }
    /* a stray line, and text that is no bible output at all */
    al_docset ds = AL_DOCSET_INIT;
    al_kjv_counts c;
    const char *bad = "\nGenesis 1\n\nno verse here\n";
    CHECK(al_kjv_parse((const unsigned char *)bad, strlen(bad), AL_KJV_CHAPTER, &ds, &c, &e) ==
              -1 &&
          strstr(e.msg, "line 4"));
    al_docset_free(&ds);
    CHECK(al_kjv_parse((const unsigned char *)"\n\n", 2, AL_KJV_CHAPTER, &ds, &c, &e) == -1 &&
          strstr(e.msg, "no chapter heading"));
    al_docset_free(&ds);
}

static void put(const char *rel, const char *text) {
    char *p = strdup(t_path(rel)), *slash = strrchr(p, '/');
    *slash = 0;
    CHECK(t_sh("mkdir -p '%s'", p) == 0);
    *slash = '/';
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (f) fwrite(text, 1, strlen(text), f), fclose(f);
    free(p);
}

/* A tree: sorted by path, skipped directories and suffixes, a link to a
 * file read, a link to a directory not followed, a file with a NUL byte
 * skipped and counted. */
TEST(corpus_tree_read) {
    put("t/b.py", "b = 2\n");
    put("t/a/z.py", "z = 1\n");
    put("t/a/x_test.py", "test\n");
    put("t/test/y.py", "skipped\n");
    put("t/c.txt", "not .py\n");
    put("other/o.py", "linked\n");
    CHECK(t_sh("ln -s %s %s && ln -s %s %s && printf 'a\\0b.py' > %s", t_path("other/o.py"),
               t_path("t/l.py"), t_path("other"), t_path("t/d"), t_path("t/bin.py")) == 0);
    static const char *const skip[] = {"test", NULL}, *const suf[] = {"_test.py", NULL};
    al_tree_rule rule = {".py", skip, suf};
    al_docset ds = AL_DOCSET_INIT;
    al_tree_files f;
    al_err e;
    CHECK_OK(al_tree_read(t_path("t"), &rule, &ds, &f, &e), &e);
    al_doc *d;
    size_t n;
    CHECK_OK(al_docset_docs(&ds, &d, &n, &e), &e);
    /* a/z.py, b.py, bin.py (skipped: NUL), l.py */
    CHECKF(n == 3 && f.n == 3 && f.binary == 1, "%zu docs, %zu files, %zu binary", n, f.n,
           f.binary);
    if (n == 3) {
        CHECK(doc_is(d[0], "z = 1\n") && doc_is(d[1], "b = 2\n") && doc_is(d[2], "linked\n"));
        CHECK(strstr(f.path[0], "/t/a/z.py") && strstr(f.path[2], "/t/l.py"));
    }
    free(d);
    al_tree_files_free(&f);
    al_docset_free(&ds);
    CHECK(al_tree_read(t_path("nope"), &rule, &ds, &f, &e) == -1 && strstr(e.msg, "cannot read"));
    rule.ext = ".rs";
    CHECK(al_tree_read(t_path("t"), &rule, &ds, &f, &e) == -1 && strstr(e.msg, "no .rs files"));
    al_docset_free(&ds);
}

/* ------------------------------------------------------------- CLI */

static cJSON *sidecar(const char *path) {
    char *s = t_slurp(path);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

static double num(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* data code --dir, data prose (kjv --from, file), data mix and encode on
 * the results: the format, the sidecar's counts and hash, determinism,
 * and the refusals (one line, no file written). */
TEST(corpus_cli_end_to_end) {
    put("lib/pkg/mod.py", "def f():\n    return 1\n");
    put("lib/pkg/dup.py", "def f():\r\n    return 1   \n");
    put("lib/other.py", "import os\n\nprint(os.sep)\n");
    put("lib/test/t.py", "assert 0\n");
    put("lib/__init__.py", "\n");
    char out[1024], js[1100];
    snprintf(out, sizeof out, "%s", t_path("code.txt"));
    snprintf(js, sizeof js, "%s.json", out);
    CHECK(t_sh("%s data code --source pystdlib --dir %s --out %s > %s 2>&1", t_bin(), t_path("lib"),
               out, t_path("log")) == 0);
    char *txt = t_slurp(out), *log = t_slurp(t_path("log"));
    /* sorted paths: other.py, pkg/dup.py (pkg/mod.py its duplicate) */
    CHECKF(txt && !strcmp(txt,
                          "import os\n\nprint(os.sep)\n<|endoftext|>\ndef f():\r\n    return 1\n"),
           "%s", txt ? txt : "");
    CHECKF(log && strstr(log, "2 documents") && strstr(log, "removed 1 duplicates, 1 empty"), "%s",
           log ? log : "");
    free(txt), free(log);
    cJSON *j = sidecar(js);
    CHECK(j && num(j, "documents") == 2 && num(j, "duplicates_removed") == 1 &&
          num(j, "files") == 4 && num(j, "empty_removed") == 1);
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(j, "sha256");
    char want[65];
    al_err e;
    CHECK_OK(al_sha256_file(out, want, &e), &e);
    CHECK(cJSON_IsString(sha) && !strcmp(sha->valuestring, want));
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "licence")) &&
          cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "packages")));
    /* import os print(os.sep) def f(): return 1: \r is whitespace */
    CHECK(num(j, "words") == 7 && num(j, "unique_words") == 7);
    cJSON_Delete(j);
    /* kjv from a saved bible printout; a file by blank lines */
    put("kjv.out", KJV);
    CHECK(t_sh("%s data prose --source kjv --from %s --out %s > /dev/null 2>&1", t_bin(),
               t_path("kjv.out"), t_path("kjv.txt")) == 0);
    snprintf(js, sizeof js, "%s.json", t_path("kjv.txt"));
    j = sidecar(js);
    CHECK(j && num(j, "documents") == 3 && num(j, "chapters") == 3 && num(j, "verses") == 5);
    cJSON_Delete(j);
    put("p.txt", "Para one.\n\nPara two.\n\nPara one.\n\n\n");
    CHECK(t_sh("%s data prose --source file --in %s --out %s > /dev/null 2>&1", t_bin(),
               t_path("p.txt"), t_path("p2.txt")) == 0);
    txt = t_slurp(t_path("p2.txt"));
    CHECKF(txt && !strcmp(txt, "Para one.\n<|endoftext|>\nPara two.\n"), "%s", txt ? txt : "");
    free(txt);
    /* its words: "Para" twice, "one.", "two." */
    snprintf(js, sizeof js, "%s.json", t_path("p2.txt"));
    j = sidecar(js);
    CHECK(j && num(j, "words") == 4 && num(j, "unique_words") == 3);
    cJSON_Delete(j);
    /* a mixture: deterministic, the inputs' provenance inside */
    for (int k = 0; k < 2; k++)
        CHECK(t_sh("%s data mix --in %s:0.5 --in=%s:0.5 --out %s --seed 4 > /dev/null 2>&1",
                   t_bin(), out, t_path("kjv.txt"), t_path(k ? "m2.txt" : "m1.txt")) == 0);
    CHECK(t_sh("cmp -s %s %s", t_path("m1.txt"), t_path("m2.txt")) == 0);
    snprintf(js, sizeof js, "%s.json", t_path("m1.txt"));
    j = sidecar(js);
    const cJSON *ins = j ? cJSON_GetObjectItemCaseSensitive(j, "inputs") : NULL;
    CHECK(
        cJSON_GetArraySize(ins) == 2 &&
        cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ins, 1), "provenance")));
    cJSON_Delete(j);
    /* encode: --docs eot gives the documents back; --val-pick hash holds
     * out whole documents; --val-pick last is the default, bit for bit */
    CHECK(t_sh("%s tokenizer train --in %s --vocab 300 --out %s > /dev/null 2>&1", t_bin(),
               t_path("kjv.txt"), t_path("tok.json")) == 0);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --docs eot --val 0.3 > %s 2>&1", t_bin(),
               t_path("tok.json"), t_path("kjv.txt"), t_path("a.bin"), t_path("log")) == 0);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --docs eot --val 0.3 --val-pick last "
               "> /dev/null 2>&1",
               t_bin(), t_path("tok.json"), t_path("kjv.txt"), t_path("b.bin")) == 0);
    CHECK(t_sh("cmp -s %s %s && cmp -s %s %s", t_path("a.train.bin"), t_path("b.train.bin"),
               t_path("a.val.bin"), t_path("b.val.bin")) == 0);
    log = t_slurp(t_path("log"));
    CHECKF(log && strstr(log, "3 documents") && strstr(log, "(2 documents)") &&
               strstr(log, "(1 document)"),
           "%s", log ? log : "");
    free(log);
    CHECK(t_sh("%s encode --tokenizer %s --in %s --out %s --docs eot --val 0.3 --val-pick hash "
               "> %s 2>&1",
               t_bin(), t_path("tok.json"), t_path("kjv.txt"), t_path("h.bin"),
               t_path("log")) == 0);
    log = t_slurp(t_path("log"));
    CHECKF(log && strstr(log, "picked by hash"), "%s", log ? log : "");
    free(log);
    al_tokens tr, va;
    CHECK_OK(al_tokens_load(t_path("h.train.bin"), &tr, &e), &e);
    CHECK_OK(al_tokens_load(t_path("h.val.bin"), &va, &e), &e);
    int eot = 299, dtr = 0, dva = 0;
    for (size_t i = 0; i < tr.n; i++) dtr += tr.tok[i] == eot;
    for (size_t i = 0; i < va.n; i++) dva += va.tok[i] == eot;
    CHECK(dtr + dva == 3 && dva >= 1 && dtr >= 1 && tr.tok[0] == eot && va.tok[0] == eot);
    al_tokens_free(&tr), al_tokens_free(&va);
    /* refusals: usage (2), and bad input in one line with nothing written (1) */
    CHECK(t_sh("%s data code --source rust --out %s 2>/dev/null", t_bin(), t_path("x.txt")) == 2);
    CHECK(t_sh("%s data code --source gostd --dir %s --out %s 2> %s", t_bin(), t_path("nope"),
               t_path("x.txt"), t_path("err")) == 1);
    CHECK(t_one_line(t_path("err"), "no such directory"));
    CHECK(t_sh("%s data prose --source file --out %s 2> %s", t_bin(), t_path("x.txt"),
               t_path("err")) == 1);
    CHECK(t_one_line(t_path("err"), "--in FILE"));
    CHECK(t_sh("%s data mix --in %s:0.9 --in %s:0.2 --out %s 2> %s", t_bin(), out, out,
               t_path("x.txt"), t_path("err")) == 1);
    CHECK(t_one_line(t_path("err"), "sum to"));
    CHECK(t_sh("%s data mix --in %s:0.5 --in %s:0.5 --out %s --bytes 100000 2> %s", t_bin(), out,
               t_path("kjv.txt"), t_path("x.txt"), t_path("err")) == 1);
    CHECK(t_one_line(t_path("err"), "1 = "));
    CHECK(t_sh("%s data mix --out %s 2>/dev/null", t_bin(), t_path("x.txt")) == 2);
    CHECK(t_sh("%s data prose --source kjv --from %s --out %s 2> %s", t_bin(), t_path("p.txt"),
               t_path("x.txt"), t_path("err")) == 1);
    CHECK(t_one_line(t_path("err"), "bible"));
    CHECK(t_sh("test -e %s || test -e %s.json", t_path("x.txt"), t_path("x.txt")) != 0);
}

/* An experiment's {"code": {"source": ..., "dir": ...}} writes the corpus
 * as `data code` does, byte for byte, and trains on it; a bad source, a
 * missing folder and docs other than eot name their key under --dry-run. */
TEST(corpus_experiment_code) {
    char body[200];
    for (int i = 0; i < 40; i++) { /* enough text for a tokenizer and a few windows */
        snprintf(body, sizeof body, "def f%d(x):\n    y%d = x + %d\n    return y%d * y%d\n", i, i,
                 i, i, i);
        char rel[64];
        snprintf(rel, sizeof rel, "lib/m%02d.py", i);
        put(rel, body);
    }
    char exp[2048];
    snprintf(
        exp, sizeof exp,
        "{\"name\": \"c\", \"threads\": 1,\n"
        " \"data\": {\"code\": {\"source\": \"pystdlib\", \"dir\": \"%s\"}, \"docs\": \"eot\", "
        "\"val\": 0.2},\n"
        " \"tokenizer\": {\"vocab\": 270},\n"
        " \"train\": {\"d_model\": 16, \"n_heads\": 2, \"d_head\": 8, \"n_ctx\": 8, \"batch\": 2,\n"
        "           \"steps\": 2, \"eval_every\": 0, \"warmup\": 1},\n"
        " \"models\": [{\"name\": \"one\", \"n_layers\": 1}], \"pictures\": false, \"report\": false}\n",
        t_path("lib"));
    const char *f = t_write("c.json", exp);
    t_pbuf out = t_pcopy("out");
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), f, out.s, t_path("log")) == 0);
    CHECK(t_sh("%s data code --source pystdlib --dir %s --out %s > /dev/null 2>&1", t_bin(),
               t_path("lib"), t_path("direct.txt")) == 0);
    char corpus[1100];
    snprintf(corpus, sizeof corpus, "%s/data/corpus.txt", out.s);
    char *a = t_slurp(corpus), *b = t_slurp(t_path("direct.txt"));
    CHECK(a && b && strlen(a) > 1000 && !strcmp(a, b));
    free(a), free(b);
    char *log = t_slurp(t_path("log"));
    CHECK(log && strstr(log, "attnlab data code --source pystdlib --dir "));
    free(log);
    /* scores as a list: one stage per probe, labelled by it */
    const char *at0 = strstr(exp, "\"pictures\": false");
    CHECK(at0 != NULL);
    if (at0) {
        char two[2300];
        snprintf(two, sizeof two,
                 "%.*s\"analyses\": {\"scores\": [{\"probe_tokens\": \"seen\"}, "
                 "{\"probe_tokens\": \"text\"}]}, %s",
                 (int)(at0 - exp), exp, at0);
        const char *g = t_write("two.json", two);
        CHECK(t_sh("%s experiment %s --dry-run > %s 2>&1", t_bin(), g, t_path("plan")) == 0);
        char *plan = t_slurp(t_path("plan"));
        CHECKF(plan && strstr(plan, "scores (probe seen): model one") &&
                   strstr(plan, "scores (probe text): model one"),
               "%s", plan ? plan : "");
        free(plan);
    }
    static const char *const bad[][3] = {{"\"source\": \"pystdlib\"", "\"source\": \"perl\"",
                                          "data.code.source"},
                                         {"\"docs\": \"eot\"", "\"docs\": \"blank\"", "data.docs"},
                                         {"/lib\"", "/nolib\"", "data.code.dir"}};
    for (int k = 0; k < 3; k++) {
        const char *at = strstr(exp, bad[k][0]);
        CHECK(at != NULL);
        if (!at) continue;
        char text[2200];
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - exp), exp, bad[k][1],
                 at + strlen(bad[k][0]));
        const char *g = t_write("bad.json", text);
        CHECK(t_sh("%s experiment %s --dry-run > /dev/null 2> %s", t_bin(), g, t_path("err")) == 1);
        char *err = t_slurp(t_path("err"));
        CHECKF(err && strstr(err, bad[k][2]), "%s: %s", bad[k][2], err ? err : "");
        free(err);
    }
}

/* data.mix in an experiment: each input written as its data command
 * writes it, then mixed as `data mix` mixes them (the corpus is the
 * command's, byte for byte); bad inputs are refused when the file is
 * loaded (before any stage, --dry-run included), naming the key. */
TEST(corpus_experiment_mix) {
    char body[200];
    for (int i = 0; i < 40; i++) {
        snprintf(body, sizeof body, "def f%d(x):\n    y%d = x + %d\n    return y%d * y%d\n", i, i,
                 i, i, i);
        char rel[64];
        snprintf(rel, sizeof rel, "lib/m%02d.py", i);
        put(rel, body);
    }
    char prose[8192] = "";
    for (int i = 0; i < 60; i++) {
        size_t k = strlen(prose);
        snprintf(prose + k, sizeof prose - k,
                 "the cat number %d sat on the mat and looked at the dog %d.\n\n", i, i * 7);
    }
    t_write("prose.txt", prose);
    t_pbuf pbuf = t_pcopy("prose.txt");
    const char *ptxt = pbuf.s;
    char exp[2048];
    snprintf(exp, sizeof exp,
             "{\"name\": \"m\", \"threads\": 1,\n"
             " \"data\": {\"mix\": {\"inputs\": [{\"share\": 0.75, \"text\": \"%s\", \"docs\": "
             "\"blank\"}, {\"share\": 0.25, \"code\": {\"source\": \"pystdlib\", \"dir\": "
             "\"%s\"}}], \"seed\": 3}, \"docs\": \"eot\", \"val\": 0.2, \"val_pick\": \"hash\"},\n"
             " \"tokenizer\": {\"vocab\": 270},\n"
             " \"train\": {\"d_model\": 16, \"n_heads\": 2, \"d_head\": 8, \"n_ctx\": 8, "
             "\"batch\": 2,\n"
             "           \"steps\": 2, \"eval_every\": 0, \"warmup\": 1},\n"
             " \"models\": [{\"name\": \"one\", \"n_layers\": 1}], \"pictures\": false, "
             "\"report\": false}\n",
             ptxt, t_path("lib"));
    t_write("m.json", exp);
    t_pbuf fbuf = t_pcopy("m.json");
    const char *f = fbuf.s;
    t_pbuf out = t_pcopy("out");
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), f, out.s, t_path("log")) == 0);
    /* the same by hand: data prose, data code, data mix */
    t_pbuf pt = t_pcopy("p.txt"), ct = t_pcopy("c.txt"), lib = t_pcopy("lib");
    t_pbuf direct = t_pcopy("direct.txt");
    CHECK(t_sh("%s data prose --source file --in %s --docs blank --out %s > /dev/null 2>&1 && "
               "%s data code --source pystdlib --dir %s --out %s > /dev/null 2>&1 && "
               "%s data mix --in %s:0.75 --in %s:0.25 --seed 3 --out %s > /dev/null 2>&1",
               t_bin(), ptxt, pt.s, t_bin(), lib.s, ct.s, t_bin(), pt.s, ct.s, direct.s) == 0);
    char corpus[1100];
    snprintf(corpus, sizeof corpus, "%s/data/corpus.txt", out.s);
    char *a = t_slurp(corpus), *b = t_slurp(direct.s);
    CHECK(a && b && strlen(a) > 1000 && !strcmp(a, b));
    CHECK(a && strstr(a, "def f") && strstr(a, "the cat number"));
    free(a), free(b);
    char *log = t_slurp(t_path("log"));
    CHECKF(log && strstr(log, "attnlab data mix --in ") && strstr(log, ":0.75 --in ") &&
               strstr(log, "data: a mixture (attnlab data mix)"),
           "%s", log ? log : "");
    free(log);
    /* a re-run reuses the data stage */
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), f, out.s, t_path("log2")) == 0);
    log = t_slurp(t_path("log2"));
    CHECKF(log && !strstr(log, "attnlab data mix --in "), "%s", log ? log : "");
    free(log);
    static const char *const bad[][3] =
        {{"\"share\": 0.25", "\"share\": 0.2", "the shares must sum to 1"},
         {"\"source\": \"pystdlib\"", "\"source\": \"perl\"", "data.mix.inputs[1].code"},
         {"\"docs\": \"blank\"", "\"docs\": \"lines\"", "data.mix.inputs[0]"},
         {"\"share\": 0.75, \"text\"",
          "\"share\": 0.75, \"prose\": {\"source\": \"bible\"}, "
          "\"x\"",
          "data.mix.inputs[0]"},
         {"\"docs\": \"eot\", \"val\"", "\"docs\": \"blank\", \"val\"", "data.docs"},
         {"\"seed\": 3", "\"seed\": -3", "data.mix.seed"}};
    for (int k = 0; k < 6; k++) t_exp_refused(exp, bad[k][0], bad[k][1], bad[k][2]);
}

/* A text file Debian installed: the provenance names the package that
 * owns it, with the version dpkg reports and its copyright file. */
TEST(corpus_provenance_names_the_owning_package) {
    const char *in = "/usr/share/common-licenses/GPL-3";
    char ver[128] = "";
    FILE *p = popen("dpkg-query -W -f='${Version}' base-files 2>/dev/null", "r");
    if (p) {
        if (!fgets(ver, sizeof ver, p)) ver[0] = 0;
        pclose(p);
    }
    if (!ver[0] || !al_file_exists(in)) t_skip("no dpkg or no base-files license file");
    CHECK(t_sh("%s data prose --source file --in %s --docs blank --out %s > /dev/null 2>&1",
               t_bin(), in, t_path("g.txt")) == 0);
    char *js = t_slurp(t_path("g.txt.json"));
    cJSON *d = js ? cJSON_Parse(js) : NULL;
    const cJSON *pk = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(d, "packages"), 0);
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pk, "name"));
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(pk, "version"));
    CHECKF(name && !strcmp(name, "base-files") && v && !strcmp(v, ver) &&
               cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(pk, "files")) == 1 &&
               cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(d, "files_without_package")) ==
                   0,
           "%s", js ? js : "");
    cJSON_Delete(d);
    free(js);
}
