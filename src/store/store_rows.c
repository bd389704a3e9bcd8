/* store_rows.c -- the result rows: one INSERT per table, prepared once
 * per connection, and one writer per kind of row (store.h). Each writer
 * is one call to put_row, so the rules of binding (NULL for a missing
 * value, NaN and infinities as NULL, token bytes as text with their
 * length) live in one place. */
#include "attnlab/store.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attnlab/gap.h"
#include "attnlab/stats.h"
#include "store_conn.h"
#include "store_internal.h"

/* The SQL of each statement (store_conn.h lists them). */
static const char *const stmt_sql[S_N] = {
    [S_HEAD_SCORE] = "INSERT OR REPLACE INTO head_scores VALUES(?,?,?,?,?,?)",
    [S_LAYER_SCORE] = "INSERT OR REPLACE INTO layer_scores VALUES(?,?,?,?,?)",
    [S_MODEL_SCORE] = "INSERT OR REPLACE INTO model_scores VALUES(?,?,?,?)",
    [S_INTERVAL] = "INSERT OR REPLACE INTO score_intervals(run_id, model_id, layer, head, pos, "
                   "metric, value, se, ci_lo, ci_hi, level, n_items, bootstrap) "
                   "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_SV] = "INSERT OR REPLACE INTO singular_values VALUES(?,?,?,?,?,?,?)",
    [S_EIG] = "INSERT OR REPLACE INTO eigenvalues VALUES(?,?,?,?,?,?,?,?)",
    [S_TRI] = "INSERT OR REPLACE INTO skip_trigrams "
              "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_COMP] = "INSERT OR REPLACE INTO composition VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_OVERLAP] = "INSERT OR REPLACE INTO head_overlap VALUES(?,?,?,?,?,?,?)",
    [S_ABL] = "INSERT INTO ablations(run_id, model_id, method, kind, heads, "
              "n_heads, loss, delta_loss, delta_loss_copy, delta_loss_probe, "
              "interaction) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_PRUNE] = "INSERT OR REPLACE INTO pruning_steps VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_TLOG] = "INSERT OR REPLACE INTO train_log(run_id, step, tokens, train_loss, val_loss, "
               "icl_gain, lr, seconds, val_loss_se, icl_gain_se) VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_THS] = "INSERT OR REPLACE INTO train_head_scores VALUES(?,?,?,?,?,?)",
    [S_PATCH] = "INSERT INTO patching(run_id, model_id, task, direction, component, layer, "
                "head, pos, value, metric) VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_PATH] = "INSERT INTO path_patching(run_id, model_id, task, direction, sender, "
               "receiver_layer, receiver_head, channel, value, metric) "
               "VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_PATCH_RUN] = "INSERT OR REPLACE INTO patching_runs VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_ATTR_RUN] = "INSERT OR REPLACE INTO attribution_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                   "?,?,?,?,?,?,?,?)",
    [S_LOGIT_ATTR] = "INSERT INTO logit_attribution VALUES(?,?,?,?,?,?,?)",
    [S_PATH_TERM] = "INSERT OR REPLACE INTO path_terms VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_LENS] = "INSERT OR REPLACE INTO logit_lens VALUES(?,?,?,?,?,?)",
    [S_AP] = "INSERT INTO attribution_patching(run_id, model_id, task, direction, grid, layer, "
             "head, pos, sender, receiver_layer, receiver_head, channel, estimate, actual) "
             "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_AP_AGREE] = "INSERT OR REPLACE INTO attribution_agreement VALUES(?,?,?,?,?,?,?)",
    [S_ATTR_TOK] = "INSERT OR REPLACE INTO attribution_tokens VALUES(?,?,?,?)",
    [S_CIRC_RUN] = "INSERT INTO circuit_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_CIRC_EDGE] = "INSERT INTO circuit_edges VALUES(?,?,?,?,?,?,?,?,?,?,?)",
    [S_WARN] = "INSERT INTO run_warnings(run_id, model_id, seq, message) VALUES(?,?,?,?)",
    [S_VIEW] = "INSERT OR REPLACE INTO views(run_id, model_id, metric, shape, title) "
               "VALUES(?,?,?,?,?)",
    [S_SAE_RUN] = "INSERT INTO sae_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                  "?,?,?,?)",
    [S_SAE_FRUN] = "INSERT INTO sae_feature_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_SAE_FEAT] = "INSERT INTO sae_features VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_SAE_CTX] = "INSERT INTO sae_feature_contexts VALUES(?,?,?,?,?,?,?,?,?,?)",
    [S_SAE_LOGIT] = "INSERT INTO sae_feature_logits VALUES(?,?,?,?,?,?,?,?)",
    [S_SAE_HEAD] = "INSERT INTO sae_feature_heads VALUES(?,?,?,?,?,?,?)",
    [S_SAE_TRUN] = "INSERT INTO sae_task_runs VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [S_SAE_TFEAT] = "INSERT INTO sae_task_features VALUES(?,?,?,?,?,?,?,?,?)",
    [S_SAE_PHEAD] = "INSERT INTO sae_probe_heads VALUES(?,?,?,?,?)",
};

