/* runner.c -- runs every TEST in a forked child, prints a summary. */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "attnlab/data.h"
#include "attnlab/experiment.h"
#include "attnlab/model.h"
#include "attnlab/registry.h"
#include "attnlab/util.h"

#define X(n) void test_##n(void);
#include "tests_list.h"
#undef X

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

static const test_case all_tests[] = {
#define X(n) {#n, test_##n},
#include "tests_list.h"
#undef X
};

static int n_fail_checks = 0;

/* Under AddressSanitizer, a test leaves through _exit, so LeakSanitizer's
 * exit-time check would never run: check here, so that the library's
 * leaks (error paths included) fail the test that caused them. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
static int leaks_found(void) { return __lsan_do_recoverable_leak_check() != 0; }
#else
static int leaks_found(void) { return 0; }
#endif
static char g_tmpdir[512];

/* Under gcov (make coverage) a process writes its counts at exit, which
 * _exit skips: write them first, or the code a test runs in the runner's
 * own process would count for nothing (only the CLI processes it starts
 * would). */
#ifdef AL_COVERAGE
void __gcov_dump(void);
static void cov_flush(void) { __gcov_dump(); }
#else
static void cov_flush(void) {}
#endif

/* For a test's own forked children that leave through _exit
 * (test_faults.c). */
int t_leaks_found(void) { return leaks_found(); }
void t_cov_flush(void) { cov_flush(); }

void t_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "    %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    n_fail_checks++;
}

void t_skip(const char *why) {
    fprintf(stderr, "    skipped: %s\n", why);
    fflush(stderr);
    cov_flush();
    _exit(77);
}

const char *t_tmpdir(void) { return g_tmpdir; }

const char *t_path(const char *name) {
    static char bufs[8][1024];
    static int k = 0;
    char *b = bufs[k++ & 7];
    snprintf(b, 1024, "%s/%s", g_tmpdir, name);
    return b;
}

const char *t_bin(void) {
    const char *b = getenv("ATTNLAB_BIN");
    return b ? b : "build/attnlab";
}

const char *t_abs_bin(void) {
    static char buf[4096];
    if (!buf[0] && !realpath(t_bin(), buf)) snprintf(buf, sizeof buf, "%s", t_bin());
    return buf;
}

int t_sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    if (st == -1) return -1;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + WTERMSIG(st);
}

t_pbuf t_pcopy(const char *name) {
    t_pbuf p;
    snprintf(p.s, sizeof p.s, "%s", t_path(name));
    return p;
}

int t_reported_size(const char *path, int *w, int *h) {
    char *txt = t_slurp(path);
    const char *p = txt ? strstr(txt, "(") : NULL;
    int ok = p && sscanf(p, "(%d x %d px)", w, h) == 2;
    if (!ok) t_fail(__FILE__, __LINE__, "no picture size in: %s", txt ? txt : "(no output)");
    free(txt);
    return ok ? 0 : -1;
}

