/* tok_hf.c -- a Hugging Face tokenizer.json with a byte-level BPE model
 * (GPT-2, GPT-NeoX and their kin): loading with every check before the
 * tables are built, and encoding as the Rust library does -- added tokens
 * first (on the raw text, then on the normalized text), the normalizer
 * and the pre-tokenizer (tok_hf_pre.c), then BPE merges by rank.
 *
 * The vocabulary's strings are in ByteLevel's alphabet (byte 0x20 is
 * "Ġ"); they are mapped back to bytes once, here, so pieces of text are
 * merged as bytes and decode by concatenation. Ids are the file's: a
 * merge (a, b) makes the id of the string a+b, whatever its number. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tok_hf.h"

#define MAX_VOCAB (1 << 24)
#define MAX_MERGES (1 << 24)
#define MAX_ADDED (1 << 16)
#define MAX_PIECE 4096 /* bytes of one vocabulary string or added token */
#define MAX_ADDED_BYTES (16 << 20) /* of all added tokens: trie nodes */
#define EMPTY_KEY UINT64_MAX
#define CACHE_SLOTS 16384
#define CACHE_MAXLEN 24
#define EOT_TEXT "<|endoftext|>"

typedef struct cache_slot {
    uint32_t hash;
    uint8_t len, nids; /* len 0: empty */
    unsigned char key[CACHE_MAXLEN];
    int32_t ids[CACHE_MAXLEN];
} cache_slot;

typedef struct added {
    unsigned char *pat; /* what is matched: the content, or its NFC when normalized */
    size_t n;
    int id, special, lstrip, rstrip, normalized;
} added;

/* Added tokens matched on one form of the text: a byte trie, walked from
 * each position as far as the text follows it; the last token passed is
 * the longest at that position, the one Hugging Face's leftmost-longest
 * Aho-Corasick automaton picks there. */
typedef struct tnode {
    int32_t child, sibling, tok; /* node indices (-1: none); tok: index into added */
    unsigned char byte;
} tnode;

typedef struct match_set {
    tnode *node; /* node 0 is the root */
    int32_t n, cap;
    int32_t first[256]; /* the root's child for each byte, or -1 */
} match_set;

struct al_tokhf {
    unsigned char *file; /* the tokenizer.json bytes, for al_tokhf_save */
    size_t file_n;
    int V, n_ids, eot, ignore_merges;
    unsigned char *bytes; /* every id's bytes, concatenated */
    size_t *off; /* (n_ids + 1) */
    int byte_id[256]; /* id of each byte's one-character string, or -1 */
    uint64_t *mkey; /* merges: (a << 32 | b) -> rank, open addressing */
    int32_t *mrank, *mnew; /* mnew[rank]: the id the merge makes */
    size_t mmask;
    uint32_t *vslot; /* ignore_merges: bytes -> id + 1 for the model's strings */
    size_t vmask;
    added *added;
    int n_added;
    match_set sets[2]; /* 0: normalized false (raw text), 1: normalized true */
    hf_pre *pre;
    cache_slot *cache; /* lazily allocated; guarded by cache_busy */
    atomic_flag cache_busy;
};

static inline size_t mix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

static size_t table_cap(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

/* ----------------------------------------------- the byte-level alphabet */

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
 * other 68 (controls, space, 0x7f-0xa0, 0xad) for U+0100.. in order. */
typedef struct alphabet {
    uint32_t cp[256];
    int16_t byte[324]; /* code point -> byte, or -1 */
} alphabet;

static void alphabet_init(alphabet *a) {
    int extra = 0;
    for (int c = 0; c < 324; c++) a->byte[c] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        a->cp[b] = printable ? (uint32_t)b : 256u + (uint32_t)extra++;
        a->byte[a->cp[b]] = (int16_t)b;
    }
}

/* s (UTF-8, n bytes) as bytes if every character is in the alphabet
 * (out has room for n); returns the length, or -1. */
static long to_bytes(const alphabet *a, const unsigned char *s, size_t n, unsigned char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = hf_utf8_len(s + i, n - i);
        if (l == 0 || l > 2) return -1;
        uint32_t c = l == 1 ? s[i] : (uint32_t)(s[i] & 0x1f) << 6 | (s[i + 1] & 0x3f);
        if (c >= 324 || a->byte[c] < 0) return -1;
        out[o++] = (unsigned char)a->byte[c];
        i += l;
    }
    return (long)o;
}

/* --------------------------------------------- strings -> ids (load) */

/* Open addressing over ids; the strings stay where they are. */
typedef struct strtab {
    uint32_t *slot; /* id + 1, 0 empty */
    size_t mask;
    const unsigned char *const *s;
    const size_t *n;
} strtab;

static int strtab_find(const strtab *t, const unsigned char *s, size_t n) {
    for (size_t i = mix64(fnv1a(s, n)) & t->mask;; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v) return -1;
        if (t->n[v - 1] == n && memcmp(t->s[v - 1], s, n) == 0) return (int)v - 1;
    }
}

