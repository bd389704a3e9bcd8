/* torch_pickle.c -- a restricted pickle VM for torch.save's data.pkl.
 *
 * Python's unpickler imports whatever module a GLOBAL names and calls
 * whatever REDUCE is given, so a checkpoint can run any code. This VM
 * knows a closed set of opcodes (those of protocols 2-5 that a state
 * dict uses) and of globals, and "calling" one of those globals only
 * builds a description: OrderedDict() is an empty dict,
 * _rebuild_tensor_v2(...) a tensor record, a persistent id a storage
 * record. Anything else stops the VM with the opcode's or global's name.
 *
 * Objects live in one array and are referred to by index, so the memo and
 * containers can share them exactly as Python does (a tensor saved under
 * two names is one object); containers may even contain themselves, so
 * the walk that names tensors is bounded in depth and in total work.
 * Every count is capped before it is allocated for. */
#define _POSIX_C_SOURCE 200809L
#include "torch_pickle.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Caps. A state dict of 10,000 tensors makes about 200,000 objects and
 * 100,000 memo entries; these are 20-40 times that, and bound the VM's
 * memory to a few hundred MB on any input. */
#define MAX_OBJ (1 << 22)
#define MAX_STACK (1 << 20)
#define MAX_MEMO (1 << 22)
#define MAX_ITEMS (1 << 24) /* container items, all containers together */
#define MAX_STR (1u << 24) /* one string (they stay in the pickle bytes) */
#define MAX_TENSORS (1 << 20) /* tensor records, and named tensors */
#define MAX_DEPTH 16 /* dict/list nesting the names follow */
#define MAX_NAME 4096 /* one full key path */
#define MAX_VISIT (1 << 24) /* container entries the naming walk visits */

enum {
    PV_NONE,
    PV_BOOL,
    PV_INT,
    PV_FLOAT,
    PV_STR,
    PV_TUPLE,
    PV_LIST,
    PV_DICT,
    PV_GLOBAL,
    PV_STORAGE,
    PV_TENSOR
};
static const char *const kind_name[] = {"None", "bool", "int",    "float",   "str",   "tuple",
                                        "list", "dict", "global", "storage", "tensor"};
/* "a" or "an" before kind_name[k], for the messages */
static const char *art(int k) { return k == PV_INT ? "an" : "a"; }

/* The accepted globals. */
enum {
    G_ODICT,
    G_REBUILD_V2,
    G_REBUILD,
    G_REBUILD_PARAM,
    G_ST_F32,
    G_ST_F16,
    G_ST_BF16,
    G_ST_I64,
    G_ST_BOOL,
    G_N
};
static const struct {
    const char *module, *name;
} globals[G_N] = {
    {"collections", "OrderedDict"},
    {"torch._utils", "_rebuild_tensor_v2"},
    {"torch._utils", "_rebuild_tensor"},
    {"torch._utils", "_rebuild_parameter"},
    {"torch", "FloatStorage"},
    {"torch", "HalfStorage"},
    {"torch", "BFloat16Storage"},
    {"torch", "LongStorage"},
    {"torch", "BoolStorage"},
};

typedef struct pv {
    uint8_t kind;
    uint8_t g; /* PV_GLOBAL: which */
    int n, cap; /* containers: items (a dict holds key, value, key, ...) */
    int *items;
    int64_t i; /* PV_BOOL, PV_INT; PV_STORAGE, PV_TENSOR: record index */
    const unsigned char *s; /* PV_STR, into the pickle */
    size_t len;
} pv;

typedef struct vm {
    const unsigned char *p;
    size_t n, pos, op_at; /* op_at: where the current opcode started */
    pv *obj;
    int n_obj, cap_obj;
    int *stack;
    int sp, cap_stack;
    int *marks;
    int n_marks, cap_marks;
    int *memo; /* object index, -1 where unset */
    int cap_memo, n_memo_set;
    int64_t items;
    al_pk_result *r;
    int cap_st, cap_tr;
    /* tensor records, named later */
    al_pk_tensor *tr;
    int n_tr;
    int cap_t, visits;
    al_err *e;
} vm;

