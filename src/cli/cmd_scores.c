/* cmd_scores.c -- `attnlab scores`: behavioural head scores (DESIGN §5)
 * into the database, and a summary naming the induction heads and the
 * previous-token heads.
 *
 * Both named kinds use the same threshold, 0.4 of the attention on the
 * defining position: far above what an unspecialised head gives (uniform
 * causal attention puts ≈ ln(T)/T ≈ 0.05 on any one position of a
 * 101-token probe). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/ablate.h"
#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/scores.h"

#define INDUCTION_HEAD 0.4
#define PREV_TOKEN_HEAD 0.4

static const char *o_model = NULL, *o_db = NULL, *o_data = NULL, *o_mask = NULL;
static int o_r = 50, o_n = 64, o_batches = 4, o_batch = 8, o_threads = 0;
static uint64_t o_seed = 1;

static al_flag flags[] = {
    {"model", AL_STR, &o_model, "DIR", "model directory (from attnlab train)", 1, 0},
    {"db", AL_STR, &o_db, "FILE", "SQLite database to add the results to (created if missing)", 1, 0},
    {"data", AL_STR, &o_data, "VAL.bin",
     "validation tokens for icl_score and copying_ablation (skipped without)", 0, 0},
    {"probe-r", AL_INT, &o_r, "R", "random tokens per repeat of the probe", 0, 0},
    {"probe-n", AL_INT, &o_n, "N", "probe sequences", 0, 0},
    {"probe-seed", AL_U64, &o_seed, "S", "probe seed", 0, 0},
    {"batches", AL_INT, &o_batches, "N", "validation batches (windows of the trained length)", 0, 0},
    {"batch", AL_INT, &o_batch, "B", "sequences per validation batch", 0, 0},
    {"mask", AL_STR, &o_mask, "FILE", "head mask (JSON, from attnlab prune): these heads are off", 0, 0},
    {"threads", AL_INT, &o_threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

static int run_scores(int argc, char **argv);
al_command al_cmd_scores = {
    "scores",
    "measure induction, previous-token, duplicate-token and copying heads by running the model",
    "--model DIR --db FILE [--data VAL.bin] [--probe-r 50 --probe-n 64] [--mask FILE]",
    "The probe: <|endoftext|> + R random tokens + the same R tokens again, N\n"
    "sequences. Per head: induction = mean attention from the second repeat to\n"
    "the token after the current token's first occurrence (t -> t-R+1);\n"
    "duplicate_token = to that occurrence itself (t -> t-R); prev_token = to the\n"
    "previous token (t -> t-1, t >= 2). Per model: icl_gain = probe loss on the\n"
    "first repeat - on the second. With --data, on validation windows: icl_score\n"
    "= loss at late - at early positions (Olsson et al.; n_ctx 256: positions\n"
    "246..255 - 20..29; negative = in-context learning) and per head\n"
    "copying_ablation = mean drop in log p(next token) at copy positions (next\n"
    "token already in the window) when the head is mean-ablated, and\n"
    "copying_ablation_excess = that drop minus the mean drop at the other\n"
    "positions (what the head does for copying beyond its general use). Heads with\n"
    "induction > 0.4 are named induction heads, prev_token > 0.4 previous-token\n"
    "heads. Tables head_scores and model_scores (one run).",
    flags,
    run_scores,
};

typedef struct text_res {
    int have, T;
    double loss, loss_copy, copy_frac, early, late, icl;
    al_icl_range rg;
    double *copying; /* (L*H), NaN for heads off */
    double *excess;  /* (L*H) copying_ablation_excess, in the same allocation */
} text_res;

