/* cmd_discover.c -- `attnlab discover`: circuit discovery over the head
 * graph (discover.h: ACDC or an EAP ranking) on a pair task, into
 * circuit_runs / circuit_edges (schema v5) and a circuit file
 * (circuit_file.h) beside the model.
 *
 * As patch and attribute (the driver's phases, registry.h), everything
 * the options, the model or the task can refuse is refused before a run
 * is begun (check, prepare): a model deeper than the graph covers
 * (AL_GRAPH_MAX_LAYERS), a bad --tau or --sweep item, an --out that cannot be
 * made. SIGINT/SIGTERM marks the run failed with "interrupted", commits
 * none of its rows, writes no file and exits 130.
 *
 * One run holds every circuit it found: the main one (--tau, or EAP's
 * --recover) and, with --sweep, ACDC's circuit at each further tau, all
 * stored in one transaction. The circuit file holds the main circuit
 * only; it is written with al_drive_file, so a failed write fails the
 * run and the file is in place only once the run's rows are. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/doc_text.h"
#include "attnlab/circuit_file.h"
#include "attnlab/discover.h"
#include "attnlab/json.h"
#include "attnlab/patch.h"
#include "attnlab/registry.h"
#include "attnlab/stop.h"
#include "attnlab/store_analysis.h"

#include <cjson/cJSON.h>

#define MAX_SWEEP 32

typedef struct disc_args {
    al_an_where w;
    al_patch_opts o; /* the pair task */
    const char *method, *metric, *sweep, *out;
    double tau, recover;
    int show;
    const char *probe_tokens; /* all | seen | a token file: the induction task's ids */
    const char *acdc_order, *acdc_remove; /* al_discover_opts order, remove_if */
    int resample; /* the main circuit's search rerun on this many resamples of the pairs */
} disc_args;

#define DISC_ARGS_INIT                                                                             \
    {                                                                                              \
        AL_AN_WHERE_INIT, AL_PATCH_OPTS_INIT, "acdc", "kl", NULL, NULL, 0.01, 0.9, 10,             \
            AL_PROBE_TOKENS_DEFAULT, "embed-first", "le", 0                                        \
    }
static disc_args g_disc = DISC_ARGS_INIT;

static al_flag disc_flags[] =
    {AL_FLAG_MODEL(g_disc),
     AL_FLAG_DB(g_disc),
     AL_FLAGS_TASK_FILE(g_disc),
     AL_FLAGS_TASK_DRAW(g_disc),
     {"method", AL_STR, &g_disc.method, "M", "acdc or eap", 0, 0},
     {"metric", AL_STR, &g_disc.metric, "M",
      "kl (KL from the full model) or logit_diff (the task's own metric)", 0, 0},
     {"tau", AL_FLOAT, &g_disc.tau, "X", "acdc: an edge goes if the loss grows by at most X", 0, 0},
     {"sweep", AL_STR, &g_disc.sweep, "X,Y,...",
      "acdc: also the circuit at each of these taus (the edges-vs-faithfulness curve)", 0, 0},
     {"acdc-order", AL_STR, &g_disc.acdc_order, "O",
      "acdc: a receiver's senders tried embed-first (index order) or latest-first (the reference "
      "implementation's order: the latest head first, embed last)",
      0, 0},
     {"acdc-remove", AL_STR, &g_disc.acdc_remove, "R",
      "acdc: remove an edge when the loss grows by le (at most tau) or lt (less than tau, the "
      "reference implementation's rule)",
      0, 0},
     {"recover", AL_FLOAT, &g_disc.recover, "R", "eap: keep edges until faithfulness reaches R", 0,
      0},
     {"out", AL_STR, &g_disc.out, "DIR",
      "where the circuit file goes (default: the model directory)", 0, 0},
     AL_FLAG_MASK(g_disc),
     AL_FLAG_INTERVENE(g_disc),
     {"show", AL_INT, &g_disc.show, "N", "kept edges printed (largest |score| first)", 0, 0},
     AL_FLAGS_CI(g_disc),
     {"resample", AL_INT, &g_disc.resample, "N",
      "rerun the main circuit's search on N bootstrap resamples of the pairs (N times its cost; "
      "seeded by --ci-seed): each edge's inclusion frequency and the circuits' Jaccard "
      "similarity to the main one",
      0, 0},
     AL_FLAG_THREADS(g_disc),
     AL_FLAGS_END};

