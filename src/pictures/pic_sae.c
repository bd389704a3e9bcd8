/* pic_sae.c -- family sae: the pictures of an `attnlab sae features` run.
 *
 *   sae-feature  one feature's dashboard: its numbers in the header, the
 *                tokens its decoder direction raises and lowers most (one
 *                bar chart, two groups), the share of its pre-activation
 *                from each head (DFA), and its top contexts as rows of
 *                tokens centred on the activating one
 *   sae-heads    head x feature DFA shares of the run's densest features
 *
 * The database holds only the activation at each context's own position.
 * The tokens around it are read from the token file the run read
 * (runs.config_json "data", or --data), checked against the stored
 * tokens, and left out with a note when that file is gone or is another
 * one; their activations are recomputed with the run's SAE directory
 * (sae_acts.h) and used only when they agree with the stored ones at the
 * stored positions, else only the stored position is coloured, with a
 * note saying why. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/data.h"
#include "attnlab/sae_acts.h"
#include "attnlab/sae_io.h"
#include "attnlab/store_sae_read.h"
#include "pictures_internal.h"

#define CTX_BEFORE 10 /* tokens shown before the activating one */
#define CTX_AFTER 4 /* and after it */

/* The run a picture draws: --run, else the model's newest finished one;
 * checked to be a finished `sae features` run of this model whose layer
 * the model has. r is filled (free with al_sae_frun_free). */
static int sae_run(pic *p, al_sae_frun *r, al_err *e) {
    memset(r, 0, sizeof *r);
    long run = p->o->run_id;
    if (run <= 0 && al_store_latest_sae_frun(p->st, p->model_id, &run, e)) return -1;
    if (run <= 0)
        return al_errf(e,
                       "database %s has no finished sae features run for model %s (run "
                       "attnlab sae features --db, or give --run ID)",
                       p->o->db, p->dir);
    if (al_store_read_sae_frun(p->st, run, r, e)) return -1;
    if (!r->found) return al_errf(e, "database %s has no run %ld", p->o->db, run);
    if (strcmp(r->kind, "sae_features") != 0)
        return al_errf(e,
                       "run %ld is a '%s' run; --what %s draws the runs of attnlab sae "
                       "features",
                       run, r->kind, p->o->what);
    if (strcmp(r->status, "done") != 0 || !r->has_row)
        return al_errf(e, "run %ld did not finish (status %s)", run, r->status);
    if (p->model_id && r->model_id != p->model_id)
        return al_errf(e, "run %ld analysed another model than %s", run, p->dir);
    if (r->layer < 0 || r->layer >= p->L)
        return al_errf(e, "run %ld is of layer %d; %s has %d layers", run, r->layer, p->dir, p->L);
    pic_run_note(p, "sae_features", run);
    return 0;
}

/* The feature's activation at every position of its contexts' windows
 * (tokens from d), recomputed with the run's SAE into a (n_ctx, seq_len,
 * on p's list); 1 when that worked and agrees with the activation the run
 * stored at each context's own position, else 0 with why. The SAE may
 * have been moved or retrained since the run: the agreement says it is
 * still the one the run read. */
