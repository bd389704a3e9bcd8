/* test_intervene.c -- intervention files (intervene.h) and `attnlab run
 * --intervene`: each op's effect against what it must equal (a zeroed
 * pattern = gate 0, a scaled z = a scaled gate, an added vector lands in
 * the residual row exactly, a one-hot pattern row gives z = v of that
 * key), .npy vectors read as the same numbers as inline ones, every
 * refusal in one line naming the op, and the CLI's run against --mask. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/intervene.h"
#include "attnlab/safetensors.h"
#include "test.h"

enum { IB = 2, IT = 6, IL = 2, IH = 3, ID = 4, IC = 8, IV = 13 };

static void imodel(al_model *m) {
    al_config c = al_config_default();
    c.n_layers = IL, c.d_model = IC, c.n_heads = IH, c.d_head = ID, c.n_ctx = IT + 2,
    c.d_vocab = IV;
    c.seed = 21;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
}

static void itoks(int *in) {
    for (int i = 0; i < IB * IT; i++) in[i] = (i * 7 + 2) % IV;
}

/* A .npy file as numpy writes one: format version major (1: a 2-byte
 * header length, else 4), the header dict hdr padded to 64 bytes, then
 * nb bytes of data. */
static void npy_raw(const char *name, int major, const char *hdr, const void *data, size_t nb) {
    static unsigned char buf[4096];
    size_t hl = strlen(hdr), off = major == 1 ? 10 : 12, pad = (64 - (off + hl + 1) % 64) % 64;
    size_t H = hl + pad + 1, k = off;
    memcpy(buf, "\x93NUMPY", 6), buf[6] = (unsigned char)major, buf[7] = 0;
    buf[8] = (unsigned char)(H & 255), buf[9] = (unsigned char)(H >> 8), buf[10] = buf[11] = 0;
    memcpy(buf + k, hdr, hl), k += hl;
    memset(buf + k, ' ', pad), k += pad;
    buf[k++] = '\n';
    memcpy(buf + k, data, nb), k += nb;
    FILE *f = fopen(t_path(name), "wb");
    CHECK(f && fwrite(buf, 1, k, f) == k);
    if (f) fclose(f);
}

/* A 1-D .npy of n values: float32 (version 1) or float64 (version 2). */
static void npy(const char *name, const double *v, int n, int f64) {
    char hdr[128];
    unsigned char data[1024];
    snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }",
             f64 ? "<f8" : "<f4", n);
    for (int i = 0; i < n; i++) {
        float f = (float)v[i];
        if (f64)
            memcpy(data + 8 * i, &v[i], 8);
        else
            memcpy(data + 4 * i, &f, 4);
    }
    npy_raw(name, f64 ? 2 : 1, hdr, data, (size_t)n * (f64 ? 8 : 4));
}

/* The probabilities of a forward of m with the file's text attached. */
static int run_with(al_model *m, const char *text, const int *in, float *probs, al_err *e) {
    al_intervention iv;
    t_write("iv.json", text);
    if (al_intervention_load(t_path("iv.json"), &m->cfg, &iv, e)) return -1;
    int rc = al_intervention_attach(m, &iv, e) || al_model_forward(m, in, NULL, IB, IT, e);
    if (rc == 0 && probs) memcpy(probs, m->probs, sizeof(float) * IB * IT * IV);
    al_intervention_detach(m, &iv);
    al_intervention_free(&iv);
    CHECK(m->hooks.n == 0);
    return rc ? -1 : 0;
}

static double maxdiff(const float *a, const float *b, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs(a[i] - b[i]));
    return w;
}

