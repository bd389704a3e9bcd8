/* synth.c -- the built-in story corpus: simple stories with invented names.
 *
 * Why invented names: a name like "Seoyeon" is split by BPE into several
 * pieces (␣S e oy e on). On its second appearance in a story, predicting
 * the second and later pieces needs copying from context: "the token after
 * the earlier e was oy" is an induction-head job (a previous-token head in
 * one layer, a head in the next that attends to the token after the
 * earlier copy). With a small syllable set a model does not need that: it
 * memorises "piece X seen earlier -> X" as skip-trigrams and reaches high
 * copying accuracy with no induction head at all (docs/design.md §3 measured this
 * with ~50 syllables). So names are spelled from 1,680 syllables (20
 * onsets x 10 vowels x 8 codas, plus vowel-initial first syllables), are
 * new in every story, and recur >= 3 times. With a 2048-token BPE trained
 * on this corpus a name is 3.7 pieces on average.
 *
 * Repeated-span documents (--repeat-fraction) reward induction directly.
 * Everything is drawn from one al_rng stream, so the output is a pure
 * function of the options. */
#include "attnlab/synth.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "attnlab/buf.h"

extern const char al_synth_avoid_words[]; /* synth_avoid.c */

/* ---- name grammar (keep in sync with scripts/gen_synth_avoid.py) ---- */
static const char *const ONSETS[] = {"b", "d", "g", "h", "j", "k", "l", "m",  "n",  "p",
                                     "r", "s", "t", "v", "w", "y", "z", "ch", "sh", "ts"};
static const char *const VOWELS[] = {"a", "e", "i", "o", "u", "ae", "eo", "ou", "ai", "ei"};
static const char *const CODAS[] = {"", "n", "m", "r", "l", "k", "s", "ng"};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define NAME_MIN_LETTERS 4
#define NAME_MAX_LETTERS 12 /* < AL_SYNTH_NAME_MAX */

/* ---- story lexicon (common words; fixed per story unless noted) ---- */
typedef struct {
    const char *word;
    int sex; /* 0 she, 1 he, 2 either */
} kind_t;
static const kind_t KINDS[] = {
    {"girl", 0},  {"boy", 1},    {"girl", 0},     {"boy", 1},      {"cat", 2},   {"dog", 2},
    {"bunny", 2}, {"bird", 2},   {"bear", 2},     {"fox", 2},      {"frog", 2},  {"mouse", 2},
    {"duck", 2},  {"puppy", 2},  {"kitten", 2},   {"lion", 2},     {"owl", 2},   {"turtle", 2},
    {"pig", 2},   {"monkey", 2}, {"squirrel", 2}, {"elephant", 2}, {"tiger", 2}, {"deer", 2},
};
static const char *const OBJECTS[] = {
    "ball",    "kite",    "box",      "hat",    "book",       "toy car", "doll",    "boat",
    "cup",     "drum",    "shell",    "stone",  "flower",     "balloon", "blanket", "key",
    "map",     "bell",    "bike",     "crayon", "teddy bear", "train",   "robot",   "basket",
    "spoon",   "sock",    "ring",     "star",   "leaf",       "rope",    "bucket",  "shovel",
    "jar",     "feather", "umbrella", "lamp",   "clock",      "wagon",   "puzzle",  "scarf",
    "whistle", "truck",   "necklace", "pillow", "brush",      "coin",    "button",  "ribbon",
    "rock",    "stick",   "sled",     "card",   "plane",      "pot",
};
static const char *const PLACES[] = {
    "park",       "garden",  "forest",     "beach",   "house", "school", "farm",
    "pond",       "river",   "hill",       "kitchen", "yard",  "lake",   "zoo",
    "shop",       "library", "playground", "field",   "cave",  "castle", "meadow",
    "town",       "village", "bakery",     "barn",    "woods", "market", "street",
    "tree house", "jungle",  "island",     "valley",  "tent",  "room",
};
static const char *const ADJS[] = {
    "big",    "small",   "little", "tiny",      "soft",   "old",    "new",     "shiny",
    "pretty", "funny",   "warm",   "cold",      "bright", "fast",   "slow",    "loud",
    "quiet",  "round",   "tall",   "long",      "heavy",  "fluffy", "sparkly", "special",
    "silly",  "strange", "nice",   "beautiful", "clean",  "dirty",  "smooth",  "wet",
    "dry",    "happy",   "lucky",  "magic",     "huge",   "fancy",
};
static const char *const PLACE_ADJS[] = {
    "big",  "small",  "quiet",     "pretty",   "sunny", "busy",  "warm",
    "cold", "nice",   "beautiful", "green",    "clean", "fun",   "noisy",
    "dark", "bright", "lovely",    "peaceful", "wide",  "happy",
};
static const char *const CHAR_ADJS[] = {
    "little",   "kind",  "small",  "happy",  "brave", "shy",      "silly", "curious", "big",
    "friendly", "young", "clever", "gentle", "funny", "cheerful", "sweet", "smart",   "playful",
};
static const char *const COLORS[] = {
    "red",    "blue",  "green", "yellow", "pink", "purple",
    "orange", "white", "black", "brown",  "gold", "gray",
};
static const char *const FEELS[] = {
    "happy",   "sad",    "scared",   "excited", "angry",  "proud", "tired",    "surprised",
    "worried", "calm",   "curious",  "shy",     "lonely", "glad",  "upset",    "grumpy",
    "sleepy",  "hungry", "thankful", "nervous", "brave",  "silly", "cheerful", "bored",
};
static const char *const FOODS[] = {
    "cake",   "cookie", "apple",    "banana",  "bread",   "soup",    "pie",  "candy",
    "carrot", "cheese", "sandwich", "pancake", "cupcake", "muffin",  "pear", "plum",
    "peach",  "orange", "corn",     "egg",     "pizza",   "cracker",
};
/* Plural by adding "s". */
static const char *const ANIMALS[] = {
    "bird",  "frog",      "duck",     "cow",    "bee",   "ant", "worm", "bug",
    "snail", "rabbit",    "squirrel", "horse",  "goat",  "pig", "owl",  "crab",
    "chick", "butterfly", "ladybug",  "kitten", "puppy", "hen", "lamb", "beetle",
};
static const char *const VERBS[] = {
    /* intransitive, past */
    "played",      "ran",     "jumped",   "danced",        "sang",
    "laughed",     "smiled",  "clapped",  "giggled",       "hopped",
    "skipped",     "rested",  "waited",   "cheered",       "jumped up and down",
    "spun around", "shouted", "sat down", "looked around", "walked away",
};
static const char *const TVERBS[] = {
    /* transitive, past */
    "found",     "picked up",   "held",   "hugged",          "cleaned",
    "carried",   "dropped",     "hid",    "washed",          "threw",
    "caught",    "lost",        "shared", "fixed",           "painted",
    "looked at", "played with", "kissed", "showed everyone",
};
static const char *const PEOPLE[] = {
    "mom", "dad", "grandma", "grandpa", "teacher", "sister", "brother", "aunt", "uncle", "friend",
};
static const char *const TIMES[] = {
    "One day",       "One sunny morning", "Later that day", "After lunch", "In the evening",
    "The next day",  "Suddenly",          "Soon",           "Then",        "After a while",
    "One rainy day", "That afternoon",    "Every morning",  "At night",
};
static const char *const SAIDS[] = {
    "said", "shouted", "whispered", "cried", "called", "yelled", "sang",
};
static const char *const PRONOUNS[] = {"he", "she", "his", "her", "him"};
static const char *const NUMS[] = {
    "two", "three", "four", "five", "six", "many", "some",
};