/* icl_score and copying_ablation on the validation windows. */
static int text_scores(al_behave *b, text_res *r, al_err *e) {
    al_tokens d = {0};
    al_abl_set s = {0};
    int L = b->m.cfg.n_layers, H = b->m.cfg.n_heads, LH = L * H, rc = -1, n = 0;
    unsigned char *sets = NULL;
    al_abl_out *o = NULL;
    r->copying = al_malloc((size_t)LH * 2, sizeof(double), e);
    r->excess = r->copying ? r->copying + LH : NULL;
    if (!r->copying || al_behave_tokens(b, o_data, &d, &r->T, e) ||
        al_abl_set_text(&s, &d, r->T, o_batch, 0, o_batches, o_batches, b->m.cfg.d_vocab, e) ||
        al_abl_prepare(&b->m, &s, e) ||
        al_icl_score(s.clean, s.targets, s.rows, s.T, &r->early, &r->late, &r->icl, e))
        goto out;
    r->rg = al_icl_ranges(s.T);
    r->loss = s.clean_mean[0];
    r->loss_copy = s.clean_mean[1];
    r->copy_frac = (double)s.count[1] / s.count[0];
    for (int i = 0; i < LH; i++) n += !b->off[i];
    sets = al_calloc((size_t)(n ? n : 1) * LH, 1, e);
    o = al_malloc((size_t)(n ? n : 1), sizeof *o, e);
    if (!sets || !o) goto out;
    for (int i = 0, k = 0; i < LH; i++)
        if (!b->off[i]) sets[(size_t)k++ * LH + i] = 1;
    if (n && al_abl_run(&b->m, &s, AL_ABL_MEAN, sets, n, o, 1, e)) goto out;
    /* Mean Δ at the other positions, from the mean over all and over copy
     * positions: Δrest = (c0 Δall − c1 Δcopy) / (c0 − c1). */
    long c0 = s.count[0], c1 = s.count[1];
    for (int i = 0, k = 0; i < LH; i++) {
        if (b->off[i]) {
            r->copying[i] = r->excess[i] = NAN;
            continue;
        }
        const al_abl_out *x = &o[k++];
        double rest = c0 > c1 ? (c0 * x->delta[0] - c1 * x->delta[1]) / (double)(c0 - c1) : NAN;
        r->copying[i] = x->delta[1];
        r->excess[i] = c1 > 0 ? x->delta[1] - rest : NAN;
    }
    r->have = 1;
    rc = 0;
out:
    free(sets);
    free(o);
    al_abl_set_free(&s);
    al_tokens_free(&d);
    return rc;
}

static int store_all(al_behave *b, const al_probe_scores *ps, const text_res *tr, al_err *e) {
    int L = b->m.cfg.n_layers, H = b->m.cfg.n_heads;
    al_store *st = b->st;
    int64_t run = b->run_id, mid = b->model_id;
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            int i = l * H + h;
            if (al_store_put_head_score(st, run, mid, l, h, "induction", ps->induction[i], e) ||
                al_store_put_head_score(st, run, mid, l, h, "duplicate_token",
                                        ps->duplicate_token[i], e) ||
                al_store_put_head_score(st, run, mid, l, h, "prev_token", ps->prev_token[i], e))
                return -1;
            if (tr->have && !b->off[i] &&
                (al_store_put_head_score(st, run, mid, l, h, "copying_ablation", tr->copying[i], e) ||
                 al_store_put_head_score(st, run, mid, l, h, "copying_ablation_excess",
                                         tr->excess[i], e)))
                return -1;
        }
    struct {
        const char *k;
        double v;
        int text;
    } ms[] = {{"icl_gain", ps->icl_gain, 0},       {"probe_loss_first", ps->loss_first, 0},
              {"probe_loss_second", ps->loss_second, 0}, {"icl_score", tr->icl, 1},
              {"icl_loss_early", tr->early, 1},    {"icl_loss_late", tr->late, 1},
              {"val_loss", tr->loss, 1},           {"val_loss_copy", tr->loss_copy, 1},
              {"copy_fraction", tr->copy_frac, 1}, {"heads_off", b->n_off, 0}};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++)
        if ((!ms[i].text || tr->have) &&
            al_store_put_model_score(st, run, mid, ms[i].k, ms[i].v, e))
            return -1;
    return 0;
}

/* "1.3 (0.87), 1.5 (0.45)" of heads with v > thr, strongest first. */
static void print_named(const char *what, const double *v, const unsigned char *off, int LH,
                        int H, double thr) {
    printf("%s: ", what);
    int any = 0, *used = calloc((size_t)LH, sizeof(int));
    if (!used) return;
    for (;;) {
        int best = -1;
        for (int i = 0; i < LH; i++)
            if (!used[i] && v[i] > thr && (best < 0 || v[i] > v[best])) best = i;
        if (best < 0) break;
        used[best] = 1;
        printf("%s%d.%d (%.3f%s)", any++ ? ", " : "", best / H, best % H, v[best],
               off[best] ? ", off" : "");
    }
    printf("%s\n", any ? "" : "none");
    free(used);
}

