/* test_import.c -- `attnlab import` and TransformerLens's weight
 * processing, against PyTorch (tests/import_ref.py: checkpoints of each
 * layout the importer reads, written by torch.save, with a float64
 * forward and the processed weights from TransformerLens's documented
 * definitions) and against exact identities (processing leaves every
 * log-probability as it was). Refusals: a pickle naming os.system,
 * damaged and inconsistent files, MLP models, unknown config keys; none
 * leaves an output folder. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/import.h"
#include "attnlab/process.h"
#include "attnlab/safetensors.h"
#include "attnlab/tokenizer.h"
#include "test.h"

#define PY "/usr/bin/python3"

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* The files of import_ref.py MODE; skips without PyTorch. Made once per
 * run of the test runner, beside the tests' own folders (the tests only
 * read them), since PyTorch takes seconds to start; under a lock, since
 * the runner runs tests at once and two may want the same files. */
static const char *gen(const char *mode) {
    static char dir[1200];
    char done[1300];
    snprintf(dir, sizeof dir, "%s/../import_ref_%s", t_tmpdir(), mode);
    snprintf(done, sizeof done, "%s/.done", dir);
    int rc = t_sh("flock %s.lock sh -c 'test -e %s || { " PY
                  " tests/import_ref.py %s %s > %s 2>&1 && touch %s; }'",
                  dir, done, mode, dir, t_path("gen.log"), done);
    if (rc == 77) t_skip("PyTorch not installed");
    if (rc == 127) t_skip(PY " not found");
    CHECKF(rc == 0, "import_ref.py %s failed (%d): %s", mode, rc, t_slurp(t_path("gen.log")));
    return dir;
}

static const char *in(const char *dir, const char *name) {
    static char p[8][1200];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

/* max |a − b| / max |b| */
static double rel_err(const float *a, const float *b, size_t n) {
    double mx = 0, sc = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= mx)) mx = d;
        if (fabs(b[i]) > sc) sc = fabs(b[i]);
    }
    return sc > 0 ? mx / sc : mx;
}

static int grab_logits(al_hook_act *a, void *ctx, al_err *e) {
    (void)e;
    const al_config *c = &a->m->cfg;
    memcpy(ctx, a->data, sizeof(float) * (size_t)a->m->B * a->m->T * c->d_vocab);
    return 0;
}

/* Logits (B, T, V) of m on tok, into a malloc'd array. */
static float *logits_of(al_model *m, const int *tok, int B, int T) {
    float *lg = calloc((size_t)B * T * m->cfg.d_vocab, sizeof *lg);
    al_err e;
    CHECK_OK(al_hook_add(m, AL_HOOK_LOGITS, 0, grab_logits, lg, &e), &e);
    CHECK_OK(al_model_forward(m, tok, NULL, B, T, &e), &e);
    al_hook_remove(m, lg);
    return lg;
}

/* Rows of n logits of length V into log-probabilities, in place. */
static void log_softmax(float *x, size_t n, int V) {
    for (size_t r = 0; r < n; r++) {
        float *row = x + r * V;
        double mx = row[0], s = 0;
        for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < V; v++) s += exp(row[v] - mx);
        double lse = mx + log(s);
        for (int v = 0; v < V; v++) row[v] = (float)(row[v] - lse);
    }
}

/* ------------------------------------------------ processing (no PyTorch) */

/* ------------------------------------------------ against PyTorch */

typedef struct ref_file {
    al_st_file *f;
    int B, T;
    const int *tok;
} ref_file;

static int ref_open(ref_file *r, const char *path) {
    al_err e;
    memset(r, 0, sizeof *r);
    if (al_st_open(path, &r->f, &e)) {
        CHECKF(0, "%s", e.msg);
        return -1;
    }
    const al_st_tensor *t = al_st_get(r->f, "tokens");
    CHECK(t && t->dtype == AL_DT_I32 && t->ndim == 2);
    r->B = (int)t->shape[0], r->T = (int)t->shape[1], r->tok = t->data;
    return 0;
}

static const float *ref_get(const ref_file *r, const char *name, size_t n) {
    const al_st_tensor *t = al_st_get(r->f, name);
    CHECKF(t != NULL, "reference has no %s", name);
    if (!t) return NULL;
    size_t k = 1;
    for (int d = 0; d < t->ndim; d++) k *= (size_t)t->shape[d];
    CHECKF(k == n, "%s: %zu elements, want %zu", name, k, n);
    return k == n ? t->data : NULL;
}

/* Import (CLI) file with extra options into dir; 0 on success. */
static int import_cli(const char *out, const char *opts) {
    return t_sh("%s import %s --out %s > %s 2> %s", t_bin(), opts, out, t_path("imp.out"),
                t_path("imp.err"));
}

/* The model in dir on the reference's tokens: logits (processed 0) or
 * log-probs (1) against the reference's; its weights against the
 * reference's processed ones when processed. Returns the largest
 * relative error. */
