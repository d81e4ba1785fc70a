#!/usr/bin/env python3
"""Writes the photo pipeline's test inputs into a folder, made at test time with Pillow, piexif and pillow-heif.

Usage: make_images.py OUT_DIR            the test inputs, and a JSON object {name: size} on stdout
       make_images.py --large WxH FILE   one photo-like noisy JPEG (q90) of that size, for leak tests and benchmarks

Every image with an orientation tag is stored so that its *displayed* picture (after applying the tag) has red in
the top half and blue in the bottom half; the checker verifies the renditions show exactly that.
"""
import io
import json
import os
import random
import struct
import subprocess
import sys
import zipfile
import zlib

import piexif
from PIL import Image, ImageCms, PngImagePlugin

RED = (220, 30, 30)
BLUE = (30, 30, 220)
GPS = {
    piexif.GPSIFD.GPSLatitudeRef: b"N",
    piexif.GPSIFD.GPSLatitude: ((48, 1), (51, 1), (2964, 100)),
    piexif.GPSIFD.GPSLongitudeRef: b"E",
    piexif.GPSIFD.GPSLongitude: ((2, 1), (17, 1), (4032, 100)),
}
XMP = (
    b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
    b'<rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/" dc:creator="KINDRED-SECRET-CREATOR"/>'
    b"</rdf:RDF></x:xmpmeta>"
)


