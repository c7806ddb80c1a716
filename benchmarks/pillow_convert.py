"""The Pillow conversion the pipeline used before libvips (cannaspider/images/convert.py): the
baseline the benchmarks measure it against, in the same run (benchmarks/conversion.py, and
`benchmarks/ingest.py --converters`, which puts it in a crawl with `-s
IMAGES_CONVERTER=benchmarks.pillow_convert.to_webp`). Not used by the project: in a crawl libvips
converts twice as fast (docs/images.md, "Which converter").

Same contract: a downloaded body → the webp we store, or a one-line UnusableImage.

Only the formats product photos come in are decoded (JPEG, PNG, WebP, GIF, AVIF): a body that
claims to be something else (HTML from a CDN error page, a PostScript file Pillow would hand to
Ghostscript) is refused before any decoder runs. The pixel count is checked from the header,
before decoding, so a decompression bomb costs nothing. EXIF orientation is applied (the stored
pixels are upright; the tag is not kept), the ICC profile is kept, transparency is kept.
"""

from __future__ import annotations

import io

from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from cannaspider.images.convert import UnusableImage, describe

ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "AVIF")


def to_webp(body: bytes, *, quality: int, max_pixels: int) -> tuple[bytes, tuple[int, int]]:
    """The webp bytes and (width, height) of the upright image."""
    if not body:
        raise UnusableImage("empty", "empty body")
    image: Image.Image
    try:
        # the header only: the size is known before any pixel is decoded
        image = Image.open(io.BytesIO(body), formats=ACCEPTED_FORMATS)
        width, height = image.size
        if width * height > max_pixels:
            raise UnusableImage("bomb", f"{width}x{height} is more than {max_pixels} pixels (a decompression bomb?)")
        image.load()
        icc = image.info.get("icc_profile")
        image = ImageOps.exif_transpose(image) or image
    except UnusableImage:
        raise
    except UnidentifiedImageError:
        raise UnusableImage("not_an_image", f"not an image ({describe(body)})") from None
    except Image.DecompressionBombError as exc:  # Pillow's own limit (MAX_IMAGE_PIXELS), if lower
        raise UnusableImage("bomb", f"decompression bomb: {exc}") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:  # Pillow's ways of saying truncated/corrupt
        raise UnusableImage("broken", f"broken {image_format(body)} image: {exc}") from None
    image, icc = _webp_mode(image, icc)
    out = io.BytesIO()
    image.save(out, "WEBP", quality=quality, method=4, icc_profile=icc or None, exif=b"")
    return out.getvalue(), image.size


def _webp_mode(image: Image.Image, icc: bytes | None) -> tuple[Image.Image, bytes | None]:
    """RGB, or RGBA where the source has any transparency (palette, LA, tRNS)."""
    if image.mode == "CMYK":
        # webp has no CMYK: convert through the embedded profile to sRGB when there is one
        if icc:
            try:
                source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
                converted = ImageCms.profileToProfile(image, source, ImageCms.createProfile("sRGB"), outputMode="RGB")
                if converted is not None:
                    return converted, None
            except (ImageCms.PyCMSError, OSError):
                pass
        return image.convert("RGB"), None
    has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    if image.mode in ("RGB", "RGBA"):
        return image, icc
    if image.mode not in ("P", "PA"):  # a grey (or 16-bit) profile does not describe RGB pixels
        icc = None
    return image.convert("RGBA" if has_alpha else "RGB"), icc


def image_format(body: bytes) -> str:
    for magic, name in ((b"\xff\xd8", "JPEG"), (b"\x89PNG", "PNG"), (b"RIFF", "WebP"), (b"GIF8", "GIF")):
        if body.startswith(magic):
            return name
    return "image"
