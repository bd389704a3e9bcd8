/* test_idents.c -- the names table and its pair task on code: a variable
 * of each held-out function renamed to an invented name (al_idents_in_code,
 * `names --code`, tasks idents and idents-key). */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attnlab/checkpoint.h"
#include "attnlab/data.h"
#include "attnlab/model.h"
#include "attnlab/names_text.h"
#include "attnlab/pairs.h"
#include "test.h"

/* A Python file (one function with three variables, then a class whose
 * method's only repeated word is an attribute) and a Go file. */
static const char *PY = "import os\n\ndef area(width, height):\n    total = width * height\n"
                        "    return total\n\nclass A:\n    def f(self, x):\n"
                        "        return self.x + 1\n";
static const char *PY_FUNC = "def area(width, height):\n    total = width * height\n"
                             "    return total\n\n";
static const char *GO = "package io\n\nfunc (r *Reader) Read(buf []byte) (n int, err error) {\n"
                        "\tn = copy(buf, r.data)\n\treturn n, nil\n}\n\nvar x = 1\n";
static const char *GO_FUNC = "func (r *Reader) Read(buf []byte) (n int, err error) {\n"
                             "\tn = copy(buf, r.data)\n\treturn n, nil\n";

/* BOS + each text, encoded with tok, as a token file in memory. */
static int code_val(const al_tokenizer *tok, const char *const *texts, int n, al_tokens *v) {
    al_err e;
    size_t cap = 1;
    for (int i = 0; i < n; i++) cap += strlen(texts[i]) + 1;
    v->tok = calloc(cap, sizeof *v->tok);
    v->n = 0;
    for (int i = 0; i < n; i++) {
        int *ids;
        size_t k;
        if (al_tok_encode(tok, (const unsigned char *)texts[i], strlen(texts[i]), 0, &ids, &k, &e))
            return -1;
        v->tok[v->n++] = (uint16_t)al_tok_eot(tok);
        for (size_t j = 0; j < k; j++) v->tok[v->n++] = (uint16_t)ids[j];
        free(ids);
    }
    return 0;
}

/* text with every whole-word w replaced by r (the test's own rename). */
static char *renamed(const char *text, const char *w, const char *r) {
    size_t wn = strlen(w), cap = strlen(text) * (strlen(r) + 1) + 1, o = 0;
    char *out = calloc(cap, 1);
    for (size_t i = 0; text[i];) {
        int match = !strncmp(text + i, w, wn); /* then text[i + wn] is in the string */
        int edge0 = i == 0 || !(isalnum((unsigned char)text[i - 1]) || text[i - 1] == '_');
        int edge1 = match && !(isalnum((unsigned char)text[i + wn]) || text[i + wn] == '_');
        if (match && edge0 && edge1) {
            strcpy(out + o, r);
            o += strlen(r), i += wn;
        } else
            out[o++] = text[i++];
    }
    return out;
}

/* Byte offset of the n-th (0-based) whole-word occurrence of w in text. */
static long nth_word(const char *text, const char *w, int n) {
    size_t wn = strlen(w);
    for (const char *p = text; (p = strstr(p, w)); p += wn) {
        int edge0 = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int edge1 = !(isalnum((unsigned char)p[wn]) || p[wn] == '_');
        if (edge0 && edge1 && n-- == 0) return p - text;
    }
    return -1;
}

static char *decode(const al_tokenizer *tok, const int *ids, int n) {
    al_err e;
    unsigned char *b = NULL;
    size_t nb = 0;
    if (al_tok_decode(tok, ids, (size_t)n, &b, &nb, &e)) return NULL;
    char *s = calloc(nb + 1, 1);
    memcpy(s, b, nb);
    free(b);
    return s;
}

/* One item: the function alone with the variable renamed; first and
 * second are the variable's first two uses (spelt alike here: each is
 * the same kind of word start), the pieces spell the name. */
