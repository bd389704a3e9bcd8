/* test_attribute_cli.c -- `attnlab attribute` end to end on tiny trained
 * models, read back with the sqlite3 CLI: the rows of every attribution
 * table with their counts and NULL conventions, the exactness of the
 * attribution as stored (components and path terms sum to the metric),
 * every task (induction, names, file, --data, --prompt), bad input
 * refused with one line and no run, Ctrl-C, and the experiment key.
 *
 * The attribution patching tests (attribute_cli_attrpatch_*) need the
 * real al_attrpatch_run; the others pass with --no-patching or tasks
 * that never patch. */
#define _DEFAULT_SOURCE /* wait4 (proc.h) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/experiment.h"
#include "attnlab/util.h"
#include "proc.h"
#include "test.h"

#define TASK "--probe-r 6 --n 4 --batch 2 --threads 2"

/* The exactness the library promises, checked on the stored numbers:
 * Σ logit_attribution (pos NULL) and Σ path_terms.value are the run's
 * metric within 1e-4 relative (absolute below 1). */
static void check_sums(const char *db, int run, int paths) {
    char q[600];
    snprintf(q, sizeof q,
             "SELECT abs(s - metric) <= 1e-4 * max(1, abs(metric)) FROM attribution_runs, "
             "(SELECT sum(value) AS s FROM logit_attribution WHERE run_id = %d AND pos IS NULL) "
             "WHERE run_id = %d",
             run, run);
    CHECK_SQL(db, q, "1");
    if (!paths) return;
    snprintf(q, sizeof q,
             "SELECT abs(s - metric) <= 1e-4 * max(1, abs(metric)) FROM attribution_runs, "
             "(SELECT sum(value) AS s FROM path_terms WHERE run_id = %d) WHERE run_id = %d",
             run, run);
    CHECK_SQL(db, q, "1");
}

/* ------------------------------------------------------------ rows */