static int recompute(pic *p, const al_sae_frun *r, const al_sae_feature *f, const al_tokens *d,
                     float **a, char *why, size_t cap) {
    al_sae s;
    al_sae_meta meta;
    al_err le;
    if (!r->sae_dir) {
        snprintf(why, cap, "the run names no SAE directory");
        return 0;
    }
    if (al_sae_load(r->sae_dir, &s, &meta, &le) != 0) {
        snprintf(why, cap, "the SAE cannot be read (%s)", le.msg);
        return 0;
    }
    if (meta.partial) {
        char w[AL_PATH_MAX + 160];
        al_sae_partial_msg(r->sae_dir, &meta, w, sizeof w);
        pic_note(p, "%s", w);
    }
    const int B = f->n_ctx, T = r->seq_len;
    int *tok = al_malloc((size_t)B * T, sizeof(int), &le), ok = tok != NULL;
    *a = ok ? pic_floats(p, (size_t)B * T, &le) : NULL;
    ok = ok && *a;
    for (int j = 0; ok && j < B; j++) {
        if (f->ctx[j].offset < 0 || (size_t)f->ctx[j].offset + (size_t)T > d->n) {
            ok = 0;
            snprintf(le.msg, sizeof le.msg, "window %d runs past the token file", f->ctx[j].window);
            break;
        }
        for (int t = 0; t < T; t++) tok[(size_t)j * T + t] = d->tok[f->ctx[j].offset + t];
    }
    if (ok) ok = al_sae_feature_acts(&p->m, &s, &meta, f->feature, tok, B, T, *a, &le) == 0;
    if (!ok) snprintf(why, cap, "not recomputed: %s", le.msg);
    for (int j = 0; ok && j < B; j++) {
        double got = (*a)[(size_t)j * T + f->ctx[j].pos], want = f->ctx[j].act;
        if (!(fabs(got - want) <= 1e-3 * fmax(1, fabs(want)))) {
            ok = 0;
            snprintf(why, cap,
                     "not recomputed: the SAE at %s gives %.6g at window %d position "
                     "%d where the run stored %.6g (retrained since?)",
                     r->sae_dir, got, f->ctx[j].window, f->ctx[j].pos, want);
        }
    }
    free(tok);
    al_sae_free(&s);
    return ok;
}

/* The context rows: tokens around each stored position from the token
 * file, coloured by the feature's activation recomputed with the run's
 * SAE (*acts_why "" then, else why not: only the stored position is
 * coloured), or the stored tokens alone (and why, in *why) when the file
 * cannot be read or does not hold them. */
static int contexts_panel(pic *p, const al_sae_frun *r, const al_sae_feature *f, char *why,
                          size_t why_cap, char *acts_why, size_t acts_cap, al_err *e) {
    const int rows = f->n_ctx, cols = CTX_BEFORE + 1 + CTX_AFTER;
    const char **tok = pic_calloc(p, (size_t)rows * cols, sizeof(char *), e);
    float *v = pic_floats(p, (size_t)rows * cols, e);
    const char **rl = pic_calloc(p, (size_t)rows, sizeof(char *), e);
    if (!tok || !v || !rl) return -1;
    for (size_t i = 0; i < (size_t)rows * cols; i++) v[i] = NAN;
    const char *path = p->o->data ? p->o->data : r->data;
    al_tokens d = {0};
    int have = 0;
    why[0] = 0;
    if (!path) {
        snprintf(why, why_cap, "the run's options name no token file (give --data FILE.bin)");
    } else {
        al_err le;
        if (al_tokens_load(path, &d, &le) != 0) {
            snprintf(why, why_cap, "%s cannot be read (%s; give --data FILE.bin)", path, le.msg);
        } else {
            have = 1;
            for (int j = 0; j < rows && have; j++) {
                const al_sae_fctx *c = f->ctx + j;
                size_t at = (size_t)c->offset + (size_t)c->pos;
                if (c->offset < 0 || c->pos < 0 || at >= d.n || d.tok[at] != c->token) have = 0;
            }
            if (!have)
                snprintf(why, why_cap,
                         "%s does not hold the stored tokens at the stored "
                         "offsets (another file? give --data FILE.bin)",
                         path);
        }
    }
    float *acts = NULL;
    acts_why[0] = 0;
    int all = have && recompute(p, r, f, &d, &acts, acts_why, acts_cap);
    for (int j = 0; j < rows; j++) {
        const al_sae_fctx *c = f->ctx + j;
        const char **row = tok + (size_t)j * cols;
        v[(size_t)j * cols + CTX_BEFORE] = (float)c->act;
        if (!(row[CTX_BEFORE] = pic_tok_label(p, c->token, e))) goto fail;
        if (!(rl[j] = pic_printf(p, e, "%.3f  w%d:%d", c->act, c->window, c->pos))) goto fail;
        for (int k = -CTX_BEFORE; have && k <= CTX_AFTER; k++) {
            int q = c->pos + k;
            if (k == 0 || q < 0 || q >= r->seq_len) continue;
            size_t at = (size_t)c->offset + (size_t)q;
            if (at >= d.n) continue;
            if (!(row[CTX_BEFORE + k] = pic_tok_label(p, d.tok[at], e))) goto fail;
            float a = all ? acts[(size_t)j * r->seq_len + q] : 0;
            if (a > 0) v[(size_t)j * cols + CTX_BEFORE + k] = a; /* 0: left uncoloured */
        }
    }
    al_tokens_free(&d);
    al_cscale *cs = pic_scale(p, 0, 0, 0, f->max_act > 0 ? f->max_act : 1, "activation");
    al_panel *pn = pic_add_panel(p, AL_PANEL_TOKENS);
    if (!pn) return al_errf(e, "too many panels");
    pn->tr = (al_tokrows){.tok = tok,
                          .v = v,
                          .rows = rows,
                          .cols = cols,
                          .row_labels = rl,
                          .title = "top activating contexts (activation  window:position)",
                          .cs = cs,
                          .bar = 1,
                          .mark = 1,
                          .mark_col = CTX_BEFORE};
    return 0;
fail:
    al_tokens_free(&d);
    return -1;
}