static void check_item(const al_tokenizer *tok, const al_name_story *s, const char *func,
                       const char *const *vars) {
    int known = 0;
    for (int i = 0; vars[i]; i++) known |= !strcmp(s->was, vars[i]);
    CHECKF(known, "renamed '%s'", s->was);
    CHECK(s->ids[0] == al_tok_eot(tok) && s->k >= 2 && s->k <= AL_NAME_MAX_PIECES);
    char *want = renamed(func, s->was, s->name), *got = decode(tok, s->ids + 1, s->len - 1);
    CHECKF(got && !strcmp(got, want), "got [%s]\nwant [%s]", got ? got : "", want);
    CHECK(memcmp(s->ids + s->first, s->piece, (size_t)s->k * sizeof(int)) == 0);
    CHECK(memcmp(s->ids + s->second, s->piece, (size_t)s->k * sizeof(int)) == 0);
    char *pc = decode(tok, s->piece, s->k);
    CHECKF(pc && !strcmp(pc + (pc[0] == ' '), s->name), "pieces [%s] name %s", pc ? pc : "",
           s->name);
    /* both copies sit where the name's uses are, in order */
    long at[2];
    int pos[2] = {s->first, s->second};
    for (int u = 0; u < 2; u++) {
        char *pre = decode(tok, s->ids + 1, pos[u] - 1);
        at[u] = pre ? (long)strlen(pre) + (pc && pc[0] == ' ') : -1;
        free(pre);
    }
    long n0 = nth_word(want, s->name, 0);
    CHECKF(at[0] == n0, "first use at byte %ld, the name first at %ld", at[0], n0);
    CHECKF(at[1] > at[0] && at[1] == nth_word(want, s->name, 1), "second use at %ld", at[1]);
    free(pc);
    free(want);
    free(got);
}

TEST(idents_in_code_renames_one_variable_per_function) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 3);
    al_err e;
    al_tokenizer *tok;
    char p[1100];
    snprintf(p, sizeof p, "%s/tok.json", dir);
    CHECK_OK(al_tok_load(p, &tok, &e), &e);
    const char *texts[] = {PY, GO};
    al_tokens v = {0};
    CHECK(code_val(tok, texts, 2, &v) == 0);
    al_name_stories s, s2;
    CHECK_OK(al_idents_in_code(tok, &v, 10, 3, 256, &s, &e), &e);
    /* the method's repeated word is an attribute, `area` and `Read` are
     * the functions' names: one item from each file */
    CHECKF(s.n == 2, "%d items", s.n);
    if (s.n == 2) {
        const char *py_vars[] = {"width", "height", "total", NULL};
        const char *go_vars[] = {"r", "buf", "n", NULL};
        check_item(tok, &s.s[0], PY_FUNC, py_vars);
        check_item(tok, &s.s[1], GO_FUNC, go_vars);
    }
    /* deterministic in the seed */
    CHECK_OK(al_idents_in_code(tok, &v, 10, 3, 256, &s2, &e), &e);
    CHECK(s2.n == s.n && s.n > 0 && !strcmp(s.s[0].name, s2.s[0].name) &&
          s.s[0].len == s2.s[0].len &&
          !memcmp(s.s[0].ids, s2.s[0].ids, (size_t)s.s[0].len * sizeof(int)));
    al_name_stories_free(&s2);
    al_name_stories_free(&s);
    /* a file of prose has no function */
    const char *prose[] = {" one day a little girl went to the park with her mom and they played"};
    al_tokens_free(&v);
    CHECK(code_val(tok, prose, 1, &v) == 0);
    CHECK(al_idents_in_code(tok, &v, 10, 3, 256, &s, &e) == -1 && strstr(e.msg, "no function"));
    CHECK(al_idents_in_code(tok, &v, 0, 3, 256, &s, &e) == -1);
    al_tokens_free(&v);
    al_tok_free(tok);
}

/* `names --code` stores what a direct forward pass gives; the pair task
 * renames the first use and keeps the rest; a task without code, or
 * --name with --code, is refused before any run. */
