/* cmd_data.h -- `attnlab data synth` and `data code` as functions, so
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

#endif