/* The cached statement for id, reset and cleared. */
static sqlite3_stmt *stmt(al_store *s, int id, al_err *e) {
    if (!s->st[id] && store_prepare(s, stmt_sql[id], &s->st[id], e)) return NULL;
    sqlite3_reset(s->st[id]);
    sqlite3_clear_bindings(s->st[id]);
    return s->st[id];
}

/* Bind the values after fmt to statement id in order and step it. One
 * letter per column: 'I' int64_t, 'i' int, 'o' int or NULL when negative
 * (an optional column), 'd' double (NULL when not finite), 's' C string,
 * 't' const char * and size_t length (token bytes may hold NULs). Every
 * row writer below is one call, so the binding rules live only here. */
static int put_row(al_store *s, int id, al_err *e, const char *fmt, ...) {
    sqlite3_stmt *q = stmt(s, id, e);
    if (!q) return -1;
    if ((int)strlen(fmt) != sqlite3_bind_parameter_count(q) || strspn(fmt, "Iiodst") != strlen(fmt))
        return al_errf(e, "database %s: internal error: row format '%s' does not fit: %s", s->path,
                       fmt, stmt_sql[id]);
    va_list ap;
    va_start(ap, fmt);
    for (int i = 1; fmt[i - 1]; i++) {
        switch (fmt[i - 1]) {
        case 'I': sqlite3_bind_int64(q, i, va_arg(ap, int64_t)); break;
        case 'i': sqlite3_bind_int(q, i, va_arg(ap, int)); break;
        case 'o': {
            int v = va_arg(ap, int);
            if (v >= 0) sqlite3_bind_int(q, i, v);
            break;
        }
        case 'd': store_bind_real(q, i, va_arg(ap, double)); break;
        case 's': store_bind_str(q, i, va_arg(ap, const char *)); break;
        case 't': {
            const char *t = va_arg(ap, const char *);
            store_bind_text(q, i, t, va_arg(ap, size_t));
            break;
        }
        }
    }
    va_end(ap);
    return store_step_done(s, q, e);
}

int al_store_put_head_score(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                            const char *metric, double value, al_err *e) {
    return put_row(s, S_HEAD_SCORE, e, "IIiisd", run_id, model_id, layer, head, metric, value);
}

int al_store_put_layer_score(al_store *s, int64_t run_id, int64_t model_id, int layer,
                             const char *metric, double value, al_err *e) {
    return put_row(s, S_LAYER_SCORE, e, "IIisd", run_id, model_id, layer, metric, value);
}

int al_store_put_model_score(al_store *s, int64_t run_id, int64_t model_id, const char *metric,
                             double value, al_err *e) {
    return put_row(s, S_MODEL_SCORE, e, "IIsd", run_id, model_id, metric, value);
}

int al_store_put_interval(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                          int pos, const char *metric, double value, const al_interval *iv,
                          double level, int n_items, int boot, al_err *e) {
    return put_row(s, S_INTERVAL, e, "IIiiisdddddii", run_id, model_id, layer, head, pos, metric,
                   value, iv->se, iv->lo, iv->hi, level, n_items, boot);
}

int al_store_put_singular_value(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                                const char *circuit, int idx, double value, al_err *e) {
    return put_row(s, S_SV, e, "IIiisid", run_id, model_id, layer, head, circuit, idx, value);
}

int al_store_put_eigenvalue(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                            const char *circuit, int idx, double re, double im, al_err *e) {
    return put_row(s, S_EIG, e, "IIiisidd", run_id, model_id, layer, head, circuit, idx, re, im);
}

int al_store_put_skip_trigram(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                              const al_trigram_row *t, al_err *e) {
    return put_row(s, S_TRI, e, "IIiiiiiitttddd", run_id, model_id, layer, head, t->rank, t->a,
                   t->b, t->c, t->a_str, t->a_len, t->b_str, t->b_len, t->c_str, t->c_len, t->qk,
                   t->ov, t->score);
}

