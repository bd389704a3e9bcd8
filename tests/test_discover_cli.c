/* test_discover_cli.c -- `attnlab discover` end to end on tiny trained
 * models, read back with the sqlite3 CLI (circuit_runs, circuit_edges,
 * the circuit file), bad input refused with one line and no run,
 * Ctrl-C, the experiment key; and the circuit file's format and parser
 * (circuit_file.h): the round trip and every refusal. */
#define _DEFAULT_SOURCE /* wait4 (proc.h) */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/circuit_file.h"
#include "attnlab/discover.h"
#include "attnlab/experiment.h"
#include "attnlab/util.h"
#include "proc.h"
#include "test.h"

#define TASK "--probe-r 6 --n 4 --batch 2 --threads 2"

/* The kept set of a file against the kept column of one circuit's rows. */
static void check_file_matches(const char *db, const char *file, int L, int H, const char *where) {
    int n = al_graph_n_edges(L, H);
    unsigned char kept[400];
    al_err e = {{0}};
    CHECK(n > 0 && n <= 400);
    CHECK_OK(al_circuit_load(file, L, H, kept, &e), &e);
    char q[300], *want, got[420];
    snprintf(q, sizeof q,
             "SELECT group_concat(kept, '') FROM (SELECT kept FROM circuit_edges WHERE "
             "%s ORDER BY edge)",
             where);
    want = t_sql(db, q);
    for (int k = 0; k < n; k++) got[k] = (char)('0' + kept[k]);
    got[n] = 0;
    CHECKF(want && strcmp(want, got) == 0, "file %s\n  rows %s", got, want ? want : "(error)");
    free(want);
}

/* ------------------------------------------------------------ rows */

TEST(discover_cli_acdc_sweep_rows) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.txt");
    t_tiny_model(dir.s, 2, 20);
    /* L = 2, H = 4: 48 input + 48 composition + 10 output edges */
    int rc = t_sh("%s discover --model %s/m2 --db %s --sweep 0.1,0,0.001 " TASK " > %s 2>/dev/null",
                  t_bin(), dir.s, db.s, out.s);
    CHECK(rc == 0);
    CHECK_SQL(db.s, "SELECT kind, status FROM runs", "discover|done");
    CHECK_SQL(db.s,
              "SELECT tau, method, metric, task, n_edges, recover IS NULL, length(task_hash), "
              "evals > 0 FROM circuit_runs ORDER BY tau",
              "0.0|acdc|kl|induction|106|1|16|1\n0.001|acdc|kl|induction|106|1|16|1\n"
              "0.01|acdc|kl|induction|106|1|16|1\n0.1|acdc|kl|induction|106|1|16|1");
    /* every circuit: every edge once, its kept edges = n_kept */
    CHECK_SQL(db.s,
              "SELECT count(*) FROM circuit_runs c WHERE n_edges = (SELECT count(DISTINCT edge) "
              "FROM circuit_edges WHERE run_id = c.run_id AND tau = c.tau) AND n_kept = "
              "(SELECT sum(kept) FROM circuit_edges WHERE run_id = c.run_id AND tau = c.tau)",
              "4");
    CHECK_SQL(db.s, "SELECT count(*) FROM circuit_edges", "424");
    /* names: the logits' edges have no receiver and channel direct */
    CHECK_SQL(db.s,
              "SELECT count(*), count(receiver_layer), min(channel), max(channel) FROM "
              "circuit_edges WHERE tau = 0.01 AND edge >= 96",
              "10|0|direct|direct");
    CHECK_SQL(db.s,
              "SELECT sender, receiver_layer, receiver_head, channel FROM circuit_edges WHERE "
              "tau = 0.01 AND edge IN (1, 64, 105) ORDER BY edge",
              "pos|0|0|q\n0.1|1|1|k\n1.3|||direct");
    /* a smaller tau never keeps fewer edges here (tau 0 keeps what matters at all) */
    CHECK_SQL(db.s,
              "SELECT (SELECT n_kept FROM circuit_runs WHERE tau = 0) >= (SELECT n_kept FROM "
              "circuit_runs WHERE tau = 0.1)",
              "1");
    /* the file: the main circuit (tau 0.01), same kept set as its rows */
    char file[1200];
    snprintf(file, sizeof file, "%s/m2/circuit-induction-acdc.json", dir.s);
    check_file_matches(db.s, file, 2, 4, "tau = 0.01");
    char *txt = t_slurp(file);
    long kept = t_sql_long(db.s, "SELECT n_kept FROM circuit_runs WHERE tau = 0.01");
    char want[64];
    snprintf(want, sizeof want, "\"n_edges\":\t%ld,", kept);
    CHECKF(txt && strstr(txt, "\"format\":\t\"attnlab-circuit\"") && strstr(txt, want) &&
               strstr(txt, "\"tau\":\t0.01,") && strstr(txt, "\"recover\":\tnull"),
           "%s", txt ? txt : "");
    free(txt);
    /* printed: the curve with all four taus, and the file's path */
    txt = t_slurp(out.s);
    CHECKF(txt && strstr(txt, "sweep (tau -> kept edges -> faithfulness)") &&
               strstr(txt, "\n  0.001 ") && strstr(txt, "\n  0.1 ") &&
               strstr(txt, "circuit file ") && strstr(txt, "edges kept"),
           "%s", txt ? txt : "");
    free(txt);
    /* no temporary file left beside it */
    CHECK(t_sh("ls %s/m2 | grep -q tmp", dir.s) != 0);
}

