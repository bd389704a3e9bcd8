/* test_config.c -- JSON onto flags, config.json and state.json. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/config.h"
#include "attnlab/sae.h"
#include "test.h"

/* A flag table like a command's, over static option variables. */
static const char *o_out;
static int o_steps, o_tied;
static double o_lr;
static uint64_t o_seed;
static al_flag flags[] = {{"out-dir", AL_STR, &o_out, "DIR", "output", 0, 0},
                          {"steps", AL_INT, &o_steps, "N", "steps", 0, 0},
                          {"lr", AL_FLOAT, &o_lr, "X", "rate", 0, 0},
                          {"tied", AL_BOOL, &o_tied, NULL, "tie", 0, 0},
                          {"seed", AL_U64, &o_seed, "N", "seed", 0, 0},
                          AL_FLAGS_END};

static void reset_flags(void) {
    o_out = "default";
    o_steps = 10;
    o_tied = 0;
    o_lr = 0.5;
    o_seed = 1;
    for (al_flag *f = flags; f->name; f++) f->seen = 0;
}

TEST(config_flags_apply) {
    reset_flags();
    al_err e;
    char json[] = "{\"out_dir\": \"runs/x\", \"steps\": 100, \"lr\": 0.001, "
                  "\"tied\": true, \"seed\": \"18446744073709551615\"}";
    CHECK_OK(al_flags_apply_json(flags, json, "train.json", &e), &e);
    memset(json, 'z', sizeof json - 1); /* strings must not point into the text */
    CHECK(o_out && strcmp(o_out, "runs/x") == 0);
    CHECK(o_steps == 100 && o_lr == 0.001 && o_tied == 1);
    CHECK(o_seed == UINT64_MAX);
    /* JSON-set flags are marked seen: a later source does not override */
    CHECK(flags[0].seen && flags[1].seen && flags[2].seen && flags[3].seen && flags[4].seen);
    CHECK_OK(al_flags_apply_json(flags, "{\"steps\": 5, \"lr\": 2}", "later.json", &e), &e);
    CHECK(o_steps == 100 && o_lr == 0.001);
    /* '-' spelling, exact numeric seed, null string; the command line wins */
    for (al_flag *f = flags; f->name; f++) f->seen = 0;
    flags[1].seen = 1;
    o_steps = 7;
    CHECK_OK(al_flags_apply_json(flags,
                                 "{\"out-dir\": null, \"steps\": 5, \"seed\": 9007199254740992}",
                                 "b.json", &e),
             &e);
    CHECK(o_out == NULL && o_steps == 7 && o_seed == 9007199254740992ULL);
    al_config_arena_free();
}