int al_store_put_composition(al_store *s, int64_t run_id, int64_t model_id, const char *kind,
                             int l1, int h1, int l2, int h2, double score, double baseline,
                             double baseline_sd, al_err *e) {
    return put_row(s, S_COMP, e, "IIsiiiiddd", run_id, model_id, kind, l1, h1, l2, h2, score,
                   baseline, baseline_sd);
}

int al_store_put_head_overlap(al_store *s, int64_t run_id, int64_t model_id, int layer,
                              const char *space, int h1, int h2, double value, al_err *e) {
    return put_row(s, S_OVERLAP, e, "IIisiid", run_id, model_id, layer, space, h1, h2, value);
}

int al_store_put_ablation(al_store *s, int64_t run_id, int64_t model_id, const al_ablation_row *r,
                          int64_t *id, al_err *e) {
    int rc = put_row(s, S_ABL, e, "IIsssiddddd", run_id, model_id, r->method, r->kind, r->heads,
                     r->n_heads, r->loss, r->delta_loss, r->delta_loss_copy, r->delta_loss_probe,
                     r->interaction);
    if (rc == 0 && id) *id = sqlite3_last_insert_rowid(s->db);
    return rc;
}

int al_store_put_pruning_step(al_store *s, int64_t run_id, int64_t model_id,
                              const al_pruning_row *r, al_err *e) {
    return put_row(s, S_PRUNE, e, "IIsiooiddds", run_id, model_id, r->method, r->step, r->layer,
                   r->head, r->heads_left, r->importance, r->loss, r->delta_loss, r->mask);
}

int al_store_put_patching(al_store *s, int64_t run_id, int64_t model_id, const al_patching_row *r,
                          al_err *e) {
    return put_row(s, S_PATCH, e, "IIsssioodd", run_id, model_id, r->task, r->direction,
                   r->component, r->layer, r->head, r->pos, r->value, r->metric);
}

int al_store_put_path_patching(al_store *s, int64_t run_id, int64_t model_id,
                               const al_path_patching_row *r, al_err *e) {
    return put_row(s, S_PATH, e, "IIsssoosdd", run_id, model_id, r->task, r->direction, r->sender,
                   r->receiver_layer, r->receiver_head, r->channel, r->value, r->metric);
}

int al_store_put_patching_run(al_store *s, int64_t run_id, int64_t model_id,
                              const al_patching_run_row *r, al_err *e) {
    return put_row(s, S_PATCH_RUN, e, "IIsssiiddds", run_id, model_id, r->task, r->direction,
                   r->component, r->n_pairs, r->seq_len, r->m_clean, r->m_corr, r->seconds,
                   r->task_hash);
}

int al_store_put_attribution_run(al_store *s, int64_t run_id, int64_t model_id,
                                 const al_attribution_run_row *r, al_err *e) {
    return put_row(s, S_ATTR_RUN, e, "IIsiiisddddddddsdddddsi", run_id, model_id, r->task,
                   r->n_pairs, r->seq_len, r->n_items, r->metric_kind, r->metric, r->loss,
                   r->kind_value[0], r->kind_value[1], r->kind_value[2], r->kind_dloss[0],
                   r->kind_dloss[1], r->kind_dloss[2], r->direction, r->m_clean, r->m_corr,
                   r->seconds, r->seconds_attrpatch, r->seconds_patch, r->task_hash, r->centred);
}

int al_store_put_logit_attribution(al_store *s, int64_t run_id, int64_t model_id, const char *task,
                                   const char *component, int pos, double value, int n_items,
                                   al_err *e) {
    return put_row(s, S_LOGIT_ATTR, e, "IIssodi", run_id, model_id, task, component, pos, value,
                   n_items);
}

int al_store_put_path_term(al_store *s, int64_t run_id, int64_t model_id, const al_path_term_row *r,
                           al_err *e) {
    return put_row(s, S_PATH_TERM, e, "IIsssooodd", run_id, model_id, r->task, r->term, r->kind,
                   r->layer, r->head, r->src_head, r->value, r->dloss);
}

int al_store_put_logit_lens(al_store *s, int64_t run_id, int64_t model_id, const char *task,
                            int layer, double loss, double accuracy, al_err *e) {
    return put_row(s, S_LENS, e, "IIsidd", run_id, model_id, task, layer, loss, accuracy);
}

int al_store_put_attribution_patching(al_store *s, int64_t run_id, int64_t model_id,
                                      const al_attribution_patching_row *r, al_err *e) {
    return put_row(s, S_AP, e, "IIsssooosoosdd", run_id, model_id, r->task, r->direction, r->grid,
                   r->layer, r->head, r->pos, r->sender, r->receiver_layer, r->receiver_head,
                   r->channel, r->estimate, r->actual);
}

