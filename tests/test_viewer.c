/* test_viewer.c -- `attnlab report --interactive`: the JSON escaping, the
 * static page unchanged without the flag, and the page driven in headless
 * Chromium with real mouse events (tests/browser/check.js, puppeteer-core):
 * hovering a token shows the attention of that head and position as the
 * test's own forward pass computes it, and the loss and top-5 as
 * `attnlab run --json` prints them; hovering a patching, path-patching or
 * attribution cell shows the database row's value (read with sqlite3);
 * clicking a thumbnail enlarges that head; no console error, no request
 * outside the folder, a screenshot that is not blank. A model whose
 * vocabulary holds markup and U+2028 renders them as text and runs no
 * injected script. The browser tests skip with one line when Chromium,
 * node or the npm package (make deps-test installs it) is missing. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/checkpoint.h"
#include "attnlab/experiment.h"
#include "attnlab/image.h"
#include "attnlab/model.h"
#include "attnlab/png.h"
#include "attnlab/tokenizer.h"
#include "attnlab/viewer.h"
#include "test.h"

#define CHROMIUM "/usr/bin/chromium"
#define CHECKER "tests/browser/check.js"
#define PUPPETEER "tests/browser/node_modules/puppeteer-core/package.json"

/* ------------------------------------------------------------ escaping */

TEST(viewer_json_escaping) {
    const char *in = "{\"a\":\"</script><script>x</script>\",\"b\":\"\\\"><img src=x>&amp;\","
                     "\"c\":\"l\xe2\x80\xa8m\xe2\x80\xa9n\xe2\x80\xa7\"}";
    char *out = al_viewer_json_for_html(in);
    CHECK(out &&
          strcmp(out, "{\"a\":\"\\u003c/script\\u003e\\u003cscript\\u003ex\\u003c/script\\u003e\","
                      "\"b\":\"\\\"\\u003e\\u003cimg src=x\\u003e\\u0026amp;\","
                      "\"c\":\"l\\u2028m\\u2029n\xe2\x80\xa7\"}") == 0);
    /* and it is still the same JSON value */
    cJSON *a = cJSON_Parse(in), *b = out ? cJSON_Parse(out) : NULL;
    CHECK(a && b && cJSON_Compare(a, b, 1));
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(out);
}

/* ------------------------------------------------------------ helpers */

/* A shell word: single-quoted (the hostile strings hold every quote). */
static const char *q(const char *s) {
    static char buf[4][4096];
    static int k;
    char *o = buf[k++ & 3];
    size_t n = 0;
    o[n++] = '\'';
    for (; *s && n < sizeof buf[0] - 8; s++) {
        if (*s == '\'') {
            memcpy(o + n, "'\\''", 4);
            n += 4;
        } else {
            o[n++] = *s;
        }
    }
    o[n++] = '\'';
    o[n] = 0;
    return o;
}

/* Skip (one line) unless Chromium, node and puppeteer-core are there. */
static void need_browser(void) {
    if (access(CHROMIUM, X_OK) != 0) t_skip(CHROMIUM " is not installed (Debian package chromium)");
    if (t_sh("node --version >/dev/null 2>&1") != 0)
        t_skip("node is not installed (Debian package nodejs)");
    if (access(PUPPETEER, R_OK) != 0)
        t_skip("puppeteer-core is not installed (make deps-test: npm ci in tests/browser)");
}

/* The display form of token id, as the page shows it. */
static cJSON *disp(const al_tokenizer *tok, int id) {
    char s[256];
    al_tok_display(tok, id, s, sizeof s);
    return cJSON_CreateString(s);
}

static cJSON *fmt4(double v) {
    char s[32];
    snprintf(s, sizeof s, "%.4f", v);
    return cJSON_CreateString(s);
}

/* The prompt as the report reads it: BOS, then the tokens (short prompts:
 * nothing cut). Runs the model; returns T. */
