/* cmd_corpus.c -- `attnlab data code`, `data prose` and `data mix`:
 * plain-text corpora built offline from what Debian installed (or from a
 * file), in the format of corpus.h (documents separated by
 * <|endoftext|>, `encode --docs eot`), each with its provenance in a
 * sidecar <out>.json (docs/formats.md). The documents come from
 * corpus_src.h, the cleaning, writing and mixing from corpus.h; this file
 * has the flags, the sources' table and the sidecar. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include "attnlab/args.h"
#include "attnlab/cmd_data.h"
#include "attnlab/corpus.h"
#include "attnlab/corpus_src.h"
#include "attnlab/json.h"

/* ------------------------------------------------------- the sources */

/* A source read from a directory tree. dir_cmd prints its default
 * directory (the installed Python's, asked of Python itself) when
 * dir_default is NULL. */
typedef struct tree_source {
    const char *name, *kind, *what;
    const char *dir_default, *dir_cmd;
    al_tree_rule rule;
    const char *skipped; /* the rule in words, for the sidecar */
    const char *licence;
    const char *install; /* the Debian packages to install */
} tree_source;

static const char *const PY_SKIP[] = {"test",          "tests",       "idle_test", "site-packages",
                                      "dist-packages", "__pycache__", NULL};
static const char *const GO_SKIP[] = {"testdata", "vendor", "cmd", NULL};
static const char *const GO_SUFFIX[] = {"_test.go", NULL};

static const tree_source TREES[] = {
    {"pystdlib",
     "code",
     "the Python standard library's .py files",
     NULL,
     "/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"stdlib\"])'",
     {".py", PY_SKIP, NULL},
     "directories named test, tests, idle_test (test suites), site-packages, dist-packages "
     "(other packages), __pycache__",
     "PSF-2.0 (Python Software Foundation License; a few files under other permissive notices: "
     "see each package's copyright file)",
     "libpython3-stdlib (with Python)"},
    {"gostd",
     "code",
     "Go's standard library (golang-src)",
     "/usr/share/go/src",
     NULL,
     {".go", GO_SKIP, GO_SUFFIX},
     "*_test.go files; directories named testdata, vendor (copies of golang.org/x) and cmd (the "
     "toolchain, not the library)",
     "BSD-3-Clause (the Go licence; a few files under other permissive notices: see the "
     "package's copyright file)",
     "golang-src (sh scripts/deps.sh corpora)"},
    {"pydocs",
     "prose",
     "the Python documentation's reStructuredText sources (python3-doc)",
     NULL,
     "/usr/bin/python3 -c 'import sys; print(\"/usr/share/doc/python%d.%d/html/_sources\" % "
     "sys.version_info[:2])'",
     {".txt", NULL, NULL},
     "nothing",
     "PSF-2.0 (the documentation; its code examples also 0BSD)",
     "python3-doc (sh scripts/deps.sh corpora)"},
};
#define N_TREES (int)(sizeof TREES / sizeof TREES[0])

static const tree_source *tree_of(const char *name, const char *kind) {
    for (int i = 0; i < N_TREES; i++)
        if (!strcmp(TREES[i].name, name) && !strcmp(TREES[i].kind, kind)) return &TREES[i];
    return NULL;
}

/* ----------------------------------------------------- the provenance */

/* What one data command made, for the sidecar and the summary line. */
typedef struct made {
    const char *source, *kind, *out;
    cJSON *prov; /* the source's own keys (dir, packages, ...) */
    al_corpus_stats st;
    size_t files, out_bytes;
    size_t words, unique_words; /* al_corpus_words of what was written */
} made;

/* {"name", "version", "files", "copyright"} into arr (files < 0: left
 * out; the copyright file only if it exists). 0, or -1 when out of memory. */
static int add_pkg(cJSON *arr, const char *name, const char *version, double files) {
    char copy[300];
    snprintf(copy, sizeof copy, "/usr/share/doc/%s/copyright", name);
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddItemToArray(arr, j)) {
        cJSON_Delete(j);
        return -1;
    }
    return cJSON_AddStringToObject(j, "name", name) &&
                   cJSON_AddStringToObject(j, "version", version) &&
                   (files < 0 || cJSON_AddNumberToObject(j, "files", files)) &&
                   (!al_file_exists(copy) || cJSON_AddStringToObject(j, "copyright", copy))
               ? 0
               : -1;
}