static double check_model(const char *dir, const char *refpath, int processed) {
    ref_file r;
    if (ref_open(&r, refpath)) return 1;
    al_model m;
    al_err e;
    if (al_ckpt_load(dir, &m, NULL, &e)) {
        CHECKF(0, "%s", e.msg);
        al_st_close(r.f);
        return 1;
    }
    size_t n = (size_t)r.B * r.T * m.cfg.d_vocab;
    float *lg = logits_of(&m, r.tok, r.B, r.T);
    if (processed) log_softmax(lg, (size_t)r.B * r.T, m.cfg.d_vocab);
    const float *want = ref_get(&r, processed ? "logprobs" : "logits_raw", n);
    double worst = want ? rel_err(lg, want, n) : 1;
    CHECKF(worst <= 1e-5, "%s: %s differ from PyTorch's by %.3g (relative)", dir,
           processed ? "log-probabilities" : "logits", worst);
    for (int p = 0; processed && p < AL_NPARAM; p++) {
        if (!m.param_size[p]) continue;
        int L = al_param_per_layer(p) ? m.cfg.n_layers : 1;
        for (int l = 0; l < L; l++) {
            char nm[96], full[128];
            int64_t sh[4];
            al_param_tl_name(&m, p, l, nm, sizeof nm, sh);
            snprintf(full, sizeof full, "proc.%s", nm);
            size_t k = al_param_layer_size(&m, p);
            const float *w = ref_get(&r, full, k);
            const float *ours = m.p[p] + (size_t)l * k;
            /* a zeroed tensor (b_V after folding) has no scale: compare absolutely */
            double d = w ? rel_err(ours, w, k) : 1;
            CHECKF(d <= 1e-5, "%s: processed %s differs from the reference by %.3g", dir, nm, d);
            worst = fmax(worst, d);
        }
    }
    free(lg);
    al_model_free(&m);
    al_st_close(r.f);
    return worst;
}

TEST(import_layouts_match_pytorch) {
    const char *d = gen("small");
    static const struct {
        const char *name, *file, *opts;
    } cases[] = {
        {"ln_std", "ln_std.pth", "--config %s/ln_std.config.json"},
        {"ln_std", "ln_std.safetensors", "--config %s/ln_std.config.json"},
        {"ln_std", "nested.pth", "--config %s/ln_std.config.json"},
        {"none_sf", "none_sf.pth", "--config %s/none_sf.config.json"},
        {"ln_sf", "ln_sf.pth", "--config %s/ln_sf.config.json"},
        {"none_std", "none_std.pth", "--config %s/none_std.config.json"},
        /* without a config: sizes off the shapes, LayerNorm off its weights */
        {"ln_std", "ln_std.pth", "--positions standard"},
        {"none_sf", "none_sf.pth", "--positions shortformer --norm none"},
    };
    double worst_raw = 0, worst_proc = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char opts[600], ck[1300], ref[1300];
        snprintf(opts, sizeof opts, cases[k].opts, d);
        snprintf(ck, sizeof ck, "--checkpoint %s/%s %s", d, cases[k].file, opts);
        snprintf(ref, sizeof ref, "%s/%s.ref.safetensors", d, cases[k].name);
        for (int proc = 0; proc < 2; proc++) {
            char out[64], all[1600];
            snprintf(out, sizeof out, "m%zu_%d", k, proc);
            snprintf(all, sizeof all, "%s%s", ck,
                     proc ? ""
                          : " --no-fold-ln --no-center-writing-weights --no-center-unembed "
                            "--no-fold-value-biases");
            int rc = import_cli(t_path(out), all);
            CHECKF(rc == 0, "import %s: %s", all, t_slurp(t_path("imp.err")));
            if (rc) continue;
            double w = check_model(t_path(out), ref, proc);
            if (proc)
                worst_proc = fmax(worst_proc, w);
            else
                worst_raw = fmax(worst_raw, w);
        }
    }
    printf("    float32 files: logits %.2e, processed log-probs and weights %.2e (max relative "
           "error against PyTorch)\n",
           worst_raw, worst_proc);
    /* what the import said and recorded */
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "--checkpoint %s/nested.pth --config %s/ln_std.config.json", d, d);
    CHECK(import_cli(t_path("nest2"), cmd) == 0);
    char *so = t_slurp(t_path("imp.out"));
    CHECKF(
        so && strstr(so, "state dict under model_state_dict.") &&
            strstr(so,
                   "processed: fold_ln, center_writing_weights, center_unembed, fold_value_biases"),
        "%s", so ? so : "");
    char *card = t_slurp(t_path("nest2/import.json"));
    CHECK(card && strstr(card, "\"schema\":\t\"attnlab.import/1\"") &&
          strstr(card, "\"sha256\":") && strstr(card, "\"buffers_skipped\":\t4"));
    char *cfg = t_slurp(t_path("nest2/config.json"));
    CHECK(cfg && strstr(cfg, "\"normalization_type\":\t\"LNPre\"") &&
          strstr(cfg, "\"processing\""));
    free(so), free(card), free(cfg);
    /* the hub format's keys are known and recorded */
    snprintf(cmd, sizeof cmd, "--checkpoint %s/ln_sf.pth --config %s/ln_sf.config.json", d, d);
    CHECK(import_cli(t_path("hub"), cmd) == 0);
    card = t_slurp(t_path("hub/import.json"));
    CHECK(card && strstr(card, "\"config_format\":\t\"hub\"") &&
          strstr(card, "\"tokenizer_name\":\t\"NeelNanda/gpt-neox-tokenizer-digits\"") &&
          strstr(card, "\"lr_hidden\""));
    free(card);
}

