/* pictures.h -- every analysis as a PNG, SVG or PDF (docs/design.md §7).
 *
 * The engine behind `attnlab heatmap`, callable by the report and the
 * experiment runner without a subprocess. The kinds are one table,
 * AL_PIC_KINDS below (name, family, what each needs, a help line); each
 * family's kinds are drawn in src/pictures/pic_<family>.c. Kinds:
 *
 *   attention    attention probabilities on a prompt: one head, or all
 *                heads of a layer as a grid (rows = destination/query
 *                token, columns = source/key token; future masked grey)
 *   qk-pos       positional QK of a head, the first n_pos positions
 *   qk, ov       full QK / OV circuits on a set of tokens
 *   composition  Q-, K- and V-composition into a layer, random baseline
 *                marked on the colour bar
 *   ablation     Δloss of each head (layers x heads) and pair interactions
 *   pruning      loss vs heads remaining, one line per method
 *   training     losses and a per-head score over training steps
 *   spectrum     singular values of W_QK and W_OV, one panel per head
 *   patching     an attnlab patch run's effects; paths: a paths run's
 *   dla          an attnlab attribute run's direct logit attribution:
 *                components (embed, pos, each head) x positions, signed
 *   terms        its path expansion: Δloss of each term as bars, grouped
 *                direct | layer-0 heads | layer-1 heads | virtual heads
 *   attrpatch    its attribution patching estimates against actual
 *                patching, per grid, with the y = x line and agreement
 *                (refused when the run has none, or did not compare)
 *   circuit      an attnlab discover run's circuit as a layered graph:
 *                embeddings at the bottom, layer-0 heads, layer-1 heads,
 *                the logits at the top; a head is a box with q/k/v input
 *                ports; an edge's colour is its channel (q, k, v,
 *                direct), its width its score (kept edges, scaled to the
 *                largest), removed edges pale (or absent: hide_removed).
 *                Of a run's circuits: tau's ACDC circuit when tau is
 *                given; else the ACDC circuit at the run's own tau
 *                (runs.config_json "tau"); else its EAP circuit; else the
 *                ACDC circuit of the smallest tau (the most faithful of a
 *                sweep). Models the head graph covers (graph.h: 1 to
 *                AL_GRAPH_MAX_LAYERS layers), one row of nodes per layer
 *   circuit-curve  the run's tau sweep: edges kept against faithfulness,
 *                one point per ACDC circuit labelled with its tau (and
 *                the EAP circuit's point when there is one); refused
 *                with fewer than two ACDC circuits
 *   sae-feature  one feature of an attnlab sae features run (--feature):
 *                header numbers, logit effects (raises | lowers), the DFA
 *                share of each head, the top contexts as token rows centred
 *                on the activating token (outlined); the tokens around it
 *                come from the run's token file, or o->data (left out with
 *                a note when that file is gone or differs), coloured by
 *                the activation recomputed with the run's SAE when that
 *                agrees with the stored one (else only the stored
 *                position is coloured, with a note)
 *   sae-heads    the run's top_n densest features x the layer's heads,
 *                DFA share, diverging
 *   sweep-induction  every model of the database (model_dir unused, may
 *                be NULL): the best head's induction score over the steps
 *                of its latest finished train run, one faint line per
 *                model (seed) and their mean bold, one panel per
 *                (setting, n_layers) group of view sweep_models, the
 *                AL_TH_INDUCTION line dashed; refused when no model has
 *                a training curve
 *
 * Weights-only kinds compute from the model (composition and spectrum
 * read the database instead when one is given); ablation, pruning and
 * training read it (tables ablations, pruning_steps, train_log and
 * train_head_scores of the model's latest finished run, or run_id);
 * patching, paths, dla, terms, attrpatch, the circuit and the sae kinds read the newest finished run
 * of their command for the model, or run_id (model_dir may then be NULL:
 * the run's own model). No such run: -1, and no file is written.
 * Every PNG carries text chunks: model, what, head, prompt (attention),
 * tokens (qk/ov), db, run, Software; an SVG has them as its <desc>, a PDF
 * as its document Subject. */
#ifndef ATTNLAB_PICTURES_H
#define ATTNLAB_PICTURES_H

#include <stdint.h>
#include "attnlab/store.h"
#include "attnlab/util.h"