static int add_packages(cJSON *prov, char *const *paths, size_t n, al_err *e) {
    al_deb_pkg *p;
    size_t np, unowned;
    if (al_deb_owners(paths, n, &p, &np, &unowned, e)) return -1;
    cJSON *arr = cJSON_AddArrayToObject(prov, "packages");
    int ok = arr != NULL;
    for (size_t i = 0; ok && i < np; i++)
        ok = add_pkg(arr, p[i].name, p[i].version, (double)p[i].files) == 0;
    ok = ok && cJSON_AddNumberToObject(prov, "files_without_package", (double)unowned);
    free(p);
    return ok ? 0 : al_errf(e, "out of memory");
}

/* <out>.json (docs/formats.md) into path, for the corpus bytes (data, n). */
static int write_sidecar(const made *m, const char *path, const void *data, size_t n_data,
                         al_err *e) {
    char sha[65];
    uint8_t d[32];
    al_sha256(data, n_data, d);
    for (int i = 0; i < 32; i++) snprintf(sha + 2 * i, 3, "%02x", d[i]);
    cJSON *j = m->prov;
    int ok = cJSON_AddNumberToObject(j, "documents_read", (double)m->st.docs_in) &&
             cJSON_AddNumberToObject(j, "documents", (double)m->st.docs) &&
             cJSON_AddNumberToObject(j, "duplicates_removed", (double)m->st.duplicates) &&
             cJSON_AddNumberToObject(j, "empty_removed", (double)m->st.empty) &&
             cJSON_AddNumberToObject(j, "separator_removed", (double)m->st.separator) &&
             cJSON_AddNumberToObject(j, "text_bytes", (double)m->st.bytes) &&
             cJSON_AddNumberToObject(j, "bytes", (double)m->out_bytes) &&
             cJSON_AddNumberToObject(j, "words", (double)m->words) &&
             cJSON_AddNumberToObject(j, "unique_words", (double)m->unique_words) &&
             cJSON_AddStringToObject(j, "sha256", sha) &&
             cJSON_AddStringToObject(j, "separator", "<|endoftext|>") &&
             cJSON_AddStringToObject(j, "encode", "--docs eot") &&
             cJSON_AddStringToObject(j, "attnlab_version", AL_VERSION);
    char *txt = ok ? al_json_print(1, j) : NULL;
    if (!txt) return al_errf(e, "out of memory");
    size_t n = strlen(txt);
    txt[n] = '\n'; /* cJSON_Print's buffer has room: its NUL */
    int rc = al_write_file_atomic(path, txt, n + 1, e);
    free(txt);
    return rc;
}

