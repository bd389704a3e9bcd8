/* test_python.c -- python/attnlab (ctypes over build/libattnlab.so)
 * against the CLI and the C library: tests/py_api_check.py (tokenizer,
 * forward, an analysis by name), tests/py_hooks_check.py (hooks, caches,
 * gradients), tests/py_strict_check.py (refused input and closed models,
 * with the CLI's messages), tests/py_fuzz.py (random calls in a child
 * process: no crash, no hang, only documented exceptions),
 * tests/py_doc_examples.py (docs/python.md's examples, one of them
 * compared here with al_attrpatch_run), and the install route of
 * docs/python.md in a fresh venv. Each script exits 1 at the first
 * mismatch. Skipped without NumPy, and under the sanitizers (python
 * cannot load an ASan-built library). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/attrpatch.h"
#include "attnlab/checkpoint.h"
#include "attnlab/util.h"
#include "planted.h"
#include "test.h"

/* libattnlab.so beside the test's binary, or a skip. */
static const char *py_lib(void) {
    static char lib[1100];
    if (t_sh("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
        t_skip("no /usr/bin/python3 with numpy");
    snprintf(lib, sizeof lib, "%s", t_bin());
    char *slash = strrchr(lib, '/');
    snprintf(slash ? slash + 1 : lib, sizeof lib - (size_t)(slash ? slash + 1 - lib : 0),
             "libattnlab.so");
    if (!al_file_exists(lib)) t_skip("no libattnlab.so beside the binary (a sanitizer build?)");
    return lib;
}

/* Every "ok NAME" of want is in the script's output (its FAIL line shown otherwise). */
static void py_ok(const char *out_path, const char *const *want, int n) {
    char *out = t_slurp(out_path);
    for (int i = 0; i < n; i++)
        CHECKF(out && strstr(out, want[i]), "%s", out ? out : "(no output)");
    free(out);
}

TEST(python_package_matches_cli) {
    const char *lib = py_lib();
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 2, 10);
    CHECK(t_sh("ATTNLAB_LIB=%s /usr/bin/python3 tests/py_api_check.py %s/m2 %s %s > %s 2>&1", lib,
               dir, dir, t_bin(), t_path("py.out")) == 0);
    char *out = t_slurp(t_path("py.out"));
    CHECKF(out && strstr(out, "ok tokenizer") && strstr(out, "ok forward") &&
               strstr(out, "ok cache") && strstr(out, "ok analysis"),
           "%s", out ? out : "(no output)");
    free(out);
}

/* Hooks, caches and gradients (tests/py_hooks_check.py says what each
 * check compares with). */
TEST(python_hooks) {
    const char *lib = py_lib(), *dir = t_tmpdir();
    t_tiny_model(dir, 2, 10);
    CHECK(t_sh("ATTNLAB_LIB=%s /usr/bin/python3 tests/py_hooks_check.py %s/m2 > %s 2>&1", lib, dir,
               t_path("py.out")) == 0);
    const char *want[] = {"ok views", "ok writes", "ok order",     "ok exceptions",
                          "ok busy",  "ok input",  "ok gradients", "ok closed"};
    py_ok(t_path("py.out"), want, 8);
}

/* Refusals with their types and messages (tests/py_strict_check.py says
 * what each is compared with: the CLI's stderr for the same value, or the
 * C library called directly). */
TEST(python_strict_inputs) {
    const char *lib = py_lib(), *dir = t_tmpdir();
    t_tiny_model(dir, 2, 10);
    CHECK(t_sh("ATTNLAB_LIB=%s /usr/bin/python3 tests/py_strict_check.py %s/m2 %s %s > %s 2>&1",
               lib, dir, dir, t_bin(), t_path("py.out")) == 0);
    const char *want[] = {"ok ids",      "ok max_mb", "ok names", "ok types",
                          "ok analysis", "ok closed", "ok config"};
    py_ok(t_path("py.out"), want, 7);
}

/* tests/py_fuzz.py: 1,500 random calls on open, closed and never-opened
 * models in a child process; a crash or a hang fails with the call that
 * caused it, as does an exception the package does not document. The
 * seed is printed (ATTNLAB_FUZZ_SEED picks another). */
TEST(python_fuzz) {
    const char *lib = py_lib(), *dir = t_tmpdir();
    t_tiny_model(dir, 2, 10);
    int rc = t_sh("ATTNLAB_LIB=%s /usr/bin/python3 tests/py_fuzz.py %s/m2 %s > %s 2>&1", lib, dir,
                  dir, t_path("py.out"));
    char *out = t_slurp(t_path("py.out"));
    const char *ok = out ? strstr(out, "ok fuzz: ") : NULL;
    CHECKF(rc == 0 && out && strstr(out, "seed ") && ok && atoi(ok + 9) >= 1000, "%s",
           out ? out : "(no output)");
    free(out);
}

/* docs/python.md's examples as written (tests/py_doc_examples.py), and
 * example c's estimates against attribution patching's own
 * (al_attrpatch_run on the same pair, one log-prob item, denoising). */
TEST(python_doc_examples) {
    const char *lib = py_lib(), *dir = t_tmpdir();
    t_tiny_model(dir, 2, 10);
    t_tiny_model(dir, 1, 10);
    al_model pm;
    al_err e;
    planted_model(&pm);
    char pdir[1100];
    snprintf(pdir, sizeof pdir, "%s/planted", dir);
    CHECK_OK(al_ckpt_save(pdir, &pm, NULL, NULL, NULL, NULL, &e), &e);
    al_model_free(&pm);
    CHECK(
        t_sh("ATTNLAB_LIB=%s /usr/bin/python3 tests/py_doc_examples.py docs/python.md %s/m2 %s/m1 "
             "%s %s %s > %s 2>&1",
             lib, dir, dir, pdir, dir, t_bin(), t_path("py.out")) == 0);
    const char *want[] = {"ok a", "ok b", "ok c", "ok d"};
    py_ok(t_path("py.out"), want, 4);
    /* c: T pos answer m_clean m_corr / clean / corrupted / estimates (L, H) */
    FILE *f = fopen(t_path("attrpatch.txt"), "r");
    CHECK(f != NULL);
    if (!f) return;
    int T = 0, pos = 0, ans = 0;
    double mc = 0, mr = 0, est[64];
    CHECK(fscanf(f, "%d %d %d %lf %lf", &T, &pos, &ans, &mc, &mr) == 5 && T > 1 && T <= 32);
    al_pairs t = {.N = 1, .T = T, .n_items = 1, .logit_diff = 0};
    snprintf(t.task, sizeof t.task, "file");
    t.clean = calloc((size_t)3 * T, sizeof(int));
    t.items = calloc(1, sizeof *t.items);
    CHECK(t.clean && t.items);
    if (!t.clean || !t.items) return;
    t.corr = t.clean + T, t.len = t.corr + T, t.len[0] = T;
    t.items[0] = (al_pair_item){0, pos, ans, -1};
    for (int i = 0; i < 2 * T; i++) CHECK(fscanf(f, "%d", &t.clean[i]) == 1);
    al_model m;
    CHECK_OK(al_ckpt_load(t_path("m2"), &m, NULL, &e), &e);
    int LH = m.cfg.n_layers * m.cfg.n_heads;
    for (int i = 0; i < LH; i++) CHECK(fscanf(f, "%lf", &est[i]) == 1);
    fclose(f);
    al_patch_opts o = al_patch_opts_defaults();
    o.batch = 1;
    al_attrpatch_result r;
    CHECK_OK(al_attrpatch_run(&m, &t, &o, 0, &r, &e), &e);
    CHECKF(fabs(r.m_clean - mc) < 1e-5 && fabs(r.m_corr - mr) < 1e-5, "M %g %g vs %g %g", r.m_clean,
           r.m_corr, mc, mr);
    double worst = 0, big = 0;
    for (int i = 0; i < LH; i++) {
        worst = fmax(worst, fabs(r.head[i] - est[i]));
        big = fmax(big, fabs(r.head[i]));
    }
    CHECKF(big > 1e-3 && worst < 1e-4 * fmax(1.0, big),
           "per-head estimates: Python vs al_attrpatch_run differ by %g (largest %g)", worst, big);
    al_attrpatch_result_free(&r);
    al_pairs_free(&t);
    al_model_free(&m);
}

/* The install route of docs/python.md: a venv that sees the system's
 * NumPy, pip without build isolation (and here without an index: no
 * network), the package's build step making the library with make and
 * shipping it; then a fresh process in another folder, with no
 * PYTHONPATH or ATTNLAB_LIB, imports it and runs a forward with a hook.
 * (--without-pip and the system's pip through the venv's python: the
 * same pip and install as the venv's own copy, without ensurepip's
 * seconds.) */
TEST(python_package_installs) {
    py_lib();
    if (t_sh("/usr/bin/python3 -c 'import setuptools, venv, pip' >/dev/null 2>&1") != 0)
        t_skip("no python3-venv, python3-pip or python3-setuptools");
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 3);
    char venv[1100];
    snprintf(venv, sizeof venv, "%s/venv", dir);
    CHECK(t_sh("/usr/bin/python3 -m venv --without-pip --system-site-packages %s > %s 2>&1", venv,
               t_path("venv.out")) == 0);
    CHECK(t_sh("env -u ATTNLAB_LIB %s/bin/python -m pip install --no-index --no-build-isolation "
               "--quiet ./python > %s 2>&1",
               venv, t_path("pip.out")) == 0);
    CHECK(t_sh("cd %s && env -u ATTNLAB_LIB -u PYTHONPATH %s/bin/python -c \"import attnlab, numpy "
               "as np; print(attnlab.__file__); print(attnlab._find_library()); "
               "m = attnlab.Model('%s/m1'); seen = []; "
               "loss = m.run_with_hooks([1, 2, 3, 4], return_type='loss', fwd_hooks=[(lambda n: "
               "True, lambda a, h: seen.append(h.name))]); "
               "print('ok', len(seen) == len(m.hook_names()), loss)\" > %s 2>&1",
               dir, venv, dir, t_path("run.out")) == 0);
    char *out = t_slurp(t_path("run.out"));
    char want[1200];
    snprintf(want, sizeof want, "%s/lib/", venv);
    /* the package and its library from the venv, not the checkout */
    CHECKF(out && strstr(out, want) && strstr(strstr(out, want) + 1, want) &&
               strstr(out, "/attnlab/libattnlab.so") && strstr(out, "ok True "),
           "%s", out ? out : "(no output)");
    free(out);
}

/* The shared library exports api.h's AL_API functions and nothing else
 * (no engine internals a caller could bind to). */
TEST(python_library_exports_only_the_api) {
    char lib[1100];
    snprintf(lib, sizeof lib, "%s", t_bin());
    char *slash = strrchr(lib, '/');
    snprintf(slash ? slash + 1 : lib, sizeof lib - (size_t)(slash ? slash + 1 - lib : 0),
             "libattnlab.so");
    if (!al_file_exists(lib)) t_skip("no libattnlab.so beside the binary (a sanitizer build?)");
    CHECK(t_sh("nm -D --defined-only %s | awk '{print $3}' | sort > %s", lib, t_path("nm")) == 0);
    CHECK(t_sh("sed -n 's/^AL_API .*\\b\\(al_api_[a-z_0-9]*\\)(.*/\\1/p' include/attnlab/api.h | "
               "sort > %s",
               t_path("api")) == 0);
    char *got = t_slurp(t_path("nm")), *want = t_slurp(t_path("api"));
    CHECKF(got && want && strlen(want) > 100 && !strcmp(got, want),
           "exported:\n%s\ndeclared AL_API in api.h:\n%s", got ? got : "", want ? want : "");
    free(got), free(want);
}
