"""The image back-ends: where product images are written and read back (docs/images.md, "Where
they are stored"). IMAGES_STORE names one back-end by its URI's scheme, as Scrapy's FilesPipeline
picks its files store: a local folder, s3://, gs:// or ftp://.

Writing: the pipeline writes through Scrapy's own files stores (scrapy.pipelines.files), configured
from the same settings Scrapy's ImagesPipeline reads (AWS_*, IMAGES_STORE_S3_ACL, GCS_PROJECT_ID,
IMAGES_STORE_GCS_ACL, FTP_USER, FTP_PASSWORD, FEED_STORAGE_FTP_ACTIVE), so a back-end set up for
Scrapy's pipeline works here unchanged (`open_files_backend`). The local one is Scrapy's with two
changes: a file appears whole or not at all, and folders are made when a file is written, not when
the crawl starts.

Reading: `/img` reads what each files store wrote, with the same client library, the same settings
and the same object names (`open_backend` picks the reader):

    local folder  <folder>/<path>                     LocalReader
    s3://b/p      key  p + path, with botocore (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
                  AWS_SESSION_TOKEN, AWS_ENDPOINT_URL, AWS_REGION_NAME, AWS_USE_SSL, AWS_VERIFY),
                  S3Reader
    gs://b/p      blob p + path, with google-cloud-storage (GCS_PROJECT_ID; STORAGE_EMULATOR_HOST),
                  GCSReader
    ftp://h:n/d   file /d/path, with ftplib (FTP_USER / FTP_PASSWORD unless the URI has them,
                  FEED_STORAGE_FTP_ACTIVE), FTPReader

As in Scrapy, the prefix is glued to the path as is: end the URI with `/`. Every reader's `read(path)`
returns the bytes, or None when the back-end has no such file; one that cannot be reached or
refuses us raises BackendUnavailable, whose reason names the back-end without its credentials, so
/img can show it as is. Every path is checked against the only shapes the pipeline writes before
any key is built (cannaspider/images/paths.py): `..`, absolute, percent-encoded or upper-case paths
never reach a back-end. `read` blocks: /img calls it from a thread pool.
"""

from __future__ import annotations

import asyncio
import ftplib
import os
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from io import BytesIO
from pathlib import Path
from typing import Any, Protocol
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

from cannaspider.images.paths import is_stored_path_shape


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


FILES_STORES: dict[str, type[Any]] = {
    "": AtomicFSFilesStore,
    "file": AtomicFSFilesStore,
    "s3": S3FilesStore,
    "gs": GCSFilesStore,
    "ftp": FTPFilesStore,
}


def open_files_backend(uri: str, settings: BaseSettings) -> FilesStoreProtocol:
    """Scrapy's files store for `uri`, its class configured from settings as Scrapy's ImagesPipeline does
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
    store: FilesStoreProtocol = FILES_STORES[scheme](uri)
    return store


# Reading back: what every reader is to /img, and the opener.


class BackendConfigError(ValueError):
    """IMAGES_STORE cannot be read by /img (a missing client library, a URI without a host)."""


class BackendUnavailable(Exception):
    """The back-end did not answer (`status` 503: try again later) or refused us (502).
    The reason is safe to show: it never holds a credential."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class BackendReader(Protocol):
    identity: str  # the back-end's URI without credentials: in ETags, logs and errors

    def read(self, path: str) -> bytes | None: ...


def object_key(prefix: str, path: str) -> str:
    """The name `path` has in a back-end whose URI ends in `prefix` (Scrapy's `prefix + path`);
    ValueError for a path the pipeline cannot have written."""
    if not is_stored_path_shape(path):
        raise ValueError(f"not a stored image path: {path!r}")
    return prefix + path


def backend_scheme(uri: str) -> str:
    """As Scrapy's FilesPipeline._get_store picks the files store: an absolute path is a folder."""
    return "file" if Path(uri).is_absolute() else urlparse(uri).scheme


def open_backend(uri: str, settings: BaseSettings, *, timeout: float, pool: int) -> BackendReader:
    """The reader for IMAGES_STORE `uri`; BackendConfigError when /img cannot read that back-end."""
    scheme = backend_scheme(uri)
    if scheme in ("", "file"):
        return LocalReader(Path(uri.split("://", 1)[1] if "://" in uri else uri))
    if scheme == "s3":
        return S3Reader(uri, settings, timeout=timeout, pool=pool)
    if scheme == "gs":
        return GCSReader(uri, settings, timeout=timeout)
    if scheme == "ftp":
        return FTPReader(uri, settings, timeout=timeout)
    raise BackendConfigError(f"IMAGES_STORE is {scheme}://: /img reads a folder, s3://, gs:// or ftp://")


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


