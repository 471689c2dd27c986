#ifndef CTILERSHIMS_H
#define CTILERSHIMS_H
/* Fixed-arity wrappers for the C calls Swift cannot make: libvips' variadic operations
   and libpng's setjmp/longjmp error handling. This header is the cutter's and what every
   user of libvips shares (starting it, opening files, converting to tile pixels);
   CTilerShimsRender.h, CTilerShimsSource.h and CTilerShimsVerify.h hold what only the
   region renderer, the sources served on the fly and `tiler verify` call.

   Every int-returning function returns 0 on success and -1 on failure; the reason is
   then in libvips' error buffer (Swift: Vips.takeError()). Images handed back through
   VipsImage ** are new references the caller releases with g_object_unref (Swift:
   VipsImageHandle, through tiler_vips_unref). */
#include <stddef.h>
#include <stdint.h>
#include <vips/vips.h>

/* ---- runtime ------------------------------------------------------------------ */

/* VIPS_INIT, then what every use of libvips in tiler shares: the operation cache off
   (nothing is reused: a cut reads each input once, a drawing opens fresh sources) and
   libvips' own warnings (e.g. "Premature end of JPEG file") kept off stderr unless
   show_warnings (TILER_VIPS_WARNINGS, read in Swift), because tiler reports problems
   itself. Not thread-safe: call it once per process, before any other libvips call
   (Swift: Vips.start(for:), which states what each use needs). */
int tiler_vips_init(const char *program, int show_warnings);

/* Drops one reference to an image (NULL accepted). */
void tiler_vips_unref(VipsImage *image);

/* ---- loading and conversion ----------------------------------------------------- */

/* tiler_vips_open_descriptor's refusals (besides -1, a libvips error). */
#define TILER_OPEN_UNKNOWN_FORMAT -2
#define TILER_OPEN_VECTOR -3

/* Opens the regular file open on `fd` with the loader its content calls for, never
   parsing a file name (a name like "a.jpg[shrink=8]" is just a name: the caller opened
   it). Only the header is read here; pixel errors surface when the image is streamed.
   `random_access` 0 is one top-to-bottom pass (access=sequential); 1 lets libvips
   decode to memory or a temporary file first (for rotations, and for sources served on
   the fly). When `option` is not NULL the loader also gets `option`=`value`: "page" or
   "subifd" (a level of a pyramidal TIFF), or "shrink" (JPEG shrink-on-load, 2, 4 or 8).
   Loaders fail on truncated data (fail_on=truncated; JPEG on any libjpeg warning, since
   libjpeg pads missing scan data with grey and only warns). `*loader` gets the loader's
   nickname (static storage). Returns TILER_OPEN_UNKNOWN_FORMAT when no loader
   recognises the content, and TILER_OPEN_VECTOR, without reading further, for SVG, PDF
   and ImageMagick input unless allow_vector: their size and cost are what the file
   says. SVG is read from a stream without a base location, so librsvg loads no external
   file it references (only data: URLs). `fd` must stay open while the image is used. */
int tiler_vips_open_descriptor(int fd, int random_access, int allow_vector, const char *option, int value,
                               VipsImage **out, const char **loader);

/* The EXIF orientation, 1...8 (1 when there is none). */
int tiler_vips_orientation(VipsImage *in);

/* Applies the EXIF orientation (vips_autorot) and removes the tag. Orientations 3...8
   need an image opened with random access. */
int tiler_vips_autorotate(VipsImage *in, VipsImage **out);

/* What tiles hold; see tiler_vips_to_tile_pixels. */
typedef struct {
    /* Convert an embedded ICC profile of RGB or CMYK input to sRGB. */
    int convert_profile;
    /* Composite alpha on `background` and drop it (JPEG tiles). */
    int flatten_alpha;
    /* Give input without alpha an opaque alpha band (transparent padding). */
    int add_alpha;
    /* 0...255 per channel; grey images use its luminance. */
    double background[3];
    /* The ICC profile file CMYK input without an embedded profile is read through, or
       NULL for libvips' built-in CMYK profile. */
    const char *cmyk_profile;
} tiler_tile_pixels;