int al_store_put_attribution_agreement(al_store *s, int64_t run_id, int64_t model_id,
                                       const char *grid, int n, double pearson, double spearman,
                                       int top5, al_err *e) {
    return put_row(s, S_AP_AGREE, e, "IIsiddi", run_id, model_id, grid, n, pearson, spearman, top5);
}

int al_store_put_attribution_token(al_store *s, int64_t run_id, int pos, int token,
                                   const char *text, size_t len, al_err *e) {
    return put_row(s, S_ATTR_TOK, e, "Iiit", run_id, pos, token, text, len);
}

int al_store_put_circuit_run(al_store *s, int64_t run_id, int64_t model_id,
                             const al_circuit_run_row *r, al_err *e) {
    return put_row(s, S_CIRC_RUN, e, "IIsssddiidddddIds", run_id, model_id, r->task, r->method,
                   r->metric, r->tau, r->recover, r->n_edges, r->n_kept, r->m_clean, r->m_corr,
                   r->m_circuit, r->kl, r->faithfulness, r->evals, r->seconds, r->task_hash);
}

int al_store_put_circuit_edge(al_store *s, int64_t run_id, int64_t model_id,
                              const al_circuit_edge_row *r, al_err *e) {
    return put_row(s, S_CIRC_EDGE, e, "IIsdisoosdi", run_id, model_id, r->method, r->tau, r->edge,
                   r->sender, r->receiver_layer, r->receiver_head, r->channel, r->score, r->kept);
}

int al_store_put_sae_run(al_store *s, int64_t run_id, int64_t model_id, const al_sae_run_row *r,
                         al_err *e) {
    return put_row(s, S_SAE_RUN, e, "IIissiisodIiIIdIddddddddddds", run_id, model_id, r->layer,
                   r->site, r->hook_name, r->d_in, r->d_sae, r->arch, r->k, r->l1_coeff,
                   (int64_t)r->steps, r->batch, (int64_t)r->activations, (int64_t)r->seed, r->scale,
                   (int64_t)r->eval_n, r->l0, r->fve, r->mse, r->dead_frac, r->dense_frac,
                   r->ce_clean, r->ce_sae, r->ce_zero, r->ce_recovered, r->seconds, r->rate,
                   r->out_dir);
}

int al_store_put_sae_feature_run(al_store *s, int64_t run_id, int64_t model_id,
                                 const al_sae_feature_run_row *r, al_err *e) {
    return put_row(s, S_SAE_FRUN, e, "IIssiiiiiIiidid", run_id, model_id, r->sae_dir, r->hook_name,
                   r->layer, r->d_sae, r->n_live, r->windows, r->seq_len, (int64_t)r->positions,
                   r->probe_r, r->probe_n, r->seconds, r->n_induction, r->group_auroc);
}

int al_store_put_sae_feature(al_store *s, int64_t run_id, int64_t model_id,
                             const al_sae_feature_row *r, al_err *e) {
    return put_row(s, S_SAE_FEAT, e, "IIiIddddddoodIIddiotd", run_id, model_id, r->feature,
                   (int64_t)r->fired, r->density, r->mean_act, r->max_act, r->first_mean,
                   r->second_mean, r->induction_index, r->top_layer, r->top_head, r->top_share,
                   (int64_t)r->first_fired, (int64_t)r->second_fired, r->induction_p, r->auroc,
                   r->induction, r->next_token, r->next_token_str, r->next_token_len,
                   r->next_share);
}

int al_store_put_sae_feature_context(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                     int rank, int window, long offset, int pos, int token,
                                     const char *token_str, size_t len, double act, al_err *e) {
    return put_row(s, S_SAE_CTX, e, "IIiiiIiitd", run_id, model_id, feature, rank, window,
                   (int64_t)offset, pos, token, token_str, len, act);
}

int al_store_put_sae_feature_logit(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                   const char *direction, int rank, int token,
                                   const char *token_str, size_t len, double value, al_err *e) {
    return put_row(s, S_SAE_LOGIT, e, "IIisiitd", run_id, model_id, feature, direction, rank, token,
                   token_str, len, value);
}

int al_store_put_sae_feature_head(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                  int layer, int head, double contribution, double share,
                                  al_err *e) {
    return put_row(s, S_SAE_HEAD, e, "IIiiidd", run_id, model_id, feature, layer, head,
                   contribution, share);
}

int al_store_put_sae_probe_head(al_store *s, int64_t run_id, int64_t model_id, int layer, int head,
                                double auroc, al_err *e) {
    return put_row(s, S_SAE_PHEAD, e, "IIiid", run_id, model_id, layer, head, auroc);
}