/* The logit effects (raises | lowers) as one bar chart. */
static int logits_panel(pic *p, const al_sae_feature *f, al_err *e) {
    int n = f->n_up + f->n_down;
    if (n == 0) return 0;
    double *v = pic_calloc(p, (size_t)n, sizeof *v, e);
    int *g = pic_calloc(p, (size_t)n, sizeof *g, e);
    const char **lab = pic_calloc(p, (size_t)n, sizeof(char *), e);
    uint32_t *col = pic_calloc(p, (size_t)n, sizeof *col, e);
    if (!v || !g || !lab || !col) return -1;
    for (int i = 0; i < n; i++) {
        const al_sae_flogit *l = i < f->n_up ? f->up + i : f->down + (i - f->n_up);
        v[i] = l->value;
        g[i] = i >= f->n_up;
        col[i] = g[i] ? 0x2166ACu : 0xB2182Bu; /* RdBu's blue and red */
        if (!(lab[i] = pic_tok_label(p, l->token, e))) return -1;
    }
    static const char *const names[2] = {"raises", "lowers"};
    al_panel *pn = pic_add_panel(p, AL_PANEL_BARS);
    if (!pn) return al_errf(e, "too many panels");
    pn->bars = (al_bars){.v = v,
                         .n = n,
                         .group = g,
                         .group_names = names,
                         .n_groups = 2,
                         .labels = lab,
                         .colours = col,
                         .title = "logit effects (direct path)",
                         .y_title = "logit per unit activation"};
    return 0;
}

/* The DFA share of each head of the layer. */
static int heads_panel(pic *p, const al_sae_frun *r, const al_sae_feature *f, al_err *e) {
    if (f->n_heads == 0) return 0;
    double *v = pic_calloc(p, (size_t)p->H, sizeof *v, e);
    const char **lab = pic_head_labels(p, r->layer, r->layer + 1, e);
    uint32_t *col = pic_calloc(p, (size_t)p->H, sizeof *col, e);
    if (!v || !lab || !col) return -1;
    for (int h = 0; h < p->H; h++) v[h] = NAN, col[h] = al_plot_colour(0);
    for (int i = 0; i < f->n_heads; i++)
        if (f->heads[i].head >= 0 && f->heads[i].head < p->H)
            v[f->heads[i].head] = f->heads[i].share;
    if (f->top_head >= 0 && f->top_head < p->H) col[f->top_head] = al_plot_colour(1);
    al_panel *pn = pic_add_panel(p, AL_PANEL_BARS);
    if (!pn) return al_errf(e, "too many panels");
    pn->bars = (al_bars){.v = v,
                         .n = p->H,
                         .labels = lab,
                         .colours = col,
                         .title = "head attribution (DFA)",
                         .y_title = "share of pre-activation"};
    return 0;
}

