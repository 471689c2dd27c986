#include "CTilerShimsVerify.h"
#include <string.h>
#include <vips/vips.h>

int tiler_vips_check_encoded(const void *data, size_t length, const char *format, int expected_width,
                             int expected_height, const char **loader, int *width, int *height, int *bands) {
    *loader = "none";
    *width = *height = *bands = 0;
    vips_error_freeze();
    const char *operation = vips_foreign_find_load_buffer(data, length);
    vips_error_thaw();
    if (!operation) return TILER_CHECK_WRONG_FORMAT;
    const VipsObjectClass *class = vips_class_find("VipsForeignLoad", operation);
    *loader = class ? class->nickname : operation;
    /* Nicknames are "pngload_buffer", "jpegload_buffer", "webpload_buffer". */
    const char *want = strcmp(format, "png") == 0 ? "pngload" : strcmp(format, "jpeg") == 0 ? "jpegload" : "webpload";
    if (!g_str_has_prefix(*loader, want)) return TILER_CHECK_WRONG_FORMAT;

    VipsImage *image = vips_image_new_from_buffer(data, length, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                                  "fail_on", VIPS_FAIL_ON_WARNING, NULL);
    if (!image) return TILER_CHECK_UNDECODABLE;
    *width = vips_image_get_width(image);
    *height = vips_image_get_height(image);
    *bands = vips_image_get_bands(image);
    if (*width != expected_width || *height != expected_height) {
        g_object_unref(image);
        return TILER_CHECK_WRONG_SIZE;
    }
    /* Every pixel is decoded here, in the calling thread, through one region over the whole
       image: the loader's errors come back as this call's status. Not through a sink such as
       vips_avg: libvips 8.14's threadpool reads its error flag before the last workers have
       finished (fixed in 8.15.4, libvips#4116), so a decode error in the last work units was
       sometimes lost and a corrupt tile passed. The size was checked above, so the region
       holds at most one expected tile. */
    VipsRegion *region = vips_region_new(image);
    VipsRect whole = {0, 0, *width, *height};
    int status = region ? vips_region_prepare(region, &whole) : -1;
    if (region) g_object_unref(region);
    g_object_unref(image);
    return status == 0 ? TILER_CHECK_OK : TILER_CHECK_UNDECODABLE;
}
