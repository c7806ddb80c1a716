"""Every image fetched once per source (issue 31, docs/images.md "One download per source"): stores
that list one image URL share one download and one stored object, across crawls and concurrent
crawlers (the claim in image_sources); a changed URL is fetched; a failed or abandoned claim is
taken again by a later crawl; /img serves every store's path; migration 029 maps the files of
existing stores without a download. Real PostgreSQL, the sandbox's image CDN, a real uvicorn."""

from __future__ import annotations

import asyncio
import io
import shutil
from pathlib import Path

import psycopg
import pytest
from PIL import Image
from scrapy.settings import Settings

from cannaspider import settings as defaults
from cannaspider.db import migrations
from cannaspider.images.paths import product_image_path
from cannaspider.web.app import create_app
from sandbox.forward_proxy import ForwardProxy
from tests.helpers import add_store, project_settings, run_scrapy
from tests.httpclient import http
from tests.pipelines.test_images import Harness, image_requests, local_paths, product
from tests.web.conftest import Service

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stores(db, sandbox):
    listed = sandbox.stores("AZ")[:3]
    return [{"id": add_store(db, s), "slug": s["cName"]} for s in listed], sandbox.urls.base


def sources(db: str) -> list[tuple]:
    with psycopg.connect(db) as conn:
        return conn.execute("SELECT url, object_key, status, attempts FROM image_sources ORDER BY url").fetchall()


def mapped(db: str) -> dict[str, str]:
    with psycopg.connect(db) as conn:
        rows = conn.execute("SELECT p.path, s.object_key FROM image_paths p JOIN image_sources s USING (source_hash)")
        return dict(rows.fetchall())


def test_stores_listing_one_image_url_share_one_download_across_crawls(db, sandbox, stores, tmp_path):
    (a, b, c), base = stores
    url = f"{base}/images/products/chain-photo.png"
    first = Harness(db, tmp_path / "images")
    asyncio.run(first.crawl([product(a["id"], "a" * 24, url), product(b["id"], "b" * 24, url)]))
    assert first.engine.urls == [url] and image_requests(sandbox) == {"products/chain-photo": 1}
    # each store keeps its own path (the seed's layout: no URL, API or page changes)
    path_a, path_b = local_paths(db, a["id"])["a" * 24], local_paths(db, b["id"])["b" * 24]
    assert path_a == product_image_path("AZ", a["slug"], "Bud Bros", "a" * 24, url)
    assert path_b == product_image_path("AZ", b["slug"], "Bud Bros", "b" * 24, url)
    # one object, stored once at the path of whichever store's query came back first (the two
    # stores' queries race: images.py, ImagePlanner._load); both paths mapped to it
    [stored] = [p.relative_to(tmp_path / "images").as_posix() for p in (tmp_path / "images").rglob("*.webp")]
    assert stored in (path_a, path_b)
    assert sources(db) == [(url, stored, "stored", 1)]
    assert mapped(db) == {path_a: stored, path_b: stored}
    assert first.stat("images_stored") == 1 and first.stat("images_shared") == 1
    # another crawl, a third store listing it: mapped, not fetched
    later = Harness(db, tmp_path / "images")
    asyncio.run(later.crawl([product(c["id"], "c" * 24, url.replace("http://", "HTTP://", 1))]))
    assert later.engine.urls == [] and image_requests(sandbox) == {"products/chain-photo": 1}
    assert mapped(db)[local_paths(db, c["id"])["c" * 24]] == stored


def test_two_crawlers_at_once_fetch_a_source_once_and_the_other_maps_it_next_crawl(db, sandbox, stores, tmp_path):
    """Two nodes crawling two stores of one chain at the same moment: the claim (INSERT ... ON
    CONFLICT) gives the source to one; the other neither fetches nor waits, and its next crawl maps
    the stored source."""
    (a, b, _), base = stores
    url = f"{base}/images/products/race.png"
    sandbox.faults({"kind": "slow", "operation": "image", "delay": 0.5})
    one, two = Harness(db, tmp_path / "images"), Harness(db, tmp_path / "images")

    async def both() -> None:
        await asyncio.gather(one.crawl([product(a["id"], "a" * 24, url)]), two.crawl([product(b["id"], "b" * 24, url)]))

    asyncio.run(both())
    assert image_requests(sandbox) == {"products/race": 1}
    assert sorted([one.stat("images_stored"), two.stat("images_stored")]) == [0, 1]
    assert one.stat("images_source_elsewhere") + two.stat("images_source_elsewhere") == 1
    again = Harness(db, tmp_path / "images")
    asyncio.run(again.crawl([product(a["id"], "a" * 24, url), product(b["id"], "b" * 24, url)]))
    assert image_requests(sandbox) == {"products/race": 1}
    assert all(local_paths(db, s["id"]) for s in (a, b)) and len(set(mapped(db).values())) == 1