TEST(attribute_cli_induction_rows) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.txt");
    t_tiny_model(dir.s, 2, 20);
    /* L = 2, H = 4: 10 components, 1 + 8 + 16 = 25 terms; T = 2R + 1 = 13,
     * items at t = 7..11 of each of the 4 pairs */
    CHECK(t_sh("%s attribute --model %s/m2 --db %s --no-patching " TASK " > %s 2>/dev/null",
               t_bin(), dir.s, db.s, out.s) == 0);
    CHECK_SQL(db.s, "SELECT kind, status FROM runs", "attribute|done");
    CHECK_SQL(db.s,
              "SELECT task, n_pairs, seq_len, n_items, metric_kind, direction IS NULL, "
              "m_clean IS NULL, seconds_attrpatch IS NULL, length(task_hash), loss > 0 "
              "FROM attribution_runs",
              "induction|4|13|20|logprob|1|1|1|16|1");
    CHECK_SQL(db.s,
              "SELECT count(*), count(pos), count(DISTINCT component), count(DISTINCT pos), "
              "min(pos), max(pos) FROM logit_attribution",
              "60|50|10|5|7|11");
    /* each component's positions hold every item once, 4 per position */
    CHECK_SQL(db.s,
              "SELECT DISTINCT sum(n_items) FROM logit_attribution WHERE pos IS NOT NULL "
              "GROUP BY component",
              "20");
    CHECK_SQL(db.s, "SELECT DISTINCT n_items FROM logit_attribution WHERE pos IS NOT NULL", "4");
    /* per position means, weighted by their items, give the overall mean */
    CHECK_SQL(db.s,
              "SELECT count(*) FROM (SELECT component, sum(value * n_items) / 20.0 AS w "
              "FROM logit_attribution WHERE pos IS NOT NULL GROUP BY component) JOIN "
              "logit_attribution a USING (component) WHERE a.pos IS NULL AND abs(w - "
              "a.value) < 1e-6",
              "10");
    CHECK_SQL(db.s,
              "SELECT kind, count(*), count(layer), count(head), count(src_head), "
              "count(dloss) FROM path_terms GROUP BY kind ORDER BY kind",
              "direct|1|0|0|0|1\nhead|8|8|8|0|8\nvirtual|16|16|16|16|16");
    CHECK_SQL(db.s,
              "SELECT term, layer, head, src_head FROM path_terms WHERE term IN "
              "('1.2', '0.3>1.1') ORDER BY term",
              "0.3>1.1|1|1|3\n1.2|1|2|");
    /* the per-kind totals are their terms' sums */
    CHECK_SQL(db.s,
              "SELECT abs(r.virtual_value - (SELECT sum(value) FROM path_terms WHERE kind = "
              "'virtual')) < 1e-9, abs(r.direct_value - (SELECT value FROM path_terms "
              "WHERE kind = 'direct')) < 1e-12 FROM attribution_runs r",
              "1|1");
    check_sums(db.s, 1, 1);
    CHECK_SQL(db.s, "SELECT count(*), min(layer), max(layer) FROM logit_lens", "3|0|2");
    CHECK_SQL(db.s,
              "SELECT abs(l.loss - r.loss) < 1e-9 FROM logit_lens l, attribution_runs r "
              "WHERE l.layer = 2",
              "1");
    CHECK_SQL(db.s, "SELECT count(*), min(pos), max(pos), count(text) FROM attribution_tokens",
              "13|0|12|13");
    CHECK_SQL(db.s,
              "SELECT (SELECT count(*) FROM attribution_patching) + (SELECT count(*) FROM "
              "attribution_agreement)",
              "0");
    /* the printed summary against the rows */
    char *txt = t_slurp(out.s);
    char *want =
        t_sql(db.s, "SELECT printf('  %-10s %+9.4f %8.4f', component, a.value + 0.0, i.se) FROM "
                    "logit_attribution a JOIN score_intervals i ON i.run_id = a.run_id AND "
                    "i.metric = 'dla:' || a.component AND i.value = a.value WHERE a.pos IS NULL "
                    "ORDER BY abs(a.value) DESC LIMIT 1");
    CHECKF(txt && want && strstr(txt, "top 10 of 10 components") && strstr(txt, want),
           "[%s] not in\n%s", want ? want : "", txt ? txt : "");
    free(want);
    /* its standard error is its interval row's, found by the term's name */
    want = t_sql(db.s, "SELECT printf('  %-10s %+9.4f %8.4f %+9.4f', term, p.value + 0.0, i.se, "
                       "dloss + 0.0) FROM path_terms p JOIN score_intervals i ON i.run_id = "
                       "p.run_id AND i.metric = 'term:' || p.term AND i.value = p.value "
                       "AND i.n_items = 4 ORDER BY abs(dloss) DESC LIMIT 1");
    CHECKF(txt && want && strstr(txt, "top 10 of 25 terms") && strstr(txt, want), "[%s] not in\n%s",
           want ? want : "", txt ? txt : "");
    free(want);
    CHECK(txt && strstr(txt, "  virtual ") && strstr(txt, "%\n") && strstr(txt, "  final "));
    free(txt);
    /* --no-paths: no path_terms, the kind columns NULL */
    CHECK(t_sh("%s attribute --model %s/m2 --db %s --no-paths --no-patching " TASK
               " >/dev/null 2>&1",
               t_bin(), dir.s, db.s) == 0);
    CHECK_SQL(db.s, "SELECT count(*) FROM path_terms WHERE run_id = 2", "0");
    CHECK_SQL(db.s,
              "SELECT direct_value IS NULL, virtual_dloss IS NULL FROM attribution_runs "
              "WHERE run_id = 2",
              "1|1");
    check_sums(db.s, 2, 0);
}

/* 1 layer on plain text (every position scored) and a prompt on 2. */
/* --center-unembed: the run is marked centred where it is stored and
 * printed, and its components still sum to its metric (the mean logit of
 * the answer less the mean logit, not the raw one). */
