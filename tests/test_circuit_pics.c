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
#include "picfix.h"
#include "test.h"

/* pictures.c's channel colours */
#define COL_Q 0x1F77B4u
#define COL_K 0xD62728u
#define COL_V 0x2CA02Cu
#define COL_DIRECT 0x9467BDu

/* --------------------------------------------------------------- fixture */

/* What the fixture plants. The circuit at the run's own tau (0.01) of a
 * 2-layer model: pos -> 0.<prev>.k and .q, embed -> 0.<prev>.v,
 * 0.<prev> -> 1.2.k (the K-composition edge, the largest score),
 * embed -> 1.2.q and .v, 1.2 -> logits, embed -> logits. Every other edge
 * removed. A 1-layer model: embed -> 0.1.q/k/v, 0.1 -> logits. */
typedef struct circ_fix {
    int prev; /* the layer-0 head whose output 1.2's keys read */
    int sweep; /* 1: ACDC at taus 0.001, 0.01, 0.1; 0: only 0.01 */
    int eap; /* 1: an EAP circuit too (every planted edge but 1.2 -> logits) */
    int scores; /* 1: a scores run naming 0.1 previous-token and 1.2 induction heads */
    const char *kind; /* runs.kind (NULL: discover) */
} circ_fix;

/* Is edge ed planted in the 0.01 circuit (see circ_fix)? Its score. */
static double planted(int L, int H, const al_edge *ed, int prev) {
    int head = ed->sender - 2, sl = head >= 0 ? head / H : -1, sh = head >= 0 ? head % H : -1;
    if (L == 1) {
        if (ed->recv_layer == 0 && ed->recv_head == 1 && ed->sender == 0) return 0.05;
        if (ed->recv_layer < 0 && sl == 0 && sh == 1) return 0.2;
        return 0;
    }
    if (ed->recv_layer == 0 && ed->recv_head == prev)
        return (ed->sender == 1 && ed->channel < 2) || (ed->sender == 0 && ed->channel == 2) ? 0.04
                                                                                             : 0;
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
                                mid, &run, &e),
             &e);
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
            if (t == 0 && ed.recv_layer == L - 1 && ed.recv_head == 0 && ed.sender < 2)
                kept = 1, s = 0.002;
            if (t == 2) kept = s >= 0.3;
            if (eap) kept = s > 0 && !(ed.recv_layer < 0 && ed.sender >= 2);
            kept_n += kept;
            if (!s) s = 0.001 * (k % 7) / 7;
            const char *snd = ed.sender == 0 ? "embed" : ed.sender == 1 ? "pos" : NULL;
            if (!snd)
                snprintf(name, sizeof name, "%d.%d", (ed.sender - 2) / H, (ed.sender - 2) % H);
            static const char *const ch[4] = {"q", "k", "v", "direct"};
            char rl[16] = "NULL", rh[16] = "NULL";
            if (ed.recv_layer >= 0) snprintf(rl, sizeof rl, "%d", ed.recv_layer);
            if (ed.recv_head >= 0) snprintf(rh, sizeof rh, "%d", ed.recv_head);
            sqlf(&eb,
                 "INSERT INTO circuit_edges VALUES(%ld, %ld, '%s', %s, %d, '%s', %s, %s, '%s', "
                 "%.17g, %d);\n",
                 r, id, eap ? "eap" : "acdc", tau, k, snd ? snd : name, rl, rh, ch[ed.channel], s,
                 kept);
        }
        double faith = eap ? 0.93 : t == 0 ? 0.99 : t == 1 ? 0.91 : 0.55;
        sqlf(&b,
             "INSERT INTO circuit_runs VALUES(%ld, %ld, 'induction', '%s', 'kl', %s, %s, %d, "
             "%d, 1.5, -2.0, %.17g, %.17g, %.17g, 100, 0.5, 'abc');\n",
             r, id, eap ? "eap" : "acdc", tau, eap ? "0.9" : "NULL", n, kept_n, -2.0 + 3.5 * faith,
             0.01 / faith, faith);
        char *es = al_buf_take(&eb, NULL);
        CHECK(es != NULL);
        al_buf_puts(&b, es ? es : "");
        free(es);
    }
    al_buf_puts(&b, "COMMIT;\n");
    exec_sql(db, &b);
    return r;
}