TEST(intervene_ops_effects) {
    al_model m;
    imodel(&m);
    int in[IB * IT];
    itoks(in);
    al_err e;
    const size_t NP = IB * IT * IV, BT = IB * IT;
    float *want = malloc(sizeof(float) * NP), *got = malloc(sizeof(float) * NP);
    /* a zeroed pattern head = gate 0; a scaled z = the gate scaled */
    CHECK_OK(run_with(&m,
                      "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": "
                      "\"blocks.1.attn.hook_pattern\", \"head\": 2, \"op\": \"zero\"}]}",
                      in, got, &e),
             &e);
    CHECK(m.intervened == 1);
    m.gates[1 * IH + 2] = 0;
    CHECK_OK(al_model_forward(&m, in, NULL, IB, IT, &e), &e);
    CHECKF(maxdiff(got, m.probs, NP) < 1e-6, "zero pattern vs gate 0: %g",
           maxdiff(got, m.probs, NP));
    m.gates[1 * IH + 2] = 0.5f;
    CHECK_OK(al_model_forward(&m, in, NULL, IB, IT, &e), &e);
    memcpy(want, m.probs, sizeof(float) * NP);
    al_model_reset_gates(&m);
    CHECK_OK(
        run_with(&m,
                 "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": "
                 "\"blocks.1.attn.hook_z\", \"head\": 2, \"op\": \"scale\", \"factor\": 0.5}]}",
                 in, got, &e),
        &e);
    CHECKF(maxdiff(got, want, NP) < 1e-6, "scaled z vs gate 0.5: %g", maxdiff(got, want, NP));
    /* add at the final residual, position -2 (from the end), from a float64
     * .npy: that row moves by the vector exactly, the others not at all */
    CHECK_OK(al_model_forward(&m, in, NULL, IB, IT, &e), &e);
    float *x0 = malloc(sizeof(float) * BT * IC);
    memcpy(x0, m.x + IL * BT * IC, sizeof(float) * BT * IC);
    double vec[IC];
    for (int i = 0; i < IC; i++) vec[i] = 0.25 * (i - 3);
    npy("v64.npy", vec, IC, 1);
    CHECK_OK(run_with(&m,
                      "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": "
                      "\"blocks.1.hook_resid_post\", \"pos\": -2, \"op\": \"add\", \"vector\": "
                      "\"v64.npy\"}]}",
                      in, got, &e),
             &e);
    int bad = 0;
    for (size_t r = 0; r < BT; r++)
        for (int k = 0; k < IC; k++) {
            float w = x0[r * IC + k] + (r % IT == IT - 2 ? (float)vec[k] : 0.0f);
            bad += m.x[IL * BT * IC + r * IC + k] != w;
        }
    CHECKF(bad == 0, "%d residual entries off", bad);
    /* the same vector inline and as float32: the same forward, bit for bit */
    npy("v32.npy", vec, IC, 0);
    float *g2 = malloc(sizeof(float) * NP);
    CHECK_OK(run_with(&m,
                      "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": "
                      "\"blocks.1.hook_resid_post\", \"pos\": 4, \"op\": \"add\", \"vector\": "
                      "\"v32.npy\"}]}",
                      in, g2, &e),
             &e);
    CHECK(!memcmp(got, g2, sizeof(float) * NP));
    CHECK_OK(run_with(&m,
                      "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": "
                      "\"blocks.1.hook_resid_post\", \"pos\": 4, \"op\": \"add\", \"values\": "
                      "[-0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1]}]}",
                      in, g2, &e),
             &e);
    CHECK(!memcmp(got, g2, sizeof(float) * NP));
    /* a pattern row set to attend to key 0 only: z there = v of position 0 */
    CHECK_OK(run_with(&m,
                      "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": "
                      "\"blocks.0.attn.hook_pattern\", \"head\": 1, \"pos\": 3, \"op\": \"set\", "
                      "\"values\": [1, 0, 0, 0]}]}",
                      in, NULL, &e),
             &e);
    const int HD = IH * ID;
    bad = 0;
    for (int b = 0; b < IB; b++) {
        const float *row = m.att + (((size_t)b * IH + 1) * IT + 3) * IT;
        bad += row[0] != 1.0f || row[1] != 0 || row[5] != 0;
        for (int d = 0; d < ID; d++)
            bad += m.z[((size_t)b * IT + 3) * HD + 1 * ID + d] !=
                   m.qkv[((size_t)b * IT + 0) * 3 * HD + 2 * HD + 1 * ID + d];
    }
    CHECKF(bad == 0, "%d pattern/z entries off", bad);
    /* ops run in file order at one point: zero, then add = the vector */
    CHECK_OK(run_with(&m,
                      "{\"attnlab_intervention\": 1, \"ops\": ["
                      "{\"hook\": \"blocks.0.attn.hook_v\", \"head\": 0, \"op\": \"zero\"}, "
                      "{\"hook\": \"blocks.0.attn.hook_v\", \"head\": 0, \"pos\": 1, \"op\": "
                      "\"add\", \"values\": [1, 2, 3, 4]}]}",
                      in, NULL, &e),
             &e);
    bad = 0;
    for (int b = 0; b < IB; b++)
        for (int t = 0; t < IT; t++)
            for (int d = 0; d < ID; d++)
                bad += m.qkv[((size_t)b * IT + t) * 3 * HD + 2 * HD + d] != (t == 1 ? d + 1.0f : 0);
    CHECKF(bad == 0, "%d v entries off", bad);
    /* no backward through it; a position past the sequence fails the forward */
    int tg[IB * IT];
    itoks(tg);
    CHECK(run_with(&m,
                   "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": "
                   "\"blocks.0.hook_resid_pre\", \"pos\": 7, \"op\": \"zero\"}]}",
                   in, NULL, &e) == -1 &&
          strstr(e.msg, "op 0 (blocks.0.hook_resid_pre): position 7"));
    free(want), free(got), free(g2), free(x0);
    al_model_free(&m);
}