def test_a_changed_image_url_is_fetched(db, sandbox, stores, tmp_path):
    (a, _, _), base = stores
    old, new = f"{base}/images/products/v1.png", f"{base}/images/products/v2.png"
    asyncio.run(Harness(db, tmp_path / "images").crawl([product(a["id"], "a" * 24, old)]))
    changed = Harness(db, tmp_path / "images")
    asyncio.run(changed.crawl([product(a["id"], "a" * 24, new)]))
    assert changed.engine.urls == [new]
    assert local_paths(db, a["id"])["a" * 24] == product_image_path("AZ", a["slug"], "Bud Bros", "a" * 24, new)
    assert image_requests(sandbox) == {"products/v1": 1, "products/v2": 1}


def test_a_failed_fetch_is_released_and_fetched_by_a_later_crawl(db, sandbox, stores, tmp_path):
    (a, b, _), base = stores
    url = f"{base}/images/products/flaky.png"
    failing = Harness(db, tmp_path / "images")

    async def refused(request):
        raise ConnectionRefusedError("connection refused")

    failing.engine.download_async = refused  # type: ignore[method-assign]
    asyncio.run(failing.crawl([product(a["id"], "a" * 24, url), product(b["id"], "b" * 24, url)]))
    # both stores' products failed (the second store's with the first's attempt when it was still
    # out, else by an attempt of its own: a failure is released at once); the claim is not held
    assert failing.stat("images_failed/connectionrefusederror") == 2
    [(_, _, status, tried)] = sources(db)
    assert status == "failed" and tried in (1, 2) and local_paths(db, a["id"]) == {"a" * 24: None}
    later = Harness(db, tmp_path / "images")
    asyncio.run(later.crawl([product(a["id"], "a" * 24, url), product(b["id"], "b" * 24, url)]))
    assert later.engine.urls == [url] and [(s[2], s[3]) for s in sources(db)] == [("stored", tried + 1)]
    assert local_paths(db, a["id"])["a" * 24] and local_paths(db, b["id"])["b" * 24]


def test_a_claim_whose_crawler_died_is_taken_over_once_its_lease_runs_out(db, sandbox, stores, tmp_path, sql):
    (a, _, _), base = stores
    url = f"{base}/images/products/orphan.png"
    sql(
        "INSERT INTO image_sources (source_hash, url, object_key, status, claim, claimed_at, attempts) "
        "VALUES (image_source_hash(%s), %s, 'products/x/y.webp', 'fetching', 'dead', now(), 1)",
        (url, url),
    )
    # held by a live claimer (within its lease): not fetched, left to a later crawl
    held = Harness(db, tmp_path / "images")
    asyncio.run(held.crawl([product(a["id"], "a" * 24, url)]))
    assert held.engine.urls == [] and held.stat("images_source_elsewhere") == 1
    # its claimer died: the lease ran out, the next crawl takes it over
    sql("UPDATE image_sources SET claimed_at = now() - interval '1 hour'")
    later = Harness(db, tmp_path / "images")
    asyncio.run(later.crawl([product(a["id"], "a" * 24, url)]))
    assert later.engine.urls == [url] and [(s[2], s[3]) for s in sources(db)] == [("stored", 2)]


def test_img_serves_every_stores_path_of_one_stored_source(db, sandbox, stores, tmp_path):
    (a, b, _), base = stores
    url = f"{base}/images/products/served.png"
    asyncio.run(
        Harness(db, tmp_path / "images").crawl([product(a["id"], "a" * 24, url), product(b["id"], "b" * 24, url)])
    )
    path_a, path_b = local_paths(db, a["id"])["a" * 24], local_paths(db, b["id"])["b" * 24]
    # one object, at the path of whichever store's query came back first: the other path is mapped
    on_disk = [(tmp_path / "images" / p).exists() for p in (path_a, path_b)]
    assert sorted(on_disk) == [False, True]
    mapped_path = path_b if on_disk[0] else path_a
    settings = Settings(
        {**project_settings(), "IMAGES_STORE": str(tmp_path / "images"), "IMG_CACHE_DIR": str(tmp_path / "cache")}
    )
    service = Service(db, None)
    service.server.config.app = create_app(db, None, pool_max_size=defaults.DB_POOL_MAX_SIZE, settings=settings)
    with service:
        originals = [http("GET", f"{service.base}/img/{p}") for p in (path_a, path_b)]
        resized = http("GET", f"{service.base}/img/{mapped_path}?w=100&format=png")
        missing = http("GET", f"{service.base}/img/{mapped_path.replace('/image-', '/image-0')}")
    assert [r.status for r in originals] == [200, 200] and originals[0].body == originals[1].body
    assert resized.status == 200 and Image.open(io.BytesIO(resized.body)).size == (100, 100)
    assert missing.status == 404


def up_to(version: str, tmp_path: Path) -> Path:
    folder = tmp_path / f"upto{version}"
    folder.mkdir()
    for path in (ROOT / "migrations").glob("*.sql"):
        if path.name[:3] <= version:
            shutil.copy(path, folder / path.name)
    return folder


