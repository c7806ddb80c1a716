"""libvips (pyvips + pyvips-binary: the library ships inside the wheel) as the project uses it:
its process-wide operation cache and worker threads bounded by settings, and the few loaders we
let it run (docs/images.md, "Engine").

libvips keeps a cache of recent operations (by default 100 MB, 1000 operations, 100 open files)
and runs each image pipeline on up to one worker thread per core. Both are process-wide: `/img`
and the image pipeline call `configure()` with the VIPS_* settings, so a server's memory and
threads stay within what settings.py says whatever the load.
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
