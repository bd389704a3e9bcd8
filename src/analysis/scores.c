/* scores.c -- the repeated-random-token probe and the attention scores
 * read from it (see scores.h for the definitions). */
#include <math.h>
#include "attnlab/scores.h"

#include <stdlib.h>
#include <string.h>

/* One text window of R tokens into row[1..R] (and row[R+1..2R]): a start
 * drawn uniformly, redrawn while the window holds a document boundary. */
static void text_half(const al_probe_src *src, int R, int special_id, al_rng *r, int *row) {
    size_t span = src->n_text - (size_t)R + 1, start = 0;
    for (int tries = 0; tries < 64; tries++) {
        start =
            span > 0xffffffffu ? (size_t)(al_rng_u64(r) % span) : al_rng_below(r, (uint32_t)span);
        int clean = 1;
        for (int i = 0; i < R && clean; i++) clean = src->text[start + i] != special_id;
        if (clean) break;
    }
    for (int i = 1; i <= R; i++) row[i] = row[i + R] = src->text[start + i - 1];
}

/* The share of second-half positions whose token sits at another
 * first-half position too, the chance and positional levels of
 * induction_all and the ceiling of induction (scores.h): from the tokens
 * alone. */
void al_probe_measure(al_probe *p) {
    int R = p->R, N = p->N;
    long hit = 0, all = 0, prev = 0;
    double uniform = 0, even = 0;
    for (int n = 0; n < N; n++) {
        const int *row = p->tokens + (size_t)n * (2 * R + 1);
        for (int t = R + 1; t <= 2 * R; t++, all++) {
            int other = 0, in_s = 0;
            for (int s = 1; s <= R && !other; s++) other = s != t - R && row[s] == row[t];
            for (int s = 1; s <= t; s++) in_s += row[s - 1] == row[t];
            hit += other;
            prev += row[t - 2] == row[t];
            uniform += (double)in_s / (t + 1);
            even += 1.0 / in_s; /* S(t) holds t-R+1 at least: in_s >= 1 */
        }
    }
    p->recur = all ? (double)hit / (double)all : 0.0;
    p->uniform_all = all ? uniform / (double)all : 0.0;
    p->prev_all = all ? (double)prev / (double)all : 0.0;
    p->ceiling = all ? even / (double)all : 0.0;
}

int al_probe_r_default(int probe_r, int n_ctx) {
    if (probe_r) return probe_r;
    int r = (n_ctx - 1) / 2;
    return r < 50 ? r : 50;
}

int al_probe_make(al_probe *p, int R, int N, uint64_t seed, int d_vocab, int special_id,
                  const al_probe_src *src, al_err *e) {
    memset(p, 0, sizeof *p);
    if (R < 2 || N < 1) return al_errf(e, "probe needs R >= 2 and N >= 1 (got R %d, N %d)", R, N);
    if (d_vocab < 3) return al_errf(e, "probe needs a vocabulary of at least 3 tokens");
    const unsigned char *allowed = src ? src->allowed : NULL;
    int text = src && src->text;
    if (text) {
        if (src->n_text < (size_t)R + 1)
            return al_errf(e, "the probe's text has %zu tokens; a half of %d needs at least %d",
                           src->n_text, R, R + 1);
        for (size_t i = 0; i < src->n_text; i++)
            if (src->text[i] >= d_vocab)
                return al_errf(e,
                               "the probe's text holds id %d, outside the model's vocabulary "
                               "(0..%d): was it encoded with another tokenizer?",
                               src->text[i], d_vocab - 1);
        allowed = NULL;
    }
    int n_ok = 0;
    for (int i = 0; allowed && i < d_vocab; i++) n_ok += allowed[i] && i != special_id;
    if (allowed && n_ok < 2)
        return al_errf(e, "probe needs at least 2 token ids to draw from (%d allowed)", n_ok);
    int S = 2 * R + 1;
    p->tokens = al_malloc((size_t)N * S, sizeof(int), e);
    if (!p->tokens) return -1;
    al_rng r;
    al_rng_seed(&r, seed);
    for (int n = 0; n < N; n++) {
        int *row = p->tokens + (size_t)n * S;
        row[0] = special_id >= 0 ? special_id : 0;
        if (text) {
            text_half(src, R, special_id, &r, row);
            continue;
        }
        for (int i = 1; i <= R; i++) {
            int id;
            /* rejection keeps the draw uniform over what is allowed and,
             * without a mask, the stream of earlier versions */
            do id = (int)al_rng_below(&r, (uint32_t)d_vocab);
            while (id == special_id || (allowed && !allowed[id]));
            row[i] = row[i + R] = id;
        }
    }
    p->R = R;
    p->N = N;
    p->text = text;
    al_probe_measure(p);
    return 0;
}

