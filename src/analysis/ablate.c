/* ablate.c -- ablation sweeps, pruning and head-mask files through the
 * engine's gates and hooks (see ablate.h for the definitions).
 *
 * Cost model: al_abl_prepare is one clean pass over a set; al_abl_run is
 * one forward per (ablated set, batch), plus one clean forward per batch
 * for resample (the rotated z of the batch). The outer loop is over
 * batches so the clean z of only one batch is ever held. */
#define _POSIX_C_SOURCE 200809L
#include "attnlab/ablate.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/config.h"
#include "attnlab/json.h"

/* --------------------------------------------------- evaluation sets */

void al_abl_set_free(al_abl_set *s) {
    free(s->inputs);
    free(s->sel);
    free(s->clean);
    free(s->zmean);
    memset(s, 0, sizeof *s);
}

/* Allocate inputs, targets (one block) and sel for rows x T. */
static int set_alloc(al_abl_set *s, int rows, int T, int B, al_err *e) {
    memset(s, 0, sizeof *s);
    if (rows < 1 || T < 1 || B < 1)
        return al_errf(e, "evaluation set of %d sequences of %d tokens (batch %d) is empty", rows,
                       T, B);
    size_t n = (size_t)rows * T;
    s->inputs = al_malloc(2 * n, sizeof(int), e);
    s->sel = al_calloc(n, 1, e);
    if (!s->inputs || !s->sel) {
        al_abl_set_free(s);
        return -1;
    }
    s->targets = s->inputs + n;
    s->rows = rows, s->T = T, s->B = B < rows ? B : rows;
    return 0;
}

int al_abl_set_from(al_abl_set *s, const int *inputs, const int *targets, const unsigned char *sel,
                    int rows, int T, int B, al_err *e) {
    if (set_alloc(s, rows, T, B, e)) return -1;
    size_t n = (size_t)rows * T;
    memcpy(s->inputs, inputs, n * sizeof(int));
    memcpy(s->targets, targets, n * sizeof(int));
    for (size_t i = 0; i < n; i++) s->sel[i] = sel ? sel[i] : (targets[i] >= 0 ? AL_SEL_LOSS : 0);
    return 0;
}

int al_abl_set_text(al_abl_set *s, const al_tokens *d, int T, int B, int first, int count,
                    int n_batches, int d_vocab, al_err *e) {
    if (first < 0 || count < 1 || first + count > n_batches)
        return al_errf(e, "validation batches %d..%d are not within 0..%d", first,
                       first + count - 1, n_batches - 1);
    if (d->max_id >= d_vocab)
        return al_errf(e, "validation tokens contain id %d, the model's vocabulary has %d",
                       d->max_id, d_vocab);
    if (set_alloc(s, count * B, T, B, e)) return -1;
    size_t bt = (size_t)B * T, n = (size_t)s->rows * T;
    for (int k = 0; k < count; k++)
        if (al_batch_fixed(d, B, T, first + k, n_batches, s->inputs + k * bt, s->targets + k * bt,
                           e)) {
            al_abl_set_free(s);
            return -1;
        }
    if (al_copy_positions(s->inputs, s->targets, s->rows, T, d_vocab, s->sel, e)) {
        al_abl_set_free(s);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        s->sel[i] =
            (unsigned char)((s->sel[i] ? AL_SEL_COPY : 0) | (s->targets[i] >= 0 ? AL_SEL_LOSS : 0));
    return 0;
}

int al_abl_set_probe(al_abl_set *s, const al_probe *p, int B, al_err *e) {
    int R = p->R, T = 2 * R + 1;
    if (set_alloc(s, p->N, T, B, e)) return -1;
    for (int r = 0; r < p->N; r++)
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)r * T + t;
            s->inputs[i] = p->tokens[i];
            s->targets[i] = t + 1 < T ? p->tokens[i + 1] : -1;
            s->sel[i] = (unsigned char)((s->targets[i] >= 0 ? AL_SEL_LOSS : 0) |
                                        (t >= R + 1 && t <= 2 * R - 1 ? AL_SEL_PROBE : 0));
        }
    return 0;
}

/* Rows of batch k. */
static int batch_rows(const al_abl_set *s, int k) {
    int r0 = k * s->B;
    return s->rows - r0 < s->B ? s->rows - r0 : s->B;
}
static int n_batches(const al_abl_set *s) { return (s->rows + s->B - 1) / s->B; }

