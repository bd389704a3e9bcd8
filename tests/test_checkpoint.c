/* test_checkpoint.c -- model directories: TransformerLens layout, bitwise
 * round trip, refusals naming the file, and crash recovery (simulated
 * states and real SIGKILLs during saves). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attnlab/checkpoint.h"
#include "attnlab/safetensors.h"
#include "test.h"

static al_config cfg(int L, int V, int tied, uint64_t seed) {
    al_config c = al_config_default();
    c.n_layers = L;
    c.d_model = 16;
    c.n_heads = 2;
    c.d_head = 8;
    c.n_ctx = 5;
    c.d_vocab = V;
    c.tied_embeddings = tied;
    c.seed = seed;
    return c;
}

static char *slurp_n(const char *path, size_t *n) {
    unsigned char *d;
    if (al_read_file(path, &d, n, 0, NULL) != 0) return NULL;
    return (char *)d;
}

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = slurp_n(a, &na), *y = slurp_n(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static const char *in_dir(const char *dir, const char *name) {
    static char bufs[8][1200];
    static int k;
    char *b = bufs[k++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

/* The safetensors header of a file, parsed. */
static cJSON *header_of(const char *path, size_t *data_start) {
    size_t n;
    char *d = slurp_n(path, &n);
    if (!d || n < 8) return NULL;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (unsigned char)d[i];
    char *h = strndup(d + 8, hl);
    cJSON *j = cJSON_Parse(h);
    free(h);
    free(d);
    *data_start = 8 + hl;
    return j;
}

static float file_f32(const char *path, size_t byte_off) {
    size_t n;
    char *d = slurp_n(path, &n);
    float x = NAN;
    if (d && byte_off + 4 <= n) memcpy(&x, d + byte_off, 4);
    free(d);
    return x;
}

TEST(ckpt_tl_names_and_shapes) {
    al_model m;
    al_err e;
    al_config c = cfg(2, 11, 0, 3);
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    const char *p = t_path("model.safetensors");
    CHECK_OK(al_ckpt_write_weights(p, &m, &e), &e);
    size_t ds;
    cJSON *h = header_of(p, &ds);
    CHECK(h != NULL);
    if (!h) return;
    /* Exactly these tensors, in TransformerLens order, with these shapes. */
    static const char *want[][2] =
        {{"embed.W_E", "[11,16]"},          {"pos_embed.W_pos", "[5,16]"},
         {"blocks.0.attn.W_Q", "[2,16,8]"}, {"blocks.0.attn.W_K", "[2,16,8]"},
         {"blocks.0.attn.W_V", "[2,16,8]"}, {"blocks.0.attn.W_O", "[2,8,16]"},
         {"blocks.1.attn.W_Q", "[2,16,8]"}, {"blocks.1.attn.W_K", "[2,16,8]"},
         {"blocks.1.attn.W_V", "[2,16,8]"}, {"blocks.1.attn.W_O", "[2,8,16]"},
         {"unembed.W_U", "[16,11]"}};
    cJSON *j = h->child;
    CHECK(j && strcmp(j->string, "__metadata__") == 0);
    cJSON *fmt = cJSON_GetObjectItem(j, "format");
    CHECK(fmt && cJSON_IsString(fmt) && strcmp(fmt->valuestring, "pt") == 0);
    CHECK(cJSON_GetObjectItem(j, "attnlab_version") != NULL);
    double expect_off = 0;
    size_t k = 0;
    for (j = j->next; j; j = j->next, k++) {
        if (k >= 11) break;
        CHECKF(strcmp(j->string, want[k][0]) == 0, "tensor %zu is %s, want %s", k, j->string,
               want[k][0]);
        char *shape = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "shape"));
        CHECKF(strcmp(shape, want[k][1]) == 0, "%s shape %s, want %s", j->string, shape,
               want[k][1]);
        free(shape);
        cJSON *dt = cJSON_GetObjectItem(j, "dtype"), *of = cJSON_GetObjectItem(j, "data_offsets");
        CHECK(strcmp(dt->valuestring, "F32") == 0);
        CHECK(cJSON_GetArrayItem(of, 0)->valuedouble == expect_off);
        expect_off = cJSON_GetArrayItem(of, 1)->valuedouble;
    }
    CHECK(k == 11 && j == NULL);
    /* Element [h=1, c=3, d=5] of blocks.1.attn.W_Q sits where a row-major
     * (H,C,D) array puts it, and holds W_Q[1,1] (C,D) [3,5]. */
    cJSON *q1 = cJSON_GetObjectItem(h, "blocks.1.attn.W_Q");
    size_t off =
        (size_t)cJSON_GetArrayItem(cJSON_GetObjectItem(q1, "data_offsets"), 0)->valuedouble;
    float x = file_f32(p, ds + off + (size_t)((1 * 16 + 3) * 8 + 5) * 4);
    CHECK(x == al_head_wq(&m, 1, 1)[3 * 8 + 5]);
    /* W_O[0,1] (D,C) element [7,15] */
    cJSON *o0 = cJSON_GetObjectItem(h, "blocks.0.attn.W_O");
    off = (size_t)cJSON_GetArrayItem(cJSON_GetObjectItem(o0, "data_offsets"), 0)->valuedouble;
    x = file_f32(p, ds + off + (size_t)((1 * 8 + 7) * 16 + 15) * 4);
    CHECK(x == al_head_wo(&m, 0, 1)[7 * 16 + 15]);
    cJSON_Delete(h);
    al_model_free(&m);
}

