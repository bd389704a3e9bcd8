/* test_faults.c -- every allocation, file write and store statement of a
 * command, made to fail.
 *
 * Bad input reaches only the checks written for it; memory, the disk and
 * the database can fail anywhere. Each command below runs again and again
 * on a fresh copy of a small work folder, with util.c's fault points
 * failing one site (a caller of al_malloc, al_calloc, al_grow, an atomic
 * write, a store statement or a cJSON function that allocates) that no
 * run has failed before
 * (al_fault_arm_new), until a run passes every site. Each failed run must
 * exit 1 with one line on stderr that is not a warning, leak nothing
 * (under AddressSanitizer), and leave the folder as it was: every file
 * byte for byte, no file more or less (no temporary, no half-made output,
 * no -wal or -shm), and the database whole, with the same rows in every
 * table but at most one run marked failed; where a failure keeps work
 * done before it (a trained checkpoint), only in a folder the message
 * names. A run that absorbs the fault (a picture it could not draw, a
 * best-effort warning) must succeed whole.
 *
 * The commands run in a child forked from this test, not as new
 * processes: a site is a return address, which a fork keeps, so a site
 * failed in one command is not failed again in the next, and a run costs
 * the command's work, not a program start. ATTNLAB_FAULT_DEBUG=1 prints
 * each absorbed fault's site as file and offset (addr2line -e FILE takes
 * the offset less one). */
#define _GNU_SOURCE /* nftw, mmap MAP_ANONYMOUS */
#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "attnlab/args.h"
#include "attnlab/gemm.h"
#include "attnlab/json.h"
#include "attnlab/registry.h"
#include "attnlab/safetensors.h"
#include "attnlab/util.h"
#include "test.h"

/* The runner's helpers for a process that leaves through _exit (runner.c):
 * LeakSanitizer's check and gcov's counts. */
int t_leaks_found(void);
void t_cov_flush(void);

extern al_command al_cmd_data_synth, al_cmd_tokenizer_train, al_cmd_encode, al_cmd_train,
    al_cmd_run, al_cmd_heatmap, al_cmd_report, al_cmd_db_merge, al_cmd_db_show, al_cmd_debug_dump,
    al_cmd_compare, al_cmd_tokenizer_show, al_cmd_import, al_cmd_data_prose, al_cmd_data_mix,
    al_cmd_experiment;

static al_command *find_command(const char *name) {
    al_command *fixed[] = {&al_cmd_data_synth, &al_cmd_tokenizer_train,
                           &al_cmd_encode,     &al_cmd_train,
                           &al_cmd_run,        &al_cmd_heatmap,
                           &al_cmd_report,     &al_cmd_db_merge,
                           &al_cmd_db_show,    &al_cmd_debug_dump,
                           &al_cmd_compare,    &al_cmd_tokenizer_show,
                           &al_cmd_import,     &al_cmd_data_prose,
                           &al_cmd_data_mix,   &al_cmd_experiment};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (!strcmp(fixed[i]->name, name)) return fixed[i];
    for (const al_analysis *const *a = al_analyses; *a; a++)
        if (!strcmp((*a)->cmd->name, name)) return (*a)->cmd;
    return NULL;
}

/* ------------------------------------------------- the folder's state */

typedef struct sig_buf {
    char *s;
    size_t n, cap;
    size_t root_len;
    const char *db; /* the database's name: only its presence counts */
} sig_buf;
static sig_buf *g_sig;

static void sig_add(sig_buf *b, const char *line) {
    size_t l = strlen(line);
    if (b->n + l + 2 > b->cap) {
        b->cap = (b->n + l + 2) * 2;
        b->s = realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, line, l);
    b->n += l;
    b->s[b->n++] = '\n';
    b->s[b->n] = 0;
}

static uint64_t file_hash(const char *path) {
    uint64_t h = 1469598103934665603ULL;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < k; i++) h = (h ^ buf[i]) * 1099511628211ULL;
    fclose(f);
    return h;
}

static int sig_visit(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)ftw;
    const char *rel = path + g_sig->root_len;
    if (*rel == '/') rel++;
    char line[1400];
    if (type == FTW_F && strcmp(rel, g_sig->db) != 0)
        snprintf(line, sizeof line, "%s %lld %016llx", rel, (long long)st->st_size,
                 (unsigned long long)file_hash(path));
    else
        snprintf(line, sizeof line, "%s%s", rel, type == FTW_D ? "/" : "");
    sig_add(g_sig, line);
    return 0;
}

