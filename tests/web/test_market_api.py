"""GET /api/brands, /api/brands/{id}, /api/products/{canonical_id} over products the real
pipelines wrote (the sandbox catalog's, normalized and written by ProductWriterPipeline), checked
against the tables."""

from __future__ import annotations

import asyncio
import inspect
from statistics import median

import pytest

from cannaspider.items import RawProduct
from cannaspider.pipelines.normalize import NormalizeProductPipeline
from cannaspider.pipelines.product_writer import ProductWriterPipeline
from sandbox.catalog import Catalog, CatalogConfig
from tests.analytics.test_refresh import refresh
from tests.helpers import project_crawler
from tests.httpclient import http

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

CATALOG = Catalog(CatalogConfig())
STORES = [s for s in CATALOG.stores if s.state == "AZ"][:3] + [s for s in CATALOG.stores if s.state == "NV"][:2]


@pytest.fixture
def market(db, monkeypatch, sql):
    """Five stores (three in AZ, two in NV), their menus written; one product out of stock."""
    monkeypatch.setenv("DATABASE_URL", db)
    ids = [
        sql(
            "INSERT INTO dispensaries (name, state, city, platform_dispensary_id) VALUES (%s, %s, %s, %s) RETURNING id",
            (s.name, s.state, s.city, s.id),
        )[0][0]
        for s in STORES
    ]

    async def write():
        crawler = project_crawler()
        normalize = NormalizeProductPipeline.from_crawler(crawler)
        writer = ProductWriterPipeline.from_crawler(crawler)
        for d, store in zip(ids, STORES, strict=True):
            for index in CATALOG.product_indices(store, 0)[:120]:
                raw = CATALOG.product(store, index, 0, "http://127.0.0.1:1")
                result = writer.process_item(normalize.process_item(RawProduct(d, None, raw)))
                if inspect.isawaitable(result):
                    await result
        await writer.close_spider()
        await writer.store.close()

    asyncio.run(write())
    refresh(db)  # GET /api/brands reads the view the analytics refresh keeps (market_brands_now)
    return ids


def top_shared_product(sql) -> int:
    return sql(
        "SELECT canonical_product_id FROM store_products GROUP BY 1 "
        "ORDER BY count(DISTINCT dispensary_id) DESC, 1 LIMIT 1"
    )[0][0]


def test_a_canonical_product_lists_every_store_that_sells_it(api, market, sql):
    product = top_shared_product(sql)
    sql(
        "UPDATE store_products SET stock_status = 'oos', is_in_stock = false WHERE id = "
        "(SELECT max(id) FROM store_products WHERE canonical_product_id = %s)",
        (product,),
    )
    body = http("GET", f"{api.base}/api/products/{product}").json()
    rows = sql(
        "SELECT dispensary_id, provider_product_id, price_rec::float8, unit_price::float8, stock_status "
        "FROM store_products WHERE canonical_product_id = %s",
        (product,),
    )
    assert len(rows) >= 2
    got = {(s["dispensary_id"], s["provider_product_id"]): s for s in body["stores"]}
    assert set(got) == {(d, p) for d, p, *_ in rows}
    for d, p, price, unit_price, stock in rows:
        assert (got[(d, p)]["price_rec"], got[(d, p)]["unit_price"], got[(d, p)]["stock_status"]) == (
            price,
            unit_price,
            stock,
        )
    assert body["stores"][-1]["stock_status"] == "oos"  # in stock first
    brand = sql(
        "SELECT b.id, b.name FROM canonical_products cp JOIN brands b ON b.id = cp.canonical_brand_id WHERE cp.id = %s",
        (product,),
    )[0]
    assert (body["brand_id"], body["brand"]) == brand
    assert http("GET", f"{api.base}/api/products/999999").status == 404
    assert http("GET", f"{api.base}/api/products/abc").status == 422


