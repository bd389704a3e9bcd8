/* test_hostile.c -- hostile inputs through the CLI: SQL-looking token
 * strings, huge and strange prompts, JSON nested 10,000 deep, a
 * safetensors header claiming 2^63 bytes, a token file whose count lies,
 * a learning rate that blows training up. Each must give a clear one-line
 * error or a documented result: never a crash, a hang or a huge
 * allocation. Peak memory is measured with wait4 (works under ASan too);
 * where `ulimit -v` is practical (not under ASan, whose shadow memory
 * needs terabytes of address space) commands also run under a 1.5 GB
 * address-space limit. */
#define _DEFAULT_SOURCE /* wait4 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attnlab/config.h"
#include "attnlab/data.h"
#include "attnlab/safetensors.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"
#include "proc.h"
#include "test.h"

static void write_bytes(const char *path, const void *d, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n);
    if (f) fclose(f);
}

/* A stderr that is exactly one line starting "attnlab: " and containing
 * `want`. */
static int one_line_error(const char *err_path, const char *want) {
    char *s = t_slurp(err_path);
    int ok = s && strncmp(s, "attnlab: ", 9) == 0 && strstr(s, want) &&
             strchr(s, '\n') == s + strlen(s) - 1;
    if (!ok) fprintf(stderr, "    stderr was: %s\n", s ? s : "(none)");
    free(s);
    return ok;
}

/* Tokenizer (vocab 320), token files and a 1-layer model trained 3 steps
 * on `text`, in DIR/tok.json, DIR/c.{train,val}.bin and DIR/m. */
static void small_model(const char *dir, const char *text, int n_layers) {
    char p[1024];
    snprintf(p, sizeof p, "%s/corpus.txt", dir);
    write_bytes(p, text, strlen(text));
    const char *b = t_bin(); /* may be relative: no cd */
    CHECK(t_sh("%s tokenizer train --in %s/corpus.txt --vocab 320 --out %s/tok.json >/dev/null "
               "2>&1 && "
               "%s encode --tokenizer %s/tok.json --in %s/corpus.txt --out %s/c.bin --val 0.1 "
               ">/dev/null 2>&1 && %s train --data %s/c.train.bin --val %s/c.val.bin --tokenizer "
               "%s/tok.json --out %s/m --steps 3 --n-layers %d --d-model 32 --n-heads 4 --d-head 8 "
               "--n-ctx 32 --batch 4 --eval-batches 1 --threads 1 >/dev/null 2>&1",
               b, dir, dir, b, dir, dir, dir, b, dir, dir, dir, dir, n_layers) == 0);
}

static char *repeat_text(const char *unit, int times) {
    size_t n = strlen(unit);
    char *s = malloc(n * (size_t)times + 1);
    for (int i = 0; i < times; i++) memcpy(s + n * (size_t)i, unit, n);
    s[n * (size_t)times] = 0;
    return s;
}

/* 1 if attnlab runs at all under `ulimit -v` of limit_kb (not under ASan;
 * OpenBLAS needs a few hundred MB of address space for its buffers). */
static int ulimit_practical(long limit_kb) {
    return t_sh("ulimit -v %ld && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 20 %s --version "
                ">/dev/null 2>&1",
                limit_kb, t_bin()) == 0;
}
#define VM_LIMIT_KB 1500000L

/* ------------------------------------------------------------ database */

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A tokenizer trained on text full of SQL: token strings with quotes,
 * semicolons and comment dashes go through `circuits` into skip_trigrams
 * byte for byte, and the database is none the worse. */
