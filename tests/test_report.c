/* test_report.c -- index.html and report.ipynb: escaping, the numbers on
 * the page against values worked out by hand, every picture present and
 * decodable, the notebook's structure (and its code, run by Python when
 * there is one), and the page rendered in headless Chromium with every
 * image loaded. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/checkpoint.h"
#include "attnlab/image.h"
#include "attnlab/model.h"
#include "attnlab/png.h"
#include "attnlab/report.h"
#include "attnlab/stats.h"
#include "attnlab/store.h"
#include "attnlab/store_report.h"
#include "attnlab/tokenizer.h"
#include "test.h"

TEST(report_html_escape) {
    /* entities, a valid 2-byte character kept, a stray byte, a control
     * byte, an overlong '/', a UTF-16 surrogate, newline kept */
    const char in[] = "a<b&\"c'd>\xc3\xa9\xff\x01|\xc0\xaf|\xed\xa0\x80\n";
    char *out = al_html_escape(in, sizeof in - 1);
    CHECK(out && strcmp(out, "a&lt;b&amp;&quot;c&#39;d&gt;\xc3\xa9\\xff\\x01|\\xc0\\xaf|"
                             "\\xed\\xa0\\x80\n") == 0);
    free(out);
    out = al_html_escape("x\0y", 3); /* NUL inside: escaped, not a terminator */
    CHECK(out && strcmp(out, "x\\x00y") == 0);
    free(out);
    out = al_utf8_sanitize("ok\xff\xe2\x90\xa3", 6); /* ␣ kept, the stray byte U+FFFD */
    CHECK(out && strcmp(out, "ok\xef\xbf\xbd\xe2\x90\xa3") == 0);
    free(out);
}

TEST(report_spearman) {
    double x[] = {1, 2, 3, 4}, y[] = {1, 3, 2, 4}, r[] = {4, 3, 2, 1};
    CHECK_NEAR(al_spearman(x, y, 4), 0.8, 1e-12); /* 1 - 6*2/(4*15) */
    CHECK_NEAR(al_spearman(x, r, 4), -1, 1e-12);
    /* ties take the average rank: x ranks 1, 2.5, 2.5, 4; r = 4.5/sqrt(4.5*5) */
    double xt[] = {10, 20, 20, 30};
    CHECK_NEAR(al_spearman(xt, x, 4), 4.5 / sqrt(22.5), 1e-12);
    double c[] = {5, 5, 5, 5};
    CHECK(isnan(al_spearman(c, x, 4)));
    CHECK(isnan(al_spearman(x, y, 1)));
}

/* ------------------------------------------------------------ fixture */

/* Text whose tokens hold every character HTML cares about. */
static const char nasty[] = "<b>\"x\"&'y'</b> Bamurik saw a cat. Bamurik said <hi> & \"bye\". "
                            "<b>\"x\"&'y'</b> Bamurik saw a cat. Bamurik said <hi> & \"bye\".\n";

static al_tokenizer *tokenizer(void) {
    al_err e;
    al_tokenizer *t = NULL;
    CHECK_OK(al_tok_train((const unsigned char *)nasty, sizeof nasty - 1, 290, 0, &t, &e), &e);
    return t;
}

/* Model dir with 1 layer x 4 heads, d_vocab = the tokenizer's. */
static void make_model(const char *dir, const al_tokenizer *tok, int tied, uint64_t seed) {
    al_err e;
    al_config c = al_config_default();
    c.n_layers = 1, c.d_model = 16, c.n_heads = 4, c.d_head = 4, c.n_ctx = 48;
    c.d_vocab = al_tok_vocab_size(tok), c.tied_embeddings = tied, c.seed = seed;
    al_model m;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    CHECK_OK(al_ckpt_save(dir, &m, tok, NULL, NULL, NULL, &e), &e);
    al_model_free(&m);
}

/* Rows for one model, as the commands would write them. eig/abl: the
 * copying scores of heads 0.0..0.3. */
