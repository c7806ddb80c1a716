"""/img over a shared store: the pipeline writes through Scrapy's own FTPFilesStore,
S3FilesStore and GCSFilesStore (a real FTP server, moto's S3 server and gcp-storage-emulator's GCS
server, all on 127.0.0.1) and /img, built from the same settings, serves the originals and resized
variants from that store; a store that is down or refuses us is a 503/502 that names the store and
never a credential, and what is cached is still served; paths that leave the store never reach
it."""

from __future__ import annotations

import asyncio
import http.client as httplib
import io
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI
from PIL import Image
from scrapy.settings import Settings

from cannaspider.images.backends import FTPReader, S3Reader
from cannaspider.web.images import ImageProxy, image_router
from tests.helpers import add_store, project_settings
from tests.httpclient import http
from tests.pipelines.test_images import PID, Harness, local_paths, product
from tests.web.test_images import serve

# pyftpdlib 2.2 still runs on asyncore/asynchat on Python 3.11 (only its import warns)
pytestmark = [
    pytest.mark.integration,  # spawns (tests/tiers.py)
    pytest.mark.filterwarnings("ignore:The asyn(core|chat) module is deprecated:DeprecationWarning"),
]

FTP_USER, FTP_PASSWORD = "img-writer", "ftp-s3cret-pw"
AWS_KEY, AWS_SECRET = "AKIATESTIMAGES", "aws-s3cret-key-for-tests"


# --- the stores, on loopback ---------------------------------------------------------------------


@dataclass
class Remote:
    """A store on loopback: its IMAGES_STORE and the settings the pipeline and /img both take, the
    bytes stored at a path (read without /img), how to stop it, and what must never be shown."""

    uri: str
    identity: str
    settings: dict[str, str]
    stored: Callable[[str], bytes]
    stop: Callable[[], None]
    secrets: tuple[str, ...] = ()


class FTPServer:
    def __init__(self, home: Path):
        from pyftpdlib.authorizers import DummyAuthorizer
        from pyftpdlib.handlers import FTPHandler
        from pyftpdlib.servers import ThreadedFTPServer

        logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
        authorizer = DummyAuthorizer()
        authorizer.add_user(FTP_USER, FTP_PASSWORD, str(home), perm="elradfmwMT")
        # a refused login is answered after auth_failed_timeout (3 s by default): not /img's 3 s timeout
        attrs = {"authorizer": authorizer, "passive_ports": None, "auth_failed_timeout": 0.2}
        handler = type("Handler", (FTPHandler,), attrs)
        self.home = home
        self.server = ThreadedFTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.socket.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        # one poll at a time and the close in this thread: closing the poller from another thread
        # while it polls is an EBADF in the server's thread
        while not self.stopping.is_set():
            self.server.serve_forever(timeout=0.1, blocking=False)
        self.server.close_all()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)


@pytest.fixture
def ftp(tmp_path):
    home = tmp_path / "ftp-home"
    home.mkdir()
    server = FTPServer(home)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3() -> Iterator[Remote]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    http("POST", f"http://127.0.0.1:{port}/moto-api/reset")  # moto's buckets live as long as the process
    settings = {
        "AWS_ACCESS_KEY_ID": AWS_KEY,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_REGION_NAME": "us-east-1",
    }
    reader = S3Reader("s3://images/shared/", Settings(settings), timeout=5, pool=2)
    client = reader.client
    client.create_bucket(Bucket="images")
    try:
        yield Remote(
            "s3://images/shared/",
            "s3://images/shared/",
            settings,
            lambda path: client.get_object(Bucket="images", Key=f"shared/{path}")["Body"].read(),
            server.stop,
            (AWS_KEY, AWS_SECRET),
        )
    finally:
        server.stop()


@pytest.fixture
def gs(monkeypatch) -> Iterator[Remote]:
    from gcp_storage_emulator.server import create_server
    from google.cloud import storage

    for name in ("gcp_storage_emulator", "api.bucket", "api.object"):  # a 404 is an error line there
        logging.getLogger(name).setLevel(logging.CRITICAL)
    server = create_server("127.0.0.1", 0, in_memory=True, default_bucket="images")
    server.start()
    port = server._api._httpd.server_address[1]  # the emulator has no public accessor for its port
    # google-cloud-storage sends every client to the emulator, with anonymous credentials:
    # Scrapy's GCSFilesStore and /img's reader alike, as a node would be pointed at a real one
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    bucket = storage.Client().bucket("images")
    try:
        yield Remote(
            "gs://images/shared/",
            "gs://images/shared/",
            {},
            lambda path: bucket.blob(f"shared/{path}").download_as_bytes(),
            server.stop,
        )
    finally:
        server.stop()


@pytest.fixture(params=["ftp", "s3", "gs"])
def remote(request) -> Remote:
    """Each shared store in turn."""
    if request.param != "ftp":
        return request.getfixturevalue(request.param)
    server = request.getfixturevalue("ftp")
    return Remote(
        ftp_uri(server),
        f"ftp://127.0.0.1:{server.port}/images/",
        {},
        lambda path: (server.home / "images" / path).read_bytes(),
        server.stop,
        (FTP_USER, FTP_PASSWORD),
    )


