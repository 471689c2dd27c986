/* PNG encoding into memory, with libpng or with libdeflate. libpng reports errors with
   longjmp, which Swift cannot catch, so the whole encode lives here behind one plain C
   call. */
#include "CTilerShims.h"
#include <libdeflate.h>
#include <png.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    size_t length;
    size_t capacity;
    int failed;
    char *message;
    size_t message_size;
} tiler_png_sink;

static void tiler_png_write(png_structp png, png_bytep bytes, png_size_t count) {
    tiler_png_sink *sink = png_get_io_ptr(png);
    if (sink->length + count > sink->capacity) {
        size_t capacity = sink->capacity ? sink->capacity : 65536;
        while (capacity < sink->length + count) capacity *= 2;
        uint8_t *grown = realloc(sink->data, capacity);
        if (!grown) {
            sink->failed = 1;
            png_error(png, "out of memory");
        }
        sink->data = grown;
        sink->capacity = capacity;
    }
    memcpy(sink->data + sink->length, bytes, count);
    sink->length += count;
}

static void tiler_png_flush(png_structp png) { (void) png; }

static void tiler_png_error(png_structp png, png_const_charp message) {
    tiler_png_sink *sink = png_get_error_ptr(png);
    if (sink->message && sink->message_size) {
        strncpy(sink->message, message, sink->message_size - 1);
        sink->message[sink->message_size - 1] = 0;
    }
    png_longjmp(png, 1);
}

static void tiler_png_warning(png_structp png, png_const_charp message) {
    (void) png; (void) message;
}

int tiler_png_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands,
                     int zlib_level, int filters, int zlib_strategy,
                     uint8_t **buffer, size_t *length, char *message, size_t message_size) {
    static const int colour_types[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                       PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
    *buffer = NULL;
    *length = 0;
    if (message && message_size) message[0] = 0;
    if (bands < 1 || bands > 4 || width < 1 || height < 1) {
        if (message && message_size) snprintf(message, message_size, "cannot encode %dx%d with %d bands", width, height, bands);
        return -1;
    }
    /* volatile: these survive the longjmp back into this frame. */
    tiler_png_sink sink = {NULL, 0, 0, 0, message, message_size};
    tiler_png_sink *volatile sink_ptr = &sink;
    png_bytep *volatile rows = NULL;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, tiler_png_error, tiler_png_warning);
    if (!png) return -1;
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return -1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(rows);
        free(sink_ptr->data);
        return -1;
    }
    png_set_write_fn(png, &sink, tiler_png_write, tiler_png_flush);
    png_set_compression_level(png, zlib_level);
    png_set_compression_strategy(png, zlib_strategy);
    png_set_compression_buffer_size(png, 131072);
    png_set_filter(png, PNG_FILTER_TYPE_BASE, filters);
    png_set_IHDR(png, info, (png_uint_32) width, (png_uint_32) height, 8, colour_types[bands],
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
    rows = malloc(sizeof(png_bytep) * (size_t) height);
    if (!rows) png_error(png, "out of memory");
    for (int y = 0; y < height; y++) rows[y] = (png_bytep) (pixels + (size_t) y * stride);
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
    *buffer = sink.data;
    *length = sink.length;
    return 0;
}

/* ---- PNG with libdeflate ------------------------------------------------------------
   The same PNG, written by hand around one IDAT that libdeflate compresses in one call:
   no zlib stream state to set up per tile (zlib's deflateInit allocates and clears
   ~270 KB for every tile), a faster compressor at the same level, and the row filter as
   a plain loop the compiler vectorises. */
static pthread_key_t tiler_deflate_key;
static pthread_once_t tiler_deflate_once = PTHREAD_ONCE_INIT;

typedef struct {
    struct libdeflate_compressor *compressor;
    int level;
} tiler_deflate_slot;

static void tiler_deflate_slot_free(void *value) {
    tiler_deflate_slot *slot = value;
    if (slot->compressor) libdeflate_free_compressor(slot->compressor);
    free(slot);
}

static void tiler_deflate_key_make(void) { pthread_key_create(&tiler_deflate_key, tiler_deflate_slot_free); }

/* One compressor per thread, kept until the thread ends (the encoding threads are
   Dispatch's, which live on); made again only when the level changes. */
static struct libdeflate_compressor *tiler_deflate_compressor(int level) {
    pthread_once(&tiler_deflate_once, tiler_deflate_key_make);
    tiler_deflate_slot *slot = pthread_getspecific(tiler_deflate_key);
    if (!slot) {
        slot = calloc(1, sizeof *slot);
        if (!slot) return NULL;
        if (pthread_setspecific(tiler_deflate_key, slot) != 0) {
            free(slot);
            return NULL;
        }
    }
    if (!slot->compressor || slot->level != level) {
        if (slot->compressor) libdeflate_free_compressor(slot->compressor);
        slot->compressor = libdeflate_alloc_compressor(level);
        slot->level = level;
    }
    return slot->compressor;
}

