/* test_readonly.c -- commands that only read a results database write
 * nothing: no journal switch, no -wal or -shm beside it, and they work on
 * a file and folder the user cannot write (store.c's
 * store_sqlite_open_ro, al_store_open_read). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attnlab/util.h"
#include "test.h"

/* Every file in dir with its sha256 (and so its size and bytes), one per
 * line, sorted: two equal snapshots mean nothing appeared, went or
 * changed. */
static char *snapshot(const char *dir) {
    char out[1100];
    snprintf(out, sizeof out, "%s.snap", dir);
    if (t_sh("cd '%s' && find . -type f | LC_ALL=C sort | xargs -r sha256sum > '%s'", dir, out))
        return NULL;
    return t_slurp(out);
}

/* the readers, each on db in a folder whose model is m: db show (all,
 * one run, --json), the pictures and the report (out elsewhere), db
 * merge (OUT elsewhere), and the Python package's results reader */
static void read_everything(const char *db, const char *model, const char *tag, int as_nobody) {
    const char *who = as_nobody ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
    char out[1100];
    snprintf(out, sizeof out, "%s", t_path(tag));
    CHECK(t_sh("mkdir -p %s && chmod 777 %s", out, out) == 0);
    CHECKF(t_sh("%s%s db show %s > %s/show.txt 2> %s/err.txt", who, t_bin(), db, out, out) == 0,
           "%s: db show", tag);
    CHECKF(t_sh("%s%s db show %s 1 --json > %s/show1.json 2> %s/err.txt", who, t_bin(), db, out,
                out) == 0,
           "%s: db show RUN --json", tag);
    CHECKF(t_sh("%s%s heatmap --db %s --model %s --what ablation --out %s/abl.png > /dev/null 2> "
                "%s/err.txt",
                who, t_bin(), db, model, out, out) == 0,
           "%s: heatmap", tag);
    CHECKF(t_sh("%s%s report --db %s --model %s --out %s/rep --repeat 4 > /dev/null 2> %s/err.txt",
                who, t_bin(), db, model, out, out) == 0,
           "%s: report", tag);
    CHECKF(t_sh("%s%s db merge %s/merged.db %s > /dev/null 2> %s/err.txt", who, t_bin(), out, db,
                out) == 0,
           "%s: db merge input", tag);
    CHECK_SQL(t_path("m.db"), "SELECT count(*) FROM runs", "2");
    char q[1400];
    snprintf(q, sizeof q, "%s/merged.db", out);
    CHECK_SQL(q, "SELECT count(*) FROM runs", "2");
    char cwd[1024];
    if (access("/usr/bin/python3", X_OK) == 0 && getcwd(cwd, sizeof cwd))
        CHECKF(t_sh("cd %s && %senv PYTHONPATH=%s/python /usr/bin/python3 -c 'import sys, attnlab; "
                    "c = attnlab.open_results(sys.argv[1]); n = c.execute(\"SELECT count(*) FROM "
                    "runs\").fetchone()[0]; c.close(); sys.exit(n != 2)' %s 2> %s/err.txt",
                    out, who, cwd, db, out) == 0,
               "%s: python open_results", tag);
}

static void fixture(void) {
    t_tiny_model(t_tmpdir(), 2, 10);
    char m[1100];
    snprintf(m, sizeof m, "%s", t_path("m2"));
    CHECK(t_sh("%s scores --model %s --db %s --probe-r 8 --threads 2 > /dev/null 2>&1", t_bin(), m,
               t_path("m.db")) == 0);
    CHECK(
        t_sh(
            "%s ablate --model %s --data %s --each --probe-r 8 --db %s --threads 2 > /dev/null 2>&1",
            t_bin(), m, t_path("s.val.bin"), t_path("m.db")) == 0);
}

/* A database a writer closed is in rollback-journal mode; one an older
 * attnlab (or a writer that died) left is in WAL mode with no -wal: both
 * are read with nothing written or made beside them. */
TEST(readonly_readers_write_nothing) {
    fixture();
    CHECK_SQL(t_path("m.db"), "PRAGMA journal_mode", "delete");
    for (int wal = 0; wal < 2; wal++) {
        CHECK(t_sh("rm -rf %s && mkdir %s && cp %s %s/r.db", t_path("dbdir"), t_path("dbdir"),
                   t_path("m.db"), t_path("dbdir")) == 0);
        t_pbuf dir = t_pcopy("dbdir"), db = t_pcopy("dbdir/r.db");
        if (wal) {
            CHECK(t_sh("sqlite3 %s 'PRAGMA journal_mode = WAL' > /dev/null", db.s) == 0);
            CHECK(!al_file_exists(t_path("dbdir/r.db-wal")));
        }
        char *before = snapshot(dir.s);
        read_everything(db.s, t_path("m2"), wal ? "out-wal" : "out-delete", 0);
        char *after = snapshot(dir.s);
        CHECKF(before && after && !strcmp(before, after),
               "%s mode: the folder changed:\n%s\n--\n%s", wal ? "WAL" : "rollback",
               before ? before : "", after ? after : "");
        free(before);
        free(after);
    }
}

