/* test_ln_cli.c -- LayerNorm and bias models through the CLI: trained by
 * `attnlab train --norm ln --biases all`, every analysis of the registry
 * either runs on them or refuses them in one line before its run row
 * (those that assume the plain model), `--circuit` runs take them, and
 * the commands around them (run, heatmap, report) take them. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/registry.h"
#include "test.h"

/* A tiny LN + bias model in DIR/ln (t_tiny_model's data and shape). */
static void ln_model(const char *dir, const char *flags) {
    t_tiny_model(dir, 1, 1); /* the corpus, tokenizer and token files */
    CHECK(t_sh("%s train --data %s/s.train.bin --val %s/s.val.bin --tokenizer %s/tok.json --out "
               "%s/ln --steps 30 --n-layers 2 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 "
               "--batch 4 --eval-every 0 --warmup 2 --lr 0.01 --threads 2 %s > %s 2>&1",
               t_bin(), dir, dir, dir, dir, flags, t_path("train.log")) == 0);
}

static const char *small(const char *name) {
    static const char *const opts[][2] = {
        {"circuits", "--top-k 5 --mc-samples 10"},
        {"scores", "--probe-r 6 --probe-n 4 --batches 1 --batch 2"},
        {"ablate", "--probe-r 6 --probe-n 4 --batches 1 --batch 2"},
        {"prune", "--method gradient --batches 2 --batch 2"},
        {"patch", "--probe-r 6 --n 4 --batch 2"},
        {"paths", "--probe-r 6 --n 4 --batch 2"},
        {"attribute", "--probe-r 6 --n 4 --batch 2 --no-compare"},
        {"discover", "--probe-r 6 --n 4 --batch 2 --sweep 0.1"},
        {"names", "--stories 3"},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (strcmp(opts[i][0], name) == 0) return opts[i][1];
    return "";
}

static void data_arg(const al_analysis *a, const char *dir, char *buf, size_t cap) {
    if (a->exp_data == AL_EXP_DATA_VAL)
        snprintf(buf, cap, "--data %s/s.val.bin", dir);
    else
        buf[0] = 0;
    size_t n = strlen(buf);
    if (!strcmp(a->name, "sae"))
        snprintf(buf + n, cap - n,
                 " --data %s/s.train.bin --val %s/s.val.bin --layer 1 --out "
                 "%s/sae-ln --force --steps 4 --batch 64 --eval-windows 2",
                 dir, dir, dir);
    else if (!strcmp(a->name, "sae_features"))
        snprintf(buf + n, cap - n, " --sae %s/sae-ln --windows 4 --probe-r 6 --probe-n 4", dir);
}

/* Every analysis runs on a LayerNorm model with every bias, stores one
 * finished run and prints one JSON document. */
TEST(ln_cli_every_analysis) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.json");
    t_pbuf err = t_pcopy("err.txt");
    ln_model(dir.s, "--norm ln --biases all");
    char *cfg = t_slurp(t_path("ln/config.json"));
    CHECK(cfg && strstr(cfg, "\"normalization_type\":\t\"LN\"") &&
          strstr(cfg, "\"b_Q\", \"b_K\", \"b_V\", \"b_O\", \"b_U\""));
    free(cfg);
    int done = 0;
    for (const al_analysis *const *ap = al_analyses; *ap; ap++) {
        const al_analysis *a = *ap;
        char data[4096];
        data_arg(a, dir.s, data, sizeof data);
        int rc = t_sh("%s %s --model %s/ln --db %s %s %s --threads 2 --json > %s 2> %s", t_bin(),
                      a->cmd->name, dir.s, db.s, data, small(a->name), out.s, err.s);
        CHECKF(rc == 0, "%s on a LayerNorm model: exit %d: %s", a->name, rc, t_slurp(err.s));
        char *txt = t_slurp(out.s);
        cJSON *j = txt ? cJSON_Parse(txt) : NULL;
        CHECKF(j != NULL, "%s --json: not one JSON document", a->name);
        cJSON_Delete(j);
        free(txt);
        done++;
    }
    char want[32];
    snprintf(want, sizeof want, "%d|%d", done, done);
    CHECK_SQL(db.s, "SELECT count(*), sum(status = 'done') FROM runs", want);
    /* attribute and circuits store what they fold, freeze and leave out
     * with the run (run_warnings) */
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM run_warnings w JOIN runs r USING (run_id) "
                           "WHERE r.kind = 'attribute' AND w.message LIKE 'attribution freezes "
                           "LayerNorm scales%'") == 1);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM run_warnings w JOIN runs r USING (run_id) "
                           "WHERE r.kind = 'circuits' AND (w.message LIKE 'circuits of a LayerNorm "
                           "model read its weights with LayerNorm folded in%' OR w.message LIKE "
                           "'circuits leave the biases out%')") == 2);
    /* a circuit run (--circuit) takes the model too: the empty circuit
     * (every edge carries the resampled run's value) */
    t_write("c.json",
            "{\"format\": \"attnlab-circuit\", \"version\": 1, \"n_edges\": 0, \"edges\": []}");
    int rc = t_sh("%s scores --model %s/ln --db %s --circuit %s %s --threads 2 > %s 2> %s", t_bin(),
                  dir.s, db.s, t_path("c.json"), small("scores"), out.s, err.s);
    CHECKF(rc == 0, "scores --circuit: exit %d: %s", rc, t_slurp(err.s));
    char *txt = t_slurp(out.s);
    CHECKF(txt && strstr(txt, "0 of "), "scores --circuit printed: %s", txt ? txt : "");
    free(txt);
    snprintf(want, sizeof want, "%d", done + 1);
    CHECK_SQL(db.s, "SELECT count(*) FROM runs", want);
}

