#include "CTilerShims.h"

static void tiler_ignore_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void) domain; (void) level; (void) message; (void) data;
}

int tiler_vips_init(const char *program) {
    if (VIPS_INIT(program) != 0) return -1;
    vips_cache_set_max(0);
    if (!g_getenv("TILER_VIPS_WARNINGS"))
        g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING, tiler_ignore_log, NULL);
    return 0;
}

char *tiler_vips_error_copy(void) {
    return vips_error_buffer_copy();
}

void tiler_vips_unref(VipsImage *image) {
    if (image) g_object_unref(image);
}

int tiler_vips_open_sequential(const char *path, VipsImage **out) {
    *out = vips_image_new_from_file(path,
                                    "access", VIPS_ACCESS_SEQUENTIAL,
                                    "fail_on", VIPS_FAIL_ON_TRUNCATED,
                                    NULL);
    return *out ? 0 : -1;
}

/* Replaces *image by the result of an operation, dropping the old reference. */
static int tiler_step(VipsImage **image, int result, VipsImage *next) {
    if (result != 0) return -1;
    g_object_unref(*image);
    *image = next;
    return 0;
}

int tiler_vips_to_tile_pixels(VipsImage *in, int flatten_alpha, VipsImage **out) {
    VipsImage *image = in;
    VipsImage *next = NULL;
    g_object_ref(image);
    *out = NULL;

    VipsInterpretation kind = vips_image_guess_interpretation(image);
    gboolean grey = kind == VIPS_INTERPRETATION_B_W || kind == VIPS_INTERPRETATION_GREY16 ||
                    (kind == VIPS_INTERPRETATION_MULTIBAND && image->Bands <= 2);
    VipsInterpretation target = grey ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;

    if (vips_colourspace_issupported(image) && kind != target) {
        if (tiler_step(&image, vips_colourspace(image, &next, target, NULL), next)) goto fail;
    }
    if (image->BandFmt != VIPS_FORMAT_UCHAR) {
        /* shift: 16-bit values are scaled to 8 bits rather than clipped. */
        gboolean shift = image->BandFmt == VIPS_FORMAT_USHORT || image->BandFmt == VIPS_FORMAT_UINT;
        if (tiler_step(&image, vips_cast(image, &next, VIPS_FORMAT_UCHAR, "shift", shift, NULL), next)) goto fail;
    }
    int colour = grey ? 1 : 3;
    int alpha = vips_image_hasalpha(image) ? 1 : 0;
    if (image->Bands < colour) {
        /* A 2-band image that is not grey+alpha: treat band 0 as grey. */
        colour = 1;
        alpha = 0;
    }
    if (image->Bands > colour + alpha) {
        if (alpha) {
            VipsImage *colour_bands = NULL, *alpha_band = NULL;
            if (vips_extract_band(image, &colour_bands, 0, "n", colour, NULL)) goto fail;
            if (vips_extract_band(image, &alpha_band, image->Bands - 1, NULL)) {
                g_object_unref(colour_bands);
                goto fail;
            }
            int r = vips_bandjoin2(colour_bands, alpha_band, &next, NULL);
            g_object_unref(colour_bands);
            g_object_unref(alpha_band);
            if (tiler_step(&image, r, next)) goto fail;
        } else {
            if (tiler_step(&image, vips_extract_band(image, &next, 0, "n", colour, NULL), next)) goto fail;
        }
    }
    if (flatten_alpha && alpha) {
        double white[1] = {255.0};
        VipsArrayDouble *background = vips_array_double_new(white, 1);
        int r = vips_flatten(image, &next, "background", background, NULL);
        vips_area_unref(VIPS_AREA(background));
        if (tiler_step(&image, r, next)) goto fail;
        if (image->BandFmt != VIPS_FORMAT_UCHAR &&
            tiler_step(&image, vips_cast(image, &next, VIPS_FORMAT_UCHAR, NULL), next)) goto fail;
    }
    *out = image;
    return 0;
fail:
    g_object_unref(image);
    return -1;
}

typedef struct {
    tiler_rows_fn rows;
    void *context;
} tiler_stream;

static int tiler_stream_write(VipsRegion *region, VipsRect *area, void *a) {
    tiler_stream *stream = a;
    const uint8_t *first = (const uint8_t *) VIPS_REGION_ADDR(region, area->left, area->top);
    size_t stride = VIPS_REGION_LSKIP(region);
    return stream->rows(first, stride, area->top, area->height, stream->context) ? -1 : 0;
}

int tiler_vips_stream_rows(VipsImage *image, tiler_rows_fn rows, void *context) {
    tiler_stream stream = {rows, context};
    return vips_sink_disc(image, tiler_stream_write, &stream);
}

VipsImage *tiler_vips_image_from_pixels(const uint8_t *pixels, int width, int height, int bands) {
    return vips_image_new_from_memory(pixels, (size_t) width * height * bands, width, height, bands,
                                      VIPS_FORMAT_UCHAR);
}

int tiler_vips_thumbnail_image(VipsImage *in, int size, VipsImage **out) {
    return vips_thumbnail_image(in, out, size, "height", size, "size", VIPS_SIZE_DOWN, NULL);
}

int tiler_vips_pixels(VipsImage *in, uint8_t **pixels, size_t *length) {
    *pixels = vips_image_write_to_memory(in, length);
    return *pixels ? 0 : -1;
}

int tiler_vips_jpegsave_buffer(VipsImage *in, int quality, void **buffer, size_t *length) {
    return vips_jpegsave_buffer(in, buffer, length, "Q", quality, "strip", TRUE, NULL);
}

int tiler_vips_webpsave_buffer(VipsImage *in, int quality, void **buffer, size_t *length) {
    return vips_webpsave_buffer(in, buffer, length, "Q", quality, "strip", TRUE, NULL);
}
