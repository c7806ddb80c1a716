"""Where an image lives in the store (docs/images.md, "Layout"):

    products/<state>/<store>/<brand>/<product_id>/image-<hash>.webp
    brands/<brand>/logo-<hash>.webp

Every segment is built here from remote data (store and brand names, product ids), so every
segment is reduced to `[a-z0-9-]` (or a 24-hex id): no name can climb out of the store, add a
folder level, or differ only by case on a case-insensitive disk. The hash is of the source URL, so
a product whose image changes gets a new file and the old one is never overwritten.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata

# Letters NFKD does not decompose into ASCII; the common ones in US brand and store names.
_TRANSLITERATE = str.maketrans(
    {
        "ß": "ss",
        "æ": "ae",
        "Æ": "ae",
        "œ": "oe",
        "Œ": "oe",
        "ø": "o",
        "Ø": "o",
        "ł": "l",
        "Ł": "l",
        "đ": "d",
        "Đ": "d",
        "ð": "d",
        "þ": "th",
        "ı": "i",
        "&": " and ",
        "+": " plus ",
        "@": " at ",
        "™": "",
        "®": "",
        "©": "",
    }
)
_APOSTROPHES = re.compile(r"[’'`´ʼ]")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_OBJECT_ID = re.compile(r"[0-9a-f]{24}")
SLUG_MAX = 80
HASH_CHARS = 8  # as the seed's example (image-ae38b1f9): a clash needs two URLs of one product


# a crawl asks for the same few brand and store names once per product: each slug is made once
# (measured: brand_logo_path alone was 0.45 s of a 20-store crawl's 3.8 s in its item pipelines)
@functools.lru_cache(maxsize=4096)
def slugify(text: str | None, fallback: str = "unknown") -> str:
    """`Bud & Mary's` → `bud-and-marys`, `Café/Lounge` → `cafe-lounge`. A name with nothing
    ASCII in it (emoji, CJK) becomes `<fallback>-<8 hex of the name>`: distinct names stay
    distinct, and the same name always lands in the same folder."""
    if text is None or not text.strip():
        return fallback
    ascii_text = unicodedata.normalize("NFKD", text.translate(_TRANSLITERATE))
    ascii_text = "".join(c for c in ascii_text if not unicodedata.combining(c))
    ascii_text = _APOSTROPHES.sub("", ascii_text.lower())
    slug = _NOT_SLUG.sub("-", ascii_text.encode("ascii", "ignore").decode()).strip("-")
    if len(slug) > SLUG_MAX:
        slug = slug[:SLUG_MAX].rsplit("-", 1)[0] or slug[:SLUG_MAX]
    if not slug:
        return f"{fallback}-{url_hash(text.strip())}"
    return slug


def url_hash(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def product_folder_id(provider_product_id: str) -> str:
    """The 24-hex Dutchie id as is; anything else (another provider) slugified."""
    pid = provider_product_id.strip().lower()
    return pid if _OBJECT_ID.fullmatch(pid) else slugify(provider_product_id, "product")


def state_segment(state: str | None) -> str:
    return slugify(state, "unknown-state")


def image_file_name(url: str) -> str:
    """The file name a product image of `url` has: a path ending in another names another URL."""
    return f"/image-{url_hash(url)}.webp"


def product_image_path(state: str | None, store: str | None, brand: str | None, product_id: str, url: str) -> str:
    return (
        f"products/{state_segment(state)}/{slugify(store, 'store')}/{slugify(brand, 'unbranded')}/"
        f"{product_folder_id(product_id)}{image_file_name(url)}"
    )


def brand_logo_path(brand: str | None, url: str) -> str:
    return f"brands/{slugify(brand, 'unbranded')}/logo-{url_hash(url)}.webp"


# What /img accepts as a path: exactly the shapes above could produce (lower-case slugs, dots only
# in the file name). Everything else is answered 404 without touching the disk.
STORED_PATH = re.compile(r"(?:[a-z0-9][a-z0-9-]*/){1,6}[a-z0-9][a-z0-9-]*\.webp")


def is_stored_path_shape(path: str) -> bool:
    return len(path) <= 1024 and STORED_PATH.fullmatch(path) is not None