static int forward(const char *dir, const char *prompt, al_model *m, al_tokenizer **tok, int *ids) {
    al_err e;
    int *raw = NULL;
    size_t n = 0;
    CHECK_OK(al_ckpt_load(dir, m, tok, &e), &e);
    CHECK_OK(al_tok_encode(*tok, (const unsigned char *)prompt, strlen(prompt), 1, &raw, &n, &e),
             &e);
    ids[0] = al_tok_eot(*tok);
    for (size_t i = 0; i < n; i++) ids[i + 1] = raw[i];
    free(raw);
    int T = (int)n + 1;
    CHECK(T <= m->cfg.n_ctx);
    CHECK_OK(al_model_forward(m, ids, NULL, 1, T, &e), &e);
    return T;
}

/* Attention check of head l.h at token t: its row and column, each value
 * rounded to 4 decimals as the page rounds (half away from zero). */
static cJSON *att_check(const al_model *m, const char *slug, int l, int h, int t, int T) {
    cJSON *a = cJSON_CreateObject(), *to = cJSON_AddArrayToObject(a, "to"),
          *from = cJSON_AddArrayToObject(a, "from");
    cJSON_AddStringToObject(a, "model", slug);
    cJSON_AddNumberToObject(a, "l", l);
    cJSON_AddNumberToObject(a, "h", h);
    cJSON_AddNumberToObject(a, "t", t);
    const float *A = m->att + ((size_t)l * m->cfg.n_heads + h) * T * T;
    for (int s = 0; s <= t; s++) {
        cJSON *r = cJSON_CreateArray();
        cJSON_AddItemToArray(r, cJSON_CreateNumber(s));
        cJSON_AddItemToArray(r, fmt4(round((double)A[t * T + s] * 1e4) / 1e4));
        cJSON_AddItemToArray(to, r);
    }
    for (int u = t; u < T; u++) {
        cJSON *r = cJSON_CreateArray();
        cJSON_AddItemToArray(r, cJSON_CreateNumber(u));
        cJSON_AddItemToArray(r, fmt4(round((double)A[u * T + t] * 1e4) / 1e4));
        cJSON_AddItemToArray(from, r);
    }
    return a;
}

/* Loss check at token t from `attnlab run --json` (run.json): the
 * token's p, its loss -ln p, and the top-5 listed at position t - 1
 * (the predictions for position t). */
static cJSON *loss_check(const char *run_json, const char *slug, int t) {
    char *txt = t_slurp(run_json);
    cJSON *r = txt ? cJSON_Parse(txt) : NULL, *w = cJSON_CreateObject();
    free(txt);
    cJSON *toks = cJSON_GetObjectItem(r, "tokens");
    cJSON *cur = cJSON_GetArrayItem(toks, t), *prev = cJSON_GetArrayItem(toks, t - 1);
    CHECK(cur && prev);
    if (!cur || !prev) {
        cJSON_Delete(r);
        return w;
    }
    double p = cJSON_GetObjectItem(cur, "p")->valuedouble;
    cJSON_AddStringToObject(w, "model", slug);
    cJSON_AddNumberToObject(w, "t", t);
    cJSON_AddItemToObject(w, "p", fmt4(p));
    cJSON_AddItemToObject(w, "loss", fmt4(-log(p)));
    cJSON *top = cJSON_AddArrayToObject(w, "top"), *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(prev, "top")) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair,
                             cJSON_CreateString(cJSON_GetObjectItem(c, "token")->valuestring));
        cJSON_AddItemToArray(pair, fmt4(cJSON_GetObjectItem(c, "p")->valuedouble));
        cJSON_AddItemToArray(top, pair);
    }
    cJSON_Delete(r);
    return w;
}

/* A heatmap check from one database row: sql returns row label, column
 * label, value and (optionally) the second value, as 17-digit text; the
 * checker formats them as the page does (toPrecision(6)). */
