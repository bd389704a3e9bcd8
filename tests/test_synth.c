/* test_synth.c -- the built-in story corpus (synth.c, `data synth`). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "attnlab/synth.h"

/* Common English words a careless name generator could hit, written here
 * independently of the generator's own lists. */
static const char *const ENGLISH[] = {
    "banana",   "tomato",   "potato",  "salami",  "kimono", "lemon",  "melon",  "robin",   "panel",
    "timid",    "limit",    "visit",   "venom",   "denim",  "rumor",  "humor",  "sonar",   "lunar",
    "solar",    "polar",    "bison",   "robot",   "pilot",  "radar",  "motel",  "hotel",   "camel",
    "mural",    "total",    "metal",   "medal",   "rival",  "vital",  "local",  "legal",   "lilac",
    "tulip",    "zero",     "hero",    "kilo",    "hello",  "yellow", "mama",   "papa",    "baby",
    "lady",     "many",     "money",   "honey",   "tiny",   "pony",   "bunny",  "kitten",  "sister",
    "mister",   "dinner",   "winter",  "summer",  "water",  "paper",  "tiger",  "monkey",  "donkey",
    "turkey",   "jelly",    "belly",   "happy",   "sunny",  "funny",  "silly",  "party",   "doctor",
    "sugar",    "river",    "never",   "ever",    "over",   "under",  "wonder", "thunder", "garden",
    "kitchen",  "chicken",  "market",  "basket",  "rocket", "pocket", "jacket", "button",  "mitten",
    "lemonade", "dinosaur", "balloon", "cookie",  "pizza",  "pasta",  "salad",  "music",   "magic",
    "tonic",    "comic",    "panic",   "relish",  "banish", "punish", "vanish", "seven",   "eleven",
    "heaven",   "haven",    "raven",   "woman",   "human",  "salmon", "cannon", "wagon",   "dragon",
    "lemur",    "tapir",    "vapor",   "manor",   "tenor",  "honor",  "color",  "valor",   "sailor",
    "tailor",   "jaguar",   "cougar",  "zebra",   "koala",  "llama",  "panda",  "cobra",   "sofa",
    "soda",     "tuna",     "pecan",   "begin",   "began",  "open",   "seven",  "token",   "spoken",
    "broken",   "woken",    "chosen",  "frozen",  "dozen",  "gallon", "talon",  "baron",   "moron",
    "heron",    "lotion",   "motion",  "nation",  "ration", "potion", "mango",  "tango",   "bingo",
    "lingo",    "domino",   "casino",  "volcano", "piano",  "radio",  "rodeo",  "video",   "studio",
    "patio",    "cameo",    "halo",    "solo",    "polo",   "memo",   "demo",   "judo",    "sumo",
    "taco",     "hippo",
};

static al_synth *new_gen(uint64_t seed, double rf) {
    al_synth_opts o;
    al_synth_defaults(&o);
    o.seed = seed;
    o.repeat_fraction = rf;
    al_synth *s = NULL;
    al_err e;
    CHECK_OK(al_synth_new(&s, &o, &e), &e);
    return s;
}

/* Whole-word occurrences of w in text (bounded by non-letters). */
static int count_word(const char *text, const char *w) {
    int c = 0;
    size_t n = strlen(w);
    for (const char *p = strstr(text, w); p; p = strstr(p + 1, w)) {
        int left = p == text || !isalpha((unsigned char)p[-1]);
        int right = !isalpha((unsigned char)p[n]);
        c += left && right;
    }
    return c;
}

TEST(synth_names_recur) {
    al_synth *s = new_gen(11, 0.1);
    al_err e;
    int stories = 0;
    for (int d = 0; d < 800; d++) {
        const char *t;
        size_t n;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &n, &info, &e), &e);
        CHECKF(strlen(t) == n, "doc %d: length %zu vs strlen %zu", d, n, strlen(t));
        CHECKF(!memchr(t, '\n', n), "doc %d has a newline", d);
        if (info.kind != AL_SYNTH_STORY) continue;
        stories++;
        CHECKF(info.n_names >= 1 && info.n_names <= 3, "doc %d: %d names", d, info.n_names);
        for (int k = 0; k < info.n_names; k++) {
            int c = count_word(t, info.names[k]);
            CHECKF(c >= 3, "doc %d: %s appears %d times", d, info.names[k], c);
            CHECKF(c == info.name_uses[k], "doc %d: %s counted %d, generator says %d", d,
                   info.names[k], c, info.name_uses[k]);
            for (int j = 0; j < k; j++)
                CHECKF(strcmp(info.names[j], info.names[k]) != 0, "doc %d: name twice", d);
        }
    }
    CHECKF(stories > 600 && stories < 800, "%d stories of 800 at repeat fraction 0.1", stories);
    al_synth_free(s);
}