/* ---- templates ----
 * {A} {B} {C}: names; {X}: the name a top-up sentence is about.
 * {he} {He} {his} {His} {him}: A's pronouns; {bhe} {bhis} {bhim}: B's.
 * {kindA} {kindB} {kindC}; fixed per story: {obj} {obj2} {objadj}
 * {place} {place2} {animal} {animals} {food} {person}; fresh each use:
 * {adj} (things) {padj} (places) {cadj} (characters) {color} {feel} {verb}
 * {tverb} {time} {said} {num}.
 * {a} is "a" or "an", chosen from the next word. */
static const char *const OPENINGS[] = {
    "Once upon a time, there was {a} {cadj} {kindA} named {A}.",
    "There once was {a} {kindA} called {A}.",
    "{A} was {a} {cadj} {kindA} who lived near the {place}.",
    "{time}, {a} little {kindA} named {A} went to the {place}.",
    "Long ago, in a small village, lived {a} {kindA} named {A}.",
    "{A} was {a} {kindA}. {He} loved {his} {objadj} {obj} very much.",
    "Once there was {a} {feel} {kindA}. {His} name was {A}.",
    "{A} the {kindA} had {a} {objadj} {obj}.",
};
static const char *const INTRO_B[] = {
    "{A} had a friend named {B}. {B} was {a} {kindB}.",
    "{A} had a best friend, {a} {kindB} named {B}.",
    "{time}, {A} met {a} {cadj} {kindB}. The {kindB} said, \"Hi, I am {B}!\"",
    "{B} was {a} {kindB} who lived next to {A}.",
    "{A} liked to play with {B}, {a} {cadj} {kindB}.",
};
static const char *const INTRO_C[] = {
    "{C} was {a} {kindC} who lived by the {place2}.",
    "Soon, {a} {kindC} named {C} came to play too.",
    "{A} and {B} had another friend, {a} {kindC} called {C}.",
};
static const char *const BODY[] = {
    /* A */
    "{A} {verb} in the {place}.",
    "{time}, {A} went to the {place} with {his} {obj}.",
    "{A} {tverb} the {objadj} {obj}.",
    "\"I love my {obj}!\" {said} {A}.",
    "{A} felt {feel} and {verb}.",
    "{A} looked at the {obj} and smiled.",
    "{He} saw {a} {cadj} {animal} near the {place}.",
    "{A} wanted to play with the {obj} all day.",
    "The {obj} was very {objadj}.",
    "{A} asked {his} {person}, \"Can I take my {obj} to the {place}?\"",
    "{His} {person} said, \"Yes, {A}, but be careful.\"",
    "{A} ate {a} {food} under a big tree.",
    "The sun was warm, and {A} was very {feel}.",
    "{time}, the {obj} fell into the {place2}.",
    "{A} looked for the {obj} everywhere.",
    "\"Where is my {obj}?\" {A} asked.",
    "{A} found the {obj} under {a} {adj} rock.",
    "{A} ran to the {place} as fast as {he} could.",
    "At the {place}, {A} saw {num} {animals}.",
    "{A} did not want to lose the {obj}.",
    "{A} held the {obj} and said, \"You are my best friend.\"",
    "It started to rain, so {A} ran home from the {place}.",
    "{A} was {feel} because the {obj} was gone.",
    "{A} sang a happy song in the {place}.",
    "{A} put the {obj} in {his} bag and went to the {place2}.",
    "Every day, {A} played at the {place}.",
    "{A} liked the {place} because it was {padj} and {padj}.",
    "The {animal} looked at {A} and {verb}.",
    "{A} drew a picture of the {obj} with {color} crayons.",
    "{A} gave the {animal} some {food}.",
    "\"Thank you, {A}!\" said the {animal}.",
    "{A} wondered what the {animal} wanted.",
    "Then {A} had an idea.",
    "{A} took the {obj} and went back to the {place}.",
    "{A} was tired, so {he} sat down in the {place}.",
    "{A} cleaned the {obj} until it was shiny.",
    "\"This is the best day ever!\" {said} {A}.",
    "{A} waved at the {animal} and smiled.",
    "{A} told {his} {person} about the {obj}.",
    "{His} {person} gave {A} {a} {food}.",
    "\"Look, {a} {animal}!\" {said} {A}.",
    "{A} was {feel}, but {he} did not cry.",
    "The {place} was {padj}, and {A} liked it there.",
    /* A and B */
    "{A} and {B} played with the {obj} in the {place}.",
    "{B} wanted the {obj} too.",
    "\"Can I play with your {obj}, {A}?\" asked {B}.",
    "{A} said, \"Yes, {B}, we can share it.\"",
    "{A} and {B} went to the {place2} together.",
    "{B} was {feel}, so {A} gave {bhim} a hug.",
    "{B} found {a} {adj} {obj2} in the {place}.",
    "{A} showed {B} the {objadj} {obj}.",
    "{B} laughed and said, \"You are funny, {A}!\"",
    "{A} and {B} ate {food} and talked about the {obj}.",
    "{B} helped {A} look for the {obj}.",
    "\"Let's go to the {place}, {B}!\" said {A}.",
    "{B} and {A} ran and jumped until the sun went down.",
    "{A} missed {B} when {bhe} went home.",
    "{B} was sad because {bhis} {obj2} was broken.",
    "{A} helped {B} fix the {obj2}.",
    "{B} smiled at {A}. \"Thank you,\" {bhe} said.",
    "{A} and {B} became good friends.",
    "\"Do you want to see my {obj}, {B}?\" asked {A}.",
    /* A, B and C */
    "{C} came to the {place} and saw {A} and {B}.",
    "\"Can I play too?\" asked {C}.",
    "{A}, {B} and {C} played with the {obj} together.",
    "{C} brought {a} {obj2} to share with {A}.",
    "{B} and {C} hid behind a tree, and {A} looked for them.",
    "{C} told {A} a funny story about {a} {animal}.",
};
/* Each mentions {X} exactly once: used to make every name recur. */
static const char *const TOPUP[] = {
    "{X} smiled.",
    "{X} {verb} in the {place}.",
    "\"I like the {place},\" said {X}.",
    "{X} looked at the {obj} again.",
    "{X} was very {feel}.",
    "\"Look at the {animal}!\" {said} {X}.",
    "{X} wanted to see the {place2}.",
    "Then {X} {verb}.",
};
static const char *const CLOSERS[] = {
    "The end.",
    "From that day on, {A} and {B} were best friends.",
    "{A} went home, happy and tired.",
    "That night, {A} dreamed about the {obj}.",
    "{A} loved the {place}, and {he} came back every day.",
    "And {A} never lost {his} {obj} again.",
    "{A} smiled. It was a good day.",
    "{A} and {B} played at the {place} every day after that.",
    "{A} learned that sharing is good.",
    "Now {A} and {B} and {C} play together every day.",
};

