/* store_sae.c -- a `sae features` run's result as rows (store_sae.h). */
#include "attnlab/store_sae.h"

#include <math.h>

#include "attnlab/store_analysis.h"

int al_store_put_sae_features(al_store *s, int64_t run_id, int64_t model_id, const char *sae_dir,
                              const char *hook_name, const al_sae_feat_result *r,
                              const al_tokenizer *tok, al_err *e) {
    al_sae_feature_run_row fr = {.sae_dir = sae_dir,
                                 .hook_name = hook_name,
                                 .layer = r->layer,
                                 .d_sae = r->d_sae,
                                 .n_live = r->n_live,
                                 .windows = r->windows,
                                 .seq_len = r->T,
                                 .positions = r->positions,
                                 .probe_r = r->probe_r,
                                 .probe_n = r->probe_n,
                                 .seconds = r->seconds,
                                 .n_induction = r->n_induction,
                                 .group_auroc = r->group_auroc};
    if (al_store_put_sae_feature_run(s, run_id, model_id, &fr, e) != 0) return -1;
    const int H = r->H;
    char buf[256];
    for (int h = 0; h < H; h++)
        if (al_store_put_sae_probe_head(s, run_id, model_id, r->layer, h, r->head_auroc[h], e) != 0)
            return -1;
    for (int i = 0; i < r->d_sae; i++) {
        if (!r->fired[i]) continue;
        int top = -1;
        for (int h = 0; h < H; h++) {
            double v = r->share[(size_t)i * H + h];
            if (isfinite(v) && (top < 0 || v > r->share[(size_t)i * H + top])) top = h;
        }
        al_sae_feature_row row = {.feature = i,
                                  .fired = r->fired[i],
                                  .density = r->density[i],
                                  .mean_act = r->mean_act[i],
                                  .max_act = r->max_act[i],
                                  .first_mean = r->first_mean[i],
                                  .second_mean = r->second_mean[i],
                                  .induction_index = r->induction_index[i],
                                  .top_layer = top >= 0 ? r->layer : -1,
                                  .top_head = top,
                                  .top_share = top >= 0 ? r->share[(size_t)i * H + top] : NAN,
                                  .first_fired = r->first_fired[i],
                                  .second_fired = r->second_fired[i],
                                  .induction_p = r->induction_p[i],
                                  .auroc = r->auroc[i],
                                  .induction = r->induction[i],
                                  .next_token = r->next_token[i],
                                  .next_share = r->next_share[i]};
        char nb[256];
        if (r->next_token[i] >= 0) {
            row.next_token_len = al_store_token_str(tok, r->next_token[i], nb, sizeof nb);
            row.next_token_str = nb;
        }
        if (al_store_put_sae_feature(s, run_id, model_id, &row, e) != 0) return -1;
        for (int j = 0; j < r->top_n; j++) {
            const al_sae_feat_ctx *c = r->ctx + (size_t)i * r->top_n + j;
            if (c->window < 0) break;
            size_t n = al_store_token_str(tok, c->token, buf, sizeof buf);
            if (al_store_put_sae_feature_context(s, run_id, model_id, i, j + 1, c->window,
                                                 c->offset, c->pos, c->token, buf, n, c->act,
                                                 e) != 0)
                return -1;
        }
        for (int dir = 0; dir < 2; dir++) {
            const int *tk = (dir ? r->down_tok : r->up_tok) + (size_t)i * r->logit_n;
            const float *vl = (dir ? r->down_val : r->up_val) + (size_t)i * r->logit_n;
            for (int j = 0; j < r->logit_n; j++) {
                if (tk[j] < 0) break;
                size_t n = al_store_token_str(tok, tk[j], buf, sizeof buf);
                if (al_store_put_sae_feature_logit(s, run_id, model_id, i, dir ? "down" : "up",
                                                   j + 1, tk[j], buf, n, vl[j], e) != 0)
                    return -1;
            }
        }
        for (int h = 0; h < H; h++)
            if (al_store_put_sae_feature_head(s, run_id, model_id, i, r->layer, h,
                                              r->contrib[(size_t)i * H + h],
                                              r->share[(size_t)i * H + h], e) != 0)
                return -1;
    }
    return 0;
}

int al_store_put_sae_task(al_store *s, int64_t run_id, int64_t model_id, const char *task,
                          const al_sae_task_result *r, al_err *e) {
    const al_interval *er = &r->ci[AL_SAE_TASK_ERROR(r)], *si = &r->ci[AL_SAE_TASK_SITE(r)];
    al_sae_task_run_row row = {.task = task,
                               .direction = al_patch_direction_name(r->direction),
                               .n_pairs = r->N,
                               .n_items = r->n_items,
                               .m_clean = r->m_clean,
                               .m_corr = r->m_corr,
                               .n_moved = r->n_moved,
                               .error_effect = r->effect[AL_SAE_TASK_ERROR(r)],
                               .error_se = er->se,
                               .site_effect = r->effect[AL_SAE_TASK_SITE(r)],
                               .site_se = si->se,
                               .level = r->ci_level,
                               .bootstrap = r->ci_boot};
    if (al_store_put_sae_task_run(s, run_id, model_id, &row, e)) return -1;
    for (int i = 0; i < r->d_sae; i++)
        if (r->effect[i] != 0 &&
            al_store_put_sae_task_feature(s, run_id, model_id, i, r->effect[i], &r->ci[i],
                                          r->act_clean[i], r->act_corr[i], e))
            return -1;
    return 0;
}