static int cmp_lines(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every path under dir, with each file's size and hash (the database's
 * only named), one sorted line each. */
static char *tree_sig(const char *dir, const char *db) {
    sig_buf b = {0};
    b.root_len = strlen(dir);
    b.db = db;
    g_sig = &b;
    nftw(dir, sig_visit, 16, FTW_PHYS);
    char *lines[4096];
    int n = 0;
    for (char *p = b.s, *q; p && *p && n < 4096; p = q + 1) {
        q = strchr(p, '\n');
        *q = 0;
        lines[n++] = p;
    }
    qsort(lines, (size_t)n, sizeof *lines, cmp_lines);
    sig_buf out = {0};
    for (int i = 0; i < n; i++) sig_add(&out, lines[i]);
    free(b.s);
    return out.s ? out.s : strdup("");
}

/* ------------------------------------------- a fresh copy per run */

static const char *g_src, *g_dst, *g_db;
static size_t g_src_len;
static int g_copy_rc;

static int rm_visit(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)type, (void)ftw;
    return remove(path) != 0;
}

/* Every folder made again, every file hard-linked except the database,
 * which is copied: the commands replace files by renaming, never write
 * into them (a command that did would change the template, which the
 * next run's comparison sees), but SQLite writes into its file. */
static int copy_visit(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)ftw;
    const char *rel = path + g_src_len;
    char to[2048];
    snprintf(to, sizeof to, "%s%s", g_dst, rel);
    if (type == FTW_D) {
        g_copy_rc |= mkdir(to, st->st_mode & 0777) != 0;
    } else if (*rel == '/' && strcmp(rel + 1, g_db) == 0) {
        FILE *a = fopen(path, "rb"), *b = fopen(to, "wb");
        char buf[65536];
        size_t k;
        while (a && b && (k = fread(buf, 1, sizeof buf, a)) > 0)
            g_copy_rc |= fwrite(buf, 1, k, b) != k;
        g_copy_rc |= !a || !b;
        if (a) fclose(a);
        if (b) fclose(b);
    } else {
        g_copy_rc |= link(path, to) != 0;
    }
    return 0;
}

/* dst (removed first) as a copy of src whose database is db. */
static int fresh_copy(const char *src, const char *dst, const char *db) {
    nftw(dst, rm_visit, 16, FTW_DEPTH | FTW_PHYS);
    g_src = src, g_dst = dst, g_db = db, g_src_len = strlen(src), g_copy_rc = 0;
    return nftw(src, copy_visit, 16, FTW_PHYS) != 0 || g_copy_rc ? -1 : 0;
}

/* The database as a failure may leave it: "ok" from integrity_check, then
 * each table's rows, leaving out runs marked failed and the rows that
 * belong to them; and how many runs are marked failed. */
static char *db_sig(const char *path, int *n_failed) {
    sqlite3 *db = NULL;
    sig_buf b = {0};
    *n_failed = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return strdup("(cannot open)");
    }
    sqlite3_stmt *st = NULL;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL);
    sig_add(&b, st && sqlite3_step(st) == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0)
                                                     : "(no integrity_check)");
    sqlite3_finalize(st);
    sqlite3_prepare_v2(db,
                       "SELECT m.name, EXISTS(SELECT 1 FROM pragma_table_info(m.name) "
                       "WHERE name = 'run_id') FROM sqlite_master m WHERE m.type = 'table' "
                       "ORDER BY m.name",
                       -1, &st, NULL);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        int by_run = sqlite3_column_int(st, 1);
        char q[512], line[600];
        if (!strcmp(t, "runs"))
            snprintf(q, sizeof q, "SELECT count(*) FROM runs WHERE status <> 'failed'");
        else if (by_run)
            snprintf(q, sizeof q,
                     "SELECT count(*) FROM \"%s\" WHERE run_id NOT IN "
                     "(SELECT run_id FROM runs WHERE status = 'failed')",
                     t);
        else
            snprintf(q, sizeof q, "SELECT count(*) FROM \"%s\"", t);
        sqlite3_stmt *c = NULL;
        long n = -1;
        if (sqlite3_prepare_v2(db, q, -1, &c, NULL) == SQLITE_OK && sqlite3_step(c) == SQLITE_ROW)
            n = sqlite3_column_int64(c, 0);
        sqlite3_finalize(c);
        snprintf(line, sizeof line, "%s %ld", t, n);
        sig_add(&b, line);
    }
    sqlite3_finalize(st);
    /* a run recorded without its options (a document that could not be
     * made, stored as NULL) */
    if (sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM runs WHERE status <> 'failed' AND "
                           "config_json IS NULL",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        char line[64];
        snprintf(line, sizeof line, "runs without options %d", sqlite3_column_int(st, 0));
        sig_add(&b, line);
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM runs WHERE status = 'failed'", -1, &st,
                           NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        *n_failed = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return b.s ? b.s : strdup("");
}

