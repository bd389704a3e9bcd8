/* test_circuit_pics.c -- the circuit pictures (`attnlab heatmap --what
 * circuit | circuit-curve`) and the report's Circuit section, drawn from
 * hand-made discover runs whose circuit is known, so that what a picture
 * and a sentence say can be checked against what the rows say. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"
#include "attnlab/checkpoint.h"
#include "attnlab/discover.h"
#include "attnlab/model.h"
#include "attnlab/plot.h"
#include "attnlab/png.h"
#include "attnlab/report.h"
#include "attnlab/store.h"
#include "test.h"

/* pictures.c's channel colours */
#define COL_Q 0x1F77B4u
#define COL_K 0xD62728u
#define COL_V 0x2CA02Cu
#define COL_DIRECT 0x9467BDu

/* A model directory of L layers x H heads (untrained: the pictures read
 * only its shape and its sha256). */
static void make_model(const char *dir, int L, int H) {
    al_err e;
    al_config c = al_config_default();
    c.n_layers = L, c.d_model = 32, c.n_heads = H, c.d_head = 4, c.n_ctx = 32, c.d_vocab = 64;
    al_model m;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    CHECK_OK(al_ckpt_save(dir, &m, NULL, NULL, NULL, NULL, &e), &e);
    al_model_free(&m);
}

/* --------------------------------------------------------------- fixture */

/* What the fixture plants. The circuit at the run's own tau (0.01) of a
 * 2-layer model: pos -> 0.<prev>.k and .q, embed -> 0.<prev>.v,
 * 0.<prev> -> 1.2.k (the K-composition edge, the largest score),
 * embed -> 1.2.q and .v, 1.2 -> logits, embed -> logits. Every other edge
 * removed. A 1-layer model: embed -> 0.1.q/k/v, 0.1 -> logits. */
typedef struct circ_fix {
    int prev;       /* the layer-0 head whose output 1.2's keys read */
    int sweep;      /* 1: ACDC at taus 0.001, 0.01, 0.1; 0: only 0.01 */
    int eap;        /* 1: an EAP circuit too (every planted edge but 1.2 -> logits) */
    int scores;     /* 1: a scores run naming 0.1 previous-token and 1.2 induction heads */
    const char *kind; /* runs.kind (NULL: discover) */
} circ_fix;