TEST(hostile_sql_token_strings) {
    const char *sql = "'); DROP TABLE runs; -- ";
    char *text = malloc(200000);
    text[0] = 0;
    for (int i = 0; i < 400; i++) {
        strcat(text, sql);
        strcat(text, i % 3 ? "Robert said \"hi\"; DELETE FROM models WHERE 1=1; --\n"
                             "x' OR '1'='1\n\n"
                           : "the cat sat on the mat.\n\n");
    }
    t_pbuf dir = t_pcopy(""), db = t_pcopy("r.db"), out = t_pcopy("rows.txt"), m = t_pcopy("m");
    small_model(dir.s, text, 1);
    free(text);
    CHECK(t_sh("%s circuits --model %s --db %s --top-k 50 --threads 1 >/dev/null 2>&1", t_bin(),
               m.s, db.s) == 0);
    CHECK(t_sh("%s run --model %s --prompt \"'); DROP TABLE runs; --\" >/dev/null 2>&1", t_bin(),
               m.s) == 0);
    CHECK(t_sh("test \"$(sqlite3 %s 'PRAGMA integrity_check')\" = ok", db.s) == 0);
    CHECK(t_sh("test \"$(sqlite3 %s \"SELECT count(*) || status FROM runs\")\" = 1done", db.s) ==
          0);
    /* every stored string is exactly the token's display string */
    CHECK(t_sh("sqlite3 %s 'SELECT a, hex(a_str), b, hex(b_str), c, hex(c_str) FROM skip_trigrams' "
               "> %s",
               db.s, out.s) == 0);
    al_tokenizer *tok;
    al_err e;
    t_pbuf tp = t_pcopy("m/tokenizer.json");
    CHECK_OK(al_tok_load(tp.s, &tok, &e), &e);
    char *rows = t_slurp(out.s);
    int n_rows = 0, n_bad = 0, n_sql = 0;
    for (char *line = rows ? strtok(rows, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char *f = line;
        for (int k = 0; k < 3; k++) {
            int id = (int)strtol(f, &f, 10);
            char want[256], got[256];
            al_tok_display(tok, id, want, sizeof want);
            size_t n = 0;
            for (f++; hexval(f[0]) >= 0 && hexval(f[1]) >= 0 && n + 1 < sizeof got; f += 2)
                got[n++] = (char)(hexval(f[0]) * 16 + hexval(f[1]));
            got[n] = 0;
            n_bad += strcmp(want, got) != 0;
            n_sql += strchr(got, '\'') || strchr(got, ';') || strstr(got, "--");
            if (*f == '|') f++;
        }
        n_rows++;
    }
    CHECKF(n_rows > 0 && n_bad == 0, "%d rows, %d strings differ", n_rows, n_bad);
    CHECKF(n_sql > 0, "no token with a quote, ';' or '--' among the trigrams");
    free(rows);
    al_tok_free(tok);
}

/* ------------------------------------------------------------- prompts */

/* Peak RSS (KiB) and seconds of `run` on prompt file p. */
static int run_prompt(const char *model, const char *p, const char *err, long *rss, double *secs) {
    double t0 = al_now();
    int rc =
        t_wait(t_spawn(NULL, err, "run --model %s --prompt-file %s --threads 1", model, p), rss);
    *secs = al_now() - t0;
    return rc;
}

/* 10 MB single-line prompts (words; one 10 MB word; random bytes): the
 * documented policy is to read only the tail of a long prompt file and
 * cut to the last n_ctx tokens, with warnings. Time and memory stay near
 * those of a one-line prompt. */
TEST(hostile_prompt_10mb_single_line) {
    t_pbuf dir = t_pcopy(""), m = t_pcopy("m"), err = t_pcopy("err"), small = t_pcopy("small.txt");
    char *text = repeat_text("the cat sat on the mat and Bamurik saw aaaaaaaaaaaaaaaa.\n\n", 300);
    small_model(dir.s, text, 1);
    free(text);
    write_bytes(small.s, "the cat", 7);
    long rss0;
    double s0;
    CHECK(run_prompt(m.s, small.s, err.s, &rss0, &s0) == 0);
    size_t n = 10u << 20;
    char *big = malloc(n);
    al_rng r;
    al_rng_seed(&r, 3);
    const char *kinds[] = {"words", "one-word", "bytes"};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < n; i++) {
            if (k == 0)
                big[i] = "the cat sat on a mat "[i % 21];
            else if (k == 1)
                big[i] = 'a';
            else
                big[i] = (char)(al_rng_u64(&r) & 0xff);
        }
        t_pbuf p = t_pcopy("big.txt");
        write_bytes(p.s, big, n);
        long rss;
        double secs;
        CHECKF(run_prompt(m.s, p.s, err.s, &rss, &secs) == 0, "%s", kinds[k]);
        char *log = t_slurp(err.s);
        CHECKF(log && strstr(log, "tokenizing only its last") && strstr(log, "keeping the last 32"),
               "%s: %s", kinds[k], log ? log : "");
        free(log);
        /* before the policy, the one-word prompt took 5.8 s and +220 MB */
        CHECKF(secs < 5 + 3 * s0, "%s: %.1f s", kinds[k], secs);
        CHECKF(rss < rss0 + 100 * 1024, "%s: peak RSS %ld KiB (one-line prompt: %ld)", kinds[k],
               rss, rss0);
    }
    free(big);
    if (ulimit_practical(VM_LIMIT_KB)) {
        t_pbuf p = t_pcopy("big.txt");
        CHECK(t_sh("ulimit -v %ld && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 60 %s run "
                   "--model %s --prompt-file %s --threads 1 >/dev/null 2>&1",
                   VM_LIMIT_KB, t_bin(), m.s, p.s) == 0);
    }
}

