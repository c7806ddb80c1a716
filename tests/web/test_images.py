"""GET /img/<path>: the router mounted on a small FastAPI app of the test's own, served by a real
uvicorn on 127.0.0.1: every parameter, bad ones (400), paths out of the store (404), ETag/304,
and one variant asked for by many clients at once, rendered once."""

from __future__ import annotations

import http.client as httplib
import io
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI
from PIL import Image, ImageCms, features
from scrapy.settings import BaseSettings, Settings

from cannaspider.images.paths import product_image_path
from cannaspider.web.images import ImageProxy, image_router
from tests.helpers import project_settings, wait_for
from tests.httpclient import http
from tests.images.bombs import webp_declaring

PID = "6913e3cd444eac3935e928b9"
REL = product_image_path("AZ", "az-deeply-rooted", "Bud Bros", PID, "https://images.dutchie.com/a.jpg")


@contextmanager
def serve(app: FastAPI):
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("img")
    store, cache = root / "store", root / "cache"
    source = Image.new("RGBA", (400, 200), (200, 30, 30, 255))
    source.paste((0, 0, 255, 0), (0, 0, 100, 200))  # a transparent band on the left
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    (store / REL).parent.mkdir(parents=True)
    source.save(store / REL, "WEBP", quality=95, icc_profile=icc)
    # a symlink inside the store that points out of it, and a secret beside the store
    (root / "secret.webp").write_bytes((store / REL).read_bytes())
    os.symlink(root / "secret.webp", store / "products" / "az" / "escape.webp")
    (store / "products" / "az" / "broken.webp").write_bytes(b"RIFF\x00\x00\x00\x00WEBPnot really")
    proxy = ImageProxy(store, cache, max_age=3600, max_pixels=4_000_000, threads=2)
    app = FastAPI()
    app.include_router(image_router(proxy=proxy))
    with serve(app) as (base, port):
        yield {"base": base, "port": port, "proxy": proxy, "cache": cache, "store": store}


def get(site, query: str = "", path: str = REL, headers: dict | None = None):
    return http("GET", f"{site['base']}/img/{path}{query}", headers=headers)


def image(reply) -> Image.Image:
    assert reply.status == 200, reply.text
    return Image.open(io.BytesIO(reply.body))


@pytest.mark.integration
def test_the_original_when_nothing_is_asked(site):
    reply = get(site)
    assert reply.headers["content-type"] == "image/webp"
    assert reply.body == (site["store"] / REL).read_bytes()
    assert reply.headers["cache-control"] == "public, max-age=3600, immutable"


@pytest.mark.integration
@pytest.mark.parametrize(
    ("query", "size"),
    [
        ("?w=200", (200, 100)),
        ("?h=50", (100, 50)),
        ("?w=100&h=100", (100, 100)),  # cover (the default)
        ("?w=100&h=100&fit=cover", (100, 100)),
        ("?w=100&h=100&fit=contain", (100, 100)),
        ("?w=100&h=100&fit=fill", (100, 100)),
        ("?w=100&h=100&fit=inside", (100, 50)),
        ("?w=100&h=100&fit=outside", (200, 100)),
        ("?w=800", (400, 200)),  # never enlarged past the source (#28)
        ("?w=2000&h=2000&fit=contain", (200, 200)),
    ],
)
def test_sizes_and_fits(site, query, size):
    assert image(get(site, query)).size == size


@pytest.mark.integration
def test_cover_crops_and_contain_letterboxes(site):
    cover = image(get(site, "?w=100&h=100&fit=cover")).convert("RGBA")
    assert cover.getpixel((50, 50))[3] == 255  # the centre of the image, no transparent band kept
    contain = image(get(site, "?w=100&h=100&fit=contain")).convert("RGBA")
    assert contain.getpixel((50, 5))[3] == 0 and contain.getpixel((80, 50))[3] == 255  # bars above/below
    fill = image(get(site, "?w=100&h=100&fit=fill")).convert("RGBA")
    assert fill.getpixel((10, 50))[3] == 0  # stretched: the band still a quarter of the width


@pytest.mark.integration
def test_quality_blur_gray(site):
    low, high = get(site, "?w=200&q=5"), get(site, "?w=200&q=100")
    assert len(low.body) < len(high.body)
    gray = image(get(site, "?w=200&gray=1")).convert("RGB")
    r, g, b = gray.getpixel((150, 50))
    assert r == g == b
    sharp = image(get(site, "?w=200")).convert("RGBA")
    blurred = image(get(site, "?w=200&blur=8")).convert("RGBA")
    # across the edge of the transparent band, blur spreads the alpha
    assert sharp.getpixel((52, 50))[3] >= 250 and blurred.getpixel((52, 50))[3] < 230