al_pk_dname al_pk_disp(const unsigned char *s, size_t n) {
    al_pk_dname d;
    size_t i = 0;
    for (; i < n && i < 80; i++) d.s[i] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    if (i < n) memcpy(d.s + i, "...", 3), i += 3;
    d.s[i] = 0;
    return d;
}

static int fail(vm *v, const char *what) {
    return al_errf(v->e, "%s at byte %zu of data.pkl", what, v->op_at);
}

/* ------------------------------------------------------------ objects */

static int new_obj(vm *v, int kind) {
    if (v->n_obj >= MAX_OBJ) return fail(v, "too many pickle objects"), -1;
    pv *o = al_grow(v->obj, &v->cap_obj, v->n_obj, sizeof *o, 256, v->e);
    if (!o) return -1;
    v->obj = o;
    memset(&o[v->n_obj], 0, sizeof *o);
    o[v->n_obj].kind = (uint8_t)kind;
    return v->n_obj++;
}

static int push(vm *v, int o) {
    if (o < 0) return -1;
    if (v->sp >= MAX_STACK) return fail(v, "pickle stack too deep");
    int *s = al_grow(v->stack, &v->cap_stack, v->sp, sizeof *s, 64, v->e);
    if (!s) return -1;
    v->stack = s;
    v->stack[v->sp++] = o;
    return 0;
}

static int push_new(vm *v, int kind, int64_t i) {
    int o = new_obj(v, kind);
    if (o < 0) return -1;
    v->obj[o].i = i;
    return push(v, o);
}

/* The stack below the topmost MARK is out of reach, as in Python, where
 * MARK starts a new stack. */
static int floor_of(const vm *v) { return v->n_marks ? v->marks[v->n_marks - 1] : 0; }

/* Items above the topmost mark: where they start (the mark is popped). */
static int mark_base(vm *v, int *base) {
    if (v->n_marks == 0) return fail(v, "pickle opcode needs a MARK and there is none");
    *base = v->marks[--v->n_marks];
    return 0;
}

static int pop(vm *v, int *o) {
    if (v->sp <= floor_of(v)) return fail(v, "pickle stack underflow");
    *o = v->stack[--v->sp];
    return 0;
}

static int add_items(vm *v, int o, const int *items, int k) {
    pv *c = &v->obj[o];
    if (k == 0) return 0; /* an empty tuple has no items array */
    if (v->items + k > MAX_ITEMS) return fail(v, "too many container items in the pickle");
    if (c->n + k > c->cap) {
        int cap = c->cap ? c->cap : 4;
        while (cap < c->n + k) cap *= 2; /* n + k <= MAX_ITEMS: no overflow */
        int *it = al_malloc((size_t)cap, sizeof *it, v->e);
        if (!it) return -1;
        if (c->n) memcpy(it, c->items, sizeof *it * (size_t)c->n);
        free(c->items);
        c->items = it;
        c->cap = cap;
    }
    memcpy(c->items + c->n, items, sizeof *items * (size_t)k);
    c->n += k;
    v->items += k;
    return 0;
}

static int make_tuple(vm *v, int base) {
    int k = v->sp - base;
    int o = new_obj(v, PV_TUPLE);
    /* k == 0: the stack may still be unallocated (NULL + 0 is undefined) */
    if (o < 0 || (k && add_items(v, o, v->stack + base, k) != 0)) return -1;
    v->sp = base;
    return push(v, o);
}

/* ------------------------------------------------------------ reading */

static int need(vm *v, size_t k) {
    if (v->n - v->pos < k) return fail(v, "truncated pickle");
    return 0;
}
static uint64_t rd_le(vm *v, int k) {
    uint64_t x = 0;
    for (int i = k - 1; i >= 0; i--) x = x << 8 | v->p[v->pos + (size_t)i];
    v->pos += (size_t)k;
    return x;
}

static int op_string(vm *v, int len_bytes) {
    if (need(v, (size_t)len_bytes) != 0) return -1;
    uint64_t len = rd_le(v, len_bytes);
    if (len > MAX_STR) return fail(v, "pickle string too long");
    if (need(v, (size_t)len) != 0) return -1;
    int o = new_obj(v, PV_STR);
    if (o < 0) return -1;
    v->obj[o].s = v->p + v->pos;
    v->obj[o].len = (size_t)len;
    v->pos += (size_t)len;
    return push(v, o);
}

