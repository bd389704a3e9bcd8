/* corpus_files.c -- corpora from the file system: the files of a
 * directory tree as documents (al_tree_read), a program's output
 * (al_run_capture), and the Debian packages that installed the files
 * read, for the provenance the data commands record (al_deb_owners).
 * See corpus_src.h. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/corpus_src.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TREE_MAX_DEPTH 64
#define TREE_MAX_FILES 1000000
#define TREE_MAX_FILE_BYTES ((size_t)64 << 20)

/* ------------------------------------------------------------ tree */

typedef struct path_list {
    char **p;
    size_t n, cap;
} path_list;

static int push_path(path_list *l, const char *rel, al_err *e) {
    if (l->n >= TREE_MAX_FILES)
        return al_errf(e, "more than %d files: not a source tree this command reads",
                       TREE_MAX_FILES);
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        char **p = realloc(l->p, cap * sizeof *p);
        if (!p) return al_errf(e, "out of memory listing files");
        l->p = p, l->cap = cap;
    }
    if (!(l->p[l->n] = strdup(rel))) return al_errf(e, "out of memory listing files");
    l->n++;
    return 0;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int in_list(const char *s, const char *const *list) {
    for (; list && *list; list++)
        if (strcmp(s, *list) == 0) return 1;
    return 0;
}

static int takes(const al_tree_rule *r, const char *name) {
    if (!ends_with(name, r->ext)) return 0;
    for (const char *const *s = r->skip_suffix; s && *s; s++)
        if (ends_with(name, *s)) return 0;
    return 1;
}

/* The files under root/rel that the rule takes, as paths relative to root. */
static int walk(const char *root, const char *rel, int depth, const al_tree_rule *r, path_list *l,
                al_err *e) {
    char dir[AL_PATH_MAX], sub[AL_PATH_MAX], full[AL_PATH_MAX];
    if (depth > TREE_MAX_DEPTH)
        return al_errf(e, "%s/%s: more than %d levels deep", root, rel, TREE_MAX_DEPTH);
    if (*rel ? al_path_join(dir, sizeof dir, root, rel, e)
             : (snprintf(dir, sizeof dir, "%s", root), 0))
        return -1;
    DIR *dp = opendir(dir);
    if (!dp) return depth ? 0 : al_errf(e, "cannot read the directory %s", root);
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(dp))) {
        const char *nm = de->d_name;
        if (!strcmp(nm, ".") || !strcmp(nm, "..")) continue;
        if ((*rel ? snprintf(sub, sizeof sub, "%s/%s", rel, nm)
                  : snprintf(sub, sizeof sub, "%s", nm)) >= (int)sizeof sub ||
            al_path_join(full, sizeof full, root, sub, NULL)) {
            rc = al_errf(e, "a path under %s is too long", root);
            break;
        }
        struct stat st;
        if (lstat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            if (!in_list(nm, r->skip_dirs)) rc = walk(root, sub, depth + 1, r, l, e);
        } else if ((S_ISREG(st.st_mode) ||
                    (S_ISLNK(st.st_mode) && stat(full, &st) == 0 && S_ISREG(st.st_mode))) &&
                   takes(r, nm)) {
            rc = push_path(l, sub, e);
        }
    }
    closedir(dp);
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void al_tree_files_free(al_tree_files *f) {
    for (size_t i = 0; f->path && i < f->n; i++) free(f->path[i]);
    free(f->path);
    memset(f, 0, sizeof *f);
}

int al_tree_read(const char *dir, const al_tree_rule *rule, al_docset *out, al_tree_files *files,
                 al_err *e) {
    memset(files, 0, sizeof *files);
    path_list l = {0};
    int rc = walk(dir, "", 0, rule, &l, e);
    if (rc == 0 && l.n == 0) rc = al_errf(e, "no %s files under %s", rule->ext, dir);
    if (rc == 0) qsort(l.p, l.n, sizeof *l.p, cmp_str);
    if (rc == 0 && !(files->path = calloc(l.n, sizeof *files->path)))
        rc = al_errf(e, "out of memory");
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        char full[AL_PATH_MAX];
        unsigned char *text;
        size_t n;
        if (al_path_join(full, sizeof full, dir, l.p[i], e) ||
            al_read_file(full, &text, &n, TREE_MAX_FILE_BYTES, e)) {
            rc = -1;
            break;
        }
        if (memchr(text, 0, n)) {
            files->binary++;
        } else {
            al_docset_put(out, text, n);
            al_docset_end(out);
            if (!(files->path[files->n++] = strdup(full))) rc = al_errf(e, "out of memory");
        }
        free(text);
    }
    for (size_t i = 0; i < l.n; i++) free(l.p[i]);
    free(l.p);
    if (rc) al_tree_files_free(files);
    return rc;
}

/* ------------------------------------------------------- programs */

int al_sh_quote(char *buf, size_t cap, const char *s, al_err *e) {
    size_t k = 0;
    if (cap < 3) return al_errf(e, "no room to quote %s", s);
    buf[k++] = '\'';
    for (const char *c = s; *c; c++) {
        const char *piece = *c == '\'' ? "'\\''" : NULL;
        size_t len = piece ? 4 : 1;
        if (k + len + 2 > cap) return al_errf(e, "too long for a command line: %.200s", s);
        if (piece)
            memcpy(buf + k, piece, 4);
        else
            buf[k] = *c;
        k += len;
    }
    buf[k++] = '\'';
    buf[k] = 0;
    return 0;
}