/* attribute on a LayerNorm model, compared with actual patching: heads and
 * head x position are, edges are not (empty agreement, no actuals); the
 * components include each layer's b_O and the constant, the dla picture
 * draws them, and the notes are stored with the run. */
TEST(ln_cli_attribute_compared) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err.txt");
    ln_model(dir.s, "--norm ln --biases all");
    CHECK(t_sh("%s attribute --model %s/ln --db %s --probe-r 6 --n 4 --batch 2 --threads 2 > %s "
               "2> %s",
               t_bin(), dir.s, db.s, t_path("out.txt"), err.s) == 0);
    CHECK_SQL(db.s, "SELECT grid, n > 0, pearson IS NULL FROM attribution_agreement ORDER BY grid",
              "edge|1|0\nhead|1|0\nhead_pos|1|0");
    CHECK_SQL(db.s,
              "SELECT count(*) > 0, sum(actual IS NOT NULL) > 0 FROM attribution_patching "
              "WHERE grid = 'edge'",
              "1|1");
    CHECK_SQL(db.s,
              "SELECT group_concat(component, ' ') FROM (SELECT component FROM "
              "logit_attribution WHERE pos IS NULL AND component NOT LIKE '%.%' ORDER BY "
              "component)",
              "b_O_0 b_O_1 const embed pos");
    CHECK_SQL(db.s,
              "SELECT count(*) FROM run_warnings WHERE message LIKE 'attribution freezes%' "
              "OR message LIKE 'attribution of biases%' OR message LIKE 'attribution "
              "patching''s edge estimates are not compared%'",
              "2");
    char *txt = t_slurp(err.s);
    CHECK(txt && strstr(txt, "attnlab: warning: attribution freezes LayerNorm scales"));
    free(txt);
    /* the picture's rows: an SVG's labels are text */
    CHECK(t_sh("%s heatmap --model %s/ln --db %s --what dla --out %s > /dev/null 2> %s", t_bin(),
               dir.s, db.s, t_path("dla.svg"), err.s) == 0);
    char *svg = t_slurp(t_path("dla.svg"));
    CHECK(svg && strstr(svg, ">b_O_0<") && strstr(svg, ">b_O_1<") && strstr(svg, ">const<"));
    free(svg);
}

