/* cmd_encode.h -- `attnlab encode` as functions, so that the experiment
 * runner writes its token files exactly as the command does. */
#ifndef ATTNLAB_CMD_ENCODE_H
#define ATTNLAB_CMD_ENCODE_H

#include "attnlab/args.h"

typedef struct al_encode_cli {
    const char *tokenizer; /* --tokenizer (required) */
    const char *in; /* --in: the text (required) */
    const char *out; /* --out: X.bin names X.train.bin and X.val.bin (required) */
    double val; /* --val: share of documents for validation */
    const char *docs; /* --docs: blank, line, eot or story */
    const char *val_pick; /* --val-pick: last or hash (corpus.h, al_corpus_val_split) */
} al_encode_cli;

/* Room for the flag table (its flags + the end marker). */
#define AL_ENCODE_CLI_NFLAGS 7

al_encode_cli al_encode_cli_defaults(void);
/* Fill f with the flag table over *o (what the command parses and
 * `attnlab help encode` prints); it points into *o. */
void al_encode_cli_flags(al_encode_cli *o, al_flag f[AL_ENCODE_CLI_NFLAGS]);
/* Split, encode and write the token files as the command does, printing
 * its summary. Returns 0, 1 on failure or 2 on bad options (e set either
 * way): the command's exit codes. */
int al_encode_cli_run(const al_encode_cli *o, al_err *e);

#endif