TEST(ckpt_tied_writes_real_wu) {
    al_model m;
    al_err e;
    al_config c = cfg(1, 11, 1, 4);
    CHECK_OK(al_model_init(&m, &c, &e), &e);
    const char *p = t_path("model.safetensors");
    CHECK_OK(al_ckpt_write_weights(p, &m, &e), &e);
    al_st_file *f;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    if (!f) return;
    float wu[16 * 11];
    int64_t sh[2] = {16, 11};
    CHECK_OK(al_st_read_f32(f, "unembed.W_U", 2, sh, wu, &e), &e);
    int bad = 0;
    for (int v = 0; v < 11; v++)
        for (int k = 0; k < 16; k++) bad += wu[k * 11 + v] != m.p[AL_P_WE][v * 16 + k];
    CHECK(bad == 0);
    CHECK(al_st_count(f) == 7);
    al_st_close(f);
    al_model_free(&m);
}

/* A model, tokenizer and training state that differ by `seed`. */
typedef struct fixture {
    al_model m;
    al_tokenizer *tok;
    al_train_state st;
    float *am, *av;
} fixture;

static void fixture_make(fixture *fx, int tied, uint64_t seed) {
    al_err e;
    al_config c = cfg(2, 257, tied, seed);
    CHECK_OK(al_model_init(&fx->m, &c, &e), &e);
    CHECK_OK(al_tok_byte_level(&fx->tok, &e), &e);
    memset(&fx->st, 0, sizeof fx->st);
    fx->st.step = (long)seed * 100;
    al_rng_seed(&fx->st.rng, seed * 7 + 1);
    fx->st.tokens_seen = 4096.0 * (double)fx->st.step;
    fx->st.last_train_loss = 1.0 / 3.0 + (double)seed;
    fx->st.last_val_loss = NAN;
    fx->st.train_json = strdup("{\"lr\": 0.001, \"steps\": 200}");
    size_t n = fx->m.n_params;
    fx->am = malloc(n * sizeof(float));
    fx->av = malloc(n * sizeof(float));
    al_rng r;
    al_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        fx->am[i] = (float)al_rng_normal(&r) * 1e-3f;
        fx->av[i] = (float)al_rng_uniform(&r) * 1e-6f;
    }
}

static void fixture_free(fixture *fx) {
    al_model_free(&fx->m);
    al_tok_free(fx->tok);
    al_state_free(&fx->st);
    free(fx->am);
    free(fx->av);
}

static int save_fx(const char *dir, fixture *fx, al_err *e) {
    return al_ckpt_save(dir, &fx->m, fx->tok, &fx->st, fx->am, fx->av, e);
}

static int same_cfg(const al_config *a, const al_config *b) {
    return a->n_layers == b->n_layers && a->d_model == b->d_model && a->n_heads == b->n_heads &&
           a->d_head == b->d_head && a->n_ctx == b->n_ctx && a->d_vocab == b->d_vocab &&
           a->tied_embeddings == b->tied_embeddings && a->seed == b->seed;
}

