/* test_experiment.c -- the JSON experiment loader refuses bad files with
 * the key path, turns good ones into the right options, and a tiny
 * experiment runs end to end (and is reused when run again). */
#define _DEFAULT_SOURCE /* wait4 (tests/proc.h) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/experiment.h"
#include "proc.h"
#include "test.h"

/* A valid experiment with one substitution: "@" in tmpl is replaced by
 * `extra` (an extra top-level key, or a whole section). */
#define BASE_DATA "\"data\": {\"synthetic\": {\"stories\": 50}, \"val\": 0.1}"
#define BASE_MODELS                                                                                \
    "\"models\": [{\"name\": \"a\", \"n_layers\": 1}, {\"name\": \"b\", \"steps\": 5}]"

static void expect_error(const char *json, const char *want) {
    const char *p = t_write("x.json", json);
    al_experiment *x = NULL;
    al_err e = {{0}};
    int rc = al_exp_load(p, &x, &e);
    CHECKF(rc == -1 && x == NULL, "accepted: %s", json);
    CHECKF(strstr(e.msg, want) != NULL, "message '%s' lacks '%s'", e.msg, want);
    CHECKF(strncmp(e.msg, p, strlen(p)) == 0, "message '%s' does not start with the file", e.msg);
    al_exp_free(x);
}

TEST(exp_rejects_bad_files) {
    /* unknown keys, with their path */
    expect_error("{\"name\": \"t\", " BASE_DATA
                 ", \"models\": [{\"name\": \"a\"}, {\"name\": \"b\", "
                 "\"stpes\": 5}]}",
                 "models[1].stpes: unknown key (see 'attnlab help train')");
    expect_error("{\"name\": \"t\", \"modles\": [], " BASE_DATA ", " BASE_MODELS "}",
                 "modles: unknown key");
    expect_error("{\"name\": \"t\", " BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"ablate\": "
                 "[{\"pairs\": true}, {\"metod\": \"mean\"}]}}",
                 "analyses.ablate[1].metod: unknown key");
    expect_error("{\"name\": \"t\", " BASE_DATA ", " BASE_MODELS
                 ", \"analyses\": {\"circuit\": true}}",
                 "analyses.circuit: unknown key");
    expect_error("{\"name\": \"t\", \"data\": {\"synthetic\": {\"storys\": 5}}, " BASE_MODELS "}",
                 "data.synthetic.storys: unknown key (see 'attnlab help data synth')");
    expect_error("{\"name\": \"t\", " BASE_DATA ", " BASE_MODELS
                 ", \"report\": {\"titel\": \"x\"}}",
                 "report.titel: unknown key");
    /* wrong types */
    expect_error("{\"name\": \"t\", " BASE_DATA ", \"train\": {\"lr\": \"fast\"}, " BASE_MODELS "}",
                 "train.lr: must be a number");
    expect_error("{\"name\": \"t\", " BASE_DATA
                 ", \"models\": [{\"name\": \"a\", \"n_layers\": 1.5}]}",
                 "models[0].n_layers: must be an integer");
    expect_error("{\"name\": \"t\", " BASE_DATA ", \"models\": [{\"name\": \"a\", \"tied\": 1}]}",
                 "models[0].tied: must be true or false");
    expect_error("{\"name\": \"t\", " BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"ablate\": "
                 "{\"pairs\": \"yes\"}}}",
                 "analyses.ablate.pairs: must be true or false");
    expect_error("{\"name\": 7, " BASE_DATA ", " BASE_MODELS "}", "name: must be a string");
    expect_error("{\"name\": \"t\", " BASE_DATA ", \"models\": {\"name\": \"a\"}}",
                 "models: must be a non-empty array");
    expect_error("{\"name\": \"t\", " BASE_DATA ", " BASE_MODELS
                 ", \"pictures\": {\"repeat\": -1}}",
                 "pictures.repeat: must be an integer >= 0");
    /* missing files, named */
    expect_error("{\"name\": \"t\", \"data\": {\"text\": \"/nonexistent/corpus.txt\"}, " BASE_MODELS
                 "}",
                 "data.text: no such file: /nonexistent/corpus.txt");
    expect_error("{\"name\": \"t\", " BASE_DATA
                 ", \"tokenizer\": {\"file\": \"/nonexistent/tok.json\"}, " BASE_MODELS "}",
                 "tokenizer.file: no such file: /nonexistent/tok.json");
    /* values that make no sense */
    expect_error("{\"name\": \"t\", " BASE_DATA
                 ", \"models\": [{\"name\": \"a\"}, {\"name\": \"a\"}]}",
                 "models[1].name: 'a' is the name of models[0] too");
    expect_error("{\"name\": \"t\", " BASE_DATA ", \"models\": [{\"n_layers\": 1}]}",
                 "models[0].name: missing");
    expect_error("{\"name\": \"../x\", " BASE_DATA ", " BASE_MODELS "}",
                 "name: must be a string of letters");
    expect_error("{\"name\": \"t\", " BASE_DATA
                 ", \"models\": [{\"name\": \"a\", \"out\": \"x\"}]}",
                 "models[0].out: is set by the experiment itself");
    expect_error("{\"name\": \"t\", " BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"prune\": "
                 "{\"methods\": [\"ablation\", \"magic\"]}}}",
                 "analyses.prune.methods[1]: must be");
    expect_error("{\"name\": \"t\", " BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"scores\": "
                 "{\"models\": [\"zzz\"]}}}",
                 "analyses.scores.models[0]: no model is named 'zzz'");
    expect_error("{\"name\": \"t\", " BASE_DATA ", " BASE_MODELS ", \"pictures\": {\"kinds\": "
                 "[\"attention\", \"heat\"]}}",
                 "pictures.kinds[1]: must be one of");
    expect_error("{\"name\": \"t\", \"data\": {\"synthetic\": {}, \"val\": 0}, " BASE_MODELS "}",
                 "data.val: must be > 0");
    expect_error(
        "{\"name\": \"t\", \"data\": {}, " BASE_MODELS "}",
        "data: give exactly one of \"synthetic\", \"text\", \"brown\", \"code\" and \"mix\"");
    expect_error("{\"name\": \"t\", " BASE_DATA "}", "models: missing");
    expect_error("{\"name\": \"t\", \"name\": \"u\", " BASE_DATA ", " BASE_MODELS "}",
                 "name: given twice");
    expect_error("{\"name\": \"t\", " BASE_DATA ",\n " BASE_MODELS ",}", "invalid JSON at line 2");
    /* the command: one line on stderr naming the key, exit 1; a missing file */
    t_write("bad.json",
            "{\"name\": \"t\", " BASE_DATA ", \"models\": [{\"name\": \"a\", \"stpes\": 5}]}");
    CHECK(t_sh("%s experiment %s 2>%s", t_bin(), t_path("bad.json"), t_path("err")) == 1);
    char *err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "models[0].stpes: unknown key") &&
          strchr(err, '\n') == err + strlen(err) - 1);
    free(err);
    CHECK(t_sh("%s experiment %s 2>%s", t_bin(), t_path("none.json"), t_path("err")) == 1);
    err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "none.json"));
    free(err);
    CHECK(t_sh("%s experiment 2>/dev/null", t_bin()) == 2);
}