static cJSON *hm_check(const char *db, const char *slug, const char *title_has, const char *sql) {
    char *row = t_sql(db, sql);
    cJSON *w = cJSON_CreateObject();
    cJSON_AddStringToObject(w, "model", slug);
    cJSON_AddStringToObject(w, "title_has", title_has);
    char *f[4] = {0};
    int n = 0;
    for (char *p = row, *s; p && n < 4; p = s ? s + 1 : NULL) {
        s = strchr(p, '|');
        if (s) *s = 0;
        f[n++] = p;
    }
    CHECKF(n >= 3, "no row for %s", title_has);
    if (n == 4 && !strncmp(f[3], "se ", 3)) { /* the fourth is the interval's se */
        cJSON_AddStringToObject(w, "se_db", f[3] + 3);
        n = 3;
    }
    if (n >= 3) {
        cJSON_AddStringToObject(w, "row", f[0]);
        cJSON_AddStringToObject(w, "col", f[1]);
        cJSON_AddStringToObject(w, "v_db", f[2]);
        if (n == 4) cJSON_AddStringToObject(w, "v2_db", f[3]);
    }
    free(row);
    return w;
}

/* Run the checker on spec; CHECK its verdict. */
static void run_checker(cJSON *spec) {
    char *txt = cJSON_Print(spec);
    t_write("spec.json", txt);
    free(txt);
    int rc = t_sh("node " CHECKER " %s > %s 2> %s", t_path("spec.json"), t_path("verdict.json"),
                  t_path("node.err"));
    char *v = t_slurp(t_path("verdict.json")), *err = t_slurp(t_path("node.err"));
    cJSON *j = v ? cJSON_Parse(v) : NULL;
    CHECKF(rc == 0 && cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")),
           "browser check failed (exit %d): %s %s", rc, v ? v : "(no verdict)", err ? err : "");
    cJSON_Delete(j);
    free(v);
    free(err);
}

/* The screenshot is a picture, not one flat colour. */
static void check_shot(const char *path) {
    al_image im;
    al_err e;
    if (al_png_read(path, &im, NULL, &e) != 0) {
        CHECKF(0, "screenshot: %s", e.msg);
        return;
    }
    uint32_t first = al_image_get(&im, 0, 0);
    long other = 0;
    for (int y = 0; y < im.h; y++)
        for (int x = 0; x < im.w; x++) other += al_image_get(&im, x, y) != first;
    CHECKF(other > (long)im.w * im.h / 50,
           "screenshot %dx%d: only %ld pixels differ from the first", im.w, im.h, other);
    al_image_free(&im);
}

/* ------------------------------------------------------------ the page */

static const char PROMPT[] = "Mira saw a cat. Mira said hi.";

#define TASK "--probe-r 6 --n 4 --batch 2 --threads 2"

/* The static page: the same with and without --interactive but for the
 * explorers (the same bytes when the timestamps agree), which are in
 * the page only with it. */
TEST(viewer_static_page_unchanged) {
    t_pbuf dir = t_pcopy(".");
    t_tiny_model(dir.s, 1, 5);
    const char *b = t_bin();
    CHECK(t_sh("%s circuits --model %s/m1 --db %s/r.db --threads 2 >/dev/null 2>&1", b, dir.s,
               dir.s) == 0);
    for (int k = 0; k < 2; k++)
        CHECK(
            t_sh(
                "%s report --db %s/r.db --model %s/m1 --out %s/o%d --prompt %s --pictures attention "
                "%s >/dev/null 2>&1",
                b, dir.s, dir.s, dir.s, k, q(PROMPT), k ? "--interactive" : "") == 0);
    char *s = t_slurp(t_path("o0/index.html")), *x = t_slurp(t_path("o1/index.html"));
    CHECK(s && x);
    if (!s || !x) {
        free(s), free(x);
        return;
    }
    CHECK(!strstr(s, "<script") && !strstr(s, "Content-Security-Policy") && !strstr(s, "al-x"));
    CHECK(strstr(x, "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"));
    CHECK(strstr(x, "<script type=\"application/json\" id=\"al-data-m1\">"));
    /* the inline script cannot end its element early or confuse the
     * HTML parser's script states */
    const char *code = strstr(x, "<script>\n");
    const char *code_end = code ? strstr(code, "</script>") : NULL;
    CHECK(code && code_end);
    if (code && code_end) {
        char *c = strndup(code + 9, (size_t)(code_end - code - 9));
        CHECK(c && !strstr(c, "<script") && !strstr(c, "<!--") && !strstr(c, "</"));
        free(c);
    }
    /* x with the three insertions removed is s (the time line aside) */
    const char *csp = strstr(x, "<meta http-equiv"), *csp_end = strstr(x, "</style>\n") + 9;
    const char *blk = strstr(x, "<div class=\"al-x\""), *blk_end = strstr(blk, "</script>\n") + 10;
    const char *scr = strstr(blk_end, "<script>\n"), *scr_end = strstr(scr, "</script>\n") + 10;
    char *y = malloc(strlen(x) + 1);
    size_t n = 0;
    const char *cuts[3][2] = {{csp, csp_end}, {blk, blk_end}, {scr, scr_end}};
    const char *p = x;
    for (int i = 0; i < 3; i++) {
        memcpy(y + n, p, (size_t)(cuts[i][0] - p));
        n += (size_t)(cuts[i][0] - p);
        p = cuts[i][1];
    }
    strcpy(y + n, p);
    /* the generated-at minute may differ between the two runs */
    char *ts = strstr(s, " &middot; 20"), *ty = strstr(y, " &middot; 20");
    if (ts && ty) memcpy(ty, ts, 22);
    CHECKF(strcmp(s, y) == 0,
           "the page with --interactive is not the static page plus the explorers");
    free(y);
    free(s);
    free(x);
}

