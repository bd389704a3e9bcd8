/* cmd_report.c -- `attnlab report`: index.html, report.ipynb and the
 * pictures of one or more models from a results database. The work is
 * report.c's; this is flags and help. --model may be repeated, which the
 * flag parser does not do, so those are taken out of argv first. */
#include <stdio.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/plot.h"
#include "attnlab/report.h"

static al_report_opts o;
static const char *o_model = NULL, *o_labels = NULL, *o_figures = NULL;

static al_flag flags[] =
    {{"db", AL_STR, &o.db, "FILE",
      "results database (from train --db, circuits, scores, ablate, prune)", 1, 0},
     {"model", AL_STR, &o_model, "DIR", "model directory; repeat for several models (at least one)",
      0, 0},
     {"labels", AL_STR, &o_labels, "A,B",
      "names shown for the models, in order (default: folder names)", 0, 0},
     {"out", AL_STR, &o.out_dir, "DIR",
      "folder for index.html, report.ipynb and the PNGs (created)", 1, 0},
     {"title", AL_STR, &o.title, "TEXT", "page title (default: attnlab report)", 0, 0},
     {"intro", AL_STR, &o.intro, "TEXT", "a paragraph under the title", 0, 0},
     {"prompt", AL_STR, &o.prompt, "TEXT", "draw attention patterns of every layer on this text", 0,
      0},
     {"repeat", AL_INT, &o.repeat, "N", "draw attention on N random tokens shown twice (0: not)", 0,
      0},
     {"data", AL_STR, &o.data, "FILE",
      "token file whose most frequent tokens the QK/OV pictures show", 0, 0},
     {"top-n", AL_INT, &o.top_n, "N", "tokens in the QK/OV pictures", 0, 0},
     {"pictures", AL_STR, &o.pictures, "LIST",
      "picture kinds to draw, comma-separated (default: all of training, attention, spectrum, "
      "qk-pos, qk, ov, composition, ablation, pruning, sweep-induction, and the run kinds: "
      "patching, paths, dla, terms, attrpatch, circuit, circuit-curve, view, sae-feature, "
      "sae-heads)",
      0, 0},
     {"interactive", AL_BOOL, &o.interactive, NULL,
      "add explorers (attention and loss on --prompt, patching and attribution heatmaps, the SAE "
      "features browser): inline "
      "JavaScript and JSON, still one folder with no network access",
      0, 0},
     {"figures", AL_STR, &o_figures, "F",
      "png | svg: the page shows SVG pictures (drawn beside the PNGs, which the notebook shows)", 0,
      0},
     {"threads", AL_INT, &o.threads, "N", "threads (0 = default)", 0, 0},
     AL_FLAGS_END};

static int run_report(int argc, char **argv);
al_command al_cmd_report = {
    "report",
    "write a static HTML report (and a Jupyter notebook) of models from the database",
    "--db FILE --model DIR [--model DIR2 ...] --out DIR [--prompt TEXT]",
    "Writes DIR/index.html: one page without JavaScript or network access\n"
    "(inline CSS, pictures as relative <img> links) with, per model, the model\n"
    "card, the training curve, the head summary, induction / previous-token /\n"
    "copying heads, whether copying_eigen agrees with copying_ablation,\n"
    "skip-trigrams, composition, ablation and pruning results, the SAEs (each\n"
    "sae train run's evaluation, each sae features run's densest features and\n"
    "their dashboards) and every picture\n"
    "the database allows (drawn into DIR like `attnlab heatmap`). With several\n"
    "models a comparison table comes first, and with both tied and untied\n"
    "models it states whether the eigenvalue copying score agrees with ablation\n"
    "better for one kind. A database holding a sweep (merged from several, or\n"
    "several seeds of one setting) gets an \"Across seeds\" section: the\n"
    "sweep_summary view, sentences from its numbers and the sweep-induction picture.\n"
    "Beside it DIR/report.ipynb (nbformat 4) opens the\n"
    "database with Python's sqlite3, runs the queries of docs/sql.md and shows the\n"
    "pictures. Pictures that cannot be drawn are warnings, not errors.\n"
    "--interactive adds, per model, explorers drawn by inline JavaScript from\n"
    "inline JSON (a Content-Security-Policy allows nothing else): attention of\n"
    "every head on --prompt (thumbnails; click one to enlarge, hover a token for\n"
    "its row and column), the prompt's tokens coloured by their loss with the\n"
    "top-5 predictions on hover, heatmaps of the patching, path-patching\n"
    "and attribution rows with the value under the cursor, and per sae features\n"
    "run a features browser (sort by density, induction index or head; click a\n"
    "feature for its contexts, logit effects and head shares). With --figures svg\n"
    "every picture is also drawn as NAME.svg (real text, for papers) and the\n"
    "page shows those.",
    flags,
    run_report,
};

