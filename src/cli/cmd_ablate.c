/* cmd_ablate.c -- `attnlab ablate`: knock out heads (one set, each head,
 * or head pairs) and measure what breaks (DESIGN §5), into `ablations`.
 *
 * Pairs come with their singles, so each pair row carries the interaction
 * Δ(pair) − Δ(h1) − Δ(h2) of the validation Δloss; the same quantity for
 * the copy-position and probe Δ is printed (and is a join away in SQL).
 * Two heads in series (a previous-token head feeding an induction head)
 * give a negative interaction: either alone already breaks the circuit. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/ablate.h"
#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/scores.h"

static const char *o_model = NULL, *o_db = NULL, *o_data = NULL, *o_mask = NULL,
                  *o_heads = NULL, *o_method = "zero";
static int o_each = 0, o_pairs = 0, o_batches = 4, o_batch = 8, o_threads = 0, o_show = 10;
static int o_r = 50, o_n = 64;
static uint64_t o_seed = 1;

static al_flag flags[] = {
    {"model", AL_STR, &o_model, "DIR", "model directory (from attnlab train)", 1, 0},
    {"db", AL_STR, &o_db, "FILE", "SQLite database to add the results to (created if missing)", 1, 0},
    {"data", AL_STR, &o_data, "VAL.bin", "validation tokens (windows of the trained length)", 1, 0},
    {"heads", AL_STR, &o_heads, "LIST", "ablate this set of heads together, e.g. 0.3,1.4", 0, 0},
    {"each", AL_BOOL, &o_each, NULL, "ablate every head alone (the default)", 0, 0},
    {"pairs", AL_BOOL, &o_pairs, NULL,
     "every head alone and every pair (2 layers: the cross-layer pairs), with interactions", 0, 0},
    {"method", AL_STR, &o_method, "M", "zero, mean or resample", 0, 0},
    {"batches", AL_INT, &o_batches, "N", "validation batches", 0, 0},
    {"batch", AL_INT, &o_batch, "B", "sequences per validation batch", 0, 0},
    {"probe-r", AL_INT, &o_r, "R", "random tokens per repeat of the probe", 0, 0},
    {"probe-n", AL_INT, &o_n, "N", "probe sequences", 0, 0},
    {"probe-seed", AL_U64, &o_seed, "S", "probe seed", 0, 0},
    {"mask", AL_STR, &o_mask, "FILE", "head mask (JSON): these heads are off throughout", 0, 0},
    {"show", AL_INT, &o_show, "N", "pairs printed (largest |interaction| first)", 0, 0},
    {"threads", AL_INT, &o_threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

static int run_ablate(int argc, char **argv);
al_command al_cmd_ablate = {
    "ablate",
    "knock out heads (a set, each, or pairs) and measure the loss they leave behind",
    "--model DIR --db FILE --data VAL.bin [--heads 0.3,1.4 | --each | --pairs] [--method zero|mean|resample]",
    "Methods: zero (gate 0), mean (the head's output replaced by its mean over the\n"
    "evaluation sequences at the same position), resample (by its output on another\n"
    "sequence of the batch). Metrics: validation loss and Δloss; Δloss at copy\n"
    "positions (next token already in the window); Δloss on the probe's second\n"
    "repeat (what induction heads predict). --pairs adds every pair (for 2 layers the\n"
    "layer-0 x layer-1 pairs) with interaction = Δ(pair) - Δ(h1) - Δ(h2). Each\n"
    "configuration is a row in table ablations (kind none = the clean model, single,\n"
    "pair or set). Cost: one forward pass per configuration and batch.",
    flags,
    run_ablate,
};

typedef struct plan {
    int n, LH;
    unsigned char *sets; /* (n, LH) */
    int *a, *b;          /* heads of a single (b = -1) or pair; -1,-1 for a --heads set */
} plan;

