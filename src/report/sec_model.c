/* sec_model.c -- the model card and training sections of a model: its
 * shape, parameters, training options (from the checkpoint's state.json),
 * final losses and the training log with its picture. */
#include "report_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"

/* Training options from the checkpoint's state.json; none (no row) for
 * an inference-only checkpoint or an unreadable state. */
static void train_opts_rows(al_buf *h, const rmodel *M) {
    al_train_state st;
    if (al_ckpt_read_state(M->dir, &st, NULL) != 0) return;
    if (st.train_json) {
        cJSON *o = cJSON_Parse(st.train_json);
        static const char *const keys[] = {"steps",        "batch", "seq_len",      "lr", "warmup",
                                           "weight_decay", "seed",  "probe_tokens", NULL};
        char v[1024] = "", one[128];
        for (int i = 0; o && keys[i]; i++) {
            const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
            if (cJSON_IsNumber(j) && !strcmp(keys[i], "seq_len") && j->valuedouble == 0)
                /* 0 means "n_ctx" to train */
                snprintf(one, sizeof one, "%s%s %d", v[0] ? ", " : "", keys[i], M->cfg.n_ctx);
            else if (cJSON_IsNumber(j))
                snprintf(one, sizeof one, "%s%s %g", v[0] ? ", " : "", keys[i], j->valuedouble);
            /* the probe over every id is the default; say only when not */
            else if (cJSON_IsString(j) && strcmp(j->valuestring, "all") != 0)
                snprintf(one, sizeof one, "%s%s %.60s", v[0] ? ", " : "", keys[i], j->valuestring);
            else
                continue;
            strncat(v, one, sizeof v - strlen(v) - 1);
        }
        if (v[0]) rep_card_row(h, "training options", v);
        cJSON_Delete(o);
    }
    al_state_free(&st);
}

int sec_card(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    char v[512];
    al_buf_puts(h, "<h3>Model card</h3>\n<table class=card>\n");
    rep_card_row(h, "directory", M->dir);
    const al_config *c = &M->cfg;
    snprintf(v, sizeof v, "%d layer%s, d_model %d, %d heads x d_head %d, n_ctx %d, d_vocab %d",
             c->n_layers, c->n_layers == 1 ? "" : "s", c->d_model, c->n_heads, c->d_head, c->n_ctx,
             c->d_vocab);
    rep_card_row(h, "architecture", v);
    rep_card_row(h, "embeddings", c->tied_embeddings ? "tied (W_U = W_E^T)" : "untied");
    rep_card_row(h, "positions",
                 c->pos_type == AL_POS_SHORTFORMER
                     ? "shortformer (W_pos added to every head's query and key "
                       "inputs, not to the residual stream)"
                     : "standard (W_pos added to the residual stream)");
    if (c->norm_type != AL_NORM_NONE) {
        snprintf(v, sizeof v,
                 "%s before every layer's attention and before the unembedding "
                 "(eps %g)",
                 c->norm_type == AL_NORM_LN ? "LayerNorm (w, b)" : "LNPre (no w, b)", c->ln_eps);
        rep_card_row(h, "normalisation", v);
    }
    if (c->biases) {
        v[0] = 0;
        for (unsigned b = 1; b <= AL_BIAS_U; b <<= 1)
            if (c->biases & b)
                snprintf(v + strlen(v), sizeof v - strlen(v), "%s%s", v[0] ? ", " : "",
                         al_bias_name(b));
        rep_card_row(h, "biases", v);
    }
    al_rows q;
    if (al_sr_model_card(R->st, M->mid, &q, e)) return -1;
    if (q.nr) {
        snprintf(v, sizeof v, "%.0f", al_rows_x(&q, 0, 0));
        rep_card_row(h, "parameters", v);
        double tok = al_rows_x(&q, 0, 1), steps = al_rows_x(&q, 0, 2);
        snprintf(v, sizeof v, isnan(tok) ? "unknown" : "%.0f (%.2f M)", tok, tok / 1e6);
        rep_card_row(h, "trained tokens", v);
        double data = al_rows_x(&q, 0, 7);
        if (!isnan(data) && data > 0) { /* recorded by train since schema v11 */
            if (isnan(tok))
                snprintf(v, sizeof v, "%.0f (%.2f M) tokens", data, data / 1e6);
            else
                snprintf(v, sizeof v, "%.0f (%.2f M) tokens, seen %.1f times", data, data / 1e6,
                         tok / data);
            rep_card_row(h, "training data", v);
        }
        snprintf(v, sizeof v, isnan(steps) ? "unknown" : "%.0f", steps);
        rep_card_row(h, "training steps", v);
        snprintf(v, sizeof v, "train %.4f, validation %.4f", al_rows_x(&q, 0, 3),
                 al_rows_x(&q, 0, 4));
        rep_card_row(h, "final loss (nats/token)", v);
        const char *sha = al_rows_t(&q, 0, 5), *seed = al_rows_t(&q, 0, 6);
        rep_card_row(h, "sha256 of model.safetensors", sha ? sha : "");
        rep_card_row(h, "seed", seed ? seed : "");
    }
    al_rows_free(&q);
    train_opts_rows(h, M);
    al_buf_puts(h, "</table>\n");
    return 0;
}