const char *t_write(const char *name, const char *text) {
    const char *p = t_path(name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

char *t_slurp(const char *path) {
    unsigned char *d;
    size_t n;
    if (al_read_file(path, &d, &n, 0, NULL) != 0) return NULL;
    return (char *)d;
}

char *t_sql(const char *db, const char *q) {
    const char *out = t_path("sql.out");
    if (t_sh("sqlite3 -batch '%s' \"%s\" > '%s' 2>&1", db, q, out) != 0) return NULL;
    char *s = t_slurp(out);
    for (size_t n = s ? strlen(s) : 0; n > 0 && s[n - 1] == '\n';) s[--n] = 0;
    return s;
}

void t_phrase_corpus(const char *path, size_t n) {
    const char *phr[] = {"the cat sat on the mat. ", "a dog ran home. ", "Bamurik saw Bamurik. "};
    int *ids = malloc(sizeof(int) * n);
    al_rng r;
    al_rng_seed(&r, 1);
    size_t k = 0;
    while (ids && k < n) {
        const char *p = phr[al_rng_below(&r, 3)];
        for (; *p && k < n; p++) ids[k++] = (unsigned char)*p;
    }
    al_err e;
    CHECK_OK(ids ? al_tokens_save(path, ids, n, &e) : al_errf(&e, "out of memory"), &e);
    free(ids);
}

void t_tiny_model(const char *dir, int n_layers, int steps) {
    const char *b = t_bin();
    char tok[1100];
    snprintf(tok, sizeof tok, "%s/tok.json", dir);
    if (!al_file_exists(tok))
        CHECK(t_sh("%s data synth --out %s/s.txt --stories 200 --seed 3 >/dev/null 2>&1 && "
                   "%s tokenizer train --in %s/s.txt --vocab 320 --out %s/tok.json >/dev/null 2>&1 "
                   "&& %s encode --tokenizer %s/tok.json --in %s/s.txt --out %s/s.bin --val 0.1 "
                   ">/dev/null 2>&1",
                   b, dir, b, dir, dir, b, dir, dir, dir) == 0);
    CHECK(t_sh("%s train --data %s/s.train.bin --val %s/s.val.bin --tokenizer %s/tok.json --out "
               "%s/m%d --steps %d --n-layers %d --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 "
               "--batch 4 --eval-every 0 --warmup 2 --lr 0.01 --threads 2 >/dev/null 2>&1",
               b, dir, dir, dir, dir, n_layers, steps, n_layers) == 0);
}

void t_scored_model(const char *dir, int n_layers, int steps) {
    CHECK(t_sh("mkdir -p %s", dir) == 0);
    t_tiny_model(dir, n_layers, steps);
    CHECK(t_sh("cd %s && %s scores --model m%d --db r.db --probe-r 5 --probe-n 2 --threads 1 "
               ">/dev/null 2>&1",
               dir, t_abs_bin(), n_layers) == 0);
}

long t_sql_long(const char *db, const char *q) {
    char *s = t_sql(db, q);
    long v = s ? strtol(s, NULL, 10) : -1;
    free(s);
    return v;
}

int t_all_zero(const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i]) return 0;
    return 1;
}

void t_exp_refused(const char *text, const char *from, const char *to, const char *want) {
    const char *cut = strstr(text, from);
    CHECKF(cut != NULL, "[%s] not in the experiment text", from);
    if (!cut) return;
    size_t cap = strlen(text) + strlen(to) + 1;
    char *bad = malloc(cap);
    CHECK(bad != NULL);
    if (!bad) return;
    snprintf(bad, cap, "%.*s%s%s", (int)(cut - text), text, to, cut + strlen(from));
    al_experiment *x = NULL;
    al_err e = {{0}};
    CHECK(al_exp_load(t_write("bad.json", bad), &x, &e) == -1 && x == NULL);
    CHECKF(strstr(e.msg, want), "%s: want [%s]", e.msg, want);
    free(bad);
}

int t_one_line(const char *path, const char *want) {
    char *s = t_slurp(path);
    int ok = s && strncmp(s, "attnlab", 7) == 0 && strstr(s, want) &&
             strchr(s, '\n') == s + strlen(s) - 1;
    if (!ok)
        fprintf(stderr, "    stderr was: [%s], want one line with [%s]\n", s ? s : "(none)", want);
    free(s);
    return ok;
}

/* How many tests run at once: ATTNLAB_TEST_JOBS, else one per core.
 * Each test has its own folder and most are single-threaded CLI runs,
 * so the suite takes about half the time on two cores; =1 runs them one
 * after another, in the order of tests_list.h. */
static int test_jobs(void) {
    const char *s = getenv("ATTNLAB_TEST_JOBS");
    long n = s && *s ? strtol(s, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 16 ? 16 : (int)n;
}

typedef struct {
    pid_t pid;
    int test;
    double t0; /* when it started, for the time on its PASS/FAIL line */
} slot;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Start test i in a child whose stdout and stderr go to LOG (so that
 * tests running at once do not mix their lines); the parent prints the
 * log when the test ends. Returns the child's pid, or -1. */
static pid_t start_test(const test_case *t, const char *base, const char *log) {
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s/%s", base, t->name);
    mkdir(g_tmpdir, 0777);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        alarm(600);
        al_quiet = 1;
        t->fn();
        fflush(stdout);
        fflush(stderr);
        int rc = n_fail_checks || leaks_found() ? 1 : 0;
        cov_flush();
        _exit(rc);
    }
    return pid;
}

