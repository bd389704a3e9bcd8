/* fuzz.h -- helpers shared by the libFuzzer targets in tests/fuzz/.
 *
 * Each target is one C file fuzz_<name>.c defining LLVMFuzzerTestOneInput;
 * its seed corpus is the directory tests/fuzz/<name>/. `make fuzz` builds
 * them with clang -fsanitize=fuzzer,address,undefined and runs each for
 * FUZZ_SECONDS. A target must never crash, leak or allocate without bound
 * on any input; FZ_ASSERT states the properties that must also hold (a
 * round trip, an error message that is one line), and aborts so that
 * libFuzzer saves the input as a crash. */
#ifndef ATTNLAB_FUZZ_H
#define ATTNLAB_FUZZ_H

#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/util.h"

#define FZ_ASSERT(c)                                                                               \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #c);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* An error message must be one non-empty line. */
static inline void fz_check_msg(const al_err *e) {
    FZ_ASSERT(e->msg[0] != 0);
    FZ_ASSERT(strchr(e->msg, '\n') == NULL);
}

/* Loaders that only take a path get the input through a file of this
 * process's own, rewritten for every input and removed at exit: in
 * /dev/shm when there is one (on a disk, truncating and rewriting costs
 * ~1.5 ms, 30x the loaders' own time), else in TMPDIR or /tmp. */
static char fz_path[512];
static inline void fz_unlink(void) { unlink(fz_path); }
static inline const char *fz_file(const char *tag, const uint8_t *d, size_t n) {
    if (!fz_path[0]) {
        const char *dir = getenv("TMPDIR");
        if (access("/dev/shm", W_OK) == 0)
            dir = "/dev/shm";
        else if (!dir || !*dir)
            dir = "/tmp";
        snprintf(fz_path, sizeof fz_path, "%s/attnlab-fuzz-%s-%ld", dir, tag, (long)getpid());
        atexit(fz_unlink);
    }
    const char *path = fz_path;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    FZ_ASSERT(fd >= 0);
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, d + off, n - off);
        FZ_ASSERT(w > 0);
        off += (size_t)w;
    }
    close(fd);
    return path;
}

#endif
