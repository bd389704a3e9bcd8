/* test_db_show.c -- `attnlab db show`: every count it prints is the
 * database's own (checked against sqlite3), a run's detail matches its
 * row, bad input is one line with exit 1 and the file is never written;
 * and the circuit_main view holds exactly the edges the discover run's
 * circuit file keeps. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "test.h"

/* A database with training, scores, patching and two discover runs (ACDC
 * with a sweep, EAP), circuit files in DIR/c. */
static void fixture(const char *dir) {
    t_tiny_model(dir, 2, 20);
    CHECK(t_sh("%s scores --model %s/m2 --db %s/r.db --data %s/s.val.bin --probe-r 6 --probe-n 4 "
               "--batches 1 --batch 2 > /dev/null 2>&1",
               t_bin(), dir, dir, dir) == 0);
    CHECK(t_sh("%s discover --model %s/m2 --db %s/r.db --probe-r 5 --n 4 --tau 0.0002 --sweep "
               "0,0.002 --out %s/c > /dev/null 2>&1",
               t_bin(), dir, dir, dir) == 0);
    CHECK(t_sh("%s discover --model %s/m2 --db %s/r.db --probe-r 5 --n 4 --method eap --out %s/c "
               "> /dev/null 2>&1",
               t_bin(), dir, dir, dir) == 0);
}

TEST(db_show_counts_match_sqlite) {
    const char *dir = t_tmpdir();
    fixture(dir);
    char db[1100];
    snprintf(db, sizeof db, "%s/r.db", dir);
    CHECK(t_sh("sha256sum %s > %s", db, t_path("before")) == 0);
    CHECK(t_sh("%s db show %s --json > %s", t_bin(), db, t_path("s.json")) == 0);
    char *js = t_slurp(t_path("s.json"));
    cJSON *d = js ? cJSON_Parse(js) : NULL;
    CHECK(d != NULL);
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(d, "runs");
    const cJSON *tables = cJSON_GetObjectItemCaseSensitive(d, "tables");
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(d, "models");
    CHECK(cJSON_GetArraySize(models) == t_sql_long(db, "SELECT count(*) FROM models"));
    CHECK(cJSON_GetArraySize(runs) == t_sql_long(db, "SELECT count(*) FROM runs"));
    CHECK(cJSON_GetArraySize(tables) ==
          t_sql_long(db, "SELECT count(*) FROM sqlite_master WHERE type IN ('table', 'view') AND "
                         "name NOT LIKE 'sqlite_%'"));
    int bad = 0, n_tables = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tables) {
        const char *nm = cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring;
        char q[256];
        snprintf(q, sizeof q, "SELECT count(*) FROM \"%s\"", nm);
        bad += (long)cJSON_GetObjectItemCaseSensitive(t, "rows")->valuedouble != t_sql_long(db, q);
        n_tables++;
    }
    CHECKF(bad == 0 && n_tables > 20, "%d of %d row counts differ", bad, n_tables);
    const cJSON *r;
    int kinds_ok = 0;
    cJSON_ArrayForEach(r, runs) {
        char q[128];
        snprintf(q, sizeof q, "SELECT kind FROM runs WHERE run_id = %d",
                 (int)cJSON_GetObjectItemCaseSensitive(r, "id")->valuedouble);
        char *k = t_sql(db, q);
        kinds_ok += k && !strcmp(k, cJSON_GetObjectItemCaseSensitive(r, "kind")->valuestring);
        free(k);
    }
    CHECK(kinds_ok == cJSON_GetArraySize(runs));
    cJSON_Delete(d);
    free(js);
    /* one run: its options and its rows per table */
    CHECK(t_sh("%s db show %s 2 --json > %s", t_bin(), db, t_path("r.json")) == 0);
    js = t_slurp(t_path("r.json"));
    d = js ? cJSON_Parse(js) : NULL;
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(d, "run");
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(run, "options");
    CHECK(opt && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(opt, "tau")));
    bad = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(d, "tables")) {
        const cJSON *rr = cJSON_GetObjectItemCaseSensitive(t, "run_rows");
        if (cJSON_IsNull(rr)) continue;
        char q[256];
        snprintf(q, sizeof q, "SELECT count(*) FROM \"%s\" WHERE run_id = 2",
                 cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring);
        bad += (long)rr->valuedouble != t_sql_long(db, q);
    }
    CHECK(bad == 0);
    cJSON_Delete(d);
    free(js);
    /* the text form names the same runs */
    CHECK(t_sh("%s db show %s > %s", t_bin(), db, t_path("s.txt")) == 0);
    char *txt = t_slurp(t_path("s.txt"));
    CHECK(txt && strstr(txt, "runs (3):") && strstr(txt, "discover") &&
          strstr(txt, "circuit_main"));
    free(txt);
    /* and one run's text names its kind, options and tables */
    CHECK(t_sh("%s db show %s 2 > %s", t_bin(), db, t_path("r.txt")) == 0);
    txt = t_slurp(t_path("r.txt"));
    char *kind = t_sql(db, "SELECT kind FROM runs WHERE run_id = 2"), head[64];
    snprintf(head, sizeof head, "\nrun 2 (%s):\n  options: {", kind ? kind : "?");
    CHECKF(txt && strstr(txt, head) && strstr(txt, "\"tau\":") && strstr(txt, "circuit_main"), "%s",
           txt ? txt : "");
    free(kind);
    free(txt);
    /* refusals: one line, exit 1 or 2, nothing written */
    CHECK(t_sh("%s db show %s 99 2> %s", t_bin(), db, t_path("e1")) == 1);
    CHECK(t_one_line(t_path("e1"), "has no run 99"));
    CHECK(t_sh("%s db show %s/nope.db 2> %s", t_bin(), dir, t_path("e2")) == 1);
    CHECK(t_one_line(t_path("e2"), "no database"));
    CHECK(t_sh("test -e %s/nope.db", dir) != 0);
    CHECK(t_sh("%s db show %s/s.txt 2> %s", t_bin(), dir, t_path("e3")) == 1);
    CHECK(t_sh("%s db show %s x 2> %s", t_bin(), db, t_path("e4")) == 2);
    CHECK(t_sh("sha256sum %s | cmp -s - %s", db, t_path("before")) == 0);
}