/* run, heatmap and report take a LayerNorm model; the pictures read from
 * its weights refuse it by name, and the report says why it has none. */
TEST(ln_cli_run_heatmap_report) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), err = t_pcopy("err.txt");
    ln_model(dir.s, "--norm lnpre --biases qkvo,u --pos shortformer");
    CHECK(t_sh("%s run --model %s/ln --prompt 'Once upon a time' --save-cache %s > %s 2> %s",
               t_bin(), dir.s, t_path("cache.safetensors"), t_path("run.out"), err.s) == 0);
    CHECK(t_sh("%s heatmap --model %s/ln --what attention --layer 1 --prompt 'the cat' --out %s "
               "> /dev/null 2> %s",
               t_bin(), dir.s, t_path("att.png"), err.s) == 0);
    int rc =
        t_sh("%s heatmap --model %s/ln --what qk --layer 0 --head 1 --out %s > /dev/null 2> %s",
             t_bin(), dir.s, t_path("qk.png"), err.s);
    CHECKF(rc == 1 && t_one_line(err.s, "circuits from the weights need a model's LayerNorm "
                                        "folded into them (this one has normalization_type LNPre"),
           "heatmap qk: exit %d", rc);
    /* circuits of a shortformer LayerNorm model: token parts folded,
     * positional parts raw, and the note says so */
    rc = t_sh("%s circuits --model %s/ln --db %s %s > /dev/null 2> %s", t_bin(), dir.s, db.s,
              small("circuits"), err.s);
    CHECKF(rc == 0, "circuits on a shortformer LN model: exit %d", rc);
    CHECK(t_sql_long(db.s, "SELECT count(*) FROM run_warnings WHERE message LIKE 'circuits of a "
                           "shortformer LayerNorm model read the token parts%'") == 1);
    /* the positional QK picture reads the raw weights too */
    CHECK(t_sh("%s heatmap --model %s/ln --what qk-pos --layer 1 --head 0 --out %s > /dev/null "
               "2> %s",
               t_bin(), dir.s, t_path("qkpos.png"), err.s) == 0);
    CHECK(t_sh("%s scores --model %s/ln --db %s %s --threads 2 > /dev/null 2>&1", t_bin(), dir.s,
               db.s, small("scores")) == 0);
    CHECK(t_sh("%s report --db %s --model %s/ln --out %s --repeat 6 > /dev/null 2> %s", t_bin(),
               db.s, dir.s, t_path("rep"), err.s) == 0);
    char *html = t_slurp(t_path("rep/index.html"));
    CHECK(html && strstr(html, "LNPre (no w, b) before every layer") &&
          strstr(html, "b_Q, b_K, b_V, b_O, b_U") &&
          strstr(html, "Circuits from the weights (spectra, QK and OV circuits, composition) are "
                       "not drawn"));
    free(html);
}

/* An experiment's models take norm, biases and ln_eps as train does, and
 * a value train would refuse is refused when the file is loaded. */
TEST(ln_cli_experiment_keys) {
    const char *exp_json = T_EXP_TINY_2L("ln") " \"analyses\": {\"scores\": true}}";
    char *text = malloc(strlen(exp_json) + 64);
    const char *at = strstr(exp_json, "\"n_layers\": 2}");
    CHECK(at != NULL);
    if (!at) return;
    snprintf(text, strlen(exp_json) + 64,
             "%.*s\"n_layers\": 2, \"norm\": \"ln\", \"biases\": \"qkvo\"}%s", (int)(at - exp_json),
             exp_json, at + strlen("\"n_layers\": 2}"));
    t_exp_refused(text, "\"norm\": \"ln\"", "\"norm\": \"rms\"",
                  "models[0].norm: must be \"none\", \"ln\" or \"lnpre\"");
    t_exp_refused(text, "\"biases\": \"qkvo\"", "\"biases\": \"qkvx\"",
                  "models[0].biases: must be \"none\", \"all\" or letters of q, k, v, o, u");
    t_exp_refused(text, "\"norm\": \"ln\"", "\"norm\": 3", "models[0].norm");
    free(text);
}
