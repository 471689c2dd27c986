#ifndef CTILERSHIMS_RENDER_H
#define CTILERSHIMS_RENDER_H
/* Fixed-arity wrappers for the libvips calls the region renderer (IIIF, DeepZoom levels
   below the pyramid) makes. Functions returning int give 0 on success and -1 on failure;
   functions returning a pointer give NULL on failure. Either way the reason is in
   vips_error_buffer(). Every output image is a new reference the caller unrefs
   (tiler_vips_unref: Swift's VipsImageHandle). */
#include <stddef.h>
#include <vips/vips.h>

/* Fixes glibc's malloc thresholds for drawing (M_MMAP_THRESHOLD 1 MiB, M_TRIM_THRESHOLD
   4 MiB), process-wide, so that the memory of large drawings goes back to the system
   when freed. Called once, by the first drawing (Swift: Vips.start(for: .drawing));
   libvips itself is started by tiler_vips_init like every other use. */
void tiler_render_fix_malloc_thresholds(void);

/* Opens an encoded image (PNG, JPEG, WebP) from bytes the caller has already read: the
   renderer never opens a file itself, so every read goes through the server's rooted,
   no-follow, regular-file-only, size-bounded open. The bytes are copied into a blob that
   libvips owns. A truncated image is an error when its pixels are read, never grey filler
   (fail_on truncated). `sequential` non-zero asks for top-to-bottom access (rows are
   decoded as they are needed and not kept); zero decodes the whole image on first use. */
VipsImage *tiler_render_load_bytes(const void *data, size_t length, int sequential);

/* Computes in into memory (vips_image_copy_memory): the result can be read in any order
   whatever the access of in. */
int tiler_render_copy_memory(VipsImage *in, VipsImage **out);

/* Hands memory freed by renders back to the system (malloc_trim): glibc keeps freed
   blocks in per-thread arenas otherwise, so RSS never falls after a large render. */
void tiler_render_release_memory(void);

/* Lays out n images in a grid `across` images wide, each cell as large as the largest
   image (vips_arrayjoin). */
int tiler_render_arrayjoin(VipsImage **in, int n, int across, VipsImage **out);

/* The rectangle left, top, width × height of in (vips_extract_area). */
int tiler_render_crop(VipsImage *in, VipsImage **out, int left, int top, int width, int height);

/* Resamples in by hscale horizontally and vscale vertically (vips_resize, lanczos3 when
   shrinking), then crops or extends by edge copying so the result is exactly
   width × height whatever the rounding inside libvips. */
int tiler_render_resize_exact(VipsImage *in, VipsImage **out, int width, int height);

/* Left-right mirror image (vips_flip horizontal). */
int tiler_render_mirror(VipsImage *in, VipsImage **out);

/* Clockwise rotation by a multiple of 90 degrees: quarter_turns 0...3 (vips_rot). */
int tiler_render_rot90s(VipsImage *in, VipsImage **out, int quarter_turns);

/* Clockwise rotation by any angle onto a canvas that holds the whole rotated image,
   filled with the background value (0...255) in every band (vips_rotate). */
int tiler_render_rotate(VipsImage *in, VipsImage **out, double degrees, double background);

/* Converts to a colour space: VIPS_INTERPRETATION_sRGB or VIPS_INTERPRETATION_B_W
   (vips_colourspace), keeping any alpha band. */
int tiler_render_colourspace(VipsImage *in, VipsImage **out, VipsInterpretation space);

/* Removes an alpha band by compositing onto a grey level 0...255 (vips_flatten). Images
   without alpha are returned as a new reference unchanged. */
int tiler_render_flatten(VipsImage *in, VipsImage **out, double background);

/* Adds an opaque alpha band (vips_addalpha) unless there is one already. */
int tiler_render_add_alpha(VipsImage *in, VipsImage **out);

/* 255 where the (single-band) image is >= threshold, else 0, as 8-bit (vips_moreeq_const1). */
int tiler_render_threshold(VipsImage *in, VipsImage **out, double threshold);

/* Encodes to memory. The buffer is g_malloc'd; free it with g_free. */
int tiler_render_save_jpeg(VipsImage *in, void **buffer, size_t *length, int quality);
int tiler_render_save_png(VipsImage *in, void **buffer, size_t *length);
int tiler_render_save_webp(VipsImage *in, void **buffer, size_t *length, int quality);

/* Decodes an encoded image (PNG, JPEG, WebP, ...) to 8-bit pixels, rows of
   width * bands bytes, in a newly allocated buffer (free with g_free). For tests and
   checks, not for serving: the whole image is held in memory. */
int tiler_render_decode(const void *data, size_t size, unsigned char **pixels, size_t *length,
                        int *width, int *height, int *bands);

#endif