@pytest.mark.integration
@pytest.mark.parametrize(("fmt", "pil", "media"), [("jpeg", "JPEG", "image/jpeg"), ("png", "PNG", "image/png")])
def test_formats(site, fmt, pil, media):
    reply = get(site, f"?w=100&format={fmt}")
    assert reply.headers["content-type"] == media and image(reply).format == pil


@pytest.mark.integration
def test_avif(site):
    reply = get(site, "?w=100&format=avif")
    if not features.check("avif"):
        assert reply.status == 400 and "AVIF" in reply.json()["detail"]
    else:
        assert reply.headers["content-type"] == "image/avif" and image(reply).format == "AVIF"


@pytest.mark.integration
def test_icc_profile_survives_a_resize(site):
    assert image(get(site, "?w=100")).info.get("icc_profile")


@pytest.mark.integration
@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("?w=0", "w must be from 1 to 4000"),
        ("?w=4001", "w must be from 1 to 4000"),
        ("?h=-5", "h must be a whole number"),
        ("?w=abc", "w must be a whole number"),
        ("?w=1e3", "w must be a whole number"),
        ("?q=0", "q must be from 1 to 100"),
        ("?q=101", "q must be from 1 to 100"),
        ("?fit=stretch", "fit must be one of"),
        ("?blur=0.1", "blur must be from 0.3 to 1000"),
        ("?blur=nan", "blur must be from 0.3 to 1000"),
        ("?blur=x", "blur must be a number"),
        ("?gray=yes", "gray must be 1 or 0"),
        ("?format=gif", "format must be one of"),
        ("?width=200", "unknown parameter 'width'"),
        ("?w=10&w=20", "given twice"),
        ("?w=4000&h=4000&fit=fill", "more than the 4000000 pixels"),
    ],
)
def test_bad_parameters_are_400_with_the_reason(site, query, says):
    reply = get(site, query)
    assert reply.status == 400 and says in reply.json()["detail"], reply.text


@pytest.mark.integration
@pytest.mark.parametrize(
    "raw_path",
    [
        "/img/../../etc/passwd",
        "/img/products/../../secret.webp",
        "/img/%2e%2e/secret.webp",
        "/img/products/%2e%2e%2f%2e%2e%2fsecret.webp",
        "/img/%252e%252e/secret.webp",
        "/img//etc/passwd",
        "/img/%2Fetc%2Fpasswd",
        "/img/products\\..\\secret.webp",
        "/img/products/az/escape.webp",  # a symlink out of the store
        "/img/products/az/missing.webp",
        "/img/" + REL.replace(".webp", ".png"),
        "/img/" + REL.upper(),
        "/img/products/az/%00.webp",
        "/img/",
    ],
)
def test_paths_outside_the_store_or_unknown_are_404(site, raw_path):
    conn = httplib.HTTPConnection("127.0.0.1", site["port"], timeout=10)
    conn.putrequest("GET", raw_path, skip_accept_encoding=True)
    conn.endheaders()
    reply = conn.getresponse()
    body = reply.read()
    conn.close()
    assert reply.status == 404, (raw_path, reply.status, body)
    assert b"RIFF" not in body


@pytest.mark.integration
def test_a_corrupt_stored_file_is_502_with_the_reason_and_the_worker_serves_on(site):
    truncated = (site["store"] / REL).read_bytes()[:60]
    (site["store"] / "products" / "az" / "truncated.webp").write_bytes(truncated)
    for name in ("broken", "truncated"):
        reply = get(site, "?w=10", path=f"products/az/{name}.webp")
        assert reply.status == 502, reply.text
        detail = reply.json()["detail"]
        assert detail.startswith("the stored image cannot be rendered: ") and str(site["store"]) not in detail
    assert image(get(site, "?w=11")).size == (11, 6)  # the same workers render the next one


@pytest.mark.integration
def test_a_stored_webp_declaring_too_many_pixels_is_refused_from_its_header(site):
    folder = site["store"] / "products" / "az"
    (folder / "bomb-16383.webp").write_bytes(webp_declaring(16383))
    # 30000² only fits the extended header's canvas (24 bits); the frame inside says otherwise
    canvas = b"VP8X" + (10).to_bytes(4, "little") + bytes(4) + (29999).to_bytes(3, "little") * 2
    frame = webp_declaring(16383)[12:]
    (folder / "bomb-30000.webp").write_bytes(
        b"RIFF" + (4 + len(canvas) + len(frame)).to_bytes(4, "little") + b"WEBP" + canvas + frame
    )
    big = get(site, "?w=100", path="products/az/bomb-16383.webp")
    assert big.status == 502 and "16383x16383 pixels, more than the 50000000" in big.json()["detail"], big.text
    huge = get(site, "?w=100", path="products/az/bomb-30000.webp")
    assert huge.status == 502 and "not a readable webp" in huge.json()["detail"], huge.text


