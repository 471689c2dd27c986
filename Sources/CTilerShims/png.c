/* PNG encoding with libpng into memory. libpng reports errors with longjmp, which Swift
   cannot catch, so the whole encode lives here behind one plain C call. */
#include "CTilerShims.h"
#include <png.h>
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