/* The sidecar's object, its first keys said. */
static cJSON *prov_new(const char *source, const char *kind) {
    cJSON *j = cJSON_CreateObject();
    if (j && (!cJSON_AddStringToObject(j, "schema", "attnlab.corpus/1") ||
              !cJSON_AddStringToObject(j, "source", source) ||
              !cJSON_AddStringToObject(j, "kind", kind))) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* Write the documents with keep[i] (all when keep is NULL; clean ones)
 * and the sidecar, and print the summary. */
static int write_corpus(made *m, const al_doc *docs, size_t n, const unsigned char *keep,
                        al_err *e) {
    if (m->st.docs == 0) return al_errf(e, "%s: no document left to write", m->source);
    if (al_corpus_words(docs, n, keep, &m->words, &m->unique_words, e)) return -1;
    char side[AL_PATH_MAX + 8];
    if (snprintf(side, sizeof side, "%s.json", m->out) >= (int)sizeof side)
        return al_errf(e, "--out %s: path too long", m->out);
    al_buf b = AL_BUF_INIT;
    m->out_bytes = al_corpus_write(&b, docs, n, keep);
    /* the corpus is synced under its temporary name, the sidecar written,
     * and only then the corpus renamed: neither is left without the other */
    al_atomic_file af;
    int rc = !al_buf_ok(&b) ? al_errf(e, "out of memory writing %s", m->out)
                            : al_atomic_open(&af, m->out, e);
    if (rc == 0) {
        int ok = fwrite(b.p, 1, b.n, af.f) == b.n;
        if (!ok) al_errf(e, "cannot write %s: %s", m->out, strerror(errno));
        rc = al_atomic_sync(&af, ok, ok ? e : NULL);
        if (rc == 0 && write_sidecar(m, side, b.p, b.n, e)) {
            unlink(af.tmp_path);
            rc = -1;
        }
        if (rc == 0 && al_atomic_rename(&af, e)) {
            unlink(side);
            rc = -1;
        }
    }
    al_buf_free(&b);
    if (rc) return -1;
    printf("wrote %s: %zu documents, %.2f MB, %zu words (%zu distinct) (of %zu read", m->out,
           m->st.docs, m->out_bytes / 1e6, m->words, m->unique_words, m->st.docs_in);
    if (m->files) printf(" from %zu files", m->files);
    printf(
        "; removed %zu duplicates, %zu empty, %zu holding <|endoftext|>); provenance in %s.json\n",
        m->st.duplicates, m->st.empty, m->st.separator, m->out);
    return 0;
}

/* Clean the documents, then write_corpus. */
static int finish(made *m, al_doc *docs, size_t n, al_err *e) {
    unsigned char *keep = al_malloc(n ? n : 1, 1, e);
    int rc =
        !keep || al_corpus_clean(docs, n, keep, &m->st, e) ? -1 : write_corpus(m, docs, n, keep, e);
    free(keep);
    return rc;
}

/* The directory of a tree source: --dir, the default, or what dir_cmd
 * prints; resolved (realpath), so that dpkg knows its files' paths. */
static int tree_dir(const tree_source *t, const char *given, char *dir, size_t cap, al_err *e) {
    char raw[AL_PATH_MAX];
    if (given) {
        snprintf(raw, sizeof raw, "%s", given);
    } else if (t->dir_default) {
        snprintf(raw, sizeof raw, "%s", t->dir_default);
    } else {
        unsigned char *out;
        size_t n;
        if (al_run_capture(t->dir_cmd, "/usr/bin/python3", 4096, &out, &n, e)) {
            al_err_prefix(e, "cannot find %s (pass --dir)", t->what);
            return -1;
        }
        while (n && (out[n - 1] == '\n' || out[n - 1] == '\r')) n--;
        snprintf(raw, sizeof raw, "%.*s", (int)n, (const char *)out);
        free(out);
    }
    char real[PATH_MAX];
    if (!realpath(raw, real))
        return al_errf(e, "%s: no such directory (%s: install %s, or pass --dir)", raw, t->what,
                       t->install);
    if (strlen(real) >= cap) return al_errf(e, "%s: path too long", real);
    snprintf(dir, cap, "%s", real);
    return 0;
}

static int run_tree(const tree_source *t, const char *given, made *m, al_err *e) {
    char dir[AL_PATH_MAX];
    if (tree_dir(t, given, dir, sizeof dir, e)) return -1;
    al_docset ds = AL_DOCSET_INIT;
    al_tree_files tf;
    al_doc *docs = NULL;
    size_t n = 0;
    int rc = al_tree_read(dir, &t->rule, &ds, &tf, e) || al_docset_docs(&ds, &docs, &n, e) ? -1 : 0;
    if (rc == 0) {
        m->files = tf.n;
        rc = !cJSON_AddStringToObject(m->prov, "dir", dir) ||
                     !cJSON_AddStringToObject(m->prov, "skipped", t->skipped) ||
                     !cJSON_AddNumberToObject(m->prov, "files", (double)tf.n) ||
                     !cJSON_AddNumberToObject(m->prov, "files_binary_skipped", (double)tf.binary) ||
                     !cJSON_AddStringToObject(m->prov, "licence", t->licence)
                 ? al_errf(e, "out of memory")
                 : add_packages(m->prov, tf.path, tf.n, e);
    }
    if (rc == 0) rc = finish(m, docs, n, e);
    free(docs);
    al_tree_files_free(&tf);
    al_docset_free(&ds);
    return rc;
}

/* ---------------------------------------------------------- data code */

static const char *code_out, *code_source, *code_dir;

static al_flag code_flags[] = {
    {"out", AL_STR, &code_out, "FILE", "corpus to write (and its provenance, FILE.json)", 1, 0},
    {"source", AL_STR, &code_source, "NAME", "pystdlib or gostd", 1, 0},
    {"dir", AL_STR, &code_dir, "DIR", "read this directory instead of the installed one", 0, 0},
    AL_FLAGS_END,
};

static int run_code(int argc, char **argv);
al_command al_cmd_data_code = {
    "data code",
    "write a code corpus from what Debian installed: the Python or Go standard library",
    "--source pystdlib|gostd --out FILE [--dir DIR]",
    "One document per source file, in the byte order of their paths, documents\n"
    "separated by <|endoftext|> (encode with --docs eot). pystdlib: the .py files\n"
    "of the installed Python's standard library (the directory Python names), but\n"
    "not its test, tests, idle_test, site-packages, dist-packages or __pycache__\n"
    "directories. gostd: the .go files of /usr/share/go/src (golang-src), but not\n"
    "*_test.go, testdata, vendor or cmd (the toolchain). Exact duplicates\n"
    "(normalised: line ends, trailing blanks) are removed, and FILE.json records\n"
    "the directory, the Debian packages and versions the files came from, the\n"
    "licence, and the counts.",
    code_flags,
    run_code,
};

int al_data_code_source_ok(const char *source) { return source && tree_of(source, "code"); }

int al_data_code_write(const char *source, const char *dir, const char *out, al_err *e) {
    const tree_source *t = tree_of(source, "code");
    if (!t) return al_errf(e, "--source '%s': must be pystdlib or gostd", source ? source : "");
    made m = {t->name, "code", out, prov_new(t->name, "code"), {0}, 0, 0, 0, 0};
    int rc = m.prov ? run_tree(t, dir, &m, e) : al_errf(e, "out of memory");
    cJSON_Delete(m.prov);
    return rc;
}

static int run_code(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(code_flags, argc, argv, NULL, 0, NULL, &e))
        return al_cli_usage(&al_cmd_data_code, &e);
    if (!al_data_code_source_ok(code_source)) {
        al_errf(&e, "--source '%s': must be pystdlib or gostd", code_source);
        return al_cli_usage(&al_cmd_data_code, &e);
    }
    return al_data_code_write(code_source, code_dir, code_out, &e) ? al_cli_error(&e) : 0;
}

