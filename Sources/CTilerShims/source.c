#include "CTilerShimsSource.h"

int tiler_source_get_int(VipsImage *in, const char *name, int fallback) {
    int value;
    if (vips_image_get_typeof(in, name) && vips_image_get_int(in, name, &value) == 0) return value;
    return fallback;
}

int tiler_source_has_icc(VipsImage *in) {
    return vips_image_get_typeof(in, VIPS_META_ICC_NAME) != 0;
}

int tiler_source_region(VipsImage *in, int left, int top, int width, int height,
                        uint8_t **pixels, size_t *length) {
    *pixels = NULL;
    *length = 0;
    if (left < 0 || top < 0 || width <= 0 || height <= 0 || width > in->Xsize - left || height > in->Ysize - top) {
        vips_error("tiler", "region %dx%d at %d,%d is outside the %dx%d image", width, height, left, top,
                   in->Xsize, in->Ysize);
        return -1;
    }
    VipsImage *crop = NULL;
    if (vips_crop(in, &crop, left, top, width, height, NULL)) return -1;
    *pixels = vips_image_write_to_memory(crop, length);
    g_object_unref(crop);
    return *pixels ? 0 : -1;
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
    r = vips_thumbnail_image(cast, &small, size, "height", size, "size", VIPS_SIZE_DOWN, NULL);
    g_object_unref(cast);
    if (r) return -1;
    *out_width = small->Xsize;
    *out_height = small->Ysize;
    g_object_unref(small);
    return 0;
}
