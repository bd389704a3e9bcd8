/* main.c -- the attnlab command table; the only place that exits.
 * Each command lives in src/cli/cmd_<name>.c and exports an al_command;
 * the analysis commands come from the registry (registry.h), in its
 * order, between the commands that make models and those that use many
 * runs at once. */
#define _DEFAULT_SOURCE /* getloadavg, setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/args.h"
#include "attnlab/config.h"
#include "attnlab/gemm.h"
#include "attnlab/registry.h"
#include "attnlab/util.h"

/* The other commands, one line each; keep the order of `attnlab help`.
 * BEFORE come ahead of the analyses, AFTER behind them. */
#define BEFORE(X)                                                                                  \
    X(data_synth)                                                                                  \
    X(data_brown)                                                                                  \
    X(data_code)                                                                                   \
    X(data_prose)                                                                                  \
    X(data_mix)                                                                                    \
    X(tokenizer_train)                                                                             \
    X(tokenizer_show)                                                                              \
    X(encode)                                                                                      \
    X(train)                                                                                       \
    X(import)                                                                                      \
    X(run)                                                                                         \
    X(compare)
#define AFTER(X)                                                                                   \
    X(heatmap)                                                                                     \
    X(report)                                                                                      \
    X(experiment)                                                                                  \
    X(db_merge)                                                                                    \
    X(db_show)                                                                                     \
    X(debug_dump)

#define DECLARE(n) extern al_command al_cmd_##n;
BEFORE(DECLARE)
AFTER(DECLARE)
#undef DECLARE

#define MAX_COMMANDS 64
static al_command *commands[MAX_COMMANDS];
static int n_commands;

/* commands[]: BEFORE, the registry's analyses, AFTER. */
static void build_table(void) {
#define ENTRY(n) commands[n_commands++] = &al_cmd_##n;
    BEFORE(ENTRY)
    for (const al_analysis *const *a = al_analyses; *a && n_commands < MAX_COMMANDS - 8; a++)
        commands[n_commands++] = (*a)->cmd;
    AFTER(ENTRY)
#undef ENTRY
}

/* `attnlab help <c>`: an analysis's help adds the driver's flags. */
static void command_help(FILE *f, const al_command *c) {
    for (const al_analysis *const *a = al_analyses; *a; a++)
        if ((*a)->cmd == c) {
            al_drive_help(f, *a);
            return;
        }
    al_command_help(f, c);
}

static void overview(FILE *f) {
    fprintf(f,
            "attnlab %s -- train and take apart attention-only transformers\n\n"
            "usage: attnlab <command> [options]\n"
            "       attnlab help <command>\n\ncommands:\n",
            AL_VERSION);
    for (int i = 0; i < n_commands; i++)
        fprintf(f, "  %-18s %s\n", commands[i]->name, commands[i]->summary);
}

/* Match "word" or "word word2" command names; returns the number of argv
 * words consumed, 0 if none match. */
static int match(const al_command *c, int argc, char **argv) {
    const char *sp = strchr(c->name, ' ');
    if (!sp) return strcmp(c->name, argv[0]) == 0 ? 1 : 0;
    size_t l1 = (size_t)(sp - c->name);
    if (strlen(argv[0]) != l1 || strncmp(c->name, argv[0], l1) != 0) return 0;
    return argc > 1 && strcmp(sp + 1, argv[1]) == 0 ? 2 : 0;
}

static al_command *lookup(int argc, char **argv, int *used) {
    for (int i = 0; i < n_commands; i++) {
        int u = match(commands[i], argc, argv);
        if (u) {
            *used = u;
            return commands[i];
        }
    }
    return NULL;
}

/* "unknown command" on stderr, with the nearest command when one is near
 * (a two-word command matches on its first word or on both). */
