/* args.h -- declarative command-line flags and the subcommand table.
 *
 * Each command declares its flags once, as an array of al_flag pointing
 * at its option variables (which hold the defaults). The same array
 * drives parsing and `attnlab help <command>`, so help can never drift
 * from what is accepted. */
#ifndef ATTNLAB_ARGS_H
#define ATTNLAB_ARGS_H

#include <stdint.h>
#include <stdio.h>
#include "attnlab/util.h"

typedef enum { AL_STR, AL_INT, AL_FLOAT, AL_BOOL, AL_U64 } al_flag_type;

typedef struct al_flag {
    const char *name; /* without the leading "--" */
    al_flag_type type;
    void *dst; /* const char **, int *, double *, int *, uint64_t * */
    const char *meta; /* e.g. "DIR"; NULL for AL_BOOL */
    const char *help;
    int required;
    int seen; /* set by the parser */
} al_flag;

#define AL_FLAGS_END                                                                               \
    { NULL, AL_STR, NULL, NULL, NULL, 0, 0 }

/* Parse argv[0..argc) against flags. Accepts "--name value" and
 * "--name=value"; AL_BOOL flags take no value. Positional arguments are
 * refused unless pos/npos is given (then up to max_pos are collected).
 * Returns 0, or -1 with e set (a usage error: exit code 2). */
int al_flags_parse(al_flag *flags, int argc, char **argv, const char **pos, int max_pos, int *npos,
                   al_err *e);
/* True if the flag of that name was given on the command line. */
int al_flag_seen(const al_flag *flags, const char *name);

/* One flag's value and seen mark, as al_flags_save found them. */
typedef struct al_flag_val {
    union {
        const char *s;
        int i;
        double d;
        uint64_t u;
    } v;
    int seen;
} al_flag_val;
/* The values and seen marks of every flag of a table into vals (a slot
 * per flag), and back again: a process that parses one table more than
 * once (a test that runs commands in process) puts the defaults back
 * after each parse, so that a call never runs with an earlier call's
 * options, nor reads strings of an argv it no longer owns. */
void al_flags_save(const al_flag *flags, al_flag_val *vals);
void al_flags_restore(al_flag *flags, const al_flag_val *vals);

/* A subcommand. `name` may have two words ("tokenizer train"). run()
 * returns 0 on success, 1 on bad input/failure (it has printed the error
 * via al_cli_error), 2 on usage errors. */
typedef struct al_command {
    const char *name;
    const char *summary;
    const char *usage; /* one line of synopsis after the name */
    const char *description; /* paragraph for `attnlab help <name>`; may be NULL */
    al_flag *flags;
    int (*run)(int argc, char **argv);
} al_command;

/* Apply a JSON object (file contents) to a flag table: each key is a
 * flag name with '-' written as '_' (or as '-'); strings for AL_STR,
 * integers for AL_INT/AL_U64, numbers for AL_FLOAT, true/false for
 * AL_BOOL (null for AL_STR sets NULL; AL_U64 also takes a decimal
 * string, for values above 2^53). Unknown keys, repeated keys and wrong
 * types are errors naming the key; on error nothing is assigned.
 * Flags already marked seen (given on the command line or by an earlier
 * JSON file) are not overwritten, and flags set here are marked seen, so
 * the first source applied wins. String values are kept alive in an
 * internal arena until al_config_arena_free(). (flags_json.c) */
int al_flags_apply_json(al_flag *flags, const char *json_text, const char *source_name, al_err *e);
void al_config_arena_free(void);
/* Serialize a flag table's current values as a JSON object (caller
 * frees; NULL when out of memory). Stored as the training options in
 * state.json. */
char *al_flags_to_json(const al_flag *flags);
/* "unknown option '--name'" with the nearest flag name of flags when one
 * is near ("did you mean --model?"), in e: returns −1. */
int al_flag_unknown(const al_flag *flags, const char *name, size_t len, al_err *e);
/* The flag a JSON key names ('-' written as '_' or '-'), or NULL. */
const al_flag *al_flag_for_key(const al_flag *flags, const char *key);
/* 1 if the JSON value v fits flag f (the check al_flags_apply_json
 * makes before assigning anything), else 0. */
struct cJSON;
int al_flag_json_ok(const al_flag *f, const struct cJSON *v);

void al_command_help(FILE *f, const al_command *cmd);
/* Print "attnlab: <msg>" on stderr; returns 1 (the bad-input exit code). */
int al_cli_error(const al_err *e);
int al_cli_usage(const al_command *cmd, const al_err *e); /* returns 2 */

#endif