def test_brands_by_stores_carrying_them_with_their_median_price(api, market, sql):
    body = http("GET", f"{api.base}/api/brands").json()
    assert len(body) == len(sql("SELECT DISTINCT canonical_brand_id FROM store_products"))
    assert [b["stores"] for b in body] == sorted((b["stores"] for b in body), reverse=True)
    for b in body[:5]:
        prices = [
            r[0]
            for r in sql(
                "SELECT price_rec::float8 FROM store_products WHERE canonical_brand_id = %s AND price_rec IS NOT NULL",
                (b["id"],),
            )
        ]
        assert b["median_price"] == pytest.approx(median(prices))
        states = dict(
            sql(
                "SELECT d.state, count(DISTINCT sp.dispensary_id) FROM store_products sp "
                "JOIN dispensaries d ON d.id = sp.dispensary_id WHERE sp.canonical_brand_id = %s GROUP BY 1",
                (b["id"],),
            )
        )
        assert b["stores_by_state"] == states and b["stores"] == sum(states.values())
    nv = http("GET", f"{api.base}/api/brands?state=nv").json()
    assert all(set(b["stores_by_state"]) == {"NV"} for b in nv) and nv
    for bad in ("state=ZZZ", "state=1x", "limit=0", "limit=1001"):
        reply = http("GET", f"{api.base}/api/brands?{bad}")
        assert reply.status == 422 and reply.json()["detail"], bad


def test_one_brand_with_its_spellings_states_and_categories(api, market, sql):
    brand_id = sql("SELECT coalesce(canonical_brand_id, id) FROM brands GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1")[
        0
    ][0]
    body = http("GET", f"{api.base}/api/brands/{brand_id}").json()
    spellings = [
        r[0] for r in sql("SELECT DISTINCT name FROM brands WHERE coalesce(canonical_brand_id, id) = %s", (brand_id,))
    ]
    assert sorted(body["spellings"]) == sorted(spellings)
    by_state = {s["state"]: s for s in body["states"]}
    for state, stores, per_g in sql(
        "SELECT d.state, count(DISTINCT sp.dispensary_id), "
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY sp.unit_price) FILTER (WHERE sp.unit_price_basis = 'g') "
        "FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id "
        "WHERE sp.canonical_brand_id = %s GROUP BY 1",
        (brand_id,),
    ):
        assert by_state[state]["stores"] == stores
        assert by_state[state]["median_price_per_g"] == (pytest.approx(per_g) if per_g is not None else None)
    assert {c["category"] for c in body["categories"]} == {
        r[0] for r in sql("SELECT DISTINCT category FROM store_products WHERE canonical_brand_id = %s", (brand_id,))
    }
    assert http("GET", f"{api.base}/api/brands/999999").status == 404
    # a merged brand is not a canonical one
    merged = sql("SELECT id FROM brands WHERE canonical_brand_id IS NOT NULL LIMIT 1")
    if merged:
        assert http("GET", f"{api.base}/api/brands/{merged[0][0]}").status == 404


def test_the_endpoints_are_in_openapi(api):
    paths = http("GET", api.base + "/openapi.json").json()["paths"]
    assert {"/api/brands", "/api/brands/{brand_id}", "/api/products/{canonical_id}"} <= set(paths)


def test_a_store_whose_menu_is_empty_carries_no_brand(db, api, market, sql):
    """Issue #28, 1 (migrations/031_empty_menus_now.sql): the NV stores' menus are empty (their
    products keep the stock they had): after the next refresh no brand is carried in NV, in the
    list, by state or by category; their menus back, they carry their brands again."""
    nv = [d for d, s in zip(market, STORES, strict=True) if s.state == "NV"]
    brand_id = sql(
        "SELECT canonical_brand_id FROM store_products WHERE dispensary_id = ANY(%s) GROUP BY 1 "
        "ORDER BY count(DISTINCT dispensary_id) DESC, 1 LIMIT 1",
        (nv,),
    )[0][0]
    before = http("GET", f"{api.base}/api/brands/{brand_id}").json()
    assert "NV" in {s["state"] for s in before["states"]} and http("GET", f"{api.base}/api/brands?state=NV").json()
    sql("UPDATE dispensaries SET menu_empty_since = now() WHERE id = ANY(%s)", (nv,))
    refresh(db)
    during = http("GET", f"{api.base}/api/brands/{brand_id}").json()
    assert "NV" not in {s["state"] for s in during["states"]}
    assert sum(c["stores"] for c in during["categories"]) < sum(c["stores"] for c in before["categories"])
    assert http("GET", f"{api.base}/api/brands?state=NV").json() == []
    assert all("NV" not in b["stores_by_state"] for b in http("GET", f"{api.base}/api/brands").json())
    sql("UPDATE dispensaries SET menu_empty_since = NULL WHERE id = ANY(%s)", (nv,))
    refresh(db)
    assert http("GET", f"{api.base}/api/brands/{brand_id}").json() == before
