#include "CFloor.h"
#include <libdeflate.h>
#include <setjmp.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* jpeglib.h needs stdio.h first. */
#include <jpeglib.h>

/* ---- JPEG decode ------------------------------------------------------------------ */

typedef struct {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
} floor_jpeg_error;

static void floor_jpeg_exit(j_common_ptr cinfo) { longjmp(((floor_jpeg_error *) cinfo->err)->jump, 1); }

uint8_t *floor_decode_jpeg(const char *path, int *width, int *height, int *bands) {
    FILE *file = fopen(path, "rb");
    if (!file) return NULL;
    struct jpeg_decompress_struct cinfo;
    floor_jpeg_error error;
    uint8_t *volatile pixels = NULL;
    cinfo.err = jpeg_std_error(&error.manager);
    error.manager.error_exit = floor_jpeg_exit;
    if (setjmp(error.jump)) {
        jpeg_destroy_decompress(&cinfo);
        fclose(file);
        free(pixels);
        return NULL;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_stdio_src(&cinfo, file);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.out_color_space != JCS_GRAYSCALE) cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    size_t stride = (size_t) cinfo.output_width * (size_t) cinfo.output_components;
    pixels = malloc(stride * cinfo.output_height);
    if (!pixels) longjmp(error.jump, 1);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = pixels + stride * cinfo.output_scanline;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    *width = (int) cinfo.output_width;
    *height = (int) cinfo.output_height;
    *bands = cinfo.output_components;
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    fclose(file);
    return pixels;
}

/* ---- libspng ---------------------------------------------------------------------- */

static const int floor_colour_types[] = {0, SPNG_COLOR_TYPE_GRAYSCALE, SPNG_COLOR_TYPE_GRAYSCALE_ALPHA,
                                         SPNG_COLOR_TYPE_TRUECOLOR, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA};

size_t floor_spng_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int filter,
                         int level, int strategy, uint8_t **keep) {
    if (bands < 1 || bands > 4) return 0;
    /* libspng 0.7 takes contiguous rows only. */
    size_t row = (size_t) width * (size_t) bands;
    uint8_t *rows = malloc(row * (size_t) height);
    if (!rows) return 0;
    for (int y = 0; y < height; y++) memcpy(rows + row * (size_t) y, pixels + stride * (size_t) y, row);
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    size_t length = 0;
    if (ctx) {
        spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
        spng_set_option(ctx, SPNG_FILTER_CHOICE, filter);
        spng_set_option(ctx, SPNG_IMG_COMPRESSION_LEVEL, level);
        spng_set_option(ctx, SPNG_IMG_COMPRESSION_STRATEGY, strategy);
        struct spng_ihdr ihdr = {(uint32_t) width, (uint32_t) height, 8, (uint8_t) floor_colour_types[bands], 0, 0, 0};
        int error = 0;
        if (!spng_set_ihdr(ctx, &ihdr) &&
            !spng_encode_image(ctx, rows, row * (size_t) height, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE)) {
            void *png = spng_get_png_buffer(ctx, &length, &error);
            if (error || !png) length = 0;
            if (keep) *keep = png; else free(png);
        }
        spng_ctx_free(ctx);
    }
    free(rows);
    return length;
}

/* ---- PNG with libdeflate ------------------------------------------------------------ */

static void floor_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;
}

/* The Paeth predictor of PNG, branch-free so that the compiler vectorises it. */
static inline int floor_paeth(int a, int b, int c) {
    int p = a + b - c;
    int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    int ab = pa <= pb ? a : b;
    int pab = pa <= pb ? pa : pb;
    return pab <= pc ? ab : c;
}

size_t floor_deflate_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int level,
                            uint8_t **keep) {
    if (bands < 1 || bands > 4) return 0;
    size_t row = (size_t) width * (size_t) bands, filtered_size = (row + 1) * (size_t) height;
    uint8_t *filtered = malloc(filtered_size);
    if (!filtered) return 0;
    for (int y = 0; y < height; y++) {
        const uint8_t *cur = pixels + stride * (size_t) y;
        const uint8_t *up = y ? pixels + stride * (size_t) (y - 1) : NULL;
        uint8_t *out = filtered + (row + 1) * (size_t) y;
        out[0] = 4; /* Paeth */
        for (size_t i = 0; i < row; i++) {
            int a = i >= (size_t) bands ? cur[i - bands] : 0;
            int b = up ? up[i] : 0;
            int c = up && i >= (size_t) bands ? up[i - bands] : 0;
            out[1 + i] = (uint8_t) (cur[i] - floor_paeth(a, b, c));
        }
    }
    /* One compressor per thread and level, kept for the life of the thread. */
    static _Thread_local struct libdeflate_compressor *compressor;
    static _Thread_local int compressor_level;
    if (!compressor || compressor_level != level) {
        if (compressor) libdeflate_free_compressor(compressor);
        compressor = libdeflate_alloc_compressor(level);
        compressor_level = level;
    }
    size_t bound = libdeflate_zlib_compress_bound(compressor, filtered_size);
    uint8_t *png = malloc(8 + 25 + 12 + bound + 12);
    if (!png) {
        free(filtered);
        return 0;
    }
    static const uint8_t signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    static const uint8_t colour_types[] = {0, 0, 4, 2, 6};
    uint8_t *p = png;
    memcpy(p, signature, 8);
    p += 8;
    floor_be32(p, 13);
    memcpy(p + 4, "IHDR", 4);
    floor_be32(p + 8, (uint32_t) width);
    floor_be32(p + 12, (uint32_t) height);
    p[16] = 8;
    p[17] = colour_types[bands];
    p[18] = p[19] = p[20] = 0;
    floor_be32(p + 21, (uint32_t) libdeflate_crc32(0, p + 4, 17));
    p += 25;
    size_t z = libdeflate_zlib_compress(compressor, filtered, filtered_size, p + 8, bound);
    free(filtered);
    if (!z) {
        free(png);
        return 0;
    }
    floor_be32(p, (uint32_t) z);
    memcpy(p + 4, "IDAT", 4);
    floor_be32(p + 8 + z, (uint32_t) libdeflate_crc32(0, p + 4, z + 4));
    p += 12 + z;
    floor_be32(p, 0);
    memcpy(p + 4, "IEND", 4);
    floor_be32(p + 8, (uint32_t) libdeflate_crc32(0, p + 4, 4));
    p += 12;
    size_t length = (size_t) (p - png);
    if (keep) *keep = png; else free(png);
    return length;
}

/* ---- checking --------------------------------------------------------------------- */

int floor_png_matches(const uint8_t *png, size_t length, const uint8_t *pixels, size_t stride, int width, int height,
                      int bands) {
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx) return -1;
    int result = -1;
    struct spng_ihdr ihdr;
    size_t size = 0;
    static const int formats[] = {0, SPNG_FMT_G8, SPNG_FMT_GA8, SPNG_FMT_RGB8, SPNG_FMT_RGBA8};
    if (!spng_set_png_buffer(ctx, png, length) && !spng_get_ihdr(ctx, &ihdr) && (int) ihdr.width == width &&
        (int) ihdr.height == height && !spng_decoded_image_size(ctx, formats[bands], &size)) {
        uint8_t *decoded = malloc(size);
        if (decoded && !spng_decode_image(ctx, decoded, size, formats[bands], 0)) {
            size_t row = (size_t) width * (size_t) bands;
            result = 0;
            for (int y = 0; y < height && result == 0; y++)
                if (memcmp(decoded + row * (size_t) y, pixels + stride * (size_t) y, row)) result = -1;
        }
        free(decoded);
    }
    spng_ctx_free(ctx);
    return result;
}