/* Every value the loader checks, one bad value at a time: each refusal
 * names its key path and says what the value must be, before any stage
 * runs (a mix input with a bad unit is refused before the corpora of the
 * inputs before it are written). */
#define T_NAME "{\"name\": \"t\", "
#define T_MIX(in)                                                                                  \
    T_NAME "\"data\": {\"mix\": {\"inputs\": [" in "]}, \"docs\": \"eot\"}, " BASE_MODELS "}"
TEST(exp_rejects_bad_values) {
    static const char *const cases[][2] = {
        {"[1, 2]", "top level must be a JSON object"},
        {T_NAME BASE_DATA ", \"models\": [{\"name\": \"a\", \"steps\": 5, \"steps\": 6}]}",
         "models[0].steps: given twice"},
        {T_NAME BASE_DATA ", \"train\": {\"lr\": 0.1, \"lr\": 0.2}, " BASE_MODELS "}",
         "train.lr: given twice"},
        {T_NAME "\"out\": \"\", " BASE_DATA ", " BASE_MODELS "}", "out: must be a folder path"},
        {T_NAME "\"threads\": 100000, " BASE_DATA ", " BASE_MODELS "}", "threads: must be"},
        {T_NAME "\"seed\": -3, " BASE_DATA ", " BASE_MODELS "}", "seed: must be"},
        {T_NAME "\"seed\": 3, " BASE_DATA ", \"train\": {\"seed\": 4}, " BASE_MODELS "}",
         "seed: given twice: here and as train.seed"},
        {T_NAME "\"seed\": 3, " BASE_DATA ", \"models\": [{\"name\": \"a\", \"seed\": 2}]}",
         "seed: given twice: here and as models[0].seed"},
        {T_NAME BASE_DATA ", \"models\": []}", "models: must be a non-empty array"},
        {T_NAME BASE_DATA ", \"models\": [{\"name\": 5}]}", "models[0].name: must be a string"},
        {T_NAME BASE_DATA ", \"models\": [{\"name\": \"-a\"}]}",
         "models[0].name: must be a string"},
        {T_NAME BASE_DATA ", \"models\": [{\"name\": \"a\", \"steps\": 0}]}",
         "models[0].steps: must be >= 1"},
        {T_NAME BASE_DATA ", \"models\": [{\"name\": \"a\", \"n_layers\": 0}]}",
         "models[0].n_layers: must be >= 1"},
        {T_NAME BASE_DATA ", \"models\": [{\"name\": \"a\", \"pos\": \"rotary\"}]}",
         "models[0].pos: must be \"standard\" or \"shortformer\""},
        {T_NAME BASE_DATA ", \"models\": [{\"name\": \"a\", \"norm\": \"rms\"}]}",
         "models[0].norm: must be \"none\", \"ln\" or \"lnpre\""},
        {T_NAME BASE_DATA ", \"models\": [{\"name\": \"a\", \"biases\": \"xyz\"}]}",
         "models[0].biases: must be"},
        {T_NAME BASE_DATA ", \"tokenizer\": {\"file\": \"x.json\", \"vocab\": 300}, " BASE_MODELS
                          "}",
         "tokenizer: give \"file\" or training options, not both"},
        {T_NAME "\"data\": {\"code\": 3, \"docs\": \"eot\"}, " BASE_MODELS "}",
         "data.code: must be an object with \"source\""},
        {T_NAME "\"data\": {\"code\": {}, \"docs\": \"eot\"}, " BASE_MODELS "}",
         "data.code.source: missing"},
        {T_NAME "\"data\": {\"code\": {\"source\": \"cobol\"}, \"docs\": \"eot\"}, " BASE_MODELS
                "}",
         "data.code.source: must be \"pystdlib\" or \"gostd\""},
        {T_NAME "\"data\": {\"code\": {\"source\": \"gostd\", \"dir\": \"/nonexistent\"}, "
                "\"docs\": \"eot\"}, " BASE_MODELS "}",
         "data.code.dir: no such directory: /nonexistent"},
        {T_NAME "\"data\": {\"code\": {\"source\": \"gostd\"}}, " BASE_MODELS "}",
         "data.docs: must be \"eot\" with data.code"},
        {T_NAME "\"data\": {\"mix\": 1, \"docs\": \"eot\"}, " BASE_MODELS "}",
         "data.mix: must be an object with \"inputs\""},
        {T_NAME "\"data\": {\"mix\": {\"inputs\": []}, \"docs\": \"eot\"}, " BASE_MODELS "}",
         "data.mix.inputs: must be a list of 1 to"},
        {T_MIX("7"), "data.mix.inputs[0]: must be an object with \"share\" and a source"},
        {T_MIX("{\"share\": 1.5, \"brown\": true}"),
         "data.mix.inputs[0]: \"share\" must be a number in (0, 1]"},
        {T_MIX("{\"share\": 1, \"brown\": true, \"text\": \"a\"}"),
         "data.mix.inputs[0]: give exactly one of"},
        {T_MIX("{\"share\": 1, \"brown\": true, \"docs\": \"eot\"}"),
         "data.mix.inputs[0]: \"docs\" is for a \"text\" input"},
        {T_MIX("{\"share\": 1, \"text\": 5}"), "data.mix.inputs[0].text: must be a file name"},
        {T_MIX("{\"share\": 1, \"text\": \"/nonexistent/a.txt\", \"docs\": \"pages\"}"),
         "data.mix.inputs[0]:"},
        {T_MIX("{\"share\": 1, \"text\": \"/nonexistent/a.txt\"}"),
         "data.mix.inputs[0].text: no such file"},
        {T_MIX("{\"share\": 1, \"prose\": 2}"), "data.mix.inputs[0].prose: must be an object"},
        {T_MIX("{\"share\": 1, \"prose\": {\"source\": \"kjv\", \"color\": 1}}"),
         "data.mix.inputs[0].prose.color: unknown key"},
        {T_MIX("{\"share\": 1, \"code\": {\"source\": \"rust\"}}"),
         "data.mix.inputs[0].code: \"source\" must be \"pystdlib\" or \"gostd\""},
        {T_MIX("{\"share\": 1, \"prose\": {\"source\": \"quran\"}}"),
         "data.mix.inputs[0].prose: \"source\" must be \"kjv\" or \"pydocs\""},
        {T_MIX("{\"share\": 1, \"prose\": {\"source\": \"kjv\", \"unit\": \"line\"}}"),
         "data.mix.inputs[0].prose: \"unit\" must be \"chapter\", \"book\" or \"verse\""},
        {T_MIX("{\"share\": 1, \"brown\": {\"unit\": \"line\"}}"),
         "data.mix.inputs[0].brown: \"unit\" must be \"para\" or \"text\""},
        {T_MIX("{\"share\": 1, \"prose\": {\"source\": \"kjv\", \"dir\": \"/nonexistent\"}}"),
         "data.mix.inputs[0].prose: no such directory: /nonexistent"},
        {T_MIX("{\"share\": 1, \"brown\": {\"from\": \"/nonexistent/b.txt\"}}"),
         "data.mix.inputs[0].brown: no such file"},
        {T_MIX("{\"share\": 0.5, \"brown\": true}, {\"share\": 0.25, \"brown\": true}"),
         "data.mix.inputs: the shares must sum to 1 (they sum to 0.75)"},
        {T_NAME "\"data\": {\"mix\": {\"inputs\": [{\"share\": 1, \"brown\": true}], \"bytes\": "
                "-1}, \"docs\": \"eot\"}, " BASE_MODELS "}",
         "data.mix.bytes: must be a whole number >= 0"},
        {T_NAME "\"data\": {\"mix\": {\"inputs\": [{\"share\": 1, \"brown\": true}], \"seed\": "
                "1.5}, \"docs\": \"eot\"}, " BASE_MODELS "}",
         "data.mix.seed: must be a whole number >= 0"},
        {T_NAME "\"data\": {\"brown\": 3}, " BASE_MODELS "}",
         "data.brown: must be true or an object"},
        {T_NAME "\"data\": {\"brown\": {\"unit\": \"page\"}}, " BASE_MODELS "}",
         "data.brown.unit: must be \"para\" or \"text\""},
        {T_NAME "\"data\": {\"brown\": {\"from\": \"/nonexistent/b.txt\"}}, " BASE_MODELS "}",
         "data.brown.from: no such file"},
        {T_NAME BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"scores\": {\"models\": \"a\"}}}",
         "analyses.scores.models: must be an array of model names"},
        {T_NAME BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"scores\": {\"models\": [1]}}}",
         "analyses.scores.models[0]: must be a model name"},
        {T_NAME BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"scores\": 5}}",
         "analyses.scores: must be"},
        {T_NAME BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"prune\": [3]}}",
         "analyses.prune[0]: must be an object"},
        {T_NAME BASE_DATA ", " BASE_MODELS ", \"analyses\": {\"prune\": {\"methods\": []}}}",
         "analyses.prune.methods: must be a non-empty array of"},
        {T_NAME BASE_DATA ", " BASE_MODELS ", \"pictures\": {\"kinds\": \"attention\"}}",
         "pictures.kinds: must be an array of picture kinds"},
        {T_NAME BASE_DATA ", " BASE_MODELS ", \"report\": 3}",
         "report: must be true, false or an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_error(cases[i][0], cases[i][1]);
}

/* A stage's options (compact JSON) hold "key":value. */
static int has_opt(const char *opts, const char *key_value) {
    return opts && strstr(opts, key_value) != NULL;
}

TEST(exp_load_values) {
    const char *p = t_write(
        "ok.json",
        "{\"name\": \"ok\", \"threads\": 2,\n"
        " \"data\": {\"synthetic\": {\"stories\": 50, \"repeat_fraction\": 0.1}, \"val\": 0.1},\n"
        " \"tokenizer\": {\"vocab\": 300},\n"
        " \"train\": {\"steps\": 40, \"lr\": 0.01, \"d_model\": 32},\n"
        " \"models\": [{\"name\": \"a\", \"n_layers\": 1}, {\"name\": \"b\", \"steps\": 5, \"tied\": true, "
        "\"seed\": \"18446744073709551615\"}],\n"
        " \"analyses\": {\"circuits\": true, \"scores\": false,\n"
        "   \"ablate\": [{\"pairs\": true, \"method\": \"mean\", \"models\": [\"b\"]}, {\"method\": \"zero\"}],\n"
        "   \"prune\": {\"budget\": -1}},\n"
        " \"pictures\": {\"kinds\": [\"attention\", \"training\"], \"prompt\": \"Hi \\\"you\\\"\"},\n"
        " \"report\": {\"title\": \"T\"}}\n");
    al_experiment *x;
    al_err e;
    CHECK_OK(al_exp_load(p, &x, &e), &e);
    if (!x) return;
    CHECK(strcmp(x->name, "ok") == 0 && strcmp(x->out, "notebooks-out/ok") == 0 && x->threads == 2);
    CHECK(x->synthetic && has_opt(x->synth, "\"stories\":50") &&
          has_opt(x->synth, "\"repeat_fraction\":0.1"));
    CHECK(has_opt(x->encode, "\"val\":0.1") && has_opt(x->tok, "\"vocab\":300"));
    CHECK(x->n_models == 2);
    /* defaults from "train", then the model's own keys (which win) */
    CHECK(x->models[0].steps == 40 && x->models[0].n_layers == 1 && !x->models[0].tied);
    CHECK(x->models[1].steps == 5 && x->models[1].n_layers == 2 && x->models[1].tied);
    CHECK(has_opt(x->models[1].train, "\"lr\":0.01") &&
          has_opt(x->models[1].train, "\"d_model\":32"));
    CHECK(has_opt(x->models[1].train, "\"seed\":\"18446744073709551615\""));
    /* circuits + 2 ablate + 3 prune methods (all three by default); scores off */
    CHECK(x->n_analyses == 6);
    CHECK(strcmp(x->an[0].kind, "circuits") == 0 && x->an[0].models == 3);
    CHECK(strcmp(x->an[1].kind, "ablate") == 0 && x->an[1].models == 2 &&
          has_opt(x->an[1].opts, "\"method\":\"mean\""));
    CHECK(strcmp(x->an[1].label, "ablate (pairs, mean)") == 0);
    CHECK(strcmp(x->an[3].kind, "prune") == 0 &&
          has_opt(x->an[3].opts, "\"method\":\"ablation\"") &&
          has_opt(x->an[3].opts, "\"budget\":-1"));
    CHECK(has_opt(x->an[4].opts, "\"method\":\"gradient\"") &&
          has_opt(x->an[5].opts, "\"method\":\"random\""));
    CHECK(x->pictures && strcmp(x->pic_kinds, "attention,training") == 0 &&
          strcmp(x->prompt, "Hi \"you\"") == 0);
    CHECK(x->report && strcmp(x->title, "T") == 0);
    al_exp_free(x);
    /* a model's key replaces the default's, however it is spelled, and
     * false turns off a flag "train" turned on */
    p = t_write(
        "ok2.json",
        "{\"name\": \"ok2\", " BASE_DATA ", \"train\": {\"n_layers\": 3, \"tied\": true},\n"
        " \"models\": [{\"name\": \"a\", \"n-layers\": 1, \"tied\": false}, {\"name\": \"b\"}]}");
    CHECK_OK(al_exp_load(p, &x, &e), &e);
    if (!x) return;
    CHECK(x->models[0].n_layers == 1 && !x->models[0].tied && x->models[1].n_layers == 3 &&
          x->models[1].tied);
    CHECK(has_opt(x->models[0].train, "\"n_layers\":1") &&
          !has_opt(x->models[0].train, "n-layers"));
    al_exp_free(x);
}

/* A stage gets the very numbers of the file: cJSON alone would print
 * 0.1 + 0.2 as 0.3 and 2^53 - 1 as 2^53 - 2. And an analysis key written
 * both ways loads as one option (the last), so a file that loads runs. */
TEST(exp_load_exact_numbers_and_one_spelling) {
    const char *p = t_write(
        "exact.json",
        "{\"name\": \"exact\", " BASE_DATA ",\n"
        " \"train\": {\"lr\": 0.30000000000000004, \"seed\": 9007199254740991},\n"
        " \"models\": [{\"name\": \"a\"}],\n"
        " \"analyses\": {\"scores\": {\"probe_n\": 10, \"probe-n\": 20, \"batches\": 1e0},\n"
        "   \"prune\": {\"budget\": 0.30000000000000004, \"methods\": [\"random\"]}}}\n");
    al_experiment *x;
    al_err e;
    CHECK_OK(al_exp_load(p, &x, &e), &e);
    if (!x) return;
    CHECK(has_opt(x->models[0].train, "\"lr\":0.30000000000000004"));
    CHECK(has_opt(x->models[0].train, "\"seed\":9007199254740991"));
    CHECK(x->n_analyses == 2);
    CHECKF(has_opt(x->an[0].opts, "\"probe_n\":20") && !has_opt(x->an[0].opts, "probe-n"), "%s",
           x->an[0].opts);
    CHECK(has_opt(x->an[1].opts, "\"budget\":0.30000000000000004"));
    /* and the options apply to the command's flag table without error */
    const al_analysis *c = al_analysis_of("scores");
    void *args = calloc(1, c->size);
    al_flag fl[32];
    c->init(args);
    CHECK_OK(al_analysis_flags(c, args, fl, 32, &e), &e);
    CHECK_OK(al_flags_apply_json(fl, x->an[0].opts, "scores", &e), &e);
    free(args);
    al_exp_free(x);
}

static const char tiny[] =
    "{\"name\": \"tiny\", \"threads\": 2,\n"
    " \"data\": {\"synthetic\": {\"stories\": 300, \"seed\": 3}, \"val\": 0.1},\n"
    " \"tokenizer\": {\"vocab\": 320},\n"
    " \"train\": {\"d_model\": 32, \"n_heads\": 4, \"d_head\": 8, \"n_ctx\": 64, \"batch\": 4, \"steps\": 20,\n"
    "           \"eval_every\": 10, \"eval_batches\": 2, \"warmup\": 5, \"lr\": 0.01},\n"
    " \"models\": [{\"name\": \"one\", \"n_layers\": 1}, {\"name\": \"two\", \"n_layers\": 2, \"tied\": true}],\n"
    " \"analyses\": {\"circuits\": {\"top_k\": 10, \"mc_samples\": 10},\n"
    "   \"scores\": {\"probe_r\": 10, \"probe_n\": 8, \"batches\": 2, \"batch\": 4},\n"
    "   \"ablate\": {\"pairs\": true, \"method\": \"mean\", \"batches\": 2, \"batch\": 4, \"probe_r\": 10, \"probe_n\": 8},\n"
    "   \"prune\": {\"budget\": -1, \"batches\": 2, \"batch\": 4, \"models\": [\"two\"]}},\n"
    " \"pictures\": {\"prompt\": \"Once upon a time, Bamurik saw a cat. Bamurik\", \"repeat\": 10, \"top_n\": 12}}\n";

/* One number from the results database through the sqlite3 CLI. */
TEST(exp_tiny_end_to_end) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    t_write("tiny.json", tiny);
    char out[600], db[700];
    snprintf(out, sizeof out, "%s", t_path("out"));
    snprintf(db, sizeof db, "%s/results.db", out);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), t_path("tiny.json"), out,
               t_path("run1")) == 0);
    char *log = t_slurp(t_path("run1"));
    /* a header per stage: data, tokenizer, encode, 2 x train, 2 x circuits,
     * scores, ablate, 3 x prune (model two only), report = 15 */
    CHECK(log && strstr(log, "== [1/15] data") && strstr(log, "== [15/15] report") &&
          strstr(log, "stage times") && strstr(log, "$ attnlab train"));
    free(log);
    /* what the database holds, counted independently */
    CHECK(t_sql_long(db, "SELECT count(*) FROM models") == 2);
    CHECK(t_sql_long(db, "SELECT count(*) FROM runs WHERE status = 'done'") == 2 + 2 + 2 + 2 + 3);
    CHECK(t_sql_long(db, "SELECT count(*) FROM runs WHERE status != 'done'") == 0);
    /* model two: 3 methods x (8 heads + step 0); budget -1 prunes all */
    CHECK(t_sql_long(db, "SELECT count(*) FROM pruning_steps") == 27);
    /* ablations: one (4 heads): none + 4 singles + 6 pairs; two (2 x 4):
     * none + 8 singles + 16 cross-layer pairs */
    CHECK(t_sql_long(db, "SELECT count(*) FROM ablations") == 11 + 25);
    /* training logs at steps 0, 10, 20 for both */
    CHECK(t_sql_long(db, "SELECT count(*) FROM train_log") == 6);
    CHECK(t_sql_long(db, "SELECT count(*) FROM models WHERE train_steps = 20") == 2);
    /* the report, its notebook, its pictures */
    char *html = NULL;
    char p[1200];
    snprintf(p, sizeof p, "%s/index.html", out);
    html = t_slurp(p);
    CHECK(html && strstr(html, "<h2>Model one</h2>") && strstr(html, "<h2>Model two</h2>"));
    CHECK(html && strstr(html, "Does the eigenvalue copying score agree with ablation"));
    int n_img = 0;
    for (const char *q = html; q && (q = strstr(q, "<img src=\"")) != NULL; q++) {
        char f[300];
        if (sscanf(q + 10, "%299[^\"]", f) != 1) continue;
        snprintf(p, sizeof p, "%s/%s", out, f);
        CHECKF(al_file_exists(p), "missing %s", p);
        n_img++;
    }
    /* two: 2 x 2 attention + training + spectrum + qk-pos + qk + ov +
     * composition + ablation + pruning = 12; one: 10 fewer of those */
    CHECKF(n_img >= 20, "%d pictures", n_img);
    free(html);
    snprintf(p, sizeof p, "%s/report.ipynb", out);
    CHECK(al_file_exists(p));
    snprintf(p, sizeof p, "%s/stages.tsv", out);
    CHECK(al_file_exists(p));
    snprintf(p, sizeof p, "%s/models/two/mask-gradient.json", out);
    CHECK(al_file_exists(p));
    /* again: every stage but the report is reused, nothing new in the db */
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), t_path("tiny.json"), out,
               t_path("run2")) == 0);
    log = t_slurp(t_path("run2"));
    int reused = 0;
    for (const char *q = log; q && (q = strstr(q, "reused: outputs complete")) != NULL; q++)
        reused++;
    CHECKF(reused == 14, "%d stages reused", reused);
    CHECK(log && !strstr(log, "$ attnlab train"));
    free(log);
    CHECK(t_sql_long(db, "SELECT count(*) FROM runs") == 11);
    /* a changed option reruns what depends on it: model one's steps */
    char changed[sizeof tiny + 32];
    const char *cut = strstr(tiny, "{\"name\": \"one\", \"n_layers\": 1}");
    snprintf(changed, sizeof changed, "%.*s{\"name\": \"one\", \"n_layers\": 1, \"steps\": 10}%s",
             (int)(cut - tiny), tiny, cut + strlen("{\"name\": \"one\", \"n_layers\": 1}"));
    t_write("tiny.json", changed);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), t_path("tiny.json"), out,
               t_path("run3")) == 0);
    log = t_slurp(t_path("run3"));
    reused = 0;
    for (const char *q = log; q && (q = strstr(q, "reused: outputs complete")) != NULL; q++)
        reused++;
    /* retrained: one, and its circuits, scores, ablate; reused: data,
     * tokenizer, encode, train two and its 6 analyses */
    CHECKF(reused == 10, "%d stages reused", reused);
    free(log);
    CHECK(t_sql_long(db, "SELECT count(*) FROM models WHERE train_steps = 10") == 1);
}