int pic_draw_sae_feature(pic *p, al_err *e) {
    if (p->o->feature < 0)
        return al_errf(e, "--what sae-feature needs --feature N (a live feature of the run)");
    al_sae_frun r;
    al_sae_feature f;
    memset(&f, 0, sizeof f);
    int rc = sae_run(p, &r, e);
    if (rc == 0 && p->o->feature >= r.d_sae)
        rc = al_errf(e, "--feature %d is out of range: the SAE of run %ld has %d features",
                     p->o->feature, r.run, r.d_sae);
    if (rc == 0) rc = al_store_read_sae_feature(p->st, r.run, p->o->feature, &f, e);
    if (rc == 0 && !f.found)
        rc = al_errf(e,
                     "feature %d of run %ld never fired on its text (%d of %d features are "
                     "live; only those are stored)",
                     p->o->feature, r.run, r.n_live, r.d_sae);
    char why[AL_PATH_MAX + 256], acts_why[AL_PATH_MAX + 256];
    if (rc == 0 && f.n_ctx > 0)
        rc = contexts_panel(p, &r, &f, why, sizeof why, acts_why, sizeof acts_why, e);
    if (rc == 0) rc = logits_panel(p, &f, e);
    if (rc == 0) rc = heads_panel(p, &r, &f, e);
    if (rc == 0) {
        /* logits and heads side by side, the contexts below them */
        if (p->fig.n_panels == 3) {
            al_panel t = p->panels[0];
            p->panels[0] = p->panels[1], p->panels[1] = p->panels[2], p->panels[2] = t;
        }
        p->fig.ncols = p->fig.n_panels >= 2 ? 2 : 1;
        snprintf(p->title, sizeof p->title, "SAE feature %d of layer %d (run %ld)", f.feature,
                 r.layer, r.run);
        snprintf(p->head_txt, sizeof p->head_txt, "feature %d", f.feature);
        pic_note(p,
                 "model %s, SAE %s on %s; density %.4g (%ld of %ld positions), mean "
                 "activation %.4g, max %.4g",
                 p->dir, r.sae_dir ? r.sae_dir : "?", r.hook_name ? r.hook_name : "?", f.density,
                 f.fired, r.positions, f.mean_act, f.max_act);
        if (isnan(f.induction_index))
            pic_note(p, "induction index: none (silent on the induction probe, R %d, N %d)",
                     r.probe_r, r.probe_n);
        else
            pic_note(p,
                     "induction index %.3f (mean activation %.4g on the probe's first "
                     "occurrence, %.4g on the second; R %d, N %d)",
                     f.induction_index, f.first_mean, f.second_mean, r.probe_r, r.probe_n);
        if (f.first_fired >= 0 && f.second_fired >= 0)
            pic_note(p,
                     "%s: fires %ld times on first occurrences, %ld on second (binomial "
                     "p %s%.2g), AUROC %.3f",
                     f.induction == 1 ? "an induction feature" : "not an induction feature",
                     f.first_fired, f.second_fired, f.induction_p > 0 ? "" : "< ",
                     f.induction_p > 0 ? f.induction_p : 1e-300, f.auroc);
        if (f.next_token >= 0 && isfinite(f.next_share))
            pic_note(p,
                     "the token most often due next where it fires on a second occurrence: "
                     "%s (%.0f%% of those firings)",
                     f.next_str, 100 * f.next_share);
        if (f.top_head >= 0)
            pic_note(p,
                     "top head %d.%d, DFA share %.3f; logit effects: each logit's change per "
                     "unit of activation through W_O and W_U",
                     f.top_layer, f.top_head, f.top_share);
        if (f.n_ctx > 0 && !why[0] && !acts_why[0])
            pic_note(p,
                     "contexts (outlined: the stored position): the windows of %s, every "
                     "token coloured by the activation recomputed with the SAE (it agrees with "
                     "the stored one at each outlined token); uncoloured: 0",
                     p->o->data ? p->o->data : r.data);
        else if (f.n_ctx > 0 && !why[0])
            pic_note(p,
                     "contexts: only the activating token's activation is stored, so only it "
                     "is coloured (%s); the tokens around it are from %s",
                     acts_why, p->o->data ? p->o->data : r.data);
        else if (f.n_ctx > 0)
            pic_note(p, "contexts: the stored activating tokens only; %s", why);
    }
    al_sae_feature_free(&f);
    al_sae_frun_free(&r);
    return rc;
}