# Reading back from an object store, as the pipeline wrote it through Scrapy's
# S3FilesStore or GCSFilesStore: the same client library, the same settings, the same object names
# (bucket and prefix split from the URI as those stores split it, the prefix glued to the path as
# is). Both readers give up within /img's timeout, where botocore would wait a minute and
# google-cloud-storage retry for two on a store that is down, so a request is answered 503 instead.
#
# The client libraries are optional, as in Scrapy: they are imported only when IMAGES_STORE names
# their store, and a missing one is a BackendConfigError saying which.


def bucket_and_prefix(uri: str) -> tuple[str, str]:
    """`s3://bucket/pre/fix/` → ("bucket", "pre/fix/"), as S3FilesStore and GCSFilesStore split it."""
    bucket, _, prefix = uri.split("://", 1)[1].partition("/")
    if not bucket:
        raise BackendConfigError(f"IMAGES_STORE {uri.split('://', 1)[0]}:// names no bucket")
    return bucket, prefix


class S3Reader:
    """S3 or any S3-compatible server (AWS_ENDPOINT_URL), with botocore, as S3FilesStore."""

    RETRIABLE = frozenset({"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling"})

    def __init__(self, uri: str, settings: BaseSettings, *, timeout: float, pool: int):
        if find_spec("botocore") is None:
            raise BackendConfigError("IMAGES_STORE is s3://: /img needs botocore (as Scrapy's S3 store does)")
        import botocore.session  # noqa: PLC0415 - the s3 extra: only for an s3:// store
        from botocore.config import Config  # noqa: PLC0415 - the s3 extra, as above

        self.bucket, self.prefix = bucket_and_prefix(uri)
        self.identity = f"s3://{self.bucket}/{self.prefix}"
        # S3FilesStore's client and settings; a /img request must not wait the minute botocore
        # waits by default for a store that is down
        config = Config(
            max_pool_connections=settings.getint("AWS_MAX_POOL_CONNECTIONS") or pool,
            connect_timeout=timeout,
            read_timeout=timeout,
            retries={"max_attempts": 2, "mode": "standard"},
        )
        self.client: Any = botocore.session.get_session().create_client(
            "s3",
            aws_access_key_id=settings["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=settings["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=settings["AWS_SESSION_TOKEN"],
            endpoint_url=settings["AWS_ENDPOINT_URL"],
            region_name=settings["AWS_REGION_NAME"],
            use_ssl=settings["AWS_USE_SSL"],
            verify=settings["AWS_VERIFY"],
            config=config,
        )

    def key(self, path: str) -> str:
        return object_key(self.prefix, path)

    def read(self, path: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError  # noqa: PLC0415 - the s3 extra
        from botocore.exceptions import ConnectionError as Unreachable  # noqa: PLC0415 - the s3 extra

        key = self.key(path)
        try:
            reply = self.client.get_object(Bucket=self.bucket, Key=key)
            body: bytes = reply["Body"].read()
            return body
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "?"))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
            if code in ("NoSuchKey", "404", "NotFound"):
                return None
            if status >= 500 or code in self.RETRIABLE:
                raise BackendUnavailable(503, f"{self.identity} answered {code}") from None
            raise BackendUnavailable(502, f"{self.identity} refused the read ({code})") from None
        except (Unreachable, HTTPClientError) as exc:  # refused, timed out, reset
            raise BackendUnavailable(503, f"{self.identity} cannot be reached ({type(exc).__name__})") from None
        except BotoCoreError as exc:  # NoCredentialsError and the like: the message is botocore's own
            raise BackendUnavailable(502, f"{self.identity}: {type(exc).__name__}") from None


