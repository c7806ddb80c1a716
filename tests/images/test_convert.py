"""cannaspider/images/convert.py: libvips bounded by the project's settings, and only the loaders
product photos need."""

from __future__ import annotations

import io

import pytest
import pyvips
from PIL import Image
from scrapy.settings import BaseSettings
from scrapy.utils.test import get_crawler

from cannaspider.images import convert


def _encode(fmt: str, **params) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buf, fmt, **params)
    return buf.getvalue()


def test_configure_bounds_the_cache_and_the_threads_from_settings():
    try:
        convert.configure(
            get_crawler(
                settings_dict={
                    "VIPS_CACHE_MAX_OPERATIONS": 7,
                    "VIPS_CACHE_MAX_BYTES": 1234567,
                    "VIPS_CACHE_MAX_FILES": 3,
                    "VIPS_CONCURRENCY": 2,
                }
            ).settings
        )
        assert pyvips.cache_get_max() == 7 and pyvips.cache_get_max_mem() == 1234567
        assert pyvips.cache_get_max_files() == 3 and pyvips.concurrency_get() == 2
    finally:
        convert.configure(get_crawler().settings)


def test_the_project_defaults_keep_no_pixels_and_one_thread_per_render():
    project = BaseSettings()
    project.setmodule("cannaspider.settings")
    convert.configure(project)
    assert pyvips.cache_get_max() == 0 and pyvips.cache_get_max_files() == 0 and pyvips.concurrency_get() == 1


@pytest.mark.parametrize(("fmt", "name"), [("JPEG", "JPEG"), ("PNG", "PNG"), ("WEBP", "WebP"), ("GIF", "GIF")])
def test_product_photo_formats_are_accepted(fmt, name):
    assert convert.loader_of(_encode(fmt)) == name


def test_avif_is_accepted_but_not_another_heif():
    avif = _encode("AVIF")
    assert convert.loader_of(avif) == "AVIF"
    heic = avif[:8] + b"heic" + avif[12:].replace(b"avif", b"heic")
    assert convert.loader_of(heic) is None


@pytest.mark.parametrize(
    "body",
    [
        b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>',  # libvips reads SVG
        _encode("TIFF"),  # and TIFF
        b"<!DOCTYPE html><html></html>",
        b"\x00" * 64,
    ],
)
def test_anything_else_is_refused_before_a_loader_runs(body):
    assert convert.loader_of(body) is None


def test_this_libvips_encodes_avif():
    assert convert.avif_encoder()  # pyvips-binary ships libheif with aom: format=avif is served