/* ---- the generator ---- */
typedef struct {
    char name[AL_SYNTH_NAME_MAX];
    const char *kind;
    int she;
    int uses;
} character;

struct al_synth {
    al_synth_opts o;
    al_rng rng;
    char **syl; /* n_later consonant-initial, then vowel-initial */
    size_t n_syl, n_later;
    char *lex_mem; /* owns the strings of lex */
    const char **lex; /* sorted, distinct: words + template words + avoid */
    size_t n_lex;
    const char **words; /* sorted, distinct story words (no avoid list) */
    size_t n_words;
    uint64_t *used; /* open-addressing set of name hashes (0 = empty) */
    size_t used_cap, used_n;
    char prev[AL_SYNTH_MAX_CHARS][AL_SYNTH_NAME_MAX]; /* last story's names */
    /* per story */
    character ch[AL_SYNTH_MAX_CHARS];
    int n_ch;
    const char *obj, *obj2, *objadj, *place, *place2, *animal, *food, *person;
    const char *said_t[128]; /* templates used in this story */
    int n_said;
    al_buf doc, sent; /* the document, the sentence being expanded */
};

static const char *pick(al_rng *r, const char *const *a, int n) {
    return a[al_rng_below(r, (uint32_t)n)];
}
#define PICK(s, a) pick(&(s)->rng, (a), NELEM(a))

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int add_syllables(al_synth *s, const char *onset, al_err *e) {
    for (int v = 0; v < NELEM(VOWELS); v++)
        for (int c = 0; c < NELEM(CODAS); c++) {
            char *t = al_malloc(8, 1, e);
            if (!t) return -1;
            snprintf(t, 8, "%s%s%s", onset, VOWELS[v], CODAS[c]);
            s->syl[s->n_syl++] = t;
        }
    return 0;
}

