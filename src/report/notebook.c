/* notebook.c -- report.ipynb (nbformat 4.5): cells that open the results
 * database with Python's sqlite3, run the queries of docs/sql.md (their text
 * comes from the store, store_report.h) and show the report's pictures. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "report_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/json.h"

static cJSON *nb_source(const char *text) {
    cJSON *arr = cJSON_CreateArray();
    char *clean = al_utf8_sanitize(text, strlen(text));
    if (!arr || !clean) {
        cJSON_Delete(arr);
        free(clean);
        return NULL;
    }
    /* nbformat keeps source as lines, each with its newline but the last */
    for (char *p = clean; *p;) {
        size_t n = strcspn(p, "\n");
        size_t k = n + (p[n] == '\n');
        char save = p[k];
        p[k] = 0;
        cJSON_AddItemToArray(arr, cJSON_CreateString(p));
        p[k] = save;
        p += k;
    }
    free(clean);
    return arr;
}

static int nb_cell(cJSON *cells, const char *type, const char *text) {
    cJSON *c = cJSON_CreateObject(), *src = nb_source(text);
    char id[32];
    if (!c || !src) {
        cJSON_Delete(c);
        cJSON_Delete(src);
        return -1;
    }
    snprintf(id, sizeof id, "cell-%d", cJSON_GetArraySize(cells) + 1);
    cJSON_AddStringToObject(c, "cell_type", type);
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddItemToObject(c, "metadata", cJSON_CreateObject());
    if (strcmp(type, "code") == 0) {
        cJSON_AddNullToObject(c, "execution_count");
        cJSON_AddItemToObject(c, "outputs", cJSON_CreateArray());
    }
    cJSON_AddItemToObject(c, "source", src);
    cJSON_AddItemToArray(cells, c);
    return 0;
}

/* The setup cell after "DB = ...": the show() helper; then a first
 * show() of the models query. */
static const char nb_setup[] =
    "import sqlite3\n"
    "from IPython.display import Image, display\n"
    "\n"
    "con = sqlite3.connect(DB)\n"
    "\n"
    "def show(sql, params=(), limit=50):\n"
    "    \"\"\"Run a query and print its rows as an aligned table.\"\"\"\n"
    "    cur = con.execute(sql, params)\n"
    "    cols = [d[0] for d in cur.description]\n"
    "    rows = cur.fetchmany(limit)\n"
    "    fmt = lambda v: 'NULL' if v is None else ('%.4g' % v if isinstance(v, float) else str(v))\n"
    "    text = [[fmt(v) for v in r] for r in rows]\n"
    "    width = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(cols)]\n"
    "    print('  '.join(c.ljust(w) for c, w in zip(cols, width)))\n"
    "    for r in text:\n"
    "        print('  '.join(v.ljust(w) for v, w in zip(r, width)))\n"
    "    print('(%d row%s)' % (len(rows), '' if len(rows) == 1 else 's'))\n"
    "\n";

/* Path of the database as the notebook (in out_dir) should open it:
 * relative to out_dir, so the folder can be moved or copied with its
 * database (an absolute path only when no relative one can be made). */
static void db_for_notebook(const char *db, const char *out_dir, char *buf, size_t cap) {
    char *rd = realpath(db, NULL), *ro = realpath(out_dir, NULL);
    if (rd && ro) {
        if (al_path_relative(ro, rd, buf, cap) != 0) snprintf(buf, cap, "%s", rd);
    } else {
        snprintf(buf, cap, "%s", db);
    }
    free(rd);
    free(ro);
}

/* A Python string literal of s (ASCII-safe escapes for quotes and \). */
static void py_str(al_buf *b, const char *s) {
    al_buf_puts(b, "'");
    for (; *s; s++) {
        if (*s == '\\' || *s == '\'') al_buf_put(b, "\\", 1);
        if (*s == '\n')
            al_buf_puts(b, "\\n");
        else
            al_buf_put(b, s, 1);
    }
    al_buf_puts(b, "'");
}