static void fill(al_store *st, const char *dir, const double *eig, const double *abl,
                 int with_train) {
    al_err e;
    al_model m;
    int64_t mid, run;
    CHECK_OK(al_ckpt_load(dir, &m, NULL, &e), &e);
    CHECK_OK(al_store_model(st, dir, NULL, &m, NULL, &mid, &e), &e);
    CHECK_OK(al_store_run_begin(st, "circuits", "{}", mid, &run, &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    for (int h = 0; h < 4; h++) {
        CHECK_OK(al_store_put_head_score(st, run, mid, 0, h, "copying_eigen", eig[h], &e), &e);
        CHECK_OK(al_store_put_head_score(st, run, mid, 0, h, "copying_top1", 0.25, &e), &e);
        for (int i = 0; i < 4; i++) {
            CHECK_OK(al_store_put_singular_value(st, run, mid, 0, h, "qk", i, 4.0 - i, &e), &e);
            CHECK_OK(al_store_put_singular_value(st, run, mid, 0, h, "ov", i, 3.0 - i * 0.5, &e),
                     &e);
        }
    }
    /* a skip-trigram whose strings need escaping, one with a stray byte */
    const char *a = "<b>\"x\"&'y'",
               *b = "\xe2\x90\xa3"
                    "Bam",
               *c = "\xff<";
    al_trigram_row t = {1, 3, 4, 5, a, b, c, strlen(a), strlen(b), strlen(c), 2.5, 1.5, 3.75};
    CHECK_OK(al_store_put_skip_trigram(st, run, mid, 0, 1, &t, &e), &e);
    CHECK_OK(al_store_run_finish(st, run, &e), &e);
    CHECK_OK(al_store_run_begin(st, "scores", "{}", mid, &run, &e), &e);
    CHECK_OK(al_store_tx_begin(st, &e), &e);
    for (int h = 0; h < 4; h++) {
        CHECK_OK(al_store_put_head_score(st, run, mid, 0, h, "copying_ablation", abl[h], &e), &e);
        CHECK_OK(al_store_put_head_score(st, run, mid, 0, h, "induction", h == 2 ? 0.75 : 0.01, &e),
                 &e);
        CHECK_OK(al_store_put_head_score(st, run, mid, 0, h, "prev_token", h == 3 ? 0.5 : 0.02, &e),
                 &e);
    }
    CHECK_OK(al_store_put_model_score(st, run, mid, "icl_gain", 0.125, &e), &e);
    CHECK_OK(al_store_run_finish(st, run, &e), &e);
    if (with_train) {
        CHECK_OK(al_store_run_begin(st, "train", "{}", mid, &run, &e), &e);
        CHECK_OK(al_store_tx_begin(st, &e), &e);
        for (long s = 0; s <= 40; s += 10) {
            al_train_log_row r = {s,        s * 64.0, 5 - s / 20.0, 5.1 - s / 20.0, 0.01 * s, 1e-3,
                                  s / 10.0, NAN,      NAN};
            CHECK_OK(al_store_put_train_log(st, run, &r, &e), &e);
            for (int h = 0; h < 4; h++)
                CHECK_OK(al_store_put_train_head_score(st, run, s, 0, h, "induction", h * s / 100.0,
                                                       &e),
                         &e);
        }
        CHECK_OK(al_store_run_finish(st, run, &e), &e);
    }
    al_model_free(&m);
}

/* Hand-worked copying scores.
 * Model A (untied): eigen > 0.5 on heads 0, 1; ablation > 0.01 on 0, 2 ->
 *   agree on heads 0 and 3: 2 of 4. Ranks eigen 4,3,1,2; ablation 4,2,3,1;
 *   sum d^2 = 6, rho = 1 - 36/60 = 0.40. Head 0.2 copies by ablation but
 *   has a negative eigen score.
 * Model B (tied): eigen > 0.5 on 1, 2; ablation > 0.01 on 0, 3 -> agree on
 *   none. Ranks eigen 1,4,3,2; ablation 4,1,2,3; sum d^2 = 20, rho =
 *   1 - 120/60 = -1.00. */
static const double eigA[4] = {0.9, 0.8, -0.6, 0.1}, ablA[4] = {0.2, 0.001, 0.15, 0.0};
static const double eigB[4] = {-0.9, 0.7, 0.6, 0.2}, ablB[4] = {0.3, 0.0, 0.005, 0.05};

static void fixture_eig(const double *eig_a) {
    al_err e;
    al_tokenizer *tok = tokenizer();
    make_model(t_path("untied"), tok, 0, 1);
    make_model(t_path("tied"), tok, 1, 2);
    al_store *st;
    CHECK_OK(al_store_open(t_path("r.db"), &st, &e), &e);
    fill(st, t_path("untied"), eig_a, ablA, 1);
    fill(st, t_path("tied"), eigB, ablB, 0);
    al_store_close(st);
    al_tok_free(tok);
}

static void fixture(void) { fixture_eig(eigA); }

static al_report_result write_report(int n_models) {
    al_report_opts o = al_report_defaults();
    o.db = t_path("r.db");
    o.models[0] = t_path("untied");
    o.models[1] = t_path("tied");
    o.labels[0] = "A<untied>";
    o.n_models = n_models;
    o.out_dir = t_path("out");
    o.prompt = "<b>\"x\"&'y'</b> Bamurik saw a cat. Bamurik";
    o.repeat = 6;
    o.top_n = 8;
    o.threads = 2;
    al_report_result r;
    al_err e;
    CHECK_OK(al_report_write(&o, &r, &e), &e);
    return r;
}

/* The src, width and height of every <img> (up to max); returns count. */
typedef struct img {
    char src[256];
    int w, h;
} img;

static int images(const char *html, img *out, int max) {
    int n = 0;
    for (const char *p = html; (p = strstr(p, "<img src=\"")) != NULL; p++) {
        if (n == max) return -1;
        img *m = &out[n++];
        const char *s = p + 10, *q = strchr(s, '"');
        snprintf(m->src, sizeof m->src, "%.*s", q ? (int)(q - s) : 0, s);
        if (!q || sscanf(q, "\" width=\"%d\" height=\"%d\"", &m->w, &m->h) != 2) m->w = m->h = -1;
    }
    return n;
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* The report's readers (store_report.h) on the fixture: rows, their
 * order and NULLs, scalars, the picked head, and refusals of bad
 * arguments that leave the rows empty. */
TEST(report_store_readers) {
    fixture();
    al_err e;
    al_store *st;
    CHECK_OK(al_store_open(t_path("r.db"), &st, &e), &e);
    al_rows q;
    /* model 1 (A): induction 0.75 on head 0.2 only; prev_token 0.5 on 0.3 */
    CHECK_OK(al_sr_heads_above(st, "1", AL_SR_INDUCTION, &q, &e), &e);
    CHECK(q.nr == 1 && q.nc == 4 && strcmp(al_rows_t(&q, 0, 0), "0.2") == 0);
    CHECK_NEAR(al_rows_x(&q, 0, 1), 0.75, 1e-12);
    al_rows_free(&q);
    CHECK(q.nr == 0 && q.t == NULL);
    /* copying pairs by layer, head: eigen and ablation as stored */
    CHECK_OK(al_sr_copy_pairs(st, "1", 0, &q, &e), &e);
    CHECK(q.nr == 4 && q.nc == 3);
    for (int h = 0; h < 4 && q.nr == 4; h++) {
        CHECK_NEAR(al_rows_x(&q, h, 1), eigA[h], 1e-12);
        CHECK_NEAR(al_rows_x(&q, h, 2), ablA[h], 1e-12);
    }
    al_rows_free(&q);
    /* copying_ablation_excess was never written: no rows */
    CHECK_OK(al_sr_copy_pairs(st, "1", 1, &q, &e), &e);
    CHECK(q.nr == 0);
    al_rows_free(&q);
    /* the copying head by its own OV circuit (eigen > 0.5: 0.0, 0.1) with
     * the larger ablation score: 0.0 */
    int l = -1, h = -1;
    CHECK(al_sr_best_head(st, "1", AL_SR_PICK_OWN_COPY, &l, &h, &e) == 1 && l == 0 && h == 0);
    CHECK(al_sr_best_head(st, "99", AL_SR_PICK_PREV, &l, &h, &e) == 0);
    CHECK(al_sr_best_head(st, "1", (al_sr_pick)7, &l, &h, &e) == -1);
    double v;
    CHECK_OK(al_sr_icl_gain(st, "1", &v, &e), &e);
    CHECK_NEAR(v, 0.125, 1e-12);
    CHECK_OK(al_sr_count_heads_above(st, "1", AL_SR_PREV_TOKEN, &v, &e), &e);
    CHECK(v == 1);
    CHECK_OK(al_sr_latest_discover(st, "1", &v, &e), &e); /* no discover run: NaN */
    CHECK(isnan(v));
    /* the training log of A: 5 evaluations in step order */
    CHECK_OK(al_sr_training_log(st, "1", &q, &e), &e);
    CHECK(q.nr == 5 && al_rows_x(&q, 0, 0) == 0 && al_rows_x(&q, 4, 0) == 40);
    al_rows_free(&q);
    CHECK(al_sr_heatmap_cells(st, (al_sr_heatmap)9, "1", NULL, &q, &e) == -1 && q.nr == 0);
    al_store_close(st);
    /* the notebook's query texts: titled, non-empty */
    size_t n = 0;
    const al_sr_nb_query *nb = al_sr_notebook_queries(&n);
    CHECK(n > 10);
    for (size_t i = 0; i < n; i++) CHECK(nb[i].title[0] && strncmp(nb[i].sql, "SELECT", 6) == 0);
    CHECK(strncmp(al_sr_notebook_models_query(), "SELECT", 6) == 0);
}

/* A head whose full OV circuit is zero has copying_eigen NULL (0/0):
 * model A with head 0.1's eigen score NULL leaves heads 0, 2, 3: eigen >
 * 0.5 on 0, ablation > 0.01 on 0, 2 -> agree on 0 and 3: 2 of 3. Ranks
 * eigen 3,1,2; ablation 3,2,1; sum d^2 = 2, rho = 1 - 12/24 = 0.50. */
TEST(report_copying_null_eigen_left_out) {
    const double eig[4] = {0.9, NAN, -0.6, 0.1};
    fixture_eig(eig);
    char *v = t_sql(t_path("r.db"), "SELECT count(*) FROM head_summary WHERE model_id = 1 AND "
                                    "copying_eigen IS NULL");
    CHECK(v && !strcmp(v, "1"));
    free(v);
    al_report_result r = write_report(1);
    (void)r;
    char *html = t_slurp(t_path("out/index.html"));
    CHECK(html && strstr(html, "agree on <b>2 of 3</b> heads"));
    CHECK(html && strstr(html, "&rho; = +0.50"));
    free(html);
}

TEST(report_page_numbers_and_pictures) {
    fixture();
    al_report_result r = write_report(2);
    CHECKF(r.n_failed == 0, "%d pictures failed", r.n_failed);
    char *html = t_slurp(t_path("out/index.html"));
    CHECK(html != NULL);
    if (!html) return;
    /* escaped everywhere: the label, the trigram strings, a stray byte */
    CHECK(strstr(html, "A&lt;untied&gt;") && !strstr(html, "A<untied>"));
    CHECK(strstr(html, "&lt;b&gt;&quot;x&quot;&amp;&#39;y&#39; … \xe2\x90\xa3"
                       "Bam → \\xff&lt;"));
    CHECK(!strstr(html, "<b>\"x\"") && !strstr(html, "<hi>"));
    /* model A's copying agreement (worked out above) */
    CHECK(strstr(html, "agree on <b>2 of 4</b> heads"));
    CHECK(strstr(html, "&rho; = +0.40"));
    CHECK(strstr(html, "calls 1 negative: 0.2 (copying_eigen -0.60, ablation +0.150 nats)"));
    /* model B and the tied-vs-untied answer */
    CHECK(strstr(html, "agree on <b>0 of 4</b> heads") && strstr(html, "&rho; = -1.00"));
    CHECK(strstr(html, "With tied embeddings the two scores classify 0 of 4 heads alike (0%)"));
    CHECK(strstr(html, "With untied embeddings the two scores classify 2 of 4 heads alike (50%)"));
    CHECK(strstr(html, "better with <b>untied</b>"));
    /* heads named by their scores */
    CHECK(strstr(html, "induction heads (induction &gt; 0.4)</b>: 0.2 (0.750)"));
    CHECK(strstr(html, "previous-token heads (prev_token &gt; 0.4)</b>: 0.3 (0.500)"));
    /* model card: parameters V*C + n_ctx*C + 4*L*H*C*D (+ C*V untied) */
    al_tokenizer *tok = tokenizer();
    int V = al_tok_vocab_size(tok);
    al_tok_free(tok);
    char want[128];
    snprintf(want, sizeof want, "<td>parameters</td><td>%d</td>",
             V * 16 + 48 * 16 + 4 * 4 * 16 * 4 + 16 * V);
    CHECKF(strstr(html, want), "missing %s", want);
    /* head summary: one row per head of each model */
    CHECK(count(html, "<tr><td class=t>0.") >= 8);
    /* every picture on the page exists, decodes, and has the size given */
    img im[64];
    int n = images(html, im, 64);
    CHECKF(n == r.n_pictures && n >= 10, "%d images on the page, %d written", n, r.n_pictures);
    for (int i = 0; i < n && i < 64; i++) {
        char p[600];
        snprintf(p, sizeof p, "out/%.255s", im[i].src);
        al_image pic;
        al_err e;
        CHECKF(al_png_read(t_path(p), &pic, NULL, &e) == 0, "%s: %s", im[i].src, e.msg);
        if (im[i].w <= 0) continue;
        CHECKF(pic.w == im[i].w && pic.h == im[i].h, "%s is %dx%d, page says %dx%d", im[i].src,
               pic.w, pic.h, im[i].w, im[i].h);
        al_image_free(&pic);
    }
    /* the full-circuit pictures show a head whose own OV copies: in B the
     * ablation-best head 0.0 has copying_eigen -0.9; of 0.1 and 0.2 (eigen
     * 0.7, 0.6) ablation ranks 0.2 first */
    CHECK(strstr(html, "A_untied_-ov-0.0.png") && strstr(html, "\"tied-ov-0.2.png"));
    CHECK(!strstr(html, "\"tied-ov-0.0.png") && !strstr(html, "\"tied-ov-0.1.png"));
    CHECK(strstr(html, "A_untied_-training.png")); /* only model A has a training log */
    CHECK(!strstr(html, "tied-training.png"));
    /* no JavaScript, nothing from the network */
    CHECK(!strstr(html, "<script") && !strstr(html, "http://") && !strstr(html, "https://"));
    /* atomic writes leave no temporaries */
    CHECK(t_sh("ls %s | grep -q tmp", t_path("out")) != 0);
    free(html);
}

/* A picture of the previous report that is no longer drawn is deleted;
 * a file the report never wrote is kept, even if it looks like one. */
TEST(report_removes_its_stale_pictures) {
    fixture();
    write_report(2);
    char list[1200];
    snprintf(list, sizeof list, "%s/.report-pictures", t_path("out"));
    char *l = t_slurp(list);
    CHECKF(l && strstr(l, "A_untied_-ov-0.0.png\n") && strstr(l, "tied-ov-0.2.png\n"), "%s",
           l ? l : "");
    free(l);
    CHECK(
        t_sh(
            "cd %s && printf x > old-ov-1.1.png && printf x > mine.png && printf x > keep.png && "
            "printf 'old-ov-1.1.png\\n../escape.png\\n.hidden.png\\nmine.txt\\n' >> .report-pictures && "
            "printf x > ../escape.png",
            t_path("out")) == 0);
    al_report_result r = write_report(2);
    CHECKF(r.n_removed == 1, "%d removed", r.n_removed);
    CHECK(t_sh("cd %s && test ! -e old-ov-1.1.png && test -e mine.png && test -e keep.png && "
               "test -e ../escape.png && test -e A_untied_-ov-0.0.png",
               t_path("out")) == 0);
    l = t_slurp(list);
    CHECK(l && !strstr(l, "old-ov-1.1.png") && strstr(l, "A_untied_-ov-0.0.png\n"));
    free(l);
}

/* nbformat 4 structure, read back with cJSON. */
TEST(report_notebook_structure) {
    fixture();
    al_report_result r = write_report(2);
    char *txt = t_slurp(r.notebook_path);
    cJSON *nb = txt ? cJSON_Parse(txt) : NULL;
    CHECK(nb != NULL);
    if (!nb) {
        free(txt);
        return;
    }
    CHECK(cJSON_GetObjectItem(nb, "nbformat")->valueint == 4);
    CHECK(cJSON_GetObjectItem(nb, "nbformat_minor")->valueint == 5);
    cJSON *meta = cJSON_GetObjectItem(nb, "metadata");
    CHECK(cJSON_IsObject(meta) && cJSON_IsObject(cJSON_GetObjectItem(meta, "kernelspec")));
    cJSON *cells = cJSON_GetObjectItem(nb, "cells");
    CHECK(cJSON_IsArray(cells));
    int n_code = 0, n_md = 0, n_img = 0, n_show = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, cells) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(c, "cell_type"));
        CHECK(type && (strcmp(type, "code") == 0 || strcmp(type, "markdown") == 0));
        CHECK(cJSON_IsString(cJSON_GetObjectItem(c, "id")));
        CHECK(cJSON_IsObject(cJSON_GetObjectItem(c, "metadata")));
        cJSON *src = cJSON_GetObjectItem(c, "source"), *line;
        CHECK(cJSON_IsArray(src));
        char all[8192] = "";
        cJSON_ArrayForEach(line, src) {
            CHECK(cJSON_IsString(line));
            if (cJSON_IsString(line)) strncat(all, line->valuestring, sizeof all - strlen(all) - 1);
        }
        if (type && strcmp(type, "code") == 0) {
            n_code++;
            CHECK(cJSON_IsNull(cJSON_GetObjectItem(c, "execution_count")));
            CHECK(cJSON_IsArray(cJSON_GetObjectItem(c, "outputs")) &&
                  cJSON_GetArraySize(cJSON_GetObjectItem(c, "outputs")) == 0);
            n_img += strstr(all, "display(Image(filename=") != NULL;
            n_show += strncmp(all, "show('''", 8) == 0;
        } else {
            n_md++;
        }
    }
    CHECKF(n_img == r.n_pictures, "%d picture cells, %d pictures", n_img, r.n_pictures);
    CHECK(n_show == 23 && n_md >= 23); /* the README's 23 queries, each with a heading */
    cJSON_Delete(nb);
    free(txt);
    /* With Python: run every code cell against the database (IPython
     * stubbed if absent), and validate with nbformat if installed. */
    /* Debian's own python3 first: that is where apt puts python3-nbformat */
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    if (t_sh("command -v %s >/dev/null", py) != 0) return;
    FILE *f = fopen(t_path("nbrun.py"), "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(
        "import json, os, sys, types\n"
        "path = sys.argv[1]\n"
        "nb = json.load(open(path, encoding='utf-8'))\n"
        "try:\n"
        "    import nbformat\n"
        "    nbformat.validate(nbformat.reads(open(path, encoding='utf-8').read(), as_version=4))\n"
        "    print('validated by nbformat')\n"
        "except ImportError:\n"
        "    pass\n"
        "m = types.ModuleType('IPython'); d = types.ModuleType('IPython.display')\n"
        "class Image:\n"
        "    def __init__(self, filename):\n"
        "        assert open(filename, 'rb').read(8) == b'\\x89PNG\\r\\n\\x1a\\n', filename\n"
        "d.Image = Image; d.display = lambda x: None; m.display = d\n"
        "sys.modules['IPython'] = m; sys.modules['IPython.display'] = d\n"
        "os.chdir(os.path.dirname(os.path.abspath(path)))\n"
        "g = {}\n"
        "n = 0\n"
        "for c in nb['cells']:\n"
        "    if c['cell_type'] == 'code':\n"
        "        exec(''.join(c['source']), g); n += 1\n"
        "print('ran', n, 'cells')\n",
        f);
    fclose(f);
    CHECK(t_sh("%s %s %s > %s 2>&1", py, t_path("nbrun.py"), r.notebook_path, t_path("nb.out")) ==
          0);
    char *out = t_slurp(t_path("nb.out"));
    char want[64];
    snprintf(want, sizeof want, "ran %d cells", n_code);
    CHECKF(out && strstr(out, want), "python: %s", out ? out : "(no output)");
    /* the models query of the first cell lists both models */
    CHECK(out && strstr(out, "(2 rows)"));
    free(out);
}

