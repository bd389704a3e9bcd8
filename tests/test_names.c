/* test_names.c -- the names table on real text: al_names_in_text puts the
 * name where it says, and `attnlab names` stores the probabilities a direct
 * forward pass gives. */
#include <stdlib.h>
#include <string.h>
#include "attnlab/checkpoint.h"
#include "attnlab/model.h"
#include "attnlab/namecopy.h"
#include "attnlab/names_text.h"
#include "attnlab/pairs.h"
#include "test.h"

static const char *STORY_A =
    " one day a little girl went to the park with her mom and they played on the swing "
    "all day until the sun went down";
static const char *STORY_B = " the dog ran to the big red house and ate a bone";

/* BOS + STORY_A + BOS + a 3-token document (too short) + BOS + STORY_B */
static int make_val(const al_tokenizer *tok, al_tokens *v, int **a, size_t *na, int **b,
                    size_t *nb) {
    al_err e;
    int *s;
    size_t ns;
    if (al_tok_encode(tok, (const unsigned char *)STORY_A, strlen(STORY_A), 0, a, na, &e) ||
        al_tok_encode(tok, (const unsigned char *)STORY_B, strlen(STORY_B), 0, b, nb, &e) ||
        al_tok_encode(tok, (const unsigned char *)" hi", 3, 0, &s, &ns, &e))
        return -1;
    int bos = al_tok_eot(tok);
    v->n = 3 + *na + ns + *nb;
    v->tok = calloc(v->n, sizeof *v->tok);
    size_t t = 0;
    v->tok[t++] = (uint16_t)bos;
    for (size_t i = 0; i < *na; i++) v->tok[t++] = (uint16_t)(*a)[i];
    v->tok[t++] = (uint16_t)bos;
    for (size_t i = 0; i < ns; i++) v->tok[t++] = (uint16_t)s[i];
    v->tok[t++] = (uint16_t)bos;
    for (size_t i = 0; i < *nb; i++) v->tok[t++] = (uint16_t)(*b)[i];
    free(s);
    return 0;
}

/* The story minus both name copies is the document, cut as documented. */
static void check_story(const al_name_story *s, const int *doc, size_t n, int bos, const int *piece,
                        int k) {
    CHECK(s->k == k);
    CHECK(memcmp(s->piece, piece, (size_t)k * sizeof(int)) == 0);
    CHECK(s->ids[0] == bos);
    CHECK(s->first > 1 && s->second >= s->first + k + 4);
    CHECK(memcmp(s->ids + s->first, piece, (size_t)k * sizeof(int)) == 0);
    CHECK(memcmp(s->ids + s->second, piece, (size_t)k * sizeof(int)) == 0);
    CHECK(s->len == (int)n + 1 + 2 * k);
    int t = 1;
    for (size_t i = 0; i < n && t < s->len; i++, t++) {
        if (t == s->first || t == s->second) t += k;
        CHECK(s->ids[t] == doc[i]);
    }
}

