"""libvips as the project uses it, and a downloaded body → the webp we store, or a one-line reason it
is unusable (docs/images.md, "Engine", "What is skipped").

libvips (pyvips + pyvips-binary: the library ships inside the wheel): its process-wide operation
cache and worker threads bounded by settings, and the few loaders we let it run. libvips keeps a
cache of recent operations (by default 100 MB, 1000 operations, 100 open files) and runs each image
pipeline on up to one worker thread per core. Both are process-wide: `/img` and the image pipeline
call `configure()` with the VIPS_* settings, so a server's memory and threads stay within what
settings.py says whatever the load.

The conversion (`to_webp`, IMAGES_CONVERTER's default): only the formats product photos come in are
decoded (JPEG, PNG, WebP, GIF, AVIF): libvips sniffs the first bytes, and a body it takes for
anything else (HTML from a CDN error page, SVG, TIFF, PostScript) is refused before any loader runs.
The pixel count is read from the header, before any pixel is decoded, so a decompression bomb costs
nothing. EXIF orientation is applied (the stored pixels are upright; the tag is not kept), the ICC
profile is kept, transparency is kept; CMYK and grey become sRGB. A truncated or corrupt body fails
(libvips `fail_on="error"`) instead of being stored half grey.
"""

from __future__ import annotations

import logging

import pyvips
from scrapy.settings import BaseSettings

# the loaders product photos need; anything else libvips could read (SVG, TIFF, ...) is refused
# before it runs
LOADERS = {
    "VipsForeignLoadJpegBuffer": "JPEG",
    "VipsForeignLoadPngBuffer": "PNG",
    "VipsForeignLoadWebpBuffer": "WebP",
    "VipsForeignLoadNsgifBuffer": "GIF",
    "VipsForeignLoadGifBuffer": "GIF",
    "VipsForeignLoadHeifBuffer": "AVIF",  # HEIC is refused by its brand: see loader_of()
}
AVIF_BRANDS = (b"avif", b"avis")
# libvips' warnings ("not enough data", "error in tile 0 x 0") come ahead of the error it then
# raises, which the pipeline and /img report in one line of their own: they would double it
logging.getLogger("pyvips").setLevel(logging.ERROR)
KEEP_ICC = pyvips.enums.ForeignKeep.ICC  # what an encoder keeps: the colour profile; EXIF, XMP, IPTC go


def configure(settings: BaseSettings) -> None:
    """Bound libvips' operation cache and worker threads (process-wide; the last call wins)."""
    pyvips.cache_set_max(settings.getint("VIPS_CACHE_MAX_OPERATIONS"))
    pyvips.cache_set_max_mem(settings.getint("VIPS_CACHE_MAX_BYTES"))
    pyvips.cache_set_max_files(settings.getint("VIPS_CACHE_MAX_FILES"))
    pyvips.concurrency_set(max(1, settings.getint("VIPS_CONCURRENCY")))
    # loaders libvips marks untrusted (ImageMagick, matlab, FITS, ...) never run, whatever the bytes
    pyvips.block_untrusted_set(True)


def loader_of(body: bytes) -> str | None:
    """The format name of an accepted body ("JPEG", "PNG", ...), or None: libvips sniffs the bytes
    (the header only), and only the loaders above, AVIF rather than any HEIF, are accepted."""
    pointer = pyvips.vips_lib.vips_foreign_find_load_buffer(body, len(body))
    if pointer == pyvips.ffi.NULL:
        pyvips.vips_lib.vips_error_clear()  # "is not a known buffer format" stays out of later errors
        return None
    name = LOADERS.get(pyvips.ffi.string(pointer).decode())
    if name == "AVIF":
        ftyp = body[8 : int.from_bytes(body[:4], "big")]  # major brand, version, compatible brands
        if not any(ftyp[i : i + 4] in AVIF_BRANDS for i in range(0, len(ftyp) - 3, 4)):
            return None
    return name


def avif_encoder() -> bool:
    """Whether this libvips encodes AVIF (heifsave with an AV1 encoder; pyvips-binary's has aom)."""
    try:
        (pyvips.Image.black(2, 2, bands=3)).cast("uchar").heifsave_buffer(compression="av1", effort=0)
    except pyvips.Error:
        return False
    return True


def reason(exc: pyvips.Error) -> str:
    """libvips' own words, one line (its detail ends with a newline and may list several)."""
    lines = [line.strip() for line in (exc.detail or exc.message or "").splitlines() if line.strip()]
    return lines[0] if lines else "libvips error"


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
