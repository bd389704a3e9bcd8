/* fuzz_import_config.c -- the config.json reader of `attnlab import`
 * (al_import_config_mem, both formats) on arbitrary bytes, with and
 * without command-line settings over it: a refusal is one line; an
 * accepted configuration has the positions settled, every size it gives
 * positive, and passes al_config_validate once the sizes are all there. */
#include "fuzz.h"

#include "attnlab/import.h"

static void one(const char *text, size_t n, int with_settings) {
    al_import_opts o;
    memset(&o, 0, sizeof o);
    o.process = (al_process_opts)AL_PROCESS_OPTS_INIT;
    if (with_settings) {
        o.n_layers = 2, o.d_model = 8, o.n_heads = 2, o.d_head = 4, o.n_ctx = 8, o.d_vocab = 16;
        o.positions = "shortformer";
        o.ignore_keys = "a,b";
    }
    al_config c;
    al_import_info info;
    int norm_known;
    al_err e;
    if (al_import_config_mem(&o, text, n, "config.json", &c, &norm_known, &info, &e) != 0) {
        fz_check_msg(&e);
        return;
    }
    FZ_ASSERT(c.pos_type == AL_POS_STANDARD || c.pos_type == AL_POS_SHORTFORMER);
    FZ_ASSERT(c.n_layers >= 0 && c.d_model >= 0 && c.n_heads >= 0 && c.d_head >= 0 &&
              c.n_ctx >= 0 && c.d_vocab >= 0);
    FZ_ASSERT(info.recorded[0] == '{');
    if (with_settings) {
        FZ_ASSERT(c.pos_type == AL_POS_SHORTFORMER && c.d_model == 8);
        FZ_ASSERT(al_config_validate(&c, &e) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    /* exactly n bytes, no terminator: the parser must not read past them */
    char *raw = malloc(n ? n : 1);
    FZ_ASSERT(raw);
    memcpy(raw, d, n);
    one(raw, n, 0);
    one(raw, n, 1);
    free(raw);
    return 0;
}
