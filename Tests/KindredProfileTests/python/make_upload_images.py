#!/usr/bin/env python3
"""Writes upload test images into OUT_DIR with Pillow and piexif (independent of libvips):
gps_orientation6.jpg  1600x1200 stored, EXIF orientation 6 (displayed 1200x1600), GPS tags, red left half as stored
plain.png             800x1000 PNG with a text chunk
small.webp            900x900 WebP
tiny.png              100x100 PNG (below the 320x320 minimum)
image.svg             an SVG (not on the allowlist)
"""
import os
import sys

import piexif
from PIL import Image, PngImagePlugin

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

image = Image.new("RGB", (1600, 1200), (30, 30, 220))
image.paste(Image.new("RGB", (800, 1200), (220, 30, 30)), (0, 0))
exif = piexif.dump({
    "0th": {piexif.ImageIFD.Orientation: 6, piexif.ImageIFD.Make: b"KINDRED-SECRET-CAMERA"},
    "GPS": {
        piexif.GPSIFD.GPSLatitudeRef: b"N",
        piexif.GPSIFD.GPSLatitude: ((48, 1), (51, 1), (2964, 100)),
        piexif.GPSIFD.GPSLongitudeRef: b"E",
        piexif.GPSIFD.GPSLongitude: ((2, 1), (17, 1), (4032, 100)),
    },
})
image.save(os.path.join(out, "gps_orientation6.jpg"), "JPEG", quality=90, exif=exif)

info = PngImagePlugin.PngInfo()
info.add_text("Comment", "KINDRED-SECRET-TEXT")
Image.new("RGB", (800, 1000), (10, 200, 10)).save(os.path.join(out, "plain.png"), "PNG", pnginfo=info)
Image.new("RGB", (900, 900), (200, 200, 10)).save(os.path.join(out, "small.webp"), "WEBP", quality=80)
Image.new("RGB", (100, 100), (1, 2, 3)).save(os.path.join(out, "tiny.png"), "PNG")
with open(os.path.join(out, "image.svg"), "w") as svg:
    svg.write('<svg xmlns="http://www.w3.org/2000/svg" width="800" height="800"><rect width="800" height="800"/></svg>')

# Hostile inputs: a few-KB PNG that declares 30000x30000 pixels, a JPEG with a ZIP appended, TIFF and GIF.
import struct
import zipfile
import zlib


def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


row = b"\x00" + b"\x00" * 3 * 64
bomb = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(row * 64, 9)) + chunk(b"IEND", b""))
with open(os.path.join(out, "bomb.png"), "wb") as f:
    f.write(bomb)

with open(os.path.join(out, "gps_orientation6.jpg"), "rb") as f:
    jpeg = f.read()
archive_path = os.path.join(out, "payload.zip")
with zipfile.ZipFile(archive_path, "w") as archive:
    archive.writestr("evil.txt", "not a photo")
with open(archive_path, "rb") as f:
    polyglot = jpeg + f.read()
with open(os.path.join(out, "polyglot.jpg"), "wb") as f:
    f.write(polyglot)
Image.new("RGB", (800, 800), (5, 5, 5)).save(os.path.join(out, "image.tiff"), "TIFF")
Image.new("RGB", (800, 800), (5, 5, 5)).save(os.path.join(out, "image.gif"), "GIF")
