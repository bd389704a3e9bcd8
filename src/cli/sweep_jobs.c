/* sweep_jobs.c -- `attnlab experiment FILE --jobs N`: every task of a
 * sweep as its own attnlab process, N at a time, then the task databases
 * merged (sweep.h).
 *
 * Tasks run as child processes rather than threads: each is a whole
 * experiment with its own OpenMP pool, database, signal handling and
 * exit code, exactly what `--task K` or a Slurm array task runs, so the
 * results cannot depend on how the tasks were launched. The merge is a
 * child too (`attnlab db merge`), for the same reason. */
#define _DEFAULT_SOURCE /* setpgid, kill, nanosleep */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attnlab/stop.h"
#include "attnlab/sweep.h"

#define SELF "/proc/self/exe"
#define MERGE_CHUNK 512

/* Start argv with stdout and stderr to log (NULL: inherited) in a
 * process group of its own, so a Ctrl-C at the terminal reaches the
 * parent only, which forwards it once. -1 when fork fails. */
static pid_t spawn(char *const *argv, const char *log) {
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p != 0) return p;
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (log) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(126);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execv(SELF, argv);
    _exit(127);
}

static int status_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

static void nap(void) {
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, NULL);
}

typedef struct task {
    pid_t pid; /* 0: not running */
    int state; /* 0 waiting, 1 running, 2 done, 3 failed */
    int code;
    double t0;
} task;

/* Merge the task databases into BASE/sweep.db: a fresh file made under a
 * temporary name and renamed, so a re-run replaces the merge whole and a
 * failed merge leaves the previous one. */
static int merge(const al_sweep_jobs_opts *o, long n, al_err *e) {
    char tmp[AL_PATH_MAX + 64], fin[AL_PATH_MAX + 64];
    snprintf(fin, sizeof fin, "%s/sweep.db", o->base);
    snprintf(tmp, sizeof tmp, "%s/sweep.db.tmp-%ld", o->base, (long)getpid());
    const char *sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[AL_PATH_MAX + 80];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", tmp, sfx[i]);
        unlink(p);
    }
    printf("sweep: merging %ld task database%s into %s\n", n, n == 1 ? "" : "s", fin);
    char **argv = calloc(MERGE_CHUNK + 8, sizeof *argv);
    char(*in)[AL_PATH_MAX + 64] = calloc(MERGE_CHUNK, sizeof *in);
    int rc = argv && in ? 0 : al_errf(e, "out of memory");
    for (long k0 = 0; rc == 0 && k0 < n; k0 += MERGE_CHUNK) {
        int a = 0;
        argv[a++] = "attnlab";
        argv[a++] = "db";
        argv[a++] = "merge";
        argv[a++] = tmp;
        for (long k = k0; k < n && k < k0 + MERGE_CHUNK; k++) {
            snprintf(in[k - k0], sizeof in[0], "%s/task-%ld/results.db", o->base, k);
            argv[a++] = in[k - k0];
        }
        argv[a] = NULL;
        pid_t pid = spawn(argv, NULL);
        if (pid < 0) {
            rc = al_errf(e, "sweep: cannot start 'attnlab db merge': %s", strerror(errno));
            break;
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) continue;
        if (status_code(st) != 0)
            rc = al_errf(e,
                         "sweep: all %ld tasks done, but 'attnlab db merge' into %s failed "
                         "(exit %d, its message above)",
                         n, fin, status_code(st));
    }
    if (rc == 0 && rename(tmp, fin) != 0)
        rc = al_errf(e, "sweep: cannot rename %s to %s: %s", tmp, fin, strerror(errno));
    if (rc == 0) printf("sweep: merged into %s\n", fin);
    free(argv);
    free(in);
    return rc;
}