static int forward_batch(al_model *m, const al_abl_set *s, int k, al_err *e) {
    size_t off = (size_t)k * s->B * s->T;
    return al_model_forward(m, s->inputs + off, s->targets + off, batch_rows(s, k), s->T, e);
}

int al_abl_prepare(al_model *m, al_abl_set *s, al_err *e) {
    int L = m->cfg.n_layers, H = m->cfg.n_heads, D = m->cfg.d_head, T = s->T;
    size_t n = (size_t)s->rows * T, zn = (size_t)L * H * T * D;
    free(s->clean);
    free(s->zmean);
    s->clean = al_malloc(n, sizeof(float), e);
    s->zmean = al_malloc(zn, sizeof(float), e);
    double *acc = al_calloc(zn, sizeof(double), e);
    if (!s->clean || !s->zmean || !acc) {
        free(acc);
        return -1;
    }
    s->L = L, s->H = H, s->D = D;
    for (int k = 0; k < n_batches(s); k++) {
        if (s->stop && *s->stop) {
            free(acc);
            return al_errf(e, "interrupted");
        }
        int Bk = batch_rows(s, k);
        if (forward_batch(m, s, k, e)) {
            free(acc);
            return -1;
        }
        memcpy(s->clean + (size_t)k * s->B * T, m->losses, sizeof(float) * (size_t)Bk * T);
        /* m->z is (L, Bk, T, H, D); acc is (L, H, T, D) */
        for (int l = 0; l < L; l++)
            for (int b = 0; b < Bk; b++)
                for (int t = 0; t < T; t++)
                    for (int h = 0; h < H; h++) {
                        const float *z = m->z + ((((size_t)l * Bk + b) * T + t) * H + h) * D;
                        double *a = acc + (((size_t)l * H + h) * T + t) * D;
                        for (int d = 0; d < D; d++) a[d] += z[d];
                    }
    }
    for (size_t i = 0; i < zn; i++) s->zmean[i] = (float)(acc[i] / s->rows);
    free(acc);
    double sum[AL_SEL_GROUPS] = {0};
    for (int g = 0; g < AL_SEL_GROUPS; g++) s->count[g] = 0;
    for (size_t i = 0; i < n; i++)
        for (int g = 0; g < AL_SEL_GROUPS; g++)
            if (s->sel[i] >> g & 1) sum[g] += s->clean[i], s->count[g]++;
    for (int g = 0; g < AL_SEL_GROUPS; g++)
        s->clean_mean[g] = s->count[g] ? sum[g] / s->count[g] : NAN;
    return 0;
}

/* ------------------------------------------------------------ sweeps */

const char *al_abl_method_name(al_abl_method m) {
    return m == AL_ABL_ZERO ? "zero" : m == AL_ABL_MEAN ? "mean" : "resample";
}

int al_abl_method_parse(const char *s, al_abl_method *out, al_err *e) {
    for (int m = AL_ABL_ZERO; m <= AL_ABL_RESAMPLE; m++)
        if (strcmp(s, al_abl_method_name(m)) == 0) {
            *out = m;
            return 0;
        }
    return al_errf(e, "unknown ablation method '%s' (zero, mean or resample)", s);
}

/* rep (L*H, B, T, D): every row of head i = zmean of head i. */
static void fill_mean(float *rep, const al_abl_set *s) {
    size_t TD = (size_t)s->T * s->D, LH = (size_t)s->L * s->H;
    for (size_t i = 0; i < LH; i++)
        for (int b = 0; b < s->B; b++)
            memcpy(rep + (i * s->B + b) * TD, s->zmean + i * TD, TD * sizeof(float));
}

/* rep row b of each head = clean z of row (b+1) mod Bk of this batch. */
static void fill_resample(float *rep, const al_model *m, const al_abl_set *s, int Bk) {
    int L = s->L, H = s->H, D = s->D, T = s->T;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int b = 0; b < Bk; b++)
                for (int t = 0; t < T; t++) {
                    int src = (b + 1) % Bk;
                    memcpy(rep + ((((size_t)l * H + h) * s->B + b) * T + t) * D,
                           m->z + ((((size_t)l * Bk + src) * T + t) * H + h) * D,
                           (size_t)D * sizeof(float));
                }
}