/* Insert id; returns the id already holding the same string, or -1. */
static int strtab_add(strtab *t, int id) {
    const unsigned char *s = t->s[id];
    size_t n = t->n[id];
    size_t i = mix64(fnv1a(s, n)) & t->mask;
    for (; t->slot[i]; i = (i + 1) & t->mask)
        if (t->n[t->slot[i] - 1] == n && memcmp(t->s[t->slot[i] - 1], s, n) == 0)
            return (int)t->slot[i] - 1;
    t->slot[i] = (uint32_t)id + 1;
    return -1;
}

/* ----------------------------------------------------------- loading */

void al_tokhf_free(al_tokhf *h) {
    if (!h) return;
    free(h->file);
    free(h->bytes);
    free(h->off);
    free(h->mkey);
    free(h->mrank);
    free(h->mnew);
    free(h->vslot);
    for (int i = 0; i < h->n_added; i++) free(h->added[i].pat);
    free(h->added);
    free(h->sets[0].node);
    free(h->sets[1].node);
    hf_pre_free(h->pre);
    free(h->cache);
    free(h);
}

/* What loading needs beside the tokenizer: the vocabulary's strings by id
 * and the table over them. */
typedef struct loader {
    al_tokhf *h;
    alphabet ab;
    const unsigned char **key; /* (V) the JSON strings */
    size_t *key_n;
    strtab keys;
    unsigned char *is_added; /* (V) the string is an added token's content */
    unsigned char *level; /* (V) the string is in the ByteLevel alphabet */
    const cJSON **content; /* (n_added) */
    al_err *e;
} loader;

static int is_null_or(const cJSON *x, const char *str) {
    return !x || cJSON_IsNull(x) || (str && cJSON_IsString(x) && strcmp(x->valuestring, str) == 0);
}

static int check_keys(const cJSON *obj, const char *const *keys, const char *what, al_err *e) {
    unsigned seen = 0; /* a key given twice would be read once: refused */
    for (const cJSON *it = obj->child; it; it = it->next) {
        int k = 0;
        while (keys[k] && strcmp(it->string, keys[k]) != 0) k++;
        char q[64];
        if (!keys[k])
            return al_errf(e, "%sunsupported key %s", what, hf_quote(q, sizeof q, it->string));
        if (seen >> k & 1)
            return al_errf(e, "%srepeated key %s", what, hf_quote(q, sizeof q, it->string));
        seen |= 1u << k;
    }
    return 0;
}

static int check_model(al_tokhf *h, const cJSON *m, al_err *e) {
    static const char *const keys[] = {"type",
                                       "dropout",
                                       "unk_token",
                                       "continuing_subword_prefix",
                                       "end_of_word_suffix",
                                       "fuse_unk",
                                       "byte_fallback",
                                       "ignore_merges",
                                       "vocab",
                                       "merges",
                                       NULL};
    if (check_keys(m, keys, "model: ", e)) return -1;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (!is_null_or(x, NULL))
        return al_errf(e, "model: dropout must be null (dropout is not supported)");
    if (!is_null_or(cJSON_GetObjectItemCaseSensitive(m, "unk_token"), NULL))
        return al_errf(e, "model: unk_token must be null (an unknown token is not supported)");
    if (!is_null_or(cJSON_GetObjectItemCaseSensitive(m, "continuing_subword_prefix"), ""))
        return al_errf(e, "model: continuing_subword_prefix must be null or \"\"");
    if (!is_null_or(cJSON_GetObjectItemCaseSensitive(m, "end_of_word_suffix"), ""))
        return al_errf(e, "model: end_of_word_suffix must be null or \"\"");
    static const char *const off[] = {"fuse_unk", "byte_fallback"};
    for (int i = 0; i < 2; i++) {
        x = cJSON_GetObjectItemCaseSensitive(m, off[i]);
        if (x && !cJSON_IsFalse(x)) return al_errf(e, "model: %s must be false", off[i]);
    }
    x = cJSON_GetObjectItemCaseSensitive(m, "ignore_merges");
    if (x && !cJSON_IsBool(x)) return al_errf(e, "model: ignore_merges must be true or false");
    h->ignore_merges = cJSON_IsTrue(x);
    return 0;
}

/* post_processor: none, ByteLevel (offsets only), or a TemplateProcessing
 * whose single-sequence template adds nothing; decoder: none or ByteLevel. */