static int in_list(const char *low, const char *const *list, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(low, list[i]) == 0) return 1;
    return 0;
}

TEST(synth_names_not_words) {
    al_synth *s = new_gen(12, 0.0);
    al_err e;
    /* the avoid list catches dictionary words the grammar can spell */
    const char *spellable[] = {"banana", "Lemon", "kimono", "total", "robin", "zero", "sonar"};
    for (int i = 0; i < 7; i++) CHECKF(al_synth_is_word(s, spellable[i]), "%s", spellable[i]);
    CHECK(al_synth_is_word(s, "the") && al_synth_is_word(s, "ball"));
    CHECK(!al_synth_is_word(s, "Seoyeon") && !al_synth_is_word(s, "Bamurik"));
    size_t nw = al_synth_n_words(s);
    CHECKF(nw >= 300, "story vocabulary %zu words", nw);
    int n_eng = (int)(sizeof ENGLISH / sizeof ENGLISH[0]);
    for (int d = 0; d < 1500; d++) {
        const char *t;
        size_t n;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &n, &info, &e), &e);
        for (int k = 0; k < info.n_names; k++) {
            const char *nm = info.names[k];
            char low[AL_SYNTH_NAME_MAX];
            size_t L = strlen(nm);
            CHECKF(L >= 4 && L <= 12 && isupper((unsigned char)nm[0]), "name '%s'", nm);
            for (size_t i = 0; i <= L; i++) low[i] = (char)tolower((unsigned char)nm[i]);
            for (size_t i = 1; i < L; i++) CHECKF(islower((unsigned char)nm[i]), "'%s'", nm);
            CHECKF(!in_list(low, ENGLISH, n_eng), "name %s is an English word", nm);
            CHECKF(!al_synth_is_word(s, nm), "name %s is in the generator's lexicon", nm);
            for (size_t i = 0; i < nw; i++) /* linear scan: independent of is_word */
                CHECKF(strcmp(low, al_synth_word(s, i)) != 0, "name %s is a story word", nm);
        }
        /* every other word of the story comes from the vocabulary */
        for (const char *p = t; *p;) {
            if (!isalpha((unsigned char)*p)) {
                p++;
                continue;
            }
            char w[64];
            size_t k = 0;
            while (isalpha((unsigned char)*p)) {
                if (k < 63) w[k++] = *p;
                p++;
            }
            w[k] = 0;
            int is_name = 0;
            for (int j = 0; j < info.n_names; j++) is_name |= strcmp(w, info.names[j]) == 0;
            CHECKF(is_name || al_synth_is_word(s, w), "doc %d: stray word '%s'", d, w);
        }
    }
    al_synth_free(s);
}

static int cmp_s(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

TEST(synth_names_unique) {
    al_synth *s = new_gen(13, 0.1);
    al_err e;
    enum { DOCS = 4000 };
    char(*all)[AL_SYNTH_NAME_MAX] = calloc(DOCS * 3, AL_SYNTH_NAME_MAX);
    int n = 0;
    for (int d = 0; d < DOCS; d++) {
        const char *t;
        size_t len;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &len, &info, &e), &e);
        for (int k = 0; k < info.n_names; k++) memcpy(all[n++], info.names[k], AL_SYNTH_NAME_MAX);
    }
    qsort(all, (size_t)n, AL_SYNTH_NAME_MAX, cmp_s);
    int dups = 0;
    for (int i = 1; i < n; i++) dups += strcmp(all[i - 1], all[i]) == 0;
    CHECKF(dups == 0, "%d repeated names among %d", dups, n);
    CHECKF(n > 5000, "only %d names in %d docs", n, DOCS);
    free(all);
    al_synth_free(s);
}