TEST(attribute_cli_center_unembed) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.json");
    t_tiny_model(dir.s, 2, 20);
    for (int c = 0; c < 2; c++)
        CHECK(t_sh("%s attribute --model %s/m2 --db %s --no-patching %s --json " TASK
                   " > %s 2>/dev/null",
                   t_bin(), dir.s, db.s, c ? "--center-unembed" : "", out.s) == 0);
    char *j = t_slurp(out.s);
    CHECKF(j && strstr(j, "logit of the answer less the mean logit"), "%s", j ? j : "");
    free(j);
    CHECK_SQL(db.s,
              "SELECT group_concat(centred) FROM (SELECT centred FROM attribution_runs "
              "ORDER BY run_id)",
              "0,1");
    /* each run's components (pos NULL: the mean over items) sum to its metric */
    CHECK_SQL(db.s,
              "SELECT group_concat(ok) FROM (SELECT abs(x.metric - (SELECT sum(value) FROM "
              "logit_attribution l WHERE l.run_id = x.run_id AND l.pos IS NULL)) < 1e-4 AS "
              "ok FROM attribution_runs x ORDER BY x.run_id)",
              "1,1");
    CHECK_SQL(db.s, "SELECT count(DISTINCT metric) FROM attribution_runs", "2");
}

TEST(attribute_cli_data_and_prompt) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err");
    t_tiny_model(dir.s, 1, 20);
    t_tiny_model(dir.s, 2, 20);
    int rc = t_sh("%s attribute --model %s/m1 --db %s --data %s/s.val.bin --windows 5 --threads 2 "
                  ">/dev/null 2>%s",
                  t_bin(), dir.s, db.s, dir.s, err.s);
    CHECK(rc == 0);
    /* the note: no attribution patching without pairs */
    CHECK(t_one_line(err.s, "no attribution patching on --data"));
    CHECK_SQL(db.s,
              "SELECT task, n_pairs, seq_len, n_items, metric_kind, direction IS NULL FROM "
              "attribution_runs",
              "data|5|32|160|logprob|1");
    /* 1 layer: embed, pos, 4 heads; every one of 32 positions has 5 items */
    CHECK_SQL(db.s,
              "SELECT count(*), count(pos), count(DISTINCT component) FROM "
              "logit_attribution",
              "198|192|6");
    CHECK_SQL(db.s, "SELECT kind, count(*) FROM path_terms GROUP BY kind ORDER BY kind",
              "direct|1\nhead|4");
    CHECK_SQL(db.s, "SELECT virtual_value IS NULL, virtual_dloss FROM attribution_runs", "0|0.0");
    CHECK_SQL(db.s, "SELECT count(*) FROM logit_lens", "2");
    CHECK_SQL(db.s, "SELECT count(*) FROM attribution_tokens", "32");
    check_sums(db.s, 1, 1);
    /* a prompt: one sequence, items at every position but the last */
    rc = t_sh("%s attribute --model %s/m2 --db %s --prompt 'Once upon a time there was a cat' "
              "--no-patching --threads 2 >/dev/null 2>%s",
              t_bin(), dir.s, db.s, err.s);
    CHECK(rc == 0);
    long T = t_sql_long(db.s, "SELECT seq_len FROM attribution_runs WHERE run_id = 2");
    CHECK(T >= 2 && T <= 32);
    char q[300], want[64];
    snprintf(q, sizeof q,
             "SELECT task, n_pairs, n_items, (SELECT count(*) FROM attribution_tokens "
             "WHERE run_id = 2) FROM attribution_runs WHERE run_id = 2");
    snprintf(want, sizeof want, "prompt|1|%ld|%ld", T, T);
    CHECK_SQL(db.s, q, want);
    CHECK_SQL(db.s, "SELECT count(*) FROM path_terms WHERE run_id = 2", "25");
    check_sums(db.s, 2, 1);
    /* the prompt's tokens as text, round trip through the tokenizer */
    CHECK_SQL(db.s,
              "SELECT substr(group_concat(text, ''), 1, 9) FROM (SELECT text FROM "
              "attribution_tokens WHERE run_id = 2 ORDER BY pos)",
              "Once␣upon");
}