/* ------------------------------------------------------------- helpers */

/* A node box of the circuit picture: found by its outline, a run of
 * exactly BOX_W pixels of ink (in the circuit) or grey (not). */
#define BOX_W 60
#define BOX_H 30
#define INK 0x1A1A1Au
#define DIM 0xB0B0B0u
typedef struct box {
    int x, y, in;
} box;

/* Top edges of boxes, top to bottom then left to right (at most cap). */
static int find_boxes(const al_image *im, box *b, int cap) {
    int n = 0;
    for (int y = 0; y + BOX_H <= im->h; y++)
        for (int x = 0; x + BOX_W <= im->w; x++) {
            uint32_t c = al_image_get(im, x, y);
            if ((c != INK && c != DIM) || al_image_get(im, x - 1, y) == c ||
                al_image_get(im, x + BOX_W, y) == c || al_image_get(im, x, y + BOX_H - 1) != c)
                continue;
            int run = 1;
            while (run < BOX_W && al_image_get(im, x + run, y) == c) run++;
            if (run == BOX_W && al_image_get(im, x + BOX_W - 1, y + BOX_H - 1) == c && n < cap)
                b[n++] = (box){x, y, c == INK};
        }
    return n;
}

static int near_colour(uint32_t a, uint32_t b, int tol) {
    for (int s = 0; s < 24; s += 8)
        if (abs((int)((a >> s) & 255) - (int)((b >> s) & 255)) > tol) return 0;
    return 1;
}

/* How many of the 9 points at tenths 1..9 of the segment have colour c
 * (or one of its 8 neighbours), within 16 per channel: a 1-px line is
 * antialiased, so few of its pixels are exactly c. */
static int on_segment(const al_image *im, int x0, int y0, int x1, int y1, uint32_t c) {
    int hits = 0;
    for (int k = 1; k <= 9; k++) {
        int x = x0 + (x1 - x0) * k / 10, y = y0 + (y1 - y0) * k / 10, hit = 0;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++)
                hit |= near_colour(al_image_get(im, x + dx, y + dy), c, 16);
        hits += hit;
    }
    return hits;
}

/* Boxes of a 2-layer, 4-head picture: logits, the four 1.h, the four
 * 0.h, embed and pos (rows top to bottom). */
static int head_boxes(const al_image *im, box *b) {
    int n = find_boxes(im, b, 16);
    CHECKF(n == 11, "%d boxes found, want 11", n);
    return n == 11;
}

/* The top centre of box b and its port k (q 0, k 1, v 2). */
static void top_of(const box *b, int *x, int *y) { *x = b->x + BOX_W / 2, *y = b->y; }
static void port_of(const box *b, int k, int *x, int *y) {
    *x = b->x + BOX_W * (k + 1) / 4, *y = b->y + BOX_H + 3;
}

/* --------------------------------------------------------------- tests */

/* Model m2 (2 layers x 4 heads) with a sweep, an EAP circuit and scores
 * (*f), and its picture args into *im, at least min_w x min_h. */
static t_pbuf sweep_model(circ_fix *f, const char *args, const char *name, al_image *im, int min_w,
                          int min_h) {
    t_pbuf m = t_pcopy("m2");
    make_model(m.s, 2, 4);
    *f = (circ_fix){.prev = 1, .sweep = 1, .eap = 1, .scores = 1};
    circ_fixture(t_path("r.db"), m.s, f);
    if (draw(m.s, args, name, im) != 0) {
        CHECKF(0, "%s refused", args);
        al_image_init(im, 1, 1, 0, NULL);
    }
    CHECKF(im->w > min_w && im->h > min_h, "%s: %d x %d", args, im->w, im->h);
    return m;
}

