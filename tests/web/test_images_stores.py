"""/img over a shared store: the pipeline writes through Scrapy's own FTPFilesStore and
S3FilesStore (a real FTP server and moto's S3 server, both on 127.0.0.1) and /img, built from the
same settings, serves the originals and resized variants from that store; a store that is down or
refuses us is a 503/502 that names the store and never a credential; paths that leave the store
never reach it. gs:// has no local server to test against: its key building is tested in
tests/images/test_stores.py."""

from __future__ import annotations

import asyncio
import http.client as httplib
import io
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi import FastAPI
from PIL import Image
from scrapy.settings import Settings

from cannaspider.images.stores import FTPReader, S3Reader
from cannaspider.web.images import ImageProxy, image_router
from tests.helpers import add_store
from tests.httpclient import http
from tests.pipelines.test_images import PID, Harness, local_paths, product
from tests.web.test_images import serve

# pyftpdlib 2.2 still runs on asyncore/asynchat on Python 3.11 (only its import warns)
pytestmark = pytest.mark.filterwarnings("ignore:The asyn(core|chat) module is deprecated:DeprecationWarning")

FTP_USER, FTP_PASSWORD = "img-writer", "ftp-s3cret-pw"
AWS_KEY, AWS_SECRET = "AKIATESTIMAGES", "aws-s3cret-key-for-tests"


# --- the stores, on loopback ---------------------------------------------------------------------


class FTPServer:
    def __init__(self, home: Path):
        from pyftpdlib.authorizers import DummyAuthorizer
        from pyftpdlib.handlers import FTPHandler
        from pyftpdlib.servers import ThreadedFTPServer

        logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
        authorizer = DummyAuthorizer()
        authorizer.add_user(FTP_USER, FTP_PASSWORD, str(home), perm="elradfmwMT")
        handler = type("Handler", (FTPHandler,), {"authorizer": authorizer, "passive_ports": None})
        self.home = home
        self.server = ThreadedFTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"timeout": 0.2}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.close_all()
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
def s3():
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
    reader.client.create_bucket(Bucket="images")
    try:
        yield {"settings": settings, "client": reader.client, "server": server, "port": port}
    finally:
        server.stop()


@pytest.fixture
def shop(db, sandbox):
    """A sandbox store in the database: its products' images are the sandbox's."""
    s = sandbox.stores("AZ")[0]
    return {"id": add_store(db, s), "base": sandbox.urls.base}


def ftp_uri(server: FTPServer, password: str = FTP_PASSWORD) -> str:
    return f"ftp://{FTP_USER}:{password}@127.0.0.1:{server.port}/images/"


def proxy_for(tmp_path: Path, uri: str, **settings) -> ImageProxy:
    proxy = image_router(
        Settings(
            {"IMAGES_STORE": uri, "IMG_CACHE_DIR": str(tmp_path / "img-cache"), "IMG_STORE_TIMEOUT_S": 3, **settings}
        )
    ).image_proxy  # type: ignore[attr-defined]
    assert proxy.unsupported_store is None and proxy.root is None
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


# --- ftp:// ----------------------------------------------------------------------------------------


def test_ftp_the_pipeline_writes_and_img_serves_resized_variants(db, shop, ftp, tmp_path):
    path = crawl_into(db, shop, ftp_uri(ftp))
    on_server = ftp.home / "images" / path  # where FTPFilesStore put it
    assert webp(on_server.read_bytes()).size == (320, 320)

    proxy = proxy_for(tmp_path, ftp_uri(ftp))
    spy = proxy.store = Spy(proxy.store)
    with served(proxy) as (base, _):
        original = http("GET", f"{base}/img/{path}")
        assert original.status == 200 and original.body == on_server.read_bytes()
        small = http("GET", f"{base}/img/{path}?w=100&format=webp")
        assert small.status == 200 and webp(small.body).size == (100, 100)
        assert small.headers["cache-control"].endswith("immutable")
        again = http("GET", f"{base}/img/{path}?w=100&format=webp", headers={"If-None-Match": small.headers["etag"]})
        assert again.status == 304 and again.body == b""
        jpeg = http("GET", f"{base}/img/{path}?w=50&h=20&format=jpeg")
        assert jpeg.status == 200 and Image.open(io.BytesIO(jpeg.body)).size == (50, 20)
        # one read from the store: the original is kept in the local cache folder
        assert spy.paths == [path] and proxy.fetches == 1
        assert http("GET", f"{base}/img/products/az/nothing-here/x/{PID}/image-00000000.webp").status == 404
    assert len(list((tmp_path / "img-cache" / "originals").rglob("*.webp"))) == 1
    assert len(list((tmp_path / "img-cache" / "variants").rglob("*.*"))) == 2  # w=100 webp, 50x20 jpeg


def test_ftp_credentials_from_the_settings_as_scrapy_takes_them(db, shop, ftp, tmp_path):
    uri = f"ftp://127.0.0.1:{ftp.port}/images/"
    credentials = {"FTP_USER": FTP_USER, "FTP_PASSWORD": FTP_PASSWORD}
    path = crawl_into(db, shop, uri, **credentials)
    proxy = proxy_for(tmp_path, uri, **credentials)
    with served(proxy) as (base, _):
        assert webp(http("GET", f"{base}/img/{path}?h=64").body).size == (64, 64)


