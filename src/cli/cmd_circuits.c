/* cmd_circuits.c -- `attnlab circuits`: every weights-only analysis of
 * docs/design.md §4 for one model, into the database, with a short summary.
 * The rows are written by al_store_put_circuits (store_analysis.c). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/behave.h"
#include "attnlab/doc_text.h"
#include "attnlab/circuits.h"
#include "attnlab/registry.h"
#include "attnlab/store_analysis.h"
#include "attnlab/tokenizer.h"

#include <cjson/cJSON.h>

typedef struct circuits_args {
    al_an_where w;
    al_circ_opts o;
    int show_comp; /* composition pairs printed per kind */
} circuits_args;

static circuits_args g = {AL_AN_WHERE_INIT, {50, 100, 1, 128, 0}, 3};

static al_flag flags[] = {AL_FLAG_MODEL(g),
                          AL_FLAG_DB(g),
                          {"top-k", AL_INT, &g.o.top_k, "N", "skip-trigrams kept per head", 0, 0},
                          {"mc-samples", AL_INT, &g.o.mc_samples, "N",
                           "random head pairs for the composition baseline", 0, 0},
                          {"seed", AL_U64, &g.o.seed, "N", "seed of the composition baseline", 0,
                           0},
                          {"show-comp", AL_INT, &g.show_comp, "N",
                           "composition pairs printed per kind", 0, 0},
                          AL_FLAG_THREADS(g),
                          AL_FLAGS_END};

static int run_circuits(int argc, char **argv);
extern const al_analysis al_an_circuits;
al_command al_cmd_circuits = {
    "circuits",
    "read QK/OV circuits, ranks, copying, skip-trigrams, composition from the weights",
    "--model DIR --db FILE [--top-k 50] [--threads N]",
    "Weights only, no data. Per head: singular values, rank, effective and stable\n"
    "rank and Frobenius norm of W_QK = W_Q W_Kᵀ and W_OV = W_V W_O; eigenvalues of\n"
    "the full OV circuit and copying_eigen = Re(Σλ)/Σ|λ|; copying_top1 (share of\n"
    "tokens whose top full-OV output is themselves); the top skip-trigrams\n"
    "A … B → C. Per layer: ranks of all heads' read spaces ([W_Q W_K], W_V) and\n"
    "write spaces (W_O) together, and the head-overlap matrix. For 2+ layers: Q-,\n"
    "K- and V-composition of every earlier/later head pair beside a random\n"
    "baseline. Everything goes to the database (tables head_scores,\n"
    "singular_values, eigenvalues, skip_trigrams, head_overlap, layer_scores,\n"
    "composition; view head_summary) as one run; see docs/sql.md for queries.",
    flags,
    run_circuits,
};

/* ----------------------------------------------------------- printing */

static void text_heads(const cJSON *doc) {
    const cJSON *h;
    printf("%-5s %4s %6s %4s %6s %9s %6s %6s  %s\n", "head", "QK", "eff", "OV", "eff", "copy_eig",
           "top1", "prev", "top skip-trigram A … B → C (score)");
    int n_zero = 0;
    cJSON_ArrayForEach(h, al_dt_get(doc, "heads")) {
        const cJSON *t = al_dt_get(h, "top_skip_trigram");
        char tri[512] = "-", eig[16];
        if (t)
            snprintf(tri, sizeof tri, "%s … %s → %s (%.3g)", al_dt_str(t, "a"), al_dt_str(t, "b"),
                     al_dt_str(t, "c"), al_dt_num(t, "score"));
        double ce = al_dt_num(h, "copying_eigen");
        if (isnan(ce))
            snprintf(eig, sizeof eig, "n/a"), n_zero++;
        else
            snprintf(eig, sizeof eig, "%+.3f", ce);
        printf("%-5s %4d %6.1f %4d %6.1f %9s %6.3f %6.3f  %s\n", al_dt_str(h, "head"),
               al_dt_int(h, "qk_rank"), al_dt_num(h, "qk_eff_rank"), al_dt_int(h, "ov_rank"),
               al_dt_num(h, "ov_eff_rank"), eig, al_dt_num(h, "copying_top1"),
               al_dt_num(h, "pos_prev_token"), tri);
    }
    if (n_zero)
        printf("n/a: %d head%s whose full OV circuit has no nonzero eigenvalue (Σ|λ| = 0, e.g. an "
               "OV that never reaches the unembedding): copying_eigen is 0/0, stored as NULL and "
               "left out of agreement counts and correlations\n",
               n_zero, n_zero == 1 ? "" : "s");
}

