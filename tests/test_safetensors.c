/* test_safetensors.c -- safetensors round trip, exact layout, and a
 * refusal with a specific message for each kind of damaged file. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/safetensors.h"
#include "test.h"

/* Write a file from a raw header string (length prefix computed) and
 * data bytes; no padding, so tests control every byte. */
static void raw_file(const char *path, const char *hdr, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    uint64_t len = strlen(hdr);
    unsigned char l8[8];
    for (int i = 0; i < 8; i++) l8[i] = (unsigned char)(len >> (8 * i));
    fwrite(l8, 1, 8, f);
    fwrite(hdr, 1, len, f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static void put_bytes(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

/* Open must fail and the message must name the file and contain `want`. */
static void expect_refused(const char *path, const char *want, int line) {
    al_st_file *f = NULL;
    al_err e = {{0}};
    int rc = al_st_open(path, &f, &e);
    if (rc == 0) {
        t_fail(__FILE__, line, "%s was accepted, expected '%s'", path, want);
        al_st_close(f);
        return;
    }
    if (!strstr(e.msg, want) || !strstr(e.msg, path))
        t_fail(__FILE__, line, "message '%s' lacks '%s' or the path", e.msg, want);
    if (f) t_fail(__FILE__, line, "handle not NULL on failure");
}
#define REFUSED(path, want) expect_refused(path, want, __LINE__)

TEST(st_roundtrip_bitwise) {
    float a[6] = {1.0f, -0.0f, FLT_MIN / 4, FLT_MAX, -3.25f, 1e-30f};
    int32_t b[4] = {0, -1, INT32_MAX, INT32_MIN};
    float s = 42.5f;
    al_st_tensor ts[4] = {
        {"a.weird \"name\"\n", AL_DT_F32, 2, {2, 3}, a},
        {"b", AL_DT_I32, 1, {4}, b},
        {"scalar", AL_DT_F32, 0, {0}, &s},
        {"empty", AL_DT_F32, 2, {0, 5}, NULL},
    };
    const char *mk[2] = {"format", "note"}, *mv[2] = {"pt", "tab\there \"q\" \\"};
    al_err e;
    const char *p = t_path("x.safetensors");
    CHECK_OK(al_st_write(p, ts, 4, mk, mv, 2, &e), &e);
    al_st_file *f;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    if (!f) return;
    CHECK(al_st_count(f) == 4);
    for (int i = 0; i < 4; i++) {
        const al_st_tensor *t = al_st_at(f, i);
        CHECKF(strcmp(t->name, ts[i].name) == 0, "tensor %d is %s", i, t->name);
        CHECK(t->dtype == ts[i].dtype && t->ndim == ts[i].ndim);
        for (int d = 0; d < t->ndim; d++) CHECK(t->shape[d] == ts[i].shape[d]);
    }
    CHECK(memcmp(al_st_get(f, ts[0].name)->data, a, sizeof a) == 0);
    CHECK(memcmp(al_st_get(f, "b")->data, b, sizeof b) == 0);
    CHECK(memcmp(al_st_get(f, "scalar")->data, &s, 4) == 0);
    CHECK(al_st_get(f, "nope") == NULL && al_st_at(f, 4) == NULL);
    CHECK(strcmp(al_st_meta(f, "format"), "pt") == 0);
    CHECK(strcmp(al_st_meta(f, "note"), mv[1]) == 0);
    CHECK(al_st_meta(f, "missing") == NULL);
    float back[6];
    int64_t sh[2] = {2, 3};
    CHECK_OK(al_st_read_f32(f, ts[0].name, 2, sh, back, &e), &e);
    CHECK(memcmp(back, a, sizeof a) == 0);
    al_st_close(f);
}

/* The exact bytes of a one-tensor file, written out by hand. */
TEST(st_exact_layout) {
    float v[2] = {1.0f, -2.0f};
    al_st_tensor t = {"w", AL_DT_F32, 1, {2}, v};
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    al_err e;
    const char *p = t_path("one.safetensors");
    CHECK_OK(al_st_write(p, &t, 1, mk, mv, 1, &e), &e);
    const char *json = "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    size_t jl = strlen(json), hl = (jl + 7) / 8 * 8; /* 85 -> 88 */
    CHECK(jl == 85 && hl == 88);
    unsigned char want[256] = {0};
    for (int i = 0; i < 8; i++) want[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(want + 8, json, jl);
    memset(want + 8 + jl, ' ', hl - jl);
    /* 1.0f = 0x3f800000, -2.0f = 0xc0000000, little-endian */
    const unsigned char data[8] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0};
    memcpy(want + 8 + hl, data, 8);
    size_t total = 8 + hl + 8;
    char *got = t_slurp(p);
    FILE *fp = fopen(p, "rb");
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fclose(fp);
    CHECKF(sz == (long)total, "size %ld, want %zu", sz, total);
    CHECK(got && memcmp(got, want, total) == 0);
    CHECK(hl % 8 == 0);
    free(got);
    /* A name one byte longer: 86 bytes of JSON, still padded to 88. */
    al_st_tensor t2 = {"ww", AL_DT_F32, 1, {2}, v};
    CHECK_OK(al_st_write(p, &t2, 1, mk, mv, 1, &e), &e);
    got = t_slurp(p);
    CHECK(got && (unsigned char)got[0] == 88 && got[1] == 0);
    CHECK(got && memcmp(got + 8 + 86, "  \x00", 3) == 0);
    free(got);
}

TEST(st_writer_refuses_bad_input) {
    float v[2] = {0};
    al_err e;
    const char *p = t_path("w.safetensors");
    al_st_tensor dup[2] = {{"a", AL_DT_F32, 1, {2}, v}, {"a", AL_DT_F32, 1, {2}, v}};
    CHECK(al_st_write(p, dup, 2, NULL, NULL, 0, &e) == -1 && strstr(e.msg, "duplicate"));
    al_st_tensor neg = {"a", AL_DT_F32, 1, {-1}, v};
    CHECK(al_st_write(p, &neg, 1, NULL, NULL, 0, &e) == -1 && strstr(e.msg, "bad shape"));
    al_st_tensor big = {"a", AL_DT_F32, 3, {1 << 30, 1 << 30, 1 << 30}, v};
    CHECK(al_st_write(p, &big, 1, NULL, NULL, 0, &e) == -1 && strstr(e.msg, "bad shape"));
    CHECK(!t_slurp(p)); /* nothing written, no partial file */
}

/* A valid two-tensor file as bytes, for the damage tests. */
static unsigned char *valid_file(const char *p, size_t *n, size_t *hlen) {
    float a[3] = {1, 2, 3}, b[2] = {4, 5};
    al_st_tensor ts[2] = {{"a", AL_DT_F32, 1, {3}, a}, {"b", AL_DT_F32, 1, {2}, b}};
    al_err e;
    if (al_st_write(p, ts, 2, NULL, NULL, 0, &e) != 0) return NULL;
    unsigned char *d = (unsigned char *)t_slurp(p);
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fclose(f);
    *hlen = d[0] | (size_t)d[1] << 8;
    return d;
}

TEST(st_refuses_truncated) {
    size_t n, hl;
    unsigned char *d = valid_file(t_path("v.safetensors"), &n, &hl);
    CHECK(d && n == 8 + hl + 20);
    if (!d) return;
    const char *p = t_path("cut.safetensors");
    size_t cuts[] = {0, 1, 7, 8, 9, 8 + hl / 2, 8 + hl - 1, 8 + hl, 8 + hl + 4, n - 1};
    const char *want[] = {"truncated file (0 bytes", "truncated file",       "truncated file",
                          "bad header length",       "bad header length",    "bad header length",
                          "bad header length",       "beyond the data area", "beyond the data area",
                          "beyond the data area"};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        put_bytes(p, d, cuts[i]);
        REFUSED(p, want[i]);
    }
    put_bytes(p, d, n); /* the untruncated copy is fine */
    al_st_file *f;
    al_err e;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    al_st_close(f);
    free(d);
}

TEST(st_refuses_bad_header_length) {
    size_t n, hl;
    unsigned char *d = valid_file(t_path("v.safetensors"), &n, &hl);
    if (!d) return;
    const char *p = t_path("bad.safetensors");
    uint64_t lens[] = {n - 8 + 1, (uint64_t)1 << 63, UINT64_MAX, (uint64_t)1 << 32};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 8; i++) d[i] = (unsigned char)(lens[k] >> (8 * i));
        put_bytes(p, d, n);
        REFUSED(p, "bad header length");
    }
    al_err e;
    al_st_file *f;
    for (int i = 0; i < 8; i++) d[i] = (unsigned char)(((uint64_t)1 << 63) >> (8 * i));
    put_bytes(p, d, n);
    CHECK(al_st_open(p, &f, &e) == -1);
    CHECKF(strstr(e.msg, "bad header length 9223372036854775808 (file has"), "%s", e.msg);
    free(d);
}

