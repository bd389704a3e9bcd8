/* cmd_run.c -- `attnlab run`: what the model predicts, token by token.
 *
 * Prints the table of seed 003: for every prompt token, the probability
 * the model gave it from its prefix, and the top-5 candidates for the
 * next token; optionally continues the prompt by seeded sampling. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attnlab/ablate.h"
#include "attnlab/args.h"
#include "attnlab/checkpoint.h"
#include "attnlab/json.h"
#include "attnlab/circuit_run.h"
#include "attnlab/data.h"
#include "attnlab/intervene.h"
#include "attnlab/membudget.h"
#include "attnlab/model.h"
#include "attnlab/tokenizer.h"
#include "attnlab/stats.h"
#include "attnlab/act_cache.h"
#include "attnlab/data.h"

static const char *o_model = NULL, *o_prompt = NULL, *o_prompt_file = NULL, *o_track = NULL,
                  *o_mask = NULL, *o_circuit = NULL, *o_fill = "corrupted", *o_corrupted = NULL,
                  *o_mean_data = NULL, *o_save_cache = NULL, *o_hooks = NULL, *o_data = NULL,
                  *o_intervene = NULL;
static int o_windows = 8;
static double o_cache_mb = 2000;
static int o_generate = 0, o_top_k = 0, o_json = 0, o_no_bos = 0, o_threads = 0, o_top = 5;
static double o_temperature = 1.0;
static uint64_t o_seed = 1;

static al_flag flags[] =
    {{"model", AL_STR, &o_model, "DIR", "model directory (from attnlab train)", 1, 0},
     {"prompt", AL_STR, &o_prompt, "TEXT", "text to run the model on", 0, 0},
     {"prompt-file", AL_STR, &o_prompt_file, "FILE", "read the prompt from a file", 0, 0},
     {"no-bos", AL_BOOL, &o_no_bos, NULL, "do not prepend <|endoftext|> as beginning of sequence",
      0, 0},
     {"top", AL_INT, &o_top, "N", "candidates shown per position", 0, 0},
     {"generate", AL_INT, &o_generate, "N", "then sample N more tokens", 0, 0},
     {"temperature", AL_FLOAT, &o_temperature, "X", "sampling temperature (> 0)", 0, 0},
     {"top-k", AL_INT, &o_top_k, "N", "sample only from the k most likely tokens (0 = all)", 0, 0},
     {"seed", AL_U64, &o_seed, "N", "sampling seed", 0, 0},
     {"track", AL_STR, &o_track, "TEXT",
      "instead of the full table, show the tokens of every occurrence of TEXT (e.g. a name)", 0, 0},
     {"json", AL_BOOL, &o_json, NULL, "print JSON instead of a table", 0, 0},
     {"mask", AL_STR, &o_mask, "FILE", "head mask (JSON, from attnlab prune): these heads are off",
      0, 0},
     {"circuit", AL_STR, &o_circuit, "FILE",
      "run the model with only this circuit's edges (a file from attnlab discover)", 0, 0},
     {"fill", AL_STR, &o_fill, "F",
      "what the circuit's removed edges carry: corrupted (needs --corrupted) or mean (needs "
      "--mean-data)",
      0, 0},
     {"corrupted", AL_STR, &o_corrupted, "TEXT",
      "--fill corrupted: the prompt's corrupted counterpart (the same number of tokens)", 0, 0},
     {"mean-data", AL_STR, &o_mean_data, "VAL.bin",
      "--fill mean: token file whose windows give the senders' mean values", 0, 0},
     {"intervene", AL_STR, &o_intervene, "FILE",
      "apply an intervention file's operations (zero, scale, add, set at hook points; "
      "docs/formats.md) in every forward",
      0, 0},
     {"threads", AL_INT, &o_threads, "N", "threads (0 = default)", 0, 0},
     {"save-cache", AL_STR, &o_save_cache, "FILE",
      "write the activations (TransformerLens hook names and shapes) to FILE.safetensors", 0, 0},
     {"hooks", AL_STR, &o_hooks, "LIST",
      "--save-cache: which, comma-separated: embed, pos_embed, resid_pre, q, k, v, attn_scores, "
      "pattern, z, result, attn_out, resid_post, logits; with LayerNorm ln1_scale, "
      "ln1_normalized, ln_final_scale, ln_final_normalized (default: all)",
      0, 0},
     {"data", AL_STR, &o_data, "X.bin",
      "--save-cache: windows of this token file instead of a prompt", 0, 0},
     {"windows", AL_INT, &o_windows, "N",
      "--data: how many windows (n_ctx tokens each, spread evenly)", 0, 0},
     {"cache-max-mb", AL_FLOAT, &o_cache_mb, "MB", "--save-cache: refuse a cache larger than this",
      0, 0},
     AL_FLAGS_END};

static int run_run(int argc, char **argv);
al_command al_cmd_run = {
    "run",
    "show the model's per-token probabilities on a prompt, or sample from it",
    "--model DIR --prompt TEXT [--generate N] [--json]",
    "For each prompt token: its position, the token (a leading space shown as ␣),\n"
    "the probability the model gave it given the tokens before it, and the top\n"
    "next-token candidates. The prompt is prefixed with <|endoftext|> (as the\n"
    "training documents are) unless --no-bos. A prompt longer than n_ctx is cut\n"
    "from the left, with a warning; of a longer --prompt-file only the last\n"
    "4096 x n_ctx bytes (at least 1 MiB) are read, starting at a space or newline.\n"
    "With --circuit FILE the model runs with only that circuit's edges; the\n"
    "removed edges carry their senders' values on --corrupted TEXT (--fill\n"
    "corrupted) or their mean values over 32 windows of --mean-data (--fill mean).",
    flags,
    run_run,
};

static int sample(const float *row, int V, al_rng *r) {
    int k = o_top_k > 0 && o_top_k < V ? o_top_k : V;
    int *idx = malloc(sizeof(int) * (size_t)k);
    double *w = malloc(sizeof(double) * (size_t)k);
    int pick = 0;
    if (!idx || !w) goto out;
    if (k < V)
        al_top_k(row, V, k, idx);
    else
        for (int i = 0; i < V; i++) idx[i] = i;
    double tot = 0;
    for (int i = 0; i < k; i++) {
        double p = row[idx[i]];
        w[i] = p > 0 ? exp(log(p) / o_temperature) : 0;
        tot += w[i];
    }
    double u = al_rng_uniform(r) * tot;
    pick = idx[k - 1];
    for (int i = 0; i < k; i++) {
        if (u < w[i]) {
            pick = idx[i];
            break;
        }
        u -= w[i];
    }
out:
    free(idx);
    free(w);
    return pick;
}

/* Only the last n_ctx tokens of a prompt are used, so only the tail of a
 * long prompt file is read and tokenized: at most PROMPT_TAIL_PER_CTX
 * bytes per position (1 MiB at least), which is far more than n_ctx
 * tokens of any tokenizer we train. Time and memory then stay bounded
 * whatever the file's size (a 10 MB one-word file would otherwise cost
 * ~30 bytes of BPE scratch per byte). The cut is moved forward to the
 * next space or newline, so no word is split unless the tail has none. */
