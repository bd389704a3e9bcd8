/* test_run_track.c -- `attnlab run --track TEXT`, the copying table of
 * the seed notes: for each occurrence of TEXT in the prompt, the pieces
 * it was cut into and each one's probability given its prefix. The
 * pieces and probabilities must be the very ones of the same run's token
 * table (another path through cmd_run.c), and every occurrence counted. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + strlen(needle), needle)) n++;
    return n;
}

TEST(run_track_pieces_are_the_token_table) {
    t_pbuf dir = t_pcopy("."), out = t_pcopy("out.json");
    t_tiny_model(dir.s, 1, 3);
    const char *prompt = "the cat sat on the mat and the cat ran";
    CHECK(t_sh("%s run --model %s/m1 --prompt '%s' --track cat --json > %s", t_bin(), dir.s, prompt,
               out.s) == 0);
    char *txt = t_slurp(out.s);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    CHECKF(j != NULL, "not JSON: %s", txt ? txt : "(none)");
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(j, "tokens");
    const cJSON *track = cJSON_GetObjectItemCaseSensitive(j, "track");
    CHECK(cJSON_IsArray(tokens) && cJSON_IsArray(track));
    CHECKF(cJSON_GetArraySize(track) == count(prompt, "cat"), "%d occurrences, want %d",
           cJSON_GetArraySize(track), count(prompt, "cat"));
    int n_pieces = 0;
    const cJSON *occ;
    cJSON_ArrayForEach(occ, track) {
        char text[256] = "";
        const cJSON *pc;
        int last = -1;
        cJSON_ArrayForEach(pc, occ) {
            int pos = (int)cJSON_GetObjectItemCaseSensitive(pc, "pos")->valuedouble;
            const cJSON *row = cJSON_GetArrayItem(tokens, pos);
            const char *tk = cJSON_GetObjectItemCaseSensitive(pc, "token")->valuestring;
            CHECK(pos > last && row != NULL);
            last = pos;
            if (!row) continue;
            CHECK(!strcmp(tk, cJSON_GetObjectItemCaseSensitive(row, "token")->valuestring));
            /* the table has no p for the first token; the track shows 0 */
            const cJSON *p_row = cJSON_GetObjectItemCaseSensitive(row, "p");
            double p = cJSON_GetObjectItemCaseSensitive(pc, "p")->valuedouble;
            CHECKF(p_row ? p == p_row->valuedouble : p == 0, "pos %d: p %g vs %g", pos, p,
                   p_row ? p_row->valuedouble : 0);
            CHECK(p >= 0 && p <= 1);
            strncat(text, tk, sizeof text - strlen(text) - 1);
            n_pieces++;
        }
        /* the pieces cover the occurrence (a space shows as U+2423) */
        CHECKF(strstr(text, "cat") != NULL, "pieces [%s]", text);
    }
    CHECK(n_pieces >= count(prompt, "cat"));
    cJSON_Delete(j);
    free(txt);

    /* the table as text: one line per occurrence, and a line when none */
    CHECK(t_sh("%s run --model %s/m1 --prompt '%s' --track cat > %s", t_bin(), dir.s, prompt,
               out.s) == 0);
    txt = t_slurp(out.s);
    CHECKF(txt && strstr(txt, "occurrence 1 of \"cat\":") &&
               strstr(txt, "occurrence 2 of \"cat\":") && !strstr(txt, "occurrence 3"),
           "%s", txt ? txt : "");
    free(txt);
    CHECK(t_sh("%s run --model %s/m1 --prompt '%s' --track dog > %s", t_bin(), dir.s, prompt,
               out.s) == 0);
    txt = t_slurp(out.s);
    CHECKF(txt && strstr(txt, "\"dog\" does not occur in the prompt"), "%s", txt ? txt : "");
    free(txt);
}
