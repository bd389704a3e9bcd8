/* test_messages.c -- messages that say what to do: the nearest flag or
 * command for a misspelling, a text file given where a token file is
 * wanted, the flags a kept checkpoint needs, a picture format attnlab
 * does not draw, an empty --name, a folder that is no model (and no lock
 * file left in it), and the report notebook's database path relative to
 * the notebook. One test per message, each checking the exit code, that
 * the message is one line naming the fix, and that nothing was written. */
#include <stdlib.h>
#include <string.h>
#include "attnlab/import.h"
#include "attnlab/util.h"
#include "test.h"

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

TEST(messages_edit_distance) {
    CHECK(al_edit_distance("kitten", 6, "sitting", 7) == 3);
    CHECK(al_edit_distance("", 0, "abc", 3) == 3);
    CHECK(al_edit_distance("layers", 6, "n-layers", 8) == 2);
    CHECK(al_edit_distance("same", 4, "same", 4) == 0);
    CHECK(al_edit_distance("trian", 5, "train", 5) == 1); /* a swap is one edit */
    CHECK(al_edit_distance("scroes", 6, "scores", 6) == 1);
    CHECK(al_edit_distance("heads", 5, "threads", 7) == 2);
    const char *c[] = {"n-layers", "steps", NULL, "step-size"};
    CHECK(!strcmp(al_nearest_word("layers", 6, c, 4), "n-layers"));
    CHECK(!strcmp(al_nearest_word("step", 4, c, 4), "steps")); /* a tie goes to the earlier */
    CHECK(al_nearest_word("zzzzzz", 6, c, 4) == NULL);
    CHECK(al_nearest_word("ab", 2, (const char *[]){"xy"}, 1) == NULL); /* 2 edits of 2 letters */
}

/* A message quoting a file name or JSON key with a newline is still one
 * line (the fuzzer found a duplicated experiment key doing this). */
TEST(messages_one_line_whatever_they_quote) {
    al_err e;
    CHECK(al_errf(&e, "cannot open %s", "a\nb\r\tc\x7f") == -1);
    CHECK(!strcmp(e.msg, "cannot open a?b??c?"));
    CHECK(al_err_prefix(&e, "file %s", "x\ny") == -1);
    CHECK(!strcmp(e.msg, "file x?y: cannot open a?b??c?"));
    const char *dup = t_write("dup.json", "{\"a\\n b\": 1, \"a\\n b\": 2}");
    CHECK(t_sh("%s experiment %s --dry-run 2> %s", t_bin(), dup, t_path("e")) == 1);
    CHECK(t_one_line(t_path("e"), "a? b: given twice"));
}

TEST(messages_path_relative) {
    char b[256];
    CHECK(al_path_relative("/a/b/out", "/a/db.sqlite", b, sizeof b) == 0 &&
          !strcmp(b, "../../db.sqlite"));
    CHECK(al_path_relative("/a/b", "/a/b/r.db", b, sizeof b) == 0 && !strcmp(b, "r.db"));
    CHECK(al_path_relative("/a/bc", "/a/b/r.db", b, sizeof b) == 0 && !strcmp(b, "../b/r.db"));
    CHECK(al_path_relative("/", "/x/y", b, sizeof b) == 0 && !strcmp(b, "x/y"));
    CHECK(al_path_relative("/x/y", "/x/y", b, sizeof b) == 0 && !strcmp(b, "."));
    CHECK(al_path_relative("rel", "/x", b, sizeof b) == -1);
    CHECK(al_path_relative("/a/b/c/d", "/z", b, 6) == -1);
}

TEST(messages_unknown_flag_suggests) {
    CHECK(t_sh("%s train --layers 2 2> %s", t_bin(), t_path("e1")) == 2);
    CHECK(t_one_line(t_path("e1"), "unknown option '--layers' (did you mean --n-layers?)"));
    CHECK(t_sh("%s train --step 10 2> %s", t_bin(), t_path("e2")) == 2);
    CHECK(t_one_line(t_path("e2"), "(did you mean --steps?)"));
    CHECK(t_sh("%s scores --probe-token all 2> %s", t_bin(), t_path("e3")) == 2);
    CHECK(t_one_line(t_path("e3"), "(did you mean --probe-tokens?)"));
    /* nothing near: no guess */
    CHECK(t_sh("%s train --frobnicate 2> %s", t_bin(), t_path("e4")) == 2);
    char *s = t_slurp(t_path("e4"));
    CHECK(s && strstr(s, "unknown option '--frobnicate'") && !strstr(s, "did you mean"));
    free(s);
}