/* Loaded model, optimizer and state equal fx's bit for bit. */
static int matches(const char *dir, const fixture *fx, al_err *e) {
    al_model m;
    al_tokenizer *tok;
    if (al_ckpt_load(dir, &m, &tok, e) != 0) return 0;
    int ok = m.n_params == fx->m.n_params &&
             memcmp(m.params, fx->m.params, m.n_params * sizeof(float)) == 0 &&
             same_cfg(&m.cfg, &fx->m.cfg) && al_tok_vocab_size(tok) == al_tok_vocab_size(fx->tok);
    size_t n = fx->m.n_params;
    float *am = malloc(n * sizeof(float)), *av = malloc(n * sizeof(float));
    al_train_state st;
    if (al_ckpt_load_state(dir, &st, am, av, n, e) != 0) {
        ok = 0;
    } else {
        ok = ok && memcmp(am, fx->am, n * 4) == 0 && memcmp(av, fx->av, n * 4) == 0 &&
             st.step == fx->st.step && memcmp(&st.rng, &fx->st.rng, sizeof st.rng) == 0 &&
             st.tokens_seen == fx->st.tokens_seen && st.last_train_loss == fx->st.last_train_loss &&
             isnan(st.last_val_loss);
        al_state_free(&st);
    }
    free(am);
    free(av);
    al_model_free(&m);
    al_tok_free(tok);
    return ok;
}

TEST(ckpt_roundtrip_bitwise) {
    for (int tied = 0; tied <= 1; tied++) {
        fixture fx;
        fixture_make(&fx, tied, 5);
        al_err e;
        const char *dir = t_path(tied ? "tied" : "untied");
        CHECK_OK(save_fx(dir, &fx, &e), &e);
        CHECKF(matches(dir, &fx, &e), "tied=%d: %s", tied, e.msg);
        /* Saving what was loaded gives byte-identical files. */
        al_model m;
        al_tokenizer *tok;
        CHECK_OK(al_ckpt_load(dir, &m, &tok, &e), &e);
        const char *dir2 = t_path(tied ? "tied2" : "untied2");
        CHECK_OK(al_ckpt_save(dir2, &m, tok, &fx.st, fx.am, fx.av, &e), &e);
        const char *names[] = {"model.safetensors", "config.json", "tokenizer.json",
                               "optim.safetensors", "state.json"};
        for (int i = 0; i < 5; i++)
            CHECKF(same_file(in_dir(dir, names[i]), in_dir(dir2, names[i])), "%s differs",
                   names[i]);
        CHECK(!al_file_exists(in_dir(dir, "COMMIT")));
        al_model_free(&m);
        al_tok_free(tok);
        fixture_free(&fx);
    }
}

TEST(ckpt_inference_only_and_refusals) {
    fixture fx;
    fixture_make(&fx, 0, 2);
    al_err e;
    const char *dir = t_path("d");
    CHECK_OK(save_fx(dir, &fx, &e), &e);
    /* An inference-only save removes the optimizer state of the old one. */
    CHECK_OK(al_ckpt_save(dir, &fx.m, fx.tok, NULL, NULL, NULL, &e), &e);
    CHECK(!al_file_exists(in_dir(dir, "state.json")));
    CHECK(!al_file_exists(in_dir(dir, "optim.safetensors")));
    al_train_state st;
    float *am = malloc(fx.m.n_params * 4), *av = malloc(fx.m.n_params * 4);
    CHECK(al_ckpt_load_state(dir, &st, am, av, fx.m.n_params, &e) == -1);
    CHECKF(strstr(e.msg, "state.json missing"), "%s", e.msg);
    /* NaN weights are never saved over a good checkpoint. */
    char *before = t_slurp(in_dir(dir, "model.safetensors"));
    fx.m.params[17] = NAN;
    CHECK(save_fx(dir, &fx, &e) == -1);
    CHECKF(strstr(e.msg, "1 weights are NaN/Inf"), "%s", e.msg);
    char *after = t_slurp(in_dir(dir, "model.safetensors"));
    CHECK(before && after && strcmp(before, after) == 0 && !al_file_exists(in_dir(dir, "COMMIT")));
    fx.m.params[17] = 0;
    fx.av[3] = INFINITY;
    CHECK(save_fx(dir, &fx, &e) == -1 && strstr(e.msg, "optimizer state is NaN/Inf"));
    CHECK(al_ckpt_save(dir, &fx.m, fx.tok, &fx.st, NULL, NULL, &e) == -1);
    free(before);
    free(after);
    free(am);
    free(av);
    fixture_free(&fx);
}

