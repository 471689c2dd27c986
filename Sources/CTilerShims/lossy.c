/* JPEG tiles with libjpeg(-turbo) and WebP tiles with libwebp, encoded straight from the
   rows of a strip. These are the libraries and the settings libvips' jpegsave and
   webpsave use (with strip=TRUE), so the bytes are the same as theirs; what goes away is
   a libvips image, an operation and a thread pool per tile, and the copy of each tile
   into contiguous rows. libjpeg reports errors with longjmp, which Swift cannot catch,
   so each encode lives here behind one plain C call. */
#include "CTilerShims.h"
#include <setjmp.h>
#include <stdio.h>
/* jpeglib.h needs stdio.h first. */
#include <jpeglib.h>
#include <jerror.h>
#include <stdlib.h>
#include <string.h>
#include <webp/encode.h>

static void tiler_set_message(char *message, size_t message_size, const char *text) {
    if (!message || !message_size) return;
    strncpy(message, text, message_size - 1);
    message[message_size - 1] = 0;
}

/* ---- JPEG ------------------------------------------------------------------------ */

typedef struct {
    struct jpeg_error_mgr manager;
    jmp_buf jump;
    char *message;
    size_t message_size;
} tiler_jpeg_error;

static void tiler_jpeg_error_exit(j_common_ptr cinfo) {
    tiler_jpeg_error *error = (tiler_jpeg_error *) cinfo->err;
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    tiler_set_message(error->message, error->message_size, text);
    longjmp(error->jump, 1);
}

/* libjpeg's own warnings and traces: nothing to report for a tile we write. */
static void tiler_jpeg_output_message(j_common_ptr cinfo) { (void) cinfo; }

/* The compressed bytes go into one malloc'd buffer that doubles when full. */
typedef struct {
    struct jpeg_destination_mgr manager;
    uint8_t *data;
    size_t capacity;
} tiler_jpeg_destination;

static void tiler_jpeg_init_destination(j_compress_ptr cinfo) {
    tiler_jpeg_destination *destination = (tiler_jpeg_destination *) cinfo->dest;
    destination->manager.next_output_byte = destination->data;
    destination->manager.free_in_buffer = destination->capacity;
}

static boolean tiler_jpeg_empty_output_buffer(j_compress_ptr cinfo) {
    tiler_jpeg_destination *destination = (tiler_jpeg_destination *) cinfo->dest;
    size_t used = destination->capacity;
    uint8_t *grown = realloc(destination->data, used * 2);
    if (!grown) ERREXIT(cinfo, JERR_OUT_OF_MEMORY);
    destination->data = grown;
    destination->capacity = used * 2;
    destination->manager.next_output_byte = grown + used;
    destination->manager.free_in_buffer = destination->capacity - used;
    return TRUE;
}

static void tiler_jpeg_term_destination(j_compress_ptr cinfo) { (void) cinfo; }

int tiler_jpeg_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int quality,
                      uint8_t **buffer, size_t *length, char *message, size_t message_size) {
    *buffer = NULL;
    *length = 0;
    tiler_set_message(message, message_size, "");
    if ((bands != 1 && bands != 3) || width < 1 || height < 1 || quality < 1 || quality > 100) {
        if (message && message_size)
            snprintf(message, message_size, "cannot encode %dx%d with %d bands at quality %d as JPEG", width, height,
                     bands, quality);
        return -1;
    }
    struct jpeg_compress_struct cinfo;
    tiler_jpeg_error error;
    /* volatile: survives the longjmp back into this frame. */
    tiler_jpeg_destination destination = {.data = NULL, .capacity = 0};
    tiler_jpeg_destination *volatile destination_ptr = &destination;
    JSAMPROW *volatile rows = NULL;
    cinfo.err = jpeg_std_error(&error.manager);
    error.manager.error_exit = tiler_jpeg_error_exit;
    error.manager.output_message = tiler_jpeg_output_message;
    error.message = message;
    error.message_size = message_size;
    if (setjmp(error.jump)) {
        jpeg_destroy_compress(&cinfo);
        free(rows);
        free(destination_ptr->data);
        return -1;
    }
    jpeg_create_compress(&cinfo);
    /* A Q85 256 × 256 tile of a photograph is about 11 KB: start at 16 KB, double when full. */
    destination.capacity = 16384;
    destination.data = malloc(destination.capacity);
    if (!destination.data) ERREXIT(&cinfo, JERR_OUT_OF_MEMORY);
    destination.manager.init_destination = tiler_jpeg_init_destination;
    destination.manager.empty_output_buffer = tiler_jpeg_empty_output_buffer;
    destination.manager.term_destination = tiler_jpeg_term_destination;
    cinfo.dest = &destination.manager;

    /* What libvips' jpegsave does with Q and strip=TRUE: libjpeg's defaults (baseline,
       Huffman tables of Annex K, islow DCT, 4:2:0 chroma), the quality scaling of the
       Annex K quantisation tables, no JFIF header, and no chroma subsampling from Q 90
       (jpegsave's subsample_mode=auto). */
    cinfo.image_width = (JDIMENSION) width;
    cinfo.image_height = (JDIMENSION) height;
    cinfo.input_components = bands;
    cinfo.in_color_space = bands == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&cinfo);
    cinfo.optimize_coding = FALSE;
    jpeg_set_quality(&cinfo, quality, TRUE);
    if (quality >= 90) {
        for (int i = 0; i < bands; i++) {
            cinfo.comp_info[i].h_samp_factor = 1;
            cinfo.comp_info[i].v_samp_factor = 1;
        }
    }
    cinfo.write_JFIF_header = FALSE;
    rows = malloc(sizeof(JSAMPROW) * (size_t) height);
    if (!rows) ERREXIT(&cinfo, JERR_OUT_OF_MEMORY);
    for (int y = 0; y < height; y++) rows[y] = (JSAMPROW) (pixels + (size_t) y * stride);
    jpeg_start_compress(&cinfo, TRUE);
    jpeg_write_scanlines(&cinfo, rows, (JDIMENSION) height);
    jpeg_finish_compress(&cinfo);
    *length = destination.capacity - destination.manager.free_in_buffer;
    *buffer = destination.data;
    jpeg_destroy_compress(&cinfo);
    free(rows);
    return 0;
}

