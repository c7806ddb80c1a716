"""A variant of a stored webp, rendered with libvips (cannaspider/images/convert.py): the engine
behind `GET /img` (cannaspider/web/images.py; docs/images.md, "The image proxy").

sharp, which the seed's proxy used, is libvips too, so `fit`, `blur`, `gray`, `q` and `format`
mean here what they meant there. The stored file's header is read first (no pixel decoded): a
file declaring more than `source_max_pixels` is refused, so is a variant over `max_pixels`; a
variant is never larger than its source (within_source), and a blur costs a few operations per
pixel whatever its sigma (_blur): the work of a render goes with its pixels (Plan.pixels), which
`/img` budgets (cannaspider/images/budget.py).
Resizing is libvips' `thumbnail`, which shrinks on load (webp decodes straight to a smaller
scale) and streams the pixels instead of holding the whole image. Anything libvips cannot decode
is a `StoredImageError` with its reason, never a crash of the worker.

`/img`'s query parameters become a Variant here too (`parse_variant`), as the seed's proxy (sharp)
takes them: `w`, `h` (1–4000), `q` (1–100, default 80), `fit` (cover, contain, fill, inside,
outside; default cover), `blur` (sigma, 0.3–1000), `gray` (1), `format` (webp default, jpeg, png,
avif). A bad or unknown parameter is a BadParameter saying which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyvips

from cannaspider.images import convert
from cannaspider.images.convert import KEEP_ICC, reason

WEBP_EFFORT = 4  # libwebp's method 4: sharp's default
AVIF_EFFORT = 1  # aom speed 8: a thumbnail in tens of milliseconds, not seconds
BLUR_DIRECT_MAX = 3.0  # above this sigma, blur a smaller copy (see _blur)
BLUR_MIN_SIDE = 24  # the smaller copy's shorter side, at least


class BadParameter(ValueError):
    """A 400: the message says which parameter and why."""


class StoredImageError(ValueError):
    """The stored file cannot be rendered (corrupt, truncated, or declaring too many pixels):
    the message says why, without the server's paths."""


@dataclass(frozen=True, slots=True)
class Variant:
    w: int | None = None
    h: int | None = None
    q: int = 80
    fit: str = "cover"
    blur: float | None = None
    gray: bool = False
    format: str = "webp"
    q_given: bool = False

    @property
    def is_original(self) -> bool:
        """Nothing to do: the stored webp itself is the answer."""
        return (
            self.w is None
            and self.h is None
            and self.blur is None
            and not self.gray
            and self.format == "webp"
            and not self.q_given
        )

    def canonical(self) -> str:
        return f"w={self.w}&h={self.h}&q={self.q}&fit={self.fit}&blur={self.blur}&gray={int(self.gray)}&f={self.format}"


def target_size(source: tuple[int, int], v: Variant) -> tuple[int, int]:
    """The output size, as sharp sizes it: one side given keeps the aspect ratio; both sides given
    follow `fit` (cover/contain/fill: exactly w × h; inside: within; outside: at least)."""
    sw, sh = source
    if v.w is None and v.h is None:
        return sw, sh
    if v.w is None or v.h is None:
        scale = v.w / sw if v.w is not None else v.h / sh  # type: ignore[operator]
        return max(1, round(sw * scale)), max(1, round(sh * scale))
    if v.fit in ("cover", "contain", "fill"):
        return v.w, v.h
    pick = min if v.fit == "inside" else max
    scale = pick(v.w / sw, v.h / sh)
    return max(1, round(sw * scale)), max(1, round(sh * scale))


@dataclass(frozen=True, slots=True)
class Plan:
    """What a render will do, from the stored file's header: its size and the output's."""

    source: tuple[int, int]
    size: tuple[int, int]

    @property
    def pixels(self) -> int:
        """What it costs, in pixels (the budget's unit): the source decoded and the output made."""
        return self.source[0] * self.source[1] + self.size[0] * self.size[1]


def within_source(size: tuple[int, int], source: tuple[int, int]) -> tuple[int, int]:
    """No enlarging: a size past the source's width or height is scaled down, keeping its own
    aspect ratio, until it fits (w=4000&h=4000 of an 800×600 source is 600×600)."""
    scale = min(1.0, source[0] / size[0], source[1] / size[1])
    return max(1, round(size[0] * scale)), max(1, round(size[1] * scale))