TEST(import_half_precision_files) {
    const char *d = gen("small");
    static const char *const files[][2] = {{"ln_std_f16.pth", "ln_std_f16"},
                                           {"ln_std_bf16.pth", "ln_std_bf16"},
                                           {"ln_std_bf16.safetensors", "ln_std_bf16"}};
    for (int k = 0; k < 3; k++) {
        char opts[1300];
        snprintf(opts, sizeof opts, "--checkpoint %s/%s --config %s/ln_std.config.json %s", d,
                 files[k][0], d,
                 "--no-fold-ln --no-center-writing-weights --no-center-unembed "
                 "--no-fold-value-biases");
        char out[32];
        snprintf(out, sizeof out, "h%d", k);
        int rc = import_cli(t_path(out), opts);
        CHECKF(rc == 0, "%s", t_slurp(t_path("imp.err")));
        if (rc) continue;
        char *so = t_slurp(t_path("imp.out"));
        CHECK(so && strstr(so, k == 0 ? ", F16," : ", BF16,"));
        free(so);
        char ref[1300];
        snprintf(ref, sizeof ref, "%s/%s.ref.safetensors", d, files[k][1]);
        double w = check_model(t_path(out), ref, 0);
        printf("    %s: logits within %.2e of PyTorch's on its rounded weights\n", files[k][0], w);
    }
}

TEST(import_compare_against_reference_run) {
    const char *d = gen("small");
    const char *names[] = {"ln_std", "none_sf", "ln_sf", "none_std"};
    for (int k = 0; k < 4; k++) {
        char opts[1300], out[32];
        snprintf(opts, sizeof opts,
                 "--checkpoint %s/%s.pth --config %s/%s.config.json "
                 "--compare %s/%s.cmp.safetensors",
                 d, names[k], d, names[k], d, names[k]);
        snprintf(out, sizeof out, "c%d", k);
        int rc = import_cli(t_path(out), opts);
        CHECKF(rc == 0, "%s: %s", names[k], t_slurp(t_path("imp.err")));
        char *so = t_slurp(t_path("imp.out"));
        CHECKF(so && strstr(so, "compare: PASS"), "%s", so ? so : "");
        const char *pass = so ? strstr(so, "worst relative error ") : NULL;
        if (pass) printf("    %s: %.*s\n", names[k], (int)strcspn(pass, "\n"), pass);
        free(so);
        /* attnlab compare on the directory */
        rc = t_sh("%s compare --model %s --ref %s/%s.cmp.safetensors > %s 2>&1", t_bin(),
                  t_path(out), d, names[k], t_path("cmp.out"));
        CHECK(rc == 0);
        so = t_slurp(t_path("cmp.out"));
        CHECK(so && strstr(so, "blocks.1.attn.hook_pattern") && strstr(so, "logits"));
        if (k == 0)
            CHECK(so && strstr(so, "ln_final.hook_normalized") && strstr(so, "hook_attn_scores"));
        free(so);
    }
    /* a reference with one activation off by 1e-3 of its scale fails, and
     * import --compare then writes nothing */
    CHECK(t_sh(PY
               " -c \"import sys; sys.path.insert(0, 'tests'); import import_ref as r, numpy as "
               "np, json, struct; p='%s/ln_std.cmp.safetensors'; b=open(p,'rb').read(); n=struct."
               "unpack('<Q', b[:8])[0]; h=json.loads(b[8:8+n]); o=8+n+h['blocks.1.hook_attn_out']"
               "['data_offsets'][0]; x=np.frombuffer(b[o:o+4], '<f4')[0]; "
               "b=bytearray(b); b[o:o+4]=np.float32(x+0.01).tobytes(); open('%s','wb').write(b)\"",
               d, t_path("off.safetensors")) == 0);
    CHECK(t_sh("%s compare --model %s --ref %s > %s 2> %s", t_bin(), t_path("c0"),
               t_path("off.safetensors"), t_path("cmp.out"), t_path("cmp.err")) == 1);
    char *so = t_slurp(t_path("cmp.out"));
    CHECK(so && strstr(so, "blocks.1.hook_attn_out") && strstr(so, "FAIL") &&
          strstr(so, "compare: FAIL"));
    free(so);
    char opts[1300];
    snprintf(opts, sizeof opts,
             "--checkpoint %s/ln_std.pth --config %s/ln_std.config.json "
             "--compare %s",
             d, d, t_path("off.safetensors"));
    CHECK(import_cli(t_path("nope"), opts) == 1);
    CHECK(t_one_line(t_path("imp.err"), "does not match") && !exists(t_path("nope")));
    /* a reference of other processing is refused, not compared */
    snprintf(opts, sizeof opts,
             "--checkpoint %s/ln_std.pth --config %s/ln_std.config.json "
             "--no-fold-ln --compare %s/ln_std.cmp.safetensors",
             d, d, d);
    CHECK(import_cli(t_path("nope2"), opts) == 1);
    /* the script that writes such references from TransformerLens: its help needs no PyTorch */
    CHECK(t_sh(PY " scripts/tl-compare.py --help > %s 2>&1", t_path("tlc.out")) == 0);
    CHECK(t_one_line(t_path("imp.err"), "processed with 'fold_ln,center_writing_weights,center_"
                                        "unembed,fold_value_biases'") &&
          !exists(t_path("nope2")));
}