#define PROMPT_TAIL_PER_CTX 4096
#define PROMPT_TAIL_MIN (1u << 20)

static int read_file_tail(const char *path, size_t cap, unsigned char **text, size_t *n,
                          size_t *total, al_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) return al_errf(e, "cannot read prompt file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return al_read_file(path, text, n, cap, e); /* a pipe: read it whole, up to cap */
    }
    *total = (size_t)st.st_size;
    size_t want = *total > cap ? cap : *total;
    unsigned char *b = al_malloc(want + 1, 1, e);
    if (!b || fseeko(f, (off_t)(*total - want), SEEK_SET) != 0 || fread(b, 1, want, f) != want) {
        fclose(f);
        free(b);
        return b ? al_errf(e, "cannot read prompt file %s: short read", path) : -1;
    }
    fclose(f);
    size_t start = 0;
    if (want < *total) /* start at a word: the next space or newline */
        while (start < want / 2 && b[start] != ' ' && b[start] != '\n') start++;
    if (start == want / 2) start = 0;
    memmove(b, b + start, want - start);
    *n = want - start;
    b[*n] = 0;
    *text = b;
    return 0;
}

static int read_prompt(int n_ctx, unsigned char **text, size_t *n, al_err *e) {
    if (o_prompt_file) {
        size_t cap = (size_t)n_ctx * PROMPT_TAIL_PER_CTX, total = 0;
        if (cap < PROMPT_TAIL_MIN) cap = PROMPT_TAIL_MIN;
        if (read_file_tail(o_prompt_file, cap, text, n, &total, e) != 0) return -1;
        if (*n < total)
            fprintf(stderr,
                    "attnlab: warning: prompt file has %zu bytes: tokenizing only its "
                    "last %zu (n_ctx is %d tokens)\n",
                    total, *n, n_ctx);
        return 0;
    }
    *n = strlen(o_prompt);
    *text = (unsigned char *)strdup(o_prompt);
    return *text ? 0 : al_errf(e, "out of memory");
}

