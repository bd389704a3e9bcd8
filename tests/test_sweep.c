/* test_sweep.c -- sweeps of experiments (one study file, many seeds): the tasks and their
 * order, each refusal one line with nothing created, --task K running
 * only task K with its values and its sweep_task row, --jobs 2 giving
 * bitwise the databases and checkpoints of the tasks run one by one, a
 * failing task named, and Ctrl-C forwarded to the running tasks. */
#define _DEFAULT_SOURCE /* wait4 (tests/proc.h) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/sweep.h"
#include "proc.h"
#include "test.h"

/* T_EXP_TINY_2L with one cheap analysis and no report, then "@": the
 * sweep block (or anything else to end the file with). threads 1 so
 * --jobs 2 and one by one use the same thread count. */
#define TINY_SWEEP(sweep)                                                                             \
    "{\"name\": \"sw\", \"threads\": 1,\n"                                                            \
    " \"data\": {\"synthetic\": {\"stories\": 60, \"seed\": 4}, \"val\": 0.1},\n"                     \
    " \"tokenizer\": {\"vocab\": 300},\n"                                                             \
    " \"train\": {\"d_model\": 32, \"n_heads\": 4, \"d_head\": 8, \"n_ctx\": 32, \"batch\": 4,\n"     \
    "           \"steps\": 10, \"eval_every\": 10, \"warmup\": 2},\n"                                 \
    " \"models\": [{\"name\": \"two\", \"n_layers\": 2}],\n"                                          \
    " \"analyses\": {\"scores\": {\"probe_r\": 10, \"probe_n\": 8, \"batches\": 2, \"batch\": 4}},\n" \
    " \"pictures\": false, \"report\": false,\n"                                                      \
    " \"sweep\": " sweep "}\n"

static al_sweep *load(const char *text) {
    al_sweep *s = NULL;
    al_err e;
    const char *p = t_write("s.json", text);
    CHECKF(al_sweep_load(p, &s, &e) == 0 && s, "%s", e.msg);
    return s;
}

