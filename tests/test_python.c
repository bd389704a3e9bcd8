/* test_python.c -- python/attnlab (ctypes over build/libattnlab.so)
 * against the CLI: tests/py_api_check.py runs the checks (tokenizer,
 * forward, cache, an analysis by name) on a tiny model and exits 1 at
 * the first mismatch. Skipped without NumPy, and under the sanitizers
 * (python cannot load an ASan-built library). */
#include <stdlib.h>
#include <string.h>
#include "attnlab/util.h"
#include "test.h"

TEST(python_package_matches_cli) {
    if (t_sh("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
        t_skip("no /usr/bin/python3 with numpy");
    char lib[1100];
    snprintf(lib, sizeof lib, "%s", t_bin());
    char *slash = strrchr(lib, '/');
    snprintf(slash ? slash + 1 : lib, sizeof lib - (size_t)(slash ? slash + 1 - lib : 0),
             "libattnlab.so");
    if (!al_file_exists(lib)) t_skip("no libattnlab.so beside the binary (a sanitizer build?)");
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
