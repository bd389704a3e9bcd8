/* test_registry_cli.c -- tests that walk the analysis registry
 * (registry.h), so that a new analysis is covered by adding its
 * descriptor: every command's --json is one JSON document with its
 * versioned schema and run id; a bad input (mask, head, pair file,
 * circuit file) leaves `runs` unchanged; every command with the task
 * group (and the probe commands) accepts --probe-tokens seen. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attnlab/behave.h"
#include "attnlab/patch.h"
#include "attnlab/registry.h"
#include "test.h"

/* Small options per command, so each run takes a moment on the tiny
 * model (T = 32); a command not listed runs with none. */
static const char *small(const char *name) {
    static const char *const opts[][2] = {
        {"circuits", "--top-k 5 --mc-samples 10"},
        {"scores", "--probe-r 6 --probe-n 4 --batches 1 --batch 2"},
        {"ablate", "--probe-r 6 --probe-n 4 --batches 1 --batch 2"},
        {"prune", "--method random --batches 2 --batch 2"},
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

static int has_flag(const al_analysis *a, const char *flag) {
    for (const al_flag *f = a->cmd->flags; f->name; f++)
        if (strcmp(f->name, flag) == 0) return 1;
    return 0;
}

/* "--data DIR/s.val.bin" for the commands that read tokens, and the
 * inputs of the commands that need more (the SAE commands: a directory in
 * DIR; `sae train` runs first and makes the SAE `sae features` reads) */
static void data_arg(const al_analysis *a, const char *dir, char *buf, size_t cap) {
    if (a->exp_data == AL_EXP_DATA_VAL)
        snprintf(buf, cap, "--data %s/s.val.bin", dir);
    else
        buf[0] = 0;
    size_t n = strlen(buf);
    if (!strcmp(a->name, "sae"))
        snprintf(buf + n, cap - n,
                 " --data %s/s.train.bin --val %s/s.val.bin --layer 1 --out "
                 "%s/sae-walk --force --steps 4 --batch 64 --eval-windows 2",
                 dir, dir, dir);
    else if (!strcmp(a->name, "sae_features"))
        snprintf(buf + n, cap - n, " --sae %s/sae-walk --windows 4 --probe-r 6 --probe-n 4", dir);
}

TEST(registry_cli_json_every_analysis) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db"), out = t_pcopy("out.json");
    t_tiny_model(dir.s, 2, 20);
    int n = 0;
    for (const al_analysis *const *ap = al_analyses; *ap; ap++, n++) {
        const al_analysis *a = *ap;
        char data[4096], want[64];
        data_arg(a, dir.s, data, sizeof data);
        int rc = t_sh("%s %s --model %s/m2 --db %s %s %s --threads 2 --json > %s 2>/dev/null",
                      t_bin(), a->cmd->name, dir.s, db.s, data, small(a->name), out.s);
        CHECKF(rc == 0, "%s --json: exit %d", a->name, rc);
        char *txt = t_slurp(out.s);
        cJSON *j = txt ? cJSON_Parse(txt) : NULL;
        CHECKF(j != NULL, "%s --json: not one JSON document:\n%s", a->name, txt ? txt : "");
        snprintf(want, sizeof want, "attnlab.%s/1", a->name);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "schema");
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "run");
        CHECKF(cJSON_IsString(s) && strcmp(s->valuestring, want) == 0, "%s: schema", a->name);
        CHECKF(cJSON_IsNumber(r) && r->valuedouble == n + 1, "%s: run id", a->name);
        cJSON_Delete(j);
        free(txt);
    }
    char want[32];
    snprintf(want, sizeof want, "%d|%d", n, n);
    CHECK_SQL(db.s, "SELECT count(*), sum(status = 'done') FROM runs", want);
    /* discover --sweep lists every circuit of its run */
    CHECK(t_sh("%s discover --model %s/m2 --db %s --probe-r 6 --n 4 --batch 2 --sweep 0.1,1 "
               "--threads 2 --json > %s 2>/dev/null",
               t_bin(), dir.s, db.s, out.s) == 0);
    char *txt = t_slurp(out.s);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "sweep")) == 3);
    cJSON_Delete(j);
    free(txt);
}

/* s with every time and rate blanked: a number followed by " s" or
 * " activations/s" becomes "#" (two runs differ only there). */
