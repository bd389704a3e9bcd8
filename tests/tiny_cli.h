/* tiny_cli.h -- a tiny trained model made with the attnlab binary, for
 * tests that run the CLI on a real checkpoint (test_patch_cli.c,
 * test_concurrency.c). */
#ifndef ATTNLAB_TEST_TINY_CLI_H
#define ATTNLAB_TEST_TINY_CLI_H

#include <stdio.h>

#include "attnlab/util.h"
#include "test.h"

/* Corpus, tokenizer (vocab 320), token files DIR/s.train.bin and
 * DIR/s.val.bin, and a model of n_layers x 4 heads (d_model 32, n_ctx 32)
 * trained `steps` steps, in DIR/m<L>; the corpus and tokenizer are made
 * once per directory. */
static __attribute__((unused)) void tiny_model(const char *dir, int n_layers, int steps) {
    const char *b = t_bin();
    char tok[1100];
    snprintf(tok, sizeof tok, "%s/tok.json", dir);
    if (!al_file_exists(tok))
        CHECK(t_sh("%s data synth --out %s/s.txt --stories 200 --seed 3 >/dev/null 2>&1 && "
                   "%s tokenizer train --in %s/s.txt --vocab 320 --out %s/tok.json >/dev/null 2>&1 "
                   "&& %s encode --tokenizer %s/tok.json --in %s/s.txt --out %s/s.bin --val 0.1 "
                   ">/dev/null 2>&1",
                   b, dir, b, dir, dir, b, dir, dir, dir) == 0);
    CHECK(t_sh("%s train --data %s/s.train.bin --val %s/s.val.bin --tokenizer %s/tok.json --out "
               "%s/m%d --steps %d --n-layers %d --d-model 32 --n-heads 4 --d-head 8 --n-ctx 32 "
               "--batch 4 --eval-every 0 --warmup 2 --lr 0.01 --threads 2 >/dev/null 2>&1",
               b, dir, dir, dir, dir, n_layers, steps, n_layers) == 0);
}

#endif