TEST(sweep_tasks_and_order) {
    al_sweep *s = load(TINY_SWEEP("{\"seed\": [1, 2], \"train.lr\": [0.003, 0.01, 0.03],"
                                  " \"models[0].tied\": [false, true]}"));
    if (!s) return;
    CHECK(al_sweep_n_tasks(s) == 12 && al_sweep_n_keys(s) == 3);
    CHECK(strcmp(al_sweep_key(s, 1), "train.lr") == 0);
    al_sweep_values v;
    al_err e;
    /* the last key varies fastest: task 7 = seed 2 (7 / 6 = 1), lr index (7 / 2) % 3 = 0, tied 1 */
    CHECK_OK(al_sweep_values_of(s, 7, &v, &e), &e);
    CHECKF(strcmp(v.all, "seed=2 train.lr=0.003 models[0].tied=true") == 0, "%s", v.all);
    CHECKF(strcmp(v.setting, "train.lr=0.003 models[0].tied=true") == 0, "%s", v.setting);
    CHECKF(strcmp(v.params_json, "{\"seed\":2,\"train.lr\":0.003,\"models[0].tied\":true}") == 0,
           "%s", v.params_json);
    CHECK(v.has_seed && v.seed == 2);
    al_sweep_values_free(&v);
    CHECK_OK(al_sweep_values_of(s, 0, &v, &e), &e);
    CHECK(strcmp(v.all, "seed=1 train.lr=0.003 models[0].tied=false") == 0);
    al_sweep_values_free(&v);
    CHECK(al_sweep_values_of(s, 12, &v, &e) == -1 && strstr(e.msg, "out of range") && !v.all);
    /* task 11's experiment: the values in its model's options, its folder */
    al_experiment *x;
    CHECK_OK(al_sweep_task_load(s, 11, "/x/out", &x, &e), &e);
    if (x) {
        CHECKF(strstr(x->models[0].train, "\"lr\":0.03") &&
                   strstr(x->models[0].train, "\"seed\":2"),
               "%s", x->models[0].train);
        CHECK(x->models[0].tied == 1 && strcmp(x->out, "/x/out/task-11") == 0);
        al_exp_free(x);
    }
    CHECK_OK(al_sweep_check(s, &e), &e);
    al_sweep_free(s);
    /* values of any JSON kind; a string of one word bare, others as JSON;
     * a path may end at a key the file lacks (data.synthetic.repeat_fraction) */
    s = load(TINY_SWEEP(
        "{\"analyses.scores\": [{\"probe_n\": 4}, true], \"tokenizer.vocab\": [280],"
        " \"data.synthetic.repeat_fraction\": [0.5], \"description\": [\"a b\", \"c\"]}"));
    if (!s) return;
    CHECK(al_sweep_n_tasks(s) == 4);
    CHECK_OK(al_sweep_values_of(s, 0, &v, &e), &e);
    CHECKF(strcmp(v.setting, "analyses.scores={\"probe_n\":4} tokenizer.vocab=280 "
                             "data.synthetic.repeat_fraction=0.5 description=\"a b\"") == 0,
           "%s", v.setting);
    CHECK(!v.has_seed);
    al_sweep_values_free(&v);
    CHECK_OK(al_sweep_check(s, &e), &e);
    CHECK_OK(al_sweep_task_load(s, 3, NULL, &x, &e), &e);
    if (x) {
        CHECK(strcmp(x->description, "c") == 0 && strstr(x->synth, "\"repeat_fraction\":0.5"));
        CHECK(strcmp(x->out, "notebooks-out/sw/task-3") == 0);
        al_exp_free(x);
    }
    al_sweep_free(s);
    /* the CLI lists the same tasks, one line each */
    al_sweep_free(load(TINY_SWEEP("{\"seed\": [1, 2], \"train.lr\": [0.003, 0.01]}")));
    CHECK(t_sh("%s experiment %s --list-tasks --out /x/o > %s", t_bin(), t_path("s.json"),
               t_path("list")) == 0);
    char *l = t_slurp(t_path("list"));
    CHECKF(
        l && strcmp(
                 l,
                 "0\t/x/o/task-0\tseed=1 train.lr=0.003\n1\t/x/o/task-1\tseed=1 train.lr=0.01\n"
                 "2\t/x/o/task-2\tseed=2 train.lr=0.003\n3\t/x/o/task-3\tseed=2 train.lr=0.01\n") ==
                 0,
        "%s", l ? l : "");
    free(l);
    /* a file without "sweep" is not one */
    t_write("plain.json", T_EXP_TINY_2L("plain") " \"report\": false}");
    s = (al_sweep *)1;
    CHECK(al_sweep_load(t_path("plain.json"), &s, &e) == 0 && s == NULL);
}

/* One refusal: the command exits `code` with one line holding want, and
 * makes no output folder. */
static void refused(const char *sweep_or_file, const char *args, int code, const char *want) {
    t_write("bad.json", sweep_or_file);
    t_sh("rm -rf %s", t_path("o"));
    int rc = t_sh("%s experiment %s --out %s %s 2>%s >/dev/null", t_bin(), t_path("bad.json"),
                  t_path("o"), args, t_path("err"));
    CHECKF(rc == code, "%s %s: exit %d, want %d", sweep_or_file, args, rc, code);
    CHECKF(t_one_line(t_path("err"), want), "%s", sweep_or_file);
    CHECKF(!al_file_exists(t_path("o")), "%s: made the output folder", sweep_or_file);
}

