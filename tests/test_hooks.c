/* test_hooks.c -- the engine's hooks (hooks.h): where and how often they
 * run, what they see, that a hook writing a buffer is an intervention at
 * that point (equal to the patch spec's), and their refusals. */
#include <stdlib.h>
#include <string.h>

#include "attnlab/model.h"
#include "test.h"

enum { HB = 2, HT = 6, HL = 2, HH = 2, HD = 4, HC = 8, HV = 9 };

static void hmodel(al_model *m) {
    al_config c = al_config_default();
    c.n_layers = HL, c.d_model = HC, c.n_heads = HH, c.d_head = HD, c.n_ctx = HT, c.d_vocab = HV;
    c.seed = 3;
    al_err e;
    CHECK_OK(al_model_init(m, &c, &e), &e);
}

static void toks(int *in, int seed) {
    for (int i = 0; i < HB * HT; i++) in[i] = (i * 7 + seed * 3 + i / HT) % HV;
}

typedef struct counter {
    int calls[AL_HOOK_N_POINTS][HL];
    size_t ld[AL_HOOK_N_POINTS];
} counter;

/* Reads its activation (every float, so a bad view would be caught by the
 * sanitizers) and writes nothing. */
static int count(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    counter *c = ctx;
    c->calls[a->point][a->layer]++;
    c->ld[a->point] = a->ld;
    volatile float s = 0;
    size_t n = a->point == AL_HOOK_PATTERN ? (size_t)HB * HH * HT * HT : (size_t)HB * HT;
    for (size_t i = 0; a->point != AL_HOOK_PATTERN && i < n; i++) s += a->data[i * a->ld];
    return 0;
}

/* A no-op hook at every point leaves the forward bit for bit; each runs
 * once per layer with the documented row strides; layer filters hold. */
TEST(hooks_points_and_noop) {
    al_model m;
    hmodel(&m);
    int in[HB * HT];
    toks(in, 1);
    al_err e;
    CHECK_OK(al_model_forward(&m, in, NULL, HB, HT, &e), &e);
    float *plain = malloc(sizeof(float) * HB * HT * HV);
    memcpy(plain, m.probs, sizeof(float) * HB * HT * HV);
    counter c = {0}, one = {0};
    /* the LayerNorm points do not exist in this model (no LayerNorm) */
    int exists[AL_HOOK_N_POINTS];
    for (int p = 0; p < AL_HOOK_N_POINTS; p++) {
        exists[p] = p != AL_HOOK_LN1_SCALE && p != AL_HOOK_LN1_NORMALIZED &&
                    p != AL_HOOK_LNF_SCALE && p != AL_HOOK_LNF_NORMALIZED;
        if (!exists[p])
            CHECK(al_hook_add(&m, p, -1, count, &c, &e) == -1 && strstr(e.msg, "does not exist"));
        else if (p != AL_HOOK_RESULT && al_hook_runs(p))
            CHECK_OK(al_hook_add(&m, p, -1, count, &c, &e), &e);
    }
    CHECK_OK(al_hook_add(&m, AL_HOOK_Z, 1, count, &one, &e), &e);
    CHECK_OK(al_model_forward(&m, in, NULL, HB, HT, &e), &e);
    CHECK(!memcmp(plain, m.probs, sizeof(float) * HB * HT * HV));
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        for (int l = 0; l < HL; l++) {
            int want = exists[p] && p != AL_HOOK_RESULT && al_hook_runs(p) &&
                       (l == 0 || !al_hook_is_model_level(p));
            CHECKF(c.calls[p][l] == want, "point %d layer %d: %d calls", p, l, c.calls[p][l]);
        }
    CHECK(one.calls[AL_HOOK_Z][1] == 1 && one.calls[AL_HOOK_Z][0] == 0);
    CHECK(c.ld[AL_HOOK_RESID_PRE] == HC && c.ld[AL_HOOK_Q] == 3 * HH * HD &&
          c.ld[AL_HOOK_Z] == HH * HD && c.ld[AL_HOOK_RESID_POST] == HC);
    /* RESULT: the heads' outputs added one by one, equal to float rounding */
    CHECK_OK(al_hook_add(&m, AL_HOOK_RESULT, -1, count, &c, &e), &e);
    CHECK_OK(al_model_forward(&m, in, NULL, HB, HT, &e), &e);
    CHECK(c.calls[AL_HOOK_RESULT][0] == 1 && c.calls[AL_HOOK_RESULT][1] == 1 &&
          c.ld[AL_HOOK_RESULT] == HH * HC);
    double worst = 0;
    for (int i = 0; i < HB * HT * HV; i++) worst = fmax(worst, fabs(m.probs[i] - plain[i]));
    CHECKF(worst < 1e-6, "RESULT no-op changed probabilities by %g", worst);
    /* no hook set `intervened`: backward works */
    int tg[HB * HT];
    toks(tg, 2);
    CHECK_OK(al_model_forward(&m, in, tg, HB, HT, &e), &e);
    CHECK_OK(al_model_backward(&m, &e), &e);
    al_hook_remove(&m, &one);
    al_hook_remove(&m, &c);
    CHECK(m.hooks.n == 0);
    free(plain);
    al_model_free(&m);
}

