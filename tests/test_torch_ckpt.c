/* test_torch_ckpt.c -- the PyTorch checkpoint reader against files that
 * PyTorch itself wrote (tests/torch_ckpt_ref.py real: every value
 * compared with what PyTorch reads back, bit for bit), and against
 * hand-built hostile files (torch_ckpt_ref.py hostile, no PyTorch needed):
 * a pickle that would run a command, storages too small, sizes that
 * overflow, damaged zips, every truncation of a small checkpoint. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attnlab/torch_ckpt.h"
#include "test.h"

#define PY "/usr/bin/python3"

/* Files of `mode` (real or hostile) in t_path(mode); skips the test when
 * PyTorch (for real) or python3 is missing. */
static const char *gen(const char *mode) {
    static t_pbuf dir;
    dir = t_pcopy(mode);
    int rc = t_sh(PY " tests/torch_ckpt_ref.py %s %s > %s 2>&1", mode, dir.s, t_path("gen.log"));
    if (rc == 77) t_skip("PyTorch not installed");
    if (rc == 127) t_skip(PY " not found");
    CHECKF(rc == 0, "torch_ckpt_ref.py %s failed (%d): %s", mode, rc, t_slurp(t_path("gen.log")));
    return dir.s;
}

static const char *in(const char *dir, const char *name) {
    static char p[8][1200];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* The whole file (malloc'd; NULL if absent), its size in *n. */
static unsigned char *slurp_bin(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static al_pt_file *open_ok(const char *path) {
    al_pt_file *f = NULL;
    al_err e = {{0}};
    CHECK_OK(al_pt_open(path, &f, &e), &e);
    return f;
}

/* Tensor `name` of file (opened from dir/file) read as float32 must equal
 * PyTorch's values (ref/<file>/<name>.bin) bit for bit; its shape is
 * checked against want. */
static void same_f32(const char *dir, const char *file, const al_pt_file *f, const char *name,
                     int ndim, const int64_t *want) {
    char ref[1400];
    snprintf(ref, sizeof ref, "%s/ref/%s/%s.bin", dir, file, name);
    size_t n = 0;
    unsigned char *r = slurp_bin(ref, &n);
    CHECKF(r != NULL, "no reference %s", ref);
    if (!r) return;
    size_t ne = 1;
    for (int d = 0; d < ndim; d++) ne *= (size_t)want[d];
    CHECKF(n == ne * 4, "%s: reference has %zu bytes, shape wants %zu", name, n, ne * 4);
    float *got = calloc(ne + 1, sizeof *got);
    al_err e = {{0}};
    CHECK_OK(al_pt_read_f32(f, name, ndim, want, got, &e), &e);
    CHECKF(memcmp(got, r, n < ne * 4 ? n : ne * 4) == 0, "%s of %s differs from PyTorch's values",
           name, file);
    free(got);
    free(r);
}

/* Non-float tensors through the description: element by element along
 * the strides, against the reference bytes. */
static void same_raw(const char *dir, const char *file, const al_pt_file *f, const char *name) {
    const al_pt_tensor *t = al_pt_get(f, name);
    CHECKF(t != NULL, "%s missing from %s", name, file);
    if (!t) return;
    char ref[1400];
    snprintf(ref, sizeof ref, "%s/ref/%s/%s.bin", dir, file, name);
    size_t n = 0, es = al_pt_dtype_size(t->dtype);
    unsigned char *r = slurp_bin(ref, &n);
    CHECKF(r && n == (size_t)t->numel * es, "%s: reference size %zu", name, n);
    if (!r || n != (size_t)t->numel * es) {
        free(r);
        return;
    }
    CHECK(t->ndim <= 2);
    int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    int64_t rs = t->ndim == 2 ? t->stride[0] : 0, cs = t->ndim ? t->stride[t->ndim - 1] : 0;
    const unsigned char *s = t->storage;
    int bad = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            bad += memcmp(s + (size_t)(t->offset + i * rs + j * cs) * es,
                          r + (size_t)(i * cols + j) * es, es) != 0;
    CHECKF(bad == 0, "%s of %s: %d elements differ", name, file, bad);
    free(r);
}

#define SHAPE(...)                                                                                 \
    (const int64_t[]) { __VA_ARGS__ }

/* The TransformerLens keys of torch_ckpt_ref.py's tl_state_dict (V 50, C
 * 16, H 2, D 8, n_ctx 12), prefixed by pre. */
static void check_tl(const char *dir, const char *file, const char *pre, int V, int C,
                     al_pt_dtype dt) {
    al_pt_file *f = open_ok(in(dir, file));
    if (!f) return;
    CHECKF(al_pt_count(f) == 17 || pre[0], "%s has %d tensors", file, al_pt_count(f));
    char nm[256];
#define NM(s) (snprintf(nm, sizeof nm, "%s%s", pre, s), nm)
    const int H = 2, D = 8, T = 12;
    same_f32(dir, file, f, NM("embed.W_E"), 2, SHAPE(V, C));
    same_f32(dir, file, f, NM("pos_embed.W_pos"), 2, SHAPE(T, C));
    same_f32(dir, file, f, NM("unembed.W_U"), 2, SHAPE(C, V));
    same_f32(dir, file, f, NM("unembed.b_U"), 1, SHAPE(V));
    same_f32(dir, file, f, NM("blocks.0.ln1.w"), 1, SHAPE(C));
    same_f32(dir, file, f, NM("blocks.0.ln1.b"), 1, SHAPE(C));
    const char *w[] = {"W_Q", "W_K", "W_V"}, *b[] = {"b_Q", "b_K", "b_V"};
    for (int i = 0; i < 3; i++) {
        char k[64];
        snprintf(k, sizeof k, "blocks.0.attn.%s", w[i]);
        same_f32(dir, file, f, NM(k), 3, SHAPE(H, C, D));
        snprintf(k, sizeof k, "blocks.0.attn.%s", b[i]);
        same_f32(dir, file, f, NM(k), 2, SHAPE(H, D));
    }
    same_f32(dir, file, f, NM("blocks.0.attn.W_O"), 3, SHAPE(H, D, C));
    same_f32(dir, file, f, NM("blocks.0.attn.b_O"), 1, SHAPE(C));
    /* the scalar: ndim 0, one element */
    const al_pt_tensor *ig = al_pt_get(f, NM("blocks.0.attn.IGNORE"));
    CHECK(ig && ig->ndim == 0 && ig->numel == 1 && ig->dtype == dt);
    if (dt != AL_PT_F16) {
        same_f32(dir, file, f, NM("blocks.0.attn.IGNORE"), 0, NULL);
    } else { /* -1e5 is -inf in float16, which read_f32 refuses */
        float x;
        al_err e = {{0}};
        CHECK(al_pt_read_f32(f, NM("blocks.0.attn.IGNORE"), 0, NULL, &x, &e) != 0);
        CHECKF(strstr(e.msg, "tensor blocks.0.attn.IGNORE contains NaN/Inf at index 0"), "%s",
               e.msg);
    }
    const al_pt_tensor *wq = al_pt_get(f, NM("blocks.0.attn.W_Q"));
    CHECK(wq && wq->dtype == dt && wq->stride[0] == C * D && wq->stride[1] == D &&
          wq->stride[2] == 1);
    const al_pt_tensor *m = al_pt_get(f, NM("blocks.0.attn.mask"));
    CHECK(m && m->dtype == AL_PT_BOOL && m->ndim == 2 && m->shape[0] == T && m->shape[1] == T);
    same_raw(dir, file, f, NM("blocks.0.attn.mask"));
    const al_pt_tensor *p = al_pt_get(f, NM("blocks.0.attn.pos_ids"));
    CHECK(p && p->dtype == AL_PT_I64 && p->ndim == 1 && p->shape[0] == T);
    same_raw(dir, file, f, NM("blocks.0.attn.pos_ids"));
#undef NM
    al_pt_close(f);
}

TEST(torch_ckpt_transformerlens_f32_f16_bf16_same_values_as_torch) {
    const char *d = gen("real");
    check_tl(d, "tl_f32.pt", "", 50, 16, AL_PT_F32);
    check_tl(d, "tl_f16.pt", "", 50, 16, AL_PT_F16);
    check_tl(d, "tl_bf16.pt", "", 50, 16, AL_PT_BF16);
    /* pickle protocol 4 (FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL) */
    check_tl(d, "proto4.pt", "", 20, 8, AL_PT_F32);
}

/* Views saved as they are: a transposed tensor, slices with offsets and
 * strides sharing one storage, a Parameter, a transposed half tensor. */
TEST(torch_ckpt_views_strides_and_shared_storages) {
    const char *d = gen("real");
    al_pt_file *f = open_ok(in(d, "views.pt"));
    if (!f) return;
    CHECK(al_pt_count(f) == 9);
    const al_pt_tensor *we = al_pt_get(f, "W_E"), *wu = al_pt_get(f, "W_U"),
                       *base = al_pt_get(f, "base"), *rows = al_pt_get(f, "rows"),
                       *col = al_pt_get(f, "col"), *sub = al_pt_get(f, "sub");
    CHECK(we && wu && base && rows && col && sub);
    if (!(we && wu && base && rows && col && sub)) return;
    CHECK(wu->storage == we->storage && wu->stride[0] == 1 && wu->stride[1] == 4);
    CHECK(rows->storage == base->storage && rows->offset == 5);
    CHECK(col->storage == base->storage && col->offset == 2 && col->stride[0] == 5);
    CHECK(sub->offset == 6 && sub->stride[0] == 10 && sub->stride[1] == 1);
    CHECK(base->storage != we->storage);
    same_f32(d, "views.pt", f, "W_E", 2, SHAPE(7, 4));
    same_f32(d, "views.pt", f, "W_U", 2, SHAPE(4, 7));
    same_f32(d, "views.pt", f, "base", 2, SHAPE(6, 5));
    same_f32(d, "views.pt", f, "rows", 2, SHAPE(3, 5));
    same_f32(d, "views.pt", f, "col", 1, SHAPE(6));
    same_f32(d, "views.pt", f, "sub", 2, SHAPE(2, 3));
    same_f32(d, "views.pt", f, "param", 1, SHAPE(3));
    same_f32(d, "views.pt", f, "half_t", 2, SHAPE(5, 3));
    /* read_f32's refusals name the file, the tensor and what differs */
    float buf[64];
    al_err e = {{0}};
    CHECK(al_pt_read_f32(f, "inf", 1, SHAPE(2), buf, &e) != 0);
    CHECKF(strstr(e.msg, "views.pt") && strstr(e.msg, "tensor inf contains NaN/Inf at index 1"),
           "%s", e.msg);
    CHECK(al_pt_read_f32(f, "W_E", 2, SHAPE(4, 7), buf, &e) != 0);
    CHECKF(strstr(e.msg, "tensor W_E has shape [7,4], expected [4,7]"), "%s", e.msg);
    CHECK(al_pt_read_f32(f, "W_E", 1, SHAPE(28), buf, &e) != 0);
    CHECK(al_pt_read_f32(f, "nope", 1, SHAPE(1), buf, &e) != 0);
    CHECKF(strstr(e.msg, "tensor nope missing"), "%s", e.msg);
    CHECK(al_pt_get(f, "nope") == NULL && al_pt_at(f, 9) == NULL && al_pt_at(f, -1) == NULL);
    al_pt_close(f);
    f = open_ok(in(d, "tl_f32.pt"));
    if (!f) return;
    CHECK(al_pt_read_f32(f, "blocks.0.attn.pos_ids", 1, SHAPE(12), buf, &e) != 0);
    CHECKF(strstr(e.msg, "has dtype I64, expected F32, F16 or BF16"), "%s", e.msg);
    al_pt_close(f);
}

/* A stem other than "archive", a state dict nested in a checkpoint with
 * other values, a single tensor, and the kind of each file. */
TEST(torch_ckpt_stem_nested_dict_and_single_tensor) {
    const char *d = gen("real");
    check_tl(d, "model_final.pth", "model_state_dict.", 20, 8, AL_PT_F32);
    al_pt_file *f = open_ok(in(d, "model_final.pth"));
    if (f) {
        CHECKF(al_pt_count(f) == 18, "%d tensors", al_pt_count(f)); /* 17 + ema's one */
        same_f32(d, "model_final.pth", f, "ema.embed.W_E", 2, SHAPE(20, 8));
        CHECK(!al_pt_get(f, "step") && !al_pt_get(f, "embed.W_E"));
        /* names in the pickle's order, depth first */
        CHECK(strcmp(al_pt_at(f, 0)->name, "model_state_dict.embed.W_E") == 0);
        CHECK(strcmp(al_pt_at(f, 17)->name, "ema.embed.W_E") == 0);
        al_pt_close(f);
    }
    f = open_ok(in(d, "module.pt")); /* nn.Module.state_dict(): _metadata by BUILD */
    if (f) {
        CHECK(al_pt_count(f) == 4);
        same_f32(d, "module.pt", f, "0.weight", 2, SHAPE(2, 3));
        same_f32(d, "module.pt", f, "0.bias", 1, SHAPE(2));
        same_f32(d, "module.pt", f, "1.weight", 1, SHAPE(2));
        same_f32(d, "module.pt", f, "1.bias", 1, SHAPE(2));
        al_pt_close(f);
    }
    f = open_ok(in(d, "single.pt"));
    if (f) {
        CHECK(al_pt_count(f) == 1 && strcmp(al_pt_at(f, 0)->name, "") == 0);
        same_f32(d, "single.pt", f, "", 2, SHAPE(3, 4));
        al_pt_close(f);
    }
    al_pt_kind k = AL_PT_OTHER;
    al_err e = {{0}};
    CHECK_OK(al_pt_kind_file(in(d, "model_final.pth"), &k, &e), &e);
    CHECK(k == AL_PT_ZIP);
    CHECK_OK(al_pt_kind_file(in(d, "ref/views.pt/W_E.bin"), &k, &e), &e);
    CHECK(k == AL_PT_OTHER);
    CHECK(al_pt_kind_file(in(d, "absent.pt"), &k, &e) != 0 && strstr(e.msg, "absent.pt"));
}

TEST(torch_ckpt_legacy_format_refused_by_name) {
    const char *d = gen("real");
    al_pt_kind k = AL_PT_OTHER;
    al_err e = {{0}};
    CHECK_OK(al_pt_kind_file(in(d, "legacy.pt"), &k, &e), &e);
    CHECK(k == AL_PT_LEGACY);
    al_pt_file *f = NULL;
    CHECK(al_pt_open(in(d, "legacy.pt"), &f, &e) != 0 && f == NULL);
    CHECKF(strstr(e.msg, "legacy.pt") && strstr(e.msg, "PyTorch's legacy non-zip format; re-save "
                                                       "it with torch.save in PyTorch >= 1.6"),
           "%s", e.msg);
}

/* Open must fail with a one-line message naming the file and holding want. */
static void refused(const char *path, const char *want, int line) {
    al_pt_file *f = NULL;
    al_err e = {{0}};
    if (al_pt_open(path, &f, &e) == 0) {
        t_fail(__FILE__, line, "%s was accepted, expected '%s'", path, want);
        al_pt_close(f);
        return;
    }
    if (!strstr(e.msg, want) || !strstr(e.msg, path) || strchr(e.msg, '\n'))
        t_fail(__FILE__, line, "message '%s' lacks '%s' or the path", e.msg, want);
    if (f) t_fail(__FILE__, line, "handle not NULL on failure");
}
#define REFUSED(path, want) refused(path, want, __LINE__)

TEST(torch_ckpt_pickle_naming_os_system_refused_and_not_run) {
    const char *d = gen("hostile");
    REFUSED(in(d, "evil.pt"), "refusing pickle global 'posix.system'");
    REFUSED(in(d, "evil4.pt"), "refusing pickle global 'posix.system'");
    struct stat st;
    CHECK(stat(in(d, "MARKER"), &st) != 0);
    REFUSED(in(d, "proto0.pt"), "not a pickle of protocol 2 to 5");
    REFUSED(in(d, "empty_tuple.pt"), "the pickle holds a tuple, not a dict of tensors");
    REFUSED(in(d, "double.pt"), "refusing pickle global 'torch.DoubleStorage'");
    REFUSED(in(d, "double.pt"),
            "(attnlab reads float32, float16, bfloat16, int64 and bool tensors)");
    /* the hand-built layout itself is accepted, stored or deflated */
    al_pt_file *z = open_ok(in(d, "deflated.pt"));
    if (z) {
        float *w = malloc(4096 * sizeof *w);
        al_err e;
        CHECK_OK(al_pt_read_f32(z, "w", 2, SHAPE(64, 64), w, &e), &e);
        int bad = 0;
        for (int i = 0; i < 4096; i++) bad += w[i] != (float)(i % 7);
        CHECK(bad == 0);
        free(w);
        al_pt_close(z);
    }
    al_pt_file *f = open_ok(in(d, "ok.pt"));
    if (f) {
        float w[6];
        al_err e;
        CHECK_OK(al_pt_read_f32(f, "w", 2, SHAPE(2, 3), w, &e), &e);
        CHECK(w[0] == 0 && w[5] == 5);
        al_pt_close(f);
    }
}

TEST(torch_ckpt_hostile_sizes_refused_in_one_line) {
    const char *d = gen("hostile");
    REFUSED(in(d, "small_storage.pt"), "tensor w reaches element 15 of a storage of 10");
    REFUSED(in(d, "offset.pt"), "tensor w reaches element 10 of a storage of 10 (offset 9)");
    REFUSED(in(d, "stride.pt"), "tensor w reaches element 10 of a storage of 9");
    REFUSED(in(d, "huge_shape.pt"), "tensor w has more than 4294967296 elements");
    REFUSED(in(d, "huge_stride0.pt"), "tensor w has more than 4294967296 elements");
    REFUSED(in(d, "stride_overflow.pt"), "tensor w reaches element");
    REFUSED(in(d, "storage_numel.pt"), "storage 0 claims 2305843009213693952 elements");
    REFUSED(in(d, "entry_short.pt"), "storage 0 has 36 bytes, but 10 F32 elements need 40");
    REFUSED(in(d, "ndim9.pt"), "a tensor has 9 dimensions, at most 8 supported");
    REFUSED(in(d, "big_endian.pt"), "byteorder 'big'");
    REFUSED(in(d, "no_version.pt"), "no no_version/version record");
    REFUSED(in(d, "no_storage.pt"), "storage 7 has no entry no_storage/data/7");
    REFUSED(in(d, "dup_name.pt"), "tensor name a.b occurs twice");
    REFUSED(in(d, "huge_entry.pt"), "cannot read checkpoint");
    REFUSED(in(d, "zip64_count.pt"), "the zip claims 1099511627776 entries");
    REFUSED(in(d, "deflate_bomb.pt"), "deflated zip entry deflated/data/0 claims 2147483632 bytes");
    REFUSED(in(d, "absent.pt"), "No such file");
    REFUSED(d, "not a regular file");
    REFUSED(t_write("text.pt", "hello\n"), "not a PyTorch checkpoint");
}

/* Files <prefix>_<cases[i][0]>.pt of d, each refused with cases[i][1]. */
static void refused_each(const char *d, const char *prefix, const char *const (*cases)[2],
                         size_t n) {
    for (size_t i = 0; i < n; i++) {
        char f[64];
        snprintf(f, sizeof f, "%s_%s.pt", prefix, cases[i][0]);
        REFUSED(in(d, f), cases[i][1]);
    }
}

/* Each rule of the restricted pickle VM broken alone (torch_ckpt_ref.py
 * writes pk_<name>.pt): refused in one line that says which rule and
 * where, nothing read. */
TEST(torch_ckpt_pickle_rules_each_refused) {
    const char *d = gen("hostile");
    static const char *const cases[][2] = {
        {"stack_global", "STACK_GLOBAL of something not two strings at byte 22"},
        {"build_list", "refusing BUILD of a list with a dict"},
        {"setitem_list", "SETITEM on something not a dict"},
        {"setitems_odd", "SETITEMS with an odd item count"},
        {"append_dict", "APPEND to something not a list"},
        {"appends_nomark", "pickle opcode needs a MARK and there is none at byte 3"},
        {"memo_unset", "pickle memo lookup of an unset index"},
        {"memo_unset4", "pickle memo lookup of an unset index"},
        {"memo_empty", "memo store from an empty stack"},
        {"memo_huge", "pickle memo index too large"},
        {"no_stop", "truncated pickle (no STOP)"},
        {"two_left", "the pickle ends with 2 objects on its stack, not 1"},
        {"proto_late", "PROTO not at the start of the pickle"},
        {"proto9", "pickle protocol 9, expected 2 to 5"},
        {"frame_long", "pickle FRAME longer than the data"},
        {"reduce_int", "REDUCE of something that is not a known global"},
        {"reduce_args", "REDUCE arguments are not a tuple"},
        {"odict_args", "OrderedDict called with arguments"},
        {"call_storage", "refusing to call pickle global 'torch.FloatStorage'"},
        {"param_args", "bad arguments to _rebuild_parameter"},
        {"persid_int", "persistent id is not ('storage', type, key, location, numel)"},
        {"persid_type", "persistent id names no storage type"},
        {"persid_key", "bad storage key, location or size in a persistent id"},
        {"persid_numel", "bad storage key, location or size in a persistent id"},
        {"rebuild_nargs", "bad arguments to _rebuild_tensor_v2"},
        {"rebuild_hooks", "bad arguments to _rebuild_tensor_v2"},
        {"rebuild_v1", "bad arguments to _rebuild_tensor at"},
        {"global_line", "bad or truncated GLOBAL in the pickle"},
        {"torchscript", "'__torch__.model.Net' at byte 2 of data.pkl (a TorchScript archive"},
        {"obj_opcode", "refusing pickle opcode 0x6f (OBJ) at byte 3"},
        {"tuple1_empty", "pickle stack underflow"},
        {"tuple_nomark", "pickle opcode needs a MARK and there is none"},
        {"unicode_short", "truncated pickle at byte 2"},
        {"top_int", "the pickle holds an int, not a dict of tensors"},
        {"key_nul", "a key holds a NUL byte: a?b"},
        {"key_long", "a key path is longer than 4096 bytes"},
        {"deep", "the checkpoint nests dicts more than 16 deep"},
    };
    refused_each(d, "pk", cases, sizeof cases / sizeof *cases);
}

/* The zip around the pickle, one rule broken each (torch_ckpt_ref.py
 * hostile, zip_<name>.pt); the version under .data/ (newer torch) is
 * read. */
TEST(torch_ckpt_zip_rules_each_refused) {
    const char *d = gen("hostile");
    static const char *const cases[][2] = {
        {"version99", "unsupported serialization version '99'"},
        {"byteorder", "unknown byteorder 'middle'"},
        {"multidisk", "a multi-disk zip"},
        {"cdir_outside", "the zip's central directory (174 bytes at 617) lies outside the file"},
        {"two_sizes", "stored zip entry ckpt/data/0 has two sizes (20 and 24)"},
        {"claims_more", "not a readable zip"},
        {"bzip2", "zip entry b/data.pkl uses compression method 12 (only stored and deflated"},
    };
    refused_each(d, "zip", cases, sizeof cases / sizeof *cases);
    al_pt_file *z = open_ok(in(d, "zip_dot_data_version.pt"));
    if (z) {
        float w[2];
        al_err e;
        CHECK_OK(al_pt_read_f32(z, "w", 1, SHAPE(2), w, &e), &e);
        CHECK(w[0] == 1 && w[1] == 2);
        al_pt_close(z);
    }
}

/* Every prefix of the checkpoint at path is refused in one line naming
 * the file, in memory and (a few) on disk; the whole file is accepted. */
static void every_prefix_refused(const char *path) {
    size_t n = 0;
    unsigned char *b = slurp_bin(path, &n);
    CHECK(b && n > 100);
    if (!b) return;
    int accepted = 0, bad_msg = 0;
    for (size_t k = 0; k < n; k++) {
        al_pt_file *f = NULL;
        al_err e = {{0}};
        unsigned char *cut = malloc(k + 1); /* exactly k bytes readable under ASan */
        memcpy(cut, b, k);
        if (al_pt_open_mem(cut, k, "cut.pt", &f, &e) == 0) {
            accepted++;
            al_pt_close(f);
        } else if (strchr(e.msg, '\n') || !strstr(e.msg, "cannot read checkpoint cut.pt: ")) {
            if (!bad_msg++) t_fail(__FILE__, __LINE__, "cut at %zu: %s", k, e.msg);
        }
        free(cut);
    }
    CHECKF(accepted == 0 && bad_msg == 0, "%s: %d of %zu prefixes accepted, %d bad messages", path,
           accepted, n, bad_msg);
    al_pt_file *f = NULL;
    al_err e;
    CHECK_OK(al_pt_open_mem(b, n, "whole.pt", &f, &e), &e);
    al_pt_close(f);
    for (size_t k = 0; k < n; k += n / 7 + 1) {
        FILE *o = fopen(t_path("cut.pt"), "wb");
        fwrite(b, 1, k, o);
        fclose(o);
        CHECK(al_pt_open(t_path("cut.pt"), &f, &e) != 0);
    }
    free(b);
}

TEST(torch_ckpt_every_truncation_refused) { every_prefix_refused(in(gen("hostile"), "ok.pt")); }

/* The same for a file torch.save wrote (64-byte aligned entries). */
TEST(torch_ckpt_every_truncation_of_a_torch_file_refused) {
    every_prefix_refused(in(gen("real"), "small.pt"));
}
