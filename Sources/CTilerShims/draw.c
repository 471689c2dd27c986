/* Drawing from JPEG tiles without libvips (see CTilerShimsDraw.h). A small drawing through
   libvips pays for a pipeline per request and per tile, its thread pool's wake-ups and
   fresh buffers; here each covering tile is decoded once by libjpeg into the caller's
   buffer, and the region is resampled in one pass over it. */
#include "CTilerShimsDraw.h"
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
/* jpeglib.h needs stdio.h first. */
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>
#include <webp/decode.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char *message;
    size_t message_size;
} tiler_draw_error;

static void tiler_draw_error_exit(j_common_ptr cinfo) {
    tiler_draw_error *error = (tiler_draw_error *) cinfo->err;
    if (error->message && error->message_size) {
        char text[JMSG_LENGTH_MAX];
        (*cinfo->err->format_message)(cinfo, text);
        snprintf(error->message, error->message_size, "%s", text);
    }
    longjmp(error->jump, 1);
}

/* A warning (data cut short, a corrupt marker: libjpeg pads with grey and goes on) fails
   the decode, as libvips' loaders do with fail_on=truncated; traces are ignored. */
static void tiler_draw_emit_message(j_common_ptr cinfo, int level) {
    if (level < 0) tiler_draw_error_exit(cinfo);
}

static void tiler_draw_silent(j_common_ptr cinfo) { (void) cinfo; }

static int tiler_draw_valid_denominator(int denominator) {
    return denominator == 1 || denominator == 2 || denominator == 4 || denominator == 8;
}

int tiler_draw_decode_jpeg(const uint8_t *data, size_t size, int denominator, int bands, uint8_t *out,
                           size_t stride, int max_width, int max_height, int *width, int *height, char *message,
                           size_t message_size) {
    if (message && message_size) message[0] = 0;
    if (!tiler_draw_valid_denominator(denominator) || (bands != 1 && bands != 3) || !data || size == 0) {
        if (message && message_size) snprintf(message, message_size, "bad decode request");
        return -1;
    }
    struct jpeg_decompress_struct cinfo;
    tiler_draw_error error = {.message = message, .message_size = message_size};
    cinfo.err = jpeg_std_error(&error.manager);
    error.manager.error_exit = tiler_draw_error_exit;
    error.manager.emit_message = tiler_draw_emit_message;
    error.manager.output_message = tiler_draw_silent;
    if (setjmp(error.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long) size);
    jpeg_read_header(&cinfo, TRUE);
    cinfo.scale_num = 1;
    cinfo.scale_denom = (unsigned int) denominator;
    cinfo.out_color_space = bands == 3 ? JCS_RGB : JCS_GRAYSCALE;
    /* libvips' jpegload defaults: the accurate integer IDCT and fancy upsampling. */
    cinfo.dct_method = JDCT_ISLOW;
    jpeg_calc_output_dimensions(&cinfo);
    if ((int) cinfo.output_width > max_width || (int) cinfo.output_height > max_height ||
        cinfo.output_components != bands) {
        if (message && message_size)
            snprintf(message, message_size, "tile is %ux%u with %d bands, more than the %dx%d with %d expected",
                     cinfo.output_width, cinfo.output_height, cinfo.output_components, max_width, max_height, bands);
        jpeg_destroy_decompress(&cinfo);
        return -1;
    }
    jpeg_start_decompress(&cinfo);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = out + (size_t) cinfo.output_scanline * stride;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    *width = (int) cinfo.output_width;
    *height = (int) cinfo.output_height;
    jpeg_destroy_decompress(&cinfo);
    return 0;
}

/* ---- PNG and WebP tiles ---------------------------------------------------------- */

static int tiler_draw_fail(char *message, size_t message_size, int code, const char *text) {
    if (message && message_size) snprintf(message, message_size, "%s", text);
    return code;
}