static int check_post(const cJSON *root, al_err *e) {
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pp, "type");
    char q[64];
    if (pp && !cJSON_IsNull(pp)) {
        if (!cJSON_IsString(type))
            return al_errf(e, "post_processor must be null or an object with a \"type\"");
        if (strcmp(type->valuestring, "TemplateProcessing") == 0) {
            const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
            const cJSON *a =
                cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, 0), "Sequence");
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
            if (!cJSON_IsArray(single) || cJSON_GetArraySize(single) != 1 || !cJSON_IsString(id) ||
                strcmp(id->valuestring, "A") != 0)
                return al_errf(e, "post_processor TemplateProcessing: only a single-sequence "
                                  "template of the sequence alone (no added tokens) is supported");
        } else if (strcmp(type->valuestring, "ByteLevel") != 0) {
            return al_errf(e,
                           "unsupported post_processor %s (ByteLevel and TemplateProcessing "
                           "without added tokens are)",
                           hf_quote(q, sizeof q, type->valuestring));
        }
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    type = cJSON_GetObjectItemCaseSensitive(d, "type");
    if (d && !cJSON_IsNull(d) &&
        !(cJSON_IsString(type) && strcmp(type->valuestring, "ByteLevel") == 0))
        return al_errf(e, "unsupported decoder %s (ByteLevel or null is)",
                       cJSON_IsString(type) ? hf_quote(q, sizeof q, type->valuestring)
                                            : "(no type)");
    return 0;
}

/* An integer-valued JSON number in [lo, hi], else -1. */
static long json_int(const cJSON *x, long lo, long hi) {
    if (!cJSON_IsNumber(x) || !(x->valuedouble >= (double)lo && x->valuedouble <= (double)hi) ||
        x->valuedouble != (double)(long)x->valuedouble)
        return -1;
    return (long)x->valuedouble;
}

static int load_vocab(loader *L, const cJSON *vocab) {
    al_err *e = L->e;
    if (!cJSON_IsObject(vocab)) return al_errf(e, "model: \"vocab\" must be an object");
    int V = cJSON_GetArraySize(vocab);
    if (V < 1 || V > MAX_VOCAB)
        return al_errf(e, "model: the vocab has %d strings (1..%d are allowed)", V, MAX_VOCAB);
    L->h->V = V;
    L->key = al_calloc((size_t)V, sizeof *L->key, e);
    L->key_n = al_calloc((size_t)V, sizeof *L->key_n, e);
    L->is_added = al_calloc((size_t)V, 1, e);
    size_t cap = table_cap((size_t)V);
    L->keys.slot = al_calloc(cap, sizeof *L->keys.slot, e);
    if (!L->key || !L->key_n || !L->is_added || !L->keys.slot) return -1;
    L->keys.mask = cap - 1;
    L->keys.s = L->key;
    L->keys.n = L->key_n;
    char q[64];
    for (const cJSON *it = vocab->child; it; it = it->next) {
        long id = json_int(it, 0, V - 1);
        if (id < 0)
            return al_errf(e,
                           "model: vocab %s: the id must be an integer in 0..%d (ids are "
                           "0..n-1 for n strings)",
                           hf_quote(q, sizeof q, it->string), V - 1);
        size_t n = strlen(it->string);
        if (L->key[id])
            return al_errf(e, "model: vocab ids must be 0..%d, each once: %ld is given twice",
                           V - 1, id);
        if (n == 0 || n > MAX_PIECE)
            return al_errf(e, "model: vocab string of id %ld has %zu bytes (1..%d are allowed)", id,
                           n, MAX_PIECE);
        if (hf_utf8_check((const unsigned char *)it->string, n) != n)
            return al_errf(e, "model: vocab string of id %ld is not valid UTF-8", id);
        L->key[id] = (const unsigned char *)it->string;
        L->key_n[id] = n;
        int dup = strtab_add(&L->keys, (int)id);
        if (dup >= 0)
            return al_errf(e, "model: vocab string %s is given twice (ids %d and %ld)",
                           hf_quote(q, sizeof q, it->string), dup, id);
    }
    return 0;
}

/* The ids Hugging Face gives added tokens: a vocabulary string's own id,
 * else the next one after the vocabulary (AddedVocabulary::add_tokens).
 * The file's ids must be those. cs, cn: room for the contents, which
 * seen indexes. */