/* Print test T's log and its result with its wall time SECS (which
 * tests make the suite long is then in every log, CI's too); returns 0
 * passed, 1 failed, 2 skipped. */
static int finish_test(const test_case *t, const char *base, const char *log, int st, double secs) {
    char *out = t_slurp(log);
    if (out) fputs(out, stdout);
    free(out);
    unlink(log);
    char dir[600], cmd[700];
    snprintf(dir, sizeof dir, "%s/%s", base, t->name);
    int r;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        printf("PASS %s (%.1f s)\n", t->name, secs);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) { /* leave it; harmless */
        }
        r = 0;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        printf("SKIP %s\n", t->name);
        r = 2;
    } else {
        if (WIFSIGNALED(st))
            printf("FAIL %s (signal %d, %.1f s)\n", t->name, WTERMSIG(st), secs);
        else
            printf("FAIL %s (%.1f s)\n", t->name, secs);
        printf("     files kept in %s\n", dir);
        r = 1;
    }
    fflush(stdout);
    return r;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int n = (int)(sizeof all_tests / sizeof all_tests[0]);
    int counts[3] = {0, 0, 0}; /* passed, failed, skipped */
    char base[] = "/tmp/attnlab-test-XXXXXX";
    al_err e;
    if (al_registry_setup(&e)) { /* as main.c: the tests read the store in-process too */
        fprintf(stderr, "runner: %s\n", e.msg);
        return 1;
    }
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    int jobs = test_jobs();
    double t_start = now_s();
    slot run[16];
    int n_run = 0, next = 0;
    char log[600];
    for (;;) {
        while (n_run < jobs && next < n) {
            const test_case *t = &all_tests[next];
            if (filter && !strstr(t->name, filter)) {
                next++;
                continue;
            }
            snprintf(log, sizeof log, "%s/.log-%s", base, t->name);
            pid_t pid = start_test(t, base, log);
            if (pid < 0) { /* the tests not run would pass unseen */
                perror("runner: fork");
                return 1;
            }
            run[n_run++] = (slot){pid, next++, now_s()};
        }
        if (n_run == 0) break;
        int st = 0;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) {
            perror("waitpid");
            return 1;
        }
        for (int k = 0; k < n_run; k++) {
            if (run[k].pid != pid) continue;
            const test_case *t = &all_tests[run[k].test];
            snprintf(log, sizeof log, "%s/.log-%s", base, t->name);
            counts[finish_test(t, base, log, st, now_s() - run[k].t0)]++;
            run[k] = run[--n_run];
            break;
        }
    }
    if (counts[1] == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
        if (system(cmd) != 0) { /* ignore */
        }
    }
    printf("%d tests in %.0f s, %d at a time\n", counts[0] + counts[1] + counts[2],
           now_s() - t_start, jobs);
    if (counts[2])
        printf("%d passed, %d failed, %d skipped\n", counts[0], counts[1], counts[2]);
    else
        printf("%d passed, %d failed\n", counts[0], counts[1]);
    return counts[1] ? 1 : 0;
}

void t_ln_perturb(al_model *m, uint64_t seed) {
    al_rng r;
    al_rng_seed(&r, seed);
    for (int p = AL_P_LN1W; p < AL_NPARAM; p++)
        for (size_t i = 0; i < m->param_size[p]; i++) {
            double v = 0.4 * al_rng_normal(&r);
            m->p[p][i] = (float)(p == AL_P_LN1W || p == AL_P_LNFW ? 1 + v : v);
        }
    for (int i = 0; i < m->cfg.n_layers * m->cfg.n_heads; i++)
        m->gates[i] = 0.5f + 0.125f * (float)(i % 9);
}