TEST(messages_unknown_command_suggests) {
    CHECK(t_sh("%s trian 2> %s", t_bin(), t_path("e1")) == 2);
    char *s = t_slurp(t_path("e1"));
    CHECK(s && strstr(s, "unknown command 'trian' (did you mean 'attnlab train'?)"));
    free(s);
    /* help with an unknown command: the suggestion and the list of commands */
    CHECK(t_sh("%s help scroes 2> %s", t_bin(), t_path("e2")) == 2);
    s = t_slurp(t_path("e2"));
    CHECKF(s && strstr(s, "did you mean 'attnlab scores'?") && strstr(s, "commands:") &&
               strstr(s, "  train ") && strstr(s, "  discover "),
           "%s", s ? s : "");
    free(s);
    CHECK(t_sh("%s help bogus 2> %s", t_bin(), t_path("e3")) == 2);
    s = t_slurp(t_path("e3"));
    CHECK(s && strstr(s, "unknown command 'bogus'\n") && strstr(s, "commands:"));
    free(s);
}

TEST(messages_text_file_is_not_tokens) {
    const char *txt = t_write("corpus.txt", "once upon a time there was a cat.\nthe end.\n");
    t_pbuf p = t_pcopy("corpus.txt");
    (void)txt;
    CHECK(t_sh("%s train --data %s --out %s 2> %s", t_bin(), p.s, t_path("m"), t_path("e")) == 1);
    CHECK(
        t_one_line(t_path("e"), "is a text file, not a token file: make one with attnlab encode"));
    CHECK(t_sh("test -e %s", t_path("m")) != 0); /* nothing made */
    /* a binary file that is no token file keeps the plain message */
    CHECK(t_sh("head -c 2000 /dev/urandom > %s", t_path("junk.bin")) == 0);
    CHECK(t_sh("%s train --data %s --out %s 2> %s", t_bin(), t_path("junk.bin"), t_path("m"),
               t_path("e2")) == 1);
    CHECK(t_one_line(t_path("e2"), "bad magic/version"));
}

TEST(messages_checkpoint_names_flags) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s train --data %s/s.train.bin --tokenizer %s/tok.json --out %s/m1 "
             "--n-layers 1 --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 --steps 2 2> %s",
             t_bin(), dir, dir, dir, t_path("e"));
    CHECK(t_sh("%s", cmd) == 1);
    char want[1200];
    snprintf(want, sizeof want, "continue it with --resume %s/m1, or start over in it with --force",
             dir);
    CHECK(t_one_line(t_path("e"), want));
}

TEST(messages_picture_extension) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    CHECK(t_sh("%s heatmap --model %s/m1 --what qk --layer 0 --head 0 --out %s/x.jpg 2> %s",
               t_bin(), dir, dir, t_path("e")) == 2);
    CHECK(t_one_line(t_path("e"), "attnlab draws .png, .svg and .pdf pictures, not .jpg"));
    CHECK(t_sh("test -e %s/x.jpg", dir) != 0);
    /* --format does not make another image format's name true */
    CHECK(t_sh("%s heatmap --model %s/m1 --what qk --layer 0 --head 0 --format png --out %s/x.jpg "
               "2>/dev/null",
               t_bin(), dir, dir) == 2);
    CHECK(t_sh("test -e %s/x.jpg", dir) != 0);
    /* no extension at all is still a PNG, as before */
    CHECK(t_sh("%s heatmap --model %s/m1 --what qk --layer 0 --head 0 --out %s/x > /dev/null 2>&1",
               t_bin(), dir, dir) == 0);
    CHECK(t_sh("head -c 4 %s/x | grep -q PNG", dir) == 0);
}

TEST(messages_not_a_model_no_lock) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2); /* dir itself holds data files, no model */
    CHECK(t_sh("%s run --model %s --prompt hello 2> %s", t_bin(), dir, t_path("e")) == 1);
    CHECK(t_one_line(t_path("e"), "is not a model directory (no model.safetensors or config.json"));
    CHECK(t_sh("test -e %s/.lock", dir) != 0);
    CHECK(t_sh("%s scores --model %s --db %s/r.db 2> %s", t_bin(), dir, dir, t_path("e2")) == 1);
    CHECK(t_one_line(t_path("e2"), "give the --out directory of attnlab train"));
    CHECK(t_sh("test -e %s/.lock", dir) != 0);
    /* a model folder still gets its lock as before */
    CHECK(t_sh("%s run --model %s/m1 --prompt hello > /dev/null 2>&1", t_bin(), dir) == 0);
    CHECK(t_sh("test -e %s/m1/.lock", dir) == 0);
}

TEST(messages_empty_name) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    CHECK(t_sh("%s names --model %s/m1 --db %s/r.db --data %s/s.val.bin --name '' 2> %s", t_bin(),
               dir, dir, dir, t_path("e")) == 2);
    CHECK(t_one_line(t_path("e"), "--name is empty"));
    CHECK(t_sh("test -e %s/r.db", dir) != 0); /* refused before the database */
}

