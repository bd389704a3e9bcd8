/* test_core.c -- the shared core pieces: al_buf (the one growable byte
 * buffer) and al_ckpt_read_state (the one reader of state.json). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"
#include "attnlab/checkpoint.h"
#include "attnlab/stats.h"
#include "attnlab/util.h"
#include "test.h"

TEST(buf_appends) {
    al_buf b = AL_BUF_INIT;
    al_buf_put(&b, "ab", 2);
    al_buf_put(&b, "\0x", 2); /* binary bytes, counted, NUL included */
    al_buf_puts(&b, "cd");
    al_buf_put(&b, "zz", 0);
    al_buf_printf(&b, "%d-%s", 42, "e");
    CHECK(al_buf_ok(&b));
    CHECK(b.n == 10 && memcmp(b.p, "ab\0xcd42-e", 10) == 0 && b.p[b.n] == 0);
    /* growth past the first allocation keeps every byte */
    for (int i = 0; i < 3000; i++) al_buf_put(&b, "0123456789", 10);
    CHECK(al_buf_ok(&b) && b.n == 10 + 30000 && b.p[b.n] == 0);
    CHECK(memcmp(b.p + 10 + 29990, "0123456789", 10) == 0);
    size_t n = 0;
    char *s = al_buf_take(&b, &n);
    CHECK(s && n == 30010 && b.p == NULL && b.n == 0);
    free(s);
    al_buf_free(&b);
}

TEST(buf_printf_long) {
    /* longer than al_buf_printf's 1024-byte stack buffer, appended after
     * existing contents: formatted in full, nothing read past the stack */
    char big[3001];
    for (int i = 0; i < 3000; i++) big[i] = (char)('a' + i % 26);
    big[3000] = 0;
    al_buf b = AL_BUF_INIT;
    al_buf_puts(&b, "<");
    al_buf_printf(&b, "[%s|%d]", big, 7);
    al_buf_puts(&b, ">");
    CHECK(al_buf_ok(&b) && b.n == 1 + 3000 + 4 + 1);
    CHECK(b.p[0] == '<' && b.p[1] == '[' && memcmp(b.p + 2, big, 3000) == 0);
    CHECK(strcmp(b.p + 3002, "|7]>") == 0);
    al_buf_free(&b);
    CHECK(b.p == NULL && b.n == 0);
}

TEST(buf_take_empty_and_reset) {
    al_buf b = AL_BUF_INIT;
    size_t n = 99;
    char *s = al_buf_take(&b, &n);
    CHECK(s && s[0] == 0 && n == 0); /* "" not NULL: nothing failed */
    free(s);
    al_buf_puts(&b, "first piece");
    char *p = b.p;
    al_buf_reset(&b);
    CHECK(b.n == 0 && b.p == p && b.p[0] == 0); /* memory kept */
    al_buf_puts(&b, "x");
    CHECK(strcmp(b.p, "x") == 0);
    al_buf_free(&b);
    al_buf_reset(&b); /* on a buffer that never allocated: a no-op */
    CHECK(b.p == NULL && b.n == 0);
}

/* A small saved checkpoint with a training state. */
static void save_ckpt(const char *dir, int with_state) {
    al_err e;
    al_config c = al_config_default();
    c.n_layers = 1;
    c.d_model = 8;
    c.n_heads = 2;
    c.d_head = 4;
    c.n_ctx = 4;
    c.d_vocab = 7;
    al_model m;
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    al_train_state st;
    memset(&st, 0, sizeof st);
    st.step = 12;
    al_rng_seed(&st.rng, 5);
    st.tokens_seen = 384;
    st.last_train_loss = 1.25;
    st.last_val_loss = 1.5;
    st.train_json = strdup("{\"steps\": 12}");
    float *am = calloc(m.n_params, sizeof(float)), *av = calloc(m.n_params, sizeof(float));
    CHECK_OK(al_ckpt_save(dir, &m, NULL, with_state ? &st : NULL, with_state ? am : NULL,
                          with_state ? av : NULL, &e),
             &e);
    free(am);
    free(av);
    al_state_free(&st);
    al_model_free(&m);
}

