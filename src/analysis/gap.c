/* gap.c -- the gap check and the effect range check (see gap.h). Every
 * pair-task analysis calls these, so the rule and its wording live here
 * only. */
#include "attnlab/gap.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void al_warnings_add(al_warnings *w, const char *fmt, ...) {
    if (!w || w->n < 0 || w->n >= AL_WARN_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg[w->n], AL_WARN_LEN, fmt, ap);
    va_end(ap);
    w->n++;
}

const char *al_gap_metric_name(const al_pairs *t) {
    return t->logit_diff ? "logit difference" : "log-prob";
}

void al_gap_check(al_warnings *w, const char *metric, const double *m_clean, const double *m_corr,
                  int n_pairs) {
    if (n_pairs < 1) return;
    const int kl = metric && !strcmp(metric, "kl");
    const char *name = metric ? metric : "metric";
    double sc = 0.0, sr = 0.0;
    for (int i = 0; i < n_pairs; i++) sc += m_clean ? m_clean[i] : 0.0, sr += m_corr[i];
    const double mc = sc / n_pairs, mr = sr / n_pairs;
    /* the gap is "how much better clean is": higher-is-better metrics
     * gain, KL (a loss) falls from corrupted to clean */
    const double sign = kl ? -1.0 : 1.0, gap = sign * (mc - mr);
    double ss = 0.0;
    for (int i = 0; i < n_pairs; i++) {
        double d = sign * ((m_clean ? m_clean[i] : 0.0) - m_corr[i]) - gap;
        ss += d * d;
    }
    /* one pair: no spread to judge by; SE 0 leaves only the sign */
    const double se = n_pairs > 1 ? sqrt(ss / (n_pairs - 1) / n_pairs) : 0.0;
    char nums[160];
    if (kl)
        snprintf(nums, sizeof nums, "KL(clean || corrupted) = %.4g, SE %.2g over %d pair%s", gap,
                 se, n_pairs, n_pairs == 1 ? "" : "s");
    else
        snprintf(nums, sizeof nums,
                 "M_clean = %.4f, M_corr = %.4f, gap %.4g, SE %.2g over %d pair%s", mc, mr, gap, se,
                 n_pairs, n_pairs == 1 ? "" : "s");
    if (!isfinite(gap) || !isfinite(se))
        al_warnings_add(w,
                        "%s: the gap between the clean and corrupted runs is not finite (%s): "
                        "the normalised effects mean nothing",
                        name, nums);
    else if (kl && gap <= AL_GAP_N_SE * se)
        al_warnings_add(w,
                        "%s: the corrupted run barely changes the output (%s, within %g SE of "
                        "0): a KL-guided search finds every edge removable",
                        name, nums, AL_GAP_N_SE);
    else if (gap < -AL_GAP_N_SE * se) /* clearly the wrong way round */
        al_warnings_add(w,
                        "%s: the clean input scores worse than the corrupted one (%s): "
                        "normalised effects divide by this gap, so their signs are inverted",
                        name, nums);
    else if (gap <= AL_GAP_N_SE * se)
        al_warnings_add(w,
                        "%s: the clean and corrupted runs barely differ (%s, within %g SE of "
                        "0%s): normalised effects divide by this gap, so they are mostly noise",
                        name, nums, AL_GAP_N_SE, gap < 0 ? ", the clean one lower" : "");
}

int al_gap_check_items(al_warnings *w, const al_pairs *t, const char *metric, const double *v_clean,
                       const double *v_corr, al_err *e) {
    if (t->N < 1 || t->n_items < 1) return 0;
    double *pc = al_calloc(3 * (size_t)t->N, sizeof(double), e);
    if (!pc) return -1;
    double *pr = pc + t->N, *cnt = pr + t->N, sc = 0.0, sr = 0.0;
    for (int i = 0; i < t->n_items; i++) {
        int p = t->items[i].pair;
        if (v_clean) pc[p] += v_clean[i], sc += v_clean[i];
        pr[p] += v_corr[i], sr += v_corr[i];
        cnt[p]++;
    }
    /* M is a ratio of sums (Σ values / Σ items): linearised, pair p
     * stands for M + (S_p − M·n_p) / n̄, whose mean is M and whose spread
     * is M's standard error; with equal counts, the pair's own mean */
    const double ni = t->n_items, nbar = ni / t->N, mc = sc / ni, mr = sr / ni;
    for (int p = 0; p < t->N; p++) {
        pc[p] = mc + (pc[p] - mc * cnt[p]) / nbar;
        pr[p] = mr + (pr[p] - mr * cnt[p]) / nbar;
    }
    al_gap_check(w, metric, v_clean ? pc : NULL, pr, t->N);
    free(pc);
    return 0;
}

void al_effect_check(al_warnings *w, const char *what, const double *v, int n) {
    int out = 0, fin = 0;
    double worst = 0.0, far = 0.0;
    for (int i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        fin++;
        double d = v[i] < AL_EFFECT_LO   ? AL_EFFECT_LO - v[i]
                   : v[i] > AL_EFFECT_HI ? v[i] - AL_EFFECT_HI
                                         : 0.0;
        if (d > 0) {
            out++;
            if (d > far) far = d, worst = v[i];
        }
    }
    if (!out) return;
    if (fin == 1)
        al_warnings_add(w,
                        "%s %.4f lies outside [%g, %g]: it should lie near 0..1, so the gap it "
                        "divides by is small or the result overshoots; read it with care",
                        what, worst, AL_EFFECT_LO, AL_EFFECT_HI);
    else
        al_warnings_add(w,
                        "%s: %d of %d values lie outside [%g, %g] (the farthest %.4f): they "
                        "should lie near 0..1, so the gap they divide by is small or patches "
                        "overshoot; read them with care",
                        what, out, fin, AL_EFFECT_LO, AL_EFFECT_HI, worst);
}
