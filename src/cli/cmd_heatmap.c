/* cmd_heatmap.c -- `attnlab heatmap`: one picture of a model as a PNG,
 * SVG or PDF. The pictures themselves are src/pictures/; this is flags,
 * help, and which format a --out name asks for. The kinds, their help
 * lines and what each needs come from the kinds table (AL_PIC_KINDS in
 * pictures.h), so a new kind needs nothing here. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "attnlab/args.h"
#include "attnlab/pictures.h"
#include "attnlab/plot.h"

/* "attention | qk-pos | ..." (the leading " | " skipped by + 3) and one help
 * line per kind, made from the kinds table at compile time. */
#define KIND_BAR(id, name, family, needs, help) " | " name
#define KIND_LINE(id, name, family, needs, help) "  " name " (" family "): " help "\n"

/* Same defaults as al_pic_defaults(), here so that help shows them. */
static al_pic_opts o =
    {.layer = -1, .head = -1, .seed = 1, .top_n = 40, .n_pos = 64, .tau = NAN, .feature = -1};
static const char *o_model = NULL, *o_out = NULL, *o_format = NULL;
static int o_threads = 0;
static uint64_t o_run = 0;

static al_flag flags[] = {
    {"model", AL_STR, &o_model, "DIR",
     /* clang-format off */
     "model directory (required, but for the kinds drawn from a run given --db and --run, and "
     "the kinds of every model of --db)", 0, 0},
    {"what", AL_STR, &o.what, "KIND", &AL_PIC_KINDS(KIND_BAR)[3], 1, 0},
    /* clang-format on */
    {"out", AL_STR, &o_out, "FILE", "picture to write (.png, .svg or .pdf)", 1, 0},
    {"format", AL_STR, &o_format, "F",
     "png | svg | pdf (default: from --out's extension, else png)", 0, 0},
    {"prompt", AL_STR, &o.prompt, "TEXT", "attention: the text to run the model on", 0, 0},
    {"no-bos", AL_BOOL, &o.no_bos, NULL, "attention: do not prepend <|endoftext|>", 0, 0},
    {"repeat", AL_INT, &o.repeat, "N",
     "attention without --prompt: N random tokens shown twice (induction)", 0, 0},
    {"seed", AL_U64, &o.seed, "N", "seed of the --repeat tokens", 0, 0},
    {"layer", AL_INT, &o.layer, "L",
     "layer; -1 = layer 0 (composition: the later layer, -1 = the last)", 0, 0},
    {"head", AL_INT, &o.head, "H",
     "head within the layer; -1 = all heads as a grid (attention only)", 0, 0},
    {"tokens", AL_STR, &o.tokens, "LIST",
     "qk/ov: tokens to show, e.g. \"␣the,␣a,.\" (␣ or a space leads; #ID for an id)", 0, 0},
    {"top-n", AL_INT, &o.top_n, "N",
     "qk/ov: number of tokens when --tokens is absent; sae-heads: features shown (densest first)",
     0, 0},
    {"data", AL_STR, &o.data, "FILE",
     "qk/ov: token file; show its --top-n most frequent tokens; sae-feature: the token file of the contexts (default: the run's --data)",
     0, 0},
    {"feature", AL_INT, &o.feature, "N", "sae-feature: the SAE feature to draw", 0, 0},
    {"n-pos", AL_INT, &o.n_pos, "N", "qk-pos: show the first N positions", 0, 0},
    {"db", AL_STR, &o.db, "FILE",
     "results database (needed by the kinds that read one; composition and spectrum read it "
     "when given)",
     0, 0},
    {"run", AL_U64, &o_run, "ID", "use this run's rows instead of the model's latest finished run",
     0, 0},
    {"method", AL_STR, &o.method, "M",
     "ablation: zero | mean | resample (default: the latest run's)", 0, 0},
    {"metric", AL_STR, &o.metric, "NAME",
     "ablation: delta_loss | delta_loss_copy | delta_loss_probe; training: induction | prev_token | duplicate_token",
     0, 0},
    {"tau", AL_FLOAT, &o.tau, "X",
     "circuit: draw the run's ACDC circuit at this tau (default: the run's own tau, else its "
     "EAP circuit, else the smallest tau)",
     0, 0},
    {"kept-only", AL_BOOL, &o.hide_removed, NULL,
     "circuit: leave removed edges out (default: pale)", 0, 0},
    {"threads", AL_INT, &o_threads, "N", "threads (0 = default)", 0, 0},
    AL_FLAGS_END};