static int load_added_list(loader *L, const cJSON *list, int n, strtab *seen,
                           const unsigned char **cs, size_t *cn) {
    static const char *const keys[] = {"id",     "content",    "single_word", "lstrip",
                                       "rstrip", "normalized", "special",     NULL};
    al_tokhf *h = L->h;
    al_err *e = L->e;
    if (!h->added || !L->content || !cs || !cn || !seen->slot) return -1;
    int next = h->V, k = 0;
    char q[64];
    for (const cJSON *it = n ? list->child : NULL; it; it = it->next, k++) {
        char what[48];
        snprintf(what, sizeof what, "added_tokens[%d]: ", k);
        if (!cJSON_IsObject(it)) return al_errf(e, "%snot an object", what);
        if (check_keys(it, keys, what, e)) return -1;
        int flag[5];
        for (int f = 0; f < 5; f++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, keys[2 + f]);
            if (!cJSON_IsBool(v))
                return al_errf(e, "%s\"%s\" must be true or false", what, keys[2 + f]);
            flag[f] = cJSON_IsTrue(v);
        }
        if (flag[0]) return al_errf(e, "%ssingle_word true is not supported", what);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        size_t len = cJSON_IsString(c) ? strlen(c->valuestring) : 0;
        if (len == 0 || len > MAX_PIECE)
            return al_errf(e, "%s\"content\" must be a string of 1..%d bytes", what, MAX_PIECE);
        if (hf_utf8_check((const unsigned char *)c->valuestring, len) != len)
            return al_errf(e, "%s\"content\" is not valid UTF-8", what);
        cs[k] = (const unsigned char *)c->valuestring;
        cn[k] = len;
        int j = strtab_add(seen, k);
        if (j >= 0)
            return al_errf(e, "%s%s is also added_tokens[%d]", what,
                           hf_quote(q, sizeof q, c->valuestring), j);
        int want = strtab_find(&L->keys, (const unsigned char *)c->valuestring, len);
        if (want >= 0)
            L->is_added[want] = 1;
        else
            want = next++;
        long id = json_int(cJSON_GetObjectItemCaseSensitive(it, "id"), 0, MAX_VOCAB + MAX_ADDED);
        if (id != want)
            return al_errf(e, "%s%s has id %ld, but Hugging Face gives it %d (%s)", what,
                           hf_quote(q, sizeof q, c->valuestring), id, want,
                           want < h->V ? "its id in the vocab" : "the next id after the vocab");
        L->content[k] = c;
        added *a = &h->added[k];
        a->id = want, a->lstrip = flag[1], a->rstrip = flag[2], a->normalized = flag[3];
        a->special = flag[4];
        if (a->special && strcmp(c->valuestring, EOT_TEXT) == 0) h->eot = want;
        h->n_added = k + 1;
    }
    h->n_ids = next;
    return 0;
}

static int load_added(loader *L, const cJSON *list) {
    al_tokhf *h = L->h;
    al_err *e = L->e;
    if (list && !cJSON_IsNull(list) && !cJSON_IsArray(list))
        return al_errf(e, "\"added_tokens\" must be an array");
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    if (n > MAX_ADDED) return al_errf(e, "more than %d added_tokens", MAX_ADDED);
    h->added = al_calloc(n ? (size_t)n : 1, sizeof *h->added, e);
    L->content = al_calloc(n ? (size_t)n : 1, sizeof *L->content, e);
    const unsigned char **cs = al_calloc(n ? (size_t)n : 1, sizeof *cs, e);
    size_t *cn = al_calloc(n ? (size_t)n : 1, sizeof *cn, e), cap = table_cap((size_t)n);
    strtab seen = {al_calloc(cap, sizeof(uint32_t), e), cap - 1, cs, cn};
    int rc = load_added_list(L, list, n, &seen, cs, cn);
    free(cs);
    free(cn);
    free(seen.slot);
    return rc;
}

/* Every id's bytes: its string mapped back through the alphabet when it is
 * all in it (the ByteLevel decoder's rule), else its UTF-8 as it is. */
static int build_bytes(loader *L) {
    al_tokhf *h = L->h;
    al_err *e = L->e;
    size_t total = 0;
    int n_extra = h->n_ids - h->V;
    int *extra = al_malloc(n_extra ? (size_t)n_extra : 1, sizeof *extra, e);
    L->level = al_calloc((size_t)h->V, 1, e);
    if (!extra || !L->level) {
        free(extra);
        return -1;
    }
    for (int id = 0; id < h->V; id++) total += L->key_n[id];
    for (int k = 0; k < h->n_added; k++)
        if (h->added[k].id >= h->V) {
            extra[h->added[k].id - h->V] = k;
            total += strlen(L->content[k]->valuestring);
        }
    h->off = al_malloc((size_t)h->n_ids + 1, sizeof *h->off, e);
    h->bytes = al_malloc(total ? total : 1, 1, e);
    int rc = !h->off || !h->bytes ? -1 : 0;
    size_t o = 0;
    char q[64];
    for (int id = 0; id < h->n_ids && rc == 0; id++) {
        const unsigned char *s =
            id < h->V ? L->key[id]
                      : (const unsigned char *)L->content[extra[id - h->V]]->valuestring;
        size_t n = id < h->V ? L->key_n[id] : strlen((const char *)s);
        h->off[id] = o;
        long m = to_bytes(&L->ab, s, n, h->bytes + o);
        if (m < 0 && id < h->V && !L->is_added[id])
            rc = al_errf(e,
                         "model: vocab string %s (id %d) is not in the ByteLevel alphabet "
                         "(only added tokens may be)",
                         hf_quote(q, sizeof q, (const char *)s), id);
        if (m < 0) {
            memcpy(h->bytes + o, s, n);
            m = (long)n;
        } else if (id < h->V) {
            L->level[id] = 1;
        }
        o += (size_t)m;
    }
    free(extra);
    if (rc) return -1;
    h->off[h->n_ids] = o;
    /* a byte starts as the id of its one-character string */
    for (int b = 0; b < 256; b++) {
        unsigned char u[2];
        uint32_t c = L->ab.cp[b];
        size_t n = 1;
        if (c < 0x80)
            u[0] = (unsigned char)c;
        else
            u[0] = (unsigned char)(0xc0 | c >> 6), u[1] = (unsigned char)(0x80 | (c & 0x3f)), n = 2;
        h->byte_id[b] = strtab_find(&L->keys, u, n);
    }
    return 0;
}