/* One ablated forward of batch k for set `on`: zero ablation through
 * the gates, mean and resample ablation through a z replacement hook
 * (hooks.h) whose per-head pointers are zr (LH, scratch). Gates
 * restored, hook removed after. */
static int ablated_forward(al_model *m, const al_abl_set *s, int k, al_abl_method method,
                           const unsigned char *on, const float *rep, float *saved,
                           const float **zr, al_err *e) {
    int LH = s->L * s->H;
    size_t per = (size_t)s->B * s->T * s->D;
    for (int i = 0; i < LH; i++) {
        saved[i] = m->gates[i];
        zr[i] = NULL;
        if (!on[i]) continue;
        if (method == AL_ABL_ZERO)
            m->gates[i] = 0.0f;
        else
            zr[i] = rep + (size_t)i * per;
    }
    int rc = (method != AL_ABL_ZERO && al_zrep_hooks_add(m, zr, e)) || forward_batch(m, s, k, e);
    al_hook_remove(m, zr);
    for (int i = 0; i < LH; i++) m->gates[i] = saved[i];
    return rc ? -1 : 0;
}

void al_abl_row_counts(const al_abl_set *s, int g, double *n) {
    for (int r = 0; r < s->rows; r++) {
        n[r] = 0;
        for (int t = 0; t < s->T; t++) n[r] += s->sel[(size_t)r * s->T + t] >> g & 1;
    }
}

int al_abl_run(al_model *m, const al_abl_set *s, al_abl_method method, const unsigned char *sets,
               int n_sets, al_abl_out *out, double *rows, int progress, al_err *e) {
    int L = m->cfg.n_layers, H = m->cfg.n_heads, T = s->T, LH = L * H;
    if (!s->clean || s->L != L || s->H != H || s->D != m->cfg.d_head)
        return al_errf(e, "evaluation set not prepared for this model");
    if (method == AL_ABL_RESAMPLE && (s->B < 2 || s->rows % s->B == 1))
        return al_errf(e, "resample ablation needs batches of at least 2 sequences");
    float *rep = NULL, *saved = al_malloc((size_t)LH, sizeof(float), e);
    double *acc = al_calloc((size_t)n_sets * 2 * AL_SEL_GROUPS, sizeof(double), e);
    const float **zr = al_calloc((size_t)LH, sizeof *zr, e);
    if (!acc || !saved || !zr) {
        free(acc);
        free(saved);
        free(zr);
        return -1;
    }
    if (method != AL_ABL_ZERO) {
        rep = al_malloc((size_t)LH * s->B * T * s->D, sizeof(float), e);
        if (!rep) {
            free(acc);
            free(saved);
            free(zr);
            return -1;
        }
        if (method == AL_ABL_MEAN) fill_mean(rep, s);
    }
    if (rows) memset(rows, 0, (size_t)n_sets * s->rows * AL_SEL_GROUPS * sizeof *rows);
    al_progress pg;
    al_progress_init(&pg, 5.0);
    int nb = n_batches(s), rc = -1;
    long done = 0, total = (long)nb * n_sets;
    for (int k = 0; k < nb; k++) {
        if (s->stop && *s->stop) {
            al_errf(e, "interrupted");
            goto out;
        }
        int Bk = batch_rows(s, k);
        if (method == AL_ABL_RESAMPLE) {
            if (forward_batch(m, s, k, e)) goto out;
            fill_resample(rep, m, s, Bk);
        }
        const float *clean = s->clean + (size_t)k * s->B * T;
        const unsigned char *sel = s->sel + (size_t)k * s->B * T;
        for (int i = 0; i < n_sets; i++) {
            if (ablated_forward(m, s, k, method, sets + (size_t)i * LH, rep, saved, zr, e))
                goto out;
            double *a = acc + (size_t)i * 2 * AL_SEL_GROUPS;
            /* this batch's sequences' sums, row k·B + p/T of set i */
            double *rs =
                rows ? rows + ((size_t)i * s->rows + (size_t)k * s->B) * AL_SEL_GROUPS : NULL;
            for (size_t p = 0; p < (size_t)Bk * T; p++)
                for (int g = 0; g < AL_SEL_GROUPS; g++)
                    if (sel[p] >> g & 1) {
                        double d = (double)m->losses[p] - clean[p];
                        a[g] += m->losses[p];
                        a[AL_SEL_GROUPS + g] += d;
                        if (rs) rs[p / T * AL_SEL_GROUPS + g] += d;
                    }
            if (progress) {
                done++;
                al_progress_count(&pg, 0, (double)done, (double)total,
                                  "ablation: %ld/%ld forward passes", done, total);
            }
        }
    }
    for (int i = 0; i < n_sets; i++)
        for (int g = 0; g < AL_SEL_GROUPS; g++) {
            const double *a = acc + (size_t)i * 2 * AL_SEL_GROUPS;
            long c = s->count[g];
            out[i].loss[g] = c ? a[g] / c : NAN;
            out[i].delta[g] = c ? a[AL_SEL_GROUPS + g] / c : NAN;
        }
    rc = 0;
out:
    if (progress) al_progress_done(&pg);
    free(rep);
    free(saved);
    free(zr);
    free(acc);
    return rc;
}