/* printf pads by bytes; "␣" is 3 bytes but 1 column, so pad by
 * code points (UTF-8 continuation bytes take no column). */
static void print_padded(const char *s, int width) {
    int cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) cols += (*p & 0xC0) != 0x80;
    fputs(s, stdout);
    for (; cols < width; cols++) fputc(' ', stdout);
}

static void print_table(const al_model *m, const al_tokenizer *tok, const int *ids, int T,
                        const float *p_tok) {
    int V = m->cfg.d_vocab, k = o_top < V ? o_top : V;
    int idx[64];
    printf("%4s  %-16s %9s   top-%d next-token candidates\n", "pos", "token", "p(token)", k);
    for (int t = 0; t < T; t++) {
        char s[128];
        al_tok_display(tok, ids[t], s, sizeof s);
        printf("%4d  ", t);
        print_padded(s, 16);
        if (p_tok[t] < 0)
            printf(" %9s  ", "-");
        else
            printf(" %9.4f  ", p_tok[t]);
        const float *row = m->probs + (size_t)t * V;
        al_top_k(row, V, k, idx);
        for (int i = 0; i < k; i++) {
            al_tok_display(tok, idx[i], s, sizeof s);
            printf(" %s %.4f", s, row[idx[i]]);
        }
        printf("\n");
    }
}