TEST(names_in_text_inserts_where_it_says) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 3);
    al_err e;
    al_tokenizer *tok;
    char p[1100];
    snprintf(p, sizeof p, "%s/tok.json", dir);
    CHECK_OK(al_tok_load(p, &tok, &e), &e);
    al_tokens v = {0};
    int *a, *b, piece[AL_NAME_MAX_PIECES];
    size_t na, nb, k;
    CHECK(make_val(tok, &v, &a, &na, &b, &nb) == 0);
    /* the stories are lower case, so the name is too */
    int *pc;
    CHECK_OK(al_tok_encode(tok, (const unsigned char *)" bamurik", 8, 0, &pc, &k, &e), &e);
    CHECK(k >= 2 && k <= AL_NAME_MAX_PIECES);
    memcpy(piece, pc, k * sizeof(int));
    free(pc);
    al_name_stories s;
    CHECK_OK(al_names_in_text(tok, &v, 5, "Bamurik", 1, 256, &s, &e), &e);
    CHECK(s.n == 2); /* the 3-token document is skipped */
    if (s.n == 2) {
        CHECK(strcmp(s.s[0].name, "bamurik") == 0);
        check_story(&s.s[0], a, na, al_tok_eot(tok), piece, (int)k);
        check_story(&s.s[1], b, nb, al_tok_eot(tok), piece, (int)k);
        /* each name begins a word: the token after each copy does too */
        size_t n1;
        const unsigned char *c = al_tok_bytes(tok, s.s[0].ids[s.s[0].first + (int)k], &n1);
        CHECK(c && c[0] == ' ');
    }
    al_name_stories_free(&s);
    /* invented names: deterministic, 2+ pieces, two copies */
    al_name_stories s1, s2;
    CHECK_OK(al_names_in_text(tok, &v, 5, NULL, 7, 256, &s1, &e), &e);
    CHECK_OK(al_names_in_text(tok, &v, 5, NULL, 7, 256, &s2, &e), &e);
    CHECK(s1.n == 2 && s2.n == 2 && strcmp(s1.s[0].name, s2.s[0].name) == 0);
    CHECK(s1.s[0].k >= 2);
    CHECK(memcmp(s1.s[0].ids + s1.s[0].first, s1.s[0].ids + s1.s[0].second,
                 (size_t)s1.s[0].k * sizeof(int)) == 0);
    al_name_stories_free(&s1);
    al_name_stories_free(&s2);
    /* a short n_ctx cuts the story, never the name */
    CHECK_OK(al_names_in_text(tok, &v, 1, "Bamurik", 1, 32, &s, &e), &e);
    CHECK(s.n == 1 && s.s[0].len <= 32 && s.s[0].second + (int)k <= s.s[0].len);
    al_name_stories_free(&s);
    /* refusals */
    CHECK(al_names_in_text(tok, &v, 0, NULL, 1, 256, &s, &e) == -1);
    CHECK(al_names_in_text(tok, &v, 1, "the", 1, 256, &s, &e) == -1 && strstr(e.msg, "tokens"));
    free(a);
    free(b);
    al_tokens_free(&v);
    al_tok_free(tok);
}

TEST(names_cli_matches_direct_forward) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 2, 5);
    const char *db = t_path("r.db");
    char val[1100], mdir[1100];
    snprintf(val, sizeof val, "%s/s.val.bin", dir);
    snprintf(mdir, sizeof mdir, "%s/m2", dir);
    CHECK(t_sh("%s names --model %s --db %s --data %s --stories 3 --name Bamurik", t_bin(), mdir,
               db, val) == 0);
    al_err e;
    al_model m;
    al_tokenizer *tok;
    CHECK_OK(al_ckpt_load(mdir, &m, &tok, &e), &e);
    al_tokens v;
    CHECK_OK(al_tokens_load(val, &v, &e), &e);
    al_name_stories s;
    CHECK_OK(al_names_in_text(tok, &v, 3, "Bamurik", 1, m.cfg.n_ctx, &s, &e), &e);
    /* the second piece at the second appearance, by hand */
    double want = 0;
    for (int i = 0; i < s.n; i++) {
        const al_name_story *st = &s.s[i];
        CHECK_OK(al_model_forward(&m, st->ids, NULL, 1, st->len, &e), &e);
        want += m.probs[(size_t)st->second * m.cfg.d_vocab + st->piece[1]];
    }
    want /= s.n;
    char *got = t_sql(db, "SELECT value FROM model_scores WHERE metric = 'names_second_p2'");
    CHECK(got && fabs(atof(got) - want) < 1e-6 * (1 + want));
    CHECK(t_sql_long(db, "SELECT value FROM model_scores WHERE metric = 'names_stories'") == s.n);
    free(got);
    al_name_stories_free(&s);
    al_tokens_free(&v);
    al_tok_free(tok);
    al_model_free(&m);
}

/* The names pair task on real text: each pair is an al_names_in_text
 * story cut after the second appearance's first piece; the corrupted run
 * differs only at the first appearance, in the second piece (value
 * variant: the first piece is kept) or in the first piece too (key
 * variant); lower-case stories get lower-case replacements; the item
 * reads the name's second piece against the replacement's. */