/* Load must fail; the message must contain `want`. m must come back zeroed. */
static void load_refused(const char *dir, const char *want, int line) {
    al_model m;
    al_tokenizer *tok = (al_tokenizer *)&m; /* must be reset to NULL */
    al_err e = {{0}};
    if (al_ckpt_load(dir, &m, &tok, &e) == 0) {
        t_fail(__FILE__, line, "%s loaded, expected '%s'", dir, want);
        al_model_free(&m);
        al_tok_free(tok);
        return;
    }
    if (!strstr(e.msg, want)) t_fail(__FILE__, line, "'%s' lacks '%s'", e.msg, want);
    if (m.params || tok) t_fail(__FILE__, line, "model or tokenizer not released");
}
#define LOAD_REFUSED(dir, want) load_refused(dir, want, __LINE__)

static void put(const char *path, const char *txt) {
    FILE *f = fopen(path, "wb");
    fputs(txt, f);
    fclose(f);
}

TEST(ckpt_load_refuses_bad_dirs) {
    fixture fx;
    fixture_make(&fx, 0, 3);
    al_err e;
    const char *dir = t_path("d");
    char want[1400];
    CHECK_OK(save_fx(dir, &fx, &e), &e);
    char *cfg_ok = t_slurp(in_dir(dir, "config.json"));
    size_t n;
    char *model_ok = slurp_n(in_dir(dir, "model.safetensors"), &n);

    /* config disagrees with the weights: wrong shape, named */
    char *c6 = strdup(cfg_ok);
    char *pos = strstr(c6, "\"n_ctx\":\t5");
    CHECK(pos != NULL);
    pos[9] = '6';
    put(in_dir(dir, "config.json"), c6);
    snprintf(want, sizeof want,
             "cannot read checkpoint %s/model.safetensors: tensor "
             "pos_embed.W_pos has shape [5,16], expected [6,16]",
             dir);
    LOAD_REFUSED(dir, want);
    /* one layer in config, two in the file: the extra tensor is named */
    strcpy(c6, cfg_ok);
    pos = strstr(c6, "\"n_layers\":\t2");
    pos[12] = '1';
    put(in_dir(dir, "config.json"), c6);
    LOAD_REFUSED(dir, "unexpected tensor blocks.1.attn.W_Q");
    /* tied in config, but W_U is not W_Eᵀ */
    strcpy(c6, cfg_ok);
    pos = strstr(c6, "\"tied_embeddings\":\tfalse");
    memcpy(pos, "\"tied_embeddings\":\ttrue ", 24);
    put(in_dir(dir, "config.json"), c6);
    LOAD_REFUSED(dir, "tensor unembed.W_U is not embed.W_E transposed");
    put(in_dir(dir, "config.json"), "{\"n_layers\": 2}");
    snprintf(want, sizeof want, "cannot read checkpoint %s/config.json: key 'd_model' missing",
             dir);
    LOAD_REFUSED(dir, want);
    unlink(in_dir(dir, "config.json"));
    snprintf(want, sizeof want, "cannot read checkpoint %s: config.json missing", dir);
    LOAD_REFUSED(dir, want);
    put(in_dir(dir, "config.json"), cfg_ok);

    /* NaN in embed.W_E at index 123 (W_E is the first tensor) */
    size_t ds = 8 + ((unsigned char)model_ok[0] | (size_t)(unsigned char)model_ok[1] << 8);
    char *bad = malloc(n);
    memcpy(bad, model_ok, n);
    memcpy(bad + ds + 123 * 4, "\x00\x00\xc0\x7f", 4);
    FILE *f = fopen(in_dir(dir, "model.safetensors"), "wb");
    fwrite(bad, 1, n, f);
    fclose(f);
    snprintf(want, sizeof want,
             "cannot read checkpoint %s/model.safetensors: tensor embed.W_E "
             "contains NaN/Inf at index 123",
             dir);
    LOAD_REFUSED(dir, want);
    /* truncated weights */
    f = fopen(in_dir(dir, "model.safetensors"), "wb");
    fwrite(model_ok, 1, n - 1, f);
    fclose(f);
    snprintf(want, sizeof want,
             "cannot read checkpoint %s/model.safetensors: tensor "
             "unembed.W_U: data_offsets end",
             dir);
    LOAD_REFUSED(dir, want);
    /* header length 2^63 */
    memcpy(bad, model_ok, n);
    memcpy(bad, "\0\0\0\0\0\0\0\x80", 8);
    f = fopen(in_dir(dir, "model.safetensors"), "wb");
    fwrite(bad, 1, n, f);
    fclose(f);
    LOAD_REFUSED(dir, "model.safetensors: bad header length 9223372036854775808");
    f = fopen(in_dir(dir, "model.safetensors"), "wb");
    fwrite(model_ok, 1, n, f);
    fclose(f);
    /* tokenizer missing */
    unlink(in_dir(dir, "tokenizer.json"));
    LOAD_REFUSED(dir, "tokenizer.json missing");
    al_model m;
    CHECK_OK(al_ckpt_load(dir, &m, NULL, &e), &e); /* fine without one */
    al_model_free(&m);
    LOAD_REFUSED(t_path("no-such-dir"), "no-such-dir");
    free(bad);
    free(c6);
    free(cfg_ok);
    free(model_ok);
    fixture_free(&fx);
}

