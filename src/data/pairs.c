/* pairs.c -- clean / corrupted pair sets for activation and path patching
 * (see pairs.h): the user's JSONL pair files and the `names` task.
 *
 * Both build their pairs the same way: every pair is appended to one
 * growable buffer as it is made (lengths differ from pair to pair, and
 * the longest is only known at the end), then pairs_finish copies them
 * into the (N, T) layout, padded with token 0. So a pair set is only
 * allocated, and *out only assigned, once every pair is known good.
 *
 * JSONL files are parsed one line at a time with al_json_parse, so an
 * error names its line, and parsing stops at the first bad one.
 */
#include "attnlab/pairs.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"
#include "attnlab/json.h"

#define MAX_PAIRS 1000000
#define MAX_FILE_BYTES ((size_t)256 << 20)

void al_pairs_free(al_pairs *p) {
    free(p->clean);
    free(p->items);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------ builder */

/* Pairs as they are made: per pair the ints len, answer, wrong, then len
 * clean ids and len corrupted ids. */
typedef struct builder {
    al_buf b;
    int N, T;
} builder;

static void put_pair(builder *bd, const int *clean, const int *corr, int len, int answer,
                     int wrong) {
    int head[3] = {len, answer, wrong};
    al_buf_put(&bd->b, head, sizeof head);
    al_buf_put(&bd->b, clean, (size_t)len * sizeof(int));
    al_buf_put(&bd->b, corr, (size_t)len * sizeof(int));
    bd->N++;
    if (len > bd->T) bd->T = len;
}

/* The pairs in the (N, T) layout of pairs.h: clean, corr and len in one
 * zeroed allocation, one item per pair at its last position. Frees the
 * builder either way. */
static int pairs_finish(builder *bd, const char *task, al_pairs *out, al_err *e) {
    al_pairs p;
    memset(&p, 0, sizeof p);
    int rc = -1;
    if (!al_buf_ok(&bd->b)) {
        al_errf(e, "out of memory building %d pairs", bd->N);
        goto out;
    }
    snprintf(p.task, sizeof p.task, "%s", task);
    p.N = bd->N, p.T = bd->T, p.n_items = bd->N, p.logit_diff = 1;
    p.clean = al_calloc((size_t)p.N * (2 * (size_t)p.T + 1), sizeof(int), e);
    p.items = p.clean ? al_malloc((size_t)p.N, sizeof(al_pair_item), e) : NULL;
    if (!p.items) {
        al_pairs_free(&p);
        goto out;
    }
    p.corr = p.clean + (size_t)p.N * p.T;
    p.len = p.corr + (size_t)p.N * p.T;
    const char *q = bd->b.p;
    for (int n = 0; n < p.N; n++) {
        int head[3];
        memcpy(head, q, sizeof head);
        q += sizeof head;
        size_t row = (size_t)head[0] * sizeof(int);
        memcpy(p.clean + (size_t)n * p.T, q, row);
        memcpy(p.corr + (size_t)n * p.T, q + row, row);
        q += 2 * row;
        p.len[n] = head[0];
        p.items[n] = (al_pair_item){n, head[0] - 1, head[1], head[2]};
    }
    *out = p;
    rc = 0;
out:
    al_buf_free(&bd->b);
    return rc;
}

/* -------------------------------------------------------------- JSONL */

static const char *const FIELDS[4] = {"clean", "corrupted", "answer", "wrong"};

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

/* cJSON decodes the escape \u0000 into its C string, which silently ends
 * the text there; refuse it instead. Only called on text that parsed, so
 * every backslash is inside a string and escapes the next byte. */
static int has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '\\') {
            if (s[i + 1] == 'u' && i + 5 < n && memcmp(s + i + 2, "0000", 4) == 0) return 1;
            i++;
        }
    return 0;
}

/* al_json_parse counts lines within the text it is given, here always
 * one line: keep just the column, and name the file's line instead. */
static int json_line_err(al_err *e, size_t line) {
    static const char one[] = "invalid JSON at line 1, ";
    if (e && strncmp(e->msg, one, sizeof one - 1) == 0) {
        char rest[64];
        snprintf(rest, sizeof rest, "%s", e->msg + sizeof one - 1);
        al_errf(e, "invalid JSON at %s", rest);
    }
    return al_err_prefix(e, "line %zu", line);
}

/* A field's text for a message: quoted, one line, at most 60 bytes. */
#define SHOW(s, buf) al_json_key_disp(s, buf)