void al_probe_free(al_probe *p) {
    free(p->tokens);
    memset(p, 0, sizeof *p);
}

void al_probe_scores_free(al_probe_scores *s) {
    free(s->induction);
    free(s->items);
    memset(s, 0, sizeof *s);
}

/* Add one batch's attention statistics (sums, divided at the end).
 * in_s (2R+1)^2 bytes of scratch: in_s[t*T+s] = 1 when s is in S(t). For
 * a t whose S(t) is {t−R+1} alone, the all-occurrences sum adds the same
 * float to 0 and then to the running sum as `ind` does, so on a probe
 * without recurrences induction_all equals induction bit for bit. */
static void accumulate(const al_model *m, const int *in, int B, int R, unsigned char *in_s,
                       al_probe_scores *o, int n0) {
    int L = m->cfg.n_layers, H = m->cfg.n_heads, T = 2 * R + 1;
    const size_t LH = (size_t)L * H;
    for (int b = 0; b < B; b++) {
        /* this sequence's row of o->items, when kept */
        double *it = o->items ? o->items + (size_t)(n0 + b) * AL_PROBE_ITEM_COLS(LH) : NULL;
        const int *row = in + (size_t)b * T;
        for (int t = R + 1; t <= 2 * R; t++)
            for (int s = 0; s < T; s++) in_s[t * T + s] = s >= 1 && s <= t && row[s - 1] == row[t];
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++) {
                const float *A = m->att + (((size_t)l * B + b) * H + h) * T * T;
                double ind = 0, dup = 0, prev = 0, all = 0;
                for (int t = R + 1; t <= 2 * R; t++) {
                    ind += A[(size_t)t * T + (t - R + 1)];
                    dup += A[(size_t)t * T + (t - R)];
                    double mass = 0;
                    for (int s = 1; s <= t; s++)
                        if (in_s[t * T + s]) mass += A[(size_t)t * T + s];
                    all += mass;
                }
                for (int t = 2; t < T; t++) prev += A[(size_t)t * T + (t - 1)];
                o->induction[l * H + h] += ind;
                o->duplicate_token[l * H + h] += dup;
                o->prev_token[l * H + h] += prev;
                o->induction_all[l * H + h] += all;
                if (it) {
                    it[l * H + h] = ind / R;
                    it[LH + l * H + h] = dup / R;
                    it[2 * LH + l * H + h] = prev / (T - 2);
                    it[3 * LH + l * H + h] = all / R;
                }
            }
    }
}

static int probe_run(al_model *m, const al_probe *p, int batch, int keep, al_probe_scores *out,
                     al_err *e) {
    memset(out, 0, sizeof *out);
    int L = m->cfg.n_layers, H = m->cfg.n_heads, R = p->R, T = 2 * R + 1;
    if (T > m->cfg.n_ctx)
        return al_errf(e, "probe length 2R+1 = %d exceeds n_ctx %d", T, m->cfg.n_ctx);
    if (batch < 1) batch = 1;
    size_t LH = (size_t)L * H;
    out->induction = al_calloc(4 * LH + 2 * (size_t)L, sizeof(double), e);
    int *tg = al_malloc((size_t)batch * T, sizeof(int), e);
    unsigned char *in_s = al_malloc((size_t)T * T, 1, e);
    if (!out->induction || !tg || !in_s) {
        free(tg);
        free(in_s);
        al_probe_scores_free(out);
        return -1;
    }
    if (keep &&
        !(out->items = al_malloc((size_t)p->N * AL_PROBE_ITEM_COLS(LH), sizeof(double), e))) {
        free(tg);
        free(in_s);
        al_probe_scores_free(out);
        return -1;
    }
    out->n_items = keep ? p->N : 0;
    out->duplicate_token = out->induction + LH;
    out->prev_token = out->induction + 2 * LH;
    out->induction_all = out->induction + 3 * LH;
    out->layer_induction = out->induction + 4 * LH;
    out->layer_induction_all = out->layer_induction + L;
    out->n_layers = L;
    out->n_heads = H;
    double first = 0, second = 0;
    for (int n0 = 0; n0 < p->N; n0 += batch) {
        int B = p->N - n0 < batch ? p->N - n0 : batch;
        const int *in = p->tokens + (size_t)n0 * T;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) tg[b * T + t] = t + 1 < T ? in[b * T + t + 1] : -1;
        if (al_model_forward(m, in, tg, B, T, e) != 0) {
            free(tg);
            free(in_s);
            al_probe_scores_free(out);
            return -1;
        }
        accumulate(m, in, B, R, in_s, out, n0);
        /* target at position t+1 is predicted at t */
        for (int b = 0; b < B; b++) {
            double f = 0, sc = 0;
            for (int t = 1; t <= R - 1; t++)
                first += m->losses[b * T + t], f += m->losses[b * T + t];
            for (int t = R + 1; t <= 2 * R - 1; t++)
                second += m->losses[b * T + t], sc += m->losses[b * T + t];
            if (out->items)
                out->items[(size_t)(n0 + b) * AL_PROBE_ITEM_COLS(LH) + 4 * LH] = (f - sc) / (R - 1);
        }
    }
    free(tg);
    free(in_s);
    double N = p->N;
    for (size_t i = 0; i < LH; i++) {
        out->induction[i] /= N * R;
        out->duplicate_token[i] /= N * R;
        out->prev_token[i] /= N * (T - 2);
        out->induction_all[i] /= N * R;
    }
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++) {
            out->layer_induction[l] += out->induction[l * H + h];
            out->layer_induction_all[l] += out->induction_all[l * H + h];
        }
    out->loss_first = first / (N * (R - 1));
    out->loss_second = second / (N * (R - 1));
    out->icl_gain = out->loss_first - out->loss_second;
    return 0;
}