TEST(sweep_refusals_one_line) {
    /* an unknown last key: the ordinary loader names it, for any mode */
    refused(TINY_SWEEP("{\"train.lrr\": [1, 2]}"), "--list-tasks", 1,
            "(task 0): train.lrr: unknown key (see 'attnlab help train')");
    refused(TINY_SWEEP("{\"train.lrr\": [1, 2]}"), "--task 1", 1, "train.lrr: unknown key");
    refused(TINY_SWEEP("{\"train.lrr\": [1, 2]}"), "--jobs 2", 1, "train.lrr: unknown key");
    refused(TINY_SWEEP("{\"sed\": [1, 2]}"), "--jobs 2", 1, "sed: unknown key");
    /* a path through what the file lacks, an index past the end */
    refused(TINY_SWEEP("{\"train.opt.lr\": [1]}"), "--task 0", 1,
            "sweep[\"train.opt.lr\"]: train.opt is not in the file");
    refused(TINY_SWEEP("{\"models[1].n_layers\": [1]}"), "--list-tasks", 1,
            "sweep[\"models[1].n_layers\"]: models[1]: index out of range (1 entry)");
    refused(TINY_SWEEP("{\"train.steps.x\": [1]}"), "--list-tasks", 1,
            "train.steps is not an object");
    refused(TINY_SWEEP("{\"name[0]\": [1]}"), "--list-tasks", 1, "name is not a list");
    refused(TINY_SWEEP("{\"train..lr\": [1]}"), "--list-tasks", 1, "not a key path");
    refused(TINY_SWEEP("{\"[0]\": [1]}"), "--list-tasks", 1, "sweep[\"[0]\"]: not a key path");
    refused(TINY_SWEEP("{\"models[0\": [1]}"), "--list-tasks", 1, "not a key path");
    refused(TINY_SWEEP("{\"train.\": [1]}"), "--list-tasks", 1, "not a key path");
    /* values */
    refused(TINY_SWEEP("{\"seed\": [1], \"train.lr\": []}"), "--jobs 2", 1,
            "sweep[\"train.lr\"]: empty list: give at least one value");
    refused(TINY_SWEEP("{\"train.lr\": 0.01}"), "--task 0", 1,
            "sweep[\"train.lr\"]: must be a list of values");
    refused(TINY_SWEEP("{}"), "--task 0", 1, "sweep: must be a non-empty object");
    refused(TINY_SWEEP("{\"train.lr\": [0.01, \"fast\"]}"), "--jobs 2", 1,
            "(task 1): train.lr: must be a number");
    /* too many tasks: 50 x 50 x 50 = 125,000 */
#define L50                                                                                        \
    "[0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9]"
    refused(TINY_SWEEP("{\"seed\": " L50 ", \"train.warmup\": " L50 ", \"train.eval_every\": " L50
                       "}"),
            "--list-tasks", 1, "more than 100000 tasks");
    /* a sweep inside a task, two paths that overlap, a seed given twice */
    refused(TINY_SWEEP("{\"sweep.seed\": [[1]]}"), "--task 0", 1, "a task cannot hold a sweep");
    refused(TINY_SWEEP("{\"train\": [{}], \"train.lr\": [1]}"), "--task 0", 1,
            "sweep[\"train.lr\"]: overlaps sweep[\"train\"]");
    refused(TINY_SWEEP("{\"seed\": [1, 2], \"models[0]\": [{\"name\": \"two\", \"seed\": 3}]}"),
            "--task 0", 1, "seed: given twice: here and as models[0].seed");
    refused(TINY_SWEEP("{\"out\": [\"a\", \"b\"]}"), "--list-tasks", 1,
            "output folder cannot vary by task");
    /* the task index, the modes */
    refused(TINY_SWEEP("{\"seed\": [1, 2]}"), "--task 2", 2, "--task 2: out of range (");
    refused(TINY_SWEEP("{\"seed\": [1, 2]}"), "--task -1", 2, "--task -1: out of range");
    refused(TINY_SWEEP("{\"seed\": [1, 2]}"), "", 2, "is a sweep of 2 tasks: give --list-tasks");
    refused(TINY_SWEEP("{\"seed\": [1, 2]}"), "--task 0 --jobs 2", 2, "give one of --list-tasks");
    refused(T_EXP_TINY_2L("plain") " \"report\": false}", "--jobs 2", 2, "has no \"sweep\"");
    /* the loader alone refuses a sweep file: its tasks are what run */
    al_experiment *x = (al_experiment *)1;
    al_err e;
    t_write("s.json", TINY_SWEEP("{\"seed\": [1, 2]}"));
    CHECK(al_exp_load(t_path("s.json"), &x, &e) == -1 && x == NULL &&
          strstr(e.msg, "sweep: this file is a sweep"));
}

/* Counted in the database of a task run. */
static long q(const char *dir, const char *sql) {
    char db[1200];
    snprintf(db, sizeof db, "%s/results.db", dir);
    return t_sql_long(db, sql);
}