TEST(report_cli) {
    fixture();
    /* one model, folder name as label; bad input */
    CHECK(t_sh("%s report --db %s --model %s --out %s --repeat 4 > %s 2>&1", t_bin(),
               t_path("r.db"), t_path("tied"), t_path("one"), t_path("o.txt")) == 0);
    char *html = t_slurp(t_path("one/index.html"));
    CHECK(html && strstr(html, "<h2>Model tied</h2>") && !strstr(html, "Models compared"));
    free(html);
    CHECK(t_sh("%s report --db %s --out %s 2>/dev/null", t_bin(), t_path("r.db"), t_path("x")) ==
          2);
    CHECK(t_sh("%s report --db %s --model %s --out %s 2>%s", t_bin(), t_path("nope.db"),
               t_path("tied"), t_path("x"), t_path("err.txt")) == 1);
    char *err = t_slurp(t_path("err.txt"));
    CHECK(err && strstr(err, "nope.db") && count(err, "\n") == 1);
    free(err);
    CHECK(!al_file_exists(t_path("x/index.html")));
    /* two models and labels */
    CHECK(t_sh("%s report --db %s --model %s --model=%s --labels U,T --out %s >/dev/null 2>&1",
               t_bin(), t_path("r.db"), t_path("untied"), t_path("tied"), t_path("two")) == 0);
    html = t_slurp(t_path("two/index.html"));
    CHECK(html && strstr(html, "Models compared") && strstr(html, "<h2>Model U</h2>") &&
          strstr(html, "<h2>Model T</h2>"));
    free(html);
}