int al_sweep_run_jobs(const al_sweep *s, const al_sweep_jobs_opts *o, int *interrupted, al_err *e) {
    long n = al_sweep_n_tasks(s);
    *interrupted = 0;
    task *t = calloc((size_t)n, sizeof *t);
    if (!t) return al_errf(e, "out of memory");
    char thr[16], num[24], dir[AL_PATH_MAX + 64], log[AL_PATH_MAX + 80];
    snprintf(thr, sizeof thr, "%d", o->threads);
    long next = 0, running = 0, done = 0, failed = 0;
    int rc = 0;
    al_stop_catch();
    printf("sweep: %ld tasks, %d at a time -> %s/task-K/ (each task's output in its log.txt)\n", n,
           o->jobs, o->base);
    while (done + failed < n) {
        if (al_stop && !*interrupted) { /* forward once, start nothing new */
            *interrupted = 1;
            printf("sweep: interrupted: stopping %ld running task%s\n", running,
                   running == 1 ? "" : "s");
            for (long k = 0; k < n; k++)
                if (t[k].state == 1) kill(t[k].pid, al_stop);
        }
        while (!*interrupted && running < o->jobs && next < n) {
            long k = next++;
            snprintf(dir, sizeof dir, "%s/task-%ld", o->base, k);
            snprintf(log, sizeof log, "%s/log.txt", dir);
            snprintf(num, sizeof num, "%ld", k);
            if (al_mkdir_p(dir, e)) {
                rc = -1;
                break;
            }
            char *argv[12];
            int a = 0;
            argv[a++] = "attnlab";
            argv[a++] = "experiment";
            argv[a++] = (char *)o->file;
            argv[a++] = "--task";
            argv[a++] = num;
            argv[a++] = "--out";
            argv[a++] = (char *)o->base;
            if (o->threads >= 0) {
                argv[a++] = "--threads";
                argv[a++] = thr;
            }
            if (o->force) argv[a++] = "--force";
            argv[a] = NULL;
            t[k].pid = spawn(argv, log);
            if (t[k].pid < 0) {
                rc = al_errf(e, "sweep: cannot start task %ld: %s", k, strerror(errno));
                break;
            }
            t[k].state = 1;
            t[k].t0 = al_now();
            running++;
            printf("sweep: task %ld started (%ld/%ld done, %ld running, %ld failed)\n", k, done, n,
                   running, failed);
            fflush(stdout);
        }
        if (rc) { /* could not start one: stop the others as an interrupt would */
            for (long k = 0; k < n; k++)
                if (t[k].state == 1) kill(t[k].pid, SIGTERM);
        }
        if (running == 0 && (rc || *interrupted || next == n)) break;
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p <= 0) {
            nap();
            continue;
        }
        for (long k = 0; k < n; k++) {
            if (t[k].state != 1 || t[k].pid != p) continue;
            t[k].code = status_code(st);
            t[k].state = t[k].code == 0 ? 2 : 3;
            running--;
            t[k].code == 0 ? done++ : failed++;
            if (t[k].code == 0)
                printf("sweep: task %ld done in %.1f s (%ld/%ld done, %ld running, %ld failed)\n",
                       k, al_now() - t[k].t0, done, n, running, failed);
            else
                printf(
                    "sweep: task %ld FAILED with exit %d, see %s/task-%ld/log.txt (%ld/%ld done, %ld "
                    "running, %ld failed)\n",
                    k, t[k].code, o->base, k, done, n, running, failed);
            fflush(stdout);
        }
    }
    al_stop_release();
    if (rc == 0 && *interrupted) {
        rc = al_errf(e, "sweep: interrupted (%ld of %ld tasks done)", done, n);
    } else if (rc == 0 && failed) {
        char names[400] = "";
        size_t off = 0;
        int shown = 0;
        for (long k = 0; k < n; k++) {
            if (t[k].state != 3) continue;
            if (shown++ == 10) {
                snprintf(names + off, sizeof names - off, ", ...");
                break;
            }
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%ld", off ? ", " : "", k);
            if (off >= sizeof names) break;
        }
        rc = al_errf(e, "sweep: %ld of %ld task%s failed: %s (logs in %s/task-K/log.txt)", failed,
                     n, n == 1 ? "" : "s", names, o->base);
    } else if (rc == 0) {
        printf("sweep: all %ld tasks done\n", n);
        rc = merge(o, n, e);
    }
    free(t);
    return rc;
}
