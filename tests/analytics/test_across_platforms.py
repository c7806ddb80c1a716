"""One market across platforms (docs/analytics.md, "Across platforms"): a real crawl of the
sandbox's Dutchie and Jane stores of one state, whose menus sell the same library products under
each platform's spellings, makes one canonical product of the same product and size whatever the
platform, one canonical brand of a brand sold through both, and market figures that count the
stores of both platforms, per platform, with the crawl runs they were made of."""

from __future__ import annotations

import psycopg
import pytest

from cannaspider.identity import brand_key_name, product_name_key, sizes_key
from sandbox.catalog import Catalog, CatalogConfig
from sandbox.jane_api import JaneCatalog
from sandbox.matching import measure_across
from tests.analytics.test_market import MARKET_TABLES, ROLLED_TABLES
from tests.helpers import NO_IMAGES, add_store
from tests.platforms.jane.test_crawl import add_jane_store, jane


@pytest.mark.parametrize(
    "a, b",
    [
        ("Mohave Cannabis Co.", "MOHAVE CANNABIS COMPANY"),
        ("Dr. Zodiak's", "dr zodiaks co"),
        ("Tru Infusion, LLC", "Tru Infusion"),
        ("Bud & Bros Inc.", "bud and bros"),
    ],
)
def test_the_spellings_of_a_brand_across_platforms_are_one_key(a, b):
    assert brand_key_name(a) == brand_key_name(b) is not None


def test_a_brand_that_is_only_a_suffix_keeps_it():
    assert brand_key_name("Co.") == "co"
    assert brand_key_name("Company") == "company"


@pytest.mark.parametrize(
    "name",
    ["Blue Dream", "Blue Dream 3.5g", "Blue Dream (1/8 oz)", "Blue Dream - Eighth", "Halo Co. - Blue Dream"],
)
def test_a_products_name_with_its_brand_or_own_size_is_one_key(name):
    assert product_name_key(name, "halo", (1.0, 3.5)) == "blue dream"


def test_a_size_the_product_is_not_sold_in_stays_in_its_name():
    # a 7 g "Blue Dream 3.5g" is not the 3.5 g one: the name's size tells them apart
    assert product_name_key("Blue Dream 3.5g", "halo", (7.0,)) == "blue dream 3 5g"
    assert product_name_key("Blue Punch Lotion .5g", None, (0.5,)) == "blue punch lotion"
    assert product_name_key("Camino Gummies 100mg", None, ()) == "camino gummies 100mg"


def test_sizes_match_in_grams_only():
    # Jane's 'eighth ounce' is 3.5 g as Dutchie's '1/8oz' is; a count or a content is no size to match on
    assert sizes_key({("g", 3.5), ("g", 7.0)}) == "3.5g,7g"
    assert sizes_key({("each", 1.0)}) == sizes_key({("mg", 100.0)}) == ""


CONFIG = CatalogConfig()  # the sandbox fixture's


@pytest.fixture
def both_platforms(crawl, db, sandbox, sql):
    """Two Dutchie and two Jane stores of AZ, crawled once (the sandbox's own catalog)."""
    sql(f"TRUNCATE {ROLLED_TABLES}, {MARKET_TABLES}")
    dutchie = [add_store(db, s) for s in sandbox.stores("AZ")[:2]]
    janes = [add_jane_store(db, doc) for doc in jane(sandbox, "GET", "stores?state=AZ")[:2]]
    # (no images: the stores' products and their links are the point, their ~800 images most of the crawl)
    result = crawl("product_resync", "-s", "FEEDS={}", *NO_IMAGES, dispensary_id=",".join(map(str, dutchie + janes)))
    assert result.returncode == 0, result.stderr[-3000:]
    assert sql("SELECT count(*) FROM crawl_runs WHERE status = 'complete'") == [(4,)]
    return {"dutchie": dutchie, "jane": janes}


@pytest.mark.integration
def test_the_same_product_through_jane_and_dutchie_is_one_canonical_product(both_platforms, db, sql, capsys):
    # canonical products with stores of both platforms
    across = sql(
        "SELECT sp.canonical_product_id FROM store_products sp JOIN dispensaries d ON d.id = sp.dispensary_id "
        "GROUP BY 1 HAVING count(DISTINCT d.platform) = 2"
    )
    assert len(across) >= 3
    # ... whose brand is one canonical brand, sold through both
    brands = sql(
        "SELECT sp.canonical_brand_id, count(DISTINCT d.platform) FROM store_products sp "
        "JOIN dispensaries d ON d.id = sp.dispensary_id GROUP BY 1 HAVING count(DISTINCT d.platform) = 2"
    )
    assert len(brands) >= 10
    # against the catalogs' truth: the pairs of a Dutchie store's product and a Jane store's
    with psycopg.connect(db) as conn:
        brand_q, product_q = measure_across(conn, Catalog(CONFIG), JaneCatalog(CONFIG))
    with capsys.disabled():
        print("\nacross platforms (AZ, 2 Dutchie + 2 Jane stores, one crawl):")
        print("  " + brand_q.line("brands"))
        print("  " + product_q.line("products"))
    assert product_q.pairs_true >= 3  # the stores do share products
    assert brand_q.precision == 1.0 and product_q.precision == 1.0
    assert brand_q.recall >= 0.9 and product_q.recall >= 0.7  # store noise ('NEW & Improved') splits some