typedef struct al_pic_opts {
    const char *what; /* one of al_pic_kinds */
    int layer; /* -1: 0 for attention/qk-pos/qk/ov, last for composition */
    int head; /* -1: all heads of the layer (attention only) */
    const char *prompt; /* attention: text; BOS prepended unless no_bos */
    int no_bos;
    int repeat; /* attention without prompt: BOS + this many random tokens, twice */
    uint64_t seed; /* of those random tokens */
    const char *tokens; /* qk/ov: "a,b,c" (␣ or a space for a leading space; #ID for an id) */
    int top_n; /* qk/ov: this many tokens when no list is given; sae-heads: features */
    const char *data; /* qk/ov: token file whose most frequent tokens are shown;
                           sae-feature: the token file of the contexts (NULL: the run's) */
    int n_pos; /* qk-pos: positions shown */
    const char *db; /* SQLite file (see above) */
    long run_id; /* that run instead of the latest finished one (0) */
    const char *method; /* ablation: zero|mean|resample (NULL: any, latest) */
    const char *metric; /* ablation: delta_loss (default) | delta_loss_copy | delta_loss_probe;
                           training: induction (default) | prev_token | duplicate_token */
    double tau; /* circuit: the ACDC circuit at this tau (NaN: the rule above) */
    int hide_removed; /* circuit: removed edges not drawn (else pale) */
    int format; /* AL_FIG_PNG (0), AL_FIG_SVG or AL_FIG_PDF (plot.h) */
    int feature; /* sae-feature: the SAE feature drawn (-1: none given) */
} al_pic_opts;

al_pic_opts al_pic_defaults(void);

/* What a kind needs before it can draw (bits of al_pic_kind.needs). */
enum {
    AL_PIC_MODEL = 1, /* a model's weights (without it: every model of --db, no weights) */
    AL_PIC_DB = 2, /* --db is required (else read when given) */
    AL_PIC_RUN_MODEL = 4, /* without --model: the model of --run (needs --db and --run) */
    AL_PIC_GRAPH = 8 /* models the head graph covers (checked before the database) */
};

/* The picture kinds, one line each, in the order they are listed:
 * X(id, name, family, needs, help). The kinds table, al_pic_kinds, the
 * dispatcher, its error message and `heatmap --what` are made from it, so
 * a new kind is one line here and its draw function pic_draw_<id>. */