TEST(st_refuses_bad_json) {
    const char *p = t_path("j.safetensors");
    float z[4] = {0};
    raw_file(p, "{\"a\":{\"dtype\":\"F32\",", z, 16);
    REFUSED(p, "header: invalid JSON at line 1, column");
    raw_file(p, "[1,2]", z, 16);
    REFUSED(p, "header is not a JSON object");
    raw_file(p, "", z, 16);
    REFUSED(p, "invalid JSON");
    /* a NUL inside the header */
    FILE *f = fopen(p, "wb");
    fwrite("\x06\0\0\0\0\0\0\0{}\0   ", 1, 14, f);
    fclose(f);
    REFUSED(p, "NUL byte");
    /* 10,000-deep nesting in the header: refused before cJSON recurses */
    size_t deep = 10000;
    char *h = malloc(2 * deep + 16);
    strcpy(h, "{\"a\":");
    size_t k = strlen(h);
    for (size_t i = 0; i < deep; i++) h[k++] = '[';
    for (size_t i = 0; i < deep; i++) h[k++] = ']';
    h[k++] = '}';
    h[k] = 0;
    raw_file(p, h, NULL, 0);
    REFUSED(p, "nested deeper than 100 levels");
    free(h);
}

/* F16 and BF16 are read, widened exactly: normal, negative, largest and
 * subnormal halves; NaN and Inf refused as in F32. */
