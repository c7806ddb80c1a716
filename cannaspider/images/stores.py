"""Reading a stored image back from IMAGES_STORE, whatever store the pipeline wrote it to
(docs/images.md, "A shared store"): `open_store` picks the reader by the URI's scheme, as Scrapy's
FilesPipeline picks the store it writes to, and the local folder's reader is here.

The pipeline writes through Scrapy's own stores (scrapy.pipelines.files: FSFilesStore,
S3FilesStore, GCSFilesStore, FTPFilesStore); each reader reads what its counterpart wrote, with
the same client library, the same settings and the same object names:

    local folder  <folder>/<path>, here
    s3://b/p      key  p + path, with botocore (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
                  AWS_SESSION_TOKEN, AWS_ENDPOINT_URL, AWS_REGION_NAME, AWS_USE_SSL, AWS_VERIFY),
                  cannaspider/images/cloud_stores.py
    gs://b/p      blob p + path, with google-cloud-storage (GCS_PROJECT_ID; STORAGE_EMULATOR_HOST),
                  cannaspider/images/cloud_stores.py
    ftp://h:n/d   file /d/path, with ftplib (FTP_USER / FTP_PASSWORD unless the URI has them,
                  FEED_STORAGE_FTP_ACTIVE), cannaspider/images/ftp_store.py

As in Scrapy, the prefix is glued to the path as is: end the URI with `/`.

What a reader answers, and how it keeps credentials out of its errors:
cannaspider/images/store_reader.py. `read` blocks: /img calls it from a thread pool.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from scrapy.settings import BaseSettings

from cannaspider.images.cloud_stores import GCSReader, S3Reader
from cannaspider.images.ftp_store import FTPReader
from cannaspider.images.paths import is_stored_path_shape
from cannaspider.images.store_reader import StoreConfigError, StoreReader


def store_scheme(uri: str) -> str:
    """As Scrapy's FilesPipeline._get_store picks the store: an absolute path is a folder."""
    return "file" if Path(uri).is_absolute() else urlparse(uri).scheme


def open_store(uri: str, settings: BaseSettings, *, timeout: float, pool: int) -> StoreReader:
    """The reader for IMAGES_STORE `uri`; StoreConfigError when /img cannot read that store."""
    scheme = store_scheme(uri)
    if scheme in ("", "file"):
        return LocalReader(Path(uri.split("://", 1)[1] if "://" in uri else uri))
    if scheme == "s3":
        return S3Reader(uri, settings, timeout=timeout, pool=pool)
    if scheme == "gs":
        return GCSReader(uri, settings, timeout=timeout)
    if scheme == "ftp":
        return FTPReader(uri, settings, timeout=timeout)
    raise StoreConfigError(f"IMAGES_STORE is {scheme}://: /img reads a folder, s3://, gs:// or ftp://")


class LocalReader:
    """A folder. `locate` also answers without reading (the ETag comes from the file's stat)."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.identity = str(self.root)

    def locate(self, path: str) -> tuple[Path, int, int] | None:
        """(file, size, mtime_ns) of the stored file `path` names, or None: a path of another
        shape, a symlink out of the store, a folder, nothing."""
        if not is_stored_path_shape(path):
            return None
        real = Path(self.root / path).resolve()
        if not real.is_relative_to(self.root):  # a symlink out of the store
            return None
        try:
            stat = real.stat()
        except OSError:
            return None
        return (real, stat.st_size, stat.st_mtime_ns) if real.is_file() else None

    def read(self, path: str) -> bytes | None:
        found = self.locate(path)
        if found is None:
            return None
        try:
            return found[0].read_bytes()
        except OSError:
            return None
