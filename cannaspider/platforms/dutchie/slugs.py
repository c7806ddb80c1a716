"""Finding a Dutchie store's slug or platform id in a menu URL or an embedding page."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MENU_PATH = re.compile(r"/(?:embedded-menu|dispensary|dispensaries|stores)/(?P<slug>[A-Za-z0-9][A-Za-z0-9_-]*)")
EMBED_SCRIPT = re.compile(r"/api/v2/embedded-menu/(?P<id>[0-9a-fA-F]{24})\.js")
EMBED_IFRAME = re.compile(r"/embedded-menu/(?P<slug>[A-Za-z0-9][A-Za-z0-9_-]*)")
OBJECT_ID = re.compile(r"^[0-9a-fA-F]{24}$")
DUTCHIE_HOSTS = ("dutchie.com",)


def slug_from_menu_url(menu_url: str | None) -> str | None:
    """'https://dutchie.com/embedded-menu/deeply-rooted' → 'deeply-rooted'."""
    if not menu_url:
        return None
    match = MENU_PATH.search(urlsplit(menu_url).path)
    return match["slug"] if match else None


def id_from_embed(html: str) -> str | None:
    match = EMBED_SCRIPT.search(html)
    return match["id"].lower() if match else None


def slug_from_embed(html: str) -> str | None:
    for src in re.findall(r"<iframe[^>]+src=[\"']([^\"']+)", html, re.I):
        match = EMBED_IFRAME.search(src)
        if match:
            return match["slug"]
    return None


def is_object_id(value: str | None) -> bool:
    return bool(value and OBJECT_ID.match(value))