/* ------------------------------------------------------------ the sweep */

#define MAX_SITES 8192
static const void *g_done[MAX_SITES];
static int g_ndone;

/* Under AddressSanitizer (make test SAN=1, three times slower) a run
 * lets two new sites pass before it fails the next: a third of the sites
 * have their way out checked for leaks and bad memory there, all of them
 * have it checked in the plain suite. cJSON's sites are failed in the
 * plain suite only: a document part whose add failed is still leaked in
 * places (an item made for cJSON_AddItemToObject is not freed when the
 * add fails), which docs/testing.md counts. */
#if defined(__SANITIZE_ADDRESS__)
#define FAULT_PASS 2
#define JSON_SITES 0
#else
#define FAULT_PASS 0
#define JSON_SITES 1
#endif

typedef struct shared {
    const void *site; /* the site the child failed, or NULL */
    int n_new; /* the new sites it reached (passed, then failed) */
    const void *news[FAULT_PASS + 1];
} shared;

/* Split cmdline on spaces into argv (no quoting: the tests' paths have
 * none); returns argc. */
static int split(char *line, char **argv, int cap) {
    int n = 0;
    for (char *t = strtok(line, " "); t && n < cap - 1; t = strtok(NULL, " ")) argv[n++] = t;
    argv[n] = NULL;
    return n;
}

/* Run `cmdline` in dir in a forked child with the fault armed at a new
 * site; stderr to err_path. Returns the wait status; *site is the site
 * failed (NULL if the run passed them all). */
static int run_child(const char *dir, const char *cmdline, const char *err_path, const void **site,
                     shared *sh) {
    sh->site = NULL;
    sh->n_new = 0;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(120);
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_WRONLY);
        if (fd < 0 || nul < 0 || chdir(dir) != 0) _exit(90);
        dup2(fd, 2);
        dup2(nul, 1);
        char buf[2048], *argv[64];
        snprintf(buf, sizeof buf, "%s", cmdline);
        int argc = split(buf, argv, 64);
        al_command *c = find_command(argv[0]);
        int used = 1;
        if (argc > 1) {
            char two[256];
            snprintf(two, sizeof two, "%s %s", argv[0], argv[1]);
            al_command *c2 = find_command(two);
            if (c2) c = c2, used = 2;
        }
        if (!c) _exit(91);
        al_json_fault_sites(JSON_SITES);
        al_fault_arm_new(g_done, g_ndone, FAULT_PASS);
        int rc = c->run(argc - used, argv + used);
        al_config_arena_free();
        sh->site = al_fault_fired();
        sh->n_new = al_fault_new_sites(sh->news, FAULT_PASS + 1);
        al_fault_arm(0);
        if (t_leaks_found()) rc = 92;
        fflush(stdout);
        fflush(stderr);
        t_cov_flush();
        _exit(rc);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    *site = sh->site;
    return st;
}

/* Lines of stderr that are not warnings: must be exactly one for a
 * failed run. Returns that count; *first is the first such line. */
static int error_lines(const char *text, char *first, size_t cap) {
    int n = 0;
    first[0] = 0;
    for (const char *p = text; p && *p;) {
        const char *q = strchr(p, '\n');
        size_t l = q ? (size_t)(q - p) : strlen(p);
        if (strncmp(p, "attnlab: warning:", 17) != 0 && strncmp(p, "attnlab: note:", 14) != 0) {
            if (!n) snprintf(first, cap, "%.*s", (int)l, p);
            n++;
        }
        p = q ? q + 1 : p + l;
    }
    return n;
}

/* Run cmdline on fresh copies of tmpl (a folder under the test's tmpdir,
 * with its database named db) until one run passes every site not yet
 * failed, checking each failed run as the header says. Returns the
 * number of sites failed. */
