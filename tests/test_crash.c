/* test_crash.c -- crash safety: training and databases killed at random
 * moments.
 *
 * Training: a tiny model checkpointing every step (so most of its time is
 * spent writing checkpoints) is killed with SIGKILL after random delays
 * from a seeded RNG, then resumed, over and over. After every kill the
 * directory must hold a loadable checkpoint no older than the one before,
 * and the final checkpoint must be byte-identical to that of a run never
 * interrupted. SIGINT/SIGTERM must save and exit 130 with state.json at
 * the step reported. Databases: `circuits` and `scores` killed mid-run
 * leave a database that passes integrity_check, whose interrupted run is
 * marked failed at the next open, with every earlier run intact. */
#define _DEFAULT_SOURCE /* wait4 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/data.h"
#include "attnlab/util.h"
#include "proc.h"
#include "test.h"

/* "step": N of DIR/state.json, or -1. */
static long state_step(const char *dir) {
    char p[1024];
    snprintf(p, sizeof p, "%s/state.json", dir);
    char *s = t_slurp(p);
    const char *k = s ? strstr(s, "\"step\":") : NULL;
    long step = k ? strtol(k + 7, NULL, 10) : -1;
    free(s);
    return step;
}

/* Files a save in progress leaves: NAME.new, COMMIT, *.tmp.<pid>. */
static int stray_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strstr(de->d_name, ".new") || strstr(de->d_name, ".tmp.") ||
             strncmp(de->d_name, "COMMIT", 6) == 0;
    closedir(d);
    return n;
}

/* t_path's buffers rotate 8 ways: paths kept across calls are copied. */
typedef struct tpath {
    char s[1024];
} tpath;
static tpath keep(const char *name) {
    tpath p;
    snprintf(p.s, sizeof p.s, "%s", t_path(name));
    return p;
}

static int same_file(const char *dir_a, const char *dir_b, const char *name) {
    return t_sh("cmp -s '%s/%s' '%s/%s'", dir_a, name, dir_b, name) == 0;
}

#define CRASH_MODEL                                                                                \
    "--d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --batch 4 --warmup 5 "                         \
    "--eval-every 0 --eval-batches 1 --threads 1"
#define CRASH_STEPS 120
#define CRASH_KILLS 24

/* The SIGKILL tests are the plain build's: a killed process is checked
 * for nothing by the sanitizers, and what it ran before the kill runs
 * whole in the other tests under them. */
#define SAN_KILLS "kills at random times: the plain build's (ASan checks no killed process)"

