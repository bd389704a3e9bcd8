/* test_fuzz_replay.c -- every fuzz target's seed corpus, replayed by the
 * plain test suite: the inputs tests/fuzz/<t>/ holds (valid files and the
 * hostile ones found or written for each reader) through the target's own
 * checks (tests/fuzz/fuzz_<t>.c, linked in by the Makefile with its entry
 * point renamed fuzz_replay_<t>). `make fuzz` runs the same corpora under
 * libFuzzer and then mutates them; this keeps their refusal paths in every
 * `make test`, under the sanitizers too, without clang. A failed property
 * aborts the test's process, which fails the test. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define FUZZ_TARGETS(X)                                                                            \
    X(bpe)                                                                                         \
    X(circuit)                                                                                     \
    X(config)                                                                                      \
    X(corpus)                                                                                      \
    X(experiment)                                                                                  \
    X(hf_tokenizer)                                                                                \
    X(import_config)                                                                               \
    X(intervene)                                                                                   \
    X(mask)                                                                                        \
    X(merge)                                                                                       \
    X(pairs)                                                                                       \
    X(sae)                                                                                         \
    X(safetensors)                                                                                 \
    X(sweep)                                                                                       \
    X(tokenizer)                                                                                   \
    X(tokens)                                                                                      \
    X(torch_ckpt)

#define DECLARE(t) int fuzz_replay_##t(const uint8_t *data, size_t n);
FUZZ_TARGETS(DECLARE)
#undef DECLARE
int fuzz_init_bpe(int *argc, char ***argv);

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of tests/fuzz/<t>/, in name order, through fn; returns how
 * many (0 when the folder is missing: the test then fails). */
static int replay(const char *t, int (*fn)(const uint8_t *, size_t)) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/%s", t);
    DIR *d = opendir(dir);
    if (!d) return 0;
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **g = realloc(names, sizeof *names * (size_t)cap);
            if (!g) break;
            names = g;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        FILE *f = fopen(p, "rb");
        CHECKF(f != NULL, "%s", p);
        unsigned char *buf = NULL;
        size_t len = 0, cap2 = 0;
        for (int c; f && (c = getc(f)) != EOF;) {
            if (len == cap2) {
                cap2 = cap2 ? 2 * cap2 : 4096;
                unsigned char *g = realloc(buf, cap2);
                if (!g) break;
                buf = g;
            }
            buf[len++] = (unsigned char)c;
        }
        if (f) fclose(f);
        fn(buf ? buf : (const uint8_t *)"", len);
        free(buf);
        free(names[i]);
    }
    free(names);
    return n;
}

/* One test per target (the runner's list is made from TEST lines). */
#define REPLAY(t)                                                                                  \
    CHECKF(replay(#t, fuzz_replay_##t) > 0,                                                        \
           "tests/fuzz/%s: no seed inputs (run from the repository root)", #t)

TEST(fuzz_replay_bpe) {
    int argc = 0;
    char **argv = NULL;
    fuzz_init_bpe(&argc, &argv); /* the target's tokenizer, trained once */
    REPLAY(bpe);
}
TEST(fuzz_replay_circuit) { REPLAY(circuit); }
TEST(fuzz_replay_config) { REPLAY(config); }
TEST(fuzz_replay_corpus) { REPLAY(corpus); }
TEST(fuzz_replay_experiment) { REPLAY(experiment); }
TEST(fuzz_replay_hf_tokenizer) { REPLAY(hf_tokenizer); }
TEST(fuzz_replay_import_config) { REPLAY(import_config); }
TEST(fuzz_replay_intervene) { REPLAY(intervene); }
TEST(fuzz_replay_mask) { REPLAY(mask); }
TEST(fuzz_replay_merge) { REPLAY(merge); }
TEST(fuzz_replay_pairs) { REPLAY(pairs); }
TEST(fuzz_replay_sae) { REPLAY(sae); }
TEST(fuzz_replay_safetensors) { REPLAY(safetensors); }
TEST(fuzz_replay_sweep) { REPLAY(sweep); }
TEST(fuzz_replay_tokenizer) { REPLAY(tokenizer); }
TEST(fuzz_replay_tokens) { REPLAY(tokens); }
TEST(fuzz_replay_torch_ckpt) { REPLAY(torch_ckpt); }

/* Every target in tests/fuzz/ is in the list above. */
TEST(fuzz_replay_every_target) {
    DIR *d = opendir("tests/fuzz");
    CHECK(d != NULL);
    static const char *const known[] = {
#define NAME(t) #t,
        FUZZ_TARGETS(NAME)
#undef NAME
            NULL};
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t k = strlen(de->d_name);
        if (strncmp(de->d_name, "fuzz_", 5) || k < 8 || strcmp(de->d_name + k - 2, ".c")) continue;
        int found = 0;
        for (int i = 0; known[i] && !found; i++)
            found = strlen(known[i]) == k - 7 && !strncmp(de->d_name + 5, known[i], k - 7);
        CHECKF(found, "%s is not replayed: add it to FUZZ_TARGETS", de->d_name);
    }
    if (d) closedir(d);
}
