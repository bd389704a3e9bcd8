/* corpus_src.h -- layer: data. Where the data commands' corpora come
 * from: the files of a directory tree (the Python standard library, Go's,
 * the Python documentation's sources), the King James Bible as Debian's
 * `bible` program prints it, and which Debian packages installed the
 * files read (their provenance). Documents go into an al_docset (corpus.h); cleaning
 * and writing are corpus.h's. */
#ifndef ATTNLAB_CORPUS_SRC_H
#define ATTNLAB_CORPUS_SRC_H

#include <stddef.h>
#include "attnlab/corpus.h"
#include "attnlab/util.h"

/* ---- a directory tree ---- */

/* Which files of a tree are documents: names ending in ext (".py"), not
 * ending in any of skip_suffix ("_test.go"; NULL-terminated, may be
 * NULL), in no directory named as one of skip_dirs ("test",
 * "testdata"; NULL-terminated, may be NULL) at any depth. */
typedef struct al_tree_rule {
    const char *ext;
    const char *const *skip_dirs;
    const char *const *skip_suffix;
} al_tree_rule;

/* The files read: paths (absolute, dir joined with the relative path),
 * in the order of their documents. */
typedef struct al_tree_files {
    char **path;
    size_t n;
    size_t binary; /* files skipped because they hold a NUL byte */
} al_tree_files;

/* Every file under dir that the rule takes, one document each, in the
 * byte order of their paths relative to dir (so the corpus does not
 * depend on the order readdir returns). Symbolic links to files are
 * read; links to directories are not followed (no cycles). A file holding
 * a NUL byte is skipped and counted. Limits: 64 levels, 1,000,000 files,
 * 64 MB a file. -1 with e when dir cannot be read, holds no such file,
 * or a limit is passed. */
int al_tree_read(const char *dir, const al_tree_rule *rule, al_docset *out, al_tree_files *files,
                 al_err *e);
void al_tree_files_free(al_tree_files *f);

/* ---- the King James Bible ---- */

/* Documents of the KJV: one per chapter (its heading, a blank line, then
 * one verse a line as "N text"), per book (its chapters, a blank line
 * between), or per verse (the verse's text alone). */
typedef enum { AL_KJV_CHAPTER, AL_KJV_BOOK, AL_KJV_VERSE } al_kjv_unit;
int al_kjv_unit_parse(const char *s, al_kjv_unit *u, al_err *e);

typedef struct al_kjv_counts {
    int books, chapters;
    long verses;
} al_kjv_counts;

/* Parse the text of `bible -l 100000 gen1:1-rev22:21` (bible-kjv): a
 * chapter heading ("Genesis 1", "1 Samuel 3": at column 0, after a blank
 * line, ending in the chapter's number), a blank line, and one verse a
 * line ("  1 In the beginning ..."); a line that is neither continues the
 * verse before it (the program wraps lines at a narrower width). The
 * documents are added to out. -1 with e (naming the line) on a line that
 * cannot be placed, or when there is no chapter at all. */
int al_kjv_parse(const unsigned char *s, size_t n, al_kjv_unit unit, al_docset *out,
                 al_kjv_counts *c, al_err *e);

/* ---- programs and packages ---- */

/* Run cmd with sh (no input) and capture its standard output, up to max
 * bytes (caller frees *out). -1 with e when it cannot start, exits
 * non-zero (what names the program in the message) or prints more. */
int al_run_capture(const char *cmd, const char *what, size_t max, unsigned char **out, size_t *n,
                   al_err *e);
/* Single-quote s for sh into buf (cap bytes). -1 with e if it does not fit. */
int al_sh_quote(char *buf, size_t cap, const char *s, al_err *e);

/* A Debian package and how many of the files read it installed. */
typedef struct al_deb_pkg {
    char name[128], version[128];
    size_t files;
} al_deb_pkg;

/* The Debian packages that installed the n files (dpkg-query -S; each
 * file counted for the first package dpkg names), with their installed
 * versions (dpkg-query -W), in name order; *unowned gets the files no
 * package owns. Without dpkg-query it finds none (0, every file
 * unowned): provenance is then the paths alone. -1 with e only when out
 * of memory or a temporary file cannot be written. */
int al_deb_owners(char *const *paths, size_t n, al_deb_pkg **pkgs, size_t *n_pkgs, size_t *unowned,
                  al_err *e);
/* The installed version of a package into buf ("" when not installed or
 * no dpkg-query). */
void al_deb_version(const char *pkg, char *buf, size_t cap);

#endif
