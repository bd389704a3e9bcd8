/* util.h -- errors with messages, checked allocation, RNG, timers, files,
 * the progress line.
 *
 * Error convention used everywhere in attnlab: a function that can fail
 * returns 0 on success and -1 on failure, and fills an al_err with one
 * human-readable line ("cannot read checkpoint X: bad header length").
 * The CLI prints that line prefixed with "attnlab: " and exits non-zero.
 */
#ifndef ATTNLAB_UTIL_H
#define ATTNLAB_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define AL_VERSION "0.1.0"

/* Longest path attnlab builds (Linux PATH_MAX); buffers for a path plus
 * a suffix (".tmp.<pid>", "/model.safetensors") are AL_PATH_MAX + 64,
 * for a path plus a whole directory entry name (NAME_MAX 255) or another
 * unchecked file name, AL_PATH_MAX + 320.
 * Every path is built with al_path_join or a checked snprintf, so a
 * longer one is an error, never a truncation. */
#define AL_PATH_MAX 4096

typedef struct al_err {
    char msg[1024];
} al_err;

/* Fill e->msg (if e is non-NULL) and return -1, so callers can write
 * `return al_errf(e, "...", ...);`. The message is one line: control
 * bytes in it (a quoted file name or key with a newline) become '?'. */
int al_errf(al_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix an existing message: "ctx: old message". Returns -1. */
int al_err_prefix(al_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checked allocation. Sizes are multiplied with overflow checks; returns
 * NULL and fills e on failure. Memory is zeroed by al_calloc. */
void *al_malloc(size_t n, size_t size, al_err *e);
void *al_calloc(size_t n, size_t size, al_err *e);
/* al_calloc for an allocating helper (pictures' pic_calloc): its fault
 * site is `site`, the helper's own caller (__builtin_return_address(0)),
 * so that each place the helper is called from fails on its own in the
 * fault tests, not all of them as the helper's one call. */
void *al_calloc_at(size_t n, size_t size, const void *site, al_err *e);
/* Make room for one more element in a growable array p of *cap elements
 * of `size` bytes holding n: when n == *cap, doubles *cap (first to
 * `first`) and reallocs. Returns the array (p itself while there is
 * room), or NULL with e set, p still valid and *cap unchanged. */
void *al_grow(void *p, int *cap, int n, size_t size, int first, al_err *e);
/* Fault injection for tests (util.c explains). al_fault_arm(n): the first
 * allocation from the n-th distinct call site fails (n <= 0 disarms);
 * al_fault_arm_new: the first from the (pass+1)-th site not in
 * skip[0..n_skip) fails (skip must live while armed), and
 * al_fault_new_sites copies the new sites reached so far, the failed one
 * last, into out (at most cap; returns how many). al_fault_fired: the site that failed, or
 * NULL. The CLI arms the first kind from ATTNLAB_FAULT=N, and then creates
 * the file ATTNLAB_FAULT_MARK names when the fault fires. */
void al_fault_arm(int n);
/* 1 when the fault point reached from `site` (a return address) is the
 * one armed to fail: for a function that can fail, called with
 * __builtin_return_address(0) so that each of its callers is a site. */
int al_fault_at(const void *site);
void al_fault_arm_new(const void *const *skip, int n_skip, int pass);
int al_fault_new_sites(const void **out, int cap);
const void *al_fault_fired(void);
/* 0 when no fault can fire (a caller skips work that only finds a site). */
int al_fault_armed(void);
/* Multiply with overflow detection: returns 0 and sets *out, or -1. */
int al_mul_overflow(size_t a, size_t b, size_t *out);

/* Deterministic RNG (splitmix64-seeded xoshiro256**). The whole state is
 * four words so it can be saved in state.json and restored exactly. */
typedef struct al_rng {
    uint64_t s[4];
} al_rng;
void al_rng_seed(al_rng *r, uint64_t seed);
uint64_t al_rng_u64(al_rng *r);
uint32_t al_rng_below(al_rng *r, uint32_t n); /* uniform in [0,n), n>0 */
double al_rng_uniform(al_rng *r); /* uniform in [0,1) */
double al_rng_normal(al_rng *r); /* standard normal */

/* Monotonic wall clock in seconds. */
double al_now(void);
/* Bytes of physical memory (sysconf), or 0 if unknown. */
double al_mem_total(void);

/* Files. al_read_file reads a whole file (at most max_bytes; 0 = no limit)
 * and NUL-terminates the buffer (not counted in *n). */
int al_read_file(const char *path, unsigned char **data, size_t *n, size_t max_bytes, al_err *e);
/* Write data to path.tmp.<pid>, fsync, rename over path: readers see the
 * old file or the new one, never a partial one. */
int al_write_file_atomic(const char *path, const void *data, size_t n, al_err *e);
/* Open path.tmp.<pid> for writing; al_atomic_commit fsyncs, closes and
 * renames it over path (or removes it if ok==0). For large streamed writes. */
typedef struct al_atomic_file {
    FILE *f;
    char final_path[AL_PATH_MAX];
    char tmp_path[AL_PATH_MAX + 64];
} al_atomic_file;
int al_atomic_open(al_atomic_file *af, const char *path, al_err *e);
int al_atomic_commit(al_atomic_file *af, int ok, al_err *e);
/* al_atomic_commit in two steps, for a file that must appear only once
 * something else has succeeded: al_atomic_sync fsyncs and closes the
 * temporary file (removing it when ok is 0 or that fails), and
 * al_atomic_rename moves it over path (removing it when that fails); a
 * caller that gives up between the two unlinks tmp_path itself. */
int al_atomic_sync(al_atomic_file *af, int ok, al_err *e);
int al_atomic_rename(al_atomic_file *af, al_err *e);
int al_mkdir_p(const char *path, al_err *e);
int al_file_exists(const char *path);
/* 0 if al_mkdir_p(path) could succeed now (every existing prefix is a
 * folder, the deepest writable when more is to be made), else -1 with e;
 * creates nothing. For refusing before work instead of after it. */
int al_mkdir_p_check(const char *path, al_err *e);
/* Remove the files directly in dir, then dir itself if it is then empty:
 * for a folder this process made and a failure leaves with nothing worth
 * keeping. A subfolder (and so dir) is left alone. */
void al_remove_made_dir(const char *dir);
/* 1 if path is a directory (following links). */
int al_is_dir(const char *path);
/* Join dir and name into buf; fails if it does not fit. */
/* Edit distance (insertions, deletions, substitutions and swaps of two
 * neighbouring letters, each 1: optimal string alignment) between
 * a[0..na) and b[0..nb); words longer than 64 bytes count as far apart
 * (returns 1000), which is all a spelling suggestion needs. */
int al_edit_distance(const char *a, size_t na, const char *b, size_t nb);
/* The candidate (of n; NULL entries skipped) nearest to word[0..len) by
 * al_edit_distance, if it is near enough to be what was meant (at most 2
 * edits, and at most a third of the word's length); NULL otherwise. Ties
 * go to the earlier candidate. */
const char *al_nearest_word(const char *word, size_t len, const char *const *cands, int n);

/* An IEEE half (F16) or bfloat16 (BF16) value as float32: exact, since
 * every such value is a float32 (subnormal halves normalised, inf and NaN
 * kept). What the checkpoint readers of F16/BF16 files share. */
float al_f16_to_f32(uint16_t h);
float al_bf16_to_f32(uint16_t h);
/* "[2,3,4]": a tensor shape for messages, cut to cap. */
void al_fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape);
/* The path of `to` relative to directory `from`, both absolute and
 * canonical (realpath), e.g. from /a/b/out to /a/db.sqlite:
 * "../../db.sqlite"; into buf. 0, or -1 when either is not absolute or
 * buf is too small. */
int al_path_relative(const char *from, const char *to, char *buf, size_t cap);
int al_path_join(char *buf, size_t cap, const char *dir, const char *name, al_err *e);

/* Threads: sets OpenMP (and thus OpenBLAS-openmp) thread count. n<=0 keeps
 * OMP_NUM_THREADS or the machine default. More threads than cores are
 * honoured, not capped (results depend on the thread count, so a result
 * made on a bigger machine stays reproducible here), with a one-line
 * note on stderr. Returns the count in force. */
int al_set_threads(int n);
/* --threads limits: 0 (the default) .. AL_MAX_THREADS; else −1 with e. */
#define AL_MAX_THREADS 1024
int al_threads_check(int n, al_err *e);
int al_get_threads(void);

/* Progress reporting for long work. On a terminal a single line is
 * redrawn in place (\r); otherwise a plain line is printed at most every
 * `every_s` seconds, so logs stay readable. Always to stderr. */
typedef struct al_progress {
    int tty;
    double t_start, t_last;
    double every_s;
    int active;
} al_progress;
void al_progress_init(al_progress *p, double every_s);
/* Print the line if due (force=1 prints always). */
void al_progress_update(al_progress *p, int force, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Print, if due, the line fmt followed by " | <elapsed> elapsed, ETA
 * <left>" for done of total units of work (the rate so far), so every long
 * stage says how long it has left. ETA is shown once done > 0. */
void al_progress_count(al_progress *p, int force, double done, double total, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A duration for people: "42s", "3m05s", "1h02m" (negative or not finite: "0s"). */
void al_fmt_duration(char *buf, size_t cap, double seconds);
/* Finish: on a tty end the redrawn line with a newline. */
void al_progress_done(al_progress *p);
/* Print a log line, first clearing a pending progress line. */
void al_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern int al_quiet; /* set by tests to silence al_log */

/* FNV-free hashing for file identity: SHA-256 of a buffer or a file. */
void al_sha256(const void *data, size_t n, uint8_t out[32]);
int al_sha256_file(const char *path, char hex[65], al_err *e);

#endif
