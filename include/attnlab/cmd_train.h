/* cmd_train.h -- `attnlab train` as functions, so that the experiment
 * runner trains exactly as the command does: the flag table, the
 * precedence of option sources, Ctrl-C, and the database observer. */
#ifndef ATTNLAB_CMD_TRAIN_H
#define ATTNLAB_CMD_TRAIN_H

#include "attnlab/args.h"
#include "attnlab/train.h"

/* The trainer's options plus the two that only the command has. */
typedef struct al_train_cli {
    al_train_opts t;
    const char *config; /* --config: JSON file of the same keys */
    const char *db; /* --db: SQLite file for training dynamics */
    const char *probe_tokens; /* --probe-tokens all|seen|FILE.bin: the ids
                         * --db's induction probe draws from ("all") */
} al_train_cli;

/* Room for the flag table (its flags + the end marker). */
#define AL_TRAIN_CLI_NFLAGS 40

al_train_cli al_train_cli_defaults(void);
/* Fill f with the flag table over *o (the table the command parses and
 * `attnlab help train` prints); it points into *o. */
void al_train_cli_flags(al_train_cli *o, al_flag f[AL_TRAIN_CLI_NFLAGS]);

/* Train as `attnlab train` does with *o parsed through flags: apply
 * --config and, with --resume, the options saved in the checkpoint
 * (command line > --config > saved options > defaults), record into --db
 * if given, and turn SIGINT/SIGTERM into a save-and-stop. Returns 0 with
 * *interrupted set if it stopped that way (or at --stop-at), or -1 with
 * e set. Option strings read from JSON live until al_config_arena_free. */
int al_train_cli_run(al_train_cli *o, al_flag *flags, int *interrupted, al_err *e);

#endif