int pic_draw_sae_heads(pic *p, al_err *e) {
    al_sae_frun r;
    if (sae_run(p, &r, e)) {
        al_sae_frun_free(&r);
        return -1;
    }
    al_rows q;
    int limit = p->o->top_n > 0 ? p->o->top_n : 40;
    if (al_store_sae_top_shares(p->st, r.run, limit, &q, e)) {
        al_sae_frun_free(&r);
        return -1;
    }
    int nf = 0, rc = 0;
    for (int i = 0; i < q.nr; i++) nf += i == 0 || al_rows_x(&q, i, 0) != al_rows_x(&q, i - 1, 0);
    if (nf == 0) rc = al_errf(e, "run %ld has no live features to draw", r.run);
    float *v = rc ? NULL : pic_floats(p, (size_t)nf * p->H, e);
    const char **rl = rc ? NULL : pic_calloc(p, (size_t)nf, sizeof(char *), e);
    const char **cl = rc ? NULL : pic_head_labels(p, r.layer, r.layer + 1, e);
    if (!rc && (!v || !rl || !cl)) rc = -1;
    if (!rc) {
        for (size_t i = 0; i < (size_t)nf * p->H; i++) v[i] = NAN;
        for (int i = 0, row = -1; i < q.nr && !rc; i++) {
            if (i == 0 || al_rows_x(&q, i, 0) != al_rows_x(&q, i - 1, 0)) {
                row++;
                if (!(rl[row] = pic_printf(p, e, "f%.0f", al_rows_x(&q, i, 0)))) rc = -1;
            }
            int h = (int)al_rows_x(&q, i, 1);
            if (h >= 0 && h < p->H) v[(size_t)row * p->H + h] = (float)al_rows_x(&q, i, 2);
        }
    }
    if (!rc) {
        al_cscale *cs = pic_scale(p, 0, 1, NAN, NAN, "DFA share");
        al_cscale_fit(cs, v, (size_t)nf * p->H);
        al_panel *pn = pic_add_panel(p, AL_PANEL_HEATMAP);
        pn->hm = (al_hm){.v = v,
                         .rows = nf,
                         .cols = p->H,
                         .row_labels = rl,
                         .col_labels = cl,
                         .row_title = "feature (densest first)",
                         .col_title = "head",
                         .cs = cs,
                         .bar = 1,
                         .annotate = nf <= 40,
                         .cell = nf <= 40 ? 28 : 0};
        snprintf(p->title, sizeof p->title, "Head attribution of SAE features, layer %d (run %ld)",
                 r.layer, r.run);
        snprintf(p->head_txt, sizeof p->head_txt, "layer %d", r.layer);
        pic_note(p,
                 "rows: the %d densest of the run's %d live features; value: the share of the "
                 "feature's pre-activation from each head's z slice",
                 nf, r.n_live);
        pic_note(p, "(mean over its firing positions; the shares of a feature sum to 1, a "
                    "negative one works against its firing; grey: no share)");
    }
    al_rows_free(&q);
    al_sae_frun_free(&r);
    return rc;
}