TEST(st_reads_f16_and_bf16) {
    const char *p = t_path("h.safetensors");
    const unsigned char raw[] = {0x00, 0x3c, 0x00, 0xc1, 0xff, 0x7b, 0x01, 0x00, /* F16 */
                                 0x80, 0x3f, 0x20, 0xc0, 0x7f, 0x7f, 0x01, 0x00}; /* BF16 */
    raw_file(p,
             "{\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[8,16]}}",
             raw, sizeof raw);
    al_st_file *f = NULL;
    al_err e;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    if (!f) return;
    float h[4], b[4];
    CHECK_OK(al_st_read_f32(f, "h", 1, (const int64_t[]){4}, h, &e), &e);
    CHECK(h[0] == 1.0f && h[1] == -2.5f && h[2] == 65504.0f && h[3] == ldexpf(1.0f, -24));
    CHECK_OK(al_st_read_f32(f, "b", 2, (const int64_t[]){2, 2}, b, &e), &e);
    uint32_t top = 0x7f7fu << 16, tiny = 1u << 16;
    float big, sub;
    memcpy(&big, &top, 4);
    memcpy(&sub, &tiny, 4);
    CHECK(b[0] == 1.0f && b[1] == -2.5f && b[2] == big && b[3] == sub);
    al_st_close(f);
    const unsigned char nan16[] = {0x00, 0x7e};
    raw_file(p, "{\"h\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]}}", nan16, 2);
    CHECK_OK(al_st_open(p, &f, &e), &e);
    if (!f) return;
    CHECK(al_st_read_f32(f, "h", 1, (const int64_t[]){1}, h, &e) != 0 && strstr(e.msg, "NaN/Inf"));
    al_st_close(f);
}

TEST(st_refuses_bad_entries) {
    const char *p = t_path("e.safetensors");
    float z[8] = {0};
    struct {
        const char *hdr;
        const char *want;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}",
         "tensor a has unsupported dtype F64"},
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}",
         "data span is 8 bytes but dtype and shape need 4"},
        {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,4]}}",
         "data span is 4 bytes but dtype and shape need 6"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", "tensor a has no dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}",
         "tensor a has a shape entry of 4.61e+18, past the largest size read (2^53)"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", "tensor a has no shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999]}}",
         "tensor a: data_offsets end 99999 beyond the data area (32 bytes)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
         "data_offsets begin 8 > end 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}",
         "data span is 12 bytes but dtype and shape need 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0.5,8]}}",
         "data_offsets must be [begin, end] integers"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[\"0\",\"8\"]}}",
         "data_offsets must be [begin, end] integers"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,16]}}",
         "data_offsets must be"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}",
         "data_offsets must be"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[18446744073709551608,18446744073709551616]}}",
         "data_offsets must be"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
         "shape entry that is not a non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
         "\"data_offsets\":[0,8]}}",
         "shape product overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}",
         "5 dimensions, at most 4"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         "tensors a and b overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
         "duplicate tensor name a"},
        {"{\"a\":[1,2]}", "tensor a is not a JSON object"},
        {"{\"a\\nb\\u001b[31m\":[1,2]}", "tensor a?b?[31m is not a JSON object"},
        {"{\"__metadata__\":{\"format\":1}}", "__metadata__ value of format is not a string"},
        {"{\"__metadata__\":[]}", "__metadata__ is not a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        raw_file(p, cases[i].hdr, z, 32);
        REFUSED(p, cases[i].want);
    }
    /* Touching but not overlapping, and zero-size tensors, are fine. */
    raw_file(p,
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[8,16]},"
             "\"c\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}",
             z, 32);
    al_st_file *f;
    al_err e;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    CHECK(f && al_st_count(f) == 3);
    al_st_close(f);
}

