/* test_deps.c -- scripts/deps.sh: `make demo` installs only what the demo
 * needs, `make test` also the optional cross-check packages, and a user
 * who is not root gets the apt-get command to run. Nothing is installed:
 * ATTNLAB_DEPS_PRINT=1 prints the lists, and fake `id` and `dpkg-query`
 * on PATH play a non-root user on a machine without the packages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* The output of `sh scripts/deps.sh GROUPS` run with env before it. */
static char *deps(const char *env, const char *groups) {
    if (t_sh("%s sh scripts/deps.sh %s > %s 2>&1", env, groups, t_path("out")) > 1) return NULL;
    return t_slurp(t_path("out"));
}

/* " word " occurs in the line of s that starts with key. */
static int listed(const char *s, const char *key, const char *word) {
    const char *l = s ? strstr(s, key) : NULL;
    if (!l) return 0;
    size_t n = strcspn(l, "\n"), w = strlen(word);
    for (const char *p = l + strlen(key); p + w <= l + n; p++)
        if (p[-1] == ' ' && !strncmp(p, word, w) && (p + w == l + n || p[w] == ' ')) return 1;
    return 0;
}

TEST(deps_demo_list_has_no_cross_check_packages) {
    char *d = deps("ATTNLAB_DEPS_PRINT=1", "");
    CHECKF(d && listed(d, "required:", "libopenblas-openmp-dev") && listed(d, "required:", "gcc") &&
               listed(d, "required:", "libdnnl-dev") && listed(d, "required:", "libonig-dev") &&
               listed(d, "required:", "libutf8proc-dev") && listed(d, "required:", "libzip-dev") &&
               listed(d, "required:", "sqlite3"),
           "%s", d ? d : "");
    CHECKF(d && strstr(d, "optional:") && !strstr(d, "torch") && !strstr(d, "chromium") &&
               !strstr(d, "numpy"),
           "the demo's list: %s", d ? d : "");
    free(d);
    char *t = deps("ATTNLAB_DEPS_PRINT=1", "test");
    CHECKF(t && listed(t, "optional:", "python3-torch") &&
               listed(t, "optional:", "python3-numpy") && listed(t, "optional:", "chromium") &&
               listed(t, "required:", "libopenblas-openmp-dev") &&
               listed(t, "optional:", "python3-venv") && listed(t, "optional:", "python3-pip") &&
               listed(t, "optional:", "python3-setuptools"),
           "the tests' list: %s", t ? t : "");
    free(t);
    /* make python's group: what the venv install needs, required */
    char *py = deps("ATTNLAB_DEPS_PRINT=1", "python");
    CHECKF(py && listed(py, "required:", "python3-venv") &&
               listed(py, "required:", "python3-pip") &&
               listed(py, "required:", "python3-setuptools") &&
               listed(py, "required:", "python3-numpy"),
           "%s", py ? py : "");
    free(py);
    /* CI's groups together: PyTorch, wanted by test and bench, once */
    char *c = deps("ATTNLAB_DEPS_PRINT=1", "test bench fuzz valgrind");
    int n_torch = 0;
    for (const char *p = c; p && (p = strstr(p, "python3-torch")) != NULL; p++) n_torch++;
    CHECKF(c && listed(c, "required:", "valgrind") && listed(c, "required:", "clang") &&
               n_torch == 1,
           "%s", c ? c : "");
    free(c);
    /* the Slurm test's group: the daemons and munge, required */
    char *sl = deps("ATTNLAB_DEPS_PRINT=1", "slurm");
    CHECKF(sl && listed(sl, "required:", "slurm-wlm") && listed(sl, "required:", "munge"), "%s",
           sl ? sl : "");
    free(sl);
    /* CI's format check: the pinned clang-format, required */
    char *fo = deps("ATTNLAB_DEPS_PRINT=1", "format");
    CHECKF(fo && listed(fo, "required:", "clang-format-14"), "%s", fo ? fo : "");
    free(fo);
    /* the real corpora's packages: optional, and in no other group's list */
    char *co = deps("ATTNLAB_DEPS_PRINT=1", "corpora");
    CHECKF(co && listed(co, "optional:", "golang-src") &&
               listed(co, "optional:", "bible-kjv-text") && listed(co, "optional:", "bible-kjv") &&
               listed(co, "optional:", "python3-doc") && !listed(co, "required:", "golang-src"),
           "%s", co ? co : "");
    free(co);
    char *all = deps("ATTNLAB_DEPS_PRINT=1", "test bench fuzz valgrind slurm");
    CHECKF(all && !strstr(all, "golang") && !strstr(all, "bible") && !strstr(all, "python3-doc"),
           "%s", all ? all : "");
    free(all);
    /* an unknown group is refused (exit 2) */
    CHECK(t_sh("ATTNLAB_DEPS_PRINT=1 sh scripts/deps.sh demo >/dev/null 2>&1") == 2);
}

/* Not root, nothing installed: the demo's command has no PyTorch or
 * Chromium, the tests' has them, and a missing required package fails. */
TEST(deps_non_root_prints_the_command) {
    const char *bin = t_path("bin");
    CHECK(t_sh("mkdir -p %s && printf '#!/bin/sh\\necho 1000\\n' > %s/id && "
               "printf '#!/bin/sh\\nexit 1\\n' > %s/dpkg-query && chmod +x %s/id %s/dpkg-query",
               bin, bin, bin, bin, bin) == 0);
    char env[1200];
    snprintf(env, sizeof env, "PATH=%s:$PATH", bin);
    CHECK(t_sh("%s sh scripts/deps.sh > %s 2>&1", env, t_path("demo")) == 1);
    char *d = t_slurp(t_path("demo"));
    CHECKF(d && listed(d, "run: sudo apt-get install -y", "libsqlite3-dev") &&
               !strstr(d, "torch") && !strstr(d, "chromium"),
           "%s", d ? d : "");
    free(d);
    CHECK(t_sh("%s sh scripts/deps.sh test > %s 2>&1", env, t_path("test")) == 1);
    char *t = t_slurp(t_path("test"));
    CHECKF(t && listed(t, "run: sudo apt-get install -y", "libsqlite3-dev") &&
               listed(t, "run: sudo apt-get install -y", "python3-torch") &&
               listed(t, "run: sudo apt-get install -y", "chromium"),
           "%s", t ? t : "");
    free(t);
}