/* Looks up a merge's part in the vocabulary. */
static int part_id(loader *L, const char *s, size_t n, int k) {
    int id = strtab_find(&L->keys, (const unsigned char *)s, n);
    if (id < 0) {
        char buf[MAX_PIECE * 2 + 1], q[64];
        snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), s);
        al_errf(L->e, "model: merges[%d]: %s is not in the vocab", k, hf_quote(q, sizeof q, buf));
    }
    return id;
}

static int load_merges(loader *L, const cJSON *merges) {
    al_tokhf *h = L->h;
    al_err *e = L->e;
    if (!cJSON_IsArray(merges)) return al_errf(e, "model: \"merges\" must be an array");
    int n = cJSON_GetArraySize(merges);
    if (n > MAX_MERGES) return al_errf(e, "model: more than %d merges", MAX_MERGES);
    size_t cap = table_cap((size_t)n);
    h->mmask = cap - 1;
    h->mkey = al_malloc(cap, sizeof *h->mkey, e);
    h->mrank = al_malloc(cap, sizeof *h->mrank, e);
    h->mnew = al_malloc(n ? (size_t)n : 1, sizeof *h->mnew, e);
    char *cat = al_malloc(2 * MAX_PIECE + 1, 1, e);
    if (!h->mkey || !h->mrank || !h->mnew || !cat) {
        free(cat);
        return -1;
    }
    memset(h->mkey, 0xff, cap * sizeof *h->mkey);
    int k = 0, rc = 0;
    for (const cJSON *it = merges->child; it && rc == 0; it = it->next, k++) {
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (cJSON_IsString(it)) { /* "a b": exactly one space */
            const char *sp = strchr(it->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                a = it->valuestring, na = (size_t)(sp - a), b = sp + 1, nb = strlen(b);
            }
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            a = it->child->valuestring, na = strlen(a);
            b = it->child->next->valuestring, nb = strlen(b);
        }
        if (!a) {
            rc = al_errf(e, "model: merges[%d] must be \"a b\" (one space) or [\"a\", \"b\"]", k);
            break;
        }
        int ia = part_id(L, a, na, k), ib = ia < 0 ? -1 : part_id(L, b, nb, k);
        if (ib < 0) {
            rc = -1;
            break;
        }
        memcpy(cat, a, na); /* both are vocabulary strings: <= MAX_PIECE each */
        memcpy(cat + na, b, nb);
        int iz = part_id(L, cat, na + nb, k);
        if (iz < 0) {
            rc = -1;
            break;
        }
        /* a repeated pair takes its last rank, as Hugging Face's map does */
        uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
        size_t i = mix64(key) & h->mmask;
        while (h->mkey[i] != EMPTY_KEY && h->mkey[i] != key) i = (i + 1) & h->mmask;
        h->mkey[i] = key;
        h->mrank[i] = k;
        h->mnew[k] = iz;
    }
    free(cat);
    return rc;
}

static int vocab_find(const al_tokhf *h, const unsigned char *s, size_t n) {
    for (size_t i = mix64(fnv1a(s, n)) & h->vmask;; i = (i + 1) & h->vmask) {
        uint32_t v = h->vslot[i];
        if (!v) return -1;
        size_t o = h->off[v - 1];
        if (h->off[v] - o == n && memcmp(h->bytes + o, s, n) == 0) return (int)v - 1;
    }
}

/* ignore_merges: a word that is a vocabulary string is that one token. */
static int build_vocab_index(loader *L) {
    al_tokhf *h = L->h;
    size_t cap = table_cap((size_t)h->V);
    h->vslot = al_calloc(cap, sizeof *h->vslot, L->e);
    if (!h->vslot) return -1;
    h->vmask = cap - 1;
    for (int id = 0; id < h->V; id++) {
        if (!L->level[id]) continue; /* never a word: its bytes are not its string */
        const unsigned char *s = h->bytes + h->off[id];
        size_t n = h->off[id + 1] - h->off[id], i = mix64(fnv1a(s, n)) & h->vmask;
        while (h->vslot[i]) i = (i + 1) & h->vmask; /* distinct strings, distinct bytes */
        h->vslot[i] = (uint32_t)id + 1;
    }
    return 0;
}

static int32_t trie_node(match_set *m, unsigned char byte, al_err *e) {
    if (m->n == m->cap) {
        int32_t cap = m->cap ? 2 * m->cap : 64;
        tnode *p = realloc(m->node, (size_t)cap * sizeof *p);
        if (!p) return al_errf(e, "out of memory");
        m->node = p;
        m->cap = cap;
    }
    m->node[m->n] = (tnode){-1, -1, -1, byte};
    return m->n++;
}