/* Heads on (not masked) in the configuration list of the chosen mode. */
static int make_plan(const al_behave *bh, plan *p, al_err *e) {
    int L = bh->m.cfg.n_layers, H = bh->m.cfg.n_heads, LH = L * H;
    memset(p, 0, sizeof *p);
    p->LH = LH;
    size_t cap = (size_t)LH + (o_pairs ? (size_t)LH * (LH - 1) / 2 : 0) + 1;
    p->sets = al_calloc(cap * LH, 1, e);
    p->a = al_malloc(cap, sizeof(int), e);
    p->b = al_malloc(cap, sizeof(int), e);
    if (!p->sets || !p->a || !p->b) return -1;
    if (o_heads) {
        if (al_heads_parse(o_heads, L, H, p->sets, e)) return -1;
        for (int i = 0; i < LH; i++)
            if (p->sets[i] && bh->off[i])
                return al_errf(e, "head %d.%d is already off in the mask %s", i / H, i % H, o_mask);
        p->a[0] = p->b[0] = -1;
        p->n = 1;
        return 0;
    }
    for (int i = 0; i < LH; i++)
        if (!bh->off[i]) {
            p->sets[(size_t)p->n * LH + i] = 1;
            p->a[p->n] = i, p->b[p->n++] = -1;
        }
    if (o_pairs)
        for (int i = 0; i < LH; i++)
            for (int j = i + 1; j < LH; j++) {
                if (bh->off[i] || bh->off[j] || (L > 1 && i / H == j / H)) continue;
                p->sets[(size_t)p->n * LH + i] = p->sets[(size_t)p->n * LH + j] = 1;
                p->a[p->n] = i, p->b[p->n++] = j;
            }
    if (!p->n) return al_errf(e, "no head left to ablate (the mask turns them all off)");
    return 0;
}

static void plan_free(plan *p) {
    free(p->sets);
    free(p->a);
    free(p->b);
}

/* Index of the single-head configuration of head i (-1 if none). */
static int single_of(const plan *p, int i) {
    for (int k = 0; k < p->n; k++)
        if (p->b[k] < 0 && p->a[k] == i) return k;
    return -1;
}

/* Interaction of pair k on metric f (offset into al_abl_metrics). */
static double interaction(const plan *p, const al_abl_metrics *r, int k, size_t f) {
    if (p->b[k] < 0) return NAN;
    int s1 = single_of(p, p->a[k]), s2 = single_of(p, p->b[k]);
#define MET(i) (*(const double *)((const char *)&r[i] + f))
    return MET(k) - MET(s1) - MET(s2);
#undef MET
}

static int store_rows(al_behave *bh, const plan *p, const al_abl_metrics *r,
                      const al_abl_set *text, const al_abl_set *probe, al_err *e) {
    int H = bh->m.cfg.n_heads;
    const char *method = o_method;
    al_ablation_row base = {method, "none", "", 0, text->clean_mean[0], 0, 0,
                            probe->count[2] ? 0 : NAN, NAN};
    if (al_store_put_ablation(bh->st, bh->run_id, bh->model_id, &base, e)) return -1;
    size_t cap = (size_t)p->LH * 12 + 1;
    char *heads = al_malloc(cap, 1, e);
    if (!heads) return -1;
    for (int k = 0; k < p->n; k++) {
        int nh = 0;
        for (int i = 0; i < p->LH; i++) nh += p->sets[(size_t)k * p->LH + i] != 0;
        al_heads_format(p->sets + (size_t)k * p->LH, bh->m.cfg.n_layers, H, 1, heads, cap);
        al_ablation_row row = {method,
                               p->a[k] < 0 ? (nh == 1 ? "single" : "set")
                               : p->b[k] < 0 ? "single" : "pair",
                               heads, nh, r[k].loss, r[k].delta_loss, r[k].delta_copy,
                               r[k].delta_probe,
                               interaction(p, r, k, offsetof(al_abl_metrics, delta_loss))};
        if (al_store_put_ablation(bh->st, bh->run_id, bh->model_id, &row, e)) {
            free(heads);
            return -1;
        }
    }
    free(heads);
    return 0;
}