/* JSON text must be UTF-8 (RFC 8259); cJSON copies bytes unchecked. */
static int valid_utf8(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        int len = *s < 0x80                  ? 1
                  : *s >= 0xc2 && *s <= 0xdf ? 2
                  : *s >= 0xe0 && *s <= 0xef ? 3
                  : *s >= 0xf0 && *s <= 0xf4 ? 4
                                             : 0;
        if (!len) return 0;
        for (int k = 1; k < len; k++)
            if ((s[k] & 0xc0) != 0x80) return 0;
        s += len;
    }
    return 1;
}

/* Longer than n_ctx: the last n_ctx tokens are kept, with a warning, and
 * the table ends with the prompt's last token. NUL bytes and invalid
 * UTF-8 are ordinary bytes: shown as \x00 and \xNN, and --json stays
 * valid JSON. */
TEST(hostile_prompt_long_nul_non_utf8) {
    t_pbuf dir = t_pcopy(""), m = t_pcopy("m"), out = t_pcopy("out"), err = t_pcopy("err"),
           p = t_pcopy("p.txt");
    al_err e;
    char *text = repeat_text("the cat sat on the mat. a dog ran home.\n\n", 300);
    small_model(dir.s, text, 1);
    free(text);
    char *unit = repeat_text("a dog ran home. ", 40); /* ~200 tokens > n_ctx 32 */
    char *longp = malloc(strlen(unit) + 8);
    snprintf(longp, strlen(unit) + 8, "%sthe end", unit);
    free(unit);
    write_bytes(p.s, longp, strlen(longp));
    free(longp);
    CHECK(t_wait(t_spawn(out.s, err.s, "run --model %s --prompt-file %s", m.s, p.s), NULL) == 0);
    char *o = t_slurp(out.s), *w = t_slurp(err.s);
    CHECKF(w && strstr(w, "warning: prompt has") && strstr(w, "n_ctx is 32: keeping the last 32"),
           "%s", w ? w : "");
    int rows = 0;
    const char *last = NULL;
    for (const char *q = o ? strchr(o, '\n') : NULL; q && q[1]; q = strchr(q + 1, '\n')) {
        rows++;
        last = q + 1;
    }
    CHECKF(rows == 32, "%d rows", rows);
    CHECKF(last && strncmp(last, "  31  ", 6) == 0 && strstr(last, "d "), "last row: %s",
           last ? last : "");
    free(o);
    free(w);
    const unsigned char weird[] = {'a', 0, 'b', 0xff, 0xfe, ' ', 'c', 0xc3, '(', 0xe2, 0x82, 0};
    write_bytes(p.s, weird, sizeof weird);
    CHECK(t_wait(t_spawn(out.s, err.s, "run --model %s --prompt-file %s", m.s, p.s), NULL) == 0);
    o = t_slurp(out.s);
    CHECKF(o && strstr(o, "\\x00") && strstr(o, "\\xff") && strstr(o, "\\xc3"), "%s", o ? o : "");
    free(o);
    CHECK(t_wait(t_spawn(out.s, err.s, "run --model %s --prompt-file %s --json --generate 3", m.s,
                         p.s),
                 NULL) == 0);
    char *j = t_slurp(out.s);
    cJSON *root = NULL;
    CHECKF(j && strstr(j, "\"generated_ids\"") && valid_utf8(j) &&
               al_json_parse(j, strlen(j), "run --json", &root, &e) == 0,
           "%s", j ? j : "");
    cJSON_Delete(root);
    free(j);
    /* an empty prompt file with --no-bos is a clear error */
    write_bytes(p.s, "", 0);
    CHECK(t_wait(t_spawn(NULL, err.s, "run --model %s --prompt-file %s --no-bos", m.s, p.s),
                 NULL) == 1);
    CHECK(one_line_error(err.s, "empty"));
}

