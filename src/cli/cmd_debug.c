/* cmd_debug.c -- `attnlab debug-dump`: the engine's numbers on one batch,
 * written as safetensors for the independent PyTorch cross-check
 * (tests/torch_ref.py): inputs, targets, logits, loss, every gradient
 * (TransformerLens names prefixed "grad."), ∂L/∂gates, and the losses of
 * a few AdamW steps on that batch. Not for everyday use. */
#include <stdlib.h>
#include <string.h>

#include "attnlab/args.h"
#include "attnlab/checkpoint.h"
#include "attnlab/data.h"
#include "attnlab/optim.h"
#include "attnlab/safetensors.h"

static const char *o_model, *o_data, *o_out, *o_gates;
static int o_batch = 2, o_seq = 0, o_steps = 10, o_threads = 0;
static double o_lr = 1e-3, o_wd = 0.1, o_clip = 1.0;

static al_flag flags[] = {{"model", AL_STR, &o_model, "DIR", "model directory", 1, 0},
                          {"data", AL_STR, &o_data, "FILE",
                           "token file; the batch is its first fixed batch", 1, 0},
                          {"out", AL_STR, &o_out, "FILE", "safetensors file to write", 1, 0},
                          {"batch", AL_INT, &o_batch, "N", "sequences", 0, 0},
                          {"seq-len", AL_INT, &o_seq, "N", "tokens per sequence (0 = n_ctx)", 0, 0},
                          {"gates", AL_STR, &o_gates, "LIST",
                           "comma-separated gate values, layer-major (default all 1)", 0, 0},
                          {"adam-steps", AL_INT, &o_steps, "N",
                           "AdamW steps on the batch (constant lr)", 0, 0},
                          {"lr", AL_FLOAT, &o_lr, "X", "AdamW learning rate", 0, 0},
                          {"weight-decay", AL_FLOAT, &o_wd, "X", "AdamW weight decay", 0, 0},
                          {"grad-clip", AL_FLOAT, &o_clip, "X", "global norm clip", 0, 0},
                          {"threads", AL_INT, &o_threads, "N", "threads", 0, 0},
                          AL_FLAGS_END};

static int run_debug(int argc, char **argv);
al_command al_cmd_debug_dump = {"debug-dump",
                                "dump logits, loss and gradients on one batch (for cross-checks)",
                                "--model DIR --data FILE --out FILE [options]",
                                NULL,
                                flags,
                                run_debug};

static int parse_gates(al_model *m, al_err *e) {
    if (!o_gates) return 0;
    int n = m->cfg.n_layers * m->cfg.n_heads, i = 0;
    const char *s = o_gates;
    while (*s && i < n) {
        char *end;
        m->gates[i++] = strtof(s, &end);
        if (end == s) break;
        s = *end == ',' ? end + 1 : end;
    }
    return i == n && !*s ? 0 : al_errf(e, "--gates needs %d comma-separated numbers", n);
}

/* Everything the check compares, in one file. */
static int dump(al_model *m, const int *in, const int *tg, int B, int T, const float *logits,
                const float *adam_losses, al_err *e) {
    enum { MAXT = 8 + 10 * 64 }; /* W_E, W_pos, ln_final, W_U, b_U and 10 a layer */
    static al_st_tensor t[MAXT];
    static char names[MAXT][96];
    int n = 0, L = m->cfg.n_layers;
    t[n++] = (al_st_tensor){"inputs", AL_DT_I32, 2, {B, T}, in};
    t[n++] = (al_st_tensor){"targets", AL_DT_I32, 2, {B, T}, tg};
    t[n++] = (al_st_tensor){"logits", AL_DT_F32, 3, {B, T, m->cfg.d_vocab}, logits};
    t[n++] = (al_st_tensor){"loss", AL_DT_F32, 1, {1}, &m->mean_loss};
    t[n++] = (al_st_tensor){"gates", AL_DT_F32, 2, {L, m->cfg.n_heads}, m->gates};
    t[n++] = (al_st_tensor){"grad.gates", AL_DT_F32, 2, {L, m->cfg.n_heads}, m->gate_grads};
    t[n++] = (al_st_tensor){"adam_losses", AL_DT_F32, 1, {o_steps + 1}, adam_losses};
    for (int p = 0; p < AL_NPARAM; p++) {
        if (!m->param_size[p]) continue;
        int layers = al_param_per_layer(p) ? L : 1;
        for (int l = 0; l < layers; l++) {
            char nm[80];
            int64_t shape[4];
            int nd = al_param_tl_name(m, p, l, nm, sizeof nm, shape);
            snprintf(names[n], sizeof names[n], "grad.%s", nm);
            t[n] = (al_st_tensor){names[n],
                                  AL_DT_F32,
                                  nd,
                                  {shape[0], shape[1], shape[2], shape[3]},
                                  m->g[p] + (size_t)l * al_param_layer_size(m, p)};
            n++;
        }
    }
    return al_st_write(o_out, t, n, NULL, NULL, 0, e);
}