int al_run_capture(const char *cmd, const char *what, size_t max, unsigned char **out, size_t *n,
                   al_err *e) {
    *out = NULL, *n = 0;
    FILE *f = popen(cmd, "r");
    if (!f) return al_errf(e, "cannot run %s", what);
    al_buf b = AL_BUF_INIT;
    char chunk[65536];
    size_t got;
    int too_big = 0;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && !too_big) {
        if (b.n + got > max)
            too_big = 1;
        else
            al_buf_put(&b, chunk, got);
    }
    int st = pclose(f);
    if (too_big || !al_buf_ok(&b) || st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        al_buf_free(&b);
        if (too_big) return al_errf(e, "%s printed more than %zu bytes", what, max);
        if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 127)
            return al_errf(e, "%s: not found", what);
        return al_errf(e, "%s failed (exit %d)", what,
                       st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    *out = (unsigned char *)al_buf_take(&b, n);
    if (!*out) return al_errf(e, "out of memory reading what %s printed", what);
    return 0;
}

/* ------------------------------------------------------- packages */

static int have_dpkg_query(void) { return system("command -v dpkg-query >/dev/null 2>&1") == 0; }

void al_deb_version(const char *pkg, char *buf, size_t cap) {
    char q[400], cmd[512];
    unsigned char *out = NULL;
    size_t n = 0;
    buf[0] = 0;
    if (!have_dpkg_query() || al_sh_quote(q, sizeof q, pkg, NULL)) return;
    snprintf(cmd, sizeof cmd, "dpkg-query -W -f='${Version}' %s 2>/dev/null", q);
    if (al_run_capture(cmd, "dpkg-query", 4096, &out, &n, NULL) == 0)
        snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), (const char *)out);
    free(out);
}

static int cmp_pkg(const void *a, const void *b) {
    return strcmp(((const al_deb_pkg *)a)->name, ((const al_deb_pkg *)b)->name);
}

/* "pkg1, pkg2: /path" -> the first package (without ":arch") into name;
 * 0 if the line is not such a line (dpkg's diversion notes). */
static int owner_of(const char *line, char *name, size_t cap) {
    const char *colon = strstr(line, ": /");
    if (!colon || colon == line) return 0;
    size_t k = strcspn(line, ",:");
    if (k == 0 || k >= cap || line + k > colon) return 0;
    memcpy(name, line, k);
    name[k] = 0;
    return strncmp(line, "diversion ", 10) != 0;
}

int al_deb_owners(char *const *paths, size_t n, al_deb_pkg **pkgs, size_t *n_pkgs, size_t *unowned,
                  al_err *e) {
    *pkgs = NULL, *n_pkgs = 0, *unowned = n;
    if (n == 0 || !have_dpkg_query()) return 0;
    const char *t = getenv("TMPDIR");
    char list[AL_PATH_MAX], ql[AL_PATH_MAX + 64], cmd[2 * AL_PATH_MAX + 200];
    snprintf(list, sizeof list, "%s/attnlab-paths-XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(list);
    if (fd < 0) return al_errf(e, "cannot create a temporary file %s", list);
    FILE *f = fdopen(fd, "w");
    int ok = f != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = !strchr(paths[i], '\n') && fprintf(f, "%s\n", paths[i]) > 0;
    if (f)
        ok = (fclose(f) == 0) && ok;
    else
        close(fd);
    if (!ok || al_sh_quote(ql, sizeof ql, list, e)) {
        unlink(list);
        return ok ? -1 : al_errf(e, "cannot write the temporary file %s", list);
    }
    /* dpkg-query exits 1 when a file has no package: its output still counts */
    snprintf(cmd, sizeof cmd, "xargs -d '\\n' dpkg-query -S < %s 2>/dev/null; true", ql);
    unsigned char *out = NULL;
    size_t m = 0;
    int rc = al_run_capture(cmd, "dpkg-query -S", (size_t)256 << 20, &out, &m, e);
    unlink(list);
    if (rc) return -1;
    al_deb_pkg *p = NULL;
    size_t np = 0, cap = 0, owned = 0;
    for (char *line = (char *)out, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char name[128];
        if (!owner_of(line, name, sizeof name)) continue;
        owned++;
        size_t j = 0;
        while (j < np && strcmp(p[j].name, name)) j++;
        if (j == np) {
            if (np == cap) {
                al_deb_pkg *q = realloc(p, (cap = cap ? 2 * cap : 8) * sizeof *q);
                if (!q) {
                    free(p), free(out);
                    return al_errf(e, "out of memory");
                }
                p = q;
            }
            memset(&p[np], 0, sizeof *p);
            snprintf(p[np++].name, sizeof p->name, "%s", name);
        }
        p[j].files++;
    }
    free(out);
    for (size_t j = 0; j < np; j++) al_deb_version(p[j].name, p[j].version, sizeof p[j].version);
    if (np) qsort(p, np, sizeof *p, cmp_pkg);
    *pkgs = p, *n_pkgs = np;
    *unowned = owned < n ? n - owned : 0;
    return 0;
}