/* circuit_main: each discover run's own circuit, the edges its circuit
 * file keeps (ACDC at the run's --tau, not the sweep's; EAP's). */
TEST(db_show_circuit_main_is_the_circuit_file) {
    const char *dir = t_tmpdir();
    fixture(dir);
    char db[1100];
    snprintf(db, sizeof db, "%s/r.db", dir);
    const char *files[2] = {"circuit-induction-acdc.json", "circuit-induction-eap.json"};
    for (int k = 0; k < 2; k++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/c/%s", dir, files[k]);
        char *js = t_slurp(p);
        cJSON *d = js ? cJSON_Parse(js) : NULL;
        const cJSON *edges = cJSON_GetObjectItemCaseSensitive(d, "edges");
        CHECKF(cJSON_IsArray(edges), "%s has no edges array", files[k]);
        int n = cJSON_GetArraySize(edges), missing = 0;
        const cJSON *ed;
        cJSON_ArrayForEach(ed, edges) {
            const char *snd = cJSON_GetObjectItemCaseSensitive(ed, "sender")->valuestring;
            const char *rcv = cJSON_GetObjectItemCaseSensitive(ed, "receiver")->valuestring;
            const char *ch = cJSON_GetObjectItemCaseSensitive(ed, "channel")->valuestring;
            char q[512], where[128];
            int l, h;
            if (!strcmp(rcv, "logits"))
                snprintf(where, sizeof where, "receiver_layer IS NULL");
            else if (sscanf(rcv, "%d.%d", &l, &h) == 2)
                snprintf(where, sizeof where, "receiver_layer = %d AND receiver_head = %d", l, h);
            else
                snprintf(where, sizeof where, "0");
            snprintf(q, sizeof q,
                     "SELECT count(*) FROM circuit_main WHERE run_id = %d AND "
                     "sender = '%s' AND channel = '%s' AND %s",
                     k + 2, snd, ch, where);
            missing += t_sql_long(db, q) != 1;
        }
        char q[128];
        snprintf(q, sizeof q, "SELECT count(*) FROM circuit_main WHERE run_id = %d", k + 2);
        CHECKF(missing == 0 && t_sql_long(db, q) == n, "%s: %d edges, %d not in the view, view %ld",
               files[k], n, missing, t_sql_long(db, q));
        cJSON_Delete(d);
        free(js);
    }
    /* the ACDC run's sweep circuits are not the main one */
    CHECK(t_sql_long(db, "SELECT count(DISTINCT tau) FROM circuit_edges WHERE run_id = 2") == 3);
    CHECK(t_sql_long(db, "SELECT count(DISTINCT tau) FROM circuit_main WHERE run_id = 2") == 1);
    CHECK(t_sql_long(db, "SELECT count(*) FROM circuit_main WHERE run_id = 2") > 0);
}
