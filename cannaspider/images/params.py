"""`/img`'s query parameters → a Variant (cannaspider/images/render.py), as the seed's proxy
(sharp) takes them: `w`, `h` (1–4000), `q` (1–100, default 80), `fit` (cover, contain, fill,
inside, outside; default cover), `blur` (sigma, 0.3–1000), `gray` (1), `format` (webp default,
jpeg, png, avif). A bad or unknown parameter is a BadParameter saying which (docs/images.md,
"The image proxy")."""

from __future__ import annotations

from cannaspider.images import vips
from cannaspider.images.render import BadParameter, Variant

MAX_SIDE = 4000
DEFAULT_QUALITY = 80
FITS = ("cover", "contain", "fill", "inside", "outside")
MEDIA_TYPES = {"webp": "image/webp", "jpeg": "image/jpeg", "png": "image/png", "avif": "image/avif"}
PARAMETERS = ("w", "h", "q", "fit", "blur", "gray", "format")
AVIF = vips.avif_encoder()


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
    blur = _blur(seen)
    gray_raw = seen.get("gray", "0").lower()
    if gray_raw not in ("0", "1", "true", "false"):
        raise BadParameter(f"gray must be 1 or 0, got {seen['gray']!r}")
    fmt = _format(seen)
    quality = DEFAULT_QUALITY if q is None else q
    return Variant(w, h, quality, fit, blur, gray_raw in ("1", "true"), fmt, q is not None)


def _blur(seen: dict[str, str]) -> float | None:
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
