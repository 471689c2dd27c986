/* The 2×2 box filter between pyramid levels (AreaAverage.shrinkRows), in C so that the
   compiler vectorises it. Whole 2×2 blocks go through a small buffer in three simple
   passes (vertical sums, horizontal sums rounded to bytes at every position, then every
   other pixel kept) instead of one loop over bands per pixel: about a quarter of the
   instructions, the same bytes. */
#include "CTilerShims.h"
#include <string.h>

/* Pixel pairs per pass: the buffers stay in the L1 cache. */
#define TILER_SHRINK_CHUNK 256

static inline void tiler_shrink_pairs(const uint8_t *restrict upper, const uint8_t *restrict lower, int pairs,
                                      int bands, uint8_t *restrict out) {
    uint16_t sums[TILER_SHRINK_CHUNK * 2 * 4];
    uint8_t means[TILER_SHRINK_CHUNK * 2 * 4];
    int n = pairs * 2 * bands;
    for (int i = 0; i < n; i++) sums[i] = (uint16_t) (upper[i] + lower[i]);
    /* means[i] is the block mean of the pixel starting at i and the one after it; only
       the even pixels' are kept. */
    for (int i = 0; i < n - bands; i++) means[i] = (uint8_t) ((sums[i] + sums[i + bands] + 2) >> 2);
    switch (bands) {
    case 1:
        for (int p = 0; p < pairs; p++) out[p] = means[2 * p];
        break;
    case 2:
        for (int p = 0; p < pairs; p++) memcpy(out + 2 * p, means + 4 * p, 2);
        break;
    case 3:
        for (int p = 0; p < pairs; p++) {
            out[3 * p] = means[6 * p];
            out[3 * p + 1] = means[6 * p + 1];
            out[3 * p + 2] = means[6 * p + 2];
        }
        break;
    default:
        for (int p = 0; p < pairs; p++) memcpy(out + 4 * p, means + 8 * p, 4);
        break;
    }
}

void tiler_shrink_rows(const uint8_t *upper, const uint8_t *lower, int width, int bands, uint8_t *out) {
    int pairs = width / 2;
    size_t step = (size_t) bands;
    if (lower) {
        for (int p = 0; p < pairs; p += TILER_SHRINK_CHUNK) {
            int k = pairs - p < TILER_SHRINK_CHUNK ? pairs - p : TILER_SHRINK_CHUNK;
            tiler_shrink_pairs(upper + 2 * step * p, lower + 2 * step * p, k, bands, out + step * p);
        }
        if (width % 2 == 1) {
            /* Last column of an odd width: a 1×2 block. */
            const uint8_t *u = upper + 2 * step * pairs, *l = lower + 2 * step * pairs;
            for (int b = 0; b < bands; b++) out[step * pairs + b] = (uint8_t) ((u[b] + l[b] + 1) >> 1);
        }
    } else {
        /* Last row of an odd height: 2×1 blocks, and a lone corner pixel. */
        for (int p = 0; p < pairs; p++)
            for (int b = 0; b < bands; b++)
                out[step * p + b] = (uint8_t) ((upper[2 * step * p + b] + upper[2 * step * p + step + b] + 1) >> 1);
        if (width % 2 == 1) memcpy(out + step * pairs, upper + 2 * step * pairs, step);
    }
}