/* One line of a GLOBAL opcode, without its newline. */
static int read_line(vm *v, const unsigned char **s, size_t *len) {
    const unsigned char *start = v->p + v->pos;
    size_t max = v->n - v->pos < 256 ? v->n - v->pos : 256;
    const unsigned char *nl = memchr(start, '\n', max);
    if (!nl) return fail(v, "bad or truncated GLOBAL in the pickle");
    *s = start;
    *len = (size_t)(nl - start);
    v->pos += *len + 1;
    return 0;
}

static int lookup_global(vm *v, const unsigned char *m, size_t ml, const unsigned char *nm,
                         size_t nl) {
    for (int g = 0; g < G_N; g++)
        if (strlen(globals[g].module) == ml && !memcmp(globals[g].module, m, ml) &&
            strlen(globals[g].name) == nl && !memcmp(globals[g].name, nm, nl)) {
            if (push_new(v, PV_GLOBAL, 0) != 0) return -1;
            v->obj[v->stack[v->sp - 1]].g = (uint8_t)g;
            return 0;
        }
    al_pk_dname dm = al_pk_disp(m, ml), dn = al_pk_disp(nm, nl);
    const char *hint = "";
    if (ml == 5 && !memcmp(m, "torch", 5) && nl > 7 && !memcmp(nm + nl - 7, "Storage", 7))
        hint = " (attnlab reads float32, float16, bfloat16, int64 and bool tensors)";
    else if (ml >= 9 && !memcmp(m, "__torch__", 9))
        hint = " (a TorchScript archive; save the model's state_dict() with torch.save instead)";
    return al_errf(v->e, "refusing pickle global '%s.%s' at byte %zu of data.pkl%s", dm.s, dn.s,
                   v->op_at, hint);
}

/* ------------------------------------------------------------ torch */

static int is_str(vm *v, int o, const char *s) {
    return v->obj[o].kind == PV_STR && v->obj[o].len == strlen(s) &&
           !memcmp(v->obj[o].s, s, v->obj[o].len);
}

/* BINPERSID: ('storage', <Type>Storage, key, location, numel). */
static int op_persid(vm *v) {
    int pid;
    if (pop(v, &pid) != 0) return -1;
    pv *t = &v->obj[pid];
    if (t->kind != PV_TUPLE || t->n != 5 || !is_str(v, t->items[0], "storage"))
        return fail(v, "persistent id is not ('storage', type, key, location, numel)");
    const pv *ty = &v->obj[t->items[1]], *key = &v->obj[t->items[2]], *loc = &v->obj[t->items[3]],
             *num = &v->obj[t->items[4]];
    if (ty->kind != PV_GLOBAL || ty->g < G_ST_F32)
        return fail(v, "persistent id names no storage type");
    if (key->kind != PV_STR || key->len == 0 || key->len > 255 || loc->kind != PV_STR ||
        num->kind != PV_INT || num->i < 0)
        return fail(v, "bad storage key, location or size in a persistent id");
    if (v->r->n_st >= MAX_TENSORS) return fail(v, "too many storages");
    al_pk_storage *st = al_grow(v->r->st, &v->cap_st, v->r->n_st, sizeof *st, 64, v->e);
    if (!st) return -1;
    v->r->st = st;
    static const al_pt_dtype dt[] = {AL_PT_F32, AL_PT_F16, AL_PT_BF16, AL_PT_I64, AL_PT_BOOL};
    st[v->r->n_st] = (al_pk_storage){key->s, key->len, dt[ty->g - G_ST_F32], num->i};
    return push_new(v, PV_STORAGE, v->r->n_st++);
}

/* A tuple of ints >= 0, at most AL_PT_MAX_DIMS of them. */
static int int_tuple(vm *v, int o, int64_t *out, int *n) {
    const pv *t = &v->obj[o];
    if (t->kind != PV_TUPLE || t->n > AL_PT_MAX_DIMS) return -1;
    for (int i = 0; i < t->n; i++) {
        const pv *x = &v->obj[t->items[i]];
        if (x->kind != PV_INT || x->i < 0) return -1;
        out[i] = x->i;
    }
    *n = t->n;
    return 0;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
 * backward_hooks[, metadata]) or _rebuild_tensor(storage, offset, size,
 * stride). */
