/* test_papercuts.c -- small refusals a new user met: a database path that
 * stores nothing, a misspelling corrected into another option, a folder
 * given where a picture file is wanted, an SAE folder in use, Ctrl-C in
 * ablate and prune. Each
 * checks the exit code, one line naming the fix, and that nothing was
 * written. */
#define _DEFAULT_SOURCE /* wait4 (proc.h) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/store.h"
#include "attnlab/util.h"
#include "proc.h"
#include "test.h"

/* The binary by absolute path: these tests cd into their folder, and
 * make test gives ATTNLAB_BIN relative to the checkout. */
static const char *abin(void) {
    static char buf[4096];
    if (!buf[0] && !realpath(t_bin(), buf)) snprintf(buf, sizeof buf, "%s", t_bin());
    return buf;
}

/* SQLite takes "" as a private temporary database and ":memory:" as one
 * in memory; a run stored there is gone at exit, so both are refused
 * before anything runs. */
TEST(papercut_db_empty_path_refused) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    const char *bad[] = {"''", ":memory:"};
    for (int i = 0; i < 2; i++) {
        CHECK(t_sh("cd %s && %s scores --model m1 --db %s --probe-r 5 --probe-n 2 > %s 2> %s", dir,
                   abin(), bad[i], t_path("o"), t_path("e")) == 2);
        CHECK(t_one_line(t_path("e"), "no database file given"));
        char *o = t_slurp(t_path("o"));
        CHECK(o && !*o); /* no "run 1 of" */
        free(o);
    }
}

/* A suggestion must be a plausible typo: "--heads" (an option of
 * ablate) is not "--threads" misspelt. Real typos still get one. */
TEST(papercut_no_far_fetched_suggestion) {
    CHECK(t_sh("%s patch --heads 9.9 2> %s", abin(), t_path("e")) == 2);
    char *s = t_slurp(t_path("e"));
    CHECK(s && strstr(s, "unknown option '--heads'") && !strstr(s, "did you mean"));
    free(s);
    CHECK(t_sh("%s patch --threds 2 2> %s", abin(), t_path("e2")) == 2);
    CHECK(t_one_line(t_path("e2"), "(did you mean --threads?)"));
}

/* A folder (with or without a trailing slash) where a file is wanted:
 * said as such, and nothing is left inside the folder. */
TEST(papercut_out_is_a_folder) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    CHECK(t_sh("mkdir -p %s/pics", dir) == 0);
    const char *outs[] = {"pics/", "pics"};
    for (int i = 0; i < 2; i++) {
        CHECK(t_sh("cd %s && %s heatmap --model m1 --what qk --layer 0 --head 0 --out %s 2> %s",
                   dir, abin(), outs[i], t_path("e")) == 1);
        CHECK(t_one_line(t_path("e"), "is a folder, not a file name"));
        CHECK(t_sh("test -z \"$(ls -A %s/pics)\"", dir) == 0);
    }
}

/* An SAE folder in use is refused before any work, naming both flags. */
TEST(papercut_sae_folder_in_use_names_flags) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    CHECK(t_sh("mkdir -p %s/sae && echo '{}' > %s/sae/cfg.json", dir, dir) == 0);
    CHECK(
        t_sh(
            "cd %s && %s sae train --model m1 --layer 0 --data s.train.bin --out sae --db r.db --steps 2 "
            "2> %s",
            dir, abin(), t_path("e")) == 1);
    CHECK(t_one_line(t_path("e"), "--resume continues it, --force replaces it"));
    t_pbuf db;
    snprintf(db.s, sizeof db.s, "%s/r.db", dir);
    CHECK(t_sh("test -e %s", db.s) != 0 || t_sql_long(db.s, "SELECT count(*) FROM runs") == 0);
    CHECK(t_sh("test \"$(ls -A %s/sae)\" = cfg.json", dir) == 0);
}

/* Ctrl-C in ablate and prune: exit 130 with one "interrupted" line, the
 * run marked failed, nothing stored, no mask written (they ran to the
 * end, or exited 130 silently leaving the run "running"). */