/* The gap/effect warnings raised by this model's runs (gap.h), before the
 * sections whose numbers they qualify; nothing when there are none. */
int sec_warnings(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_rows q;
    if (al_sr_warnings(R->st, M->mid, &q, e)) return -1;
    if (q.nr) {
        al_buf_puts(h, "<h3>Warnings</h3>\n<p class=warn>These runs' clean and corrupted inputs "
                       "barely differ, or their normalised effects or faithfulness fall outside "
                       "[-0.1, 1.1]: read the patching, path and circuit numbers of these runs "
                       "below with care.</p>\n<table>\n<tr><th>run</th><th>kind</th>"
                       "<th>warning</th></tr>\n");
        for (int i = 0; i < q.nr; i++) {
            al_buf_puts(h, "<tr><td>");
            rep_esc(h, al_rows_t(&q, i, 0));
            al_buf_puts(h, "</td><td>");
            rep_esc(h, al_rows_t(&q, i, 1));
            al_buf_puts(h, "</td><td>");
            rep_esc(h, al_rows_t(&q, i, 2));
            al_buf_puts(h, "</td></tr>\n");
        }
        al_buf_puts(h, "</table>\n");
    }
    al_rows_free(&q);
    return 0;
}

int sec_training(rep *R, const rmodel *M, al_err *e) {
    al_buf *h = &R->h;
    al_rows q;
    if (al_sr_training_log(R->st, M->mid, &q, e)) return -1;
    al_buf_puts(h, "<h3>Training</h3>\n");
    if (!q.nr) {
        al_buf_puts(h, "<p class=none>No training log in the database (train with --db).</p>\n");
        al_rows_free(&q);
        return 0;
    }
    /* at most 12 rows: evenly spaced, always the first and the last */
    al_rows s = {0};
    int keep = q.nr < 12 ? q.nr : 12;
    s.nc = q.nc;
    s.nr = keep;
    s.t = malloc(sizeof(char *) * (size_t)keep * q.nc);
    s.x = malloc(sizeof(double) * (size_t)keep * q.nc);
    if (!s.t || !s.x) {
        free(s.t);
        free(s.x);
        al_rows_free(&q);
        return al_errf(e, "out of memory");
    }
    for (int i = 0; i < keep; i++) {
        int r = keep == 1 ? 0 : (int)((long)i * (q.nr - 1) / (keep - 1));
        for (int c = 0; c < q.nc; c++) {
            s.t[(size_t)i * q.nc + c] = (char *)al_rows_t(&q, r, c);
            s.x[(size_t)i * q.nc + c] = al_rows_x(&q, r, c);
        }
    }
    static const char *const heads[] =
        {"step",          "tokens",  "train loss",           "val loss",
         "icl_gain",      "seconds", "best induction score", "val loss ± se",
         "icl_gain ± se", NULL};
    if (keep < q.nr)
        al_buf_printf(&R->h,
                      "<p>%d of the %d evaluations, evenly spaced (the first and the last "
                      "included); the database's <code>train_log</code> holds them all.</p>\n",
                      keep, q.nr);
    rep_table(R, &s, heads, "ii44+iI44");
    free(s.t);
    free(s.x);
    al_rows_free(&q);
    if (rep_want_pic(R, "training")) {
        al_pic_opts po = al_pic_defaults();
        po.what = "training";
        char file[256];
        snprintf(file, sizeof file, "%s-training.png", M->slug);
        rep_picture(R, M, &po, file,
                    "Training: train and validation loss, and every head's induction "
                    "score over steps, on the probe training recorded (on a text "
                    "probe, induction_all).");
    }
    return 0;
}
