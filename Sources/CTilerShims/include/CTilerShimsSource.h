#ifndef CTILERSHIMS_SOURCE_H
#define CTILERSHIMS_SOURCE_H
/* Fixed-arity wrappers for the libvips calls that serve a source image on the fly
   (`tiler serve --sources`): one page or reduced level of the source opened for random
   access (tiler_vips_open_descriptor with random_access and a loader option), and a
   tile's pixels cropped out of it. Functions returning int give 0 on success and -1 on
   failure, the reason in libvips' error buffer. */
#include "CTilerShims.h"

/* An integer header field (n-pages, n-subifds), or `fallback` when absent. */
int tiler_source_get_int(VipsImage *in, const char *name, int fallback);

/* Whether the image carries an embedded ICC profile. */
int tiler_source_has_icc(VipsImage *in);

/* `in` made `width` × `height` (never smaller) by repeating its last column and row
   (VIPS_EXTEND_COPY): a reduced level stored a pixel smaller than the pyramid's level
   (TIFF pyramids and JPEG shrink-on-load round sizes down, the geometry rounds up). */
int tiler_source_extend(VipsImage *in, int width, int height, VipsImage **out);

/* The pixels of the rectangle (left, top, width, height) of `in` (8-bit, any bands),
   which must lie inside it, computed in the calling thread into `pixels`: rows of
   width × bands bytes, `length` bytes in all (anything else is an error). */
int tiler_source_region(VipsImage *in, int left, int top, int width, int height,
                        uint8_t *pixels, size_t length);

/* The bytes of temporary disk libvips takes to read `in` (just opened by `loader` from
   the file open as descriptor `fd`, with random access) a region at a time: 0 when the
   loader reads regions straight from the file (VIPS_FORMAT_PARTIAL: a tiled TIFF, a .v
   file), else the whole decoded image, which libvips writes to a deleted temporary file
   in TMPDIR when it is larger than the disc threshold (VIPS_DISC_THRESHOLD), else keeps
   in memory (then 0 here). */
unsigned long long tiler_source_spill_bytes(VipsImage *in, const char *loader, int fd);

/* A black image of the given size (never computed): its thumbnail's size is what the
   cutter's thumbnail of a level of that size would be. */
int tiler_source_thumbnail_size(int width, int height, int bands, int size, int *out_width, int *out_height);

#endif
