/* cmd_circuits.c -- `attnlab circuits`: every weights-only analysis of
 * DESIGN §4 for one model, into the database, with a short summary.
 *
 * Order matters for the database: the run row is created before the
 * (possibly long) analysis so a crash leaves a trace, and all result rows
 * are written in one transaction that also marks the run done. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/checkpoint.h"
#include "attnlab/circuits.h"
#include "attnlab/config.h"
#include "attnlab/store.h"
#include "attnlab/tokenizer.h"

static const char *o_model = NULL, *o_db = NULL;
static int o_top_k = 50, o_threads = 0, o_mc = 100, o_top_comp = 3;
static uint64_t o_seed = 1;

static al_flag flags[] = {
    {"model", AL_STR, &o_model, "DIR", "model directory (from attnlab train)", 1, 0},
    {"db", AL_STR, &o_db, "FILE", "SQLite database to add the results to (created if missing)", 1, 0},
    {"top-k", AL_INT, &o_top_k, "N", "skip-trigrams kept per head", 0, 0},
    {"mc-samples", AL_INT, &o_mc, "N", "random head pairs for the composition baseline", 0, 0},
    {"seed", AL_U64, &o_seed, "N", "seed of the composition baseline", 0, 0},
    {"show-comp", AL_INT, &o_top_comp, "N", "composition pairs printed per kind", 0, 0},
    {"threads", AL_INT, &o_threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

static int run_circuits(int argc, char **argv);
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
    "composition; view head_summary) as one run; see README for queries.",
    flags,
    run_circuits,
};

/* ------------------------------------------------------------ storing */

typedef struct ctx {
    al_store *st;
    int64_t run, model;
    const al_tokenizer *tok;
} ctx;

static size_t tok_str(const al_tokenizer *tok, int id, char *buf, size_t cap) {
    if (tok && id < al_tok_vocab_size(tok)) return al_tok_display(tok, id, buf, cap);
    int n = snprintf(buf, cap, "#%d", id);
    return n < 0 ? 0 : (size_t)n;
}

static int put_head(const ctx *c, const al_circ_result *r, const al_circ_head *h,
                    al_err *e) {
    struct {
        const char *name;
        double v;
    } m[] = {
        {"qk_rank", h->qk_rank},          {"ov_rank", h->ov_rank},
        {"qk_effective_rank", h->qk_eff_rank}, {"ov_effective_rank", h->ov_eff_rank},
        {"qk_stable_rank", h->qk_stable_rank}, {"ov_stable_rank", h->ov_stable_rank},
        {"qk_fro", h->qk_fro},            {"ov_fro", h->ov_fro},
        {"copying_eigen", h->copying_eigen}, {"copying_top1", h->copying_top1},
        {"qk_top1_self", h->qk_top1_self}, {"pos_prev_token", h->pos_prev_token},
    };
    int L = h->layer, H = h->head;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (al_store_put_head_score(c->st, c->run, c->model, L, H, m[i].name, m[i].v, e))
            return -1;
    for (int i = 0; i < r->D; i++)
        if (al_store_put_singular_value(c->st, c->run, c->model, L, H, "qk", i, h->qk_sv[i], e) ||
            al_store_put_singular_value(c->st, c->run, c->model, L, H, "ov", i, h->ov_sv[i], e) ||
            al_store_put_eigenvalue(c->st, c->run, c->model, L, H, "ov_full", i,
                                    h->eig_re[i], h->eig_im[i], e))
            return -1;
    for (int i = 0; i < h->n_tri; i++) {
        const al_trigram *t = &h->tri[i];
        char sa[128], sb[128], sc[128];
        al_trigram_row row = {i + 1, t->a, t->b, t->c, sa, sb, sc,
                              tok_str(c->tok, t->a, sa, sizeof sa),
                              tok_str(c->tok, t->b, sb, sizeof sb),
                              tok_str(c->tok, t->c, sc, sizeof sc),
                              t->qk, t->ov, t->score};
        if (al_store_put_skip_trigram(c->st, c->run, c->model, L, H, &row, e)) return -1;
    }
    return 0;
}

/* Mean off-diagonal overlap of an (H,H) matrix. */
static double mean_offdiag(const double *a, int H) {
    double s = 0;
    for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++)
            if (i != j) s += a[i * H + j];
    return H > 1 ? s / (H * (H - 1)) : 0;
}