int al_abl_evaluate(al_model *m, const al_abl_set *text, const al_abl_set *probe,
                    al_abl_method method, const unsigned char *sets, int n_sets,
                    al_abl_metrics *out, double *text_rows, double *probe_rows, int progress,
                    al_err *e) {
    al_abl_out *o = al_malloc((size_t)n_sets, sizeof *o, e);
    if (!o) return -1;
    for (int i = 0; i < n_sets; i++) out[i] = (al_abl_metrics){NAN, NAN, NAN, NAN};
    int rc = 0;
    if (text && !(rc = al_abl_run(m, text, method, sets, n_sets, o, text_rows, progress, e)))
        for (int i = 0; i < n_sets; i++) {
            out[i].loss = o[i].loss[0];
            out[i].delta_loss = o[i].delta[0];
            out[i].delta_copy = o[i].delta[1];
        }
    if (!rc && probe &&
        !(rc = al_abl_run(m, probe, method, sets, n_sets, o, probe_rows, progress, e)))
        for (int i = 0; i < n_sets; i++) out[i].delta_probe = o[i].delta[2];
    free(o);
    return rc;
}

/* ------------------------------------------------------- head lists */

/* A head list quoted in a message: one line, at most 40 bytes, control
 * bytes as '?' (lists also come from files). */
typedef struct quoted {
    char s[48];
} quoted;
static quoted quote(const char *s) {
    quoted q;
    size_t i = 0;
    for (; s[i] && i < 40; i++) q.s[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (s[i]) memcpy(q.s + i, "...", 3), i += 3;
    q.s[i] = 0;
    return q;
}

int al_heads_parse(const char *s, int L, int H, unsigned char *sel, al_err *e) {
    memset(sel, 0, (size_t)L * H);
    const char *p = s;
    int n = 0;
    while (*p) {
        char *end;
        errno = 0;
        long l = strtol(p, &end, 10);
        if (end == p || *end != '.' || errno)
            return al_errf(e, "bad head list '%s': expected layer.head like 0.3,1.4", quote(s).s);
        p = end + 1;
        long h = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || errno)
            return al_errf(e, "bad head list '%s': expected layer.head like 0.3,1.4", quote(s).s);
        if (l < 0 || l >= L || h < 0 || h >= H)
            return al_errf(e, "head %ld.%ld is not in the model (%d layers x %d heads)", l, h, L,
                           H);
        if (sel[l * H + h]) return al_errf(e, "head %ld.%ld is listed twice", l, h);
        sel[l * H + h] = 1;
        n++;
        p = *end ? end + 1 : end;
        if (*end && !*p) return al_errf(e, "bad head list '%s': trailing comma", quote(s).s);
    }
    if (!n) return al_errf(e, "empty head list");
    return 0;
}

size_t al_heads_format(const unsigned char *sel, int L, int H, int want, char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i < L * H; i++) {
        if ((sel[i] != 0) != (want != 0)) continue;
        char one[32];
        int k = snprintf(one, sizeof one, "%s%d.%d", n ? "," : "", i / H, i % H);
        if (n + (size_t)k < cap)
            memcpy(buf + n, one, (size_t)k + 1);
        else if (cap)
            buf[cap - 1 < n ? cap - 1 : n] = 0;
        n += (size_t)k;
    }
    return n;
}

/* ------------------------------------------------------------- masks */

