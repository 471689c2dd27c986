#include "CTilerShimsRender.h"

#include <malloc.h>

void tiler_render_fix_malloc_thresholds(void) {
    /* Drawings allocate and free buffers of many megabytes. With glibc's default
       (dynamic) thresholds, freeing one raises the mmap threshold, later buffers come
       from the per-thread arenas, and the free space at their tops is never given back
       (malloc_trim does not shrink them). Fixed thresholds keep buffers of 1 MiB and
       more in their own mappings, returned on free, and trim arenas past 4 MiB. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 4 << 20);
}

VipsImage *tiler_render_load_bytes(const void *data, size_t length, int sequential) {
    VipsBlob *blob = vips_blob_new((VipsCallbackFn) g_free, g_memdup2(data, length), length);
    VipsSource *source = vips_source_new_from_blob(blob);
    vips_area_unref(VIPS_AREA(blob));
    if (!source) return NULL;
    VipsImage *image = vips_image_new_from_source(source, "",
        "access", sequential ? VIPS_ACCESS_SEQUENTIAL : VIPS_ACCESS_RANDOM,
        "fail_on", VIPS_FAIL_ON_TRUNCATED, NULL);
    g_object_unref(source);
    return image;
}

int tiler_render_copy_memory(VipsImage *in, VipsImage **out) {
    *out = vips_image_copy_memory(in);
    return *out ? 0 : -1;
}

void tiler_render_release_memory(void) {
    malloc_trim(0);
}

int tiler_render_arrayjoin(VipsImage **in, int n, int across, VipsImage **out) {
    return vips_arrayjoin(in, out, n, "across", across, NULL);
}

int tiler_render_crop(VipsImage *in, VipsImage **out, int left, int top, int width, int height) {
    return vips_extract_area(in, out, left, top, width, height, NULL);
}

int tiler_render_resize_exact(VipsImage *in, VipsImage **out, int width, int height) {
    int w = vips_image_get_width(in), h = vips_image_get_height(in);
    VipsImage *resized = NULL;
    if (w == width && h == height) {
        g_object_ref(in);
        *out = in;
        return 0;
    }
    if (vips_resize(in, &resized, (double) width / w, "vscale", (double) height / h, NULL)) return -1;
    int rw = vips_image_get_width(resized), rh = vips_image_get_height(resized);
    if (rw == width && rh == height) {
        *out = resized;
        return 0;
    }
    /* Off by a pixel from libvips' rounding: extend by copying the edge, then crop. */
    VipsImage *extended = NULL;
    int ew = rw < width ? width : rw, eh = rh < height ? height : rh;
    int result = vips_embed(resized, &extended, 0, 0, ew, eh, "extend", VIPS_EXTEND_COPY, NULL);
    g_object_unref(resized);
    if (result) return -1;
    result = vips_extract_area(extended, out, 0, 0, width, height, NULL);
    g_object_unref(extended);
    return result;
}

int tiler_render_mirror(VipsImage *in, VipsImage **out) {
    return vips_flip(in, out, VIPS_DIRECTION_HORIZONTAL, NULL);
}

int tiler_render_rot90s(VipsImage *in, VipsImage **out, int quarter_turns) {
    static const VipsAngle angles[4] = { VIPS_ANGLE_D0, VIPS_ANGLE_D90, VIPS_ANGLE_D180, VIPS_ANGLE_D270 };
    return vips_rot(in, out, angles[((quarter_turns % 4) + 4) % 4], NULL);
}

int tiler_render_rotate(VipsImage *in, VipsImage **out, double degrees, double background) {
    int bands = vips_image_get_bands(in);
    double values[16];
    if (bands > 16) bands = 16;
    for (int i = 0; i < bands; i++) values[i] = background;
    VipsArrayDouble *bg = vips_array_double_new(values, bands);
    int result = vips_rotate(in, out, degrees, "background", bg, NULL);
    vips_area_unref(VIPS_AREA(bg));
    return result;
}

int tiler_render_colourspace(VipsImage *in, VipsImage **out, VipsInterpretation space) {
    return vips_colourspace(in, out, space, NULL);
}

int tiler_render_flatten(VipsImage *in, VipsImage **out, double background) {
    if (!vips_image_hasalpha(in)) {
        g_object_ref(in);
        *out = in;
        return 0;
    }
    /* One value: libvips applies it to every colour band. */
    VipsArrayDouble *bg = vips_array_double_new(&background, 1);
    int result = vips_flatten(in, out, "background", bg, NULL);
    vips_area_unref(VIPS_AREA(bg));
    return result;
}

int tiler_render_add_alpha(VipsImage *in, VipsImage **out) {
    if (vips_image_hasalpha(in)) {
        g_object_ref(in);
        *out = in;
        return 0;
    }
    return vips_addalpha(in, out, NULL);
}

int tiler_render_threshold(VipsImage *in, VipsImage **out, double threshold) {
    return vips_moreeq_const1(in, out, threshold, NULL);
}

int tiler_render_save_jpeg(VipsImage *in, void **buffer, size_t *length, int quality) {
    return vips_jpegsave_buffer(in, buffer, length, "Q", quality, "strip", TRUE, NULL);
}

int tiler_render_save_png(VipsImage *in, void **buffer, size_t *length) {
    return vips_pngsave_buffer(in, buffer, length, "strip", TRUE, NULL);
}

int tiler_render_save_webp(VipsImage *in, void **buffer, size_t *length, int quality) {
    return vips_webpsave_buffer(in, buffer, length, "Q", quality, "strip", TRUE, NULL);
}

int tiler_render_decode(const void *data, size_t size, unsigned char **pixels, size_t *length,
                        int *width, int *height, int *bands) {
    VipsImage *image = tiler_render_load_bytes(data, size, 0);
    if (!image) return -1;
    VipsImage *bytes = NULL;
    if (vips_cast_uchar(image, &bytes, NULL)) {
        g_object_unref(image);
        return -1;
    }
    g_object_unref(image);
    *width = vips_image_get_width(bytes);
    *height = vips_image_get_height(bytes);
    *bands = vips_image_get_bands(bytes);
    *pixels = vips_image_write_to_memory(bytes, length);
    g_object_unref(bytes);
    return *pixels ? 0 : -1;
}