static void print_summary(const al_behave *b, const al_probe_scores *ps, const text_res *tr) {
    int L = b->m.cfg.n_layers, H = b->m.cfg.n_heads;
    printf("model %s (sha256 %.12s…; %d layer%s × %d heads%s) -> run %lld of %s\n", o_model, b->sha,
           L, L == 1 ? "" : "s", H, b->n_off ? ", masked" : "", (long long)b->run_id, o_db);
    printf("%-5s %9s %9s %9s %12s %12s\n", "head", "induction", "dup_token", "prev_tok",
           "copying_abl", "excess");
    for (int i = 0; i < L * H; i++) {
        printf("%d.%-3d %9.3f %9.3f %9.3f", i / H, i % H, ps->induction[i],
               ps->duplicate_token[i], ps->prev_token[i]);
        if (b->off[i]) printf(" %12s\n", "(off)");
        else if (tr->have && isnan(tr->excess[i])) printf(" %+12.4f %12s\n", tr->copying[i], "-");
        else if (tr->have) printf(" %+12.4f %+12.4f\n", tr->copying[i], tr->excess[i]);
        else printf(" %12s\n", "-");
    }
    printf("probe (R %d, N %d, seed %llu): loss first repeat %.4f, second %.4f, icl_gain %.4f\n",
           o_r, o_n, (unsigned long long)o_seed, ps->loss_first, ps->loss_second, ps->icl_gain);
    if (tr->have)
        printf("text %s (%d x %d windows of %d): loss %.4f; icl_score %+.4f (late %d..%d %.4f - "
               "early %d..%d %.4f); copy positions %.1f%% (loss %.4f)\n",
               o_data, o_batches, o_batch, tr->T, tr->loss, tr->icl, tr->rg.l0, tr->rg.l1 - 1,
               tr->late, tr->rg.e0, tr->rg.e1 - 1, tr->early, 100 * tr->copy_frac, tr->loss_copy);
    else
        printf("no --data: icl_score and copying_ablation skipped\n");
    print_named("induction heads (induction > 0.4)", ps->induction, b->off, L * H, H,
                INDUCTION_HEAD);
    print_named("previous-token heads (prev_token > 0.4)", ps->prev_token, b->off, L * H, H,
                PREV_TOKEN_HEAD);
}

static int run_scores(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_scores, &e);
    if (o_r < 2 || o_n < 1 || o_n > 1000000 || o_batches < 1 || o_batch < 1 ||
        o_batches > 100000 || o_batch > 100000) {
        al_errf(&e, "need --probe-r >= 2, 1 <= --probe-n <= 1000000, --batches and --batch in 1..100000");
        return al_cli_usage(&al_cmd_scores, &e);
    }
    al_set_threads(o_threads);
    al_behave b;
    al_probe p = {0};
    al_probe_scores ps = {0};
    text_res tr = {0};
    tr.icl = tr.early = tr.late = tr.loss = tr.loss_copy = tr.copy_frac = NAN;
    if (al_behave_open(&b, o_model, o_mask, o_db, "scores", flags, &e)) return al_cli_error(&e);
    int rc = 1;
    al_behave_warn_probe(&b, 2 * o_r + 1);
    if (al_probe_make(&p, o_r, o_n, o_seed, b.m.cfg.d_vocab, al_behave_bos(&b), &e) ||
        al_probe_run(&b.m, &p, 16, &ps, &e) || (o_data && text_scores(&b, &tr, &e)) ||
        al_store_tx_begin(b.st, &e) || store_all(&b, &ps, &tr, &e) ||
        al_store_run_finish(b.st, b.run_id, &e)) {
        al_behave_fail(&b, &e);
        al_cli_error(&e);
        goto out;
    }
    print_summary(&b, &ps, &tr);
    rc = 0;
out:
    free(tr.copying);
    al_probe_scores_free(&ps);
    al_probe_free(&p);
    al_behave_close(&b);
    return rc;
}
