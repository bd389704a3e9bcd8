/* namecopy.c -- probabilities of an inserted name's pieces at its first
 * and second appearance (namecopy.h). */
#include "attnlab/namecopy.h"

#include <string.h>

int al_namecopy_run(al_model *m, const al_name_stories *s, al_namecopy_result *r, al_err *e) {
    memset(r, 0, sizeof *r);
    const int V = m->cfg.d_vocab;
    double rest1 = 0, rest2 = 0;
    long n_rest = 0;
    for (int i = 0; i < s->n; i++) {
        const al_name_story *st = &s->s[i];
        if (st->len > m->cfg.n_ctx) {
            memset(r, 0, sizeof *r);
            return al_errf(e, "names: story %d has %d tokens, more than the model's n_ctx %d", i,
                           st->len, m->cfg.n_ctx);
        }
        if (al_model_forward(m, st->ids, NULL, 1, st->len, e)) {
            memset(r, 0, sizeof *r);
            return -1;
        }
        /* piece j is predicted at the position before it */
        for (int j = 0; j < st->k; j++) {
            double p1 = m->probs[(size_t)(st->first + j - 1) * V + st->piece[j]];
            double p2 = m->probs[(size_t)(st->second + j - 1) * V + st->piece[j]];
            r->p_first[j] += p1, r->p_second[j] += p2, r->count[j]++;
            if (j > 0) rest1 += p1, rest2 += p2, n_rest++;
        }
        if (st->k > r->max_k) r->max_k = st->k;
    }
    for (int j = 0; j < r->max_k; j++)
        if (r->count[j]) r->p_first[j] /= r->count[j], r->p_second[j] /= r->count[j];
    r->n = s->n;
    r->rest_first = n_rest ? rest1 / (double)n_rest : 0;
    r->rest_second = n_rest ? rest2 / (double)n_rest : 0;
    return 0;
}
