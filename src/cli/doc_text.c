/* doc_text.c -- reading a run's JSON document back for its text
 * (doc_text.h). */
#include "attnlab/doc_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const cJSON *al_dt_get(const cJSON *o, const char *k) {
    return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
}

/* A number item, or a raw one (al_json_num_item's exact digits, which
 * read back to the same double). */
static int num_of(const cJSON *v, double *d) {
    if (cJSON_IsNumber(v)) return *d = v->valuedouble, 1;
    if (cJSON_IsRaw(v) && v->valuestring) {
        char *end;
        *d = strtod(v->valuestring, &end);
        return end != v->valuestring;
    }
    return 0;
}

double al_dt_num(const cJSON *o, const char *k) {
    double d;
    return num_of(al_dt_get(o, k), &d) ? d : NAN;
}

double al_dt_at(const cJSON *arr, int i) {
    double d;
    return num_of(cJSON_GetArrayItem(arr, i), &d) ? d : NAN;
}

int al_dt_int(const cJSON *o, const char *k) {
    double d;
    return num_of(al_dt_get(o, k), &d) && isfinite(d) ? (int)d : 0;
}

const char *al_dt_str(const cJSON *o, const char *k) {
    const cJSON *v = al_dt_get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

uint64_t al_dt_u64(const cJSON *o, const char *k) {
    const cJSON *v = al_dt_get(o, k);
    double d;
    if (cJSON_IsString(v)) return strtoull(v->valuestring, NULL, 10);
    return num_of(v, &d) && d >= 0 && d < 18446744073709551616.0 ? (uint64_t)d : 0;
}

int al_dt_bool(const cJSON *o, const char *k) { return cJSON_IsTrue(al_dt_get(o, k)); }

void al_dt_circuit(const cJSON *doc) {
    const cJSON *c = al_dt_get(doc, "circuit_run");
    if (c) printf("circuit %s: %s\n", al_dt_str(c, "file"), al_dt_str(c, "what"));
}
