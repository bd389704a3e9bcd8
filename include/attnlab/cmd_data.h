/* cmd_data.h -- `attnlab data synth`, `data code`, `data prose` and
 * `data mix` as functions, so
 * that the experiment runner writes its corpus exactly as the command
 * does: same flag table, same checks, same output, without a command
 * line. */
#ifndef ATTNLAB_CMD_DATA_H
#define ATTNLAB_CMD_DATA_H

#include <stdint.h>
#include "attnlab/args.h"

typedef struct al_synth_cli {
    const char *out; /* --out: the text file (required) */
    int stories; /* --stories */
    uint64_t seed; /* --seed */
    double repeat_fraction; /* --repeat-fraction */
    int min_sentences, max_sentences, span_min, span_max;
    const char *names_out; /* --names-out, or NULL */
} al_synth_cli;

/* Room for the flag table (its flags + the end marker). */
#define AL_SYNTH_CLI_NFLAGS 10

al_synth_cli al_synth_cli_defaults(void);
/* Fill f with the flag table over *o (the table the command parses and
 * `attnlab help data synth` prints); it points into *o. */
void al_synth_cli_flags(al_synth_cli *o, al_flag f[AL_SYNTH_CLI_NFLAGS]);
/* Write the corpus (and the names file) as `attnlab data synth` does,
 * logging what was written. Returns 0, 1 on failure or 2 on bad options
 * (e set either way): the command's exit codes. */
int al_synth_cli_run(const al_synth_cli *o, al_err *e);

/* 1 if source names a code corpus of `attnlab data code` (pystdlib,
 * gostd). */
int al_data_code_source_ok(const char *source);
/* Write that corpus to out (and its provenance, out.json) as `attnlab
 * data code --source SOURCE [--dir DIR] --out OUT` does, printing the same
 * line; dir NULL: the installed tree. 0, or −1 with e. */
int al_data_code_write(const char *source, const char *dir, const char *out, al_err *e);

/* `attnlab data prose`'s options (NULL: the flag's default). */
typedef struct al_prose_opts {
    const char *source; /* kjv, pydocs or file */
    const char *out;
    const char *unit; /* kjv: chapter (NULL), book or verse */
    const char *from; /* kjv: a saved `bible` output instead of running it */
    const char *dir; /* pydocs: another directory than the installed one */
    const char *in; /* file: the text */
    const char *docs; /* file: how its documents are separated (NULL: blank) */
} al_prose_opts;
/* 1 if source names a corpus of `attnlab data prose` (kjv, pydocs, file). */
int al_data_prose_source_ok(const char *source);
/* Write that corpus and its provenance as the command does, printing the
 * same line. 0, or −1 with e. */
int al_data_prose_write(const al_prose_opts *o, al_err *e);

#define AL_MIX_MAX_IN 16
/* `attnlab data mix`: n inputs (1..AL_MIX_MAX_IN) of corpus files with
 * their shares, documents separated as docs says (NULL: eot). Writes out
 * and out.json as the command does, printing the same lines. 0, or −1
 * with e (a share outside (0, 1], shares not summing to 1, an input too
 * small for its share, unreadable files). */
int al_data_mix_write(const char *out, const char *const *paths, const double *shares, int n,
                      uint64_t bytes, uint64_t seed, const char *docs, al_err *e);

#endif
