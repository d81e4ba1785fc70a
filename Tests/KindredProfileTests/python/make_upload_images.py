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