/* ---------------------------------------------------------------- JSON */

/* JSON nested 10,000 deep wherever attnlab reads JSON: a one-line error
 * naming the file, no stack overflow. */
TEST(hostile_json_nested_10000) {
    int D = 10000;
    size_t cap = 2 * (size_t)D + 256;
    char *deep = malloc(cap);
    int k = snprintf(deep, cap, "{\"name\": \"deep\", \"train\": ");
    for (int i = 0; i < D; i++) deep[k++] = '[';
    for (int i = 0; i < D; i++) deep[k++] = ']';
    k += snprintf(deep + k, cap - (size_t)k, "}");
    t_pbuf exp = t_pcopy("exp.json"), err = t_pcopy("err"), data = t_pcopy("c.bin"),
           tok = t_pcopy("tok.json");
    t_pbuf m = t_pcopy("m"), mask = t_pcopy("mask.json");
    write_bytes(exp.s, deep, (size_t)k);
    CHECK(t_wait(t_spawn(NULL, err.s, "experiment %s --dry-run", exp.s), NULL) == 1);
    CHECK(one_line_error(err.s, "nested deeper than"));
    CHECK(one_line_error(err.s, exp.s));
    /* train --config */
    int ids[4000];
    for (int i = 0; i < 4000; i++) ids[i] = "the cat sat. "[i % 13];
    al_err e;
    CHECK_OK(al_tokens_save(data.s, ids, 4000, &e), &e);
    CHECK(t_wait(t_spawn(NULL, err.s, "train --data %s --out %s --config %s", data.s, m.s, exp.s),
                 NULL) == 1);
    CHECK(one_line_error(err.s, "nested deeper than"));
    /* tokenizer.json */
    write_bytes(tok.s, deep, (size_t)k);
    CHECK(
        t_wait(t_spawn(NULL, err.s, "train --data %s --out %s --tokenizer %s", data.s, m.s, tok.s),
               NULL) == 1);
    CHECK(one_line_error(err.s, tok.s));
    /* a model directory's config.json and a mask file */
    CHECK(t_wait(t_spawn(NULL, NULL,
                         "train --data %s --out %s --steps 1 --d-model 16 --n-heads 2 "
                         "--d-head 8 --n-ctx 16 --batch 2 --eval-batches 1",
                         data.s, m.s),
                 NULL) == 0);
    write_bytes(mask.s, deep, (size_t)k);
    CHECK(t_wait(t_spawn(NULL, err.s, "run --model %s --prompt x --mask %s", m.s, mask.s), NULL) ==
          1);
    CHECK(one_line_error(err.s, "nested deeper than"));
    t_pbuf cfg = t_pcopy("m/config.json");
    write_bytes(cfg.s, deep, (size_t)k);
    CHECK(t_wait(t_spawn(NULL, err.s, "run --model %s --prompt x", m.s), NULL) == 1);
    CHECK(one_line_error(err.s, "nested deeper than"));
    free(deep);
}