TEST(names_text_pair_task) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 1, 3);
    al_err e;
    al_tokenizer *tok;
    char p[1100];
    snprintf(p, sizeof p, "%s/tok.json", dir);
    CHECK_OK(al_tok_load(p, &tok, &e), &e);
    al_tokens v = {0};
    int *a, *b;
    size_t na, nb;
    CHECK(make_val(tok, &v, &a, &na, &b, &nb) == 0);
    al_name_stories s;
    CHECK_OK(al_names_in_text(tok, &v, 5, NULL, 7, 256, &s, &e), &e);
    for (int key = 0; key <= 1; key++) {
        al_pairs t;
        CHECK_OK(al_pairs_names_text(tok, &v, 5, 7, 256, key, 0, &t, &e), &e);
        CHECK(!strcmp(t.task, key ? "names-text-key" : "names-text"));
        CHECKF(t.N == s.n && t.n_items == t.N, "%d pairs of %d stories", t.N, s.n);
        for (int i = 0; i < t.N && i < s.n; i++) {
            const al_name_story *st = &s.s[i];
            const int *cl = t.clean + (size_t)i * t.T, *co = t.corr + (size_t)i * t.T;
            CHECK(t.len[i] == st->second + 1);
            CHECK(!memcmp(cl, st->ids, sizeof(int) * (size_t)(st->second + 1)));
            int outside = 0, lower_ok = 1;
            for (int j = 0; j < t.len[i]; j++)
                if (j < st->first || j >= st->first + st->k) outside += co[j] != cl[j];
            for (int j = st->first; j < st->first + st->k; j++) {
                size_t nbytes;
                const unsigned char *bt = al_tok_bytes(tok, co[j], &nbytes);
                for (size_t q = 0; bt && q < nbytes; q++)
                    lower_ok &= !(bt[q] >= 'A' && bt[q] <= 'Z');
            }
            CHECK(outside == 0 && lower_ok);
            CHECK(key ? co[st->first] != cl[st->first] : co[st->first] == cl[st->first]);
            CHECK(co[st->first + 1] != cl[st->first + 1]);
            const al_pair_item *it = &t.items[i];
            CHECK(it->pair == i && it->pos == st->second && it->answer == st->piece[1] &&
                  it->wrong == co[st->first + 1]);
        }
        al_pairs_free(&t);
    }
    al_name_stories_free(&s);
    free(a);
    free(b);
    al_tokens_free(&v);
    al_tok_free(tok);
}

/* `patch --task names|names-key --probe-tokens text` runs on held-out
 * text and stores the task's name; an id mask for names is refused. */
TEST(names_text_pair_task_cli) {
    const char *dir = t_tmpdir();
    t_tiny_model(dir, 2, 5);
    const char *db = t_path("r.db");
    char val[1100], mdir[1100];
    snprintf(val, sizeof val, "%s/s.val.bin", dir);
    snprintf(mdir, sizeof mdir, "%s/m2", dir);
    CHECK(t_sh("%s patch --model %s --db %s --task names --probe-tokens text:%s --n 3 > %s 2>&1",
               t_bin(), mdir, db, val, t_path("out.txt")) == 0);
    CHECK(t_sh("%s patch --model %s --db %s --task names-key --probe-tokens text:%s --n 3 "
               "> /dev/null 2>&1",
               t_bin(), mdir, db, val) == 0);
    CHECK_SQL(db, "SELECT task FROM patching_runs ORDER BY run_id", "names-text\nnames-text-key");
    CHECK(t_sh("%s patch --model %s --db %s --task names --probe-tokens seen 2> %s", t_bin(), mdir,
               db, t_path("err.txt")) == 2); /* a usage error */
    char *err = t_slurp(t_path("err.txt"));
    CHECKF(err && strstr(err, "is for the induction task"), "%s", err ? err : "");
    free(err);
    CHECK_SQL(db, "SELECT count(*) FROM runs", "2");
}