typedef struct kcopy {
    const float *src_qkv; /* (L, B, T, 3, H, D) of another run */
} kcopy;

/* K hook: head 1's keys of layer 0 from the source, at every position. */
static int copy_k(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const kcopy *k = ctx;
    if (a->layer != 0) return 0;
    const size_t rs = 3 * HH * HD;
    for (size_t r = 0; r < (size_t)HB * HT; r++)
        memcpy(a->data + r * a->ld + 1 * HD, k->src_qkv + r * rs + HH * HD + 1 * HD,
               sizeof(float) * HD);
    a->intervened = 1;
    return 0;
}

static int fail_hook(al_hook_act *a, void *ctx, al_err *e) {
    (void)a, (void)ctx;
    return al_errf(e, "hook says no");
}

/* A hook writing keys is the patch spec's key patch, bit for bit; an
 * intervening hook refuses backward; a failing hook fails the forward. */
TEST(hooks_write_is_patch) {
    al_model m;
    hmodel(&m);
    int ia[HB * HT], ib[HB * HT], tg[HB * HT];
    toks(ia, 1), toks(ib, 5), toks(tg, 2);
    al_err e;
    al_acts src;
    CHECK_OK(al_acts_alloc(&src, &m.cfg, HB, HT, &e), &e);
    CHECK_OK(al_model_forward(&m, ib, NULL, HB, HT, &e), &e);
    CHECK_OK(al_acts_save(&m, &src, &e), &e);
    unsigned char qm[HL * 3 * HH * HT] = {0};
    memset(qm + ((0 * 3 + 1) * HH + 1) * HT, 1, HT); /* layer 0, k, head 1, every t */
    al_patch_spec sp = {.src_qkv = src.qkv, .qkv_mask = qm};
    CHECK_OK(al_patch_hooks_add(&m, &sp, &e), &e);
    CHECK_OK(al_model_forward(&m, ia, NULL, HB, HT, &e), &e);
    al_hook_remove(&m, &sp);
    float *want = malloc(sizeof(float) * HB * HT * HV);
    memcpy(want, m.probs, sizeof(float) * HB * HT * HV);
    kcopy k = {src.qkv};
    CHECK_OK(al_hook_add(&m, AL_HOOK_K, -1, copy_k, &k, &e), &e);
    CHECK_OK(al_model_forward(&m, ia, tg, HB, HT, &e), &e);
    CHECK(!memcmp(want, m.probs, sizeof(float) * HB * HT * HV));
    CHECK(al_model_backward(&m, &e) == -1);
    CHECK_OK(al_hook_add(&m, AL_HOOK_RESID_POST, 1, fail_hook, NULL, &e), &e);
    CHECK(al_model_forward(&m, ia, tg, HB, HT, &e) == -1 && strstr(e.msg, "hook says no"));
    CHECK(al_model_backward(&m, &e) == -1);
    al_hook_clear(&m);
    free(want);
    al_acts_free(&src);
    al_model_free(&m);
}

