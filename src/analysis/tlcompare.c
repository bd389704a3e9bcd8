/* tlcompare.c -- the engine's activations against a reference file
 * (tlcompare.h): one capturing hook per point the file names, at every
 * layer, copying the activation into TransformerLens's contiguous shape;
 * then each tensor's error relative to its scale. */
#include "attnlab/tlcompare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/hooks.h"
#include "attnlab/process.h"
#include "attnlab/safetensors.h"

typedef struct capture {
    float **buf; /* [point · L + layer]: where that activation goes, or NULL */
    int L, B, T;
} capture;

/* Floats of one (b, t) row (one (b, h, t) row for the attention points),
 * the unit the hook's ld steps over. */
static size_t row_len(al_hook_point p, int nd, const int64_t *shape) {
    if (p == AL_HOOK_PATTERN || p == AL_HOOK_ATTN_SCORES) return (size_t)shape[3];
    if (nd == 4) return (size_t)(shape[2] * shape[3]);
    return (size_t)shape[nd - 1];
}

static int capture_fn(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    capture *c = ctx;
    float *dst = c->buf[(size_t)a->point * c->L + a->layer];
    if (!dst || a->input >= 0) return 0;
    const al_config *k = &a->m->cfg;
    int64_t shape[4];
    int nd =
        al_hook_shape(a->point, c->B, c->T, k->d_model, k->n_heads, k->d_head, k->d_vocab, shape);
    size_t total = 1, len = row_len(a->point, nd, shape), ld = a->ld ? a->ld : len;
    for (int i = 0; i < nd; i++) total *= (size_t)shape[i];
    for (size_t r = 0; r < total / len; r++)
        memcpy(dst + r * len, a->data + r * ld, sizeof(float) * len);
    return 0;
}

/* The error of ours against ref (n floats each). */
static void compare_rows(const float *ours, const float *ref, size_t n, al_compare_row *row) {
    double mx = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double a = ours[i], b = ref[i];
        if (isinf(b) && a == b) continue; /* masked scores: −inf in both */
        double d = isfinite(a) && isfinite(b) ? fabs(a - b) : INFINITY;
        if (d > mx || isnan(d)) mx = isnan(d) ? INFINITY : d;
        if (isfinite(b) && fabs(b) > scale) scale = fabs(b);
    }
    row->max_abs = mx, row->scale = scale, row->n = (int64_t)n;
    row->rel = mx == 0 ? 0 : scale > 0 ? mx / scale : INFINITY;
}

/* The reference's processing (metadata) is the model's own. */
static int check_processing(const al_st_file *f, const al_model *m, const char *path, al_err *e) {
    const char *p = al_st_meta(f, "processing");
    if (!p) return 0;
    unsigned bits = 0;
    for (const char *s = p; *s;) {
        size_t k = strcspn(s, ",");
        char nm[64];
        snprintf(nm, sizeof nm, "%.*s", (int)(k < 63 ? k : 63), s);
        unsigned b = al_process_parse(nm);
        if (!b && k)
            return al_errf(e, "%s: metadata processing names '%s', no step of TransformerLens's",
                           path, nm);
        bits |= b;
        s += k + (s[k] == ',');
    }
    if (bits == m->cfg.processed) return 0;
    char mine[128] = "";
    size_t n = 0;
    for (unsigned b = 1; b <= AL_PROC_FOLD_VALUE_BIASES; b <<= 1)
        if (m->cfg.processed & b)
            n += (size_t)snprintf(mine + n, sizeof mine - n, "%s%s", n ? "," : "",
                                  al_process_name(b));
    return al_errf(e,
                   "%s was made from weights processed with '%s' but this model's are processed "
                   "with '%s': import it with the same processing (--no-fold-ln etc.)",
                   path, p, n ? mine : "none");
}