static int put_layer(const ctx *c, int l, const al_circ_layer *ly, int H, al_err *e) {
    const char *spaces[3] = {"qk", "v", "o"};
    const double *ov[3] = {ly->ov_qk, ly->ov_v, ly->ov_o};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < H; j++)
                if (al_store_put_head_overlap(c->st, c->run, c->model, l, spaces[s], i, j,
                                              ov[s][i * H + j], e))
                    return -1;
    struct {
        const char *name;
        double v;
    } m[] = {{"read_qk_rank", ly->rank_qk},
             {"read_v_rank", ly->rank_v},
             {"write_o_rank", ly->rank_o},
             {"mean_overlap_qk", mean_offdiag(ly->ov_qk, H)},
             {"mean_overlap_v", mean_offdiag(ly->ov_v, H)},
             {"mean_overlap_o", mean_offdiag(ly->ov_o, H)}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (al_store_put_layer_score(c->st, c->run, c->model, l, m[i].name, m[i].v, e))
            return -1;
    return 0;
}

static int put_all(const ctx *c, const al_circ_result *r, al_err *e) {
    for (int i = 0; i < r->L * r->H; i++)
        if (put_head(c, r, &r->heads[i], e)) return -1;
    for (int l = 0; l < r->L; l++)
        if (put_layer(c, l, &r->layers[l], r->H, e)) return -1;
    for (int i = 0; i < r->n_comp; i++) {
        const al_circ_comp *p = &r->comp[i];
        for (int k = 0; k < AL_COMP_N; k++)
            if (al_store_put_composition(c->st, c->run, c->model, al_comp_names[k], p->l1,
                                         p->h1, p->l2, p->h2, p->score[k], r->base_mean[k],
                                         r->base_sd[k], e))
                return -1;
    }
    return 0;
}

/* ----------------------------------------------------------- printing */

static void print_heads(const al_circ_result *r, const al_tokenizer *tok) {
    printf("%-5s %4s %6s %4s %6s %9s %6s %6s  %s\n", "head", "QK", "eff", "OV", "eff",
           "copy_eig", "top1", "prev", "top skip-trigram A … B → C (score)");
    for (int i = 0; i < r->L * r->H; i++) {
        const al_circ_head *h = &r->heads[i];
        char name[16], tri[512] = "-";
        snprintf(name, sizeof name, "%d.%d", h->layer, h->head);
        if (h->n_tri > 0) {
            char sa[128], sb[128], sc[128];
            const al_trigram *t = &h->tri[0];
            tok_str(tok, t->a, sa, sizeof sa);
            tok_str(tok, t->b, sb, sizeof sb);
            tok_str(tok, t->c, sc, sizeof sc);
            snprintf(tri, sizeof tri, "%s … %s → %s (%.3g)", sa, sb, sc, t->score);
        }
        printf("%-5s %4d %6.1f %4d %6.1f %+9.3f %6.3f %6.3f  %s\n", name, h->qk_rank,
               h->qk_eff_rank, h->ov_rank, h->ov_eff_rank, h->copying_eigen,
               h->copying_top1, h->pos_prev_token, tri);
    }
}

static double mean_random_overlap(const int *dims, int H, int C) {
    double s = 0;
    for (int i = 0; i < H; i++)
        for (int j = 0; j < H; j++)
            if (i != j) s += (dims[i] > dims[j] ? dims[i] : dims[j]) / (double)C;
    return H > 1 ? s / (H * (H - 1)) : 0;
}

static void print_layers(const al_circ_result *r) {
    for (int l = 0; l < r->L; l++) {
        const al_circ_layer *ly = &r->layers[l];
        int C = r->C, H = r->H;
        printf("layer %d: read spaces [W_Q W_K] rank %d/%d, W_V rank %d/%d; write space "
               "W_O rank %d/%d\n",
               l, ly->rank_qk, C, ly->rank_v, C, ly->rank_o, C);
        printf("         mean overlap between heads: QK %.3f (random %.3f), V %.3f (random "
               "%.3f), O %.3f (random %.3f)\n",
               mean_offdiag(ly->ov_qk, H), mean_random_overlap(ly->dim_qk, H, C),
               mean_offdiag(ly->ov_v, H), mean_random_overlap(ly->dim_v, H, C),
               mean_offdiag(ly->ov_o, H), mean_random_overlap(ly->dim_o, H, C));
    }
}