static int trie_add(match_set *m, const unsigned char *p, size_t n, int tok, al_err *e) {
    int32_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = i == 0 ? m->first[p[0]] : m->node[at].child;
        while (c >= 0 && m->node[c].byte != p[i]) c = m->node[c].sibling;
        if (c < 0) {
            if ((c = trie_node(m, p[i], e)) < 0) return -1;
            if (i == 0)
                m->first[p[0]] = c;
            else
                m->node[c].sibling = m->node[at].child, m->node[at].child = c;
        }
        at = c;
    }
    if (m->node[at].tok < 0) m->node[at].tok = tok; /* the same pattern twice: the first */
    return 0;
}

/* Each added token's pattern (its content, or the content normalized when
 * it is normalized), into the trie of its kind: special tokens first, then
 * the others, in file order, as Hugging Face orders its patterns. */
static int build_sets(loader *L) {
    al_tokhf *h = L->h;
    size_t total = 0;
    for (int s = 0; s < 2; s++) {
        for (int b = 0; b < 256; b++) h->sets[s].first[b] = -1;
        if (trie_node(&h->sets[s], 0, L->e) < 0) return -1;
    }
    for (int k = 0; k < h->n_added; k++) {
        added *a = &h->added[k];
        const unsigned char *c = (const unsigned char *)L->content[k]->valuestring;
        size_t n = strlen((const char *)c);
        unsigned char *nfc = NULL;
        size_t nn = 0;
        if (a->normalized && hf_normalize(h->pre, c, n, &nfc, &nn, L->e)) return -1;
        if (!nfc) {
            nfc = al_malloc(n, 1, L->e);
            if (!nfc) return -1;
            memcpy(nfc, c, n);
            nn = n;
        }
        a->pat = nfc;
        a->n = nn;
        if ((total += nn) > MAX_ADDED_BYTES)
            return al_errf(L->e, "added_tokens: more than %d bytes in all", MAX_ADDED_BYTES);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < h->n_added; k++) {
            const added *a = &h->added[k];
            if (a->special == !pass && trie_add(&h->sets[a->normalized], a->pat, a->n, k, L->e))
                return -1;
        }
    return 0;
}

static int load(loader *L, const cJSON *root) {
    static const char *const keys[] = {"version",        "truncation",
                                       "padding",        "added_tokens",
                                       "normalizer",     "pre_tokenizer",
                                       "post_processor", "decoder",
                                       "model",          NULL};
    al_tokhf *h = L->h;
    al_err *e = L->e;
    if (check_keys(root, keys, "", e)) return -1;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (v && !(cJSON_IsString(v) && strcmp(v->valuestring, "1.0") == 0))
        return al_errf(e, "\"version\" must be \"1.0\"");
    static const char *const off[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++)
        if (!is_null_or(cJSON_GetObjectItemCaseSensitive(root, off[i]), NULL))
            return al_errf(e, "%s must be null (it changes what encode returns)", off[i]);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(m)) return al_errf(e, "\"model\" must be an object");
    if (check_model(h, m, e) || check_post(root, e) ||
        hf_pre_parse(cJSON_GetObjectItemCaseSensitive(root, "normalizer"),
                     cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &h->pre, e) ||
        load_vocab(L, cJSON_GetObjectItemCaseSensitive(m, "vocab")) ||
        load_added(L, cJSON_GetObjectItemCaseSensitive(root, "added_tokens")) || build_bytes(L) ||
        load_merges(L, cJSON_GetObjectItemCaseSensitive(m, "merges")) ||
        (h->ignore_merges && build_vocab_index(L)) || build_sets(L))
        return -1;
    return 0;
}

int al_tokhf_load(const cJSON *root, unsigned char *file, size_t n, const char *path,
                  al_tokhf **out, al_err *e) {
    *out = NULL;
    al_tokhf *h = al_calloc(1, sizeof *h, e);
    if (!h) {
        free(file);
        return al_err_prefix(e, "cannot read tokenizer %s", path);
    }
    h->file = file;
    h->file_n = n;
    h->eot = -1;
    atomic_flag_clear(&h->cache_busy);
    loader L = {.h = h, .e = e};
    alphabet_init(&L.ab);
    int rc = load(&L, root);
    free(L.key);
    free(L.key_n);
    free(L.keys.slot);
    free(L.is_added);
    free(L.level);
    free(L.content);
    if (rc) {
        al_tokhf_free(h);
        return al_err_prefix(e, "cannot read tokenizer %s", path);
    }
    *out = h;
    return 0;
}

int al_tokhf_vocab_size(const al_tokhf *h) { return h->n_ids; }
int al_tokhf_eot(const al_tokhf *h) { return h->eot; }

const unsigned char *al_tokhf_bytes(const al_tokhf *h, int id, size_t *len) {
    if (id < 0 || id >= h->n_ids) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = h->off[id + 1] - h->off[id];
    return h->bytes + h->off[id];
}

int al_tokhf_save(const al_tokhf *h, const char *path, al_err *e) {
    return al_write_file_atomic(path, h->file, h->file_n, e);
}

/* ---------------------------------------------------------- encoding */