static int sweep(const char *tmpl, const char *db, const char *cmdline, const char *keep,
                 int *n_absorbed) {
    t_pbuf work = t_pcopy("work"), err = t_pcopy("fault.err");
    char dbpath[1200];
    snprintf(dbpath, sizeof dbpath, "%s/%s", tmpl, db);
    char *want_tree = tree_sig(tmpl, db);
    int nf0 = 0;
    char *want_db = db[0] ? db_sig(dbpath, &nf0) : strdup("");
    snprintf(dbpath, sizeof dbpath, "%s/%s", work.s, db);
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    int n_sites = 0;
    for (int guard = 0; guard < 2000; guard++) {
        CHECK(fresh_copy(tmpl, work.s, db) == 0);
        const void *site = NULL;
        int st = run_child(work.s, cmdline, err.s, &site, sh);
        int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        char *text = t_slurp(err.s), first[600];
        int nerr = error_lines(text, first, sizeof first);
        for (int i = 0; i < sh->n_new && g_ndone < MAX_SITES; i++) g_done[g_ndone++] = sh->news[i];
        if (!site) {
            CHECKF(rc == 0, "%s: exit %d with no fault injected: %s", cmdline, rc, text);
            free(text);
            break;
        }
        n_sites++;
        if (rc == 0) { /* absorbed: the run must have succeeded whole */
            ++*n_absorbed;
            if (db[0]) { /* no run marked failed, none recorded without its options */
                int nf = 0;
                char *got_db = db_sig(dbpath, &nf);
                CHECKF(nf == nf0 && strstr(got_db, "runs without options 0\n"),
                       "%s: exit 0 after a fault, but the database has %d failed runs "
                       "(had %d):\n%s",
                       cmdline, nf, nf0, got_db);
                free(got_db);
            }
            if (getenv("ATTNLAB_FAULT_DEBUG")) {
                Dl_info di;
                dladdr(site, &di);
                fprintf(stderr, "ABSORBED %s %p: %s\n", di.dli_fname,
                        (void *)((char *)site - (char *)di.dli_fbase), text ? text : "");
            }
            CHECKF(nerr == 0, "%s: exit 0 after a fault, but stderr says %s", cmdline, first);
            free(text);
            continue;
        }
        CHECKF(rc == 1 && nerr == 1 && !strncmp(first, "attnlab: ", 9),
               "%s, fault %d: exit %d, stderr:\n%s", cmdline, n_sites, rc, text ? text : "");
        /* work that a failure keeps (an SAE trained before it) is named
         * in the message */
        if (keep && strstr(first, keep)) CHECK(t_sh("rm -rf %s/%s", work.s, keep) == 0);
        char *tree = tree_sig(work.s, db);
        CHECKF(!strcmp(tree, want_tree), "%s, fault %d (%s): the folder changed:\n%s\nvs\n%s",
               cmdline, n_sites, first, tree, want_tree);
        if (db[0]) {
            int nf = 0;
            char *got_db = db_sig(dbpath, &nf);
            CHECKF(!strcmp(got_db, want_db) && nf <= nf0 + 1,
                   "%s, fault %d (%s): the database changed (%d failed runs):\n%s\nvs\n%s", cmdline,
                   n_sites, first, nf, got_db, want_db);
            free(got_db);
        }
        free(tree);
        free(text);
        if (g_ndone >= MAX_SITES - FAULT_PASS - 1) break;
    }
    munmap(sh, sizeof *sh);
    free(want_tree);
    free(want_db);
    return n_sites;
}

/* Sweep each of cmds (a NULL-ended list) on tmpl, printing its count. */
static void sweep_all(const char *tmpl, const char *db, const char *const *cmds, const char *keep) {
    for (const char *const *c = cmds; *c; c++) {
        int absorbed = 0, n = sweep(tmpl, db, *c, keep, &absorbed);
        fprintf(stderr, "    %d new sites (%d absorbed): %s\n", n, absorbed, *c);
    }
}

/* The work folder every sweep copies: a tokenizer, token files, a trained
 * 2-layer model m2 and a database r.db holding a scores run. */
static t_pbuf template_dir(void) {
    t_pbuf w = t_pcopy("tmpl");
    t_scored_model(w.s, 2, 3);
    al_err e;
    CHECK(al_gemm_init(&e) == 0 && al_registry_setup(&e) == 0);
    g_ndone = 0;
    return w;
}