TEST(ckpt_load_state_refuses) {
    fixture fx;
    fixture_make(&fx, 0, 6);
    al_err e;
    const char *dir = t_path("d");
    CHECK_OK(save_fx(dir, &fx, &e), &e);
    size_t n = fx.m.n_params;
    float *am = malloc(n * 4), *av = malloc(n * 4);
    al_train_state st;
    CHECK(al_ckpt_load_state(dir, &st, am, av, n + 1, &e) == -1);
    CHECKF(strstr(e.msg, "optim.safetensors: tensor adam.m has shape"), "%s", e.msg);
    put(in_dir(dir, "state.json"), "{\"step\": 1}");
    CHECK(al_ckpt_load_state(dir, &st, am, av, n, &e) == -1);
    CHECKF(strstr(e.msg, "state.json: key 'tokens_seen'") && strstr(e.msg, dir), "%s", e.msg);
    CHECK(st.train_json == NULL);
    free(am);
    free(av);
    fixture_free(&fx);
}

static const char *const FILES[] = {"model.safetensors", "config.json", "tokenizer.json",
                                    "optim.safetensors", "state.json"};

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *d = slurp_n(from, &n);
    FILE *f = fopen(to, "wb");
    if (d) fwrite(d, 1, n, f);
    fclose(f);
    free(d);
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Crash before COMMIT: some NAME.new and temp files, no marker. The old
 * checkpoint must come back, the debris must go, other files must stay. */
TEST(ckpt_recover_rolls_back) {
    fixture a, b;
    fixture_make(&a, 0, 1);
    fixture_make(&b, 0, 2);
    al_err e;
    const char *dir = t_path("d"), *dirb = t_path("b");
    CHECK_OK(save_fx(dir, &a, &e), &e);
    CHECK_OK(save_fx(dirb, &b, &e), &e);
    copy_file(in_dir(dirb, "model.safetensors"), in_dir(dir, "model.safetensors.new"));
    copy_file(in_dir(dirb, "config.json"), in_dir(dir, "config.json.new"));
    put(in_dir(dir, "state.json.tmp.12345"), "{partial");
    put(in_dir(dir, "optim.safetensors.new.tmp.999"), "partial");
    put(in_dir(dir, "COMMIT.tmp.77"), "attnlab checkpoint commit 1\nrename model.safe");
    put(in_dir(dir, "notes.txt"), "mine");
    put(in_dir(dir, "model.safetensors.bak"), "mine too");
    put(in_dir(dir, "config.json.tmp.x1"), "not ours: not digits");
    CHECK(count_entries(dir) == 13);
    CHECKF(matches(dir, &a, &e), "%s", e.msg); /* load recovers first */
    CHECK(count_entries(dir) == 8);
    CHECK(!al_file_exists(in_dir(dir, "model.safetensors.new")));
    CHECK(!al_file_exists(in_dir(dir, "state.json.tmp.12345")));
    CHECK(!al_file_exists(in_dir(dir, "COMMIT.tmp.77")));
    CHECK(al_file_exists(in_dir(dir, "notes.txt")) &&
          al_file_exists(in_dir(dir, "model.safetensors.bak")));
    CHECK(al_file_exists(in_dir(dir, "config.json.tmp.x1")));
    fixture_free(&a);
    fixture_free(&b);
}