static int rebuild_tensor(vm *v, int g, const pv *a) {
    int ok = g == G_REBUILD_V2 ? a->n == 6 || a->n == 7 : a->n == 4;
    al_pk_tensor t = {0};
    int ns = 0, nd = 0;
    ok = ok && v->obj[a->items[0]].kind == PV_STORAGE && v->obj[a->items[1]].kind == PV_INT &&
         v->obj[a->items[1]].i >= 0;
    if (ok && int_tuple(v, a->items[2], t.shape, &ns) != 0) {
        if (v->obj[a->items[2]].kind == PV_TUPLE && v->obj[a->items[2]].n > AL_PT_MAX_DIMS)
            return al_errf(v->e,
                           "a tensor has %d dimensions, at most %d supported (byte %zu "
                           "of data.pkl)",
                           v->obj[a->items[2]].n, AL_PT_MAX_DIMS, v->op_at);
        ok = 0;
    }
    ok = ok && int_tuple(v, a->items[3], t.stride, &nd) == 0 && nd == ns;
    if (ok && a->n >= 6)
        ok = v->obj[a->items[4]].kind == PV_BOOL && v->obj[a->items[5]].kind == PV_DICT &&
             (a->n == 6 || v->obj[a->items[6]].kind == PV_DICT);
    if (!ok)
        return fail(v, g == G_REBUILD_V2 ? "bad arguments to _rebuild_tensor_v2"
                                         : "bad arguments to _rebuild_tensor");
    t.storage = (int)v->obj[a->items[0]].i;
    t.offset = v->obj[a->items[1]].i;
    t.ndim = ns;
    if (v->n_tr >= MAX_TENSORS) return fail(v, "too many tensors");
    al_pk_tensor *tr = al_grow(v->tr, &v->cap_tr, v->n_tr, sizeof *tr, 64, v->e);
    if (!tr) return -1;
    v->tr = tr;
    tr[v->n_tr] = t;
    return push_new(v, PV_TENSOR, v->n_tr++);
}

static int op_reduce(vm *v) {
    int args, fn;
    if (pop(v, &args) != 0 || pop(v, &fn) != 0) return -1;
    const pv *f = &v->obj[fn], *a = &v->obj[args];
    if (f->kind != PV_GLOBAL) return fail(v, "REDUCE of something that is not a known global");
    if (a->kind != PV_TUPLE) return fail(v, "REDUCE arguments are not a tuple");
    switch (f->g) {
    case G_ODICT:
        if (a->n != 0) return fail(v, "OrderedDict called with arguments");
        return push_new(v, PV_DICT, 0);
    case G_REBUILD_V2:
    case G_REBUILD: return rebuild_tensor(v, f->g, a);
    case G_REBUILD_PARAM:
        /* _rebuild_parameter(tensor, requires_grad, backward_hooks): the tensor */
        if (a->n != 3 || v->obj[a->items[0]].kind != PV_TENSOR ||
            v->obj[a->items[1]].kind != PV_BOOL || v->obj[a->items[2]].kind != PV_DICT)
            return fail(v, "bad arguments to _rebuild_parameter");
        return push(v, a->items[0]);
    default: {
        char what[96];
        snprintf(what, sizeof what, "refusing to call pickle global 'torch.%s'",
                 globals[f->g].name);
        return fail(v, what);
    }
    }
}

/* ------------------------------------------------------------ the loop */

static int memo_put(vm *v, uint64_t idx) {
    if (v->sp == 0) return fail(v, "memo store from an empty stack");
    if (idx >= MAX_MEMO) return fail(v, "pickle memo index too large");
    if ((int)idx >= v->cap_memo) {
        int cap = v->cap_memo ? v->cap_memo : 64;
        while (cap <= (int)idx) cap *= 2;
        int *m = realloc(v->memo, sizeof *m * (size_t)cap);
        if (!m) return al_errf(v->e, "out of memory for the pickle memo");
        for (int i = v->cap_memo; i < cap; i++) m[i] = -1;
        v->memo = m;
        v->cap_memo = cap;
    }
    if (v->memo[idx] < 0) v->n_memo_set++;
    v->memo[idx] = v->stack[v->sp - 1];
    return 0;
}

