/* pic_circuits.c -- the pictures of an attnlab discover run (family
 * "circuits"): one circuit as a layered graph, and the circuit size
 * against faithfulness over the run's tau sweep. */
#define _POSIX_C_SOURCE 200809L
#include "pictures_internal.h"

#include "attnlab/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ circuits */

typedef al_store_circuit crow;
typedef al_store_discover_run crun;

/* ACDC first, by tau ascending; then EAP. */
static int crow_cmp(const void *a, const void *b) {
    const crow *x = a, *y = b;
    int ex = isnan(x->tau), ey = isnan(y->tau);
    if (ex != ey) return ex - ey;
    return (x->tau > y->tau) - (x->tau < y->tau);
}

/* The same tau, allowing for the decimal round trip through config_json. */
static int same_tau(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1, fabs(b)); }

/* Run --run (else the model's newest finished discover run), checked,
 * its circuits sorted (crow_cmp). */
static int circuit_run_info(pic *p, crun *r, al_err *e) {
    memset(r, 0, sizeof *r);
    long run = p->o->run_id;
    if (run <= 0 && (al_store_latest_discover_run(p->st, p->model_id, &run, e) ||
                     pic_need_run(p, run, "discover", NULL, e)))
        return -1;
    if (al_store_read_discover_run(p->st, run, r, e) ||
        pic_run_checked(p, &r->h, "discover", p->o->what, e))
        return -1;
    qsort(r->c, (size_t)r->n, sizeof r->c[0], crow_cmp);
    return 0;
}

int al_pic_circuit_of(al_store *st, long run, char *method, double *tau, char *tau_txt, al_err *e) {
    int found = al_store_default_circuit(st, run, method, tau, e);
    if (found <= 0) return found;
    if (isnan(*tau))
        tau_txt[0] = 0;
    else
        snprintf(tau_txt, 32, "%.17g", *tau);
    return 1;
}

/* The circuit to draw (pictures.h): --tau's ACDC row, else
 * al_pic_circuit_of's. */
static int circuit_pick(pic *p, const crun *r, al_err *e) {
    double want = p->o->tau;
    if (isfinite(want)) {
        char taus[256] = "";
        for (int i = 0; i < r->n; i++) {
            if (isnan(r->c[i].tau)) continue;
            if (same_tau(r->c[i].tau, want)) return i;
            size_t n = strlen(taus);
            snprintf(taus + n, sizeof taus - n, "%s%g", n ? ", " : "", r->c[i].tau);
        }
        al_errf(e, "run %ld has no ACDC circuit at tau %g (%s%s)", r->h.run, want,
                taus[0] ? "its taus: " : "it has none", taus);
        return -1;
    }
    char method[8], txt[32];
    double tau;
    int found = al_pic_circuit_of(p->st, r->h.run, method, &tau, txt, e);
    if (found < 0) return -1;
    for (int i = 0; found && i < r->n; i++)
        if (strcmp(r->c[i].method, method) == 0 &&
            (isnan(tau) ? isnan(r->c[i].tau) : !isnan(r->c[i].tau) && same_tau(r->c[i].tau, tau)))
            return i;
    return 0; /* run_checked saw a row: r->n >= 1 */
}

/* Channel colours: q blue, k red (the K-composition of an induction
 * circuit stands out), v green, direct purple. */
static const uint32_t channel_colour[4] = {0x1F77B4, 0xD62728, 0x2CA02C, 0x9467BD};
static const char *const channel_name[4] = {"q", "k", "v", "direct"};

static int channel_index(const char *s) {
    for (int c = 0; s && c < 4; c++)
        if (strcmp(s, channel_name[c]) == 0) return c;
    return -1;
}

/* Graph node of a sender: 0 embed, 1 pos, 2 + l·H + h; -1 if malformed. */
static int circuit_node(pic *p, const char *s) {
    if (!s) return -1;
    if (strcmp(s, "embed") == 0) return 0;
    if (strcmp(s, "pos") == 0) return 1;
    const char *end;
    int k = pic_parse_head(p, s, &end);
    return k >= 0 && !*end ? 2 + k : -1;
}

typedef struct cedges {
    pic *p;
    al_netedge *ed;
    double *score;
    int n, cap, bad, kept;
} cedges;

static void cedge_row(cedges *c, const al_store_edge_row *x) {
    pic *p = c->p;
    int from = circuit_node(p, x->sender), ch = channel_index(x->channel), kept = x->kept == 1;
    int rl = isnan(x->receiver_layer) ? -1 : (int)x->receiver_layer,
        rh = isnan(x->receiver_head) ? -1 : (int)x->receiver_head;
    int logits = rl < 0 && rh < 0, to = logits ? 2 + p->L * p->H : 2 + rl * p->H + rh;
    int ok = from >= 0 && ch >= 0 && c->n < c->cap &&
             (logits ? ch == 3
                     : ch < 3 && rl >= 0 && rl < p->L && rh >= 0 && rh < p->H &&
                           (from < 2 || (from - 2) / p->H < rl));
    if (!ok) {
        c->bad++;
        return;
    }
    c->kept += kept;
    c->score[c->n] = x->score;
    c->ed[c->n++] = (al_netedge){from, to, logits ? -1 : ch, channel_colour[ch], 1, !kept};
}