TEST(idents_cli_and_pair_task) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 2, 5);
    char mdir[1100], val[1100];
    snprintf(mdir, sizeof mdir, "%s/m2", dir);
    snprintf(val, sizeof val, "%s/code.val.bin", dir);
    al_err e;
    al_model m;
    al_tokenizer *tok;
    CHECK_OK(al_ckpt_load(mdir, &m, &tok, &e), &e);
    /* short functions: the tiny model's context is 32 tokens */
    const char *texts[] = {"def f(x, ab):\n    ab = x\n    return ab\n",
                           "def g(y, cd):\n    cd = y\n    return cd\n",
                           "def h(z, ef):\n    ef = z\n    return ef\n"};
    al_tokens v = {0};
    CHECK(code_val(tok, texts, 3, &v) == 0);
    int *ids = calloc(v.n, sizeof *ids);
    for (size_t i = 0; ids && i < v.n; i++) ids[i] = v.tok[i];
    CHECK_OK(al_tokens_save(val, ids, v.n, &e), &e);
    free(ids);
    char db[1100];
    snprintf(db, sizeof db, "%s", t_path("r.db"));
    CHECK(t_sh("%s names --model %s --db %s --data %s --code --stories 5 > %s 2>&1", t_bin(), mdir,
               db, val, t_path("out.txt")) == 0);
    char *out = t_slurp(t_path("out.txt"));
    CHECKF(out && strstr(out, "held-out functions") && strstr(out, "a variable renamed"), "%s",
           out ? out : "");
    free(out);
    al_name_stories s;
    CHECK_OK(al_idents_in_code(tok, &v, 5, 1, m.cfg.n_ctx, &s, &e), &e);
    CHECK(s.n >= 1);
    double want = 0;
    for (int i = 0; i < s.n; i++) {
        const al_name_story *st = &s.s[i];
        CHECK(st->len <= m.cfg.n_ctx);
        CHECK_OK(al_model_forward(&m, st->ids, NULL, 1, st->len, &e), &e);
        want += m.probs[(size_t)st->second * m.cfg.d_vocab + st->piece[1]];
    }
    want /= s.n > 0 ? s.n : 1;
    char *got = t_sql(db, "SELECT value FROM model_scores WHERE metric = 'names_second_p2'");
    CHECKF(got && fabs(atof(got) - want) < 1e-6 * (1 + want), "%s vs %g", got ? got : "", want);
    free(got);
    CHECK(t_sql_long(db, "SELECT value FROM model_scores WHERE metric = 'names_stories'") == s.n);
    /* the pair task: clean is the item up to the second use's first piece;
     * key variant: the first use is another name, first piece included */
    int made = 0;
    for (int key = 0; key <= 1; key++) {
        al_pairs t;
        if (al_pairs_names_text(tok, &v, 5, 1, m.cfg.n_ctx, key, 1, &t, &e)) {
            CHECKF(strstr(e.msg, "no function"), "%s", e.msg); /* none kept: said so */
            continue;
        }
        made++;
        CHECK(!strcmp(t.task, key ? "idents-key" : "idents"));
        for (int i = 0; i < t.N; i++) {
            const int *cl = t.clean + (size_t)i * t.T, *co = t.corr + (size_t)i * t.T;
            int diff = 0, at = -1;
            for (int j = 0; j < t.len[i]; j++)
                if (co[j] != cl[j]) diff++, at = at < 0 ? j : at;
            CHECK(diff >= 1 && diff <= AL_NAME_MAX_PIECES && at > 0);
            CHECK(key ? co[at] != cl[at] : at > 0);
        }
        al_pairs_free(&t);
    }
    CHECK(made >= 1);
    al_name_stories_free(&s);
    CHECK(t_sh("%s patch --model %s --db %s --task idents-key --probe-tokens text:%s --n 3 "
               "> /dev/null 2>&1",
               t_bin(), mdir, db, val) == 0);
    CHECK_SQL(db, "SELECT task FROM patching_runs", "idents-key");
    long runs = t_sql_long(db, "SELECT count(*) FROM runs");
    CHECK(t_sh("%s patch --model %s --db %s --task idents 2> %s", t_bin(), mdir, db,
               t_path("err.txt")) == 2);
    char *err = t_slurp(t_path("err.txt"));
    CHECKF(err && strstr(err, "renames variables in held-out code"), "%s", err ? err : "");
    free(err);
    CHECK(t_sh("%s names --model %s --db %s --data %s --code --name Bamurik 2> %s", t_bin(), mdir,
               db, val, t_path("err.txt")) != 0);
    err = t_slurp(t_path("err.txt"));
    CHECKF(err && strstr(err, "cannot be combined"), "%s", err ? err : "");
    free(err);
    long runs2 = t_sql_long(db, "SELECT count(*) FROM runs");
    CHECKF(runs2 == runs, "%ld runs, %ld before", runs2, runs);
    al_tokens_free(&v);
    al_tok_free(tok);
    al_model_free(&m);
}
