/* test_stats.c -- the agreement measures of stats.h against hand values. */
#include <math.h>

#include "attnlab/stats.h"
#include "test.h"

TEST(stats_pearson) {
    double x[] = {1, 2, 3, 4}, y[] = {2, 4, 6, 8}, z[] = {1, 0, 1, 0};
    CHECK_NEAR(al_pearson(x, y, 4), 1.0, 1e-12);
    /* cov(x,z) = -0.5·... : x centred -1.5,-.5,.5,1.5; z centred .5,-.5,.5,-.5 → Σ = -1,
     * |x|² = 5, |z|² = 1 → r = -1/sqrt(5) */
    CHECK_NEAR(al_pearson(x, z, 4), -1.0 / sqrt(5.0), 1e-12);
    double c[] = {3, 3, 3, 3};
    CHECK(isnan(al_pearson(x, c, 4)));
    CHECK(isnan(al_pearson(x, y, 1)));
}

TEST(stats_topk_and_finite) {
    double x[] = {0.1, -5, 3, 0, 2, -1}, y[] = {9, 1, -3, 0, 0, 8};
    /* top-3 by |x|: 1, 2, 4; by |y|: 0, 5, 2 → {2} in both */
    CHECK(al_topk_overlap(x, y, 6, 3) == 1);
    CHECK(al_topk_overlap(x, x, 6, 3) == 3);
    CHECK(al_topk_overlap(x, y, 6, 10) == 6); /* k capped at n: everything */
    CHECK(al_topk_overlap(x, y, 6, 0) == 0);
    /* ties go to the lower index: |{1,1,1}| top-1 is index 0 in both */
    double t[] = {1, -1, 1};
    CHECK(al_topk_overlap(t, t, 3, 1) == 1);
    double a[] = {1, NAN, 3, INFINITY}, b[] = {4, 5, NAN, 6}, ao[4], bo[4];
    CHECK(al_stats_finite_pairs(a, b, 4, ao, bo) == 1);
    CHECK(ao[0] == 1 && bo[0] == 4);
}