TEST(config_flags_errors_name_key) {
    reset_flags();
    al_err e;
    struct {
        const char *json, *msg;
    } cases[] = {
        {"{\"stpes\": 5}", "train.json: unknown key 'stpes'"},
        {"{\"steps\": \"100\"}", "train.json: key 'steps' must be an integer"},
        {"{\"steps\": 1.5}", "train.json: key 'steps' must be an integer"},
        {"{\"steps\": 3000000000}", "train.json: key 'steps' must be an integer"},
        {"{\"lr\": \"fast\"}", "train.json: key 'lr' must be a finite number"},
        {"{\"lr\": 1e999}", "train.json: key 'lr' must be a finite number"},
        {"{\"tied\": 1}", "train.json: key 'tied' must be true or false"},
        {"{\"out_dir\": 3}", "train.json: key 'out_dir' must be a string"},
        {"{\"seed\": -1}", "train.json: key 'seed' must be a non-negative integer"},
        {"{\"seed\": 1e300}", "train.json: key 'seed' must be a non-negative integer"},
        {"{\"seed\": \"18446744073709551616\"}",
         "train.json: key 'seed' must be a non-negative integer"},
        {"{\"steps\": 1, \"steps\": 2}", "train.json: key 'steps' given twice"},
        {"{\"steps\": 1, \"steps\": 2}", "train.json: key 'steps' given twice"},
        {"[1, 2]", "train.json: top level must be a JSON object"},
        {"\"x\"", "train.json: top level must be a JSON object"},
        {"{\"steps\": 1,}", "train.json: invalid JSON at line 1, column"},
        {"", "train.json: invalid JSON at line 1, column 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&e, 0, sizeof e);
        int rc = al_flags_apply_json(flags, cases[i].json, "train.json", &e);
        CHECKF(rc == -1 && strncmp(e.msg, cases[i].msg, strlen(cases[i].msg)) == 0,
               "case %zu: got '%s', want '%s'", i, e.msg, cases[i].msg);
    }
    /* A bad file changes nothing, even keys before the bad one. */
    CHECK(al_flags_apply_json(flags, "{\"steps\": 99, \"lr\": \"x\"}", "t", &e) == -1);
    CHECK(o_steps == 10);
    /* Unprintable key bytes are not echoed raw. */
    CHECK(al_flags_apply_json(flags, "{\"a\\u0001b\": 1}", "t", &e) == -1);
    CHECKF(strcmp(e.msg, "t: unknown key 'a?b'") == 0, "%s", e.msg);
    al_config_arena_free();
}

TEST(config_json_error_position) {
    al_err e;
    reset_flags();
    CHECK(al_flags_apply_json(flags, "{\n  \"steps\": 1,\n  oops\n}", "c.json", &e) == -1);
    /* cJSON reports the column just past the start of the bad token */
    CHECKF(strncmp(e.msg, "c.json: invalid JSON at line 3, column ", 39) == 0, "%s", e.msg);
}

/* {"a": OPEN^depth CLOSE^depth} */
static char *nested(size_t depth, const char *open, const char *close) {
    size_t lo = strlen(open), lc = strlen(close);
    char *s = malloc(depth * (lo + lc) + 32), *p = s;
    p += sprintf(p, "{\"a\":");
    for (size_t i = 0; i < depth; i++, p += lo) memcpy(p, open, lo);
    for (size_t i = 0; i < depth; i++, p += lc) memcpy(p, close, lc);
    strcpy(p, "}");
    return s;
}

TEST(config_deep_nesting_refused) {
    reset_flags();
    al_err e;
    /* cJSON alone: its nesting limit must refuse, not overflow the stack */
    char *deep = nested(10000, "[", "]");
    cJSON *j = cJSON_Parse(deep);
    CHECK(j == NULL);
    cJSON_Delete(j);
    CHECK(al_flags_apply_json(flags, deep, "exp.json", &e) == -1);
    CHECKF(strcmp(e.msg, "exp.json: JSON nested deeper than 100 levels") == 0, "%s", e.msg);
    free(deep);
    deep = nested(10000, "{\"k\":", "}");
    CHECK(al_flags_apply_json(flags, deep, "exp.json", &e) == -1);
    CHECK(strstr(e.msg, "nested deeper than 100") != NULL);
    free(deep);
    /* Limits: 100 levels (object + 99 arrays) parse; 101 do not.
     * Brackets inside strings do not count. */
    struct cJSON *root;
    char *ok = nested(99, "[", "]");
    CHECK_OK(al_json_parse(ok, strlen(ok), "x", &root, &e), &e);
    cJSON_Delete(root);
    free(ok);
    char *bad = nested(100, "[", "]");
    CHECK(al_json_parse(bad, strlen(bad), "x", &root, &e) == -1 && root == NULL);
    free(bad);
    char str[1024] = "{\"a\":\"";
    for (int i = 0; i < 300; i++) strcat(str, i % 2 ? "[" : "\\\"");
    strcat(str, "\"}");
    CHECK_OK(al_json_parse(str, strlen(str), "x", &root, &e), &e);
    cJSON_Delete(root);
}

TEST(config_flags_to_json_roundtrip) {
    reset_flags();
    o_out = NULL;
    o_steps = -3;
    o_lr = 0.1 + 0.2; /* not representable in 15 digits */
    o_tied = 1;
    o_seed = 0xfedcba9876543210ULL;
    char *s = al_flags_to_json(flags);
    CHECK(s && strstr(s, "\"out_dir\":\tnull") && strstr(s, "\"seed\":\t\"18364758544493064720\""));
    reset_flags();
    al_err e;
    CHECK_OK(al_flags_apply_json(flags, s, "state", &e), &e);
    CHECK(o_out == NULL && o_steps == -3 && o_lr == 0.1 + 0.2 && o_tied == 1);
    CHECK(o_seed == 0xfedcba9876543210ULL);
    free(s);
    al_config_arena_free();
}

static al_config small_cfg(void) {
    al_config c;
    memset(&c, 0, sizeof c);
    c.n_layers = 2;
    c.d_model = 256;
    c.n_heads = 8;
    c.d_head = 32;
    c.n_ctx = 256;
    c.d_vocab = 4096;
    c.tied_embeddings = 1;
    c.seed = UINT64_MAX - 1;
    return c;
}

TEST(config_model_json_roundtrip) {
    al_config c = small_cfg(), d;
    char *s = al_config_to_json(&c);
    CHECK(s != NULL);
    if (!s) return;
    /* TransformerLens keys, checked as literal text */
    const char *want[] = {"\"n_layers\":\t2",
                          "\"d_model\":\t256",
                          "\"n_heads\":\t8",
                          "\"d_head\":\t32",
                          "\"n_ctx\":\t256",
                          "\"d_vocab\":\t4096",
                          "\"attn_only\":\ttrue",
                          "\"normalization_type\":\tnull",
                          "\"positional_embedding_type\":\t\"standard\"",
                          "\"d_mlp\":\tnull",
                          "\"act_fn\":\tnull",
                          "\"original_architecture\":\t\"attnlab\"",
                          "\"tied_embeddings\":\ttrue",
                          "\"seed\":\t\"18446744073709551614\"",
                          "\"attnlab_version\":\t\"" AL_VERSION "\""};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(s, want[i]), "missing %s in %s", want[i], s);
    al_err e;
    memset(&d, 0xab, sizeof d);
    CHECK_OK(al_config_from_json(s, &d, "config.json", &e), &e);
    CHECK(d.n_layers == 2 && d.d_model == 256 && d.n_heads == 8 && d.d_head == 32 &&
          d.n_ctx == 256 && d.d_vocab == 4096 && d.tied_embeddings == 1 &&
          d.seed == UINT64_MAX - 1);
    free(s);
    c.tied_embeddings = 0;
    c.seed = 42;
    s = al_config_to_json(&c);
    CHECK(strstr(s, "\"seed\":\t42") && strstr(s, "\"tied_embeddings\":\tfalse"));
    CHECK_OK(al_config_from_json(s, &d, "config.json", &e), &e);
    CHECK(d.seed == 42 && d.tied_embeddings == 0);
    free(s);
}