typedef struct enc {
    const al_tokhf *h;
    int **ids;
    size_t *cap, n;
    int fixed, allow_special;
    cache_slot *cache;
    hf_scratch *sc;
} enc;

static int emit(enc *x, int id, al_err *e) {
    if (x->n == *x->cap) {
        if (x->fixed)
            return al_errf(e, "the text encodes to more ids than the %zu it has room for", *x->cap);
        size_t cap = *x->cap ? 2 * *x->cap : 256;
        int *p = realloc(*x->ids, cap * sizeof *p);
        if (!p) return al_errf(e, "out of memory");
        *x->ids = p;
        *x->cap = cap;
    }
    (*x->ids)[x->n++] = id;
    return 0;
}

static int rank_of(const al_tokhf *h, int32_t a, int32_t b) {
    uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = mix64(k) & h->mmask;; i = (i + 1) & h->mmask) {
        if (h->mkey[i] == k) return h->mrank[i];
        if (h->mkey[i] == EMPTY_KEY) return -1;
    }
}

typedef struct word {
    int32_t *sym, *prv, *nxt;
    uint64_t *q;
    size_t qn;
} word;

static void push_pair(const al_tokhf *h, word *w, int32_t pos) {
    int32_t nx = w->nxt[pos];
    if (nx < 0) return;
    int r = rank_of(h, w->sym[pos], w->sym[nx]);
    if (r >= 0) bpe_heap_push(w->q, &w->qn, (uint64_t)r << 32 | (uint32_t)pos);
}

/* Word::merge_all: the lowest rank first, then the leftmost; an entry
 * whose pair has changed since it was queued is stale. */
static size_t merge_all(const al_tokhf *h, word *w, size_t m) {
    w->qn = 0;
    for (size_t i = 0; i < m; i++) {
        w->prv[i] = (int32_t)i - 1;
        w->nxt[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < m; i++) push_pair(h, w, (int32_t)i);
    while (w->qn > 0) {
        uint64_t top = bpe_heap_pop(w->q, &w->qn);
        int32_t pos = (int32_t)(uint32_t)top, r = (int32_t)(top >> 32), nx = w->nxt[pos];
        if (w->sym[pos] < 0 || nx < 0 || rank_of(h, w->sym[pos], w->sym[nx]) != r) continue;
        w->sym[pos] = h->mnew[r];
        w->sym[nx] = -1;
        w->nxt[pos] = w->nxt[nx];
        if (w->nxt[nx] >= 0) w->prv[w->nxt[nx]] = pos;
        if (w->prv[pos] >= 0) push_pair(h, w, w->prv[pos]);
        push_pair(h, w, pos);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = w->nxt[i]) w->sym[k++] = w->sym[i];
    return k;
}

static int bpe(void *ctx, const unsigned char *p, size_t len, al_err *e) {
    enc *x = ctx;
    const al_tokhf *h = x->h;
    if (h->ignore_merges) {
        int id = vocab_find(h, p, len);
        if (id >= 0) return emit(x, id, e);
    }
    cache_slot *slot = NULL;
    uint32_t hash = 0;
    if (x->cache && len <= CACHE_MAXLEN) {
        hash = (uint32_t)fnv1a(p, len);
        slot = &x->cache[hash & (CACHE_SLOTS - 1)];
        if (slot->len == len && slot->hash == hash && memcmp(slot->key, p, len) == 0) {
            for (int i = 0; i < slot->nids; i++)
                if (emit(x, slot->ids[i], e)) return -1;
            return 0;
        }
    }
    enum { SMALL = 64 };
    int32_t s_sym[SMALL], s_prv[SMALL], s_nxt[SMALL];
    uint64_t s_q[2 * SMALL]; /* each merge pops one entry and pushes <= 2 */
    word w = {s_sym, s_prv, s_nxt, s_q, 0};
    void *big = NULL;
    if (len > SMALL) {
        size_t bytes;
        if (al_mul_overflow(len, 3 * sizeof(int32_t) + 2 * sizeof(uint64_t), &bytes))
            return al_errf(e, "word too long");
        big = al_malloc(bytes, 1, e);
        if (!big) return -1;
        w.q = big;
        w.sym = (int32_t *)(w.q + 2 * len);
        w.prv = w.sym + len;
        w.nxt = w.prv + len;
    }
    size_t m = 0;
    for (size_t i = 0; i < len; i++) /* a byte the vocabulary lacks is dropped, as there */
        if (h->byte_id[p[i]] >= 0) w.sym[m++] = h->byte_id[p[i]];
    if (m > 0) m = merge_all(h, &w, m);
    int rc = 0;
    for (size_t i = 0; i < m && rc == 0; i++) rc = emit(x, w.sym[i], e);
    if (slot && rc == 0) {
        slot->hash = hash;
        slot->len = (uint8_t)len;
        slot->nids = (uint8_t)m;
        memcpy(slot->key, p, len);
        for (size_t i = 0; i < m; i++) slot->ids[i] = w.sym[i];
    }
    free(big);
    return rc;
}

/* Rust's char::is_whitespace (White_Space), for lstrip and rstrip. */
static int is_ws(const unsigned char *s, size_t l) {
    uint32_t c = s[0];
    if (l == 2) c = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
    if (l == 3) c = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    if (l == 4) return 0;
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
           c == 0x205f || c == 0x3000;
}

typedef struct seg {
    size_t a, b;
    int id; /* -1: text */
} seg;

typedef struct segs {
    seg *p;
    size_t n, cap;
} segs;

static int seg_push(segs *v, size_t a, size_t b, int id, al_err *e) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        seg *p = realloc(v->p, cap * sizeof *p);
        if (!p) return al_errf(e, "out of memory");
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = (seg){a, b, id};
    return 0;
}