#define CIRCUIT_MAX_W 6 /* px of the strongest kept edge */

int pic_draw_circuit(pic *p, al_err *e) {
    crun r;
    if (circuit_run_info(p, &r, e)) return -1;
    int pick = circuit_pick(p, &r, e);
    if (pick < 0) return -1;
    const crow *c = &r.c[pick];
    int L = p->L, H = p->H, n_nodes = 3 + L * H;
    al_netnode *nodes = pic_calloc(p, (size_t)n_nodes, sizeof *nodes, e);
    cedges ce = {.p = p, .cap = al_graph_n_edges(L, H)};
    ce.ed = pic_calloc(p, (size_t)ce.cap, sizeof *ce.ed, e);
    ce.score = pic_calloc(p, (size_t)ce.cap, sizeof *ce.score, e);
    if (!nodes || !ce.ed || !ce.score) return -1;
    char ts[40];
    snprintf(ts, sizeof ts, "%.17g", c->tau);
    al_store_edge_row *rows;
    int n_rows;
    if (al_store_read_circuit_edges(p->st, r.h.run, c->method, c->tau, &rows, &n_rows, e) ||
        !pic_keep(p, rows, e))
        return -1;
    for (int i = 0; i < n_rows; i++) cedge_row(&ce, &rows[i]);
    if (!ce.n)
        return al_errf(e, "run %ld has no edges for its %s circuit%s%s (circuit_edges is empty)",
                       r.h.run, c->method, isnan(c->tau) ? "" : " at tau ",
                       isnan(c->tau) ? "" : ts);
    /* width ∝ |score| among the kept edges, 1..CIRCUIT_MAX_W px */
    double top = 0;
    for (int i = 0; i < ce.n; i++)
        if (!ce.ed[i].faint && isfinite(ce.score[i])) top = fmax(top, fabs(ce.score[i]));
    int *used = pic_calloc(p, (size_t)n_nodes, sizeof(int), e);
    if (!used) return -1;
    for (int i = 0; i < ce.n; i++) {
        al_netedge *g = &ce.ed[i];
        if (g->faint) continue;
        double s = ce.score[i];
        g->width =
            top > 0 && isfinite(s) ? 1 + (int)lround((CIRCUIT_MAX_W - 1) * fabs(s) / top) : 2;
        used[g->from] = used[g->to] = 1;
    }
    if (p->o->hide_removed) { /* keep only the kept edges, in order */
        int k = 0;
        for (int i = 0; i < ce.n; i++)
            if (!ce.ed[i].faint) ce.ed[k++] = ce.ed[i];
        ce.n = k;
    }
    nodes[0] = (al_netnode){.label = "embed", .row = 0, .fill = 0xEEEEEE, .dim = !used[0]};
    nodes[1] = (al_netnode){.label = "pos", .row = 0, .fill = 0xEEEEEE, .dim = !used[1]};
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            al_netnode *n = &nodes[2 + l * H + h];
            if (!(n->label = pic_printf(p, e, "%d.%d", l, h))) return -1;
            n->row = 1 + l, n->n_ports = 3, n->fill = 0xFFFFFF, n->dim = !used[2 + l * H + h];
            for (int k = 0; k < 3; k++)
                n->port_label[k] = channel_name[k], n->port_colour[k] = channel_colour[k];
        }
    nodes[2 + L * H] = (al_netnode){.label = "logits", .row = L + 1, .fill = 0xEEEEEE};
    /* one row per layer between the embeddings and the logits */
    const char **row_names = pic_calloc(p, (size_t)L + 2, sizeof *row_names, e);
    if (!row_names) return -1;
    row_names[0] = "embeddings", row_names[L + 1] = "logits";
    for (int l = 0; l < L; l++)
        if (!(row_names[1 + l] = pic_printf(p, e, "layer %d", l))) return -1;
    al_panel *q = pic_add_panel(p, AL_PANEL_NET);
    q->net = (al_netplot){nodes, n_nodes, ce.ed, ce.n, row_names, L + 2, 0, 0};
    for (int k = 0; k < 4; k++)
        p->legend[k] = (al_legend_item){channel_name[k], channel_colour[k], 0};
    p->legend[4] = (al_legend_item){"removed (pale)", al_netplot_faint(0x404040), 0};
    p->fig.legend = p->legend;
    p->fig.n_legend = p->o->hide_removed ? 4 : 5;
    int acdc = !isnan(c->tau);
    if (acdc)
        snprintf(p->title, sizeof p->title, "circuit (ACDC, tau %g, task %s): %d of %d edges kept",
                 c->tau, r.h.task, c->n_kept, c->n_edges);
    else
        snprintf(p->title, sizeof p->title, "circuit (EAP, task %s): %d of %d edges kept", r.h.task,
                 c->n_kept, c->n_edges);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p,
             "faithfulness %.3f (1 = the circuit does all the model does on the task), KL from the "
             "full model %.4f nats, metric %s",
             c->faith, c->kl, r.metric);
    pic_note(p,
             "an edge enters a head at its q, k or v port, or the logits directly; its colour is "
             "its channel, its width its score (widest: %.4g)%s; grey boxes: in no kept edge",
             top, p->o->hide_removed ? "; removed edges not drawn" : ", removed edges pale");
    if (r.n > 1)
        pic_note(p, "the run has %d circuits; this one by %s (--tau chooses another)", r.n,
                 isfinite(p->o->tau)                                          ? "--tau"
                 : isfinite(r.cfg_tau) && acdc && same_tau(c->tau, r.cfg_tau) ? "the run's own tau"
                 : acdc                                                       ? "the smallest tau"
                        : "being the EAP circuit");
    if (ce.bad) pic_note(p, "%d edge rows did not fit the model's graph and are not drawn", ce.bad);
    pic_note(p, "%s", p->run_txt);
    return 0;
}