/* Consonant-initial syllables first, so "any but the first syllable" is
 * the index range [0, n_later). */
static int build_syllables(al_synth *s, al_err *e) {
    size_t n = (size_t)(NELEM(ONSETS) + 1) * NELEM(VOWELS) * NELEM(CODAS);
    s->syl = al_calloc(n, sizeof *s->syl, e);
    if (!s->syl) return -1;
    for (int o = 0; o < NELEM(ONSETS); o++)
        if (add_syllables(s, ONSETS[o], e)) return -1;
    s->n_later = s->n_syl;
    return add_syllables(s, "", e);
}

/* Append the lower-cased alphabetic words of text to a list (arena). */
typedef struct {
    const char **w;
    size_t n, cap;
    char *mem;
    size_t mem_n, mem_cap;
} wordlist;

static void add_words(wordlist *l, const char *text) {
    for (const char *p = text; *p;) {
        if (!isalpha((unsigned char)*p)) {
            if (*p == '{') { /* skip a slot name */
                while (*p && *p != '}') p++;
                if (*p) p++;
            } else {
                p++;
            }
            continue;
        }
        const char *q = p;
        while (isalpha((unsigned char)*q)) q++;
        size_t len = (size_t)(q - p);
        if (l->n < l->cap && l->mem_n + len + 1 <= l->mem_cap) {
            char *d = l->mem + l->mem_n;
            for (size_t i = 0; i < len; i++) d[i] = (char)tolower((unsigned char)p[i]);
            d[len] = 0;
            l->w[l->n++] = d;
            l->mem_n += len + 1;
        }
        p = q;
    }
}

static void add_list(wordlist *l, const char *const *a, int n) {
    for (int i = 0; i < n; i++) add_words(l, a[i]);
}

static size_t dedup_sorted(const char **w, size_t n) {
    qsort(w, n, sizeof *w, cmp_str);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || strcmp(w[k - 1], w[i]) != 0) w[k++] = w[i];
    return k;
}

static void add_story_words(wordlist *l) {
    for (int i = 0; i < NELEM(KINDS); i++) add_words(l, KINDS[i].word);
    add_list(l, OBJECTS, NELEM(OBJECTS));
    add_list(l, PLACES, NELEM(PLACES));
    add_list(l, ADJS, NELEM(ADJS));
    add_list(l, PLACE_ADJS, NELEM(PLACE_ADJS));
    add_list(l, CHAR_ADJS, NELEM(CHAR_ADJS));
    add_list(l, COLORS, NELEM(COLORS));
    add_list(l, FEELS, NELEM(FEELS));
    add_list(l, FOODS, NELEM(FOODS));
    add_list(l, ANIMALS, NELEM(ANIMALS));
    add_list(l, VERBS, NELEM(VERBS));
    add_list(l, TVERBS, NELEM(TVERBS));
    add_list(l, PEOPLE, NELEM(PEOPLE));
    add_list(l, TIMES, NELEM(TIMES));
    add_list(l, SAIDS, NELEM(SAIDS));
    add_list(l, NUMS, NELEM(NUMS));
    add_list(l, PRONOUNS, NELEM(PRONOUNS));
    add_list(l, OPENINGS, NELEM(OPENINGS));
    add_list(l, INTRO_B, NELEM(INTRO_B));
    add_list(l, INTRO_C, NELEM(INTRO_C));
    add_list(l, BODY, NELEM(BODY));
    add_list(l, TOPUP, NELEM(TOPUP));
    add_list(l, CLOSERS, NELEM(CLOSERS));
    for (int i = 0; i < NELEM(ANIMALS); i++) { /* plurals are written too */
        char pl[64];
        snprintf(pl, sizeof pl, "%ss", ANIMALS[i]);
        add_words(l, pl);
    }
}

/* Lexicon = story words + the avoid list; words = story words only. */
static int build_lexicon(al_synth *s, al_err *e) {
    wordlist l = {0};
    l.cap = 20000;
    l.mem_cap = 256 * 1024;
    l.w = al_calloc(l.cap, sizeof *l.w, e);
    l.mem = al_malloc(l.mem_cap, 1, e);
    if (!l.w || !l.mem) {
        free(l.w);
        free(l.mem);
        return -1;
    }
    add_story_words(&l);
    size_t n_story = dedup_sorted(l.w, l.n);
    s->words = al_calloc(n_story ? n_story : 1, sizeof *s->words, e);
    if (!s->words) {
        free(l.w);
        free(l.mem);
        return -1;
    }
    memcpy(s->words, l.w, n_story * sizeof *l.w);
    s->n_words = n_story;
    l.n = n_story;
    add_words(&l, al_synth_avoid_words);
    if (l.n >= l.cap || l.mem_n + 64 >= l.mem_cap) {
        free(l.w);
        free(l.mem);
        return al_errf(e, "synth: word list arena too small");
    }
    s->n_lex = dedup_sorted(l.w, l.n);
    s->lex = l.w;
    s->lex_mem = l.mem;
    return 0;
}

