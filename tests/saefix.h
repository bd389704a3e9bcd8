/* saefix.h -- the planted SAE of test_sae_cli.c for the tests of what is
 * drawn and reported from an `attnlab sae features` run (static functions:
 * each test file gets its own copy): the planted induction model
 * (planted.h), a token file of repeated random sequences and a hand-set
 * SAE on layer 1's z whose features are known one-hot directions:
 *   0  head 1.0's z at dimension 3 above SAE_THR (induction predicts
 *      token 3): DFA share 1 on head 1.0, raises token 3 by P_GAMMA
 *   1  the same for token 9
 *   2  head 1.2's dimension 0 (constant 1): fires everywhere, share 1 on
 *      head 1.2, raises token 7 by 1
 *   3  nothing (dead). */
#ifndef ATTNLAB_TEST_SAEFIX_H
#define ATTNLAB_TEST_SAEFIX_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/checkpoint.h"
#include "attnlab/data.h"
#include "attnlab/sae.h"
#include "attnlab/sae_io.h"
#include "planted.h"
#include "test.h"

enum { SAE_D = PH * PD, SAE_F = 4, SAE_T = PP, SAE_W = 16 };
static const float SAE_THR = 0.6f;

static inline void saefix_sae(al_sae *s, al_sae_meta *meta, const char *sha) {
    al_sae_cfg c = al_sae_cfg_default(SAE_D, SAE_F);
    c.arch = AL_SAE_L1;
    c.k_aux = 0;
    al_err e;
    CHECK_OK(al_sae_alloc(s, &c, &e), &e);
    s->W_enc[(0 * PD + 3) * SAE_F + 0] = 1;
    s->W_enc[(0 * PD + 9) * SAE_F + 1] = 1;
    s->W_enc[(2 * PD + 0) * SAE_F + 2] = 1;
    s->b_enc[0] = s->b_enc[1] = -SAE_THR;
    s->b_enc[3] = -1;
    s->W_dec[0 * SAE_D + 0 * PD + 3] = 1;
    s->W_dec[1 * SAE_D + 0 * PD + 9] = 1;
    s->W_dec[2 * SAE_D + 2 * PD + 0] = 1;
    s->W_dec[3 * SAE_D + 1 * PD + 0] = 1;
    memset(meta, 0, sizeof *meta);
    meta->site = AL_SAE_SITE_Z;
    meta->hook_layer = 1;
    meta->scale = 1;
    if (sha) snprintf(meta->model_sha256, sizeof meta->model_sha256, "%s", sha);
}

/* 40 repeated random sequences (BOS 0 + 15 ids, twice), each half holding
 * token 3 and token 9 once at positions 2..15, the rest random in 1..127. */
static inline int *saefix_ids(size_t *n) {
    enum { ROWS = 40, NR = 15, TT = 2 * NR + 1 };
    int *in = malloc(sizeof(int) * ROWS * TT);
    CHECK(in != NULL);
    al_rng r;
    al_rng_seed(&r, 7);
    for (int b = 0; in && b < ROWS; b++) {
        int *x = in + b * TT;
        x[0] = 0;
        for (int i = 1; i <= NR; i++) {
            int v;
            do v = 1 + (int)al_rng_below(&r, PV - 1);
            while (v == 3 || v == 9);
            x[i] = v;
        }
        int a = 2 + (int)al_rng_below(&r, NR - 1), c;
        do c = 2 + (int)al_rng_below(&r, NR - 1);
        while (c == a);
        x[a] = 3, x[c] = 9;
        for (int i = 1; i <= NR; i++) x[NR + i] = x[i];
    }
    *n = (size_t)ROWS * TT;
    return in;
}

/* The model directory, the token file and the SAE directory on disk. */
static inline void saefix_files(const char *mdir, const char *bin, const char *sdir) {
    al_model m;
    al_err e;
    planted_model(&m);
    CHECK_OK(al_ckpt_save(mdir, &m, NULL, NULL, NULL, NULL, &e), &e);
    char mp[1100], sha[65];
    snprintf(mp, sizeof mp, "%s/model.safetensors", mdir);
    CHECK_OK(al_sha256_file(mp, sha, &e), &e);
    size_t n;
    int *ids = saefix_ids(&n);
    CHECK_OK(al_tokens_save(bin, ids, n, &e), &e);
    al_sae s;
    al_sae_meta meta;
    saefix_sae(&s, &meta, sha);
    CHECK_OK(al_sae_save(sdir, &s, &meta, &e), &e);
    al_sae_free(&s);
    free(ids);
    al_model_free(&m);
}

/* saefix_files in t_path("planted"), t_path("p.bin"), t_path("sae") and
 * one `sae features` run of them into t_path("r.db") (run 1). */
static inline void saefix_run(void) {
    t_pbuf md = t_pcopy("planted"), bin = t_pcopy("p.bin"), sd = t_pcopy("sae"),
           db = t_pcopy("r.db");
    saefix_files(md.s, bin.s, sd.s);
    CHECK(t_sh("%s sae features --model %s --sae %s --data %s --db %s --windows %d > /dev/null",
               t_bin(), md.s, sd.s, bin.s, db.s, SAE_W) == 0);
}

#endif