/* Move every --model DIR / --model=DIR into o.models; the rest to rest. */
static int take_models(int argc, char **argv, char **rest, int *nrest, al_err *e) {
    *nrest = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "--model") == 0) {
            if (i + 1 >= argc) return al_errf(e, "--model needs a value (DIR)");
            v = argv[++i];
        } else if (strncmp(a, "--model=", 8) == 0) {
            v = a + 8;
        }
        if (!v) {
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (o.n_models == AL_REPORT_MAX_MODELS)
            return al_errf(e, "at most %d --model directories", AL_REPORT_MAX_MODELS);
        o.models[o.n_models++] = v;
    }
    if (!o.n_models) return al_errf(e, "--model is required");
    return 0;
}

/* --labels a,b,c onto o.labels (the string is split in place). */
static int take_labels(char *s, al_err *e) {
    int k = 0;
    for (char *p = s; p && *p; k++) {
        char *c = strchr(p, ',');
        if (c) *c = 0;
        if (k >= o.n_models) return al_errf(e, "--labels has more names than there are --model");
        o.labels[k] = p;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

static int run_report(int argc, char **argv) {
    al_err e;
    char *rest[argc > 0 ? argc : 1];
    int nrest;
    static char labels[4096];
    o = al_report_defaults();
    if (take_models(argc, argv, rest, &nrest, &e) ||
        al_flags_parse(flags, nrest, rest, NULL, 0, NULL, &e))
        return al_cli_usage(&al_cmd_report, &e);
    if (o.repeat < 0 || o.top_n < 1) {
        al_errf(&e, "need --repeat >= 0 and --top-n >= 1");
        return al_cli_usage(&al_cmd_report, &e);
    }
    if (al_threads_check(o.threads, &e)) return al_cli_usage(&al_cmd_report, &e);
    if (o_figures) {
        o.figures = al_fig_format_parse(o_figures);
        if (o.figures != AL_FIG_PNG && o.figures != AL_FIG_SVG) {
            al_errf(&e, "--figures must be png or svg, not '%s'", o_figures);
            return al_cli_usage(&al_cmd_report, &e);
        }
    }
    if (o_labels) {
        snprintf(labels, sizeof labels, "%s", o_labels);
        if (take_labels(labels, &e)) return al_cli_usage(&al_cmd_report, &e);
    }
    al_report_result r;
    if (al_report_write(&o, &r, &e)) return al_cli_error(&e);
    printf("wrote %s (%d picture%s%s) and %s\n", r.index_path, r.n_pictures,
           r.n_pictures == 1 ? "" : "s",
           r.n_failed ? ", some could not be drawn: see warnings" : "", r.notebook_path);
    if (r.n_removed)
        printf("removed %d picture%s of the previous report that this one no longer shows\n",
               r.n_removed, r.n_removed == 1 ? "" : "s");
    return 0;
}

/* `attnlab help report` shows the defaults. */
__attribute__((constructor)) static void init_defaults(void) { o = al_report_defaults(); }