TEST(circpics_circuit) {
    circ_fix f;
    al_image im;
    t_pbuf m = sweep_model(&f, "--what circuit", "circuit.png", &im, 500, 450);
    box b[16];
    if (head_boxes(&im, b)) {
        /* the run's own tau (0.01): heads 0.1 and 1.2 in ink, the rest grey */
        const box *h12 = &b[1 + 2], *h01 = &b[5 + 1], *h00 = &b[5], *h13 = &b[1 + 3];
        for (int i = 1; i < 9; i++)
            CHECKF(b[i].in == (i == 3 || i == 6), "box %d in = %d", i, b[i].in);
        CHECK(b[0].in && b[9].in && b[10].in); /* logits, embed, pos */
        /* the K-composition edge: 0.1's top to 1.2's k port, in the k colour */
        int x0, y0, x1, y1;
        top_of(h01, &x0, &y0);
        port_of(h12, 1, &x1, &y1);
        CHECKF(on_segment(&im, x0, y0, x1, y1, COL_K) == 9, "k edge: %d of 9",
               on_segment(&im, x0, y0, x1, y1, COL_K));
        /* ... and not to its q port */
        port_of(h12, 0, &x1, &y1);
        CHECK(on_segment(&im, x0, y0, x1, y1, COL_K) < 5);
        /* a removed edge, 0.0 -> 1.3.q: pale q */
        top_of(h00, &x0, &y0);
        port_of(h13, 0, &x1, &y1);
        int pale = on_segment(&im, x0, y0, x1, y1, al_netplot_faint(COL_Q));
        CHECKF(pale >= 5, "removed edge: %d of 9 pale", pale);
        al_image_free(&im);
        /* --kept-only: gone, the kept edge still there */
        CHECK(draw(m.s, "--what circuit --kept-only", "kept.png", &im) == 0);
        CHECKF(on_segment(&im, x0, y0, x1, y1, al_netplot_faint(COL_Q)) <= 2, "%d of 9 pale",
               on_segment(&im, x0, y0, x1, y1, al_netplot_faint(COL_Q)));
        int n = 0;
        for (int y = 0; y < im.h; y++)
            for (int x = 0; x < im.w; x++) n += al_image_get(&im, x, y) == al_netplot_faint(COL_Q);
        CHECKF(n == 0, "%d pale q pixels with --kept-only", n);
        top_of(h01, &x0, &y0);
        port_of(h12, 1, &x1, &y1);
        CHECK(on_segment(&im, x0, y0, x1, y1, COL_K) == 9);
    }
    al_image_free(&im);
    /* --tau 0.1: only the K edge and 1.2 -> logits; 0.1 and 1.2 still in */
    CHECK(draw(m.s, "--what circuit --tau 0.1", "tau.png", &im) == 0);
    if (head_boxes(&im, b)) {
        CHECK(b[3].in && b[6].in && !b[10].in); /* pos in no kept edge */
        int x0, y0, x1, y1, xd, yd;
        top_of(&b[6], &x0, &y0);
        port_of(&b[3], 1, &x1, &y1);
        CHECK(on_segment(&im, x0, y0, x1, y1, COL_K) == 9);
        /* the direct edge 1.2 -> logits (lower edge centre), purple */
        top_of(&b[3], &xd, &yd);
        CHECK(on_segment(&im, xd, yd, b[0].x + BOX_W / 2, b[0].y + BOX_H + 3, COL_DIRECT) == 9);
    }
    al_image_free(&im);
    /* a one-layer model: three rows of boxes */
    t_pbuf m1 = t_pcopy("m1");
    make_model(m1.s, 1, 4);
    circ_fixture(t_path("r.db"), m1.s, &f);
    CHECK(draw(m1.s, "--what circuit", "one.png", &im) == 0);
    CHECK(find_boxes(&im, b, 16) == 7);
    al_image_free(&im);
}

/* Centres of the 3 x 3 blocks of colour c inside [x0,x1] x [y0,y1],
 * blocks closer than 8 px merged: a marker each (a 2 px line has none). */