TEST(ckpt_read_state) {
    al_err e;
    al_train_state st;
    const char *dir = t_path("ck");
    save_ckpt(dir, 1);
    CHECK_OK(al_ckpt_read_state(dir, &st, &e), &e);
    CHECK(st.step == 12 && st.tokens_seen == 384 && st.last_train_loss == 1.25 &&
          st.last_val_loss == 1.5);
    CHECK(st.train_json && strstr(st.train_json, "\"steps\""));
    al_state_free(&st);

    /* inference-only: no state.json is 1, not an error */
    const char *inf = t_path("inf");
    save_ckpt(inf, 0);
    memset(&st, 0xff, sizeof st);
    CHECK(al_ckpt_read_state(inf, &st, &e) == 1);
    CHECK(st.step == 0 && st.train_json == NULL);

    /* a corrupt state.json: -1 with a message naming the file */
    FILE *f = fopen(t_path("ck/state.json"), "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"step\": ", f);
        fclose(f);
    }
    e.msg[0] = 0;
    CHECK(al_ckpt_read_state(dir, &st, &e) == -1);
    CHECKF(strstr(e.msg, "state.json") != NULL, "message: %s", e.msg);
    CHECK(st.train_json == NULL);
}

TEST(core_grow_doubles_only_when_full) {
    al_err e;
    int cap = 0, *a = NULL;
    for (int n = 0; n < 40; n++) {
        int had = cap;
        int *b = al_grow(a, &cap, n, sizeof *b, 4, &e);
        CHECK_OK(b ? 0 : -1, &e);
        if (!b) break;
        if (n < had)
            CHECK(b == a && cap == had); /* room left: the same array */
        else
            CHECK(cap == (had ? 2 * had : 4));
        a = b;
        a[n] = n;
    }
    CHECK(cap == 64); /* 4, 8, 16, 32, 64 */
    for (int n = 0; n < 40; n++) CHECK(a[n] == n);
    free(a);
}

/* AUROC: hand cases (perfect, reversed, ties count half, implicit zeros
 * as the value 0) and random sparse data against the pairwise count. */
TEST(core_auroc) {
    const double a[] = {3, 4}, b[] = {1, 2};
    CHECK_NEAR(al_auroc(a, 2, 0, b, 2, 0), 1.0, 0);
    CHECK_NEAR(al_auroc(b, 2, 0, a, 2, 0), 0.0, 0);
    const double t[] = {2, 2};
    CHECK_NEAR(al_auroc(t, 2, 0, t, 2, 0), 0.5, 0);
    /* pos {1, 0, 0}, neg {0, 0, 0, 0}: 4 + 0.5*4*2 = 8 of 12 pairs */
    const double one[] = {1};
    CHECK_NEAR(al_auroc(one, 1, 2, NULL, 0, 4), 8.0 / 12, 1e-15);
    /* a negative score sits below the implicit zeros */
    const double neg[] = {-1};
    CHECK_NEAR(al_auroc(neg, 1, 1, NULL, 0, 1), 0.25, 1e-15);
    CHECK(isnan(al_auroc(NULL, 0, 0, a, 2, 0)));
    al_rng r;
    al_rng_seed(&r, 3);
    enum { N = 300 };
    double p[N], q[N], pn[N], qn[N];
    int np = 0, nq = 0;
    for (int i = 0; i < N; i++) {
        p[i] = al_rng_uniform(&r) < 0.3 ? (double)(1 + (int)(4 * al_rng_uniform(&r))) : 0;
        q[i] = al_rng_uniform(&r) < 0.5 ? (double)(1 + (int)(3 * al_rng_uniform(&r))) : 0;
        if (p[i] != 0) pn[np++] = p[i];
        if (q[i] != 0) qn[nq++] = q[i];
    }
    double u = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) u += p[i] > q[j] ? 1 : p[i] == q[j] ? 0.5 : 0;
    CHECK_NEAR(al_auroc(p, N, 0, q, N, 0), u / (N * N), 1e-12);
    CHECK_NEAR(al_auroc(pn, np, N - np, qn, nq, N - nq), u / (N * N), 1e-12);
}