def test_ftp_store_down_is_503_and_a_refused_login_502_without_the_password(db, shop, ftp, tmp_path):
    path = crawl_into(db, shop, ftp_uri(ftp))
    proxy = proxy_for(tmp_path / "a", ftp_uri(ftp))
    proxy.store_retry_s = 0.2
    with served(proxy) as (base, _):
        cached = http("GET", f"{base}/img/{path}?w=80")
        assert cached.status == 200
        ftp.stop()
        # a new variant while the store is down: its original is in the local cache folder
        assert http("GET", f"{base}/img/{path}?w=81").status == 200
    # a process with an empty cache, the store down
    cold = proxy_for(tmp_path / "b", ftp_uri(ftp))
    with served(cold) as (base, _):
        reply = http("GET", f"{base}/img/{path}?w=80")
        assert reply.status == 503, reply.text
        detail = reply.json()["detail"]
        assert "image store is unavailable" in detail and f"127.0.0.1:{ftp.port}/images/" in detail
        assert "cannot be reached" in detail and FTP_PASSWORD not in detail and FTP_USER not in detail
        assert reply.headers["retry-after"]
        assert http("GET", f"{base}/img/{path}?w=80").status == 503  # still down: at once, no crash
    assert cold.renders == 0


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
    spy = proxy.store = Spy(proxy.store)
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


# --- s3:// -----------------------------------------------------------------------------------------


def test_s3_the_pipeline_writes_and_img_serves_resized_variants(db, shop, s3, tmp_path):
    path = crawl_into(db, shop, "s3://images/shared/", **s3["settings"])
    stored = s3["client"].get_object(Bucket="images", Key=f"shared/{path}")["Body"].read()
    assert webp(stored).size == (320, 320)

    proxy = proxy_for(tmp_path, "s3://images/shared/", **s3["settings"])
    spy = proxy.store = Spy(proxy.store)
    with served(proxy) as (base, _):
        assert http("GET", f"{base}/img/{path}").body == stored
        small = http("GET", f"{base}/img/{path}?w=120&fit=inside&format=png")
        assert small.status == 200 and small.headers["content-type"] == "image/png"
        assert Image.open(io.BytesIO(small.body)).size == (120, 120)
        etag = small.headers["etag"]
        again = http("GET", f"{base}/img/{path}?w=120&fit=inside&format=png", headers={"If-None-Match": etag})
        assert again.status == 304
        assert http("GET", f"{base}/img/products/az/none/x/{PID}/image-00000000.webp").status == 404
        assert http("GET", f"{base}/img/{path}?w=0").status == 400
    assert spy.paths.count(path) == 1

    # a second node: its own cache, the same store, the same ETag
    other = proxy_for(tmp_path / "node2", "s3://images/shared/", **s3["settings"])
    with served(other) as (base, _):
        assert http("GET", f"{base}/img/{path}?w=120&fit=inside&format=png").headers["etag"] == etag


def test_s3_many_variants_of_one_image_at_once_read_it_once_and_render_each_once(db, shop, s3, tmp_path):
    path = crawl_into(db, shop, "s3://images/shared/", **s3["settings"])
    proxy = proxy_for(tmp_path, "s3://images/shared/", **s3["settings"])
    with served(proxy) as (base, _):
        queries = [f"?w={w}" for w in (40, 41, 42, 43)] * 4
        with ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(lambda q: http("GET", f"{base}/img/{path}{q}"), queries))
    assert {r.status for r in replies} == {200}
    assert proxy.fetches == 1 and proxy.renders == 4


def test_s3_store_down_is_503_and_a_bad_key_or_bucket_502_without_the_secret(db, shop, s3, tmp_path):
    path = crawl_into(db, shop, "s3://images/shared/", **s3["settings"])
    wrong_bucket = proxy_for(tmp_path / "a", "s3://no-such-bucket/shared/", **s3["settings"])
    with served(wrong_bucket) as (base, _):
        reply = http("GET", f"{base}/img/{path}?w=10")
    assert reply.status == 502 and "s3://no-such-bucket/shared/ refused the read (NoSuchBucket)" in reply.text

    s3["server"].stop()
    start = time.monotonic()
    down = proxy_for(tmp_path / "b", "s3://images/shared/", **s3["settings"])
    with served(down) as (base, _):
        reply = http("GET", f"{base}/img/{path}?w=10")
    assert reply.status == 503, reply.text
    assert "s3://images/shared/ cannot be reached" in reply.json()["detail"]
    assert AWS_SECRET not in reply.text and AWS_KEY not in reply.text
    assert time.monotonic() - start < 30


def test_readers_build_the_keys_scrapys_stores_write(ftp):
    reader = FTPReader(ftp_uri(ftp), Settings(), timeout=1)
    assert reader.key("brands/x/logo-0a1b2c3d.webp") == "/images/brands/x/logo-0a1b2c3d.webp"
    assert FTP_PASSWORD not in reader.identity and reader.identity == f"ftp://127.0.0.1:{ftp.port}/images/"