/* ------------------------------------------------------------ Chromium */

#define CHROMIUM "/usr/bin/chromium"
#define CHROMIUM_FLAGS                                                                             \
    "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "                         \
    "--disable-background-networking --disable-component-update --disable-sync "                   \
    "--hide-scrollbars --user-data-dir=%s"

/* A copy of the page, in the same folder, whose only addition is a
 * script that counts the images the browser decoded (naturalWidth > 0)
 * into an attribute of <body> once the page has loaded. */
static void check_copy(const char *html) {
    const char *end = strstr(html, "</body>");
    FILE *f = fopen(t_path("out/check.html"), "w");
    CHECK(end && f);
    if (!end || !f) return;
    fwrite(html, 1, (size_t)(end - html), f);
    fputs("<script>window.addEventListener('load', function () {\n"
          "  var n = 0, ok = 0;\n"
          "  for (var i = 0; i < document.images.length; i++) {\n"
          "    var im = document.images[i]; n++;\n"
          "    if (im.complete && im.naturalWidth > 0) ok++;\n"
          "  }\n"
          "  document.body.setAttribute('data-images', ok + ' of ' + n + ' loaded');\n"
          "});</script>\n</body></html>\n",
          f);
    fclose(f);
}

/* Images loaded / on the page, as Chromium saw them; -1 on failure. */
static int chromium_images(int *total) {
    *total = -1;
    int rc = t_sh(CHROMIUM " " CHROMIUM_FLAGS " --virtual-time-budget=10000 --dump-dom file://%s "
                           "> %s 2>/dev/null",
                  t_path("profile"), t_path("out/check.html"), t_path("dom.html"));
    char *dom = t_slurp(t_path("dom.html"));
    int ok = -1;
    const char *p = dom ? strstr(dom, "data-images=\"") : NULL;
    if (rc != 0 || !p || sscanf(p, "data-images=\"%d of %d loaded", &ok, total) != 2) ok = -1;
    free(dom);
    return ok;
}

