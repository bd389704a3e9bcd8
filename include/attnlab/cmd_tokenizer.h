/* cmd_tokenizer.h -- `attnlab tokenizer train` as functions, so that the
 * experiment runner trains its tokenizer exactly as the command does. */
#ifndef ATTNLAB_CMD_TOKENIZER_H
#define ATTNLAB_CMD_TOKENIZER_H

#include "attnlab/args.h"

typedef struct al_tok_cli {
    const char *in; /* --in: training text (required) */
    const char *out; /* --out: tokenizer.json to write (required) */
    int vocab; /* --vocab */
} al_tok_cli;

/* Room for the flag table (its flags + the end marker). */
#define AL_TOK_CLI_NFLAGS 4

al_tok_cli al_tok_cli_defaults(void);
/* Fill f with the flag table over *o (what the command parses and
 * `attnlab help tokenizer train` prints); it points into *o. */
void al_tok_cli_flags(al_tok_cli *o, al_flag f[AL_TOK_CLI_NFLAGS]);
/* Learn the merges and write the tokenizer as the command does, printing
 * its summary line. Returns 0, 1 on failure or 2 on bad options (e set
 * either way): the command's exit codes. */
int al_tok_cli_run(const al_tok_cli *o, al_err *e);

#endif