static void print_comp(const al_circ_result *r, int show) {
    if (r->n_comp == 0 || show <= 0) return;
    printf("composition, strongest %d per kind (random baseline mean ± sd):\n", show);
    int *used = calloc((size_t)r->n_comp, sizeof *used);
    if (!used) return;
    for (int k = 0; k < AL_COMP_N; k++) {
        memset(used, 0, (size_t)r->n_comp * sizeof *used);
        for (int s = 0; s < show && s < r->n_comp; s++) {
            int best = -1;
            for (int i = 0; i < r->n_comp; i++)
                if (!used[i] && (best < 0 || r->comp[i].score[k] > r->comp[best].score[k]))
                    best = i;
            used[best] = 1;
            const al_circ_comp *p = &r->comp[best];
            printf("  %s  %d.%d -> %d.%d  %.3f  (%.3f ± %.3f)\n", al_comp_names[k], p->l1,
                   p->h1, p->l2, p->h2, p->score[k], r->base_mean[k], r->base_sd[k]);
        }
    }
    free(used);
}

/* ---------------------------------------------------------------- run */

/* Model (and tokenizer if present); sha256 taken before and after the
 * load so that weights replaced mid-read are not filed under a wrong key. */
static int load(al_model *m, al_tokenizer **tok, char sha[65], al_err *e) {
    char path[4200], sha2[65];
    *tok = NULL;
    if (al_path_join(path, sizeof path, o_model, "model.safetensors", e) ||
        al_sha256_file(path, sha, e) || al_ckpt_load(o_model, m, NULL, e))
        return -1;
    if (al_sha256_file(path, sha2, e) || strcmp(sha, sha2) != 0) {
        al_model_free(m);
        return al_errf(e, "checkpoint %s changed while being read; try again", path);
    }
    if (al_path_join(path, sizeof path, o_model, "tokenizer.json", e)) return -1;
    if (al_file_exists(path) && al_tok_load(path, tok, e)) {
        al_model_free(m);
        return -1;
    }
    return 0;
}

static int run_circuits(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_circuits, &e);
    if (o_top_k < 1 || o_top_k > 100000 || o_mc < 2 || o_mc > 1000000 || o_top_comp < 0) {
        al_errf(&e, "need 1 <= --top-k <= 100000, 2 <= --mc-samples <= 1000000, --show-comp >= 0");
        return al_cli_usage(&al_cmd_circuits, &e);
    }
    al_set_threads(o_threads);
    al_model m;
    al_tokenizer *tok = NULL;
    al_store *st = NULL;
    al_circ_result r = {0};
    char sha[65];
    int64_t model_id = 0, run_id = 0;
    int rc = 1, loaded = 0;
    char *cfg_json = NULL;
    if (al_store_open(o_db, &st, &e) || load(&m, &tok, sha, &e)) goto out;
    loaded = 1;
    if (tok && al_tok_vocab_size(tok) != m.cfg.d_vocab)
        fprintf(stderr, "attnlab: warning: tokenizer has %d tokens, model d_vocab %d\n",
                al_tok_vocab_size(tok), m.cfg.d_vocab);
    cfg_json = al_flags_to_json(flags);
    if (al_store_model(st, o_model, sha, &m, NULL, &model_id, &e) ||
        al_store_run_begin(st, "circuits", cfg_json, model_id, &run_id, &e))
        goto out;
    al_circ_opts o = al_circ_opts_default();
    o.top_k = o_top_k, o.mc_samples = o_mc, o.seed = o_seed, o.progress = 1;
    ctx c = {st, run_id, model_id, tok};
    if (al_circ_analyse(&m, &o, &r, &e) || al_store_tx_begin(st, &e) ||
        put_all(&c, &r, &e) || al_store_run_finish(st, run_id, &e)) {
        al_err e2;
        al_store_run_fail(st, run_id, e.msg, &e2);
        goto out;
    }
    printf("model %s (sha256 %.12s…; %d layer%s × %d heads, d_vocab %d%s) -> run %lld of %s\n",
           o_model, sha, m.cfg.n_layers, m.cfg.n_layers == 1 ? "" : "s", m.cfg.n_heads, m.cfg.d_vocab,
           m.cfg.tied_embeddings ? ", tied embeddings" : "", (long long)run_id, o_db);
    print_heads(&r, tok);
    print_layers(&r);
    print_comp(&r, o_top_comp);
    printf("circuits: %d heads analysed in %.2f s\n", r.L * r.H, r.seconds);
    rc = 0;
out:
    if (rc) al_cli_error(&e);
    free(cfg_json);
    al_circ_result_free(&r);
    al_store_close(st);
    al_tok_free(tok);
    if (loaded) al_model_free(&m);
    return rc;
}