/* Can w (lower case) be cut into inventory syllables? Records one cut,
 * longest syllables first. */
static int segment(al_synth *s, const char *w, int *cut, int *ncut) {
    size_t L = strlen(w);
    if (L == 0) return 1;
    for (size_t len = L < 6 ? L : 6; len >= 1; len--)
        for (size_t i = 0; i < al_synth_n_syllables(s); i++) {
            const char *y = al_synth_syllable(s, i);
            if (strlen(y) == len && strncmp(w, y, len) == 0) {
                cut[*ncut] = (int)i;
                (*ncut)++;
                if (segment(s, w + len, cut, ncut)) return 1;
                (*ncut)--;
            }
        }
    return 0;
}

TEST(synth_syllable_inventory) {
    al_synth *s = new_gen(14, 0.0);
    al_err e;
    size_t n = al_synth_n_syllables(s);
    char(*syl)[8] = calloc(n, 8);
    for (size_t i = 0; i < n; i++) {
        const char *y = al_synth_syllable(s, i);
        CHECKF(strlen(y) >= 1 && strlen(y) <= 6, "syllable '%s'", y);
        CHECKF(strpbrk(y, "aeiou") != NULL, "syllable '%s' has no vowel", y);
        snprintf(syl[i], 8, "%s", y);
    }
    qsort(syl, n, 8, cmp_s);
    size_t distinct = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) distinct += strcmp(syl[i - 1], syl[i]) != 0;
    CHECKF(distinct >= 300, "%zu distinct syllables", distinct);
    CHECKF(distinct == n, "%zu syllables, %zu distinct", n, distinct);
    /* names really use that inventory, and widely */
    char *used = calloc(n, 1);
    int n_used = 0, names = 0;
    for (int d = 0; d < 2000; d++) {
        const char *t;
        size_t len;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &len, &info, &e), &e);
        for (int k = 0; k < info.n_names; k++) {
            char low[AL_SYNTH_NAME_MAX];
            for (size_t i = 0; i < sizeof low; i++)
                low[i] = (char)tolower((unsigned char)info.names[k][i]);
            int cut[16], nc = 0;
            CHECKF(segment(s, low, cut, &nc), "%s is not spelled from syllables", low);
            CHECKF(nc >= 2 && nc <= 6, "%s: %d syllables", low, nc);
            for (int i = 0; i < nc; i++) n_used += !used[cut[i]], used[cut[i]] = 1;
            names++;
        }
    }
    CHECKF(n_used >= 300, "%d distinct syllables in %d names", n_used, names);
    free(used);
    free(syl);
    al_synth_free(s);
}

static char *write_corpus(const char *name, uint64_t seed, double rf, long docs) {
    al_synth_opts o;
    al_synth_defaults(&o);
    o.seed = seed;
    o.repeat_fraction = rf;
    o.n_docs = docs;
    al_err e;
    size_t bytes = 0;
    CHECK_OK(al_synth_write(t_path(name), &o, 0, &bytes, &e), &e);
    char *t = t_slurp(t_path(name));
    CHECK(t != NULL && strlen(t) == bytes);
    return t;
}

TEST(synth_deterministic) {
    char *a = write_corpus("a.txt", 5, 0.1, 300);
    char *b = write_corpus("b.txt", 5, 0.1, 300);
    char *c = write_corpus("c.txt", 6, 0.1, 300);
    CHECK(a && b && c);
    if (!a || !b || !c) return;
    CHECK(strcmp(a, b) == 0);
    CHECK(strcmp(a, c) != 0);
    /* different seeds differ from the first story on */
    CHECK(strncmp(a, c, 40) != 0);
    /* format: 300 documents, one line each, separated by one blank line */
    size_t n = strlen(a);
    int blanks = 0, lines = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] != '\n') continue;
        lines++;
        if (i + 1 < n && a[i + 1] == '\n') blanks++;
        CHECK(!(i + 2 < n && a[i + 1] == '\n' && a[i + 2] == '\n'));
    }
    CHECKF(blanks == 299, "%d blank lines", blanks);
    CHECKF(lines == 299 * 2 + 1, "%d newlines", lines);
    CHECK(n > 0 && a[n - 1] == '\n' && a[n - 2] != '\n');
    free(a);
    free(b);
    free(c);
}

