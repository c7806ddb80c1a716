"""The stored files `/img` reads from a remote store (s3://, gs://: cannaspider/images/cloud_stores.py;
ftp://: cannaspider/images/ftp_store.py), each read from the store once: kept in a bounded local
cache folder (IMG_CACHE_DIR/originals), one read however many variants of it are asked for at once,
and for IMG_STORE_RETRY_S after the store did not answer, no read is even tried (docs/images.md,
"Where they are stored")."""

from __future__ import annotations

import asyncio
import hashlib
import time
from concurrent.futures import ThreadPoolExecutor

from cannaspider.images.cache import DiskCache
from cannaspider.images.store_reader import StoreReader, StoreUnavailable


class ImageNotFound(LookupError):
    """A 404: the store has no such file."""


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
        # reads from a remote store wait on the network, not on a core: threads of their own, so a
        # slow store never holds up renders of what is cached
        self.pool = pool
        self.retry_s = retry_s
        self.fetching: dict[str, asyncio.Task[bytes]] = {}
        self.down: tuple[float, StoreUnavailable] | None = None  # (until, why): the store did not answer
        self.fetches = 0  # originals read from the store since start

    def __contains__(self, path: str) -> bool:
        return original_name(path) in self.cache

    async def get(self, store: StoreReader, path: str) -> bytes:
        """The stored file: the local copy, else one read from the store however many variants of
        it are asked for at once."""
        task = self.fetching.get(path)
        if task is None:
            task = asyncio.ensure_future(self._fetch(store, path))
            self.fetching[path] = task
            task.add_done_callback(lambda done: settled(self.fetching, path, done))
        return await asyncio.shield(task)

    async def _fetch(self, store: StoreReader, path: str) -> bytes:
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
            body = await loop.run_in_executor(self.pool, store.read, path)
        except StoreUnavailable as exc:
            if exc.status == 503:
                self.down = (time.monotonic() + self.retry_s, exc)
            raise
        if body is None:
            raise ImageNotFound(path)
        self.fetches += 1
        await loop.run_in_executor(self.pool, self.cache.put, name, body)
        return body