TEST(discover_cli_eap_one_layer) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("cdir");
    t_tiny_model(dir.s, 1, 20);
    /* L = 1: 24 input + 6 output edges; the file into --out (made) */
    CHECK(t_sh("%s discover --model %s/m1 --db %s --method eap --metric logit_diff --recover 0.5 "
               "--out %s/sub " TASK " >/dev/null 2>&1",
               t_bin(), dir.s, db.s, out.s) == 0);
    CHECK_SQL(db.s,
              "SELECT method, metric, tau IS NULL, recover, n_edges, faithfulness IS NOT NULL "
              "OR m_clean = m_corr FROM circuit_runs",
              "eap|logit_diff|1|0.5|30|1");
    CHECK_SQL(db.s,
              "SELECT count(*), count(tau), count(score), sum(kept) = (SELECT n_kept FROM "
              "circuit_runs) FROM circuit_edges",
              "30|0|30|1");
    char file[1200];
    snprintf(file, sizeof file, "%s/sub/circuit-induction-eap.json", out.s);
    check_file_matches(db.s, file, 1, 4, "1");
    /* again: the file replaced, still one file, no temporary */
    CHECK(t_sh("%s discover --model %s/m1 --db %s --method eap --out %s/sub " TASK
               " >/dev/null 2>&1",
               t_bin(), dir.s, db.s, out.s) == 0);
    CHECK(t_sh("test \"$(ls %s/sub)\" = circuit-induction-eap.json", out.s) == 0);
    check_file_matches(db.s, file, 1, 4, "run_id = 2");
}

/* The reference implementation's choices from the command line: the run
 * records them in its config, and at tau 0 the rule decides the pos edges
 * (growth exactly 0): kept under lt, removed under le. */
TEST(discover_cli_reference_options) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("c");
    t_tiny_model(dir.s, 2, 20);
    for (int lt = 0; lt < 2; lt++)
        CHECK(t_sh("%s discover --model %s/m2 --db %s --tau 0 --acdc-order latest-first "
                   "--acdc-remove %s --out %s " TASK " >/dev/null 2>&1",
                   t_bin(), dir.s, db.s, lt ? "lt" : "le", out.s) == 0);
    CHECK_SQL(db.s,
              "SELECT group_concat(json_extract(config_json, '$.acdc_order') || '/' || "
              "json_extract(config_json, '$.acdc_remove'), ' ') FROM runs",
              "latest-first/le latest-first/lt");
    /* the pos edges (4 heads x 2 layers x q, k, v, and the logits: 25, every receiver alive
     * here): none kept under le, all under lt */
    CHECK_SQL(db.s,
              "SELECT group_concat(k, ' ') FROM (SELECT sum(e.kept) AS k FROM circuit_edges e "
              "WHERE e.sender = 'pos' GROUP BY e.run_id ORDER BY e.run_id)",
              "0 25");
}

/* ------------------------------------------------------------ bad input */