TEST(crash_train_sigkill_resume_exact) {
    if (T_SAN) t_skip(SAN_KILLS);
    tpath data_ = keep("c.bin"), ref_ = keep("ref"), err_ = keep("err"), run_err = keep("run.err");
    const char *data = data_.s, *ref = ref_.s, *err = err_.s;
    t_phrase_corpus(data, 20000);
    /* the uninterrupted run, timed to scale the kill delays to this machine */
    double t0 = al_now();
    pid_t p = t_spawn(NULL, err, "train --data %s --out %s --steps %d --ckpt-every 1 " CRASH_MODEL,
                      data, ref, CRASH_STEPS);
    CHECK(t_wait(p, NULL) == 0);
    double t_run = al_now() - t0;
    /* a process's start-up and checkpoint load, so that on a busy machine
     * (where they take longer against the steps) kills still land in saves */
    t0 = al_now();
    CHECK(t_sh("%s run --model %s --prompt 'the cat' >/dev/null 2>&1", t_bin(), ref) == 0);
    double t_start = al_now() - t0;
    /* About 25 kills per run through: delays uniform in [0, t_start +
     * t_run / 12] (so some kills land while a checkpoint is being loaded
     * or recovered). Kills that leave no checkpoint yet are not
     * counted, and lengthen the next delay. If a series finishes before
     * enough kills, a new one starts in a fresh directory. */
    al_rng rng;
    al_rng_seed(&rng, 20240607);
    int kills = 0, mid_save = 0, series = 0, early = 0;
    double pre = 0;
    /* more kills while none has hit a save yet (a busy machine), up to 3x */
#define MORE_KILLS (kills < CRASH_KILLS || (mid_save == 0 && kills < 3 * CRASH_KILLS))
    while (MORE_KILLS && series < 12) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/k%d", t_tmpdir(), series++);
        int have_ckpt = 0, done = 0;
        long last_step = -1;
        while (!done && MORE_KILLS) {
            if (have_ckpt)
                p = t_spawn(NULL, err, "train --resume %s", dir);
            else
                p = t_spawn(
                    NULL, err,
                    "train --data %s --out %s --steps %d --ckpt-every 1 --force " CRASH_MODEL, data,
                    dir, CRASH_STEPS);
            /* before the first checkpoint, a start-up slower than the
             * delays (a busy machine) would leave nothing to resume */
            t_sleep(al_rng_uniform(&rng) * (t_start + t_run / 12) + (have_ckpt ? 0 : pre));
            kill(p, SIGKILL);
            int rc = t_wait(p, NULL);
            if (rc == 0) {
                done = 1;
                break;
            }
            CHECKF(rc == 128 + SIGKILL, "train exited %d before the kill", rc);
            mid_save += stray_files(dir) > 0;
            /* any loader finishes or undoes the interrupted save */
            int ok = t_sh("%s run --model %s --prompt 'the cat' >/dev/null 2>%s", t_bin(), dir,
                          run_err.s) == 0;
            if (!ok) {
                /* only acceptable before the very first checkpoint */
                char mp[1100];
                snprintf(mp, sizeof mp, "%s/model.safetensors", dir);
                CHECKF(!have_ckpt && !al_file_exists(mp) && state_step(dir) < 0,
                       "kill %d: no loadable checkpoint in %s", kills, dir);
                /* not counted: wait longer next time */
                pre = pre > 0 ? 2 * pre : t_run / 12;
                if (++early >= 30) {
                    CHECKF(0, "%d kills before a first checkpoint", early);
                    return;
                }
                continue;
            }
            kills++;
            have_ckpt = 1;
            CHECKF(stray_files(dir) == 0, "kill %d: files of the interrupted save left", kills);
            long step = state_step(dir);
            CHECKF(step >= last_step && step <= CRASH_STEPS, "kill %d: step %ld after %ld", kills,
                   step, last_step);
            last_step = step;
        }
        if (!done) { /* enough kills: finish this series without interruption */
            int rc = t_wait(t_spawn(NULL, err, "train --resume %s", dir), NULL);
            if (rc != 0) {
                char *msg = t_slurp(err);
                CHECKF(0, "series %d: resume after %d kills exited %d: %s", series, kills, rc,
                       msg ? msg : "(no stderr)");
                free(msg);
            }
            done = 1;
        }
        CHECK(state_step(dir) == CRASH_STEPS);
        CHECKF(same_file(ref, dir, "model.safetensors") && same_file(ref, dir, "optim.safetensors"),
               "series %d: final checkpoint differs from the uninterrupted run", series);
        CHECK(same_file(ref, dir, "config.json") && same_file(ref, dir, "tokenizer.json"));
    }
    CHECKF(kills >= CRASH_KILLS, "only %d kills", kills);
    /* most of the run is spent saving: some kills must have hit a save */
    CHECKF(mid_save >= 1, "none of %d kills interrupted a checkpoint write", kills);
#undef MORE_KILLS
}

static const char *sql(const char *db, const char *q);

/* SIGINT (and SIGTERM) save and exit 130; state.json holds the step the
 * message names; resuming finishes exactly as an uninterrupted run. */