/* One line's pair, appended to bd; -1 with a message naming the line. */
static int parse_line(const char *s, size_t n, size_t line, const al_tokenizer *tok, int n_ctx,
                      builder *bd, al_err *e) {
    cJSON *o = NULL;
    if (al_json_parse(s, n, NULL, &o, e)) return json_line_err(e, line);
    const cJSON *f[4] = {NULL, NULL, NULL, NULL};
    int *ids[4] = {NULL, NULL, NULL, NULL};
    size_t len[4] = {0, 0, 0, 0};
    char shown[64];
    int rc = -1;
    if (!cJSON_IsObject(o)) {
        al_errf(e, "line %zu: expected a JSON object {\"clean\": ..., \"corrupted\": ..., "
                   "\"answer\": ..., \"wrong\": ...}", line);
        goto out;
    }
    if (has_nul_escape(s, n)) {
        al_errf(e, "line %zu: a string holds \\u0000 (a NUL character), which a pair's text "
                   "cannot hold", line);
        goto out;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        int k = 0;
        while (k < 4 && strcmp(FIELDS[k], it->string)) k++;
        if (k == 4) {
            al_errf(e, "line %zu: unknown field \"%s\" (known: clean, corrupted, answer, wrong)",
                    line, SHOW(it->string, shown));
            goto out;
        }
        if (f[k]) {
            al_errf(e, "line %zu: field \"%s\" given twice", line, FIELDS[k]);
            goto out;
        }
        if (!cJSON_IsString(it)) {
            al_errf(e, "line %zu: field \"%s\" must be a string", line, FIELDS[k]);
            goto out;
        }
        f[k] = it;
    }
    for (int k = 0; k < 4; k++) {
        if (!f[k]) {
            al_errf(e, "line %zu: missing field \"%s\"", line, FIELDS[k]);
            goto out;
        }
        if (!f[k]->valuestring[0]) {
            al_errf(e, "line %zu: field \"%s\" is empty", line, FIELDS[k]);
            goto out;
        }
    }
    /* The literal <|endoftext|> becomes the special token, so a pair can
     * start with the BOS the model was trained with. */
    for (int k = 0; k < 4; k++)
        if (al_tok_encode(tok, (const unsigned char *)f[k]->valuestring,
                          strlen(f[k]->valuestring), 1, &ids[k], &len[k], e)) {
            al_err_prefix(e, "line %zu", line);
            goto out;
        }
    if (len[0] != len[1]) {
        al_errf(e, "line %zu: clean is %zu tokens, corrupted %zu (a pair needs the same "
                   "length, so that a position means the same in both)", line, len[0], len[1]);
        goto out;
    }
    if (len[0] > (size_t)n_ctx) {
        al_errf(e, "line %zu: clean and corrupted are %zu tokens, longer than n_ctx %d", line,
                len[0], n_ctx);
        goto out;
    }
    for (int k = 2; k < 4; k++)
        if (len[k] != 1) {
            al_errf(e, "line %zu: %s \"%s\" is %zu tokens; it must be exactly one", line,
                    FIELDS[k], SHOW(f[k]->valuestring, shown), len[k]);
            goto out;
        }
    if (ids[2][0] == ids[3][0]) {
        al_errf(e, "line %zu: answer and wrong are the same token (\"%s\")", line,
                SHOW(f[2]->valuestring, shown));
        goto out;
    }
    put_pair(bd, ids[0], ids[1], (int)len[0], ids[2][0], ids[3][0]);
    rc = 0;
out:
    for (int k = 0; k < 4; k++) free(ids[k]);
    cJSON_Delete(o);
    return rc;
}

int al_pairs_parse_jsonl(const char *text, size_t n, const al_tokenizer *tok, int n_ctx,
                         al_pairs *out, al_err *e) {
    memset(out, 0, sizeof *out);
    if (n_ctx < 1) return al_errf(e, "pairs: n_ctx must be >= 1 (got %d)", n_ctx);
    if (n == 0) return al_errf(e, "no pairs (the text is empty)");
    builder bd = {AL_BUF_INIT, 0, 0};
    size_t line = 1;
    /* Lines end at '\n'; a final '\n' ends the last line rather than
     * starting an empty one, so s == n after it ends the loop. */
    for (size_t s = 0; s < n; line++) {
        const char *nl = memchr(text + s, '\n', n - s);
        size_t end = nl ? (size_t)(nl - text) : n;
        if (line > MAX_PAIRS) {
            al_errf(e, "line %zu: more than %d pairs", line, MAX_PAIRS);
            goto fail;
        }
        if (is_blank(text + s, end - s)) {
            al_errf(e, "line %zu: empty line (a JSONL pair file has one JSON object on every "
                       "line)", line);
            goto fail;
        }
        if (parse_line(text + s, end - s, line, tok, n_ctx, &bd, e)) goto fail;
        s = end + 1;
    }
    return pairs_finish(&bd, "file", out, e);
fail:
    al_buf_free(&bd.b);
    return -1;
}

int al_pairs_load_jsonl(const char *path, const al_tokenizer *tok, int n_ctx, al_pairs *out,
                        al_err *e) {
    memset(out, 0, sizeof *out);
    unsigned char *text;
    size_t n;
    if (al_read_file(path, &text, &n, MAX_FILE_BYTES, e)) return -1;
    int rc = al_pairs_parse_jsonl((const char *)text, n, tok, n_ctx, out, e);
    free(text);
    if (rc) return al_err_prefix(e, "%s", path);
    return 0;
}

/* -------------------------------------------------------------- names */

int al_pairs_names(const al_tokenizer *tok, int n, uint64_t seed, int n_ctx, int bos,
                   al_pairs *out, al_err *e) {
    (void)tok, (void)n, (void)seed, (void)n_ctx, (void)bos;
    memset(out, 0, sizeof *out);
    return al_errf(e, "the names task is not built yet");
}