TEST(discover_cli_bad_input) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err");
    t_tiny_model(dir.s, 2, 5);
    t_tiny_model(dir.s, 3, 5);
    const char *b = t_bin();
    t_write("afile", "x");
    t_pbuf afile = t_pcopy("afile");
    char outfile[1200];
    snprintf(outfile, sizeof outfile, "--out %s/sub", afile.s);
    struct {
        const char *args, *want;
        int rc;
    } cases[] = {
        {"--tau -1", "--tau must be a finite number >= 0 (got -1)", 2},
        {"--tau nan", "--tau: 'nan' is not a finite number", 2},
        {"--tau inf", "--tau: 'inf' is not a finite number", 2},
        {"--tau -inf", "--tau: '-inf' is not a finite number", 2},
        {"--sweep 0.1,x", "--sweep: 'x' is not a finite number >= 0", 2},
        {"--sweep 0.1,-2", "--sweep: '-2' is not a finite number >= 0", 2},
        {"--sweep 0.1,nan", "--sweep: 'nan' is not a finite number >= 0", 2},
        {"--sweep 0.1,,0.2", "--sweep: '' is not a number", 2},
        {"--sweep 0.1,0.1", "--sweep: 0.1 is listed twice", 2},
        {"--method eap --sweep 0.1", "--sweep is for --method acdc", 2},
        {"--method greedy", "unknown discovery method 'greedy' (known: acdc, eap)", 2},
        {"--metric l2", "unknown discovery metric 'l2' (known: kl, logit_diff)", 2},
        {"--method eap --recover 2", "0 <= recover <= 1", 2},
        {"--show -1", "--show must be >= 0", 2},
        {"--acdc-order last", "unknown ACDC sender order 'last' (known: embed-first, latest-first)",
         2},
        {"--acdc-remove lte", "unknown ACDC removal rule 'lte' (known: le, lt)", 2},
        {"--task bogus", "unknown patching task 'bogus'", 2},
        {"--probe-r 20", "exceeds n_ctx 32", 1},
        {outfile, "afile", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = t_sh("%s discover --model %s/m2 --db %s %s >/dev/null 2>%s", b, dir.s, db.s,
                      cases[i].args, err.s);
        CHECKF(rc == cases[i].rc, "%s: exit %d, want %d", cases[i].args, rc, cases[i].rc);
        CHECK(t_one_line(err.s, cases[i].want));
    }
    /* (3 layers run: test_discover_deep.c) none began a run, nor left the
     * database it would have made */
    CHECK(!al_file_exists(db.s));
    CHECK(t_sh("ls %s/m2 | grep -q circuit-", dir.s) != 0);
}

/* ------------------------------------------------------------ signals */

TEST(discover_cli_sigint) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err"), m = t_pcopy("m2");
    t_tiny_model(dir.s, 2, 5);
    /* 2000 pairs at tau 0, one thread: seconds of evaluations */
    t_pbuf out = t_pcopy("circ-out");
    pid_t p = t_spawn(NULL, err.s,
                      "discover --model %s --db %s --n 2000 --probe-r 12 --tau 0 "
                      "--threads 1 --out %s",
                      m.s, db.s, out.s);
    CHECK(t_wait_running(db.s));
    t_sleep(0.3);
    kill(p, SIGINT);
    int rc = t_wait(p, NULL);
    CHECKF(rc == 130, "exit %d", rc);
    CHECK(t_sh("tail -n 1 %s | grep -qx 'attnlab: interrupted'", err.s) == 0);
    CHECK_SQL(db.s, "SELECT kind, status, error FROM runs", "discover|failed|interrupted");
    CHECK_SQL(db.s,
              "SELECT (SELECT count(*) FROM circuit_runs) + (SELECT count(*) FROM "
              "circuit_edges)",
              "0");
    CHECK(t_sh("ls %s | grep -q circuit-", m.s) != 0);
    CHECK(t_sh("test -e %s", out.s) != 0); /* no empty --out folder left */
}

/* ------------------------------------------------------------ experiment */

static const char exp_json[] = T_EXP_TINY_2L(
    "disc") " \"analyses\": {\n"
            "   \"discover\": [{\"task\": \"induction\", \"probe_r\": 6, \"n\": 4, \"sweep\": \"0.001,0.1\"},\n"
            "                {\"method\": \"eap\", \"probe_r\": 6, \"n\": 4}]},\n"
            " \"pictures\": false, \"report\": false}\n";

TEST(discover_cli_experiment) {
    t_pbuf js = t_pcopy("x.json"), out = t_pcopy("out"), log = t_pcopy("log");
    t_write("x.json", exp_json);
    char db[1200];
    snprintf(db, sizeof db, "%s/results.db", out.s);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), js.s, out.s, log.s) == 0);
    char *txt = t_slurp(log.s);
    CHECKF(txt && strstr(txt, "discover (induction, acdc): model two") &&
               strstr(txt, "discover (induction, eap): model two") &&
               strstr(txt, "$ attnlab discover"),
           "%s", txt ? txt : "");
    free(txt);
    CHECK_SQL(db,
              "SELECT r.kind, r.status, c.method, count(*) FROM runs r JOIN circuit_runs c "
              "USING (run_id) GROUP BY run_id ORDER BY run_id",
              "discover|done|acdc|3\ndiscover|done|eap|1");
    char f[1300];
    snprintf(f, sizeof f, "%s/models/two/circuit-induction-acdc.json", out.s);
    CHECK(al_file_exists(f));
    snprintf(f, sizeof f, "%s/models/two/circuit-induction-eap.json", out.s);
    CHECK(al_file_exists(f));
    /* again: reused, no new runs */
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), js.s, out.s, log.s) == 0);
    CHECK_SQL(db, "SELECT count(*) FROM runs WHERE kind = 'discover'", "2");
}