TEST(sweep_task_runs_one_task) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    t_write("s.json", TINY_SWEEP("{\"seed\": [5, 6], \"train.lr\": [0.003, 0.02]}"));
    t_pbuf o = t_pcopy("o");
    CHECK(t_sh("%s experiment %s --task 3 --out %s > %s 2>&1", t_bin(), t_path("s.json"), o.s,
               t_path("log")) == 0);
    CHECK(
        t_sh(
            "test -d %s/task-3 && test ! -e %s/task-0 && test ! -e %s/task-1 && test ! -e %s/task-2",
            o.s, o.s, o.s, o.s) == 0);
    char dir[1100], p[1200];
    snprintf(dir, sizeof dir, "%s/task-3", o.s);
    /* the trained model has task 3's seed and lr */
    snprintf(p, sizeof p, "%s/models/two/state.json", dir);
    char *st = t_slurp(p);
    CHECKF(st && strstr(st, "\"seed\":\t6") && strstr(st, "\"lr\":\t0.02"), "%s",
           st ? st : "(none)");
    free(st);
    char db[1200];
    snprintf(db, sizeof db, "%s/results.db", dir);
    CHECK_SQL(db, "SELECT experiment, task, n_tasks, setting, seed, params_json FROM sweep_task",
              "sw|3|4|train.lr=0.02|6|{\"seed\":6,\"train.lr\":0.02}");
    CHECK(q(dir, "SELECT count(*) FROM runs WHERE status = 'done'") == 2);
    CHECK(q(dir, "SELECT count(*) FROM head_scores") > 0);
    /* the seed changes the weights: task 2 (seed 6, lr 0.003) against
     * task 0 (seed 5, lr 0.003) */
    CHECK(t_sh("%s experiment %s --task 0 --out %s > /dev/null 2>&1", t_bin(), t_path("s.json"),
               o.s) == 0);
    CHECK(t_sh("%s experiment %s --task 2 --out %s > /dev/null 2>&1", t_bin(), t_path("s.json"),
               o.s) == 0);
    CHECK(
        t_sh("cmp -s %s/task-0/models/two/model.safetensors %s/task-2/models/two/model.safetensors",
             o.s, o.s) != 0);
    /* and again: every stage reused */
    CHECK(t_sh("%s experiment %s --task 3 --out %s > %s 2>&1", t_bin(), t_path("s.json"), o.s,
               t_path("log2")) == 0);
    char *log = t_slurp(t_path("log2"));
    CHECK(log && !strstr(log, "$ attnlab train") &&
          strstr(log, "task 3 of 4: seed=6 train.lr=0.02"));
    free(log);
}

/* The contents of a task's database that do not depend on when or
 * where it ran: not runs' timestamps, pids and uids, nor the models'
 * folder and time added, nor the seconds of the training log; every
 * number to 17 digits, so equal text is equal bits. */
static char *contents(const char *dir) {
    char db[1200];
    snprintf(db, sizeof db, "%s/results.db", dir);
    return t_sql(
        db,
        "SELECT 'runs', run_id, kind, status, model_id FROM runs;"
        "SELECT 'models', model_id, sha256, n_layers, d_model, n_heads, d_head, n_ctx, d_vocab,"
        " tied_embeddings, seed, n_params, trained_tokens, train_steps,"
        " printf('%!.17g', final_train_loss), printf('%!.17g', final_val_loss) FROM models;"
        "SELECT 'train_log', run_id, step, tokens, printf('%!.17g', train_loss),"
        " printf('%!.17g', val_loss), printf('%!.17g', icl_gain), lr FROM train_log;"
        "SELECT 'train_head_scores', * FROM train_head_scores;"
        "SELECT 'head_scores', run_id, model_id, layer, head, metric, printf('%!.17g', value)"
        " FROM head_scores;"
        "SELECT 'model_scores', run_id, model_id, metric, printf('%!.17g', value) FROM model_scores;"
        "SELECT 'sweep_task', * FROM sweep_task;");
}

static int db_merge_exists(void) { return t_sh("%s help db > /dev/null 2>&1", t_bin()) == 0; }