TEST(faults_analyses) {
    t_pbuf w = template_dir();
    const char *cmds[] = {"scores --model m2 --db r.db --probe-r 5 --probe-n 2 --threads 1",
                          "ablate --model m2 --db r.db --data s.val.bin --batches 1 --threads 1",
                          "patch --model m2 --db r.db --probe-r 5 --n 4 --threads 1",
                          "paths --model m2 --db r.db --probe-r 5 --n 4 --threads 1",
                          "attribute --model m2 --db r.db --probe-r 5 --n 4 --threads 1",
                          NULL};
    sweep_all(w.s, "r.db", cmds, NULL);
}

/* The template with more in it: an SAE of layer 1 (tmpl/sae) and, in
 * r.db, patch, paths, attribute, discover and sae features runs, and a
 * second database r2.db with a scores run. */
static t_pbuf rich_template(void) {
    t_pbuf w = template_dir();
    const char *bin = t_abs_bin();
    CHECK(t_sh("cd %s && { %s patch --model m2 --db r.db --probe-r 5 --n 4 --threads 1 && "
               "%s paths --model m2 --db r.db --probe-r 5 --n 4 --threads 1 && "
               "%s attribute --model m2 --db r.db --probe-r 5 --n 4 --threads 1 && "
               "%s discover --model m2 --db r.db --probe-r 5 --n 4 --threads 1 && "
               "%s sae train --model m2 --layer 1 --data s.train.bin --out sae --db r.db "
               "--steps 4 --batch 64 --expansion 2 --threads 1 && "
               "%s sae features --model m2 --sae sae --data s.val.bin --db r.db --windows 4 "
               "--probe-n 8 --threads 1 && "
               "%s scores --model m2 --db r2.db --probe-r 5 --probe-n 2 --threads 1; "
               "} >/dev/null 2>&1",
               w.s, bin, bin, bin, bin, bin, bin, bin) == 0);
    return w;
}

TEST(faults_analyses_more) {
    t_pbuf w = template_dir();
    const char *cmds[] =
        {"prune --model m2 --db r.db --data s.val.bin --method ablation --batches 2 --batch 2 "
         "--threads 1",
         "discover --model m2 --db r.db --probe-r 5 --n 4 --threads 1 --out circ",
         "circuits --model m2 --db r.db --top-k 3",
         "attnstats --model m2 --db r.db --data s.val.bin --batches 1 --batch 2 --threads 1",
         "names --model m2 --db r.db --data s.val.bin --stories 3 --threads 1",
         NULL};
    sweep_all(w.s, "r.db", cmds, NULL);
}

TEST(faults_sae) {
    t_pbuf w = rich_template();
    const char *cmds[] =
        {"sae train --model m2 --layer 0 --data s.train.bin --out sae0 --db r.db --steps 3 "
         "--batch 32 --expansion 2 --threads 1",
         "sae features --model m2 --sae sae --data s.val.bin --db r.db --windows 4 --probe-n 8 "
         "--threads 1",
         "sae features --model m2 --sae sae --data s.val.bin --db r.db --windows 4 --probe-n 8 "
         "--task induction --n 4 --threads 1",
         NULL};
    sweep_all(w.s, "r.db", cmds, "sae0");
}

/* The analyses again with the options that add to what they compute and
 * print: intervals, --json documents, text statistics, pair ablation,
 * attribution over text windows. The sites they share with the plain
 * runs were failed by faults_analyses, in another process, and are
 * failed again here: a run each, so that the two tests run at once. */
TEST(faults_options) {
    t_pbuf w = rich_template();
    const char *cmds[] =
        {"scores --model m2 --db r.db --data s.val.bin --batches 1 --batch 2 --probe-r 5 "
         "--probe-n 4 --ci 0.9 --bootstrap 20 --threads 1 --json",
         "ablate --model m2 --db r.db --data s.val.bin --pairs --method mean --batches 1 --batch 2 "
         "--probe-r 5 --probe-n 2 --ci 0.9 --bootstrap 20 --threads 1 --json",
         "patch --model m2 --db r.db --probe-r 5 --n 4 --ci 0.9 --bootstrap 20 --threads 1 --json",
         "attribute --model m2 --db r.db --probe-r 5 --n 4 --ci 0.9 --bootstrap 20 --threads 1 "
         "--json",
         "attribute --model m2 --db r.db --data s.val.bin --windows 2 --threads 1",
         "circuits --model m2 --db r.db --top-k 3 --json",
         "discover --model m2 --db r.db --probe-r 5 --n 4 --threads 1 --json",
         "sae features --model m2 --sae sae --data s.val.bin --db r.db --windows 4 --probe-n 8 "
         "--task induction --n 4 --ci 0.9 --bootstrap 20 --threads 1 --json",
         NULL};
    sweep_all(w.s, "r.db", cmds, NULL);
}