/* Every file in experiments/ loads (run from the repository root). */
TEST(exp_shipped_files_load) {
    const char *names[] = {"demo", "induction-2l", "skip-trigrams-1l", "tied-vs-untied", "pruning"};
    char p[128];
    snprintf(p, sizeof p, "experiments/demo.json");
    if (!al_file_exists(p)) t_skip("not run from the repository root (no experiments/)");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "experiments/%s.json", names[i]);
        al_experiment *x = NULL;
        al_err e;
        CHECKF(al_exp_load(p, &x, &e) == 0, "%s", e.msg);
        if (!x) continue;
        CHECK(strcmp(x->name, names[i]) == 0 && x->n_models >= 1 && x->synthetic);
        for (int m = 0; m < x->n_models; m++)
            CHECK(has_opt(x->models[m].train, "\"d_model\":256") &&
                  has_opt(x->models[m].train, "\"lr\":0.01"));
        al_exp_free(x);
    }
    /* the tied-vs-untied study differs in nothing but tying */
    al_experiment *x;
    al_err e;
    CHECK_OK(al_exp_load("experiments/tied-vs-untied.json", &x, &e), &e);
    CHECK(x->n_models == 2 && x->models[0].tied != x->models[1].tied &&
          x->models[0].n_layers == x->models[1].n_layers &&
          x->models[0].steps == x->models[1].steps);
    al_exp_free(x);
    /* the real-text studies: TinyStories from --text, Brown from npm; same
     * recipe (shortformer, vocabulary 512), names table included */
    const char *t = t_write("t.txt", "one story\n");
    CHECK_OK(al_exp_load_text("experiments/tinystories-2l.json", t, &x, &e), &e);
    CHECK(!x->synthetic && !x->brown && strcmp(x->text, t) == 0 && x->n_models == 2);
    CHECK(has_opt(x->models[1].train, "\"pos\":\"shortformer\"") && strstr(x->tok, "512"));
    int n_names = 0;
    for (int i = 0; i < x->n_analyses; i++) n_names += strcmp(x->an[i].kind, "names") == 0;
    CHECK(n_names == 1);
    al_exp_free(x);
    CHECK_OK(al_exp_load("experiments/brown-2l.json", &x, &e), &e);
    CHECK(x->brown && !x->text && strcmp(x->brown_unit, "para") == 0 && x->n_models == 2);
    CHECK(has_opt(x->models[1].train, "\"pos\":\"shortformer\"") && strstr(x->tok, "512"));
    al_exp_free(x);
    /* code: the same recipe on two code bases, the identifier table and
     * its pair task included (path patching, ACDC and the SAE's features);
     * the mixture: Brown with a fifth of code */
    const char *code[] = {"pystdlib", "gostd"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "experiments/%s-2l.json", code[i]);
        CHECKF(al_exp_load(p, &x, &e) == 0, "%s", e.msg);
        if (!x) continue;
        CHECK(x->code_source && !strcmp(x->code_source, code[i]) && x->n_models == 2);
        CHECK(has_opt(x->models[1].train, "\"steps\":10000") &&
              has_opt(x->models[1].train, "\"precision\":\"bf16\""));
        int idents = 0, names_code = 0;
        for (int a = 0; a < x->n_analyses; a++) {
            idents += strstr(x->an[a].opts, "\"idents-key\"") != NULL;
            names_code +=
                !strcmp(x->an[a].kind, "names") && has_opt(x->an[a].opts, "\"code\":true");
        }
        CHECK(idents == 3 && names_code == 1);
        al_exp_free(x);
    }
    CHECK_OK(al_exp_load("experiments/mix-2l.json", &x, &e), &e);
    CHECK(x->n_mix == 2 && !strcmp(x->mix[0].kind, "brown") && !strcmp(x->mix[1].kind, "code") &&
          !strcmp(x->mix[1].source, "pystdlib") && x->mix[0].share == 0.8 &&
          x->mix[1].share == 0.2 && x->mix_seed == 1 && !x->text && !x->code_source);
    al_exp_free(x);
}

