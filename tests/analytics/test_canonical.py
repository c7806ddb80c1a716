"""One brand, one product across stores: a real crawl of the sandbox's stores, the links the
product writer made, their precision against the catalog's truth, and `scrapy brands`."""

from __future__ import annotations

import psycopg
import pytest

from sandbox.catalog import Catalog, CatalogConfig
from sandbox.matching import measure
from tests.helpers import NO_IMAGES, add_store, run_scrapy

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)


def crawl_state(crawl, db, sandbox, state: str) -> list[int]:
    ids = [add_store(db, s) for s in sandbox.stores(state)]
    # (no images: the links and their precision are the point, the state's ~1,100 images a minute's work)
    result = crawl("product_resync", "-s", "FEEDS={}", *NO_IMAGES, dispensary_id=",".join(map(str, ids)))
    assert result.returncode == 0, result.stderr[-3000:]
    return ids


def qualities(db):
    with psycopg.connect(db) as conn:
        return measure(conn, Catalog(CatalogConfig()))


def test_one_brand_one_product_across_stores_and_its_precision(crawl, db, sandbox, scrapy_env, sql, capsys):
    crawl_state(crawl, db, sandbox, "AZ")
    assert sql("SELECT count(*) FROM store_products WHERE canonical_product_id IS NULL") == [(0,)]
    assert sql("SELECT count(*) FROM store_products WHERE canonical_brand_id IS NULL") == [(0,)]
    # the same product sold by several stores is one canonical product
    shared = sql(
        "SELECT count(*) FROM (SELECT canonical_product_id FROM store_products GROUP BY 1 "
        "HAVING count(DISTINCT dispensary_id) > 1) s"
    )[0][0]
    assert shared > 100
    # one brand per brandId whatever its spelling, names without brandId joining it: the 20 brands,
    # and the two spellings normalization cannot resolve (Item Nine Labs, Mohave)
    assert sql("SELECT count(*) FROM brands WHERE canonical_brand_id IS NULL") == [(22,)]

    brands, products = qualities(db)
    with capsys.disabled():
        print("\nmatching on the sandbox catalog (AZ, 6 stores, one crawl):")
        print("  " + brands.line("brands"))
        print("  " + products.line("products"))
    assert brands.precision == 1.0  # never two brands as one
    assert products.precision >= 0.99
    assert products.recall >= 0.80  # a store's own name noise ("<b>NEW</b> & Improved") splits some
    assert brands.recall < 1.0  # the two spellings only an alias resolves

    # the operator's aliases: both spellings join their brand, with their products
    for name, target in (("Item Nine Labs", "Item 9 Labs"), ("Mohave", "Mohave Cannabis Co.")):
        result = run_scrapy("brands", "alias", name, target, env=scrapy_env)
        assert result.returncode == 0, result.stderr
        assert "is brand" in result.stdout
    assert sql("SELECT count(*) FROM brands WHERE canonical_brand_id IS NULL") == [(20,)]
    brands_after, products_after = qualities(db)
    assert brands_after.precision == 1.0 and brands_after.recall == 1.0
    assert products_after.precision >= 0.99 and products_after.recall >= products.recall
    listing = run_scrapy("brands", "list", env=scrapy_env)
    assert listing.returncode == 0, listing.stderr
    assert "Item 9 Labs" in listing.stdout and "item nine labs" in listing.stdout

    # stores crawled after the alias: their spellings join the brand as they are written
    nv = crawl_state(crawl, db, sandbox, "NV")
    aliased = sql(
        "SELECT count(*), count(DISTINCT sp.canonical_brand_id) FROM store_products sp "
        "JOIN brands b ON b.id = sp.brand_ref_id "
        "WHERE b.normalized_name IN ('item nine labs', 'mohave') AND sp.dispensary_id = ANY(%s)",
        (nv,),
    )
    assert aliased[0][0] > 0 and aliased[0][1] == 2
    brands_all, products_all = qualities(db)
    with capsys.disabled():
        print("after `scrapy brands alias` of the two spellings, and a crawl of NV (12 stores):")
        print("  " + brands_all.line("brands"))
        print("  " + products_all.line("products"))
    assert brands_all.precision == 1.0 and brands_all.recall == 1.0
    assert products_all.precision >= 0.99


@pytest.mark.parametrize(
    "args, message",
    [
        (("alias", "Foo", "No Such Brand"), "no brand 'No Such Brand'"),
        (("alias", "!!!", "1"), "no letters or digits"),
        (("rename", "a"), "usage: scrapy brands"),
    ],
)
def test_bad_brand_commands_are_one_error_line(db, scrapy_env, args, message):
    result = run_scrapy("brands", *args, env=scrapy_env)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error:") and message in result.stderr
    assert "Traceback" not in result.stderr
