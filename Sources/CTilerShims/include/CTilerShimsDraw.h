#ifndef TILER_SHIMS_DRAW_H
#define TILER_SHIMS_DRAW_H

/* Drawing IIIF regions and sizes from a pyramid's tiles without libvips: each covering
   tile decoded once with libjpeg (scaled by its DCT where the output is smaller), libpng
   or libwebp,
   the region resampled once (Lanczos-3, as libvips' resize), turned and greyed; the caller
   encodes (tiler_jpeg_encode, tiler_webp_encode, libdeflate). Plain C calls around
   libjpeg's longjmp. */

#include <stddef.h>
#include <stdint.h>

/* Decodes the JPEG `data` scaled by 1/`denominator` (1, 2, 4 or 8) into `out`, as
   `bands` bands (3: RGB, 1: grey), rows `stride` bytes apart. Writes the scaled size to
   `*width` and `*height`, which must fit in `max_width` × `max_height` (else it fails
   before decoding). Fails on anything libjpeg warns about (a truncated tile), with the
   reason in `message`. 0 on success. */
int tiler_draw_decode_jpeg(const uint8_t *data, size_t size, int denominator, int bands, uint8_t *out,
                           size_t stride, int max_width, int max_height, int *width, int *height, char *message,
                           size_t message_size);

/* Decodes the PNG `data` (8 bits a sample, no transparency) into `out` as `bands` bands,
   rows `stride` bytes apart, its size in `*width` × `*height`, which must fit in
   `max_width` × `max_height`. -2 when the tile is not what this path draws (transparency,
   16 bits, another number of bands: libvips draws it); -1 on a damaged tile or one too
   large, with the reason in `message`; 0 on success. */
int tiler_draw_decode_png(const uint8_t *data, size_t size, int bands, uint8_t *out, size_t stride, int max_width,
                          int max_height, int *width, int *height, char *message, size_t message_size);

/* The same for a WebP tile (three bands only: WebP has no grey). */
int tiler_draw_decode_webp(const uint8_t *data, size_t size, int bands, uint8_t *out, size_t stride, int max_width,
                           int max_height, int *width, int *height, char *message, size_t message_size);

/* Resamples the rectangle (`x`, `y`, `region_width`, `region_height`) of `source`
   (`bands` bands of 8 bits, rows `source_stride` bytes apart, at least `source_width` ×
   `source_height`) to `width` × `height` into `out` (rows `out_stride` apart): an axis
   that shrinks with Lanczos' three-lobed kernel stretched to the scale, as libvips'
   `resize` reduces; one that keeps its size by area (a copy when aligned). Separable:
   filtered down first (over rows, vectorised), then across each output row. Not for
   enlarging: `width` ≤ `region_width` and `height` ≤ `region_height`. 0 on success, -1 on a bad rectangle or no memory. */
int tiler_draw_resample(const uint8_t *source, size_t source_stride, int source_width, int source_height, int bands,
                        double x, double y, double region_width, double region_height, uint8_t *out,
                        size_t out_stride, int width, int height);

/* Turns `in` (`width` × `height`, `bands`, rows `in_stride` apart) by `quarter_turns`
   clockwise quarter turns (0 to 3), mirrored first (left to right) when `mirror`, into
   `out` (rows `out_stride` apart; width and height swap for odd turns). */
void tiler_draw_turn(const uint8_t *in, size_t in_stride, int width, int height, int bands, int quarter_turns,
                     int mirror, uint8_t *out, size_t out_stride);

/* Grey from RGB as libvips' colourspace to B_W does it: luminance (Rec. 709 weights) of
   the linear-light values, back to sRGB's curve. `in` has 3 bands, `out` 1; rows
   `in_stride` and `out_stride` apart. With `threshold` ≥ 0, each grey is then 255 when
   at least `threshold`, else 0 (IIIF's bitonal). */
void tiler_draw_grey(const uint8_t *in, size_t in_stride, int width, int height, uint8_t *out, size_t out_stride,
                     int threshold);

#endif
