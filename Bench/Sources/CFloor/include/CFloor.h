#ifndef CFLOOR_H
#define CFLOOR_H
/* The pieces of the cut floor that are plain C: decoding a JPEG with libjpeg (the
   decoder libvips calls), and the two PNG encoders tiler does not use, measured against
   its libpng encoder on the same tiles. */
#include <stddef.h>
#include <stdint.h>

/* Decodes the JPEG file at `path` into one malloc'd buffer of rows (width * bands bytes
   each; bands 1 or 3), libjpeg's defaults (islow IDCT, fancy upsampling), as libvips
   decodes. Returns NULL on failure. */
uint8_t *floor_decode_jpeg(const char *path, int *width, int *height, int *bands);

/* A PNG of 8-bit rows (row y at pixels + y * stride; 1-4 bands) with libspng: `filter`
   an SPNG_FILTER_CHOICE_* mask, zlib `level` and `strategy`. Returns its length in
   bytes, 0 on failure; with `keep` non-NULL the bytes are handed over (free with free()). */
size_t floor_spng_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int filter,
                         int level, int strategy, uint8_t **keep);

/* A PNG written by hand: Paeth filter on every row, one zlib stream from libdeflate at
   `level` (1-12) in one IDAT, CRCs from libdeflate. Same contract as above. */
size_t floor_deflate_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int level,
                            uint8_t **keep);

/* Decodes a PNG with libspng to 8-bit rows of its own band count; 0 when the pixels equal
   `pixels` (row y at pixels + y * stride), else -1. */
int floor_png_matches(const uint8_t *png, size_t length, const uint8_t *pixels, size_t stride, int width, int height,
                      int bands);

#endif