static cJSON *json_table(const al_model *m, const al_tokenizer *tok, const int *ids, int T,
                         const float *p_tok) {
    int V = m->cfg.d_vocab, k = o_top < V ? o_top : V;
    int idx[64];
    cJSON *arr = cJSON_CreateArray();
    for (int t = 0; t < T; t++) {
        char s[128];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "pos", t);
        cJSON_AddNumberToObject(o, "id", ids[t]);
        al_tok_display(tok, ids[t], s, sizeof s);
        cJSON_AddStringToObject(o, "token", s);
        if (p_tok[t] >= 0)
            cJSON_AddNumberToObject(o, "p", p_tok[t]);
        else
            cJSON_AddNullToObject(o, "p");
        cJSON *top = cJSON_AddArrayToObject(o, "top");
        al_top_k(m->probs + (size_t)t * V, V, k, idx);
        for (int i = 0; i < k; i++) {
            cJSON *c = cJSON_CreateObject();
            al_tok_display(tok, idx[i], s, sizeof s);
            cJSON_AddNumberToObject(c, "id", idx[i]);
            cJSON_AddStringToObject(c, "token", s);
            cJSON_AddNumberToObject(c, "p", m->probs[(size_t)t * V + idx[i]]);
            cJSON_AddItemToArray(top, c);
        }
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

/* The seed-003 view: for each occurrence of o_track in the prompt, the
 * pieces it was cut into and the probability of each given its prefix
 * (a piece is listed if its bytes overlap the occurrence). */
static int print_track(const al_tokenizer *tok, const int *ids, int T, const float *p_tok,
                       cJSON *root, al_err *e) {
    size_t *start = malloc(sizeof(size_t) * ((size_t)T + 1)), n = 0;
    if (!start) return al_errf(e, "out of memory");
    for (int t = 0; t < T; t++) {
        size_t len = 0;
        start[t] = n;
        if (ids[t] != al_tok_eot(tok)) al_tok_bytes(tok, ids[t], &len);
        n += len;
    }
    start[T] = n;
    unsigned char *text = malloc(n + 1);
    if (!text) {
        free(start);
        return al_errf(e, "out of memory");
    }
    for (int t = 0; t < T; t++) {
        size_t len = 0;
        const unsigned char *b = ids[t] != al_tok_eot(tok) ? al_tok_bytes(tok, ids[t], &len) : NULL;
        if (len) memcpy(text + start[t], b, len);
    }
    size_t L = strlen(o_track);
    int occ = 0;
    cJSON *arr = root ? cJSON_AddArrayToObject(root, "track") : NULL;
    for (size_t i = 0; L && i + L <= n; i++) {
        if (memcmp(text + i, o_track, L) != 0) continue;
        occ++;
        cJSON *pieces = arr ? cJSON_CreateArray() : NULL;
        if (!root) printf("occurrence %d of \"%s\":", occ, o_track);
        for (int t = 0; t < T; t++) {
            if (start[t + 1] <= i || start[t] >= i + L || start[t] == start[t + 1]) continue;
            char s[128];
            al_tok_display(tok, ids[t], s, sizeof s);
            if (pieces) {
                cJSON *c = cJSON_CreateObject();
                cJSON_AddNumberToObject(c, "pos", t);
                cJSON_AddStringToObject(c, "token", s);
                cJSON_AddNumberToObject(c, "p", p_tok[t] < 0 ? 0 : p_tok[t]);
                cJSON_AddItemToArray(pieces, c);
            } else {
                printf("  %s %.4f", s, p_tok[t] < 0 ? 0.0 : p_tok[t]);
            }
        }
        if (pieces)
            cJSON_AddItemToArray(arr, pieces);
        else
            printf("\n");
        i += L - 1;
    }
    if (!occ && !root) printf("\"%s\" does not occur in the prompt\n", o_track);
    free(text);
    free(start);
    return 0;
}

/* Encode the prompt (with BOS), cutting from the left to fit n_ctx. */
/* ids of text as the model reads a prompt: BOS first unless --no-bos,
 * the last n_ctx tokens kept (with a warning naming what). */
static int text_ids(const al_tokenizer *tok, const unsigned char *text, size_t n, int n_ctx,
                    const char *what, int **ids, int *T, al_err *e) {
    size_t nid;
    int *raw;
    int bos = !o_no_bos;
    if (bos && al_tok_eot(tok) < 0)
        return al_errf(e, "the tokenizer has no <|endoftext|> to begin the %s with: use --no-bos",
                       what);
    if (al_tok_encode(tok, text, n, 1, &raw, &nid, e) != 0) return -1;
    size_t total = nid + (size_t)bos;
    if (total == 0) {
        free(raw);
        return al_errf(e, "the %s is empty", what);
    }
    size_t keep = total > (size_t)n_ctx ? (size_t)n_ctx : total;
    if (keep < total)
        fprintf(stderr, "attnlab: warning: %s has %zu tokens, n_ctx is %d: keeping the last %zu\n",
                what, total, n_ctx, keep);
    int *out = malloc(sizeof(int) * keep);
    if (!out) {
        free(raw);
        return al_errf(e, "out of memory");
    }
    for (size_t i = 0; i < keep; i++) {
        size_t src = total - keep + i; /* index into [bos] + raw */
        out[i] = bos ? (src == 0 ? al_tok_eot(tok) : raw[src - 1]) : raw[src];
    }
    free(raw);
    *ids = out;
    *T = (int)keep;
    return 0;
}

static int prompt_ids(const al_tokenizer *tok, int n_ctx, int **ids, int *T, al_err *e) {
    unsigned char *text;
    size_t n;
    if (read_prompt(n_ctx, &text, &n, e) != 0) return -1;
    int rc = text_ids(tok, text, n, n_ctx, "prompt", ids, T, e);
    free(text);
    return rc;
}

/* --circuit: load it into cr and point m at it, with the fill the flags
 * name; *cids gets the corrupted prompt's ids (the caller frees). */
static int setup_circuit(al_model *m, const al_tokenizer *tok, int T, al_circuit_run *cr,
                         int **cids, al_err *e) {
    int mean = strcmp(o_fill, "mean") == 0;
    if (mean ? !o_mean_data || o_corrupted : !o_corrupted || o_mean_data)
        return al_errf(e, "--fill %s needs %s (and not %s)", o_fill,
                       mean ? "--mean-data VAL.bin" : "--corrupted TEXT",
                       mean ? "--corrupted" : "--mean-data");
    if (!mean && o_generate > 0)
        return al_errf(e, "--generate with --fill corrupted: the corrupted text has no "
                          "continuation to fill the new positions (use --fill mean)");
    al_tokens md = {0};
    int mT = 0;
    if (mean) {
        if (al_tokens_load(o_mean_data, &md, e)) return -1;
        if (md.n < 2 || md.max_id >= m->cfg.d_vocab) {
            al_errf(e, "--mean-data %s: %s", o_mean_data,
                    md.n < 2 ? "fewer than 2 tokens" : "token ids beyond the model's vocabulary");
            al_tokens_free(&md);
            return -1;
        }
        mT = md.n - 1 < (size_t)m->cfg.n_ctx ? (int)(md.n - 1) : m->cfg.n_ctx;
    }
    int rc = al_circuit_run_open(cr, m, o_circuit, o_fill, mean ? &md : NULL, mT, 4, 8, e);
    al_tokens_free(&md);
    if (rc) return -1;
    if (!mean) {
        int cT = 0;
        if (text_ids(tok, (const unsigned char *)o_corrupted, strlen(o_corrupted), m->cfg.n_ctx,
                     "corrupted text", cids, &cT, e))
            goto fail;
        if (cT != T) {
            al_errf(e, "--corrupted has %d tokens, the prompt %d: they must be the same length", cT,
                    T);
            goto fail;
        }
        cr->spec.fill = AL_FILL_CORRUPTED;
        cr->spec.corr = *cids;
    }
    if (al_circuit_run_attach(cr, m, e)) goto fail;
    return 0;
fail:
    al_circuit_run_close(cr);
    return -1;
}

/* Generated bytes as a JSON-safe string: valid UTF-8 kept, invalid bytes
 * and NUL written as the text \xNN (as token strings are shown), since
 * JSON must be UTF-8 and cJSON copies bytes as they are. */
static char *utf8_safe(const unsigned char *s, size_t n) {
    char *out = malloc(4 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = c >= 0x01 && c < 0x80    ? 1
                     : c >= 0xc2 && c <= 0xdf ? 2
                     : c >= 0xe0 && c <= 0xef ? 3
                     : c >= 0xf0 && c <= 0xf4 ? 4
                                              : 0;
        if (len > 1) { /* continuation bytes, no overlongs, surrogates or > U+10FFFF */
            unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
            unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
            if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) len = 0;
            for (size_t k = 2; len && k < len; k++)
                if (s[i + k] < 0x80 || s[i + k] > 0xbf) len = 0;
        }
        if (len) {
            memcpy(o, s + i, len);
            o += len;
            i += len;
        } else {
            o += sprintf(o, "\\x%02x", c);
            i++;
        }
    }
    *o = 0;
    return out;
}