static double mean_random_overlap(const int *dims, int H, int C) {
    double s = 0;
    for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++)
            if (i != j) s += (dims[i] > dims[j] ? dims[i] : dims[j]) / (double)C;
    return H > 1 ? s / (H * (H - 1)) : 0;
}

static void text_layers(const cJSON *doc) {
    const cJSON *ly;
    cJSON_ArrayForEach(ly, al_dt_get(doc, "layers")) {
        int C = al_dt_int(ly, "dim");
        printf("layer %d: read spaces [W_Q W_K] rank %d/%d, W_V rank %d/%d; write space "
               "W_O rank %d/%d\n",
               al_dt_int(ly, "layer"), al_dt_int(ly, "rank_qk"), C, al_dt_int(ly, "rank_v"), C,
               al_dt_int(ly, "rank_o"), C);
        printf("         mean overlap between heads: QK %.3f (random %.3f), V %.3f (random "
               "%.3f), O %.3f (random %.3f)\n",
               al_dt_num(ly, "overlap_qk"), al_dt_num(ly, "overlap_qk_random"),
               al_dt_num(ly, "overlap_v"), al_dt_num(ly, "overlap_v_random"),
               al_dt_num(ly, "overlap_o"), al_dt_num(ly, "overlap_o_random"));
    }
}

/* The strongest `show` head pairs of each composition kind. */
static void text_comp(const cJSON *doc) {
    const cJSON *comp = al_dt_get(doc, "composition"),
                *base = al_dt_get(doc, "composition_baseline");
    int n = cJSON_GetArraySize(comp), show = al_dt_int(doc, "show_comp");
    if (n == 0 || show <= 0) return;
    printf("composition, strongest %d per kind (random baseline mean ± sd):\n", show);
    int *used = calloc((size_t)n, sizeof *used);
    if (!used) return;
    for (int k = 0; k < AL_COMP_N; k++) {
        const char *kind = al_comp_names[k];
        memset(used, 0, (size_t)n * sizeof *used);
        for (int s = 0; s < show && s < n; s++) {
            int best = -1;
            for (int i = 0; i < n; i++)
                if (!used[i] && (best < 0 || al_dt_num(cJSON_GetArrayItem(comp, i), kind) >
                                                 al_dt_num(cJSON_GetArrayItem(comp, best), kind)))
                    best = i;
            used[best] = 1;
            const cJSON *p = cJSON_GetArrayItem(comp, best), *b = al_dt_get(base, kind);
            printf("  %s  %s -> %s  %.3f  (%.3f ± %.3f)\n", kind, al_dt_str(p, "from"),
                   al_dt_str(p, "to"), al_dt_num(p, kind), al_dt_num(b, "mean"),
                   al_dt_num(b, "sd"));
        }
    }
    free(used);
}

/* ----------------------------------------------------------- JSON */

static int num(cJSON *o, const char *k, double v) {
    return cJSON_AddNumberToObject(o, k, v) ? 0 : -1;
}