static void unknown_command(int argc, char **argv) {
    const char *names[128] = {0};
    char both[128][64];
    int n = 0;
    for (int i = 0; i < n_commands && n < 128; i++) names[n++] = commands[i]->name;
    const char *near = al_nearest_word(argv[0], strlen(argv[0]), names, n);
    if (!near && argc > 1) { /* "db merg" */
        for (int i = 0; i < n; i++) snprintf(both[i], sizeof both[i], "%s", names[i]);
        char w[128];
        snprintf(w, sizeof w, "%s %s", argv[0], argv[1]);
        const char *cands[128];
        for (int i = 0; i < n; i++) cands[i] = strchr(both[i], ' ') ? both[i] : NULL;
        near = al_nearest_word(w, strlen(w), cands, n);
    }
    if (near)
        fprintf(stderr, "attnlab: unknown command '%s' (did you mean 'attnlab %s'?)\n", argv[0],
                near);
    else
        fprintf(stderr, "attnlab: unknown command '%s'\n", argv[0]);
}

/* A group word like "data" or "tokenizer" alone: list its subcommands. */
static int group_help(FILE *f, const char *word) {
    int found = 0;
    size_t l = strlen(word);
    for (int i = 0; i < n_commands; i++) {
        const char *nm = commands[i]->name;
        if (strncmp(nm, word, l) == 0 && nm[l] == ' ') {
            if (!found) fprintf(f, "attnlab %s subcommands:\n", word);
            fprintf(f, "  %-18s %s\n", nm, commands[i]->summary);
            found = 1;
        }
    }
    return found;
}

/* OpenMP threads wait for work by spinning (libgomp's default), which on
 * a busy machine takes the cores from the threads that have work: with
 * another job running, `circuits` on a small model took 6.8-19.5 s
 * against 1.7-2.0 s with passive waiting. libgomp reads its policy once,
 * before main, so when the user chose none and the machine is busy (a
 * load average of at least its cores), the binary starts itself again
 * with OMP_WAIT_POLICY=passive. Results do not depend on the policy.
 * ATTNLAB_OMP_PASSIVE=1 always does so, =0 never. */
static void wait_policy(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    const char *force = getenv("ATTNLAB_OMP_PASSIVE");
    if (force && !strcmp(force, "0")) return;
    if (!force || strcmp(force, "1")) {
        double load[1];
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        if (getloadavg(load, 1) != 1 || ncpu < 1 || load[0] < (double)ncpu) return;
    }
    /* the binary's own path, not /proc/self/exe, so the process keeps
     * its name ("attnlab" in ps, pkill) */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || n >= (ssize_t)sizeof self - 1) return;
    self[n] = 0;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv(self, argv);
    /* exec failed: run on as started (the variable now changes nothing) */
    unsetenv("OMP_WAIT_POLICY");
}

int main(int argc, char **argv) {
    wait_policy(argv);
    build_table();
    if (argc < 2) {
        overview(stderr);
        return 2;
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        if (argc < 3) {
            overview(stdout);
            return 0;
        }
        int used = 0;
        al_command *c = lookup(argc - 2, argv + 2, &used);
        if (c) {
            command_help(stdout, c);
            return 0;
        }
        if (group_help(stdout, argv[2])) return 0;
        unknown_command(argc - 2, argv + 2);
        fputc('\n', stderr);
        overview(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("attnlab %s\n", AL_VERSION);
        const char *w = getenv("OMP_WAIT_POLICY");
        printf("OpenMP threads wait: %s\n", w ? w : "libgomp's default (spinning)");
        return 0;
    }
    int used = 0;
    al_command *c = lookup(argc - 1, argv + 1, &used);
    if (!c) {
        if (group_help(stderr, argv[1])) return 2;
        unknown_command(argc - 1, argv + 1);
        fprintf(stderr, "see 'attnlab help' for the commands\n");
        return 2;
    }
    int sub_argc = argc - 1 - used;
    char **sub_argv = argv + 1 + used;
    for (int i = 0; i < sub_argc; i++)
        if (strcmp(sub_argv[i], "--help") == 0 || strcmp(sub_argv[i], "-h") == 0) {
            command_help(stdout, c);
            return 0;
        }
    al_err e;
    if (al_gemm_init(&e)) { /* a mistyped ATTNLAB_MATMUL, before any work */
        fprintf(stderr, "attnlab: %s\n", e.msg);
        return 2;
    }
    if (al_registry_setup(&e)) { /* the store learns the analyses' run kinds */
        fprintf(stderr, "attnlab: %s\n", e.msg);
        return 1;
    }
    int rc = c->run(sub_argc, sub_argv);
    al_config_arena_free();
    return rc;
}