int al_synth_is_word(const al_synth *s, const char *w) {
    char low[64];
    size_t n = strlen(w);
    if (n == 0 || n >= sizeof low) return 0;
    for (size_t i = 0; i <= n; i++) low[i] = (char)tolower((unsigned char)w[i]);
    const char *key = low;
    return bsearch(&key, s->lex, s->n_lex, sizeof *s->lex, cmp_str) != NULL;
}

size_t al_synth_n_syllables(const al_synth *s) { return s->n_syl; }
const char *al_synth_syllable(const al_synth *s, size_t i) {
    return i < s->n_syl ? s->syl[i] : NULL;
}
size_t al_synth_n_words(const al_synth *s) { return s->n_words; }
const char *al_synth_word(const al_synth *s, size_t i) {
    return i < s->n_words ? s->words[i] : NULL;
}

/* ---- names ---- */
static uint64_t name_hash(const char *w) {
    uint64_t h = 1469598103934665603ULL;
    for (; *w; w++) h = (h ^ (unsigned char)*w) * 1099511628211ULL;
    return h ? h : 1;
}

/* The set keeps names unique across the whole output. Past 2^21 names it
 * is cleared (uniqueness then holds within windows of ~2M names). */
static int used_has_or_add(al_synth *s, const char *name, int add) {
    if (add && (s->used_n + 1) * 2 > s->used_cap) {
        size_t cap = s->used_cap ? s->used_cap * 2 : 4096;
        if (cap > ((size_t)1 << 22)) cap = (size_t)1 << 22, s->used_n = 0;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t) return -1;
        if (s->used_n)
            for (size_t i = 0; i < s->used_cap; i++) {
                if (!s->used[i]) continue;
                size_t j = s->used[i] & (cap - 1);
                while (t[j]) j = (j + 1) & (cap - 1);
                t[j] = s->used[i];
            }
        free(s->used);
        s->used = t;
        s->used_cap = cap;
    }
    if (!s->used_cap) return 0;
    uint64_t h = name_hash(name);
    size_t j = h & (s->used_cap - 1);
    while (s->used[j]) {
        if (s->used[j] == h) return 1;
        j = (j + 1) & (s->used_cap - 1);
    }
    if (add) {
        s->used[j] = h;
        s->used_n++;
    }
    return 0;
}

static int final_ok(const char *syl) {
    size_t n = strlen(syl);
    if (syl[n - 1] == 'e' || syl[n - 1] == 's') return 0;
    return !(n >= 3 && strcmp(syl + n - 3, "ing") == 0);
}

/* A random syllable index: onset, vowel and coda drawn separately, the
 * empty coda half of the time (all codas: names get too long to read).
 * Vowel-initial syllables only when first. */
static const char *draw_syllable(al_synth *s, int first) {
    int no = NELEM(ONSETS), nv = NELEM(VOWELS), nc = NELEM(CODAS);
    int o = (int)al_rng_below(&s->rng, (uint32_t)(first ? no + 1 : no));
    int v = (int)al_rng_below(&s->rng, (uint32_t)nv);
    int c = al_rng_below(&s->rng, 2) ? 0 : 1 + (int)al_rng_below(&s->rng, (uint32_t)(nc - 1));
    return s->syl[(size_t)(o * nv + v) * (size_t)nc + (size_t)c];
}

/* One candidate spelling: 2-4 syllables, the last may not end in e, s or
 * -ing (too English). */
static void spell_name(al_synth *s, char *out) {
    uint32_t r = al_rng_below(&s->rng, 100);
    int k = r < 50 ? 2 : r < 90 ? 3 : 4;
    out[0] = 0;
    for (int i = 0; i < k; i++) {
        const char *syl;
        do syl = draw_syllable(s, i == 0);
        while (i == k - 1 && !final_ok(syl));
        strcat(out, syl);
    }
    out[0] = (char)toupper((unsigned char)out[0]);
}

static int name_shape_ok(const char *w) {
    size_t n = strlen(w);
    if (n < NAME_MIN_LETTERS || n > NAME_MAX_LETTERS) return 0;
    for (size_t i = 2; i < n; i++) /* no tripled letter ("Saaa") */
        if (tolower((unsigned char)w[i - 2]) == w[i - 1] && w[i - 1] == w[i]) return 0;
    return 1;
}

static int taken_locally(const al_synth *s, const char *w, int upto) {
    for (int i = 0; i < upto; i++)
        if (strcmp(s->ch[i].name, w) == 0) return 1;
    for (int i = 0; i < AL_SYNTH_MAX_CHARS; i++)
        if (strcmp(s->prev[i], w) == 0) return 1;
    return 0;
}

/* A fresh name for character i: not a word, not used before (the global
 * check is dropped after many tries, never the local one). */
static int make_name(al_synth *s, int i, al_err *e) {
    char w[32]; /* 4 syllables of <= 6 letters */
    for (int tries = 0;; tries++) {
        spell_name(s, w);
        if (!name_shape_ok(w) || al_synth_is_word(s, w) || taken_locally(s, w, i)) continue;
        if (tries < 200) {
            int u = used_has_or_add(s, w, 0);
            if (u) continue;
        }
        if (used_has_or_add(s, w, 1) < 0) return al_errf(e, "synth: out of memory");
        memcpy(s->ch[i].name, w, strlen(w) + 1); /* <= NAME_MAX_LETTERS */
        return 0;
    }
}