int tiler_draw_decode_png(const uint8_t *data, size_t size, int bands, uint8_t *out, size_t stride, int max_width,
                          int max_height, int *width, int *height, char *message, size_t message_size) {
    if (message && message_size) message[0] = 0;
    if ((bands != 1 && bands != 3) || !data || size == 0 || stride > INT32_MAX)
        return tiler_draw_fail(message, message_size, -1, "bad decode request");
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, data, size))
        return tiler_draw_fail(message, message_size, -1, image.message);
    if ((image.format & (PNG_FORMAT_FLAG_ALPHA | PNG_FORMAT_FLAG_LINEAR)) ||
        (int) PNG_IMAGE_SAMPLE_CHANNELS(image.format) != bands) {
        png_image_free(&image);
        return -2;
    }
    if ((int) image.width > max_width || (int) image.height > max_height) {
        if (message && message_size)
            snprintf(message, message_size, "tile is %ux%u, more than the %dx%d expected", image.width, image.height,
                     max_width, max_height);
        png_image_free(&image);
        return -1;
    }
    image.format = bands == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    /* The row stride is in samples: bytes, at 8 bits. */
    if (!png_image_finish_read(&image, NULL, out, (png_int_32) stride, NULL)) {
        int code = tiler_draw_fail(message, message_size, -1, image.message);
        png_image_free(&image);
        return code;
    }
    /* A warning (a CRC error, data after the end) fails it, as libvips' loaders do. */
    if (image.warning_or_error) {
        int code = tiler_draw_fail(message, message_size, -1, image.message);
        png_image_free(&image);
        return code;
    }
    *width = (int) image.width;
    *height = (int) image.height;
    png_image_free(&image);
    return 0;
}

int tiler_draw_decode_webp(const uint8_t *data, size_t size, int bands, uint8_t *out, size_t stride, int max_width,
                           int max_height, int *width, int *height, char *message, size_t message_size) {
    if (message && message_size) message[0] = 0;
    if (!data || size == 0 || stride > INT32_MAX) return tiler_draw_fail(message, message_size, -1, "bad decode request");
    WebPBitstreamFeatures features;
    if (WebPGetFeatures(data, size, &features) != VP8_STATUS_OK)
        return tiler_draw_fail(message, message_size, -1, "not a WebP image");
    if (bands != 3 || features.has_alpha) return -2;
    if (features.width < 1 || features.height < 1 || features.width > max_width || features.height > max_height) {
        if (message && message_size)
            snprintf(message, message_size, "tile is %dx%d, more than the %dx%d expected", features.width,
                     features.height, max_width, max_height);
        return -1;
    }
    size_t room = stride * (size_t) (features.height - 1) + (size_t) features.width * 3;
    if (!WebPDecodeRGBInto(data, size, out, room, (int) stride))
        return tiler_draw_fail(message, message_size, -1, "a damaged WebP image");
    *width = features.width;
    *height = features.height;
    return 0;
}

/* ---- Area averaging ------------------------------------------------------------- */

/* The source pixels output index i takes along one axis: from `first`, `count` of them,
   with weights that add up to 1 (some negative with Lanczos). In floating point: the
   passes below are then plain multiply-adds over rows, which the compiler vectorises. */
typedef struct {
    int first;
    int count;
} tiler_draw_span;

/* Up to this scale an axis is averaged by area (each output pixel the mean of the source
   it covers): only where it keeps its size (an aligned copy, or a shift by a fraction).
   Any reduction uses Lanczos-3 stretched to the scale, as libvips' reduce: area
   averaging up to 2x was tried and left columns up to 8 levels off libvips' drawing. */
static const double tiler_draw_area_limit = 1.0;

/* The most source pixels one output pixel may take along an axis. */
static int tiler_draw_taps(double length, int out_length) {
    double step = length / out_length;
    return (step <= tiler_draw_area_limit ? 1 : 6) * (int) ceil(step) + 2;
}

/* Weights of one axis; `weights` holds `stride` slots per output index. Source pixels
   outside the image count as the edge pixel (their weights go to it). */
