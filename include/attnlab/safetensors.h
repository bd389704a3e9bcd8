/* safetensors.h -- read and write the safetensors format.
 *
 * Format: u64 little-endian header length N, N bytes of JSON header
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 *  ..., "__metadata__": {"key": "string value", ...}}, then the raw
 * little-endian data; offsets are relative to the end of the header.
 * The reader validates everything before handing out a pointer: header
 * length within the file, JSON well formed, known dtype, shape product ×
 * dtype size == byte span, spans inside the data area, no two tensors
 * overlapping. */
#ifndef ATTNLAB_SAFETENSORS_H
#define ATTNLAB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "attnlab/util.h"

/* F16 and BF16 are read (al_st_read_f32 widens them exactly), not written. */
typedef enum { AL_DT_F32 = 0, AL_DT_I32 = 1, AL_DT_F16 = 2, AL_DT_BF16 = 3 } al_dtype;

#define AL_ST_MAX_DIMS 4

typedef struct al_st_tensor {
    const char *name;
    al_dtype dtype;
    int ndim;
    int64_t shape[AL_ST_MAX_DIMS];
    const void *data; /* little-endian; on read, points into the file buffer */
} al_st_tensor;

/* Write tensors (in the given order) and optional string metadata
 * (meta_keys/meta_vals of n_meta entries) to path atomically. */
int al_st_write(const char *path, const al_st_tensor *tensors, int n, const char *const *meta_keys,
                const char *const *meta_vals, int n_meta, al_err *e);

typedef struct al_st_file al_st_file;
/* Read and validate a whole file. Messages name the file and problem,
 * e.g. "cannot read checkpoint X: bad header length". */
int al_st_open(const char *path, al_st_file **out, al_err *e);
/* The same from n bytes in memory (copied); name stands for the path in
 * messages. For fuzzing and for files read some other way. */
int al_st_open_mem(const void *data, size_t n, const char *name, al_st_file **out, al_err *e);
/* The same, with messages calling the file `kind` instead of
 * "checkpoint" ("cannot read SAE X: ..."); kind must be a static string. */
int al_st_open_as(const char *path, const char *kind, al_st_file **out, al_err *e);
int al_st_open_mem_as(const void *data, size_t n, const char *name, const char *kind,
                      al_st_file **out, al_err *e);
void al_st_close(al_st_file *f);
int al_st_count(const al_st_file *f);
const al_st_tensor *al_st_at(const al_st_file *f, int i);
const al_st_tensor *al_st_get(const al_st_file *f, const char *name);
/* Metadata value for key, or NULL. */
const char *al_st_meta(const al_st_file *f, const char *key);
/* Check that tensor `name` exists with dtype F32 (or F16, BF16, widened
 * exactly) and exactly this shape, and that all values are finite; copy
 * it into dst as float32. Messages name the file (by its kind), the
 * tensor and what differs. */
int al_st_read_f32(const al_st_file *f, const char *name, int ndim, const int64_t *shape,
                   float *dst, al_err *e);

#endif
