/* membudget.c -- the memory budget (membudget.h): the limit from
 * ATTNLAB_MEM_LIMIT or the physical memory, and the one refusal line every
 * command uses. */
#include "attnlab/membudget.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ATTNLAB_MEM_LIMIT as bytes, or 0 when unset or not a positive size. */
static double env_limit(void) {
    const char *s = getenv("ATTNLAB_MEM_LIMIT");
    if (!s || !*s) return 0;
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K': mul = 1e3, end++; break;
    case 'm':
    case 'M': mul = 1e6, end++; break;
    case 'g':
    case 'G': mul = 1e9, end++; break;
    case 't':
    case 'T': mul = 1e12, end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end || !isfinite(v) || !(v > 0)) return 0;
    return v * mul;
}

double al_mem_limit(int *from_env) {
    double v = env_limit();
    if (from_env) *from_env = v > 0;
    return v > 0 ? v : 0.8 * al_mem_total();
}

void al_fmt_bytes(char *buf, size_t cap, double b) {
    if (!isfinite(b))
        snprintf(buf, cap, "more than can be counted");
    else if (b < 1e3)
        snprintf(buf, cap, "%.0f B", b);
    else if (b < 1e6)
        snprintf(buf, cap, "%.1f kB", b / 1e3);
    else if (b < 1e9)
        snprintf(buf, cap, "%.1f MB", b / 1e6);
    else if (b < 1e12)
        snprintf(buf, cap, "%.1f GB", b / 1e9);
    else
        snprintf(buf, cap, "%.1f TB", b / 1e12);
}

int al_mem_check(double bytes, const char *who, const char *what, const char *fix, al_err *e) {
    int env = 0;
    double lim = al_mem_limit(&env);
    if (isfinite(bytes) && (lim <= 0 || bytes <= lim)) return 0;
    char need[32], have[32];
    al_fmt_bytes(need, sizeof need, bytes);
    al_fmt_bytes(have, sizeof have, lim);
    if (lim <= 0) snprintf(have, sizeof have, "unknown");
    return al_errf(e, "%s would allocate %s for %s (limit: %s, %s); %s", who, need, what, have,
                   env ? "ATTNLAB_MEM_LIMIT" : "80% of this machine's memory", fix);
}