void al_mask_apply(al_model *m, const unsigned char *off) {
    al_model_reset_gates(m);
    for (int i = 0; i < m->cfg.n_layers * m->cfg.n_heads; i++)
        if (off[i]) m->gates[i] = 0.0f;
}

static int is_int(const cJSON *j) {
    return cJSON_IsNumber(j) && j->valuedouble == floor(j->valuedouble) &&
           fabs(j->valuedouble) < 1e9;
}

static int mask_off_list(const cJSON *arr, const char *path, const al_config *c, unsigned char *off,
                         al_err *e) {
    int L = c->n_layers, H = c->n_heads;
    unsigned char *one = al_malloc((size_t)L * H, 1, e);
    if (!one) return -1;
    memset(off, 0, (size_t)L * H);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (!cJSON_IsString(it)) {
            free(one);
            return al_errf(e, "mask %s: \"off\" must hold strings like \"0.3\"", path);
        }
        if (strchr(it->valuestring, ',')) {
            free(one);
            return al_errf(e, "mask %s: \"off\" entry \"%s\" must name one head", path,
                           quote(it->valuestring).s);
        }
        if (al_heads_parse(it->valuestring, L, H, one, e)) {
            free(one);
            return al_err_prefix(e, "mask %s", path);
        }
        for (int i = 0; i < L * H; i++)
            if (one[i]) {
                if (off[i]) {
                    free(one);
                    return al_errf(e, "mask %s: head %s is listed twice", path,
                                   quote(it->valuestring).s);
                }
                off[i] = 1;
            }
    }
    free(one);
    return 0;
}

int al_mask_load(const char *path, const al_config *c, unsigned char *off, al_err *e) {
    unsigned char *text;
    size_t n;
    if (al_read_file(path, &text, &n, 1u << 24, e)) return -1;
    cJSON *root = NULL;
    int rc = al_json_parse((const char *)text, n, path, &root, e);
    free(text);
    if (rc) return -1;
    static const char *known[] = {"attnlab_mask", "n_layers", "n_heads",   "off",  "method",
                                  "budget",       "seed",     "base_loss", "loss", "heads_left"};
    const cJSON *it, *nl = NULL, *nh = NULL, *ol = NULL;
    rc = -1;
    if (!cJSON_IsObject(root)) {
        al_errf(e, "mask %s: expected a JSON object", path);
        goto out;
    }
    cJSON_ArrayForEach(it, root) {
        size_t k = 0;
        while (k < sizeof known / sizeof *known && strcmp(known[k], it->string)) k++;
        if (k == sizeof known / sizeof *known) {
            al_errf(e, "mask %s: unknown key \"%s\"", path, quote(it->string).s);
            goto out;
        }
        if (k == 0 && !(is_int(it) && it->valuedouble == 1)) {
            al_errf(e, "mask %s: \"attnlab_mask\" must be 1", path);
            goto out;
        }
        if (k == 1) nl = it;
        if (k == 2) nh = it;
        if (k == 3) ol = it;
        if (k == 4 && !cJSON_IsString(it) && !cJSON_IsNull(it)) {
            al_errf(e, "mask %s: \"method\" must be a string", path);
            goto out;
        }
        if (k >= 5 && !cJSON_IsNumber(it) && !cJSON_IsNull(it)) {
            al_errf(e, "mask %s: \"%s\" must be a number", path, it->string);
            goto out;
        }
    }
    if (!nl || !nh || !ol) {
        al_errf(e, "mask %s: needs \"n_layers\", \"n_heads\" and \"off\"", path);
        goto out;
    }
    if (!is_int(nl) || !is_int(nh) || (int)nl->valuedouble != c->n_layers ||
        (int)nh->valuedouble != c->n_heads) {
        al_errf(e, "mask %s: is for %g layers x %g heads, the model has %d x %d", path,
                cJSON_IsNumber(nl) ? nl->valuedouble : NAN,
                cJSON_IsNumber(nh) ? nh->valuedouble : NAN, c->n_layers, c->n_heads);
        goto out;
    }
    if (!cJSON_IsArray(ol)) {
        al_errf(e, "mask %s: \"off\" must be an array", path);
        goto out;
    }
    rc = mask_off_list(ol, path, c, off, e);
out:
    cJSON_Delete(root);
    return rc;
}

