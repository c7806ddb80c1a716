"""The image back-ends' readers for /img, without a server: the object names they read are the ones
Scrapy's files stores write, no path that leaves the back-end becomes a key, and each answer of a
back-end maps to found / not found / 502 / 503 with a reason that holds no credential. (Reads over
a real FTP server, moto's S3 server and a GCS emulator: tests/web/test_images_backends.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.stub import Stubber
from scrapy.settings import Settings

from cannaspider import settings as defaults
from cannaspider.images import backends
from cannaspider.images.backends import (
    BackendConfigError,
    BackendReader,
    BackendUnavailable,
    FTPReader,
    GCSReader,
    LocalReader,
    S3Reader,
    backend_scheme,
    bucket_and_prefix,
    object_key,
)
from cannaspider.images.paths import brand_logo_path, product_image_path
from cannaspider.web.images import image_router

PID = "6913e3cd444eac3935e928b9"
PATH = product_image_path("AZ", "Deeply Rooted", "Bud Bros", PID, "https://images.dutchie.com/a.jpg")
SECRET = "s3cret-value-for-tests"


def open_backend(uri: str, settings: Settings) -> BackendReader:
    """As /img opens its store: the project's IMG_STORE_TIMEOUT_S and IMG_STORE_THREADS."""
    return backends.open_backend(uri, settings, timeout=defaults.IMG_STORE_TIMEOUT_S, pool=defaults.IMG_STORE_THREADS)


OUTSIDE = [
    "../secret.webp",
    "products/../../secret.webp",
    "/etc/secret.webp",
    "%2e%2e/secret.webp",
    "products/%2e%2e%2fsecret.webp",
    "products//x.webp",
    "products\\..\\secret.webp",
    "Products/X.webp",
    "products/x.png",
    "products/x.webp/",
    "products/./x.webp",
    "",
]


def s3_settings(**extra) -> Settings:
    return Settings(
        {
            "AWS_ACCESS_KEY_ID": "AKIAFORTESTS",
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION_NAME": "us-east-1",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
            **extra,
        }
    )


def test_keys_are_scrapys_prefix_plus_path():
    # S3FilesStore and GCSFilesStore: bucket, prefix = uri[5:].split("/", 1); key = prefix + path
    assert bucket_and_prefix("s3://bucket/shared/images/") == ("bucket", "shared/images/")
    assert bucket_and_prefix("gs://bucket/images/") == ("bucket", "images/")
    assert bucket_and_prefix("gs://bucket/") == ("bucket", "")
    assert object_key("images/", PATH) == f"images/{PATH}"
    assert object_key("", brand_logo_path("Bud Bros", "u")) == brand_logo_path("Bud Bros", "u")
    # the prefix is glued as is, exactly as Scrapy writes it (hence: end the URI with "/")
    assert object_key("images", PATH) == f"images{PATH}"
    s3 = S3Reader("s3://bucket/shared/", s3_settings(), timeout=1, pool=1)
    assert s3.key(PATH) == f"shared/{PATH}" and s3.identity == "s3://bucket/shared/"
    gcs = GCSReader("gs://bucket/shared/", Settings({"GCS_PROJECT_ID": "p"}), timeout=1)
    assert gcs.key(PATH) == f"shared/{PATH}" and gcs.identity == "gs://bucket/shared/" and gcs.project == "p"
    # FTPFilesStore: basedir = the URI's path without its last "/"; file = f"{basedir}/{path}"
    ftp = FTPReader(f"ftp://u:{SECRET}@127.0.0.1:2121/srv/images/", Settings(), timeout=1)
    assert ftp.key(PATH) == f"/srv/images/{PATH}"
    assert (ftp.host, ftp.port, ftp.username, ftp.password) == ("127.0.0.1", 2121, "u", SECRET)
    assert SECRET not in ftp.identity and ftp.identity == "ftp://127.0.0.1:2121/srv/images/"
    # credentials from FTP_USER / FTP_PASSWORD when the URI has none, active mode as the feeds
    from_settings = FTPReader(
        "ftp://127.0.0.1/images",
        Settings({"FTP_USER": "me", "FTP_PASSWORD": SECRET, "FEED_STORAGE_FTP_ACTIVE": True}),
        timeout=1,
    )
    assert (from_settings.port, from_settings.username, from_settings.active) == (21, "me", True)
    assert from_settings.key(PATH) == f"/images/{PATH}"


def test_no_key_is_built_for_a_path_out_of_the_store():
    s3 = S3Reader("s3://bucket/images/", s3_settings(), timeout=1, pool=1)
    ftp = FTPReader("ftp://127.0.0.1:9/images/", Settings(), timeout=1)
    gcs = GCSReader("gs://bucket/images/", Settings(), timeout=1)
    for path in OUTSIDE:
        for build in (lambda p: object_key("images/", p), s3.read, ftp.read, gcs.read):
            with pytest.raises(ValueError, match="not a stored image path"):
                build(path)


def test_gcs_without_its_library_is_a_clear_configuration_error(tmp_path, monkeypatch):
    monkeypatch.setattr(backends, "find_spec", lambda name: None)  # a node without google-cloud-storage
    with pytest.raises(BackendConfigError, match="gs://: /img needs google-cloud-storage"):
        open_backend("gs://bucket/images/", Settings())
    router = image_router(Settings({"IMAGES_STORE": "gs://bucket/images/", "CANNASPIDER_DATA_DIR": str(tmp_path)}))
    assert "google-cloud-storage" in router.image_proxy.unsupported_backend  # type: ignore[attr-defined]