/* ----------------------------------------------------- lying file sizes */

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A safetensors header length of 2^63 (and 2^64-1, and one just past the
 * file), and a tensor whose shape claims 2^62 elements: refused with the
 * file and the problem named, before anything is allocated from them. */
TEST(hostile_safetensors_header_2pow63) {
    t_pbuf data = t_pcopy("c.bin"), m = t_pcopy("m"), err = t_pcopy("err"),
           st = t_pcopy("m/model.safetensors");
    int ids[4000];
    for (int i = 0; i < 4000; i++) ids[i] = "the cat sat. "[i % 13];
    al_err e;
    CHECK_OK(al_tokens_save(data.s, ids, 4000, &e), &e);
    CHECK(t_wait(t_spawn(NULL, NULL,
                         "train --data %s --out %s --steps 1 --d-model 16 --n-heads 2 "
                         "--d-head 8 --n-ctx 16 --batch 2 --eval-batches 1",
                         data.s, m.s),
                 NULL) == 0);
    int practical = ulimit_practical(VM_LIMIT_KB);
    uint64_t lens[] = {1ull << 63, ~0ull, 1ull << 40, 40};
    for (int i = 0; i < 4; i++) {
        unsigned char f[64] = {0};
        put_u64(f, lens[i]);
        memcpy(f + 8, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 52);
        write_bytes(st.s, f, sizeof f);
        CHECKF(t_wait(t_spawn(NULL, err.s, "run --model %s --prompt x", m.s), NULL) == 1,
               "header length %llu", (unsigned long long)lens[i]);
        CHECK(one_line_error(err.s, "model.safetensors"));
        if (practical)
            CHECK(t_sh("ulimit -v %ld && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 60 %s "
                       "run --model %s --prompt x 2>/dev/null; test $? = 1",
                       VM_LIMIT_KB, t_bin(), m.s) == 0);
    }
    /* a shape of 2^62 x 4 with a tiny data span */
    const char *h = "{\"embed.W_E\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
                    "\"data_offsets\":[0,16]}}";
    unsigned char f[256] = {0};
    put_u64(f, strlen(h));
    memcpy(f + 8, h, strlen(h));
    write_bytes(st.s, f, 8 + strlen(h) + 16);
    CHECK(t_wait(t_spawn(NULL, err.s, "run --model %s --prompt x", m.s), NULL) == 1);
    CHECK(one_line_error(err.s, "model.safetensors"));
}

/* A token file whose header count is larger (2^32-1), smaller, or zero
 * against what the file holds: refused naming both numbers, with nothing
 * allocated from the count. */
TEST(hostile_token_file_count_lies) {
    t_pbuf data = t_pcopy("c.bin"), err = t_pcopy("err"), m = t_pcopy("m");
    int ids[3000];
    for (int i = 0; i < 3000; i++) ids[i] = "the cat sat. "[i % 13];
    al_err e;
    CHECK_OK(al_tokens_save(data.s, ids, 3000, &e), &e);
    int practical = ulimit_practical(VM_LIMIT_KB);
    uint32_t counts[] = {0xffffffffu, 0x80000000u, 2999, 0};
    for (int i = 0; i < 4; i++) {
        /* patch the count word (offset 8) in place */
        FILE *f = fopen(data.s, "r+b");
        unsigned char c[4] = {(unsigned char)counts[i], (unsigned char)(counts[i] >> 8),
                              (unsigned char)(counts[i] >> 16), (unsigned char)(counts[i] >> 24)};
        CHECK(f && fseek(f, 8, SEEK_SET) == 0 && fwrite(c, 1, 4, f) == 4);
        if (f) fclose(f);
        CHECK(t_wait(t_spawn(NULL, err.s, "train --data %s --out %s --steps 1", data.s, m.s),
                     NULL) == 1);
        CHECK(one_line_error(err.s, "header says"));
        if (practical)
            CHECK(t_sh("ulimit -v %ld && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 60 %s "
                       "train --data %s --out %s --steps 1 2>/dev/null; test $? = 1",
                       VM_LIMIT_KB, t_bin(), data.s, m.s) == 0);
    }
}