static int markers(const al_image *im, uint32_t c, int x0, int y0, int x1, int y1, int *mx, int *my,
                   int cap) {
    int n = 0;
    for (int y = y0; y + 3 <= y1; y++)
        for (int x = x0; x + 3 <= x1; x++) {
            int full = 1;
            for (int k = 0; full && k < 9; k++) full = al_image_get(im, x + k % 3, y + k / 3) == c;
            if (!full) continue;
            int seen = 0;
            for (int i = 0; i < n; i++) seen |= abs(mx[i] - x - 1) < 8 && abs(my[i] - y - 1) < 8;
            if (!seen && n < cap) mx[n] = x + 1, my[n++] = y + 1;
        }
    return n;
}

TEST(circpics_curve) {
    circ_fix f;
    al_image im;
    sweep_model(&f, "--what circuit-curve", "curve.png", &im, 420, 260);
    /* the plot area: the frame's bounding box */
    int x0, y0, x1, y1;
    frame_box(&im, &x0, &y0, &x1, &y1);
    /* three ACDC points: more edges, more faithful (2, 8, 14 edges: 0.55, 0.91, 0.99) */
    int mx[8], my[8];
    int n = markers(&im, COL_Q, x0, y0, x1, y1, mx, my, 8);
    CHECKF(n == 3, "%d ACDC markers", n);
    if (n == 3) {
        for (int i = 0; i < 3; i++)
            for (int j = i + 1; j < 3; j++)
                if (mx[j] < mx[i]) {
                    int t = mx[i];
                    mx[i] = mx[j];
                    mx[j] = t;
                    t = my[i];
                    my[i] = my[j];
                    my[j] = t;
                }
        CHECKF(my[0] > my[1] && my[1] > my[2], "y %d %d %d", my[0], my[1], my[2]);
        /* x proportional to edges kept: 2 -> 8 is as far as 8 -> 14 */
        CHECKF(abs((mx[1] - mx[0]) - (mx[2] - mx[1])) <= 2, "x %d %d %d", mx[0], mx[1], mx[2]);
        /* the EAP point (7 edges, 0.93): between the first two in x, above the second */
        int ex[2], ey[2];
        CHECK(markers(&im, COL_K, x0, y0, x1, y1, ex, ey, 2) == 1 && ex[0] > mx[0] &&
              ex[0] < mx[1] && ey[0] < my[1]);
    }
    al_image_free(&im);
}

TEST(circpics_refusals) {
    t_pbuf m = t_pcopy("m2"), m1 = t_pcopy("m1"), m17 = t_pcopy("m17");
    make_model(m.s, 2, 4);
    make_model(m1.s, 1, 4);
    make_model(m17.s, AL_GRAPH_MAX_LAYERS + 1, 1);
    /* a run of another kind only */
    circ_fix f = {.prev = 1, .sweep = 0, .eap = 0, .scores = 0, .kind = "attribute"};
    long other = circ_fixture(t_path("r.db"), m.s, &f);
    refused(m.s, "--what circuit", "no finished discover run");
    refused(m.s, "--what circuit-curve", "no finished discover run");
    char a[96];
    snprintf(a, sizeof a, "--what circuit --run %ld", other);
    refused(m.s, a, "is a 'attribute' run");
    /* one tau: a circuit, but no sweep; a tau it does not have */
    f.kind = NULL;
    circ_fixture(t_path("r.db"), m.s, &f);
    al_image im;
    CHECK(draw(m.s, "--what circuit", "ok.png", &im) == 0);
    al_image_free(&im);
    refused(m.s, "--what circuit-curve", "no tau sweep");
    refused(m.s, "--what circuit --tau 0.5", "no ACDC circuit at tau 0.5 (its taus: 0.01)");
    /* deeper than the graph: refused before the database is read */
    refused(m17.s, "--what circuit", "covers models of 1 to 16 layers");
    /* no rows at all for the model */
    refused(m1.s, "--what circuit", "no results for model");
    /* a bad --tau is a usage error */
    CHECK(t_sh("%s heatmap --model %s --db %s --what circuit --tau -1 --out %s 2> %s", t_bin(), m.s,
               t_path("r.db"), t_path("bad.png"), t_path("bad.err")) == 2);
    CHECK(!al_file_exists(t_path("bad.png")));
}