/* --------------------------------------------------------- data prose */

static const char *prose_out, *prose_source, *prose_dir, *prose_in, *prose_from;
static const char *prose_unit = "chapter", *prose_docs = "blank";

static al_flag prose_flags[] = {
    {"out", AL_STR, &prose_out, "FILE", "corpus to write (and its provenance, FILE.json)", 1, 0},
    {"source", AL_STR, &prose_source, "NAME", "kjv, pydocs or file", 1, 0},
    {"unit", AL_STR, &prose_unit, "chapter|book|verse",
     "kjv: one document per chapter, book or verse", 0, 0},
    {"from", AL_STR, &prose_from, "FILE",
     "kjv: read this saved output of `bible -l 100000 gen1:1-rev22:21` instead of running bible", 0,
     0},
    {"dir", AL_STR, &prose_dir, "DIR", "pydocs: read this directory instead of the installed one",
     0, 0},
    {"in", AL_STR, &prose_in, "FILE", "file: the text to read", 0, 0},
    {"docs", AL_STR, &prose_docs, "MODE",
     "file: how its documents are separated: blank, line, eot or story (as encode --docs)", 0, 0},
    AL_FLAGS_END,
};

static int run_prose(int argc, char **argv);
al_command al_cmd_data_prose = {
    "data prose",
    "write a prose corpus: the King James Bible, the Python documentation, or a text file",
    "--source kjv|pydocs|file --out FILE [--unit chapter|book|verse] [--in FILE --docs MODE]",
    "Documents separated by <|endoftext|> (encode with --docs eot), exact duplicates\n"
    "removed, provenance in FILE.json. kjv: Debian's bible-kjv-text as its reader\n"
    "`bible` prints it (both packages: sh scripts/deps.sh corpora), one document\n"
    "per chapter (its heading, then one numbered verse a line; --unit book or\n"
    "verse). pydocs: the .rst.txt sources of the installed Python's documentation\n"
    "(python3-doc), one document per file. file: any text (--in), cut into\n"
    "documents by --docs as encode does (blank lines by default; TinyStories' text\n"
    "without its <|endoftext|> lines: --docs story).",
    prose_flags,
    run_prose,
};

