/* test.h -- the tiny test framework.
 *
 * A test is `TEST(name) { ... }` at the start of a line in tests/test_*.c;
 * the Makefile collects these names, and the runner runs each test in its
 * own forked process (a crash or hang fails that test only, with a 600 s
 * limit). CHECK* record a failure and continue; the runner prints one
 * line per test and ends with "N passed, N failed[, N skipped]". */
#ifndef ATTNLAB_TEST_H
#define ATTNLAB_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST(name) void test_##name(void)

/* 1 under AddressSanitizer (make test SAN=1, several times slower),
 * where the heaviest tests run smaller: that build checks memory, the
 * plain build the numbers at full size. */
#if defined(__SANITIZE_ADDRESS__)
#define T_SAN 1
#else
#define T_SAN 0
#endif

void t_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Mark the current test skipped (exits the test process). */
void t_skip(const char *why) __attribute__((noreturn));
/* A fresh empty directory for this test (removed after a pass). */
const char *t_tmpdir(void);
/* Path of "name" inside t_tmpdir() (static buffer rotated 8 ways). */
const char *t_path(const char *name);
/* Path of the attnlab binary under test. */
const char *t_bin(void);
/* The same as an absolute path, for commands run in another folder. */
const char *t_abs_bin(void);
/* Run a shell command; returns its exit status (or 128+signal). Output
 * goes to t_path("cmd.out") / t_path("cmd.err") unless redirected. */
int t_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* t_path(name) copied out of t_path's rotating buffers, for paths that
 * must outlive eight more t_path calls. */
typedef struct t_pbuf {
    char s[1024];
} t_pbuf;
t_pbuf t_pcopy(const char *name);
/* The picture size "(W x H px)" that `attnlab heatmap` printed into the
 * file at path (0; -1 and a CHECK failure when there is none). */
int t_reported_size(const char *path, int *w, int *h);
/* Write text to t_path(name) (a failure is a CHECK failure); returns
 * the path (t_path's static buffer). */
const char *t_write(const char *name, const char *text);
/* Read a whole file into a static-lifetime malloc'd string (or NULL). */
char *t_slurp(const char *path);
/* Output of `sqlite3 -batch db "q"` (the CLI, so tests read the database
 * the way a user does), trailing newlines cut; NULL if it failed. */
char *t_sql(const char *db, const char *q);
/* A byte-level token file of n tokens: three short phrases in a fixed
 * random order, structured enough that a tiny model's loss moves. */
void t_phrase_corpus(const char *path, size_t n);
/* For the CLI tests: corpus, tokenizer (vocab 320), token files
 * (DIR/s.train.bin, DIR/s.val.bin) and a model of n_layers x 4 heads
 * (d_model 32, n_ctx 32) trained `steps` steps, in DIR/m<L>; the corpus
 * and tokenizer are made once per directory. */
void t_tiny_model(const char *dir, int n_layers, int steps);
/* t_tiny_model in DIR (made), then a scores run of DIR/m<L> into DIR/r.db:
 * a work folder whose database already holds a run. */
void t_scored_model(const char *dir, int n_layers, int steps);
/* A LayerNorm or bias model's LayerNorm weights and biases far from
 * their initial values (w = 1 + 0.4 N(0,1), b and biases 0.4 N(0,1)) and
 * its head gates not 1 (0.5 + 0.125 (i mod 9)), from seed: what the
 * PyTorch references check the engine on. */
struct al_model;
void t_ln_perturb(struct al_model *m, uint64_t seed);
/* The start of a tiny experiment file (60 synthetic stories, vocab 300,
 * one 2-layer model "two" of t_tiny_model's shape trained 10 steps), up
 * to its "analyses"; name is a string literal. */
#define T_EXP_TINY_2L(name)                                                                        \
    "{\"name\": \"" name "\", \"threads\": 2,\n"                                                   \
    " \"data\": {\"synthetic\": {\"stories\": 60, \"seed\": 4}, \"val\": 0.1},\n"                  \
    " \"tokenizer\": {\"vocab\": 300},\n"                                                          \
    " \"train\": {\"d_model\": 32, \"n_heads\": 4, \"d_head\": 8, \"n_ctx\": 32, \"batch\": 4,\n"  \
    "           \"steps\": 10, \"eval_every\": 10, \"warmup\": 2},\n"                              \
    " \"models\": [{\"name\": \"two\", \"n_layers\": 2}],\n"
/* t_sql's output as a number (-1 if the query failed). */
long t_sql_long(const char *db, const char *q);
/* Experiment text with the first `from` replaced by `to`, written and
 * loaded: it must be refused (nothing loaded) with a message holding
 * want. The analyses' key checks are all this one loop. */
void t_exp_refused(const char *text, const char *from, const char *to, const char *want);
/* 1 if the file (a command's stderr) is exactly one line, starting
 * "attnlab" and holding want; else 0, printing what it was. */
int t_one_line(const char *path, const char *want);
/* 1 if the n bytes at p are all 0 (a result zeroed on failure). */
int t_all_zero(const void *p, size_t n);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) t_fail(__FILE__, __LINE__, "%s", #c);                                            \
    } while (0)
#define CHECKF(c, ...)                                                                             \
    do {                                                                                           \
        if (!(c)) t_fail(__FILE__, __LINE__, __VA_ARGS__);                                         \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= (tol)))                                                             \
            t_fail(__FILE__, __LINE__, "%s = %.9g, %s = %.9g, |diff| > %g", #a, a_, #b, b_,        \
                   (double)(tol));                                                                 \
    } while (0)
#define CHECK_OK(call, errp)                                                                       \
    do {                                                                                           \
        if ((call) != 0) t_fail(__FILE__, __LINE__, "%s failed: %s", #call, (errp)->msg);          \
    } while (0)

/* The query's output must be exactly want. */
#define CHECK_SQL(db, q, want)                                                                     \
    do {                                                                                           \
        char *got_ = t_sql(db, q);                                                                 \
        CHECKF(got_ &&strcmp(got_, want) == 0, "%s: got [%s] want [%s]", q,                        \
               got_ ? got_ : "(error)", want);                                                     \
        free(got_);                                                                                \
    } while (0)

/* SQL that removes the SAE tables and views (schema versions 13 and 14),
 * for the tests that turn a new database back into an older version: a
 * file of that version never had them, and version 14 adds columns to
 * them, which SQLite refuses to add twice. */
#define T_DROP_SAE_SQL                                                                             \
    "DROP VIEW sae_head_features; DROP VIEW sae_induction_features; DROP TABLE sae_probe_heads; "  \
    "DROP TABLE sae_feature_heads; DROP TABLE sae_feature_logits; DROP TABLE "                     \
    "sae_feature_contexts; DROP TABLE sae_features; DROP TABLE sae_feature_runs; DROP TABLE "      \
    "sae_runs; ALTER TABLE train_log DROP COLUMN val_loss_se; ALTER TABLE train_log DROP COLUMN "  \
    "icl_gain_se; "

#endif