/* names and a pair file: the tasks patch makes, attributed. */
TEST(attribute_cli_pair_tasks) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err");
    t_tiny_model(dir.s, 2, 20);
    CHECK(t_sh("%s attribute --model %s/m2 --db %s --task names --n 3 --no-patching --threads 2 "
               ">/dev/null 2>%s",
               t_bin(), dir.s, db.s, err.s) == 0);
    CHECK_SQL(db.s, "SELECT task, n_pairs, n_items, metric_kind FROM attribution_runs",
              "names|3|3|logit_diff");
    check_sums(db.s, 1, 1);
    t_write("p.jsonl", "{\"clean\": \"qzxj\", \"corrupted\": \"qzyj\", \"answer\": \" the\", "
                       "\"wrong\": \" a\"}\n{\"clean\": \"qzxjq\", \"corrupted\": \"qzyjq\", "
                       "\"answer\": \" the\", \"wrong\": \" a\"}\n");
    t_pbuf pp = t_pcopy("p.jsonl");
    int rc = t_sh("%s attribute --model %s/m2 --db %s --task file --pairs %s --no-patching "
                  "--threads 2 >/dev/null 2>%s",
                  t_bin(), dir.s, db.s, pp.s, err.s);
    CHECK(rc == 0);
    CHECK_SQL(db.s,
              "SELECT task, n_pairs, n_items, metric_kind, length(task_hash) FROM "
              "attribution_runs WHERE run_id = 2",
              "file|2|2|logit_diff|16");
    check_sums(db.s, 2, 1);
    /* pair 0's tokens label the positions */
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM attribution_tokens WHERE run_id = 2") ==
          t_sql_long(db.s, "SELECT count(*) FROM attribution_tokens WHERE run_id = 2 AND pos < "
                           "(SELECT seq_len FROM attribution_runs WHERE run_id = 2)"));
}

/* ------------------------------------------------------------ attrpatch */

/* Needs the real al_attrpatch_run: every grid cell stored, the
 * agreement per grid, the printed list. */
TEST(attribute_cli_attrpatch_rows) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.txt"), err = t_pcopy("err");
    t_tiny_model(dir.s, 2, 20);
    t_tiny_model(dir.s, 1, 20);
    int rc = t_sh("%s attribute --model %s/m2 --db %s " TASK " > %s 2>%s", t_bin(), dir.s, db.s,
                  out.s, err.s);
    char *msg = t_slurp(err.s);
    CHECKF(rc == 0, "exit %d: %s", rc, msg ? msg : "");
    free(msg);
    /* head (2 x 4), head_pos (8 x 13), edges: 6 senders x (3 x 4 + direct) */
    CHECK_SQL(db.s,
              "SELECT grid, count(*), count(layer), count(pos), count(sender), "
              "count(receiver_head), count(actual) FROM attribution_patching GROUP BY grid "
              "ORDER BY grid",
              "edge|78|0|0|78|72|78\nhead|8|8|0|0|0|8\nhead_pos|104|104|104|0|0|104");
    CHECK_SQL(db.s, "SELECT DISTINCT direction FROM attribution_patching", "denoise");
    /* every head and edge estimate's interval, found by its row's keys */
    CHECK_SQL(db.s,
              "SELECT a.grid, count(i.se) FROM attribution_patching a JOIN score_intervals i ON "
              "i.run_id = a.run_id AND i.value = a.estimate AND ((a.grid = 'head' AND i.metric = "
              "'attrpatch_head' AND i.layer = a.layer AND i.head = a.head) OR (a.grid = 'edge' "
              "AND i.metric = 'attrpatch_edge_' || a.channel AND i.layer IS "
              "coalesce(a.receiver_layer, -1) AND i.head IS coalesce(a.receiver_head, -1) AND "
              "i.pos = CASE a.sender WHEN 'embed' THEN 0 WHEN 'pos' THEN 1 ELSE 2 + "
              "CAST(substr(a.sender, 3) AS INT) END)) "
              "GROUP BY 1 ORDER BY 1",
              "edge|78\nhead|8");
    CHECK_SQL(db.s,
              "SELECT grid, n > 0, top5 BETWEEN 0 AND 5 FROM attribution_agreement ORDER "
              "BY grid",
              "edge|1|1\nhead|1|1\nhead_pos|1|1");
    CHECK_SQL(db.s,
              "SELECT direction, m_clean IS NOT NULL, seconds_attrpatch IS NOT NULL, "
              "seconds_patch IS NOT NULL FROM attribution_runs",
              "denoise|1|1|1");
    char *txt = t_slurp(out.s);
    CHECK(txt && strstr(txt, "attribution patching (denoising)") && strstr(txt, "pearson") &&
          strstr(txt, "estimates by |estimate|"));
    free(txt);
    /* --no-compare: estimates only; noising; a 1-layer model has direct edges only */
    CHECK(t_sh("%s attribute --model %s/m1 --db %s --no-compare --direction noise " TASK
               " >/dev/null 2>&1",
               t_bin(), dir.s, db.s) == 0);
    CHECK_SQL(db.s,
              "SELECT grid, count(*), count(actual) FROM attribution_patching WHERE run_id "
              "= 2 GROUP BY grid ORDER BY grid",
              "edge|6|0\nhead|4|0\nhead_pos|52|0");
    CHECK_SQL(db.s, "SELECT count(*) FROM attribution_agreement WHERE run_id = 2", "0");
    CHECK_SQL(db.s,
              "SELECT direction, seconds_patch IS NULL FROM attribution_runs WHERE run_id = "
              "2",
              "noise|1");
}