static void print_rows(const al_behave *bh, const plan *p, const al_abl_metrics *r,
                       const al_abl_set *text) {
    int H = bh->m.cfg.n_heads;
    char name[64];
    printf("%-12s %9s %9s %9s %9s\n", "ablated", "loss", "Δloss", "Δcopy", "Δprobe");
    printf("%-12s %9.4f %9s %9s %9s\n", "(none)", text->clean_mean[0], "-", "-", "-");
    for (int k = 0; k < p->n; k++) {
        if (p->b[k] >= 0) continue;
        if (p->a[k] >= 0) snprintf(name, sizeof name, "%d.%d", p->a[k] / H, p->a[k] % H);
        else if (strlen(o_heads) < sizeof name) snprintf(name, sizeof name, "%s", o_heads);
        else snprintf(name, sizeof name, "(set)");
        printf("%-12s %9.4f %+9.4f %+9.4f %+9.4f\n", name, r[k].loss, r[k].delta_loss,
               r[k].delta_copy, r[k].delta_probe);
    }
}

/* Pairs sorted by |interaction| on metric f, the first `show` printed. */
static void print_pairs(const al_behave *bh, const plan *p, const al_abl_metrics *r) {
    int H = bh->m.cfg.n_heads, np = 0;
    int *idx = malloc(sizeof(int) * (size_t)p->n);
    if (!idx) return;
    for (int k = 0; k < p->n; k++)
        if (p->b[k] >= 0) idx[np++] = k;
    size_t fl = offsetof(al_abl_metrics, delta_loss), fc = offsetof(al_abl_metrics, delta_copy),
           fp = offsetof(al_abl_metrics, delta_probe);
    /* insertion sort by |interaction| on the validation loss, descending */
    for (int i = 1; i < np; i++)
        for (int j = i; j > 0 && fabs(interaction(p, r, idx[j], fl)) >
                                     fabs(interaction(p, r, idx[j - 1], fl)); j--) {
            int t = idx[j];
            idx[j] = idx[j - 1], idx[j - 1] = t;
        }
    printf("pairs: interaction = Δ(pair) - Δ(h1) - Δ(h2), largest |interaction| on the "
           "validation loss first (%d of %d):\n", o_show < np ? o_show : np, np);
    printf("%-10s %9s %12s %12s %12s\n", "pair", "Δloss", "inter_loss", "inter_copy",
           "inter_probe");
    for (int i = 0; i < np && i < o_show; i++) {
        int k = idx[i];
        printf("%d.%d+%d.%-4d %+9.4f %+12.4f %+12.4f %+12.4f\n", p->a[k] / H, p->a[k] % H,
               p->b[k] / H, p->b[k] % H, r[k].delta_loss, interaction(p, r, k, fl),
               interaction(p, r, k, fc), interaction(p, r, k, fp));
    }
    const char *what[2] = {"copy positions", "probe second repeat"};
    size_t fs[2] = {fc, fp};
    for (int w = 0; w < 2 && np; w++) {
        int best = idx[0];
        for (int i = 0; i < np; i++)
            if (fabs(interaction(p, r, idx[i], fs[w])) > fabs(interaction(p, r, best, fs[w])))
                best = idx[i];
        printf("largest |interaction| on %s: %d.%d+%d.%d (%+.4f)\n", what[w], p->a[best] / H,
               p->a[best] % H, p->b[best] / H, p->b[best] % H, interaction(p, r, best, fs[w]));
    }
    free(idx);
}