static void add_num(cJSON *o, const char *k, double v) {
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

char *al_mask_text(const al_config *c, const unsigned char *off, const al_mask_info *info,
                   al_err *e) {
    int L = c->n_layers, H = c->n_heads, left = 0;
    cJSON *o = cJSON_CreateObject(), *arr = NULL;
    if (!o) return al_errf(e, "out of memory"), NULL;
    cJSON_AddNumberToObject(o, "attnlab_mask", 1);
    cJSON_AddNumberToObject(o, "n_layers", L);
    cJSON_AddNumberToObject(o, "n_heads", H);
    arr = cJSON_AddArrayToObject(o, "off");
    for (int i = 0; i < L * H; i++) {
        char name[32];
        snprintf(name, sizeof name, "%d.%d", i / H, i % H);
        if (off[i])
            cJSON_AddItemToArray(arr, cJSON_CreateString(name));
        else
            left++;
    }
    cJSON_AddNumberToObject(o, "heads_left", left);
    if (info) {
        if (info->method) cJSON_AddStringToObject(o, "method", info->method);
        add_num(o, "budget", info->budget);
        if (info->has_seed) cJSON_AddNumberToObject(o, "seed", (double)info->seed);
        add_num(o, "base_loss", info->base_loss);
        add_num(o, "loss", info->loss);
    }
    char *s = al_json_print(1, o);
    cJSON_Delete(o);
    size_t n = s ? strlen(s) : 0;
    char *t = s ? realloc(s, n + 2) : NULL;
    if (!t) {
        free(s);
        return al_errf(e, "out of memory"), NULL;
    }
    t[n] = '\n', t[n + 1] = 0;
    return t;
}

int al_mask_save(const char *path, const al_config *c, const unsigned char *off,
                 const al_mask_info *info, al_err *e) {
    char *s = al_mask_text(c, off, info, e);
    if (!s) return -1;
    int rc = al_write_file_atomic(path, s, strlen(s), e);
    free(s);
    return rc;
}

/* ----------------------------------------------------------- pruning */

const char *al_prune_method_name(al_prune_method m) {
    return m == AL_PRUNE_ABLATION ? "ablation" : m == AL_PRUNE_GRADIENT ? "gradient" : "random";
}

int al_prune_method_parse(const char *s, al_prune_method *out, al_err *e) {
    for (int m = AL_PRUNE_ABLATION; m <= AL_PRUNE_RANDOM; m++)
        if (strcmp(s, al_prune_method_name(m)) == 0) {
            *out = m;
            return 0;
        }
    return al_errf(e, "unknown pruning method '%s' (ablation, gradient or random)", s);
}

void al_prune_result_free(al_prune_result *r) {
    free(r->steps);
    free(r->removal_off);
    free(r->off);
    free(r->importance0);
    memset(r, 0, sizeof *r);
}

int al_gate_importance(al_model *m, const al_abl_set *s, double *imp, al_err *e) {
    int LH = m->cfg.n_layers * m->cfg.n_heads, T = s->T;
    for (int i = 0; i < LH; i++) imp[i] = 0;
    long n = 0;
    for (int r = 0; r < s->rows; r++) {
        if (s->stop && *s->stop) return al_errf(e, "interrupted");
        const int *tg = s->targets + (size_t)r * T;
        int any = 0;
        for (int t = 0; t < T && !any; t++) any = tg[t] >= 0;
        if (!any) continue;
        if (al_model_forward(m, s->inputs + (size_t)r * T, tg, 1, T, e) || al_model_backward(m, e))
            return -1;
        for (int i = 0; i < LH; i++) imp[i] += fabs(m->gate_grads[i]);
        n++;
    }
    if (!n) return al_errf(e, "gradient importance: the set has no targets");
    for (int i = 0; i < LH; i++) imp[i] /= n;
    return 0;
}

void al_importance_normalise(double *imp, const unsigned char *off, int L, int H) {
    for (int l = 0; l < L; l++) {
        double s = 0;
        for (int h = 0; h < H; h++)
            if (!off || !off[l * H + h]) s += imp[l * H + h] * imp[l * H + h];
        s = sqrt(s);
        for (int h = 0; h < H; h++) imp[l * H + h] = s > 0 ? imp[l * H + h] / s : 0;
    }
}

/* Importance of every head still on (others untouched) under mask off. */
static int importance(al_model *m, al_abl_set *est, al_prune_method method,
                      const unsigned char *off, al_rng *rng, double *imp, al_err *e) {
    int LH = m->cfg.n_layers * m->cfg.n_heads, rc = 0;
    if (method == AL_PRUNE_RANDOM) {
        for (int i = 0; i < LH; i++)
            if (!off[i]) imp[i] = al_rng_uniform(rng);
        return 0;
    }
    if (method == AL_PRUNE_GRADIENT) {
        if (al_gate_importance(m, est, imp, e)) return -1;
        al_importance_normalise(imp, off, m->cfg.n_layers, m->cfg.n_heads);
        return 0;
    }
    /* ablation: Δloss of zero-ablating each remaining head alone */
    int n = 0;
    for (int i = 0; i < LH; i++) n += !off[i];
    unsigned char *sets = al_calloc((size_t)n * LH, 1, e);
    al_abl_out *o = al_malloc((size_t)n, sizeof *o, e);
    if (!sets || !o || al_abl_prepare(m, est, e)) {
        rc = -1;
        goto out;
    }
    for (int i = 0, k = 0; i < LH; i++)
        if (!off[i]) sets[(size_t)k++ * LH + i] = 1;
    if ((rc = al_abl_run(m, est, AL_ABL_ZERO, sets, n, o, NULL, 0, e)) == 0)
        for (int i = 0, k = 0; i < LH; i++)
            if (!off[i]) imp[i] = o[k++].delta[0];
out:
    free(sets);
    free(o);
    return rc;
}

int al_prune(al_model *m, al_abl_set *est, al_abl_set *eval, al_prune_method method, double budget,
             uint64_t seed, int progress, al_prune_result *out, al_err *e) {
    int L = m->cfg.n_layers, H = m->cfg.n_heads, LH = L * H;
    memset(out, 0, sizeof *out);
    out->steps = al_calloc((size_t)LH + 1, sizeof *out->steps, e);
    out->removal_off = al_calloc(((size_t)LH + 1) * LH, 1, e);
    out->off = al_calloc((size_t)LH, 1, e);
    out->importance0 = al_calloc((size_t)LH, sizeof(double), e);
    unsigned char *cur = al_calloc((size_t)LH, 1, e);
    double *imp = al_calloc((size_t)LH, sizeof(double), e);
    int rc = -1;
    if (!out->steps || !out->removal_off || !out->off || !out->importance0 || !cur || !imp)
        goto out;
    al_rng rng;
    al_rng_seed(&rng, seed);
    al_model_reset_gates(m);
    if (al_abl_prepare(m, eval, e)) goto out;
    double base = out->base_loss = eval->clean_mean[0];
    out->steps[0] = (al_prune_step){0, -1, -1, LH, 0, NAN, base, 0.0};
    out->n_steps = 1;
    al_progress pg;
    al_progress_init(&pg, 5.0);
    for (int step = 1; step <= LH; step++) {
        if (importance(m, est, method, cur, &rng, imp, e)) goto out;
        if (step == 1) memcpy(out->importance0, imp, sizeof(double) * (size_t)LH);
        int best = -1;
        for (int i = 0; i < LH; i++)
            if (!cur[i] && (best < 0 || imp[i] < imp[best])) best = i;
        cur[best] = 1;
        al_mask_apply(m, cur);
        if (al_abl_prepare(m, eval, e)) goto out;
        double loss = eval->clean_mean[0];
        int over = budget >= 0 && loss > (1.0 + budget) * base;
        out->steps[step] = (al_prune_step){step, best / H,  best % H, LH - step,
                                           over, imp[best], loss,     loss - base};
        memcpy(out->removal_off + (size_t)step * LH, cur, (size_t)LH);
        out->n_steps = step + 1;
        if (progress)
            al_progress_count(&pg, 0, step, LH, "prune %s: step %d/%d removed %d.%d, loss %.4f",
                              al_prune_method_name(method), step, LH, best / H, best % H, loss);
        if (over) {
            out->stopped_by_budget = 1;
            break;
        }
        memcpy(out->off, cur, (size_t)LH);
    }
    if (progress) al_progress_done(&pg);
    rc = 0;
out:
    al_model_reset_gates(m);
    free(cur);
    free(imp);
    if (rc) al_prune_result_free(out);
    return rc;
}