TEST(hooks_refusals) {
    al_model m;
    hmodel(&m);
    al_err e;
    CHECK(al_hook_add(&m, AL_HOOK_Q, HL, count, NULL, &e) == -1 && strstr(e.msg, "layer"));
    CHECK(al_hook_add(&m, AL_HOOK_N_POINTS, 0, count, NULL, &e) == -1);
    unsigned char zm[HL * HH * HT] = {0};
    al_patch_spec bad = {.z_mask = zm};
    CHECK(al_patch_hooks_add(&m, &bad, &e) == -1 && m.hooks.n == 0);
    al_model_free(&m);
}

typedef struct hlog {
    int n;
    int who[4096], point[4096], layer[4096];
} hlog;

typedef struct hslot {
    hlog *log;
    int idx;
} hslot;

static int log_hook(al_hook_act *a, void *ctx, al_err *e) {
    hslot *s = ctx;
    if (s->log->n >= 4096) return al_errf(e, "log full");
    s->log->who[s->log->n] = s->idx, s->log->point[s->log->n] = a->point;
    s->log->layer[s->log->n++] = a->layer;
    return 0;
}

/* No fixed cap: 500 hooks over every point that runs (per layer and for
 * every layer) each run once per matching layer, in the order they were
 * added at each point, the forward unchanged to the bit; the list moves
 * out and back (al_hooks_save/restore) with hooks added in between
 * dropped, and al_hooks_copy skips one ctx. */
TEST(hooks_many_in_order) {
    enum { NH = 500 };
    al_model m;
    hmodel(&m);
    int in[HB * HT];
    toks(in, 3);
    al_err e;
    CHECK_OK(al_model_forward(&m, in, NULL, HB, HT, &e), &e);
    float *plain = malloc(sizeof(float) * HB * HT * HV);
    memcpy(plain, m.probs, sizeof(float) * HB * HT * HV);
    int pts[AL_HOOK_N_POINTS], np = 0;
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        if (al_hook_runs(p) && al_hook_exists(&m.cfg, p) && p != AL_HOOK_RESULT &&
            !al_hook_is_model_level(p))
            pts[np++] = p;
    static hlog log;
    static hslot slot[NH];
    int want_calls = 0;
    for (int i = 0; i < NH; i++) {
        slot[i] = (hslot){&log, i};
        int p = pts[i % np], l = (i / np) % (HL + 1) - 1; /* -1: every layer */
        CHECK_OK(al_hook_add(&m, p, l, log_hook, &slot[i], &e), &e);
        want_calls += l < 0 ? HL : 1;
    }
    CHECK(m.hooks.n == NH && m.hooks.cap >= NH);
    log.n = 0;
    CHECK_OK(al_model_forward(&m, in, NULL, HB, HT, &e), &e);
    CHECK(!memcmp(plain, m.probs, sizeof(float) * HB * HT * HV));
    CHECKF(log.n == want_calls, "%d calls, want %d", log.n, want_calls);
    /* at each (point, layer) the hooks ran in the order they were added */
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        for (int l = 0; l < HL; l++) {
            int last = -1, n = 0, want = 0;
            for (int k = 0; k < log.n; k++)
                if (log.point[k] == p && log.layer[k] == l) {
                    CHECKF(log.who[k] > last, "point %d layer %d: hook %d after %d", p, l,
                           log.who[k], last);
                    last = log.who[k], n++;
                }
            for (int i = 0; i < NH; i++)
                want += m.hooks.h[i].point == (al_hook_point)p &&
                        (m.hooks.h[i].layer < 0 || m.hooks.h[i].layer == l);
            CHECKF(n == want, "point %d layer %d: %d calls, want %d", p, l, n, want);
        }
    /* save, add, restore: the 500 are back, the one added meanwhile gone */
    al_hooks saved;
    al_hooks_save(&m, &saved);
    CHECK(m.hooks.n == 0 && saved.n == NH);
    counter c = {0};
    CHECK_OK(al_hook_add(&m, AL_HOOK_Z, -1, count, &c, &e), &e);
    CHECK_OK(al_model_forward(&m, in, NULL, HB, HT, &e), &e);
    CHECK(c.calls[AL_HOOK_Z][0] == 1 && c.calls[AL_HOOK_Z][1] == 1);
    al_hooks_restore(&m, &saved);
    CHECK(m.hooks.n == NH && saved.n == 0 && saved.h == NULL);
    for (int i = 0; i < NH; i++) CHECK(m.hooks.h[i].ctx == &slot[i]);
    /* a copy without one ctx */
    al_hooks cp = {0};
    CHECK_OK(al_hooks_copy(&cp, &m.hooks, &slot[7], &e), &e);
    CHECK(cp.n == NH - 1 && cp.h[6].ctx == &slot[6] && cp.h[7].ctx == &slot[8]);
    al_hooks_free(&cp);
    al_hooks_free(&cp);
    al_hook_remove(&m, &slot[0]);
    CHECK(m.hooks.n == NH - 1 && m.hooks.h[0].ctx == &slot[1]);
    free(plain);
    al_model_free(&m); /* frees the list (the sanitizer build checks) */
    CHECK(m.hooks.h == NULL && m.hooks.n == 0);
}

