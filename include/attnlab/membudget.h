/* membudget.h -- the memory budget: a command computes, from its options
 * (and the model's shape), the bytes it is about to allocate, and is
 * refused before anything runs -- no run row, no folder, no file -- when
 * they cannot fit, instead of failing half-way (a malloc that fails after
 * the step-0 checkpoint) or being killed by the OOM killer (each
 * allocation alone may still succeed on an overcommitting kernel).
 *
 * The limit is 80% of this machine's physical memory (sysconf), leaving
 * room for the system and the page cache; ATTNLAB_MEM_LIMIT overrides it
 * with a size in bytes, optionally suffixed K, M, G or T (powers of 1000;
 * e.g. "2G"), for tests and for machines shared with other work. An
 * unparsable value is ignored (the physical limit applies). */
#ifndef ATTNLAB_MEMBUDGET_H
#define ATTNLAB_MEMBUDGET_H

#include "attnlab/util.h"

/* Bytes work may allocate (see above); 0 when neither the variable nor
 * the machine's memory is known (then nothing is refused). *from_env
 * (may be NULL) is set to 1 when ATTNLAB_MEM_LIMIT decided it. */
double al_mem_limit(int *from_env);

/* 0 when `bytes` (a finite estimate >= 0) fits al_mem_limit(); else −1
 * with e, one line:
 *   "<who> would allocate <bytes> for <what> (limit: <limit>, 80% of
 *    this machine's memory); <fix>"   (or "..., ATTNLAB_MEM_LIMIT)")
 * who: the command ("sae train"); what: the options that decided the
 * size ("--batch 262144 x --expansion 1024"); fix: what to change
 * ("lower --batch or --expansion"). A non-finite bytes is refused too. */
int al_mem_check(double bytes, const char *who, const char *what, const char *fix, al_err *e);

/* A size for people, in decimal units: "512 B", "3.2 MB", "68.7 GB". */
void al_fmt_bytes(char *buf, size_t cap, double bytes);

#endif