static int memo_get(vm *v, uint64_t idx) {
    if (idx >= (uint64_t)v->cap_memo || v->memo[idx] < 0)
        return fail(v, "pickle memo lookup of an unset index");
    return push(v, v->memo[idx]);
}

static const char *opcode_name(unsigned c) {
    switch (c) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'V': return "UNICODE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8e: return "BINBYTES8";
    case 0x96: return "BYTEARRAY8";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 0x8b: return "LONG4";
    case 'F': return "FLOAT";
    case 'g': return "GET";
    case 'p': return "PUT";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 0x82:
    case 0x83:
    case 0x84: return "EXT";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "unknown";
    }
}

static int step(vm *v, int *done) {
    v->op_at = v->pos;
    unsigned c = v->p[v->pos++];
    int a, b, base = 0;
    switch (c) {
    case 0x80: /* PROTO */
        if (need(v, 1) != 0) return -1;
        if (v->op_at != 0) return fail(v, "PROTO not at the start of the pickle");
        if (v->p[v->pos] < 2 || v->p[v->pos] > 5)
            return al_errf(v->e, "pickle protocol %u, expected 2 to 5", v->p[v->pos]);
        v->pos++;
        return 0;
    case 0x95: { /* FRAME: a length prefix we do not need */
        if (need(v, 8) != 0) return -1;
        uint64_t len = rd_le(v, 8);
        if (len > v->n - v->pos) return fail(v, "pickle FRAME longer than the data");
        return 0;
    }
    case '}': return push_new(v, PV_DICT, 0);
    case ']': return push_new(v, PV_LIST, 0);
    case ')': return push_new(v, PV_TUPLE, 0);
    case '(': {
        if (v->n_marks >= MAX_STACK) return fail(v, "too many pickle MARKs");
        int *m = al_grow(v->marks, &v->cap_marks, v->n_marks, sizeof *m, 16, v->e);
        if (!m) return -1;
        v->marks = m;
        v->marks[v->n_marks++] = v->sp;
        return 0;
    }
    case 't': return mark_base(v, &base) != 0 ? -1 : make_tuple(v, base);
    case 0x85:
    case 0x86:
    case 0x87: { /* TUPLE1..3 */
        int k = (int)c - 0x84;
        if (v->sp - floor_of(v) < k) return fail(v, "pickle stack underflow");
        return make_tuple(v, v->sp - k);
    }
    case 'X': return op_string(v, 4);
    case 0x8c: return op_string(v, 1);
    case 0x8d: return op_string(v, 8);
    case 'J':
        if (need(v, 4) != 0) return -1;
        return push_new(v, PV_INT, (int32_t)(uint32_t)rd_le(v, 4));
    case 'K':
        if (need(v, 1) != 0) return -1;
        return push_new(v, PV_INT, (int64_t)rd_le(v, 1));
    case 'M':
        if (need(v, 2) != 0) return -1;
        return push_new(v, PV_INT, (int64_t)rd_le(v, 2));
    case 0x8a: { /* LONG1: n bytes, two's complement, little-endian */
        if (need(v, 1) != 0) return -1;
        int k = v->p[v->pos++];
        if (k > 8) return fail(v, "pickle integer wider than 64 bits");
        if (need(v, (size_t)k) != 0) return -1;
        uint64_t x = rd_le(v, k);
        if (k > 0 && k < 8 && (x >> (8 * k - 1)) & 1) x |= ~(uint64_t)0 << (8 * k);
        return push_new(v, PV_INT, (int64_t)x);
    }
    case 'G': { /* BINFLOAT, big-endian; kept only as a value to skip */
        if (need(v, 8) != 0) return -1;
        v->pos += 8;
        return push_new(v, PV_FLOAT, 0);
    }
    case 0x88: return push_new(v, PV_BOOL, 1);
    case 0x89: return push_new(v, PV_BOOL, 0);
    case 'N': return push_new(v, PV_NONE, 0);
    case 'q': return need(v, 1) != 0 ? -1 : memo_put(v, rd_le(v, 1));
    case 'r': return need(v, 4) != 0 ? -1 : memo_put(v, rd_le(v, 4));
    case 0x94: return memo_put(v, (uint64_t)v->n_memo_set);
    case 'h': return need(v, 1) != 0 ? -1 : memo_get(v, rd_le(v, 1));
    case 'j': return need(v, 4) != 0 ? -1 : memo_get(v, rd_le(v, 4));
    case 's':
    case 'u': { /* SETITEM, SETITEMS: dict, then key, value pairs */
        if (c == 's')
            base = v->sp - 2;
        else if (mark_base(v, &base) != 0)
            return -1;
        if (base - 1 < floor_of(v)) return fail(v, "pickle stack underflow");
        if ((v->sp - base) % 2) return fail(v, "SETITEMS with an odd item count");
        int d = v->stack[base - 1];
        if (v->obj[d].kind != PV_DICT) return fail(v, "SETITEM on something not a dict");
        if (add_items(v, d, v->stack + base, v->sp - base) != 0) return -1;
        v->sp = base;
        return 0;
    }
    case 'a':
    case 'e': { /* APPEND, APPENDS */
        if (c == 'a')
            base = v->sp - 1;
        else if (mark_base(v, &base) != 0)
            return -1;
        if (base - 1 < floor_of(v)) return fail(v, "pickle stack underflow");
        int l = v->stack[base - 1];
        if (v->obj[l].kind != PV_LIST) return fail(v, "APPEND to something not a list");
        if (add_items(v, l, v->stack + base, v->sp - base) != 0) return -1;
        v->sp = base;
        return 0;
    }
    case 'R': return op_reduce(v);
    case 'b': /* BUILD: a state dict's _metadata attribute; ignored */
        if (pop(v, &b) != 0 || pop(v, &a) != 0) return -1;
        v->sp++; /* the object stays */
        if (v->obj[a].kind != PV_DICT || v->obj[b].kind != PV_DICT) {
            char what[96];
            snprintf(what, sizeof what, "refusing BUILD of %s %s with %s %s", art(v->obj[a].kind),
                     kind_name[v->obj[a].kind], art(v->obj[b].kind), kind_name[v->obj[b].kind]);
            return fail(v, what);
        }
        return 0;
    case 'Q': return op_persid(v);
    case 'c': {
        const unsigned char *m, *nm;
        size_t ml, nl;
        if (read_line(v, &m, &ml) != 0 || read_line(v, &nm, &nl) != 0) return -1;
        return lookup_global(v, m, ml, nm, nl);
    }
    case 0x93: /* STACK_GLOBAL */
        if (pop(v, &b) != 0 || pop(v, &a) != 0) return -1;
        if (v->obj[a].kind != PV_STR || v->obj[b].kind != PV_STR)
            return fail(v, "STACK_GLOBAL of something not two strings");
        return lookup_global(v, v->obj[a].s, v->obj[a].len, v->obj[b].s, v->obj[b].len);
    case '.': *done = 1; return 0;
    default: {
        char what[64];
        snprintf(what, sizeof what, "refusing pickle opcode 0x%02x (%s)", c, opcode_name(c));
        return fail(v, what);
    }
    }
}

