#ifndef CTILERSHIMS_VERIFY_H
#define CTILERSHIMS_VERIFY_H
/* The check `tiler verify` makes of each stored tile and thumbnail. */
#include <stddef.h>

/* What tiler_vips_check_encoded found. */
#define TILER_CHECK_OK 0
/* libvips failed to read or decode it; the reason is in the error buffer. */
#define TILER_CHECK_UNDECODABLE -1
/* Another format than `format` (or none libvips knows); *loader names what it is. */
#define TILER_CHECK_WRONG_FORMAT -2
/* Its header gives another size than expected (*width, *height); no pixel was decoded. */
#define TILER_CHECK_WRONG_SIZE -3

/* Checks that `data` is one image of `format` ("png", "jpeg" or "webp") that decodes
   whole at expected_width × expected_height. The loader is chosen by content and must be
   that format's (so no SVG, PDF or other loader ever runs on a tile). The header's size
   is compared before any pixel is decoded, so work and memory are bounded by the expected
   size whatever the file claims; then every pixel is decoded in one top-to-bottom pass
   (vips_avg over sequential access), failing on any decoder warning (fail_on=warning:
   truncated data, bad CRCs and corrupt JPEG scans all fail). `*loader` (static storage)
   names the loader found, `*width`, `*height` and `*bands` what the header says. */
int tiler_vips_check_encoded(const void *data, size_t length, const char *format, int expected_width,
                             int expected_height, const char **loader, int *width, int *height, int *bands);

#endif