/* The name table (docs/hooks.md): every point's TransformerLens name
 * parses back to it at every layer, shapes are TransformerLens's, and
 * names that are not hook points, or past the model's layers, are
 * refused with the name in the message. */
TEST(hooks_name_table) {
    al_err e;
    char nm[64];
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        for (int l = 0; l < 3; l++) {
            CHECK(al_hook_name(p, l, nm, sizeof nm) > 0);
            al_hook_point q = AL_HOOK_N_POINTS;
            int ql = -1;
            CHECK_OK(al_hook_parse(nm, 3, &q, &ql, &e), &e);
            CHECKF(q == (al_hook_point)p && ql == (al_hook_is_model_level(p) ? 0 : l), "%s", nm);
        }
    struct {
        const char *name;
        al_hook_point p;
        int l;
        int nd;
        int64_t s[4];
    } want[] = {
        {"blocks.1.attn.hook_pattern", AL_HOOK_PATTERN, 1, 4, {2, 8, 5, 5}},
        {"blocks.0.attn.hook_z", AL_HOOK_Z, 0, 4, {2, 5, 8, 32}},
        {"blocks.0.attn.hook_result", AL_HOOK_RESULT, 0, 4, {2, 5, 8, 256}},
        {"blocks.2.hook_resid_post", AL_HOOK_RESID_POST, 2, 3, {2, 5, 256}},
        {"blocks.0.ln1.hook_scale", AL_HOOK_LN1_SCALE, 0, 3, {2, 5, 1}},
        {"blocks.1.hook_q_input", AL_HOOK_Q_INPUT, 1, 4, {2, 5, 8, 256}},
        {"blocks.1.attn.hook_attn_scores", AL_HOOK_ATTN_SCORES, 1, 4, {2, 8, 5, 5}},
        {"ln_final.hook_normalized", AL_HOOK_LNF_NORMALIZED, 0, 3, {2, 5, 256}},
        {"hook_embed", AL_HOOK_EMBED, 0, 3, {2, 5, 256}},
        {"logits", AL_HOOK_LOGITS, 0, 3, {2, 5, 100}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        al_hook_point q;
        int ql;
        CHECK_OK(al_hook_parse(want[i].name, 3, &q, &ql, &e), &e);
        CHECKF(q == want[i].p && ql == want[i].l, "%s", want[i].name);
        int64_t s[4] = {0};
        int nd = al_hook_shape(q, 2, 5, 256, 8, 32, 100, s);
        CHECKF(nd == want[i].nd && !memcmp(s, want[i].s, sizeof(int64_t) * nd), "%s", want[i].name);
    }
    const char *bad[] = {"blocks.3.hook_resid_pre",
                         "blocks.x.hook_resid_pre",
                         "blocks.0",
                         "blocks.0.hook_embed",
                         "hook_resid_pre",
                         "ln_final.hook_sale",
                         "",
                         "blocks.99999999999.attn.hook_z"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        al_hook_point q;
        int ql;
        CHECKF(al_hook_parse(bad[i], 3, &q, &ql, &e) == -1 && strstr(e.msg, bad[i]), "%s: %s",
               bad[i], e.msg);
    }
    /* a point the forward does not run is refused by name, not ignored */
    al_model m;
    hmodel(&m);
    for (int p = 0; p < AL_HOOK_N_POINTS; p++)
        if (!al_hook_runs(p)) {
            CHECK(al_hook_add(&m, p, 0, count, NULL, &e) == -1 && strstr(e.msg, "not run"));
            break;
        }
    al_model_free(&m);
}