TEST(messages_notebook_db_relative) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 2);
    CHECK(t_sh("%s scores --model %s/m1 --db %s/r.db --probe-r 6 --probe-n 4 > /dev/null 2>&1",
               t_bin(), dir, dir) == 0);
    CHECK(t_sh("%s report --db %s/r.db --model %s/m1 --out %s/rep/deep > /dev/null 2>&1", t_bin(),
               dir, dir, dir) == 0);
    char p[1100];
    snprintf(p, sizeof p, "%s/rep/deep/report.ipynb", dir);
    char *nb = t_slurp(p);
    CHECKF(nb && strstr(nb, "'../../r.db'") && !strstr(nb, dir), "%s", nb ? nb : "(none)");
    free(nb);
}

/* --progress: the long analyses print progress lines (what, how far,
 * elapsed and the time left) on stderr even when it is not a terminal,
 * and none without it. */
TEST(messages_progress_on_request) {
    t_pbuf dir = t_pcopy(".");
    t_tiny_model(dir.s, 2, 10);
    static const char *const cmds[][2] = {
        {"ablate", "--data DIR/s.val.bin --batches 2 --batch 2 --probe-r 5 --probe-n 4"},
        {"prune", "--data DIR/s.val.bin --method ablation --batches 2 --batch 2"},
        {"patch", "--probe-r 5 --n 4"},
        {"attnstats", "--data DIR/s.val.bin --batches 2 --batch 2"},
        {"discover", "--probe-r 5 --n 4 --method eap"},
        {"attribute", "--probe-r 5 --n 4 --no-paths"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char args[512], *o = args;
        for (const char *s = cmds[i][1]; *s; s++)
            if (!strncmp(s, "DIR", 3))
                o += sprintf(o, "%s", dir.s), s += 2;
            else
                *o++ = *s;
        *o = 0;
        for (int pg = 0; pg < 2; pg++) {
            char db[64], err[64];
            snprintf(db, sizeof db, "r%zu%d.db", i, pg);
            snprintf(err, sizeof err, "e%zu%d.txt", i, pg);
            CHECKF(t_sh("%s %s --model %s/m2 --db %s %s --threads 1 %s > /dev/null 2> %s", t_bin(),
                        cmds[i][0], dir.s, t_path(db), args, pg ? "--progress" : "",
                        t_path(err)) == 0,
                   "%s %s", cmds[i][0], pg ? "--progress" : "");
            char *e = t_slurp(t_path(err));
            int has = e && strstr(e, " elapsed");
            CHECKF(pg ? has : !has, "%s %s: stderr [%s]", cmds[i][0], pg ? "--progress" : "",
                   e ? e : "");
            free(e);
        }
    }
}

/* `attnlab help C` for every command `attnlab --help` lists: exit 0 and
 * the command's usage line; the analyses list the driver's --json,
 * --progress and --strict too. */
TEST(messages_help_every_command) {
    CHECK(t_sh("%s --help > %s", t_bin(), t_path("all.txt")) == 0);
    char *all = t_slurp(t_path("all.txt"));
    const char *p = all ? strstr(all, "\ncommands:\n") : NULL;
    CHECK(p != NULL);
    int n = 0, n_an = 0;
    for (p = p ? strchr(p + 1, '\n') + 1 : NULL; p && !strncmp(p, "  ", 2); n++) {
        const char *nl = strchr(p, '\n'), *gap = strstr(p + 2, "  ");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(gap - p - 2), p + 2);
        CHECKF(t_sh("%s help %s > %s 2>&1", t_bin(), name, t_path("h.txt")) == 0, "help %s", name);
        char *h = t_slurp(t_path("h.txt")), want[96];
        snprintf(want, sizeof want, "usage: attnlab %s ", name);
        CHECKF(h && !strncmp(h, want, strlen(want)), "help %s: [%.80s]", name, h ? h : "");
        if (h && strstr(h, "--strict ") && strstr(h, "--progress ") && strstr(h, "--json ")) n_an++;
        free(h);
        p = nl ? nl + 1 : NULL;
    }
    CHECKF(n >= 30 && n_an >= 10, "%d commands, %d with the driver's flags", n, n_an);
    free(all);
}

/* import --list-presets: one line per built-in preset, with its name,
 * where it is published and its shape. */
TEST(messages_import_list_presets) {
    CHECK(t_sh("%s import --list-presets > %s", t_bin(), t_path("p.txt")) == 0);
    char *t = t_slurp(t_path("p.txt"));
    int n = 0;
    for (const al_import_preset *q = al_import_presets(); q->name; q++, n++) {
        char want[256];
        snprintf(want, sizeof want, "%dL %d %dx%d n_ctx %d d_vocab %d", q->cfg.n_layers,
                 q->cfg.d_model, q->cfg.n_heads, q->cfg.d_head, q->cfg.n_ctx, q->cfg.d_vocab);
        const char *l = t ? strstr(t, q->name) : NULL;
        const char *end = l ? strchr(l, '\n') : NULL;
        CHECKF(l && end && strstr(l, q->repo) && strstr(l, want) && strstr(l, want) < end,
               "%s: [%s] not on its line", q->name, want);
    }
    CHECK(n >= 7 && t && (int)strlen(t) > 0 && count_lines(t) == n);
    free(t);
}