TEST(faults_outputs) {
    t_pbuf w = rich_template();
    const char *cmds[] =
        {"heatmap --model m2 --what attention --repeat 4 --layer 1 --out a.png",
         "heatmap --model m2 --db r.db --what patching --out p.svg",
         "heatmap --model m2 --db r.db --what circuit --out c.pdf",
         "heatmap --model m2 --db r.db --what composition --out k.png",
         "heatmap --model m2 --db r.db --what sae-feature --feature 0 --out f.png",
         "heatmap --model m2 --what qk --layer 1 --head 0 --tokens #1,#2,a --out q.png",
         "heatmap --model m2 --what ov --layer 0 --head 1 --data s.val.bin --top-n 6 "
         "--out o.svg",
         "heatmap --model m2 --what qk-pos --layer 1 --head 1 --n-pos 8 --out qp.png",
         "heatmap --model m2 --db r.db --what spectrum --out sp.png",
         "heatmap --model m2 --db r.db --what intervals --out iv.png",
         "heatmap --model m2 --db r.db --what paths --out pa.png",
         "heatmap --model m2 --db r.db --what dla --out dl.png",
         "heatmap --model m2 --db r.db --what terms --out te.png",
         "heatmap --model m2 --db r.db --what sae-heads --top-n 4 --out sh.png", "db show r.db",
         "db show r.db 2 --json", "db merge out.db r.db r2.db", "run --model m2 --prompt abcabc",
         "debug-dump --model m2 --data s.val.bin --out d.safetensors",
         "tokenizer show --tokenizer tok.json --text abc",
         /* last: its pictures' sites are failed by the heatmaps, where a
         * run costs one picture, not all of them */
         "report --model m2 --db r.db --out rep",
         /* the explorers' own sites, with one picture kind */
         "report --model m2 --db r.db --out rep2 --interactive --pictures "
         "training --repeat 0 --prompt abcabc",
         NULL};
    sweep_all(w.s, "r.db", cmds, NULL);
}

/* A TransformerLens state dict of a 1-layer LayerNorm model with biases
 * (vocabulary 320 for tok.json, d_model 16, 2 heads of 8, n_ctx 16),
 * random weights of order 1, as safetensors at path. */