static int generate(al_model *m, const al_tokenizer *tok, int *ids, int T, cJSON *root, al_err *e) {
    int n_ctx = m->cfg.n_ctx, cap = T + o_generate;
    int *all = malloc(sizeof(int) * (size_t)cap);
    if (!all) return al_errf(e, "out of memory");
    memcpy(all, ids, sizeof(int) * (size_t)T);
    al_rng r;
    al_rng_seed(&r, o_seed);
    int n = T;
    for (int g = 0; g < o_generate; g++) {
        int w = n < n_ctx ? n : n_ctx; /* sliding window */
        if (al_model_forward(m, all + n - w, NULL, 1, w, e) != 0) {
            free(all);
            return -1;
        }
        all[n++] = sample(m->probs + (size_t)(w - 1) * m->cfg.d_vocab, m->cfg.d_vocab, &r);
    }
    unsigned char *txt;
    size_t len;
    if (al_tok_decode(tok, all + T, (size_t)o_generate, &txt, &len, e) != 0) {
        free(all);
        return -1;
    }
    if (root) {
        char *safe = utf8_safe(txt, len);
        cJSON_AddStringToObject(root, "generated", safe ? safe : "");
        free(safe);
        cJSON_AddItemToObject(root, "generated_ids", cJSON_CreateIntArray(all + T, o_generate));
    } else
        printf("\ngenerated (%d tokens, seed %llu, temperature %g, top-k %d):\n%s\n", o_generate,
               (unsigned long long)o_seed, o_temperature, o_top_k, txt);
    free(txt);
    free(all);
    return 0;
}

static int apply_mask(al_model *m, al_err *e) {
    unsigned char *off = al_malloc((size_t)m->cfg.n_layers * m->cfg.n_heads, 1, e);
    if (!off || al_mask_load(o_mask, &m->cfg, off, e) != 0) {
        free(off);
        return -1;
    }
    al_mask_apply(m, off);
    free(off);
    return 0;
}

