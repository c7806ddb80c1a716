"""Reading a stored image back from an object store, as the pipeline wrote it through Scrapy's
S3FilesStore or GCSFilesStore: the same client library, the same settings, the same object names
(bucket and prefix split from the URI as those stores split it, the prefix glued to the path as
is). Both readers give up within /img's timeout, where botocore would wait a minute and
google-cloud-storage retry for two on a store that is down, so a request is answered 503 instead.

The client libraries are optional, as in Scrapy: they are imported only when IMAGES_STORE names
their store, and a missing one is a StoreConfigError saying which.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from typing import Any

from scrapy.settings import BaseSettings

from cannaspider.images.store_reader import StoreConfigError, StoreUnavailable, object_key


def bucket_and_prefix(uri: str) -> tuple[str, str]:
    """`s3://bucket/pre/fix/` → ("bucket", "pre/fix/"), as S3FilesStore and GCSFilesStore split it."""
    bucket, _, prefix = uri.split("://", 1)[1].partition("/")
    if not bucket:
        raise StoreConfigError(f"IMAGES_STORE {uri.split('://', 1)[0]}:// names no bucket")
    return bucket, prefix


class S3Reader:
    """S3 or any S3-compatible server (AWS_ENDPOINT_URL), with botocore, as S3FilesStore."""

    RETRIABLE = frozenset({"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling"})

    def __init__(self, uri: str, settings: BaseSettings, *, timeout: float, pool: int):
        if find_spec("botocore") is None:
            raise StoreConfigError("IMAGES_STORE is s3://: /img needs botocore (as Scrapy's S3 store does)")
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
                raise StoreUnavailable(503, f"{self.identity} answered {code}") from None
            raise StoreUnavailable(502, f"{self.identity} refused the read ({code})") from None
        except (Unreachable, HTTPClientError) as exc:  # refused, timed out, reset
            raise StoreUnavailable(503, f"{self.identity} cannot be reached ({type(exc).__name__})") from None
        except BotoCoreError as exc:  # NoCredentialsError and the like: the message is botocore's own
            raise StoreUnavailable(502, f"{self.identity}: {type(exc).__name__}") from None


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
            raise StoreConfigError(
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
        raise StoreUnavailable(502, f"{self.identity} refused the read (no such bucket)")

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
        """The library's failures as StoreUnavailable: down or busy 503, refused 502."""
        import requests  # noqa: PLC0415 - google-cloud-storage's transport, installed with the gcs extra
        from google.api_core import exceptions as api  # noqa: PLC0415 - the gcs extra's
        from google.auth import exceptions as auth  # noqa: PLC0415 - the gcs extra's
        from google.cloud.storage.exceptions import DataCorruption  # noqa: PLC0415 - the gcs extra's

        try:
            yield
        except api.RetryError as exc:  # retried until the timeout: the last failure says why
            cause = exc.cause if isinstance(exc.cause, api.GoogleAPICallError) else None
            why = f"answered {type(cause).__name__}" if cause else f"cannot be reached ({type(exc.cause).__name__})"
            raise StoreUnavailable(503, f"{self.identity} {why}") from None
        except (api.ServerError, api.TooManyRequests, DataCorruption) as exc:
            raise StoreUnavailable(503, f"{self.identity} answered {type(exc).__name__}") from None
        except api.GoogleAPICallError as exc:
            raise StoreUnavailable(502, f"{self.identity} refused the read ({type(exc).__name__})") from None
        except auth.GoogleAuthError as exc:
            raise StoreUnavailable(502, f"{self.identity}: no usable credentials ({type(exc).__name__})") from None
        except (requests.RequestException, OSError) as exc:
            raise StoreUnavailable(503, f"{self.identity} cannot be reached ({type(exc).__name__})") from None
