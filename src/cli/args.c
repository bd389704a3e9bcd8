/* args.c -- flag parsing and help text from one declaration. */
#include "attnlab/args.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static al_flag *find_flag(al_flag *flags, const char *name, size_t len) {
    for (al_flag *f = flags; f && f->name; f++)
        if (strlen(f->name) == len && strncmp(f->name, name, len) == 0) return f;
    return NULL;
}

int al_flag_unknown(const al_flag *flags, const char *name, size_t len, al_err *e) {
    const char *names[256];
    int n = 0;
    for (const al_flag *f = flags; f && f->name && n < 256; f++) names[n++] = f->name;
    const char *near = al_nearest_word(name, len, names, n);
    if (near)
        return al_errf(e, "unknown option '--%.*s' (did you mean --%s?)", (int)len, name, near);
    return al_errf(e, "unknown option '--%.*s'", (int)len, name);
}

static int set_value(al_flag *f, const char *v, al_err *e) {
    char *end;
    errno = 0;
    switch (f->type) {
    case AL_STR: *(const char **)f->dst = v; return 0;
    case AL_INT: {
        long x = strtol(v, &end, 10);
        if (*v == 0 || *end || errno || x < -2147483647L || x > 2147483647L)
            return al_errf(e, "--%s: '%s' is not an integer", f->name, v);
        *(int *)f->dst = (int)x;
        return 0;
    }
    case AL_U64: {
        if (*v == '-') return al_errf(e, "--%s: '%s' must be >= 0", f->name, v);
        unsigned long long x = strtoull(v, &end, 10);
        if (*v == 0 || *end || errno)
            return al_errf(e, "--%s: '%s' is not a non-negative integer", f->name, v);
        *(uint64_t *)f->dst = (uint64_t)x;
        return 0;
    }
    case AL_FLOAT: {
        double x = strtod(v, &end);
        if (*v == 0 || *end || errno || !isfinite(x))
            return al_errf(e, "--%s: '%s' is not a finite number", f->name, v);
        *(double *)f->dst = x;
        return 0;
    }
    case AL_BOOL: break;
    }
    return al_errf(e, "--%s takes no value", f->name);
}

int al_flags_parse(al_flag *flags, int argc, char **argv, const char **pos, int max_pos, int *npos,
                   al_err *e) {
    if (npos) *npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == 0) {
            if (pos && npos && *npos < max_pos) {
                pos[(*npos)++] = a;
                continue;
            }
            return al_errf(e, "unexpected argument '%s'", a);
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        al_flag *f = find_flag(flags, name, len);
        if (!f) return al_flag_unknown(flags, name, len, e);
        f->seen = 1;
        if (f->type == AL_BOOL) {
            if (eq) return al_errf(e, "--%s takes no value", f->name);
            *(int *)f->dst = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc)
                return al_errf(e, "--%s needs a value (%s)", f->name, f->meta ? f->meta : "VALUE");
            v = argv[++i];
        }
        if (set_value(f, v, e) != 0) return -1;
    }
    for (al_flag *f = flags; f && f->name; f++)
        if (f->required && !f->seen) return al_errf(e, "--%s is required", f->name);
    return 0;
}

int al_flag_seen(const al_flag *flags, const char *name) {
    for (const al_flag *f = flags; f && f->name; f++)
        if (strcmp(f->name, name) == 0) return f->seen;
    return 0;
}

void al_flags_save(const al_flag *flags, al_flag_val *vals) {
    for (const al_flag *f = flags; f && f->name; f++, vals++) {
        memset(vals, 0, sizeof *vals);
        vals->seen = f->seen;
        switch (f->type) {
        case AL_STR: vals->v.s = *(const char **)f->dst; break;
        case AL_INT:
        case AL_BOOL: vals->v.i = *(int *)f->dst; break;
        case AL_FLOAT: vals->v.d = *(double *)f->dst; break;
        case AL_U64: vals->v.u = *(uint64_t *)f->dst; break;
        }
    }
}

void al_flags_restore(al_flag *flags, const al_flag_val *vals) {
    for (al_flag *f = flags; f && f->name; f++, vals++) {
        f->seen = vals->seen;
        switch (f->type) {
        case AL_STR: *(const char **)f->dst = vals->v.s; break;
        case AL_INT:
        case AL_BOOL: *(int *)f->dst = vals->v.i; break;
        case AL_FLOAT: *(double *)f->dst = vals->v.d; break;
        case AL_U64: *(uint64_t *)f->dst = vals->v.u; break;
        }
    }
}

static void format_default(const al_flag *f, char *buf, size_t cap) {
    buf[0] = 0;
    switch (f->type) {
    case AL_STR: {
        const char *s = *(const char **)f->dst;
        if (s) snprintf(buf, cap, " (default: %s)", s);
        break;
    }
    case AL_INT: snprintf(buf, cap, " (default: %d)", *(int *)f->dst); break;
    case AL_U64: snprintf(buf, cap, " (default: %" PRIu64 ")", *(uint64_t *)f->dst); break;
    case AL_FLOAT: /* NaN: no default, the help says what happens instead */
        if (!isnan(*(double *)f->dst)) snprintf(buf, cap, " (default: %g)", *(double *)f->dst);
        break;
    case AL_BOOL: break;
    }
}

void al_command_help(FILE *out, const al_command *cmd) {
    fprintf(out, "usage: attnlab %s %s\n\n%s\n", cmd->name, cmd->usage ? cmd->usage : "[options]",
            cmd->summary);
    if (cmd->description) fprintf(out, "\n%s\n", cmd->description);
    if (cmd->flags && cmd->flags->name) fprintf(out, "\noptions:\n");
    for (const al_flag *f = cmd->flags; f && f->name; f++) {
        char left[96], def[160];
        snprintf(left, sizeof left, "--%s%s%s", f->name, f->meta ? " " : "",
                 f->meta ? f->meta : "");
        format_default(f, def, sizeof def);
        fprintf(out, "  %-26s %s%s%s\n", left, f->help, f->required ? " (required)" : def, "");
    }
}

int al_cli_error(const al_err *e) {
    fprintf(stderr, "attnlab: %s\n", e->msg);
    return 1;
}

int al_cli_usage(const al_command *cmd, const al_err *e) {
    fprintf(stderr, "attnlab %s: %s (see 'attnlab help %s')\n", cmd->name, e->msg, cmd->name);
    return 2;
}
