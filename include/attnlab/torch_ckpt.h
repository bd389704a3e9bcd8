/* torch_ckpt.h -- read PyTorch checkpoints (torch.save files) without
 * running any code from them.
 *
 * Format read: the zip that torch.save writes since PyTorch 1.6, whose
 * top folder is the file's stem (any name, taken from the first entry):
 * <stem>/data.pkl (a pickle, protocol 2-5), <stem>/data/<key> (one entry
 * per storage, raw little-endian elements), <stem>/version and maybe
 * <stem>/byteorder (refused when "big") and <stem>/.data/... The pickle is
 * interpreted by a restricted VM that only builds descriptions: it knows
 * the opcodes of a saved state dict and the globals collections.OrderedDict,
 * torch._utils._rebuild_tensor_v2, _rebuild_tensor, _rebuild_parameter
 * and the storage classes torch.{Float,Half,BFloat16,Long,Bool}Storage;
 * any other global or opcode is refused by name ("refusing pickle global
 * 'posix.system'"). BUILD on a dict (a state dict's _metadata) is ignored.
 *
 * Names: the pickle's top object is a dict (a bare state dict, or a
 * checkpoint holding one, like {"model_state_dict": {...}, "step": 3}) or a
 * single tensor. Every tensor reachable through dicts, lists and tuples
 * (at most 16 levels deep) is exposed under its full key path joined by
 * "." ("model_state_dict.blocks.0.attn.W_Q"; integer keys and list
 * indices in decimal); a single tensor at the top is named "". Values
 * that are not tensors (ints, strings, ...) are skipped.
 *
 * Everything is checked before anything is allocated from it or handed
 * out: entry sizes against the file size and caps, every storage's entry
 * size against its element count, and every tensor's elements (offset +
 * Σ (size−1)·stride, with overflow checks) inside its storage. The legacy
 * pre-1.6 format (a bare pickle stream) is recognised and refused by name. */
#ifndef ATTNLAB_TORCH_CKPT_H
#define ATTNLAB_TORCH_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "attnlab/util.h"

typedef enum {
    AL_PT_F32 = 0, /* torch.float32 (FloatStorage) */
    AL_PT_F16 = 1, /* torch.float16 (HalfStorage) */
    AL_PT_BF16 = 2, /* torch.bfloat16 (BFloat16Storage) */
    AL_PT_I64 = 3, /* torch.int64 (LongStorage) */
    AL_PT_BOOL = 4 /* torch.bool (BoolStorage), one byte 0 or 1 */
} al_pt_dtype;

#define AL_PT_MAX_DIMS 8
/* Largest element count of one tensor (a float32 tensor of 16 GiB). */
#define AL_PT_MAX_NUMEL (1ull << 32)

typedef struct al_pt_tensor {
    const char *name;
    al_pt_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[AL_PT_MAX_DIMS];
    int64_t stride[AL_PT_MAX_DIMS]; /* in elements, >= 0 */
    int64_t offset; /* storage offset, in elements */
    int64_t numel; /* product of shape (1 for a scalar) */
    /* The whole storage, little-endian, storage_numel elements; element
     * (i0, i1, ...) is at index offset + Σ ik·stride[k], which open has
     * checked lies inside it. Tensors that were views of one tensor share
     * one storage pointer. */
    const void *storage;
    int64_t storage_numel;
} al_pt_tensor;

/* What a file is, from its first bytes. */
typedef enum {
    AL_PT_OTHER = 0, /* neither of the two */
    AL_PT_ZIP = 1, /* a zip whose first entry is <stem>/data.pkl (torch.save) */
    AL_PT_LEGACY = 2 /* PyTorch's legacy non-zip format (pre-1.6, or
                         _use_new_zipfile_serialization=False) */
} al_pt_kind;

/* The kind of the n bytes at data. */
al_pt_kind al_pt_kind_mem(const void *data, size_t n);
/* The kind of the file at path into *kind; -1 with e if it cannot be
 * read. */
int al_pt_kind_file(const char *path, al_pt_kind *kind, al_err *e);

/* "F32", "F16", "BF16", "I64", "BOOL"; bytes of one element. */
const char *al_pt_dtype_name(al_pt_dtype d);
size_t al_pt_dtype_size(al_pt_dtype d);

typedef struct al_pt_file al_pt_file;
/* Read and validate a whole checkpoint; its storages are read into
 * memory. Messages are one line naming the file and the problem, e.g.
 * "cannot read checkpoint m.pt: refusing pickle global 'posix.system'",
 * or "... is in PyTorch's legacy non-zip format; re-save it with
 * torch.save in PyTorch >= 1.6". *out is NULL on failure. */
int al_pt_open(const char *path, al_pt_file **out, al_err *e);
/* The same from n bytes in memory (not kept after return); name stands
 * for the path in messages. For fuzzing and for bytes read some other
 * way. */
int al_pt_open_mem(const void *data, size_t n, const char *name, al_pt_file **out, al_err *e);
void al_pt_close(al_pt_file *f);
/* Tensors in the order of the pickle (depth first). */
int al_pt_count(const al_pt_file *f);
const al_pt_tensor *al_pt_at(const al_pt_file *f, int i);
/* The tensor with this full name, or NULL. */
const al_pt_tensor *al_pt_get(const al_pt_file *f, const char *name);
/* Check that tensor `name` exists with a float dtype (F32, F16 or BF16)
 * and exactly this shape; copy it, following its strides, into dst as
 * contiguous float32 (F16 and BF16 convert exactly); refuse NaN or Inf.
 * Messages name the file, the tensor and what differs. dst may be
 * partly written on failure. */
int al_pt_read_f32(const al_pt_file *f, const char *name, int ndim, const int64_t *shape,
                   float *dst, al_err *e);

#endif