@pytest.mark.integration
def test_a_file_stored_meanwhile_is_served_at_once_and_a_replaced_one_within_the_ttl(site):
    late = site["store"] / "products" / "az" / "late.webp"
    assert get(site, "?w=10", path="products/az/late.webp").status == 404
    Image.new("RGB", (40, 20)).save(late, "WEBP")
    assert image(get(site, "?w=10", path="products/az/late.webp")).size == (10, 5)  # misses are not kept
    Image.new("RGB", (40, 40)).save(late, "WEBP")
    os.utime(late, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # a new mtime, whatever the clock's grain
    # asked for all along: within LOCATE_TTL_S the old answer, then the new file's (not libvips'
    # cached load of the old one: images/render.py revalidates)
    wait_for(lambda: image(get(site, "?w=10", path="products/az/late.webp")).size == (10, 10), "the new file served")


@pytest.mark.integration
def test_etag_and_304(site):
    first = get(site, "?w=120")
    etag = first.headers["etag"]
    assert etag.startswith('"') and first.headers["cache-control"].endswith("immutable")
    again = get(site, "?w=120", headers={"If-None-Match": etag})
    assert again.status == 304 and again.body == b"" and again.headers["etag"] == etag
    assert get(site, "?w=120", headers={"If-None-Match": f'W/{etag}, "other"'}).status == 304
    assert get(site, "?w=121", headers={"If-None-Match": etag}).status == 200  # another variant
    assert get(site, "?w=120", headers={"If-None-Match": '"stale"'}).status == 200


@pytest.mark.integration
def test_one_variant_asked_for_at_once_is_rendered_once_and_cached_on_disk(site):
    proxy: ImageProxy = site["proxy"]
    before = proxy.renders
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda _: get(site, "?w=333&blur=2"), range(16)))
    assert {r.status for r in replies} == {200} and len({r.body for r in replies}) == 1
    assert proxy.renders == before + 1
    cached = list(Path(site["cache"]).rglob("*.webp"))
    assert any(p.read_bytes() == replies[0].body for p in cached)
    # a new process (empty memory) serves it from the disk cache, without rendering
    fresh = ImageProxy(site["store"], site["cache"], threads=1)
    app = FastAPI()
    app.include_router(image_router(proxy=fresh))
    with serve(app) as (base, _):
        assert http("GET", f"{base}/img/{REL}?w=333&blur=2").body == replies[0].body
    assert fresh.renders == 0


def test_router_from_settings_reads_images_store(tmp_path):
    store = tmp_path / "s"
    (store / REL).parent.mkdir(parents=True)
    Image.new("RGB", (10, 10)).save(store / REL, "WEBP")
    router = image_router(
        Settings({**project_settings(), "IMAGES_STORE": str(store), "CANNASPIDER_DATA_DIR": str(tmp_path)})
    )
    proxy = router.image_proxy  # type: ignore[attr-defined]
    assert proxy.root == store.resolve() and proxy.cache_dir == tmp_path / "image-cache"
    remote = image_router(
        Settings({**project_settings(), "IMAGES_STORE": "s3://bucket/images/", "CANNASPIDER_DATA_DIR": str(tmp_path)})
    )
    assert remote.image_proxy.unsupported_backend is None and remote.image_proxy.root is None  # type: ignore[attr-defined]
    odd = image_router(
        Settings({**project_settings(), "IMAGES_STORE": "sftp://host/images/", "CANNASPIDER_DATA_DIR": str(tmp_path)})
    )
    assert "reads a folder, s3://, gs:// or ftp://" in odd.image_proxy.unsupported_backend  # type: ignore[attr-defined]


def test_router_from_the_project_settings(tmp_path, monkeypatch):
    project = BaseSettings()
    project.setmodule("cannaspider.settings", priority="project")
    project.set("CANNASPIDER_DATA_DIR", str(tmp_path), priority="cmdline")
    proxy = image_router(project).image_proxy  # type: ignore[attr-defined]
    assert proxy.root == (tmp_path / "images").resolve() and proxy.unsupported_backend is None
    assert proxy.pool._max_workers == (os.cpu_count() or 2)
    assert proxy.variants.max_bytes == 2 * 1024**3 and proxy.originals is None  # a local store is read in place
    assert proxy.backend_retry_s == 5.0 and proxy.backend_pool._max_workers == 8