/* Crash after COMMIT with some renames done: recovery finishes the save. */
TEST(ckpt_recover_rolls_forward) {
    fixture a, b;
    fixture_make(&a, 0, 1);
    fixture_make(&b, 1, 2);
    al_err e;
    const char *dir = t_path("d"), *dirb = t_path("b");
    CHECK_OK(save_fx(dir, &a, &e), &e);
    CHECK_OK(save_fx(dirb, &b, &e), &e);
    char nw[1300];
    for (int i = 0; i < 5; i++) {
        snprintf(nw, sizeof nw, "%s.new", in_dir(dir, FILES[i]));
        copy_file(in_dir(dirb, FILES[i]), nw);
    }
    put(in_dir(dir, "COMMIT"), "attnlab checkpoint commit 1\nrename model.safetensors\n"
                               "rename config.json\nrename tokenizer.json\n"
                               "rename optim.safetensors\nrename state.json\n");
    for (int i = 0; i < 2; i++) { /* two renames done before the crash */
        snprintf(nw, sizeof nw, "%s.new", in_dir(dir, FILES[i]));
        CHECK(rename(nw, in_dir(dir, FILES[i])) == 0);
    }
    CHECK_OK(al_ckpt_recover(dir, &e), &e);
    for (int i = 0; i < 5; i++)
        CHECKF(same_file(in_dir(dir, FILES[i]), in_dir(dirb, FILES[i])), "%s", FILES[i]);
    CHECK(!al_file_exists(in_dir(dir, "COMMIT")));
    CHECKF(matches(dir, &b, &e), "%s", e.msg);
    /* A commit of an inference-only save removes the optimizer files. */
    copy_file(in_dir(dirb, "model.safetensors"), in_dir(dir, "model.safetensors.new"));
    put(in_dir(dir, "COMMIT"), "attnlab checkpoint commit 1\nrename model.safetensors\n"
                               "rename config.json\nrename tokenizer.json\n"
                               "remove optim.safetensors\nremove state.json\n");
    CHECK_OK(al_ckpt_recover(dir, &e), &e);
    CHECK(!al_file_exists(in_dir(dir, "state.json")) && !al_file_exists(in_dir(dir, "COMMIT")));
    al_model m;
    CHECK_OK(al_ckpt_load(dir, &m, NULL, &e), &e);
    al_model_free(&m);
    /* A hostile COMMIT cannot name other files. */
    put(in_dir(dir, "COMMIT"), "attnlab checkpoint commit 1\nremove ../../etc/passwd\n");
    CHECK(al_ckpt_recover(dir, &e) == -1);
    CHECKF(strstr(e.msg, "bad line in COMMIT"), "%s", e.msg);
    fixture_free(&a);
    fixture_free(&b);
}

/* Real crashes: a child saves checkpoints A and B alternately and is
 * SIGKILLed at random instants; every time, recovery yields A or B whole
 * (weights, optimizer and state from the same save). */
TEST(ckpt_sigkill_during_saves) {
    fixture a, b;
    fixture_make(&a, 0, 1);
    fixture_make(&b, 0, 2);
    al_err e;
    const char *dir = t_path("d");
    int mid_save = 0, got_a = 0, got_b = 0;
    al_rng r;
    al_rng_seed(&r, (uint64_t)time(NULL));
    for (int it = 0; it < 30; it++) {
        int fds[2];
        if (pipe(fds) != 0) break;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            for (long k = 0;; k++) {
                al_err ce;
                if (save_fx(dir, (k & 1) ? &b : &a, &ce) != 0) _exit(3);
                if (k == 0 && write(fds[1], "x", 1) != 1) _exit(4);
            }
        }
        close(fds[1]);
        char c;
        CHECK(read(fds[0], &c, 1) == 1); /* first save done */
        close(fds[0]);
        struct timespec ts = {0, (long)al_rng_below(&r, 30) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status));
        mid_save += count_entries(dir) != 5; /* debris of an unfinished save */
        al_err ea, eb;
        int is_a = matches(dir, &a, &ea), is_b = !is_a && matches(dir, &b, &eb);
        CHECKF(is_a || is_b, "iteration %d: neither A nor B: %s / %s", it, ea.msg, eb.msg);
        got_a += is_a;
        got_b += is_b;
        CHECK(count_entries(dir) == 5);
    }
    if (getenv("ATTNLAB_TEST_VERBOSE"))
        fprintf(stderr, "    30 kills: %d mid-save, recovered A %d times, B %d times\n", mid_save,
                got_a, got_b);
    CHECK(got_a + got_b == 30);
    (void)e;
    fixture_free(&a);
    fixture_free(&b);
}
