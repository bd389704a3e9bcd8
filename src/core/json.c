/* json.c -- JSON text in and out, for every file format attnlab reads
 * (see json.h). All JSON goes through al_json_parse, which bounds nesting
 * before cJSON recurses; numbers written through al_json_num_item read
 * back bit for bit. */
#define _GNU_SOURCE /* dladdr */
#include "attnlab/json.h"
#include "attnlab/stats.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

/* Deepest bracket nesting in text, stopping early past `limit`. Strings
 * are skipped so brackets inside them do not count. */
static int json_depth(const char *s, size_t n, int limit) {
    int d = 0, max = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
        } else if (c == '[' || c == '{') {
            if (++d > max) max = d;
            if (max > limit) break;
        } else if (c == ']' || c == '}') {
            d--;
        }
    }
    return max;
}

/* ------------------------------------------------ cJSON's allocations
 *
 * cJSON allocates through hooks installed here, for two reasons. A parse
 * that fails for memory must not be reported as invalid JSON, so the
 * hook notes the failure (json_oom, per thread). And the tests that fail
 * every allocation of a command in turn (util.c's fault points) must
 * reach cJSON's too, since nearly every result a command stores or
 * prints is a cJSON document: its site is the first caller outside
 * cJSON (one cJSON_AddNumberToObject is one site however deep in cJSON
 * the allocation is). The walk up the stack happens only while a fault
 * is armed. */
static _Thread_local int json_oom;
static _Thread_local const void *json_site; /* al_json_print's caller */
static const void *cjson_base; /* where libcjson is loaded */
static int json_faults = 1; /* al_json_fault_sites */

void al_json_fault_sites(int on) { json_faults = on; }

static int in_cjson(void *pc) {
    Dl_info i;
    return dladdr(pc, &i) && i.dli_fbase == cjson_base;
}

static void *json_malloc(size_t n) {
    if (json_faults && al_fault_armed()) {
        void *pc[32];
        int k = backtrace(pc, 32), i = 1;
        while (i < k && !in_cjson(pc[i])) i++;
        while (i < k && in_cjson(pc[i])) i++;
        const void *site = json_site ? json_site : i < k ? pc[i] : __builtin_return_address(0);
        if (al_fault_at(site)) {
            json_oom = 1;
            return NULL;
        }
    }
    void *p = malloc(n);
    if (!p) json_oom = 1;
    return p;
}

char *al_json_print(int formatted, const cJSON *doc) {
    json_site = __builtin_return_address(0); /* each caller a site of its own */
    char *s = json_oom || !doc ? NULL : formatted ? cJSON_Print(doc) : cJSON_PrintUnformatted(doc);
    json_site = NULL, json_oom = 0;
    return s;
}

void al_json_setup(void) {
    Dl_info i;
    if (dladdr((void *)cJSON_Parse, &i)) cjson_base = i.dli_fbase;
    cJSON_Hooks h = {json_malloc, free};
    cJSON_InitHooks(&h);
}

static int src_errf(al_err *e, const char *src, const char *what) {
    return src ? al_errf(e, "%s: %s", src, what) : al_errf(e, "%s", what);
}

int al_json_parse(const char *text, size_t len, const char *source_name, struct cJSON **out,
                  al_err *e) {
    *out = NULL;
    if (memchr(text, 0, len)) return src_errf(e, source_name, "JSON contains a NUL byte");
    if (json_depth(text, len, AL_JSON_MAX_DEPTH) > AL_JSON_MAX_DEPTH) {
        char m[80];
        snprintf(m, sizeof m, "JSON nested deeper than %d levels", AL_JSON_MAX_DEPTH);
        return src_errf(e, source_name, m);
    }
    char *buf = al_malloc(len + 1, 1, e);
    if (!buf) return -1;
    memcpy(buf, text, len);
    buf[len] = 0;
    const char *end = NULL;
    int oom_before = json_oom; /* a document being built elsewhere */
    json_oom = 0;
    cJSON *root = cJSON_ParseWithOpts(buf, &end, 1);
    int oom = json_oom;
    json_oom = oom_before;
    if (!root && oom) {
        free(buf);
        return src_errf(e, source_name, "out of memory reading JSON");
    }
    if (!root) {
        size_t pos = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : len;
        int line = 1, col = 1;
        for (size_t i = 0; i < pos; i++) {
            if (buf[i] == '\n')
                line++, col = 1;
            else
                col++;
        }
        free(buf);
        char m[96];
        snprintf(m, sizeof m, "invalid JSON at line %d, column %d", line, col);
        return src_errf(e, source_name, m);
    }
    free(buf);
    *out = root;
    return 0;
}