/* ---- template expansion ---- */
static int needs_chars(const char *t) {
    if (strstr(t, "{C}") || strstr(t, "{kindC}")) return 3;
    if (strstr(t, "{B}") || strstr(t, "{kindB}") || strstr(t, "{bh")) return 2;
    return 1;
}

static void put_name(al_synth *s, int i) {
    al_buf_puts(&s->sent, s->ch[i].name);
    s->ch[i].uses++;
}

static const char *pronoun(const character *c, const char *she, const char *he) {
    return c->she ? she : he;
}

/* Expand one {slot}; focus is the character {X} stands for. */
static void expand_slot(al_synth *s, const char *k, size_t n, int focus) {
    character *a = &s->ch[0], *b = &s->ch[1];
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(k, lit, n) == 0)
    if (IS("A"))
        put_name(s, 0);
    else if (IS("B"))
        put_name(s, 1);
    else if (IS("C"))
        put_name(s, 2);
    else if (IS("X"))
        put_name(s, focus);
    else if (IS("a"))
        al_buf_put(&s->sent, "\x01", 1);
    else if (IS("he"))
        al_buf_puts(&s->sent, pronoun(a, "she", "he"));
    else if (IS("He"))
        al_buf_puts(&s->sent, pronoun(a, "She", "He"));
    else if (IS("his"))
        al_buf_puts(&s->sent, pronoun(a, "her", "his"));
    else if (IS("His"))
        al_buf_puts(&s->sent, pronoun(a, "Her", "His"));
    else if (IS("him"))
        al_buf_puts(&s->sent, pronoun(a, "her", "him"));
    else if (IS("bhe"))
        al_buf_puts(&s->sent, pronoun(b, "she", "he"));
    else if (IS("bhis"))
        al_buf_puts(&s->sent, pronoun(b, "her", "his"));
    else if (IS("bhim"))
        al_buf_puts(&s->sent, pronoun(b, "her", "him"));
    else if (IS("kindA"))
        al_buf_puts(&s->sent, s->ch[0].kind);
    else if (IS("kindB"))
        al_buf_puts(&s->sent, s->ch[1].kind);
    else if (IS("kindC"))
        al_buf_puts(&s->sent, s->ch[2].kind);
    else if (IS("obj"))
        al_buf_puts(&s->sent, s->obj);
    else if (IS("obj2"))
        al_buf_puts(&s->sent, s->obj2);
    else if (IS("objadj"))
        al_buf_puts(&s->sent, s->objadj);
    else if (IS("place"))
        al_buf_puts(&s->sent, s->place);
    else if (IS("place2"))
        al_buf_puts(&s->sent, s->place2);
    else if (IS("animal"))
        al_buf_puts(&s->sent, s->animal);
    else if (IS("animals"))
        al_buf_puts(&s->sent, s->animal), al_buf_puts(&s->sent, "s");
    else if (IS("food"))
        al_buf_puts(&s->sent, s->food);
    else if (IS("person"))
        al_buf_puts(&s->sent, s->person);
    else if (IS("adj"))
        al_buf_puts(&s->sent, PICK(s, ADJS));
    else if (IS("padj"))
        al_buf_puts(&s->sent, PICK(s, PLACE_ADJS));
    else if (IS("cadj"))
        al_buf_puts(&s->sent, PICK(s, CHAR_ADJS));
    else if (IS("color"))
        al_buf_puts(&s->sent, PICK(s, COLORS));
    else if (IS("feel"))
        al_buf_puts(&s->sent, PICK(s, FEELS));
    else if (IS("verb"))
        al_buf_puts(&s->sent, PICK(s, VERBS));
    else if (IS("tverb"))
        al_buf_puts(&s->sent, PICK(s, TVERBS));
    else if (IS("time"))
        al_buf_puts(&s->sent, PICK(s, TIMES));
    else if (IS("said"))
        al_buf_puts(&s->sent, PICK(s, SAIDS));
    else if (IS("num"))
        al_buf_puts(&s->sent, PICK(s, NUMS));
    else
        al_buf_put(&s->sent, k - 1, n + 2); /* unknown: keep literally */
#undef IS
}

/* Copy the expanded sentence into the document: resolve {a} markers and
 * capitalise the first letter. */
static void emit_sentence(al_synth *s) {
    const char *p = s->sent.p;
    size_t n = s->sent.n;
    if (s->doc.n) al_buf_put(&s->doc, " ", 1);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\x01') {
            size_t j = i + 1;
            while (j < n && p[j] == ' ') j++;
            int vowel = j < n && strchr("aeiouAEIOU", p[j]);
            const char *art = vowel ? "an" : "a";
            if (first) art = vowel ? "An" : "A";
            al_buf_puts(&s->doc, art);
            first = 0;
            continue;
        }
        if (first && isalpha((unsigned char)c)) {
            c = (char)toupper((unsigned char)c);
            first = 0;
        }
        al_buf_put(&s->doc, &c, 1);
    }
}