TEST(report_chromium_images_load) {
    if (access(CHROMIUM, X_OK) != 0) t_skip(CHROMIUM " is not installed (Debian package chromium)");
    fixture();
    al_report_result r = write_report(2);
    char *html = t_slurp(r.index_path);
    CHECK(html != NULL);
    if (!html) return;
    img im[64];
    int n = images(html, im, 64), total;
    check_copy(html);
    int ok = chromium_images(&total);
    CHECKF(total == n && ok == n && n >= 10, "chromium: %d of %d images loaded, page has %d", ok,
           total, n);
    /* a screenshot of the real page: the requested size, and not blank */
    CHECK(t_sh(CHROMIUM " " CHROMIUM_FLAGS " --window-size=1100,1500 --screenshot=%s file://%s "
                        ">/dev/null 2>&1",
               t_path("profile"), t_path("shot.png"), r.index_path) == 0);
    al_image shot;
    al_err e;
    if (al_png_read(t_path("shot.png"), &shot, NULL, &e) == 0) {
        CHECKF(shot.w == 1100 && shot.h == 1500, "screenshot %dx%d", shot.w, shot.h);
        long ink = 0, blue = 0;
        for (int y = 0; y < shot.h; y++)
            for (int x = 0; x < shot.w; x++) {
                uint32_t c = al_image_get(&shot, x, y);
                ink += c != 0xFFFFFF;
                blue += (c & 0xFF) > 0xA0 && (c >> 16) < 0x60; /* heading rules, links */
            }
        CHECKF(ink > (long)shot.w * shot.h / 50, "only %ld non-white pixels", ink);
        CHECK(blue > 100);
        al_image_free(&shot);
    } else {
        CHECKF(0, "screenshot: %s", e.msg);
    }
    /* and the check fails when a picture is missing */
    char p[600];
    snprintf(p, sizeof p, "out/%.255s", im[0].src);
    CHECK(unlink(t_path(p)) == 0);
    ok = chromium_images(&total);
    CHECKF(total == n && ok == n - 1, "after deleting %s: %d of %d loaded", im[0].src, ok, total);
    free(html);
}