/* --save-cache: the activations of tokens (B, T) to o_save_cache, and a
 * line saying what was written (on stderr with --json, whose stdout is
 * the document). */
static int save_cache(al_model *m, const int *ids, int B, int T, al_err *e) {
    char sha[65], p[AL_PATH_MAX + 32];
    if (al_path_join(p, sizeof p, o_model, "model.safetensors", e) || al_sha256_file(p, sha, e))
        return -1;
    size_t bytes = al_cache_bytes(&m->cfg, B, T, o_hooks, e);
    /* the forward's activations and the cache's copy of some of them,
     * before the forward: --cache-max-mb bounds only the file */
    char what[96];
    snprintf(what, sizeof what, "%d window%s of %d tokens", B, B == 1 ? "" : "s", T);
    if (bytes <= (size_t)(o_cache_mb * 1e6) &&
        al_mem_check(al_model_acts_bytes(&m->cfg, B, T) + (double)bytes, "run --save-cache", what,
                     "lower --windows", e))
        return -1;
    if (al_cache_write(m, ids, B, T, o_hooks, (size_t)(o_cache_mb * 1e6), sha, o_save_cache, e))
        return al_err_prefix(e, "--save-cache %s", o_save_cache);
    fprintf(o_json ? stderr : stdout, "wrote %s: %s of %d x %d tokens (%.1f MB)\n", o_save_cache,
            o_hooks ? o_hooks : "every hook", B, T, bytes / 1e6);
    return 0;
}

/* --data --windows: evenly spread windows of n_ctx tokens (fewer if the
 * file is short), as the validation batches are. */
static int save_cache_windows(al_model *m, al_err *e) {
    al_tokens d;
    if (al_tokens_load(o_data, &d, e)) return -1;
    int rc = -1, T = m->cfg.n_ctx;
    int *in = NULL, *tg = NULL;
    if (d.n < 2) {
        al_errf(e, "%s has %zu tokens: too few for a window", o_data, d.n);
        goto out;
    }
    if ((size_t)T + 1 > d.n) T = (int)d.n - 1;
    if (d.max_id >= m->cfg.d_vocab) {
        al_errf(e, "%s holds id %d, outside the model's vocabulary (0..%d)", o_data, d.max_id,
                m->cfg.d_vocab - 1);
        goto out;
    }
    in = al_malloc((size_t)o_windows * T, sizeof(int), e);
    tg = in ? al_malloc((size_t)o_windows * T, sizeof(int), e) : NULL;
    if (!tg || al_batch_fixed(&d, o_windows, T, 0, 1, in, tg, e)) goto out;
    rc = save_cache(m, in, o_windows, T, e);
out:
    free(in);
    free(tg);
    al_tokens_free(&d);
    return rc;
}