static void say(al_synth *s, const char *t, int focus) {
    al_buf_reset(&s->sent);
    for (const char *p = t; *p;) {
        const char *q = strchr(p, '{');
        if (!q) {
            al_buf_puts(&s->sent, p);
            break;
        }
        al_buf_put(&s->sent, p, (size_t)(q - p));
        const char *r = strchr(q, '}');
        if (!r) {
            al_buf_puts(&s->sent, q);
            break;
        }
        expand_slot(s, q + 1, (size_t)(r - q - 1), focus);
        p = r + 1;
    }
    emit_sentence(s);
}

static int said_before(const al_synth *s, const char *t) {
    for (int i = 0; i < s->n_said; i++)
        if (s->said_t[i] == t) return 1;
    return 0;
}

/* A random template of list a usable with the story's characters, not
 * yet used in this story if that can be found quickly. */
static const char *pick_template(al_synth *s, const char *const *a, int n) {
    const char *t;
    for (int tries = 0;; tries++) {
        t = a[al_rng_below(&s->rng, (uint32_t)n)];
        if (needs_chars(t) <= s->n_ch && (tries > 50 || !said_before(s, t))) break;
    }
    if (s->n_said < NELEM(s->said_t)) s->said_t[s->n_said++] = t;
    return t;
}

static const char *pick_other(al_rng *r, const char *const *a, int n, const char * not ) {
    for (;;) {
        const char *w = pick(r, a, n);
        if (w != not ) return w;
    }
}

static int setup_story(al_synth *s, al_err *e) {
    uint32_t r = al_rng_below(&s->rng, 100);
    s->n_ch = r < 30 ? 1 : r < 75 ? 2 : 3;
    for (int i = 0; i < s->n_ch; i++) {
        const kind_t *k = &KINDS[al_rng_below(&s->rng, NELEM(KINDS))];
        s->ch[i].kind = k->word;
        s->ch[i].she = k->sex == 2 ? (int)al_rng_below(&s->rng, 2) : k->sex == 0;
        s->ch[i].uses = 0;
        s->ch[i].name[0] = 0;
        if (make_name(s, i, e)) return -1;
    }
    s->obj = PICK(s, OBJECTS);
    s->obj2 = pick_other(&s->rng, OBJECTS, NELEM(OBJECTS), s->obj);
    s->objadj = al_rng_below(&s->rng, 2) ? PICK(s, COLORS) : PICK(s, ADJS);
    s->place = PICK(s, PLACES);
    s->place2 = pick_other(&s->rng, PLACES, NELEM(PLACES), s->place);
    s->animal = PICK(s, ANIMALS);
    s->food = PICK(s, FOODS);
    s->person = PICK(s, PEOPLE);
    return 0;
}

/* Name mentions still missing for every character to appear >= 3 times. */
static int deficit(const al_synth *s, int *worst) {
    int d = 0, best = -1;
    for (int i = 0; i < s->n_ch; i++) {
        int m = 3 - s->ch[i].uses;
        if (m > 0) d += m;
        if (m > 0 && (best < 0 || m > 3 - s->ch[best].uses)) best = i;
    }
    *worst = best;
    return d;
}

static int gen_story(al_synth *s, al_synth_doc *info, al_err *e) {
    if (setup_story(s, e)) return -1;
    s->n_said = 0;
    say(s, PICK(s, OPENINGS), 0);
    if (s->n_ch >= 2) say(s, PICK(s, INTRO_B), 0);
    if (s->n_ch >= 3) say(s, PICK(s, INTRO_C), 0);
    int span = s->o.max_sentences - s->o.min_sentences + 1;
    int n_body = s->o.min_sentences + (int)al_rng_below(&s->rng, (uint32_t)span);
    for (int i = 0;; i++) {
        int worst, d = deficit(s, &worst);
        if (i >= n_body && d == 0) break;
        int left = n_body - i; /* top-ups spread over the body, forced at the end */
        if (d > 0 && (left <= d || al_rng_below(&s->rng, (uint32_t)left) < (uint32_t)d))
            say(s, pick_template(s, TOPUP, NELEM(TOPUP)), worst);
        else
            say(s, pick_template(s, BODY, NELEM(BODY)), 0);
    }
    say(s, pick_template(s, CLOSERS, NELEM(CLOSERS)), 0);
    if (info) {
        info->kind = AL_SYNTH_STORY;
        info->n_names = s->n_ch;
        for (int i = 0; i < s->n_ch; i++) {
            memcpy(info->names[i], s->ch[i].name, AL_SYNTH_NAME_MAX);
            info->name_uses[i] = s->ch[i].uses;
        }
    }
    memset(s->prev, 0, sizeof s->prev);
    for (int i = 0; i < s->n_ch; i++) memcpy(s->prev[i], s->ch[i].name, AL_SYNTH_NAME_MAX);
    return 0;
}

/* A span of span_min..span_max (default 20-60) pieces (random syllables or story words) written 2-3
 * times: copying the span is the only way to predict its later copies. */