static int run_kjv(made *m, const al_prose_opts *o, al_err *e) {
    al_kjv_unit unit;
    const char *prose_unit = o->unit ? o->unit : "chapter", *prose_from = o->from;
    if (al_kjv_unit_parse(prose_unit, &unit, e)) return -1;
    unsigned char *text = NULL;
    size_t n = 0;
    if (prose_from) {
        if (al_read_file(prose_from, &text, &n, (size_t)64 << 20, e)) return -1;
    } else if (al_run_capture("command -v bible >/dev/null 2>&1 && bible -l 100000 "
                              "gen1:1-rev22:21",
                              "bible (Debian's bible-kjv)", (size_t)64 << 20, &text, &n, e)) {
        al_err_prefix(e, "install bible-kjv and bible-kjv-text (sh scripts/deps.sh corpora) or "
                         "pass --from FILE");
        return -1;
    }
    al_docset ds = AL_DOCSET_INIT;
    al_kjv_counts c;
    al_doc *docs = NULL;
    size_t nd = 0;
    int rc = al_kjv_parse(text, n, unit, &ds, &c, e) || al_docset_docs(&ds, &docs, &nd, e) ? -1 : 0;
    free(text);
    char ver_text[128], ver_prog[128];
    al_deb_version("bible-kjv-text", ver_text, sizeof ver_text);
    al_deb_version("bible-kjv", ver_prog, sizeof ver_prog);
    cJSON *pk = rc ? NULL : cJSON_AddArrayToObject(m->prov, "packages");
    if (rc == 0 &&
        (!pk || add_pkg(pk, "bible-kjv-text", ver_text, -1) ||
         add_pkg(pk, "bible-kjv", ver_prog, -1) ||
         !cJSON_AddStringToObject(m->prov, "read",
                                  prose_from ? prose_from : "bible -l 100000 gen1:1-rev22:21") ||
         !cJSON_AddStringToObject(m->prov, "unit", prose_unit) ||
         !cJSON_AddNumberToObject(m->prov, "books", c.books) ||
         !cJSON_AddNumberToObject(m->prov, "chapters", c.chapters) ||
         !cJSON_AddNumberToObject(m->prov, "verses", (double)c.verses) ||
         !cJSON_AddStringToObject(m->prov, "licence",
                                  "public domain (the 1611 translation; Debian: copyright "
                                  "expired); the reader bible-kjv GPL-2+")))
        rc = al_errf(e, "out of memory");
    if (rc == 0) rc = finish(m, docs, nd, e);
    free(docs);
    al_docset_free(&ds);
    return rc;
}

static int run_file(made *m, const al_prose_opts *o, al_err *e) {
    al_docs_mode mode;
    const char *prose_in = o->in, *prose_docs = o->docs ? o->docs : "blank";
    if (!prose_in) return al_errf(e, "--source file needs --in FILE");
    if (al_docs_mode_parse(prose_docs, &mode, e)) return -1;
    unsigned char *text;
    size_t n;
    if (al_read_file(prose_in, &text, &n, 0, e)) return -1;
    al_doc *docs = NULL;
    size_t nd = 0;
    char real[PATH_MAX];
    char *paths[1] = {real};
    int rc = al_corpus_split(text, n, mode, &docs, &nd, e);
    if (rc == 0 && !realpath(prose_in, real)) snprintf(real, sizeof real, "%s", prose_in);
    if (rc == 0 && (!cJSON_AddStringToObject(m->prov, "in", real) ||
                    !cJSON_AddStringToObject(m->prov, "docs", prose_docs) ||
                    !cJSON_AddNumberToObject(m->prov, "in_bytes", (double)n)))
        rc = al_errf(e, "out of memory");
    if (rc == 0) {
        char sha[65];
        rc = al_sha256_file(prose_in, sha, e) || !cJSON_AddStringToObject(m->prov, "in_sha256", sha)
                 ? -1
                 : add_packages(m->prov, paths, 1, e);
    }
    if (rc == 0) rc = finish(m, docs, nd, e);
    free(docs);
    free(text);
    return rc;
}

