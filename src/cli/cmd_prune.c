/* cmd_prune.c -- `attnlab prune`: remove heads one at a time, least
 * important first, recording the loss curve (table pruning_steps), and
 * save the surviving heads as a mask file usable with --mask.
 *
 * The validation batches are split in two: importance is estimated on the
 * first half and the loss after each removal is measured on the second,
 * so a head is never judged on the tokens that chose it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/ablate.h"
#include "attnlab/args.h"
#include "attnlab/behave.h"

static const char *o_model = NULL, *o_db = NULL, *o_data = NULL, *o_method = NULL,
                  *o_out = NULL;
static int o_batches = 8, o_batch = 8, o_threads = 0;
static double o_budget = 0.1;
static uint64_t o_seed = 1;

static al_flag flags[] = {
    {"model", AL_STR, &o_model, "DIR", "model directory (from attnlab train)", 1, 0},
    {"db", AL_STR, &o_db, "FILE", "SQLite database to add the results to (created if missing)", 1, 0},
    {"data", AL_STR, &o_data, "VAL.bin", "validation tokens (windows of the trained length)", 1, 0},
    {"method", AL_STR, &o_method, "M", "importance: ablation, gradient or random", 1, 0},
    {"budget", AL_FLOAT, &o_budget, "F",
     "stop when the loss exceeds (1+F) x the loss with all heads (F < 0: prune every head)", 0, 0},
    {"seed", AL_U64, &o_seed, "S", "seed of the random method", 0, 0},
    {"batches", AL_INT, &o_batches, "N",
     "validation batches: the first half estimates importance, the second half measures loss", 0, 0},
    {"batch", AL_INT, &o_batch, "B", "sequences per validation batch", 0, 0},
    {"out", AL_STR, &o_out, "FILE", "mask file to write (default DIR/mask-<method>.json)", 0, 0},
    {"threads", AL_INT, &o_threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

static int run_prune(int argc, char **argv);
al_command al_cmd_prune = {
    "prune",
    "remove heads one at a time, least important first, and save the mask",
    "--model DIR --db FILE --data VAL.bin --method ablation|gradient|random [--budget 0.1]",
    "Each step removes (gates off) the remaining head of least importance, estimated\n"
    "on the first half of the validation batches with the heads removed so far:\n"
    "ablation = Δloss when the head is zero-ablated; gradient = Michel et al. 2019,\n"
    "E|dL/dg| over sequences, l2-normalised per layer; random = seeded baseline.\n"
    "The loss after the removal is measured on the second half. Steps go to table\n"
    "pruning_steps (step 0 = all heads). Stops when no head is left or a removal\n"
    "makes the loss exceed (1 + budget) x the all-heads loss; that last removal is\n"
    "recorded but not part of the mask. The mask (heads off, JSON) is written\n"
    "atomically to DIR/mask-<method>.json; use it with --mask in run, scores, ablate.\n"
    "With gradient, every head's importance in the full model also goes to\n"
    "head_scores as gradient_importance.",
    flags,
    run_prune,
};

static int store_steps(al_behave *bh, const al_prune_result *r, al_err *e) {
    int L = bh->m.cfg.n_layers, H = bh->m.cfg.n_heads, LH = L * H;
    size_t cap = (size_t)LH * 12 + 1;
    char *mask = al_malloc(cap, 1, e);
    if (!mask) return -1;
    for (int k = 0; k < r->n_steps; k++) {
        const al_prune_step *s = &r->steps[k];
        al_heads_format(r->removal_off + (size_t)k * LH, L, H, 0, mask, cap);
        al_pruning_row row = {o_method, s->step, s->layer, s->head, s->heads_left,
                              s->importance, s->loss, s->delta_loss, mask};
        if (al_store_put_pruning_step(bh->st, bh->run_id, bh->model_id, &row, e)) {
            free(mask);
            return -1;
        }
    }
    free(mask);
    /* Michel et al.'s head importance of the full model, beside the other
     * per-head scores (head_summary.gradient_importance) */
    if (strcmp(o_method, "gradient") == 0)
        for (int i = 0; i < LH; i++)
            if (al_store_put_head_score(bh->st, bh->run_id, bh->model_id, i / H, i % H,
                                        "gradient_importance", r->importance0[i], e))
                return -1;
    return 0;
}

