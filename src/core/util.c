/* util.c -- errors, checked allocation, RNG, files, progress, sha256.
 * Small helpers that every other module uses; nothing here knows about
 * models. See include/attnlab/util.h for the error convention. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int al_quiet = 0;

/* A message is printed as one line whatever text it quotes (a file name,
 * a JSON key or value can hold a newline): control bytes become '?'. */
static void one_line(char *m) {
    for (; *m; m++)
        if ((unsigned char)*m < 0x20 || *m == 0x7f) *m = '?';
}

int al_errf(al_err *e, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        one_line(e->msg);
    }
    return -1;
}

int al_err_prefix(al_err *e, const char *fmt, ...) {
    if (e) {
        char pre[512], old[sizeof e->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(pre, sizeof pre, fmt, ap);
        va_end(ap);
        memcpy(old, e->msg, sizeof old);
        size_t lp = strlen(pre), cap = sizeof e->msg;
        if (lp > cap - 3) lp = cap - 3;
        memcpy(e->msg, pre, lp);
        memcpy(e->msg + lp, ": ", 2);
        size_t lo = strnlen(old, sizeof old);
        if (lo > cap - lp - 3) lo = cap - lp - 3;
        memcpy(e->msg + lp + 2, old, lo);
        e->msg[lp + 2 + lo] = 0;
        one_line(e->msg);
    }
    return -1;
}

int al_mul_overflow(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return -1;
    *out = a * b;
    return 0;
}

/* ------------------------------------------------------ fault injection
 *
 * The tests that check what a failure leaves behind need failures at every
 * place one can happen, not only the few a bad input reaches. Armed, one
 * fault point fails: an allocation through al_malloc, al_calloc or al_grow
 * as if malloc had returned NULL, a write of al_write_file_atomic,
 * al_atomic_commit or al_atomic_sync as if the disk were full, a
 * statement of the store as if SQLite had run out of memory, or an
 * allocation of cJSON's (json.c). A site is
 * the point's caller (its return address). The one that fails is the first
 * reached from the N-th distinct site (numbered in the order the run
 * first reaches them, so N = 1, 2, ... walks a command's sites one by
 * one), or the first from a site not on a list after letting a given
 * number of new ones pass (so a test that forks many runs fails each site
 * once, or every other one). The CLI arms the first kind from
 * ATTNLAB_FAULT=N, read at the first fault point. Unarmed, the cost is
 * one test of a static per point. */
#define FAULT_SITES 4096
static int fault_state = -1; /* -1: environment not read; 0: off; 1: armed */
static int fault_n, fault_nsites, fault_nskip;
static const void *fault_site[FAULT_SITES], *fault_hit;
static const void *const *fault_skip;
static char fault_mark[AL_PATH_MAX];

void al_fault_arm(int n) {
    fault_state = n > 0, fault_n = n, fault_hit = NULL, fault_nsites = 0, fault_skip = NULL;
}

void al_fault_arm_new(const void *const *skip, int n_skip, int pass) {
    al_fault_arm(0);
    fault_state = 1, fault_skip = skip, fault_nskip = n_skip, fault_n = pass + 1;
}

int al_fault_new_sites(const void **out, int cap) {
    int n = fault_skip && fault_nsites < cap ? fault_nsites : fault_skip ? cap : 0;
    for (int i = 0; i < n; i++) out[i] = fault_site[i];
    return n;
}

const void *al_fault_fired(void) { return fault_hit; }

int al_fault_armed(void) { return fault_state != 0; }

int al_fault_at(const void *site) {
    if (fault_state == 0) return 0;
    int fail = 0;
#pragma omp critical(al_fault)
    {
        if (fault_state < 0) {
            const char *v = getenv("ATTNLAB_FAULT"), *m = getenv("ATTNLAB_FAULT_MARK");
            al_fault_arm(v ? atoi(v) : 0);
            if (m) snprintf(fault_mark, sizeof fault_mark, "%s", m);
        }
        if (fault_state > 0 && !fault_hit) {
            int i = 0;
            if (fault_skip) { /* a site neither skipped nor seen in this run is new */
                while (i < fault_nskip && fault_skip[i] != site) i++;
                int k = 0;
                while (i == fault_nskip && k < fault_nsites && fault_site[k] != site) k++;
                if (i == fault_nskip && k == fault_nsites && k < FAULT_SITES) {
                    fault_site[fault_nsites++] = site;
                    fail = fault_nsites == fault_n;
                }
            } else {
                while (i < fault_nsites && fault_site[i] != site) i++;
                if (i == fault_nsites && i < FAULT_SITES) fault_site[fault_nsites++] = site;
                fail = i == fault_n - 1;
            }
            if (fail) {
                fault_hit = site;
                /* how the CLI's caller learns that the fault fired (and
                 * the run did not just pass every site) */
                if (fault_mark[0]) {
                    int fd = open(fault_mark, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                    if (fd >= 0) close(fd);
                }
            }
        }
    }
    return fail;
}

void *al_malloc(size_t n, size_t size, al_err *e) {
    size_t bytes;
    if (al_mul_overflow(n, size, &bytes) != 0) {
        al_errf(e, "allocation size overflows (%zu x %zu)", n, size);
        return NULL;
    }
    void *p = al_fault_at(__builtin_return_address(0)) ? NULL : malloc(bytes ? bytes : 1);
    if (!p) al_errf(e, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *al_calloc_at(size_t n, size_t size, const void *site, al_err *e) {
    size_t bytes;
    if (al_mul_overflow(n, size, &bytes) != 0) {
        al_errf(e, "allocation size overflows (%zu x %zu)", n, size);
        return NULL;
    }
    void *p = al_fault_at(site) ? NULL : calloc(bytes ? bytes : 1, 1);
    if (!p) al_errf(e, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *al_calloc(size_t n, size_t size, al_err *e) {
    return al_calloc_at(n, size, __builtin_return_address(0), e);
}

void *al_grow(void *p, int *cap, int n, size_t size, int first, al_err *e) {
    if (n < *cap) return p;
    int c = *cap ? 2 * *cap : first;
    size_t bytes;
    if (c <= *cap || al_mul_overflow((size_t)c, size, &bytes) != 0) {
        al_errf(e, "allocation size overflows (%d x %zu)", c, size);
        return NULL;
    }
    void *q = al_fault_at(__builtin_return_address(0)) ? NULL : realloc(p, bytes);
    if (!q) {
        al_errf(e, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    *cap = c;
    return q;
}

/* ---------------------------------------------------------------- RNG */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void al_rng_seed(al_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t al_rng_u64(al_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint32_t al_rng_below(al_rng *r, uint32_t n) {
    /* Lemire's multiply-shift with rejection: unbiased. */
    uint64_t m = (uint64_t)(uint32_t)(al_rng_u64(r) >> 32) * n;
    uint32_t lo = (uint32_t)m;
    if (lo < n) {
        uint32_t thresh = (uint32_t)(-n) % n;
        while (lo < thresh) {
            m = (uint64_t)(uint32_t)(al_rng_u64(r) >> 32) * n;
            lo = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

double al_rng_uniform(al_rng *r) {
    return (double)(al_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

double al_rng_normal(al_rng *r) {
    /* Box-Muller; one value per call keeps the state simple to save. */
    double u1 = al_rng_uniform(r), u2 = al_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double al_mem_total(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * size : 0.0;
}

double al_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* -------------------------------------------------------------- files */

int al_read_file(const char *path, unsigned char **data, size_t *n, size_t max_bytes, al_err *e) {
    *data = NULL;
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return al_errf(e, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return al_errf(e, "cannot read %s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (max_bytes && size > max_bytes) {
        fclose(f);
        return al_errf(e, "cannot read %s: file is %zu bytes, limit is %zu", path, size, max_bytes);
    }
    unsigned char *buf = al_malloc(size + 1, 1, e);
    if (!buf) {
        fclose(f);
        return -1;
    }
    size_t got = fread(buf, 1, size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != size) {
        free(buf);
        return al_errf(e, "cannot read %s: short read", path);
    }
    buf[size] = 0;
    *data = buf;
    *n = size;
    return 0;
}

int al_atomic_open(al_atomic_file *af, const char *path, al_err *e) {
    af->f = NULL;
    if (strlen(path) >= sizeof af->final_path) return al_errf(e, "path too long: %s", path);
    /* A folder given where a file is wanted: the temporary file would be
     * made inside it and the rename fail with a baffling errno. */
    struct stat st;
    size_t len = strlen(path);
    if (len == 0) return al_errf(e, "no file name given");
    if (path[len - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
        return al_errf(e, "%s is a folder, not a file name", path);
    snprintf(af->final_path, sizeof af->final_path, "%s", path);
    snprintf(af->tmp_path, sizeof af->tmp_path, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp_path, "wb");
    if (!af->f) return al_errf(e, "cannot write %s: %s", af->tmp_path, strerror(errno));
    return 0;
}

/* al_atomic_sync for the caller at `site` (a fault point). */
static int atomic_sync(al_atomic_file *af, int ok, const void *site, al_err *e) {
    if (!af->f) return ok ? al_errf(e, "cannot write %s", af->final_path) : -1;
    int rc = 0;
    if (ok) {
        if (al_fault_at(site))
            rc = al_errf(e, "cannot write %s: %s", af->final_path, strerror(ENOSPC));
        else if (fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0)
            rc = al_errf(e, "cannot write %s: %s", af->final_path, strerror(errno));
    }
    if (fclose(af->f) != 0 && ok && rc == 0)
        rc = al_errf(e, "cannot write %s: %s", af->final_path, strerror(errno));
    af->f = NULL;
    if (!ok || rc != 0) {
        unlink(af->tmp_path);
        return -1;
    }
    return 0;
}

int al_atomic_sync(al_atomic_file *af, int ok, al_err *e) {
    return atomic_sync(af, ok, __builtin_return_address(0), e);
}

int al_atomic_rename(al_atomic_file *af, al_err *e) {
    if (rename(af->tmp_path, af->final_path) == 0) return 0;
    int rc =
        al_errf(e, "cannot rename %s to %s: %s", af->tmp_path, af->final_path, strerror(errno));
    unlink(af->tmp_path);
    return rc;
}

int al_atomic_commit(al_atomic_file *af, int ok, al_err *e) {
    if (atomic_sync(af, ok, __builtin_return_address(0), e) != 0) return -1;
    return al_atomic_rename(af, e);
}

int al_write_file_atomic(const char *path, const void *data, size_t n, al_err *e) {
    al_atomic_file af;
    if (al_atomic_open(&af, path, e) != 0) return -1;
    int ok = fwrite(data, 1, n, af.f) == n;
    if (ok && al_fault_at(__builtin_return_address(0))) errno = ENOSPC, ok = 0;
    if (!ok) al_errf(e, "cannot write %s: %s", path, strerror(errno));
    return al_atomic_commit(&af, ok, ok ? e : NULL) == 0 ? 0 : -1;
}

int al_mkdir_p(const char *path, al_err *e) {
    char buf[AL_PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) return al_errf(e, "bad directory path '%s'", path);
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return al_errf(e, "cannot create directory %s: %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return al_errf(e, "%s exists and is not a directory", path);
    return 0;
}

void al_remove_made_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char p[AL_PATH_MAX + 320];
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p)
            unlink(p);
    closedir(d);
    rmdir(dir);
}

int al_mkdir_p_check(const char *path, al_err *e) {
    char buf[AL_PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) return al_errf(e, "bad directory path '%s'", path);
    memcpy(buf, path, len + 1);
    /* every existing prefix must be a folder; the deepest one writable
     * when something is still to be made below it */
    char last[AL_PATH_MAX] = ".";
    int missing = 0;
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        struct stat st;
        if (stat(buf, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                return al_errf(e, "cannot create directory %s: %s is not a directory", path, buf);
            memcpy(last, buf, i + 1);
        } else if (errno == ENOENT) {
            missing = 1;
            buf[i] = c;
            break;
        } else {
            return al_errf(e, "cannot create directory %s: %s", buf, strerror(errno));
        }
        buf[i] = c;
    }
    if (missing && access(last, W_OK | X_OK) != 0)
        return al_errf(e, "cannot create directory %s: %s: %s", path, last, strerror(errno));
    return 0;
}

int al_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int al_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int al_path_join(char *buf, size_t cap, const char *dir, const char *name, al_err *e) {
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return al_errf(e, "path too long: %s/%s", dir, name);
    return 0;
}

/* ------------------------------------------------------------ threads */

int al_threads_check(int n, al_err *e) {
    if (n < 0 || n > AL_MAX_THREADS)
        return al_errf(e, "--threads must be 0 (the default) to %d (got %d)", AL_MAX_THREADS, n);
    return 0;
}

int al_set_threads(int n) {
#ifdef _OPENMP
    static int noted;
    int cores = omp_get_num_procs();
    if (n > cores && !noted) {
        noted = 1;
        fprintf(stderr,
                "attnlab: note: --threads %d is more than this machine's %d cores: the "
                "results are those of %d threads, only slower\n",
                n, cores, n);
    }
    if (n > 0) omp_set_num_threads(n);
    return omp_get_max_threads();
#else
    (void)n;
    return 1;
#endif
}

int al_get_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* ----------------------------------------------------------- progress */

static int g_progress_pending = 0; /* a \r line is on screen */

void al_progress_init(al_progress *p, double every_s) {
    p->tty = isatty(STDERR_FILENO);
    p->t_start = p->t_last = al_now();
    p->every_s = every_s > 0 ? every_s : 10.0;
    p->active = 0;
}

void al_progress_update(al_progress *p, int force, const char *fmt, ...) {
    if (al_quiet) return;
    double now = al_now();
    double every = p->tty ? 0.2 : p->every_s;
    if (!force && p->active && now - p->t_last < every) return;
    p->t_last = now;
    p->active = 1;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (p->tty) {
        fprintf(stderr, "\r\033[K%s", line);
        g_progress_pending = 1;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

void al_fmt_duration(char *buf, size_t cap, double s) {
    if (s < 0 || !isfinite(s)) s = 0;
    long t = (long)s;
    if (t >= 3600)
        snprintf(buf, cap, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60)
        snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, cap, "%lds", t);
}

void al_progress_count(al_progress *p, int force, double done, double total, const char *fmt, ...) {
    if (al_quiet) return;
    double now = al_now();
    if (!force && p->active && now - p->t_last < (p->tty ? 0.2 : p->every_s)) return;
    char label[400], el[32], left[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(label, sizeof label, fmt, ap);
    va_end(ap);
    double t = now - p->t_start;
    al_fmt_duration(el, sizeof el, t);
    if (done > 0 && total >= done) {
        al_fmt_duration(left, sizeof left, t / done * (total - done));
        al_progress_update(p, 1, "%s | %s elapsed, ETA %s", label, el, left);
    } else {
        al_progress_update(p, 1, "%s | %s elapsed", label, el);
    }
}

void al_progress_done(al_progress *p) {
    if (p->tty && g_progress_pending && !al_quiet) fputc('\n', stderr);
    g_progress_pending = 0;
    p->active = 0;
}

void al_log(const char *fmt, ...) {
    if (al_quiet) return;
    if (g_progress_pending) {
        fputs("\r\033[K", stderr);
        g_progress_pending = 0;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

/* ------------------------------------------------------------- sha256 */
/* FIPS 180-4. Used to key models by checkpoint content in the database;
 * none of our libraries exports a hash, and this is 60 lines. */

static const uint32_t K256[64] = {0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b,
                                  0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
                                  0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7,
                                  0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
                                  0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152,
                                  0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
                                  0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
                                  0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
                                  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
                                  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
                                  0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
                                  0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
                                  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void al_sha256(const void *data, size_t n, uint8_t out[32]) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t full = n / 64;
    for (size_t i = 0; i < full; i++) sha256_block(h, p + 64 * i);
    uint8_t tail[128] = {0};
    size_t rem = n - full * 64;
    memcpy(tail, p + full * 64, rem);
    tail[rem] = 0x80;
    size_t tl = rem < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++) tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha256_block(h, tail);
    if (tl == 128) sha256_block(h, tail + 64);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

int al_sha256_file(const char *path, char hex[65], al_err *e) {
    unsigned char *buf;
    size_t n;
    if (al_read_file(path, &buf, &n, 0, e) != 0) return -1;
    uint8_t d[32];
    al_sha256(buf, n, d);
    free(buf);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return 0;
}

int al_edit_distance(const char *a, size_t na, const char *b, size_t nb) {
    if (na > 64 || nb > 64) return 1000;
    /* three rows of the optimal-string-alignment table: the one before
     * last is needed for a swap of neighbours */
    int r0[65], r1[65], r2[65], *pp = r0, *p = r1, *c = r2;
    for (size_t j = 0; j <= nb; j++) p[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        c[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int best = p[j - 1] + (a[i - 1] != b[j - 1]);
            if (p[j] + 1 < best) best = p[j] + 1;
            if (c[j - 1] + 1 < best) best = c[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                pp[j - 2] + 1 < best)
                best = pp[j - 2] + 1;
            c[j] = best;
        }
        int *t = pp;
        pp = p, p = c, c = t;
    }
    return p[nb];
}

const char *al_nearest_word(const char *word, size_t len, const char *const *cands, int n) {
    const char *best = NULL;
    int bd = 3;
    for (int i = 0; i < n; i++) {
        if (!cands[i]) continue;
        int d = al_edit_distance(word, len, cands[i], strlen(cands[i]));
        /* At most a third of the word may be edited: two edits turn
         * "heads" into "threads", which is no typo of it. */
        if (d < bd && 3 * (size_t)d <= len + (len == 1)) best = cands[i], bd = d;
    }
    return best;
}

int al_path_relative(const char *from, const char *to, char *buf, size_t cap) {
    if (from[0] != '/' || to[0] != '/' || cap < 2) return -1;
    /* the longest common prefix that ends at a component boundary */
    size_t i = 0, common = 0;
    while (from[i] && from[i] == to[i]) {
        i++;
        if (from[i - 1] == '/') common = i;
    }
    if (!from[i] && (to[i] == '/' || !to[i])) common = i + (to[i] == '/');
    size_t k = 0;
    buf[0] = 0;
    /* one ".." per component of from past the common part */
    size_t nf = strlen(from);
    for (const char *p = from + (common < nf ? common : nf); *p;) {
        const char *q = strchr(p, '/');
        if (k + 4 >= cap) return -1;
        memcpy(buf + k, "../", 3), k += 3;
        if (!q) break;
        p = q + 1;
    }
    size_t nt = strlen(to), rest = common < nt ? nt - common : 0;
    if (k + rest + 1 > cap) return -1;
    memcpy(buf + k, to + (common < nt ? common : nt), rest + 1);
    if (!buf[0]) snprintf(buf, cap, ".");
    return 0;
}

/* ------------------------------------------------------ half floats */

float al_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (ex == 0x1f) {
        bits = sign | 0x7f800000u | man << 13;
    } else if (ex == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: man·2^-24, normalised */
            int sh = 0;
            while (!(man & 0x400u)) man <<= 1, sh++;
            bits = sign | (uint32_t)(113 - sh) << 23 | (man & 0x3ffu) << 13;
        }
    } else {
        bits = sign | (ex + 112) << 23 | man << 13;
    }
    float x;
    memcpy(&x, &bits, 4);
    return x;
}

float al_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16; /* bf16 is a float32's top half */
    float x;
    memcpy(&x, &bits, 4);
    return x;
}

void al_fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, i ? "," : "", shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}
