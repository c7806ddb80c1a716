"""Where the image pipeline writes: Scrapy's file stores (a local folder, s3://, gs://, ftp://),
chosen by IMAGES_STORE and configured from the same settings Scrapy's ImagesPipeline reads
(AWS_*, IMAGES_STORE_S3_ACL, GCS_PROJECT_ID, IMAGES_STORE_GCS_ACL, FTP_USER, FTP_PASSWORD,
FEED_STORAGE_FTP_ACTIVE), so a store set up for Scrapy's pipeline works here unchanged
(docs/images.md, "Where they are stored"). `/img` reads the same stores (cannaspider/images/stores.py).

The local store is Scrapy's with two changes: a file appears whole or not at all, and folders are
made when a file is written, not when the crawl starts.
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from io import BytesIO
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from scrapy.pipelines.files import (
    FilesStoreProtocol,
    FSFilesStore,
    FTPFilesStore,
    GCSFilesStore,
    S3FilesStore,
    StatInfo,
)
from scrapy.pipelines.media import MediaPipeline
from scrapy.settings import BaseSettings
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.defer import Deferred


def images_store_uri(settings: BaseSettings) -> str:
    """IMAGES_STORE, or CANNASPIDER_DATA_DIR/images when it is not set."""
    return str(settings.get("IMAGES_STORE") or Path(settings["CANNASPIDER_DATA_DIR"]) / "images")


class AtomicFSFilesStore(FSFilesStore):
    """Scrapy's local store, but a file appears whole or not at all (written beside, then renamed),
    off the event loop: a crash mid-write must not leave a truncated file that every later crawl
    would take for the stored image. Folders are made when a file is written, not when the crawl
    starts: a data folder that cannot be used is reported by the crawl's own checks, in one line."""

    def __init__(self, basedir: str | os.PathLike[str]):  # not FSFilesStore.__init__: it makes the folder
        basedir = str(basedir)
        self.basedir = basedir.split("://", 1)[1] if "://" in basedir else basedir
        self.created_directories = defaultdict(set)

    def persist_file(  # type: ignore[override]  # the store protocol (FilesStoreProtocol) allows a Deferred
        self,
        path: str | os.PathLike[str],
        buf: BytesIO,
        info: MediaPipeline.SpiderInfo,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Deferred[Any]:
        return deferred_from_coro(asyncio.to_thread(self._write, self.full_path(path), buf.getvalue()))

    def full_path(self, path: str | os.PathLike[str]) -> Path:
        # ours, not FSFilesStore's private helper: the same join of the store's folder and the path
        return Path(self.basedir, path)

    @staticmethod
    def _write(target: Path, data: bytes) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.{id(data):x}.tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)

    def stat_file(self, path: str | os.PathLike[str], info: MediaPipeline.SpiderInfo) -> StatInfo:
        # existence is all that matters here (a stored image never expires): no checksum read
        try:  # os.stat of the joined string: pathlib's objects cost more than the call, once per image
            return {"last_modified": os.stat(os.path.join(self.basedir, path)).st_mtime}
        except OSError:
            return {}


STORES: dict[str, type[Any]] = {
    "": AtomicFSFilesStore,
    "file": AtomicFSFilesStore,
    "s3": S3FilesStore,
    "gs": GCSFilesStore,
    "ftp": FTPFilesStore,
}


def open_files_store(uri: str, settings: BaseSettings) -> FilesStoreProtocol:
    """The store for `uri`, its class configured from settings as Scrapy's ImagesPipeline does
    (class attributes: Scrapy's stores read their credentials there)."""
    S3FilesStore.AWS_ACCESS_KEY_ID = settings["AWS_ACCESS_KEY_ID"]
    S3FilesStore.AWS_SECRET_ACCESS_KEY = settings["AWS_SECRET_ACCESS_KEY"]
    S3FilesStore.AWS_SESSION_TOKEN = settings["AWS_SESSION_TOKEN"]
    S3FilesStore.AWS_ENDPOINT_URL = settings["AWS_ENDPOINT_URL"]
    S3FilesStore.AWS_REGION_NAME = settings["AWS_REGION_NAME"]
    S3FilesStore.AWS_USE_SSL = settings["AWS_USE_SSL"]
    S3FilesStore.AWS_VERIFY = settings["AWS_VERIFY"]
    S3FilesStore.AWS_MAX_POOL_CONNECTIONS = settings.getint("AWS_MAX_POOL_CONNECTIONS") or settings.getint(
        "REACTOR_THREADPOOL_MAXSIZE"
    )
    S3FilesStore.POLICY = settings["IMAGES_STORE_S3_ACL"]
    GCSFilesStore.GCS_PROJECT_ID = settings["GCS_PROJECT_ID"]
    GCSFilesStore.POLICY = settings["IMAGES_STORE_GCS_ACL"] or None
    FTPFilesStore.FTP_USERNAME = settings["FTP_USER"]
    FTPFilesStore.FTP_PASSWORD = settings["FTP_PASSWORD"]
    FTPFilesStore.USE_ACTIVE_MODE = settings.getbool("FEED_STORAGE_FTP_ACTIVE")
    scheme = "file" if Path(uri).is_absolute() else urlparse(uri).scheme  # as Scrapy's (C:\ paths too)
    store: FilesStoreProtocol = STORES[scheme](uri)
    return store