static void tl_checkpoint(const char *path) {
    enum { V = 320, C = 16, H = 2, D = 8, N = 16 };
    static float we[V * C], wp[N * C], q[H * C * D], k[H * C * D], v[H * C * D], o[H * D * C],
        bq[H * D], bk[H * D], bv[H * D], bo[C], l1w[C], l1b[C], lfw[C], lfb[C], wu[C * V], bu[V];
    al_rng r;
    al_rng_seed(&r, 5);
    float *all[] = {we, wp, q, k, v, o, bq, bk, bv, bo, l1b, lfb, wu, bu};
    size_t len[] = {V * C, N * C, H * C * D, H * C * D, H * C * D, H * D * C, H * D,
                    H * D, H * D, C,         C,         C,         C * V,     V};
    for (size_t t = 0; t < sizeof all / sizeof *all; t++)
        for (size_t i = 0; i < len[t]; i++) all[t][i] = (float)(0.3 * al_rng_normal(&r));
    for (int i = 0; i < C; i++) l1w[i] = lfw[i] = 1.0f + (float)(0.1 * al_rng_normal(&r));
    al_st_tensor ts[] = {
        {.name = "embed.W_E", .dtype = AL_DT_F32, .ndim = 2, .shape = {V, C}, .data = we},
        {.name = "pos_embed.W_pos", .dtype = AL_DT_F32, .ndim = 2, .shape = {N, C}, .data = wp},
        {.name = "blocks.0.ln1.w", .dtype = AL_DT_F32, .ndim = 1, .shape = {C}, .data = l1w},
        {.name = "blocks.0.ln1.b", .dtype = AL_DT_F32, .ndim = 1, .shape = {C}, .data = l1b},
        {.name = "blocks.0.attn.W_Q", .dtype = AL_DT_F32, .ndim = 3, .shape = {H, C, D}, .data = q},
        {.name = "blocks.0.attn.W_K", .dtype = AL_DT_F32, .ndim = 3, .shape = {H, C, D}, .data = k},
        {.name = "blocks.0.attn.W_V", .dtype = AL_DT_F32, .ndim = 3, .shape = {H, C, D}, .data = v},
        {.name = "blocks.0.attn.W_O", .dtype = AL_DT_F32, .ndim = 3, .shape = {H, D, C}, .data = o},
        {.name = "blocks.0.attn.b_Q", .dtype = AL_DT_F32, .ndim = 2, .shape = {H, D}, .data = bq},
        {.name = "blocks.0.attn.b_K", .dtype = AL_DT_F32, .ndim = 2, .shape = {H, D}, .data = bk},
        {.name = "blocks.0.attn.b_V", .dtype = AL_DT_F32, .ndim = 2, .shape = {H, D}, .data = bv},
        {.name = "blocks.0.attn.b_O", .dtype = AL_DT_F32, .ndim = 1, .shape = {C}, .data = bo},
        {.name = "ln_final.w", .dtype = AL_DT_F32, .ndim = 1, .shape = {C}, .data = lfw},
        {.name = "ln_final.b", .dtype = AL_DT_F32, .ndim = 1, .shape = {C}, .data = lfb},
        {.name = "unembed.W_U", .dtype = AL_DT_F32, .ndim = 2, .shape = {C, V}, .data = wu},
        {.name = "unembed.b_U", .dtype = AL_DT_F32, .ndim = 1, .shape = {V}, .data = bu}};
    al_err e;
    CHECK_OK(al_st_write(path, ts, (int)(sizeof ts / sizeof *ts), NULL, NULL, 0, &e), &e);
}

/* The commands that make things: corpora, tokenizers, token files,
 * models (trained and imported). */
TEST(faults_make) {
    t_pbuf w = template_dir();
    char p[1200];
    snprintf(p, sizeof p, "%s/tl.safetensors", w.s);
    tl_checkpoint(p);
    CHECK(t_sh("%s data synth --out %s/s.txt --stories 40 --seed 3 >/dev/null 2>&1 && "
               "%s data synth --out %s/s2.txt --stories 30 --seed 4 >/dev/null 2>&1",
               t_bin(), w.s, t_bin(), w.s) == 0);
    const char *cmds[] =
        {"data synth --out d.txt --stories 20 --seed 2",
         "data prose --source file --in s.txt --docs story --out p.txt",
         "data mix --in s.txt:0.6 --in s2.txt:0.4 --docs story --out x.txt",
         "tokenizer train --in s.txt --vocab 290 --out t2.json",
         "encode --tokenizer tok.json --in s.txt --out e.bin --val 0.1",
         "import --checkpoint tl.safetensors --positions standard --tokenizer tok.json --out imp",
         NULL};
    sweep_all(w.s, "r.db", cmds, NULL);
    /* the same state dict as PyTorch writes it (torch_pickle.c,
     * torch_ckpt.c), where PyTorch is installed */
    if (t_sh("cd %s && /usr/bin/python3 -c \"import json, struct, numpy as np, torch\n"
             "b = open('tl.safetensors', 'rb').read(); n = struct.unpack('<Q', b[:8])[0]\n"
             "h = json.loads(b[8:8 + n]); h.pop('__metadata__', None)\n"
             "sd = {k: torch.from_numpy(np.frombuffer(b[8 + n + v['data_offsets'][0]:8 + n + "
             "v['data_offsets'][1]], dtype=np.float32).reshape(v['shape']).copy()) "
             "for k, v in h.items()}\n"
             "torch.save(sd, 'tl.pt')\" > pt.log 2>&1",
             w.s) == 0) {
        const char *pt[] = {"import --checkpoint tl.pt --positions standard --tokenizer tok.json "
                            "--out imp",
                            NULL};
        sweep_all(w.s, "r.db", pt, NULL);
    } else {
        fprintf(stderr, "    no PyTorch: the .pt import is not swept\n");
    }
    /* a failure after a checkpoint keeps it, and says where */
    const char *train[] =
        {"train --data s.train.bin --val s.val.bin --tokenizer tok.json --out m9 --steps 2 "
         "--n-layers 2 --d-model 16 --n-heads 2 --d-head 8 --n-ctx 16 --batch 2 --eval-every 1 "
         "--eval-batches 1 --warmup 1 --threads 1 --db r.db",
         NULL};
    sweep_all(w.s, "r.db", train, "m9");
}