int al_data_prose_source_ok(const char *source) {
    return source &&
           (tree_of(source, "prose") || !strcmp(source, "kjv") || !strcmp(source, "file"));
}

int al_data_prose_write(const al_prose_opts *o, al_err *e) {
    const char *s = o->source;
    if (!al_data_prose_source_ok(s))
        return al_errf(e, "--source '%s': must be kjv, pydocs or file", s ? s : "");
    const tree_source *t = tree_of(s, "prose");
    made m = {s, "prose", o->out, prov_new(s, "prose"), {0}, 0, 0, 0, 0};
    int rc = !m.prov             ? al_errf(e, "out of memory")
             : t                 ? run_tree(t, o->dir, &m, e)
             : !strcmp(s, "kjv") ? run_kjv(&m, o, e)
                                 : run_file(&m, o, e);
    cJSON_Delete(m.prov);
    return rc;
}

static int run_prose(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(prose_flags, argc, argv, NULL, 0, NULL, &e))
        return al_cli_usage(&al_cmd_data_prose, &e);
    if (!al_data_prose_source_ok(prose_source)) {
        al_errf(&e, "--source '%s': must be kjv, pydocs or file", prose_source);
        return al_cli_usage(&al_cmd_data_prose, &e);
    }
    al_prose_opts o = {prose_source, prose_out, prose_unit, prose_from,
                       prose_dir,    prose_in,  prose_docs};
    return al_data_prose_write(&o, &e) ? al_cli_error(&e) : 0;
}

/* ----------------------------------------------------------- data mix */

static const char *mix_out, *mix_in_help, *mix_docs = "eot";
static uint64_t mix_bytes = 0, mix_seed = 1;

static al_flag mix_flags[] = {
    {"in", AL_STR, &mix_in_help, "FILE:SHARE",
     "an input corpus and its share of the bytes; repeat for each input (the shares sum to 1)", 0,
     0},
    {"out", AL_STR, &mix_out, "FILE", "mixture to write (and its provenance, FILE.json)", 1, 0},
    {"bytes", AL_U64, &mix_bytes, "N",
     "bytes of documents to take in all (0: as many as every input can supply)", 0, 0},
    {"seed", AL_U64, &mix_seed, "S",
     "seed of the documents' order; the output is a pure function of "
     "the inputs and options",
     0, 0},
    {"docs", AL_STR, &mix_docs, "MODE",
     "how the inputs' documents are separated (as encode --docs)", 0, 0},
    AL_FLAGS_END,
};

static int run_mix(int argc, char **argv);
al_command al_cmd_data_mix = {
    "data mix",
    "mix corpora by byte shares, whole documents only",
    "--in A.txt:0.8 --in B.txt:0.2 --out FILE [--bytes N] [--seed S]",
    "From each input, documents in a seeded random order until its share of --bytes\n"
    "is reached (it overshoots by less than one document), never a document twice\n"
    "(exact duplicates within and across the inputs are skipped), then all of them\n"
    "in one seeded random order, separated by <|endoftext|> (encode with --docs\n"
    "eot). An input with too few bytes for its share is refused; without --bytes the\n"
    "mixture is as large as every input allows. FILE.json records the inputs, their\n"
    "shares, what was taken from each and each input's own provenance (its .json).",
    mix_flags,
    run_mix,
};

#define MIX_MAX_IN AL_MIX_MAX_IN

typedef struct mix_input {
    char path[AL_PATH_MAX];
    double share;
    unsigned char *text;
    al_doc *docs; /* the clean documents, compacted */
    size_t n;
    al_corpus_stats st;
} mix_input;

/* "FILE:SHARE" (the last colon). */
static int parse_in(const char *arg, mix_input *in, al_err *e) {
    const char *c = strrchr(arg, ':');
    char *end;
    if (!c || c == arg) return al_errf(e, "--in %s: want FILE:SHARE", arg);
    in->share = strtod(c + 1, &end);
    if (end == c + 1 || *end || !(in->share > 0 && in->share <= 1))
        return al_errf(e, "--in %s: the share must be a number in (0, 1]", arg);
    if ((size_t)(c - arg) >= sizeof in->path) return al_errf(e, "--in %s: path too long", arg);
    snprintf(in->path, sizeof in->path, "%.*s", (int)(c - arg), arg);
    return 0;
}