static int run_heatmap(int argc, char **argv);
al_command al_cmd_heatmap = {
    /* clang-format off */
    "heatmap",
    "draw a picture of a model: attention, circuits, composition, ablation, pruning, training, "
    "patching, attribution",
    "--model DIR --what KIND --out FILE.png|.svg|.pdf [--format png|svg|pdf] [--prompt TEXT] "
    "[--layer L] [--head H] [--db FILE] [--run ID]",
    "Writes an 8-bit RGB PNG, an SVG or a PDF (one drawing, same colours) with a\n"
    "title, axis labels (token strings, ␣ = space), a colour bar with its range,\n"
    "and provenance naming the model, head and prompt (PNG text chunks, the SVG's\n"
    "<desc>, the PDF's Subject). SVG and PDF text is real text: selectable and\n"
    "searchable. Attention and full QK put the destination (query) token on rows and\n"
    "the source (key) token on columns: the query attends to the key, information\n"
    "flows key -> query. Kinds (family):\n"
    AL_PIC_KINDS(KIND_LINE)
    "composition and spectrum read --db when given, else compute from the weights.\n"
    "The kinds of the patching, attribution, circuits and sae families draw --run ID\n"
    "(else the model's latest such run); with --run the model is the run's own, so\n"
    "--model may be left out.",
    flags,
    run_heatmap,
};
/* clang-format on */

static int run_heatmap(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_heatmap, &e);
    if (o.layer < -1 || o.head < -1 || o.top_n < 1 || o.n_pos < 1 || o.repeat < 0 ||
        o.feature < -1) {
        al_errf(&e, "need --layer >= 0, --head >= 0, --top-n >= 1, --n-pos >= 1, --repeat >= 0, "
                    "--feature >= 0");
        return al_cli_usage(&al_cmd_heatmap, &e);
    }
    if (o.prompt && o.repeat) {
        al_errf(&e, "give --prompt or --repeat, not both");
        return al_cli_usage(&al_cmd_heatmap, &e);
    }
    if (!isnan(o.tau) && !(o.tau >= 0 && isfinite(o.tau))) {
        al_errf(&e, "--tau must be a finite number >= 0");
        return al_cli_usage(&al_cmd_heatmap, &e);
    }
    if (o.tokens && o.data) {
        al_errf(&e, "give --tokens or --data, not both");
        return al_cli_usage(&al_cmd_heatmap, &e);
    }
    /* the format: --format, else --out's extension; both given must agree,
     * so a file's name never lies about its contents */
    int by_ext = al_fig_format_of_path(o_out);
    /* an extension that names another picture format would lie about the
     * bytes; any other unknown one needs --format to say what to write */
    const char *base = strrchr(o_out, '/'), *dot = strrchr(base ? base : o_out, '.');
    static const char *const other_images[] = {".jpg",  ".jpeg", ".gif", ".bmp", ".tif",  ".tiff",
                                               ".webp", ".eps",  ".ps",  ".ico", ".avif", ".heic"};
    int other = 0;
    for (size_t i = 0; dot && i < sizeof other_images / sizeof *other_images; i++)
        other |= strcasecmp(dot, other_images[i]) == 0;
    if (by_ext < 0 && dot && dot[1] && dot != (base ? base + 1 : o_out) && (other || !o_format) &&
        !(o_format && al_fig_format_parse(o_format) < 0)) { /* a bad --format is said first */
        al_errf(&e, "--out %s: attnlab draws .png, .svg and .pdf pictures, not %s", o_out, dot);
        return al_cli_usage(&al_cmd_heatmap, &e);
    }
    if (o_format) {
        o.format = al_fig_format_parse(o_format);
        if (o.format < 0) {
            al_errf(&e, "--format must be png, svg or pdf, not '%s'", o_format);
            return al_cli_usage(&al_cmd_heatmap, &e);
        }
        if (by_ext >= 0 && by_ext != o.format) {
            al_errf(&e, "--format %s but --out %s names a .%s file", o_format, o_out,
                    al_fig_format_name(by_ext));
            return al_cli_usage(&al_cmd_heatmap, &e);
        }
    } else {
        o.format = by_ext >= 0 ? by_ext : AL_FIG_PNG;
    }
    o.run_id = (long)o_run;
    const al_pic_kind *kind = al_pic_kind_find(o.what);
    int by_run = kind && (kind->needs & AL_PIC_RUN_MODEL) && o.db && o.run_id > 0;
    int no_model = kind && !(kind->needs & AL_PIC_MODEL); /* the whole database */
    if (!o_model && !by_run && !no_model) {
        al_errf(&e,
                "--model is required (or, for a kind drawn from a run, --db FILE and --run ID)");
        return al_cli_usage(&al_cmd_heatmap, &e);
    }
    if (al_threads_check(o_threads, &e)) return al_cli_usage(&al_cmd_heatmap, &e);
    al_set_threads(o_threads);
    int w, h;
    if (al_picture(o_model, &o, o_out, &w, &h, &e) != 0) return al_cli_error(&e);
    printf("wrote %s (%d x %d px)\n", o_out, w, h);
    return 0;
}