/* The document's words are k copies of one span of lo..hi pieces. */
static int repeated_span_in(const char *t, int lo, int hi, int *k_out, int *pieces_out) {
    char *copy = strdup(t), *save = NULL;
    char *w[400];
    int n = 0;
    for (char *p = strtok_r(copy, " ", &save); p && n < 400; p = strtok_r(NULL, " ", &save))
        w[n++] = p;
    int found = 0;
    for (int k = 3; k >= 2 && !found; k--) {
        if (n % k) continue;
        int m = n / k, same = 1;
        for (int i = m; i < n && same; i++) same = strcmp(w[i], w[i % m]) == 0;
        if (same && m >= lo && m <= hi) found = 1, *k_out = k, *pieces_out = m;
    }
    free(copy);
    return found;
}

static int repeated_span(const char *t, int *k_out, int *pieces_out) {
    return repeated_span_in(t, 20, 60, k_out, pieces_out);
}

/* --span-min/--span-max bound the span read back from the text; the
 * defaults draw what the generator always drew (synth_deterministic and
 * the demo's corpus hash hold them), and bad bounds are refused. */
TEST(synth_span_bounds) {
    al_err e;
    al_synth_opts o;
    al_synth_defaults(&o);
    CHECK(o.span_min == 20 && o.span_max == 60);
    o.seed = 21;
    o.repeat_fraction = 1;
    o.span_min = 6;
    o.span_max = 9;
    al_synth *s = NULL;
    CHECK_OK(al_synth_new(&s, &o, &e), &e);
    int seen[10] = {0};
    for (int d = 0; s && d < 400; d++) {
        const char *t;
        size_t n;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &n, &info, &e), &e);
        int k = 0, m = 0;
        CHECKF(repeated_span_in(t, 6, 9, &k, &m) && m == info.span_pieces, "doc %d: %.80s", d, t);
        if (m >= 6 && m <= 9) seen[m]++;
    }
    al_synth_free(s);
    for (int m = 6; m <= 9; m++) CHECKF(seen[m] > 50, "span %d drawn %d times of 400", m, seen[m]);
    o.span_max = 5;
    CHECK(al_synth_check(&o, &e) == -1 && strstr(e.msg, "--span-max"));
    o.span_min = 0;
    CHECK(al_synth_check(&o, &e) == -1 && strstr(e.msg, "--span-min"));
}

TEST(synth_repeat_documents) {
    al_err e;
    al_synth *s = new_gen(15, 1.0);
    for (int d = 0; d < 300; d++) {
        const char *t;
        size_t n;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &n, &info, &e), &e);
        CHECK(info.kind == AL_SYNTH_REPEAT);
        int k = 0, m = 0;
        CHECKF(repeated_span(t, &k, &m), "doc %d is not a repeated span: %.80s", d, t);
        CHECKF(k == info.repeats && m == info.span_pieces, "doc %d: k %d/%d m %d/%d", d, k,
               info.repeats, m, info.span_pieces);
        CHECK(n == (size_t)k * info.span_bytes + (size_t)(k - 1));
    }
    al_synth_free(s);
    /* the share of repeat documents follows --repeat-fraction: 4000 draws at
     * 0.25 give 1000 +- 27 (sd), so +- 120 is > 4 sd */
    s = new_gen(16, 0.25);
    int rep = 0, k2 = 0, k3 = 0;
    for (int d = 0; d < 4000; d++) {
        const char *t;
        size_t n;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &n, &info, &e), &e);
        rep += info.kind == AL_SYNTH_REPEAT;
        k2 += info.kind == AL_SYNTH_REPEAT && info.repeats == 2;
        k3 += info.kind == AL_SYNTH_REPEAT && info.repeats == 3;
    }
    CHECKF(rep > 880 && rep < 1120, "%d repeat docs of 4000 at 0.25", rep);
    CHECKF(k2 > 300 && k3 > 300, "2 copies %d, 3 copies %d", k2, k3);
    al_synth_free(s);
    s = new_gen(17, 0.0);
    for (int d = 0; d < 500; d++) {
        const char *t;
        size_t n;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &n, &info, &e), &e);
        CHECK(info.kind == AL_SYNTH_STORY);
    }
    al_synth_free(s);
}