/* An experiment run again over its finished stages (all reused): its
 * loading, stage checks and stamps; and its dry run. It is first run
 * where the sweep's copies will be (stages record their paths), then
 * moved to the template. */
TEST(faults_experiment) {
    t_pbuf w = t_pcopy("work"), tmpl = t_pcopy("tmpl");
    CHECK(t_sh("mkdir -p %s", w.s) == 0);
    char js[1200];
    snprintf(js, sizeof js, "%s/x.json", w.s);
    FILE *f = fopen(js, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(T_EXP_TINY_2L("fx") " \"analyses\": {\"scores\": {\"probe_r\": 5, \"probe_n\": 2}, "
                                  "\"circuits\": true},\n \"pictures\": false, \"report\": true}\n",
              f);
        fclose(f);
    }
    CHECK(t_sh("cd %s && %s experiment x.json --out ex >/dev/null 2>&1 && mv %s %s", w.s,
               t_abs_bin(), w.s, tmpl.s) == 0);
    al_err e;
    CHECK(al_gemm_init(&e) == 0 && al_registry_setup(&e) == 0);
    const char *cmds[] = {"experiment x.json --out ex", "experiment x.json --out ex --dry-run",
                          NULL};
    sweep_all(tmpl.s, "ex/results.db", cmds, NULL);
}

/* ------------------------------------------- the driver's last phases */

typedef struct fake_args {
    al_an_where w;
} fake_args;
static fake_args g_fake = {AL_AN_WHERE_INIT};
static al_flag g_fake_flags[] = {AL_FLAGS_END};
static al_command g_fake_cmd = {"fake", "", "", NULL, g_fake_flags, NULL};
static const char *g_fake_file;

static int fake_compute(void *args, void *state, al_drive *d, al_err *e) {
    (void)args, (void)state, (void)d, (void)e;
    return 0;
}
static int fake_store(void *args, void *state, al_drive *d, al_err *e) {
    (void)args, (void)state;
    return al_drive_file(d, g_fake_file, "x\n", 2, e);
}
/* A document that cannot be made (as when cJSON runs out of memory). */
static int fake_doc(void *args, void *state, al_drive *d, al_err *e) {
    (void)args, (void)state, (void)d;
    return al_errf(e, "out of memory");
}
static void fake_text(const cJSON *doc) { (void)doc; }

/* The document is made inside the run's transaction: when it cannot be,
 * the run is failed (not stored as done while the command exits 1) and
 * its file never appears. */
TEST(faults_driver_doc_fails_the_run) {
    t_pbuf w = t_pcopy("w");
    t_scored_model(w.s, 1, 2);
    al_err e;
    CHECK(al_registry_setup(&e) == 0);
    char db[1200], file[1200], model[1200];
    snprintf(db, sizeof db, "%s/r.db", w.s);
    snprintf(file, sizeof file, "%s/out.txt", w.s);
    snprintf(model, sizeof model, "%s/m1", w.s);
    g_fake_file = file;
    g_fake.w.model = model, g_fake.w.db = db, g_fake.w.threads = 1;
    al_analysis fake = {.name = "fake",
                        .cmd = &g_fake_cmd,
                        .tmpl = &g_fake,
                        .size = sizeof g_fake,
                        .compute = fake_compute,
                        .store = fake_store,
                        .doc = fake_doc,
                        .text = fake_text};
    al_drive d = {.an = &fake, .quiet = 1};
    int64_t run = 0;
    int rc = al_drive_run(&fake, &g_fake, g_fake_flags, &d, &run, &e);
    cJSON_Delete(d.doc);
    CHECKF(rc == 1 && strstr(e.msg, "out of memory"), "rc %d: %s", rc, e.msg);
    CHECK(t_sql_long(db, "SELECT count(*) FROM runs WHERE kind = 'fake' AND status = 'failed'") ==
          1);
    CHECK(t_sql_long(db, "SELECT count(*) FROM runs WHERE kind = 'fake' AND status <> 'failed'") ==
          0);
    CHECK(!al_file_exists(file));
}