/* AddedVocabulary::find_matches: the leftmost-longest matches, in turn;
 * lstrip and rstrip take in the white space beside a match. */
static int find_added(const enc *x, const match_set *m, const unsigned char *s, size_t n, segs *out,
                      al_err *e) {
    const al_tokhf *h = x->h;
    out->n = 0;
    size_t start_offset = 0;
    if (m->n > 1)
        for (size_t i = 0; i < n;) {
            int hit = -1;
            for (; i < n && hit < 0; i++) {
                int32_t c = m->first[s[i]];
                for (size_t j = i + 1; c >= 0; j++) { /* the last token passed is the longest */
                    if (m->node[c].tok >= 0) hit = m->node[c].tok;
                    if (j == n) break;
                    for (c = m->node[c].child; c >= 0 && m->node[c].byte != s[j];)
                        c = m->node[c].sibling;
                }
            }
            if (hit < 0) break;
            const added *a = &h->added[hit];
            size_t start = --i, stop = start + a->n;
            i = stop;
            if (a->special && !x->allow_special) continue;
            if (a->lstrip) {
                size_t ns = start;
                while (ns > 0) {
                    size_t c = ns - 1;
                    while (c > 0 && (s[c] & 0xc0) == 0x80) c--;
                    if (!is_ws(s + c, ns - c)) break;
                    ns = c;
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip)
                for (size_t l; stop < n && is_ws(s + stop, l = hf_utf8_len(s + stop, n - stop));)
                    stop += l;
            if (start_offset < start && seg_push(out, start_offset, start, -1, e)) return -1;
            if (seg_push(out, start, stop, a->id, e)) return -1;
            start_offset = stop;
        }
    if (start_offset != n && seg_push(out, start_offset, n, -1, e)) return -1;
    return 0;
}

/* Normalize a piece of text, match the normalized added tokens in it and
 * pre-tokenize and merge the rest. */
static int encode_piece(enc *x, const unsigned char *s, size_t n, segs *v, al_err *e) {
    unsigned char *norm = NULL;
    size_t nn = 0;
    if (hf_normalize(x->h->pre, s, n, &norm, &nn, e)) return -1;
    if (norm) s = norm, n = nn;
    int rc = find_added(x, &x->h->sets[1], s, n, v, e);
    for (size_t i = 0; i < v->n && rc == 0; i++) {
        seg g = v->p[i];
        if (g.id >= 0)
            rc = emit(x, g.id, e);
        else if (g.b > g.a)
            rc = hf_pretokenize(x->h->pre, x->sc, s + g.a, g.b - g.a, bpe, x, e);
    }
    free(norm);
    return rc;
}

int al_tokhf_encode(const al_tokhf *h, const unsigned char *s, size_t n, int allow_special,
                    int **ids, size_t *cap, int fixed, size_t *n_ids, al_err *e) {
    *n_ids = 0;
    size_t bad = hf_utf8_check(s, n);
    if (bad != n)
        return al_errf(e,
                       "the text is not valid UTF-8 (byte %zu): a Hugging Face tokenizer "
                       "encodes Unicode text",
                       bad);
    enc x = {h, ids, cap, 0, fixed, allow_special, NULL, hf_scratch_new(e)};
    if (!x.sc) return -1;
    al_tokhf *mh = (al_tokhf *)h; /* the cache is not part of the value */
    int locked = !atomic_flag_test_and_set(&mh->cache_busy);
    if (locked) { /* one caller at a time uses the cache; another goes without */
        if (!mh->cache) mh->cache = calloc(CACHE_SLOTS, sizeof(cache_slot));
        x.cache = mh->cache;
    }
    segs outer = {0}, inner = {0};
    int rc = find_added(&x, &h->sets[0], s, n, &outer, e);
    for (size_t i = 0; i < outer.n && rc == 0; i++) {
        seg g = outer.p[i];
        if (g.id >= 0)
            rc = emit(&x, g.id, e);
        else if (g.b > g.a)
            rc = encode_piece(&x, s + g.a, g.b - g.a, &inner, e);
    }
    if (locked) atomic_flag_clear(&mh->cache_busy);
    free(outer.p);
    free(inner.p);
    hf_scratch_free(x.sc);
    *n_ids = x.n;
    return rc;
}