/* ------------------------------------------------------------ bad input */

TEST(attribute_cli_bad_input) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err");
    t_tiny_model(dir.s, 2, 5);
    const char *b = t_bin();
    CHECK(t_sh("mkdir -p %s/notok && cp %s/m2/model.safetensors %s/m2/config.json %s/notok/", dir.s,
               dir.s, dir.s, dir.s) == 0);
    char val[1100], longp[400] = "";
    snprintf(val, sizeof val, "%s/s.val.bin", dir.s);
    for (int i = 0; i < 12; i++) strcat(longp, "the cat sat on a mat ");
    struct {
        const char *args, *want;
        int rc;
    } cases[] = {
        {"--task bogus", "unknown patching task 'bogus'", 2},
        {"--task names --data VAL", "give one task", 2},
        {"--pairs p.jsonl --prompt hello", "give one task", 2},
        {"--data VAL --windows 0", "--windows must be 1..1000000", 2},
        {"--direction sideways", "unknown patching direction 'sideways'", 2},
        {"--show -1", "--show must be >= 0", 2},
        {"--batch 0", "batch", 2},
        {"--prompt 'LONG'", "must be 2 to n_ctx + 1 = 33", 1},
        {"--prompt x", "must be 2 to n_ctx + 1 = 33", 1},
        {"--data no/such.bin", "no/such.bin", 1},
        {"--task file --pairs no/such.jsonl", "no/such.jsonl", 1},
        {"--task file", "needs a JSONL pair file (--pairs FILE)", 2},
        {"--probe-r 20", "exceeds n_ctx 32", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1200];
        const char *v = strstr(cases[i].args, "VAL"), *l = strstr(cases[i].args, "LONG");
        if (v)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(v - cases[i].args), cases[i].args, val,
                     v + 3);
        else if (l)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(l - cases[i].args), cases[i].args, longp,
                     l + 4);
        else
            snprintf(args, sizeof args, "%s", cases[i].args);
        int rc = t_sh("%s attribute --model %s/m2 --db %s %s >/dev/null 2>%s", b, dir.s, db.s, args,
                      err.s);
        CHECKF(rc == cases[i].rc, "%s: exit %d, want %d", cases[i].args, rc, cases[i].rc);
        CHECK(t_one_line(err.s, cases[i].want));
    }
    CHECK(t_sh("%s attribute --model %s/notok --db %s --prompt 'a cat' >/dev/null 2>%s", b, dir.s,
               db.s, err.s) == 1);
    CHECK(t_one_line(err.s, "--prompt needs the model's tokenizer"));
    /* none of them began a run, nor left the database it would have made */
    CHECK(!al_file_exists(db.s));
}