TEST(synth_story_shape) {
    al_err e;
    al_synth *s = new_gen(18, 0.0);
    int quotes = 0, an_ok = 1, cap_ok = 1;
    for (int d = 0; d < 500; d++) {
        const char *t;
        size_t n;
        al_synth_doc info;
        CHECK_OK(al_synth_next(s, &t, &n, &info, &e), &e);
        quotes += strchr(t, '"') != NULL;
        CHECKF(!strchr(t, '{') && !strchr(t, '}') && !strchr(t, '\x01'), "slot left: %s", t);
        CHECKF(n > 200 && n < 3000, "doc %d: %zu bytes", d, n);
        /* "a" before a vowel-initial word is "an", and sentences start upper case */
        for (const char *p = t; (p = strstr(p, " a ")); p++)
            if (strchr("aeiou", p[3])) an_ok = 0;
        for (const char *p = t; (p = strstr(p, ". ")); p++)
            if (islower((unsigned char)p[2])) cap_ok = 0;
        CHECK(isupper((unsigned char)t[0]));
        CHECK(n && strchr(".!?\"", t[n - 1]));
    }
    CHECK(an_ok);
    CHECK(cap_ok);
    CHECKF(quotes > 250, "only %d of 500 stories have dialogue", quotes);
    al_synth_free(s);
}

TEST(synth_cli) {
    const char *out = t_path("cli.txt");
    CHECK(t_sh("%s data synth --out %s --stories 200 --seed 9 --repeat-fraction 0.2 2>%s", t_bin(),
               out, t_path("err")) == 0);
    char *cli = t_slurp(out);
    char *lib = write_corpus("lib.txt", 9, 0.2, 200);
    CHECK(cli && lib && strcmp(cli, lib) == 0);
    free(cli);
    free(lib);
    /* bad options: usage error, no file */
    CHECK(t_sh("%s data synth --out %s --repeat-fraction 2 2>%s", t_bin(), t_path("x.txt"),
               t_path("err")) == 2);
    char *err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "--repeat-fraction"));
    free(err);
    CHECK(t_sh("%s data synth --out %s --stories 0 2>/dev/null", t_bin(), t_path("x.txt")) == 2);
    CHECK(t_sh("%s data synth --stories 5 2>/dev/null", t_bin()) == 2);
    CHECK(t_sh("test -e %s", t_path("x.txt")) != 0);
    /* unwritable path: exit 1, message names it */
    CHECK(t_sh("%s data synth --out %s/no/such/dir/x.txt 2>%s", t_bin(), t_tmpdir(),
               t_path("err")) == 1);
    err = t_slurp(t_path("err"));
    CHECK(err && strstr(err, "no/such/dir"));
    free(err);
    CHECK(t_sh("%s help data synth >/dev/null", t_bin()) == 0);
    /* --names-out: line i is document i's index and its names, each of
     * which the document holds; repeated-span documents list none */
    CHECK(t_sh("%s data synth --out %s --stories 30 --seed 4 --names-out %s 2>/dev/null", t_bin(),
               t_path("n.txt"), t_path("names.tsv")) == 0);
    char *text = t_slurp(t_path("n.txt")), *names = t_slurp(t_path("names.tsv"));
    CHECK(text && names);
    int line = 0, n_named = 0;
    for (char *d = text, *l = names; d && l && *l; line++) {
        char *dend = strstr(d, "\n\n"), *lend = strchr(l, '\n');
        if (dend) *dend = 0;
        if (lend) *lend = 0;
        CHECKF(atoi(l) == line, "names line %d: [%s]", line, l);
        for (char *t = strchr(l, '\t'); t; t = strchr(t + 1, '\t')) {
            char nm[64];
            snprintf(nm, sizeof nm, "%.*s", (int)strcspn(t + 1, "\t"), t + 1);
            CHECKF(strstr(d, nm) != NULL, "document %d lacks its name %s", line, nm);
            n_named++;
        }
        d = dend ? dend + 2 : NULL;
        l = lend ? lend + 1 : NULL;
    }
    CHECKF(line == 30 && n_named >= 27, "%d lines, %d names", line, n_named);
    free(text);
    free(names);
}
