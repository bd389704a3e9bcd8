/* namecopy.h -- the seed notes' copying table (an invented name's pieces
 * at its first and second appearance) for a model, on stories from
 * names_text.h. Options in, results out; no database, no printing. */
#ifndef ATTNLAB_NAMECOPY_H
#define ATTNLAB_NAMECOPY_H

#include "attnlab/model.h"
#include "attnlab/names_text.h"
#include "attnlab/util.h"

typedef struct al_namecopy_result {
    int n; /* stories */
    int max_k; /* most pieces of any story's name */
    /* per piece j (0-based): mean p(piece j | everything before it) at the
     * name's first and second appearance over the stories whose name has
     * more than j pieces (count[j] of them) */
    double p_first[AL_NAME_MAX_PIECES], p_second[AL_NAME_MAX_PIECES];
    int count[AL_NAME_MAX_PIECES];
    /* the same averaged over every piece after the first (the ones a
     * copy of the first appearance can predict once the name has begun) */
    double rest_first, rest_second;
} al_namecopy_result;

/* Run m on each story (one sequence at a time; len <= m's n_ctx) and
 * average the probabilities. 0, or -1 with e (a story longer than
 * n_ctx, an id out of range, a forward failure); r zeroed on error. */
int al_namecopy_run(al_model *m, const al_name_stories *s, al_namecopy_result *r, al_err *e);

#endif
