/* thresholds.h -- the named score thresholds, in one place (layer: analysis).
 *
 * `scores` names heads with them, `report` highlights and counts with
 * them, `pictures` draws them as reference lines, and SQL text is built
 * from them (AL_TH_STR), so a threshold can never be 0.4 in one place
 * and a literal 0.5 in another. docs/design.md defines each score. */
#ifndef ATTNLAB_THRESHOLDS_H
#define ATTNLAB_THRESHOLDS_H

/* attention share on the induction / previous-token target: a head above
 * it is called an induction / previous-token head */
#define AL_TH_INDUCTION 0.4
#define AL_TH_PREV_TOKEN 0.4
/* copying_eigen (and copying_top1) above this: the weights say "copies" */
#define AL_TH_COPY_EIGEN 0.5
/* nats: mean-ablating the head raises the loss at copy positions by more
 * than this: ablation says "copies" (also for copying_ablation_excess) */
#define AL_TH_COPY_ABLATION 0.01
/* share of the summed |Δloss| of the three path-expansion kinds (direct,
 * head, virtual; each removed at once): virtual terms whose |Δloss| is
 * below it are called negligible. A twentieth: the kinds' Δloss do not add up (the loss is not
 * linear in the logits), so only a share this small is clearly less than
 * the slack between them, rather than a smaller but real part */
#define AL_TH_VIRTUAL_SHARE 0.05

/* A threshold as a C string literal, for SQL and HTML text:
 * "induction > " AL_TH_STR(AL_TH_INDUCTION) is "induction > 0.4". */
#define AL_TH_STR(x) AL_TH_STR_(x)
#define AL_TH_STR_(x) #x

#endif