def test_migration_maps_existing_stores_files_to_sources_without_a_download(empty_database, sandbox, tmp_path):
    """Stores crawled before migration 029 each hold their own file of a shared URL: the migration
    makes one of them the source and maps every path to it; the next crawls download nothing they
    have, nor anything another store has, and a product whose URL changed since is fetched."""
    db, base = empty_database, sandbox.urls.base
    migrations.apply(db, up_to("028", tmp_path), log=lambda _: None)
    shared, gone, changed = (f"{base}/images/products/{n}.png" for n in ("shared", "gone", "changed"))
    store_dir = tmp_path / "images"
    old = {}  # what the old pipeline stored: one file per store and product
    with psycopg.connect(db, autocommit=True) as conn:
        for n in range(3):
            d = conn.execute(
                "INSERT INTO dispensaries (name, slug, state, platform_dispensary_id) VALUES (%s, %s, 'AZ', %s) "
                "RETURNING id",
                (f"S{n}", f"s{n}", f"{n:024x}"),
            ).fetchone()[0]
            pid = f"{n + 10:024x}"
            image = changed if n == 2 else shared
            path = product_image_path("AZ", f"s{n}", "Bud Bros", pid, gone if n == 2 else shared)
            (store_dir / path).parent.mkdir(parents=True)
            Image.new("RGB", (8, 8)).save(store_dir / path, "WEBP")
            conn.execute(
                "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, image_url, local_image_path)"
                " VALUES (%s, %s, 'Name', %s, %s)",
                (d, pid, image, path),
            )
            old[d] = (pid, image, path)
    migrations.apply(db, ROOT / "migrations", log=lambda _: None)
    (d0, (p0, _, path0)), (d1, (p1, _, path1)), (d2, (p2, _, path2)) = old.items()
    assert sources(db) == [(shared, path0, "stored", 0)]
    assert mapped(db) == {path0: path0, path1: path0}  # the changed product's old file is not a source
    with psycopg.connect(db, autocommit=True) as conn:
        d3 = conn.execute(
            "INSERT INTO dispensaries (name, slug, state, platform_dispensary_id) VALUES ('S3', 's3', 'AZ', %s) "
            "RETURNING id",
            ("3" * 24,),
        ).fetchone()[0]
    crawl = Harness(db, store_dir)
    items = [product(d0, p0, shared), product(d1, p1, shared), product(d2, p2, changed)]
    asyncio.run(crawl.crawl([*items, product(d3, "d" * 24, shared)]))  # a new store of the chain too
    assert crawl.engine.urls == [changed]  # only the changed image
    assert crawl.stat("images_skipped_has_image") == 2 and mapped(db)[local_paths(db, d3)["d" * 24]] == path0
    assert image_requests(sandbox) == {"products/changed": 1}


def test_images_go_through_the_pool_images_proxy_pool_names_and_the_api_never_does(db, sandbox, crawl, scrapy_env, sql):
    """IMAGES_PROXY_POOL: an operator's cheaper pool carries every image and logo; GraphQL stays on
    the crawl's pool; without the setting images take the store's session (the test above)."""
    d = add_store(db, sandbox.stores("AZ")[0])
    cheap = ForwardProxy(name="cheap").start()
    try:
        added = run_scrapy("proxies", "add", "--pool", "images", cheap.url, env=scrapy_env)
        assert added.returncode == 0 and "[pool images]" in added.stdout, added.stderr[-2000:]
        result = crawl("product_resync", "-s", "IMAGES_PROXY_POOL=images", dispensary_id=d)
    finally:
        cheap.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    counts = sandbox.requests()
    images = sum(n for k, n in counts.items() if k.startswith("image:"))
    assert images and counts.get("image via:cheap") == images and "image via:sandbox" not in counts
    assert counts.get("via:sandbox") and "via:cheap" not in counts  # the API never took the images pool
    assert sql("SELECT count(*) FROM store_products WHERE dispensary_id = %s AND local_image_path IS NULL "
               "AND image_url IS NOT NULL", (d,)) == [(0,)]  # fmt: skip
    listed = run_scrapy("proxies", "list", env=scrapy_env)
    assert "[pool images]" in listed.stdout


def test_an_images_pool_with_no_active_proxy_fails_the_images_alone(db, sandbox, crawl, sql):
    d = add_store(db, sandbox.stores("AZ")[0])
    result = crawl("product_resync", "-s", "IMAGES_PROXY_POOL=images", dispensary_id=d)
    assert result.returncode == 0, result.stderr[-3000:]
    assert not any(k.startswith("image:") for k in sandbox.requests())
    assert "stealth_no_proxy/images" in result.stderr
    assert sql("SELECT status FROM crawl_runs WHERE dispensary_id = %s", (d,)) == [("complete",)]