TEST(viewer_browser_explorers) {
    need_browser();
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 20);
    const char *b = t_bin();
    CHECK(t_sh("%s circuits --model %s/m2 --db %s --threads 2 >/dev/null 2>&1", b, dir.s, db.s) ==
          0);
    CHECK(t_sh("%s patch --model %s/m2 --db %s --component head_pos " TASK " >/dev/null 2>&1", b,
               dir.s, db.s) == 0);
    CHECK(t_sh("%s paths --model %s/m2 --db %s " TASK " >/dev/null 2>&1", b, dir.s, db.s) == 0);
    CHECK(t_sh("%s attribute --model %s/m2 --db %s " TASK " >/dev/null 2>&1", b, dir.s, db.s) == 0);
    CHECK(t_sh("%s run --model %s/m2 --prompt %s --json > %s 2>/dev/null", b, dir.s, q(PROMPT),
               t_path("run.json")) == 0);
    CHECK(
        t_sh(
            "%s report --db %s --model %s/m2 --out %s/out --prompt %s --pictures attention,patching "
            "--interactive > %s 2>&1",
            b, db.s, dir.s, dir.s, q(PROMPT), t_path("report.out")) == 0);
    t_pbuf page = t_pcopy("out/index.html");
    char *html = t_slurp(page.s);
    CHECK(html != NULL);
    printf("    page %zu bytes\n", html ? strlen(html) : 0);
    free(html);

    al_model m;
    al_tokenizer *tok = NULL;
    int ids[64];
    int T = forward(t_path("m2"), PROMPT, &m, &tok, ids);
    if (T > m.cfg.n_ctx || !tok) return;
    cJSON *spec = cJSON_CreateObject();
    cJSON_AddStringToObject(spec, "page", page.s);
    cJSON_AddStringToObject(spec, "screenshot", t_path("shot.png"));
    cJSON_AddStringToObject(spec, "title", "attnlab report");
    cJSON_AddTrueToObject(spec, "images");
    cJSON_AddNumberToObject(spec, "scripts", 1);
    cJSON *att = cJSON_AddArrayToObject(spec, "attention");
    cJSON_AddItemToArray(att, att_check(&m, "m2", 1, 2, T - 1, T));
    cJSON_AddItemToArray(att, att_check(&m, "m2", 0, 3, 4, T));
    cJSON *loss = cJSON_AddArrayToObject(spec, "loss");
    cJSON_AddItemToArray(loss, loss_check(t_path("run.json"), "m2", 3));
    cJSON_AddItemToArray(loss, loss_check(t_path("run.json"), "m2", T - 1));
    cJSON *hm = cJSON_AddArrayToObject(spec, "heatmaps");
    /* the largest |effect| of each table: a cell anywhere in the grid */
    cJSON_AddItemToArray(
        hm,
        hm_check(
            db.s, "m2", "Activation patching: head_pos",
            "SELECT p.layer || '.' || p.head, 'pos ' || p.pos, printf('%.17g', p.value), "
            "printf('se %.17g', i.se) FROM patching p JOIN score_intervals i ON i.run_id = "
            "p.run_id AND i.layer = p.layer AND i.head = p.head AND i.pos = p.pos WHERE p.run_id "
            "= (SELECT max(run_id) FROM patching) ORDER BY abs(p.value) DESC LIMIT 1"));
    /* its column label is the position and pair 0's token there */
    cJSON_AddTrueToObject(cJSON_GetArrayItem(hm, 0), "col_prefix");
    cJSON_AddItemToArray(
        hm,
        hm_check(
            db.s, "m2", "Path patching",
            "SELECT sender, CASE WHEN channel = 'direct' THEN 'logits' ELSE receiver_layer || '.' || "
            "receiver_head || ' ' || channel END, printf('%.17g', p.value), printf('se %.17g', "
            "i.se) FROM path_patching p JOIN score_intervals i ON i.run_id = p.run_id AND "
            "i.metric = 'path_effect_' || p.channel AND i.value = p.value ORDER BY abs(p.value) "
            "DESC LIMIT 1"));
    cJSON_AddItemToArray(
        hm,
        hm_check(
            db.s, "m2", "Direct logit attribution",
            "SELECT component, 'mean', printf('%.17g', value) FROM logit_attribution WHERE pos IS NULL "
            "AND component = '1.1'"));
    cJSON_AddItemToArray(
        hm,
        hm_check(
            db.s, "m2", "Attribution patching estimate, grid head,",
            "SELECT layer || '.' || head, 'all', printf('%.17g', estimate), printf('%.17g', actual) FROM "
            "attribution_patching WHERE grid = 'head' ORDER BY abs(estimate) DESC LIMIT 1"));
    run_checker(spec);
    check_shot(t_path("shot.png"));
    cJSON_Delete(spec);
    al_tok_free(tok);
    al_model_free(&m);
}

