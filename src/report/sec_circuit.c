/* sec_circuit.c -- the circuit section of a model: the newest finished
 * discover run, the circuit its picture draws, its size and
 * faithfulness, the heads in it against those the database identifies,
 * whether it is the previous-token -> induction circuit, its picture
 * and the tau sweep's curve. */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/thresholds.h"

/* Names (column 0 of q) as "a, b, c" or "none". */
static void name_run(al_buf *h, const al_rows *q) {
    if (!q->nr) al_buf_puts(h, "none");
    for (int r = 0; r < q->nr; r++) {
        al_buf_puts(h, r ? ", " : "");
        rep_esc(h, al_rows_t(q, r, 0) ? al_rows_t(q, r, 0) : "?");
    }
}

static int in_list(const al_rows *q, const char *name) {
    for (int r = 0; name && r < q->nr; r++)
        if (al_rows_t(q, r, 0) && strcmp(al_rows_t(q, r, 0), name) == 0) return 1;
    return 0;
}

/* "kind heads (score > th): a (in the circuit), b (missed)." */
static void identified_sentence(al_buf *h, const char *what, const al_rows *ident,
                                const al_rows *heads) {
    al_buf_printf(h, " Identified %s: ", what);
    if (!ident->nr) al_buf_puts(h, "none");
    for (int r = 0; r < ident->nr; r++) {
        al_buf_puts(h, r ? ", " : "");
        rep_esc(h, al_rows_t(ident, r, 0));
        al_buf_puts(h, in_list(heads, al_rows_t(ident, r, 0)) ? " (in the circuit)" : " (missed)");
    }
    al_buf_puts(h, ".");
}

/* The K edges "a &rarr; l.b.k" of kq whose sender is in from (NULL: any)
 * and receiver in to, comma-separated. */
static void k_edges(al_buf *h, const al_rows *kq, const al_rows *from, const al_rows *to) {
    for (int r = 0, k = 0; r < kq->nr; r++)
        if ((!from || in_list(from, al_rows_t(kq, r, 0))) && in_list(to, al_rows_t(kq, r, 1))) {
            al_buf_puts(h, k++ ? ", " : "");
            rep_esc(h, al_rows_t(kq, r, 0));
            al_buf_puts(h, " &rarr; ");
            rep_esc(h, al_rows_t(kq, r, 1));
            al_buf_puts(h, ".k");
        }
}

/* The answer to "is it the previous-token -> induction circuit?" from the
 * circuit's kept K edges, any layers (kq: sender, receiver head
 * name) and the heads head_summary identifies (prev, ind; by induction_all
 * when text is set: the model's scores read held-out text). */
static void induction_answer(al_buf *h, const rmodel *M, const al_rows *kq, const al_rows *prev,
                             const al_rows *ind, const al_rows *heads, int text) {
    /* clang-format off */
    const char *ind_what = text ? "induction heads on held-out text (induction_all &gt; "
                                  AL_TH_STR(AL_TH_INDUCTION) ")"
                                : "induction heads (induction &gt; " AL_TH_STR(AL_TH_INDUCTION) ")";
    /* clang-format on */
    al_buf_puts(h, "<p class=answer><b>Is it the previous-token &rarr; induction circuit?</b> ");
    if (M->cfg.n_layers < 2) {
        al_buf_puts(h, "No: a one-layer model has no K-composition, and the induction circuit "
                       "needs a previous-token head in one layer feeding an induction head's keys "
                       "in the next.");
    } else if (!prev->nr && !ind->nr) {
        /* clang-format off */
        al_buf_puts(h, "Cannot say: the database identifies no previous-token heads (prev_token "
                       "&gt; " AL_TH_STR(AL_TH_PREV_TOKEN) ") and no ");
        al_buf_puts(h, ind_what);
        al_buf_puts(h, " in this model (attnlab scores names them).");
        /* clang-format on */
    } else {
        int yes = 0, into_ind = 0;
        for (int r = 0; r < kq->nr; r++) {
            int p = in_list(prev, al_rows_t(kq, r, 0)), i = in_list(ind, al_rows_t(kq, r, 1));
            yes += p && i;
            into_ind += i;
        }
        if (yes) {
            al_buf_puts(h, "Yes: it keeps ");
            k_edges(h, kq, prev, ind);
            al_buf_puts(h, ", a previous-token head's output read by an induction head's keys.");
        } else if (into_ind) {
            al_buf_puts(h, "Partly: it keeps K-composition into an induction head, but not from "
                           "an identified previous-token head (");
            k_edges(h, kq, NULL, ind);
            al_buf_puts(h, ").");
        } else {
            al_buf_puts(h, "No: none of its kept K-composition edges joins an identified "
                           "previous-token head to an identified induction head.");
        }
        /* clang-format off */
        identified_sentence(h, "previous-token heads (prev_token &gt; "
                            AL_TH_STR(AL_TH_PREV_TOKEN) ")", prev, heads);
        identified_sentence(h, ind_what, ind, heads);
        /* clang-format on */
    }
    al_buf_puts(h, "</p>\n");
}

/* Circuit: the newest finished discover run of the model, the circuit
 * the picture draws (al_pic_circuit_of), its size and faithfulness, the
 * heads it contains against those the database identifies, its picture
 * and, with a tau sweep, the curve. No run: no section. */