int al_probe_run(al_model *m, const al_probe *p, int batch, al_probe_scores *out, al_err *e) {
    return probe_run(m, p, batch, 0, out, e);
}

int al_probe_run_items(al_model *m, const al_probe *p, int batch, al_probe_scores *out, al_err *e) {
    return probe_run(m, p, batch, 1, out, e);
}

/* ----------------------------------------------------- natural text */

al_icl_range al_icl_ranges(int T) {
    al_icl_range r = {0, 0, 0, 0};
    if (T < 5) return r;
    int w = T / 25 > 1 ? T / 25 : 1;
    r.e0 = T / 10 - w / 2;
    r.e1 = r.e0 + w;
    r.l0 = T - w;
    r.l1 = T;
    return r;
}

int al_icl_score(const float *losses, const int *targets, int rows, int T, double *early,
                 double *late, double *score, double *se, al_err *e) {
    al_icl_range r = al_icl_ranges(T);
    if (T < 5)
        return al_errf(e, "in-context learning score needs windows of >= 5 tokens (got %d)", T);
    double s_e = 0, s_l = 0, d_sum = 0, d_sq = 0;
    long ne = 0, nl = 0, nd = 0;
    for (int b = 0; b < rows; b++) {
        double re = 0, rl = 0;
        long ke = 0, kl = 0;
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            if (targets[i] < 0) continue;
            if (t >= r.e0 && t < r.e1) re += losses[i], ke++;
            if (t >= r.l0 && t < r.l1) rl += losses[i], kl++;
        }
        s_e += re, ne += ke, s_l += rl, nl += kl;
        if (ke && kl) {
            double d = rl / kl - re / ke;
            d_sum += d, d_sq += d * d, nd++;
        }
    }
    if (!ne || !nl)
        return al_errf(e, "in-context learning score: no targets in the early or late positions");
    *early = s_e / ne;
    *late = s_l / nl;
    *score = *late - *early;
    if (se) {
        double mean = nd ? d_sum / nd : 0,
               var = nd > 1 ? (d_sq - nd * mean * mean) / (nd - 1) : NAN;
        *se = nd > 1 ? sqrt(var > 0 ? var : 0) / sqrt((double)nd) : NAN;
    }
    return 0;
}

int al_copy_positions(const int *inputs, const int *targets, int rows, int T, int d_vocab,
                      unsigned char *out, al_err *e) {
    /* seen[id] == row+1 marks ids met in this row: no clearing per row */
    int *seen = al_calloc((size_t)d_vocab, sizeof(int), e);
    if (!seen) return -1;
    for (int b = 0; b < rows; b++)
        for (int t = 0; t < T; t++) {
            size_t i = (size_t)b * T + t;
            int x = inputs[i], y = targets[i];
            if (x < 0 || x >= d_vocab || y >= d_vocab) {
                free(seen);
                return al_errf(
                    e, "token id %d at row %d position %d is outside the vocabulary (d_vocab %d)",
                    x < 0 || x >= d_vocab ? x : y, b, t, d_vocab);
            }
            seen[x] = b + 1;
            out[i] = y >= 0 && seen[y] == b + 1;
        }
    free(seen);
    return 0;
}