TEST(sweep_jobs_equal_one_by_one) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    t_write("s.json", TINY_SWEEP("{\"seed\": [1, 2], \"train.lr\": [0.003, 0.01]}"));
    t_pbuf a = t_pcopy("jobs"), b = t_pcopy("one");
    int rc = t_sh("%s experiment %s --jobs 2 --out %s > %s 2>%s", t_bin(), t_path("s.json"), a.s,
                  t_path("jobs.out"), t_path("jobs.err"));
    for (int k = 0; k < 4; k++)
        CHECK(t_sh("%s experiment %s --task %d --out %s > /dev/null 2>&1", t_bin(),
                   t_path("s.json"), k, b.s) == 0);
    char *out = t_slurp(t_path("jobs.out"));
    CHECKF(out && strstr(out, "sweep: all 4 tasks done") &&
               strstr(out, "(4/4 done, 0 running, 0 failed)"),
           "%s", out ? out : "");
    free(out);
    if (db_merge_exists()) {
        char db[1100];
        CHECK(rc == 0);
        snprintf(db, sizeof db, "%s/sweep.db", a.s);
        CHECK(t_sql_long(db, "SELECT count(*) FROM merge_sources") == 4);
        CHECK(t_sql_long(db, "SELECT count(DISTINCT sha256) FROM models") == 4);
    } else { /* until `attnlab db merge` lands: the merge step says so */
        CHECK(rc == 1);
        CHECK(t_sh("grep -q \"'attnlab db merge' into .*/sweep.db failed\" %s",
                   t_path("jobs.err")) == 0);
    }
    for (int k = 0; k < 4; k++) {
        char da[1100], dbb[1100];
        snprintf(da, sizeof da, "%s/task-%d", a.s, k);
        snprintf(dbb, sizeof dbb, "%s/task-%d", b.s, k);
        CHECKF(t_sh("cmp -s %s/models/two/model.safetensors %s/models/two/model.safetensors", da,
                    dbb) == 0,
               "task %d: checkpoints differ", k);
        char *ca = contents(da), *cb = contents(dbb);
        CHECKF(ca && cb && strlen(ca) > 200 && strcmp(ca, cb) == 0, "task %d: databases differ", k);
        free(ca);
        free(cb);
        /* each task's log */
        char p[1200];
        snprintf(p, sizeof p, "%s/log.txt", da);
        char *log = t_slurp(p);
        CHECK(log && strstr(log, "$ attnlab train"));
        free(log);
    }
    /* distinct tasks, distinct models */
    CHECK(
        t_sh(
            "test \"$(sha256sum %s/task-*/models/two/model.safetensors | cut -c1-64 | sort -u | wc -l)\" = 4",
            a.s) == 0);
}

TEST(sweep_jobs_names_failed_task) {
    t_write("s.json", TINY_SWEEP("{\"train.batch\": [4, 0, 2]}"));
    t_pbuf o = t_pcopy("o");
    int rc = t_sh("%s experiment %s --jobs 2 --out %s > %s 2>%s", t_bin(), t_path("s.json"), o.s,
                  t_path("out"), t_path("err"));
    CHECK(rc == 1);
    CHECK(t_one_line(t_path("err"), "sweep: 1 of 3 tasks failed: 1 (logs in"));
    char p[1100];
    snprintf(p, sizeof p, "%s/task-1/log.txt", o.s);
    char *log = t_slurp(p);
    CHECK(log && strstr(log, "batch must be positive"));
    free(log);
    /* the others finished; no merge was attempted */
    CHECK(
        t_sh(
            "test -f %s/task-0/models/two/model.safetensors && test -f %s/task-2/models/two/model.safetensors",
            o.s, o.s) == 0);
    char *out = t_slurp(t_path("out"));
    CHECK(out && strstr(out, "task 1 FAILED with exit 1") && !strstr(out, "merging"));
    free(out);
}

/* Ctrl-C to --jobs reaches the running tasks once (their own process
 * groups): each training saves and stops, no new task starts, exit 130. */