static void tiler_draw_axis(double start, double length, int out_length, int limit, tiler_draw_span *spans,
                            float *weights, int stride) {
    double step = length / out_length;
    int area = step <= tiler_draw_area_limit;
    double support = area ? step / 2 : 3 * step;
    double values[stride];
    /* Lanczos-3 at x is 3 sin(πx) sin(πx/3) / (πx)², and x moves by 1/step from one source
       pixel to the next: θ = πx/3 is turned by a fixed angle (a rotation of its sine and
       cosine) and sin(πx) = sin 3θ = 3 sin θ - 4 sin³ θ, so each output index takes two
       sines and a cosine, not two sines a tap (they were 4 % of a small drawing). */
    const double pi = 3.14159265358979323846;
    const double turn_sin = sin(pi / (3 * step)), turn_cos = cos(pi / (3 * step));
    for (int i = 0; i < out_length; i++) {
        double centre = start + step * (i + 0.5);
        int lo = area ? (int) floor(centre - support) : (int) floor(centre - support - 0.5) + 1;
        int hi = area ? (int) ceil(centre + support) - 1 : (int) ceil(centre + support - 0.5) - 1;
        int first = lo < 0 ? 0 : lo;
        int last = hi > limit - 1 ? limit - 1 : hi;
        if (last < first) last = first;
        if (last - first + 1 > stride) last = first + stride - 1;
        for (int k = 0; k <= last - first; k++) values[k] = 0;
        double sum = 0;
        double theta = pi * ((lo + 0.5 - centre) / step) / 3;
        double sin_theta = sin(theta), cos_theta = cos(theta);
        for (int s = lo; s <= hi; s++) {
            double v;
            if (area) {
                double a = centre - support, b = centre + support;
                double from = s > a ? s : a, to = s + 1 < b ? s + 1 : b;
                v = to > from ? to - from : 0;
            } else {
                double x = (s + 0.5 - centre) / step;
                if (fabs(x) < 1e-9) {
                    v = 1;
                } else if (fabs(x) >= 3) {
                    v = 0;
                } else {
                    double px = pi * x;
                    v = 3 * (3 * sin_theta - 4 * sin_theta * sin_theta * sin_theta) * sin_theta / (px * px);
                }
                double next_sin = sin_theta * turn_cos + cos_theta * turn_sin;
                cos_theta = cos_theta * turn_cos - sin_theta * turn_sin;
                sin_theta = next_sin;
            }
            int at = s < first ? first : s > last ? last : s;
            values[at - first] += v;
            sum += v;
        }
        float *w = weights + (size_t) i * stride;
        for (int k = 0; k <= last - first; k++) w[k] = (float) (values[k] / sum);
        spans[i].first = first;
        spans[i].count = last - first + 1;
    }
}

/* Four floats, for one pixel's bands (the fourth lane unused with three bands). */
typedef float tiler_draw_float4 __attribute__((vector_size(16)));
typedef int tiler_draw_int4 __attribute__((vector_size(16)));

/* The two passes are made twice on x86-64: for the processors of the last decade (AVX2
   and FMA: eight floats an instruction, multiply and add in one) and for any, chosen
   once when the program is loaded. About 1.7 times as fast where AVX2 is there. */
#if defined(__x86_64__)
#define TILER_DRAW_CLONED __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TILER_DRAW_CLONED
#endif