def plan(source: Path | bytes, v: Variant, max_pixels: int, source_max_pixels: int) -> Plan:
    """Read the header (no pixel decoded) and size the output (runs in a worker thread): a source
    over `source_max_pixels` is a StoredImageError, a variant asked over `max_pixels` a BadParameter."""
    try:
        # the header only (webp alone: the pipeline stores nothing else)
        header = (
            pyvips.Image.webpload_buffer(source, access="sequential")
            if isinstance(source, bytes)
            # revalidate: libvips keeps a file's load by its name, so a file replaced in place
            # would be sized from its old header (its ETag, from size and mtime, already new)
            else pyvips.Image.webpload(str(source), access="sequential", revalidate=True)
        )
    except pyvips.Error as exc:
        raise StoredImageError(f"not a readable webp ({reason(exc)})") from None
    sw, sh = header.width, header.height
    if sw * sh > source_max_pixels:
        raise StoredImageError(f"it is {sw}x{sh} pixels, more than the {source_max_pixels} this server decodes")
    size = target_size((sw, sh), v)
    if size[0] * size[1] > max_pixels:
        raise BadParameter(f"{size[0]}x{size[1]} is more than the {max_pixels} pixels this server renders")
    return Plan((sw, sh), within_source(size, (sw, sh)))


def render(source: Path | bytes, v: Variant, max_pixels: int, source_max_pixels: int, at: Plan | None = None) -> bytes:
    """The variant's bytes (runs in a worker thread); `at`: its plan(), when already made."""
    at = at or plan(source, v, max_pixels, source_max_pixels)
    try:
        image = _resize(source, at.source, at.size, v)
        if v.blur is not None:
            image = _blur(image, min(v.blur, max(at.size)))
        if v.gray:
            image = image.colourspace("b-w").copy()
            if "icc-profile-data" in image.get_fields():
                image.remove("icc-profile-data")  # an RGB profile does not describe grey pixels
        return encode(image, v.format, v.q)
    except pyvips.Error as exc:  # the pixels are decoded while encoding: a truncated file fails here
        raise StoredImageError(f"it cannot be decoded ({reason(exc)})") from None


def _thumbnail(source: Path | bytes, width: int, height: int, **options: object) -> pyvips.Image:
    if isinstance(source, bytes):
        return pyvips.Image.thumbnail_buffer(source, width, height=height, fail_on="error", **options)
    return pyvips.Image.thumbnail(str(source), width, height=height, fail_on="error", **options)


def _resize(source: Path | bytes, source_size: tuple[int, int], size: tuple[int, int], v: Variant) -> pyvips.Image:
    both = v.w is not None and v.h is not None
    if both and v.fit == "cover":
        # scaled to cover w × h and cropped to it, centred (sharp's default position)
        return _thumbnail(source, size[0], size[1], crop="centre")
    if both and v.fit == "contain":
        inner = target_size(source_size, Variant(size[0], size[1], fit="inside"))
        image = _thumbnail(source, inner[0], inner[1], size="force")
        if not image.hasalpha():
            image = image.bandjoin(255)
        # letterboxed on transparent (white in a JPEG: encode() flattens)
        return image.gravity("centre", size[0], size[1], extend="background", background=[0] * image.bands)
    if size == source_size:
        return (
            pyvips.Image.webpload_buffer(source, fail_on="error")
            if isinstance(source, bytes)
            else pyvips.Image.webpload(str(source), fail_on="error", revalidate=True)
        )
    # exactly the size target_size() says (fill stretches; the others keep the aspect ratio, to the pixel)
    return _thumbnail(source, size[0], size[1], size="force")


def _blur(image: pyvips.Image, sigma: float) -> pyvips.Image:
    """A Gaussian blur of `sigma` px, alpha premultiplied (transparent pixels lend no colour).

    A direct Gaussian costs its kernel width (~7 sigma) per pixel: sigma 20 on a 4000 px square
    held a core for 10 s. Above BLUR_DIRECT_MAX the image is shrunk by sigma / BLUR_DIRECT_MAX,
    blurred with BLUR_DIRECT_MAX and enlarged back, so a blur costs a few operations per pixel
    whatever its sigma: at such radii no detail survives to tell the two apart. The caller bounds
    sigma by the output's longer side (past it, the image is one colour either way).
    """
    alpha = image.hasalpha()
    if alpha:
        image = image.premultiply()
    if sigma <= BLUR_DIRECT_MAX:
        image = image.gaussblur(sigma)
    else:
        width, height = image.width, image.height
        # a copy too small to say where an edge was blurs unlike the real thing: its shorter side
        # keeps BLUR_MIN_SIDE px (a larger sigma on so few pixels costs nothing)
        factor = max(1.0, min(sigma / BLUR_DIRECT_MAX, min(width, height) / BLUR_MIN_SIDE))
        small = image.resize(1 / factor)
        small = small.gaussblur(sigma * small.width / width)
        image = small.resize(width / small.width, vscale=height / small.height)
        image = image.crop(0, 0, min(width, image.width), min(height, image.height)).embed(
            0, 0, width, height, extend="copy"
        )
    if alpha:
        image = image.unpremultiply()
    return image.cast("uchar")


