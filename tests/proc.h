/* proc.h -- running attnlab as a child process without a shell, for tests
 * that signal it (test_crash.c) or measure it (test_hostile.c).
 *
 * t_spawn starts the binary with space-separated arguments (no quoting:
 * test paths have no spaces), stdout and stderr to the given files
 * (NULL: /dev/null). Not through a shell, so a signal reaches attnlab
 * itself and wait4 reports attnlab's own peak memory. */
#ifndef ATTNLAB_TEST_PROC_H
#define ATTNLAB_TEST_PROC_H

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attnlab/util.h"
#include "test.h"

static pid_t t_spawn(const char *out_path, const char *err_path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), unused));
static pid_t t_spawn(const char *out_path, const char *err_path, const char *fmt, ...) {
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char *argv[64], *save = NULL;
    int argc = 0;
    argv[argc++] = (char *)t_bin();
    for (char *tok = strtok_r(line, " ", &save); tok && argc < 63; tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out >= 0) dup2(out, 1);
        if (err >= 0) dup2(err, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Wait for pid: exit code, or 128 + signal; its peak RSS in KiB if
 * maxrss_kb is non-NULL. */
static __attribute__((unused)) int t_wait(pid_t pid, long *maxrss_kb) {
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    if (wait4(pid, &st, 0, &ru) != pid) return -1;
    if (maxrss_kb) *maxrss_kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static __attribute__((unused)) void t_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* Wait until db (a test's database) has exactly one run 'running' (up
 * to 60 s): the spawned command is past its set-up. */
static __attribute__((unused)) int t_wait_running(const char *db) {
    for (int i = 0; i < 600; i++) {
        if (al_file_exists(db)) {
            char *s = t_sql(db, "SELECT count(*) FROM runs WHERE status = 'running'");
            int one = s && strcmp(s, "1") == 0;
            free(s);
            if (one) return 1;
        }
        t_sleep(0.1);
    }
    return 0;
}

#endif
