"""Slugs and platform ids from menu URLs and rendered embedding pages."""

import pytest

from cannaspider.platforms.dutchie import slugs


@pytest.mark.parametrize(
    "url, slug",
    [
        ("https://dutchie.com/embedded-menu/deeply-rooted", "deeply-rooted"),
        ("https://dutchie.com/dispensary/deeply-rooted/products/flower", "deeply-rooted"),
        ("https://dutchie.com/stores/curaleaf-az-phoenix?menuType=rec", "curaleaf-az-phoenix"),
        ("https://deeplyrooted.com/shop/", None),
        (None, None),
    ],
)
def test_slug_from_menu_url(url, slug):
    assert slugs.slug_from_menu_url(url) == slug


def test_id_and_slug_from_a_rendered_page():
    html = (
        '<head><script id="dutchie--embed__script" '
        'src="https://dutchie.com/api/v2/embedded-menu/6405EF617056e8014d79101b.js"></script></head>'
    )
    assert slugs.id_from_embed(html) == "6405ef617056e8014d79101b"
    iframe = '<div><iframe id="dutchie--embed__iframe" src="https://dutchie.com/embedded-menu/deeply-rooted"></iframe>'
    assert slugs.slug_from_embed(iframe) == "deeply-rooted"
    assert slugs.id_from_embed("<html></html>") is None and slugs.slug_from_embed("<iframe src='x'>") is None