int pic_draw_circuit_curve(pic *p, al_err *e) {
    crun r;
    if (circuit_run_info(p, &r, e)) return -1;
    int n_acdc = 0, eap = -1;
    for (int i = 0; i < r.n; i++) {
        if (isnan(r.c[i].tau))
            eap = i;
        else
            n_acdc++;
    }
    if (n_acdc < 2)
        return al_errf(e,
                       "run %ld has %d ACDC circuit%s: no tau sweep to draw (discover with "
                       "several taus)",
                       r.h.run, n_acdc, n_acdc == 1 ? "" : "s");
    double *x = pic_calloc(p, (size_t)n_acdc + 1, sizeof(double), e);
    double *y = pic_calloc(p, (size_t)n_acdc + 1, sizeof(double), e);
    const char **lab = pic_calloc(p, (size_t)n_acdc + 1, sizeof(char *), e);
    al_series *s = pic_calloc(p, 2, sizeof *s, e);
    if (!x || !y || !lab || !s) return -1;
    for (int i = 0; i < n_acdc; i++) { /* r.c is in tau order: the line joins the sweep in order */
        x[i] = r.c[i].n_kept, y[i] = r.c[i].faith;
        if (!(lab[i] = pic_printf(p, e, "tau %g", r.c[i].tau))) return -1;
    }
    int ns = 0;
    s[ns++] =
        (al_series){x, y, n_acdc, "ACDC, one point per tau", channel_colour[0], 2, AL_MARK_CIRCLE,
                    0, 0, lab};
    if (eap >= 0) {
        x[n_acdc] = r.c[eap].n_kept, y[n_acdc] = r.c[eap].faith;
        lab[n_acdc] = "EAP";
        s[ns++] = (al_series){x + n_acdc,
                              y + n_acdc,
                              1,
                              "EAP (edges by attribution)",
                              channel_colour[1],
                              0,
                              AL_MARK_DIAMOND,
                              0,
                              1,
                              lab + n_acdc};
    }
    al_panel *q = pic_add_panel(p, AL_PANEL_LINES);
    q->ln.s = s;
    q->ln.n = ns;
    q->ln.x_title = "edges kept";
    q->ln.y_title = "faithfulness";
    q->ln.w = 420, q->ln.h = 260;
    /* room right of the largest circuit for its tau label */
    double most = 0;
    for (int i = 0; i < n_acdc + (eap >= 0); i++) most = fmax(most, x[i]);
    q->ln.x_lo = 0;
    q->ln.x_hi = ceil(most * 1.2) + 1;
    q->ln.hline = 1;
    q->ln.hline_label = "the full model";
    q->ln.legend = 1;
    q->ln.x_integer = 1;
    snprintf(p->title, sizeof p->title, "circuit size against faithfulness (task %s, %d taus)",
             r.h.task, n_acdc);
    snprintf(p->head_txt, sizeof p->head_txt, "all");
    pic_note(p,
             "each point: the circuit ACDC keeps at one threshold tau (a larger tau removes more "
             "edges); faithfulness 1 = it does all the model does on the task, 0 = no better than "
             "the corrupted run; metric %s",
             r.metric);
    pic_note(p, "%s", p->run_txt);
    return 0;
}