static int run_discover(int argc, char **argv);
extern const al_analysis al_an_discover;

al_command al_cmd_discover = {
    "discover",
    "circuit discovery: ACDC or an EAP ranking over the head graph of a model of any depth",
    "--model DIR --db FILE [--task induction|names|file] [--method acdc|eap] [--metric kl|logit_diff]",
    "The graph: embed, pos and every head's output into every later head's q, k and\n"
    "v input and into the logits. ACDC (Conmy et al. 2023) visits the receivers\n"
    "from the logits backwards and removes each incoming edge (the receiver then\n"
    "gets the sender's value from the corrupted run) if the loss grows by at most\n"
    "--tau: KL from the full model (--metric kl) or the fall of the task's metric\n"
    "(logit_diff). --sweep X,Y,... also finds the circuit at each of these taus,\n"
    "for the curve of kept edges against faithfulness. --method eap ranks the edges\n"
    "by edge attribution patching and keeps the best until the circuit's\n"
    "faithfulness reaches --recover. Faithfulness = (M_circuit - M_corr) /\n"
    "(M_clean - M_corr) on the task's metric. Tasks as for `attnlab patch`. Rows go\n"
    "to circuit_runs (one per circuit: each tau) and circuit_edges (every edge of\n"
    "each circuit, its score and whether it was kept); the main circuit also goes\n"
    "to OUT/circuit-<task>-<method>.json (--out, default the model directory).\n"
    "Models of 1 to 16 layers (the graph of an L-layer model has every earlier\n"
    "head into every later head's q, k, v). Ctrl-C stops it: the run is marked\n"
    "failed, nothing is stored, exit 130.",
    disc_flags,
    run_discover,
};

/* ------------------------------------------------------------ options */

/* --sweep "X,Y,...": each a finite number >= 0, no repeats, at most
 * MAX_SWEEP. A value equal to tau is dropped (the main circuit is that
 * circuit). *n values into out. */
static int parse_sweep(const char *s, double tau, double *out, int *n, al_err *e) {
    *n = 0;
    const char *p = s;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item)
            return al_errf(e, "--sweep: '%.*s' is not a number (give X,Y,... with X, Y >= 0)",
                           (int)(len < 40 ? len : 40), p);
        memcpy(item, p, len);
        item[len] = 0;
        char *ep;
        double x = strtod(item, &ep);
        if (*ep || !isfinite(x) || x < 0)
            return al_errf(e, "--sweep: '%s' is not a finite number >= 0", item);
        for (int i = 0; i < *n; i++)
            if (out[i] == x) return al_errf(e, "--sweep: %g is listed twice", x);
        if (x != tau) {
            if (*n == MAX_SWEEP) return al_errf(e, "--sweep: at most %d values", MAX_SWEEP);
            out[(*n)++] = x;
        }
        if (!end) return 0;
        p = end + 1;
    }
}

/* ------------------------------------------------------------ printing */