#define AL_PIC_KINDS(X)                                                                            \
    X(attention, "attention", "weights", AL_PIC_MODEL,                                             \
      "attention probabilities on --prompt TEXT (or --repeat N): --head H, or all heads of "       \
      "--layer")                                                                                   \
    X(qk_pos, "qk-pos", "weights", AL_PIC_MODEL,                                                   \
      "positional QK of --layer/--head, the first --n-pos positions")                              \
    X(qk, "qk", "weights", AL_PIC_MODEL,                                                           \
      "full QK of --layer/--head on --tokens, or the --top-n most frequent tokens of --data "      \
      "(else the first BPE merges)")                                                               \
    X(ov, "ov", "weights", AL_PIC_MODEL, "full OV of --layer/--head, tokens as for qk")            \
    X(composition, "composition", "weights", AL_PIC_MODEL,                                         \
      "Q/K/V composition into --layer, the random baseline on the bar (from --db when given)")     \
    X(ablation, "ablation", "behaviour", AL_PIC_MODEL | AL_PIC_DB,                                 \
      "--db: Δloss per head and pair interactions (attnlab ablate)")                               \
    X(pruning, "pruning", "behaviour", AL_PIC_MODEL | AL_PIC_DB,                                   \
      "--db: loss against heads remaining, per method (attnlab prune)")                            \
    X(training, "training", "behaviour", AL_PIC_MODEL | AL_PIC_DB,                                 \
      "--db: losses and a per-head score over steps (attnlab train --db)")                         \
    X(spectrum, "spectrum", "weights", AL_PIC_MODEL,                                               \
      "singular values of every head's QK and OV (from --db when given)")                          \
    X(patching, "patching", "patching", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL,               \
      "--db: an attnlab patch run's effects: layer x position (resid), layer x head (head), or "   \
      "head x position, positions labelled with pair 0's clean tokens")                            \
    X(paths, "paths", "patching", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL,                     \
      "--db: an attnlab paths run's effects, one panel per channel q/k/v (senders x later heads) " \
      "and the direct path")                                                                       \
    X(dla, "dla", "attribution", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL,                      \
      "--db: an attnlab attribute run's direct logit attribution, component x position, signed")   \
    X(terms, "terms", "attribution", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL,                  \
      "--db: its path expansion: Δloss of each term removed, as bars grouped direct | layer-0 "   \
      "heads | layer-1 heads | virtual heads")                                                     \
    X(attrpatch, "attrpatch", "attribution", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL,          \
      "--db: its attribution patching estimates against actual patching, per grid (the run must "  \
      "have compared them)")                                                                       \
    X(circuit, "circuit", "circuits", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL | AL_PIC_GRAPH,  \
      "--db: an attnlab discover run's circuit as a layered graph: colour = channel, width = "     \
      "score, removed edges pale (--kept-only: absent); at --tau, else the run's own tau, "        \
      "else EAP, else the smallest tau")                                                           \
    X(circuit_curve, "circuit-curve", "circuits",                                                  \
      AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL | AL_PIC_GRAPH,                                  \
      "--db: the run's tau sweep: edges kept against faithfulness")                                \
    X(view, "view", "views", AL_PIC_MODEL | AL_PIC_DB,                                             \
      "--db --metric M: any result an analysis stored as a view (e.g. attnstats's "                \
      "attn_entropy), from its newest finished run (or --run): per head layers x heads, per "      \
      "head pair sender x receiver heads, per edge senders x receivers, per position a line")      \
    X(sae_feature, "sae-feature", "sae", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL,              \
      "--db --feature N: one feature of an attnlab sae features run as a dashboard: its "          \
      "numbers, logit effects, head attribution (DFA) and top contexts (--data: the token "        \
      "file, else the run's)")                                                                     \
    X(sae_heads, "sae-heads", "sae", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL,                  \
      "--db: the DFA share of each head for the --top-n densest features of an attnlab sae "       \
      "features run, signed")                                                                      \
    X(intervals, "intervals", "behaviour", AL_PIC_MODEL | AL_PIC_DB | AL_PIC_RUN_MODEL,            \
      "--db: a scores, patch or paths run's strongest numbers as bars with their 95% interval "    \
      "whiskers (scores: the heads per score, the call's threshold dashed)")                       \
    X(sweep_induction, "sweep-induction", "sweeps", AL_PIC_DB,                                     \
      "--db (no --model): every model's best induction score over training: one faint line per "   \
      "seed, their mean bold, one panel per setting and layer count")

struct al_pic; /* a picture being drawn (private to src/pictures/) */

/* One kind of picture: an entry of the table below. */
typedef struct al_pic_kind {
    const char *name; /* --what */
    const char *family; /* weights | behaviour | patching | attribution | circuits | views |
                           sae | sweeps */
    const char *help; /* one line */
    int needs; /* AL_PIC_* bits */
    int (*draw)(struct al_pic *p, al_err *e);
} al_pic_kind;

/* Every kind, in AL_PIC_KINDS order; al_pic_n_kinds of them. */
extern const al_pic_kind al_pic_kind_table[];
extern const int al_pic_n_kinds;
/* The kind called name, NULL if none (or name NULL). */
const al_pic_kind *al_pic_kind_find(const char *name);
/* NULL-terminated list of the kinds' names (made from AL_PIC_KINDS; kept
 * for callers that want a plain list of strings). */
extern const char *const al_pic_kinds[];
/* The circuit of discover run `run` that --what circuit draws without a
 * tau (the rule above), for the report to describe the same one: 1 with
 * method ("acdc" or "eap", cap >= 8) and *tau (NaN for EAP) and tau_txt
 * (the tau as exact text for SQL, "" for EAP; cap >= 32); 0 if the run has
 * no circuit; -1 with e on a database error. */
int al_pic_circuit_of(al_store *st, long run, char *method, double *tau, char *tau_txt, al_err *e);

/* Draw the picture o->what of the model in model_dir into out_png in
 * o->format (written atomically, whatever the file's extension); its size
 * in px goes to *w, *h (either may be NULL). */
int al_picture(const char *model_dir, const al_pic_opts *o, const char *out_png, int *w, int *h,
               al_err *e);

#endif