static int run_run(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_run, &e);
    if (o_data && (!o_save_cache || o_prompt || o_prompt_file || o_generate || o_track)) {
        al_errf(&e, "--data is for --save-cache alone (windows of a token file instead of a "
                    "prompt)");
        return al_cli_usage(&al_cmd_run, &e);
    }
    if (!o_data && !o_prompt == !o_prompt_file) {
        al_errf(&e, "give exactly one of --prompt and --prompt-file");
        return al_cli_usage(&al_cmd_run, &e);
    }
    if ((o_hooks || o_data) && !o_save_cache) {
        al_errf(&e, "--hooks and --data go with --save-cache FILE");
        return al_cli_usage(&al_cmd_run, &e);
    }
    if (o_windows < 1 || o_windows > 100000) {
        al_errf(&e, "need 1 <= --windows <= 100000");
        return al_cli_usage(&al_cmd_run, &e);
    }
    al_err lim;
    if (al_cache_limit_check(o_cache_mb, &lim)) {
        al_errf(&e, "--cache-max-mb: %s", lim.msg);
        return al_cli_usage(&al_cmd_run, &e);
    }
    /* the names alone (a LayerNorm config accepts every kind; the model's
     * own is checked when the cache is written) */
    if (o_save_cache && al_cache_bytes(&(al_config){.n_layers = 1,
                                                    .d_model = 1,
                                                    .n_heads = 1,
                                                    .d_head = 1,
                                                    .d_vocab = 1,
                                                    .norm_type = AL_NORM_LN},
                                       1, 1, o_hooks, &e) == 0)
        return al_cli_usage(&al_cmd_run, &e);
    /* --generate is bounded so that prompt + generated ids fit an int */
    if (!(o_temperature > 0) || o_generate < 0 || o_generate > 1000000 || o_top_k < 0 ||
        o_top < 1 || o_top > 64) {
        al_errf(&e, "need --temperature > 0, 0 <= --generate <= 1000000, --top-k >= 0, "
                    "1 <= --top <= 64");
        return al_cli_usage(&al_cmd_run, &e);
    }
    if (al_threads_check(o_threads, &e) || al_circuit_fill_check(o_fill, &e))
        return al_cli_usage(&al_cmd_run, &e);
    al_set_threads(o_threads);
    al_model m;
    al_tokenizer *tok = NULL;
    int *ids = NULL, *cids = NULL, T = 0, rc = 1;
    float *p_tok = NULL;
    cJSON *root = NULL;
    al_circuit_run cr = {0};
    al_intervention iv = {0};
    char cdesc[256] = "";
    if (al_ckpt_load(o_model, &m, &tok, &e) != 0) return al_cli_error(&e);
    if (o_mask && apply_mask(&m, &e) != 0) goto out;
    /* before the circuit's: at one point, the file's ops run first */
    if (o_intervene &&
        (al_intervention_load(o_intervene, &m.cfg, &iv, &e) || al_intervention_attach(&m, &iv, &e)))
        goto out;
    if (o_intervene && !o_json)
        fprintf(o_data ? stderr : stdout, "intervention %s: %d op%s at their hook points\n",
                o_intervene, iv.n, iv.n == 1 ? "" : "s");
    if (o_data) {
        rc = save_cache_windows(&m, &e) ? 1 : 0;
        goto out;
    }
    if (prompt_ids(tok, m.cfg.n_ctx, &ids, &T, &e) != 0) goto out;
    if (o_circuit && setup_circuit(&m, tok, T, &cr, &cids, &e) != 0) goto out;
    if (o_save_cache && save_cache(&m, ids, 1, T, &e) != 0) goto out;
    if (al_model_forward(&m, ids, NULL, 1, T, &e) != 0) goto out;
    p_tok = malloc(sizeof(float) * (size_t)T);
    if (!p_tok) {
        al_errf(&e, "out of memory");
        goto out;
    }
    p_tok[0] = -1.0f; /* the first token has no prefix */
    for (int t = 1; t < T; t++) p_tok[t] = m.probs[(size_t)(t - 1) * m.cfg.d_vocab + ids[t]];
    if (o_circuit) al_circuit_run_describe(&cr, cdesc, sizeof cdesc);
    if (o_json) {
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "schema", "attnlab.run/1");
        cJSON_AddStringToObject(root, "model", o_model);
        if (o_circuit) {
            cJSON_AddStringToObject(root, "circuit", o_circuit);
            cJSON_AddStringToObject(root, "circuit_run", cdesc);
        }
        if (o_intervene) { /* the file as it was read, so the run records what was done */
            cJSON_AddStringToObject(root, "intervene", o_intervene);
            cJSON_AddItemToObject(root, "intervention", cJSON_Parse(iv.json));
        }
        cJSON_AddItemToObject(root, "tokens", json_table(&m, tok, ids, T, p_tok));
    }
    if (o_track) {
        if (print_track(tok, ids, T, p_tok, root, &e) != 0) goto out;
    } else if (!o_json) {
        if (o_circuit) printf("circuit %s: %s\n", o_circuit, cdesc);
        print_table(&m, tok, ids, T, p_tok);
    }
    if (o_generate > 0 && generate(&m, tok, ids, T, root, &e) != 0) goto out;
    if (root) {
        char *s = al_json_print(1, root);
        if (!s) {
            al_errf(&e, "out of memory");
            goto out;
        }
        printf("%s\n", s);
        free(s);
    }
    rc = 0;
out:
    if (rc) al_cli_error(&e);
    cJSON_Delete(root);
    free(p_tok);
    free(ids);
    free(cids);
    al_circuit_run_close(&cr);
    al_intervention_detach(&m, &iv);
    al_intervention_free(&iv);
    al_tok_free(tok);
    al_model_free(&m);
    return rc;
}
