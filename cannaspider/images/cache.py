"""Bounded caches for /img (docs/images.md, "The image proxy"): `DiskCache`, a local folder of
cached files bounded by their total size; `MemoryCache`, recently served variants in memory; and
`RemoteOriginals`, the stored files /img reads from a remote back-end, each read once into a
DiskCache.

/img keeps rendered variants here, and, when IMAGES_STORE is remote, the originals it fetched: a
folder that never grows past its bound however many variants are asked for. The least recently
used file goes first; after a restart the files found on disk count in the order they were
written. Safe to delete at any time (everything in it can be fetched or rendered again). Several
processes sharing one folder each keep their own count: a file another process removed is just a
miss.

Every method of the two caches blocks (disk I/O): /img calls them from its thread pools, never on
the event loop, except `__contains__`, which only looks at the index in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cannaspider.images.backends import BackendReader, BackendUnavailable

logger = logging.getLogger(__name__)


class DiskCache:
    def __init__(self, folder: Path, max_bytes: int):
        self.folder = folder
        self.max_bytes = max_bytes
        self.size = 0
        self.lock = threading.Lock()
        self.index: OrderedDict[str, int] = OrderedDict()  # file name → size, oldest use first
        self._scan()

    def _scan(self) -> None:
        found: list[tuple[float, str, int]] = []
        try:
            for shard in os.scandir(self.folder):
                if not shard.is_dir(follow_symlinks=False):
                    continue
                for entry in os.scandir(shard.path):
                    if entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                        continue  # a temporary file a crash left behind is never served
                    stat = entry.stat(follow_symlinks=False)
                    found.append((stat.st_mtime, entry.name, stat.st_size))
        except OSError:  # no folder yet (made by the first write) or an unreadable one: start empty
            pass
        for _, name, size in sorted(found):
            self.index[name] = size
            self.size += size
        self._evict()

    def _path(self, name: str) -> Path:
        return self.folder / name[:2] / name

    def __contains__(self, name: str) -> bool:
        return name in self.index

    def get(self, name: str) -> bytes | None:
        with self.lock:
            if name not in self.index:
                return None
            self.index.move_to_end(name)
        try:
            return self._path(name).read_bytes()
        except OSError:  # removed behind our back (another process, a cleanup)
            with self.lock:
                self.size -= self.index.pop(name, 0)
            return None

    def put(self, name: str, body: bytes) -> None:
        """Keep `body` as `name` (written beside, then renamed: a reader never sees half a file).
        A full or read-only disk costs speed, never the answer: it is logged and ignored."""
        if len(body) > self.max_bytes:
            return
        target = self._path(name)
        temporary = target.with_name(f".{name}.{os.getpid()}.{threading.get_ident():x}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(body)
            os.replace(temporary, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
            logger.warning("/img: %s not cached in %s: %s", name, self.folder, exc)
            return
        with self.lock:
            self.size += len(body) - self.index.pop(name, 0)
            self.index[name] = len(body)
            self._evict()

    def _evict(self) -> None:
        while self.size > self.max_bytes and self.index:
            name, size = self.index.popitem(last=False)
            self.size -= size
            with contextlib.suppress(OSError):
                self._path(name).unlink()


class MemoryCache:
    """Recently served variants in memory, bounded by their total size (flat memory under load);
    a variant over an eighth of the bound is not kept, so a few large ones cannot flush the rest."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.size = 0
        self.items: OrderedDict[str, bytes] = OrderedDict()

    def get(self, key: str) -> bytes | None:
        body = self.items.get(key)
        if body is not None:
            self.items.move_to_end(key)
        return body

    def put(self, key: str, body: bytes) -> None:
        if len(body) > self.max_bytes // 8 or key in self.items:
            return
        self.items[key] = body
        self.size += len(body)
        while self.size > self.max_bytes:
            _, dropped = self.items.popitem(last=False)
            self.size -= len(dropped)


# The stored files `/img` reads from a remote back-end (s3://, gs://, ftp://: cannaspider/images/backends.py),
# each read from the back-end once: kept in a bounded local
# cache folder (IMG_CACHE_DIR/originals), one read however many variants of it are asked for at once,
# and for IMG_STORE_RETRY_S after the back-end did not answer, no read is even tried (docs/images.md,
# "Where they are stored").


class ImageNotFound(LookupError):
    """A 404: the back-end has no such file."""


def original_name(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:32] + ".webp"


def settled(inflight: dict[str, asyncio.Task[bytes]], key: str, task: asyncio.Task[bytes]) -> None:
    """A task's done-callback: it leaves `inflight`, its failure counted as retrieved (one whose
    waiters all left is not "never retrieved")."""
    inflight.pop(key, None)
    if not task.cancelled():
        task.exception()


class RemoteOriginals:
    def __init__(self, cache: DiskCache, pool: ThreadPoolExecutor, retry_s: float):
        self.cache = cache
        # reads from a remote back-end wait on the network, not on a core: threads of their own, so a
        # slow back-end never holds up renders of what is cached
        self.pool = pool
        self.retry_s = retry_s
        self.fetching: dict[str, asyncio.Task[bytes]] = {}
        self.down: tuple[float, BackendUnavailable] | None = None  # (until, why): the back-end did not answer
        self.fetches = 0  # originals read from the back-end since start

    def __contains__(self, path: str) -> bool:
        return original_name(path) in self.cache

    async def get(self, backend: BackendReader, path: str) -> bytes:
        """The stored file: the local copy, else one read from the back-end however many variants of
        it are asked for at once."""
        task = self.fetching.get(path)
        if task is None:
            task = asyncio.ensure_future(self._fetch(backend, path))
            self.fetching[path] = task
            task.add_done_callback(lambda done: settled(self.fetching, path, done))
        return await asyncio.shield(task)

    async def _fetch(self, backend: BackendReader, path: str) -> bytes:
        loop = asyncio.get_running_loop()
        name = original_name(path)
        body = await loop.run_in_executor(self.pool, self.cache.get, name)
        if body is not None:
            return body
        if self.down is not None:
            until, why = self.down
            if time.monotonic() < until:  # it just failed: answer at once instead of queueing on it
                raise why
            self.down = None
        try:
            body = await loop.run_in_executor(self.pool, backend.read, path)
        except BackendUnavailable as exc:
            if exc.status == 503:
                self.down = (time.monotonic() + self.retry_s, exc)
            raise
        if body is None:
            raise ImageNotFound(path)
        self.fetches += 1
        await loop.run_in_executor(self.pool, self.cache.put, name, body)
        return body