/* Ctrl-C during a training stage, then the same command again: the stage
 * continues from the checkpoint the interrupt saved (not from step 0),
 * and the model ends bit-identical to an uninterrupted run, with the
 * whole training curve (steps 0..400) on file for the finished run. */
static const char longer[] =
    "{\"name\": \"resume\", \"threads\": 2,\n"
    " \"data\": {\"synthetic\": {\"stories\": 300, \"seed\": 3}, \"val\": 0.1},\n"
    " \"tokenizer\": {\"vocab\": 320},\n"
    " \"train\": {\"d_model\": 32, \"n_heads\": 4, \"d_head\": 8, \"n_ctx\": 64, \"batch\": 4,\n"
    "           \"steps\": 400, \"eval_every\": 10, \"eval_batches\": 2, \"warmup\": 5, \"lr\": 0.01},\n"
    " \"models\": [{\"name\": \"one\", \"n_layers\": 2}]}\n";

/* A corpus of the user's own ("data": {"text": FILE}) with a tokenizer
 * file of their own ("tokenizer": {"file": ...}): both are taken as they
 * are (the model directory holds that very tokenizer), keyed by their
 * contents, and a second run reuses every stage. */
TEST(exp_text_corpus_and_tokenizer_file) {
    t_pbuf c = t_pcopy("c.txt"), tok = t_pcopy("tok.json"), out = t_pcopy("out");
    CHECK(t_sh("%s data synth --out %s --stories 60 --seed 4 > /dev/null 2>&1 && "
               "%s tokenizer train --in %s --vocab 300 --out %s > /dev/null 2>&1",
               t_bin(), c.s, t_bin(), c.s, tok.s) == 0);
    char js[4096];
    snprintf(js, sizeof js,
             "{\"name\": \"tx\", \"threads\": 1,\n"
             " \"data\": {\"text\": \"%s\", \"val\": 0.1, \"docs\": \"blank\"},\n"
             " \"tokenizer\": {\"file\": \"%s\"},\n"
             " \"train\": {\"d_model\": 32, \"n_heads\": 4, \"d_head\": 8, \"n_ctx\": 32, "
             "\"batch\": 4, \"steps\": 5, \"eval_every\": 5, \"warmup\": 1},\n"
             " \"models\": [{\"name\": \"one\", \"n_layers\": 1}],\n"
             " \"pictures\": false, \"report\": false}\n",
             c.s, tok.s);
    t_write("tx.json", js);
    for (int run = 0; run < 2; run++) {
        CHECKF(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), t_path("tx.json"), out.s,
                    t_path("log")) == 0,
               "run %d: %s", run, t_slurp(t_path("log")));
        char *log = t_slurp(t_path("log"));
        int reused = 0;
        for (const char *q = log; q && (q = strstr(q, "reused: outputs complete")); q++) reused++;
        /* data, tokenizer, encode, train: the first two are the given files */
        CHECKF(reused == (run ? 4 : 2), "run %d: %d stages reused:\n%s", run, reused,
               log ? log : "");
        free(log);
    }
    CHECK(t_sh("cmp -s %s %s/models/one/tokenizer.json", tok.s, out.s) == 0);
    CHECK(t_sh("test -s %s/data/tokens.train.bin", out.s) == 0);
}