/* ------------------------------------------------------------- numbers */

/* A learning rate ~10^5 too high (300; the default is 3e-3) blows the
 * model up within a few steps. Training stops at the first non-finite
 * loss or gradient, naming the step; the checkpoint left is the last good
 * one (the last multiple of --ckpt-every before that step), it loads, and
 * it is byte-identical to the same run stopped cleanly there. (100x, 0.3,
 * is not enough: AdamW's steps are bounded by the lr, and the loss grows
 * to ~1e4 but stays finite.) */
TEST(hostile_train_lr_blowup_keeps_last_good) {
    t_pbuf data = t_pcopy("c.bin"), m = t_pcopy("m"), ok = t_pcopy("ok"), err = t_pcopy("err");
    int ids[20000];
    for (int i = 0; i < 20000; i++) ids[i] = "the cat sat on the mat. a dog ran. "[i % 35];
    al_err e;
    CHECK_OK(al_tokens_save(data.s, ids, 20000, &e), &e);
#define BLOWUP                                                                                     \
    "--steps 60 --lr 300 --warmup 0 --ckpt-every 3 --d-model 32 --n-heads 4 "                      \
    "--d-head 8 --n-ctx 32 --batch 4 --eval-every 50 --eval-batches 1 --threads 1"
    CHECK(t_wait(t_spawn(NULL, err.s, "train --data %s --out %s " BLOWUP, data.s, m.s), NULL) == 1);
    char *log = t_slurp(err.s);
    const char *at = log ? strstr(log, " at step ") : NULL;
    long bad = at ? strtol(at + 9, NULL, 10) : -1;
    CHECKF(log && strstr(log, "non-finite") && bad >= 1, "%s", log ? log : "");
    long want = (bad - 1) / 3 * 3; /* the last checkpoint before the bad step */
    char buf[64];
    snprintf(buf, sizeof buf, "checkpoint (step %ld)", want);
    CHECKF(log && strstr(log, buf), "want '%s' in: %s", buf, log ? log : "");
    free(log);
    t_pbuf st = t_pcopy("m/state.json");
    char *s = t_slurp(st.s);
    snprintf(buf, sizeof buf, "\"step\":\t%ld,", want);
    CHECKF(s && strstr(s, buf), "state.json: %s", s ? s : "");
    free(s);
    CHECK(t_sh("%s run --model %s --prompt 'the cat' >/dev/null 2>&1", t_bin(), m.s) == 0);
    /* the same run stopped cleanly at that step: same checkpoint, and no
     * earlier step was non-finite (it would have stopped there) */
    if (want > 0) {
        CHECK(t_wait(t_spawn(NULL, NULL, "train --data %s --out %s --stop-at %ld " BLOWUP, data.s,
                             ok.s, want),
                     NULL) == 130);
        CHECK(t_sh("cmp -s %s/model.safetensors %s/model.safetensors && "
                   "cmp -s %s/optim.safetensors %s/optim.safetensors",
                   m.s, ok.s, m.s, ok.s) == 0);
    }
    /* resuming fails again at the same step: the stop is deterministic */
    CHECK(t_wait(t_spawn(NULL, err.s, "train --resume %s", m.s), NULL) == 1);
    log = t_slurp(err.s);
    snprintf(buf, sizeof buf, " at step %ld ", bad);
    CHECKF(log && strstr(log, buf), "%s", log ? log : "");
    free(log);
}

