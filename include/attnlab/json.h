/* json.h -- JSON text in and out (cJSON underneath), for every file
 * format attnlab reads: config.json, state.json, safetensors headers,
 * tokenizer.json, masks, experiment files. */
#ifndef ATTNLAB_JSON_H
#define ATTNLAB_JSON_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/util.h"

struct cJSON;

/* cJSON's allocations through attnlab's hooks (json.c says why); once,
 * before any other thread uses cJSON (al_registry_setup calls it). */
void al_json_setup(void);
/* doc as JSON text, indented if formatted (free it), or NULL when out of
 * memory. Every document attnlab writes goes through here: a cJSON
 * function that could not allocate leaves its part out of the document
 * and says so only by its return value, which much building code does
 * not check one by one, so NULL also when any cJSON allocation of this
 * thread failed since the last al_json_print: a document missing a part
 * is refused, never written. */
char *al_json_print(int formatted, const struct cJSON *doc);
/* Whether cJSON's allocations are fault points (util.c) while a fault is
 * armed: on unless turned off (the fault test under AddressSanitizer). */
void al_json_fault_sites(int on);

/* Parse len bytes of JSON (need not be NUL-terminated) with cJSON,
 * refusing NUL bytes and nesting deeper than AL_JSON_MAX_DEPTH before
 * cJSON sees the text (its recursion is the stack's only bound). Returns
 * 0 with *out set (free with cJSON_Delete), or -1 with *out NULL and the
 * message "SOURCE: invalid JSON at line L, column C" (just "invalid JSON
 * ..." if source_name is NULL). */
#define AL_JSON_MAX_DEPTH 100
int al_json_parse(const char *text, size_t len, const char *source_name, struct cJSON **out,
                  al_err *e);

/* al_json_parse of the file at path (at most max bytes, read with
 * al_read_file; messages name the file). 0 with *out (cJSON_Delete it),
 * or -1 with *out NULL. */
int al_json_read_file(const char *path, size_t max, struct cJSON **out, al_err *e);

/* A key safe to print in a one-line message (at most 60 characters,
 * unprintable bytes as '?'); returns buf. */
const char *al_json_key_disp(const char *k, char buf[64]);
/* The first key of object j that is given twice (cJSON keeps both, and a
 * reader that looks a key up would take the first silently), or NULL.
 * Quadratic: for the few dozen keys of a config file. */
const char *al_json_dup_key(const struct cJSON *j);
/* 0 if no key of object j is given twice, else -1 with "SRC: key 'K'
 * given twice" (src names the file). */
int al_json_unique_keys(const struct cJSON *j, const char *src, al_err *e);
/* An integer-valued JSON number within [lo, hi]: 0 and *out, else -1. */
int al_json_int_in(const struct cJSON *j, double lo, double hi, double *out);
/* A u64 from an exact JSON integer (<= 2^53) or a decimal string. */
int al_json_u64(const struct cJSON *j, uint64_t *out);
/* A raw number item holding the shortest text that reads back as d bit
 * for bit (cJSON's own printing rounds to 15 digits); null if d is not
 * finite. NULL when out of memory. */
struct cJSON *al_json_num_item(double d);
/* A u64 as a number item if exact in a double, else a decimal string. */
struct cJSON *al_json_u64_item(uint64_t x);
/* How sure a number is, as --json writes it everywhere: name_se (the
 * standard error) and name_ci ([lo, hi]) added to object j; NaN as null.
 * 0, or −1 when out of memory. */
struct al_interval;
int al_json_add_ci(struct cJSON *j, const char *name, const struct al_interval *iv);
/* The settings of a document's intervals: "intervals": {"level",
 * "bootstrap", "seed", "items", "method"} added to doc; the object, or
 * NULL when out of memory. */
struct cJSON *al_json_add_intervals(struct cJSON *doc, double level, int boot, uint64_t seed,
                                    int items, const char *method);
/* Turn every number of a parsed tree into an exact raw item, so that
 * re-printing it loses nothing. 0, or -1 when out of memory. */
int al_json_exact_numbers(struct cJSON *j);

#endif