/* A database of mode 444 in a folder of mode 555, read by a user who is
 * not its owner (the tests run as root, who may write anything: the
 * readers run as nobody). */
TEST(readonly_folder_another_user) {
    if (geteuid() != 0 || t_sh("setpriv --reuid=65534 --regid=65534 --clear-groups true") != 0) {
        t_skip("needs root and setpriv to run the readers as another user");
        return;
    }
    /* by absolute paths: a checkout inside a folder only root may enter
     * (mktemp -d makes them 0700) is out of nobody's reach */
    char cwd[1024], bin[2100];
    if (!getcwd(cwd, sizeof cwd)) return;
    snprintf(bin, sizeof bin, "%s%s%s", t_bin()[0] == '/' ? "" : cwd, t_bin()[0] == '/' ? "" : "/",
             t_bin());
    if (t_sh("setpriv --reuid=65534 --regid=65534 --clear-groups sh -c 'test -x %s && test -r "
             "%s/python/attnlab/__init__.py'",
             bin, cwd) != 0) {
        t_skip("the checkout (the attnlab binary, the Python package) is not reachable by user "
               "nobody");
        return;
    }
    fixture();
    /* the test folder must be reachable by nobody */
    CHECK(t_sh("chmod o+rx %s %s/.. && chmod -R o+rX %s", t_tmpdir(), t_tmpdir(), t_path("m2")) ==
          0);
    for (int wal = 0; wal < 2; wal++) {
        CHECK(t_sh("chmod -R u+w %s 2>/dev/null; rm -rf %s && mkdir %s && cp %s %s/r.db",
                   t_path("ro"), t_path("ro"), t_path("ro"), t_path("m.db"), t_path("ro")) == 0);
        t_pbuf dir = t_pcopy("ro"), db = t_pcopy("ro/r.db");
        if (wal) CHECK(t_sh("sqlite3 %s 'PRAGMA journal_mode = WAL' > /dev/null", db.s) == 0);
        CHECK(t_sh("chmod 444 %s && chmod 555 %s", db.s, dir.s) == 0);
        /* really unwritable to nobody */
        CHECK(t_sh("setpriv --reuid=65534 --regid=65534 --clear-groups touch %s/x 2>/dev/null",
                   dir.s) != 0);
        char *before = snapshot(dir.s);
        read_everything(db.s, t_path("m2"), wal ? "ro-wal" : "ro-delete", 1);
        char *after = snapshot(dir.s);
        CHECKF(before && after && !strcmp(before, after), "%s mode: the folder changed",
               wal ? "WAL" : "rollback");
        free(before);
        free(after);
    }
    CHECK(t_sh("chmod -R u+w %s", t_path("ro")) == 0);
}

/* A database of an older schema is read by the pictures and the report
 * through a migrated copy in memory: the file keeps its version and its
 * bytes. */
TEST(readonly_older_schema_read_in_memory) {
    fixture();
    t_pbuf db = t_pcopy("m.db");
    CHECK(t_sh("sqlite3 '%s' \"" T_DROP_SAE_SQL "DROP VIEW head_summary; CREATE VIEW head_summary "
               "AS SELECT 1 AS x; PRAGMA user_version = 12\"",
               db.s) == 0);
    char before[65], after[65];
    al_err e;
    CHECK_OK(al_sha256_file(db.s, before, &e), &e);
    CHECK(t_sh("%s report --db %s --model %s --out %s --repeat 4 > /dev/null 2> %s", t_bin(), db.s,
               t_path("m2"), t_path("rep"), t_path("err.txt")) == 0);
    CHECK(t_sh("%s heatmap --db %s --model %s --what ablation --out %s > /dev/null 2> %s", t_bin(),
               db.s, t_path("m2"), t_path("abl.png"), t_path("err.txt")) == 0);
    CHECK_OK(al_sha256_file(db.s, after, &e), &e);
    CHECK(!strcmp(before, after));
    CHECK_SQL(db.s, "PRAGMA user_version", "12");
    char *html = t_slurp(t_path("rep/index.html"));
    CHECK(html && strstr(html, "<h2>"));
    free(html);
}