static void scrub_times(char *s) {
    char *w = s;
    for (char *r = s; *r;) {
        char *q = r;
        while ((*q >= '0' && *q <= '9') || *q == '.') q++;
        if (q > r && (!strncmp(q, " s", 2) || !strncmp(q, " activations/s", 14)) &&
            (r == s || r[-1] == ' ' || r[-1] == '(')) {
            *w++ = '#';
            r = q;
        } else if (q > r) {
            while (r < q) *w++ = *r++;
        } else
            *w++ = *r++;
    }
    *w = 0;
}

/* The text is a renderer of the run's document: for every analysis, the
 * document --json prints, parsed back and handed to the descriptor's
 * text phase, reads as the command's own text (the run id and database
 * set to the text run's; times blanked). Nothing the text shows comes
 * from elsewhere. */
TEST(registry_cli_text_is_the_json_rendered) {
    t_pbuf dir = t_pcopy("."), db1 = t_pcopy("t.db"), db2 = t_pcopy("j.db");
    t_pbuf txt = t_pcopy("out.txt"), js = t_pcopy("out.json"), re = t_pcopy("re.txt");
    t_tiny_model(dir.s, 2, 20);
    int run = 0;
    for (const al_analysis *const *ap = al_analyses; *ap; ap++) {
        const al_analysis *a = *ap;
        char data[4096];
        run++;
        data_arg(a, dir.s, data, sizeof data);
        CHECKF(a->doc && a->text, "%s: no doc or text phase", a->name);
        int rc = t_sh("%s %s --model %s/m2 --db %s %s %s --threads 1 > %s 2>/dev/null", t_bin(),
                      a->cmd->name, dir.s, db1.s, data, small(a->name), txt.s) |
                 t_sh("%s %s --model %s/m2 --db %s %s %s --threads 1 --json > %s 2>/dev/null",
                      t_bin(), a->cmd->name, dir.s, db2.s, data, small(a->name), js.s);
        CHECKF(rc == 0, "%s: exit %d", a->name, rc);
        char *t = t_slurp(txt.s), *j = t_slurp(js.s);
        cJSON *doc = j ? cJSON_Parse(j) : NULL;
        CHECKF(doc != NULL, "%s: no document", a->name);
        if (!doc || !t || !a->text) {
            free(t), free(j), cJSON_Delete(doc);
            continue;
        }
        cJSON_ReplaceItemInObject(doc, "db", cJSON_CreateString(db1.s));
        cJSON_ReplaceItemInObject(doc, "run", cJSON_CreateNumber(run));
        fflush(stdout);
        FILE *f = fopen(re.s, "w");
        int saved = dup(1);
        CHECK(f && saved >= 0 && dup2(fileno(f), 1) >= 0);
        a->text(doc);
        fflush(stdout);
        dup2(saved, 1), close(saved), fclose(f);
        char *r = t_slurp(re.s);
        CHECK(r != NULL);
        if (r) {
            scrub_times(t), scrub_times(r);
            /* the lines a text run prints before its result (progress notes) are not the
             * document's: compare from the first line of the rendering on */
            const char *from = strstr(t, r) ? strstr(t, r) : t;
            CHECKF(!strcmp(from, r),
                   "%s: the text and the document rendered differ:\n--- text\n%s"
                   "--- rendered\n%s",
                   a->name, t, r);
        }
        free(r), free(t), free(j);
        cJSON_Delete(doc);
    }
}

TEST(registry_cli_bad_input_leaves_no_run) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 20);
    t_write("bad.json", "{not json");
    t_pbuf bad = t_pcopy("bad.json");
    t_write("bad.jsonl", "{\"clean\": \"a\"}\n");
    t_pbuf badp = t_pcopy("bad.jsonl");
    for (const al_analysis *const *ap = al_analyses; *ap; ap++) {
        const al_analysis *a = *ap;
        char data[4096];
        data_arg(a, dir.s, data, sizeof data);
        struct {
            const char *flag, *args, *file;
        } cases[] = {{"mask", "--mask", bad.s},
                     {"circuit", "--circuit", bad.s},
                     {"pairs", "--task file --pairs", badp.s},
                     {"heads", "--heads", "1.9"}};
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            if (!has_flag(a, cases[k].flag)) continue;
            /* ablate's --pairs is its pair mode, not the task group's file */
            if (!strcmp(cases[k].flag, "pairs") && !(a->groups & AL_GROUP_TASK)) continue;
            int rc = t_sh("%s %s --model %s/m2 --db %s %s %s %s %s --threads 2 >/dev/null "
                          "2>/dev/null",
                          t_bin(), a->cmd->name, dir.s, db.s, data, small(a->name), cases[k].args,
                          cases[k].file);
            CHECKF(rc == 1, "%s --%s bad: exit %d", a->name, cases[k].flag, rc);
            long runs = t_sql_long(db.s, "SELECT count(*) FROM runs");
            CHECKF(runs <= 0, "%s --%s bad: %ld runs", a->name, cases[k].flag, runs);
        }
    }
}