class GCSReader:
    """Google Cloud Storage, with google-cloud-storage, as GCSFilesStore (STORAGE_EMULATOR_HOST,
    which that library honours, points both at an emulator). The client is made at the first read
    (it looks for credentials then, which may need the network)."""

    def __init__(self, uri: str, settings: BaseSettings, *, timeout: float):
        try:
            present = find_spec("google.cloud.storage") is not None
        except ModuleNotFoundError:
            present = False
        if not present:
            raise BackendConfigError(
                "IMAGES_STORE is gs://: /img needs google-cloud-storage (as Scrapy's GCS store does)"
            )
        from google.cloud.storage.retry import DEFAULT_RETRY  # noqa: PLC0415 - the gcs extra: only for a gs:// store

        self.bucket_name, self.prefix = bucket_and_prefix(uri)
        self.identity = f"gs://{self.bucket_name}/{self.prefix}"
        self.project = settings["GCS_PROJECT_ID"]
        self.timeout = timeout
        # the library retries a store that is down for two minutes by default: a /img request
        # gives up within its timeout, as the S3 reader does
        self.retry = DEFAULT_RETRY.with_timeout(timeout)
        self._bucket: Any = None
        self._bucket_seen = False
        self._lock = threading.Lock()

    def key(self, path: str) -> str:
        return object_key(self.prefix, path)

    def bucket(self) -> Any:
        with self._lock:
            if self._bucket is None:
                from google.cloud import storage  # noqa: PLC0415 - the gcs extra, at the first read

                self._bucket = storage.Client(project=self.project).bucket(self.bucket_name)
            return self._bucket

    def read(self, path: str) -> bytes | None:
        from google.api_core.exceptions import NotFound  # noqa: PLC0415 - the gcs extra's

        key = self.key(path)
        with self.answers():
            try:
                body: bytes = self.bucket().blob(key).download_as_bytes(timeout=self.timeout, retry=self.retry)
                return body
            except NotFound:
                if self.bucket_exists():
                    return None
        raise BackendUnavailable(502, f"{self.identity} refused the read (no such bucket)")

    def bucket_exists(self) -> bool:
        """Whether the bucket is there: GCS answers a read from a bucket that does not exist with
        the 404 of a missing object. Asked at the first 404; once seen, the bucket is known."""
        from google.api_core.exceptions import Forbidden  # noqa: PLC0415 - the gcs extra's

        if not self._bucket_seen:
            try:
                self._bucket_seen = bool(self.bucket().exists(timeout=self.timeout, retry=self.retry))
            except Forbidden:  # credentials that may read objects only: the object is missing
                self._bucket_seen = True
        return self._bucket_seen

    @contextmanager
    def answers(self) -> Iterator[None]:
        """The library's failures as BackendUnavailable: down or busy 503, refused 502."""
        import requests  # noqa: PLC0415 - google-cloud-storage's transport, installed with the gcs extra
        from google.api_core import exceptions as api  # noqa: PLC0415 - the gcs extra's
        from google.auth import exceptions as auth  # noqa: PLC0415 - the gcs extra's
        from google.cloud.storage.exceptions import DataCorruption  # noqa: PLC0415 - the gcs extra's

        try:
            yield
        except api.RetryError as exc:  # retried until the timeout: the last failure says why
            cause = exc.cause if isinstance(exc.cause, api.GoogleAPICallError) else None
            why = f"answered {type(cause).__name__}" if cause else f"cannot be reached ({type(exc.cause).__name__})"
            raise BackendUnavailable(503, f"{self.identity} {why}") from None
        except (api.ServerError, api.TooManyRequests, DataCorruption) as exc:
            raise BackendUnavailable(503, f"{self.identity} answered {type(exc).__name__}") from None
        except api.GoogleAPICallError as exc:
            raise BackendUnavailable(502, f"{self.identity} refused the read ({type(exc).__name__})") from None
        except auth.GoogleAuthError as exc:
            raise BackendUnavailable(502, f"{self.identity}: no usable credentials ({type(exc).__name__})") from None
        except (requests.RequestException, OSError) as exc:
            raise BackendUnavailable(503, f"{self.identity} cannot be reached ({type(exc).__name__})") from None


# Reading a stored image back from an FTP server, as the pipeline wrote it through Scrapy's
# FTPFilesStore: the same credentials (the URI's, else FTP_USER / FTP_PASSWORD), the same passive or
# active mode (FEED_STORAGE_FTP_ACTIVE) and the same file names (`<the URI's path>/<path>`).
#
# The password is only ever handed to ftplib: the reader's identity, in every log line, ETag and
# error, names the host, port and folder alone.


class FTPReader:
    """An FTP server, with ftplib, as FTPFilesStore: the URI's user and password, else FTP_USER
    and FTP_PASSWORD; active mode when FEED_STORAGE_FTP_ACTIVE. One connection per read."""

    def __init__(self, uri: str, settings: BaseSettings, *, timeout: float):
        u = urlparse(uri)
        if not u.hostname:
            raise BackendConfigError("IMAGES_STORE ftp:// names no host")
        self.host = u.hostname
        self.port = int(u.port or 21)
        self.username = u.username or settings["FTP_USER"]
        self.password = u.password or settings["FTP_PASSWORD"]
        self.active = settings.getbool("FEED_STORAGE_FTP_ACTIVE")
        self.basedir = u.path.rstrip("/")
        self.timeout = timeout
        self.identity = f"ftp://{self.host}:{self.port}{self.basedir}/"

    def key(self, path: str) -> str:
        return object_key(f"{self.basedir}/", path)

    def read(self, path: str) -> bytes | None:
        target = self.key(path)
        chunks: list[bytes] = []
        try:
            with ftplib.FTP(timeout=self.timeout) as ftp:
                ftp.connect(self.host, self.port)
                ftp.login(self.username, self.password)
                if self.active:
                    ftp.set_pasv(False)
                ftp.retrbinary(f"RETR {target}", chunks.append)
        except ftplib.error_perm as exc:
            code = str(exc)[:3]
            if code == "550":  # no such file (or folder)
                return None
            raise BackendUnavailable(502, f"{self.identity} refused the read (FTP {code})") from None
        except ftplib.error_temp as exc:
            raise BackendUnavailable(503, f"{self.identity} answered FTP {str(exc)[:3]}") from None
        except (OSError, EOFError, ftplib.Error) as exc:
            raise BackendUnavailable(503, f"{self.identity} cannot be reached ({type(exc).__name__})") from None
        return b"".join(chunks)
