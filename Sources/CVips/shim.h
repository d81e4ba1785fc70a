#ifndef KINDRED_CVIPS_SHIM_H
#define KINDRED_CVIPS_SHIM_H
// libvips for KindredVips, its only importer. libvips's operations are variadic (name/value pairs ending in
// NULL), which Swift cannot call: each shim below is one fixed call with the options the photo pipeline uses.
// Every function returns 0 on success and -1 on failure (the message is then in vips_error_buffer()), and every
// image it hands out is a new reference the caller must g_object_unref.
#include <vips/vips.h>

/// Silences libvips's GLib warnings ("VIPS-WARNING **: ..."): with fail_on=warning a warning already fails the
/// load, and an untrusted upload must not be able to write to the server's stderr.
static void kindred_vips_silent_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)domain; (void)level; (void)message; (void)data;
}

/// Starts libvips once per process with the settings for untrusted input: no operation cache, one worker thread
/// per pipeline (callers run several pipelines at once), untrusted operations blocked, and every loader blocked
/// except the four buffer loaders the pipeline calls by name.
static inline int kindred_vips_start(void) {
    if (VIPS_INIT("kindred")) {
        return -1;
    }
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_concurrency_set(1);
    vips_block_untrusted_set(TRUE);
    vips_operation_block_set("VipsForeignLoad", TRUE);
    vips_operation_block_set("VipsForeignLoadJpegBuffer", FALSE);
    vips_operation_block_set("VipsForeignLoadPngBuffer", FALSE);
    vips_operation_block_set("VipsForeignLoadWebpBuffer", FALSE);
    vips_operation_block_set("VipsForeignLoadHeifBuffer", FALSE);
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO, kindred_vips_silent_log, NULL);
    return 0;
}

/// The source formats, in the order of PhotoSourceFormat's loaders.
enum {
    KINDRED_VIPS_JPEG = 0,
    KINDRED_VIPS_PNG = 1,
    KINDRED_VIPS_WEBP = 2,
    KINDRED_VIPS_HEIF = 3,
};

