"""A downloaded body → the webp we store, or a one-line reason it is unusable (libvips:
cannaspider/images/vips.py; docs/images.md, "What is skipped").

Only the formats product photos come in are decoded (JPEG, PNG, WebP, GIF, AVIF): libvips sniffs
the first bytes, and a body it takes for anything else (HTML from a CDN error page, SVG, TIFF,
PostScript) is refused before any loader runs. The pixel count is read from the header, before
any pixel is decoded, so a decompression bomb costs nothing. EXIF orientation is applied (the
stored pixels are upright; the tag is not kept), the ICC profile is kept, transparency is kept;
CMYK and grey become sRGB. A truncated or corrupt body fails (libvips `fail_on="error"`) instead
of being stored half grey.
"""

from __future__ import annotations

import pyvips

from cannaspider.images.vips import KEEP_ICC, loader_of, reason

WEBP_EFFORT = 4  # libwebp's method 4


class UnusableImage(ValueError):
    """The body is not an image we store: `code` says which way (the pipeline's stat
    `images_failed/<code>`), the message why, in one line."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def to_webp(body: bytes, *, quality: int, max_pixels: int) -> tuple[bytes, tuple[int, int]]:
    """The webp bytes and (width, height) of the upright image."""
    if not body:
        raise UnusableImage("empty", "empty body")
    kind = loader_of(body)
    if kind is None:
        raise UnusableImage("not_an_image", f"not an image ({describe(body)})")
    try:
        # the header only: the size is known before any pixel is decoded
        image = pyvips.Image.new_from_buffer(body, "", fail_on="error")
        width, height = image.width, image.height
        if width * height > max_pixels:
            raise UnusableImage("bomb", f"{width}x{height} is more than {max_pixels} pixels (a decompression bomb?)")
        if image.get_typeof("orientation") and image.get("orientation") > 1:
            # turning needs the whole image, not a stream of lines
            image = pyvips.Image.new_from_buffer(body, "", access="random", fail_on="error").autorot()
        image = _srgb(image)
        webp = image.webpsave_buffer(Q=quality, effort=WEBP_EFFORT, keep=KEEP_ICC)
    except pyvips.Error as exc:  # libvips' ways of saying truncated/corrupt
        raise UnusableImage("broken", f"broken {kind} image: {reason(exc)}") from None
    return webp, (image.width, image.height)


def declared_pixels(body: bytes, *, max_pixels: int) -> int:
    """The pixels a conversion of `body` decodes, from its header (what the pipeline's pixel budget
    holds for it); 0 for a body to_webp() refuses before decoding (not an image, unreadable, or
    over `max_pixels`): such a refusal costs nothing to budget."""
    if not body or loader_of(body) is None:
        return 0
    try:
        image = pyvips.Image.new_from_buffer(body, "", fail_on="error")
    except pyvips.Error:
        return 0
    pixels = int(image.width * image.height)
    return pixels if pixels <= max_pixels else 0


def _srgb(image: pyvips.Image) -> pyvips.Image:
    """8-bit sRGB, with alpha where the source has any (palette tRNS is an alpha band already)."""
    if image.interpretation == "cmyk":
        # webp has no CMYK: through the embedded profile when there is one, else a generic CMYK one
        return image.icc_transform("srgb", input_profile="cmyk", embedded=True).copy(interpretation="srgb")
    if image.interpretation in ("srgb", "rgb") and image.format == "uchar":
        return image
    if image.interpretation in ("b-w", "grey16"):  # a grey profile does not describe RGB pixels
        image = image.copy()
        if image.get_typeof("icc-profile-data"):
            image.remove("icc-profile-data")
    return image.colourspace("srgb").cast("uchar")


def describe(body: bytes) -> str:
    """What a body that is not an image looks like, for the reason line."""
    head = body[:256].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or b"<html" in head:
        return "HTML"
    if head[:1] in (b"{", b"["):
        return "JSON"
    return f"{len(body)} bytes of unknown content"