static void gen_repeat(al_synth *s, al_synth_doc *info) {
    int pieces =
        s->o.span_min + (int)al_rng_below(&s->rng, (uint32_t)(s->o.span_max - s->o.span_min + 1));
    int reps = 2 + (int)al_rng_below(&s->rng, 2);
    al_buf *b = &s->sent;
    al_buf_reset(b);
    for (int i = 0; i < pieces; i++) {
        if (i) al_buf_put(b, " ", 1);
        if (al_rng_below(&s->rng, 2)) {
            al_buf_puts(b, s->words[al_rng_below(&s->rng, (uint32_t)s->n_words)]);
            continue;
        }
        size_t at = b->n;
        int k = 1 + (int)al_rng_below(&s->rng, 2);
        for (int j = 0; j < k; j++)
            al_buf_puts(b, s->syl[al_rng_below(&s->rng, (uint32_t)s->n_syl)]);
        if (al_buf_ok(b) && al_rng_below(&s->rng, 5) == 0)
            b->p[at] = (char)toupper((unsigned char)b->p[at]);
    }
    for (int r = 0; r < reps; r++) {
        if (r) al_buf_put(&s->doc, " ", 1);
        if (al_buf_ok(b)) al_buf_put(&s->doc, b->p, b->n);
    }
    if (info) {
        info->kind = AL_SYNTH_REPEAT;
        info->span_pieces = pieces;
        info->repeats = reps;
        info->span_bytes = b->n;
    }
}

int al_synth_next(al_synth *s, const char **text, size_t *len, al_synth_doc *info, al_err *e) {
    if (info) memset(info, 0, sizeof *info);
    al_buf_reset(&s->doc);
    if (al_rng_uniform(&s->rng) < s->o.repeat_fraction)
        gen_repeat(s, info);
    else if (gen_story(s, info, e))
        return -1;
    if (!al_buf_ok(&s->doc) || !al_buf_ok(&s->sent)) return al_errf(e, "synth: out of memory");
    *text = s->doc.p;
    *len = s->doc.n;
    return 0;
}

void al_synth_defaults(al_synth_opts *o) {
    o->seed = 1;
    o->n_docs = 1000;
    o->repeat_fraction = 0.1;
    o->min_sentences = 6;
    o->max_sentences = 14;
    o->span_min = 20;
    o->span_max = 60;
}

int al_synth_check(const al_synth_opts *o, al_err *e) {
    if (o->n_docs < 1) return al_errf(e, "--stories must be >= 1 (got %ld)", o->n_docs);
    if (!(o->repeat_fraction >= 0 && o->repeat_fraction <= 1))
        return al_errf(e, "--repeat-fraction must be in [0,1] (got %g)", o->repeat_fraction);
    if (o->min_sentences < 1 || o->min_sentences > 1000)
        return al_errf(e, "--min-sentences must be in [1,1000] (got %d)", o->min_sentences);
    if (o->max_sentences < o->min_sentences || o->max_sentences > 1000)
        return al_errf(e, "--max-sentences must be in [min-sentences,1000] (got %d)",
                       o->max_sentences);
    if (o->span_min < 1 || o->span_min > 1000)
        return al_errf(e, "--span-min must be in [1,1000] (got %d)", o->span_min);
    if (o->span_max < o->span_min || o->span_max > 1000)
        return al_errf(e, "--span-max must be in [span-min,1000] (got %d)", o->span_max);
    return 0;
}

int al_synth_new(al_synth **out, const al_synth_opts *o, al_err *e) {
    *out = NULL;
    if (al_synth_check(o, e)) return -1;
    al_synth *s = al_calloc(1, sizeof *s, e);
    if (!s) return -1;
    s->o = *o;
    al_rng_seed(&s->rng, o->seed);
    if (build_syllables(s, e) || build_lexicon(s, e)) {
        al_synth_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void al_synth_free(al_synth *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_syl; i++) free(s->syl[i]);
    free(s->syl);
    free(s->lex);
    free(s->lex_mem);
    free(s->words);
    free(s->used);
    al_buf_free(&s->doc);
    al_buf_free(&s->sent);
    free(s);
}

int al_synth_write(const char *path, const al_synth_opts *o, int progress, size_t *bytes,
                   al_err *e) {
    al_synth *s;
    if (al_synth_new(&s, o, e)) return -1;
    al_atomic_file af;
    if (al_atomic_open(&af, path, e)) {
        al_synth_free(s);
        return -1;
    }
    al_progress pr;
    al_progress_init(&pr, 2.0);
    size_t total = 0;
    int ok = 1;
    for (long i = 0; i < o->n_docs && ok; i++) {
        const char *t;
        size_t n;
        if (al_synth_next(s, &t, &n, NULL, e)) {
            ok = 0;
            break;
        }
        const char *sep = i + 1 < o->n_docs ? "\n\n" : "\n";
        size_t ns = strlen(sep);
        if (fwrite(t, 1, n, af.f) != n || fwrite(sep, 1, ns, af.f) != ns) {
            al_errf(e, "cannot write %s: write failed", path);
            ok = 0;
        }
        total += n + ns;
        if (progress && (i % 256 == 0 || i + 1 == o->n_docs))
            al_progress_update(&pr, i + 1 == o->n_docs, "synth: %ld/%ld documents, %.1f MB", i + 1,
                               o->n_docs, (double)total / 1e6);
    }
    if (progress) al_progress_done(&pr);
    al_synth_free(s);
    al_err e2;
    if (al_atomic_commit(&af, ok, ok ? e : &e2) || !ok) return -1;
    if (bytes) *bytes = total;
    return 0;
}
