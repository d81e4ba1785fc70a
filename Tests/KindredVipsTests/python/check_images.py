#!/usr/bin/env python3
"""Checks the pipeline's renditions with readers independent of libvips: Pillow, exifread and a byte-level walk.

Usage: check_images.py MANIFEST.json

The manifest is a list of {"path", "format" ("jpeg"|"webp"), "width", "height", "expect"}; "expect" names the
picture the file must show:
  red-top        red top half, blue bottom half (the upright test picture; proves orientation was applied)
  red-top-white  red top half, white bottom half (transparent pixels composed on white)
  grey           one flat grey
  reddish-top    red dominates the top half, blue the bottom (CMYK converted, colours shift a little)
  any            no pixel check
Prints {"ok": bool, "problems": [...]} and exits 1 when a problem was found.
"""
import json
import sys

import exifread
from PIL import Image

RED = (220, 30, 30)
BLUE = (30, 30, 220)
WHITE = (255, 255, 255)
# Strings that metadata blocks carry; none may occur anywhere in a rendition (all 4+ bytes, so compressed data
# cannot match them by chance).
FORBIDDEN = [
    b"Exif\x00",
    b"KINDRED-SECRET",
    b"KindredCam",
    b"http://ns.adobe.com/xap",
    b"x:xmpmeta",
    b"ICC_PROFILE",
    b"Photoshop 3.0",
    b"8BIM",
    b"acsp",  # every ICC profile's header signature
]


def close(pixel, colour, tolerance=24):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


def jpeg_segments(data):
    """The marker bytes of every segment before the first SOS."""
    markers = []
    index = 2
    while index + 4 <= len(data) and data[index] == 0xFF:
        marker = data[index + 1]
        markers.append(marker)
        if marker == 0xDA:
            break
        index += 2 + int.from_bytes(data[index + 2 : index + 4], "big")
    return markers


def riff_chunks(data):
    chunks = []
    index = 12
    while index + 8 <= len(data):
        size = int.from_bytes(data[index + 4 : index + 8], "little")
        chunks.append(data[index : index + 4].decode("latin-1"))
        index += 8 + size + (size & 1)
    return chunks


def check(entry):
    problems = []
    path = entry["path"]
    data = open(path, "rb").read()
    name = path.rsplit("/", 1)[-1]

    for needle in FORBIDDEN:
        if needle in data:
            problems.append(f"{name}: contains {needle!r}")

    if entry["format"] == "jpeg":
        if not data.startswith(b"\xff\xd8\xff"):
            problems.append(f"{name}: not a JPEG")
        extra = [hex(m) for m in jpeg_segments(data) if 0xE1 <= m <= 0xEF or m == 0xFE]
        if extra:
            problems.append(f"{name}: metadata segments {extra}")
        with open(path, "rb") as f:
            tags = exifread.process_file(f, details=False)
        if tags:
            problems.append(f"{name}: exifread found {sorted(tags)[:5]}")
    else:
        if not (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
            problems.append(f"{name}: not a WebP")
        chunks = riff_chunks(data)
        if chunks != ["VP8 "]:
            problems.append(f"{name}: chunks {chunks} (only 'VP8 ' expected)")

    image = Image.open(path)
    image.load()
    expected_format = {"jpeg": "JPEG", "webp": "WEBP"}[entry["format"]]
    if image.format != expected_format:
        problems.append(f"{name}: Pillow reads {image.format}, expected {expected_format}")
    for key in ("exif", "icc_profile", "xmp", "XML:com.adobe.xmp", "comment", "photoshop"):
        if image.info.get(key):
            problems.append(f"{name}: Pillow finds {key}")
    if image.getexif():
        problems.append(f"{name}: Pillow finds EXIF tags")
    if image.mode != "RGB":
        problems.append(f"{name}: mode {image.mode}, expected RGB")
    if image.size != (entry["width"], entry["height"]):
        problems.append(f"{name}: size {image.size}, expected {(entry['width'], entry['height'])}")

    image = image.convert("RGB")
    width, height = image.size
    top = image.getpixel((width // 2, height // 4))
    bottom = image.getpixel((width // 2, height * 3 // 4))
    expect = entry["expect"]
    if expect == "red-top" and not (close(top, RED) and close(bottom, BLUE)):
        problems.append(f"{name}: top {top} bottom {bottom}, expected red over blue")
    elif expect == "red-top-white" and not (close(top, RED) and close(bottom, WHITE)):
        problems.append(f"{name}: top {top} bottom {bottom}, expected red over white")
    elif expect == "grey" and not (top == bottom and top[0] == top[1] == top[2]):
        problems.append(f"{name}: top {top} bottom {bottom}, expected one flat grey")
    elif expect == "reddish-top" and not (top[0] > top[2] + 60 and bottom[2] > bottom[0] + 30):
        problems.append(f"{name}: top {top} bottom {bottom}, expected reddish over bluish")
    return problems


def main():
    manifest = json.load(open(sys.argv[1]))
    problems = [problem for entry in manifest for problem in check(entry)]
    json.dump({"ok": not problems, "checked": len(manifest), "problems": problems}, sys.stdout)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