static void sigint_case(const char *args, const char *kind, const char *table) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err");
    t_tiny_model(dir.s, 2, 5);
    pid_t p = t_spawn(NULL, err.s, "%s --model %s/m2 --db %s --data %s/s.val.bin --threads 1", args,
                      dir.s, db.s, dir.s);
    CHECK(t_wait_running(db.s));
    t_sleep(0.3);
    kill(p, SIGINT);
    int rc = t_wait(p, NULL);
    CHECKF(rc == 130, "%s: exit %d", kind, rc);
    CHECK(t_sh("tail -n 1 %s | grep -qx 'attnlab: interrupted'", err.s) == 0);
    char want[64], q[128];
    snprintf(want, sizeof want, "%s|failed|interrupted", kind);
    CHECK_SQL(db.s, "SELECT kind, status, error FROM runs", want);
    snprintf(q, sizeof q, "SELECT count(*) FROM %s", table);
    CHECK_SQL(db.s, q, "0");
    CHECK(t_sh("ls %s/m2/mask-*.json >/dev/null 2>&1", dir.s) != 0);
}

TEST(papercut_ablate_sigint) {
    sigint_case("ablate --pairs --batches 60000 --batch 8 --probe-r 6 --probe-n 4", "ablate",
                "ablations");
}

TEST(papercut_prune_sigint) {
    sigint_case("prune --method ablation --budget -1 --batches 60000", "prune", "pruning_steps");
}

/* docs/sql.md names every table and view a new database has, and the
 * schema version it has (it said 13 of 14 and left out eight). */
TEST(papercut_sql_doc_lists_schema) {
    al_store *s;
    al_err e;
    const char *db = t_path("fresh.db");
    CHECK_OK(al_store_open(db, &s, &e), &e);
    al_store_close(s);
    char *doc = t_slurp("docs/sql.md");
    if (!doc) t_skip("docs/sql.md not found (run from the checkout)");
    char now[32];
    snprintf(now, sizeof now, "(now %d:", AL_STORE_SCHEMA_VERSION);
    CHECKF(strstr(doc, now) != NULL, "docs/sql.md does not say %s", now);
    char *names = t_sql(db, "SELECT group_concat(name, ' ') FROM sqlite_master WHERE type IN "
                            "('table', 'view') AND name NOT LIKE 'sqlite_%'");
    CHECK(names && *names);
    for (char *w = names ? strtok(names, " \n") : NULL; w; w = strtok(NULL, " \n")) {
        char a[96], b[96];
        snprintf(a, sizeof a, "| `%s`", w);
        snprintf(b, sizeof b, ", `%s`", w);
        CHECKF(strstr(doc, a) || strstr(doc, b), "docs/sql.md has no row for %s", w);
    }
    free(names);
    free(doc);
}

/* run --json names its schema like every other document. */
TEST(papercut_run_json_schema) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    CHECK(t_sh("cd %s && %s run --model m1 --prompt 'a b' --json > %s 2>/dev/null", dir, abin(),
               t_path("o")) == 0);
    char *o = t_slurp(t_path("o"));
    CHECK(o && strstr(o, "\"schema\":\t\"attnlab.run/1\""));
    free(o);
}

/* The docs describe the software and its measurements, not how they
 * were made: no sessions, issue numbers or first-person narration. */
TEST(papercut_docs_do_not_narrate) {
    if (t_sh("test -d docs && test -f README.md") != 0) t_skip("run from the checkout");
    CHECK(t_sh("grep -rniE '\\bsession\\b|\\bissue [0-9]|the issue (measured|was filed|asks)|"
               "\\bI (have|measured|tried|found)\\b' docs README.md > %s",
               t_path("hits")) != 0);
    char *h = t_slurp(t_path("hits"));
    CHECKF(h && !*h, "narration in the docs:\n%s", h ? h : "");
    free(h);
}

/* circuits ranks skip-trigrams over every id, trained or not: like the
 * probe of scores, it warns (printed and stored with the run) when many
 * ids never occur in the training data. */
TEST(papercut_circuits_warns_unseen_ids) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 1, 2);
    CHECK(t_sh("cd %s && %s circuits --model m1 --db %s > /dev/null 2> %s", dir.s, abin(), db.s,
               t_path("e")) == 0);
    char *s = t_slurp(t_path("e"));
    CHECKF(s && strstr(s, "never occur in its training data") && strstr(s, "skip-trigrams"), "%s",
           s ? s : "");
    free(s);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM run_warnings WHERE message LIKE "
                           "'%never occur in its training data%'") == 1);
}

