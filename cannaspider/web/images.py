"""`GET /img/<path>`: a stored image (cannaspider/pipelines/images.py), resized on demand
(docs/images.md, "The image proxy").

    GET /img/products/az/az-deeply-rooted/bud-bros/6913e3cd444eac3935e928b9/image-ae38b1f9.webp?w=200

Parameters, as the seed's proxy (sharp) takes them (cannaspider/images/render.py): `w`, `h`
(1–4000), `q` (1–100, default 80), `fit` (cover, contain, fill, inside, outside; default cover),
`blur` (sigma, 0.3–1000), `gray` (1), `format` (webp default, jpeg, png, avif). A bad or unknown
parameter is a 400 saying which; a path that is not one the pipeline writes, leaves the store
(`..`, absolute, encoded, a symlink out) or names no file is a 404, before any file is opened.

The stored file is read from IMAGES_STORE, whatever store the pipeline wrote it to: a folder in
place, or s3://, gs:// or ftp:// through the reader cannaspider/images/backends.py opens, the originals fetched from a
remote store kept in a bounded local cache folder (cannaspider/images/cache.py). A remote store
that does not answer is a 503 (Retry-After; for IMG_STORE_RETRY_S seconds further reads are not even
tried), one that refuses us a 502; both say which store, never with its credentials. What is
already cached is still served. A stored file that is corrupt or declares too many pixels is a 502
saying so. A client with IMG_RENDERS_PER_CLIENT renders under way gets a 429 for one more
(docs/images.md, "Bounds"). Variants, caches and ETags: cannaspider/web/image_proxy.py; responses are
`Cache-Control: public, max-age=IMG_MAX_AGE_S, immutable` (a new source URL is a new file name).

The app mounts it with one line: `app.include_router(image_router(settings))`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from scrapy.settings import BaseSettings
from scrapy.utils.project import get_project_settings

from cannaspider.images.render import MEDIA_TYPES
from cannaspider.web.image_proxy import ImageProxy
from cannaspider.web.models import refused_with

__all__ = ["ImageProxy", "image_router"]


def image_router(settings: BaseSettings | None = None, proxy: ImageProxy | None = None) -> APIRouter:
    """The /img route, reading the store the project's settings name (or `proxy`'s)."""
    image_proxy = proxy or ImageProxy.from_settings(settings if settings is not None else get_project_settings())
    router = APIRouter()

    @router.get(
        "/img/{path:path}",
        response_class=Response,
        name="image",
        responses={
            200: {"content": {t: {} for t in MEDIA_TYPES.values()}, "description": "the image, as asked for"},
            304: {"description": "not modified (If-None-Match)"},
            **refused_with(400, 404, 429, 500, 501, 502, 503),
        },
    )
    async def image(path: str, request: Request) -> Response:
        return await image_proxy.serve(request, path)

    router.image_proxy = image_proxy  # type: ignore[attr-defined]  # for the tests and the benchmark
    return router
