"""`GET /img/<path>`: a stored image (cannaspider/pipelines/images.py), resized on demand
(docs/images.md, "The image proxy").

    GET /img/products/az/az-deeply-rooted/bud-bros/6913e3cd444eac3935e928b9/image-ae38b1f9.webp?w=200

Parameters, as the seed's proxy (sharp) takes them: `w`, `h` (1–4000), `q` (1–100, default 80),
`fit` (cover, contain, fill, inside, outside; default cover), `blur` (sigma, 0.3–1000), `gray` (1),
`format` (webp default, jpeg, png, avif). A bad or unknown parameter is a 400 saying which; a path
that is not one the pipeline writes, leaves the store (`..`, absolute, encoded, a symlink out) or
names no file is a 404, before any file is opened.

The stored file is read from IMAGES_STORE, whatever store the pipeline wrote it to: a folder in
place, or s3://, gs:// or ftp:// through cannaspider/images/stores.py, the originals fetched from a
remote store kept in a bounded local cache folder (IMG_CACHE_DIR/originals) so that each is read
from the store once. A remote store that does not answer is a 503 (Retry-After; for
IMG_STORE_RETRY_S seconds further reads are not even tried), one that refuses us a 502; both say
which store, never with its credentials. What is already cached is still served.

Rendering is libvips (cannaspider/images/render.py) in a thread pool (never on the event loop); a
stored file that is corrupt or declares too many pixels is a 502 saying so. A variant is rendered once (a
second request for it while it renders waits for the same result), written to the bounded cache
folder IMG_CACHE_DIR/variants and kept in a bounded memory cache. Its ETag is derived from the
source (a local file: path, size, mtime; a remote one: path and store, as a stored file never
changes) and the normalized parameters, so a matching If-None-Match on a file known to exist is
answered 304 without reading anything; responses are `Cache-Control: public,
max-age=IMG_MAX_AGE_S, immutable` (a new source URL is a new file name).

The app mounts it with one line: `app.include_router(image_router(settings))`.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from scrapy.settings import BaseSettings

from cannaspider.images import vips
from cannaspider.images.cache import DiskCache, MemoryCache
from cannaspider.images.convert import DEFAULT_MAX_PIXELS
from cannaspider.images.paths import is_stored_path_shape
from cannaspider.images.render import BadParameter, StoredImageError, Variant, render
from cannaspider.images.stores import LocalReader, StoreConfigError, StoreReader, StoreUnavailable, open_store
from cannaspider.web.models import refused_with

logger = logging.getLogger(__name__)

MAX_SIDE = 4000
FITS = ("cover", "contain", "fill", "inside", "outside")
MEDIA_TYPES = {"webp": "image/webp", "jpeg": "image/jpeg", "png": "image/png", "avif": "image/avif"}
PARAMETERS = ("w", "h", "q", "fit", "blur", "gray", "format")
AVIF = vips.avif_encoder()
LOCATE_TTL_S = 1.0  # how long a local file found stays found without a new lookup
LOCATE_CACHE_ENTRIES = 10_000  # paths kept (a few MB at most)
DEFAULT_CACHE_BYTES = 2 * 1024**3  # each of the two disk caches (variants; remote originals)


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
    blur: float | None = None
    if "blur" in seen:
        try:
            blur = float(seen["blur"])
        except ValueError:
            raise BadParameter(f"blur must be a number from 0.3 to 1000, got {seen['blur']!r}") from None
        if not 0.3 <= blur <= 1000:  # also false for nan
            raise BadParameter(f"blur must be from 0.3 to 1000, got {seen['blur']!r}")
    gray_raw = seen.get("gray", "0").lower()
    if gray_raw not in ("0", "1", "true", "false"):
        raise BadParameter(f"gray must be 1 or 0, got {seen['gray']!r}")
    fmt = seen.get("format", "webp").lower()
    if fmt == "jpg":
        fmt = "jpeg"
    if fmt not in MEDIA_TYPES:
        raise BadParameter(f"format must be one of {', '.join(MEDIA_TYPES)}, got {seen['format']!r}")
    if fmt == "avif" and not AVIF:
        raise BadParameter("format=avif: this server's libvips was built without an AVIF encoder")
    return Variant(w, h, 80 if q is None else q, fit, blur, gray_raw in ("1", "true"), fmt, q is not None)


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


class ImageNotFound(LookupError):
    """A 404: the store has no such file."""


class ImageProxy:
    def __init__(
        self,
        store: Path | StoreReader,
        cache_dir: Path,
        *,
        max_age: int = 31_536_000,
        max_pixels: int = 16_000_000,
        source_max_pixels: int = DEFAULT_MAX_PIXELS,
        threads: int | None = None,
        memory_bytes: int = 64 * 1024 * 1024,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        originals_bytes: int = DEFAULT_CACHE_BYTES,
        store_threads: int = 8,
        store_retry_s: float = 5.0,
        unsupported_store: str | None = None,
    ):
        self.store: StoreReader = LocalReader(store) if isinstance(store, Path) else store
        self.local = self.store if isinstance(self.store, LocalReader) else None
        self.root = self.local.root if self.local is not None else None
        self.cache_dir = cache_dir
        self.max_age = max_age
        self.max_pixels = max_pixels
        self.source_max_pixels = source_max_pixels  # the pipeline's cap: it stores nothing larger
        self.pool = ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 2, thread_name_prefix="img")
        self.memory = MemoryCache(memory_bytes)
        self.variants = DiskCache(cache_dir / "variants", cache_bytes)
        # originals fetched from a remote store (a local store is read in place)
        self.originals = DiskCache(cache_dir / "originals", originals_bytes) if self.local is None else None
        # reads from a remote store wait on the network, not on a core: their own threads, so a
        # slow store never holds up renders of what is cached
        self.store_pool = ThreadPoolExecutor(max_workers=store_threads, thread_name_prefix="img-store")
        self.inflight: dict[str, asyncio.Task[bytes]] = {}
        self.located: OrderedDict[str, tuple[float, tuple[Path, int, int]]] = OrderedDict()
        self.fetching: dict[str, asyncio.Task[bytes]] = {}
        self.renders = 0  # variants rendered since start (the tests count them)
        self.fetches = 0  # originals read from a remote store since start
        self.store_retry_s = store_retry_s
        self.down: tuple[float, StoreUnavailable] | None = None  # (until, why): the store did not answer
        self.unsupported_store = unsupported_store
        self.cache_control = f"public, max-age={max_age}, immutable"

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ImageProxy:
        from cannaspider.pipelines.images import images_store_uri  # noqa: PLC0415 (Scrapy's pipeline stack)

        vips.configure(settings)
        data_dir = Path(settings.get("CANNASPIDER_DATA_DIR") or ".data")
        uri = images_store_uri(settings)
        store_threads = max(1, settings.getint("IMG_STORE_THREADS", 8))
        store: Path | StoreReader
        unsupported = None
        try:
            store = open_store(
                uri, settings, timeout=settings.getfloat("IMG_STORE_TIMEOUT_S", 10.0), pool=store_threads
            )
        except StoreConfigError as exc:  # every /img answer says so (501), the service still starts
            store, unsupported = Path(data_dir / "images"), str(exc)
        return cls(
            store,
            Path(settings.get("IMG_CACHE_DIR") or data_dir / "image-cache"),
            max_age=settings.getint("IMG_MAX_AGE_S", 31_536_000),
            max_pixels=settings.getint("IMG_MAX_PIXELS", 16_000_000),
            source_max_pixels=settings.getint("IMAGES_MAX_PIXELS", DEFAULT_MAX_PIXELS),
            threads=settings.getint("IMG_RENDER_THREADS") or None,
            memory_bytes=settings.getint("IMG_MEMORY_CACHE_BYTES", 64 * 1024 * 1024),
            cache_bytes=settings.getint("IMG_CACHE_MAX_BYTES", DEFAULT_CACHE_BYTES),
            originals_bytes=settings.getint("IMG_ORIGINALS_CACHE_MAX_BYTES", DEFAULT_CACHE_BYTES),
            store_threads=store_threads,
            store_retry_s=settings.getfloat("IMG_STORE_RETRY_S", 5.0),
            unsupported_store=unsupported,
        )

    async def serve(self, request: Request, path: str) -> Response:
        if self.unsupported_store:
            return JSONResponse({"detail": self.unsupported_store}, status_code=501)
        try:
            variant = parse_variant(request.query_params.multi_items())
        except BadParameter as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        if not is_stored_path_shape(path):  # before any store is asked, or any key is built
            return JSONResponse({"detail": "no such image"}, status_code=404)
        source: Path | None = None
        if self.local is not None:
            found = self._locate(path)
            if found is None:
                return JSONResponse({"detail": "no such image"}, status_code=404)
            source, size, mtime_ns = found
            version = f"{size}|{mtime_ns}"
        else:
            # a stored file never changes (a new source URL is a new name): its path is its version
            version = self.store.identity
        key = hashlib.sha256(f"{path}|{version}|{variant.canonical()}".encode()).hexdigest()[:32]
        etag = f'"{key}"'
        headers = {"ETag": etag, "Cache-Control": self.cache_control}
        matches = _matches(request.headers.get("if-none-match"), etag)
        if matches and self._known(key, path, variant, source):
            return Response(status_code=304, headers=headers)
        try:
            body = await self._variant(key, path, source, variant)
        except BadParameter as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        except ImageNotFound:
            return JSONResponse({"detail": "no such image"}, status_code=404)
        except StoreUnavailable as exc:
            logger.warning("/img %s: %s", path, exc.reason)
            retry = {"Retry-After": str(max(1, round(self.store_retry_s)))} if exc.status == 503 else {}
            return JSONResponse(
                {"detail": f"the image store is unavailable: {exc.reason}"}, status_code=exc.status, headers=retry
            )
        except StoredImageError as exc:  # what the store holds is not an image we render: its fault, not the client's
            logger.warning("/img %s: the stored image cannot be rendered: %s", path, exc)
            return JSONResponse({"detail": f"the stored image cannot be rendered: {exc}"}, status_code=502)
        except OSError as exc:  # the local store's disk (permissions, I/O): logged with its path, not answered with it
            logger.warning("/img %s: the stored file cannot be read: %s", path, exc)
            return JSONResponse({"detail": f"the stored image cannot be read ({type(exc).__name__})"}, status_code=500)
        if matches:  # a remote file not seen before: it exists, and the client has this variant
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=MEDIA_TYPES[variant.format], headers=headers)

    def _locate(self, path: str) -> tuple[Path, int, int] | None:
        """The local store's locate(), its answers for files found kept LOCATE_TTL_S: resolving a
        path (an lstat per folder, for symlinks out) cost more than the rest of a cached answer.
        A file stored meanwhile is seen at once (misses are not kept); one replaced, within the TTL."""
        now = time.monotonic()
        hit = self.located.get(path)
        if hit is not None and hit[0] > now:
            return hit[1]
        assert self.local is not None
        found = self.local.locate(path)
        if found is not None:
            self.located[path] = (now + LOCATE_TTL_S, found)
            self.located.move_to_end(path)
            while len(self.located) > LOCATE_CACHE_ENTRIES:
                self.located.popitem(last=False)
        return found

    def _known(self, key: str, path: str, variant: Variant, source: Path | None) -> bool:
        """Whether the file is known to exist without asking the store: a 304 is never the
        answer for a file that is not there."""
        if source is not None:
            return True
        return (
            self.memory.get(key) is not None
            or f"{key}.{variant.format}" in self.variants
            or (self.originals is not None and _original_name(path) in self.originals)
        )

    async def _variant(self, key: str, path: str, source: Path | None, variant: Variant) -> bytes:
        body = self.memory.get(key)
        if body is not None:
            return body
        task = self.inflight.get(key)
        if task is None:
            # a task of its own: a client that hangs up does not cancel the render others wait for
            task = asyncio.ensure_future(self._produce(key, path, source, variant))
            self.inflight[key] = task
            task.add_done_callback(lambda done: _settled(self.inflight, key, done))
        return await asyncio.shield(task)

    async def _produce(self, key: str, path: str, source: Path | None, variant: Variant) -> bytes:
        loop = asyncio.get_running_loop()
        name = f"{key}.{variant.format}"
        body: bytes | None = None
        if not variant.is_original:
            body = await loop.run_in_executor(self.pool, self.variants.get, name)
        if body is None:
            original: Path | bytes = source if source is not None else await self._original(path)
            if variant.is_original:
                body = (
                    original
                    if isinstance(original, bytes)
                    else await loop.run_in_executor(self.pool, original.read_bytes)
                )
            else:
                body = await loop.run_in_executor(self.pool, self._render_and_keep, name, original, variant)
        self.memory.put(key, body)
        return body

    def _render_and_keep(self, name: str, original: Path | bytes, variant: Variant) -> bytes:
        body = render(original, variant, self.max_pixels, self.source_max_pixels)
        self.renders += 1
        self.variants.put(name, body)
        return body

    async def _original(self, path: str) -> bytes:
        """The stored file from a remote store: the local copy, else one read from the store
        however many variants of it are asked for at once."""
        task = self.fetching.get(path)
        if task is None:
            task = asyncio.ensure_future(self._fetch(path))
            self.fetching[path] = task
            task.add_done_callback(lambda done: _settled(self.fetching, path, done))
        return await asyncio.shield(task)

    async def _fetch(self, path: str) -> bytes:
        assert self.originals is not None
        loop = asyncio.get_running_loop()
        name = _original_name(path)
        body = await loop.run_in_executor(self.store_pool, self.originals.get, name)
        if body is not None:
            return body
        if self.down is not None:
            until, why = self.down
            if time.monotonic() < until:  # it just failed: answer at once instead of queueing on it
                raise why
            self.down = None
        try:
            body = await loop.run_in_executor(self.store_pool, self.store.read, path)
        except StoreUnavailable as exc:
            if exc.status == 503:
                self.down = (time.monotonic() + self.store_retry_s, exc)
            raise
        if body is None:
            raise ImageNotFound(path)
        self.fetches += 1
        await loop.run_in_executor(self.store_pool, self.originals.put, name, body)
        return body


def _original_name(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:32] + ".webp"


def _settled(inflight: dict[str, asyncio.Task[bytes]], key: str, task: asyncio.Task[bytes]) -> None:
    inflight.pop(key, None)
    if not task.cancelled():
        task.exception()  # retrieved: a failure whose waiters all left is not "never retrieved"


def _matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


def image_router(settings: BaseSettings | None = None, proxy: ImageProxy | None = None) -> APIRouter:
    """The /img route, reading the store the project's settings name (or `proxy`'s)."""
    if proxy is None:
        if settings is None:
            from scrapy.utils.project import get_project_settings  # noqa: PLC0415

            settings = get_project_settings()
        proxy = ImageProxy.from_settings(settings)
    router = APIRouter()
    image_proxy = proxy

    @router.get(
        "/img/{path:path}",
        response_class=Response,
        name="image",
        responses={
            200: {"content": {t: {} for t in MEDIA_TYPES.values()}, "description": "the image, as asked for"},
            304: {"description": "not modified (If-None-Match)"},
            **refused_with(400, 404, 501, 503),
        },
    )
    async def image(path: str, request: Request) -> Response:
        return await image_proxy.serve(request, path)

    router.image_proxy = image_proxy  # type: ignore[attr-defined]  # for the tests and the benchmark
    return router