int al_compare_run(al_model *m, const char *ref_path, double tol, al_compare_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    r->worst_row = -1;
    al_st_file *f;
    if (al_st_open(ref_path, &f, e)) return -1;
    const al_config *c = &m->cfg;
    const int L = c->n_layers, NP = AL_HOOK_N_POINTS;
    capture cap = {.L = L};
    float **ours = NULL;
    int *tok = NULL, rc = -1;
    unsigned char added[AL_HOOK_N_POINTS] = {0};
    const al_st_tensor *tt = al_st_get(f, "tokens");
    if (check_processing(f, m, ref_path, e)) goto done;
    if (!tt || tt->dtype != AL_DT_I32 || tt->ndim != 2) {
        al_errf(e, "%s: no tokens (B, T) of dtype I32", ref_path);
        goto done;
    }
    int B = (int)tt->shape[0], T = (int)tt->shape[1], n = al_st_count(f);
    if (B < 1 || T < 1 || T > c->n_ctx || (int64_t)B * T > 1 << 24) {
        al_errf(e, "%s: tokens of shape (%d, %d): need 1..n_ctx (%d) positions", ref_path, B, T,
                c->n_ctx);
        goto done;
    }
    cap.B = r->B = B, cap.T = r->T = T;
    tok = al_malloc((size_t)B * T, sizeof *tok, e);
    cap.buf = al_calloc((size_t)NP * L, sizeof *cap.buf, e);
    ours = al_calloc((size_t)n, sizeof *ours, e);
    r->rows = al_calloc((size_t)n, sizeof *r->rows, e);
    if (!tok || !cap.buf || !ours || !r->rows) goto done;
    memcpy(tok, tt->data, sizeof(int) * (size_t)B * T); /* little-endian, as the file */
    size_t ns = 0;
    for (int i = 0; i < n; i++) {
        const al_st_tensor *t = al_st_at(f, i);
        if (t == tt) continue;
        al_hook_point p = AL_HOOK_LOGITS;
        int l = 0;
        if (strcmp(t->name, "logits") && al_hook_parse(t->name, L, &p, &l, e)) goto done;
        if (p == AL_HOOK_Q_INPUT || p == AL_HOOK_K_INPUT || p == AL_HOOK_V_INPUT) {
            int w =
                snprintf(r->skipped + ns, sizeof r->skipped - ns, "%s%s", ns ? "," : "", t->name);
            if (w > 0 && ns + (size_t)w < sizeof r->skipped) ns += (size_t)w;
            continue;
        }
        int64_t shape[4];
        int nd = al_hook_shape(p, B, T, c->d_model, c->n_heads, c->d_head, c->d_vocab, shape);
        int same = t->dtype == AL_DT_F32 && t->ndim == nd;
        size_t total = 1;
        for (int d = 0; same && d < nd; d++)
            same = t->shape[d] == shape[d], total *= (size_t)shape[d];
        if (!same) {
            al_errf(e, "%s: tensor %s is not F32 of this model's shape for its hook point",
                    ref_path, t->name);
            goto done;
        }
        float **slot = &cap.buf[(size_t)p * L + l];
        if (*slot) {
            al_errf(e, "%s: hook point %s twice", ref_path, t->name);
            goto done;
        }
        if (!(*slot = al_malloc(total, sizeof(float), e))) goto done;
        ours[i] = *slot;
        snprintf(r->rows[r->n].name, sizeof r->rows[r->n].name, "%s", t->name);
        r->rows[r->n++].n = (int64_t)i; /* the tensor's index, until compared */
        if (!added[p] && al_hook_add(m, p, -1, capture_fn, &cap, e)) goto done;
        added[p] = 1;
    }
    if (al_model_forward(m, tok, NULL, B, T, e)) goto done;
    for (int k = 0; k < r->n; k++) {
        al_compare_row *row = &r->rows[k];
        int i = (int)row->n;
        const al_st_tensor *t = al_st_at(f, i);
        size_t total = 1;
        for (int d = 0; d < t->ndim; d++) total *= (size_t)t->shape[d];
        float *ref = al_malloc(total, sizeof(float), e);
        if (!ref) goto done;
        memcpy(ref, t->data, sizeof(float) * total); /* not al_st_read_f32: −inf is data here */
        compare_rows(ours[i], ref, total, row);
        free(ref);
        row->pass = row->rel <= tol;
        if (r->worst_row < 0 || row->rel > r->worst) r->worst = row->rel, r->worst_row = k;
    }
    r->pass = r->n > 0;
    for (int k = 0; k < r->n; k++) r->pass &= r->rows[k].pass;
    rc = 0;
done:
    al_hook_remove(m, &cap);
    for (int q = 0; cap.buf && q < NP * L; q++) free(cap.buf[q]);
    free(cap.buf);
    free(ours);
    free(tok);
    al_st_close(f);
    if (rc) al_compare_free(r);
    return rc;
}

void al_compare_free(al_compare_result *r) {
    free(r->rows);
    memset(r, 0, sizeof *r);
    r->worst_row = -1;
}