@pytest.fixture
def shop(db, sandbox):
    """A sandbox store in the database: its products' images are the sandbox's."""
    s = sandbox.stores("AZ")[0]
    return {"id": add_store(db, s), "base": sandbox.urls.base}


def ftp_uri(server: FTPServer, password: str = FTP_PASSWORD) -> str:
    return f"ftp://{FTP_USER}:{password}@127.0.0.1:{server.port}/images/"


def proxy_for(tmp_path: Path, uri: str, **settings) -> ImageProxy:
    proxy = image_router(
        Settings(  # the project's settings, as `scrapy serve` reads them
            {
                **project_settings(),
                "IMAGES_STORE": uri,
                "IMG_CACHE_DIR": str(tmp_path / "img-cache"),
                "IMG_STORE_TIMEOUT_S": 3,
                **settings,
            }
        )
    ).image_proxy  # type: ignore[attr-defined]
    assert proxy.unsupported_backend is None and proxy.root is None
    return proxy


class Spy:
    """The proxy's store, counting the paths it is asked for."""

    def __init__(self, reader):
        self.reader = reader
        self.identity = reader.identity
        self.paths: list[str] = []

    def read(self, path: str) -> bytes | None:
        self.paths.append(path)
        return self.reader.read(path)


def served(proxy: ImageProxy):
    app = FastAPI()
    app.include_router(image_router(proxy=proxy))
    return serve(app)


def crawl_into(db: str, shop: dict, uri: str, **settings) -> str:
    """One product crawled by the real pipeline into the store at `uri`: its local_image_path."""
    url = f"{shop['base']}/images/products/shared.png"
    harness = Harness(db, uri, **settings)  # type: ignore[arg-type]
    asyncio.run(harness.crawl([product(shop["id"], PID, url)]))
    assert harness.stat("images_stored") == 1, harness.crawler.stats.get_stats()
    path = local_paths(db, shop["id"])[PID]
    assert path is not None and path.startswith("products/az/")
    return path


def webp(body: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(body))
    assert image.format == "WEBP"
    return image


# --- every store ---------------------------------------------------------------------------------


def test_the_pipeline_writes_and_img_serves_resized_variants(db, shop, remote, tmp_path):
    path = crawl_into(db, shop, remote.uri, **remote.settings)
    stored = remote.stored(path)  # where Scrapy's store put it
    assert webp(stored).size == (320, 320)

    proxy = proxy_for(tmp_path, remote.uri, **remote.settings)
    spy = proxy.backend = Spy(proxy.backend)
    with served(proxy) as (base, _):
        original = http("GET", f"{base}/img/{path}")
        assert original.status == 200 and original.body == stored
        small = http("GET", f"{base}/img/{path}?w=100&format=webp")
        assert small.status == 200 and webp(small.body).size == (100, 100)
        assert small.headers["cache-control"].endswith("immutable")
        etag = small.headers["etag"]
        again = http("GET", f"{base}/img/{path}?w=100&format=webp", headers={"If-None-Match": etag})
        assert again.status == 304 and again.body == b""
        jpeg = http("GET", f"{base}/img/{path}?w=50&h=20&format=jpeg")
        assert jpeg.status == 200 and Image.open(io.BytesIO(jpeg.body)).size == (50, 20)
        png = http("GET", f"{base}/img/{path}?w=120&fit=inside&format=png")
        assert png.status == 200 and png.headers["content-type"] == "image/png"
        assert Image.open(io.BytesIO(png.body)).size == (120, 120)
        assert http("GET", f"{base}/img/{path}?w=0").status == 400
        # one read from the store: the original is kept in the local cache folder
        assert spy.paths == [path] and proxy.fetches == 1
        assert http("GET", f"{base}/img/products/az/nothing-here/x/{PID}/image-00000000.webp").status == 404
    assert len(list((tmp_path / "img-cache" / "originals").rglob("*.webp"))) == 1
    assert len(list((tmp_path / "img-cache" / "variants").rglob("*.*"))) == 3  # w=100 webp, 50x20 jpeg, png

    # a second node: its own cache, the same store, the same ETag
    other = proxy_for(tmp_path / "node2", remote.uri, **remote.settings)
    with served(other) as (base, _):
        assert http("GET", f"{base}/img/{path}?w=100&format=webp").headers["etag"] == etag


def test_many_variants_of_one_image_at_once_read_it_once_and_render_each_once(db, shop, remote, tmp_path):
    path = crawl_into(db, shop, remote.uri, **remote.settings)
    proxy = proxy_for(tmp_path, remote.uri, **remote.settings)
    with served(proxy) as (base, _):
        queries = [f"?w={w}" for w in (40, 41, 42, 43)] * 4
        with ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(lambda q: http("GET", f"{base}/img/{path}{q}"), queries))
    assert {r.status for r in replies} == {200}
    assert proxy.fetches == 1 and proxy.renders == 4