/* s holds want before end. */
static int has(const char *s, const char *end, const char *want) {
    const char *p = s ? strstr(s, want) : NULL;
    return p && (!end || p < end);
}

TEST(circpics_report_section) {
    t_pbuf yes = t_pcopy("yes"), miss = t_pcopy("miss"), one = t_pcopy("one"),
           none = t_pcopy("none");
    make_model(yes.s, 2, 4);
    make_model(miss.s, 2, 8);
    make_model(one.s, 1, 4);
    make_model(none.s, 2, 2);
    circ_fix f = {.prev = 1, .sweep = 1, .eap = 1, .scores = 1};
    circ_fixture(t_path("r.db"), yes.s, &f);
    f.prev = 3, f.sweep = 0, f.eap = 0; /* 1.2's keys read 0.3, not the previous-token head 0.1 */
    circ_fixture(t_path("r.db"), miss.s, &f);
    f.prev = 1;
    circ_fixture(t_path("r.db"), one.s, &f);
    f.kind = "attribute"; /* another kind only: no section */
    circ_fixture(t_path("r.db"), none.s, &f);
    const char *dirs[4] = {yes.s, miss.s, one.s, none.s};
    char *html = report_html(dirs, 4, "circuit,circuit-curve", NULL);
    const char *y = model_part(html, "yes"), *m = model_part(html, "miss"),
               *o = model_part(html, "one"), *n = model_part(html, "none");
    CHECK(y && m && o && n && y < m && m < o && o < n);
    if (!y || !m || !o || !n) {
        free(html);
        return;
    }
    CHECK(has(y, m, "<h3>Circuit</h3>") && has(m, o, "<h3>Circuit</h3>") &&
          has(o, n, "<h3>Circuit</h3>") && !has(n, NULL, "<h3>Circuit</h3>"));
    /* yes: the run's own tau, its size, heads, edge and answer */
    CHECK(has(y, m, "the ACDC circuit at tau 0.01 (of the run's 4 circuits"));
    CHECK(has(y, m, "it keeps 8 of the 106 edges of the head graph, with faithfulness 0.910"));
    CHECK(has(y, m, "Heads in the circuit (in a kept edge): 0.1, 1.2."));
    CHECK(has(y, m,
              "K-composition edges kept: 0.1 &rarr; 1.2.k (score 0.5; K-composition "
              "0.350, random baseline 0.100)."));
    CHECK(has(y, m, "Yes: it keeps 0.1 &rarr; 1.2.k, a previous-token head"));
    CHECK(has(y, m,
              "Identified previous-token heads (prev_token &gt; 0.4): 0.1 (in the "
              "circuit). Identified induction heads (induction &gt; 0.4): 1.2 (in the "
              "circuit)."));
    CHECK(has(y, m, "-circuit-induction-") && has(y, m, "-circuit-curve-induction-"));
    /* miss: the induction head is in, the previous-token head missed; no sweep, no curve */
    CHECKF(has(m, o, "Heads in the circuit (in a kept edge): 0.3, 1.2."), "%.600s",
           strstr(m, "<h3>Circuit") ? strstr(m, "<h3>Circuit") : "");
    CHECK(has(m, o,
              "Partly: it keeps K-composition into an induction head, but not from an "
              "identified previous-token head (0.3 &rarr; 1.2.k)."));
    CHECK(has(m, o, "0.1 (missed)") && has(m, o, "1.2 (in the circuit)"));
    CHECK(has(m, o, "-circuit-induction-") && !has(m, o, "-circuit-curve-"));
    /* one layer */
    CHECK(has(o, n, "No: a one-layer model has no K-composition"));
    CHECK(!has(o, n, "K-composition edges kept"));
    /* the pictures exist */
    const char *img = strstr(y, "<img src=\"");
    char name[256], path[512] = "";
    if (img && sscanf(img, "<img src=\"%255[^\"]", name) == 1)
        snprintf(path, sizeof path, "out/%s", name);
    CHECKF(path[0] && al_file_exists(t_path(path)), "no picture [%s]", path);
    free(html);
}