/* attnlab.circuits/1 (docs/json.md): per head, per layer, composition. */
static int json_circuits(cJSON *doc, const al_behave *b, const al_circ_result *r, int show_comp) {
    cJSON *heads, *layers, *comp;
    const al_config *c = &b->m.cfg;
    if (num(doc, "layers_n", c->n_layers) || num(doc, "heads_per_layer", c->n_heads) ||
        num(doc, "d_vocab", c->d_vocab) ||
        !cJSON_AddBoolToObject(doc, "tied_embeddings", c->tied_embeddings) ||
        !cJSON_AddStringToObject(doc, "positions",
                                 c->pos_type == AL_POS_SHORTFORMER ? "shortformer" : "standard") ||
        num(doc, "show_comp", show_comp) || num(doc, "seconds", r->seconds) ||
        !(heads = cJSON_AddArrayToObject(doc, "heads")) ||
        !(layers = cJSON_AddArrayToObject(doc, "layers")) ||
        !(comp = cJSON_AddArrayToObject(doc, "composition")))
        return -1;
    for (int i = 0; i < r->L * r->H; i++) {
        const al_circ_head *h = &r->heads[i];
        char name[16];
        snprintf(name, sizeof name, "%d.%d", h->layer, h->head);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(heads, j) || !cJSON_AddStringToObject(j, "head", name) ||
            num(j, "qk_rank", h->qk_rank) || num(j, "qk_eff_rank", h->qk_eff_rank) ||
            num(j, "ov_rank", h->ov_rank) || num(j, "ov_eff_rank", h->ov_eff_rank) ||
            num(j, "copying_eigen", h->copying_eigen) || num(j, "copying_top1", h->copying_top1) ||
            num(j, "pos_prev_token", h->pos_prev_token))
            return -1;
        if (h->n_tri > 0) {
            const al_trigram *t = &h->tri[0];
            char sa[128], sb[128], sc[128];
            al_store_token_str(b->tok, t->a, sa, sizeof sa);
            al_store_token_str(b->tok, t->b, sb, sizeof sb);
            al_store_token_str(b->tok, t->c, sc, sizeof sc);
            cJSON *tj = cJSON_AddObjectToObject(j, "top_skip_trigram");
            if (!tj || !cJSON_AddStringToObject(tj, "a", sa) ||
                !cJSON_AddStringToObject(tj, "b", sb) || !cJSON_AddStringToObject(tj, "c", sc) ||
                num(tj, "score", t->score))
                return -1;
        }
    }
    for (int l = 0; l < r->L; l++) {
        const al_circ_layer *ly = &r->layers[l];
        int C = r->C, H = r->H;
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(layers, j) || num(j, "layer", l) || num(j, "dim", C) ||
            num(j, "rank_qk", ly->rank_qk) || num(j, "rank_v", ly->rank_v) ||
            num(j, "rank_o", ly->rank_o) ||
            num(j, "overlap_qk", al_store_mean_offdiag(ly->ov_qk, H)) ||
            num(j, "overlap_qk_random", mean_random_overlap(ly->dim_qk, H, C)) ||
            num(j, "overlap_v", al_store_mean_offdiag(ly->ov_v, H)) ||
            num(j, "overlap_v_random", mean_random_overlap(ly->dim_v, H, C)) ||
            num(j, "overlap_o", al_store_mean_offdiag(ly->ov_o, H)) ||
            num(j, "overlap_o_random", mean_random_overlap(ly->dim_o, H, C)))
            return -1;
    }
    for (int i = 0; i < r->n_comp; i++) {
        const al_circ_comp *p = &r->comp[i];
        char from[16], to[16];
        snprintf(from, sizeof from, "%d.%d", p->l1, p->h1);
        snprintf(to, sizeof to, "%d.%d", p->l2, p->h2);
        cJSON *j = cJSON_CreateObject();
        if (!j || !cJSON_AddItemToArray(comp, j) || !cJSON_AddStringToObject(j, "from", from) ||
            !cJSON_AddStringToObject(j, "to", to))
            return -1;
        for (int k = 0; k < AL_COMP_N; k++)
            if (num(j, al_comp_names[k], p->score[k])) return -1;
    }
    cJSON *base = cJSON_AddObjectToObject(doc, "composition_baseline");
    for (int k = 0; base && k < AL_COMP_N; k++) {
        cJSON *j = cJSON_AddObjectToObject(base, al_comp_names[k]);
        if (!j || num(j, "mean", r->base_mean[k]) || num(j, "sd", r->base_sd[k])) return -1;
    }
    return base ? 0 : -1;
}

/* ---------------------------------------------------------------- run */