/// Opens `buffer` with the one loader for `format` (never the sniffing loader), failing on any decoder warning,
/// for a single top-to-bottom pass. Only the header is read here; pixels are decoded when a later step pulls them.
/// `shrink` (1, 2, 4 or 8) is JPEG's DCT shrink-on-load and WebP's scale-on-load; PNG and HEIF ignore it.
/// The buffer must outlive the image and everything made from it.
static inline int kindred_vips_load(int format, const void *buffer, size_t length, int shrink, VipsImage **out) {
    void *bytes = (void *)buffer;
    switch (format) {
    case KINDRED_VIPS_JPEG:
        return vips_jpegload_buffer(bytes, length, out, "shrink", shrink, "fail_on", VIPS_FAIL_ON_WARNING,
                                    "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    case KINDRED_VIPS_PNG:
        return vips_pngload_buffer(bytes, length, out, "fail_on", VIPS_FAIL_ON_WARNING,
                                   "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    case KINDRED_VIPS_WEBP:
        return vips_webpload_buffer(bytes, length, out, "scale", 1.0 / (double)shrink,
                                    "fail_on", VIPS_FAIL_ON_WARNING, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    case KINDRED_VIPS_HEIF:
        return vips_heifload_buffer(bytes, length, out, "fail_on", VIPS_FAIL_ON_WARNING,
                                    "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    default:
        vips_error("kindred", "unknown format");
        return -1;
    }
}

static inline int kindred_vips_extract_area(VipsImage *in, VipsImage **out, int left, int top, int width, int height) {
    return vips_extract_area(in, out, left, top, width, height, NULL);
}

/// Resamples by separate horizontal and vertical factors (lanczos3; reduce after an integer box shrink).
static inline int kindred_vips_resize(VipsImage *in, VipsImage **out, double hscale, double vscale) {
    return vips_resize(in, out, hscale, "vscale", vscale, NULL);
}

/// Pads an image that came out of the resampler a pixel short by repeating its edge.
static inline int kindred_vips_embed_copy(VipsImage *in, VipsImage **out, int width, int height) {
    return vips_embed(in, out, 0, 0, width, height, "extend", VIPS_EXTEND_COPY, NULL);
}

/// Rotates and flips the pixels by the EXIF orientation tag and removes the tag.
static inline int kindred_vips_autorot(VipsImage *in, VipsImage **out) {
    return vips_autorot(in, out, NULL);
}

/// The EXIF orientation libvips read from the header (1 when absent), 1...8.
static inline int kindred_vips_orientation(VipsImage *image) {
    return vips_image_get_orientation(image);
}

static inline int kindred_vips_has_icc_profile(VipsImage *image) {
    return vips_image_get_typeof(image, VIPS_META_ICC_NAME) != 0;
}

/// Converts pixels described by their embedded ICC profile to sRGB (libvips's built-in profile), perceptual intent.
static inline int kindred_vips_icc_to_srgb(VipsImage *in, VipsImage **out) {
    return vips_icc_transform(in, out, "srgb", "embedded", TRUE, "intent", VIPS_INTENT_PERCEPTUAL, NULL);
}

/// Converts from the image's interpretation (greyscale, CMYK, 16-bit RGB, ...) to 8-bit sRGB.
static inline int kindred_vips_colourspace_srgb(VipsImage *in, VipsImage **out) {
    return vips_colourspace(in, out, VIPS_INTERPRETATION_sRGB, NULL);
}

/// Removes an alpha channel by composing on white.
static inline int kindred_vips_flatten_white(VipsImage *in, VipsImage **out) {
    VipsArrayDouble *white = vips_array_double_newv(3, 255.0, 255.0, 255.0);
    int result = vips_flatten(in, out, "background", white, NULL);
    vips_area_unref(VIPS_AREA(white));
    return result;
}

static inline int kindred_vips_cast_uchar(VipsImage *in, VipsImage **out) {
    return vips_cast_uchar(in, out, NULL);
}

/// Removes every metadata field (EXIF, XMP, IPTC, ICC, PNG text, orientation, ...) from the image's header, so no
/// saver could write them even if it ignored `strip`. Works on a copy: `in` may be shared.
static inline int kindred_vips_remove_metadata(VipsImage *in, VipsImage **out) {
    if (vips_copy(in, out, NULL)) {
        return -1;
    }
    gchar **fields = vips_image_get_fields(*out);
    for (int i = 0; fields[i] != NULL; i++) {
        // The basic fields (width, height, bands, ...) are properties, not metadata: removing them is a no-op.
        (void)vips_image_remove(*out, fields[i]);
    }
    g_strfreev(fields);
    return 0;
}

/// Encodes baseline (or progressive) JPEG with optimised Huffman tables, no metadata.
static inline int kindred_vips_jpegsave(VipsImage *in, void **buffer, size_t *length, int quality, int progressive) {
    return vips_jpegsave_buffer(in, buffer, length, "Q", quality, "strip", TRUE, "optimize_coding", TRUE,
                                "interlace", progressive ? TRUE : FALSE, NULL);
}

/// Encodes lossy WebP at `effort` (0 fastest ... 6 smallest), no metadata.
static inline int kindred_vips_webpsave(VipsImage *in, void **buffer, size_t *length, int quality, int effort) {
    return vips_webpsave_buffer(in, buffer, length, "Q", quality, "strip", TRUE, "effort", effort, NULL);
}

/// Loads `buffer` through libvips's generic, sniffing entry point and returns the loader it used (NULL when the
/// load failed, e.g. because that loader is blocked). The pipeline never loads this way; tests use it to prove
/// the block list is in force.
static inline const char *kindred_vips_sniffing_load(const void *buffer, size_t length) {
    const char *name = vips_foreign_find_load_buffer(buffer, length);
    VipsImage *image = vips_image_new_from_buffer(buffer, length, "", NULL);
    if (image == NULL) {
        vips_error_clear();
        return NULL;
    }
    g_object_unref(image);
    return name;
}

/// Copies and clears libvips's error buffer (one per process, locked); the caller g_free's the copy.
static inline char *kindred_vips_take_error(void) {
    return vips_error_buffer_copy();
}

#endif