int rep_write_notebook(rep *R, const char *title, char *path_out, al_err *e) {
    cJSON *nb = cJSON_CreateObject(), *cells = cJSON_CreateArray();
    al_buf t = AL_BUF_INIT;
    int rc = -1, io = 0; /* io: a file error already in e */
    if (!nb || !cells) goto done;
    char dbp[AL_PATH_MAX + 64];
    db_for_notebook(R->o->db, R->o->out_dir, dbp, sizeof dbp);
    al_buf_printf(
        &t,
        "# %s\n\nThe analysis behind `index.html`, to carry on in Python: the results "
        "database (`%s`) opened with `sqlite3`, the queries of docs/sql.md, and the pictures. "
        "Table and column meanings are in docs/sql.md.",
        title, dbp);
    int bad = nb_cell(cells, "markdown", t.p);
    al_buf_reset(&t);
    al_buf_puts(&t, "DB = ");
    py_str(&t, dbp);
    al_buf_puts(&t, "  # relative to this notebook's folder\n");
    al_buf_puts(&t, nb_setup);
    al_buf_printf(&t, "show('%s')\n", al_sr_notebook_models_query());
    bad |= nb_cell(cells, "code", t.p);
    size_t n_q;
    const al_sr_nb_query *nbq = al_sr_notebook_queries(&n_q);
    for (size_t i = 0; !bad && i < n_q; i++) {
        al_buf_reset(&t);
        al_buf_printf(&t, "### %s", nbq[i].title);
        bad |= nb_cell(cells, "markdown", t.p);
        al_buf_reset(&t);
        al_buf_printf(&t, "show('''\n%s\n''')", nbq[i].sql);
        bad |= nb_cell(cells, "code", t.p);
    }
    if (R->n_pics && !bad) bad |= nb_cell(cells, "markdown", "## Pictures");
    for (int i = 0; !bad && i < R->n_pics; i++) {
        al_buf_reset(&t);
        al_buf_printf(&t, "`%s`: %s", R->pics[i].file, R->pics[i].caption);
        bad |= nb_cell(cells, "markdown", t.p);
        al_buf_reset(&t);
        al_buf_puts(&t, "display(Image(filename=");
        py_str(&t, R->pics[i].file);
        al_buf_puts(&t, "))");
        bad |= nb_cell(cells, "code", t.p);
    }
    if (bad || !al_buf_ok(&t)) goto done;
    cJSON *meta = cJSON_CreateObject(), *ks = cJSON_CreateObject(), *li = cJSON_CreateObject();
    cJSON_AddStringToObject(ks, "display_name", "Python 3");
    cJSON_AddStringToObject(ks, "language", "python");
    cJSON_AddStringToObject(ks, "name", "python3");
    cJSON_AddStringToObject(li, "name", "python");
    cJSON_AddItemToObject(meta, "kernelspec", ks);
    cJSON_AddItemToObject(meta, "language_info", li);
    cJSON_AddItemToObject(nb, "cells", cells);
    cells = NULL;
    cJSON_AddItemToObject(nb, "metadata", meta);
    cJSON_AddNumberToObject(nb, "nbformat", 4);
    cJSON_AddNumberToObject(nb, "nbformat_minor", 5);
    char *txt = al_json_print(1, nb);
    if (!txt) goto done;
    if (al_path_join(path_out, AL_PATH_MAX + 64, R->dir, "report.ipynb", e) == 0 &&
        al_write_file_atomic(path_out, txt, strlen(txt), e) == 0 &&
        al_path_join(path_out, AL_PATH_MAX + 64, R->o->out_dir, "report.ipynb", e) == 0)
        rc = 0;
    else
        io = 1;
    free(txt);
done:
    if (rc && !io) al_errf(e, "out of memory writing report.ipynb");
    cJSON_Delete(cells);
    cJSON_Delete(nb);
    al_buf_free(&t);
    return rc;
}
