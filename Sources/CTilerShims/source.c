#include "CTilerShimsSource.h"
#include <stdio.h>
#include <string.h>

int tiler_source_get_int(VipsImage *in, const char *name, int fallback) {
    int value;
    if (vips_image_get_typeof(in, name) && vips_image_get_int(in, name, &value) == 0) return value;
    return fallback;
}

int tiler_source_has_icc(VipsImage *in) {
    return vips_image_get_typeof(in, VIPS_META_ICC_NAME) != 0;
}

int tiler_source_region(VipsImage *in, int left, int top, int width, int height,
                        uint8_t *pixels, size_t length) {
    if (left < 0 || top < 0 || width <= 0 || height <= 0 || width > in->Xsize - left || height > in->Ysize - top) {
        vips_error("tiler", "region %dx%d at %d,%d is outside the %dx%d image", width, height, left, top,
                   in->Xsize, in->Ysize);
        return -1;
    }
    size_t row = (size_t)VIPS_IMAGE_SIZEOF_PEL(in) * (size_t)width;
    if (length != row * (size_t)height) {
        vips_error("tiler", "a %dx%d region of %d bytes per pixel is not %zu bytes", width, height,
                   (int)VIPS_IMAGE_SIZEOF_PEL(in), length);
        return -1;
    }
    /* Computed in the calling thread through one region, not by a sink such as
       vips_image_write_to_memory: a sink runs libvips' threadpool for every tile, and
       libvips 8.14's threadpool reads its error flag before its last workers finish
       (libvips#4116, fixed in 8.15.4), so a read error in the rows computed last (a
       damaged tile of a tiled TIFF, say) could come back as black rows, not an error.
       (A plain JPEG or strip TIFF is first decoded whole by libvips' loader, which still
       goes through that threadpool: see docs/reliability.md.) */
    VipsRegion *region = vips_region_new(in);
    if (!region) return -1;
    VipsRect rect = {left, top, width, height};
    if (vips_region_prepare(region, &rect)) {
        g_object_unref(region);
        return -1;
    }
    for (int y = 0; y < height; y++) memcpy(pixels + row * (size_t)y, VIPS_REGION_ADDR(region, left, top + y), row);
    g_object_unref(region);
    return 0;
}

unsigned long long tiler_source_spill_bytes(VipsImage *in, const char *loader, int fd) {
    guint64 size = VIPS_IMAGE_SIZEOF_IMAGE(in);
    if (size <= vips_get_disc_threshold()) return 0;
    /* The flags of the file loader of that format (tiffload for tiffload_source), asked
       about the same file: a loader without one counts as a full decode. */
    char name[64], path[64];
    g_strlcpy(name, loader, sizeof name);
    char *suffix = strstr(name, "_source");
    if (suffix) *suffix = 0;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    vips_error_freeze();
    VipsForeignFlags flags = vips_foreign_flags(name, path);
    vips_error_thaw();
    return (flags & VIPS_FORMAT_PARTIAL) ? 0 : size;
}

int tiler_source_extend(VipsImage *in, int width, int height, VipsImage **out) {
    *out = NULL;
    if (width < in->Xsize || height < in->Ysize) {
        vips_error("tiler", "cannot extend a %dx%d image to %dx%d", in->Xsize, in->Ysize, width, height);
        return -1;
    }
    return vips_embed(in, out, 0, 0, width, height, "extend", VIPS_EXTEND_COPY, NULL);
}

int tiler_source_thumbnail_size(int width, int height, int bands, int size, int *out_width, int *out_height) {
    VipsImage *black = NULL, *small = NULL;
    if (vips_black(&black, width, height, "bands", bands, NULL)) return -1;
    VipsImage *cast = NULL;
    int r = vips_cast(black, &cast, VIPS_FORMAT_UCHAR, NULL);
    g_object_unref(black);
    if (r) return -1;
    r = tiler_vips_thumbnail_image(cast, size, &small);
    g_object_unref(cast);
    if (r) return -1;
    *out_width = small->Xsize;
    *out_height = small->Ysize;
    g_object_unref(small);
    return 0;
}