def test_store_down_is_503_without_credentials_and_what_is_cached_is_still_served(db, shop, remote, tmp_path):
    path = crawl_into(db, shop, remote.uri, **remote.settings)
    proxy = proxy_for(tmp_path / "a", remote.uri, **remote.settings)
    proxy.backend_retry_s = 0.2
    with served(proxy) as (base, _):
        assert http("GET", f"{base}/img/{path}?w=80").status == 200
        remote.stop()
        assert http("GET", f"{base}/img/{path}?w=80").status == 200
        # a new variant while the store is down: its original is in the local cache folder
        assert http("GET", f"{base}/img/{path}?w=81").status == 200
    # a process with an empty cache, the store down
    cold = proxy_for(tmp_path / "b", remote.uri, **remote.settings)
    with served(cold) as (base, _):
        reply = http("GET", f"{base}/img/{path}?w=80")
        assert reply.status == 503, reply.text
        detail = reply.json()["detail"]
        assert detail.startswith(f"the image store is unavailable: {remote.identity} cannot be reached"), detail
        assert not [secret for secret in remote.secrets if secret in reply.text]
        assert reply.headers["retry-after"]
        assert http("GET", f"{base}/img/{path}?w=80").status == 503  # still down: at once, no crash
    assert cold.renders == 0


# --- ftp:// ----------------------------------------------------------------------------------------


def test_ftp_credentials_from_the_settings_as_scrapy_takes_them(db, shop, ftp, tmp_path):
    uri = f"ftp://127.0.0.1:{ftp.port}/images/"
    credentials = {"FTP_USER": FTP_USER, "FTP_PASSWORD": FTP_PASSWORD}
    path = crawl_into(db, shop, uri, **credentials)
    proxy = proxy_for(tmp_path, uri, **credentials)
    with served(proxy) as (base, _):
        assert webp(http("GET", f"{base}/img/{path}?h=64").body).size == (64, 64)


def test_ftp_wrong_password_is_502_and_says_so_without_any_password(db, shop, ftp, tmp_path, caplog):
    path = crawl_into(db, shop, ftp_uri(ftp))
    proxy = proxy_for(tmp_path, ftp_uri(ftp, password="not-the-password"))
    with served(proxy) as (base, _), caplog.at_level(logging.WARNING):
        reply = http("GET", f"{base}/img/{path}?w=80")
    assert reply.status == 502 and "refused the read (FTP 530)" in reply.json()["detail"], reply.text
    assert "not-the-password" not in reply.text and "not-the-password" not in caplog.text
    assert "FTP 530" in caplog.text


def test_ftp_paths_out_of_the_store_never_reach_it(ftp, tmp_path):
    (ftp.home / "secret.webp").write_bytes(b"RIFF....WEBP")
    proxy = proxy_for(tmp_path, ftp_uri(ftp))
    spy = proxy.backend = Spy(proxy.backend)
    raw = [
        "/img/../secret.webp",
        "/img/images/../secret.webp",
        "/img/%2e%2e/secret.webp",
        "/img/products/%2e%2e%2f%2e%2e%2fsecret.webp",
        "/img/%252e%252e/secret.webp",
        "/img//secret.webp",
        "/img/%2Fsecret.webp",
        "/img/products\\..\\secret.webp",
        "/img/SECRET.webp",
        "/img/products/az/%00.webp",
    ]
    with served(proxy) as (_, port):
        for target in raw:
            conn = httplib.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.putrequest("GET", target, skip_accept_encoding=True)
            conn.endheaders()
            reply = conn.getresponse()
            body = reply.read()
            conn.close()
            assert reply.status == 404 and b"RIFF" not in body, (target, reply.status, body)
    assert spy.paths == []


# --- s3:// and gs:// --------------------------------------------------------------------------------


@pytest.mark.parametrize(("bucket_store", "why"), [("s3", "NoSuchBucket"), ("gs", "no such bucket")])
def test_a_bucket_that_does_not_exist_is_502(db, shop, bucket_store, why, request, tmp_path):
    remote = request.getfixturevalue(bucket_store)
    path = crawl_into(db, shop, remote.uri, **remote.settings)
    wrong_bucket = proxy_for(tmp_path, f"{bucket_store}://no-such-bucket/shared/", **remote.settings)
    with served(wrong_bucket) as (base, _):
        reply = http("GET", f"{base}/img/{path}?w=10")
    assert reply.status == 502, reply.text
    assert f"{bucket_store}://no-such-bucket/shared/ refused the read ({why})" in reply.json()["detail"]
    assert not [secret for secret in remote.secrets if secret in reply.text]


def test_readers_build_the_keys_scrapys_stores_write(ftp):
    reader = FTPReader(ftp_uri(ftp), Settings(), timeout=1)
    assert reader.key("brands/x/logo-0a1b2c3d.webp") == "/images/brands/x/logo-0a1b2c3d.webp"
    assert FTP_PASSWORD not in reader.identity and reader.identity == f"ftp://127.0.0.1:{ftp.port}/images/"