static void tiler_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t) (v >> 24);
    p[1] = (uint8_t) (v >> 16);
    p[2] = (uint8_t) (v >> 8);
    p[3] = (uint8_t) v;
}

static inline uint8_t tiler_paeth(int a, int b, int c) {
    int p = a + b - c;
    int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
    if (pa <= pb && pa <= pc) return (uint8_t) a;
    return (uint8_t) (pb <= pc ? b : c);
}

/* Filters one row (`up` NULL for the first) into `out`, filter type byte first. */
static void tiler_filter_row(const uint8_t *restrict cur, const uint8_t *restrict up, size_t row, int bpp, int filter,
                             uint8_t *restrict out) {
    *out++ = (uint8_t) filter;
    size_t i;
    switch (filter) {
    case 1: /* Sub */
        for (i = 0; i < (size_t) bpp && i < row; i++) out[i] = cur[i];
        for (; i < row; i++) out[i] = (uint8_t) (cur[i] - cur[i - bpp]);
        break;
    case 2: /* Up */
        if (up) for (i = 0; i < row; i++) out[i] = (uint8_t) (cur[i] - up[i]);
        else memcpy(out, cur, row);
        break;
    case 3: /* Average */
        for (i = 0; i < (size_t) bpp && i < row; i++) out[i] = (uint8_t) (cur[i] - (up ? up[i] >> 1 : 0));
        for (; i < row; i++) out[i] = (uint8_t) (cur[i] - ((cur[i - bpp] + (up ? up[i] : 0)) >> 1));
        break;
    case 4: /* Paeth */
        for (i = 0; i < (size_t) bpp && i < row; i++) out[i] = (uint8_t) (cur[i] - (up ? up[i] : 0));
        if (up) for (; i < row; i++) out[i] = (uint8_t) (cur[i] - tiler_paeth(cur[i - bpp], up[i], up[i - bpp]));
        else for (; i < row; i++) out[i] = (uint8_t) (cur[i] - cur[i - bpp]);
        break;
    default: /* None */
        memcpy(out, cur, row);
    }
}

int tiler_png_deflate_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int level,
                             int filter, uint8_t **buffer, size_t *length, char *message, size_t message_size) {
    static const uint8_t colour_types[] = {0, 0, 4, 2, 6};
    static const uint8_t signature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    *buffer = NULL;
    *length = 0;
    if (message && message_size) message[0] = 0;
    if (bands < 1 || bands > 4 || width < 1 || height < 1 || level < 0 || level > 12 || filter < 0 || filter > 4) {
        if (message && message_size)
            snprintf(message, message_size, "cannot encode %dx%d with %d bands, level %d, filter %d", width, height,
                     bands, level, filter);
        return -1;
    }
    struct libdeflate_compressor *compressor = tiler_deflate_compressor(level);
    size_t row = (size_t) width * (size_t) bands, filtered_size = (row + 1) * (size_t) height;
    uint8_t *filtered = compressor ? malloc(filtered_size) : NULL;
    size_t bound = compressor ? libdeflate_zlib_compress_bound(compressor, filtered_size) : 0;
    uint8_t *png = filtered ? malloc(8 + 25 + 12 + bound + 12) : NULL;
    if (!png) {
        free(filtered);
        if (message && message_size) snprintf(message, message_size, "out of memory");
        return -1;
    }
    for (int y = 0; y < height; y++)
        tiler_filter_row(pixels + stride * (size_t) y, y ? pixels + stride * (size_t) (y - 1) : NULL, row, bands,
                         filter, filtered + (row + 1) * (size_t) y);
    uint8_t *p = png;
    memcpy(p, signature, 8);
    p += 8;
    tiler_be32(p, 13);
    memcpy(p + 4, "IHDR", 4);
    tiler_be32(p + 8, (uint32_t) width);
    tiler_be32(p + 12, (uint32_t) height);
    p[16] = 8;                /* bit depth */
    p[17] = colour_types[bands];
    p[18] = p[19] = p[20] = 0; /* deflate, adaptive filtering, no interlace */
    tiler_be32(p + 21, (uint32_t) libdeflate_crc32(0, p + 4, 17));
    p += 25;
    size_t z = libdeflate_zlib_compress(compressor, filtered, filtered_size, p + 8, bound);
    free(filtered);
    if (!z) {
        free(png);
        if (message && message_size) snprintf(message, message_size, "libdeflate could not compress the rows");
        return -1;
    }
    tiler_be32(p, (uint32_t) z);
    memcpy(p + 4, "IDAT", 4);
    tiler_be32(p + 8 + z, (uint32_t) libdeflate_crc32(0, p + 4, z + 4));
    p += 12 + z;
    tiler_be32(p, 0);
    memcpy(p + 4, "IEND", 4);
    tiler_be32(p + 8, (uint32_t) libdeflate_crc32(0, p + 4, 4));
    p += 12;
    *buffer = png;
    *length = (size_t) (p - png);
    return 0;
}
