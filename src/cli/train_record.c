/* train_record.c -- the database observer of training (see
 * train_record.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "attnlab/train_record.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Probe size for training dynamics: 16 sequences of 2R+1 <= 101 tokens
 * are ~1.6K tokens of forward pass per evaluation, well under 1% of the
 * training compute between two evaluations at the defaults. */
#define DYN_PROBE_N 16
#define DYN_PROBE_SEED 20240520

/* Every checkpoint names, in state.json, the run and database that
 * logged its curve. A run resumed into the same database copies that
 * run's rows up to the resumed step, so the curve of a model trained in
 * several sittings starts at step 0; later checkpoints name this run. */
static int carry_curve(al_train_record *r, al_trainer *t, al_err *e) {
    char db[PATH_MAX];
    al_train_state *st = al_trainer_state(t);
    if (!realpath(r->db_path, db))
        return al_errf(e, "cannot resolve %s: %s", r->db_path, strerror(errno));
    int64_t from = st->curve_run;
    int carried = 0;
    if (from > 0 && st->curve_db && strcmp(st->curve_db, db) == 0 &&
        al_store_carry_train_log(r->db, r->run_id, from, st->step, &carried, e) != 0)
        return -1;
    if (carried)
        al_log("training curve up to step %ld carried over from run %lld", st->step,
               (long long)from);
    free(st->curve_db);
    st->curve_db = strdup(db);
    if (!st->curve_db) return al_errf(e, "out of memory");
    st->curve_run = r->run_id;
    return 0;
}

static int on_start(void *ctx, al_trainer *t, al_err *e) {
    al_train_record *r = ctx;
    /* the probe fits the trained sequence length (positions past it are
     * never trained when seq_len < n_ctx) */
    int R = (al_trainer_seq_len(t) - 1) / 2;
    if (R > 50) R = 50;
    if (R < 2)
        return al_errf(e, "--db needs sequences of at least 5 tokens for the induction probe");
    if (al_probe_make(&r->probe, R, DYN_PROBE_N, DYN_PROBE_SEED, al_trainer_model(t)->cfg.d_vocab,
                      al_tok_eot(al_trainer_tokenizer(t)), r->probe_src, e) != 0)
        return -1;
    if (al_store_open(r->db_path, &r->db, e) != 0) return -1;
    if (al_store_run_begin(r->db, AL_TRAIN_RUN_KIND, r->config_json ? r->config_json : "{}", 0,
                           &r->run_id, e) != 0)
        return -1;
    return carry_curve(r, t, e);
}

static int on_eval(void *ctx, al_trainer *t, const al_train_eval *ev, al_err *e) {
    al_train_record *r = ctx;
    al_model *m = al_trainer_model(t);
    al_probe_scores ps;
    /* the items give icl_gain's standard error; the scores are summed as
     * al_probe_run sums them, bit for bit */
    if (al_probe_run_items(m, &r->probe, DYN_PROBE_N, &ps, e) != 0) return -1;
    const int cols = AL_PROBE_ITEM_COLS(m->cfg.n_layers * m->cfg.n_heads);
    double sum = 0, sq = 0, n = ps.n_items;
    for (int i = 0; i < ps.n_items; i++) {
        double g = ps.items[(size_t)i * cols + cols - 1];
        sum += g, sq += g * g;
    }
    double var = n >= 2 ? (sq - sum * sum / n) / (n - 1) : NAN;
    al_train_log_row row = {.step = ev->step,
                            .tokens = ev->tokens,
                            .train_loss = ev->train_loss,
                            .val_loss = ev->val_loss,
                            .icl_gain = ps.icl_gain,
                            .lr = ev->lr,
                            .seconds = ev->seconds,
                            .val_loss_se = ev->val_loss_se,
                            .icl_gain_se = n >= 2 ? sqrt(var > 0 ? var : 0) / sqrt(n) : NAN};
    int rc =
        al_store_tx_begin(r->db, e) != 0 || al_store_put_train_log(r->db, r->run_id, &row, e) != 0;
    int H = m->cfg.n_heads;
    static const char *const metric[4] = {"induction", "prev_token", "duplicate_token",
                                          "induction_all"};
    for (int i = 0; !rc && i < m->cfg.n_layers * H; i++) {
        const double v[4] = {ps.induction[i], ps.prev_token[i], ps.duplicate_token[i],
                             ps.induction_all[i]};
        for (int k = 0; !rc && k < 4; k++)
            rc = al_store_put_train_head_score(r->db, r->run_id, ev->step, i / H, i % H, metric[k],
                                               v[k], e) != 0;
    }
    al_probe_scores_free(&ps);
    if (rc) return -1;
    return al_store_tx_commit(r->db, e);
}

static void on_end(void *ctx, al_trainer *t, int status, const al_err *err) {
    al_train_record *r = ctx;
    al_probe_free(&r->probe);
    if (!r->db) return;
    const char *why = status < 0   ? err->msg
                      : status > 0 ? "interrupted (continue with --resume)"
                                   : NULL;
    al_err e2, e3;
    int64_t model_id = 0;
    /* one transaction, so that a failure leaves no model row behind
     * (al_store_run_fail rolls it back) */
    if (!why && (al_store_tx_begin(r->db, &e2) != 0 ||
                 al_store_model(r->db, al_trainer_dir(t), NULL, al_trainer_model(t), NULL,
                                &model_id, &e2) != 0 ||
                 al_store_run_set_model(r->db, r->run_id, model_id, &e2) != 0 ||
                 al_store_run_finish(r->db, r->run_id, &e2) != 0))
        why = e2.msg, r->end_failed = 1, r->end_err = e2;
    if (why) al_store_run_fail(r->db, r->run_id, why, &e3);
    al_store_close(r->db);
    r->db = NULL;
}

al_train_observer al_train_record_observer(al_train_record *r) {
    return (
        al_train_observer){.ctx = r, .on_start = on_start, .on_eval = on_eval, .on_end = on_end};
}