def test_schemes_as_scrapy_picks_the_store(tmp_path):
    assert backend_scheme("/abs/images") == "file" and backend_scheme("rel/images") == ""
    assert backend_scheme("s3://b/p/") == "s3" and backend_scheme("ftp://h/p") == "ftp"
    assert isinstance(open_backend(str(tmp_path), Settings()), LocalReader)
    assert isinstance(open_backend(f"file://{tmp_path}", Settings()), LocalReader)
    with pytest.raises(BackendConfigError, match="reads a folder, s3://, gs:// or ftp://"):
        open_backend("sftp://host/images/", Settings())
    with pytest.raises(BackendConfigError, match="names no host"):
        open_backend("ftp:///images/", Settings())


def test_local_reader_stays_in_its_folder(tmp_path):
    store = tmp_path / "store"
    (store / PATH).parent.mkdir(parents=True)
    (store / PATH).write_bytes(b"RIFFwebp")
    (tmp_path / "secret.webp").write_bytes(b"secret")
    (store / "products" / "out.webp").symlink_to(tmp_path / "secret.webp")
    reader = LocalReader(store)
    assert reader.read(PATH) == b"RIFFwebp"
    assert reader.read("products/out.webp") is None  # a symlink out of the store
    assert reader.read("products/none.webp") is None
    assert all(reader.locate(p) is None for p in OUTSIDE)


def _stubbed(*, code: str, status: int) -> tuple[S3Reader, Stubber]:
    reader = S3Reader("s3://bucket/images/", s3_settings(), timeout=1, pool=1)
    stub = Stubber(reader.client)
    stub.add_client_error("get_object", service_error_code=code, http_status_code=status)
    stub.activate()
    return reader, stub


@pytest.mark.parametrize(
    ("code", "status", "answer"),
    [
        ("NoSuchKey", 404, None),
        ("AccessDenied", 403, 502),
        ("NoSuchBucket", 404, 502),
        ("InvalidAccessKeyId", 403, 502),
        ("SlowDown", 503, 503),
        ("InternalError", 500, 503),
    ],
)
def test_s3_answers(code, status, answer):
    reader, _ = _stubbed(code=code, status=status)
    if answer is None:
        assert reader.read(PATH) is None
        return
    with pytest.raises(BackendUnavailable) as caught:
        reader.read(PATH)
    assert caught.value.status == answer and code in caught.value.reason
    assert "s3://bucket/images/" in caught.value.reason and SECRET not in caught.value.reason


def test_s3_unreachable_is_503_fast(tmp_path):
    # port 9 (discard) on loopback: nothing listens, the connection is refused at once
    reader = S3Reader("s3://bucket/images/", s3_settings(), timeout=1, pool=1)
    with pytest.raises(BackendUnavailable) as caught:
        reader.read(PATH)
    assert caught.value.status == 503 and "cannot be reached (EndpointConnectionError)" in caught.value.reason
    assert SECRET not in caught.value.reason


def test_ftp_unreachable_is_503():
    with pytest.raises(BackendUnavailable) as caught:
        FTPReader(f"ftp://u:{SECRET}@127.0.0.1:9/images/", Settings(), timeout=1).read(PATH)
    assert caught.value.status == 503 and SECRET not in caught.value.reason
    assert caught.value.reason == "ftp://127.0.0.1:9/images/ cannot be reached (ConnectionRefusedError)"


def _gcs_failures():
    from google.api_core import exceptions as api
    from google.auth.exceptions import DefaultCredentialsError
    from requests import ConnectionError as Unreachable

    return [
        (api.ServiceUnavailable("busy"), 503, "answered ServiceUnavailable"),
        (api.TooManyRequests("slow down"), 503, "answered TooManyRequests"),
        (api.RetryError("gave up", api.InternalServerError("x")), 503, "answered InternalServerError"),
        (api.RetryError("gave up", Unreachable("refused")), 503, "cannot be reached (ConnectionError)"),
        (Unreachable("refused"), 503, "cannot be reached (ConnectionError)"),
        (api.Forbidden("no"), 502, "refused the read (Forbidden)"),
        (api.Unauthorized("no"), 502, "refused the read (Unauthorized)"),
        (DefaultCredentialsError("none"), 502, "no usable credentials (DefaultCredentialsError)"),
    ]


@pytest.mark.parametrize(("failure", "status", "why"), _gcs_failures())
def test_gcs_answers(failure, status, why):
    reader = GCSReader("gs://bucket/images/", Settings(), timeout=1)
    with pytest.raises(BackendUnavailable) as caught, reader.answers():
        raise failure
    assert caught.value.status == status and caught.value.reason.startswith("gs://bucket/images/")
    assert caught.value.reason.endswith(why)


def test_a_path_object_is_a_local_store(tmp_path: Path):
    from cannaspider.web.images import ImageProxy

    proxy = ImageProxy(tmp_path, tmp_path / "cache")
    assert proxy.root == tmp_path.resolve() and proxy.originals is None