static int run_ablate(int argc, char **argv) {
    al_err e;
    al_abl_method method;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_ablate, &e);
    if ((o_heads != NULL) + o_each + o_pairs > 1) {
        al_errf(&e, "give at most one of --heads, --each and --pairs");
        return al_cli_usage(&al_cmd_ablate, &e);
    }
    if (al_abl_method_parse(o_method, &method, &e)) return al_cli_usage(&al_cmd_ablate, &e);
    if (o_r < 2 || o_n < 1 || o_n > 1000000 || o_batches < 1 || o_batch < 1 ||
        o_batches > 100000 || o_batch > 100000 || o_show < 0) {
        al_errf(&e, "need --probe-r >= 2, 1 <= --probe-n <= 1000000, --batches and --batch in "
                    "1..100000, --show >= 0");
        return al_cli_usage(&al_cmd_ablate, &e);
    }
    if (method == AL_ABL_RESAMPLE && o_batch < 2) {
        al_errf(&e, "resample ablation needs --batch >= 2");
        return al_cli_usage(&al_cmd_ablate, &e);
    }
    al_set_threads(o_threads);
    al_behave bh;
    if (al_behave_open(&bh, o_model, o_mask, o_db, "ablate", flags, &e)) return al_cli_error(&e);
    al_tokens d = {0};
    al_probe pr = {0};
    al_abl_set text = {0}, probe = {0};
    plan p = {0};
    al_abl_metrics *r = NULL;
    int T, rc = 1;
    double t0 = al_now();
    if (make_plan(&bh, &p, &e) || !(r = al_malloc((size_t)p.n, sizeof *r, &e)) ||
        al_behave_tokens(&bh, o_data, &d, &T, &e) ||
        al_abl_set_text(&text, &d, T, o_batch, 0, o_batches, o_batches, bh.m.cfg.d_vocab, &e) ||
        al_probe_make(&pr, o_r, o_n, o_seed, bh.m.cfg.d_vocab, al_behave_bos(&bh), &e))
        goto fail;
    if (2 * o_r + 1 > bh.m.cfg.n_ctx) {
        al_errf(&e, "probe length 2R+1 = %d exceeds n_ctx %d (lower --probe-r)", 2 * o_r + 1,
                bh.m.cfg.n_ctx);
        goto fail;
    }
    al_behave_warn_probe(&bh, 2 * o_r + 1);
    int pb = 32; /* probe batch; for resample no batch may be a single row */
    while (method == AL_ABL_RESAMPLE && o_n % pb == 1 && pb < o_n) pb++;
    if (al_abl_set_probe(&probe, &pr, pb, &e)) goto fail;
    double t1 = al_now();
    if (al_abl_prepare(&bh.m, &text, &e) || al_abl_prepare(&bh.m, &probe, &e)) goto fail;
    double t_clean = al_now() - t1;
    if (al_abl_evaluate(&bh.m, &text, &probe, method, p.sets, p.n, r, 1, &e) ||
        al_store_tx_begin(bh.st, &e) || store_rows(&bh, &p, r, &text, &probe, &e) ||
        al_store_run_finish(bh.st, bh.run_id, &e))
        goto fail;
    printf("model %s (sha256 %.12s…) -> run %lld of %s; method %s, %d x %d windows of %d, "
           "probe R %d N %d\n",
           o_model, bh.sha, (long long)bh.run_id, o_db, o_method, o_batches, o_batch, T, o_r, o_n);
    print_rows(&bh, &p, r, &text);
    if (o_pairs) print_pairs(&bh, &p, r);
    double t_abl = al_now() - t1 - t_clean;
    printf("ablate: %d configuration%s in %.2f s (%.3f s each; one clean pass over the "
           "evaluation tokens took %.3f s; total %.2f s)\n", p.n, p.n == 1 ? "" : "s", t_abl,
           t_abl / p.n, t_clean, al_now() - t0);
    rc = 0;
    goto out;
fail:
    al_behave_fail(&bh, &e);
    al_cli_error(&e);
out:
    free(r);
    plan_free(&p);
    al_abl_set_free(&text);
    al_abl_set_free(&probe);
    al_probe_free(&pr);
    al_tokens_free(&d);
    al_behave_close(&bh);
    return rc;
}
