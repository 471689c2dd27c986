#include "CTilerShims.h"
#include <stdio.h>
#include <unistd.h>

static void tiler_ignore_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void) domain; (void) level; (void) message; (void) data;
}

int tiler_vips_init(const char *program, int show_warnings) {
    if (VIPS_INIT(program) != 0) return -1;
    vips_cache_set_max(0);
    if (!show_warnings)
        g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING, tiler_ignore_log, NULL);
    return 0;
}

void tiler_vips_unref(VipsImage *image) {
    if (image) g_object_unref(image);
}

/* Loaders that render vector or scripted input (SVG, PDF, and ImageMagick, which also
   reads MVG, EPS and SVG): their output size and cost are whatever the file says. */
static gboolean tiler_is_vector_loader(const char *nickname) {
    return g_str_has_prefix(nickname, "svgload") || g_str_has_prefix(nickname, "pdfload") ||
           g_str_has_prefix(nickname, "magickload");
}

int tiler_vips_open_descriptor(int fd, int random_access, int allow_vector, const char *option, int value,
                               VipsImage **out, const char **loader) {
    *out = NULL;
    *loader = NULL;
    /* A file source named /proc/self/fd/N reopens this very file (never another one
       under the same name), keeps the loaders that need a file name (vips, OpenSlide,
       ImageMagick) and lets libvips close and reopen it as usual. Without /proc, the
       descriptor itself. Either way the user's file name never reaches libvips. */
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    gboolean named = access(path, R_OK) == 0;
    VipsSource *source = named ? vips_source_new_from_file(path) : vips_source_new_from_descriptor(fd);
    if (!source) return -1;

    vips_error_freeze();
    const char *operation = vips_foreign_find_load_source(source);
    gboolean by_name = FALSE;
    if (!operation && named && (operation = vips_foreign_find_load(path))) by_name = TRUE;
    vips_error_thaw();
    if (!operation) {
        g_object_unref(source);
        return TILER_OPEN_UNKNOWN_FORMAT;
    }
    const VipsObjectClass *class = vips_class_find("VipsForeignLoad", operation);
    *loader = class ? class->nickname : operation;
    if (!allow_vector && tiler_is_vector_loader(*loader)) {
        g_object_unref(source);
        return TILER_OPEN_VECTOR;
    }
    VipsAccess access_mode = random_access ? VIPS_ACCESS_RANDOM : VIPS_ACCESS_SEQUENTIAL;
    /* libjpeg reports missing scan data ("premature end of data segment") as a
       warning and pads with grey, so JPEG fails on warnings; other loaders on
       truncation (libpng, libtiff and friends warn about harmless things). */
    VipsFailOn fail_on = g_str_has_prefix(*loader, "jpegload") ? VIPS_FAIL_ON_WARNING : VIPS_FAIL_ON_TRUNCATED;
    int result;
    if (option)
        result = by_name
            ? vips_call(operation, path, out, "access", access_mode, "fail_on", fail_on, option, value, NULL)
            : vips_call(operation, source, out, "access", access_mode, "fail_on", fail_on, option, value, NULL);
    else
        result = by_name
            ? vips_call(operation, path, out, "access", access_mode, "fail_on", fail_on, NULL)
            : vips_call(operation, source, out, "access", access_mode, "fail_on", fail_on, NULL);
    g_object_unref(source);
    if (result != 0) {
        *out = NULL;
        return -1;
    }
    return 0;
}

int tiler_vips_orientation(VipsImage *in) {
    return vips_image_get_orientation(in);
}

int tiler_vips_autorotate(VipsImage *in, VipsImage **out) {
    return vips_autorot(in, out, NULL);
}

/* Replaces *image by the result of an operation, dropping the old reference. */
static int tiler_step(VipsImage **image, int result, VipsImage *next) {
    if (result != 0) return -1;
    g_object_unref(*image);
    *image = next;
    return 0;
}

/* The flatten or padding colour for an image of `colour` bands: the RGB value, or its
   luminance (Rec. 709, as libvips' sRGB to B_W) for grey. */
static VipsArrayDouble *tiler_background(const double rgb[3], int colour) {
    double grey = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
    return colour == 1 ? vips_array_double_new(&grey, 1) : vips_array_double_new(rgb, 3);
}

int tiler_vips_to_tile_pixels(VipsImage *in, const tiler_tile_pixels *options, VipsImage **out) {
    VipsImage *image = in;
    VipsImage *next = NULL;
    g_object_ref(image);
    *out = NULL;

    VipsInterpretation kind = vips_image_guess_interpretation(image);
    gboolean grey = kind == VIPS_INTERPRETATION_B_W || kind == VIPS_INTERPRETATION_GREY16 ||
                    (kind == VIPS_INTERPRETATION_MULTIBAND && image->Bands <= 2);

    /* An embedded profile on colour input: to sRGB through it (lcms, relative
       colorimetric, libvips' built-in sRGB profile). CMYK input without one goes
       through cmyk_profile the same way when there is one (else vips_colourspace
       below uses libvips' built-in CMYK profile). 16-bit input stays 16-bit here and
       is scaled below like any other. Grey input keeps its stored values. */
    gboolean colour_kind = kind == VIPS_INTERPRETATION_sRGB || kind == VIPS_INTERPRETATION_RGB ||
                           kind == VIPS_INTERPRETATION_RGB16 || kind == VIPS_INTERPRETATION_CMYK;
    gboolean embedded = vips_image_get_typeof(image, VIPS_META_ICC_NAME) != 0;
    int depth = image->BandFmt == VIPS_FORMAT_USHORT ? 16 : 8;
    if (options->convert_profile && colour_kind && embedded) {
        if (tiler_step(&image, vips_icc_transform(image, &next, "srgb", "embedded", TRUE,
                                                  "intent", VIPS_INTENT_RELATIVE, "depth", depth, NULL), next))
            goto fail;
        kind = vips_image_guess_interpretation(image);
    } else if (kind == VIPS_INTERPRETATION_CMYK && !embedded && options->cmyk_profile) {
        if (tiler_step(&image, vips_icc_transform(image, &next, "srgb", "input_profile", options->cmyk_profile,
                                                  "intent", VIPS_INTENT_RELATIVE, "depth", depth, NULL), next))
            goto fail;
        kind = vips_image_guess_interpretation(image);
    }

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
    if (options->flatten_alpha && alpha) {
        VipsArrayDouble *background = tiler_background(options->background, colour);
        int r = vips_flatten(image, &next, "background", background, NULL);
        vips_area_unref(VIPS_AREA(background));
        if (tiler_step(&image, r, next)) goto fail;
        if (image->BandFmt != VIPS_FORMAT_UCHAR &&
            tiler_step(&image, vips_cast(image, &next, VIPS_FORMAT_UCHAR, NULL), next)) goto fail;
    } else if (options->add_alpha && !alpha) {
        if (tiler_step(&image, vips_addalpha(image, &next, NULL), next)) goto fail;
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