/* The main circuit of the document. */
static void text_circuit(const cJSON *doc) {
    const cJSON *tk = al_dt_get(doc, "task"), *c = al_dt_get(doc, "circuit");
    const cJSON *edges = al_dt_get(c, "kept_edges");
    const int N = al_dt_int(tk, "pairs"), kept = al_dt_int(c, "kept"), ne = al_dt_int(c, "edges");
    printf("model %s (sha256 %.12s…) -> run %lld of %s\n", al_dt_str(doc, "model"),
           al_dt_str(doc, "sha256"), (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"));
    printf("task %s: %d pair%s of %d tokens; method %s", al_dt_str(tk, "name"), N,
           N == 1 ? "" : "s", al_dt_int(tk, "T"), al_dt_str(doc, "method"));
    if (al_dt_get(c, "tau"))
        printf(", tau %g", al_dt_num(c, "tau"));
    else
        printf(", recover %g", al_dt_num(c, "recover"));
    printf(", metric %s\n", al_dt_str(doc, "metric"));
    printf("circuit: %d of %d edges kept (%.1f%%)\n", kept, ne, 100.0 * kept / ne);
    int n = cJSON_GetArraySize(edges), show = al_dt_int(doc, "show");
    if (n) { /* kept_edges are ranked by |score| already */
        show = show < n ? show : n;
        printf("top %d of %d kept edges by |score|:\n  %-16s %10s\n", show, n, "edge", "score");
        for (int i = 0; i < show; i++) {
            const cJSON *e = cJSON_GetArrayItem(edges, i);
            double sc = al_dt_num(e, "score");
            printf("  %-16s ", al_dt_str(e, "edge"));
            if (isnan(sc))
                printf("%10s\n", "-");
            else
                printf("%+10.4g\n", sc + 0.0);
        }
    }
    const cJSON *iv = al_dt_get(doc, "intervals"), *ci = al_dt_get(c, "faithfulness_ci");
    printf("faithfulness %.4f ± %.4f", al_dt_num(c, "faithfulness"),
           al_dt_num(c, "faithfulness_se"));
    if (isfinite(al_dt_at(ci, 0))) printf(" [%.4f, %.4f]", al_dt_at(ci, 0), al_dt_at(ci, 1));
    printf(" (M_clean %.4f, M_corr %.4f, M_circuit %.4f); KL %.4g\n", al_dt_num(c, "m_clean"),
           al_dt_num(c, "m_corr"), al_dt_num(c, "m_circuit"), al_dt_num(c, "kl") + 0.0);
    printf("  (± standard error over the %d pairs; %g%% interval: bootstrap of the ratio over the "
           "pairs, %d resamples)\n",
           al_dt_int(iv, "items"), 100 * al_dt_num(iv, "level"), al_dt_int(iv, "bootstrap"));
    printf("%ld evaluations in %.2f s\n", (long)al_dt_num(c, "evaluations"),
           al_dt_num(c, "seconds"));
}

/* The text of attnlab.discover/1, from the document alone. */
static void disc_text(const cJSON *doc) {
    const cJSON *sw = al_dt_get(doc, "sweep"), *c;
    int n = al_dt_int(doc, "circuits");
    text_circuit(doc);
    if (cJSON_GetArraySize(sw)) { /* the curve: every tau found (the main one among them) */
        printf("sweep (tau -> kept edges -> faithfulness):\n  %-10s %6s %13s %9s %10s\n", "tau",
               "kept", "faithfulness", "±", "KL");
        cJSON_ArrayForEach(c, sw) {
            printf("  %-10g %6d %13.4f %8.4f %10.4g\n", al_dt_num(c, "tau"), al_dt_int(c, "kept"),
                   al_dt_num(c, "faithfulness"), al_dt_num(c, "faithfulness_se"),
                   al_dt_num(c, "kl") + 0.0);
        }
    }
    const cJSON *st = al_dt_get(doc, "stability");
    if (st) {
        const cJSON *ed = al_dt_get(st, "edges"), *x;
        int n_main = 0, n_stable = 0, n_other = 0;
        cJSON_ArrayForEach(x, ed) {
            int kept = al_dt_bool(x, "kept");
            n_main += kept;
            n_stable += kept && al_dt_num(x, "frequency") >= 0.95;
            n_other += !kept && al_dt_num(x, "frequency") >= 0.5;
        }
        printf("stability over %d resamples of the pairs (%.1f s): Jaccard with the main circuit "
               "%.3f ± %.3f (sd; min %.3f); %d of its %d edges kept in >= 95%% of them, %d other "
               "edges in >= 50%%\n",
               al_dt_int(st, "resamples"), al_dt_num(st, "seconds"), al_dt_num(st, "jaccard_mean"),
               al_dt_num(st, "jaccard_sd"), al_dt_num(st, "jaccard_min"), n_stable, n_main,
               n_other);
        /* what is unstable: the main circuit's edges kept in under 95% of
         * the resamples, and the others kept in at least half of them */
        int show = al_dt_int(doc, "show"), i = 0;
        if (n_main - n_stable + n_other > 0 && show > 0)
            printf("  %-16s %5s %9s\n", "edge", "main", "kept in");
        cJSON_ArrayForEach(x, ed) {
            int kept = al_dt_bool(x, "kept");
            double f = al_dt_num(x, "frequency");
            if (kept ? f >= 0.95 : f < 0.5) continue;
            if (i++ >= show) break;
            printf("  %-16s %5s %8.1f%%\n", al_dt_str(x, "edge"), kept ? "yes" : "no", 100 * f);
        }
    }
    printf("circuit file %s\n", al_dt_str(doc, "circuit_file"));
    printf("discover: %d circuit%s in %.2f s\n", n, n == 1 ? "" : "s", al_dt_num(doc, "seconds"));
}

/* ------------------------------------------------------------ JSON */

static int num(cJSON *o, const char *k, double v) {
    return cJSON_AddNumberToObject(o, k, v) ? 0 : -1;
}

/* One circuit: its numbers and its kept edges by |score|. */
static cJSON *json_circuit(double tau, const al_discover_opts *o, const al_discover_result *r) {
    cJSON *j = cJSON_CreateObject(), *edges;
    if (!j || (!strcmp(o->method, "acdc") ? num(j, "tau", tau) : num(j, "recover", o->recover)) ||
        num(j, "kept", r->n_kept) || num(j, "edges", r->n_edges) ||
        num(j, "faithfulness", r->faithfulness) ||
        al_json_add_ci(j, "faithfulness", &r->faith_ci) || num(j, "m_clean", r->m_clean) ||
        num(j, "m_corr", r->m_corr) || num(j, "m_circuit", r->m_circuit) ||
        num(j, "kl", r->kl_circuit) || num(j, "evaluations", (double)r->evals) ||
        num(j, "seconds", r->seconds) || !(edges = cJSON_AddArrayToObject(j, "kept_edges"))) {
        cJSON_Delete(j);
        return NULL;
    }
    double *sc = malloc(sizeof(double) * (size_t)(r->n_kept ? r->n_kept : 1));
    int *at = malloc(sizeof(int) * (size_t)(r->n_kept ? r->n_kept : 1)), n = 0, *idx = NULL;
    if (sc && at) {
        for (int k = 0; k < r->n_edges; k++)
            if (r->kept[k]) at[n] = k, sc[n++] = r->score[k];
        idx = al_by_magnitude(sc, n);
    }
    int ok = idx != NULL;
    for (int i = 0; ok && i < n; i++) {
        char nm[64];
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(edges, e) &&
             cJSON_AddStringToObject(e, "edge",
                                     al_graph_edge_name(r->L, r->H, at[idx[i]], nm, sizeof nm)) &&
             cJSON_AddNumberToObject(e, "score", sc[idx[i]]);
    }
    free(idx);
    free(sc);
    free(at);
    if (!ok) cJSON_Delete(j);
    return ok ? j : NULL;
}

/* attnlab.discover/1 (docs/json.md): the main circuit, and under --sweep
 * every circuit the run found, by tau (after the model's fields, which
 * the driver adds). */
static int json_discover(cJSON *doc, const disc_args *a, const al_pairs *t,
                         const al_discover_opts *o, const double *taus,
                         const al_discover_result *rs, int n_done, int n_sweep, const char *path,
                         double seconds) {
    cJSON *tk, *sw, *main_c;
    if (num(doc, "show", a->show) || num(doc, "circuits", n_done) || num(doc, "seconds", seconds) ||
        !(tk = cJSON_AddObjectToObject(doc, "task")) ||
        !cJSON_AddStringToObject(tk, "name", t->task) || num(tk, "pairs", t->N) ||
        num(tk, "T", t->T) || !cJSON_AddStringToObject(tk, "probe_tokens", a->probe_tokens) ||
        !cJSON_AddStringToObject(doc, "method", o->method) ||
        !cJSON_AddStringToObject(doc, "metric", o->metric) ||
        !cJSON_AddStringToObject(doc, "circuit_file", path) ||
        !al_json_add_intervals(doc, o->ci_level, o->bootstrap, o->ci_seed, t->N,
                               "faithfulness_se: delta method for the ratio; faithfulness_ci: "
                               "bootstrap expanded percentile interval, resampling whole pairs "
                               "and recomputing the ratio") ||
        !(main_c = json_circuit(taus[0], o, &rs[0])) ||
        !cJSON_AddItemToObject(doc, "circuit", main_c) ||
        !(sw = cJSON_AddArrayToObject(doc, "sweep")))
        return -1;
    /* every circuit of the run (the main one among them), by tau */
    for (int done = 0, i; n_sweep > 0 && done < n_done; done++) {
        int best = -1;
        for (i = 0; i < n_done; i++) {
            int taken = 0;
            for (int k = 0; k < cJSON_GetArraySize(sw); k++)
                taken |= cJSON_GetNumberValue(
                             cJSON_GetObjectItem(cJSON_GetArrayItem(sw, k), "tau")) == taus[i];
            if (!taken && (best < 0 || taus[i] < taus[best])) best = i;
        }
        cJSON *c = json_circuit(taus[best], o, &rs[best]);
        if (!c || !cJSON_AddItemToArray(sw, c)) return cJSON_Delete(c), -1;
    }
    return 0;
}

/* ------------------------------------------------------------ running */

/* The main circuit's file: OUT/circuit-<task>-<method>.json. */
static int write_circuit(al_drive *dr, const disc_args *a, const al_behave *bh, const al_pairs *t,
                         const al_discover_opts *o, const al_discover_result *r, char *path,
                         size_t cap, al_err *e) {
    char name[128];
    snprintf(name, sizeof name, "circuit-%s-%s.json", t->task, o->method);
    if (al_path_join(path, cap, a->out ? a->out : a->w.model, name, e)) return -1;
    int acdc = !strcmp(o->method, "acdc");
    al_circuit_info info = {bh->sha,
                            t->task,
                            o->method,
                            o->metric,
                            acdc ? o->tau : NAN,
                            acdc ? NAN : o->recover,
                            r->faithfulness,
                            r->kl_circuit,
                            (long long)bh->run_id};
    char *text = NULL;
    if (al_circuit_format(&info, r->L, r->H, r->kept, r->score, &text, e)) return -1;
    int rc = al_drive_file(dr, path, text, strlen(text), e);
    free(text);
    return rc;
}

/* The discovery options of the command's arguments. */
static al_discover_opts disc_opts(const disc_args *a) {
    al_discover_opts d = al_discover_opts_defaults();
    d.method = a->method, d.metric = a->metric, d.tau = a->tau, d.recover = a->recover;
    d.batch = a->o.batch, d.order = a->acdc_order, d.remove_if = a->acdc_remove;
    d.ci_level = a->o.ci_level, d.bootstrap = a->o.bootstrap, d.ci_seed = a->o.ci_seed;
    return d;
}

static int disc_check(const void *args, const al_flag *fl, al_err *e) {
    const disc_args *a = args;
    al_discover_opts d = disc_opts(a);
    double taus[MAX_SWEEP];
    int n_sweep = 0;
    (void)fl;
    if (al_patch_opts_check(&a->o, e)) return -1;
    if (al_probe_tokens_check(a->probe_tokens, a->o.task, e)) return -1;
    if (!isfinite(a->tau) || a->tau < 0)
        return al_errf(e, "--tau must be a finite number >= 0 (got %g)", a->tau);
    if (al_discover_opts_check(&d, e)) return -1;
    if (a->sweep && strcmp(d.method, "acdc"))
        return al_errf(e, "--sweep is for --method acdc (EAP has no tau)");
    if (a->w.intervene && strcmp(d.method, "acdc"))
        return al_errf(e, "--intervene is for --method acdc: EAP differentiates the forward, and "
                          "an intervened forward has no backward");
    if (a->sweep && parse_sweep(a->sweep, a->tau, taus, &n_sweep, e)) return -1;
    if (a->show < 0) return al_errf(e, "--show must be >= 0");
    if (a->resample < 0 || a->resample > 10000)
        return al_errf(e, "--resample must be 0..10000 (got %d)", a->resample);
    return al_threads_check(a->w.threads, e);
}

/* The run's state between the driver's phases. */
typedef struct disc_state {
    al_patch_opts o; /* the pair task */
    al_discover_opts d; /* d.tau: the main circuit's (between the phases) */
    al_probe_load pl; /* --probe-tokens: what the induction task is made of */
    al_pairs t;
    double taus[MAX_SWEEP + 1]; /* [0] the main circuit's, then --sweep's */
    int n_sweep, n_done; /* circuits asked beyond the main one; found */
    al_discover_result rs[MAX_SWEEP + 1]; /* by taus */
    al_discover_stability st; /* --resample: the main circuit's (st.n 0: none) */
    al_warnings warn; /* every circuit's warnings in turn (the first AL_WARN_MAX) */
    char path[AL_PATH_MAX]; /* the circuit file written */
    double t0; /* when the model was loaded: the printed total */
} disc_state;

/* Everything the options, the model or the task can refuse, before a run
 * exists; a signal while the names task is made leaves no run (the
 * driver catches SIGINT/SIGTERM from before the load). */
static int disc_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    disc_args *a = args;
    disc_state *s = state;
    al_behave *bh = dr->b;
    int L = bh->m.cfg.n_layers;
    s->d = disc_opts(a);
    if (a->sweep && parse_sweep(a->sweep, a->tau, s->taus + 1, &s->n_sweep, e)) return -1;
    s->t0 = al_now();
    s->o = a->o;
    s->o.stop = &al_stop;
    if (al_graph_n_edges(L, bh->m.cfg.n_heads) <= 0)
        return al_errf(e, "%s has %d layers; circuit discovery covers models of 1 to %d layers",
                       a->w.model, L, AL_GRAPH_MAX_LAYERS);
    /* --out is made when the circuit is written: a refused or interrupted
     * run leaves no empty folder behind */
    if (a->out && al_mkdir_p_check(a->out, e)) return -1;
    if (al_probe_load_open(&s->pl, a->probe_tokens, a->w.model, NULL, NULL, bh->m.cfg.d_vocab, e))
        return -1;
    s->o.probe_src = al_probe_load_src(&s->pl);
    if (!s->o.task || !strcmp(s->o.task, "induction")) al_drive_warn(dr, s->pl.warn);
    if (al_patch_task_make(&s->t, &bh->m, bh->tok, al_behave_bos(bh), &s->o, e) ||
        al_discover_memory_check(&s->t, &bh->m.cfg, e))
        return -1;
    if (al_stop) return al_errf(e, "interrupted");
    al_behave_warn_probe(bh, s->t.T);
    return 0;
}

/* The main circuit first (rs[0]), then the sweep's. Each circuit's
 * warnings join s->warn in turn; under --strict the first circuit that
 * raises any ends the sweep (the driver then refuses the run). A signal
 * also counts when it came after the last circuit. */
static int disc_compute(void *args, void *state, al_drive *dr, al_err *e) {
    disc_args *a = args;
    disc_state *s = state;
    int failed = 0;
    s->taus[0] = a->tau;
    s->d.progress = dr->progress;
    s->d.stop = &al_stop;
    for (int i = 0; i <= s->n_sweep && !al_stop; i++) {
        s->d.tau = s->taus[i];
        if (dr->progress && s->n_sweep)
            al_log("discover: circuit %d of %d, tau %g%s", i + 1, s->n_sweep + 1, s->taus[i],
                   i ? " (--sweep)" : " (the main circuit)");
        failed = al_discover_run(&dr->b->m, &s->t, &s->d, &s->rs[i], e);
        if (failed) break;
        s->n_done++;
        for (int k = 0; k < s->rs[i].warn.n; k++)
            al_warnings_add(&s->warn, "%s", s->rs[i].warn.msg[k]);
        if (dr->strict && s->warn.n) break;
    }
    s->d.tau = a->tau;
    if (!failed && !al_stop && a->resample > 0 && s->n_done)
        failed = al_discover_stability_run(&dr->b->m, &s->t, &s->d, s->rs[0].kept, a->resample,
                                           s->d.ci_seed, &s->st, e);
    if (al_stop) return al_errf(e, "interrupted");
    return failed ? -1 : 0;
}

/* Every circuit found, one transaction, then the main circuit's file. */
static int disc_store(void *args, void *state, al_drive *dr, al_err *e) {
    disc_args *a = args;
    disc_state *s = state;
    al_behave *bh = dr->b;
    /* The driver printed the first AL_WARN_MAX warnings (all one
     * al_warnings holds); every circuit's are printed, so a long --sweep's
     * rest follow here (the run_warnings rows and the --json "warnings"
     * keep the first AL_WARN_MAX). */
    for (int i = 0, n = 0; i < s->n_done; i++)
        for (int k = 0; k < s->rs[i].warn.n; k++)
            if (n++ >= AL_WARN_MAX && !dr->quiet)
                fprintf(stderr, "attnlab: warning: %s\n", s->rs[i].warn.msg[k]);
    int rc = 0;
    for (int i = 0; rc == 0 && i < s->n_done; i++) {
        s->d.tau = s->taus[i];
        rc = al_store_put_discover(bh->st, bh->run_id, bh->model_id, &s->t, &s->d, &s->rs[i], i, e);
    }
    if (rc == 0 && s->st.n)
        rc = al_store_put_stability(bh->st, bh->run_id, bh->model_id, &s->rs[0], &s->st, e);
    s->d.tau = a->tau;
    if (!rc && a->out && al_drive_mkdir(dr, a->out, e)) return -1;
    return rc ? -1 : write_circuit(dr, a, bh, &s->t, &s->d, &s->rs[0], s->path, sizeof s->path, e);
}

/* "stability": the main circuit under resampling (--resample): the
 * Jaccard summary and every edge kept by the main circuit or by any
 * resample, with its inclusion frequency, most often kept first. */
static int json_stability(cJSON *doc, const al_discover_result *r,
                          const al_discover_stability *st) {
    cJSON *o = cJSON_AddObjectToObject(doc, "stability"), *arr;
    if (!o || num(o, "resamples", st->n) ||
        !cJSON_AddItemToObject(o, "seed", al_json_u64_item(st->seed)) ||
        num(o, "jaccard_mean", st->jaccard_mean) ||
        !cJSON_AddItemToObject(o, "jaccard_sd", al_json_num_item(st->jaccard_sd)) ||
        num(o, "jaccard_min", st->jaccard_min) || num(o, "seconds", st->seconds) ||
        !(arr = cJSON_AddArrayToObject(o, "edges")))
        return -1;
    char *used = calloc((size_t)st->n_edges + 1, 1), nm[64];
    int rc = used ? 0 : -1;
    for (;;) {
        int best = -1;
        for (int k = 0; rc == 0 && k < st->n_edges; k++)
            if (!used[k] && (st->freq[k] > 0 || r->kept[k]) &&
                (best < 0 || st->freq[k] > st->freq[best]))
                best = k;
        if (best < 0 || rc) break;
        used[best] = 1;
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(arr, j) ||
            !cJSON_AddStringToObject(j, "edge",
                                     al_graph_edge_name(r->L, r->H, best, nm, sizeof nm)) ||
            !cJSON_AddBoolToObject(j, "kept", r->kept[best]) || num(j, "frequency", st->freq[best]))
            rc = -1;
    }
    free(used);
    return rc;
}

