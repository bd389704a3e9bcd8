/* fuzz_config.c -- the JSON readers of config.h on arbitrary bytes:
 * al_json_parse (on a buffer of exactly the input's size, not
 * NUL-terminated), al_flags_apply_json (on error nothing may be assigned),
 * al_config_from_json and al_state_from_json (what they accept must write
 * back and read again to the same values). */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <math.h>

#include "attnlab/args.h"
#include "attnlab/config.h"

static const char *o_str;
static int o_int, o_bool;
static double o_float;
static uint64_t o_u64;
static al_flag flags[] = {{"out-dir", AL_STR, &o_str, "DIR", "h", 0, 0},
                          {"steps", AL_INT, &o_int, "N", "h", 0, 0},
                          {"lr", AL_FLOAT, &o_float, "X", "h", 0, 0},
                          {"tied", AL_BOOL, &o_bool, NULL, "h", 0, 0},
                          {"seed", AL_U64, &o_u64, "N", "h", 0, 0},
                          AL_FLAGS_END};

static void fuzz_flags(const char *text) {
    o_str = "default";
    o_int = 7;
    o_bool = 0;
    o_float = 0.5;
    o_u64 = 42;
    for (al_flag *f = flags; f->name; f++) f->seen = 0;
    flags[1].seen = 1; /* as if --steps were given on the command line */
    al_err e;
    if (al_flags_apply_json(flags, text, "flags.json", &e) != 0) {
        fz_check_msg(&e);
        FZ_ASSERT(strcmp(o_str, "default") == 0 && o_int == 7 && o_bool == 0 && o_float == 0.5 &&
                  o_u64 == 42);
    } else {
        FZ_ASSERT(o_int == 7); /* the command line wins */
        char *j = al_flags_to_json(flags);
        free(j);
    }
    al_config_arena_free();
}

static int same_double(double a, double b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static void fuzz_model_config(const char *text) {
    al_config c, c2;
    al_err e;
    if (al_config_from_json(text, &c, "config.json", &e) != 0) {
        fz_check_msg(&e);
        return;
    }
    char *j = al_config_to_json(&c);
    FZ_ASSERT(j);
    FZ_ASSERT(al_config_from_json(j, &c2, "again", &e) == 0);
    FZ_ASSERT(memcmp(&c, &c2, sizeof c) == 0);
    free(j);
}

static void fuzz_state(const char *text) {
    al_train_state s, s2;
    al_err e;
    if (al_state_from_json(text, &s, "state.json", &e) != 0) {
        fz_check_msg(&e);
        return;
    }
    char *j = al_state_to_json(&s);
    if (j) { /* NULL only for a "train" object it cannot write exactly */
        FZ_ASSERT(al_state_from_json(j, &s2, "again", &e) == 0);
        FZ_ASSERT(s2.step == s.step && memcmp(&s2.rng, &s.rng, sizeof s.rng) == 0);
        FZ_ASSERT(same_double(s2.tokens_seen, s.tokens_seen));
        /* non-finite losses are written as null and read back as NaN */
        FZ_ASSERT(same_double(s2.last_train_loss, s.last_train_loss) ||
                  (!isfinite(s.last_train_loss) && isnan(s2.last_train_loss)));
        FZ_ASSERT(same_double(s2.last_val_loss, s.last_val_loss) ||
                  (!isfinite(s.last_val_loss) && isnan(s2.last_val_loss)));
        FZ_ASSERT(!s.train_json == !s2.train_json);
        al_state_free(&s2);
        free(j);
    }
    al_state_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    /* exactly n bytes, no terminator: the parser must not read past them */
    char *raw = malloc(n ? n : 1);
    FZ_ASSERT(raw);
    memcpy(raw, d, n);
    cJSON *root;
    al_err e;
    if (al_json_parse(raw, n, "fuzz.json", &root, &e) == 0)
        cJSON_Delete(root);
    else
        fz_check_msg(&e);
    free(raw);
    /* the other readers take NUL-terminated text */
    char *text = malloc(n + 1);
    FZ_ASSERT(text);
    memcpy(text, d, n);
    text[n] = 0;
    fuzz_flags(text);
    fuzz_model_config(text);
    fuzz_state(text);
    free(text);
    return 0;
}