def upright(width, height):
    """Red top half, blue bottom half, with a little noise so encoders do real work."""
    image = Image.new("RGB", (width, height), BLUE)
    image.paste(Image.new("RGB", (width, height // 2), RED), (0, 0))
    return image


def stored_for_orientation_6(width, height):
    """What a camera stores for orientation 6 (rotate 90° clockwise to display): the upright picture turned 90°
    counter-clockwise, so red (the displayed top) ends up in the stored left half."""
    return upright(width, height).transpose(Image.Transpose.ROTATE_90)


def exif_bytes(orientation=None, gps=True):
    zeroth = {piexif.ImageIFD.Make: b"KindredCam", piexif.ImageIFD.Artist: b"KINDRED-SECRET-ARTIST"}
    if orientation is not None:
        zeroth[piexif.ImageIFD.Orientation] = orientation
    return piexif.dump({"0th": zeroth, "Exif": {}, "GPS": GPS if gps else {}, "1st": {}, "thumbnail": None})


def insert_xmp(jpeg: bytes) -> bytes:
    """Inserts an APP1 XMP segment after SOI."""
    payload = b"http://ns.adobe.com/xap/1.0/\x00" + XMP
    segment = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    return jpeg[:2] + segment + jpeg[2:]


def insert_iptc(jpeg: bytes) -> bytes:
    """Inserts an APP13 Photoshop IPTC segment (a caption) after SOI."""
    caption = b"KINDRED-SECRET-CAPTION"
    iptc = b"\x1c\x02\x78" + struct.pack(">H", len(caption)) + caption
    resource = b"8BIM" + b"\x04\x04" + b"\x00\x00" + struct.pack(">I", len(iptc)) + iptc + (b"\x00" if len(iptc) % 2 else b"")
    payload = b"Photoshop 3.0\x00" + resource
    segment = b"\xff\xed" + struct.pack(">H", len(payload) + 2) + payload
    return jpeg[:2] + segment + jpeg[2:]


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def bomb_png(width=30000, height=30000) -> bytes:
    """A valid PNG header declaring width × height 8-bit greyscale pixels, with a tiny deflate stream of zeros
    (a decompression bomb: a few KB that would decode to 900 MB)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    compressor = zlib.compressobj(9)
    row = b"\x00" * (width + 1)
    data = b"".join(compressor.compress(row) for _ in range(50)) + compressor.flush()
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", data) + png_chunk(b"IEND", b"")


def large_jpeg(width, height, path):
    """Colour gradients with sensor-like noise, so the JPEG does not compress trivially: a 4000×3000 one is about
    3.5 MB at q90, like a phone's 12 MP photo."""
    noise = [Image.effect_noise((width, height), 48) for _ in range(3)]
    linear = Image.linear_gradient("L").resize((width, height))
    radial = Image.radial_gradient("L").resize((width, height))
    bases = [linear, radial, linear.transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    channels = [Image.blend(base, layer, 0.2) for base, layer in zip(bases, noise)]
    Image.merge("RGB", channels).save(path, "JPEG", quality=90, exif=exif_bytes(orientation=1))


def main():
    if sys.argv[1] == "--large":
        width, height = (int(part) for part in sys.argv[2].split("x"))
        large_jpeg(width, height, sys.argv[3])
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    made = {}

    def write(name, data):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        made[name] = len(data)

    # JPEG: orientation 6, GPS, XMP, IPTC; stored 1600×1200 (landscape), displayed 1200×1600.
    stored = stored_for_orientation_6(1200, 1600)
    buffer = io.BytesIO()
    stored.save(buffer, "JPEG", quality=90, exif=exif_bytes(orientation=6))
    write("gps-orientation6.jpg", insert_iptc(insert_xmp(buffer.getvalue())))

    # PNG with text chunks, an eXIf chunk with GPS and an ICC profile (sRGB built by LittleCMS), 1000×1250 upright.
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "KINDRED-SECRET-COMMENT")
    info.add_itxt("XML:com.adobe.xmp", XMP.decode())
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    buffer = io.BytesIO()
    upright(1000, 1250).save(buffer, "PNG", pnginfo=info, icc_profile=icc, exif=exif_bytes(gps=True))
    write("text-icc.png", buffer.getvalue())

    # PNG with alpha (transparent bottom half must come out white).
    rgba = Image.new("RGBA", (800, 1000), (0, 0, 0, 0))
    rgba.paste(Image.new("RGBA", (800, 500), RED + (255,)), (0, 0))
    buffer = io.BytesIO()
    rgba.save(buffer, "PNG")
    write("alpha.png", buffer.getvalue())

    # WebP with EXIF (GPS, orientation 6) and XMP.
    buffer = io.BytesIO()
    stored_for_orientation_6(1200, 1500).save(buffer, "WEBP", quality=90, exif=exif_bytes(orientation=6), xmp=XMP)
    write("exif.webp", buffer.getvalue())

    # HEIC with EXIF GPS (pillow-heif encodes HEVC with libheif/x265 when available).
    try:
        import pillow_heif

        pillow_heif.register_heif_opener()
        buffer = io.BytesIO()
        upright(1000, 1250).save(buffer, "HEIF", quality=90, exif=exif_bytes(gps=True))
        write("photo.heic", buffer.getvalue())
        # Orientation 6 as iPhones store it: pillow-heif turns the EXIF tag into an `irot` transform, which
        # libheif applies while decoding.
        buffer = io.BytesIO()
        stored_for_orientation_6(400, 500).save(buffer, "HEIF", quality=90, exif=exif_bytes(orientation=6))
        write("orientation6.heic", buffer.getvalue())
    except Exception as error:  # reported by the Swift test, which then skips HEIC checks
        made["photo.heic"] = made["orientation6.heic"] = f"unavailable: {error}"

    # A small source (smaller than the largest rendition): renditions must not be upscaled.
    buffer = io.BytesIO()
    upright(500, 500).save(buffer, "JPEG", quality=90)
    write("small.jpg", buffer.getvalue())

    # Progressive JPEGs: 2000×2500 (5 MP, accepted) and, for the limit, a 4000×3200 one (12.8 MP).
    buffer = io.BytesIO()
    upright(2000, 2500).save(buffer, "JPEG", quality=85, progressive=True)
    write("progressive.jpg", buffer.getvalue())
    buffer = io.BytesIO()
    upright(4000, 3200).save(buffer, "JPEG", quality=85, progressive=True)
    write("progressive-13mp.jpg", buffer.getvalue())
    buffer = io.BytesIO()
    upright(4000, 3200).save(buffer, "JPEG", quality=85)
    write("baseline-13mp.jpg", buffer.getvalue())

    # Interlaced (Adam7) PNGs, written by libvips (Pillow cannot): 1200×1500 accepted, 4000×3200 over the limit.
    for name, (width, height) in (("interlaced.png", (1200, 1500)), ("interlaced-13mp.png", (4000, 3200))):
        plain = os.path.join(out, "plain-" + name)
        upright(width, height).save(plain, "PNG")
        subprocess.run(["vips", "copy", plain, os.path.join(out, name) + "[interlace]"], check=True)
        os.remove(plain)
        made[name] = os.path.getsize(os.path.join(out, name))

    # A 16-bit greyscale PNG and a CMYK JPEG: converted to 8-bit sRGB.
    buffer = io.BytesIO()
    Image.new("I;16", (400, 500), 40000).save(buffer, "PNG")
    write("grey16.png", buffer.getvalue())
    buffer = io.BytesIO()
    upright(400, 500).convert("CMYK").save(buffer, "JPEG", quality=90)
    write("cmyk.jpg", buffer.getvalue())

    # Refused inputs.
    write("bomb.png", bomb_png())
    good = open(os.path.join(out, "small.jpg"), "rb").read()
    write("truncated.jpg", good[: len(good) * 2 // 3])
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("payload.txt", "KINDRED-SECRET-PAYLOAD")
    write("polyglot.jpg", good + zipped.getvalue())
    write("padded.jpg", good + b"\x00" * 64)
    png = open(os.path.join(out, "alpha.png"), "rb").read()
    write("polyglot.png", png + b"<?php system($_GET['c']); ?>")
    write("truncated.png", png[: len(png) // 2])
    write("image.svg", b'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><rect width="100" height="100"/></svg>')
    buffer = io.BytesIO()
    upright(100, 100).save(buffer, "TIFF")
    write("image.tiff", buffer.getvalue())
    buffer = io.BytesIO()
    upright(100, 100).save(buffer, "GIF")
    write("image.gif", buffer.getvalue())
    write("document.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")
    write("empty.bin", b"")
    write("random.bin", random.Random(10).randbytes(4096))
    # A JPEG header with garbage entropy data: passes the container walk, fails in the decoder.
    head = good[: good.index(b"\xff\xda")]
    sos_length = struct.unpack(">H", good[good.index(b"\xff\xda") + 2 : good.index(b"\xff\xda") + 4])[0]
    sos = good[good.index(b"\xff\xda") : good.index(b"\xff\xda") + 2 + sos_length]
    garbage = bytes(b if b != 0xFF else 0x00 for b in random.Random(11).randbytes(3000))
    write("garbage.jpg", head + sos + garbage + b"\xff\xd9")

    json.dump(made, sys.stdout)


if __name__ == "__main__":
    main()