TEST(intervene_refusals) {
    al_model m;
    imodel(&m);
    al_err e;
    double v4[4] = {1, 2, 3, 4};
    npy("four.npy", v4, 4, 0);
    t_write("magic.npy", "\x93NUMPX and more bytes than ten");
    float z8[8] = {0};
    npy_raw("int.npy", 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", z8, 16);
    npy_raw("two.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", z8, 16);
    npy_raw("short.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", z8, 4);
    npy_raw("v9.npy", 9, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", z8, 16);
    const char *P = "{\"attnlab_intervention\": 1, \"ops\": [";
    struct {
        const char *ops, *want;
    } cases[] = {
        {"{\"hook\": \"blocks.0.attn.hook_q\", \"op\": \"zero\", \"x\": 1}",
         "op 0: unknown key \"x\""},
        {"{\"hook\": \"blocks.0.attn.hook_q\", \"op\": \"zero\", \"op\": \"zero\"}", "given twice"},
        {"{\"op\": \"zero\"}", "op 0: \"hook\" must be a hook name"},
        {"{\"hook\": \"blocks.5.attn.hook_q\", \"op\": \"zero\"}", "layer 5, but the model has 2"},
        {"{\"hook\": \"blocks.0.attn.hook_qq\", \"op\": \"zero\"}", "unknown hook name"},
        {"{\"hook\": \"blocks.0.hook_resid_pre\", \"op\": \"nuke\"}", "unknown op \"nuke\""},
        {"{\"hook\": \"blocks.0.hook_resid_pre\", \"head\": 0, \"op\": \"zero\"}", "no head axis"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"head\": 3, \"op\": \"zero\"}",
         "\"head\" must be an integer in 0..2"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"pos\": 8, \"op\": \"zero\"}",
         "\"pos\" must be an integer in -8..7"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"pos\": 1.5, \"op\": \"zero\"}", "\"pos\" must be"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"scale\"}", "\"factor\" goes with scale"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"zero\", \"factor\": 2}",
         "\"factor\" goes with scale"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"scale\", \"factor\": 1e300}",
         "finite number"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"zero\", \"values\": [1]}",
         "go with add and set"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\"}",
         "needs one of \"values\" and \"vector\""},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\", \"values\": [1, 2, 3]}",
         "the vector has 3 values; blocks.0.attn.hook_z needs 4"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\", \"values\": [1, \"a\", 3, 4]}",
         "entry 1 is not a finite number"},
        {"{\"hook\": \"blocks.0.attn.hook_pattern\", \"op\": \"set\", \"values\": [1]}",
         "needs \"pos\" >= 0"},
        {"{\"hook\": \"blocks.0.attn.hook_pattern\", \"pos\": 2, \"op\": \"set\", \"values\": [1]}",
         "needs 3"},
        {"{\"hook\": \"blocks.0.hook_resid_post\", \"op\": \"add\", \"vector\": \"four.npy\"}",
         "the vector has 4 values; blocks.0.hook_resid_post needs 8"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\", \"vector\": \"none.npy\"}",
         "none.npy"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\", \"vector\": \"magic.npy\"}",
         "not a .npy file"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\", \"vector\": \"int.npy\"}",
         "float32 or float64"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\", \"vector\": \"two.npy\"}",
         "one axis"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\", \"vector\": \"short.npy\"}",
         "data is 4 bytes; its shape needs 32"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"add\", \"vector\": \"v9.npy\"}",
         "version 9"},
        {"{\"hook\": \"blocks.0.attn.hook_z\", \"op\": \"zero\"}, 3", "op 1: must be an object"},
    };
    char text[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, "%s%s]}", P, cases[i].ops);
        t_write("bad.json", text);
        al_intervention iv;
        int rc = al_intervention_load(t_path("bad.json"), &m.cfg, &iv, &e);
        CHECKF(rc == -1 && strstr(e.msg, cases[i].want) && strstr(e.msg, "intervention file") &&
                   !strchr(e.msg, '\n') && iv.ops == NULL && iv.n == 0,
               "%s: %s", cases[i].ops, e.msg);
    }
    const char *whole[][2] = {
        {"[1]", "must be a JSON object"},
        {"{\"ops\": []}", "\"attnlab_intervention\": 1 is missing"},
        {"{\"attnlab_intervention\": 2, \"ops\": []}", "\"attnlab_intervention\": 1 is missing"},
        {"{\"attnlab_intervention\": 1, \"ops\": []}", "1 to 100000 ops"},
        {"{\"attnlab_intervention\": 1, \"ops\": [], \"extra\": 0}", "unknown key \"extra\""},
        {"{\"attnlab_intervention\": 1, \"description\": 3, \"ops\": [{}]}",
         "\"description\" must be a string"},
        {"{\"attnlab_intervention\": 1,", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        al_intervention iv;
        CHECKF(al_intervention_parse(whole[i][0], strlen(whole[i][0]), NULL, &m.cfg, &iv, &e) ==
                       -1 &&
                   strstr(e.msg, whole[i][1]) && iv.ops == NULL,
               "%s: %s", whole[i][0], e.msg);
    }
    /* a point the forward does not run yet is refused by name */
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        if (!al_hook_runs(p)) {
            char nm[64];
            al_hook_name(p, 0, nm, sizeof nm);
            snprintf(text, sizeof text, "%s{\"hook\": \"%s\", \"op\": \"zero\"}]}", P, nm);
            al_intervention iv;
            CHECKF(al_intervention_parse(text, strlen(text), NULL, &m.cfg, &iv, &e) == -1 &&
                       strstr(e.msg, "not run by this engine's forward"),
                   "%s", e.msg);
            break;
        }
    al_model_free(&m);
}

/* A tiny 2-layer model in dir/m2, iv.json zeroing head 1.2 at the point
 * `hook` (a full hook name) and mask.json with 1.2 off. */
static void head_off_files(const char *dir, const char *hook) {
    t_tiny_model(dir, 2, 5);
    char iv[400];
    snprintf(iv, sizeof iv,
             "{\"attnlab_intervention\": 1, \"description\": \"head 1.2 off\", "
             "\"ops\": [{\"hook\": \"%s\", \"head\": 2, \"op\": \"zero\"}]}",
             hook);
    t_write("iv.json", iv);
    t_write("mask.json", "{\"n_layers\": 2, \"n_heads\": 4, \"off\": [\"1.2\"]}");
}

/* The CLI: run --intervene zeroing head 1.2's pattern = run --mask with
 * 1.2 off; the JSON records the file; --save-cache holds the zeroed
 * pattern; a bad file is one line and exit 1. */
TEST(intervene_run_cli) {
    const char *dir = t_tmpdir(), *b = t_bin();
    head_off_files(dir, "blocks.1.attn.hook_pattern");
    CHECK(t_sh("%s run --model %s/m2 --prompt 'the cat sat' --top 64 --intervene %s/iv.json --json "
               "> %s/a.json",
               b, dir, dir, dir) == 0);
    CHECK(t_sh("%s run --model %s/m2 --prompt 'the cat sat' --top 64 --mask %s/mask.json --json "
               "> %s/b.json",
               b, dir, dir, dir) == 0);
    CHECK(t_sh("%s run --model %s/m2 --prompt 'the cat sat' --top 64 --json > %s/c.json", b, dir,
               dir) == 0);
    char *a = t_slurp(t_path("a.json")), *m = t_slurp(t_path("b.json")),
         *c = t_slurp(t_path("c.json"));
    /* the token tables of the first two are the same text; the plain run's differs */
    const char *ta = a ? strstr(a, "\"tokens\"") : NULL, *tm = m ? strstr(m, "\"tokens\"") : NULL,
               *tc = c ? strstr(c, "\"tokens\"") : NULL;
    CHECK(ta && tm && tc && !strcmp(ta, tm) && strcmp(ta, tc));
    CHECKF(a && strstr(a, "\"intervention\"") && strstr(a, "\"head 1.2 off\""), "%s", a ? a : "");
    free(a), free(m), free(c);
    CHECK(t_sh("%s run --model %s/m2 --prompt 'the cat sat' --intervene %s/iv.json --save-cache "
               "%s/c.safetensors --hooks pattern > %s/run.txt",
               b, dir, dir, dir, dir) == 0);
    char *txt = t_slurp(t_path("run.txt"));
    CHECK(txt && strstr(txt, "intervention ") && strstr(txt, "1 op at their hook points"));
    free(txt);
    al_st_file *f;
    al_err e;
    CHECK_OK(al_st_open(t_path("c.safetensors"), &f, &e), &e);
    const al_st_tensor *p1 = al_st_get(f, "blocks.1.attn.hook_pattern");
    CHECK(p1 && p1->ndim == 4 && p1->shape[1] == 4);
    if (p1) {
        int64_t T = p1->shape[2];
        const float *d = (const float *)p1->data;
        double head2 = 0, head1 = 0;
        for (int64_t i = 0; i < T * T; i++) head2 += fabs(d[2 * T * T + i]), head1 += d[T * T + i];
        CHECKF(head2 == 0 && fabs(head1 - (double)T) < 1e-4, "head 2 |sum| %g, head 1 sum %g",
               head2, head1);
    }
    al_st_close(f);
    t_write("bad.json",
            "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": \"blocks.1.attn.hook_z\", "
            "\"head\": 9, \"op\": \"zero\"}]}");
    CHECK(t_sh("%s run --model %s/m2 --prompt 'x' --intervene %s/bad.json > /dev/null 2> %s/err", b,
               dir, dir, dir) == 1);
    CHECK(t_one_line(t_path("err"), "op 0: \"head\" must be an integer in 0..3"));
}

/* An analysis takes --intervene as run does: the driver attaches the file
 * before the analysis's own hooks, and the run's config records it as
 * parsed. A file that zeroes head 1.2's output (hook_z) gives the stored
 * numbers of --mask of that head: scores bit for bit (both are plain forwards),
 * patch within float rounding (with hooks every configuration is a full
 * patched forward, without them the incremental one). paths and ACDC
 * complete under it; a bad file is refused in one line before the
 * database exists. */
TEST(intervene_analyses_match_mask) {
    const char *dir = t_tmpdir(), *b = t_bin();
    head_off_files(dir, "blocks.1.attn.hook_z");
    static const char *const cmds[] = {"scores --probe-r 10", "patch --probe-r 10 --n 8"};
    for (int k = 0; k < 2; k++) {
        CHECK(t_sh("%s %s --model %s/m2 --db %s/m.db --mask %s/mask.json > /dev/null 2>&1", b,
                   cmds[k], dir, dir, dir) == 0);
        CHECK(t_sh("%s %s --model %s/m2 --db %s/i.db --intervene %s/iv.json > /dev/null 2> %s/err",
                   b, cmds[k], dir, dir, dir, dir) == 0);
    }
    char q[600];
    snprintf(q, sizeof q,
             "attach '%s/i.db' as i; select count(*) from head_scores a join "
             "i.head_scores b using (run_id, layer, head, metric) where a.value is b.value",
             dir);
    long same = t_sql_long(t_path("m.db"), q);
    long all = t_sql_long(t_path("m.db"), "select count(*) from head_scores");
    CHECKF(all > 0 && same == all, "scores: %ld of %ld stored values equal", same, all);
    snprintf(q, sizeof q,
             "attach '%s/i.db' as i; select count(*), max(abs(a.value - b.value)) < "
             "1e-6 from patching a join i.patching b on a.run_id = b.run_id and a.layer is b.layer "
             "and a.head is b.head and a.pos is b.pos and a.component = b.component",
             dir);
    char *pv = t_sql(t_path("m.db"), q);
    CHECKF(pv && !strcmp(pv, "8|1"), "patch: %s", pv ? pv : "(null)");
    free(pv);
    /* the run records the file as parsed, and the note says it applied */
    CHECK(t_sql_long(t_path("i.db"), "select count(*) from runs where config_json like "
                                     "'%intervention%head 1.2 off%'") == 2);
    char *err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "attnlab: note: intervention ") && strstr(err, "1 op applied"));
    free(err);
    CHECK(t_sh("%s paths --probe-r 10 --n 4 --model %s/m2 --db %s/i.db --intervene %s/iv.json "
               "> /dev/null 2>&1",
               b, dir, dir, dir) == 0);
    CHECK(t_sh("%s discover --probe-r 10 --n 4 --model %s/m2 --db %s/i.db --intervene %s/iv.json "
               "> /dev/null 2>&1",
               b, dir, dir, dir) == 0);
    CHECK(t_sh("%s discover --method eap --model %s/m2 --db %s/new.db --intervene %s/iv.json > "
               "/dev/null 2> %s/err",
               b, dir, dir, dir, dir) == 2);
    CHECK(t_one_line(t_path("err"), "--intervene is for --method acdc"));
    t_write("bad.json",
            "{\"attnlab_intervention\": 1, \"ops\": [{\"hook\": \"blocks.1.attn.hook_z\", "
            "\"head\": 9, \"op\": \"zero\"}]}");
    CHECK(
        t_sh("%s scores --model %s/m2 --db %s/new.db --intervene %s/bad.json > /dev/null 2> %s/err",
             b, dir, dir, dir, dir) == 1);
    CHECK(t_one_line(t_path("err"), "op 0: \"head\" must be an integer in 0..3"));
    CHECK(!al_file_exists(t_path("new.db")));
}