/* The command must fail with one line holding want, leaving no out. */
static void refused(const char *opts, const char *want, int line) {
    const char *out = t_path("refused_out");
    int rc = import_cli(out, opts);
    if (rc != 1 || !t_one_line(t_path("imp.err"), want))
        t_fail(__FILE__, line, "import %s: exit %d, want a refusal with '%s'", opts, rc, want);
    if (exists(out)) t_fail(__FILE__, line, "import %s left %s behind", opts, out);
}
#define REFUSED(want, ...)                                                                         \
    do {                                                                                           \
        char o_[2400];                                                                             \
        snprintf(o_, sizeof o_, __VA_ARGS__);                                                      \
        refused(o_, want, __LINE__);                                                               \
    } while (0)

/* config.json (TransformerLens's fields, tests/fuzz/import_config/tl.json)
 * with one value replaced: each refused with the key and what it must be;
 * options given beside it are checked too. */
static void config_refused(const char *from, const char *to, const char *opt_norm,
                           const char *opt_pos, const char *want) {
    char *base = t_slurp("tests/fuzz/import_config/tl.json"), text[8192];
    CHECK(base != NULL);
    if (!base) return;
    const char *cut = from ? strstr(base, from) : base; /* from NULL: the text is `to` */
    CHECKF(cut != NULL, "[%s] not in tl.json", from);
    if (cut && from)
        snprintf(text, sizeof text, "%.*s%s%s", (int)(cut - base), base, to, cut + strlen(from));
    else
        snprintf(text, sizeof text, "%s", to);
    free(base);
    if (!cut) return;
    al_import_opts o;
    memset(&o, 0, sizeof o);
    o.process = (al_process_opts)AL_PROCESS_OPTS_INIT;
    o.norm = opt_norm, o.positions = opt_pos;
    al_config c;
    al_import_info info;
    int norm_known;
    al_err e = {{0}};
    int rc =
        al_import_config_mem(&o, text, strlen(text), "config.json", &c, &norm_known, &info, &e);
    CHECKF(rc != 0, "accepted %s -> %s", from, to);
    CHECKF(rc == 0 || (strstr(e.msg, want) && !strchr(e.msg, '\n')), "%s -> %s: '%s' lacks '%s'",
           from, to, e.msg, want);
}