static void stop_by_signal(int sig) {
    tpath data_ = keep("c.bin"), ref_ = keep("ref"), dir_ = keep("m"), err_ = keep("err");
    tpath db_ = keep("r.db");
    const char *data = data_.s, *ref = ref_.s, *dir = dir_.s, *err = err_.s, *db = db_.s;
    t_phrase_corpus(data, 20000);
    int steps = 400;
    CHECK(t_wait(t_spawn(NULL, err,
                         "train --data %s --out %s --steps %d --ckpt-every 100000 " CRASH_MODEL,
                         data, ref, steps),
                 NULL) == 0);
    /* a slow copy of the run: --eval-every 1 logs every step */
    pid_t p = t_spawn(NULL, err,
                      "train --data %s --out %s --steps %d --ckpt-every 100000 " CRASH_MODEL
                      " --eval-every 1 --db %s",
                      data, dir, steps, db);
    /* wait for a few logged steps, so the signal lands mid-training */
    for (int i = 0; i < 2000; i++) {
        char *log = t_slurp(err);
        int n = 0;
        for (const char *q = log; q && (q = strstr(q, "train loss")); q++) n++;
        free(log);
        if (n >= 3) break;
        t_sleep(0.005);
    }
    kill(p, sig);
    CHECK(t_wait(p, NULL) == 130);
    char *log = t_slurp(err);
    const char *k = log ? strstr(log, "stopped at step ") : NULL;
    long stopped = k ? strtol(k + 16, NULL, 10) : -1;
    CHECKF(stopped >= 3 && stopped < steps, "stderr: %s", log ? log : "");
    CHECKF(state_step(dir) == stopped, "state.json step %ld, message says %ld", state_step(dir),
           stopped);
    free(log);
    CHECK(stray_files(dir) == 0);
    CHECK(t_sh("%s run --model %s --prompt 'the cat' >/dev/null 2>&1", t_bin(), dir) == 0);
    /* resume without the per-step evaluation: evaluation draws no random
     * numbers and does not touch the weights, so the result is the same */
    CHECK(t_wait(t_spawn(NULL, err, "train --resume %s --eval-every 0", dir), NULL) == 0);
    CHECK(same_file(ref, dir, "model.safetensors") && same_file(ref, dir, "optim.safetensors"));
    /* the resumed run's curve starts at step 0: every step up to the stop
     * (logged by the stopped run, or redone if the signal cut it short) */
    char q[256], want[32];
    snprintf(q, sizeof q, "SELECT count(*) FROM train_log WHERE run_id = 2 AND step <= %ld",
             stopped);
    snprintf(want, sizeof want, "%ld", stopped + 1);
    CHECKF(strcmp(sql(db, q), want) == 0, "%s: %s, want %s", q, sql(db, q), want);
    /* the stopped run is recorded as such (and the resumed one as done) */
    CHECKF(t_sh("test \"$(sqlite3 %s \"SELECT group_concat(status || ':' || coalesce(error, ''), "
                "'|') FROM runs\")\" = 'failed:interrupted (continue with --resume)|done:'",
                db) == 0,
           "runs: %s",
           sql(db, "SELECT group_concat(status || ':' || coalesce(error, ''), '|') "
                   "FROM runs"));
}

/* SIGKILL after a periodic checkpoint: that checkpoint names the run that
 * logged its curve, so the resumed run's curve still starts at step 0. */
TEST(crash_train_sigkill_keeps_curve) {
    tpath data_ = keep("c.bin"), dir_ = keep("m"), err_ = keep("err"), db_ = keep("r.db");
    const char *data = data_.s, *dir = dir_.s, *err = err_.s, *db = db_.s;
    t_phrase_corpus(data, 20000);
    pid_t p = t_spawn(NULL, err,
                      "train --data %s --out %s --steps 3000 --ckpt-every 10 " CRASH_MODEL
                      " --eval-every 5 --db %s",
                      data, dir, db);
    for (int i = 0; i < 4000 && state_step(dir) < 10; i++) t_sleep(0.005);
    kill(p, SIGKILL);
    CHECK(t_wait(p, NULL) == 128 + SIGKILL);
    long k = state_step(dir);
    CHECKF(k >= 10 && k % 10 == 0 && k < 3000, "checkpoint at step %ld", k);
    CHECK(t_wait(t_spawn(NULL, err, "train --resume %s --steps %ld", dir, k + 20), NULL) == 0);
    char q[256], want[32];
    snprintf(q, sizeof q, "SELECT count(*) FROM train_log WHERE run_id = 2 AND step <= %ld", k);
    snprintf(want, sizeof want, "%ld", k / 5 + 1);
    CHECKF(strcmp(sql(db, q), want) == 0, "%s: %s, want %s", q, sql(db, q), want);
    CHECK(strcmp(sql(db, "SELECT group_concat(status) FROM runs"), "failed,done") == 0);
}