TEST(sweep_jobs_sigint_forwarded) {
    t_write("s.json", TINY_SWEEP("{\"train.steps\": [3000, 3000, 3000]}"));
    t_pbuf o = t_pcopy("o");
    pid_t p = t_spawn(t_path("out"), t_path("err"), "experiment %s --jobs 2 --out %s",
                      t_path("s.json"), o.s);
    char st[2][1100];
    for (int k = 0; k < 2; k++)
        snprintf(st[k], sizeof st[k], "%s/task-%d/models/two/state.json", o.s, k);
    /* both trainings under way (on a busy machine either may start first) */
    for (int i = 0; i < 600 && !(al_file_exists(st[0]) && al_file_exists(st[1])); i++)
        t_sleep(0.05);
    t_sleep(0.3);
    kill(p, SIGINT);
    int rc = t_wait(p, NULL);
    CHECK(rc == 130);
    CHECK(t_one_line(t_path("err"), "sweep: interrupted (0 of 3 tasks done)"));
    char q2[1200];
    snprintf(q2, sizeof q2, "%s/task-2", o.s);
    CHECK(!al_file_exists(q2));
    for (int k = 0; k < 2; k++) {
        snprintf(q2, sizeof q2, "%s/task-%d/log.txt", o.s, k);
        char *log = t_slurp(q2);
        CHECKF(log && strstr(log, "interrupted"), "task %d: %s", k, log ? log : "");
        free(log);
    }
    /* no task left running: nothing holds the logs open */
    CHECK(t_sh("pgrep -f '[e]xperiment %s --task' > /dev/null", t_path("s.json")) != 0);
}

/* The top-level "seed" is every model's training seed (what a sweep over
 * "seed" sets); given with a model's or train's own seed it is refused. */
TEST(sweep_top_level_seed) {
    al_experiment *x;
    al_err e;
    const char *p =
        t_write("seed.json",
                "{\"name\": \"s\", \"seed\": 7, \"data\": {\"synthetic\": {}},"
                " \"models\": [{\"name\": \"a\"}, {\"name\": \"b\", \"n_layers\": 1}]}");
    CHECK_OK(al_exp_load(p, &x, &e), &e);
    if (x) {
        CHECK(strstr(x->models[0].train, "\"seed\":7") && strstr(x->models[1].train, "\"seed\":7"));
        al_exp_free(x);
    }
    p = t_write(
        "seed2.json",
        "{\"name\": \"s\", \"seed\": 7, \"train\": {\"seed\": 3}, \"data\": {\"synthetic\": {}},"
        " \"models\": [{\"name\": \"a\"}]}");
    x = (al_experiment *)1;
    CHECK(al_exp_load(p, &x, &e) == -1 && !x &&
          strstr(e.msg, "seed: given twice: here and as train.seed"));
    p = t_write("seed3.json", "{\"name\": \"s\", \"seed\": -1, \"data\": {\"synthetic\": {}},"
                              " \"models\": [{\"name\": \"a\"}]}");
    x = (al_experiment *)1;
    CHECK(al_exp_load(p, &x, &e) == -1 && !x &&
          strstr(e.msg, "seed: must be a non-negative integer"));
}

/* The README's sweep example loads: 8 seeds x tied/untied, every task
 * valid (run from the repository root). */
TEST(sweep_shipped_seeds_2l) {
    if (!al_file_exists("experiments/seeds-2l.json")) t_skip("not run from the repository root");
    al_sweep *s = NULL;
    al_err e;
    CHECK_OK(al_sweep_load("experiments/seeds-2l.json", &s, &e), &e);
    if (!s) return;
    CHECK(al_sweep_n_tasks(s) == 16);
    CHECK_OK(al_sweep_check(s, &e), &e);
    al_experiment *x;
    CHECK_OK(al_sweep_task_load(s, 15, NULL, &x, &e), &e);
    if (x) {
        CHECK(x->models[0].tied == 1 && x->models[0].n_layers == 2 && x->models[0].steps == 1500);
        CHECK(strstr(x->models[0].train, "\"seed\":8") &&
              strstr(x->models[0].train, "\"eval_every\":50"));
        CHECK(strcmp(x->out, "notebooks-out/seeds-2l/task-15") == 0);
        al_exp_free(x);
    }
    al_sweep_free(s);
}