static inline tiler_draw_float4 tiler_draw_load4(const float *p) {
    tiler_draw_float4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Output row `out` (`width` pixels) filtered across from `column` (the source row already
   filtered down, `bands` floats a pixel from source column `from`; at least one float of
   slack after its last pixel): the three or four bands of a source pixel in one vector
   multiply-add a tap. Rounded (the column holds +0.5) and clamped to levels. */
TILER_DRAW_CLONED
static void tiler_draw_across(const float *column, int from, int bands, const tiler_draw_span *xs, const float *xw,
                              int xtaps, int width, uint8_t *out) {
    if (bands == 3 || bands == 4) {
        for (int i = 0; i < width; i++) {
            const float *w = xw + (size_t) i * xtaps;
            const float *p = column + (size_t) (xs[i].first - from) * bands;
            tiler_draw_float4 acc = {0, 0, 0, 0};
            /* Two sums over alternate taps: two chains of multiply-adds, not one. */
            tiler_draw_float4 odd = {0, 0, 0, 0};
            int n = xs[i].count, s = 0;
            for (; s + 1 < n; s += 2, p += 2 * bands) {
                acc += w[s] * tiler_draw_load4(p);
                odd += w[s + 1] * tiler_draw_load4(p + bands);
            }
            if (s < n) acc += w[s] * tiler_draw_load4(p);
            acc += odd;
            /* Clamped to levels in the vector, then truncated (the column holds +0.5). */
            const tiler_draw_float4 zero = {0, 0, 0, 0}, top = {255, 255, 255, 255};
            acc = __builtin_elementwise_min(__builtin_elementwise_max(acc, zero), top);
            tiler_draw_int4 levels = __builtin_convertvector(acc, tiler_draw_int4);
            uint8_t *o = out + (size_t) i * bands;
            o[0] = (uint8_t) levels[0];
            o[1] = (uint8_t) levels[1];
            o[2] = (uint8_t) levels[2];
            if (bands == 4) o[3] = (uint8_t) levels[3];
        }
        return;
    }
    for (int i = 0; i < width; i++) {
        const float *w = xw + (size_t) i * xtaps;
        const float *p = column + (size_t) (xs[i].first - from) * bands;
        for (int c = 0; c < bands; c++) {
            float v = 0;
            for (int s = 0; s < xs[i].count; s++) v += w[s] * p[s * bands + c];
            out[i * bands + c] = (uint8_t) (v < 0 ? 0 : v >= 255 ? 255 : (int) v);
        }
    }
}

/* `count` source rows from `first` (rows `stride` apart, `line` bytes each) summed with
   weights `w` into `column`, +0.5 (rounding the truncation to levels). Four rows a step:
   the column is read and written a quarter as often. `restrict`: the bytes do not alias
   the floats, so the loops vectorise. */
TILER_DRAW_CLONED
static void tiler_draw_down(const uint8_t *restrict first, size_t stride, const float *restrict w, int count,
                            size_t line, float *restrict column) {
    for (size_t k = 0; k < line; k++) column[k] = 0.5f;
    int r = 0;
    for (; r + 3 < count; r += 4) {
        const uint8_t *restrict a = first + (size_t) r * stride, *restrict b = a + stride, *restrict c = b + stride,
                                *restrict d = c + stride;
        float wa = w[r], wb = w[r + 1], wc = w[r + 2], wd = w[r + 3];
        for (size_t k = 0; k < line; k++) column[k] += (wa * a[k] + wb * b[k]) + (wc * c[k] + wd * d[k]);
    }
    for (; r + 1 < count; r += 2) {
        const uint8_t *restrict a = first + (size_t) r * stride, *restrict b = a + stride;
        float wa = w[r], wb = w[r + 1];
        for (size_t k = 0; k < line; k++) column[k] += wa * a[k] + wb * b[k];
    }
    if (r < count) {
        const uint8_t *restrict a = first + (size_t) r * stride;
        float wa = w[r];
        for (size_t k = 0; k < line; k++) column[k] += wa * a[k];
    }
}

int tiler_draw_resample(const uint8_t *source, size_t source_stride, int source_width, int source_height, int bands,
                        double x, double y, double region_width, double region_height, uint8_t *out,
                        size_t out_stride, int width, int height) {
    if (bands < 1 || bands > 4 || width < 1 || height < 1 || region_width < width || region_height < height ||
        x < 0 || y < 0 || x + region_width > source_width + 1e-9 || y + region_height > source_height + 1e-9)
        return -1;
    int xtaps = tiler_draw_taps(region_width, width), ytaps = tiler_draw_taps(region_height, height);
    /* Spans and weights of both axes, and one row filtered down (the source columns the
       output takes, `bands` floats each, and slack for the last pixel's 4-float load). */
    size_t bytes = sizeof(tiler_draw_span) * ((size_t) width + height) +
                   sizeof(float) * ((size_t) width * xtaps + (size_t) height * ytaps + (size_t) source_width * bands + 4);
    char *memory = malloc(bytes);
    if (!memory) return -1;
    tiler_draw_span *xs = (tiler_draw_span *) memory;
    tiler_draw_span *ys = xs + width;
    float *xw = (float *) (ys + height);
    float *yw = xw + (size_t) width * xtaps;
    float *column = yw + (size_t) height * ytaps;
    tiler_draw_axis(x, region_width, width, source_width, xs, xw, xtaps);
    tiler_draw_axis(y, region_height, height, source_height, ys, yw, ytaps);
    /* The source columns the output takes (spans move right with the output). */
    int from = xs[0].first, to = xs[width - 1].first + xs[width - 1].count;
    for (int i = 0; i < width; i++) {
        if (xs[i].first < from) from = xs[i].first;
        if (xs[i].first + xs[i].count > to) to = xs[i].first + xs[i].count;
    }
    size_t line = (size_t) (to - from) * bands;
    memset(column + line, 0, 4 * sizeof(float));

    /* Down first, then across: the pass over every source row the output takes is the
       contiguous one (a multiply-add over the row, which the compiler vectorises), and
       the gathering pass across runs on output rows only. */
    for (int j = 0; j < height; j++) {
        const float *wy = yw + (size_t) j * ytaps;
        const uint8_t *first = source + (size_t) ys[j].first * source_stride + (size_t) from * bands;
        tiler_draw_down(first, source_stride, wy, ys[j].count, line, column);
        tiler_draw_across(column, from, bands, xs, xw, xtaps, width, out + (size_t) j * out_stride);
    }
    free(memory);
    return 0;
}

/* ---- Turns and grey ------------------------------------------------------------- */

void tiler_draw_turn(const uint8_t *in, size_t in_stride, int width, int height, int bands, int quarter_turns,
                     int mirror, uint8_t *out, size_t out_stride) {
    quarter_turns &= 3;
    for (int y = 0; y < height; y++) {
        const uint8_t *row = in + (size_t) y * in_stride;
        for (int x = 0; x < width; x++) {
            int sx = mirror ? width - 1 - x : x;
            /* Where (x, y) lands after the clockwise turns. */
            int dx, dy;
            switch (quarter_turns) {
            case 1: dx = height - 1 - y; dy = x; break;
            case 2: dx = width - 1 - x; dy = height - 1 - y; break;
            case 3: dx = y; dy = width - 1 - x; break;
            default: dx = x; dy = y; break;
            }
            memcpy(out + (size_t) dy * out_stride + (size_t) dx * bands, row + (size_t) sx * bands, (size_t) bands);
        }
    }
}

/* sRGB's curve: to linear light, and back from linear light in 4096 steps. */
static float tiler_draw_to_linear[256];
static uint8_t tiler_draw_from_linear[4097];
static int tiler_draw_tables_made;

static void tiler_draw_make_tables(void) {
    for (int i = 0; i < 256; i++) {
        double v = i / 255.0;
        tiler_draw_to_linear[i] = (float) (v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4));
    }
    for (int i = 0; i <= 4096; i++) {
        double l = i / 4096.0;
        double v = l <= 0.0031308 ? l * 12.92 : 1.055 * pow(l, 1 / 2.4) - 0.055;
        long c = lrint(v * 255.0);
        tiler_draw_from_linear[i] = (uint8_t) (c < 0 ? 0 : c > 255 ? 255 : c);
    }
    __atomic_store_n(&tiler_draw_tables_made, 1, __ATOMIC_RELEASE);
}

void tiler_draw_grey(const uint8_t *in, size_t in_stride, int width, int height, uint8_t *out, size_t out_stride,
                     int threshold) {
    /* Making the tables twice from two threads writes the same values: harmless. */
    if (!__atomic_load_n(&tiler_draw_tables_made, __ATOMIC_ACQUIRE)) tiler_draw_make_tables();
    for (int y = 0; y < height; y++) {
        const uint8_t *p = in + (size_t) y * in_stride;
        uint8_t *o = out + (size_t) y * out_stride;
        for (int x = 0; x < width; x++, p += 3) {
            float l = 0.2126f * tiler_draw_to_linear[p[0]] + 0.7152f * tiler_draw_to_linear[p[1]] +
                      0.0722f * tiler_draw_to_linear[p[2]];
            int index = (int) (l * 4096.0f + 0.5f);
            uint8_t g = tiler_draw_from_linear[index < 0 ? 0 : index > 4096 ? 4096 : index];
            o[x] = threshold >= 0 ? (g >= threshold ? 255 : 0) : g;
        }
    }
}