/* Three layers end to end: the path expansion (1 + 12 + 16·3 + 1 = 62
 * terms at 4 heads) stored, summing to the metric, in the text and
 * --json outputs, drawn (heatmap --what terms) and in the report; and
 * attribution patching (its edges: path patching's 202 paths of 3 layers
 * of 4 heads, beside 12 heads and 12 x 13 head-positions), with no note. */
TEST(attribute_cli_three_layers) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err"), js = t_pcopy("o.json"),
           txt = t_pcopy("o.txt"), png = t_pcopy("terms.png"), rep = t_pcopy("rep");
    t_tiny_model(dir.s, 3, 5);
    /* one batch: no progress line beside the note */
    CHECK(t_sh("%s attribute --model %s/m3 --db %s --probe-r 6 --n 4 --batch 4 --json >%s 2>%s",
               t_bin(), dir.s, db.s, js.s, err.s) == 0);
    /* nothing to note but the tiny vocabulary's unseen ids (the probe) */
    CHECK(t_sh("! grep -v 'never occur in the model' %s", err.s) == 0);
    CHECK_SQL(db.s, "SELECT status FROM runs", "done");
    CHECK_SQL(db.s,
              "SELECT (SELECT count(*) FROM path_terms), (SELECT count(*) FROM "
              "attribution_patching), (SELECT count(*) FROM logit_lens), (SELECT count(*) "
              "FROM logit_attribution WHERE pos IS NULL)",
              "62|370|4|14");
    CHECK_SQL(db.s,
              "SELECT count(*), count(receiver_layer), max(receiver_layer) FROM "
              "attribution_patching WHERE grid = 'edge'",
              "202|192|2");
    CHECK_SQL(db.s,
              "SELECT kind, count(*), count(layer), count(src_head) FROM path_terms GROUP BY "
              "kind ORDER BY kind",
              "direct|1|0|0\nhead|12|12|0\nvirtual|49|48|48");
    /* the sender over all layers (l0·H + h0), the receiver's layer and head */
    CHECK_SQL(db.s, "SELECT layer, head, src_head FROM path_terms WHERE term = '1.2>2.3'", "2|3|6");
    CHECK_SQL(db.s, "SELECT kind, layer IS NULL FROM path_terms WHERE term = 'chains>=3'",
              "virtual|1");
    CHECK_SQL(db.s, "SELECT direction IS NULL, virtual_dloss IS NOT NULL FROM attribution_runs",
              "0|1");
    check_sums(db.s, 1, 1);
    char *j = t_slurp(js.s);
    CHECKF(j && strstr(j, "\"chains>=3\"") && strstr(j, "\"0.3>2.1\"") && strstr(j, "\"virtual\""),
           "%s", j ? j : "");
    free(j);
    CHECK(t_sh("%s attribute --model %s/m3 --db %s --probe-r 6 --n 4 --batch 4 >%s 2>/dev/null",
               t_bin(), dir.s, db.s, txt.s) == 0);
    char *o = t_slurp(txt.s);
    CHECKF(o && strstr(o, "top 10 of 62 terms by |dloss|") &&
               strstr(o, "of it, the chains of three or more (one term, chains>=3): value "),
           "%s", o ? o : "");
    free(o);
    CHECK(t_sh("%s heatmap --model %s/m3 --db %s --what terms --out %s >/dev/null 2>&1", t_bin(),
               dir.s, db.s, png.s) == 0 &&
          al_file_exists(png.s));
    CHECK(t_sh("%s report --model %s/m3 --db %s --out %s >/dev/null 2>&1", t_bin(), dir.s, db.s,
               rep.s) == 0);
    char *h = t_slurp(t_path("rep/index.html"));
    CHECKF(h && strstr(h, "<code>chains&gt;=3</code> for every chain of three or more heads") &&
               strstr(h, "virtual terms together") && strstr(h, "m3-terms-induction-2.png"),
           "report without the path expansion");
    free(h);
}

/* ------------------------------------------------------------ signals */