int al_store_put_sae_task_run(al_store *s, int64_t run_id, int64_t model_id,
                              const al_sae_task_run_row *r, al_err *e) {
    return put_row(s, S_SAE_TRUN, e, "IIssiiddidddddi", run_id, model_id, r->task, r->direction,
                   r->n_pairs, r->n_items, r->m_clean, r->m_corr, r->n_moved, r->error_effect,
                   r->error_se, r->site_effect, r->site_se, r->level, r->bootstrap);
}

int al_store_put_sae_task_feature(al_store *s, int64_t run_id, int64_t model_id, int feature,
                                  double effect, const struct al_interval *ci, double act_clean,
                                  double act_corr, al_err *e) {
    return put_row(s, S_SAE_TFEAT, e, "IIidddddd", run_id, model_id, feature, effect, ci->se,
                   ci->lo, ci->hi, act_clean, act_corr);
}

int al_store_put_train_log(al_store *s, int64_t run_id, const al_train_log_row *r, al_err *e) {
    return put_row(s, S_TLOG, e, "IIdddddddd", run_id, (int64_t)r->step, r->tokens, r->train_loss,
                   r->val_loss, r->icl_gain, r->lr, r->seconds, r->val_loss_se, r->icl_gain_se);
}

int al_store_put_train_head_score(al_store *s, int64_t run_id, long step, int layer, int head,
                                  const char *metric, double value, al_err *e) {
    return put_row(s, S_THS, e, "IIiisd", run_id, (int64_t)step, layer, head, metric, value);
}

int al_store_put_warnings(al_store *s, int64_t run, int64_t mid, const al_warnings *w, al_err *e) {
    for (int i = 0; w && i < w->n && i < AL_WARN_MAX; i++) {
        char msg[AL_WARN_LEN];
        snprintf(msg, sizeof msg, "%s", w->msg[i]); /* NUL-terminated whatever w holds */
        if (put_row(s, S_WARN, e, "IIis", run, mid, i, msg)) return -1;
    }
    return 0;
}

int al_store_put_view_row(al_store *s, int64_t run, int64_t mid, const char *metric,
                          const char *shape, const char *title, al_err *e) {
    return put_row(s, S_VIEW, e, "IIsss", run, mid, metric, shape, title);
}

int al_store_carry_train_log(al_store *s, int64_t run_id, int64_t from, long max_step, int *carried,
                             al_err *e) {
    static const char check[] =
        "SELECT count(*) FROM runs WHERE run_id = ?1 AND kind = ?3 AND ?1 < ?2";
    static const char *const copy[] =
        {"INSERT OR REPLACE INTO train_log(run_id, step, tokens, train_loss, val_loss, icl_gain,"
         " lr, seconds, val_loss_se, icl_gain_se) SELECT ?1, step, tokens, train_loss, val_loss,"
         " icl_gain, lr, seconds, val_loss_se, icl_gain_se FROM train_log WHERE run_id = ?2 AND"
         " step <= ?3",
         "INSERT OR REPLACE INTO train_head_scores SELECT ?1, step, layer, head, metric, value"
         " FROM train_head_scores WHERE run_id = ?2 AND step <= ?3"};
    sqlite3_stmt *q;
    *carried = 0;
    if (s->in_tx) return al_errf(e, "database %s: carry_train_log inside a transaction", s->path);
    const char *kind = al_store_kind_needed(AL_RESULTS_TRAINING, e);
    if (!kind || store_prepare(s, check, &q, e)) return -1;
    sqlite3_bind_int64(q, 1, from);
    sqlite3_bind_int64(q, 2, run_id);
    store_bind_str(q, 3, kind);
    int rc = sqlite3_step(q);
    int found = rc == SQLITE_ROW && sqlite3_column_int(q, 0) == 1;
    sqlite3_finalize(q);
    if (rc != SQLITE_ROW) return store_db_err(s, e, "cannot read runs");
    if (!found) return 0;
    if (al_store_tx_begin(s, e)) return -1;
    for (int i = 0; i < 2; i++) {
        if (store_prepare(s, copy[i], &q, e)) goto fail;
        sqlite3_bind_int64(q, 1, run_id);
        sqlite3_bind_int64(q, 2, from);
        sqlite3_bind_int64(q, 3, max_step);
        rc = store_step_done(s, q, e);
        sqlite3_finalize(q);
        if (rc) goto fail;
    }
    *carried = 1;
    return al_store_tx_commit(s, e);
fail:
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL); /* keep the first error */
    s->in_tx = 0;
    return -1;
}