static int circuits_check(const void *args, const al_flag *fl, al_err *e) {
    const circuits_args *a = args;
    const al_circ_opts *o = &a->o;
    (void)fl;
    if (o->top_k < 1 || o->top_k > 100000 || o->mc_samples < 2 || o->mc_samples > 1000000 ||
        a->show_comp < 0)
        return al_errf(e, "need 1 <= --top-k <= 100000, 2 <= --mc-samples <= 1000000, "
                          "--show-comp >= 0");
    return al_threads_check(a->w.threads, e);
}

/* The run's state between the driver's phases. */
typedef struct circuits_state {
    al_circ_result r;
} circuits_state;

/* Skip-trigrams and copying scores rank every id, trained or not. */
static int circuits_prepare(void *args, void *state, al_drive *dr, al_err *e) {
    circuits_args *a = args;
    (void)state, (void)e;
    char w[AL_WARN_LEN];
    if (al_unseen_ids_warning(a->w.model, dr->b->m.cfg.d_vocab,
                              "the skip-trigrams and copying scores", w, sizeof w))
        al_drive_warn(dr, w);
    /* LayerNorm and biases: what the circuits fold in and leave out */
    const char *notes[2];
    for (int i = 0, n = al_circ_notes(&dr->b->m.cfg, notes); i < n; i++)
        al_drive_warn(dr, notes[i]);
    return 0;
}

static int circuits_compute(void *args, void *state, al_drive *dr, al_err *e) {
    circuits_args *a = args;
    circuits_state *s = state;
    al_circ_opts o = a->o;
    o.progress = dr->progress;
    return al_circ_analyse(&dr->b->m, &o, &s->r, e);
}

static int circuits_store(void *args, void *state, al_drive *dr, al_err *e) {
    circuits_state *s = state;
    (void)args;
    return al_store_put_circuits(dr->b->st, dr->b->run_id, dr->b->model_id, &s->r, dr->b->tok, e);
}

static int circuits_doc(void *args, void *state, al_drive *dr, al_err *e) {
    const circuits_args *a = args;
    return json_circuits(dr->doc, dr->b, &((circuits_state *)state)->r, a->show_comp)
               ? al_errf(e, "out of memory")
               : 0;
}

/* The text of attnlab.circuits/1, from the document alone. */
static void circuits_text(const cJSON *doc) {
    const int L = al_dt_int(doc, "layers_n"), H = al_dt_int(doc, "heads_per_layer");
    printf("model %s (sha256 %.12s…; %d layer%s × %d heads, d_vocab %d%s%s) -> run %lld of %s\n",
           al_dt_str(doc, "model"), al_dt_str(doc, "sha256"), L, L == 1 ? "" : "s", H,
           al_dt_int(doc, "d_vocab"), al_dt_bool(doc, "tied_embeddings") ? ", tied embeddings" : "",
           strcmp(al_dt_str(doc, "positions"), "shortformer") ? "" : ", shortformer positions",
           (long long)al_dt_num(doc, "run"), al_dt_str(doc, "db"));
    text_heads(doc);
    text_layers(doc);
    text_comp(doc);
    printf("circuits: %d heads analysed in %.2f s\n", L * H, al_dt_num(doc, "seconds"));
}

static void circuits_release(void *state) { al_circ_result_free(&((circuits_state *)state)->r); }

static void circuits_init(void *args) {
    circuits_args *a = args;
    memset(&a->w, 0, sizeof a->w);
    a->o = al_circ_opts_default();
    a->show_comp = 3;
}

const al_analysis al_an_circuits = {.name = "circuits",
                                    .cmd = &al_cmd_circuits,
                                    .groups = AL_GROUP_WHERE,
                                    .tmpl = &g,
                                    .size = sizeof g,
                                    .init = circuits_init,
                                    .check = circuits_check,
                                    .state_size = sizeof(circuits_state),
                                    .prepare = circuits_prepare,
                                    .compute = circuits_compute,
                                    .store = circuits_store,
                                    .doc = circuits_doc,
                                    .text = circuits_text,
                                    .release = circuits_release,
                                    .exp_data = AL_EXP_DATA_NONE,
                                    .results = AL_RESULTS_WEIGHTS};

static int run_circuits(int argc, char **argv) {
    return al_drive_main(&al_an_circuits, argc, argv);
}