TEST(exp_interrupted_training_resumes) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    t_write("r.json", longer);
    char ref[600], out[600], db[700], q[900];
    snprintf(ref, sizeof ref, "%s", t_path("ref"));
    snprintf(out, sizeof out, "%s", t_path("out"));
    snprintf(db, sizeof db, "%s/results.db", out);
    CHECK(t_sh("%s experiment %s --out %s > /dev/null 2>&1", t_bin(), t_path("r.json"), ref) == 0);
    pid_t p = t_spawn(t_path("run1.out"), t_path("run1.err"), "experiment %s --out %s",
                      t_path("r.json"), out);
    /* interrupt once the curve has reached step 50 (the database is
     * committed at every evaluation, so it can be watched) */
    long reached = -1;
    for (int i = 0; i < 1200 && reached < 50; i++) {
        t_sleep(0.05);
        reached = al_file_exists(db) ? t_sql_long(db, "SELECT max(step) FROM train_log") : -1;
    }
    kill(p, SIGINT);
    int rc = t_wait(p, NULL);
    CHECKF(rc != 0, "the experiment finished before the interrupt (step %ld)", reached);
    snprintf(q, sizeof q, "%s/models/one/state.json", out);
    char *st = t_slurp(q);
    long step = -1;
    const char *k = st ? strstr(st, "\"step\":") : NULL;
    if (k) step = strtol(k + 7, NULL, 10);
    free(st);
    CHECKF(step >= 50 && step < 400, "interrupted checkpoint at step %ld", step);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), t_path("r.json"), out,
               t_path("run2")) == 0);
    char *log = t_slurp(t_path("run2"));
    char want[120];
    snprintf(want, sizeof want,
             "continuing the interrupted training from its checkpoint at step %ld", step);
    CHECKF(log && strstr(log, want) && strstr(log, "--resume"), "%s", log ? log : "");
    free(log);
    CHECK(t_sh("cmp -s %s/models/one/model.safetensors %s/models/one/model.safetensors", ref,
               out) == 0);
    CHECK(t_sql_long(db, "SELECT count(*) FROM train_log WHERE run_id = (SELECT run_id FROM runs "
                         "WHERE kind = 'train' AND status = 'done')") == 41);
    CHECK(t_sql_long(db, "SELECT min(step) FROM train_log WHERE run_id = (SELECT run_id FROM runs "
                         "WHERE kind = 'train' AND status = 'done')") == 0);
}