static int load_input(mix_input *in, al_docs_mode mode, al_err *e) {
    size_t n;
    if (al_read_file(in->path, &in->text, &n, 0, e) ||
        al_corpus_split(in->text, n, mode, &in->docs, &in->n, e))
        return -1;
    unsigned char *keep = al_malloc(in->n ? in->n : 1, 1, e);
    if (!keep || al_corpus_clean(in->docs, in->n, keep, &in->st, e)) {
        free(keep);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < in->n; i++)
        if (keep[i]) in->docs[k++] = in->docs[i];
    in->n = k;
    free(keep);
    return 0;
}

/* inputs[] in the sidecar, each with its own <in>.json when there is one. */
static int mix_prov(cJSON *prov, const mix_input *in, int n_in, const size_t *taken,
                    const al_mix_pick *picks, size_t n_picks, size_t dups, uint64_t bytes,
                    uint64_t seed, const char *docs_mode, al_err *e) {
    cJSON *arr = cJSON_AddArrayToObject(prov, "inputs");
    int ok = arr && cJSON_AddNumberToObject(prov, "seed", (double)seed) &&
             cJSON_AddNumberToObject(prov, "bytes_asked", (double)bytes) &&
             cJSON_AddNumberToObject(prov, "duplicates_across_inputs", (double)dups) &&
             cJSON_AddStringToObject(prov, "docs", docs_mode);
    for (int i = 0; ok && i < n_in; i++) {
        size_t docs = 0;
        for (size_t k = 0; k < n_picks; k++) docs += picks[k].in == i;
        char real[PATH_MAX], side[AL_PATH_MAX + 8];
        if (!realpath(in[i].path, real)) snprintf(real, sizeof real, "%s", in[i].path);
        cJSON *j = cJSON_CreateObject();
        ok = j && cJSON_AddItemToArray(arr, j);
        if (!ok) cJSON_Delete(j);
        ok = ok && cJSON_AddStringToObject(j, "path", real) &&
             cJSON_AddNumberToObject(j, "share", in[i].share) &&
             cJSON_AddNumberToObject(j, "documents", (double)in[i].n) &&
             cJSON_AddNumberToObject(j, "duplicates_removed", (double)in[i].st.duplicates) &&
             cJSON_AddNumberToObject(j, "documents_taken", (double)docs) &&
             cJSON_AddNumberToObject(j, "bytes_taken", (double)taken[i]);
        snprintf(side, sizeof side, "%s.json", in[i].path);
        cJSON *sc = NULL;
        if (ok && al_file_exists(side) && al_json_read_file(side, 1 << 20, &sc, NULL) == 0 &&
            !cJSON_AddItemToObject(j, "provenance", sc)) {
            cJSON_Delete(sc);
            ok = 0;
        }
    }
    return ok ? 0 : al_errf(e, "out of memory");
}

