"""cannaspider/images/render.py: libvips renders exactly the size sharp's rules give, blurs any
sigma in bounded time, greys every format, and refuses what it must before decoding."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import pyvips
from PIL import Image, ImageChops, ImageStat

from cannaspider.images.render import (
    BadParameter,
    StoredImageError,
    Variant,
    plan,
    render,
    target_size,
    within_source,
)

SOURCE = (397, 211)  # odd sides: every rounding shows


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("render") / "image.webp"
    image = Image.linear_gradient("L").resize(SOURCE).convert("RGB")
    image.paste((0, 200, 0), (0, 0, 100, 211))
    image.save(path, "WEBP", quality=90)
    return path


def out(body: bytes) -> Image.Image:
    return Image.open(io.BytesIO(body))


@pytest.mark.parametrize("fit", ["cover", "contain", "fill", "inside", "outside"])
@pytest.mark.parametrize(("w", "h"), [(1, None), (None, 1), (37, None), (None, 99), (50, 13), (13, 50), (398, 212)])
def test_the_size_is_target_sizes_to_the_pixel_within_the_source(stored, fit, w, h):
    v = Variant(w, h, fit=fit, format="png")
    assert out(render(stored, v, 16_000_000, 50_000_000)).size == within_source(target_size(SOURCE, v), SOURCE)


@pytest.mark.parametrize(
    ("size", "fits"),
    [
        ((4000, 4000), (211, 211)),  # a square box stays square, as large as the source allows
        ((800, 100), (397, 50)),
        ((397, 211), (397, 211)),
        ((398, 10), (397, 10)),
        ((100, 50), (100, 50)),  # within already
    ],
)
def test_no_enlarging_past_the_source(size, fits):
    assert within_source(size, SOURCE) == fits


def test_a_variant_is_never_larger_than_its_source(stored):
    """w=4000&h=4000&fit=contain of a 397×211 source: 211×211, letterboxed, not 16 MP."""
    at = plan(stored, Variant(4000, 4000, fit="contain", blur=20), 16_000_000, 50_000_000)
    assert (at.source, at.size, at.pixels) == (SOURCE, (211, 211), 397 * 211 + 211 * 211)
    assert out(render(stored, Variant(4000, 4000, fit="contain", format="png"), 16_000_000, 50_000_000)).size == (
        211,
        211,
    )
    assert out(render(stored, Variant(w=1000, format="png"), 16_000_000, 50_000_000)).size == SOURCE


def test_a_blur_past_the_outputs_side_is_the_blur_of_that_side(stored):
    v = Variant(40, 20, fit="fill", format="png")
    widest = render(stored, Variant(40, 20, fit="fill", blur=40, format="png"), 16_000_000, 50_000_000)
    assert render(stored, Variant(40, 20, fit="fill", blur=1000, format="png"), 16_000_000, 50_000_000) == widest
    assert render(stored, v, 16_000_000, 50_000_000) != widest


def test_bytes_and_a_file_render_alike(stored):
    v = Variant(w=120, format="png")
    assert render(stored.read_bytes(), v, 16_000_000, 50_000_000) == render(stored, v, 16_000_000, 50_000_000)


@pytest.mark.parametrize("sigma", [0.3, 20.0, 21.0, 1000.0])
def test_any_sigma_keeps_the_size_and_spreads_the_edge(stored, sigma):
    v = Variant(w=333, h=177, fit="fill", blur=sigma, format="png")
    blurred = out(render(stored, v, 16_000_000, 50_000_000)).convert("RGB")
    assert blurred.size == (333, 177)
    if sigma >= 20:  # the green band's edge (x = 84 at this scale) is spread out
        assert blurred.getpixel((70, 88))[1] < 190


@pytest.mark.parametrize("sigma", [60.0, 300.0])
def test_a_large_sigma_blurs_like_the_direct_gaussian(stored, sigma):
    """Above BLUR_DIRECT_MAX a smaller copy is blurred: within a few levels of the real thing."""
    fast = out(render(stored, Variant(333, 177, fit="fill", blur=sigma, format="png"), 16_000_000, 50_000_000))
    direct = pyvips.Image.thumbnail(str(stored), 333, height=177, size="force").gaussblur(sigma).cast("uchar")
    diff = ImageStat.Stat(ImageChops.difference(fast.convert("RGB"), out(direct.pngsave_buffer()).convert("RGB")))
    assert max(diff.mean) < 3 and max(high for _, high in diff.extrema) < 16


@pytest.mark.parametrize("fmt", ["webp", "jpeg", "png", "avif"])
def test_gray_in_every_format(stored, fmt):
    grey = out(render(stored, Variant(w=50, gray=True, format=fmt), 16_000_000, 50_000_000)).convert("RGB")
    r, g, b = grey.getpixel((10, 10))
    assert abs(r - g) <= 2 and abs(g - b) <= 2  # (AVIF's chroma rounding)


def test_contain_in_a_jpeg_is_letterboxed_on_white(stored):
    boxed = out(render(stored, Variant(100, 100, fit="contain", format="jpeg"), 16_000_000, 50_000_000))
    assert boxed.size == (100, 100) and min(boxed.convert("RGB").getpixel((50, 2))) > 245


def test_caps_are_checked_from_the_header(stored):
    with pytest.raises(StoredImageError, match="397x211 pixels, more than the 80000"):
        render(stored, Variant(w=10), 16_000_000, 80_000)
    with pytest.raises(BadParameter, match="more than the 1000 pixels"):
        render(stored, Variant(w=100), 1000, 50_000_000)


def test_what_is_not_a_webp_is_a_stored_image_error(tmp_path):
    png = tmp_path / "image.webp"
    Image.new("RGB", (4, 4)).save(png, "PNG")  # the name says webp; only webp is decoded
    with pytest.raises(StoredImageError, match="not a readable webp"):
        render(png, Variant(w=2), 16_000_000, 50_000_000)