TEST(registry_cli_probe_tokens_seen) {
    t_pbuf dir = t_pcopy("."), db = t_pcopy("r.db");
    t_tiny_model(dir.s, 2, 20);
    int n = 0;
    for (const al_analysis *const *ap = al_analyses; *ap; ap++) {
        const al_analysis *a = *ap;
        if (!has_flag(a, "probe-tokens")) continue;
        CHECKF((a->groups & AL_GROUP_TASK) || !strcmp(a->name, "scores") ||
                   !strcmp(a->name, "ablate"),
               "%s: --probe-tokens outside the task group", a->name);
        /* its --probe-tokens is its --task's, and it needs an SAE:
         * test_sae_cli.c runs it with a task */
        if (!strcmp(a->name, "sae_features")) continue;
        char data[4096];
        data_arg(a, dir.s, data, sizeof data);
        int rc = t_sh("%s %s --model %s/m2 --db %s %s %s --probe-tokens seen --threads 2 "
                      ">/dev/null 2>&1",
                      t_bin(), a->cmd->name, dir.s, db.s, data, small(a->name));
        CHECKF(rc == 0, "%s --probe-tokens seen: exit %d", a->name, rc);
        n++;
    }
    /* every command that builds the induction task */
    for (const al_analysis *const *ap = al_analyses; *ap; ap++)
        if ((*ap)->groups & AL_GROUP_TASK) CHECKF(has_flag(*ap, "probe-tokens"), "%s", (*ap)->name);
    CHECK(n >= 6);
    /* The pairs those runs used, read back through the task hash each stored: the task made
     * here from the seen ids with the same options has that hash, holds only seen ids (clean
     * and corrupted, BOS aside), and differs from the task of every id. The tiny corpus leaves
     * most of the 320 ids unseen, so a task drawn from all ids would hold some. */
    al_behave b;
    al_err e;
    t_pbuf mdir = t_pcopy("m2"), db2 = t_pcopy("x.db"); /* the model t_tiny_model made */
    CHECK_OK(al_behave_load(&b, mdir.s, NULL, db2.s, &e), &e);
    al_probe_load pl;
    CHECK_OK(al_probe_load_open(&pl, "seen", mdir.s, NULL, NULL, b.m.cfg.d_vocab, &e), &e);
    const unsigned char *seen = pl.allowed;
    int n_seen = pl.n_ids;
    CHECKF(n_seen > 2 && n_seen < b.m.cfg.d_vocab / 2, "%d of %d ids seen", n_seen,
           b.m.cfg.d_vocab);
    char hex[2][17];
    for (int k = 0; k < 2; k++) {
        al_patch_opts o = al_patch_opts_defaults();
        o.probe_r = 6, o.probe_n = 4, o.probe_src = k ? NULL : al_probe_load_src(&pl);
        al_pairs t;
        CHECK_OK(al_patch_task_make(&t, &b.m, b.tok, al_behave_bos(&b), &o, &e), &e);
        snprintf(hex[k], 17, "%016llx", (unsigned long long)al_pairs_hash(&t));
        int unseen = 0;
        for (int i = 0; i < t.N; i++)
            for (int p = 1; p < t.len[i]; p++) /* position 0: BOS */
                unseen += !seen[t.clean[i * t.T + p]] + !seen[t.corr[i * t.T + p]];
        CHECKF(k ? unseen > 0 : unseen == 0, "task of %s ids: %d unseen ids", k ? "all" : "seen",
               unseen);
        al_pairs_free(&t);
    }
    CHECK(strcmp(hex[0], hex[1]) != 0);
    al_probe_load_free(&pl);
    al_behave_close(&b);
    const char *tables[] = {"patching_runs", "attribution_runs", "circuit_runs"};
    for (int k = 0; k < 3; k++) {
        char q[256];
        snprintf(q, sizeof q, "SELECT count(*) FROM %s", tables[k]);
        CHECKF(t_sql_long(db.s, q) >= 1, "%s: no run", tables[k]);
        snprintf(q, sizeof q, "SELECT group_concat(DISTINCT task_hash) FROM %s", tables[k]);
        CHECK_SQL(db.s, q, hex[0]);
    }
}