/* A names run (the seed notes' copying table) gets its section: one row
 * per name piece and the mean of the rest, first and second appearance
 * per model, each number the one the run stored. */
TEST(report_names_section) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 10);
    CHECK(t_sh("%s names --model %s/m2 --db %s --data %s/s.val.bin --stories 4 --threads 1 "
               "> /dev/null 2>&1",
               t_bin(), dir.s, db.s, dir.s) == 0);
    CHECK(t_sh("%s report --model %s/m2 --db %s --out %s --pictures none > /dev/null 2>&1", t_bin(),
               dir.s, db.s, t_path("rep")) == 0);
    char *html = t_slurp(t_path("rep/index.html"));
    const char *sec = html ? strstr(html, "<section id=\"names\">") : NULL;
    CHECK(sec && strstr(sec, "Copying a name") && strstr(sec, "<td>2.. (mean)</td>"));
    long k = t_sql_long(db.s, "SELECT count(*) FROM model_scores WHERE metric LIKE "
                              "'names_first_p%'");
    CHECK(k >= 1);
    for (long j = 1; sec && j <= k; j++) {
        char q[400], row[200];
        snprintf(q, sizeof q,
                 "SELECT printf('<tr><td>%ld</td><td>%%.4f</td><td>%%.4f</td></tr>', "
                 "(SELECT value FROM model_scores WHERE metric = 'names_first_p%ld'), "
                 "(SELECT value FROM model_scores WHERE metric = 'names_second_p%ld'))",
                 j, j, j);
        char *want = t_sql(db.s, q);
        snprintf(row, sizeof row, "%s", want ? want : "?");
        CHECKF(strstr(sec, row) != NULL, "row %ld [%s] not in the section", j, row);
        free(want);
    }
    free(html);
}
