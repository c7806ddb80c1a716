"""`GET /img/<path>`: a stored image (cannaspider/pipelines/images.py), resized on demand
(docs/images.md, "The image proxy"): the route, the proxy's work from a path and its query to the
answer (ImageProxy), and which stored object a per-store path shows (SourceMap).

    GET /img/products/az/az-deeply-rooted/bud-bros/6913e3cd444eac3935e928b9/image-ae38b1f9.webp?w=200

Parameters, as the seed's proxy (sharp) takes them (cannaspider/images/render.py): `w`, `h`
(1–4000), `q` (1–100, default 80), `fit` (cover, contain, fill, inside, outside; default cover),
`blur` (sigma, 0.3–1000), `gray` (1), `format` (webp default, jpeg, png, avif). A bad or unknown
parameter is a 400 saying which; a path that is not one the pipeline writes, leaves the back-end
(`..`, absolute, encoded, a symlink out) or names no file is a 404, before any file is opened.

The stored file is read from IMAGES_STORE, whatever back-end the pipeline wrote it to: a folder in
place, or s3://, gs:// or ftp:// through the reader cannaspider/images/backends.py opens, the
originals fetched from a remote back-end kept in a bounded local cache folder
(cannaspider/images/cache.py). A remote back-end that does not answer is a 503 (Retry-After; for
IMG_STORE_RETRY_S seconds further reads are not even tried), one that refuses us a 502; both say
which back-end, never with its credentials. What is already cached is still served. A stored file
that is corrupt or declares too many pixels is a 502 saying so. Responses are `Cache-Control:
public, max-age=IMG_MAX_AGE_S, immutable` (a new source URL is a new file name).

A variant is rendered once (a second request for it while it renders waits for the same result),
written to the bounded cache folder IMG_CACHE_DIR/variants and kept in a bounded memory cache. Its
ETag is derived from the source (a local file: path, size, mtime; a remote one: path and back-end,
as a stored file never changes) and the normalized parameters, so a matching If-None-Match on a
file known to exist is answered 304 without reading anything.

Bounds on the work anyone may ask for (docs/images.md, "Bounds"): a request that needs a render
(one that starts a render: joining one under way costs nothing) counts against its client's
address, IMG_RENDERS_PER_CLIENT at once (more: 429); renders in flight together hold at most
IMG_RENDER_BUDGET_PIXELS of the pixel budget (more wait their turn); a render's own work goes with
its pixels (no enlarging, a blur's cost bounded: cannaspider/images/render.py). Rendering is
libvips, in a thread pool, never on the event loop.

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
from psycopg_pool import AsyncConnectionPool
from scrapy.settings import BaseSettings
from scrapy.utils.project import get_project_settings

from cannaspider import settings as defaults
from cannaspider.images import convert
from cannaspider.images.backends import (
    BackendConfigError,
    BackendReader,
    BackendUnavailable,
    LocalReader,
    images_store_uri,
    open_backend,
)
from cannaspider.images.budget import PixelBudget
from cannaspider.images.cache import DiskCache, ImageNotFound, MemoryCache, RemoteOriginals, settled
from cannaspider.images.paths import is_stored_path_shape
from cannaspider.images.render import (
    MEDIA_TYPES,
    BadParameter,
    Plan,
    StoredImageError,
    Variant,
    parse_variant,
    plan,
    render,
)
from cannaspider.web.models import refused_with

__all__ = ["ImageProxy", "image_router"]


def image_router(settings: BaseSettings | None = None, proxy: ImageProxy | None = None) -> APIRouter:
    """The /img route, reading the back-end the project's settings name (or `proxy`'s)."""
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


# The proxy's work: from a path and its query to the answer (the module's docstring says how).

logger = logging.getLogger("cannaspider.web.images")  # /img's lines, wherever the code lives

LOCATE_TTL_S = 1.0  # how long a local file found stays found without a new lookup
LOCATE_CACHE_ENTRIES = 10_000  # paths kept (a few MB at most)


class ImageProxy:
    def __init__(
        self,
        backend: Path | BackendReader,
        cache_dir: Path,
        *,
        max_age: int = defaults.IMG_MAX_AGE_S,
        max_pixels: int = defaults.IMG_MAX_PIXELS,
        source_max_pixels: int = defaults.IMAGES_MAX_PIXELS,
        threads: int | None = None,
        memory_bytes: int = defaults.IMG_MEMORY_CACHE_BYTES,
        cache_bytes: int = defaults.IMG_CACHE_MAX_BYTES,
        originals_bytes: int = defaults.IMG_ORIGINALS_CACHE_MAX_BYTES,
        backend_threads: int = defaults.IMG_STORE_THREADS,
        backend_retry_s: float = defaults.IMG_STORE_RETRY_S,
        render_budget_pixels: int = defaults.IMG_RENDER_BUDGET_PIXELS,
        renders_per_client: int = defaults.IMG_RENDERS_PER_CLIENT,
        unsupported_backend: str | None = None,
    ):
        self.backend: BackendReader = LocalReader(backend) if isinstance(backend, Path) else backend
        self.local = self.backend if isinstance(self.backend, LocalReader) else None
        self.root = self.local.root if self.local is not None else None
        self.cache_dir = cache_dir
        self.max_age = max_age
        self.max_pixels = max_pixels
        self.source_max_pixels = source_max_pixels  # the pipeline's cap: it stores nothing larger
        self.pool = ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 2, thread_name_prefix="img")
        self.memory = MemoryCache(memory_bytes)
        self.variants = DiskCache(cache_dir / "variants", cache_bytes)
        self.backend_pool = ThreadPoolExecutor(max_workers=backend_threads, thread_name_prefix="img-backend")
        self.backend_retry_s = backend_retry_s
        # originals fetched from a remote back-end (a local folder is read in place)
        self.originals = (
            RemoteOriginals(DiskCache(cache_dir / "originals", originals_bytes), self.backend_pool, backend_retry_s)
            if self.local is None
            else None
        )
        self.inflight: dict[str, asyncio.Task[bytes]] = {}
        self.located: OrderedDict[str, tuple[float, tuple[Path, int, int]]] = OrderedDict()
        self.renders = 0  # variants rendered since start (the tests count them)
        self.budget = PixelBudget(render_budget_pixels)
        self.renders_per_client = renders_per_client
        self.rendering: dict[str, int] = {}  # per client address: its requests waiting on a render
        self.unsupported_backend = unsupported_backend
        self.cache_control = f"public, max-age={max_age}, immutable"
        self.sources = SourceMap()  # a per-store path → the one object of its source (SourceMap, below)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ImageProxy:
        convert.configure(settings)
        data_dir = Path(settings["CANNASPIDER_DATA_DIR"])
        backend_threads = max(1, settings.getint("IMG_STORE_THREADS"))
        backend: Path | BackendReader
        unsupported = None
        try:
            backend = open_backend(
                images_store_uri(settings),
                settings,
                timeout=settings.getfloat("IMG_STORE_TIMEOUT_S"),
                pool=backend_threads,
            )
        except BackendConfigError as exc:  # every /img answer says so (501), the service still starts
            backend, unsupported = Path(data_dir / "images"), str(exc)
        return cls(
            backend,
            Path(settings.get("IMG_CACHE_DIR") or data_dir / "image-cache"),
            max_age=settings.getint("IMG_MAX_AGE_S"),
            max_pixels=settings.getint("IMG_MAX_PIXELS"),
            source_max_pixels=settings.getint("IMAGES_MAX_PIXELS"),
            threads=settings.getint("IMG_RENDER_THREADS") or None,
            memory_bytes=settings.getint("IMG_MEMORY_CACHE_BYTES"),
            cache_bytes=settings.getint("IMG_CACHE_MAX_BYTES"),
            originals_bytes=settings.getint("IMG_ORIGINALS_CACHE_MAX_BYTES"),
            backend_threads=backend_threads,
            backend_retry_s=settings.getfloat("IMG_STORE_RETRY_S"),
            render_budget_pixels=max(1, settings.getint("IMG_RENDER_BUDGET_PIXELS")),
            renders_per_client=max(1, settings.getint("IMG_RENDERS_PER_CLIENT")),
            unsupported_backend=unsupported,
        )

    @property
    def fetches(self) -> int:
        """Originals read from a remote back-end since start."""
        return self.originals.fetches if self.originals is not None else 0

    async def serve(self, request: Request, path: str) -> Response:
        if self.unsupported_backend:
            return JSONResponse({"detail": self.unsupported_backend}, status_code=501)
        try:
            variant = parse_variant(request.query_params.multi_items())
        except BadParameter as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        if not is_stored_path_shape(path):  # before any back-end is asked, or any key is built
            return JSONResponse({"detail": "no such image"}, status_code=404)
        source: Path | None = None
        if self.local is not None:
            # a path whose own file is there (its source's object, or a file of its own) needs no
            # lookup; another store's path of the same source is mapped to that object
            found = self._locate(path)
            if found is None:
                path = await self._mapped(request, path)
                found = self._locate(path)
            if found is None:
                return JSONResponse({"detail": "no such image"}, status_code=404)
            source, size, mtime_ns = found
            version = f"{size}|{mtime_ns}"
        else:
            # a remote read costs more than the lookup: every path is looked up first (kept)
            path = await self._mapped(request, path)
            # a stored file never changes (a new source URL is a new name): its path is its version
            version = self.backend.identity
        key = hashlib.sha256(f"{path}|{version}|{variant.canonical()}".encode()).hexdigest()[:32]
        etag = f'"{key}"'
        headers = {"ETag": etag, "Cache-Control": self.cache_control}
        matches = _matches(request.headers.get("if-none-match"), etag)
        if matches and self._known(key, path, variant, source):
            return Response(status_code=304, headers=headers)
        client = request.client.host if request.client is not None else ""
        # a request that joins a render already under way, or needs none, adds no work: not counted
        if self.memory.get(key) is None and not variant.is_original and key not in self.inflight:
            if self.rendering.get(client, 0) >= self.renders_per_client:
                detail = f"more than {self.renders_per_client} images rendering at once for this client"
                return JSONResponse({"detail": detail}, status_code=429, headers={"Retry-After": "1"})
        else:
            client = ""  # nothing to render: not counted
        try:
            if client:
                self.rendering[client] = self.rendering.get(client, 0) + 1
            body = await self._variant(key, path, source, variant)
        except BadParameter as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        except ImageNotFound:
            return JSONResponse({"detail": "no such image"}, status_code=404)
        except BackendUnavailable as exc:
            logger.warning("/img %s: %s", path, exc.reason)
            retry = {"Retry-After": str(max(1, round(self.backend_retry_s)))} if exc.status == 503 else {}
            return JSONResponse(
                {"detail": f"the image store is unavailable: {exc.reason}"}, status_code=exc.status, headers=retry
            )
        except StoredImageError as exc:  # what the back-end holds is no image we render: its fault, not the client's
            logger.warning("/img %s: the stored image cannot be rendered: %s", path, exc)
            return JSONResponse({"detail": f"the stored image cannot be rendered: {exc}"}, status_code=502)
        except OSError as exc:  # the local folder's disk (permissions, I/O): logged with its path, not answered with it
            logger.warning("/img %s: the stored file cannot be read: %s", path, exc)
            return JSONResponse({"detail": f"the stored image cannot be read ({type(exc).__name__})"}, status_code=500)
        finally:
            if client:
                self._rendered(client)
        if matches:  # a remote file not seen before: it exists, and the client has this variant
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=MEDIA_TYPES[variant.format], headers=headers)

    async def _mapped(self, request: Request, path: str) -> str:
        """The object key `path` is mapped to (one download per source), else the path itself;
        without a database (the proxy alone, outside the service) every path is its own file. A
        database that cannot answer is the service's 503 (cannaspider/web/app.py)."""
        pool = getattr(request.app.state, "pool", None)
        if pool is None:
            return path
        key = await self.sources.resolve(pool, path)
        return key if key is not None and is_stored_path_shape(key) else path

    def _rendered(self, client: str) -> None:
        left = self.rendering[client] - 1
        if left:
            self.rendering[client] = left
        else:
            del self.rendering[client]  # the table holds the clients rendering now, no more

    def _locate(self, path: str) -> tuple[Path, int, int] | None:
        """The local folder's locate(), its answers for files found kept LOCATE_TTL_S: resolving a
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
        """Whether the file is known to exist without asking the back-end: a 304 is never the
        answer for a file that is not there."""
        if source is not None:
            return True
        return (
            self.memory.get(key) is not None
            or f"{key}.{variant.format}" in self.variants
            or (self.originals is not None and path in self.originals)
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
            task.add_done_callback(lambda done: settled(self.inflight, key, done))
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
                at = await loop.run_in_executor(
                    self.pool, plan, original, variant, self.max_pixels, self.source_max_pixels
                )
                # the renders in flight together touch at most IMG_RENDER_BUDGET_PIXELS
                async with self.budget.hold(at.pixels):
                    body = await loop.run_in_executor(self.pool, self._render_and_keep, name, original, variant, at)
        self.memory.put(key, body)
        return body

    def _render_and_keep(self, name: str, original: Path | bytes, variant: Variant, at: Plan) -> bytes:
        body = render(original, variant, self.max_pixels, self.source_max_pixels, at)
        self.renders += 1
        self.variants.put(name, body)
        return body

    async def _original(self, path: str) -> bytes:
        assert self.originals is not None
        return await self.originals.get(self.backend, path)


def _matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags


# Which stored object `/img` shows for a per-store path (docs/images.md, "One download per
# source"): an image is stored once per source, as the object of the first path it was fetched for,
# and every other store's path is mapped to that source in image_paths (the pipeline writes the
# mapping before it records the path: cannaspider/pipelines/image_sources.py). The per-store paths,
# the API and the pages are unchanged; only /img looks the path up.
#
# A mapping does not change once written, so answers are kept (SOURCE_TTL_S, in case a source whose
# object was deleted by hand is fetched again under another key); a path with no mapping (a file of
# its own, written before migration 029, or not recorded yet) is asked again after MISS_TTL_S.

LOOKUP = """
SELECT s.object_key FROM image_paths p JOIN image_sources s USING (source_hash) WHERE p.path = %s
"""

SOURCE_TTL_S = 300.0
MISS_TTL_S = 1.0
ENTRIES = 100_000  # paths kept (some 20 MB at most)


class SourceMap:
    """path → the object key of its source, read from the database and kept."""

    def __init__(self, entries: int = ENTRIES):
        self.entries = entries
        self.kept: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self.lookups = 0  # queries sent (the tests count them)

    async def resolve(self, pool: AsyncConnectionPool, path: str) -> str | None:
        """The object key `path` is mapped to, or None (serve the path as it is)."""
        now = time.monotonic()
        hit = self.kept.get(path)
        if hit is not None and hit[0] > now:
            return hit[1]
        self.lookups += 1
        async with pool.connection() as conn:
            row = await (await conn.execute(LOOKUP, (path,))).fetchone()
        key: str | None = row[0] if row else None
        self.kept[path] = (now + (SOURCE_TTL_S if key is not None else MISS_TTL_S), key)
        self.kept.move_to_end(path)
        while len(self.kept) > self.entries:
            self.kept.popitem(last=False)
        return key