TEST(st_read_f32_checks) {
    const char *p = t_path("r.safetensors");
    float w[24];
    for (int i = 0; i < 24; i++) w[i] = (float)i;
    w[5] = NAN;
    float u[3] = {1, INFINITY, 2};
    int32_t ids[2] = {1, 2};
    al_st_tensor ts[3] = {{"blocks.0.attn.W_Q", AL_DT_F32, 3, {2, 3, 4}, w},
                          {"embed.W_E", AL_DT_F32, 1, {3}, u},
                          {"ids", AL_DT_I32, 1, {2}, ids}};
    al_err e;
    CHECK_OK(al_st_write(p, ts, 3, NULL, NULL, 0, &e), &e);
    al_st_file *f;
    CHECK_OK(al_st_open(p, &f, &e), &e);
    if (!f) return;
    float dst[32];
    int64_t wrong[3] = {2, 3, 5}, right[3] = {2, 3, 4}, two[2] = {2, 12};
    char want[512];
    CHECK(al_st_read_f32(f, "blocks.0.attn.W_Q", 3, wrong, dst, &e) == -1);
    snprintf(want, sizeof want,
             "cannot read checkpoint %s: tensor blocks.0.attn.W_Q has "
             "shape [2,3,4], expected [2,3,5]",
             p);
    CHECKF(strcmp(e.msg, want) == 0, "%s", e.msg);
    CHECK(al_st_read_f32(f, "blocks.0.attn.W_Q", 2, two, dst, &e) == -1);
    CHECKF(strstr(e.msg, "has shape [2,3,4], expected [2,12]"), "%s", e.msg);
    CHECK(al_st_read_f32(f, "blocks.0.attn.W_Q", 3, right, dst, &e) == -1);
    CHECKF(strstr(e.msg, "tensor blocks.0.attn.W_Q contains NaN/Inf at index 5"), "%s", e.msg);
    int64_t three[1] = {3};
    CHECK(al_st_read_f32(f, "embed.W_E", 1, three, dst, &e) == -1);
    CHECKF(strstr(e.msg, "tensor embed.W_E contains NaN/Inf at index 1"), "%s", e.msg);
    int64_t two1[1] = {2};
    CHECK(al_st_read_f32(f, "ids", 1, two1, dst, &e) == -1);
    CHECKF(strstr(e.msg, "tensor ids has dtype I32, expected F32"), "%s", e.msg);
    CHECK(al_st_read_f32(f, "unembed.W_U", 1, two1, dst, &e) == -1);
    CHECKF(strstr(e.msg, "tensor unembed.W_U missing"), "%s", e.msg);
    al_st_close(f);
}

TEST(st_missing_and_not_regular) {
    al_err e;
    al_st_file *f;
    CHECK(al_st_open(t_path("nope.safetensors"), &f, &e) == -1);
    CHECKF(strstr(e.msg, "nope.safetensors: No such file"), "%s", e.msg);
    CHECK(al_st_open(t_tmpdir(), &f, &e) == -1);
    CHECKF(strstr(e.msg, "not a regular file"), "%s", e.msg);
}

/* Random damage: every mutated file is either refused with a message or
 * accepted with all tensors inside the buffer; never a crash. */
TEST(st_random_damage_never_crashes) {
    size_t n, hl;
    unsigned char *d = valid_file(t_path("v.safetensors"), &n, &hl);
    if (!d) return;
    unsigned char *m = malloc(n);
    const char *p = t_path("m.safetensors");
    al_rng r;
    al_rng_seed(&r, 99);
    int refused = 0, accepted = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(m, d, n);
        int flips = 1 + (int)al_rng_below(&r, 4);
        for (int k = 0; k < flips; k++) {
            size_t at = al_rng_below(&r, (uint32_t)(8 + hl)); /* header region */
            m[at] = (unsigned char)al_rng_below(&r, 256);
        }
        size_t len = al_rng_below(&r, 4) == 0 ? al_rng_below(&r, (uint32_t)n + 1) : n;
        put_bytes(p, m, len);
        al_st_file *f = NULL;
        al_err e = {{0}};
        if (al_st_open(p, &f, &e) == 0) {
            accepted++;
            for (int i = 0; i < al_st_count(f); i++) {
                const al_st_tensor *t = al_st_at(f, i);
                CHECK(t->ndim >= 0 && t->ndim <= AL_ST_MAX_DIMS);
            }
            al_st_close(f);
        } else {
            refused++;
            CHECK(e.msg[0] != 0);
        }
    }
    CHECK(refused > 1000);
    CHECK(accepted > 0); /* e.g. a flipped digit in a value that stays valid */
    free(m);
    free(d);
}