TEST(config_model_json_refuses) {
    const char *base = "\"n_layers\":1,\"d_model\":16,\"n_heads\":2,\"d_head\":8,\"n_ctx\":4";
    struct {
        const char *extra, *msg;
    } cases[] = {
        {",\"d_vocab\":11,\"attn_only\":false", "m/config.json: key 'attn_only' must be true"},
        {",\"d_vocab\":11,\"normalization_type\":\"RMS\"",
         "key 'normalization_type' must be null, \"LN\" or \"LNPre\""},
        {",\"d_vocab\":11,\"positional_embedding_type\":\"rotary\"",
         "key 'positional_embedding_type' must be \"standard\""},
        {",\"d_vocab\":11,\"d_mlp\":64", "key 'd_mlp' must be null"},
        {"", "m/config.json: key 'd_vocab' missing"},
        {",\"d_vocab\":\"11\"", "m/config.json: key 'd_vocab' must be an integer >= 1"},
        {",\"d_vocab\":0", "key 'd_vocab' must be an integer >= 1"},
        {",\"d_vocab\":1e10", "key 'd_vocab' must be an integer >= 1"},
        {",\"d_vocab\":11,\"tied_embeddings\":1", "key 'tied_embeddings' must be true or false"},
        {",\"d_vocab\":11,\"seed\":-5", "key 'seed' must be a non-negative integer"},
        {",\"d_vocab\":100000", "m/config.json: d_vocab must be in"}, /* al_config_validate */
        {",\"d_vocab\":11,\"n_ctx\":8", "m/config.json: key 'n_ctx' given twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[512];
        snprintf(json, sizeof json, "{%s%s}", base, cases[i].extra);
        al_config c;
        al_err e = {{0}};
        int rc = al_config_from_json(json, &c, "m/config.json", &e);
        CHECKF(rc == -1 && strstr(e.msg, cases[i].msg), "case %zu: '%s' want '%s'", i, e.msg,
               cases[i].msg);
    }
    al_config c;
    al_err e;
    CHECK(al_config_from_json("[]", &c, "m/config.json", &e) == -1);
    CHECK(strstr(e.msg, "top level must be a JSON object") != NULL);
    /* unknown TransformerLens keys are ignored */
    char json[512];
    snprintf(json, sizeof json, "{%s,\"d_vocab\":11,\"model_name\":\"x\",\"eps\":1e-5}", base);
    CHECK_OK(al_config_from_json(json, &c, "m/config.json", &e), &e);
    CHECK(c.d_vocab == 11 && c.tied_embeddings == 0 && c.seed == 0);
}

TEST(config_state_roundtrip) {
    al_train_state s, t;
    memset(&s, 0, sizeof s);
    s.step = 123456789012L;
    al_rng_seed(&s.rng, 12345);
    s.rng.s[1] = UINT64_MAX;
    s.rng.s[2] = 0x8000000000000001ULL;
    for (int i = 0; i < 10; i++) al_rng_u64(&s.rng);
    s.tokens_seen = 1e12 + 3;
    s.last_train_loss = 3.141592653589793;
    s.last_val_loss = NAN;
    s.train_json = strdup("{\"lr\": 0.30000000000000004, \"steps\": 100, \"data\": \"x.bin\"}");
    s.curve_run = 4294967301LL;
    s.curve_db = strdup("/runs/\"r\".db");
    char *j = al_state_to_json(&s);
    CHECK(j != NULL);
    if (!j) return;
    char hex[24];
    snprintf(hex, sizeof hex, "\"%016llx\"", (unsigned long long)s.rng.s[0]);
    CHECKF(strstr(j, hex), "%s not in %s", hex, j);
    CHECK(strstr(j, "\"last_val_loss\":\tnull"));
    al_err e;
    CHECK_OK(al_state_from_json(j, &t, "r/state.json", &e), &e);
    CHECK(t.step == s.step);
    CHECK(memcmp(t.rng.s, s.rng.s, sizeof s.rng.s) == 0);
    CHECK(memcmp(&t.tokens_seen, &s.tokens_seen, sizeof(double)) == 0);
    CHECK(memcmp(&t.last_train_loss, &s.last_train_loss, sizeof(double)) == 0);
    CHECK(isnan(t.last_val_loss));
    CHECK(t.train_json &&
          strcmp(t.train_json, "{\"lr\":0.30000000000000004,\"steps\":100,\"data\":\"x.bin\"}") ==
              0);
    CHECK(t.curve_run == 4294967301LL && t.curve_db && strcmp(t.curve_db, "/runs/\"r\".db") == 0);
    /* the restored RNG continues the same stream */
    al_rng a = s.rng, b = t.rng;
    for (int i = 0; i < 5; i++) CHECK(al_rng_u64(&a) == al_rng_u64(&b));
    al_state_free(&t);
    CHECK(t.train_json == NULL);
    free(j);
    al_state_free(&s);
    /* without training flags or curve */
    s.train_json = NULL;
    j = al_state_to_json(&s);
    CHECK(j && !strstr(j, "curve"));
    CHECK_OK(al_state_from_json(j, &t, NULL, &e), &e);
    CHECK(t.train_json == NULL && t.curve_run == 0 && t.curve_db == NULL);
    free(j);
}

TEST(config_state_refuses) {
    struct {
        const char *json, *msg;
    } cases[] = {
        {"{\"step\":1,\"tokens_seen\":0,\"rng\":[\"1\",\"2\",\"3\",\"4\"]}",
         "s.json: key 'rng' entry 0 must be 16 hex digits"},
        {"{\"step\":1,\"tokens_seen\":0,\"rng\":[\"000000000000000g\",\"0\",\"0\",\"0\"]}",
         "key 'rng' entry 0 must be 16 hex digits"},
        {"{\"step\":1,\"tokens_seen\":0,\"rng\":[\"0000000000000000\",\"0000000000000000\","
         "\"0000000000000000\",\"0000000000000000\"]}",
         "key 'rng' is all zero"},
        {"{\"step\":1,\"tokens_seen\":0,\"rng\":[1,2,3,4]}", "key 'rng' entry 0 must be"},
        {"{\"step\":1,\"tokens_seen\":0}", "s.json: key 'rng' must be an array of 4"},
        {"{\"step\":-1,\"tokens_seen\":0}", "s.json: key 'step' must be a non-negative integer"},
        {"{\"tokens_seen\":0}", "key 'step' must be a non-negative integer"},
        {"{\"step\":1}", "key 'tokens_seen' must be a non-negative number"},
        {"{\"step\":1,\"tokens_seen\":0,\"step\":2}", "s.json: key 'step' given twice"},
        {"{\"step\":1,\"tokens_seen\":0,\"last_train_loss\":\"x\"}",
         "key 'last_train_loss' must be a number or null"},
        {"{\"step\":1,\"tokens_seen\":0,\"rng\":[\"0000000000000001\",\"0\",\"0\",\"0\"]}",
         "key 'rng' entry 1 must be"},
        {"{\"step\":1,\"tokens_seen\":0,\"rng\":[\"0000000000000001\",\"0000000000000000\","
         "\"0000000000000000\",\"0000000000000000\"],\"curve\":{\"db\":\"x\",\"run_id\":0}}",
         "key 'curve' must be"},
        {"{\"step\":1,\"tokens_seen\":0,\"rng\":[\"0000000000000001\",\"0000000000000000\","
         "\"0000000000000000\",\"0000000000000000\"],\"train\":{},\"curve\":{\"run_id\":2}}",
         "key 'curve' must be"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        al_train_state t;
        al_err e = {{0}};
        int rc = al_state_from_json(cases[i].json, &t, "s.json", &e);
        CHECKF(rc == -1 && strstr(e.msg, cases[i].msg), "case %zu: '%s' want '%s'", i, e.msg,
               cases[i].msg);
        CHECK(t.train_json == NULL);
    }
    al_train_state t;
    al_err e;
    const char *tr = "{\"step\":1,\"tokens_seen\":0,\"rng\":[\"0000000000000001\","
                     "\"0000000000000000\",\"0000000000000000\",\"0000000000000000\"],"
                     "\"train\":[1]}";
    CHECK(al_state_from_json(tr, &t, "s.json", &e) == -1 && strstr(e.msg, "'train' must be"));
}

/* al_config_validate and al_sae_cfg_check: each field out of its range
 * alone, refused with its name and value; the defaults pass. */
TEST(config_validate_each_field) {
    al_err e;
    al_config ok = al_config_default();
    ok.d_vocab = 300; /* the default leaves it to the tokenizer */
    CHECK_OK(al_config_validate(&ok, &e), &e);
    static const struct {
        int field;
        const char *want;
    } mc[] = {{0, "n_layers must be in 1..64 (got 0)"},
              {1, "d_model must be in 1..16384 (got 0)"},
              {2, "n_heads must be in 1..256 (got 0)"},
              {3, "d_head must be in 1..4096 (got 0)"},
              {4, "n_ctx must be in 1..65536 (got 0)"},
              {5, "d_vocab must be in 2..65536 (got 1)"},
              {6, "pos_type must be"},
              {7, "norm_type must be"},
              {8, "ln_eps must be in [0, 1] (got 2)"},
              {9, "ln_eps must be positive with LayerNorm"},
              {10, "biases must be a set of AL_BIAS_*"},
              {11, "processed must be a set of AL_PROC_*"}};
    for (size_t i = 0; i < sizeof mc / sizeof *mc; i++) {
        al_config c = ok;
        switch (mc[i].field) {
        case 0: c.n_layers = 0; break;
        case 1: c.d_model = 0; break;
        case 2: c.n_heads = 0; break;
        case 3: c.d_head = 0; break;
        case 4: c.n_ctx = 0; break;
        case 5: c.d_vocab = 1; break;
        case 6: c.pos_type = 9; break;
        case 7: c.norm_type = 9; break;
        case 8: c.ln_eps = 2; break;
        case 9: c.norm_type = AL_NORM_LN, c.ln_eps = 0; break;
        case 10: c.biases = 1u << 30; break;
        case 11: c.processed = 1u << 30; break;
        }
        CHECK(al_config_validate(&c, &e) == -1);
        CHECKF(strstr(e.msg, mc[i].want), "case %zu: [%s] want [%s]", i, e.msg, mc[i].want);
    }
    al_sae_cfg s0 = al_sae_cfg_default(16, 64);
    CHECK_OK(al_sae_cfg_check(&s0, &e), &e);
    static const struct {
        int field;
        const char *want;
    } sc[] = {{0, "d_in must be in 1..1048576 (got 0)"},
              {1, "d_sae must be in 1..1048576 (got 0)"},
              {2, "d_in x d_sae must be at most 2^31"},
              {3, "architecture must be topk or standard (got 9)"},
              {4, "k must be in 1..d_sae (64) (got 65)"},
              {5, "k_aux must be in 0..d_sae (64) (got -1)"},
              {6, "aux_coeff must be finite and >= 0"},
              {7, "l1_coeff must be finite and > 0 (got 0)"},
              {8, "dead_tokens must be in 1..2^31-1 (got 0)"}};
    for (size_t i = 0; i < sizeof sc / sizeof *sc; i++) {
        al_sae_cfg c = s0;
        switch (sc[i].field) {
        case 0: c.d_in = 0; break;
        case 1: c.d_sae = 0; break;
        case 2: c.d_in = c.d_sae = 1 << 20; break;
        case 3: c.arch = 9; break;
        case 4: c.k = 65; break;
        case 5: c.k_aux = -1; break;
        case 6: c.aux_coeff = NAN; break;
        case 7: c.arch = AL_SAE_L1, c.l1_coeff = 0; break;
        case 8: c.dead_tokens = 0; break;
        }
        CHECK(al_sae_cfg_check(&c, &e) == -1);
        CHECKF(strstr(e.msg, sc[i].want), "sae case %zu: [%s] want [%s]", i, e.msg, sc[i].want);
    }
}