static void sqlf(al_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sqlf(al_buf *b, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    al_buf_puts(b, line);
}

/* Is edge ed planted in the 0.01 circuit (see circ_fix)? Its score. */
static double planted(int L, int H, const al_edge *ed, int prev) {
    int head = ed->sender - 2, sl = head >= 0 ? head / H : -1, sh = head >= 0 ? head % H : -1;
    if (L == 1) {
        if (ed->recv_layer == 0 && ed->recv_head == 1 && ed->sender == 0) return 0.05;
        if (ed->recv_layer < 0 && sl == 0 && sh == 1) return 0.2;
        return 0;
    }
    if (ed->recv_layer == 0 && ed->recv_head == prev)
        return (ed->sender == 1 && ed->channel < 2) || (ed->sender == 0 && ed->channel == 2) ? 0.04 : 0;
    if (ed->recv_layer == 1 && ed->recv_head == 2) {
        if (sl == 0 && sh == prev && ed->channel == 1) return 0.5;
        if (ed->sender == 0 && ed->channel != 1) return 0.1;
        return 0;
    }
    if (ed->recv_layer < 0) return (sl == 1 && sh == 2) ? 0.3 : ed->sender == 0 ? 0.08 : 0;
    return 0;
}

/* One finished run of the model in dir, its rows written with sqlite3 as
 * `attnlab discover --db` would write them (kept in this one function so
 * a real run can replace it). Returns the run id. */
static long circ_fixture(const char *db, const char *dir, const circ_fix *f) {
    al_err e;
    al_store *st;
    al_model m;
    int64_t mid = 0, run = 0, srun = 0;
    CHECK_OK(al_ckpt_load(dir, &m, NULL, &e), &e);
    CHECK_OK(al_store_open(db, &st, &e), &e);
    CHECK_OK(al_store_model(st, dir, NULL, &m, NULL, &mid, &e), &e);
    if (f->scores) {
        CHECK_OK(al_store_run_begin(st, "scores", "{}", mid, &srun, &e), &e);
        CHECK_OK(al_store_run_finish(st, srun, &e), &e);
    }
    CHECK_OK(al_store_run_begin(st, f->kind ? f->kind : "discover",
                                "{\"task\": \"induction\", \"method\": \"acdc\", \"tau\": 0.01}",
                                mid, &run, &e), &e);
    CHECK_OK(al_store_run_finish(st, run, &e), &e);
    al_store_close(st);
    int L = m.cfg.n_layers, H = m.cfg.n_heads, n = al_graph_n_edges(L, H);
    al_model_free(&m);
    al_buf b = {0};
    long r = (long)run, id = (long)mid;
    al_buf_puts(&b, "BEGIN;\n");
    for (int l = 0; f->scores && l < L; l++)
        for (int h = 0; h < H; h++) {
            sqlf(&b, "INSERT INTO head_scores VALUES(%ld, %ld, %d, %d, 'prev_token', %s);\n",
                 (long)srun, id, l, h, l == 0 && h == 1 ? "0.9" : "0.05");
            sqlf(&b, "INSERT INTO head_scores VALUES(%ld, %ld, %d, %d, 'induction', %s);\n",
                 (long)srun, id, l, h, l == 1 && h == 2 ? "0.8" : "0.02");
        }
    if (f->scores && L == 2)
        for (int h = 0; h < H; h++)
            sqlf(&b, "INSERT INTO composition VALUES(%ld, %ld, 'K', 0, %d, 1, 2, %s, 0.1, 0.02);\n",
                 (long)srun, id, h, h == 1 ? "0.35" : "0.11");
    for (int t = 0; t < 3 + f->eap; t++) {
        int eap = t == 3;
        if (!eap && !f->sweep && t != 1) continue;
        char tau[32];
        snprintf(tau, sizeof tau, "%s", eap ? "NULL" : t == 0 ? "0.001" : t == 1 ? "0.01" : "0.1");
        int kept_n = 0;
        al_buf eb = {0};
        for (int k = 0; k < n; k++) {
            al_edge ed;
            char name[64];
            al_graph_edge(L, H, k, &ed);
            double s = planted(L, H, &ed, f->prev);
            /* 0.001 keeps also every edge into 1.0; 0.1 only the K edge and 1.2 -> logits */
            int kept = s > 0;
            if (t == 0 && ed.recv_layer == L - 1 && ed.recv_head == 0 && ed.sender < 2) kept = 1, s = 0.002;
            if (t == 2) kept = s >= 0.3;
            if (eap) kept = s > 0 && !(ed.recv_layer < 0 && ed.sender >= 2);
            kept_n += kept;
            if (!s) s = 0.001 * (k % 7) / 7;
            const char *snd = ed.sender == 0 ? "embed" : ed.sender == 1 ? "pos" : NULL;
            if (!snd) snprintf(name, sizeof name, "%d.%d", (ed.sender - 2) / H, (ed.sender - 2) % H);
            static const char *const ch[4] = {"q", "k", "v", "direct"};
            char rl[16] = "NULL", rh[16] = "NULL";
            if (ed.recv_layer >= 0) snprintf(rl, sizeof rl, "%d", ed.recv_layer);
            if (ed.recv_head >= 0) snprintf(rh, sizeof rh, "%d", ed.recv_head);
            sqlf(&eb, "INSERT INTO circuit_edges VALUES(%ld, %ld, '%s', %s, %d, '%s', %s, %s, '%s', "
                 "%.17g, %d);\n", r, id, eap ? "eap" : "acdc", tau, k, snd ? snd : name, rl, rh,
                 ch[ed.channel], s, kept);
        }
        double faith = eap ? 0.93 : t == 0 ? 0.99 : t == 1 ? 0.91 : 0.55;
        sqlf(&b, "INSERT INTO circuit_runs VALUES(%ld, %ld, 'induction', '%s', 'kl', %s, %s, %d, "
             "%d, 1.5, -2.0, %.17g, %.17g, %.17g, 100, 0.5, 'abc');\n", r, id,
             eap ? "eap" : "acdc", tau, eap ? "0.9" : "NULL", n, kept_n, -2.0 + 3.5 * faith,
             0.01 / faith, faith);
        char *es = al_buf_take(&eb, NULL);
        CHECK(es != NULL);
        al_buf_puts(&b, es ? es : "");
        free(es);
    }
    al_buf_puts(&b, "COMMIT;\n");
    sqlite3 *s3 = NULL;
    char *err = NULL;
    char *sql = al_buf_take(&b, NULL);
    CHECK(sql != NULL);
    CHECK(sqlite3_open(db, &s3) == SQLITE_OK);
    CHECKF(sqlite3_exec(s3, sql ? sql : "", NULL, NULL, &err) == SQLITE_OK, "fixture: %s",
           err ? err : "?");
    sqlite3_free(err);
    sqlite3_close(s3);
    free(sql);
    return r;
}

/* ------------------------------------------------------------- helpers */

/* `attnlab heatmap` of model dir; 0 with the decoded PNG (its size the
 * one reported), else the exit status (stderr in t_path("hm.err")). */
static int draw(const char *dir, const char *args, const char *name, al_image *im) {
    t_pbuf out = t_pcopy(name);
    int rc = t_sh("%s heatmap --model %s --db %s --out %s %s > %s 2> %s", t_bin(), dir,
                  t_path("r.db"), out.s, args, t_path("hm.out"), t_path("hm.err"));
    if (rc) return rc;
    int w = 0, h = 0;
    t_reported_size(t_path("hm.out"), &w, &h);
    al_err e;
    CHECK_OK(al_png_read(out.s, im, NULL, &e), &e);
    CHECKF(im->w == w && im->h == h, "%s: decoded %dx%d, reported %dx%d", name, im->w, im->h, w, h);
    return 0;
}

TEST(circpics_view) {
    t_pbuf m = t_pcopy("m2");
    make_model(m.s, 2, 4);
    circ_fix f = {.prev = 1, .sweep = 1, .eap = 1, .scores = 1};
    circ_fixture(t_path("r.db"), m.s, &f);
    al_image im;
    CHECK(draw(m.s, "--what circuit", "circuit.png", &im) == 0);
    al_image_free(&im);
    CHECK(draw(m.s, "--what circuit-curve", "curve.png", &im) == 0);
    al_image_free(&im);
    t_sh("cp %s %s /tmp/", t_path("circuit.png"), t_path("curve.png"));
}