/* ------------------------------------------------------------ naming */

static int add_named(vm *v, const char *name, size_t len, int tensor) {
    al_pk_result *r = v->r;
    if (r->n_t >= MAX_TENSORS) return al_errf(v->e, "too many tensors");
    al_pk_tensor *t = al_grow(r->t, &v->cap_t, r->n_t, sizeof *t, 64, v->e);
    if (!t) return -1;
    r->t = t;
    char *s = al_malloc(len + 1, 1, v->e);
    if (!s) return -1;
    memcpy(s, name, len);
    s[len] = 0;
    t[r->n_t] = v->tr[tensor];
    t[r->n_t++].name = s;
    return 0;
}

/* Name every tensor under o: buf[0..len) is o's path. */
static int walk(vm *v, int o, char *buf, size_t len, int depth) {
    const pv *x = &v->obj[o];
    if (x->kind == PV_TENSOR) return add_named(v, buf, len, (int)x->i);
    if (x->kind != PV_DICT && x->kind != PV_LIST && x->kind != PV_TUPLE) return 0;
    if (depth >= MAX_DEPTH)
        return al_errf(v->e, "the checkpoint nests dicts more than %d deep", MAX_DEPTH);
    int dict = x->kind == PV_DICT, per = dict ? 2 : 1; /* a dict: key, value, ... */
    for (int i = 0; i + per <= x->n; i += per) {
        if (++v->visits > MAX_VISIT)
            return al_errf(v->e, "the checkpoint's containers hold too many entries");
        int val = x->items[i + per - 1];
        int vk = v->obj[val].kind;
        if (vk != PV_TENSOR && vk != PV_DICT && vk != PV_LIST && vk != PV_TUPLE) continue;
        char part[32];
        const char *ps = part;
        size_t pl;
        if (!dict) {
            pl = (size_t)snprintf(part, sizeof part, "%d", i);
        } else {
            const pv *k = &v->obj[x->items[i]];
            if (k->kind == PV_STR) {
                ps = (const char *)k->s;
                pl = k->len;
                if (memchr(ps, 0, pl))
                    return al_errf(v->e, "a key holds a NUL byte: %s", al_pk_disp(k->s, k->len).s);
            } else if (k->kind == PV_INT) {
                pl = (size_t)snprintf(part, sizeof part, "%" PRId64, k->i);
            } else {
                continue; /* tuple or None keys: nothing a state dict has */
            }
        }
        size_t nl = len + (len ? 1 : 0) + pl;
        if (nl > MAX_NAME) return al_errf(v->e, "a key path is longer than %d bytes", MAX_NAME);
        if (len) buf[len] = '.';
        memcpy(buf + len + (len ? 1 : 0), ps, pl);
        if (walk(v, val, buf, nl, depth + 1) != 0) return -1;
    }
    return 0;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(al_pk_tensor *const *)a)->name, (*(al_pk_tensor *const *)b)->name);
}

