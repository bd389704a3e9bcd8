/* doc_text.h -- reading a run's JSON document back for its text: the
 * analyses' text renderers (registry.h's text phase) take every number
 * and name they print from the document, through these.
 * layer: cli */
#ifndef ATTNLAB_DOC_TEXT_H
#define ATTNLAB_DOC_TEXT_H

#include <stdint.h>
#include <cjson/cJSON.h>

/* o's member k (NULL when o is NULL or has no such key). */
const cJSON *al_dt_get(const cJSON *o, const char *k);
/* o's number k (a number item, or al_json_num_item's raw digits, read
 * back to the same double); NAN when missing, null or not a number. */
double al_dt_num(const cJSON *o, const char *k);
/* Item i of array arr as al_dt_num reads a number (NAN when missing). */
double al_dt_at(const cJSON *arr, int i);
/* o's number k as an int (0 when missing). */
int al_dt_int(const cJSON *o, const char *k);
/* o's string k ("" when missing or null). */
const char *al_dt_str(const cJSON *o, const char *k);
/* o's u64 k, written as al_json_u64_item writes it (0 when missing). */
uint64_t al_dt_u64(const cJSON *o, const char *k);
/* o's boolean k (0 when missing). */
int al_dt_bool(const cJSON *o, const char *k);
/* The line "circuit FILE: WHAT" when the run ran a circuit (the driver's
 * "circuit_run" key), else nothing. */
void al_dt_circuit(const cJSON *doc);

#endif
