/* test_png.c -- PNG write/read round trips, text chunks, atomic writes
 * and refusal of bad files. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attnlab/png.h"
#include "test.h"

/* A w x h image whose every pixel is a known function of (x, y). */
static uint32_t pattern(int x, int y) { return al_rgb(x * 7 + y, y * 13 + 5, (x ^ y) * 3); }

static void make_pattern(al_image *im, int w, int h) {
    al_err e;
    CHECK_OK(al_image_init(im, w, h, 0, &e), &e);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) al_image_set(im, x, y, pattern(x, y));
}

/* Files in dir whose name contains needle. */
static int count_files(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *de; (de = readdir(d));)
        if (strstr(de->d_name, needle)) n++;
    closedir(d);
    return n;
}

TEST(png_roundtrip_pixels_and_text) {
    al_image im, back;
    al_err e;
    make_pattern(&im, 37, 23);
    const char *prompt = "Once \xc3\xa9t\xc3\xa9 \xe2\x90\xa3 \"quoted\""; /* UTF-8: goes in iTXt */
    al_png_text t[] = {{"model", "runs/x"},
                       {"head", "1.4"},
                       {"prompt", prompt},
                       {"Software", "attnlab " AL_VERSION}};
    CHECK_OK(al_png_write(t_path("a.png"), &im, t, 4, &e), &e);
    al_png_meta m;
    CHECK_OK(al_png_read(t_path("a.png"), &back, &m, &e), &e);
    CHECK(back.w == 37 && back.h == 23);
    int bad = 0;
    for (int y = 0; y < 23; y++)
        for (int x = 0; x < 37; x++) bad += al_image_get(&back, x, y) != pattern(x, y);
    CHECKF(bad == 0, "%d pixels differ after the round trip", bad);
    CHECK(al_png_meta_get(&m, "model") && strcmp(al_png_meta_get(&m, "model"), "runs/x") == 0);
    CHECK(al_png_meta_get(&m, "head") && strcmp(al_png_meta_get(&m, "head"), "1.4") == 0);
    CHECK(al_png_meta_get(&m, "prompt") && strcmp(al_png_meta_get(&m, "prompt"), prompt) == 0);
    CHECK(al_png_meta_get(&m, "Software") != NULL);
    CHECK(al_png_meta_get(&m, "nothing") == NULL);
    /* the ASCII values really are tEXt chunks, the UTF-8 one an iTXt chunk */
    size_t n = 0;
    unsigned char *d;
    CHECK(al_read_file(t_path("a.png"), &d, &n, 0, &e) == 0);
    int text = 0, itxt = 0;
    for (size_t i = 8; i + 8 <= n;) { /* walk the chunks */
        uint32_t len = (uint32_t)d[i] << 24 | d[i + 1] << 16 | d[i + 2] << 8 | d[i + 3];
        text += memcmp(d + i + 4, "tEXt", 4) == 0;
        itxt += memcmp(d + i + 4, "iTXt", 4) == 0;
        i += 12 + (size_t)len;
    }
    CHECK(text == 3 && itxt == 1);
    free(d);
    /* an 8-bit RGB file: IHDR bit depth 8, colour type 2 */
    unsigned char hdr[26];
    FILE *f = fopen(t_path("a.png"), "rb");
    CHECK(f && fread(hdr, 1, 26, f) == 26);
    if (f) fclose(f);
    CHECK(hdr[24] == 8 && hdr[25] == 2);
    al_png_meta_free(&m);
    al_image_free(&im);
    al_image_free(&back);
}

/* A failed write leaves no file and no temporary behind, and an existing
 * picture at the same path untouched. */
TEST(png_write_is_atomic) {
    al_image im, back;
    al_err e;
    make_pattern(&im, 9, 5);
    /* the "directory" is a regular file: fails for every user, root too */
    CHECK(t_sh(": > %s", t_path("plain")) == 0);
    char bad[1024];
    snprintf(bad, sizeof bad, "%s/x.png", t_path("plain"));
    e.msg[0] = 0;
    CHECK(al_png_write(bad, &im, NULL, 0, &e) == -1);
    CHECKF(strstr(e.msg, "x.png") != NULL, "message should name the file: %s", e.msg);
    /* a good picture, then a failed overwrite of it */
    CHECK_OK(al_png_write(t_path("keep.png"), &im, NULL, 0, &e), &e);
    if (geteuid() != 0) {
        al_image other;
        make_pattern(&other, 3, 3);
        CHECK(chmod(t_tmpdir(), 0555) == 0);
        CHECK(al_png_write(t_path("keep.png"), &other, NULL, 0, &e) == -1);
        CHECK(al_png_write(t_path("new.png"), &other, NULL, 0, &e) == -1);
        CHECK(chmod(t_tmpdir(), 0755) == 0);
        CHECK(!al_file_exists(t_path("new.png")));
        al_image_free(&other);
    }
    CHECK_OK(al_png_read(t_path("keep.png"), &back, NULL, &e), &e);
    CHECK(back.w == 9 && back.h == 5 && al_image_get(&back, 4, 2) == pattern(4, 2));
    al_image_free(&back);
    /* overwriting succeeds whole and leaves no temporary files */
    im.px[0] = 1;
    CHECK_OK(al_png_write(t_path("keep.png"), &im, NULL, 0, &e), &e);
    CHECK(count_files(t_tmpdir(), ".tmp") == 0);
    al_image_free(&im);
}

TEST(png_rejects_bad_input) {
    al_image im, back;
    al_err e;
    /* not a PNG */
    CHECK(t_sh("printf 'hello world, not a png' > %s", t_path("t.png")) == 0);
    CHECK(al_png_read(t_path("t.png"), &back, NULL, &e) == -1);
    CHECK(strstr(e.msg, "not a PNG") != NULL);
    /* a truncated PNG */
    make_pattern(&im, 64, 64);
    CHECK_OK(al_png_write(t_path("full.png"), &im, NULL, 0, &e), &e);
    CHECK(t_sh("head -c 100 %s > %s", t_path("full.png"), t_path("cut.png")) == 0);
    CHECK(al_png_read(t_path("cut.png"), &back, NULL, &e) == -1);
    CHECK(back.px == NULL);
    /* a missing file */
    CHECK(al_png_read(t_path("none.png"), &back, NULL, &e) == -1);
    /* a bad text key and an empty image are refused before anything is written */
    al_png_text t[] = {{"", "x"}};
    CHECK(al_png_write(t_path("k.png"), &im, t, 1, &e) == -1);
    al_image empty = {0, 0, NULL};
    CHECK(al_png_write(t_path("k.png"), &empty, NULL, 0, &e) == -1);
    CHECK(!al_file_exists(t_path("k.png")));
    /* images of absurd size are refused, not allocated */
    CHECK(al_image_init(&back, 100000, 10, 0, &e) == -1);
    al_image_free(&im);
}
