/* plot_colour.c -- the colour maps (viridis, a diverging RdBu), the series
 * palette and colour scales (al_cscale: a range fitted to the data, a
 * value's colour), see plot.h. */
#include "attnlab/plot.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "attnlab/image.h"

typedef struct cpoint {
    double t, r, g, b;
} cpoint;

/* matplotlib's viridis (CC0) at entries 0, 8, ..., 255 of 256. */
static const cpoint viridis[] =
    {{0 / 255., 0.267004, 0.004874, 0.329415},   {8 / 255., 0.277018, 0.050344, 0.375715},
     {16 / 255., 0.282327, 0.094955, 0.417331},  {24 / 255., 0.282884, 0.135920, 0.453427},
     {32 / 255., 0.278826, 0.175490, 0.483397},  {40 / 255., 0.270595, 0.214069, 0.507052},
     {48 / 255., 0.258965, 0.251537, 0.524736},  {56 / 255., 0.244972, 0.287675, 0.537260},
     {64 / 255., 0.229739, 0.322361, 0.545706},  {72 / 255., 0.214298, 0.355619, 0.551184},
     {80 / 255., 0.199430, 0.387607, 0.554642},  {88 / 255., 0.185556, 0.418570, 0.556753},
     {96 / 255., 0.172719, 0.448791, 0.557885},  {104 / 255., 0.160665, 0.478540, 0.558115},
     {112 / 255., 0.149039, 0.508051, 0.557250}, {120 / 255., 0.137770, 0.537492, 0.554906},
     {128 / 255., 0.127568, 0.566949, 0.550556}, {135 / 255., 0.121148, 0.592739, 0.544641},
     {143 / 255., 0.120081, 0.622161, 0.534946}, {151 / 255., 0.130067, 0.651384, 0.521608},
     {159 / 255., 0.153894, 0.680203, 0.504172}, {167 / 255., 0.191090, 0.708366, 0.482284},
     {175 / 255., 0.239374, 0.735588, 0.455688}, {183 / 255., 0.296479, 0.761561, 0.424223},
     {191 / 255., 0.360741, 0.785964, 0.387814}, {199 / 255., 0.430983, 0.808473, 0.346476},
     {207 / 255., 0.506271, 0.828786, 0.300362}, {215 / 255., 0.585678, 0.846661, 0.249897},
     {223 / 255., 0.668054, 0.861999, 0.196293}, {231 / 255., 0.751884, 0.874951, 0.143228},
     {239 / 255., 0.835270, 0.886029, 0.102646}, {247 / 255., 0.916242, 0.896091, 0.100717},
     {255 / 255., 0.993248, 0.906157, 0.143936}};

/* ColorBrewer RdBu (reversed: blue negative), centre made pure white so
 * that zero is exactly the background colour. */
static const cpoint rdbu[] =
    {{0.0, 5 / 255., 48 / 255., 97 / 255.},     {0.1, 33 / 255., 102 / 255., 172 / 255.},
     {0.2, 67 / 255., 147 / 255., 195 / 255.},  {0.3, 146 / 255., 197 / 255., 222 / 255.},
     {0.4, 209 / 255., 229 / 255., 240 / 255.}, {0.5, 1.0, 1.0, 1.0},
     {0.6, 253 / 255., 219 / 255., 199 / 255.}, {0.7, 244 / 255., 165 / 255., 130 / 255.},
     {0.8, 214 / 255., 96 / 255., 77 / 255.},   {0.9, 178 / 255., 24 / 255., 43 / 255.},
     {1.0, 103 / 255., 0 / 255., 31 / 255.}};

static uint32_t interp(const cpoint *p, int n, double t) {
    if (!(t > 0)) t = 0; /* also NaN */
    if (t > 1) t = 1;
    int i = 0;
    while (i < n - 2 && t > p[i + 1].t) i++;
    double a = (t - p[i].t) / (p[i + 1].t - p[i].t);
    return al_rgb((int)lround(255 * (p[i].r + a * (p[i + 1].r - p[i].r))),
                  (int)lround(255 * (p[i].g + a * (p[i + 1].g - p[i].g))),
                  (int)lround(255 * (p[i].b + a * (p[i + 1].b - p[i].b))));
}

uint32_t al_cmap_viridis(double t) {
    return interp(viridis, (int)(sizeof viridis / sizeof viridis[0]), t);
}

uint32_t al_cmap_diverging(double t) {
    return interp(rdbu, (int)(sizeof rdbu / sizeof rdbu[0]), (t + 1) / 2);
}

uint32_t al_plot_colour(int i) {
    /* Tableau 10: distinct, and readable on white. */
    static const uint32_t c[] = {0x1F77B4, 0xFF7F0E, 0x2CA02C, 0xD62728, 0x9467BD,
                                 0x8C564B, 0xE377C2, 0x7F7F7F, 0xBCBD22, 0x17BECF};
    return c[(i < 0 ? -i : i) % 10];
}

void al_cscale_fit(al_cscale *cs, const float *v, size_t n) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) {
            lo = v[i] < lo ? v[i] : lo;
            hi = v[i] > hi ? v[i] : hi;
        }
    if (lo > hi) lo = hi = 0; /* no finite value */
    if (isnan(cs->lo)) cs->lo = lo;
    if (isnan(cs->hi)) cs->hi = hi;
    if (cs->diverging) {
        double m = fmax(fabs(cs->lo), fabs(cs->hi));
        if (!(m > 0)) m = 1;
        cs->lo = -m;
        cs->hi = m;
    } else if (!(cs->hi > cs->lo)) {
        double d = fabs(cs->lo) > 0 ? fabs(cs->lo) * 0.5 : 0.5;
        cs->lo -= d;
        cs->hi += d;
    }
}

uint32_t al_cscale_colour(const al_cscale *cs, double v) {
    if (isnan(v)) return AL_PLOT_MASKED;
    if (cs->diverging) {
        double m = fmax(fabs(cs->lo), fabs(cs->hi));
        return al_cmap_diverging(m > 0 ? v / m : 0);
    }
    double d = cs->hi - cs->lo;
    return al_cmap_viridis(d > 0 ? (v - cs->lo) / d : 0.5);
}