/* A tensor name with a newline and an escape sequence in an otherwise
 * valid checkpoint: the error stays one line. */
TEST(hostile_safetensors_control_char_name) {
    t_pbuf data = t_pcopy("c.bin"), m = t_pcopy("m"), err = t_pcopy("err"),
           st = t_pcopy("m/model.safetensors");
    int ids[4000];
    for (int i = 0; i < 4000; i++) ids[i] = "the cat sat. "[i % 13];
    al_err e;
    CHECK_OK(al_tokens_save(data.s, ids, 4000, &e), &e);
    CHECK(t_wait(t_spawn(NULL, NULL,
                         "train --data %s --out %s --steps 1 --d-model 16 --n-heads 2 "
                         "--d-head 8 --n-ctx 16 --batch 2 --eval-batches 1",
                         data.s, m.s),
                 NULL) == 0);
    al_st_file *f;
    CHECK_OK(al_st_open(st.s, &f, &e), &e);
    int n = al_st_count(f);
    al_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    for (int i = 0; i < n; i++) t[i] = *al_st_at(f, i);
    float x = 1;
    t[n] = (al_st_tensor){.name = "evil\n\x1b[2Jname",
                          .dtype = AL_DT_F32,
                          .ndim = 1,
                          .shape = {1},
                          .data = &x};
    t_pbuf tmp = t_pcopy("evil.safetensors");
    CHECK_OK(al_st_write(tmp.s, t, n + 1, NULL, NULL, 0, &e), &e);
    al_st_close(f);
    free(t);
    CHECK(t_sh("mv %s %s", tmp.s, st.s) == 0);
    CHECK(t_wait(t_spawn(NULL, err.s, "run --model %s --prompt x", m.s), NULL) == 1);
    CHECK(one_line_error(err.s, "unexpected tensor evil?"));
}

/* --threads outside 0..1024 is refused with one line by every kind of
 * command (analysis, inference, training, report); more threads than
 * cores are honoured (a result made on a bigger machine stays
 * reproducible) with a one-line note. */
TEST(hostile_threads_out_of_range) {
    t_pbuf dir = t_pcopy(""), db = t_pcopy("r.db"), err = t_pcopy("err");
    char *text = repeat_text("the cat sat on the mat. the dog ran.\n\n", 40);
    small_model(dir.s, text, 1);
    free(text);
    const char *b = t_bin();
    const char *cmds[] = {"circuits --model %s/m --db %s", "patch --model %s/m --db %s",
                          "run --model %s/m --prompt cat",
                          "report --model %s/m --db %s --out rep.d",
                          "train --data %s/c.train.bin --out %s.m"};
    const char *bad[] = {"100000", "-1", "1025"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        for (int k = 0; k < 3; k++) {
            char c[2048];
            snprintf(c, sizeof c, cmds[i], dir.s, db.s);
            int rc = t_sh("%s %s --threads %s >/dev/null 2>%s", b, c, bad[k], err.s);
            char *s = t_slurp(err.s);
            CHECKF(rc == 1 || rc == 2, "%s --threads %s: exit %d", c, bad[k], rc);
            CHECKF(s && strstr(s, "--threads must be 0 (the default) to 1024") &&
                       strchr(s, '\n') == s + strlen(s) - 1,
                   "%s --threads %s: [%s]", c, bad[k], s ? s : "");
            free(s);
        }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(t_sh("%s run --model %s/m --prompt cat --threads %ld >/dev/null 2>%s", b, dir.s,
               cores + 1, err.s) == 0);
    char *s = t_slurp(err.s);
    CHECKF(s && strstr(s, "is more than this machine's") && strstr(s, "only slower"), "[%s]",
           s ? s : "");
    free(s);
}