static int run_debug(int argc, char **argv) {
    al_err e;
    if (al_flags_parse(flags, argc, argv, NULL, 0, NULL, &e) != 0)
        return al_cli_usage(&al_cmd_debug_dump, &e);
    if (al_threads_check(o_threads, &e)) return al_cli_usage(&al_cmd_debug_dump, &e);
    al_set_threads(o_threads);
    al_model m;
    al_tokens d = {0};
    al_adamw opt = {0};
    int *in = NULL, rc = 1;
    float *logits = NULL, *keep_grads = NULL, *keep_gg = NULL, *losses = NULL;
    if (al_ckpt_load(o_model, &m, NULL, &e) != 0) return al_cli_error(&e);
    int B = o_batch, T = o_seq ? o_seq : m.cfg.n_ctx, V = m.cfg.d_vocab, BT = B * T;
    size_t LH = (size_t)m.cfg.n_layers * m.cfg.n_heads;
    if (parse_gates(&m, &e) != 0 || al_tokens_load(o_data, &d, &e) != 0) goto out;
    in = malloc(sizeof(int) * 2 * (size_t)BT);
    logits = malloc(sizeof(float) * (size_t)BT * V);
    keep_grads = malloc(sizeof(float) * m.n_params);
    keep_gg = malloc(sizeof(float) * LH);
    losses = malloc(sizeof(float) * (size_t)(o_steps + 1));
    if (!in || !logits || !keep_grads || !keep_gg || !losses) {
        al_errf(&e, "out of memory");
        goto out;
    }
    if (al_batch_fixed(&d, B, T, 0, 1, in, in + BT, &e) != 0 ||
        al_model_forward(&m, in, in + BT, B, T, &e) != 0)
        goto out;
    /* the final residual through ln_final and the unembedding, as the forward does */
    al_model_unembed(&m, m.x + (size_t)m.cfg.n_layers * BT * m.cfg.d_model, BT, logits);
    float loss0 = m.mean_loss;
    if (al_model_backward(&m, &e) != 0) goto out;
    memcpy(keep_grads, m.grads, sizeof(float) * m.n_params);
    memcpy(keep_gg, m.gate_grads, sizeof(float) * LH);
    al_optim_cfg oc = {.lr = o_lr,
                       .min_lr_frac = 1.0,
                       .warmup = 0,
                       .total_steps = o_steps,
                       .beta1 = 0.9,
                       .beta2 = 0.95,
                       .eps = 1e-8,
                       .weight_decay = o_wd,
                       .grad_clip = o_clip};
    if (al_adamw_init(&opt, m.n_params, &e) != 0) goto out;
    for (int s = 0; s <= o_steps; s++) {
        if (al_model_forward(&m, in, in + BT, B, T, &e) != 0) goto out;
        losses[s] = m.mean_loss;
        if (s == o_steps) break;
        if (al_model_backward(&m, &e) != 0) goto out;
        al_adamw_step(&opt, &m, &oc, s + 1, o_lr);
    }
    memcpy(m.grads, keep_grads, sizeof(float) * m.n_params);
    memcpy(m.gate_grads, keep_gg, sizeof(float) * LH);
    m.mean_loss = loss0;
    if (dump(&m, in, in + BT, B, T, logits, losses, &e) != 0) goto out;
    rc = 0;
out:
    if (rc) al_cli_error(&e);
    free(in);
    free(logits);
    free(keep_grads);
    free(keep_gg);
    free(losses);
    al_adamw_free(&opt);
    al_tokens_free(&d);
    al_model_free(&m);
    return rc;
}