/* Converts any image to what tiles hold: 8-bit unsigned, sRGB (3 bands) or grey
   (1 band), plus alpha if the input has one (or add_alpha asks). An embedded profile
   is applied first when asked, and cmyk_profile to CMYK input without one; then colour spaces libvips knows (CMYK, Lab, scRGB,
   ...) go to sRGB; 16-bit input is scaled (>> 8), not clipped; extra bands beyond
   colour + alpha are dropped. */
int tiler_vips_to_tile_pixels(VipsImage *in, const tiler_tile_pixels *options, VipsImage **out);

/* Streams `image` top to bottom through libvips' threaded sink (vips_sink_disc):
   `rows` is called in order, on one thread at a time, with `count` consecutive full
   rows starting at row `top`; row i is at first + i * stride. A non-zero return
   from `rows` stops the stream, and this function then returns -1. */
typedef int (*tiler_rows_fn)(const uint8_t *first, size_t stride, int top, int count, void *context);
int tiler_vips_stream_rows(VipsImage *image, tiler_rows_fn rows, void *context);

/* Wraps 8-bit pixels (rows of width * bands bytes, contiguous) as an image without
   copying; the caller keeps `pixels` alive for the image's lifetime. */
VipsImage *tiler_vips_image_from_pixels(const uint8_t *pixels, int width, int height, int bands);

/* Shrinks `in` so that its longest side is at most `size` (never enlarges). */
int tiler_vips_thumbnail_image(VipsImage *in, int size, VipsImage **out);

/* Reads a whole (small) image into a newly allocated buffer of rows (free with g_free). */
int tiler_vips_pixels(VipsImage *in, uint8_t **pixels, size_t *length);

/* ---- the 2×2 shrink ----------------------------------------------------------------- */

/* One row of the level below from two rows of `width` pixels of 1-4 8-bit bands (or from
   one, the last row of an odd height, when `lower` is NULL): each output pixel is the
   mean of its 2×2 block rounded half up, (a+b+c+d+2)/4, over the 1 or 2 pixels that
   exist at an odd right or bottom edge. `out` holds (width + 1) / 2 pixels. */
void tiler_shrink_rows(const uint8_t *upper, const uint8_t *lower, int width, int bands, uint8_t *out);

/* ---- encoding ------------------------------------------------------------------- */

/* Encodes 8-bit rows (row y at pixels + y * stride) as one JPEG with libjpeg, the way
   libvips' jpegsave with strip does (tiler_render_save_jpeg: same library, same
   settings, same bytes: baseline, Annex K tables scaled to `quality` 1-100, 4:2:0 chroma
   below Q 90 and 4:4:4 from Q 90, no JFIF header, no metadata), into a newly allocated
   buffer (free with free()). `bands` is 1 (grey) or 3 (RGB). On failure returns -1 and
   copies the reason into `message` (up to message_size bytes) when it is not NULL. */
int tiler_jpeg_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int quality,
                      uint8_t **buffer, size_t *length, char *message, size_t message_size);

/* The same for WebP with libwebp, as libvips' webpsave does (tiler_render_save_webp):
   lossy at `quality` 0-100, the default preset, effort 4, alpha at quality 100; 1-4
   bands (grey is written as RGB). */
int tiler_webp_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int quality,
                      uint8_t **buffer, size_t *length, char *message, size_t message_size);

/* Encodes 8-bit pixels (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA bands) as a PNG with libpng
   into a newly allocated buffer (free with free()). `filters` is a PNG_FILTER_* mask,
   `zlib_level` 0-9, `zlib_strategy` a zlib Z_* strategy. On failure returns -1 and, if
   `message` is not NULL, copies libpng's reason into it (up to message_size bytes). */
int tiler_png_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands,
                     int zlib_level, int filters, int zlib_strategy,
                     uint8_t **buffer, size_t *length, char *message, size_t message_size);

/* The same PNG through libdeflate: one IDAT, every row with the one filter `filter`
   (0 none, 1 sub, 2 up, 3 average, 4 paeth), compressed at libdeflate `level` (0-12).
   Returns 0 with a malloc'd buffer, or -1 with the reason in `message`. */
int tiler_png_deflate_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int level,
                             int filter, uint8_t **buffer, size_t *length, char *message, size_t message_size);

#endif
