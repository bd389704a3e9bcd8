/* test_layers.c -- `make layers` (scripts/layers.sh): the real tree
 * keeps the layer order, and a tree that breaks a rule fails with the
 * file, the header and the rule named. The broken trees are built in a
 * temporary folder, so the check is shown to fail, not assumed to. */
#include "test.h"

/* A tree with src/<layer>/<name>.c files; each spec is "layer/name:include"
 * ("" include = none). */
static void make_tree(const char *root, const char *const *specs) {
    CHECK(t_sh("mkdir -p %s/include/attnlab", root) == 0);
    for (int i = 0; specs[i]; i++) {
        char dir[128], name[128], inc[128] = "";
        CHECK(sscanf(specs[i], "%127[^/]/%127[^:]:%127s", dir, name, inc) >= 2);
        CHECK(t_sh("mkdir -p %s/src/%s", root, dir) == 0);
        if (inc[0])
            CHECK(t_sh("printf '#include \"attnlab/%s\"\\n' > %s/src/%s/%s.c", inc, root, dir,
                       name) == 0);
        else
            CHECK(t_sh(": > %s/src/%s/%s.c", root, dir, name) == 0);
    }
}

TEST(layers_real_tree_passes) {
    /* a shell script over the sources: the sanitizer build has nothing to add */
    if (T_SAN) t_skip("make layers runs in the plain suite");
    CHECK(t_sh("sh scripts/layers.sh . > %s 2>&1", t_path("out")) == 0);
    char *out = t_slurp(t_path("out"));
    CHECKF(out && strstr(out, "layers: ok"), "output: %s", out ? out : "(none)");
    free(out);
}

TEST(layers_engine_including_store_fails_naming_file_and_rule) {
    const char *root = t_path("tree");
    static const char *const specs[] = {"engine/model:store.h", "store/store:model.h", NULL};
    make_tree(root, specs);
    CHECK(t_sh("sh scripts/layers.sh %s > %s 2>&1", root, t_path("out")) == 1);
    char *out = t_slurp(t_path("out"));
    CHECKF(out && strstr(out, "src/engine/model.c (engine) includes attnlab/store.h (store): "
                              "engine may not include a layer above it"),
           "output: %s", out ? out : "(none)");
    CHECK(out && strstr(out, "FAILED"));
    free(out);
}

/* The angle-bracket form is the same include and obeys the same rule. */
TEST(layers_angle_bracket_include_is_checked) {
    const char *root = t_path("tree");
    static const char *const specs[] = {"core/util:", "store/store:", NULL};
    make_tree(root, specs);
    CHECK(t_sh("printf '#include <attnlab/store.h>\\n' > %s/src/core/util.c", root) == 0);
    CHECK(t_sh("sh scripts/layers.sh %s > %s 2>&1", root, t_path("out")) == 1);
    char *out = t_slurp(t_path("out"));
    CHECKF(out && strstr(out, "src/core/util.c (core) includes attnlab/store.h (store)"),
           "output: %s", out ? out : "(none)");
    free(out);
}

TEST(layers_train_and_analysis_never_include_each_other) {
    const char *root = t_path("tree");
    static const char *const specs[] = {"train/train:scores.h", "analysis/scores:", NULL};
    make_tree(root, specs);
    CHECK(t_sh("sh scripts/layers.sh %s > %s 2>&1", root, t_path("out")) == 1);
    char *out = t_slurp(t_path("out"));
    CHECKF(out && strstr(out, "train and analysis are beside each other"), "output: %s",
           out ? out : "(none)");
    free(out);
}

TEST(layers_header_without_source_needs_a_layer_comment) {
    const char *root = t_path("tree");
    static const char *const specs[] = {"core/util:orphan.h", NULL};
    make_tree(root, specs);
    CHECK(t_sh(": > %s/include/attnlab/orphan.h", root) == 0);
    CHECK(t_sh("sh scripts/layers.sh %s > %s 2>&1", root, t_path("out")) == 1);
    char *out = t_slurp(t_path("out"));
    CHECKF(out && strstr(out, "belongs to no layer"), "output: %s", out ? out : "(none)");
    free(out);
    /* with the comment it is placed, and core including a core header is fine */
    CHECK(t_sh("printf '/* orphan.h (layer: core) */\\n' > %s/include/attnlab/orphan.h", root) ==
          0);
    CHECK(t_sh("sh scripts/layers.sh %s > %s 2>&1", root, t_path("out")) == 0);
}