TEST(import_config_each_bad_value_refused) {
    static const char *const cases[][3] = {
        {"\"n_layers\": 2", "\"n_layers\": 0",
         "config.json: key 'n_layers' must be an integer >= 1"},
        {"\"d_model\": 32", "\"d_model\": 2.5", "key 'd_model' must be an integer >= 1"},
        {"\"n_heads\": 4", "\"n_heads\": -1, \"x_\": 0", "unknown key 'x_'"},
        {"\"d_head\": 8,\n \"model_name\": \"custom\",\n \"n_heads\": 4",
         "\"d_head\": 7,\n \"model_name\": \"custom\",\n \"n_heads\": -1",
         "n_heads is -1 but d_model 32 is no multiple of d_head 7"},
        {"\"normalization_type\": \"LN\"", "\"normalization_type\": \"RMS\"",
         "key 'normalization_type' must be null, \"LN\" or \"LNPre\" (attnlab has no RMS norm)"},
        {"\"normalization_type\": \"LN\"",
         "\"normalization_type\": \"LN\", \"normalization\": \"LNPre\"",
         "keys 'normalization' and 'normalization_type' disagree"},
        {"\"positional_embedding_type\": \"standard\"", "\"positional_embedding_type\": \"alibi\"",
         "key 'positional_embedding_type' must be \"standard\" or \"shortformer\""},
        {"\"positional_embedding_type\": \"standard\"",
         "\"positional_embedding_type\": \"standard\", \"shortformer_pos\": 1",
         "key 'shortformer_pos' must be true or false"},
        {"\"positional_embedding_type\": \"standard\"",
         "\"positional_embedding_type\": \"standard\", \"shortformer_pos\": true",
         "keys 'shortformer_pos' and 'positional_embedding_type' disagree"},
        {"\"eps\": 1e-05", "\"eps\": 2", "key 'eps' must be a number in (0, 1]"},
        {"\"eps\": 1e-05", "\"eps\": 1e-05, \"ln_eps\": 1e-06", "keys 'eps' and 'ln_eps' disagree"},
        {"\"use_attn_scale\": true", "\"use_attn_scale\": false",
         "key 'use_attn_scale' must be true"},
        {"\"attn_scale\": 2.8284271247461903", "\"attn_scale\": \"big\"",
         "key 'attn_scale' must be a number"},
        {"\"attention_dir\": \"causal\"", "\"attention_dir\": \"bidirectional\"",
         "key 'attention_dir' must be \"causal\""},
        {"\"n_key_value_heads\": null", "\"n_key_value_heads\": \"two\"",
         "key 'n_key_value_heads' must be null or an integer"},
        {"\"attn_scores_soft_cap\": -1.0", "\"attn_scores_soft_cap\": 30",
         "key 'attn_scores_soft_cap' must be -1 (no soft cap)"},
        {"\"original_architecture\": null", "\"original_architecture\": 3",
         "key 'original_architecture' must be a string"},
        {"\"original_architecture\": null", "\"original_architecture\": \"mingpt\"",
         "key 'original_architecture' is \"mingpt\": attnlab reads TransformerLens's own weight "
         "layout (\"neel\") only"},
        {"\"attn_only\": true", "\"attn_only\": false, \"d_mlp_\": 1", "unknown key 'd_mlp_'"},
        {"\"use_local_attn\": false", "\"use_local_attn\": 1",
         "key 'use_local_attn' must be false"},
        {NULL, "[1, 2]", "config.json: top level must be a JSON object"},
        {"\"n_layers\": 2", "\"n_layers\": 2, \"n_layers\": 3",
         "config.json: key 'n_layers' given twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        config_refused(cases[i][0], cases[i][1], NULL, NULL, cases[i][2]);
    /* the hub format's "architecture" must be TransformerLens's own */
    config_refused("\"n_layers\": 2", "\"n_layers\": 2, \"architecture\": \"gpt2\"", NULL, NULL,
                   "key 'architecture' is \"gpt2\"");
    /* options over the file */
    config_refused("\"n_layers\": 2", "\"n_layers\": 2", "RMS", NULL,
                   "--norm must be none, LN or LNPre (got 'RMS')");
    config_refused("\"n_layers\": 2", "\"n_layers\": 2", NULL, "rotary",
                   "--positions must be standard or shortformer (got 'rotary')");
}

TEST(import_refusals_leave_nothing) {
    const char *d = gen("small");
    /* a pickle that would run a command when unpickled by Python */
    static t_pbuf h;
    h = t_pcopy("hostile");
    CHECK(t_sh(PY " tests/torch_ckpt_ref.py hostile %s > /dev/null 2>&1", h.s) == 0);
    REFUSED("refusing pickle global 'posix.system'",
            "--checkpoint %s/evil.pt --positions standard --norm none", h.s);
    CHECK(!exists(in(h.s, "MARKER")));
    /* a truncated file */
    CHECK(t_sh("head -c 60000 %s/ln_std.pth > %s", d, t_path("cut.pth")) == 0);
    REFUSED("cut.pth", "--checkpoint %s --positions standard", t_path("cut.pth"));
    CHECK(t_sh("head -c 1000 %s/ln_std.safetensors > %s", d, t_path("cut.safetensors")) == 0);
    REFUSED("cut.safetensors", "--checkpoint %s --positions standard", t_path("cut.safetensors"));
    t_write("junk.pth", "not a checkpoint at all\n");
    REFUSED("neither a torch.save file", "--checkpoint %s --positions standard",
            t_path("junk.pth"));
    /* shapes and keys that do not fit */
    REFUSED("tensor blocks.1.attn.W_K has shape [4,32,9], expected [4,32,8]",
            "--checkpoint %s/bad_shape.pth --positions standard", d);
    REFUSED("tensor embed.W_E has shape [300,32], expected [300,64]",
            "--checkpoint %s/ln_std.pth --config %s/wrong_dmodel.config.json", d, d);
    REFUSED("key 'blocks.0.attn.W_X' is not a tensor of an attention-only TransformerLens model",
            "--checkpoint %s/extra_key.pth --positions standard", d);
    REFUSED("tensor blocks.1.attn.W_V missing",
            "--checkpoint %s/missing_key.pth --positions standard", d);
    REFUSED("is beyond the model's layers",
            "--checkpoint %s/ln_std.pth --positions standard --n-layers 1", d);
    REFUSED("a LayerNorm weight, but the configuration's normalization has none",
            "--checkpoint %s/ln_std.pth --positions standard --norm none", d);
    REFUSED("has no LayerNorm weights: give --norm none or --norm LNPre",
            "--checkpoint %s/none_std.pth --positions standard", d);
    REFUSED("tensor embed.W_E has shape [300,32], expected [48262,512]",
            "--checkpoint %s/ln_std.pth --preset attn-only-2l", d);
    /* MLP models: by the config and by the keys */
    REFUSED(
        "a model with MLP layers (attn_only false, d_mlp 128): attnlab takes attention-only models",
        "--checkpoint %s/mlp.pth --config %s/mlp.config.json", d, d);
    REFUSED("holds MLP weights (blocks.0.ln2.", "--checkpoint %s/mlp.pth --positions standard", d);
    /* config keys: an unknown one, one at a value attnlab does not compute */
    char *c = t_slurp(in(d, "ln_std.config.json"));
    char *brace = c ? strrchr(c, '}') : NULL;
    if (brace) {
        *brace = 0;
        char buf[4096];
        snprintf(buf, sizeof buf, "%s, \"rotary_frobnicate\": 2}", c);
        t_write("unknown.json", buf);
        snprintf(buf, sizeof buf, "%s, \"use_local_attn\": true}", c);
        t_write("twice.json", buf);
        /* a value changed where the file gives it */
        char *at = strstr(c, "\"use_local_attn\": false");
        CHECK(at != NULL);
        if (at) {
            snprintf(buf, sizeof buf, "%.*s\"use_local_attn\": true%s}", (int)(at - c), c,
                     at + strlen("\"use_local_attn\": false"));
            t_write("local.json", buf);
        }
    }
    free(c);
    REFUSED("unknown key 'rotary_frobnicate' (it may change the model; if it does not, pass "
            "--ignore-key rotary_frobnicate)",
            "--checkpoint %s/ln_std.pth --config %s", d, t_path("unknown.json"));
    REFUSED("key 'use_local_attn' must be false", "--checkpoint %s/ln_std.pth --config %s", d,
            t_path("local.json"));
    /* a key given twice: cJSON would keep both and a lookup read the first */
    REFUSED("key 'use_local_attn' given twice", "--checkpoint %s/ln_std.pth --config %s", d,
            t_path("twice.json"));
    char opts[2400];
    snprintf(opts, sizeof opts,
             "--checkpoint %s/ln_std.pth --config %s --ignore-key "
             "rotary_frobnicate,other",
             d, t_path("unknown.json"));
    CHECK(import_cli(t_path("ignored"), opts) == 0);
    char *card = t_slurp(t_path("ignored/import.json"));
    CHECK(card && strstr(card, "\"rotary_frobnicate\""));
    free(card);
    /* options */
    REFUSED("give --preset or --config, not both",
            "--checkpoint %s/ln_std.pth --config %s/ln_std.config.json --preset attn-only-2l", d,
            d);
    REFUSED("unknown preset 'redwood_attn_2' (did you mean 'redwood_attn_2l'?)",
            "--checkpoint %s/ln_std.pth --preset redwood_attn_2", d);
    REFUSED("the positions are not known", "--checkpoint %s/ln_std.pth", d);
    CHECK(t_sh("mkdir -p %s", t_path("full")) == 0);
    t_write("full/x", "x");
    CHECK(import_cli(t_path("full"), "--checkpoint x.pth --positions standard") == 1);
    CHECK(t_one_line(t_path("imp.err"), "exists and is not empty"));
}

TEST(import_tokenizer_and_commands_on_imported_model) {
    const char *d = gen("small");
    al_tokenizer *tok;
    al_err e;
    CHECK_OK(al_tok_byte_level(&tok, &e), &e);
    CHECK_OK(al_tok_save(tok, t_path("tokenizer.json"), &e), &e);
    al_tok_free(tok);
    char opts[1300];
    snprintf(opts, sizeof opts,
             "--checkpoint %s/ln_std.pth --config %s/ln_std.config.json "
             "--tokenizer %s",
             d, d, t_path("tokenizer.json"));
    CHECK(import_cli(t_path("m"), opts) == 0);
    CHECK(t_sh("%s run --model %s --prompt 'Once upon a time' > %s 2>&1", t_bin(), t_path("m"),
               t_path("run.out")) == 0);
    /* a Hugging Face tokenizer.json goes through al_tok_load: accepted where
     * the reader knows the format, else refused in one line with nothing written */
    t_write("hf.json",
            "{\"version\": \"1.0\", \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, "
            "\"b\": 1}, \"merges\": []}, \"added_tokens\": [], \"pre_tokenizer\": "
            "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}}");
    snprintf(opts, sizeof opts,
             "--checkpoint %s/ln_std.pth --config %s/ln_std.config.json "
             "--tokenizer %s",
             d, d, t_path("hf.json"));
    int rc = import_cli(t_path("hf"), opts);
    CHECK(rc == 0 ||
          (rc == 1 && t_one_line(t_path("imp.err"), "hf.json") && !exists(t_path("hf"))));
    /* every analysis runs on the imported model (LNPre and biases) */
    CHECK(t_sh("%s data synth --out %s --stories 60 > /dev/null 2>&1 && %s encode --tokenizer %s "
               "--in %s --out %s --val 0.3 > /dev/null 2>&1",
               t_bin(), t_path("s.txt"), t_bin(), t_path("tokenizer.json"), t_path("s.txt"),
               t_path("d.bin")) == 0);
    static const char *const cmds[] = {"circuits",
                                       "scores --probe-r 20",
                                       "ablate --data %s --probe-r 20",
                                       "prune --data %s --method ablation",
                                       "patch --probe-r 20",
                                       "paths --probe-r 20",
                                       "attribute --probe-r 20",
                                       "discover --probe-r 20",
                                       "names --data %s",
                                       "attnstats --data %s --batches 1",
                                       "sae train --data %s --layer 0 --out %s/sae --steps 3",
                                       "sae features --data %s --sae %s/sae --windows 8"};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        char args[1200];
        snprintf(args, sizeof args, cmds[k], t_path("d.val.bin"), t_tmpdir());
        rc = t_sh("%s %s --model %s --db %s > %s 2> %s", t_bin(), args, t_path("m"), t_path("r.db"),
                  t_path("an.out"), t_path("an.err"));
        char *err = t_slurp(t_path("an.err"));
        CHECKF(rc == 0, "%s: exit %d, stderr %s", args, rc, err ? err : "");
        printf("    %-16.16s %s\n", args, rc == 0 ? "runs" : "refuses");
        free(err);
    }
    /* and circuits on redwood_attn_2l's layout (LayerNorm, shortformer:
     * token parts folded, positional parts from the raw weights) */
    snprintf(opts, sizeof opts,
             "--checkpoint %s/ln_sf.pth --config %s/ln_sf.config.json "
             "--tokenizer %s",
             d, d, t_path("tokenizer.json"));
    CHECK(import_cli(t_path("sf"), opts) == 0);
    rc = t_sh("%s circuits --model %s --db %s > /dev/null 2> %s", t_bin(), t_path("sf"),
              t_path("r.db"), t_path("an.err"));
    CHECKF(rc == 0, "circuits on a shortformer LN import: exit %d", rc);
    CHECK(t_sql_long(t_path("r.db"), "SELECT count(*) FROM run_warnings WHERE message LIKE "
                                     "'circuits of a shortformer LayerNorm model%'") == 1);
}

/* attn-only-2l's true shape (d_model 512, n_ctx 1024, d_vocab 48262)
 * through scripts/get-model.sh. Under the sanitizers it is skipped as the
 * redwood-shape run below is: the shape alone costs minutes there, and
 * the import's code runs on the small checkpoints of the tests above. */
TEST(import_true_attn_only_2l_shape_and_get_model) {
    if (getenv("ASAN_OPTIONS")) {
        t_skip("the true-shape run is the plain build's (ASan would take many minutes)");
        return;
    }
    const char *d = gen("big");
    al_tokenizer *tok;
    al_err e;
    CHECK_OK(al_tok_byte_level(&tok, &e), &e);
    CHECK_OK(al_tok_save(tok, t_path("tokenizer.json"), &e), &e);
    al_tok_free(tok);
    /* scripts/get-model.sh's conversion on a local mirror of the hub's layout */
    const char *mirror = t_path("hub");
    CHECK(t_sh("mkdir -p %s/NeelNanda/Attn_Only_2L512W_C4_Code && cd %s/NeelNanda/"
               "Attn_Only_2L512W_C4_Code && ln -s %s/big.pth model_final.pth && "
               "ln -s %s/big.config.json config.json && mkdir -p %s/NeelNanda/gpt-neox-tokenizer-"
               "digits && cp %s %s/NeelNanda/gpt-neox-tokenizer-digits/tokenizer.json",
               mirror, mirror, d, d, mirror, t_path("tokenizer.json"), mirror) == 0);
    int rc = t_sh("ATTNLAB_BIN=%s ATTNLAB_HUB_MIRROR=%s sh scripts/get-model.sh attn-only-2l %s "
                  "> %s 2>&1",
                  t_bin(), mirror, t_path("models"), t_path("get.out"));
    CHECKF(rc == 0, "get-model.sh: %s", t_slurp(t_path("get.out")));
    char *so = t_slurp(t_path("get.out"));
    CHECK(so &&
          strstr(so, "model: 2 layers, d_model 512, 8 heads x 64, n_ctx 1024, d_vocab 48262"));
    free(so);
    ref_file r;
    if (ref_open(&r, in(d, "big.ref.safetensors"))) return;
    al_model m;
    al_tokenizer *t2 = NULL;
    CHECK_OK(al_ckpt_load(t_path("models/attn-only-2l"), &m, &t2, &e), &e);
    if (m.params) {
        size_t n = (size_t)r.B * r.T * m.cfg.d_vocab;
        float *lg = logits_of(&m, r.tok, r.B, r.T);
        log_softmax(lg, (size_t)r.B * r.T, m.cfg.d_vocab);
        const float *want = ref_get(&r, "logprobs", n);
        double w = want ? rel_err(lg, want, n) : 1;
        CHECKF(w <= 1e-5, "log-probabilities differ by %.3g", w);
        printf("    attn-only-2l's shape: processed log-probs within %.2e of PyTorch's\n", w);
        free(lg);
        al_model_free(&m);
    }
    al_tok_free(t2);
    al_st_close(r.f);
    /* a second run finds the directory there and leaves it alone */
    rc = t_sh("ATTNLAB_BIN=%s ATTNLAB_HUB_MIRROR=%s sh scripts/get-model.sh attn-only-2l %s "
              "> %s 2>&1",
              t_bin(), mirror, t_path("models"), t_path("get.out"));
    CHECK(rc == 1);
}

/* Every analysis command completes on an imported model of redwood_attn_2l's
 * true shape (d_model 256, 8 heads of 32, n_ctx 2048, d_vocab 50259,
 * LayerNorm, shortformer positions) with small options; `make bench` runs
 * them at their defaults on it and on attn-only-2l's shape, with their
 * peak memory (bench/bench_import.sh). Two run only there: circuits,
 * whose copying score multiplies out every head's d_vocab x d_vocab OV
 * circuit (about a minute here), and prune, which evaluates the model
 * once per head per step on windows of 2048 tokens (minutes; ablate runs
 * the same forwards here). Under the sanitizers (ASAN_OPTIONS set
 * by make test SAN=1) the test is skipped: it would take many minutes,
 * and the same code runs on small models there. */
TEST(import_every_analysis_at_redwood_shape) {
    if (getenv("ASAN_OPTIONS")) {
        t_skip("the true-shape run is the plain build's (ASan would take many minutes)");
        return;
    }
    const char *d = gen("redwood");
    double t0 = al_now();
    CHECK(t_sh("%s data synth --out %s --stories 60 > /dev/null 2>&1 && %s tokenizer train --in "
               "%s --vocab 257 --out %s > /dev/null 2>&1 && %s encode --tokenizer %s --in %s "
               "--out %s --val 0.3 > /dev/null 2>&1",
               t_bin(), t_path("s.txt"), t_bin(), t_path("s.txt"), t_path("byte.json"), t_bin(),
               t_path("byte.json"), t_path("s.txt"), t_path("d.bin")) == 0);
    char opts[1400];
    snprintf(opts, sizeof opts,
             "--checkpoint %s/redwood.pth --config %s/redwood.config.json "
             "--tokenizer %s",
             d, d, t_path("byte.json"));
    CHECK(import_cli(t_path("m"), opts) == 0);
    char *cfg = t_slurp(t_path("m/config.json"));
    CHECK(cfg && strstr(cfg, "\"d_vocab\":\t50259") && strstr(cfg, "\"n_ctx\":\t2048") &&
          strstr(cfg, "\"positional_embedding_type\":\t\"shortformer\""));
    free(cfg);
    static const char *const cmds[] =
        {"scores --probe-r 10 --probe-n 4",
         "ablate --data %1$s --heads 1.6 --probe-r 10 --probe-n 4 --batches 1 --batch 1",
         "patch --probe-r 10 --n 4",
         "paths --probe-r 10 --n 4",
         "attribute --probe-r 10 --n 4 --no-patching",
         "discover --probe-r 10 --n 4",
         "names --data %1$s --stories 8",
         "attnstats --data %1$s --batches 1 --batch 1",
         ("sae train --data %3$s --val %1$s --layer 1 --out %2$s/sae --steps 3 --batch 64 "
          "--eval-windows 1 --expansion 1 --k 8"),
         "sae features --data %1$s --sae %2$s/sae --windows 2 --probe-r 10 --probe-n 8",
         "run --prompt 'Once upon a time'"};
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        char args[1400];
        snprintf(args, sizeof args, cmds[k], t_path("d.val.bin"), t_tmpdir(),
                 t_path("d.train.bin"));
        double t1 = al_now();
        int run = !strncmp(args, "run ", 4); /* stores nothing */
        int rc =
            t_sh("%s %s --model %s %s %s --threads 2 > %s 2> %s", t_bin(), args, t_path("m"),
                 run ? "" : "--db", run ? "" : t_path("r.db"), t_path("an.out"), t_path("an.err"));
        char *err = t_slurp(t_path("an.err"));
        CHECKF(rc == 0, "%s: exit %d, stderr %s", args, rc, err ? err : "");
        free(err);
        printf("    %-14.14s %5.1f s\n", args, al_now() - t1);
    }
    CHECK(t_sql_long(t_path("r.db"), "SELECT count(*) FROM runs WHERE status = 'done'") == 10);
    printf("    redwood_attn_2l's shape: every analysis in %.0f s\n", al_now() - t0);
}