/* Names must be unique: {'a.b': t, 'a': {'b': u}} or a key set twice. */
static int check_unique(al_pk_result *r, al_err *e) {
    if (r->n_t < 2) return 0;
    al_pk_tensor **s = al_malloc((size_t)r->n_t, sizeof *s, e);
    if (!s) return -1;
    for (int i = 0; i < r->n_t; i++) s[i] = &r->t[i];
    qsort(s, (size_t)r->n_t, sizeof *s, cmp_name);
    int rc = 0;
    for (int i = 1; i < r->n_t && rc == 0; i++)
        if (strcmp(s[i - 1]->name, s[i]->name) == 0)
            rc = al_errf(e, "tensor name %s occurs twice",
                         al_pk_disp((const unsigned char *)s[i]->name, strlen(s[i]->name)).s);
    free(s);
    return rc;
}

int al_pk_load(const unsigned char *p, size_t n, al_pk_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    vm v = {.p = p, .n = n, .r = r, .e = e};
    int rc = 0, done = 0;
    if (n == 0 || p[0] != 0x80) rc = al_errf(e, "data.pkl is not a pickle of protocol 2 to 5");
    while (rc == 0 && !done) {
        if (v.pos >= v.n) {
            v.op_at = v.pos;
            rc = fail(&v, "truncated pickle (no STOP)");
            break;
        }
        rc = step(&v, &done);
    }
    if (rc == 0 && v.sp != 1)
        rc = al_errf(e, "the pickle ends with %d objects on its stack, not 1", v.sp);
    if (rc == 0) {
        int top = v.stack[0];
        int k = v.obj[top].kind;
        if (k != PV_DICT && k != PV_TENSOR)
            rc = al_errf(e, "the pickle holds %s %s, not a dict of tensors", art(k), kind_name[k]);
    }
    if (rc == 0) {
        char *buf = al_malloc(MAX_NAME + 1, 1, e);
        rc = buf ? walk(&v, v.stack[0], buf, 0, 0) : -1;
        free(buf);
    }
    if (rc == 0) rc = check_unique(r, e);
    for (int i = 0; i < v.n_obj; i++) free(v.obj[i].items);
    free(v.obj);
    free(v.stack);
    free(v.marks);
    free(v.memo);
    free(v.tr);
    return rc;
}

void al_pk_free(al_pk_result *r) {
    for (int i = 0; i < r->n_t; i++) free(r->t[i].name);
    free(r->t);
    free(r->st);
    memset(r, 0, sizeof *r);
}
