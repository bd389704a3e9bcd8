/* api.c -- the C interface of api.h: thin wrappers over the checkpoint
 * loader, tokenizer, forward pass, activation cache and the registry's
 * driver, so that another language sees the CLI's numbers. */
#define _POSIX_C_SOURCE 200809L /* fileno, dup, pread */
#include "attnlab/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attnlab/act_cache.h"
#include "attnlab/checkpoint.h"
#include "attnlab/config.h"
#include "attnlab/gemm.h"
#include "attnlab/model.h"
#include "attnlab/registry.h"
#include "attnlab/tokenizer.h"
#include "attnlab/util.h"

struct al_api_model {
    al_model m;
    al_tokenizer *tok;
    char sha[65];
};

static void put_err(char *err, size_t cap, const char *msg) {
    if (err && cap) snprintf(err, cap, "%s", msg);
}

const char *al_api_version(void) { return AL_VERSION; }

al_api_model *al_api_load(const char *dir, char *err, size_t cap) {
    al_err e;
    al_api_model *h = calloc(1, sizeof *h);
    char p[AL_PATH_MAX + 32];
    if (!h) {
        put_err(err, cap, "out of memory");
        return NULL;
    }
    if (al_ckpt_load(dir, &h->m, &h->tok, &e) ||
        al_path_join(p, sizeof p, dir, "model.safetensors", &e) || al_sha256_file(p, h->sha, &e)) {
        put_err(err, cap, e.msg);
        al_api_free(h);
        return NULL;
    }
    return h;
}

void al_api_free(al_api_model *h) {
    if (!h) return;
    al_model_free(&h->m);
    al_tok_free(h->tok);
    free(h);
}

void al_api_config(const al_api_model *h, int *cfg) {
    const al_config *c = &h->m.cfg;
    cfg[0] = c->n_layers, cfg[1] = c->d_model, cfg[2] = c->n_heads, cfg[3] = c->d_head;
    cfg[4] = c->n_ctx, cfg[5] = c->d_vocab, cfg[6] = c->pos_type, cfg[7] = c->tied_embeddings;
    cfg[8] = h->tok ? al_tok_eot(h->tok) : -1;
}

long al_api_encode(al_api_model *h, const unsigned char *bytes, size_t n, int allow_special,
                   int *out, size_t cap, char *err, size_t ecap) {
    al_err e;
    if (!h->tok) {
        put_err(err, ecap, "the model directory has no tokenizer.json");
        return -1;
    }
    if (cap < n) {
        put_err(err, ecap, "the output needs room for as many ids as there are bytes");
        return -1;
    }
    size_t k = 0;
    if (al_tok_encode_into(h->tok, bytes, n, allow_special, out, &k, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    return (long)k;
}

long al_api_decode(al_api_model *h, const int *ids, size_t n, unsigned char *out, size_t cap,
                   char *err, size_t ecap) {
    al_err e;
    unsigned char *b = NULL;
    size_t k = 0;
    if (!h->tok) {
        put_err(err, ecap, "the model directory has no tokenizer.json");
        return -1;
    }
    if (al_tok_decode(h->tok, ids, n, &b, &k, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    memcpy(out, b, k < cap ? k : cap);
    free(b);
    return (long)k;
}

int al_api_forward(al_api_model *h, const int *ids, int B, int T, float *logits, float *probs,
                   char *err, size_t ecap) {
    al_err e;
    al_model *m = &h->m;
    if (al_model_forward(m, ids, NULL, B, T, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    const size_t BT = (size_t)B * T, V = m->cfg.d_vocab, C = m->cfg.d_model;
    if (probs) memcpy(probs, m->probs, sizeof(float) * BT * V);
    if (logits) /* the final residual through ln_final and the unembedding, as the forward */
        al_model_unembed(m, m->x + (size_t)m->cfg.n_layers * BT * C, (int)BT, logits);
    return 0;
}

int al_api_cache(al_api_model *h, const int *ids, int B, int T, const char *hooks,
                 double max_mb, const char *path, char *err, size_t ecap) {
    al_err e;
    if (!(max_mb > 0)) max_mb = 2000;
    if (al_cache_write(&h->m, ids, B, T, hooks, (size_t)(max_mb * 1e6), h->sha, path, &e)) {
        put_err(err, ecap, e.msg);
        return -1;
    }
    return 0;
}

/* The analysis's stdout goes to json_path and its stderr to a temporary
 * file for the length of the call; both descriptors are restored. */
int al_api_run(const char *name, int argc, const char *const *argv, const char *json_path,
               char *err, size_t ecap) {
    const al_analysis *a = NULL;
    for (const al_analysis *const *p = al_analyses; *p; p++)
        if (!strcmp((*p)->name, name)) a = *p;
    if (!a) {
        put_err(err, ecap, "no analysis of that name");
        return -1;
    }
    char **v = calloc((size_t)argc + 3, sizeof *v);
    if (!v) {
        put_err(err, ecap, "out of memory");
        return -1;
    }
    v[0] = (char *)name;
    for (int i = 0; i < argc; i++) v[i + 1] = (char *)argv[i];
    v[argc + 1] = "--json";
    /* stderr goes to an anonymous temporary file (tmpfile: already unlinked) */
    FILE *ef = tmpfile();
    int efd = ef ? fileno(ef) : -1, out = -1, saved1 = -1, saved2 = -1, rc = -1;
    FILE *jf = fopen(json_path, "w");
    if (efd < 0 || !jf) {
        put_err(err, ecap, "cannot open the output files");
        goto done;
    }
    fflush(stdout), fflush(stderr);
    out = fileno(jf);
    saved1 = dup(1), saved2 = dup(2);
    if (saved1 < 0 || saved2 < 0 || dup2(out, 1) < 0 || dup2(efd, 2) < 0) {
        put_err(err, ecap, "cannot redirect the output");
        goto done;
    }
    rc = al_drive_main(a, argc + 1, v + 1);
    fflush(stdout), fflush(stderr);
    dup2(saved1, 1), dup2(saved2, 2);
    if (err && ecap) {
        err[0] = 0;
        ssize_t k = pread(efd, err, ecap - 1, 0);
        err[k > 0 ? k : 0] = 0;
        err[strcspn(err, "\n")] = 0;
    }
done:
    if (saved1 >= 0) close(saved1);
    if (saved2 >= 0) close(saved2);
    if (jf) fclose(jf);
    if (ef) fclose(ef);
    free(v);
    return rc;
}