def encode(image: pyvips.Image, fmt: str, quality: int) -> bytes:
    if fmt == "jpeg":
        if image.hasalpha():
            image = image.flatten(background=[255] * (image.bands - 1))
        body: bytes = image.jpegsave_buffer(Q=quality, keep=KEEP_ICC)
    elif fmt == "png":
        body = image.pngsave_buffer(compression=6, keep=KEEP_ICC)
    elif fmt == "avif":
        body = image.heifsave_buffer(Q=quality, compression="av1", effort=AVIF_EFFORT, keep=KEEP_ICC)
    else:
        body = image.webpsave_buffer(Q=quality, effort=WEBP_EFFORT, keep=KEEP_ICC)
    return body


# `/img`'s query parameters → a Variant (the module's docstring says how they are read).

MAX_SIDE = 4000
DEFAULT_QUALITY = 80
FITS = ("cover", "contain", "fill", "inside", "outside")
MEDIA_TYPES = {"webp": "image/webp", "jpeg": "image/jpeg", "png": "image/png", "avif": "image/avif"}
PARAMETERS = ("w", "h", "q", "fit", "blur", "gray", "format")
AVIF = convert.avif_encoder()


def parse_variant(items: list[tuple[str, str]]) -> Variant:
    seen: dict[str, str] = {}
    for name, value in items:
        if name not in PARAMETERS:
            raise BadParameter(f"unknown parameter {name!r} (known: {', '.join(PARAMETERS)})")
        if name in seen:
            raise BadParameter(f"parameter {name!r} given twice")
        seen[name] = value.strip()
    w = _int(seen, "w", 1, MAX_SIDE)
    h = _int(seen, "h", 1, MAX_SIDE)
    q = _int(seen, "q", 1, 100)
    fit = seen.get("fit", "cover").lower()
    if fit not in FITS:
        raise BadParameter(f"fit must be one of {', '.join(FITS)}, got {seen['fit']!r}")
    blur = _blur_sigma(seen)
    gray_raw = seen.get("gray", "0").lower()
    if gray_raw not in ("0", "1", "true", "false"):
        raise BadParameter(f"gray must be 1 or 0, got {seen['gray']!r}")
    fmt = _format(seen)
    quality = DEFAULT_QUALITY if q is None else q
    return Variant(w, h, quality, fit, blur, gray_raw in ("1", "true"), fmt, q is not None)


def _blur_sigma(seen: dict[str, str]) -> float | None:
    if "blur" not in seen:
        return None
    try:
        blur = float(seen["blur"])
    except ValueError:
        raise BadParameter(f"blur must be a number from 0.3 to 1000, got {seen['blur']!r}") from None
    if not 0.3 <= blur <= 1000:  # also false for nan
        raise BadParameter(f"blur must be from 0.3 to 1000, got {seen['blur']!r}")
    return blur


def _format(seen: dict[str, str]) -> str:
    fmt = seen.get("format", "webp").lower()
    if fmt == "jpg":
        fmt = "jpeg"
    if fmt not in MEDIA_TYPES:
        raise BadParameter(f"format must be one of {', '.join(MEDIA_TYPES)}, got {seen['format']!r}")
    if fmt == "avif" and not AVIF:
        raise BadParameter("format=avif: this server's libvips was built without an AVIF encoder")
    return fmt


def _int(seen: dict[str, str], name: str, low: int, high: int) -> int | None:
    if name not in seen:
        return None
    raw = seen[name]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 6:  # isdigit() alone takes ² and ①
        raise BadParameter(f"{name} must be a whole number from {low} to {high}, got {raw!r}")
    value = int(raw)
    if not low <= value <= high:
        raise BadParameter(f"{name} must be from {low} to {high}, got {value}")
    return value