static int disc_doc(void *args, void *state, al_drive *dr, al_err *e) {
    disc_state *s = state;
    return json_discover(dr->doc, args, &s->t, &s->d, s->taus, s->rs, s->n_done, s->n_sweep,
                         s->path, al_now() - s->t0) ||
                   (s->st.n && json_stability(dr->doc, &s->rs[0], &s->st))
               ? al_errf(e, "out of memory")
               : 0;
}

static void disc_release(void *state) {
    disc_state *s = state;
    al_probe_load_free(&s->pl);
    al_pairs_free(&s->t);
    for (int i = 0; i < s->n_done; i++) al_discover_result_free(&s->rs[i]);
    al_discover_stability_free(&s->st);
}

static void disc_init(void *args) {
    static const disc_args dflt = DISC_ARGS_INIT;
    *(disc_args *)args = dflt;
}

/* "discover (induction, acdc)" */
static void disc_label(const cJSON *v, char *buf, size_t cap) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "task");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, "method");
    snprintf(buf, cap, "discover (%s, %s)", cJSON_IsString(t) ? t->valuestring : "induction",
             cJSON_IsString(m) ? m->valuestring : "acdc");
}

/* the circuit file stays beside the experiment's model */
static const char *const disc_deny[] = {"out", NULL};

/* Every circuit's warnings, in the order the circuits were found. */
static const al_warnings *disc_warnings(const void *state) {
    return &((const disc_state *)state)->warn;
}

/* The induction task against the model's context. */
static int disc_check_model(const void *args, const al_config *c, al_err *e) {
    return al_patch_task_fits(&((const disc_args *)args)->o, c->n_ctx, e);
}

const al_analysis al_an_discover = {.name = "discover",
                                    .cmd = &al_cmd_discover,
                                    .groups = AL_GROUP_WHERE | AL_GROUP_TASK,
                                    .tmpl = &g_disc,
                                    .size = sizeof g_disc,
                                    .init = disc_init,
                                    .check = disc_check,
                                    .check_model = disc_check_model,
                                    .state_size = sizeof(disc_state),
                                    .prepare = disc_prepare,
                                    .compute = disc_compute,
                                    .store = disc_store,
                                    .doc = disc_doc,
                                    .text = disc_text,
                                    .release = disc_release,
                                    .warnings = disc_warnings,
                                    .stops = 1,
                                    .exp_list = 1,
                                    .exp_data = AL_EXP_DATA_NONE,
                                    .exp_deny = disc_deny,
                                    .exp_label = disc_label,
                                    .results = AL_RESULTS_CIRCUIT};

static int run_discover(int argc, char **argv) {
    return al_drive_main(&al_an_discover, argc, argv);
}