/* ------------------------------------------------------------ hostile */

static const char *const HOSTILE[3] = {
    "</script><script>document.title='x'</script>",
    "\"><img src=x onerror=document.title='y'>",
    "line\xe2\x80\xa8sep",
};

/* A tokenizer whose vocabulary holds the three hostile strings as tokens
 * (merges chained byte by byte; they cross the pre-tokenizer's word
 * boundaries, so encoding never produces them, but the model can predict
 * them) and a 1-layer model that does predict them first, second and
 * third everywhere: a constant direction in W_pos read by W_U. ids[k]:
 * the token of HOSTILE[k]. */
static void hostile_model(const char *dir, int ids[3]) {
    al_err e;
    al_tokenizer *bl = NULL;
    CHECK_OK(al_tok_byte_level(&bl, &e), &e);
    CHECK_OK(al_tok_save(bl, t_path("bytes.json"), &e), &e);
    al_tok_free(bl);
    char *txt = t_slurp(t_path("bytes.json"));
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    CHECK(j != NULL);
    if (!j) return;
    cJSON *merges = cJSON_GetObjectItem(j, "merges"), *vocab = cJSON_GetObjectItem(j, "vocab");
    cJSON_DeleteItemFromArray(vocab, 256); /* <|endoftext|> goes last again */
    int next = 256;
    for (int k = 0; k < 3; k++) {
        const unsigned char *s = (const unsigned char *)HOSTILE[k];
        int prev = s[0];
        for (size_t i = 1; s[i]; i++) {
            cJSON *m = cJSON_CreateArray();
            cJSON_AddItemToArray(m, cJSON_CreateNumber(prev));
            cJSON_AddItemToArray(m, cJSON_CreateNumber(s[i]));
            cJSON_AddItemToArray(merges, m);
            cJSON_AddItemToArray(vocab, cJSON_CreateString("?"));
            prev = next++;
        }
        ids[k] = prev;
    }
    cJSON_AddItemToArray(vocab, cJSON_CreateString("<|endoftext|>"));
    cJSON_SetNumberValue(cJSON_GetObjectItem(j, "vocab_size"), next + 1);
    cJSON_SetNumberValue(cJSON_GetObjectItem(j, "eot_id"), next);
    txt = cJSON_Print(j);
    t_write("hostile-tok.json", txt);
    free(txt);
    cJSON_Delete(j);
    al_tokenizer *tok = NULL;
    CHECK_OK(al_tok_load(t_path("hostile-tok.json"), &tok, &e), &e);
    if (!tok) return;
    size_t len;
    for (int k = 0; k < 3; k++) {
        const unsigned char *bytes = al_tok_bytes(tok, ids[k], &len);
        CHECK(bytes && len == strlen(HOSTILE[k]) && memcmp(bytes, HOSTILE[k], len) == 0);
    }
    al_config c = al_config_default();
    c.n_layers = 1, c.d_model = 16, c.n_heads = 2, c.d_head = 8, c.n_ctx = 64;
    c.d_vocab = al_tok_vocab_size(tok), c.tied_embeddings = 0, c.seed = 5;
    al_model m;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    float *pos = m.p[AL_P_WPOS], *we = m.p[AL_P_WE], *wu = m.p[AL_P_WU];
    for (int t = 0; t < c.n_ctx; t++) pos[(size_t)t * c.d_model] = 10; /* dimension 0: constant */
    for (int v = 0; v < c.d_vocab; v++) we[(size_t)v * c.d_model] = 0;
    for (int v = 0; v < c.d_vocab; v++) wu[v] = 0; /* W_U row 0: (C, V) */
    for (int k = 0; k < 3; k++) wu[ids[k]] = 3.0f - (float)k;
    CHECK_OK(al_ckpt_save(dir, &m, tok, NULL, NULL, NULL, &e), &e);
    al_model_free(&m);
    al_tok_free(tok);
}