TEST(discover_cli_experiment_keys_checked) {
    al_experiment *x = NULL;
    al_err e = {{0}};
    const char *p = t_write("good.json", exp_json);
    CHECK_OK(al_exp_load(p, &x, &e), &e);
    if (x) {
        CHECK(x->n_analyses == 2 && strcmp(x->an[0].kind, "discover") == 0);
        CHECKF(strstr(x->an[0].opts, "\"sweep\":\"0.001,0.1\"") != NULL, "%s", x->an[0].opts);
        al_exp_free(x);
    }
    struct {
        const char *from, *to, *want;
    } cases[] = {
        {"\"n\": 4}", "\"n\": 4, \"sweeep\": 1}",
         "analyses.discover[1].sweeep: unknown key (see 'attnlab help discover')"},
        {"\"n\": 4}", "\"n\": 4, \"out\": \"x\"}",
         "analyses.discover[1].out: is set by the experiment itself"},
        {"\"sweep\": \"0.001,0.1\"", "\"sweep\": [0.1]", "analyses.discover[0].sweep"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        t_exp_refused(exp_json, cases[i].from, cases[i].to, cases[i].want);
}

/* ------------------------------------------------------------ the file */

/* Format then parse: the same kept set, for random circuits of both
 * graph shapes (and the empty and the full circuit). */
TEST(circuit_file_round_trip) {
    al_rng r;
    al_rng_seed(&r, 7);
    for (int L = 1; L <= 2; L++)
        for (int rep = 0; rep < 12; rep++) {
            int H = 1 + (int)al_rng_below(&r, 8), n = al_graph_n_edges(L, H);
            unsigned char *kept = calloc((size_t)n, 1), *back = calloc((size_t)n, 1);
            double *score = calloc((size_t)n, sizeof *score);
            CHECK(kept && back && score);
            if (!kept || !back || !score) return;
            for (int k = 0; k < n; k++) {
                kept[k] = rep == 0 ? 0 : rep == 1 ? 1 : al_rng_below(&r, 3) == 0;
                score[k] = k % 5 == 0 ? NAN : al_rng_normal(&r);
                back[k] = 7;
            }
            al_circuit_info info = {"ab", "induction", "acdc", "kl", 0.01, NAN, 0.5, 0.1, 3};
            char *text = NULL;
            al_err e = {{0}};
            CHECK_OK(al_circuit_format(&info, L, H, kept, score, &text, &e), &e);
            CHECK_OK(al_circuit_parse(text, text ? strlen(text) : 0, L, H, back, &e), &e);
            CHECKF(memcmp(kept, back, (size_t)n) == 0, "L %d H %d rep %d", L, H, rep);
            free(text);
            free(kept);
            free(back);
            free(score);
        }
}

#define HDR "{\"format\": \"attnlab-circuit\", \"version\": 1, "
#define E(s, r, c)                                                                                 \
    "{\"sender\": \"" s "\", \"receiver\": \"" r "\", \"channel\": \"" c "\", \"score\": 0.5}"

/* Each refusal: one line, the wanted words, nothing assigned. A 2-layer
 * graph of 8 heads. */
TEST(circuit_file_refusals) {
    struct {
        const char *text, *want;
    } cases[] = {
        {"not json", "invalid JSON at line 1"},
        {HDR "\"n_edges\": 0, \"edges\": []} x", "invalid JSON"},
        {"[1, 2]", "must be a JSON object"},
        {"{\"version\": 1, \"n_edges\": 0, \"edges\": []}", "missing \"format\""},
        {"{\"format\": \"attnlab-mask\", \"version\": 1, \"n_edges\": 0, \"edges\": []}",
         "format is \"attnlab-mask\", not \"attnlab-circuit\""},
        {"{\"format\": 3, \"version\": 1, \"n_edges\": 0, \"edges\": []}",
         "format is not a string"},
        {"{\"format\": \"attnlab-circuit\", \"n_edges\": 0, \"edges\": []}", "missing \"version\""},
        {"{\"format\": \"attnlab-circuit\", \"version\": 2, \"n_edges\": 0, \"edges\": []}",
         "circuit file version unknown; this attnlab reads version 1"},
        {HDR "\"edges\": []}", "missing \"n_edges\""},
        {HDR "\"n_edges\": 1.5, \"edges\": []}", "n_edges must be an integer 0..306"},
        {HDR "\"n_edges\": 0}", "missing \"edges\""},
        {HDR "\"n_edges\": 0, \"edges\": {}}", "\"edges\" must be an array"},
        {HDR "\"n_edges\": 2, \"edges\": [" E("0.1", "1.2", "k") "]}",
         "1 edges listed, n_edges says 2"},
        {HDR "\"n_edges\": 0, \"edges\": [" E("0.1", "1.2", "k") "]}",
         "1 edges listed, n_edges says 0"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("0.1", "1.9", "k") "]}",
         "edges[0]: head 1.9 is not in the model (8 heads)"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("2.1", "logits", "direct") "]}",
         "edges[0]: layer 2 is not in the model (2 layers)"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("1.2", "0.3", "q") "]}",
         "edges[0]: 1.2 -> 0.3 (channel q) is not an edge of the graph"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("embed", "logits", "k") "]}",
         "embed -> logits (channel k) is not an edge of the graph"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("embed", "1.1", "direct") "]}",
         "is not an edge of the graph"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("0.1", "1.1", "o") "]}",
         "edges[0]: unknown channel 'o' (q, k, v or direct)"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("0.x", "1.1", "q") "]}",
         "edges[0]: sender '0.x' is not embed, pos or a head L.H"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("0.1", "-1.1", "q") "]}",
         "edges[0]: receiver '-1.1' is not logits or a head L.H"},
        {HDR "\"n_edges\": 2, \"edges\": [" E("0.1", "1.2", "k") ", " E("0.1", "1.2", "k") "]}",
         "edges[1]: 0.1->1.2.k is listed twice (also edges[0])"},
        {HDR "\"n_edges\": 1, \"edges\": [{\"sender\": \"pos\", \"receiver\": \"logits\", "
             "\"score\": 1}]}",
         "edges[0]: missing \"channel\""},
        {HDR "\"n_edges\": 1, \"edges\": [{\"sender\": \"pos\", \"receiver\": \"logits\", "
             "\"channel\": \"direct\"}]}",
         "edges[0]: missing \"score\""},
        {HDR "\"n_edges\": 1, \"edges\": [{\"sender\": \"pos\", \"receiver\": 1, "
             "\"channel\": \"direct\", \"score\": 1}]}",
         "edges[0]: \"receiver\" must be a string"},
        {HDR "\"n_edges\": 1, \"edges\": [{\"sender\": \"pos\", \"receiver\": \"logits\", "
             "\"channel\": \"direct\", \"score\": \"1\"}]}",
         "\"score\" must be a number or null"},
        {HDR "\"n_edges\": 1, \"edges\": [7]}", "edges[0]: must be an object"},
        {HDR "\"n_edges\": 1, \"edges\": [" E("bad\\nname", "1.1", "q") "]}",
         "edges[0]: sender 'bad?name' is not"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char kept[306];
        memset(kept, 0xAB, sizeof kept);
        al_err e = {{0}};
        int rc = al_circuit_parse(cases[i].text, strlen(cases[i].text), 2, 8, kept, &e);
        CHECKF(rc == -1, "case %zu accepted", i);
        CHECKF(strstr(e.msg, cases[i].want) && !strchr(e.msg, '\n'), "case %zu: [%s] want [%s]", i,
               e.msg, cases[i].want);
        int untouched = 1;
        for (size_t k = 0; k < sizeof kept; k++) untouched &= kept[k] == 0xAB;
        CHECKF(untouched, "case %zu assigned kept", i);
    }
    /* more edges than the graph has: refused before any is read (1 layer, 1 head: 9) */
    char big[4096];
    snprintf(big, sizeof big, HDR "\"n_edges\": 10, \"edges\": [1,1,1,1,1,1,1,1,1,1]}");
    unsigned char k1[9];
    al_err e = {{0}};
    CHECK(al_circuit_parse(big, strlen(big), 1, 1, k1, &e) == -1);
    CHECKF(strstr(e.msg, "n_edges must be an integer 0..9"), "%s", e.msg);
    snprintf(big, sizeof big, HDR "\"n_edges\": 9, \"edges\": [1,1,1,1,1,1,1,1,1,1]}");
    CHECK(al_circuit_parse(big, strlen(big), 1, 1, k1, &e) == -1);
    CHECKF(strstr(e.msg, "10 edges listed; the graph has 9"), "%s", e.msg);
    /* a model deeper than the graph has none */
    CHECK(al_circuit_parse("{}", 2, AL_GRAPH_MAX_LAYERS + 1, 4, k1, &e) == -1 &&
          strstr(e.msg, "no head graph"));
    /* a good one: exactly its edges */
    const char *ok = HDR "\"n_edges\": 3, \"edges\": [" E("0.1", "1.2", "k") ", " E(
        "pos", "0.0",
        "q") ", {\"sender\": \"1.7\", \"receiver\": \"logits\", \"channel\": \"direct\", "
             "\"score\": null}], \"task\": \"x\"}\n";
    unsigned char kept[306];
    memset(kept, 9, sizeof kept);
    CHECK_OK(al_circuit_parse(ok, strlen(ok), 2, 8, kept, &e), &e);
    al_edge a = {AL_EDGE_COMPOSITION, 2 + 1, 1, 2, 1}, b = {AL_EDGE_INPUT, 1, 0, 0, 0},
            c = {AL_EDGE_OUTPUT, 2 + 8 + 7, -1, -1, 3};
    int ka = al_graph_edge_index(2, 8, &a), kb = al_graph_edge_index(2, 8, &b),
        kc = al_graph_edge_index(2, 8, &c), n1 = 0;
    for (int k = 0; k < 306; k++) n1 += kept[k] == 1;
    CHECK(n1 == 3 && kept[ka] == 1 && kept[kb] == 1 && kept[kc] == 1);
    /* the load wrapper names the file */
    const char *p = t_write("c.json", "{\"format\": 1}");
    CHECK(al_circuit_load(p, 2, 8, kept, &e) == -1 && strstr(e.msg, "c.json: format is not"));
    CHECK(al_circuit_load("no/such.json", 2, 8, kept, &e) == -1 && strstr(e.msg, "no/such.json"));
}

/* ------------------------------------------- running a saved circuit */

/* A circuit file of the tiny 2-layer model (L 2, H 4) keeping every edge
 * (all = 1) or none. */
static void write_circuit(const char *path, int all) {
    int n = al_graph_n_edges(2, 4);
    unsigned char kept[200];
    memset(kept, all, (size_t)n);
    al_circuit_info info = {"0", "induction", "acdc", "kl", 0.01, NAN, 1.0, 0.0, 0};
    char *text = NULL;
    al_err e = {{0}};
    CHECK_OK(al_circuit_format(&info, 2, 4, kept, NULL, &text, &e), &e);
    CHECK_OK(al_write_file_atomic(path, text, strlen(text), &e), &e);
    free(text);
}

/* path's text contains s */
static int has(const char *path, const char *s) {
    char *t = t_slurp(path);
    int r = t && strstr(t, s) != NULL;
    free(t);
    return r;
}

/* A corrupted counterpart of "the cat sat" with as many tokens under the
 * tiny model's tokenizer (which pieces merge depends on its training). */
static const char *same_length(const char *dir, const char *circuit) {
    static const char *const cand[] = {"the hat sat", "the bat sat", "the cat sit", "the cot sat"};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (t_sh("%s run --model %s/m2 --prompt 'the cat sat' --circuit %s --corrupted '%s' "
                 ">/dev/null 2>&1",
                 t_bin(), dir, circuit, cand[i]) == 0)
            return cand[i];
    CHECKF(0, "no corrupted text of the prompt's length");
    return cand[0];
}

#define SCORES_Q                                                                                   \
    "SELECT group_concat(value, ',') FROM (SELECT value FROM head_scores WHERE run_id = %d ORDER BY layer, head, metric)"

/* Every edge kept is the model itself: the same scores bit for bit
 * (through the CLI: the same rows as printed with %.17g). No edge kept
 * with the next sequence's values destroys induction on the probe;
 * the mean fill runs over --data's windows; the summary says so. A
 * discovered circuit runs too, in run, scores and ablate. */
TEST(discover_cli_circuit_runs) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), all = t_pcopy("all.json"),
           none = t_pcopy("none.json"), out = t_pcopy("out.txt");
    t_tiny_model(dir.s, 2, 60);
    write_circuit(all.s, 1);
    write_circuit(none.s, 0);
    const char *sc = "--probe-r 6 --probe-n 4 --batches 1 --batch 2 --threads 2";
    CHECK(t_sh("%s scores --model %s/m2 --db %s --data %s/s.val.bin %s >/dev/null 2>&1", t_bin(),
               dir.s, db.s, dir.s, sc) == 0);
    CHECK(t_sh("%s scores --model %s/m2 --db %s --data %s/s.val.bin %s --circuit %s > %s 2>&1",
               t_bin(), dir.s, db.s, dir.s, sc, all.s, out.s) == 0);
    char q1[300], q2[300];
    snprintf(q1, sizeof q1, SCORES_Q, 1);
    snprintf(q2, sizeof q2, SCORES_Q, 2);
    char *a = t_sql(db.s, q1), *b = t_sql(db.s, q2);
    CHECKF(a && b && strcmp(a, b) == 0, "all edges kept changed the scores:\n%s\n%s", a, b);
    free(a), free(b);
    CHECK(has(out.s, "circuit ") && has(out.s, "106 of 106 edges kept"));
    /* none kept, resampled: the probe's second repeat is no easier than the first */
    CHECK(t_sh("%s scores --model %s/m2 --db %s %s --circuit %s --fill corrupted > %s 2>&1",
               t_bin(), dir.s, db.s, sc, none.s, out.s) == 0);
    CHECK(has(out.s, "0 of 106 edges kept") && has(out.s, "resampled"));
    CHECK_SQL(db.s,
              "SELECT (SELECT value FROM model_scores WHERE run_id = 1 AND metric = 'icl_gain') "
              "> (SELECT value FROM model_scores WHERE run_id = 3 AND metric = 'icl_gain')",
              "1");
    CHECK(t_sh("%s scores --model %s/m2 --db %s --data %s/s.val.bin %s --circuit %s --fill mean "
               "> %s 2>&1",
               t_bin(), dir.s, db.s, dir.s, sc, none.s, out.s) == 0);
    CHECK(has(out.s, "mean values over 2 windows"));
    /* a discovered circuit, in ablate and run */
    CHECK(t_sh("%s discover --model %s/m2 --db %s --out %s " TASK " >/dev/null 2>&1", t_bin(),
               dir.s, db.s, dir.s) == 0);
    char file[1100];
    snprintf(file, sizeof file, "%s/circuit-induction-acdc.json", dir.s);
    CHECK(has(file, "\"run_id\":\t5,")); /* the discover run, the fifth of the database */
    CHECK(t_sh("%s ablate --model %s/m2 --db %s --data %s/s.val.bin --batches 1 --batch 2 "
               "--probe-r 6 --probe-n 4 --threads 2 --circuit %s --fill mean > %s 2>&1",
               t_bin(), dir.s, db.s, dir.s, file, out.s) == 0);
    CHECK(has(out.s, "edges kept; the removed edges carry their senders' mean"));
    CHECK(t_sh("%s run --model %s/m2 --prompt 'the cat sat' --circuit %s --corrupted '%s' "
               "--json > %s 2>&1",
               t_bin(), dir.s, all.s, same_length(dir.s, all.s), out.s) == 0);
    CHECK(has(out.s, "\"circuit_run\":") && has(out.s, "corrupted input"));
    CHECK_SQL(db.s, "SELECT group_concat(kind || ':' || status, ' ') FROM runs",
              "scores:done scores:done scores:done scores:done discover:done ablate:done");
}

/* The same text but for numbers, which may differ by tol (float
 * rounding: the circuit run subtracts what the plain run never added). */
static int json_near(const char *a, const char *b, double tol) {
    while (*a && *b) {
        if ((*a == '-' || (*a >= '0' && *a <= '9')) && (*b == '-' || (*b >= '0' && *b <= '9'))) {
            char *ea, *eb;
            double x = strtod(a, &ea), y = strtod(b, &eb);
            if (fabs(x - y) > tol) return 0;
            a = ea, b = eb;
        } else if (*a++ != *b++)
            return 0;
    }
    return *a == *b;
}

/* `run` with every edge kept prints what the model prints; with none kept
 * and the corrupted text, what the model prints on the corrupted text. */
TEST(discover_cli_circuit_run_prompt) {
    t_pbuf dir = t_pcopy("."), all = t_pcopy("all.json"), none = t_pcopy("none.json");
    t_tiny_model(dir.s, 2, 30);
    write_circuit(all.s, 1);
    write_circuit(none.s, 0);
    char *p[4];
    const char *c = same_length(dir.s, all.s);
    const char *cmd[4][3] = {{"the cat sat", "", ""},
                             {"the cat sat", all.s, c},
                             {c, "", ""},
                             {"the cat sat", none.s, c}};
    for (int i = 0; i < 4; i++) {
        char line[3000];
        if (cmd[i][1][0])
            snprintf(line, sizeof line,
                     "%s run --model %s/m2 --prompt '%s' --circuit %s "
                     "--corrupted '%s' --json 2>&1 | grep -v '\"circuit'",
                     t_bin(), dir.s, cmd[i][0], cmd[i][1], cmd[i][2]);
        else
            snprintf(line, sizeof line, "%s run --model %s/m2 --prompt '%s' --json 2>&1", t_bin(),
                     dir.s, cmd[i][0]);
        char outp[40];
        snprintf(outp, sizeof outp, "p%d.txt", i);
        CHECK(t_sh("%s > %s", line, t_path(outp)) == 0);
        p[i] = t_slurp(t_path(outp));
        CHECK(p[i] != NULL);
    }
    /* all kept: the same JSON as the model's; none kept: the last
     * position's candidates as on the corrupted prompt (its last token is
     * the clean one's, so only the removed edges could differ) */
    CHECKF(p[0] && p[1] && strcmp(p[0], p[1]) == 0, "all kept:\n%s\nvs\n%s", p[0], p[1]);
    char *l3 = p[3] ? strrchr(p[3], '[') : NULL, *l2 = p[2] ? strrchr(p[2], '[') : NULL;
    CHECKF(l2 && l3 && json_near(l2, l3, 1e-6), "none kept vs the corrupted prompt:\n%s\nvs\n%s",
           l2, l3);
    for (int i = 0; i < 4; i++) free(p[i]);
}

/* Refused with one line, no run row: a bad --fill (usage, 2), a mean
 * without reference tokens, a circuit naming a head the model lacks, a
 * corrupted text of another length, --generate with a corrupted fill. */
TEST(discover_cli_circuit_refusals) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), all = t_pcopy("all.json"),
           big = t_pcopy("big.json"), err = t_pcopy("err.txt");
    t_tiny_model(dir.s, 2, 10);
    write_circuit(all.s, 1);
    FILE *f = fopen(big.s, "w");
    fprintf(f, "{\"format\": \"attnlab-circuit\", \"version\": 1, \"n_edges\": 1, \"edges\": "
               "[{\"sender\": \"0.7\", \"receiver\": \"logits\", \"channel\": \"direct\", "
               "\"score\": null}]}\n");
    fclose(f);
    struct {
        const char *args, *msg;
        int rc;
    } cases[] = {
        /* R 5: the default probe (R 50) does not fit n_ctx 32 and is refused first */
        {"scores --circuit ALL --fill avg", "--fill must be corrupted or mean", 2},
        {"scores --circuit ALL --fill mean --probe-r 5", "needs reference tokens", 1},
        {"ablate --data DIR/s.val.bin --circuit BIG --probe-r 5", "0.7", 1},
        {"run --prompt 'the cat' --circuit ALL --corrupted 'the big dog sat'", "same length", 1},
        {"run --prompt 'the cat' --circuit ALL --corrupted 'the dog' --generate 3",
         "--generate with --fill corrupted", 1},
        {"run --prompt 'the cat' --circuit ALL --fill mean", "--mean-data", 1},
        {"run --prompt 'the cat' --circuit ALL --fill mean --mean-data DIR/none.bin", "none.bin",
         1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[600], *o = args;
        for (const char *s = cases[i].args; *s; s++) {
            if (strncmp(s, "ALL", 3) == 0)
                o += sprintf(o, "%s", all.s), s += 2;
            else if (strncmp(s, "BIG", 3) == 0)
                o += sprintf(o, "%s", big.s), s += 2;
            else if (strncmp(s, "DIR", 3) == 0)
                o += sprintf(o, "%s", dir.s), s += 2;
            else
                *o++ = *s;
        }
        *o = 0;
        int db_arg = strncmp(args, "run", 3) != 0, w = (int)strcspn(args, " ");
        int rc = t_sh("%s %.*s --model %s/m2 %s%s %s > %s 2>&1", t_bin(), w, args, dir.s,
                      db_arg ? "--db " : "", db_arg ? db.s : "", args + w, err.s);
        CHECKF(rc == cases[i].rc, "%s: exit %d", args, rc);
        CHECKF(t_one_line(err.s, cases[i].msg), "%s: message", args);
    }
    CHECK(!al_file_exists(db.s) || t_sql_long(db.s, "SELECT count(*) FROM runs") == 0);
    /* every edge kept: the mean fill changes nothing, the model's own numbers */
    t_pbuf p0 = t_pcopy("p0.json"), p1 = t_pcopy("p1.json");
    CHECK(t_sh("%s run --model %s/m2 --prompt 'the cat sat' --json > %s", t_bin(), dir.s, p0.s) ==
          0);
    CHECK(t_sh("%s run --model %s/m2 --prompt 'the cat sat' --circuit %s --fill mean "
               "--mean-data %s/s.val.bin --json | grep -v '\"circuit' > %s",
               t_bin(), dir.s, all.s, dir.s, p1.s) == 0);
    char *a = t_slurp(p0.s), *b = t_slurp(p1.s);
    CHECKF(a && b && strcmp(a, b) == 0, "all kept, mean fill:\n%s\nvs\n%s", a, b);
    free(a);
    free(b);
}