TEST(crash_train_sigint_saves_and_stops) { stop_by_signal(SIGINT); }
TEST(crash_train_sigterm_saves_and_stops) { stop_by_signal(SIGTERM); }

/* Ctrl-C is honoured within one batch even inside a very long evaluation
 * (10^6 validation batches: hours), and still saves. */
TEST(crash_train_sigint_during_long_eval) {
    tpath data_ = keep("c.bin"), dir_ = keep("m"), err_ = keep("err");
    const char *data = data_.s, *dir = dir_.s, *err = err_.s;
    t_phrase_corpus(data, 20000);
    pid_t p = t_spawn(NULL, err,
                      "train --data %s --out %s --steps 5 --ckpt-every 100 " CRASH_MODEL
                      " --eval-every 1 --eval-batches 1000000",
                      data, dir);
    /* wait for the step-0 checkpoint: the signal handlers are in place */
    for (int i = 0; i < 2000 && state_step(dir) < 0; i++) t_sleep(0.005);
    t_sleep(0.2);
    double t0 = al_now();
    kill(p, SIGINT);
    CHECK(t_wait(p, NULL) == 130);
    CHECKF(al_now() - t0 < 5, "took %.1f s to stop", al_now() - t0);
    CHECK(state_step(dir) == 1);
    char *log = t_slurp(err);
    CHECKF(log && strstr(log, "stopped at step 1"), "%s", log ? log : "");
    free(log);
}

/* ------------------------------------------------------------ database */

/* Run a query with the sqlite3 CLI; the output (trimmed) in a static
 * buffer. */
static const char *sql(const char *db, const char *q) {
    static char out[4096];
    out[0] = 0;
    tpath o = keep("sql.out");
    if (t_sh("sqlite3 '%s' \"%s\" > %s 2>&1", db, q, o.s) != 0) return "(error)";
    char *s = t_slurp(o.s);
    if (s) {
        snprintf(out, sizeof out, "%s", s);
        free(s);
    }
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' ')) out[--n] = 0;
    return out;
}

/* Everything a run wrote, as one line (counts and sums of each table). */
static void run_digest(const char *db, long run_id, char *buf, size_t cap) {
    char q[1024];
    snprintf(
        q, sizeof q,
        "SELECT (SELECT count(*) || ':' || total(value) FROM head_scores WHERE run_id=%ld) "
        "|| '|' || (SELECT count(*) || ':' || total(value) FROM singular_values WHERE run_id=%ld) "
        "|| '|' || (SELECT count(*) || ':' || total(score) FROM skip_trigrams WHERE run_id=%ld) "
        "|| '|' || (SELECT count(*) || ':' || total(value) FROM model_scores WHERE run_id=%ld)",
        run_id, run_id, run_id, run_id);
    snprintf(buf, cap, "%s", sql(db, q));
}

/* Kill one run of fmt: after `wait` seconds, or (wait < 0) as soon as
 * its running row is committed. Checks the file, then what the dead run
 * left once the next attnlab has opened the file: nothing if it is
 * marked failed, ref's rows if it finished first. 1 if the kill landed
 * inside the run. */