/* A training stage that fails before train has written its own step-0
 * checkpoint (here: an unreadable token file) must not leave the folder's
 * older model (20 steps, options since changed to 40) to be "continued"
 * as if it were this stage's: the next run trains afresh, and ends equal
 * to a run that never had the older model. */
TEST(exp_failed_start_does_not_resume_old_model) {
    if (t_sh("command -v sqlite3 >/dev/null") != 0) t_skip("sqlite3 CLI missing");
    char j20[sizeof longer], j40[sizeof longer], out[600], ref[600], tok[800];
    const char *at = strstr(longer, "\"steps\": 400");
    snprintf(j20, sizeof j20, "%.*s\"steps\": 20%s", (int)(at - longer), longer, at + 12);
    snprintf(j40, sizeof j40, "%.*s\"steps\": 40%s", (int)(at - longer), longer, at + 12);
    snprintf(out, sizeof out, "%s", t_path("out"));
    snprintf(ref, sizeof ref, "%s", t_path("ref"));
    snprintf(tok, sizeof tok, "%s/data/tokens.train.bin", out);
    t_write("j20.json", j20);
    t_write("j40.json", j40);
    CHECK(t_sh("%s experiment %s --out %s > /dev/null 2>&1", t_bin(), t_path("j20.json"), out) ==
          0);
    CHECK(t_sh("cp %s %s.keep && printf 'xx' > %s", tok, tok, tok) == 0);
    CHECK(t_sh("%s experiment %s --out %s > /dev/null 2>&1", t_bin(), t_path("j40.json"), out) !=
          0);
    CHECK(t_sh("mv %s.keep %s", tok, tok) == 0);
    CHECK(t_sh("%s experiment %s --out %s > %s 2>&1", t_bin(), t_path("j40.json"), out,
               t_path("run3")) == 0);
    char *log = t_slurp(t_path("run3"));
    CHECKF(log && !strstr(log, "continuing the interrupted training") && !strstr(log, "--resume"),
           "%s", log ? log : "");
    free(log);
    CHECK(t_sh("%s experiment %s --out %s > /dev/null 2>&1", t_bin(), t_path("j40.json"), ref) ==
          0);
    CHECK(t_sh("cmp -s %s/models/one/model.safetensors %s/models/one/model.safetensors", ref,
               out) == 0);
}