/* The report: the training table says it shows 12 of 18 evaluations,
 * the card shows the sequence length trained on (not "seq_len 0", the
 * flag's "n_ctx"), and no "No composition scores" stands above a
 * composition picture without saying where the picture comes from. */
TEST(papercut_report_training_card_composition) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), rep = t_pcopy("rep");
    t_tiny_model(dir.s, 1, 2); /* corpus and tokenizer */
    CHECK(t_sh("cd %s && %s train --data s.train.bin --val s.val.bin --tokenizer tok.json --out m "
               "--steps 34 --eval-every 2 --n-layers 2 --d-model 32 --n-heads 4 --d-head 8 "
               "--n-ctx 32 --batch 4 --warmup 2 --db %s >/dev/null 2>&1",
               dir.s, abin(), db.s) == 0);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM train_log") == 18); /* steps 0, 2, ..., 34 */
    CHECK(t_sh("cd %s && %s report --model m --db %s --out %s >/dev/null 2>&1", dir.s, abin(), db.s,
               rep.s) == 0);
    char *h = t_slurp(t_path("rep/index.html"));
    CHECK(h && strstr(h, "12 of the 18 evaluations"));
    CHECK(h && strstr(h, "seq_len 32") && !strstr(h, "seq_len 0"));
    CHECK(h && !strstr(h, "No composition scores (run attnlab circuits).") &&
          strstr(h, "the picture below is computed from the weights"));
    free(h);
}

/* On a busy machine the binary restarts itself with passive OpenMP
 * waiting (spinning threads took the cores: a short command swung from
 * 1.7 to 19.5 s). Forced here with ATTNLAB_OMP_PASSIVE; a policy the user
 * set is kept; the numbers are the same either way. */
TEST(papercut_openmp_wait_policy) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    CHECK(
        t_sh("env -u OMP_WAIT_POLICY ATTNLAB_OMP_PASSIVE=1 %s --version | grep -qx 'OpenMP threads "
             "wait: passive'",
             abin()) == 0);
    CHECK(t_sh("env -u OMP_WAIT_POLICY ATTNLAB_OMP_PASSIVE=0 %s --version | grep -q 'default'",
               abin()) == 0);
    CHECK(t_sh("OMP_WAIT_POLICY=active ATTNLAB_OMP_PASSIVE=1 %s --version | grep -qx 'OpenMP "
               "threads wait: active'",
               abin()) == 0);
    CHECK(t_sh("cd %s && env -u OMP_WAIT_POLICY ATTNLAB_OMP_PASSIVE=1 %s run --model m1 --prompt "
               "'a b c' --json > p1 && env -u OMP_WAIT_POLICY ATTNLAB_OMP_PASSIVE=0 %s run --model "
               "m1 --prompt 'a b c' --json > p0 && cmp -s p0 p1",
               dir, abin(), abin()) == 0);
}

/* The induction task's R defaults to min(50, (n_ctx-1)/2): scores, ablate,
 * patch, paths, attribute and discover run on a model of n_ctx 32 without
 * --probe-r (they refused it at R 50, where sae features adapted), and
 * record the R they used; a given R is still checked. */
TEST(papercut_probe_r_fits_short_context) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 2); /* n_ctx 32 */
    char abl[1200];
    snprintf(abl, sizeof abl, "ablate --each --data %s/s.val.bin --batches 1 --batch 2", dir.s);
    const char *cmds[] = {"patch --n 4",    "paths --n 4", "attribute --n 4 --no-patching",
                          "discover --n 4", "scores",      abl};
    for (int i = 0; i < 6; i++)
        CHECKF(t_sh("cd %s && %s %s --model m2 --db %s > /dev/null 2> %s", dir.s, abin(), cmds[i],
                    db.s, t_path("e")) == 0,
               "%s", cmds[i]);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM runs WHERE status = 'done'") == 6);
    /* the R each used, in its stored options */
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM runs WHERE kind IN ('scores', 'ablate') AND "
                           "json_extract(config_json, '$.probe_r') = 15") == 2);
    CHECK(t_sh("cd %s && %s patch --model m2 --db %s --probe-r 20 2> %s", dir.s, abin(), db.s,
               t_path("e2")) == 1);
    CHECK(t_one_line(t_path("e2"), "exceeds n_ctx 32"));
}
