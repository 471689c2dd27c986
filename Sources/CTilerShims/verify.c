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
    double mean = 0;
    int status = vips_avg(image, &mean, NULL);
    g_object_unref(image);
    return status == 0 ? TILER_CHECK_OK : TILER_CHECK_UNDECODABLE;
}