/* Token strings, the prompt, the title and the description are data: the
 * page shows them as text, runs nothing they hold, loads nothing. */
TEST(viewer_browser_hostile_tokens) {
    t_pbuf dir = t_pcopy("hm");
    int ids[3] = {0};
    hostile_model(dir.s, ids);
    char prompt[512], title[256];
    snprintf(prompt, sizeof prompt, "Hi %s and %s then %s.", HOSTILE[0], HOSTILE[1], HOSTILE[2]);
    snprintf(title, sizeof title, "T</title><script>document.title='x'</script>\xe2\x80\xa8");
    const char *b = t_bin();
    /* a database that knows the model, so the page has its model block */
    CHECK(t_sh("%s circuits --model %s --db %s >/dev/null 2>&1", b, dir.s, t_path("r.db")) == 0);
    CHECK(t_sh("%s run --model %s --prompt %s --json > %s 2>/dev/null", b, dir.s, q(prompt),
               t_path("run.json")) == 0);
    CHECK(t_sh("%s report --db %s --model %s --out %s --prompt %s --title %s --intro %s --pictures "
               "attention --interactive >/dev/null 2>&1",
               b, t_path("r.db"), dir.s, t_path("out"), q(prompt), q(title), q(HOSTILE[1])) == 0);
    /* in C: the JSON can neither close its element nor hold U+2028 */
    char *html = t_slurp(t_path("out/index.html"));
    CHECK(html != NULL);
    if (!html) return;
    const char *js = strstr(html, "<script type=\"application/json\"");
    const char *body = js ? strchr(js, '>') + 1 : NULL,
               *end = body ? strstr(body, "</script>") : NULL;
    CHECK(body && end);
    if (body && end) {
        size_t n = (size_t)(end - body);
        CHECK(!memchr(body, '<', n) && !memchr(body, '>', n) && !memchr(body, '&', n));
        int ls = 0;
        for (size_t i = 0; i + 2 < n; i++)
            ls |= (unsigned char)body[i] == 0xE2 && (unsigned char)body[i + 1] == 0x80 &&
                  ((unsigned char)body[i + 2] & 0xFE) == 0xA8;
        CHECK(!ls);
        CHECK(strstr(body, "\\u003c/script\\u003e\\u003cscript\\u003edocument.title='x'"));
        CHECK(strstr(body, "line\\u2028sep"));
    }
    /* two scripts: the data and the viewer; the page's own closing tags only */
    int n_close = 0;
    for (const char *p = html; (p = strstr(p, "</script")) != NULL; p++) n_close++;
    CHECKF(n_close == 2, "%d </script in the page", n_close);
    free(html);

    need_browser();
    al_tokenizer *tok = NULL;
    al_err e;
    CHECK_OK(al_tok_load(t_path("hm/tokenizer.json"), &tok, &e), &e);
    if (!tok) return;
    cJSON *spec = cJSON_CreateObject();
    cJSON_AddStringToObject(spec, "page", t_path("out/index.html"));
    cJSON_AddStringToObject(spec, "screenshot", t_path("shot.png"));
    cJSON_AddStringToObject(spec, "title", title);
    cJSON_AddTrueToObject(spec, "images");
    cJSON *loss = cJSON_AddArrayToObject(spec, "loss");
    cJSON_AddItemToArray(loss, loss_check(t_path("run.json"), "hm", 2));
    /* the hostile tokens are the top-3 predictions: shown as text */
    cJSON *w = cJSON_GetArrayItem(loss, 0), *top = cJSON_GetObjectItem(w, "top");
    for (int k = 0; k < 3; k++) {
        char s[256];
        al_tok_display(tok, ids[k], s, sizeof s);
        cJSON *first = cJSON_GetArrayItem(cJSON_GetArrayItem(top, k), 0);
        CHECKF(first && strcmp(first->valuestring, s) == 0, "prediction %d is %s, want %s", k,
               first ? first->valuestring : "none", s);
    }
    cJSON *texts = cJSON_AddArrayToObject(spec, "texts");
    for (int k = 0; k < 3; k++) { /* raw in the prompt line and the intro, displayed in the table */
        cJSON_AddItemToArray(texts, cJSON_CreateString(HOSTILE[k]));
        cJSON_AddItemToArray(texts, disp(tok, ids[k]));
    }
    cJSON *absent = cJSON_AddArrayToObject(spec, "absent");
    cJSON_AddItemToArray(absent, cJSON_CreateString("img[src=\"x\"]"));
    cJSON_AddItemToArray(absent, cJSON_CreateString("img[onerror]"));
    cJSON_AddNumberToObject(spec, "scripts", 1);
    run_checker(spec);
    check_shot(t_path("shot.png"));
    cJSON_Delete(spec);
    al_tok_free(tok);
}

/* ------------------------------------------------------------ experiment */

static const char exp_json[] = T_EXP_TINY_2L(
    "explore") " \"analyses\": {\"patch\": {\"component\": \"head\", \"probe_r\": 6, \"n\": 4}},\n"
               " \"pictures\": {\"kinds\": [\"attention\"], \"prompt\": \"Mira saw a cat.\"},\n"
               " \"report\": {\"title\": \"explore\", \"interactive\": true}}\n";

/* An experiment's report takes "interactive": true (a boolean only). */
TEST(viewer_experiment_report_interactive) {
    t_pbuf js = t_pcopy("x.json"), out = t_pcopy("out");
    t_write("x.json", exp_json);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), js.s, out.s, t_path("log")) == 0);
    char idx[1200];
    snprintf(idx, sizeof idx, "%s/index.html", out.s);
    char *html = t_slurp(idx);
    CHECK(html && strstr(html, "Content-Security-Policy") &&
          strstr(html, "<script type=\"application/json\" id=\"al-data-two\">") &&
          strstr(html, "\"kind\":\"patching\""));
    free(html);
    t_exp_refused(exp_json, "\"interactive\": true", "\"interactive\": 1",
                  "report.interactive: must be true or false");
}