static void print_steps(const al_prune_result *r) {
    printf("%4s %8s %11s %9s %9s %5s\n", "step", "removed", "importance", "loss", "Δloss", "left");
    for (int k = 0; k < r->n_steps; k++) {
        const al_prune_step *s = &r->steps[k];
        char name[32] = "-";
        if (s->layer >= 0) snprintf(name, sizeof name, "%d.%d", s->layer, s->head);
        printf("%4d %8s %11.4g %9.4f %+9.4f %5d%s\n", s->step, name, s->importance, s->loss,
               s->delta_loss, s->heads_left, s->over_budget ? "  over budget: not applied" : "");
    }
}

static int run_prune(int argc, char **argv) {
    al_err e;
    al_prune_method method;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_prune, &e);
    if (al_prune_method_parse(o_method, &method, &e)) return al_cli_usage(&al_cmd_prune, &e);
    if (o_batches < 2 || o_batches > 100000 || o_batch < 1 || o_batch > 100000) {
        al_errf(&e, "need 2 <= --batches <= 100000 and 1 <= --batch <= 100000");
        return al_cli_usage(&al_cmd_prune, &e);
    }
    al_set_threads(o_threads);
    al_behave bh;
    if (al_behave_open(&bh, o_model, NULL, o_db, "prune", flags, &e)) return al_cli_error(&e);
    al_tokens d = {0};
    al_abl_set est = {0}, eval = {0};
    al_prune_result r = {0};
    char path[4200];
    int T, rc = 1, half = o_batches / 2, V = bh.m.cfg.d_vocab;
    double t0 = al_now();
    if (o_out) snprintf(path, sizeof path, "%s", o_out);
    else {
        char name[64];
        snprintf(name, sizeof name, "mask-%s.json", o_method);
        if (al_path_join(path, sizeof path, o_model, name, &e)) goto fail;
    }
    if (al_behave_tokens(&bh, o_data, &d, &T, &e) ||
        al_abl_set_text(&est, &d, T, o_batch, 0, half, o_batches, V, &e) ||
        al_abl_set_text(&eval, &d, T, o_batch, half, o_batches - half, o_batches, V, &e) ||
        al_prune(&bh.m, &est, &eval, method, o_budget, o_seed, 1, &r, &e))
        goto fail;
    const al_prune_step *last = &r.steps[r.n_steps - 1 - r.stopped_by_budget];
    al_mask_info info = {o_method, o_budget, r.base_loss, last->loss, o_seed,
                         method == AL_PRUNE_RANDOM};
    if (al_store_tx_begin(bh.st, &e) || store_steps(&bh, &r, &e) ||
        al_mask_save(path, &bh.m.cfg, r.off, &info, &e) ||
        al_store_run_finish(bh.st, bh.run_id, &e))
        goto fail;
    printf("model %s (sha256 %.12s…) -> run %lld of %s; prune by %s, estimate on %d x %d "
           "windows of %d, evaluate on %d x %d\n",
           o_model, bh.sha, (long long)bh.run_id, o_db, o_method, half, o_batch, T,
           o_batches - half, o_batch);
    print_steps(&r);
    int LH = bh.m.cfg.n_layers * bh.m.cfg.n_heads;
    if (o_budget >= 0)
        printf("budget %g: loss limit %.4f (base %.4f); ", o_budget, (1 + o_budget) * r.base_loss,
               r.base_loss);
    printf("mask: %d of %d heads off, loss %.4f -> %s (%.2f s)\n", LH - last->heads_left, LH,
           last->loss, path, al_now() - t0);
    rc = 0;
    goto out;
fail:
    al_behave_fail(&bh, &e);
    al_cli_error(&e);
out:
    al_prune_result_free(&r);
    al_abl_set_free(&est);
    al_abl_set_free(&eval);
    al_tokens_free(&d);
    al_behave_close(&bh);
    return rc;
}