TEST(attribute_cli_sigint) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err"), m = t_pcopy("m2"),
           val = t_pcopy("s.val.bin");
    t_tiny_model(dir.s, 2, 5);
    /* thousands of windows with paths: seconds of work on one thread */
    pid_t p = t_spawn(NULL, err.s,
                      "attribute --model %s --db %s --data %s --windows 4000 "
                      "--no-patching --threads 1",
                      m.s, db.s, val.s);
    CHECK(t_wait_running(db.s));
    t_sleep(0.3);
    kill(p, SIGINT);
    int rc = t_wait(p, NULL);
    CHECKF(rc == 130, "exit %d", rc);
    CHECK(t_sh("tail -n 1 %s | grep -qx 'attnlab: interrupted'", err.s) == 0);
    CHECK_SQL(db.s, "SELECT kind, status, error FROM runs", "attribute|failed|interrupted");
    CHECK_SQL(db.s,
              "SELECT (SELECT count(*) FROM attribution_runs) + (SELECT count(*) FROM "
              "logit_attribution) + (SELECT count(*) FROM path_terms) + (SELECT count(*) "
              "FROM logit_lens) + (SELECT count(*) FROM attribution_tokens)",
              "0");
}

/* ------------------------------------------------------------ experiment */

static const char exp_json[] = T_EXP_TINY_2L(
    "attr") " \"analyses\": {\n"
            "   \"attribute\": [{\"task\": \"induction\", \"probe_r\": 6, \"n\": 4, \"no_patching\": true},\n"
            "                 {\"data\": true, \"windows\": 3}]},\n"
            " \"pictures\": false, \"report\": false}\n";

TEST(attribute_cli_experiment) {
    t_pbuf js = t_pcopy("x.json"), out = t_pcopy("out"), log = t_pcopy("log");
    t_write("x.json", exp_json);
    char db[1200];
    snprintf(db, sizeof db, "%s/results.db", out.s);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), js.s, out.s, log.s) == 0);
    char *txt = t_slurp(log.s);
    CHECKF(txt && strstr(txt, "attribute (induction): model two") &&
               strstr(txt, "attribute (data): model two") && strstr(txt, "$ attnlab attribute"),
           "%s", txt ? txt : "");
    free(txt);
    CHECK_SQL(db,
              "SELECT r.kind, r.status, a.task, a.n_pairs FROM runs r JOIN attribution_runs a "
              "USING (run_id) ORDER BY run_id",
              "attribute|done|induction|4\n"
              "attribute|done|data|3");
    CHECK_SQL(db, "SELECT count(DISTINCT run_id) FROM path_terms", "2");
    /* again: both reused, no new runs */
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), js.s, out.s, log.s) == 0);
    CHECK_SQL(db, "SELECT count(*) FROM runs WHERE kind = 'attribute'", "2");
}

TEST(attribute_cli_experiment_keys_checked) {
    al_experiment *x = NULL;
    al_err e = {{0}};
    const char *p = t_write("good.json", exp_json);
    CHECK_OK(al_exp_load(p, &x, &e), &e);
    if (x) {
        CHECK(x->n_analyses == 2 && strcmp(x->an[0].kind, "attribute") == 0);
        CHECKF(strcmp(x->an[1].label, "attribute (data)") == 0, "%s", x->an[1].label);
        CHECKF(strstr(x->an[1].opts, "\"data\":true") != NULL, "%s", x->an[1].opts);
        al_exp_free(x);
    }
    struct {
        const char *from, *to, *want;
    } cases[] = {
        {"\"windows\": 3", "\"windoes\": 3",
         "analyses.attribute[1].windoes: unknown key (see 'attnlab help attribute')"},
        {"\"data\": true", "\"data\": \"v.bin\"",
         "analyses.attribute[1].data: must be true or "
         "false"},
        {"\"no_patching\": true", "\"model\": \"x\"",
         "analyses.attribute[0].model: is set by the experiment itself"},
        {"\"task\": \"induction\", ", "\"pairs\": \"no/such.jsonl\", ",
         "analyses.attribute[0].pairs: no such file: no/such.jsonl"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        t_exp_refused(exp_json, cases[i].from, cases[i].to, cases[i].want);
}