/* ---- WebP ------------------------------------------------------------------------ */

int tiler_webp_encode(const uint8_t *pixels, size_t stride, int width, int height, int bands, int quality,
                      uint8_t **buffer, size_t *length, char *message, size_t message_size) {
    *buffer = NULL;
    *length = 0;
    tiler_set_message(message, message_size, "");
    if (bands < 1 || bands > 4 || width < 1 || height < 1 || width > WEBP_MAX_DIMENSION ||
        height > WEBP_MAX_DIMENSION || quality < 0 || quality > 100) {
        if (message && message_size)
            snprintf(message, message_size, "cannot encode %dx%d with %d bands at quality %d as WebP", width, height,
                     bands, quality);
        return -1;
    }
    /* What libvips' webpsave does with Q and strip=TRUE: the default preset at Q, lossy,
       alpha at quality 100, effort (method) 4, one frame, no metadata. */
    WebPConfig config;
    if (!WebPConfigPreset(&config, WEBP_PRESET_DEFAULT, (float) quality)) {
        tiler_set_message(message, message_size, "libwebp: version mismatch");
        return -1;
    }
    config.lossless = 0;
    config.alpha_quality = 100;
    config.method = 4;
    if (!WebPValidateConfig(&config)) {
        tiler_set_message(message, message_size, "libwebp: invalid configuration");
        return -1;
    }
    WebPPicture picture;
    if (!WebPPictureInit(&picture)) {
        tiler_set_message(message, message_size, "libwebp: version mismatch");
        return -1;
    }
    picture.width = width;
    picture.height = height;
    picture.use_argb = 0;
    WebPMemoryWriter writer;
    WebPMemoryWriterInit(&writer);
    picture.writer = WebPMemoryWrite;
    picture.custom_ptr = &writer;

    /* WebP holds RGB or RGBA: grey is spread over the three channels, as libvips does
       before webpsave. */
    const uint8_t *rgb = pixels;
    size_t rgb_stride = stride;
    uint8_t *expanded = NULL;
    int alpha = bands == 2 || bands == 4;
    if (bands <= 2) {
        int out_bands = alpha ? 4 : 3;
        rgb_stride = (size_t) width * (size_t) out_bands;
        expanded = malloc(rgb_stride * (size_t) height);
        if (!expanded) {
            tiler_set_message(message, message_size, "out of memory");
            return -1;
        }
        for (int y = 0; y < height; y++) {
            const uint8_t *in = pixels + (size_t) y * stride;
            uint8_t *out = expanded + (size_t) y * rgb_stride;
            for (int x = 0; x < width; x++, in += bands, out += out_bands) {
                out[0] = out[1] = out[2] = in[0];
                if (alpha) out[3] = in[1];
            }
        }
        rgb = expanded;
    }
    int imported = alpha ? WebPPictureImportRGBA(&picture, rgb, (int) rgb_stride)
                         : WebPPictureImportRGB(&picture, rgb, (int) rgb_stride);
    free(expanded);
    if (!imported) {
        WebPPictureFree(&picture);
        WebPMemoryWriterClear(&writer);
        tiler_set_message(message, message_size, "libwebp: out of memory");
        return -1;
    }
    if (!WebPEncode(&config, &picture)) {
        if (message && message_size)
            snprintf(message, message_size, "libwebp: encoding failed (error %d)", (int) picture.error_code);
        WebPPictureFree(&picture);
        WebPMemoryWriterClear(&writer);
        return -1;
    }
    WebPPictureFree(&picture);
    /* The writer's buffer belongs to libwebp's allocator: copy it into one the caller
       frees with free(), like the other encoders' (a few KB per tile). */
    *buffer = malloc(writer.size ? writer.size : 1);
    if (!*buffer) {
        WebPMemoryWriterClear(&writer);
        tiler_set_message(message, message_size, "out of memory");
        return -1;
    }
    memcpy(*buffer, writer.mem, writer.size);
    *length = writer.size;
    WebPMemoryWriterClear(&writer);
    return 0;
}