static int kill_run(const char *db, const char *err, const char *fmt, const char *m,
                    const char *data, double wait, const char *ref, int i) {
    long before = strtol(sql(db, "SELECT max(run_id) FROM runs"), NULL, 10);
    pid_t p = t_spawn(NULL, err, fmt, m, db, data);
    if (wait >= 0)
        t_sleep(wait);
    else
        for (int k = 0;
             k < 2000 && strtol(sql(db, "SELECT max(run_id) FROM runs"), NULL, 10) == before; k++)
            t_sleep(0.002);
    kill(p, SIGKILL);
    int rc = t_wait(p, NULL);
    CHECKF(rc == 0 || rc == 128 + SIGKILL, "rc %d", rc);
    CHECKF(strcmp(sql(db, "PRAGMA integrity_check"), "ok") == 0, "kill %d: %s", i,
           sql(db, "PRAGMA integrity_check"));
    long killed = strtol(sql(db, "SELECT max(run_id) FROM runs"), NULL, 10);
    /* the next attnlab to open the file marks the dead run failed */
    CHECK(t_wait(t_spawn(NULL, err, fmt, m, db, data), NULL) == 0);
    if (killed <= before) return 0;
    char q[256], d[512], status[64];
    snprintf(q, sizeof q, "SELECT status FROM runs WHERE run_id = %ld", killed);
    snprintf(status, sizeof status, "%s", sql(db, q));
    CHECKF(strcmp(status, "failed") == 0 || strcmp(status, "done") == 0, "kill %d: run %ld is '%s'",
           i, killed, status);
    run_digest(db, killed, d, sizeof d);
    if (strcmp(status, "failed") == 0) {
        CHECKF(strcmp(d, "0:0.0|0:0.0|0:0.0|0:0.0") == 0, "kill %d: failed run %ld has rows: %s", i,
               killed, d);
        return 1;
    }
    CHECKF(strcmp(d, ref) == 0, "kill %d: done run %ld: %s, want %s", i, killed, d, ref);
    return 0;
}

TEST(crash_db_sigkill_mid_write) {
    if (T_SAN) t_skip(SAN_KILLS);
    tpath data_ = keep("c.bin"), m_ = keep("m"), db_ = keep("r.db"), err_ = keep("err");
    const char *data = data_.s, *m = m_.s, *db = db_.s, *err = err_.s;
    t_phrase_corpus(data, 20000);
    CHECK(t_wait(t_spawn(NULL, err, "train --data %s --out %s --steps 3 --n-layers 2 " CRASH_MODEL,
                         data, m),
                 NULL) == 0);
    /* reference runs: 1 = circuits, 2 = scores, timed */
    const char *cmd[2] =
        {"circuits --model %s --db %s --threads 1 --mc-samples 400",
         "scores --model %s --db %s --threads 1 --data %s --batches 16 --probe-r 10"};
    double t_cmd[2];
    char ref[2][512];
    for (int k = 0; k < 2; k++) {
        double t0 = al_now();
        CHECK(t_wait(t_spawn(NULL, err, cmd[k], m, db, data), NULL) == 0);
        t_cmd[k] = al_now() - t0;
        run_digest(db, k + 1, ref[k], sizeof ref[k]);
    }
    CHECKF(strcmp(sql(db, "SELECT group_concat(status) FROM runs"), "done,done") == 0, "%s",
           sql(db, "SELECT group_concat(status) FROM runs"));
    al_rng rng;
    al_rng_seed(&rng, 77);
    int failed = 0;
    /* at random times: before the run row, inside the run, after it */
    for (int i = 0; i < 10; i++)
        failed += kill_run(db, err, cmd[i % 2], m, data, al_rng_uniform(&rng) * t_cmd[i % 2],
                           ref[i % 2], i);
    /* and once each as the run row is committed, so that a kill inside a
     * run is tested however the random times fell on a busy machine */
    for (int k = 0; k < 2; k++) failed += kill_run(db, err, cmd[k], m, data, -1, ref[k], 10 + k);
    /* earlier runs intact, nothing left running */
    for (int k = 0; k < 2; k++) {
        char d[512];
        run_digest(db, k + 1, d, sizeof d);
        CHECKF(strcmp(d, ref[k]) == 0, "run %d: %s, want %s", k + 1, d, ref[k]);
    }
    CHECK(strcmp(sql(db, "SELECT count(*) FROM runs WHERE status = 'running'"), "0") == 0);
    CHECKF(failed >= 1, "no kill landed inside a run (of 12)");
}
