/* torch_pickle.h -- the restricted pickle VM behind torch_ckpt.c
 * (private to src/io; not part of the library API).
 * layer: io
 *
 * al_pk_load interprets a torch.save data.pkl and returns descriptions
 * only: the storages its persistent ids name and the tensors found under
 * their full key paths. Nothing is imported or called; see torch_ckpt.h
 * for what is accepted. */
#ifndef ATTNLAB_TORCH_PICKLE_H
#define ATTNLAB_TORCH_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "attnlab/torch_ckpt.h"
#include "attnlab/util.h"

/* One persistent id ('storage', <Type>Storage, key, location, numel);
 * the same key may occur in several (views of one tensor). */
typedef struct al_pk_storage {
    const unsigned char *key; /* into the pickle bytes, not NUL-terminated */
    size_t key_len;
    al_pt_dtype dtype;
    int64_t numel;
} al_pk_storage;

/* One tensor under its full name; sizes as the pickle gave them
 * (non-negative, ndim <= AL_PT_MAX_DIMS), not yet checked against the
 * storage. */
typedef struct al_pk_tensor {
    char *name; /* malloc'd, NUL-terminated */
    int storage; /* index into al_pk_result.st */
    int ndim;
    int64_t shape[AL_PT_MAX_DIMS];
    int64_t stride[AL_PT_MAX_DIMS];
    int64_t offset;
} al_pk_tensor;

typedef struct al_pk_result {
    al_pk_storage *st;
    int n_st;
    al_pk_tensor *t;
    int n_t;
} al_pk_result;

/* Interpret the n pickle bytes at p into *r (zeroed first). 0, or -1
 * with a one-line message without the file name ("refusing pickle global
 * 'posix.system' at byte 2"). r must be freed with al_pk_free either way;
 * the keys point into p, which must outlive r. */
int al_pk_load(const unsigned char *p, size_t n, al_pk_result *r, al_err *e);
void al_pk_free(al_pk_result *r);

/* A name from a file, safe for a one-line message: printable ASCII only
 * (others shown as '?'), at most 80 bytes then "...". */
typedef struct al_pk_dname {
    char s[88];
} al_pk_dname;
al_pk_dname al_pk_disp(const unsigned char *s, size_t n);

#endif