int sec_circuit(rep *R, const rmodel *M, al_err *e) {
    double last;
    if (al_sr_latest_discover(R->st, M->mid, &last, e)) return -1;
    if (isnan(last)) return 0;
    char run[32], method[8], tau_txt[32];
    double tau;
    snprintf(run, sizeof run, "%.0f", last);
    if (al_pic_circuit_of(R->st, (long)last, method, &tau, tau_txt, e) < 0) return -1;
    const char *tau_p = isnan(tau) ? NULL : tau_txt;
    al_rows c = {0}, heads = {0}, kq = {0}, prev = {0}, ind = {0};
    int rc = al_sr_circuit(R->st, run, method, tau_p, &c, e);
    if (!rc) rc = al_sr_circuit_heads(R->st, run, method, tau_p, &heads, e);
    if (!rc) rc = al_sr_circuit_k_edges(R->st, run, method, tau_p, &kq, e);
    if (!rc) rc = al_sr_head_names_above(R->st, M->mid, AL_SR_PREV_TOKEN, &prev, e);
    al_sr_score isc = AL_SR_INDUCTION;
    if (!rc) rc = al_sr_induction_score(R->st, M->mid, &isc, e);
    if (!rc) rc = al_sr_head_names_above(R->st, M->mid, isc, &ind, e);
    if (!rc && c.nr) {
        al_buf *h = &R->h;
        const char *task = al_rows_t(&c, 0, 0) ? al_rows_t(&c, 0, 0) : "?";
        al_buf_puts(h, "<h3>Circuit</h3>\n<p>Run ");
        rep_esc(h, run);
        al_buf_puts(h, " on task ");
        rep_esc(h, task);
        if (isnan(tau))
            al_buf_puts(h, ", the EAP circuit");
        else
            al_buf_printf(h, ", the ACDC circuit at tau %g", tau);
        if (al_rows_x(&c, 0, 7) > 1)
            al_buf_printf(h,
                          " (of the run's %.0f circuits: the one at the run's own tau, else "
                          "EAP's, else the smallest tau's)",
                          al_rows_x(&c, 0, 7));
        al_buf_printf(h,
                      ": it keeps %.0f of the %.0f edges of the head graph, with faithfulness %.3f",
                      al_rows_x(&c, 0, 1), al_rows_x(&c, 0, 2), al_rows_x(&c, 0, 3));
        if (al_rows_t(&c, 0, 9) && al_rows_t(&c, 0, 10))
            al_buf_printf(h, " (95%% interval %.3f to %.3f over the pairs; ", al_rows_x(&c, 0, 9),
                          al_rows_x(&c, 0, 10));
        else
            al_buf_puts(h, " (");
        al_buf_printf(h,
                      "1 = it does all the model does on the task, 0 = no better than the "
                      "corrupted run) and KL %.4f nats from the full model (metric ",
                      al_rows_x(&c, 0, 4));
        rep_esc(h, al_rows_t(&c, 0, 5) ? al_rows_t(&c, 0, 5) : "?");
        al_buf_puts(h, ").</p>\n<p>Heads in the circuit (in a kept edge): ");
        name_run(h, &heads);
        al_buf_puts(h, ".");
        if (M->cfg.n_layers >= 2) {
            al_buf_puts(h, M->cfg.n_layers == 2
                               ? " Layer-0 &rarr; layer-1 K-composition edges kept: "
                               : " K-composition edges kept (an earlier layer's "
                                 "head &rarr; a later head's keys): ");
            if (!kq.nr) al_buf_puts(h, "none");
            for (int r = 0; r < kq.nr; r++) {
                al_buf_puts(h, r ? "; " : "");
                rep_esc(h, al_rows_t(&kq, r, 0));
                al_buf_puts(h, " &rarr; ");
                rep_esc(h, al_rows_t(&kq, r, 1));
                al_buf_printf(h, ".k (score %.4g", al_rows_x(&kq, r, 2));
                if (!isnan(al_rows_x(&kq, r, 3)))
                    al_buf_printf(h, "; K-composition %.3f, random baseline %.3f",
                                  al_rows_x(&kq, r, 3), al_rows_x(&kq, r, 4));
                if (!isnan(al_rows_x(&kq, r, 5)))
                    al_buf_printf(h, "; path patching effect %.3f", al_rows_x(&kq, r, 5));
                al_buf_puts(h, ")");
            }
            al_buf_puts(h, ".");
        }
        al_buf_puts(h, "</p>\n");
        induction_answer(h, M, &kq, &prev, &ind, &heads, isc == AL_SR_INDUCTION_ALL);
        al_pic_opts po = al_pic_defaults();
        po.run_id = (long)last;
        char cap[512], slug[64];
        snprintf(slug, sizeof slug, "%s-%s", task, run);
        rep_slug(slug, slug, sizeof slug);
        snprintf(cap, sizeof cap,
                 "The circuit (task %s): embeddings at the bottom, the logits "
                 "on top; an edge's colour is its channel (q, k, v, direct), its width its "
                 "score; removed edges pale.",
                 task);
        rep_run_picture(R, M, &po, "circuit", slug, cap);
        if (al_rows_x(&c, 0, 6) >= 2) {
            snprintf(cap, sizeof cap,
                     "The tau sweep (task %s): edges kept against faithfulness, "
                     "one point per tau.",
                     task);
            rep_run_picture(R, M, &po, "circuit-curve", slug, cap);
        }
    }
    al_rows_free(&c);
    al_rows_free(&heads);
    al_rows_free(&kq);
    al_rows_free(&prev);
    al_rows_free(&ind);
    return rc ? -1 : 0;
}