/* A key safe to print in a one-line message. */
const char *al_json_key_disp(const char *k, char buf[64]) {
    size_t i = 0;
    for (; k[i] && i < 60; i++) buf[i] = isprint((unsigned char)k[i]) ? k[i] : '?';
    if (k[i]) buf[i - 3] = buf[i - 2] = buf[i - 1] = '.';
    buf[i] = 0;
    return buf;
}

const char *al_json_dup_key(const cJSON *j) {
    for (const cJSON *a = j ? j->child : NULL; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && !strcmp(a->string, b->string)) return a->string;
    return NULL;
}

int al_json_unique_keys(const cJSON *j, const char *src, al_err *e) {
    const char *k = al_json_dup_key(j);
    char kb[64];
    return k ? al_errf(e, "%s: key '%s' given twice", src, al_json_key_disp(k, kb)) : 0;
}

/* An integer-valued JSON number within [lo, hi]. */
int al_json_int_in(const cJSON *j, double lo, double hi, double *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= lo && d <= hi) || d != floor(d)) return -1;
    *out = d;
    return 0;
}

/* u64 from an exact JSON integer or a decimal string. */
int al_json_u64(const cJSON *j, uint64_t *out) {
    double d;
    if (al_json_int_in(j, 0, MAX_EXACT, &d) == 0) {
        *out = (uint64_t)d;
        return 0;
    }
    if (!cJSON_IsString(j) || !j->valuestring[0] || strlen(j->valuestring) > 20) return -1;
    uint64_t x = 0;
    for (const char *p = j->valuestring; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        unsigned v = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - v) / 10) return -1;
        x = x * 10 + v;
    }
    *out = x;
    return 0;
}

/* cJSON 1.7.15 prints a double with 15 significant digits whenever that
 * reads back within a relative DBL_EPSILON, which is not exact (0.1+0.2
 * comes out as 0.3). Numbers we write are therefore raw items holding
 * the shortest text that reads back bit for bit. */
cJSON *al_json_num_item(double d) {
    if (!isfinite(d)) return cJSON_CreateNull();
    char b[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, d);
        if (strtod(b, NULL) == d) break;
    }
    return cJSON_CreateRaw(b);
}

/* Turn every number in a parsed tree into an exact raw item, so that
 * re-printing it (the "train" object of state.json) loses nothing.
 * Depth is bounded by al_json_parse. */
int al_json_exact_numbers(cJSON *j) {
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            cJSON *r = al_json_num_item(j->valuedouble);
            if (!r) return -1;
            j->type = r->type;
            j->valuestring = r->valuestring;
            r->valuestring = NULL;
            cJSON_Delete(r);
        } else if ((cJSON_IsArray(j) || cJSON_IsObject(j)) &&
                   al_json_exact_numbers(j->child) != 0) {
            return -1;
        }
    }
    return 0;
}

cJSON *al_json_u64_item(uint64_t x) {
    if (x <= (uint64_t)MAX_EXACT) return al_json_num_item((double)x);
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, x);
    return cJSON_CreateString(b);
}

int al_json_read_file(const char *path, size_t max, cJSON **out, al_err *e) {
    unsigned char *txt;
    size_t n;
    *out = NULL;
    if (al_read_file(path, &txt, &n, max, e)) return -1;
    int rc = al_json_parse((const char *)txt, n, path, out, e);
    free(txt);
    return rc;
}

int al_json_add_ci(cJSON *j, const char *name, const al_interval *iv) {
    char se[80], ci[80];
    cJSON *a;
    if (snprintf(se, sizeof se, "%s_se", name) >= (int)sizeof se ||
        snprintf(ci, sizeof ci, "%s_ci", name) >= (int)sizeof ci)
        return -1;
    return cJSON_AddItemToObject(j, se, al_json_num_item(iv->se)) &&
                   (a = cJSON_AddArrayToObject(j, ci)) &&
                   cJSON_AddItemToArray(a, al_json_num_item(iv->lo)) &&
                   cJSON_AddItemToArray(a, al_json_num_item(iv->hi))
               ? 0
               : -1;
}

cJSON *al_json_add_intervals(cJSON *doc, double level, int boot, uint64_t seed, int items,
                             const char *method) {
    cJSON *iv = cJSON_AddObjectToObject(doc, "intervals");
    return iv && cJSON_AddNumberToObject(iv, "level", level) &&
                   cJSON_AddNumberToObject(iv, "bootstrap", boot) &&
                   cJSON_AddItemToObject(iv, "seed", al_json_u64_item(seed)) &&
                   cJSON_AddNumberToObject(iv, "items", items) &&
                   cJSON_AddStringToObject(iv, "method", method)
               ? iv
               : NULL;
}