static int mix(mix_input *in, int n_in, made *m, uint64_t bytes, uint64_t seed,
               const char *docs_mode, al_err *e) {
    al_docs_mode mode;
    if (al_docs_mode_parse(docs_mode, &mode, e)) return -1;
    al_mix_in mi[MIX_MAX_IN];
    for (int i = 0; i < n_in; i++) {
        if (load_input(&in[i], mode, e)) return al_err_prefix(e, "%s", in[i].path);
        mi[i] = (al_mix_in){in[i].docs, in[i].n, in[i].share};
        m->st.docs_in += in[i].st.docs_in;
        m->st.empty += in[i].st.empty;
        m->st.separator += in[i].st.separator;
        m->st.duplicates += in[i].st.duplicates;
    }
    al_mix_pick *picks = NULL;
    size_t n = 0, taken[MIX_MAX_IN], dups = 0;
    if (al_corpus_mix(mi, n_in, (size_t)bytes, seed, &picks, &n, taken, &dups, e)) {
        if (strncmp(e->msg, "input ", 6)) return -1;
        char names[600] = "";
        for (int i = 0; i < n_in; i++) { /* the message counts inputs from 1; long paths cut */
            size_t k = strlen(names);
            if (snprintf(names + k, sizeof names - k, "%s%d = %s", i ? ", " : "", i + 1,
                         in[i].path) >= (int)(sizeof names - k))
                break;
        }
        return al_err_prefix(e, "inputs %s", names);
    }
    al_doc *docs = al_malloc(n ? n : 1, sizeof *docs, e);
    int rc = docs ? 0 : -1;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        docs[k] = in[picks[k].in].docs[picks[k].doc];
        m->st.bytes += docs[k].n;
    }
    m->st.docs = n;
    m->st.duplicates += dups;
    if (rc == 0) rc = mix_prov(m->prov, in, n_in, taken, picks, n, dups, bytes, seed, docs_mode, e);
    if (rc == 0) rc = write_corpus(m, docs, n, NULL, e);
    for (int i = 0; rc == 0 && i < n_in; i++)
        printf("  %s: share %.4g, %zu bytes taken (%.4f of the mixture)\n", in[i].path, in[i].share,
               taken[i], m->st.bytes ? (double)taken[i] / (double)m->st.bytes : 0.0);
    free(docs);
    free(picks);
    return rc;
}

static int run_mix(int argc, char **argv) {
    al_err e;
    /* --in repeats, which the flag parser does not do: take them out first */
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    const char *ins[MIX_MAX_IN + 1];
    int nr = 0, ni = 0;
    if (!rest) return al_cli_error((al_errf(&e, "out of memory"), &e));
    for (int i = 0; i < argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--in") && i + 1 < argc)
            v = argv[++i];
        else if (!strncmp(argv[i], "--in=", 5))
            v = argv[i] + 5;
        else
            rest[nr++] = argv[i];
        if (v && ni <= MIX_MAX_IN) ins[ni++] = v;
    }
    rest[nr] = NULL;
    int prc = al_flags_parse(mix_flags, nr, rest, NULL, 0, NULL, &e);
    free(rest);
    if (prc) return al_cli_usage(&al_cmd_data_mix, &e);
    if (ni == 0 || ni > MIX_MAX_IN) {
        al_errf(&e,
                ni ? "at most %d inputs (--in)" : "--in FILE:SHARE is required (once per input)",
                MIX_MAX_IN);
        return al_cli_usage(&al_cmd_data_mix, &e);
    }
    mix_input in[MIX_MAX_IN];
    const char *paths[MIX_MAX_IN];
    double shares[MIX_MAX_IN];
    for (int i = 0; i < ni; i++) {
        if (parse_in(ins[i], &in[i], &e)) return al_cli_usage(&al_cmd_data_mix, &e);
        paths[i] = in[i].path, shares[i] = in[i].share;
    }
    return al_data_mix_write(mix_out, paths, shares, ni, mix_bytes, mix_seed, mix_docs, &e)
               ? al_cli_error(&e)
               : 0;
}

int al_data_mix_write(const char *out, const char *const *paths, const double *shares, int n,
                      uint64_t bytes, uint64_t seed, const char *docs, al_err *e) {
    if (n < 1 || n > MIX_MAX_IN) return al_errf(e, "a mixture takes 1 to %d inputs", MIX_MAX_IN);
    mix_input *in = calloc((size_t)n, sizeof *in);
    if (!in) return al_errf(e, "out of memory");
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (!(shares[i] > 0 && shares[i] <= 1))
            rc = al_errf(e, "%s: the share must be a number in (0, 1] (got %g)", paths[i],
                         shares[i]);
        else if (strlen(paths[i]) >= sizeof in[i].path)
            rc = al_errf(e, "%s: path too long", paths[i]);
        else
            snprintf(in[i].path, sizeof in[i].path, "%s", paths[i]), in[i].share = shares[i];
    }
    made m = {"mix", "mix", out, prov_new("mix", "mix"), {0}, 0, 0, 0, 0};
    if (rc == 0)
        rc = m.prov ? mix(in, n, &m, bytes, seed, docs ? docs : "eot", e)
                    : al_errf(e, "out of memory");
    cJSON_Delete(m.prov);
    for (int i = 0; i < n; i++) free(in[i].text), free(in[i].docs);
    free(in);
    return rc;
}
